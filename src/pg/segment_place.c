/*
 * segment_place.c -- placing a dataset's training partitions on segments.
 *
 * mop_place(dataset, segments, replicas) (and mop_prepare(..., segments =>
 * ...), which calls it once the rows are packed) gives partition p to the
 * segments segments[(p + r) % S] for r < replicas: replicas copies on
 * distinct segments, spread evenly (an availability matrix as in Cerebro
 * standalone).  A remote segment receives a
 * mop.datasets row (the dataset's shapes, labels and statistics, named
 * "<dataset>@<this cluster's system identifier>/<this database's oid>" so
 * that two coordinators never collide) and the partitions' training
 * buffers, inserted as the user's mapped role: the segment's row-level
 * security keeps them that role's.  A partition that 'local' does not hold
 * has its local training buffers deleted (the data now lives on the
 * segments); the validation split always stays here, where a run
 * validates.  mop.dataset_segments records the placement.
 *
 * The buffers are read from this server, so placing again needs every
 * training partition here: a dataset whose partitions live only on
 * segments is placed anew by preparing it again.  Every change on a
 * segment (a copy created or replaced, partitions added, a copy dropped)
 * is made in the caller's transaction's connection to that segment
 * (segment_xact.c): it commits just before the caller's transaction does,
 * and vanishes if that one (or the subtransaction that made it) aborts.
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "segment.h"

PG_FUNCTION_INFO_V1(mop_place);

/* The dataset's columns a segment's copy needs, in INSERT order. */
#define DATASET_COLS \
	"source, features, feature_kind, input_shape, n_features, target, target_kind, " \
	"target_type, labels, normalized, feature_mean, feature_std, partitions, " \
	"buffer_rows, validation, train_rows, valid_rows, seed"
#define N_DATASET_COLS 18

#define REMOTE_DATASET_SQL \
	"INSERT INTO mop.datasets (name, " DATASET_COLS ") VALUES ($1, $2, $3::pg_catalog.text[], " \
	"$4, $5::pg_catalog.int4[], $6::pg_catalog.int4, $7, $8, $9, $10::pg_catalog.jsonb, " \
	"$11::pg_catalog.bool, $12::pg_catalog.float8[], $13::pg_catalog.float8[], " \
	"$14::pg_catalog.int4, $15::pg_catalog.int4, $16::pg_catalog.float8, $17::pg_catalog.int8, " \
	"$18::pg_catalog.int8, $19::pg_catalog.int4) RETURNING id"

#define REMOTE_BUFFER_SQL \
	"INSERT INTO mop.buffers (dataset_id, split, partition, buffer_no, rows, x, y) " \
	"VALUES ($1::pg_catalog.int8, 'train', $2::pg_catalog.int4, $3::pg_catalog.int4, " \
	"$4::pg_catalog.int4, $5::pg_catalog.bytea, $6::pg_catalog.bytea)"

typedef struct Placed
{
	char	   *segment;
	int			n_parts;
	int		   *parts;			/* partitions it holds */
	int64		buffers;
	int64		bytes;
	int64		remote_id;		/* 0 for local */
} Placed;

/* The segment names of a text[] argument, checked. */
char **
mop_segment_names(ArrayType *a, int *n)
{
	Datum	   *elems;
	bool	   *nulls;
	char	  **out;

	if (ARR_NDIM(a) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("segments must be a one-dimensional array")));
	deconstruct_array(a, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, n);
	if (*n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("segments must name at least one segment"),
				 errhint("Give 'local' for this server and foreign servers of postgres_fdw for others, e.g. ARRAY['local', 'seg1'].")));
	out = palloc(sizeof(char *) * *n);
	for (int i = 0; i < *n; i++)
	{
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("segments must not contain NULL")));
		out[i] = TextDatumGetCString(elems[i]);
		if (out[i][0] == '\0')
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("segments must not contain an empty name")));
		for (int j = 0; j < i; j++)
			if (strcmp(out[i], out[j]) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("segment \"%s\" is named twice", out[i]),
						 errhint("Copies of a partition go to distinct segments; replicas => sets how many.")));
	}
	return out;
}

/* The name of a dataset's copy on a segment. */
char *
mop_segment_copy_name(const char *name)
{
	return psprintf("%s@" UINT64_FORMAT "/%u", name, GetSystemIdentifier(), MyDatabaseId);
}

/* Create the dataset's copy on a segment (replacing an earlier one); its id there. */
int64
mop_segment_create_copy(PGconn **conn, const char *server, const char *rname,
					  HeapTuple row, TupleDesc td)
{
	const char *values[N_DATASET_COLS + 1];
	PGresult   *res;
	int64		id;
	const char *del = "DELETE FROM mop.datasets WHERE name OPERATOR(pg_catalog.=) $1";

	values[0] = rname;
	res = mop_segment_exec(conn, server, del, 1, values, NULL, NULL, false, 0, NULL);
	PQclear(res);
	for (int i = 0; i < N_DATASET_COLS; i++)
		values[i + 1] = SPI_getvalue(row, td, i + 2);	/* after the id */
	res = mop_segment_exec(conn, server, REMOTE_DATASET_SQL, N_DATASET_COLS + 1, values,
						   NULL, NULL, false, 0, NULL);
	/* what the segment answers is checked like any other input */
	if (PQntuples(res) != 1 || PQnfields(res) != 1 || PQgetisnull(res, 0, 0))
	{
		int			rows = PQntuples(res);

		PQclear(res);
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("segment \"%s\" did not create the copy of the dataset", server),
				 errdetail("Its INSERT INTO mop.datasets ... RETURNING id returned %d rows.", rows),
				 errhint("A trigger or rule on the segment's mop.datasets may be skipping the row.")));
	}
	id = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	return id;
}

/* Send partition p's local training buffers to a segment. */
void
mop_segment_send_partition(PGconn **conn, const char *server, int64 local_id, int64 remote_id, int p)
{
	Oid			t[2] = {INT8OID, INT4OID};
	Datum		v[2] = {Int64GetDatum(local_id), Int32GetDatum(p)};
	char		rid[32],
				part[16];

	snprintf(rid, sizeof(rid), INT64_FORMAT, remote_id);
	snprintf(part, sizeof(part), "%d", p);
	if (SPI_execute_with_args("SELECT buffer_no, rows, x, y FROM mop.buffers "
							  "WHERE dataset_id OPERATOR(pg_catalog.=) $1 "
							  "AND split OPERATOR(pg_catalog.=) 'train' "
							  "AND partition OPERATOR(pg_catalog.=) $2 ORDER BY buffer_no",
							  2, t, v, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the training buffers of partition %d", p);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	td = SPI_tuptable->tupdesc;
		bool		isnull;
		bytea	   *x = DatumGetByteaPP(SPI_getbinval(tup, td, 3, &isnull));
		bytea	   *y = DatumGetByteaPP(SPI_getbinval(tup, td, 4, &isnull));
		char		no[16],
					rows[16];
		const char *values[6];
		int			lengths[6] = {0, 0, 0, 0, 0, 0};
		int			formats[6] = {0, 0, 0, 0, 1, 1};
		PGresult   *res;

		snprintf(no, sizeof(no), "%d", DatumGetInt32(SPI_getbinval(tup, td, 1, &isnull)));
		snprintf(rows, sizeof(rows), "%d", DatumGetInt32(SPI_getbinval(tup, td, 2, &isnull)));
		values[0] = rid;
		values[1] = part;
		values[2] = no;
		values[3] = rows;
		values[4] = VARDATA_ANY(x);
		lengths[4] = VARSIZE_ANY_EXHDR(x);
		values[5] = VARDATA_ANY(y);
		lengths[5] = VARSIZE_ANY_EXHDR(y);
		CHECK_FOR_INTERRUPTS();
		res = mop_segment_exec(conn, server, REMOTE_BUFFER_SQL, 6, values, lengths, formats,
							   false, 0, NULL);
		PQclear(res);
	}
	SPI_freetuptable(SPI_tuptable);
}

/*
 * Copy partition p's training buffers from one segment's copy (src, its
 * copy's id src_id there) to another's (dst, dst_id): a partition that is
 * not on this server any more travels through it, buffer by buffer.
 */
void
mop_segment_relay_partition(PGconn **src, const char *src_name, int64 src_id,
				PGconn **dst, const char *dst_name, int64 dst_id, int p)
{
	char		sid[32],
				did[32],
				part[16];
	const char *values[6];
	PGresult   *res;

	snprintf(sid, sizeof(sid), INT64_FORMAT, src_id);
	snprintf(did, sizeof(did), INT64_FORMAT, dst_id);
	snprintf(part, sizeof(part), "%d", p);
	values[0] = sid;
	values[1] = part;
	res = mop_segment_exec(src, src_name,
						   "SELECT buffer_no::pg_catalog.text, rows::pg_catalog.text, x, y FROM mop.buffers "
						   "WHERE dataset_id OPERATOR(pg_catalog.=) $1::pg_catalog.int8 "
						   "AND split OPERATOR(pg_catalog.=) 'train' "
						   "AND partition OPERATOR(pg_catalog.=) $2::pg_catalog.int4 ORDER BY buffer_no",
						   2, values, NULL, NULL, true, 0, NULL);
	PG_TRY();
	{
		if (PQntuples(res) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("segment \"%s\" has no training buffers of partition %d to copy", src_name, p)));
		for (int i = 0; i < PQntuples(res); i++)
		{
			int			lengths[6] = {0, 0, 0, 0, PQgetlength(res, i, 2), PQgetlength(res, i, 3)};
			int			formats[6] = {0, 0, 0, 0, 1, 1};
			char	   *no = pnstrdup(PQgetvalue(res, i, 0), PQgetlength(res, i, 0));
			char	   *rows = pnstrdup(PQgetvalue(res, i, 1), PQgetlength(res, i, 1));

			values[0] = did;
			values[1] = part;
			values[2] = no;
			values[3] = rows;
			values[4] = PQgetvalue(res, i, 2);
			values[5] = PQgetvalue(res, i, 3);
			CHECK_FOR_INTERRUPTS();
			PQclear(mop_segment_exec(dst, dst_name, REMOTE_BUFFER_SQL, 6, values, lengths, formats,
									 false, 0, NULL));
		}
	}
	PG_FINALLY();
	{
		PQclear(res);
	}
	PG_END_TRY();
}

/* Local training buffers of partition p: how many and their bytes. */
static void
local_partition(int64 dataset_id, int p, int64 *buffers, int64 *bytes)
{
	Oid			t[2] = {INT8OID, INT4OID};
	Datum		v[2] = {Int64GetDatum(dataset_id), Int32GetDatum(p)};
	bool		isnull;

	if (SPI_execute_with_args("SELECT pg_catalog.count(*), "
							  "COALESCE(pg_catalog.sum(pg_catalog.octet_length(x) "
							  "OPERATOR(pg_catalog.+) pg_catalog.octet_length(y)), 0)::pg_catalog.int8 "
							  "FROM mop.buffers WHERE dataset_id OPERATOR(pg_catalog.=) $1 "
							  "AND split OPERATOR(pg_catalog.=) 'train' "
							  "AND partition OPERATOR(pg_catalog.=) $2",
							  2, t, v, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not count the training buffers of partition %d", p);
	*buffers = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	*bytes = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	SPI_freetuptable(SPI_tuptable);
}

/* Record that segment holds partition p of the dataset (its copy's id and name there). */
void
mop_segment_record_copy(int64 dataset_id, const char *segment, int p, int64 remote_id,
			const char *rname, int64 buffers, int64 bytes)
{
	Oid			t[7] = {INT8OID, TEXTOID, INT4OID, INT8OID, TEXTOID, INT4OID, INT8OID};
	Datum		v[7];
	char		n[7] = {' ', ' ', ' ', ' ', ' ', ' ', ' '};

	v[0] = Int64GetDatum(dataset_id);
	v[1] = CStringGetTextDatum(segment);
	v[2] = Int32GetDatum(p);
	v[3] = Int64GetDatum(remote_id);
	v[4] = rname ? CStringGetTextDatum(rname) : (Datum) 0;
	if (mop_segment_is_local(segment) || rname == NULL)
		n[3] = n[4] = 'n';
	v[5] = Int32GetDatum((int32) buffers);
	v[6] = Int64GetDatum(bytes);
	if (SPI_execute_with_args("INSERT INTO mop.dataset_segments (dataset_id, segment, partition, "
							  "remote_dataset_id, remote_name, buffers, bytes) "
							  "VALUES ($1, $2, $3, $4, $5, $6, $7)",
							  7, t, v, n, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not record the placement of partition %d on segment \"%s\"", p, segment);
}

/*
 * The dataset's row (id and the columns a copy needs), locked FOR NO KEY
 * UPDATE against a concurrent placement or drop (a run's sub-epochs, which
 * lock it FOR KEY SHARE, go on); with no_live_run, refused (55006) while a
 * run trains on it, whose workers use the placement.
 */
HeapTuple
mop_segment_lock_dataset(const char *name, bool no_live_run, TupleDesc *td, int64 *id, int *P)
{
	Oid			t[1] = {TEXTOID};
	Datum		v[1] = {CStringGetTextDatum(name)};
	HeapTuple	row;
	bool		isnull;

	if (SPI_execute_with_args("SELECT id, " DATASET_COLS " FROM mop.datasets "
							  "WHERE name OPERATOR(pg_catalog.=) $1 FOR NO KEY UPDATE",
							  1, t, v, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read dataset \"%s\"", name);
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("dataset \"%s\" does not exist", name),
				 errhint("Create it with mop_prepare().")));
	row = SPI_copytuple(SPI_tuptable->vals[0]);
	*td = CreateTupleDescCopy(SPI_tuptable->tupdesc);
	*id = DatumGetInt64(SPI_getbinval(row, *td, 1, &isnull));
	*P = DatumGetInt32(SPI_getbinval(row, *td, 14, &isnull));
	SPI_freetuptable(SPI_tuptable);
	if (no_live_run)
	{
		Oid			t1[1] = {INT8OID};
		Datum		v1[1] = {Int64GetDatum(*id)};

		if (SPI_execute_with_args("SELECT id FROM mop.runs WHERE dataset_id OPERATOR(pg_catalog.=) $1 "
								  "AND status OPERATOR(pg_catalog.=) ANY ('{pending,running}'::pg_catalog.text[]) "
								  "ORDER BY id LIMIT 1",
								  1, t1, v1, NULL, false, 1) != SPI_OK_SELECT)
			elog(ERROR, "could not read the runs of dataset \"%s\"", name);
		if (SPI_processed == 1)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_IN_USE),
					 errmsg("dataset \"%s\" is in use by run %s", name,
							SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1)),
					 errdetail("Placing it again would move the copies its workers train on."),
					 errhint("Wait for the run (mop_wait) or cancel it; mop_add_segment and mop_remove_segment change the placement while runs go on.")));
		SPI_freetuptable(SPI_tuptable);
	}
	return row;
}

/*
 * Place dataset `name`'s training partitions on segments, replicas copies
 * each; returns the placement per segment (*n_out entries).  The caller is
 * connected to SPI.
 */
static Placed *
place_dataset(const char *name, ArrayType *segs, int replicas, int *n_out)
{
	int64		dataset_id;
	int			P,
				S;
	char	  **names = mop_segment_names(segs, &S);
	Placed	   *out;
	HeapTuple	row;
	TupleDesc	td;
	bool		isnull;
	char	   *rname = mop_segment_copy_name(name);
	int64	   *part_buffers,
			   *part_bytes;

	if (replicas < 1 || replicas > S)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("replicas must be between 1 and the number of segments (%d), not %d", S, replicas),
				 errhint("Each copy of a partition goes to a distinct segment.")));
	row = mop_segment_lock_dataset(name, true, &td, &dataset_id, &P);

	/* every training partition must be here to be copied */
	{
		Oid			t1[1] = {INT8OID};
		Datum		v1[1] = {Int64GetDatum(dataset_id)};

		if (SPI_execute_with_args("SELECT pg_catalog.count(DISTINCT partition) FROM mop.buffers "
								  "WHERE dataset_id OPERATOR(pg_catalog.=) $1 "
								  "AND split OPERATOR(pg_catalog.=) 'train'",
								  1, t1, v1, NULL, false, 1) != SPI_OK_SELECT)
			elog(ERROR, "could not count the partitions of dataset \"%s\"", name);
		if (DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)) < P)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("dataset \"%s\" has training partitions only on segments", name),
					 errdetail("Placing copies them from this server."),
					 errhint("Prepare the dataset again with mop_prepare(..., segments => ...).")));
		SPI_freetuptable(SPI_tuptable);
	}

	part_buffers = palloc(sizeof(int64) * P);
	part_bytes = palloc(sizeof(int64) * P);
	for (int p = 0; p < P; p++)
		local_partition(dataset_id, p, &part_buffers[p], &part_bytes[p]);
	out = palloc0(sizeof(Placed) * S);
	for (int s = 0; s < S; s++)
	{
		out[s].segment = names[s];
		out[s].parts = palloc(sizeof(int) * P);
		for (int p = 0; p < P; p++)
			for (int r = 0; r < replicas; r++)
				if ((p + r) % S == s)
				{
					out[s].parts[out[s].n_parts++] = p;
					out[s].buffers += part_buffers[p];
					out[s].bytes += part_bytes[p];
				}
	}

	/* copy to the remote segments, in this transaction's transaction there */
	for (int s = 0; s < S; s++)
	{
		PGconn	  **connp;

		if (mop_segment_is_local(names[s]))
			continue;
		connp = mop_segment_xact_conn(names[s], 10);
		out[s].remote_id = mop_segment_create_copy(connp, names[s], rname, row, td);
		for (int k = 0; k < out[s].n_parts; k++)
			mop_segment_send_partition(connp, names[s], dataset_id, out[s].remote_id, out[s].parts[k]);
	}

	/* the local side: what 'local' holds stays, the rest of the training split goes */
	{
		Oid			t2[2] = {INT8OID, INT4OID};
		Datum		v2[2];
		bool	   *local = palloc0(sizeof(bool) * P);

		for (int s = 0; s < S; s++)
			if (mop_segment_is_local(names[s]))
				for (int k = 0; k < out[s].n_parts; k++)
					local[out[s].parts[k]] = true;
		v2[0] = Int64GetDatum(dataset_id);
		for (int p = 0; p < P; p++)
		{
			if (local[p])
				continue;
			v2[1] = Int32GetDatum(p);
			if (SPI_execute_with_args("DELETE FROM mop.buffers WHERE dataset_id OPERATOR(pg_catalog.=) $1 "
									  "AND split OPERATOR(pg_catalog.=) 'train' "
									  "AND partition OPERATOR(pg_catalog.=) $2",
									  2, t2, v2, NULL, false, 0) != SPI_OK_DELETE)
				elog(ERROR, "could not delete the local copy of partition %d", p);
		}
	}

	/* the catalog */
	{
		Oid			t3[1] = {INT8OID};
		Datum		v3[1] = {Int64GetDatum(dataset_id)};
		if (SPI_execute_with_args("DELETE FROM mop.dataset_segments "
								  "WHERE dataset_id OPERATOR(pg_catalog.=) $1",
								  1, t3, v3, NULL, false, 0) != SPI_OK_DELETE)
			elog(ERROR, "could not clear the placement of dataset \"%s\"", name);
		for (int s = 0; s < S; s++)
			for (int k = 0; k < out[s].n_parts; k++)
				mop_segment_record_copy(dataset_id, names[s], out[s].parts[k], out[s].remote_id,
							mop_segment_is_local(names[s]) ? NULL : rname,
							part_buffers[out[s].parts[k]], part_bytes[out[s].parts[k]]);
	}
	*n_out = S;
	return out;
}

/* Called by mop_prepare(segments => ...) once the rows are packed. */
void
mop_place_prepared(const char *name, ArrayType *segs, int replicas)
{
	int			n;

	(void) place_dataset(name, segs, replicas, &n);
}

/*
 * mop_place(dataset text, segments text[], replicas int DEFAULT 1)
 * RETURNS TABLE (segment text, partitions int[], buffers bigint, bytes bigint)
 */
Datum
mop_place(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Placed	   *placed;
	int			n;
	char	   *name;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("dataset must not be NULL")));
	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("segments must not be NULL"),
				 errhint("Give 'local' for this server and foreign servers of postgres_fdw for others, e.g. ARRAY['local', 'seg1'].")));
	if (PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("replicas must not be NULL")));
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	InitMaterializedSRF(fcinfo, 0);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	placed = place_dataset(name, PG_GETARG_ARRAYTYPE_P(1), PG_GETARG_INT32(2), &n);
	/* the placement lives in SPI's memory, which SPI_finish frees: the rows first */
	for (int s = 0; s < n; s++)
	{
		Datum		values[4];
		bool		nulls[4] = {false, false, false, false};
		Datum	   *parts = palloc(sizeof(Datum) * Max(placed[s].n_parts, 1));

		for (int k = 0; k < placed[s].n_parts; k++)
			parts[k] = Int32GetDatum(placed[s].parts[k]);
		values[0] = CStringGetTextDatum(placed[s].segment);
		values[1] = PointerGetDatum(construct_array(parts, placed[s].n_parts, INT4OID, 4, true, TYPALIGN_INT));
		values[2] = Int64GetDatum(placed[s].buffers);
		values[3] = Int64GetDatum(placed[s].bytes);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	SPI_finish();
	return (Datum) 0;
}

/* A segment's copy of a dataset, deleted in the caller's transaction there. */
typedef struct DropCopy
{
	const char *segment;
	const char *name;
} DropCopy;

static void
drop_copy_step(void *arg)
{
	DropCopy   *dc = (DropCopy *) arg;
	const char *values[1] = {dc->name};

	PQclear(mop_segment_exec(mop_segment_xact_conn(dc->segment, 5), dc->segment,
							 "DELETE FROM mop.datasets WHERE name OPERATOR(pg_catalog.=) $1",
							 1, values, NULL, NULL, false, 0, NULL));
}

/*
 * A dataset is dropped: drop its copies on its segments, best effort (a
 * segment that cannot be reached keeps its copy, with a WARNING naming it).
 * The caller is connected to SPI, before the dataset's rows go.
 */
void
mop_segment_drop_copies(int64 dataset_id)
{
	Oid			t[1] = {INT8OID};
	Datum		v[1] = {Int64GetDatum(dataset_id)};
	int			n;
	char	  **segs,
			  **names;

	if (SPI_execute_with_args("SELECT DISTINCT segment, remote_name FROM mop.dataset_segments "
							  "WHERE dataset_id OPERATOR(pg_catalog.=) $1 "
							  "AND segment OPERATOR(pg_catalog.<>) 'local' ORDER BY 1, 2",
							  1, t, v, NULL, false, 0) != SPI_OK_SELECT)
		return;
	n = (int) SPI_processed;
	segs = palloc(sizeof(char *) * Max(n, 1));
	names = palloc(sizeof(char *) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		segs[i] = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
		names[i] = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2);
	}
	SPI_freetuptable(SPI_tuptable);
	for (int i = 0; i < n; i++)
	{
		DropCopy	dc = {segs[i], names[i]};
		char	   *why;

		/*
		 * One subtransaction per segment, so that a segment out of reach
		 * is a WARNING (a cancel or a terminate stops the drop); the DELETE
		 * is the caller's transaction's on that segment and commits with
		 * it (its abort, or this subtransaction's, undoes it).
		 */
		if (!mop_try_in_subxact(drop_copy_step, &dc, &why))
			ereport(WARNING,
					(errmsg("could not drop the copy \"%s\" on segment \"%s\": %s", names[i], segs[i],
							why),
					 errhint("Drop it there: DELETE FROM mop.datasets WHERE name = %s.",
							 quote_literal_cstr(names[i]))));
	}
}

/* The segment's copy of a dataset, if it holds one: its id there and name. */
static bool
segment_copy(int64 dataset_id, const char *segment, int64 *remote_id, char **rname)
{
	Oid			t[2] = {INT8OID, TEXTOID};
	Datum		v[2] = {Int64GetDatum(dataset_id), CStringGetTextDatum(segment)};
	bool		isnull;
	bool		found;

	if (SPI_execute_with_args("SELECT remote_dataset_id, remote_name FROM mop.dataset_segments "
							  "WHERE dataset_id OPERATOR(pg_catalog.=) $1 "
							  "AND segment OPERATOR(pg_catalog.=) $2 LIMIT 1",
							  2, t, v, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read the placement");
	found = SPI_processed == 1;
	if (found)
	{
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

		*remote_id = isnull ? 0 : DatumGetInt64(d);
		*rname = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
	}
	SPI_freetuptable(SPI_tuptable);
	return found;
}

/*
 * Does the dataset have a placement row: any (segment NULL), or of
 * segment, or of segment for partition p (p >= 0)?
 */
static bool
placement_exists(int64 dataset_id, const char *segment, int p)
{
	Oid			t[3] = {INT8OID, TEXTOID, INT4OID};
	Datum		v[3] = {Int64GetDatum(dataset_id), segment ? CStringGetTextDatum(segment) : (Datum) 0,
	Int32GetDatum(p)};
	char		n[3] = {' ', segment ? ' ' : 'n', ' '};
	bool		found;

	if (SPI_execute_with_args("SELECT 1 FROM mop.dataset_segments "
							  "WHERE dataset_id OPERATOR(pg_catalog.=) $1 "
							  "AND ($2 IS NULL OR segment OPERATOR(pg_catalog.=) $2) "
							  "AND ($3 OPERATOR(pg_catalog.<) 0 OR partition OPERATOR(pg_catalog.=) $3) LIMIT 1",
							  3, t, v, n, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read the placement");
	found = SPI_processed == 1;
	SPI_freetuptable(SPI_tuptable);
	return found;
}

PG_FUNCTION_INFO_V1(mop_add_segment);

/*
 * mop_add_segment(dataset text, segment text, partitions int[] DEFAULT NULL)
 * RETURNS TABLE (segment text, partitions int[], buffers bigint, bytes bigint)
 *
 * Copy partitions (NULL: all) of a placed dataset to one more segment, or
 * to one that holds others already; the partitions it holds are skipped.
 * A partition is sent from this server if it is here, else relayed from a
 * segment that holds it.  Running
 * runs over the dataset start workers on the segment within seconds.
 */
Datum
mop_add_segment(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *name,
			   *seg;
	HeapTuple	row;
	TupleDesc	td;
	int64		dataset_id,
				remote_id = 0;
	int			P,
				n = 0;
	int		   *parts;
	char	   *rname = NULL;
	int64		buffers = 0,
				bytes = 0;
	Datum	   *out;
	char	  **src;
	int64	   *src_id,
			   *part_b,
			   *part_by;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("dataset and segment must not be NULL")));
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	seg = text_to_cstring(PG_GETARG_TEXT_PP(1));
	InitMaterializedSRF(fcinfo, 0);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	row = mop_segment_lock_dataset(name, false, &td, &dataset_id, &P);
	if (!placement_exists(dataset_id, NULL, -1))
	{
		/* not placed at all: every partition is local; record that first */
		Oid			t[1] = {INT8OID};
		Datum		v[1] = {Int64GetDatum(dataset_id)};

		if (SPI_execute_with_args("INSERT INTO mop.dataset_segments (dataset_id, segment, partition, "
								  "buffers, bytes) SELECT $1, 'local', b.partition, pg_catalog.count(*), "
								  "pg_catalog.sum(pg_catalog.octet_length(b.x) OPERATOR(pg_catalog.+) "
								  "pg_catalog.octet_length(b.y)) FROM mop.buffers b "
								  "WHERE b.dataset_id OPERATOR(pg_catalog.=) $1 "
								  "AND b.split OPERATOR(pg_catalog.=) 'train' GROUP BY b.partition",
								  1, t, v, NULL, false, 0) != SPI_OK_INSERT)
			elog(ERROR, "could not record the placement of dataset \"%s\"", name);
	}
	parts = palloc(sizeof(int) * Max(P, 1));
	if (PG_ARGISNULL(2))
	{
		for (int p = 0; p < P; p++)
			if (!placement_exists(dataset_id, seg, p))
				parts[n++] = p;
	}
	else
	{
		ArrayType  *a = PG_GETARG_ARRAYTYPE_P(2);
		Datum	   *el;
		bool	   *nulls;
		int			ne;

		if (ARR_NDIM(a) > 1)
			ereport(ERROR,
					(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
					 errmsg("partitions must be a one-dimensional array")));
		deconstruct_array(a, INT4OID, 4, true, TYPALIGN_INT, &el, &nulls, &ne);
		for (int i = 0; i < ne; i++)
		{
			int			p = DatumGetInt32(el[i]);

			if (nulls[i] || p < 0 || p >= P)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("dataset \"%s\" has no partition %s", name,
								nulls[i] ? "NULL" : psprintf("%d", p)),
						 errhint("Its partitions are 0 to %d.", P - 1)));
			if (!placement_exists(dataset_id, seg, p))
			{
				bool		dup = false;

				for (int j = 0; j < n; j++)
					dup |= parts[j] == p;
				if (!dup)
					parts[n++] = p;
			}
		}
	}
	/* where each partition is copied from: here, or a segment holding it */
	src = palloc0(sizeof(char *) * Max(n, 1));
	src_id = palloc0(sizeof(int64) * Max(n, 1));
	part_b = palloc0(sizeof(int64) * Max(n, 1));
	part_by = palloc0(sizeof(int64) * Max(n, 1));
	for (int k = 0; k < n; k++)
	{
		local_partition(dataset_id, parts[k], &part_b[k], &part_by[k]);
		if (part_b[k] > 0)
			continue;
		if (mop_segment_is_local(seg))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("partition %d of dataset \"%s\" is not on this server any more", parts[k], name),
					 errhint("Prepare the dataset again to have its partitions here.")));
		{
			Oid			t[2] = {INT8OID, INT4OID};
			Datum		v[2] = {Int64GetDatum(dataset_id), Int32GetDatum(parts[k])};
			bool		isnull;

			if (SPI_execute_with_args("SELECT segment, remote_dataset_id, buffers, bytes FROM mop.dataset_segments "
									  "WHERE dataset_id OPERATOR(pg_catalog.=) $1 "
									  "AND partition OPERATOR(pg_catalog.=) $2 "
									  "AND remote_dataset_id IS NOT NULL ORDER BY segment LIMIT 1",
									  2, t, v, NULL, false, 1) != SPI_OK_SELECT || SPI_processed != 1)
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("partition %d of dataset \"%s\" has no copy to send", parts[k], name)));
			src[k] = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
			src_id[k] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
			part_b[k] = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull));
			part_by[k] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4, &isnull));
			SPI_freetuptable(SPI_tuptable);
		}
	}

	remote_id = 0;
	rname = NULL;
	if (n > 0 && !mop_segment_is_local(seg))
	{
		/* the transaction's connections: a relayed partition may be its own uncommitted copy */
		PGconn	  **connp = mop_segment_xact_conn(seg, 10);

		if (!segment_copy(dataset_id, seg, &remote_id, &rname))
		{
			rname = mop_segment_copy_name(name);
			remote_id = mop_segment_create_copy(connp, seg, rname, row, td);
		}
		for (int k = 0; k < n; k++)
		{
			if (src[k] == NULL)
				mop_segment_send_partition(connp, seg, dataset_id, remote_id, parts[k]);
			else
				mop_segment_relay_partition(mop_segment_xact_conn(src[k], 10), src[k], src_id[k],
											connp, seg, remote_id, parts[k]);
		}
	}
	out = palloc(sizeof(Datum) * Max(n, 1));
	for (int k = 0; k < n; k++)
	{
		int64		b = part_b[k],
					by = part_by[k];

		mop_segment_record_copy(dataset_id, seg, parts[k], remote_id, rname, b, by);
		buffers += b;
		bytes += by;
		out[k] = Int32GetDatum(parts[k]);
	}
	{
		Datum		values[4];
		bool		nulls[4] = {false, false, false, false};

		/* before SPI_finish, which frees what was allocated since SPI_connect */
		values[0] = CStringGetTextDatum(seg);
		values[1] = PointerGetDatum(construct_array(out, n, INT4OID, 4, true, TYPALIGN_INT));
		values[2] = Int64GetDatum(buffers);
		values[3] = Int64GetDatum(bytes);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	SPI_finish();
	return (Datum) 0;
}

PG_FUNCTION_INFO_V1(mop_remove_segment);

/*
 * mop_remove_segment(dataset text, segment text) RETURNS int
 *
 * Take a segment out of a dataset's placement; refused (55000) if it holds
 * the only copy of a partition.  Running runs stop giving its workers work
 * within seconds (a sub-epoch under way finishes).  Its copy there is
 * dropped unless a run over the dataset is running (whose workers may
 * still read it): then it stays, with a NOTICE.  Returns the partitions
 * the segment held.
 */
Datum
mop_remove_segment(PG_FUNCTION_ARGS)
{
	char	   *name,
			   *seg;
	HeapTuple	row;
	TupleDesc	td;
	int64		dataset_id,
				remote_id = 0;
	int			P,
				removed;
	char	   *rname = NULL;
	bool		live;
	Oid			t[2] = {INT8OID, TEXTOID};
	Datum		v[2];

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("dataset and segment must not be NULL")));
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	seg = text_to_cstring(PG_GETARG_TEXT_PP(1));
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	row = mop_segment_lock_dataset(name, false, &td, &dataset_id, &P);
	(void) row;
	v[0] = Int64GetDatum(dataset_id);
	v[1] = CStringGetTextDatum(seg);
	if (!segment_copy(dataset_id, seg, &remote_id, &rname))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("segment \"%s\" holds no partition of dataset \"%s\"", seg, name),
				 errhint("mop.segments lists the segments of each dataset.")));
	/* a partition whose only copy is there */
	if (SPI_execute_with_args("SELECT s.partition FROM mop.dataset_segments s "
							  "WHERE s.dataset_id OPERATOR(pg_catalog.=) $1 AND s.segment OPERATOR(pg_catalog.=) $2 "
							  "AND NOT EXISTS (SELECT 1 FROM mop.dataset_segments o "
							  "WHERE o.dataset_id OPERATOR(pg_catalog.=) $1 "
							  "AND o.partition OPERATOR(pg_catalog.=) s.partition "
							  "AND o.segment OPERATOR(pg_catalog.<>) $2) ORDER BY 1 LIMIT 1",
							  2, t, v, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read the placement");
	if (SPI_processed == 1)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("segment \"%s\" holds the only copy of partition %s of dataset \"%s\"", seg,
						SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1), name),
				 errhint("Copy it to another segment first: mop_add_segment('%s', '...', partitions => ARRAY[%s]).",
						 name, SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1))));
	if (SPI_execute_with_args("DELETE FROM mop.dataset_segments WHERE dataset_id OPERATOR(pg_catalog.=) $1 "
							  "AND segment OPERATOR(pg_catalog.=) $2",
							  2, t, v, NULL, false, 0) != SPI_OK_DELETE)
		elog(ERROR, "could not change the placement");
	removed = (int) SPI_processed;
	if (SPI_execute_with_args("SELECT 1 FROM mop.runs WHERE dataset_id OPERATOR(pg_catalog.=) $1 "
							  "AND status OPERATOR(pg_catalog.=) ANY ('{pending,running}'::pg_catalog.text[]) LIMIT 1",
							  1, t, v, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read the runs of dataset \"%s\"", name);
	live = SPI_processed > 0;
	if (!mop_segment_is_local(seg))
	{
		if (live)
			ereport(NOTICE,
					(errmsg("the copy \"%s\" on segment \"%s\" is kept: a run over dataset \"%s\" is running",
							rname, seg, name),
					 errhint("Drop it there once the run is over: DELETE FROM mop.datasets WHERE name = '%s'.",
							 rname)));
		else
		{
			const char *values[1] = {rname};

			/* dropped there when this transaction commits */
			PQclear(mop_segment_exec(mop_segment_xact_conn(seg, 10), seg,
									 "DELETE FROM mop.datasets WHERE name OPERATOR(pg_catalog.=) $1",
									 1, values, NULL, NULL, false, 0, NULL));
		}
	}
	SPI_finish();
	PG_RETURN_INT32(removed);
}
