-- security: a superuser and two tenants share mop.  Each tenant reads the
-- views (its own rows only); no tenant can write a row of any mop table that
-- refers to another role's dataset, run or model (42501, the same error as
-- for an id that does not exist, so nothing tells whether another role's
-- row exists), set an id by hand, or change another role's rows.
SET client_min_messages = warning;

-- attempt(q): "ok, N rows" or "SQLSTATE: message (detail)"
CREATE FUNCTION attempt(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  d text;
  n bigint;
BEGIN
  EXECUTE q;
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN 'ok, ' || n || ' rows';
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL;
  RETURN SQLSTATE || ': ' || SQLERRM || coalesce(' (' || nullif(d, '') || ')', '');
END $$;
DROP ROLE IF EXISTS regress_mop_alice;
DROP ROLE IF EXISTS regress_mop_bob;
-- LOGIN: a search's background workers connect as the role that started it
CREATE ROLE regress_mop_alice LOGIN;
CREATE ROLE regress_mop_bob LOGIN;
CREATE TABLE tenant_pts AS
SELECT (i % 3)::text AS label, sin(i) + (i % 3) AS x, cos(i * 1.3) - (i % 3) AS y
  FROM generate_series(1, 300) i;
GRANT SELECT ON tenant_pts TO regress_mop_alice, regress_mop_bob;

-- the superuser's run, alice's search (runs, models, epochs, hops and a
-- decision of her own), bob's model
SELECT dataset_name FROM mop_prepare('tenant_pts', 'label', dataset => 'su_pts', partitions => 2);
SELECT mop_train('su_pts', '{"model": [{"type": "dense", "units": 3}], "seed": 1}', 1) AS su_model \gset
SET ROLE regress_mop_alice;
SELECT dataset_name FROM mop_prepare('tenant_pts', 'label', dataset => 'alice_pts', partitions => 2);
SELECT count(*) AS models, bool_and(status = 'done') AS done
  FROM mop_grid_search('alice_pts', '{"model": [{"type": "dense", "units": 3}], "learning_rate": [0.05, 0.01]}',
                       epochs => 2, workers => 2);
SELECT attempt($$INSERT INTO mop.decisions (run_id, model_id, action, why, reason)
                 SELECT run_id, id, 'report', 'test', 'her own' FROM mop.models ORDER BY id LIMIT 1$$) AS own_decision;
RESET ROLE;
SET ROLE regress_mop_bob;
SELECT dataset_name FROM mop_prepare('tenant_pts', 'label', dataset => 'bob_pts', partitions => 2);
SELECT mop_train('bob_pts', '{"model": [{"type": "dense", "units": 3}], "seed": 1}', 1) > 0 AS trained;
SELECT attempt($$INSERT INTO mop.decisions (run_id, model_id, action, why, reason)
                 SELECT run_id, id, 'report', 'test', 'his own' FROM mop.models$$) AS own_decision;
RESET ROLE;
SELECT (SELECT id FROM mop.datasets WHERE name = 'alice_pts') AS a_ds,
       (SELECT max(id) FROM mop.runs WHERE owner = 'regress_mop_alice') AS a_run,
       (SELECT min(id) FROM mop.models WHERE owner = 'regress_mop_alice') AS a_model,
       (SELECT id FROM mop.datasets WHERE name = 'bob_pts') AS b_ds,
       (SELECT max(id) FROM mop.runs WHERE owner = 'regress_mop_bob') AS b_run,
       (SELECT min(id) FROM mop.models WHERE owner = 'regress_mop_bob') AS b_model,
       (SELECT run_id FROM mop.models WHERE id = :su_model) AS su_run \gset
CREATE TEMP TABLE before AS
SELECT 'datasets' AS t, count(*) AS n, md5(string_agg(d::text, ',' ORDER BY id)) AS h FROM mop.datasets d
UNION ALL SELECT 'buffers', count(*), md5(string_agg(b::text, ',' ORDER BY dataset_id, split, partition, buffer_no)) FROM mop.buffers b
UNION ALL SELECT 'runs', count(*), md5(string_agg(r::text, ',' ORDER BY id)) FROM mop.runs r
UNION ALL SELECT 'models', count(*), md5(string_agg(m::text, ',' ORDER BY id)) FROM mop.models m
UNION ALL SELECT 'epochs', count(*), md5(string_agg(e::text, ',' ORDER BY model_id, epoch)) FROM mop.epochs e
UNION ALL SELECT 'hops', count(*), md5(string_agg(h::text, ',' ORDER BY id)) FROM mop.hops h
UNION ALL SELECT 'decisions', count(*), md5(string_agg(x::text, ',' ORDER BY id)) FROM mop.decisions x;

-- the views: every tenant may read them and sees its own rows; the
-- superuser sees every run
SET ROLE regress_mop_alice;
SELECT (SELECT count(*) FROM mop.best) AS best, (SELECT count(*) FROM mop.leaderboard) AS leaderboard,
       (SELECT count(*) FROM mop.progress) AS progress,
       (SELECT bool_and(owner = current_user) FROM mop.models WHERE id IN (SELECT model_id FROM mop.leaderboard)) AS all_hers;
RESET ROLE;
SET ROLE regress_mop_bob;
SELECT (SELECT count(*) FROM mop.best) AS best, (SELECT count(*) FROM mop.leaderboard) AS leaderboard,
       (SELECT count(*) FROM mop.progress) AS progress,
       (SELECT bool_and(owner = current_user) FROM mop.models WHERE id IN (SELECT model_id FROM mop.leaderboard)) AS all_his;
RESET ROLE;
SELECT count(*) FILTER (WHERE b.run_id IN (:a_run, :b_run, :su_run)) AS superuser_sees_best_of_all
  FROM mop.best b;
-- the planner's profiles (mop.profiles): a tenant sees, changes and
-- deletes those of its own datasets only (one profile each: at one thread)
SET mop.threads_per_worker = 1;
SET ROLE regress_mop_alice;
SELECT count(*) AS configs FROM mop_explain('alice_pts', '{"model": [{"type": "dense", "units": 3}]}', 1);
SELECT count(*) AS alice_profiles FROM mop.profiles;
RESET ROLE;
SET ROLE regress_mop_bob;
SELECT count(*) AS bob_sees FROM mop.profiles;
WITH u AS (UPDATE mop.profiles SET rows_per_s = 1 RETURNING 1) SELECT count(*) AS bob_updates FROM u;
WITH d AS (DELETE FROM mop.profiles RETURNING 1) SELECT count(*) AS bob_deletes FROM d;
RESET ROLE;
SELECT count(*) AS superuser_sees FROM mop.profiles p JOIN mop.datasets d ON d.id = p.dataset_id WHERE d.name = 'alice_pts';
RESET mop.threads_per_worker;
-- a run in progress shows in mop.progress for its owner only
SET ROLE regress_mop_alice;
SELECT DISTINCT run_id AS live FROM mop_grid_search('alice_pts',
  '{"model": {"layers": [{"type": "dense", "units": 16, "activation": "relu"}, {"type": "dense", "units": 3}]},
    "batch_size": 1, "learning_rate": [0.01, 0.003]}', epochs => 500, workers => 2, wait => false) \gset
RESET ROLE;
CREATE FUNCTION pg_temp.progress_of(r bigint) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1..600 LOOP
    IF EXISTS (SELECT 1 FROM mop.progress WHERE run_id = r AND model_id IS NOT NULL) THEN
      RETURN true;
    END IF;
    PERFORM pg_sleep(0.05);
  END LOOP;
  RETURN false;
END $$;
SELECT pg_temp.progress_of(:live) AS training;
SET ROLE regress_mop_bob;
SELECT count(*) AS bob_sees FROM mop.progress;
RESET ROLE;
SET ROLE regress_mop_alice;
SELECT count(*) > 0 AS alice_sees FROM mop.progress WHERE run_id = :live;
SELECT mop_cancel(:live) AS cancel;
RESET ROLE;
DELETE FROM mop.runs WHERE id = :live;

-- inserts that refer to another role's rows: %1$s alice's dataset, %2$s
-- her run, %3$s her model, %7$s the superuser's run; %4$s..%6$s are bob's
-- own.  Each fails with 42501, and with the same error when the referred
-- id does not exist at all.
SET ROLE regress_mop_bob;
SELECT what, attempt(format(q, :a_ds, :a_run, :a_model, :b_ds, :b_run, :b_model, :su_run)) AS others_row,
       attempt(format(q, :a_ds, :a_run, :a_model, :b_ds, :b_run, :b_model, :su_run))
         = attempt(format(q, 999999, 999998, 999997, :b_ds, :b_run, :b_model, 999996)) AS same_as_no_row
  FROM (VALUES
    ('buffers -> dataset', $$INSERT INTO mop.buffers (dataset_id, split, partition, buffer_no, rows, x, y)
                             VALUES (%1$s, 'train', 7, 0, 1, '\x0000803f', '\x00000000')$$),
    ('runs -> dataset', $$INSERT INTO mop.runs (kind, dataset_id) VALUES ('train', %1$s)$$),
    ('models -> dataset', $$INSERT INTO mop.models (dataset_id, config, metric, higher_is_better)
                            VALUES (%1$s, '{}', 'accuracy', true)$$),
    ('models -> run', $$INSERT INTO mop.models (run_id, dataset_id, config, metric, higher_is_better, status, best_valid_metric)
                        VALUES (%2$s, %4$s, '{}', 'accuracy', true, 'done', 1.0)$$),
    ('models -> superuser''s run', $$INSERT INTO mop.models (run_id, dataset_id, config, metric, higher_is_better)
                                     VALUES (%7$s, %4$s, '{}', 'accuracy', true)$$),
    ('epochs -> model', $$INSERT INTO mop.epochs (model_id, epoch) VALUES (%3$s, 99)$$),
    ('profiles -> dataset', $$INSERT INTO mop.profiles (dataset_id, spec_key, engine_version, batch_size, step_ms, rows_per_s, eval_rows_per_s)
                              VALUES (%1$s, 'planted', 'any', 32, 1, 1, 1)$$),
    ('hops -> run', $$INSERT INTO mop.hops (run_id, model_id, epoch, partition, worker, started_at, finished_at, rows)
                      VALUES (%2$s, %6$s, 99, 0, 0, now(), now(), 1)$$),
    ('hops -> model', $$INSERT INTO mop.hops (run_id, model_id, epoch, partition, worker, started_at, finished_at, rows)
                        VALUES (%5$s, %3$s, 99, 0, 0, now(), now(), 1)$$),
    ('decisions -> run', $$INSERT INTO mop.decisions (run_id, model_id, action, why, reason)
                           VALUES (%2$s, %6$s, 'stop', 'x', 'x')$$),
    ('decisions -> model', $$INSERT INTO mop.decisions (run_id, model_id, action, why, reason)
                             VALUES (%5$s, %3$s, 'stop', 'x', 'x')$$),
    ('decisions -> parent model', $$INSERT INTO mop.decisions (run_id, model_id, action, why, reason, parent_model_id)
                                    VALUES (%5$s, %6$s, 'exploit', 'x', 'x', %3$s)$$),
    ('datasets -> owner', $$INSERT INTO mop.datasets (name, owner, source, features, feature_kind, input_shape,
                              n_features, target, target_kind, target_type, normalized, partitions, buffer_rows,
                              validation, train_rows, valid_rows, seed)
                            VALUES ('planted', 'regress_mop_alice', 'x', '{x}', 'columns', '{1,1,1}', 1, 'label',
                                    'class', 'text', false, 1, 1, 0, 1, 0, 0)$$)
  ) AS c(what, q);
-- updates of bob's own rows to refer to another role's rows
SELECT what, attempt(format(q, :a_ds, :a_run, :a_model, :b_ds, :b_run, :b_model, :su_run)) AS others_row,
       attempt(format(q, :a_ds, :a_run, :a_model, :b_ds, :b_run, :b_model, :su_run))
         = attempt(format(q, 999999, 999998, 999997, :b_ds, :b_run, :b_model, 999996)) AS same_as_no_row
  FROM (VALUES
    ('buffers -> dataset', $$UPDATE mop.buffers SET dataset_id = %1$s WHERE dataset_id = %4$s$$),
    ('runs -> dataset', $$UPDATE mop.runs SET dataset_id = %1$s WHERE id = %5$s$$),
    ('models -> dataset', $$UPDATE mop.models SET dataset_id = %1$s WHERE id = %6$s$$),
    ('models -> run', $$UPDATE mop.models SET run_id = %2$s WHERE id = %6$s$$),
    ('models -> superuser''s run', $$UPDATE mop.models SET run_id = %7$s WHERE id = %6$s$$),
    ('epochs -> model', $$UPDATE mop.epochs SET model_id = %3$s WHERE model_id = %6$s$$),
    ('hops -> run', $$UPDATE mop.hops SET run_id = %2$s WHERE run_id = %5$s$$),
    ('hops -> model', $$UPDATE mop.hops SET model_id = %3$s WHERE run_id = %5$s$$),
    ('decisions -> run', $$UPDATE mop.decisions SET run_id = %2$s WHERE run_id = %5$s$$),
    ('decisions -> model', $$UPDATE mop.decisions SET model_id = %3$s WHERE run_id = %5$s$$),
    ('decisions -> parent model', $$UPDATE mop.decisions SET parent_model_id = %3$s WHERE run_id = %5$s$$),
    ('datasets -> owner', $$UPDATE mop.datasets SET owner = 'regress_mop_alice' WHERE id = %4$s$$),
    ('runs -> owner', $$UPDATE mop.runs SET owner = 'regress_mop_alice' WHERE id = %5$s$$),
    ('models -> owner', $$UPDATE mop.models SET owner = 'regress_mop_alice' WHERE id = %6$s$$)
  ) AS c(what, q);
-- another role's rows cannot be changed or deleted: they are not there
-- for bob (row-level security), so nothing happens
SELECT what, attempt(format(q, :a_ds, :a_run, :a_model, :su_run)) AS others_rows
  FROM (VALUES
    ('update datasets', $$UPDATE mop.datasets SET seed = 7 WHERE id = %1$s$$),
    ('update buffers', $$UPDATE mop.buffers SET rows = rows WHERE dataset_id = %1$s$$),
    ('update runs', $$UPDATE mop.runs SET status = 'failed' WHERE id IN (%2$s, %4$s)$$),
    ('update models', $$UPDATE mop.models SET state = NULL WHERE id = %3$s$$),
    ('update epochs', $$UPDATE mop.epochs SET valid_metric = 1 WHERE model_id = %3$s$$),
    ('update hops', $$UPDATE mop.hops SET loss = 0 WHERE run_id = %2$s$$),
    ('update decisions', $$UPDATE mop.decisions SET why = 'x' WHERE run_id = %2$s$$),
    ('delete buffers', $$DELETE FROM mop.buffers WHERE dataset_id = %1$s$$),
    ('delete epochs', $$DELETE FROM mop.epochs WHERE model_id = %3$s$$),
    ('delete hops', $$DELETE FROM mop.hops WHERE run_id = %2$s$$),
    ('delete decisions', $$DELETE FROM mop.decisions WHERE run_id = %2$s$$),
    ('delete models', $$DELETE FROM mop.models WHERE id = %3$s$$),
    ('delete runs', $$DELETE FROM mop.runs WHERE id IN (%2$s, %4$s)$$),
    ('delete datasets', $$DELETE FROM mop.datasets WHERE id = %1$s$$)
  ) AS c(what, q);
-- ids come from the identities: an explicit id (which would tell whether
-- that id is taken, or take it from whoever gets it next) is refused
SELECT what, attempt(format(q, :b_ds, :b_run, :b_model)) AS explicit_id
  FROM (VALUES
    ('insert runs', $$INSERT INTO mop.runs (id, kind, dataset_id) VALUES (%2$s + 1000, 'train', %1$s)$$),
    ('insert models', $$INSERT INTO mop.models (id, dataset_id, config, metric, higher_is_better)
                        VALUES (%3$s + 1000, %1$s, '{}', 'accuracy', true)$$),
    ('insert hops', $$INSERT INTO mop.hops (id, run_id, model_id, epoch, partition, worker, started_at, finished_at, rows)
                      VALUES (999999, %2$s, %3$s, 99, 0, 0, now(), now(), 1)$$),
    ('insert decisions', $$INSERT INTO mop.decisions (id, run_id, model_id, action, why, reason)
                           VALUES (999999, %2$s, %3$s, 'stop', 'x', 'x')$$),
    ('update datasets', $$UPDATE mop.datasets SET id = id + 1000 WHERE id = %1$s$$),
    ('update runs', $$UPDATE mop.runs SET id = id + 1000 WHERE id = %2$s$$),
    ('update models', $$UPDATE mop.models SET id = id + 1000 WHERE id = %3$s$$),
    ('update hops', $$UPDATE mop.hops SET id = id + 1000 WHERE run_id = %2$s$$),
    ('update decisions', $$UPDATE mop.decisions SET id = id + 1000 WHERE run_id = %2$s$$)
  ) AS c(what, q);
-- the functions, given another role's ids: the same answer as for ids that
-- do not exist (ids replaced by N)
SELECT what, regexp_replace(attempt(format(q, :a_run, :a_model)), '(run|model) \d+', '\1 N', 'g') AS others_row,
       regexp_replace(attempt(format(q, :a_run, :a_model)), '(run|model) \d+', '\1 N', 'g')
         = regexp_replace(attempt(format(q, 999999, 999998)), '(run|model) \d+', '\1 N', 'g') AS same_as_no_row
  FROM (VALUES
    ('mop_predict', $$SELECT mop_predict(%2$s, ARRAY[1.0, 2.0])$$),
    ('mop_predict_proba', $$SELECT mop_predict_proba(%2$s, ARRAY[1.0, 2.0])$$),
    ('mop_evaluate', $$SELECT * FROM mop_evaluate(%2$s, 'tenant_pts')$$),
    ('mop_resume', $$SELECT * FROM mop_resume(%1$s)$$),
    ('mop_replay', $$SELECT * FROM mop_replay(%1$s)$$),
    ('mop_wait', $$SELECT mop_wait(%1$s)$$),
    ('mop_cancel', $$SELECT mop_cancel(%1$s)$$),
    ('mop_set_workers', $$SELECT mop_set_workers(%1$s, 1)$$),
    ('mop_pbt_schedule', $$SELECT * FROM mop_pbt_schedule(%2$s)$$),
    ('warm_start', $$SELECT * FROM mop_grid_search('bob_pts', '{"model": [{"type": "dense", "units": 3}]}', epochs => 1, warm_start => %1$s)$$),
    ('train_agg', $$SELECT (mop.train_agg(m.state, b.x, b.y)).status FROM mop.models m, mop.buffers b
                    WHERE m.id = %2$s AND b.dataset_id = m.dataset_id HAVING count(*) > 0$$)
  ) AS c(what, q);
SELECT mop_drop_dataset('alice_pts') AS drops_others_dataset;
SELECT err($$SELECT mop.init_model('alice_pts', '{"model": [{"type": "dense", "units": 3}]}')$$) AS init_on_others_dataset;
SELECT err($$SELECT * FROM mop_grid_search('alice_pts', '{"model": [{"type": "dense", "units": 3}]}', epochs => 1)$$) AS search_on_others_dataset;
RESET ROLE;

-- nothing above changed a row of any table
SELECT b.t, b.n = a.n AND b.h = a.h AS unchanged
  FROM before b JOIN (
    SELECT 'datasets' AS t, count(*) AS n, md5(string_agg(d::text, ',' ORDER BY id)) AS h FROM mop.datasets d
    UNION ALL SELECT 'buffers', count(*), md5(string_agg(b::text, ',' ORDER BY dataset_id, split, partition, buffer_no)) FROM mop.buffers b
    UNION ALL SELECT 'runs', count(*), md5(string_agg(r::text, ',' ORDER BY id)) FROM mop.runs r
    UNION ALL SELECT 'models', count(*), md5(string_agg(m::text, ',' ORDER BY id)) FROM mop.models m
    UNION ALL SELECT 'epochs', count(*), md5(string_agg(e::text, ',' ORDER BY model_id, epoch)) FROM mop.epochs e
    UNION ALL SELECT 'hops', count(*), md5(string_agg(h::text, ',' ORDER BY id)) FROM mop.hops h
    UNION ALL SELECT 'decisions', count(*), md5(string_agg(x::text, ',' ORDER BY id)) FROM mop.decisions x
  ) a USING (t) ORDER BY 1;

-- every catalog table, view and function an ordinary role is meant to use
-- is usable by one (sequences are not: ids come from the identities)
SELECT c.oid::regclass AS relation, c.relkind,
       has_table_privilege('regress_mop_bob', c.oid, 'SELECT') AS sel,
       has_table_privilege('regress_mop_bob', c.oid, 'INSERT') AS ins,
       has_table_privilege('regress_mop_bob', c.oid, 'UPDATE') AS upd,
       has_table_privilege('regress_mop_bob', c.oid, 'DELETE') AS del,
       has_any_column_privilege('regress_mop_bob', c.oid, 'INSERT') AS ins_cols,
       has_any_column_privilege('regress_mop_bob', c.oid, 'UPDATE') AS upd_cols,
       has_column_privilege('regress_mop_bob', c.oid, a.attnum, 'INSERT')
         OR has_column_privilege('regress_mop_bob', c.oid, a.attnum, 'UPDATE') AS write_id
  FROM pg_class c
  LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'id' AND c.relkind = 'r'
 WHERE c.relnamespace = 'mop'::regnamespace AND c.relkind IN ('r', 'v', 'S')
 ORDER BY c.relkind, c.oid::regclass::text;
SELECT count(*) AS functions, count(*) FILTER (WHERE has_function_privilege('regress_mop_bob', p.oid, 'EXECUTE')) AS callable
  FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid AND d.classid = 'pg_proc'::regclass AND d.deptype = 'e'
  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'mop';

-- a role that cannot log in prepares and trains in its own session, but a
-- search's background workers could not connect as it: refused up front
DROP ROLE IF EXISTS regress_mop_nologin;
CREATE ROLE regress_mop_nologin;
GRANT SELECT ON tenant_pts TO regress_mop_nologin;
SET ROLE regress_mop_nologin;
SELECT dataset_name FROM mop_prepare('tenant_pts', 'label', dataset => 'nologin_pts');
SELECT mop_train('nologin_pts', '{"model": [{"type": "dense", "units": 3}]}', 1) > 0 AS trained;
SELECT attempt($$SELECT * FROM mop_grid_search('nologin_pts', '{"model": [{"type": "dense", "units": 3}]}', epochs => 1)$$) AS search;
SELECT count(*) AS runs_started FROM mop.runs WHERE kind <> 'train';
SELECT mop_drop_dataset('nologin_pts') AS dropped;
RESET ROLE;
REVOKE SELECT ON tenant_pts FROM regress_mop_nologin;
DROP ROLE regress_mop_nologin;

-- clean up: each tenant drops its own dataset (with everything under it)
SET ROLE regress_mop_alice;
SELECT mop_drop_dataset('alice_pts') AS dropped;
RESET ROLE;
SET ROLE regress_mop_bob;
SELECT mop_drop_dataset('bob_pts') AS dropped;
RESET ROLE;
SELECT mop_drop_dataset('su_pts') AS dropped;
SELECT count(*) AS tenants_rows_left FROM mop.datasets WHERE owner IN ('regress_mop_alice', 'regress_mop_bob');
DROP TABLE tenant_pts;
DROP FUNCTION attempt(text);
DROP ROLE regress_mop_alice;
DROP ROLE regress_mop_bob;
