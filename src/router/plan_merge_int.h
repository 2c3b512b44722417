/*
 * plan_merge_int.h - private to plan_merge.c, plan_merge_agg.c and plan_merge_text.c: the
 * token view of the statement text and the state of one merge-spec build.
 */
#ifndef NEKI_ROUTER_PLAN_MERGE_INT_H
#define NEKI_ROUTER_PLAN_MERGE_INT_H

#include "neki/base.h"

#include "neki/plan.h"
#include "neki/plan_merge.h"

#include <cjson/cJSON.h>

struct pm_tok {
	uint32_t start, end;	/* bytes in the text */
	int depth;		/* parenthesis depth (an opening parenthesis has the outer one) */
	char kind;		/* 'w' word, 'q' quoted identifier, 's' string, 'n' number,
				 * 'p' $n, 'o' other character */
};

/* Top-level clauses, in the order SQL writes them. */
enum pm_clause {
	PM_CL_FROM = 0,
	PM_CL_WHERE,
	PM_CL_GROUP,
	PM_CL_HAVING,
	PM_CL_WINDOW,
	PM_CL_ORDER,
	PM_CL_LIMIT,
	PM_CL_OFFSET,
	PM_CL_FETCH,
	PM_CL_FOR,
	PM_CL_COUNT
};

/* Tokens [first, last) of one list item. */
struct pm_span {
	uint32_t first, last;
};

/* Bytes [from, to) of the statement replaced by <with> in the shard text. */
struct pm_cut {
	uint32_t from, to;
	const char *with;
};

/* One GROUP BY item: its expression (a position resolved to the select-list entry). */
struct pm_group_item {
	const cJSON *node;
	const char *text;	/* the expression as written */
	int copy;		/* a hidden text copy of its value (for the final SQL); -1 */
};

struct pm {
	struct rarena *a;
	const char *sql;
	struct pm_tok *toks;
	uint32_t ntoks;
	uint32_t end_tok;		/* end of the statement (a ';' or ntoks) */
	uint32_t cl[PM_CL_COUNT];	/* first token of each clause; ntoks when absent */
	struct plan_merge *out;
	uint32_t col_cap, agg_cap;
	const char **hidden;		/* texts of the hidden columns, in column order */
	uint32_t nhidden, hidden_cap;
	struct pm_cut *carriers;	/* select-list calls computed WITH FILTER (WHERE false) */
	uint32_t ncarriers, carrier_cap;
	struct pm_group_item *groups;	/* the GROUP BY items (read before the select list) */
	uint32_t ngroups;
	bool simple_groups;		/* every GROUP BY item is a column or a function call: a
					 * column naming none is functionally dependent or wrong */
	struct nk_error *err;
};

/* ---- aggregate calls (plan_merge_agg.c) ---- */

/* Aggregate kind of FuncCall body <fc>: 0 when not an aggregate; -1 with p->err set. */
int pm_agg_kind(struct pm *p, const cJSON *fc);
/*
 * Record aggregate call <fc> of kind <kind>: its partial columns (hidden select-list
 * entries) and how they combine. <own> is the column the call itself is (-1: inside an
 * expression); a call whose value comes from the final SQL makes <own> its carrier. Returns
 * the aggregate's index, -1 with p->err.
 */
int pm_add_agg(struct pm *p, const cJSON *fc, int kind, int own);
/* A new shard result column; <text> (hidden columns) is appended to the select list. -1 on
 * no memory. */
int pm_add_col(struct pm *p, const char *text);
/* printf into the arena; NULL on no memory. */
const char *pm_fmt(struct pm *p, const char *fmt, ...) NK_PRINTF(2, 3);
/* cJSON trees <a> and <b> equal, "location" members aside. */
bool pm_same_tree(const cJSON *a, const cJSON *b);

/* Tokenise p->sql into p->toks. False on no memory. */
bool pm_scan(struct pm *p) NK_MUSTCHECK;
/* Token <t> is the word (case-insensitive) or the character <word>. */
bool pm_is(const struct pm *p, uint32_t t, const char *word);
/* First token starting at or after byte <offset>. */
uint32_t pm_tok_at(const struct pm *p, uint32_t offset);
/* A call starting at token <t>: token after its ')' (and a FILTER (...)); <open> its '('. */
uint32_t pm_call_end(const struct pm *p, uint32_t t, uint32_t *open);
/* Find the clause keywords at <depth> from token <from> (after the last set operation). */
void pm_clauses(struct pm *p, uint32_t from, int depth);
/* First token after clause <c> (the next clause present, or the statement's end). */
uint32_t pm_clause_end(const struct pm *p, int c);
/* Split tokens [from, to) at top-level commas; returns the item count (fills <= max). */
uint32_t pm_split(const struct pm *p, uint32_t from, uint32_t to, struct pm_span *out,
		  uint32_t max);
/* Text of tokens [first, last) as written; arena. */
const char *pm_text(struct pm *p, uint32_t first, uint32_t last);

#endif /* NEKI_ROUTER_PLAN_MERGE_INT_H */
