/*
 * merge_final.c - the final combine SQL: after combining, the values the router cannot print
 * exactly itself (avg, float sums, aggregates over DISTINCT values or with ORDER BY inside,
 * stddev and variance, xmlagg and the range aggregates, jsonb_object_agg, expressions over
 * aggregates and grouped values, HAVING) are computed by one Postgres from a VALUES list with
 * one row per group, and their values read back into the result rows (in the format the
 * final query sent them: the executor asks for the client's binary formats).
 * Entry points: merge_final_build(), merge_agg_final_desc(), merge_agg_final_row(),
 * merge_agg_final_done(), merge_final_formats().
 */
#include "neki/base.h"

#include "merge_int.h"

#include "neki/proto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool
bad_partial(struct nk_error *err, const struct mv_type *t)
{
	return nk_error_set(err, ERRCODE_FEATURE_NOT_SUPPORTED,
			    "cannot combine partial aggregates of type %u across "
			    "shards", t->oid);
}

static bool
is_float(const struct mv_type *t)
{
	return t->kind == MV_FLOAT4 || t->kind == MV_FLOAT8;
}

static bool
col_needs_final(struct merge *m, uint32_t i)
{
	const struct plan_merge_col *c = &m->spec->cols[i];
	const struct plan_merge_agg *a;

	if (c->kind == PLAN_MCOL_EXPR)
		return true;
	if (c->kind != PLAN_MCOL_AGG)
		return false;
	a = &m->spec->aggs[c->agg];
	switch (a->kind) {
	case PLAN_AGG_AVG:
	case PLAN_AGG_DISTINCT:
	case PLAN_AGG_VARIANCE:
	case PLAN_AGG_REAGG:
	case PLAN_AGG_JSONB_OBJECT_AGG:
		return true;
	case PLAN_AGG_SUM:	/* floats: printed by Postgres; interval, money: added there */
		return m->types[a->col].kind != MV_INT && m->types[a->col].kind != MV_NUMERIC;
	default:
		return a->nkeys > 0;
	}
}

static void
mt_quoted(struct mtext *t, const uint8_t *p, uint32_t len)
{
	mtext_str(t, "'");
	for (uint32_t i = 0; i < len; i++)
		mtext_add(t, p[i] == '\'' ? "''" : (const char *)p + i, p[i] == '\'' ? 2 : 1);
	mtext_str(t, "'");
}

/* Text form of a non-NULL value of column <c> (binary numbers and bools converted); malloc'd. */
static char *
val_text(struct merge *m, uint32_t c, const struct proto_value *v)
{
	const struct mv_type *t = &m->types[c];
	char buf[48];
	int64_t i;
	double f;
	struct mdec d;
	char *s;

	if (!t->binary)
		return strndup((const char *)v->p, v->len);
	if (is_float(t)) {
		if (!mv_float(t, v, &f))
			return NULL;
		return snprintf(buf, sizeof(buf), "%.17g", f), strdup(buf);
	}
	switch (t->kind) {
	case MV_INT:
		if (!mv_int(t, v, &i))
			return NULL;
		snprintf(buf, sizeof(buf), "%lld", (long long)i);
		return strdup(buf);
	case MV_BOOL:
		return strdup(v->len == 1 && v->p[0] ? "t" : "f");
	case MV_NUMERIC:
		if (!mdec_from_binary(&d, t->oid, v->p, v->len))
			return NULL;
		s = mdec_text(&d);
		mdec_free(&d);
		return s;
	default:
		return NULL;
	}
}

/* '<text>'::<type> (NULL::<type> when <text> is NULL). */
static void
typed(struct mtext *t, const char *text, const char *type)
{
	if (text)
		mt_quoted(t, (const uint8_t *)text, (uint32_t)strlen(text));
	else
		mtext_str(t, "NULL");
	mtext_str(t, "::");
	mtext_str(t, type);
}

/*
 * The final query reads every group's partial values from a VALUES list and computes each
 * value with one expression over its columns (so Postgres plans each sub-SELECT once):
 *   SELECT <expr>, ... FROM (VALUES (1, <cells of group 1>), ...) AS __neki_v(n, c3, c5, ..)
 *   ORDER BY __neki_v.n
 * A cell is one partial column of a group, typed for its use.
 */
enum fcell_how {
	FC_VALUE = 0,	/* the value, typed */
	FC_VAR_N,	/* variance count: NULL when the result is NULL (no values; sample: one) */
	FC_VAR_SUM,	/* variance sums: NaN when a NaN or an infinity was summed */
};

struct fcell {
	uint32_t col;		/* shard column */
	const char *type;	/* SQL type of the cell */
	enum fcell_how how;
	bool sample;		/* FC_VAR_N */
};

struct fsql {
	struct mtext t;		/* the select list, then the whole query */
	struct fcell *cells;
	uint32_t ncells, cap;
	bool failed;
};

/* " __neki_v.c<col>": a reference to the cell of column <col>, registered on first use. */
static void
cell(struct fsql *f, uint32_t col, const char *type, enum fcell_how how, bool sample)
{
	char buf[32];
	uint32_t i;

	for (i = 0; i < f->ncells && f->cells[i].col != col; i++)
		;
	if (i == f->ncells) {
		if (f->ncells == f->cap) {
			uint32_t cap = f->cap ? 2 * f->cap : 16;
			struct fcell *c = realloc(f->cells, cap * sizeof(*c));

			if (!c) {
				f->failed = true;
				return;
			}
			f->cells = c;
			f->cap = cap;
		}
		f->cells[f->ncells++] = (struct fcell){ col, type, how, sample };
	}
	snprintf(buf, sizeof(buf), "__neki_v.c%u", col);
	mtext_str(&f->t, buf);
}

/* The cell of column <c> typed as the column (a type the router cannot name: refused). */
static bool
value_cell(struct merge *m, struct fsql *f, uint32_t c, struct nk_error *err)
{
	const char *type = mv_sql_name(&m->types[c]);

	if (!type)
		return nk_error_set(err, ERRCODE_FEATURE_NOT_SUPPORTED,
				    "cannot compute an expression over aggregates of "
				    "type %u across shards", m->types[c].oid);
	cell(f, c, type, FC_VALUE, false);
	return true;
}

/* The collected partials of column <c> (merge_agg.c: a text array of them) as <type>[]. */
static bool
collected_cell(struct merge *m, struct fsql *f, uint32_t c, struct nk_error *err)
{
	const char *type = mv_type_name(mv_array_of(m->types[c].oid));

	if (!type)
		return bad_partial(err, &m->types[c]);
	cell(f, c, type, FC_VALUE, false);
	return true;
}

/* (SELECT string_agg(v, 'd' ORDER BY k1) FROM unnest(<k1 array>, <v array>) AS u(k1, v)) */
static bool
ordered_sql(struct merge *m, struct fsql *f, const struct plan_merge_agg *a,
	    struct nk_error *err)
{
	char name[16];

	mtext_str(&f->t, "(SELECT ");
	mtext_str(&f->t, a->final);
	mtext_str(&f->t, " FROM unnest(");
	for (uint32_t k = 0; k < a->nkeys; k++) {
		if (!value_cell(m, f, a->keycol + k, err))
			return false;
		mtext_str(&f->t, ", ");
	}
	if (!value_cell(m, f, a->col, err))
		return false;
	mtext_str(&f->t, ") AS u(");
	for (uint32_t k = 0; k < a->nkeys; k++) {
		snprintf(name, sizeof(name), "k%u, ", k + 1);
		mtext_str(&f->t, name);
	}
	mtext_str(&f->t, "v))");
	return true;
}

/*
 * (SELECT <final> FROM unnest(<array>) AS e): DISTINCT (the union of the shards' distinct
 * values), REAGG (the shards' partials, e.g. xmlagg(e)), jsonb_object_agg (the pairs of the
 * shards' objects), sum of interval or money (the shards' sums).
 */
static bool
unnest_sql(struct merge *m, struct fsql *f, const struct plan_merge_agg *a, const char *final,
	   struct nk_error *err)
{
	bool object = a->kind == PLAN_AGG_JSONB_OBJECT_AGG;

	mtext_str(&f->t, "(SELECT ");
	mtext_str(&f->t, object ? "jsonb_object_agg(x.key, x.value)" : final);
	mtext_str(&f->t, " FROM unnest(");
	if (!(a->kind == PLAN_AGG_DISTINCT ? value_cell(m, f, a->col, err)
					   : collected_cell(m, f, a->col, err)))
		return false;
	mtext_str(&f->t, object ? ") AS e, jsonb_each(e) AS x)" : ") AS e)");
	return true;
}

/*
 * stddev / variance of numeric from the combined count, sum and sum of squares, as
 * Postgres' numeric_stddev_internal computes it: NULL without values (sample: with one);
 * NaN when a NaN or an infinity was summed; else (N * Sxx - Sx * Sx) / (N * (N - 1)) (or
 * N * N), 0 when the numerator is not positive, at the division's scale; stddev rounds the
 * square root at that scale (sqrt() at its own, larger scale, rounded again exactly: a value
 * half-way between two is decided by squaring it).
 */
static void
variance_sql(struct fsql *f, const struct plan_merge_agg *a)
{
	if (a->root)
		mtext_str(&f->t, "(SELECT CASE WHEN v = 'NaN' THEN v WHEN s * s > v AND round(s, r) "
			  "- s = s - trunc(s, r) AND s <> trunc(s, r) THEN trunc(s, r) ELSE "
			  "round(s, r) END FROM (SELECT v, sqrt(v) AS s, scale(v) AS r FROM (SELECT ");
	mtext_str(&f->t, "(SELECT CASE WHEN q <= 0 THEN 0::numeric ELSE q / d END FROM (SELECT ");
	cell(f, a->col2, "numeric", FC_VAR_N, a->sample);
	mtext_str(&f->t, " * ");
	cell(f, a->col3, "numeric", FC_VAR_SUM, false);
	mtext_str(&f->t, " - ");
	cell(f, a->col, "numeric", FC_VAR_SUM, false);
	mtext_str(&f->t, " * ");
	cell(f, a->col, "numeric", FC_VAR_SUM, false);
	mtext_str(&f->t, " AS q, ");
	cell(f, a->col2, "numeric", FC_VAR_N, a->sample);
	mtext_str(&f->t, a->sample ? " * (" : " * ");
	cell(f, a->col2, "numeric", FC_VAR_N, a->sample);
	mtext_str(&f->t, a->sample ? " - 1) AS d) AS s)" : " AS d) AS s)");
	if (a->root)
		mtext_str(&f->t, " AS v) AS a) AS b)");
}

/* avg: sum / count, in float8 (floats), numeric, or interval / float8 (interval_avg); NULL
 * without values (the sum is NULL then). */
static bool
avg_sql(struct merge *m, struct fsql *f, const struct plan_merge_agg *a, struct nk_error *err)
{
	const struct mv_type *st = &m->types[a->col];
	const char *num = is_float(st) ? "float8" : "numeric";

	mtext_str(&f->t, "(");
	if (st->oid == 1186) {	/* the shards' sums, collected */
		if (!unnest_sql(m, f, a, "sum(e)", err))
			return false;
		num = "float8";
	} else {
		cell(f, a->col, num, FC_VALUE, false);
	}
	mtext_str(&f->t, " / ");
	cell(f, a->col2, num, FC_VALUE, false);
	mtext_str(&f->t, ")");
	return true;
}

static bool
hole_sql(struct merge *m, struct fsql *f, uint32_t ai, struct nk_error *err)
{
	const struct plan_merge_agg *a;

	if (ai & PLAN_MERGE_HOLE_COL)	/* a grouped value */
		return value_cell(m, f, ai & ~PLAN_MERGE_HOLE_COL, err);
	a = &m->spec->aggs[ai];
	if (a->nkeys > 0)
		return ordered_sql(m, f, a, err);
	switch (a->kind) {
	case PLAN_AGG_DISTINCT:
	case PLAN_AGG_REAGG:
	case PLAN_AGG_JSONB_OBJECT_AGG:
		return unnest_sql(m, f, a, a->final, err);
	case PLAN_AGG_VARIANCE:
		variance_sql(f, a);
		return true;
	case PLAN_AGG_AVG:
		return avg_sql(m, f, a, err);
	case PLAN_AGG_SUM:
		if (m->types[a->col].kind != MV_INT && m->types[a->col].kind != MV_NUMERIC &&
		    !is_float(&m->types[a->col]))	/* interval, money */
			return unnest_sql(m, f, a, "sum(e)", err);
		return value_cell(m, f, a->col, err);
	default:
		return value_cell(m, f, a->col, err);
	}
}

static bool
expr_sql(struct merge *m, struct fsql *f, const struct plan_merge_expr *e, struct nk_error *err)
{
	mtext_str(&f->t, "(");
	for (uint32_t i = 0; i <= e->nagg; i++) {
		mtext_str(&f->t, e->text[i]);
		if (i == e->nagg)
			break;
		mtext_str(&f->t, " ");
		if (!hole_sql(m, f, e->agg[i], err))
			return false;
		mtext_str(&f->t, " ");
	}
	mtext_str(&f->t, ")");
	return true;
}

static bool
is_special(const char *s)
{
	return strcmp(s, "NaN") == 0 || strcmp(s, "Infinity") == 0 || strcmp(s, "-Infinity") == 0;
}

/* The text of cell <c> of row <r> (malloc'd; NULL: SQL NULL); false on a value that cannot
 * be read. */
static bool
cell_text(struct merge *m, const struct mrow *r, const struct fcell *c, char **out)
{
	const struct proto_value *v = &r->vals[c->col];

	*out = NULL;
	if (!v->p)
		return true;
	if (!(*out = val_text(m, c->col, v)))
		return false;
	if (c->how == FC_VAR_N) {
		long long n = strtoll(*out, NULL, 10);

		if (n == 0 || (c->sample && n <= 1)) {
			free(*out);
			*out = NULL;
		}
	} else if (c->how == FC_VAR_SUM && is_special(*out)) {
		free(*out);
		*out = strdup("NaN");
		return *out != NULL;
	}
	return true;
}

/* (<n>, <cells>) of row <g>. */
static bool
values_row(struct merge *m, struct fsql *f, struct mtext *t, uint32_t g, struct nk_error *err)
{
	char buf[24];

	snprintf(buf, sizeof(buf), "%s(%u", g ? ", " : "", g + 1);
	mtext_str(t, buf);
	for (uint32_t i = 0; i < f->ncells; i++) {
		char *text;

		if (!cell_text(m, m->rows[g], &f->cells[i], &text))
			return nk_error_set(err, ERRCODE_FEATURE_NOT_SUPPORTED,
					    "cannot compute an expression over "
					    "aggregates of type %u across shards",
					    m->types[f->cells[i].col].oid);
		mtext_str(t, ", ");
		typed(t, text, f->cells[i].type);
		free(text);
	}
	mtext_str(t, ")");
	return true;
}

static bool
build_final(struct merge *m, struct nk_error *err)
{
	const struct plan_merge *s = m->spec;
	struct fsql f = { 0 };
	struct mtext q = { 0 };
	char buf[32];
	bool first = true, ok = true;

	for (uint32_t i = 0; i < s->ncols && ok; i++) {
		if (!m->final_col[i])
			continue;
		mtext_str(&f.t, first ? "" : ", ");
		first = false;
		ok = expr_sql(m, &f, &s->cols[i].expr, err);
	}
	if (ok && s->has_having) {
		mtext_str(&f.t, first ? "" : ", ");
		ok = expr_sql(m, &f, &s->having, err);
	}
	mtext_str(&q, "SELECT ");
	mtext_add(&q, f.t.s ? f.t.s : "", f.t.len);
	mtext_str(&q, " FROM (VALUES ");
	for (uint32_t g = 0; g < m->nrows && ok; g++)	/* the bound checked as it grows */
		ok = values_row(m, &f, &q, g, err) &&
		     (!m->mem_max || m->mem + (int64_t)q.len <= m->mem_max ||
		      merge_mem_charge(m, q.len, err));
	mtext_str(&q, ") AS __neki_v(n");
	for (uint32_t i = 0; i < f.ncells; i++) {
		snprintf(buf, sizeof(buf), ", c%u", f.cells[i].col);
		mtext_str(&q, buf);
	}
	mtext_str(&q, ") ORDER BY __neki_v.n");
	if (ok && (q.failed || f.t.failed || f.failed))
		ok = merge_oom(err);
	ok = ok && merge_mem_charge(m, q.len, err);	/* held until the statement ends */
	free(f.t.s);
	free(f.cells);
	if (!ok) {
		free(q.s);
		return false;
	}
	m->final_sql = q.s;
	return true;
}

/* merge_final_build: see merge_int.h. */
bool
merge_final_build(struct merge *m, struct nk_error *err)
{
	const struct plan_merge *s = m->spec;

	m->final_col = calloc(s->ncols ? s->ncols : 1, sizeof(*m->final_col));
	if (!m->final_col)
		return merge_oom(err);
	for (uint32_t i = 0; i < s->ncols; i++) {
		m->final_col[i] = col_needs_final(m, i);
		m->nfinal += m->final_col[i];
	}
	m->nfinal += s->has_having;
	m->final_fmt = calloc(m->nfinal ? m->nfinal : 1, sizeof(*m->final_fmt));
	if (!m->final_fmt)
		return merge_oom(err);
	for (uint32_t i = 0, k = 0; i < s->ncols; i++)	/* what merge_final_formats() asks */
		if (m->final_col[i])
			m->final_fmt[k++] = m->types[i].binary ? 1 : 0;
	if (!m->nfinal || !m->nrows)
		return true;
	return build_final(m, err);
}

/* merge_final_formats: see merge.h. */
uint32_t
merge_final_formats(const struct merge *m, int16_t *out, uint32_t max)
{
	uint32_t k = 0;

	if (m->state != MERGE_NEED_FINAL)
		return 0;
	for (uint32_t i = 0; i < m->spec->ncols; i++) {
		if (!m->final_col[i])
			continue;
		if (k < max)
			out[k] = m->types[i].binary ? 1 : 0;
		k++;
	}
	if (m->spec->has_having && k < max)
		out[k] = 0;	/* read here: t or f */
	return k + m->spec->has_having;
}

/* merge_agg_final_desc: see merge_int.h. (Without one, the extended protocol's final query
 * sent the formats merge_final_formats() asked for.) */
bool
merge_agg_final_desc(struct merge *m, const uint8_t *body, size_t len, struct nk_error *err)
{
	struct proto_rowdesc_msg rd;
	struct proto_column cols[m->nfinal ? m->nfinal : 1];

	if (!proto_parse_row_description(body, len, &rd, err))
		return false;
	if (rd.ncols != m->nfinal)
		return nk_error_set(err, ERRCODE_INTERNAL_ERROR,
				    "final combine result does not fit the merge");
	proto_rowdesc_columns(&rd, cols, m->nfinal);
	for (uint32_t k = 0; k < m->nfinal; k++)
		m->final_fmt[k] = cols[k].format;
	return true;
}

/* Text of a final value -> the column's format. */
static bool
final_text_value(struct merge *m, struct mrow *r, uint32_t c, const struct proto_value *v,
		 struct nk_error *err)
{
	const struct mv_type *t = &m->types[c];
	struct mv_type text = *t;
	int64_t i;
	double f;

	if (!t->binary || !v->p || t->kind == MV_TEXT)	/* (text: the same bytes) */
		return mrow_set(r, c, v->p, v->len) || merge_oom(err);
	text.binary = false;
	if (t->kind == MV_INT && mv_int(&text, v, &i)) {
		uint8_t b[8];
		uint32_t w = t->oid == 21 ? 2 : t->oid == 20 ? 8 : 4;

		for (uint32_t k = 0; k < w; k++)
			b[k] = (uint8_t)((uint64_t)i >> (8 * (w - 1 - k)));
		return mrow_set(r, c, b, w) || merge_oom(err);
	}
	if (is_float(t) && mv_float(&text, v, &f)) {
		uint8_t b[8];
		uint64_t u = 0;
		float g = (float)f;
		uint32_t w = t->kind == MV_FLOAT4 ? 4 : 8;

		if (w == 4) {
			uint32_t x;

			memcpy(&x, &g, 4);
			u = x;
		} else {
			memcpy(&u, &f, 8);
		}
		for (uint32_t k = 0; k < w; k++)
			b[k] = (uint8_t)(u >> (8 * (w - 1 - k)));
		return mrow_set(r, c, b, w) || merge_oom(err);
	}
	if (t->kind == MV_NUMERIC) {
		struct mdec d;
		bool ok;

		if (!mdec_from_text(&d, v->p, v->len))
			return bad_partial(err, t);
		ok = merge_put_mdec(r, c, t, &d);
		mdec_free(&d);
		return ok || merge_oom(err);
	}
	return nk_error_set(err, ERRCODE_FEATURE_NOT_SUPPORTED,
			    "cannot send a combined value of type %u in binary "
			    "format", t->oid);
}

/* merge_agg_final_row: see merge_int.h. */
bool
merge_agg_final_row(struct merge *m, const uint8_t *body, size_t len, struct nk_error *err)
{
	struct proto_datarow_msg dr;
	struct proto_value v[m->nfinal ? m->nfinal : 1];
	struct mrow *r;
	uint32_t k = 0;

	if (!proto_parse_data_row(body, len, &dr, err))
		return false;
	if (dr.ncols != m->nfinal || m->final_rows >= m->nrows)
		return nk_error_set(err, ERRCODE_INTERNAL_ERROR,
				    "final combine result does not fit the merge");
	proto_datarow_values(&dr, v, m->nfinal);
	r = m->rows[m->final_rows++];
	for (uint32_t i = 0; i < m->spec->ncols; i++) {
		if (!m->final_col[i])
			continue;
		if (m->final_fmt[k] == 1 && m->types[i].binary) {	/* the client's bytes */
			if (!mrow_set(r, i, v[k].p, v[k].len))
				return merge_oom(err);
		} else if (!final_text_value(m, r, i, &v[k], err)) {
			return false;
		}
		k++;
	}
	if (m->spec->has_having)
		r->drop = !(v[k].p && v[k].len == 1 && (v[k].p[0] == 't' || v[k].p[0] == 1));
	return true;
}

/* merge_agg_final_done: see merge_int.h. */
bool
merge_agg_final_done(struct merge *m, struct nk_error *err)
{
	if (m->final_rows != m->nrows)
		return nk_error_set(err, ERRCODE_INTERNAL_ERROR,
				    "final combine query returned %u rows for %u "
				    "groups", m->final_rows, m->nrows);
	m->state = MERGE_NEED_ROWS;
	return merge_result_order(m, err);
}
