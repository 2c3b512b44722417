/*
 * plan_merge.c - the merge spec of a SELECT sent to several shards (merge.h runs it): which
 * result columns the client sees, the sort keys, group keys, aggregate partials and their
 * combine, HAVING, DISTINCT, UNION and LIMIT/OFFSET, and the text each shard runs. The text
 * is the original with pieces spliced at the positions the parse tree and the token view
 * give: hidden columns appended to the select list, HAVING/ORDER BY/LIMIT dropped from
 * aggregate queries (the router applies them), `LIMIT offset+limit` pushed down otherwise.
 */
#include "neki/base.h"

#include "neki/plan.h"

#include "parse_int.h"
#include "plan_merge_int.h"

#include <pg_query.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * The holes of an expression (outside sub-SELECTs): its aggregate calls and its references
 * to GROUP BY items (a column, or a function call written as in GROUP BY), which the final
 * SQL fills with the group's values.
 */
#define PM_HOLES 64

struct pm_hole {
	const cJSON *node;
	int kind;		/* aggregate kind; 0: GROUP BY item <group>; -1: another column */
	uint32_t group;
	uint32_t first, last;	/* tokens */
};

/* A hole naming GROUP BY item (agg & ~PM_HOLE_GROUP) until resolve_groups() makes it a
 * column. */
#define PM_HOLE_GROUP 0x40000000u

struct pm_found {
	struct pm_hole holes[PM_HOLES];
	uint32_t n, naggs;
	bool column_outside;	/* a column reference outside every aggregate and group item */
	bool failed;
};

/* Tokens of column reference <cr> (t.c, "T".c, t . c). */
static void
colref_span(const struct pm *p, const cJSON *cr, uint32_t *first, uint32_t *last)
{
	uint32_t t = pm_tok_at(p, (uint32_t)jint(cr, "location", 0));

	*first = t++;
	while (t < p->ntoks && p->sql[p->toks[t].start] == '.')	/* "." or ".c" (a token) */
		t += p->toks[t].end - p->toks[t].start == 1 ? 2 : 1;
	*last = t < p->ntoks ? t : p->ntoks;
}

/* Same column: equal names, or equal last names when either is unqualified (the shard
 * checks that such a reference is not ambiguous). */
static bool
same_column(const cJSON *a, const cJSON *b)
{
	const cJSON *fa = jget(a, "fields"), *fb = jget(b, "fields");
	int na = cJSON_GetArraySize(fa), nb = cJSON_GetArraySize(fb);
	const char *la = jsval(cJSON_GetArrayItem(fa, na - 1));
	const char *lb = jsval(cJSON_GetArrayItem(fb, nb - 1));

	if (na == nb)
		return pm_same_tree(fa, fb);
	return (na == 1 || nb == 1) && la && lb && strcmp(la, lb) == 0;
}

/* GROUP BY item that node <n> (ColumnRef or FuncCall) repeats; -1 when none. */
static int
group_match(const struct pm *p, const cJSON *n, const char *tag)
{
	for (uint32_t g = 0; g < p->ngroups; g++) {
		const cJSON *gn = jas(p->groups[g].node, tag);

		if (gn && (strcmp(tag, "ColumnRef") == 0 ? same_column(n, gn)
							 : pm_same_tree(n, gn)))
			return (int)g;
	}
	return -1;
}

static bool
add_hole(struct pm *p, struct pm_found *f, const cJSON *n, int kind, int group)
{
	struct pm_hole *h = &f->holes[f->n];
	uint32_t open;

	if (f->n == PM_HOLES) {
		f->failed = true;
		return nk_error_set(p->err, ERRCODE_FEATURE_NOT_SUPPORTED,
				    "too many aggregate calls to merge");
	}
	h->node = n;
	h->kind = kind;
	h->group = group < 0 ? 0 : (uint32_t)group;
	if (strcmp(n->string, "ColumnRef") == 0) {
		colref_span(p, n, &h->first, &h->last);
	} else {
		h->first = pm_tok_at(p, (uint32_t)jint(n, "location", 0));
		h->last = pm_call_end(p, h->first, &open);
	}
	f->n++;
	f->naggs += kind > 0;
	return true;
}

static void
find_aggs(struct pm *p, const cJSON *n, struct pm_found *f)
{
	bool col, call;
	int g;

	if (!n || f->failed)
		return;
	col = cJSON_IsObject(n) && n->string && strcmp(n->string, "ColumnRef") == 0;
	call = cJSON_IsObject(n) && n->string && strcmp(n->string, "FuncCall") == 0;
	if (cJSON_IsObject(n) && n->string && strcmp(n->string, "SubLink") == 0)
		return;
	if (call) {
		int k = pm_agg_kind(p, n);

		if (k != 0) {
			f->failed = k < 0 || !add_hole(p, f, n, k, -1);
			return;
		}
	}
	if ((col || call) && (g = group_match(p, n, n->string)) >= 0) {
		f->failed = !add_hole(p, f, n, 0, g);
		return;
	}
	if (col && p->simple_groups) {	/* functionally dependent, or the shard's 42803 */
		f->failed = !add_hole(p, f, n, -1, -1);
		return;
	}
	if (col)
		f->column_outside = true;
	for (const cJSON *c = n->child; c; c = c->next)
		find_aggs(p, c, f);
}

/* ---- columns and aggregates of the spec ---- */

static bool
oom(struct pm *p)
{
	return nk_error_oom(p->err);
}

static int
hole_order(const void *x, const void *y)
{
	const struct pm_hole *a = x, *b = y;

	return a->first < b->first ? -1 : a->first > b->first;
}

/*
 * Template of tokens [first, last) with each hole found in <f>: aggregate calls (recorded
 * with pm_add_agg), GROUP BY items (PM_HOLE_GROUP | item, resolved to a column by
 * resolve_groups()) and other columns (a hidden column each: the shard refuses one that is
 * not functionally dependent on the GROUP BY items with Postgres' 42803; one that is has the
 * same value in every partial row of its group).
 */
static bool
make_expr(struct pm *p, struct pm_found *f, uint32_t first, uint32_t last,
	  struct plan_merge_expr *e)
{
	uint32_t at = first;

	qsort(f->holes, f->n, sizeof(f->holes[0]), hole_order);
	e->text = rarena_alloc(p->a, (f->n + 1) * sizeof(*e->text));
	e->agg = rarena_alloc(p->a, (f->n + 1) * sizeof(*e->agg));
	if (!e->text || !e->agg)
		return oom(p);
	for (uint32_t i = 0; i < f->n; i++) {
		const struct pm_hole *h = &f->holes[i];
		int a = h->kind > 0 ? pm_add_agg(p, h->node, h->kind, -1)
			: h->kind < 0 ? pm_add_col(p, pm_text(p, h->first, h->last))
				      : (int)(PM_HOLE_GROUP | h->group);

		if (a < 0)
			return false;
		if (h->first < at)
			return nk_error_set(p->err, ERRCODE_FEATURE_NOT_SUPPORTED,
					    "cannot splice the aggregate calls of "
					    "this expression");
		e->text[i] = pm_text(p, at, h->first);
		e->agg[i] = (uint32_t)a | (h->kind < 0 ? PLAN_MERGE_HOLE_COL : 0);
		at = h->last;
	}
	e->text[f->n] = pm_text(p, at, last);
	e->nagg = f->n;
	return true;
}

/* The template of a column that is one aggregate call. */
static bool
make_expr_single(struct pm *p, struct plan_merge_expr *e, uint32_t a)
{
	e->text = rarena_alloc(p->a, 2 * sizeof(*e->text));
	e->agg = rarena_alloc(p->a, sizeof(*e->agg));
	if (!e->text || !e->agg)
		return oom(p);
	e->text[0] = e->text[1] = "";
	e->agg[0] = a;
	e->nagg = 1;
	return true;
}

static bool
refuse_ungrouped(struct pm *p, const char *where)
{
	nk_error_set(p->err, ERRCODE_FEATURE_NOT_SUPPORTED,
		     "%s over columns that are not GROUP BY items are not "
		     "merged across shards", where);
	nk_error_hint(p->err, "Write the column as in GROUP BY, or group by the expression.");
	return false;
}

/* Classify column <col> whose expression is <node> written in tokens [first, last). */
static bool
classify(struct pm *p, uint32_t col, const cJSON *node, uint32_t first, uint32_t last)
{
	struct pm_found f;
	int a;

	memset(&f, 0, sizeof(f));
	find_aggs(p, node, &f);
	if (f.failed)
		return false;
	if (f.naggs == 0)
		return true;
	p->out->grouped = true;
	if (f.n == 1 && f.holes[0].node == jget(node, "FuncCall")) {
		a = pm_add_agg(p, f.holes[0].node, f.holes[0].kind, (int)col);
		if (a < 0)
			return false;
		p->out->cols[col].kind = PLAN_MCOL_AGG;
		p->out->cols[col].agg = (uint32_t)a;
		return make_expr_single(p, &p->out->cols[col].expr, (uint32_t)a);
	}
	if (f.column_outside)
		return refuse_ungrouped(p, "expressions mixing aggregates and values");
	struct plan_merge_expr e;

	if (!make_expr(p, &f, first, last, &e))
		return false;
	p->out->cols[col].kind = PLAN_MCOL_EXPR;	/* cols may have moved: index again */
	p->out->cols[col].expr = e;
	return true;
}

/* ---- the select list, ORDER BY, GROUP BY, HAVING, LIMIT ---- */

/* Output name of a select-list entry (alias, column or function name); NULL: none. */
static const char *
target_name(const cJSON *rt)
{
	const cJSON *val = jget(rt, "val"), *cr = jas(val, "ColumnRef"), *fc = jas(val, "FuncCall");
	const cJSON *fields = jget(cr, "fields");

	if (jstr(rt, "name"))
		return jstr(rt, "name");
	if (cr)
		return jsval(cJSON_GetArrayItem(fields, cJSON_GetArraySize(fields) - 1));
	return fc ? pb_last_name(jget(fc, "funcname")) : NULL;
}

/* True when select-list entry <rt> is * or t.* (its column count is the shard's). */
static bool
is_star(const cJSON *rt)
{
	const cJSON *fields = jget(jas(jget(rt, "val"), "ColumnRef"), "fields");

	return jas(cJSON_GetArrayItem(fields, cJSON_GetArraySize(fields) - 1), "A_Star") != NULL;
}

/* Index of the first * entry of the select list; n when none. */
static uint32_t
first_star(const cJSON *list, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (is_star(cJSON_GetArrayItem(list, (int)i)->child))
			return i;
	return n;
}

/* Tokens of a select-list entry without its alias. */
static uint32_t
target_expr_end(const struct pm *p, const cJSON *rt, struct pm_span sp)
{
	if (!jstr(rt, "name") || sp.last <= sp.first + 1)
		return sp.last;
	return pm_is(p, sp.last - 2, "as") ? sp.last - 2 : sp.last - 1;
}

/* Integer value of an A_Const node; false when it is not an integer constant. */
static bool
const_int(const cJSON *n, int64_t *v)
{
	const cJSON *c = jas(n, "A_Const"), *iv = jget(c, "ival");

	if (!iv)
		return false;
	*v = jint(iv, "ival", 0);
	return true;
}

/* Tokens of an ORDER BY item without ASC/DESC/NULLS FIRST|LAST. */
static uint32_t
sort_expr_end(const struct pm *p, struct pm_span sp)
{
	uint32_t e = sp.last;

	if (e >= sp.first + 3 && pm_is(p, e - 2, "nulls"))
		e -= 2;
	if (e >= sp.first + 2 && (pm_is(p, e - 1, "asc") || pm_is(p, e - 1, "desc")))
		e -= 1;
	return e;
}

static bool
same_text(struct pm *p, uint32_t a0, uint32_t a1, uint32_t b0, uint32_t b1)
{
	return strcmp(pm_text(p, a0, a1), pm_text(p, b0, b1)) == 0;
}

struct pm_targets {
	const cJSON *list;
	struct pm_span *spans;
	uint32_t n;
};

/* Column of ORDER BY item <sb> (SortBy body) written as <sp>; -1 with p->err. */
static int
sort_col(struct pm *p, const struct pm_targets *t, const cJSON *sb, struct pm_span sp,
	 bool set_op, bool *hidden)
{
	const cJSON *node = jget(sb, "node"), *cr = jas(node, "ColumnRef");
	uint32_t end = sort_expr_end(p, sp);
	int64_t pos;
	int col;

	uint32_t star = first_star(t->list, t->n);

	if (const_int(node, &pos)) {
		if (pos < 1 || (pos > t->n && star == t->n))
			return nk_error_set(p->err, ERRCODE_INVALID_COLUMN_REFERENCE,
					    "ORDER BY position %lld is not in "
					    "select list", (long long)pos), -1;
		return (int)pos - 1;
	}
	if (cr && cJSON_GetArraySize(jget(cr, "fields")) == 1) {
		const char *name = jsval(cJSON_GetArrayItem(jget(cr, "fields"), 0));

		for (uint32_t i = 0; name && i < star; i++)
			if (target_name(cJSON_GetArrayItem(t->list, (int)i)->child) &&
			    strcmp(target_name(cJSON_GetArrayItem(t->list, (int)i)->child), name) == 0)
				return (int)i;
	}
	for (uint32_t i = 0; t->spans && i < star; i++) {
		const cJSON *rt = cJSON_GetArrayItem(t->list, (int)i)->child;

		if (same_text(p, sp.first, end, t->spans[i].first, target_expr_end(p, rt, t->spans[i])))
			return (int)i;
	}
	if (set_op || p->out->distinct)
		return nk_error_set(p->err, ERRCODE_FEATURE_NOT_SUPPORTED,
				    "ORDER BY of this query must name an output "
				    "column to be merged across shards"), -1;
	if (star < t->n && cr && cJSON_GetArraySize(jget(cr, "fields")) == 1) {
		const char *name = jsval(cJSON_GetArrayItem(jget(cr, "fields"), 0));

		for (uint32_t i = star; name && i < t->n; i++)
			if (target_name(cJSON_GetArrayItem(t->list, (int)i)->child) &&
			    strcmp(target_name(cJSON_GetArrayItem(t->list, (int)i)->child), name) == 0)
				return nk_error_set(p->err, ERRCODE_FEATURE_NOT_SUPPORTED,
						    "ORDER BY of a column after * "
						    "across shards: use its position"), -1;
	}
	*hidden = true;
	col = pm_add_col(p, pm_text(p, sp.first, end));
	if (col >= 0 && !classify(p, (uint32_t)col, node, sp.first, end))
		return -1;
	return col;
}

static bool
byte_order_collation(const cJSON *node)
{
	const cJSON *cc = jas(node, "CollateClause");
	const char *name = pb_last_name(jget(cc, "collname"));

	return name && (strcmp(name, "C") == 0 || strcmp(name, "POSIX") == 0 ||
			strcmp(name, "ucs_basic") == 0);
}

static bool
build_sort(struct pm *p, const cJSON *sel, const struct pm_targets *t, bool set_op)
{
	const cJSON *list = jget(sel, "sortClause");
	uint32_t n = (uint32_t)cJSON_GetArraySize(list);
	struct pm_span sp[n ? n : 1];

	if (!n)
		return true;
	if (p->cl[PM_CL_ORDER] >= p->end_tok ||
	    pm_split(p, p->cl[PM_CL_ORDER] + 2, pm_clause_end(p, PM_CL_ORDER), sp, n) != n)
		return nk_error_set(p->err, ERRCODE_FEATURE_NOT_SUPPORTED,
				    "cannot locate the ORDER BY items");
	p->out->sort = rarena_alloc(p->a, n * sizeof(*p->out->sort));
	if (!p->out->sort)
		return oom(p);
	for (uint32_t i = 0; i < n; i++) {
		const cJSON *sb = jas(cJSON_GetArrayItem(list, (int)i), "SortBy");
		const char *dir = jstr(sb, "sortby_dir"), *nulls = jstr(sb, "sortby_nulls");
		struct plan_merge_sort *s = &p->out->sort[i];
		bool hidden = false;
		int col = sort_col(p, t, sb, sp[i], set_op, &hidden);

		if (col < 0)
			return false;
		if (dir && strcmp(dir, "SORTBY_USING") == 0)
			return nk_error_set(p->err, ERRCODE_FEATURE_NOT_SUPPORTED,
					    "ORDER BY ... USING is not merged "
					    "across shards");
		s->col = (uint32_t)col;
		s->desc = dir && strcmp(dir, "SORTBY_DESC") == 0;
		s->nulls_first = nulls && strcmp(nulls, "SORTBY_NULLS_FIRST") == 0 ? true
				 : nulls && strcmp(nulls, "SORTBY_NULLS_LAST") == 0 ? false
										: s->desc;
		s->byte_order = byte_order_collation(jget(sb, "node"));
		s->hidden = hidden;
	}
	p->out->nsort = n;
	return true;
}

/* True when tree <n> holds a column reference whose last name is <name>. */
static bool
names_column(const cJSON *n, const char *name)
{
	const cJSON *fields = jget(jas(n, "ColumnRef"), "fields");

	if (fields) {
		const char *last = jsval(cJSON_GetArrayItem(fields, cJSON_GetArraySize(fields) - 1));

		return last && strcmp(last, name) == 0;
	}
	for (const cJSON *c = n ? n->child : NULL; c; c = c->next)
		if (names_column(c, name))
			return true;
	return false;
}

/*
 * 1 + the select-list entry a GROUP BY name <node> names by its alias, 0 when none. Postgres
 * groups by the entry only when no input column has the name; one that does is certain when
 * the entry's own expression reads it (`lower(name) AS name ... GROUP BY name` groups by the
 * column), and then the name is the column. (Another input column of that name makes the
 * shards refuse the entry's expression as not grouped, unless it depends on that column.)
 */
static int64_t
output_name_pos(const struct pm_targets *t, const cJSON *node)
{
	const cJSON *fields = jget(jas(node, "ColumnRef"), "fields");
	const char *name = cJSON_GetArraySize(fields) == 1 ? jsval(cJSON_GetArrayItem(fields, 0))
							    : NULL;

	for (uint32_t i = 0; name && i < t->n; i++) {
		const cJSON *rt = cJSON_GetArrayItem(t->list, (int)i)->child;
		const char *alias = jstr(rt, "name");

		if (alias && strcmp(alias, name) == 0)
			return names_column(jget(rt, "val"), name) ? 0 : (int64_t)i + 1;
	}
	return 0;
}

/*
 * GROUP BY <pos> where the select list has no such entry: Postgres' 42P10, at the item (the
 * shards would read the position in the select list the merge extends, or group by the
 * constant). Characters from 1 in err->where, as a syntax error's.
 */
static bool
bad_group_position(struct pm *p, const cJSON *node, int64_t pos)
{
	int loc = jint(jas(node, "A_Const"), "location", -1);
	unsigned chars = 1;

	nk_error_set(p->err, ERRCODE_INVALID_COLUMN_REFERENCE,
		     "GROUP BY position %lld is not in select list",
		     (long long)pos);
	for (int i = 0; loc >= 0 && i < loc && p->sql[i]; i++)
		chars += ((unsigned char)p->sql[i] & 0xc0) != 0x80;
	if (loc >= 0)
		snprintf(p->err->where, sizeof(p->err->where), "%u", chars);
	return false;
}

/* The GROUP BY items, read before the select list is classified (its expressions over
 * aggregates may name them). */
static bool
read_groups(struct pm *p, const cJSON *sel, const struct pm_targets *t)
{
	const cJSON *list = jget(sel, "groupClause");
	uint32_t n = (uint32_t)cJSON_GetArraySize(list);
	struct pm_span sp[n ? n : 1];

	p->simple_groups = true;
	if (!n)
		return true;
	if (p->cl[PM_CL_GROUP] >= p->end_tok ||
	    pm_split(p, p->cl[PM_CL_GROUP] + 2, pm_clause_end(p, PM_CL_GROUP), sp, n) != n)
		return nk_error_set(p->err, ERRCODE_FEATURE_NOT_SUPPORTED,
				    "cannot locate the GROUP BY items");
	p->groups = rarena_alloc(p->a, n * sizeof(*p->groups));
	if (!p->groups)
		return oom(p);
	for (uint32_t i = 0; i < n; i++) {
		const cJSON *node = cJSON_GetArrayItem(list, (int)i);
		struct pm_group_item *g = &p->groups[i];
		int64_t pos;

		g->node = node;
		g->text = pm_text(p, sp[i].first, sp[i].last);
		g->copy = -1;
		if (const_int(node, &pos) &&
		    (pos < 1 || (pos > t->n && first_star(t->list, t->n) == t->n)))
			return bad_group_position(p, node, pos);
		if (!(const_int(node, &pos) && pos <= t->n))
			pos = output_name_pos(t, node);
		if (pos > 0) {
			const cJSON *rt = cJSON_GetArrayItem(t->list, (int)pos - 1)->child;

			g->node = jget(rt, "val");
			g->text = pm_text(p, t->spans[pos - 1].first,
					  target_expr_end(p, rt, t->spans[pos - 1]));
		}
		p->simple_groups &= jas(g->node, "ColumnRef") || jas(g->node, "FuncCall");
	}
	p->ngroups = n;
	return true;
}

static bool
build_group(struct pm *p, const cJSON *sel, uint32_t nvisible)
{
	const cJSON *list = jget(sel, "groupClause");
	uint32_t n = (uint32_t)cJSON_GetArraySize(list);

	if (!n)
		return true;
	p->out->grouped = true;
	p->out->group_cols = rarena_alloc(p->a, n * sizeof(*p->out->group_cols));
	if (!p->out->group_cols)
		return oom(p);
	for (uint32_t i = 0; i < n; i++) {
		const cJSON *node = cJSON_GetArrayItem(list, (int)i);
		int64_t pos;
		int col;

		if (jas(node, "GroupingSet"))
			return nk_error_nk013(p->err, 125);
		if (const_int(node, &pos) && pos >= 1 && pos <= nvisible)
			col = (int)pos - 1;
		else
			col = pm_add_col(p, p->groups[i].text);
		if (col < 0)
			return false;
		p->out->group_cols[i] = (uint32_t)col;
	}
	p->out->ngroup = n;
	return true;
}

/* HAVING: evaluated by the final SQL over the combined aggregates and the group's values;
 * the shards keep it as `HAVING (...) OR true` (checked by Postgres, filters nothing). */
static bool
build_having(struct pm *p, const cJSON *sel)
{
	const cJSON *h = jget(sel, "havingClause");
	struct pm_found f;

	if (!h)
		return true;
	memset(&f, 0, sizeof(f));
	find_aggs(p, h, &f);
	if (f.failed)
		return false;
	if (f.column_outside)
		return refuse_ungrouped(p, "HAVING conditions");
	p->out->grouped = true;
	p->out->has_having = true;
	return make_expr(p, &f, p->cl[PM_CL_HAVING] + 1, pm_clause_end(p, PM_CL_HAVING),
			 &p->out->having);
}

/* Column holding the text value of GROUP BY item <g> (a hidden copy of a visible one, whose
 * format is the client's). -1 on no memory. */
static int
group_value_col(struct pm *p, uint32_t g)
{
	uint32_t col = p->out->group_cols[g];

	if (col >= p->out->nvisible)
		return (int)col;
	if (p->groups[g].copy < 0)
		p->groups[g].copy = pm_add_col(p, p->groups[g].text);
	return p->groups[g].copy;
}

/* GROUP BY item holes of expression <ci> (a column; UINT32_MAX: HAVING) become columns. */
static bool
resolve_expr(struct pm *p, uint32_t ci)
{
	uint32_t n = ci == UINT32_MAX ? p->out->having.nagg : p->out->cols[ci].expr.nagg;

	for (uint32_t i = 0; i < n; i++) {
		struct plan_merge_expr *e = ci == UINT32_MAX ? &p->out->having
							     : &p->out->cols[ci].expr;
		int col;

		if (!(e->agg[i] & PM_HOLE_GROUP))
			continue;
		col = group_value_col(p, e->agg[i] & ~PM_HOLE_GROUP);
		if (col < 0)
			return false;
		e = ci == UINT32_MAX ? &p->out->having : &p->out->cols[ci].expr;	/* moved */
		e->agg[i] = PLAN_MERGE_HOLE_COL | (uint32_t)col;
	}
	return true;
}

static bool
resolve_groups(struct pm *p)
{
	uint32_t n = p->out->ncols;

	for (uint32_t c = 0; c < n; c++)
		if (p->out->cols[c].kind == PLAN_MCOL_EXPR && !resolve_expr(p, c))
			return false;
	return !p->out->has_having || resolve_expr(p, UINT32_MAX);
}

/* LIMIT/OFFSET value: an integer constant, a $n, or nothing (ALL / NULL). */
static bool
build_count(struct pm *p, const cJSON *n, struct plan_merge_count *c, const char *what)
{
	const cJSON *pr = jas(n, "ParamRef");
	int64_t v;

	if (!n || jbool(jas(n, "A_Const"), "isnull"))
		return true;
	c->present = true;
	if (const_int(n, &v)) {
		c->value = v;
		return true;
	}
	if (pr && jint(pr, "number", 0) > 0) {
		c->is_slot = true;
		c->slot = (uint32_t)jint(pr, "number", 0) - 1;
		return true;
	}
	return nk_error_set(p->err, ERRCODE_FEATURE_NOT_SUPPORTED,
			    "%s across shards must be a constant or a parameter",
			    what);
}

static bool
build_limits(struct pm *p, const cJSON *sel)
{
	const char *opt = jstr(sel, "limitOption");

	if (opt && strcmp(opt, "LIMIT_OPTION_WITH_TIES") == 0)
		return nk_error_nk013(p->err, 138);
	return build_count(p, jget(sel, "limitCount"), &p->out->limit, "LIMIT") &&
	       build_count(p, jget(sel, "limitOffset"), &p->out->offset, "OFFSET");
}

/* ---- the shard text ---- */

static uint32_t
tok_byte(const struct pm *p, uint32_t t)
{
	return t < p->ntoks ? p->toks[t].start : (uint32_t)strlen(p->sql);
}

static void
count_text(char *buf, size_t len, const struct plan_merge_count *c)
{
	if (c->is_slot)
		snprintf(buf, len, "$%u::int8", c->slot + 1);
	else
		snprintf(buf, len, "%lld", (long long)c->value);
}

/* `LIMIT offset+limit` for the shards ("" when there is no LIMIT). */
static const char *
pushed_limit(struct pm *p)
{
	const struct plan_merge_count *l = &p->out->limit, *o = &p->out->offset;
	char a[32], b[32], *s = rarena_alloc(p->a, 96);

	if (!s || !l->present)
		return s ? "" : NULL;
	count_text(a, sizeof(a), l);
	if (!o->present)
		snprintf(s, 96, "LIMIT %s ", a);
	else if (!l->is_slot && !o->is_slot)
		snprintf(s, 96, "LIMIT %lld ", (long long)(l->value + o->value));
	else {
		count_text(b, sizeof(b), o);
		snprintf(s, 96, "LIMIT (%s + %s) ", a, b);
	}
	return s;
}

/* Hidden column texts as ", a, b" to append to the select list. */
static const char *
hidden_text(struct pm *p)
{
	size_t len = 1;
	char *s;

	for (uint32_t i = 0; i < p->nhidden; i++)
		len += strlen(p->hidden[i]) + 2;
	s = rarena_alloc(p->a, len);
	if (!s)
		return NULL;
	for (uint32_t i = 0; i < p->nhidden; i++) {
		strcat(s, ", ");
		strcat(s, p->hidden[i]);
	}
	return s;
}

static bool
splice(struct pm *p, const struct pm_cut *cuts, uint32_t n)
{
	size_t len = strlen(p->sql) + 1, at = 0;
	char *s;

	for (uint32_t i = 0; i < n; i++)
		len += cuts[i].with ? strlen(cuts[i].with) : 0;
	s = rarena_alloc(p->a, len);
	if (!s)
		return oom(p);
	for (uint32_t i = 0; i < n; i++) {
		if (!cuts[i].with)
			return oom(p);
		if (cuts[i].from < at)
			return nk_error_set(p->err, ERRCODE_FEATURE_NOT_SUPPORTED,
					    "cannot rewrite this query for shards");
		strncat(s, p->sql + at, cuts[i].from - at);
		strcat(s, cuts[i].with);
		at = cuts[i].to;
	}
	strcat(s, p->sql + at);
	p->out->shard_sql = s;
	return true;
}

/* Region of clause <c> and, for LIMIT, OFFSET and FETCH together. */
static void
clause_cut(struct pm *p, int c, struct pm_cut *cut, const char *with)
{
	uint32_t first = p->cl[c], end = pm_clause_end(p, c);

	if (c == PM_CL_LIMIT) {
		for (int k = PM_CL_LIMIT; k <= PM_CL_FETCH; k++)
			first = p->cl[k] < first ? p->cl[k] : first;
		end = p->cl[PM_CL_FOR] < p->end_tok && p->cl[PM_CL_FOR] > first ? p->cl[PM_CL_FOR]
										 : p->end_tok;
	}
	cut->from = tok_byte(p, first);
	cut->to = tok_byte(p, end);
	cut->with = with;
}

static bool
has_limit_clause(const struct pm *p)
{
	return p->cl[PM_CL_LIMIT] < p->end_tok || p->cl[PM_CL_OFFSET] < p->end_tok ||
	       p->cl[PM_CL_FETCH] < p->end_tok;
}

/* `HAVING (...) OR true `: Postgres checks the condition, the planner drops it. */
static const char *
having_kept(struct pm *p)
{
	return pm_fmt(p, "HAVING (%s) OR true ", pm_text(p, p->cl[PM_CL_HAVING] + 1,
							 pm_clause_end(p, PM_CL_HAVING)));
}

static bool
shard_text(struct pm *p, uint32_t targets_end)
{
	struct pm_cut *cuts = rarena_alloc(p->a, (p->ncarriers + 4) * sizeof(*cuts));
	uint32_t n = 0;

	if (!cuts)
		return oom(p);
	for (uint32_t i = 0; i < p->ncarriers; i++)
		cuts[n++] = p->carriers[i];
	if (p->nhidden) {
		cuts[n].from = cuts[n].to = p->toks[targets_end - 1].end;
		cuts[n++].with = hidden_text(p);
	}
	if (p->out->grouped && p->cl[PM_CL_HAVING] < p->end_tok)
		clause_cut(p, PM_CL_HAVING, &cuts[n++], having_kept(p));
	if (p->out->grouped && p->cl[PM_CL_ORDER] < p->end_tok)
		clause_cut(p, PM_CL_ORDER, &cuts[n++], "");
	if (has_limit_clause(p))
		clause_cut(p, PM_CL_LIMIT, &cuts[n++], p->out->grouped ? "" : pushed_limit(p));
	return splice(p, cuts, n);
}

/* ---- statements ---- */

static bool
has_key(const cJSON *n, const char *key)
{
	for (const cJSON *c = n ? n->child : NULL; c; c = c->next)
		if ((c->string && strcmp(c->string, key) == 0) || has_key(c, key))
			return true;
	return false;
}

/*
 * UNION arms; the leftmost arm names the columns. <all> is the top operation's: a top UNION
 * removes duplicates of every arm (UNION ALL below it included); a top UNION ALL keeps them,
 * so a UNION below it (whose duplicates each shard removes only among its own rows) is
 * refused.
 */
/* 1 when tree <n> (sub-SELECTs aside) calls an aggregate, -1 with p->err, 0 otherwise. */
static int
calls_aggregate(struct pm *p, const cJSON *n)
{
	int k;

	if (!n || (cJSON_IsObject(n) && n->string && strcmp(n->string, "SubLink") == 0))
		return 0;
	if (cJSON_IsObject(n) && n->string && strcmp(n->string, "FuncCall") == 0 &&
	    (k = pm_agg_kind(p, n)) != 0)
		return k < 0 ? -1 : 1;
	for (const cJSON *c = n->child; c; c = c->next)
		if ((k = calls_aggregate(p, c)) != 0)
			return k;
	return 0;
}

/*
 * An arm (or a set operation under the top one) that each shard would answer for its own
 * rows only: aggregates, GROUP BY or HAVING (per-shard groups), LIMIT / OFFSET (per-shard
 * rows), DISTINCT under a top UNION ALL (per-shard duplicates). Refused: the shards' answers
 * could not be put together into one server's.
 */
static bool
arm_is_shard_local(struct pm *p, const cJSON *arm, int all)
{
	int k = calls_aggregate(p, jget(arm, "targetList"));

	if (k == 0)
		k = calls_aggregate(p, jget(arm, "havingClause"));
	if (k < 0)
		return false;
	if (k > 0 || jget(arm, "groupClause") || jget(arm, "havingClause") ||
	    jget(arm, "limitCount") || jget(arm, "limitOffset") ||
	    (all == 1 && jget(arm, "distinctClause")))
		return nk_error_set(p->err, ERRCODE_FEATURE_NOT_SUPPORTED,
				    "a UNION arm with aggregates, GROUP BY, "
				    "HAVING, LIMIT or OFFSET (or DISTINCT under UNION ALL) is not "
				    "merged across shards");
	return true;
}

static bool
set_op_arms(struct pm *p, const cJSON *sel, int *all, const cJSON **leftmost)
{
	const char *op = jstr(sel, "op");

	if (!op || strcmp(op, "SETOP_NONE") == 0) {
		*leftmost = *leftmost ? *leftmost : sel;
		return arm_is_shard_local(p, sel, *all);
	}
	if (*all >= 0 && (jget(sel, "limitCount") || jget(sel, "limitOffset")))
		return arm_is_shard_local(p, sel, *all);
	if (strcmp(op, "SETOP_UNION") != 0)
		return nk_error_nk013(p->err, 124);
	if (*all < 0)
		*all = jbool(sel, "all");
	else if (*all == 1 && !jbool(sel, "all"))
		return nk_error_set(p->err, ERRCODE_FEATURE_NOT_SUPPORTED,
				    "a UNION under a UNION ALL is not merged "
				    "across shards");
	return set_op_arms(p, jget(sel, "larg"), all, leftmost) &&
	       set_op_arms(p, jget(sel, "rarg"), all, leftmost);
}

static bool
build_set_op(struct pm *p, const cJSON *sel)
{
	const cJSON *left = NULL;
	int all = -1;
	struct pm_targets t;

	if (!set_op_arms(p, sel, &all, &left))
		return false;
	t.list = jget(left, "targetList");
	t.n = (uint32_t)cJSON_GetArraySize(t.list);
	t.spans = NULL;
	for (uint32_t i = 0; i < t.n; i++)
		if (pm_add_col(p, NULL) < 0)
			return false;
	p->out->nvisible = t.n;
	p->out->star = first_star(t.list, t.n) < t.n;
	p->out->distinct = !all;
	pm_clauses(p, 0, 0);
	for (int c = PM_CL_FROM; c <= PM_CL_WINDOW; c++)
		p->cl[c] = p->ntoks;
	if (!build_sort(p, sel, &t, true) || !build_limits(p, sel))
		return false;
	struct pm_cut cut;

	if (!has_limit_clause(p))
		return splice(p, NULL, 0);
	clause_cut(p, PM_CL_LIMIT, &cut, pushed_limit(p));
	return splice(p, &cut, 1);
}

/* First token of the select list, after SELECT [ALL | DISTINCT [ON (...)]]. */
static uint32_t
targets_start(struct pm *p)
{
	uint32_t t = 0;

	while (t < p->ntoks && !(p->toks[t].depth == 0 && pm_is(p, t, "select")))
		t++;
	t++;
	if (pm_is(p, t, "all"))
		return t + 1;
	if (!pm_is(p, t, "distinct"))
		return t;
	if (!pm_is(p, t + 1, "on"))
		return t + 1;
	for (t += 3; t < p->ntoks && !(pm_is(p, t, ")") && p->toks[t].depth == 0); t++)
		;
	return t + 1;
}

static bool
build_distinct(struct pm *p, const cJSON *sel)
{
	const cJSON *d = jget(sel, "distinctClause");
	int n = cJSON_GetArraySize(d);

	if (n == 0)
		return true;
	if (n == 1 && !cJSON_GetArrayItem(d, 0)->child) {
		p->out->distinct = true;
		return true;
	}
	p->out->distinct_on = (uint32_t)n;
	return true;
}

static bool
build_plain(struct pm *p, const cJSON *sel)
{
	struct pm_targets t;
	uint32_t first = targets_start(p), end = p->end_tok;

	t.list = jget(sel, "targetList");
	t.n = (uint32_t)cJSON_GetArraySize(t.list);
	if (!t.n)
		return nk_error_set(p->err, ERRCODE_FEATURE_NOT_SUPPORTED,
				    "this SELECT shape is not merged across shards");
	pm_clauses(p, first, 0);
	for (int c = 0; c < PM_CL_COUNT; c++)
		end = p->cl[c] < end ? p->cl[c] : end;
	t.spans = rarena_alloc(p->a, t.n * sizeof(*t.spans));
	if (!t.spans)
		return oom(p);
	if (pm_split(p, first, end, t.spans, t.n) != t.n)
		return nk_error_set(p->err, ERRCODE_FEATURE_NOT_SUPPORTED,
				    "cannot locate the select list items");
	for (uint32_t i = 0; i < t.n; i++)
		if (pm_add_col(p, NULL) < 0)
			return false;
	p->out->nvisible = t.n;
	if (!build_distinct(p, sel) || !read_groups(p, sel, &t))
		return false;
	for (uint32_t i = 0; i < t.n; i++) {
		const cJSON *rt = cJSON_GetArrayItem(t.list, (int)i)->child;

		if (!classify(p, i, jget(rt, "val"), t.spans[i].first,
			      target_expr_end(p, rt, t.spans[i])))
			return false;
	}
	if (!build_group(p, sel, t.n) || !build_having(p, sel) || !build_sort(p, sel, &t, false) ||
	    !build_limits(p, sel) || (p->out->grouped && !resolve_groups(p)))
		return false;
	p->out->star = first_star(t.list, t.n) < t.n;
	if (p->out->star && p->out->grouped)
		return nk_error_set(p->err, ERRCODE_FEATURE_NOT_SUPPORTED,
				    "SELECT * with aggregates or GROUP BY is not "
				    "merged across shards");
	if (p->out->distinct_on && (p->out->nsort < p->out->distinct_on || p->out->grouped))
		return nk_error_set(p->err, ERRCODE_FEATURE_NOT_SUPPORTED,
				    "DISTINCT ON across shards needs an ORDER BY "
				    "starting with its expressions");
	return shard_text(p, end);
}

static bool
build_select(struct pm *p, const cJSON *sel)
{
	const char *op = jstr(sel, "op");

	if (has_key(sel, "RangeTableSample"))
		return nk_error_nk013(p->err, 126);
	if (has_key(sel, "GroupingSet"))
		return nk_error_nk013(p->err, 125);
	p->end_tok = p->ntoks;
	for (uint32_t t = 0; t < p->ntoks; t++)
		if (pm_is(p, t, ";") && p->toks[t].depth == 0) {
			p->end_tok = t;
			break;
		}
	if (op && strcmp(op, "SETOP_NONE") != 0)
		return build_set_op(p, sel);
	return build_plain(p, sel);
}

/* plan_merge_build: see neki/plan_merge.h. */
bool
plan_merge_build(struct rarena *a, const char *sql, struct plan_merge *out, struct nk_error *err)
{
	struct pm p;
	PgQueryParseResult res;
	cJSON *tree = NULL;
	const cJSON *sel;
	bool ok = false;

	memset(out, 0, sizeof(*out));
	memset(&p, 0, sizeof(p));
	p.a = a;
	p.sql = sql;
	p.out = out;
	p.err = err;
	res = pg_query_parse(sql);
	if (res.error) {
		nk_error_set(err, ERRCODE_SYNTAX_ERROR, "%s", res.error->message);
	} else if (!(tree = cJSON_Parse(res.parse_tree)) || !pm_scan(&p)) {
		oom(&p);
	} else {
		sel = jas(jget(cJSON_GetArrayItem(jget(tree, "stmts"), 0), "stmt"), "SelectStmt");
		ok = sel ? build_select(&p, sel)
			 : nk_error_set(err, ERRCODE_FEATURE_NOT_SUPPORTED,
					"only SELECT results are merged across shards");
	}
	cJSON_Delete(tree);
	pg_query_free_parse_result(res);
	return ok;
}

/* Value of one LIMIT/OFFSET of this execution; -1 when NULL. */
static bool
bind_count(const struct plan_merge_count *c, const struct plan_input *in, int64_t *v,
	   struct nk_error *err)
{
	char buf[32];
	const char *text = NULL;

	if (!c->is_slot) {
		*v = c->value;
		return true;
	}
	if (c->slot < in->nparams) {
		const struct plan_param *pp = &in->params[c->slot];

		if (pp->len < 0) {
			*v = -1;
			return true;
		}
		if (pp->binary && (pp->len == 8 || pp->len == 4 || pp->len == 2)) {
			uint64_t u = 0;

			for (int32_t i = 0; i < pp->len; i++)
				u = u << 8 | pp->data[i];
			if (pp->len < 8 && (pp->data[0] & 0x80))
				u |= ~(uint64_t)0 << (pp->len * 8);
			*v = (int64_t)u;
			return true;
		}
		if (!pp->binary && (size_t)pp->len < sizeof(buf)) {
			memcpy(buf, pp->data, (size_t)pp->len);
			buf[pp->len] = '\0';
			text = buf;
		}
	} else if (in->norm && c->slot - in->nparams < in->norm->nlits) {
		text = in->norm->lits[c->slot - in->nparams].value;
	}
	char *end;

	if (!text || (*v = strtoll(text, &end, 10), *end != '\0'))
		return nk_error_set(err, ERRCODE_INVALID_TEXT_REPRESENTATION,
				    "invalid LIMIT or OFFSET value");
	return true;
}

/* plan_merge_bind: see neki/plan_merge.h. */
bool
plan_merge_bind(const struct plan_merge *m, const struct plan_input *in, int64_t *limit,
		int64_t *offset, struct nk_error *err)
{
	*limit = -1;
	*offset = 0;
	if (m->limit.present && !bind_count(&m->limit, in, limit, err))
		return false;
	if (m->offset.present && !bind_count(&m->offset, in, offset, err))
		return false;
	if (*offset < 0)
		*offset = 0;
	if (*limit < -1 || (m->offset.present && !m->offset.is_slot && m->offset.value < 0))
		return nk_error_set(err, ERRCODE_INVALID_ROW_COUNT_IN_LIMIT_CLAUSE,
				    "LIMIT must not be negative");
	return true;
}
