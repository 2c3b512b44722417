/*
 * plan_gsi.c - a statement on the owner table of an enabled global secondary index (spec 6.2,
 * 3.3): what it needs besides its own route (plan.gsi, neki/plan_gsi.h), or its refusal.
 * - INSERT: the statement RETURNING the lookup columns of the rows it wrote (its indexed
 *   columns, the owner's shard-key columns, for a non-unique GSI its primary-key columns;
 *   with ON CONFLICT DO UPDATE also whether the row was inserted), then those lookup rows
 *   inserted, in the same transaction: a unique GSI's lookup table has the indexed columns
 *   as its primary key, so a duplicate anywhere fails there with 23505, whichever shard
 *   the owners live on (also an INSERT ... SELECT the router runs across shards: its
 *   batch INSERTs carry the RETURNING). Refused: ON CONFLICT without a conflict target
 *   (0A000). An INSERT with its own RETURNING writes
 *   the lookup rows first instead, from its VALUES: each value a constant or a parameter
 *   (0A000), no indexed column omitted (NK306), no SELECT, no ON CONFLICT (0A000). A NULL
 *   indexed value has no lookup row under ignore_null, else 23502 (also a NULL owner key).
 * - DELETE: the statement RETURNING the lookup columns of the rows it deleted, then those
 *   lookup rows deleted; a DELETE with its own RETURNING is 104 (the executor refuses it:
 *   its own step is that DELETE with RETURNING).
 * - SELECT of the owner alone, scattered, with `col = v` or `col IN (...)` on the indexed
 *   column of a one-column GSI as a conjunct of WHERE: the lookup read first, the statement
 *   then sent to the shards of the owner keys it returned (its WHERE applied there as
 *   written, so the rows are exactly the ones a scatter would find). A unique GSI that
 *   holds every column the statement reads (same types, no locking clause) covers it: the
 *   statement runs on the lookup table instead (plan_gsi.cover), one round trip.
 * - UPDATE assigning an indexed column: the rows locked with their lookup values read
 *   (ctid, shard key), exactly those updated RETURNING the new ones, then the lookup rows
 *   that changed moved; RETURNING is 104, FROM, subqueries and WITH 0A000.
 * - COPY FROM into an owner: each row's lookup columns are read from the input as it
 *   passes (every one must be in it: 44), those lookup rows inserted after the COPY, in its
 *   transaction, as an INSERT_AFTER's are.
 * - MERGE into an owner, a write to one in a WITH query: 104.
 * - A statement naming the lookup table of an enabled GSI: 0A000 (spec 3.3), but for the
 *   router's own steps, a plain EXPLAIN and a TRUNCATE with its owner.
 * - Assigning the shard key, an owner primary-key column or a disabled GSI's column: 145
 *   (plan.c). TRUNCATE of an owner without its lookup tables, or of a lookup table without
 *   its owner: 0A000 (with both, every shard truncates both: exact).
 * - A write-only GSI ("write_only": true, what __neki.gsi_build sets while it backfills)
 *   is maintained as every enabled one, and never read through.
 * Entry points: plan_gsi(), plan_gsi_copy(), plan_gsi_refuse_lookups(), plan_gsi_truncate(),
 * plan_gsi_shards(), plan_gsi_enabled().
 */
#include "neki/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "neki/memstream.h"
#include "neki/plan_gsi.h"
#include "neki/sqlscan.h"
#include "neki/topology_image.h"
#include "plan_int.h"
#include "plan_gsi_int.h"


static void
add_col(struct gsi_ref *g, const char *col, char role)
{
	for (uint32_t i = 0; i < g->ncols; i++)
		if (gsi_same(g->cols[i], col))
			return;
	if (g->ncols < GSI_COLS_MAX) {
		g->role[g->ncols] = role;
		g->cols[g->ncols++] = col;
	}
}

static void
add_list(const struct pctx *c, struct gsi_ref *g, uint32_t list, char role)
{
	for (uint32_t k = 0; k < topo_image_list_len(c->img, list); k++)
		add_col(g, topo_image_list_str(c->img, list, k), role);
}

/* V11: is unique GSI <g>'s lookup primary key not its columns (the catalog knows the
 * table)? Then the GSI is disabled: its lookup table would not keep values unique. */
static bool
lookup_pk_differs(const struct pctx *c, const struct topo_img_gsi *g, const char *schema)
{
	const struct plan_catalog *cat = c->in->cat;
	uint32_t n = topo_image_list_len(c->img, g->columns), k = 0;
	const char *col;
	int rc;

	if (!g->unique || cat == NULL || cat->pk_column == NULL)
		return false;
	for (; (rc = cat->pk_column(cat->arg, schema, g->table, k, &col)) == 1; k++) {
		bool in = false;

		for (uint32_t j = 0; j < n; j++)
			in = in || gsi_same(topo_image_list_str(c->img, g->columns, j), col);
		if (!in)
			return true;
	}
	return rc == 0 && k != n;
}

/* GSI number <i> of the image, when it is enabled (and not disabled by V11) and owned by
 * <p>: *<out>. */
static bool
gsi_of(const struct pctx *c, const struct prel *p, uint32_t i, struct gsi_ref *out)
{
	topo_image_gsi(c->img, i, &out->g);
	if (!out->g.enabled || !gsi_same(out->g.db, c->in->sess->db) ||
	    !gsi_same(out->g.owner_table, p->r->name) ||
	    (out->g.schema && !gsi_same(out->g.schema, p->schema)) ||
	    lookup_pk_differs(c, &out->g, out->g.schema ? out->g.schema : p->schema))
		return false;
	out->ncols = 0;
	add_list(c, out, out->g.columns, 'i');
	add_list(c, out, out->g.owner_sk_columns, 'k');
	for (uint32_t k = 0; p->sharded && k < p->expr->ncolumns; k++)
		add_col(out, p->expr->columns[k], 'k');	/* (owner_sk_columns inferred) */
	add_list(c, out, out->g.owner_pk_columns, 'p');
	return true;
}

/* plan_gsi_enabled: see plan_int.h. */
bool
plan_gsi_enabled(const struct pctx *c, const struct prel *p, const char **name)
{
	struct gsi_ref g;

	for (uint32_t i = 0; i < topo_image_gsi_count(c->img); i++)
		if (gsi_of(c, p, i, &g)) {
			*name = g.g.name;
			return true;
		}
	return false;
}

/* plan_gsi_text: see plan_gsi_int.h. */
const char *
plan_gsi_text(struct pctx *c, FILE *f, char **buf, size_t *len)
{
	const char *out;

	if (fclose(f) != 0) {
		free(*buf);
		return nk_error_oom(c->err), NULL;
	}
	out = rarena_strndup(c->a, *buf, *len);
	free(*buf);
	return out != NULL ? out : (nk_error_oom(c->err), NULL);
}

/* plan_gsi_put_lookup: see plan_gsi_int.h. */
void
plan_gsi_put_lookup(FILE *f, const struct prel *owner, const struct gsi_ref *g)
{
	sql_put_ident(f, g->g.schema ? g->g.schema : owner->schema);
	fputc('.', f);
	sql_put_ident(f, g->g.table);
}

/* plan_gsi_add_text: see plan_gsi_int.h. */
bool
plan_gsi_add_text(struct pctx *c, const char ***list, uint32_t *n, const char *sql)
{
	const char **nf = rarena_alloc(c->a, (*n + 1) * sizeof(*nf));

	if (nf == NULL)
		return nk_error_oom(c->err);
	if (*n)
		memcpy(nf, *list, *n * sizeof(*nf));
	nf[(*n)++] = sql;
	*list = nf;
	return true;
}

static struct plan_gsi *
new_gsi(struct pctx *c, enum plan_gsi_kind kind, const char *name)
{
	struct plan_gsi *pg = rarena_alloc(c->a, sizeof(*pg));

	if (pg == NULL)
		return nk_error_oom(c->err), NULL;
	memset(pg, 0, sizeof(*pg));
	pg->kind = kind;
	pg->name = name;
	return pg;
}

/* ---- INSERT ---- */

/* ---- DELETE ---- */

/* Position of <col> in the RETURNING list <cols> (added when new). */
static uint32_t
returned(const char **cols, uint32_t *n, const char *col)
{
	for (uint32_t i = 0; i < *n; i++)
		if (gsi_same(cols[i], col))
			return i;
	cols[*n] = col;
	return (*n)++;
}

/* `"schema"."name"` (`"name"` when <schema> is NULL) in the arena, or NULL with <err>. */
static const char *
ident_text(struct pctx *c, const char *schema, const char *name)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = nk_memstream(&buf, &len);

	if (f == NULL)
		return nk_error_oom(c->err), NULL;
	if (schema != NULL) {
		sql_put_ident(f, schema);
		fputc('.', f);
	}
	sql_put_ident(f, name);
	return plan_gsi_text(c, f, &buf, &len);
}

/* GSI <g>'s lookup table and columns into <lk>, its columns added to the RETURNING list
 * <ret>. */
static bool
gsi_lookup_of(struct pctx *c, const struct prel *t, const struct gsi_ref *g,
	      struct plan_gsi_lookup *lk, const char **ret, uint32_t *nret)
{
	lk->name = g->g.name;
	lk->ignore_null = g->g.ignore_null;
	lk->table = ident_text(c, g->g.schema ? g->g.schema : t->schema, g->g.table);
	lk->ncols = g->ncols;
	lk->nindexed = 0;
	lk->cols = rarena_alloc(c->a, g->ncols * sizeof(*lk->cols));
	lk->pos = rarena_alloc(c->a, g->ncols * sizeof(*lk->pos));
	if (lk->table == NULL)
		return false;
	if (lk->cols == NULL || lk->pos == NULL)
		return nk_error_oom(c->err);
	for (uint32_t k = 0; k < g->ncols; k++) {
		if ((lk->cols[k] = ident_text(c, NULL, g->cols[k])) == NULL)
			return false;
		lk->pos[k] = returned(ret, nret, g->cols[k]);
		lk->nindexed += g->role[k] == 'i';
	}
	return true;
}

/* One more lookup of <pg> (INSERT_AFTER, DELETE): GSI <g>'s. */
static bool
add_lookup(struct pctx *c, const struct prel *t, const struct gsi_ref *g, struct plan_gsi *pg,
	   const char **ret, uint32_t *nret, uint32_t max)
{
	struct plan_gsi_lookup *nl;

	if (pg->nlookups >= GSI_LOOKUPS_MAX || *nret + g->ncols > max)
		return nk_error_set(c->err, ERRCODE_FEATURE_NOT_SUPPORTED,
				    "a statement maintains %d global secondary indexes at most",
				    GSI_LOOKUPS_MAX);
	if ((nl = rarena_alloc(c->a, (pg->nlookups + 1) * sizeof(*nl))) == NULL)
		return nk_error_oom(c->err);
	if (pg->nlookups)
		memcpy(nl, pg->lookups, pg->nlookups * sizeof(*nl));
	pg->lookups = nl;
	return gsi_lookup_of(c, t, g, &nl[pg->nlookups++], ret, nret);
}

/* `RETURNING "alias"."c1", ...` of the columns <ret>, and `"alias".xmax = 0` (the row
 * was inserted, not updated) when <inserted>. */
static const char *
returning_text(struct pctx *c, const struct prel *t, const char **ret, uint32_t nret,
	       bool inserted)
{
	const char *q = t->r->alias ? t->r->alias : t->r->name;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = nk_memstream(&buf, &len);

	if (f == NULL)
		return nk_error_oom(c->err), NULL;
	fputs("RETURNING ", f);
	for (uint32_t i = 0; i < nret; i++) {
		fputs(i ? ", " : "", f);
		sql_put_ident(f, q);
		fputc('.', f);
		sql_put_ident(f, ret[i]);
	}
	if (inserted) {
		fputs(", ", f);
		sql_put_ident(f, q);
		fputs(".xmax = 0", f);
	}
	return plan_gsi_text(c, f, &buf, &len);
}

/* INSERT_AFTER: what its RETURNING cannot follow. */
static bool
check_insert_after(struct pctx *c, const struct prel *t, const struct plan_gsi *pg)
{
	const struct stmt_insert *ins = c->s->insert;

	if ((c->s->flags & STMT_F_ON_CONFLICT) && ins->nconflict_cols == 0 &&
	    ins->conflict_constraint == NULL) {
		nk_error_set(c->err, ERRCODE_FEATURE_NOT_SUPPORTED,
			     "ON CONFLICT without a conflict target is not supported on \"%s\" "
			     "while global secondary index \"%s\" is enabled", t->r->name,
			     pg->name);
		nk_error_detail(c->err, "A conflict on the index's values would have to skip "
				"the row, and they are checked on another shard.");
		nk_error_hint(c->err, "Name the conflict target: ON CONFLICT (columns).");
		return false;
	}
	for (uint32_t i = 0; i < ins->nset_cols; i++)
		if (ins->set_cols[i] && plan_owner_gsi(c, t, ins->set_cols[i]))
			return nk_error_nk013(c->err, 145);
	return true;
}

/* ---- UPDATE ---- */

/* Is <col> an indexed column of an enabled GSI of <t>? */
static bool
indexed_by_enabled(const struct pctx *c, const struct prel *t, const char *col)
{
	struct gsi_ref g;

	for (uint32_t i = 0; i < topo_image_gsi_count(c->img); i++)
		for (uint32_t k = 0; gsi_of(c, t, i, &g) && k < g.ncols; k++)
			if (g.role[k] == 'i' && gsi_same(g.cols[k], col))
				return true;
	return false;
}

/* plan_gsi_assignable: see plan_int.h. */
bool
plan_gsi_assignable(const struct pctx *c, const struct prel *t, const char *col)
{
	return c->s->kind == STMT_UPDATE &&
	       (c->in->sess->gsi_step || indexed_by_enabled(c, t, col));
}

static bool
update_refused(struct pctx *c, const struct prel *t, const char *why)
{
	nk_error_set(c->err, ERRCODE_FEATURE_NOT_SUPPORTED,
		     "an UPDATE of an indexed column of \"%s\" %s is not supported", t->r->name,
		     why);
	nk_error_hint(c->err, "Update the rows of \"%s\" alone, selected by its own columns, "
		      "without RETURNING.", t->r->name);
	return false;
}

/* The text of tokens [<a>, <b>) of the statement (arena). */
static const char *
tok_text(struct pctx *c, const struct ptok *t, uint32_t a, uint32_t b)
{
	const char *sql = c->in->sql ? c->in->sql : c->s->sql;
	const char *out = a < b ? rarena_strndup(c->a, sql + t[a].start,
						 t[b - 1].start + t[b - 1].len - t[a].start) :
				  NULL;

	return out != NULL || a >= b ? out : (nk_error_oom(c->err), NULL);
}

/* `UPDATE <target> SET <assign> [WHERE <cond>]` split at its top-level SET and WHERE;
 * false (with the refusal) for another shape (WITH, FROM). */
static bool
split_update(struct pctx *c, const struct prel *t, const char **target, const char **assign,
	     const char **cond)
{
	const char *sql = c->in->sql ? c->in->sql : c->s->sql;
	struct ptok *tk;
	uint32_t n, set = 0, where = 0;
	int depth = 0;

	if (sql == NULL || !plan_lex(c->a, sql, &tk, &n))
		return nk_error_oom(c->err);
	uint32_t u = 0;

	while (n > 0 && ptok_is(sql, &tk[n - 1], ";"))
		n--;
	if (n > 0 && ptok_is(sql, &tk[0], "explain"))	/* (EXPLAIN's statement) */
		while (u < n && !ptok_is(sql, &tk[u], "update") && !ptok_is(sql, &tk[u], "with"))
			u++;
	if (u >= n || !ptok_is(sql, &tk[u], "update"))
		return update_refused(c, t, "under WITH");
	for (uint32_t i = u + 1; i < n; i++) {
		depth += ptok_is(sql, &tk[i], "(") ? 1 : ptok_is(sql, &tk[i], ")") ? -1 : 0;
		if (depth != 0)
			continue;
		if (set == 0 && ptok_is(sql, &tk[i], "set"))
			set = i;
		else if (set != 0 && where == 0 && ptok_is(sql, &tk[i], "where"))
			where = i;
		else if (set != 0 && where == 0 && ptok_is(sql, &tk[i], "from") &&
			 !ptok_is(sql, &tk[i - 1], "distinct"))
			return update_refused(c, t, "with FROM");
	}
	if (set < u + 2 || set + 1 >= (where ? where : n))
		return update_refused(c, t, "in this form");
	*target = tok_text(c, tk, u + 1, set);
	*assign = tok_text(c, tk, set + 1, where ? where : n);
	*cond = where ? tok_text(c, tk, where + 1, n) : NULL;
	return *target != NULL && *assign != NULL && (where == 0 || *cond != NULL);
}

/* `<q>."c1", ...` of the columns <ret>[from..n) into <f>. */
static void
put_cols(FILE *f, const char *q, const char *const *ret, uint32_t from, uint32_t n)
{
	for (uint32_t i = from; i < n; i++) {
		fputs(i > from ? ", " : "", f);
		sql_put_ident(f, q);
		fputc('.', f);
		sql_put_ident(f, ret[i]);
	}
}

/* The lock and update texts of <pg> from the list <ret> (the shard key first). */
static bool
update_texts(struct pctx *c, const struct prel *t, struct plan_gsi *pg, const char **ret,
	     uint32_t nret)
{
	const char *target = NULL, *assign = NULL, *cond = NULL;
	const char *q = t->r->alias ? t->r->alias : t->r->name;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	if (!split_update(c, t, &target, &assign, &cond) ||
	    (f = nk_memstream(&buf, &len)) == NULL)
		return nk_error_is_set(c->err) ? false : nk_error_oom(c->err);
	fputs("SELECT ", f);
	sql_put_ident(f, q);
	fputs(".ctid, ", f);
	put_cols(f, q, ret, 0, nret);
	fprintf(f, " FROM %s%s%s FOR UPDATE OF ", target, cond ? " WHERE " : "",
		cond ? cond : "");
	sql_put_ident(f, q);
	if ((pg->lock = plan_gsi_text(c, f, &buf, &len)) == NULL ||
	    (f = nk_memstream(&buf, &len)) == NULL)
		return nk_error_is_set(c->err) ? false : nk_error_oom(c->err);
	fprintf(f, "UPDATE %s SET %s FROM (VALUES ", target, assign);
	if ((pg->update = plan_gsi_text(c, f, &buf, &len)) == NULL ||
	    (f = nk_memstream(&buf, &len)) == NULL)
		return nk_error_is_set(c->err) ? false : nk_error_oom(c->err);
	fputs(") AS __neki_v(__neki_ctid", f);
	for (uint32_t i = 0; i < pg->nkey; i++)
		fprintf(f, ", __neki_k%u", i);
	fprintf(f, ", __neki_n) WHERE (%s) AND ", cond ? cond : "true");
	sql_put_ident(f, q);
	fputs(".ctid = __neki_v.__neki_ctid", f);
	for (uint32_t i = 0; i < pg->nkey; i++) {
		fputs(" AND ", f);
		put_cols(f, q, ret, i, i + 1);
		fprintf(f, " = __neki_v.__neki_k%u", i);
	}
	fputs("\nRETURNING __neki_v.__neki_n, ", f);
	put_cols(f, q, ret, 0, nret);
	return (pg->update_tail = plan_gsi_text(c, f, &buf, &len)) != NULL;
}

/* An UPDATE assigning an indexed column of an enabled GSI: its steps (plan.gsi). */
static bool
plan_gsi_update(struct pctx *c, const struct prel *t)
{
	const char *ret[GSI_COLS_MAX * GSI_LOOKUPS_MAX];
	uint32_t nret = 0;
	struct plan_gsi *pg = NULL;
	struct gsi_ref g;
	bool assigns = false;

	for (uint32_t i = 0; i < c->s->nset_cols; i++)
		assigns = assigns || (c->s->set_cols[i] && indexed_by_enabled(c, t,
									     c->s->set_cols[i]));
	if (!assigns)
		return true;
	if (c->s->flags & STMT_F_RETURNING)
		return nk_error_nk013(c->err, 104);
	if (c->s->nrels != 1 || c->s->nscopes != 1)
		return update_refused(c, t, "reading other tables or subqueries");
	for (uint32_t k = 0; k < t->expr->ncolumns; k++)	/* (the shard key first) */
		(void)returned(ret, &nret, t->expr->columns[k]);
	for (uint32_t i = 0; i < topo_image_gsi_count(c->img); i++) {
		if (!gsi_of(c, t, i, &g))
			continue;
		if (pg == NULL && (pg = new_gsi(c, PLAN_GSI_UPDATE, g.g.name)) == NULL)
			return false;
		if (!add_lookup(c, t, &g, pg, ret, &nret, NK_ARRAY_LEN(ret)))
			return false;
	}
	pg->inserted_pos = -1;
	pg->nkey = t->expr->ncolumns;
	if (!update_texts(c, t, pg, ret, nret))
		return false;
	c->out->gsi = pg;
	return true;
}

/* ---- SELECT ---- */

/* A conjunct `col = v` / `col IN (...)` of <cd> on the owner (rels[0]), or NULL. */
static const struct stmt_pred *
indexed_pred(struct pctx *c, const struct stmt_cond *cd, const char *col)
{
	if (cd != NULL && cd->kind == STMT_C_PRED) {
		const struct stmt_pred *p = cd->pred;

		return (p->op == STMT_P_EQ || p->op == STMT_P_IN) && !p->lhs_is_expr &&
		       gsi_same(p->column, col) && plan_resolve_col(c, 0, p->qual, col) == 0 ? p : NULL;
	}
	for (uint32_t i = 0; cd != NULL && cd->kind == STMT_C_AND && i < cd->nargs; i++) {
		const struct stmt_pred *p = indexed_pred(c, cd->args[i], col);

		if (p != NULL)
			return p;
	}
	return NULL;
}

/* Does the statement read only the owner, every shard of it, in one scope? */
static bool
read_shape(const struct pctx *c, const struct prel *t)
{
	const struct plan *o = c->out;

	return c->s->kind == STMT_SELECT && c->nrels == 1 && c->s->nscopes == 1 &&
	       o->kind == PLAN_SCATTER && o->nshards > 1 && t->sharded && t->typed &&
	       ks_expr_is_column(t->expr) &&
	       !(c->s->flags & (STMT_F_UNION | STMT_F_INTERSECT | STMT_F_INTO));
}

/* The end of the name (qualified or not, quoted or not) at <p> of <sql>; NULL when none. */
static const char *
past_name(const char *sql, const char *p)
{
	for (;;) {
		const char *q = *p == '"' ? sql_skip_item(sql, p) : p;

		if (q == p)	/* (not quoted) */
			while (sql_ident_char(*q))
				q++;
		if (q == p)
			return NULL;
		if (*q != '.')
			return q;
		p = q + 1;
	}
}

/* [*start, *end) of <sql>: the table name after the top level's FROM of a one-table SELECT
 * (read_shape()), past ONLY. */
static bool
from_table_span(const char *sql, size_t *start, size_t *end)
{
	int depth = 0;

	for (const char *p = sql, *e; *p != '\0'; p = e) {
		if ((e = sql_skip_item(sql, p)) != p)
			continue;	/* (a quoted name, string or comment) */
		e = p;
		while (sql_ident_char(*e))
			e++;
		if (e == p) {
			depth += *p == '(' ? 1 : *p == ')' ? -1 : 0;
			e = p + 1;
			continue;
		}
		if (depth != 0 || e - p != 4 || strncasecmp(p, "from", 4) != 0)
			continue;
		p = e + strspn(e, " \t\r\n");
		if (strncasecmp(p, "only", 4) == 0 && !sql_ident_char(p[4]))
			p += 4 + strspn(p + 4, " \t\r\n");
		if ((e = past_name(sql, p)) == NULL)
			return false;
		*start = (size_t)(p - sql);
		*end = (size_t)(e - sql);
		return true;
	}
	return false;
}

/* Does unique GSI <g> hold every column the statement reads, with the owner's types? */
static bool
covers(const struct pctx *c, const struct prel *t, const struct gsi_ref *g)
{
	const struct plan_catalog *cat = c->in->cat;
	const char *schema = g->g.schema ? g->g.schema : t->schema;

	if (!g->g.unique || (c->s->flags & STMT_F_LOCKING) || cat == NULL ||
	    cat->column_type == NULL || c->s->ncols_read == 0 || c->in->sql == NULL)
		return false;
	for (uint32_t k = 0; k < c->s->ncols_read; k++) {
		const char *col = c->s->cols_read[k];
		uint32_t type = cat->column_type(cat->arg, t->schema, t->r->name, col);
		bool held = false;

		for (uint32_t i = 0; i < g->ncols; i++)
			held = held || gsi_same(g->cols[i], col);
		if (!held || type == 0 ||
		    cat->column_type(cat->arg, schema, g->g.table, col) != type)
			return false;	/* (a star, another column, another type) */
	}
	return true;
}

/* The statement's text reading <g>'s lookup table in place of <t> (`FROM lookup AS t`),
 * when the GSI covers it; NULL otherwise (or on no memory: <err>). */
static const char *
cover_text(struct pctx *c, const struct prel *t, const struct gsi_ref *g)
{
	const char *sql = c->in->sql;
	char *buf = NULL;
	size_t len = 0, start, end;
	FILE *f;

	if (!covers(c, t, g) || !from_table_span(sql, &start, &end) ||
	    (f = nk_memstream(&buf, &len)) == NULL)
		return NULL;
	fwrite(sql, 1, start, f);
	plan_gsi_put_lookup(f, t, g);
	if (t->r->alias == NULL) {
		fputs(" AS ", f);
		sql_put_ident(f, t->r->name);
	}
	fputs(sql + end, f);
	return plan_gsi_text(c, f, &buf, &len);
}

/* The lookup read of one-column GSI <g> for predicate <pred>: false with <err>; *<done>
 * when the plan has it (not when no value can match). */
static bool
gsi_read(struct pctx *c, const struct prel *t, const struct gsi_ref *g,
	 const struct stmt_pred *pred, bool *done)
{
	char *buf = NULL;
	size_t len = 0;
	uint32_t nvals = 0;
	struct plan_gsi *pg;
	const char *sql;
	FILE *f;

	if (!g->g.unique &&
	    plan_gsi_cost_scatter(c->in->sess->db, g->g.name, !c->in->sess->explain)) {
		c->out->gsi_not_used = g->g.name;	/* (the scatter costs less) */
		return true;
	}
	if ((f = nk_memstream(&buf, &len)) == NULL)
		return nk_error_oom(c->err);
	fputs("SELECT ", f);
	sql_put_ident(f, t->key_col);
	fputs(" FROM ", f);
	plan_gsi_put_lookup(f, t, g);
	fputs(" WHERE ", f);
	sql_put_ident(f, g->cols[0]);
	fputs(" IN (", f);
	for (uint32_t i = 0; i < pred->nvals; i++) {
		const char *text;
		bool is_null;

		if (!plan_gsi_value_text(c, &pred->vals[i], &text, &is_null) ||
		    (text == NULL && !is_null)) {
			fclose(f);
			free(buf);
			nk_error_clear(c->err);	/* (an expression, or a value the router cannot
						 * read: the scatter stands) */
			return true;
		}
		if (is_null)
			continue;
		fputs(nvals++ ? ", " : "", f);
		sql_put_literal(f, text, strlen(text));
	}
	fputc(')', f);
	if ((sql = plan_gsi_text(c, f, &buf, &len)) == NULL)
		return false;
	if (nvals == 0)
		return true;	/* (nothing equals NULL: the scatter finds no row) */
	if ((pg = new_gsi(c, PLAN_GSI_READ, g->g.name)) == NULL ||
	    !plan_gsi_add_text(c, &pg->first, &pg->nfirst, sql))
		return false;
	pg->unique = g->g.unique;
	pg->owner = (struct plan_key){ t->res.group, t->res.index, t->col_type, -1, t->key_col };
	pg->cover = cover_text(c, t, g);
	if (nk_error_is_set(c->err))
		return false;
	c->out->gsi = pg;
	if (c->out->level < PLAN_FANOUT_MULTI)
		c->out->level = PLAN_FANOUT_MULTI;	/* (spec 3.2: GSI narrowing is multi) */
	*done = true;
	return true;
}

/* ---- the statement ---- */

/* The kind of steps an INSERT or DELETE on <t> takes. */
static enum plan_gsi_kind
write_kind(const struct pctx *c)
{
	if (c->s->kind == STMT_DELETE)
		return PLAN_GSI_DELETE;
	return (c->s->flags & STMT_F_RETURNING) ? PLAN_GSI_INSERT : PLAN_GSI_INSERT_AFTER;
}

static bool
plan_gsi_write(struct pctx *c, const struct prel *t)
{
	const char *ret[GSI_COLS_MAX * GSI_LOOKUPS_MAX];
	uint32_t nret = 0, n = topo_image_gsi_count(c->img);
	struct plan_gsi *pg = NULL;
	struct gsi_ref g;
	bool do_update = (c->s->flags & STMT_F_ON_CONFLICT_UPDATE) != 0, along_failed = false;

	for (uint32_t i = 0; i < n; i++) {
		if (!gsi_of(c, t, i, &g))
			continue;
		if (c->s->kind == STMT_MERGE)
			return nk_error_nk013(c->err, 104);
		if (pg == NULL && (pg = new_gsi(c, write_kind(c), g.g.name)) == NULL)
			return false;
		if (pg->kind == PLAN_GSI_INSERT ? !plan_gsi_insert_first(c, t, &g, pg) :
		    !add_lookup(c, t, &g, pg, ret, &nret, NK_ARRAY_LEN(ret)))
			return false;
		if (pg->kind == PLAN_GSI_INSERT_AFTER &&
		    (pg->nlookups == 1 ? plan_gsi_alongside_shape(c, t) : pg->alongside != NULL) &&
		    !plan_gsi_alongside(c, t, &g, pg)) {
			if (nk_error_is_set(c->err))
				return false;
			along_failed = true;
		}
	}
	if (pg != NULL && along_failed) {	/* (all of them beside it, or none) */
		pg->alongside = NULL;
		pg->nalongside = 0;
	}
	if (pg == NULL || (pg->kind == PLAN_GSI_INSERT && pg->nfirst == 0))
		return true;	/* (no enabled GSI; every row's lookup row skipped) */
	if (pg->kind == PLAN_GSI_INSERT_AFTER && !check_insert_after(c, t, pg))
		return false;
	pg->client_returning = pg->kind == PLAN_GSI_DELETE && (c->s->flags & STMT_F_RETURNING);
	pg->inserted_pos = pg->kind == PLAN_GSI_INSERT_AFTER && do_update ? (int32_t)nret : -1;
	if (pg->kind != PLAN_GSI_INSERT &&
	    (pg->returning = returning_text(c, t, ret, nret, pg->inserted_pos >= 0)) == NULL)
		return false;
	c->out->gsi = pg;
	return true;
}

/* ---- COPY FROM ---- */

/* The fields of the COPY's input that the lookup columns <ret> are, into <pg>; NK013 44
 * when the input lacks one (its value would come from a default the router cannot see). */
static bool
copy_fields(struct pctx *c, const struct prel *t, struct plan_gsi *pg, const char **ret,
	    uint32_t nret)
{
	const struct plan_catalog *cat = c->in->cat;
	struct plan_gsi_field *f = rarena_alloc(c->a, nret * sizeof(*f));

	if (f == NULL)
		return nk_error_oom(c->err);
	for (uint32_t k = 0; k < nret; k++) {
		int at = plan_copy_field(c, t, ret[k]);

		if (at < 0) {
			nk_error_nk013(c->err, 44);
			nk_error_detail(c->err, "Column \"%s\" of a global secondary index is not "
					"in the COPY's column list; the router writes each row's "
					"lookup row from the row's own fields.", ret[k]);
			nk_error_hint(c->err, "Name the column in the COPY's column list.");
			return false;
		}
		f[k].column = ret[k];
		f[k].field = (uint32_t)at;
		f[k].type_oid = cat != NULL && cat->column_type != NULL ?
				cat->column_type(cat->arg, t->schema, t->r->name, ret[k]) : 0;
	}
	pg->fields = f;
	pg->nfields = nret;
	return true;
}

/* plan_gsi_copy: see plan_int.h. */
bool
plan_gsi_copy(struct pctx *c, const struct prel *t)
{
	const char *ret[GSI_COLS_MAX * GSI_LOOKUPS_MAX];
	uint32_t nret = 0, n = topo_image_gsi_count(c->img);
	struct plan_gsi *pg = NULL;
	struct gsi_ref g;

	if (c->in->sess->shard[0])
		return true;	/* (__neki.shard: the shard's own rows) */
	for (uint32_t i = 0; i < n; i++) {
		if (!gsi_of(c, t, i, &g))
			continue;
		if (pg == NULL && (pg = new_gsi(c, PLAN_GSI_COPY, g.g.name)) == NULL)
			return false;
		if (!add_lookup(c, t, &g, pg, ret, &nret, NK_ARRAY_LEN(ret)))
			return false;
	}
	if (pg == NULL)
		return true;
	pg->inserted_pos = -1;
	if (!copy_fields(c, t, pg, ret, nret))
		return false;
	c->out->gsi = pg;
	return true;
}

/* Is <p> the lookup table of an enabled GSI (not disabled by V11)? *<g> then. */
static bool
lookup_of(const struct pctx *c, const struct prel *p, struct topo_img_gsi *g)
{
	for (uint32_t i = 0; i < topo_image_gsi_count(c->img); i++) {
		topo_image_gsi(c->img, i, g);
		if (g->enabled && gsi_same(g->db, c->in->sess->db) && gsi_same(g->table, p->r->name) &&
		    (g->schema == NULL || gsi_same(g->schema, p->schema)) &&
		    !lookup_pk_differs(c, g, g->schema ? g->schema : p->schema))
			return true;
	}
	return false;
}

/* plan_gsi_refuse_lookups: see plan_int.h. */
bool
plan_gsi_refuse_lookups(struct pctx *c)
{
	struct topo_img_gsi g;

	if (c->in->sess->gsi_step || c->in->sess->explain)
		return true;
	for (uint32_t i = 0; i < c->nrels; i++) {
		if (!lookup_of(c, &c->rels[i], &g))
			continue;
		nk_error_set(c->err, ERRCODE_FEATURE_NOT_SUPPORTED, "relation \"%s\" is the lookup "
			     "table of global secondary index \"%s\" and cannot be read or "
			     "written through the router", g.table, g.name);
		nk_error_detail(c->err, "The router keeps its rows equal to the rows of \"%s\".",
				g.owner_table);
		nk_error_hint(c->err, "Query \"%s\" by the indexed columns: the router reads "
			      "the lookup table itself.", g.owner_table);
		return false;
	}
	return true;
}

/* A write to an owner that is not the statement's own (a data-modifying WITH query): its
 * lookup rows would not follow, 104. */
static bool
check_cte_writes(struct pctx *c)
{
	const char *name;

	for (uint32_t i = 0; i < c->nrels; i++) {
		const struct prel *p = &c->rels[i];
		bool own = i == 0 && c->s->kind != STMT_SELECT;

		if (p->r->is_target && !own && plan_gsi_enabled(c, p, &name))
			return nk_error_nk013(c->err, 104);
	}
	return true;
}

/* plan_gsi: see plan_int.h. */
bool
plan_gsi(struct pctx *c)
{
	const struct prel *t = c->nrels ? &c->rels[0] : NULL;
	uint32_t n = topo_image_gsi_count(c->img);
	struct gsi_ref g;

	if (t == NULL || n == 0 || c->in->sess->shard[0] || c->in->sess->gsi_step)
		return true;	/* (__neki.shard: the shard's own rows; a step: as written) */
	if (!check_cte_writes(c))
		return false;
	if (c->s->kind == STMT_INSERT || c->s->kind == STMT_DELETE || c->s->kind == STMT_MERGE)
		return !t->r->is_target || plan_gsi_write(c, t);
	if (c->s->kind == STMT_UPDATE)
		return !t->r->is_target || plan_gsi_update(c, t);
	if (!read_shape(c, t))
		return true;
	for (uint32_t i = 0; i < n; i++) {
		const struct stmt_pred *pred;
		bool done = false;

		if (!gsi_of(c, t, i, &g) || g.g.write_only ||	/* (being built: not read) */
		    topo_image_list_len(c->img, g.g.columns) != 1 ||
		    (pred = indexed_pred(c, c->s->scopes[0].where, g.cols[0])) == NULL)
			continue;
		if (!gsi_read(c, t, &g, pred, &done) || done)
			return !nk_error_is_set(c->err);
	}
	return true;
}

/* plan_binary_value: see plan_gsi.h. */
char *
plan_binary_value(uint32_t oid, const char *data, int32_t len)
{
	enum ks_type type;
	struct ks_value v;
	struct nk_error err;
	char buf[48], *out;

	if (oid == 16 && len == 1)		/* bool */
		return strdup(data[0] ? "t" : "f");
	if (len < 0 || !ks_type_from_oid(oid, &type) || type == KS_TYPE_DATE ||
	    type == KS_TYPE_TIMESTAMP || type == KS_TYPE_TIMESTAMPTZ || type == KS_TYPE_BYTEA ||
	    !ks_value_from_binary(type, (const uint8_t *)data, (size_t)len, &v, &err))
		return NULL;
	buf[0] = '\0';
	if (ks_type_is_integer(type))
		snprintf(buf, sizeof(buf), "%lld", (long long)v.i);
	else if (type == KS_TYPE_FLOAT4 || type == KS_TYPE_FLOAT8)
		snprintf(buf, sizeof(buf), "%.17g", v.f);
	else if (type == KS_TYPE_UUID)
		for (int i = 0, o = 0; i < 16; i++)
			o += snprintf(buf + o, sizeof(buf) - (size_t)o, "%s%02x",
				      i == 4 || i == 6 || i == 8 || i == 10 ? "-" : "", v.uuid[i]);
	out = ks_type_is_text(type) || type == KS_TYPE_NUMERIC ? strndup(v.bytes, v.len) :
	      strdup(buf);
	ks_value_cleanup(&v);
	return out;
}

/* plan_gsi_truncate: see plan_int.h. */
bool
plan_gsi_truncate(struct pctx *c)
{
	const struct stmt *s = c->s;
	struct topo_img_gsi g;

	if (s->tag == NULL || strcmp(s->tag, "TruncateStmt") != 0)
		return true;
	for (uint32_t i = 0; i < s->nrels; i++) {
		const char *schema = s->rels[i].schema ? s->rels[i].schema : c->in->sess->schema;

		for (uint32_t k = 0; k < topo_image_gsi_count(c->img); k++) {
			bool owner, listed = false;

			topo_image_gsi(c->img, k, &g);
			owner = gsi_same(g.owner_table, s->rels[i].name);
			if (!g.enabled || !gsi_same(g.db, c->in->sess->db) ||
			    !(owner || gsi_same(g.table, s->rels[i].name)) ||
			    (g.schema && !gsi_same(g.schema, schema)) ||
			    lookup_pk_differs(c, &g, g.schema ? g.schema : schema))
				continue;
			for (uint32_t j = 0; j < s->nrels; j++)
				listed = listed || gsi_same(s->rels[j].name, owner ? g.table : g.owner_table);
			if (listed)
				continue;
			nk_error_set(c->err, ERRCODE_FEATURE_NOT_SUPPORTED,
				     "TRUNCATE of \"%s\" must also truncate \"%s\", the %s of its "
				     "global secondary index \"%s\"", s->rels[i].name,
				     owner ? g.table : g.owner_table,
				     owner ? "lookup table" : "owner", g.name);
			nk_error_hint(c->err, "TRUNCATE %s, %s", g.owner_table, g.table);
			return false;
		}
	}
	return true;
}

/* plan_gsi_shards: see plan_gsi.h. */
uint32_t
plan_gsi_shards(const void *img, const struct plan_gsi *g, const struct ks_text_ctx *tc,
		const char *const *vals, uint32_t n, const char *const *order, uint32_t norder,
		const char **uids, uint32_t max)
{
	bool all = false, *hit = calloc(norder + 1, sizeof(bool));
	uint32_t out = 0;

	for (uint32_t i = 0; hit != NULL && !all && i < n; i++) {
		struct ks_value v;
		struct nk_error err;
		uint32_t range;
		const char *uid = NULL;

		if (vals[i] == NULL)
			continue;	/* (a NULL key names no owner row) */
		if (ks_value_from_text(g->owner.col_type, vals[i], strlen(vals[i]), tc, &v, &err)) {
			if (topo_image_route(img, g->owner.group, g->owner.index, &v, &range, &err))
				uid = topo_image_range_shard(img, g->owner.group, range);
			ks_value_cleanup(&v);
		}
		all = uid == NULL;	/* (a key that does not route: every shard, no guess) */
		for (uint32_t k = 0; uid != NULL && k < norder; k++)
			hit[k] = hit[k] || gsi_same(order[k], uid);
	}
	for (uint32_t k = 0; k < norder && out < max; k++)
		if (all || hit == NULL || hit[k])
			uids[out++] = order[k];
	free(hit);
	return out;
}
