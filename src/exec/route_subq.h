/*
 * route_subq.h - a subquery in an expression the router evaluates before its statement
 * (route_subq.c): its rows replace it in the text, then the statement runs again.
 */
#ifndef NEKI_EXEC_ROUTE_SUBQ_H
#define NEKI_EXEC_ROUTE_SUBQ_H

#include "neki/base.h"

#include "neki/sbuf.h"

struct link;
struct nk_error;
struct parse_norm;
struct plan;
struct plan_input;
struct route;
struct stmt;

/*
 * The statement <st> (text <sql>, normalised as <norm>) was refused as <p> names: for the
 * subquery of scope plan.materialize (run it on its own, its answer kept, then the
 * statement again with its rows in its place), or for the rows of table plan.broadcast
 * (the statement again with that table read as a derived table, which the next round
 * evaluates; with the conjuncts of its WHERE that <in>'s catalog shows read only that
 * table: route_pushdown_where()). RSTEP_ASYNC, or RSTEP_STOP after route_fail() with <refusal> (a subquery
 * with a bound parameter or inside the one evaluated, too many rounds, a text the subquery
 * cannot be found in).
 */
enum rstep route_subq_start(struct route *r, const struct stmt *st, const char *sql,
			    const struct parse_norm *norm, const struct plan *p,
			    const struct plan_input *in, const struct nk_error *refusal);
/*
 * EXPLAIN (NEKI_PLAN) <st> (text <sql>) whose explained statement was refused as <p> names:
 * the part the router would evaluate first, with its own plan (planned with <in>'s image,
 * catalog and session), then the statement's second planning; malloc'd text (JSON with
 * FORMAT JSON), or NULL when the part cannot be found (the refusal stands).
 */
char *route_subq_explain(struct route *r, const struct stmt *st, const char *sql,
			 const struct parse_norm *norm, const struct plan_input *in,
			 const struct plan *p);
/* The text to route in place of the statement (the subquery, then the statement with its
 * rows), owned by the caller; NULL when none (the state of an earlier statement is freed).
 * <*simple>: the subquery of an Execute, run as a simple Query (r->x.ext_exec is false until
 * route_subq_finished()). */
char *route_subq_take(struct route *r, bool *simple);
/* A 'T', 'D' or 'C' of a shard while r->x.subq_capture (the subquery's answer is kept, nothing
 * of it reaches the client); false when the session closed. */
bool route_subq_answer(struct route *r, struct rshard *sh, struct link *l,
		       const struct sbuf_pkt *pkt);
/* The merge step's output messages <buf>[0..len) while capturing. */
bool route_subq_keep(struct route *r, const uint8_t *buf, size_t len);
/*
 * The subquery's exec ended: true when the statement runs again with its rows (nothing more
 * to do); false otherwise, its error (the planner's refusal when the subquery reads its
 * outer query's columns) in r->x.err for route_after_error().
 */
bool route_subq_finished(struct route *r);
/* The end of route_stmt() with <rc>: a subquery refused (or answered) before anything was
 * sent ends its run there. */
void route_subq_settle(struct route *r, enum rstep rc);
void route_subq_free(struct route *r);
/* A part the router runs first fails the statement with <err> (the first error kept);
 * true (its answer goes on being read). */
bool route_subq_refused(struct route *r, const struct nk_error *err);
/* The SQL name of result type <oid> into <out> (<len> bytes): a built-in type, or one the
 * catalog knows (quoted, schema-qualified); false when neither. */
bool route_subq_type_sql(struct route *r, uint32_t oid, char *out, size_t len);

/* The statement ended: the rows of its table reads are forgotten (a later statement, which
 * may see other rows, reads again). */
void route_subq_reads_free(struct route *r);

#endif /* NEKI_EXEC_ROUTE_SUBQ_H */
