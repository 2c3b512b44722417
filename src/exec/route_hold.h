/*
 * route_hold.h - the entry points of src/exec/route_hold.c (its header comment says what it
 * does); the executor's shared types are route_int.h's.
 */
#ifndef NEKI_EXEC_ROUTE_HOLD_H
#define NEKI_EXEC_ROUTE_HOLD_H

#include "neki/base.h"

#include "route_int.h"

/* The first message of a session: true when the topology and the catalog of its database are
 * loaded (the session is served from now on); false when it waits (the client's packet is
 * offered again once they are, or the session ends at query_wait_timeout). */
bool route_hold_ready(struct route *r);
/* The poll timer of a held session (ROUTE_RESUME_HOLD). */
void route_hold_poll(struct route *r);
/* The plan met <u>, a sharded table the catalog lacks: true when a catalog load was asked
 * for and the statement waits for it (r->hold.cat_wait); false when it goes on as planned (a
 * wait ended less than a second ago, or r->hold.fetch_off), and then the plan's refusal <err>
 * (NULL: it was not refused) says in its DETAIL that the catalog lacks the table. */
bool route_hold_unknown(struct route *r, const struct plan_unknown *u, struct nk_error *err);

#endif /* NEKI_EXEC_ROUTE_HOLD_H */
