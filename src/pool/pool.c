/*
 * pool.c - a pool of backend links per (database, user) inside one worker.
 *
 * Decides when links are opened (pool_launch: global limits, reserve pool, server_login_retry),
 * handed out (pool_acquire / pool_dispatch: idle LIFO or FIFO, check before reuse), given back
 * (pool_release: dirty close, lifetime, close_needed, reset query) and closed by the janitor
 * (lifetime, idle timeout, check delay, query_wait_timeout, min_pool_size). Links report back
 * through the pool_on_*() hooks. Session callbacks run from ev_dispatch, never inside the
 * session's own call into the pool.
 *
 * Also here: process-local limits (pool_limits_local_*), used by tests and single-process runs.
 */
#include "neki/base.h"
#include "neki/pool.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>

#include <event2/event.h>

#include "neki/intern.h"
#include "neki/log.h"
#include "pool_int.h"

/* Janitor period: coarse timeouts (idle, lifetime, waits) are checked this often. */
#define POOL_JANITOR_US 250000

/* Every pool of this process (a worker's pools), for eviction across pools. */
static struct list pool_all = { { &pool_all.head, &pool_all.head }, 0 };

/* Monotonic clock in microseconds. */
uint64_t
pool_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static uint64_t
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
	return p->cfg->default_pool_size;
}

static int
pool_reserve_size(const struct pool *p)
{
	if (p->user != NULL && p->user->reserve_pool_size >= 0)
		return p->user->reserve_pool_size;
	if (p->db->reserve_pool_size >= 0)
		return p->db->reserve_pool_size;
	return p->cfg->reserve_pool_size;
}

static int
pool_min_size(const struct pool *p)
{
	if (p->replication != NULL)
		return 0;	/* walsenders are opened for a client, never kept in advance */
	return p->db->min_pool_size >= 0 ? p->db->min_pool_size : p->cfg->min_pool_size;
}

static int
pool_db_max(const struct pool *p)
{
	return p->db->max_db_connections > 0 ? p->db->max_db_connections :
	       p->cfg->max_db_connections;
}

static int
pool_user_max(const struct pool *p)
{
	if (p->user != NULL && p->user->max_user_connections > 0)
		return p->user->max_user_connections;
	return p->cfg->max_user_connections;
}

static uint64_t
pool_lifetime_us(const struct pool *p)
{
	double s = p->db->server_lifetime >= 0 ? p->db->server_lifetime : p->cfg->server_lifetime;

	return pool_secs_to_us(s);
}

static double
pool_query_wait_timeout(const struct pool *p)
{
	if (p->user != NULL && p->user->query_wait_timeout >= 0)
		return p->user->query_wait_timeout;
	if (p->db->query_wait_timeout >= 0)
		return p->db->query_wait_timeout;
	return p->cfg->query_wait_timeout;
}

/* pool_mode for this pool. */
enum cfg_pool_mode
pool_mode(const struct pool *p)
{
	if (p->user != NULL && p->user->pool_mode != CFG_POOL_UNSET)
		return p->user->pool_mode;
	if (p->db->pool_mode != CFG_POOL_UNSET)
		return p->db->pool_mode;
	return p->cfg->pool_mode;
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

static bool welcome_take_shared(struct pool *p);

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
static size_t
pool_usable_links(const struct pool *p)
{
	return pool_count(p, LINK_ST_IDLE) + pool_count(p, LINK_ST_USED) +
	       pool_count(p, LINK_ST_TESTED) + pool_count(p, LINK_ST_ACTIVE);
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
static void
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

/* fail_fast: the last attempt to connect failed; every waiter is told why (08001). */
static void
pool_fail_connect(struct pool *p)
{
	struct pool_waiter *w;
	struct nk_error err;

	nk_error_set(&err, "08001", "%s", p->last_cause);
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

/* Does <l> need server_check_query before it is handed out? */
static bool
pool_needs_check(const struct pool *p, const struct link *l, uint64_t now)
{
	const char *q = p->cfg->server_check_query;

	if (q == NULL || q[0] == '\0' || l->fresh)
		return false;
	return now - l->idle_since_us >= pool_secs_to_us(p->cfg->server_check_delay);
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
	uint64_t now = pool_now_us();
	struct list_node *n;
	struct link *l;

	while ((n = p->cfg->server_round_robin ? list_last(idle) : list_first(idle)) != NULL) {
		l = container_of(n, struct link, node);
		if (l->close_needed)
			link_close(l, true, "obsolete connection");
		else if (!l->ready || !sbuf_is_empty(&l->sb))
			link_close(l, true, "idle server got dirty");
		else if (pool_needs_check(p, l, now))
			link_start_test(l, LINK_TEST_CHECK, p->cfg->server_check_query);
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

/* Has the first waiter waited reserve_pool_timeout? */
static bool
pool_reserve_allowed(const struct pool *p)
{
	struct pool_waiter *w = pool_first_waiter(p);
	uint64_t tmo = pool_secs_to_us(p->cfg->reserve_pool_timeout);

	if (w == NULL || tmo == 0 || pool_reserve_size(p) <= 0)
		return false;
	return pool_now_us() - w->since_us >= tmo;
}

/* Take one slot of the global limits for a new link with pool limit <max>. */
static bool
pool_try_slot(struct pool *p, int max)
{
	return p->limits->try_acquire(p->limits_ctx, p->db_name, p->user_name, max,
				      pool_db_max(p), pool_user_max(p));
}

/* Which other pools of this worker an eviction may take an unused link from. */
enum pool_evict_from {
	EVICT_SAME_DB,			/* under max_db_connections */
	EVICT_SAME_USER,		/* under max_user_connections */
	EVICT_SAME_PAIR,		/* the pools counted as one (a replication pool and the
					 * ordinary pool of its database and user) */
};

static bool
pool_evict_matches(const struct pool *q, const struct pool *self, enum pool_evict_from from)
{
	bool db = strcmp(q->db_name, self->db_name) == 0;
	bool user = strcmp(q->user_name, self->user_name) == 0;

	return q != self && (from == EVICT_SAME_DB ? db : from == EVICT_SAME_USER ? user :
			     db && user && (q->replication == NULL) != (self->replication == NULL));
}

/*
 * Close the oldest unused link of another pool of this worker that <from> names, to make
 * room under the limit they share (pgbouncer's eviction). Returns true when one was closed.
 */
static bool
pool_evict_one(struct pool *self, enum pool_evict_from from)
{
	struct list_node *n;
	struct pool *q;

	for (n = list_first(&pool_all); n != NULL; n = list_next(&pool_all, n)) {
		q = container_of(n, struct pool, all_node);
		if (!pool_evict_matches(q, self, from))
			continue;
		for (int st = LINK_ST_USED; st >= LINK_ST_IDLE; st--) {
			struct list_node *ln = list_last(&q->lists[st]);

			if (ln != NULL) {
				link_close(container_of(ln, struct link, node), true, "evicted");
				return true;
			}
		}
	}
	return false;
}

/*
 * A slot for one more link: within pool_size, else within the reserve pool once the first
 * waiter waited reserve_pool_timeout; when the pool's own count is full, evict an unused
 * link of the pool counted with it (a replication client takes the room of an idle
 * ordinary link, as in pgbouncer); when only the database or user limit stands in the way,
 * evict an unused link of a sibling pool first.
 */
static bool
pool_take_slot(struct pool *p)
{
	int size = pool_size_limit(p);
	int max = size;

	if (pool_try_slot(p, size))
		return true;
	if (pool_reserve_allowed(p)) {
		max = size + pool_reserve_size(p);
		if (pool_try_slot(p, max)) {
			struct pool_waiter *w = pool_first_waiter(p);

			if (w->log != NULL)
				w->log(w, LOG_LVL_WARNING, "taking connection from reserve_pool");
			else
				log_warn("C-%p: %s/%s taking connection from reserve_pool", w->ctx,
					 p->db_name, p->user_name);
			return true;
		}
	}
	if (p->limits->count(p->limits_ctx, p->db_name, p->user_name) >= max)
		return pool_evict_one(p, EVICT_SAME_PAIR) && pool_try_slot(p, max);
	if ((pool_db_max(p) > 0 && pool_evict_one(p, EVICT_SAME_DB)) ||
	    (pool_user_max(p) > 0 && pool_evict_one(p, EVICT_SAME_USER)))
		return pool_try_slot(p, max);
	return false;
}

/*
 * Open one more link if server_login_retry and the global limits allow it. Returns true when
 * a link was started.
 */
static bool
pool_launch(struct pool *p)
{
	uint64_t now = pool_now_us();
	uint64_t retry = pool_secs_to_us(p->cfg->server_login_retry);
	struct link *l;

	if (p->last_connect_failed && now - p->last_connect_us < retry) {
		log_debug("launch_new_connection: last failed, not launching new connection yet, "
			  "still waiting %llu s",
			  (unsigned long long)((retry - (now - p->last_connect_us)) / 1000000));
		return false;
	}
	if (!pool_take_slot(p)) {
		log_debug("launch_new_connection: pool full for %s/%s", p->db_name, p->user_name);
		p->slot_blocked = true;
		return false;
	}
	p->last_connect_us = now;
	l = link_new(p);
	if (l == NULL) {
		p->limits->release(p->limits_ctx, p->db_name, p->user_name);
		return false;
	}
	log_debug("launching new connection to server %s for %s/%s", p->addr_str, p->db_name,
		  p->user_name);
	return true;
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
				p->cfg->server_check_query);
		coming++;
	}
	p->slot_blocked = false;
	wn = list_first(&p->waiters);
	for (size_t i = 0; wn != NULL && i < coming; i++)
		wn = list_next(&p->waiters, wn);
	while (coming < want && wn != NULL) {
		if (pool_wait_defers(p, container_of(wn, struct pool_waiter, node))) {
			p->slot_blocked = true;
			break;
		}
		if (!pool_launch(p))
			break;
		coming++;
		wn = list_next(&p->waiters, wn);
	}
	pool_wait_update(p, coming);
}

/* Give idle links to waiters, in order; then make sure links are coming for the rest. */
static void
pool_dispatch(struct pool *p)
{
	struct pool_waiter *w;
	struct link *l;

	if (p->fail_pending) {		/* a connect failed (fail_fast): no waiting for a retry */
		p->fail_pending = false;
		pool_fail_connect(p);
		return;
	}
	if (p->paused)
		return;
	while ((w = pool_first_waiter(p)) != NULL && (l = pool_take_idle(p)) != NULL) {
		if (pool_wait_yields(p, w->since_us) && pool_wait_shed(p))
			continue;	/* an idle link was closed for a client elsewhere */
		pool_give(w, l);
	}
	(void)pool_wait_shed(p);	/* no waiter here: an idle link may go elsewhere */
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

/* server_login_retry fast fail: no usable link and the last login failed. */
static bool
pool_check_fast_fail(struct pool *p, struct nk_error *err)
{
	if (!p->last_login_failed || pool_usable_links(p) > 0)
		return true;
	(void)pool_launch(p);
	return nk_error_set(err, "08P01",
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
	uint64_t retry = pool_secs_to_us(p->cfg->server_login_retry);

	if (!p->last_connect_failed || pool_usable_links(p) > 0 ||
	    pool_now_us() - p->last_connect_us >= retry)
		return true;
	w->connect_failed = true;
	return nk_error_set(err, "08001", "%s", p->last_cause);
}

/* Get a link for <w>; see neki/pool.h. */
enum pool_acquire_result
pool_acquire(struct pool *p, struct pool_waiter *w, struct link **out, struct nk_error *err)
{
	struct link *l;

	NK_ASSERT(w->pool == NULL);
	*out = NULL;
	w->connect_failed = false;
	if (p->freeing) {
		nk_error_set(err, "08P01", "pooler is shutting down");
		return POOL_FAILED;
	}
	/* an idle link is not taken from a client waiting in another worker */
	if (list_empty(&p->waiters) && !p->paused && !pool_wait_yields(p, pool_now_us())) {
		l = pool_take_idle(p);
		if (l != NULL) {
			link_activate(l, w->link_cb, w->ctx);
			*out = l;
			return POOL_GOT;
		}
		if (p->fail_fast ? !pool_check_connect_failed(p, w, err) :
		    !pool_check_fast_fail(p, err))
			return POOL_FAILED;
	}
	w->since_us = pool_now_us();
	w->pool = p;
	list_push_back(&p->waiters, &w->node);
	pool_kick(p);
	return POOL_QUEUED;
}

/* ---- giving links back ---- */

/*
 * server_lifetime is over for <l>. Closes are spread: at most one per lifetime / pool_size,
 * so that a pool opened at once does not reconnect at once (0 = use each link once).
 */
static bool
pool_life_over(struct pool *p, const struct link *l, uint64_t now)
{
	uint64_t life = pool_lifetime_us(p);
	int size = pool_size_limit(p);
	uint64_t gap = size > 0 ? life / (uint64_t)size : 0;

	if (now - l->connect_us < life)
		return false;
	return now - p->last_lifetime_close_us >= gap;
}

/* Does releasing in this pool run server_reset_query? */
static bool
pool_wants_reset(const struct pool *p)
{
	const char *q = p->cfg->server_reset_query;

	if (q == NULL || q[0] == '\0')
		return false;
	return p->cfg->server_reset_query_always || pool_mode(p) == CFG_POOL_SESSION;
}

/* Give <l> back; see neki/pool.h. */
void
pool_release(struct link *l, const char *dirty_reason)
{
	struct pool *p = l->pool;
	uint64_t now = pool_now_us();

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
	} else if (l->reset_sql != NULL) {
		const char *sql = l->reset_sql;

		l->reset_sql = NULL;
		l->reset_then_pool = pool_wants_reset(p);
		link_start_test(l, LINK_TEST_RESET, sql);
	} else if (pool_wants_reset(p)) {
		link_start_test(l, LINK_TEST_RESET, p->cfg->server_reset_query);
	} else {
		link_set_state(l, LINK_ST_IDLE);
		pool_kick(p);
	}
}

/* Give back a link that served only as the welcome; see neki/pool.h. */
void
pool_release_unused(struct link *l)
{
	struct pool *p = l->pool;

	if (l->state != LINK_ST_ACTIVE || l->close_needed || p->paused || !l->ready ||
	    l->tx_status != 'I' || !sbuf_is_empty(&l->sb) || sbuf_queued(&l->sb) > 0) {
		pool_release(l, NULL);
		return;
	}
	link_deactivate(l);
	link_set_state(l, LINK_ST_IDLE);
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

#define WELCOME_SHARE_MAX 4096	/* bytes of a welcome shared across processes */

static void
welcome_free(struct pool *p)
{
	for (size_t i = 0; i < p->nwelcome; i++) {
		free(p->welcome[i].name);
		intern_unref(p->welcome[i].value);
	}
	free(p->welcome);
	p->welcome = NULL;
	p->nwelcome = 0;
}

/* Append <name> = <value> to the welcome being built (p->welcome has room for it). */
static bool
welcome_add(struct pool *p, const char *name, const char *value)
{
	struct link_param *w = &p->welcome[p->nwelcome];

	w->name = strdup(name);
	w->value = w->name != NULL ? intern_ref(value) : NULL;
	if (w->value == NULL) {
		free(w->name);
		return false;
	}
	p->nwelcome++;
	return true;
}

/* Publish the saved welcome for the other processes' pools of the same pair. */
static void
welcome_publish(const struct pool *p)
{
	char buf[WELCOME_SHARE_MAX];
	size_t len = 0;

	if (p->limits->welcome_publish == NULL)
		return;
	for (size_t i = 0; i < p->nwelcome; i++) {
		size_t nl = strlen(p->welcome[i].name) + 1, vl = strlen(p->welcome[i].value) + 1;

		if (len + nl + vl > sizeof(buf))
			return;		/* (too long to share: each process learns its own) */
		memcpy(buf + len, p->welcome[i].name, nl);
		memcpy(buf + len + nl, p->welcome[i].value, vl);
		len += nl + vl;
	}
	p->limits->welcome_publish(p->limits_ctx, buf, len);
}

/* The welcome another process published, taken as this pool's; false when none. */
static bool
welcome_take_shared(struct pool *p)
{
	char buf[WELCOME_SHARE_MAX];
	size_t len, n = 0;

	if (p->welcome != NULL || p->limits->welcome_fetch == NULL ||
	    (len = p->limits->welcome_fetch(p->limits_ctx, buf, sizeof(buf))) == 0 ||
	    buf[len - 1] != '\0')
		return false;
	for (size_t i = 0; i < len; i++)
		n += buf[i] == '\0';
	if (n % 2 != 0 || (p->welcome = calloc(n / 2 + 1, sizeof(*p->welcome))) == NULL)
		return false;
	for (size_t at = 0; at < len;) {	/* (an even count of NULs, the last one last) */
		const char *name = buf + at, *value = name + strlen(name) + 1;

		at = (size_t)(value - buf) + strlen(value) + 1;
		if (!welcome_add(p, name, value)) {
			welcome_free(p);
			return false;
		}
	}
	p->welcome_ready = true;
	return true;
}

/* Copy the first login's parameters as the pool's welcome message. */
static void
pool_save_welcome(struct pool *p, const struct link *l)
{
	size_t n = link_param_count(l);
	const char *name, *value;

	p->welcome = calloc(n ? n : 1, sizeof(*p->welcome));
	if (p->welcome == NULL)
		return;
	for (size_t i = 0; i < n; i++) {
		link_param_at(l, i, &name, &value);
		if (!welcome_add(p, name, value))
			return;	/* keep what we have; welcome_ready stays false */
	}
	p->welcome_ready = true;
	welcome_publish(p);
}

/* Hook: <l> logged in; remember the welcome parameters, make it idle, serve waiters. */
void
pool_on_login_ok(struct link *l)
{
	struct pool *p = l->pool;

	p->last_connect_failed = false;
	p->last_login_failed = false;
	p->fail_pending = false;	/* another attempt failed meanwhile: this one serves */
	if (!p->welcome_ready && p->welcome == NULL)
		pool_save_welcome(p, l);
	link_set_state(l, LINK_ST_IDLE);
	if (p->paused)
		link_close(l, true, "pause mode");
	pool_kick(p);
}

/*
 * A login failed. Remember it for server_login_retry; when the server itself refused us
 * (an ErrorResponse other than 57P03 "the database system is starting up"), every waiting
 * client gets that same error, as pgbouncer does. A fail_fast pool ends every wait after any
 * failure (connect refused or timed out too), with the reason (last_cause), from the loop.
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
		p->fail_pending = true;	/* from the loop: this may run inside pool_acquire() */
		pool_kick(p);
	} else if (err != NULL && strcmp(err->sqlstate, "57P03") != 0) {
		pool_fail_waiters(p, err);
	}
}

/* Hook: the check/reset query of <l> succeeded; it is idle and fresh. */
void
pool_on_test_done(struct link *l)
{
	if (l->reset_then_pool) {	/* pool_release_reset(): the pool's own reset next */
		l->reset_then_pool = false;
		link_start_test(l, LINK_TEST_RESET, l->pool->cfg->server_reset_query);
		return;
	}
	l->fresh = true;
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

/* ---- janitor ---- */

/* Lifetime, idle timeout and check delay of one idle or used link. */
static void
pool_check_unused(struct pool *p, struct link *l, uint64_t now)
{
	uint64_t idle_tmo = pool_secs_to_us(p->cfg->server_idle_timeout);
	int min = pool_min_size(p);

	if (l->close_needed) {
		link_close(l, true, "database configuration changed");	/* pgbouncer's janitor */
	} else if (p->paused) {
		link_close(l, true, "pause mode");
	} else if (pool_life_over(p, l, now)) {
		p->last_lifetime_close_us = now;
		link_close(l, true, "server lifetime over");
	} else if (idle_tmo > 0 && now - l->idle_since_us >= idle_tmo &&
		   (min == 0 || (int)pool_usable_links(p) > min)) {
		link_close(l, true, "server idle timeout");
	} else if (l->state == LINK_ST_IDLE && pool_needs_check(p, l, now)) {
		link_set_state(l, LINK_ST_USED);
	}
}

/* Walk a list safely while entries may leave it. */
static void
pool_check_list(struct pool *p, enum link_state st, uint64_t now)
{
	struct list_node *n = list_first(&p->lists[st]), *next;

	while (n != NULL) {
		next = list_next(&p->lists[st], n);
		pool_check_unused(p, container_of(n, struct link, node), now);
		n = next;
	}
}

/* query_wait_timeout: fail clients that waited too long for a link. */
static void
pool_check_waiters(struct pool *p, uint64_t now)
{
	uint64_t tmo = pool_secs_to_us(pool_query_wait_timeout(p));
	struct pool_waiter *w;
	struct nk_error err;

	if (tmo == 0)
		return;
	while ((w = pool_first_waiter(p)) != NULL && now - w->since_us >= tmo) {
		pool_unqueue(w);
		nk_error_set(&err, "08P01", "query_wait_timeout");
		w->ready(w, NULL, &err);
	}
}

/* min_pool_size: keep that many links while clients use the pool or the user is forced. */
static void
pool_check_min_size(struct pool *p)
{
	int min = pool_min_size(p);
	bool wanted = p->n_clients > 0 || (p->db->user != NULL && p->db->user[0] != '\0');

	if (min <= 0 || !wanted || pool_count(p, LINK_ST_LOGIN) > 0 || pool_wait_defers(p, NULL))
		return;
	if (p->limits->count(p->limits_ctx, p->db_name, p->user_name) >= min)
		return;
	if (p->limits->count(p->limits_ctx, p->db_name, p->user_name) >= pool_size_limit(p))
		return;
	log_debug("launching new connection to satisfy min_pool_size for %s/%s", p->db_name,
		  p->user_name);
	(void)pool_launch(p);
}

static void
pool_janitor_cb(evutil_socket_t fd, short what, void *arg)
{
	struct pool *p = arg;
	uint64_t now = pool_now_us();

	pool_check_list(p, LINK_ST_IDLE, now);
	pool_check_list(p, LINK_ST_USED, now);
	pool_check_waiters(p, now);
	if (!p->paused)
		pool_check_min_size(p);
	p->shed_for = 0;	/* one more idle link may go to the same client elsewhere */
	if (!list_empty(&p->waiters))
		pool_dispatch(p);
	else
		(void)pool_wait_shed(p);
}

/* ---- creation ---- */

/* A unix socket directory <h>: "<dir>/.s.PGSQL.<port>". */
static bool
pool_host_unix(struct pool_host *h, int port, struct nk_error *err)
{
	struct sockaddr_un *sun = (struct sockaddr_un *)&h->addr;

	sun->sun_family = AF_UNIX;
	if (snprintf(sun->sun_path, sizeof(sun->sun_path), "%s/.s.PGSQL.%d", h->name,
		     port) >= (int)sizeof(sun->sun_path))
		return nk_error_set(err, "08P01", "unix socket path too long: \"%s\"", h->name);
	h->addrlen = sizeof(*sun);
	h->resolved = true;
	snprintf(h->label, sizeof(h->label), "unix:%d", port);
	return true;
}

/* A numeric address, or (without a resolver) a name resolved once, here, with getaddrinfo. */
static bool
pool_host_inet(struct pool *p, struct pool_host *h, struct nk_error *err)
{
	struct addrinfo hints, *res = NULL;
	char sport[16];

	snprintf(h->label, sizeof(h->label), strchr(h->name, ':') ? "[%.80s]:%d" : "%.80s:%d",
		 h->name, h->port);
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = p->dns != NULL ? AI_NUMERICHOST : 0;
	snprintf(sport, sizeof(sport), "%d", h->port);
	if (getaddrinfo(h->name, sport, &hints, &res) != 0 || res == NULL) {
		if (p->dns != NULL)
			return true;	/* a name: resolved per connection through p->dns */
		return nk_error_set(err, "08P01", "could not resolve host \"%s\"", h->name);
	}
	memcpy(&h->addr, res->ai_addr, res->ai_addrlen);
	h->addrlen = res->ai_addrlen;
	h->resolved = true;
	freeaddrinfo(res);
	return true;
}

/*
 * The database's hosts: a comma list of names, addresses and unix socket directories; no
 * host means unix_socket_dir. pgbouncer's order and port rules.
 */
static bool
pool_resolve(struct pool *p, struct nk_error *err)
{
	const char *list = p->db->host;
	size_t n = 1, len;
	struct pool_host *h;

	p->port = p->db->port > 0 ? p->db->port : 5432;
	if (list == NULL || list[0] == '\0')
		list = p->cfg->unix_socket_dir;
	if (list == NULL || list[0] == '\0')
		return nk_error_set(err, "08P01", "database \"%s\" has no host and "
				    "unix_socket_dir is empty", p->db_name);
	for (const char *c = list; *c != '\0'; c++)
		n += *c == ',';
	p->hosts = calloc(n, sizeof(*p->hosts));
	if (p->hosts == NULL)
		return nk_error_set(err, "53200", "out of memory");
	for (const char *c = list; p->nhosts < n; c += len + 1) {
		c += strspn(c, " ");
		len = strcspn(c, ",");
		h = &p->hosts[p->nhosts++];
		h->name = strndup(c, len);
		if (h->name == NULL)
			return nk_error_set(err, "53200", "out of memory");
		h->name[strcspn(h->name, " ")] = '\0';
		h->port = p->db->nports > 1 && p->nhosts <= p->db->nports ?
			  p->db->ports[p->nhosts - 1] : p->port;
		if (!(h->name[0] == '/' ? pool_host_unix(h, h->port, err) :
		      pool_host_inet(p, h, err)))
			return false;
		if (c[len] == '\0')
			break;
	}
	snprintf(p->addr_str, sizeof(p->addr_str), "%s", p->hosts[0].label);
	return true;
}

/* The host for a new link: in turn (load_balance_hosts=round-robin) or the current one. */
size_t
pool_pick_host(struct pool *p)
{
	size_t idx = p->next_host % p->nhosts;

	if (!p->db->load_balance_hosts || p->nhosts == 1)
		return idx;
	if (p->limits->next_host != NULL)
		return (size_t)(p->limits->next_host(p->limits_ctx, p->db_name) % p->nhosts);
	p->next_host = (idx + 1) % p->nhosts;
	return idx;
}

/* A connection to host <idx> failed: with load_balance_hosts=disable, move to the next. */
void
pool_host_failed(struct pool *p, size_t idx)
{
	if (!p->db->load_balance_hosts && p->next_host % p->nhosts == idx)
		p->next_host = (idx + 1) % p->nhosts;
}

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
		nk_error_set(err, "53200", "out of memory");
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
		nk_error_set(err, "53200", "out of memory");
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

static void
pool_free_hosts(struct pool_host *hosts, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(hosts[i].name);
	free(hosts);
}

/* The database's address moved: resolve the new host list (keep the old one on failure). */
static void
pool_rehost(struct pool *p)
{
	struct pool_host *old = p->hosts;
	size_t nold = p->nhosts;
	struct nk_error err;

	p->hosts = NULL;
	p->nhosts = 0;
	p->next_host = 0;
	if (!pool_resolve(p, &err)) {
		log_warn("%s/%s: keeping the old server address: %s", p->db_name, p->user_name,
			 err.message);
		pool_free_hosts(p->hosts, p->nhosts);
		p->hosts = old;
		p->nhosts = nold;
		return;
	}
	pool_free_hosts(old, nold);
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
		     strcmp(p->cfg->unix_socket_dir ? p->cfg->unix_socket_dir : "",
			    cfg->unix_socket_dir ? cfg->unix_socket_dir : "") != 0;

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

/* RECONNECT: every link is closed at its next release; idle ones now. */
void
pool_reconnect(struct pool *p)
{
	struct list_node *n;

	for (int st = LINK_ST_LOGIN; st < LINK_ST_CLOSING; st++) {
		for (n = list_first(&p->lists[st]); n != NULL; n = list_next(&p->lists[st], n))
			link_set_close_needed(container_of(n, struct link, node));
	}
	pool_check_list(p, LINK_ST_IDLE, pool_now_us());
	pool_check_list(p, LINK_ST_USED, pool_now_us());
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

/* Same IP address (the port is not compared). */
static bool
pool_same_ip(const struct sockaddr_storage *a, const struct sockaddr *b)
{
	if (a->ss_family != b->sa_family)
		return false;
	if (b->sa_family == AF_INET)
		return memcmp(&((const struct sockaddr_in *)a)->sin_addr,
			      &((const struct sockaddr_in *)b)->sin_addr, 4) == 0;
	return b->sa_family == AF_INET6 &&
	       memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
		      &((const struct sockaddr_in6 *)b)->sin6_addr, 16) == 0;
}

void
pool_addr_gone(struct pool *p, const char *name, const struct sockaddr *sa)
{
	struct list_node *n;
	bool any = false;

	for (int st = LINK_ST_LOGIN; st < LINK_ST_CLOSING; st++) {
		for (n = list_first(&p->lists[st]); n != NULL; n = list_next(&p->lists[st], n)) {
			struct link *l = container_of(n, struct link, node);

			if (l->addrlen == 0 || strcasecmp(p->hosts[l->host_idx].name, name) != 0 ||
			    !pool_same_ip(&l->addr, sa))
				continue;
			link_set_close_needed(l);
			any = true;
		}
	}
	if (!any)
		return;
	pool_check_list(p, LINK_ST_IDLE, pool_now_us());
	pool_check_list(p, LINK_ST_USED, pool_now_us());
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
		pool_check_list(p, LINK_ST_IDLE, pool_now_us());
		pool_check_list(p, LINK_ST_USED, pool_now_us());
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

	nk_error_set(&err, "08P01", "%s", msg);
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

	return w != NULL ? pool_now_us() - w->since_us : 0;
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
	nk_error_set(&err, "08P01", "pooler is shutting down");
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

/* ---- process-local limits ---- */

struct pool_limits_entry {
	char *db;		/* owned */
	char *user;		/* owned */
	int count;		/* server connections of this pool */
};

struct pool_limits_local {
	struct pool_limits_entry *e;	/* owned array */
	size_t n;
};

/* Process-local limits for tests and single-process use. NULL when out of memory. */
struct pool_limits_local *
pool_limits_local_new(void)
{
	return calloc(1, sizeof(struct pool_limits_local));
}

/* Free <pl> (NULL is fine). */
void
pool_limits_local_free(struct pool_limits_local *pl)
{
	if (pl == NULL)
		return;
	for (size_t i = 0; i < pl->n; i++) {
		free(pl->e[i].db);
		free(pl->e[i].user);
	}
	free(pl->e);
	free(pl);
}

/* The entry of (<db>, <user>), created when <create>. */
static struct pool_limits_entry *
pool_limits_find(struct pool_limits_local *pl, const char *db, const char *user, bool create)
{
	struct pool_limits_entry *ne;

	for (size_t i = 0; i < pl->n; i++) {
		if (strcmp(pl->e[i].db, db) == 0 && strcmp(pl->e[i].user, user) == 0)
			return &pl->e[i];
	}
	if (!create)
		return NULL;
	ne = realloc(pl->e, (pl->n + 1) * sizeof(*ne));
	if (ne == NULL)
		return NULL;
	pl->e = ne;
	ne = &pl->e[pl->n];
	ne->db = strdup(db);
	ne->user = strdup(user);
	ne->count = 0;
	if (ne->db == NULL || ne->user == NULL) {
		free(ne->db);
		free(ne->user);
		return NULL;
	}
	pl->n++;
	return ne;
}

/* Links counted for database <db>, all users. */
int
pool_limits_local_db_count(struct pool_limits_local *pl, const char *db)
{
	int sum = 0;

	for (size_t i = 0; i < pl->n; i++)
		sum += strcmp(pl->e[i].db, db) == 0 ? pl->e[i].count : 0;
	return sum;
}

/* Links counted for user <user>, all databases. */
int
pool_limits_local_user_count(struct pool_limits_local *pl, const char *user)
{
	int sum = 0;

	for (size_t i = 0; i < pl->n; i++)
		sum += strcmp(pl->e[i].user, user) == 0 ? pl->e[i].count : 0;
	return sum;
}

static bool
pool_limits_local_try(void *ctx, const char *db, const char *user, int pool_max, int db_max,
		      int user_max)
{
	struct pool_limits_local *pl = ctx;
	struct pool_limits_entry *e = pool_limits_find(pl, db, user, true);

	if (e == NULL || e->count >= pool_max)
		return false;
	if (db_max > 0 && pool_limits_local_db_count(pl, db) >= db_max)
		return false;
	if (user_max > 0 && pool_limits_local_user_count(pl, user) >= user_max)
		return false;
	e->count++;
	return true;
}

static void
pool_limits_local_release(void *ctx, const char *db, const char *user)
{
	struct pool_limits_entry *e = pool_limits_find(ctx, db, user, false);

	NK_ASSERT(e != NULL && e->count > 0);
	e->count--;
}

static int
pool_limits_local_count(void *ctx, const char *db, const char *user)
{
	struct pool_limits_entry *e = pool_limits_find(ctx, db, user, false);

	return e != NULL ? e->count : 0;
}

static const struct pool_limits_ops pool_limits_local_table = {
	.try_acquire = pool_limits_local_try,
	.release = pool_limits_local_release,
	.count = pool_limits_local_count,
};

/* The operations table of the process-local limits (static). */
const struct pool_limits_ops *
pool_limits_local_ops(void)
{
	return &pool_limits_local_table;
}
