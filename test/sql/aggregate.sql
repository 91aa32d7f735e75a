-- aggregate: the narrow waist, used from plain SQL
SET client_min_messages = warning;
SELECT id AS ds FROM mop.datasets WHERE name = 'blobs' \gset
\set cfg '{"model": {"layers": [{"type": "dense", "units": 16, "activation": "relu"}, {"type": "dense", "units": 3}]}, "optimizer": "adam", "learning_rate": 0.01, "batch_size": 16, "seed": 11}'

-- a fresh model state
CREATE TEMP TABLE m AS SELECT mop.init_model('blobs', :'cfg') AS state;
SELECT length(state) > 0 AS has_state, substr(state, 1, 8) = 'MOPMODEL'::bytea AS magic FROM m;
-- init_model is deterministic
SELECT mop.init_model('blobs', :'cfg') = state AS same_init FROM m;

-- one sub-epoch on partition 0: returns the new state and training sums
SELECT (r).rows, (r).status, (r).loss_sum > 0 AS has_loss, (r).state <> m.state AS changed
  FROM (SELECT mop.train_agg(m.state, b.x, b.y ORDER BY b.buffer_no) AS r
          FROM m, mop.buffers b
         WHERE b.dataset_id = :ds AND b.split = 'train' AND b.partition = 0) s, m;

-- one epoch = partitions 0, 1, 2 in order, chained through a table
CREATE FUNCTION pg_temp.hop(p int) RETURNS bigint LANGUAGE sql AS $$
  UPDATE m SET state = t.st FROM (
    SELECT (mop.train_agg(m.state, b.x, b.y ORDER BY b.buffer_no)).state AS st
      FROM m, mop.buffers b
     WHERE b.dataset_id = (SELECT id FROM mop.datasets WHERE name = 'blobs')
       AND b.split = 'train' AND b.partition = p) t
  RETURNING length(m.state)::bigint $$;
SELECT pg_temp.hop(0) > 0, pg_temp.hop(1) > 0, pg_temp.hop(2) > 0;

-- mop_train runs the same code: one epoch of it gives the identical model
-- (its state also records the completed epoch, the learning-rate
-- schedule's position: the same weights evaluate identically)
SELECT mop_train('blobs', :'cfg', 1) AS one_epoch \gset
SELECT mop.eval_agg(mm.state, b.x, b.y ORDER BY b.partition, b.buffer_no) =
       mop.eval_agg(m.state, b.x, b.y ORDER BY b.partition, b.buffer_no) AS same_as_mop_train
  FROM mop.models mm, m, mop.buffers b WHERE mm.id = :one_epoch AND b.dataset_id = :ds;

-- evaluation sums over the validation split match what mop_train recorded
SELECT (r).rows, round(((r).loss_sum / (r).rows)::numeric, 6) = round(e.valid_loss::numeric, 6) AS same_loss,
       round(((r).metric_sum / (r).rows)::numeric, 6) = round(e.valid_metric::numeric, 6) AS same_metric
  FROM (SELECT mop.eval_agg(m.state, b.x, b.y ORDER BY b.partition, b.buffer_no) AS r
          FROM m, mop.buffers b WHERE b.dataset_id = :ds AND b.split = 'valid') s,
       mop.epochs e WHERE e.model_id = :one_epoch AND e.epoch = 1;

-- several models in one statement, one group each
SELECT g, (r).rows, (r).status FROM (
  SELECT g, mop.train_agg(mop.init_model('blobs', jsonb_set(:'cfg'::jsonb, '{seed}', to_jsonb(g))),
                          b.x, b.y ORDER BY b.buffer_no) AS r
    FROM generate_series(1, 3) g, mop.buffers b
   WHERE b.dataset_id = :ds AND b.split = 'train' AND b.partition = 1
   GROUP BY g) s ORDER BY g;

-- expanding the composite evaluates the aggregate once
SELECT rows, status, length(state) > 0 AS has_state
  FROM (SELECT (mop.train_agg(m.state, b.x, b.y ORDER BY b.buffer_no)).*
          FROM m, mop.buffers b
         WHERE b.dataset_id = :ds AND b.split = 'train' AND b.partition = 2) s;
SELECT (mop.eval_agg(m.state, b.x, b.y)).* FROM m, mop.buffers b WHERE false;

-- no buffers: NULL
SELECT mop.train_agg(m.state, b.x, b.y) IS NULL AS empty_is_null
  FROM m, mop.buffers b WHERE false;

-- the backend's buffer cache (for out-of-line buffers such as those of "bars") changes nothing
SHOW mop.buffer_cache_mb;
-- empty the cache; a second reset then has nothing left to release
SELECT mop.buffer_cache_reset() IS NOT NULL AS reset, mop.buffer_cache_reset() = 0 AS emptied;
\set bcfg '{"model": [{"type": "conv2d", "filters": 2, "kernel_size": 3, "activation": "relu"}, {"type": "flatten"}, {"type": "dense", "units": 2}], "batch_size": 8, "seed": 4}'
SELECT mop_train('bars', :'bcfg', 2) AS cached_a \gset
SELECT mop_train('bars', :'bcfg', 2) AS cached_b \gset
SET mop.buffer_cache_mb = 0;
SELECT mop_train('bars', :'bcfg', 2) AS uncached \gset
RESET mop.buffer_cache_mb;
SELECT a.state = b.state AS cache_hit_same, a.state = c.state AS no_cache_same
  FROM mop.models a, mop.models b, mop.models c
 WHERE a.id = :cached_a AND b.id = :cached_b AND c.id = :uncached;
SELECT mop.buffer_cache_reset() > 0 AS had_cached_buffers;
