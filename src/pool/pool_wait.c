/*
 * pool_wait.c - handing links over between the pools of several worker processes.
 *
 * The limits are global (pool_limits_ops), but every worker has its own pool of a (database,
 * user) and its own queue of waiting clients. pgbouncer's one process serves its queue in
 * order with whatever link frees up; here the oldest waiter may be in another worker than
 * the link that frees up. So each pool publishes since when its first waiter that no link
 * is coming for (the pool is at a limit) has waited (pool_wait_update, wait_publish), and
 * reads the oldest such waiter of the other workers (wait_elsewhere):
 *   - an idle link is closed when a client waits elsewhere and none here, so its slot goes
 *     to that client (pool_wait_shed, from dispatch, the janitor and pool_wake);
 *   - a link freed by a client here goes to a client elsewhere that has waited
 *     POOL_HANDOVER_US longer than the first one here (the margin keeps a busy pool from
 *     reconnecting at every transaction; it only moves a link where the waits grow);
 *   - no new link is started here while a client waits elsewhere since before the first one
 *     here (pool_wait_defers), so the slot freed for it is not taken back at once.
 * Every change is followed by a wake of the other workers concerned (wake), which then look
 * at their pool at once (pool_wake) instead of at their next janitor run.
 * Entry points: pool_wait_since(), pool_wake(); for pool.c the pool_wait_*() of pool_int.h.
 */
#include "neki/base.h"
#include "neki/pool.h"

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

/* The oldest waiter elsewhere (monotonic us), 0 when none or in a single process. */
static uint64_t
pool_wait_elsewhere(const struct pool *p)
{
	if (p->limits->wait_elsewhere == NULL)
		return 0;
	return p->limits->wait_elsewhere(p->limits_ctx, p->db_name, p->user_name);
}

/* Ask the other workers concerned to look at their pool (with <holders>: those with links). */
static void
pool_wait_wake_others(const struct pool *p, bool holders)
{
	if (p->limits->wake != NULL)
		p->limits->wake(p->limits_ctx, p->db_name, p->user_name, holders);
}

/*
 * Publish <since> as the pool's wait. The first one (from none) also wakes the workers
 * holding links, so that an idle one is given up now; every change wakes those that wait,
 * since one may have deferred to the waiter that is served now.
 */
void
pool_wait_set(struct pool *p, uint64_t since)
{
	bool began = p->wait_since == 0;

	if (since == p->wait_since)
		return;
	p->wait_since = since;
	if (p->limits->wait_publish == NULL)
		return;
	p->limits->wait_publish(p->limits_ctx, p->db_name, p->user_name);
	pool_wait_wake_others(p, began && since != 0);
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
	uint64_t e = pool_wait_elsewhere(p);

	return e != 0 && (since == 0 || e + POOL_HANDOVER_US < since);
}

/* Should a new link for waiter <w> (NULL: min_pool_size) wait for an older one elsewhere? */
bool
pool_wait_defers(const struct pool *p, const struct pool_waiter *w)
{
	uint64_t e = pool_wait_elsewhere(p);

	return e != 0 && (w == NULL || e < w->since_us);
}

/*
 * Close the least recently used idle link when it should go to a client elsewhere; once per
 * waiter published there (<p>->shed_for: the janitor allows one more each round), so a
 * burst of dispatches does not close every idle link for one client. True when it closed one.
 */
bool
pool_wait_shed(struct pool *p)
{
	struct list_node *n = list_last(&p->lists[LINK_ST_IDLE]);
	struct pool_waiter *w = pool_first_waiter(p);
	uint64_t e;

	if (n == NULL || p->paused || p->freeing || p->limits->wait_elsewhere == NULL)
		return false;
	e = pool_wait_elsewhere(p);
	if (e == 0 || e == p->shed_for || !pool_wait_yields(p, w != NULL ? w->since_us : 0))
		return false;
	p->shed_for = e;
	link_close(container_of(n, struct link, node), true,
		   "idle link released for a client waiting in another worker");
	return true;
}

/* A link of <p> that held a slot closed: a client elsewhere may take the slot now. */
void
pool_wait_slot_freed(const struct pool *p)
{
	if (p->limits->wait_elsewhere != NULL && pool_wait_elsewhere(p) != 0)
		pool_wait_wake_others(p, false);
}

/* Another worker woke this one; see neki/pool.h. */
void
pool_wake(struct pool *p)
{
	if (p->freeing)
		return;
	(void)pool_wait_shed(p);
	if (!list_empty(&p->waiters))
		pool_kick(p);
}
