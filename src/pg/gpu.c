/*
 * gpu.c -- where training runs: the mop.device setting, and the lazy loader
 * of mop's optional CUDA part (gpu/mop_gpu.so, C ABI in gpu/mop_gpu.h).
 *
 * mop.so never links CUDA.  The GPU library is opened with dlopen the first
 * time a session asks for a GPU (mop.device = 'gpu' or 'auto', or
 * mop_gpu_devices()), never in the postmaster and never for 'cpu', so a
 * server without a GPU, a driver or the CUDA libraries behaves exactly as if
 * the GPU part did not exist.  Every failure -- library not installed, a
 * CUDA library missing, an ABI mismatch, no driver, no visible device -- is
 * reported with what went wrong in the detail.
 *
 * State of the GPU backend: device discovery and placement checks are here;
 * the CUDA training engine itself (cuBLAS/cuDNN kernels with CPU parity) is
 * not written yet, because no GPU was available to verify it against the
 * CPU reference.  Asking for device 'gpu' where a GPU is usable therefore
 * fails with feature_not_supported rather than silently training on the
 * CPU; 'auto' falls back to the CPU with a NOTICE.
 */
#include "postgres.h"

#include <dlfcn.h>

#include "funcapi.h"
#include "miscadmin.h"
#include "postmaster/postmaster.h"
#include "utils/builtins.h"
#include "utils/guc.h"

#include "mop.h"
#include "../../gpu/mop_gpu.h"

PG_FUNCTION_INFO_V1(mop_gpu_devices);

char	   *mop_device = NULL;

static void *gpu_lib;			/* dlopen handle, once loaded */
static char gpu_why[512];		/* why the library could not be used */
static bool gpu_tried;
static mop_gpu_device_count_fn gpu_device_count;
static mop_gpu_device_info_fn gpu_device_info;

/* mop.device must be cpu, gpu or auto. */
static bool
check_device(char **newval, void **extra, GucSource source)
{
	if (*newval && strcmp(*newval, "cpu") != 0 && strcmp(*newval, "gpu") != 0 &&
		strcmp(*newval, "auto") != 0)
	{
		GUC_check_errdetail("Valid values are \"cpu\", \"gpu\" and \"auto\".");
		return false;
	}
	return true;
}

/* Define mop.device (called from _PG_init; touches no GPU). */
void
mop_gpu_define_gucs(void)
{
	DefineCustomStringVariable("mop.device",
							   "Where mop trains: cpu, gpu, or auto (a GPU if one is usable, else the CPU).",
							   "Checked when mop_train or a search starts.",
							   &mop_device,
							   "cpu",
							   PGC_USERSET, 0,
							   check_device, NULL, NULL);
}

/* Open gpu/mop_gpu.so once; false (and gpu_why) if it cannot be used. */
static bool
gpu_load(void)
{
	char		dir[MAXPGPATH],
				path[MAXPGPATH];
	mop_gpu_abi_version_fn abi;

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
	abi = (mop_gpu_abi_version_fn) dlsym(gpu_lib, "mop_gpu_abi_version");
	gpu_device_count = (mop_gpu_device_count_fn) dlsym(gpu_lib, "mop_gpu_device_count");
	gpu_device_info = (mop_gpu_device_info_fn) dlsym(gpu_lib, "mop_gpu_device_info");
	if (!abi || !gpu_device_count || !gpu_device_info || abi() != MOP_GPU_ABI_VERSION)
	{
		snprintf(gpu_why, sizeof(gpu_why),
				 "%s does not match this mop.so (GPU ABI %d, expected %d)",
				 path, abi ? abi() : -1, MOP_GPU_ABI_VERSION);
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
	if (gpu_device_count(&n, msg, sizeof(msg)) != MOP_GPU_OK || n <= 0)
	{
		*why = psprintf("no usable GPU: %s", msg[0] ? msg : "no device");
		return 0;
	}
	return n;
}

/*
 * Resolve mop.device before training starts: 'cpu' (nothing is loaded),
 * 'gpu' (an ERROR unless a GPU backend can train), 'auto' (a NOTICE and the
 * CPU when not).  Returns true for the GPU -- never, until the CUDA engine
 * exists.
 */
bool
mop_device_check(void)
{
	const char *dev = mop_device ? mop_device : "cpu";
	const char *why = NULL;
	int32		n;

	if (strcmp(dev, "cpu") == 0)
		return false;
	n = gpu_count(&why);
	if (n > 0)
		why = psprintf("mop found %d GPU%s, but its CUDA training engine is not built yet",
					   n, n == 1 ? "" : "s");
	if (strcmp(dev, "auto") == 0)
	{
		ereport(NOTICE,
				(errmsg("mop.device is 'auto': training on the CPU"),
				 errdetail("%s.", why)));
		return false;
	}
	if (n > 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("training on a GPU is not supported by this build of mop"),
				 errdetail("%s.", why),
				 errhint("SET mop.device = 'cpu' (or 'auto' to use a GPU once mop can).")));
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("mop.device is 'gpu' but no GPU is usable"),
			 errdetail("%s.", why),
			 errhint("SET mop.device = 'cpu', or 'auto' to fall back to the CPU.")));
	return false;				/* not reached */
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
		if (gpu_device_info(i, &d, msg, sizeof(msg)) != MOP_GPU_OK)
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
