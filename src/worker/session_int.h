/*
 * session_int.h - the client session's types, shared by src/worker/ and src/pool/spool.c.
 *
 * struct session is one client connection. Its phases each have a handler file:
 * session_startup.c (startup packet, parameters, database, limits), session_auth.c (client
 * authentication, auth_query), session_fwd.c (logged-in traffic in every pool mode),
 * session_cancel.c (BackendKeyData and cancel forwarding). session.c owns the state machine,
 * closing, the janitor (timeouts) and the reaping; session_prep.c a client's prepared
 * statements on its link, session_route.c the client sink of a routed session (neki/exec.h).
 */
#ifndef NEKI_WORKER_SESSION_INT_H
#define NEKI_WORKER_SESSION_INT_H

#include "neki/base.h"

#include <stdarg.h>
#include <sys/socket.h>

#include "neki/admin_relay.h"
#include "neki/config.h"
#include "neki/error.h"
#include "neki/hash.h"
#include "neki/link.h"
#include "neki/list.h"
#include "neki/pool.h"
#include "neki/proto.h"
#include "neki/sbuf.h"
#include "neki/scram.h"
#include "neki/session.h"
#include "neki/shm.h"
#include "neki/prepared.h"
#include "neki/spool.h"
#include "neki/varcache.h"
#include "sctl.h"
#include "session_cancel.h"
#include "session_sp.h"
#include "session_state.h"

struct event;
struct pktbuf;
struct spool;
struct arelay;
struct route;

/*
 * A link-less client's Parse / Close batch (session_fwd.c, sess_prep_batch_here): its link
 * wait may give up (SESS_PARSE_WAIT_US), and then the batch is answered here.
 */
enum sess_prep_batch {
	SESS_PREP_BATCH_NONE = 0,
	SESS_PREP_BATCH_WAITS = 1,	/* its next wait for a link is bounded */
	SESS_PREP_BATCH_HERE = 2,	/* that wait gave up: answer the batch here */
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
	bool ssl_asked;			/* an SSLRequest was answered (a second one is refused) */
	bool gss_asked;			/* a GSSENCRequest was answered (likewise) */
	enum cfg_auth_type auth_method;	/* the method in use for this login */
	uint64_t id;			/* global socket id (shm_socket_id_next): SHOW CLIENTS,
					 * KILL_CLIENT */
	uint32_t key_pid;		/* our BackendKeyData: encodes the worker */
	uint32_t key_secret;

	/* identity */
	struct sess_peer from;		/* address, port, peer pid (session_state.h) */
	char *user;			/* owned: login user name */
	char *dbname;			/* owned: client-side database name */
	char *app_name;			/* owned: startup application_name (or NULL) */
	enum proto_replication replication; /* a walsender client (pgbouncer 1.23) */
	uint8_t *repl_startup;		/* owned: its startup parameters for the server */
	size_t repl_startup_len;
	uint8_t *neki_opts;		/* owned: the __neki.* settings of its options, name\0value\0
					 * pairs, for its route (route_session_options) */
	size_t neki_opts_len;
	const struct cfg *cfg;		/* counted reference (cfg_ref) taken at accept */
	const struct cfg_database *db;	/* borrowed from cfg; NULL = no such database */
	const struct cfg_user *ucfg;	/* borrowed from cfg; NULL = no [users] entry */
	bool db_missing;		/* report "no such database" after auth */
	bool sharded;			/* db is sharded (sess_db_is_sharded() at login) */
	bool user_unknown;		/* mock authentication: always fails */
	char *secret;			/* owned: the user's stored secret (auth_file/auth_query) */
	struct shm_stats *stats;	/* borrowed: its database's counters (shm_dbstats_get) */
	struct spool *sp;		/* borrowed: the pool for (db, user) */
	struct spool *authq_sp;		/* borrowed: auth_user's pool while in AUTHQ */
	enum cfg_pool_mode mode;	/* effective pool mode */
	bool counted_global;		/* holds a max_client_conn unit */
	bool counted_db;		/* holds a max_db_client_connections unit */
	bool counted_user;		/* holds a max_user_client_connections unit */
	struct session_console_units console_units; /* a console login's limit units */
	bool attached;			/* pool_client_attach() done */
	bool wait_notified;		/* query_wait_notify's NOTICE sent for this wait */

	struct sess_auth auth;		/* the authentication exchange (session_state.h) */

	/* the link */
	struct link *link;		/* weak: held link (cleared on release / break) */
	struct link *authq_link;	/* weak: auth_query link */
	bool authq_found;		/* auth_query returned the user's row */
	struct pool_waiter waiter;	/* queued acquire */
	bool release_pending;		/* ev_release armed */
	struct event *ev_release;	/* owned: deferred release after ReadyForQuery */

	struct sess_sync sync;		/* protocol bookkeeping while a link is held */

	/* session state */
	struct varcache vars;		/* what the client wants */
	struct prep_client prep;	/* client statement names */
	bool prep_on;			/* rewriting active (not session mode, max > 0) */
	uint8_t prep_batch;		/* enum sess_prep_batch: a link-less Parse batch's wait */

	struct sess_clock tm;		/* connect, activity, query, transaction, wait times */

	struct sess_admin_state adm;	/* SUSPEND, SHOW FDS, the online restart's fence */
	/* the admin process answers (session_admin.c) */
	struct arelay *relay;		/* owned: console relay, or the __neki call running */
	struct sess_nx *nx;		/* owned: an extended-protocol __neki call up to its Sync
					 * (session_nekiext.c); NULL none */
	struct sess_nxstmt *nx_stmts;	/* owned: the statements that are __neki calls */

	struct route *route;		/* owned: sharded database (route.c); NULL = pass-through */

	struct session *next_dead;	/* reap list (weak) */
};

/* ---- session.c ---- */

uint64_t sess_now_us(void);
const char *sess_state_str(enum sess_state st);
void sess_set_state(struct session *s, enum sess_state st);
/* Log with pgbouncer's client prefix "C-0x...: db/user@addr:port". */
void sess_log(const struct session *s, int lvl, const char *fmt, ...) NK_PRINTF(3, 4);
void sess_vlog(const struct session *s, int lvl, const char *fmt, va_list ap) NK_PRINTF(3, 0);
/*
 * Close the client: log "closing because: <reason>" (<reason> NULL: no line, the socket went
 * on elsewhere), release or close the link, then send <err> (if any) as an ErrorResponse
 * (pgbouncer's order: the log has the lines before the client sees its error), free later.
 * Safe from any callback.
 */
void sess_close(struct session *s, const char *reason, const struct nk_error *err);
/* The session begins to wait for a link (query_wait_notify's NOTICE is due again). */
void sess_wait_begin(struct session *s);
/* Close with a FATAL pooler error <msg> (SQLSTATE 08P01), pgbouncer's disconnect_client. */
void sess_fatal(struct session *s, const char *msg);
/* Send one message built in <pb> (freed) to the client; false when the client is gone. */
NK_MUSTCHECK bool sess_send_pb(struct session *s, struct pktbuf *pb);
/* Send <err> as ErrorResponse (not closing); logged as a pooler error (sess_pooler_error). */
NK_MUSTCHECK bool sess_send_error(struct session *s, const struct nk_error *err);
/* An error neki itself answers the client: "pooler error: <msg>" (WARNING) when
 * log_pooler_errors is on, as pgbouncer logs each one it sends. */
void sess_pooler_error(const struct session *s, const struct nk_error *err);
/* The effective value of a per-user / per-database / global timeout. */
double sess_query_timeout(const struct session *s);
/* Call <fn> for every session that is not CLOSED (SHOW CLIENTS); <fn> must not close. */
void sess_foreach(void (*fn)(struct session *s, void *arg), void *arg);
/*
 * Call <fn> for every session that is not CLOSED; <fn> may close it and then returns true
 * (the walk starts its list again: <fn> must skip what it has seen, e.g. by state).
 */
void sess_foreach_closing(bool (*fn)(struct session *s, void *arg), void *arg);
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
/* A startup packet whose length is out of bounds: FATAL 08P01, then close. */
void sess_startup_bad_length(struct session *s);
/* Authentication finished: check the database, attach to the pool, welcome. */
void sess_login_done(struct session *s);
/* The pool for the session got (or failed to get) its welcome parameters. */
void sess_send_welcome(struct session *s);
/* The effective pool mode: [users] entry, then [databases] entry, then the global one. */
enum cfg_pool_mode sess_pool_mode(const struct session *s);
/* The [databases] entry a client of database <name> uses: its own, or "*", or NULL. */
const struct cfg_database *sess_db_entry(const struct cfg *c, const char *name);
/* Give back the client-count units taken at login. */
void sess_release_counts(struct session *s);
/*
 * The password a pool of database <db> logs in with for a client whose stored secret is
 * <secret>: the forced user's (password= or its auth_file secret), the entry's password=,
 * else <secret>. Borrowed.
 */
const char *sess_pool_password(const struct cfg *c, const struct cfg_database *db,
			       const char *secret);

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
/* Arm that release now when the pool mode and the protocol state allow it. */
void sess_release_soon(struct session *s);
/* pool_waiter.log of a session's waiter (pgbouncer's client prefix on the pool's lines). */
void sess_waiter_log(struct pool_waiter *w, int level, const char *msg);
/* session_auth.c: auth_query's ReadyForQuery arrived; go on (from sess_release_cb). */
void sess_authq_finish(struct session *s);
/* Free the request queue. */
void sess_reqs_cleanup(struct session *s);
/* Record a Parse / Close sent to the server whose answer must be matched (prepared.c). */
NK_MUSTCHECK bool sess_track_request(struct session *s, enum req_kind kind, bool swallow,
				     struct prep_stmt *st);

/* ---- session_route.c ---- */

/* Give a session of a sharded database its route (s->route), with the session as its
 * client (neki/exec.h); false on no memory. */
NK_MUSTCHECK bool sess_route_start(struct session *s);

/* ---- session_adopt.c: the online restart, in the new process ---- */

/*
 * A new session (LOGIN, reading) on the handed-over client socket <fd>, which it owns from
 * here (closed when this fails: NULL).
 */
struct session *sess_adopt_new(int fd);
/*
 * A ReadyForQuery or EmptyQueryResponse from the link of a session adopted with it (s->adm.fence):
 * forwarded while it belongs to what the old process had in flight, swallowed when it
 * answers the fence. Returns what the link callback returns.
 */
bool sess_fence_pkt(struct session *s, struct link *l, const struct sbuf_pkt *pkt);

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
/* A __neki call relayed for <s> ended: ReadyForQuery, the client read again. */
void sess_admin_call_done(struct session *s, enum arelay_end end);
/* ReadyForQuery with the session's transaction status; false when the session closed. */
bool sess_admin_ready(struct session *s);

/* ---- session_nekiext.c: __neki calls over the extended protocol ---- */

/* A Parse (whole, <pkt>) of a sharded session: -1 when not a __neki call, else what the
 * sbuf callback returns (the batch up to Sync is this file's). */
int sess_nekiext_try_parse(struct session *s, const struct sbuf_pkt *pkt);
/* A Bind or a Describe (whole) of a statement kept as a __neki call: as try_parse. */
int sess_nekiext_try_kept(struct session *s, const struct sbuf_pkt *pkt);
/* A client message of that batch (s->nx set). */
bool sess_nekiext_pkt(struct session *s, const struct sbuf_pkt *pkt);
void sess_nekiext_free(struct session *s);

/*
 * Is [databases] entry <d> a sharded logical database (DESIGN.md 5): topology=yes, or named
 * in the published topology's `databases` ("*" never is)? The one place that decides it.
 */
bool sess_db_is_sharded(const struct cfg_database *d);

#endif /* NEKI_WORKER_SESSION_INT_H */
