-- predict_table: mop_predict_table writes a model's predictions for every
-- row of a table into a new table, the same as mop_predict row by row.
SET client_min_messages = warning;
SELECT mop_train('blobs', '{"model": {"layers": [{"type": "dense", "units": 8, "activation": "relu"}, {"type": "dense", "units": 3}]}, "seed": 1}', 3) AS m_blobs \gset
SELECT mop_train('digits', '{"model": {"layers": [{"type": "dense", "units": 3}]}, "seed": 1}', 2) AS m_digits \gset
SELECT mop_train('house', '{"model": {"layers": [{"type": "dense", "units": 8, "activation": "tanh"}, {"type": "dense", "units": 1}]}, "seed": 1}', 2) AS m_house \gset
SELECT mop_train('bars', '{"model": {"layers": [{"type": "conv2d", "filters": 2, "kernel_size": 3, "padding": "same"}, {"type": "flatten"}, {"type": "dense", "units": 2}]}, "seed": 1}', 2) AS m_bars \gset
-- features found by name: other columns and another order do not matter
CREATE TABLE blobs_id AS SELECT row_number() OVER () AS id, 'x'::text AS note, c, b, species, a FROM blobs;
SELECT mop_predict_table(:m_blobs, 'blobs_id', 'blob_preds', id_column => 'id') AS rows_written;
SELECT count(*) AS rows,
       count(*) FILTER (WHERE p.prediction = mop_predict(:m_blobs, ARRAY[b.a, b.b, b.c]::float8[])) AS same_as_mop_predict,
       bool_and(abs(p.probability - (SELECT max(x) FROM unnest(p.probabilities) x)) = 0) AS probability_is_the_max,
       max((SELECT max(abs(x - y)) FROM unnest(p.probabilities, mop_predict_proba(:m_blobs, ARRAY[b.a, b.b, b.c]::float8[])) u(x, y))) < 1e-6 AS same_probabilities
  FROM blob_preds p JOIN blobs_id b USING (id);
SELECT format_type(atttypid, atttypmod) AS type, attname FROM pg_attribute
 WHERE attrelid = 'blob_preds'::regclass AND attnum > 0 ORDER BY attnum;
-- without an id column: row numbers; the prediction in the target's own type
SELECT mop_predict_table(:m_digits, 'digits', 'digit_preds') AS rows_written;
SELECT pg_typeof(prediction) AS prediction_type, min(id), max(id), count(DISTINCT id),
       bool_and(prediction IN (1, 2, 10)) AS labels_as_ints
  FROM digit_preds GROUP BY 1;
-- regression: the value, no probabilities
SELECT mop_predict_table(:m_house, 'house', 'house_preds') AS rows_written;
SELECT attname FROM pg_attribute WHERE attrelid = 'house_preds'::regclass AND attnum > 0 ORDER BY attnum;
SELECT count(*) FILTER (WHERE abs(p.prediction - mop_predict(:m_house, ARRAY[h.x1, h.x2]::float8[], NULL::float8)) < 1e-6) AS same_values
  FROM (SELECT row_number() OVER () AS id, * FROM house) h JOIN house_preds p USING (id);
-- an array feature (images)
SELECT mop_predict_table(:m_bars, 'bars', 'bars_preds') AS rows_written;
SELECT count(*) FILTER (WHERE prediction IN ('horizontal', 'vertical')) AS labelled FROM bars_preds;
-- into another schema, and the caller's search_path decides where an unqualified name goes
CREATE SCHEMA preds;
SET search_path = preds, public;
SELECT mop_predict_table(:m_digits, 'digits', 'digit_preds') AS rows_written;
RESET search_path;
SELECT count(*) AS in_schema_preds FROM preds.digit_preds;
-- bad input: each a clear error naming what is wrong, nothing written
SELECT err(format($$SELECT mop_predict_table(%s, 'digits', 'digit_preds')$$, :m_digits));
CREATE VIEW blobs_no_c AS SELECT species, a, b FROM blobs;
SELECT err(format($$SELECT mop_predict_table(%s, 'blobs_no_c', 'p1')$$, :m_blobs));
CREATE VIEW blobs_text_b AS SELECT species, a, b::text AS b, c FROM blobs;
SELECT err(format($$SELECT mop_predict_table(%s, 'blobs_text_b', 'p2')$$, :m_blobs));
SELECT err(format($$SELECT mop_predict_table(%s, 'blobs_id', 'p3', id_column => 'nope')$$, :m_blobs));
CREATE TABLE blobs_null AS SELECT * FROM blobs;
UPDATE blobs_null SET b = NULL WHERE a = (SELECT max(a) FROM blobs_null);
SELECT err(format($$SELECT mop_predict_table(%s, 'blobs_null', 'p4')$$, :m_blobs));
SELECT err($$SELECT mop_predict_table(-1, 'blobs', 'p5')$$);
SELECT count(*) AS no_partial_outputs FROM pg_class WHERE relname IN ('p1', 'p2', 'p3', 'p4', 'p5');
