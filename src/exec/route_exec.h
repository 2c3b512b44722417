/*
 * route_exec.h - the entry points of src/exec/route_exec.c (its header comment says what it
 * does); the executor's shared types are route_int.h's.
 */
#ifndef NEKI_EXEC_ROUTE_EXEC_H
#define NEKI_EXEC_ROUTE_EXEC_H

#include "neki/base.h"

#include "route_int.h"

/* The rshard of <uid> (added when new); NULL when too many or the shard is not declared. */
struct rshard *route_shard(struct route *r, const char *uid, struct nk_error *err);
/* Start the exec set up in r->x.tg/ntg/...: acquire links, send. False: nothing was sent. */
NK_MUSTCHECK bool route_exec_start(struct route *r, struct nk_error *err);
/* Give back every link (outside a transaction) / break them at session close
 * (route_release.c). */
void route_release_links(struct route *r);
void route_drop_links(struct route *r);
/* Choose the exec's answer handlers (r->x.handler, enum rx_handler) from its combine and
 * flags; an exec does it as it sends (every flag they read is set by then). */
void route_exec_handlers(struct route *r);
/* Forget the Parse whose answer <sh> awaited (the exec or the link ended without it). */
void route_prep_wait_clear(struct rshard *sh);
/* Clear the per-exec state of every shard (route_release.c). */
void route_exec_reset(struct route *r);

/* Send <sql> to <l> as a simple Query; false when it could not be queued. */
NK_MUSTCHECK bool route_link_query(struct link *l, const char *sql);

#endif /* NEKI_EXEC_ROUTE_EXEC_H */
