/*
 * neki/router.h - statement analysis, plans and execution (src/router/). The statement
 * model, the arena and normalisation are in neki/parse.h; plans, the plan cache, __neki
 * settings and EXPLAIN (NEKI_PLAN) in neki/plan.h (doc/router.md shows the executor's calls).
 */
#ifndef NEKI_ROUTER_H
#define NEKI_ROUTER_H

#include "neki/base.h"

/* "libpg_query (PostgreSQL <version> grammar)": for `neki -V`. */
const char *parse_library_version(void);

#endif /* NEKI_ROUTER_H */
