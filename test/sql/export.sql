-- export: mop_export gives a trained model as a Keras 3 model and its
-- weights; the weights compute, by hand in SQL, what mop predicts; the
-- export's model is also a configuration mop reads back unchanged.
-- (err(q) is defined in install.sql; the tables are its own)
SET client_min_messages = warning;
CREATE TABLE exp_pts AS
SELECT i AS id, (i % 3)::text AS label, (i % 3) * 2.0 + sin(i) AS a, cos(i * 0.7) * 5 + 10 AS b
  FROM generate_series(1, 300) i;
CREATE TABLE exp_bin AS
SELECT i AS id, (sin(i * 3) > 0) AS up, sin(i * 3) AS a FROM generate_series(1, 200) i;
CREATE TABLE exp_img AS
SELECT i AS id, (i % 2)::text AS label,
       ARRAY(SELECT ((p + i) % 2 + sin(i * p) * 0.1)::real FROM generate_series(0, 15) p) AS px
  FROM generate_series(1, 200) i;
SELECT count(*) > 0 AS prepared FROM mop_prepare('exp_pts', 'label', ARRAY['a', 'b'], partitions => 2, seed => 1);
SELECT count(*) > 0 AS prepared FROM mop_prepare('exp_bin', 'up', ARRAY['a'], partitions => 1, seed => 1);
SELECT count(*) > 0 AS prepared FROM mop_prepare('exp_img', 'label', ARRAY['px'], shape => ARRAY[4, 4, 1], partitions => 1, seed => 1);
SELECT mop_train('exp_pts', '{"model": {"layers": [{"type": "dense", "units": 4, "activation": "relu"}, {"type": "dense", "units": 3}]}, "l2": 0.002, "seed": 1}', 2) AS m \gset
SELECT mop_export(:m) AS e \gset

-- what the export holds
SELECT jsonb_path_query_array(:'e'::jsonb, '$.model.config.layers[*].class_name') AS layers,
       jsonb_path_query_array(:'e'::jsonb, '$.model.config.layers[*].config.name') AS names;
SELECT w->>'layer' AS layer, w->>'name' AS name, w->'shape' AS shape, jsonb_array_length(w->'values') AS n
  FROM jsonb_array_elements(:'e'::jsonb->'weights') w;
SELECT :'e'::jsonb->'features' AS features, :'e'::jsonb->'input_shape' AS input_shape,
       :'e'::jsonb->'labels' AS labels, :'e'::jsonb->>'target_kind' AS target_kind,
       :'e'::jsonb #> '{model,config,layers,2,config,kernel_regularizer,config,l2}' AS keras_l2,
       :'e'::jsonb #>> '{model,config,layers,2,config,kernel_initializer,class_name}' AS init_before_relu,
       :'e'::jsonb #>> '{model,config,layers,3,config,kernel_initializer,class_name}' AS init_at_output;

-- the network by hand from the exported numbers: standardise, dense (inputs,
-- units) row-major + ReLU, dense, softmax; the same as mop_predict_proba
CREATE FUNCTION exp_w(e jsonb, t int, i int) RETURNS float8 LANGUAGE sql AS
  $$ SELECT (e->'weights'->t->'values'->>i)::float8 $$;
CREATE FUNCTION exp_forward(e jsonb, x float8[]) RETURNS float8[] LANGUAGE sql AS $$
  WITH xn AS (SELECT j, (x[j] - (e#>>ARRAY['preprocessing', 'mean', (j - 1)::text])::float8)
                        / (e#>>ARRAY['preprocessing', 'std', (j - 1)::text])::float8 AS v
                FROM generate_series(1, 2) j),
       h AS (SELECT k, greatest(0, sum(xn.v * exp_w(e, 0, (xn.j - 1) * 4 + k - 1)) + exp_w(e, 1, k - 1)) AS v
               FROM xn, generate_series(1, 4) k GROUP BY k),
       o AS (SELECT c, sum(h.v * exp_w(e, 2, (h.k - 1) * 3 + c - 1)) + exp_w(e, 3, c - 1) AS v
               FROM h, generate_series(1, 3) c GROUP BY c)
  SELECT array_agg(exp(v - (SELECT max(v) FROM o)) / (SELECT sum(exp(v - (SELECT max(v) FROM o))) FROM o) ORDER BY c) FROM o
$$;
SELECT count(*) AS rows,
       max((SELECT max(abs(h - m)) FROM unnest(exp_forward(:'e'::jsonb, ARRAY[a, b]), mop_predict_proba(:m, ARRAY[a, b])) u(h, m))) < 1e-6 AS same_as_mop
  FROM exp_pts;

-- without preprocessing, the model is a configuration mop reads: a fixed point
SELECT mop_train('exp_pts', jsonb_build_object('model', mop_export(:m, preprocessing => false)->'model', 'l2', 0.002, 'seed', 1), 1) AS m2 \gset
SELECT mop_export(:m, preprocessing => false)->'model' = mop_export(:m2, preprocessing => false)->'model' AS same_model,
       mop_export(:m, preprocessing => false) #> '{model,config,layers,1,class_name}' AS first_after_input;

-- binary: a sigmoid output; an image: conv2d, pooling, a leaky ReLU layer,
-- a Flatten before a dense layer that reads the image directly
SELECT mop_train('exp_bin', '{"model": {"layers": [{"type": "dense", "units": 3, "activation": "leaky_relu"}, {"type": "dense", "units": 1}]}, "seed": 1}', 1) AS mb \gset
SELECT jsonb_path_query_array(mop_export(:mb), '$.model.config.layers[*].class_name') AS layers,
       jsonb_path_query_array(mop_export(:mb), '$.model.config.layers[*].config.negative_slope') AS slope,
       mop_export(:mb) #>> '{model,config,layers,-1,config,activation}' AS output;
SELECT mop_train('exp_img', '{"model": {"layers": [{"type": "conv2d", "filters": 2, "kernel_size": 3, "padding": "same", "activation": "relu"}, {"type": "maxpool2d", "pool_size": 2}, {"type": "dense", "units": 2}]}, "seed": 1}', 1) AS mi \gset
SELECT jsonb_path_query_array(mop_export(:mi), '$.model.config.layers[*].class_name') AS layers,
       mop_export(:mi) #> '{model,config,layers,0,config,batch_shape}' AS batch_shape,
       mop_export(:mi) #> '{model,config,layers,1,config,axis}' AS norm_axes,
       jsonb_array_length(mop_export(:mi) #> '{model,config,layers,1,config,mean}') AS mean_rows,
       mop_export(:mi) #> '{weights,0,shape}' AS conv_kernel;

-- errors
\set VERBOSITY default
SELECT mop_export(:m, 'onnx');
SELECT mop_export(987654);
UPDATE mop.models SET state = NULL, best_state = NULL WHERE id = :mb;
SELECT replace(err(format('SELECT mop_export(%s)', :mb)), :'mb', 'N') AS no_state;
\set VERBOSITY terse
