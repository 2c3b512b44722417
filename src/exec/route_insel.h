/*
 * route_insel.h - the entry points of src/exec/route_insel.c (its header comment says what it
 * does); the executor's shared types are route_int.h's.
 */
#ifndef NEKI_EXEC_ROUTE_INSEL_H
#define NEKI_EXEC_ROUTE_INSEL_H

#include "neki/base.h"

#include "route_int.h"

/* Start INSERT ... SELECT planned as <p> (PLAN_OP_INSERT_SELECT) with image <img>: the
 * source's cursors are declared and read; false with <err> when nothing was started. It
 * joins the open transaction (a block, a Query's or a batch's implicit one) or, with none
 * open (r->tx 'I'), opens its own implicit one (ended with the Query or its Execute). */
NK_MUSTCHECK bool route_insel_start(struct route *r, const struct plan *p, const void *img,
				    struct nk_error *err);
/* An answer of a round (RX_INSEL) other than ErrorResponse / ReadyForQuery / notices. */
bool route_insel_msg(struct route *r, struct rshard *sh, struct link *l,
		     const struct sbuf_pkt *pkt);
/* An exec of the statement ended (a round, a sequence reservation): go on or finish. */
void route_insel_next(struct route *r);
/* The client's queue drained: a round waiting for it starts; false when none waited. */
bool route_insel_client_ready(struct route *r);
void route_insel_free(struct route *r);

#endif /* NEKI_EXEC_ROUTE_INSEL_H */
