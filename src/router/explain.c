/*
 * explain.c - EXPLAIN (NEKI_PLAN [, ANALYZE] [, FORMAT TEXT|JSON]) output of a plan, with
 * the spec's operator names (3.1): the merge steps above the route, `Limit`, `Sort [Merge]`,
 * `Aggregate [Ordered]`, `Collapse` when several shards answer, then `Route [<op>]` with
 * its fields `Query:` (the normalised statement sent to the shards), `ShardGroup:`,
 * `Values:` (routing values) and `Shards:`. One node list drives both formats.
 * Entry: plan_explain().
 */
#include "neki/base.h"

#include "neki/plan.h"

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

	if (!several)
		return 0;
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

/* The route at <col> (its arrow, if any, already printed); fields two columns right. */
static void
text_route(struct sbuf_x *b, const struct plan *p, int col)
{
	int f = col + 2;

	xput(b, "Route [%s]\n", plan_op_str(p->op));
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
	for (uint32_t i = 0; i < p->nshards; i++)
		xput(b, "%s%s", i ? ", " : "", p->shards[i]);
	xput(b, "\n");
}

/* Postgres's layout: a child is "->  " two columns right of its parent's text. */
static void
explain_text(struct sbuf_x *b, const struct plan *p)
{
	const char *names[5];
	size_t n = merge_nodes(p, names);
	int col = 0;

	for (size_t i = 0; i <= n; i++) {
		if (i > 0) {
			xput(b, "%*s->  ", col + 2, "");
			col += 6;
		}
		if (i < n)
			xput(b, "%s\n", names[i]);
	}
	text_route(b, p, col);
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

static void
json_route(struct sbuf_x *b, const struct plan *p)
{
	xput(b, "{\"Node Type\": \"Route\", \"Operator\": ");
	xjson_str(b, plan_op_str(p->op));
	xput(b, ", \"Query\": ");
	xjson_str(b, query_text(p));
	if (p->group) {
		xput(b, ", \"ShardGroup\": ");
		xjson_str(b, p->group);
	}
	json_list(b, "Values", p->values, p->nvalues);
	json_list(b, "Shards", p->shards, p->nshards);
	xput(b, "}");
}

static void
explain_json(struct sbuf_x *b, const struct plan *p)
{
	const char *names[5];
	size_t n = merge_nodes(p, names);

	xput(b, "[{\"Plan\": ");
	for (size_t i = 0; i < n; i++) {
		xput(b, "{\"Node Type\": ");
		xjson_str(b, names[i]);
		xput(b, ", \"Plans\": [");
	}
	json_route(b, p);
	for (size_t i = 0; i < n; i++)
		xput(b, "]}");
	xput(b, "}]");
}

/* plan_explain: see plan.h. */
char *
plan_explain(const struct plan *p, bool json)
{
	struct sbuf_x b = { NULL, 0, 0, false };

	if (json)
		explain_json(&b, p);
	else
		explain_text(&b, p);
	if (b.oom) {
		free(b.p);
		return NULL;
	}
	if (b.len && b.p[b.len - 1] == '\n')
		b.p[--b.len] = '\0';
	return b.p;
}
