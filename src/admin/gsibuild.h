/*
 * gsibuild.h - __neki.gsi_build: build a global secondary index of an owner table that has
 * rows, online (gsibuild.c; the procedure: doc/topology.md "Building a GSI").
 */
#ifndef NEKI_ADMIN_GSIBUILD_H
#define NEKI_ADMIN_GSIBUILD_H

#include <event2/event.h>

struct adm_req;

void gsibuild_init(struct event_base *base);

/*
 * Build GSI <name> of database <db> (NULL: the one database declaring it); each wait (the
 * routers switching, the transactions begun before) is bounded by <timeout_s>. Ends <req>
 * with one row (gsi_name, revision, rows_written, rows_verified, passes) or the error.
 */
void gsibuild_start(struct adm_req *req, const char *name, const char *db, double timeout_s);

/* __neki.gsi_build_status(): the build running (its step, shard and counts) and the last
 * one that ended on this host (its outcome and error), one row each. */
void gsibuild_status(struct adm_req *req);

#endif /* NEKI_ADMIN_GSIBUILD_H */
