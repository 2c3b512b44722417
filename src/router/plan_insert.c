/*
 * plan_insert.c - INSERT plans (spec 3.3 "INSERT"): the shard key must be given (NK306) and
 * not NULL (23502); multi-row VALUES is split per shard keeping row numbers so RETURNING
 * rows can be merged back in input order; ON CONFLICT arbiters must hold the shard key (119)
 * and may not assign it (145); INSERT ... SELECT is plan_insel.c's; OVERRIDING USER VALUE
 * is 141; set-returning functions (118) and subqueries (69, 116) cannot be materialised in
 * VALUES; a key over several columns takes no INSERT (10, 117 from a SELECT).
 */
#include "neki/base.h"

#include <string.h>

#include "plan_int.h"

/* Position of the shard-key column among the INSERT's columns, or -1. */
static int
key_position(struct pctx *c, const struct prel *t)
{
	const struct stmt_insert *ins = c->s->insert;
	const struct plan_catalog *cat = c->in->cat;

	if (ins->cols) {
		for (uint32_t i = 0; i < ins->ncols; i++)
			if (ins->cols[i] && strcmp(ins->cols[i], t->key_col) == 0)
				return (int)i;
		return -1;
	}
	for (uint32_t i = 0; cat && cat->column_name; i++) {
		const char *name = cat->column_name(cat->arg, t->schema, t->r->name, i + 1);

		if (!name)
			break;
		if (strcmp(name, t->key_col) == 0)
			return (int)i;
	}
	return -1;
}

static bool
missing_key(struct pctx *c, const struct prel *t)
{
	return nk_error_set(c->err, NK_ERRCODE_SHARD_KEY_MISSING,
			    "shard-key column \"%s\" of primary index 0 is required but missing "
			    "from INSERT", t->key_col);
}

/* A VALUES cell the router cannot materialise (any column). */
static bool
check_cell(struct pctx *c, const struct stmt_value *v)
{
	if (v->kind != STMT_V_EXPR)
		return true;
	if (v->is_srf)
		return nk_error_nk013(c->err, 118);
	if (v->is_subquery)
		return nk_error_nk013(c->err, 69);
	if (v->has_subquery)
		return nk_error_nk013(c->err, 116);
	return true;
}

/* Range of one row's shard-key cell. */
static bool
row_range(struct pctx *c, const struct prel *t, const struct stmt_value *v, uint32_t *range)
{
	bool is_null;

	if (v->kind == STMT_V_DEFAULT)
		return nk_error_nk013(c->err, 120);
	if (v->kind == STMT_V_EXPR)
		return nk_error_nk013(c->err, 118);
	if (!plan_value_range(c, t, v, false, range, &is_null))
		return false;
	if (is_null)
		return nk_error_set(c->err, ERRCODE_NOT_NULL_VIOLATION,
				    "null value in column \"%s\" of relation \"%s\" violates "
				    "not-null constraint", t->key_col, t->r->name);
	return true;
}

/* Group rows by shard: parts in order of first appearance, rows in input order. */
static bool
split_rows(struct pctx *c, const struct prel *t, const uint32_t *ranges)
{
	const struct stmt_insert *ins = c->s->insert;
	struct plan *o = c->out;

	o->parts = rarena_alloc(c->a, ins->nrows * sizeof(*o->parts));
	if (!o->parts)
		return nk_error_oom(c->err);
	for (uint32_t r = 0; r < ins->nrows; r++) {
		const char *uid = topo_image_range_shard(c->img, t->res.group, ranges[r]);
		uint32_t k = 0;

		while (k < o->nparts && strcmp(o->parts[k].shard, uid) != 0)
			k++;
		if (k == o->nparts) {
			o->parts[k].shard = uid;
			o->parts[k].rows = rarena_alloc(c->a, ins->nrows * sizeof(uint32_t));
			if (!o->parts[k].rows)
				return nk_error_oom(c->err);
			o->nparts++;
			if (!plan_add_shard(c, uid))
				return false;
		}
		o->parts[k].rows[o->parts[k].nrows++] = r;
	}
	return true;
}

static bool
insert_values(struct pctx *c, const struct prel *t, int pos)
{
	const struct stmt_insert *ins = c->s->insert;
	uint32_t *ranges = rarena_alloc(c->a, (ins->nrows + 1) * sizeof(*ranges));

	if (!ranges)
		return nk_error_oom(c->err);
	for (uint32_t r = 0; r < ins->nrows; r++) {
		for (uint32_t k = 0; k < ins->ncols; k++)
			if ((int)k != pos && !check_cell(c, &ins->rows[r].cells[k]))
				return false;
		if (!row_range(c, t, &ins->rows[r].cells[pos], &ranges[r]))
			return false;
	}
	if (!split_rows(c, t, ranges))
		return false;
	c->out->group = topo_image_group_uid(c->img, t->res.group);
	if (c->out->nshards == 1) {
		plan_set_single(c, c->out->shards[0], PLAN_OP_EQUAL_UNIQUE);
		return true;
	}
	c->out->kind = PLAN_SHARD_SET;
	c->out->op = PLAN_OP_INSERT_SPLIT;
	c->out->level = PLAN_FANOUT_MULTI;
	return true;
}

static bool
check_conflict(struct pctx *c, const struct prel *t)
{
	const struct stmt_insert *ins = c->s->insert;
	bool has_key = false;

	for (uint32_t i = 0; i < ins->nset_cols; i++)
		if (ins->set_cols[i] && strcmp(ins->set_cols[i], t->key_col) == 0)
			return nk_error_nk013(c->err, 145);
	if (ins->nconflict_cols == 0)
		return true;	/* ON CONSTRAINT or no arbiter: the shard checks what it holds */
	for (uint32_t i = 0; i < ins->nconflict_cols; i++)
		has_key = has_key || strcmp(ins->conflict_cols[i], t->key_col) == 0;
	return has_key || nk_error_nk013(c->err, 119);
}

/* The shard key is filled with sequence values: the shards are known at execution. */
static bool
insert_fill_key(struct pctx *c, struct prel *t)
{
	const struct stmt_insert *ins = c->s->insert;

	for (uint32_t r = 0; r < ins->nrows; r++)
		for (uint32_t k = 0; k < ins->ncols; k++)
			if (!check_cell(c, &ins->rows[r].cells[k]))
				return false;
	return plan_fill_key_plan(c, t);
}

/* plan_insert: see plan_int.h (rels resolved; rels[0] is the target). */
bool
plan_insert(struct pctx *c)
{
	struct prel *t = &c->rels[0];
	int pos;

	if (!c->s->insert || c->nrels == 0)
		return nk_error_nk013(c->err, 20);
	if (c->s->flags & STMT_F_OVERRIDING_USER)
		return nk_error_nk013(c->err, 141);
	if (!t->sharded && (c->s->flags & STMT_F_FROM_SELECT))
		return plan_fills(c, t) && plan_insert_select(c, t, -1);
	if (!t->sharded)
		return plan_fills(c, t) && plan_route_rels(c) && plan_decide(c);
	if (plan_multi_key(t))	/* no row routes by one value (V3) */
		return nk_error_nk013(c->err, (c->s->flags & STMT_F_FROM_SELECT) ? 117 : 10);
	if (c->s->shape & STMT_SH_PARAM_SUBSCRIPT)
		return nk_error_nk013(c->err, 142);
	if ((c->s->flags & STMT_F_ON_CONFLICT) && (c->s->shape & STMT_SH_RETURNING_OLDNEW))
		return nk_error_nk013(c->err, 143);
	if ((c->s->flags & STMT_F_ON_CONFLICT) && (c->s->shape & STMT_SH_RETURNING_ROUTER))
		return nk_error_nk013(c->err, 144);
	if (!check_conflict(c, t))
		return false;
	pos = key_position(c, t);
	if (!plan_fills(c, t))
		return false;
	if (c->s->flags & STMT_F_FROM_SELECT)
		return plan_insert_select(c, t, pos);
	if (pos < 0 && c->out->route_by_fill)
		return insert_fill_key(c, t);
	if (pos < 0)
		return missing_key(c, t);
	return insert_values(c, t, pos);
}
