/*
 * gpu.c -- where training runs: what the mop.device, mop.gpu_memory and
 * mop.gpu_tf32 settings (guc.c) mean, the lazy loader of mop's optional CUDA
 * part (gpu/mop_gpu.so, C ABI in gpu/mop_gpu.h), and mop_gpu_devices().
 *
 * mop.so never links CUDA.  The GPU library is opened with dlopen the first
 * time a session asks for a GPU (mop.device = 'gpu' or 'auto', or
 * mop_gpu_devices()), never in the postmaster and never for 'cpu', so a
 * server without a GPU, a driver or the CUDA libraries behaves exactly as if
 * the GPU part did not exist.  Every failure -- library not installed, a
 * CUDA library missing, an ABI or engine-layout mismatch, no driver, no
 * visible device -- is reported with what went wrong in the detail.
 *
 * The choice is made once, when mop_train or a search starts
 * (mop_device_check): 'gpu' where no GPU is usable is an error, 'auto' a
 * NOTICE and the CPU.  A run's background workers inherit the choice from
 * the run (each worker takes GPU worker_index mod the number of GPUs); the
 * aggregates ask mop_device_for_training() and then train through
 * gpu_train.c.
 */
#include "postgres.h"

#include <dlfcn.h>

#include "funcapi.h"
#include "miscadmin.h"
#include "postmaster/postmaster.h"
#include "utils/builtins.h"
#include "utils/guc.h"

#include "mop.h"
#include "loader.h"

PG_FUNCTION_INFO_V1(mop_gpu_devices);

/* The last decision of mop_device_check in this backend (recorded in a run). */
bool		mop_gpu_resolved = false;

/* In a run's worker: -1 CPU, else the GPU ordinal; -2 outside workers. */
int			mop_gpu_worker_device = -2;

static void *gpu_lib;			/* dlopen handle, once loaded */
static mop_gpu_api gpu_api;
static char gpu_why[512];		/* why the library could not be used */
static bool gpu_tried;

/* Open gpu/mop_gpu.so once; false (and gpu_why) if it cannot be used. */
static bool
gpu_load(void)
{
	char		dir[MAXPGPATH],
				path[MAXPGPATH],
				why[400];

	if (gpu_tried)
		return gpu_lib != NULL;
	/* never a CUDA context in the postmaster: its children would inherit it */
	if (!IsUnderPostmaster && PostmasterPid == MyProcPid)
		elog(ERROR, "mop: the GPU library must not be loaded in the postmaster");
	gpu_tried = true;
	get_pkglib_path(my_exec_path, dir);
	snprintf(path, sizeof(path), "%s/mop_gpu.so", dir);
	gpu_lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (gpu_lib == NULL)
	{
		const char *e = dlerror();

		snprintf(gpu_why, sizeof(gpu_why), "%s", e ? e : path);
		return false;
	}
	if (mop_gpu_api_resolve(gpu_lib, &gpu_api, why, sizeof(why)) != 0)
	{
		snprintf(gpu_why, sizeof(gpu_why), "%s does not match this mop.so: %s", path, why);
		dlclose(gpu_lib);
		gpu_lib = NULL;
		return false;
	}
	return true;
}

/* Number of usable GPUs; 0 with the reason in *why. */
static int32
gpu_count(const char **why)
{
	int32		n = 0;
	static char msg[512];

	if (!gpu_load())
	{
		*why = psprintf("GPU support is not installed or cannot be loaded: %s", gpu_why);
		return 0;
	}
	msg[0] = '\0';
	if (gpu_api.device_count(&n, msg, sizeof(msg)) != MOP_GPU_OK || n <= 0)
	{
		*why = psprintf("no usable GPU: %s", msg[0] ? msg : "no device");
		return 0;
	}
	return n;
}

static void gpu_unusable(const char *why) pg_attribute_noreturn();

/* mop.device is 'gpu' and no GPU is usable: the error, with why. */
static void
gpu_unusable(const char *why)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("mop.device is 'gpu' but no GPU is usable"),
			 errdetail("%s.", why),
			 errhint("SET mop.device = 'cpu', or 'auto' to fall back to the CPU.")));
}

/*
 * Resolve mop.device before training starts: 'cpu' (nothing is loaded),
 * 'gpu' (an ERROR unless a GPU is usable), 'auto' (a NOTICE and the CPU
 * when not).  Returns true for the GPU, and remembers the answer for the
 * run about to start (mop_gpu_resolved).
 */
bool
mop_device_check(void)
{
	const char *why = NULL;
	int32		n;

	mop_gpu_resolved = false;
	if (mop_device == MOP_DEVICE_CPU)
		return false;
	n = gpu_count(&why);
	if (n > 0)
	{
		mop_gpu_resolved = true;
		return true;
	}
	if (mop_device == MOP_DEVICE_AUTO)
	{
		ereport(NOTICE,
				(errmsg("mop.device is 'auto': training on the CPU"),
				 errdetail("%s.", why)));
		return false;
	}
	gpu_unusable(why);
	return false;				/* not reached */
}

/*
 * A training or search function's device => argument (argument argno; NULL,
 * or absent when the function was declared by an older version of the
 * extension: mop.device as it is).  fn runs with mop.device set to the
 * argument, as a SET clause of the function would set it, and the setting
 * is restored when fn returns (and by the transaction's abort when it
 * fails).  So the run records that device and its workers train there.
 */
Datum
mop_with_device(FunctionCallInfo fcinfo, int argno, PGFunction fn)
{
	char	   *dev;
	int			level;
	Datum		result;

	if (argno >= PG_NARGS() || PG_ARGISNULL(argno))
		return fn(fcinfo);
	dev = text_to_cstring(PG_GETARG_TEXT_PP(argno));
	if (strcmp(dev, "cpu") != 0 && strcmp(dev, "gpu") != 0 && strcmp(dev, "auto") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"device\": \"%s\"", dev),
				 errdetail("Valid values are \"cpu\", \"gpu\" and \"auto\"."),
				 errhint("Leave it NULL to train where mop.device says (now \"%s\").",
						 mop_device_name(mop_device))));
	level = NewGUCNestLevel();
	(void) set_config_option("mop.device", dev, PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE,
							 true, 0, false);
	result = fn(fcinfo);
	AtEOXact_GUC(true, level);
	return result;
}

/*
 * The GPU this process trains on now, or -1 for the CPU.  In a run's worker
 * the run decided; elsewhere mop.device does ('gpu' where none is usable is
 * the same error as at the start; 'auto' quietly takes the CPU then).
 */
int
mop_device_for_training(void)
{
	const char *why = NULL;

	if (mop_gpu_worker_device != -2)
		return mop_gpu_worker_device;
	if (mop_device == MOP_DEVICE_CPU)
		return -1;
	if (gpu_count(&why) > 0)
		return 0;
	if (mop_device == MOP_DEVICE_AUTO)
		return -1;
	gpu_unusable(why);
	return -1;					/* not reached */
}

/*
 * In a run's background worker: train where the run decided, on GPU
 * worker_index mod the number of visible GPUs.  A worker that cannot reach
 * a GPU although the run chose one fails with the reason.
 */
void
mop_gpu_worker_init(bool gpu, int worker_index)
{
	const char *why = NULL;
	int32		n;

	if (!gpu)
	{
		mop_gpu_worker_device = -1;
		return;
	}
	n = gpu_count(&why);
	if (n <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the run trains on a GPU but this worker cannot use one"),
				 errdetail("%s.", why)));
	mop_gpu_worker_device = worker_index % n;
}

/* The loaded library's entry points (after a successful mop_device_for_training). */
const mop_gpu_api *
mop_gpu(void)
{
	if (!gpu_load())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("GPU support is not installed or cannot be loaded"),
				 errdetail("%s", gpu_why)));
	return &gpu_api;
}

/*
 * Report a failure of the GPU library, which happened while `what` (a
 * phrase such as "training on the GPU"), as the right error: over the
 * memory budget or out of device memory 53200, bad data 22023 (as the CPU
 * engine reports it), anything else (CUDA, cuBLAS, the driver) 58000.
 */
void
mop_gpu_error(int rc, const char *msg, const char *what)
{
	char	   *detail = pstrdup(msg && msg[0] ? msg : "no detail");

	/* the library writes lower-case phrases; a detail is a sentence */
	detail[0] = pg_toupper((unsigned char) detail[0]);
	if (rc == MOP_GPU_ENOMEM)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of GPU memory while %s", what),
				 errdetail("%s.", detail),
				 errhint("Raise mop.gpu_memory (now %d MB, 0 = no limit), use a smaller batch_size, or run fewer workers per GPU.",
						 mop_gpu_memory_mb)));
	if (rc == MOP_GPU_EINVAL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s while %s", msg && msg[0] ? msg : "invalid input", what)));
	ereport(ERROR,
			(errcode(ERRCODE_SYSTEM_ERROR),
			 errmsg("GPU failure while %s", what),
			 errdetail("%s.", detail),
			 errhint("SET mop.device = 'cpu' to train on the CPU.")));
}

/*
 * mop_gpu_devices(): the GPUs this backend can see (device, name,
 * compute_capability, memory_total_mb, memory_free_mb, multiprocessors);
 * no rows and a NOTICE saying why when there is none.
 */
Datum
mop_gpu_devices(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	const char *why = NULL;
	int32		n;

	InitMaterializedSRF(fcinfo, 0);
	n = gpu_count(&why);
	if (n == 0)
		ereport(NOTICE, (errmsg("%s", why)));
	for (int32 i = 0; i < n; i++)
	{
		mop_gpu_device d;
		char		msg[512];
		Datum		v[6];
		bool		nulls[6] = {false, false, false, false, false, false};

		CHECK_FOR_INTERRUPTS();
		if (gpu_api.device_info(i, &d, msg, sizeof(msg)) != MOP_GPU_OK)
			ereport(ERROR,
					(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
					 errmsg("could not query GPU %d", i),
					 errdetail("%s", msg)));
		v[0] = Int32GetDatum(d.ordinal);
		v[1] = CStringGetTextDatum(d.name);
		v[2] = CStringGetTextDatum(psprintf("%d.%d", d.cc_major, d.cc_minor));
		v[3] = Int64GetDatum((int64) (d.total_bytes >> 20));
		v[4] = Int64GetDatum((int64) (d.free_bytes >> 20));
		v[5] = Int32GetDatum(d.multiprocessors);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, nulls);
	}
	return (Datum) 0;
}
