/*
 * route_hold.c - what a routed session does when neki does not know enough to route it: it
 * waits, or it refuses; it never guesses.
 *
 *   - Its first message is served once the topology is published and the catalog of its
 *     database is loaded (an admin that has just started finds the store on the
 *     authoritative shard and loads the catalog from there). Until then the message waits
 *     (the client is not read further), polled every ROUTE_HOLD_POLL_MS, for at most
 *     query_wait_timeout: then the session ends with FATAL "query_wait_timeout", as a
 *     client that waited too long for a server link. query_timeout covers the wait too, as
 *     for a client queued for a link. A session once served is never held again (one bool
 *     test per message). Never served before: a sharded database is not served as
 *     pass-through, nor planned without the column types of its tables.
 *   - A plan that met a sharded table the catalog lacks (created through another neki host,
 *     or directly on the shards) asks the admin for a catalog load (the refresh request of
 *     shm_cat.c) and waits for it (route_cat_wait(), at most ROUTE_CAT_WAIT_US) before the
 *     statement is planned again with it. A session asks at most once in ROUTE_FETCH_GAP_US
 *     after a wait for the catalog ended, so a table that exists nowhere costs one load a
 *     second, not one per statement; the statement is then planned without the table, and a
 *     value of it is refused (42704, NK306), never routed by a type guessed from its text.
 * Entry points: route_hold_ready(), route_hold_poll(), route_hold_unknown().
 */
#include "neki/base.h"

#include <event2/event.h>

#include "neki/catalog_image.h"
#include "neki/log.h"
#include "neki/pool.h"
#include "neki/shm.h"
#include "route_int.h"
#include "route_client.h"
#include "route_hold.h"

#define ROUTE_HOLD_POLL_MS 20
#define ROUTE_FETCH_GAP_US 1000000

/* Are the topology and the catalog of r->db published? *topo: the topology is. */
static bool
route_hold_loaded(const struct route *r, bool *topo)
{
	struct cat_view cv;
	bool ok;

	*topo = shm_topo_revision() != 0;
	if (!*topo)
		return false;
	cat_view_acquire(&cv, r->db);
	ok = cv.db != CAT_IMG_NONE;
	cat_view_release(&cv);
	return ok;
}

/*
 * With a topology and still no catalog of r->db (a database new to the configuration, not
 * in the last load): ask the admin for a load, once per hold (it retries failed ones).
 */
static void
route_hold_ask(struct route *r, bool topo)
{
	if (!topo || r->hold.hold_asked)
		return;
	r->hold.hold_asked = true;
	(void)shm_cat_request_refresh();
}

static void
route_hold_arm(struct route *r)
{
	struct timeval tv = { 0, ROUTE_HOLD_POLL_MS * 1000 };

	r->hold.resume = ROUTE_RESUME_HOLD;
	evtimer_add(r->hold.ev_poll, &tv);
}

/* Held for query_wait_timeout: the session ends (true), as pgbouncer ends a waiting client. */
static bool
route_hold_expired(struct route *r, bool topo)
{
	double secs = pool_query_wait_timeout(spool_pool(r->c.sp));
	struct nk_error err;

	if (secs <= 0 || nk_now_us() - r->hold.hold_since_us < (uint64_t)(secs * 1e6))
		return false;
	nk_error_set(&err, ERRCODE_PROTOCOL_VIOLATION, "query_wait_timeout");
	err.severity = NK_SEV_FATAL;
	if (topo)
		nk_error_detail(&err, "The catalog of sharded database \"%s\" has not been loaded "
				"from the authoritative shard.", r->db);
	else
		nk_error_detail(&err, "No data topology has been published for sharded database "
				"\"%s\".", r->db);
	route_client_close(r, err.message, &err);
	return true;
}

/* route_hold_ready: see route_int.h. */
bool
route_hold_ready(struct route *r)
{
	bool topo;

	if (route_hold_loaded(r, &topo)) {
		r->hold.ready = true;
		return true;
	}
	r->hold.hold_since_us = nk_now_us();
	r->busy = true;		/* a query waiting: query_timeout, no client_idle_timeout */
	r->query_start_us = r->hold.hold_since_us;
	route_client_log(r, LOG_LVL_DEBUG, "waiting for the %s of sharded database \"%s\"",
		 topo ? "catalog" : "data topology", r->db);
	route_hold_ask(r, topo);
	route_hold_arm(r);
	return false;
}

/* route_hold_poll: see route_int.h. */
void
route_hold_poll(struct route *r)
{
	bool topo;

	if (route_hold_loaded(r, &topo)) {
		r->hold.ready = true;
		r->busy = false;
		r->query_start_us = 0;	/* (its query's own clock starts when it runs) */
		route_client_log(r, LOG_LVL_DEBUG, "served after %llu ms of waiting",
			 (unsigned long long)((nk_now_us() - r->hold.hold_since_us) / 1000));
		sbuf_continue(r->c.sb);	/* the held message is offered again */
		return;
	}
	if (route_hold_expired(r, topo))
		return;
	route_hold_ask(r, topo);
	route_hold_arm(r);
}

/* route_hold_unknown: see route_int.h. */
bool
route_hold_unknown(struct route *r, const struct plan_unknown *u, struct nk_error *err)
{
	uint64_t now = nk_now_us();

	if (!r->hold.fetch_off && (r->hold.cat_done_us == 0 || now - r->hold.cat_done_us >= ROUTE_FETCH_GAP_US)) {
		route_client_log(r, LOG_LVL_DEBUG, "table \"%s.%s\" is not in the catalog: loading it",
			 u->schema, u->table);
		r->hold.cat_wait = shm_cat_request_refresh();
		r->hold.poll_deadline_us = now + ROUTE_CAT_WAIT_US;
		return true;
	}
	if (err == NULL || err->detail[0] != '\0' || err->hint[0] != '\0')
		return false;
	nk_error_detail(err, "Table \"%s.%s\" is not in the catalog neki reads from the "
			"authoritative shard.", u->schema, u->table);
	nk_error_hint(err, "Create the table on the authoritative shard too (DDL through neki "
		      "runs on every shard).");
	return false;
}
