/*
 * pool_janitor.c - the pool's periodic maintenance (every POOL_JANITOR_US): server_lifetime,
 * server_idle_timeout, server_check_delay on unused links, query_wait_timeout and given-up
 * waits, min_pool_size, the fail_fast probe, and idle links given up for clients of other
 * workers. Entry point: pool_janitor_cb().
 */
#include "neki/base.h"
#include "neki/clock.h"
#include "neki/pool.h"

#include "neki/log.h"
#include "pool_int.h"

/* Lifetime, idle timeout and check delay of one idle or used link. */
static void
pool_check_unused(struct pool *p, struct link *l, uint64_t now)
{
	uint64_t idle_tmo = pool_secs_to_us(p->cfg->srv.server_idle_timeout);
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
	} else if (l->state == LINK_ST_IDLE && pool_has_check_query(p) &&
		   now - l->idle_since_us > pool_secs_to_us(p->cfg->srv.server_check_delay)) {
		link_set_state(l, LINK_ST_USED);	/* checked at its next use (pgbouncer) */
	}
}

/* Walk a list safely while entries may leave it. */
void
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
/* End the waits whose give_up_us has come (one at a time: ready() may queue again). */
static void
pool_check_give_ups(struct pool *p, uint64_t now)
{
	struct nk_error err;
	bool again = true;

	/* (a rescan after each end: ready() may change the queue; at most one per waiter) */
	for (size_t rounds = list_count(&p->waiters); again && rounds > 0; rounds--) {
		again = false;
		for (struct list_node *n = list_first(&p->waiters); n != NULL;
		     n = list_next(&p->waiters, n)) {
			struct pool_waiter *w = container_of(n, struct pool_waiter, node);

			if (w->give_up_us == 0 || now < w->give_up_us)
				continue;
			pool_unqueue(w);
			w->gave_up = true;
			w->give_up_us = 0;
			nk_error_set(&err, ERRCODE_PROTOCOL_VIOLATION,
				     "the wait for a server connection was given up");
			w->ready(w, NULL, &err);
			again = true;
			break;
		}
	}
}

static void
pool_check_waiters(struct pool *p, uint64_t now)
{
	uint64_t tmo = pool_secs_to_us(pool_query_wait_timeout(p));
	struct pool_waiter *w;
	struct nk_error err;

	pool_check_give_ups(p, now);
	if (tmo == 0)
		return;
	while ((w = pool_first_waiter(p)) != NULL && now - w->since_us >= tmo) {
		pool_unqueue(w);
		nk_error_set(&err, ERRCODE_PROTOCOL_VIOLATION, "query_wait_timeout");
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
	if (pool_links_counted(p, POOL_SCOPE_POOL) >= min)
		return;
	if (pool_links_counted(p, POOL_SCOPE_POOL) >= pool_size_limit(p))
		return;
	log_debug("launching new connection to satisfy min_pool_size for %s/%s", p->db_name,
		  p->user_name);
	(void)pool_launch(p, NULL);
}

void
pool_janitor_cb(evutil_socket_t fd, short what, void *arg)
{
	struct pool *p = arg;
	uint64_t now = nk_now_us();

	if (p->suspended)
		return;		/* SUSPEND: no socket is touched until RESUME */
	pool_check_list(p, LINK_ST_IDLE, now);
	pool_check_list(p, LINK_ST_USED, now);
	pool_check_waiters(p, now);
	if (!p->paused)
		pool_check_min_size(p);
	pool_probe(p);
	p->shed_for = 0;	/* one more idle link may go to the same client elsewhere */
	if (!list_empty(&p->waiters))
		pool_dispatch(p);
	else
		(void)pool_wait_give_up_idle(p);
}
