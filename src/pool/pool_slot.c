/*
 * pool_slot.c - taking a slot of the global limits for a new link and starting it: pool_size,
 * reserve_pool_size after reserve_pool_timeout, max_db_connections and max_user_connections
 * with eviction of another pool's unused link (pgbouncer's), one connection attempt per
 * pool at a time, server_login_retry. Entry points: pool_launch(), pool_connect_end(),
 * pool_close_unused(), pool_sibling_serves().
 */
#include "neki/base.h"
#include "neki/clock.h"
#include "neki/pool.h"

#include <limits.h>
#include <string.h>

#include <event2/event.h>

#include "neki/log.h"
#include "pool_int.h"

/* Has the first waiter waited reserve_pool_timeout? */
static bool
pool_reserve_allowed(const struct pool *p)
{
	struct pool_waiter *w = pool_first_waiter(p);
	uint64_t tmo = pool_secs_to_us(p->cfg->pool.reserve_pool_timeout);

	if (w == NULL || tmo == 0 || pool_reserve_size(p) <= 0)
		return false;
	return nk_now_us() - w->since_us >= tmo;
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
		if (pool_evict_matches(q, self, from) && pool_close_unused(q, "evicted"))
			return true;
	}
	return false;
}

bool
pool_close_unused(struct pool *p, const char *reason)
{
	for (int st = LINK_ST_USED; st >= LINK_ST_IDLE; st--) {
		struct list_node *ln = list_last(&p->lists[st]);

		if (ln != NULL) {
			link_close(container_of(ln, struct link, node), true, reason);
			return true;
		}
	}
	return false;
}

bool
pool_sibling_serves(const struct pool *p, enum pool_scope scope, uint64_t since)
{
	for (struct list_node *n = list_first(&pool_all); n != NULL; n = list_next(&pool_all, n)) {
		const struct pool *q = container_of(n, struct pool, all_node);
		bool shares = scope == POOL_SCOPE_DB ? strcmp(q->db_name, p->db_name) == 0 :
			      strcmp(q->user_name, p->user_name) == 0;

		if (shares && pool_count(q, LINK_ST_IDLE) + pool_count(q, LINK_ST_USED) > 0 &&
		    pool_wait_elsewhere(q, POOL_SCOPE_POOL) == since)
			return true;
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
pool_take_slot(struct pool *p, const struct pool_waiter *for_w)
{
	int size = pool_size_limit(p);
	int max = size;

	if (pool_try_slot(p, size))
		return true;
	if (for_w != NULL && for_w->urgent && pool_try_slot(p, INT_MAX)) {
		log_debug("C-%p: %s/%s taking connection beyond pool_size: the client holds "
			  "links of other pools in its transaction", for_w->ctx, p->db_name,
			  p->user_name);
		return true;
	}
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
	if (pool_links_counted(p, POOL_SCOPE_POOL) >= max)
		return pool_evict_one(p, EVICT_SAME_PAIR) && pool_try_slot(p, max);
	if ((pool_db_max(p) > 0 && pool_evict_one(p, EVICT_SAME_DB)) ||
	    (pool_user_max(p) > 0 && pool_evict_one(p, EVICT_SAME_USER)))
		return pool_try_slot(p, max);
	return false;
}

/*
 * Which limit a failed pool_take_slot() met: the database's or the user's when one of them
 * is full while the pool's own count is not (a link may then come from closing an idle one
 * of another pool, in any worker: pool_wait_evict_sibling()), else the pool's.
 */
static enum pool_scope
pool_full_scope(const struct pool *p)
{
	static const enum pool_scope shared[] = { POOL_SCOPE_DB, POOL_SCOPE_USER };

	if (pool_links_counted(p, POOL_SCOPE_POOL) >= pool_size_limit(p))
		return POOL_SCOPE_POOL;
	for (size_t i = 0; i < NK_ARRAY_LEN(shared); i++) {
		int max = pool_scope_max(p, shared[i]);

		if (max > 0 && pool_links_counted(p, shared[i]) >= max)
			return shared[i];
	}
	return POOL_SCOPE_POOL;
}

/*
 * Take the pool's turn to connect: at most one attempt per pool at a time, across every
 * process, as pgbouncer makes ("launch_new_connection: already progress"). When the attempt
 * in progress is this pool's, its end kicks the dispatch; when it is another process's, the
 * dispatch runs again shortly (as pgbouncer's loop tries again at every turn).
 */
static bool
pool_connect_begin(struct pool *p)
{
	struct timeval tv = { 0, POOL_CONNECT_RETRY_US };

	if (p->connecting || pool_count(p, LINK_ST_LOGIN) > 0)
		return false;
	if (p->limits->connect_begin != NULL && !p->limits->connect_begin(p->limits_ctx)) {
		event_add(p->ev_dispatch, &tv);
		return false;
	}
	p->connecting = true;
	return true;
}

/* The pool's attempt ended (its link logged in or closed; or none was started). */
void
pool_connect_end(struct pool *p)
{
	if (!p->connecting || pool_count(p, LINK_ST_LOGIN) > 0)
		return;
	p->connecting = false;
	if (p->limits->connect_end != NULL)
		p->limits->connect_end(p->limits_ctx);
}

/*
 * Open one more link if no other attempt is in progress and server_login_retry and the
 * global limits allow it. Returns true when a link was started.
 */
bool
pool_launch(struct pool *p, const struct pool_waiter *for_w)
{
	uint64_t now = nk_now_us();
	uint64_t retry = pool_secs_to_us(p->cfg->srv.server_login_retry);
	struct link *l;

	if (!pool_connect_begin(p)) {
		log_debug("launch_new_connection: already progress");
		return false;
	}
	if (p->last_connect_failed && now - p->last_connect_us < retry) {
		log_debug("launch_new_connection: last failed, not launching new connection yet, "
			  "still waiting %llu s",
			  (unsigned long long)((retry - (now - p->last_connect_us)) / 1000000));
		pool_connect_end(p);
		return false;
	}
	if (!pool_take_slot(p, for_w)) {
		log_debug("launch_new_connection: pool full for %s/%s", p->db_name, p->user_name);
		p->slot_blocked = true;
		p->blocked_scope = pool_full_scope(p);
		pool_connect_end(p);
		return false;
	}
	p->last_connect_us = now;
	l = link_new(p);	/* (it may be closed already: pool_on_link_closed ended the turn) */
	if (l == NULL) {
		p->limits->release(p->limits_ctx, p->db_name, p->user_name);
		pool_connect_end(p);
		return false;
	}
	log_debug("launching new connection to server %s for %s/%s", p->addr_str, p->db_name,
		  p->user_name);
	return true;
}
