/*
 * failpoint (common: the host agent and its HTTP front use it): deaths
 * that tests cause on purpose, to show that kilnd
 * survives them (tests/e2e/79-kilnd-vmm-died.sh), and delays that hold a
 * race's window open. Each is a count N from kilnd's environment, read
 * once: the next N occasions are hit.
 *   KILN_TEST_SPAWN_DIES  spawned guests triple-fault before their VMM's
 *                         ready (the spawn's "test_triple_fault": child.c)
 *   KILN_TEST_READY_DIES  spawned VMMs end right after their ready
 *                         ("test_exit_after_ready": vm.c)
 *   KILN_TEST_FORK_DIES   forked children triple-fault as spawned ones do
 *   KILN_TEST_RESTORE_DIES  guests restored by a VMM of their own (a wake,
 *                         a create from a snapshot) triple-fault before
 *                         ready (kiln-vmm --test-triple-fault: vm.c)
 *   KILN_TEST_RESYNC_DIES  a VMM ends right before kilnd resyncs its guest
 *                         (host/sandbox.c sandbox_wait_ready: the ctl
 *                         socket's shutdown), so the resync finds the
 *                         agent's connection closed, as a guest's death
 *                         there makes it
 *   KILN_TEST_GC_SLOW     the layers collector waits 1 s between reading
 *                         the live chains and sweeping (layers.c): a
 *                         directory made meanwhile must survive the sweep
 *                         (tests/e2e/62-kilnd-concurrency.sh)
 *   KILN_TEST_HOST_DROP_DELETES  a host agent closes the connection of a
 *                         sandbox delete unanswered, before deleting (as
 *                         a reset looks to the API: api/h_host.c,
 *                         tests/cluster/hosts.sh `delete_retried`)
 * Unset (as in production): never hit.
 */
#ifndef KILN_COMMON_FAILPOINT_H
#define KILN_COMMON_FAILPOINT_H

#include <stdbool.h>

enum failpoint { FP_SPAWN_DIES, FP_READY_DIES, FP_FORK_DIES, FP_RESTORE_DIES, FP_RESYNC_DIES, FP_GC_SLOW, FP_HOST_DROP_DELETE, FP_COUNT };

/* Whether this occasion is hit (takes one from its count). */
bool failpoint_hit(enum failpoint fp);

#endif
