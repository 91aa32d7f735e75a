-- patience: a configuration's "early_stopping": {"patience": N, "min_delta": d}
-- stops its model once the validation metric has not improved by more than d
-- (in the metric's direction) for N epochs: status 'stopped', a 'patience'
-- decision, its worker freed, its best checkpoint served.
-- (err(q) is defined in install.sql; the tables are its own)
SET client_min_messages = warning;
CREATE TABLE pat_pts AS
SELECT i AS id, ((sin(i * 1.3) + cos(i * 0.7) > 0) <> (i % 4 = 0))::int AS label,
       sin(i * 1.3) AS a, cos(i * 0.7) AS b, sin(i * 0.37) AS c
  FROM generate_series(1, 240) i;
SELECT count(*) > 0 AS prepared
  FROM mop_prepare('pat_pts', 'label', ARRAY['a', 'b', 'c'], validation => 0.3, partitions => 2, seed => 1);

-- mop_train: a rate too small to change any prediction, so the accuracy of
-- epoch 1 is never beaten; patience 2 stops it after epoch 3 of 10
SELECT mop_train('pat_pts', '{"model": {"layers": [{"type": "dense", "units": 8, "activation": "relu"}, {"type": "dense", "units": 2}]},
                              "optimizer": "sgd", "learning_rate": 1e-9, "seed": 1,
                              "early_stopping": {"patience": 2}}', 10) AS m \gset
SELECT m.status, m.epochs_done, (SELECT count(*) FROM mop.epochs e WHERE e.model_id = m.id) AS epoch_rows,
       r.status AS run_status, m.best_state IS NOT NULL AS has_best
  FROM mop.models m JOIN mop.runs r ON r.id = m.run_id WHERE m.id = :m;
-- it serves its best checkpoint: evaluated on the validation split it
-- scores exactly best_valid_metric
SELECT (r).metric_sum / (r).rows = m.best_valid_metric AS serves_best
  FROM mop.models m,
       LATERAL (SELECT mop.eval_agg(m.best_state, b.x, b.y ORDER BY b.partition, b.buffer_no) AS r
                  FROM mop.buffers b WHERE b.dataset_id = m.dataset_id AND b.split = 'valid') v
 WHERE m.id = :m;
SELECT (SELECT metric FROM mop_evaluate(:m, 'pat_pts')) = (SELECT metric FROM mop_evaluate(:m, 'pat_pts', 'best')) AS evaluate_uses_best;
-- min_delta: no accuracy can improve on epoch 1 by more than 1, so patience 1
-- stops a model that learns after epoch 2
SELECT mop_train('pat_pts', '{"model": {"layers": [{"type": "dense", "units": 16, "activation": "relu"}, {"type": "dense", "units": 2}]},
                              "optimizer": "adam", "learning_rate": 0.01, "seed": 1,
                              "early_stopping": {"patience": 1, "min_delta": 1}}', 10) AS m2 \gset
SELECT status, epochs_done FROM mop.models WHERE id = :m2;
-- without the key, or with null: every epoch
SELECT mop_train('pat_pts', '{"model": {"layers": [{"type": "dense", "units": 2}]}, "learning_rate": 1e-9,
                              "early_stopping": null}', 4) AS m3 \gset
SELECT status, epochs_done FROM mop.models WHERE id = :m3;

-- a grid in which one configuration has patience and the other not
CREATE TEMP TABLE pg1 AS
SELECT * FROM mop_grid_search('pat_pts',
  '{"model": {"layers": [{"type": "dense", "units": 8, "activation": "relu"}, {"type": "dense", "units": 2}]},
    "optimizer": "sgd", "learning_rate": 1e-9, "seed": 1,
    "early_stopping": [{"patience": 2}, null]}',
  epochs => 6, workers => 2, seed => 3, deterministic => true);
SELECT run_id AS pg1_run FROM pg1 LIMIT 1 \gset
SELECT m.config->'early_stopping' AS early_stopping, m.status, m.epochs_done,
       (SELECT count(*) FROM mop.epochs e WHERE e.model_id = m.id) AS epoch_rows,
       (SELECT count(*) FROM mop.hops h WHERE h.model_id = m.id) AS hops,
       m.best_state IS NOT NULL AS has_best
  FROM mop.models m WHERE m.run_id = :pg1_run ORDER BY m.id;
SELECT d.action, d.why, d.reason, d.from_resource, m.config->'early_stopping' AS early_stopping
  FROM mop.decisions d JOIN mop.models m ON m.id = d.model_id
 WHERE d.run_id = :pg1_run ORDER BY d.id;
SELECT status FROM mop.runs WHERE id = :pg1_run;
-- a replay reproduces the stop
SELECT DISTINCT run_id AS pg1_replay FROM mop_replay(:pg1_run) \gset
SELECT count(*) AS models, bool_and(a.status = b.status AND a.epochs_done = b.epochs_done) AS same_stops,
       bool_and(a.state = b.state) AS same_states
  FROM mop.models a JOIN mop.models b ON a.config = b.config
 WHERE a.run_id = :pg1_run AND b.run_id = :pg1_replay;
SELECT count(*) AS replay_patience_stops FROM mop.decisions
 WHERE run_id = :pg1_replay AND action = 'stop' AND why = 'patience';

-- with the run-level median rule too
CREATE TEMP TABLE pr1 AS
SELECT * FROM mop_random_search('pat_pts',
  '{"model": {"layers": [{"type": "dense", "units": 8, "activation": "relu"}, {"type": "dense", "units": 2}]},
    "optimizer": "sgd", "learning_rate": 1e-9, "early_stopping": {"patience": 1}}',
  trials => 3, epochs => 5, workers => 2, seed => 3, early_stopping => 'median');
SELECT count(*) AS models, bool_and(status = 'stopped' AND epochs_done <= 2) AS stopped_early,
       (SELECT status FROM mop.runs WHERE id = (SELECT run_id FROM pr1 LIMIT 1)) AS run_status
  FROM pr1;

-- every search method: the models stop after epoch 2 (patience 1) and the
-- run finishes
CREATE TEMP TABLE phb AS
SELECT * FROM mop_hyperband('pat_pts',
  '{"model": {"layers": [{"type": "dense", "units": 8, "activation": "relu"}, {"type": "dense", "units": 2}]},
    "optimizer": "sgd", "learning_rate": {"loguniform": [1e-10, 1e-9]}, "early_stopping": {"patience": 1}}',
  max_resource => 9, eta => 3, workers => 3, seed => 1);
CREATE TEMP TABLE pas AS
SELECT * FROM mop_asha('pat_pts',
  '{"model": {"layers": [{"type": "dense", "units": 8, "activation": "relu"}, {"type": "dense", "units": 2}]},
    "optimizer": "sgd", "learning_rate": {"loguniform": [1e-10, 1e-9]}, "early_stopping": {"patience": 1}}',
  max_resource => 9, eta => 3, max_trials => 6, workers => 3, seed => 1);
CREATE TEMP TABLE ptp AS
SELECT * FROM mop_tpe('pat_pts',
  '{"model": {"layers": [{"type": "dense", "units": 8, "activation": "relu"}, {"type": "dense", "units": 2}]},
    "optimizer": "sgd", "learning_rate": {"loguniform": [1e-10, 1e-9]}, "early_stopping": {"patience": 1}}',
  trials => 4, epochs => 5, n_startup => 2, workers => 2, seed => 5);
CREATE TEMP TABLE ppb AS
SELECT * FROM mop_pbt('pat_pts',
  '{"model": {"layers": [{"type": "dense", "units": 8, "activation": "relu"}, {"type": "dense", "units": 2}]},
    "optimizer": "sgd", "learning_rate": {"loguniform": [1e-10, 1e-9]}, "early_stopping": {"patience": 1}}',
  population => 4, epochs => 6, "interval" => 2, workers => 2, seed => 5, deterministic => true);
SELECT x.method, r.status AS run_status,
       bool_and(m.epochs_done <= 2) AS at_most_two_epochs,
       bool_and(m.status IN ('stopped', 'done')) AS settled,
       count(*) FILTER (WHERE p.model_id IS NOT NULL) > 0 AS some_patience_stops,
       bool_and(p.model_id IS NULL OR (m.status = 'stopped' AND m.epochs_done = 2
                                       AND p.from_resource = 2)) AS stopped_at_two,
       bool_and(p.model_id IS NULL OR NOT EXISTS (SELECT 1 FROM mop.decisions c
                  WHERE c.model_id = m.id AND c.action = 'continue' AND c.id > p.id)) AS never_continued
  FROM (VALUES ('hyperband', (SELECT run_id FROM phb LIMIT 1)), ('asha', (SELECT run_id FROM pas LIMIT 1)),
               ('tpe', (SELECT run_id FROM ptp LIMIT 1)), ('pbt', (SELECT run_id FROM ppb LIMIT 1))) x(method, run_id)
  JOIN mop.runs r ON r.id = x.run_id JOIN mop.models m ON m.run_id = x.run_id
  LEFT JOIN mop.decisions p ON p.model_id = m.id AND p.action = 'stop' AND p.why = 'patience'
 GROUP BY x.method, r.status ORDER BY x.method;

-- bad keys: SQLSTATE 22023 naming the path
SELECT err($$SELECT mop_train('pat_pts', '{"model": {"layers": [{"type": "dense", "units": 2}]}, "early_stopping": {"patience": 0}}', 2)$$);
SELECT err($$SELECT mop_train('pat_pts', '{"model": {"layers": [{"type": "dense", "units": 2}]}, "early_stopping": {"patience": 2, "min_delta": -0.1}}', 2)$$);
SELECT err($$SELECT mop_train('pat_pts', '{"model": {"layers": [{"type": "dense", "units": 2}]}, "early_stopping": {"patience": 2, "mode": "max"}}', 2)$$);
SELECT err($$SELECT mop_train('pat_pts', '{"model": {"layers": [{"type": "dense", "units": 2}]}, "early_stopping": {"min_delta": 0.1}}', 2)$$);
SELECT err($$SELECT mop_train('pat_pts', '{"model": {"layers": [{"type": "dense", "units": 2}]}, "early_stopping": 3}', 2)$$);
SELECT err($$SELECT mop_train('pat_pts', '{"model": {"layers": [{"type": "dense", "units": 2}]}, "early_stopping": {"patience": "3"}}', 2)$$);
SELECT err($$SELECT * FROM mop_grid_search('pat_pts', '{"model": {"layers": [{"type": "dense", "units": 2}]}, "early_stopping": [{"patience": 1}, {"patience": -1}]}', epochs => 2)$$);
