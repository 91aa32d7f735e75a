/*
 * mop.h -- declarations shared by the PostgreSQL glue of mop (src/pg/).
 *
 * The glue turns SQL calls into calls of the training engine (src/nn/nn.h).
 * Engine objects are malloc'd; every nn_model the glue creates is owned by a
 * ModelHandle allocated in a PostgreSQL memory context, whose reset callback
 * frees the model, so an ERROR or a query cancel never leaks one.
 */
#ifndef MOP_PG_H
#define MOP_PG_H

#include "postgres.h"

#include "fmgr.h"
#include "nodes/pg_list.h"
#include "storage/itemptr.h"
#include "utils/dsa.h"
#include "utils/jsonb.h"

#include "encode.h"
#include "guc.h"
#include "nn.h"
#include "mop_gpu.h"

/* Largest number of classes a target may have (one output unit each). */
#define MOP_MAX_CLASSES 65536

/* gpu.c: the lazy loader of the CUDA part and where training runs */
extern bool mop_gpu_resolved;
extern int	mop_gpu_worker_device;
extern bool mop_device_check(void);
extern Datum mop_with_device(FunctionCallInfo fcinfo, int argno, PGFunction fn);
extern int	mop_device_for_training(void);
extern void mop_gpu_worker_init(bool gpu, int worker_index);
extern const mop_gpu_api *mop_gpu(void);
extern void mop_gpu_error(int rc, const char *msg, const char *what) pg_attribute_noreturn();

/* gpu_train.c: the aggregates on a GPU, rows resident on the device */
typedef struct MopGpuAgg MopGpuAgg;
extern MopGpuAgg *mop_gpu_agg_open(nn_model *m, int device, bool training,
								   MemoryContext cxt);
extern void mop_gpu_agg_train(MopGpuAgg *a, Datum xd, Datum yd, const float *x,
							  const float *y, int64 n, const int64 *perm);
extern void mop_gpu_agg_eval(MopGpuAgg *a, Datum xd, Datum yd, const float *x,
							 const float *y, int64 n, nn_result *res);
extern bool mop_gpu_agg_finish(MopGpuAgg *a, nn_result *res);
extern void mop_gpu_cache_clear(void);

/* mop.c: refuse a model needing more than mop.max_model_memory */
extern void mop_check_model_memory(const nn_spec *spec);

/* An nn_model owned by a memory context (freed when the context goes). */
typedef struct ModelHandle
{
	nn_model   *model;
	MemoryContextCallback cb;
} ModelHandle;

/* Target kinds of a dataset. */
typedef enum MopTargetKind
{
	MOP_TARGET_CLASS,
	MOP_TARGET_BINARY,
	MOP_TARGET_REGRESSION
} MopTargetKind;

/* A row of mop.datasets, as the glue needs it. */
typedef struct MopDataset
{
	int64		id;
	char	   *name;
	char	   *source;			/* regclass as text at prepare time */
	int			nfeatures;		/* floats per row */
	int			nfeatcols;
	char	  **featcols;		/* feature column names */
	bool		is_array;		/* one array column */
	int32		in_h,
				in_w,
				in_c;
	char	   *target;			/* target column name */
	MopTargetKind target_kind;
	int			nclasses;		/* labels (0 for regression) */
	char	  **labels;			/* label text by class index */
	bool		normalized;
	double	   *mean;			/* per feature, NULL if !normalized */
	double	   *std;
	/*
	 * Categorical (one-hot) feature columns: vocab[i] is column i's
	 * vocabulary, NULL for a numeric column; vocab is NULL when the dataset
	 * has none.  Column i's inputs follow those of columns 0..i-1.
	 */
	MopVocab  **vocab;
	char	   *categories;		/* mop.datasets.categories as JSON text, or NULL */
	int			partitions;
	int64		train_rows;
	int64		valid_rows;
} MopDataset;

/* mop.c */
extern void mop_pin_search_path(void);
extern void mop_keep_heap_memory(void);
extern void mop_blas_ensure(void);
extern int	mop_threads_for(int local_workers);
extern void mop_blas_set(int threads);
extern int	mop_cores_available(void);
extern void mop_nn_error(nn_status st, const nn_error *err, const char *what) pg_attribute_noreturn();
extern ModelHandle *mop_model_handle(MemoryContext cxt);
extern void mop_model_release(ModelHandle *h);
extern ModelHandle *mop_model_from_blob(bytea *blob, MemoryContext cxt);
extern bytea *mop_model_to_blob(const nn_model *m);
extern const char *mop_target_kind_name(MopTargetKind k);

/* catalog.c */
extern MopDataset *mop_dataset_lookup(const char *name, bool missing_ok);
extern MopDataset *mop_dataset_by_id(int64 id);
/* which of a model's checkpoints a prediction, evaluation or export uses */
typedef enum MopCheckpoint
{
	MOP_CHECKPOINT_BEST,		/* its best epoch's (the latest while it has none) */
	MOP_CHECKPOINT_LAST			/* its latest */
} MopCheckpoint;

extern MopDataset *mop_dataset_of_model(int64 model_id, MopCheckpoint which, bytea **state);
extern bool mop_catalog_is_02(void);
extern bool mop_catalog_has_table(const char *relname);
extern bool mop_datasets_have_categories(void);
extern bool mop_catalog_has_run_names(void);

/*
 * The first training partition of dataset dataset_id that only segments
 * hold (mop.dataset_segments places it, but not on 'local'), or -1: what a
 * reader of this server's training buffers (mop_train, the "balanced"
 * class weights) would silently miss.
 */
extern int32 mop_dataset_remote_partition(int64 dataset_id);

/* predict.c */
extern MopCheckpoint mop_checkpoint_arg(FunctionCallInfo fcinfo, int argno);
extern ModelHandle *mop_model_of(int64 model_id, MopCheckpoint which, MemoryContext cxt,
								 MopDataset **ds);

/*
 * Patience early stopping of one model (a configuration's "early_stopping"
 * key, Keras' EarlyStopping(patience, min_delta)): patience 0 is none.
 */
typedef struct MopPatience
{
	int32		patience;		/* epochs without improvement that stop it */
	double		min_delta;		/* an improvement must exceed this */
} MopPatience;

/* Where a model stands under its patience rule. */
typedef struct MopPatienceState
{
	double		best;			/* best metric so far (NaN: none yet) */
	int32		best_epoch;		/* its epoch (0: none) */
	int32		wait;			/* epochs since, without improvement */
} MopPatienceState;

/* config.c */
extern void mop_config_patience(Jsonb *config, MopPatience *p);
extern void mop_patience_init(MopPatienceState *st);
extern bool mop_patience_epoch(const MopPatience *p, MopPatienceState *st, bool higher_is_better,
							   int32 epoch, double metric);
extern void mop_config_to_spec(Jsonb *config, const MopDataset *ds, int32 run_epochs,
							   nn_spec *spec);

/*
 * A configuration's "class_weight": the engine's class weights of the
 * training loss (nn_model_set_class_weights), by class index.
 */
typedef struct MopClassWeight
{
	bool		balanced;		/* "balanced": from the training split's class counts */
	int32		n;				/* the dataset's classes; 0: no class weights */
	float	   *w;				/* explicit weights (NULL when balanced or none) */
} MopClassWeight;

extern void mop_config_class_weight(Jsonb *config, const MopDataset *ds, const nn_spec *spec,
									MopClassWeight *cw);

/* Is layer i's kernel followed by a ReLU-like activation (He under init "auto")? */
extern bool mop_relu_like_after(const nn_spec *spec, int i);

/* source.c: reading a user's table or view */
typedef struct MopSource
{
	Oid			relid;
	char	   *relname;		/* schema-qualified, quoted */
	int			nfeatcols;
	char	  **featcols;
	Oid		   *feattypes;
	bool	   *featcat;		/* column i is categorical (text, enum, boolean) */
	int			ncat;			/* categorical columns */
	bool		is_array;
	char	   *target;
	Oid			target_type;
	int			nfeatures;		/* floats per row (-1: array, not yet known) */
} MopSource;

/*
 * Rows read from a source.  x holds the numeric values (the array's, or
 * the numeric columns' in column order); a source with categorical columns
 * also has, per row, one id per categorical column into that column's
 * count table (dicts), until mop_rows_encode replaces x with the model's
 * input (nfeatures floats per row) and drops them.
 */
typedef struct MopRows
{
	int64		nrows;
	int			nfeatures;		/* floats per row of x */
	float	   *x;				/* nrows * nfeatures */
	float	   *y;				/* nrows (class index or value) */
	int			ncat;			/* categorical columns (0 after encoding) */
	int32	   *cat;			/* nrows * ncat ids */
	MopCatCounts **dicts;		/* per categorical column: its values */
} MopRows;

extern void mop_source_open(MopSource *src, Oid relid, const char *target,
							char **featcols, int nfeatcols);
extern void mop_source_check_privileges(MopSource *src);
extern char **mop_source_labels(MopSource *src, int *nlabels);
extern void mop_source_read(MopSource *src, MopTargetKind kind,
							char **labels, int nlabels, int nfeatures,
							MopRows *rows);
extern bool mop_type_is_numeric(Oid typid);
extern bool mop_type_is_numeric_array(Oid typid);
extern bool mop_type_is_categorical(Oid typid);
extern int	mop_input_width(int ncols, MopVocab **vocab);
extern void mop_rows_encode(MopRows *rows, int ncols, MopVocab **vocab);
extern bool *mop_onehot_mask(int ncols, MopVocab **vocab, int width);
extern int	mop_input_column(int ncols, MopVocab **vocab, int j);

/* prng.c: the glue's own deterministic generator */
typedef struct MopRng
{
	uint64		s;
} MopRng;
extern void mop_prng_seed(MopRng *r, uint64 seed);
extern uint64 mop_prng_next(MopRng *r);
extern uint64 mop_prng_below(MopRng *r, uint64 n);
extern void mop_shuffle_index(int64 *idx, int64 n, MopRng *r);

/* bufcache.c */
typedef struct MopBufId
{
	Oid			toastrelid;
	Oid			valueid;
	int32		extsize;
	TransactionId chunk_xmin;	/* its first chunk's tuple: a reused OID or */
	ItemPointerData chunk_tid;	/* a rewrite gives another identity */
} MopBufId;
extern const char *mop_buffer_fetch(Datum d, Size *len);
extern bool mop_buffer_identity(Datum d, MopBufId *id);
extern void mop_buffer_cache_clear(void);

/* shared_bufcache.c: the server's cache of buffers (when preloaded) */
struct varatt_external;
extern void mop_shared_cache_request(void);
extern const char *mop_shared_cache_fetch(const struct varatt_external *tp, Size *len,
										  bool *busy, TransactionId *chunk_xmin,
										  ItemPointer chunk_tid);
extern void mop_shared_cache_release(void);
extern void mop_shared_cache_publish(void);
typedef struct MopCacheItem
{
	Oid			dbid;
	Oid			toastrelid;
	Oid			valueid;
	int32		extsize;
	uint64		last_used;
} MopCacheItem;
extern int	mop_shared_cache_list(MopCacheItem *items, int max, int64 *signature);
extern int	mop_shared_cache_max_entries(void);
extern Size mop_shared_cache_room(void);

/* prewarm.c: the server's cache loaded again after a restart */
extern void mop_prewarm_dump(bool force);
extern List *mop_prewarm_databases(void);
extern int	mop_prewarm_load(Oid toastrelid);
extern bool mop_toast_identity(const struct varatt_external *tp, TransactionId *xmin,
							   ItemPointerData *tid);

/* subxact.c */
extern bool mop_try_in_subxact(void (*step) (void *arg), void *arg, char **why);
extern dsa_pointer mop_dsa_allocate_or_none(dsa_area *area, Size size, char **why);

/*
 * The narrow waist as SQL, issued by the sub-epoch unit that every
 * executor runs (subepoch.h): one sub-epoch of state $1 over partition $3
 * of dataset $2, and its validation.
 *
 * The buffers come from a sorted subquery rather than from an ORDER BY
 * inside the aggregate call: PostgreSQL 15 sorts every argument of an
 * ordered aggregate, which would copy the model state ($1, megabytes) once
 * per buffer into the sort (and spill it to disk beyond work_mem).  An
 * aggregate consumes a sorted subquery's rows in order.
 */
#define MOP_TRAIN_SQL \
	"SELECT (s.r).state, (s.r).loss_sum, (s.r).metric_sum, (s.r).rows, (s.r).status " \
	"FROM (SELECT mop.train_agg($1, b.x, b.y) AS r " \
	"FROM (SELECT x, y FROM mop.buffers WHERE dataset_id OPERATOR(pg_catalog.=) $2 " \
	"AND split OPERATOR(pg_catalog.=) 'train' AND partition OPERATOR(pg_catalog.=) $3 " \
	"ORDER BY buffer_no) b) s"

#define MOP_EVAL_SQL \
	"SELECT (s.r).loss_sum, (s.r).metric_sum, (s.r).rows " \
	"FROM (SELECT mop.eval_agg($1, b.x, b.y) AS r " \
	"FROM (SELECT x, y FROM mop.buffers WHERE dataset_id OPERATOR(pg_catalog.=) $2 " \
	"AND split OPERATOR(pg_catalog.=) 'valid' ORDER BY partition, buffer_no) b) s"

/* reclaim.c: a run's superseded checkpoints are reclaimed while it runs */
extern void mop_reclaim_checkpoints(int64 run_id, int64 commits, int n_models,
									bool force);
extern void mop_wait_release_xmin(void);

/* model_init.c: a model's initial state (its first checkpoint) */
extern bytea *mop_model_initial_state(Jsonb *config, const MopDataset *ds,
									  int32 run_epochs, nn_spec *spec);

/*
 * train_agg.c: progress of the aggregates.  A caller of mop.train_agg or
 * mop.eval_agg installs one for the duration of its query and puts the
 * previous one back afterwards (also on ERROR).  A sub-epoch (subepoch.h)
 * also reports through it the steps it moves on to, so that its executor
 * can show progress -- and be seen alive -- in every step, not only while
 * it trains.
 */
typedef enum MopTaskStep
{
	MOP_STEP_LOADING = 0,		/* reading the checkpoint */
	MOP_STEP_TRAINING,			/* mop.train_agg over the partition */
	MOP_STEP_VALIDATING,		/* mop.eval_agg over the validation split */
	MOP_STEP_COMMITTING			/* locking the model's rows, writing, committing */
} MopTaskStep;

/* The step in words, as mop.progress shows it. */
static inline const char *
mop_task_step_name(int step)
{
	switch (step)
	{
		case MOP_STEP_LOADING:
			return "loading";
		case MOP_STEP_TRAINING:
			return "training";
		case MOP_STEP_VALIDATING:
			return "validating";
		default:
			return "committing";
	}
}

typedef struct MopProgress
{
	/* training starts: rows_total rows to train (0: not known) */
	void		(*start) (void *arg, int64 rows_total);
	/* rows more rows trained, after each minibatch; may ERROR to stop */
	void		(*rows) (void *arg, int64 rows);
	/* rows more validation rows evaluated, after each slice; may ERROR */
	void		(*evaluated) (void *arg, int64 rows);
	/* the sub-epoch moves on to step (validating, committing); may ERROR */
	void		(*step) (void *arg, MopTaskStep step);
	void	   *arg;
} MopProgress;
extern const MopProgress *mop_progress_install(const MopProgress *p);
extern void mop_progress_trained(int64 rows);
extern void mop_progress_evaluated(int64 rows);

/* train_agg.c */
extern void mop_train_rows(nn_model *m, const float *x, const float *y,
						   int64 n, bool *diverged);

#endif							/* MOP_PG_H */
