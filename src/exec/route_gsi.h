/*
 * route_gsi.h - the steps a statement on the owner of an enabled global secondary index
 * runs besides its own (route_gsi.c; the plan's plan.gsi says which, neki/plan_gsi.h).
 */
#ifndef NEKI_EXEC_ROUTE_GSI_H
#define NEKI_EXEC_ROUTE_GSI_H

#include "neki/base.h"

#include "neki/sbuf.h"

struct link;
struct plan;
struct plan_input;
struct route;

/*
 * Statement <p> (planned as <in> says, from its text in->sql, to run as <sql>: its sequence
 * values filled in) has plan.gsi: true when this call answered it, *<rc> (its steps
 * started: RSTEP_ASYNC; refused: RSTEP_STOP); false when <p> runs now as planned, narrowed
 * to the owner shards its lookup read found (the statement after its steps, or one of the
 * steps' own statements). in->topo: the pinned topology image.
 */
bool route_gsi_step(struct route *r, struct plan *p, const struct plan_input *in,
		    const char *sql, enum rstep *rc);
/* The text of the step to route in place of the statement (owned by the caller), or NULL;
 * <*simple>: a step of an Execute, run as a simple Query; <*cover>: the statement itself on
 * the lookup table of a covering GSI (its rows the client's; planned as is; r->x.gsi freed). */
char *route_gsi_take(struct route *r, bool *simple, bool *cover);
/* Is a step running (its answer kept here, through route_subq_answer())? */
bool route_gsi_capturing(const struct route *r);
/* Is the running step the last of a statement that ends its implicit transaction (alone in
 * its Query, or its batch's last Execute)? Its shard may then prepare with it (route_2pc.h):
 * the last lookup step, or the lookup INSERTs run beside the statement on another shard. */
bool route_gsi_last_step(const struct route *r);
/* A step's RowDescription or DataRow (<type> 'T' or 'D', its body <body>[0..len)), read
 * by route_subq_keep(); false when the session closed (a failure is r->x.err). */
bool route_gsi_keep(struct route *r, char type, const uint8_t *body, size_t len);
/* COPY: the lookup columns <vals>[0..n) (owned, NULL for NULL; n the plan's nfields) of
 * a row that passed; false with <err> (past router_work_mem: the COPY fails). */
bool route_gsi_copy_keep(struct route *r, char **vals, struct nk_error *err);
/* COPY: every row passed: true when their lookup rows' steps started (`COPY n` after
 * them); false when none has one, or with r->x.err. */
bool route_gsi_copied(struct route *r);
/* A step's exec ended: true when the statement goes on (the next step, the statement
 * itself, or its answer sent); false with its error in r->x.err. */
bool route_gsi_finished(struct route *r);
void route_gsi_free(struct route *r);

#endif /* NEKI_EXEC_ROUTE_GSI_H */
