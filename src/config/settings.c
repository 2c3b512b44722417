/*
 * settings.c - the one settings table of [pgbouncer]/[neki] and its value syntax.
 *
 * One row per setting, sorted by name (SHOW CONFIG order): pgbouncer 1.25's 101
 * settings with their defaults and CF_NO_RELOAD marks, plus neki's own. Value
 * syntax as pgbouncer: integers with strtol(..., 0) (0777 is octal), times in
 * seconds as a float (no negative values, no unit suffix), booleans as integers
 * (neki also accepts on/off, yes/no, true/false), enums by name in any case.
 * Sizes (shm_size) take bytes or a kB/MB/GB/TB suffix (1024-based, as Postgres).
 * Entry points: cfg_settings(), cfg_setting_find(), cfg_setting_apply(),
 * cfg_setting_format(), cfg_setting_changed(); settings_* for the rest of config/.
 */
#include "neki/base.h"

#include "config_int.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define CFG_INT_MAX 2147483647.0
#define CFG_TIME_MAX 1e9	/* seconds (about 31 years) */

#define CFG_DEFAULT_AUTH_QUERY \
	"SELECT rolname, CASE WHEN rolvaliduntil < now() THEN NULL ELSE rolpassword END " \
	"FROM pg_authid WHERE rolname=$1 AND rolcanlogin"

#define O(field) offsetof(struct cfg, field)

static const char *const cfg_pool_mode_names[] = {
	"session", "transaction", "statement", NULL
};

/* Indexed by enum cfg_auth_type; peer and reject are hba-only, not auth_type values. */
static const char *const cfg_auth_type_names[] = {
	"any", "trust", "plain", "md5", "scram-sha-256", "cert", "hba", NULL
};

static const char *const cfg_sslmode_names[] = {
	"disable", "allow", "prefer", "require", "verify-ca", "verify-full", NULL
};

static bool settings_assign_workers(struct cfg *c);
static bool settings_assign_job_name(struct cfg *c);
static bool settings_assign_service_name(struct cfg *c);

/*
 * The table. Columns: name, type, offset, default (ini text), min, max, reloadable,
 * neki_only, enum names, description, unit, group, assign hook.
 */
static const struct cfg_setting cfg_table[] = {
	{ "admin_listen_addr", CFG_T_STRING, O(neki.admin_listen_addr), "127.0.0.1",
	  0, 0, false, true, NULL,
	  "addresses of neki's admin console listener (SHOW, PAUSE, RELOAD and the "
	  "topology functions); comma list, * = all",
	  "", CFG_G_NEKI, NULL },
	{ "admin_listen_port", CFG_T_INT, O(neki.admin_listen_port), "6433",
	  0, 65535, false, true, NULL,
	  "TCP port of the admin console listener; 0 = no separate admin port (when the "
	  "file sets neither admin setting and the default port is taken, neki warns and goes "
	  "on without)",
	  "", CFG_G_NEKI, NULL },
	{ "admin_users", CFG_T_STRING, O(auth.admin_users), "",
	  0, 0, true, false, NULL,
	  "comma-separated users allowed to run every admin console command",
	  "", CFG_G_AUTH, NULL },
	{ "application_name_add_host", CFG_T_BOOL, O(pool.application_name_add_host), "0",
	  0, 1, true, false, NULL,
	  "append the client's host:port to application_name at connect time",
	  "", CFG_G_POOL, NULL },
	{ "atomic_recovery_grace", CFG_T_TIME, O(neki.atomic_recovery_grace), "10",
	  0.1, 86400, true, true, NULL,
	  "seconds a prepared transaction of __neki.tx_mode atomic is left to its coordinator "
	  "before the recovery decides it (an abort row on its decision shard unless the "
	  "decision is there)",
	  "s", CFG_G_NEKI, NULL },
	{ "auth_dbname", CFG_T_STRING, O(auth.auth_dbname), "",
	  0, 0, true, false, NULL,
	  "database that auth_query runs in (default: the client's database); the console "
	  "databases pgbouncer and neki are refused",
	  "", CFG_G_AUTH, NULL },
	{ "auth_file", CFG_T_STRING, O(auth.auth_file), "",
	  0, 0, true, false, NULL,
	  "file with user names and passwords (userlist.txt format)",
	  "", CFG_G_AUTH, NULL },
	{ "auth_hba_file", CFG_T_STRING, O(auth.auth_hba_file), "",
	  0, 0, true, false, NULL,
	  "pg_hba.conf-style rules used when auth_type = hba",
	  "", CFG_G_AUTH, NULL },
	{ "auth_ident_file", CFG_T_STRING, O(auth.auth_ident_file), "",
	  0, 0, true, false, NULL,
	  "pg_ident.conf-style user name maps for the HBA file",
	  "", CFG_G_AUTH, NULL },
	{ "auth_ldap_options", CFG_T_STRING, O(auth.auth_ldap_options), "",
	  0, 0, true, false, NULL,
	  "default LDAP options for hba ldap lines; this build has no LDAP, so only the empty "
	  "value is accepted (any other is refused at load)",
	  "", CFG_G_AUTH, NULL },
	{ "auth_query", CFG_T_STRING, O(auth.auth_query), CFG_DEFAULT_AUTH_QUERY,
	  0, 0, true, false, NULL,
	  "query that loads a user's password from the server when the user is not in auth_file",
	  "", CFG_G_AUTH, NULL },
	{ "auth_type", CFG_T_ENUM, O(auth.auth_type), "md5",
	  0, 0, true, false, cfg_auth_type_names,
	  "how clients authenticate: any, trust, plain, md5, scram-sha-256, cert or hba",
	  "", CFG_G_AUTH, NULL },
	{ "auth_user", CFG_T_STRING, O(auth.auth_user), "",
	  0, 0, true, false, NULL,
	  "user that neki connects as to run auth_query",
	  "", CFG_G_AUTH, NULL },
	{ "autodb_idle_timeout", CFG_T_TIME, O(pool.autodb_idle_timeout), "3600",
	  0, CFG_TIME_MAX, true, false, NULL,
	  "seconds after which a database created from \"*\" that no client and no server "
	  "connection uses is dropped with its pools (the next client registers it again); "
	  "0 = never",
	  "s", CFG_G_POOL, NULL },
	{ "cancel_wait_timeout", CFG_T_TIME, O(cli.cancel_wait_timeout), "10",
	  0, CFG_TIME_MAX, true, false, NULL,
	  "seconds a cancel request may wait to be sent (connecting to the server or [peers] "
	  "entry, queued behind a peer's pool_size forwards) before it is dropped; 0 = forever",
	  "s", CFG_G_CLIENT, NULL },
	{ "client_idle_timeout", CFG_T_TIME, O(cli.client_idle_timeout), "0",
	  0, CFG_TIME_MAX, true, false, NULL,
	  "close a client connection idle for this many seconds; 0 = never",
	  "s", CFG_G_CLIENT, NULL },
	{ "client_login_timeout", CFG_T_TIME, O(cli.client_login_timeout), "60",
	  0, CFG_TIME_MAX, true, false, NULL,
	  "drop a client that has not finished logging in after this many seconds; 0 = never",
	  "s", CFG_G_CLIENT, NULL },
	{ "client_tls13_ciphers", CFG_T_STRING, O(tls.client_tls13_ciphers), "",
	  0, 0, true, false, NULL,
	  "TLS 1.3 cipher suites allowed for clients (empty = library default)",
	  "", CFG_G_TLS, NULL },
	{ "client_tls_ca_file", CFG_T_STRING, O(tls.client_tls_ca_file), "",
	  0, 0, true, false, NULL,
	  "root certificates used to validate client certificates",
	  "", CFG_G_TLS, NULL },
	{ "client_tls_cert_file", CFG_T_STRING, O(tls.client_tls_cert_file), "",
	  0, 0, true, false, NULL,
	  "certificate that neki presents to clients",
	  "", CFG_G_TLS, NULL },
	{ "client_tls_ciphers", CFG_T_STRING, O(tls.client_tls_ciphers), "default",
	  0, 0, true, false, NULL,
	  "TLS 1.2 and older cipher list allowed for clients",
	  "", CFG_G_TLS, NULL },
	{ "client_tls_dheparams", CFG_T_STRING, O(tls.client_tls_dheparams), "auto",
	  0, 0, true, false, NULL,
	  "DHE key exchange for clients: none, auto or legacy",
	  "", CFG_G_TLS, NULL },
	{ "client_tls_ecdhcurve", CFG_T_STRING, O(tls.client_tls_ecdhcurve), "auto",
	  0, 0, true, false, NULL,
	  "elliptic curve for ECDH key exchange with clients: none, auto or a curve name",
	  "", CFG_G_TLS, NULL },
	{ "client_tls_key_file", CFG_T_STRING, O(tls.client_tls_key_file), "",
	  0, 0, true, false, NULL,
	  "private key of client_tls_cert_file",
	  "", CFG_G_TLS, NULL },
	{ "client_tls_protocols", CFG_T_STRING, O(tls.client_tls_protocols), "secure",
	  0, 0, true, false, NULL,
	  "TLS protocol versions allowed for clients: tlsv1.0 ... tlsv1.3, all, secure (= "
	  "tlsv1.2,tlsv1.3)",
	  "", CFG_G_TLS, NULL },
	{ "client_tls_sslmode", CFG_T_ENUM, O(tls.client_tls_sslmode), "disable",
	  0, 0, true, false, cfg_sslmode_names,
	  "TLS mode for client connections: disable, allow, prefer, require, verify-ca or "
	  "verify-full",
	  "", CFG_G_TLS, NULL },
	{ "conffile", CFG_T_STRING, O(proc.conffile), "",
	  0, 0, true, false, NULL,
	  "configuration file that RELOAD reads (default: the file given on the command line)",
	  "", CFG_G_PROCESS, NULL },
	{ "default_pool_size", CFG_T_INT, O(pool.default_pool_size), "20",
	  0, CFG_INT_MAX, true, false, NULL,
	  "server connections per (database, user) pool; 0 = unlimited",
	  "", CFG_G_POOL, NULL },
	{ "disable_pqexec", CFG_T_BOOL, O(proc.disable_pqexec), "0",
	  0, 1, false, false, NULL,
	  "refuse the simple query protocol (a defence against SQL injection): a Query message "
	  "ends the session with FATAL \"PQexec disallowed\" (the console is exempt)",
	  "", CFG_G_PROCESS, NULL },
	{ "distributed_deadlock_timeout", CFG_T_TIME, O(neki.distributed_deadlock_timeout), "1",
	  0, 3600, true, true, NULL,
	  "seconds a lock wait of a client's statement on a shard lasts before the admin "
	  "process looks for a wait cycle across shards that no Postgres server can see; one "
	  "found gets a statement of it canceled with 40P01 (0 = never look)",
	  "s", CFG_G_NEKI, NULL },
	{ "dns_max_ttl", CFG_T_TIME, O(dns.dns_max_ttl), "15",
	  0, CFG_TIME_MAX, true, false, NULL,
	  "seconds a successful DNS lookup is cached",
	  "s", CFG_G_DNS, NULL },
	{ "dns_nxdomain_ttl", CFG_T_TIME, O(dns.dns_nxdomain_ttl), "15",
	  0, CFG_TIME_MAX, true, false, NULL,
	  "seconds a failed DNS lookup (NXDOMAIN) is cached",
	  "s", CFG_G_DNS, NULL },
	{ "dns_zone_check_period", CFG_T_TIME, O(dns.dns_zone_check_period), "0",
	  0, CFG_TIME_MAX, true, false, NULL,
	  "period in seconds for checking DNS zone serials; 0 = off",
	  "s", CFG_G_DNS, NULL },
	{ "failover_hold_timeout", CFG_T_TIME, O(replicas.failover_hold_timeout), "5",
	  0, 3600, true, true, NULL,
	  "seconds a statement for a shard with standbys but no primary (a failover) waits "
	  "for one to be found among the shard's servers; then it fails; 0 = fail at once",
	  "s", CFG_G_NEKI, NULL },
	{ "idle_transaction_timeout", CFG_T_TIME, O(cli.idle_transaction_timeout), "0",
	  0, CFG_TIME_MAX, true, false, NULL,
	  "close a client idle in a transaction for this many seconds; 0 = never",
	  "s", CFG_G_CLIENT, NULL },
	{ "ignore_startup_parameters", CFG_T_STRING, O(pool.ignore_startup_parameters), "",
	  0, 0, true, false, NULL,
	  "comma-separated startup parameters that are ignored instead of refused (may include "
	  "options)",
	  "", CFG_G_POOL, NULL },
	{ "job_name", CFG_T_STRING, O(proc.job_name), "pgbouncer",
	  0, 0, false, false, NULL,
	  "name of the Windows service (pgbouncer reads it on Windows only); neki runs on Linux "
	  "and only keeps it for SHOW CONFIG, so that a pgbouncer.ini loads; alias service_name",
	  "", CFG_G_PROCESS, settings_assign_job_name },
	{ "listen_addr", CFG_T_STRING, O(proc.listen_addr), "",
	  0, 0, false, false, NULL,
	  "comma-separated addresses to listen on for TCP, * = all; empty = Unix socket only",
	  "", CFG_G_PROCESS, NULL },
	{ "listen_backlog", CFG_T_INT, O(proc.listen_backlog), "128",
	  0, CFG_INT_MAX, false, false, NULL,
	  "backlog of listen() on the client listeners",
	  "", CFG_G_PROCESS, NULL },
	{ "listen_port", CFG_T_INT, O(proc.listen_port), "6432",
	  1, 65535, false, false, NULL,
	  "port for TCP and for the Unix socket name .s.PGSQL.<port>",
	  "", CFG_G_PROCESS, NULL },
	{ "log_connections", CFG_T_BOOL, O(log.log_connections), "1",
	  0, 1, true, false, NULL,
	  "log each successful client login",
	  "", CFG_G_LOG, NULL },
	{ "log_disconnections", CFG_T_BOOL, O(log.log_disconnections), "1",
	  0, 1, true, false, NULL,
	  "log each client disconnection with its reason",
	  "", CFG_G_LOG, NULL },
	{ "log_pooler_errors", CFG_T_BOOL, O(log.log_pooler_errors), "1",
	  0, 1, true, false, NULL,
	  "log each error neki itself sends a client (login, limits, timeouts, refusals, console "
	  "errors) as WARNING \"pooler error: <message>\"",
	  "", CFG_G_LOG, NULL },
	{ "log_stats", CFG_T_BOOL, O(log.log_stats), "1",
	  0, 1, true, false, NULL,
	  "log aggregate statistics every stats_period seconds",
	  "", CFG_G_LOG, NULL },
	{ "logfile", CFG_T_STRING, O(proc.logfile), "",
	  0, 0, true, false, NULL,
	  "file to log to, kept open and reopened on RELOAD (empty = no file)",
	  "", CFG_G_LOG, NULL },
	{ "login_notify_message", CFG_T_STRING, O(auth.login_notify_message), "",
	  0, 0, true, false, NULL,
	  "NOTICE sent to every client after a successful login (empty = none)",
	  "", CFG_G_AUTH, NULL },
	{ "max_client_conn", CFG_T_INT, O(pool.max_client_conn), "100",
	  0, CFG_INT_MAX, true, false, NULL,
	  "maximum number of client connections (console sessions count, but are never "
	  "refused)",
	  "", CFG_G_POOL, NULL },
	{ "max_db_client_connections", CFG_T_INT, O(pool.max_db_client_connections), "0",
	  0, CFG_INT_MAX, true, false, NULL,
	  "maximum client connections per database; 0 = unlimited. Console sessions count "
	  "toward the admin database's (a login user in admin_users is never refused there)",
	  "", CFG_G_POOL, NULL },
	{ "max_db_connections", CFG_T_INT, O(pool.max_db_connections), "0",
	  0, CFG_INT_MAX, true, false, NULL,
	  "maximum server connections per database, all users together; 0 = unlimited",
	  "", CFG_G_POOL, NULL },
	{ "max_packet_size", CFG_T_INT, O(net.max_packet_size), "2147483647",
	  0, CFG_INT_MAX, true, false, NULL,
	  "largest protocol packet accepted",
	  "bytes", CFG_G_NET, NULL },
	{ "max_prepared_statements", CFG_T_INT, O(pool.max_prepared_statements), "200",
	  0, CFG_INT_MAX, true, false, NULL,
	  "prepared statements tracked per server connection in transaction and statement "
	  "modes; 0 = off",
	  "", CFG_G_POOL, NULL },
	{ "max_user_client_connections", CFG_T_INT, O(pool.max_user_client_connections), "0",
	  0, CFG_INT_MAX, true, false, NULL,
	  "maximum client connections per user; 0 = unlimited. Console sessions count toward "
	  "their login user's (the local pgbouncer user's do not; admin_users are never "
	  "refused on the console)",
	  "", CFG_G_POOL, NULL },
	{ "max_user_connections", CFG_T_INT, O(pool.max_user_connections), "0",
	  0, CFG_INT_MAX, true, false, NULL,
	  "maximum server connections per user, all databases together; 0 = unlimited",
	  "", CFG_G_POOL, NULL },
	{ "metrics_listen_addr", CFG_T_STRING, O(neki.metrics_listen_addr), "127.0.0.1",
	  0, 0, false, true, NULL,
	  "address of the Prometheus metrics listener",
	  "", CFG_G_NEKI, NULL },
	{ "metrics_listen_port", CFG_T_INT, O(neki.metrics_listen_port), "0",
	  0, 65535, false, true, NULL,
	  "TCP port of the Prometheus metrics listener; 0 = off",
	  "", CFG_G_NEKI, NULL },
	{ "min_pool_size", CFG_T_INT, O(pool.min_pool_size), "0",
	  0, CFG_INT_MAX, true, false, NULL,
	  "keep at least this many server connections open per pool (while clients use it; a "
	  "database with a forced user from the start)",
	  "", CFG_G_POOL, NULL },
	{ "peer_id", CFG_T_INT, O(proc.peer_id), "0",
	  0, 16383, true, false, NULL,
	  "this process's id among [peers] for forwarding cancel requests; 0 = peering off",
	  "", CFG_G_PROCESS, NULL },
	{ "pidfile", CFG_T_STRING, O(proc.pidfile), "",
	  0, 0, false, false, NULL,
	  "file holding the master's pid (required for -d)",
	  "", CFG_G_PROCESS, NULL },
	{ "pkt_buf", CFG_T_INT, O(net.pkt_buf), "4096",
	  64, 1073741824, false, false, NULL,
	  "size of the buffer used for network packets",
	  "bytes", CFG_G_NET, NULL },
	{ "pool_idle_timeout", CFG_T_TIME, O(pool.pool_idle_timeout), "0",
	  0, CFG_TIME_MAX, true, false, NULL,
	  "free a pool with no client and no server connection for this many seconds (logged "
	  "\"cleaning up idle pool\"); forced-user pools kept at min_pool_size stay; 0 = never",
	  "s", CFG_G_POOL, NULL },
	{ "pool_mode", CFG_T_ENUM, O(pool.pool_mode), "session",
	  0, 0, true, false, cfg_pool_mode_names,
	  "when a server connection returns to the pool: session, transaction or statement",
	  "", CFG_G_POOL, NULL },
	{ "query_timeout", CFG_T_TIME, O(cli.query_timeout), "0",
	  0, CFG_TIME_MAX, true, false, NULL,
	  "cancel a query running longer than this many seconds; 0 = never",
	  "s", CFG_G_CLIENT, NULL },
	{ "query_wait_notify", CFG_T_TIME, O(cli.query_wait_notify), "5",
	  0, CFG_TIME_MAX, true, false, NULL,
	  "send a NOTICE to a client queued for this many seconds; 0 = never",
	  "s", CFG_G_CLIENT, NULL },
	{ "query_wait_timeout", CFG_T_TIME, O(cli.query_wait_timeout), "120",
	  0, CFG_TIME_MAX, true, false, NULL,
	  "drop a client waiting this many seconds for a server connection; 0 = wait forever",
	  "s", CFG_G_CLIENT, NULL },
	{ "replica_lag_tolerable_max", CFG_T_TIME, O(replicas.replica_lag_tolerable_max), "900",
	  0, 86400, true, true, NULL,
	  "seconds of replay lag beyond which a standby is not read (__neki.target replica or "
	  "rdonly)",
	  "s", CFG_G_NEKI, NULL },
	{ "replica_lag_tolerable_min", CFG_T_TIME, O(replicas.replica_lag_tolerable_min), "30",
	  0, 86400, true, true, NULL,
	  "seconds of replay lag up to which a standby is in the preferred recency tier "
	  "(__neki.replica_recency); at most replica_lag_tolerable_max",
	  "s", CFG_G_NEKI, NULL },
	{ "replica_poll_interval", CFG_T_TIME, O(replicas.replica_poll_interval), "1",
	  0.05, 3600, true, true, NULL,
	  "seconds between the admin's checks of the role (pg_is_in_recovery()) and replay lag "
	  "of every server of a shard with standbys",
	  "s", CFG_G_NEKI, NULL },
	{ "reserve_pool_size", CFG_T_INT, O(pool.reserve_pool_size), "0",
	  0, CFG_INT_MAX, true, false, NULL,
	  "extra server connections per pool used when a client waited reserve_pool_timeout",
	  "", CFG_G_POOL, NULL },
	{ "reserve_pool_timeout", CFG_T_TIME, O(pool.reserve_pool_timeout), "5",
	  0, CFG_TIME_MAX, true, false, NULL,
	  "seconds a client waits before the reserve pool is used",
	  "s", CFG_G_POOL, NULL },
	{ "resolv_conf", CFG_T_STRING, O(proc.resolv_conf), "",
	  0, 0, false, false, NULL,
	  "resolv.conf to use instead of the system one (empty = system)",
	  "", CFG_G_DNS, NULL },
	{ "router_work_mem", CFG_T_INT64, O(neki.router_work_mem), "64MB",
	  65536, 1099511627776, true, true, NULL,
	  "memory one statement's merge of shard results, or the rows of a subquery or table it "
	  "reads through the router, may hold on the router (bytes, or with a kB, MB, GB or TB "
	  "suffix); a statement that needs more fails with SQLSTATE 53400",
	  "bytes", CFG_G_NEKI, NULL },
	{ "sbuf_loopcnt", CFG_T_INT, O(net.sbuf_loopcnt), "5",
	  0, CFG_INT_MAX, true, false, NULL,
	  "loops over one connection's data before serving others; 0 = no limit",
	  "", CFG_G_NET, NULL },
	{ "scram_iterations", CFG_T_INT, O(pool.scram_iterations), "4096",
	  1, CFG_INT_MAX, true, false, NULL,
	  "iterations of the SCRAM secrets neki computes: from a plain-text password (auth_file, "
	  "auth_query) and for the mock exchange of an unknown user; a stored SCRAM secret keeps "
	  "its own",
	  "", CFG_G_AUTH, NULL },
	{ "sequence_batch", CFG_T_INT, O(neki.sequence_batch), "1000",
	  1, CFG_INT_MAX, true, true, NULL,
	  "sequence values the router reserves per request for sharded identity and serial "
	  "columns",
	  "", CFG_G_NEKI, NULL },
	{ "server_check_delay", CFG_T_TIME, O(srv.server_check_delay), "30",
	  0, CFG_TIME_MAX, true, false, NULL,
	  "seconds after which an idle server connection is checked before reuse; 0 = after "
	  "every use",
	  "s", CFG_G_SERVER, NULL },
	{ "server_check_query", CFG_T_STRING, O(srv.server_check_query), "<empty>",
	  0, 0, true, false, NULL,
	  "query that checks an idle server connection; <empty> = an empty query, empty = no "
	  "check",
	  "", CFG_G_SERVER, NULL },
	{ "server_connect_timeout", CFG_T_TIME, O(srv.server_connect_timeout), "15",
	  0, CFG_TIME_MAX, true, false, NULL,
	  "give up connecting to a server after this many seconds",
	  "s", CFG_G_SERVER, NULL },
	{ "server_fast_close", CFG_T_BOOL, O(srv.server_fast_close), "0",
	  0, 1, true, false, NULL,
	  "close a server connection marked for closing as soon as its transaction ends in "
	  "session mode",
	  "", CFG_G_SERVER, NULL },
	{ "server_idle_timeout", CFG_T_TIME, O(srv.server_idle_timeout), "600",
	  0, CFG_TIME_MAX, true, false, NULL,
	  "close a server connection idle for this many seconds; 0 = never",
	  "s", CFG_G_SERVER, NULL },
	{ "server_lifetime", CFG_T_TIME, O(srv.server_lifetime), "3600",
	  0, CFG_TIME_MAX, true, false, NULL,
	  "close a server connection older than this many seconds when released; 0 = use each "
	  "once",
	  "s", CFG_G_SERVER, NULL },
	{ "server_login_retry", CFG_T_TIME, O(srv.server_login_retry), "15",
	  0, CFG_TIME_MAX, true, false, NULL,
	  "after a failed server login, wait this many seconds before retrying",
	  "s", CFG_G_SERVER, NULL },
	{ "server_reset_query", CFG_T_STRING, O(srv.server_reset_query), "DISCARD ALL",
	  0, 0, true, false, NULL,
	  "query run when a server connection returns to the pool in session mode",
	  "", CFG_G_SERVER, NULL },
	{ "server_reset_query_always", CFG_T_BOOL, O(srv.server_reset_query_always), "0",
	  0, 1, true, false, NULL,
	  "run server_reset_query in every pool mode",
	  "", CFG_G_SERVER, NULL },
	{ "server_round_robin", CFG_T_BOOL, O(pool.server_round_robin), "0",
	  0, 1, true, false, NULL,
	  "reuse server connections in turn instead of last-in first-out",
	  "", CFG_G_POOL, NULL },
	{ "server_tls13_ciphers", CFG_T_STRING, O(tls.server_tls13_ciphers), "",
	  0, 0, true, false, NULL,
	  "TLS 1.3 cipher suites allowed towards servers (empty = library default)",
	  "", CFG_G_TLS, NULL },
	{ "server_tls_ca_file", CFG_T_STRING, O(tls.server_tls_ca_file), "",
	  0, 0, true, false, NULL,
	  "root certificates used to validate server certificates",
	  "", CFG_G_TLS, NULL },
	{ "server_tls_cert_file", CFG_T_STRING, O(tls.server_tls_cert_file), "",
	  0, 0, true, false, NULL,
	  "client certificate that neki presents to servers",
	  "", CFG_G_TLS, NULL },
	{ "server_tls_ciphers", CFG_T_STRING, O(tls.server_tls_ciphers), "default",
	  0, 0, true, false, NULL,
	  "TLS 1.2 and older cipher list allowed towards servers",
	  "", CFG_G_TLS, NULL },
	{ "server_tls_key_file", CFG_T_STRING, O(tls.server_tls_key_file), "",
	  0, 0, true, false, NULL,
	  "private key of server_tls_cert_file",
	  "", CFG_G_TLS, NULL },
	{ "server_tls_protocols", CFG_T_STRING, O(tls.server_tls_protocols), "secure",
	  0, 0, true, false, NULL,
	  "TLS protocol versions allowed towards servers",
	  "", CFG_G_TLS, NULL },
	{ "server_tls_sslmode", CFG_T_ENUM, O(tls.server_tls_sslmode), "prefer",
	  0, 0, true, false, cfg_sslmode_names,
	  "TLS mode for server connections: disable, allow, prefer, require, verify-ca or "
	  "verify-full",
	  "", CFG_G_TLS, NULL },
	{ "service_name", CFG_T_STRING, O(proc.service_name), "pgbouncer",
	  0, 0, false, false, NULL,
	  "alias of job_name (the Windows service name: no effect on Linux, shown by SHOW CONFIG)",
	  "", CFG_G_PROCESS, settings_assign_service_name },
	{ "shm_size", CFG_T_INT64, O(neki.shm_size), "64MB",
	  1048576, 1099511627776, false, true, NULL,
	  "size of the shared memory segment (bytes, or with a kB, MB, GB or TB suffix)",
	  "bytes", CFG_G_NEKI, NULL },
	{ "so_reuseport", CFG_T_BOOL, O(proc.so_reuseport), "0",
	  0, 1, false, false, NULL,
	  "set SO_REUSEPORT on the TCP listeners",
	  "", CFG_G_PROCESS, NULL },
	{ "stats_period", CFG_T_TIME, O(pool.stats_period), "60",
	  1, CFG_TIME_MAX, true, false, NULL,
	  "period in seconds of the averages in SHOW STATS and of log_stats",
	  "s", CFG_G_POOL, NULL },
	{ "stats_users", CFG_T_STRING, O(auth.stats_users), "",
	  0, 0, true, false, NULL,
	  "comma-separated users allowed to run read-only console commands",
	  "", CFG_G_AUTH, NULL },
	{ "suspend_timeout", CFG_T_TIME, O(cli.suspend_timeout), "10",
	  0, CFG_TIME_MAX, true, false, NULL,
	  "seconds to wait for buffers to flush on SUSPEND or reboot; 0 = forever",
	  "s", CFG_G_CLIENT, NULL },
	{ "syslog", CFG_T_BOOL, O(log.syslog), "0",
	  0, 1, true, false, NULL,
	  "also log to syslog",
	  "", CFG_G_LOG, NULL },
	{ "syslog_facility", CFG_T_STRING, O(log.syslog_facility), "daemon",
	  0, 0, true, false, NULL,
	  "syslog facility: auth, authpriv, daemon, user or local0 ... local7",
	  "", CFG_G_LOG, NULL },
	{ "syslog_ident", CFG_T_STRING, O(log.syslog_ident), "pgbouncer",
	  0, 0, true, false, NULL,
	  "program name used in syslog lines",
	  "", CFG_G_LOG, NULL },
	{ "tcp_defer_accept", CFG_T_BOOL, O(net.tcp_defer_accept), "1",
	  0, 1, true, false, NULL,
	  "TCP_DEFER_ACCEPT on the listeners (Linux; 45 s when on)",
	  "", CFG_G_NET, NULL },
	{ "tcp_keepalive", CFG_T_BOOL, O(net.tcp_keepalive), "1",
	  0, 1, true, false, NULL,
	  "enable TCP keepalive on client and server sockets",
	  "", CFG_G_NET, NULL },
	{ "tcp_keepcnt", CFG_T_INT, O(net.tcp_keepcnt), "0",
	  0, CFG_INT_MAX, true, false, NULL,
	  "TCP_KEEPCNT; 0 = OS default",
	  "", CFG_G_NET, NULL },
	{ "tcp_keepidle", CFG_T_INT, O(net.tcp_keepidle), "0",
	  0, CFG_INT_MAX, true, false, NULL,
	  "TCP_KEEPIDLE in seconds; 0 = OS default",
	  "s", CFG_G_NET, NULL },
	{ "tcp_keepintvl", CFG_T_INT, O(net.tcp_keepintvl), "0",
	  0, CFG_INT_MAX, true, false, NULL,
	  "TCP_KEEPINTVL in seconds; 0 = OS default",
	  "s", CFG_G_NET, NULL },
	{ "tcp_socket_buffer", CFG_T_INT, O(net.tcp_socket_buffer), "0",
	  0, CFG_INT_MAX, true, false, NULL,
	  "socket send and receive buffer size; 0 = OS default",
	  "bytes", CFG_G_NET, NULL },
	{ "tcp_user_timeout", CFG_T_INT, O(net.tcp_user_timeout), "0",
	  0, CFG_INT_MAX, true, false, NULL,
	  "TCP_USER_TIMEOUT in milliseconds; 0 = OS default",
	  "ms", CFG_G_NET, NULL },
	{ "topology_file", CFG_T_STRING, O(neki.topology_file), "",
	  0, 0, false, true, NULL,
	  "local copy of the data topology, read at startup when the authoritative shard is "
	  "down (empty = none)",
	  "", CFG_G_NEKI, NULL },
	{ "track_extra_parameters", CFG_T_STRING, O(pool.track_extra_parameters), "IntervalStyle",
	  0, 0, false, false, NULL,
	  "extra GUC_REPORT parameters tracked per client and restored on the server connection",
	  "", CFG_G_POOL, NULL },
	{ "transaction_timeout", CFG_T_TIME, O(cli.transaction_timeout), "0",
	  0, CFG_TIME_MAX, true, false, NULL,
	  "close a client whose transaction lasts longer than this many seconds; 0 = never",
	  "s", CFG_G_CLIENT, NULL },
	{ "unix_socket_dir", CFG_T_STRING, O(proc.unix_socket_dir), "/tmp",
	  0, 0, false, false, NULL,
	  "directory of the Unix socket; empty = no Unix socket; @name = abstract namespace",
	  "", CFG_G_PROCESS, NULL },
	{ "unix_socket_group", CFG_T_STRING, O(proc.unix_socket_group), "",
	  0, 0, false, false, NULL,
	  "group owning the Unix socket (empty = unchanged)",
	  "", CFG_G_PROCESS, NULL },
	{ "unix_socket_mode", CFG_T_MODE, O(proc.unix_socket_mode), "0777",
	  0, 4095, false, false, NULL,
	  "file mode of the Unix socket (octal)",
	  "", CFG_G_PROCESS, NULL },
	{ "user", CFG_T_STRING, O(proc.user), "",
	  0, 0, false, false, NULL,
	  "Unix user to switch to after binding the listeners (empty = do not switch)",
	  "", CFG_G_PROCESS, NULL },
	{ "verbose", CFG_T_INT, O(log.verbose), "0",
	  0, CFG_INT_MAX, true, false, NULL,
	  "log verbosity: 1 adds DEBUG lines, 2 adds NOISE lines (same as -v)",
	  "", CFG_G_LOG, NULL },
	{ "workers", CFG_T_INT, O(neki.workers), "0",
	  0, 1024, false, true, NULL,
	  "number of worker processes; 0 = one per online CPU",
	  "", CFG_G_NEKI, settings_assign_workers },
};

/* workers = 0 means one worker per online CPU. */
static bool
settings_assign_workers(struct cfg *c)
{
	long n;

	if (c->neki.workers != 0)
		return true;
	n = sysconf(_SC_NPROCESSORS_ONLN);
	c->neki.workers = n < 1 ? 1 : (n > 1024 ? 1024 : (int)n);
	return true;
}

/* Make *<dst> a copy of <src> (both owned strings of a struct cfg). */
static bool
settings_mirror(char **dst, const char *src)
{
	char *copy;

	if (*dst && strcmp(*dst, src) == 0)
		return true;
	copy = strdup(src);
	if (!copy)
		return false;
	free(*dst);
	*dst = copy;
	return true;
}

/* service_name is pgbouncer's other name for job_name: setting one sets both. */
static bool
settings_assign_job_name(struct cfg *c)
{
	return settings_mirror(&c->proc.service_name, c->proc.job_name);
}

static bool
settings_assign_service_name(struct cfg *c)
{
	return settings_mirror(&c->proc.job_name, c->proc.service_name);
}

/* The settings table, sorted by name; its length in <*n> (n may be NULL). */
const struct cfg_setting *
cfg_settings(size_t *n)
{
	if (n)
		*n = NK_ARRAY_LEN(cfg_table);
	return cfg_table;
}

/* bsearch comparator: a name against a table row. */
static int
settings_cmp(const void *key, const void *elem)
{
	return strcmp(key, ((const struct cfg_setting *)elem)->name);
}

/* The row named <name> (exact, case-sensitive), or NULL. */
const struct cfg_setting *
cfg_setting_find(const char *name)
{
	return bsearch(name, cfg_table, NK_ARRAY_LEN(cfg_table), sizeof(cfg_table[0]),
		       settings_cmp);
}

/* Edit distance between <a> and <b> (both short setting names). */
static size_t
settings_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	size_t row[64];

	if (la >= NK_ARRAY_LEN(row) || lb >= NK_ARRAY_LEN(row))
		return SIZE_MAX;
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t diag = row[0];

		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t up = row[j];
			size_t best = diag + (a[i - 1] != b[j - 1]);

			if (row[j] + 1 < best)
				best = row[j] + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			diag = up;
		}
	}
	return row[lb];
}

/* The setting whose name is nearest to <name> (distance <= 3 or a case change). */
const struct cfg_setting *
settings_nearest(const char *name)
{
	const struct cfg_setting *best = NULL;
	size_t best_d = 4;

	for (size_t i = 0; i < NK_ARRAY_LEN(cfg_table); i++) {
		size_t d;

		if (strcasecmp(cfg_table[i].name, name) == 0)
			return &cfg_table[i];
		d = settings_distance(cfg_table[i].name, name);
		if (d < best_d) {
			best_d = d;
			best = &cfg_table[i];
		}
	}
	return best;
}

/* Index of <value> in the NULL-terminated <names>, ignoring case (as pgbouncer), or -1. */
int
settings_enum_index(const char *const *names, const char *value)
{
	for (int i = 0; names[i]; i++) {
		if (strcasecmp(names[i], value) == 0)
			return i;
	}
	return -1;
}

/* enum cfg_pool_mode of <value> (session, transaction, statement), or -1. */
int
settings_pool_mode_parse(const char *value)
{
	return settings_enum_index(cfg_pool_mode_names, value);
}

/* strtoll(<value>, 0) as a whole, within [min, max]. */
bool
settings_parse_int(const char *value, double min, double max, int64_t *out)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(value, &end, 0);
	if (end == value || *end != '\0' || errno == ERANGE)
		return false;
	if ((double)v < min || (double)v > max)
		return false;
	*out = v;
	return true;
}

/* A non-negative, finite number of seconds (strtod). */
bool
settings_parse_time(const char *value, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(value, &end);
	if (end == value || *end != '\0' || errno == ERANGE || !isfinite(v) || v < 0)
		return false;
	*out = v;
	return true;
}

/* 0/1 (any integer: nonzero is true, as pgbouncer) or on/off, yes/no, true/false. */
bool
settings_parse_bool(const char *value, bool *out)
{
	static const char *const yes[] = { "on", "yes", "true", NULL };
	static const char *const no[] = { "off", "no", "false", NULL };
	int64_t v;

	if (settings_enum_index(yes, value) >= 0) {
		*out = true;
		return true;
	}
	if (settings_enum_index(no, value) >= 0) {
		*out = false;
		return true;
	}
	if (!settings_parse_int(value, -CFG_INT_MAX - 1, CFG_INT_MAX, &v))
		return false;
	*out = v != 0;
	return true;
}

/* A byte size: an integer with an optional B/kB/MB/GB/TB suffix (1024-based). */
static bool
settings_parse_size(const char *value, double min, double max, int64_t *out)
{
	static const struct { const char *suffix; int64_t mult; } units[] = {
		{ "", 1 }, { "B", 1 }, { "kB", 1LL << 10 }, { "MB", 1LL << 20 },
		{ "GB", 1LL << 30 }, { "TB", 1LL << 40 },
	};
	char *end;
	long long v;

	errno = 0;
	v = strtoll(value, &end, 10);
	if (end == value || errno == ERANGE || v < 0)
		return false;
	while (*end == ' ')
		end++;
	for (size_t i = 0; i < NK_ARRAY_LEN(units); i++) {
		if (strcasecmp(end, units[i].suffix) != 0)
			continue;
		if (v > INT64_MAX / units[i].mult)
			return false;
		v *= units[i].mult;
		if ((double)v < min || (double)v > max)
			return false;
		*out = v;
		return true;
	}
	return false;
}

/* Write "a, b, c" from the NULL-terminated <names> into <buf>. */
static void
settings_join_names(const char *const *names, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (int i = 0; names[i] && used < len; i++)
		used += snprintf(buf + used, len - used, "%s%s", i ? ", " : "", names[i]);
}

/* Fill <err> for a value of <s> that was not accepted, saying what is. */
static bool
settings_bad_value(const struct cfg_setting *s, const char *value, struct nk_error *err)
{
	char names[256];

	nk_error_set(err, CFG_SQLSTATE, "invalid value \"%s\" for parameter %s", value, s->name);
	switch (s->type) {
	case CFG_T_INT:
		nk_error_detail(err, "expected an integer from %.0f to %.0f", s->min, s->max);
		break;
	case CFG_T_INT64:
		nk_error_detail(err, "expected a size from %.0f to %.0f bytes, in bytes or "
				"with a kB, MB, GB or TB suffix", s->min, s->max);
		break;
	case CFG_T_BOOL:
		nk_error_detail(err, "expected 0 or 1 (also on/off, yes/no, true/false)");
		break;
	case CFG_T_TIME:
		nk_error_detail(err, "expected a number of seconds from %g to %g (fractions "
				"allowed, no unit)", s->min, s->max);
		break;
	case CFG_T_ENUM:
		settings_join_names(s->enum_values, names, sizeof(names));
		nk_error_detail(err, "accepted values: %s", names);
		break;
	case CFG_T_MODE:
		nk_error_detail(err, "expected an octal file mode from 0 to 07777, such as 0777");
		break;
	case CFG_T_STRING:
		break;
	}
	return false;
}

/*
 * What a full pgbouncer build knows but this build cannot do: auth_type ldap and pam, and
 * any auth_ldap_options (the default options of hba ldap lines, which this build keeps as
 * refusing rules: set, it could only be ignored). The empty default is accepted.
 */
static bool
settings_auth_unsupported(const struct cfg_setting *s, const char *value, struct nk_error *err)
{
	if (s->offset == O(auth.auth_ldap_options) && value[0] != '\0') {
		nk_error_set(err, CFG_SQLSTATE, "invalid value \"%s\" for parameter %s: LDAP "
			     "authentication is not supported by this build", value, s->name);
		nk_error_detail(err, "only the empty value is accepted");
		return false;
	}
	if (s->enum_values != cfg_auth_type_names)
		return true;
	if (strcasecmp(value, "ldap") != 0 && strcasecmp(value, "pam") != 0)
		return true;
	nk_error_set(err, CFG_SQLSTATE, "invalid value \"%s\" for parameter %s: %s "
		     "authentication is not supported by this build", value, s->name, value);
	nk_error_detail(err, "accepted values: any, trust, plain, md5, scram-sha-256, cert, hba");
	return false;
}

/*
 * auth_dbname naming a console database: pgbouncer refuses the value (at startup, reload
 * and SET), as auth_query cannot run there.
 */
static bool
settings_authdb_reserved(const struct cfg_setting *s, const char *value, struct nk_error *err)
{
	if (strcmp(s->name, "auth_dbname") != 0 ||
	    (strcmp(value, "pgbouncer") != 0 && strcmp(value, "neki") != 0))
		return true;
	nk_error_set(err, CFG_SQLSTATE, "invalid value \"%s\" for parameter %s: cannot use the "
		     "reserved \"%s\" database as an auth_dbname", value, s->name, value);
	return false;
}

/* Parse <value> for a numeric or enum row into <*num> (ints, enums, bools). */
static bool
settings_parse_value(const struct cfg_setting *s, const char *value, int64_t *num,
		     double *time)
{
	bool b;
	int idx;

	switch (s->type) {
	case CFG_T_INT:
	case CFG_T_MODE:
		return settings_parse_int(value, s->min, s->max, num);
	case CFG_T_INT64:
		return settings_parse_size(value, s->min, s->max, num);
	case CFG_T_BOOL:
		if (!settings_parse_bool(value, &b))
			return false;
		*num = b;
		return true;
	case CFG_T_TIME:
		return settings_parse_time(value, time) && *time >= s->min && *time <= s->max;
	case CFG_T_ENUM:
		idx = settings_enum_index(s->enum_values, value);
		*num = idx;
		return idx >= 0;
	case CFG_T_STRING:
		return true;
	}
	return false;
}

/* Store a parsed value of <s> into <c>. <str> is a new owned string for CFG_T_STRING. */
static void
settings_store(struct cfg *c, const struct cfg_setting *s, int64_t num, double time, char *str)
{
	char *field = (char *)c + s->offset;

	switch (s->type) {
	case CFG_T_INT:
	case CFG_T_MODE:
	case CFG_T_ENUM:
		*(int *)field = (int)num;
		break;
	case CFG_T_INT64:
		*(int64_t *)field = num;
		break;
	case CFG_T_BOOL:
		*(bool *)field = num != 0;
		break;
	case CFG_T_TIME:
		*(double *)field = time;
		break;
	case CFG_T_STRING:
		free(*(char **)field);
		*(char **)field = str;
		break;
	}
}

/*
 * Set <s> on <c> from the ini text <value>. Returns false with <err> set ("invalid
 * value ... for parameter ...", DETAIL saying what is accepted) and <c> unchanged
 * when the value is not accepted or memory runs out.
 */
bool
cfg_setting_apply(struct cfg *c, const struct cfg_setting *s, const char *value,
		  struct nk_error *err)
{
	int64_t num = 0;
	double time = 0;
	char *str = NULL;

	if (!settings_auth_unsupported(s, value, err) || !settings_authdb_reserved(s, value, err))
		return false;
	if (!settings_parse_value(s, value, &num, &time))
		return settings_bad_value(s, value, err);
	if (s->type == CFG_T_STRING) {
		str = strdup(value);
		if (!str)
			return nk_error_set(err, CFG_SQLSTATE, "out of memory");
	}
	settings_store(c, s, num, time, str);
	if (s->assign && !s->assign(c))
		return nk_error_set(err, CFG_SQLSTATE, "out of memory");
	return true;
}

/* Format a byte count with the largest exact kB/MB/GB/TB unit. */
static void
settings_format_size(int64_t v, char *buf, size_t len)
{
	static const char *const units[] = { "TB", "GB", "MB", "kB" };

	for (int i = 0; i < 4 && v != 0; i++) {
		int64_t mult = 1LL << (10 * (4 - i));

		if (v % mult == 0) {
			snprintf(buf, len, "%lld%s", (long long)(v / mult), units[i]);
			return;
		}
	}
	snprintf(buf, len, "%lld", (long long)v);
}

/* Write the value of <s> in <c> into <buf> as the ini would write it. */
void
cfg_setting_format(const struct cfg *c, const struct cfg_setting *s, char *buf, size_t len)
{
	const char *field = (const char *)c + s->offset;
	int v;

	switch (s->type) {
	case CFG_T_INT:
	case CFG_T_MODE:	/* decimal, as pgbouncer's SHOW CONFIG (0777 shows 511) */
		snprintf(buf, len, "%d", *(const int *)field);
		break;
	case CFG_T_INT64:
		settings_format_size(*(const int64_t *)field, buf, len);
		break;
	case CFG_T_BOOL:
		snprintf(buf, len, "%d", *(const bool *)field ? 1 : 0);
		break;
	case CFG_T_TIME:
		snprintf(buf, len, "%g", *(const double *)field);
		break;
	case CFG_T_ENUM:
		v = *(const int *)field;
		snprintf(buf, len, "%s", v >= 0 && s->enum_values[v] ? s->enum_values[v] : "");
		break;
	case CFG_T_STRING:
		snprintf(buf, len, "%s", *(char *const *)field ? *(char *const *)field : "");
		break;
	}
}

/* True when <s> differs between <a> and <b>. */
bool
cfg_setting_changed(const struct cfg *a, const struct cfg *b, const struct cfg_setting *s)
{
	const char *fa = (const char *)a + s->offset, *fb = (const char *)b + s->offset;
	const char *sa, *sb;

	switch (s->type) {
	case CFG_T_INT:
	case CFG_T_MODE:
	case CFG_T_ENUM:
		return *(const int *)fa != *(const int *)fb;
	case CFG_T_INT64:
		return *(const int64_t *)fa != *(const int64_t *)fb;
	case CFG_T_BOOL:
		return *(const bool *)fa != *(const bool *)fb;
	case CFG_T_TIME:
		return *(const double *)fa != *(const double *)fb;
	case CFG_T_STRING:
		sa = *(char *const *)fa;
		sb = *(char *const *)fb;
		return strcmp(sa ? sa : "", sb ? sb : "") != 0;
	}
	return false;
}

/* Size of the struct cfg field behind a setting of type <t>. */
static size_t
settings_field_size(enum cfg_type t)
{
	switch (t) {
	case CFG_T_INT64:
		return sizeof(int64_t);
	case CFG_T_TIME:
		return sizeof(double);
	case CFG_T_BOOL:
		return sizeof(bool);
	case CFG_T_STRING:
		return sizeof(char *);
	case CFG_T_INT:
	case CFG_T_MODE:
	case CFG_T_ENUM:
		break;
	}
	return sizeof(int);
}

/* Copy the value of <s> from <src> to <dst> (strings duplicated). False when out of memory. */
bool
settings_copy_value(struct cfg *dst, const struct cfg *src, const struct cfg_setting *s)
{
	if (s->type == CFG_T_STRING) {
		const char *sv = *(char *const *)((const char *)src + s->offset);
		char *copy = strdup(sv ? sv : "");

		if (!copy)
			return false;
		settings_store(dst, s, 0, 0, copy);
		return true;
	}
	memcpy((char *)dst + s->offset, (const char *)src + s->offset,
	       settings_field_size(s->type));
	return true;
}

/* Apply the default of every row to <c> (allocating the strings). */
bool
settings_apply_defaults(struct cfg *c, struct nk_error *err)
{
	for (size_t i = 0; i < NK_ARRAY_LEN(cfg_table); i++) {
		if (!cfg_setting_apply(c, &cfg_table[i], cfg_table[i].default_value, err))
			return false;
	}
	return true;
}

/* Free the string settings of <c> and set them to NULL. */
void
settings_free_strings(struct cfg *c)
{
	for (size_t i = 0; i < NK_ARRAY_LEN(cfg_table); i++) {
		char **field;

		if (cfg_table[i].type != CFG_T_STRING)
			continue;
		field = (char **)((char *)c + cfg_table[i].offset);
		free(*field);
		*field = NULL;
	}
}

/* The ini name of <m> ("unset" for CFG_POOL_UNSET). */
const char *
cfg_pool_mode_str(enum cfg_pool_mode m)
{
	if ((int)m >= 0 && m < CFG_POOL_UNSET)
		return cfg_pool_mode_names[m];
	return "unset";
}

/* The ini / HBA name of <t>. */
const char *
cfg_auth_type_str(enum cfg_auth_type t)
{
	if (t == CFG_AUTH_PEER)
		return "peer";
	if (t == CFG_AUTH_REJECT)
		return "reject";
	if ((int)t >= 0 && t <= CFG_AUTH_HBA)
		return cfg_auth_type_names[t];
	return "unknown";
}

/* The ini name of <m> (libpq's sslmode names). */
const char *
cfg_sslmode_str(enum cfg_sslmode m)
{
	if ((int)m >= 0 && m <= CFG_SSL_VERIFY_FULL)
		return cfg_sslmode_names[m];
	return "unknown";
}
