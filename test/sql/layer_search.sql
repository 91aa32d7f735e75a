-- layer_search: searching inside an architecture -- a layer's fields as
-- alternatives or distributions, and repeated blocks of layers
-- (err(q) is defined in install.sql; the datasets in prepare.sql)
SET client_min_messages = warning;

-- a grid over units x activation of the first layer: the cross product,
-- the last field varying fastest; every stored configuration is concrete
CREATE TEMP TABLE g1 AS
SELECT * FROM mop_grid_search('blobs',
  '{"model": [{"type": "dense", "units": [4, 8], "activation": ["relu", "tanh"]},
              {"type": "dense", "units": 3}],
    "learning_rate": 0.01, "seed": 1}',
  epochs => 1, workers => 1, seed => 1);
SELECT run_id AS g1 FROM g1 LIMIT 1 \gset
SELECT count(*) AS models, bool_and(status = 'done') AS all_done FROM g1;
SELECT config->'model' AS model FROM mop.models WHERE run_id = :g1 ORDER BY id;

-- with other keys and a list of architectures: each architecture's own
-- alternatives in its place (2 + 1), times the learning rates
CREATE TEMP TABLE g2 AS
SELECT * FROM mop_grid_search('blobs',
  '{"model": [{"layers": [{"type": "dense", "units": [4, 8], "activation": "relu"}, {"type": "dense", "units": 3}]},
              {"layers": [{"type": "dense", "units": 3}], "name": "linear"}],
    "learning_rate": [0.01, 0.003], "seed": 1}',
  epochs => 1, workers => 1, seed => 1);
SELECT run_id AS g2 FROM g2 LIMIT 1 \gset
SELECT config->'learning_rate' AS lr, config->'model' AS model
  FROM mop.models WHERE run_id = :g2 ORDER BY id;

-- a repeated block: the depth searched; its fields take one value for all
-- its copies (2 depths x 2 widths), a plain count is fixed
CREATE TEMP TABLE g3 AS
SELECT * FROM mop_grid_search('blobs',
  '{"model": [{"type": "dense", "units": 6, "activation": "relu"},
              {"repeat": [1, 3], "layers": [{"type": "dense", "units": [4, 8], "activation": "relu"}]},
              {"repeat": 1, "layers": [{"type": "dense", "units": 3}]}],
    "learning_rate": 0.01, "seed": 1}',
  epochs => 1, workers => 1, seed => 1);
SELECT run_id AS g3 FROM g3 LIMIT 1 \gset
SELECT jsonb_array_length(config->'model') AS depth,
       (SELECT string_agg(l->>'units', ',' ORDER BY o) FROM jsonb_array_elements(config->'model') WITH ORDINALITY e(l, o)) AS units,
       status, epochs_done
  FROM mop.models WHERE run_id = :g3 ORDER BY id;

-- a field whose concrete value is a list stays concrete ([2, 2]); a list of
-- lists or a choice searches it
CREATE TEMP TABLE g4 AS
SELECT * FROM mop_grid_search('bars',
  '{"model": [{"type": "conv2d", "filters": [2, 3], "kernel_size": [[2, 2], [3, 3]], "strides": [1, 1], "activation": "relu"},
              {"type": "maxpool2d", "pool_size": {"choice": [1, 2]}},
              {"type": "flatten"}, {"type": "dense", "units": 2}],
    "batch_size": 8, "seed": 4}',
  epochs => 1, workers => 1, seed => 1);
SELECT run_id AS g4 FROM g4 LIMIT 1 \gset
SELECT count(*) AS models, bool_and(status = 'done') AS all_done FROM g4;
SELECT config->'model'->0->'filters' AS filters, config->'model'->0->'kernel_size' AS kernel,
       config->'model'->0->'strides' AS strides, config->'model'->1->'pool_size' AS pool
  FROM mop.models WHERE run_id = :g4 ORDER BY id;

-- mop_explain expands the same grid, in the same order
SELECT config_no, config->'model' AS model, fits
  FROM mop_explain('blobs', '{"model": [{"type": "dense", "units": [4, 8], "activation": ["relu", "tanh"]},
                                        {"type": "dense", "units": 3}], "learning_rate": 0.01, "seed": 1}',
                   epochs => 1)
 ORDER BY config_no;
-- blocks nest: the inner count is searched, the outer one fixed
SELECT config_no,
       (SELECT string_agg(l->>'units', ',' ORDER BY o) FROM jsonb_array_elements(config->'model') WITH ORDINALITY e(l, o)) AS units
  FROM mop_explain('blobs', '{"model": [{"repeat": 2, "layers": [{"repeat": [1, 2], "layers": [{"type": "dense", "units": 4, "activation": "relu"}]},
                                                                {"type": "dense", "units": 5, "activation": "relu"}]},
                                        {"type": "dense", "units": 3}]}', epochs => 1)
 ORDER BY config_no;

-- random search samples the alternatives and distributions: every stored
-- configuration is concrete and within range, and the same seed draws the
-- same configurations
\set rspace '{"model": {"layers": [{"repeat": {"int": [1, 3]}, "layers": [{"type": "dense", "units": {"int": [2, 16]}, "activation": ["relu", "tanh"]}, {"type": "dropout", "rate": {"uniform": [0, 0.5]}}]}, {"type": "dense", "units": 3}]}, "learning_rate": 0.01, "seed": 1}'
SELECT DISTINCT run_id AS r1 FROM mop_random_search('blobs', :'rspace', trials => 6, epochs => 1, workers => 1, seed => 3) \gset
SELECT DISTINCT run_id AS r2 FROM mop_random_search('blobs', :'rspace', trials => 6, epochs => 1, workers => 1, seed => 3) \gset
SELECT DISTINCT run_id AS r3 FROM mop_random_search('blobs', :'rspace', trials => 6, epochs => 1, workers => 1, seed => 4) \gset
CREATE TEMP VIEW rl AS
SELECT m.run_id, m.id, m.status, l.value AS layer, l.ordinality AS pos,
       jsonb_array_length(m.config->'model'->'layers') AS n_layers
  FROM mop.models m, jsonb_array_elements(m.config->'model'->'layers') WITH ORDINALITY l;
SELECT count(DISTINCT id) AS models, bool_and(status = 'done') AS all_done,
       bool_and(n_layers IN (3, 5, 7)) AS depth_in_range,
       bool_and(CASE layer->>'type'
                  WHEN 'dense' THEN jsonb_typeof(layer->'units') = 'number'
                                    AND (pos = n_layers OR ((layer->>'units')::int BETWEEN 2 AND 16
                                                            AND layer->>'activation' IN ('relu', 'tanh')))
                  WHEN 'dropout' THEN jsonb_typeof(layer->'rate') = 'number'
                                      AND (layer->>'rate')::float8 BETWEEN 0 AND 0.5
                END) AS concrete_in_range,
       bool_and(layer->>'type' <> 'dense' OR pos = n_layers OR
                layer = (SELECT l2.value FROM mop.models m2, jsonb_array_elements(m2.config->'model'->'layers') l2
                          WHERE m2.id = rl.id LIMIT 1)) AS copies_alike
  FROM rl WHERE run_id = :r1;
SELECT id - (SELECT min(id) FROM mop.models WHERE run_id = :r1) AS trial, n_layers,
       string_agg(CASE WHEN layer->>'type' = 'dense' THEN layer->>'units' || coalesce(':' || (layer->>'activation'), '') ELSE 'drop' END,
                  ' ' ORDER BY pos) AS layers
  FROM rl WHERE run_id = :r1 GROUP BY id, n_layers ORDER BY id;
SELECT (SELECT array_agg(config ORDER BY id) FROM mop.models WHERE run_id = :r1)
     = (SELECT array_agg(config ORDER BY id) FROM mop.models WHERE run_id = :r2) AS same_seed_same_configs,
       (SELECT array_agg(config ORDER BY id) FROM mop.models WHERE run_id = :r1)
     <> (SELECT array_agg(config ORDER BY id) FROM mop.models WHERE run_id = :r3) AS other_seed_other_configs;

-- Hyperband and ASHA draw their configurations the same way
SELECT count(*) AS models,
       bool_and(jsonb_typeof(config->'model'->0->'units') = 'number'
                AND (config->'model'->0->>'units')::int IN (4, 8)) AS concrete
  FROM mop_asha('blobs', '{"model": [{"type": "dense", "units": [4, 8], "activation": "relu"}, {"type": "dense", "units": 3}], "seed": 1}',
                max_resource => 1, max_trials => 3, workers => 1, seed => 2);

-- TPE: each searched field is a parameter named by its path (a choice for
-- alternatives, a number for a distribution), active with its architecture;
-- its proposals are concrete too, and a deterministic run proposes the same
-- configurations again
\set tspace '{"model": [{"layers": [{"type": "dense", "units": [4, 8], "activation": "relu"}, {"type": "dropout", "rate": {"uniform": [0.1, 0.4]}}, {"type": "dense", "units": 3}]}, {"layers": [{"type": "dense", "units": 3}]}], "learning_rate": 0.01, "seed": 1}'
CREATE TEMP TABLE t1 AS
SELECT * FROM mop_tpe('blobs', :'tspace', trials => 6, epochs => 1, n_startup => 2, workers => 1, seed => 5,
                      deterministic => true);
SELECT run_id AS t1 FROM t1 LIMIT 1 \gset
SELECT count(*) AS trials, bool_and(status = 'done') AS all_done,
       bool_and(CASE jsonb_array_length(config->'model'->'layers')
                  WHEN 1 THEN true
                  WHEN 3 THEN (config->'model'->'layers'->0->>'units')::int IN (4, 8)
                              AND (config->'model'->'layers'->1->>'rate')::float8 BETWEEN 0.1 AND 0.4
                END) AS concrete_in_range
  FROM t1;
SELECT count(*) FILTER (WHERE reason LIKE 'TPE proposal%') >= 1 AS model_based
  FROM mop.decisions WHERE run_id = :t1 AND action = 'new';
SELECT DISTINCT run_id AS t2 FROM mop_tpe('blobs', :'tspace', trials => 6, epochs => 1, n_startup => 2, workers => 1,
                                          seed => 5, deterministic => true) \gset
SELECT (SELECT array_agg(config ORDER BY id) FROM mop.models WHERE run_id = :t1)
     = (SELECT array_agg(config ORDER BY id) FROM mop.models WHERE run_id = :t2) AS tpe_same_configs;

-- errors name the parameter's path in the space
SELECT err($$SELECT * FROM mop_grid_search('blobs', '{"model": [{"type": "dense", "units": {"int": [2, 8]}}, {"type": "dense", "units": 3}]}', epochs => 1)$$);
SELECT err($$SELECT * FROM mop_grid_search('blobs', '{"model": [{"layers": [{"type": "dense", "units": 3}]}, {"layers": [{"type": "dense", "units": 4}, {"type": "dense", "units": 3, "activation": {"choice": ["relu"]}}, {"type": "dropout", "rate": {"uniform": [0, 0.5]}}]}]}', epochs => 1)$$);
SELECT err($$SELECT * FROM mop_grid_search('blobs', '{"model": [{"repeat": {"int": [1, 2]}, "layers": [{"type": "dense", "units": 4}]}, {"type": "dense", "units": 3}]}', epochs => 1)$$);
SELECT err($$SELECT * FROM mop_random_search('blobs', '{"model": [{"type": "dense", "units": {"uniform": [2, 8]}}, {"type": "dense", "units": 3}]}', trials => 2, epochs => 1)$$);
SELECT err($$SELECT * FROM mop_random_search('blobs', '{"model": [{"type": "dense", "units": 4, "activation": {"uniform": [0, 1]}}, {"type": "dense", "units": 3}]}', trials => 2, epochs => 1)$$);
SELECT err($$SELECT * FROM mop_random_search('blobs', '{"model": [{"type": "dense", "units": 4, "use_bias": {"int": [0, 1]}}, {"type": "dense", "units": 3}]}', trials => 2, epochs => 1)$$);
SELECT err($$SELECT * FROM mop_random_search('blobs', '{"model": [{"type": "dense", "units": 4, "rate": {"normal": [0, 1]}}, {"type": "dense", "units": 3}]}', trials => 2, epochs => 1)$$);
SELECT err($$SELECT * FROM mop_random_search('blobs', '{"model": [{"type": "dense", "units": 4, "rate": {"uniform": [0, 1], "when": {"optimizer": "sgd"}}}, {"type": "dense", "units": 3}], "optimizer": ["sgd", "adam"]}', trials => 2, epochs => 1)$$);
SELECT err($$SELECT * FROM mop_grid_search('blobs', '{"model": [{"type": ["dense", "dropout"], "units": 4}, {"type": "dense", "units": 3}]}', epochs => 1)$$);
SELECT err($$SELECT * FROM mop_grid_search('blobs', '{"model": [{"type": "dense", "units": []}, {"type": "dense", "units": 3}]}', epochs => 1)$$);
SELECT err($$SELECT * FROM mop_grid_search('blobs', '{"model": [{"type": "dense", "units": [[4, 8]]}, {"type": "dense", "units": 3}]}', epochs => 1)$$);
SELECT err($$SELECT * FROM mop_grid_search('bars', '{"model": [{"type": "conv2d", "filters": 2, "kernel_size": [2, 3, 4]}, {"type": "flatten"}, {"type": "dense", "units": 2}]}', epochs => 1)$$);
SELECT err($$SELECT * FROM mop_grid_search('blobs', '{"model": {"layers": [{"repeat": 0, "layers": [{"type": "dense", "units": 4}]}, {"type": "dense", "units": 3}]}}', epochs => 1)$$);
SELECT err($$SELECT * FROM mop_grid_search('blobs', '{"model": {"layers": [{"repeat": [1, 2.5], "layers": [{"type": "dense", "units": 4}]}, {"type": "dense", "units": 3}]}}', epochs => 1)$$);
SELECT err($$SELECT * FROM mop_random_search('blobs', '{"model": {"layers": [{"repeat": {"uniform": [1, 3]}, "layers": [{"type": "dense", "units": 4}]}, {"type": "dense", "units": 3}]}}', trials => 2, epochs => 1)$$);
SELECT err($$SELECT * FROM mop_random_search('blobs', '{"model": {"layers": [{"repeat": {"int": [0, 3]}, "layers": [{"type": "dense", "units": 4}]}, {"type": "dense", "units": 3}]}}', trials => 2, epochs => 1)$$);
SELECT err($$SELECT * FROM mop_grid_search('blobs', '{"model": {"layers": [{"repeat": 2, "units": 4, "layers": [{"type": "dense", "units": 4}]}, {"type": "dense", "units": 3}]}}', epochs => 1)$$);
SELECT err($$SELECT * FROM mop_grid_search('blobs', '{"model": {"layers": [{"repeat": 2}, {"type": "dense", "units": 3}]}}', epochs => 1)$$);
SELECT err($$SELECT * FROM mop_grid_search('blobs', '{"model": [{"repeat": 2, "layers": [{"repeat": [1, 2], "layers": [{"type": "dense", "units": {"uniform": [1, 2]}}]}]}, {"type": "dense", "units": 3}]}', epochs => 1)$$);
-- a searched layer's values are checked in each concrete configuration
SELECT err($$SELECT * FROM mop_grid_search('blobs', '{"model": [{"type": "dense", "units": [4, 0]}, {"type": "dense", "units": 3}]}', epochs => 1)$$);
SELECT err($$SELECT * FROM mop_grid_search('blobs', '{"model": [{"repeat": [1, 64], "layers": [{"type": "dense", "units": 4}]}, {"type": "dense", "units": 3}]}', epochs => 1)$$);
-- a grid too large is refused before it is expanded, counting each
-- architecture's own alternatives
SELECT err(format($$SELECT * FROM mop_explain('blobs', '{"model": [{"type": "dense", "units": %s, "activation": ["relu", "tanh"]}, {"type": "dense", "units": %s}]}')$$,
                  (SELECT jsonb_agg(i) FROM generate_series(1, 400) i), (SELECT jsonb_agg(i) FROM generate_series(1, 200) i)));
-- PBT copies weights between members: a layer's fields are not searched
SELECT err($$SELECT * FROM mop_pbt('blobs', '{"model": [{"type": "dense", "units": 4}, {"type": "dropout", "rate": [0.1, 0.2]}, {"type": "dense", "units": 3}], "learning_rate": {"loguniform": [0.001, 0.1]}}', population => 2, epochs => 2)$$);
-- a repeated block of a fixed count is one architecture, which PBT takes
SELECT count(*) AS members, bool_and(jsonb_array_length(config->'model') = 3) AS repeated
  FROM mop_pbt('blobs', '{"model": [{"repeat": 2, "layers": [{"type": "dense", "units": 4, "activation": "relu"}]}, {"type": "dense", "units": 3}], "learning_rate": {"loguniform": [0.001, 0.1]}, "seed": 1}',
               population => 2, epochs => 1, "interval" => 1, workers => 1, seed => 1);
