-- fuzz: deterministic regression cases of what the fuzzers found in the
-- SQL-facing code (the fuzzers themselves: test/unit/test_fuzz.c for the
-- engine, test/sh/fuzz.sh for every SQL function that reads a model state
-- or a buffer)
SET client_min_messages = warning;
CREATE TABLE fz AS
SELECT (i % 3)::text AS label, (i % 3) + sin(i) AS a, cos(i * 3) AS b
  FROM generate_series(1, 120) i;
SELECT dataset_name, train_rows FROM mop_prepare('fz', 'label', partitions => 1, buffer_rows => 16,
                                                 validation => 0.2, seed => 1);
SELECT mop_train('fz', '{"model": [{"type": "dense", "units": 3}], "batch_size": 8, "seed": 1}', 1) AS m \gset

-- a buffer stored compressed (8 MB of zeros take a few kB on disk) is
-- admitted to the buffer cache by its size in memory, not on disk: the
-- cache stays within mop.buffer_cache_mb
BEGIN;
CREATE TABLE fz_zeros AS SELECT decode(repeat('00', 8000000), 'hex') AS b;
UPDATE mop.buffers SET x = (SELECT b FROM fz_zeros)
 WHERE dataset_id = (SELECT dataset_id FROM mop.models WHERE id = :m) AND split = 'train' AND buffer_no = 0;
SELECT pg_column_compression(x) IS NOT NULL AS compressed, pg_column_size(x) < 1000000 AS small_on_disk
  FROM mop.buffers
 WHERE dataset_id = (SELECT dataset_id FROM mop.models WHERE id = :m) AND split = 'train' AND buffer_no = 0;
-- empty the cache; a second reset then has nothing left to release
SELECT mop.buffer_cache_reset() IS NOT NULL AS reset, mop.buffer_cache_reset() = 0 AS emptied;
SET mop.buffer_cache_mb = 1;
SELECT err(format($q$SELECT mop.train_agg(m.state, b.x, b.y) FROM mop.models m, mop.buffers b
                    WHERE m.id = %s AND b.dataset_id = m.dataset_id AND b.split = 'train'
                      AND b.buffer_no = 0$q$, :m)) AS refused;
SELECT mop.buffer_cache_reset() <= 1024 * 1024 AS cache_within_limit;
RESET mop.buffer_cache_mb;
ROLLBACK;

-- model states of another optimizer (same layers, same sizes) are not averaged
SELECT mop_train('fz', '{"model": [{"type": "dense", "units": 3}], "optimizer": "adamw", "batch_size": 8, "seed": 1}', 1) AS m2 \gset
SELECT err(format('SELECT mop.average_states(ARRAY[a.state, b.state]) FROM mop.models a, mop.models b
                    WHERE a.id = %s AND b.id = %s', :m, :m2)) AS other_optimizer;
SELECT length(mop.average_states(ARRAY[state, state])) = length(state) AS same_optimizer
  FROM mop.models WHERE id = :m;
SELECT mop_drop_dataset('fz');
DROP TABLE fz;
