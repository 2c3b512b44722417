/*
 * neki/shm_servers.h - what the admin process knows of every server of the shards with
 * standbys (src/admin/servers.c polls them), shared with the workers through the segment.
 *
 * The admin publishes the whole table (at most SHM_SERVERS_MAX servers) after each answer;
 * a seqlock guards it, so a reader copies a consistent view of one shard's servers without
 * locks. Without a segment (unit tests, one process) the table is process-local.
 * Entry points: shm_servers_publish(), shm_servers_read().
 */
#ifndef NEKI_SHM_SERVERS_H
#define NEKI_SHM_SERVERS_H

#include "neki/base.h"

#define SHM_SERVERS_MAX 256
#define SHM_SERVER_UID_MAX 64

/* A server's role as it last answered (verified, not trusted). */
enum shm_srv_role {
	SHM_SRV_UNKNOWN = 0,	/* not asked yet */
	SHM_SRV_PRIMARY = 1,	/* pg_is_in_recovery() is false */
	SHM_SRV_STANDBY = 2,	/* pg_is_in_recovery() is true */
	SHM_SRV_DOWN = 3,	/* the last attempt to ask it failed */
};

/* Flags of a server. */
#define SHM_SRV_F_CHOSEN 1u	/* the shard's primary: writes go there */
#define SHM_SRV_F_READ_ONLY 2u	/* a primary whose sessions are read-only */
#define SHM_SRV_F_LAG 4u	/* lag_ms is known */

/* One server (plain words: copied as a whole). */
struct shm_server {
	char uid[SHM_SERVER_UID_MAX];	/* the shard */
	uint32_t index;			/* in cfg_shard.servers */
	uint32_t role;			/* enum shm_srv_role */
	uint32_t flags;			/* SHM_SRV_F_* */
	uint32_t pad;
	int64_t lag_ms;			/* replay lag behind the primary (SHM_SRV_F_LAG) */
	uint64_t checked_ms;		/* nk_now_ms() of its last answer (0 never) */
};

/* Admin: publish <n> servers (n <= SHM_SERVERS_MAX; the rest are dropped). */
void shm_servers_publish(const struct shm_server *v, size_t n);

/*
 * The servers of shard <uid>, in index order, into <out> (room for <cap>): how many; 0 when
 * the admin publishes none for it (a shard without standbys, or before its first round).
 */
size_t shm_servers_read(const char *uid, struct shm_server *out, size_t cap);

/* How many times the table was published (0: never). */
uint64_t shm_servers_version(void);

const char *shm_srv_role_str(enum shm_srv_role r);

#endif /* NEKI_SHM_SERVERS_H */
