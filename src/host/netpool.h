/*
 * netpool: the sandbox networks (src/net) a kilnd owns, and a warm pool of
 * ready ones. Making a network takes a handful of ip(8) and nft(8) runs
 * (tens of milliseconds on a real host, seconds under emulation), so a
 * background thread keeps --net-pool of them made, or as many as were
 * taken in the last minute, up to --max-creates; a create takes one from
 * the pool and only makes its own when the pool is empty.
 *
 * Every slot this kilnd claims has an owner record NET_OWNER_DIR/SLOT
 * (net.h) naming its claim file DATA/net/SLOT, both made before the
 * namespace and removed after it is gone (netclaim_make). A kilnd that
 * starts after a SIGKILL finds there which namespaces were its own and
 * removes those no sandbox holds; other kilnds on the host (tests side by
 * side, a host agent beside a one-box kilnd) keep theirs.
 */
#ifndef KILN_HOST_NETPOOL_H
#define KILN_HOST_NETPOOL_H

#include <stdbool.h>
#include <stdint.h>

struct host_config;
struct net_config;
struct net_slot;
struct netpool;

/* A free slot claimed for the kilnd of data_dir and made (the template
 * build's network uses it too). hold (may be NULL): the claim file, open
 * and locked (flock), for a process that is not the kilnd of data_dir
 * (`kilnd template build`): a kilnd that starts meanwhile leaves a held
 * claim alone. Close it after netclaim_drop. */
int netclaim_make(const char *data_dir, const struct net_config *nc, struct net_slot *out, int *hold);
/* Destroy slot's namespace and drop its claim, if the slot is data_dir's
 * (idempotent); false when it was another kilnd's (only a stale claim of
 * data_dir's went). */
bool netclaim_drop(const char *data_dir, const struct net_config *nc, uint32_t slot);

/* The kiln nftables table in place, DATA/net made; no thread yet. */
int netpool_open(const struct host_config *cfg, struct netpool **out);
/* Remove this data directory's slots that are not in keep[] (the
 * sandboxes that live on), then start filling the pool. */
void netpool_start(struct netpool *p, const uint32_t *keep, int nkeep);
/* Stop the filler and remove the pool's ready slots; the slots that
 * sandboxes hold stay (their VMMs outlive kilnd). With none left on the
 * host, the kiln table goes too. */
void netpool_close(struct netpool *p);

/* A ready slot (from the pool, or made now): its number. */
int netpool_take(struct netpool *p, uint32_t *slot);
/* Whether slot's namespace still exists. */
bool netpool_exists(struct netpool *p, uint32_t slot);
/* Destroy a slot and its claim (idempotent). */
void netpool_drop(struct netpool *p, uint32_t slot);
/* Slots now in the pool (for tests and metrics). */
int netpool_ready(struct netpool *p);

#endif
