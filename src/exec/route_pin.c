/*
 * route_pin.c - shard links a routed session holds across its transactions (issue 6):
 * while a link's backend listens on a channel (route_listen.c) or may hold a session-level
 * advisory lock (plan.pin), the session keeps it: it is not given back to the pool after
 * the transaction (it still counts in the pool's limits, as a session-mode link), the
 * session's statements on that shard keep using it, and it is closed when the client goes.
 *
 * What a link holds is the shard's business, so the router asks it: after a statement that
 * may change it (LISTEN, UNLISTEN, a session-level lock or unlock call) the link is marked
 * probe_due, and with the statement that leaves it outside a transaction (the statement
 * itself in autocommit, or the COMMIT / ROLLBACK) the probe query below goes out behind
 * it. Its answer (read as part of the statement's answer, before the exec ends) gives the
 * exact state: the channels the backend listens on after commit, its advisory locks, with
 * Postgres' own stacking, try-lock results and rollback rules. A link holding nothing
 * anymore becomes an ordinary pooled link again.
 *
 * Entry points: route_pin_mark(), route_pin_after_send(), route_pin_probe_msg(),
 * route_pin_lost(), route_pin_discard(), route_pin_lock_shard(), route_pin_held().
 */
#include "neki/base.h"

#include <stdlib.h>
#include <string.h>

#include "neki/link.h"
#include "neki/log.h"
#include "neki/pktbuf.h"
#include "neki/proto.h"
#include "route_int.h"
#include "route_client.h"
#include "route_pin.h"

/* What the backend holds: listening channels (after commit) and advisory locks. */
#define ROUTE_PIN_PROBE_SQL \
	"SELECT EXISTS (SELECT FROM pg_catalog.pg_listening_channels()), " \
	"EXISTS (SELECT FROM pg_catalog.pg_locks WHERE locktype = 'advisory' " \
	"AND pid = pg_catalog.pg_backend_pid())"

/* DISCARD ALL's part on a held link (Postgres' DISCARD ALL does both). */
#define ROUTE_PIN_RELEASE_SQL "UNLISTEN *; SELECT pg_catalog.pg_advisory_unlock_all()"

/* route_pin_mark: see route_int.h. */
void
route_pin_mark(struct rshard *sh, enum plan_pin pin)
{
	if (pin == PLAN_PIN_NONE)
		return;
	if (pin == PLAN_PIN_LOCK)
		sh->pin |= RPIN_LOCK;	/* held at once: the lock may be taken */
	sh->probe_due = true;
}

/* route_pin_lock_shard: see route_int.h. */
const char *
route_pin_lock_shard(const struct route *r)
{
	for (uint32_t i = 0; i < r->nsh; i++)
		if (r->sh[i].pin & RPIN_LOCK)
			return r->sh[i].uid;
	return NULL;
}

/* route_pin_held: see route_int.h. */
bool
route_pin_held(const struct rshard *sh)
{
	return sh->pin != 0 || sh->probing || sh->probe_reading;
}

/* route_pin_after_send: see route_int.h. */
bool
route_pin_after_send(struct route *r, struct rshard *sh)
{
	struct pktbuf pb;
	bool ok;

	if (!sh->probe_due)
		return true;
	if (r->x.after != RX_AFTER_COMMIT && r->x.after != RX_AFTER_ROLLBACK &&
	    !(r->x.after == RX_AFTER_STMT && r->tx == 'I'))
		return true;	/* still inside its transaction: asked at its end */
	pktbuf_init(&pb, 256);
	pktbuf_write_query(&pb, ROUTE_PIN_PROBE_SQL);
	ok = !pktbuf_failed(&pb) && link_send(sh->link, pb.buf, pb.len);
	pktbuf_cleanup(&pb);
	sh->probing = ok;
	sh->probe_ok = false;
	return ok;
}

/* The probe's row: two booleans as text. */
static void
pin_probe_row(struct rshard *sh, const struct sbuf_pkt *pkt)
{
	struct proto_datarow_msg m;
	struct proto_value v[2];
	struct nk_error err;

	if (!proto_parse_data_row(pkt->data + 5, pkt->len - 5, &m, &err) ||
	    proto_datarow_values(&m, v, 2) != 2 || v[0].p == NULL || v[1].p == NULL)
		return;
	sh->probe_pin = (v[0].len == 1 && v[0].p[0] == 't' ? RPIN_LISTEN : 0) |
			(v[1].len == 1 && v[1].p[0] == 't' ? RPIN_LOCK : 0);
	sh->probe_ok = true;
}

/* route_pin_probe_msg: see route_int.h. */
bool
route_pin_probe_msg(struct route *r, struct rshard *sh, struct link *l,
		    const struct sbuf_pkt *pkt, bool *done)
{
	*done = false;
	if (pkt->type == 'D') {
		if (pkt->avail < pkt->len) {
			if (sbuf_hold(link_sbuf(l), pkt->len))
				return true;
			route_client_fatal(r, "server sent too big packet");
			return false;
		}
		pin_probe_row(sh, pkt);
	} else if (pkt->type == 'E') {
		log_warn("S: shard %s: the held-link probe failed; asked again later", sh->uid);
	} else if (pkt->type == 'Z') {
		sh->probe_reading = false;
		*done = true;
		if (sh->probe_ok) {	/* else keep what it was, ask again next time */
			sh->pin = sh->probe_pin;
			sh->probe_due = false;
		}
	}
	sbuf_skip(link_sbuf(l), pkt->len);
	return true;
}

/* route_pin_lost: see route_int.h. */
bool
route_pin_lost(struct route *r, struct rshard *sh, const struct nk_error *err)
{
	struct nk_error e;

	if (!route_pin_held(sh))
		return false;
	sh->pin = 0;
	sh->probe_due = sh->probing = sh->probe_reading = false;
	nk_error_set(&e, ERRCODE_CONNECTION_FAILURE,
		     "the connection to shard \"%s\" holding this session's LISTEN "
		     "or advisory locks was lost: %s", sh->uid,
		     err != NULL ? err->message : "server conn crashed?");
	e.severity = NK_SEV_FATAL;
	route_client_close(r, e.message, &e);
	return true;
}

/* route_pin_discard: see route_int.h. */
bool
route_pin_discard(struct route *r, struct nk_error *err)
{
	const char *uids[ROUTE_SHARDS_MAX];
	uint32_t n = 0;

	nk_error_clear(err);
	for (uint32_t i = 0; i < r->nsh; i++)
		if (r->sh[i].link != NULL && r->sh[i].pin != 0)
			uids[n++] = r->sh[i].uid;
	if (n == 0 || !route_exec_setup(r, uids, n, ROUTE_PIN_RELEASE_SQL, err))
		return false;
	for (uint32_t i = 0; i < r->x.ntg; i++)
		r->sh[r->x.tg[i]].probe_due = true;
	r->x.combine = RX_QUIET;
	strcpy(r->x.end_tag, "DISCARD ALL");
	return true;
}
