-- plan_check.sql -- mop_explain and mop_explain_workers against the real grid search:
-- a grid of 8 configurations (two MLPs x two learning rates x two batch
-- sizes) on 20,000 rows of 64 features in 2 partitions, 3 epochs, predicted
-- and then run with 1 and with 2 workers.  In a pg_virtualenv cluster:
--   pg_virtualenv -t -v 15 psql -X -f test/bench/plan_check.sql
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS mop;
CREATE TABLE pc AS
SELECT i AS id, (i % 10)::text AS label,
       ARRAY(SELECT ((i % 10) * 0.1 + sin(i * 7 + j))::real FROM generate_series(1, 64) j) AS v
  FROM generate_series(1, 20000) i;
SELECT count(*) FROM mop_prepare('pc', 'label', ARRAY['v'], partitions => 2, seed => 1);
\set space '{"model": [{"layers": [{"type": "dense", "units": 128, "activation": "relu"}, {"type": "dense", "units": 10}]}, {"layers": [{"type": "dense", "units": 512, "activation": "relu"}, {"type": "dense", "units": 10}]}], "learning_rate": [0.01, 0.001], "batch_size": [32, 128]}'
SELECT config_no, round(total_s::numeric, 2) AS predicted_s FROM mop_explain('pc', :'space', 3) ORDER BY 1;
SELECT workers, round(makespan_s::numeric, 2) AS predicted_makespan_s, round(speedup::numeric, 2) AS speedup, knee FROM mop_explain_workers('pc', :'space', 3);
SELECT DISTINCT run_id AS r1 FROM mop_grid_search('pc', :'space', epochs => 3, workers => 1) \gset
SELECT DISTINCT run_id AS r2 FROM mop_grid_search('pc', :'space', epochs => 3, workers => 2) \gset
SELECT id, workers, round(extract(epoch FROM finished_at - started_at)::numeric, 2) AS actual_s,
       round((SELECT extract(epoch FROM max(h.finished_at) - min(h.started_at)) FROM mop.hops h WHERE h.run_id = r.id)::numeric, 2) AS hops_span_s
  FROM mop.runs r WHERE id IN (:r1, :r2) ORDER BY id;
