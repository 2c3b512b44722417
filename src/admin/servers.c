/*
 * servers.c - roles verified, not trusted: every replica_poll_interval the admin asks each
 * server of every shard with standbys (cfg_shard.servers) whether it is in recovery and how
 * far it has written (a primary) or replayed (a standby), and publishes what it learned into
 * the segment's servers table (neki/shm_servers.h) for the workers.
 *
 *   - Lag: each answer of the chosen primary adds (when, position) to the shard's history;
 *     a standby that replayed up to R is as far behind as the time since the latest sample
 *     at or below R. So an idle primary gives lag 0, a standby that stopped replaying grows
 *     lag by the clock, and one behind the whole history has no known lag (it is not read).
 *   - The chosen primary (SHM_SRV_F_CHOSEN, where writes go) is sticky: it stays while it
 *     answers as a primary; when it stops answering or is in recovery, the first server
 *     that answers as a primary is chosen, a writable one before a read-only one (a
 *     promoted standby, as target_session_attrs=read-write finds it); meanwhile the shard
 *     has none and the workers hold its statements (failover_hold_timeout). Before its
 *     first answer the declared primary is taken as chosen (a restarted admin takes the one
 *     its predecessor published, the segment outliving it). SWITCHOVER (switchover.c)
 *     publishes none while it runs and then names the new one.
 *   - A lost connection marks the server down at once (the workers then hold at once).
 * Entry points: servers_init(), servers_snapshot(), servers_switch_begin() / _end().
 */
#include "neki/base.h"

#include "admin_int.h"
#include "servers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "neki/clock.h"
#include "neki/config.h"
#include "neki/log.h"
#include "neki/shm.h"
#include "neki/shm_servers.h"

#define SRV_HIST 256		/* primary samples kept per shard */
#define SRV_STUCK_TICKS 3	/* a question unanswered this many ticks: the server is down */

static const char srv_sql[] =
	"SELECT pg_catalog.pg_is_in_recovery(), "
	"(CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.pg_last_wal_replay_lsn() "
	"ELSE pg_catalog.pg_current_wal_insert_lsn() END) - '0/0'::pg_catalog.pg_lsn, "
	"pg_catalog.current_setting('transaction_read_only')";

struct srv_sample {
	uint64_t ms, lsn;
};

struct srv_shard {
	char uid[SHM_SERVER_UID_MAX];
	int chosen;			/* index of the primary; -1 none */
	bool switching;			/* a SWITCHOVER runs: no primary published, no choice */
	bool answered;			/* some server of it answered once */
	struct srv_sample hist[SRV_HIST];	/* ring, oldest first from hist_pos */
	size_t nhist, hist_pos;
};

struct srv_poll {
	struct srv_shard *shard;	/* borrowed (srv_shards) */
	struct pgc *pgc;		/* owned */
	struct shm_server st;		/* what is published */
	bool busy;			/* a question is out */
	uint32_t busy_ticks;
	char addr[128];			/* host:port, for the log */
};

static struct event_base *srv_base;
static struct event *srv_tick_ev;
static const struct cfg *srv_cfg;	/* the configuration the table was built for */
static struct srv_shard *srv_shards;
static size_t srv_nshards;
static struct srv_poll *srv_polls;
static size_t srv_npolls;

static void
srv_publish(void)
{
	struct shm_server v[SHM_SERVERS_MAX];
	size_t n = 0;

	for (size_t i = 0; i < srv_npolls && n < SHM_SERVERS_MAX; i++)
		v[n++] = srv_polls[i].st;
	shm_servers_publish(v, n);
}

/* Mark the chosen primary of <sh> among its servers' entries. */
static void
srv_mark_chosen(struct srv_shard *sh)
{
	for (size_t i = 0; i < srv_npolls; i++) {
		struct srv_poll *p = &srv_polls[i];

		if (p->shard != sh)
			continue;
		p->st.flags &= ~SHM_SRV_F_CHOSEN;
		if ((int)p->st.index == sh->chosen && !sh->switching)
			p->st.flags |= SHM_SRV_F_CHOSEN;
	}
}

static struct srv_poll *srv_poll_find(const struct srv_shard *sh, int index);

/* Whether server <index> of <sh> answers read-only (true when it is not watched). */
static bool
srv_poll_read_only(const struct srv_shard *sh, int index)
{
	const struct srv_poll *p = srv_poll_find(sh, index);

	return p == NULL || (p->st.flags & SHM_SRV_F_READ_ONLY);
}

/* The first server of <sh> answering as a primary, writable ones first; -1 none. */
static int
srv_first_primary(const struct srv_shard *sh)
{
	int ro = -1;

	for (size_t i = 0; i < srv_npolls; i++) {
		const struct srv_poll *p = &srv_polls[i];

		if (p->shard != sh || p->st.role != SHM_SRV_PRIMARY)
			continue;
		if (!(p->st.flags & SHM_SRV_F_READ_ONLY))
			return (int)p->st.index;
		if (ro < 0)
			ro = (int)p->st.index;
	}
	return ro;
}

/*
 * Keep the chosen primary of <sh> while it answers as one (a read-only one only while no
 * writable one answers); else the first that does.
 */
static void
srv_choose(struct srv_shard *sh)
{
	int was = sh->chosen, first;

	if (sh->switching)
		return;		/* SWITCHOVER decides */
	first = srv_first_primary(sh);
	for (size_t i = 0; i < srv_npolls; i++) {
		const struct srv_poll *p = &srv_polls[i];

		if (p->shard != sh || (int)p->st.index != was)
			continue;
		if (p->st.role == SHM_SRV_UNKNOWN)
			return;		/* not asked yet: the declared one stays */
		if (p->st.role == SHM_SRV_PRIMARY &&
		    (!(p->st.flags & SHM_SRV_F_READ_ONLY) ||
		     srv_poll_read_only(sh, first)))
			return;
	}
	if (first == was)
		return;
	sh->chosen = first;
	srv_mark_chosen(sh);
	if (sh->chosen >= 0)
		log_info("shard %s: its primary is server %d now", sh->uid, sh->chosen);
	else if (was >= 0)
		log_warn("shard %s: no server answers as its primary: its statements wait "
			 "(failover_hold_timeout)", sh->uid);
}

static void
srv_set_role(struct srv_poll *p, enum shm_srv_role role, const char *why)
{
	if (p->st.role != role && role == SHM_SRV_DOWN)
		log_warn("shard %s: server %u (%s) is down: %s", p->st.uid, p->st.index, p->addr,
			 why);
	else if (p->st.role != role)
		log_info("shard %s: server %u (%s) answers as a %s", p->st.uid, p->st.index,
			 p->addr, shm_srv_role_str(role));
	p->st.role = role;
	srv_choose(p->shard);
}

/* A standby replayed up to <lsn>: its lag from the shard's primary samples. */
static void
srv_lag(struct srv_poll *p, uint64_t lsn, uint64_t now)
{
	const struct srv_shard *sh = p->shard;

	p->st.flags &= ~SHM_SRV_F_LAG;
	for (size_t k = sh->nhist; k-- > 0;) {
		const struct srv_sample *s = &sh->hist[(sh->hist_pos + k) % SRV_HIST];

		if (s->lsn <= lsn) {
			p->st.lag_ms = now > s->ms ? (int64_t)(now - s->ms) : 0;
			p->st.flags |= SHM_SRV_F_LAG;
			return;
		}
	}
}

static void
srv_sample_add(struct srv_shard *sh, uint64_t lsn, uint64_t now)
{
	if (sh->nhist == SRV_HIST) {
		sh->hist[sh->hist_pos] = (struct srv_sample){ now, lsn };
		sh->hist_pos = (sh->hist_pos + 1) % SRV_HIST;
		return;
	}
	sh->hist[(sh->hist_pos + sh->nhist++) % SRV_HIST] = (struct srv_sample){ now, lsn };
}

static void
srv_answer(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	struct srv_poll *p = arg;
	uint64_t now = nk_now_ms(), lsn;
	const char *rec, *pos, *ro;

	p->busy = false;
	p->busy_ticks = 0;
	if (err != NULL || pgc_res_rows(res) != 1) {
		srv_set_role(p, SHM_SRV_DOWN, err != NULL ? err->message : "no row");
		srv_publish();
		return;
	}
	rec = pgc_res_get(res, 0, 0);
	pos = pgc_res_get(res, 0, 1);
	ro = pgc_res_get(res, 0, 2);
	lsn = pos != NULL ? strtoull(pos, NULL, 10) : 0;
	p->st.checked_ms = now;
	p->shard->answered = true;
	p->st.flags &= ~SHM_SRV_F_READ_ONLY;
	if (rec != NULL && rec[0] == 'f') {
		p->st.lag_ms = 0;
		p->st.flags |= SHM_SRV_F_LAG;
		if (ro != NULL && strcmp(ro, "on") == 0)
			p->st.flags |= SHM_SRV_F_READ_ONLY;
		srv_set_role(p, SHM_SRV_PRIMARY, NULL);
		if (pos != NULL && (int)p->st.index == p->shard->chosen)
			srv_sample_add(p->shard, lsn, now);	/* (the chosen one's WAL only) */
	} else {
		if (pos != NULL)
			srv_lag(p, lsn, now);
		else
			p->st.flags &= ~SHM_SRV_F_LAG;
		srv_set_role(p, SHM_SRV_STANDBY, NULL);
	}
	srv_publish();
}

/* The connection of <arg> was lost: down at once (a primary that stopped answering). */
static void
srv_state(void *arg, bool up)
{
	struct srv_poll *p = arg;

	if (up)
		return;
	srv_set_role(p, SHM_SRV_DOWN, "the connection was lost");
	srv_publish();
}

static void
srv_free_all(void)
{
	for (size_t i = 0; i < srv_npolls; i++)
		pgc_free(srv_polls[i].pgc);
	free(srv_polls);
	free(srv_shards);
	srv_polls = NULL;
	srv_shards = NULL;
	srv_npolls = srv_nshards = 0;
}

/*
 * The primary a previous admin process chose for <s> (the segment outlives it: a restarted
 * admin keeps a failover's choice); 0, the declared one, when none was published.
 */
static int
srv_published_choice(const struct cfg_shard *s)
{
	struct shm_server v[CFG_SHARD_SERVERS_MAX];
	size_t n = shm_servers_read(s->uid, v, NK_ARRAY_LEN(v));

	for (size_t i = 0; i < n; i++)
		if ((v[i].flags & SHM_SRV_F_CHOSEN) && v[i].index < s->n_servers)
			return (int)v[i].index;
	return 0;
}

/* One poller per server of <s> (a shard with standbys) into slot <sh>. */
static void
srv_build_shard(const struct cfg_shard *s, struct srv_shard *sh)
{
	snprintf(sh->uid, sizeof(sh->uid), "%s", s->uid);
	sh->chosen = srv_published_choice(s);
	for (size_t k = 0; k < s->n_servers; k++) {
		struct srv_poll *p = &srv_polls[srv_npolls];
		char *ci = follow_server_conninfo(s->uid, k);

		memset(p, 0, sizeof(*p));
		p->shard = sh;
		snprintf(p->st.uid, sizeof(p->st.uid), "%s", s->uid);
		p->st.index = (uint32_t)k;
		p->st.flags = (int)k == sh->chosen ? SHM_SRV_F_CHOSEN : 0;
		snprintf(p->addr, sizeof(p->addr), "%s:%d", s->servers[k].host, s->servers[k].port);
		p->pgc = ci != NULL ? pgc_new(srv_base, s->uid) : NULL;
		if (p->pgc == NULL) {
			log_error("shard %s: cannot watch server %zu: out of memory", s->uid, k);
			free(ci);
			continue;
		}
		pgc_set_quiet(p->pgc, true);
		pgc_set_conninfo(p->pgc, ci);
		pgc_set_callbacks(p->pgc, NULL, srv_state, p);
		free(ci);
		srv_npolls++;
	}
}

/* Do <a> and <b> declare the same shards with standbys, with the same servers? */
static bool
srv_same_servers(const struct cfg *a, const struct cfg *b)
{
	size_t j = 0;

	for (size_t i = 0; i < a->n_shards; i++) {
		const struct cfg_shard *x = &a->shards[i], *y;

		if (x->n_servers <= 1)
			continue;
		while (j < b->n_shards && b->shards[j].n_servers <= 1)
			j++;
		if (j == b->n_shards)
			return false;
		y = &b->shards[j++];
		if (strcmp(x->uid, y->uid) != 0 || x->n_servers != y->n_servers)
			return false;
		for (size_t k = 0; k < x->n_servers; k++)
			if (strcmp(x->servers[k].conninfo, y->servers[k].conninfo) != 0)
				return false;
	}
	while (j < b->n_shards && b->shards[j].n_servers <= 1)
		j++;
	return j == b->n_shards;
}

/*
 * (Re)build the pollers for configuration <c>. A reload that leaves the shards' servers as
 * they were keeps everything known (roles, lag history, the chosen primary after a
 * failover); one that changes them starts again from the declared primaries.
 */
static void
srv_build(const struct cfg *c)
{
	size_t nshards = 0, nservers = 0;
	bool same = srv_cfg != NULL && srv_same_servers(srv_cfg, c);

	if (srv_cfg != NULL)
		cfg_unref((struct cfg *)srv_cfg);
	srv_cfg = c;
	cfg_ref((struct cfg *)c);
	if (same)
		return;
	srv_free_all();
	for (size_t i = 0; i < c->n_shards; i++)
		if (c->shards[i].n_servers > 1 && strlen(c->shards[i].uid) < SHM_SERVER_UID_MAX) {
			nshards++;
			nservers += c->shards[i].n_servers;
		}
	if (nservers > SHM_SERVERS_MAX)
		log_error("%zu servers in [shards]: only the first %d are watched", nservers,
			  SHM_SERVERS_MAX);
	srv_shards = calloc(nshards ? nshards : 1, sizeof(*srv_shards));
	srv_polls = calloc(nservers ? nservers : 1, sizeof(*srv_polls));
	if (srv_shards == NULL || srv_polls == NULL) {
		srv_free_all();
		log_error("cannot watch the shards' servers: out of memory");
		return;
	}
	for (size_t i = 0; i < c->n_shards; i++) {
		const struct cfg_shard *s = &c->shards[i];

		if (s->n_servers > 1 && strlen(s->uid) < SHM_SERVER_UID_MAX &&
		    srv_npolls + s->n_servers <= SHM_SERVERS_MAX)
			srv_build_shard(s, &srv_shards[srv_nshards++]);
	}
	srv_publish();
}

static void
srv_arm(void)
{
	double secs = cfg_current()->replicas.replica_poll_interval;
	struct timeval tv;

	if (secs < 0.05)
		secs = 0.05;
	tv.tv_sec = (time_t)secs;
	tv.tv_usec = (suseconds_t)((secs - (double)tv.tv_sec) * 1e6);
	evtimer_add(srv_tick_ev, &tv);
}

static void
srv_tick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	if (cfg_current() != srv_cfg)
		srv_build(cfg_current());
	for (size_t i = 0; i < srv_npolls; i++) {
		struct srv_poll *p = &srv_polls[i];

		if (p->busy && ++p->busy_ticks >= SRV_STUCK_TICKS && p->st.role != SHM_SRV_DOWN) {
			srv_set_role(p, SHM_SRV_DOWN, "it does not answer");
			srv_publish();
		}
		if (p->busy)
			continue;
		p->busy = true;
		pgc_query(p->pgc, srv_sql, 0, NULL, srv_answer, p);
	}
	srv_arm();
}

/* servers_init: see admin_int.h. */
void
servers_init(struct event_base *base)
{
	srv_base = base;
	srv_tick_ev = evtimer_new(base, srv_tick, NULL);
	if (srv_tick_ev == NULL) {
		log_error("cannot watch the shards' servers: out of memory");
		return;
	}
	srv_build(cfg_current());
	srv_tick(-1, 0, NULL);
}

/* servers_snapshot: see admin_int.h. */
size_t
servers_snapshot(const char *uid, struct shm_server *out, size_t cap)
{
	size_t n = 0;

	for (size_t i = 0; i < srv_npolls && n < cap; i++)
		if (strcmp(srv_polls[i].st.uid, uid) == 0)
			out[n++] = srv_polls[i].st;
	return n;
}

/* ---- SWITCHOVER (switchover.c runs it) ---- */

static struct srv_shard *
srv_shard_find(const char *uid)
{
	for (size_t i = 0; i < srv_nshards; i++)
		if (strcmp(srv_shards[i].uid, uid) == 0)
			return &srv_shards[i];
	return NULL;
}

static struct srv_poll *
srv_poll_find(const struct srv_shard *sh, int index)
{
	for (size_t i = 0; i < srv_npolls; i++)
		if (srv_polls[i].shard == sh && (int)srv_polls[i].st.index == index)
			return &srv_polls[i];
	return NULL;
}

/* servers_switch_begin: see admin_int.h. */
bool
servers_switch_begin(const char *uid, int *from, int *to, struct nk_error *err)
{
	struct srv_shard *sh = srv_shard_find(uid);
	const struct srv_poll *best = NULL;

	if (sh == NULL)
		return nk_error_set(err, ERRCODE_UNDEFINED_OBJECT,
				    "shard \"%s\" has no standbys to switch to",
				    uid);
	if (sh->switching)
		return nk_error_set(err, ERRCODE_OBJECT_IN_USE,
				    "a switchover of shard \"%s\" is running", uid);
	if (sh->chosen < 0 || srv_poll_find(sh, sh->chosen) == NULL ||
	    srv_poll_find(sh, sh->chosen)->st.role != SHM_SRV_PRIMARY)
		return nk_error_set(err, ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
				    "shard \"%s\" has no primary to switch from",
				    uid);
	for (size_t i = 0; i < srv_npolls; i++) {
		const struct srv_poll *p = &srv_polls[i];

		if (p->shard == sh && p->st.role == SHM_SRV_STANDBY &&
		    (p->st.flags & SHM_SRV_F_LAG) && (best == NULL || p->st.lag_ms < best->st.lag_ms))
			best = p;
	}
	if (best == NULL)
		return nk_error_set(err, ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
				    "no standby of shard \"%s\" is serving with a "
				    "known lag", uid);
	*from = sh->chosen;
	*to = (int)best->st.index;
	sh->switching = true;
	srv_mark_chosen(sh);
	srv_publish();
	log_info("shard %s: switchover from server %d to server %d: its statements wait",
		 uid, *from, *to);
	return true;
}

/* servers_switch_end: see admin_int.h. */
void
servers_switch_end(const char *uid, int primary)
{
	struct srv_shard *sh = srv_shard_find(uid);
	struct srv_poll *p;

	if (sh == NULL)
		return;
	sh->switching = false;
	sh->chosen = primary;
	p = srv_poll_find(sh, primary);
	if (p != NULL && p->st.role != SHM_SRV_PRIMARY) {
		/* promoted (pg_promote() waited for it): a primary, before its next answer */
		p->st.role = SHM_SRV_PRIMARY;
		p->st.flags &= ~SHM_SRV_F_READ_ONLY;
	}
	srv_mark_chosen(sh);
	srv_publish();
	log_info("shard %s: server %d is its primary", uid, primary);
}

/* servers_pgc: see admin_int.h. */
struct pgc *
servers_pgc(const char *uid, int index)
{
	struct srv_shard *sh = srv_shard_find(uid);
	struct srv_poll *p = sh != NULL ? srv_poll_find(sh, index) : NULL;

	return p != NULL ? p->pgc : NULL;
}
