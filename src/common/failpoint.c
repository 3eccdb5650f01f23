#include "common/failpoint.h"

#include <stdatomic.h>
#include <stdlib.h>

static const char *const names[FP_COUNT] = {
	[FP_SPAWN_DIES] = "KILN_TEST_SPAWN_DIES",
	[FP_READY_DIES] = "KILN_TEST_READY_DIES",
	[FP_FORK_DIES] = "KILN_TEST_FORK_DIES",
	[FP_RESTORE_DIES] = "KILN_TEST_RESTORE_DIES",
	[FP_RESYNC_DIES] = "KILN_TEST_RESYNC_DIES",
	[FP_GC_SLOW] = "KILN_TEST_GC_SLOW",
	[FP_HOST_DROP_DELETE] = "KILN_TEST_HOST_DROP_DELETES",
};
/* -1: not read yet. */
static atomic_int left[FP_COUNT] = { [0 ... FP_COUNT - 1] = -1 };

bool failpoint_hit(enum failpoint fp)
{
	int n = atomic_load(&left[fp]);
	if (n < 0) {
		const char *e = getenv(names[fp]);
		int want = e ? atoi(e) : 0, unset = -1;
		atomic_compare_exchange_strong(&left[fp], &unset, want > 0 ? want : 0);
		n = atomic_load(&left[fp]);
	}
	while (n > 0)
		if (atomic_compare_exchange_weak(&left[fp], &n, n - 1))
			return true;
	return false;
}
