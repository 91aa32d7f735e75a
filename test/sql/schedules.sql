-- schedules: "lr_schedule" in a configuration.  A step schedule trains
-- exactly as the constant rate until its first step and differently after
-- it; a model trained for 2 epochs and then continued through the narrow
-- waist (mop.train_agg) from its stored checkpoint trains its epochs 3 and
-- 4 exactly as the uninterrupted 4-epoch run did (the schedule's position
-- travels in the checkpoint); bad schedules are 22023 naming the key.
-- (err(q) is defined in install.sql)
SET client_min_messages = warning;
CREATE TABLE sch AS
SELECT i AS id, ((sin(i * 0.9) > 0)::int + (cos(i * 0.4) > 0.3)::int) AS k,
       sin(i * 0.9) AS a, cos(i * 0.4) AS b
  FROM generate_series(1, 400) i;
SELECT mop_prepare('sch', 'k', ARRAY['a', 'b'], partitions => 2, seed => 1) IS NOT NULL AS prepared;
CREATE TABLE sch_cfg AS
SELECT '{"model": {"layers": [{"type": "dense", "units": 8, "activation": "tanh"}, {"type": "dense", "units": 3}]},
         "optimizer": "sgd", "momentum": 0.9, "learning_rate": 0.05, "batch_size": 16, "seed": 3}'::jsonb AS base;
CREATE TABLE sch_models AS
SELECT 'constant' AS name, mop_train('sch', base, 4) AS m FROM sch_cfg
UNION ALL
SELECT 'step', mop_train('sch', base || '{"lr_schedule": {"type": "step", "step_size": 2, "gamma": 0.1}}', 4) FROM sch_cfg
UNION ALL
SELECT 'step_2', mop_train('sch', base || '{"lr_schedule": {"type": "step", "step_size": 2, "gamma": 0.1}}', 2) FROM sch_cfg
UNION ALL
SELECT 'cosine', mop_train('sch', base || '{"lr_schedule": {"type": "cosine", "min_lr": 0, "warmup": 2}}', 4) FROM sch_cfg;
-- epochs 1-2 of the step schedule are the constant rate's, 3-4 are not
SELECT e.epoch, c.train_loss = e.train_loss AS same_as_constant
  FROM sch_models s JOIN mop.epochs e ON e.model_id = s.m
  JOIN mop.epochs c ON c.epoch = e.epoch AND c.model_id = (SELECT m FROM sch_models WHERE name = 'constant')
 WHERE s.name = 'step' ORDER BY e.epoch;
-- with a warmup the first epoch already differs
SELECT e.epoch, c.train_loss = e.train_loss AS same_as_constant
  FROM sch_models s JOIN mop.epochs e ON e.model_id = s.m
  JOIN mop.epochs c ON c.epoch = e.epoch AND c.model_id = (SELECT m FROM sch_models WHERE name = 'constant')
 WHERE s.name = 'cosine' AND e.epoch = 1;
-- continue the 2-epoch model's checkpoint for epochs 3 and 4 (partitions
-- 0 and 1 in turn, as mop_train does); the checkpoint says 2 epochs done,
-- and epochs 2 and 3 (0-based) both train at 0.05 * 0.1
CREATE TABLE sch_cont (step int, state bytea, loss_sum float8, rows bigint);
INSERT INTO sch_cont SELECT 0, state, 0, 0 FROM mop.models WHERE id = (SELECT m FROM sch_models WHERE name = 'step_2');
CREATE FUNCTION sch_next(p int, st int) RETURNS void LANGUAGE sql AS $$
  INSERT INTO sch_cont
  SELECT st, (r).state, (r).loss_sum, (r).rows FROM (
    SELECT mop.train_agg((SELECT state FROM sch_cont WHERE step = st - 1), b.x, b.y) AS r
      FROM (SELECT x, y FROM mop.buffers
             WHERE dataset_id = (SELECT id FROM mop.datasets WHERE name = 'sch')
               AND split = 'train' AND partition = p ORDER BY buffer_no) b) s $$;
SELECT sch_next(0, 1), sch_next(1, 2), sch_next(0, 3), sch_next(1, 4);
SELECT e.epoch,
       abs((SELECT sum(loss_sum) / sum(rows) FROM sch_cont WHERE step IN (2 * e.epoch - 5, 2 * e.epoch - 4))
           - e.train_loss) < 1e-12 AS resumed_equals_uninterrupted
  FROM mop.epochs e WHERE e.model_id = (SELECT m FROM sch_models WHERE name = 'step') AND e.epoch > 2
 ORDER BY e.epoch;
-- the final weights agree too: the same predictions as the 4-epoch model's state
SELECT mop.eval_agg((SELECT state FROM sch_cont WHERE step = 4), b.x, b.y)
     = mop.eval_agg((SELECT state FROM mop.models WHERE id = (SELECT m FROM sch_models WHERE name = 'step')), b.x, b.y)
       AS same_final_model
  FROM mop.buffers b WHERE b.dataset_id = (SELECT id FROM mop.datasets WHERE name = 'sch') AND b.split = 'valid';

-- errors name the key
SELECT err($$SELECT mop.init_model('sch', (SELECT base FROM sch_cfg) || '{"lr_schedule": {"type": "step", "step_size": 0, "gamma": 0.5}}')$$);
SELECT err($$SELECT mop.init_model('sch', (SELECT base FROM sch_cfg) || '{"lr_schedule": {"type": "step", "gamma": 0.5}}')$$);
SELECT err($$SELECT mop.init_model('sch', (SELECT base FROM sch_cfg) || '{"lr_schedule": {"type": "exponential", "gamma": 0}}')$$);
SELECT err($$SELECT mop.init_model('sch', (SELECT base FROM sch_cfg) || '{"lr_schedule": {"type": "linear"}}')$$);
SELECT err($$SELECT mop.init_model('sch', (SELECT base FROM sch_cfg) || '{"lr_schedule": {"step_size": 2}}')$$);
SELECT err($$SELECT mop.init_model('sch', (SELECT base FROM sch_cfg) || '{"lr_schedule": {"type": "cosine", "min_lr": 0, "gamma": 0.5}}')$$);
SELECT err($$SELECT mop.init_model('sch', (SELECT base FROM sch_cfg) || '{"lr_schedule": {"type": "cosine", "min_lr": 0.5, "epochs": 3}}')$$);
SELECT err($$SELECT mop.init_model('sch', (SELECT base FROM sch_cfg) || '{"lr_schedule": {"type": "cosine", "min_lr": 0}}')$$);
SELECT err($$SELECT mop.init_model('sch', (SELECT base FROM sch_cfg) || '{"lr_schedule": {"type": "step", "step_size": 2, "gamma": 0.5, "warmup": -1}}')$$);
SELECT err($$SELECT mop.init_model('sch', (SELECT base FROM sch_cfg) || '{"lr_schedule": {"type": "step", "step_size": 2, "gamma": 0.5, "bogus": 1}}')$$);
SELECT err($$SELECT mop.init_model('sch', (SELECT base FROM sch_cfg) || '{"lr_schedule": "step"}')$$);
SELECT length(mop.init_model('sch', (SELECT base FROM sch_cfg) || '{"lr_schedule": {"type": "cosine", "min_lr": 0, "epochs": 3}}')) > 0 AS cosine_with_epochs_ok;
-- in a search space, a schedule object is its fixed value (as in a configuration);
-- a list of them is searched
SELECT count(*) AS models, count(DISTINCT config->'lr_schedule') AS schedules,
       bool_and(status = 'done') AS done
  FROM mop_grid_search('sch', (SELECT base FROM sch_cfg) - 'learning_rate'
                       || '{"learning_rate": [0.05, 0.01], "lr_schedule": {"type": "cosine", "min_lr": 0}}', 2, wait => true);
SELECT count(*) AS models, count(DISTINCT config->'lr_schedule') AS schedules
  FROM mop_grid_search('sch', (SELECT base FROM sch_cfg)
                       || '{"lr_schedule": [{"type": "cosine", "min_lr": 0}, {"type": "step", "step_size": 1, "gamma": 0.5}]}', 2, wait => true);
