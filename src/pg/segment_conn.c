/*
 * segment_conn.c -- reaching a segment: a connection as the user's mapped
 * role, and queries that wait without blocking interrupts.
 *
 * A segment is named by a foreign server of postgres_fdw; its options (host,
 * port, dbname, ...) and the current user's user mapping (user, password)
 * become libpq's connection parameters, as postgres_fdw builds them: only
 * libpq's own keywords are passed, the rest (postgres_fdw's options) are
 * ignored.  postgres_fdw's rules hold: the user needs USAGE on the server,
 * and a non-superuser must authenticate with a password (unless a
 * superuser set password_required 'false' on the mapping).  No message of
 * this file shows a connection string or a password; libpq's own messages
 * (which name host and port, never the password) go to the detail.
 *
 * Nothing here blocks in libpq: the connection is made with
 * PQconnectStartParams/PQconnectPoll under a deadline, the connection is
 * non-blocking (a query's parameters, a model state of many megabytes,
 * are flushed as the segment reads them), and the process waits on its
 * latch and the connection's socket, so that a cancel, a terminate or the
 * postmaster's death is seen at once, and the segment's heartbeat is
 * watched.  The segment's mop.train_agg sends a NOTICE "mop heartbeat
 * <rows>" every mop.heartbeat milliseconds (set on the connection); a
 * segment that sends neither a heartbeat nor the result for the caller's
 * timeout is treated as down, like one that drops the connection.
 *
 * A query given up (a timeout, a cancel, a terminate) is not cancelled with
 * PQcancel, which waits for the segment's postmaster to close the cancel
 * connection and so blocks for ever on a frozen server: the connection is
 * closed instead, and the segment's backend, which checks for a closed
 * client every second (client_connection_check_interval, set on the
 * connection) and fails to send its next heartbeat, ends its query.
 */
#include "postgres.h"

#include "catalog/pg_foreign_server.h"
#include "commands/defrem.h"
#include "executor/spi.h"
#include "foreign/foreign.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "segment.h"

bool		mop_segment_failed = false;

/* The heartbeat a connection has seen, updated by notice_receiver. */
typedef struct Heartbeat
{
	TimestampTz at;				/* last heartbeat (or the query's start) */
	int64		rows;			/* rows trained by then */
} Heartbeat;

static Heartbeat beat;

/* The result send_and_wait holds while it waits for the next (cleared on an ERROR). */
static PGresult *pending = NULL;

/* How often the segment's backend checks that its client is still there. */
#define CLIENT_CHECK_MS "1000"

/* An ERROR saying the segment is unusable. */
#define segment_down(code, ...) \
	do { mop_segment_failed = true; ereport(ERROR, (errcode(code), __VA_ARGS__)); } while (0)

/* Is kw one of libpq's connection keywords (and not a debug option)? */
static bool
is_libpq_option(const char *kw)
{
	static PQconninfoOption *defaults = NULL;

	if (defaults == NULL)
	{
		defaults = PQconndefaults();
		if (defaults == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory")));
	}
	for (PQconninfoOption *o = defaults; o->keyword; o++)
		if (strcmp(o->keyword, kw) == 0)
			return strchr(o->dispchar, 'D') == NULL && strcmp(kw, "replication") != 0;
	return false;
}

/* Does the mapping require a password (postgres_fdw's password_required)? */
static bool
password_required(UserMapping *um)
{
	ListCell   *lc;

	foreach(lc, um->options)
	{
		DefElem    *d = lfirst(lc);

		if (strcmp(d->defname, "password_required") == 0)
			return defGetBoolean(d);
	}
	return true;
}

static bool
has_option(List *options, const char *name)
{
	ListCell   *lc;

	foreach(lc, options)
		if (strcmp(((DefElem *) lfirst(lc))->defname, name) == 0)
			return true;
	return false;
}

/* Record a heartbeat; ignore every other notice of the segment. */
static void
notice_receiver(void *arg, const PGresult *res)
{
	const char *msg = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
	long long	rows;

	if (msg != NULL && sscanf(msg, "mop heartbeat %lld", &rows) == 1)
	{
		beat.at = GetCurrentTimestamp();
		beat.rows = rows;
	}
}

/* The version of mop in this database (cached: it cannot change under a query). */
static const char *
local_version(void)
{
	static char version[64] = "";

	if (version[0] == '\0')
	{
		bool		isnull;
		Datum		d;

		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		if (SPI_execute("SELECT e.extversion FROM pg_catalog.pg_extension e "
						"WHERE e.extname OPERATOR(pg_catalog.=) 'mop'", true, 1) != SPI_OK_SELECT ||
			SPI_processed != 1)
			elog(ERROR, "mop is not installed in this database");
		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
		strlcpy(version, TextDatumGetCString(d), sizeof(version));
		SPI_finish();
	}
	return version;
}

static PGresult *send_and_wait(PGconn **connp, const char *server, const char *sql,
								int nparams, const char *const *values, const int *lengths,
								const int *formats, bool binary_result, int timeout_ms,
								const MopProgress *progress);

/*
 * Drive a connection started by PQconnectStartParams to its end, waiting
 * on the latch and the socket: interrupts are served, and at most
 * timeout_s seconds pass (0: no limit), as libpq's connect_timeout would
 * in a blocking connect.  ERRORs (class 08) on a timeout; the caller
 * closes the connection.
 */
static void
connect_poll(PGconn *conn, const char *server, int timeout_s)
{
	PostgresPollingStatusType st = PGRES_POLLING_WRITING;
	TimestampTz deadline = timeout_s > 0 ?
		TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_s * 1000) : 0;

	if (PQstatus(conn) == CONNECTION_BAD)
		return;
	while (st != PGRES_POLLING_OK && st != PGRES_POLLING_FAILED)
	{
		int			io = st == PGRES_POLLING_READING ? WL_SOCKET_READABLE : WL_SOCKET_WRITEABLE;
		long		wait_ms = 1000;
		int			rc;

		if (deadline != 0)
		{
			TimestampTz now = GetCurrentTimestamp();

			if (now >= deadline)
			{
				/* as libpq says it; the status stays short of CONNECTION_OK */
				segment_down(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
							 errmsg("could not connect to segment \"%s\"", server),
							 errdetail("timeout expired after %d s", timeout_s),
							 errhint("Check that the segment's server is running and that the options of foreign server %s are right.",
									 quote_identifier(server)));
			}
			wait_ms = Min(wait_ms, (long) ((deadline - now) / 1000) + 1);
		}
		rc = WaitLatchOrSocket(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH | io,
							   PQsocket(conn), wait_ms, PG_WAIT_EXTENSION);
		if (rc & WL_LATCH_SET)
			ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (rc & io)
			st = PQconnectPoll(conn);
	}
}

/*
 * Start a connection to segment `server` as the current user's mapping
 * (PQconnectStartParams: nothing is waited for yet).  Checks what the
 * catalog says first: the server, its wrapper, USAGE, the mapping, a
 * password.  *connect_s: how long the connection may take (0: no limit);
 * *check_password: whether the segment must have asked for the password.
 */
static PGconn *
start_connection(const char *server, int timeout_s, int *connect_s, bool *check_password)
{
	ForeignServer *fs;
	ForeignDataWrapper *fdw;
	UserMapping *um;
	AclResult	acl;
	const char **kw;
	const char **val;
	int			n = 0;
	ListCell   *lc;
	PGconn	   *conn;
	char		timeout[16];

	*connect_s = Max(timeout_s, 2);
	fs = GetForeignServerByName(server, true);
	if (fs == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("segment \"%s\" does not exist", server),
				 errhint("A segment is a foreign server of postgres_fdw: CREATE SERVER %s FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '...', port '...', dbname '...'), with a USER MAPPING; or 'local' for this server.",
						 quote_identifier(server))));
	fdw = GetForeignDataWrapper(fs->fdwid);
	if (strcmp(fdw->fdwname, "postgres_fdw") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("segment \"%s\" is not a postgres_fdw server", server),
				 errdetail("Its foreign-data wrapper is %s.", fdw->fdwname)));
	acl = pg_foreign_server_aclcheck(fs->serverid, GetUserId(), ACL_USAGE);
	if (acl != ACLCHECK_OK)
		aclcheck_error(acl, OBJECT_FOREIGN_SERVER, fs->servername);
	/* ERRORs 42704 "user mapping not found" itself */
	um = GetUserMapping(GetUserId(), fs->serverid);
	*check_password = !superuser() && password_required(um);
	if (*check_password && !has_option(um->options, "password"))
		segment_down(ERRCODE_S_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED,
					 errmsg("password is required to reach segment \"%s\"", server),
					 errdetail("Non-superusers must give a password in their user mapping."),
					 errhint("ALTER USER MAPPING FOR CURRENT_USER SERVER %s OPTIONS (ADD password '...').",
							 quote_identifier(server)));

	kw = palloc(sizeof(char *) * (list_length(fs->options) + list_length(um->options) + 4));
	val = palloc(sizeof(char *) * (list_length(fs->options) + list_length(um->options) + 4));
	foreach(lc, fs->options)
	{
		DefElem    *d = lfirst(lc);

		if (is_libpq_option(d->defname))
		{
			kw[n] = d->defname;
			val[n++] = defGetString(d);
		}
	}
	foreach(lc, um->options)
	{
		DefElem    *d = lfirst(lc);

		if (is_libpq_option(d->defname))
		{
			kw[n] = d->defname;
			val[n++] = defGetString(d);
		}
	}
	if (has_option(fs->options, "connect_timeout"))
	{
		/* the server's own: PQconnectPoll leaves it to its caller */
		foreach(lc, fs->options)
		{
			DefElem    *d = lfirst(lc);

			if (strcmp(d->defname, "connect_timeout") == 0)
				*connect_s = atoi(defGetString(d));
		}
		*connect_s = *connect_s <= 0 ? 0 : Max(*connect_s, 2);
	}
	else
	{
		snprintf(timeout, sizeof(timeout), "%d", *connect_s);
		kw[n] = "connect_timeout";
		val[n++] = timeout;
	}
	kw[n] = "fallback_application_name";
	val[n++] = "mop";
	kw[n] = "client_encoding";
	val[n++] = GetDatabaseEncodingName();
	kw[n] = NULL;
	val[n] = NULL;

	conn = PQconnectStartParams(kw, val, false);
	pfree(kw);
	pfree(val);
	if (conn == NULL)
		segment_down(ERRCODE_OUT_OF_MEMORY,
					 errmsg("could not connect to segment \"%s\": out of memory", server));
	return conn;
}

/*
 * A connection that PQconnectPoll has driven to its end: ERROR (the
 * connection closed) unless it is made and, where check_password, made
 * with the password; then set it up for mop (heartbeats to the notice
 * receiver, non-blocking).
 */
static void
connection_made(PGconn *conn, const char *server, bool check_password)
{
	if (PQstatus(conn) != CONNECTION_OK)
	{
		char	   *msg = pchomp(PQerrorMessage(conn));
		bool		bad_password = PQconnectionNeedsPassword(conn) ||
			strstr(msg, "password authentication failed") != NULL;

		PQfinish(conn);
		segment_down(bad_password ? ERRCODE_INVALID_PASSWORD :
					 ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
					 errmsg("could not connect to segment \"%s\"", server),
					 errdetail_internal("%s", msg),
					 bad_password ?
					 errhint("Check the password of the user mapping for %s on server %s.",
							 GetUserNameFromId(GetUserId(), false), quote_identifier(server)) :
					 errhint("Check that the segment's server is running and that the options of foreign server %s are right.",
							 quote_identifier(server)));
	}
	if (check_password && !PQconnectionUsedPassword(conn))
	{
		PQfinish(conn);
		segment_down(ERRCODE_S_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED,
					 errmsg("password is required to reach segment \"%s\"", server),
					 errdetail("Segment \"%s\" did not ask for the password: non-superusers must authenticate with one.", server),
					 errhint("Make the segment's pg_hba.conf require a password for this role."));
	}
	PQsetNoticeReceiver(conn, notice_receiver, NULL);
	if (PQsetnonblocking(conn, 1) != 0)
	{
		char	   *msg = pchomp(PQerrorMessage(conn));

		PQfinish(conn);
		segment_down(ERRCODE_CONNECTION_FAILURE,
					 errmsg("could not set up the connection to segment \"%s\"", server),
					 errdetail_internal("%s", msg));
	}
}

/*
 * The first query on a connection: pin the session's search_path (every
 * query mop sends is schema-qualified anyway), ask for heartbeats, and
 * read mop's version, which must be this server's: a model state is only
 * understood by the same version.
 */
#define SETUP_SQL \
	"SELECT pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', false), " \
	"pg_catalog.set_config('mop.heartbeat', '200', false), " \
	"pg_catalog.set_config('client_min_messages', 'notice', false), " \
	"(SELECT e.extversion FROM pg_catalog.pg_extension e " \
	"WHERE e.extname OPERATOR(pg_catalog.=) 'mop')"

/* Check SETUP_SQL's result (which is cleared); ERRORs, the connection left to the caller. */
static void
check_setup(PGresult *res, const char *server)
{
	const char *version = local_version();

	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1 || PQnfields(res) != 4)
	{
		char	   *msg = pchomp(PQresultErrorMessage(res));

		PQclear(res);
		segment_down(ERRCODE_CONNECTION_FAILURE,
					 errmsg("could not set up the connection to segment \"%s\"", server),
					 errdetail_internal("%s", msg));
	}
	if (PQgetisnull(res, 0, 3) || strcmp(PQgetvalue(res, 0, 3), version) != 0)
	{
		char	   *theirs = PQgetisnull(res, 0, 3) ? NULL : pstrdup(PQgetvalue(res, 0, 3));

		PQclear(res);
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 theirs ? errmsg("segment \"%s\" has mop %s, this server %s", server, theirs, version) :
				 errmsg("segment \"%s\" does not have mop installed", server),
				 errhint("Install the same version of mop in the segment's database (CREATE EXTENSION mop, or ALTER EXTENSION mop UPDATE).")));
	}
	PQclear(res);
}

/* Connect to segment `server` as the current user's mapping. */
PGconn *
mop_segment_connect(const char *server, int timeout_s)
{
	PGconn	   *conn;
	PGconn	  **connp;
	bool		check_password;
	int			connect_s;

	mop_segment_failed = false;
	(void) local_version();		/* read before a connection needs closing */
	conn = start_connection(server, timeout_s, &connect_s, &check_password);
	PG_TRY();
	{
		connect_poll(conn, server, connect_s);
	}
	PG_CATCH();
	{
		/* a cancel or a terminate while connecting */
		PQfinish(conn);
		PG_RE_THROW();
	}
	PG_END_TRY();
	connection_made(conn, server, check_password);

	/* the setup waits as any query does, for at most the connection's timeout */
	connp = palloc(sizeof(PGconn *));
	*connp = conn;
	PG_TRY();
	{
		check_setup(send_and_wait(connp, server, SETUP_SQL, 0, NULL, NULL, NULL, false,
								  connect_s * 1000, NULL), server);

		/*
		 * A backend that lost its client ends its query within a second
		 * (see the head comment); best effort: a platform that cannot
		 * check refuses the setting, which changes nothing else.
		 */
		PQclear(send_and_wait(connp, server,
							  "SELECT pg_catalog.set_config('client_connection_check_interval', '" CLIENT_CHECK_MS "', false)",
							  0, NULL, NULL, NULL, false, connect_s * 1000, NULL));
	}
	PG_CATCH();
	{
		if (pending)
			PQclear(pending);
		pending = NULL;
		if (*connp != NULL)
			PQfinish(*connp);
		*connp = NULL;
		PG_RE_THROW();
	}
	PG_END_TRY();
	conn = *connp;
	pfree(connp);
	return conn;
}

/* ------------------------------------------------------------------------
 * Probes: trying a segment without waiting for it
 * ------------------------------------------------------------------------ */

struct MopSegmentProbe
{
	char		server[NAMEDATALEN];
	PGconn	   *conn;			/* NULL once finished */
	bool		check_password;
	PostgresPollingStatusType st;	/* PQconnectPoll's last answer */
	bool		setup_sent;		/* connected; SETUP_SQL sent */
	PGresult   *last;			/* SETUP_SQL's last result so far */
	int			connect_s;		/* how long it may take; 0: no limit */
	TimestampTz deadline;		/* when that is over */
};

/* See segment.h. */
MopSegmentProbe *
mop_segment_probe_start(const char *server, int timeout_s)
{
	MopSegmentProbe *p;
	int			connect_s;
	bool		check_password;
	PGconn	   *conn;

	mop_segment_failed = false;
	(void) local_version();		/* needs a transaction, which polling does not */
	conn = start_connection(server, timeout_s, &connect_s, &check_password);
	p = MemoryContextAllocZero(TopMemoryContext, sizeof(MopSegmentProbe));
	strlcpy(p->server, server, NAMEDATALEN);
	p->conn = conn;
	p->check_password = check_password;
	p->st = PQstatus(conn) == CONNECTION_BAD ? PGRES_POLLING_FAILED : PGRES_POLLING_WRITING;
	p->connect_s = connect_s;
	p->deadline = connect_s > 0 ?
		TimestampTzPlusMilliseconds(GetCurrentTimestamp(), connect_s * 1000) : 0;
	return p;
}

/* Is the socket ready for io now (no wait)? */
static bool
socket_ready(pgsocket sock, int io)
{
	return (WaitLatchOrSocket(NULL, io | WL_TIMEOUT, sock, 0L, PG_WAIT_EXTENSION) & io) != 0;
}

/* The probe failed: close it and ERROR as mop_segment_connect would. */
static void pg_attribute_noreturn()
probe_failed(MopSegmentProbe *p, int code, const char *what)
{
	char	   *msg = pchomp(PQerrorMessage(p->conn));

	if (p->last)
		PQclear(p->last);
	p->last = NULL;
	PQfinish(p->conn);
	p->conn = NULL;
	segment_down(code,
				 errmsg("could not connect to segment \"%s\"", p->server),
				 errdetail_internal("%s", what ? what : msg));
}

/* See segment.h. */
bool
mop_segment_probe_poll(MopSegmentProbe *p, pgsocket *sock, int *events)
{
	mop_segment_failed = false;
	if (p->conn == NULL)
		elog(ERROR, "mop_segment_probe_poll on a finished probe");
	if (p->deadline != 0 && GetCurrentTimestamp() >= p->deadline)
		probe_failed(p, ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
					 psprintf("timeout expired after %d s", p->connect_s));
	/* connecting: one step of PQconnectPoll each time the socket is ready */
	while (!p->setup_sent)
	{
		if (p->st == PGRES_POLLING_FAILED || p->st == PGRES_POLLING_OK)
		{
			PGconn	   *conn = p->conn;

			p->conn = NULL;		/* connection_made closes it on an ERROR */
			connection_made(conn, p->server, p->check_password);
			p->conn = conn;
			if (!PQsendQuery(p->conn, SETUP_SQL))
				probe_failed(p, ERRCODE_CONNECTION_FAILURE, NULL);
			p->setup_sent = true;
			break;
		}
		*sock = PQsocket(p->conn);
		*events = p->st == PGRES_POLLING_READING ? WL_SOCKET_READABLE : WL_SOCKET_WRITEABLE;
		if (*sock == PGINVALID_SOCKET || !socket_ready(*sock, *events))
			return false;
		p->st = PQconnectPoll(p->conn);
	}
	/* the setup query: sent as the socket takes it, answered as it comes */
	*sock = PQsocket(p->conn);
	for (;;)
	{
		int			flushed = PQflush(p->conn);
		PGresult   *res;

		if (flushed < 0)
			probe_failed(p, ERRCODE_CONNECTION_FAILURE, NULL);
		if (flushed > 0)
		{
			*events = WL_SOCKET_WRITEABLE | WL_SOCKET_READABLE;
			return false;
		}
		if (!PQconsumeInput(p->conn))
			probe_failed(p, ERRCODE_CONNECTION_FAILURE, NULL);
		if (PQisBusy(p->conn))
		{
			*events = WL_SOCKET_READABLE;
			return false;
		}
		res = PQgetResult(p->conn);
		if (res == NULL)
			break;
		if (p->last)
			PQclear(p->last);
		p->last = res;
	}
	if (p->last == NULL)
		probe_failed(p, ERRCODE_CONNECTION_FAILURE, NULL);
	{
		PGresult   *res = p->last;

		p->last = NULL;
		check_setup(res, p->server);
	}
	return true;
}

/* See segment.h. */
void
mop_segment_probe_end(MopSegmentProbe *p)
{
	if (p == NULL)
		return;
	if (p->last)
		PQclear(p->last);
	if (p->conn != NULL)
		PQfinish(p->conn);
	pfree(p);
}

void
mop_segment_disconnect(PGconn *conn)
{
	if (conn != NULL)
		PQfinish(conn);
}

/* The connection failed: close it and say the segment is down. */
static void pg_attribute_noreturn()
connection_lost(PGconn **connp, const char *server, const char *what)
{
	char	   *msg = pchomp(PQerrorMessage(*connp));

	PQfinish(*connp);
	*connp = NULL;
	segment_down(ERRCODE_CONNECTION_FAILURE,
				 errmsg("lost the connection to segment \"%s\" %s", server, what),
				 errdetail_internal("%s", msg));
}

/*
 * Wait for the socket (readable, and writeable while flushing), the latch
 * or 100 ms; serve interrupts, read what came, pass heartbeats on, and
 * give up on a segment silent for timeout_ms.
 */
static void
wait_socket(PGconn **connp, const char *server, bool flushing, int timeout_ms,
			const MopProgress *progress, int64 *rows_seen)
{
	PGconn	   *conn = *connp;
	int			rc;

	rc = WaitLatchOrSocket(MyLatch,
						   WL_LATCH_SET | WL_SOCKET_READABLE | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH |
						   (flushing ? WL_SOCKET_WRITEABLE : 0),
						   PQsocket(conn), 100L, PG_WAIT_EXTENSION);
	if (rc & WL_LATCH_SET)
		ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
	if ((rc & WL_SOCKET_READABLE) && !PQconsumeInput(conn))
		connection_lost(connp, server, flushing ? "while sending a query" : "while it trained");
	if (beat.rows > *rows_seen)
	{
		if (progress != NULL && progress->rows != NULL)
			progress->rows(progress->arg, beat.rows - *rows_seen);
		*rows_seen = beat.rows;
	}
	if (timeout_ms > 0 &&
		TimestampDifferenceExceeds(beat.at, GetCurrentTimestamp(), timeout_ms))
	{
		/* no PQcancel: it blocks on a frozen segment (see the head comment) */
		PQfinish(conn);
		*connp = NULL;
		segment_down(ERRCODE_CONNECTION_FAILURE,
					 errmsg("segment \"%s\" made no progress for %d ms", server, timeout_ms),
					 errhint("mop.segment_timeout sets how long a segment may stay silent."));
	}
}

/* Send a query (flushing it all); ERRORs (class 08) if the connection fails. */
static void
send_query(PGconn **connp, const char *server, const char *sql, int nparams,
		   const char *const *values, const int *lengths, const int *formats,
		   bool binary_result, int timeout_ms, const MopProgress *progress)
{
	int64		rows_seen = 0;

	beat.at = GetCurrentTimestamp();
	beat.rows = 0;
	if (!PQsendQueryParams(*connp, sql, nparams, NULL, values, lengths, formats,
						   binary_result ? 1 : 0))
		connection_lost(connp, server, "while sending a query");
	for (;;)
	{
		int			r = PQflush(*connp);

		if (r == 0)
			break;
		if (r < 0)
			connection_lost(connp, server, "while sending a query");
		wait_socket(connp, server, true, timeout_ms, progress, &rows_seen);
	}
}

/*
 * Wait for the last result of the query sent, which is returned whatever
 * its status; ERRORs (class 08, the connection closed and *connp NULL) if
 * the connection fails or the segment stays silent for timeout_ms.
 */
static PGresult *
wait_result(PGconn **connp, const char *server, int timeout_ms, const MopProgress *progress)
{
	int64		rows_seen = 0;
	PGresult   *last;

	if (pending)
		PQclear(pending);		/* left by an ERROR that nobody cleaned up */
	pending = NULL;
	for (;;)
	{
		PGresult   *res;

		while (PQisBusy(*connp))
			wait_socket(connp, server, false, timeout_ms, progress, &rows_seen);
		res = PQgetResult(*connp);
		if (res == NULL)
			break;
		if (pending)
			PQclear(pending);
		pending = res;
	}
	last = pending;
	pending = NULL;
	if (last == NULL)
		connection_lost(connp, server, "before it answered");
	return last;
}

/* Send a query and wait for its last result (see send_query and wait_result). */
static PGresult *
send_and_wait(PGconn **connp, const char *server, const char *sql, int nparams,
			  const char *const *values, const int *lengths, const int *formats,
			  bool binary_result, int timeout_ms, const MopProgress *progress)
{
	send_query(connp, server, sql, nparams, values, lengths, formats, binary_result,
			   timeout_ms, progress);
	return wait_result(connp, server, timeout_ms, progress);
}

/*
 * Close the connection and re-throw: whatever was half sent or received
 * goes with the connection, and the segment's backend ends the query (see
 * the head comment).  For a cancel, a terminate, a progress callback's
 * ERROR, a lost or silent segment.
 */
static void pg_attribute_noreturn()
drop_and_rethrow(PGconn **connp)
{
	if (pending)
		PQclear(pending);
	pending = NULL;
	if (*connp != NULL)
	{
		PQfinish(*connp);
		*connp = NULL;
	}
	PG_RE_THROW();
}

/*
 * A query's result: returned if it succeeded; else ERROR, with class 08 if
 * the connection is gone, or with the segment's own SQLSTATE and message.
 */
static PGresult *
check_result(PGconn **connp, const char *server, PGresult *res)
{
	ExecStatusType st = PQresultStatus(res);

	if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK)
		return res;
	if (PQstatus(*connp) != CONNECTION_OK)
	{
		PQclear(res);
		connection_lost(connp, server, "while it ran a query");
	}
	{
		const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
		char	   *msg = pstrdup(PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) ?
								  PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : "unknown error");
		const char *d = PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL);
		const char *h = PQresultErrorField(res, PG_DIAG_MESSAGE_HINT);
		char	   *detail = d ? pstrdup(d) : NULL;
		char	   *hint = h ? pstrdup(h) : NULL;
		int			code = ERRCODE_INTERNAL_ERROR;

		if (state != NULL && strlen(state) == 5)
			code = MAKE_SQLSTATE(state[0], state[1], state[2], state[3], state[4]);
		PQclear(res);

		/*
		 * Errors of the connection or the server (class 08; the segment
		 * shutting down, crashed or not accepting connections: 57P01..03)
		 * mean the segment is down: the sub-epoch can run elsewhere.  Any
		 * other error is one of the work -- the data, the model, the
		 * segment's limits -- which another copy would not mend: it fails
		 * the model, with the segment's SQLSTATE and message.
		 */
		if (ERRCODE_TO_CATEGORY(code) == ERRCODE_CONNECTION_EXCEPTION ||
			code == ERRCODE_ADMIN_SHUTDOWN || code == ERRCODE_CRASH_SHUTDOWN ||
			code == ERRCODE_CANNOT_CONNECT_NOW)
		{
			PQfinish(*connp);
			*connp = NULL;
			segment_down(code,
						 errmsg("segment \"%s\" is unusable: %s", server, msg),
						 detail ? errdetail_internal("%s", detail) : 0);
		}
		ereport(ERROR,
				(errcode(code),
				 errmsg("segment \"%s\": %s", server, msg),
				 detail ? errdetail_internal("%s", detail) : 0,
				 hint ? errhint("%s", hint) : 0));
	}
	return NULL;				/* not reached */
}

/* Send a query and wait for its result; see segment.h. */
PGresult *
mop_segment_exec(PGconn **connp, const char *server, const char *sql, int nparams,
				 const char *const *values, const int *lengths, const int *formats,
				 bool binary_result, int timeout_ms, const MopProgress *progress)
{
	PGresult   *res = NULL;

	mop_segment_failed = false;
	PG_TRY();
	{
		res = send_and_wait(connp, server, sql, nparams, values, lengths, formats,
							binary_result, timeout_ms, progress);
	}
	PG_CATCH();
	{
		drop_and_rethrow(connp);
	}
	PG_END_TRY();
	return check_result(connp, server, res);
}

/* Send a query without waiting for its result; see segment.h. */
void
mop_segment_send(PGconn **connp, const char *server, const char *sql, int nparams,
				 const char *const *values)
{
	mop_segment_failed = false;
	PG_TRY();
	{
		send_query(connp, server, sql, nparams, values, NULL, NULL, false, 0, NULL);
	}
	PG_CATCH();
	{
		drop_and_rethrow(connp);
	}
	PG_END_TRY();
}

/* Wait for the result of what mop_segment_send sent; see segment.h. */
PGresult *
mop_segment_result(PGconn **connp, const char *server)
{
	PGresult   *res = NULL;

	mop_segment_failed = false;
	PG_TRY();
	{
		res = wait_result(connp, server, 0, NULL);
	}
	PG_CATCH();
	{
		drop_and_rethrow(connp);
	}
	PG_END_TRY();
	return check_result(connp, server, res);
}

/* A worker's connection to its segment, kept across its sub-epochs. */
PGconn **
mop_segment_worker_conn(void)
{
	static PGconn *conn = NULL;

	return &conn;
}
