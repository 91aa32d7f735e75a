/*
 * segment.h -- other PostgreSQL servers as segments of a dataset.
 *
 * A segment is a PostgreSQL server with mop installed that holds copies of
 * some of a dataset's training partitions, named as PostgreSQL names remote
 * servers: a foreign server of postgres_fdw, with a user mapping holding the
 * credentials.  The coordinator's own server is the segment 'local'.
 *
 *   segment_conn.c   connecting to a segment as the mapped role of the
 *                    current user (postgres_fdw's rules: USAGE on the
 *                    server, a password for non-superusers), and waiting
 *                    for a query without blocking interrupts, with the
 *                    segment's heartbeat and mop.segment_timeout;
 *   segment_xact.c   the segments' work of placing, adding, removing and
 *                    dropping copies, inside the caller's transaction:
 *                    committed at its pre-commit, gone at its abort;
 *   segment_place.c  placing a dataset's partitions on segments
 *                    (mop_prepare(segments => ...), mop_place), the
 *                    catalog mop.dataset_segments, dropping the copies;
 *   segment_train.c  one sub-epoch's training on a segment: the narrow
 *                    waist (mop.train_agg over the segment's buffers) with
 *                    the model state sent and received as a binary value;
 *   coord_segments.c the run's side: workers bound to segments, segments
 *                    going down and coming back, mop.segment_events.
 *
 * Nothing but the narrow waist runs on a segment during a run: checkpoints,
 * hops, epochs and every other catalog row stay on the coordinator's server.
 */
#ifndef MOP_SEGMENT_H
#define MOP_SEGMENT_H

#include "postgres.h"

#include "access/htup.h"
#include "access/tupdesc.h"
#include "libpq-fe.h"
#include "utils/array.h"

#include "mop.h"

/* The coordinator's own server, as a segment name. */
#define MOP_LOCAL_SEGMENT "local"

/* Is name the local segment? */
static inline bool
mop_segment_is_local(const char *name)
{
	return name == NULL || strcmp(name, MOP_LOCAL_SEGMENT) == 0;
}

/*
 * Connect to segment `server` (a postgres_fdw foreign server) as the
 * current user's mapping, waiting on the latch for at most timeout_s
 * seconds (the server's connect_timeout option, if it has one); check
 * that the segment has mop of this version and pin its search_path.
 * ERRORs: 42704 no such server or no user
 * mapping, 42501 no USAGE on the server, 2F003 a non-superuser's mapping
 * without a password (or a segment that did not ask for it), 28P01 a
 * password the segment refused, 08001 anything else that prevents the
 * connection, 0A000 a segment without mop or with another version.  No
 * password appears in any message.
 */
extern PGconn *mop_segment_connect(const char *server, int timeout_s);

/*
 * Trying a segment without waiting for it (a run's coordinator probing a
 * segment that is down, while it goes on feeding the other workers):
 * mop_segment_probe_start starts a connection as mop_segment_connect
 * makes one (in a transaction: it reads the catalog, and ERRORs as
 * mop_segment_connect does about the server, the mapping, USAGE or the
 * password); mop_segment_probe_poll then advances it without ever
 * waiting, and returns true once the segment answered and has mop of this
 * version, false while it has not yet, with the socket and the events
 * (WL_SOCKET_READABLE, WL_SOCKET_WRITEABLE) to wait for in *sock and
 * *events.  A probe that failed (refused, lost, silent past timeout_s,
 * a refused password, another mop version) ERRORs as mop_segment_connect
 * would, with mop_segment_failed set for what makes the segment down.
 * Either way, mop_segment_probe_end closes and frees it.
 */
typedef struct MopSegmentProbe MopSegmentProbe;

extern MopSegmentProbe *mop_segment_probe_start(const char *server, int timeout_s);
extern bool mop_segment_probe_poll(MopSegmentProbe *p, pgsocket *sock, int *events);
extern void mop_segment_probe_end(MopSegmentProbe *p);

/* Close a connection (NULL is fine). */
extern void mop_segment_disconnect(PGconn *conn);

/*
 * Send a query with parameters (text, or binary where formats[i] is 1) and
 * wait for its single result without blocking interrupts (the connection
 * is non-blocking: sending waits on the latch too); a segment that sends
 * no heartbeat (a NOTICE its mop.train_agg sends every few hundred
 * milliseconds, mop.heartbeat) and no result for timeout_ms is given up:
 * the connection is closed (never PQcancel, which blocks on a frozen
 * server), and the segment's backend ends the query on its own.
 * Each heartbeat's trained-row count goes to progress->rows.  Returns the
 * result (PGRES_TUPLES_OK or PGRES_COMMAND_OK), to be PQclear'ed.  A
 * failure of the connection, or an error of the segment's with a class 08
 * SQLSTATE or 57P01..57P03 (shutting down, crashed, not accepting
 * connections), ERRORs with mop_segment_failed set (the segment is down:
 * the connection is closed and *connp set to NULL); any other error of
 * the query ERRORs with the segment's own SQLSTATE and its message,
 * prefixed with the segment's name (its connection stays usable): an
 * error of the work, not of the segment.
 */
extern PGresult *mop_segment_exec(PGconn **connp, const char *server, const char *sql,
								  int nparams, const char *const *values,
								  const int *lengths, const int *formats,
								  bool binary_result, int timeout_ms,
								  const MopProgress *progress);

/*
 * The two halves of mop_segment_exec (text parameters and results, no
 * timeout), to have several segments work at once: send a query to each,
 * then wait for each one's result.  A failure closes the connection as
 * mop_segment_exec does.
 */
extern void mop_segment_send(PGconn **connp, const char *server, const char *sql,
							 int nparams, const char *const *values);
extern PGresult *mop_segment_result(PGconn **connp, const char *server);

/*
 * Did the last ERROR of mop_segment_connect or mop_segment_exec mean that
 * the segment is unusable (refused or dropped the connection, timed out,
 * refused the credentials) rather than an error of the query?  Reset by
 * each call of either.
 */
extern bool mop_segment_failed;

/*
 * segment_xact.c: the connection to segment `server` (as the current
 * user's mapping) on which the current transaction changes the segment's
 * copies, made with mop_segment_connect(server, timeout_s) and a BEGIN the
 * first time the transaction reaches that segment, then shared by every
 * later call.  Its remote transaction commits at the local pre-commit and
 * is gone on an abort; a subtransaction that aborts undoes its own part.
 * The returned pointer stays valid until the transaction ends; *result
 * is NULL once an ERROR closed the connection.  Never close it: the
 * transaction's end does.  A prepared transaction cannot include one.
 */
extern PGconn **mop_segment_xact_conn(const char *server, int timeout_s);

/* A run's segment connection, kept by a worker across its sub-epochs. */
extern PGconn **mop_segment_worker_conn(void);

/* segment_train.c: one sub-epoch of training on a segment */
typedef struct MopSegmentTrained
{
	bytea	   *state;			/* NULL: no rows trained */
	double		loss_sum;
	double		metric_sum;
	int64		rows;
	bool		diverged;
} MopSegmentTrained;

extern void mop_segment_train(const char *server, int64 remote_dataset_id, int32 partition,
							  bytea *state, int timeout_ms, const MopProgress *progress,
							  MopSegmentTrained *out);

/* segment_place.c: place a dataset mop_prepare just packed (SPI connected) */
extern void mop_place_prepared(const char *name, ArrayType *segments, int replicas);

/* segment_place.c: drop a dataset's copies on its segments (best effort) */
extern void mop_segment_drop_copies(int64 dataset_id);

/*
 * segment_place.c: the steps of a placement, for segment_shard.c too (the
 * caller is connected to SPI; a connection argument is a PGconn ** that an
 * ERROR closes and sets to NULL).
 */
/* the names of a segments => text[] argument, checked (no NULL, empty or twice) */
extern char **mop_segment_names(ArrayType *a, int *n);
/* the name of a dataset's copy on a segment: dataset@sysid/dboid */
extern char *mop_segment_copy_name(const char *name);
/* the dataset's row, locked; with no_live_run refused while a run uses it */
extern HeapTuple mop_segment_lock_dataset(const char *name, bool no_live_run, TupleDesc *td,
										  int64 *id, int *P);
/* create (replacing) the dataset's copy on a segment from its row; its id there */
extern int64 mop_segment_create_copy(PGconn **conn, const char *server, const char *rname,
									 HeapTuple row, TupleDesc td);
/* send partition p's local training buffers to a segment's copy */
extern void mop_segment_send_partition(PGconn **conn, const char *server, int64 local_id,
									   int64 remote_id, int p);
/* copy partition p's training buffers from one segment's copy to another's */
extern void mop_segment_relay_partition(PGconn **src, const char *src_name, int64 src_id,
										PGconn **dst, const char *dst_name, int64 dst_id, int p);
/* record in mop.dataset_segments that segment holds partition p */
extern void mop_segment_record_copy(int64 dataset_id, const char *segment, int p,
									int64 remote_id, const char *rname, int64 buffers,
									int64 bytes);


#endif							/* MOP_SEGMENT_H */
