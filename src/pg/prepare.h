/*
 * prepare.h -- the steps of mop_prepare that a sharded preparation
 * (segment_shard.c) shares: writing buffers and the dataset's row.
 */
#ifndef MOP_PREPARE_H
#define MOP_PREPARE_H

#include "postgres.h"

#include "executor/spi.h"
#include "utils/array.h"

#include "encode.h"
#include "mop.h"

/* mop_prepare's arguments, checked, with the source opened. */
typedef struct MopPrepareArgs
{
	MopSource	src;
	char	   *target;
	char	   *dsname;
	int32		partitions;
	bool		partitions_default;	/* partitions => NULL */
	double		validation;
	int32		buffer_rows;
	bool		normalize;
	int32		seed;
	ArrayType  *shape;			/* NULL: none given */
	MopTargetKind kind;
	int32		max_categories;
} MopPrepareArgs;

/* A dataset's row of mop.datasets, as mop_prepare writes it. */
typedef struct MopDatasetRow
{
	const char *name;
	const MopSource *src;
	int32		in_h,
				in_w,
				in_c;
	int			nfeatures;
	const char *target;
	MopTargetKind kind;
	char	  **labels;			/* NULL for regression */
	int			nlabels;
	bool		normalize;
	const double *mean;			/* NULL unless normalize */
	const double *std;
	int32		partitions;
	int32		buffer_rows;
	double		validation;
	int64		n_train;
	int64		n_valid;
	int32		seed;
	const char *categories;		/* mop.datasets.categories as JSON text, or NULL */
} MopDatasetRow;

/* A text[] datum of C strings, and a float8[] datum. */
extern Datum mop_prepare_text_array(char **s, int n);
extern Datum mop_prepare_float8_array(const double *v, int n);

/* Insert the dataset's row (the caller is connected to SPI); its id. */
extern int64 mop_prepare_insert_dataset(const MopDatasetRow *d);

/* The plan inserting one buffer: ($1 dataset_id, $2 split, $3 partition, $4 buffer_no, $5 rows, $6 x, $7 y). */
extern SPIPlanPtr mop_prepare_buffer_plan(void);

/*
 * Write rows idx[0..n) of one split into partitions first_partition ..
 * first_partition + partitions - 1 (contiguous runs whose sizes differ by
 * at most one row), buffers of at most buffer_rows rows, standardised with
 * mean/std when mean is not NULL; returns how many buffers were written.
 */
extern int	mop_prepare_write_split(SPIPlanPtr plan, int64 dataset_id, const char *split,
									const MopRows *rows, const int64 *idx, int64 n,
									int first_partition, int partitions, int buffer_rows,
									const double *mean, const double *std);

/*
 * Vocabularies of src's categorical columns from their count tables (one
 * per categorical column, in column order), with a NOTICE for each that
 * gets an "other" input; *vocab one per feature column (NULL: numeric).
 * Returns mop.datasets.categories as JSON text.
 */
extern char *mop_prepare_vocabularies(const MopSource *src, MopCatCounts **counts,
									  int max_categories, MopVocab ***vocab);
/* Count the categorical values of the training rows into rows->dicts. */
extern void mop_prepare_count_categories(MopRows *rows, const int64 *train, int64 n_train);

/* The image shape (h, w, c) of shape => for rows of nfeatures, checked. */
extern void mop_prepare_resolve_shape(ArrayType *shape, int nfeatures, int32 *h, int32 *w, int32 *c);

/* What mop_prepare returns. */
typedef struct MopPrepareResult
{
	int64		dataset_id;
	int64		n_train;
	int64		n_valid;
	int32		partitions;
	int32		buffers;
	int32		nfeatures;
	int32		nlabels;		/* -1: a regression target */
} MopPrepareResult;

/*
 * segment_shard.c: mop_prepare(..., segments => ..., source_on_segments =>
 * true): each segment packs its own rows of the table in place.
 */
extern void mop_prepare_sharded(const MopPrepareArgs *a, ArrayType *segments, int replicas,
								MopPrepareResult *out);

/*
 * segment_shard.c, the segment's side: read the rows of a table (as the
 * caller) for a sharded preparation, keep them until the transaction ends,
 * and return their statistics; then pack them into a dataset's copy.
 */
typedef struct MopShardStats
{
	int64		rows;
	int64		n_train;
	int64		n_valid;
	int			nfeatures;
	char	  **labels;			/* this shard's own, in the target type's order */
	int			nlabels;
	double	   *mean;			/* over the training rows, nfeatures each */
	double	   *m2;				/* sum of squared deviations from mean */
	int			ncat;			/* categorical columns (nfeatures counts the numeric ones) */
	MopCatCounts **counts;		/* per categorical column: its training values */
} MopShardStats;

extern void mop_shard_read(MopSource *src, MopTargetKind kind, double validation,
						   int64 shuffle_seed, MopShardStats *st);
extern int	mop_shard_pack(int64 dataset_id, int first_partition, int partitions,
						   const char *categories);

#endif							/* MOP_PREPARE_H */
