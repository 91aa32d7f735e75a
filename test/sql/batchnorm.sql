-- batchnorm: a {"type": "batchnorm"} layer after a dense or conv2d layer
-- normalises each feature (channel) over the minibatch as PyTorch's
-- BatchNorm1d / BatchNorm2d; its running statistics are part of the model's
-- state (they change the state's bytes, hop with the model between workers,
-- are exported as Keras' moving mean and variance) and predictions use
-- them.  Bad specifications are 22023 naming the JSON path.
-- (uses prepare.sql's blobs and bars)
SET client_min_messages = warning;
CREATE TABLE bn_cfg AS
SELECT '{"model": {"layers": [{"type": "dense", "units": 8, "use_bias": false}, {"type": "batchnorm"},
          {"type": "activation", "activation": "relu"}, {"type": "dense", "units": 3}]}, "seed": 1}'::jsonb AS dense,
       '{"model": {"layers": [{"type": "conv2d", "filters": 4, "kernel_size": 3, "padding": "same"},
          {"type": "batchnorm", "momentum": 0.2, "eps": 1e-3}, {"type": "activation", "activation": "relu"},
          {"type": "flatten"}, {"type": "dense", "units": 2}]}, "seed": 1}'::jsonb AS conv;

-- errors, with the JSON path
SELECT err($$SELECT mop.init_model('blobs', '{"model": {"layers": [{"type": "batchnorm"}, {"type": "dense", "units": 3}]}}')$$) AS first_layer;
SELECT err($$SELECT mop.init_model('blobs', '{"model": [{"type": "dense", "units": 4}, {"type": "batchnorm", "eps": -1e-5}, {"type": "dense", "units": 3}]}')$$) AS negative_eps;
SELECT err($$SELECT mop.init_model('blobs', '{"model": [{"type": "dense", "units": 4}, {"type": "batchnorm", "eps": 0}, {"type": "dense", "units": 3}]}')$$) AS zero_eps;
SELECT err($$SELECT mop.init_model('blobs', '{"model": [{"type": "dense", "units": 4}, {"type": "batchnorm", "momentum": 1.5}, {"type": "dense", "units": 3}]}')$$) AS momentum_above_1;
SELECT err($$SELECT mop.init_model('blobs', '{"model": [{"type": "dense", "units": 4}, {"type": "batchnorm", "momentum": -0.1}, {"type": "dense", "units": 3}]}')$$) AS momentum_below_0;
SELECT err($$SELECT mop.init_model('blobs', '{"model": [{"type": "dense", "units": 4}, {"type": "batchnorm", "momentum": "fast"}, {"type": "dense", "units": 3}]}')$$) AS momentum_not_a_number;
SELECT err($$SELECT mop.init_model('blobs', '{"model": [{"type": "dense", "units": 4}, {"type": "batchnorm", "rate": 0.5}, {"type": "dense", "units": 3}]}')$$) AS unknown_key;
SELECT err($$SELECT mop.init_model('blobs', '{"model": [{"type": "dense", "units": 4}, {"type": "batch_norm2d"}, {"type": "dense", "units": 3}]}')$$) AS unknown_type;
-- a Keras BatchNormalization over another axis is refused, Keras' momentum is mapped
SELECT err($$SELECT mop.init_model('blobs', '{"model": [{"type": "dense", "units": 4}, {"class_name": "BatchNormalization", "config": {"axis": 0}}, {"type": "dense", "units": 3}]}')$$) AS keras_axis;
SELECT mop.init_model('blobs', '{"model": [{"type": "dense", "units": 4}, {"class_name": "BatchNormalization", "config": {"axis": -1, "momentum": 0.9, "epsilon": 0.001, "center": true, "scale": true}}, {"type": "dense", "units": 3}], "seed": 1}')
     = mop.init_model('blobs', '{"model": [{"type": "dense", "units": 4}, {"type": "batchnorm", "momentum": 0.1, "eps": 0.001}, {"type": "dense", "units": 3}], "seed": 1}') AS keras_momentum_mapped;
-- a grid search refuses it before anything trains
SELECT err($$SELECT * FROM mop_grid_search('blobs', '{"model": [[{"type": "dense", "units": 4}, {"type": "batchnorm", "eps": -1}, {"type": "dense", "units": 3}]]}', epochs => 1)$$) AS grid_refuses;

-- the defaults are PyTorch's (momentum 0.1, eps 1e-5)
SELECT mop.init_model('blobs', dense) = mop.init_model('blobs', jsonb_set(dense, '{model,layers,1}', '{"type": "batchnorm", "momentum": 0.1, "eps": 1e-5}')) AS defaults
  FROM bn_cfg;

-- a grid search over dense and conv models with batchnorm; models hop between two workers
CREATE TABLE bn_grid AS
SELECT * FROM mop_grid_search('blobs', (SELECT dense FROM bn_cfg) || '{"learning_rate": [0.03, 0.1]}',
                              epochs => 10, workers => 2, seed => 3, deterministic => true);
SELECT count(*) AS models, count(*) FILTER (WHERE m.status = 'done') AS done,
       min(m.best_valid_metric) >= 0.8 AS learned,
       (SELECT count(DISTINCT h.worker) FROM mop.hops h WHERE h.run_id = min(g.run_id)) = 2 AS hopped
  FROM bn_grid g JOIN mop.models m ON m.id = g.model_id;
SELECT min(model_id) AS bn_model FROM bn_grid \gset
SELECT round(best_valid_metric::numeric, 2) AS valid_accuracy FROM mop.models WHERE id = :bn_model;
-- predictions use the running statistics: one row alone is predicted as in a batch
SELECT round(avg((mop_predict(:bn_model, ARRAY[a, b, c]::float8[]) = species)::int), 2) AS accuracy
  FROM blobs;
SELECT mop_predict_proba(:bn_model, ARRAY[1.0, 2.0, 0.5]) = mop_predict_proba(:bn_model, ARRAY[1.0, 2.0, 0.5]) AS stable;
-- exported: a Keras BatchNormalization (Keras' momentum is 1 - mop's) with
-- gamma, beta, moving mean and moving variance; trained running statistics
-- are no longer the initial 0 and 1
SELECT mop_export(:bn_model) AS e \gset
SELECT l->>'class_name' AS class, l->'config'->>'momentum' AS momentum, l->'config'->>'epsilon' AS epsilon
  FROM jsonb_array_elements((:'e'::jsonb)->'model'->'config'->'layers') l
 WHERE l->>'class_name' = 'BatchNormalization';
SELECT w->>'name' AS name, w->'shape' AS shape,
       CASE w->>'name' WHEN 'moving_mean' THEN bool_or((v::float8) <> 0)
                       WHEN 'moving_variance' THEN bool_or((v::float8) <> 1) END AS trained
  FROM jsonb_array_elements((:'e'::jsonb)->'weights') w, jsonb_array_elements_text(w->'values') v
 WHERE w->>'layer' LIKE 'batch_normalization%'
 GROUP BY w->>'name', w->'shape', w->>'layer'
 ORDER BY min(w->>'name');
-- the exported model trains again in mop
SELECT mop_train('blobs', jsonb_build_object('model', mop_export(:bn_model, preprocessing => false)->'model', 'seed', 1), 1) > 0 AS reimported;

-- convolution: per channel over rows and pixels; mop_train continues a model from its state
SELECT mop_train('bars', conv, epochs => 3) AS bars_model FROM bn_cfg \gset
SELECT m.status, round(m.best_valid_metric::numeric, 2) AS valid_accuracy
  FROM mop.models m WHERE m.id = :bars_model;

-- the GPU engine has no batchnorm: refused there (where a GPU is usable; else the device error)
SELECT err($$SELECT mop_train('blobs', (SELECT dense FROM bn_cfg), epochs => 1, device => 'gpu')$$) LIKE '%GPU%' AS gpu_refused;
