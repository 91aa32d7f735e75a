/*
 * mop--0.1--0.2.sql -- upgrade of the mop extension from 0.1 to 0.2
 * (ALTER EXTENSION mop UPDATE).
 *
 * The full install script of 0.2, mop--0.2.sql, is built from mop--0.1.sql
 * followed by this file (see the Makefile), so CREATE EXTENSION mop and
 * an upgraded 0.1 have the same catalog.  Rows, identities and model
 * states are untouched; only privileges and row-level security change.
 * The C library is the same for both versions.
 *
 * 1. Ordinary roles may read the views mop.progress, mop.leaderboard and
 *    mop.best.  They are security_invoker views (they run as the caller),
 *    so the row-level security of mop.runs and mop.models applies to
 *    them: a role sees only its own runs and models through them.
 *
 * 2. Row-level security covers what a row refers to, not only who owns
 *    it.  Every policy names the owner explicitly, and a row may be
 *    written (INSERT, or UPDATE to its new values) only if every dataset,
 *    run and model it refers to belongs to the writing role:
 *      buffers    -> datasets          runs       -> datasets
 *      models     -> datasets, runs    epochs     -> models
 *      hops       -> runs, models      decisions  -> runs, models, parent models
 *    A reference to another role's row and a reference to no row fail
 *    alike, with "new row violates row-level security policy" (42501):
 *    the policy is checked before the foreign key, so nothing tells a role
 *    whether another role's id exists.
 *
 * 3. Ids come from the identity columns only: ordinary roles may insert
 *    and update every column except id.  An explicit id was a way to ask
 *    "does row N exist?" (a duplicate-key error) and to plant a row on an
 *    id the sequence would hand to someone else later.
 *
 * 4. The training and search functions take a device argument (cpu, gpu
 *    or auto; NULL: mop.device), as a SET clause would set mop.device for
 *    the call.  A new parameter changes a function's signature, so each is
 *    dropped and created again with the same body and the argument added
 *    last: calls written for 0.1 work unchanged.  Privileges granted or
 *    revoked on these functions by hand are not carried over (they are
 *    executable by PUBLIC, as in 0.1).
 *
 * 5. Runs stopped by a crash or restart say so: status 'interrupted' (the
 *    run and its models that were training), set by mop's run functions
 *    and, with mop preloaded, by its startup recovery, which then resumes
 *    them (mop.auto_resume).
 *
 * Superusers and the extension's owner bypass row-level security, as
 * before.  Rows that 0.1 let one role write against another role's rows
 * are reported by a WARNING below, never deleted: the superuser decides.
 */

\echo Use "ALTER EXTENSION mop UPDATE TO '0.2'" to load this file. \quit

-- 1. the views -----------------------------------------------------------------

GRANT SELECT ON mop.progress, mop.leaderboard, mop.best TO PUBLIC;

-- 2. row-level security over owners and references ---------------------------
-- (outer columns are qualified with their table's name: an unqualified name
-- inside a subquery would bind to the subquery's table first)

ALTER POLICY own_datasets ON mop.datasets
	USING (datasets.owner OPERATOR(pg_catalog.=) CURRENT_USER)
	WITH CHECK (datasets.owner OPERATOR(pg_catalog.=) CURRENT_USER);

ALTER POLICY own_buffers ON mop.buffers
	USING (EXISTS (SELECT 1 FROM mop.datasets d
				   WHERE d.id OPERATOR(pg_catalog.=) buffers.dataset_id
					 AND d.owner OPERATOR(pg_catalog.=) CURRENT_USER))
	WITH CHECK (EXISTS (SELECT 1 FROM mop.datasets d
						WHERE d.id OPERATOR(pg_catalog.=) buffers.dataset_id
						  AND d.owner OPERATOR(pg_catalog.=) CURRENT_USER));

ALTER POLICY own_runs ON mop.runs
	USING (runs.owner OPERATOR(pg_catalog.=) CURRENT_USER)
	WITH CHECK (runs.owner OPERATOR(pg_catalog.=) CURRENT_USER
				AND EXISTS (SELECT 1 FROM mop.datasets d
							WHERE d.id OPERATOR(pg_catalog.=) runs.dataset_id
							  AND d.owner OPERATOR(pg_catalog.=) CURRENT_USER));

ALTER POLICY own_models ON mop.models
	USING (models.owner OPERATOR(pg_catalog.=) CURRENT_USER)
	WITH CHECK (models.owner OPERATOR(pg_catalog.=) CURRENT_USER
				AND EXISTS (SELECT 1 FROM mop.datasets d
							WHERE d.id OPERATOR(pg_catalog.=) models.dataset_id
							  AND d.owner OPERATOR(pg_catalog.=) CURRENT_USER)
				AND (models.run_id IS NULL
					 OR EXISTS (SELECT 1 FROM mop.runs r
								WHERE r.id OPERATOR(pg_catalog.=) models.run_id
								  AND r.owner OPERATOR(pg_catalog.=) CURRENT_USER)));

ALTER POLICY own_epochs ON mop.epochs
	USING (EXISTS (SELECT 1 FROM mop.models m
				   WHERE m.id OPERATOR(pg_catalog.=) epochs.model_id
					 AND m.owner OPERATOR(pg_catalog.=) CURRENT_USER))
	WITH CHECK (EXISTS (SELECT 1 FROM mop.models m
						WHERE m.id OPERATOR(pg_catalog.=) epochs.model_id
						  AND m.owner OPERATOR(pg_catalog.=) CURRENT_USER));

ALTER POLICY own_hops ON mop.hops
	USING (EXISTS (SELECT 1 FROM mop.runs r
				   WHERE r.id OPERATOR(pg_catalog.=) hops.run_id
					 AND r.owner OPERATOR(pg_catalog.=) CURRENT_USER))
	WITH CHECK (EXISTS (SELECT 1 FROM mop.runs r
						WHERE r.id OPERATOR(pg_catalog.=) hops.run_id
						  AND r.owner OPERATOR(pg_catalog.=) CURRENT_USER)
				AND EXISTS (SELECT 1 FROM mop.models m
							WHERE m.id OPERATOR(pg_catalog.=) hops.model_id
							  AND m.owner OPERATOR(pg_catalog.=) CURRENT_USER));

ALTER POLICY own_decisions ON mop.decisions
	USING (EXISTS (SELECT 1 FROM mop.runs r
				   WHERE r.id OPERATOR(pg_catalog.=) decisions.run_id
					 AND r.owner OPERATOR(pg_catalog.=) CURRENT_USER))
	WITH CHECK (EXISTS (SELECT 1 FROM mop.runs r
						WHERE r.id OPERATOR(pg_catalog.=) decisions.run_id
						  AND r.owner OPERATOR(pg_catalog.=) CURRENT_USER)
				AND EXISTS (SELECT 1 FROM mop.models m
							WHERE m.id OPERATOR(pg_catalog.=) decisions.model_id
							  AND m.owner OPERATOR(pg_catalog.=) CURRENT_USER)
				AND (decisions.parent_model_id IS NULL
					 OR EXISTS (SELECT 1 FROM mop.models p
								WHERE p.id OPERATOR(pg_catalog.=) decisions.parent_model_id
								  AND p.owner OPERATOR(pg_catalog.=) CURRENT_USER)));

-- 3. ids come from the identities ---------------------------------------------
-- (a column added to one of these tables later needs its INSERT and UPDATE
-- grant here too)

REVOKE INSERT, UPDATE ON mop.datasets, mop.runs, mop.models, mop.hops, mop.decisions FROM PUBLIC;
GRANT INSERT (name, owner, source, features, feature_kind, input_shape, n_features, target,
			  target_kind, target_type, labels, normalized, feature_mean, feature_std, partitions,
			  buffer_rows, validation, train_rows, valid_rows, seed, created_at),
	  UPDATE (name, owner, source, features, feature_kind, input_shape, n_features, target,
			  target_kind, target_type, labels, normalized, feature_mean, feature_std, partitions,
			  buffer_rows, validation, train_rows, valid_rows, seed, created_at)
	ON mop.datasets TO PUBLIC;
GRANT INSERT (kind, dataset_id, space, epochs, workers, seed, status, error, owner, options,
			  shm_handle, started_at, finished_at),
	  UPDATE (kind, dataset_id, space, epochs, workers, seed, status, error, owner, options,
			  shm_handle, started_at, finished_at)
	ON mop.runs TO PUBLIC;
GRANT INSERT (run_id, dataset_id, owner, config, status, epochs_done, state, metric,
			  higher_is_better, best_valid_metric, best_valid_loss, best_epoch, error,
			  created_at, updated_at),
	  UPDATE (run_id, dataset_id, owner, config, status, epochs_done, state, metric,
			  higher_is_better, best_valid_metric, best_valid_loss, best_epoch, error,
			  created_at, updated_at)
	ON mop.models TO PUBLIC;
GRANT INSERT (run_id, model_id, epoch, partition, worker, started_at, finished_at, rows, loss, metric),
	  UPDATE (run_id, model_id, epoch, partition, worker, started_at, finished_at, rows, loss, metric)
	ON mop.hops TO PUBLIC;
GRANT INSERT (run_id, model_id, at, action, why, reason, bracket, rung, rank, rung_size, keep,
			  score, cutoff, from_resource, to_resource, parent_model_id, hyperparameters),
	  UPDATE (run_id, model_id, at, action, why, reason, bracket, rung, rank, rung_size, keep,
			  score, cutoff, from_resource, to_resource, parent_model_id, hyperparameters)
	ON mop.decisions TO PUBLIC;

-- rows written under 0.1 that 0.2 would refuse ---------------------------------
-- A row one role wrote against another role's dataset, run or model (0.1
-- checked only the row's own owner) stays where it is; the superuser
-- upgrading is told where, with the query that lists them.  Rows a
-- superuser wrote for another role's data are counted too.

DO $$
DECLARE
	c record;
BEGIN
	FOR c IN
		SELECT t.tab, t.n FROM (
			SELECT 'mop.runs' AS tab, pg_catalog.count(*) AS n
			  FROM mop.runs x JOIN mop.datasets d ON d.id OPERATOR(pg_catalog.=) x.dataset_id
			 WHERE d.owner OPERATOR(pg_catalog.<>) x.owner
			UNION ALL
			SELECT 'mop.models', pg_catalog.count(*)
			  FROM mop.models x JOIN mop.datasets d ON d.id OPERATOR(pg_catalog.=) x.dataset_id
			  LEFT JOIN mop.runs r ON r.id OPERATOR(pg_catalog.=) x.run_id
			 WHERE d.owner OPERATOR(pg_catalog.<>) x.owner OR r.owner OPERATOR(pg_catalog.<>) x.owner
			UNION ALL
			SELECT 'mop.hops', pg_catalog.count(*)
			  FROM mop.hops x JOIN mop.runs r ON r.id OPERATOR(pg_catalog.=) x.run_id
			  JOIN mop.models m ON m.id OPERATOR(pg_catalog.=) x.model_id
			 WHERE m.owner OPERATOR(pg_catalog.<>) r.owner
			UNION ALL
			SELECT 'mop.decisions', pg_catalog.count(*)
			  FROM mop.decisions x JOIN mop.runs r ON r.id OPERATOR(pg_catalog.=) x.run_id
			  JOIN mop.models m ON m.id OPERATOR(pg_catalog.=) x.model_id
			  LEFT JOIN mop.models p ON p.id OPERATOR(pg_catalog.=) x.parent_model_id
			 WHERE m.owner OPERATOR(pg_catalog.<>) r.owner OR p.owner OPERATOR(pg_catalog.<>) r.owner
		) t WHERE t.n OPERATOR(pg_catalog.>) 0
	LOOP
		RAISE WARNING 'mop: % rows of % refer to a dataset, run or model of another role', c.n, c.tab
			USING DETAIL = 'mop 0.2 refuses such rows from ordinary roles; these were written before the upgrade and are kept.',
				  HINT = 'The section "Upgrading" of mop''s SQL reference has the query that lists them; delete those you did not write yourself.';
	END LOOP;
END
$$;

-- 4. device => on the training and search functions ------------------------------

DROP FUNCTION @extschema@.mop_train(text, jsonb, int);
CREATE FUNCTION @extschema@.mop_train(dataset text, config jsonb, epochs int DEFAULT 10,
	device text DEFAULT NULL)
	RETURNS bigint
	AS 'MODULE_PATHNAME', 'mop_train'
	LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_train(text, jsonb, int, text)
	IS 'train one model sequentially over all partitions; returns its id in mop.models; device => cpu, gpu or auto (NULL: mop.device)';

DROP FUNCTION @extschema@.mop_grid_search(text, jsonb, int, int, int, boolean, text, boolean, text, bigint);
CREATE FUNCTION @extschema@.mop_grid_search(
	dataset text,
	space jsonb,
	epochs int DEFAULT 10,
	workers int DEFAULT NULL,
	seed int DEFAULT 0,
	deterministic boolean DEFAULT false,
	scheduler text DEFAULT NULL,
	wait boolean DEFAULT true,
	early_stopping text DEFAULT NULL,
	warm_start bigint DEFAULT NULL,
	device text DEFAULT NULL)
	RETURNS SETOF mop.search_result
	AS 'MODULE_PATHNAME', 'mop_grid_search'
	LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_grid_search(text, jsonb, int, int, int, boolean, text, boolean, text, bigint, text)
	IS 'train every configuration of a grid with model hopper parallelism; ranked results';

DROP FUNCTION @extschema@.mop_random_search(text, jsonb, int, int, int, int, boolean, text, boolean, text, bigint);
CREATE FUNCTION @extschema@.mop_random_search(
	dataset text,
	space jsonb,
	trials int,
	epochs int DEFAULT 10,
	workers int DEFAULT NULL,
	seed int DEFAULT 0,
	deterministic boolean DEFAULT false,
	scheduler text DEFAULT NULL,
	wait boolean DEFAULT true,
	early_stopping text DEFAULT NULL,
	warm_start bigint DEFAULT NULL,
	device text DEFAULT NULL)
	RETURNS SETOF mop.search_result
	AS 'MODULE_PATHNAME', 'mop_random_search'
	LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_random_search(text, jsonb, int, int, int, int, boolean, text, boolean, text, bigint, text)
	IS 'train configurations sampled from a search space with model hopper parallelism';

DROP FUNCTION @extschema@.mop_resume(bigint, int, boolean, jsonb);
CREATE FUNCTION @extschema@.mop_resume(run_id bigint, workers int DEFAULT NULL,
	wait boolean DEFAULT true, add jsonb DEFAULT NULL, device text DEFAULT NULL)
	RETURNS SETOF mop.search_result
	AS 'MODULE_PATHNAME', 'mop_resume'
	LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_resume(bigint, int, boolean, jsonb, text)
	IS 'continue a cancelled, failed or interrupted run from its committed checkpoints; add => a grid of more configurations (also for a finished run)';

DROP FUNCTION @extschema@.mop_replay(bigint, int, boolean);
CREATE FUNCTION @extschema@.mop_replay(run_id bigint, workers int DEFAULT NULL,
	wait boolean DEFAULT true, device text DEFAULT NULL)
	RETURNS SETOF mop.search_result
	AS 'MODULE_PATHNAME', 'mop_replay'
	LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_replay(bigint, int, boolean, text)
	IS 'train a finished run''s configurations again along its recorded schedule: bit-identical models on the same device';

DROP FUNCTION @extschema@.mop_hyperband(text, jsonb, int, int, int, int, text, boolean, boolean);
CREATE FUNCTION @extschema@.mop_hyperband(
	dataset text,
	space jsonb,
	max_resource int,
	eta int DEFAULT 3,
	workers int DEFAULT NULL,
	seed int DEFAULT 0,
	scheduler text DEFAULT NULL,
	wait boolean DEFAULT true,
	deterministic boolean DEFAULT false,
	device text DEFAULT NULL)
	RETURNS SETOF mop.search_result
	AS 'MODULE_PATHNAME', 'mop_hyperband'
	LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_hyperband(text, jsonb, int, int, int, int, text, boolean, boolean, text)
	IS 'Hyperband on model hopper parallelism: successive halving brackets, promoted models resume from their checkpoints';

DROP FUNCTION @extschema@.mop_asha(text, jsonb, int, int, int, int, int, int, text, boolean);
CREATE FUNCTION @extschema@.mop_asha(
	dataset text,
	space jsonb,
	max_resource int,
	eta int DEFAULT 3,
	min_resource int DEFAULT 1,
	max_trials int DEFAULT 20,
	workers int DEFAULT NULL,
	seed int DEFAULT 0,
	scheduler text DEFAULT NULL,
	wait boolean DEFAULT true,
	device text DEFAULT NULL)
	RETURNS SETOF mop.search_result
	AS 'MODULE_PATHNAME', 'mop_asha'
	LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_asha(text, jsonb, int, int, int, int, int, int, text, boolean, text)
	IS 'asynchronous successive halving (ASHA) on model hopper parallelism: promotions without barriers';

DROP FUNCTION @extschema@.mop_pbt(text, jsonb, int, int, int, float8, float8, int, int, boolean, boolean);
CREATE FUNCTION @extschema@.mop_pbt(
	dataset text,
	space jsonb,
	population int DEFAULT 8,
	epochs int DEFAULT 10,
	"interval" int DEFAULT 1,
	quantile float8 DEFAULT 0.25,
	resample float8 DEFAULT 0.25,
	workers int DEFAULT NULL,
	seed int DEFAULT 0,
	wait boolean DEFAULT true,
	deterministic boolean DEFAULT false,
	device text DEFAULT NULL)
	RETURNS SETOF mop.search_result
	AS 'MODULE_PATHNAME', 'mop_pbt_sql'
	LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_pbt(text, jsonb, int, int, int, float8, float8, int, int, boolean, boolean, text)
	IS 'population based training on model hopper parallelism: exploit copies weights and optimizer state, explore perturbs hyperparameters';

DROP FUNCTION @extschema@.mop_tpe(text, jsonb, int, int, int, float8, int, int, boolean, boolean, text);
CREATE FUNCTION @extschema@.mop_tpe(
	dataset text,
	space jsonb,
	trials int,
	epochs int DEFAULT 10,
	n_startup int DEFAULT 10,
	gamma float8 DEFAULT 0.1,
	workers int DEFAULT NULL,
	seed int DEFAULT 0,
	wait boolean DEFAULT true,
	deterministic boolean DEFAULT false,
	early_stopping text DEFAULT NULL,
	device text DEFAULT NULL)
	RETURNS SETOF mop.search_result
	AS 'MODULE_PATHNAME', 'mop_tpe_sql'
	LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_tpe(text, jsonb, int, int, int, float8, int, int, boolean, boolean, text, text)
	IS 'Tree-structured Parzen Estimator on model hopper parallelism: proposals from completed results whenever a worker would idle';

-- 5. 'interrupted': runs (and their models) that a crash or restart stopped ------

ALTER TABLE mop.runs DROP CONSTRAINT runs_status_check;
ALTER TABLE mop.runs ADD CONSTRAINT runs_status_check
	CHECK (status IN ('pending', 'running', 'done', 'failed', 'cancelled', 'interrupted'));
ALTER TABLE mop.models DROP CONSTRAINT models_status_check;
ALTER TABLE mop.models ADD CONSTRAINT models_status_check
	CHECK (status IN ('pending', 'training', 'done', 'stopped', 'diverged', 'failed', 'cancelled', 'interrupted'));

-- 7. mop_predict_table: a model's predictions for a whole table -----------------
-- (no SET clause: the output name is resolved in the caller's search_path;
-- the function pins search_path itself right after)

CREATE FUNCTION @extschema@.mop_predict_table(model_id bigint, source regclass, output text,
	id_column text DEFAULT NULL)
	RETURNS bigint
	AS 'MODULE_PATHNAME', 'mop_predict_table'
	LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.mop_predict_table(bigint, regclass, text, text)
	IS 'predict every row of a table into a new table (id, prediction, probability, probabilities); returns the rows written';
