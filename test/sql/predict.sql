-- predict and evaluate with the original label types
SET client_min_messages = warning;
-- the models of this file (the datasets come from prepare)
SELECT mop_train('blobs',
  '{"model": {"layers": [{"type": "dense", "units": 16, "activation": "relu"},
                         {"type": "dense", "units": 3}]},
    "optimizer": "adam", "learning_rate": 0.01, "batch_size": 16, "l2": 1e-5, "seed": 1}',
  epochs => 8) AS blobs_model \gset
SELECT mop_train('blobs',
  '{"model": {"layers": [{"type": "dense", "units": 16, "activation": "relu"},
                         {"type": "dense", "units": 3}]},
    "optimizer": "adam", "learning_rate": 0.01, "batch_size": 16, "l2": 1e-5, "seed": 1}',
  epochs => 8) AS blobs_model2 \gset
SELECT mop_train('digits', '{"model": {"layers": [{"type": "dense", "units": 8, "activation": "gelu"}, {"type": "dropout", "rate": 0.1}, {"type": "dense", "units": 3}]}, "optimizer": "sgd", "learning_rate": 0.1, "momentum": 0.9, "nesterov": true, "seed": 1}', 2) AS digits_model \gset
SELECT mop_train('house',
  '{"model": [{"type": "dense", "units": 16, "activation": "tanh"}, {"type": "dense", "units": 1}],
    "optimizer": "adam", "learning_rate": 0.01, "batch_size": 16, "seed": 5}',
  epochs => 20) AS house_model \gset
SELECT mop_train('flags',
  '{"model": {"layers": [{"type": "dense", "units": 8, "activation": "relu"},
                         {"type": "dense", "units": 1, "activation": "sigmoid"}]},
    "learning_rate": 0.02, "batch_size": 16, "seed": 2}', 15) AS flags_model \gset
SELECT mop_train('bars',
  '{"model": {"layers": [{"type": "Conv2D", "filters": 4, "kernel_size": [3, 3], "padding": "same", "activation": "relu"},
                         {"type": "MaxPooling2D", "pool_size": 2},
                         {"type": "Flatten"},
                         {"type": "Dense", "units": 2, "activation": "softmax"}]},
    "optimizer": "adam", "learning_rate": 0.02, "batch_size": 8, "seed": 3}',
  epochs => 10) AS bars_model \gset

-- class labels come back as the original text
SELECT mop_predict(:blobs_model, ARRAY[0.0, 1.5, 0.5]) AS near_setosa,
       mop_predict(:blobs_model, ARRAY[3.0, 6.5, -2.0]) AS near_versicolor,
       mop_predict(:blobs_model, ARRAY[6.0, 11.5, -4.0]) AS near_virginica;
-- probabilities in label order, summing to one
SELECT array_length(p, 1) AS n, round((p[1] + p[2] + p[3])::numeric, 4) AS total, p[3] > 0.5 AS virginica
  FROM (SELECT mop_predict_proba(:blobs_model, ARRAY[6.0, 11.5, -4.0]) AS p) s;
-- accuracy over the whole table (the model is cached for the query)
SELECT round(avg((mop_predict(:blobs_model, ARRAY[a, b, c]::float8[]) = species)::int), 1) >= 0.9 AS accurate
  FROM blobs;

-- several models in one query (each loaded once per call site)
SELECT m.id = :blobs_model AS first, count(*) AS rows,
       round(avg((mop_predict(m.id, ARRAY[b.a, b.b, b.c]::float8[]) = b.species)::int), 1) >= 0.9 AS accurate
  FROM blobs b, mop.models m JOIN mop.datasets d ON d.id = m.dataset_id
 WHERE d.name = 'blobs' AND m.id IN (:blobs_model, :blobs_model2)
 GROUP BY 1 ORDER BY 1;

-- integer labels come back as their text
SELECT DISTINCT mop_predict(:digits_model, ARRAY[f1, f2]) AS predicted FROM digits ORDER BY 1;

-- or in the original type, given as a typed NULL
SELECT mop_predict(:digits_model, ARRAY[f1, f2], NULL::int) AS predicted, pg_typeof(mop_predict(:digits_model, ARRAY[f1, f2], NULL::int))
  FROM digits ORDER BY 1 LIMIT 1;
SELECT mop_predict(:flags_model, ARRAY[1.0, 1.0], NULL::boolean) AS flag,
       round(mop_predict(:house_model, ARRAY[0.5, 0.2], NULL::float8)) AS price;

-- images
SELECT round(avg((mop_predict(:bars_model, pixels::float8[]) = orientation)::int), 1) >= 0.9 AS accurate
  FROM bars;

-- regression: the value, as text
SELECT abs(mop_predict(:house_model, ARRAY[0.5, 0.2])::float8 - (2 * 0.5 - 3 * 0.2 + 1)) < 0.5 AS close;
SELECT array_length(mop_predict_proba(:house_model, ARRAY[0.5, 0.2]), 1) AS values;

-- binary: the original boolean's text, probabilities for false and true
SELECT mop_predict(:flags_model, ARRAY[1.0, 1.0]) AS both_positive,
       mop_predict(:flags_model, ARRAY[-1.0, -1.0]) AS both_negative,
       array_length(mop_predict_proba(:flags_model, ARRAY[1.0, 1.0]), 1) AS n;

-- evaluate on new data, with the stored standardisation
CREATE TABLE blobs_test AS
SELECT (ARRAY['setosa', 'versicolor', 'virginica'])[k + 1] AS species,
       (k * 3 + cos(i))::float8 AS a, (k * 5 + i % 4)::int AS b,
       (k * -2 + sin(i * 1.3))::numeric(8, 4) AS c
  FROM generate_series(1000, 1089) i, LATERAL (SELECT i % 3 AS k) s;
SELECT rows, metric >= 0.9 AS accurate, loss > 0 AS has_loss
  FROM mop_evaluate(:blobs_model, 'blobs_test');
SELECT rows, metric < 0.1 AS fits FROM mop_evaluate(:house_model, 'house');
-- only the dataset's columns are needed, in any order, extra columns ignored
CREATE VIEW blobs_test_view AS SELECT c, 'x' AS extra, species, b, a FROM blobs_test;
SELECT rows FROM mop_evaluate(:blobs_model, 'blobs_test_view');
-- empty table: no rows, NULL means
CREATE TABLE blobs_empty AS SELECT * FROM blobs_test WHERE false;
SELECT * FROM mop_evaluate(:blobs_model, 'blobs_empty');
