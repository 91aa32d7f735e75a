-- budgets: time_budget => and max_trials => on the search functions, a
-- run's name and tags; mop_resume, mop_wait and mop_cancel by name.
-- A run whose time budget is spent starts no new sub-epoch, lets those in
-- flight commit, stops its other models (status 'stopped', a 'time_budget'
-- decision) and ends 'done' with a note.  max_trials keeps the first N
-- configurations (a NOTICE says so).  Bad values are 22023 naming the
-- argument; a name a run of the role already has is 42710.
-- (uses prepare.sql's blobs: 3 partitions)
SET client_min_messages = warning;
-- err() (install.sql) with the hint
CREATE FUNCTION bud_err(q text) RETURNS text LANGUAGE plpgsql AS $$
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
CREATE TABLE bud_space AS
SELECT '{"model": {"layers": [{"type": "dense", "units": 8, "activation": "relu"}, {"type": "dense", "units": 3}]},
         "optimizer": "adam", "learning_rate": [0.01, 0.003], "batch_size": [16, 32], "seed": 1}'::jsonb AS grid,
       '{"model": {"layers": [{"type": "dense", "units": 8, "activation": "relu"}, {"type": "dense", "units": 3}]},
         "optimizer": "sgd", "learning_rate": {"loguniform": [0.0001, 0.1]}, "batch_size": [16, 32, 64]}'::jsonb AS sampled;

-- every error form ------------------------------------------------------------
SELECT bud_err($$SELECT mop_grid_search('blobs', (SELECT grid FROM bud_space), max_trials => 0)$$) AS grid_max_trials_0;
SELECT bud_err($$SELECT mop_random_search('blobs', (SELECT sampled FROM bud_space), trials => 3, max_trials => -1)$$) AS random_max_trials_negative;
SELECT bud_err($$SELECT mop_tpe('blobs', (SELECT sampled FROM bud_space), trials => 3, max_trials => 0)$$) AS tpe_max_trials_0;
SELECT bud_err($$SELECT mop_pbt('blobs', (SELECT sampled FROM bud_space), max_trials => 0)$$) AS pbt_max_trials_0;
SELECT bud_err($$SELECT mop_pbt('blobs', (SELECT sampled FROM bud_space), max_trials => 1)$$) AS pbt_max_trials_1;
SELECT bud_err($$SELECT mop_hyperband('blobs', (SELECT sampled FROM bud_space), max_resource => 9, max_trials => 0)$$) AS hyperband_max_trials_0;
-- Hyperband keeps whole brackets: its first (9 configurations at R 9, eta 3) must fit
SELECT bud_err($$SELECT mop_hyperband('blobs', (SELECT sampled FROM bud_space), max_resource => 9, max_trials => 8)$$) AS hyperband_first_bracket_too_big;
-- ASHA's own max_trials
SELECT bud_err($$SELECT mop_asha('blobs', (SELECT sampled FROM bud_space), max_resource => 3, max_trials => 0)$$) AS asha_max_trials_0;
SELECT bud_err($$SELECT mop_grid_search('blobs', (SELECT grid FROM bud_space), time_budget => '0 seconds')$$) AS budget_zero;
SELECT bud_err($$SELECT mop_random_search('blobs', (SELECT sampled FROM bud_space), trials => 2, time_budget => '-5 minutes')$$) AS budget_negative;
SELECT bud_err($$SELECT mop_asha('blobs', (SELECT sampled FROM bud_space), max_resource => 3, time_budget => '1 day -24 hours')$$) AS budget_sums_to_zero;
SELECT bud_err($$SELECT mop_hyperband('blobs', (SELECT sampled FROM bud_space), max_resource => 3, time_budget => '-1 millisecond')$$) AS hyperband_budget;
SELECT bud_err($$SELECT mop_pbt('blobs', (SELECT sampled FROM bud_space), time_budget => '-1 millisecond')$$) AS pbt_budget;
SELECT bud_err($$SELECT mop_tpe('blobs', (SELECT sampled FROM bud_space), trials => 2, time_budget => '-1 millisecond')$$) AS tpe_budget;
SELECT bud_err($$SELECT mop_grid_search('blobs', (SELECT grid FROM bud_space), name => '')$$) AS empty_name;
SELECT bud_err($$SELECT mop_grid_search('blobs', (SELECT grid FROM bud_space), name => '042')$$) AS numeric_name;
SELECT bud_err($$SELECT mop_grid_search('blobs', (SELECT grid FROM bud_space), tags => '[1, 2]')$$) AS tags_array;
SELECT bud_err($$SELECT mop_tpe('blobs', (SELECT sampled FROM bud_space), trials => 2, tags => '"nightly"')$$) AS tags_string;
SELECT bud_err($$SELECT mop_asha('blobs', (SELECT sampled FROM bud_space), max_resource => 3, tags => 'null')$$) AS tags_json_null;
-- no run of that name (the text overloads), no run of that id (the bigint ones)
SELECT bud_err($$SELECT mop_wait('bud_nothing')$$) AS wait_unknown_name;
SELECT bud_err($$SELECT mop_cancel('bud_nothing')$$) AS cancel_unknown_name;
SELECT bud_err($$SELECT * FROM mop_resume('bud_nothing')$$) AS resume_unknown_name;
SELECT bud_err($$SELECT * FROM mop_resume(NULL::text)$$) AS resume_null_name;
SELECT bud_err($$SELECT mop_wait(999999999)$$) AS wait_unknown_id;
SELECT bud_err($$SELECT * FROM mop_resume(999999999)$$) AS resume_unknown_id;
-- an unknown-typed literal is a name, a number an id: each call picks its overload
SELECT bud_err($$SELECT mop_wait('999999999')$$) AS quoted_digits_are_a_name;
SELECT p.oid::regprocedure AS overload
  FROM pg_proc p WHERE p.proname IN ('mop_resume', 'mop_wait', 'mop_cancel') ORDER BY 1::text;
-- nothing was started by any of these
SELECT count(*) AS runs_started FROM mop.runs WHERE name LIKE 'bud%' OR tags IS NOT NULL;

-- max_trials on a grid: the first N of the grid, in its order -----------------
CREATE TEMP TABLE bud_full AS
SELECT * FROM mop_grid_search('blobs', (SELECT grid FROM bud_space), epochs => 1, workers => 3,
                              seed => 3, deterministic => true, name => 'bud_full');
-- (wait => false: a NOTICE without progress lines; mop_wait by name)
SET client_min_messages = notice;
SELECT run_id AS capped FROM mop_grid_search('blobs', (SELECT grid FROM bud_space), epochs => 1,
                                             workers => 3, seed => 3, deterministic => true,
                                             max_trials => 3, wait => false, name => 'bud_capped',
                                             tags => '{"team": "vision", "ticket": 42}') LIMIT 1 \gset
SET client_min_messages = warning;
SELECT mop_wait('bud_capped') AS waited_by_name;
SELECT count(*) AS models, bool_and(m.status = 'done') AS all_done
  FROM mop.models m WHERE m.run_id = :capped;
-- the same configurations as the grid's first three
SELECT array_agg(c.config ORDER BY c.id) = (SELECT (array_agg(f.config ORDER BY f.id))[1:3]
                                              FROM mop.models f JOIN mop.runs r ON r.id = f.run_id
                                             WHERE r.name = 'bud_full') AS first_three_of_the_grid
  FROM mop.models c WHERE c.run_id = :capped;
-- a name and tags in mop.runs; mop_wait by id and by name agree
SELECT name, tags, note, status, time_used IS NOT NULL AS time_recorded
  FROM mop.runs WHERE name LIKE 'bud%' ORDER BY id;
SELECT mop_wait(:capped) = mop_wait('bud_capped') AS same_run;
-- a second run of that name is refused, and nothing starts
SELECT bud_err($$SELECT mop_grid_search('blobs', (SELECT grid FROM bud_space), epochs => 1, name => 'bud_capped')$$) ~
       '^42710: a run named "bud_capped" already exists' AS duplicate_name;
SELECT count(*) AS runs_named_bud_capped FROM mop.runs WHERE name = 'bud_capped';
-- names are unique per role: another role's run may have it (written here
-- by the superuser, who sees every role's runs and is given its own first)
INSERT INTO mop.runs (kind, dataset_id, name, owner, status)
SELECT 'train', id, 'bud_capped', 'regress_mop_nobody', 'failed' FROM mop.datasets WHERE name = 'blobs';
SELECT mop_wait('bud_capped') AS own_run_first;
SELECT bud_err($$INSERT INTO mop.runs (kind, dataset_id, name, owner) SELECT 'train', id, 'bud_capped', 'regress_mop_nobody' FROM mop.datasets WHERE name = 'blobs'$$) ~ '^23505' AS unique_per_owner;
DELETE FROM mop.runs WHERE owner = 'regress_mop_nobody';
-- what the catalog itself refuses
SELECT bud_err($$UPDATE mop.runs SET tags = '[1]' WHERE name = 'bud_capped'$$) ~ '^23514' AS tags_object_only;
SELECT bud_err($$UPDATE mop.runs SET name = '7' WHERE name = 'bud_capped'$$) ~ '^23514' AS no_numeric_names;

-- max_trials on random search: the first N draws ------------------------------
SET client_min_messages = notice;
SELECT run_id AS rcap FROM mop_random_search('blobs', (SELECT sampled FROM bud_space), trials => 5,
                                             max_trials => 2, epochs => 1, workers => 3, seed => 9,
                                             wait => false) LIMIT 1 \gset
SET client_min_messages = warning;
SELECT mop_wait(:rcap) AS rcap_status;
CREATE TEMP TABLE bud_r2 AS
SELECT * FROM mop_random_search('blobs', (SELECT sampled FROM bud_space), trials => 2, epochs => 1,
                                workers => 3, seed => 9);
SELECT count(*) AS models,
       array_agg(m.config ORDER BY m.id) = (SELECT array_agg(config ORDER BY model_id) FROM bud_r2)
         AS same_as_trials_2
  FROM mop.models m WHERE m.run_id = :rcap;

-- a time budget spent at once: nothing new starts, every model is stopped ---
-- (1 millisecond is spent before the workers are up; at most one sub-epoch
-- per worker could have been in flight)
CREATE TEMP TABLE bud_tb AS
SELECT * FROM mop_grid_search('blobs', (SELECT grid FROM bud_space), epochs => 3, workers => 3,
                              time_budget => '1 millisecond', name => 'bud_budget');
SELECT r.status, r.note, r.error IS NULL AS no_error, r.options->>'time_budget_ms' AS budget_ms,
       r.time_used > '0'::interval AS time_counted
  FROM mop.runs r WHERE r.name = 'bud_budget';
SELECT count(*) AS models, count(*) FILTER (WHERE m.status = 'stopped') AS stopped,
       bool_and(m.epochs_done < 3) AS none_finished
  FROM mop.models m JOIN mop.runs r ON r.id = m.run_id WHERE r.name = 'bud_budget';
SELECT count(*) <= 3 AS at_most_in_flight_work
  FROM mop.hops h JOIN mop.runs r ON r.id = h.run_id WHERE r.name = 'bud_budget';
SELECT d.action, d.why, count(*) AS decisions,
       bool_and(d.reason LIKE 'time budget spent: stopped after % of 3 epochs') AS reason_ok
  FROM mop.decisions d JOIN mop.runs r ON r.id = d.run_id WHERE r.name = 'bud_budget'
 GROUP BY 1, 2;
-- the search's result says it too
SELECT count(*) AS rows, bool_and(status = 'stopped') AS all_stopped FROM bud_tb;
-- a finished run is not resumed, by name as by id
SELECT regexp_replace(bud_err($$SELECT * FROM mop_resume('bud_budget')$$), '\d+', 'N', 'g') AS resume_done;

-- adaptive searches stop scheduling too: ASHA and TPE start no trial, PBT's
-- members (all created at the start) are stopped; max_trials caps TPE's
-- trials and PBT's population, Hyperband's brackets
SELECT count(*) AS asha_rows, bool_and(model_id IS NULL) AS no_trial
  FROM mop_asha('blobs', (SELECT sampled FROM bud_space), max_resource => 3, workers => 3,
                time_budget => '1 millisecond', name => 'bud_asha');
SET client_min_messages = notice;
SELECT run_id AS tpe_run FROM mop_tpe('blobs', (SELECT sampled FROM bud_space), trials => 5,
                                      max_trials => 2, epochs => 2, workers => 3,
                                      time_budget => '1 millisecond', wait => false,
                                      name => 'bud_tpe') LIMIT 1 \gset
SELECT run_id AS pbt_run FROM mop_pbt('blobs', (SELECT sampled FROM bud_space), population => 4,
                                      max_trials => 3, epochs => 2, workers => 3,
                                      time_budget => '1 millisecond', wait => false,
                                      name => 'bud_pbt') LIMIT 1 \gset
SELECT run_id AS hb_run FROM mop_hyperband('blobs', (SELECT sampled FROM bud_space), max_resource => 3,
                                           max_trials => 4, workers => 3, wait => false,
                                           name => 'bud_hb') LIMIT 1 \gset
SET client_min_messages = warning;
SELECT mop_wait('bud_tpe') AS tpe, mop_wait('bud_pbt') AS pbt, mop_wait('bud_hb') AS hyperband;
SELECT r.name, r.kind, r.status, r.note,
       r.options->>'trials' AS trials, r.options->>'population' AS population,
       r.options->>'brackets' AS brackets,
       (SELECT count(*) FROM mop.models m WHERE m.run_id = r.id) AS models,
       (SELECT count(*) FROM mop.models m WHERE m.run_id = r.id AND m.status = 'stopped') AS stopped,
       CASE WHEN r.note IS NOT NULL
            THEN (SELECT count(*) FROM mop.hops h WHERE h.run_id = r.id) <= 3 END AS at_most_in_flight
  FROM mop.runs r WHERE r.name IN ('bud_asha', 'bud_tpe', 'bud_pbt', 'bud_hb') ORDER BY r.id;
-- Hyperband at R 3, eta 3 has brackets of 3 and 2 configurations: max_trials
-- 4 keeps the first, whose best model is promoted to 3 epochs
SELECT count(*) AS hb_models, max(epochs_done) AS most_epochs
  FROM mop.models WHERE run_id = :hb_run;

-- a budget not spent: no note; resume by name, and the budget counts the
-- run's training time over its starts -----------------------------------------
SELECT run_id AS long_run FROM mop_grid_search('blobs', (SELECT grid FROM bud_space), epochs => 1000,
                                               workers => 3, time_budget => '1 hour',
                                               wait => false, name => 'bud_long') LIMIT 1 \gset
SELECT mop_cancel('bud_long') AS cancelled_by_name;
SELECT time_used AS used_first FROM mop.runs WHERE id = :long_run \gset
SELECT count(DISTINCT run_id) = 1 AND min(run_id) = :long_run AS resumed_the_named_run
  FROM mop_resume('bud_long', workers => 3, wait => false);
SELECT mop_cancel('bud_long') AS cancelled_again;
SELECT status, note, time_used > :'used_first'::interval AS time_added,
       options->>'time_budget_ms' AS budget_ms
  FROM mop.runs WHERE id = :long_run;
