-- plan_check.sql -- the planner (mop_explain_workers) against the grid
-- searches it plans, predicted and run in turn:
--   mlp16  Cerebro's 16-configuration grid style: MLPs 64-256-128-10 and
--          64-512-10 x learning rate {1e-3, 1e-4} x batch {32, 256} x
--          l2 {1e-4, 1e-6}, Adam;
--   mixed  an MLP 64-128-10 and a small CNN (conv 3x3 16, max-pooling,
--          dense 32) on the same rows as 8x8 images, x learning rate
--          {1e-3, 1e-4} x batch {32, 128};
-- each on 20,000 rows in 2 partitions (10 % validation), 3 epochs, with 1
-- and 2 workers; the order of the workers alternates with the repetition.
-- Each prediction profiles afresh (mop.profiles emptied first); the same
-- profiles are also planned without the hop cost model (mop.plan_* = 0),
-- which is what the planner predicted before it.  In a
-- pg_virtualenv cluster (test/bench/run_plan_check.sh runs this):
--   pg_virtualenv -t -v 15 psql -X -v reps=3 -f test/bench/plan_check.sql
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS mop;
CREATE TABLE pc AS
SELECT i AS id, (i % 10)::text AS label,
       ARRAY(SELECT ((i % 10) * 0.1 + sin(i * 7 + j))::real FROM generate_series(1, 64) j) AS v
  FROM generate_series(1, 20000) i;
SELECT count(*) FROM mop_prepare('pc', 'label', ARRAY['v'], partitions => 2, validation => 0.1, seed => 1);
SELECT count(*) FROM mop_prepare('pc', 'label', ARRAY['v'], partitions => 2, validation => 0.1, seed => 1,
                                 shape => ARRAY[8, 8, 1], dataset => 'pc_img');
CREATE TABLE pc_grids (grid text PRIMARY KEY, dataset text, space jsonb);
INSERT INTO pc_grids VALUES
 ('mlp16', 'pc', '{"model": [{"layers": [{"type": "dense", "units": 256, "activation": "relu"}, {"type": "dense", "units": 128, "activation": "relu"}, {"type": "dense", "units": 10}]},
                             {"layers": [{"type": "dense", "units": 512, "activation": "relu"}, {"type": "dense", "units": 10}]}],
                   "optimizer": "adam", "learning_rate": [0.001, 0.0001], "batch_size": [32, 256], "l2": [0.0001, 0.000001]}'),
 ('mixed', 'pc_img', '{"model": [{"layers": [{"type": "flatten"}, {"type": "dense", "units": 128, "activation": "relu"}, {"type": "dense", "units": 10}]},
                                 {"layers": [{"type": "conv2d", "filters": 16, "kernel_size": 3, "padding": "same", "activation": "relu"},
                                             {"type": "maxpool2d", "pool_size": 2}, {"type": "flatten"},
                                             {"type": "dense", "units": 32, "activation": "relu"}, {"type": "dense", "units": 10}]}],
                       "optimizer": "adam", "learning_rate": [0.001, 0.0001], "batch_size": [32, 128]}');
CREATE TABLE pc_results (grid text, rep int, workers int, predicted_s float8, no_hop_s float8, actual_s float8,
                         wall_s float8, load1 float8, PRIMARY KEY (grid, rep, workers));
CREATE FUNCTION pc_load() RETURNS float8 LANGUAGE sql AS
  $$ SELECT split_part(pg_read_file('/proc/loadavg'), ' ', 1)::float8 $$;

-- one repetition of one grid: predict, then run with 1 and 2 workers
CREATE PROCEDURE pc_rep(g text, r int) LANGUAGE plpgsql AS $$
DECLARE
  ds text; sp jsonb; w int; run bigint; t0 timestamptz; p1 float8; p2 float8; n1 float8; n2 float8;
BEGIN
  SELECT dataset, space INTO ds, sp FROM pc_grids WHERE grid = g;
  DELETE FROM mop.profiles;
  SELECT max(makespan_s) FILTER (WHERE workers = 1), max(makespan_s) FILTER (WHERE workers = 2)
    INTO p1, p2 FROM mop_explain_workers(ds, sp, 3, 2);
  -- the same profiles without the hop cost model: the planner before it
  PERFORM set_config('mop.plan_hop_cost', '0', true), set_config('mop.plan_state_cost', '0', true),
          set_config('mop.plan_epoch_cost', '0', true), set_config('mop.plan_run_cost', '0', true);
  SELECT max(makespan_s) FILTER (WHERE workers = 1), max(makespan_s) FILTER (WHERE workers = 2)
    INTO n1, n2 FROM mop_explain_workers(ds, sp, 3, 2);
  COMMIT;
  FOREACH w IN ARRAY CASE WHEN r % 2 = 1 THEN ARRAY[1, 2] ELSE ARRAY[2, 1] END LOOP
    t0 := clock_timestamp();
    SELECT DISTINCT s.run_id INTO run FROM mop_grid_search(ds, sp, epochs => 3, workers => w, seed => r) s;
    INSERT INTO pc_results
    SELECT g, r, w, CASE w WHEN 1 THEN p1 ELSE p2 END, CASE w WHEN 1 THEN n1 ELSE n2 END,
           extract(epoch FROM finished_at - started_at), extract(epoch FROM clock_timestamp() - t0), pc_load()
      FROM mop.runs WHERE id = run;
    COMMIT;
  END LOOP;
END $$;

SELECT pc_load() AS load_before \gset
\o /dev/null
SELECT format('CALL pc_rep(%L, %s)', g.grid, r) FROM pc_grids g, generate_series(1, :reps) r ORDER BY r, g.grid DESC \gexec
\o
SELECT grid, rep, workers, round(predicted_s::numeric, 3) AS predicted_s, round(actual_s::numeric, 3) AS actual_s,
       round(wall_s::numeric, 3) AS wall_s, round((predicted_s / actual_s)::numeric, 2) AS pred_over_run,
       round((no_hop_s / actual_s)::numeric, 2) AS no_hop_over_run,
       round((predicted_s / wall_s)::numeric, 2) AS pred_over_wall, load1
  FROM pc_results ORDER BY grid, workers, rep;
SELECT grid, workers, count(*) AS reps, round(avg(predicted_s)::numeric, 3) AS predicted_s,
       round(percentile_cont(0.5) WITHIN GROUP (ORDER BY actual_s)::numeric, 3) AS median_actual_s,
       round(percentile_cont(0.5) WITHIN GROUP (ORDER BY wall_s)::numeric, 3) AS median_wall_s,
       round(percentile_cont(0.5) WITHIN GROUP (ORDER BY predicted_s / actual_s)::numeric, 2) AS median_pred_over_run,
       round(min(predicted_s / actual_s)::numeric, 2) AS min_ratio, round(max(predicted_s / actual_s)::numeric, 2) AS max_ratio,
       round(percentile_cont(0.5) WITHIN GROUP (ORDER BY no_hop_s / actual_s)::numeric, 2) AS median_no_hop_over_run
  FROM pc_results GROUP BY 1, 2 ORDER BY 1, 2;
-- the profile cache: a second plan of a dataset measures nothing
SELECT count(*) AS configs FROM mop_explain('pc', (SELECT space FROM pc_grids WHERE grid = 'mlp16'), 3);
SELECT count(*) AS cached_profiles FROM mop.profiles;
SELECT line FROM mop_explain_text('pc', (SELECT space FROM pc_grids WHERE grid = 'mlp16'), 3, 2) line WHERE line LIKE '  Profiles:%';
SELECT :'load_before' AS load_before, pc_load() AS load_after;
