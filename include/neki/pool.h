/*
 * neki/pool.h - a pool of backend links per (database, user) inside one worker.
 *
 * The client session asks for a link with pool_acquire(): it gets an idle link at once, or
 * is queued (FIFO) and called back through its struct pool_waiter when one is free, or is
 * refused at once (server_login_retry fast fail). It gives the link back with pool_release().
 * Idle links are reused LIFO (FIFO with server_round_robin). Connection limits are GLOBAL
 * across workers (pool_size + reserve_pool_size, max_db_connections, max_user_connections):
 * every new link first takes a slot through struct pool_limits_ops (shared-memory counters in
 * the daemon, pool_limits_local_*() in a single process). A janitor timer per pool enforces
 * server_lifetime, server_idle_timeout, server_check_delay, query_wait_timeout, min_pool_size,
 * reserve_pool_timeout and server_login_retry. Because the limits are global, a client of
 * one worker may wait for a link that is idle, or busy with a younger client's turn, in
 * another: the pools of the workers hand links over through pool_limits_ops' waiting
 * hooks (src/pool/pool_wait.c), so the oldest waiter of every worker is served first.
 *
 * Callbacks into the session (pool_ready_fn) always come from the event loop, never from
 * inside pool_acquire() / pool_release().
 */
#ifndef NEKI_POOL_H
#define NEKI_POOL_H

#include "neki/base.h"

#include "neki/config.h"
#include "neki/error.h"
#include "neki/link.h"
#include "neki/list.h"
#include "neki/scram.h"

struct dns;
struct event_base;
struct pktbuf;
struct pool;
struct pool_waiter;
struct proto_reader;

/*
 * What a limit on server links counts: the links of one pool (pool_size and
 * reserve_pool_size), of every pool of its database (max_db_connections), of every pool of
 * its user (max_user_connections).
 */
enum pool_scope {
	POOL_SCOPE_POOL,
	POOL_SCOPE_DB,
	POOL_SCOPE_USER,
};
#define POOL_SCOPE_COUNT 3

/*
 * Global connection accounting. try_acquire counts one more server connection for the pool
 * (<db>, <user>) only if afterwards the pool has at most <pool_max>, the database at most
 * <db_max> (0 = no limit) and the user at most <user_max> (0 = no limit); atomically across
 * workers. release undoes one. count returns the global count of the pool's links, or of
 * its database's or its user's (<scope>). next_host (optional)
 * returns a cursor for database <db> that grows by one per call across every process, so that
 * load_balance_hosts=round-robin takes a host list in turn over all workers, as one pgbouncer
 * process does; NULL keeps a cursor per pool.
 *
 * Waiting across processes (optional: all three NULL in a single process, src/pool/pool_wait.c
 * says how they are used). wait_publish: pool_wait_since() or pool_wait_scope() of the
 * (<db>, <user>) pool changed; publish it for the other processes. wait_elsewhere: since
 * when (monotonic microseconds) the oldest client of another process that no link is coming
 * for has waited: for a link of that pool (POOL_SCOPE_POOL), or for room under the limit of
 * its database or user (POOL_SCOPE_DB, POOL_SCOPE_USER: a client of any pool of them kept
 * by max_db_connections or max_user_connections); 0 when none. wake: make other processes
 * call pool_wake() on their pools soon: those with such clients of <scope>, and with
 * <holders> also those holding links counted in <scope>.
 */
struct pool_limits_ops {
	bool (*try_acquire)(void *ctx, const char *db, const char *user, int pool_max,
			    int db_max, int user_max);
	void (*release)(void *ctx, const char *db, const char *user);
	int (*count)(void *ctx, const char *db, const char *user, enum pool_scope scope);
	uint64_t (*next_host)(void *ctx, const char *db);
	void (*wait_publish)(void *ctx, const char *db, const char *user);
	uint64_t (*wait_elsewhere)(void *ctx, const char *db, const char *user,
				   enum pool_scope scope);
	void (*wake)(void *ctx, const char *db, const char *user, enum pool_scope scope,
		     bool holders);
	/*
	 * The welcome shared across processes (optional, both NULL in a single process): the
	 * server parameters of the pool's first login as <len> bytes of name\0value\0 pairs.
	 * welcome_publish: this process's pool learned them; welcome_fetch: those another
	 * process published into <buf> (<cap> bytes), their length, 0 when none;
	 * welcome_clear (optional): the pool was reset, the published ones are stale.
	 */
	void (*welcome_publish)(void *ctx, const void *data, size_t len);
	size_t (*welcome_fetch)(void *ctx, void *buf, size_t cap);
	void (*welcome_clear)(void *ctx);
	/*
	 * One connection attempt per pool at a time across processes, as pgbouncer's one
	 * process makes (optional: NULL in a single process, where the pool's own links
	 * logging in tell). connect_begin takes the pool's turn to start one, false when an
	 * attempt is in progress elsewhere; connect_end gives the turn back.
	 */
	bool (*connect_begin)(void *ctx);
	void (*connect_end)(void *ctx);
	/*
	 * load_balance_hosts=disable across processes (optional): host_current returns the
	 * database's shared cursor (the host in use is the cursor modulo the host count);
	 * host_failed moves it on from <cur>, unless another process already did.
	 */
	uint64_t (*host_current)(void *ctx);
	void (*host_failed)(void *ctx, uint64_t cur);
	/*
	 * Link handoff (optional, NULL in a single process): the idle link <l> of the pool is
	 * wanted by a client of another process (the oldest waiter elsewhere): send it there,
	 * its socket, state and slot. True when it left: the pool then forgets it (link_moved);
	 * false and the link is closed for that client instead (it frees a slot there).
	 */
	bool (*move_idle)(void *ctx, struct link *l);
};

/* Process-local limits (tests, single-process use). */
struct pool_limits_local;
struct pool_limits_local *pool_limits_local_new(void);
void pool_limits_local_free(struct pool_limits_local *pl);
const struct pool_limits_ops *pool_limits_local_ops(void);
/* Connections counted for database <db> (all users) / user <user> (all databases). */
int pool_limits_local_db_count(struct pool_limits_local *pl, const char *db);
int pool_limits_local_user_count(struct pool_limits_local *pl, const char *user);

/* What a pool is for. Everything is borrowed for the call, except as noted. */
struct pool_conf {
	const struct cfg *cfg;		/* borrowed until pool_reconfigure() / pool_free() */
	const struct cfg_database *db;	/* borrowed likewise */
	const struct cfg_user *user;	/* borrowed likewise; NULL when no [users] entry */
	const char *db_name;		/* client-side database name (copied) */
	const char *user_name;		/* server login user (copied) */
	const char *password;		/* server password or md5/SCRAM secret (copied); NULL */
	const struct scram_keys *scram_keys; /* keys for a SCRAM secret (copied); NULL */
	struct dns *dns;		/* borrowed: resolver for host names; NULL = getaddrinfo
					 * once in pool_new() (blocks) */
	const struct pool_limits_ops *limits; /* borrowed, static */
	void *limits_ctx;		/* borrowed */
	/*
	 * Replication (pgbouncer 1.23): "database" or "true" for a pool of replication links,
	 * NULL for an ordinary pool. Its links carry `replication` and <startup> (name\0value\0
	 * pairs of the client's startup parameters, <startup_len> bytes) in their startup packet,
	 * run no connect_query, and are closed when released instead of being reused.
	 */
	const char *replication;	/* copied; NULL = not a replication pool */
	const uint8_t *startup;		/* copied */
	size_t startup_len;
};

/* The session is told that a queued acquire ended: <l> is its link, or NULL with <err>. */
typedef void (*pool_ready_fn)(struct pool_waiter *w, struct link *l, const struct nk_error *err);

/* A client waiting for a link. Embedded in the session; init once with pool_waiter_init(). */
struct pool_waiter {
	struct list_node node;	/* on pool->waiters while queued */
	struct pool *pool;	/* weak: the pool it waits on, NULL when not queued */
	uint64_t since_us;	/* monotonic microseconds when it started waiting */
	pool_ready_fn ready;	/* called when the wait ends */
	link_cb_fn link_cb;	/* installed on the link it gets */
	void *ctx;		/* borrowed: the session */
	bool connect_failed;	/* the wait (or pool_acquire's POOL_FAILED) ended because
				 * connecting to the server failed (fail-fast pools only) */
	/*
	 * Set by the owner before pool_acquire(): the session holds links of other pools that it
	 * cannot give back before this one comes (a routed transaction's links of other shards).
	 * Waiting for a link to be given back could then close a cycle of sessions that wait
	 * for each other's links, so it never does: it takes an idle link ahead of the other
	 * waiters, or a new one is opened for it beyond pool_size (and the reserve), within
	 * max_db_connections / max_user_connections; such a link is closed at its release
	 * while the pool is over its size.
	 */
	bool urgent;
	/*
	 * Set by the owner before pool_acquire(): the monotonic time at which the wait ends by
	 * itself, 0 = never (query_wait_timeout still applies). Checked by the janitor (so up to
	 * its period later): ready() gets NULL with gave_up set.
	 */
	uint64_t give_up_us;
	bool gave_up;		/* the wait ended at give_up_us */
	/* NULL, or logs a line about the waiter with its own prefix (the client's C-...) */
	void (*log)(struct pool_waiter *w, int level, const char *msg);
};

enum pool_acquire_result {
	POOL_GOT = 0,		/* *out is an ACTIVE link, link_cb installed */
	POOL_QUEUED = 1,	/* w->ready will be called later */
	POOL_FAILED = 2,	/* <err> is filled: send it to the client */
};

/* Create a pool on <base>. NULL with <err> set (bad host, no memory). */
struct pool *pool_new(struct event_base *base, const struct pool_conf *pc, struct nk_error *err);

/* Close every link (Terminate), fail queued waiters with "pooler is shutting down", free. */
void pool_free(struct pool *p);

/*
 * Point the pool at the reloaded configuration (links keep running). Call while the old
 * configuration is still alive: if the [databases] entry changed so that links are stale
 * (cfg_database_needs_reconnect), the hosts are re-read and every link is renewed.
 */
void pool_reconfigure(struct pool *p, const struct cfg *cfg, const struct cfg_database *db,
		      const struct cfg_user *user);

void pool_waiter_init(struct pool_waiter *w, pool_ready_fn ready, link_cb_fn link_cb, void *ctx);

/*
 * Get a link for <w>'s session: see enum pool_acquire_result. A queued waiter must be
 * cancelled with pool_cancel_wait() if the session goes away first.
 */
enum pool_acquire_result pool_acquire(struct pool *p, struct pool_waiter *w, struct link **out,
				      struct nk_error *err);
/*
 * The same for a client waiting for its welcome (pool_welcome_ready() false): it is not
 * failed from the cached login error (server_login_retry) but waits for a login of its own,
 * whose welcome or real error it gets, as in pgbouncer.
 */
enum pool_acquire_result pool_acquire_welcome(struct pool *p, struct pool_waiter *w,
					      struct link **out, struct nk_error *err);

/* Stop waiting (session closed). No-op when <w> is not queued. */
void pool_cancel_wait(struct pool_waiter *w);

static inline bool
pool_waiter_is_queued(const struct pool_waiter *w)
{
	return w->pool != NULL;
}

/*
 * Give <l> back. <dirty_reason> NULL: the server is at a clean ReadyForQuery boundary and the
 * link may be reused (after server_reset_query when configured). Otherwise the link is
 * closed with that reason (e.g. "client disconnect while server was not ready"). A clean
 * release of a link that is not at 'I' with nothing pending is treated as dirty.
 */
void pool_release(struct link *l, const char *dirty_reason);
/*
 * Give <l> back cleanly (as pool_release(l, NULL)), but run <reset_sql> on it first (sv_tested
 * meanwhile; server_reset_query follows when the pool runs one): the session changed state on
 * the server that the next client must not inherit. <reset_sql> is borrowed until then (a
 * static string). A reset that fails closes the link.
 */
void pool_release_reset(struct link *l, const char *reset_sql);

/*
 * Give back <l>, taken only to read the pool's welcome parameters and never given any
 * traffic: it goes back idle without the server_lifetime check (server_lifetime = 0 means
 * "use each link once", and this was no use). Otherwise as pool_release(l, NULL).
 */
void pool_release_unused(struct link *l);

/*
 * Keys recovered from a client's SCRAM login (scram_server), used when the pool's secret is
 * a SCRAM secret: links then log in with them (pgbouncer's SCRAM pass-through).
 */
void pool_set_scram_keys(struct pool *p, const struct scram_keys *keys);

/* Clients using the pool (min_pool_size applies while > 0, or with a forced user). */
void pool_client_attach(struct pool *p);
void pool_client_detach(struct pool *p);

/* Bytes of one pool / one link object, for SHOW MEM. */
size_t pool_object_size(void);
size_t pool_link_object_size(void);

/*
 * Fail fast (<on>; the pools of a sharded database's shards): an attempt to connect that
 * fails (refused, server_connect_timeout, DNS, a login error) ends every queued wait at once
 * with SQLSTATE 08001 and the reason as message (w->connect_failed set), instead of keeping
 * the waiters queued until query_wait_timeout; while the last attempt failed less than
 * server_login_retry ago and no link is usable, pool_acquire() fails at once the same way.
 * After the interval a waiter is queued and a new attempt starts, as pgbouncer retries.
 */
void pool_set_fail_fast(struct pool *p, bool on);

/* Mark every link close_needed (RECONNECT): idle ones close now, others at release. */
void pool_reconnect(struct pool *p);

/*
 * DNS no longer lists <sa> (port ignored) for host <name>: the links that host's name led to
 * that address are marked close_needed (idle ones close now, others at release), as
 * pgbouncer's dirty host addresses; new links resolve the name again.
 */
void pool_addr_gone(struct pool *p, const char *name, const struct sockaddr *sa);

/*
 * PAUSE (<on>) / RESUME. While paused no link is handed out or opened: pool_acquire() always
 * queues (query_wait_timeout still applies), idle links close now and the others at their
 * release ("pause mode"). RESUME serves the queue.
 */
void pool_pause(struct pool *p, bool on);
bool pool_is_paused(const struct pool *p);
/* Links that exist in any state but closing (PAUSE is done at 0). */
size_t pool_link_total(const struct pool *p);
/* Links still marked close_needed (WAIT_CLOSE is done at 0). */
size_t pool_close_needed_count(const struct pool *p);
/* End every queued wait with a FATAL <msg> (SQLSTATE 08P01). */
void pool_fail_waiting(struct pool *p, const char *msg);

/* KILL: close every link at once; clients holding one get LINK_EV_BROKEN with <reason>. */
void pool_close_all(struct pool *p, const char *reason);

/*
 * Since when (monotonic microseconds) the oldest waiter of <p> that no link is coming for
 * (the pool is at a global limit) has waited; 0 when every waiter has a link coming.
 */
uint64_t pool_wait_since(const struct pool *p);
/* ... and the limit that keeps it from a link then (POOL_SCOPE_POOL when it waits for none). */
enum pool_scope pool_wait_scope(const struct pool *p);

/*
 * Another process's clients may wait for this pool's links (its wake, or the janitor): an
 * idle link is closed for the oldest of them when it waits longer than this process's
 * clients, and this process's waiters are served (a slot may have been freed for them).
 */
void pool_wake(struct pool *p);

/*
 * Would a client queued now get a link without another client giving one back: an idle or
 * coming link beyond the waiters ahead, or room under pool_size (globally) for a new one?
 * False while paused.
 */
bool pool_has_room(const struct pool *p);

/*
 * Moving a link between processes (see pool_limits_ops.move_idle). link_is_movable: <l> is
 * idle (or idle past server_check_delay, LINK_ST_USED) at a clean boundary on a plain socket
 * (a TLS session's state cannot leave the process), with nothing buffered either way. link_export appends its state but the socket
 * (id, times, BackendKeyData, address, ParameterStatus values) to <pb>; the session layer's
 * data is its own to add. link_moved: it was sent with its slot; forget it here (no
 * Terminate, no slot given back). pool_adopt_link: in the receiving process, a link of <p>
 * on socket <fd> (owned by the link once it returns non-NULL) from the state at <r>: IDLE,
 * holding a slot, and handed to the pool's waiters; NULL when the state is malformed or
 * memory is short (<fd> is then still the caller's to close).
 */
bool link_is_movable(const struct link *l);
void link_export(const struct link *l, struct pktbuf *pb);
void link_moved(struct link *l);
struct link *pool_adopt_link(struct pool *p, int fd, struct proto_reader *r);

/* Links in state <st> in this worker, and queued waiters. */
size_t pool_count(const struct pool *p, enum link_state st);
/* ACTIVE links released while their cancel is in flight (link_being_canceled()). */
size_t pool_being_canceled(const struct pool *p);
size_t pool_waiting(const struct pool *p);
/* Call <fn> for every link of <p> but the CLOSING ones (SHOW SERVERS); <fn> must not close. */
typedef void (*pool_link_fn)(struct link *l, void *arg);
void pool_foreach_link(struct pool *p, pool_link_fn fn, void *arg);
/* SHOW POOLS maxwait: the longest current wait, in microseconds. */
uint64_t pool_max_wait_us(const struct pool *p);

/* Effective settings (user, then database, then [pgbouncer] default). */
int pool_size_limit(const struct pool *p);
enum cfg_pool_mode pool_mode(const struct pool *p);
/* query_wait_timeout in seconds (0: wait forever). */
double pool_query_wait_timeout(const struct pool *p);

/* ParameterStatus values of the first login (the welcome message); false before one (in
 * this process, or one another process published: pool_limits_ops.welcome_fetch). */
bool pool_welcome_ready(struct pool *p);
size_t pool_param_count(const struct pool *p);
void pool_param_at(const struct pool *p, size_t i, const char **name, const char **value);

const char *pool_db_name(const struct pool *p);
const char *pool_user_name(const struct pool *p);
/* The server password / secret the pool logs in with (borrowed; NULL when none). */
const char *pool_password(const struct pool *p);
/* The SCRAM pass-through keys of the pool (valid false when it has none). Borrowed. */
const struct scram_keys *pool_scram_keys(const struct pool *p);

/* ---- the online restart (src/pool/pool_takeover.c) ---- */

/*
 * SUSPEND (<on>): no janitor, no dispatch, idle links no longer read; returns the links not
 * at rest yet (logging in, testing, parked for a cancel): call again until 0. Off: RESUME.
 */
size_t pool_suspend(struct pool *p, bool on);
bool pool_is_suspended(const struct pool *p);

/* A server socket handed over by the process before an online restart. */
struct pool_takeover {
	int fd;				/* the logged-in server connection */
	uint32_t be_pid, be_key;	/* its BackendKeyData */
	const char *const *names;	/* borrowed: <n> parameter names ... */
	const char *const *values;	/* ... and the server's values (NULL: unknown) */
	size_t n;
	link_cb_fn cb;			/* the client it comes with (ACTIVE), NULL: idle */
	void *ctx;			/* that client's context */
};

/*
 * Rebuild a link of <p> on <t>->fd (owned by the link from here on success): ACTIVE with
 * <t>->cb, or idle after DISCARD ALL; counted in the limits whatever they say. NULL when out
 * of memory (the fd is still the caller's).
 */
struct link *pool_takeover_link(struct pool *p, const struct pool_takeover *t);

#endif /* NEKI_POOL_H */
