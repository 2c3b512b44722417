/*
 * plan_insel.c - INSERT ... SELECT (spec 3.3: allowed even reading several shards). The
 * source is cut out of the statement text and planned as the SELECT it is (its own
 * normalisation, the same parameters), so it routes, scatters or merges exactly as that
 * SELECT would. When the inserted rows meet their source on its shards (the inserted key is
 * the source's co-located shard key, or a value routing to the source's one shard; no
 * router-filled column; no merge step across shards), the INSERT is forwarded unchanged.
 * Otherwise it is planned PLAN_OP_INSERT_SELECT (struct plan_insel): the executor reads
 * the source's rows (route_insel.c) and writes them in batches built from the statement's
 * head (`INSERT INTO t (cols`) and tail (ON CONFLICT / RETURNING). Refused: ON CONFLICT DO
 * UPDATE into a sharded table and a multi-column expression index (117), a data-modifying
 * WITH (117: the rows are read through a cursor). Entry: plan_insert_select().
 */
#include "neki/base.h"
#include "neki/plan_explain.h"

#include <string.h>
#include <strings.h>

#include "plan_int.h"

/* The source SELECT's flags that need a merge step when it reads several shards. */
#define INSEL_MERGE_FLAGS (STMT_F_AGG | STMT_F_ORDER | STMT_F_LIMIT | STMT_F_OFFSET | \
			   STMT_F_GROUP | STMT_F_HAVING | STMT_F_DISTINCT | STMT_F_UNION | \
			   STMT_F_INTERSECT | STMT_F_WINDOW | STMT_F_WITH_TIES | \
			   STMT_F_GROUPING_SETS)

/* Where the parts of an INSERT ... SELECT are in its text (byte offsets). */
struct insel_spans {
	uint32_t with_start, with_end;	/* WITH ... before INSERT (empty: equal) */
	uint32_t head_start, head_end;	/* INSERT INTO t [AS a] [(cols] */
	bool cols_paren;
	bool overriding;		/* OVERRIDING SYSTEM VALUE */
	uint32_t src_start, src_end;	/* the source SELECT (src_end: the tail's start) */
	uint32_t src_last;		/* the end of the source's last token */
	uint32_t ret_start;		/* RETURNING (== end when none) */
	uint32_t end;
};

/* ---- the statement's text ---- */

/*
 * The parts are found on tokens (plan_lex: strings, quoted identifiers, dollar quotes and
 * comments are whole tokens, so nothing inside them is taken for a keyword) and at paren
 * depth 0, as the grammar puts them: [WITH ...] INSERT INTO name [AS alias] [(cols)]
 * [OVERRIDING ...] <select> [ON CONFLICT ...] [RETURNING ...]. The same function runs on
 * the statement as executed (literals in it), so the parts sent keep the client's text.
 */

/* Token <i> exists and is the keyword or punctuation <w>. */
static bool
tok_word(const char *sql, const struct ptok *t, uint32_t n, uint32_t i, const char *w)
{
	return i < n && ptok_is(sql, &t[i], w);
}

/* Index of the token after the parenthesis group opening at <i> (t[i] is "("). */
static uint32_t
skip_parens(const char *sql, const struct ptok *t, uint32_t n, uint32_t i)
{
	int depth = 0;

	for (; i < n; i++) {
		if (ptok_is(sql, &t[i], "("))
			depth++;
		else if (ptok_is(sql, &t[i], ")") && --depth == 0)
			return i + 1;
	}
	return n;
}

/* A name token (word or quoted identifier). */
static bool
tok_name(const struct ptok *t, uint32_t n, uint32_t i)
{
	return i < n && (t[i].kind == 'w' || t[i].kind == 'q');
}

/* `ON CONFLICT` opening the ON CONFLICT clause at <i> (not a join's ON over a table named
 * conflict: the clause goes on with "(", ON CONSTRAINT or DO). */
static bool
at_on_conflict(const char *sql, const struct ptok *t, uint32_t n, uint32_t i)
{
	return tok_word(sql, t, n, i, "on") && tok_word(sql, t, n, i + 1, "conflict") &&
	       (tok_word(sql, t, n, i + 2, "(") || tok_word(sql, t, n, i + 2, "on") ||
		tok_word(sql, t, n, i + 2, "do"));
}

/* RETURNING at <i> at the top level (a column label `AS returning` is not it). */
static bool
at_returning(const char *sql, const struct ptok *t, uint32_t n, uint32_t i)
{
	return tok_word(sql, t, n, i, "returning") && !(i > 0 && ptok_is(sql, &t[i - 1], "as"));
}

/* The target after INSERT INTO, its alias, column list and OVERRIDING; *<i> moves on. */
static bool
spans_target(const char *sql, const struct ptok *t, uint32_t n, uint32_t *i,
	     struct insel_spans *sp)
{
	uint32_t k = *i;
	static const char *const starts[] = { "select", "with", "values", "table", "(" };
	bool source_paren = false;

	if (!tok_name(t, n, k))
		return false;
	for (k++; tok_word(sql, t, n, k, ".") && tok_name(t, n, k + 1); k += 2)
		;
	if (tok_word(sql, t, n, k, "as") && tok_name(t, n, k + 1))
		k += 2;
	sp->head_end = t[k - 1].start + t[k - 1].len;	/* the target's (or alias's) end */
	for (size_t s = 0; s < NK_ARRAY_LEN(starts); s++)
		source_paren = source_paren || tok_word(sql, t, n, k + 1, starts[s]);
	if (tok_word(sql, t, n, k, "(") && !source_paren) {
		uint32_t after = skip_parens(sql, t, n, k);

		if (after == 0 || after > n)
			return false;
		sp->cols_paren = true;
		sp->head_end = t[after - 1].start;	/* the column list's ')' */
		k = after;
	}
	if (tok_word(sql, t, n, k, "overriding")) {
		sp->overriding = tok_word(sql, t, n, k + 1, "system");
		k += 3;
	}
	*i = k;
	return k < n;
}

/* Find the parts of INSERT ... SELECT <sql>; false when the text is not of that shape. */
static bool
insel_spans(struct rarena *a, const char *sql, struct insel_spans *sp)
{
	struct ptok *t;
	uint32_t n, i = 0;
	int depth = 0;

	memset(sp, 0, sizeof(*sp));
	sp->end = (uint32_t)strlen(sql);
	if (!plan_lex(a, sql, &t, &n))
		return false;
	while (n > 0 && ptok_is(sql, &t[n - 1], ";"))
		sp->end = t[--n].start;
	/* (EXPLAIN and its options before it) */
	while (i < n && !tok_word(sql, t, n, i, "with") && !tok_word(sql, t, n, i, "insert"))
		i = tok_word(sql, t, n, i, "(") ? skip_parens(sql, t, n, i) : i + 1;
	if (tok_word(sql, t, n, i, "with")) {
		sp->with_start = t[i].start;
		while (i < n && !tok_word(sql, t, n, i, "insert"))
			i = tok_word(sql, t, n, i, "(") ? skip_parens(sql, t, n, i) : i + 1;
		sp->with_end = i < n ? t[i].start : sp->with_start;
	}
	if (!tok_word(sql, t, n, i, "insert") || !tok_word(sql, t, n, i + 1, "into"))
		return false;
	sp->head_start = t[i].start;
	i += 2;
	if (!spans_target(sql, t, n, &i, sp))
		return false;
	sp->src_start = t[i].start;
	sp->src_end = sp->ret_start = sp->end;
	for (; i < n; i++) {
		if (ptok_is(sql, &t[i], "("))
			depth++;
		else if (ptok_is(sql, &t[i], ")"))
			depth--;
		else if (depth == 0 && sp->src_end == sp->end &&
			 (at_on_conflict(sql, t, n, i) || at_returning(sql, t, n, i)))
			sp->src_end = t[i].start;
		if (sp->src_end == sp->end)
			sp->src_last = t[i].start + t[i].len;
		if (depth == 0 && at_returning(sql, t, n, i) && sp->src_end != sp->end) {
			sp->ret_start = t[i].start;
			break;
		}
	}
	return sp->src_last > sp->src_start;
}

/* A copy of <sql>[from, to) in the statement's arena. */
static const char *
span_dup(struct pctx *c, const char *sql, uint32_t from, uint32_t to)
{
	return rarena_strndup(c->a, sql + from, to > from ? to - from : 0);
}

/* ---- the source ---- */

/*
 * Plan the source SELECT of the statement as a SELECT of its own: its text (the INSERT's
 * WITH first) normalised and parsed here, the same parameters and session. <out> and
 * <is>'s text fields are filled.
 */
static bool
plan_source(struct pctx *c, struct plan_insel *is, struct plan *out)
{
	const char *sql = plan_explained_text(c->in->sql ? c->in->sql : c->s->sql);
	struct insel_spans sp;
	struct parse_norm *norm = rarena_alloc(c->a, sizeof(*norm));
	struct plan_input in = *c->in;
	const struct stmt *ss;
	char *src;
	size_t wl, sl;

	if (!norm)
		return nk_error_oom(c->err);
	if (!insel_spans(c->a, sql, &sp))
		return nk_error_nk013(c->err, 117);
	wl = sp.with_end - sp.with_start;
	sl = sp.src_last - sp.src_start;	/* (not a comment after it: text is appended) */
	if (wl > 0 && strncasecmp(sql + sp.src_start, "with", 4) == 0)
		return nk_error_nk013(c->err, 117);	/* two WITH lists: not one SELECT */
	src = rarena_alloc(c->a, wl + sl + 2);
	if (!src)
		return nk_error_oom(c->err);
	memcpy(src, sql + sp.with_start, wl);
	memcpy(src + wl, sql + sp.src_start, sl);
	src[wl + sl] = '\0';
	is->source_sql = src;
	is->head = span_dup(c, sql, sp.head_start, sp.head_end);
	is->cols_paren = sp.cols_paren;
	is->overriding = sp.overriding;
	is->tail = span_dup(c, sql, sp.src_end, sp.end);
	is->tail_noret = span_dup(c, sql, sp.src_end, sp.ret_start);
	is->returning = sp.ret_start < sp.end;
	if (!is->head || !is->tail || !is->tail_noret || !parse_normalize(c->a, src, norm))
		return nk_error_oom(c->err);
	if ((ss = parse_statement(c->a, src, norm, c->err)) == NULL)
		return false;
	if (ss->kind != STMT_SELECT)
		return nk_error_nk013(c->err, 117);
	in.norm = norm;
	in.sql = src;
	return plan_build(c->a, ss, &in, out, c->err);
}

/* ---- forwarded unchanged ---- */

/* Select-list entry <tg> is the shard key of a source table co-located with <t>. */
static bool
colocated_key(struct pctx *c, const struct prel *t, const struct stmt_target *tg)
{
	if (!tg->column || !ks_expr_is_column(t->expr))
		return false;
	for (uint32_t i = 1; i < c->nrels; i++) {
		const struct prel *p = &c->rels[i];
		bool named = tg->qual ? strcmp(p->r->alias ? p->r->alias : p->r->name,
					       tg->qual) == 0 : true;

		if (p->sharded && named && p->r->scope == tg->scope &&
		    strcmp(p->key_col, tg->column) == 0 && plan_colocated(c, p, t))
			return true;
	}
	return false;
}

/* Take the source's route for the whole INSERT (its text goes unchanged). */
static bool
forward_as(struct pctx *c, const struct plan *src, const char *group)
{
	struct plan *o = c->out;

	o->kind = src->kind;
	o->op = src->op;
	o->level = src->level;
	o->group = group;
	o->nshards = 0;
	for (uint32_t i = 0; i < src->nshards; i++)
		if (!plan_add_shard(c, src->shards[i]))
			return false;
	o->values = src->values;
	o->nvalues = src->nvalues;
	return true;
}

/*
 * A sharded target whose rows meet their source: the inserted key is the source's
 * co-located shard key (any source without a merge step), or a value routing to the
 * source's one shard. True when <c->out> was set so; false (no error) otherwise.
 */
static bool
sharded_local(struct pctx *c, struct prel *t, int pos, const struct plan *src)
{
	const struct stmt_insert *ins = c->s->insert;
	const struct stmt_target *tg;
	uint32_t range;
	const char *group = topo_image_group_uid(c->img, t->res.group);

	if (c->out->nfills > 0 || pos < 0 || (uint32_t)pos >= ins->nselect_targets ||
	    (src->kind != PLAN_SINGLE && src->kind != PLAN_SHARD_SET &&
	     src->kind != PLAN_SCATTER))
		return false;
	tg = &ins->select_targets[pos];
	if (colocated_key(c, t, tg))
		return (src->nshards <= 1 || !(src->merge & INSEL_MERGE_FLAGS)) &&
		       forward_as(c, src, group);
	if (tg->column || tg->val.kind == STMT_V_EXPR || tg->val.kind == STMT_V_DEFAULT ||
	    src->kind != PLAN_SINGLE || src->nshards != 1)
		return false;
	if (!plan_value_range(c, t, &tg->val, false, &range, &(bool){ false })) {
		nk_error_clear(c->err);	/* the executor reports the row's error */
		return false;
	}
	return strcmp(topo_image_range_shard(c->img, t->res.group, range), src->shards[0]) == 0 &&
	       forward_as(c, src, group);
}

/* Source rel <p> is a reference table with a copy on every copy of reference target <t>. */
static bool
ref_everywhere(struct pctx *c, const struct prel *t, const struct prel *p)
{
	if (p->res.kind != TOPO_REL_REFERENCE)
		return false;
	for (uint32_t g = 0; g < topo_image_list_len(c->img, t->res.list); g++) {
		uint32_t grp = topo_image_list_at(c->img, t->res.list, g);

		for (uint32_t k = 0; k < topo_image_group_shard_count(c->img, grp); k++)
			if (!plan_ref_has_copy(c, p, topo_image_group_shard(c->img, grp, k)))
				return false;
	}
	return true;
}

/* A reference or unsharded target whose source meets it on every shard of the target:
 * the usual plan of the whole statement. True when <c->out> was set so. */
static bool
unsharded_local(struct pctx *c, struct prel *t)
{
	const char *home;
	bool ok;

	if (c->out->nfills > 0)
		return false;
	if (t->res.kind == TOPO_REL_REFERENCE)
		for (uint32_t i = 1; i < c->nrels; i++)
			if (!ref_everywhere(c, t, &c->rels[i]))
				return false;
	ok = plan_route_rels(c) && plan_decide(c);
	home = t->res.kind == TOPO_REL_TABLE ? topo_image_range_shard(c->img, t->res.group, 0) :
	       NULL;
	if (ok && (c->out->kind == PLAN_EVERY_COPY ||
		   (c->out->kind == PLAN_SINGLE && c->out->nshards == 1 && home != NULL &&
		    strcmp(c->out->shards[0], home) == 0)))
		return true;
	nk_error_clear(c->err);
	c->out->kind = PLAN_SINGLE;
	c->out->op = PLAN_OP_EQUAL_UNIQUE;
	c->out->group = NULL;
	c->out->nshards = 0;
	c->out->nvalues = 0;
	for (uint32_t i = 0; i < c->nrels; i++)
		c->rels[i].comp = i;
	return false;
}

/* ---- the router runs it ---- */

/* A select-list entry whose value has no type of its own: a quoted literal, NULL, a
 * parameter the client left untyped (Postgres gives them the target column's type). */
static bool
untyped_entry(const struct pctx *c, const struct stmt_target *tg)
{
	const struct stmt_value *v = &tg->val;
	const struct parse_norm *n = c->in->norm;

	if (tg->column || v->cast)
		return false;
	switch (v->kind) {
	case STMT_V_NULL:
		return true;
	case STMT_V_CONST:
		return v->text && (v->text[0] == '\'' || v->text[0] == '$' || v->text[0] == 'E' ||
				   v->text[0] == 'e');
	case STMT_V_SLOT:
		if (v->is_param)
			return v->slot < c->in->nparams && c->in->params[v->slot].type_oid == 0;
		return n && v->slot >= n->nparams && v->slot - n->nparams < n->nlits &&
		       n->lits[v->slot - n->nparams].quoted;
	default:
		return false;
	}
}

/* The table's columns in order (positional INSERT: fill columns are written out). */
static bool
table_columns(struct pctx *c, const struct prel *t, struct plan_insel *is)
{
	const struct plan_catalog *cat = c->in->cat;
	uint32_t n = 0;

	while (cat && cat->column_name && cat->column_name(cat->arg, t->schema, t->r->name, n + 1))
		n++;
	is->table_cols = rarena_alloc(c->a, (n + 1) * sizeof(*is->table_cols));
	if (!is->table_cols)
		return nk_error_oom(c->err);
	for (uint32_t i = 0; i < n; i++) {	/* copied: the catalog view is released later */
		const char *name = cat->column_name(cat->arg, t->schema, t->r->name, i + 1);

		if ((is->table_cols[i] = rarena_strdup(c->a, name)) == NULL)
			return nk_error_oom(c->err);
	}
	is->ntable_cols = n;
	return true;
}

/* Shards a row may go to: the group's, every copy's, the unsharded table's. */
static bool
insel_targets(struct pctx *c, const struct prel *t, struct plan_insel *is)
{
	uint32_t cap = 0, ng = t->res.kind == TOPO_REL_REFERENCE ?
			      topo_image_list_len(c->img, t->res.list) : 1;

	for (uint32_t g = 0; g < ng; g++)
		cap += topo_image_group_shard_count(c->img, t->res.kind == TOPO_REL_REFERENCE ?
						    topo_image_list_at(c->img, t->res.list, g) :
						    t->res.group);
	is->targets = rarena_alloc(c->a, (cap + 1) * sizeof(*is->targets));
	if (!is->targets)
		return nk_error_oom(c->err);
	if (!t->sharded && t->res.kind != TOPO_REL_REFERENCE) {
		is->targets[is->ntargets++] = topo_image_range_shard(c->img, t->res.group, 0);
		return true;
	}
	for (uint32_t g = 0; g < ng; g++) {
		uint32_t grp = t->sharded ? t->res.group :
			       topo_image_list_at(c->img, t->res.list, g);

		for (uint32_t k = 0; k < topo_image_group_shard_count(c->img, grp); k++) {
			const char *uid = topo_image_group_shard(c->img, grp, k);
			uint32_t j = 0;

			while (j < is->ntargets && strcmp(is->targets[j], uid) != 0)
				j++;
			if (j == is->ntargets)
				is->targets[is->ntargets++] = uid;
		}
	}
	return true;
}

/* The shard key of a sharded target: its position, or a fill; NK306 when neither. */
static bool
insel_key(struct pctx *c, struct prel *t, int pos, struct plan_insel *is)
{
	struct plan *o = c->out;
	bool filled = false;

	for (uint32_t f = 0; f < is->nfills; f++)
		filled = filled || is->fills[f].is_key;
	is->key_col = pos;
	is->key_attnum = c->s->insert->cols ? 0 : (uint32_t)(pos + 1);
	if (pos < 0 && !filled)
		return nk_error_set(c->err, NK_ERRCODE_SHARD_KEY_MISSING,
				    "shard-key column \"%s\" of primary index 0 "
				    "is required but missing from INSERT", t->key_col);
	if (!t->typed)
		return nk_error_set(c->err, ERRCODE_UNDEFINED_OBJECT,
				    "type of shard-key column \"%s\" of table "
				    "\"%s\" is unknown", t->key_col, t->r->name);
	o->has_key = true;
	o->key.group = t->res.group;
	o->key.index = t->res.index;
	o->key.col_type = t->col_type;
	o->key.column = t->key_col;
	o->key.col_pos = pos;
	return true;
}

/* The wider of two fan-out levels (scatter < multi < single). */
static enum plan_fanout
wider(enum plan_fanout a, enum plan_fanout b)
{
	return a < b ? a : b;
}

/*
 * The INSERT the router runs: the fills move to <is> (the executor takes a value per source
 * row, plan_build()'s caller must not take them per VALUES row), the targets and the key,
 * and plan.shards covers the source's shards and the targets (for __neki.tx_mode).
 */
static bool
plan_insel(struct pctx *c, struct prel *t, int pos, struct plan_insel *is, struct plan *src)
{
	const struct stmt_insert *ins = c->s->insert;
	struct plan *o = c->out;

	if ((c->s->flags & STMT_F_WRITING_CTE) ||
	    (src->kind != PLAN_SINGLE && src->kind != PLAN_SHARD_SET && src->kind != PLAN_SCATTER))
		return nk_error_nk013(c->err, 117);	/* a cursor cannot hold it */
	is->target = t->sharded ? PLAN_INSEL_SHARDED : t->res.kind == TOPO_REL_REFERENCE ?
		     PLAN_INSEL_REFERENCE : PLAN_INSEL_UNSHARDED;
	is->source = src;
	if ((is->table = rarena_strdup(c->a, t->r->name)) == NULL)
		return nk_error_oom(c->err);
	is->fills = o->fills;
	is->nfills = o->nfills;
	o->fills = NULL;
	o->nfills = 0;
	o->route_by_fill = false;	/* (the executor takes values per source row) */
	is->ncols = ins->cols ? ins->ncols : 0;
	if (!ins->cols && !table_columns(c, t, is))
		return false;
	is->nuntyped = ins->nselect_targets;
	is->untyped = rarena_alloc(c->a, (is->nuntyped + 1) * sizeof(*is->untyped));
	if (!is->untyped)
		return nk_error_oom(c->err);
	for (uint32_t i = 0; i < is->nuntyped; i++)
		is->untyped[i] = untyped_entry(c, &ins->select_targets[i]);
	if (!insel_targets(c, t, is) || (t->sharded && !insel_key(c, t, pos, is)))
		return false;
	o->kind = PLAN_SHARD_SET;
	o->op = PLAN_OP_INSERT_SELECT;
	o->group = t->res.kind == TOPO_REL_REFERENCE ? NULL :
		   topo_image_group_uid(c->img, t->res.group);
	o->level = wider(src->level, is->target == PLAN_INSEL_SHARDED && is->ntargets > 1 ?
			 PLAN_FANOUT_MULTI : PLAN_FANOUT_SINGLE);
	o->nshards = 0;
	for (uint32_t i = 0; i < src->nshards; i++)
		if (!plan_add_shard(c, src->shards[i]))
			return false;
	for (uint32_t i = 0; i < is->ntargets; i++)
		if (!plan_add_shard(c, is->targets[i]))
			return false;
	o->insel = is;
	return true;
}

/* plan_insert_select: see plan_int.h. */
bool
plan_insert_select(struct pctx *c, struct prel *t, int pos)
{
	struct plan_insel *is = rarena_alloc(c->a, sizeof(*is));
	struct plan *src = rarena_alloc(c->a, sizeof(*src));

	if (!is || !src)
		return nk_error_oom(c->err);
	if (c->s->shape & STMT_SH_VALUES_ORDER)
		return nk_error_nk013(c->err, 150);	/* the router would order the rows */
	if (t->sharded && ((c->s->flags & STMT_F_ON_CONFLICT_UPDATE) || t->expr->ncolumns > 1))
		return nk_error_nk013(c->err, 117);
	if (!plan_source(c, is, src))
		return false;
	/* one Postgres statement per shard when the rows meet their source there */
	if (t->sharded ? sharded_local(c, t, pos, src) : unsharded_local(c, t))
		return true;
	if (nk_error_is_set(c->err))
		return false;
	return plan_insel(c, t, pos, is, src);
}
