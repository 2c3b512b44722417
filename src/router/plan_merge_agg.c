/*
 * plan_merge_agg.c - the aggregate calls of a SELECT merged across shards: which built-in
 * aggregates combine exactly and how (enum plan_agg), the partial columns each shard adds
 * for a call (hidden select-list entries), and the final combine call the ones computed by
 * the final SQL need. A call whose value comes from the final SQL stays in the shard query
 * as its "carrier", rewritten `f(...) FILTER (WHERE false)`: its column keeps its name and
 * type and Postgres still checks it, at no cost per row.
 * Entry points: pm_agg_kind(), pm_add_agg(), pm_add_col(), pm_fmt(), pm_same_tree().
 */
#include "neki/base.h"

#include "neki/plan.h"

#include "parse_int.h"
#include "plan_int.h"
#include "plan_merge_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What an aggregate allows inside its parentheses. */
enum {
	PM_AGG_DISTINCT = 1,	   /* DISTINCT through the union of array_agg(DISTINCT x) */
	PM_AGG_DISTINCT_SAME = 2,  /* DISTINCT changes nothing: the call is its own partial */
	PM_AGG_ORDER_FREE = 4,	   /* ORDER BY changes nothing: the call is its own partial */
	PM_AGG_ORDERED = 8,	   /* ORDER BY through array_agg of the keys and values */
};

static const struct {
	const char *name;
	enum plan_agg kind;
	unsigned flags;
} merge_aggs[] = {
	{ "count", PLAN_AGG_COUNT, PM_AGG_DISTINCT | PM_AGG_ORDER_FREE },
	{ "regr_count", PLAN_AGG_COUNT, PM_AGG_ORDER_FREE },
	{ "sum", PLAN_AGG_SUM, PM_AGG_DISTINCT },
	{ "avg", PLAN_AGG_AVG, PM_AGG_DISTINCT },
	{ "min", PLAN_AGG_MIN, PM_AGG_DISTINCT_SAME | PM_AGG_ORDER_FREE },
	{ "max", PLAN_AGG_MAX, PM_AGG_DISTINCT_SAME | PM_AGG_ORDER_FREE },
	{ "bool_and", PLAN_AGG_BOOL_AND, PM_AGG_DISTINCT_SAME | PM_AGG_ORDER_FREE },
	{ "every", PLAN_AGG_BOOL_AND, PM_AGG_DISTINCT_SAME | PM_AGG_ORDER_FREE },
	{ "bool_or", PLAN_AGG_BOOL_OR, PM_AGG_DISTINCT_SAME | PM_AGG_ORDER_FREE },
	{ "bit_and", PLAN_AGG_BIT_AND, PM_AGG_DISTINCT_SAME | PM_AGG_ORDER_FREE },
	{ "bit_or", PLAN_AGG_BIT_OR, PM_AGG_DISTINCT_SAME | PM_AGG_ORDER_FREE },
	{ "bit_xor", PLAN_AGG_BIT_XOR, PM_AGG_DISTINCT | PM_AGG_ORDER_FREE },
	{ "string_agg", PLAN_AGG_STRING_AGG, PM_AGG_DISTINCT | PM_AGG_ORDERED },
	{ "array_agg", PLAN_AGG_ARRAY_AGG, PM_AGG_DISTINCT | PM_AGG_ORDERED },
	{ "json_agg", PLAN_AGG_JSON_AGG, PM_AGG_DISTINCT | PM_AGG_ORDERED },
	{ "jsonb_agg", PLAN_AGG_JSONB_AGG, PM_AGG_DISTINCT | PM_AGG_ORDERED },
	{ "json_object_agg", PLAN_AGG_JSON_OBJECT_AGG, 0 },
	{ "jsonb_object_agg", PLAN_AGG_JSONB_OBJECT_AGG, 0 },
	{ "xmlagg", PLAN_AGG_REAGG, PM_AGG_DISTINCT | PM_AGG_ORDERED },
	{ "range_agg", PLAN_AGG_REAGG, PM_AGG_DISTINCT_SAME | PM_AGG_ORDER_FREE },
	{ "range_intersect_agg", PLAN_AGG_REAGG, PM_AGG_DISTINCT_SAME | PM_AGG_ORDER_FREE },
	{ "stddev", PLAN_AGG_VARIANCE, PM_AGG_DISTINCT },
	{ "stddev_samp", PLAN_AGG_VARIANCE, PM_AGG_DISTINCT },
	{ "stddev_pop", PLAN_AGG_VARIANCE, PM_AGG_DISTINCT },
	{ "variance", PLAN_AGG_VARIANCE, PM_AGG_DISTINCT },
	{ "var_samp", PLAN_AGG_VARIANCE, PM_AGG_DISTINCT },
	{ "var_pop", PLAN_AGG_VARIANCE, PM_AGG_DISTINCT },
};

/* plan_refuse_float_variance: see neki/plan_merge.h. */
bool
plan_refuse_float_variance(struct nk_error *err)
{
	nk_error_set(err, ERRCODE_FEATURE_NOT_SUPPORTED, "stddev and variance of real or "
		     "double precision values cannot be combined across shards");
	nk_error_detail(err, "Their double precision transition state cannot be read from the "
			"shards.");
	return false;
}

/* plan_refuse_aggregate: see plan_int.h. */
bool
plan_refuse_aggregate(struct nk_error *err, const char *name)
{
	nk_error_set(err, ERRCODE_FEATURE_NOT_SUPPORTED,
		     "aggregate %s() cannot be combined across shards", name);
	if (stmt_aggregate_class(name) == STMT_AGG_FLOAT_STATE)
		nk_error_detail(err, "Its double precision transition state cannot be read "
				"from the shards, and combining rounded results would not give "
				"what one server gives.");
	else if (stmt_aggregate_class(name) == STMT_AGG_ORDERED_SET)
		nk_error_detail(err, "It needs every value of a group in one place.");
	return false;
}

/* pm_agg_kind: see plan_merge_int.h. */
int
pm_agg_kind(struct pm *p, const cJSON *fc)
{
	const char *name = pb_last_name(jget(fc, "funcname"));

	if (!name)
		return 0;
	if (jget(fc, "over"))
		return 0;	/* a window call: the planner let each shard run it */
	for (size_t i = 0; i < NK_ARRAY_LEN(merge_aggs); i++)
		if (strcmp(name, merge_aggs[i].name) == 0)
			return (int)merge_aggs[i].kind;
	if (stmt_aggregate_class(name) > STMT_AGG_COMBINED)
		return plan_refuse_aggregate(p->err, name) ? 0 : -1;
	if (jbool(fc, "agg_star") || jbool(fc, "agg_distinct") || jget(fc, "agg_order") ||
	    jget(fc, "agg_filter") || jbool(fc, "agg_within_group")) {
		nk_error_nk013(p->err, 212);
		return -1;
	}
	return 0;
}

static unsigned
agg_flags(const char *name)
{
	for (size_t i = 0; i < NK_ARRAY_LEN(merge_aggs); i++)
		if (strcmp(name, merge_aggs[i].name) == 0)
			return merge_aggs[i].flags;
	return 0;
}

/* ---- helpers ---- */

static bool
oom(struct pm *p)
{
	return nk_error_oom(p->err);
}

/* pm_fmt: see plan_merge_int.h. */
const char *
pm_fmt(struct pm *p, const char *fmt, ...)
{
	va_list ap;
	int n;
	char *s;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || !(s = rarena_alloc(p->a, (size_t)n + 1)))
		return NULL;
	va_start(ap, fmt);
	vsnprintf(s, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return s;
}

/* pm_same_tree: see plan_merge_int.h. */
bool
pm_same_tree(const cJSON *a, const cJSON *b)
{
	const cJSON *x, *y;

	if (!a || !b)
		return a == b;
	if ((a->type & 0xff) != (b->type & 0xff))
		return false;
	if (cJSON_IsString(a))
		return strcmp(a->valuestring, b->valuestring) == 0;
	if (cJSON_IsNumber(a))
		return a->valuedouble == b->valuedouble;
	if (!cJSON_IsObject(a) && !cJSON_IsArray(a))
		return true;
	for (x = a->child, y = b->child;; x = x->next, y = y->next) {
		while (x && x->string && strcmp(x->string, "location") == 0)
			x = x->next;
		while (y && y->string && strcmp(y->string, "location") == 0)
			y = y->next;
		if (!x || !y)
			return x == y;
		if ((x->string || y->string) &&
		    (!x->string || !y->string || strcmp(x->string, y->string) != 0))
			return false;
		if (!pm_same_tree(x, y))
			return false;
	}
}

static bool
grow(struct pm *p, void **arr, uint32_t n, uint32_t *cap, size_t elem)
{
	void *na;

	if (n < *cap)
		return true;
	na = rarena_alloc(p->a, (*cap ? *cap * 2 : 16) * elem);
	if (!na)
		return oom(p);
	if (*arr)
		memcpy(na, *arr, n * elem);
	*arr = na;
	*cap = *cap ? *cap * 2 : 16;
	return true;
}

/* pm_add_col: see plan_merge_int.h. */
int
pm_add_col(struct pm *p, const char *text)
{
	struct plan_merge *m = p->out;

	if (!grow(p, (void **)&m->cols, m->ncols, &p->col_cap, sizeof(*m->cols)))
		return -1;
	if (text) {
		if (!grow(p, (void **)&p->hidden, p->nhidden, &p->hidden_cap, sizeof(*p->hidden)))
			return -1;
		p->hidden[p->nhidden++] = text;
	}
	memset(&m->cols[m->ncols], 0, sizeof(m->cols[0]));
	return (int)m->ncols++;
}

/* ---- the anatomy of one call ---- */

#define PM_CALL_ARGS 8

struct pm_call {
	const cJSON *fc;		/* FuncCall body */
	const char *name;		/* last part of the function name */
	const char *fname;		/* the function name as written ("pg_catalog.sum") */
	uint32_t first, open, close, end; /* tokens: name, '(', ')', after FILTER (...) */
	struct pm_span args[PM_CALL_ARGS];
	uint32_t nargs;
	uint32_t order;			/* the ORDER of ORDER BY inside; close when none */
	const char *filter;		/* " FILTER (WHERE ...)" as written, "" when none */
};

static bool
read_call(struct pm *p, const cJSON *fc, struct pm_call *c)
{
	uint32_t t, a;
	int d;

	memset(c, 0, sizeof(*c));
	c->fc = fc;
	c->name = pb_last_name(jget(fc, "funcname"));
	c->first = pm_tok_at(p, (uint32_t)jint(fc, "location", 0));
	c->end = pm_call_end(p, c->first, &c->open);
	if (c->open >= p->ntoks)
		return nk_error_set(p->err, ERRCODE_FEATURE_NOT_SUPPORTED,
				    "cannot locate an aggregate call");
	d = p->toks[c->open].depth;
	for (t = c->open + 1; t < p->ntoks && !(pm_is(p, t, ")") && p->toks[t].depth == d); t++)
		;
	c->close = t;
	c->order = t;
	for (t = c->open + 1; t < c->close; t++)
		if (p->toks[t].depth == d + 1 && pm_is(p, t, "order") && pm_is(p, t + 1, "by")) {
			c->order = t;
			break;
		}
	a = c->open + 1;
	if (a < c->order && p->toks[a].depth == d + 1 &&
	    (pm_is(p, a, "distinct") || pm_is(p, a, "all")))
		a++;
	c->nargs = pm_split(p, a, c->order, c->args, PM_CALL_ARGS);
	if (c->nargs > PM_CALL_ARGS)
		return nk_error_set(p->err, ERRCODE_FEATURE_NOT_SUPPORTED,
				    "too many arguments to merge an aggregate");
	c->fname = pm_text(p, c->first, c->open);
	c->filter = c->end > c->close + 1 ? pm_fmt(p, " %s", pm_text(p, c->close + 1, c->end))
					  : "";
	return c->fname && c->filter ? true : oom(p);
}

static const char *
arg_text(struct pm *p, const struct pm_call *c, uint32_t i)
{
	return i < c->nargs ? pm_text(p, c->args[i].first, c->args[i].last) : "";
}

/* A hidden partial column <text>; -1 with p->err. */
static int
hidden(struct pm *p, const char *text)
{
	if (!text) {
		oom(p);
		return -1;
	}
	return pm_add_col(p, text);
}

/*
 * The call's own column <own> becomes the carrier of a value the final SQL computes: a
 * select-list entry is cut to `f(...) FILTER (WHERE false)`, a hidden one (ORDER BY) written
 * so. A variance call inside an expression gets a hidden carrier: its type says whether the
 * input was numeric.
 */
static bool
carrier(struct pm *p, const struct pm_call *c, int own, struct plan_merge_agg *a)
{
	const char *text = pm_fmt(p, "%s FILTER (WHERE false)", pm_text(p, c->first,
								      c->close + 1));

	a->carrier = UINT32_MAX;
	if (!text)
		return oom(p);
	if (own < 0 && a->kind == PLAN_AGG_VARIANCE) {	/* its type tells numeric from float */
		own = hidden(p, text);
		if (own >= 0)
			a->carrier = (uint32_t)own;
		return own >= 0;
	}
	if (own < 0)
		return true;
	a->carrier = (uint32_t)own;
	if ((uint32_t)own >= p->out->nvisible) {
		p->hidden[(uint32_t)own - p->out->nvisible] = text;
		return true;
	}
	if (!grow(p, (void **)&p->carriers, p->ncarriers, &p->carrier_cap, sizeof(*p->carriers)))
		return false;
	p->carriers[p->ncarriers].from = p->toks[c->first].start;
	p->carriers[p->ncarriers].to = p->toks[c->end - 1].end;
	p->carriers[p->ncarriers++].with = text;
	return true;
}

/* ---- the kinds ---- */

#define PM_ORDER_KEYS 8	/* sort keys of an ordered aggregate */

/* Text of <with> + "((" + <expr> + ") " + <rest>, arena. */
static const char *
wrapped(struct pm *p, const char *with, const char *expr, const char *rest)
{
	return pm_fmt(p, "%s((%s) %s", with, expr, rest);
}

/* " COLLATE x" when the expression of span <sp> ends in a top-level COLLATE; "" otherwise. */
static const char *
collate_of(struct pm *p, struct pm_span sp)
{
	int d = sp.first < sp.last ? p->toks[sp.first].depth : 0;

	for (uint32_t k = sp.first; k < sp.last; k++)
		if (p->toks[k].depth == d && pm_is(p, k, "collate"))
			return pm_fmt(p, " %s", pm_text(p, k, sp.last));
	return "";
}

/* " DESC NULLS FIRST" of a SortBy body. */
static const char *
sort_dir(struct pm *p, const cJSON *sb)
{
	const char *dir = jstr(sb, "sortby_dir"), *nulls = jstr(sb, "sortby_nulls");

	return pm_fmt(p, "%s%s", dir && strcmp(dir, "SORTBY_DESC") == 0 ? " DESC" : "",
		      !nulls || strcmp(nulls, "SORTBY_NULLS_DEFAULT") == 0 ? ""
		      : strcmp(nulls, "SORTBY_NULLS_FIRST") == 0 ? " NULLS FIRST" : " NULLS LAST");
}

/* A constant argument: a literal or a parameter, maybe cast. */
static bool
const_arg(const cJSON *n)
{
	const cJSON *tc = jas(n, "TypeCast");

	if (tc)
		n = jget(tc, "arg");
	return jas(n, "A_Const") || jas(n, "ParamRef");
}

/* ", <arg 1>, <arg 2>..." for the final call; NULL with p->err when one is not constant. */
static const char *
const_args(struct pm *p, const struct pm_call *c)
{
	const char *s = "";

	for (uint32_t i = 1; i < c->nargs && s; i++) {
		if (!const_arg(cJSON_GetArrayItem(jget(c->fc, "args"), (int)i))) {
			nk_error_set(p->err, ERRCODE_FEATURE_NOT_SUPPORTED,
				     "%s() across shards needs constant arguments "
				     "after the first", c->name);
			return NULL;
		}
		s = pm_fmt(p, "%s, %s", s, arg_text(p, c, i));
	}
	return s ? s : (oom(p), NULL);
}

/*
 * agg(DISTINCT x [, constants] [ORDER BY x]): each shard sends array_agg(DISTINCT x); the
 * final SQL evaluates agg(DISTINCT e ...) over the union of the arrays (so equal values of
 * different shards count once, by the type's own equality). Postgres lets ORDER BY name only
 * the arguments (the shards check it on the call's carrier): it sorts by x, or by a constant
 * (no order), so the final query sorts by e.
 */
static bool
distinct_agg(struct pm *p, const struct pm_call *c, struct plan_merge_agg *a)
{
	const cJSON *order = jget(c->fc, "agg_order");
	const char *coll = collate_of(p, c->args[0]), *rest = const_args(p, c), *ord = "";
	int col;

	if (!rest || c->nargs == 0)
		return c->nargs ? false : nk_error_set(p->err, ERRCODE_FEATURE_NOT_SUPPORTED,
						       "cannot merge %s() "
						       "across shards", c->name);
	for (int i = 0; i < cJSON_GetArraySize(order) && ord; i++) {
		const cJSON *sb = jas(cJSON_GetArrayItem(order, i), "SortBy");

		if (jget(sb, "useOp"))
			return nk_error_set(p->err, ERRCODE_FEATURE_NOT_SUPPORTED,
					    "ORDER BY ... USING inside an aggregate is "
					    "not merged across shards");
		ord = pm_fmt(p, "%s%s e%s%s", ord, i ? "," : " ORDER BY", coll, sort_dir(p, sb));
	}
	col = hidden(p, pm_fmt(p, "array_agg(DISTINCT %s)%s", arg_text(p, c, 0), c->filter));
	if (col < 0 || !ord)
		return col < 0 ? false : oom(p);
	a->kind = PLAN_AGG_DISTINCT;
	a->col = (uint32_t)col;
	a->final = pm_fmt(p, "%s(DISTINCT e%s%s%s)", c->fname, coll, rest, ord);
	return a->final ? true : oom(p);
}

/*
 * string_agg / array_agg / json_agg / jsonb_agg / xmlagg with ORDER BY inside: each shard
 * sends array_agg of every sort key and of the value, in that order (hidden columns); the
 * final SQL aggregates them again.
 */
static bool
ordered_agg(struct pm *p, const struct pm_call *c, struct plan_merge_agg *a)
{
	const cJSON *order = jget(c->fc, "agg_order");
	uint32_t n = (uint32_t)cJSON_GetArraySize(order);
	struct pm_span keys[PM_ORDER_KEYS];
	const char *rest = pm_fmt(p, "%s)%s", pm_text(p, c->order, c->close), c->filter);
	const char *fin = " ORDER BY", *extra = c->nargs > 1 ? const_args(p, c) : "";

	if (!extra || !rest)
		return extra ? oom(p) : false;
	if (n == 0 || n > PM_ORDER_KEYS || c->nargs == 0 ||
	    pm_split(p, c->order + 2, c->close, keys, PM_ORDER_KEYS) != n)
		return nk_error_set(p->err, ERRCODE_FEATURE_NOT_SUPPORTED,
				    "cannot merge this ordered aggregate across "
				    "shards");
	for (uint32_t i = 0; i < n; i++) {
		const cJSON *sb = jas(cJSON_GetArrayItem(order, (int)i), "SortBy");
		uint32_t e = keys[i].first;
		int d = p->toks[keys[i].first].depth, col;

		if (jget(sb, "useOp"))
			return nk_error_set(p->err, ERRCODE_FEATURE_NOT_SUPPORTED,
					    "ORDER BY ... USING inside an aggregate is "
					    "not merged across shards");
		while (e < keys[i].last && !(p->toks[e].depth == d &&
		       (pm_is(p, e, "asc") || pm_is(p, e, "desc") || pm_is(p, e, "nulls"))))
			e++;
		/* the array loses COLLATE: the final ORDER BY says it again */
		fin = pm_fmt(p, "%s%s k%u%s%s", fin, i ? "," : "", i + 1,
			     collate_of(p, (struct pm_span){ keys[i].first, e }), sort_dir(p, sb));
		col = hidden(p, wrapped(p, "array_agg", pm_text(p, keys[i].first, e), rest));
		if (col < 0 || !fin)
			return col < 0 ? false : oom(p);
		if (i == 0)
			a->keycol = (uint32_t)col;
	}
	int v = hidden(p, wrapped(p, "array_agg", arg_text(p, c, 0), rest));

	if (v < 0)
		return false;
	a->col = (uint32_t)v;
	a->nkeys = n;
	a->final = pm_fmt(p, "%s(v%s%s)", c->fname, extra, fin);
	return a->final ? true : oom(p);
}

/* avg(x): sum((x) * 1::int2) (int8 for int2/int4, numeric for int8, float8 for float4 as
 * Postgres accumulates, the type itself otherwise) and count(x). */
static bool
avg_agg(struct pm *p, const struct pm_call *c, struct plan_merge_agg *a)
{
	const char *x = arg_text(p, c, 0);
	int s = hidden(p, pm_fmt(p, "sum((%s) * 1::int2)%s", x, c->filter));
	int n = s < 0 ? -1 : hidden(p, pm_fmt(p, "count(%s)%s", x, c->filter));

	if (n < 0)
		return false;
	a->col = (uint32_t)s;
	a->col2 = (uint32_t)n;
	return true;
}

/* stddev / variance: count(x), sum(x) and sum(x * x) in numeric (exact for integers and
 * numeric; the final SQL follows Postgres' numeric_stddev_internal). */
static bool
variance_agg(struct pm *p, const struct pm_call *c, struct plan_merge_agg *a)
{
	const char *x = arg_text(p, c, 0);
	int n = hidden(p, pm_fmt(p, "count(%s)%s", x, c->filter));
	int s = n < 0 ? -1 : hidden(p, pm_fmt(p, "sum((%s)::numeric)%s", x, c->filter));
	int q = s < 0 ? -1 : hidden(p, pm_fmt(p, "sum((%s)::numeric * (%s)::numeric)%s", x, x,
					       c->filter));

	if (q < 0)
		return false;
	a->col2 = (uint32_t)n;
	a->col = (uint32_t)s;
	a->col3 = (uint32_t)q;
	a->sample = strcmp(c->name, "stddev_pop") != 0 && strcmp(c->name, "var_pop") != 0;
	a->root = strncmp(c->name, "stddev", 6) == 0;
	return true;
}

/*
 * json_agg(x): the partial arrays are joined with ", " and, before a non-null element, "\n "
 * when x's type (under its domains) is an array or composite type, as json_agg writes them;
 * each shard tells which per group (one catalog lookup).
 */
static bool
json_flag(struct pm *p, const struct pm_call *c, struct plan_merge_agg *a)
{
	int f = hidden(p, pm_fmt(p, "(WITH RECURSIVE __neki_b(o) AS (SELECT "
			       "min(pg_catalog.pg_typeof(%s)::oid)%s UNION ALL SELECT "
			       "__neki_t.typbasetype FROM pg_catalog.pg_type __neki_t JOIN "
			       "__neki_b ON __neki_t.oid = __neki_b.o WHERE __neki_t.typtype = 'd') "
			       "SELECT bool_or((__neki_t.typelem <> 0 AND __neki_t.typlen = -1) OR "
			       "__neki_t.typtype = 'c' OR __neki_t.oid = 2249) FROM __neki_b JOIN "
			       "pg_catalog.pg_type __neki_t ON __neki_t.oid = __neki_b.o)",
			       arg_text(p, c, 0), c->filter));

	if (f < 0)
		return false;
	a->col2 = (uint32_t)f;
	return true;
}

/* string_agg(x, 'constant'): the partial strings joined by the delimiter. */
static bool
string_delim(struct pm *p, const struct pm_call *c, struct plan_merge_agg *a)
{
	const cJSON *d = cJSON_GetArrayItem(jget(c->fc, "args"), 1);

	a->delim = jstr(jget(jas(d, "A_Const"), "sval"), "sval");
	a->delim = a->delim ? rarena_strdup(p->a, a->delim) : NULL;
	if (!a->delim)
		return nk_error_set(p->err, ERRCODE_FEATURE_NOT_SUPPORTED,
				    "string_agg() across shards needs a constant "
				    "delimiter");
	return true;
}

/* The call is its own partial (column <own>, or a hidden copy). */
static bool
own_partial(struct pm *p, const struct pm_call *c, int own, struct plan_merge_agg *a)
{
	int col = own >= 0 ? own : hidden(p, pm_text(p, c->first, c->end));

	if (col < 0)
		return false;
	a->col = (uint32_t)col;
	return true;
}

/* The final SQL works on the call's text partial (a hidden copy). */
static bool
text_partial(struct pm *p, const struct pm_call *c, struct plan_merge_agg *a)
{
	a->final = pm_fmt(p, "%s(e)", c->fname);
	return a->final ? own_partial(p, c, -1, a) : oom(p);
}

/* DISTINCT and ORDER BY inside the call: what the aggregate allows. */
static bool
check_inside(struct pm *p, const struct pm_call *c, unsigned flags, bool *distinct,
	     bool *ordered)
{
	bool dist = jbool(c->fc, "agg_distinct"), ord = jget(c->fc, "agg_order") != NULL;

	*distinct = dist && (flags & PM_AGG_DISTINCT);
	*ordered = ord && !dist && (flags & PM_AGG_ORDERED);
	if (jbool(c->fc, "agg_within_group") ||
	    (dist && !(flags & (PM_AGG_DISTINCT | PM_AGG_DISTINCT_SAME))))
		return nk_error_set(p->err, ERRCODE_FEATURE_NOT_SUPPORTED,
				    "%s() with DISTINCT is not merged across "
				    "shards", c->name);
	if (ord && !*ordered && !*distinct && !(flags & PM_AGG_ORDER_FREE))
		return nk_error_set(p->err, ERRCODE_FEATURE_NOT_SUPPORTED,
				    "ORDER BY inside %s() is not merged across "
				    "shards", c->name);
	return true;
}

/* The partial columns of kind <a->kind> without DISTINCT or ORDER BY inside. */
static bool
plain_partials(struct pm *p, const struct pm_call *c, int own, struct plan_merge_agg *a,
	       bool *final)
{
	switch (a->kind) {
	case PLAN_AGG_AVG:
		*final = true;
		return avg_agg(p, c, a);
	case PLAN_AGG_VARIANCE:
		*final = true;
		return variance_agg(p, c, a);
	case PLAN_AGG_REAGG:
	case PLAN_AGG_JSONB_OBJECT_AGG:
		*final = true;
		return text_partial(p, c, a);
	case PLAN_AGG_STRING_AGG:
		return string_delim(p, c, a) && own_partial(p, c, own, a);
	case PLAN_AGG_JSON_AGG:
		return own_partial(p, c, own, a) && json_flag(p, c, a);
	default:
		return own_partial(p, c, own, a);
	}
}

/* pm_add_agg: see plan_merge_int.h. */
int
pm_add_agg(struct pm *p, const cJSON *fc, int kind, int own)
{
	struct plan_merge *m = p->out;
	struct plan_merge_agg *a;
	struct pm_call c;
	bool distinct, ordered, final = false, ok;

	if (!read_call(p, fc, &c) || !check_inside(p, &c, agg_flags(c.name), &distinct, &ordered))
		return -1;
	if (!grow(p, (void **)&m->aggs, m->naggs, &p->agg_cap, sizeof(*m->aggs)))
		return -1;
	a = &m->aggs[m->naggs];
	memset(a, 0, sizeof(*a));
	a->kind = (enum plan_agg)kind;
	a->carrier = UINT32_MAX;
	if (distinct)
		ok = final = distinct_agg(p, &c, a);
	else if (ordered)
		ok = final = ordered_agg(p, &c, a);
	else
		ok = plain_partials(p, &c, own, a, &final);
	if (!ok || (final && !carrier(p, &c, own, a)))
		return -1;
	return (int)m->naggs++;
}
