/*
 * segment_train.c -- one sub-epoch's training on a segment.
 *
 * The narrow waist, run where the partition's copy lives: the same query as
 * a local sub-epoch (MOP_TRAIN_SQL: mop.train_agg over the partition's
 * buffers, in buffer order) on the segment, with the model state sent as a
 * binary bytea parameter and the new state and the sums received in binary,
 * so that nothing is rounded on the way: in deterministic mode a model
 * trained on segments is bit-identical to one trained locally.  The
 * segment writes nothing (the aggregate only reads its buffers); the
 * checkpoint and every catalog row are the caller's, on its own server.
 */
#include "postgres.h"

#include <math.h>

#include "port/pg_bswap.h"

#include "segment.h"

/* A binary float8 or int8 column of the result (network byte order). */
static uint64
binary_u64(const PGresult *res, int col)
{
	uint64		v;

	if (PQgetisnull(res, 0, col) || PQgetlength(res, 0, col) != 8)
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("segment returned a malformed training result (column %d)", col + 1)));
	memcpy(&v, PQgetvalue(res, 0, col), 8);
	return pg_ntoh64(v);
}

static double
binary_float8(const PGresult *res, int col)
{
	uint64		u = binary_u64(res, col);
	double		d;

	memcpy(&d, &u, sizeof(d));
	return d;
}

/* Train state over partition `partition` of dataset remote_dataset_id on `server`. */
void
mop_segment_train(const char *server, int64 remote_dataset_id, int32 partition,
				  bytea *state, int timeout_ms, const MopProgress *progress,
				  MopSegmentTrained *out)
{
	PGconn	  **connp = mop_segment_worker_conn();
	PGresult   *res;
	char		ds[32],
				part[16];
	const char *values[3];
	int			lengths[3];
	int			formats[3] = {1, 0, 0};
	int			len;

	memset(out, 0, sizeof(*out));
	if (*connp == NULL)
	{
		char		per[16];
		const char *pv[1] = {per};

		*connp = mop_segment_connect(server, Max(timeout_ms / 1000, 2));
		/*
		 * the segment shares its cores among this run's workers on it when
		 * its mop.threads_per_worker is automatic
		 */
		snprintf(per, sizeof(per), "%d", Max(mop_workers_per_segment, 1));
		PQclear(mop_segment_exec(connp, server,
								 "SELECT pg_catalog.set_config('mop.workers_per_segment', $1, false)",
								 1, pv, NULL, NULL, false, timeout_ms, NULL));
	}
	snprintf(ds, sizeof(ds), INT64_FORMAT, remote_dataset_id);
	snprintf(part, sizeof(part), "%d", partition);
	values[0] = VARDATA_ANY(state);
	lengths[0] = VARSIZE_ANY_EXHDR(state);
	values[1] = ds;
	values[2] = part;
	lengths[1] = lengths[2] = 0;
	res = mop_segment_exec(connp, server,
						   "SELECT (s.r).state, (s.r).loss_sum, (s.r).metric_sum, (s.r).rows, (s.r).status "
						   "FROM (SELECT mop.train_agg($1::pg_catalog.bytea, b.x, b.y) AS r "
						   "FROM (SELECT x, y FROM mop.buffers WHERE dataset_id OPERATOR(pg_catalog.=) $2::pg_catalog.int8 "
						   "AND split OPERATOR(pg_catalog.=) 'train' AND partition OPERATOR(pg_catalog.=) $3::pg_catalog.int4 "
						   "ORDER BY buffer_no) b) s",
						   3, values, lengths, formats, true, timeout_ms, progress);
	PG_TRY();
	{
		if (PQntuples(res) != 1 || PQnfields(res) != 5)
			ereport(ERROR,
					(errcode(ERRCODE_PROTOCOL_VIOLATION),
					 errmsg("segment \"%s\" returned %d rows for a sub-epoch", server, PQntuples(res))));
		if (!PQgetisnull(res, 0, 0))
		{
			len = PQgetlength(res, 0, 0);
			out->state = (bytea *) palloc(len + VARHDRSZ);
			SET_VARSIZE(out->state, len + VARHDRSZ);
			memcpy(VARDATA(out->state), PQgetvalue(res, 0, 0), len);
			out->loss_sum = binary_float8(res, 1);
			out->metric_sum = binary_float8(res, 2);
			out->rows = (int64) binary_u64(res, 3);
			out->diverged = PQgetisnull(res, 0, 4) ||
				(PQgetlength(res, 0, 4) == 8 && memcmp(PQgetvalue(res, 0, 4), "diverged", 8) == 0) ||
				!isfinite(out->loss_sum);
		}
	}
	PG_FINALLY();
	{
		PQclear(res);
	}
	PG_END_TRY();
}
