/*
 * budget.c -- device-memory accounting of mop's GPU part.  See budget.h.
 */
#include <stdio.h>

#include "budget.h"

void
mop_gpu_format_bytes(uint64_t bytes, char *buf, size_t buflen)
{
	if (bytes >= (UINT64_C(1) << 30))
		snprintf(buf, buflen, "%.1f GB", (double) bytes / (double) (UINT64_C(1) << 30));
	else if (bytes >= (UINT64_C(1) << 20))
		snprintf(buf, buflen, "%.1f MB", (double) bytes / (double) (UINT64_C(1) << 20));
	else if (bytes >= 10240)
		snprintf(buf, buflen, "%.1f kB", (double) bytes / 1024.0);
	else
		snprintf(buf, buflen, "%llu bytes", (unsigned long long) bytes);
}

int
mop_gpu_ledger_reserve(mop_gpu_ledger *l, uint64_t need, const char *what,
					   char *msg, size_t msglen)
{
	if ((l->budget > 0 && (need > l->budget || l->in_use > l->budget - need)) ||
		need > UINT64_MAX - l->in_use)
	{
		char		a[32],
					b[32],
					c[32];

		mop_gpu_format_bytes(need, a, sizeof(a));
		mop_gpu_format_bytes(l->budget, b, sizeof(b));
		mop_gpu_format_bytes(l->in_use, c, sizeof(c));
		if (msg && msglen > 0)
			snprintf(msg, msglen,
					 "%s needs %s of GPU memory, over the budget of %s (%s in use)",
					 what ? what : "an allocation", a, b, c);
		return -1;
	}
	l->in_use += need;
	if (l->in_use > l->peak)
		l->peak = l->in_use;
	l->allocations++;
	return 0;
}

void
mop_gpu_ledger_release(mop_gpu_ledger *l, uint64_t bytes)
{
	l->in_use = bytes > l->in_use ? 0 : l->in_use - bytes;
	if (l->allocations > 0)
		l->allocations--;
}
