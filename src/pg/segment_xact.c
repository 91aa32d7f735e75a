/*
 * segment_xact.c -- a segment's work inside the caller's transaction.
 *
 * mop_place, mop_prepare(..., segments => ...), its sharded form,
 * mop_add_segment, mop_remove_segment and mop_drop_dataset change the
 * segments' copies.  Those changes belong to the caller's transaction:
 * each segment that one of them reaches gets one connection (per segment
 * and role, for the rest of the transaction) on which a transaction is
 * opened and kept open, and these remote transactions commit when the
 * local one is about to commit, or vanish when it aborts.  It is the way
 * postgres_fdw ties its remote transactions to the local one:
 *
 *   - XACT_EVENT_PRE_COMMIT: COMMIT is sent to every segment at once, then
 *     each answer is waited for (a cancel is served); an error aborts the
 *     local transaction.  There is no two-phase commit: a segment that
 *     committed stays committed if a later segment fails to, or if the
 *     local commit fails after the pre-commit callbacks (a serialization
 *     failure, a crash in between).  Its copy is then unused, as a copy
 *     left by an aborted placement always was, and placing the dataset
 *     again under its name replaces it;
 *   - XACT_EVENT_ABORT: every connection is closed.  A closed connection
 *     ends the segment's transaction (its backend rolls back and exits),
 *     and closing never waits on a frozen segment, as a ROLLBACK would;
 *   - XACT_EVENT_PRE_PREPARE: refused.  A remote transaction cannot be
 *     held open until a prepared transaction is committed;
 *   - subtransactions (SAVEPOINT, a PL/pgSQL exception block, the internal
 *     subtransactions of mop_drop_dataset): the remote side follows with
 *     savepoints, set only when a segment is used at a deeper level than
 *     its connection has seen.  A subtransaction that commits releases its
 *     savepoint; one that aborts rolls the segment back to it.  A
 *     connection opened inside the aborting subtransaction is simply
 *     closed (it holds nothing else).  Should the rollback to a savepoint
 *     fail (the segment unreachable, a query still running), the
 *     connection is closed and what the transaction did on that segment
 *     before the savepoint is gone: the transaction can then only roll
 *     back, and its COMMIT fails saying so.
 *
 * A connection that an ERROR closed (mop_segment_exec closes it when the
 * segment fails) stays in the list with no PGconn until the subtransaction
 * or transaction that used it ends, for the same reason.
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "segment.h"

/* How long an aborting subtransaction waits for a segment's ROLLBACK TO SAVEPOINT. */
#define SUBXACT_ROLLBACK_MS 5000

/* A segment's connection that belongs to the current transaction. */
typedef struct XactConn
{
	struct XactConn *next;
	char		server[NAMEDATALEN];
	Oid			userid;			/* the role whose mapping made it */
	PGconn	   *conn;			/* NULL once closed: its work is gone */
	int			level;			/* nesting level that opened the remote transaction */
	int			depth;			/* the remote has savepoints up to this level */
} XactConn;

static XactConn *xact_conns = NULL;
static bool callbacks_registered = false;

static void xact_callback(XactEvent event, void *arg);
static void subxact_callback(SubXactEvent event, SubTransactionId mySubid,
							 SubTransactionId parentSubid, void *arg);

/* Close and forget every connection (at the end of the transaction). */
static void
close_all(void)
{
	XactConn   *c = xact_conns;

	/* detached first: a second abort finds nothing to close again */
	xact_conns = NULL;
	while (c != NULL)
	{
		XactConn   *next = c->next;

		if (c->conn != NULL)
			PQfinish(c->conn);
		pfree(c);
		c = next;
	}
}

/* Close one connection and take it out of the list. */
static void
forget(XactConn *gone)
{
	XactConn  **pp = &xact_conns;

	while (*pp != NULL && *pp != gone)
		pp = &(*pp)->next;
	if (*pp == gone)
		*pp = gone->next;
	if (gone->conn != NULL)
		PQfinish(gone->conn);
	pfree(gone);
}

/* Run a statement on a transaction's connection; ERRORs as mop_segment_exec. */
static void
command(XactConn *c, const char *sql)
{
	PQclear(mop_segment_exec(&c->conn, c->server, sql, 0, NULL, NULL, NULL, false, 0, NULL));
}

/* See segment.h. */
PGconn **
mop_segment_xact_conn(const char *server, int timeout_s)
{
	int			level = GetCurrentTransactionNestLevel();
	Oid			userid = GetUserId();
	XactConn   *c;

	if (!callbacks_registered)
	{
		RegisterXactCallback(xact_callback, NULL);
		RegisterSubXactCallback(subxact_callback, NULL);
		callbacks_registered = true;
	}
	for (c = xact_conns; c != NULL; c = c->next)
		if (c->userid == userid && strcmp(c->server, server) == 0)
			break;
	if (c != NULL && c->conn == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("the connection to segment \"%s\" was lost during this transaction", server),
				 errdetail("What the transaction did on the segment before is gone."),
				 errhint("Roll the transaction back and do its work again.")));
	if (c == NULL)
	{
		PGconn	   *conn = mop_segment_connect(server, timeout_s);

		c = MemoryContextAllocZero(TopMemoryContext, sizeof(XactConn));
		strlcpy(c->server, server, NAMEDATALEN);
		c->userid = userid;
		c->conn = conn;
		c->level = level;
		c->depth = level;
		c->next = xact_conns;
		xact_conns = c;
		/*
		 * READ COMMITTED whatever the segment's default: a copy replaced or
		 * dropped by name must see the latest committed row of that name.
		 * If BEGIN fails, the connection is closed and the entry goes at
		 * the end of the (sub)transaction.
		 */
		command(c, "BEGIN ISOLATION LEVEL READ COMMITTED");
	}
	/* savepoints up to this level, so that an aborting subtransaction undoes only its own */
	while (c->depth < level)
	{
		char		sql[64];

		snprintf(sql, sizeof(sql), "SAVEPOINT mop_s%d", c->depth + 1);
		command(c, sql);
		c->depth++;
	}
	return &c->conn;
}

/*
 * Send sql and wait for its end, at most timeout_ms, serving no interrupt
 * and throwing nothing (for an aborting subtransaction); true if it
 * succeeded.
 */
static bool
exec_quietly(PGconn *conn, const char *sql, int timeout_ms)
{
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms);
	bool		ok = true;
	PGresult   *res;

	if (PQtransactionStatus(conn) == PQTRANS_ACTIVE || !PQsendQuery(conn, sql))
		return false;
	for (;;)
	{
		int			flushed = PQflush(conn);
		long		left;
		int			rc;

		if (flushed < 0)
			return false;
		if (flushed == 0)
		{
			if (!PQconsumeInput(conn))
				return false;
			if (!PQisBusy(conn))
			{
				res = PQgetResult(conn);
				if (res == NULL)
					break;
				ok &= PQresultStatus(res) == PGRES_COMMAND_OK;
				PQclear(res);
				continue;
			}
		}
		left = (long) ((deadline - GetCurrentTimestamp()) / 1000);
		if (left <= 0)
			return false;
		rc = WaitLatchOrSocket(MyLatch,
							   WL_LATCH_SET | WL_SOCKET_READABLE | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH |
							   (flushed > 0 ? WL_SOCKET_WRITEABLE : 0),
							   PQsocket(conn), Min(left, 100L), PG_WAIT_EXTENSION);
		if (rc & WL_LATCH_SET)
			ResetLatch(MyLatch);
	}
	return ok && PQtransactionStatus(conn) == PQTRANS_INTRANS;
}

/* The end of a subtransaction at nesting level `level`. */
static void
subxact_callback(SubXactEvent event, SubTransactionId mySubid,
				 SubTransactionId parentSubid, void *arg)
{
	int			level;
	XactConn   *c,
			   *next;

	if (event != SUBXACT_EVENT_PRE_COMMIT_SUB && event != SUBXACT_EVENT_ABORT_SUB)
		return;
	if (xact_conns == NULL)
		return;
	level = GetCurrentTransactionNestLevel();
	for (c = xact_conns; c != NULL; c = next)
	{
		next = c->next;
		if (c->level >= level)
		{
			/* opened inside this subtransaction: all its work is the subtransaction's */
			if (event == SUBXACT_EVENT_ABORT_SUB)
				forget(c);
			else
				c->level = c->depth = level - 1;
			continue;
		}
		if (c->depth < level)
			continue;			/* not used at this level */
		c->depth = level - 1;
		if (c->conn == NULL)
			continue;			/* lost: the transaction cannot commit */
		if (event == SUBXACT_EVENT_PRE_COMMIT_SUB)
		{
			char		sql[64];

			snprintf(sql, sizeof(sql), "RELEASE SAVEPOINT mop_s%d", level);
			command(c, sql);
		}
		else
		{
			char		sql[96];

			snprintf(sql, sizeof(sql), "ROLLBACK TO SAVEPOINT mop_s%d; RELEASE SAVEPOINT mop_s%d",
					 level, level);
			if (!exec_quietly(c->conn, sql, SUBXACT_ROLLBACK_MS))
			{
				/* what it did before the savepoint goes too: COMMIT will say so */
				elog(WARNING, "could not roll segment \"%s\" back to a savepoint; this transaction can only roll back",
					 c->server);
				PQfinish(c->conn);
				c->conn = NULL;
			}
		}
	}
}

/* Commit every segment's transaction, all at once; ERRORs if one does not commit. */
static void
commit_all(void)
{
	XactConn   *c;

	/* nothing is committed anywhere while one segment's work is known to be gone */
	for (c = xact_conns; c != NULL; c = c->next)
	{
		if (c->conn == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("the connection to segment \"%s\" was lost during this transaction", c->server),
					 errdetail("What the transaction did on the segment is gone, so it cannot commit."),
					 errhint("Roll the transaction back and do its work again.")));
		if (PQtransactionStatus(c->conn) != PQTRANS_INTRANS)
			ereport(ERROR,
					(errcode(ERRCODE_IN_FAILED_SQL_TRANSACTION),
					 errmsg("the transaction on segment \"%s\" cannot commit", c->server),
					 errdetail("An error on the segment was not rolled back to a savepoint.")));
	}
	for (c = xact_conns; c != NULL; c = c->next)
		mop_segment_send(&c->conn, c->server, "COMMIT", 0, NULL);
	for (c = xact_conns; c != NULL; c = c->next)
	{
		PGresult   *res = mop_segment_result(&c->conn, c->server);
		bool		committed = strcmp(PQcmdStatus(res), "COMMIT") == 0;

		PQclear(res);
		if (!committed)
			ereport(ERROR,
					(errcode(ERRCODE_TRANSACTION_ROLLBACK),
					 errmsg("the transaction on segment \"%s\" rolled back instead of committing", c->server)));
	}
}

static void
xact_callback(XactEvent event, void *arg)
{
	if (xact_conns == NULL)
		return;
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
			commit_all();
			close_all();
			break;
		case XACT_EVENT_PRE_PREPARE:
			/* the abort that follows closes the connections */
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot prepare a transaction that changed copies on segments"),
					 errdetail("Its work on segment \"%s\" commits when the transaction commits, which a prepared transaction cannot wait for.",
							   xact_conns->server),
					 errhint("Commit the transaction instead, or place, add, remove or drop in a transaction of its own.")));
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PREPARE:
			close_all();
			break;
		default:
			break;
	}
}
