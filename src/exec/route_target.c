/*
 * route_target.c - which server of a shard a routed session's link comes from (NEKI-SPEC
 * 3.4, 3.5), and the hold of a shard's statements while it has no primary (6.6 failover).
 *
 * A shard with standbys (cfg_shard.servers) has one pool per server ("<db>@<uid>" for
 * server 0, "<db>@<uid>/<k>"); the admin publishes each server's role, lag and the chosen
 * primary (neki/shm_servers.h). Each time <sh> takes a link (once per transaction: a
 * transaction's links stay where it started), target_pick() decides from the session's
 * __neki.target, replica_recency and replica_affinity: the chosen primary, a standby, or
 * none. A SET / SHOW checked on a shard (settings_exec) always goes to the primary. With
 * target primary and no primary published (the old one stopped answering, none promoted
 * yet) the shard's statements wait, polled every RTARGET_POLL_MS, for at most
 * failover_hold_timeout, then fail with NK205; other shards' statements never wait.
 * Entry points: route_target_bind(), route_target_free().
 */
#include "neki/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "neki/clock.h"
#include "neki/log.h"
#include "neki/shm_servers.h"
#include "neki/target.h"
#include "neki/proc.h"
#include "route_int.h"
#include "route_client.h"
#include "route_target.h"

#define RTARGET_POLL_MS 20
#define RTARGET_HOLD_GAP_US 2000000	/* holds closer than this are one hold (its clock) */
#define RTARGET_LOST_MIN_US 500000	/* a primary that refused a connect: lost this long */

struct rtarget {
	struct rshard *sh;			/* back pointer */
	struct spool *srv[CFG_SHARD_SERVERS_MAX]; /* counted (but [0]: the rshard's own) */
	int sticky;				/* the standby read last (session affinity) */
	struct event *ev;			/* owned: the hold's poll timer */
	uint64_t hold_since_us, hold_last_us;
	bool holding;
	int lost;				/* a primary this session could not reach; -1 */
	uint64_t lost_until_us;			/* ... taken as lost until then */
};

static uint64_t rtarget_spread;	/* moves every pick: affinity none spreads the reads */

static void rtarget_poll(evutil_socket_t fd, short what, void *arg);

static struct rtarget *
rtarget_get(struct rshard *sh)
{
	struct rtarget *t = sh->tgt;

	if (t != NULL)
		return t;
	if ((t = calloc(1, sizeof(*t))) == NULL)
		return NULL;
	t->ev = evtimer_new(child_base(), rtarget_poll, t);
	if (t->ev == NULL) {
		free(t);
		return NULL;
	}
	t->sh = sh;
	t->srv[0] = sh->sp;
	t->sticky = -1;
	t->lost = -1;
	sh->tgt = t;
	return t;
}

/* The __neki.target of <r>'s exec (a SET's exec always reads the primary). */
static const char *
rtarget_name(const struct route *r)
{
	return r->settings_exec ? "primary" : r->ps.target;
}

/* The policy of <r>'s session for this exec. */
static void
rtarget_policy(const struct route *r, struct target_policy *p)
{
	const struct cfg *c = r->c.cfg;

	target_policy_from(p, rtarget_name(r),
			   r->ps.replica_recency, r->ps.replica_locality, r->ps.replica_affinity,
			   c->replicas.replica_lag_tolerable_min, c->replicas.replica_lag_tolerable_max);
}

/* Pick a server of <shd> for <p>; <*k> its index. */
static enum target_result
rtarget_pick(const struct cfg_shard *shd, const struct target_policy *p, int sticky,
	     uint32_t *k)
{
	struct shm_server pub[CFG_SHARD_SERVERS_MAX];
	struct target_server v[CFG_SHARD_SERVERS_MAX];
	size_t n = shm_servers_read(shd->uid, pub, NK_ARRAY_LEN(pub)), m = 0;

	if (n == 0 && p->kind == TARGET_PRIMARY) {	/* not polled (yet): as declared */
		*k = 0;
		return TARGET_OK;
	}
	for (size_t i = 0; i < n; i++) {
		if (pub[i].index >= shd->n_servers)
			continue;
		v[m].index = pub[i].index;
		v[m].declared = (uint8_t)shd->servers[pub[i].index].kind;
		v[m++].st = pub[i];
	}
	return target_pick(p, v, m, sticky, rtarget_spread++, k);
}

/* Point sh->sp at the pool of server <k>. */
static bool
rtarget_use(struct route *r, struct rshard *sh, const struct cfg_shard *shd, uint32_t k,
	    struct nk_error *err)
{
	struct rtarget *t;

	if (k == 0 && sh->tgt == NULL)
		return true;		/* the primary as declared: sh->sp already */
	if ((t = rtarget_get(sh)) == NULL)
		return nk_error_oom(err);
	if (t->srv[k] == NULL) {
		if ((t->srv[k] = route_server_pool(r, shd, k, err)) == NULL)
			return false;
		spool_ref(t->srv[k]);
	}
	sh->sp = t->srv[k];
	return true;
}

/* Hold <sh>: arm the poll (the hold's clock starts at its first round). */
static enum rtarget_bind
rtarget_hold(struct route *r, struct rshard *sh, struct nk_error *err)
{
	double secs = r->c.cfg->replicas.failover_hold_timeout;
	struct timeval tv = { 0, RTARGET_POLL_MS * 1000 };
	struct rtarget *t = rtarget_get(sh);

	if (t == NULL) {
		nk_error_oom(err);
		return RTARGET_FAIL;
	}
	if (!t->holding && (t->hold_last_us == 0 ||
			    nk_now_us() - t->hold_last_us > RTARGET_HOLD_GAP_US)) {
		t->hold_since_us = nk_now_us();
		route_client_log(r, LOG_LVL_DEBUG, "shard %s has no primary: its statement waits", sh->uid);
	}
	t->hold_last_us = nk_now_us();
	if (secs <= 0 || nk_now_us() - t->hold_since_us >= (uint64_t)(secs * 1e6)) {
		t->holding = false;
		target_error(err, sh->uid, TARGET_PRIMARY);
		return RTARGET_FAIL;
	}
	t->holding = true;
	evtimer_add(t->ev, &tv);
	return RTARGET_HOLD;
}

/* route_target_bind: see route_int.h. */
enum rtarget_bind
route_target_bind(struct route *r, struct rshard *sh, struct nk_error *err)
{
	const struct cfg_shard *shd = cfg_shard_find(r->c.cfg, sh->uid);
	struct target_policy p;
	uint32_t k = 0;

	if (shd == NULL || (shd->n_servers <= 1 &&
			    target_kind_from(rtarget_name(r)) == TARGET_PRIMARY))
		return RTARGET_OK;	/* one server: the pool route_shard() made */
	rtarget_policy(r, &p);
	switch (rtarget_pick(shd, &p, sh->tgt != NULL ? sh->tgt->sticky : -1, &k)) {
	case TARGET_OK:
		if (p.kind == TARGET_PRIMARY && sh->tgt != NULL && sh->tgt->lost == (int)k &&
		    nk_now_us() < sh->tgt->lost_until_us)
			return rtarget_hold(r, sh, err);	/* not reachable a moment ago */
		break;
	case TARGET_HOLD:
		return rtarget_hold(r, sh, err);
	case TARGET_NONE:
		target_error(err, sh->uid, p.kind);
		return RTARGET_FAIL;
	}
	if (!rtarget_use(r, sh, shd, k, err))
		return RTARGET_FAIL;
	if (sh->tgt != NULL) {
		sh->tgt->holding = false;
		if (p.kind != TARGET_PRIMARY)
			sh->tgt->sticky = (int)k;
	}
	return RTARGET_OK;
}

/* The hold of <sh> ends with <err> (its part fails; the exec goes on to its end). */
static void
rtarget_fail(struct route *r, struct rshard *sh, const struct nk_error *err)
{
	sh->failed = sh->done = true;
	if (!r->x.has_err) {
		r->x.err = *err;
		r->x.has_err = true;
	}
	sh->tgt->holding = false;
	sh->waiting = false;
	r->x.nwait--;
	route_exec_continue(r);
}

/* The hold's poll: a primary now, still none, or the hold is over (or cancelled). */
static void
rtarget_poll(evutil_socket_t fd, short what, void *arg)
{
	struct rtarget *t = arg;
	struct rshard *sh = t->sh;
	struct route *r = sh->r;
	struct nk_error err;

	(void)fd;
	(void)what;
	if (!t->holding || !sh->waiting) {	/* the exec ended meanwhile */
		t->holding = false;
		return;
	}
	if (r->cancel_pending && r->x.after == RX_AFTER_STMT) {	/* a cancel ends the wait */
		nk_error_set(&err, ERRCODE_QUERY_CANCELED,
			     "canceling statement due to user request");
		rtarget_fail(r, sh, &err);
		return;
	}
	switch (route_target_bind(r, sh, &err)) {
	case RTARGET_HOLD:
		return;			/* armed again */
	case RTARGET_OK:
		route_client_log(r, LOG_LVL_DEBUG, "shard %s has a primary again after %llu ms",
			 sh->uid, (unsigned long long)((nk_now_us() - t->hold_since_us) / 1000));
		break;
	case RTARGET_FAIL:
		rtarget_fail(r, sh, &err);
		return;
	}
	t->holding = false;
	sh->waiting = false;
	r->x.nwait--;
	route_exec_continue(r);
}

/* route_target_lost: see route_int.h. */
bool
route_target_lost(struct route *r, struct rshard *sh)
{
	const struct cfg_shard *shd = cfg_shard_find(r->c.cfg, sh->uid);
	double poll = r->c.cfg->replicas.replica_poll_interval;
	uint64_t span = (uint64_t)(2 * poll * 1e6);
	struct target_policy p;
	struct nk_error err;
	struct rtarget *t;

	rtarget_policy(r, &p);
	if (shd == NULL || shd->n_servers <= 1 || p.kind != TARGET_PRIMARY ||
	    (t = rtarget_get(sh)) == NULL)
		return false;
	for (int k = 0; k < CFG_SHARD_SERVERS_MAX; k++)
		if (t->srv[k] == sh->sp)
			t->lost = k;
	t->lost_until_us = nk_now_us() + (span > RTARGET_LOST_MIN_US ? span :
					    RTARGET_LOST_MIN_US);
	if (rtarget_hold(r, sh, &err) != RTARGET_HOLD)
		return false;
	sh->waiting = true;
	r->x.nwait++;
	return true;
}

/* route_target_free: see route_int.h. */
void
route_target_free(struct rshard *sh)
{
	struct rtarget *t = sh->tgt;

	if (t == NULL)
		return;
	sh->sp = t->srv[0];
	for (size_t k = 1; k < CFG_SHARD_SERVERS_MAX; k++)
		if (t->srv[k] != NULL)
			spool_unref(t->srv[k]);
	event_free(t->ev);
	free(t);
	sh->tgt = NULL;
}
