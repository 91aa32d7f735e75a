-- plan_long.sql -- the planner's share of a long run: Cerebro's
-- 16-configuration grid (the mlp16 space of plan_fashion.sql) on
-- 'fashion' for :epochs epochs with workers => 'auto', mop.profiles
-- emptied first, so that the call profiles the networks before it starts
-- the run.  Reports the call's time, the run's, the time from the call to
-- the run's start (planning, profiling and the run's setup), the seconds a
-- plan of the same grid profiles (mop_explain_workers on an empty
-- mop.profiles, less the same call from the cache), and the plan's
-- prediction for the workers it chose against the run.
-- test/bench/run_plan_fashion.sh runs this with PF_LONG_EPOCHS set:
--   psql -X -v epochs=140 -f test/bench/plan_long.sql
SET client_min_messages = notice;
\set space '{"model": [{"layers": [{"type": "dense", "units": 256, "activation": "relu"}, {"type": "dense", "units": 128, "activation": "relu"}, {"type": "dense", "units": 10}]}, {"layers": [{"type": "dense", "units": 512, "activation": "relu"}, {"type": "dense", "units": 10}]}], "optimizer": "adam", "learning_rate": [0.001, 0.0001], "batch_size": [32, 256], "l2": [0.0001, 0.000001]}'
SELECT split_part(pg_read_file('/proc/loadavg'), ' ', 1) AS load_before, to_char(clock_timestamp(), 'HH24:MI:SS') AS at;
DELETE FROM mop.profiles;
SELECT clock_timestamp() AS t0 \gset
SELECT DISTINCT run_id FROM mop_grid_search('fashion', :'space', epochs => :epochs, workers => 'auto', seed => 1) \gset
SELECT clock_timestamp() AS t1 \gset
-- a plan of the same grid, profiling afresh, then from the cache
DELETE FROM mop.profiles;
SELECT clock_timestamp() AS p0 \gset
CREATE TEMP TABLE plan AS SELECT * FROM mop_explain_workers('fashion', :'space', :epochs, 2);
SELECT clock_timestamp() AS p1 \gset
SELECT count(*) FROM mop_explain_workers('fashion', :'space', :epochs, 2);
SELECT clock_timestamp() AS p2 \gset
SELECT r.workers, r.options->>'blas_threads' AS threads_per_worker,
       round(extract(epoch FROM :'t1'::timestamptz - :'t0'::timestamptz)::numeric, 2) AS call_s,
       round(extract(epoch FROM r.finished_at - r.started_at)::numeric, 2) AS run_s,
       round(extract(epoch FROM r.started_at - :'t0'::timestamptz)::numeric, 3) AS call_to_run_start_s,
       round((extract(epoch FROM :'p1'::timestamptz - :'p0'::timestamptz)
              - extract(epoch FROM :'p2'::timestamptz - :'p1'::timestamptz))::numeric, 3) AS profile_s,
       round((100 * (extract(epoch FROM :'p1'::timestamptz - :'p0'::timestamptz)
                     - extract(epoch FROM :'p2'::timestamptz - :'p1'::timestamptz))
              / extract(epoch FROM :'t1'::timestamptz - :'t0'::timestamptz))::numeric, 3) AS profile_pct_of_call,
       round((100 * extract(epoch FROM r.started_at - :'t0'::timestamptz)
              / extract(epoch FROM :'t1'::timestamptz - :'t0'::timestamptz))::numeric, 3) AS start_pct_of_call,
       round(p.makespan_s::numeric, 2) AS predicted_s,
       round((p.makespan_s / extract(epoch FROM r.finished_at - r.started_at))::numeric, 3) AS pred_over_run
  FROM mop.runs r JOIN plan p ON p.workers = r.workers WHERE r.id = :run_id;
SELECT split_part(pg_read_file('/proc/loadavg'), ' ', 1) AS load_after, to_char(clock_timestamp(), 'HH24:MI:SS') AS at;
