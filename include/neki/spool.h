/*
 * neki/spool.h - the worker's pools (src/pool/spool.c): one per (database, login user), the
 * session layer's data of each link, and the client limits kept in shm (a console login
 * counts toward them as a client does).
 */
#ifndef NEKI_SPOOL_H
#define NEKI_SPOOL_H

#include "neki/base.h"

#include "neki/prepared.h"

struct cfg;
struct cfg_database;
struct event_base;
struct link;
struct nk_error;
struct pktbuf;
struct pool;
struct pool_limits_ops;
struct proto_reader;
struct session;
struct spool;

/* ---- per-link state kept by the session layer (link user data) ---- */

struct link_ext {
	struct prep_link prep;		/* statements prepared on the server */
	char *search_path;		/* owned: value set on the server by a client; NULL = default */
};

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
/* The session data of a link taken over from another worker, from <r> (linkmove.c). */
NK_MUSTCHECK bool spool_link_ext_import(struct link *l, struct proto_reader *r);
/*
 * A pool's identity in a link handed between workers: its names (spool_put_ids /
 * spool_get_ids, which also gives the ids every process has for them), the pool of this
 * worker they name (NULL: none), the three counters the link holds given back
 * (spool_release_ids) or moved from process <from>'s share to <to>'s (spool_move_slot).
 */
struct spool_ids {
	const char *db, *user;		/* borrowed from the datagram */
	unsigned db_id, user_id, pool_id;
};
unsigned spool_pool_id(const struct spool *sp);
void spool_put_ids(const struct spool *sp, struct pktbuf *pb);
NK_MUSTCHECK bool spool_get_ids(struct proto_reader *r, struct spool_ids *ids);
struct spool *spool_find_ids(const struct spool_ids *ids);
void spool_release_ids(const struct spool_ids *ids);
void spool_move_slot(const struct spool *sp, int from, int to);
/* Global client counters (max_client_conn and the per-db/user client limits). */
NK_MUSTCHECK bool spool_client_try(const struct session *s, bool *g, bool *d, bool *u,
				   struct nk_error *err);
void spool_client_release(const struct session *s, bool *g, bool *d, bool *u);
/* The same units for a client the online restart took over: taken whatever the limits. */
void spool_client_adopt(const struct session *s, bool *g, bool *d, bool *u);
/* Worker 0: the pools of forced-user databases with min_pool_size exist (pgbouncer). */
void spool_keep_min_pools(const struct cfg *c);
/* A session (from attach to detach) or a route (for its life) borrows <sp>: while any does,
 * the pool is in use and is not freed. */
void spool_ref(struct spool *sp);
void spool_unref(struct spool *sp);
/*
 * The session janitor's tick (monotonic <now>): free the pools nothing has used (no
 * borrower, link, nor waiter) for pool_idle_timeout ("cleaning up idle pool for user U on
 * db D because: pool idle timeout (age= Ns)"), and every pool of an auto-database ("*")
 * unused for autodb_idle_timeout ("dropping database 'D' as it does not exist anymore or
 * inactive auto-database"), as pgbouncer. Forced-user pools kept at min_pool_size stay.
 */
void spool_reap_idle(const struct cfg *c, uint64_t now);
/* The pool_limits_ops over shm counters. */
const struct pool_limits_ops *spool_limits_ops(void);
/* Walk the worker's pools; the client-side database name of one. */
struct spool *spool_first(void);
/* A pool of this worker for database <db> (any user), or NULL. */
struct spool *spool_find(const char *db);
struct spool *spool_next(const struct spool *sp);
const char *spool_db(const struct spool *sp);
/*
 * A pool of a pass-through [databases] entry (or "*") still in the configuration: not a
 * routed shard's, not a replication pool (the online restart hands over only these links).
 */
bool spool_is_passthrough(const struct spool *sp);

/*
 * The client-limit units a console login holds (the `pgbouncer` / `neki` database, logged
 * in on the main port or on the admin port): session_console_take() fills it,
 * session_console_release() gives it back. Zeroed = holds nothing.
 */
struct session_console_units {
	bool db;		/* holds a unit of its database's client count */
	bool user;		/* holds a unit of its login user's client count */
	unsigned db_cnt;	/* the counters (spool.c's ids) */
	unsigned user_cnt;
};

/*
 * Count a console login of <user> on <db> toward max_db_client_connections and
 * max_user_client_connections, as pgbouncer counts a client of its admin database: the
 * login user is <user>, or `pgbouncer` for the <local_admin> Unix-socket user and under
 * auth_type any; the local admin (and, under any, an admin_users name) is not counted per
 * user; a login user in admin_users is never refused. False with pgbouncer's FATAL in <err>
 * when a limit is exceeded (what <held> took stays held: release it).
 */
NK_MUSTCHECK bool session_console_take(const struct cfg *c, const char *db, const char *user,
				       bool local_admin, struct session_console_units *held,
				       struct nk_error *err);
void session_console_release(struct session_console_units *held);

#endif /* NEKI_SPOOL_H */
