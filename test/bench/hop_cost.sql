-- hop_cost.sql -- what a hop costs besides its training: a 1-worker grid
-- search of small and large models on a few rows per partition; each
-- sub-epoch's cycle (one hop's start to the next one's) less the training
-- and validation the profile predicts for it (the plan's own hop costs set
-- to 0), against the bytes of the model's checkpoint.  The last lines are
-- the settings that fit: the fixed cost is the median of the models under
-- 256 kB, the cost per MB the median over the larger ones.  In a
-- pg_virtualenv cluster:
--   pg_virtualenv -t -v 15 psql -X -v seed=1 -f test/bench/hop_cost.sql
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS mop;
SELECT mop_drop_dataset('hc') FROM mop.datasets WHERE name = 'hc';
DROP TABLE IF EXISTS hc;
SET mop.plan_hop_cost = 0;
SET mop.plan_state_cost = 0;
SET mop.plan_epoch_cost = 0;
SET mop.plan_run_cost = 0;
CREATE TABLE hc AS
SELECT i AS id, (i % 2)::text AS label,
       ARRAY(SELECT ((i % 2) * 0.3 + sin(i * 5 + j))::real FROM generate_series(1, 8) j) AS v
  FROM generate_series(1, 800) i;
SELECT count(*) FROM mop_prepare('hc', 'label', ARRAY['v'], partitions => 8, validation => 0.1, seed => 1);
\set space '{"model": {"layers": [{"type": "dense", "units": [8, 256, 512, 1024], "activation": "relu"}, {"type": "dense", "units": [8, 256, 512, 1024], "activation": "relu"}, {"type": "dense", "units": 2}]}, "optimizer": "adam", "batch_size": 32}'
CREATE TEMP TABLE hc_plan AS SELECT * FROM mop_explain('hc', :'space', 3);
SELECT config_no, model_bytes, round(sub_epoch_s::numeric * 1000, 3) AS sub_epoch_ms,
       round((epoch_s - 8 * sub_epoch_s)::numeric * 1000, 3) AS validation_ms FROM hc_plan ORDER BY 1;
SELECT DISTINCT run_id AS r FROM mop_grid_search('hc', :'space', epochs => 3, workers => 1, seed => :seed) \gset
CREATE TEMP TABLE hc_hops AS
SELECT h.model_id, h.epoch, h.partition, p.model_bytes, p.sub_epoch_s, p.epoch_s - 8 * p.sub_epoch_s AS valid_s,
       row_number() OVER (PARTITION BY h.model_id, h.epoch ORDER BY h.started_at) = 8 AS epoch_end,
       extract(epoch FROM lead(h.started_at) OVER (ORDER BY h.started_at) - h.started_at) AS cycle_s,
       extract(epoch FROM h.finished_at - h.started_at) AS inside_s
  FROM mop.hops h JOIN mop.models m ON m.id = h.model_id
  JOIN hc_plan p ON p.config = m.config
 WHERE h.run_id = :r;
SELECT count(*) AS hops, count(DISTINCT model_id) AS models FROM hc_hops;
-- per hop outside the profile's training, by model size, ms
SELECT model_bytes, epoch_end, count(*),
       round(avg(cycle_s - sub_epoch_s - CASE WHEN epoch_end THEN valid_s ELSE 0 END)::numeric * 1000, 3) AS overhead_ms,
       round(avg(inside_s)::numeric * 1000, 3) AS inside_ms, round(avg(cycle_s)::numeric * 1000, 3) AS cycle_ms
  FROM hc_hops WHERE cycle_s IS NOT NULL GROUP BY 1, 2 ORDER BY 2, 1;
SELECT epoch_end, round(regr_intercept(cycle_s - sub_epoch_s - CASE WHEN epoch_end THEN valid_s ELSE 0 END, model_bytes)::numeric * 1000, 3) AS fixed_ms,
       round(regr_slope(cycle_s - sub_epoch_s - CASE WHEN epoch_end THEN valid_s ELSE 0 END, model_bytes)::numeric * 1000 * 1048576, 3) AS ms_per_mb
  FROM hc_hops WHERE cycle_s IS NOT NULL GROUP BY 1 ORDER BY 1;
SELECT round(extract(epoch FROM r.finished_at - r.started_at)::numeric, 3) AS run_s,
       round((SELECT extract(epoch FROM max(h.finished_at) - min(h.started_at)) FROM mop.hops h WHERE h.run_id = r.id)::numeric, 3) AS hops_span_s,
       round((SELECT extract(epoch FROM min(h.started_at) - r.started_at) FROM mop.hops h WHERE h.run_id = r.id)::numeric, 3) AS to_first_hop_s,
       round((SELECT extract(epoch FROM r.finished_at - max(h.finished_at)) FROM mop.hops h WHERE h.run_id = r.id)::numeric, 3) AS after_last_hop_s
  FROM mop.runs r WHERE r.id = :r;
-- the settings that fit this run
WITH o AS (SELECT model_bytes, cycle_s - sub_epoch_s AS over_s FROM hc_hops WHERE cycle_s IS NOT NULL AND NOT epoch_end),
     f AS (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY over_s) AS fixed_s FROM o WHERE model_bytes < 262144)
SELECT format('SET mop.plan_hop_cost = ''%sms'';', round((f.fixed_s * 1000)::numeric, 2)) AS setting FROM f
UNION ALL
SELECT format('SET mop.plan_state_cost = %s;  -- ms per MB',
              round((percentile_cont(0.5) WITHIN GROUP (ORDER BY (o.over_s - f.fixed_s) / (o.model_bytes / 1048576.0)) * 1000)::numeric, 2))
  FROM o, f WHERE o.model_bytes >= 262144 GROUP BY f.fixed_s;
