-- hardening: data any role that may write mop's tables can plant is
-- refused with an error naming it, never a crash of the server
SET client_min_messages = warning;

-- a model whose stored state was made for another dataset (the digits
-- model on the 3-feature blobs): mop_evaluate, mop_predict and training
-- refuse it (this file's models; the datasets come from prepare)
SELECT mop_train('blobs',
  '{"model": {"layers": [{"type": "dense", "units": 16, "activation": "relu"},
                         {"type": "dense", "units": 3}]},
    "optimizer": "adam", "learning_rate": 0.01, "batch_size": 16, "l2": 1e-5, "seed": 1}',
  epochs => 8) AS bm \gset
SELECT mop_train('digits', '{"model": {"layers": [{"type": "dense", "units": 8, "activation": "gelu"}, {"type": "dropout", "rate": 0.1}, {"type": "dense", "units": 3}]}, "optimizer": "sgd", "learning_rate": 0.1, "momentum": 0.9, "nesterov": true, "seed": 1}', 2) AS dm \gset
CREATE TEMP TABLE saved AS SELECT id, state, best_state FROM mop.models WHERE id = :bm;
UPDATE mop.models SET (state, best_state) = (SELECT state, state FROM mop.models WHERE id = :dm) WHERE id = :bm;
SELECT regexp_replace(err(format('SELECT * FROM mop_evaluate(%s, %L)', :bm, 'blobs')), 'model \d+', 'model N') AS evaluate_refused;
SELECT regexp_replace(err(format('SELECT mop_predict(%s, ARRAY[1.0, 2.0, 3.0])', :bm)), 'model \d+', 'model N') AS predict_refused;
SELECT regexp_replace(err(format('SELECT mop_predict(%s, ARRAY[1.0, 2.0, 3.0], %L)', :bm, 'last')), 'model \d+', 'model N') AS predict_last_refused;
SELECT err(format($q$SELECT mop.train_agg(m.state, b.x, b.y) FROM mop.models m, mop.buffers b
                     WHERE m.id = %s AND b.dataset_id = m.dataset_id AND b.split = 'train'$q$, :bm))
       LIKE '22000: feature buffer of % bytes does not match % rows of % features' AS train_refused;
UPDATE mop.models m SET state = s.state, best_state = s.best_state FROM saved s WHERE m.id = s.id;
SELECT (SELECT rows FROM mop_evaluate(:bm, 'blobs')) > 0 AS evaluates_again;

-- a NULL checkpoint picked up by a worker: the model fails with the reason
CREATE TEMP TABLE r AS SELECT * FROM mop_grid_search('blobs',
  '{"model": {"layers": [{"type": "dense", "units": 3}]}, "learning_rate": [0.01, 0.02]}',
  epochs => 2, workers => 1);
SELECT DISTINCT run_id AS nr FROM r \gset
-- as if the run had stopped after the model's first epoch
UPDATE mop.runs SET status = 'failed' WHERE id = :nr;
DELETE FROM mop.hops WHERE model_id = (SELECT min(model_id) FROM r) AND epoch = 2;
DELETE FROM mop.epochs WHERE model_id = (SELECT min(model_id) FROM r) AND epoch = 2;
UPDATE mop.models SET state = NULL, status = 'training', epochs_done = 1
 WHERE id = (SELECT min(model_id) FROM r);
SELECT count(*) AS models FROM mop_resume(:nr);
SELECT status, error LIKE 'model % has no checkpoint' AS says_why
  FROM mop.models WHERE id = (SELECT min(model_id) FROM r);
SELECT status AS other_model FROM mop.models WHERE id = (SELECT max(model_id) FROM r);
SELECT 1 AS server_still_up;

-- values finite in double precision but not in single precision (mop's
-- buffers): refused with the column named, not packed as infinities
CREATE TABLE huge AS SELECT a, b, species FROM blobs;
UPDATE huge SET a = 1e300 WHERE ctid = (SELECT min(ctid) FROM huge);
SELECT err($$SELECT mop_prepare('huge', 'species', ARRAY['a', 'b'], dataset => 'huge')$$);
CREATE TABLE hugey AS SELECT a, b::float8 AS target FROM blobs;
UPDATE hugey SET target = -1e39 WHERE ctid = (SELECT min(ctid) FROM hugey);
SELECT err($$SELECT mop_prepare('hugey', 'target', ARRAY['a'], dataset => 'hugey', target_kind => 'regression')$$);
SELECT count(*) AS datasets_made FROM mop.datasets WHERE name IN ('huge', 'hugey');

-- prediction from NaN, infinite or out-of-range features: an error, not a label
SELECT err(format($$SELECT mop_predict(%s, ARRAY['NaN', 2.0, 3.0]::float8[])$$, :bm));
SELECT err(format($$SELECT mop_predict(%s, ARRAY[1.0, 'Infinity', 3.0]::float8[])$$, :bm));
SELECT err(format($$SELECT mop_predict_proba(%s, ARRAY[1.0, 2.0, 1e300]::float8[])$$, :bm));
DROP TABLE huge, hugey;

-- memory: a model whose working memory is over mop.max_model_memory is
-- refused before anything is allocated, when created and when read back
SHOW mop.max_model_memory;
SET mop.max_model_memory = '64MB';
SELECT err($$SELECT mop_train('digits', '{"model": {"layers": [{"type": "dense", "units": 4096, "activation": "relu"},
  {"type": "dense", "units": 4096}, {"type": "dense", "units": 3}]}}', epochs => 1)$$);
SELECT err(format('SELECT * FROM mop_evaluate(%s, %L)', :bm, 'blobs')) AS small_model_fits;
RESET mop.max_model_memory;
SELECT mop_train('blobs', '{"model": {"layers": [{"type": "dense", "units": 1024, "activation": "relu"},
  {"type": "dense", "units": 1024}, {"type": "dense", "units": 3}]}}', epochs => 1) AS big \gset
SET mop.max_model_memory = '8MB';
SELECT err(format('SELECT * FROM mop_evaluate(%s, %L)', :big, 'blobs')) AS state_refused;
SELECT err(format('SELECT mop_predict(%s, ARRAY[1.0, 2.0, 3.0])', :big)) AS predict_refused;
RESET mop.max_model_memory;
-- a search space list longer than any grid: refused before it is expanded
SELECT err(format('SELECT * FROM mop_grid_search(%L, %L)', 'blobs',
  jsonb_build_object('model', '{"layers": [{"type": "dense", "units": 3}]}'::jsonb,
                     'learning_rate', (SELECT jsonb_agg(i * 1e-6) FROM generate_series(1, 100001) i))));

-- search_path in background workers: a database's search_path cannot put
-- another schema's operators in front of pg_catalog's in a run's SQL (its
-- texts use ->> on jsonb, and * and / when workers record epochs); a
-- planted operator would run as the role that started the run
CREATE SCHEMA evil;
CREATE TABLE evil.calls (op text);
CREATE FUNCTION evil.get(j jsonb, k text) RETURNS text LANGUAGE sql
  AS $$ INSERT INTO evil.calls VALUES ('->>') RETURNING NULL::text $$;
CREATE FUNCTION evil.mul(a float8, b bigint) RETURNS float8 LANGUAGE sql
  AS $$ INSERT INTO evil.calls VALUES ('*') RETURNING a * b $$;
CREATE OPERATOR evil.->> (LEFTARG = jsonb, RIGHTARG = text, FUNCTION = evil.get);
CREATE OPERATOR evil.* (LEFTARG = float8, RIGHTARG = bigint, FUNCTION = evil.mul);
DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET search_path = evil, pg_catalog, public', current_database()); END $$;
-- a resumed run (its coordinator reads the options) that trains a new model
SELECT count(*) AS models, count(*) FILTER (WHERE status = 'done') AS done FROM mop_resume(:nr, add => '{"model": {"layers": [{"type": "dense", "units": 3}]}, "learning_rate": 0.05}');
SELECT count(*) AS planted_operator_calls FROM evil.calls;
DO $$ BEGIN EXECUTE format('ALTER DATABASE %I RESET search_path', current_database()); END $$;
DROP SCHEMA evil CASCADE;

-- statuses tell the truth: a run whose every model failed is failed, with
-- the first model's error (here: both checkpoints are garbage)
UPDATE mop.runs SET status = 'failed' WHERE id = :nr;
DELETE FROM mop.hops WHERE model_id IN (SELECT model_id FROM r) AND epoch = 2;
DELETE FROM mop.epochs WHERE model_id IN (SELECT model_id FROM r) AND epoch = 2;
UPDATE mop.models SET state = '\x00'::bytea, status = 'training', epochs_done = 1
 WHERE id IN (SELECT model_id FROM r);
UPDATE mop.models SET status = 'failed' WHERE run_id = :nr AND id NOT IN (SELECT model_id FROM r);
SELECT regexp_replace(err(format('SELECT * FROM mop_resume(%s)', :nr)), 'run \d+', 'run N') AS all_failed;
SELECT status, error LIKE 'every model failed; the first: %' AS first_error FROM mop.runs WHERE id = :nr;

-- a cancelled run leaves no model 'training': they are 'cancelled', and a
-- resume trains them to the end
SELECT DISTINCT run_id AS cr FROM mop_grid_search('blobs',
  '{"model": {"layers": [{"type": "dense", "units": 16, "activation": "relu"}, {"type": "dense", "units": 3}]},
    "learning_rate": [0.01, 0.003], "batch_size": [1, 2]}',
  epochs => 50, workers => 2, wait => false) \gset
SELECT mop_cancel(:cr) AS cancel;
SELECT count(*) FILTER (WHERE status = 'training') AS still_training,
       count(*) FILTER (WHERE status = 'cancelled') > 0 AS some_cancelled
  FROM mop.models WHERE run_id = :cr;
SELECT count(*) AS models, bool_and(status = 'done') AS all_done FROM mop_resume(:cr);

-- terminating a run's coordinator (its owner may) leaves no worker behind:
-- they stop within a minibatch, and the run and its models say what happened
CREATE FUNCTION pg_temp.wait_for(what text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1..600 LOOP
    IF what = 'workers' AND (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'mop worker') >= 2 THEN
      RETURN true;
    END IF;
    IF what = 'gone' AND (SELECT count(*) FROM pg_stat_activity
                           WHERE backend_type IN ('mop worker', 'mop coordinator')) = 0 THEN
      RETURN true;
    END IF;
    PERFORM pg_sleep(0.05);
    PERFORM pg_stat_clear_snapshot();
  END LOOP;
  RETURN false;
END $$;
SELECT DISTINCT run_id AS tr FROM mop_grid_search('blobs',
  '{"model": {"layers": [{"type": "dense", "units": 16, "activation": "relu"}, {"type": "dense", "units": 3}]},
    "learning_rate": [0.01, 0.003], "batch_size": [1, 2]}',
  epochs => 500, workers => 2, wait => false) \gset
SELECT pg_temp.wait_for('workers') AS training;
SELECT pg_terminate_backend(pid) AS terminated FROM pg_stat_activity WHERE backend_type = 'mop coordinator';
SELECT pg_temp.wait_for('gone') AS no_worker_left;
SELECT status, error FROM mop.runs WHERE id = :tr;
SELECT count(*) FILTER (WHERE status = 'training') AS still_training,
       count(*) FILTER (WHERE status = 'failed') AS failed_models
  FROM mop.models WHERE run_id = :tr;
SELECT err(format('SELECT mop_cancel(%s)', :tr)) LIKE '55000: run % is not running (status failed)' AS nothing_left_to_cancel;
-- a run's stored options are its owner's to write: one out of range is
-- refused when the run is read back, not divided by
SELECT DISTINCT run_id AS pr FROM mop_pbt('blobs', '{"model": {"layers": [{"type": "dense", "units": 3}]}, "learning_rate": {"loguniform": [0.001, 0.1]}}',
                                          population => 2, epochs => 2, "interval" => 1, workers => 1) \gset
UPDATE mop.runs SET options = options || '{"interval": 0}' WHERE id = :pr;
SELECT replace(err(format('SELECT * FROM mop_replay(%s)', :pr)), :'pr', 'N') AS interval_0;
UPDATE mop.runs SET options = options || '{"interval": 1, "quantile": 2}' WHERE id = :pr;
SELECT replace(err(format('SELECT * FROM mop_replay(%s)', :pr)), :'pr', 'N') AS quantile_2;
