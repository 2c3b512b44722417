/*
 * follow.c - keeping several neki hosts on one topology, and waiting for them.
 *
 * The watcher connection to the authoritative shard LISTENs on channel neki_topology and,
 * every FOLLOW_TICK_MS, upserts this host's row in __neki.routers (host id, the revision
 * every local process has switched to, heartbeat) and reads the newest stored revision, so a
 * missed notification or a revision stored before a crash is published within one tick;
 * each beat also takes the epoch of global transaction ids until it has one (epoch.c).
 * Without any topology (no cache file) the tick looks for a store on every [shards] entry
 * (discovery). Also here: wait_for_data_topology (local shm slots + fresh router rows),
 * list_shards (one probe connection per shard) and role membership checks.
 * Entry points: follow_init(), follow_set_authority(), follow_wait(), follow_list_shards().
 */
#include "neki/base.h"

#include "admin_int.h"
#include "epoch.h"
#include "nekidesc.h"
#include "servers.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "neki/clock.h"
#include "neki/config.h"
#include "neki/log.h"
#include "neki/shm.h"
#include "neki/shm_servers.h"

#define FOLLOW_TICK_MS 1000
#define FOLLOW_FRESH_SECS 10		/* a router row older than this is a dead host */
#define FOLLOW_WAIT_POLL_MS 50

static struct event_base *fbase;	/* borrowed */
static struct pgc *watcher;		/* owned */
static struct event *tick_ev;		/* owned */
static char host_id[128];		/* "<hostname>:<listen_port>" */
static char authority[ADM_NAME_MAX];	/* shard uid the watcher follows; "" = none */
static bool schema_ok;			/* the store schema exists (checked on this connection) */
static bool tick_busy;			/* a tick's queries are in flight */
static bool fetch_busy;			/* fetching a newer revision */

/* follow_conninfo() of server <index> of shard <uid>, or of the shard (SIZE_MAX). */
static char *
follow_conninfo_of(const char *uid, size_t index)
{
	const struct cfg *c = cfg_current();
	const struct cfg_shard *s = cfg_shard_find(c, uid);
	const char *db = NULL, *base;
	char *out;

	if (s == NULL || (index != SIZE_MAX && index >= s->n_servers))
		return NULL;
	base = index == SIZE_MAX ? s->conninfo : s->servers[index].conninfo;
	if (s->dbname == NULL) {
		for (size_t i = 0; i < c->n_databases && db == NULL; i++)
			if (c->databases[i].topology)
				db = c->databases[i].name;
		if (db == NULL)
			db = "postgres";
	}
	if (asprintf(&out, "%s%s%s application_name=neki-admin", base,
		     db ? " dbname=" : "", db ? db : "") == -1)
		return NULL;
	return out;
}

char *
follow_conninfo(const char *uid)
{
	return follow_conninfo_of(uid, SIZE_MAX);
}

char *
follow_server_conninfo(const char *uid, size_t index)
{
	return follow_conninfo_of(uid, index);
}

uint64_t
follow_local_revision_seen(void)
{
	uint64_t low = UINT64_MAX;

	for (unsigned i = 0; i < shm_n_procs(); i++) {
		struct shm_proc *p = shm_proc(i);
		uint32_t st = atomic_load(&p->state);

		if (atomic_load(&p->pid) == 0 ||
		    (st != SHM_PST_RUNNING && st != SHM_PST_PAUSED && st != SHM_PST_STOPPING &&
		     st != SHM_PST_SUSPENDED))
			continue;
		if (atomic_load(&p->revision_seen) < low)
			low = atomic_load(&p->revision_seen);
	}
	return low == UINT64_MAX ? 0 : low;
}

/* ---- following the store ---- */

static void
fetched_cb(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	fetch_busy = false;
	if (err != NULL || pgc_res_rows(res) == 0)
		return;
	if (strtoull(pgc_res_get(res, 0, 0), NULL, 10) > rev_get()->revision &&
	    !rev_install(strtoull(pgc_res_get(res, 0, 0), NULL, 10), pgc_res_get(res, 0, 1), true))
		log_error("could not follow the newest stored data topology revision");
}

/* The store has <newest>: fetch and publish it when it is newer than ours. */
static void
follow_newest(uint64_t newest)
{
	if (newest <= rev_get()->revision || fetch_busy)
		return;
	fetch_busy = true;
	pgc_query(watcher, "SELECT revision, topology FROM __neki.data_topology_log"
		  " ORDER BY revision DESC LIMIT 1", 0, NULL, fetched_cb, NULL);
}

static void
notify_cb(void *arg, const char *channel, const char *payload)
{
	if (strcmp(channel, "neki_topology") == 0)
		follow_newest(strtoull(payload, NULL, 10));
	else
		(void)ddlsync_notified(channel, payload);
}

static void
beat_cb(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	tick_busy = false;
	if (err != NULL) {
		log_debug("router heartbeat failed: %s", err->message);
		schema_ok = false;
		return;
	}
	if (pgc_res_rows(res) > 0 && pgc_res_get(res, 0, 0) != NULL)
		follow_newest(strtoull(pgc_res_get(res, 0, 0), NULL, 10));
	if (pgc_res_rows(res) > 0 && pgc_res_get(res, 0, 2) != NULL)
		ddlsync_learned(strtoull(pgc_res_get(res, 0, 2), NULL, 10),
				strtoull(pgc_res_get(res, 0, 3), NULL, 10));
}

/* Upsert our router row and read the newest stored revision. */
static void
follow_beat(void)
{
	char rev[24], sv[24];
	const char *params[3] = { host_id, rev, sv };

	snprintf(rev, sizeof(rev), "%" PRIu64, follow_local_revision_seen());
	snprintf(sv, sizeof(sv), "%" PRIu64, shm_schema_version());
	epoch_take();
	tick_busy = true;
	pgc_query(watcher,
		  "WITH up AS (INSERT INTO __neki.routers (host_id, revision, schema_version)"
		  " VALUES ($1, $2, $3) ON CONFLICT (host_id) DO UPDATE SET revision ="
		  " excluded.revision, schema_version = excluded.schema_version,"
		  " heartbeat = now() RETURNING 1)"
		  " SELECT (SELECT max(revision) FROM __neki.data_topology_log), (SELECT count(*)"
		  " FROM up), c.schema_version, c.seq_epoch FROM __neki.cluster_state c",
		  3, params, beat_cb, NULL);
}

static void
schema_cb(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	if (err != NULL) {
		log_warn("could not create the data topology store: %s", err->message);
		return;
	}
	schema_ok = true;
	if (!tick_busy)
		follow_beat();
}

/* The store exists (LISTEN next) or could not be made (its transaction is rolled back). */
static void
store_cb(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	if (err != NULL) {
		log_warn("could not create the data topology store: %s", err->message);
		pgc_query(watcher, "ROLLBACK", 0, NULL, NULL, NULL);
		return;
	}
	pgc_query(watcher, "LISTEN neki_topology; LISTEN neki_catalog; LISTEN neki_sequences;"
		  " LISTEN neki_activity",
		  0, NULL, schema_cb, NULL);
}

/* Connected (again): create the schema if needed and LISTEN; the beat follows. */
static void
state_cb(void *arg, bool up)
{
	schema_ok = false;
	tick_busy = false;
	fetch_busy = false;
	if (!up)
		return;
	pgc_query(watcher, rev_store_ddl(), 0, NULL, store_cb, NULL);
}

void
follow_announce(void)
{
	if (authority[0] != '\0' && schema_ok && !tick_busy && pgc_is_up(watcher))
		follow_beat();
}

void
follow_set_authority(const char *uid)
{
	char *conninfo;

	if (strcmp(uid, authority) == 0 || uid[0] == '\0')
		return;
	conninfo = follow_conninfo(uid);
	if (conninfo == NULL) {
		log_warn("the authoritative shard \"%s\" is not declared in [shards]", uid);
		return;
	}
	snprintf(authority, sizeof(authority), "%s", uid);
	schema_ok = false;
	pgc_set_conninfo(watcher, conninfo);
	pgc_connect(watcher);
	free(conninfo);
}

bool
follow_query(const char *sql, pgc_done_fn cb, void *arg)
{
	return follow_query_params(sql, 0, NULL, cb, arg);
}

bool
follow_query_params(const char *sql, size_t n, const char *const *params, pgc_done_fn cb,
		    void *arg)
{
	if (authority[0] == '\0')
		return false;
	pgc_query(watcher, sql, n, params, cb, arg);
	return true;
}

const char *
follow_host_id(void)
{
	return host_id;
}

/* ---- probes: one short-lived connection per shard ---- */

struct probe;
typedef void (*probe_fn)(struct probe *p, const struct pgc_res *res, const struct nk_error *err);

struct probe {
	struct pgc *pgc;		/* owned (freed from the loop after the answer) */
	const struct cfg_shard *shard;	/* borrowed from the config in force */
	probe_fn done;
	void *arg;			/* borrowed: the caller's */
	size_t index;			/* the shard's position in [shards] */
};

static void
probe_cb(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	struct probe *p = arg;

	p->done(p, res, err);
	pgc_free_later(p->pgc);
	free(p);
}

/* Run <sql> on shard <i> of [shards]; <done> gets the answer. False when out of memory. */
static bool
probe_start(size_t i, const char *sql, probe_fn done, void *arg)
{
	const struct cfg *c = cfg_current();
	struct probe *p = calloc(1, sizeof(*p));
	char *conninfo = follow_conninfo(c->shards[i].uid);

	if (p == NULL || conninfo == NULL || (p->pgc = pgc_new(fbase, c->shards[i].uid)) == NULL) {
		free(p);
		free(conninfo);
		return false;
	}
	p->shard = &c->shards[i];
	p->done = done;
	p->arg = arg;
	p->index = i;
	pgc_set_conninfo(p->pgc, conninfo);
	free(conninfo);
	pgc_query(p->pgc, sql, 0, NULL, probe_cb, p);
	return true;
}

static void
discovered(struct probe *p, const struct pgc_res *res, const struct nk_error *err)
{
	if (err == NULL && pgc_res_rows(res) > 0 && rev_get()->revision == 0 &&
	    authority[0] == '\0') {
		log_info("found a data topology store on shard \"%s\"", p->shard->uid);
		follow_set_authority(p->shard->uid);
	}
}

/* No topology known: ask every declared shard whether it holds a store with revisions. */
static void
discover(void)
{
	const struct cfg *c = cfg_current();

	for (size_t i = 0; i < c->n_shards; i++)
		if (!probe_start(i, "SELECT 1 FROM pg_catalog.pg_tables WHERE schemaname = '__neki'"
				 " AND tablename = 'data_topology_log'", discovered, NULL))
			return;
}

static void
tick_cb(evutil_socket_t fd, short what, void *arg)
{
	static unsigned ticks;

	ticks++;
	adm_stats_tick();
	if (authority[0] == '\0') {
		if (ticks % 3 == 1)
			discover();
		return;
	}
	if (!pgc_is_up(watcher))
		pgc_connect(watcher);
	else if (schema_ok && !tick_busy)
		follow_beat();
}

/* ---- wait_for_data_topology, wait_for_ddl ---- */

static void follow_wait_any(struct adm_req *req, uint64_t revision, uint64_t schema_version,
			    bool ddl, double timeout);

struct wait_job {
	struct adm_req *req;		/* borrowed until finished */
	uint64_t revision;
	uint64_t schema_version;	/* wait_for_ddl: the catalog's too; 0 otherwise */
	bool ddl;			/* wait_for_ddl rather than wait_for_data_topology */
	uint64_t deadline_ms;		/* nk_now_ms() */
	struct event *timer;		/* owned */
	bool remote_ok;			/* no fresh router row is behind */
	bool remote_busy;		/* the router query is in flight */
	int64_t remote_behind;		/* fresh hosts behind (last answer) */
};

/* Live local processes behind <revision>. */
static unsigned
local_behind(uint64_t revision)
{
	unsigned n = 0;

	for (unsigned i = 0; i < shm_n_procs(); i++) {
		struct shm_proc *p = shm_proc(i);
		uint32_t st = atomic_load(&p->state);

		if (atomic_load(&p->pid) != 0 &&
		    (st == SHM_PST_RUNNING || st == SHM_PST_PAUSED || st == SHM_PST_SUSPENDED) &&
		    atomic_load(&p->revision_seen) < revision)
			n++;
	}
	return n;
}

static void
wait_end(struct wait_job *w)
{
	event_free(w->timer);
	adm_req_finish(w->req);
	free(w);
}

static void
routers_cb(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	struct wait_job *w = arg;

	w->remote_busy = false;
	if (err == NULL && pgc_res_rows(res) > 0) {
		w->remote_behind = strtoll(pgc_res_get(res, 0, 0), NULL, 10);
		w->remote_ok = w->remote_behind == 0;
	}
}

/* Ask the registry how many fresh hosts (other than us) are behind. */
static void
wait_ask_remote(struct wait_job *w)
{
	char rev[24], fresh[24], sv[24];
	const char *params[4] = { host_id, rev, fresh, sv };

	if (authority[0] == '\0') {
		w->remote_ok = true;
		return;
	}
	if (w->remote_busy || !pgc_is_up(watcher) || !schema_ok)
		return;
	snprintf(rev, sizeof(rev), "%" PRIu64, w->revision);
	snprintf(fresh, sizeof(fresh), "%d", FOLLOW_FRESH_SECS);
	snprintf(sv, sizeof(sv), "%" PRIu64, w->schema_version);
	w->remote_busy = true;
	pgc_query(watcher, "SELECT count(*) FROM __neki.routers WHERE host_id <> $1"
		  " AND (revision < $2 OR schema_version < $4)"
		  " AND heartbeat > now() - make_interval(secs => $3)",
		  4, params, routers_cb, w);
}

static void
wait_tick(evutil_socket_t fd, short what, void *arg)
{
	struct wait_job *w = arg;
	struct timeval tv = { 0, FOLLOW_WAIT_POLL_MS * 1000 };
	unsigned behind = local_behind(w->revision) +
			  (shm_schema_version() < w->schema_version ? 1 : 0);
	struct nk_error err;

	if (behind == 0 && w->remote_ok && !w->remote_busy) {
		static const struct adm_col cols[2] = { { "wait_for_data_topology", ADM_T_INT8 },
							{ "wait_for_ddl", ADM_T_INT8 } };
		char rev[24];
		const char *vals[1] = { rev };

		snprintf(rev, sizeof(rev), "%" PRIu64, w->ddl ? w->schema_version : w->revision);
		adm_result_columns(&w->req->res, &cols[w->ddl], 1);
		adm_result_row(&w->req->res, vals);
		adm_result_complete(&w->req->res, "SELECT", true);
		wait_end(w);
		return;
	}
	if (nk_now_ms() >= w->deadline_ms) {
		if (w->ddl)
			nk_error_set(&err, ERRCODE_QUERY_CANCELED,
				     "timed out waiting for schema version %" PRIu64
				     " (cluster version %" PRIu64 ") on every neki host",
				     w->schema_version, w->revision);
		else
			nk_error_set(&err, ERRCODE_QUERY_CANCELED,
				     "timed out waiting for data topology revision %"
				     PRIu64, w->revision);
		if (w->ddl)
			nk_error_detail(&err, "This host's catalog has schema version %" PRIu64
					"; %" PRId64 " other neki hosts are behind (-1: the router "
					"registry could not be read).", shm_schema_version(),
					w->remote_behind);
		else if (w->remote_behind < 0 && behind == 0)
			nk_error_detail(&err, "Every local neki process runs it, but the router registry"
					" on the authoritative shard could not be read.");
		else if (w->remote_behind < 0)
			nk_error_detail(&err, "%u local neki processes have not switched to it yet.",
					behind);
		else
			nk_error_detail(&err, "%u local neki processes and %" PRId64 " other neki hosts"
					" have not switched to it yet.", behind, w->remote_behind);
		adm_result_error(&w->req->res, &err);
		wait_end(w);
		return;
	}
	if (behind == 0 && !w->remote_ok)
		wait_ask_remote(w);
	event_add(w->timer, &tv);
}

/* follow_wait_ddl: see admin_int.h. */
void
follow_wait_ddl(struct adm_req *req, uint64_t schema_version, uint64_t cluster_version,
		double timeout)
{
	follow_wait_any(req, cluster_version, schema_version, true, timeout);
}

void
follow_wait(struct adm_req *req, uint64_t revision, double timeout)
{
	follow_wait_any(req, revision, 0, false, timeout);
}

static void
follow_wait_any(struct adm_req *req, uint64_t revision, uint64_t schema_version, bool ddl,
		double timeout)
{
	struct wait_job *w = calloc(1, sizeof(*w));
	struct nk_error err;

	if (w == NULL || (w->timer = evtimer_new(fbase, wait_tick, w)) == NULL) {
		free(w);
		nk_error_oom(&err);
		adm_req_fail(req, &err);
		return;
	}
	w->req = req;
	w->revision = revision;
	w->schema_version = schema_version;
	w->ddl = ddl;
	w->deadline_ms = nk_now_ms() + (uint64_t)(timeout * 1000);
	w->remote_behind = -1;
	wait_tick(-1, 0, w);
}

/* ---- list_shards, SHOW SHARDS ---- */

static void follow_probe_shards(struct adm_req *req, bool console);

struct shards_job {
	struct adm_req *req;		/* borrowed until finished */
	bool console;			/* SHOW SHARDS rather than __neki.list_shards() */
	size_t pending;			/* probes not answered yet */
	size_t n;
	char (*writable)[8];		/* owned: "t", "f" or "" (unreachable) per shard */
	char (*mpx)[16];		/* owned: its max_prepared_transactions ("": unknown) */
};

/* One server of a shard as the listings show it. */
struct shard_row {
	const char *uid, *host, *kind, *role, *state;
	char port[16], server[24], lag[24], links[24];
	bool chosen, writable;		/* writes go there / the shard has a writable primary */
};

static const char *const srv_kind_names[] = { "primary", "replica", "rdonly" };

/* The row of a server from what the poller knows of it (<v>). */
static void
shard_row_polled(const struct shm_server *v, bool writable, struct shard_row *r)
{
	bool ro = v->role == SHM_SRV_STANDBY || (v->flags & SHM_SRV_F_READ_ONLY) != 0;

	r->role = shm_srv_role_str((enum shm_srv_role)v->role);
	r->state = v->role == SHM_SRV_DOWN || v->role == SHM_SRV_UNKNOWN ? "down" :
		   ro ? "read-only" : "up";
	r->chosen = (v->flags & SHM_SRV_F_CHOSEN) != 0;
	r->writable = writable;
	if ((v->flags & SHM_SRV_F_LAG) != 0 && v->role == SHM_SRV_STANDBY)
		snprintf(r->lag, sizeof(r->lag), "%" PRId64, v->lag_ms);
	else if (v->role == SHM_SRV_PRIMARY)
		snprintf(r->lag, sizeof(r->lag), "0");
}

/* Fill <r> for server <k> of shard <i>: probed now (one server) or polled (standbys). */
static void
shard_row(const struct shards_job *j, size_t i, size_t k, const struct shm_server *v,
	  size_t nv, struct shard_row *r)
{
	const struct cfg_shard *s = &cfg_current()->shards[i];
	bool writable = false;

	memset(r, 0, sizeof(*r));
	r->uid = s->uid;
	r->host = s->servers[k].host;
	r->kind = srv_kind_names[s->servers[k].kind];
	snprintf(r->port, sizeof(r->port), "%d", s->servers[k].port);
	snprintf(r->server, sizeof(r->server), "%zu", k);
	if (k == 0)
		snprintf(r->links, sizeof(r->links), "%" PRId64,
			 lists_count(LISTS_SHARD_SERVERS, s->uid));
	else {
		char name[96];

		snprintf(name, sizeof(name), "%s/%zu", s->uid, k);
		snprintf(r->links, sizeof(r->links), "%" PRId64,
			 lists_count(LISTS_SHARD_SERVERS, name));
	}
	if (s->n_servers == 1) {
		const char *w = j->writable[i];

		r->role = w[0] == '\0' ? "down" : w[0] == 't' ? "primary" : "standby";
		r->state = w[0] == '\0' ? "down" : w[0] == 't' ? "up" : "read-only";
		r->chosen = true;
		r->writable = w[0] == 't';
		if (w[0] == 't')
			snprintf(r->lag, sizeof(r->lag), "0");
		return;
	}
	for (size_t m = 0; m < nv; m++)
		writable |= (v[m].flags & SHM_SRV_F_CHOSEN) && v[m].role == SHM_SRV_PRIMARY &&
			    !(v[m].flags & SHM_SRV_F_READ_ONLY);
	for (size_t m = 0; m < nv; m++)
		if (v[m].index == k) {
			shard_row_polled(&v[m], writable, r);
			return;
		}
	r->role = "unknown";
	r->state = "down";
	r->writable = writable;
}

/* Every server of every shard, as rows of <cols> (SHOW SHARDS / list_shards). */
static void
shards_rows(struct shards_job *j)
{
	const struct cfg *c = cfg_current();
	char rev[24];

	snprintf(rev, sizeof(rev), "%" PRIu64, rev_get()->revision);
	for (size_t i = 0; i < j->n && i < c->n_shards; i++) {
		const struct cfg_shard *s = &c->shards[i];
		struct shm_server v[CFG_SHARD_SERVERS_MAX];
		size_t nv = s->n_servers > 1 ? servers_snapshot(s->uid, v, NK_ARRAY_LEN(v)) : 0;

		for (size_t k = 0; k < s->n_servers; k++) {
			struct shard_row r;

			shard_row(j, i, k, v, nv, &r);
			if (j->console) {
				const char *vals[10] = { r.uid, r.host, r.port, r.state, r.links,
							 r.server, r.kind, r.role,
							 r.chosen ? "t" : "f", r.lag[0] ? r.lag : NULL };

				adm_result_row(&j->req->res, vals);
			} else {
				const char *vals[12] = { r.uid, r.host, r.port, s->dbname,
							 r.writable ? "t" : "f", rev, r.server,
							 r.kind, r.role, r.state,
							 r.lag[0] ? r.lag : NULL,
							 j->mpx[i][0] ? j->mpx[i] : NULL };

				adm_result_row(&j->req->res, vals);
			}
		}
	}
}

/*
 * SHOW SHARDS: uid, host, port, state (up/read-only/down), links (the server links every
 * worker has to that server: its routed pools, from the gathered SHOW SERVERS rows), then
 * server, kind, role, primary (writes go there), lag_ms; one row per server.
 */
static void
shards_show(void *arg)
{
	struct shards_job *j = arg;
	static const struct adm_col cols[] = {
		{ "uid", ADM_T_TEXT }, { "host", ADM_T_TEXT }, { "port", ADM_T_INT4 },
		{ "state", ADM_T_TEXT }, { "links", ADM_T_INT4 }, { "server", ADM_T_INT4 },
		{ "kind", ADM_T_TEXT }, { "role", ADM_T_TEXT }, { "primary", ADM_T_BOOL },
		{ "lag_ms", ADM_T_INT8 },
	};

	adm_result_columns(&j->req->res, cols, NK_ARRAY_LEN(cols));
	shards_rows(j);
	adm_result_complete(&j->req->res, "SHOW", false);
	adm_req_finish(j->req);
	free(j->writable);
	free(j->mpx);
	free(j);
}

static void
shards_reply(struct shards_job *j)
{
	if (j->console) {
		if (!lists_gather_run(shards_show, j))
			shards_show(j);		/* no memory to gather: links counted as 0 */
		return;
	}
	size_t ncols;
	const struct adm_col *cols = nekidesc_cols("list_shards", &ncols);	/* (one table) */

	adm_result_columns(&j->req->res, cols, ncols);
	shards_rows(j);
	adm_result_complete(&j->req->res, "SELECT", true);
	adm_req_finish(j->req);
	free(j->writable);
	free(j->mpx);
	free(j);
}

static void
shard_probed(struct probe *p, const struct pgc_res *res, const struct nk_error *err)
{
	struct shards_job *j = p->arg;

	if (err == NULL && pgc_res_rows(res) > 0 && p->index < j->n) {
		snprintf(j->writable[p->index], sizeof(j->writable[0]), "%s",
			 pgc_res_get(res, 0, 0));
		snprintf(j->mpx[p->index], sizeof(j->mpx[0]), "%s", pgc_res_get(res, 0, 1));
	}
	if (--j->pending == 0)
		shards_reply(j);
}

void
follow_list_shards(struct adm_req *req)
{
	follow_probe_shards(req, false);
}

void
follow_show_shards(struct adm_req *req)
{
	follow_probe_shards(req, true);
}

/* Probe every [shards] entry of one server (the poller knows the others; list_shards()
 * probes the others' first server too, for max_prepared_transactions: __neki.tx_mode
 * atomic needs it above 0), then answer list_shards() or SHOW SHARDS. */
static void
follow_probe_shards(struct adm_req *req, bool console)
{
	const struct cfg *c = cfg_current();
	struct shards_job *j = calloc(1, sizeof(*j));

	if (j == NULL || (c->n_shards && ((j->writable = calloc(c->n_shards, 8)) == NULL ||
					  (j->mpx = calloc(c->n_shards, 16)) == NULL))) {
		struct nk_error err;

		if (j != NULL)
			free(j->writable);
		free(j);
		nk_error_oom(&err);
		adm_req_fail(req, &err);
		return;
	}
	j->req = req;
	j->console = console;
	j->n = c->n_shards;
	j->pending = 1;		/* held until every probe is started */
	for (size_t i = 0; i < c->n_shards; i++) {
		if (c->shards[i].n_servers > 1 && console)
			continue;
		j->pending++;
		if (!probe_start(i, "SELECT NOT pg_catalog.pg_is_in_recovery(), "
				 "pg_catalog.current_setting('max_prepared_transactions')",
				 shard_probed, j))
			j->pending--;
	}
	if (--j->pending == 0)
		shards_reply(j);
}

/* ---- notification_queue_usage ---- */

static void
usage_probed(struct probe *p, const struct pgc_res *res, const struct nk_error *err)
{
	static const struct adm_col cols[] = { { "shard_uid", ADM_T_TEXT },
					       { "usage", ADM_T_FLOAT8 } };
	struct adm_req *req = p->arg;
	struct nk_error e;

	if (err != NULL || pgc_res_rows(res) != 1) {
		nk_error_set(&e, ERRCODE_CONNECTION_FAILURE,
			     "could not read the notification queue of shard \"%s\": "
			     "%s", p->shard->uid, err != NULL ? err->message : "no row");
		adm_result_error(&req->res, &e);
	} else {
		const char *vals[2] = { p->shard->uid, pgc_res_get(res, 0, 0) };

		adm_result_columns(&req->res, cols, NK_ARRAY_LEN(cols));
		adm_result_row(&req->res, vals);
		adm_result_complete(&req->res, "SELECT", true);
	}
	adm_req_finish(req);
}

/* follow_queue_usage: see admin_int.h. The authoritative group has one shard (V6). */
void
follow_queue_usage(struct adm_req *req)
{
	const struct cfg *c = cfg_current();
	struct nk_error err;

	for (size_t i = 0; i < c->n_shards && authority[0] != '\0'; i++)
		if (strcmp(c->shards[i].uid, authority) == 0 &&
		    probe_start(i, "SELECT pg_catalog.pg_notification_queue_usage()", usage_probed,
				req))
			return;
	if (authority[0] == '\0')
		nk_error_set(&err, ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
			     "no data topology is published: the notify shard group "
			     "is unknown");
	else
		nk_error_oom(&err);
	adm_req_fail(req, &err);
}

/* ---- role membership on the authoritative shard ---- */

struct role_job {
	struct adm_req *req;		/* borrowed */
	void (*cb)(struct adm_req *req, bool member);
};

static void
role_cb(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	struct role_job *j = arg;
	bool member = err == NULL && pgc_res_rows(res) > 0 && pgc_res_get(res, 0, 0) != NULL &&
		      strcmp(pgc_res_get(res, 0, 0), "t") == 0;

	j->cb(j->req, member);
	free(j);
}

void
follow_check_role(struct adm_req *req, const char *role,
		  void (*cb)(struct adm_req *req, bool member))
{
	struct role_job *j;
	const char *params[2] = { req->user, role };

	if (authority[0] == '\0' || (j = calloc(1, sizeof(*j))) == NULL) {
		cb(req, false);
		return;
	}
	j->req = req;
	j->cb = cb;
	pgc_query(watcher, "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_roles u, pg_catalog.pg_roles r"
		  " WHERE u.rolname = $1 AND r.rolname = $2 AND pg_catalog.pg_has_role(u.oid, r.oid,"
		  " 'MEMBER'))", 2, params, role_cb, j);
}

void
follow_init(struct event_base *base)
{
	struct timeval tv = { FOLLOW_TICK_MS / 1000, (FOLLOW_TICK_MS % 1000) * 1000 };
	char host[64];

	fbase = base;
	if (gethostname(host, sizeof(host)) == -1)
		snprintf(host, sizeof(host), "localhost");
	host[sizeof(host) - 1] = '\0';
	snprintf(host_id, sizeof(host_id), "%s:%d", host, cfg_current()->proc.listen_port);
	watcher = pgc_new(base, "watcher");
	tick_ev = event_new(base, -1, EV_PERSIST, tick_cb, NULL);
	if (watcher == NULL || tick_ev == NULL || event_add(tick_ev, &tv) == -1)
		fatal("could not set up the topology watcher");
	pgc_set_callbacks(watcher, notify_cb, state_cb, NULL);
}
