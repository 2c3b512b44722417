/*
 * parse_expr.c - expressions of the libpg_query JSON tree: the generic walk (function calls,
 * aggregates, window functions, sub-SELECTs as new scopes, grouping sets), WHERE/ON clauses
 * as AND/OR trees of shard-key candidate predicates, join equalities, and value positions
 * (literals mapped to normalised slots, parameters, DEFAULT, NULL).
 *
 * An expression on the left of `=` (lower(sku)) is rendered as canonical text
 * ("lower(sku)", "(a+1)", "(x)::int8") in the same form plan.c renders a compiled shard-key
 * expression, so matching one against the other is a string comparison.
 */
#include "neki/base.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parse_int.h"

#define RENDER_MAX 256

static bool
name_in(const char *name, const char *const *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(name, list[i]) == 0)
			return true;
	return false;
}

static bool
is_aggregate_name(const char *name)
{
	static const char *const aggs[] = {
		"count", "sum", "avg", "min", "max", "bool_and", "bool_or", "every", "string_agg",
		"array_agg", "json_agg", "jsonb_agg", "json_object_agg", "jsonb_object_agg",
		"stddev", "stddev_pop", "stddev_samp", "variance", "var_pop", "var_samp",
		"bit_and", "bit_or", "bit_xor", "xmlagg", "percentile_cont", "percentile_disc",
		"mode", "corr", "covar_pop", "covar_samp", "regr_count", "range_agg",
		"range_intersect_agg", "regr_avgx", "regr_avgy", "regr_intercept", "regr_r2",
		"regr_slope", "regr_sxx", "regr_sxy", "regr_syy", "any_value", "json_agg_strict",
		"jsonb_agg_strict",
	};

	return name_in(name, aggs, NK_ARRAY_LEN(aggs));
}

/* stmt_builtin_aggregate: see parse.h. */
bool
stmt_builtin_aggregate(const char *name)
{
	return is_aggregate_name(name);
}

/* stmt_aggregate_class: see parse.h. The float statistics keep a transition state ({N, Sx,
 * Sxx, ...} added up with Youngs-Cramer) that SQL cannot hand to the router, which could only
 * approximate it; the ordered-set and hypothetical-set aggregates need every value of a
 * group in one place; the others have no combine here. */
enum stmt_agg_class
stmt_aggregate_class(const char *name)
{
	static const char *const float_state[] = {
		"corr", "covar_pop", "covar_samp", "regr_avgx", "regr_avgy", "regr_intercept",
		"regr_r2", "regr_slope", "regr_sxx", "regr_sxy", "regr_syy",
	};
	static const char *const ordered_set[] = {
		"percentile_cont", "percentile_disc", "mode", "rank", "dense_rank",
		"percent_rank", "cume_dist",
	};
	static const char *const uncombined[] = {
		"any_value", "json_agg_strict", "jsonb_agg_strict", "json_objectagg",
		"json_arrayagg",
	};

	if (name_in(name, float_state, NK_ARRAY_LEN(float_state)))
		return STMT_AGG_FLOAT_STATE;
	if (name_in(name, ordered_set, NK_ARRAY_LEN(ordered_set)))
		return STMT_AGG_ORDERED_SET;
	if (name_in(name, uncombined, NK_ARRAY_LEN(uncombined)))
		return STMT_AGG_UNCOMBINED;
	return is_aggregate_name(name) ? STMT_AGG_COMBINED : STMT_AGG_NONE;
}

static bool
is_srf_name(const char *name)
{
	static const char *const srfs[] = {
		"generate_series", "unnest", "generate_subscripts", "regexp_matches",
		"regexp_split_to_table", "json_each", "jsonb_each", "json_array_elements",
		"jsonb_array_elements", "json_each_text", "jsonb_each_text",
		"json_array_elements_text", "jsonb_array_elements_text", "json_object_keys",
		"jsonb_object_keys", "string_to_table", "jsonb_path_query",
	};

	return name_in(name, srfs, NK_ARRAY_LEN(srfs));
}

static bool
is_large_object_name(const char *name)
{
	return strncmp(name, "lo_", 3) == 0 || strcmp(name, "loread") == 0 ||
	       strcmp(name, "lowrite") == 0;
}

/* pb_srf_name: see parse_int.h. */
bool
pb_srf_name(const char *name)
{
	return is_srf_name(name);
}

/* pb_router_only_name: see parse_int.h. */
bool
pb_router_only_name(const char *name)
{
	static const char *const names[] = {
		"now", "random", "nextval", "currval", "setval", "lastval", "current_setting",
		"set_config", "clock_timestamp", "statement_timestamp", "transaction_timestamp",
		"timeofday",
	};

	return name_in(name, names, NK_ARRAY_LEN(names));
}

/* pb_advisory_name: see parse_int.h. */
int
pb_advisory_name(const char *name)
{
	if (strncmp(name, "pg_advisory_", 12) != 0 && strncmp(name, "pg_try_advisory_", 16) != 0)
		return 0;
	return strstr(name, "_xact_") ? 2 : 1;
}

/* The router-managed function <name> is (parse.h enum stmt_fn); false for others. */
static bool
managed_fn(const char *name, enum stmt_fn *out)
{
	static const struct {
		const char *name;
		enum stmt_fn fn;
	} fns[] = {
		{ "pg_advisory_lock", STMT_FN_LOCK }, { "pg_advisory_lock_shared", STMT_FN_LOCK },
		{ "pg_try_advisory_lock", STMT_FN_LOCK },
		{ "pg_try_advisory_lock_shared", STMT_FN_LOCK },
		{ "pg_advisory_xact_lock", STMT_FN_XACT_LOCK },
		{ "pg_advisory_xact_lock_shared", STMT_FN_XACT_LOCK },
		{ "pg_try_advisory_xact_lock", STMT_FN_XACT_LOCK },
		{ "pg_try_advisory_xact_lock_shared", STMT_FN_XACT_LOCK },
		{ "pg_advisory_unlock", STMT_FN_UNLOCK }, { "pg_advisory_unlock_shared", STMT_FN_UNLOCK },
		{ "pg_advisory_unlock_all", STMT_FN_UNLOCK_ALL }, { "setval", STMT_FN_SETVAL },
		{ "pg_notify", STMT_FN_NOTIFY }, { "pg_listening_channels", STMT_FN_LISTENING },
		{ "pg_notification_queue_usage", STMT_FN_QUEUE_USAGE },
		{ "set_config", STMT_FN_SET_CONFIG },
	};

	for (size_t i = 0; i < NK_ARRAY_LEN(fns); i++) {
		if (strcmp(name, fns[i].name) == 0) {
			*out = fns[i].fn;
			return true;
		}
	}
	return false;
}

/*
 * Record a call of a router-managed function with its first arguments as values. The
 * arguments are not walked here (the walk that found the call goes on into them).
 */
static void
pb_managed_call(struct pb *b, const cJSON *fc, enum stmt_fn fn)
{
	struct stmt_call *call = pb_push(b, (void **)&b->s->calls, &b->s->ncalls, &b->call_cap,
					 sizeof(*call));
	const cJSON *arg;
	bool in_cond = b->in_cond;

	if (!call)
		return;
	call->fn = fn;
	b->in_cond = true;	/* pb_value must not walk them a second time */
	cJSON_ArrayForEach(arg, jget(fc, "args")) {
		if (jas(arg, "NamedArgExpr"))
			call->named = true;
		if (call->nargs < STMT_CALL_ARGS)
			pb_value(b, arg, 0, &call->args[call->nargs]);
		call->nargs++;
	}
	b->in_cond = in_cond;
}

/* pb_find: see parse_int.h. */
bool
pb_find(const cJSON *n, bool (*match)(const char *key, const cJSON *node))
{
	const cJSON *f;

	if (!n || (!cJSON_IsArray(n) && !cJSON_IsObject(n)))
		return false;
	cJSON_ArrayForEach(f, n) {
		if (f->string && match(f->string, f))
			return true;
		if (pb_find(f, match))
			return true;
	}
	return false;
}

/* SubLink shapes: ARRAY(SELECT) 153, row op ALL (SELECT) 109, (VALUES ...) 152. */
static void
pb_sublink(struct pb *b, const cJSON *sl)
{
	const char *type = jstr(sl, "subLinkType");
	const cJSON *sel = jas(jget(sl, "subselect"), "SelectStmt");

	if (type && strcmp(type, "ARRAY_SUBLINK") == 0)
		b->s->shape |= STMT_SH_ARRAY_SUBQUERY;
	if (type && strcmp(type, "ALL_SUBLINK") == 0 && jas(jget(sl, "testexpr"), "RowExpr"))
		b->s->shape |= STMT_SH_ROW_ALL;
	if (type && strcmp(type, "EXPR_SUBLINK") == 0 && jget(sel, "valuesLists"))
		b->s->shape |= STMT_SH_VALUES_SUBQUERY;
}

/* Aggregate call <fc> of <name> is one the merge cannot combine: a built-in without a
 * combine, WITHIN GROUP, aggregate syntax on a name that is no built-in aggregate's. */
static bool
gathers(const cJSON *fc, const char *name)
{
	return stmt_aggregate_class(name) != STMT_AGG_COMBINED || jbool(fc, "agg_within_group");
}

/* An aggregate call of the top level; the first one the merge cannot combine (a built-in
 * without a combine, WITHIN GROUP, aggregate syntax on a name that is no built-in
 * aggregate's) is stmt.gather_agg; a variance's plain column is stmt.float_arg. */
static void
note_top_agg(struct pb *b, const cJSON *fc, const char *name)
{
	static const char *const variances[] = { "stddev", "stddev_samp", "stddev_pop",
						 "variance", "var_samp", "var_pop" };

	b->s->flags |= STMT_F_AGG;
	if (b->s->gather_agg == NULL && gathers(fc, name))
		b->s->gather_agg = pb_strdup(b, name);
	if (b->s->float_arg.col == NULL && !jbool(fc, "agg_distinct") &&
	    name_in(name, variances, NK_ARRAY_LEN(variances)) &&
	    !pb_colref(b, cJSON_GetArrayItem(jget(fc, "args"), 0), &b->s->float_arg))
		b->s->float_arg.col = NULL;	/* (the planner asks the column's type) */
}

/* A window function call of <scope>: its PARTITION BY columns or the window it names. */
static void
pb_window(struct pb *b, const cJSON *over, uint16_t scope)
{
	struct stmt_scope *sc;
	struct stmt_window *w;
	uint32_t n;

	if (scope >= b->s->nscopes)
		return;
	sc = &b->s->scopes[scope];
	sc->flags |= STMT_SCF_WINDOW;
	n = sc->nwindows;
	if ((n & (n - 1)) == 0) {	/* 0, 1, 2, 4...: grow to the next power of two */
		w = pb_alloc(b, (n ? 2 * n : 1) * sizeof(*w));
		if (!w)
			return;
		if (n)
			memcpy(w, sc->windows, n * sizeof(*w));
		sc->windows = w;
	}
	w = &sc->windows[sc->nwindows++];
	memset(w, 0, sizeof(*w));
	w->ref = pb_strdup(b, jstr(over, "name") ? jstr(over, "name") : jstr(over, "refname"));
	n = (uint32_t)cJSON_GetArraySize(jget(over, "partitionClause"));
	if (n == 0 || !(w->part = pb_alloc(b, n * sizeof(*w->part))))
		return;
	{
		const cJSON *it;

		cJSON_ArrayForEach(it, jget(over, "partitionClause"))
			if (pb_colref(b, it, &w->part[w->npart]))
				w->npart++;
	}
}

static bool
is_agg_call(const cJSON *fc, const char *name)
{
	return jbool(fc, "agg_star") || jbool(fc, "agg_distinct") || jget(fc, "agg_order") ||
	       jget(fc, "agg_filter") || jbool(fc, "agg_within_group") || is_aggregate_name(name);
}

/* True when <name> is the alias (else the name) of a table in <scope>'s FROM. */
static bool
rel_of_scope(const struct pb *b, const char *name, uint16_t scope)
{
	for (uint32_t i = 0; i < b->s->nrels; i++) {
		const struct stmt_rel *r = &b->s->rels[i];
		const char *as = r->alias ? r->alias : r->name;

		if (r->scope == scope && as && strcmp(as, name) == 0)
			return true;
	}
	return false;
}

static bool
rel_of_enclosing(const struct pb *b, const char *name, uint16_t scope)
{
	while (scope != 0 && scope < b->s->nscopes) {
		scope = b->s->scopes[scope].parent;
		if (rel_of_scope(b, name, scope))
			return true;
	}
	return false;
}

enum { AGG_REF_LOCAL = 1, AGG_REF_OUTER = 2 };

/*
 * Where the column references of <n> (an aggregate's arguments, read in <scope>) point:
 * AGG_REF_LOCAL for one of <scope>'s tables (or unqualified where <scope> has a FROM),
 * AGG_REF_OUTER for one of an enclosing scope's only (or unqualified without a FROM).
 * Inside a nested sub-SELECT (<nested>) only qualified references count.
 */
static unsigned
agg_refs(const struct pb *b, const cJSON *n, uint16_t scope, bool nested)
{
	const cJSON *f, *fields;
	unsigned out = 0;
	int nf;

	if (!n || (!cJSON_IsArray(n) && !cJSON_IsObject(n)))
		return 0;
	cJSON_ArrayForEach(f, n) {
		if (!f->string || strcmp(f->string, "ColumnRef") != 0) {
			out |= agg_refs(b, f, scope, nested || (f->string &&
							      strcmp(f->string, "subselect") == 0));
			continue;
		}
		fields = jget(f, "fields");
		nf = cJSON_GetArraySize(fields);
		if (nf > 1 && jsval(cJSON_GetArrayItem(fields, nf - 2))) {
			const char *q = jsval(cJSON_GetArrayItem(fields, nf - 2));

			out |= rel_of_scope(b, q, scope) ? AGG_REF_LOCAL :
			       rel_of_enclosing(b, q, scope) ? AGG_REF_OUTER : 0;
		} else if (nf >= 1 && !nested) {
			out |= b->s->scopes[scope].from >= 0 ? AGG_REF_LOCAL : AGG_REF_OUTER;
		}
	}
	return out;
}

/*
 * An aggregate whose arguments reference only columns of enclosing queries belongs to the
 * nearest of those (SQL's rule): a subquery's `max(o.x)` is the outer query's aggregate,
 * which the router does not combine (STMT_SH_OUTER_AGG, 135 on several shards).
 */
static void
pb_outer_agg(struct pb *b, const cJSON *fc, uint16_t scope)
{
	unsigned refs;

	if (scope == 0 || scope >= b->s->nscopes)
		return;
	refs = agg_refs(b, jget(fc, "args"), scope, false) |
	       agg_refs(b, jget(fc, "agg_filter"), scope, false) |
	       agg_refs(b, jget(fc, "agg_order"), scope, false);
	if (refs == AGG_REF_OUTER)
		b->s->shape |= STMT_SH_OUTER_AGG;
}

static void
pb_funccall(struct pb *b, const cJSON *fc, bool top, uint16_t scope)
{
	const char *name = pb_last_name(jget(fc, "funcname"));
	enum stmt_fn fn;

	if (!name)
		return;
	if (jget(fc, "over"))
		pb_window(b, jget(fc, "over"), scope);
	else if (is_agg_call(fc, name) && scope < b->s->nscopes) {
		b->s->scopes[scope].flags |= STMT_SCF_AGG;
		if (gathers(fc, name))
			b->s->scopes[scope].flags |= STMT_SCF_GATHER_AGG;
		pb_outer_agg(b, fc, scope);
	}
	pb_func(b, name);
	if (strcmp(name, "nextval") == 0)
		b->s->flags |= b->ctx == PB_CTX_WHERE ? STMT_F_SEQ_WHERE :
			       b->ctx == PB_CTX_SET ? STMT_F_SEQ_SET :
			       b->ctx == PB_CTX_VALUES ? 0 : STMT_F_SEQ_ROW;
	if (is_large_object_name(name))
		b->s->flags |= STMT_F_LO_CALL;
	if (pb_advisory_name(name))
		b->s->shape |= pb_advisory_name(name) == 2 ? STMT_SH_ADVISORY_XACT :
							      STMT_SH_ADVISORY_SESSION;
	if (managed_fn(name, &fn))
		pb_managed_call(b, fc, fn);
	if (!top)
		return;
	if (jget(fc, "over"))
		b->s->flags |= STMT_F_WINDOW;
	else if (is_agg_call(fc, name))
		note_top_agg(b, fc, name);
}

/* A sub-SELECT under <scope> (kind <kind>): INTERSECT/EXCEPT there is 151's shape. */
static uint16_t
pb_subquery(struct pb *b, const cJSON *sel, uint16_t scope, enum stmt_scope_kind kind)
{
	const char *op = jstr(sel, "op");
	uint16_t sc;

	if (op && (strcmp(op, "SETOP_INTERSECT") == 0 || strcmp(op, "SETOP_EXCEPT") == 0))
		b->s->shape |= STMT_SH_SUB_SETOP;
	b->s->flags |= STMT_F_SUBQUERY;
	sc = pb_scope_new(b, scope, kind);
	pb_select(b, sel, sc, false);
	return sc;
}

/* A SubLink of <scope>: its test expression belongs to <scope>, its SELECT is a SUBLINK
 * scope (for `x IN (SELECT ...)` / `x = ANY (SELECT ...)` with the tested column). */
static void
pb_sublink_scope(struct pb *b, const cJSON *sl, uint16_t scope, bool top)
{
	const char *type = jstr(sl, "subLinkType"), *op = pb_last_name(jget(sl, "operName"));
	const cJSON *sel = jas(jget(sl, "subselect"), "SelectStmt");
	uint16_t sc;

	b->s->flags |= STMT_F_SUBQUERY;
	pb_sublink(b, sl);
	pb_walk(b, jget(sl, "testexpr"), scope, top);
	if (!sel)
		return;
	sc = pb_subquery(b, sel, scope, STMT_SC_SUBLINK);
	if (sc != scope)
		b->s->scopes[sc].loc = jint(sl, "location", -1);
	if (sc == scope || !type || strcmp(type, "ANY_SUBLINK") != 0 ||
	    (op && strcmp(op, "=") != 0))
		return;
	b->s->scopes[sc].flags |= STMT_SCF_IN;
	if (!pb_colref(b, jget(sl, "testexpr"), &b->s->scopes[sc].test))
		b->s->scopes[sc].test.col = NULL;
}

/* pb_walk: see parse_int.h. */
void
pb_walk(struct pb *b, const cJSON *n, uint16_t scope, bool top)
{
	const cJSON *f;

	if (!n || (!cJSON_IsArray(n) && !cJSON_IsObject(n)))
		return;
	cJSON_ArrayForEach(f, n) {
		const char *key = f->string;

		if (key && strcmp(key, "SelectStmt") == 0) {
			pb_subquery(b, f, scope, STMT_SC_OTHER);
			continue;
		}
		if (key && strcmp(key, "SubLink") == 0) {
			pb_sublink_scope(b, f, scope, top);
			continue;
		}
		if (key && strcmp(key, "ColumnRef") == 0) {	/* t.col, s.t.col: its table */
			const cJSON *fields = jget(f, "fields");
			int nf = cJSON_GetArraySize(fields);

			if (nf >= 2)
				pb_qual(b, jsval(cJSON_GetArrayItem(fields, nf - 2)), scope, false);
			continue;
		}
		if (key && strcmp(key, "FuncCall") == 0)
			pb_funccall(b, f, top, scope);
		else if (key && strcmp(key, "GroupingSet") == 0 && top)
			b->s->flags |= STMT_F_GROUPING_SETS;
		else if (key && strcmp(key, "CurrentOfExpr") == 0)
			b->s->flags |= STMT_F_CURRENT_OF;
		/* an aggregate inside an aggregate's argument is not the statement's own */
		pb_walk(b, f, scope, top && !(key && strcmp(key, "over") == 0));
	}
}

/* Index of the normalised literal starting at <loc>, or -1. */
static int
lit_at(const struct parse_norm *norm, uint32_t loc)
{
	uint32_t lo = 0, hi = norm->nlits;

	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;

		if (norm->lits[mid].start == loc)
			return (int)mid;
		if (norm->lits[mid].start < loc)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

/* Text of the number at <loc> in the source ("-12.5"). */
static const char *
number_text(struct pb *b, int loc)
{
	const char *s = b->sql + loc, *p = s;

	if (*p == '-')
		p++;
	while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
		p++;
	while (isalnum((unsigned char)*p) || *p == '.' ||
	       ((*p == '+' || *p == '-') && (p[-1] == 'e' || p[-1] == 'E')))
		p++;
	if (*s == '-') {
		const char *digits = s + 1;
		size_t n;
		char *t;

		while (*digits == ' ' || *digits == '\t' || *digits == '\n' || *digits == '\r')
			digits++;
		n = (size_t)(p - digits);
		t = pb_alloc(b, n + 2);
		if (!t)
			return NULL;
		t[0] = '-';
		memcpy(t + 1, digits, n);
		return t;
	}
	{
		char *t = rarena_strndup(b->a, s, (size_t)(p - s));

		if (!t)
			b->oom = true;
		return t;
	}
}

/* An A_Const: NULL, a normalised literal (slot) or a constant kept as text. */
static void
pb_const(struct pb *b, const cJSON *c, struct stmt_value *out)
{
	int loc = jint(c, "location", -1), idx = -1;
	const cJSON *bv;

	if (jbool(c, "isnull")) {
		out->kind = STMT_V_NULL;
		return;
	}
	if (b->norm && loc >= 0) {
		idx = lit_at(b->norm, (uint32_t)loc);
		if (idx < 0 && b->sql[loc] == '-') {
			uint32_t p = (uint32_t)loc + 1;

			while (isspace((unsigned char)b->sql[p]))
				p++;
			idx = lit_at(b->norm, p);
			out->negate = idx >= 0;
		}
	}
	if (idx >= 0) {
		out->kind = STMT_V_SLOT;
		out->slot = b->norm->nparams + (uint32_t)idx;
		return;
	}
	out->negate = false;
	out->kind = STMT_V_CONST;
	if (jget(c, "sval"))
		out->text = pb_strdup(b, jstr(jget(c, "sval"), "sval"));
	else if ((bv = jget(c, "boolval")))
		out->text = jbool(bv, "boolval") ? "true" : "false";
	else if (jget(c, "bsval"))
		out->text = pb_strdup(b, jstr(jget(c, "bsval"), "bsval"));
	else if (loc >= 0)
		out->text = number_text(b, loc);
	if (!out->text)
		out->kind = STMT_V_EXPR;
}

/* True when the subtree holds a SubLink (a sub-SELECT). */
static bool
has_sublink(const cJSON *n)
{
	const cJSON *f;

	if (!n || (!cJSON_IsArray(n) && !cJSON_IsObject(n)))
		return false;
	cJSON_ArrayForEach(f, n) {
		if (f->string && (strcmp(f->string, "SubLink") == 0 ||
				  strcmp(f->string, "SelectStmt") == 0))
			return true;
		if (has_sublink(f))
			return true;
	}
	return false;
}

/* pb_value: see parse_int.h. */
void
pb_value(struct pb *b, const cJSON *n, uint16_t scope, struct stmt_value *out)
{
	const char *tag = jtag(n);
	const cJSON *body = jbody(n);

	memset(out, 0, sizeof(*out));
	if (!tag)
		return;
	if (strcmp(tag, "A_Const") == 0) {
		pb_const(b, body, out);
	} else if (strcmp(tag, "ParamRef") == 0) {
		int num = jint(body, "number", 0);

		if (num <= 0)
			return;
		out->kind = STMT_V_SLOT;
		out->slot = (uint32_t)num - 1;
		out->is_param = true;
		if ((uint32_t)num > b->s->nparams)
			b->s->nparams = (uint32_t)num;
		if (b->s->nslots < b->s->nparams)
			b->s->nslots = b->s->nparams;
	} else if (strcmp(tag, "TypeCast") == 0) {
		const cJSON *tn = jget(body, "typeName");

		pb_value(b, jget(body, "arg"), scope, out);
		if (out->kind == STMT_V_SLOT || out->kind == STMT_V_CONST ||
		    out->kind == STMT_V_NULL) {
			out->cast = pb_strdup(b, pb_last_name(jget(tn, "names")));
			out->is_array = out->is_array || jget(tn, "arrayBounds") != NULL;
		} else {
			out->kind = STMT_V_EXPR;
		}
	} else if (strcmp(tag, "SetToDefault") == 0) {
		out->kind = STMT_V_DEFAULT;
	} else {
		const cJSON *fc = jas(n, "FuncCall");

		out->kind = STMT_V_EXPR;
		out->has_subquery = has_sublink(n);
		out->is_subquery = jas(n, "SubLink") != NULL;
		out->is_srf = fc && pb_last_name(jget(fc, "funcname")) &&
			      is_srf_name(pb_last_name(jget(fc, "funcname")));
		if (!b->in_cond)
			pb_walk(b, n, scope, false);
	}
}

/* ---- left side of a shard-key predicate ---- */

struct render {
	char buf[RENDER_MAX];
	size_t len;
	bool ok;
	const char *col, *qual;		/* the one base column and its qualifier */
};

static void
rput(struct render *r, const char *s)
{
	size_t n = strlen(s);

	if (r->len + n >= RENDER_MAX) {
		r->ok = false;
		return;
	}
	memcpy(r->buf + r->len, s, n + 1);
	r->len += n;
}

/* Cast target names as the shard-key expression compiler knows them. */
static const char *
canon_type(const char *t)
{
	if (!t)
		return NULL;
	if (strcmp(t, "varchar") == 0 || strcmp(t, "text") == 0)
		return "text";
	if (strcmp(t, "int2") == 0 || strcmp(t, "int4") == 0 || strcmp(t, "int8") == 0)
		return t;
	return NULL;
}

static void render_node(struct pb *b, struct render *r, const cJSON *n);

static void
render_column(struct render *r, const cJSON *cr)
{
	const cJSON *fields = jget(cr, "fields");
	int n = cJSON_GetArraySize(fields);
	const char *col = n > 0 ? jsval(cJSON_GetArrayItem(fields, n - 1)) : NULL;
	const char *qual = n > 1 ? jsval(cJSON_GetArrayItem(fields, n - 2)) : NULL;

	if (!col || (r->col && (strcmp(r->col, col) != 0 ||
				(r->qual && qual && strcmp(r->qual, qual) != 0)))) {
		r->ok = false;
		return;
	}
	r->col = col;
	if (qual)
		r->qual = qual;
	rput(r, col);
}

static void
render_func(struct pb *b, struct render *r, const cJSON *fc)
{
	const cJSON *arg;
	bool first = true;
	const char *name = pb_last_name(jget(fc, "funcname"));

	if (!name || jget(fc, "over") || jbool(fc, "agg_star")) {
		r->ok = false;
		return;
	}
	rput(r, name);
	rput(r, "(");
	cJSON_ArrayForEach(arg, jget(fc, "args")) {
		if (!first)
			rput(r, ",");
		first = false;
		render_node(b, r, arg);
	}
	rput(r, ")");
}

static void
render_op(struct pb *b, struct render *r, const cJSON *ax)
{
	const char *kind = jstr(ax, "kind"), *op = pb_last_name(jget(ax, "name"));

	if (!kind || strcmp(kind, "AEXPR_OP") != 0 || !op || strlen(op) != 1 ||
	    !strchr("+-*/", op[0])) {
		r->ok = false;
		return;
	}
	rput(r, "(");
	if (jget(ax, "lexpr"))
		render_node(b, r, jget(ax, "lexpr"));
	else
		rput(r, "0");
	rput(r, op);
	render_node(b, r, jget(ax, "rexpr"));
	rput(r, ")");
}

static void
render_node(struct pb *b, struct render *r, const cJSON *n)
{
	const char *tag = jtag(n);
	const cJSON *body = jbody(n);

	if (!tag || !r->ok) {
		r->ok = false;
	} else if (strcmp(tag, "ColumnRef") == 0) {
		render_column(r, body);
	} else if (strcmp(tag, "FuncCall") == 0) {
		render_func(b, r, body);
	} else if (strcmp(tag, "A_Expr") == 0) {
		render_op(b, r, body);
	} else if (strcmp(tag, "A_Const") == 0 && (jget(body, "ival") || jget(body, "fval"))) {
		const char *t = number_text(b, jint(body, "location", 0));

		if (t)
			rput(r, t);
		else
			r->ok = false;
	} else if (strcmp(tag, "TypeCast") == 0) {
		const char *t = canon_type(pb_last_name(jget(jget(body, "typeName"), "names")));

		if (!t) {
			r->ok = false;
			return;
		}
		rput(r, "(");
		render_node(b, r, jget(body, "arg"));
		rput(r, ")::");
		rput(r, t);
	} else {
		r->ok = false;
	}
}

/* Fill <p>'s left side from <n>: a column, or an expression over one column. */
static bool
pb_lhs(struct pb *b, const cJSON *n, struct stmt_pred *p)
{
	struct render r;

	memset(&r, 0, sizeof(r));
	r.ok = true;
	if (jas(n, "ColumnRef")) {
		render_column(&r, jbody(n));
		if (!r.ok)
			return false;
		p->lhs = p->column = pb_strdup(b, r.col);
		p->qual = pb_strdup(b, r.qual);
		return true;
	}
	render_node(b, &r, n);
	if (!r.ok || !r.col)
		return false;
	p->lhs = pb_strdup(b, r.buf);
	p->lhs_is_expr = true;
	p->column = pb_strdup(b, r.col);
	p->qual = pb_strdup(b, r.qual);
	return true;
}

static bool
usable_value(const struct stmt_value *v)
{
	return v->kind == STMT_V_SLOT || v->kind == STMT_V_CONST;
}

/* Does IN list predicate <p> hold a usable value? */
static bool
in_has_value(const struct stmt_pred *p)
{
	for (uint32_t i = 0; i < p->nvals; i++)
		if (usable_value(&p->vals[i]))
			return true;
	return false;
}

static struct stmt_cond *
cond_new(struct pb *b, enum stmt_cond_kind kind)
{
	struct stmt_cond *c = pb_alloc(b, sizeof(*c));

	if (c)
		c->kind = kind;
	return c;
}

/* A leaf predicate with <nvals> values from <items> (or one value <one>). */
static struct stmt_cond *
pred_leaf(struct pb *b, const cJSON *lhs, enum stmt_pred_op op, const cJSON *items,
	  const cJSON *one, uint16_t scope)
{
	struct stmt_pred *p = pb_alloc(b, sizeof(*p));
	uint32_t n = items ? (uint32_t)cJSON_GetArraySize(items) : 1, i = 0;
	struct stmt_cond *c;
	const cJSON *it;

	if (!p || n == 0 || !pb_lhs(b, lhs, p))
		return cond_new(b, STMT_C_OTHER);
	p->op = op;
	p->vals = pb_alloc(b, n * sizeof(*p->vals));
	if (!p->vals)
		return NULL;
	if (!items) {
		pb_value(b, one, scope, &p->vals[0]);
	} else {
		cJSON_ArrayForEach(it, items)
			pb_value(b, it, scope, &p->vals[i++]);
	}
	p->nvals = n;
	for (i = 0; i < n; i++)	/* (a NULL of an IN list beside values matches no row) */
		if (!usable_value(&p->vals[i]) &&
		    !(op == STMT_P_IN && p->vals[i].kind == STMT_V_NULL && in_has_value(p)))
			return cond_new(b, STMT_C_OTHER);
	c = cond_new(b, STMT_C_PRED);
	if (c)
		c->pred = p;
	return c;
}

static void
join_eq(struct pb *b, const cJSON *l, const cJSON *r, uint16_t scope)
{
	struct stmt_pred pl, pr;
	struct stmt_join_eq *e;

	memset(&pl, 0, sizeof(pl));
	memset(&pr, 0, sizeof(pr));
	if (b->in_or > 0)
		return;		/* under OR: it holds for some rows only */
	if (!pb_lhs(b, l, &pl) || !pb_lhs(b, r, &pr) || pl.lhs_is_expr || pr.lhs_is_expr)
		return;
	e = pb_push(b, (void **)&b->s->joins, &b->s->njoins, &b->join_cap, sizeof(*e));
	if (!e)
		return;
	e->lqual = pl.qual;
	e->lcol = pl.column;
	e->rqual = pr.qual;
	e->rcol = pr.column;
	e->scope = scope;
	e->node = b->cur_node;
}

/* `x = ANY(...)`: an ARRAY[...] list, one array parameter, or nothing usable. */
static struct stmt_cond *
cond_any(struct pb *b, const cJSON *ax, uint16_t scope)
{
	const cJSON *r = jget(ax, "rexpr"), *tc = jas(r, "TypeCast");
	struct stmt_cond *c;

	if (tc)
		r = jget(tc, "arg");
	if (jas(r, "A_ArrayExpr"))
		return pred_leaf(b, jget(ax, "lexpr"), STMT_P_IN,
				 jget(jas(r, "A_ArrayExpr"), "elements"), NULL, scope);
	if (jas(r, "ParamRef")) {
		c = pred_leaf(b, jget(ax, "lexpr"), STMT_P_ANY_PARAM, NULL, r, scope);
		if (c && c->kind == STMT_C_PRED)
			c->pred->vals[0].is_array = true;
		return c;
	}
	return cond_new(b, STMT_C_OTHER);
}

static struct stmt_cond *
cond_aexpr(struct pb *b, const cJSON *ax, uint16_t scope)
{
	const char *kind = jstr(ax, "kind"), *op = pb_last_name(jget(ax, "name"));
	const cJSON *l = jget(ax, "lexpr"), *r = jget(ax, "rexpr");
	struct stmt_cond *c;

	if (!kind || !op || strcmp(op, "=") != 0)
		return cond_new(b, STMT_C_OTHER);
	if (strcmp(kind, "AEXPR_IN") == 0)
		return pred_leaf(b, l, STMT_P_IN, jget(jas(r, "List"), "items"), NULL, scope);
	if (strcmp(kind, "AEXPR_OP_ANY") == 0)
		return cond_any(b, ax, scope);
	if (strcmp(kind, "AEXPR_OP") != 0)
		return cond_new(b, STMT_C_OTHER);
	if (jas(l, "ColumnRef") && jas(r, "ColumnRef")) {
		join_eq(b, l, r, scope);
		return cond_new(b, STMT_C_OTHER);
	}
	c = pred_leaf(b, l, STMT_P_EQ, NULL, r, scope);
	if (c && c->kind == STMT_C_OTHER)
		c = pred_leaf(b, r, STMT_P_EQ, NULL, l, scope);
	return c;
}

/* The condition tree of <n> (pb_cond without the clause context). */
static struct stmt_cond *
cond_tree(struct pb *b, const cJSON *n, uint16_t scope)
{
	const char *tag = jtag(n), *boolop;
	const cJSON *body = jbody(n), *arg;
	struct stmt_cond *c;

	if (tag && strcmp(tag, "BoolExpr") == 0) {
		boolop = jstr(body, "boolop");
		if (boolop && strcmp(boolop, "NOT_EXPR") != 0) {
			bool or = strcmp(boolop, "AND_EXPR") != 0;

			c = cond_new(b, or ? STMT_C_OR : STMT_C_AND);
			if (!c)
				return NULL;
			c->nargs = (uint32_t)cJSON_GetArraySize(jget(body, "args"));
			c->args = pb_alloc(b, (c->nargs + 1) * sizeof(*c->args));
			if (!c->args)
				return NULL;
			c->nargs = 0;
			b->in_or += or;
			cJSON_ArrayForEach(arg, jget(body, "args")) {
				struct stmt_cond *sub = pb_cond(b, arg, scope);

				if (sub)
					c->args[c->nargs++] = sub;
			}
			b->in_or -= or;
			return c;
		}
	}
	/* a leaf: record functions and sub-SELECTs first */
	pb_walk(b, n, scope, false);
	if (tag && strcmp(tag, "A_Expr") == 0) {
		b->in_cond = true;
		c = cond_aexpr(b, body, scope);
		b->in_cond = false;
		return c;
	}
	return cond_new(b, STMT_C_OTHER);
}

/* pb_cond: see parse_int.h. */
struct stmt_cond *
pb_cond(struct pb *b, const cJSON *n, uint16_t scope)
{
	enum pb_ctx saved = b->ctx;
	struct stmt_cond *c;

	b->ctx = PB_CTX_WHERE;
	c = cond_tree(b, n, scope);
	b->ctx = saved;
	return c;
}

/* pb_cond_and: see parse_int.h. */
void
pb_cond_and(struct pb *b, uint16_t scope, struct stmt_cond *extra)
{
	struct stmt_scope *sc;
	struct stmt_cond *both;

	if (!extra || scope >= b->s->nscopes)
		return;
	sc = &b->s->scopes[scope];
	if (!sc->where) {
		sc->where = extra;
		return;
	}
	both = cond_new(b, STMT_C_AND);
	if (!both)
		return;
	both->args = pb_alloc(b, 2 * sizeof(*both->args));
	if (!both->args)
		return;
	both->args[0] = sc->where;
	both->args[1] = extra;
	both->nargs = 2;
	sc->where = both;
}
