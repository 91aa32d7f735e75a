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
 * 6. Dropping what a running run uses is refused with a clear error
 *    (55006) instead of deadlocking with its workers: mop_drop_dataset
 *    while a run trains on the dataset, a DELETE of a run that trains,
 *    DROP EXTENSION mop while any run trains.
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
	device text DEFAULT NULL,
	metric text DEFAULT NULL)
	RETURNS SETOF mop.search_result
	AS 'MODULE_PATHNAME', 'mop_grid_search'
	LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_grid_search(text, jsonb, int, int, int, boolean, text, boolean, text, bigint, text, text)
	IS 'train every configuration of a grid with model hopper parallelism; ranked results; metric => the configurations'' metric';

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
	device text DEFAULT NULL,
	metric text DEFAULT NULL)
	RETURNS SETOF mop.search_result
	AS 'MODULE_PATHNAME', 'mop_random_search'
	LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_random_search(text, jsonb, int, int, int, int, boolean, text, boolean, text, bigint, text, text)
	IS 'train configurations sampled from a search space with model hopper parallelism; metric => the configurations'' metric';

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
	device text DEFAULT NULL,
	metric text DEFAULT NULL)
	RETURNS SETOF mop.search_result
	AS 'MODULE_PATHNAME', 'mop_hyperband'
	LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_hyperband(text, jsonb, int, int, int, int, text, boolean, boolean, text, text)
	IS 'Hyperband on model hopper parallelism: successive halving brackets, promoted models resume from their checkpoints; metric => the configurations'' metric';

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
	device text DEFAULT NULL,
	metric text DEFAULT NULL)
	RETURNS SETOF mop.search_result
	AS 'MODULE_PATHNAME', 'mop_asha'
	LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_asha(text, jsonb, int, int, int, int, int, int, text, boolean, text, text)
	IS 'asynchronous successive halving (ASHA) on model hopper parallelism: promotions without barriers; metric => the configurations'' metric';

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
	device text DEFAULT NULL,
	metric text DEFAULT NULL)
	RETURNS SETOF mop.search_result
	AS 'MODULE_PATHNAME', 'mop_pbt_sql'
	LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_pbt(text, jsonb, int, int, int, float8, float8, int, int, boolean, boolean, text, text)
	IS 'population based training on model hopper parallelism: exploit copies weights and optimizer state, explore perturbs hyperparameters; metric => the configurations'' metric';

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
	device text DEFAULT NULL,
	metric text DEFAULT NULL)
	RETURNS SETOF mop.search_result
	AS 'MODULE_PATHNAME', 'mop_tpe_sql'
	LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_tpe(text, jsonb, int, int, int, float8, int, int, boolean, boolean, text, text, text)
	IS 'Tree-structured Parzen Estimator on model hopper parallelism: proposals from completed results whenever a worker would idle; metric => the configurations'' metric';

-- 5. 'interrupted': runs (and their models) that a crash or restart stopped ------

ALTER TABLE mop.runs DROP CONSTRAINT runs_status_check;
ALTER TABLE mop.runs ADD CONSTRAINT runs_status_check
	CHECK (status IN ('pending', 'running', 'done', 'failed', 'cancelled', 'interrupted'));
ALTER TABLE mop.models DROP CONSTRAINT models_status_check;
ALTER TABLE mop.models ADD CONSTRAINT models_status_check
	CHECK (status IN ('pending', 'training', 'done', 'stopped', 'diverged', 'failed', 'cancelled', 'interrupted'));

-- 6. dropping what a running run uses: a clear error, never a deadlock ----------
-- mop_drop_dataset (now in C) locks the dataset's row first and refuses
-- (55006, naming the run) while one of its runs trains; a BEFORE DELETE
-- trigger refuses to delete a run that trains however the delete comes (a
-- DELETE on mop.runs, a cascade from mop.datasets); an event trigger makes
-- DROP EXTENSION mop (and DROP SCHEMA ... CASCADE of its schema) refuse
-- while a run trains, and otherwise take mop's relations without waiting
-- while it holds any.  The row lock order all of mop follows is described
-- in src/pg/lockorder.h.

CREATE OR REPLACE FUNCTION @extschema@.mop_drop_dataset(dataset text) RETURNS boolean
	AS 'MODULE_PATHNAME', 'mop_drop_dataset'
	LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_drop_dataset(text)
	IS 'delete a dataset with its buffers, runs, models, epochs and hops; refused while one of its runs trains';

CREATE FUNCTION mop.guard_run_delete() RETURNS trigger
	AS 'MODULE_PATHNAME', 'mop_guard_run_delete'
	LANGUAGE C VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION mop.guard_run_delete()
	IS 'trigger: a run that trains (status running, its processes alive) cannot be deleted';
CREATE TRIGGER guard_run_delete BEFORE DELETE ON mop.runs
	FOR EACH ROW EXECUTE FUNCTION mop.guard_run_delete();

CREATE FUNCTION mop.guard_drop_extension() RETURNS event_trigger
	AS 'MODULE_PATHNAME', 'mop_guard_drop_extension'
	LANGUAGE C VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION mop.guard_drop_extension()
	IS 'event trigger: DROP EXTENSION mop is refused while a run trains';
CREATE EVENT TRIGGER mop_guard_drop ON ddl_command_start
	WHEN TAG IN ('DROP EXTENSION', 'DROP SCHEMA')
	EXECUTE FUNCTION mop.guard_drop_extension();

-- 7. mop_predict_table: a model's predictions for a whole table -----------------
-- (no SET clause: the output name is resolved in the caller's search_path;
-- the function pins search_path itself right after)

CREATE FUNCTION @extschema@.mop_predict_table(model_id bigint, source regclass, output text,
	id_column text DEFAULT NULL, checkpoint text DEFAULT 'best')
	RETURNS bigint
	AS 'MODULE_PATHNAME', 'mop_predict_table'
	LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.mop_predict_table(bigint, regclass, text, text, text)
	IS 'predict every row of a table into a new table (id, prediction, probability, probabilities); returns the rows written';

-- 8. pictures: charts of a run as SVG documents ----------------------------------
-- Built with the SQL/XML functions, so every value (labels come from user
-- data) is escaped; they run as the caller (row-level security applies).

-- Tick marks for [lo, hi]: about n steps of 1, 2 or 5 times a power of ten.
CREATE FUNCTION mop.plot_ticks(lo float8, hi float8, n int DEFAULT 6)
	RETURNS SETOF float8
	LANGUAGE sql IMMUTABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $$
	WITH s AS (
		SELECT CASE WHEN hi OPERATOR(pg_catalog.<=) lo THEN 1.0::float8 ELSE
			(SELECT min(m * p) FROM (VALUES (1.0::float8), (2.0), (5.0), (10.0)) v(m),
			        LATERAL (SELECT power(10.0::float8, floor(log((hi - lo) / greatest(n, 1))))) q(p)
			  WHERE m * p OPERATOR(pg_catalog.>=) (hi - lo) / greatest(n, 1)) END AS step)
	SELECT t FROM s, LATERAL generate_series(ceil(lo / s.step)::bigint, floor(hi / s.step)::bigint) k,
	       LATERAL (SELECT k * s.step AS t) u
	 WHERE hi OPERATOR(pg_catalog.>) lo
	 LIMIT 50
$$;
COMMENT ON FUNCTION mop.plot_ticks(float8, float8, int) IS 'tick positions for a chart axis';

-- A number as a chart prints it: no trailing zeros, at most 6 decimals.
CREATE FUNCTION mop.plot_num(v float8) RETURNS text
	LANGUAGE sql IMMUTABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $$
	SELECT CASE WHEN abs(v) OPERATOR(pg_catalog.>=) 1e12 OR (abs(v) OPERATOR(pg_catalog.<) 1e-6 AND v OPERATOR(pg_catalog.<>) 0)
	            THEN v::text
	            ELSE rtrim(rtrim(to_char(v, 'FM999999999990.000000'), '0'), '.') END
$$;
COMMENT ON FUNCTION mop.plot_num(float8) IS 'a number as mop''s charts print it';

-- User text as a chart may print it: characters XML forbids (control
-- characters) become '?'.
CREATE FUNCTION mop.plot_text(t text) RETURNS text
	LANGUAGE sql IMMUTABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $$
	SELECT regexp_replace(t, '[\x01-\x08\x0B\x0C\x0E-\x1F\uFFFE\uFFFF]', '?', 'g')
$$;
COMMENT ON FUNCTION mop.plot_text(text) IS 'user text as mop''s charts print it (no characters XML forbids)';

-- A model's colour: the Okabe-Ito palette (safe for colour-blind eyes), then shades of it.
CREATE FUNCTION mop.plot_colour(i int) RETURNS text
	LANGUAGE sql IMMUTABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $$
	SELECT (ARRAY['#0072B2', '#E69F00', '#009E73', '#CC79A7', '#56B4E9', '#D55E00', '#F0E442', '#7F7F7F'])[(i % 8) + 1]
$$;
COMMENT ON FUNCTION mop.plot_colour(int) IS 'the colour of the i-th model in mop''s charts';

CREATE FUNCTION @extschema@.mop_plot_gantt(run_id bigint) RETURNS text
	LANGUAGE plpgsql STABLE
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	w_total constant int := 960;
	left_m constant int := 96;
	right_m constant int := 180;
	top_m constant int := 48;
	lane_h constant int := 28;
	bottom_m constant int := 44;
	max_bars constant int := 20000;
	pw constant int := w_total - left_m - right_m;
	t0 timestamptz;
	t1 timestamptz;
	span float8;
	n_hops bigint;
	n_lanes int;
	n_models int;
	h int;
	ds text;
	title text;
	lanes xml;
	bars xml;
	ticks xml;
	legend xml;
BEGIN
	SELECT mop.plot_text(d.name) INTO ds FROM mop.runs r JOIN mop.datasets d ON d.id OPERATOR(pg_catalog.=) r.dataset_id
	 WHERE r.id OPERATOR(pg_catalog.=) mop_plot_gantt.run_id;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'run % does not exist', mop_plot_gantt.run_id
			USING ERRCODE = 'undefined_object', HINT = 'Runs you may see are listed in mop.runs.';
	END IF;
	SELECT min(started_at), max(finished_at), count(*), count(DISTINCT worker), count(DISTINCT model_id)
	  INTO t0, t1, n_hops, n_lanes, n_models
	  FROM mop.hops WHERE hops.run_id OPERATOR(pg_catalog.=) mop_plot_gantt.run_id;
	n_lanes := greatest(n_lanes, 1);
	span := greatest(extract(epoch FROM t1 OPERATOR(pg_catalog.-) t0)::float8, 0.001);
	h := top_m + n_lanes * lane_h + bottom_m;
	title := format('run %s on %s: %s sub-epochs of %s models on %s workers, %s s',
					mop_plot_gantt.run_id, ds, n_hops, n_models, n_lanes,
					mop.plot_num(round(span::numeric, 3)::float8));
	IF n_hops OPERATOR(pg_catalog.>) max_bars THEN
		title := title || format(' (the first %s sub-epochs shown)', max_bars);
	END IF;

	WITH lane AS (SELECT worker, (dense_rank() OVER (ORDER BY worker) - 1)::int AS k
	                FROM (SELECT DISTINCT worker FROM mop.hops
	                       WHERE hops.run_id OPERATOR(pg_catalog.=) mop_plot_gantt.run_id) w)
	SELECT xmlagg(xmlconcat(
	         xmlelement(name rect, xmlattributes(left_m AS x, top_m + k * lane_h AS y, pw AS width,
	                    lane_h AS height, CASE WHEN k % 2 = 0 THEN '#f4f4f4' ELSE '#ffffff' END AS fill)),
	         xmlelement(name text, xmlattributes(left_m - 8 AS x, top_m + k * lane_h + lane_h / 2 + 4 AS y,
	                    'end' AS "text-anchor"), 'worker ' || worker)) ORDER BY k)
	  INTO lanes FROM lane;

	WITH lane AS (SELECT worker, (dense_rank() OVER (ORDER BY worker) - 1)::int AS k
	                FROM (SELECT DISTINCT worker FROM mop.hops
	                       WHERE hops.run_id OPERATOR(pg_catalog.=) mop_plot_gantt.run_id) w),
	     model AS (SELECT model_id, (dense_rank() OVER (ORDER BY model_id) - 1)::int AS c
	                 FROM (SELECT DISTINCT model_id FROM mop.hops
	                        WHERE hops.run_id OPERATOR(pg_catalog.=) mop_plot_gantt.run_id) m),
	     hop AS (SELECT * FROM mop.hops WHERE hops.run_id OPERATOR(pg_catalog.=) mop_plot_gantt.run_id
	              ORDER BY started_at, id LIMIT max_bars)
	SELECT xmlagg(xmlelement(name rect,
	         xmlattributes('hop' AS class,
	                       round((left_m + pw * extract(epoch FROM hop.started_at - t0) / span)::numeric, 2) AS x,
	                       top_m + lane.k * lane_h + 3 AS y,
	                       round(greatest(pw * extract(epoch FROM hop.finished_at - hop.started_at) / span, 0.5)::numeric, 2) AS width,
	                       lane_h - 6 AS height, mop.plot_colour(model.c) AS fill, '#ffffff' AS stroke,
	                       '0.5' AS "stroke-width"),
	         xmlelement(name title, format('model %s, epoch %s, partition %s: %s rows in %s s (worker %s)',
	                    hop.model_id, hop.epoch, hop.partition, hop.rows,
	                    to_char(extract(epoch FROM hop.finished_at - hop.started_at), 'FM999990.000'),
	                    hop.worker))) ORDER BY hop.started_at, hop.id)
	  INTO bars
	  FROM hop JOIN lane USING (worker) JOIN model USING (model_id);

	SELECT xmlagg(xmlconcat(
	         xmlelement(name line, xmlattributes(round((left_m + pw * t / span)::numeric, 2) AS x1,
	                    round((left_m + pw * t / span)::numeric, 2) AS x2, top_m AS y1,
	                    top_m + n_lanes * lane_h + 4 AS y2, '#bbbbbb' AS stroke, '0.5' AS "stroke-width")),
	         xmlelement(name text, xmlattributes(round((left_m + pw * t / span)::numeric, 2) AS x,
	                    top_m + n_lanes * lane_h + 18 AS y, 'middle' AS "text-anchor"),
	                    mop.plot_num(t))) ORDER BY t)
	  INTO ticks FROM mop.plot_ticks(0, span) t;

	WITH model AS (SELECT model_id, (dense_rank() OVER (ORDER BY model_id) - 1)::int AS c
	                 FROM (SELECT DISTINCT model_id FROM mop.hops
	                        WHERE hops.run_id OPERATOR(pg_catalog.=) mop_plot_gantt.run_id) m)
	SELECT xmlagg(xmlconcat(
	         xmlelement(name rect, xmlattributes(w_total - right_m + 16 AS x, top_m + c * 16 AS y,
	                    12 AS width, 12 AS height, mop.plot_colour(c) AS fill)),
	         xmlelement(name text, xmlattributes(w_total - right_m + 34 AS x, top_m + c * 16 + 10 AS y),
	                    'model ' || model_id)) ORDER BY c)
	  INTO legend FROM model WHERE c OPERATOR(pg_catalog.<) 24;
	IF n_models OPERATOR(pg_catalog.>) 24 THEN
		legend := xmlconcat(legend, xmlelement(name text, xmlattributes(w_total - right_m + 16 AS x,
		                    top_m + 24 * 16 + 10 AS y), format('and %s more', n_models - 24)));
	END IF;
	h := greatest(h, top_m + least(n_models, 25) * 16 + bottom_m);

	RETURN xmlelement(name svg,
	         xmlattributes('http://www.w3.org/2000/svg' AS xmlns, w_total AS width, h AS height,
	                       format('0 0 %s %s', w_total, h) AS "viewBox",
	                       'font-family: sans-serif; font-size: 12px' AS style),
	         xmlelement(name title, title),
	         xmlelement(name rect, xmlattributes(0 AS x, 0 AS y, w_total AS width, h AS height, '#ffffff' AS fill)),
	         xmlelement(name text, xmlattributes(left_m AS x, 24 AS y, 'font-size: 14px; font-weight: bold' AS style), title),
	         lanes, ticks, bars, legend,
	         xmlelement(name text, xmlattributes(left_m + pw / 2 AS x, h - 8 AS y, 'middle' AS "text-anchor"),
	                    'seconds since the first sub-epoch started'))::text;
END
$$;
COMMENT ON FUNCTION @extschema@.mop_plot_gantt(bigint)
	IS 'SVG: one lane per worker, one bar per sub-epoch coloured by model (hover for details), idle time as gaps';


-- The points of mop_plot_curves: one per model and epoch with a finite value.
CREATE FUNCTION mop.plot_points(run_id bigint, y text, x text)
	RETURNS TABLE (model_id bigint, c int, px float8, py float8, epoch int)
	LANGUAGE sql STABLE
	SET search_path = pg_catalog, pg_temp
	AS $$
	SELECT * FROM (
		SELECT e.model_id, (dense_rank() OVER (ORDER BY e.model_id) - 1)::int,
		       CASE WHEN x OPERATOR(pg_catalog.=) 'epoch' THEN e.epoch::float8
		            ELSE sum(coalesce(e.seconds, 0)) OVER (PARTITION BY e.model_id ORDER BY e.epoch) END,
		       CASE y WHEN 'valid_metric' THEN e.valid_metric WHEN 'valid_loss' THEN e.valid_loss
		              WHEN 'train_loss' THEN e.train_loss ELSE e.train_metric END AS v,
		       e.epoch
		  FROM mop.epochs e JOIN mop.models m ON m.id OPERATOR(pg_catalog.=) e.model_id
		 WHERE m.run_id OPERATOR(pg_catalog.=) plot_points.run_id) s
	 WHERE v IS NOT NULL AND v OPERATOR(pg_catalog.<>) ALL ('{NaN,Infinity,-Infinity}'::float8[])
	   AND abs(v) OPERATOR(pg_catalog.<) 1e300
$$;
COMMENT ON FUNCTION mop.plot_points(bigint, text, text) IS 'the points of mop_plot_curves';

CREATE FUNCTION @extschema@.mop_plot_curves(run_id bigint, y text DEFAULT 'valid_metric',
	x text DEFAULT 'epoch') RETURNS text
	LANGUAGE plpgsql STABLE
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	w_total constant int := 960;
	left_m constant int := 80;
	right_m constant int := 200;
	top_m constant int := 48;
	ph constant int := 400;
	bottom_m constant int := 48;
	pw constant int := w_total - left_m - right_m;
	h constant int := top_m + ph + bottom_m;
	-- the size stays bounded: at most max_lines curves (the best-ranked
	-- models) and a dot per epoch only up to max_points epochs
	max_lines constant int := 300;
	max_points constant int := 3000;
	xlo float8;
	xhi float8;
	ylo float8;
	yhi float8;
	n_models int;
	n_points bigint;
	best bigint;
	metric text;
	title text;
	ds text;
	lines xml;
	marks xml;
	xticks xml;
	yticks xml;
	legend xml;
BEGIN
	IF y IS NULL OR y NOT IN ('valid_metric', 'valid_loss', 'train_loss', 'train_metric') THEN
		RAISE EXCEPTION 'invalid value for "y": %', coalesce(y, 'NULL')
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'Use valid_metric, valid_loss, train_loss or train_metric.';
	END IF;
	IF x IS NULL OR x NOT IN ('epoch', 'seconds') THEN
		RAISE EXCEPTION 'invalid value for "x": %', coalesce(x, 'NULL')
			USING ERRCODE = 'invalid_parameter_value', HINT = 'Use epoch or seconds.';
	END IF;
	SELECT mop.plot_text(d.name) INTO ds FROM mop.runs r JOIN mop.datasets d ON d.id OPERATOR(pg_catalog.=) r.dataset_id
	 WHERE r.id OPERATOR(pg_catalog.=) mop_plot_curves.run_id;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'run % does not exist', mop_plot_curves.run_id
			USING ERRCODE = 'undefined_object', HINT = 'Runs you may see are listed in mop.runs.';
	END IF;

	SELECT min(px), max(px), min(py), max(py), count(DISTINCT model_id), count(*)
	  INTO xlo, xhi, ylo, yhi, n_models, n_points FROM mop.plot_points(mop_plot_curves.run_id, y, x);
	IF x OPERATOR(pg_catalog.=) 'epoch' THEN
		xlo := least(coalesce(xlo, 1), 1);
	ELSE
		xlo := 0;
	END IF;
	xhi := greatest(coalesce(xhi, 1), xlo + 1e-9);
	IF yhi OPERATOR(pg_catalog.=) ylo THEN
		ylo := ylo - greatest(0.5, abs(ylo) * 0.01);
		yhi := yhi + greatest(0.5, abs(yhi) * 0.01);
	END IF;
	ylo := coalesce(ylo, 0) - 0.05 * (coalesce(yhi, 1) - coalesce(ylo, 0));
	yhi := coalesce(yhi, 1) + 0.05 * (coalesce(yhi, 1) - ylo);

	SELECT b.model_id, b.metric INTO best, metric FROM mop.best b
	 WHERE b.run_id OPERATOR(pg_catalog.=) mop_plot_curves.run_id;
	title := format('run %s on %s: %s by %s, %s models%s', mop_plot_curves.run_id, ds,
	                CASE y WHEN 'valid_metric' THEN 'validation ' || coalesce(metric, 'metric')
	                       WHEN 'valid_loss' THEN 'validation loss' WHEN 'train_loss' THEN 'training loss'
	                       ELSE 'training ' || coalesce(metric, 'metric') END,
	                x, coalesce(n_models, 0), CASE WHEN best IS NULL THEN '' ELSE format(' (best: model %s)', best) END);
	IF n_models OPERATOR(pg_catalog.>) max_lines THEN
		title := title || format(', the best %s drawn', max_lines);
	END IF;

	SELECT xmlagg(xmlelement(name polyline,
	         xmlattributes('curve' AS class, 'none' AS fill, mop.plot_colour(c) AS stroke,
	                       CASE WHEN model_id OPERATOR(pg_catalog.=) best THEN '3.5' ELSE '1.5' END AS "stroke-width",
	                       CASE WHEN best IS NULL OR model_id OPERATOR(pg_catalog.=) best THEN '1' ELSE '0.75' END AS opacity,
	                       pts AS points),
	         xmlelement(name title, format('model %s', model_id))) ORDER BY (model_id OPERATOR(pg_catalog.=) best), model_id)
	  INTO lines
	  FROM (SELECT model_id, c,
	               string_agg(format('%s,%s', round((left_m + pw * (px - xlo) / (xhi - xlo))::numeric, 2),
	                                 round((top_m + ph - ph * (py - ylo) / (yhi - ylo))::numeric, 2)), ' ' ORDER BY px) AS pts
	          FROM mop.plot_points(mop_plot_curves.run_id, y, x) p
	         WHERE n_models OPERATOR(pg_catalog.<=) max_lines
	            OR p.model_id IN (SELECT l.model_id FROM mop.leaderboard l
	                               WHERE l.run_id OPERATOR(pg_catalog.=) mop_plot_curves.run_id
	                                 AND l.rank OPERATOR(pg_catalog.<=) max_lines)
	         GROUP BY model_id, c) s;

	SELECT xmlagg(xmlelement(name circle,
	         xmlattributes('point' AS class, round((left_m + pw * (px - xlo) / (xhi - xlo))::numeric, 2) AS cx,
	                       round((top_m + ph - ph * (py - ylo) / (yhi - ylo))::numeric, 2) AS cy, 2.5 AS r,
	                       mop.plot_colour(c) AS fill),
	         xmlelement(name title, format('model %s, epoch %s: %s', model_id, epoch, py))))
	  INTO marks FROM mop.plot_points(mop_plot_curves.run_id, y, x)
	 WHERE n_points OPERATOR(pg_catalog.<=) max_points;

	SELECT xmlagg(xmlconcat(
	         xmlelement(name line, xmlattributes(round((left_m + pw * (t - xlo) / (xhi - xlo))::numeric, 2) AS x1,
	                    round((left_m + pw * (t - xlo) / (xhi - xlo))::numeric, 2) AS x2, top_m AS y1,
	                    top_m + ph AS y2, '#dddddd' AS stroke)),
	         xmlelement(name text, xmlattributes(round((left_m + pw * (t - xlo) / (xhi - xlo))::numeric, 2) AS x,
	                    top_m + ph + 16 AS y, 'middle' AS "text-anchor"), mop.plot_num(t))) ORDER BY t)
	  INTO xticks FROM mop.plot_ticks(xlo, xhi) t
	 WHERE x OPERATOR(pg_catalog.<>) 'epoch' OR t OPERATOR(pg_catalog.=) round(t);
	SELECT xmlagg(xmlconcat(
	         xmlelement(name line, xmlattributes(left_m AS x1, left_m + pw AS x2,
	                    round((top_m + ph - ph * (t - ylo) / (yhi - ylo))::numeric, 2) AS y1,
	                    round((top_m + ph - ph * (t - ylo) / (yhi - ylo))::numeric, 2) AS y2, '#dddddd' AS stroke)),
	         xmlelement(name text, xmlattributes(left_m - 6 AS x,
	                    round((top_m + ph - ph * (t - ylo) / (yhi - ylo))::numeric + 4, 2) AS y, 'end' AS "text-anchor"),
	                    mop.plot_num(t))) ORDER BY t)
	  INTO yticks FROM mop.plot_ticks(ylo, yhi) t;

	SELECT xmlagg(xmlconcat(
	         xmlelement(name rect, xmlattributes(w_total - right_m + 16 AS x, top_m + k * 16 AS y,
	                    12 AS width, 4 AS height, mop.plot_colour(c) AS fill)),
	         xmlelement(name text, xmlattributes(w_total - right_m + 34 AS x, top_m + k * 16 + 6 AS y),
	                    format('model %s%s', model_id, CASE WHEN model_id OPERATOR(pg_catalog.=) best THEN ' (best)' ELSE '' END)))
	         ORDER BY k)
	  INTO legend
	  FROM (SELECT DISTINCT model_id, c, (dense_rank() OVER (ORDER BY model_id OPERATOR(pg_catalog.<>) best, model_id) - 1)::int AS k
	          FROM mop.plot_points(mop_plot_curves.run_id, y, x)) s WHERE k OPERATOR(pg_catalog.<) 24;
	IF n_models OPERATOR(pg_catalog.>) 24 THEN
		legend := xmlconcat(legend, xmlelement(name text, xmlattributes(w_total - right_m + 16 AS x,
		                    top_m + 24 * 16 + 6 AS y), format('and %s more', n_models - 24)));
	END IF;

	RETURN xmlelement(name svg,
	         xmlattributes('http://www.w3.org/2000/svg' AS xmlns, w_total AS width, h AS height,
	                       format('0 0 %s %s', w_total, h) AS "viewBox",
	                       'font-family: sans-serif; font-size: 12px' AS style),
	         xmlelement(name title, title),
	         xmlelement(name rect, xmlattributes(0 AS x, 0 AS y, w_total AS width, h AS height, '#ffffff' AS fill)),
	         xmlelement(name text, xmlattributes(left_m AS x, 24 AS y, 'font-size: 14px; font-weight: bold' AS style), title),
	         xticks, yticks,
	         xmlelement(name rect, xmlattributes(left_m AS x, top_m AS y, pw AS width, ph AS height, 'none' AS fill,
	                    '#888888' AS stroke)),
	         lines, marks, legend,
	         xmlelement(name text, xmlattributes(left_m + pw / 2 AS x, h - 10 AS y, 'middle' AS "text-anchor"),
	                    CASE x WHEN 'epoch' THEN 'epoch' ELSE 'seconds of training' END
	                    || CASE WHEN n_points OPERATOR(pg_catalog.>) max_points
	                            THEN format(' (%s epochs: no dot per epoch)', n_points) ELSE '' END))::text;
END
$$;
COMMENT ON FUNCTION @extschema@.mop_plot_curves(bigint, text, text)
	IS 'SVG: learning curves of a run, one line per model, the best highlighted; y => valid_metric, valid_loss, train_loss or train_metric; x => epoch or seconds';

-- A run's dataset name, or the error every chart gives for a run it cannot see.
CREATE FUNCTION mop.plot_run(run_id bigint) RETURNS text
	LANGUAGE plpgsql STABLE
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	ds text;
BEGIN
	SELECT mop.plot_text(d.name) INTO ds FROM mop.runs r JOIN mop.datasets d ON d.id OPERATOR(pg_catalog.=) r.dataset_id
	 WHERE r.id OPERATOR(pg_catalog.=) plot_run.run_id;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'run % does not exist', plot_run.run_id
			USING ERRCODE = 'undefined_object', HINT = 'Runs you may see are listed in mop.runs.';
	END IF;
	RETURN mop.plot_text(ds);
END
$$;
COMMENT ON FUNCTION mop.plot_run(bigint) IS 'the dataset of a run the caller may see (an error otherwise)';

CREATE FUNCTION mop.plot_trials(run_id bigint)
	RETURNS TABLE (model_id bigint, t float8, v float8, best float8, status text)
	LANGUAGE sql STABLE
	SET search_path = pg_catalog, pg_temp
	AS $$
	WITH r AS (SELECT r.started_at AS t0 FROM mop.runs r WHERE r.id OPERATOR(pg_catalog.=) $1),
	     d AS (SELECT bool_or(m.higher_is_better) AS higher FROM mop.models m
	            WHERE m.run_id OPERATOR(pg_catalog.=) $1),
	     tr AS (SELECT m.id, extract(epoch FROM coalesce(
	                   (SELECT max(e.finished_at) FROM mop.epochs e WHERE e.model_id OPERATOR(pg_catalog.=) m.id),
	                   m.updated_at) OPERATOR(pg_catalog.-) r.t0)::float8 AS t,
	                   m.best_valid_metric AS v, m.status
	              FROM mop.models m, r
	             WHERE m.run_id OPERATOR(pg_catalog.=) $1 AND m.best_valid_metric IS NOT NULL
	               AND m.best_valid_metric OPERATOR(pg_catalog.<>) ALL ('{NaN,Infinity,-Infinity}'::float8[])
	               AND abs(m.best_valid_metric) OPERATOR(pg_catalog.<) 1e300
	               AND m.status OPERATOR(pg_catalog.=) ANY ('{done,stopped,diverged}'::text[]))
	SELECT tr.id, tr.t, tr.v,
	       CASE WHEN d.higher THEN max(tr.v) OVER w ELSE min(tr.v) OVER w END, tr.status
	  FROM tr, d WINDOW w AS (ORDER BY tr.t, tr.id)
$$;
COMMENT ON FUNCTION mop.plot_trials(bigint)
	IS 'the finished trials of a run: seconds from the start to their last epoch, best validation metric, best so far';

CREATE FUNCTION @extschema@.mop_plot_history(run_id bigint) RETURNS text
	LANGUAGE plpgsql STABLE
	SET search_path = pg_catalog, pg_temp
	SET client_min_messages = warning
	AS $$
DECLARE
	w_total constant int := 960;
	left_m constant int := 80;
	right_m constant int := 40;
	top_m constant int := 48;
	ph constant int := 360;
	bottom_m constant int := 48;
	pw constant int := w_total - left_m - right_m;
	h constant int := top_m + ph + bottom_m;
	ds text;
	xhi float8;
	ylo float8;
	yhi float8;
	n int;
	metric text;
	dots xml;
	stair xml;
	xticks xml;
	yticks xml;
	title text;
BEGIN
	ds := mop.plot_run(mop_plot_history.run_id);
	SELECT min(m.metric) INTO metric
	  FROM mop.models m WHERE m.run_id OPERATOR(pg_catalog.=) mop_plot_history.run_id;
	SELECT count(*), greatest(max(p.t), 0.001), min(p.v), max(p.v) INTO n, xhi, ylo, yhi
	  FROM mop.plot_trials(mop_plot_history.run_id) p;
	IF yhi IS NULL OR yhi OPERATOR(pg_catalog.=) ylo THEN
		ylo := coalesce(ylo, 0) - greatest(0.5, abs(coalesce(ylo, 0)) * 0.01);
		yhi := coalesce(yhi, 1) + greatest(0.5, abs(coalesce(yhi, 1)) * 0.01);
	END IF;
	ylo := ylo - 0.05 * (yhi - ylo);
	yhi := yhi + 0.05 * (yhi - ylo);
	xhi := coalesce(xhi, 1);
	title := format('run %s on %s: best validation %s of %s finished trials over time', mop_plot_history.run_id,
	                ds, coalesce(metric, 'metric'), n);

	SELECT xmlagg(xmlelement(name circle,
	         xmlattributes('trial' AS class, round((left_m + pw * t / xhi)::numeric, 2) AS cx,
	                       round((top_m + ph - ph * (v - ylo) / (yhi - ylo))::numeric, 2) AS cy, 4 AS r,
	                       CASE WHEN status OPERATOR(pg_catalog.=) 'done' THEN '#0072B2' ELSE '#E69F00' END AS fill,
	                       '0.8' AS opacity),
	         xmlelement(name title, format('model %s (%s): %s after %s s', model_id, status, mop.plot_num(v),
	                    mop.plot_num(round(t::numeric, 2)::float8)))) ORDER BY t, model_id)
	  INTO dots FROM mop.plot_trials(mop_plot_history.run_id);
	SELECT xmlelement(name polyline, xmlattributes('best-so-far' AS class, 'none' AS fill, '#D55E00' AS stroke,
	         '2' AS "stroke-width",
	         string_agg(format('%s,%s %s,%s',
	                           round((left_m + pw * t / xhi)::numeric, 2),
	                           round((top_m + ph - ph * (coalesce(prev, best) - ylo) / (yhi - ylo))::numeric, 2),
	                           round((left_m + pw * t / xhi)::numeric, 2),
	                           round((top_m + ph - ph * (best - ylo) / (yhi - ylo))::numeric, 2)), ' ' ORDER BY t, model_id) AS points))
	  INTO stair
	  FROM (SELECT p.t, p.model_id, p.best, lag(p.best) OVER (ORDER BY p.t, p.model_id) AS prev
	          FROM mop.plot_trials(mop_plot_history.run_id) p) s;
	SELECT xmlagg(xmlconcat(
	         xmlelement(name line, xmlattributes(round((left_m + pw * t / xhi)::numeric, 2) AS x1,
	                    round((left_m + pw * t / xhi)::numeric, 2) AS x2, top_m AS y1, top_m + ph AS y2, '#dddddd' AS stroke)),
	         xmlelement(name text, xmlattributes(round((left_m + pw * t / xhi)::numeric, 2) AS x,
	                    top_m + ph + 16 AS y, 'middle' AS "text-anchor"), mop.plot_num(t))) ORDER BY t)
	  INTO xticks FROM mop.plot_ticks(0, xhi) t;
	SELECT xmlagg(xmlconcat(
	         xmlelement(name line, xmlattributes(left_m AS x1, left_m + pw AS x2,
	                    round((top_m + ph - ph * (t - ylo) / (yhi - ylo))::numeric, 2) AS y1,
	                    round((top_m + ph - ph * (t - ylo) / (yhi - ylo))::numeric, 2) AS y2, '#dddddd' AS stroke)),
	         xmlelement(name text, xmlattributes(left_m - 6 AS x,
	                    round((top_m + ph - ph * (t - ylo) / (yhi - ylo))::numeric + 4, 2) AS y, 'end' AS "text-anchor"),
	                    mop.plot_num(t))) ORDER BY t)
	  INTO yticks FROM mop.plot_ticks(ylo, yhi) t;
	RETURN xmlelement(name svg,
	         xmlattributes('http://www.w3.org/2000/svg' AS xmlns, w_total AS width, h AS height,
	                       format('0 0 %s %s', w_total, h) AS "viewBox",
	                       'font-family: sans-serif; font-size: 12px' AS style),
	         xmlelement(name title, title),
	         xmlelement(name rect, xmlattributes(0 AS x, 0 AS y, w_total AS width, h AS height, '#ffffff' AS fill)),
	         xmlelement(name text, xmlattributes(left_m AS x, 24 AS y, 'font-size: 14px; font-weight: bold' AS style), title),
	         xticks, yticks,
	         xmlelement(name rect, xmlattributes(left_m AS x, top_m AS y, pw AS width, ph AS height, 'none' AS fill,
	                    '#888888' AS stroke)),
	         stair, dots,
	         xmlelement(name text, xmlattributes(left_m + pw / 2 AS x, h - 10 AS y, 'middle' AS "text-anchor"),
	                    'seconds since the run started (blue: finished, orange: stopped early or diverged; line: best so far)'))::text;
END
$$;
COMMENT ON FUNCTION @extschema@.mop_plot_history(bigint)
	IS 'SVG: every finished trial''s best validation metric against the time it finished, and the best so far';

CREATE FUNCTION mop.plot_settings(run_id bigint)
	RETURNS TABLE (model_id bigint, key text, num float8, cat text, metric float8)
	LANGUAGE sql STABLE
	SET search_path = pg_catalog, pg_temp
	AS $$
	-- the top-level settings that differ between the run's models, and the metric
	SELECT m.id, c.key,
	       CASE WHEN jsonb_typeof(c.value) OPERATOR(pg_catalog.=) 'number' THEN (c.value #>> '{}')::float8 END,
	       CASE WHEN jsonb_typeof(c.value) OPERATOR(pg_catalog.<>) 'number' THEN
	            CASE WHEN c.key OPERATOR(pg_catalog.=) 'model' THEN 'model ' || left(md5(c.value::text), 6)
	                 ELSE mop.plot_text(left(c.value #>> '{}', 24)) END END,
	       m.best_valid_metric
	  FROM mop.models m, LATERAL jsonb_each(m.config) c
	 WHERE m.run_id OPERATOR(pg_catalog.=) $1
	   AND c.key IN (SELECT c2.key FROM mop.models m2, LATERAL jsonb_each(m2.config) c2
	                  WHERE m2.run_id OPERATOR(pg_catalog.=) $1
	                  GROUP BY c2.key HAVING count(DISTINCT c2.value) OPERATOR(pg_catalog.>) 1)
	UNION ALL
	SELECT m.id, '~' || coalesce((SELECT min(m3.metric) FROM mop.models m3
	                               WHERE m3.run_id OPERATOR(pg_catalog.=) $1
	                                 AND m3.best_valid_metric OPERATOR(pg_catalog.<>) ALL ('{NaN,Infinity,-Infinity}'::float8[])),
	                              'metric'),
	       m.best_valid_metric, NULL, m.best_valid_metric
	  FROM mop.models m
	 WHERE m.run_id OPERATOR(pg_catalog.=) $1
$$;
COMMENT ON FUNCTION mop.plot_settings(bigint)
	IS 'the settings that differ between a run''s models (numbers or categories) and their metric, one row per model and setting';

CREATE FUNCTION mop.plot_axes(run_id bigint, left_m int, pw int, top_m int, ph int)
	RETURNS TABLE (model_id bigint, key text, ax int, px float8, py float8, label text, metric float8)
	LANGUAGE sql STABLE
	SET search_path = pg_catalog, pg_temp
	AS $$
	-- each axis: its position, and each model's place on it (numbers on a
	-- log scale when they span a factor of 10 or more, categories in order)
	WITH hp AS (SELECT * FROM mop.plot_settings($1)),
	     na AS (SELECT count(DISTINCT hp.key) AS n_axes FROM hp),
	     ax AS (SELECT key, (dense_rank() OVER (ORDER BY key) - 1)::int AS k,
	                   min(num) AS lo, max(num) AS hi, bool_and(num IS NOT NULL) AS numeric_axis,
	                   min(num) OPERATOR(pg_catalog.>) 0 AND max(num) OPERATOR(pg_catalog.>=) 10 * min(num) AS logscale
	              FROM hp GROUP BY key),
	     cats AS (SELECT key, cat, (dense_rank() OVER (PARTITION BY key ORDER BY cat) - 1)::int AS i,
	                     count(*) OVER (PARTITION BY key) AS n
	                FROM (SELECT DISTINCT key, coalesce(cat, num::text) AS cat FROM hp) d)
	SELECT p.model_id, p.key, ax.k,
	       $2 + CASE WHEN na.n_axes OPERATOR(pg_catalog.>) 1 THEN $3 * ax.k::float8 / (na.n_axes - 1) ELSE $3 / 2.0 END,
	       $4 + $5 - $5 * CASE
	           WHEN ax.numeric_axis AND ax.hi OPERATOR(pg_catalog.>) ax.lo AND ax.logscale
	               THEN (ln(p.num) - ln(ax.lo)) / (ln(ax.hi) - ln(ax.lo))
	           WHEN ax.numeric_axis AND ax.hi OPERATOR(pg_catalog.>) ax.lo THEN (p.num - ax.lo) / (ax.hi - ax.lo)
	           WHEN ax.numeric_axis THEN 0.5
	           ELSE (cats.i + 0.5) / cats.n END,
	       coalesce(p.cat, mop.plot_num(p.num)), p.metric
	  FROM hp p JOIN ax USING (key) CROSS JOIN na
	  LEFT JOIN (SELECT DISTINCT key, cat, i, n FROM cats) cats
	    ON cats.key OPERATOR(pg_catalog.=) p.key AND cats.cat OPERATOR(pg_catalog.=) coalesce(p.cat, p.num::text)
	 WHERE p.num IS NOT NULL OR p.cat IS NOT NULL
$$;
COMMENT ON FUNCTION mop.plot_axes(bigint, int, int, int, int)
	IS 'parallel coordinates of a run: each model''s point on each setting''s axis, in the plot''s pixels';

CREATE FUNCTION @extschema@.mop_plot_parallel(run_id bigint) RETURNS text
	LANGUAGE plpgsql STABLE
	SET search_path = pg_catalog, pg_temp
	SET client_min_messages = warning
	AS $$
DECLARE
	w_total constant int := 960;
	left_m constant int := 60;
	right_m constant int := 60;
	top_m constant int := 64;
	ph constant int := 360;
	bottom_m constant int := 40;
	pw constant int := w_total - left_m - right_m;
	h constant int := top_m + ph + bottom_m;
	ds text;
	metric_name text;
	mlo float8;
	mhi float8;
	axes xml;
	lines xml;
	title text;
BEGIN
	ds := mop.plot_run(mop_plot_parallel.run_id);
	SELECT min(m.metric), min(m.best_valid_metric), max(m.best_valid_metric)
	  INTO metric_name, mlo, mhi FROM mop.models m
	 WHERE m.run_id OPERATOR(pg_catalog.=) mop_plot_parallel.run_id
	   AND m.best_valid_metric OPERATOR(pg_catalog.<>) ALL ('{NaN,Infinity,-Infinity}'::float8[]);
	title := format('run %s on %s: the settings that differ, coloured by validation %s', mop_plot_parallel.run_id,
	                ds, coalesce(metric_name, 'metric'));
	WITH pos AS MATERIALIZED (SELECT * FROM mop.plot_axes(mop_plot_parallel.run_id, left_m, pw, top_m, ph))
	SELECT xmlagg(xmlconcat(
	         xmlelement(name line, xmlattributes(round(z.px::numeric, 2) AS x1, round(z.px::numeric, 2) AS x2,
	                    top_m AS y1, top_m + ph AS y2, '#888888' AS stroke)),
	         xmlelement(name text, xmlattributes(round(z.px::numeric, 2) AS x, top_m - 12 AS y,
	                    'middle' AS "text-anchor", 'font-weight: bold' AS style), ltrim(z.key, '~')),
	         (SELECT xmlagg(xmlelement(name text, xmlattributes(round((z.px + 4)::numeric, 2) AS x,
	                        round((d.py + 4)::numeric, 2) AS y, '#555555' AS fill, 'font-size: 10px' AS style), d.label)
	                  ORDER BY d.py)
	            FROM (SELECT DISTINCT p.py, p.label FROM pos p
	                   WHERE p.key OPERATOR(pg_catalog.=) z.key) d)) ORDER BY z.ax)
	  INTO axes
	  FROM (SELECT key, ax, min(px) AS px FROM pos GROUP BY key, ax) z;
	-- colour by the metric: light for the worst, dark blue for the best (in its direction)
	SELECT xmlagg(xmlelement(name polyline,
	         xmlattributes('trial' AS class, 'none' AS fill,
	                       CASE WHEN s.metric IS NULL OR mhi OPERATOR(pg_catalog.=) mlo THEN '#999999'
	                            ELSE format('hsl(205, 80%%, %s%%)', round((70 - 45 * CASE WHEN hb THEN (s.metric - mlo) / (mhi - mlo)
	                                        ELSE (mhi - s.metric) / (mhi - mlo) END)::numeric, 1)) END AS stroke,
	                       '1.5' AS "stroke-width", pts AS points),
	         xmlelement(name title, format('model %s: %s', s.model_id, coalesce(mop.plot_num(s.metric), 'no result'))))
	         ORDER BY s.metric NULLS FIRST)
	  INTO lines
	  FROM (SELECT model_id, min(metric) AS metric,
	               string_agg(format('%s,%s', round(px::numeric, 2), round(py::numeric, 2)), ' ' ORDER BY ax) AS pts
	          FROM mop.plot_axes(mop_plot_parallel.run_id, left_m, pw, top_m, ph) GROUP BY model_id) s,
	       LATERAL (SELECT bool_or(m.higher_is_better) AS hb FROM mop.models m
	                 WHERE m.run_id OPERATOR(pg_catalog.=) mop_plot_parallel.run_id) d;
	RETURN xmlelement(name svg,
	         xmlattributes('http://www.w3.org/2000/svg' AS xmlns, w_total AS width, h AS height,
	                       format('0 0 %s %s', w_total, h) AS "viewBox",
	                       'font-family: sans-serif; font-size: 12px' AS style),
	         xmlelement(name title, title),
	         xmlelement(name rect, xmlattributes(0 AS x, 0 AS y, w_total AS width, h AS height, '#ffffff' AS fill)),
	         xmlelement(name text, xmlattributes(left_m AS x, 24 AS y, 'font-size: 14px; font-weight: bold' AS style), title),
	         lines, axes,
	         xmlelement(name text, xmlattributes(left_m + pw / 2 AS x, h - 10 AS y, 'middle' AS "text-anchor"),
	                    'one line per model; numbers spanning a factor of 10 or more on a log scale'))::text;
END
$$;
COMMENT ON FUNCTION @extschema@.mop_plot_parallel(bigint)
	IS 'SVG: parallel coordinates of the settings that differ between a run''s models, coloured by their validation metric';

CREATE FUNCTION @extschema@.mop_report(run_id bigint) RETURNS text
	LANGUAGE plpgsql STABLE
	SET search_path = pg_catalog, pg_temp
	SET client_min_messages = warning
	AS $$
DECLARE
	ds text;
	r record;
	summary xml;
	board xml;
	decisions xml;
	winner jsonb;
	winner_id bigint;
	n_decisions bigint;
BEGIN
	ds := mop.plot_run(mop_report.run_id);
	SELECT * INTO r FROM mop.runs WHERE id OPERATOR(pg_catalog.=) mop_report.run_id;
	SELECT l.model_id, l.config INTO winner_id, winner FROM mop.best l WHERE l.run_id OPERATOR(pg_catalog.=) mop_report.run_id;
	summary := xmlelement(name table, xmlattributes('summary' AS class),
	  xmlconcat(
	    xmlelement(name tr, xmlelement(name th, 'dataset'), xmlelement(name td, ds)),
	    xmlelement(name tr, xmlelement(name th, 'kind'), xmlelement(name td, r.kind)),
	    xmlelement(name tr, xmlelement(name th, 'status'), xmlelement(name td,
	               r.status || coalesce(': ' || mop.plot_text(r.error), ''))),
	    xmlelement(name tr, xmlelement(name th, 'owner'), xmlelement(name td, r.owner)),
	    xmlelement(name tr, xmlelement(name th, 'started'), xmlelement(name td, r.started_at::text)),
	    xmlelement(name tr, xmlelement(name th, 'finished'), xmlelement(name td, coalesce(r.finished_at::text, '-'))),
	    xmlelement(name tr, xmlelement(name th, 'models'), xmlelement(name td,
	               (SELECT count(*)::text FROM mop.models m WHERE m.run_id OPERATOR(pg_catalog.=) mop_report.run_id))),
	    xmlelement(name tr, xmlelement(name th, 'sub-epochs'), xmlelement(name td,
	               (SELECT count(*)::text FROM mop.hops h WHERE h.run_id OPERATOR(pg_catalog.=) mop_report.run_id))),
	    xmlelement(name tr, xmlelement(name th, 'options'), xmlelement(name td, coalesce(r.options::text, '')))));
	SELECT xmlelement(name table, xmlattributes('leaderboard' AS class),
	         xmlconcat(xmlelement(name tr, xmlelement(name th, 'rank'), xmlelement(name th, 'model'),
	                              xmlelement(name th, 'status'), xmlelement(name th, 'best ' || coalesce(min(l.metric), 'metric')),
	                              xmlelement(name th, 'best epoch'), xmlelement(name th, 'epochs'),
	                              xmlelement(name th, 'configuration')),
	                   xmlagg(xmlelement(name tr,
	                     xmlelement(name td, l.rank::text), xmlelement(name td, l.model_id::text),
	                     xmlelement(name td, l.status), xmlelement(name td, coalesce(mop.plot_num(l.best_valid_metric), '-')),
	                     xmlelement(name td, coalesce(l.best_epoch::text, '-')), xmlelement(name td, l.epochs_done::text),
	                     xmlelement(name td, xmlelement(name code, l.config::text))) ORDER BY l.rank, l.model_id)))
	  INTO board
	  FROM mop.leaderboard l WHERE l.run_id OPERATOR(pg_catalog.=) mop_report.run_id;
	SELECT count(*) INTO n_decisions FROM mop.decisions d WHERE d.run_id OPERATOR(pg_catalog.=) mop_report.run_id;
	SELECT xmlelement(name table, xmlattributes('decisions' AS class),
	         xmlconcat(xmlelement(name tr, xmlelement(name th, 'when'), xmlelement(name th, 'model'),
	                              xmlelement(name th, 'action'), xmlelement(name th, 'why')),
	                   xmlagg(xmlelement(name tr, xmlelement(name td, to_char(d.at, 'HH24:MI:SS.MS')),
	                            xmlelement(name td, d.model_id::text), xmlelement(name td, d.action),
	                            xmlelement(name td, mop.plot_text(d.why || ': ' || d.reason))) ORDER BY d.at, d.id)))
	  INTO decisions
	  FROM (SELECT * FROM mop.decisions d WHERE d.run_id OPERATOR(pg_catalog.=) mop_report.run_id
	         ORDER BY d.at, d.id LIMIT 1000) d;
	RETURN '<!DOCTYPE html>' || xmlelement(name html, xmlattributes('en' AS lang),
	  xmlelement(name head,
	    xmlelement(name meta, xmlattributes('utf-8' AS charset)),
	    xmlelement(name title, format('mop run %s on %s', mop_report.run_id, ds)),
	    xmlelement(name style, 'body { font-family: sans-serif; margin: 2em; max-width: 1000px } '
	                           'table { border-collapse: collapse; margin: 1em 0 } '
	                           'th, td { border-bottom: 1px solid #ddd; padding: 4px 8px; text-align: left; vertical-align: top } '
	                           'code, pre { font-size: 11px } svg { display: block; margin: 1em 0; max-width: 100% } '
	                           'h2 { margin-top: 2em }')),
	  xmlelement(name body,
	    xmlelement(name h1, format('Run %s on %s', mop_report.run_id, ds)),
	    summary,
	    xmlelement(name h2, 'Winner'),
	    CASE WHEN winner IS NULL THEN xmlelement(name p, 'no model has a validation result yet')
	         ELSE xmlconcat(xmlelement(name p, format('model %s', winner_id)),
	                        xmlelement(name pre, jsonb_pretty(winner))) END,
	    xmlelement(name h2, 'Leaderboard'), board,
	    xmlelement(name h2, 'Learning curves'), @extschema@.mop_plot_curves(mop_report.run_id)::xml,
	    xmlelement(name h2, 'Workers and sub-epochs'), @extschema@.mop_plot_gantt(mop_report.run_id)::xml,
	    xmlelement(name h2, 'Optimization history'), @extschema@.mop_plot_history(mop_report.run_id)::xml,
	    xmlelement(name h2, 'Settings'), @extschema@.mop_plot_parallel(mop_report.run_id)::xml,
	    xmlelement(name h2, 'Decisions'),
	    CASE WHEN n_decisions OPERATOR(pg_catalog.=) 0 THEN xmlelement(name p, 'none (every model trained all its epochs)')
	         ELSE xmlconcat(decisions, CASE WHEN n_decisions OPERATOR(pg_catalog.>) 1000 THEN
	                        xmlelement(name p, format('the first 1000 of %s decisions', n_decisions)) END) END))::text;
END
$$;
COMMENT ON FUNCTION @extschema@.mop_report(bigint)
	IS 'a self-contained HTML page about a run: summary, winner, leaderboard, the four charts, decisions';

-- 9. progress: each worker's state in mop.progress, and mop.run_progress -----------

DROP VIEW mop.progress;
DROP FUNCTION mop.progress_rows();
CREATE FUNCTION mop.progress_rows()
	RETURNS TABLE (run_id bigint, worker int, pid int, state text, model_id bigint, epoch int,
				   partition int, rows_done bigint, rows_total bigint, started_at timestamptz)
	AS 'MODULE_PATHNAME', 'mop_progress_v2'
	LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION mop.progress_rows() IS 'the rows of mop.progress';
CREATE VIEW mop.progress WITH (security_invoker = true) AS
	SELECT * FROM mop.progress_rows();
COMMENT ON VIEW mop.progress IS 'what each worker of each running run is doing now: starting, idle, loading, training, finishing (validating and committing), reporting, exiting; its task while busy (in the spirit of pg_stat_progress_*)';
GRANT SELECT ON mop.progress TO PUBLIC;

CREATE FUNCTION mop.run_progress_rows()
	RETURNS TABLE (run_id bigint, phase text, sub_epochs_done bigint, sub_epochs_planned bigint,
				   models_finished int, models int, best_valid_metric float8, elapsed interval,
				   eta interval, workers_busy int)
	AS 'MODULE_PATHNAME', 'mop_run_progress'
	LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION mop.run_progress_rows() IS 'the rows of mop.run_progress';
CREATE VIEW mop.run_progress WITH (security_invoker = true) AS
	SELECT * FROM mop.run_progress_rows();
COMMENT ON VIEW mop.run_progress IS 'one row per running run: sub-epochs done of those planned so far, models finished, best validation metric so far, elapsed, estimated time left, busy workers';
GRANT SELECT ON mop.run_progress TO PUBLIC;

-- 10. mop_export: a trained model to take elsewhere ------------------------------

CREATE FUNCTION @extschema@.mop_export(model_id bigint, format text DEFAULT 'keras',
	preprocessing boolean DEFAULT true, checkpoint text DEFAULT 'best')
	RETURNS jsonb
	AS 'MODULE_PATHNAME', 'mop_export'
	LANGUAGE C STRICT STABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_export(bigint, text, boolean, text)
	IS 'a trained model as a Keras 3 model (to_json form) with its weights, labels and preprocessing (jsonb)';

-- 11. best checkpoints, and one ranking ------------------------------------------
-- Every model keeps the checkpoint of its best epoch beside its latest one;
-- predictions, evaluations and exports use it unless asked for 'last'.
-- Models trained before 0.2 have none yet: they serve their latest
-- checkpoint until an epoch beats their recorded best.

ALTER TABLE mop.models ADD COLUMN best_state bytea;
ALTER TABLE mop.models ALTER COLUMN best_state SET STORAGE EXTERNAL;
COMMENT ON COLUMN mop.models.best_state
	IS 'checkpoint of the best epoch (best_epoch); NULL: the latest (state) serves, being the best or there being none';
GRANT INSERT (best_state), UPDATE (best_state) ON mop.models TO PUBLIC;

CREATE FUNCTION @extschema@.mop_predict(model_id bigint, features float8[], checkpoint text)
	RETURNS text
	AS 'MODULE_PATHNAME', 'mop_predict'
	LANGUAGE C STRICT STABLE PARALLEL RESTRICTED
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_predict(bigint, float8[], text)
	IS 'predicted label or value of a model''s best (''best'') or latest (''last'') checkpoint';

CREATE FUNCTION @extschema@.mop_predict(model_id bigint, features float8[], as_type anyelement,
	checkpoint text)
	RETURNS anyelement
	AS 'MODULE_PATHNAME', 'mop_predict_typed'
	LANGUAGE C CALLED ON NULL INPUT STABLE PARALLEL RESTRICTED
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_predict(bigint, float8[], anyelement, text)
	IS 'prediction in the type of the third argument, from the ''best'' or ''last'' checkpoint';

CREATE FUNCTION @extschema@.mop_predict_proba(model_id bigint, features float8[], checkpoint text)
	RETURNS float8[]
	AS 'MODULE_PATHNAME', 'mop_predict_proba'
	LANGUAGE C STRICT STABLE PARALLEL RESTRICTED
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_predict_proba(bigint, float8[], text)
	IS 'class probabilities (or the value) of the ''best'' or ''last'' checkpoint';

CREATE FUNCTION @extschema@.mop_evaluate(model_id bigint, source regclass, checkpoint text,
	OUT loss float8, OUT metric float8, OUT rows bigint)
	RETURNS record
	AS 'MODULE_PATHNAME', 'mop_evaluate'
	LANGUAGE C STRICT STABLE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_evaluate(bigint, regclass, text)
	IS 'mean loss and metric of the ''best'' or ''last'' checkpoint on a table';

COMMENT ON FUNCTION @extschema@.mop_predict(bigint, float8[])
	IS 'predicted label (class text) or value (regression) of a model''s best checkpoint';
COMMENT ON FUNCTION @extschema@.mop_predict(bigint, float8[], anyelement)
	IS 'prediction (best checkpoint) in the type of the third argument, e.g. mop_predict(m, f, NULL::int)';
COMMENT ON FUNCTION @extschema@.mop_predict_proba(bigint, float8[])
	IS 'class probabilities in label order (or the value for regression) of a model''s best checkpoint';
COMMENT ON FUNCTION @extschema@.mop_evaluate(bigint, regclass)
	IS 'mean loss and metric of a model''s best checkpoint on a table with the dataset''s columns';

-- one ranking for mop.leaderboard, mop.best and the search functions' results:
-- the metric in its direction, then validation loss, then fewer epochs to
-- the best, then id; no two models of a run share a rank
CREATE OR REPLACE VIEW mop.leaderboard WITH (security_invoker = true) AS
	SELECT m.run_id, m.id AS model_id,
		   pg_catalog.rank() OVER (PARTITION BY m.run_id ORDER BY
				(m.status OPERATOR(pg_catalog.=) ANY ('{done,training,stopped}'::text[])) DESC,
				CASE WHEN m.higher_is_better THEN OPERATOR(pg_catalog.-) m.best_valid_metric
					 ELSE m.best_valid_metric END ASC NULLS LAST,
				m.best_valid_loss ASC NULLS LAST, m.best_epoch ASC NULLS LAST, m.id) AS rank,
		   m.status, m.metric, m.higher_is_better, m.best_valid_metric, m.best_valid_loss,
		   m.best_epoch, m.epochs_done, m.config
	  FROM mop.models m WHERE m.run_id IS NOT NULL;
COMMENT ON VIEW mop.leaderboard IS 'models of every run ranked by their best validation metric in its direction, then validation loss, fewer epochs, id; diverged and failed models last';

-- 12. mop_prepare partitions the data for the workers a run would use ----------
-- (partitions => NULL, the new default: mop.workers, capped by
-- max_worker_processes and by the training rows)

CREATE OR REPLACE FUNCTION @extschema@.mop_prepare(
	source regclass,
	target text,
	features text[] DEFAULT NULL,
	dataset text DEFAULT NULL,
	partitions int DEFAULT NULL,
	validation float8 DEFAULT 0.1,
	buffer_rows int DEFAULT 2048,
	standardize boolean DEFAULT true,
	seed int DEFAULT 0,
	shape int[] DEFAULT NULL,
	target_kind text DEFAULT 'auto',
	OUT dataset_id bigint,
	OUT dataset_name text,
	OUT train_rows bigint,
	OUT valid_rows bigint,
	OUT partitions_used int,
	OUT buffers int,
	OUT n_features int,
	OUT classes int)
	RETURNS record
	AS 'MODULE_PATHNAME', 'mop_prepare'
	LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;

-- 13. metrics: the confusion matrix of a model on a table ------------------------
-- (the metrics themselves -- log_loss, precision, recall, f1, auc, r2 -- are
-- configuration values the engine computes; no catalog change)

CREATE FUNCTION @extschema@.mop_confusion_matrix(model_id bigint, source regclass,
	checkpoint text DEFAULT 'best')
	RETURNS TABLE (actual text, predicted text, rows bigint)
	LANGUAGE plpgsql STABLE
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	d mop.datasets;
	labels text[];
	feats text;
	bad text;
BEGIN
	SELECT ds.* INTO d FROM mop.models m JOIN mop.datasets ds ON ds.id OPERATOR(pg_catalog.=) m.dataset_id
	 WHERE m.id OPERATOR(pg_catalog.=) mop_confusion_matrix.model_id;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'model % does not exist', mop_confusion_matrix.model_id
			USING ERRCODE = 'undefined_object', HINT = 'Models you may see are listed in mop.models.';
	END IF;
	IF d.target_kind OPERATOR(pg_catalog.=) 'regression' THEN
		RAISE EXCEPTION 'model % predicts a number, not a class', mop_confusion_matrix.model_id
			USING ERRCODE = 'invalid_parameter_value',
			      HINT = 'A confusion matrix needs a class or binary target; mop_evaluate gives the error of a regression model.';
	END IF;
	IF checkpoint IS NULL THEN
		RAISE EXCEPTION 'checkpoint must not be NULL'
			USING ERRCODE = 'null_value_not_allowed',
			      HINT = 'Use ''best'' (the checkpoint of the model''s best epoch, the default) or ''last'' (its latest).';
	END IF;
	labels := ARRAY(SELECT l.v FROM pg_catalog.jsonb_array_elements_text(d.labels) WITH ORDINALITY l(v, i) ORDER BY l.i);
	IF d.feature_kind OPERATOR(pg_catalog.=) 'array' THEN
		-- flattened row-major, as mop_prepare reads an image of any dimensions
		feats := format('ARRAY(SELECT pg_catalog.unnest(%I))::float8[]', d.features[1]);
		EXECUTE format('SELECT 1 FROM %s WHERE %I IS NULL LIMIT 1', source, d.features[1]) INTO bad;
		IF bad IS NOT NULL THEN
			RAISE EXCEPTION 'column % of % has a NULL', d.features[1], source
				USING ERRCODE = 'null_value_not_allowed', HINT = 'mop predicts from complete rows only.';
		END IF;
	ELSE
		feats := format('ARRAY[%s]::float8[]',
		                (SELECT string_agg(format('%I', f.name), ', ' ORDER BY f.i)
		                   FROM pg_catalog.unnest(d.features) WITH ORDINALITY f(name, i)));
	END IF;
	-- every row's label must be one the model knows
	EXECUTE format('SELECT coalesce(%1$I::text, ''NULL'') FROM %2$s
	                 WHERE %1$I IS NULL OR %1$I::text OPERATOR(pg_catalog.<>) ALL ($1) LIMIT 1',
	               d.target, source)
	   INTO bad USING labels;
	IF bad IS NOT NULL THEN
		RAISE EXCEPTION 'label % in column % of % is not a label of dataset "%"', bad, d.target, source, d.name
			USING ERRCODE = 'invalid_parameter_value',
			      HINT = format('The dataset''s labels are %s.', d.labels::text);
	END IF;
	RETURN QUERY EXECUTE format(
		'WITH p AS (SELECT %1$I::text AS actual, @extschema@.mop_predict($1, %2$s, $2) AS predicted FROM %3$s),
		      c AS (SELECT p.actual, p.predicted, pg_catalog.count(*) AS n FROM p GROUP BY 1, 2),
		      l AS (SELECT x.label, x.i FROM pg_catalog.unnest($3) WITH ORDINALITY x(label, i))
		 SELECT a.label, b.label, coalesce(c.n, 0)
		   FROM l a CROSS JOIN l b
		   LEFT JOIN c ON c.actual OPERATOR(pg_catalog.=) a.label AND c.predicted OPERATOR(pg_catalog.=) b.label
		  ORDER BY a.i, b.i',
		d.target, feats, source)
		USING mop_confusion_matrix.model_id, checkpoint, labels;
END
$$;
COMMENT ON FUNCTION @extschema@.mop_confusion_matrix(bigint, regclass, text)
	IS 'rows of a table by true and predicted label (every pair of the dataset''s labels, zeros included)';

-- 14. progress in every step of a task: validating and committing in -----------
-- mop.progress, and when each worker last made progress (what
-- mop.task_timeout watches)

DROP VIEW mop.progress;
DROP FUNCTION mop.progress_rows();
CREATE FUNCTION mop.progress_rows()
	RETURNS TABLE (run_id bigint, worker int, pid int, state text, model_id bigint, epoch int,
				   partition int, rows_done bigint, rows_total bigint, started_at timestamptz,
				   progress_at timestamptz)
	AS 'MODULE_PATHNAME', 'mop_progress_v2'
	LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION mop.progress_rows() IS 'the rows of mop.progress';
CREATE VIEW mop.progress WITH (security_invoker = true) AS
	SELECT * FROM mop.progress_rows();
COMMENT ON VIEW mop.progress IS 'what each worker of each running run is doing now: starting, idle, loading, training, validating, committing, reporting, exiting; its task while busy, and when it last made progress (a minibatch trained or evaluated, a step) (in the spirit of pg_stat_progress_*)';
GRANT SELECT ON mop.progress TO PUBLIC;

-- 15. a PBT exploit records the parent's checkpoint it copied -----------------
-- (so that mop_replay can copy the same checkpoint again: the parent may be
-- between two epochs when a member exploits it)

ALTER TABLE mop.decisions ADD COLUMN parent_subepochs int;
COMMENT ON COLUMN mop.decisions.parent_subepochs
	IS 'PBT exploit: sub-epochs the copied parent checkpoint had trained (its epochs times the partitions, plus the partitions of its unfinished epoch)';
GRANT INSERT (parent_subepochs), UPDATE (parent_subepochs) ON mop.decisions TO PUBLIC;

-- 16. the planner: what a grid search would cost, before it runs -----------------

CREATE FUNCTION @extschema@.mop_explain(dataset text, space jsonb, epochs int DEFAULT 10,
	OUT config_no int, OUT config jsonb, OUT model_bytes bigint, OUT working_bytes bigint,
	OUT fits boolean, OUT step_ms float8, OUT rows_per_s float8, OUT sub_epoch_s float8,
	OUT epoch_s float8, OUT total_s float8)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'mop_explain'
	LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_explain(text, jsonb, int)
	IS 'each configuration of a grid: its memory, and its speed profiled on the dataset (step, rows/s, sub-epoch, epoch and total seconds); nothing is trained';

CREATE FUNCTION @extschema@.mop_explain_workers(dataset text, space jsonb, epochs int DEFAULT 10,
	max_workers int DEFAULT NULL,
	OUT workers int, OUT makespan_s float8, OUT lower_bound_s float8, OUT speedup float8,
	OUT efficiency float8, OUT knee boolean)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'mop_explain_workers'
	LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_explain_workers(text, jsonb, int, int)
	IS 'the predicted time of a grid search for 1..max_workers workers (the scheduler simulated over profiled sub-epochs), and the knee of the speedup';

-- 17. segments: other PostgreSQL servers holding copies of a dataset's ---------
-- partitions (foreign servers of postgres_fdw), and what happened to them
-- during runs

CREATE TABLE mop.dataset_segments (
	dataset_id			bigint NOT NULL REFERENCES mop.datasets (id) ON DELETE CASCADE,
	segment				text NOT NULL CHECK (segment OPERATOR(pg_catalog.<>) ''),
	partition			int NOT NULL CHECK (partition OPERATOR(pg_catalog.>=) 0),
	remote_dataset_id	bigint,
	remote_name			text,
	buffers				int NOT NULL,
	bytes				bigint NOT NULL,
	placed_at			timestamptz NOT NULL DEFAULT pg_catalog.now(),
	PRIMARY KEY (dataset_id, segment, partition),
	CHECK ((segment OPERATOR(pg_catalog.=) 'local') OPERATOR(pg_catalog.=) (remote_dataset_id IS NULL))
);
COMMENT ON TABLE mop.dataset_segments IS 'which segment holds a copy of which training partition of a dataset (''local'': this server; else a foreign server of postgres_fdw)';
COMMENT ON COLUMN mop.dataset_segments.remote_dataset_id IS 'the copy''s dataset id in the segment''s mop.datasets (NULL for local)';
COMMENT ON COLUMN mop.dataset_segments.remote_name IS 'the copy''s dataset name on the segment';
COMMENT ON COLUMN mop.dataset_segments.bytes IS 'bytes of the partition''s training buffers (x and y)';
ALTER TABLE mop.dataset_segments ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_dataset_segments ON mop.dataset_segments
	USING (EXISTS (SELECT 1 FROM mop.datasets d WHERE d.id OPERATOR(pg_catalog.=) dataset_id));
GRANT SELECT, INSERT, UPDATE, DELETE ON mop.dataset_segments TO PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('mop.dataset_segments', '');

CREATE TABLE mop.segment_events (
	id			bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
	run_id		bigint NOT NULL REFERENCES mop.runs (id) ON DELETE CASCADE,
	segment		text NOT NULL,
	event		text NOT NULL CHECK (event IN ('down', 'up', 'requeued', 'waiting', 'gave_up', 'joined', 'left')),
	worker		int,
	model_id	bigint,
	partition	int,
	detail		text,
	at			timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp()
);
CREATE INDEX ON mop.segment_events (run_id, id);
COMMENT ON TABLE mop.segment_events IS 'segments of a run going down and coming back, sub-epochs run again elsewhere, waits for a partition''s only copy';
ALTER TABLE mop.segment_events ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_segment_events ON mop.segment_events
	USING (EXISTS (SELECT 1 FROM mop.runs r WHERE r.id OPERATOR(pg_catalog.=) run_id))
	WITH CHECK (EXISTS (SELECT 1 FROM mop.runs r WHERE r.id OPERATOR(pg_catalog.=) run_id)
				AND (model_id IS NULL OR EXISTS (SELECT 1 FROM mop.models m
												 WHERE m.id OPERATOR(pg_catalog.=) model_id)));
-- the id comes from the sequence only (as for the other tables with ids)
GRANT SELECT, DELETE ON mop.segment_events TO PUBLIC;
GRANT INSERT (run_id, segment, event, worker, model_id, partition, detail) ON mop.segment_events TO PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('mop.segment_events', '');
SELECT pg_catalog.pg_extension_config_dump(pg_catalog.pg_get_serial_sequence('mop.segment_events', 'id'), '');

CREATE VIEW mop.segments WITH (security_invoker = true) AS
	SELECT d.name AS dataset, s.segment,
		   pg_catalog.array_agg(s.partition ORDER BY s.partition) AS partitions,
		   pg_catalog.sum(s.buffers)::bigint AS buffers,
		   pg_catalog.sum(s.bytes)::bigint AS bytes,
		   pg_catalog.min(s.remote_name) AS remote_name
	  FROM mop.dataset_segments s JOIN mop.datasets d ON d.id OPERATOR(pg_catalog.=) s.dataset_id
	 GROUP BY d.name, s.segment;
COMMENT ON VIEW mop.segments IS 'each dataset''s segments: the partitions each holds and their size';
GRANT SELECT ON mop.segments TO PUBLIC;

-- mop_prepare places the partitions on segments (segments => ..., replicas => ...)
DROP FUNCTION @extschema@.mop_prepare(regclass, text, text[], text, int, float8, int, boolean, int, int[], text);
CREATE FUNCTION @extschema@.mop_prepare(
	source regclass,
	target text,
	features text[] DEFAULT NULL,
	dataset text DEFAULT NULL,
	partitions int DEFAULT NULL,
	validation float8 DEFAULT 0.1,
	buffer_rows int DEFAULT 2048,
	standardize boolean DEFAULT true,
	seed int DEFAULT 0,
	shape int[] DEFAULT NULL,
	target_kind text DEFAULT 'auto',
	segments text[] DEFAULT NULL,
	replicas int DEFAULT 1,
	source_on_segments boolean DEFAULT false,
	OUT dataset_id bigint,
	OUT dataset_name text,
	OUT train_rows bigint,
	OUT valid_rows bigint,
	OUT partitions_used int,
	OUT buffers int,
	OUT n_features int,
	OUT classes int)
	RETURNS record
	AS 'MODULE_PATHNAME', 'mop_prepare'
	LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_prepare(regclass, text, text[], text, int, float8, int, boolean, int, int[], text, text[], int, boolean)
	IS 'pack a table or view into training and validation buffers; segments => other servers to hold copies of the training partitions (source_on_segments => each packs its own rows of the table)';

-- the two steps a segment runs for mop_prepare(..., source_on_segments => true),
-- in one transaction: read its rows of the table (as the calling role), then
-- pack them into its copy of the dataset with the merged statistics
CREATE FUNCTION mop.shard_stats(source regclass, target text, features text[],
		target_kind text, validation float8, shuffle_seed bigint,
		OUT rows bigint, OUT train_rows bigint, OUT valid_rows bigint, OUT n_features int,
		OUT target_type text, OUT features text[], OUT is_array boolean, OUT labels text[],
		OUT mean float8[], OUT m2 float8[],
		OUT cat_columns text[], OUT cat_values text[], OUT cat_counts bigint[])
	RETURNS record
	AS 'MODULE_PATHNAME', 'mop_shard_stats'
	LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION mop.shard_stats(regclass, text, text[], text, float8, bigint)
	IS 'a sharded mop_prepare on a segment: read this server''s rows of the table and return their statistics (kept for mop.shard_pack in the same transaction)';
CREATE FUNCTION mop.shard_pack(dataset_id bigint, first_partition int, partitions int,
		categories text DEFAULT NULL)
	RETURNS int
	AS 'MODULE_PATHNAME', 'mop_shard_pack_sql'
	LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION mop.shard_pack(bigint, int, int, text)
	IS 'a sharded mop_prepare on a segment: pack the rows mop.shard_stats read into the dataset''s partitions (categorical columns one-hot over the vocabularies given, as JSON)';

CREATE FUNCTION @extschema@.mop_place(dataset text, segments text[], replicas int DEFAULT 1)
	RETURNS TABLE (segment text, partitions int[], buffers bigint, bytes bigint)
	AS 'MODULE_PATHNAME', 'mop_place'
	LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_place(text, text[], int)
	IS 'place a dataset''s training partitions on segments (''local'' and foreign servers of postgres_fdw), replicas copies of each on distinct segments';

CREATE FUNCTION @extschema@.mop_add_segment(dataset text, segment text, partitions int[] DEFAULT NULL)
	RETURNS TABLE (segment text, partitions int[], buffers bigint, bytes bigint)
	AS 'MODULE_PATHNAME', 'mop_add_segment'
	LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_add_segment(text, text, int[])
	IS 'copy partitions (NULL: all) of a dataset to one more segment; running runs use it within seconds';

CREATE FUNCTION @extschema@.mop_remove_segment(dataset text, segment text)
	RETURNS int
	AS 'MODULE_PATHNAME', 'mop_remove_segment'
	LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_remove_segment(text, text)
	IS 'take a segment out of a dataset''s placement (refused if it holds a partition''s only copy); running runs stop using it within seconds';

-- 18. categorical features: text, enum and boolean columns one-hot encoded ------
-- (mop_prepare(..., max_categories => 32); the vocabularies are stored with
-- the dataset; mop_predict and mop_predict_proba take a row's raw values as
-- text[]; mop_confusion_matrix passes them)

ALTER TABLE mop.datasets ADD COLUMN categories jsonb;
COMMENT ON COLUMN mop.datasets.categories
	IS 'one-hot vocabulary of each categorical feature column: {"column": {"type", "values" (null: the NULL category), "counts" (training rows), "other" (training rows in the other input, null: none)}}; NULL: no categorical column';
COMMENT ON COLUMN mop.datasets.n_features
	IS 'model inputs per row: 1 per numeric column, the vocabulary''s width per categorical column, or the array''s length';
GRANT INSERT (categories), UPDATE (categories) ON mop.datasets TO PUBLIC;

DROP FUNCTION @extschema@.mop_prepare(regclass, text, text[], text, int, float8, int, boolean, int, int[], text, text[], int, boolean);
CREATE FUNCTION @extschema@.mop_prepare(
	source regclass,
	target text,
	features text[] DEFAULT NULL,
	dataset text DEFAULT NULL,
	partitions int DEFAULT NULL,
	validation float8 DEFAULT 0.1,
	buffer_rows int DEFAULT 2048,
	standardize boolean DEFAULT true,
	seed int DEFAULT 0,
	shape int[] DEFAULT NULL,
	target_kind text DEFAULT 'auto',
	segments text[] DEFAULT NULL,
	replicas int DEFAULT 1,
	source_on_segments boolean DEFAULT false,
	max_categories int DEFAULT 32,
	OUT dataset_id bigint,
	OUT dataset_name text,
	OUT train_rows bigint,
	OUT valid_rows bigint,
	OUT partitions_used int,
	OUT buffers int,
	OUT n_features int,
	OUT classes int)
	RETURNS record
	AS 'MODULE_PATHNAME', 'mop_prepare'
	LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_prepare(regclass, text, text[], text, int, float8, int, boolean, int, int[], text, text[], int, boolean, int)
	IS 'pack a table or view into training and validation buffers (text, enum and boolean features one-hot, at most max_categories inputs each); segments => other servers to hold copies of the training partitions (source_on_segments => each packs its own rows of the table)';

CREATE FUNCTION @extschema@.mop_predict(model_id bigint, features text[])
	RETURNS text
	AS 'MODULE_PATHNAME', 'mop_predict'
	LANGUAGE C STRICT STABLE PARALLEL RESTRICTED
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_predict(bigint, text[])
	IS 'predicted label or value of a model''s best checkpoint from a row''s raw values as text (categorical ones included)';

CREATE FUNCTION @extschema@.mop_predict(model_id bigint, features text[], checkpoint text)
	RETURNS text
	AS 'MODULE_PATHNAME', 'mop_predict'
	LANGUAGE C STRICT STABLE PARALLEL RESTRICTED
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_predict(bigint, text[], text)
	IS 'predicted label or value of the ''best'' or ''last'' checkpoint from a row''s raw values as text';

CREATE FUNCTION @extschema@.mop_predict(model_id bigint, features text[], as_type anyelement)
	RETURNS anyelement
	AS 'MODULE_PATHNAME', 'mop_predict_typed'
	LANGUAGE C CALLED ON NULL INPUT STABLE PARALLEL RESTRICTED
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_predict(bigint, text[], anyelement)
	IS 'prediction (best checkpoint) from raw values as text, in the type of the third argument';

CREATE FUNCTION @extschema@.mop_predict(model_id bigint, features text[], as_type anyelement,
	checkpoint text)
	RETURNS anyelement
	AS 'MODULE_PATHNAME', 'mop_predict_typed'
	LANGUAGE C CALLED ON NULL INPUT STABLE PARALLEL RESTRICTED
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_predict(bigint, text[], anyelement, text)
	IS 'prediction from raw values as text in the type of the third argument, from the ''best'' or ''last'' checkpoint';

CREATE FUNCTION @extschema@.mop_predict_proba(model_id bigint, features text[])
	RETURNS float8[]
	AS 'MODULE_PATHNAME', 'mop_predict_proba'
	LANGUAGE C STRICT STABLE PARALLEL RESTRICTED
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_predict_proba(bigint, text[])
	IS 'class probabilities in label order (or the value) of a model''s best checkpoint from raw values as text';

CREATE FUNCTION @extschema@.mop_predict_proba(model_id bigint, features text[], checkpoint text)
	RETURNS float8[]
	AS 'MODULE_PATHNAME', 'mop_predict_proba'
	LANGUAGE C STRICT STABLE PARALLEL RESTRICTED
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_predict_proba(bigint, text[], text)
	IS 'class probabilities (or the value) of the ''best'' or ''last'' checkpoint from raw values as text';

CREATE OR REPLACE FUNCTION @extschema@.mop_confusion_matrix(model_id bigint, source regclass,
	checkpoint text DEFAULT 'best')
	RETURNS TABLE (actual text, predicted text, rows bigint)
	LANGUAGE plpgsql STABLE
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	d mop.datasets;
	labels text[];
	feats text;
	bad text;
BEGIN
	SELECT ds.* INTO d FROM mop.models m JOIN mop.datasets ds ON ds.id OPERATOR(pg_catalog.=) m.dataset_id
	 WHERE m.id OPERATOR(pg_catalog.=) mop_confusion_matrix.model_id;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'model % does not exist', mop_confusion_matrix.model_id
			USING ERRCODE = 'undefined_object', HINT = 'Models you may see are listed in mop.models.';
	END IF;
	IF d.target_kind OPERATOR(pg_catalog.=) 'regression' THEN
		RAISE EXCEPTION 'model % predicts a number, not a class', mop_confusion_matrix.model_id
			USING ERRCODE = 'invalid_parameter_value',
			      HINT = 'A confusion matrix needs a class or binary target; mop_evaluate gives the error of a regression model.';
	END IF;
	IF checkpoint IS NULL THEN
		RAISE EXCEPTION 'checkpoint must not be NULL'
			USING ERRCODE = 'null_value_not_allowed',
			      HINT = 'Use ''best'' (the checkpoint of the model''s best epoch, the default) or ''last'' (its latest).';
	END IF;
	labels := ARRAY(SELECT l.v FROM pg_catalog.jsonb_array_elements_text(d.labels) WITH ORDINALITY l(v, i) ORDER BY l.i);
	IF d.feature_kind OPERATOR(pg_catalog.=) 'array' THEN
		-- flattened row-major, as mop_prepare reads an image of any dimensions
		feats := format('ARRAY(SELECT pg_catalog.unnest(%I))::float8[]', d.features[1]);
		EXECUTE format('SELECT 1 FROM %s WHERE %I IS NULL LIMIT 1', source, d.features[1]) INTO bad;
		IF bad IS NOT NULL THEN
			RAISE EXCEPTION 'column % of % has a NULL', d.features[1], source
				USING ERRCODE = 'null_value_not_allowed', HINT = 'mop predicts from complete rows only.';
		END IF;
	ELSIF d.categories IS NOT NULL THEN
		-- the raw values, as mop_predict(bigint, text[]) takes them
		feats := format('ARRAY[%s]::text[]',
		                (SELECT string_agg(format('%I::text', f.name), ', ' ORDER BY f.i)
		                   FROM pg_catalog.unnest(d.features) WITH ORDINALITY f(name, i)));
	ELSE
		feats := format('ARRAY[%s]::float8[]',
		                (SELECT string_agg(format('%I', f.name), ', ' ORDER BY f.i)
		                   FROM pg_catalog.unnest(d.features) WITH ORDINALITY f(name, i)));
	END IF;
	-- every row's label must be one the model knows
	EXECUTE format('SELECT coalesce(%1$I::text, ''NULL'') FROM %2$s
	                 WHERE %1$I IS NULL OR %1$I::text OPERATOR(pg_catalog.<>) ALL ($1) LIMIT 1',
	               d.target, source)
	   INTO bad USING labels;
	IF bad IS NOT NULL THEN
		RAISE EXCEPTION 'label % in column % of % is not a label of dataset "%"', bad, d.target, source, d.name
			USING ERRCODE = 'invalid_parameter_value',
			      HINT = format('The dataset''s labels are %s.', d.labels::text);
	END IF;
	RETURN QUERY EXECUTE format(
		'WITH p AS (SELECT %1$I::text AS actual, @extschema@.mop_predict($1, %2$s, $2) AS predicted FROM %3$s),
		      c AS (SELECT p.actual, p.predicted, pg_catalog.count(*) AS n FROM p GROUP BY 1, 2),
		      l AS (SELECT x.label, x.i FROM pg_catalog.unnest($3) WITH ORDINALITY x(label, i))
		 SELECT a.label, b.label, coalesce(c.n, 0)
		   FROM l a CROSS JOIN l b
		   LEFT JOIN c ON c.actual OPERATOR(pg_catalog.=) a.label AND c.predicted OPERATOR(pg_catalog.=) b.label
		  ORDER BY a.i, b.i',
		d.target, feats, source)
		USING mop_confusion_matrix.model_id, checkpoint, labels;
END
$$;
COMMENT ON FUNCTION @extschema@.mop_confusion_matrix(bigint, regclass, text)
	IS 'rows of a table by true and predicted label (every pair of the dataset''s labels, zeros included)';

-- 19. budgets and names: time_budget => and max_trials => on the search ---------
-- functions, a run's name and tags, and its note
-- A run may have a name (unique among its owner's runs; mop_resume, mop_wait
-- and mop_cancel take it instead of the id) and tags (a JSON object).  A run
-- with a time_budget stops starting sub-epochs once it has trained that long
-- (time_used, over all its starts) and ends 'done' with a note saying so.

ALTER TABLE mop.runs ADD COLUMN name text
	CHECK (name OPERATOR(pg_catalog.<>) '' AND name OPERATOR(pg_catalog.!~) '^[0-9]+$');
ALTER TABLE mop.runs ADD COLUMN tags jsonb
	CHECK (pg_catalog.jsonb_typeof(tags) OPERATOR(pg_catalog.=) 'object');
ALTER TABLE mop.runs ADD COLUMN note text;
ALTER TABLE mop.runs ADD COLUMN time_used interval;
CREATE UNIQUE INDEX runs_owner_name_key ON mop.runs (owner, name) WHERE name IS NOT NULL;
COMMENT ON COLUMN mop.runs.name IS 'the run''s name, unique among its owner''s runs (mop_resume, mop_wait and mop_cancel take it instead of the id)';
COMMENT ON COLUMN mop.runs.tags IS 'free-form labels of the run, a JSON object';
COMMENT ON COLUMN mop.runs.note IS 'why a run ended as it did when that is not plain (e.g. its time budget was spent)';
COMMENT ON COLUMN mop.runs.time_used IS 'how long the run has trained, over all its starts (what time_budget counts)';
GRANT INSERT (name, tags, note, time_used), UPDATE (name, tags, note, time_used)
	ON mop.runs TO PUBLIC;

DROP FUNCTION @extschema@.mop_grid_search(text, jsonb, int, int, int, boolean, text, boolean, text, bigint, text, text);
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
	device text DEFAULT NULL,
	metric text DEFAULT NULL,
	time_budget interval DEFAULT NULL,
	max_trials int DEFAULT NULL,
	name text DEFAULT NULL,
	tags jsonb DEFAULT NULL)
	RETURNS SETOF mop.search_result
	AS 'MODULE_PATHNAME', 'mop_grid_search'
	LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_grid_search(text, jsonb, int, int, int, boolean, text, boolean, text, bigint, text, text, interval, int, text, jsonb)
	IS 'train every configuration of a grid with model hopper parallelism; ranked results; metric => the configurations'' metric; time_budget, max_trials (the first N of the grid), name, tags';

DROP FUNCTION @extschema@.mop_random_search(text, jsonb, int, int, int, int, boolean, text, boolean, text, bigint, text, text);
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
	device text DEFAULT NULL,
	metric text DEFAULT NULL,
	time_budget interval DEFAULT NULL,
	max_trials int DEFAULT NULL,
	name text DEFAULT NULL,
	tags jsonb DEFAULT NULL)
	RETURNS SETOF mop.search_result
	AS 'MODULE_PATHNAME', 'mop_random_search'
	LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_random_search(text, jsonb, int, int, int, int, boolean, text, boolean, text, bigint, text, text, interval, int, text, jsonb)
	IS 'train configurations sampled from a search space with model hopper parallelism; metric => the configurations'' metric; time_budget, max_trials, name, tags';

DROP FUNCTION @extschema@.mop_hyperband(text, jsonb, int, int, int, int, text, boolean, boolean, text, text);
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
	device text DEFAULT NULL,
	metric text DEFAULT NULL,
	time_budget interval DEFAULT NULL,
	max_trials int DEFAULT NULL,
	name text DEFAULT NULL,
	tags jsonb DEFAULT NULL)
	RETURNS SETOF mop.search_result
	AS 'MODULE_PATHNAME', 'mop_hyperband'
	LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_hyperband(text, jsonb, int, int, int, int, text, boolean, boolean, text, text, interval, int, text, jsonb)
	IS 'Hyperband on model hopper parallelism: successive halving brackets, promoted models resume from their checkpoints; metric => the configurations'' metric; time_budget, max_trials (whole brackets), name, tags';

DROP FUNCTION @extschema@.mop_asha(text, jsonb, int, int, int, int, int, int, text, boolean, text, text);
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
	device text DEFAULT NULL,
	metric text DEFAULT NULL,
	time_budget interval DEFAULT NULL,
	name text DEFAULT NULL,
	tags jsonb DEFAULT NULL)
	RETURNS SETOF mop.search_result
	AS 'MODULE_PATHNAME', 'mop_asha'
	LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_asha(text, jsonb, int, int, int, int, int, int, text, boolean, text, text, interval, text, jsonb)
	IS 'asynchronous successive halving (ASHA) on model hopper parallelism: promotions without barriers; metric => the configurations'' metric; time_budget, name, tags';

DROP FUNCTION @extschema@.mop_pbt(text, jsonb, int, int, int, float8, float8, int, int, boolean, boolean, text, text);
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
	device text DEFAULT NULL,
	metric text DEFAULT NULL,
	time_budget interval DEFAULT NULL,
	max_trials int DEFAULT NULL,
	name text DEFAULT NULL,
	tags jsonb DEFAULT NULL)
	RETURNS SETOF mop.search_result
	AS 'MODULE_PATHNAME', 'mop_pbt_sql'
	LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_pbt(text, jsonb, int, int, int, float8, float8, int, int, boolean, boolean, text, text, interval, int, text, jsonb)
	IS 'population based training on model hopper parallelism: exploit copies weights and optimizer state, explore perturbs hyperparameters; metric => the configurations'' metric; time_budget, max_trials (caps the population), name, tags';

DROP FUNCTION @extschema@.mop_tpe(text, jsonb, int, int, int, float8, int, int, boolean, boolean, text, text, text);
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
	device text DEFAULT NULL,
	metric text DEFAULT NULL,
	time_budget interval DEFAULT NULL,
	max_trials int DEFAULT NULL,
	name text DEFAULT NULL,
	tags jsonb DEFAULT NULL)
	RETURNS SETOF mop.search_result
	AS 'MODULE_PATHNAME', 'mop_tpe_sql'
	LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_tpe(text, jsonb, int, int, int, float8, int, int, boolean, boolean, text, text, text, interval, int, text, jsonb)
	IS 'Tree-structured Parzen Estimator on model hopper parallelism: proposals from completed results whenever a worker would idle; metric => the configurations'' metric; time_budget, max_trials, name, tags';

-- a run by its name: the same functions taking text (an unknown-typed literal
-- such as mop_wait('nightly') resolves to these, a number to the bigint ones)
CREATE FUNCTION @extschema@.mop_resume(name text, workers int DEFAULT NULL,
	wait boolean DEFAULT true, add jsonb DEFAULT NULL, device text DEFAULT NULL)
	RETURNS SETOF mop.search_result
	AS 'MODULE_PATHNAME', 'mop_resume_by_name'
	LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_resume(text, int, boolean, jsonb, text)
	IS 'mop_resume of the caller''s run with this name';

CREATE FUNCTION @extschema@.mop_wait(name text) RETURNS text
	AS 'MODULE_PATHNAME', 'mop_wait_by_name'
	LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_wait(text) IS 'wait until the caller''s run with this name ends; returns its status';

CREATE FUNCTION @extschema@.mop_cancel(name text) RETURNS text
	AS 'MODULE_PATHNAME', 'mop_cancel_by_name'
	LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_cancel(text)
	IS 'mop_cancel of the caller''s run with this name';

-- 20. mop_set_workers: a running run's workers, changed at sub-epoch ---------
-- boundaries; mop.progress shows each worker's segment, mop.run_progress the
-- workers serving a run and its segments down

CREATE FUNCTION @extschema@.mop_set_workers(run_id bigint, workers int)
	RETURNS int
	AS 'MODULE_PATHNAME', 'mop_set_workers'
	LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_set_workers(bigint, int)
	IS 'set the workers of a running run (over local data: its workers; over segments: the workers of each segment), from its next sub-epoch boundaries on';

ALTER TABLE mop.segment_events DROP CONSTRAINT segment_events_event_check;
ALTER TABLE mop.segment_events ADD CONSTRAINT segment_events_event_check
	CHECK (event IN ('down', 'up', 'requeued', 'waiting', 'gave_up', 'joined', 'left', 'workers'));
COMMENT ON TABLE mop.segment_events IS 'segments of a run going down and coming back, sub-epochs run again elsewhere, waits for a partition''s only copy, and the run''s workers changed by mop_set_workers (segment ''local'' for a run over local data)';

DROP VIEW mop.progress;
DROP FUNCTION mop.progress_rows();
CREATE FUNCTION mop.progress_rows()
	RETURNS TABLE (run_id bigint, worker int, pid int, state text, model_id bigint, epoch int,
				   partition int, rows_done bigint, rows_total bigint, started_at timestamptz,
				   progress_at timestamptz, segment text, segment_state text)
	AS 'MODULE_PATHNAME', 'mop_progress_v2'
	LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION mop.progress_rows() IS 'the rows of mop.progress';
CREATE VIEW mop.progress WITH (security_invoker = true) AS
	SELECT * FROM mop.progress_rows();
COMMENT ON VIEW mop.progress IS 'what each worker of each running run is doing now: starting, idle, loading, training, validating, committing, reporting, exiting; its task while busy, when it last made progress (a minibatch trained or evaluated, a step), and over segments the worker''s segment and whether it is up (in the spirit of pg_stat_progress_*)';
GRANT SELECT ON mop.progress TO PUBLIC;

DROP VIEW mop.run_progress;
DROP FUNCTION mop.run_progress_rows();
CREATE FUNCTION mop.run_progress_rows()
	RETURNS TABLE (run_id bigint, phase text, sub_epochs_done bigint, sub_epochs_planned bigint,
				   models_finished int, models int, best_valid_metric float8, elapsed interval,
				   eta interval, workers_busy int, workers int, workers_asked int,
				   segments_down text[])
	AS 'MODULE_PATHNAME', 'mop_run_progress'
	LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION mop.run_progress_rows() IS 'the rows of mop.run_progress';
CREATE VIEW mop.run_progress WITH (security_invoker = true) AS
	SELECT * FROM mop.run_progress_rows();
COMMENT ON VIEW mop.run_progress IS 'one row per running run: sub-epochs done of those planned so far, models finished, best validation metric so far, elapsed, estimated time left, busy workers, workers serving it and those mop_set_workers asked for, its segments down';
GRANT SELECT ON mop.run_progress TO PUBLIC;

-- 21. the planner in text: mop_explain_text, as EXPLAIN writes a plan ----------

CREATE FUNCTION @extschema@.mop_explain_text(dataset text, space jsonb, epochs int DEFAULT 10,
	max_workers int DEFAULT NULL)
	RETURNS SETOF text
	AS 'MODULE_PATHNAME', 'mop_explain_text'
	LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_explain_text(text, jsonb, int, int)
	IS 'what a grid search would cost, as EXPLAIN writes a plan: the totals, each configuration (the 10 most expensive of many), the predicted makespan for 1..max_workers workers with the knee, and warnings; nothing is trained';

-- 22. the planner's hop cost and its profile cache: mop_explain's hop_s ----------
-- (a sub-epoch's cost besides its training: the mop.plan_* settings), and
-- mop.profiles, the profiles it measured, so that a second plan of a
-- dataset measures nothing

CREATE TABLE mop.profiles (
	dataset_id		bigint NOT NULL REFERENCES mop.datasets (id) ON DELETE CASCADE,
	spec_key		text NOT NULL,
	engine_version	text NOT NULL,
	batch_size		int NOT NULL CHECK (batch_size OPERATOR(pg_catalog.>) 0),
	step_ms			float8 NOT NULL CHECK (step_ms OPERATOR(pg_catalog.>) 0),
	rows_per_s		float8 NOT NULL CHECK (rows_per_s OPERATOR(pg_catalog.>) 0),
	eval_rows_per_s	float8 NOT NULL CHECK (eval_rows_per_s OPERATOR(pg_catalog.>) 0),
	measured_at		timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
	PRIMARY KEY (dataset_id, spec_key)
);
COMMENT ON TABLE mop.profiles IS 'the speed of a model on a dataset as the planner (mop_explain and the other mop_explain* functions) measured it, kept so that it is measured once; a row of another engine_version is measured again; a row goes with its dataset';
COMMENT ON COLUMN mop.profiles.spec_key IS 'the model, optimizer and batch size (not the learning rate, regularisation or seed), hashed';
COMMENT ON COLUMN mop.profiles.engine_version IS 'the library, its state format and its BLAS with threads';
ALTER TABLE mop.profiles ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_profiles ON mop.profiles
	USING (EXISTS (SELECT 1 FROM mop.datasets d
				   WHERE d.id OPERATOR(pg_catalog.=) profiles.dataset_id
					 AND d.owner OPERATOR(pg_catalog.=) CURRENT_USER))
	WITH CHECK (EXISTS (SELECT 1 FROM mop.datasets d
						WHERE d.id OPERATOR(pg_catalog.=) profiles.dataset_id
						  AND d.owner OPERATOR(pg_catalog.=) CURRENT_USER));
GRANT SELECT, INSERT, UPDATE, DELETE ON mop.profiles TO PUBLIC;

DROP FUNCTION @extschema@.mop_explain(text, jsonb, int);
CREATE FUNCTION @extschema@.mop_explain(dataset text, space jsonb, epochs int DEFAULT 10,
	OUT config_no int, OUT config jsonb, OUT model_bytes bigint, OUT working_bytes bigint,
	OUT fits boolean, OUT step_ms float8, OUT rows_per_s float8, OUT hop_s float8,
	OUT sub_epoch_s float8, OUT epoch_s float8, OUT total_s float8)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'mop_explain'
	LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_explain(text, jsonb, int)
	IS 'each configuration of a grid: its memory, and its speed profiled on the dataset (step, rows/s, a hop''s own cost, sub-epoch, epoch and total seconds); nothing is trained';

-- 23. workers => 'auto': the search functions take an integer or 'auto' ------
-- (the planner's knee, capped; a NOTICE says why).  The argument is
-- declared "any" so that workers => 2 and workers => 'auto' both resolve
-- without casts; the functions are dropped and created again with the same
-- arguments otherwise.
DROP FUNCTION @extschema@.mop_grid_search(text, jsonb, int, int, int, boolean, text, boolean, text, bigint, text, text, interval, int, text, jsonb);
CREATE FUNCTION @extschema@.mop_grid_search(
	dataset text,
	space jsonb,
	epochs int DEFAULT 10,
	workers "any" DEFAULT NULL,
	seed int DEFAULT 0,
	deterministic boolean DEFAULT false,
	scheduler text DEFAULT NULL,
	wait boolean DEFAULT true,
	early_stopping text DEFAULT NULL,
	warm_start bigint DEFAULT NULL,
	device text DEFAULT NULL,
	metric text DEFAULT NULL,
	time_budget interval DEFAULT NULL,
	max_trials int DEFAULT NULL,
	name text DEFAULT NULL,
	tags jsonb DEFAULT NULL)
	RETURNS SETOF mop.search_result
	AS 'MODULE_PATHNAME', 'mop_grid_search'
	LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_grid_search(text, jsonb, int, "any", int, boolean, text, boolean, text, bigint, text, text, interval, int, text, jsonb)
	IS 'train every configuration of a grid with model hopper parallelism; ranked results; metric => the configurations'' metric; time_budget, max_trials (the first N of the grid), name, tags; workers => ''auto'' chooses them from the plan';

DROP FUNCTION @extschema@.mop_random_search(text, jsonb, int, int, int, int, boolean, text, boolean, text, bigint, text, text, interval, int, text, jsonb);
CREATE FUNCTION @extschema@.mop_random_search(
	dataset text,
	space jsonb,
	trials int,
	epochs int DEFAULT 10,
	workers "any" DEFAULT NULL,
	seed int DEFAULT 0,
	deterministic boolean DEFAULT false,
	scheduler text DEFAULT NULL,
	wait boolean DEFAULT true,
	early_stopping text DEFAULT NULL,
	warm_start bigint DEFAULT NULL,
	device text DEFAULT NULL,
	metric text DEFAULT NULL,
	time_budget interval DEFAULT NULL,
	max_trials int DEFAULT NULL,
	name text DEFAULT NULL,
	tags jsonb DEFAULT NULL)
	RETURNS SETOF mop.search_result
	AS 'MODULE_PATHNAME', 'mop_random_search'
	LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_random_search(text, jsonb, int, int, "any", int, boolean, text, boolean, text, bigint, text, text, interval, int, text, jsonb)
	IS 'train configurations sampled from a search space with model hopper parallelism; metric => the configurations'' metric; time_budget, max_trials, name, tags; workers => ''auto'' chooses them from the plan';

DROP FUNCTION @extschema@.mop_hyperband(text, jsonb, int, int, int, int, text, boolean, boolean, text, text, interval, int, text, jsonb);
CREATE FUNCTION @extschema@.mop_hyperband(
	dataset text,
	space jsonb,
	max_resource int,
	eta int DEFAULT 3,
	workers "any" DEFAULT NULL,
	seed int DEFAULT 0,
	scheduler text DEFAULT NULL,
	wait boolean DEFAULT true,
	deterministic boolean DEFAULT false,
	device text DEFAULT NULL,
	metric text DEFAULT NULL,
	time_budget interval DEFAULT NULL,
	max_trials int DEFAULT NULL,
	name text DEFAULT NULL,
	tags jsonb DEFAULT NULL)
	RETURNS SETOF mop.search_result
	AS 'MODULE_PATHNAME', 'mop_hyperband'
	LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_hyperband(text, jsonb, int, int, "any", int, text, boolean, boolean, text, text, interval, int, text, jsonb)
	IS 'Hyperband on model hopper parallelism: successive halving brackets, promoted models resume from their checkpoints; metric => the configurations'' metric; time_budget, max_trials (whole brackets), name, tags; workers => ''auto'' chooses them from the plan';

DROP FUNCTION @extschema@.mop_asha(text, jsonb, int, int, int, int, int, int, text, boolean, text, text, interval, text, jsonb);
CREATE FUNCTION @extschema@.mop_asha(
	dataset text,
	space jsonb,
	max_resource int,
	eta int DEFAULT 3,
	min_resource int DEFAULT 1,
	max_trials int DEFAULT 20,
	workers "any" DEFAULT NULL,
	seed int DEFAULT 0,
	scheduler text DEFAULT NULL,
	wait boolean DEFAULT true,
	device text DEFAULT NULL,
	metric text DEFAULT NULL,
	time_budget interval DEFAULT NULL,
	name text DEFAULT NULL,
	tags jsonb DEFAULT NULL)
	RETURNS SETOF mop.search_result
	AS 'MODULE_PATHNAME', 'mop_asha'
	LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_asha(text, jsonb, int, int, int, int, "any", int, text, boolean, text, text, interval, text, jsonb)
	IS 'asynchronous successive halving (ASHA) on model hopper parallelism: promotions without barriers; metric => the configurations'' metric; time_budget, name, tags; workers => ''auto'' chooses them from the plan';

DROP FUNCTION @extschema@.mop_pbt(text, jsonb, int, int, int, float8, float8, int, int, boolean, boolean, text, text, interval, int, text, jsonb);
CREATE FUNCTION @extschema@.mop_pbt(
	dataset text,
	space jsonb,
	population int DEFAULT 8,
	epochs int DEFAULT 10,
	"interval" int DEFAULT 1,
	quantile float8 DEFAULT 0.25,
	resample float8 DEFAULT 0.25,
	workers "any" DEFAULT NULL,
	seed int DEFAULT 0,
	wait boolean DEFAULT true,
	deterministic boolean DEFAULT false,
	device text DEFAULT NULL,
	metric text DEFAULT NULL,
	time_budget interval DEFAULT NULL,
	max_trials int DEFAULT NULL,
	name text DEFAULT NULL,
	tags jsonb DEFAULT NULL)
	RETURNS SETOF mop.search_result
	AS 'MODULE_PATHNAME', 'mop_pbt_sql'
	LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_pbt(text, jsonb, int, int, int, float8, float8, "any", int, boolean, boolean, text, text, interval, int, text, jsonb)
	IS 'population based training on model hopper parallelism: exploit copies weights and optimizer state, explore perturbs hyperparameters; metric => the configurations'' metric; time_budget, max_trials (caps the population), name, tags; workers => ''auto'' chooses them from the plan';

DROP FUNCTION @extschema@.mop_tpe(text, jsonb, int, int, int, float8, int, int, boolean, boolean, text, text, text, interval, int, text, jsonb);
CREATE FUNCTION @extschema@.mop_tpe(
	dataset text,
	space jsonb,
	trials int,
	epochs int DEFAULT 10,
	n_startup int DEFAULT 10,
	gamma float8 DEFAULT 0.1,
	workers "any" DEFAULT NULL,
	seed int DEFAULT 0,
	wait boolean DEFAULT true,
	deterministic boolean DEFAULT false,
	early_stopping text DEFAULT NULL,
	device text DEFAULT NULL,
	metric text DEFAULT NULL,
	time_budget interval DEFAULT NULL,
	max_trials int DEFAULT NULL,
	name text DEFAULT NULL,
	tags jsonb DEFAULT NULL)
	RETURNS SETOF mop.search_result
	AS 'MODULE_PATHNAME', 'mop_tpe_sql'
	LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_tpe(text, jsonb, int, int, int, float8, "any", int, boolean, boolean, text, text, text, interval, int, text, jsonb)
	IS 'Tree-structured Parzen Estimator on model hopper parallelism: proposals from completed results whenever a worker would idle; metric => the configurations'' metric; time_budget, max_trials, name, tags; workers => ''auto'' chooses them from the plan';

-- 24. Hyperband in seconds: mop_hyperband_plan's rows with the epochs each --------
-- round trains and their seconds from the profile

CREATE FUNCTION @extschema@.mop_explain_hyperband(dataset text, space jsonb, max_resource int,
	eta int DEFAULT 3,
	OUT bracket int, OUT round int, OUT configs int, OUT resource int, OUT epochs bigint,
	OUT seconds float8)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'mop_explain_hyperband'
	LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_explain_hyperband(text, jsonb, int, int)
	IS 'the Hyperband plan of a search on a dataset: each round''s configurations, the epochs it trains (promoted models resume) and their seconds on one worker at the profiled mean epoch of the space; nothing is trained';

-- 25. ASHA, random search, TPE and PBT in seconds: mop_explain_asha (the --------
-- rungs, expected and at most) and mop_explain_trials (trials drawn as the
-- search runs, at the mean epoch of the space, for 1..max_workers workers)

CREATE FUNCTION @extschema@.mop_explain_asha(dataset text, space jsonb, max_resource int,
	eta int DEFAULT 3, min_resource int DEFAULT 1, max_trials int DEFAULT 20,
	OUT rung int, OUT resource int, OUT configs int, OUT epochs bigint, OUT seconds float8,
	OUT configs_max int, OUT epochs_max bigint, OUT seconds_max float8)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'mop_explain_asha'
	LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_explain_asha(text, jsonb, int, int, int, int)
	IS 'the rungs of an ASHA search on a dataset: the configurations each rung trains and the epochs it adds when every rung promotes 1/eta, and at most, with their seconds on one worker at the profiled mean epoch of the space; nothing is trained';

CREATE FUNCTION @extschema@.mop_explain_trials(dataset text, space jsonb, trials int,
	epochs int DEFAULT 10, max_workers int DEFAULT NULL,
	OUT workers int, OUT makespan_s float8, OUT lower_bound_s float8, OUT speedup float8,
	OUT efficiency float8, OUT knee boolean)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'mop_explain_trials'
	LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.mop_explain_trials(text, jsonb, int, int, int)
	IS 'the predicted makespan of a search of trials configurations drawn as it runs (random search, TPE, PBT''s population) for 1..max_workers workers, every trial at the profiled mean epoch of the space; nothing is trained';

-- the server's cache of detoasted buffers, shared by every backend and worker
CREATE FUNCTION mop.shared_buffer_cache(OUT size_mb int, OUT entries int, OUT bytes bigint,
	OUT pinned int, OUT hits bigint, OUT loads bigint, OUT refused bigint, OUT evicted bigint,
	OUT stale bigint)
	RETURNS record
	AS 'MODULE_PATHNAME', 'mop_shared_buffer_cache'
	LANGUAGE C STRICT VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION mop.shared_buffer_cache()
	IS 'the server''s cache of detoasted buffers shared by every backend and worker (mop.shared_buffer_cache_mb; NULL counts when mop is not in shared_preload_libraries): entries, bytes, entries in use, uses, loads, buffers refused for want of room, entries evicted, entries dropped as stale';
COMMENT ON FUNCTION mop.buffer_cache_reset()
	IS 'empty this backend''s cache of detoasted buffers (see mop.buffer_cache_mb) and let go of the server''s (mop.shared_buffer_cache_mb); returns the bytes released';
