/*
 * explain.c - EXPLAIN (NEKI_PLAN [, ANALYZE] [, FORMAT TEXT|JSON]) output of a plan, with
 * the spec's operator names (3.1): the merge steps above the route, `Limit`, `Sort [Merge]`,
 * `Aggregate [Ordered]`, `Collapse` when several shards answer, then `Route [<op>]` with
 * its fields `Query:` (the normalised statement sent to the shards), `ShardGroup:`,
 * `Values:` (routing values) and `Shards:`; under ANALYZE the top node's actual rows,
 * one `Shard <uid>: actual rows=N time=T ms` line per shard of the route and the
 * `Execution Time:`. One node list drives both formats. An INSERT ... SELECT the router
 * runs (`Route [InsertSelect]`, the shards its rows may go to) has its source's own tree below.
 * Entry: plan_explain(), plan_explain_analyze().
 */
#include "neki/base.h"

#include "neki/plan.h"
#include "neki/plan_explain.h"
#include "neki/plan_gsi.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sbuf_x {
	char *p;
	size_t len, cap;
	bool oom;
};

static void NK_PRINTF(2, 3)
xput(struct sbuf_x *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->oom)
		return;
	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->oom = true;
			return;
		}
		if (b->p && b->len + (size_t)n < b->cap) {
			b->len += (size_t)n;
			return;
		}
		{
			size_t cap = (b->cap + (size_t)n + 1) * 2;
			char *np = realloc(b->p, cap);

			if (!np) {
				b->oom = true;
				return;
			}
			b->p = np;
			b->cap = cap;
		}
	}
}

static void
xjson_str(struct sbuf_x *b, const char *s)
{
	xput(b, "\"");
	for (; s && *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			xput(b, "\\%c", ch);
		else if (ch < 0x20)
			xput(b, "\\u%04x", ch);
		else
			xput(b, "%c", ch);
	}
	xput(b, "\"");
}

/* The merge steps above the route, outermost first. */
static size_t
merge_nodes(const struct plan *p, const char **names)
{
	size_t n = 0;
	bool several = p->nshards > 1 && (p->kind == PLAN_SHARD_SET || p->kind == PLAN_SCATTER);

	if (!several || p->insel)
		return 0;	/* INSERT ... SELECT: the source's own steps are below it */
	if (p->merge & (STMT_F_LIMIT | STMT_F_OFFSET))
		names[n++] = "Limit";
	if (p->merge & STMT_F_ORDER)
		names[n++] = "Sort [Merge]";
	if (p->merge & (STMT_F_AGG | STMT_F_GROUP | STMT_F_DISTINCT))
		names[n++] = "Aggregate [Ordered]";
	names[n++] = "Collapse";
	return n;
}

/* The statement text sent to shards: the normalised text without an EXPLAIN prefix. */
static const char *
query_text(const struct plan *p)
{
	return p->query ? p->query : p->stmt ? p->stmt->sql : "";
}

/* " (actual rows=N)" after the top node's name under ANALYZE. */
static void
text_top_actual(struct sbuf_x *b, const struct plan_actual *act, bool top)
{
	if (act && top)
		xput(b, " (actual rows=%llu)", (unsigned long long)act->rows);
	xput(b, "\n");
}

/* The route at <col> (its arrow, if any, already printed); fields two columns right. */
static void
text_route(struct sbuf_x *b, const struct plan *p, int col, const struct plan_actual *act,
	   bool top)
{
	int f = col + 2;

	xput(b, "Route [%s]", plan_op_str(p->op));
	text_top_actual(b, act, top);
	xput(b, "%*sQuery: %s\n", f, "", query_text(p));
	if (p->group)
		xput(b, "%*sShardGroup: %s\n", f, "", p->group);
	if (p->nvalues) {
		xput(b, "%*sValues: ", f, "");
		for (uint32_t i = 0; i < p->nvalues; i++)
			xput(b, "%s%s", i ? ", " : "", p->values[i]);
		xput(b, "\n");
	}
	xput(b, "%*sShards: ", f, "");
	for (uint32_t i = 0; i < (p->insel ? p->insel->ntargets : p->nshards); i++)
		xput(b, "%s%s", i ? ", " : "", p->insel ? p->insel->targets[i] : p->shards[i]);
	xput(b, "\n");
	if (p->gsi) {
		xput(b, "%*sSecondary Index: %s\n", f, "", p->gsi->name);
		if (p->gsi->cover)
			xput(b, "%*sCovered By Lookup: %s\n", f, "",
			     plan_explained_text(p->gsi->cover));
		for (uint32_t i = 0; !p->gsi->cover && i < p->gsi->nfirst; i++)
			xput(b, "%*sLookup First: %s\n", f, "", p->gsi->first[i]);
		if (p->gsi->lock)
			xput(b, "%*sLocked First: %s\n%*sThen: %s(VALUES <their keys>)\n", f, "",
			     p->gsi->lock, f, "", p->gsi->update);
		for (uint32_t i = 0; i < p->gsi->nalongside; i++)
			xput(b, "%*sLookup Rows Written Beside: %s\n", f, "", p->gsi->alongside[i]);
		if (p->gsi->returning)
			xput(b, "%*sLookup Rows %s After: %s\n", f, "",
			     p->gsi->kind == PLAN_GSI_DELETE ? "Deleted" :
			     p->gsi->kind == PLAN_GSI_UPDATE ? "Moved" : "Written",
			     p->gsi->returning);
	}
	if (p->gsi_not_used)
		xput(b, "%*sSecondary Index Not Used: %s (its lookups led to every shard: the "
		     "scatter costs less)\n", f, "", p->gsi_not_used);
	for (uint32_t i = 0; act && i < act->nshards; i++)
		xput(b, "%*sShard %s: actual rows=%llu time=%.3f ms\n", f, "",
		     act->shards[i].shard, (unsigned long long)act->shards[i].rows,
		     act->shards[i].ms);
}

/* Postgres's layout: a child is "->  " two columns right of its parent's text. The tree
 * of <p> starts at column <col> (its first line's indentation already written); an INSERT
 * ... SELECT the router runs has its source's tree below its route. */
static void
text_tree(struct sbuf_x *b, const struct plan *p, int col, const struct plan_actual *act)
{
	const char *names[5];
	size_t n = merge_nodes(p, names);

	for (size_t i = 0; i <= n; i++) {
		if (i > 0) {
			xput(b, "%*s->  ", col + 2, "");
			col += 6;
		}
		if (i < n) {
			xput(b, "%s", names[i]);
			text_top_actual(b, act, i == 0);
		}
	}
	text_route(b, p, col, act, n == 0);
	if (p->insel && p->insel->source) {
		xput(b, "%*s->  ", col + 2, "");
		text_tree(b, p->insel->source, col + 6, NULL);
	}
}

static void
explain_text(struct sbuf_x *b, const struct plan *p, const struct plan_actual *act)
{
	text_tree(b, p, 0, act);
	if (act)
		xput(b, "Execution Time: %.3f ms\n", act->total_ms);
}

static void
json_list(struct sbuf_x *b, const char *key, const char *const *v, uint32_t n)
{
	xput(b, ", \"%s\": [", key);
	for (uint32_t i = 0; i < n; i++) {
		xput(b, "%s", i ? ", " : "");
		xjson_str(b, v[i]);
	}
	xput(b, "]");
}

static void json_tree(struct sbuf_x *b, const struct plan *p, const struct plan_actual *act);

static void
json_route(struct sbuf_x *b, const struct plan *p, const struct plan_actual *act, bool top)
{
	xput(b, "{\"Node Type\": \"Route\", \"Operator\": ");
	xjson_str(b, plan_op_str(p->op));
	if (act && top)
		xput(b, ", \"Actual Rows\": %llu", (unsigned long long)act->rows);
	xput(b, ", \"Query\": ");
	xjson_str(b, query_text(p));
	if (p->group) {
		xput(b, ", \"ShardGroup\": ");
		xjson_str(b, p->group);
	}
	json_list(b, "Values", p->values, p->nvalues);
	if (p->insel)
		json_list(b, "Shards", p->insel->targets, p->insel->ntargets);
	else
		json_list(b, "Shards", p->shards, p->nshards);
	if (p->gsi) {
		xput(b, ", \"Secondary Index\": ");
		xjson_str(b, p->gsi->name);
		if (p->gsi->cover) {
			xput(b, ", \"Covered By Lookup\": ");
			xjson_str(b, plan_explained_text(p->gsi->cover));
		} else {
			json_list(b, "Lookup First", p->gsi->first, p->gsi->nfirst);
		}
		if (p->gsi->lock) {
			xput(b, ", \"Locked First\": ");
			xjson_str(b, p->gsi->lock);
			xput(b, ", \"Then\": ");
			xjson_str(b, p->gsi->update);
		}
		if (p->gsi->nalongside > 0)
			json_list(b, "Lookup Rows Written Beside", p->gsi->alongside,
				  p->gsi->nalongside);
		if (p->gsi->returning) {
			xput(b, ", \"Lookup Rows %s After\": ",
			     p->gsi->kind == PLAN_GSI_DELETE ? "Deleted" :
			     p->gsi->kind == PLAN_GSI_UPDATE ? "Moved" : "Written");
			xjson_str(b, p->gsi->returning);
		}
	}
	if (p->gsi_not_used) {
		xput(b, ", \"Secondary Index Not Used\": ");
		xjson_str(b, p->gsi_not_used);
	}
	if (act) {
		xput(b, ", \"Actual\": [");
		for (uint32_t i = 0; i < act->nshards; i++) {
			xput(b, "%s{\"Shard\": ", i ? ", " : "");
			xjson_str(b, act->shards[i].shard);
			xput(b, ", \"Actual Rows\": %llu, \"Actual Total Time\": %.3f}",
			     (unsigned long long)act->shards[i].rows, act->shards[i].ms);
		}
		xput(b, "]");
	}
	if (p->insel && p->insel->source) {
		xput(b, ", \"Plans\": [");
		json_tree(b, p->insel->source, NULL);
		xput(b, "]");
	}
	xput(b, "}");
}

/* The merge steps of <p> around its route (and an INSERT ... SELECT's source below it). */
static void
json_tree(struct sbuf_x *b, const struct plan *p, const struct plan_actual *act)
{
	const char *names[5];
	size_t n = merge_nodes(p, names);

	for (size_t i = 0; i < n; i++) {
		xput(b, "{\"Node Type\": ");
		xjson_str(b, names[i]);
		if (act && i == 0)
			xput(b, ", \"Actual Rows\": %llu", (unsigned long long)act->rows);
		xput(b, ", \"Plans\": [");
	}
	json_route(b, p, act, n == 0);
	for (size_t i = 0; i < n; i++)
		xput(b, "]}");
}

static void
explain_json(struct sbuf_x *b, const struct plan *p, const struct plan_actual *act)
{
	xput(b, "[{\"Plan\": ");
	json_tree(b, p, act);
	if (act)
		xput(b, ", \"Execution Time\": %.3f", act->total_ms);
	xput(b, "}]");
}

/* plan_explain_analyze: see neki/plan_explain.h. */
char *
plan_explain_analyze(const struct plan *p, bool json, const struct plan_actual *act)
{
	struct sbuf_x b = { NULL, 0, 0, false };

	if (json)
		explain_json(&b, p, act);
	else
		explain_text(&b, p, act);
	if (b.oom) {
		free(b.p);
		return NULL;
	}
	if (b.len && b.p[b.len - 1] == '\n')
		b.p[--b.len] = '\0';
	return b.p;
}

/* plan_explain: see neki/plan_explain.h. */
char *
plan_explain(const struct plan *p, bool json)
{
	return plan_explain_analyze(p, json, NULL);
}
