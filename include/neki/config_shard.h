/*
 * neki/config_shard.h - the [shards] section: one entry per shard uid, its primary and
 * standbys as declared (src/config/shards.c, shard_servers.c). Included by neki/config.h.
 */
#ifndef NEKI_CONFIG_SHARD_H
#define NEKI_CONFIG_SHARD_H

#include "neki/base.h"

struct cfg;

/* What a server of a shard is declared as (its role is verified at run time). */
enum cfg_server_kind {
	CFG_SRV_PRIMARY = 0,	/* host= / port= of the connection string */
	CFG_SRV_REPLICA = 1,	/* listed by replicas= */
	CFG_SRV_RDONLY = 2,	/* listed by rdonly= */
};

/* One Postgres server of a shard: servers[0] is the one host= / port= name. */
struct cfg_server {
	char *host;		/* host name, address or Unix socket directory; NULL default */
	int port;
	enum cfg_server_kind kind;
	char *conninfo;		/* the string for libpq naming this server alone */
};

#define CFG_SHARD_SERVERS_MAX 16	/* the primary and its standbys */

/* One [shards] entry: shard_uid = libpq connection string. */
struct cfg_shard {
	char *uid;		/* the shard uid named by topology key ranges */
	char *conninfo;		/* the libpq connection string as written, without replicas=
				 * and rdonly=; with standbys, every server's host and port
				 * follow with target_session_attrs=read-write (the admin's
				 * connections go to whichever is the primary) */
	char *host;		/* parsed from conninfo; NULL = default */
	int port;		/* parsed; default 5432 */
	char *dbname;		/* parsed; NULL = use the client's database name */
	char *user;		/* parsed; NULL = the client's user */
	char *password;		/* parsed; NULL */
	char *sslmode;		/* parsed; NULL */
	struct cfg_server *servers;	/* owned: the primary as declared, then the standbys */
	size_t n_servers;	/* >= 1 */
};

/* The [shards] entry of <uid>, or NULL. */
const struct cfg_shard *cfg_shard_find(const struct cfg *c, const char *uid);

/* Append <v> to the string <buf> (<cap> bytes) as a single-quoted libpq conninfo value
 * (quotes and backslashes escaped; cut when it does not fit). */
void cfg_conninfo_put_quoted(char *buf, size_t cap, const char *v);

#endif
