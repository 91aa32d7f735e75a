-- adaptive: Hyperband on model hopper parallelism
SET client_min_messages = warning;

-- the plan of Li et al. (JMLR 2018), Table 1: R = 81, eta = 3
SELECT * FROM mop_hyperband_plan(81, 3);
SELECT bracket, round, configs, resource FROM mop_hyperband_plan(27, 3);
SELECT bracket, round, configs, resource FROM mop_hyperband_plan(16, 2);
SELECT bracket, round, configs, resource FROM mop_hyperband_plan(10, 3);
SELECT * FROM mop_hyperband_plan(1, 3);

-- a Hyperband run (R = 9 epochs, eta = 3) over the 3 partitions of "blobs"
CREATE TEMP TABLE hb AS
SELECT * FROM mop_hyperband('blobs',
  '{"model": {"layers": [{"type": "dense", "units": 8, "activation": "relu"}, {"type": "dense", "units": 3}]},
    "learning_rate": {"loguniform": [0.0001, 0.1]}, "batch_size": [16, 32]}',
  max_resource => 9, eta => 3, workers => 3, seed => 1);
SELECT run_id AS hb_run FROM hb LIMIT 1 \gset
SELECT kind, status, epochs, options->>'algorithm' AS algorithm,
       (options->>'max_resource')::int AS r, (options->>'eta')::int AS eta
  FROM mop.runs WHERE id = :hb_run;
-- the plan decides how many models stop where: 9 + 5 + 3 configurations;
-- 6 stopped after 1 epoch, 6 after 3, 5 trained to 9
SELECT status, epochs_done, count(*) FROM hb GROUP BY 1, 2 ORDER BY 2, 1;
-- promoted models resume from their checkpoints: no sub-epoch is trained twice
SELECT sum(h.n) = sum(m.epochs_done) * 3 AS no_retraining,
       bool_and(h.n = h.d) AS each_hop_once
  FROM mop.models m
  JOIN (SELECT model_id, count(*) AS n, count(DISTINCT (epoch, partition)) AS d
          FROM mop.hops GROUP BY model_id) h ON h.model_id = m.id
 WHERE m.run_id = :hb_run;
-- every decision is recorded with its numbers
SELECT action, why, count(*) FROM mop.decisions WHERE run_id = :hb_run GROUP BY 1, 2 ORDER BY 1, 2;
SELECT bool_and(rank <= keep AND score >= cutoff) AS promoted_above_cutoff
  FROM mop.decisions WHERE run_id = :hb_run AND action = 'continue';
SELECT bool_and(rank > keep) AS cut_below
  FROM mop.decisions WHERE run_id = :hb_run AND action = 'stop' AND why <> 'finished';
SELECT bool_and(to_resource > from_resource) AS promotions_go_up,
       array_agg(DISTINCT (from_resource, to_resource)::text ORDER BY (from_resource, to_resource)::text) AS steps
  FROM mop.decisions WHERE run_id = :hb_run AND action = 'continue';
-- the winner is never a stopped-by-failure model, and the run is replayable bit for bit
SELECT m.status IN ('done', 'stopped') AS valid_winner FROM mop.best b JOIN mop.models m ON m.id = b.model_id
 WHERE b.run_id = :hb_run;
SELECT DISTINCT run_id AS hb_replay FROM mop_replay(:hb_run) \gset
SELECT count(*) AS pairs, bool_and(a.state = b.state AND a.epochs_done = b.epochs_done) AS identical_replay
  FROM mop.models a JOIN mop.models b ON a.config = b.config
 WHERE a.run_id = :hb_run AND b.run_id = :hb_replay;

-- ASHA: no barriers; promotions resume from checkpoints; paused trials stop at the end
CREATE TEMP TABLE asha AS
SELECT * FROM mop_asha('blobs',
  '{"model": {"layers": [{"type": "dense", "units": 8, "activation": "relu"}, {"type": "dense", "units": 3}]},
    "learning_rate": {"loguniform": [0.0001, 0.1]}, "batch_size": [16, 32]}',
  max_resource => 9, eta => 3, max_trials => 12, workers => 3, seed => 1);
SELECT run_id AS asha_run FROM asha LIMIT 1 \gset
SELECT kind, status, options->>'algorithm' AS algorithm, (options->>'max_trials')::int AS max_trials
  FROM mop.runs WHERE id = :asha_run;
SELECT count(*) AS models, bool_and(status IN ('done', 'stopped')) AS all_settled,
       bool_and(epochs_done IN (1, 3, 9)) AS on_rungs,
       count(*) FILTER (WHERE epochs_done >= 3) >= 4 AS top_third_promoted,
       count(*) FILTER (WHERE epochs_done = 9) >= 1 AS some_finished
  FROM asha;
SELECT sum(h.n) = sum(m.epochs_done) * 3 AS no_retraining
  FROM mop.models m
  JOIN (SELECT model_id, count(*) AS n FROM mop.hops GROUP BY model_id) h ON h.model_id = m.id
 WHERE m.run_id = :asha_run;
SELECT bool_and(rank <= keep) AS promoted_from_top
  FROM mop.decisions WHERE run_id = :asha_run AND action = 'continue';
SELECT count(*) FILTER (WHERE action = 'new') AS started,
       count(*) FILTER (WHERE action = 'stop') AS stopped
  FROM mop.decisions WHERE run_id = :asha_run;
-- new trials start only when a worker would idle: at most two models with
-- work per worker, so before the first result at most 2 x 3 trials started
SELECT count(*) FILTER (WHERE action = 'new' AND id < (SELECT min(id) FROM mop.decisions
                        WHERE run_id = :asha_run AND action = 'report')) <= 6 AS started_on_demand
  FROM mop.decisions WHERE run_id = :asha_run;

-- median stopping with random search: a model whose best score is below the
-- median of the others at the same epoch stops (which ones stop depends on
-- timing; two of these 8 learning rates, about 4e-6 and 6e-6, cannot learn in
-- 6 epochs, so at least one model stops early)
CREATE TEMP TABLE med AS
SELECT * FROM mop_random_search('blobs',
  '{"model": {"layers": [{"type": "dense", "units": 8, "activation": "relu"}, {"type": "dense", "units": 3}]},
    "optimizer": "sgd", "learning_rate": {"loguniform": [0.000001, 0.1]}, "batch_size": 16}',
  trials => 8, epochs => 6, workers => 3, seed => 3, early_stopping => 'median');
SELECT run_id AS med_run FROM med LIMIT 1 \gset
SELECT options->>'early_stopping' AS early_stopping FROM mop.runs WHERE id = :med_run;
SELECT count(*) AS models, bool_and(status IN ('done', 'stopped')) AS settled,
       count(*) FILTER (WHERE status = 'stopped') >= 1 AS some_stopped,
       bool_and(status = 'done' OR epochs_done < 6) AS stopped_early,
       bool_and(status = 'stopped' OR epochs_done = 6) AS others_finished
  FROM med;
SELECT bool_and(d.score < d.cutoff AND d.from_resource = m.epochs_done) AS below_median,
       count(*) = (SELECT count(*) FROM med WHERE status = 'stopped') AS one_decision_each
  FROM mop.decisions d JOIN mop.models m ON m.id = d.model_id
 WHERE d.run_id = :med_run AND d.why = 'median_stop';

-- PBT: members exploit (copy weights and optimizer state) and explore;
-- lineage in mop.decisions (which members exploit depends on timing; with
-- learning rates from 1e-5 to 0.1 the bottom quantile always trails, so at
-- least one member exploits)
CREATE TEMP TABLE pbt AS
SELECT * FROM mop_pbt('blobs',
  '{"model": {"layers": [{"type": "dense", "units": 8, "activation": "relu"}, {"type": "dense", "units": 3}]},
    "optimizer": "sgd", "learning_rate": {"loguniform": [0.00001, 0.1]},
    "momentum": {"uniform": [0.0, 0.9]}, "batch_size": [16, 32, 64]}',
  population => 6, epochs => 6, "interval" => 2, workers => 3, seed => 5);
SELECT run_id AS pbt_run FROM pbt LIMIT 1 \gset
SELECT kind, status, options->>'algorithm' AS algorithm, (options->>'population')::int AS population,
       (options->>'interval')::int AS "interval"
  FROM mop.runs WHERE id = :pbt_run;
SELECT count(*) AS members, bool_and(status = 'done' AND epochs_done = 6) AS all_trained,
       bool_and((config->>'learning_rate')::float8 BETWEEN 0.00001 AND 0.1) AS lr_in_bounds,
       bool_and((config->>'batch_size')::int IN (16, 32, 64)) AS batch_in_choices
  FROM pbt;
-- every exploit copies a better member, at an interval boundary, and records its lineage
SELECT count(*) >= 1 AS exploited,
       bool_and(d.parent_model_id <> d.model_id AND d.cutoff >= d.score
                AND d.from_resource % 2 = 0 AND d.hyperparameters IS NOT NULL
                AND p.run_id = :pbt_run) AS exploits_ok
  FROM mop.decisions d JOIN mop.models p ON p.id = d.parent_model_id
 WHERE d.run_id = :pbt_run AND d.action = 'exploit';
-- a member's configuration is the one its last exploit explored
SELECT count(*) >= 1 AS members_exploited,
       bool_and(m.config = last.hyperparameters) AS config_follows_lineage
  FROM mop.models m
  JOIN LATERAL (SELECT hyperparameters FROM mop.decisions d
                 WHERE d.model_id = m.id AND d.action = 'exploit' ORDER BY d.id DESC LIMIT 1) last ON true
 WHERE m.run_id = :pbt_run;

-- the winning schedule is read back from the lineage
SELECT bool_and(s.n >= 1 AND s.last_by = m.id AND s.configs_known AND s.epochs > 0) AS schedules_ok
  FROM mop.models m
  CROSS JOIN LATERAL (SELECT count(*) AS n, (array_agg(trained_by ORDER BY segment DESC))[1] AS last_by,
                             bool_and(config IS NOT NULL) AS configs_known, sum(epochs) AS epochs
                        FROM mop_pbt_schedule(m.id)) s
 WHERE m.run_id = :pbt_run;

-- replay: every member follows its recorded sub-epochs, starts from its
-- starting configuration and, at each recorded exploit, takes its parent's
-- checkpoint as it was then: the replayed population is bit-identical --
-- latest and best checkpoints, configurations, every epoch's validation
-- metric -- and repeats the lineage
CREATE FUNCTION pg_temp.same_replay(a bigint, b bigint) RETURNS text LANGUAGE sql AS $$
  SELECT count(*) || ' models, ' ||
         CASE WHEN bool_and(md5(x.state) = md5(y.state)) THEN 'same states' ELSE 'different states' END || ', ' ||
         CASE WHEN bool_and(md5(x.best_state) IS NOT DISTINCT FROM md5(y.best_state)
                            AND x.best_epoch = y.best_epoch) THEN 'same best states' ELSE 'different best states' END || ', ' ||
         CASE WHEN bool_and(x.config = y.config AND x.status = y.status AND x.epochs_done = y.epochs_done)
              THEN 'same configs' ELSE 'different configs' END || ', ' ||
         CASE WHEN bool_and((SELECT array_agg(e.valid_metric ORDER BY e.epoch) FROM mop.epochs e WHERE e.model_id = x.id)
                            = (SELECT array_agg(e.valid_metric ORDER BY e.epoch) FROM mop.epochs e WHERE e.model_id = y.id))
              THEN 'same metrics' ELSE 'different metrics' END || ', ' ||
         CASE WHEN (SELECT array_agg(ARRAY[m.rn, p.rn] ORDER BY d.id) FROM mop.decisions d
                      JOIN (SELECT id, row_number() OVER (ORDER BY id) rn FROM mop.models WHERE run_id = a) m ON m.id = d.model_id
                      JOIN (SELECT id, row_number() OVER (ORDER BY id) rn FROM mop.models WHERE run_id = a) p ON p.id = d.parent_model_id
                     WHERE d.run_id = a AND d.action = 'exploit')
                 IS NOT DISTINCT FROM
                   (SELECT array_agg(ARRAY[m.rn, p.rn] ORDER BY d.id) FROM mop.decisions d
                      JOIN (SELECT id, row_number() OVER (ORDER BY id) rn FROM mop.models WHERE run_id = b) m ON m.id = d.model_id
                      JOIN (SELECT id, row_number() OVER (ORDER BY id) rn FROM mop.models WHERE run_id = b) p ON p.id = d.parent_model_id
                     WHERE d.run_id = b AND d.action = 'exploit')
              THEN 'same lineage' ELSE 'different lineage' END
    FROM (SELECT row_number() OVER (ORDER BY id) AS rn, * FROM mop.models WHERE run_id = a) x
    FULL JOIN (SELECT row_number() OVER (ORDER BY id) AS rn, * FROM mop.models WHERE run_id = b) y USING (rn)
$$;
SELECT DISTINCT run_id AS pbt_replay FROM mop_replay(:pbt_run, workers => 2) \gset
SELECT (SELECT count(*) FROM mop.decisions WHERE run_id = :pbt_run AND action = 'exploit') > 0 AS exploited,
       pg_temp.same_replay(:pbt_run, :pbt_replay) AS pbt_replay;

-- TPE: random startup proposals, then proposals from the completed results,
-- at most one trial in flight per worker
CREATE TEMP TABLE tpe AS
SELECT * FROM mop_tpe('blobs',
  '{"model": {"layers": [{"type": "dense", "units": 8, "activation": "relu"}, {"type": "dense", "units": 3}]},
    "optimizer": "sgd", "learning_rate": {"loguniform": [0.00001, 0.1]}, "batch_size": [16, 32, 64]}',
  trials => 10, epochs => 2, n_startup => 4, workers => 3, seed => 5);
SELECT run_id AS tpe_run FROM tpe LIMIT 1 \gset
SELECT options->>'algorithm' AS algorithm, (options->>'trials')::int AS trials FROM mop.runs WHERE id = :tpe_run;
SELECT count(*) AS trials, bool_and(status = 'done' AND epochs_done = 2) AS all_trained,
       bool_and((config->>'learning_rate')::float8 BETWEEN 0.00001 AND 0.1) AS lr_in_bounds,
       bool_and((config->>'batch_size')::int IN (16, 32, 64)) AS batch_in_choices
  FROM tpe;
SELECT count(*) FILTER (WHERE reason LIKE 'random startup%') >= 3 AS startup_random,
       count(*) FILTER (WHERE reason LIKE 'TPE proposal%') >= 1 AS model_based,
       bool_and(reason NOT LIKE 'TPE proposal%' OR substring(reason FROM 'after (\d+) completed')::int >= 1) AS tpe_saw_results
  FROM mop.decisions WHERE run_id = :tpe_run AND action = 'new';

-- convergence-aware scheduling (Hermes): workers prefer the models whose
-- validation loss falls fastest per second; an option of every method
CREATE TEMP TABLE conv AS
SELECT * FROM mop_grid_search('blobs',
  '{"model": {"layers": [{"type": "dense", "units": 8, "activation": "relu"}, {"type": "dense", "units": 3}]},
    "optimizer": "adam", "learning_rate": [0.01, 0.0001], "batch_size": [16, 32]}',
  epochs => 3, workers => 3, scheduler => 'convergence');
SELECT r.options->>'scheduler' AS scheduler, count(*) AS models, bool_and(c.status = 'done') AS all_done
  FROM conv c JOIN mop.runs r ON r.id = c.run_id GROUP BY 1;
SELECT count(*) AS model_epochs, bool_and(n = 3) AS each_partition_once
  FROM (SELECT model_id, epoch, count(DISTINCT partition) AS n FROM mop.hops
         WHERE run_id = (SELECT run_id FROM conv LIMIT 1) GROUP BY 1, 2) s;
-- a configuration not started yet ranks with the best first epoch so far:
-- the leader (the first model here, whatever its loss) trains on before
-- the next configuration starts, instead of every configuration getting its
-- first epoch first
CREATE TEMP TABLE conv1 AS
SELECT * FROM mop_grid_search('blobs',
  '{"model": {"layers": [{"type": "dense", "units": 3}]}, "optimizer": "adam",
    "learning_rate": [0.01, 0.003, 0.001]}',
  epochs => 3, workers => 1, scheduler => 'convergence', seed => 3);
WITH h AS (SELECT model_id, epoch, started_at, id FROM mop.hops
            WHERE run_id = (SELECT run_id FROM conv1 LIMIT 1)),
     first AS (SELECT model_id FROM h ORDER BY started_at, id LIMIT 1)
SELECT (SELECT min(started_at) FROM h WHERE epoch = 2 AND model_id = (SELECT model_id FROM first))
     < (SELECT min(started_at) FROM h WHERE model_id <> (SELECT model_id FROM first)) AS leader_second_epoch_first,
       (SELECT count(*) FROM h) AS hops
  FROM first;
-- TPE with the median stopping rule (as Optuna's TPE with a pruner): a
-- stopped trial tells TPE its best score so far, and TPE goes on proposing
-- (random proposals here, a quarter of them with a hopeless learning rate)
CREATE TEMP TABLE tpe_med AS
SELECT * FROM mop_tpe('blobs',
  '{"model": {"layers": [{"type": "dense", "units": 8, "activation": "relu"}, {"type": "dense", "units": 3}]},
    "optimizer": "sgd", "learning_rate": [0.0000001, 0.05, 0.03, 0.02], "batch_size": 16}',
  trials => 10, epochs => 5, n_startup => 10, workers => 3, seed => 6, early_stopping => 'median');
SELECT run_id AS tpe_med_run FROM tpe_med LIMIT 1 \gset
SELECT options->>'algorithm' AS algorithm, options->>'early_stopping' AS early_stopping,
       (SELECT count(*) FROM tpe_med) AS trials,
       (SELECT bool_and(status = 'done' OR (status = 'stopped' AND epochs_done < 5)) FROM tpe_med) AS settled,
       (SELECT count(*) FROM mop.decisions WHERE run_id = :tpe_med_run AND action = 'report')
         = (SELECT count(*) FROM tpe_med) AS every_trial_told
  FROM mop.runs WHERE id = :tpe_med_run;
SELECT count(*) > 0 AS some_stopped,
       bool_and(d.score < d.cutoff) AS below_median
  FROM mop.decisions d WHERE d.run_id = :tpe_med_run AND d.why = 'median_stop';
SET mop.scheduler = 'convergence';
SELECT DISTINCT run_id AS guc_run
  FROM mop_tpe('blobs', '{"model": {"layers": [{"type": "dense", "units": 3}]}, "learning_rate": [0.01, 0.001]}',
               trials => 2, epochs => 1, workers => 2) \gset
SELECT options->>'scheduler' AS scheduler_from_guc FROM mop.runs WHERE id = :guc_run;
RESET mop.scheduler;
-- FIFO (Hermes' baseline): one worker trains each model to the end, in order
CREATE TEMP TABLE fifo AS
SELECT * FROM mop_grid_search('blobs',
  '{"model": {"layers": [{"type": "dense", "units": 3}]}, "learning_rate": [0.01, 0.02, 0.03]}',
  epochs => 2, workers => 1, scheduler => 'fifo');
SELECT r.options->>'scheduler' AS scheduler, count(DISTINCT h.model_id) AS models, count(*) AS hops,
       bool_and(h.model_id >= prev) AS models_in_order
  FROM (SELECT run_id, model_id, lag(model_id, 1, 0::bigint) OVER (ORDER BY started_at, id) AS prev
          FROM mop.hops WHERE run_id = (SELECT run_id FROM fifo LIMIT 1)) h
  JOIN mop.runs r ON r.id = h.run_id GROUP BY 1;

-- reproducible with a seed: deterministic => true fixes each model's
-- partition order from the seed; Hyperband's rungs are barriers, TPE
-- proposes in synchronous batches and PBT ranks synchronous generations, so
-- two runs give bit-identical models (Hyperband even with other worker counts)
CREATE FUNCTION pg_temp.same_models(a bigint, b bigint) RETURNS text LANGUAGE sql AS $$
  SELECT count(*) || ' models, ' ||
         CASE WHEN bool_and(x.config = y.config AND x.state = y.state AND x.status = y.status
                            AND x.epochs_done = y.epochs_done) THEN 'identical' ELSE 'different' END
    FROM (SELECT row_number() OVER (ORDER BY id) AS rn, * FROM mop.models WHERE run_id = a) x
    FULL JOIN (SELECT row_number() OVER (ORDER BY id) AS rn, * FROM mop.models WHERE run_id = b) y USING (rn)
$$;
SELECT DISTINCT run_id AS hb_d1 FROM mop_hyperband('blobs',
  '{"model": {"layers": [{"type": "dense", "units": 8, "activation": "relu"}, {"type": "dense", "units": 3}]},
    "learning_rate": {"loguniform": [0.0001, 0.1]}, "batch_size": [16, 32]}',
  max_resource => 9, eta => 3, workers => 3, seed => 7, deterministic => true) \gset
SELECT DISTINCT run_id AS hb_d2 FROM mop_hyperband('blobs',
  '{"model": {"layers": [{"type": "dense", "units": 8, "activation": "relu"}, {"type": "dense", "units": 3}]},
    "learning_rate": {"loguniform": [0.0001, 0.1]}, "batch_size": [16, 32]}',
  max_resource => 9, eta => 3, workers => 2, seed => 7, deterministic => true) \gset
SELECT pg_temp.same_models(:hb_d1, :hb_d2) AS hyperband_3_vs_2_workers;
SELECT DISTINCT run_id AS tpe_d1 FROM mop_tpe('blobs',
  '{"model": {"layers": [{"type": "dense", "units": 8, "activation": "relu"}, {"type": "dense", "units": 3}]},
    "optimizer": "sgd", "learning_rate": {"loguniform": [0.00001, 0.1]}, "batch_size": [16, 32, 64]}',
  trials => 8, epochs => 2, n_startup => 3, workers => 3, seed => 8, deterministic => true) \gset
SELECT DISTINCT run_id AS tpe_d2 FROM mop_tpe('blobs',
  '{"model": {"layers": [{"type": "dense", "units": 8, "activation": "relu"}, {"type": "dense", "units": 3}]},
    "optimizer": "sgd", "learning_rate": {"loguniform": [0.00001, 0.1]}, "batch_size": [16, 32, 64]}',
  trials => 8, epochs => 2, n_startup => 3, workers => 3, seed => 8, deterministic => true) \gset
SELECT pg_temp.same_models(:tpe_d1, :tpe_d2) AS tpe_twice,
       (SELECT (options->>'batch')::int FROM mop.runs WHERE id = :tpe_d1) AS tpe_batch;
-- each batch of 3 was proposed from the results of all earlier batches
SELECT bool_and(substring(reason FROM 'after (\d+) completed')::int = (rn - 1) / 3 * 3) AS batches_synchronous
  FROM (SELECT reason, row_number() OVER (ORDER BY model_id) AS rn FROM mop.decisions
         WHERE run_id = :tpe_d1 AND action = 'new') d;
SELECT DISTINCT run_id AS pbt_d1 FROM mop_pbt('blobs',
  '{"model": {"layers": [{"type": "dense", "units": 8, "activation": "relu"}, {"type": "dense", "units": 3}]},
    "optimizer": "sgd", "learning_rate": {"loguniform": [0.00001, 0.1]}, "batch_size": [16, 32, 64]}',
  population => 6, epochs => 6, "interval" => 2, workers => 3, seed => 9, deterministic => true) \gset
SELECT DISTINCT run_id AS pbt_d2 FROM mop_pbt('blobs',
  '{"model": {"layers": [{"type": "dense", "units": 8, "activation": "relu"}, {"type": "dense", "units": 3}]},
    "optimizer": "sgd", "learning_rate": {"loguniform": [0.00001, 0.1]}, "batch_size": [16, 32, 64]}',
  population => 6, epochs => 6, "interval" => 2, workers => 3, seed => 9, deterministic => true) \gset
SELECT pg_temp.same_models(:pbt_d1, :pbt_d2) AS pbt_twice;
-- the same lineage: generations at epochs 2 and 4, the same exploits in the same order
SELECT (SELECT string_agg(DISTINCT from_resource::text, ',') FROM mop.decisions
         WHERE run_id = :pbt_d1 AND action = 'report') AS generations,
       (SELECT count(*) FROM mop.decisions WHERE run_id = :pbt_d1 AND action = 'exploit') > 0 AS exploited,
       (SELECT array_agg(ARRAY[m.rn, p.rn] ORDER BY d.id) FROM mop.decisions d
          JOIN (SELECT id, row_number() OVER (ORDER BY id) rn FROM mop.models WHERE run_id = :pbt_d1) m ON m.id = d.model_id
          JOIN (SELECT id, row_number() OVER (ORDER BY id) rn FROM mop.models WHERE run_id = :pbt_d1) p ON p.id = d.parent_model_id
         WHERE d.run_id = :pbt_d1 AND d.action = 'exploit')
     = (SELECT array_agg(ARRAY[m.rn, p.rn] ORDER BY d.id) FROM mop.decisions d
          JOIN (SELECT id, row_number() OVER (ORDER BY id) rn FROM mop.models WHERE run_id = :pbt_d2) m ON m.id = d.model_id
          JOIN (SELECT id, row_number() OVER (ORDER BY id) rn FROM mop.models WHERE run_id = :pbt_d2) p ON p.id = d.parent_model_id
         WHERE d.run_id = :pbt_d2 AND d.action = 'exploit') AS same_lineage;
-- and a deterministic run replays bit for bit as well
SELECT DISTINCT run_id AS pbt_d3 FROM mop_replay(:pbt_d1) \gset
SELECT pg_temp.same_replay(:pbt_d1, :pbt_d3) AS pbt_deterministic_replay;

-- errors
SELECT err($$SELECT * FROM mop_hyperband_plan(0, 3)$$);
SELECT err($$SELECT * FROM mop_hyperband_plan(9, 1)$$);
SELECT err($$SELECT * FROM mop_hyperband('blobs', '{"model": [{"type": "dense", "units": 3}]}', 0)$$);
SELECT err($$SELECT * FROM mop_hyperband('blobs', '{"model": [{"type": "dense", "units": 3}]}', 9, eta => 1)$$);
SELECT err($$SELECT * FROM mop_hyperband('blobs', '{"model": [{"type": "dense", "units": 3}], "learning_rate": {"uniform": [1, 0]}}', 9)$$);
SELECT err($$SELECT * FROM mop_asha('blobs', '{"model": [{"type": "dense", "units": 3}]}', 9, min_resource => 10)$$);
SELECT err($$SELECT * FROM mop_asha('blobs', '{"model": [{"type": "dense", "units": 3}]}', 9, max_trials => 0)$$);
SELECT err($$SELECT * FROM mop_grid_search('blobs', '{"model": [{"type": "dense", "units": 3}]}', early_stopping => 'mean')$$);
SELECT err($$SELECT * FROM mop_pbt('blobs', '{"model": [{"type": "dense", "units": 3}], "learning_rate": [0.1, 0.01]}', population => 1)$$);
SELECT err($$SELECT * FROM mop_pbt('blobs', '{"model": [{"type": "dense", "units": 3}], "learning_rate": [0.1, 0.01]}', epochs => 4, "interval" => 5)$$);
SELECT err($$SELECT * FROM mop_pbt('blobs', '{"model": [{"type": "dense", "units": 3}], "learning_rate": [0.1, 0.01]}', quantile => 0.7)$$);
SELECT err($$SELECT * FROM mop_pbt('blobs', '{"model": [{"type": "dense", "units": 3}], "learning_rate": 0.1}')$$);
SELECT err($$SELECT * FROM mop_pbt('blobs', '{"model": [{"layers": [{"type": "dense", "units": 3}]}, {"layers": [{"type": "dense", "units": 3}]}], "learning_rate": [0.1, 0.01]}')$$);
SELECT err($$SELECT * FROM mop_tpe('blobs', '{"model": [{"type": "dense", "units": 3}], "learning_rate": [0.1, 0.01]}', trials => 0)$$);
SELECT err($$SELECT * FROM mop_tpe('blobs', '{"model": [{"type": "dense", "units": 3}], "learning_rate": [0.1, 0.01]}', 5, gamma => 0)$$);
SELECT err($$SELECT * FROM mop_tpe('blobs', '{"model": [{"type": "dense", "units": 3}], "learning_rat": [0.1, 0.01]}', 5)$$);
SELECT err(format('SELECT * FROM mop_resume(%s)', :hb_run)) = format('55000: run %s has already finished', :hb_run) AS finished_run_not_resumed;
SELECT err(format($$SELECT * FROM mop_resume(%s, add => '{"model": [{"type": "dense", "units": 3}]}')$$, :hb_run)) AS add_to_hyperband;
SELECT err(format($$SELECT * FROM mop_resume(%s, add => '{"model": [{"type": "dense", "units": 3}]}')$$, :tpe_run)) AS add_to_tpe;
SELECT err($$SELECT * FROM mop_tpe('blobs', '{"model": {"layers": [{"type": "dense", "units": 3}]}, "learning_rate": [0.01, 0.001]}', trials => 2, epochs => 1, deterministic => true, early_stopping => 'median')$$) AS tpe_median_deterministic;
SELECT err($$SELECT * FROM mop_tpe('blobs', '{"model": {"layers": [{"type": "dense", "units": 3}]}, "learning_rate": [0.01, 0.001]}', trials => 2, epochs => 1, early_stopping => 'hyperband')$$) AS tpe_bad_early_stopping;
SELECT (options->>'gamma')::text AS gamma_text FROM mop.runs WHERE id = :tpe_run;
