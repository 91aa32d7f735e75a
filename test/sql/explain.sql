-- explain: what a grid search would cost before it runs; nothing is trained
-- (err(q) is defined in install.sql; the tables are its own)
SET client_min_messages = warning;
-- profiles at one thread, whatever the machine's cores (the automatic
-- count, which profiles at all the cores too, is tested at the end)
SET mop.threads_per_worker = 1;
CREATE TABLE xpl AS
SELECT i AS id, (i % 3)::text AS label,
       ARRAY(SELECT ((i % 3) * 0.2 + sin(i * 3 + j))::real FROM generate_series(1, 32) j) AS v
  FROM generate_series(1, 3000) i;
SELECT count(*) FROM mop_prepare('xpl', 'label', ARRAY['v'], partitions => 4, seed => 1);
SELECT count(*) AS models_before FROM mop.models \gset
CREATE TEMP TABLE xe AS
SELECT * FROM mop_explain('xpl', '{"model": [{"layers": [{"type": "dense", "units": 16, "activation": "relu"}, {"type": "dense", "units": 3}]},
                                             {"layers": [{"type": "dense", "units": 256, "activation": "relu"}, {"type": "dense", "units": 3}]}],
                                   "learning_rate": [0.01, 0.001], "batch_size": [32]}', epochs => 5);
-- one row per configuration, in the grid's order; the wider network is
-- bigger and slower; configurations differing only in the learning rate
-- share one profile
SELECT config_no, config->'learning_rate' AS lr, jsonb_array_length(config->'model'->'layers') AS layers,
       fits, model_bytes > 0 AS sized, working_bytes > model_bytes AS working,
       step_ms > 0 AND rows_per_s > 0 AND sub_epoch_s > 0 AND epoch_s > sub_epoch_s AS timed,
       abs(total_s - 5 * epoch_s) < 1e-9 AS total_is_5_epochs
  FROM xe ORDER BY config_no;
SELECT (SELECT model_bytes FROM xe WHERE config_no = 3) > 10 * (SELECT model_bytes FROM xe WHERE config_no = 1) AS wide_is_bigger,
       (SELECT rows_per_s FROM xe WHERE config_no = 1) = (SELECT rows_per_s FROM xe WHERE config_no = 2) AS one_profile_per_network,
       (SELECT count(*) FROM mop.models) = :models_before AS nothing_trained;
-- a configuration over mop.max_model_memory is reported, not refused
SET mop.max_model_memory = '1MB';
SELECT config_no, fits, rows_per_s IS NULL AS not_profiled
  FROM mop_explain('xpl', '{"model": [{"layers": [{"type": "dense", "units": 16, "activation": "relu"}, {"type": "dense", "units": 3}]},
                                      {"layers": [{"type": "dense", "units": 2048, "activation": "relu"}, {"type": "dense", "units": 3}]}]}')
 ORDER BY config_no;
RESET mop.max_model_memory;
-- the run's time for 1..4 workers (the dataset's partitions), by the
-- scheduler's simulator: never under its lower bound, one knee
CREATE TEMP TABLE xw AS
SELECT * FROM mop_explain_workers('xpl', '{"model": {"layers": [{"type": "dense", "units": 64, "activation": "relu"}, {"type": "dense", "units": 3}]},
                                           "learning_rate": [0.1, 0.03, 0.01, 0.003, 0.001, 0.0003, 0.0001, 0.00003]}', epochs => 3);
SELECT workers, speedup > 0 AS ok, makespan_s >= lower_bound_s * 0.999999 AS above_bound, efficiency <= 1.000001 AS efficiency_at_most_1
  FROM xw ORDER BY workers;
SELECT count(*) FILTER (WHERE knee) AS knees, (SELECT speedup FROM xw WHERE workers = 1) = 1 AS one_worker_is_1,
       (SELECT makespan_s FROM xw WHERE workers = 4) < (SELECT makespan_s FROM xw WHERE workers = 1) AS four_faster
  FROM xw;
SELECT count(*) AS rows FROM mop_explain_workers('xpl', '{"model": {"layers": [{"type": "dense", "units": 3}]}}', max_workers => 2);
-- errors
SELECT err($$SELECT * FROM mop_explain('nosuch', '{"model": {"layers": [{"type": "dense", "units": 3}]}}')$$);
SELECT err($$SELECT * FROM mop_explain('xpl', '{"model": {"layers": [{"type": "dense", "units": 3}]}, "learning_rate": {"uniform": [0, 1]}}')$$);
SELECT err($$SELECT * FROM mop_explain('xpl', '{"model": {"layers": [{"type": "dense", "units": 3}]}}', epochs => 0)$$);
SELECT err($$SELECT * FROM mop_explain_workers('xpl', '{"model": {"layers": [{"type": "dense", "units": 3}]}}', max_workers => 0)$$);
-- mop_explain_text: the same as EXPLAIN writes a plan, from one profile;
-- times, speedups and the knee masked (they are measured), memory is not
CREATE FUNCTION xmask(t text) RETURNS text LANGUAGE sql AS $$
  SELECT regexp_replace(regexp_replace(regexp_replace(t, '[0-9]+\.[0-9]+ (m?s)', 'N \1', 'g'),
                        'speedup=[0-9.]+x efficiency=[0-9]+%', 'speedup=N efficiency=N', 'g'),
                        '  <- knee$', '')
$$;
SELECT xmask(line) FROM mop_explain_text('xpl', '{"model": {"layers": [{"type": "dense", "units": 16, "activation": "relu"}, {"type": "dense", "units": 3}]},
                                                   "learning_rate": [0.01, 0.001], "batch_size": [32]}', epochs => 5) line;
-- one knee among the workers
SELECT count(*) FILTER (WHERE line LIKE '%  <- knee') AS knees, count(*) FILTER (WHERE line ~ '^    [0-9]+ workers?: ') AS worker_lines
  FROM mop_explain_text('xpl', '{"model": {"layers": [{"type": "dense", "units": 3}]}, "learning_rate": [0.1, 0.01, 0.001]}', max_workers => 3) line;
-- many configurations: the 10 most expensive, in the grid's order, and a
-- count of the rest
SELECT count(*) FILTER (WHERE line LIKE '  ->  Configuration %') AS listed,
       string_agg(xmask(line), '' ORDER BY n) FILTER (WHERE line LIKE '  ->  % more configurations%') AS rest
  FROM mop_explain_text('xpl', '{"model": {"layers": [{"type": "dense", "units": 3}]},
                                 "learning_rate": [0.1, 0.03, 0.01, 0.003], "l2": [0, 0.001, 0.01]}', epochs => 1) WITH ORDINALITY AS t(line, n);
-- warnings: a configuration over mop.max_model_memory ...
SET mop.max_model_memory = '1MB';
SELECT xmask(line) FROM mop_explain_text('xpl', '{"model": [{"layers": [{"type": "dense", "units": 16, "activation": "relu"}, {"type": "dense", "units": 3}]},
                                                             {"layers": [{"type": "dense", "units": 2048, "activation": "relu"}, {"type": "dense", "units": 3}]}]}', epochs => 2) line
 WHERE line LIKE 'Warning:%' OR line LIKE '  ->  %';
RESET mop.max_model_memory;
-- ... fewer partitions than the workers a run would use (max_workers, or
-- mop.workers) ...
SELECT line FROM mop_explain_text('xpl', '{"model": {"layers": [{"type": "dense", "units": 3}]}, "learning_rate": [0.1, 0.03, 0.01, 0.003, 0.001, 0.0003]}',
                                  epochs => 1, max_workers => 6) line
 WHERE line LIKE 'Warning:%';
SET mop.workers = 8;
SELECT line FROM mop_explain_text('xpl', '{"model": {"layers": [{"type": "dense", "units": 3}]}, "learning_rate": [0.1, 0.03, 0.01, 0.003, 0.001]}', epochs => 1) line
 WHERE line LIKE 'Warning:%';
-- (not when there are fewer configurations than partitions to train them)
SELECT count(*) AS warnings FROM mop_explain_text('xpl', '{"model": {"layers": [{"type": "dense", "units": 3}]}, "learning_rate": [0.1, 0.01]}', epochs => 1) line
 WHERE line LIKE 'Warning:%';
RESET mop.workers;
-- ... and one configuration that alone bounds the makespan
SELECT xmask(line) FROM mop_explain_text('xpl', '{"model": [{"layers": [{"type": "dense", "units": 3}]},
                                                             {"layers": [{"type": "dense", "units": 4, "activation": "relu"}, {"type": "dense", "units": 3}]},
                                                             {"layers": [{"type": "dense", "units": 2, "activation": "relu"}, {"type": "dense", "units": 3}]},
                                                             {"layers": [{"type": "dense", "units": 1024, "activation": "relu"}, {"type": "dense", "units": 1024, "activation": "relu"}, {"type": "dense", "units": 3}]}]}',
                                         epochs => 2) line
 WHERE line LIKE 'Warning:%';
SELECT err($$SELECT * FROM mop_explain_text('nosuch', '{"model": {"layers": [{"type": "dense", "units": 3}]}}')$$);
SELECT err($$SELECT * FROM mop_explain_text(NULL, '{"model": {"layers": [{"type": "dense", "units": 3}]}}')$$);
SELECT err($$SELECT * FROM mop_explain_text('xpl', '{"model": {"layers": [{"type": "dense", "units": 3}]}}', max_workers => 0)$$);
SELECT err($$SELECT * FROM mop_explain_text('xpl', '{"model": {"layers": [{"type": "dense", "units": 3}]}}', epochs => -1)$$);
-- the hop cost: a fixed cost and one per MB of the model's state
-- (mop.plan_hop_cost, mop.plan_state_cost), in every sub-epoch
SELECT config_no, abs(hop_s - (0.0025 + 0.009 * model_bytes / 1048576.0)) < 1e-9 AS default_hop_cost,
       sub_epoch_s > hop_s AS hop_in_sub_epoch, epoch_s > 4 * sub_epoch_s AS validation_and_end_in_epoch
  FROM mop_explain('xpl', '{"model": [{"layers": [{"type": "dense", "units": 16, "activation": "relu"}, {"type": "dense", "units": 3}]},
                                      {"layers": [{"type": "dense", "units": 256, "activation": "relu"}, {"type": "dense", "units": 3}]}]}', 2)
 ORDER BY 1;
SET mop.plan_hop_cost = '10ms';
SET mop.plan_state_cost = 0;
SELECT DISTINCT hop_s FROM mop_explain('xpl', '{"model": {"layers": [{"type": "dense", "units": 16, "activation": "relu"}, {"type": "dense", "units": 3}]}, "learning_rate": [0.01, 0.001]}', 2);
-- the run's own cost is in every makespan, once
SET mop.plan_run_cost = '100s';
SELECT bool_and(makespan_s > 100 AND makespan_s < 200) AS run_cost_once, count(*) FILTER (WHERE knee) AS knees,
       (SELECT knee FROM mop_explain_workers('xpl', '{"model": {"layers": [{"type": "dense", "units": 3}]}, "learning_rate": [0.1, 0.01]}', 1, 2) WHERE workers = 1) AS knee_at_1
  FROM mop_explain_workers('xpl', '{"model": {"layers": [{"type": "dense", "units": 3}]}, "learning_rate": [0.1, 0.01]}', 1, 2);
RESET mop.plan_hop_cost;
RESET mop.plan_state_cost;
RESET mop.plan_run_cost;
SELECT err($$SET mop.plan_hop_cost = -1$$);
-- profiles are kept in mop.profiles: a second plan of the dataset measures
-- nothing; one per network and batch size, not per learning rate
CREATE TEMP TABLE xspace AS SELECT '{"model": {"layers": [{"type": "dense", "units": 48, "activation": "relu"}, {"type": "dense", "units": 3}]},
                                     "learning_rate": [0.01, 0.001], "batch_size": [16, 64]}'::jsonb AS s;
SELECT count(*) AS profiles_before FROM mop.profiles WHERE dataset_id = (SELECT id FROM mop.datasets WHERE name = 'xpl') \gset
SELECT line FROM mop_explain_text('xpl', (SELECT s FROM xspace), 1) line WHERE line LIKE '  Profiles:%';
SELECT count(*) - :profiles_before AS new_profiles, count(*) FILTER (WHERE batch_size IN (16, 64)) AS of_16_and_64,
       bool_and(engine_version LIKE 'mop %') AS versioned
  FROM mop.profiles WHERE dataset_id = (SELECT id FROM mop.datasets WHERE name = 'xpl');
SELECT line FROM mop_explain_text('xpl', (SELECT s FROM xspace), 1) line WHERE line LIKE '  Profiles:%';
-- the same speed from the cache
SELECT count(DISTINCT rows_per_s) AS speeds FROM (SELECT rows_per_s FROM mop_explain('xpl', (SELECT s FROM xspace), 1)
                                                  UNION ALL SELECT rows_per_s FROM mop_explain('xpl', (SELECT s FROM xspace), 1)) t;
-- a profile of another library version is measured again, and replaced
UPDATE mop.profiles SET engine_version = 'mop 0.0' WHERE batch_size = 16;
SELECT line FROM mop_explain_text('xpl', (SELECT s FROM xspace), 1) line WHERE line LIKE '  Profiles:%';
SELECT count(*) AS old_versions FROM mop.profiles WHERE engine_version = 'mop 0.0';
-- a profile its owner edited into nonsense is measured again, not planned with
UPDATE mop.profiles SET rows_per_s = 'Infinity' WHERE batch_size = 16;
SELECT line FROM mop_explain_text('xpl', (SELECT s FROM xspace), 1) line WHERE line LIKE '  Profiles:%';
SELECT count(*) AS infinite_left FROM mop.profiles WHERE rows_per_s = 'Infinity';
-- a read-only transaction plans without keeping profiles
DELETE FROM mop.profiles WHERE batch_size = 64;
BEGIN TRANSACTION READ ONLY;
SELECT line FROM mop_explain_text('xpl', (SELECT s FROM xspace), 1) line WHERE line LIKE '  Profiles:%';
COMMIT;
SELECT count(*) AS kept_64 FROM mop.profiles WHERE batch_size = 64;
-- workers => 'auto': the plan's knee, capped by the partitions, the worker
-- processes, the cores and the configurations; a NOTICE says which (its
-- DETAIL holds the predicted times: VERBOSITY terse leaves it out)
CREATE TABLE xpl1 AS SELECT * FROM xpl WHERE id <= 400;
SELECT count(*) FROM mop_prepare('xpl1', 'label', ARRAY['v'], partitions => 1, seed => 1);
SET client_min_messages = notice;
\set VERBOSITY terse
SELECT count(*) AS models FROM mop_grid_search('xpl1', '{"model": {"layers": [{"type": "dense", "units": 3}]}, "learning_rate": [0.1, 0.01]}',
                                               epochs => 1, workers => 'auto');
SELECT count(*) AS models FROM mop_random_search('xpl1', '{"model": {"layers": [{"type": "dense", "units": 3}]}, "learning_rate": {"loguniform": [0.001, 0.1]}}',
                                                 trials => 2, epochs => 1, workers => 'AUTO');
\set VERBOSITY default
SET client_min_messages = warning;
-- one configuration on 4 partitions: one worker, whatever the machine
SELECT count(*) AS models FROM mop_grid_search('xpl', '{"model": {"layers": [{"type": "dense", "units": 3}]}}', epochs => 1, workers => 'auto');
SELECT workers FROM mop.runs WHERE id = (SELECT max(id) FROM mop.runs);
-- an integer in any form, or text holding one, as before
SELECT count(*) AS models FROM mop_grid_search('xpl', '{"model": {"layers": [{"type": "dense", "units": 3}]}, "learning_rate": [0.1, 0.01]}', epochs => 1, workers => 2::smallint);
SELECT workers FROM mop.runs WHERE id = (SELECT max(id) FROM mop.runs);
SELECT count(*) AS models FROM mop_grid_search('xpl', '{"model": {"layers": [{"type": "dense", "units": 3}]}, "learning_rate": [0.1, 0.01]}', epochs => 1, workers => '2');
SELECT workers FROM mop.runs WHERE id = (SELECT max(id) FROM mop.runs);
SELECT err($$SELECT * FROM mop_grid_search('xpl', '{"model": {"layers": [{"type": "dense", "units": 3}]}}', epochs => 1, workers => 'many')$$);
SELECT err($$SELECT * FROM mop_grid_search('xpl', '{"model": {"layers": [{"type": "dense", "units": 3}]}}', epochs => 1, workers => 1.5)$$);
SELECT err($$SELECT * FROM mop_grid_search('xpl', '{"model": {"layers": [{"type": "dense", "units": 3}]}}', epochs => 1, workers => 0)$$);
SELECT err($$SELECT * FROM mop_grid_search('xpl', '{"model": {"layers": [{"type": "dense", "units": 3}]}}', epochs => 1, workers => -1)$$);
SELECT err($$SELECT * FROM mop_grid_search('xpl', '{"model": {"layers": [{"type": "dense", "units": 3}]}}', epochs => 1, workers => '{2}'::int[])$$);
SELECT err($$SELECT * FROM mop_grid_search('xpl', '{"model": {"layers": [{"type": "dense", "units": 3}]}}', epochs => 1, workers => 100::bigint)$$);
-- workers => 'auto' reads mop.profiles but keeps nothing new: a write
-- would give the waiting call a transaction id, which keeps VACUUM from
-- reclaiming the checkpoints the run supersedes for the whole run
SELECT count(*) AS xpl1_profiles FROM mop.profiles WHERE dataset_id = (SELECT id FROM mop.datasets WHERE name = 'xpl1');
BEGIN;
SELECT count(*) AS models FROM mop_grid_search('xpl1', '{"model": {"layers": [{"type": "dense", "units": 5, "activation": "relu"}, {"type": "dense", "units": 3}]}, "learning_rate": [0.1, 0.01]}',
                                               epochs => 1, workers => 'auto');
SELECT pg_current_xact_id_if_assigned() IS NULL AS no_transaction_id;
COMMIT;
SELECT count(*) AS xpl1_profiles FROM mop.profiles WHERE dataset_id = (SELECT id FROM mop.datasets WHERE name = 'xpl1');
SELECT mop_drop_dataset('xpl1');
-- Hyperband in seconds: the plan's rows, the epochs each round adds (all of
-- them: mop_hyperband's 1581 for 81 and 3), at one mean epoch time
CREATE TEMP TABLE xhb AS SELECT * FROM mop_explain_hyperband('xpl', '{"model": {"layers": [{"type": "dense", "units": 3}]}, "learning_rate": {"loguniform": [0.001, 0.1]}}', 81, 3);
SELECT (SELECT count(*) FROM xhb) = (SELECT count(*) FROM mop_hyperband_plan(81, 3)) AS same_rows,
       (SELECT bool_and(h.configs = p.configs AND h.resource = p.resource) FROM xhb h JOIN mop_hyperband_plan(81, 3) p USING (bracket, round)) AS same_plan,
       sum(epochs) AS epochs, bool_and(seconds > 0) AS timed, count(DISTINCT round((seconds / epochs)::numeric, 9)) AS epoch_times
  FROM xhb;
SELECT bracket, round, configs, resource, epochs FROM xhb WHERE bracket = 2 ORDER BY round;
SELECT err($$SELECT * FROM mop_explain_hyperband('xpl', '{"model": {"layers": [{"type": "dense", "units": 3}]}}', 0)$$);
SELECT err($$SELECT * FROM mop_explain_hyperband('xpl', '{"model": {"layers": [{"type": "dense", "units": 3}]}}', 9, 1)$$);
SELECT err($$SELECT * FROM mop_explain_hyperband('nosuch', '{"model": {"layers": [{"type": "dense", "units": 3}]}}', 9)$$);
-- ASHA in seconds: its rungs (1, 3, 9 for min_resource 1, max_resource 9,
-- eta 3), the configurations and epochs when every rung promotes 1/eta and
-- at most, at the same mean epoch time as Hyperband's
CREATE TEMP TABLE xas AS SELECT * FROM mop_explain_asha('xpl', '{"model": {"layers": [{"type": "dense", "units": 3}]}, "learning_rate": {"loguniform": [0.001, 0.1]}}', 9, 3, 1, 20);
SELECT rung, resource, configs, epochs, configs_max, epochs_max FROM xas ORDER BY rung;
SELECT bool_and(seconds > 0 AND seconds_max >= seconds) AS timed,
       bool_and(abs(seconds / epochs - (SELECT min(seconds / epochs) FROM xhb)) < 1e-9) AS hyperband_epoch,
       bool_and(abs(seconds_max / epochs_max - seconds / epochs) < 1e-9) AS one_epoch_time
  FROM xas;
SELECT rung, resource, configs, configs_max FROM mop_explain_asha('xpl', '{"model": {"layers": [{"type": "dense", "units": 3}]}}', 10, 2, 2, 5) ORDER BY rung;
SELECT err($$SELECT * FROM mop_explain_asha('xpl', '{"model": {"layers": [{"type": "dense", "units": 3}]}}', 9, 3, 10)$$);
SELECT err($$SELECT * FROM mop_explain_asha('xpl', '{"model": {"layers": [{"type": "dense", "units": 3}]}}', 9, 3, 1, 0)$$);
SELECT err($$SELECT * FROM mop_explain_asha('xpl', '{"model": {"layers": [{"type": "dense", "units": 3}]}}', NULL)$$);
-- random search, TPE, PBT: trials x epochs at the mean epoch, for 1..max_workers
CREATE TEMP TABLE xtr AS SELECT * FROM mop_explain_trials('xpl', '{"model": {"layers": [{"type": "dense", "units": 3}]}, "learning_rate": {"loguniform": [0.001, 0.1]}}', 12, 4, 3);
SELECT count(*) AS workers, bool_and(makespan_s >= lower_bound_s - 1e-9) AS bounded, count(*) FILTER (WHERE knee) AS knees,
       max(makespan_s) FILTER (WHERE workers = 1) > 12 * 4 * (SELECT min(seconds / epochs) FROM xhb) AS one_worker_at_least_the_epochs,
       max(speedup) FILTER (WHERE workers = 1) AS speedup_1
  FROM xtr;
SELECT err($$SELECT * FROM mop_explain_trials('xpl', '{"model": {"layers": [{"type": "dense", "units": 3}]}}', 0)$$);
SELECT err($$SELECT * FROM mop_explain_trials('xpl', '{"model": {"layers": [{"type": "dense", "units": 3}]}}', 4, 0)$$);
SELECT err($$SELECT * FROM mop_explain_trials('nosuch', '{"model": {"layers": [{"type": "dense", "units": 3}]}}', 4)$$);
-- a dataset on segments: a hop on another server adds the state there and
-- back (mop.plan_segment_cost per MB), for the share of the hops there
-- (one of its two segments here); the placement is made up and rolled back
BEGIN;
CREATE TEMP TABLE xseg0 AS SELECT config_no, model_bytes, hop_s FROM mop_explain('xpl', '{"model": {"layers": [{"type": "dense", "units": 3}]}}', 1);
INSERT INTO mop.dataset_segments (dataset_id, segment, partition, remote_dataset_id, remote_name, buffers, bytes)
SELECT id, s, p, CASE WHEN s <> 'local' THEN 1 END, CASE WHEN s <> 'local' THEN 'xpl@0/0' END, 1, 1 FROM mop.datasets, (VALUES ('local', 0), ('local', 1), ('seg1', 2), ('seg1', 3)) v(s, p) WHERE name = 'xpl';
SELECT round(((x.hop_s - x0.hop_s) / (x0.model_bytes / 1048576.0) * 1000 / 0.5)::numeric, 6) AS ms_per_mb_there_and_back
  FROM mop_explain('xpl', '{"model": {"layers": [{"type": "dense", "units": 3}]}}', 1) x JOIN xseg0 x0 USING (config_no);
SELECT line FROM mop_explain_text('xpl', '{"model": {"layers": [{"type": "dense", "units": 3}]}}', 1) line WHERE line LIKE '  Segment Cost:%';
SET LOCAL mop.plan_segment_cost = 0;
SELECT bool_and(abs(x.hop_s - x0.hop_s) < 1e-12) AS same_without_it
  FROM mop_explain('xpl', '{"model": {"layers": [{"type": "dense", "units": 3}]}}', 1) x JOIN xseg0 x0 USING (config_no);
ROLLBACK;
-- a network has a profile per thread count: with a count set, at that
-- count only (its key and version say it); the automatic count also
-- profiles at all the cores (none more on a one-core machine)
DELETE FROM mop.profiles WHERE dataset_id = (SELECT id FROM mop.datasets WHERE name = 'xpl');
SET mop.threads_per_worker = 2;
SELECT count(*) AS configs FROM mop_explain('xpl', '{"model": {"layers": [{"type": "dense", "units": 40}, {"type": "dense", "units": 3}]}}', 1);
SELECT count(*) AS profiles, bool_and(spec_key LIKE '%@2') AS keyed_by_threads, bool_and(engine_version LIKE '%(2 threads)') AS versioned_by_threads
  FROM mop.profiles WHERE dataset_id = (SELECT id FROM mop.datasets WHERE name = 'xpl');
DELETE FROM mop.profiles WHERE dataset_id = (SELECT id FROM mop.datasets WHERE name = 'xpl');
RESET mop.threads_per_worker;
\set cores `nproc`
CREATE TEMP TABLE xauto AS SELECT * FROM mop_explain_workers('xpl', '{"model": {"layers": [{"type": "dense", "units": 40}, {"type": "dense", "units": 3}]},
                                                                "learning_rate": [0.1, 0.03, 0.01, 0.003, 0.001]}', 1, 2);
SELECT count(*) FILTER (WHERE spec_key NOT LIKE '%@%') AS one_thread,
       count(*) FILTER (WHERE spec_key = (SELECT spec_key FROM mop.profiles WHERE spec_key NOT LIKE '%@%' LIMIT 1) || '@' || least(:cores, 64))
         = CASE WHEN :cores > 1 THEN 1 ELSE 0 END AS all_cores_when_several,
       count(*) = CASE WHEN :cores > 1 THEN 2 ELSE 1 END AS no_other
  FROM mop.profiles WHERE dataset_id = (SELECT id FROM mop.datasets WHERE name = 'xpl');
-- every worker count fills the cores then: the efficiency and the knee
-- are those of one thread per worker (the same profile), the makespans
-- those of each count's threads
SET mop.threads_per_worker = 1;
CREATE TEMP TABLE xone AS SELECT * FROM mop_explain_workers('xpl', '{"model": {"layers": [{"type": "dense", "units": 40}, {"type": "dense", "units": 3}]},
                                                              "learning_rate": [0.1, 0.03, 0.01, 0.003, 0.001]}', 1, 2);
SELECT bool_and(abs(a.efficiency - o.efficiency) < 1e-9) AS same_efficiency, bool_and(a.knee = o.knee) AS same_knee,
       bool_and(a.makespan_s >= a.lower_bound_s - 1e-9) AS bounded
  FROM xauto a JOIN xone o USING (workers);
-- the longest-first scheduler ranks models by their profiles before they
-- have trained: the widest network of five starts first (one worker; the
-- coordinator profiles what mop.profiles does not hold)
SELECT count(*) AS models FROM mop_grid_search('xpl', '{"model": [{"layers": [{"type": "dense", "units": 2}, {"type": "dense", "units": 3}]},
                                                                  {"layers": [{"type": "dense", "units": 4}, {"type": "dense", "units": 3}]},
                                                                  {"layers": [{"type": "dense", "units": 512, "activation": "relu"}, {"type": "dense", "units": 512, "activation": "relu"}, {"type": "dense", "units": 3}]},
                                                                  {"layers": [{"type": "dense", "units": 6}, {"type": "dense", "units": 3}]},
                                                                  {"layers": [{"type": "dense", "units": 8}, {"type": "dense", "units": 3}]}],
                                                        "seed": 4}',
                                               epochs => 1, workers => 1, scheduler => 'longest', seed => 2);
SELECT max(id) AS longest_run FROM mop.runs \gset
SELECT jsonb_array_length(m.config->'model'->'layers') AS first_started_layers
  FROM mop.hops h JOIN mop.models m ON m.id = h.model_id
 WHERE h.run_id = :longest_run ORDER BY h.started_at, h.id LIMIT 1;
SELECT count(*) AS profiled_by_the_run
  FROM mop.profiles WHERE dataset_id = (SELECT id FROM mop.datasets WHERE name = 'xpl') AND spec_key NOT LIKE '%@%';
-- dropping a dataset drops its profiles
SELECT count(*) FILTER (WHERE spec_key NOT LIKE '%@%') AS xpl_profiles FROM mop.profiles WHERE dataset_id = (SELECT id FROM mop.datasets WHERE name = 'xpl');
SELECT id AS xpl_id FROM mop.datasets WHERE name = 'xpl' \gset
SELECT mop_drop_dataset('xpl');
SELECT count(*) AS left_after_drop FROM mop.profiles WHERE dataset_id = :xpl_id;
