/*
 * epoch.c - the epoch of the atomic commit's global ids (include/neki/twophase.h). Once per
 * start of the router, the admin process inserts the next epoch of its host id
 * ("<hostname>:<listen_port>") into __neki.router_epochs on the authoritative shard (the
 * store, src/admin/revision.c) and publishes it into shm (include/neki/shm_epoch.h); the
 * workers refuse a commit needing two-phase commit until then. A restarted admin process
 * keeps the epoch shm holds; a failed insert is tried again at the next beat.
 * Entry point: epoch_take().
 */
#include "neki/base.h"

#include "admin_int.h"
#include "epoch.h"

#include <inttypes.h>
#include <stdlib.h>

#include "neki/log.h"
#include "neki/shm_epoch.h"

static bool epoch_busy;			/* the insert is in flight */

static void
epoch_cb(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	uint64_t e;

	epoch_busy = false;
	if (err != NULL) {
		log_warn("could not take an epoch for global transaction ids: %s", err->message);
		return;
	}
	if (pgc_res_rows(res) != 1 || pgc_res_get(res, 0, 0) == NULL ||
	    (e = strtoull(pgc_res_get(res, 0, 0), NULL, 10)) == 0)
		return;
	shm_tx_epoch_set(e);
	log_info("epoch %" PRIu64 " of global transaction ids taken for %s", e,
		 follow_host_id());
}

/* epoch_take: see epoch.h. */
void
epoch_take(void)
{
	const char *params[1] = { follow_host_id() };

	if (shm_tx_epoch() != 0 || epoch_busy)
		return;
	epoch_busy = follow_query_params(
		"INSERT INTO __neki.router_epochs (host_id, epoch) SELECT $1, coalesce(max(epoch), 0)"
		" + 1 FROM __neki.router_epochs WHERE host_id = $1 RETURNING epoch",
		1, params, epoch_cb, NULL);
}
