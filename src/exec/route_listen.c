/*
 * route_listen.c - LISTEN / UNLISTEN / NOTIFY on a sharded database (issue 6). Every
 * notification of the database goes through its notify shard, the authoritative group's
 * shard (doc/router.md "Decisions"): NOTIFY and pg_notify() run there, and a session's
 * LISTENs run on a link to it that the session then holds (route_pin.c) until it listens
 * on nothing (UNLISTEN *, the last UNLISTEN, DISCARD ALL) or disconnects. LISTEN in a
 * transaction block joins the transaction on that shard, so Postgres applies it at COMMIT
 * and drops it at ROLLBACK; the probe after the transaction tells whether the link listens.
 *
 * NotificationResponses of the held link reach the client as Postgres delivers them: at
 * once while the session is idle outside a transaction; otherwise held (in order) until
 * the client is about to get ReadyForQuery outside a transaction: never in the middle of
 * another statement's result, never inside a transaction block. The sender pid of the
 * session's own notifications (sent through its held link) is the session's BackendKeyData
 * pid, as a client comparing the two expects. Past ROUTE_NOTES_MAX held bytes the link is
 * not read (the shard keeps the rest in its queue). Entry points: route_listen_stmt(),
 * route_listen_notify(), route_listen_flush(), route_listen_usage_notice(),
 * route_listen_free().
 */
#include "neki/base.h"

#include <stdlib.h>
#include <string.h>

#include "neki/link.h"
#include "neki/log.h"
#include "neki/pktbuf.h"
#include "neki/proto.h"
#include "neki/topology_image.h"
#include "route_int.h"
#include "route_client.h"
#include "route_listen.h"
#include "route_pin.h"

#define ROUTE_NOTES_MAX (1u << 20)	/* held bytes before the listening link is paused */

/* One held NotificationResponse. */
struct rnote {
	struct rnote *next;
	uint32_t pid;			/* the sender (the session's own key pid for its own) */
	const char *channel, *payload;	/* point into data */
	size_t size;			/* bytes counted in notes_bytes */
	char data[];
};

/* The notify shard of the database: the authoritative group's shard. */
static const char *
listen_shard(const void *img)
{
	return topo_image_group_shard(img, topo_image_authoritative(img), 0);
}

/* route_listen_stmt: see route_int.h. */
bool
route_listen_stmt(struct route *r, const char *tag, const char *sql, const void *img,
		  bool *exec, struct nk_error *err)
{
	const char *uid = listen_shard(img);
	bool listen = route_streq(tag, "ListenStmt"), unlisten = route_streq(tag, "UnlistenStmt");
	struct rshard *sh = NULL;

	*exec = true;
	for (uint32_t i = 0; i < r->nsh && unlisten; i++)
		if (route_streq(r->sh[i].uid, uid))
			sh = &r->sh[i];
	if (unlisten && (sh == NULL || sh->link == NULL || !route_pin_held(sh))) {
		*exec = false;	/* listening nowhere: nothing to undo, as Postgres */
		return true;
	}
	for (uint32_t i = 0; i < r->nsh && r->ps.tx_mode == PLAN_TX_SINGLE && r->tx != 'I' &&
			     !r->implicit; i++)
		if (r->sh[i].in_tx && !route_streq(r->sh[i].uid, uid))
			return nk_error_set(err, ERRCODE_FEATURE_NOT_SUPPORTED,
					    "statement would add shard \"%s\" to the "
					    "transaction, but __neki.tx_mode is single", uid);
	if (!route_exec_setup(r, &uid, 1, sql, err))
		return false;
	sh = &r->sh[r->x.tg[0]];
	if (listen)
		sh->pin |= RPIN_LISTEN;	/* held from now: the probe corrects it */
	if (listen || unlisten)
		sh->probe_due = true;
	return true;
}

/* May a notification go to the client right now (Postgres: the backend is idle)? */
static bool
listen_idle(const struct route *r)
{
	return !r->busy && r->tx == 'I' && !r->ext_open && r->x.copy == NULL &&
	       !route_client_relay_busy(r) && r->notes.head == NULL;
}

static bool
listen_send(struct route *r, uint32_t pid, const char *channel, const char *payload)
{
	struct pktbuf pb;

	pktbuf_init(&pb, strlen(channel) + strlen(payload) + 16);
	pktbuf_write_notification(&pb, pid, channel, payload);
	return route_send(r, &pb);
}

static bool
listen_hold(struct route *r, uint32_t pid, const char *channel, const char *payload)
{
	size_t cl = strlen(channel) + 1, pl = strlen(payload) + 1;
	struct rnote *n = malloc(sizeof(*n) + cl + pl);

	if (n == NULL)
		return false;
	memcpy(n->data, channel, cl);
	memcpy(n->data + cl, payload, pl);
	n->next = NULL;
	n->pid = pid;
	n->channel = n->data;
	n->payload = n->data + cl;
	n->size = sizeof(*n) + cl + pl;
	if (r->notes.head == NULL)
		r->notes.tail = &r->notes.head;
	*r->notes.tail = n;
	r->notes.tail = &n->next;
	r->notes.bytes += n->size;
	return true;
}

/* route_listen_notify: see route_int.h. */
bool
route_listen_notify(struct route *r, struct rshard *sh, struct link *l,
		    const struct sbuf_pkt *pkt)
{
	const char *channel, *payload;
	struct nk_error err;
	uint32_t pid;
	bool idle = listen_idle(r);

	if (pkt->avail < pkt->len) {
		if (sbuf_hold(link_sbuf(l), pkt->len))
			return true;
		route_client_fatal(r, "server sent too big packet");
		return false;
	}
	if (!idle && r->notes.bytes >= ROUTE_NOTES_MAX && !sh->target) {
		r->notes.paused = true;	/* route_listen_flush() reads on */
		return false;
	}
	if (!proto_parse_notification(pkt->data + 5, pkt->len - 5, &pid, &channel, &payload,
				      &err)) {
		log_warn("S: shard %s: bad NotificationResponse: %s", sh->uid, err.message);
	} else {
		if (pid == link_backend_pid(l))
			pid = r->c.key_pid;	/* the session's own NOTIFY */
		if (idle ? !listen_send(r, pid, channel, payload) :
			   !listen_hold(r, pid, channel, payload)) {
			if (!route_client_closed(r))
				route_client_fatal(r, "out of memory");
			return false;
		}
	}
	sbuf_skip(link_sbuf(l), pkt->len);
	return true;
}

/* route_listen_flush: see route_int.h. */
bool
route_listen_flush(struct route *r)
{
	struct pktbuf pb;
	bool any = r->notes.head != NULL;

	if (r->tx != 'I')
		return true;	/* held until the transaction ends, as Postgres */
	pktbuf_init(&pb, any ? r->notes.bytes : 0);
	while (r->notes.head != NULL) {
		struct rnote *n = r->notes.head;

		r->notes.head = n->next;
		pktbuf_write_notification(&pb, n->pid, n->channel, n->payload);
		free(n);
	}
	r->notes.bytes = 0;
	r->notes.paused = false;
	for (uint32_t i = 0; i < r->nsh; i++)	/* (a paused listening link reads again) */
		if (r->sh[i].link != NULL && (r->sh[i].pin & RPIN_LISTEN))
			sbuf_continue(link_sbuf(r->sh[i].link));
	if (!any) {
		pktbuf_cleanup(&pb);
		return true;
	}
	return route_send(r, &pb);
}

/* route_listen_usage_notice: see route_int.h. */
bool
route_listen_usage_notice(struct route *r)
{
	struct nk_error e;
	struct pktbuf pb;

	nk_error_set(&e, ERRCODE_SUCCESSFUL_COMPLETION,
		     "pg_notification_queue_usage() reports the fullest queue "
		     "across this database's notify shard group");
	nk_error_hint(&e, "For the per-shard breakdown, query __neki.notification_queue_usage().");
	e.severity = NK_SEV_NOTICE;
	pktbuf_init(&pb, 256);
	pktbuf_write_notice(&pb, &e);
	return route_send(r, &pb);
}

/* route_listen_free: see route_int.h. */
void
route_listen_free(struct route *r)
{
	while (r->notes.head != NULL) {
		struct rnote *n = r->notes.head;

		r->notes.head = n->next;
		free(n);
	}
	r->notes.bytes = 0;
}
