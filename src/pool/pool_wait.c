/*
 * pool_wait.c - handing links over between the pools of several worker processes.
 *
 * The limits are global (pool_limits_ops), but every worker has its own pool of a (database,
 * user) and its own queue of waiting clients. pgbouncer's one process serves its queue in
 * order with whatever link frees up; here the oldest waiter may be in another worker than
 * the link that frees up. So each pool publishes since when its first waiter that no link
 * is coming for (the pool is at a limit) has waited (pool_wait_update, wait_publish), and
 * reads the oldest such waiter of the other workers (wait_elsewhere):
 *   - an idle link goes to the process of a client that waits elsewhere when none waits here
 *     as long: the link itself with its slot (pool_limits_ops.move_idle), or, when it cannot
 *     move (TLS), it is closed so that its slot goes there (pool_wait_shed, from dispatch,
 *     the janitor and pool_wake);
 *   - a link freed by a client here goes to a client elsewhere that has waited
 *     POOL_HANDOVER_US longer than the first one here (the margin keeps a busy pool from
 *     moving at every transaction; it only moves a link where the waits grow);
 *   - no new link is started here while a client waits elsewhere since before the first one
 *     here (pool_wait_defers), so the slot freed for it is not taken back at once;
 *   - a waiter kept by max_db_connections / max_user_connections (not its own pool's size) is
 *     published for its database or user too (enum pool_scope), and an unused link of
 *     another pool of them here is closed for it (pool_wait_evict_for_elsewhere), as
 *     pgbouncer's one process evicts one for its own client.
 * Every change is followed by a wake of the other workers concerned (wake), which then look
 * at their pool at once (pool_wake) instead of at their next janitor run.
 * Entry points: pool_wait_since(), pool_wake(); for pool.c the pool_wait_*() of pool_int.h.
 */
#include "neki/base.h"
#include "neki/pool.h"

#include "neki/log.h"
#include "pool_int.h"

/*
 * How much longer than the first waiter here a client of another worker must have waited
 * for a released link to be closed for it (microseconds).
 */
#define POOL_HANDOVER_US 100000

uint64_t
pool_wait_since(const struct pool *p)
{
	return p->wait_since;
}

enum pool_scope
pool_wait_scope(const struct pool *p)
{
	return p->wait_scope;
}

/* The oldest waiter elsewhere in <scope> (monotonic us), 0 when none or in a single process. */
uint64_t
pool_wait_elsewhere(const struct pool *p, enum pool_scope scope)
{
	if (p->limits->wait_elsewhere == NULL)
		return 0;
	return p->limits->wait_elsewhere(p->limits_ctx, p->db_name, p->user_name, scope);
}

/* Ask the other workers concerned to look at their pools (with <holders>: those with links
 * counted in <scope>). */
static void
pool_wait_wake_others(const struct pool *p, enum pool_scope scope, bool holders)
{
	if (p->limits->wake != NULL)
		p->limits->wake(p->limits_ctx, p->db_name, p->user_name, scope, holders);
}

/*
 * Publish <since> as the pool's wait, kept by the limit of p->blocked_scope. The first one
 * (from none) also wakes the workers holding links under that limit, so that an idle one
 * is given up now; every change wakes those that wait, since one may have deferred to the
 * waiter that is served now.
 */
void
pool_wait_set(struct pool *p, uint64_t since)
{
	enum pool_scope scope = since != 0 ? p->blocked_scope : POOL_SCOPE_POOL;
	enum pool_scope was = p->wait_scope;
	bool began = p->wait_since == 0 || scope != was;

	if (since == p->wait_since && scope == was)
		return;
	p->wait_since = since;
	p->wait_scope = scope;
	if (p->limits->wait_publish == NULL)
		return;
	p->limits->wait_publish(p->limits_ctx, p->db_name, p->user_name);
	pool_wait_wake_others(p, POOL_SCOPE_POOL, began && since != 0);
	if (scope != POOL_SCOPE_POOL)
		pool_wait_wake_others(p, scope, began);
	if (was != POOL_SCOPE_POOL && was != scope)
		pool_wait_wake_others(p, was, false);
}

/*
 * After a dispatch: the waiter at position <coming> of the queue (the first one no link is
 * coming for) is what the pool publishes when the limits kept it from starting a link.
 */
void
pool_wait_update(struct pool *p, size_t coming)
{
	struct list_node *n = list_first(&p->waiters);
	uint64_t since = 0;

	for (size_t i = 0; n != NULL && i < coming; i++)
		n = list_next(&p->waiters, n);
	if (n != NULL && p->slot_blocked && !p->paused && !p->freeing)
		since = container_of(n, struct pool_waiter, node)->since_us;
	pool_wait_set(p, since);
}

/*
 * Should a link free in this pool go to a client elsewhere rather than to a waiter here who
 * started waiting at <since> (0: no waiter here)?
 */
bool
pool_wait_yields(const struct pool *p, uint64_t since)
{
	uint64_t e = pool_wait_elsewhere(p, POOL_SCOPE_POOL);

	return e != 0 && (since == 0 || e + POOL_HANDOVER_US < since);
}

/* Should a new link for waiter <w> (NULL: min_pool_size) wait for an older one elsewhere? */
bool
pool_wait_defers(const struct pool *p, const struct pool_waiter *w)
{
	uint64_t e = pool_wait_elsewhere(p, POOL_SCOPE_POOL);

	return e != 0 && (w == NULL || e < w->since_us);
}

/* Said once per process: a TLS link cannot move, so it is closed for the other worker. */
static void
pool_wait_tls_notice(void)
{
	static bool said;

	if (said)
		return;
	said = true;
	log_info("server links over TLS cannot move to another worker (no kernel TLS): one that "
		 "a client of another worker waits for is closed, and that worker logs in again");
}

/*
 * Hand the least recently used idle link (or, when none, one idle past server_check_delay,
 * LINK_ST_USED: checked where it is used next) to the process of a client elsewhere when it
 * should go there (move_idle: the socket moves with its state, the server session stays), or close
 * it so that its slot goes there (a TLS link, no room in that process's queue); once per
 * waiter published there (<p>->shed_for: the janitor allows one more each round), so a
 * burst of dispatches does not give every idle link to one client. True when one went.
 */
bool
pool_wait_shed(struct pool *p)
{
	struct list_node *n = list_last(&p->lists[LINK_ST_IDLE]);
	struct pool_waiter *w = pool_first_waiter(p);
	struct link *l;
	uint64_t e;

	if (n == NULL)
		n = list_last(&p->lists[LINK_ST_USED]);
	if (n == NULL || p->paused || p->freeing || p->limits->wait_elsewhere == NULL)
		return false;
	e = pool_wait_elsewhere(p, POOL_SCOPE_POOL);
	if (e == 0 || e == p->shed_for || !pool_wait_yields(p, w != NULL ? w->since_us : 0))
		return false;
	p->shed_for = e;
	l = container_of(n, struct link, node);
	if (p->limits->move_idle != NULL && link_is_movable(l) &&
	    p->limits->move_idle(p->limits_ctx, l)) {
		link_moved(l);
		return true;
	}
	if (p->limits->move_idle != NULL && sbuf_io_is_tls(&l->sb))
		pool_wait_tls_notice();
	link_close(l, true, "idle link released for a client waiting in another worker");
	return true;
}

/*
 * A client elsewhere waits for room under the limit of <p>'s database or user
 * (max_db_connections, max_user_connections) while unused links of <p> fill it: close the
 * least recently used one ("evicted", as pgbouncer's one process evicts a link of another
 * pool for it). Not while a client here waits for <p>'s links, nor while there is room
 * (a slot freed is on its way to it), nor for a client of a pool whose own link here is
 * handed to it (pool_wait_shed). True when one was closed.
 */
static bool
pool_wait_evict_for_elsewhere(struct pool *p)
{
	static const enum pool_scope shared[] = { POOL_SCOPE_DB, POOL_SCOPE_USER };

	if (p->paused || p->freeing || !list_empty(&p->waiters) ||
	    p->limits->wait_elsewhere == NULL)
		return false;
	for (size_t i = 0; i < NK_ARRAY_LEN(shared); i++) {
		int max = pool_scope_max(p, shared[i]);
		uint64_t e;

		if (max <= 0 || (e = pool_wait_elsewhere(p, shared[i])) == 0 ||
		    pool_links_counted(p, shared[i]) < max || pool_sibling_serves(p, shared[i], e))
			continue;
		if (pool_close_unused(p, "evicted for a client waiting in another worker"))
			return true;
	}
	return false;
}

bool
pool_wait_give_up_idle(struct pool *p)
{
	return pool_wait_shed(p) || pool_wait_evict_for_elsewhere(p);
}

/* A link of <p> that held a slot closed: a client elsewhere may take the slot now. */
void
pool_wait_slot_freed(const struct pool *p)
{
	for (enum pool_scope s = POOL_SCOPE_POOL; s < POOL_SCOPE_COUNT; s++)
		if ((s == POOL_SCOPE_POOL || pool_scope_max(p, s) > 0) &&
		    pool_wait_elsewhere(p, s) != 0)
			pool_wait_wake_others(p, s, false);
}

/* Another worker woke this one; see neki/pool.h. */
void
pool_wake(struct pool *p)
{
	if (p->freeing)
		return;
	(void)pool_wait_give_up_idle(p);
	if (!list_empty(&p->waiters))
		pool_kick(p);
}
