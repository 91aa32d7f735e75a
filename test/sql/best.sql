-- best: every model keeps the checkpoint of its best epoch; predictions,
-- evaluations and exports use it unless asked for 'last'; one ranking for
-- mop.leaderboard, mop.best and the search functions' results.
-- (err(q) is defined in install.sql; the tables are its own)
SET client_min_messages = warning;
-- a small noisy table that a wide network overfits: the labels follow the
-- sign of a + b, with one in four flipped
CREATE TABLE bst_pts AS
SELECT i AS id, ((sin(i * 1.3) + cos(i * 0.7) > 0) <> (i % 4 = 0))::int AS label,
       sin(i * 1.3) AS a, cos(i * 0.7) AS b, sin(i * 0.37) AS c
  FROM generate_series(1, 240) i;
CREATE TABLE bst_holdout AS
SELECT i AS id, ((sin(i * 1.3) + cos(i * 0.7) > 0) <> (i % 4 = 0))::int AS label,
       sin(i * 1.3) AS a, cos(i * 0.7) AS b, sin(i * 0.37) AS c
  FROM generate_series(1001, 1400) i;
SELECT count(*) > 0 AS prepared
  FROM mop_prepare('bst_pts', 'label', ARRAY['a', 'b', 'c'], validation => 0.3, partitions => 2, seed => 1);
SELECT mop_train('bst_pts', '{"model": {"layers": [{"type": "dense", "units": 128, "activation": "relu"},
                                                    {"type": "dense", "units": 128, "activation": "relu"},
                                                    {"type": "dense", "units": 2}]},
                              "optimizer": "adam", "learning_rate": 0.01, "batch_size": 8, "seed": 1}', 30) AS m \gset

-- the model overfits: its last epoch is worse than its best
SELECT m.best_epoch < m.epochs_done AS best_before_last,
       (SELECT e.valid_metric FROM mop.epochs e WHERE e.model_id = m.id AND e.epoch = m.epochs_done)
         < m.best_valid_metric AS last_worse,
       m.best_state IS NOT NULL AS has_best, m.best_state <> m.state AS best_is_not_last
  FROM mop.models m WHERE m.id = :m;

-- the best checkpoint is the one that scored best_valid_metric: evaluated
-- through the narrow waist on the validation split it gives exactly that,
-- and the latest gives exactly the last epoch's
SELECT (r).metric_sum / (r).rows = m.best_valid_metric AS best_state_scores_best,
       (l).metric_sum / (l).rows = (SELECT e.valid_metric FROM mop.epochs e
                                     WHERE e.model_id = m.id AND e.epoch = m.epochs_done) AS state_scores_last
  FROM mop.models m,
       LATERAL (SELECT mop.eval_agg(m.best_state, b.x, b.y ORDER BY b.partition, b.buffer_no) AS r,
                       mop.eval_agg(m.state, b.x, b.y ORDER BY b.partition, b.buffer_no) AS l
                  FROM mop.buffers b WHERE b.dataset_id = m.dataset_id AND b.split = 'valid') v
 WHERE m.id = :m;

-- served by default: mop_evaluate, mop_predict, mop_predict_proba,
-- mop_predict_table and mop_export use the best checkpoint
SELECT d.metric = b.metric AS evaluate_uses_best, d.metric <> l.metric AS last_differs
  FROM mop_evaluate(:m, 'bst_holdout') d, mop_evaluate(:m, 'bst_holdout', 'best') b,
       mop_evaluate(:m, 'bst_holdout', checkpoint => 'last') l;
SELECT bool_and(mop_predict_proba(:m, ARRAY[a, b, c]) = mop_predict_proba(:m, ARRAY[a, b, c], 'best')) AS proba_uses_best,
       bool_or(mop_predict_proba(:m, ARRAY[a, b, c]) <> mop_predict_proba(:m, ARRAY[a, b, c], checkpoint => 'last')) AS last_differs,
       bool_and(mop_predict(:m, ARRAY[a, b, c]) = mop_predict(:m, ARRAY[a, b, c], 'best')) AS predict_uses_best,
       bool_and(mop_predict(:m, ARRAY[a, b, c], 'last') = mop_predict(:m, ARRAY[a, b, c], checkpoint => 'last')) AS positional_is_checkpoint,
       bool_and(mop_predict(:m, ARRAY[a, b, c], NULL::int) = mop_predict(:m, ARRAY[a, b, c], NULL::int, 'best')) AS typed_uses_best,
       pg_typeof(mop_predict(:m, ARRAY[1, 2, 3], NULL::int, 'last')) AS typed_type
  FROM bst_holdout;
-- the holdout accuracy of each checkpoint, by hand from mop_predict
SELECT avg((mop_predict(:m, ARRAY[a, b, c], NULL::int) = label)::int) = (SELECT metric FROM mop_evaluate(:m, 'bst_holdout')) AS predict_agrees_with_evaluate,
       avg((mop_predict(:m, ARRAY[a, b, c], NULL::int, 'last') = label)::int) = (SELECT metric FROM mop_evaluate(:m, 'bst_holdout', 'last')) AS last_agrees
  FROM bst_holdout;
SELECT mop_predict_table(:m, 'bst_holdout', 'bst_pred_best', id_column => 'id') AS rows_best,
       mop_predict_table(:m, 'bst_holdout', 'bst_pred_last', id_column => 'id', checkpoint => 'last') AS rows_last;
SELECT bool_and(p.prediction = mop_predict(:m, ARRAY[h.a, h.b, h.c], NULL::int)) AS table_uses_best,
       bool_and(q.prediction = mop_predict(:m, ARRAY[h.a, h.b, h.c], NULL::int, 'last')) AS table_last
  FROM bst_holdout h JOIN bst_pred_best p USING (id) JOIN bst_pred_last q USING (id);
SELECT mop_export(:m)->>'checkpoint' AS default_export,
       mop_export(:m)->'weights' = mop_export(:m, checkpoint => 'best')->'weights' AS export_uses_best,
       mop_export(:m)->'weights' <> mop_export(:m, checkpoint => 'last')->'weights' AS last_differs;

-- model hopper parallelism writes each checkpoint once: while the latest
-- checkpoint is the best, best_state is NULL (the latest serves as the
-- best), and the sub-epoch that replaces it keeps it as best_state.  Every
-- model's best, evaluated through the narrow waist, scores exactly
-- best_valid_metric, whether its best epoch is its last or an earlier one.
SELECT DISTINCT run_id AS gr FROM mop_grid_search('bst_pts',
  '{"model": {"layers": [{"type": "dense", "units": 128, "activation": "relu"},
                         {"type": "dense", "units": 128, "activation": "relu"},
                         {"type": "dense", "units": 2}]},
    "optimizer": "adam", "learning_rate": [0.01, 0.0003, 0.00001], "batch_size": 8, "seed": 1}',
  epochs => 30, workers => 1) \gset
SELECT m.config->>'learning_rate' AS lr, m.best_epoch < m.epochs_done AS best_before_last,
       (m.best_state IS NULL) = (m.best_epoch = m.epochs_done) AS null_iff_latest_is_best,
       (r).metric_sum / (r).rows = m.best_valid_metric AS best_scores_best,
       (mop_export(m.id)->'weights' = mop_export(m.id, checkpoint => 'last')->'weights')
         = (m.best_epoch = m.epochs_done) AS served_is_latest_iff_best
  FROM mop.models m,
       LATERAL (SELECT mop.eval_agg(coalesce(m.best_state, m.state), b.x, b.y ORDER BY b.partition, b.buffer_no) AS r
                  FROM mop.buffers b WHERE b.dataset_id = m.dataset_id AND b.split = 'valid') v
 WHERE m.run_id = :gr ORDER BY lr;

-- a model with no validation split keeps no best: its latest serves
SELECT count(*) > 0 AS prepared FROM mop_prepare('bst_pts', 'label', ARRAY['a', 'b', 'c'], 'bst_noval', validation => 0, seed => 1);
SELECT mop_train('bst_noval', '{"model": {"layers": [{"type": "dense", "units": 2}]}, "seed": 1}', 2) AS mn \gset
SELECT m.best_state IS NULL AS no_best, m.best_epoch IS NULL AS no_best_epoch,
       (SELECT metric FROM mop_evaluate(:mn, 'bst_holdout')) = (SELECT metric FROM mop_evaluate(:mn, 'bst_holdout', 'last')) AS latest_serves
  FROM mop.models m WHERE m.id = :mn;

-- errors
\set VERBOSITY default
SELECT * FROM mop_evaluate(:m, 'bst_holdout', 'middle');
SELECT mop_predict(:m, ARRAY[1, 2, 3], NULL::int, NULL);
\set VERBOSITY terse

-- one ranking: equal metrics are ordered by validation loss, then fewer
-- epochs to the best, then id, and no two models share a rank; the search
-- function's result, mop.leaderboard and mop.best agree
CREATE TEMP TABLE bst_run AS
SELECT * FROM mop_grid_search('bst_pts', '{"model": {"layers": [{"type": "dense", "units": 2}]},
                                            "learning_rate": [0.1, 0.01, 0.001, 0.0001], "seed": 1}',
                              epochs => 2, workers => 1);
SELECT run_id AS r FROM bst_run LIMIT 1 \gset
SELECT bool_and(r.rank = l.rank) AS result_is_leaderboard, count(*) AS models,
       count(DISTINCT l.rank) AS distinct_ranks
  FROM bst_run r JOIN mop.leaderboard l ON l.model_id = r.model_id;
-- made equal by hand: the order falls to loss, then epochs, then id
UPDATE mop.models SET best_valid_metric = 0.5,
       best_valid_loss = CASE WHEN id = (SELECT max(model_id) FROM bst_run) THEN 0.1 ELSE 0.2 END,
       best_epoch = CASE WHEN id = (SELECT min(model_id) FROM bst_run) THEN 2 ELSE 1 END
 WHERE run_id = :r;
SELECT l.rank, l.model_id = (SELECT max(model_id) FROM bst_run) AS lowest_loss,
       l.model_id = (SELECT min(model_id) FROM bst_run) AS most_epochs,
       l.best_valid_loss, l.best_epoch
  FROM mop.leaderboard l WHERE l.run_id = :r ORDER BY l.rank;
SELECT b.model_id = (SELECT max(model_id) FROM bst_run) AS best_is_rank_1
  FROM mop.best b WHERE b.run_id = :r;
