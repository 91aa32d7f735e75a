-- keras: a Keras Sequential model as Keras' model.to_json() writes it
-- (fixtures in test/fixtures/keras/, written by Keras 3 itself) is taken
-- as the "model" of a configuration.  Every setting is either honoured --
-- the same spec as mop's own form, byte for byte -- or refused naming it.
SET client_min_messages = warning;
\set mlp `cat test/fixtures/keras/digits_mlp.json`
\set lay `cat test/fixtures/keras/digits_layers.json`
\set cnn `cat test/fixtures/keras/bars_cnn.json`
-- the same initial state (spec, weights) as the equivalent native config
SELECT mop.init_model('digits', jsonb_build_object('model', :'mlp'::jsonb, 'seed', 3))
     = mop.init_model('digits', '{"model": {"layers": [{"type": "dense", "units": 8, "activation": "relu"},
                                  {"type": "dropout", "rate": 0.1}, {"type": "dense", "units": 3, "activation": "softmax"}]},
                                  "init": "glorot", "seed": 3}') AS mlp_as_native;
-- GlorotUniform is honoured, not mop's default (He before a ReLU)
SELECT mop.init_model('digits', jsonb_build_object('model', :'mlp'::jsonb, 'seed', 3))
    <> mop.init_model('digits', '{"model": {"layers": [{"type": "dense", "units": 8, "activation": "relu"},
                                  {"type": "dropout", "rate": 0.1}, {"type": "dense", "units": 3, "activation": "softmax"}]},
                                  "seed": 3}') AS initializer_honoured;
-- He before ReLU-like activations and Glorot elsewhere, one L2 (Keras 0.005 = mop 0.01),
-- ReLU, LeakyReLU, Activation and Softmax layers, a dense layer without bias
SELECT mop.init_model('digits', jsonb_build_object('model', :'lay'::jsonb, 'seed', 3))
     = mop.init_model('digits', '{"model": {"layers": [
          {"type": "dense", "units": 8}, {"type": "activation", "activation": "relu"},
          {"type": "dense", "units": 8, "use_bias": false}, {"type": "activation", "activation": "leaky_relu", "alpha": 0.1},
          {"type": "dense", "units": 6}, {"type": "activation", "activation": "tanh"},
          {"type": "dense", "units": 3}, {"type": "activation", "activation": "softmax"}]},
          "init": "auto", "l2": 0.01, "seed": 3}') AS layers_as_native;
SELECT mop.init_model('bars', jsonb_build_object('model', :'cnn'::jsonb, 'seed', 3))
     = mop.init_model('bars', '{"model": {"layers": [
          {"type": "conv2d", "filters": 4, "kernel_size": 3, "strides": 1, "padding": "same", "activation": "relu"},
          {"type": "maxpool2d", "pool_size": 2, "strides": 2}, {"type": "flatten"},
          {"type": "dense", "units": 2}, {"type": "activation", "activation": "softmax"}]},
          "init": "glorot", "seed": 3}') AS cnn_as_native;
-- and it trains
SELECT mop_train('bars', jsonb_build_object('model', :'cnn'::jsonb, 'seed', 1, 'learning_rate', 0.01), 2) > 0 AS cnn_trained;
-- what mop cannot honour is refused, naming the key
\set bad `cat test/fixtures/keras/bad_dilation.json`
SELECT err(format($$SELECT mop.init_model('bars', %L::jsonb)$$, jsonb_build_object('model', :'bad'::jsonb)));
\set bad `cat test/fixtures/keras/bad_initializer.json`
SELECT err(format($$SELECT mop.init_model('digits', %L::jsonb)$$, jsonb_build_object('model', :'bad'::jsonb)));
\set bad `cat test/fixtures/keras/bad_trainable.json`
SELECT err(format($$SELECT mop.init_model('digits', %L::jsonb)$$, jsonb_build_object('model', :'bad'::jsonb)));
\set bad `cat test/fixtures/keras/bad_l1.json`
SELECT err(format($$SELECT mop.init_model('digits', %L::jsonb)$$, jsonb_build_object('model', :'bad'::jsonb)));
\set bad `cat test/fixtures/keras/bad_dtype.json`
SELECT err(format($$SELECT mop.init_model('digits', %L::jsonb)$$, jsonb_build_object('model', :'bad'::jsonb)));
\set bad `cat test/fixtures/keras/bad_layer.json`
SELECT err(format($$SELECT mop.init_model('digits', %L::jsonb)$$, jsonb_build_object('model', :'bad'::jsonb)));
\set bad `cat test/fixtures/keras/bad_shape.json`
SELECT err(format($$SELECT mop.init_model('digits', %L::jsonb)$$, jsonb_build_object('model', :'bad'::jsonb)));
\set bad `cat test/fixtures/keras/bad_dense_on_image.json`
SELECT err(format($$SELECT mop.init_model('bars', %L::jsonb)$$, jsonb_build_object('model', :'bad'::jsonb)));
-- a Keras L2 and a different "l2" beside it; a functional model
SELECT err(format($$SELECT mop.init_model('digits', %L::jsonb)$$, jsonb_build_object('model', :'lay'::jsonb, 'l2', 0.5)));
SELECT err(format($$SELECT mop.init_model('digits', %L::jsonb)$$,
       jsonb_build_object('model', jsonb_set(:'mlp'::jsonb, '{class_name}', '"Functional"'))));
-- an initializer with a seed of its own
SELECT err(format($$SELECT mop.init_model('digits', %L::jsonb)$$,
       jsonb_build_object('model', jsonb_set(:'mlp'::jsonb, '{config,layers,1,config,kernel_initializer,config,seed}', '42'))));
-- Keras 2's form: dtype as a name, initializers without module, the input
-- shape in the first layer's config
SELECT mop.init_model('digits', '{"seed": 3, "model": {"class_name": "Sequential", "keras_version": "2.15.0", "backend": "tensorflow",
  "config": {"name": "sequential", "layers": [
    {"class_name": "Dense", "config": {"name": "dense", "trainable": true, "dtype": "float32", "batch_input_shape": [null, 2],
      "units": 8, "activation": "relu", "use_bias": true,
      "kernel_initializer": {"class_name": "GlorotUniform", "config": {"seed": null}},
      "bias_initializer": {"class_name": "Zeros", "config": {}},
      "kernel_regularizer": null, "bias_regularizer": null, "activity_regularizer": null,
      "kernel_constraint": null, "bias_constraint": null}},
    {"class_name": "Dense", "config": {"name": "dense_1", "trainable": true, "dtype": "float32", "units": 3, "activation": "softmax",
      "use_bias": true, "kernel_initializer": {"class_name": "GlorotUniform", "config": {"seed": null}},
      "bias_initializer": {"class_name": "Zeros", "config": {}}, "kernel_regularizer": null, "bias_regularizer": null,
      "activity_regularizer": null, "kernel_constraint": null, "bias_constraint": null}}]}}}')
     = mop.init_model('digits', '{"model": {"layers": [{"type": "dense", "units": 8, "activation": "relu"},
                                  {"type": "dense", "units": 3, "activation": "softmax"}]}, "init": "glorot", "seed": 3}') AS keras2_as_native;
