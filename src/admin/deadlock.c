/*
 * deadlock.c - the distributed deadlock detector in the admin process.
 *
 * Each Postgres server breaks the wait cycles it sees, but not one whose waits are on
 * different servers: client A's statement waits on shard 1 for client B's transaction while
 * B's waits on shard 2 for A's, and both wait until a lock_timeout or statement_timeout (if
 * any). So every tick the detector asks each server of the topology's shards (its
 * maintenance database) which backends have waited for a lock longer than
 * distributed_deadlock_timeout, and by whom they are blocked (pg_locks, pg_blocking_pids).
 * When some have, it gathers the shard links every worker lists ('x' rows: client id, shard,
 * backend pid, wlist.c), turns the backends' waits into waits between neki clients, and
 * looks for a cycle. A cycle found twice in a row (the second look comes a moment later:
 * waits read from several servers at different instants could make one that is not there)
 * loses the client that began waiting last: the worker holding it cancels that statement
 * (SHM_CMD_DEADLOCK), and the client gets 40P01 "deadlock detected" with the cycle in the
 * DETAIL (exec/route_deadlock.c). A cycle inside one server between single backends is left
 * to that server, which sees it. Waits on clients of another neki host are not seen: the
 * detector knows the backends of its own workers only.
 * Entry point: deadlock_init().
 */
#include "neki/base.h"

#include "admin_int.h"
#include "deadlock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "neki/config.h"
#include "neki/log.h"
#include "neki/proc.h"
#include "neki/shm.h"
#include "neki/topology.h"

#define DL_TICK_MS 1000
#define DL_CONFIRM_MS 200	/* the second look at a cycle */
#define DL_SERVERS_MAX 64
#define DL_WAITS_MAX 512	/* backend waits considered per pass */
#define DL_LINKS_MAX 4096	/* client links mapped per pass */

/* A Postgres server of the shards: one connection to its maintenance database. */
struct dl_server {
	char key[ADM_NAME_MAX + 16];	/* host:port */
	struct pgc *pgc;		/* owned */
	bool used;			/* a shard of the current topology is on it */
};

/* A backend waiting for another, on server <server>; then mapped to their clients. */
struct dl_wait {
	size_t server;
	uint32_t waiter, blocker;	/* backend pids */
	double wait_s;			/* how long the waiter waited */
	uint64_t from, to;		/* their clients; 0 = not one of ours */
	char uid[ADM_NAME_MAX];		/* the waiter's shard */
};

/* A shard link of a client ('x' row). */
struct dl_link {
	uint64_t client;
	size_t server;
	uint32_t pid;
	char uid[ADM_NAME_MAX];
};

static struct event_base *dl_base;	/* borrowed */
static struct event *dl_tick_ev;	/* owned */
static struct dl_server dl_servers[DL_SERVERS_MAX];
static size_t dl_nservers;
static bool dl_busy;			/* a pass runs */
static size_t dl_pending;		/* servers yet to answer */
static struct dl_wait dl_waits[DL_WAITS_MAX];
static size_t dl_nwaits;
static struct dl_link *dl_links;	/* owned, DL_LINKS_MAX */
static size_t dl_nlinks;
static uint64_t dl_suspect;		/* the client the last pass would cancel; 0 */
static uint32_t dl_suspect_pid;

static void dl_schedule(long ms);

/* ---- the servers ---- */

static void
dl_server_key(const struct cfg_shard *s, char *key, size_t len)
{
	snprintf(key, len, "%s:%d", s->host != NULL ? s->host : "", s->port);
}

/* The server of shard <uid>, connected on first use; SIZE_MAX when none can be. */
static size_t
dl_server_of(const char *uid)
{
	const struct cfg_shard *s = cfg_shard_find(cfg_current(), uid);
	char key[sizeof(dl_servers[0].key)], *ci;
	struct dl_server *v;

	if (s == NULL)
		return SIZE_MAX;
	dl_server_key(s, key, sizeof(key));
	for (size_t i = 0; i < dl_nservers; i++)
		if (strcmp(dl_servers[i].key, key) == 0)
			return i;
	if (dl_nservers == DL_SERVERS_MAX || asprintf(&ci, "%s dbname=postgres "
		"application_name=neki-deadlock", s->conninfo) == -1)
		return SIZE_MAX;
	v = &dl_servers[dl_nservers];
	snprintf(v->key, sizeof(v->key), "%s", key);
	if ((v->pgc = pgc_new(dl_base, uid)) != NULL) {
		pgc_set_quiet(v->pgc, true);
		pgc_set_conninfo(v->pgc, ci);
	}
	free(ci);
	return v->pgc != NULL ? dl_nservers++ : SIZE_MAX;
}

/* Mark the servers of the topology's shards used. */
static void
dl_collect(const struct topo_model *m)
{
	for (size_t i = 0; i < dl_nservers; i++)
		dl_servers[i].used = false;
	for (size_t g = 0; m != NULL && g < m->ngroups; g++)
		for (size_t k = 0; k < m->groups[g].nranges; k++) {
			const char *uid = m->groups[g].ranges[k].shard_uid;
			size_t i = uid != NULL ? dl_server_of(uid) : SIZE_MAX;

			if (i != SIZE_MAX)
				dl_servers[i].used = true;
		}
}

/* ---- the cycle ---- */

/* The first wait of client <from> on another client at or after index <start>; SIZE_MAX
 * when none. */
static size_t
dl_wait_of(uint64_t from, size_t start)
{
	for (size_t i = start; i < dl_nwaits; i++)
		if (dl_waits[i].from == from && dl_waits[i].to != 0)
			return i;
	return SIZE_MAX;
}

/* The search's mark of client <c>: 0 not reached, 1 on the path, 2 done. */
static uint8_t *
dl_mark(uint64_t c)
{
	static uint64_t ids[2 * DL_WAITS_MAX];
	static uint8_t marks[2 * DL_WAITS_MAX];
	static size_t n;

	if (c == 0) {		/* (a new search) */
		n = 0;
		return NULL;
	}
	for (size_t i = 0; i < n; i++)
		if (ids[i] == c)
			return &marks[i];
	ids[n] = c;		/* (two per wait at most: there is room) */
	marks[n] = 0;
	return &marks[n++];
}

/*
 * Depth-first from client <at>, reached by the waits path[0..n): true with the cycle in
 * path[*first..*len) when a wait leads back to a client on the path.
 */
static bool
dl_search(uint64_t at, size_t *path, size_t n, size_t *first, size_t *len)
{
	*dl_mark(at) = 1;
	for (size_t i = dl_wait_of(at, 0); i != SIZE_MAX; i = dl_wait_of(at, i + 1)) {
		uint8_t *m = dl_mark(dl_waits[i].to);

		path[n] = i;
		if (*m == 1) {
			for (*first = 0; dl_waits[path[*first]].from != dl_waits[i].to; (*first)++)
				;
			*len = n + 1 - *first;
			return true;
		}
		if (*m == 0 && dl_search(dl_waits[i].to, path, n + 1, first, len))
			return true;
	}
	*dl_mark(at) = 2;
	return false;
}

/* A cycle of one server's backends, each waiting from the backend it is waited on at:
 * that server sees it and breaks it itself. */
static bool
dl_server_sees(const size_t *path, size_t n)
{
	for (size_t k = 0; k < n; k++) {
		const struct dl_wait *a = &dl_waits[path[k]], *b = &dl_waits[path[(k + 1) % n]];

		if (a->server != b->server || a->blocker != b->waiter)
			return false;
	}
	return true;
}

/* The DETAIL of cycle <path>: who waits for whom, where. */
static void
dl_detail(const size_t *path, size_t n, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (size_t k = 0; k < n && used < len; k++) {
		const struct dl_wait *w = &dl_waits[path[k]];
		int m = snprintf(buf + used, len - used, "%sClient %llu waits on shard \"%s\" "
				 "(backend %u) for client %llu (backend %u).", k > 0 ? "\n" : "",
				 (unsigned long long)w->from, w->uid, w->waiter,
				 (unsigned long long)w->to, w->blocker);

		used += m > 0 ? (size_t)m : 0;
	}
}

/* Cancel the statement of the wait that began last in <path>. */
static void
dl_break(const size_t *path, size_t n)
{
	const struct dl_wait *v = &dl_waits[path[0]];
	struct shm_msg m = { .cmd = SHM_CMD_DEADLOCK,
			     .key_len = sizeof(v->from) + sizeof(v->waiter) };
	uint64_t *seqs;

	for (size_t k = 1; k < n; k++)
		if (dl_waits[path[k]].wait_s < v->wait_s)
			v = &dl_waits[path[k]];
	if (v->from != dl_suspect || v->waiter != dl_suspect_pid) {
		dl_suspect = v->from;		/* seen once: look again in a moment */
		dl_suspect_pid = v->waiter;
		dl_schedule(DL_CONFIRM_MS);
		return;
	}
	dl_suspect = 0;
	seqs = calloc(shm_n_procs(), sizeof(*seqs));
	memcpy(m.key, &v->from, sizeof(v->from));
	memcpy(m.key + sizeof(v->from), &v->waiter, sizeof(v->waiter));
	snprintf(m.name, sizeof(m.name), "%s", v->uid);
	dl_detail(path, n, m.text, sizeof(m.text));
	log_info("distributed deadlock: canceling client %llu's statement on shard %s: %s",
		 (unsigned long long)v->from, v->uid, m.text);
	if (seqs != NULL)
		(void)shm_mbox_broadcast(SHM_PROC_WORKER, &m, seqs);
	free(seqs);
}

/* Look for a cycle; break it unless one server sees it (and breaks it itself). */
static void
dl_find(void)
{
	size_t path[DL_WAITS_MAX], first = 0, len = 0;
	bool found = false;

	(void)dl_mark(0);
	for (size_t i = 0; i < dl_nwaits && !found; i++)
		if (dl_waits[i].to != 0 && *dl_mark(dl_waits[i].from) == 0)
			found = dl_search(dl_waits[i].from, path, 0, &first, &len);
	if (found && !dl_server_sees(path + first, len))
		dl_break(path + first, len);
	else
		dl_suspect = 0;
}

/* ---- mapping backends to clients ---- */

static void
dl_link_row(void *arg, const char *const *v)
{
	struct dl_link *l = &dl_links[dl_nlinks];
	size_t server = dl_server_of(v[1]);

	(void)arg;
	if (dl_nlinks == DL_LINKS_MAX || server == SIZE_MAX)
		return;
	l->client = strtoull(v[0], NULL, 10);
	l->server = server;
	l->pid = (uint32_t)strtoul(v[2], NULL, 10);
	snprintf(l->uid, sizeof(l->uid), "%s", v[1]);
	dl_nlinks++;
}

/* The link of backend <pid> on <server>; NULL when no client of ours holds it. */
static const struct dl_link *
dl_link_of(size_t server, uint32_t pid)
{
	for (size_t i = 0; i < dl_nlinks; i++)
		if (dl_links[i].server == server && dl_links[i].pid == pid)
			return &dl_links[i];
	return NULL;
}

/* The workers' links are in: map the waits, look for a cycle, end the pass. */
static void
dl_mapped(void *arg)
{
	(void)arg;
	dl_nlinks = 0;
	if (dl_links != NULL)
		lists_foreach_row('x', 3, dl_link_row, NULL);
	for (size_t i = 0; i < dl_nwaits; i++) {
		struct dl_wait *w = &dl_waits[i];
		const struct dl_link *a = dl_link_of(w->server, w->waiter);
		const struct dl_link *b = dl_link_of(w->server, w->blocker);

		w->from = a != NULL ? a->client : 0;
		w->to = b != NULL && a != NULL && b->client != a->client ? b->client : 0;
		snprintf(w->uid, sizeof(w->uid), "%s", a != NULL ? a->uid : "");
	}
	dl_find();
	dl_busy = false;
}

/* ---- the pass ---- */

/* One server's waits: rows (waiter pid, '{blocker pids}', seconds waited). */
static void
dl_add_waits(size_t server, const struct pgc_res *res)
{
	for (size_t r = 0; r < pgc_res_rows(res); r++) {
		const char *p = pgc_res_get(res, r, 1);
		uint32_t waiter = (uint32_t)strtoul(pgc_res_get(res, r, 0), NULL, 10);
		double wait_s = strtod(pgc_res_get(res, r, 2), NULL);
		char *end;

		for (p = p != NULL ? p + 1 : ""; *p != '\0' && dl_nwaits < DL_WAITS_MAX; p = end) {
			unsigned long b = strtoul(p, &end, 10);

			if (end == p)
				break;
			if (*end == ',')
				end++;
			dl_waits[dl_nwaits++] = (struct dl_wait){ .server = server, .waiter = waiter,
				.blocker = (uint32_t)b, .wait_s = wait_s };
		}
	}
}

static void
waits_cb(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	size_t server = (size_t)(uintptr_t)arg;

	if (err != NULL)
		log_debug("deadlock detector: server %s not read: %s", dl_servers[server].key,
			  err->message);
	else
		dl_add_waits(server, res);
	if (--dl_pending > 0)
		return;
	if (dl_nwaits == 0 || !lists_gather_run(dl_mapped, NULL)) {
		dl_suspect = 0;
		dl_busy = false;
	}
}

static void
dl_pass(void)
{
	char timeout[32];
	const char *params[1] = { timeout };

	snprintf(timeout, sizeof(timeout), "%.0f milliseconds",
		 cfg_current()->neki.distributed_deadlock_timeout * 1000);
	dl_collect(rev_get()->model);
	dl_nwaits = dl_pending = 0;
	for (size_t i = 0; i < dl_nservers; i++)
		dl_pending += dl_servers[i].used;
	if (dl_pending == 0)
		return;
	dl_busy = true;
	for (size_t i = 0; i < dl_nservers; i++)
		if (dl_servers[i].used)
			pgc_query(dl_servers[i].pgc, "SELECT pid, pg_catalog.pg_blocking_pids(pid)"
				  "::text, extract(epoch FROM now() - waitstart) "
				  "FROM pg_catalog.pg_locks WHERE NOT granted "
				  "AND waitstart < now() - $1::interval", 1, params, waits_cb,
				  (void *)(uintptr_t)i);
}

static void
dl_tick_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	if (!dl_busy && cfg_current()->neki.distributed_deadlock_timeout > 0)
		dl_pass();
	dl_schedule(DL_TICK_MS);
}

static void
dl_schedule(long ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	if (event_add(dl_tick_ev, &tv) == -1)
		log_error("deadlock detector: could not schedule its next pass");
}

/* deadlock_init: see deadlock.h. */
void
deadlock_init(struct event_base *base)
{
	dl_base = base;
	dl_links = malloc(DL_LINKS_MAX * sizeof(*dl_links));
	dl_tick_ev = evtimer_new(base, dl_tick_cb, NULL);
	if (dl_tick_ev == NULL)
		fatal("could not set up the distributed deadlock detector");
	dl_schedule(DL_TICK_MS);
}
