-- class_weight: "class_weight" in a configuration weighs the training loss
-- by class: "balanced" (rows / (classes * rows of the class), over the
-- training split) or an object of label -> weight.  The weights are part of
-- the model's state, so a model continued from its checkpoint trains as the
-- uninterrupted one; accuracy stays unweighted.  On an imbalanced table (5%
-- of rows in the rare class, features that separate it only partially) the
-- rare class's recall is higher with "balanced" than without.  Bad values
-- are 22023 naming the key's path, with a hint.
-- (uses prepare.sql's blobs, blobs_raw, flags and house; its other tables
-- are its own)
SET client_min_messages = warning;
-- err() (install.sql) with the hint
CREATE FUNCTION cw_err(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  msg text;
  hint text;
BEGIN
  EXECUTE q;
  RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT, hint = PG_EXCEPTION_HINT;
  RETURN SQLSTATE || ': ' || msg || coalesce(E'\nHINT: ' || nullif(hint, ''), '');
END $$;
CREATE TABLE cw_cfg AS
SELECT '{"model": {"layers": [{"type": "dense", "units": 3}]}, "seed": 1}'::jsonb AS three,
       '{"model": {"layers": [{"type": "dense", "units": 1}]}, "seed": 1}'::jsonb AS one;

-- every error form
SELECT cw_err($$SELECT mop.init_model('blobs', (SELECT three FROM cw_cfg) || '{"class_weight": {"cat": 2}}')$$) AS unknown_label;
SELECT cw_err($$SELECT mop.init_model('flags', (SELECT one FROM cw_cfg) || '{"class_weight": {"1": 2}}')$$) AS unknown_binary_label;
SELECT cw_err($$SELECT mop.init_model('blobs', (SELECT three FROM cw_cfg) || '{"class_weight": {"setosa": 0}}')$$) AS zero;
SELECT cw_err($$SELECT mop.init_model('blobs', (SELECT three FROM cw_cfg) || '{"class_weight": {"setosa": -1.5}}')$$) AS negative;
SELECT cw_err($$SELECT mop.init_model('blobs', (SELECT three FROM cw_cfg) || '{"class_weight": {"setosa": 1e999}}')$$) AS not_finite;
SELECT cw_err($$SELECT mop.init_model('blobs', (SELECT three FROM cw_cfg) || '{"class_weight": {"setosa": 1e39}}')$$) AS beyond_float;
SELECT cw_err($$SELECT mop.init_model('blobs', (SELECT three FROM cw_cfg) || '{"class_weight": {"setosa": 1e-999}}')$$) AS underflows_to_zero;
SELECT cw_err($$SELECT mop.init_model('blobs', (SELECT three FROM cw_cfg) || '{"class_weight": {"setosa": "2"}}')$$) AS not_a_number;
SELECT cw_err($$SELECT mop.init_model('blobs', (SELECT three FROM cw_cfg) || '{"class_weight": {"setosa": null}}')$$) AS null_weight;
SELECT cw_err($$SELECT mop.init_model('blobs', (SELECT three FROM cw_cfg) || '{"class_weight": "auto"}')$$) AS unknown_string;
SELECT cw_err($$SELECT mop.init_model('blobs', (SELECT three FROM cw_cfg) || '{"class_weight": [1, 2, 3]}')$$) AS a_list;
SELECT cw_err($$SELECT mop.init_model('blobs', (SELECT three FROM cw_cfg) || '{"class_weight": 2}')$$) AS a_number;
SELECT cw_err($$SELECT mop.init_model('house', (SELECT one FROM cw_cfg) || '{"class_weight": "balanced"}')$$) AS regression;
SELECT cw_err($$SELECT mop.init_model('house', (SELECT one FROM cw_cfg) || '{"class_weight": {"1": 2}}')$$) AS regression_object;
-- found before anything trains: mop_train and a search refuse the configuration
SELECT cw_err($$SELECT mop_train('blobs', (SELECT three FROM cw_cfg) || '{"class_weight": {"setosa": -1}}', 1)$$) AS train_refuses;
SELECT cw_err($$SELECT * FROM mop_grid_search('blobs', (SELECT three FROM cw_cfg) || '{"class_weight": [null, {"cat": 2}]}', epochs => 1)$$) AS grid_refuses;

-- no weights: null, an empty object, weights of 1, and "balanced" over a
-- training split whose classes are equally frequent (blobs_raw: 100 rows
-- each) all give the same first state as no "class_weight"
SELECT mop.init_model('blobs', three) = mop.init_model('blobs', three || '{"class_weight": null}') AS null_is_none,
       mop.init_model('blobs', three) = mop.init_model('blobs', three || '{"class_weight": {}}') AS empty_is_none,
       mop.init_model('blobs', three) = mop.init_model('blobs', three || '{"class_weight": {"setosa": 1, "virginica": 1.0}}') AS ones_are_none,
       mop.init_model('blobs_raw', three) = mop.init_model('blobs_raw', three || '{"class_weight": "balanced"}') AS balanced_split_is_none
  FROM cw_cfg;
-- weights are part of the state: one float per class
SELECT length(mop.init_model('blobs', three || '{"class_weight": {"versicolor": 2}}')) - length(mop.init_model('blobs', three)) AS bytes_three,
       length(mop.init_model('flags', one || '{"class_weight": {"true": 2}}')) - length(mop.init_model('flags', one)) AS bytes_binary,
       mop.init_model('blobs', three || '{"class_weight": {"versicolor": 2}}')
         = mop.init_model('blobs', three || '{"class_weight": {"versicolor": 2, "setosa": 1}}') AS left_out_weighs_1
  FROM cw_cfg;

-- an imbalanced two-class table: 5% rare rows, a feature that moves the
-- rare class by about one standard deviation of its noise (separating it
-- only partially), another that is noise; and a holdout drawn alike
SELECT setseed(0.25);
CREATE TABLE cw_imb AS
SELECT i AS id, i % 20 = 0 AS rare,
       (i % 20 = 0)::int * 1.2 + (random() + random() + random() - 1.5) AS a,
       random() + random() + random() - 1.5 AS b
  FROM generate_series(1, 2000) i;
CREATE TABLE cw_imb_h AS
SELECT i AS id, i % 20 = 0 AS rare,
       (i % 20 = 0)::int * 1.2 + (random() + random() + random() - 1.5) AS a,
       random() + random() + random() - 1.5 AS b
  FROM generate_series(1, 2000) i;
SELECT count(*) AS prepared FROM mop_prepare('cw_imb', 'rare', ARRAY['a', 'b'], partitions => 2, seed => 1);
SELECT target_kind, labels, train_rows FROM mop.datasets WHERE name = 'cw_imb';
-- "balanced" is scikit-learn's n / (classes * n_c) over the training
-- split: the same first state as those weights given explicitly, with the
-- classes counted here from the float32 labels of the training buffers
-- (0.0 and 1.0)
CREATE TABLE cw_counts AS
SELECT count(*) FILTER (WHERE l = '\x00000000'::bytea) AS n0,
       count(*) FILTER (WHERE l = '\x0000803f'::bytea) AS n1
  FROM mop.buffers b, LATERAL generate_series(0, b.rows - 1) r,
       LATERAL substring(b.y FROM r * 4 + 1 FOR 4) l
 WHERE b.dataset_id = (SELECT id FROM mop.datasets WHERE name = 'cw_imb') AND b.split = 'train';
SELECT n0 + n1 AS train_rows, n1 AS rare_rows FROM cw_counts;
SELECT mop.init_model('cw_imb', '{"model": {"layers": [{"type": "dense", "units": 1}]}, "class_weight": "balanced"}')
     = mop.init_model('cw_imb', jsonb_build_object('model', '{"layers": [{"type": "dense", "units": 1}]}'::jsonb,
                                                   'class_weight', jsonb_build_object('false', (n0 + n1) / (2.0::float8 * n0),
                                                                                      'true', (n0 + n1) / (2.0::float8 * n1))))
       AS balanced_is_sklearns
  FROM cw_counts;
CREATE TABLE cw_imb_cfg AS
SELECT '{"model": {"layers": [{"type": "dense", "units": 8, "activation": "tanh"}, {"type": "dense", "units": 1}]},
         "optimizer": "adam", "learning_rate": 0.01, "batch_size": 32, "seed": 5}'::jsonb AS base;
CREATE TABLE cw_models AS
SELECT 'plain' AS name, mop_train('cw_imb', base, 4) AS m FROM cw_imb_cfg
UNION ALL
SELECT 'balanced', mop_train('cw_imb', base || '{"class_weight": "balanced"}', 4) FROM cw_imb_cfg
UNION ALL
SELECT 'balanced_2', mop_train('cw_imb', base || '{"class_weight": "balanced"}', 2) FROM cw_imb_cfg;
-- the stored configuration keeps "balanced" as written
SELECT m.config->'class_weight' AS stored FROM cw_models s JOIN mop.models m ON m.id = s.m WHERE s.name = 'balanced';
-- recall of the rare class and accuracy on the holdout, from the confusion matrix
CREATE TABLE cw_scores AS
SELECT s.name, s.m,
       sum(c.rows) FILTER (WHERE c.actual = 'true' AND c.predicted = 'true')::float8
         / sum(c.rows) FILTER (WHERE c.actual = 'true') AS recall,
       sum(c.rows) FILTER (WHERE c.actual = c.predicted)::float8 / sum(c.rows) AS accuracy
  FROM cw_models s, LATERAL mop_confusion_matrix(s.m, 'cw_imb_h', 'last') c
 GROUP BY s.name, s.m;
SELECT (SELECT recall FROM cw_scores WHERE name = 'balanced') > (SELECT recall FROM cw_scores WHERE name = 'plain') AS recall_balanced_higher;
-- accuracy stays unweighted: mop_evaluate's metric is the confusion
-- matrix's diagonal over all rows
SELECT abs((SELECT metric FROM mop_evaluate(s.m, 'cw_imb_h', 'last')) - s.accuracy) < 1e-12 AS accuracy_unweighted
  FROM cw_scores s WHERE s.name = 'balanced';
-- the training loss is the weighted one: not the plain model's, from the
-- same first state
SELECT e.train_loss <> p.train_loss AS weighted_train_loss
  FROM cw_models s JOIN mop.epochs e ON e.model_id = s.m AND e.epoch = 1
  JOIN mop.epochs p ON p.epoch = 1 AND p.model_id = (SELECT m FROM cw_models WHERE name = 'plain')
 WHERE s.name = 'balanced';

-- the weights travel in the checkpoint: the 2-epoch model, continued
-- through the narrow waist for epochs 3 and 4 (partitions 0 and 1 in turn,
-- as mop_train does), ends as the 4-epoch model did
CREATE TABLE cw_cont (step int, state bytea);
INSERT INTO cw_cont SELECT 0, state FROM mop.models WHERE id = (SELECT m FROM cw_models WHERE name = 'balanced_2');
CREATE FUNCTION cw_next(p int, st int) RETURNS void LANGUAGE sql AS $$
  INSERT INTO cw_cont
  SELECT st, (r).state FROM (
    SELECT mop.train_agg((SELECT state FROM cw_cont WHERE step = st - 1), b.x, b.y) AS r
      FROM (SELECT x, y FROM mop.buffers
             WHERE dataset_id = (SELECT id FROM mop.datasets WHERE name = 'cw_imb')
               AND split = 'train' AND partition = p ORDER BY buffer_no) b) s $$;
SELECT cw_next(0, 1), cw_next(1, 2), cw_next(0, 3), cw_next(1, 4);
SELECT mop.eval_agg((SELECT state FROM cw_cont WHERE step = 4), b.x, b.y)
     = mop.eval_agg((SELECT state FROM mop.models WHERE id = (SELECT m FROM cw_models WHERE name = 'balanced')), b.x, b.y)
       AS resumed_equals_uninterrupted
  FROM mop.buffers b WHERE b.dataset_id = (SELECT id FROM mop.datasets WHERE name = 'cw_imb') AND b.split = 'valid';

-- in a search space an object of label -> weight is one value; a list
-- gives candidates
SELECT count(*) AS one_config
  FROM mop_explain('cw_imb', (SELECT base FROM cw_imb_cfg) || '{"class_weight": {"true": 19}}', epochs => 1);
SELECT config_no, config->'class_weight' AS class_weight
  FROM mop_explain('cw_imb', (SELECT base FROM cw_imb_cfg) || '{"class_weight": [null, "balanced", {"true": 19}]}', epochs => 1)
 ORDER BY config_no;
-- a grid whose models hop between two workers: the balanced model finds
-- more of the rare class here too
CREATE TABLE cw_grid AS
SELECT * FROM mop_grid_search('cw_imb', (SELECT base FROM cw_imb_cfg) || '{"class_weight": [null, "balanced"]}',
                              epochs => 2, workers => 2, seed => 3, deterministic => true);
SELECT count(*) AS models, count(*) FILTER (WHERE m.status = 'done') AS done,
       (SELECT count(DISTINCT h.worker) FROM mop.hops h JOIN mop.models hm ON hm.id = h.model_id
         WHERE h.run_id = min(g.run_id) AND hm.config->>'class_weight' = 'balanced') = 2 AS balanced_hopped
  FROM cw_grid g JOIN mop.models m ON m.id = g.model_id;
SELECT (SELECT sum(c.rows) FILTER (WHERE c.actual = 'true' AND c.predicted = 'true')
          FROM cw_grid g JOIN mop.models m ON m.id = g.model_id, LATERAL mop_confusion_matrix(g.model_id, 'cw_imb_h', 'last') c
         WHERE m.config->>'class_weight' = 'balanced')
     > (SELECT sum(c.rows) FILTER (WHERE c.actual = 'true' AND c.predicted = 'true')
          FROM cw_grid g JOIN mop.models m ON m.id = g.model_id, LATERAL mop_confusion_matrix(g.model_id, 'cw_imb_h', 'last') c
         WHERE NOT m.config ? 'class_weight' OR m.config->'class_weight' = 'null') AS grid_recall_balanced_higher;
