-- errors: every error case with its SQLSTATE
SET client_min_messages = warning;
-- (err(q) is defined in install.sql)

-- mop_prepare: missing table or column, features of a type mop cannot use
SELECT err($$SELECT mop_prepare('nosuch', 'y')$$);
SELECT err($$SELECT mop_prepare('blobs', 'nosuch')$$);
SELECT err($$SELECT mop_prepare('blobs', 'species', ARRAY['a', 'nosuch'])$$);
CREATE VIEW blobs_dated AS SELECT *, date '2026-01-01' AS day FROM blobs;
SELECT err($$SELECT mop_prepare('blobs_dated', 'species', ARRAY['a', 'day'])$$);
DROP VIEW blobs_dated;
SELECT err($$SELECT mop_prepare('blobs', 'species', ARRAY['a', NULL])$$);
SELECT err($$SELECT mop_prepare('blobs', 'species', ARRAY['a', 'a'])$$);
SELECT err($$SELECT mop_prepare('blobs', 'species', ARRAY['species', 'a'])$$);
CREATE TABLE textonly AS SELECT 'x'::text AS t, 'y'::text AS label FROM generate_series(1, 3);
SELECT err($$SELECT mop_prepare('textonly', 'label')$$);
CREATE TABLE mixed AS SELECT ARRAY[1.0, 2.0]::float8[] AS arr, 1.0::float8 AS s, 'a' AS label;
SELECT err($$SELECT mop_prepare('mixed', 'label', ARRAY['arr', 's'])$$);

-- NULLs are rejected with a count
CREATE TABLE withnulls AS
SELECT CASE WHEN i % 10 = 0 THEN NULL ELSE i END::float8 AS f,
       CASE WHEN i = 7 THEN NULL ELSE i % 2 END AS label
  FROM generate_series(1, 50) i;
SELECT err($$SELECT mop_prepare('withnulls', 'label')$$);
CREATE TABLE arraynulls AS SELECT ARRAY[1.0, NULL]::float8[] AS arr, i % 2 AS label FROM generate_series(1, 4) i;
SELECT err($$SELECT mop_prepare('arraynulls', 'label')$$);
SELECT err($$SELECT mop_prepare('arraynulls', 'label', ARRAY['arr'])$$);
-- NaN is rejected too
CREATE TABLE withnan AS SELECT CASE WHEN i = 3 THEN 'NaN'::float8 ELSE i END AS f, i % 2 AS label FROM generate_series(1, 6) i;
SELECT err($$SELECT mop_prepare('withnan', 'label')$$);

-- empty input, too few rows, an existing name
CREATE TABLE empty (f float8, label int);
SELECT err($$SELECT mop_prepare('empty', 'label')$$);
CREATE TABLE tiny AS SELECT i::float8 AS f, i % 2 AS label FROM generate_series(1, 4) i;
SELECT err($$SELECT mop_prepare('tiny', 'label', partitions => 5, validation => 0)$$);
SELECT err($$SELECT mop_prepare('tiny', 'label', partitions => 4, validation => 0.5)$$);
SELECT err($$SELECT mop_prepare('blobs', 'species')$$);
SELECT err($$SELECT mop_prepare('digits', 'digit', dataset => '')$$);

-- bad parameter values
SELECT err($$SELECT mop_prepare('tiny', 'label', partitions => 0)$$);
SELECT err($$SELECT mop_prepare('tiny', 'label', validation => 1)$$);
SELECT err($$SELECT mop_prepare('tiny', 'label', validation => -0.1)$$);
SELECT err($$SELECT mop_prepare('tiny', 'label', buffer_rows => 0)$$);
SELECT err($$SELECT mop_prepare('tiny', 'label', target_kind => 'ordinal')$$);
SELECT err($$SELECT mop_prepare('tiny', 'label', validation => NULL)$$);
SELECT err($$SELECT mop_prepare('bars', 'orientation', ARRAY['pixels'], 'bars2', shape => ARRAY[4, 5, 1])$$);
SELECT err($$SELECT mop_prepare('bars', 'orientation', ARRAY['pixels'], 'bars2', shape => ARRAY[4, 0, 4])$$);
SELECT err($$SELECT mop_prepare('bars', 'orientation', ARRAY['pixels'], 'bars2', shape => ARRAY[1, 2, 2, 4])$$);
SELECT err($$SELECT mop_prepare('tiny', 'label', ARRAY['f'], shape => ARRAY[1, 1])$$);
CREATE TABLE ragged AS SELECT CASE WHEN i = 2 THEN ARRAY[1.0, 2.0, 3.0] ELSE ARRAY[1.0, 2.0] END::real[] AS arr,
                              i % 2 AS label FROM generate_series(1, 4) i;
SELECT err($$SELECT mop_prepare('ragged', 'label', ARRAY['arr'])$$);

-- target kinds
SELECT err($$SELECT mop_prepare('blobs', 'species', dataset => 'x', target_kind => 'regression')$$);
SELECT err($$SELECT mop_prepare('blobs', 'species', dataset => 'x', target_kind => 'binary')$$);
CREATE TABLE oneclass AS SELECT i::float8 AS f, 'only' AS label FROM generate_series(1, 5) i;
SELECT err($$SELECT mop_prepare('oneclass', 'label')$$);

-- this file's model (the superuser's; the datasets come from prepare)
SELECT mop_train('blobs',
  '{"model": {"layers": [{"type": "dense", "units": 16, "activation": "relu"},
                         {"type": "dense", "units": 3}]},
    "optimizer": "adam", "learning_rate": 0.01, "batch_size": 16, "l2": 1e-5, "seed": 1}',
  epochs => 8) AS bm \gset

-- no SELECT privilege, checked as the caller
DROP ROLE IF EXISTS regress_mop_user;
CREATE ROLE regress_mop_user;
CREATE TABLE secret AS SELECT i::float8 AS f, i::float8 AS g, i % 2 AS label FROM generate_series(1, 20) i;
CREATE TABLE partly AS SELECT * FROM secret;
GRANT SELECT (f, label) ON partly TO regress_mop_user;
CREATE TABLE mine AS SELECT i::float8 AS f, i % 2 AS label FROM generate_series(1, 20) i;
GRANT SELECT ON mine TO regress_mop_user;
SET ROLE regress_mop_user;
SELECT err($$SELECT mop_prepare('secret', 'label')$$);
SELECT err($$SELECT mop_prepare('partly', 'label', ARRAY['f', 'g'])$$);
-- granted columns are enough
SELECT dataset_name, train_rows FROM mop_prepare('partly', 'label', ARRAY['f'], 'partly_user');
-- row-level security: a role sees only its own datasets and models
SELECT name FROM mop.datasets ORDER BY name;
SELECT err($$SELECT mop_train('blobs', '{"model": [{"type": "dense", "units": 3}]}', 1)$$);
SELECT mop_train('partly_user', '{"model": [{"type": "dense", "units": 2}], "seed": 1}', 1) > 0 AS trained;
SELECT count(*) AS visible_models FROM mop.models;
SELECT regexp_replace(err(format('SELECT mop_predict(%s, ARRAY[1.0, 2.0, 3.0])', :bm)), 'model \d+', 'model N') AS others_model;
SELECT err($$SELECT mop_evaluate((SELECT id FROM mop.models), 'secret')$$);
RESET ROLE;
SELECT owner, count(*) FROM mop.datasets GROUP BY owner ORDER BY owner;

-- mop_train: unknown dataset, bad epochs
SELECT err($$SELECT mop_train('nosuch', '{}')$$);
SELECT err($$SELECT mop_train('blobs', '{"model": [{"type": "dense", "units": 3}]}', 0)$$);
SELECT err($$SELECT mop_train('blobs', NULL)$$);

-- configuration errors name the field
CREATE FUNCTION cfg(c text, ds text DEFAULT 'blobs') RETURNS text LANGUAGE sql AS $$
  SELECT err(format('SELECT mop.init_model(%L, %L)', ds, c)) $$;
SELECT cfg('[1, 2]');
SELECT cfg('{}');
SELECT cfg('{"model": [{"type": "dense", "units": 3}], "lerning_rate": 0.1}');
SELECT cfg('{"model": {"layers": [{"type": "dense", "units": 3}], "extra": 1}}');
SELECT cfg('{"model": {"layers": []}}');
SELECT cfg('{"model": "mlp"}');
SELECT cfg('{"model": [{"type": "lstm", "units": 3}]}');
SELECT cfg('{"model": [{"units": 3}]}');
SELECT cfg('{"model": [{"type": "dense", "units": -4}, {"type": "dense", "units": 3}]}');
SELECT cfg('{"model": [{"type": "dense", "units": 2.5}, {"type": "dense", "units": 3}]}');
SELECT cfg('{"model": [{"type": "dense", "units": "ten"}]}');
SELECT cfg('{"model": [{"type": "dense"}]}');
SELECT cfg('{"model": [{"type": "dense", "units": 3, "filters": 2}]}');
SELECT cfg('{"model": [{"type": "dense", "units": 3, "activation": "swish"}]}');
SELECT cfg('{"model": [{"type": "dropout", "rate": 1.0}, {"type": "dense", "units": 3}]}');
SELECT cfg('{"model": [{"type": "dense", "units": 4}]}');
SELECT cfg('{"model": [{"type": "dense", "units": 8, "activation": "relu"}]}');
SELECT cfg('{"model": [{"type": "conv2d", "filters": 2, "kernel_size": 3}, {"type": "flatten"}, {"type": "dense", "units": 3}]}');
SELECT cfg('{"model": [{"type": "conv2d", "filters": 2, "kernel_size": [3]}, {"type": "flatten"}, {"type": "dense", "units": 2}]}', 'bars');
SELECT cfg('{"model": [{"type": "conv2d", "filters": 2, "kernel_size": 3, "padding": "full"}, {"type": "flatten"}, {"type": "dense", "units": 2}]}', 'bars');
SELECT cfg('{"model": [{"type": "conv2d", "filters": 2, "kernel_size": 9}, {"type": "flatten"}, {"type": "dense", "units": 2}]}', 'bars');
SELECT cfg('{"model": [{"class_name": "Dense", "config": {"units": 3}, "extra": 1}]}');
SELECT cfg('{"model": [{"type": "dense", "units": 3}], "learning_rate": 0}');
SELECT cfg('{"model": [{"type": "dense", "units": 3}], "learning_rate": -0.1}');
SELECT cfg('{"model": [{"type": "dense", "units": 3}], "learning_rate": "fast"}');
SELECT cfg('{"model": [{"type": "dense", "units": 3}], "batch_size": 0}');
SELECT cfg('{"model": [{"type": "dense", "units": 3}], "momentum": 1.5}');
SELECT cfg('{"model": [{"type": "dense", "units": 3}], "l2": -1}');
SELECT cfg('{"model": [{"type": "dense", "units": 3}], "seed": -1}');
SELECT cfg('{"model": [{"type": "dense", "units": 3}], "optimizer": "adagrad"}');
SELECT cfg('{"model": [{"type": "dense", "units": 3}], "weight_decay": 0.1}');
SELECT cfg('{"model": [{"type": "dense", "units": 3}], "nesterov": true}');
SELECT cfg('{"model": [{"type": "dense", "units": 3}], "loss": "hinge"}');
SELECT cfg('{"model": [{"type": "dense", "units": 3}], "loss": "mse"}');
SELECT cfg('{"model": [{"type": "dense", "units": 1}], "loss": "binary_crossentropy"}');
SELECT cfg('{"model": [{"type": "dense", "units": 3}], "metric": "mae"}');
SELECT cfg('{"model": [{"type": "dense", "units": 3}], "metric": "kappa"}');
SELECT cfg('{"model": [{"type": "dense", "units": 3}], "metric": "top_k_accuracy", "top_k": 4}');
SELECT cfg('{"model": [{"type": "dense", "units": 1}], "loss": "categorical_crossentropy"}', 'house');
SELECT cfg('{"model": [{"type": "dense", "units": 1}], "metric": "accuracy"}', 'house');
SELECT cfg('{"model": [{"type": "dense", "units": 2}]}', 'house');

-- prediction and evaluation errors
SELECT err($$SELECT mop_predict(999999, ARRAY[1.0])$$);
SELECT regexp_replace(err(format('SELECT mop_predict(%s, ARRAY[1.0, 2.0])', :bm)), 'model \d+', 'model N') AS err;
SELECT err(format('SELECT mop_predict(%s, ARRAY[1.0, NULL, 2.0])', :bm));
SELECT err(format('SELECT mop_predict_proba(%s, ARRAY[[1.0, 2.0, 3.0]])', :bm));
-- new data of the same columns as "blobs"
CREATE TABLE errors_blobs_test AS
SELECT (ARRAY['setosa', 'versicolor', 'virginica'])[k + 1] AS species,
       (k * 3 + cos(i))::float8 AS a, (k * 5 + i % 4)::int AS b,
       (k * -2 + sin(i * 1.3))::numeric(8, 4) AS c
  FROM generate_series(1000, 1089) i, LATERAL (SELECT i % 3 AS k) s;
CREATE TABLE blobs_new AS SELECT * FROM errors_blobs_test;
UPDATE blobs_new SET species = 'iris' WHERE a < 1;
SELECT err(format('SELECT mop_evaluate(%s, %L)', :bm, 'blobs_new'));
CREATE TABLE blobs_nob AS SELECT species, a, c FROM errors_blobs_test;
SELECT err(format('SELECT mop_evaluate(%s, %L)', :bm, 'blobs_nob'));
UPDATE blobs_new SET species = NULL WHERE species = 'iris';
SELECT err(format('SELECT mop_evaluate(%s, %L)', :bm, 'blobs_new'));

-- the aggregates reject corrupt or missing states
SELECT err($$SELECT mop.train_agg('garbage'::bytea, b.x, b.y) FROM mop.buffers b$$);
SELECT err($$SELECT mop.eval_agg(NULL, b.x, b.y) FROM mop.buffers b$$);
SELECT err(format($q$SELECT mop.train_agg(overlay(m.state placing '\xffff'::bytea from 200), b.x, b.y)
                      FROM mop.models m, mop.buffers b WHERE m.id = %s AND b.dataset_id = m.dataset_id$q$, :bm));
SELECT err(format($q$SELECT mop.train_agg(m.state, b.x, b.y)
                      FROM mop.models m, mop.buffers b, mop.datasets d
                     WHERE m.id = %s AND b.dataset_id = d.id AND d.name = 'digits'$q$, :bm));

-- a cancelled mop_train stops within a minibatch and leaves nothing behind
SELECT count(*) AS models_before FROM mop.models \gset
CREATE FUNCTION err_cancel(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE q;
  RETURN 'no error';
EXCEPTION WHEN query_canceled THEN
  RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
SET statement_timeout = '300ms';
SELECT err_cancel($$SELECT mop_train('blobs', '{"model": [{"type": "dense", "units": 64, "activation": "relu"}, {"type": "dense", "units": 3}], "batch_size": 1}', 1000000)$$);
RESET statement_timeout;
SELECT count(*) = :models_before AS nothing_written FROM mop.models;
SELECT count(*) AS running_runs FROM mop.runs WHERE status = 'running';

-- the extension cannot be relocated
SELECT err($$ALTER EXTENSION mop SET SCHEMA mop$$);

-- clean up the role (it is cluster-wide)
DROP OWNED BY regress_mop_user;
DELETE FROM mop.datasets WHERE owner = 'regress_mop_user';
DROP ROLE regress_mop_user;
