/*
 * neki/plan_explain.h - EXPLAIN (NEKI_PLAN) (src/router/explain.c): a plan as text or JSON,
 * with an execution's actual rows and times for ANALYZE, and the names of its kinds.
 */
#ifndef NEKI_PLAN_EXPLAIN_H
#define NEKI_PLAN_EXPLAIN_H

#include "neki/base.h"

#include "neki/plan.h"

const char *plan_fanout_str(enum plan_fanout f);
const char *plan_op_str(enum plan_op op);
const char *plan_kind_str(enum plan_kind k);

/* Text (json false) or JSON rendering of <p>, malloc'd; NULL on no memory. */
char *plan_explain(const struct plan *p, bool json);

/* EXPLAIN (NEKI_PLAN, ANALYZE): what one shard of the route did. */
struct plan_actual_shard {
	const char *shard;
	uint64_t rows;		/* rows it returned (or affected: its command tag's count) */
	double ms;		/* from sending the statement to its complete answer */
};

struct plan_actual {
	const struct plan_actual_shard *shards;	/* in the route's target order */
	uint32_t nshards;
	uint64_t rows;		/* rows the router's result had (after any merge step) */
	double total_ms;	/* the whole execution */
};

/* plan_explain() with the actuals of an execution: per-shard rows and times on the
 * route, the result's rows on the top node and the execution time. */
char *plan_explain_analyze(const struct plan *p, bool json, const struct plan_actual *act);

/* The statement an `EXPLAIN (...) <statement>` text explains (<sql> itself otherwise). */
const char *plan_explained_text(const char *sql);

#endif /* NEKI_PLAN_EXPLAIN_H */
