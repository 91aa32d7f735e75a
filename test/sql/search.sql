-- search: grid and random search with model hopper parallelism in
-- background workers; MOP invariants checked from mop.hops.
SET client_min_messages = warning;

-- a 2 x 2 grid over the 3 partitions of "blobs", 3 workers, 3 epochs
CREATE TEMP TABLE g1 AS
SELECT * FROM mop_grid_search('blobs',
  '{"model": {"layers": [{"type": "dense", "units": 8, "activation": "relu"}, {"type": "dense", "units": 3}]},
    "optimizer": "adam", "learning_rate": [0.01, 0.003], "batch_size": [16, 32], "seed": 1}',
  epochs => 3, workers => 3, seed => 7, deterministic => true);
SELECT count(*) AS models, count(DISTINCT run_id) AS runs,
       array_agg(rank ORDER BY rank) AS ranks, bool_and(status = 'done') AS all_done,
       bool_and(epochs_done = 3) AS epochs_ok, min(metric) AS metric
  FROM g1;
SELECT run_id AS r1 FROM g1 LIMIT 1 \gset
SELECT kind, status, epochs, workers, error IS NULL AS no_error, finished_at IS NOT NULL AS finished,
       options->>'deterministic' AS deterministic
  FROM mop.runs WHERE id = :r1;
-- ranks follow the metric (higher accuracy first)
SELECT bool_and(a.best_valid_metric >= b.best_valid_metric) AS ranked
  FROM g1 a JOIN g1 b ON b.rank = a.rank + 1;
-- the best view agrees with rank 1
SELECT b.model_id = g.model_id AS best_is_rank1
  FROM mop.best b JOIN g1 g ON g.run_id = b.run_id AND g.rank = 1;

-- MOP invariants: every model visits every partition exactly once per epoch
SELECT count(*) AS model_epochs,
       bool_and(n = 3 AND parts = 3) AS each_partition_once
  FROM (SELECT model_id, epoch, count(*) AS n, count(DISTINCT partition) AS parts
          FROM mop.hops WHERE run_id = :r1 GROUP BY model_id, epoch) s;
-- a model is never on two workers at once
SELECT count(*) AS model_overlaps
  FROM mop.hops a JOIN mop.hops b
    ON a.model_id = b.model_id AND a.id < b.id
   AND tstzrange(a.started_at, a.finished_at) && tstzrange(b.started_at, b.finished_at)
 WHERE a.run_id = :r1;
-- a worker never trains two models at once
SELECT count(*) AS worker_overlaps
  FROM mop.hops a JOIN mop.hops b
    ON a.worker = b.worker AND a.run_id = b.run_id AND a.id < b.id
   AND tstzrange(a.started_at, a.finished_at) && tstzrange(b.started_at, b.finished_at)
 WHERE a.run_id = :r1;
-- a worker trains only its own partitions (data never moves), and epochs are sequential
SELECT bool_and(partition % 3 = worker) AS owned_partitions FROM mop.hops WHERE run_id = :r1;
SELECT count(*) AS epoch_order_violations
  FROM mop.hops a JOIN mop.hops b ON a.model_id = b.model_id AND b.epoch = a.epoch + 1
 WHERE a.run_id = :r1 AND b.started_at < a.finished_at;
-- every epoch was validated
SELECT count(*) AS epochs_recorded, bool_and(valid_rows = 60 AND train_rows = 240) AS rows_ok
  FROM mop.epochs e JOIN mop.models m ON m.id = e.model_id WHERE m.run_id = :r1;

-- deterministic: the same run again gives bit-identical models
CREATE TEMP TABLE g2 AS
SELECT * FROM mop_grid_search('blobs',
  '{"model": {"layers": [{"type": "dense", "units": 8, "activation": "relu"}, {"type": "dense", "units": 3}]},
    "optimizer": "adam", "learning_rate": [0.01, 0.003], "batch_size": [16, 32], "seed": 1}',
  epochs => 3, workers => 2, seed => 7, deterministic => true);
SELECT run_id AS r2 FROM g2 LIMIT 1 \gset
SELECT count(*) AS pairs, bool_and(a.state = b.state) AS identical
  FROM mop.models a JOIN mop.models b ON a.config = b.config
 WHERE a.run_id = :r1 AND b.run_id = :r2;

-- non-blocking: the run id comes back at once; mop_wait waits for the end
SELECT DISTINCT run_id AS r3 FROM mop_grid_search('blobs',
  '{"model": {"layers": [{"type": "dense", "units": 8, "activation": "relu"}, {"type": "dense", "units": 3}]},
    "optimizer": "adam", "learning_rate": [0.01, 0.003], "batch_size": [16, 32], "seed": 1}',
  epochs => 3, seed => 7, deterministic => true, wait => false) \gset
SELECT mop_wait(:r3) AS waited;
SELECT count(*) AS pairs, bool_and(a.state = b.state) AS identical_to_blocking
  FROM mop.models a JOIN mop.models b ON a.config = b.config
 WHERE a.run_id = :r1 AND b.run_id = :r3;

-- cancel then resume: the same final models as the uninterrupted run.
-- While this transaction holds mop.epochs in SHARE mode, a worker can commit
-- a model's first sub-epochs of epoch 1 but blocks on the last one (which
-- records the epoch), so the cancel surely comes with work left: at most
-- 2 of each model's 9 sub-epochs are committed when it stops.
BEGIN;
LOCK TABLE mop.epochs IN SHARE MODE;
SELECT DISTINCT run_id AS r4 FROM mop_grid_search('blobs',
  '{"model": {"layers": [{"type": "dense", "units": 8, "activation": "relu"}, {"type": "dense", "units": 3}]},
    "optimizer": "adam", "learning_rate": [0.01, 0.003], "batch_size": [16, 32], "seed": 1}',
  epochs => 3, seed => 7, deterministic => true, wait => false) \gset
CREATE FUNCTION pg_temp.hops_of(r bigint, n int) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1..600 LOOP
    EXIT WHEN (SELECT count(*) FROM mop.hops WHERE run_id = r) >= n;
    PERFORM pg_sleep(0.05);
  END LOOP;
  RETURN (SELECT count(*) FROM mop.hops WHERE run_id = r);
END $$;
SELECT pg_temp.hops_of(:r4, 1) >= 1 AS trained_before_cancel;
SELECT mop_cancel(:r4) AS stopped;
COMMIT;
SELECT count(*) AS hops_before FROM mop.hops WHERE run_id = :r4 \gset
SELECT r.status AS run_status, :hops_before BETWEEN 1 AND 8 AS work_left,
       (SELECT count(*) FROM mop.epochs e JOIN mop.models m ON m.id = e.model_id
         WHERE m.run_id = :r4) AS epochs_recorded,
       (SELECT string_agg(DISTINCT status, ',') FROM mop.models WHERE run_id = :r4) AS model_status
  FROM mop.runs r WHERE r.id = :r4;
SELECT count(*) AS models, bool_and(status = 'done' AND epochs_done = 3) AS all_done
  FROM mop_resume(:r4);
SELECT status AS resumed_status FROM mop.runs WHERE id = :r4;
SELECT count(*) AS pairs, bool_and(a.state = b.state) AS identical_after_resume
  FROM mop.models a JOIN mop.models b ON a.config = b.config
 WHERE a.run_id = :r1 AND b.run_id = :r4;
-- mop_resume trained exactly the sub-epochs the cancel left, none twice
SELECT count(*) AS hops, count(DISTINCT (model_id, epoch, partition)) AS distinct_hops
  FROM mop.hops WHERE run_id = :r4;

-- warm start: the same configurations continue from another run's checkpoints
CREATE TEMP TABLE warm AS
SELECT * FROM mop_grid_search('blobs',
  '{"model": {"layers": [{"type": "dense", "units": 8, "activation": "relu"}, {"type": "dense", "units": 3}]},
    "optimizer": "adam", "learning_rate": [0.01, 0.003], "batch_size": [16, 32], "seed": 1}',
  epochs => 1, workers => 3, seed => 7, deterministic => true, warm_start => :r1);
CREATE TEMP TABLE cold AS
SELECT * FROM mop_grid_search('blobs',
  '{"model": {"layers": [{"type": "dense", "units": 8, "activation": "relu"}, {"type": "dense", "units": 3}]},
    "optimizer": "adam", "learning_rate": [0.01, 0.003], "batch_size": [16, 32], "seed": 1}',
  epochs => 1, workers => 3, seed => 7, deterministic => true);
SELECT (options->>'warm_start')::bigint = :r1 AS warm_start_recorded
  FROM mop.runs WHERE id = (SELECT run_id FROM warm LIMIT 1);
SELECT count(*) AS pairs, bool_and(ew.train_loss < ec.train_loss) AS warm_starts_ahead
  FROM warm w JOIN cold c ON w.config = c.config
  JOIN mop.epochs ew ON ew.model_id = w.model_id AND ew.epoch = 1
  JOIN mop.epochs ec ON ec.model_id = c.model_id AND ec.epoch = 1;

-- add configurations to a finished run: the old models are untouched
SELECT count(*) AS models, count(*) FILTER (WHERE status = 'done' AND epochs_done = 3) AS done
  FROM mop_resume(:r1, add => '{"model": {"layers": [{"type": "dense", "units": 4, "activation": "tanh"}, {"type": "dense", "units": 3}]},
                               "optimizer": "adam", "learning_rate": [0.02, 0.005], "batch_size": 16, "seed": 2}');
SELECT count(*) AS pairs, bool_and(a.state = b.state) AS old_models_untouched
  FROM mop.models a JOIN mop.models b ON a.config = b.config
 WHERE a.run_id = :r1 AND b.run_id = :r2;
SELECT status FROM mop.runs WHERE id = :r1;
-- added configurations are ranked with the run's models: the same metric
SELECT regexp_replace(err(format($$SELECT * FROM mop_resume(%s, add => '{"model": {"layers": [{"type": "dense", "units": 3}]}, "metric": "f1"}')$$, :r1)),
                      'run \d+', 'run N') AS other_metric;

-- random search: sampled values stay in their distributions, reproducibly
CREATE TEMP TABLE rs AS
SELECT * FROM mop_random_search('blobs',
  '{"model": [{"layers": [{"type": "dense", "units": 8, "activation": "relu"}, {"type": "dense", "units": 3}]},
              {"layers": [{"type": "dense", "units": 3}]}],
    "optimizer": {"choice": ["adam", "rmsprop"]},
    "learning_rate": {"loguniform": [0.001, 0.03]},
    "batch_size": {"int": [8, 32]}, "seed": 2}',
  trials => 4, epochs => 2, seed => 11);
SELECT count(*) AS models,
       bool_and((config->>'learning_rate')::float8 BETWEEN 0.001 AND 0.03) AS lr_in_range,
       bool_and((config->>'batch_size')::int BETWEEN 8 AND 32) AS batch_in_range,
       bool_and(config->>'optimizer' IN ('adam', 'rmsprop')) AS optimizer_ok,
       bool_and(status = 'done') AS all_done
  FROM rs;
SELECT (SELECT array_agg(config ORDER BY model_id) FROM rs) =
       (SELECT array_agg(config ORDER BY model_id) FROM mop_random_search('blobs',
  '{"model": [{"layers": [{"type": "dense", "units": 8, "activation": "relu"}, {"type": "dense", "units": 3}]},
              {"layers": [{"type": "dense", "units": 3}]}],
    "optimizer": {"choice": ["adam", "rmsprop"]},
    "learning_rate": {"loguniform": [0.001, 0.03]},
    "batch_size": {"int": [8, 32]}, "seed": 2}',
  trials => 4, epochs => 1, seed => 11)) AS same_seed_same_configs;

-- replay: an asynchronous (timing-dependent) run's recorded schedule
-- reproduces its models bit for bit
SELECT DISTINCT run_id AS r5 FROM mop_grid_search('blobs',
  '{"model": {"layers": [{"type": "dense", "units": 8, "activation": "relu"}, {"type": "dense", "units": 3}]},
    "optimizer": "adam", "learning_rate": [0.01, 0.003], "batch_size": [16, 32], "seed": 4}',
  epochs => 2, workers => 2) \gset
SELECT DISTINCT run_id AS r6 FROM mop_replay(:r5, workers => 3) \gset
SELECT kind, status, (options->>'replay_of')::bigint = :r5 AS replay_of FROM mop.runs WHERE id = :r6;
SELECT count(*) AS pairs, bool_and(a.state = b.state) AS identical_replay
  FROM mop.models a JOIN mop.models b ON a.config = b.config
 WHERE a.run_id = :r5 AND b.run_id = :r6;

-- conditional parameters: momentum only for SGD, nesterov only with momentum 0.9
SELECT config->>'optimizer' AS optimizer, config->>'momentum' AS momentum,
       config->>'nesterov' AS nesterov, status
  FROM mop_grid_search('blobs',
  '{"model": [{"type": "dense", "units": 3}], "optimizer": ["sgd", "adam"],
    "momentum": {"choice": [0.5, 0.9], "when": {"optimizer": "sgd"}},
    "nesterov": {"choice": [true, false], "when": {"momentum": 0.9}}}', epochs => 1)
 ORDER BY 1, 2, 3;
SELECT bool_and((config->>'optimizer' = 'sgd') = (config ? 'momentum')) AS momentum_only_for_sgd,
       count(*) AS trials
  FROM mop_random_search('blobs',
  '{"model": [{"type": "dense", "units": 3}], "optimizer": ["sgd", "adam"],
    "momentum": {"uniform": [0.5, 0.95], "when": {"optimizer": ["sgd"]}}}', trials => 6, epochs => 1, seed => 2);

-- divergence: the exploding configuration is marked, keeps a finite checkpoint, never wins
CREATE TEMP TABLE dv AS
SELECT * FROM mop_grid_search('blobs',
  '{"model": {"layers": [{"type": "dense", "units": 8, "activation": "relu"}, {"type": "dense", "units": 3}]},
    "optimizer": "sgd", "learning_rate": [0.01, 1000000], "batch_size": 16, "seed": 1}',
  epochs => 3, workers => 2, deterministic => true);
SELECT (dv.config->>'learning_rate')::float8 AS lr, dv.status, dv.rank,
       m.error LIKE 'loss became NaN or infinite in epoch % on partition %' AS error_names_where
  FROM dv JOIN mop.models m ON m.id = dv.model_id ORDER BY lr;
SELECT b.model_id = (SELECT model_id FROM dv WHERE status = 'done') AS finite_model_wins
  FROM mop.best b WHERE b.run_id = (SELECT run_id FROM dv LIMIT 1);
SELECT (SELECT (mop.eval_agg(m.state, b.x, b.y)).loss_sum
          FROM mop.buffers b WHERE b.dataset_id = m.dataset_id AND b.split = 'valid')
       < 'Infinity'::float8 AS checkpoint_finite
  FROM mop.models m JOIN dv ON dv.model_id = m.id WHERE m.status = 'diverged';
SELECT status FROM mop.runs WHERE id = (SELECT run_id FROM dv LIMIT 1);

-- bad input: clear errors with their SQLSTATE, nothing started
SELECT count(*) AS runs_before FROM mop.runs \gset
SELECT err($$SELECT * FROM mop_grid_search('blobs', '{"learning_rat": [0.1]}')$$);
SELECT err($$SELECT * FROM mop_grid_search('blobs', '{"model": {"layers": [{"type": "dense", "units": 3}]}, "learning_rate": []}')$$);
SELECT err($$SELECT * FROM mop_grid_search('blobs', '{"model": {"layers": [{"type": "dense", "units": 3}]}, "learning_rate": {"loguniform": [0, 1]}}')$$);
SELECT err($$SELECT * FROM mop_random_search('blobs', '{"model": {"layers": [{"type": "dense", "units": 3}]}, "learning_rate": {"gaussian": [0, 1]}}', 2)$$);
SELECT err($$SELECT * FROM mop_random_search('blobs', '{"model": {"layers": [{"type": "dense", "units": 3}]}, "learning_rate": {"uniform": [0.1, 0.01]}}', 2)$$);
SELECT err($$SELECT * FROM mop_random_search('blobs', '{"model": {"layers": [{"type": "dense", "units": 3}]}, "batch_size": {"int": [1.5, 8]}}', 2)$$);
SELECT err($$SELECT * FROM mop_random_search('blobs', '{"model": {"layers": [{"type": "dense", "units": 3}]}, "momentum": {"uniform": [0.1]}}', 2)$$);
SELECT err($$SELECT * FROM mop_grid_search('blobs', '{"model": {"layers": [{"type": "dense", "units": 3}]}, "learning_rate": {"uniform": [0.01, 0.1]}}')$$);
SELECT err($$SELECT * FROM mop_grid_search('blobs', '{"model": {"layers": [{"type": "dense", "units": 3}]}, "learning_rate": [0.1, -1]}')$$);
SELECT err($$SELECT * FROM mop_grid_search('blobs', '{"model": {"layers": [{"type": "dense", "units": 4}]}}')$$);
SELECT err($$SELECT * FROM mop_grid_search('nosuch', '{"model": {"layers": [{"type": "dense", "units": 3}]}}')$$);
SELECT err($$SELECT * FROM mop_grid_search('blobs', '{"model": {"layers": [{"type": "dense", "units": 3}]}}', epochs => 0)$$);
SELECT err($$SELECT * FROM mop_grid_search('blobs', '{"model": {"layers": [{"type": "dense", "units": 3}]}}', workers => 0)$$);
SELECT err($$SELECT * FROM mop_grid_search('blobs', '{"model": {"layers": [{"type": "dense", "units": 3}]}}', scheduler => 'lifo')$$);
SELECT err($$SET mop.scheduler = 'lifo'$$);
SELECT err($$SELECT * FROM mop_random_search('blobs', '{"model": {"layers": [{"type": "dense", "units": 3}]}}', trials => 0)$$);
SELECT err($$SELECT * FROM mop_grid_search('blobs', '[1, 2]')$$);
SELECT err($$SELECT * FROM mop_grid_search('blobs', '{"model": [{"type": "dense", "units": 3}], "momentum": {"choice": [0.5], "when": {"optimizer": "sgd"}}}')$$);
SELECT err($$SELECT * FROM mop_grid_search('blobs', '{"model": [{"type": "dense", "units": 3}], "optimizer": ["adam"], "momentum": {"choice": [0.5], "when": {"optimizer": "sgd"}}}')$$);
SELECT err($$SELECT * FROM mop_grid_search('blobs', '{"model": [{"type": "dense", "units": 3}], "optimizer": ["sgd"], "momentum": {"choice": [0.5], "when": "sgd"}}')$$);
SELECT err($$SELECT * FROM mop_grid_search('blobs', '{}')$$);
-- (run ids are masked: they depend on how many runs the earlier files made)
SELECT regexp_replace(err(format('SELECT * FROM mop_resume(%s)', :r1)), 'run \d+', 'run N') AS err;
SELECT err($$SELECT * FROM mop_grid_search('blobs', '{"model": {"layers": [{"type": "dense", "units": 3}]}}', warm_start => 999999)$$);
SELECT regexp_replace(err(format($$SELECT * FROM mop_grid_search('digits', '{"model": {"layers": [{"type": "dense", "units": 3}]}}', warm_start => %s)$$, :r1)), 'run \d+', 'run N') AS other_dataset;
SELECT regexp_replace(err(format('SELECT mop_cancel(%s)', :r1)), 'run \d+', 'run N') AS err;
SELECT err($$SELECT mop_wait(999999)$$);
SELECT err($$SELECT * FROM mop_resume(999999)$$);
SELECT err($$SELECT * FROM mop_replay(999998)$$);
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT err($$SELECT * FROM mop_grid_search('blobs', '{"model": {"layers": [{"type": "dense", "units": 3}]}}')$$);
ROLLBACK;
SELECT count(*) = :runs_before AS nothing_started FROM mop.runs;

-- privileges: workers run as the role that started the run and see only its data
CREATE ROLE regress_mop_search_alice LOGIN;
GRANT SELECT ON blobs TO regress_mop_search_alice;
SET ROLE regress_mop_search_alice;
SELECT err($$SELECT * FROM mop_grid_search('blobs', '{"model": {"layers": [{"type": "dense", "units": 3}]}}')$$) AS others_dataset;
SELECT regexp_replace(err(format('SELECT mop_cancel(%s)', :r1)), 'run \d+', 'run N') AS others_run;
SELECT dataset_name FROM mop_prepare('blobs', 'species', ARRAY['a', 'b', 'c'], 'alice_blobs',
                                     partitions => 2, seed => 1);
SELECT count(*) AS models, bool_and(status = 'done') AS done
  FROM mop_grid_search('alice_blobs', '{"model": {"layers": [{"type": "dense", "units": 3}]},
                                        "learning_rate": [0.01, 0.02]}', epochs => 1);
SELECT DISTINCT m.owner, r.owner AS run_owner, r.status
  FROM mop.models m JOIN mop.runs r ON r.id = m.run_id JOIN mop.datasets d ON d.id = r.dataset_id
 WHERE d.name = 'alice_blobs';
SELECT mop_drop_dataset('alice_blobs');
RESET ROLE;
REVOKE SELECT ON blobs FROM regress_mop_search_alice;
DROP ROLE regress_mop_search_alice;

-- model averaging (the baseline MOP is compared with)
SELECT mop.average_states(ARRAY[m.state, m.state]) = m.state AS mean_of_same_is_same
  FROM mop.models m WHERE m.run_id = :r1 ORDER BY m.id LIMIT 1;
SELECT length(mop.average_states(array_agg(m.state))) = max(length(m.state)) AS averaged
  FROM mop.models m WHERE m.run_id = :r2;
SELECT err($$SELECT mop.average_states(ARRAY[]::bytea[])$$);
SELECT err($$SELECT mop.average_states(ARRAY['\x00'::bytea])$$);
SELECT err(format($$SELECT mop.average_states(ARRAY[(SELECT state FROM mop.models WHERE run_id = %s LIMIT 1),
       mop.init_model('blobs', '{"model": [{"type": "dense", "units": 3}]}')])$$, :r1));
