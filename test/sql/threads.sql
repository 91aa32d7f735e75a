-- threads: how many BLAS threads each process that trains uses
-- (mop.threads_per_worker, 0 = automatic: the cores shared among the
-- run's workers; mop.blas_threads, its older name, wins when above 0).  A
-- run records the count its workers use in mop.runs.options.
-- (uses prepare.sql's blobs: 3 partitions)
SET client_min_messages = warning;
\set cores `nproc`
CREATE TABLE thr_space AS
SELECT '{"model": {"layers": [{"type": "dense", "units": 8, "activation": "relu"}, {"type": "dense", "units": 3}]},
         "learning_rate": 0.01, "batch_size": 32, "seed": 1}'::jsonb AS grid;
-- the thread count a grid search of w workers records (plpgsql: a
-- statement of its own sees the run the previous one made)
CREATE FUNCTION thr_run(w int) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
  rid bigint;
BEGIN
  SELECT DISTINCT run_id INTO rid
    FROM mop_grid_search('blobs', (SELECT grid FROM thr_space), epochs => 1, workers => w);
  RETURN (SELECT (r.options->>'blas_threads')::int FROM mop.runs r WHERE r.id = rid);
END $$;

-- both 0 by default: automatic
LOAD 'mop';
SHOW mop.threads_per_worker;
SHOW mop.blas_threads;
-- automatic: one worker gets every core (at most 64), two share them
SELECT thr_run(1) AS one_worker \gset
SELECT thr_run(2) AS two_workers \gset
SELECT :one_worker = least(:cores, 64) AS one_worker_uses_the_cores,
       :two_workers = greatest(least(:cores, 64) / 2, 1) AS two_workers_share_them;

-- which BLAS build and kernels trained (the CPU's path) is recorded too
SELECT options->>'blas' LIKE 'OpenBLAS %' AS blas_recorded FROM mop.runs ORDER BY id DESC LIMIT 1;

-- set: the same for any number of workers
SET mop.threads_per_worker = 3;
SELECT thr_run(1) AS set_one, thr_run(2) AS set_two;
-- the older name wins when above 0
SET mop.blas_threads = 2;
SELECT thr_run(2) AS older_name;
RESET mop.blas_threads;
RESET mop.threads_per_worker;

-- out of range: PostgreSQL's own error
SET mop.threads_per_worker = -1;
SET mop.threads_per_worker = 257;

DROP FUNCTION thr_run(int);
DROP TABLE thr_space;
RESET ALL;
