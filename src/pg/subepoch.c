/*
 * subepoch.c -- one sub-epoch of one model (interface: subepoch.h).
 *
 * In order, inside the caller's transaction and SPI connection:
 *   1. the checkpoint: mop.models.state read without a lock (or the state
 *      the caller carries);
 *   2. SELECT mop.train_agg(state, x, y) over the partition's training
 *      buffers in buffer order (MOP_TRAIN_SQL), the caller's progress
 *      callback installed for the query;
 *   3. at the end of an epoch, unless the loss is NaN or infinite:
 *      mop.eval_agg over the validation split (MOP_EVAL_SQL), the progress
 *      callback installed for that query too -- still before any row lock,
 *      so an executor that hangs while it validates blocks nobody;
 *   4. the rows of the dataset, the run and the model locked in the order
 *      of lockorder.h, the model's status read again;
 *   5. the mop.hops row;
 *   6. a NaN or infinite loss marks the model diverged (keeping its last
 *      finite checkpoint); otherwise the new checkpoint is stored, the one
 *      it replaces kept as best_state if that was the best (KEEP_BEST);
 *   7. at the end of an epoch, instead: the mop.epochs row, the new
 *      checkpoint and the model's best so far, in one UPDATE (EPOCH_SQL).
 * With a state handed over (handover.h; mop.checkpoint_every), step 1
 * takes it instead of the stored one, and the sub-epochs handed over with
 * it get their mop.hops rows in step 5; a sub-epoch allowed to hand over
 * (task->hand_over) that does not end an epoch hands its state on after
 * step 2 and writes nothing.
 * The progress callback hears of each step as the sub-epoch moves on to
 * it (validating, committing), so the executor shows progress in every
 * step; between step 4 and its caller's commit the sub-epoch holds its
 * model's row lock and reports nothing more.
 * Everything this file allocates lives in a memory context of its own,
 * deleted when the sub-epoch returns (and with the transaction on ERROR);
 * only a carried state outlives it, in the carry's context.
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "lockorder.h"
#include "mop.h"
#include "segment.h"
#include "subepoch.h"

/* The model's checkpoint, its dataset, its status and the partition's training rows. */
#define LOAD_SQL \
	"SELECT m.state, m.dataset_id, m.status, " \
	"(SELECT pg_catalog.sum(b.rows) FROM mop.buffers b WHERE b.dataset_id OPERATOR(pg_catalog.=) m.dataset_id " \
	" AND b.split OPERATOR(pg_catalog.=) 'train' AND b.partition OPERATOR(pg_catalog.=) $2)::bigint " \
	"FROM mop.models m WHERE m.id OPERATOR(pg_catalog.=) $1"

#define LOCK_MODEL_SQL \
	"SELECT status FROM mop.models WHERE id OPERATOR(pg_catalog.=) $1 FOR UPDATE"

/* Has this sub-epoch been committed (read after the model's row is locked)? */
#define HOP_COMMITTED_SQL \
	"SELECT 1 FROM mop.hops WHERE model_id OPERATOR(pg_catalog.=) $1 " \
	"AND epoch OPERATOR(pg_catalog.=) $2 AND partition OPERATOR(pg_catalog.=) $3"

/* an epoch's validation as recorded (mop_subepoch_recorded_validation) */
#define RECORDED_VALIDATION_SQL \
	"SELECT valid_loss, valid_metric FROM mop.epochs " \
	"WHERE model_id OPERATOR(pg_catalog.=) $1 AND epoch OPERATOR(pg_catalog.=) $2"

/* a sub-epoch's row: this one's, or one handed over before it (handover.h) */
#define HOP_SQL \
	"INSERT INTO mop.hops (run_id, model_id, epoch, partition, worker, started_at, " \
	"finished_at, rows, loss, metric) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"

#define SAVE_SQL \
	"UPDATE mop.models SET state = $2, updated_at = pg_catalog.clock_timestamp() " \
	"WHERE id OPERATOR(pg_catalog.=) $1"

/*
 * No state is written twice.  An epoch's end writes its state once, as the
 * latest; when the epoch is the model's best, best_state becomes NULL,
 * meaning "the latest" (no second copy).  The best is copied into
 * best_state only when a newer state is about to replace it: by the first
 * sub-epoch of the next epoch (KEEP_BEST, in the same UPDATE, so readers
 * see either the old pair or the new one), or, with one partition, by an
 * epoch's end that is not better (EPOCH_SQL_BEST_STATE).  "The latest is
 * the best" is checked as best_epoch = epochs_done and no other sub-epoch
 * of the next epoch committed yet ($3: this one's partition, whose
 * mop.hops row is already in): a state that an older library stored in
 * between (a 0.1 catalog stores no best) is never taken for the best.
 */
#define KEEP_BEST \
	"best_state = CASE WHEN m.best_state IS NULL AND " \
	"  m.best_epoch OPERATOR(pg_catalog.=) m.epochs_done AND NOT EXISTS (SELECT 1 FROM mop.hops h " \
	"  WHERE h.model_id OPERATOR(pg_catalog.=) m.id AND " \
	"  h.epoch OPERATOR(pg_catalog.=) (m.epochs_done OPERATOR(pg_catalog.+) 1) AND " \
	"  h.partition OPERATOR(pg_catalog.<>) $3) THEN m.state ELSE m.best_state END, "

#define SAVE_KEEP_BEST_SQL \
	"UPDATE mop.models m SET state = $2, " KEEP_BEST \
	"  updated_at = pg_catalog.clock_timestamp() WHERE m.id OPERATOR(pg_catalog.=) $1"

/* $3: the state to keep instead of the stored one (NULL: the stored one) */
#define DIVERGED_SQL \
	"UPDATE mop.models SET status = 'diverged', error = $2, state = COALESCE($3, state), " \
	"updated_at = pg_catalog.clock_timestamp() WHERE id OPERATOR(pg_catalog.=) $1"

/*
 * Record an epoch: training means from this epoch's hops, summed in
 * partition order so that the bits do not depend on the plan or on the
 * order the hops were written (or, when $7, the
 * caller's exact sums $8..$11), validation from the evaluation, and the
 * model's best so far: an epoch is better when its validation metric is
 * better in the metric's direction, or equal with a lower validation loss.
 * Without a carry the epoch's state ($12) becomes the latest checkpoint
 * here, and, when the epoch is better, the best one too (best_state NULL:
 * the latest; see KEEP_BEST); with a carry ($7) the caller keeps the state
 * and the best and writes them once at the end.  Returns whether the epoch
 * was better.
 */
#define EPOCH_SQL(best_state) \
	"WITH h AS (SELECT pg_catalog.sum(loss OPERATOR(pg_catalog.*) rows ORDER BY partition) " \
	"  OPERATOR(pg_catalog./) pg_catalog.sum(rows) AS tl, " \
	"  pg_catalog.sum(metric OPERATOR(pg_catalog.*) rows ORDER BY partition) OPERATOR(pg_catalog./) " \
	"  pg_catalog.sum(rows) FILTER (WHERE metric IS NOT NULL) AS tm, " \
	"  pg_catalog.sum(rows) AS tr, " \
	"  pg_catalog.sum(EXTRACT(epoch FROM finished_at OPERATOR(pg_catalog.-) started_at)) AS secs, " \
	"  pg_catalog.count(*) AS n " \
	"  FROM mop.hops WHERE model_id OPERATOR(pg_catalog.=) $1 AND epoch OPERATOR(pg_catalog.=) $2), " \
	"e AS (INSERT INTO mop.epochs (model_id, epoch, train_loss, train_metric, valid_loss, " \
	"  valid_metric, train_rows, valid_rows, seconds) " \
	"  SELECT $1, $2, CASE WHEN $7 THEN $8 ELSE h.tl END, CASE WHEN $7 THEN $9 ELSE h.tm END, " \
	"  $3, $4, CASE WHEN $7 THEN $10 ELSE h.tr END, $5, " \
	"  CASE WHEN $7 THEN $11 ELSE h.secs END FROM h), " \
	"b AS (SELECT ($4 IS NOT NULL AND (m.best_valid_metric IS NULL OR " \
	"    (m.higher_is_better AND $4 OPERATOR(pg_catalog.>) m.best_valid_metric) OR " \
	"    (NOT m.higher_is_better AND $4 OPERATOR(pg_catalog.<) m.best_valid_metric) OR " \
	"    ($4 OPERATOR(pg_catalog.=) m.best_valid_metric AND $3 OPERATOR(pg_catalog.<) m.best_valid_loss))) " \
	"  AS better FROM mop.models m WHERE m.id OPERATOR(pg_catalog.=) $1) " \
	"UPDATE mop.models m SET epochs_done = $2, " \
	"  state = CASE WHEN $7 THEN m.state ELSE $12 END, " \
	"  best_epoch = CASE WHEN b.better THEN $2 ELSE m.best_epoch END, " \
	"  best_valid_loss = CASE WHEN b.better THEN $3 ELSE m.best_valid_loss END, " \
	"  best_valid_metric = CASE WHEN b.better THEN $4 ELSE m.best_valid_metric END, " \
	best_state \
	"  status = CASE WHEN $6 THEN 'done' ELSE m.status END, " \
	"  updated_at = pg_catalog.clock_timestamp() " \
	"FROM b, h WHERE m.id OPERATOR(pg_catalog.=) $1 RETURNING b.better"

/*
 * With the 0.1 catalog (before ALTER EXTENSION mop UPDATE) there is none.
 * $13: the epoch's sub-epochs this transaction records (1, or more when
 * some were handed over): when they are all of the epoch's, the stored
 * state is the previous epoch's end, kept as the best if it was.
 */
#define EPOCH_SQL_BEST_STATE \
	"  best_state = CASE WHEN $7 THEN m.best_state WHEN b.better THEN NULL " \
	"    WHEN m.best_state IS NULL AND m.best_epoch OPERATOR(pg_catalog.=) m.epochs_done " \
	"      AND h.n OPERATOR(pg_catalog.=) $13 THEN m.state ELSE m.best_state END, "

/* What the waist returned for the sub-epoch. */
typedef struct Trained
{
	bytea	   *state;			/* NULL: the partition has no training buffers */
	double		loss_sum;
	double		metric_sum;
	int64		rows;
	bool		diverged;
} Trained;

/* Mean as a Datum; *null set when it is not finite (or rows is 0). */
static Datum
mean_datum(double sum, int64 rows, char *null)
{
	double		v = rows > 0 ? sum / (double) rows : NAN;

	*null = isfinite(v) ? ' ' : 'n';
	return Float8GetDatum(isfinite(v) ? v : 0.0);
}

/*
 * The statements of this file, each prepared once per backend as a generic
 * plan: a model's state goes in as a parameter, and a custom plan would copy
 * it into the plan as a constant (tens of megabytes for a large model, on
 * every sub-epoch).  Keyed by the address of the statement's text, which is
 * always one of the string literals above.  The plan cache re-plans a
 * statement when what it refers to changes (ALTER EXTENSION mop UPDATE,
 * another role's row-level security).
 */
#define N_PLANS 16
static struct
{
	const char *sql;
	SPIPlanPtr	plan;
}			plans[N_PLANS];

static SPIPlanPtr
prepared(const char *sql, int nargs, Oid *types)
{
	SPIPlanPtr	plan;
	int			i;

	for (i = 0; i < N_PLANS && plans[i].sql != NULL; i++)
		if (plans[i].sql == sql)
			return plans[i].plan;
	if (i == N_PLANS)
		elog(ERROR, "mop sub-epoch: more than %d statements to keep plans of", N_PLANS);
	plan = SPI_prepare_cursor(sql, nargs, types, CURSOR_OPT_GENERIC_PLAN);
	if (plan == NULL)
		elog(ERROR, "mop sub-epoch: could not prepare (%s): %s",
			 SPI_result_code_string(SPI_result), sql);
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "mop sub-epoch: could not keep the plan of: %s", sql);
	plans[i].sql = sql;
	plans[i].plan = plan;
	return plan;
}

/*
 * Run one of this file's statements or ERROR; leaves the current memory
 * context as it found it (SPI returns to its procedure context).
 */
static void
exec_sql(const char *sql, int nargs, Oid *types, Datum *vals, const char *nulls,
		 int expect)
{
	MemoryContext cxt = CurrentMemoryContext;
	int			rc = SPI_execute_plan(prepared(sql, nargs, types), vals, nulls, false, 0);

	MemoryContextSwitchTo(cxt);
	if (rc != expect)
		elog(ERROR, "mop sub-epoch: query failed (%s): %s", SPI_result_code_string(rc), sql);
}

/* Column i (1-based) of row 0 of the last SPI result. */
static Datum
col(int i, bool *isnull)
{
	return SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, i, isnull);
}

static void model_not_visible(int64 model_id) pg_attribute_noreturn();

/* The model's row is gone, or the executor's role may not see it. */
static void
model_not_visible(int64 model_id)
{
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_OBJECT),
			 errmsg("model %lld is not visible to the worker", (long long) model_id)));
}

/*
 * Read the model's checkpoint, its dataset and the partition's training
 * rows, without a lock, and its status.  Returns false if the model is not
 * training (stopped meanwhile, e.g. failed in an earlier attempt, or
 * finished by another process's commit of this very sub-epoch).
 */
static bool
load_checkpoint(const MopSubepochTask *task, bytea **state, int64 *dataset_id,
				int64 *rows_total, char **status)
{
	Oid			t[2] = {INT8OID, INT4OID};
	Datum		v[2] = {Int64GetDatum(task->model_id), Int32GetDatum(task->partition)};
	Datum		sd;
	bool		isnull;
	bool		training;

	exec_sql(LOAD_SQL, 2, t, v, NULL, SPI_OK_SELECT);
	if (SPI_processed != 1)
		model_not_visible(task->model_id);
	sd = col(1, &isnull);
	/* a NULL state (anyone who may write the row can set one) is no checkpoint */
	if (isnull && task->state_in == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("model %lld has no checkpoint", (long long) task->model_id),
				 errhint("Its state in mop.models is NULL; the model cannot continue.")));
	/* a state handed over is newer than the stored one, which is not read */
	*state = task->state_in != NULL ? task->state_in : DatumGetByteaPCopy(sd);
	*dataset_id = DatumGetInt64(col(2, &isnull));
	*status = TextDatumGetCString(col(3, &isnull));
	training = strcmp(*status, "training") == 0;
	*rows_total = DatumGetInt64(col(4, &isnull));
	if (isnull)
		*rows_total = 0;
	SPI_freetuptable(SPI_tuptable);
	return training;
}

/* The sub-epoch moves on to step: tell the caller's progress callback. */
static void
progress_step(const MopSubepochTask *task, MopTaskStep step)
{
	if (task->progress != NULL && task->progress->step != NULL)
		task->progress->step(task->progress->arg, step);
}

/*
 * A query of the narrow waist (train_agg or eval_agg), the caller's
 * progress callback installed for it and put back after it.
 */
static void
exec_waist(const MopSubepochTask *task, const char *sql, int nargs, Oid *types,
		   Datum *vals)
{
	const MopProgress *prev = mop_progress_install(task->progress);

	PG_TRY();
	{
		exec_sql(sql, nargs, types, vals, NULL, SPI_OK_SELECT);
	}
	PG_FINALLY();
	{
		(void) mop_progress_install(prev);
	}
	PG_END_TRY();
}

/*
 * A copy of state (or state itself, when writable) whose completed-epoch
 * counter is epochs: the counter is the position of the model's
 * learning-rate schedule (nn_lr_at), so it is set from the epoch the
 * scheduler assigns, whatever the state carried (a warm start, a PBT
 * parent's checkpoint, a blob written before the counter was kept).
 */
static bytea *
state_at_epoch(bytea *state, int32 epochs, bool writable)
{
	bytea	   *s;
	nn_error	err;
	nn_status	st;
	int64_t		has;

	/*
	 * most sub-epochs continue an epoch whose counter the state already
	 * holds: then neither a copy nor a new checksum (the waist verifies the
	 * blob in any case)
	 */
	if (!VARATT_IS_EXTENDED(state) &&
		nn_blob_epochs(VARDATA(state), VARSIZE(state) - VARHDRSZ, &has, &err) == NN_OK &&
		has == epochs)
		return state;
	s = writable ? state : (bytea *) pg_detoast_datum_copy((struct varlena *) state);
	st = nn_blob_set_epochs(VARDATA(s), VARSIZE(s) - VARHDRSZ, epochs, &err);
	if (st != NN_OK)
		mop_nn_error(st, &err, "invalid model state");
	return s;
}

/* One pass of the narrow waist over the partition's training buffers. */
static void
train_partition(const MopSubepochTask *task, bytea *state, int64 dataset_id,
				Trained *out)
{
	Oid			t[3] = {BYTEAOID, INT8OID, INT4OID};
	Datum		v[3] = {0, Int64GetDatum(dataset_id), Int32GetDatum(task->partition)};
	Datum		sd;
	bool		isnull;

	/* this epoch trains at the schedule's position task->epoch - 1 */
	v[0] = PointerGetDatum(state_at_epoch(state, task->epoch - 1, false));
	if (task->segment != NULL)
	{
		MopSegmentTrained st;

		mop_segment_train(task->segment, task->remote_dataset_id, task->partition,
						  DatumGetByteaPP(v[0]), task->segment_timeout_ms, task->progress, &st);
		memset(out, 0, sizeof(*out));
		if (st.state != NULL)
		{
			out->state = st.state;
			out->loss_sum = st.loss_sum;
			out->metric_sum = st.metric_sum;
			out->rows = st.rows;
			out->diverged = st.diverged;
			if (task->last_of_epoch && !out->diverged)
				out->state = state_at_epoch(out->state, task->epoch, true);
		}
		return;
	}
	exec_waist(task, MOP_TRAIN_SQL, 3, t, v);
	if (SPI_processed != 1)
		elog(ERROR, "mop sub-epoch: training query returned %d rows", (int) SPI_processed);
	memset(out, 0, sizeof(*out));
	sd = col(1, &isnull);
	if (!isnull)
	{
		out->state = DatumGetByteaPCopy(sd);
		out->loss_sum = DatumGetFloat8(col(2, &isnull));
		out->metric_sum = DatumGetFloat8(col(3, &isnull));
		out->rows = DatumGetInt64(col(4, &isnull));
		out->diverged = strcmp(TextDatumGetCString(col(5, &isnull)), "diverged") == 0 ||
			!isfinite(out->loss_sum);
		/* after an epoch's last sub-epoch the model has completed task->epoch */
		if (task->last_of_epoch && !out->diverged)
			out->state = state_at_epoch(out->state, task->epoch, true);
	}
	SPI_freetuptable(SPI_tuptable);
}

/* What lock_model found once it held the model's row. */
typedef enum Locked
{
	LOCKED_TRAINING,			/* the model trains: write the sub-epoch */
	LOCKED_STOPPED,				/* the model stopped training meanwhile */
	LOCKED_COMMITTED,			/* another process committed this sub-epoch meanwhile */
	LOCKED_GONE					/* the model's row is gone or not visible */
} Locked;

/*
 * Lock order (lockorder.h): the dataset's row and the run's (FOR KEY SHARE,
 * as the foreign keys of the writes that follow would take them, the
 * model's second update of an epoch included), then the model's (FOR
 * UPDATE), all only now that the training is done: a delete, which locks
 * in the same order, waits for these writes at most, and nothing waits for
 * a lock while holding one of a lower level.  Then, the model's row held,
 * whether it still trains, and whether this very sub-epoch was committed
 * meanwhile: by a process the coordinator gave up (mop.task_timeout) while
 * it committed, holding this row, and that finished its commit once it ran
 * again (each statement reads with a new snapshot: what committed while
 * this one waited for the row is seen).
 */
/*
 * The model's row FOR UPDATE, then whether it still trains and whether its
 * sub-epoch (epoch, partition) is committed already.
 */
/* Is the sub-epoch (epoch, partition) of the model in mop.hops? */
static bool
hop_committed(int64 model_id, int32 epoch, int32 partition)
{
	Oid			t[3] = {INT8OID, INT4OID, INT4OID};
	Datum		v[3] = {Int64GetDatum(model_id), Int32GetDatum(epoch), Int32GetDatum(partition)};
	bool		committed;

	exec_sql(HOP_COMMITTED_SQL, 3, t, v, NULL, SPI_OK_SELECT);
	committed = SPI_processed > 0;
	SPI_freetuptable(SPI_tuptable);
	return committed;
}

/*
 * Was the task's sub-epoch committed by another process, given the model's
 * status?  A model 'done' may have been finished by that very commit (its
 * last epoch); one stopped otherwise stops this task too.
 */
static bool
committed_meanwhile(int64 model_id, int32 epoch, int32 partition, const char *status)
{
	return (strcmp(status, "training") == 0 || strcmp(status, "done") == 0) &&
		hop_committed(model_id, epoch, partition);
}

static Locked
lock_model_row(int64 model_id, int32 epoch, int32 partition)
{
	Oid			t = INT8OID;
	Datum		v = Int64GetDatum(model_id);
	bool		isnull;
	char	   *status;

	exec_sql(LOCK_MODEL_SQL, 1, &t, &v, NULL, SPI_OK_SELECT);
	if (SPI_processed != 1)
		return LOCKED_GONE;
	status = TextDatumGetCString(col(1, &isnull));
	SPI_freetuptable(SPI_tuptable);
	if (committed_meanwhile(model_id, epoch, partition, status))
		return LOCKED_COMMITTED;
	return strcmp(status, "training") == 0 ? LOCKED_TRAINING : LOCKED_STOPPED;
}

/*
 * The task's sub-epoch was committed by another process (one given up, or
 * that died after its commit): at an epoch's end, its validation as that
 * process recorded it.
 */
static MopSubepochOutcome
committed_by_another(const MopSubepochTask *task, MopSubepochResult *res)
{
	if (task->last_of_epoch)
		mop_subepoch_recorded_validation(task->model_id, task->epoch,
										 &res->valid_loss, &res->valid_metric);
	return MOP_SUBEPOCH_COMMITTED;
}

static Locked
lock_model(const MopSubepochTask *task)
{
	MemoryContext cxt = CurrentMemoryContext;
	Locked		locked;

	if (!mop_lock_dataset_of_run(task->run_id) || !mop_lock_run_row(task->run_id))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("run %lld or its dataset does not exist any more", (long long) task->run_id)));
	MemoryContextSwitchTo(cxt);
	locked = lock_model_row(task->model_id, task->epoch, task->partition);
	if (locked == LOCKED_GONE)
		model_not_visible(task->model_id);
	return locked;
}

/*
 * The mop.hops row of this sub-epoch, finished now: its mean loss and metric
 * (null where not finite).
 */
static void
describe_hop(const MopSubepochTask *task, TimestampTz started, const Trained *tr,
			 MopHandoverHop *h)
{
	char		null;

	memset(h, 0, sizeof(*h));
	h->epoch = task->epoch;
	h->partition = task->partition;
	h->worker = task->worker;
	h->started_at = started;
	h->finished_at = GetCurrentTimestamp();
	h->rows = tr->rows;
	h->loss = DatumGetFloat8(mean_datum(tr->loss_sum, tr->rows, &null));
	h->loss_null = null == 'n';
	h->metric = DatumGetFloat8(mean_datum(tr->metric_sum, tr->rows, &null));
	h->metric_null = null == 'n';
}

/* Insert a mop.hops row of the task's model. */
static void
insert_hop_row(const MopSubepochTask *task, const MopHandoverHop *h)
{
	Oid			t[10] = {INT8OID, INT8OID, INT4OID, INT4OID, INT4OID, TIMESTAMPTZOID,
	TIMESTAMPTZOID, INT8OID, FLOAT8OID, FLOAT8OID};
	Datum		v[10];
	char		n[10];

	memset(n, ' ', sizeof(n));
	v[0] = Int64GetDatum(task->run_id);
	v[1] = Int64GetDatum(task->model_id);
	v[2] = Int32GetDatum(h->epoch);
	v[3] = Int32GetDatum(h->partition);
	v[4] = Int32GetDatum(h->worker);
	v[5] = TimestampTzGetDatum(h->started_at);
	v[6] = TimestampTzGetDatum(h->finished_at);
	v[7] = Int64GetDatum(h->rows);
	v[8] = Float8GetDatum(h->loss);
	v[9] = Float8GetDatum(h->metric);
	if (h->loss_null)
		n[8] = 'n';
	if (h->metric_null)
		n[9] = 'n';
	exec_sql(HOP_SQL, 10, t, v, n, SPI_OK_INSERT);
}

/* This sub-epoch's mop.hops row. */
static void
insert_hop(const MopSubepochTask *task, TimestampTz started, const Trained *tr)
{
	MopHandoverHop h;

	describe_hop(task, started, tr, &h);
	insert_hop_row(task, &h);
}

/* The mop.hops rows of the sub-epochs handed over before this one. */
static void
insert_pending_hops(const MopSubepochTask *task)
{
	for (int i = 0; i < task->n_pending; i++)
		insert_hop_row(task, &task->pending[i]);
}

/*
 * Hand the trained state over instead of committing it (handover.h), with
 * the sub-epochs handed over before it and this one; false if there was no
 * room, and the sub-epoch commits.
 */
static bool
hand_over(const MopSubepochTask *task, TimestampTz started, const Trained *tr)
{
	MopHandoverHop hops[MOP_MAX_CHECKPOINT_EVERY];

	if (task->n_pending < 0 || task->n_pending >= MOP_MAX_CHECKPOINT_EVERY)
		return false;
	memcpy(hops, task->pending, sizeof(MopHandoverHop) * task->n_pending);
	describe_hop(task, started, tr, &hops[task->n_pending]);
	return task->hand_over(task->hand_over_arg, tr->state, hops, task->n_pending + 1);
}

/*
 * Mark the model diverged.  It keeps its last finite checkpoint: the one
 * stored, or with a carry the state of its last whole epoch.
 */
static void
mark_diverged(const MopSubepochTask *task)
{
	Oid			t[3] = {INT8OID, TEXTOID, BYTEAOID};
	Datum		v[3];
	char		n[3] = {' ', ' ', 'n'};
	const char *msg;

	if (task->carry)
		msg = psprintf("loss became NaN or infinite in epoch %d, partition %d; the last finite checkpoint is kept",
					   task->epoch, task->partition);
	else
		msg = psprintf("loss became NaN or infinite in epoch %d on partition %d",
					   task->epoch, task->partition);
	v[0] = Int64GetDatum(task->model_id);
	v[1] = CStringGetTextDatum(msg);
	v[2] = (Datum) 0;
	if (task->carry && task->carry->kept)
	{
		v[2] = PointerGetDatum(task->carry->kept);
		n[2] = ' ';
	}
	exec_sql(DIVERGED_SQL, 3, t, v, n, SPI_OK_UPDATE);
}

/*
 * Store state as the model's checkpoint, keeping the one it replaces as the
 * best when that one is (KEEP_BEST; partition: this sub-epoch's, or -1 to
 * store only: mop_train's carry, a 0.1 catalog).  An epoch's last
 * sub-epoch stores its state in end_epoch instead.
 */
static void
save_checkpoint(int64 model_id, bytea *state, int32 partition)
{
	Oid			t[3] = {INT8OID, BYTEAOID, INT4OID};
	Datum		v[3] = {Int64GetDatum(model_id), PointerGetDatum(state), Int32GetDatum(partition)};

	if (partition >= 0)
		exec_sql(SAVE_KEEP_BEST_SQL, 3, t, v, NULL, SPI_OK_UPDATE);
	else
		exec_sql(SAVE_SQL, 2, t, v, NULL, SPI_OK_UPDATE);
}

/* What the evaluation of an epoch's state on the validation split returned. */
typedef struct Validated
{
	double		loss_sum;
	double		metric_sum;
	int64		rows;			/* 0: no validation rows */
} Validated;

/*
 * Evaluate state on the validation split, through the narrow waist with
 * the caller's progress callback installed; takes no row lock.
 */
static void
validate(const MopSubepochTask *task, bytea *state, int64 dataset_id, Validated *out)
{
	Oid			t[2] = {BYTEAOID, INT8OID};
	Datum		v[2] = {PointerGetDatum(state), Int64GetDatum(dataset_id)};
	bool		isnull;

	memset(out, 0, sizeof(*out));
	exec_waist(task, MOP_EVAL_SQL, 2, t, v);
	if (SPI_processed == 1)
	{
		(void) col(1, &isnull);
		if (!isnull)
		{
			out->loss_sum = DatumGetFloat8(col(1, &isnull));
			out->metric_sum = DatumGetFloat8(col(2, &isnull));
			out->rows = DatumGetInt64(col(3, &isnull));
		}
	}
	SPI_freetuptable(SPI_tuptable);
}

/*
 * The end of an epoch: record the epoch with its validation (evaluated
 * before the locks were taken) and the model's best so far; the validation
 * means go to *res.
 */
static void
end_epoch(const MopSubepochTask *task, bytea *state, const Validated *val,
		  MopSubepochResult *res)
{
	MopSubepochCarry *carry = task->carry;
	Oid			t[13] = {INT8OID, INT4OID, FLOAT8OID, FLOAT8OID, INT8OID, BOOLOID,
	BOOLOID, FLOAT8OID, FLOAT8OID, INT8OID, FLOAT8OID, BYTEAOID, INT4OID};
	Datum		v[13];
	char		n[13];
	double		vl = val->loss_sum,
				vm = val->metric_sum;
	int64		vr = val->rows;
	bool		isnull;

	memset(n, ' ', sizeof(n));
	v[0] = Int64GetDatum(task->model_id);
	v[1] = Int32GetDatum(task->epoch);
	v[2] = mean_datum(vl, vr, &n[2]);
	v[3] = mean_datum(vm, vr, &n[3]);
	v[4] = Int64GetDatum(vr);
	v[5] = BoolGetDatum(task->final_epoch);
	v[6] = BoolGetDatum(carry != NULL);
	if (carry)
	{
		v[7] = mean_datum(carry->loss_sum, carry->rows, &n[7]);
		v[8] = mean_datum(carry->metric_sum, carry->rows, &n[8]);
		v[9] = Int64GetDatum(carry->rows);
		v[10] = Float8GetDatum((double) (GetCurrentTimestamp() - carry->epoch_started) / 1e6);
	}
	else
	{
		v[7] = v[8] = v[9] = v[10] = (Datum) 0;
		n[7] = n[8] = n[9] = n[10] = 'n';
	}
	v[11] = PointerGetDatum(state);
	if (carry)
		n[11] = 'n';
	v[12] = Int32GetDatum(1 + (carry ? 0 : task->n_pending));
	if (mop_catalog_is_02())
		exec_sql(EPOCH_SQL(EPOCH_SQL_BEST_STATE), 13, t, v, n, SPI_OK_UPDATE_RETURNING);
	else
		exec_sql(EPOCH_SQL(""), 13, t, v, n, SPI_OK_UPDATE_RETURNING);
	if (carry && SPI_processed == 1 && DatumGetBool(col(1, &isnull)) && !isnull)
	{
		MemoryContext old = MemoryContextSwitchTo(carry->cxt);

		if (carry->best != NULL)
			pfree(carry->best);
		carry->best = DatumGetByteaPCopy(PointerGetDatum(state));
		carry->best_epoch = task->epoch;
		MemoryContextSwitchTo(old);
	}
	if (vr > 0)
	{
		res->valid_loss = vl / vr;
		res->valid_metric = vm / vr;
	}
}

/*
 * With a carry, the best epoch's state is written once, beside the model's
 * last state (of epoch saved_epoch): NULL when they are the same, since then
 * the latest serves as the best.
 */
static void
carry_save_best(const MopSubepochTask *task, int32 saved_epoch)
{
	MopSubepochCarry *carry = task->carry;
	Oid			t[2] = {INT8OID, BYTEAOID};
	Datum		v[2] = {Int64GetDatum(task->model_id), PointerGetDatum(carry->best)};
	char		n[2] = {' ', carry->best_epoch == saved_epoch ? 'n' : ' '};

	if (carry->best == NULL || !mop_catalog_is_02())
		return;
	exec_sql("UPDATE mop.models SET best_state = $2 WHERE id OPERATOR(pg_catalog.=) $1",
			 2, t, v, n, SPI_OK_UPDATE);
}

/* Replace the carried state by a copy of state (in the carry's context). */
static void
carry_state(MopSubepochCarry *carry, bytea *state)
{
	MemoryContext old = MemoryContextSwitchTo(carry->cxt);
	bytea	   *copy = DatumGetByteaPCopy(PointerGetDatum(state));

	MemoryContextSwitchTo(old);
	if (carry->state != carry->kept)
		pfree(carry->state);
	carry->state = copy;
}

/* The carried state becomes the kept one: an epoch is complete. */
static void
carry_keep(MopSubepochCarry *carry)
{
	if (carry->kept != NULL && carry->kept != carry->state)
		pfree(carry->kept);
	carry->kept = carry->state;
}

/* Run one sub-epoch (subepoch.h). */
MopSubepochOutcome
mop_subepoch(const MopSubepochTask *task, MopSubepochResult *res)
{
	MopSubepochCarry *carry = task->carry;
	TimestampTz started = GetCurrentTimestamp();
	MemoryContext cxt,
				old;
	MopSubepochOutcome outcome = MOP_SUBEPOCH_OK;
	bytea	   *state;
	int64		dataset_id;
	int64		rows_total = 0;
	char	   *status;
	Trained		tr;
	Validated	val;

	memset(res, 0, sizeof(*res));
	res->valid_loss = NAN;
	res->valid_metric = NAN;
	cxt = AllocSetContextCreate(CurrentMemoryContext, "mop sub-epoch",
								ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(cxt);

	/* 1. the checkpoint */
	if (carry)
	{
		state = carry->state;
		dataset_id = carry->dataset_id;
	}
	else if (!load_checkpoint(task, &state, &dataset_id, &rows_total, &status))
	{
		/* not training: stopped, or finished by the process that committed this */
		outcome = committed_meanwhile(task->model_id, task->epoch, task->partition, status) ?
			committed_by_another(task, res) : MOP_SUBEPOCH_STOPPED;
		goto done;
	}
	if (task->progress && task->progress->start)
		task->progress->start(task->progress->arg, rows_total);

	/* 2. through the narrow waist */
	train_partition(task, state, dataset_id, &tr);
	if (tr.state == NULL && !carry && task->segment != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NO_DATA_FOUND),
				 errmsg("segment \"%s\" has no training buffers of partition %d in its copy of the dataset",
						task->segment, task->partition),
				 errdetail("The copy is dataset %lld in the segment's mop.datasets.",
						   (long long) task->remote_dataset_id),
				 errhint("Copy the partition there again (mop_remove_segment, then mop_add_segment), or place the dataset again.")));
	if (tr.state == NULL && !carry)
		ereport(ERROR,
				(errcode(ERRCODE_NO_DATA_FOUND),
				 errmsg("partition %d of the dataset has no training buffers",
						task->partition)));

	/* handed over: nothing is written (handover.h) */
	if (task->hand_over != NULL && !carry && !task->last_of_epoch && tr.state != NULL &&
		!tr.diverged && hand_over(task, started, &tr))
	{
		res->rows = tr.rows;
		res->loss_sum = tr.loss_sum;
		res->metric_sum = tr.metric_sum;
		outcome = MOP_SUBEPOCH_HANDED_OVER;
		goto done;
	}

	/*
	 * 3. the validation at the end of an epoch, before any lock: a worker
	 * stopped or hung here holds no row its replacement needs
	 */
	memset(&val, 0, sizeof(val));
	if (task->last_of_epoch && !(tr.state != NULL && tr.diverged))
	{
		progress_step(task, MOP_STEP_VALIDATING);
		validate(task, tr.state != NULL ? tr.state : state, dataset_id, &val);
	}

	/* 4. the locks, now that training and validation are done */
	progress_step(task, MOP_STEP_COMMITTING);
	if (!carry)
	{
		switch (lock_model(task))
		{
			case LOCKED_TRAINING:
				break;
			case LOCKED_STOPPED:
				outcome = MOP_SUBEPOCH_STOPPED;
				goto done;
			case LOCKED_COMMITTED:
				outcome = committed_by_another(task, res);
				goto done;
			case LOCKED_GONE:	/* (lock_model raises it) */
				model_not_visible(task->model_id);
		}
	}

	/*
	 * 5. and 6.: the hop, then divergence or the new checkpoint.  Within an
	 * epoch, the sub-epochs handed over before this one are recorded after
	 * the checkpoint: KEEP_BEST looks for the epoch's sub-epochs committed
	 * before this one (other than this one's partition).
	 */
	if (!carry && !task->last_of_epoch && tr.state != NULL && !tr.diverged)
	{
		insert_hop(task, started, &tr);
		save_checkpoint(task->model_id, tr.state,
						mop_catalog_is_02() ? task->partition : -1);
		insert_pending_hops(task);
		res->rows = tr.rows;
		res->loss_sum = tr.loss_sum;
		res->metric_sum = tr.metric_sum;
		goto done;
	}
	/*
	 * A model that diverges after sub-epochs were handed over keeps the
	 * last of them (the state it was handed, the last finite one) as its
	 * checkpoint, stored before their mop.hops rows as above: every
	 * sub-epoch in mop.hops is in the state it keeps.
	 */
	if (!carry && tr.diverged && task->state_in != NULL && task->n_pending > 0)
		save_checkpoint(task->model_id, task->state_in,
						mop_catalog_is_02() ? task->pending[task->n_pending - 1].partition : -1);
	if (!carry)
		insert_pending_hops(task);
	if (tr.state != NULL)
	{
		if (!(carry && tr.diverged))
			insert_hop(task, started, &tr);
		if (tr.diverged)
		{
			mark_diverged(task);
			if (carry)
				carry_save_best(task, task->epoch - 1);
			outcome = MOP_SUBEPOCH_DIVERGED;
			goto done;
		}
		res->rows = tr.rows;
		res->loss_sum = tr.loss_sum;
		res->metric_sum = tr.metric_sum;
		state = tr.state;
		if (carry)
		{
			carry->loss_sum += tr.loss_sum;
			carry->metric_sum += tr.metric_sum;
			carry->rows += tr.rows;
			carry_state(carry, tr.state);
			state = carry->state;
		}
	}
	if (carry ? task->last_of_epoch && task->final_epoch : !task->last_of_epoch)
		save_checkpoint(task->model_id, state,
						!carry && mop_catalog_is_02() ? task->partition : -1);

	/* 7. the end of an epoch */
	if (task->last_of_epoch)
	{
		end_epoch(task, state, &val, res);
		if (carry)
		{
			carry_keep(carry);
			if (task->final_epoch)
				carry_save_best(task, task->epoch);
		}
	}

done:
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
	return outcome;
}

/*
 * The validation of a model's epoch as recorded in mop.epochs, for an
 * epoch's end that another process committed (one given up, or that died
 * after its commit): NaN where there is none.  In the caller's transaction,
 * SPI connected.
 */
void
mop_subepoch_recorded_validation(int64 model_id, int32 epoch, double *valid_loss,
								 double *valid_metric)
{
	Oid			t[2] = {INT8OID, INT4OID};
	Datum		v[2] = {Int64GetDatum(model_id), Int32GetDatum(epoch)};
	bool		isnull;
	Datum		d;

	*valid_loss = NAN;
	*valid_metric = NAN;
	exec_sql(RECORDED_VALIDATION_SQL, 2, t, v, NULL, SPI_OK_SELECT);
	if (SPI_processed == 1)
	{
		d = col(1, &isnull);
		if (!isnull)
			*valid_loss = DatumGetFloat8(d);
		d = col(2, &isnull);
		if (!isnull)
			*valid_metric = DatumGetFloat8(d);
	}
	SPI_freetuptable(SPI_tuptable);
}

/*
 * Commit a state handed over (handover.h) with the sub-epochs it records,
 * outside any sub-epoch: the coordinator's, when its run ends (done,
 * cancelled, time budget spent) with the model in the middle of an epoch.
 * In the caller's transaction, which holds the dataset's and the run's rows
 * (lockorder.h).  Skipped (false) if the model is gone or not training, or
 * if a sub-epoch that took this state committed it already.
 */
bool
mop_subepoch_commit_handed(int64 run_id, int64 model_id, bytea *state,
						   const MopHandoverHop *hops, int n_hops)
{
	MopSubepochTask task;

	if (n_hops < 1 ||
		lock_model_row(model_id, hops[0].epoch, hops[0].partition) != LOCKED_TRAINING)
		return false;
	memset(&task, 0, sizeof(task));
	task.run_id = run_id;
	task.model_id = model_id;
	task.pending = hops;
	task.n_pending = n_hops;
	/* as a sub-epoch that took it would: the checkpoint, then the rows */
	save_checkpoint(model_id, state, mop_catalog_is_02() ? hops[n_hops - 1].partition : -1);
	insert_pending_hops(&task);
	return true;
}

/*
 * The model trained with `carry` stops after its whole epoch `epoch` before
 * its last (mop_train's patience early stopping): store the carried state
 * and the best checkpoint as its final epoch would have.
 */
void
mop_subepoch_carry_stop(MopSubepochCarry *carry, int64 model_id, int32 epoch)
{
	MopSubepochTask task;

	memset(&task, 0, sizeof(task));
	task.model_id = model_id;
	task.epoch = epoch;
	task.carry = carry;
	save_checkpoint(model_id, carry->state, -1);
	carry_save_best(&task, epoch);
}

void
mop_subepoch_carry_init(MopSubepochCarry *carry, int64 dataset_id, bytea *state,
						MemoryContext cxt)
{
	memset(carry, 0, sizeof(*carry));
	carry->dataset_id = dataset_id;
	carry->cxt = cxt;
	carry->state = state;
	mop_subepoch_carry_begin_epoch(carry);
}

void
mop_subepoch_carry_begin_epoch(MopSubepochCarry *carry)
{
	carry->epoch_started = GetCurrentTimestamp();
	carry->loss_sum = 0;
	carry->metric_sum = 0;
	carry->rows = 0;
}
