-- prepare: pack tables into partitioned float32 buffers
-- Also the suite's data setup (second in REGRESS, after install): the tables
-- blobs, digits, bars, house and flags and the datasets of the same names
-- (and blobs_raw) made here are used by the later files, which make
-- everything else they use themselves.
-- All data are generated deterministically (no random()).
SET client_min_messages = warning;

-- three well-separated classes with text labels; numeric columns of several types
CREATE TABLE blobs AS
SELECT (ARRAY['setosa', 'versicolor', 'virginica'])[k + 1] AS species,
       (k * 3 + sin(i))::float8 AS a,
       (k * 5 + i % 4)::int AS b,
       (k * -2 + cos(i * 1.7))::numeric(8, 4) AS c
  FROM generate_series(1, 300) i, LATERAL (SELECT i % 3 AS k) s;

-- integer labels whose natural order differs from their text order
CREATE TABLE digits AS
SELECT (ARRAY[2, 10, 1])[i % 3 + 1] AS digit,
       (i % 3) * 2 + sin(i) AS f1,
       (i % 3) * -1.5 + cos(i * 0.3) AS f2
  FROM generate_series(1, 150) i;

-- 4 x 4 single-channel images: a horizontal or a vertical bar
CREATE TABLE bars AS
SELECT CASE WHEN i % 2 = 0 THEN 'horizontal' ELSE 'vertical' END AS orientation,
       ARRAY(SELECT (CASE WHEN (i % 2 = 0 AND j / 4 = (i / 2) % 4)
                            OR (i % 2 = 1 AND j % 4 = (i / 2) % 4) THEN 1.0 ELSE 0.0 END
                     + 0.1 * sin(i * 16 + j))::real
               FROM generate_series(0, 15) j) AS pixels
  FROM generate_series(1, 200) i;

-- a regression target
CREATE TABLE house AS
SELECT sin(i) AS x1, cos(i * 0.7) AS x2, 2 * sin(i) - 3 * cos(i * 0.7) + 1 AS price
  FROM generate_series(1, 400) i;

-- a boolean (binary) target
CREATE TABLE flags AS
SELECT sin(i * 1.3) AS u, cos(i * 0.9) AS v, sin(i * 1.3) + cos(i * 0.9) > 0 AS flag
  FROM generate_series(1, 300) i;

SELECT * FROM mop_prepare('blobs', 'species', ARRAY['a', 'b', 'c'], 'blobs',
                          partitions => 3, validation => 0.2, buffer_rows => 32, seed => 42);
-- features default to every numeric column except the target
SELECT * FROM mop_prepare('digits', 'digit', dataset => 'digits', partitions => 2);
SELECT * FROM mop_prepare('bars', 'orientation', ARRAY['pixels'], 'bars',
                          partitions => 2, validation => 0.25, shape => ARRAY[4, 4, 1]);
SELECT * FROM mop_prepare('house', 'price', dataset => 'house', partitions => 2, seed => 7);
SELECT * FROM mop_prepare('flags', 'flag', dataset => 'flags');
-- no validation split, no standardisation
SELECT * FROM mop_prepare('blobs', 'species', dataset => 'blobs_raw', validation => 0,
                          standardize => false);

SELECT name, source, features, feature_kind, input_shape, n_features, target,
       target_kind, target_type, labels, partitions, train_rows, valid_rows
  FROM mop.datasets ORDER BY id;

-- statistics: one mean and one std per feature, stds positive
SELECT name, normalized, array_length(feature_mean, 1) AS means,
       (SELECT bool_and(s > 0) FROM unnest(feature_std) s) AS std_positive
  FROM mop.datasets ORDER BY id;
-- the training split of "blobs" has mean(a) near 3 and b's mean near 6.5
SELECT round(feature_mean[1]::numeric, 0) AS mean_a, round(feature_mean[2]::numeric, 0) AS mean_b
  FROM mop.datasets WHERE name = 'blobs';

-- buffers: partitions differ by at most one row; bytes = rows * features * 4
SELECT d.name, b.split, b.partition, count(*) AS buffers, sum(b.rows) AS rows,
       bool_and(length(b.x) = b.rows * d.n_features * 4) AS x_ok,
       bool_and(length(b.y) = b.rows * 4) AS y_ok,
       max(b.rows) <= d.buffer_rows AS within_buffer_rows
  FROM mop.buffers b JOIN mop.datasets d ON d.id = b.dataset_id
 GROUP BY d.name, d.id, b.split, b.partition, d.n_features, d.buffer_rows
 ORDER BY d.id, b.split, b.partition;

-- buffer numbers are dense from 0 in each partition
SELECT bool_and(n = c - 1) AS dense FROM (
  SELECT max(buffer_no) AS n, count(*) AS c FROM mop.buffers
   GROUP BY dataset_id, split, partition) s;

-- the same seed packs identical buffers; another seed shuffles differently
SELECT dataset_name FROM mop_prepare('blobs', 'species', ARRAY['a', 'b', 'c'], 'blobs_again',
                                     partitions => 3, validation => 0.2, buffer_rows => 32, seed => 42);
SELECT dataset_name FROM mop_prepare('blobs', 'species', ARRAY['a', 'b', 'c'], 'blobs_seed43',
                                     partitions => 3, validation => 0.2, buffer_rows => 32, seed => 43);
CREATE FUNCTION pg_temp.buffers_md5(ds text) RETURNS text LANGUAGE sql AS $$
  SELECT md5(string_agg(md5(b.x) || md5(b.y), ',' ORDER BY b.split, b.partition, b.buffer_no))
    FROM mop.buffers b JOIN mop.datasets d ON d.id = b.dataset_id WHERE d.name = ds $$;
SELECT pg_temp.buffers_md5('blobs') = pg_temp.buffers_md5('blobs_again') AS same_seed_same_buffers,
       pg_temp.buffers_md5('blobs') = pg_temp.buffers_md5('blobs_seed43') AS other_seed_same_buffers;
SELECT mop_drop_dataset('blobs_again'), mop_drop_dataset('blobs_seed43'), mop_drop_dataset('nosuch');
SELECT count(*) FROM mop.datasets WHERE name LIKE 'blobs_%';

-- features default to the only numeric array column when there is no numeric column
SELECT dataset_name, n_features FROM mop_prepare('bars', 'orientation', dataset => 'bars_auto');
SELECT features, feature_kind, input_shape FROM mop.datasets WHERE name = 'bars_auto';
SELECT mop_drop_dataset('bars_auto');

-- a view works as a source
CREATE VIEW blobs_small AS SELECT * FROM blobs WHERE b < 12;
SELECT dataset_name, train_rows + valid_rows AS rows, classes
  FROM mop_prepare('blobs_small', 'species', ARRAY['a', 'c']);
