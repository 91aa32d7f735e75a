-- hop_handover.sql -- what a hop costs with a 2.8 MB state when the
-- training itself is next to nothing: 2 Adam MLPs (784-256-128-10) on 600
-- rows in 4 partitions, 1 worker, :epochs epochs, mop.checkpoint_every =
-- :ce.  cycle = the run's span of hops / hops (one hop's start to the
-- next's), inside = a hop's own interval (loading or taking over the
-- state, training, serializing), gap = cycle - inside (committing or
-- handing over, and the coordinator's hand-off).  Run by hop_handover.sh.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS mop;
SET mop.threads_per_worker = 1;
SET mop.checkpoint_every = :ce;
CREATE TABLE hp AS
SELECT i AS id, (i % 10)::text AS label,
       ARRAY(SELECT ((i % 10) * 0.03 + sin(i * 5 + j))::real FROM generate_series(1, 784) j) AS v
  FROM generate_series(1, 600) i;
SELECT count(*) FROM mop_prepare('hp', 'label', ARRAY['v'], partitions => 4, validation => 0.1, seed => 1) \gset
\set space '{"model": {"layers": [{"type": "dense", "units": 256, "activation": "relu"}, {"type": "dense", "units": 128, "activation": "relu"}, {"type": "dense", "units": 10}]}, "optimizer": "adam", "learning_rate": [0.001, 0.0005], "batch_size": 128}'
SELECT pg_current_wal_lsn() AS lsn0 \gset
SELECT DISTINCT run_id AS r FROM mop_grid_search('hp', :'space', epochs => :epochs, workers => 1, seed => 1) \gset
SELECT format('RESULT fsync=%s ce=%s hops=%s state_mb=%s cycle_ms=%s inside_ms=%s gap_ms=%s commits=%s wal_mb_per_hop=%s', current_setting('fsync'), :ce, count(*),
              round((SELECT avg(length(state)) FROM mop.models WHERE run_id = :r) / 1048576.0, 2),
              round(extract(epoch FROM max(finished_at) - min(started_at)) * 1000 / count(*), 2),
              round(avg(extract(epoch FROM finished_at - started_at)) * 1000, 2),
              round((extract(epoch FROM max(finished_at) - min(started_at)) * 1000 / count(*)
                     - avg(extract(epoch FROM finished_at - started_at)) * 1000), 2),
              count(DISTINCT xmin::text),
              round((pg_wal_lsn_diff(pg_current_wal_lsn(), :'lsn0') / 1048576.0 / count(*))::numeric, 2))
  FROM mop.hops WHERE run_id = :r;
