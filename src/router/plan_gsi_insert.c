/*
 * plan_gsi_insert.c - the lookup rows of an INSERT into the owner of enabled GSIs, written
 * from its VALUES instead of read back from the rows it stored:
 * - an INSERT with its own RETURNING (PLAN_GSI_INSERT): the lookup INSERTs run first, with
 *   each value a constant or a parameter (else 0A000), none missing (NK306), no SELECT or
 *   ON CONFLICT (0A000); plan_gsi_insert_first();
 * - any other one-row INSERT ... VALUES (PLAN_GSI_INSERT_AFTER) whose lookup values are all
 *   given, each a constant or a parameter of the lookup column's own type, into a table no
 *   rule or BEFORE INSERT trigger rewrites: the lookup INSERTs as templates over the
 *   statement's slots ($k: slot k - 1), which the executor sends beside the statement
 *   (src/exec/route_gsi.c: one round instead of two); plan_gsi_alongside_shape(),
 *   plan_gsi_alongside().
 */
#include "neki/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "neki/memstream.h"
#include "neki/sqlscan.h"
#include "plan_gsi_int.h"

/* Position of <col> among the INSERT's cells, or -1. */
static int
cell_of(const struct pctx *c, const struct prel *t, const char *col)
{
	const struct stmt_insert *ins = c->s->insert;
	const struct plan_catalog *cat = c->in->cat;

	for (uint32_t i = 0; ins->cols && i < ins->ncols; i++)
		if (gsi_same(ins->cols[i], col))
			return (int)i;
	for (uint32_t i = 0; !ins->cols && i < ins->ncols && cat && cat->column_name; i++)
		if (gsi_same(cat->column_name(cat->arg, t->schema, t->r->name, i + 1), col))
			return (int)i;
	return -1;
}

/* plan_gsi_value_text: see plan_gsi_int.h. */
bool
plan_gsi_value_text(struct pctx *c, const struct stmt_value *v, const char **text, bool *is_null)
{
	*text = NULL;
	*is_null = v->kind == STMT_V_NULL;
	if ((v->kind != STMT_V_SLOT && v->kind != STMT_V_CONST) ||
	    !plan_value_text(c, v, text, is_null))
		return v->kind != STMT_V_SLOT && v->kind != STMT_V_CONST;
	if (*text != NULL && !*is_null && v->negate) {
		char *neg = (*text)[0] == '-' ? NULL : rarena_alloc(c->a, strlen(*text) + 2);

		if (neg != NULL) {
			neg[0] = '-';
			strcpy(neg + 1, *text);
		}
		*text = neg != NULL ? neg : *text + 1;
	}
	return true;
}

/* Cell <v> of column <col> as a constant (untyped: the lookup column's type decides), or
 * *<is_null>; false with the refusal when it is neither. */
static bool
put_cell(struct pctx *c, FILE *f, const struct gsi_ref *g, const char *col,
	 const struct stmt_value *v, bool *is_null)
{
	const char *text;

	if (!plan_gsi_value_text(c, v, &text, is_null))
		return false;
	if (*is_null)
		return true;
	if (text == NULL) {
		nk_error_set(c->err, ERRCODE_FEATURE_NOT_SUPPORTED,
			     "the router cannot write the lookup row of global secondary index "
			     "\"%s\": the value of column \"%s\" is not a constant or a parameter",
			     g->g.name, col);
		nk_error_hint(c->err, "Give the value of \"%s\" as a constant or a parameter, "
			      "or leave out RETURNING.", col);
		return false;
	}
	sql_put_literal(f, text, strlen(text));
	return true;
}

static bool
null_refused(struct pctx *c, const struct gsi_ref *g, const char *col, char role)
{
	nk_error_set(c->err, ERRCODE_NOT_NULL_VIOLATION,
		     "null value in column \"%s\" of relation \"%s\" violates global secondary "
		     "index \"%s\"", col, g->g.owner_table, g->g.name);
	nk_error_detail(c->err, role == 'i' ?
			"The index is declared with \"ignore_null\": false." :
			"Every lookup row names its owner row by this column.");
	return false;
}

/* Row <row> of the VALUES list as lookup values into <f> after <sep>; *<skip> (nothing
 * written) when its indexed value is NULL under ignore_null. */
static bool
put_row(struct pctx *c, FILE *f, const struct gsi_ref *g, const int *pos, uint32_t row,
	const char *sep, bool *skip)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *tmp = nk_memstream(&buf, &len);
	bool is_null, ok = tmp != NULL;

	*skip = false;
	for (uint32_t k = 0; ok && k < g->ncols; k++) {
		const struct stmt_value *v = &c->s->insert->rows[row].cells[pos[k]];

		fputs(k ? ", " : "(", tmp);
		ok = put_cell(c, tmp, g, g->cols[k], v, &is_null);
		if (ok && is_null && g->role[k] == 'i' && g->g.ignore_null)
			*skip = true;
		else if (ok && is_null)
			ok = null_refused(c, g, g->cols[k], g->role[k]);
	}
	if (tmp == NULL)
		return nk_error_oom(c->err);
	fputc(')', tmp);
	if (fclose(tmp) != 0)
		ok = nk_error_oom(c->err);
	if (ok && !*skip) {
		fputs(sep, f);
		fwrite(buf, 1, len, f);
	}
	free(buf);
	return ok;
}

static bool
insert_refused(struct pctx *c, const struct gsi_ref *g, const char *what)
{
	nk_error_set(c->err, ERRCODE_FEATURE_NOT_SUPPORTED,
		     "%s ... RETURNING into \"%s\" is not supported while global secondary "
		     "index \"%s\" is enabled", what, g->g.owner_table, g->g.name);
	nk_error_hint(c->err, "Leave out RETURNING (the router then takes the lookup values "
		      "from the rows written), or insert with INSERT ... VALUES.");
	return false;
}

/* `INSERT INTO "schema"."lookup" ("c1", ...) VALUES ` of GSI <g>'s lookup rows. */
static void
put_insert_head(FILE *f, const struct prel *t, const struct gsi_ref *g)
{
	fputs("INSERT INTO ", f);
	plan_gsi_put_lookup(f, t, g);
	for (uint32_t k = 0; k < g->ncols; k++) {
		fputs(k ? ", " : " (", f);
		sql_put_ident(f, g->cols[k]);
	}
	fputs(") VALUES ", f);
}

/* plan_gsi_insert_first: see plan_gsi_int.h. */
bool
plan_gsi_insert_first(struct pctx *c, const struct prel *t, const struct gsi_ref *g,
	   struct plan_gsi *pg)
{
	int pos[GSI_COLS_MAX];
	char *buf = NULL;
	size_t len = 0;
	uint32_t nrows = 0;
	FILE *f;

	if (c->s->flags & STMT_F_FROM_SELECT)
		return insert_refused(c, g, "INSERT ... SELECT");
	if (c->s->flags & STMT_F_ON_CONFLICT)
		return insert_refused(c, g, "INSERT ... ON CONFLICT");
	for (uint32_t k = 0; k < g->ncols; k++)
		if ((pos[k] = cell_of(c, t, g->cols[k])) < 0) {
			nk_error_set(c->err, NK_ERRCODE_SHARD_KEY_MISSING,
				     "column \"%s\" of global secondary index \"%s\" is required "
				     "but missing from INSERT", g->cols[k], g->g.name);
			nk_error_hint(c->err, "Give \"%s\" a value in the INSERT, or leave out "
				      "RETURNING (the router then reads it from the rows written).",
				      g->cols[k]);
			return false;
		}
	if ((f = nk_memstream(&buf, &len)) == NULL)
		return nk_error_oom(c->err);
	put_insert_head(f, t, g);
	for (uint32_t r = 0; r < c->s->insert->nrows; r++) {
		bool skip;

		if (!put_row(c, f, g, pos, r, nrows ? ", " : "", &skip)) {
			fclose(f);
			free(buf);
			return false;
		}
		nrows += !skip;
	}
	if (nrows == 0) {
		fclose(f);
		free(buf);
		return true;
	}
	{
		const char *sql = plan_gsi_text(c, f, &buf, &len);

		return sql != NULL && plan_gsi_add_text(c, &pg->first, &pg->nfirst, sql);
	}
}

/* ---- beside the statement ---- */

/* plan_gsi_alongside_shape: see plan_gsi_int.h. */
bool
plan_gsi_alongside_shape(const struct pctx *c, const struct prel *t)
{
	const struct plan_catalog *cat = c->in->cat;
	const uint32_t refused = STMT_F_FROM_SELECT | STMT_F_ON_CONFLICT | STMT_F_CTE |
			     STMT_F_WRITING_CTE | STMT_F_SUBQUERY | STMT_F_RETURNING;

	return c->s->insert != NULL && c->s->insert->nrows == 1 && (c->s->flags & refused) == 0 &&
	       (c->s->flags & STMT_F_FROM_VALUES) && cat != NULL && cat->column != NULL &&
	       cat->rewrites_insert != NULL &&
	       !cat->rewrites_insert(cat->arg, t->schema, t->r->name);
}

/* Column <col> of <schema>.<table> from the catalog into <out>. */
static bool
column_named(const struct pctx *c, const char *schema, const char *table, const char *col,
	     struct cat_column *out)
{
	const struct plan_catalog *cat = c->in->cat;

	for (uint32_t n = 1; cat->column(cat->arg, schema, table, n, out); n++)
		if (gsi_same(out->name, col))
			return true;
	return false;
}

/* Do owner <t>'s column <col> and GSI <g>'s lookup column of that name have one type and
 * type modifier (so that one literal stores one value in both)? */
static bool
same_type(const struct pctx *c, const struct prel *t, const struct gsi_ref *g, const char *col)
{
	struct cat_column a, b;

	return column_named(c, t->schema, t->r->name, col, &a) && !a.generated &&
	       column_named(c, g->g.schema ? g->g.schema : t->schema, g->g.table, col, &b) &&
	       a.type_oid == b.type_oid && a.typmod == b.typmod;
}

/* plan_gsi_alongside: see plan_gsi_int.h. */
bool
plan_gsi_alongside(struct pctx *c, const struct prel *t, const struct gsi_ref *g,
		   struct plan_gsi *pg)
{
	const struct stmt_value *row = c->s->insert->rows[0].cells;
	char *buf = NULL;
	size_t len = 0;
	const char *sql;
	int pos[GSI_COLS_MAX];
	FILE *f;

	for (uint32_t k = 0; k < g->ncols; k++) {
		const struct stmt_value *v;

		if ((pos[k] = cell_of(c, t, g->cols[k])) < 0)
			return false;	/* (a default fills it: the stored row says) */
		v = &row[pos[k]];
		if (v->kind != STMT_V_SLOT || v->negate || v->is_array || v->cast != NULL ||
		    !same_type(c, t, g, g->cols[k]))
			return false;
	}
	if ((f = nk_memstream(&buf, &len)) == NULL)
		return nk_error_oom(c->err);
	put_insert_head(f, t, g);
	for (uint32_t k = 0; k < g->ncols; k++)
		fprintf(f, "%s$%u", k ? ", " : "(", row[pos[k]].slot + 1);
	fputc(')', f);
	return (sql = plan_gsi_text(c, f, &buf, &len)) != NULL &&
	       plan_gsi_add_text(c, &pg->alongside, &pg->nalongside, sql);
}
