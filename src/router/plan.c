/*
 * plan.c - route SELECT, UPDATE, DELETE and MERGE (spec 3.3): resolve every table of the
 * statement in the topology image, turn the shard-key predicates of each table's scope into
 * a set of key ranges (AND narrows, OR widens, anything else leaves all ranges), join tables
 * that are co-located (same group, equivalent index, equality on the shard keys) into one
 * component, then decide (plan_decide.c): one shard, a shard set, every shard of the group,
 * an unsharded group's shard, a reference table's copy, or NK013 113 for tables that cannot
 * meet on one shard. Entry: plan_build(); INSERT is in plan_insert.c, utility in
 * plan_util.c.
 */
#include "neki/base.h"

#include "neki/plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_int.h"

/* ---- shard-key expression text, in parse_expr.c's canonical form ---- */

static void
render_kx(const struct ks_expr *e, uint32_t n, char *buf, size_t cap)
{
	static const char *const names[] = { "lower", "upper" };
	static const char ops[] = "+-*/";
	const struct ks_expr_node *nd = &e->nodes[n];
	char a[PLAN_RENDER_MAX], b[PLAN_RENDER_MAX];

	if (nd->op == KS_OP_COLUMN) {	/* (the common shard key: no buffers, no format) */
		size_t len = strlen(e->columns[nd->ival]);

		if (cap > 0) {
			len = len < cap - 1 ? len : cap - 1;
			memcpy(buf, e->columns[nd->ival], len);
			buf[len] = '\0';
		}
		return;
	}
	a[0] = b[0] = '\0';
	if (nd->a >= 0)
		render_kx(e, (uint32_t)nd->a, a, sizeof(a));
	if (nd->b >= 0)
		render_kx(e, (uint32_t)nd->b, b, sizeof(b));
	switch (nd->op) {
	case KS_OP_COLUMN:
		snprintf(buf, cap, "%s", e->columns[nd->ival]);
		break;
	case KS_OP_CONST_INT:
		snprintf(buf, cap, "%lld", (long long)nd->ival);
		break;
	case KS_OP_LOWER:
	case KS_OP_UPPER:
		snprintf(buf, cap, "%s(%s)", names[nd->op - KS_OP_LOWER], a);
		break;
	case KS_OP_LEFT:
		snprintf(buf, cap, "left(%s,%s)", a, b);
		break;
	case KS_OP_ADD:
	case KS_OP_SUB:
	case KS_OP_MUL:
	case KS_OP_DIV:
		snprintf(buf, cap, "(%s%c%s)", a, ops[nd->op - KS_OP_ADD], b);
		break;
	case KS_OP_CAST_INT2:
	case KS_OP_CAST_INT4:
	case KS_OP_CAST_INT8:
		snprintf(buf, cap, "(%s)::int%d", a,
			 nd->op == KS_OP_CAST_INT2 ? 2 : nd->op == KS_OP_CAST_INT4 ? 4 : 8);
		break;
	default:
		snprintf(buf, cap, "(%s)::text", a);
		break;
	}
}

/* ---- resolution ---- */

#define VIEW_DEPTH_MAX 8

/*
 * View or materialized view <schema>.<name>: whether its query reads a sharded table
 * (through views, <depth> levels down), and the resolution of its first base relation.
 */
static bool
view_reads_sharded(struct pctx *c, const char *schema, const char *name, int depth,
		   struct topo_img_rel *first, bool *have_first)
{
	const struct plan_catalog *cat = c->in->cat;
	const char *bs, *bn;
	struct topo_img_rel res;

	for (uint32_t i = 0; depth < VIEW_DEPTH_MAX && cat->view_base(cat->arg, schema, name, i, &bs,
								    &bn); i++) {
		char k = cat->relkind ? cat->relkind(cat->arg, bs, bn) : 'r';

		if ((k == 'v' || k == 'm') &&
		    view_reads_sharded(c, bs, bn, depth + 1, first, have_first))
			return true;
		if (k == 'v' || k == 'm')
			continue;
		topo_image_resolve_table(c->img, c->in->sess->db, bs, bn, &res);
		if (res.kind == TOPO_REL_TABLE && res.index != TOPO_IMG_NONE)
			return true;
		if (!*have_first && res.kind != TOPO_REL_UNROUTABLE) {
			*first = res;
			*have_first = true;
		}
	}
	return false;
}

/*
 * Relation kinds the catalog knows: sequences and indexes (137), views and materialized
 * views over sharded tables (122, 123; over other tables they route as their first base
 * table), inheritance parents read without ONLY (21).
 */
static bool
check_relkind(struct pctx *c, struct prel *p, bool *routed)
{
	const struct plan_catalog *cat = c->in->cat;
	char k = cat->relkind(cat->arg, p->schema, p->r->name);
	bool have_first = false;

	*routed = false;
	if (k == 'S' || k == 'i' || k == 'I')
		return nk_error_nk013(c->err, 137);
	if ((k == 'v' || k == 'm') && cat->view_base) {
		if (view_reads_sharded(c, p->schema, p->r->name, 0, &p->res, &have_first))
			return nk_error_nk013(c->err, k == 'v' ? 122 : 123);
		*routed = have_first;
	}
	if (k == 'r' && !p->r->only && cat->inh_children &&
	    cat->inh_children(cat->arg, p->schema, p->r->name) > 0)
		return nk_error_nk013(c->err, 21);
	return true;
}

/* plan_view_of_sharded: see plan_int.h. */
bool
plan_view_of_sharded(struct pctx *c, const struct prel *p)
{
	const struct plan_catalog *cat = c->in->cat;
	char k = cat && cat->relkind ? cat->relkind(cat->arg, p->schema, p->r->name) : 0;
	struct topo_img_rel first;
	bool have_first = false;

	return (k == 'v' || k == 'm') && cat->view_base &&
	       view_reads_sharded(c, p->schema, p->r->name, 0, &first, &have_first);
}

/* A sharded rel without a typed key: is its table missing from the catalog (plan_input)? */
static void
note_unknown(struct pctx *c, const struct prel *p)
{
	const struct plan_catalog *cat = c->in->cat;
	struct plan_unknown *u = c->in->unknown;

	if (u == NULL || u->table != NULL || c->s->kind == STMT_DDL || !cat || !cat->relkind ||
	    cat->relkind(cat->arg, p->schema, p->r->name) != 0)
		return;
	u->schema = p->schema;
	u->table = p->r->name;
}

static bool
resolve_one(struct pctx *c, const struct stmt_rel *r, struct prel *p)
{
	const struct plan_catalog *cat = c->in->cat;
	bool routed = false;
	uint32_t oid;

	p->r = r;
	p->schema = r->schema ? r->schema : c->in->sess->schema;
	if (strcmp(p->schema, "pg_temp") == 0)
		return nk_error_nk013(c->err, 338);
	if (cat && cat->relkind && c->s->kind != STMT_COPY && c->s->kind != STMT_DDL &&
	    !check_relkind(c, p, &routed))
		return false;
	if (!routed)
		topo_image_resolve_table(c->img, c->in->sess->db, p->schema, r->name, &p->res);
	p->sharded = p->res.kind == TOPO_REL_TABLE && p->res.index != TOPO_IMG_NONE;
	if (!p->sharded)
		return true;
	p->expr = topo_image_index_expr(c->img, p->res.index);
	p->key_col = p->expr->columns[0];
	render_kx(p->expr, p->expr->nnodes - 1, p->key_text, sizeof(p->key_text));
	oid = cat && cat->column_type ? cat->column_type(cat->arg, p->schema, r->name, p->key_col)
				      : 0;
	p->typed = oid && ks_type_from_oid(oid, &p->col_type);
	if (!p->typed)
		note_unknown(c, p);
	return true;
}

/* plan_resolve_rels: see plan_int.h. CTE references are not tables. */
bool
plan_resolve_rels(struct pctx *c)
{
	c->rels = rarena_alloc(c->a, (c->s->nrels + 1) * sizeof(*c->rels));
	c->rel_of = rarena_alloc(c->a, (c->s->nrels + 1) * sizeof(*c->rel_of));
	if (!c->rels || !c->rel_of)
		return nk_error_oom(c->err);
	for (uint32_t i = 0; i < c->s->nrels; i++) {
		c->rel_of[i] = -1;
		if (c->s->rels[i].is_cte_ref || !c->s->rels[i].name)
			continue;
		if (!resolve_one(c, &c->s->rels[i], &c->rels[c->nrels]))
			return false;
		c->rels[c->nrels].comp = c->nrels;
		c->rels[c->nrels].att = -1;
		c->rel_of[i] = (int32_t)c->nrels;
		c->nrels++;
	}
	return true;
}

/* ---- column references ---- */

static bool
scope_visible(const struct stmt *s, uint16_t from, uint16_t target)
{
	for (uint32_t guard = 0; guard <= s->nscopes; guard++) {
		if (from == target)
			return true;
		if (from == 0 || from >= s->nscopes)
			return false;
		from = s->scopes[from].parent;
	}
	return false;
}

static bool
has_column(struct pctx *c, const struct prel *p, const char *col)
{
	const struct plan_catalog *cat = c->in->cat;

	return cat && cat->column_type &&
	       cat->column_type(cat->arg, p->schema, p->r->name, col) != 0;
}

/* plan_resolve_col: see plan_int.h. */
int
plan_resolve_col(struct pctx *c, uint16_t scope, const char *qual, const char *col)
{
	int best = -1, nfound = 0, nscope = 0, only = -1;
	uint16_t best_depth = 0;

	for (uint32_t i = 0; i < c->nrels; i++) {
		const struct prel *p = &c->rels[i];
		bool named = qual && (p->r->alias ? strcmp(p->r->alias, qual) == 0
						  : strcmp(p->r->name, qual) == 0);

		if (!scope_visible(c->s, scope, p->r->scope))
			continue;
		if (p->r->scope == scope) {
			nscope++;
			only = (int)i;
		}
		if (qual ? !named : !has_column(c, p, col))
			continue;
		if (best < 0 || p->r->scope >= best_depth) {
			if (best >= 0 && p->r->scope == best_depth)
				nfound++;
			else
				nfound = 1;
			best = (int)i;
			best_depth = p->r->scope;
		}
	}
	if (nfound == 1)
		return best;
	/* unqualified and the catalog cannot tell: the only table of the scope */
	return !qual && nfound == 0 && nscope == 1 ? only : -1;
}

/* ---- values ---- */

/* Text or binary of slot <slot>: a bound parameter or a normalised literal. */
static bool
slot_raw(struct pctx *c, uint32_t slot, const char **data, int32_t *len, bool *binary,
	 uint32_t *oid)
{
	const struct parse_norm *n = c->in->norm;
	uint32_t nparams = n ? n->nparams : c->in->nparams;

	c->nslot_reads++;
	*binary = false;
	*oid = 0;
	if (n && slot >= nparams && slot - nparams < n->nlits) {
		*data = n->lits[slot - nparams].value;
		*len = (int32_t)strlen(*data);
		return true;
	}
	if (slot >= c->in->nparams)
		return nk_error_set(c->err, ERRCODE_PROTOCOL_VIOLATION,
				    "there is no parameter $%u", slot + 1);
	*data = (const char *)c->in->params[slot].data;
	*len = c->in->params[slot].len;
	*binary = c->in->params[slot].binary;
	*oid = c->in->params[slot].type_oid;
	return true;
}

static bool
record_value(struct pctx *c, const char *text, int32_t len, bool binary)
{
	const char **v;

	if (c->out->nvalues == c->vcap) {
		uint32_t cap = c->vcap ? c->vcap * 2 : 4;
		const char **nv = rarena_alloc(c->a, cap * sizeof(*nv));

		if (!nv)
			return nk_error_oom(c->err);
		if (c->out->nvalues)
			memcpy(nv, c->out->values, c->out->nvalues * sizeof(*nv));
		c->out->values = nv;
		c->vcap = cap;
	}
	v = &c->out->values[c->out->nvalues++];
	*v = binary ? "(binary)" : rarena_strndup(c->a, text, (size_t)len);
	return *v != NULL || nk_error_oom(c->err);
}

/*
 * <v>'s value did not parse as the router's type: false. When it is a bound parameter the plan
 * says so (plan.bad_param): Postgres refuses such a value at Bind, before the statement runs.
 */
static bool
bad_value(struct pctx *c, const struct stmt_value *v)
{
	const struct parse_norm *n = c->in->norm;

	if (v->kind == STMT_V_SLOT && v->slot < (n ? n->nparams : c->in->nparams))
		c->out->bad_param = true;
	return false;
}

/* Parse one raw value as <type> (a binary integer keeps its declared width). */
static bool
raw_to_ks(struct pctx *c, enum ks_type type, const char *data, int32_t len, bool binary,
	  uint32_t oid, bool negate, struct ks_value *out)
{
	enum ks_type declared;
	char *neg;

	if (binary) {
		if (oid && ks_type_from_oid(oid, &declared) && ks_type_is_integer(declared) &&
		    ks_type_is_integer(type))
			type = declared;
		return ks_value_from_binary(type, (const uint8_t *)data, (size_t)len, out, c->err);
	}
	if (!negate)
		return ks_value_from_text(type, data, (size_t)len, &c->in->sess->text_ctx, out,
					  c->err);
	neg = rarena_alloc(c->a, (size_t)len + 2);
	if (!neg)
		return nk_error_oom(c->err);
	if (data[0] == '-') {
		memcpy(neg, data + 1, (size_t)len - 1);
		len--;
	} else {
		neg[0] = '-';
		memcpy(neg + 1, data, (size_t)len);
		len++;
	}
	return ks_value_from_text(type, neg, (size_t)len, &c->in->sess->text_ctx, out, c->err);
}

/* plan_value_int: see plan_int.h. */
bool
plan_value_int(struct pctx *c, const struct stmt_value *v, enum ks_type type, int64_t *out,
	       bool *is_null)
{
	const char *data = v->text;
	int32_t len = v->text ? (int32_t)strlen(v->text) : 0;
	bool binary = false;
	uint32_t oid = 0;
	struct ks_value val;

	*is_null = v->kind == STMT_V_NULL;
	if (*is_null)
		return true;
	if (v->kind == STMT_V_SLOT && !slot_raw(c, v->slot, &data, &len, &binary, &oid))
		return false;
	if (len < 0 || !data) {
		*is_null = true;
		return true;
	}
	if (!raw_to_ks(c, type, data, len, binary, oid, v->negate, &val))
		return bad_value(c, v);
	*out = val.i;
	ks_value_cleanup(&val);
	return true;
}

/* plan_value_text: see plan_int.h. */
bool
plan_value_text(struct pctx *c, const struct stmt_value *v, const char **out, bool *is_null)
{
	int32_t len = v->text ? (int32_t)strlen(v->text) : 0;
	bool binary = false;
	uint32_t oid = 0;

	*out = v->text;
	*is_null = v->kind == STMT_V_NULL;
	if (*is_null || v->kind != STMT_V_SLOT)
		return true;
	if (!slot_raw(c, v->slot, out, &len, &binary, &oid))
		return false;
	*is_null = len < 0 || !*out;
	if (*is_null)
		return true;
	if (binary && plan_binary_text(c, oid, *out, len, out))
		return true;
	if (binary)
		return nk_error_is_set(c->err) ? false :
		       nk_error_set(c->err, ERRCODE_FEATURE_NOT_SUPPORTED,
				    "this argument cannot be read by the router "
				    "in binary format");
	return (*out = rarena_strndup(c->a, *out, (size_t)len)) != NULL ||
	       nk_error_oom(c->err);
}

/* plan_value_range: see plan_int.h. */
bool
plan_value_range(struct pctx *c, const struct prel *p, const struct stmt_value *v, bool direct,
		 uint32_t *range, bool *is_null)
{
	const char *data = v->text;
	int32_t len = v->text ? (int32_t)strlen(v->text) : 0;
	bool binary = false, ok;
	uint32_t oid = 0;
	enum ks_type type = p->col_type;
	struct ks_value col, key;

	c->nkey_values++;
	c->key_value = v;
	c->key_rel = p;
	c->key_direct = direct;
	*is_null = v->kind == STMT_V_NULL;
	if (*is_null)
		return true;
	if (plan_multi_key(p))
		return nk_error_nk013(c->err, 10);	/* one value cannot route it (V3) */
	if (!p->typed)
		return nk_error_set(c->err, ERRCODE_UNDEFINED_OBJECT,
				    "type of shard-key column \"%s\" of table \"%s\" is unknown",
				    p->key_col, p->r->name);
	if (v->kind == STMT_V_SLOT && !slot_raw(c, v->slot, &data, &len, &binary, &oid))
		return false;
	if (len < 0 || !data) {
		*is_null = true;
		return true;
	}
	if (direct && !ks_expr_is_column(p->expr) &&
	    !ks_expr_result_type(p->expr, &p->col_type, &type, c->err))
		return false;
	if (!raw_to_ks(c, type, data, len, binary, oid, v->negate, &col))
		return bad_value(c, v);
	if (direct || ks_expr_is_column(p->expr)) {
		ok = topo_image_route(c->img, p->res.group, p->res.index, &col, range, c->err);
	} else {
		ok = ks_expr_eval(p->expr, &col, &key, c->err) &&
		     topo_image_route(c->img, p->res.group, p->res.index, &key, range, c->err);
		if (ok)
			ks_value_cleanup(&key);
	}
	ks_value_cleanup(&col);
	return ok && record_value(c, data, len, binary);
}

/* ---- routing sets ---- */

static uint32_t
nranges(const struct pctx *c, const struct prel *p)
{
	return topo_image_group_range_count(c->img, p->res.group);
}

static uint8_t *
bits_new(struct pctx *c, const struct prel *p)
{
	uint8_t *b = rarena_alloc(c->a, nranges(c, p) + 1);

	if (!b)
		nk_error_oom(c->err);
	return b;
}

/* Does <pred> (in <scope>) constrain <p>'s shard key? *direct: it names the expression. */
static bool
pred_matches(struct pctx *c, uint32_t pi, uint16_t scope, const struct stmt_pred *pred,
	     bool *direct)
{
	const struct prel *p = &c->rels[pi];

	if (!p->sharded || plan_multi_key(p) || strcmp(pred->column, p->key_col) != 0)
		return false;
	if (pred->lhs_is_expr && strcmp(pred->lhs, p->key_text) != 0)
		return false;
	if (plan_resolve_col(c, scope, pred->qual, pred->column) != (int)pi)
		return false;
	*direct = pred->lhs_is_expr;
	return true;
}

/* A normalised number literal (not a string, not a parameter). */
static bool
is_number_literal(const struct pctx *c, const struct stmt_value *v)
{
	const struct parse_norm *n = c->in->norm;

	return v->kind == STMT_V_SLOT && !v->is_param && n && v->slot >= n->nparams &&
	       v->slot - n->nparams < n->nlits && !n->lits[v->slot - n->nparams].quoted;
}

static bool
pred_set(struct pctx *c, uint32_t pi, uint16_t scope, const struct stmt_pred *pred,
	 struct rset *out)
{
	const struct prel *p = &c->rels[pi];
	bool direct, is_null;
	uint32_t range;

	out->all = true;
	out->bits = NULL;
	if (!pred_matches(c, pi, scope, pred, &direct))
		return true;
	if (pred->op == STMT_P_ANY_PARAM)
		return nk_error_nk013(c->err, 115);
	out->bits = bits_new(c, p);
	if (!out->bits)
		return false;
	out->all = false;
	for (uint32_t i = 0; i < pred->nvals; i++) {
		if (!plan_value_range(c, p, &pred->vals[i], direct, &range, &is_null)) {
			if (!is_number_literal(c, &pred->vals[i]))
				return false;
			/* `int_col = 1.5`: Postgres compares as numeric and finds nothing; no
			 * routing value, so leave every range (the shards answer) */
			nk_error_clear(c->err);
			out->all = true;
			out->bits = NULL;
			return true;
		}
		if (!is_null)
			out->bits[range] = 1;
	}
	return true;
}

static bool cond_set(struct pctx *c, uint32_t pi, uint16_t scope, const struct stmt_cond *cd,
		     struct rset *out);

/* The base columns of multi-column key <p> that `=` conjuncts of <cd> bind (bit k:
 * p->expr->columns[k]). */
static uint32_t
eq_bound(struct pctx *c, uint32_t pi, uint16_t scope, const struct stmt_cond *cd)
{
	const struct prel *p = &c->rels[pi];
	const struct stmt_pred *pred = cd->pred;
	uint32_t bound = 0;

	if (cd->kind == STMT_C_PRED && pred->op == STMT_P_EQ && !pred->lhs_is_expr &&
	    plan_resolve_col(c, scope, pred->qual, pred->column) == (int)pi) {
		for (uint32_t k = 0; k < p->expr->ncolumns; k++)
			if (strcmp(pred->column, p->expr->columns[k]) == 0)
				bound |= 1u << k;
	}
	for (uint32_t i = 0; cd->kind == STMT_C_AND && i < cd->nargs; i++)
		bound |= eq_bound(c, pi, scope, cd->args[i]);
	return bound;
}

/*
 * A table sharded by an expression over several columns (spec 2.5 V3) is scattered: no
 * single value routes it. A conjunction binding every base column with `=` would need the
 * expression evaluated over several values: 115.
 */
static bool
multi_key_set(struct pctx *c, uint32_t pi, uint16_t scope, const struct stmt_cond *cd,
	      struct rset *out)
{
	uint32_t all = (1u << c->rels[pi].expr->ncolumns) - 1;

	out->all = true;
	out->bits = NULL;
	if (!cd || (cd->kind != STMT_C_AND && cd->kind != STMT_C_OR))
		return true;
	if (cd->kind == STMT_C_AND && eq_bound(c, pi, scope, cd) == all)
		return nk_error_nk013(c->err, 115);
	for (uint32_t i = 0; i < cd->nargs; i++)
		if (!multi_key_set(c, pi, scope, cd->args[i], out))
			return false;
	return true;
}

static void
rset_and(const struct pctx *c, const struct prel *p, struct rset *acc, const struct rset *x)
{
	uint32_t n = nranges(c, p);
	bool any = false;

	if (x->all)
		return;
	if (acc->all) {
		*acc = *x;
		return;
	}
	for (uint32_t i = 0; i < n; i++)
		any = any || (acc->bits[i] && x->bits[i]);
	if (!any)
		return;		/* contradiction: keep a non-empty superset */
	for (uint32_t i = 0; i < n; i++)
		acc->bits[i] = acc->bits[i] && x->bits[i];
}

static bool
cond_set(struct pctx *c, uint32_t pi, uint16_t scope, const struct stmt_cond *cd,
	 struct rset *out)
{
	const struct prel *p = &c->rels[pi];
	struct rset sub;

	if (plan_multi_key(p))
		return multi_key_set(c, pi, scope, cd, out);
	out->all = true;
	out->bits = NULL;
	if (!cd || cd->kind == STMT_C_OTHER)
		return true;
	if (cd->kind == STMT_C_PRED)
		return pred_set(c, pi, scope, cd->pred, out);
	if (cd->kind == STMT_C_AND) {
		for (uint32_t i = 0; i < cd->nargs; i++) {
			if (!cond_set(c, pi, scope, cd->args[i], &sub))
				return false;
			rset_and(c, p, out, &sub);
		}
		return true;
	}
	out->all = false;
	out->bits = bits_new(c, p);
	if (!out->bits)
		return false;
	for (uint32_t i = 0; i < cd->nargs; i++) {
		if (!cond_set(c, pi, scope, cd->args[i], &sub))
			return false;
		if (sub.all) {
			out->all = true;
			out->bits = NULL;
			return true;
		}
		for (uint32_t k = 0; k < nranges(c, p); k++)
			out->bits[k] = out->bits[k] || sub.bits[k];
	}
	return true;
}

/* ---- co-location ----
 *
 * Two kinds of links between sharded rels that give equal keys the same shard:
 * - within one scope, an equality of their key columns that holds for every row the two
 *   meet in (a WHERE conjunct, or a join's ON conjunct between its two sides or restricting
 *   both): they form one component whose routing set is the intersection of theirs;
 * - a correlation, `inner.key = outer.key` in a subquery's WHERE (or an ON conjunct
 *   restricting the inner rel), or `outer.key IN (SELECT inner.key ...)`: for each outer
 *   row the inner rows it sees live on the outer row's shard, so the inner component is
 *   attached to the outer one (prel.att at its root): it runs wherever that one does and
 *   its own predicates narrow nothing outside its subquery. A subquery's restriction
 *   never narrows the outer query (under NOT EXISTS or in a select list it must not).
 */

/* plan_comp: see plan_int.h. */
uint32_t
plan_comp(struct pctx *c, uint32_t i)
{
	while (c->rels[i].comp != i)
		i = c->rels[i].comp = c->rels[c->rels[i].comp].comp;
	return i;
}

static bool
same_type_class(enum ks_type a, enum ks_type b)
{
	return a == b || (ks_type_is_integer(a) && ks_type_is_integer(b)) ||
	       (ks_type_is_text(a) && ks_type_is_text(b) && a != KS_TYPE_ENUM &&
		b != KS_TYPE_ENUM);
}

/* plan_colocated: see plan_int.h. Same group, and indexes that give equal keys the same
 * routing value. */
bool
plan_colocated(const struct pctx *c, const struct prel *a, const struct prel *b)
{
	if (!a->sharded || !b->sharded || a->res.group != b->res.group)
		return false;
	if (a->res.index == b->res.index)
		return true;
	return topo_image_index_type(c->img, a->res.index) ==
		       topo_image_index_type(c->img, b->res.index) &&
	       topo_image_index_modulus(c->img, a->res.index) ==
		       topo_image_index_modulus(c->img, b->res.index) &&
	       ks_expr_is_column(a->expr) && ks_expr_is_column(b->expr) && a->typed &&
	       b->typed && same_type_class(a->col_type, b->col_type);
}

/* plan_is_key_col: see plan_int.h. */
bool
plan_is_key_col(const struct pctx *c, int i, const char *col)
{
	return i >= 0 && c->rels[i].sharded && !plan_multi_key(&c->rels[i]) &&
	       strcmp(c->rels[i].key_col, col) == 0;
}

/* plan_multi_key: see plan_int.h. */
bool
plan_multi_key(const struct prel *p)
{
	return p->sharded && p->expr->ncolumns > 1;
}

/* plan_is_key_base: see plan_int.h. */
bool
plan_is_key_base(const struct prel *p, const char *col)
{
	for (uint32_t k = 0; p->sharded && k < p->expr->ncolumns; k++)
		if (strcmp(p->expr->columns[k], col) == 0)
			return true;
	return false;
}

/* Model index of rels[i]. */
static uint32_t
model_index(const struct pctx *c, uint32_t i)
{
	return (uint32_t)(c->rels[i].r - c->s->rels);
}

static bool
node_holds(const struct stmt_node *nd, uint32_t mi)
{
	return nd && mi >= nd->rel_lo && mi < nd->rel_hi;
}

static const struct stmt_node *
node_at(const struct pctx *c, int32_t n)
{
	return n >= 0 && (uint32_t)n < c->s->nnodes ? &c->s->nodes[n] : NULL;
}

/* Does join equality <e> hold for every row of rels[i] that takes part (its rows meet the
 * rest only where it holds)? A WHERE conjunct, an inner join's ON, an outer join's ON for
 * its nullable side; a FULL join's ON restricts neither side. */
static bool
eq_restricts(const struct pctx *c, const struct stmt_join_eq *e, uint32_t i)
{
	const struct stmt_node *j = node_at(c, e->node);
	uint32_t mi = model_index(c, i);

	if (e->node < 0)
		return true;
	if (!j)
		return false;
	switch (j->join) {
	case STMT_J_INNER:
		return node_holds(j, mi);
	case STMT_J_LEFT:
		return node_holds(node_at(c, j->right), mi);
	case STMT_J_RIGHT:
		return node_holds(node_at(c, j->left), mi);
	default:
		return false;
	}
}

/* <e> is the join condition of its node between rels[l] and rels[r] (one on each side). */
static bool
eq_across(const struct pctx *c, const struct stmt_join_eq *e, uint32_t l, uint32_t r)
{
	const struct stmt_node *j = node_at(c, e->node), *a, *b;
	uint32_t ml = model_index(c, l), mr = model_index(c, r);

	if (!j)
		return false;
	a = node_at(c, j->left);
	b = node_at(c, j->right);
	return (node_holds(a, ml) && node_holds(b, mr)) || (node_holds(a, mr) && node_holds(b, ml));
}

/* Attach rels[inner]'s component to rels[outer] (the first link found is kept). */
static void
attach(struct pctx *c, uint32_t inner, uint32_t outer, bool in)
{
	struct prel *root = &c->rels[plan_comp(c, inner)];

	if (root->att < 0) {
		root->att = (int32_t)outer;
		root->att_in = in;
	}
}

/* A key equality <e> between co-located rels[l] and rels[r]: a link, or nothing. */
static void
link_eq(struct pctx *c, const struct stmt_join_eq *e, uint32_t l, uint32_t r, bool attaching)
{
	uint16_t sl = c->rels[l].r->scope, sr = c->rels[r].r->scope;

	if (!attaching && sl == e->scope && sr == e->scope) {
		if (eq_across(c, e, l, r) || (eq_restricts(c, e, l) && eq_restricts(c, e, r)))
			c->rels[plan_comp(c, l)].comp = plan_comp(c, r);
	} else if (attaching && sl == e->scope && sr != e->scope && eq_restricts(c, e, l)) {
		attach(c, l, r, false);
	} else if (attaching && sr == e->scope && sl != e->scope && eq_restricts(c, e, r)) {
		attach(c, r, l, false);
	}
}

/* `outer.key IN (SELECT inner.key ...)` of SUBLINK scope <sc>: for a key that is not NULL
 * the answer is the same on its shard as over every row. Neither side may come from the
 * nullable side of an outer join: `NULL NOT IN (<empty>)` is true, against any other set
 * NULL, so a shard without rows would answer otherwise. */
static void
link_in(struct pctx *c, uint16_t sc)
{
	const struct stmt_scope *s = &c->s->scopes[sc];
	int o, i;

	if (!(s->flags & STMT_SCF_IN) || !s->test.col || !s->out.col)
		return;
	o = plan_resolve_col(c, s->parent, s->test.qual, s->test.col);
	i = plan_resolve_col(c, sc, s->out.qual, s->out.col);
	if (o < 0 || i < 0 || c->rels[i].r->scope != sc || c->rels[i].r->outer_join ||
	    c->rels[o].r->outer_join ||
	    !plan_is_key_col(c, o, s->test.col) ||
	    !plan_is_key_col(c, i, s->out.col) || !plan_colocated(c, &c->rels[o], &c->rels[i]) ||
	    !ks_expr_is_column(c->rels[o].expr) || !ks_expr_is_column(c->rels[i].expr))
		return;
	attach(c, (uint32_t)i, (uint32_t)o, true);
}

/* Unions first (within scopes), then the attachments of each component. */
static void
join_components(struct pctx *c)
{
	for (int pass = 0; pass < 2; pass++) {
		for (uint32_t j = 0; j < c->s->njoins; j++) {
			const struct stmt_join_eq *e = &c->s->joins[j];
			int l = plan_resolve_col(c, e->scope, e->lqual, e->lcol);
			int r = plan_resolve_col(c, e->scope, e->rqual, e->rcol);

			if (l < 0 || r < 0 || l == r ||
			    !plan_colocated(c, &c->rels[l], &c->rels[r]) ||
			    strcmp(e->lcol, c->rels[l].key_col) != 0 ||
			    strcmp(e->rcol, c->rels[r].key_col) != 0 ||
			    !ks_expr_is_column(c->rels[l].expr))
				continue;
			link_eq(c, e, (uint32_t)l, (uint32_t)r, pass == 1);
		}
	}
	for (uint16_t sc = 1; sc < c->s->nscopes; sc++)
		link_in(c, sc);
}

/* Every member of rels[i]'s component lies in node <nd>'s subtree. */
static bool
comp_within(struct pctx *c, uint32_t i, const struct stmt_node *nd)
{
	uint32_t root = plan_comp(c, i);

	for (uint32_t k = 0; k < c->nrels; k++)
		if (c->rels[k].sharded && plan_comp(c, k) == root &&
		    !node_holds(nd, model_index(c, k)))
			return false;
	return true;
}

/*
 * An ON clause restricts the rels that take part only through that join: the nullable side
 * of LEFT / RIGHT (`g LEFT JOIN t ON t.key = 5`: only t's rows with key 5 ever join), both
 * sides of an inner join. When a whole component lies there, its set narrows.
 */
static bool
on_restrictions(struct pctx *c)
{
	struct rset set;

	for (uint32_t n = 0; n < c->s->nnodes; n++) {
		const struct stmt_node *j = &c->s->nodes[n];
		const struct stmt_node *side = j->join == STMT_J_LEFT ? node_at(c, j->right) :
					       j->join == STMT_J_RIGHT ? node_at(c, j->left) : j;

		if (j->kind != STMT_N_JOIN || !j->on || j->join == STMT_J_FULL || !side)
			continue;
		for (uint32_t i = 0; i < c->nrels; i++) {
			struct prel *p = &c->rels[i], *root = &c->rels[plan_comp(c, i)];
			struct rset acc = { root->bits == NULL, root->bits };

			if (!p->sharded || p->r->scope != j->scope ||
			    !node_holds(side, model_index(c, i)))
				continue;
			if (!cond_set(c, i, j->scope, j->on, &set))
				return false;
			if (set.all || !comp_within(c, i, side))
				continue;
			rset_and(c, p, &acc, &set);
			root->bits = acc.all ? NULL : acc.bits;
		}
	}
	return true;
}

/* plan_route_rels: see plan_int.h. Each sharded rel's set, then its component's. */
bool
plan_route_rels(struct pctx *c)
{
	struct rset set;

	for (uint32_t i = 0; i < c->nrels; i++) {
		struct prel *p = &c->rels[i];
		uint16_t sc = p->r->scope;

		p->att = -1;
		if (!p->sharded)
			continue;
		if (!cond_set(c, i, sc, sc < c->s->nscopes ? c->s->scopes[sc].where : NULL, &set))
			return false;
		p->bits = set.all ? NULL : set.bits;
		p->where_key = !set.all;
	}
	join_components(c);
	for (uint32_t i = 0; i < c->nrels; i++) {
		struct prel *p = &c->rels[i], *root = &c->rels[plan_comp(c, i)];
		struct rset acc = { root->bits == NULL, root->bits }, x = { p->bits == NULL, p->bits };

		if (!p->sharded || root == p)
			continue;
		rset_and(c, p, &acc, &x);
		root->bits = acc.all ? NULL : acc.bits;
	}
	return on_restrictions(c);
}

/*
 * A call of a user-defined aggregate (the catalog's; a name that is also a built-in
 * aggregate's is taken for that one, as the merge does): the router has no combine for it
 * and the parser took it for a plain function, so across shards it is 212.
 */
static bool
check_user_aggs(struct pctx *c)
{
	const struct plan_catalog *cat = c->in->cat;

	for (uint32_t i = 0; cat && cat->is_aggregate && i < c->s->nfuncs; i++)
		if (!stmt_builtin_aggregate(c->s->funcs[i]) &&
		    cat->is_aggregate(cat->arg, c->s->funcs[i]))
			return nk_error_nk013(c->err, 212) || plan_gather(c, 0);
	return true;
}

/*
 * Shapes the router would have to process itself when a statement runs on several shards
 * (spec 4.2; a statement forwarded unchanged to one shard is exempt, as Neki's direct-shard
 * statements): the first one found, in table order.
 */
static bool
check_multi_shard_shape(struct pctx *c)
{
	static const struct {
		uint32_t shape;
		int code;
		bool select_only;
	} shapes[] = {
		{ STMT_SH_SET_SUBQUERY, 100, false }, { STMT_SH_CHAINED_CTE, 105, false },
		{ STMT_SH_GROUP_ROUTER_ONLY, 107, true }, { STMT_SH_ORDER_SUBQUERY, 108, true },
		{ STMT_SH_ROW_ALL, 109, false }, { STMT_SH_LATERAL_VALUES, 111, false },
		{ STMT_SH_ORDER_SRF, 140, true }, { STMT_SH_SUB_SETOP, 151, false },
		{ STMT_SH_VALUES_SUBQUERY, 152, false }, { STMT_SH_ARRAY_SUBQUERY, 153, false },
		{ STMT_SH_SLICE_SET, 67, false }, { STMT_SH_MERGE_DERIVED, 121, false },
		{ STMT_SH_OUTER_AGG, 135, false },
	};

	if (c->out->nshards <= 1 || c->out->kind == PLAN_EVERY_COPY)
		return true;
	if (!check_user_aggs(c))
		return false;
	for (size_t i = 0; i < NK_ARRAY_LEN(shapes); i++)
		if ((c->s->shape & shapes[i].shape) &&
		    (!shapes[i].select_only || c->s->kind == STMT_SELECT))
			return nk_error_nk013(c->err, shapes[i].code);
	return true;
}

/* plan_top_column_rel: see plan_int.h. */
const struct prel *
plan_top_column_rel(struct pctx *c, const struct stmt_colref *ref)
{
	int i = plan_resolve_col(c, 0, ref->qual, ref->col);

	for (uint32_t k = 0; i < 0 && k < c->nrels; k++) {
		uint16_t sc = c->rels[k].r->scope;

		if (sc != 0 && sc < c->s->nscopes && c->s->scopes[sc].parent == 0 &&
		    c->s->scopes[sc].kind == STMT_SC_FROM && has_column(c, &c->rels[k], ref->col))
			i = (int)k;
	}
	return i >= 0 && !c->rels[i].r->is_cte_ref && c->rels[i].schema ? &c->rels[i] : NULL;
}

/* Checks of multi-shard SELECT shapes (spec 3.3 "Rejected multi-shard shapes"). */
static bool
check_multi_shard(struct pctx *c)
{
	uint32_t f = c->s->flags;

	if (!check_multi_shard_shape(c))
		return false;
	if (c->out->nshards <= 1 || c->s->kind != STMT_SELECT)
		return true;
	if (f & STMT_F_INTERSECT)
		return nk_error_nk013(c->err, 124);
	if (f & STMT_F_GROUPING_SETS)
		return nk_error_nk013(c->err, 125);
	if (f & STMT_F_SAMPLE)
		return nk_error_nk013(c->err, 126);
	if (f & STMT_F_WITH_TIES)
		return nk_error_nk013(c->err, 138);
	if ((f & STMT_F_WINDOW) && (f & STMT_F_AGG))
		return nk_error_nk013(c->err, 149) || plan_gather(c, 0);
	if (c->s->gather_agg != NULL && stmt_aggregate_class(c->s->gather_agg) > STMT_AGG_COMBINED)
		return plan_refuse_aggregate(c->err, c->s->gather_agg) || plan_gather(c, 0);
	if (c->s->gather_agg != NULL)	/* (aggregate syntax on an unknown name) */
		return nk_error_nk013(c->err, 212) || plan_gather(c, 0);
	if (c->s->shape & STMT_SH_AGG_SRF)
		return nk_error_set(c->err, ERRCODE_FEATURE_NOT_SUPPORTED,
				    "set-returning function in the select list of "
				    "an aggregate query is unavailable across shards");
	return plan_check_gather_types(c);
}

/* A table of the FROM / USING list of an UPDATE / DELETE (top scope, not the target). */
static bool
has_dml_source(const struct pctx *c)
{
	if (c->s->kind != STMT_UPDATE && c->s->kind != STMT_DELETE)
		return false;
	for (uint32_t i = 0; i < c->nrels; i++)
		if (!c->rels[i].r->is_target && c->rels[i].r->scope == 0 && !c->rels[i].r->is_cte_ref)
			return true;
	return false;
}

/* plan_refuse_join: see plan_int.h. */
bool
plan_refuse_join(struct pctx *c)
{
	if (c->s->shape & STMT_SH_MERGE_DERIVED)
		return nk_error_nk013(c->err, 121);
	return nk_error_nk013(c->err, has_dml_source(c) ? 103 : 113);
}

/*
 * UPDATE / DELETE / MERGE shape checks on a sharded target: assigning the shard key, or a
 * column a global secondary index declares or keeps in its lookup rows unless it is an
 * indexed column of an enabled one (145; plan_gsi.c moves those lookup rows); MERGE inserting into a table keyed over several columns (10,
 * as INSERT). The rest of what an enabled GSI needs: plan_gsi.c.
 */
static bool
check_dml(struct pctx *c)
{
	const struct prel *t = c->nrels ? &c->rels[0] : NULL;

	if (c->s->flags & STMT_F_CURRENT_OF)
		return nk_error_nk013(c->err, 128);
	if (!t || !t->r->is_target || !t->sharded)
		return true;
	for (uint32_t i = 0; i < c->s->nset_cols; i++)
		if (c->s->set_cols[i] && (plan_is_key_base(t, c->s->set_cols[i]) ||
					  (plan_owner_gsi(c, t, c->s->set_cols[i]) &&
					   !plan_gsi_assignable(c, t, c->s->set_cols[i]))))
			return nk_error_nk013(c->err, 145);
	if (c->s->nmerge_inserts > 0 && plan_multi_key(t))
		return nk_error_nk013(c->err, 10);	/* MERGE ... INSERT: as INSERT (V3) */
	return true;
}

static bool
plan_dml(struct pctx *c)
{
	if (c->s->flags & STMT_F_INTO)
		return nk_error_nk013(c->err, 1);
	if (!plan_resolve_rels(c) || !plan_gsi_refuse_lookups(c))
		return false;
	if (c->s->kind == STMT_INSERT)
		return plan_insert(c) && plan_calls(c) && check_multi_shard_shape(c) &&
		       plan_check_dist(c) && plan_nextvals(c) && plan_gsi(c);
	if (!check_dml(c) || !plan_route_rels(c) || !plan_decide(c) || !plan_calls(c))
		return false;
	return check_multi_shard(c) && plan_check_dist(c) && plan_nextvals(c) && plan_gsi(c);
}

static bool
plan_direct(struct pctx *c)
{
	static const char *const router_only[] = { "current_setting", "set_config", "nextval",
						   "setval" };

	for (size_t i = 0; i < NK_ARRAY_LEN(router_only); i++)
		if (stmt_calls(c->s, router_only[i]))
			return nk_error_set(c->err, ERRCODE_FEATURE_NOT_SUPPORTED,
					    "%s() is unavailable while __neki.shard is set",
					    router_only[i]);
	plan_set_single(c, c->in->sess->shard, PLAN_OP_DIRECT);
	return plan_calls(c);
}

/* plan_build_memo: see plan.h. */
bool
plan_build_memo(struct rarena *a, const struct stmt *s, const struct plan_input *in,
		struct plan_memo *memo, struct plan *out, struct nk_error *err)
{
	struct pctx c;
	bool dml = s->kind == STMT_SELECT || s->kind == STMT_INSERT || s->kind == STMT_UPDATE ||
		   s->kind == STMT_DELETE || s->kind == STMT_MERGE;
	bool ok;

	memset(out, 0, sizeof(*out));
	nk_error_clear(err);	/* the checks below test nk_error_is_set() */
	memset(&c, 0, sizeof(c));
	c.a = a;
	c.s = s;
	c.in = in;
	c.img = in->topo;
	c.err = err;
	c.out = out;
	out->stmt = s;
	out->merge = s->flags;
	out->query = in->norm ? in->norm->key : s->sql;
	if (memo && plan_memo_replay(&c, memo, &ok))
		return ok;
	if (s->reject)
		return nk_error_nk013(err, s->reject);
	if (s->flags & STMT_F_LO_CALL)
		return nk_error_nk013(err, 306);
	if ((s->shape & STMT_SH_ADVISORY_SESSION) && (s->shape & STMT_SH_ADVISORY_XACT))
		return nk_error_nk013(err, 61);
	if (dml && in->sess->shard[0])
		ok = plan_direct(&c);
	else if (dml)
		ok = plan_dml(&c);
	else
		ok = plan_utility(&c);
	if (ok && memo)
		plan_memo_record(&c, memo);
	return ok && plan_check_session(&c);
}

/* plan_build: see plan.h. */
bool
plan_build(struct rarena *a, const struct stmt *s, const struct plan_input *in,
	   struct plan *out, struct nk_error *err)
{
	return plan_build_memo(a, s, in, NULL, out, err);
}
