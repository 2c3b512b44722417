/*
 * plan_dist.c - does a plan over several shards give what one server holding every row
 * would? Each shard runs the statement unchanged on its own rows and the merge step combines
 * the top level's results (ORDER BY, LIMIT, aggregates, GROUP BY, DISTINCT, UNION). That is
 * right only when every row of the top level's FROM comes from exactly one shard, and every
 * subquery sees on each shard all the rows it would see on one server. Entry:
 * plan_check_dist(), after plan_decide().
 *
 * Each scope's FROM is classified bottom-up (struct dist): NONE, the same rows on every
 * shard (reference tables, VALUES, functions, CTEs over those); EXACT, rows of a component
 * attached to an outer row (plan.c: the subquery sees, on the outer row's shard, every row
 * it would see anywhere); PART, rows partitioned over the shards (a sharded table, joins
 * co-located on the shard key, with NONE tables on the preserved side of outer joins).
 * Refused, before anything is sent:
 * - a sharded table on the nullable side of an outer join whose preserved side is not
 *   co-located (every shard would return the preserved rows): 113; FULL joins 112 / 63;
 * - a subquery over sharded rows in an expression, not correlated on the shard key (EXISTS,
 *   NOT EXISTS, IN, scalar, ...) and not `key IN (SELECT key ...)`: each shard would see a
 *   part of its rows (0A000);
 * - LIMIT/OFFSET, aggregates not grouped by the shard key, DISTINCT without it, window
 *   functions not partitioned by it (106) and UNION in a subquery over partitioned rows;
 *   a UNION ALL arm without sharded rows; WITH RECURSIVE over sharded rows;
 * - a statement whose FROM reads no sharded rows (each shard would return the same rows);
 * - an INSERT in WITH (each shard would insert the rows); on any number of shards, a write
 *   to a reference table reading a sharded table, and a data-modifying WITH on a reference
 *   table (the copies would diverge);
 * - on any number of shards, a MERGE INSERT into a sharded table whose shard key is not the
 *   co-located source's key (or a value routing to the one shard the MERGE runs on): the
 *   row would be written on the source row's shard whatever its key (121).
 * A refusal for a part of a subquery in an expression or of a WITH query names that scope
 * in plan.materialize: the executor evaluates it first when it is not correlated
 * (route_subq.c) and plans the statement again over its rows. A level that needs every row
 * in one place (windows off the key, aggregates without a combine, keys of types the merge
 * cannot order: plan_gather(), plan_check_gather_types()) names what to read first.
 */
#include "neki/base.h"

#include <string.h>

#include "plan_int.h"

enum dist_kind {
	DIST_NONE = 0,		/* the same rows on every shard */
	DIST_EXACT,		/* rows of components attached to an outer row */
	DIST_PART,		/* each row on exactly one shard */
};

struct dist {
	enum dist_kind kind;
	uint32_t comp;		/* PART: the component (a rel's root; >= nrels: derived) */
	int32_t rel;		/* PART: a sharded rel it reads (for messages); -1 */
};

struct dctx {
	struct pctx *c;
	uint32_t fresh;		/* next derived component id */
	uint8_t *busy;		/* per scope: being classified (a recursive CTE reference) */
};

/* ---- refusals ---- */

static const char *
rel_name(const struct pctx *c, int32_t rel)
{
	return rel >= 0 ? c->rels[rel].r->name : "?";
}

/* A sharded rel read in scope <sc> or below it, for messages; -1 if none. */
static int32_t
rel_below(const struct pctx *c, uint16_t sc)
{
	for (uint32_t i = 0; i < c->nrels; i++) {
		uint16_t s = c->rels[i].r->scope;

		for (uint32_t guard = 0; c->rels[i].sharded && guard <= c->s->nscopes; guard++) {
			if (s == sc)
				return (int32_t)i;
			if (s == 0 || s >= c->s->nscopes)
				break;
			s = c->s->scopes[s].parent;
		}
	}
	return -1;
}

/* A correlated subquery <sc> (or one with nothing to evaluate) is refused: its sharded rows
 * may be read through the router first, a derived table inside it (plan.materialize) or a
 * plain table (plan.broadcast, which the next round reads as a derived table). */
static void
name_inner_rows(struct pctx *c, uint16_t sc)
{
	for (uint32_t i = 0; i < c->nrels && c->out->materialize == 0; i++) {
		uint16_t s = c->rels[i].r->scope;

		if (!c->rels[i].sharded || !plan_within(c, s, sc))
			continue;
		if (s != sc && c->s->scopes[s].kind == STMT_SC_FROM &&
		    !plan_reads_outer(c, s) && c->s->scopes[s].loc >= 0 && !plan_scope_gathers(c, s))
			c->out->materialize = s;
		else
			plan_broadcast(c, (int32_t)i);
	}
}

/* plan_gather: see plan_int.h. */
bool
plan_gather(struct pctx *c, uint16_t sc)
{
	if (c->s->kind == STMT_SELECT)
		name_inner_rows(c, sc);
	return false;
}

/* The top level's GROUP BY, DISTINCT and ORDER BY columns over several shards: one of a
 * type the merge cannot order (jsonb, a composite or other user-defined type, an array of
 * enums) has its rows read first and ordered by a shard (plan_gather()). */
static bool
check_key_types(struct pctx *c)
{
	const struct plan_catalog *cat = c->in->cat;
	const struct stmt_scope *s = c->s->nscopes ? &c->s->scopes[0] : NULL;
	const struct stmt_colref *lists[3] = { s ? s->group : NULL, s ? s->distinct : NULL,
					      s ? s->order : NULL };
	uint32_t counts[3] = { s ? s->ngroup : 0, s ? s->ndistinct : 0, s ? s->norder : 0 };

	for (int l = 0; cat && cat->merges_type && cat->column_type && l < 3; l++)
		for (uint32_t k = 0; k < counts[l]; k++) {
			const struct prel *p = plan_top_column_rel(c, &lists[l][k]);
			uint32_t oid = p ? cat->column_type(cat->arg, p->schema, p->r->name,
							    lists[l][k].col) : 0;

			if (oid != 0 && !cat->merges_type(cat->arg, oid))
				return nk_error_set(c->err, ERRCODE_FEATURE_NOT_SUPPORTED,
						    "merging values of type %u across shards is "
						    "not supported", oid) || plan_gather(c, 0);
		}
	return true;
}

/* stddev / variance of a real or double precision column over several shards: the shards'
 * float states cannot be combined (merge_agg.c), so its rows are read first and one shard
 * aggregates them (plan_gather()). */
static bool
check_float_variance(struct pctx *c)
{
	const struct plan_catalog *cat = c->in->cat;
	const struct prel *p = c->s->float_arg.col ? plan_top_column_rel(c, &c->s->float_arg) : NULL;
	uint32_t oid = p && cat && cat->column_type ? cat->column_type(cat->arg, p->schema,
								       p->r->name,
								       c->s->float_arg.col) : 0;

	if (oid == 700 || oid == 701)	/* float4, float8 */
		return plan_refuse_float_variance(c->err) || plan_gather(c, 0);
	return true;
}

/* plan_check_gather_types: see plan_int.h. */
bool
plan_check_gather_types(struct pctx *c)
{
	return check_key_types(c) && check_float_variance(c);
}

/* Scope <sc> (not the top) is refused: if it reads nothing of its outer query, the router
 * may evaluate it (or the innermost evaluable scope holding it) first and put its rows in
 * its place (plan.materialize, route_subq.c), else its tables' rows (name_inner_rows()). */
static void
name_rows(struct pctx *c, uint16_t sc)
{
	if (!plan_reads_outer(c, sc))
		c->out->materialize = plan_evaluable_of(c, sc);
	if (c->out->materialize == 0 && sc != 0)
		name_inner_rows(c, sc);
}

/* The subquery of <sc> is refused (inner subqueries are classified first: <sc> is the
 * innermost one refused): name_rows(). */
static bool
refuse_subquery(struct pctx *c, uint16_t sc)
{
	name_rows(c, sc);
	nk_error_set(c->err, ERRCODE_FEATURE_NOT_SUPPORTED,
		     "subquery over sharded table \"%s\" is not joined to its "
		     "outer query by the shard key", rel_name(c, rel_below(c, sc)));
	nk_error_detail(c->err, "The statement runs on several shards; each would see only its "
			"own rows of the subquery.");
	nk_error_hint(c->err, "Correlate the subquery on the shard key, or run it as a "
		      "statement of its own.");
	return false;
}

/* <what> of a subquery over the partitioned rows of <rel> cannot be applied per shard. */
static bool
refuse_op(struct pctx *c, const char *what, int32_t rel)
{
	const char *key = rel >= 0 ? c->rels[rel].key_col : "?";

	nk_error_set(c->err, ERRCODE_FEATURE_NOT_SUPPORTED,
		     "%s in a subquery over sharded table \"%s\" cannot be "
		     "applied across shards", what, rel_name(c, rel));
	nk_error_detail(c->err, "Each shard would apply it to its own rows only.");
	nk_error_hint(c->err, "Group by (or select DISTINCT on) the shard key \"%s\" in the "
		      "subquery, move the clause to the outer query, or pin the statement to one "
		      "shard.", key);
	return false;
}

static bool
refuse_none_arm(struct pctx *c)
{
	nk_error_set(c->err, ERRCODE_FEATURE_NOT_SUPPORTED,
		     "UNION ALL arm without a sharded table cannot be combined "
		     "with arms over several shards");
	nk_error_detail(c->err, "Every shard would return the rows of that arm.");
	nk_error_hint(c->err, "Use UNION, or run that arm as a statement of its own.");
	return false;
}

static bool
refuse_no_from(struct pctx *c)
{
	nk_error_set(c->err, ERRCODE_FEATURE_NOT_SUPPORTED,
		     "statement over several shards reads no sharded table in "
		     "its FROM clause");
	nk_error_detail(c->err, "Every shard would return the same rows.");
	return false;
}

/* The clauses of scope <sc> are refused: the executor may evaluate the subquery or WITH
 * query holding them first (plan.materialize). Returns <d>'s planner context. */
static struct pctx *
at_scope(struct dctx *d, uint16_t sc)
{
	name_rows(d->c, sc);
	return d->c;
}

/* Partitioned rows of <a> and <b> cannot meet: NK013 <code> (113, 63, 112); the rows of one
 * read in a subquery or WITH query may be evaluated first (the innermost), else <b>'s table
 * (plan.broadcast: the nullable side of an outer join). */
static bool
refuse_meet(struct dctx *d, const struct dist *a, const struct dist *b, int code)
{
	uint16_t ea = a->rel >= 0 ? plan_evaluable_of(d->c, d->c->rels[a->rel].r->scope) : 0;
	uint16_t eb = b->rel >= 0 ? plan_evaluable_of(d->c, d->c->rels[b->rel].r->scope) : 0;

	d->c->out->materialize = ea > eb ? ea : eb;
	plan_broadcast(d->c, b->rel);
	return nk_error_nk013(d->c->err, code);
}

/* ---- classification ---- */

static bool scope_dist(struct dctx *d, uint16_t sc, bool dedup, struct dist *out);

static enum dist_kind
kmax(enum dist_kind a, enum dist_kind b)
{
	return a > b ? a : b;
}

/* Inner (and cross) join of <a> and <b>: partitioned rows only from one component. */
static bool
join_inner(struct dctx *d, const struct dist *a, const struct dist *b, struct dist *out)
{
	if (a->kind == DIST_PART && b->kind == DIST_PART && a->comp != b->comp)
		return refuse_meet(d, a, b, 113);
	*out = a->kind >= b->kind ? *a : *b;
	return true;
}

static bool node_dist(struct dctx *d, int32_t n, struct dist *out);

/* A sharded rel of <nd>'s subtree (in its scope) whose WHERE key predicate rejects the
 * rows where the subtree is NULL-extended: the outer join is an inner one for that side,
 * as Postgres reduces it. */
static bool
null_rejected(const struct dctx *d, int32_t n)
{
	const struct stmt_node *nd;

	if (n < 0 || (uint32_t)n >= d->c->s->nnodes)
		return false;
	nd = &d->c->s->nodes[n];
	for (uint32_t mi = nd->rel_lo; mi < nd->rel_hi; mi++) {
		int32_t pi = d->c->rel_of[mi];

		if (pi >= 0 && d->c->rels[pi].r->scope == nd->scope && d->c->rels[pi].where_key)
			return true;
	}
	return false;
}

/* An outer join: the nullable side's partitioned rows must meet a co-located preserved
 * side, else every shard returns the preserved rows it cannot match. */
static bool
join_dist(struct dctx *d, const struct stmt_node *j, struct dist *out)
{
	struct dist l, r;
	const struct dist *keep = &l, *null = &r;
	bool lrej = null_rejected(d, j->left), rrej = null_rejected(d, j->right);
	enum stmt_join_kind kind = j->join;

	if (!node_dist(d, j->left, &l) || !node_dist(d, j->right, &r))
		return false;
	if ((kind == STMT_J_LEFT && rrej) || (kind == STMT_J_RIGHT && lrej) ||
	    (kind == STMT_J_FULL && lrej && rrej))
		kind = STMT_J_INNER;
	else if (kind == STMT_J_FULL && (lrej || rrej))
		kind = lrej ? STMT_J_LEFT : STMT_J_RIGHT;
	if (kind == STMT_J_INNER)
		return join_inner(d, &l, &r, out);
	if (kind == STMT_J_FULL) {
		if ((l.kind == DIST_PART || r.kind == DIST_PART) &&
		    !(l.kind == DIST_PART && r.kind == DIST_PART && l.comp == r.comp))
			return refuse_meet(d, &l, &r, j->on_eq ? 63 : 112);
		return join_inner(d, &l, &r, out);
	}
	if (kind == STMT_J_RIGHT) {
		keep = &r;
		null = &l;
	}
	if (null->kind == DIST_PART && !(keep->kind == DIST_PART && keep->comp == null->comp))
		return refuse_meet(d, keep, null, 113);
	*out = *keep;
	out->kind = kmax(keep->kind, null->kind);
	return true;
}

/* A CTE reference or a derived table: its rows cannot be co-located with others (the
 * router does not see through its columns), so partitioned rows get a component of
 * their own. */
static bool
derived_dist(struct dctx *d, uint16_t sc, struct dist *out)
{
	if (!scope_dist(d, sc, false, out))
		return false;
	if (out->kind == DIST_PART)
		out->comp = d->c->nrels + d->fresh++;
	return true;
}

static bool
rel_dist(struct dctx *d, uint32_t mi, struct dist *out)
{
	const struct stmt_rel *r = &d->c->s->rels[mi];
	int32_t pi = d->c->rel_of[mi];
	uint32_t root;

	memset(out, 0, sizeof(*out));
	out->rel = -1;
	if (r->is_cte_ref)
		return r->cte_scope == 0 || derived_dist(d, r->cte_scope, out);
	if (pi < 0 || !d->c->rels[pi].sharded)
		return true;
	root = plan_comp(d->c, (uint32_t)pi);
	out->rel = pi;
	out->comp = root;
	out->kind = d->c->rels[root].att >= 0 && !d->c->rels[root].att_in ? DIST_EXACT :
		    DIST_PART;
	return true;
}

static bool
node_dist(struct dctx *d, int32_t n, struct dist *out)
{
	const struct stmt_node *nd;

	memset(out, 0, sizeof(*out));
	out->rel = -1;
	if (n < 0 || (uint32_t)n >= d->c->s->nnodes)
		return true;
	nd = &d->c->s->nodes[n];
	switch (nd->kind) {
	case STMT_N_REL:
		return rel_dist(d, nd->ref, out);
	case STMT_N_SCOPE:
		return derived_dist(d, (uint16_t)nd->ref, out);
	case STMT_N_JOIN:
		return join_dist(d, nd, out);
	default:
		return true;	/* a function: its argument subqueries are the scope's */
	}
}

/* The column <ref> of scope <sc> is the shard key of a rel of component <comp> there, not
 * on the nullable side of an outer join (its NULLs would come from every shard). */
static bool
is_comp_key(struct dctx *d, uint16_t sc, const struct stmt_colref *ref, uint32_t comp)
{
	int i = plan_resolve_col(d->c, sc, ref->qual, ref->col);

	return i >= 0 && d->c->rels[i].r->scope == sc && !d->c->rels[i].r->outer_join &&
	       plan_comp(d->c, (uint32_t)i) == comp && plan_is_key_col(d->c, i, ref->col);
}

static bool
any_comp_key(struct dctx *d, uint16_t sc, const struct stmt_colref *refs, uint32_t n,
	     uint32_t comp)
{
	for (uint32_t i = 0; i < n; i++)
		if (is_comp_key(d, sc, &refs[i], comp))
			return true;
	return false;
}

/*
 * The clauses of non-top scope <sc> over partitioned rows <from>: each shard applies them to
 * its rows, which is right only when the rows they combine share a shard key value.
 * <dedup>: the scope's rows are de-duplicated above it anyway (an arm of the top UNION).
 */
static bool
check_ops(struct dctx *d, uint16_t sc, const struct dist *from, bool dedup)
{
	const struct stmt_scope *s = &d->c->s->scopes[sc];

	if (s->flags & STMT_SCF_LIMIT)
		return refuse_op(at_scope(d, sc), "LIMIT or OFFSET", from->rel);
	if ((s->flags & STMT_SCF_GATHER_AGG) &&
	    !any_comp_key(d, sc, s->group, s->ngroup, from->comp))	/* (read its rows) */
		return refuse_op(d->c, "an aggregate or GROUP BY", from->rel) ||
		       plan_gather(d->c, sc);
	if ((s->flags & STMT_SCF_AGG) && !any_comp_key(d, sc, s->group, s->ngroup, from->comp))
		return refuse_op(at_scope(d, sc), "an aggregate or GROUP BY", from->rel);
	if ((s->flags & STMT_SCF_DISTINCT) && !dedup &&
	    !any_comp_key(d, sc, s->distinct, s->ndistinct, from->comp))
		return refuse_op(at_scope(d, sc), "DISTINCT", from->rel);
	for (uint32_t w = 0; w < s->nwindows; w++)
		if (!any_comp_key(d, sc, s->windows[w].part, s->windows[w].npart, from->comp))
			return nk_error_nk013(d->c->err, 106) || plan_gather(d->c, sc);
	return true;
}

/* Every subquery in an expression of <sc>: exact for each outer row, the same everywhere,
 * or `key IN (SELECT key ...)` over rows partitioned as the outer ones. */
static bool
check_sublinks(struct dctx *d, uint16_t sc)
{
	struct dist t;

	for (uint16_t k = (uint16_t)(sc + 1); k < d->c->s->nscopes; k++) {
		const struct stmt_scope *s = &d->c->s->scopes[k];

		if (s->parent != sc || (s->kind != STMT_SC_SUBLINK && s->kind != STMT_SC_OTHER))
			continue;
		if (!scope_dist(d, k, false, &t))
			return false;
		if (t.kind == DIST_PART && !(t.comp < d->c->nrels && d->c->rels[t.comp].att_in))
			return refuse_subquery(d->c, k);
	}
	return true;
}

/* Does an arm of the top level's set operation under <sc> read a sharded table with
 * <flags> in its own clauses (0: any)? The first such arm, else 0: evaluated first
 * (plan.materialize), its rows a constant arm, the statement planned again. */
static uint16_t
sharded_top_arm(struct pctx *c, uint16_t sc, uint32_t flags)
{
	for (uint32_t k = sc + 1u; k < c->s->nscopes; k++) {
		if (!plan_within(c, (uint16_t)k, sc) || !plan_top_arm(c, (uint16_t)k) ||
		    (flags != 0 && !(c->s->scopes[k].flags & flags)))
			continue;
		for (uint32_t i = 0; i < c->nrels; i++)
			if (c->rels[i].sharded && plan_within(c, c->rels[i].r->scope, (uint16_t)k))
				return (uint16_t)k;
	}
	return 0;
}

/* An arm of the top UNION over sharded rows whose own clauses need all of its rows (an
 * aggregate, GROUP BY, HAVING, LIMIT or OFFSET, or DISTINCT under UNION ALL: the merge
 * combines the union's rows, not an arm's) is evaluated first. */
static bool
refuse_gathering_arm(struct pctx *c, uint16_t sc, bool all)
{
	uint16_t arm = sharded_top_arm(c, sc, STMT_SCF_AGG | STMT_SCF_LIMIT |
				       (all ? STMT_SCF_DISTINCT : 0));

	if (arm == 0 || c->out->materialize != 0)
		return true;
	c->out->materialize = arm;
	return nk_error_set(c->err, ERRCODE_FEATURE_NOT_SUPPORTED, "a UNION arm with "
			    "aggregates, GROUP BY, HAVING, LIMIT or OFFSET (or DISTINCT under "
			    "UNION ALL) is not merged across shards");
}

/* UNION [ALL] / INTERSECT / EXCEPT scope <sc> over its two arms. */
static bool
setop_dist(struct dctx *d, uint16_t sc, bool dedup, struct dist *out)
{
	uint32_t fl = d->c->s->scopes[sc].flags;
	bool removes = (fl & STMT_SCF_UNION) && (sc == 0 || dedup);
	bool none = false, part = false;
	struct dist arm;

	memset(out, 0, sizeof(*out));
	out->rel = -1;
	for (uint16_t k = (uint16_t)(sc + 1); k < d->c->s->nscopes; k++) {
		if (d->c->s->scopes[k].parent != sc || d->c->s->scopes[k].kind != STMT_SC_SETOP)
			continue;
		if (!scope_dist(d, k, dedup || removes, &arm))
			return false;
		none = none || arm.kind != DIST_PART;
		part = part || arm.kind == DIST_PART;
		if (arm.kind > out->kind)
			*out = arm;
	}
	if (!part || (fl & STMT_SCF_RECURSIVE))
		return true;	/* WITH RECURSIVE: refused by scope_dist() */
	if (fl & STMT_SCF_SETOP_OTHER)
		return nk_error_nk013(at_scope(d, sc)->err, sc == 0 ? 124 : 151);
	if ((fl & STMT_SCF_UNION) && !removes)
		return refuse_op(at_scope(d, sc), "UNION", out->rel);
	if (none && !dedup && !removes) {
		struct pctx *c = at_scope(d, sc);

		if (c->out->materialize == 0)	/* (an arm of the top level's: read first) */
			c->out->materialize = sharded_top_arm(c, sc, 0);
		return refuse_none_arm(c);
	}
	if (sc == 0 && !refuse_gathering_arm(d->c, sc, !(fl & STMT_SCF_UNION)))
		return false;
	out->comp = d->c->nrels + d->fresh++;
	if (sc != 0 && (fl & STMT_SCF_LIMIT))
		return refuse_op(at_scope(d, sc), "LIMIT or OFFSET", out->rel);
	return true;
}

/* A data-modifying CTE: its target's rows, each on its own shard (UPDATE / DELETE); an
 * INSERT would run on every shard of the plan. */
static bool
write_dist(struct dctx *d, uint16_t sc, struct dist *out)
{
	struct pctx *c = d->c;

	for (uint32_t i = 0; i < c->nrels; i++) {
		const struct prel *p = &c->rels[i];

		if (p->r->scope != sc || !p->r->is_target)
			continue;
		if (c->s->scopes[sc].from < 0)
			return nk_error_set(c->err, ERRCODE_FEATURE_NOT_SUPPORTED,
					    "INSERT in a WITH query of a "
					    "statement over several shards is unavailable");
		break;
	}
	memset(out, 0, sizeof(*out));
	out->rel = -1;
	for (int32_t n = c->s->scopes[sc].from; n >= 0; n = c->s->nodes[n].next) {
		struct dist x, acc = *out;

		if (!node_dist(d, n, &x) || !join_inner(d, &acc, &x, out))
			return false;
	}
	return check_sublinks(d, sc);
}

/* The FROM list of <sc> (items cross-joined), its subqueries, then its own clauses. */
static bool
select_dist(struct dctx *d, uint16_t sc, bool dedup, struct dist *out)
{
	const struct stmt_scope *s = &d->c->s->scopes[sc];

	memset(out, 0, sizeof(*out));
	out->rel = -1;
	for (int32_t n = s->from; n >= 0; n = d->c->s->nodes[n].next) {
		struct dist x, acc = *out;

		if (!node_dist(d, n, &x) || !join_inner(d, &acc, &x, out))
			return false;
	}
	if (!check_sublinks(d, sc))
		return false;
	if (out->kind != DIST_PART || sc == 0)
		return true;
	/* a subquery in an expression: refused by check_sublinks() unless `key IN (...)` */
	if (s->kind == STMT_SC_SUBLINK &&
	    !(out->comp < d->c->nrels && d->c->rels[out->comp].att_in))
		return true;
	return check_ops(d, sc, out, dedup);
}

static bool
scope_dist(struct dctx *d, uint16_t sc, bool dedup, struct dist *out)
{
	uint32_t fl;
	bool ok;

	memset(out, 0, sizeof(*out));
	out->rel = -1;
	if (sc >= d->c->s->nscopes || d->busy[sc])
		return true;	/* a recursive CTE's reference to itself */
	fl = d->c->s->scopes[sc].flags;
	d->busy[sc] = 1;
	if (fl & STMT_SCF_WRITE)
		ok = write_dist(d, sc, out);
	else if (fl & (STMT_SCF_UNION | STMT_SCF_UNION_ALL | STMT_SCF_SETOP_OTHER))
		ok = setop_dist(d, sc, dedup, out);
	else
		ok = select_dist(d, sc, dedup, out);
	d->busy[sc] = 0;
	if (ok && (fl & STMT_SCF_RECURSIVE) && out->kind != DIST_NONE)
		return nk_error_set(d->c->err, ERRCODE_FEATURE_NOT_SUPPORTED,
				    "WITH RECURSIVE over sharded table \"%s\" "
				    "is unavailable across shards", rel_name(d->c, out->rel));
	return ok;
}

/* ---- writes that would leave reference copies different ---- */

/* A write to a reference table reading a sharded one, or a data-modifying WITH on a
 * reference table: on any number of shards, each copy would be written differently (or
 * only some would). */
static bool
check_reference_writes(struct pctx *c)
{
	const struct prel *t = NULL, *sharded = NULL;

	for (uint32_t i = 0; i < c->nrels; i++) {
		const struct prel *p = &c->rels[i];

		if (p->sharded && !sharded)
			sharded = p;
		if (!p->r->is_target || p->res.kind != TOPO_REL_REFERENCE)
			continue;
		if (p->r->scope != 0 || c->s->kind == STMT_SELECT)
			return nk_error_set(c->err, ERRCODE_FEATURE_NOT_SUPPORTED,
					    "data-modifying WITH on reference "
					    "table \"%s\" is unavailable", p->r->name);
		t = p;
	}
	if (!t || !sharded || c->s->kind == STMT_INSERT)
		return true;	/* INSERT ... SELECT: plan_insel.c reads the source first */
	nk_error_set(c->err, ERRCODE_FEATURE_NOT_SUPPORTED,
		     "write to reference table \"%s\" cannot read sharded table "
		     "\"%s\"", t->r->name, sharded->r->name);
	nk_error_detail(c->err, "Each copy of \"%s\" would see a different part of \"%s\".",
			t->r->name, sharded->r->name);
	nk_error_hint(c->err, "Read the values first and write them in a statement of its own.");
	return false;
}

/* ---- MERGE ... WHEN NOT MATCHED THEN INSERT into a sharded table ---- */

/* Position of <t>'s shard key among <mi>'s columns (the table's order without a list). */
static int
merge_key_pos(struct pctx *c, const struct prel *t, const struct stmt_merge_insert *mi)
{
	const struct plan_catalog *cat = c->in->cat;

	for (uint32_t i = 0; i < mi->ncols; i++)
		if (mi->cols[i] && strcmp(mi->cols[i], t->key_col) == 0)
			return (int)i;
	for (uint32_t i = 0; !mi->cols && cat && cat->column_name; i++) {
		const char *name = cat->column_name(cat->arg, t->schema, t->r->name, i + 1);

		if (!name)
			break;
		if (strcmp(name, t->key_col) == 0)
			return (int)i;
	}
	return -1;
}

/* The row <mi> inserts lands where its key routes: the co-located source's key column,
 * or a literal / parameter routing to the plan's one shard. */
static bool
merge_insert_routes(struct pctx *c, uint32_t ti, const struct stmt_merge_insert *mi)
{
	const struct prel *t = &c->rels[ti];
	int pos = merge_key_pos(c, t, mi);
	const struct stmt_colref *ref;
	uint32_t range;
	bool is_null;
	int i;

	if (pos < 0 || (uint32_t)pos >= mi->nvals)
		return false;	/* DEFAULT VALUES or no key: the shard's default */
	ref = &mi->refs[pos];
	if (ref->col) {
		i = plan_resolve_col(c, t->r->scope, ref->qual, ref->col);
		return i >= 0 && (uint32_t)i != ti && plan_is_key_col(c, i, ref->col) &&
		       plan_colocated(c, t, &c->rels[i]) &&
		       (plan_comp(c, (uint32_t)i) == plan_comp(c, ti) ||
			c->out->kind == PLAN_SINGLE);
	}
	if (mi->vals[pos].kind != STMT_V_SLOT && mi->vals[pos].kind != STMT_V_CONST)
		return false;
	if (!plan_value_range(c, t, &mi->vals[pos], false, &range, &is_null)) {
		nk_error_clear(c->err);		/* the shard reports the value's error */
		return false;
	}
	return !is_null && c->out->kind == PLAN_SINGLE && c->out->nshards == 1 &&
	       strcmp(topo_image_range_shard(c->img, t->res.group, range), c->out->shards[0]) == 0;
}

static bool
check_merge_inserts(struct pctx *c)
{
	for (uint32_t ti = 0; ti < c->nrels; ti++) {
		if (!c->rels[ti].r->is_target || !c->rels[ti].sharded || c->rels[ti].r->scope != 0)
			continue;
		for (uint32_t k = 0; k < c->s->nmerge_inserts; k++)
			if (!merge_insert_routes(c, ti, &c->s->merge_inserts[k]))
				return nk_error_nk013(c->err, 121);
		break;
	}
	return true;
}

/* The top level's window functions over partitioned rows <top>: each shard computes them
 * for its rows when every one is partitioned by the shard key; else the router reads the
 * rows first (plan_gather()). */
static bool
check_top_windows(struct dctx *d, const struct dist *top)
{
	const struct stmt_scope *s = &d->c->s->scopes[0];

	for (uint32_t w = 0; top->kind == DIST_PART && w < s->nwindows; w++)
		if (!any_comp_key(d, 0, s->windows[w].part, s->windows[w].npart, top->comp))
			return nk_error_nk013(d->c->err, 106) || plan_gather(d->c, 0);
	return true;
}

/* plan_check_dist: see plan_int.h. */
bool
plan_check_dist(struct pctx *c)
{
	struct dctx d;
	struct dist top;

	if (!check_reference_writes(c))
		return false;
	if (c->s->kind == STMT_MERGE && !check_merge_inserts(c))
		return false;
	if (c->out->nshards <= 1 || c->out->kind == PLAN_EVERY_COPY ||
	    (c->s->kind != STMT_SELECT && c->s->kind != STMT_UPDATE &&
	     c->s->kind != STMT_DELETE) || c->s->nscopes == 0)
		return true;
	memset(&d, 0, sizeof(d));
	d.c = c;
	d.busy = rarena_alloc(c->a, c->s->nscopes);
	if (!d.busy)
		return nk_error_oom(c->err);
	if (!scope_dist(&d, 0, false, &top) || !check_top_windows(&d, &top))
		return false;
	for (uint16_t sc = 1; sc < c->s->nscopes; sc++) {
		struct dist w;

		if ((c->s->scopes[sc].flags & STMT_SCF_WRITE) && !scope_dist(&d, sc, false, &w))
			return false;
	}
	return top.kind == DIST_PART || refuse_no_from(c);
}
