/*
 * plan_merge_int.h - private to plan_merge.c and plan_merge_text.c: the token view of the
 * statement text and the state of one merge-spec build.
 */
#ifndef NEKI_ROUTER_PLAN_MERGE_INT_H
#define NEKI_ROUTER_PLAN_MERGE_INT_H

#include "neki/base.h"

#include "neki/plan.h"

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
	struct nk_error *err;
};

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
