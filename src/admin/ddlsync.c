/*
 * ddlsync.c - DDL and setval() across neki hosts sharing one authoritative shard.
 *
 * The store (doc/topology.md) keeps one row `__neki.cluster_state (schema_version,
 * seq_epoch)`. A catalog load that answers this host's own refresh requests (DDL through one
 * of its workers) first bumps schema_version there and sends `NOTIFY neki_catalog`; any
 * other load reads it. The published catalog carries the version it read
 * (shm_schema_version), the heartbeat reports it in `__neki.routers.schema_version`, and a
 * host learning of a newer version (notification or heartbeat) loads its catalog again:
 * that is what __neki.wait_for_ddl waits for (follow.c).
 * A setval() through a worker (shm_seq_announce) bumps seq_epoch and sends `NOTIFY
 * neki_sequences`; every other host drops its reserved sequence values on learning of a
 * newer epoch (shm_seq_bump_all).
 * Entry points: ddlsync_init(), ddlsync_version(), ddlsync_learned().
 */
#include "neki/base.h"

#include "admin_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "neki/log.h"
#include "neki/shm.h"
#include "neki/shm_seq.h"

#define DDLSYNC_POLL_MS 20

/* A catalog load waiting for the version it will carry. */
struct ver_wait {
	void (*cb)(void *arg, uint64_t version);
	void *arg;
};

static struct event *ds_poll;		/* owned: setval announcements */
static uint64_t ds_seq_told;		/* shm_seq_announced() already told the store */
static bool ds_seq_busy;		/* a seq_epoch bump is in flight */
static uint64_t ds_epoch;		/* newest seq_epoch known; 0 before the first answer */
static bool ds_epoch_known;

/* A seq_epoch newer than ours (not our own bump): drop every reserved value. */
static void
epoch_learned(uint64_t epoch, bool own)
{
	if (ds_epoch_known && epoch > ds_epoch && !own) {
		log_debug("sequence epoch %" PRIu64 " from another host: reserved values dropped",
			  epoch);
		shm_seq_bump_all();
	}
	if (!ds_epoch_known || epoch > ds_epoch)
		ds_epoch = epoch;
	ds_epoch_known = true;
}

/* ddlsync_learned: see admin_int.h. */
void
ddlsync_learned(uint64_t schema_version, uint64_t seq_epoch)
{
	if (schema_version > shm_schema_version())
		catload_refresh();
	epoch_learned(seq_epoch, false);
}

static void
version_cb(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	struct ver_wait *w = arg;
	uint64_t v = shm_schema_version();

	if (err != NULL)
		log_debug("cluster schema version not read: %s", err->message);
	else if (pgc_res_rows(res) > 0 && pgc_res_get(res, 0, 0) != NULL)
		v = strtoull(pgc_res_get(res, 0, 0), NULL, 10);
	w->cb(w->arg, v);
	free(w);
}

/* ddlsync_version: see admin_int.h. */
void
ddlsync_version(bool bump, void (*cb)(void *arg, uint64_t version), void *arg)
{
	static const char read_sql[] = "SELECT schema_version FROM __neki.cluster_state";
	static const char bump_sql[] =
		"WITH u AS (UPDATE __neki.cluster_state SET schema_version = schema_version + 1"
		" RETURNING schema_version) SELECT schema_version, pg_catalog.pg_notify("
		"'neki_catalog', schema_version::text || ' ' || $1) FROM u";
	const char *params[1] = { follow_host_id() };
	struct ver_wait *w = malloc(sizeof(*w));

	if (w == NULL) {
		cb(arg, shm_schema_version());
		return;
	}
	w->cb = cb;
	w->arg = arg;
	if (!follow_query_params(bump ? bump_sql : read_sql, bump ? 1 : 0, params, version_cb,
				 w)) {
		free(w);
		cb(arg, shm_schema_version());	/* no store followed: nothing to share */
	}
}

static void
epoch_cb(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	uint64_t told = (uint64_t)(uintptr_t)arg;

	ds_seq_busy = false;
	if (err != NULL) {
		log_warn("could not tell other neki hosts of a setval(): %s", err->message);
		return;		/* (retried at the next poll) */
	}
	ds_seq_told = told;
	if (pgc_res_rows(res) > 0 && pgc_res_get(res, 0, 0) != NULL)
		epoch_learned(strtoull(pgc_res_get(res, 0, 0), NULL, 10), true);
}

/* A worker ran setval(): bump seq_epoch (and notify) on the store. */
static void
poll_cb(evutil_socket_t fd, short what, void *arg)
{
	uint64_t n = shm_seq_announced();
	const char *params[1] = { follow_host_id() };

	(void)fd, (void)what, (void)arg;
	if (n == ds_seq_told || ds_seq_busy)
		return;
	ds_seq_busy = true;
	if (!follow_query_params("WITH u AS (UPDATE __neki.cluster_state SET seq_epoch ="
				 " seq_epoch + 1 RETURNING seq_epoch) SELECT seq_epoch,"
				 " pg_catalog.pg_notify('neki_sequences', seq_epoch::text || ' ' ||"
				 " $1) FROM u", 1, params, epoch_cb, (void *)(uintptr_t)n)) {
		ds_seq_busy = false;
		ds_seq_told = n;	/* no store followed: no other host to tell */
	}
}

/* ddlsync_notified: see admin_int.h. */
bool
ddlsync_notified(const char *channel, const char *payload)
{
	char *end;
	uint64_t v = strtoull(payload, &end, 10);
	bool own = *end == ' ' && strcmp(end + 1, follow_host_id()) == 0;	/* (ours) */

	if (strcmp(channel, "neki_catalog") == 0) {
		if (!own && v > shm_schema_version())
			catload_refresh();
		return true;
	}
	if (strcmp(channel, "neki_sequences") == 0) {
		epoch_learned(v, own);
		return true;
	}
	if (strcmp(channel, "neki_activity") == 0) {
		activity_notified(v);
		return true;
	}
	return false;
}

/* ddlsync_init: see admin_int.h. */
void
ddlsync_init(struct event_base *base)
{
	struct timeval tv = { 0, DDLSYNC_POLL_MS * 1000 };

	ds_seq_told = shm_seq_announced();
	ds_poll = event_new(base, -1, EV_PERSIST, poll_cb, NULL);
	if (ds_poll == NULL || event_add(ds_poll, &tv) == -1)
		log_error("could not set up the setval() announcements");
}
