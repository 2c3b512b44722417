/*
 * pool.c - a pool of backend links per (database, user) inside one worker.
 *
 * Decides when links are opened (pool_launch: global limits, reserve pool, server_login_retry),
 * handed out (pool_acquire / pool_dispatch: idle LIFO or FIFO, check before reuse), given back
 * (pool_release: dirty close, lifetime, close_needed, reset query) and closed by the janitor
 * (lifetime, idle timeout, check delay, query_wait_timeout, min_pool_size). Links report back
 * through the pool_on_*() hooks. Session callbacks run from ev_dispatch, never inside the
 * session's own call into the pool. Its parts: pool_slot.c (a slot of the limits and the
 * start of a link), pool_janitor.c, pool_host.c (the database's hosts), pool_welcome.c (the
 * first login's parameters), pool_limits.c (process-local limits), pool_wait.c (waiting
 * across workers), pool_takeover.c (the online restart).
 */
#include "neki/base.h"
#include "neki/clock.h"
#include "neki/pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "neki/log.h"
#include "pool_int.h"

/* Every pool of this process (a worker's pools), for eviction across pools. */
struct list pool_all = { { &pool_all.head, &pool_all.head }, 0 };

uint64_t
pool_secs_to_us(double s)
{
	return s > 0 ? (uint64_t)(s * 1e6) : 0;
}

/* ---- effective settings: [users] entry, then [databases] entry, then [pgbouncer] ---- */

/* pool_size for this pool. */
int
pool_size_limit(const struct pool *p)
{
	if (p->user != NULL && p->user->pool_size >= 0)
		return p->user->pool_size;
	if (p->db->pool_size >= 0)
		return p->db->pool_size;
	return p->cfg->pool.default_pool_size;
}

int
pool_reserve_size(const struct pool *p)
{
	if (p->user != NULL && p->user->reserve_pool_size >= 0)
		return p->user->reserve_pool_size;
	if (p->db->reserve_pool_size >= 0)
		return p->db->reserve_pool_size;
	return p->cfg->pool.reserve_pool_size;
}

int
pool_min_size(const struct pool *p)
{
	if (p->replication != NULL)
		return 0;	/* walsenders are opened for a client, never kept in advance */
	return p->db->min_pool_size >= 0 ? p->db->min_pool_size : p->cfg->pool.min_pool_size;
}

int
pool_db_max(const struct pool *p)
{
	return p->db->max_db_connections > 0 ? p->db->max_db_connections :
	       p->cfg->pool.max_db_connections;
}

int
pool_user_max(const struct pool *p)
{
	if (p->user != NULL && p->user->max_user_connections > 0)
		return p->user->max_user_connections;
	return p->cfg->pool.max_user_connections;
}

int
pool_scope_max(const struct pool *p, enum pool_scope scope)
{
	return scope == POOL_SCOPE_DB ? pool_db_max(p) :
	       scope == POOL_SCOPE_USER ? pool_user_max(p) : pool_size_limit(p);
}

static uint64_t
pool_lifetime_us(const struct pool *p)
{
	double s = p->db->server_lifetime >= 0 ? p->db->server_lifetime : p->cfg->srv.server_lifetime;

	return pool_secs_to_us(s);
}

double
pool_query_wait_timeout(const struct pool *p)
{
	if (p->user != NULL && p->user->query_wait_timeout >= 0)
		return p->user->query_wait_timeout;
	if (p->db->query_wait_timeout >= 0)
		return p->db->query_wait_timeout;
	return p->cfg->cli.query_wait_timeout;
}

/* pool_mode for this pool. */
enum cfg_pool_mode
pool_mode(const struct pool *p)
{
	if (p->user != NULL && p->user->pool_mode != CFG_POOL_UNSET)
		return p->user->pool_mode;
	if (p->db->pool_mode != CFG_POOL_UNSET)
		return p->db->pool_mode;
	return p->cfg->pool.pool_mode;
}

/* ---- small accessors ---- */

size_t
pool_count(const struct pool *p, enum link_state st)
{
	return list_count(&p->lists[st]);
}

size_t
pool_being_canceled(const struct pool *p)
{
	const struct list *active = &p->lists[LINK_ST_ACTIVE];
	size_t n = 0;

	for (struct list_node *i = list_first(active); i != NULL; i = list_next(active, i))
		n += container_of(i, struct link, node)->cancel_parked;
	return n;
}

void
pool_foreach_link(struct pool *p, pool_link_fn fn, void *arg)
{
	for (int st = 0; st < LINK_ST_COUNT; st++) {
		if (st == LINK_ST_CLOSING)
			continue;
		for (struct list_node *n = list_first(&p->lists[st]); n != NULL;
		     n = list_next(&p->lists[st], n))
			fn(container_of(n, struct link, node), arg);
	}
}

/* Clients queued for a link. */
size_t
pool_waiting(const struct pool *p)
{
	return list_count(&p->waiters);
}

/* The client-side database name (borrowed). */
const char *
pool_db_name(const struct pool *p)
{
	return p->db_name;
}

/* The server login user (borrowed). */
const char *
pool_user_name(const struct pool *p)
{
	return p->user_name;
}

const char *
pool_password(const struct pool *p)
{
	return p->password;
}

const struct scram_keys *
pool_scram_keys(const struct pool *p)
{
	return &p->scram_keys;
}

/* True once a login succeeded and its parameters were saved, here or (taken now) by another
 * process. */
bool
pool_welcome_ready(struct pool *p)
{
	return p->welcome_ready || welcome_take_shared(p);
}

/* How many welcome parameters the pool saved. */
size_t
pool_param_count(const struct pool *p)
{
	return p->nwelcome;
}

/* The <i>th welcome parameter (borrowed strings). */
void
pool_param_at(const struct pool *p, size_t i, const char **name, const char **value)
{
	NK_ASSERT(i < p->nwelcome);
	*name = p->welcome[i].name;
	*value = p->welcome[i].value;
}

/* Links that exist and are not on their way out or in. */
size_t
pool_usable_links(const struct pool *p)
{
	return pool_count(p, LINK_ST_IDLE) + pool_count(p, LINK_ST_USED) +
	       pool_count(p, LINK_ST_TESTED) + pool_count(p, LINK_ST_ACTIVE);
}

/* pool_has_room: see neki/pool.h. */
bool
pool_has_room(const struct pool *p)
{
	size_t coming = pool_count(p, LINK_ST_IDLE) + pool_count(p, LINK_ST_USED) +
			pool_count(p, LINK_ST_LOGIN) + pool_count(p, LINK_ST_TESTED);

	if (p->paused || p->freeing)
		return false;
	if (coming > pool_waiting(p))
		return true;
	return pool_links_counted(p, POOL_SCOPE_POOL) < pool_size_limit(p);
}

/* ---- waiters ---- */

void
pool_waiter_init(struct pool_waiter *w, pool_ready_fn ready, link_cb_fn link_cb, void *ctx)
{
	memset(w, 0, sizeof(*w));
	list_node_init(&w->node);
	w->ready = ready;
	w->link_cb = link_cb;
	w->ctx = ctx;
}

/* Take <w> off the queue (the last one leaving withdraws the pool's published wait). */
void
pool_unqueue(struct pool_waiter *w)
{
	struct pool *p = w->pool;

	list_remove(&p->waiters, &w->node);
	w->pool = NULL;
	if (list_empty(&p->waiters))
		pool_wait_set(p, 0);
}

/*
 * Leave the queue (the session is going away); no callback follows. When the pool
 * published a wait (maybe this waiter's), the dispatch publishes the next one.
 */
void
pool_cancel_wait(struct pool_waiter *w)
{
	struct pool *p = w->pool;

	if (p == NULL)
		return;
	pool_unqueue(w);
	if (p->wait_since != 0)
		pool_kick(p);
}

/* Queue <w>: at the end, or an urgent one behind the urgent ones at the front. */
static void
pool_enqueue(struct pool *p, struct pool_waiter *w)
{
	struct list_node *n = &p->waiters.head;

	w->pool = p;
	if (!w->urgent) {
		list_push_back(&p->waiters, &w->node);
		return;
	}
	while (n->next != &p->waiters.head &&
	       container_of(n->next, struct pool_waiter, node)->urgent)
		n = n->next;
	list_insert_between(&p->waiters, &w->node, n, n->next);
}

struct pool_waiter *
pool_first_waiter(const struct pool *p)
{
	struct list_node *n = list_first(&p->waiters);

	return n != NULL ? container_of(n, struct pool_waiter, node) : NULL;
}

/* End every wait with <err>. */
static void
pool_fail_waiters(struct pool *p, const struct nk_error *err)
{
	struct pool_waiter *w;

	while ((w = pool_first_waiter(p)) != NULL) {
		pool_unqueue(w);
		w->ready(w, NULL, err);
	}
}

/* End the first wait with <err> (a replication login failed: the client it was for). */
static void
pool_fail_first_waiter(struct pool *p, const struct nk_error *err)
{
	struct pool_waiter *w = pool_first_waiter(p);

	if (w == NULL)
		return;
	pool_unqueue(w);
	w->ready(w, NULL, err);
}

/* fail_fast: the last attempt to connect failed; every waiter is told why (08001). */
static void
pool_fail_connect(struct pool *p)
{
	struct pool_waiter *w;
	struct nk_error err;

	nk_error_set(&err, ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
		     "%s", p->last_cause);
	while ((w = pool_first_waiter(p)) != NULL) {
		pool_unqueue(w);
		w->connect_failed = true;
		w->ready(w, NULL, &err);
	}
}

void
pool_set_fail_fast(struct pool *p, bool on)
{
	p->fail_fast = on;
}

/* ---- taking links ---- */

bool
pool_has_check_query(const struct pool *p)
{
	const char *q = p->cfg->srv.server_check_query;

	return q != NULL && q[0] != '\0';
}

/*
 * Does <l> need server_check_query before it is handed out? As in pgbouncer: when it was
 * released after a use with server_check_delay = 0, or has been idle for the delay. A link
 * that has just logged in (or served only a welcome) is not checked.
 */
static bool
pool_needs_check(const struct pool *p, const struct link *l, uint64_t now)
{
	uint64_t delay = pool_secs_to_us(p->cfg->srv.server_check_delay);

	if (!pool_has_check_query(p))
		return false;
	return delay == 0 ? l->check_after_use : now - l->idle_since_us >= delay;
}

/*
 * An idle link ready to hand out: LIFO (most recently used first) or, with
 * server_round_robin, FIFO. Obsolete and dirty links are closed on the way; stale ones are
 * sent to be checked (they come back through pool_on_test_done).
 */
static struct link *
pool_take_idle(struct pool *p)
{
	struct list *idle = &p->lists[LINK_ST_IDLE];
	uint64_t now = nk_now_us();
	struct list_node *n;
	struct link *l;

	while ((n = p->cfg->pool.server_round_robin ? list_last(idle) : list_first(idle)) != NULL) {
		l = container_of(n, struct link, node);
		if (l->taken_over && !pool_welcome_ready(p))
			return NULL;	/* pool_takeover.c: its own login brings the welcome */
		if (l->close_needed)
			link_close(l, true, "obsolete connection");
		else if (!l->ready || !sbuf_is_empty(&l->sb))
			link_close(l, true, "idle server got dirty");
		else if (pool_needs_check(p, l, now))
			link_start_test(l, LINK_TEST_CHECK, p->cfg->srv.server_check_query);
		else
			return l;
	}
	return NULL;
}

/* Hand <l> to the first waiter <w>. */
static void
pool_give(struct pool_waiter *w, struct link *l)
{
	pool_unqueue(w);
	link_activate(l, w->link_cb, w->ctx);
	w->ready(w, l, NULL);
}

/*
 * Start checks on used links and new connections for waiters nobody is coming for (not for
 * one that came after a client waiting elsewhere), then publish the first one left without.
 */
static void
pool_launch_for_waiters(struct pool *p)
{
	size_t want = pool_waiting(p);
	size_t coming = pool_count(p, LINK_ST_LOGIN) + pool_count(p, LINK_ST_TESTED);
	struct list_node *n, *wn;

	while (coming < want && (n = list_first(&p->lists[LINK_ST_USED])) != NULL) {
		link_start_test(container_of(n, struct link, node), LINK_TEST_CHECK,
				p->cfg->srv.server_check_query);
		coming++;
	}
	p->slot_blocked = false;
	wn = list_first(&p->waiters);
	for (size_t i = 0; wn != NULL && i < coming; i++)
		wn = list_next(&p->waiters, wn);
	while (coming < want && wn != NULL) {
		struct pool_waiter *w = container_of(wn, struct pool_waiter, node);

		if (!w->urgent && pool_wait_defers(p, w)) {
			p->slot_blocked = true;
			break;
		}
		if (!pool_launch(p, w))
			break;
		coming++;
		wn = list_next(&p->waiters, wn);
	}
	pool_wait_update(p, coming);
}

/* Give idle links to waiters, in order; then make sure links are coming for the rest. */
void
pool_dispatch(struct pool *p)
{
	struct pool_waiter *w;
	struct link *l;

	if (p->fail_pending) {		/* a connect failed (fail_fast): no waiting for a retry */
		p->fail_pending = false;
		pool_fail_connect(p);
		return;
	}
	if (p->paused || p->suspended)
		return;
	while ((w = pool_first_waiter(p)) != NULL && (l = pool_take_idle(p)) != NULL) {
		if (!w->urgent && pool_wait_yields(p, w->since_us) && pool_wait_shed(p))
			continue;	/* an idle link was closed for a client elsewhere */
		pool_give(w, l);
	}
	(void)pool_wait_give_up_idle(p);	/* no waiter here: an idle link may go elsewhere */
	if (!list_empty(&p->waiters) && !p->freeing)
		pool_launch_for_waiters(p);
}

static void
pool_dispatch_cb(evutil_socket_t fd, short what, void *arg)
{
	pool_dispatch(arg);
}

/* Run pool_dispatch from the loop. */
void
pool_kick(struct pool *p)
{
	if (!p->freeing)
		event_active(p->ev_dispatch, EV_TIMEOUT, 0);
}

/*
 * server_login_retry fast fail: no usable link and the last login failed. Not for a
 * replication client: its walsender is opened for it, after server_login_retry if need be
 * (pgbouncer).
 */
static bool
pool_check_fast_fail(struct pool *p, struct nk_error *err)
{
	if (!p->last_login_failed || pool_usable_links(p) > 0 || p->replication != NULL)
		return true;
	(void)pool_launch(p, NULL);
	return nk_error_set(err, ERRCODE_PROTOCOL_VIOLATION,
			    "server login has been failing, cached error: %s (server_login_retry)",
			    p->last_error);
}

/*
 * fail_fast: no usable link and the last attempt to connect failed less than
 * server_login_retry ago: fail now with its reason (after the interval the waiter queues and
 * a new attempt starts).
 */
static bool
pool_check_connect_failed(struct pool *p, struct pool_waiter *w, struct nk_error *err)
{
	uint64_t retry = pool_secs_to_us(p->cfg->srv.server_login_retry);

	if (!p->last_connect_failed || pool_usable_links(p) > 0 ||
	    nk_now_us() - p->last_connect_us >= retry)
		return true;
	w->connect_failed = true;
	return nk_error_set(err, ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
			    "%s", p->last_cause);
}

/* Get a link for <w>, for a welcome when <welcome>; see neki/pool.h. */
static enum pool_acquire_result
pool_acquire_for(struct pool *p, struct pool_waiter *w, bool welcome, struct link **out,
		 struct nk_error *err)
{
	struct link *l;

	NK_ASSERT(w->pool == NULL);
	*out = NULL;
	w->connect_failed = w->gave_up = false;
	if (p->freeing) {
		nk_error_set(err, ERRCODE_PROTOCOL_VIOLATION, "pooler is shutting down");
		return POOL_FAILED;
	}
	/* an idle link is not taken from a client waiting here or in another worker (but by
	 * an urgent one) */
	if (!p->paused && (w->urgent || (list_empty(&p->waiters) &&
					  !pool_wait_yields(p, nk_now_us())))) {
		l = pool_take_idle(p);
		if (l != NULL) {
			link_activate(l, w->link_cb, w->ctx);
			*out = l;
			return POOL_GOT;
		}
		if (p->fail_fast ? !pool_check_connect_failed(p, w, err) :
		    !welcome && !pool_check_fast_fail(p, err))
			return POOL_FAILED;
	}
	w->since_us = nk_now_us();
	pool_enqueue(p, w);
	pool_kick(p);
	return POOL_QUEUED;
}

enum pool_acquire_result
pool_acquire(struct pool *p, struct pool_waiter *w, struct link **out, struct nk_error *err)
{
	return pool_acquire_for(p, w, false, out, err);
}

enum pool_acquire_result
pool_acquire_welcome(struct pool *p, struct pool_waiter *w, struct link **out,
		     struct nk_error *err)
{
	return pool_acquire_for(p, w, true, out, err);
}

/* pool_adopt_link: see neki/pool.h. */
struct link *
pool_adopt_link(struct pool *p, int fd, struct proto_reader *r)
{
	struct link *l = p->freeing ? NULL : link_adopt(p, fd, r);

	if (l != NULL)
		pool_kick(p);
	return l;
}

/* ---- giving links back ---- */

/*
 * server_lifetime is over for <l>. Closes are spread: at most one per lifetime / pool_size,
 * so that a pool opened at once does not reconnect at once (0 = use each link once).
 */
bool
pool_life_over(struct pool *p, const struct link *l, uint64_t now)
{
	uint64_t life = pool_lifetime_us(p);
	int size = pool_size_limit(p);
	uint64_t gap = size > 0 ? life / (uint64_t)size : 0;

	if (now - l->connect_us < life)
		return false;
	return now - p->last_lifetime_close_us >= gap;
}

/* More links than pool_size and the reserve (urgent waiters were given some): globally. */
static bool
pool_over_size(const struct pool *p)
{
	return pool_links_counted(p, POOL_SCOPE_POOL) >
	       pool_size_limit(p) + (pool_reserve_size(p) > 0 ? pool_reserve_size(p) : 0);
}

/* Does releasing in this pool run server_reset_query? */
static bool
pool_wants_reset(const struct pool *p)
{
	const char *q = p->cfg->srv.server_reset_query;

	if (q == NULL || q[0] == '\0')
		return false;
	return p->cfg->srv.server_reset_query_always || pool_mode(p) == CFG_POOL_SESSION;
}

/* Give <l> back; see neki/pool.h. */
void
pool_release(struct link *l, const char *dirty_reason)
{
	struct pool *p = l->pool;
	uint64_t now = nk_now_us();

	if (l->state == LINK_ST_CLOSING)
		return;
	NK_ASSERT(l->state == LINK_ST_ACTIVE);
	sbuf_set_cork(&l->sb, SBUF_CORK_OFF);	/* a session's cork ends with its use */
	link_deactivate(l);
	if (dirty_reason == NULL && (!l->ready || l->tx_status != 'I' ||
				     !sbuf_is_empty(&l->sb) || sbuf_queued(&l->sb) > 0))
		dirty_reason = "client disconnect while server was not ready";
	if (dirty_reason != NULL) {
		link_close(l, true, dirty_reason);
	} else if (p->replication != NULL) {
		/* a walsender serves one client: never reused, as in pgbouncer */
		link_close(l, true, "replication client disconnected");
	} else if (l->cancel_ctx != NULL) {
		l->cancel_parked = true;	/* link_cancel_done() releases it again */
		link_log(l, LOG_LVL_DEBUG, "cancel in flight: kept out of the pool until it ends");
	} else if (pool_life_over(p, l, now)) {
		p->last_lifetime_close_us = now;
		link_close(l, true, "server lifetime over");
	} else if (l->close_needed) {
		link_close(l, true, "close_needed");
	} else if (p->paused) {
		link_close(l, true, "pause mode");
	} else if (pool_over_size(p)) {
		link_close(l, true, "pool over its size");
	} else if (l->reset_sql != NULL) {
		const char *sql = l->reset_sql;

		l->reset_sql = NULL;
		l->reset_then_pool = pool_wants_reset(p);
		link_start_test(l, LINK_TEST_RESET, sql);
	} else if (pool_wants_reset(p)) {
		link_start_test(l, LINK_TEST_RESET, p->cfg->srv.server_reset_query);
	} else {
		l->check_after_use = true;
		link_set_state(l, LINK_ST_IDLE);
		pool_kick(p);
	}
}

/* Give back a link that served only as the welcome; see neki/pool.h. */
void
pool_release_unused(struct link *l)
{
	struct pool *p = l->pool;
	uint64_t idle_since;

	if (l->state != LINK_ST_ACTIVE || l->close_needed || p->paused || !l->ready ||
	    l->tx_status != 'I' || !sbuf_is_empty(&l->sb) || sbuf_queued(&l->sb) > 0) {
		pool_release(l, NULL);
		return;
	}
	idle_since = l->idle_since_us;	/* not a use: its idle time goes on (check delay) */
	link_deactivate(l);
	link_set_state(l, LINK_ST_IDLE);
	l->idle_since_us = idle_since;
	pool_kick(p);
}

/* Give <l> back through <reset_sql>; see neki/pool.h. */
void
pool_release_reset(struct link *l, const char *reset_sql)
{
	l->reset_sql = reset_sql;	/* (kept while a cancel parks the link) */
	pool_release(l, NULL);
	if (l->state != LINK_ST_ACTIVE)
		l->reset_sql = NULL;	/* closed, or its reset started */
}

/* ---- hooks from link.c ---- */

/* Hook: <l> logged in; remember the welcome parameters, make it idle, serve waiters. */
void
pool_on_login_ok(struct link *l)
{
	struct pool *p = l->pool;

	if (p->fail_fast && p->last_connect_failed)
		log_info("%s/%s: connected to %s again", p->db_name, p->user_name, p->addr_str);
	p->probe = false;
	p->fail_logged_us = 0;
	p->last_connect_failed = false;
	p->last_login_failed = false;
	p->fail_pending = false;	/* another attempt failed meanwhile: this one serves */
	if (!p->welcome_ready && p->welcome == NULL && !l->close_needed)
		pool_save_welcome(p, l);	/* (not from a login older than a reset) */
	link_set_state(l, LINK_ST_IDLE);
	pool_connect_end(p);
	if (pool_takeover_login_ok(l))
		return;
	if (p->paused)
		link_close(l, true, "pause mode");
	pool_kick(p);
}

/*
 * fail_fast: an attempt failed. "could not connect" is logged once per server_login_retry
 * (the clients it fails are not logged one by one); a server that refused the connect (or
 * answered that it is starting up or shutting down, 57P03) is probed by the janitor.
 */
static void
pool_fail_fast_failed(struct pool *p, const struct nk_error *err)
{
	uint64_t now = nk_now_us();

	p->probe = err == NULL || strcmp(err->sqlstate, ERRCODE_CANNOT_CONNECT_NOW) == 0;
	if (p->fail_logged_us != 0 &&
	    now - p->fail_logged_us < pool_secs_to_us(p->cfg->srv.server_login_retry))
		return;
	p->fail_logged_us = now;
	log_warn("%s/%s: could not connect to %s: %s", p->db_name, p->user_name, p->addr_str,
		 p->last_cause);
}

/*
 * fail_fast: a server that refused the connect is tried again at every janitor tick, with
 * or without waiters, so the pool uses it as soon as it accepts logins rather than once
 * server_login_retry has run out; meanwhile clients still fail at once with its reason.
 */
void
pool_probe(struct pool *p)
{
	uint64_t last = p->last_connect_us;

	if (!p->fail_fast || !p->probe || !p->last_connect_failed || p->paused || p->freeing ||
	    pool_usable_links(p) > 0)
		return;
	p->last_connect_us = 0;		/* (the retry's clock: pool_launch starts it again) */
	if (!pool_launch(p, NULL))
		p->last_connect_us = last;
}

/*
 * A login failed. Remember it for server_login_retry; when the server itself refused us
 * (an ErrorResponse other than 57P03 "the database system is starting up"), every waiting
 * client gets that same error, as pgbouncer does; a refused walsender fails only the client
 * it was opened for (the first waiter; link.c made <err> "login failed"). A fail_fast pool
 * ends every wait after any failure (connect refused or timed out too), with the reason
 * (last_cause), from the loop.
 */
void
pool_on_login_failed(struct link *l, const struct nk_error *err, const char *reason)
{
	struct pool *p = l->pool;
	bool mismatch = err == NULL && strcmp(reason, LINK_TARGET_MISMATCH) == 0;
	bool keep = mismatch && p->last_login_failed;	/* a real failure's error stays cached */

	p->last_connect_failed = true;
	p->last_login_failed = true;
	if (err == NULL)
		pool_host_failed(p, l->host_idx);
	if (keep)
		return;
	if (snprintf(p->last_error, sizeof(p->last_error), "%s",
		     err != NULL ? err->message : reason) >= (int)sizeof(p->last_error))
		log_debug("cached login error truncated");
	snprintf(p->last_cause, sizeof(p->last_cause), "%s", err != NULL ? err->message :
		 p->connect_errno_text[0] != '\0' ? p->connect_errno_text : reason);
	p->connect_errno_text[0] = '\0';
	if (p->freeing)
		return;
	if (p->fail_fast) {
		pool_fail_fast_failed(p, err);
		p->fail_pending = true;	/* from the loop: this may run inside pool_acquire() */
		pool_kick(p);
	} else if (err != NULL && p->replication != NULL) {
		pool_fail_first_waiter(p, err);
	} else if (err != NULL && strcmp(err->sqlstate, ERRCODE_CANNOT_CONNECT_NOW) != 0) {
		pool_fail_waiters(p, err);
	}
}

/* Hook: the check/reset query of <l> succeeded; it is idle and needs no check. */
void
pool_on_test_done(struct link *l)
{
	if (l->reset_then_pool) {	/* pool_release_reset(): the pool's own reset next */
		l->reset_then_pool = false;
		link_start_test(l, LINK_TEST_RESET, l->pool->cfg->srv.server_reset_query);
		return;
	}
	l->check_after_use = false;
	link_set_state(l, LINK_ST_IDLE);
	if (l->pool->paused)
		link_close(l, true, "pause mode");
	pool_kick(l->pool);
}

/* Hook: <l> closed; give back its limits slot, reap it and serve waiters from the loop. */
void
pool_on_link_closed(struct link *l)
{
	struct pool *p = l->pool;

	if (l->counted) {
		p->limits->release(p->limits_ctx, p->db_name, p->user_name);
		l->counted = false;
		pool_wait_slot_freed(p);
	}
	pool_connect_end(p);	/* (when it was the link logging in) */
	if (!p->freeing) {
		event_active(p->ev_reap, EV_TIMEOUT, 0);
		pool_kick(p);
	}
}

/* Free the links that closed since the last reap. */
static void
pool_reap(struct pool *p)
{
	struct list_node *n;

	while ((n = list_first(&p->lists[LINK_ST_CLOSING])) != NULL)
		link_free(container_of(n, struct link, node));
}

static void
pool_reap_cb(evutil_socket_t fd, short what, void *arg)
{
	pool_reap(arg);
}

/* ---- creation ---- */

static char *
pool_strdup(const char *s)
{
	return s != NULL ? strdup(s) : NULL;
}

/* Create a pool; see neki/pool.h. */
struct pool *
pool_new(struct event_base *base, const struct pool_conf *pc, struct nk_error *err)
{
	struct pool *p = calloc(1, sizeof(*p));
	struct timeval tv = { 0, POOL_JANITOR_US };

	if (p == NULL) {
		nk_error_oom(err);
		return NULL;
	}
	for (int i = 0; i < LINK_ST_COUNT; i++)
		list_init(&p->lists[i]);
	list_init(&p->waiters);
	list_push_back(&pool_all, &p->all_node);
	p->base = base;
	p->cfg = pc->cfg;
	p->db = pc->db;
	p->user = pc->user;
	p->limits = pc->limits;
	p->limits_ctx = pc->limits_ctx;
	p->dns = pc->dns;
	sbuf_opts_from_cfg(&p->sbuf_opts, pc->cfg);
	p->db_name = strdup(pc->db_name);
	p->user_name = strdup(pc->user_name);
	p->password = pool_strdup(pc->password);
	p->replication = pool_strdup(pc->replication);
	if (pc->startup_len > 0 && (p->startup = malloc(pc->startup_len)) != NULL) {
		memcpy(p->startup, pc->startup, pc->startup_len);
		p->startup_len = pc->startup_len;
	}
	if (pc->scram_keys != NULL)
		p->scram_keys = *pc->scram_keys;
	p->ev_janitor = event_new(base, -1, EV_PERSIST, pool_janitor_cb, p);
	p->ev_dispatch = event_new(base, -1, 0, pool_dispatch_cb, p);
	p->ev_reap = event_new(base, -1, 0, pool_reap_cb, p);
	if (p->db_name == NULL || p->user_name == NULL || (pc->password && !p->password) ||
	    (pc->replication && !p->replication) || (pc->startup_len > 0 && !p->startup) ||
	    p->ev_janitor == NULL || p->ev_dispatch == NULL || p->ev_reap == NULL) {
		nk_error_oom(err);
		goto fail;
	}
	if (!pool_resolve(p, err))
		goto fail;
	event_add(p->ev_janitor, &tv);
	return p;
fail:
	pool_free(p);
	return NULL;
}

/*
 * New configuration after a reload. The old entries must still be valid during the call:
 * when the database entry changed in a way that makes links stale (host, port, dbname,
 * user, connect_query, ...), the host list is rebuilt and every link is marked close_needed
 * (idle ones close now, "database configuration changed"; others at release).
 */
void
pool_reconfigure(struct pool *p, const struct cfg *cfg, const struct cfg_database *db,
		 const struct cfg_user *user)
{
	bool stale = cfg_database_needs_reconnect(p->db, db) ||
		     strcmp(p->cfg->proc.unix_socket_dir ? p->cfg->proc.unix_socket_dir : "",
			    cfg->proc.unix_socket_dir ? cfg->proc.unix_socket_dir : "") != 0;

	p->cfg = cfg;
	p->db = db;
	p->user = user;
	sbuf_opts_from_cfg(&p->sbuf_opts, cfg);
	if (!stale)
		return;
	pool_rehost(p);
	pool_reconnect(p);
}

/* Remember SCRAM pass-through keys for future logins. */
void
pool_set_scram_keys(struct pool *p, const struct scram_keys *keys)
{
	p->scram_keys = *keys;
}

/* One more client uses <p> (min_pool_size applies). */
void
pool_client_attach(struct pool *p)
{
	p->n_clients++;
}

/* One client fewer. */
void
pool_client_detach(struct pool *p)
{
	NK_ASSERT(p->n_clients > 0);
	p->n_clients--;
}

/*
 * RECONNECT, and every reset of the pool (changed connection settings, server TLS): as
 * pgbouncer's tag_pool_dirty, the welcome is forgotten, links logging in are closed now
 * ("connect string changed", a failed login) and every other link at its next release; idle
 * ones now. A routed shard's pool (fail_fast) lets its logins finish instead, so that its
 * waiters are not failed for the reset: they are closed once logged in (close_needed), and
 * give no welcome.
 */
void
pool_reconnect(struct pool *p)
{
	struct list_node *n;

	welcome_forget(p);
	while (!p->fail_fast && (n = list_first(&p->lists[LINK_ST_LOGIN])) != NULL)
		link_close(container_of(n, struct link, node), true, "connect string changed");
	for (int st = LINK_ST_LOGIN; st < LINK_ST_CLOSING; st++) {
		for (n = list_first(&p->lists[st]); n != NULL; n = list_next(&p->lists[st], n))
			link_set_close_needed(container_of(n, struct link, node));
	}
	pool_check_list(p, LINK_ST_IDLE, nk_now_us());
	pool_check_list(p, LINK_ST_USED, nk_now_us());
}

size_t
pool_object_size(void)
{
	return sizeof(struct pool);
}

size_t
pool_link_object_size(void)
{
	return sizeof(struct link);
}

/* PAUSE / RESUME; see neki/pool.h. */
void
pool_pause(struct pool *p, bool on)
{
	if (p->paused == on)
		return;
	p->paused = on;
	if (on) {
		pool_wait_set(p, 0);	/* paused waiters take no link from elsewhere */
		pool_check_list(p, LINK_ST_IDLE, nk_now_us());
		pool_check_list(p, LINK_ST_USED, nk_now_us());
	} else {
		pool_kick(p);
	}
}

bool
pool_is_paused(const struct pool *p)
{
	return p->paused;
}

size_t
pool_link_total(const struct pool *p)
{
	size_t n = 0;

	for (int st = LINK_ST_LOGIN; st < LINK_ST_CLOSING; st++)
		n += list_count(&p->lists[st]);
	return n;
}

size_t
pool_close_needed_count(const struct pool *p)
{
	size_t n = 0;

	for (int st = LINK_ST_LOGIN; st < LINK_ST_CLOSING; st++) {
		for (struct list_node *ln = list_first(&p->lists[st]); ln != NULL;
		     ln = list_next(&p->lists[st], ln))
			n += container_of(ln, struct link, node)->close_needed;
	}
	return n;
}

void
pool_fail_waiting(struct pool *p, const char *msg)
{
	struct nk_error err;

	nk_error_set(&err, ERRCODE_PROTOCOL_VIOLATION, "%s", msg);
	pool_fail_waiters(p, &err);
}

/* KILL: close every link now; clients holding one get LINK_EV_BROKEN with <reason>. */
void
pool_close_all(struct pool *p, const char *reason)
{
	struct list_node *n;

	for (int st = LINK_ST_LOGIN; st < LINK_ST_CLOSING; st++) {
		while ((n = list_first(&p->lists[st])) != NULL)
			link_break(container_of(n, struct link, node), reason);
	}
}

/* How long the longest waiting client has waited, in microseconds (0 when none). */
uint64_t
pool_max_wait_us(const struct pool *p)
{
	struct pool_waiter *w = pool_first_waiter(p);

	return w != NULL ? nk_now_us() - w->since_us : 0;
}

/* Shut the pool down; see neki/pool.h. */
void
pool_free(struct pool *p)
{
	struct nk_error err;
	struct list_node *n;

	if (p == NULL)
		return;
	list_remove(&pool_all, &p->all_node);
	p->freeing = true;
	nk_error_set(&err, ERRCODE_PROTOCOL_VIOLATION, "pooler is shutting down");
	pool_fail_waiters(p, &err);
	for (int st = LINK_ST_LOGIN; st < LINK_ST_CLOSING; st++) {
		while ((n = list_first(&p->lists[st])) != NULL)
			link_break(container_of(n, struct link, node), "pooler is shutting down");
	}
	pool_reap(p);
	if (p->ev_janitor != NULL)
		event_free(p->ev_janitor);
	if (p->ev_dispatch != NULL)
		event_free(p->ev_dispatch);
	if (p->ev_reap != NULL)
		event_free(p->ev_reap);
	welcome_free(p);
	free(p->db_name);
	free(p->user_name);
	pool_free_hosts(p->hosts, p->nhosts);
	free(p->password);
	free(p->replication);
	free(p->startup);
	memset(&p->scram_keys, 0, sizeof(p->scram_keys));
	free(p);
}
