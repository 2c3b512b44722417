/*
 * servers.h - the admin's watch of the servers of shards with standbys (servers.c: role
 * and replay lag, published in shm_servers.h) and the console's SWITCHOVER (switchover.c).
 * Included after admin_int.h.
 */
#ifndef NEKI_ADMIN_SERVERS_H
#define NEKI_ADMIN_SERVERS_H

struct shm_server;

/* Start polling (every replica_poll_interval) and publishing into the servers table. */
void servers_init(struct event_base *base);
/* What the admin knows of the servers of shard <uid> (index order): how many, 0 when it
 * watches none of them (a shard without standbys). */
size_t servers_snapshot(const char *uid, struct shm_server *out, size_t cap);
/*
 * SWITCHOVER of shard <uid>: from its primary (*from) to its standby with the least lag
 * (*to); until servers_switch_end() the shard publishes no primary (the workers hold its
 * statements) and the poller chooses none. False with <err> when it cannot start.
 */
bool servers_switch_begin(const char *uid, int *from, int *to, struct nk_error *err);
void servers_switch_end(const char *uid, int primary);
/* The poller's connection to server <index> of shard <uid>; NULL when none. */
struct pgc *servers_pgc(const char *uid, int index);

/* ---- switchover.c: the console's SWITCHOVER <shard> ---- */

void switchover_run(struct adm_req *req, const char *uid);

#endif
