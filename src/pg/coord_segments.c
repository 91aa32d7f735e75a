/*
 * coord_segments.c -- a run over a dataset placed on segments: its workers
 * bound to segments, segments going down and coming back.
 *
 * A run over a placed dataset (mop.dataset_segments) has
 * mop.workers_per_segment workers for each segment that holds a copy of a
 * partition; worker w trains on segment w / workers_per_segment, and the
 * scheduler (mop_sched_new_placed) gives it only the partitions that
 * segment holds.  A worker whose segment fails -- refuses the connection,
 * drops it, stays silent past mop.segment_timeout -- reports
 * MOP_TASK_SEGMENT_DOWN: its sub-epoch wrote nothing and goes back to the
 * scheduler, and every worker of that segment is marked down, so that the
 * partitions with a copy elsewhere go on there (each model still visits
 * each partition once per epoch: the scheduler's invariants do not depend
 * on which copy serves a visit).  The coordinator tries a down segment
 * again every few seconds, without waiting for it: the try (a connection
 * and its setup query, segment_conn.c's probes) is advanced each round of
 * the scheduling loop, whose wait includes its socket, so that a segment
 * that does not answer (frozen, or dropping packets) never holds up the
 * other segments' workers; once it answers, its workers get tasks again
 * from the next sub-epoch on.  When a partition that models still need has
 * no copy on an up segment, the run waits for mop.segment_wait and then
 * ends 'interrupted' (mop_resume continues it; nothing committed is lost).
 * Each of these events is a row of mop.segment_events.
 *
 * Membership is elastic: every few seconds the coordinator reads the
 * dataset's placement again.  A segment given partitions meanwhile
 * (mop_add_segment) gets its workers, started now, with tasks from the
 * next sub-epoch boundary on ('joined'); one whose partitions were taken
 * away (mop_remove_segment) finishes the sub-epoch it trains and gets no
 * more ('left').  The scheduler is made with room for every worker a run
 * may have (MOP_MAX_WORKERS), the spares holding nothing until then.
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "coordinator.h"
#include "segment.h"

/* how often a down segment is tried again */
#define PROBE_INTERVAL_MS 2000

/* how long a probe may wait for the segment's answer */
#define PROBE_TIMEOUT_S 2

typedef struct SegState
{
	bool		down;
	TimestampTz probe_at;		/* when to try it again */
	MopSegmentProbe *probe;		/* a try under way, or NULL */
	pgsocket	sock;			/* what the try waits for */
	int			events;
} SegState;

/* how often the placement is read again */
#define RELOAD_INTERVAL_MS 1000

static SegState segs[MOP_MAX_WORKERS];	/* [coord.run->n_segments] */
static uint8 *holds = NULL;		/* [MOP_MAX_WORKERS * n_partitions] */
static uint8 *placed = NULL;	/* [MOP_MAX_WORKERS * n_partitions]: segment k
								 * holds partition p (the placement last read) */
static TimestampTz reload_at = 0;
static TimestampTz unreachable_since = 0;
static int32 unreachable_partition = -1;

/*
 * Record an event of the run (own transaction) in mop.segment_events:
 * segment's name ('local' for the coordinator's server).
 */
void
coord_record_event(const char *segment, const char *event, int worker, int64 model_id,
				   int32 partition, const char *detail)
{
	Oid			t[7] = {INT8OID, TEXTOID, TEXTOID, INT4OID, INT8OID, INT4OID, TEXTOID};
	Datum		v[7];
	char		n[7] = {' ', ' ', ' ', worker < 0 ? 'n' : ' ', model_id == 0 ? 'n' : ' ',
						partition < 0 ? 'n' : ' ', detail ? ' ' : 'n'};

	if (coord.run->run_id == 0)
		return;
	v[0] = Int64GetDatum(coord.run->run_id);
	v[1] = CStringGetTextDatum(segment);
	v[2] = CStringGetTextDatum(event);
	v[3] = Int32GetDatum(worker);
	v[4] = Int64GetDatum(model_id);
	v[5] = Int32GetDatum(partition);
	v[6] = detail ? CStringGetTextDatum(detail) : (Datum) 0;
	coord_begin_tx();
	if (SPI_execute_with_args("INSERT INTO mop.segment_events (run_id, segment, event, worker, "
							  "model_id, partition, detail) VALUES ($1, $2, $3, $4, $5, $6, $7)",
							  7, t, v, n, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not record a segment event of run %lld", (long long) coord.run->run_id);
	coord_commit_tx();
	elog(LOG, "mop run %lld: segment \"%s\" %s%s%s", (long long) coord.run->run_id,
		 segment, event, detail ? ": " : "", detail ? detail : "");
}

/* An event of the run's segment seg. */
static void
record_event(int seg, const char *event, int worker, int64 model_id, int32 partition,
			 const char *detail)
{
	coord_record_event(coord.run->segments[seg].name, event, worker, model_id, partition, detail);
}

/*
 * Try to reach segment seg (own transaction), waiting for it (at the start
 * of a run, before any worker has work): true if it answers; false if it
 * is down (the reason in *why).  Other errors -- no user mapping, a
 * refused password, no mop there -- propagate: the run cannot use the
 * segment as configured, which waiting does not mend.
 */
static bool
probe(int seg, char **why)
{
	MemoryContext cxt = CurrentMemoryContext;
	volatile bool up = false;

	*why = NULL;
	if (mop_segment_is_local(coord.run->segments[seg].name))
		return true;
	coord_begin_tx();
	PG_TRY();
	{
		PGconn	   *conn = mop_segment_connect(coord.run->segments[seg].name, PROBE_TIMEOUT_S);

		mop_segment_disconnect(conn);
		up = true;
	}
	PG_CATCH();
	{
		ErrorData  *ed;

		MemoryContextSwitchTo(cxt);
		ed = CopyErrorData();
		if (!mop_segment_failed || ERRCODE_TO_CATEGORY(ed->sqlerrcode) != ERRCODE_CONNECTION_EXCEPTION)
			PG_RE_THROW();
		FlushErrorState();
		AbortCurrentTransaction();
		*why = pstrdup(ed->detail ? ed->detail : ed->message);
		return false;
	}
	PG_END_TRY();
	coord_commit_tx();
	return up;
}

/*
 * Advance the try of down segment seg without waiting: start it when it is
 * due (own transaction, to read the catalog), then drive it as its socket
 * allows.  Returns 1 if the segment answered, 0 while the try goes on or
 * waits for its next start, -1 if it failed (the reason in *why; the next
 * try in PROBE_INTERVAL_MS).  As probe(), errors that waiting does not
 * mend propagate.
 */
static int
probe_step(int seg, TimestampTz now, char **why)
{
	SegState   *st = &segs[seg];
	MemoryContext cxt = CurrentMemoryContext;
	volatile bool started = false;
	bool		up = false;

	*why = NULL;
	if (st->probe == NULL && now < st->probe_at)
		return 0;
	PG_TRY();
	{
		if (st->probe == NULL)
		{
			coord_begin_tx();
			started = true;
			st->probe = mop_segment_probe_start(coord.run->segments[seg].name, PROBE_TIMEOUT_S);
			coord_commit_tx();
			started = false;
		}
		up = mop_segment_probe_poll(st->probe, &st->sock, &st->events);
	}
	PG_CATCH();
	{
		ErrorData  *ed;

		MemoryContextSwitchTo(cxt);
		ed = CopyErrorData();
		mop_segment_probe_end(st->probe);
		st->probe = NULL;
		if (!mop_segment_failed || ERRCODE_TO_CATEGORY(ed->sqlerrcode) != ERRCODE_CONNECTION_EXCEPTION)
			PG_RE_THROW();
		FlushErrorState();
		if (started)
			AbortCurrentTransaction();
		*why = pstrdup(ed->detail ? ed->detail : ed->message);
		st->probe_at = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), PROBE_INTERVAL_MS);
		return -1;
	}
	PG_END_TRY();
	if (!up)
		return 0;
	mop_segment_probe_end(st->probe);
	st->probe = NULL;
	return 1;
}

/*
 * Wait for the latch, at most timeout_ms, and for the sockets of the
 * probes under way, so that a segment's answer is taken at once; then
 * reset the latch.
 */
void
coord_segments_wait(long timeout_ms)
{
	WaitEventSet *set;
	WaitEvent	ev[4];
	int			n = 0;

	for (int k = 0; k < coord.run->n_segments; k++)
		n += segs[k].probe != NULL && segs[k].sock != PGINVALID_SOCKET;
	if (n == 0)
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 timeout_ms, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		return;
	}
	set = CreateWaitEventSet(CurrentMemoryContext, n + 2);
	AddWaitEventToSet(set, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
	AddWaitEventToSet(set, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
	for (int k = 0; k < coord.run->n_segments; k++)
		if (segs[k].probe != NULL && segs[k].sock != PGINVALID_SOCKET)
			AddWaitEventToSet(set, segs[k].events, segs[k].sock, NULL, NULL);
	(void) WaitEventSetWait(set, timeout_ms, ev, lengthof(ev), PG_WAIT_EXTENSION);
	FreeWaitEventSet(set);
	ResetLatch(MyLatch);
}

/* Segment index of name, or -1. */
static int
segment_index(const char *name)
{
	for (int k = 0; k < coord.run->n_segments; k++)
		if (strcmp(coord.run->segments[k].name, name) == 0)
			return k;
	return -1;
}

/*
 * Read the dataset's placement (own transaction) into want[k * P + p] for
 * the segments known, adding the new ones (up to room for their workers) to
 * the run's segments with their copy's id (at most `room` of them); returns
 * the rows read.
 */
static int64
read_placement(uint8 *want, int room)
{
	Oid			t[1] = {INT8OID};
	Datum		v[1] = {Int64GetDatum(coord.ds->id)};
	int			P = coord.n_partitions;
	int64		n;

	memset(want, 0, (Size) MOP_MAX_WORKERS * P);
	coord_begin_tx();
	coord_exec_sql("SELECT segment, partition, remote_dataset_id "
				   "FROM mop.dataset_segments WHERE dataset_id OPERATOR(pg_catalog.=) $1 "
				   "ORDER BY segment OPERATOR(pg_catalog.<>) 'local', segment, partition",
				   1, t, v, SPI_OK_SELECT);
	n = (int64) SPI_processed;
	for (int64 i = 0; i < n; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	td = SPI_tuptable->tupdesc;
		bool		isnull;
		char	   *name = TextDatumGetCString(SPI_getbinval(tup, td, 1, &isnull));
		int32		p = DatumGetInt32(SPI_getbinval(tup, td, 2, &isnull));
		int64		remote = DatumGetInt64(SPI_getbinval(tup, td, 3, &isnull));
		int			k = segment_index(name);

		if (isnull)
			remote = 0;
		if (p < 0 || p >= P)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("dataset \"%s\" places partition %d, but has %d", coord.ds->name, p, P)));
		if (k < 0)
		{
			if (room <= 0 || coord.run->n_segments == MOP_MAX_WORKERS)
			{
				elog(LOG, "mop run %lld: no room for the workers of segment \"%s\" (at most %d workers)",
					 (long long) coord.run->run_id, name, MOP_MAX_WORKERS);
				continue;
			}
			k = coord.run->n_segments;
			SpinLockAcquire(&coord.run->mutex);
			strlcpy(coord.run->segments[k].name, name, NAMEDATALEN);
			coord.run->segments[k].remote_dataset_id = remote;
			coord.run->n_segments = k + 1;
			SpinLockRelease(&coord.run->mutex);
			room--;
		}
		else if (coord.run->segments[k].remote_dataset_id != remote)
		{
			/* placed again: the copy has a new id there */
			SpinLockAcquire(&coord.run->mutex);
			coord.run->segments[k].remote_dataset_id = remote;
			SpinLockRelease(&coord.run->mutex);
		}
		want[(Size) k * P + p] = 1;
	}
	coord_commit_tx();
	return n;
}

/*
 * Read the dataset's placement and bind the workers to segments; returns
 * false (nothing changed) if the dataset is not placed.  Sets coord.n_workers.
 */
bool
coord_segments_load(void)
{
	int			P = coord.n_partitions,
				S,
				per = Max(coord.run->workers_per_segment, 1),
				W;
	uint8	   *want;
	bool		is_02;

	coord_begin_tx();
	is_02 = mop_catalog_is_02();
	coord_commit_tx();
	if (!is_02)
		return false;
	want = palloc((Size) MOP_MAX_WORKERS * P);
	coord.n_workers = 0;
	coord.workers_per_segment = per;
	if (read_placement(want, MOP_MAX_WORKERS) == 0)
		return false;
	S = coord.run->n_segments;
	if (S * per > MOP_MAX_WORKERS)
	{
		per = Max(MOP_MAX_WORKERS / S, 1);
		coord.workers_per_segment = per;
		elog(LOG, "mop run %lld: %d workers per segment (at most %d workers)",
			 (long long) coord.run->run_id, per, MOP_MAX_WORKERS);
	}
	W = Min(S * per, MOP_MAX_WORKERS);
	holds = MemoryContextAllocZero(TopMemoryContext, (Size) MOP_MAX_WORKERS * P);
	placed = MemoryContextAlloc(TopMemoryContext, (Size) MOP_MAX_WORKERS * P);
	memcpy(placed, want, (Size) MOP_MAX_WORKERS * P);
	SpinLockAcquire(&coord.run->mutex);
	for (int w = 0; w < MOP_MAX_WORKERS; w++)
		coord.run->slots[w].segment = w < W ? w / per : -1;
	SpinLockRelease(&coord.run->mutex);
	for (int w = 0; w < W; w++)
		memcpy(holds + (Size) w * P, want + (Size) (w / per) * P, P);
	coord.n_workers = W;
	pfree(want);
	return true;
}

/* The scheduler of a placed run, with room for workers of segments joining later. */
mop_sched *
coord_segments_sched(void)
{
	mop_sched  *s = mop_sched_new_placed(MOP_MAX_WORKERS, coord.n_partitions, holds,
										 (uint64) coord.run->opts.seed,
										 coord.run->opts.deterministic,
										 (mop_pick) coord.run->opts.scheduler);

	if (s == NULL)
		elog(ERROR, "could not create the scheduler (%d workers on %d segments, %d partitions)",
			 coord.n_workers, coord.run->n_segments, coord.n_partitions);
	coord_cost_hints_forget();
	return s;
}

/* Slots free for new workers: retired ones and those never used. */
static int
free_slots(void)
{
	int			n = MOP_MAX_WORKERS - coord.n_workers;

	for (int w = 0; w < coord.n_workers; w++)
		n += !coord_worker_active(w) && !coord_worker_leaving(w);
	return n;
}

/* Worker w holds what segment k holds (k < 0: nothing). */
static void
set_worker_holds(mop_sched *s, int w, int k)
{
	int			P = coord.n_partitions;

	for (int p = 0; p < P; p++)
	{
		uint8		on = k >= 0 ? placed[(Size) k * P + p] : 0;

		if (holds[(Size) w * P + p] != on)
		{
			holds[(Size) w * P + p] = on;
			(void) mop_sched_set_holds(s, w, p, on);
		}
	}
}

/* Start one more worker for segment k in a free slot; false if none started. */
static bool
start_segment_worker(mop_sched *s, int k)
{
	int			w = coord_free_slot();

	if (w < 0)
		return false;
	SpinLockAcquire(&coord.run->mutex);
	coord.run->slots[w].segment = k;
	SpinLockRelease(&coord.run->mutex);
	set_worker_holds(s, w, k);
	mop_sched_set_worker_down(s, w, segs[k].down ? 1 : 0);
	if (!coord_start_worker(w))
	{
		set_worker_holds(s, w, -1);
		elog(LOG, "mop run %lld: could not start a worker for segment \"%s\"",
			 (long long) coord.run->run_id, coord.run->segments[k].name);
		return false;
	}
	return true;
}

/* Workers serving segment k. */
static int
segment_workers(int k)
{
	int			n = 0;

	for (int w = 0; w < coord.n_workers; w++)
		n += coord_worker_active(w) && coord.run->slots[w].segment == k;
	return n;
}

/*
 * Follow the placement as mop_add_segment and mop_remove_segment change it:
 * workers gain and lose copies, a new segment's workers start.
 */
static void
reload(mop_sched *s)
{
	int			P = coord.n_partitions,
				per = Max(coord.workers_per_segment, 1),
				before = coord.run->n_segments;

	(void) read_placement(placed, free_slots() / per);
	/* the new segments' workers */
	for (int k = before; k < coord.run->n_segments; k++)
	{
		int			n = 0;

		while (n < per && start_segment_worker(s, k))
			n++;
		record_event(k, "joined", -1, 0, -1, psprintf("%d workers", n));
	}
	/* every worker holds what its segment holds now */
	for (int w = 0; w < coord.n_workers; w++)
	{
		int			k = coord.run->slots[w].segment;
		bool		had = false,
					has = false;

		if (k < 0 || !coord_worker_active(w))
			continue;
		for (int p = 0; p < P; p++)
		{
			had |= holds[(Size) w * P + p] != 0;
			has |= placed[(Size) k * P + p] != 0;
		}
		set_worker_holds(s, w, k);
		/* one event per segment: at its first worker */
		if (had && !has && (w == 0 || coord.run->slots[w - 1].segment != k))
			record_event(k, "left", -1, 0, -1, NULL);
	}
}

/*
 * mop_set_workers over segments: each segment of the run gets per workers
 * (so do segments that join later).  A segment's extra workers, the last
 * ones, lose their copies, finish their task and exit; missing ones start
 * in free slots.  Each segment whose count changes gets an event
 * ('workers') when record.
 */
void
coord_segments_set_workers(mop_sched *s, int per, bool record)
{
	per = Max(Min(per, MOP_MAX_WORKERS), 1);
	coord.workers_per_segment = per;
	for (int k = 0; k < coord.run->n_segments; k++)
	{
		int			had = segment_workers(k),
					n = had;

		/* too many: the last ones leave */
		for (int w = coord.n_workers - 1; w >= 0 && n > per; w--)
			if (coord_worker_active(w) && coord.run->slots[w].segment == k)
			{
				set_worker_holds(s, w, -1);
				coord_retire_worker(w);
				n--;
			}
		/* too few: leaving ones stay, then new ones start */
		for (int w = 0; w < coord.n_workers && n < per; w++)
			if (coord.run->slots[w].segment == k && coord_unretire_worker(w))
			{
				set_worker_holds(s, w, k);
				n++;
			}
		while (n < per && start_segment_worker(s, k))
			n++;
		if (record && n != had)
			record_event(k, "workers", -1, 0, -1,
						 n < per ?
						 psprintf("%d workers (were %d); only %d of the %d asked for could be started (max_worker_processes is %d, at most %d workers a run)",
								  n, had, n, per, max_worker_processes, MOP_MAX_WORKERS) :
						 psprintf("%d workers (were %d)", n, had));
	}
}

/* Mark segment seg down (and its workers), unless it is already. */
static void
segment_down(mop_sched *s, int seg, const char *why, int worker, int64 model_id, int32 partition)
{
	if (segs[seg].down)
		return;
	segs[seg].down = true;
	SpinLockAcquire(&coord.run->mutex);
	coord.run->segments[seg].down = true;
	SpinLockRelease(&coord.run->mutex);
	segs[seg].probe_at = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), PROBE_INTERVAL_MS);
	for (int w = 0; w < coord.n_workers; w++)
		if (coord.run->slots[w].segment == seg)
			mop_sched_set_worker_down(s, w, 1);
	record_event(seg, "down", worker, model_id, partition, why);
}

/* Check every remote segment once before the run starts; those that do not answer start down. */
void
coord_segments_check(mop_sched *s)
{
	for (int k = 0; k < coord.run->n_segments; k++)
	{
		char	   *why;

		if (!probe(k, &why))
			segment_down(s, k, why, -1, 0, -1);
	}
}

/*
 * How many times in a row a model's sub-epoch may be run again elsewhere
 * because the segment it trained on went down, before the model fails: a
 * segment that dies of every sub-epoch it is given (a crash on the data,
 * a server that restarts) answers the probes in between, and would
 * otherwise be given the same work for ever.
 */
#define MAX_REQUEUES 5

static int32 *requeues = NULL;	/* [n_requeues]: per model, in a row */
static int	n_requeues = 0;

/* Model i's count of requeues in a row (grown with the models). */
static int32 *
requeues_of(int32 i)
{
	if (i >= n_requeues)
	{
		int			n = Max(i + 1, 2 * n_requeues);

		requeues = requeues ? repalloc(requeues, sizeof(int32) * n) :
			MemoryContextAlloc(TopMemoryContext, sizeof(int32) * n);
		memset(requeues + n_requeues, 0, sizeof(int32) * (n - n_requeues));
		n_requeues = n;
	}
	return &requeues[i];
}

/*
 * Worker w's segment failed during its task: the task goes back to the
 * scheduler (it wrote nothing) and the segment is marked down.  Returns
 * true when the model is to fail instead (MAX_REQUEUES in a row): it is
 * marked failed here, with the last error.
 */
bool
coord_segments_task_down(mop_sched *s, int w, const mop_task *t, const char *error)
{
	int			seg = coord.run->slots[w].segment;
	int32	   *n = requeues_of(t->model);

	mop_sched_abort(s, t);
	segment_down(s, seg, error, w, coord.models[t->model].id, t->partition);
	if (++*n < MAX_REQUEUES)
	{
		record_event(seg, "requeued", w, coord.models[t->model].id, t->partition, NULL);
		return false;
	}
	{
		Oid			ty[2] = {INT8OID, TEXTOID};
		Datum		v[2];
		char	   *msg = psprintf("its sub-epoch was lost %d times in a row by segments that went down; the last, on segment \"%s\": %s",
								   *n, coord.run->segments[seg].name, error);

		v[0] = Int64GetDatum(coord.models[t->model].id);
		v[1] = CStringGetTextDatum(msg);
		coord_begin_tx();
		coord_exec_sql("UPDATE mop.models SET status = 'failed', error = $2, "
					   "updated_at = pg_catalog.clock_timestamp() WHERE id OPERATOR(pg_catalog.=) $1 "
					   "AND status OPERATOR(pg_catalog.=) 'training'", 2, ty, v, SPI_OK_UPDATE);
		coord_commit_tx();
		elog(LOG, "mop run %lld: model %lld failed: %s", (long long) coord.run->run_id,
			 (long long) coord.models[t->model].id, msg);
	}
	return true;
}

/* Model i trained a sub-epoch: its count of requeues in a row starts again. */
void
coord_segments_task_ok(int32 i)
{
	*requeues_of(i) = 0;
}

/*
 * Once per round of the scheduling loop: try the down segments again, and
 * watch for partitions that no up segment holds.  Returns false when the
 * run has waited mop.segment_wait for such a partition: it is to end
 * 'interrupted', with *why saying so.
 */
bool
coord_segments_tick(mop_sched *s, char **why)
{
	TimestampTz now = GetCurrentTimestamp();
	int32		p;

	if (now >= reload_at)
	{
		reload(s);
		reload_at = TimestampTzPlusMilliseconds(now, RELOAD_INTERVAL_MS);
	}
	for (int k = 0; k < coord.run->n_segments; k++)
	{
		char	   *reason;

		if (!segs[k].down)
			continue;
		/* never waits: the other workers are fed while the segment is tried */
		if (probe_step(k, now, &reason) > 0)
		{
			segs[k].down = false;
			SpinLockAcquire(&coord.run->mutex);
			coord.run->segments[k].down = false;
			SpinLockRelease(&coord.run->mutex);
			for (int w = 0; w < coord.n_workers; w++)
				if (coord.run->slots[w].segment == k)
					mop_sched_set_worker_down(s, w, 0);
			record_event(k, "up", -1, 0, -1, NULL);
		}
	}

	p = mop_sched_finished(s) ? -1 : mop_sched_unreachable(s);
	if (p < 0)
	{
		unreachable_since = 0;
		unreachable_partition = -1;
		return true;
	}
	if (unreachable_since == 0 || p != unreachable_partition)
	{
		int			k = -1;

		/* the (first) segment holding its copy, for the event */
			for (int w = 0; w < coord.n_workers && k < 0; w++)
			if (holds[(Size) w * coord.n_partitions + p])
				k = coord.run->slots[w].segment;
		unreachable_since = now;
		unreachable_partition = p;
		record_event(Max(k, 0), "waiting", -1, 0, p,
					 psprintf("no copy of partition %d is on a segment that is up; waiting up to %d ms",
							  p, coord.run->segment_wait_ms));
	}
	if (!TimestampDifferenceExceeds(unreachable_since, now, coord.run->segment_wait_ms))
		return true;
	*why = psprintf("no segment holding partition %d answered for %d ms (mop.segment_wait)",
					p, coord.run->segment_wait_ms);
	for (int w = 0; w < coord.n_workers; w++)
		if (holds[(Size) w * coord.n_partitions + p])
		{
			record_event(coord.run->slots[w].segment, "gave_up", -1, 0, p, *why);
			break;
		}
	return false;
}
