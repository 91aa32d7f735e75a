/*
 * encode.h -- one-hot encoding of categorical feature columns.
 *
 * Three steps, each usable alone (a vocabulary can be built from counts
 * gathered anywhere, e.g. merged from several servers):
 *
 *   1. count:  a MopCatCounts is a count table of one column's values (text,
 *              or the SQL NULL, which is a value like any other); each
 *              distinct value gets an id (0, 1, ... in order of first sight)
 *              so a reader can keep one int32 per row instead of a string;
 *              count tables merge by adding counts value by value;
 *   2. build:  mop_vocab_build() turns a count table into a vocabulary: the
 *              values with a count > 0, by descending count, then by value
 *              in byte order (NULL after every value), the first
 *              max_categories of them, or the first max_categories - 1 and
 *              an "other" bucket for the rest when there are more;
 *   3. encode: a value's slot in the vocabulary (its one-hot position):
 *              a kept value its own, any other value (rarer, or never seen
 *              when the vocabulary was built) the "other" slot when the
 *              vocabulary has one, else none (an all-zero encoding).
 *
 * A vocabulary is stored as JSON (mop.datasets.categories, one per
 * column): {"type": ..., "values": [...], "counts": [...], "other": n|null}
 * (other: the training rows in the "other" bucket, null when there is
 * none); mop_vocab_from_jsonb() reads it back and checks it.
 *
 * Everything is allocated in the memory context current at creation.
 */
#ifndef MOP_ENCODE_H
#define MOP_ENCODE_H

#include "postgres.h"

#include "lib/stringinfo.h"
#include "utils/jsonb.h"

/* Default max_categories of mop_prepare. */
#define MOP_DEFAULT_MAX_CATEGORIES 32

/* A count table of one column's values (opaque). */
typedef struct MopCatCounts MopCatCounts;

extern MopCatCounts *mop_catcounts_create(void);
/* The id of value (NULL: the SQL NULL), added with count 0 when new. */
extern int32 mop_catcounts_intern(MopCatCounts *c, const char *value);
/* Add n to the count of id. */
extern void mop_catcounts_add(MopCatCounts *c, int32 id, int64 n);
/* Add every count of src to dst (value by value); returns dst. */
extern MopCatCounts *mop_catcounts_merge(MopCatCounts *dst, const MopCatCounts *src);
/* Distinct values, and each id's value (NULL: the SQL NULL) and count. */
extern int32 mop_catcounts_size(const MopCatCounts *c);
extern const char *mop_catcounts_value(const MopCatCounts *c, int32 id);
extern int64 mop_catcounts_count(const MopCatCounts *c, int32 id);

/* A column's vocabulary. */
typedef struct MopVocab
{
	char	   *type;			/* the column's SQL type, for people */
	int32		nvalues;		/* kept values */
	char	  **values;			/* by slot; NULL: the SQL NULL category */
	int64	   *counts;			/* training rows of each kept value */
	bool		has_other;		/* slot nvalues is "other" */
	int64		other_count;	/* training rows in "other" */
	int32		width;			/* nvalues + has_other: one-hot inputs */
	/* lookup: the non-null values sorted by bytes, with their slots */
	int32		nsorted;
	const char **sorted;
	int32	   *sorted_slot;
	int32		null_slot;		/* slot of the NULL category, or -1 */
} MopVocab;

extern MopVocab *mop_vocab_build(const MopCatCounts *c, int max_categories, const char *type);
/* The slot of value (NULL: SQL NULL): its own, else "other", else -1. */
extern int32 mop_vocab_slot(const MopVocab *v, const char *value);
/* slot of every id of c (palloc'd, mop_catcounts_size entries). */
extern int32 *mop_vocab_slots_of(const MopVocab *v, const MopCatCounts *c);
/* Write the one-hot encoding of slot (-1: all zeros) into dst[0..width). */
extern void mop_vocab_encode(const MopVocab *v, int32 slot, float *dst);
/* The vocabulary as a JSON object, appended to s. */
extern void mop_vocab_append_json(StringInfo s, const MopVocab *v);
/*
 * The vocabulary stored for column col (ERROR 'data corrupted' naming
 * dataset and column when malformed); container is the JSON object.
 */
extern MopVocab *mop_vocab_from_jsonb(JsonbContainer *container, const char *dataset,
									  const char *col);

#endif							/* MOP_ENCODE_H */
