-- plan_fashion.sql -- the planner against the run on Fashion-MNIST: the
-- predictions of mop_explain_workers and mop_explain_hyperband against the
-- runs they plan, and the seconds the planner spends profiling.
--   mlp16      Cerebro's 16-configuration grid: MLPs 784-256-128-10 and
--              784-512-10 x learning rate {1e-3, 1e-4} x batch {32, 256} x
--              l2 {1e-4, 1e-6}, Adam; 1 and 2 workers;
--   mixed      an MLP 784-128-10 and a CNN (conv 3x3 16, max-pooling 2,
--              dense 32) x learning rate {1e-3, 1e-4} x batch {32, 128};
--              1 and 2 workers;
--   hyperband  mop_hyperband over the mlp16 space, max_resource 9, eta 3,
--              1 worker, against the sum of mop_explain_hyperband's seconds;
--   asha       mop_asha over the mlp16 space, max_resource 9, eta 3,
--              max_trials 20, 1 worker, against mop_explain_asha's
--              expected seconds (and its upper bound, and the epochs it
--              trained against both);
--   random     mop_random_search over the mlp16 space, 8 trials of the
--              epochs, 2 workers, against mop_explain_trials.
-- Expects the dataset 'fashion' (mop_prepare with shape [28, 28, 1]); the
-- order of the runs alternates with the repetition.  Each prediction
-- profiles afresh (mop.profiles emptied first); profile_s is the first
-- (profiling) call's time less the same call's time from the cache.
-- test/bench/run_plan_fashion.sh runs this in a private cluster:
--   psql -X -v reps=2 -v epochs=3 -v hb_r=9 -f test/bench/plan_fashion.sql
SET client_min_messages = warning;
CREATE TABLE IF NOT EXISTS pf_grids (grid text PRIMARY KEY, space jsonb);
TRUNCATE pf_grids;
INSERT INTO pf_grids VALUES
 ('mlp16', '{"model": [{"layers": [{"type": "dense", "units": 256, "activation": "relu"}, {"type": "dense", "units": 128, "activation": "relu"}, {"type": "dense", "units": 10}]},
                       {"layers": [{"type": "dense", "units": 512, "activation": "relu"}, {"type": "dense", "units": 10}]}],
             "optimizer": "adam", "learning_rate": [0.001, 0.0001], "batch_size": [32, 256], "l2": [0.0001, 0.000001]}'),
 ('mixed', '{"model": [{"layers": [{"type": "flatten"}, {"type": "dense", "units": 128, "activation": "relu"}, {"type": "dense", "units": 10}]},
                       {"layers": [{"type": "conv2d", "filters": 16, "kernel_size": 3, "padding": "same", "activation": "relu"},
                                   {"type": "maxpool2d", "pool_size": 2}, {"type": "flatten"},
                                   {"type": "dense", "units": 32, "activation": "relu"}, {"type": "dense", "units": 10}]}],
             "optimizer": "adam", "learning_rate": [0.001, 0.0001], "batch_size": [32, 128]}');
DROP TABLE IF EXISTS pf_results;
CREATE TABLE pf_results (grid text, rep int, workers int, predicted_s float8, actual_s float8, wall_s float8,
                         predicted_max_s float8, epochs_lo bigint, epochs_hi bigint, epochs_trained bigint,
                         profile_s float8, plan_cached_s float8, load1 float8, at timestamptz DEFAULT clock_timestamp(),
                         PRIMARY KEY (grid, rep, workers));
CREATE OR REPLACE FUNCTION pf_load() RETURNS float8 LANGUAGE sql AS
  $$ SELECT split_part(pg_read_file('/proc/loadavg'), ' ', 1)::float8 $$;

-- one repetition of a grid: profile and predict, then run with 1 and 2 workers
CREATE OR REPLACE PROCEDURE pf_grid(g text, r int, ep int) LANGUAGE plpgsql AS $$
DECLARE
  sp jsonb; w int; run bigint; t0 timestamptz; t1 timestamptz; t2 timestamptz;
  p1 float8; p2 float8; prof float8; cached float8;
BEGIN
  SELECT space INTO sp FROM pf_grids WHERE grid = g;
  DELETE FROM mop.profiles;
  t0 := clock_timestamp();
  SELECT max(makespan_s) FILTER (WHERE workers = 1), max(makespan_s) FILTER (WHERE workers = 2)
    INTO p1, p2 FROM mop_explain_workers('fashion', sp, ep, 2);
  t1 := clock_timestamp();
  PERFORM count(*) FROM mop_explain_workers('fashion', sp, ep, 2);
  t2 := clock_timestamp();
  cached := extract(epoch FROM t2 - t1);
  prof := extract(epoch FROM t1 - t0) - cached;
  COMMIT;
  FOREACH w IN ARRAY CASE WHEN r % 2 = 1 THEN ARRAY[1, 2] ELSE ARRAY[2, 1] END LOOP
    t0 := clock_timestamp();
    SELECT DISTINCT s.run_id INTO run FROM mop_grid_search('fashion', sp, epochs => ep, workers => w, seed => r) s;
    INSERT INTO pf_results
    SELECT g, r, w, CASE w WHEN 1 THEN p1 ELSE p2 END, extract(epoch FROM finished_at - started_at),
           extract(epoch FROM clock_timestamp() - t0), NULL, NULL, NULL, NULL, prof, cached, pf_load()
      FROM mop.runs WHERE id = run;
    COMMIT;
  END LOOP;
END $$;

-- one repetition of Hyperband (R hr, eta 3) on one worker over the mlp16 space
CREATE OR REPLACE PROCEDURE pf_hyperband(r int, hr int) LANGUAGE plpgsql AS $$
DECLARE
  sp jsonb; run bigint; t0 timestamptz; t1 timestamptz; t2 timestamptz; p float8; prof float8; cached float8;
BEGIN
  SELECT space INTO sp FROM pf_grids WHERE grid = 'mlp16';
  DELETE FROM mop.profiles;
  t0 := clock_timestamp();
  SELECT sum(seconds) INTO p FROM mop_explain_hyperband('fashion', sp, hr, 3);
  t1 := clock_timestamp();
  PERFORM sum(seconds) FROM mop_explain_hyperband('fashion', sp, hr, 3);
  t2 := clock_timestamp();
  cached := extract(epoch FROM t2 - t1);
  prof := extract(epoch FROM t1 - t0) - cached;
  COMMIT;
  t0 := clock_timestamp();
  SELECT DISTINCT s.run_id INTO run FROM mop_hyperband('fashion', sp, max_resource => hr, eta => 3, workers => 1, seed => r) s;
  INSERT INTO pf_results
  SELECT 'hyperband', r, 1, p, extract(epoch FROM finished_at - started_at),
         extract(epoch FROM clock_timestamp() - t0), NULL, NULL, NULL,
         (SELECT sum(epochs_done) FROM mop.models m WHERE m.run_id = run), prof, cached, pf_load()
    FROM mop.runs WHERE id = run;
  COMMIT;
END $$;

-- one repetition of ASHA (R hr, eta 3, 20 trials) on one worker over the mlp16 space
CREATE OR REPLACE PROCEDURE pf_asha(r int, hr int) LANGUAGE plpgsql AS $$
DECLARE
  sp jsonb; run bigint; t0 timestamptz; t1 timestamptz; t2 timestamptz;
  p float8; pmax float8; lo bigint; hi bigint; prof float8; cached float8;
BEGIN
  SELECT space INTO sp FROM pf_grids WHERE grid = 'mlp16';
  DELETE FROM mop.profiles;
  t0 := clock_timestamp();
  SELECT sum(seconds), sum(seconds_max), sum(epochs), sum(epochs_max) INTO p, pmax, lo, hi
    FROM mop_explain_asha('fashion', sp, hr, 3, 1, 20);
  t1 := clock_timestamp();
  PERFORM sum(seconds) FROM mop_explain_asha('fashion', sp, hr, 3, 1, 20);
  t2 := clock_timestamp();
  cached := extract(epoch FROM t2 - t1);
  prof := extract(epoch FROM t1 - t0) - cached;
  COMMIT;
  t0 := clock_timestamp();
  SELECT DISTINCT s.run_id INTO run FROM mop_asha('fashion', sp, max_resource => hr, eta => 3, min_resource => 1,
                                                  max_trials => 20, workers => 1, seed => r) s;
  INSERT INTO pf_results
  SELECT 'asha', r, 1, p, extract(epoch FROM finished_at - started_at),
         extract(epoch FROM clock_timestamp() - t0), pmax, lo, hi,
         (SELECT sum(epochs_done) FROM mop.models m WHERE m.run_id = run), prof, cached, pf_load()
    FROM mop.runs WHERE id = run;
  COMMIT;
END $$;

-- one repetition of a random search (8 trials) on 2 workers over the mlp16 space
CREATE OR REPLACE PROCEDURE pf_random(r int, ep int) LANGUAGE plpgsql AS $$
DECLARE
  sp jsonb; run bigint; t0 timestamptz; t1 timestamptz; t2 timestamptz; p float8; prof float8; cached float8;
BEGIN
  SELECT space INTO sp FROM pf_grids WHERE grid = 'mlp16';
  DELETE FROM mop.profiles;
  t0 := clock_timestamp();
  SELECT makespan_s INTO p FROM mop_explain_trials('fashion', sp, 8, ep, 2) WHERE workers = 2;
  t1 := clock_timestamp();
  PERFORM count(*) FROM mop_explain_trials('fashion', sp, 8, ep, 2);
  t2 := clock_timestamp();
  cached := extract(epoch FROM t2 - t1);
  prof := extract(epoch FROM t1 - t0) - cached;
  COMMIT;
  t0 := clock_timestamp();
  SELECT DISTINCT s.run_id INTO run FROM mop_random_search('fashion', sp, trials => 8, epochs => ep, workers => 2, seed => r) s;
  INSERT INTO pf_results
  SELECT 'random', r, 2, p, extract(epoch FROM finished_at - started_at),
         extract(epoch FROM clock_timestamp() - t0), NULL, NULL, NULL,
         (SELECT sum(epochs_done) FROM mop.models m WHERE m.run_id = run), prof, cached, pf_load()
    FROM mop.runs WHERE id = run;
  COMMIT;
END $$;

SELECT pf_load() AS load_before \gset
SELECT name, partitions, train_rows, valid_rows FROM mop.datasets WHERE name = 'fashion';
\o /dev/null
SELECT CASE k WHEN 'hyperband' THEN format('CALL pf_hyperband(%s, %s)', r, :hb_r)
              WHEN 'asha' THEN format('CALL pf_asha(%s, %s)', r, :hb_r)
              WHEN 'random' THEN format('CALL pf_random(%s, %s)', r, :epochs)
              ELSE format('CALL pf_grid(%L, %s, %s)', k, r, :epochs) END
  FROM generate_series(1, :reps) r,
       LATERAL unnest(CASE WHEN r % 2 = 1 THEN ARRAY['mlp16', 'mixed', 'hyperband', 'asha', 'random']
                           ELSE ARRAY['random', 'asha', 'hyperband', 'mixed', 'mlp16'] END) WITH ORDINALITY u(k, o)
 ORDER BY r, o \gexec
\o
SELECT grid, rep, workers, round(predicted_s::numeric, 2) AS predicted_s, round(actual_s::numeric, 2) AS actual_s,
       round(wall_s::numeric, 2) AS wall_s, round((predicted_s / actual_s)::numeric, 3) AS pred_over_run,
       round(profile_s::numeric, 3) AS profile_s, round(plan_cached_s::numeric, 3) AS plan_cached_s,
       round((100 * profile_s / actual_s)::numeric, 2) AS profile_pct_of_run, load1, to_char(at, 'HH24:MI:SS') AS at
  FROM pf_results ORDER BY grid, workers, rep;
-- ASHA: the epochs trained against the plan's expected case and upper bound;
-- the plan's mean epoch times the epochs trained, against the run
SELECT grid, rep, epochs_lo AS epochs_expected, epochs_trained, epochs_hi AS epochs_max,
       round(predicted_max_s::numeric, 2) AS predicted_max_s, round(actual_s::numeric, 2) AS actual_s,
       round((predicted_s / epochs_lo * epochs_trained / actual_s)::numeric, 3) AS pred_at_trained_epochs_over_run
  FROM pf_results WHERE grid = 'asha' ORDER BY rep;
SELECT grid, workers, count(*) AS reps, round(avg(predicted_s)::numeric, 2) AS predicted_s,
       round(percentile_cont(0.5) WITHIN GROUP (ORDER BY actual_s)::numeric, 2) AS median_actual_s,
       round(percentile_cont(0.5) WITHIN GROUP (ORDER BY predicted_s / actual_s)::numeric, 3) AS median_pred_over_run,
       round(min(predicted_s / actual_s)::numeric, 3) AS min_ratio, round(max(predicted_s / actual_s)::numeric, 3) AS max_ratio,
       round(percentile_cont(0.5) WITHIN GROUP (ORDER BY profile_s)::numeric, 3) AS median_profile_s,
       round(max(100 * profile_s / actual_s)::numeric, 2) AS max_profile_pct
  FROM pf_results GROUP BY 1, 2 ORDER BY 1, 2;
-- the profiling seconds against a run of 10 minutes
SELECT grid, round(max(profile_s)::numeric, 3) AS max_profile_s,
       round((100 * max(profile_s) / 600)::numeric, 3) AS pct_of_10_min
  FROM pf_results GROUP BY 1 ORDER BY 1;
SELECT :'load_before' AS load_before, pf_load() AS load_after;
