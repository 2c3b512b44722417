/*
 * route_merge.h - the entry points of src/exec/route_merge.c (its header comment says what it
 * does); the executor's shared types are route_int.h's.
 */
#ifndef NEKI_EXEC_ROUTE_MERGE_H
#define NEKI_EXEC_ROUTE_MERGE_H

#include "neki/base.h"

#include "route_int.h"

/* The database's collation in <cv> (NULL when unknown: byte order). */
const char *route_db_collation(const struct cat_view *cv);
/* The merge options of the session's merges: its collation, router_work_mem, the catalog's
 * enum types (looked up when a result column has one). */
struct merge_options route_merge_options(struct route *r);
/* plan_catalog.merges_type over a struct cat_view <arg>. */
bool route_merges_type(void *arg, uint32_t oid);
/* Make the exec set up on the targets run the merge step of SELECT <sql> (RX_MERGE). */
NK_MUSTCHECK bool route_merge_setup(struct route *r, const char *sql, struct nk_error *err);
/* A whole 'T', 'D' or 'C' of the target being read; false when the session closed. */
bool route_merge_feed(struct route *r, const struct sbuf_pkt *pkt);
/* Every target answered: true when the final combine query was started (or the session
 * closed), false when the merge is complete. */
bool route_merge_final(struct route *r);
void route_merge_free(struct route *r);
/* merge_streams: may target <k> be read now (false: the merge holds enough of its rows, or
 * the client's queue is long)? */
bool route_merge_may_read(struct route *r, uint32_t k);
/* merge_streams: resume the held targets that may be read again. */
void route_merge_resume(struct route *r);

#endif /* NEKI_EXEC_ROUTE_MERGE_H */
