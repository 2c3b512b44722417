/*
 * recover.h - the recovery of atomic commits in the admin process (recover.c).
 */
#ifndef NEKI_ADMIN_RECOVER_H
#define NEKI_ADMIN_RECOVER_H

#include <stddef.h>

#include <event2/event.h>

/* Every second, finish the prepared transactions atomic commits left on the shards. */
void recover_init(struct event_base *base);
/* SHOW TRANSACTIONS: the prepared transactions of neki the last pass saw on the shards. */
struct adm_result;
void recover_show(struct adm_result *r);
/* The in-doubt transactions (older than the grace period) of the last pass: how many, and
 * in <oldest_s> the age of the oldest one in seconds (0 when none); for the metrics. */
size_t recover_in_doubt(double *oldest_s);
/* __neki.resolve_transaction(<gid>, <how> 'commit' | 'abort'): the decision row written on
 * its decision shard (refused when it says otherwise; when that shard does not answer, the
 * operator's word), then COMMIT / ROLLBACK PREPARED where the last pass saw it prepared. */
struct adm_req;
void recover_resolve(struct adm_req *req, const char *gid, const char *how);

#endif /* NEKI_ADMIN_RECOVER_H */
