/*
 * neki/config.h - the parsed neki.ini (a pgbouncer.ini) and its settings table.
 *
 * cfg_load() parses a file (with %include), validates every setting against the
 * one settings table (src/config/settings.c) and returns a new, refcounted
 * struct cfg. A reload parses into a new struct and swaps it in only when all of
 * it is valid. Readers use cfg_current(). Nothing else in neki reads the ini.
 *
 * Sections: [pgbouncer] (also [neki]), [databases], [users], [peers], [shards].
 */
#ifndef NEKI_CONFIG_H
#define NEKI_CONFIG_H

#include "neki/base.h"
#include "neki/config_groups.h"
#include "neki/config_shard.h"
#include "neki/error.h"

#include <stdio.h>

struct cfg_setting;		/* a row of the settings table: neki/config_settings.h */

/* target_session_attrs of a [databases] entry: which server of its host list is acceptable. */
enum cfg_target_attrs {
	CFG_TSA_ANY = 0,	/* every server (the default) */
	CFG_TSA_READ_WRITE = 1,	/* not in hot standby, default_transaction_read_only off */
	CFG_TSA_READ_ONLY = 2,	/* in hot standby, or default_transaction_read_only on */
	CFG_TSA_PRIMARY = 3,	/* not in hot standby */
	CFG_TSA_STANDBY = 4,	/* in hot standby */
};

#define CFG_PORTS_MAX 32	/* ports in one [databases] port= list */

/* One [databases] entry. Strings are owned by the struct cfg (NULL = unset). */
struct cfg_database {
	char *name;		/* the client-side name; "*" for the auto-database */
	char *dbname;		/* server-side name; NULL = same as name */
	char *host;		/* host, comma list, unix dir (starts with '/'), or NULL */
	int port;		/* default 5432; the first of a port= list */
	uint16_t ports[CFG_PORTS_MAX]; /* port=a,b,...: one per host of the host list */
	unsigned nports;	/* entries in ports[]; 0 or 1: <port> for every host */
	char *user;		/* forced user or NULL */
	char *password;
	char *auth_user;
	char *auth_query;
	char *auth_dbname;
	int pool_size;		/* -1 = unset (use default_pool_size) */
	int min_pool_size;	/* -1 = unset */
	int reserve_pool_size;	/* -1 = unset; alias key reserve_pool */
	int max_db_connections;	/* -1 = unset (use global) */
	int max_db_client_connections; /* -1 = unset */
	enum cfg_pool_mode pool_mode; /* CFG_POOL_UNSET = global */
	double server_lifetime;	/* seconds; -1 = unset */
	double query_wait_timeout; /* seconds; -1 = unset */
	bool load_balance_hosts; /* true = round-robin (default), false = disable */
	enum cfg_target_attrs target_session_attrs; /* checked after each server login */
	char *connect_query;
	char *client_encoding;
	char *datestyle;
	char *timezone;
	char *application_name;
	bool topology;		/* topology=yes: a sharded logical database (neki key) */
	int read_target;	/* target=: the sessions' first __neki.target, an enum
				 * cfg_server_kind (neki key; default primary) */
	int tx_mode;		/* tx_mode=: their first __neki.tx_mode, multi 0 (default),
				 * single 1, atomic 2: enum plan_tx_mode's values (neki key) */
	char *source;		/* "file:line" where the entry was defined */
};

/* One [users] entry. */
struct cfg_user {
	char *name;
	enum cfg_pool_mode pool_mode;	/* CFG_POOL_UNSET = not set */
	int pool_size;			/* -1 = unset */
	int reserve_pool_size;		/* -1 = unset */
	int max_user_connections;	/* -1 = unset */
	int max_user_client_connections; /* -1 = unset */
	double query_timeout;		/* seconds; -1 = unset */
	double query_wait_timeout;	/* -1 = unset */
	double idle_transaction_timeout; /* -1 = unset */
	double transaction_timeout;	/* -1 = unset */
	double client_idle_timeout;	/* -1 = unset */
};

/* One [peers] entry. */
struct cfg_peer {
	int peer_id;		/* 1..65535 */
	char *host;		/* required */
	int port;		/* default 6432 */
	int pool_size;		/* -1 = unset (default_pool_size) */
};

/*
 * Every [pgbouncer]/[neki] setting. Times are seconds (double), as pgbouncer reads
 * them; sizes are bytes; booleans are 0/1 in the ini. Setting strings are owned and
 * never NULL once loaded ("" = unset). `workers` is never 0 once loaded (0 in the ini
 * means "the number of online CPUs"). `conffile` defaults to the loaded path.
 */
struct cfg {
	int refcount;		/* cfg_ref / cfg_unref */
	char *path;		/* the file given on the command line (conffile) */

	/* the [pgbouncer] / [neki] settings, by group (neki/config_groups.h) */
	struct cfg_process_settings proc;
	struct cfg_pool_settings pool;
	struct cfg_auth_settings auth;
	struct cfg_server_settings srv;
	struct cfg_client_settings cli;
	struct cfg_log_settings log;
	struct cfg_dns_settings dns;
	struct cfg_net_settings net;
	struct cfg_tls_settings tls;
	struct cfg_neki_settings neki;
	struct cfg_replica_settings replicas;	/* shards with standbys */

	/* the other sections, in file order */
	struct cfg_database *databases;	/* owned array */
	size_t n_databases;
	struct cfg_user *users;		/* owned array */
	size_t n_users;
	struct cfg_peer *peers;		/* owned array */
	size_t n_peers;
	struct cfg_shard *shards;	/* owned array */
	size_t n_shards;
};

/*
 * Parse and validate <path>. On success returns a new struct cfg (refcount 1).
 * On failure returns NULL and fills <err> (SQLSTATE F0000, message naming
 * file:line, the key and what is accepted; `where` = "file:line").
 */
struct cfg *cfg_load(const char *path, struct nk_error *err);

/* Parse from a string (tests); <name> is used as the file name in errors. */
struct cfg *cfg_load_string(const char *name, const char *text, struct nk_error *err);

/*
 * One log line for a configuration error: "<message>: <detail>; <hint>" (the parts
 * that are set), e.g. `invalid value "x" for parameter listen_port in configuration
 * (neki.ini:3): expected an integer from 1 to 65535`. Returns <buf>.
 */
const char *cfg_error_text(const struct nk_error *err, char *buf, size_t len);

/* A struct cfg with every default (no sections). */
struct cfg *cfg_new_defaults(void);

/*
 * A deep copy of <c> (refcount 1), or NULL when out of memory. Configs are shared
 * immutable snapshots: a console SET applies to a copy that then becomes current.
 */
struct cfg *cfg_dup(const struct cfg *c);

void cfg_ref(struct cfg *c);
void cfg_unref(struct cfg *c);

/* The configuration in force in this process (borrowed; NULL before the first set). */
const struct cfg *cfg_current(void);

/* Make <c> current (takes a reference; drops the previous one). */
void cfg_set_current(struct cfg *c);

/* Lookups in the sections (NULL when absent; the "*" entry is not returned by name). */
const struct cfg_database *cfg_database_find(const struct cfg *c, const char *name);
const struct cfg_user *cfg_user_find(const struct cfg *c, const char *name);
/*
 * Is <name> one of the names of <list>, separated by commas and white space (admin_users,
 * stats_users)? Case-sensitive, as pgbouncer compares them.
 */
bool cfg_list_has(const char *list, const char *name);

/* The "*" auto-database entry, or NULL when [databases] has none. */
const struct cfg_database *cfg_database_auto(const struct cfg *c);

/* The [peers] entry with <peer_id>, or NULL. */
const struct cfg_peer *cfg_peer_find(const struct cfg *c, int peer_id);

/*
 * Reload support. A reload loads the file into a new struct cfg (cfg_load) and, when
 * that succeeded, calls cfg_keep_not_reloadable(next, old) before cfg_set_current(next).
 */

/*
 * The whole reload: load <old>->proc.conffile into a new config, then keep <old>'s value
 * of every non-reloadable setting that changed (logged, see below). Returns the new
 * config (refcount 1; the caller makes it current), or NULL with <err> set: the
 * caller keeps <old> and logs the error ("config file loading failed").
 */
struct cfg *cfg_reload(const struct cfg *old, struct nk_error *err);

/*
 * For each setting that is not reloadable and differs between <old> and <next>: log
 * "parameter X is not reloadable; restart needed (keeping Y)" at WARNING and copy the
 * old value into <next>. Stores up to <max> such settings in <changed> (may be NULL)
 * and their total count in <*n_changed>. Returns false (with <next> partly updated)
 * only when out of memory.
 */
NK_MUSTCHECK bool cfg_keep_not_reloadable(struct cfg *next, const struct cfg *old,
					  const struct cfg_setting **changed, size_t max,
					  size_t *n_changed);

/*
 * True when a [databases] entry changed in a way that makes its server connections
 * stale (pgbouncer: dbname, host, port, forced user, connect_query, auth_dbname,
 * auth_query or load_balance_hosts): they must be closed when released.
 */
bool cfg_database_needs_reconnect(const struct cfg_database *old, const struct cfg_database *next);

/* libpq's name of <t> ("any", "read-write", ...). */
const char *cfg_target_attrs_str(enum cfg_target_attrs t);

/*
 * Write the generated documentation: neki.ini.sample (<sample> true) or the
 * neki.ini(5) markdown page, both from the settings and section tables. Returns
 * false on a write error. The unit tests compare the committed files with it.
 */
NK_MUSTCHECK bool cfg_write_doc(FILE *out, bool sample);

/* Names of the enum values (for SHOW CONFIG and logs). */
const char *cfg_pool_mode_str(enum cfg_pool_mode m);
const char *cfg_auth_type_str(enum cfg_auth_type t);
const char *cfg_sslmode_str(enum cfg_sslmode m);

#endif /* NEKI_CONFIG_H */
