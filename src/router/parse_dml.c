/*
 * parse_dml.c - INSERT, UPDATE, DELETE and MERGE in the router's statement model: the
 * target table, the inserted columns and VALUES rows, ON CONFLICT, the SET list, MERGE's
 * source join and WHEN clauses (the SELECT parts through parse.c's scopes).
 * Entry point: pb_dml().
 */
#include "neki/base.h"

#include <string.h>

#include <cjson/cJSON.h>

#include "parse_int.h"

/* Names of a ResTarget list (INSERT columns, UPDATE SET targets). */
static const char **
pb_target_names(struct pb *b, const cJSON *list, uint32_t *n)
{
	int cnt = cJSON_GetArraySize(list), i = 0;
	const char **names;
	const cJSON *it;

	*n = 0;
	if (cnt <= 0)
		return NULL;
	names = pb_alloc(b, (size_t)cnt * sizeof(*names));
	if (!names)
		return NULL;
	cJSON_ArrayForEach(it, list) {
		const cJSON *rt = jas(it, "ResTarget");

		names[i++] = pb_strdup(b, jstr(rt, "name"));
	}
	*n = (uint32_t)cnt;
	return names;
}

/* The VALUES rows of an INSERT. */
static void
pb_insert_values(struct pb *b, const cJSON *values, uint16_t scope, struct stmt_insert *ins)
{
	int nrows = cJSON_GetArraySize(values), r = 0;
	const cJSON *row;

	ins->rows = pb_alloc(b, (size_t)(nrows ? nrows : 1) * sizeof(*ins->rows));
	if (!ins->rows)
		return;
	cJSON_ArrayForEach(row, values) {
		const cJSON *items = jget(jas(row, "List"), "items");
		uint32_t ncells = (uint32_t)cJSON_GetArraySize(items), c = 0;
		const cJSON *cell;

		if (ins->ncols == 0 && !ins->cols)
			ins->ncols = ncells;	/* no column list: positional */
		ins->rows[r].cells = pb_alloc(b, (ncells + ins->ncols + 1) * sizeof(struct stmt_value));
		if (!ins->rows[r].cells)
			return;
		cJSON_ArrayForEach(cell, items) {
			if (c < ins->ncols)
				pb_value(b, cell, scope, &ins->rows[r].cells[c]);
			c++;
		}
		r++;
	}
	ins->nrows = (uint32_t)nrows;
}

static void
pb_on_conflict(struct pb *b, const cJSON *oc, uint16_t scope, struct stmt_insert *ins)
{
	const cJSON *infer = jget(oc, "infer"), *el;
	const char *action = jstr(oc, "action");
	int n = cJSON_GetArraySize(jget(infer, "indexElems")), i = 0;

	b->s->flags |= STMT_F_ON_CONFLICT;
	if (action && strcmp(action, "ONCONFLICT_UPDATE") == 0)
		b->s->flags |= STMT_F_ON_CONFLICT_UPDATE;
	ins->conflict_constraint = pb_strdup(b, jstr(infer, "conname"));
	if (n > 0) {
		ins->conflict_cols = pb_alloc(b, (size_t)n * sizeof(char *));
		if (!ins->conflict_cols)
			return;
		cJSON_ArrayForEach(el, jget(infer, "indexElems")) {
			/* an expression element has no name: it can never be the shard key column */
			const char *name = jstr(jas(el, "IndexElem"), "name");

			ins->conflict_cols[i++] = pb_strdup(b, name ? name : "");
		}
		ins->nconflict_cols = (uint32_t)n;
	}
	ins->set_cols = pb_target_names(b, jget(oc, "targetList"), &ins->nset_cols);
	pb_walk_ctx(b, jget(oc, "targetList"), scope, PB_CTX_SET);
	pb_walk(b, jget(oc, "whereClause"), scope, false);
}

/* INSERT ... SELECT: what each select-list entry is (a source column or a value). */
static void
pb_select_targets(struct pb *b, const cJSON *sel, uint16_t scope, struct stmt_insert *ins)
{
	int n = cJSON_GetArraySize(jget(sel, "targetList")), i = 0;
	const cJSON *it;

	if (n <= 0 || jget(sel, "larg"))
		return;
	ins->select_targets = pb_alloc(b, (size_t)n * sizeof(*ins->select_targets));
	if (!ins->select_targets)
		return;
	cJSON_ArrayForEach(it, jget(sel, "targetList")) {
		const cJSON *val = jget(jas(it, "ResTarget"), "val");
		const cJSON *fields = jget(jas(val, "ColumnRef"), "fields");
		struct stmt_target *t = &ins->select_targets[i++];
		int nf = cJSON_GetArraySize(fields);

		t->scope = scope;
		if (nf > 0 && jsval(cJSON_GetArrayItem(fields, nf - 1))) {
			t->column = pb_strdup(b, jsval(cJSON_GetArrayItem(fields, nf - 1)));
			t->qual = nf > 1 ? pb_strdup(b, jsval(cJSON_GetArrayItem(fields, nf - 2)))
					 : NULL;
		} else {
			b->in_cond = true;	/* walked by pb_select already */
			pb_value(b, val, scope, &t->val);
			b->in_cond = false;
		}
	}
	ins->nselect_targets = (uint32_t)n;
}

static bool
is_plain_values(const cJSON *sel)
{
	const cJSON *f;

	if (!jget(sel, "valuesLists"))
		return false;
	cJSON_ArrayForEach(f, sel) {
		if (strcmp(f->string, "valuesLists") != 0 && strcmp(f->string, "limitOption") != 0 &&
		    strcmp(f->string, "op") != 0)
			return false;
	}
	return true;
}

static void
pb_insert(struct pb *b, const cJSON *ins_node, bool top, uint16_t scope)
{
	const cJSON *sel = jas(jget(ins_node, "selectStmt"), "SelectStmt");
	const char *ov = jstr(ins_node, "override");
	struct stmt_insert *ins = pb_alloc(b, sizeof(*ins));
	struct stmt_rel *r;

	pb_with(b, jget(ins_node, "withClause"), scope);
	r = pb_rel(b, jget(ins_node, "relation"), scope);
	if (r)
		r->is_target = true;
	if (!ins)
		return;
	if (top)
		b->s->insert = ins;
	if (jget(ins_node, "cols"))
		ins->cols = pb_target_names(b, jget(ins_node, "cols"), &ins->ncols);
	if (ov && strcmp(ov, "OVERRIDING_USER_VALUE") == 0)
		b->s->flags |= STMT_F_OVERRIDING_USER;
	if (sel && is_plain_values(sel)) {
		b->s->flags |= STMT_F_FROM_VALUES;
		b->ctx = PB_CTX_VALUES;
		pb_insert_values(b, jget(sel, "valuesLists"), scope, ins);
		b->ctx = PB_CTX_OTHER;
	} else if (sel) {
		uint16_t src = pb_scope_new(b, scope, STMT_SC_OTHER);

		if (jget(sel, "valuesLists") && jget(sel, "sortClause"))
			b->s->shape |= STMT_SH_VALUES_ORDER;
		b->s->flags |= STMT_F_FROM_SELECT;
		pb_select(b, sel, src, false);
		pb_select_targets(b, sel, src, ins);
	}
	if (pb_find(jget(ins_node, "cols"), m_param))
		b->s->shape |= STMT_SH_PARAM_SUBSCRIPT;
	if (jget(ins_node, "onConflictClause"))
		pb_on_conflict(b, jget(ins_node, "onConflictClause"), scope, ins);
	if (pb_find(jget(ins_node, "returningList"), m_old_new))
		b->s->shape |= STMT_SH_RETURNING_OLDNEW;
	if (pb_find(jget(ins_node, "returningList"), m_router_only))
		b->s->shape |= STMT_SH_RETURNING_ROUTER;
	if (jget(ins_node, "returningList") && top)
		b->s->flags |= STMT_F_RETURNING;
	pb_walk(b, jget(ins_node, "returningList"), scope, false);
}

/* SET a[1:2] = ... or a[1][2] = ...: an array slice or a multidimensional element. */
static bool
slice_assignment(const cJSON *targets)
{
	const cJSON *t, *ind;

	cJSON_ArrayForEach(t, targets) {
		int n = 0;

		cJSON_ArrayForEach(ind, jget(jas(t, "ResTarget"), "indirection")) {
			const cJSON *ai = jas(ind, "A_Indices");

			if (ai && (jbool(ai, "is_slice") || ++n > 1))
				return true;
		}
	}
	return false;
}

/* One MERGE INSERT action: its columns and values (the shard key must route its row). */
static void
pb_merge_insert(struct pb *b, const cJSON *wc, uint16_t scope)
{
	struct stmt_merge_insert *mi;
	int n = cJSON_GetArraySize(jget(wc, "values")), i = 0;
	const cJSON *v;

	mi = pb_alloc(b, (b->s->nmerge_inserts + 1) * sizeof(*mi));
	if (!mi)
		return;
	if (b->s->nmerge_inserts)
		memcpy(mi, b->s->merge_inserts, b->s->nmerge_inserts * sizeof(*mi));
	b->s->merge_inserts = mi;
	mi = &mi[b->s->nmerge_inserts++];
	memset(mi, 0, sizeof(*mi));
	if (jget(wc, "targetList"))
		mi->cols = pb_target_names(b, jget(wc, "targetList"), &mi->ncols);
	if (n <= 0)
		return;
	mi->vals = pb_alloc(b, (size_t)n * sizeof(*mi->vals));
	mi->refs = pb_alloc(b, (size_t)n * sizeof(*mi->refs));
	if (!mi->vals || !mi->refs)
		return;
	b->in_cond = true;	/* walked with the clause */
	cJSON_ArrayForEach(v, jget(wc, "values")) {
		pb_value(b, v, scope, &mi->vals[i]);
		if (!pb_colref(b, v, &mi->refs[i]))
			mi->refs[i].col = NULL;
		i++;
	}
	b->in_cond = false;
	mi->nvals = (uint32_t)n;
}

/* MERGE's WHEN clauses: UPDATE SET columns (145 like UPDATE's), INSERT actions. */
static void
pb_merge_whens(struct pb *b, const cJSON *whens, uint16_t scope, bool top)
{
	const cJSON *w;

	cJSON_ArrayForEach(w, whens) {
		const cJSON *wc = jas(w, "MergeWhenClause");
		const char *cmd = jstr(wc, "commandType");
		const char **names, **all;
		uint32_t n;

		if (top && cmd && strcmp(cmd, "CMD_INSERT") == 0)
			pb_merge_insert(b, wc, scope);
		if (!top || !cmd || strcmp(cmd, "CMD_UPDATE") != 0)
			continue;
		names = pb_target_names(b, jget(wc, "targetList"), &n);
		all = pb_alloc(b, (b->s->nset_cols + n + 1) * sizeof(*all));
		if (!all)
			return;
		if (b->s->nset_cols)
			memcpy(all, b->s->set_cols, b->s->nset_cols * sizeof(*all));
		for (uint32_t i = 0; i < n; i++)
			all[b->s->nset_cols + i] = names[i];
		b->s->set_cols = all;
		b->s->nset_cols += n;
	}
	pb_walk(b, whens, scope, false);
}

/*
 * MERGE's FROM: `target RIGHT JOIN source ON <join condition>` (every source row takes part,
 * a target row only where the condition holds), so a condition on the target's key pins it
 * as it pins the nullable side of an outer join.
 */
static void
pb_merge_join(struct pb *b, const cJSON *body, uint16_t scope)
{
	int32_t t = scope < b->s->nscopes ? b->s->scopes[scope].from : -1;
	int32_t j = pb_node(b, STMT_N_JOIN, scope), src;
	struct stmt_cond *on;

	src = pb_from_item(b, jget(body, "sourceRelation"), scope, false);
	on = pb_join_on(b, jget(body, "joinCondition"), scope, j);
	if (j < 0 || t < 0)
		return;
	b->s->nodes[j].join = STMT_J_RIGHT;
	b->s->nodes[j].left = t;
	b->s->nodes[j].right = src;
	b->s->nodes[j].on = on;
	b->s->nodes[j].rel_lo = b->s->nodes[t].rel_lo;
	b->s->nodes[j].rel_hi = b->s->nrels;
	b->s->scopes[scope].from = j;
}

/* The target of UPDATE / DELETE / MERGE: the first FROM item of <scope>. */
static void
pb_dml_target(struct pb *b, const cJSON *rv, uint16_t scope)
{
	int32_t nd = pb_node(b, STMT_N_REL, scope);
	struct stmt_rel *r = pb_rel(b, rv, scope);

	if (!r)
		return;
	r->is_target = true;
	if (nd >= 0) {
		b->s->nodes[nd].ref = b->s->nrels - 1;
		b->s->nodes[nd].rel_hi = b->s->nrels;
		pb_from_append(b, scope, nd);
	}
}

/* UPDATE / DELETE / MERGE bodies. */
static void
pb_update_delete(struct pb *b, const char *tag, const cJSON *body, bool top, uint16_t scope)
{
	bool update = strcmp(tag, "UpdateStmt") == 0, merge = strcmp(tag, "MergeStmt") == 0;
	const cJSON *item, *from = jget(body, update ? "fromClause" : "usingClause");
	uint32_t before = b->s->nrels, in_ctes;
	bool chained = false;

	pb_with(b, jget(body, "withClause"), scope);
	for (in_ctes = before; in_ctes < b->s->nrels; in_ctes++)
		chained = chained || b->s->rels[in_ctes].is_cte_ref;
	if (update && from && pb_find(jget(body, "targetList"), m_sublink))
		b->s->shape |= STMT_SH_SET_SUBQUERY;
	if (update && slice_assignment(jget(body, "targetList")))
		b->s->shape |= STMT_SH_SLICE_SET;
	pb_dml_target(b, jget(body, "relation"), scope);
	if (update && top)
		b->s->set_cols = pb_target_names(b, jget(body, "targetList"), &b->s->nset_cols);
	pb_walk_ctx(b, jget(body, "targetList"), scope, update ? PB_CTX_SET : PB_CTX_OTHER);
	before = b->s->nrels;
	cJSON_ArrayForEach(item, from)
		pb_from_append(b, scope, pb_from_item(b, item, scope, false));
	for (uint32_t i = before; chained && i < b->s->nrels; i++)
		if (b->s->rels[i].is_cte_ref)
			b->s->shape |= STMT_SH_CHAINED_CTE;
	if (merge) {
		if (jas(jget(body, "sourceRelation"), "RangeSubselect"))
			b->s->shape |= STMT_SH_MERGE_DERIVED;
		pb_merge_join(b, body, scope);
		pb_merge_whens(b, jget(body, "mergeWhenClauses"), scope, top);
	}
	if (jget(body, "whereClause"))
		pb_cond_and(b, scope, pb_cond(b, jget(body, "whereClause"), scope));
	if (jget(body, "returningList") && top)
		b->s->flags |= STMT_F_RETURNING;
	pb_walk(b, jget(body, "returningList"), scope, false);
}

void
pb_dml(struct pb *b, const char *tag, const cJSON *body, bool top, uint16_t scope)
{
	if (strcmp(tag, "InsertStmt") == 0)
		pb_insert(b, body, top, scope);
	else if (strcmp(tag, "UpdateStmt") == 0 || strcmp(tag, "DeleteStmt") == 0 ||
		 strcmp(tag, "MergeStmt") == 0)
		pb_update_delete(b, tag, body, top, scope);
	else
		pb_walk(b, body, scope, false);
}
