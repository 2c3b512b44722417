/*
 * plan_decide.c - the routing decision of plan.c (spec 3.3), once the tables are resolved and
 * joined into co-located components: one shard, a shard set, every shard of the group, an
 * unsharded group's shard, a reference table's copy (the one every other table of the
 * statement also has), or a refusal for tables that cannot meet on one shard. Entry:
 * plan_decide(); the shard-set helpers plan_add_shard(), plan_shards_from_bits() and
 * plan_set_single() serve plan_insert.c and plan_util.c too.
 */
#include "neki/base.h"

#include "neki/plan.h"

#include <stdlib.h>
#include <string.h>

#include "plan_int.h"

/* Rels[i] is sharded and its component is not attached to an outer one. */
static bool
free_sharded(struct pctx *c, uint32_t i)
{
	return c->rels[i].sharded && c->rels[plan_comp(c, i)].att < 0;
}

/* ---- the decision ---- */

/* plan_add_shard: see plan_int.h (keeps out->shards sorted and distinct). */
bool
plan_add_shard(struct pctx *c, const char *uid)
{
	struct plan *o = c->out;
	uint32_t pos = 0;
	const char **v;

	while (pos < o->nshards && strcmp(o->shards[pos], uid) < 0)
		pos++;
	if (pos < o->nshards && strcmp(o->shards[pos], uid) == 0)
		return true;
	v = rarena_alloc(c->a, (o->nshards + 1) * sizeof(*v));
	if (!v)
		return nk_error_oom(c->err);
	for (uint32_t i = 0; i < o->nshards; i++)
		v[i < pos ? i : i + 1] = o->shards[i];
	v[pos] = uid;
	o->shards = v;
	o->nshards++;
	return true;
}

/* plan_shards_from_bits: see plan_int.h. */
bool
plan_shards_from_bits(struct pctx *c, uint32_t g, const uint8_t *bits)
{
	uint32_t n = topo_image_group_range_count(c->img, g);

	for (uint32_t r = 0; r < n; r++)
		if ((!bits || bits[r]) && !plan_add_shard(c, topo_image_range_shard(c->img, g, r)))
			return false;
	return true;
}

/* plan_set_single: see plan_int.h. */
void
plan_set_single(struct pctx *c, const char *shard, enum plan_op op)
{
	c->out->kind = PLAN_SINGLE;
	c->out->op = op;
	c->out->nshards = 0;
	if (shard)
		(void)plan_add_shard(c, shard);
	c->out->level = PLAN_FANOUT_SINGLE;
}

/* plan_ref_has_copy: see plan_int.h. */
bool
plan_ref_has_copy(const struct pctx *c, const struct prel *p, const char *uid)
{
	uint32_t n = topo_image_list_len(c->img, p->res.list);

	for (uint32_t i = 0; i < n; i++) {
		uint32_t g = topo_image_list_at(c->img, p->res.list, i);

		for (uint32_t k = 0; k < topo_image_group_shard_count(c->img, g); k++)
			if (strcmp(topo_image_group_shard(c->img, g, k), uid) == 0)
				return true;
	}
	return false;
}

static const char *
unsharded_shard(const struct pctx *c, const struct prel *p)
{
	return topo_image_range_shard(c->img, p->res.group, 0);
}

/* plan_within: see plan_int.h. */
bool
plan_within(const struct pctx *c, uint16_t s, uint16_t sc)
{
	for (uint32_t guard = 0; s < c->s->nscopes && guard <= c->s->nscopes; guard++) {
		if (s == sc)
			return true;
		if (s == 0)
			return false;
		s = c->s->scopes[s].parent;
	}
	return false;
}

/* plan_top_arm: see plan_int.h. */
bool
plan_top_arm(const struct pctx *c, uint16_t sc)
{
	const struct stmt *s = c->s;

	if (s->kind != STMT_SELECT || sc == 0 || sc >= s->nscopes ||
	    s->scopes[sc].kind != STMT_SC_SETOP || s->scopes[sc].loc < 0)
		return false;
	for (uint32_t k = sc + 1u; k < s->nscopes; k++)
		if (s->scopes[k].parent == sc && s->scopes[k].kind == STMT_SC_SETOP)
			return false;	/* (a set operation itself: its arms are) */
	for (uint32_t p = s->scopes[sc].parent, guard = 0; p != 0 && guard <= s->nscopes;
	     p = s->scopes[p].parent, guard++)
		if (s->scopes[p].kind != STMT_SC_SETOP)
			return false;
	return true;
}

/* Is <name> a table or alias of a FROM item inside scope <sc>? */
static bool
defined_in(const struct pctx *c, const char *name, uint16_t sc)
{
	for (uint32_t i = 0; i < c->s->nrels; i++) {
		const struct stmt_rel *r = &c->s->rels[i];
		const char *n = r->alias ? r->alias : r->name;

		if (n != NULL && strcmp(n, name) == 0 && plan_within(c, r->scope, sc))
			return true;
	}
	for (uint32_t i = 0; i < c->s->nquals; i++)
		if (c->s->quals[i].defines && strcmp(c->s->quals[i].name, name) == 0 &&
		    plan_within(c, c->s->quals[i].scope, sc))
			return true;
	return false;
}

/* An unqualified column <col> named in scope <in> (inside <sc>) is a column of a table
 * outside <sc>, as the catalog's columns tell. */
static bool
outer_column(struct pctx *c, uint16_t in, const char *qual, const char *col, uint16_t sc)
{
	int i = qual == NULL && col != NULL ? plan_resolve_col(c, in, NULL, col) : -1;

	return i >= 0 && !plan_within(c, c->rels[i].r->scope, sc);
}

/* plan_reads_outer: see plan_int.h. */
bool
plan_reads_outer(struct pctx *c, uint16_t sc)
{
	for (uint32_t i = 0; i < c->s->nquals; i++) {
		const struct stmt_qual *q = &c->s->quals[i];

		if (!q->defines && plan_within(c, q->scope, sc) && !defined_in(c, q->name, sc))
			return true;
	}
	for (uint32_t i = 0; i < c->s->njoins; i++) {	/* `l_partkey = p_partkey` */
		const struct stmt_join_eq *e = &c->s->joins[i];

		if (plan_within(c, e->scope, sc) &&
		    (outer_column(c, e->scope, e->lqual, e->lcol, sc) ||
		     outer_column(c, e->scope, e->rqual, e->rcol, sc)))
			return true;
	}
	return false;
}

/* plan_scope_gathers: see plan_int.h. (A scope's subqueries are numbered after it.) */
bool
plan_scope_gathers(struct pctx *c, uint16_t sc)
{
	int64_t comp = -1;

	for (uint16_t s = sc; s < c->s->nscopes; s++)
		if (plan_within(c, s, sc) &&
		    (c->s->scopes[s].flags & (STMT_SCF_GATHER_AGG | STMT_SCF_WINDOW)))
			return true;
	for (uint32_t i = 0; i < c->nrels; i++) {	/* sharded rows that meet off the key */
		uint32_t k;

		if (!free_sharded(c, i) || !plan_within(c, c->rels[i].r->scope, sc))
			continue;
		k = plan_comp(c, i);
		if (comp >= 0 && comp != k)
			return true;
		comp = k;
	}
	return false;
}

/* plan_evaluable_of: see plan_int.h. */
uint16_t
plan_evaluable_of(struct pctx *c, uint16_t sc)
{
	for (uint32_t guard = 0; sc != 0 && sc < c->s->nscopes && guard <= c->s->nscopes;
	     guard++) {
		const struct stmt_scope *s = &c->s->scopes[sc];

		if (s->loc >= 0 && (s->kind == STMT_SC_SUBLINK || s->kind == STMT_SC_FROM ||
				    s->kind == STMT_SC_LATERAL || plan_top_arm(c, sc) ||
				    (s->kind == STMT_SC_CTE &&
				     !(s->flags & (STMT_SCF_RECURSIVE | STMT_SCF_WRITE)))) &&
		    !plan_reads_outer(c, sc))
			return plan_scope_gathers(c, sc) ? 0 : sc;
		sc = s->parent;
	}
	return 0;
}

/* plan_broadcast: see plan_int.h. */
void
plan_broadcast(struct pctx *c, int32_t i)
{
	const struct stmt_rel *r;

	if (c->out->materialize != 0 || c->out->broadcast != 0 || i < 0 ||
	    (uint32_t)i >= c->nrels || (c->s->flags & STMT_F_LOCKING))
		return;		/* (FOR UPDATE cannot lock rows read as constants) */
	r = c->rels[i].r;
	if (r->loc >= 0 && !r->is_target && !r->only && !r->sampled && !r->is_cte_ref)
		c->out->broadcast = (uint32_t)(r - c->s->rels) + 1;
}

/* How many free sharded rels component <k> holds. */
static uint32_t
comp_size(struct pctx *c, uint32_t k)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < c->nrels; i++)
		n += free_sharded(c, i) && plan_comp(c, i) == k;
	return n;
}

/*
 * Sharded components that meet on no one shard: one inside a subquery in an expression, a
 * derived table or a WITH query may be evaluated by the router first (plan.materialize; the
 * innermost: a scope's subqueries are numbered after it), else a table is read through the
 * router (plan.broadcast): the last of the component with the fewest tables (a lone table
 * beside co-located ones is more likely the dimension than the fact: without statistics,
 * the co-located join stays on the shards), or the last table of another component than
 * <first>'s when that one cannot be read so; then the rest is planned again.
 */
static bool
refuse_components(struct pctx *c, int first)
{
	int32_t last = -1, pick = -1;
	uint32_t fewest = UINT32_MAX;

	for (uint32_t i = 0; i < c->nrels; i++) {
		uint16_t sc = free_sharded(c, i) ? plan_evaluable_of(c, c->rels[i].r->scope) : 0;
		uint32_t n = free_sharded(c, i) ? comp_size(c, plan_comp(c, i)) : UINT32_MAX;

		if (sc > c->out->materialize)
			c->out->materialize = sc;
		if (free_sharded(c, i) && plan_comp(c, i) != plan_comp(c, (uint32_t)first))
			last = (int32_t)i;
		if (n <= fewest && n != UINT32_MAX) {
			fewest = n;
			pick = (int32_t)i;
		}
	}
	plan_broadcast(c, pick);
	plan_broadcast(c, last);	/* (when <pick> cannot be read first) */
	return plan_refuse_join(c);
}

/* Every non-sharded table must be on every shard of the plan. */
static bool
others_follow(struct pctx *c)
{
	for (uint32_t i = 0; i < c->nrels; i++) {
		const struct prel *p = &c->rels[i];

		for (uint32_t k = 0; k < c->out->nshards && !p->sharded; k++) {
			const char *uid = c->out->shards[k];

			if (p->res.kind == TOPO_REL_REFERENCE ? !plan_ref_has_copy(c, p, uid)
							       : strcmp(unsharded_shard(c, p), uid) != 0) {
				plan_broadcast(c, (int32_t)i);	/* (its rows, evaluated first) */
				return plan_refuse_join(c);
			}
		}
	}
	return true;
}

/*
 * Set operations: each arm runs on every shard of the plan and the router combines, so the
 * arms' tables must be co-located (else 113) and the shard sets add up.
 */
static bool
decide_set_op(struct pctx *c, int first)
{
	const struct prel *root = &c->rels[first];
	bool all = false;

	for (uint32_t i = 0; i < c->nrels; i++) {
		const struct prel *p = &c->rels[plan_comp(c, i)];

		if (!free_sharded(c, i))
			continue;
		if (!plan_colocated(c, &c->rels[i], root) && &c->rels[i] != root)
			return plan_refuse_join(c);
		all = all || !p->bits;
		if (p->bits && !plan_shards_from_bits(c, p->res.group, p->bits))
			return false;
	}
	if (all && !plan_shards_from_bits(c, root->res.group, NULL))
		return false;
	c->out->kind = all ? PLAN_SCATTER : PLAN_SHARD_SET;
	c->out->op = all ? PLAN_OP_SCATTER : PLAN_OP_IN;
	c->out->level = all ? PLAN_FANOUT_SCATTER : PLAN_FANOUT_MULTI;
	if (c->out->nshards == 1)
		plan_set_single(c, c->out->shards[0], PLAN_OP_EQUAL_UNIQUE);
	return others_follow(c);
}

/*
 * Sharded components (those attached to an outer one follow it): one must hold them all,
 * or all pin the same single shard.
 */
static bool
decide_sharded(struct pctx *c, int first)
{
	const struct prel *root = &c->rels[plan_comp(c, (uint32_t)first)];
	bool several = false;

	for (uint32_t i = 0; i < c->nrels; i++)
		if (free_sharded(c, i) && plan_comp(c, i) != plan_comp(c, (uint32_t)first))
			several = true;
	c->out->group = topo_image_group_uid(c->img, root->res.group);
	if (several && (c->s->flags & (STMT_F_UNION | STMT_F_INTERSECT)))
		return decide_set_op(c, first);
	if (!several) {
		if (!plan_shards_from_bits(c, root->res.group, root->bits))
			return false;
		c->out->kind = root->bits ? PLAN_SHARD_SET : PLAN_SCATTER;
		c->out->op = root->bits ? PLAN_OP_IN : PLAN_OP_SCATTER;
		c->out->level = root->bits ? PLAN_FANOUT_MULTI : PLAN_FANOUT_SCATTER;
		if (c->out->nshards == 1)
			plan_set_single(c, c->out->shards[0],
					root->bits ? PLAN_OP_EQUAL_UNIQUE : PLAN_OP_SCATTER);
		return others_follow(c);
	}
	/* several components: each must sit on one and the same shard */
	for (uint32_t i = 0; i < c->nrels; i++) {
		const struct prel *p = &c->rels[plan_comp(c, i)];

		if (!free_sharded(c, i))
			continue;
		if (!plan_shards_from_bits(c, p->res.group, p->bits))
			return false;
		if (!p->bits || c->out->nshards != 1)
			return refuse_components(c, first);
	}
	plan_set_single(c, c->out->shards[0], PLAN_OP_EQUAL_UNIQUE);
	return others_follow(c);
}

/* No sharded table: an unsharded group's shard, a reference copy, or anywhere. */
static bool
decide_unsharded(struct pctx *c)
{
	const struct prel *ref = NULL, *target = NULL;

	for (uint32_t i = 0; i < c->nrels; i++) {
		const struct prel *p = &c->rels[i];

		if (p->r->is_target)
			target = p;
		if (p->res.kind == TOPO_REL_TABLE) {
			plan_set_single(c, unsharded_shard(c, p), PLAN_OP_UNSHARDED);
			c->out->group = topo_image_group_uid(c->img, p->res.group);
			return others_follow(c);
		}
		ref = ref ? ref : p;
	}
	if (target && target->res.kind == TOPO_REL_REFERENCE && c->s->kind != STMT_SELECT) {
		uint32_t n = topo_image_list_len(c->img, target->res.list);

		c->out->kind = PLAN_EVERY_COPY;
		c->out->op = PLAN_OP_REFERENCE_WRITE;
		c->out->level = PLAN_FANOUT_SINGLE;	/* exempt (spec 3.2) */
		for (uint32_t i = 0; i < n; i++)
			if (!plan_shards_from_bits(c, topo_image_list_at(c->img, target->res.list, i),
						   NULL))
				return false;
		return true;
	}
	if (ref) {
		const char *tx = c->in->sess->tx_shard;
		uint32_t n = topo_image_list_len(c->img, ref->res.list);

		if (tx && plan_ref_has_copy(c, ref, tx)) {
			plan_set_single(c, tx, PLAN_OP_REFERENCE);
		} else {
			for (uint32_t i = 0; i < n; i++)
				if (!plan_shards_from_bits(c, topo_image_list_at(c->img, ref->res.list,
										  i), NULL))
					return false;
			plan_set_single(c, c->out->nshards ? c->out->shards[0] : NULL,
					PLAN_OP_REFERENCE);
		}
		return others_follow(c);
	}
	if (c->in->sess->tx_shard)
		plan_set_single(c, c->in->sess->tx_shard, PLAN_OP_ANY);
	else
		plan_set_single(c, topo_image_range_shard(c->img, topo_image_authoritative(c->img),
							  0), PLAN_OP_ANY);
	return true;
}

/* plan_decide: see plan_int.h. */
bool
plan_decide(struct pctx *c)
{
	for (uint32_t i = 0; i < c->nrels; i++)
		if (free_sharded(c, i))
			return decide_sharded(c, (int)i);
	return decide_unsharded(c);
}
