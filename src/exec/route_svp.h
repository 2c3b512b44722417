/*
 * route_svp.h - savepoints of a routed transaction (route_svp.c): SAVEPOINT, ROLLBACK TO
 * and RELEASE over every shard the transaction joined, and what a shard joining later needs.
 */
#ifndef NEKI_EXEC_ROUTE_SVP_H
#define NEKI_EXEC_ROUTE_SVP_H

#include "neki/base.h"

#include "neki/parse.h"

struct route;
struct rshard;
enum rstep;

/* SAVEPOINT, ROLLBACK TO [SAVEPOINT] or RELEASE [SAVEPOINT] <tx> as one Postgres runs it:
 * checked against the router's stack of the open transaction's savepoints, then run on
 * every shard in the transaction (answered by the router when none is). */
enum rstep route_svp_stmt(struct route *r, const struct stmt_tx *tx);
/* <sh> just sent its BEGIN: send it the savepoints of the stack in order, each after the
 * transaction's settings that came before it (answers dropped); false when a send failed. */
bool route_svp_join(struct route *r, struct rshard *sh);
/* The link of <sh>, in the transaction, broke: what it did there is gone, so no ROLLBACK TO
 * can bring the transaction back (it stays aborted until ROLLBACK). */
void route_svp_lost(struct route *r, const struct rshard *sh);
/* The savepoint generation a portal created now is born in (0: no savepoint). */
uint32_t route_svp_gen(const struct route *r);
/* The transaction ended (or the session): forget its savepoints. */
void route_svp_end(struct route *r);

#endif /* NEKI_EXEC_ROUTE_SVP_H */
