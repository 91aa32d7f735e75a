-- metrics: log_loss, precision, recall, f1, auc and r2 as a model's metric,
-- each computed here again in SQL from mop_predict_proba on a holdout table
-- (precision and recall from counts, AUC by counting every pair, R² by its
-- definition) and compared with mop_evaluate (log-loss and R² to 1e-6: mop
-- computes them from float32 probabilities and targets); the confusion
-- matrix agrees.
-- (err(q) is defined in install.sql; the tables are its own)
SET client_min_messages = warning;
CREATE TABLE met_bin AS
SELECT i AS id, ((sin(i * 0.9) + cos(i * 0.4) * 0.5 > 0.2) <> (i % 5 = 0)) AS up,
       sin(i * 0.9) AS a, cos(i * 0.4) AS b
  FROM generate_series(1, 600) i;
CREATE TABLE met_cls AS
SELECT i AS id, ((sin(i * 0.9) > 0)::int + (cos(i * 0.4) > 0.3)::int + (i % 7 = 0)::int) % 3 AS k,
       sin(i * 0.9) AS a, cos(i * 0.4) AS b
  FROM generate_series(1, 600) i;
CREATE TABLE met_reg AS
SELECT i AS id, 2 * sin(i * 0.9) + cos(i * 0.4) + 0.3 * sin(i * 7.1) AS y,
       sin(i * 0.9) AS a, cos(i * 0.4) AS b
  FROM generate_series(1, 600) i;
CREATE TABLE met_bin_h AS SELECT * FROM met_bin WHERE id % 3 = 0;
CREATE TABLE met_cls_h AS SELECT * FROM met_cls WHERE id % 3 = 0;
CREATE TABLE met_reg_h AS SELECT * FROM met_reg WHERE id % 3 = 0;
SELECT count(*) FROM (
  SELECT mop_prepare('met_bin', 'up', ARRAY['a', 'b'], partitions => 2, seed => 1)
  UNION ALL SELECT mop_prepare('met_cls', 'k', ARRAY['a', 'b'], partitions => 2, seed => 1)
  UNION ALL SELECT mop_prepare('met_reg', 'y', ARRAY['a', 'b'], partitions => 2, seed => 1)) p;
CREATE TABLE met_models AS
SELECT ds, metric, mop_train(ds, jsonb_build_object('model', '{"layers": [{"type": "dense", "units": 8, "activation": "tanh"}, {"type": "dense", "units": 1}]}'::jsonb
                                                    || CASE WHEN ds = 'met_cls' THEN '{"layers": [{"type": "dense", "units": 8, "activation": "tanh"}, {"type": "dense", "units": 3}]}'::jsonb ELSE '{}' END,
                                                    'metric', metric, 'learning_rate', 0.01, 'seed', 1), 3) AS m
  FROM (VALUES ('met_bin', 'precision'), ('met_bin', 'recall'), ('met_bin', 'f1'), ('met_bin', 'auc'), ('met_bin', 'log_loss'),
               ('met_cls', 'precision'), ('met_cls', 'recall'), ('met_cls', 'f1'), ('met_cls', 'auc'), ('met_cls', 'log_loss'),
               ('met_reg', 'r2')) v(ds, metric);
-- each model records its metric, with its direction, per epoch
SELECT t.ds, t.metric, m.metric AS recorded, m.higher_is_better,
       (SELECT count(*) FROM mop.epochs e WHERE e.model_id = m.id AND e.valid_metric IS NOT NULL) AS epochs_with_metric
  FROM met_models t JOIN mop.models m ON m.id = t.m ORDER BY t.ds, t.metric;

-- the holdout rows with mop's probabilities: binary (the probability of
-- true), classes (the argmax and each probability), regression (the value)
CREATE TABLE met_pred AS
SELECT t.ds, t.metric, t.m, h.id, (h.up)::int AS actual, p[2] AS score, (p[2] > 0.5)::int AS predicted, NULL::float8[] AS probs
  FROM met_models t, met_bin_h h, LATERAL mop_predict_proba(t.m, ARRAY[h.a, h.b]) p WHERE t.ds = 'met_bin'
UNION ALL
SELECT t.ds, t.metric, t.m, h.id, h.k, NULL,
       (SELECT i - 1 FROM unnest(p) WITH ORDINALITY u(v, i) ORDER BY v DESC, i LIMIT 1), p
  FROM met_models t, met_cls_h h, LATERAL mop_predict_proba(t.m, ARRAY[h.a, h.b]) p WHERE t.ds = 'met_cls';
-- per class (binary: the positive class 1 only) true and false positives
CREATE TABLE met_counts AS
SELECT p.m, c.c, count(*) FILTER (WHERE p.predicted = c.c AND p.actual = c.c) AS tp,
       count(*) FILTER (WHERE p.predicted = c.c AND p.actual <> c.c) AS fp,
       count(*) FILTER (WHERE p.predicted <> c.c AND p.actual = c.c) AS fn
  FROM met_pred p, LATERAL (SELECT generate_series(CASE WHEN p.ds = 'met_bin' THEN 1 ELSE 0 END,
                                                   CASE WHEN p.ds = 'met_bin' THEN 1 ELSE 2 END) AS c) c
 GROUP BY p.m, c.c;
CREATE FUNCTION met_ratio(a float8, b float8) RETURNS float8 LANGUAGE sql AS $$ SELECT CASE WHEN b > 0 THEN a / b ELSE 0 END $$;
-- AUC of one class against the rest, by counting every (positive, negative) pair
CREATE FUNCTION met_auc(model bigint, cls int) RETURNS float8 LANGUAGE sql AS $$
  WITH s AS (SELECT coalesce(score, probs[cls + 1]) AS s, actual = cls AS pos FROM met_pred WHERE m = model)
  SELECT avg(CASE WHEN x.s > y.s THEN 1.0 WHEN x.s = y.s THEN 0.5 ELSE 0.0 END)::float8
    FROM s x, s y WHERE x.pos AND NOT y.pos
$$;
CREATE TABLE met_ref AS
SELECT t.ds, t.metric, t.m,
       CASE t.metric
         WHEN 'precision' THEN (SELECT avg(met_ratio(tp, tp + fp)) FROM met_counts k WHERE k.m = t.m AND tp + fp + fn > 0)
         WHEN 'recall' THEN (SELECT avg(met_ratio(tp, tp + fn)) FROM met_counts k WHERE k.m = t.m AND tp + fp + fn > 0)
         WHEN 'f1' THEN (SELECT avg(met_ratio(2 * tp, 2 * tp + fp + fn)) FROM met_counts k WHERE k.m = t.m AND tp + fp + fn > 0)
         WHEN 'auc' THEN CASE t.ds WHEN 'met_bin' THEN met_auc(t.m, 1)
                                   ELSE (SELECT avg(met_auc(t.m, c)) FROM generate_series(0, 2) c) END
         WHEN 'log_loss' THEN (SELECT avg(-ln(coalesce(CASE WHEN actual = 1 THEN score ELSE 1 - score END, probs[actual + 1])))
                                 FROM met_pred p WHERE p.m = t.m)
         WHEN 'r2' THEN (SELECT 1 - sum((h.y - v[1]) ^ 2) / sum((h.y - a.my) ^ 2)
                           FROM met_reg_h h, LATERAL mop_predict_proba(t.m, ARRAY[h.a, h.b]) v,
                                (SELECT avg(y) AS my FROM met_reg_h) a)
       END AS want
  FROM met_models t;
SELECT r.ds, r.metric, e.rows, e.metric > 0 AND e.metric < CASE WHEN r.metric = 'log_loss' THEN 5 ELSE 1 END AS in_range,
       abs(e.metric - r.want) < CASE WHEN r.metric IN ('log_loss', 'r2') THEN 1e-6 ELSE 1e-9 END AS as_computed_in_sql
  FROM met_ref r, LATERAL mop_evaluate(r.m, r.ds || '_h') e ORDER BY r.ds, r.metric;
-- log-loss is the cross-entropy loss itself
SELECT r.ds, e.metric = e.loss AS log_loss_is_the_loss
  FROM met_ref r, LATERAL mop_evaluate(r.m, r.ds || '_h') e WHERE r.metric = 'log_loss' ORDER BY r.ds;

-- the confusion matrix: every pair of labels, the rows of the table, and
-- the same precision as mop_evaluate
SELECT m AS cm FROM met_models WHERE ds = 'met_cls' AND metric = 'precision' \gset
SELECT count(*) AS cells, sum(rows) AS rows, count(DISTINCT actual) AS labels FROM mop_confusion_matrix(:cm, 'met_cls_h');
SELECT abs((SELECT avg(met_ratio(tp, tp + fp)) FROM (
              SELECT l.label, sum(rows) FILTER (WHERE actual = predicted) AS tp, sum(rows) FILTER (WHERE actual <> predicted) AS fp,
                     (SELECT sum(rows) FROM mop_confusion_matrix(:cm, 'met_cls_h') z WHERE z.actual = l.label AND z.predicted <> l.label) AS fn
                FROM mop_confusion_matrix(:cm, 'met_cls_h') x JOIN (SELECT DISTINCT predicted AS label FROM mop_confusion_matrix(:cm, 'met_cls_h')) l
                  ON x.predicted = l.label
               GROUP BY l.label) s WHERE tp + fp + fn > 0)
           - (SELECT metric FROM mop_evaluate(:cm, 'met_cls_h'))) < 1e-12 AS matrix_precision_is_evaluate;
SELECT m AS bm FROM met_models WHERE ds = 'met_bin' AND metric = 'f1' \gset
SELECT * FROM mop_confusion_matrix(:bm, 'met_bin_h', checkpoint => 'last') LIMIT 0;
SELECT actual, predicted, rows = (SELECT count(*) FROM met_pred p WHERE p.m = :bm AND p.actual = (x.actual = 'true')::int
                                                                     AND p.predicted = (x.predicted = 'true')::int) AS counted
  FROM mop_confusion_matrix(:bm, 'met_bin_h') x;

-- a search ranks by its metric in the metric's direction
CREATE TEMP TABLE met_run AS
SELECT * FROM mop_grid_search('met_cls', '{"model": {"layers": [{"type": "dense", "units": 8, "activation": "tanh"}, {"type": "dense", "units": 3}]},
                                           "metric": "log_loss", "learning_rate": [0.1, 0.01, 0.001], "seed": 1}',
                              epochs => 2, workers => 2);
SELECT bool_and(metric = 'log_loss') AS log_loss, bool_and((rank = 1) = (best_valid_metric = (SELECT min(best_valid_metric) FROM met_run))) AS lowest_wins
  FROM met_run;

-- metric => sets every configuration's metric; a space with another is refused
CREATE TEMP TABLE met_run2 AS
SELECT * FROM mop_tpe('met_bin', '{"model": {"layers": [{"type": "dense", "units": 4, "activation": "tanh"}, {"type": "dense", "units": 1}]},
                                   "learning_rate": {"loguniform": [0.001, 0.1]}, "seed": 1}',
                      trials => 3, epochs => 1, workers => 1, metric => 'auc');
SELECT count(*) AS models, bool_and(r.metric = 'auc') AS auc, bool_and(m.config->>'metric' = 'auc') AS in_config
  FROM met_run2 r JOIN mop.models m ON m.id = r.model_id;
SELECT err($$SELECT * FROM mop_grid_search('met_bin', '{"model": {"layers": [{"type": "dense", "units": 1}]}, "metric": "f1"}',
                                           epochs => 1, metric => 'auc')$$);
SELECT err($$SELECT * FROM mop_grid_search('met_bin', '{"model": {"layers": [{"type": "dense", "units": 1}]}}',
                                           epochs => 1, metric => 'r2')$$);

-- errors
SELECT err($$SELECT mop_train('met_reg', '{"model": {"layers": [{"type": "dense", "units": 1}]}, "metric": "f1"}', 1)$$);
SELECT err($$SELECT mop_train('met_cls', '{"model": {"layers": [{"type": "dense", "units": 3}]}, "metric": "r2"}', 1)$$);
SELECT err($$SELECT mop_train('met_cls', '{"model": {"layers": [{"type": "dense", "units": 3}]}, "metric": "kappa"}', 1)$$);
SELECT m AS rm FROM met_models WHERE ds = 'met_reg' \gset
SELECT replace(err(format('SELECT * FROM mop_confusion_matrix(%s, %L)', :rm, 'met_reg_h')), :'rm', 'N') AS regression_matrix;
UPDATE met_cls_h SET k = 7 WHERE id = 3;
SELECT err(format('SELECT * FROM mop_confusion_matrix(%s, %L)', :cm, 'met_cls_h')) AS unknown_label;
SELECT err(format('SELECT * FROM mop_confusion_matrix(%s, %L, NULL)', :cm, 'met_cls_h')) AS null_checkpoint;
-- an image-like feature given as a two-dimensional array is flattened as
-- mop_prepare reads it; a NULL array is an error, not a row left out
CREATE TABLE met_img AS
SELECT i AS id, (i % 2)::text AS label,
       ARRAY[ARRAY[(i % 2) + sin(i), cos(i)], ARRAY[sin(i * 2), (i % 2) - cos(i * 3)]]::real[] AS px
  FROM generate_series(1, 200) i;
SELECT count(*) > 0 AS prepared FROM mop_prepare('met_img', 'label', ARRAY['px'], partitions => 1, seed => 1);
SELECT mop_train('met_img', '{"model": {"layers": [{"type": "dense", "units": 2}]}, "seed": 1}', 2) AS im \gset
SELECT sum(rows) AS rows, count(*) AS cells FROM mop_confusion_matrix(:im, 'met_img');
SELECT sum(rows) FILTER (WHERE actual = predicted)::float8 / sum(rows) = (SELECT metric FROM mop_evaluate(:im, 'met_img')) AS diagonal_is_accuracy
  FROM mop_confusion_matrix(:im, 'met_img');
UPDATE met_img SET px = NULL WHERE id = 5;
SELECT err(format('SELECT * FROM mop_confusion_matrix(%s, %L)', :im, 'met_img')) AS null_features;
