/*
 * pool_takeover.c - the pools' side of the online restart (neki -R).
 *
 * In the old process, SUSPEND (pool_suspend): once every client is at rest the pools freeze:
 * no janitor (no lifetime or idle closes, no min_pool_size links), no dispatch, and idle
 * links stop being read, so that nothing touches a socket the new process takes; links
 * still logging in or running a check/reset query are waited for. RESUME undoes it.
 *
 * In the new process (pool_takeover_link): a link is rebuilt on a handed-over server socket.
 * What the old process knew of its server beyond the row (prepared statements, search_path,
 * other parameters) is lost, so a taken-over link runs DISCARD ALL before it serves anyone
 * else: an idle one at once, one that comes with its client when that client releases it.
 * The pool's welcome (the server parameters a new client gets) is lost too: the first
 * taken-over link of a pool that has none starts one login of its own (beyond the limits
 * when they are full, as pgbouncer does for a welcome), and taken-over links are not handed
 * out before the welcome is known. Entry points: pool_suspend(), pool_takeover_link().
 */
#include "neki/base.h"
#include "neki/clock.h"
#include "neki/pool.h"

#include <event2/event.h>

#include "neki/log.h"
#include "pool_int.h"

/* Run on an adopted link before it serves a new client (a static string: link.reset_sql). */
static const char pool_takeover_reset[] = "DISCARD ALL";

/* Stop (<on>) or start again reading the idle links of <p>. */
static void
pool_read_idle(struct pool *p, bool on)
{
	for (int st = LINK_ST_IDLE; st <= LINK_ST_USED; st++) {
		for (struct list_node *n = list_first(&p->lists[st]); n != NULL;
		     n = list_next(&p->lists[st], n)) {
			struct link *l = container_of(n, struct link, node);

			if (on)
				sbuf_continue(&l->sb);
			else
				sbuf_pause(&l->sb);
		}
	}
}

size_t
pool_suspend(struct pool *p, bool on)
{
	size_t busy = 0;
	const struct list *active = &p->lists[LINK_ST_ACTIVE];

	if (!on) {
		if (p->suspended) {
			p->suspended = false;
			pool_read_idle(p, true);
			pool_kick(p);
		}
		return 0;
	}
	p->suspended = true;
	pool_read_idle(p, false);
	busy = pool_count(p, LINK_ST_LOGIN) + pool_count(p, LINK_ST_TESTED);
	for (struct list_node *n = list_first(active); n != NULL; n = list_next(active, n))
		busy += container_of(n, struct link, node)->client_cb == NULL;	/* parked */
	return busy;
}

bool
pool_is_suspended(const struct pool *p)
{
	return p->suspended;
}

/* Start one login to learn the welcome of <p>, taking a slot beyond the limits if need be. */
static void
pool_takeover_welcome(struct pool *p)
{
	struct link *l;
	bool counted;

	if (p->welcome_asked || pool_welcome_ready(p))
		return;
	p->welcome_asked = true;
	counted = p->limits->try_acquire(p->limits_ctx, p->db_name, p->user_name, 0, 0, 0);
	if (!counted) {
		log_warn("%s/%s: no slot for the login that learns the server's parameters",
			 p->db_name, p->user_name);
		return;
	}
	p->last_connect_us = nk_now_us();
	if ((l = link_new(p)) == NULL) {
		p->limits->release(p->limits_ctx, p->db_name, p->user_name);
		return;
	}
	l->welcome_only = true;
	log_debug("%s/%s: logging in once to learn the server's parameters after the online "
		  "restart", p->db_name, p->user_name);
}

bool
pool_takeover_login_ok(struct link *l)
{
	struct pool *p = l->pool;

	if (!l->welcome_only)
		return false;
	l->welcome_only = false;
	if (pool_links_counted(p, POOL_SCOPE_POOL) <= pool_size_limit(p))
		return false;
	link_close(l, true, "welcome learned, pool full");
	return true;
}

struct link *
pool_takeover_link(struct pool *p, const struct pool_takeover *a)
{
	struct link *l;

	/* the old process counted it: it is counted here whatever the limits say now */
	if (!p->limits->try_acquire(p->limits_ctx, p->db_name, p->user_name, 0, 0, 0))
		return NULL;
	l = link_taken_over(p, a->fd, a->be_pid, a->be_key, a->names, a->values, a->n);
	if (l == NULL) {
		p->limits->release(p->limits_ctx, p->db_name, p->user_name);
		return NULL;
	}
	l->taken_over = true;
	if (a->cb != NULL) {
		l->ready = false;	/* its client's traffic tells */
		l->reset_sql = pool_takeover_reset;
		link_activate(l, a->cb, a->ctx);
	} else {
		l->ready = true;
		l->tx_status = 'I';
		link_set_state(l, LINK_ST_IDLE);
		link_start_test(l, LINK_TEST_RESET, pool_takeover_reset);
	}
	link_log(l, LOG_LVL_DEBUG, "taken over from the old process (%s)",
		 a->cb != NULL ? "with its client" : "idle");
	pool_takeover_welcome(p);
	return l;
}
