/*
 * session_fwd.c - a logged-in client's traffic in every pool mode (IDLE, WAIT, ACTIVE).
 *
 * Client -> server: each message needs a link (pool_acquire; the client pauses while it
 * waits). Query, Sync and the extended messages are forwarded zero-copy (sbuf_forward);
 * statement names are rewritten by prepared.c in transaction/statement mode; Query texts are
 * scanned for SET search_path / DISCARD ALL / DEALLOCATE ALL, and extended messages followed for
 * a SET in a Parse (session_sp.c: changes count at commit). FunctionCall is refused.
 * Server -> client: forwarded zero-copy, except the answers to what neki injected (the
 * varcache SET, injected Parse/Close), which are swallowed. ReadyForQuery decides the release:
 * transaction mode at 'I' with nothing outstanding, statement mode after every statement,
 * session mode at disconnect. With disable_pqexec a Query ends the session (pgbouncer's
 * "PQexec disallowed"). Entry points: sess_on_work_pkt(), sess_link_cb(),
 * sess_pool_ready(), sess_drop_link(), sess_release_cb().
 */
#include "neki/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "neki/log.h"
#include "neki/pktbuf.h"
#include "neki/proto.h"
#include "neki/proc.h"
#include "neki/exec.h"
#include "session_int.h"
#include "session_prep.h"

#define SESS_QUERY_SCAN_MAX 65536	/* Query texts up to this size are scanned whole */
#define SESS_SET_SQL_MAX 8192		/* room for the varcache SET statements */
#define SESS_PARSE_WAIT_US 200000	/* a link-less Parse batch waits this long for a link
					 * (plus up to a janitor period), then neki answers it */

/* ---- tracked requests ---- */

static bool
sess_req_push(struct session *s, enum req_kind kind, bool swallow, struct prep_stmt *st)
{
	struct req_queue *q = &s->sync.reqs;

	if (q->n == q->cap) {
		size_t ncap = q->cap ? q->cap * 2 : 16;
		struct req *nq = malloc(ncap * sizeof(*nq));

		if (nq == NULL)
			return false;
		for (size_t i = 0; i < q->n; i++)
			nq[i] = q->q[(q->head + i) % q->cap];
		free(q->q);
		q->q = nq;
		q->cap = ncap;
		q->head = 0;
	}
	q->q[(q->head + q->n) % q->cap] = (struct req){ (uint8_t)kind, swallow, s->sync.syncs_sent, st };
	q->n++;
	if (st != NULL)
		st->refs++;
	return true;
}

bool
sess_track_request(struct session *s, enum req_kind kind, bool swallow, struct prep_stmt *st)
{
	return sess_req_push(s, kind, swallow, st);
}

static void
sess_req_pop_head(struct session *s, struct req *out)
{
	struct req_queue *q = &s->sync.reqs;

	*out = q->q[q->head];
	q->head = (q->head + 1) % q->cap;
	q->n--;
}

/*
 * Drop requests of finished sync batches that never got their answer (an error earlier in
 * the batch made the server skip them): an injected Parse that was skipped is not on the link.
 */
static void
sess_reqs_gc(struct session *s)
{
	struct req r;

	while (s->sync.reqs.n > 0 && s->sync.reqs.q[s->sync.reqs.head].gen < s->sync.z_recv) {
		sess_req_pop_head(s, &r);
		if (r.st != NULL) {
			if (r.kind == REQ_PARSE && s->link != NULL)
				prep_link_forget(s->link, r.st);
			prep_stmt_unref(r.st);
		}
	}
}

/* The oldest pending request of <kind>; false when none (the answer is not ours). */
static bool
sess_req_take(struct session *s, enum req_kind kind, struct req *out)
{
	struct req_queue *q = &s->sync.reqs;

	for (size_t i = 0; i < q->n; i++) {
		size_t at = (q->head + i) % q->cap;

		if (q->q[at].kind != kind)
			continue;
		*out = q->q[at];
		/* close the gap: shift the earlier entries up by one */
		for (size_t j = i; j > 0; j--)
			q->q[(q->head + j) % q->cap] = q->q[(q->head + j - 1) % q->cap];
		q->head = (q->head + 1) % q->cap;
		q->n--;
		return true;
	}
	return false;
}

void
sess_reqs_cleanup(struct session *s)
{
	struct req r;

	while (s->sync.reqs.n > 0) {
		sess_req_pop_head(s, &r);
		if (r.st != NULL)
			prep_stmt_unref(r.st);
	}
	free(s->sync.reqs.q);
	s->sync.reqs.q = NULL;
	s->sync.reqs.cap = s->sync.reqs.head = 0;
}

/* ---- stats ---- */

static void
sess_stats_query_start(struct session *s)
{
	uint64_t now;

	if (s->tm.query_start_us != 0)
		return;
	now = sess_now_us();
	s->tm.query_start_us = now;
	if (s->tm.xact_start_us == 0)
		s->tm.xact_start_us = now;
}

/* A ReadyForQuery ends a query (and, at 'I', a transaction). */
static void
sess_stats_query_end(struct session *s, char status)
{
	struct shm_stats *st = sess_stats(s);
	uint64_t now;

	if (s->tm.query_start_us == 0)
		return;
	now = sess_now_us();
	st->total_query_count++;
	st->total_query_time += now - s->tm.query_start_us;
	s->tm.query_start_us = 0;
	s->tm.activity_us = now;	/* idle (in transaction) from the end of the query (pgbouncer #125) */
	s->tm.query_timed_out = false;
	if (status == 'I' && s->tm.xact_start_us != 0) {
		st->total_xact_count++;
		st->total_xact_time += now - s->tm.xact_start_us;
		s->tm.xact_start_us = 0;
	}
}

/* ---- link attach / release ---- */

/* Bring the link's session parameters to what the client expects (one SET batch). */
static bool
sess_apply_vars(struct session *s, struct link *l)
{
	struct link_ext *ext = spool_link_ext(l);
	char sql[SESS_SET_SQL_MAX];
	struct pktbuf pb;
	int n;
	bool ok;

	if (ext == NULL)
		return false;
	if (s->replication != PROTO_REPL_NONE)
		return true;	/* its link was opened with the client's own parameters */
	sql[0] = '\0';
	n = varcache_diff_sql(&s->vars, l, ext->search_path, sql, sizeof(sql));
	if (n <= 0)
		return n == 0;
	sess_log(s, LOG_LVL_DEBUG, "varcache_apply: %s", sql);
	free(ext->search_path);
	ext->search_path = s->vars.search_path ? strdup(s->vars.search_path) : NULL;
	pktbuf_init(&pb, strlen(sql) + 8);
	pktbuf_write_query(&pb, sql);
	ok = !pktbuf_failed(&pb) && link_send(l, pb.buf, pb.len);
	pktbuf_cleanup(&pb);
	if (ok) {
		s->sync.syncs_sent++;
		s->sync.swallow_until = s->sync.syncs_sent;
	}
	return ok;
}

/* <l> is ours now: reset the bookkeeping, apply the varcache, go ACTIVE. */
static bool
sess_attach(struct session *s, struct link *l)
{
	s->link = l;
	s->sync.syncs_sent = s->sync.z_recv = s->sync.swallow_until = 0;
	s->sync.unsynced = false;
	s->sync.in_copy_in = false;
	sp_reset(s);
	sess_set_state(s, SESS_ST_ACTIVE);
	sess_stats(s)->total_server_assignment_count++;
	if (s->tm.wait_start_us != 0) {
		sess_stats(s)->total_wait_time += sess_now_us() - s->tm.wait_start_us;
		s->tm.wait_start_us = 0;
	}
	if (!sess_apply_vars(s, l)) {
		sess_fatal(s, "could not send SET to the server");
		return false;
	}
	return true;
}

/*
 * The pool runs server_reset_query (DISCARD ALL) on this release: the server forgets its
 * prepared statements and search_path, so the link's session data must too.
 */
static void
sess_forget_link_state(struct session *s, struct link *l)
{
	struct link_ext *ext;

	if (s->cfg->srv.server_reset_query[0] == '\0' ||
	    (s->mode != CFG_POOL_SESSION && !s->cfg->srv.server_reset_query_always))
		return;
	ext = link_user_data(l);
	if (ext == NULL)
		return;
	prep_link_clear(&ext->prep);
	free(ext->search_path);
	ext->search_path = NULL;
}

/* Give the link back to its pool (clean at 'I'); the session goes IDLE. */
static void
sess_release_link(struct session *s)
{
	struct link *l = s->link;

	if (s->release_pending)
		event_del(s->ev_release);
	s->release_pending = false;
	sbuf_detach(&s->sb);
	s->link = NULL;
	sess_reqs_cleanup(s);
	sess_forget_link_state(s, l);
	pool_release(l, NULL);
	if (s->state == SESS_ST_ACTIVE)
		sess_set_state(s, SESS_ST_IDLE);
}

/* Release is allowed: pool mode, transaction state, nothing outstanding either way. */
static bool
sess_can_release(const struct session *s)
{
	if (s->link == NULL || s->mode == CFG_POOL_SESSION)
		return false;
	if (s->sync.syncs_sent != s->sync.z_recv || s->sync.unsynced || s->sync.in_copy_in)
		return false;
	if (!sbuf_is_empty(&s->sb))
		return false;	/* the client is sending more: keep the link */
	if (link_close_needed(s->link))
		return true;
	return s->sync.tx_status == 'I';
}

void
sess_release_cb(int fd, short what, void *arg)
{
	struct session *s = arg;

	s->release_pending = false;
	if (s->state == SESS_ST_AUTHQ) {
		sess_authq_finish(s);	/* the auth_query link is at rest only now */
		return;
	}
	if (s->state == SESS_ST_ACTIVE && sess_can_release(s))
		sess_release_link(s);
}

void
sess_drop_link(struct session *s, const char *reason)
{
	struct link *l = s->link;
	bool clean;

	if (l == NULL)
		return;
	clean = s->sync.syncs_sent == s->sync.z_recv && !s->sync.unsynced && !s->sync.in_copy_in &&
		link_tx_status(l) == 'I';
	s->link = NULL;
	if (!clean) {
		/* link_close, not pool_release: the link may be in the middle of a packet */
		link_close(l, true, "client disconnect while server was not ready");
		return;
	}
	if (sbuf_is_empty(&s->sb) && !sbuf_is_closed(&s->sb))
		sbuf_detach(&s->sb);
	sess_forget_link_state(s, l);
	pool_release(l, NULL);
	(void)reason;
}

/* ---- server -> client ---- */

/* The link broke under us. */
static void
sess_on_link_broken(struct session *s, const struct nk_error *err)
{
	bool busy = s->sync.syncs_sent != s->sync.z_recv || s->sync.unsynced || s->sync.tx_status != 'I';

	s->link = NULL;
	if (busy || s->mode == CFG_POOL_SESSION) {
		struct nk_error e;

		nk_error_set(&e, ERRCODE_PROTOCOL_VIOLATION,
			     "%s", err != NULL ? err->message : "server conn crashed?");
		e.severity = NK_SEV_FATAL;
		sess_close(s, e.message, &e);
		return;
	}
	sess_reqs_cleanup(s);
	sp_reset(s);
	if (s->state == SESS_ST_ACTIVE)
		sess_set_state(s, SESS_ST_IDLE);
}

/* Forward the current server packet to the client. */
static bool
sess_fwd_to_client(struct session *s, struct link *l, const struct sbuf_pkt *pkt)
{
	sess_stats(s)->total_sent += pkt->len;
	sbuf_forward(link_sbuf(l), &s->sb, pkt->len);
	return true;
}

/*
 * A SET batch on <l> completed: each value session <s> remembers that the server reports in
 * another form (it canonicalised it and, the value being the same, sent no
 * ParameterStatus) takes the server's form, so that it is not sent again (logged at DEBUG).
 */
static void
varcache_set_canonical(struct session *s, struct link *l)
{
	const char *const *have = link_tracked(l);

	for (size_t i = 0; i < varcache_count(); i++) {
		const char *want = s->vars.val[i];

		if (want == NULL || have[i] == NULL || have[i] == want)	/* both interned */
			continue;
		sess_log(s, LOG_LVL_DEBUG, "varcache_set_canonical: setting %s to its canonical "
			 "version %s -> %s", varcache_name(i), want, have[i]);
		(void)varcache_set(&s->vars, varcache_name(i), have[i]);
	}
}

/* While the varcache SET runs: swallow its whole answer. */
static bool
sess_swallow(struct session *s, struct link *l, const struct sbuf_pkt *pkt)
{
	sbuf_skip(link_sbuf(l), pkt->len);
	if (pkt->type == 'E')
		sess_log(s, LOG_LVL_WARNING, "varcache_apply failed on the server");
	if (pkt->type == 'Z') {
		s->sync.z_recv++;
		sess_reqs_gc(s);
		if (s->sync.z_recv == s->sync.swallow_until)	/* the SET batch is done */
			varcache_set_canonical(s, l);
	}
	return true;
}

/* ParameterStatus after a client's SET: the client wants that value from now on. */
static void
sess_track_param(struct session *s, const struct sbuf_pkt *pkt)
{
	struct proto_param p;
	struct nk_error err;

	if (pkt->avail < pkt->len)
		return;
	if (proto_parse_parameter_status(pkt->data + 5, pkt->len - 5, &p, &err) &&
	    varcache_index(p.name) >= 0)
		(void)varcache_set(&s->vars, p.name, p.value);
}

void
sess_release_soon(struct session *s)
{
	if (sess_can_release(s) && !s->release_pending) {
		s->release_pending = true;
		event_active(s->ev_release, EV_TIMEOUT, 0);
	}
}

/* ReadyForQuery: statistics, statement-mode check, release decision. */
static bool
sess_on_ready(struct session *s, struct link *l, const struct sbuf_pkt *pkt)
{
	char status = pkt->len >= 6 && pkt->avail >= 6 ? (char)pkt->data[5] : 'I';

	s->sync.z_recv++;
	if (s->sync.z_recv > s->sync.syncs_sent)	/* (an online restart's fence mistaken: see */
		s->sync.syncs_sent = s->sync.z_recv;	/* session_adopt.c) */
	s->sync.tx_status = status;
	s->sync.in_copy_in = false;
	sess_reqs_gc(s);
	sp_on_ready(s, l, status);
	if (s->sync.z_recv == s->sync.syncs_sent)
		sess_stats_query_end(s, status);
	if (s->mode == CFG_POOL_STATEMENT && status != 'I') {
		sbuf_skip(link_sbuf(l), pkt->len);
		sess_fatal(s, "transaction blocks not allowed in statement pooling mode");
		return false;
	}
	sess_fwd_to_client(s, l, pkt);
	sess_release_soon(s);
	return true;
}

/* A ParseComplete / CloseComplete: ours to swallow, or the client's. */
static bool
sess_on_complete(struct session *s, struct link *l, const struct sbuf_pkt *pkt,
		 enum req_kind kind)
{
	struct req r;

	if (!s->prep_on || !sess_req_take(s, kind, &r))
		return sess_fwd_to_client(s, l, pkt);
	if (r.st != NULL) {
		if (kind == REQ_PARSE)
			prep_link_confirm(l, r.st);
		prep_stmt_unref(r.st);
	}
	if (r.swallow) {
		sbuf_skip(link_sbuf(l), pkt->len);
		return true;
	}
	return sess_fwd_to_client(s, l, pkt);
}

/*
 * CommandComplete "DEALLOCATE ALL" or "DISCARD ALL" (simple or extended protocol, as psycopg
 * sends it after DDL): the server has dropped every statement of the link, and the client
 * loses its names, as pgbouncer 1.22+ does. Judged by the server's answer, so a statement that
 * failed changes nothing.
 */
static void
sess_on_command_complete(struct session *s, struct link *l, const struct sbuf_pkt *pkt)
{
	static const char *const tags[] = { "DEALLOCATE ALL", "DISCARD ALL" };
	const char *tag = (const char *)pkt->data + 5;
	struct link_ext *ext;

	if (pkt->avail < pkt->len || pkt->len < 5 + 11 || pkt->len > 5 + 15)
		return;
	for (size_t i = 0; i < NK_ARRAY_LEN(tags); i++) {
		if (pkt->len - 5 != strlen(tags[i]) + 1 || memcmp(tag, tags[i], pkt->len - 5) != 0)
			continue;
		prep_client_clear(&s->prep);
		if ((ext = spool_link_ext(l)) != NULL)
			prep_link_clear(&ext->prep);
		return;
	}
}

static bool
sess_on_server_pkt(struct session *s, struct link *l, const struct sbuf_pkt *pkt)
{
	log_noise("C-%p: server '%c' len %u (z %llu/%llu, swallow < %llu, reqs %zu)", (void *)s,
		  pkt->type, pkt->len, (unsigned long long)s->sync.z_recv,
		  (unsigned long long)s->sync.syncs_sent, (unsigned long long)s->sync.swallow_until,
		  s->sync.reqs.n);
	if (s->sync.z_recv < s->sync.swallow_until)
		return sess_swallow(s, l, pkt);
	if (s->adm.fence && (pkt->type == 'Z' || pkt->type == 'I'))
		return sess_fence_pkt(s, l, pkt);	/* session_adopt.c */
	switch (pkt->type) {
	case 'Z':
		return sess_on_ready(s, l, pkt);
	case '1':
		return sess_on_complete(s, l, pkt, REQ_PARSE);
	case '3':
		return sess_on_complete(s, l, pkt, REQ_CLOSE);
	case 'S':
		sess_track_param(s, pkt);
		break;
	case 'C':
		sess_on_command_complete(s, l, pkt);
		sp_on_server(s, pkt);
		break;
	case 'E':
		sp_on_server(s, pkt);
		break;
	case 'G':
		s->sync.in_copy_in = true;
		break;
	case 'c':
	case 'f':
		break;
	default:
		break;
	}
	return sess_fwd_to_client(s, l, pkt);
}

bool
sess_link_cb(struct link *l, enum link_event ev, const struct sbuf_pkt *pkt,
	     const struct nk_error *err, void *ctx)
{
	struct session *s = ctx;

	if (ev == LINK_EV_BROKEN) {
		if (s->link == l)
			sess_on_link_broken(s, err);
		return false;
	}
	if (s->link != l || s->state == SESS_ST_CLOSED) {
		sbuf_skip(link_sbuf(l), pkt->len);
		return true;
	}
	return sess_on_server_pkt(s, l, pkt);
}

/* ---- client -> server ---- */

void
sess_pool_ready(struct pool_waiter *w, struct link *l, const struct nk_error *err)
{
	struct session *s = w->ctx;
	struct nk_error e;

	if (l == NULL && w->gave_up && s->state == SESS_ST_WAIT) {
		s->prep_batch = SESS_PREP_BATCH_HERE;	/* a Parse batch: neki answers it */
		sess_stats(s)->total_wait_time += sess_now_us() - s->tm.wait_start_us;
		s->tm.wait_start_us = 0;
		sess_set_state(s, SESS_ST_IDLE);
		sbuf_continue(&s->sb);
		return;
	}
	if (l == NULL) {
		e = *err;
		e.severity = NK_SEV_FATAL;
		sess_close(s, e.message, &e);
		return;
	}
	if (s->state == SESS_ST_WELCOME) {
		pool_release_unused(l);
		sess_send_welcome(s);
		return;
	}
	if (s->state != SESS_ST_WAIT) {
		pool_release(l, NULL);
		return;
	}
	if (sess_attach(s, l))
		sbuf_continue(&s->sb);
}

/* Get a link for the next message: true when s->link is set, false when waiting / closed. */
static bool
sess_need_link(struct session *s)
{
	struct nk_error err;
	struct link *l;

	if (s->link != NULL)
		return true;
	s->tm.wait_start_us = sess_now_us();
	s->waiter.give_up_us = s->prep_batch == SESS_PREP_BATCH_WAITS ?
			       s->tm.wait_start_us + SESS_PARSE_WAIT_US : 0;
	s->prep_batch = SESS_PREP_BATCH_NONE;
	switch (pool_acquire(spool_pool(s->sp), &s->waiter, &l, &err)) {
	case POOL_GOT:
		return sess_attach(s, l);
	case POOL_QUEUED:
		if (sctl_shutting_down()) {	/* SHUTDOWN WAIT_FOR_SERVERS: nothing will come */
			pool_cancel_wait(&s->waiter);
			sess_fatal(s, "server shutting down");
			return false;
		}
		sess_wait_begin(s);
		sess_set_state(s, SESS_ST_WAIT);
		return false;
	case POOL_FAILED:
		err.severity = NK_SEV_FATAL;
		sess_close(s, err.message, &err);
		return false;
	}
	return false;
}

/* Forward the current client packet to the link. */
static bool
sess_fwd_to_link(struct session *s, const struct sbuf_pkt *pkt)
{
	sess_stats(s)->total_received += pkt->len;
	sbuf_forward(&s->sb, link_sbuf(s->link), pkt->len);
	return true;
}

/* Make sure the whole packet is buffered; false (client closed) when it is too big. */
static bool
sess_hold(struct session *s, const struct sbuf_pkt *pkt)
{
	if (sbuf_hold(&s->sb, pkt->len))
		return true;
	sess_fatal(s, "client sent too big packet");
	return false;
}

/* Query: scan for session-state effects, then forward. */
static bool
sess_on_query(struct session *s, const struct sbuf_pkt *pkt)
{
	struct query_effects fx;

	if (pkt->avail < pkt->len && pkt->len <= SESS_QUERY_SCAN_MAX)
		return sess_hold(s, pkt);
	varcache_scan_query((const char *)pkt->data + 5, pkt->avail - 5, &fx);
	s->sync.syncs_sent++;
	sp_on_query(s, &fx);	/* search_path changes take effect at their commit */
	return sess_fwd_to_link(s, pkt);
}

/*
 * Statement rewriting follows max_prepared_statements as it is now (the console's SET applies
 * to connected clients, as in pgbouncer), but only switches while no tracked request waits for
 * its answer, so that every ParseComplete / CloseComplete is matched the way it was sent.
 */
static void
sess_prep_refresh(struct session *s)
{
	if (s->sync.reqs.n == 0)
		s->prep_on = s->mode != CFG_POOL_SESSION &&
			     cfg_current()->pool.max_prepared_statements > 0;
}

/* Is the statement named by this Parse/Bind/Describe/Close the unnamed one? -1: not known yet. */
static int
sess_names_unnamed(const struct sbuf_pkt *pkt)
{
	const uint8_t *p = pkt->data + 5, *end = pkt->data + pkt->avail;

	switch (pkt->type) {
	case 'P':
		break;
	case 'B':
		p = memchr(p, 0, (size_t)(end - p));	/* skip the portal name */
		if (p == NULL)
			return -1;
		p++;
		break;
	case 'D':
	case 'C':
		if (p >= end)
			return -1;
		if (*p != 'S')
			return 1;	/* portals are never renamed */
		p++;
		break;
	default:
		return 1;
	}
	if (p >= end)
		return -1;
	return *p == '\0' ? 1 : 0;
}

/* Parse / Bind / Describe / Close with statement rewriting on. */
static bool
sess_on_named(struct session *s, const struct sbuf_pkt *pkt)
{
	struct nk_error err;
	bool fatal = false;
	int unnamed = sess_names_unnamed(pkt);

	s->sync.unsynced = true;
	if (unnamed == 1) {	/* not rewritten, not counted (as pgbouncer) */
		if (pkt->type == 'P' || pkt->type == 'C') {
			if (!sess_req_push(s, pkt->type == 'P' ? REQ_PARSE : REQ_CLOSE, false, NULL)) {
				sess_fatal(s, "out of memory");
				return false;
			}
		}
		return sess_fwd_to_link(s, pkt);
	}
	if (pkt->avail < pkt->len)
		return sess_hold(s, pkt);
	sbuf_skip(&s->sb, pkt->len);
	sess_stats(s)->total_received += pkt->len;
	/* more of the batch is here (Execute, Sync): the rewritten message waits for it and
	 * they leave in one write; the last message buffered goes at once (pool_release ends
	 * the cork too) */
	sbuf_set_cork(link_sbuf(s->link),
		      sbuf_unclaimed(&s->sb) > 0 ? SBUF_CORK_FWD : SBUF_CORK_OFF);
	if (!prep_client_msg(s, s->link, pkt->data, pkt->len, &err, &fatal)) {
		err.severity = NK_SEV_FATAL;
		sess_close(s, err.message, &err);
		return false;
	}
	return true;
}

/* FunctionCall: refused with an error (and ReadyForQuery when nothing else is pending). */
static bool
sess_on_function_call(struct session *s, const struct sbuf_pkt *pkt)
{
	struct nk_error err;
	struct pktbuf pb;

	proto_function_call_refuse(&err);
	if (s->link != NULL && (s->sync.syncs_sent != s->sync.z_recv || s->sync.unsynced)) {
		err.severity = NK_SEV_FATAL;
		sess_close(s, err.message, &err);
		return false;
	}
	sbuf_skip(&s->sb, pkt->len);
	sess_pooler_error(s, &err);
	pktbuf_init(&pb, 128);
	pktbuf_write_error(&pb, &err);
	pktbuf_write_ready_for_query(&pb, s->link != NULL ? s->sync.tx_status : 'I');
	if (!sess_send_pb(s, &pb)) {
		sess_close(s, "client connection failed", NULL);
		return false;
	}
	sbuf_flush(&s->sb);	/* (a routed session's output may be corked mid-batch) */
	return true;
}

/* A message that is not a frontend message at all. */
static bool
sess_on_bad_type(struct session *s, const struct sbuf_pkt *pkt)
{
	struct nk_error err;

	if (proto_frontend_type_check((char)pkt->type, &err))
		nk_error_set(&err, ERRCODE_PROTOCOL_VIOLATION,
			     "unexpected message type \"%c\"", pkt->type);
	sess_log(s, LOG_LVL_ERROR, "unknown pkt from client: %u/0x%x", pkt->type, pkt->type);
	err.severity = NK_SEV_FATAL;
	sess_close(s, "unknown pkt", &err);
	return false;
}

/* The message needs the server: route it. */
static bool
sess_dispatch(struct session *s, const struct sbuf_pkt *pkt)
{
	if (pkt->type != 'Q' && sp_wants(s, pkt->type) && pkt->len <= SESS_QUERY_SCAN_MAX) {
		if (pkt->avail < pkt->len)
			return sess_hold(s, pkt);
		sp_on_client_ext(s, pkt->data, pkt->len);
	}
	switch (pkt->type) {
	case 'Q':
		return sess_on_query(s, pkt);
	case 'P':
	case 'B':
	case 'D':
	case 'C':
		sess_prep_refresh(s);
		if (s->prep_on)
			return sess_on_named(s, pkt);
		s->sync.unsynced = true;
		return sess_fwd_to_link(s, pkt);
	case 'S':
		s->sync.syncs_sent++;
		s->sync.unsynced = false;
		return sess_fwd_to_link(s, pkt);
	case 'E':
	case 'H':
		s->sync.unsynced = true;
		return sess_fwd_to_link(s, pkt);
	default:	/* CopyData, CopyDone, CopyFail */
		return sess_fwd_to_link(s, pkt);
	}
}

/*
 * A client without a link sent Parse / Close messages and a Sync, all buffered (libpq's
 * PQprepare). They need no server: neki answers them (prep_local_answer) when every statement
 * already parsed on a link of the pool (so it parses: pgbouncer answers such a Parse itself
 * on a link that has it), when the pool has no room now, and when a link did not come within
 * SESS_PARSE_WAIT_US. Waiting for a link longer could stall for good: a driver that blocks on
 * the answer (pgbench -M prepared runs several clients per thread) keeps the clients of its
 * own thread from using, and so from giving back, the links they hold in their transactions
 * (links given to them meanwhile included). Otherwise the batch goes to a server as usual
 * (its error, if any, comes at the Parse). True when answered here (<*ok> false: the session
 * closed).
 */
static bool
sess_prep_batch_here(struct session *s, const struct sbuf_pkt *pkt, bool *ok)
{
	bool here = s->prep_batch == SESS_PREP_BATCH_HERE;
	uint32_t len;
	bool known;

	s->prep_batch = SESS_PREP_BATCH_NONE;
	sess_prep_refresh(s);
	if (!s->prep_on || (len = prep_local_batch(s, pkt, &known)) == 0)
		return false;
	if (!known && !here && pool_has_room(spool_pool(s->sp))) {
		s->prep_batch = SESS_PREP_BATCH_WAITS;	/* a bounded wait for a link */
		return false;
	}
	*ok = prep_local_answer(s, pkt, len);
	if (!*ok)
		sess_close(s, "client connection failed", NULL);
	return true;
}

static bool
sess_is_client_msg(uint8_t t)
{
	return t == 'Q' || t == 'P' || t == 'B' || t == 'D' || t == 'C' || t == 'S' ||
	       t == 'E' || t == 'H' || t == 'd' || t == 'c' || t == 'f';
}

bool
sess_on_work_pkt(struct session *s, const struct sbuf_pkt *pkt)
{
	bool ok;

	log_noise("C-%p: client '%c' len %u avail %u", (void *)s, pkt->type, pkt->len, pkt->avail);
	if (pkt->type == 'X') {
		sess_close(s, "client close request", NULL);
		return false;
	}
	if (pkt->type == 'F')
		return sess_on_function_call(s, pkt);
	if (!sess_is_client_msg(pkt->type))
		return sess_on_bad_type(s, pkt);
	if (pkt->len > (uint32_t)s->cfg->net.max_packet_size && s->cfg->net.max_packet_size > 0) {
		sess_fatal(s, "client sent too big packet");
		return false;
	}
	if (pkt->type == 'Q' && s->cfg->proc.disable_pqexec) {	/* pgbouncer's words */
		sess_log(s, LOG_LVL_ERROR, "client used \"Query\" packet type");
		sess_fatal(s, "PQexec disallowed");
		return false;
	}
	if (s->link == NULL && s->route == NULL &&
	    (pkt->type == 'd' || pkt->type == 'c' || pkt->type == 'f')) {
		sbuf_skip(&s->sb, pkt->len);	/* COPY leftovers after the server gave up */
		return true;
	}
	if (pkt->type == 'Q' || pkt->type == 'P' ||
	    ((pkt->type == 'B' || pkt->type == 'D') && s->nx_stmts != NULL)) {
		int call = sess_admin_try_call(s, pkt);

		if (call >= 0)
			return call != 0;
		child_switch_topology();	/* a statement boundary */
	}
	if (s->route != NULL)
		return route_on_pkt(s->route, pkt);
	if (s->link == NULL && (pkt->type == 'P' || pkt->type == 'C') &&
	    sess_prep_batch_here(s, pkt, &ok))
		return ok;
	if (!sess_need_link(s))
		return false;
	if (s->release_pending) {
		event_del(s->ev_release);
		s->release_pending = false;
	}
	if (pkt->type != 'd')
		sess_stats_query_start(s);
	return sess_dispatch(s, pkt);
}
