-- notices: what mop decides on its own is said, never silent
SET client_min_messages = notice;
\set VERBOSITY default
-- features => NULL: the numeric columns; the others are named
CREATE TABLE notice_mix AS
SELECT (i % 2 = 0) AS flag, i::float8 AS x, (i * 0.5)::numeric AS y, 'note ' || i AS note, DATE '2026-01-01' + i AS day
  FROM generate_series(1, 40) i;
SELECT dataset_name, n_features FROM mop_prepare('notice_mix', 'flag', dataset => 'notice_mix');
-- named features: nothing to say
SELECT dataset_name, n_features FROM mop_prepare('notice_mix', 'flag', ARRAY['x'], 'notice_mix_x');
-- more workers asked than the dataset has partitions (and wait => false: no progress lines)
CREATE TEMP TABLE r AS
SELECT DISTINCT run_id FROM mop_grid_search('notice_mix', '{"model": {"layers": [{"type": "dense", "units": 1}]}}',
                                            epochs => 1, workers => 3, wait => false);
SET client_min_messages = warning;
SELECT mop_wait(run_id) FROM r;
-- mop.workers (the default) capped too
SET client_min_messages = notice;
SET mop.workers = 4;
CREATE TEMP TABLE r2 AS
SELECT DISTINCT run_id FROM mop_grid_search('notice_mix', '{"model": {"layers": [{"type": "dense", "units": 1}]}}',
                                            epochs => 1, wait => false);
SET client_min_messages = warning;
SELECT mop_wait(run_id) FROM r2;
RESET mop.workers;
-- partitions => NULL (the default): as many as a run would use workers
-- (mop.workers), fewer with a NOTICE when the training rows are fewer
SET client_min_messages = notice;
SET mop.workers = 3;
SELECT dataset_name, partitions_used FROM mop_prepare('notice_mix', 'flag', ARRAY['x'], 'notice_mix_3');
CREATE TABLE notice_two AS SELECT * FROM notice_mix WHERE x <= 2;
SELECT dataset_name, train_rows, partitions_used FROM mop_prepare('notice_two', 'flag', ARRAY['x'], validation => 0);
RESET mop.workers;
SET client_min_messages = warning;
