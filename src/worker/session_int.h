/*
 * session_int.h - the client session's types, shared by src/worker/session*.c, varcache.c,
 * prepared.c and spool.c only.
 *
 * struct session is one client connection. Its phases each have a handler file:
 * session_startup.c (startup packet, parameters, database, limits), session_auth.c (client
 * authentication, auth_query), session_fwd.c (logged-in traffic in every pool mode),
 * session_cancel.c (BackendKeyData and cancel forwarding). session.c owns the state machine,
 * closing, the janitor (timeouts) and the reaping. varcache.c keeps the tracked parameters,
 * prepared.c the protocol-level prepared statements, spool.c the worker's pools.
 */
#ifndef NEKI_WORKER_SESSION_INT_H
#define NEKI_WORKER_SESSION_INT_H

#include "neki/base.h"

#include <sys/socket.h>

#include "neki/config.h"
#include "neki/error.h"
#include "neki/link.h"
#include "neki/list.h"
#include "neki/pool.h"
#include "neki/proto.h"
#include "neki/sbuf.h"
#include "neki/scram.h"
#include "neki/shm.h"

struct event;
struct pktbuf;
struct listener;
struct spool;
struct arelay;
struct route;

/* ---- varcache.c: tracked parameters ---- */

#define VAR_MAX 16		/* tracked parameters: 5 fixed + track_extra_parameters */

/* A set of tracked values; val[i] belongs to varcache_name(i). NULL = unknown / default. */
struct varcache {
	const char *val[VAR_MAX];	/* interned (intern_ref): compared by pointer */
	char *search_path;	/* owned: raw SQL value of the last SET search_path; NULL = default */
};

/* A statement that bears on search_path, as the lexer saw it. */
enum sp_op_kind {
	SP_OP_SET = 0,		/* SET [SESSION] search_path, set_config('search_path', v, false) */
	SP_OP_RESET = 1,	/* RESET search_path / ALL, SET search_path TO DEFAULT, DISCARD ALL */
	SP_OP_SAVEPOINT = 2,	/* SAVEPOINT name */
	SP_OP_RELEASE = 3,	/* RELEASE [SAVEPOINT] name */
	SP_OP_ROLLBACK_TO = 4,	/* ROLLBACK [WORK | TRANSACTION] TO [SAVEPOINT] name */
};

#define QFX_OPS_MAX 8		/* search_path statements kept per query text (the last ones) */

struct query_op {
	enum sp_op_kind kind;
	char arg[512];		/* SET: the value as SQL; savepoints: the name (folded) */
};

/* What a simple-protocol query text does to session state (a light lexer, no parser). */
struct query_effects {
	bool discard_all;	/* DISCARD ALL */
	bool deallocate_all;	/* DEALLOCATE [PREPARE] ALL */
	size_t n_ops;
	struct query_op ops[QFX_OPS_MAX];	/* in statement order */
};

/* ---- session_sp.c: search_path changes, transactional ---- */

#define SP_NAMES_MAX 8		/* statements / portals that change search_path, per client */
#define SP_STAGED_MAX 32	/* statements sent and not yet committed or rolled back */

/* One statement's bearing on search_path: SET value (NULL arg: reset) or a savepoint op. */
struct sp_effect {
	enum sp_op_kind kind;
	char *arg;			/* owned where stored */
};

struct sp_entry {
	bool used;
	char *name;			/* owned: client-side statement / portal name */
	struct sp_effect eff;
};

struct sp_staged {
	uint64_t gen;			/* sync point whose ReadyForQuery ends its batch */
	struct sp_effect eff;		/* arg owned */
};

struct sess_sp {
	struct sp_entry stmts[SP_NAMES_MAX];
	struct sp_entry portals[SP_NAMES_MAX];
	struct sp_staged staged[SP_STAGED_MAX];
	size_t n;			/* staged[0..n) */
	bool saw_commit, saw_rollback, saw_error; /* since the last ReadyForQuery 'I' */
};

/* ---- prepared.c ---- */

/* A statement text known to the worker, shared by clients and links (refcounted). */
struct prep_stmt {
	uint64_t id;			/* the internal name is NEKI_<id> */
	char name[32];			/* "NEKI_<id>" */
	char *query;			/* owned */
	size_t query_len;
	uint8_t *oids;			/* owned: nparams big-endian uint32 */
	uint16_t nparams;
	uint64_t hash;
	int refs;			/* client names + link entries + pending requests */
	struct prep_stmt *hnext;	/* bucket chain of the worker table */
};

/* One client-side name. */
struct prep_name {
	char *name;			/* owned */
	struct prep_stmt *st;		/* counted reference */
	struct prep_name *next;
};

/* A client's named statements. */
struct prep_client {
	struct prep_name *names;	/* owned list */
	size_t count;
};

/* The statements prepared on one link (the link's extension data). */
struct prep_link {
	struct prep_stmt **lru;		/* owned array of counted references, most recent last */
	size_t n, cap;
};

/* ---- per-link state kept by the session layer (link user data) ---- */

struct link_ext {
	struct prep_link prep;		/* statements prepared on the server */
	char *search_path;		/* owned: value set on the server by a client; NULL = default */
};

/* ---- server requests whose responses are tracked (session_fwd.c) ---- */

enum req_kind {
	REQ_PARSE = 0,		/* answered by ParseComplete '1' */
	REQ_CLOSE = 1,		/* answered by CloseComplete '3' */
};

struct req {
	uint8_t kind;			/* enum req_kind */
	bool swallow;			/* injected by neki: the client never sees the answer */
	uint64_t gen;			/* sync batch it belongs to */
	struct prep_stmt *st;		/* REQ_PARSE injected: counted reference, NULL otherwise */
};

struct req_queue {
	struct req *q;			/* owned ring */
	size_t head, n, cap;
};

/* ---- the session ---- */

/*
 * States (sess_set_state() is the only writer; each state is a list of the worker):
 *
 *   LOGIN  --startup ok, auth ok-->  WELCOME  --welcome sent-->  IDLE
 *   LOGIN  --auth_query needed-->  AUTHQ  --user found-->  LOGIN
 *   IDLE   --client message, link now-->  ACTIVE
 *   IDLE   --client message, pool queues-->  WAIT  --link-->  ACTIVE
 *   ACTIVE --release (tx/statement mode)-->  IDLE
 *   any    --error, EOF, timeout, Terminate-->  CLOSED [transient]  --reap-->  freed
 *
 * LOGIN    reading startup/auth packets; janitor: client_login_timeout
 * AUTHQ    client paused; holds a link of the auth_user pool running auth_query
 * WELCOME  client paused; waits for a link to learn the server's parameters
 * IDLE     logged in, no link; reading; janitor: client_idle_timeout
 * WAIT     client paused, queued in the pool (the pool enforces query_wait_timeout)
 * ACTIVE   holds a link; janitor: query_timeout, idle_transaction_timeout
 * CLOSED   socket closed, link released; on the reap list
 */
enum sess_state {
	SESS_ST_LOGIN = 0,
	SESS_ST_AUTHQ = 1,
	SESS_ST_WELCOME = 2,
	SESS_ST_IDLE = 3,
	SESS_ST_WAIT = 4,
	SESS_ST_ACTIVE = 5,
	SESS_ST_CLOSED = 6,
};
#define SESS_ST_COUNT 7

/* Where the login exchange is. */
enum sess_auth_step {
	SESS_AUTH_STARTUP = 0,	/* waiting for the startup packet */
	SESS_AUTH_PASSWORD = 1,	/* sent cleartext / md5 request */
	SESS_AUTH_SASL_INIT = 2, /* sent AuthenticationSASL */
	SESS_AUTH_SASL_CONT = 3, /* sent SASLContinue */
	SESS_AUTH_DONE = 4,
};

struct session {
	struct sbuf sb;			/* the client connection (embedded) */
	struct list_node node;		/* on sess_lists[state] */
	enum sess_state state;		/* written by sess_set_state() only */
	enum sess_auth_step auth_step;
	enum cfg_auth_type auth_method;	/* the method in use for this login */
	uint64_t id;			/* global socket id (shm_socket_id_next): SHOW CLIENTS,
					 * KILL_CLIENT */
	uint32_t key_pid;		/* our BackendKeyData: encodes the worker */
	uint32_t key_secret;

	/* identity */
	char addr[64];			/* peer address text, "unix" for Unix sockets */
	int port;			/* peer port (Unix: the listen port, as pgbouncer shows) */
	int peer_pid;			/* Unix: the peer's pid (SO_PEERCRED), 0 when unknown */
	bool is_unix;
	struct sockaddr_storage peer;	/* for hba */
	char *user;			/* owned: login user name */
	char *dbname;			/* owned: client-side database name */
	char *app_name;			/* owned: startup application_name (or NULL) */
	enum proto_replication replication; /* a walsender client (pgbouncer 1.23) */
	uint8_t *repl_startup;		/* owned: its startup parameters for the server */
	size_t repl_startup_len;
	const struct cfg *cfg;		/* counted reference (cfg_ref) taken at accept */
	const struct cfg_database *db;	/* borrowed from cfg; NULL = no such database */
	const struct cfg_user *ucfg;	/* borrowed from cfg; NULL = no [users] entry */
	bool db_missing;		/* report "no such database" after auth */
	bool user_unknown;		/* mock authentication: always fails */
	char *secret;			/* owned: the user's stored secret (auth_file/auth_query) */
	struct shm_stats *stats;	/* borrowed: its database's counters (shm_dbstats_get) */
	struct spool *sp;		/* borrowed: the pool for (db, user) */
	struct spool *authq_sp;		/* borrowed: auth_user's pool while in AUTHQ */
	enum cfg_pool_mode mode;	/* effective pool mode */
	bool counted_global;		/* holds a max_client_conn unit */
	bool counted_db;		/* holds a max_db_client_connections unit */
	bool counted_user;		/* holds a max_user_client_connections unit */
	bool attached;			/* pool_client_attach() done */
	bool wait_notified;		/* query_wait_notify's NOTICE sent for this wait */

	/* authentication */
	uint8_t md5_salt[4];
	struct scram_server scram;	/* SCRAM exchange state */
	struct scram_keys scram_keys;	/* recovered from a successful SCRAM login */
	bool scram_active;
	char hba_map[64];		/* map= of the hba rule that matched ("" = none) */

	/* the link */
	struct link *link;		/* weak: held link (cleared on release / break) */
	struct link *authq_link;	/* weak: auth_query link */
	bool authq_found;		/* auth_query returned the user's row */
	struct pool_waiter waiter;	/* queued acquire */
	bool release_pending;		/* ev_release armed */
	struct event *ev_release;	/* owned: deferred release after ReadyForQuery */

	/* protocol bookkeeping while a link is held */
	uint64_t syncs_sent;		/* sync points (Sync, Query, FunctionCall) sent */
	uint64_t z_recv;		/* ReadyForQuery received */
	uint64_t swallow_until;		/* swallow server messages while z_recv < this */
	bool unsynced;			/* extended messages sent since the last Sync */
	bool in_copy_in;		/* server sent CopyInResponse, client streams data */
	char tx_status;			/* last ReadyForQuery status seen by the client */
	struct req_queue reqs;		/* tracked Parse/Close responses */
	struct sess_sp sp_state;	/* search_path changes in flight (session_sp.c) */

	/* session state */
	struct varcache vars;		/* what the client wants */
	struct prep_client prep;	/* client statement names */
	bool prep_on;			/* rewriting active (not session mode, max > 0) */

	/* timing (monotonic microseconds) */
	uint64_t connect_us;
	uint64_t activity_us;		/* last client packet */
	uint64_t query_start_us;	/* first packet of the current query, 0 = none */
	uint64_t xact_start_us;		/* first query of the current transaction, 0 = none */
	uint64_t wait_start_us;		/* started waiting for a link */
	bool query_timed_out;		/* cancel sent for query_timeout */
	bool cancel_inflight;

	/* the admin process answers (session_admin.c) */
	bool console;			/* a client of the console databases pgbouncer / neki */
	bool suspended;			/* SUSPEND stopped reading it (and its link) */
	struct arelay *relay;		/* owned: console relay, or the __neki call running */

	struct route *route;		/* owned: sharded database (route.c); NULL = pass-through */

	struct session *next_dead;	/* reap list (weak) */
};

/* ---- session.c ---- */

uint64_t sess_now_us(void);
const char *sess_state_str(enum sess_state st);
void sess_set_state(struct session *s, enum sess_state st);
/* Log with pgbouncer's client prefix "C-0x...: db/user@addr:port". */
void sess_log(const struct session *s, int lvl, const char *fmt, ...) NK_PRINTF(3, 4);
/*
 * Close the client: send <err> (if any) as an ErrorResponse first, log "closing because:
 * <reason>", release or close the link, free later. Safe from any callback.
 */
void sess_close(struct session *s, const char *reason, const struct nk_error *err);
/* The session begins to wait for a link (query_wait_notify's NOTICE is due again). */
void sess_wait_begin(struct session *s);
/* Close with a FATAL pooler error <msg> (SQLSTATE 08P01), pgbouncer's disconnect_client. */
void sess_fatal(struct session *s, const char *msg);
/* Send one message built in <pb> (freed) to the client; false when the client is gone. */
NK_MUSTCHECK bool sess_send_pb(struct session *s, struct pktbuf *pb);
/* Send <err> as ErrorResponse (not closing). */
NK_MUSTCHECK bool sess_send_error(struct session *s, const struct nk_error *err);
/* The effective value of a per-user / per-database / global timeout. */
double sess_query_timeout(const struct session *s);
/* Call <fn> for every session that is not CLOSED (SHOW CLIENTS); <fn> must not close. */
void sess_foreach(void (*fn)(struct session *s, void *arg), void *arg);
/* The session whose BackendKeyData is <pid>, <key> (cancel lookup), or NULL. */
struct session *sess_find_by_key(uint32_t pid, uint32_t key);
/* The SHOW STATS counters <s> counts into: its database's (plain process-local memory). */
static inline struct shm_stats *
sess_stats(const struct session *s)
{
	return s->stats;
}
/* KILL: close every logged-in session of database <db> ("" = all) with FATAL <msg>. */
void sess_kill_db(const char *db, const char *msg);
/* KILL_CLIENT: close the session with global id <id> with FATAL <msg>; false if not here. */
bool sess_kill_id(uint64_t id, const char *msg);

/* ---- session_startup.c ---- */

/* A packet in LOGIN / AUTH states (startup framing or 'p'). */
bool sess_on_login_pkt(struct session *s, const struct sbuf_pkt *pkt);
/* Authentication finished: check the database, attach to the pool, welcome. */
void sess_login_done(struct session *s);
/* The pool for the session got (or failed to get) its welcome parameters. */
void sess_send_welcome(struct session *s);
/* Give back the client-count units taken at login. */
void sess_release_counts(struct session *s);

/* ---- session_auth.c ---- */

/* Decide the method and start authentication (after the startup packet). */
void sess_auth_start(struct session *s);
/* A 'p' message in the auth exchange (whole packet). */
void sess_auth_on_msg(struct session *s, const uint8_t *body, size_t len);
/* Free SCRAM state. */
void sess_auth_cleanup(struct session *s);
/* Drop worker-level auth caches (auth_file, hba) when the configuration changed. */
void sess_auth_reload(void);
/* The auth_file secret of <user> under <c>, or NULL (borrowed until the next reload). */
const char *sess_auth_file_secret(const struct cfg *c, const char *user);

/* ---- session_fwd.c ---- */

/* A client packet once logged in. */
bool sess_on_work_pkt(struct session *s, const struct sbuf_pkt *pkt);
/* The session's link callback. */
bool sess_link_cb(struct link *l, enum link_event ev, const struct sbuf_pkt *pkt,
		  const struct nk_error *err, void *ctx);
/* The pool's answer to a queued acquire. */
void sess_pool_ready(struct pool_waiter *w, struct link *l, const struct nk_error *err);
/* Give the link back at close (dirty when mid-transaction). */
void sess_drop_link(struct session *s, const char *dirty_reason);
/* The deferred release after ReadyForQuery. */
void sess_release_cb(int fd, short what, void *arg);
/* pool_waiter.log of a session's waiter (pgbouncer's client prefix on the pool's lines). */
void sess_waiter_log(struct pool_waiter *w, int level, const char *msg);
/* session_auth.c: auth_query's ReadyForQuery arrived; go on (from sess_release_cb). */
void sess_authq_finish(struct session *s);
/* Free the request queue. */
void sess_reqs_cleanup(struct session *s);
/* Record a Parse / Close sent to the server whose answer must be matched (prepared.c). */
NK_MUSTCHECK bool sess_track_request(struct session *s, enum req_kind kind, bool swallow,
				     struct prep_stmt *st);

/* ---- session_cancel.c ---- */

/* Choose the session's BackendKeyData (worker index encoded in the pid). */
void sess_cancel_key_init(struct session *s);
/* A CancelRequest packet arrived on a new connection (body: pid, key). */
void sess_cancel_request(uint32_t pid, uint32_t key);
/* Send a CancelRequest for the query running on <s>'s link (query_timeout, forwarded cancel). */
/*
 * SHOW PEER_POOLS figures of this worker, one call per peer forwarded to: requests in flight,
 * queued, sent and waiting for the peer to close, connecting (or resolving).
 */
void sess_cancel_peer_rows(void (*fn)(void *arg, int peer, int active, int waiting, int sent,
				      int login), void *arg);
void sess_cancel_backend(struct session *s);
/* Send a CancelRequest for the query running on <l> (its backend's own pid and key). */
void sess_cancel_link(struct link *l);

/* ---- session_admin.c ---- */

/* At startup: is the database the console (pgbouncer, neki)? Marks the session then. */
bool sess_console_check(struct session *s);
/* User pgbouncer on the Unix socket with neki's own uid: a console admin without auth. */
bool sess_console_local_admin(const struct session *s);
/* Authenticated console client: relay it to the admin process. */
void sess_console_start(struct session *s);
/* A client packet while s->relay is set (console traffic, or paused during a call). */
bool sess_admin_pkt(struct session *s, const struct sbuf_pkt *pkt);
/*
 * A client packet of a logged-in session: a __neki call on a sharded database goes to the
 * admin. -1 when not one (route as usual), else what the sbuf callback returns.
 */
int sess_admin_try_call(struct session *s, const struct sbuf_pkt *pkt);
/* The session ends: drop its admin connection. */
void sess_admin_release(struct session *s);

/* ---- varcache.c ---- */

/* Number of tracked parameter names (5 fixed + track_extra_parameters). */
size_t varcache_count(void);
/* Name of tracked parameter <i>, as the server reports it. */
const char *varcache_name(size_t i);
/* Index of <name> (case-insensitive), -1 when not tracked. */
int varcache_index(const char *name);
/* Rebuild the name table from the configuration (track_extra_parameters). */
void varcache_configure(const struct cfg *c);
/* Set <name> = <value> in <vc>; false when <name> is not tracked (or no memory). */
bool varcache_set(struct varcache *vc, const char *name, const char *value);
void varcache_cleanup(struct varcache *vc);
/*
 * Append to <sql> (capacity <cap>) the SET statements that make link <l> (whose
 * search_path is <link_sp>) match <vc>; a NULL <l> gets every value <vc> has (a link just
 * reset). Returns the number of SETs, -1 if it does not fit.
 */
int varcache_diff_sql(const struct varcache *vc, struct link *l, const char *link_sp,
		      char *sql, size_t cap);
/* Scan a simple-protocol query text for session-state effects. */
void varcache_scan_query(const char *sql, size_t len, struct query_effects *fx);

/* ---- session_sp.c ---- */

/* A Query was sent (after syncs_sent counted it): stage its search_path change. */
void sp_on_query(struct session *s, const struct query_effects *fx);
/* Does a client message of <type> need sp_on_client_ext() (whole packet)? */
bool sp_wants(const struct session *s, uint8_t type);
/* A whole Parse / Bind / Execute / Close packet (<pkt>, <len> bytes) is being sent. */
void sp_on_client_ext(struct session *s, const uint8_t *pkt, uint32_t len);
/* A server CommandComplete / ErrorResponse; a ReadyForQuery with <status> on link <l>. */
void sp_on_server(struct session *s, const struct sbuf_pkt *pkt);
void sp_on_ready(struct session *s, struct link *l, char status);
/* Forget staged changes (new link, broken link) / everything (session end). */
void sp_reset(struct session *s);
void sp_cleanup(struct session *s);

/* ---- prepared.c ---- */

void prep_client_cleanup(struct prep_client *pc);
void prep_link_cleanup(struct prep_link *pl);
/* Drop every name of the client (DEALLOCATE ALL, DISCARD ALL). */
void prep_client_clear(struct prep_client *pc);
void prep_link_clear(struct prep_link *pl);
/*
 * Handle a client message that names statements: Parse 'P', Bind 'B', Describe 'D',
 * Close 'C' (whole packet <pkt> of <len> bytes) on link <l>. Sends what the server must get
 * (with injected Parse / Close) and records tracked requests. Returns false with <err>
 * set when the client must get an error (and nothing was sent).
 */
NK_MUSTCHECK bool prep_client_msg(struct session *s, struct link *l, const uint8_t *pkt,
				  uint32_t len, struct nk_error *err, bool *fatal);
/* A ParseComplete for an injected Parse of <st> arrived: the link has it now. */
void prep_link_confirm(struct link *l, struct prep_stmt *st);
/* An injected Parse of <st> was not answered (error in its batch): forget it on <l>. */
void prep_link_forget(struct link *l, struct prep_stmt *st);
/* One more / one less reference to <st> (the last one frees it); addref returns <st>. */
struct prep_stmt *prep_stmt_addref(struct prep_stmt *st);
void prep_stmt_unref(struct prep_stmt *st);
/* The worker table's entry for <query> with the <nparams> big-endian parameter types <oids>
 * (found or created), with one more reference; NULL without memory. */
struct prep_stmt *prep_stmt_ref(const char *query, const uint8_t *oids, uint16_t nparams);
/*
 * The router: make <l>'s server have <st> under its internal name. When it has it already,
 * the LRU is touched and *<parsed> is false; otherwise <pb> gets a Close of each least
 * recently used statement beyond <max> and a Parse of <st>, the link counts <st> from now on
 * (prep_link_forget() if the server refuses that Parse) and *<parsed> is true. The server's
 * CloseComplete / ParseComplete are the caller's to drop. False without memory.
 */
NK_MUSTCHECK bool prep_link_prepare(struct link *l, struct prep_stmt *st, size_t max,
				    struct pktbuf *pb, bool *parsed);
/* Number of distinct statements in the worker table, and the bytes of their texts. */
size_t prep_stmt_count(void);
size_t prep_stmt_text_bytes(void);

/* ---- spool.c: the worker's pools, per-link data, global limits ---- */

/* The pool for database <db> and login user <user>; creates it. NULL with <err>. */
struct spool *spool_get_or_create(const struct cfg *c, const struct cfg_database *db,
				  const char *dbname, const char *user, const char *password,
				  struct nk_error *err);
/* A replication client's pool key: "database" / "true" and its startup parameters. */
struct spool_repl {
	const char *kind;		/* a string constant */
	const uint8_t *startup;		/* borrowed: name\0value\0 pairs */
	size_t startup_len;
};
struct spool *spool_get_or_create_repl(const struct cfg *c, const struct cfg_database *db,
				       const char *dbname, const char *user,
				       const char *password, const struct spool_repl *r,
				       struct nk_error *err);
/* The replication kind of <sp>'s pool ("database" / "true"), NULL for an ordinary pool. */
const char *spool_repl(const struct spool *sp);
struct pool *spool_pool(struct spool *sp);
/* Bytes of one spool object (SHOW MEM). */
size_t spool_object_size(void);
/* The session layer's data of link <l> (created on first use; NULL only without memory). */
struct link_ext *spool_link_ext(struct link *l);
/* Global client counters (max_client_conn and the per-db/user client limits). */
NK_MUSTCHECK bool spool_client_try(const struct session *s, bool *g, bool *d, bool *u,
				   struct nk_error *err);
void spool_client_release(const struct session *s, bool *g, bool *d, bool *u);
/* Worker 0: the pools of forced-user databases with min_pool_size exist (pgbouncer). */
void spool_keep_min_pools(const struct cfg *c);
/* The pool_limits_ops over shm counters. */
const struct pool_limits_ops *spool_limits_ops(void);
/* Walk the worker's pools; the client-side database name of one. */
struct spool *spool_first(void);
/* A pool of this worker for database <db> (any user), or NULL. */
struct spool *spool_find(const char *db);
struct spool *spool_next(const struct spool *sp);
const char *spool_db(const struct spool *sp);

/*
 * SUSPEND (sctl.c): stop reading every client at rest (idle, or active with nothing buffered)
 * and its link; returns how many could not be yet. With <force> (suspend_timeout passed)
 * those are closed ("suspend_timeout") instead. sess_resume_all() reads them again.
 */
size_t sess_suspend_step(bool force);
void sess_resume_all(void);

/* ---- sctl.c: the console's pooling commands ---- */

/* PAUSE / KILL in force for database <db> (or for all) / DISABLE in force for <db>. */
bool sctl_db_paused(const char *db);
bool sctl_db_disabled(const char *db);
/* SHUTDOWN WAIT_FOR_SERVERS is in progress: a client needing a link is closed. */
bool sctl_shutting_down(void);

#endif /* NEKI_WORKER_SESSION_INT_H */
