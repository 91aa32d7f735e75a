-- categorical: text, enum and boolean feature columns are one-hot encoded
-- by mop_prepare over a vocabulary built from the training rows (descending
-- count, then value; NULL is a category of its own), stored in
-- mop.datasets.categories; at most max_categories inputs per column, the
-- rarest values sharing an "other" input; one-hot inputs are not
-- standardised.  mop_predict, mop_predict_proba (text[]),
-- mop_predict_table, mop_evaluate and mop_confusion_matrix take the raw
-- values; an unseen value goes to "other" (or to no input without one).
-- (uses only its own tables)
SET client_min_messages = notice;
CREATE TYPE cat_size AS ENUM ('S', 'M', 'L');
-- the label is a function of the colour alone (NULL colour: 'a'); x, size
-- and flag are noise, so a model does well only through the colour
CREATE TABLE cat_src AS
SELECT i AS id,
       CASE WHEN i % 37 = 0 THEN NULL
            ELSE (ARRAY['red', 'green', 'blue', 'cyan', 'magenta'])[i % 5 + 1] END AS color,
       (ARRAY['S', 'M', 'L'])[i % 3 + 1]::cat_size AS size,
       (i % 4 = 0) AS flag,
       ((i * 7) % 11) / 10.0 AS x,
       'c' || (i % 9) AS city,
       current_date AS day,
       CASE WHEN i % 37 = 0 THEN 'a'
            ELSE (ARRAY['a', 'b', 'c', 'b', 'c'])[i % 5 + 1] END AS label
  FROM generate_series(1, 600) i;

SELECT dataset_name, train_rows, valid_rows, n_features, classes
  FROM mop_prepare('cat_src', 'label', ARRAY['color', 'size', 'flag', 'x'], dataset => 'cat',
                   partitions => 2, validation => 0.2, seed => 1);
-- the vocabularies: by descending count in the training rows, then value
-- (NULL after values); a column whose values all fit has no "other"
SELECT key AS col, value->>'type' AS type, value->'values' AS vals,
       value->'counts' AS counts, value->'other' AS other
  FROM mop.datasets d, jsonb_each(d.categories) WHERE d.name = 'cat' ORDER BY key;
-- the counts are the training rows' (480), each column's once
SELECT key AS col, (SELECT sum(c::bigint) FROM jsonb_array_elements_text(value->'counts') c) AS rows
  FROM mop.datasets d, jsonb_each(d.categories) WHERE d.name = 'cat' ORDER BY key;
-- n_features = 6 (colours and NULL) + 3 (sizes) + 2 (false, true) + 1 (x);
-- one-hot inputs keep mean 0 and std 1, x is standardised
SELECT features, n_features, input_shape,
       feature_mean[1:11] = array_fill(0::float8, ARRAY[11]) AS onehot_mean_0,
       feature_std[1:11] = array_fill(1::float8, ARRAY[11]) AS onehot_std_1,
       round(feature_mean[12]::numeric, 3) AS x_mean, feature_std[12] <> 1 AS x_std
  FROM mop.datasets WHERE name = 'cat';
-- each training row has exactly one 1 per categorical column: the sum of a
-- buffer's one-hot inputs is 3 per row (decoded from the float32 bytes)
CREATE FUNCTION cat_f4(b bytea, k int) RETURNS float8 LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN bits = 1065353216 THEN 1.0 WHEN bits = 0 THEN 0.0 ELSE NULL END
    FROM (SELECT get_byte(b, 4 * k) | (get_byte(b, 4 * k + 1) << 8) | (get_byte(b, 4 * k + 2) << 16)
                 | (get_byte(b, 4 * k + 3) << 24) AS bits) s $$;
SELECT count(*) AS rows, min(s) AS min_sum, max(s) AS max_sum
  FROM (SELECT r, sum(cat_f4(b.x, r * 12 + j)) AS s
          FROM mop.buffers b, generate_series(0, b.rows - 1) r, generate_series(0, 10) j
         WHERE b.dataset_id = (SELECT id FROM mop.datasets WHERE name = 'cat') AND b.split = 'train'
           AND b.partition = 0 AND b.buffer_no = 0
         GROUP BY b.buffer_no, r) t;

-- a model that must read the colour to do well (its epochs' NOTICEs name
-- its id, which depends on the tests before)
SET client_min_messages = warning;
SELECT mop_train('cat', '{"model": {"layers": [{"type": "dense", "units": 16, "activation": "relu"},
                                               {"type": "dense", "units": 3}]},
                          "optimizer": "adam", "learning_rate": 0.05, "batch_size": 16, "seed": 1}',
                 epochs => 15) AS cat_model \gset
SET client_min_messages = notice;
SELECT valid_metric > 0.97 AS accurate FROM mop.epochs
 WHERE model_id = :cat_model ORDER BY epoch DESC LIMIT 1;
-- raw values as text[] in the order of mop.datasets.features; NULL is a value
SELECT mop_predict(:cat_model, ARRAY['red', 'M', 'true', '0.5']) AS red,
       mop_predict(:cat_model, ARRAY['green', 'S', 'false', '0.1']) AS green,
       mop_predict(:cat_model, ARRAY['blue', 'L', 'false', '0.9']) AS blue,
       mop_predict(:cat_model, ARRAY['magenta', 'L', 'true', '0.3'], 'last') AS magenta_last,
       mop_predict(:cat_model, ARRAY[NULL, 'M', 'true', '0.5']) AS null_colour;
SELECT mop_predict(:cat_model, ARRAY['cyan', 'M', 't', '1e-1'], NULL::text, 'best') AS typed,
       array_length(mop_predict_proba(:cat_model, ARRAY['red', 'M', 'true', '0.5']), 1) AS probs,
       round((SELECT sum(p) FROM unnest(mop_predict_proba(:cat_model, ARRAY['purple', 'XL', NULL, '0.5'])) p)::numeric, 4) AS unseen_sums_to_1;
-- a boolean column's value in any spelling boolean input takes is the
-- vocabulary's 'true' or 'false' (not an unseen value)
SELECT mop_predict_proba(:cat_model, ARRAY['red', 'M', 't', '0.5']) =
       mop_predict_proba(:cat_model, ARRAY['red', 'M', 'true', '0.5']) AS t_is_true,
       mop_predict_proba(:cat_model, ARRAY['red', 'M', 'OFF', '0.5']) =
       mop_predict_proba(:cat_model, ARRAY['red', 'M', 'false', '0.5']) AS off_is_false;
-- an unseen value, without an "other" input, is no input at all: the same
-- prediction whatever the unseen value
SELECT mop_predict_proba(:cat_model, ARRAY['purple', 'M', 'true', '0.5'])
       = mop_predict_proba(:cat_model, ARRAY['orange', 'M', 'true', '0.5']) AS unseen_alike;

-- whole tables: mop_predict_table, mop_evaluate and mop_confusion_matrix
-- read the raw columns by name
CREATE TABLE cat_new AS
SELECT id + 1000 AS id, label, x, flag, size,
       CASE WHEN id = 1 THEN 'purple' ELSE color END AS color
  FROM cat_src WHERE id <= 100;
SELECT mop_predict_table(:cat_model, 'cat_new', 'cat_pred', id_column => 'id') AS written;
SELECT count(*) AS rows, sum((p.prediction = n.label)::int) AS right_ones,
       bool_and(p.prediction = n.label) FILTER (WHERE n.color IS DISTINCT FROM 'purple') AS known_right,
       count(*) FILTER (WHERE n.color IS NULL) AS null_colours
  FROM cat_pred p JOIN cat_new n USING (id);
SELECT rows, metric > 0.97 AS accurate FROM mop_evaluate(:cat_model, 'cat_new');
-- a table whose boolean column came as text ('t', 'f'): the same probabilities
CREATE TABLE cat_new_text AS
SELECT id, label, x, CASE flag WHEN true THEN 't' WHEN false THEN 'f' END AS flag, size, color FROM cat_new;
SELECT mop_predict_table(:cat_model, 'cat_new_text', 'cat_pred_text', id_column => 'id') AS written_from_text;
SELECT count(*) AS rows, bool_and(a.probabilities = b.probabilities) AS same_probabilities
  FROM cat_pred a JOIN cat_pred_text b USING (id);
SELECT actual, sum(rows) AS rows, sum(rows) FILTER (WHERE actual = predicted) AS right_ones
  FROM mop_confusion_matrix(:cat_model, 'cat_new') GROUP BY actual ORDER BY actual;
-- the planner, class weights and the export see the one-hot width
SELECT config_no, fits FROM mop_explain('cat', '{"model": {"layers": [{"type": "dense", "units": 3}]}}', 1);
SELECT pg_column_size(mop.init_model('cat', '{"model": {"layers": [{"type": "dense", "units": 3}]},
                                              "class_weight": "balanced"}')) > 0 AS balanced;
SELECT e->'input_shape' AS input_shape, e->'features' AS features,
       e->'categories'->'flag'->'values' AS flag_values,
       jsonb_array_length(e->'preprocessing'->'mean') AS means
  FROM mop_export(:cat_model) e;

-- max_categories: the most frequent values get an input each, the others
-- share "other" (with a NOTICE); an unseen value goes to "other" too
SELECT n_features FROM mop_prepare('cat_src', 'label', ARRAY['city', 'x'], dataset => 'cat_other',
                                   partitions => 1, seed => 1, max_categories => 4);
SELECT categories->'city' AS city FROM mop.datasets WHERE name = 'cat_other';
SET client_min_messages = warning;
SELECT mop_train('cat_other', '{"model": {"layers": [{"type": "dense", "units": 3}]}, "seed": 1}', 1) AS other_model \gset
SET client_min_messages = notice;
SELECT (SELECT 'c' || k FROM generate_series(0, 8) k
         WHERE NOT (d.categories->'city'->'values') ? ('c' || k) ORDER BY k LIMIT 1) AS rare,
       d.categories->'city'->'values'->>0 AS kept
  FROM mop.datasets d WHERE d.name = 'cat_other' \gset
SELECT mop_predict_proba(:other_model, ARRAY[:'rare', '0.5']) = mop_predict_proba(:other_model, ARRAY['unseen', '0.5']) AS rare_is_unseen,
       mop_predict_proba(:other_model, ARRAY[NULL, '0.5']) = mop_predict_proba(:other_model, ARRAY['unseen', '0.5']) AS null_is_other_too,
       mop_predict_proba(:other_model, ARRAY[:'kept', '0.5']) <> mop_predict_proba(:other_model, ARRAY['unseen', '0.5']) AS kept_differs;
-- max_categories => 1: one input, always 1
SELECT n_features FROM mop_prepare('cat_src', 'label', ARRAY['color'], dataset => 'cat_one',
                                   partitions => 1, seed => 1, max_categories => 1);
SELECT categories->'color' AS color FROM mop.datasets WHERE name = 'cat_one';
-- a boolean-only dataset: two inputs, false and true
SELECT n_features FROM mop_prepare('cat_src', 'label', ARRAY['flag'], dataset => 'cat_bool',
                                   partitions => 1, seed => 1, standardize => false);
SELECT categories FROM mop.datasets WHERE name = 'cat_bool';
-- without features, only numeric columns are taken (as before)
SELECT n_features FROM mop_prepare('cat_src', 'label', dataset => 'cat_default', partitions => 1);

-- errors
SELECT err($$SELECT mop_prepare('cat_src', 'label', ARRAY['color'], dataset => 'cat_e', max_categories => 0)$$) AS zero_categories;
SELECT err($$SELECT mop_prepare('cat_src', 'label', ARRAY['color'], dataset => 'cat_e', max_categories => NULL)$$) AS null_categories;
SELECT err($$SELECT mop_prepare('cat_src', 'label', ARRAY['color', 'day'], dataset => 'cat_e')$$) AS date_column;
SELECT regexp_replace(err(format($$SELECT mop_predict(%s, ARRAY[1.0, 2.0, 3.0, 4.0])$$, :cat_model)), 'model \d+', 'model N') AS numbers_for_categories;
SELECT regexp_replace(err(format($$SELECT mop_predict(%s, ARRAY['red', 'M', 'true', NULL])$$, :cat_model)), 'model \d+', 'model N') AS null_number;
SELECT regexp_replace(err(format($$SELECT mop_predict(%s, ARRAY['red', 'M', 'true', 'abc'])$$, :cat_model)), 'model \d+', 'model N') AS not_a_number;
SELECT regexp_replace(err(format($$SELECT mop_predict(%s, ARRAY['red', 'M', 'true'])$$, :cat_model)), 'model \d+', 'model N') AS too_few;
SELECT regexp_replace(err(format($$SELECT mop_predict(%s, ARRAY['red', 'M', 'true', 'NaN'])$$, :cat_model)), 'model \d+', 'model N') AS nan;
CREATE TABLE cat_wrong AS SELECT id, label, x, flag, size, 1 AS color FROM cat_src WHERE id <= 10;
SELECT regexp_replace(err(format($$SELECT mop_predict_table(%s, 'cat_wrong', 'cat_wrong_pred')$$, :cat_model)), 'model \d+', 'model N') AS table_wrong_kind;
SELECT regexp_replace(err(format($$SELECT mop_evaluate(%s, 'cat_wrong')$$, :cat_model)), 'model \d+', 'model N') AS evaluate_wrong_kind;
-- the catalog is checked before a prediction uses it
UPDATE mop.datasets SET categories = jsonb_set(categories, '{size,values}', '["S", "S", "M"]') WHERE name = 'cat';
SELECT regexp_replace(err(format($$SELECT mop_predict(%s, ARRAY['red', 'M', 'true', '0.5'])$$, :cat_model)), 'model \d+', 'model N') AS duplicate_value;
UPDATE mop.datasets SET categories = categories - 'size' WHERE name = 'cat';
SELECT regexp_replace(err(format($$SELECT mop_predict(%s, ARRAY['red', 'M', 'true', '0.5'])$$, :cat_model)), 'model \d+', 'model N') AS missing_vocabulary;
-- feature columns that do not make n_features (an edited row without
-- vocabularies): refused before a reader fills its inputs column by column
UPDATE mop.datasets SET categories = NULL, normalized = false,
       features = array_fill('x'::text, ARRAY[400]) WHERE name = 'cat';
SELECT regexp_replace(err(format($$SELECT mop_predict(%s, array_fill('1'::text, ARRAY[400]))$$, :cat_model)), 'model \d+', 'model N') AS columns_not_features;
SELECT regexp_replace(err(format($$SELECT mop_predict_table(%s, 'cat_src', 'cat_pred2')$$, :cat_model)), 'model \d+', 'model N') AS table_columns_not_features;
SELECT mop_drop_dataset(d) FROM unnest(ARRAY['cat', 'cat_other', 'cat_one', 'cat_bool', 'cat_default']) d;
DROP TABLE cat_src, cat_new, cat_pred, cat_wrong, cat_new_text, cat_pred_text;
DROP FUNCTION cat_f4(bytea, int);
DROP TYPE cat_size;
