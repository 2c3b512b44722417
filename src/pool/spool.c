/*
 * spool.c - the worker's pools (one struct pool per (database, login user)), the session
 * layer's per-link data, and the global limits over shm counters.
 *
 * Global counters (shm_counter_*, ids 0..SHM_N_COUNTERS-1) are assigned by range, one
 * counter per id of the shm name registry (neki/shm_names.h, SHM_NAMES_IDS ids per range):
 *   0            max_client_conn (every client, as pgbouncer counts them)
 *   DB_CLIENTS   client connections per database   (max_db_client_connections)
 *   USER_CLIENTS client connections per user       (max_user_client_connections)
 *   DB_SERVERS   server connections per database   (max_db_connections)
 *   USER_SERVERS server connections per user       (max_user_connections)
 *   POOL_SERVERS server connections per pool       (pool_size + reserve_pool_size)
 *   HOST_CURSOR  the cursor of a database's host list: the next host (round-robin) or the
 *                one in use (disable); a cursor, not a limit
 *   CONNECTING   a pool's connection attempt in progress (limit 1: one at a time, as in
 *                pgbouncer)
 * Every process gets the same id for the same name from the registry, so the limits are
 * global, and two names never share a counter (but for the registry's documented fallback:
 * names over SHM_NAMES_KEY_MAX bytes or beyond SHM_NAMES_SLOTS of a kind share hashed ids,
 * which can only make a limit stricter, never looser). A pool looks its ids up once, when
 * it is created (struct spool); a client at login and at logout. Because the limits are
 * global, links in one worker could starve the clients of another: each pool publishes its
 * waiting clients per pool id (shm_wait.h) and the pools of every worker hand links over
 * (src/pool/pool_wait.c); a wake from another worker reaches session_pools_wake().
 * A pool nothing uses (no session or route refers to it: spool_ref(), no link, no waiter)
 * is freed by the session janitor after pool_idle_timeout, and the pools of an auto-database
 * ("*") after autodb_idle_timeout (spool_reap_idle()), as pgbouncer's janitor does.
 * Entry points: spool_get_or_create(), spool_link_ext(), spool_client_try(),
 * spool_limits_ops(), session_pools_wake(), session_console_take(), spool_reap_idle().
 */
#include "neki/base.h"

#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "neki/admin_relay.h"
#include "neki/dns.h"
#include "neki/log.h"
#include "neki/pktbuf.h"
#include "neki/proto.h"
#include "neki/session.h"
#include "neki/shm.h"
#include "neki/shm_counter.h"
#include "neki/spool.h"
#include "neki/shm_names.h"
#include "neki/shm_wait.h"
#include "neki/shm_welcome.h"
#include "neki/proc.h"
#include "../worker/session_int.h"

#define CNT_CLIENTS 0
#define CNT_DB_CLIENTS 1
#define CNT_USER_CLIENTS (CNT_DB_CLIENTS + SHM_NAMES_IDS)
#define CNT_DB_SERVERS (CNT_USER_CLIENTS + SHM_NAMES_IDS)
#define CNT_USER_SERVERS (CNT_DB_SERVERS + SHM_NAMES_IDS)
#define CNT_POOL_SERVERS (CNT_USER_SERVERS + SHM_NAMES_IDS)
#define CNT_HOST_CURSOR (CNT_POOL_SERVERS + SHM_NAMES_IDS)
#define CNT_CONNECTING (CNT_HOST_CURSOR + SHM_NAMES_IDS)

_Static_assert(CNT_CONNECTING + SHM_NAMES_IDS == SHM_N_COUNTERS,
	       "the counter ranges fill SHM_N_COUNTERS");

struct spool {
	struct spool *next;		/* the worker's list */
	char *db;			/* owned: client-side database name */
	char *user;			/* owned: server login user */
	struct cfg *cfg;		/* counted reference: what the pool was configured with */
	const struct cfg_database *entry; /* borrowed from cfg: the db's entry (or a routed
					   * shard's own, not in cfg) */
	bool dropped;			/* its database left the configuration (killed) */
	struct pool *pool;		/* owned */
	unsigned db_id;			/* shm_names id of db: its per-database counters */
	unsigned user_id;		/* shm_names id of user: its per-user counters */
	unsigned pool_id;		/* of (db_id, user_id): the pool counter, wait cell */
	const char *repl;		/* "database" / "true": a replication pool; NULL: not */
	uint8_t *startup;		/* owned: a replication pool's client startup parameters */
	size_t startup_len;
	unsigned refs;			/* sessions and routes that borrow it (spool_ref) */
	uint64_t idle_since_us;		/* monotonic: since when nothing uses it; 0 = in use */
};

static struct spool *spools;		/* owned list */

/* ---- pool limits over shm (<ctx> is the struct spool; the names are its own) ---- */

static bool
spool_lim_try(void *ctx, const char *db, const char *user, int pool_max, int db_max,
	      int user_max)
{
	const struct spool *sp = ctx;
	unsigned cp = CNT_POOL_SERVERS + sp->pool_id;
	unsigned cd = CNT_DB_SERVERS + sp->db_id;
	unsigned cu = CNT_USER_SERVERS + sp->user_id;

	if (!shm_counter_try_acquire(cp, pool_max))
		return false;
	if (!shm_counter_try_acquire(cd, db_max > 0 ? db_max : 0)) {
		shm_counter_release(cp);
		return false;
	}
	if (!shm_counter_try_acquire(cu, user_max > 0 ? user_max : 0)) {
		shm_counter_release(cd);
		shm_counter_release(cp);
		return false;
	}
	return true;
}

static void
spool_lim_release(void *ctx, const char *db, const char *user)
{
	const struct spool *sp = ctx;

	shm_counter_release(CNT_POOL_SERVERS + sp->pool_id);
	shm_counter_release(CNT_DB_SERVERS + sp->db_id);
	shm_counter_release(CNT_USER_SERVERS + sp->user_id);
}

/* The counter of <sp>'s links in <scope> (its pool's, its database's, its user's). */
static unsigned
spool_scope_counter(const struct spool *sp, enum pool_scope scope)
{
	return scope == POOL_SCOPE_DB ? CNT_DB_SERVERS + sp->db_id :
	       scope == POOL_SCOPE_USER ? CNT_USER_SERVERS + sp->user_id :
	       CNT_POOL_SERVERS + sp->pool_id;
}

static int
spool_lim_count(void *ctx, const char *db, const char *user, enum pool_scope scope)
{
	return (int)shm_counter_get(spool_scope_counter(ctx, scope));
}

static uint64_t
spool_lim_next_host(void *ctx, const char *db)
{
	const struct spool *sp = ctx;

	return shm_counter_next(CNT_HOST_CURSOR + sp->db_id);
}

static uint64_t
spool_lim_host_current(void *ctx)
{
	const struct spool *sp = ctx;

	return (uint64_t)shm_counter_get(CNT_HOST_CURSOR + sp->db_id);
}

static void
spool_lim_host_failed(void *ctx, uint64_t cur)
{
	const struct spool *sp = ctx;

	shm_counter_advance(CNT_HOST_CURSOR + sp->db_id, cur);
}

/* The pool's turn to connect (its pool id's: the replication pools of a pair share it). */
static bool
spool_lim_connect_begin(void *ctx)
{
	const struct spool *sp = ctx;

	return shm_counter_try_acquire(CNT_CONNECTING + sp->pool_id, 1);
}

static void
spool_lim_connect_end(void *ctx)
{
	const struct spool *sp = ctx;

	shm_counter_release(CNT_CONNECTING + sp->pool_id);
}

/* ---- waiting across workers (shm_wait.h; the pool's side is src/pool/pool_wait.c) ---- */

/* The wait cell of <sp>'s <scope>: one range of SHM_NAMES_IDS cells per scope. */
static unsigned
spool_wait_key(const struct spool *sp, enum pool_scope scope)
{
	return (unsigned)scope * SHM_NAMES_IDS + (scope == POOL_SCOPE_DB ? sp->db_id :
						  scope == POOL_SCOPE_USER ? sp->user_id :
						  sp->pool_id);
}

/* Does <sp>'s wait count in the <scope> cell of <me>? */
static bool
spool_waits_in(const struct spool *sp, const struct spool *me, enum pool_scope scope)
{
	if (scope == POOL_SCOPE_POOL)
		return sp->pool_id == me->pool_id;
	return spool_wait_key(sp, scope) == spool_wait_key(me, scope) &&
	       pool_wait_scope(sp->pool) == scope;
}

/*
 * A pool's wait changed: publish, per scope, the oldest of this worker's pools in the same
 * cell: of its pool id (an ordinary pool and the replication pools of one (database, user)
 * share the id as they share its counter: they take the same slots), and of its database
 * and user among the pools kept by max_db_connections / max_user_connections.
 */
static void
spool_wait_publish(void *ctx, const char *db, const char *user)
{
	const struct spool *me = ctx;

	for (enum pool_scope scope = POOL_SCOPE_POOL; scope < POOL_SCOPE_COUNT; scope++) {
		uint64_t oldest = 0;

		for (struct spool *sp = spools; sp != NULL; sp = sp->next) {
			uint64_t v = spool_waits_in(sp, me, scope) ? pool_wait_since(sp->pool) : 0;

			if (v != 0 && (oldest == 0 || v < oldest))
				oldest = v;
		}
		shm_wait_publish(spool_wait_key(me, scope), oldest);
	}
}

static uint64_t
spool_wait_elsewhere(void *ctx, const char *db, const char *user, enum pool_scope scope)
{
	return shm_wait_oldest_other(spool_wait_key(ctx, scope));
}

static void
spool_wait_wake(void *ctx, const char *db, const char *user, enum pool_scope scope,
		bool holders)
{
	const struct spool *sp = ctx;

	shm_wait_wake(spool_wait_key(sp, scope),
		      holders ? (int)spool_scope_counter(sp, scope) : -1);
}

/* pool_limits_ops.move_idle: hand <l> to the worker whose client waits longest for one. */
static bool
spool_move_idle(void *ctx, struct link *l)
{
	return linkmove_send(ctx, l);
}

/* ---- a pool's identity in a link handed between workers (linkmove.c) ---- */

static bool spool_matches(const struct spool *sp, const char *dbname, const char *user,
			  const struct spool_repl *r);

unsigned
spool_pool_id(const struct spool *sp)
{
	return sp->pool_id;
}

void
spool_put_ids(const struct spool *sp, struct pktbuf *pb)
{
	pktbuf_put_string(pb, sp->db);
	pktbuf_put_string(pb, sp->user);
}

bool
spool_get_ids(struct proto_reader *r, struct spool_ids *ids)
{
	ids->db = proto_get_string(r);
	ids->user = proto_get_string(r);
	if (!proto_reader_ok(r))
		return false;
	ids->db_id = shm_names_name(SHM_NAMES_DB, ids->db);
	ids->user_id = shm_names_name(SHM_NAMES_USER, ids->user);
	ids->pool_id = shm_names_pool(ids->db_id, ids->user_id);
	return true;
}

struct spool *
spool_find_ids(const struct spool_ids *ids)
{
	for (struct spool *sp = spools; sp != NULL; sp = sp->next)
		if (spool_matches(sp, ids->db, ids->user, NULL) && !sp->dropped)
			return sp;
	return NULL;
}

/* The three counters a link holds (pool, database, user). */
static void
spool_link_counters(unsigned pool_id, unsigned db_id, unsigned user_id, unsigned out[3])
{
	out[0] = CNT_POOL_SERVERS + pool_id;
	out[1] = CNT_DB_SERVERS + db_id;
	out[2] = CNT_USER_SERVERS + user_id;
}

void
spool_release_ids(const struct spool_ids *ids)
{
	unsigned c[3];

	spool_link_counters(ids->pool_id, ids->db_id, ids->user_id, c);
	for (int i = 0; i < 3; i++)
		shm_counter_release(c[i]);
}

void
spool_move_slot(const struct spool *sp, int from, int to)
{
	unsigned c[3];

	spool_link_counters(sp->pool_id, sp->db_id, sp->user_id, c);
	for (int i = 0; i < 3; i++)
		shm_counter_share_move(c[i], (unsigned)from, (unsigned)to);
}

void
session_pools_wake(void)
{
	for (struct spool *sp = spools; sp != NULL; sp = sp->next)
		pool_wake(sp->pool);
}

/* The pool's id is its own (not a shared fallback id), and it is not a replication pool
 * (those share the id of the ordinary pool of the same pair). */
static bool
spool_welcome_shared(const struct spool *sp)
{
	return shm_names_is_exact(sp->pool_id) && sp->repl == NULL;
}

static void
spool_welcome_publish(void *ctx, const void *data, size_t len)
{
	const struct spool *sp = ctx;

	if (spool_welcome_shared(sp))
		(void)shm_welcome_publish(sp->pool_id, data, len);
}

static size_t
spool_welcome_fetch(void *ctx, void *buf, size_t cap)
{
	const struct spool *sp = ctx;

	return spool_welcome_shared(sp) ? shm_welcome_get(sp->pool_id, buf, cap) : 0;
}

static void
spool_welcome_clear(void *ctx)
{
	const struct spool *sp = ctx;

	if (spool_welcome_shared(sp))
		shm_welcome_clear(sp->pool_id);
}

static const struct pool_limits_ops spool_shm_limits = {
	.try_acquire = spool_lim_try,
	.release = spool_lim_release,
	.count = spool_lim_count,
	.next_host = spool_lim_next_host,
	.host_current = spool_lim_host_current,
	.host_failed = spool_lim_host_failed,
	.connect_begin = spool_lim_connect_begin,
	.connect_end = spool_lim_connect_end,
	.wait_publish = spool_wait_publish,
	.wait_elsewhere = spool_wait_elsewhere,
	.wake = spool_wait_wake,
	.welcome_publish = spool_welcome_publish,
	.welcome_fetch = spool_welcome_fetch,
	.welcome_clear = spool_welcome_clear,
	.move_idle = spool_move_idle,
};

const struct pool_limits_ops *
spool_limits_ops(void)
{
	return &spool_shm_limits;
}

/* ---- client limits ---- */

/* A per-database or per-user limit: the entry's when it sets one (> 0), else the global one
 * (pgbouncer's rule: an entry's 0 or less means "use the global value"). */
static int
spool_limit(int entry, int global)
{
	return entry > 0 ? entry : global;
}

static int
spool_db_client_max(const struct session *s)
{
	return spool_limit(s->db != NULL ? s->db->max_db_client_connections : -1,
			   s->cfg->pool.max_db_client_connections);
}

static int
spool_user_client_max(const struct session *s)
{
	return spool_limit(s->ucfg != NULL ? s->ucfg->max_user_client_connections : -1,
			   s->cfg->pool.max_user_client_connections);
}

/* Take one unit of counter <id> under <max> (0 = unlimited) into *<flag>. */
static bool
spool_take(unsigned id, int max, bool *flag)
{
	if (flag == NULL || *flag)
		return true;
	if (!shm_counter_try_acquire(id, max > 0 ? max : 0))
		return false;
	*flag = true;
	return true;
}

static unsigned
spool_db_clients_cnt(const char *db)
{
	return CNT_DB_CLIENTS + shm_names_name(SHM_NAMES_DB, db);
}

static unsigned
spool_user_clients_cnt(const char *user)
{
	return CNT_USER_CLIENTS + shm_names_name(SHM_NAMES_USER, user);
}

static bool
spool_db_clients_exceeded(struct nk_error *err)
{
	return nk_error_set(err, ERRCODE_PROTOCOL_VIOLATION,
			    "client connections exceeded (max_db_client_connections)");
}

static bool
spool_user_clients_exceeded(struct nk_error *err)
{
	return nk_error_set(err, ERRCODE_PROTOCOL_VIOLATION,
			    "client connections exceeded (max_user_client_connections)");
}

bool
spool_client_try(const struct session *s, bool *g, bool *d, bool *u, struct nk_error *err)
{
	/* the console counts in max_client_conn but is never refused by it (pgbouncer) */
	if (!spool_take(CNT_CLIENTS, arelay_is_console_db(s->dbname) ? 0 : s->cfg->pool.max_client_conn,
			g))
		return nk_error_set(err, ERRCODE_PROTOCOL_VIOLATION,
				    "no more connections allowed (max_client_conn)");
	if (d != NULL && !spool_take(spool_db_clients_cnt(s->dbname), spool_db_client_max(s), d))
		return spool_db_clients_exceeded(err);
	if (u != NULL && !spool_take(spool_user_clients_cnt(s->user), spool_user_client_max(s), u))
		return spool_user_clients_exceeded(err);
	return true;
}

void
spool_client_adopt(const struct session *s, bool *g, bool *d, bool *u)
{
	(void)spool_take(CNT_CLIENTS, 0, g);
	(void)spool_take(CNT_DB_CLIENTS + shm_names_name(SHM_NAMES_DB, s->dbname), 0, d);
	(void)spool_take(CNT_USER_CLIENTS + shm_names_name(SHM_NAMES_USER, s->user), 0, u);
}

void
spool_client_release(const struct session *s, bool *g, bool *d, bool *u)
{
	if (*g)
		shm_counter_release(CNT_CLIENTS);
	if (*d)
		shm_counter_release(spool_db_clients_cnt(s->dbname));
	if (*u)
		shm_counter_release(spool_user_clients_cnt(s->user));
	*g = *d = *u = false;
}

/* See neki/session.h. */
bool
session_console_take(const struct cfg *c, const char *db, const char *user, bool local_admin,
		     struct session_console_units *held, struct nk_error *err)
{
	bool any = c->auth.auth_type == CFG_AUTH_ANY;
	const char *login = local_admin || any ? "pgbouncer" : user;
	bool exempt = cfg_list_has(c->auth.admin_users, login);	/* unlimited, still counted */
	const struct cfg_user *u = cfg_user_find(c, login);
	int user_max = spool_limit(u != NULL ? u->max_user_client_connections : -1,
				   c->pool.max_user_client_connections);

	held->db_cnt = spool_db_clients_cnt(db);
	if (!spool_take(held->db_cnt, exempt ? 0 : c->pool.max_db_client_connections, &held->db))
		return spool_db_clients_exceeded(err);
	if (local_admin || (any && cfg_list_has(c->auth.admin_users, user)))
		return true;
	held->user_cnt = spool_user_clients_cnt(login);
	if (!spool_take(held->user_cnt, exempt ? 0 : user_max, &held->user))
		return spool_user_clients_exceeded(err);
	return true;
}

/* See neki/session.h. */
void
session_console_release(struct session_console_units *held)
{
	if (held->db)
		shm_counter_release(held->db_cnt);
	if (held->user)
		shm_counter_release(held->user_cnt);
	held->db = held->user = false;
}

/* ---- pools ---- */

struct pool *
spool_pool(struct spool *sp)
{
	return sp->pool;
}

/* A newer configuration is in force: point the pool at its entries. */
static void
spool_reconfigure(struct spool *sp, const struct cfg *c, const struct cfg_database *db)
{
	pool_reconfigure(sp->pool, c, db, cfg_user_find(c, sp->user));
	cfg_ref((struct cfg *)c);
	cfg_unref(sp->cfg);
	sp->cfg = (struct cfg *)c;
	sp->entry = db;
	sp->dropped = false;
}

/*
 * A new configuration is in force (RELOAD, SIGHUP, console SET): every pool of a [databases]
 * entry (or of "*") follows it at once, as pgbouncer's settings take effect at once (a SET
 * default_pool_size lets queued clients in; a changed host closes the links at release). A
 * database gone from the file is dropped as pgbouncer does: its clients get "database
 * removed" and its links close. Links made stale by the change (host, port,
 * target_session_attrs, ...) close at once when idle and at release when busy, as pgbouncer's
 * dirty databases. Pools of routed shards ("<db>@<uid>") follow their sessions instead, and a
 * database that became sharded keeps its pass-through pools as they are.
 */
void
session_reload_pools(void)
{
	const struct cfg *c = cfg_current();

	for (struct spool *sp = spools; sp != NULL; sp = sp->next) {
		bool listed = sp->entry == cfg_database_find(sp->cfg, sp->db);
		const struct cfg_database *db;

		if (sp->cfg == c || sp->dropped ||
		    (!listed && sp->entry != cfg_database_auto(sp->cfg)))
			continue;
		db = cfg_database_find(c, sp->db);
		if (db == NULL && (listed || (db = cfg_database_auto(c)) == NULL)) {
			if (listed) {
				log_warn("dropping database '%s' as it does not exist anymore",
					 sp->db);
				sess_kill_db(sp->db, "database removed");
				pool_close_all(sp->pool, "database removed");
			}
			sp->dropped = true;
			continue;
		}
		if (!sess_db_is_sharded(db))
			spool_reconfigure(sp, c, db);
	}
}

bool
spool_is_passthrough(const struct spool *sp)
{
	bool listed = sp->entry == cfg_database_find(sp->cfg, sp->db) ||
		      sp->entry == cfg_database_auto(sp->cfg);

	return listed && !sp->dropped && !sess_db_is_sharded(sp->entry) && sp->repl == NULL;
}

/* DNS dropped an address of <name>: every pool closes its links to it (pool_addr_gone). */
static void
spool_addr_gone(void *arg, const char *name, const struct sockaddr *sa, socklen_t salen)
{
	(void)arg;
	(void)salen;
	for (struct spool *sp = spools; sp != NULL; sp = sp->next)
		pool_addr_gone(sp->pool, name, sa);
}

/* Is <sp> the pool of (<dbname>, <user>) and of replication kind <r>? */
static bool
spool_matches(const struct spool *sp, const char *dbname, const char *user,
	      const struct spool_repl *r)
{
	if (strcmp(sp->db, dbname) != 0 || strcmp(sp->user, user) != 0)
		return false;
	if (r == NULL)
		return sp->repl == NULL;
	return sp->repl != NULL && strcmp(sp->repl, r->kind) == 0 &&
	       sp->startup_len == r->startup_len &&
	       (r->startup_len == 0 || memcmp(sp->startup, r->startup, r->startup_len) == 0);
}

/* Free <sp> (not on the list) and what it owns; NULL is a no-op. */
static void
spool_destroy(struct spool *sp)
{
	if (sp == NULL)
		return;
	pool_free(sp->pool);
	cfg_unref(sp->cfg);
	free(sp->db);
	free(sp->user);
	free(sp->startup);
	free(sp);
}

struct spool *
spool_get_or_create(const struct cfg *c, const struct cfg_database *db, const char *dbname,
		    const char *user, const char *password, struct nk_error *err)
{
	return spool_get_or_create_repl(c, db, dbname, user, password, NULL, err);
}

/*
 * Like spool_get_or_create(); with <r>, the replication pool of those startup parameters
 * (one pool per distinct set, so that its links are opened with exactly them). It counts
 * against the same global limits as the ordinary pool of (<dbname>, <user>).
 */
struct spool *
spool_get_or_create_repl(const struct cfg *c, const struct cfg_database *db,
			 const char *dbname, const char *user, const char *password,
			 const struct spool_repl *r, struct nk_error *err)
{
	struct pool_conf pc = {
		.cfg = c, .db = db, .user = cfg_user_find(c, user), .db_name = dbname,
		.user_name = user, .password = password, .limits = &spool_shm_limits,
		.dns = dns_process(),	/* the worker's resolver (net/dns.c); NULL: getaddrinfo */
		.replication = r != NULL ? r->kind : NULL,
		.startup = r != NULL ? r->startup : NULL,
		.startup_len = r != NULL ? r->startup_len : 0,
	};
	struct spool *sp;

	for (sp = spools; sp != NULL; sp = sp->next) {
		if (spool_matches(sp, dbname, user, r)) {
			/* never back to an older one (a session accepted before a reload) */
			if (sp->cfg != c && (c == cfg_current() || sp->dropped))
				spool_reconfigure(sp, c, db);
			return sp;
		}
	}
	dns_process_on_addr_gone(spool_addr_gone, NULL);
	sp = calloc(1, sizeof(*sp));
	if (sp == NULL || (sp->db = strdup(dbname)) == NULL || (sp->user = strdup(user)) == NULL)
		goto fail_oom;
	if (r != NULL) {
		sp->repl = r->kind;	/* a string constant */
		if (r->startup_len > 0 && (sp->startup = malloc(r->startup_len)) == NULL)
			goto fail_oom;
		if (r->startup_len > 0)
			memcpy(sp->startup, r->startup, r->startup_len);
		sp->startup_len = r->startup_len;
	}
	sp->db_id = shm_names_name(SHM_NAMES_DB, dbname);
	sp->user_id = shm_names_name(SHM_NAMES_USER, user);
	sp->pool_id = shm_names_pool(sp->db_id, sp->user_id);
	pc.limits_ctx = sp;
	sp->pool = pool_new(child_base(), &pc, err);
	if (sp->pool == NULL)
		goto fail;
	sp->cfg = (struct cfg *)c;
	sp->entry = db;
	cfg_ref(sp->cfg);
	pool_pause(sp->pool, sctl_db_paused(dbname));
	sp->next = spools;
	spools = sp;
	return sp;
fail_oom:
	nk_error_set(err, ERRCODE_OUT_OF_MEMORY, "no memory for pool");
fail:
	spool_destroy(sp);
	return NULL;
}

size_t
spool_object_size(void)
{
	return sizeof(struct spool);
}

struct spool *
spool_first(void)
{
	return spools;
}

struct spool *
spool_find(const char *db)
{
	for (struct spool *sp = spools; sp != NULL; sp = sp->next)
		if (strcmp(sp->db, db) == 0)
			return sp;
	return NULL;
}

struct spool *
spool_next(const struct spool *sp)
{
	return sp->next;
}

const char *
spool_db(const struct spool *sp)
{
	return sp->db;
}

const char *
spool_repl(const struct spool *sp)
{
	return sp->repl;
}

/* Does [databases] entry <d> keep min_pool_size links with no client (a forced user)? */
static bool
spool_keeps_min(const struct cfg *c, const struct cfg_database *d)
{
	int min = d->min_pool_size >= 0 ? d->min_pool_size : c->pool.min_pool_size;

	return min > 0 && d->user != NULL && d->user[0] != '\0';
}

/*
 * min_pool_size for a database with a forced user holds even before any client comes, as
 * pgbouncer creates such pools in its janitor: worker 0 creates them (the limits are global,
 * so one worker keeps the connections open for all), and each pool's janitor fills it.
 */

void
spool_keep_min_pools(const struct cfg *c)
{
	struct nk_error err;

	if (shm_self() != 0 || sctl_shutting_down())
		return;
	for (size_t i = 0; i < c->n_databases; i++) {
		const struct cfg_database *d = &c->databases[i];
		const char *pw = d->password;

		if (!spool_keeps_min(c, d) || strcmp(d->name, "*") == 0 ||
		    sctl_db_paused(d->name) || sess_db_is_sharded(d))
			continue;
		if (pw == NULL || pw[0] == '\0')
			pw = sess_auth_file_secret(c, d->user);
		if (spool_get_or_create(c, d, d->name, d->user, pw, &err) == NULL)
			log_debug("min_pool_size: no pool for %s/%s: %s", d->name, d->user,
				  err.message);
	}
}

/* ---- idle pools (pool_idle_timeout) and auto-databases (autodb_idle_timeout) ---- */

void
spool_ref(struct spool *sp)
{
	sp->refs++;
}

void
spool_unref(struct spool *sp)
{
	NK_ASSERT(sp->refs > 0);
	sp->refs--;
}

/* Stamp since when nothing uses <sp> (no borrower, link in any state, nor waiter). */
static void
spool_stamp_idle(struct spool *sp, uint64_t now)
{
	const struct pool *p = sp->pool;

	if (sp->refs > 0 || pool_link_total(p) > 0 || pool_count(p, LINK_ST_CLOSING) > 0 ||
	    pool_waiting(p) > 0)
		sp->idle_since_us = 0;
	else if (sp->idle_since_us == 0)
		sp->idle_since_us = now;
}

/* Has <sp> been unused for more than <secs> seconds at <now>? */
static bool
spool_idle_for(const struct spool *sp, double secs, uint64_t now)
{
	return sp->idle_since_us != 0 && now - sp->idle_since_us > (uint64_t)(secs * 1e6);
}

/* Take <sp> off the worker's list and free it. */
static void
spool_unlink_free(struct spool *sp)
{
	struct spool **pp = &spools;

	while (*pp != sp)
		pp = &(*pp)->next;
	*pp = sp->next;
	spool_destroy(sp);
}

/*
 * pgbouncer's cleanup_inactive_pools(): a pool unused for pool_idle_timeout goes, but a
 * forced-user pool that keeps min_pool_size (it would come back at once).
 */
static void
spool_reap_pools(double secs, uint64_t now)
{
	struct spool *sp = spools, *next;

	for (; sp != NULL; sp = next) {
		next = sp->next;
		if (!spool_idle_for(sp, secs, now) ||
		    (sp->entry != NULL && spool_keeps_min(sp->cfg, sp->entry)))
			continue;
		log_info("cleaning up idle pool for user %s on db %s because: pool idle timeout "
			 "(age= %llus)", sp->user, sp->db,
			 (unsigned long long)((now - sp->idle_since_us) / 1000000u));
		spool_unlink_free(sp);
	}
}

/* Is every pool of auto-database <db> unused for more than <secs> seconds? */
static bool
spool_autodb_idle(const char *db, double secs, uint64_t now)
{
	for (const struct spool *sp = spools; sp != NULL; sp = sp->next)
		if (strcmp(sp->db, db) == 0 && !spool_idle_for(sp, secs, now))
			return false;
	return true;
}

/* pgbouncer's cleanup_inactive_autodatabases(): free every pool of an unused "*" database. */
static void
spool_reap_autodbs(double secs, uint64_t now)
{
	struct spool *sp = spools, *next;

	while (sp != NULL) {
		if (!spool_idle_for(sp, secs, now) || sp->entry != cfg_database_auto(sp->cfg) ||
		    sctl_db_paused(sp->db) || !spool_autodb_idle(sp->db, secs, now)) {
			sp = sp->next;
			continue;
		}
		log_warn("dropping database '%s' as it does not exist anymore or inactive "
			 "auto-database", sp->db);
		for (struct spool *q = spools; q != NULL; q = next) {
			next = q->next;
			if (q != sp && strcmp(q->db, sp->db) == 0)
				spool_unlink_free(q);
		}
		spool_unlink_free(sp);
		sp = spools;		/* the list changed: start over */
	}
}

void
spool_reap_idle(const struct cfg *c, uint64_t now)
{
	for (struct spool *sp = spools; sp != NULL; sp = sp->next)
		spool_stamp_idle(sp, now);
	if (c->pool.autodb_idle_timeout > 0)
		spool_reap_autodbs(c->pool.autodb_idle_timeout, now);
	if (c->pool.pool_idle_timeout > 0)
		spool_reap_pools(c->pool.pool_idle_timeout, now);
}

/* ---- per-link data ---- */

static void
spool_link_ext_free(void *data)
{
	struct link_ext *ext = data;

	prep_link_cleanup(&ext->prep);
	free(ext->search_path);
	free(ext);
}

/* spool_link_ext_import: see session_int.h. */
bool
spool_link_ext_import(struct link *l, struct proto_reader *r)
{
	struct link_ext *ext = spool_link_ext(l);
	const char *sp = proto_get_string(r);
	bool set = proto_get_byte(r) != 0;

	if (ext == NULL || !proto_reader_ok(r))
		return false;
	if (set && (ext->search_path = strdup(sp)) == NULL)
		return false;
	return prep_link_import(&ext->prep, r);
}

struct link_ext *
spool_link_ext(struct link *l)
{
	struct link_ext *ext = link_user_data(l);

	if (ext != NULL)
		return ext;
	ext = calloc(1, sizeof(*ext));
	if (ext != NULL)
		link_set_user_data(l, ext, spool_link_ext_free);
	return ext;
}
