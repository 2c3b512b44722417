/*
 * route_explain.h - EXPLAIN (NEKI_PLAN [, ANALYZE]) of a routed statement
 * (src/exec/route_explain.c).
 */
#ifndef NEKI_EXEC_ROUTE_EXPLAIN_H
#define NEKI_EXEC_ROUTE_EXPLAIN_H

#include "neki/base.h"

#include "route_int.h"

/* The plan's rows <text> (freed here) as a `QUERY PLAN` result: one row per line, or one
 * JSON value with <json>. */
enum rstep route_explain_reply(struct route *r, char *text, bool json);
/* EXPLAIN (NEKI_PLAN [, ANALYZE]) <p> (text <sql>): the plan; with ANALYZE the explained
 * statement runs first (its result dropped) and route_analyze_reply() answers. */
enum rstep route_explain(struct route *r, const struct plan *p, const char *sql);
/* ANALYZE: the explained statement ran; answer with the plan and its actuals. */
bool route_analyze_reply(struct route *r);

#endif /* NEKI_EXEC_ROUTE_EXPLAIN_H */
