/*
 * admin_int.h - private interfaces of the admin process (src/admin/).
 *
 *   call.c      recognise `SELECT [* FROM] __neki.<fn>(args)` and decode the literals (call.h)
 *   flatjson.c  the flat JSON objects neki itself reads (options, the cache file wrapper;
 *               flatjson.h)
 *   stats.c     SHOW STATS / TOTALS / STATS_AVERAGES..., the log_stats line (stats.h)
 *   result.c    building RowDescription / DataRow / CommandComplete replies
 *   console.c   the console connection state machine (startup, auth, simple query)
 *   fds.c       SHOW FDS: every process's sockets, passed on for the online restart
 *   nekifn.c    the __neki function table: arguments, roles, handlers
 *   revision.c  the topology revisions: validate, store (its SQL too), cache, publish
 *   pgconn.c    the libpq adapter (the only file that includes libpq-fe.h)
 *   catload.c   loading the catalog (src/catalog) and publishing it into shm
 *   catcheck.c  set_data_topology's fresh catalog check of the new document's databases
 *   servers.c   the role and replay lag of every server of the shards with standbys
 *   switchover.c  SWITCHOVER <shard>: pause, primary read-only, catch-up, promote, resume
 */
#ifndef NEKI_ADMIN_ADMIN_INT_H
#define NEKI_ADMIN_ADMIN_INT_H

#include "neki/base.h"

#include <sys/socket.h>

#include "neki/error.h"
#include "neki/auth.h"
#include "neki/pktbuf.h"
#include "neki/scram.h"
#include "neki/shm.h"
#include "call.h"
#include "flatjson.h"
#include "pgconn.h"

struct event_base;
struct topo_model;

/* ---- result.c ---- */

/* Type OIDs of the columns the console returns. */
enum adm_type {
	ADM_T_BOOL = 16,
	ADM_T_BYTEA = 17,
	ADM_T_INT8 = 20,
	ADM_T_INT4 = 23,
	ADM_T_TEXT = 25,
	ADM_T_FLOAT8 = 701,
	ADM_T_TIMESTAMPTZ = 1184,
	ADM_T_NUMERIC = 1700,
};

struct adm_col {
	const char *name;
	enum adm_type type;
};

#define ADM_RESULT_MAX_COLS 32

/* A reply being built: messages accumulate in pb until the console sends them. */
struct adm_result {
	struct pktbuf pb;		/* owned */
	size_t ncols;			/* columns of the open row set (as sent) */
	uint64_t nrows;			/* rows written since adm_result_columns */
	const char (*sel)[ADM_NAME_MAX]; /* borrowed: selected column names; NULL = all */
	size_t nsel;
	size_t map[ADM_RESULT_MAX_COLS]; /* sent column i is produced column map[i] */
	char bad_col[ADM_NAME_MAX];	/* a selected column the function lacks ("" = none) */
	struct nk_error *error;		/* owned: the first error appended; NULL */
};

void adm_result_init(struct adm_result *r);
void adm_result_cleanup(struct adm_result *r);
/* Send only the columns <names>[0..n) of the row sets that follow (SELECT a, b FROM ...). */
void adm_result_select(struct adm_result *r, const char (*names)[ADM_NAME_MAX], size_t n);
/* RowDescription for <n> columns. */
void adm_result_columns(struct adm_result *r, const struct adm_col *cols, size_t n);
/* One DataRow of text values (NULL pointer = SQL NULL); as many as the columns. */
void adm_result_row(struct adm_result *r, const char *const *vals);
/* CommandComplete: "<tag> <rows>" when <with_count>, else "<tag>". */
void adm_result_complete(struct adm_result *r, const char *tag, bool with_count);
/* Append an ErrorResponse (logged as adm_pooler_error() does). */
void adm_result_error(struct adm_result *r, const struct nk_error *err);
/* An error the console sends: "pooler error: <msg>" (WARNING) with log_pooler_errors on. */
void adm_pooler_error(const struct nk_error *err);
void adm_result_notice(struct adm_result *r, const struct nk_error *err);

/* ---- console.c / nekifn.c: requests ---- */

/* What a console user may do (pgbouncer's admin_users / stats_users, neki's roles). */
enum adm_access {
	ADM_ACCESS_NONE = 0,	/* logged in, no listed role (may still be a shard role member) */
	ADM_ACCESS_STATS = 1,	/* stats_users: read-only SHOW, __neki readers */
	ADM_ACCESS_ADMIN = 2,	/* admin_users or the local "pgbouncer" user: everything */
};

struct adm_conn;

/*
 * One __neki call in progress. Created by the console for a recognised call, finished by
 * nekifn.c with adm_req_finish() (maybe much later, from a libpq callback).
 */
struct adm_req {
	struct adm_conn *conn;		/* weak: cleared by the console when the client goes */
	struct adm_call call;		/* owned */
	struct adm_result res;		/* owned: the reply being built */
	char user[ADM_NAME_MAX];	/* the console user */
	enum adm_access access;
	const struct adm_fn *fn;	/* borrowed: the function table row */
	void *state;			/* owned by the function (freed by its handler) */
	struct adm_req *next;		/* revision.c's queues */
	void (*done)(void *arg, const struct nk_error *err);	/* an internal request's end */
	void *done_arg;
};

/* Run the call of <req> (nekifn.c). Ends with adm_req_finish(), now or later. */
void nekifn_start(struct adm_req *req);
/* Send <req>'s reply (when its client is still there), resume the client, free <req>;
 * adm_req_fail: with the error <err> as that reply. adm_req_internal: a request of the admin
 * itself (no client; user "neki"), whose end calls <done> with its first error or NULL. */
struct adm_req *adm_req_internal(void (*done)(void *arg, const struct nk_error *err), void *arg);
void adm_req_finish(struct adm_req *req);
void adm_req_fail(struct adm_req *req, const struct nk_error *err);

/* Run console command <sql> (not a __neki call) of <req> (cmd.c); adm_req_finish() ends it. */
void adm_command(struct adm_req *req, const char *sql);

/* cmd_ctl.c: the control commands (admin only) and SET. */
void ctl_command(struct adm_req *req, const char *verb, const char *arg, const char *sql);
/* A console session closed: if it issued the SUSPEND in force, resume (as pgbouncer). */
void ctl_console_gone(const void *conn);
bool cmd_is_set(const char *sql);
void cmd_set(struct adm_req *req, const char *sql);

/* console.c: the console's own sessions and the admin pool as list rows (wlist.c's format). */
bool console_list_rows(void *buf, size_t cap, size_t *len);
/*
 * The socket of console session <c> when SHOW FDS may pass descriptors on it (the local user
 * pgbouncer on the Unix socket, served here, no TLS, nothing queued), else -1.
 */
int console_pass_fd_socket(const struct adm_conn *c);
/* "host" and port of <ss> ("unix" and 0 for anything but IPv4 and IPv6). */
void adm_sockaddr_text(const struct sockaddr_storage *ss, char *host, size_t hlen, int *port);

/* ---- fds.c: SHOW FDS ---- */

struct fdchan_hdr;
/* Run SHOW FDS for <req> (admin access checked): ends with adm_req_finish(), later. */
void fds_start(struct adm_req *req);
/* A worker's ROWS or END message on the descriptor channel (its descriptors now ours). */
void fds_on_message(const struct fdchan_hdr *h, const int *fds, size_t nfds);

/* ---- lists.c: rows gathered from every worker ---- */

typedef void (*lists_show_fn)(struct adm_result *r);
/*
 * Gather every worker's rows (and the console's), then run <show> on them and finish <req>
 * (later, from the loop). Inside <show> the lists_* functions below see those rows.
 */
void lists_gather(struct adm_req *req, lists_show_fn show);
/* The same for another consumer: <run>(<arg>) is called on the rows. False without memory. */
NK_MUSTCHECK bool lists_gather_run(void (*run)(void *arg), void *arg);
/* Inside a gathering: <fn> for every merged pool, with SHOW POOLS' 17 values (maxwait_us
 * holding the whole longest wait in microseconds). */
void lists_foreach_pool(void (*fn)(void *arg, const char *const *vals), void *arg);
/* ... <fn> for every row of <kind> with <ncols> values (their text). */
void lists_foreach_row(char kind, size_t ncols, void (*fn)(void *arg, const char *const *v),
		       void *arg);

enum lists_what {
	LISTS_USED_CLIENTS = 0,		/* logged-in clients */
	LISTS_LOGIN_CLIENTS = 1,	/* clients still logging in */
	LISTS_USED_SERVERS = 2,		/* server links */
	LISTS_POOLS = 3,		/* (database, user) pools */
	LISTS_DB_CLIENTS = 4,		/* logged-in clients of database <name> */
	LISTS_DB_SERVERS = 5,		/* server links of database <name> */
	LISTS_USER_CLIENTS = 6,		/* logged-in clients of user <name> */
	LISTS_USER_SERVERS = 7,		/* server links of user <name> */
	LISTS_DNS_NAMES = 8,		/* distinct cached host names */
	LISTS_DNS_ZONES = 9,		/* distinct zones */
	LISTS_SHARD_SERVERS = 10,	/* server links to shard <name> (pools "<db>@<name>") */
};
/* A count over the gathered rows (0 outside a gathering). */
int64_t lists_count(enum lists_what what, const char *name);
bool lists_first_of(char kind, size_t i);
void lists_show_clients(struct adm_result *r);
void lists_show_servers(struct adm_result *r);
void lists_show_sockets(struct adm_result *r);
void lists_show_active_sockets(struct adm_result *r);
void lists_show_pools(struct adm_result *r);
void lists_show_dns_hosts(struct adm_result *r);
void lists_show_dns_zones(struct adm_result *r);
void lists_show_mem(struct adm_result *r);
void lists_show_peer_pools(struct adm_result *r);

/* ---- metrics.c: OpenMetrics over HTTP on metrics_listen_addr:metrics_listen_port ---- */

/* Start listening when metrics_listen_port is set (admin start); failures are logged. */
void metrics_init(struct event_base *base);

/* ---- console_auth.c ---- */

enum con_auth_result {
	CON_AUTH_OK = 0,	/* logged in (anything in <out> goes first) */
	CON_AUTH_CONTINUE = 1,	/* send <out>, wait for the next client message */
	CON_AUTH_FAIL = 2,	/* send <err> (FATAL) and close */
};

struct con_auth {
	enum auth_exchange exchange;
	int step;			/* console_auth.c's enum con_auth_step */
	char user[ADM_NAME_MAX];
	char *secret;			/* owned: from auth_file; NULL for an unknown user */
	uint8_t salt[4];		/* md5 */
	struct scram_server scram;	/* owned while scram_active */
	bool scram_active;
};

/* Choose the exchange for <user>/<db> on socket <fd> and write its first request. */
enum con_auth_result con_auth_start(struct con_auth *a, const char *user, const char *db, int fd,
				    bool is_unix, struct pktbuf *out, struct nk_error *err);
/* Take the client's answer (message <type>, <body>). */
enum con_auth_result con_auth_step(struct con_auth *a, char type, const uint8_t *body, size_t len,
				   struct pktbuf *out, struct nk_error *err);
void con_auth_cleanup(struct con_auth *a);

/*
 * Accept a console connection: from the admin port, or (<forwarded>) from a worker on the
 * internal socket, where a peer with neki's own uid is trusted with the user name it sends.
 */
void console_accept(int fd, bool is_unix, bool forwarded);
/*
 * A console client a worker handed over (neki/fdchan.h): logged in by the worker as <who>
 * (the local user pgbouncer on the main port's Unix socket); answered from here on.
 */
struct fdchan_console;
void console_adopt(int fd, const struct fdchan_console *who);

/* ---- revision.c / follow.c: topology revisions ---- */

/* What this router serves now (revision.c owns it). */
struct rev_current {
	uint64_t revision;		/* 0 = no topology */
	char *json;			/* owned: canonical JSON; NULL when none */
	struct topo_model *model;	/* owned; NULL when none */
	char auth_uid[ADM_NAME_MAX];	/* shard uid of the authoritative group; "" when none */
};

/* Keep the revision shm holds (a restarted admin), else load the cache file (topology_file)
 * and publish what it holds; start following the store. */
void rev_init(struct event_base *base);
const struct rev_current *rev_get(void);

/*
 * Install <json> as revision <revision> (read from the store or the cache: trusted, only
 * parsed), write the cache file when <cache>, and publish it into shm. False when the
 * document cannot be parsed or published (logged).
 */
NK_MUSTCHECK bool rev_install(uint64_t revision, const char *json, bool cache);

/* __neki functions with a revision-store side (each ends with adm_req_finish). */
/* The SQL creating the store's schema (one transaction, advisory-locked). */
const char *rev_store_ddl(void);
void rev_set(struct adm_req *req, const char *json, bool overwrite, const char *options);
void rev_list_revisions(struct adm_req *req);
/* Store <json> as the first revision (topology_file at boot); no reply. */
void rev_store_first(const char *json);

/* follow.c: the watcher connection, LISTEN, heartbeat, discovery, waits */
void follow_init(struct event_base *base);
/* The authoritative shard changed (or became known): point the connections at it. */
void follow_set_authority(const char *uid);
/* The libpq conninfo of shard <uid> for the store, or NULL when [shards] lacks it. */
char *follow_conninfo(const char *uid);
/* The same for server <index> of the shard alone (cfg_server.conninfo); NULL when none. */
char *follow_server_conninfo(const char *uid, size_t index);
/* The lowest revision every live local process has switched to. */
uint64_t follow_local_revision_seen(void);
/* Tell the registry that this host now serves <revision> (after a publication). */
void follow_announce(void);
void follow_wait(struct adm_req *req, uint64_t revision, double timeout);
/* __neki.wait_for_ddl: every live neki host has published a catalog of cluster schema
 * version >= <schema_version> and runs topology revision >= <cluster_version>. */
void follow_wait_ddl(struct adm_req *req, uint64_t schema_version, uint64_t cluster_version,
		     double timeout);
void follow_list_shards(struct adm_req *req);
/* SHOW SHARDS: uid, host, port, state, links, server, kind, role, primary, lag_ms per server. */
void follow_show_shards(struct adm_req *req);
/* __neki.notification_queue_usage(): (shard_uid, usage) of each shard of the notify shard
 * group (the authoritative group: where NOTIFY and LISTEN go through neki). */
void follow_queue_usage(struct adm_req *req);
/* Is the console user a member of <role> on the authoritative shard? Answers through <cb>. */
void follow_check_role(struct adm_req *req, const char *role,
		       void (*cb)(struct adm_req *req, bool member));

/* ---- catload.c: the catalog (src/catalog) loaded from the authoritative shard ---- */

struct topo_findings;

/* Start loading and publishing the catalog; poll workers' refresh requests (admin start). */
void catload_init(struct event_base *base);
/* Load the catalog again (now, or after the load in flight). */
void catload_refresh(void);
/* A topology revision was published: its databases' catalogs are loaded again. */
void catload_topology_changed(void);
/*
 * Call <cb>(<arg>) once a catalog load that read topology revision <revision> (or a later
 * one) has ended, published or not. False, and no call, when one has ended already (or the
 * waiter cannot be kept).
 */
bool catload_after_revision(uint64_t revision, void (*cb)(void *arg), void *arg);
/* Forget the waiter of <arg> (no call). */
void catload_forget(void *arg);
/*
 * The conninfo of database <db> on shard <uid> with application_name <app>: the shard's
 * own dbname when its conninfo names one, else <db> (as workers connect). Malloc'd; NULL
 * when [shards] lacks <uid> or on no memory.
 */
char *catload_conninfo(const char *uid, const char *db, const char *app);

/* ---- ddlsync.c: DDL and setval() across neki hosts (the store's cluster_state) ---- */

void ddlsync_init(struct event_base *base);
/*
 * The cluster schema version a catalog load about to start will carry, to <cb>: with <bump>
 * (the load answers DDL through this host) the store's version + 1, announced to the other
 * hosts; else the store's version. The published one when the store cannot be read.
 */
void ddlsync_version(bool bump, void (*cb)(void *arg, uint64_t version), void *arg);
/* The heartbeat read the store's schema_version and seq_epoch: follow them. */
void ddlsync_learned(uint64_t schema_version, uint64_t seq_epoch);
/* A NOTIFY on the watcher: true when it was neki_catalog or neki_sequences (handled). */
bool ddlsync_notified(const char *channel, const char *payload);

/* activity.c: __neki.stat_get_activity() (sessions of every host); a NOTIFY neki_activity
 * of <epoch>: publish this host's sessions into the store. */
void activity_start(struct adm_req *req);
void activity_notified(uint64_t epoch);

/* advisor.c: __neki.check_schema(<db>; NULL: every database of the topology): rows
 * (object, rule, severity, advice); ends with adm_req_finish. */
void advisor_check_schema(struct adm_req *req, const char *db);
typedef void (*adv_row_fn)(void *arg, const char *const *vals);
typedef void (*adv_end_fn)(void *arg, const struct nk_error *err);
/* Run the rules over <db> (NULL: every database): <row> per finding, then <end> once. */
void advisor_run(const char *db, adv_row_fn row, adv_end_fn end, void *arg);
/* After DDL: every finding into shm for schema version <v> (shm_advice_set), then <done>. */
void advisor_after_ddl(uint64_t v, void (*done)(void *arg), void *arg);

/* shardfn.c: neki's functions (uuidv7) on every shard of the topology, after start and
 * after each published topology revision. */
void shardfn_init(struct event_base *base);
void shardfn_topology_changed(void);
/*
 * set_data_topology: add the catalog rules' findings of <m> to <f> (V4; marked preexisting
 * when <previous> has them too). False with <err> when one blocks the apply.
 */
NK_MUSTCHECK bool catload_check(const struct topo_model *m, const struct topo_model *previous,
				struct topo_findings *f, struct nk_error *err);
/* validate_data_topology: add the V4 and V11 findings of <m> to <f>. */
void catload_add_findings(const struct topo_model *m, struct topo_findings *f);
/* The last published catalog version (0 = none yet). */
uint64_t catload_version(void);

/*
 * ---- catcheck.c ----
 * catload_check() judges a new document by the catalog already loaded for the published
 * topology; catcheck_run() reads the catalog of the new document's databases fresh, just
 * before the store (the first topology, a database new to the topology, tables changed since
 * the last load).
 */

typedef void (*catcheck_done_fn)(void *arg, const struct nk_error *err);

/*
 * Check the rules of <m> that need the shards' catalog (V4 fails, V11 is logged), reading it
 * from the authoritative shard <auth_uid>. <done> gets NULL when the topology passes.
 */
void catcheck_run(const struct topo_model *m, const char *auth_uid, bool force,
		  catcheck_done_fn done, void *arg);

/* follow.c: run <sql> on the authoritative shard's watcher connection; false when none. */
bool follow_query(const char *sql, pgc_done_fn cb, void *arg);
bool follow_query_params(const char *sql, size_t n, const char *const *params, pgc_done_fn cb,
			 void *arg);
/* This host's id in __neki.routers ("<hostname>:<listen_port>"). */
const char *follow_host_id(void);

#include "stats.h"

#endif /* NEKI_ADMIN_ADMIN_INT_H */
