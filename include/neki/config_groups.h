/*
 * neki/config_groups.h - the [pgbouncer] / [neki] settings of a struct cfg, in the
 * groups of the settings table (src/config/settings.c): c->pool.default_pool_size,
 * c->tls.client_tls_sslmode, ... Each member is named as its setting. Times are
 * seconds (double), sizes bytes, strings owned and never NULL once loaded ("" = unset).
 */
#ifndef NEKI_CONFIG_GROUPS_H
#define NEKI_CONFIG_GROUPS_H

#include "neki/base.h"

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

/* The settings of shards with standbys (seconds each). */
struct cfg_replica_settings {
	double failover_hold_timeout;	/* 0 = no hold */
	double replica_lag_tolerable_min;
	double replica_lag_tolerable_max;
	double replica_poll_interval;
};

/* Process, listening and files. */
struct cfg_process_settings {
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
};

/* Pooling and limits. */
struct cfg_pool_settings {
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
};

/* Authentication and console access. */
struct cfg_auth_settings {
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
};

/* The server connections' lifecycle. */
struct cfg_server_settings {
	char *server_reset_query;
	bool server_reset_query_always;
	double server_check_delay;
	char *server_check_query;
	bool server_fast_close;
	double server_lifetime;
	double server_idle_timeout;
	double server_connect_timeout;
	double server_login_retry;
};

/* Client-side timeouts. */
struct cfg_client_settings {
	double client_login_timeout;
	double client_idle_timeout;
	double query_timeout;
	double query_wait_timeout;
	double query_wait_notify;
	double cancel_wait_timeout;
	double idle_transaction_timeout;
	double transaction_timeout;
	double suspend_timeout;
};

/* Logging. */
struct cfg_log_settings {
	bool syslog;
	char *syslog_ident;
	char *syslog_facility;
	bool log_connections;
	bool log_disconnections;
	bool log_pooler_errors;
	bool log_stats;
	int verbose;
};

/* DNS. */
struct cfg_dns_settings {
	double dns_max_ttl;
	double dns_nxdomain_ttl;
	double dns_zone_check_period;
};

/* Low-level network. */
struct cfg_net_settings {
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
};

/* TLS, client side and server side. */
struct cfg_tls_settings {
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
};

/* neki's own settings. */
struct cfg_neki_settings {
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
};
#endif /* NEKI_CONFIG_GROUPS_H */
