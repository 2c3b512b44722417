/*
 * session.c - the client session state machine: accept, the sbuf callback that dispatches
 * by state, closing and reaping, the janitor (client_login_timeout, client_idle_timeout,
 * query_timeout, idle_transaction_timeout, transaction_timeout; pass-through and routed
 * sessions alike) and pgbouncer's "C-0x...:" log prefix.
 *
 * The transition table is in session_int.h (enum sess_state). Phase handlers live in
 * session_startup.c / session_auth.c (LOGIN), session_fwd.c (IDLE, WAIT, ACTIVE).
 * Entry points: session_accept(), session_count(), sess_close(), sess_set_state().
 */
#include "neki/base.h"

#include "neki/session.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "neki/log.h"
#include "neki/net.h"
#include "neki/pktbuf.h"
#include "neki/proc.h"
#include "neki/clock.h"
#include "neki/exec.h"
#include "neki/shm_dbstats.h"
#include "session_int.h"

#define SESS_JANITOR_MS 100		/* how often timeouts are checked */

static struct list sess_lists[SESS_ST_COUNT];	/* sessions by state */
static bool sess_lists_ready;
static struct session *dead_list;	/* CLOSED sessions, freed by reap_cb */
static struct event *reap_ev;		/* owned: frees dead sessions (activated) */
static struct event *janitor_ev;	/* owned: periodic timeouts */

static const char *const sess_state_names[SESS_ST_COUNT] = {
	[SESS_ST_LOGIN] = "login",
	[SESS_ST_AUTHQ] = "auth-query",
	[SESS_ST_WELCOME] = "welcome",
	[SESS_ST_IDLE] = "idle",
	[SESS_ST_WAIT] = "waiting",
	[SESS_ST_ACTIVE] = "active",
	[SESS_ST_CLOSED] = "closed",
};

uint64_t
sess_now_us(void)
{
	return nk_now_us();
}

const char *
sess_state_str(enum sess_state st)
{
	return (unsigned)st < SESS_ST_COUNT ? sess_state_names[st] : "?";
}

size_t
session_count(void)
{
	size_t n = 0;

	if (!sess_lists_ready)
		return 0;
	for (int i = 0; i < SESS_ST_CLOSED; i++)
		n += list_count(&sess_lists[i]);
	return n;
}

void
sess_foreach(void (*fn)(struct session *s, void *arg), void *arg)
{
	if (!sess_lists_ready)
		return;
	for (int st = 0; st < SESS_ST_CLOSED; st++)
		for (struct list_node *n = list_first(&sess_lists[st]); n != NULL;
		     n = list_next(&sess_lists[st], n))
			fn(container_of(n, struct session, node), arg);
}

static void
oldest_planned(struct session *s, void *arg)
{
	uint64_t *low = arg, rev = s->route != NULL ? route_busy_revision(s->route) : 0;

	if (rev != 0 && (*low == 0 || rev < *low))
		*low = rev;
}

uint64_t
session_oldest_planned_revision(void)
{
	uint64_t low = 0;

	sess_foreach(oldest_planned, &low);
	return low;
}

void
sess_foreach_closing(bool (*fn)(struct session *s, void *arg), void *arg)
{
	if (!sess_lists_ready)
		return;
	for (int st = 0; st < SESS_ST_CLOSED; st++) {
		struct list_node *n = list_first(&sess_lists[st]);

		while (n != NULL) {
			struct session *s = container_of(n, struct session, node);

			n = list_next(&sess_lists[st], n);
			if (fn(s, arg))		/* closed: others may have moved too */
				n = list_first(&sess_lists[st]);
		}
	}
}

/* The only writer of s->state: moves the session between the state lists. */
void
sess_set_state(struct session *s, enum sess_state st)
{
	NK_ASSERT((unsigned)st < SESS_ST_COUNT);
	NK_ASSERT(s->state != SESS_ST_CLOSED || st == SESS_ST_CLOSED);
	if (list_node_linked(&s->node))
		list_remove(&sess_lists[s->state], &s->node);
	log_noise("C-%p: %s -> %s", (void *)s, sess_state_str(s->state), sess_state_str(st));
	s->state = st;
	list_push_back(&sess_lists[st], &s->node);
}

/* Log with pgbouncer's client prefix: "C-0x...: db/user@addr:port msg". */
void
sess_log(const struct session *s, int lvl, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	sess_vlog(s, lvl, fmt, ap);
	va_end(ap);
}

void
sess_vlog(const struct session *s, int lvl, const char *fmt, va_list ap)
{
	char msg[768];

	if (!log_enabled((enum log_level)lvl))
		return;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (s->from.is_unix)
		log_msg((enum log_level)lvl, "C-%p: %s/%s@unix(%d):%d %s", (const void *)s,
			s->dbname ? s->dbname : "(nodb)", s->user ? s->user : "(nouser)",
			s->from.peer_pid, s->from.port, msg);
	else
		log_msg((enum log_level)lvl, "C-%p: %s/%s@%s:%d %s", (const void *)s,
			s->dbname ? s->dbname : "(nodb)", s->user ? s->user : "(nouser)",
			s->from.addr, s->from.port, msg);
}

/* A pool's line about the client waiting in it, with the client's prefix. */
void
sess_waiter_log(struct pool_waiter *w, int level, const char *msg)
{
	sess_log(w->ctx, level, "%s", msg);
}

bool
sess_send_pb(struct session *s, struct pktbuf *pb)
{
	bool ok = !pktbuf_failed(pb) && sbuf_send(&s->sb, pb->buf, pb->len);

	pktbuf_cleanup(pb);
	return ok;
}

void
sess_pooler_error(const struct session *s, const struct nk_error *err)
{
	if (s->cfg->log.log_pooler_errors)
		sess_log(s, LOG_LVL_WARNING, "pooler error: %s", err->message);
}

bool
sess_send_error(struct session *s, const struct nk_error *err)
{
	struct pktbuf pb;

	sess_pooler_error(s, err);
	pktbuf_init(&pb, 128);
	pktbuf_write_error(&pb, err);
	return sess_send_pb(s, &pb);
}

void
sess_wait_begin(struct session *s)
{
	s->wait_notified = false;
}

/* ---- closing ---- */

static void
sess_reap_cb(evutil_socket_t fd, short what, void *arg)
{
	while (dead_list != NULL) {
		struct session *s = dead_list;

		dead_list = s->next_dead;
		list_remove(&sess_lists[SESS_ST_CLOSED], &s->node);
		sbuf_cleanup(&s->sb);
		if (s->ev_release != NULL)
			event_free(s->ev_release);
		cfg_unref((struct cfg *)s->cfg);
		free(s->user);
		free(s->dbname);
		free(s->app_name);
		free(s->repl_startup);
		free(s->neki_opts);
		free(s->secret);
		free(s);
	}
}

/* Give back everything the session holds except its memory. */
static void
sess_release_all(struct session *s, const char *reason)
{
	if (pool_waiter_is_queued(&s->waiter))
		pool_cancel_wait(&s->waiter);
	if (s->release_pending)
		event_del(s->ev_release);
	s->release_pending = false;
	if (s->authq_link != NULL) {
		pool_release(s->authq_link, "client gone during auth_query");
		s->authq_link = NULL;
	}
	sess_drop_link(s, reason);
	sess_admin_release(s);
	route_session_free(s->route);
	s->route = NULL;
	if (s->attached && s->sp != NULL) {
		pool_client_detach(spool_pool(s->sp));
		spool_unref(s->sp);
	}
	s->attached = false;
	sess_release_counts(s);
	sess_auth_cleanup(s);
	sess_reqs_cleanup(s);
	varcache_cleanup(&s->vars);
	sp_cleanup(s);
	prep_client_cleanup(&s->prep);
}

/* See session_int.h: the closing line, the links' S- lines, then the error. */
void
sess_close(struct session *s, const char *reason, const struct nk_error *err)
{
	uint64_t age;

	if (s->state == SESS_ST_CLOSED)
		return;
	age = (sess_now_us() - s->tm.connect_us) / 1000000u;
	if (s->cfg->log.log_disconnections && reason != NULL)
		sess_log(s, LOG_LVL_INFO, "closing because: %s (age=%llus)", reason,
			 (unsigned long long)age);
	sess_release_all(s, reason);
	if (err != NULL && !sess_send_error(s, err))
		log_debug("C-%p: could not send the error", (void *)s);
	sbuf_close(&s->sb);
	sess_set_state(s, SESS_ST_CLOSED);
	s->next_dead = dead_list;
	dead_list = s;
	event_active(reap_ev, EV_TIMEOUT, 0);
	child_client_closed();
}

void
sess_fatal(struct session *s, const char *msg)
{
	struct nk_error err;

	nk_error_set(&err, ERRCODE_PROTOCOL_VIOLATION, "%s", msg);
	err.severity = NK_SEV_FATAL;
	sess_close(s, msg, &err);
}

/* ---- timeouts ---- */

/* The effective setting: the [users] entry's when it sets one (> 0), else the global value. */
static double
sess_user_time(const struct session *s, double user_val, double global_val)
{
	return s->ucfg != NULL && user_val > 0 ? user_val : global_val;
}

double
sess_query_timeout(const struct session *s)
{
	return sess_user_time(s, s->ucfg ? s->ucfg->query_timeout : -1, s->cfg->cli.query_timeout);
}

static bool
sess_expired(uint64_t since, double secs, uint64_t now)
{
	return secs > 0 && since != 0 && now - since >= (uint64_t)(secs * 1e6);
}

/* Before a startup packet the client is dropped silently (as Postgres), after it with an error. */
static void
sess_check_login(struct session *s, uint64_t now)
{
	if (!sess_expired(s->tm.connect_us, s->cfg->cli.client_login_timeout, now))
		return;
	if (s->auth_step == SESS_AUTH_STARTUP && s->state == SESS_ST_LOGIN)
		sess_close(s, "client_login_timeout", NULL);
	else if (s->state == SESS_ST_WELCOME)	/* authenticated; no server ever logged in */
		sess_fatal(s, "client_login_timeout (server down)");
	else
		sess_fatal(s, "client_login_timeout");
}

static double
sess_idle_tx_timeout(const struct session *s)
{
	return sess_user_time(s, s->ucfg ? s->ucfg->idle_transaction_timeout : -1,
			      s->cfg->cli.idle_transaction_timeout);
}

static double
sess_tx_timeout(const struct session *s)
{
	return sess_user_time(s, s->ucfg ? s->ucfg->transaction_timeout : -1,
			      s->cfg->cli.transaction_timeout);
}

/*
 * WAIT (queued for a link for a query): after query_wait_notify seconds the client gets
 * pgbouncer 1.25's NOTICE, once per wait; query_wait_timeout itself is the pool's.
 */
static void
sess_wait_notify(struct session *s, uint64_t now)
{
	struct nk_error notice;
	struct pktbuf pb;

	if (s->wait_notified || s->tm.wait_start_us == 0 ||
	    !sess_expired(s->tm.wait_start_us, s->cfg->cli.query_wait_notify, now))
		return;
	s->wait_notified = true;
	nk_error_set(&notice, ERRCODE_SUCCESSFUL_COMPLETION,
		     "No server connection available in %s backend, client "
		     "being queued", s->dbname);
	notice.severity = NK_SEV_NOTICE;
	pktbuf_init(&pb, 128);
	pktbuf_write_notice(&pb, &notice);
	if (!sess_send_pb(s, &pb))
		sess_close(s, "client connection failed", NULL);
}

/*
 * A client waiting for a link (WAIT) or for the pool's first login (WELCOME): pgbouncer's
 * query_timeout covers the wait too ("query_timeout"), counted from when it began.
 */
static void
sess_check_wait(struct session *s, uint64_t now)
{
	uint64_t since = s->tm.wait_start_us != 0 ? s->tm.wait_start_us : s->tm.connect_us;

	if (sess_expired(since, sess_query_timeout(s), now))
		sess_fatal(s, "query_timeout");
	else if (s->state == SESS_ST_WAIT)
		sess_wait_notify(s, now);
}

static void
sess_check_welcome(struct session *s, uint64_t now)
{
	sess_check_login(s, now);
	if (s->state == SESS_ST_WELCOME)
		sess_check_wait(s, now);
}

/* The timeouts of a client's query and transaction (pgbouncer's janitor). */
enum sess_timeout {
	SESS_TO_NONE = 0,
	SESS_TO_QUERY,		/* query_timeout: the query runs too long */
	SESS_TO_XACT,		/* transaction_timeout: the transaction lasts too long */
	SESS_TO_IDLE_XACT,	/* idle_transaction_timeout: idle inside a transaction */
};

/* Where a client's query and transaction stand, for sess_timeout_due(). */
struct sess_times {
	bool running;		/* a query runs (since query_start, 0 when not known) */
	bool in_tx;		/* inside a transaction (since xact_start, 0 when not known) */
	uint64_t query_start, xact_start;	/* sess_now_us() */
};

/*
 * Which timeout ends <s> at <now>, given its query and transaction <t>: while a query runs,
 * query_timeout then transaction_timeout; idle in a transaction (since s->tm.activity_us, the
 * end of the last query: pgbouncer #125), idle_transaction_timeout then transaction_timeout.
 */
static enum sess_timeout
sess_timeout_due(const struct session *s, const struct sess_times *t, uint64_t now)
{
	if (t->running && sess_expired(t->query_start, sess_query_timeout(s), now))
		return SESS_TO_QUERY;
	if (!t->running && t->in_tx && sess_expired(s->tm.activity_us, sess_idle_tx_timeout(s), now))
		return SESS_TO_IDLE_XACT;
	if ((t->running || t->in_tx) && sess_expired(t->xact_start, sess_tx_timeout(s), now))
		return SESS_TO_XACT;
	return SESS_TO_NONE;
}

/* Close <s> for timeout <to> with pgbouncer's reason, the message the client gets too. */
static void
sess_timeout_close(struct session *s, enum sess_timeout to)
{
	static const char *const reason[] = {
		[SESS_TO_QUERY] = "query timeout",
		[SESS_TO_XACT] = "transaction timeout",
		[SESS_TO_IDLE_XACT] = "idle transaction timeout",
	};

	NK_ASSERT(to != SESS_TO_NONE && to < NK_ARRAY_LEN(reason));
	sess_fatal(s, reason[to]);
}

/*
 * A routed session (sharded database) stays IDLE: its query runs on shard links of its own.
 * The timeouts apply as to a pass-through client; one ending a running query cancels every
 * shard part first. Closing the client closes its shard links, so the shards roll back.
 * True when the session is busy or in a transaction (client_idle_timeout does not apply).
 */
static bool
sess_check_routed(struct session *s, uint64_t now)
{
	struct route *r = s->route;
	struct sess_times t = { route_is_busy(r), route_tx_status(r) != 'I', 0, 0 };
	enum sess_timeout to;

	route_clocks(r, &t.query_start, &t.xact_start);
	to = sess_timeout_due(s, &t, now);

	if (to == SESS_TO_NONE)
		return t.running || t.in_tx;
	if (t.running)
		route_cancel(r);
	sess_timeout_close(s, to);
	return true;
}

static void
sess_check_idle(struct session *s, uint64_t now)
{
	double t = sess_user_time(s, s->ucfg ? s->ucfg->client_idle_timeout : -1,
				  s->cfg->cli.client_idle_timeout);

	if (s->route != NULL && sess_check_routed(s, now))
		return;
	if (sess_expired(s->tm.activity_us, t, now))
		sess_fatal(s, "client_idle_timeout");
}

/*
 * ACTIVE: a query running too long is cancelled; an idle transaction is closed; with
 * server_fast_close a close_needed link between transactions is closed with its client.
 */
static void
sess_check_active(struct session *s, uint64_t now)
{
	struct sess_times t = { s->tm.query_start_us != 0, s->sync.tx_status != 'I', s->tm.query_start_us,
				s->tm.xact_start_us };
	enum sess_timeout to;

	if (s->link != NULL && !t.running && s->sync.syncs_sent == s->sync.z_recv &&
	    !s->sync.unsynced && link_fast_close_due(s->link)) {
		/* server_fast_close: the link goes between transactions, and the client with it */
		sess_fatal(s, "database configuration changed");
		return;
	}
	to = sess_timeout_due(s, &t, now);
	if (to != SESS_TO_NONE) {
		if (t.running)
			sess_cancel_backend(s);
		sess_timeout_close(s, to);
	} else if (!t.running && !t.in_tx) {
		sess_check_idle(s, now);
	}
}

typedef void (*sess_check_fn)(struct session *s, uint64_t now);

static void
sess_check_list(enum sess_state st, sess_check_fn fn, uint64_t now)
{
	struct list_node *n = list_first(&sess_lists[st]);

	while (n != NULL) {
		struct session *s = container_of(n, struct session, node);

		n = list_next(&sess_lists[st], n);
		if (!s->adm.suspended)	/* SUSPEND: nothing touches its socket until RESUME */
			fn(s, now);	/* may move s to CLOSED: the next node was taken first */
	}
}

static void
sess_janitor_cb(evutil_socket_t fd, short what, void *arg)
{
	uint64_t now = sess_now_us();

	sess_check_list(SESS_ST_LOGIN, sess_check_login, now);
	sess_check_list(SESS_ST_AUTHQ, sess_check_login, now);
	sess_check_list(SESS_ST_WELCOME, sess_check_welcome, now);
	sess_check_list(SESS_ST_IDLE, sess_check_idle, now);
	sess_check_list(SESS_ST_WAIT, sess_check_wait, now);
	sess_check_list(SESS_ST_ACTIVE, sess_check_active, now);
	sess_cancel_janitor(now);
	if (!sctl_is_suspended()) {	/* SUSPEND: the pools stay as they are */
		spool_reap_idle(cfg_current(), now);
		spool_keep_min_pools(cfg_current());
	}
}

/* ---- dispatch ---- */

/* The client's sbuf callback. */
static bool
sess_sbuf_cb(struct sbuf *sb, enum sbuf_event ev, const struct sbuf_pkt *pkt, int err,
	     void *arg)
{
	struct session *s = arg;

	switch (ev) {
	case SBUF_EV_PKT:
		break;
	case SBUF_EV_EOF:
		sess_close(s, "client unexpected eof", NULL);
		return false;
	case SBUF_EV_RECV_FAILED:
	case SBUF_EV_SEND_FAILED:
		sess_close(s, "client connection failed", NULL);
		return false;
	case SBUF_EV_BAD_PKT:
		if (s->auth_step == SESS_AUTH_STARTUP)
			sess_startup_bad_length(s);
		else
			sess_fatal(s, "invalid message length");
		return false;
	case SBUF_EV_SEND_DONE:
		if (s->route != NULL)	/* a merge held its shards while the client was slow */
			route_on_send_done(s->route);
		return false;
	case SBUF_EV_CONNECT_OK:
	case SBUF_EV_CONNECT_FAILED:
		return false;
	}
	s->tm.activity_us = sess_now_us();
	switch (s->state) {
	case SESS_ST_LOGIN:
		return sess_on_login_pkt(s, pkt);
	case SESS_ST_IDLE:
	case SESS_ST_ACTIVE:
		if (s->relay != NULL)
			return sess_admin_pkt(s, pkt);
		if (s->nx != NULL)
			return sess_nekiext_pkt(s, pkt);
		return sess_on_work_pkt(s, pkt);
	case SESS_ST_AUTHQ:
	case SESS_ST_WELCOME:
	case SESS_ST_WAIT:
		return false;	/* paused: offered again after sbuf_continue() */
	case SESS_ST_CLOSED:
		break;
	}
	return false;
}

/* ---- accept ---- */

static bool
sess_module_init(struct event_base *base)
{
	if (sess_lists_ready)
		return true;
	for (int i = 0; i < SESS_ST_COUNT; i++)
		list_init(&sess_lists[i]);
	reap_ev = event_new(base, -1, 0, sess_reap_cb, NULL);
	janitor_ev = event_new(base, -1, EV_PERSIST, sess_janitor_cb, NULL);
	if (reap_ev == NULL || janitor_ev == NULL)
		return false;
	struct timeval tv = { 0, SESS_JANITOR_MS * 1000 };
	if (event_add(janitor_ev, &tv) == -1)
		return false;
	sess_lists_ready = true;
	return true;
}

/* Fill the peer address fields from the socket. */
static void
sess_peer_init(struct session *s, int fd)
{
	socklen_t sl = sizeof(s->from.peer);

	snprintf(s->from.addr, sizeof(s->from.addr), "unix");
	if (getpeername(fd, (struct sockaddr *)&s->from.peer, &sl) == -1)
		return;
	if (s->from.peer.ss_family == AF_UNIX) {
		struct ucred cred;
		socklen_t cl = sizeof(cred);

		s->from.is_unix = true;
		s->from.port = s->cfg->proc.listen_port;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) == 0)
			s->from.peer_pid = (int)cred.pid;
	} else if (s->from.peer.ss_family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)&s->from.peer;

		inet_ntop(AF_INET, &in->sin_addr, s->from.addr, sizeof(s->from.addr));
		s->from.port = ntohs(in->sin_port);
	} else if (s->from.peer.ss_family == AF_INET6) {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&s->from.peer;

		inet_ntop(AF_INET6, &in6->sin6_addr, s->from.addr, sizeof(s->from.addr));
		s->from.port = ntohs(in6->sin6_port);
	}
}

static struct session *
sess_new(struct event_base *base, const struct cfg *c, int fd)
{
	struct session *s = calloc(1, sizeof(*s));
	struct sbuf_opts o;

	if (s == NULL)
		return NULL;
	list_node_init(&s->node);
	s->cfg = c;
	cfg_ref((struct cfg *)c);
	s->tm.connect_us = s->tm.activity_us = sess_now_us();
	s->sync.tx_status = 'I';
	s->id = shm_socket_id_next();
	s->stats = shm_dbstats_get("");	/* the unlisted bucket until login picks the database */
	sess_peer_init(s, fd);
	sbuf_opts_from_cfg(&o, c);
	s->ev_release = event_new(base, -1, 0, (event_callback_fn)sess_release_cb, s);
	if (!sbuf_init(&s->sb, base, sess_sbuf_cb, s, &o) || s->ev_release == NULL) {
		sbuf_cleanup(&s->sb);
		if (s->ev_release != NULL)
			event_free(s->ev_release);
		cfg_unref((struct cfg *)c);
		free(s);
		return NULL;
	}
	sbuf_set_startup(&s->sb, true);
	return s;
}

void
session_accept(int fd, const struct listener *l)
{
	struct event_base *base = child_base();
	const struct cfg *c = cfg_current();
	struct session *s;

	if (!sess_module_init(base) || (s = sess_new(base, c, fd)) == NULL) {
		log_warn("out of memory accepting a client on %s", l->name);
		close(fd);
		return;
	}
	sess_cancel_key_init(s);
	child_client_opened();
	sess_set_state(s, SESS_ST_LOGIN);
	if (!sbuf_accept(&s->sb, fd, s->from.is_unix)) {
		if (sbuf_fd(&s->sb) != fd)
			close(fd);
		sess_close(s, "could not watch the client socket", NULL);
	}
}

struct session *
sess_adopt_new(int fd)
{
	struct event_base *base = child_base();
	struct session *s;

	if (!sess_module_init(base) || (s = sess_new(base, cfg_current(), fd)) == NULL) {
		close(fd);
		return NULL;
	}
	child_client_opened();
	sess_set_state(s, SESS_ST_LOGIN);
	sbuf_set_startup(&s->sb, false);
	if (!sbuf_accept(&s->sb, fd, s->from.is_unix)) {
		if (sbuf_fd(&s->sb) != fd)
			close(fd);
		sess_close(s, "could not watch the client socket", NULL);
		return NULL;
	}
	return s;
}

/* The session whose BackendKeyData is <pid>, <key> (any live state), or NULL. */
struct session *
sess_find_by_key(uint32_t pid, uint32_t key)
{
	if (!sess_lists_ready)
		return NULL;
	for (int st = 0; st < SESS_ST_CLOSED; st++) {
		for (struct list_node *n = list_first(&sess_lists[st]); n != NULL;
		     n = list_next(&sess_lists[st], n)) {
			struct session *s = container_of(n, struct session, node);

			if (s->key_pid == pid && s->key_secret == key)
				return s;
		}
	}
	return NULL;
}

/* Close with FATAL <msg> every session of <st> that <match> selects. */
static size_t
sess_kill_where(bool (*match)(const struct session *s, const void *arg), const void *arg,
		const char *msg)
{
	size_t n = 0;

	if (!sess_lists_ready)
		return 0;
	for (int st = 0; st < SESS_ST_CLOSED; st++) {
		struct list_node *nd = list_first(&sess_lists[st]);

		while (nd != NULL) {
			struct session *s = container_of(nd, struct session, node);

			nd = list_next(&sess_lists[st], nd);
			if (match(s, arg)) {
				sess_fatal(s, msg);
				n++;
				nd = list_first(&sess_lists[st]);	/* closing may move others */
			}
		}
	}
	return n;
}

static bool
sess_is_of_db(const struct session *s, const void *arg)
{
	const char *db = arg;

	return s->sp != NULL && s->state != SESS_ST_CLOSED &&
	       (db[0] == '\0' || strcmp(s->dbname, db) == 0);
}

static bool
sess_has_id(const struct session *s, const void *arg)
{
	return s->state != SESS_ST_CLOSED && s->id == *(const uint64_t *)arg;
}

void
sess_kill_db(const char *db, const char *msg)
{
	size_t n = sess_kill_where(sess_is_of_db, db, msg);

	if (n > 0)
		log_info("closed %zu client%s of %s: %s", n, n == 1 ? "" : "s",
			 db[0] ? db : "every database", msg);
}

bool
sess_kill_id(uint64_t id, const char *msg)
{
	return sess_kill_where(sess_has_id, &id, msg) > 0;
}

/* ---- SUSPEND ---- */

/*
 * Is <s> at a point where its socket, and its link's, could go to another process (SUSPEND,
 * the online restart)? Logged in, nothing buffered either way, and on its link nothing the
 * session layer must match later: no injected answer to swallow, no tracked Parse/Close, no
 * extended batch without its Sync, no COPY from the client, no release or cancel under way.
 * A query may be running: the new process counts its answers from a fence of its own.
 */
static bool
sess_at_rest(const struct session *s)
{
	struct sbuf *lsb = s->link != NULL ? link_sbuf(s->link) : NULL;

	if (s->state != SESS_ST_IDLE && s->state != SESS_ST_ACTIVE)
		return false;	/* logging in or waiting for a link: not at rest yet */
	if (!sbuf_is_empty(&s->sb) || sbuf_queued(&s->sb) > 0 || s->release_pending ||
	    s->tm.cancel_inflight)
		return false;
	if (s->route != NULL)
		return !route_is_busy(s->route);
	if (lsb == NULL)
		return true;
	return sbuf_is_empty(lsb) && sbuf_queued(lsb) == 0 && !s->sync.unsynced && !s->sync.in_copy_in &&
	       s->sync.z_recv >= s->sync.swallow_until && s->sync.reqs.n == 0 && !link_cancel_pending(s->link);
}

/* Stop reading <s> (and its link) once it is at rest; true when done. */
static bool
sess_try_suspend(struct session *s)
{
	if (!sess_at_rest(s))
		return false;
	sbuf_pause(&s->sb);
	if (s->link != NULL)
		sbuf_pause(link_sbuf(s->link));
	s->adm.suspended = true;
	return true;
}

/* Sessions not suspended yet (closed instead with <force>). */
static size_t
sess_suspend_sessions(bool force)
{
	size_t left = 0;

	for (int st = 0; st < SESS_ST_CLOSED; st++) {
		struct list_node *nd = list_first(&sess_lists[st]);

		while (nd != NULL) {
			struct session *s = container_of(nd, struct session, node);

			nd = list_next(&sess_lists[st], nd);
			/* the console is never suspended: its RESUME must get through */
			if (s->adm.suspended || s->adm.console || s->relay != NULL || sess_try_suspend(s))
				continue;
			if (!force) {
				left++;
				continue;
			}
			sess_fatal(s, "suspend_timeout");
			nd = list_first(&sess_lists[st]);	/* closing may move others */
		}
	}
	return left;
}

size_t
sess_suspend_step(bool force)
{
	size_t left;

	if (!sess_lists_ready)
		return 0;
	left = sess_suspend_sessions(force);
	if (left > 0)
		return left;	/* the pools serve the clients still waiting for a link */
	for (struct spool *sp = spool_first(); sp != NULL; sp = spool_next(sp))
		left += pool_suspend(spool_pool(sp), true);
	return left;
}

void
sess_resume_all(void)
{
	for (struct spool *sp = spool_first(); sp != NULL; sp = spool_next(sp))
		(void)pool_suspend(spool_pool(sp), false);
	if (!sess_lists_ready)
		return;
	for (int st = 0; st < SESS_ST_CLOSED; st++) {
		for (struct list_node *nd = list_first(&sess_lists[st]); nd != NULL;
		     nd = list_next(&sess_lists[st], nd)) {
			struct session *s = container_of(nd, struct session, node);

			if (!s->adm.suspended)
				continue;
			s->adm.suspended = false;
			s->adm.handed = false;	/* an online restart gave up: the socket is ours */
			sbuf_continue(&s->sb);
			if (s->link != NULL)
				sbuf_continue(link_sbuf(s->link));
		}
	}
}
