/*
 * route_exec.c - a routed session's shard links: per-shard pools (one struct cfg_database
 * per shard built from its [shards] connection string), acquiring links for an exec,
 * replaying the session's SETs and the lazy BEGIN on them, sending the statement, and
 * reading the answers in plan order (see route_int.h). Entry points: route_shard(),
 * route_exec_start(); giving the links back is route_release.c's.
 */
#include "neki/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "neki/log.h"
#include "neki/pktbuf.h"
#include "neki/proto.h"
#include "route_int.h"
#include "route_2pc.h"
#include "route_client.h"
#include "route_copy.h"
#include "route_deadlock.h"
#include "route_exec.h"
#include "route_gsi.h"
#include "route_insel.h"
#include "route_listen.h"
#include "route_loop.h"
#include "route_merge.h"
#include "route_oids.h"
#include "route_pin.h"
#include "route_portal.h"
#include "route_pull.h"
#include "route_seq.h"
#include "route_sets.h"
#include "route_sqltext.h"
#include "route_subq.h"
#include "route_svp.h"
#include "route_target.h"

/* ---- per-shard pools ---- */

/* A [databases]-like entry for one shard, kept for the worker's life (pools borrow it). */
struct rshard_db {
	struct rshard_db *next;
	const struct cfg *cfg;		/* counted reference */
	char *uid, *client_db;
	size_t server;			/* index in cfg_shard.servers */
	char name[192];
	struct cfg_database d;
};

static struct rshard_db *shard_dbs;

/* The entry of server <k> of shard <shd> (k > 0: a standby, "<db>@<uid>/<k>"). */
static const struct cfg_database *
route_shard_db(const struct exec_client *s, const struct cfg_shard *shd, size_t k)
{
	struct rshard_db *e;

	for (e = shard_dbs; e != NULL; e = e->next)
		if (e->cfg == s->cfg && route_streq(e->uid, shd->uid) &&
		    route_streq(e->client_db, s->dbname) && e->server == k)
			return &e->d;
	e = calloc(1, sizeof(*e));
	if (e == NULL || (e->uid = strdup(shd->uid)) == NULL ||
	    (e->client_db = strdup(s->dbname)) == NULL) {
		if (e != NULL)
			free(e->uid);
		free(e);
		return NULL;
	}
	e->cfg = s->cfg;
	cfg_ref((struct cfg *)s->cfg);
	e->server = k;
	e->d = *s->db;			/* pool settings of the logical database */
	if (k == 0)
		snprintf(e->name, sizeof(e->name), "%s@%s", s->dbname, shd->uid);
	else
		snprintf(e->name, sizeof(e->name), "%s@%s/%zu", s->dbname, shd->uid, k);
	e->d.name = e->name;
	e->d.dbname = shd->dbname != NULL ? shd->dbname : e->client_db;
	e->d.host = k == 0 ? shd->host : shd->servers[k].host;
	e->d.port = k == 0 ? (shd->port > 0 ? shd->port : 5432) : shd->servers[k].port;
	e->d.user = shd->user;
	e->d.password = shd->password;
	e->d.connect_query = NULL;
	e->d.topology = false;
	e->next = shard_dbs;
	shard_dbs = e;
	return &e->d;
}

static bool route_link_cb(struct link *l, enum link_event ev, const struct sbuf_pkt *pkt,
			  const struct nk_error *err, void *ctx);
static void route_pool_ready(struct pool_waiter *w, struct link *l, const struct nk_error *err);

/* route_server_pool: see route_int.h. */
struct spool *
route_server_pool(const struct route *r, const struct cfg_shard *shd, size_t k,
		  struct nk_error *err)
{
	const struct exec_client *s = &r->c;
	const struct cfg_database *d = route_shard_db(s, shd, k);
	const char *user, *password;
	struct spool *sp;

	if (d == NULL) {
		nk_error_oom(err);
		return NULL;
	}
	user = shd->user != NULL ? shd->user :
	       (s->db->user != NULL && s->db->user[0] != '\0' ? s->db->user : s->user);
	password = shd->password != NULL ? shd->password :
		   (s->db->password != NULL ? s->db->password : s->secret);
	sp = spool_get_or_create(s->cfg, d, d->name, user, password, err);
	if (sp != NULL)
		pool_set_fail_fast(spool_pool(sp), true);	/* a dead shard fails the statement */
	return sp;
}

struct rshard *
route_shard(struct route *r, const char *uid, struct nk_error *err)
{
	const struct exec_client *s = &r->c;
	const struct cfg_shard *shd;
	struct rshard *sh;

	for (uint32_t i = 0; i < r->nsh; i++)
		if (route_streq(r->sh[i].uid, uid))
			return &r->sh[i];
	if (r->nsh == ROUTE_SHARDS_MAX || strlen(uid) >= PLAN_SHARD_MAX) {
		nk_error_set(err, ERRCODE_PROGRAM_LIMIT_EXCEEDED, "too many shards in one session");
		return NULL;
	}
	shd = cfg_shard_find(s->cfg, uid);
	if (shd == NULL) {
		nk_error_set(err, ERRCODE_CONNECTION_EXCEPTION,
			     "shard \"%s\" is not declared in [shards]", uid);
		return NULL;
	}
	sh = &r->sh[r->nsh];
	memset(sh, 0, sizeof(*sh));
	sh->sp = route_server_pool(r, shd, 0, err);
	if (sh->sp == NULL)
		return NULL;
	spool_ref(sh->sp);		/* until route_session_free() */
	sh->r = r;
	strcpy(sh->uid, uid);
	pool_waiter_init(&sh->waiter, route_pool_ready, route_link_cb, sh);
	r->nsh++;
	return sh;
}

/* ---- sending ---- */

bool
route_link_query(struct link *l, const char *sql)
{
	uint8_t mem[512];		/* (most statements: no allocation) */
	size_t n = strlen(sql);
	struct pktbuf pb;
	bool ok;

	if (n + 6 <= sizeof(mem))
		pktbuf_init_fixed(&pb, mem, sizeof(mem));
	else
		pktbuf_init(&pb, n + 8);
	pktbuf_write_query(&pb, sql);
	ok = !pktbuf_failed(&pb) && link_send(l, pb.buf, pb.len);
	pktbuf_cleanup(&pb);
	return ok;
}

/* A link that just came from the pool: the session's parameters and SETs first. */
static bool
route_attach(struct rshard *sh, struct link *l)
{
	sh->link = l;
	sh->in_tx = sh->tx_data = sh->tx_write = sh->dirty = false;
	sh->swallow = 0;
	return route_sets_replay(sh, l, true);
}

/* Does the statement to <sh> need the lazy BEGIN first? */
static bool
route_begins(const struct route *r, const struct rshard *sh)
{
	return r->tx != 'I' && !sh->in_tx && r->begin_sql != NULL && r->x.after == RX_AFTER_STMT;
}

/* Inside a transaction: the lazy BEGIN, then the transaction's settings so far (so that its
 * ROLLBACK undoes them on this link too); outside one, those of an extended-protocol batch. */
static bool
route_send_tx(struct route *r, struct rshard *sh)
{
	if (!route_2pc_wait_send(r, sh))
		return false;
	if (route_begins(r, sh)) {
		if (!route_link_query(sh->link, r->begin_sql))
			return false;
		sh->swallow++;
		sh->in_tx = true;
		sh->tx_data = sh->tx_write = false;
		if (!route_svp_join(r, sh))	/* the savepoints it needs */
			return false;
	}
	if (sh->in_tx && r->x.after == RX_AFTER_STMT && !r->settings_exec) {
		sh->tx_data = true;
		sh->tx_write |= !r->exec_reads;
	}
	if (sh->pend_applied < r->gucs.npend && (sh->in_tx || r->tx == 'I'))
		return route_sets_replay_pending(sh);
	return true;
}

/*
 * r->x.ext_msg binds a named statement the links keep (r->x.ext_pst): a link lacking it gets the
 * Parse first (and the Closes of the least recently used beyond max_prepared_statements),
 * in the same send; its ParseComplete / CloseComplete are dropped (route_on_answer).
 */
static bool
route_send_named(struct route *r, struct rshard *sh)
{
	struct pktbuf pb;
	bool parsed, ok;

	pktbuf_init(&pb, 0);
	if (!prep_link_prepare(sh->link, r->x.ext_pst,
			       (size_t)r->c.cfg->pool.max_prepared_statements, &pb, &parsed)) {
		pktbuf_cleanup(&pb);
		return false;
	}
	sh->prep_used = true;
	r->c.stats->total_bind_count++;	/* (SHOW STATS, as pgbouncer counts them) */
	if (!parsed)
		return route_oids_send(r, sh, r->x.ext_msg, r->x.ext_len);
	r->c.stats->total_server_parse_count++;
	pktbuf_put_bytes(&pb, r->x.ext_msg, r->x.ext_len);
	ok = !pktbuf_failed(&pb) && route_oids_send(r, sh, pb.buf, pb.len);
	pktbuf_cleanup(&pb);
	if (!ok) {
		prep_link_forget(sh->link, r->x.ext_pst);
		return false;
	}
	if (sh->prep_wait != NULL)
		prep_stmt_unref(sh->prep_wait);
	sh->prep_wait = prep_stmt_addref(r->x.ext_pst);
	return true;
}

/* Send the statement of the current exec to <sh> (lazy BEGIN first inside a transaction). */
static bool
route_send_msgs(struct route *r, struct rshard *sh)
{
	const char *sql = sh->sql != NULL ? sh->sql : r->x.stmt_sql;
	char *with_prepare = NULL;	/* (decided before the BEGIN makes <sh> a participant) */
	bool ok;

	if (route_gsi_last_step(r) && !r->x.ext_exec && sh->ext_msg == NULL)
		with_prepare = route_2pc_with_prepare(r, sh, sql);
	if (!route_send_tx(r, sh)) {
		free(with_prepare);
		return false;
	}
	sh->sent = true;
	if (r->x.an.on && !r->x.merge_final)
		sh->a_sent_us = nk_now_us();
	if (sh->ext_msg != NULL && r->x.after == RX_AFTER_STMT)	/* its own messages */
		return route_oids_send(r, sh, sh->ext_msg, sh->ext_len) &&
		       route_pin_after_send(r, sh);
	if (r->x.ext_exec && r->x.after == RX_AFTER_STMT)
		return (r->x.ext_pst != NULL ? route_send_named(r, sh) :
			route_oids_send(r, sh, r->x.ext_msg, r->x.ext_len)) &&
		       route_pin_after_send(r, sh);
	ok = route_link_query(sh->link, with_prepare != NULL ? with_prepare : sql) &&
	     route_pin_after_send(r, sh);
	free(with_prepare);
	return ok;
}

/* route_send_msgs(), the link corked when the lazy BEGIN (and its savepoints) or pending
 * SETs go first: they leave with the statement in one write. */
static bool
route_send_one(struct route *r, struct rshard *sh)
{
	bool cork, ok;

	if (sh->link == NULL)
		return false;
	cork = route_begins(r, sh) || sh->pend_applied < r->gucs.npend;
	if (!cork)
		return route_send_msgs(r, sh);
	sbuf_set_cork(link_sbuf(sh->link), SBUF_CORK_ON);
	ok = route_send_msgs(r, sh);
	if (sh->link != NULL)
		sbuf_set_cork(link_sbuf(sh->link), SBUF_CORK_OFF);
	return ok;
}

static void
route_fail_send(struct route *r, struct rshard *sh)
{
	struct nk_error e;

	nk_error_set(&e, ERRCODE_CONNECTION_FAILURE,
		     "could not send the statement to shard \"%s\"", sh->uid);
	e.severity = NK_SEV_FATAL;
	route_client_close(r, e.message, &e);
}

/* A statement (not COMMIT / ROLLBACK) that a cancel stops before it is sent. */
static bool
route_cancel_stops(struct route *r)
{
	if (!r->cancel_pending || r->x.after != RX_AFTER_STMT)
		return false;
	if (!r->x.has_err) {
		nk_error_set(&r->x.err, ERRCODE_QUERY_CANCELED,
			     "canceling statement due to user request");
		r->x.has_err = true;
	}
	return true;
}

/* Every target has a link: send (all of them, or the first when sequential). */
static void
route_exec_go(struct route *r)
{
	route_exec_handlers(r);
	if (r->x.has_err || route_cancel_stops(r)) {	/* nothing was sent */
		event_active(r->ev, EV_TIMEOUT, 0);
		return;
	}
	for (uint32_t i = 0; i < r->x.ntg; i++) {
		struct rshard *sh = &r->sh[r->x.tg[i]];

		if (!route_send_one(r, sh)) {
			route_fail_send(r, sh);
			return;
		}
		if (r->x.sequential)
			break;
	}
	for (uint32_t i = 0; i < (r->x.copy != NULL || r->x.merge_streams ? r->x.ntg : 1); i++)
		sbuf_continue(link_sbuf(r->sh[r->x.tg[i]].link));	/* COPY FROM, a merge: all */
	/* the shards' answers stream to the client as they come (with what the router queued
	 * before them), up to the exec's end */
	sbuf_set_cork(r->c.sb, SBUF_CORK_FWD);
}

/*
 * Connecting to target <sh> failed (the pool's <err>: refused, timed out, a login error, or
 * the last attempt failed less than server_login_retry ago): the exec fails with an error
 * naming the shard, as a lost link does; nothing is sent to any target (the exec sends once
 * every target has a link), and the session stays.
 */
static void
route_unreachable(struct route *r, struct rshard *sh, const struct nk_error *err)
{
	uint32_t idx = (uint32_t)(sh - r->sh);

	/* (DEBUG: the pool logs the failure, once per server_login_retry) */
	log_debug("S: shard %s: could not connect: %s", sh->uid, err->message);
	sh->failed = sh->done = true;
	if (r->x.has_err)
		return;
	nk_error_set(&r->x.err, ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
		     "could not connect to shard \"%s\": %s", sh->uid,
		     err->message);
	r->x.has_err = true;
	for (uint32_t i = 0; i < r->x.ntg; i++)
		if (r->x.tg[i] == idx)
			route_detail_shards(r, &r->x.err, "Raised", i, i + 1);
}

/* Does the session hold shard links before this exec takes any (its transaction's, pins)? */
static bool
route_holds_links(const struct route *r)
{
	for (uint32_t i = 0; i < r->nsh; i++)
		if (r->sh[i].link != NULL)
			return true;
	return false;
}

/* The next target to ask its pool for a link: the one with the lowest shard uid. */
static struct rshard *
route_next_to_acquire(struct route *r)
{
	struct rshard *next = NULL;

	for (uint32_t i = 0; i < r->x.ntg; i++) {
		struct rshard *sh = &r->sh[r->x.tg[i]];

		if (sh->link == NULL && !sh->waiting && !sh->failed &&
		    (next == NULL || strcmp(sh->uid, next->uid) < 0))
			next = sh;
	}
	return next;
}

/* A pool refused <sh> at once with <err>: false when no wait is left to end the exec. */
static bool
route_acquire_failed(struct route *r, struct rshard *sh, struct nk_error *err)
{
	if (sh->waiter.connect_failed) {	/* within server_login_retry */
		if (route_target_lost(r, sh))
			return true;	/* a failover: held (route_target.c) */
		route_unreachable(r, sh, err);
		*err = r->x.err;
	}
	if (r->x.nwait > 0) {	/* the queued ones end the exec */
		if (!r->x.has_err) {
			r->x.err = *err;
			r->x.has_err = true;
		}
		return true;
	}
	return false;
}

/*
 * Ask the pools for the targets' links. Sessions must never wait for each other's links
 * (with pool_size below the sessions, two of them could each hold what the other waits
 * for, for good): a session that held no link when the exec started takes its targets in
 * the order of their shard uids, one at a time (an idle link comes at once; a wait holds
 * back the next ones), so no cycle of waits can form: each waits for a shard above every
 * one it holds. Room in a pool is no promise (another session, in another worker too, may
 * take the slot first), so even cold pools are filled in turn. One that held links from
 * before (its transaction's) cannot give them back, so it waits for none
 * (pool_waiter.urgent: a link beyond pool_size when none is idle) and asks for all at once.
 * Returns false with <err> when a pool refused at once and nothing else ends the exec;
 * otherwise the exec goes on in route_exec_go() once every target has its link.
 */
static bool
route_exec_acquire(struct route *r, struct nk_error *err)
{
	bool at_once = r->x.acq_urgent;
	struct rshard *sh;
	struct link *l;

	while ((sh = route_next_to_acquire(r)) != NULL) {
		switch (route_target_bind(r, sh, err)) {	/* which server (route_target.c) */
		case RTARGET_OK:
			break;
		case RTARGET_HOLD:	/* no primary now: held, as if queued */
			sh->waiting = true;
			r->x.nwait++;
			if (!at_once)
				return true;
			continue;
		case RTARGET_FAIL:
			sh->waiter.connect_failed = false;
			return route_acquire_failed(r, sh, err);
		}
		sh->waiter.urgent = r->x.acq_urgent;
		switch (pool_acquire(spool_pool(sh->sp), &sh->waiter, &l, err)) {
		case POOL_GOT:
			if (!route_attach(sh, l))
				return nk_error_set(err, ERRCODE_CONNECTION_FAILURE,
						    "could not prepare a link of "
						    "shard \"%s\"", sh->uid);
			break;
		case POOL_QUEUED:
			sh->waiting = true;
			r->x.nwait++;
			if (!at_once)
				return true;	/* the next ones once this one came */
			break;
		case POOL_FAILED:
			return route_acquire_failed(r, sh, err);
		}
	}
	if (r->x.nwait == 0)
		route_exec_go(r);
	return true;
}

static void
route_pool_ready(struct pool_waiter *w, struct link *l, const struct nk_error *err)
{
	struct rshard *sh = w->ctx;
	struct route *r = sh->r;
	struct nk_error e;

	sh->waiting = false;
	r->x.nwait--;
	if (l == NULL && w->connect_failed) {
		if (route_target_lost(r, sh))
			return;		/* a failover: held (route_target.c) */
		route_unreachable(r, sh, err);
	} else if (l == NULL) {		/* query_wait_timeout, shutdown: as pgbouncer */
		e = *err;
		e.severity = NK_SEV_FATAL;
		route_client_close(r, e.message, &e);
		return;
	} else if (!route_attach(sh, l)) {
		route_fail_send(r, sh);
		return;
	}
	route_exec_continue(r);
}

/* route_exec_continue: see route_int.h. */
void
route_exec_continue(struct route *r)
{
	struct nk_error e;

	if (!r->x.has_err && route_next_to_acquire(r) != NULL) {	/* the next target's turn */
		if (!route_exec_acquire(r, &e)) {
			r->x.err = e;
			r->x.has_err = true;
			route_exec_go(r);
		}
		return;
	}
	if (r->x.nwait == 0)
		route_exec_go(r);
}

bool
route_exec_start(struct route *r, struct nk_error *err)
{
	r->x.pos = r->x.reading = r->x.ndone = 0;
	r->x.nwait = 0;
	r->x.rowdesc_sent = r->x.has_err = r->x.err_forwarded = false;
	r->suspended = false;
	r->last_tag[0] = '\0';
	r->x.acq_urgent = route_holds_links(r);
	r->x.shards_used = true;
	for (uint32_t i = 0; i < r->x.ntg; i++) {
		struct rshard *sh = &r->sh[r->x.tg[i]];

		sh->target = true;
		if (sh->link != NULL && !sh->in_tx && sh->sets_version != r->sets_version &&
		    !route_sets_replay(sh, sh->link, false))	/* behind the session's SETs */
			return nk_error_set(err, ERRCODE_CONNECTION_FAILURE,
					    "could not prepare a link of shard "
					    "\"%s\"", sh->uid);
	}
	return route_exec_acquire(r, err);
}

/* route_prep_wait_clear: see route_exec.h. */
void
route_prep_wait_clear(struct rshard *sh)
{
	if (sh->prep_wait != NULL) {
		if (sh->link != NULL)
			prep_link_forget(sh->link, sh->prep_wait);
		prep_stmt_unref(sh->prep_wait);
		sh->prep_wait = NULL;
	}
}

/* ---- answers ---- */

/* Whole packet needed: hold it (a too big one ends the session). */
static bool
route_need_whole(struct route *r, struct link *l, const struct sbuf_pkt *pkt)
{
	if (sbuf_hold(link_sbuf(l), pkt->len))
		return true;
	route_client_fatal(r, "server sent too big packet");
	return false;
}

static bool
route_fwd(struct route *r, struct link *l, const struct sbuf_pkt *pkt)
{
	r->c.stats->total_sent += pkt->len;
	sbuf_forward(link_sbuf(l), r->c.sb, pkt->len);
	return true;
}

static bool
route_skip(struct link *l, const struct sbuf_pkt *pkt)
{
	sbuf_skip(link_sbuf(l), pkt->len);
	return true;
}

/* Answers to an injected Query (SET replay, BEGIN): dropped up to their ReadyForQuery. */
static bool
route_swallow(struct rshard *sh, struct link *l, const struct sbuf_pkt *pkt)
{
	if (pkt->type == 'E')
		log_warn("S: shard %s: an injected statement failed", sh->uid);
	if (pkt->type == 'Z')
		sh->swallow--;
	return route_skip(l, pkt);
}

/* CommandComplete of a target. */
static bool
route_on_complete(struct route *r, struct rshard *sh, struct link *l,
		  const struct sbuf_pkt *pkt)
{
	const char *tag;
	struct nk_error e;
	bool has_count;

	if (pkt->avail < pkt->len)
		return route_need_whole(r, l, pkt);
	if (proto_parse_command_complete(pkt->data + 5, pkt->len - 5, &tag, &e)) {
		route_tag_split(tag, sh->tag, sizeof(sh->tag), &sh->count, &has_count);
		sh->counted = has_count;
		route_strcpy(r->last_tag, sizeof(r->last_tag), sh->tag);	/* (a portal's) */
	}
	if (r->x.combine == RX_PASS)
		return route_fwd(r, l, pkt);
	return route_skip(l, pkt);
}

/*
 * An ErrorResponse of <sh> when it was to prepare or bind a statement its link keeps: a
 * refused Parse leaves nothing prepared; "cached plan must not change result type" (0A000,
 * DDL changed the columns) leaves a statement that would fail every time on that link: the
 * link is closed at its release (as a client's re-Parse never reaches the shard).
 */
static void
route_prep_error(struct rshard *sh, struct link *l, const struct sbuf_pkt *pkt)
{
	struct nk_error e;

	if (sh->prep_wait != NULL) {
		prep_link_forget(l, sh->prep_wait);
		prep_stmt_unref(sh->prep_wait);
		sh->prep_wait = NULL;
		return;
	}
	route_error_from_msg(pkt->data, pkt->avail, &e);
	if (route_streq(e.sqlstate, ERRCODE_FEATURE_NOT_SUPPORTED))
		link_set_close_needed(l);
}

/*
 * Does the whole ErrorResponse <pkt> end the shard's backend (FATAL or PANIC: shutdown,
 * terminate, crash)? It ends the link, not the client's session: it is answered as an ERROR
 * naming the shard, never forwarded as a FATAL the client would take for its own end.
 */
static bool
route_err_ends_backend(const struct sbuf_pkt *pkt)
{
	struct proto_server_error se;
	struct nk_error e;

	if (pkt->len < 5 || !proto_parse_server_error(pkt->data + 5, pkt->len - 5, &se, &e))
		return false;
	return se.severity_nl != NULL &&
	       (strcmp(se.severity_nl, "FATAL") == 0 || strcmp(se.severity_nl, "PANIC") == 0);
}

/* An ErrorResponse of a target. One coming before any BindComplete of an exec that owes the
 * client one answers the client's Bind: no BindComplete then (as Postgres). */
static bool
route_on_error(struct route *r, struct rshard *sh, struct link *l, const struct sbuf_pkt *pkt)
{
	bool at_bind = r->x.bind_owed;

	r->x.bind_owed = false;
	if (sh->prep_used)
		route_prep_error(sh, l, pkt);
	sh->failed = true;
	if ((sh->deadlock != NULL || r->x.combine == RX_PASS) && !r->x.has_err &&
	    pkt->avail < pkt->len)
		return route_need_whole(r, l, pkt);	/* its severity, its position may move */
	if (sh->deadlock != NULL && !r->x.has_err) {
		route_error_from_msg(pkt->data, pkt->len, &r->x.err);
		if (route_deadlock_error(sh, &r->x.err)) {
			r->x.has_err = true;
			if (r->x.combine == RX_PASS && !r->x.subq_capture) {
				r->x.err_forwarded = true;
				route_send_err(r, &r->x.err);
			}
			return route_skip(l, pkt);
		}
	}
	if (r->x.combine == RX_PASS && !r->x.has_err && !r->x.subq_capture &&
	    !route_err_ends_backend(pkt)) {
		struct pktbuf pb;
		bool later_stmt = !r->x.ext_exec && r->spans != NULL && r->cur < r->nspans &&
				  r->spans[r->cur].start > 0;

		r->x.has_err = r->x.err_forwarded = true;
		route_error_from_msg(pkt->data, pkt->avail, &r->x.err);
		if (later_stmt) {
			pktbuf_init(&pb, pkt->len + 16);
			if (route_shard_err_in_query(r, pkt->data, pkt->len, &pb))
				return route_send(r, &pb) && route_skip(l, pkt);
			pktbuf_cleanup(&pb);
		}
		return route_fwd(r, l, pkt);
	}
	if (pkt->avail < pkt->len)
		return route_need_whole(r, l, pkt);
	if (!r->x.has_err) {
		route_error_from_msg(pkt->data, pkt->len, &r->x.err);
		route_error_keep_position(r, pkt->data, pkt->len, &r->x.err);
		r->x.has_err = true;
		if (!at_bind && (r->x.combine == RX_MERGE || r->x.combine == RX_PULL ||
				 r->x.combine == RX_INSEL))
			route_detail_shards(r, &r->x.err, "Raised", r->x.reading, r->x.reading + 1);
		else if (r->x.combine == RX_PASS)	/* (its backend's end) */
			for (uint32_t i = 0; i < r->x.ntg; i++)
				if (&r->sh[r->x.tg[i]] == sh)
					route_detail_shards(r, &r->x.err, "Raised", i, i + 1);
	}
	return route_skip(l, pkt);
}

/* RX_SPLIT: keep the DataRow to put it back in input order at the end. */
static bool
route_keep_row(struct route *r, struct rshard *sh, struct link *l, const struct sbuf_pkt *pkt)
{
	struct rrow *nr;

	if (pkt->avail < pkt->len)
		return route_need_whole(r, l, pkt);
	if (sh->nrows == sh->caprows) {
		uint32_t ncap = sh->caprows ? sh->caprows * 2 : 16;

		nr = realloc(sh->rows, ncap * sizeof(*nr));
		if (nr == NULL) {
			route_client_fatal(r, "out of memory");
			return false;
		}
		sh->rows = nr;
		sh->caprows = ncap;
	}
	nr = &sh->rows[sh->nrows];
	if ((nr->msg = malloc(pkt->len)) == NULL) {
		route_client_fatal(r, "out of memory");
		return false;
	}
	memcpy(nr->msg, pkt->data, pkt->len);
	nr->len = pkt->len;
	sh->nrows++;
	return route_skip(l, pkt);
}

/* ParameterStatus: the client wants that value from now on (forwarded once). */
static bool
route_on_param(struct route *r, struct link *l, const struct sbuf_pkt *pkt, bool first)
{
	struct proto_param p;
	struct nk_error e;

	if (pkt->avail < pkt->len)
		return route_need_whole(r, l, pkt);
	if (proto_parse_parameter_status(pkt->data + 5, pkt->len - 5, &p, &e) &&
	    varcache_index(p.name) >= 0)
		(void)varcache_set(r->c.vars, p.name, p.value);
	/* (a ROLLBACK's own too: what it undid, as Postgres reports it) */
	return first && (r->x.combine != RX_QUIET || r->x.after != RX_AFTER_STMT) ?
	       route_fwd(r, l, pkt) : route_skip(l, pkt);
}

/* The target being read (r->x.tg[r->x.pos]) ended: read (or send to, when sequential) the next
 * one; targets whose link was lost are passed over; the exec ends after the last. */
static bool
route_target_next(struct route *r, struct rshard *sh)
{
	sh->done = true;
	if (r->x.an.on && !r->x.merge_final)
		sh->a_done_us = nk_now_us();
	if (r->x.merge_streams) {
		if (++r->x.ndone < r->x.ntg)
			return true;	/* the others are read as they come */
		r->x.pos = r->x.ntg;
	} else {
		r->x.pos++;
	}
	while (r->x.pos < r->x.ntg && !(r->x.sequential && sh->failed)) {
		struct rshard *next = &r->sh[r->x.tg[r->x.pos]];

		if (next->done) {	/* lost while waiting for its turn */
			sh = next;
			r->x.pos++;
			continue;
		}
		if (r->x.sequential && route_cancel_stops(r))
			break;
		if (r->x.sequential && !route_send_one(r, next)) {
			route_fail_send(r, next);
			return false;
		}
		sbuf_continue(link_sbuf(next->link));
		return true;
	}
	r->x.pos = r->x.ntg;
	/* the exec ends: the rest of its answer waits for what the router sends next (its
	 * ReadyForQuery), to leave in one send */
	sbuf_set_cork(r->c.sb, SBUF_CORK_ON);
	event_active(r->ev, EV_TIMEOUT, 0);
	return true;
}

/* ANALYZE: the result of the explained statement is counted, not forwarded. */
static bool
route_analyze_answer(struct route *r, struct rshard *sh, struct link *l,
		     const struct sbuf_pkt *pkt)
{
	if (pkt->type == 'D')
		sh->a_rows++;
	if (pkt->type == 'C' && r->x.combine != RX_MERGE) {
		enum rx_combine c = r->x.combine;
		bool ok;

		r->x.combine = RX_SUM;	/* (RX_PASS would forward the tag) */
		ok = route_on_complete(r, sh, l, pkt);
		r->x.combine = c;
		return ok;
	}
	return route_skip(l, pkt);
}

/* The target being read reached its ReadyForQuery. */
static bool
route_target_done(struct route *r, struct rshard *sh, struct link *l,
		  const struct sbuf_pkt *pkt)
{
	route_skip(l, pkt);
	if (sh->probing) {		/* the held-link probe's answer follows */
		sh->probing = false;
		sh->probe_reading = true;
		return true;
	}
	return route_target_next(r, sh);
}

/*
 * The link of <sh> broke (the shard went away, KILL): its transaction is gone (the session's
 * becomes aborted), and a target of the running exec fails with an error naming the shard;
 * the exec goes on with the other targets and the session stays.
 */
static void
route_link_lost(struct route *r, struct rshard *sh, const struct nk_error *err)
{
	uint32_t idx = (uint32_t)(sh - r->sh);

	log_warn("S: shard %s: link lost: %s", sh->uid, err != NULL ? err->message : "?");
	sh->link = NULL;
	route_prep_wait_clear(sh);
	if (route_pin_lost(r, sh, err))
		return;		/* its LISTEN and locks are gone: so is the session */
	sh->swallow = 0;
	route_portals_link_lost(r, idx);
	if (sh->in_tx && r->tx == 'T')
		r->tx = 'E';
	if (sh->in_tx)
		route_svp_lost(r, sh);
	sh->in_tx = false;
	if (!sh->target || sh->done || route_client_closed(r))
		return;
	sh->failed = true;
	if (!r->x.has_err) {
		nk_error_set(&r->x.err, ERRCODE_CONNECTION_FAILURE,
			     "the connection to shard \"%s\" was lost: %s",
			     sh->uid, err != NULL ? err->message : "server conn crashed?");
		r->x.has_err = true;
		for (uint32_t i = 0; i < r->x.ntg; i++)
			if (r->x.tg[i] == idx)
				route_detail_shards(r, &r->x.err, "Raised", i, i + 1);
	}
	if (r->x.copy != NULL) {
		route_copy_link_lost(r, sh);
		return;
	}
	if (r->x.merge_streams && r->x.nwait == 0 && sh->sent)
		(void)route_target_next(r, sh);	/* every target is being read */
	else if (r->x.nwait > 0 || !sh->sent || r->x.pos >= r->x.ntg || r->x.tg[r->x.pos] != idx)
		sh->done = true;	/* passed over when its turn comes */
	else
		(void)route_target_next(r, sh);
}

/* RX_MERGE: descriptions, rows and tags go to the merge step whole. */
static bool
route_merge_answer(struct route *r, struct rshard *sh, struct link *l, const struct sbuf_pkt *pkt)
{
	if (pkt->avail < pkt->len)
		return route_need_whole(r, l, pkt);
	if (r->x.an.on && !r->x.merge_final && pkt->type == 'D')
		sh->a_rows++;
	return route_merge_feed(r, pkt) && route_skip(l, pkt);
}

static bool
rxh_seq_on(const struct route *r)
{
	return r->x.combine == RX_SEQ;
}

static bool
rxh_capture_on(const struct route *r)
{
	return r->x.subq_capture && r->x.combine != RX_MERGE && r->x.combine != RX_INSEL;
}	/* (a merge, INSERT ... SELECT: their own handlers keep what they read) */

static bool
rxh_pull_on(const struct route *r)
{
	return r->x.combine == RX_PULL;
}

static bool
rxh_insel_on(const struct route *r)
{
	return r->x.combine == RX_INSEL;
}

static bool
rxh_analyze_on(const struct route *r)
{
	return r->x.an.on && !r->x.merge_final && r->x.combine != RX_MERGE;
}

static bool
rxh_merge_on(const struct route *r)
{
	return r->x.combine == RX_MERGE;
}

static bool
rxh_copy_out_on(const struct route *r)
{
	return r->x.cout.on;
}

/* One way of handling answers (enum rx_handler): when an exec uses it, and what it claims. */
struct rx_handler_ops {
	bool (*on)(const struct route *r);
	const char *types;	/* the packet types it claims ... */
	bool all_but;		/* ... or every type but those */
	bool (*answer)(struct route *r, struct rshard *sh, struct link *l,
		       const struct sbuf_pkt *pkt);
};

static const struct rx_handler_ops rx_handlers[RXH_COUNT] = {
	[RXH_SEQ] = { rxh_seq_on, "ZE", true, route_seq_msg },
	[RXH_CAPTURE] = { rxh_capture_on, "TDC", false, route_subq_answer },
	[RXH_PULL] = { rxh_pull_on, "TDCs", false, route_pull_answer },
	[RXH_INSEL] = { rxh_insel_on, "123tnTDCs", false, route_insel_msg },
	[RXH_ANALYZE] = { rxh_analyze_on, "TDCnt", false, route_analyze_answer },
	[RXH_MERGE] = { rxh_merge_on, "TDC", false, route_merge_answer },
	[RXH_COPY_OUT] = { rxh_copy_out_on, "Hdc", false, route_copy_out_pkt },
};

/* route_exec_handlers: see route_exec.h. */
void
route_exec_handlers(struct route *r)
{
	r->x.nhandlers = 0;
	for (uint8_t h = 0; h < RXH_COUNT; h++)
		if (rx_handlers[h].on(r))
			r->x.handler[r->x.nhandlers++] = h;
}

/* A packet of the target being read that no handler claimed: forwarded or dropped as the
 * combine says, its tag counted, its error kept. */
static bool
route_answer(struct route *r, struct rshard *sh, struct link *l, const struct sbuf_pkt *pkt)
{
	bool first = r->x.tg[0] == (uint32_t)(sh - r->sh);

	switch (pkt->type) {
	case 'Z':
		return route_target_done(r, sh, l, pkt);
	case 'C':
		return route_on_complete(r, sh, l, pkt);
	case 'E':
		return route_on_error(r, sh, l, pkt);
	case 'S':
		return route_on_param(r, l, pkt, first);
	case '1':
		if (sh->prep_wait != NULL) {	/* the link has the statement now */
			prep_stmt_unref(sh->prep_wait);
			sh->prep_wait = NULL;
		}
		return route_skip(l, pkt);
	case '2':
	case '3':			/* (Close of a statement the link gave up) */
		return route_skip(l, pkt);
	case 's':		/* PortalSuspended: the portal stays open on the shard */
		r->suspended = true;
		return r->x.combine == RX_PASS ? route_fwd(r, l, pkt) : route_skip(l, pkt);
	case 't':
		if (r->x.combine == RX_QUIET || r->x.ext_portal_describe || !first)
			return route_skip(l, pkt);
		return route_fwd(r, l, pkt);
	case 'T':
	case 'n':
		if (r->x.combine == RX_QUIET || r->x.rowdesc_sent ||
		    (r->x.combine == RX_FIRST && !first))
			return route_skip(l, pkt);
		r->x.rowdesc_sent = true;
		return route_fwd(r, l, pkt);
	case 'D':
		if (r->x.combine == RX_SPLIT)
			return route_keep_row(r, sh, l, pkt);
		if (r->x.combine == RX_QUIET || (r->x.combine == RX_FIRST && !first))
			return route_skip(l, pkt);
		return route_fwd(r, l, pkt);
	case 'I':
		return r->x.combine == RX_PASS ? route_fwd(r, l, pkt) : route_skip(l, pkt);
	case 'N':	/* DDL, every copy: the first target's notices (each copy raises them) */
		if (r->x.combine == RX_FIRST && !first)
			return route_skip(l, pkt);
		return r->x.combine == RX_QUIET ? route_skip(l, pkt) : route_fwd(r, l, pkt);
	default:	/* notifications, COPY out */
		return r->x.combine == RX_QUIET ? route_skip(l, pkt) : route_fwd(r, l, pkt);
	}
}

/* A packet of the target being read: to the first of the exec's handlers that claims its
 * type, else route_answer(). */
static bool
route_on_answer(struct route *r, struct rshard *sh, struct link *l, const struct sbuf_pkt *pkt)
{
	if (pkt->type == '2' && r->x.bind_owed && !route_bind_complete(r))
		return false;	/* (the client is gone) */
	for (uint8_t k = 0; k < r->x.nhandlers; k++) {
		const struct rx_handler_ops *h = &rx_handlers[r->x.handler[k]];

		if ((strchr(h->types, pkt->type) != NULL) != h->all_but)
			return h->answer(r, sh, l, pkt);
	}
	return route_answer(r, sh, l, pkt);
}

/* May <sh>'s answer be handled now? Sets r->x.reading to its target number. Targets are read
 * in plan order, or all at once for a streaming merge (minus those it holds enough rows of). */
static bool
route_turn(struct route *r, struct rshard *sh)
{
	uint32_t i = (uint32_t)(sh - r->sh);

	if (!sh->target || sh->done || r->x.pos >= r->x.ntg)
		return false;
	if (!r->x.merge_streams) {
		r->x.reading = r->x.pos;
		return r->x.tg[r->x.pos] == i;
	}
	for (uint32_t k = 0; k < r->x.ntg; k++) {
		if (r->x.tg[k] != i)
			continue;
		if (!route_merge_may_read(r, k)) {
			sh->held = true;
			return false;
		}
		r->x.reading = k;
		return true;
	}
	return false;
}

/*
 * An ErrorResponse on a held link that is not answering a statement (between statements of
 * a transaction): the server is ending the session (FATAL 57P01 at a shutdown, a timeout).
 * The link is dropped as a lost one, so the transaction becomes aborted now rather than
 * when its next statement or COMMIT reaches that shard.
 */
static bool
route_async_error(struct route *r, struct rshard *sh, struct link *l, const struct sbuf_pkt *pkt)
{
	struct nk_error e;

	if (pkt->avail < pkt->len)
		return route_need_whole(r, l, pkt);
	route_error_from_msg(pkt->data, pkt->len, &e);
	sbuf_skip(link_sbuf(l), pkt->len);
	route_link_lost(r, sh, &e);
	link_close(l, false, "server closed the connection");
	return false;
}

static bool
route_link_cb(struct link *l, enum link_event ev, const struct sbuf_pkt *pkt,
	      const struct nk_error *err, void *ctx)
{
	struct rshard *sh = ctx;
	struct route *r = sh->r;

	if (ev == LINK_EV_BROKEN) {
		if (sh->link == l)
			route_link_lost(r, sh, err);
		return false;
	}
	if (sh->link != l || route_client_closed(r))
		return route_skip(l, pkt);
	if (pkt->type == 'A')		/* (also before an injected Query's answer) */
		return route_listen_notify(r, sh, l, pkt);
	if (sh->swallow > 0)
		return route_swallow(sh, l, pkt);
	if (r->x.copy != NULL)
		return route_copy_on_link(r, sh, l, pkt);
	if ((!sh->target || sh->done) && pkt->type == 'E')
		return route_async_error(r, sh, l, pkt);
	if (!route_turn(r, sh))
		return false;	/* not its turn (or held by the merge): paused until it is */
	if (sh->probe_reading) {
		bool done;

		if (!route_pin_probe_msg(r, sh, l, pkt, &done))
			return false;
		return !done || route_target_next(r, sh);
	}
	switch (route_oids_answer(r, sh, l, pkt)) {
	case ROIDS_GO:
		break;
	case ROIDS_HELD:
		return true;
	case ROIDS_FAIL:
		return false;
	}
	if (!route_on_answer(r, sh, l, pkt))
		return false;
	if (r->x.merge_streams)
		route_merge_resume(r);
	return true;
}
