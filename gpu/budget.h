/*
 * budget.h -- device-memory accounting of mop's GPU part, in plain C (no
 * CUDA), so that it is unit-tested on machines without a GPU.
 *
 * The GPU library asks the ledger before every device allocation; a request
 * that would take the process past its budget is refused before anything is
 * allocated, with a message naming the need, the budget and what is in use.
 * The ledger does no locking: its one user (gpu/engine.cu) holds a mutex.
 */
#ifndef MOP_GPU_BUDGET_H
#define MOP_GPU_BUDGET_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C"
{
#endif

typedef struct mop_gpu_ledger
{
	uint64_t	in_use;
	uint64_t	peak;
	uint64_t	budget;			/* 0: no limit */
	int64_t		allocations;
} mop_gpu_ledger;

/*
 * Reserve need bytes for what: 0 when granted (in_use grows), -1 when it
 * would pass the budget (nothing changes; msg says why).
 */
int			mop_gpu_ledger_reserve(mop_gpu_ledger *l, uint64_t need, const char *what,
								   char *msg, size_t msglen);

/* Give back bytes reserved earlier. */
void		mop_gpu_ledger_release(mop_gpu_ledger *l, uint64_t bytes);

/* "12.5 MB" style text for messages. */
void		mop_gpu_format_bytes(uint64_t bytes, char *buf, size_t buflen);

#ifdef __cplusplus
}
#endif

#endif							/* MOP_GPU_BUDGET_H */
