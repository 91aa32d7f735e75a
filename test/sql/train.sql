-- train: sequential training over all partitions, recorded in the catalog
SET client_min_messages = warning;

SELECT mop_train('blobs',
  '{"model": {"layers": [{"type": "dense", "units": 16, "activation": "relu"},
                         {"type": "dense", "units": 3}]},
    "optimizer": "adam", "learning_rate": 0.01, "batch_size": 16, "l2": 1e-5, "seed": 1}',
  epochs => 8) AS blobs_model \gset

SELECT status, epochs_done, metric, higher_is_better, best_valid_metric >= 0.9 AS accurate,
       best_epoch BETWEEN 1 AND 8 AS best_epoch_ok, length(state) > 0 AS has_state
  FROM mop.models WHERE id = :blobs_model;
SELECT count(*) AS epochs, bool_and(train_rows = 240 AND valid_rows = 60) AS rows_ok,
       bool_and(seconds > 0) AS timed
  FROM mop.epochs WHERE model_id = :blobs_model;
-- training loss goes down
SELECT (SELECT train_loss FROM mop.epochs WHERE model_id = :blobs_model AND epoch = 8) <
       (SELECT train_loss FROM mop.epochs WHERE model_id = :blobs_model AND epoch = 1) AS loss_down;
-- one run of kind train, one hop per (epoch, partition), worker 0
SELECT r.kind, r.status, r.epochs, r.finished_at IS NOT NULL AS finished
  FROM mop.runs r JOIN mop.models m ON m.run_id = r.id WHERE m.id = :blobs_model;
SELECT count(*) AS hops, count(DISTINCT (epoch, partition)) AS distinct_hops,
       sum(rows) AS rows, bool_and(worker = 0) AS worker0,
       bool_and(finished_at >= started_at) AS ordered
  FROM mop.hops WHERE model_id = :blobs_model;

-- training is deterministic: the same configuration gives the same model
SELECT mop_train('blobs',
  '{"model": {"layers": [{"type": "dense", "units": 16, "activation": "relu"},
                         {"type": "dense", "units": 3}]},
    "optimizer": "adam", "learning_rate": 0.01, "batch_size": 16, "l2": 1e-5, "seed": 1}',
  epochs => 8) AS blobs_model2 \gset
SELECT a.state = b.state AS identical_state
  FROM mop.models a, mop.models b WHERE a.id = :blobs_model AND b.id = :blobs_model2;
SELECT bool_and(a.train_loss = b.train_loss AND a.valid_metric = b.valid_metric) AS identical_epochs
  FROM mop.epochs a JOIN mop.epochs b USING (epoch)
 WHERE a.model_id = :blobs_model AND b.model_id = :blobs_model2;

-- a small CNN on the 4 x 4 images (Keras spellings accepted)
SELECT mop_train('bars',
  '{"model": {"layers": [{"type": "Conv2D", "filters": 4, "kernel_size": [3, 3], "padding": "same", "activation": "relu"},
                         {"type": "MaxPooling2D", "pool_size": 2},
                         {"type": "Flatten"},
                         {"type": "Dense", "units": 2, "activation": "softmax"}]},
    "optimizer": "adam", "learning_rate": 0.02, "batch_size": 8, "seed": 3}',
  epochs => 10) AS bars_model \gset
SELECT status, epochs_done, best_valid_metric >= 0.9 AS accurate
  FROM mop.models WHERE id = :bars_model;

-- regression: mse loss and metric by default
SELECT mop_train('house',
  '{"model": [{"type": "dense", "units": 16, "activation": "tanh"}, {"type": "dense", "units": 1}],
    "optimizer": "adam", "learning_rate": 0.01, "batch_size": 16, "seed": 5}',
  epochs => 20) AS house_model \gset
SELECT status, metric, higher_is_better, best_valid_metric < 0.1 AS fits
  FROM mop.models WHERE id = :house_model;

-- binary target: one sigmoid unit (binary cross-entropy) or two softmax units
SELECT mop_train('flags',
  '{"model": {"layers": [{"type": "dense", "units": 8, "activation": "relu"},
                         {"type": "dense", "units": 1, "activation": "sigmoid"}]},
    "learning_rate": 0.02, "batch_size": 16, "seed": 2}', 15) AS flags_model \gset
SELECT status, metric, best_valid_metric >= 0.85 AS accurate FROM mop.models WHERE id = :flags_model;
SELECT mop_train('flags',
  '{"model": {"layers": [{"type": "dense", "units": 8, "activation": "relu"},
                         {"type": "dense", "units": 2}]},
    "loss": "categorical_crossentropy", "learning_rate": 0.02, "batch_size": 16, "seed": 2}', 15) AS flags_model2 \gset
SELECT status, best_valid_metric >= 0.85 AS accurate FROM mop.models WHERE id = :flags_model2;

-- integer labels, every optimizer, Keras serialised layers, dropout, gelu, top-k
CREATE TEMP TABLE more_models AS SELECT * FROM unnest(ARRAY[
    mop_train('digits', '{"model": {"layers": [{"type": "dense", "units": 8, "activation": "gelu"}, {"type": "dropout", "rate": 0.1}, {"type": "dense", "units": 3}]}, "optimizer": "sgd", "learning_rate": 0.1, "momentum": 0.9, "nesterov": true, "seed": 1}', 2),
    mop_train('digits', '{"model": {"layers": [{"class_name": "Dense", "config": {"name": "d1", "units": 8, "activation": "relu", "kernel_initializer": "glorot_uniform"}}, {"class_name": "Dense", "config": {"units": 3, "activation": "softmax"}}]}, "optimizer": "rmsprop", "learning_rate": 0.01, "seed": 1}', 2),
    mop_train('digits', '{"model": {"layers": [{"type": "dense", "units": 8}, {"type": "activation", "activation": "leaky_relu"}, {"type": "dense", "units": 3}]}, "optimizer": "adamw", "weight_decay": 0.01, "clip_norm": 1.0, "metric": "top_k_accuracy", "top_k": 2, "seed": 1}', 2)
  ]) WITH ORDINALITY AS t(id, n);
SELECT m.status, m.epochs_done, m.config->>'optimizer' AS optimizer, m.metric
  FROM more_models t JOIN mop.models m ON m.id = t.id ORDER BY t.n;

-- a dataset without a validation split trains; validation columns stay NULL
SELECT mop_train('blobs_raw', '{"model": {"layers": [{"type": "dense", "units": 3}]}, "seed": 1}', 2) AS raw_model \gset
SELECT epoch, valid_loss IS NULL AS no_valid_loss, valid_rows FROM mop.epochs WHERE model_id = :raw_model ORDER BY epoch;
SELECT status, best_valid_metric IS NULL AS no_best FROM mop.models WHERE id = :raw_model;

-- divergence is not an error: the model is marked diverged and keeps its last finite checkpoint
SELECT mop_train('house', '{"model": [{"type": "dense", "units": 16, "activation": "relu"}, {"type": "dense", "units": 1}],
                            "optimizer": "sgd", "learning_rate": 1e6, "seed": 1}', 5) AS bad_model \gset
SELECT status, epochs_done, error, state = mop.init_model('house', config) AS initial_state_kept
  FROM mop.models WHERE id = :bad_model;
SELECT count(*) AS epochs FROM mop.epochs WHERE model_id = :bad_model;
SELECT r.status FROM mop.runs r JOIN mop.models m ON m.run_id = r.id WHERE m.id = :bad_model;
