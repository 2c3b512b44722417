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
#include "neki/config_shard.h"
#include "neki/error.h"

#include <stdio.h>

struct cfg_setting;		/* a row of the settings table: neki/config_settings.h */

enum cfg_pool_mode {
	CFG_POOL_SESSION = 0,
	CFG_POOL_TRANSACTION = 1,
	CFG_POOL_STATEMENT = 2,
	CFG_POOL_UNSET = 3,	/* per-db / per-user override absent */
};

enum cfg_auth_type {
	CFG_AUTH_ANY = 0,
	CFG_AUTH_TRUST = 1,
	CFG_AUTH_PLAIN = 2,
	CFG_AUTH_MD5 = 3,
	CFG_AUTH_SCRAM = 4,	/* "scram-sha-256" */
	CFG_AUTH_CERT = 5,
	CFG_AUTH_HBA = 6,
	CFG_AUTH_PEER = 7,	/* hba only */
	CFG_AUTH_REJECT = 8,	/* hba only */
};

enum cfg_sslmode {
	CFG_SSL_DISABLE = 0,
	CFG_SSL_ALLOW = 1,
	CFG_SSL_PREFER = 2,
	CFG_SSL_REQUIRE = 3,
	CFG_SSL_VERIFY_CA = 4,
	CFG_SSL_VERIFY_FULL = 5,
};

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

/* The settings of shards with standbys (seconds each). */
struct cfg_replica_settings {
	double failover_hold_timeout;	/* 0 = no hold */
	double replica_lag_tolerable_min;
	double replica_lag_tolerable_max;
	double replica_poll_interval;
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

	/* process, listening, files */
	char *logfile;
	char *pidfile;
	char *listen_addr;
	int listen_port;
	char *unix_socket_dir;
	int unix_socket_mode;
	char *unix_socket_group;
	char *user;
	char *conffile;
	char *service_name;
	char *job_name;
	bool so_reuseport;
	int peer_id;
	int listen_backlog;
	char *resolv_conf;
	bool disable_pqexec;

	/* pooling and limits */
	enum cfg_pool_mode pool_mode;
	int max_client_conn;
	int default_pool_size;
	int min_pool_size;
	int reserve_pool_size;
	double reserve_pool_timeout;
	int max_db_connections;
	int max_db_client_connections;
	int max_user_connections;
	int max_user_client_connections;
	bool server_round_robin;
	char *track_extra_parameters;
	char *ignore_startup_parameters;
	int max_prepared_statements;
	double autodb_idle_timeout;
	double pool_idle_timeout;
	bool application_name_add_host;
	double stats_period;
	int scram_iterations;

	/* authentication and console access */
	enum cfg_auth_type auth_type;
	char *auth_file;
	char *auth_hba_file;
	char *auth_ident_file;
	char *auth_user;
	char *auth_query;
	char *auth_dbname;
	char *auth_ldap_options;
	char *admin_users;
	char *stats_users;
	char *login_notify_message;

	/* server connection lifecycle */
	char *server_reset_query;
	bool server_reset_query_always;
	double server_check_delay;
	char *server_check_query;
	bool server_fast_close;
	double server_lifetime;
	double server_idle_timeout;
	double server_connect_timeout;
	double server_login_retry;

	/* client-side timeouts */
	double client_login_timeout;
	double client_idle_timeout;
	double query_timeout;
	double query_wait_timeout;
	double query_wait_notify;
	double cancel_wait_timeout;
	double idle_transaction_timeout;
	double transaction_timeout;
	double suspend_timeout;

	/* logging */
	bool syslog;
	char *syslog_ident;
	char *syslog_facility;
	bool log_connections;
	bool log_disconnections;
	bool log_pooler_errors;
	bool log_stats;
	int verbose;

	/* DNS */
	double dns_max_ttl;
	double dns_nxdomain_ttl;
	double dns_zone_check_period;

	/* low-level network */
	int pkt_buf;
	int max_packet_size;
	int sbuf_loopcnt;
	bool tcp_defer_accept;
	int tcp_socket_buffer;
	bool tcp_keepalive;
	int tcp_keepcnt;
	int tcp_keepidle;
	int tcp_keepintvl;
	int tcp_user_timeout;

	/* TLS */
	enum cfg_sslmode client_tls_sslmode;
	char *client_tls_key_file;
	char *client_tls_cert_file;
	char *client_tls_ca_file;
	char *client_tls_protocols;
	char *client_tls_ciphers;
	char *client_tls13_ciphers;
	char *client_tls_ecdhcurve;
	char *client_tls_dheparams;
	enum cfg_sslmode server_tls_sslmode;
	char *server_tls_ca_file;
	char *server_tls_key_file;
	char *server_tls_cert_file;
	char *server_tls_protocols;
	char *server_tls_ciphers;
	char *server_tls13_ciphers;

	/* neki's own */
	int workers;		/* default: number of online cores */
	char *admin_listen_addr; /* default 127.0.0.1 */
	int admin_listen_port;	/* default 6433; 0 = no admin port */
	bool admin_listen_given; /* admin_listen_addr or _port is in the file (not a default) */
	char *metrics_listen_addr;
	int metrics_listen_port; /* 0 = off */
	char *topology_file;
	int64_t shm_size, router_work_mem;	/* bytes */
	int sequence_batch;
	double atomic_recovery_grace, distributed_deadlock_timeout;	/* seconds (src/admin/) */
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
 * The whole reload: load <old>->conffile into a new config, then keep <old>'s value
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
