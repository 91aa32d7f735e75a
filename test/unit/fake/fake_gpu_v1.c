/*
 * fake_gpu_v1.c -- a stand-in for an old gpu/mop_gpu.so: it reports GPU
 * ABI 1 and exports nothing else.  test/unit/Makefile builds it as
 * fake/fake_gpu_v1.so; test_gpu_host.c checks that the loader refuses it.
 */
int			mop_gpu_abi_version(void);

int
mop_gpu_abi_version(void)
{
	return 1;
}
