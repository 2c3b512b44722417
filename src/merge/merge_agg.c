/*
 * merge_agg.c - buffered merging: partial rows of an aggregate query combined by group (sort
 * by the group columns, then combine each run), the final combine SQL for the values the
 * router cannot print exactly itself (avg, float sums, expressions over aggregates, HAVING),
 * then DISTINCT, ORDER BY and DISTINCT ON over the result rows.
 */
#include "neki/base.h"

#include "merge_int.h"

#include "neki/proto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Growable text. */
struct mtext {
	char *s;
	size_t len, cap;
	bool failed;
};

static void
mt_add(struct mtext *t, const char *p, size_t n)
{
	if (t->failed)
		return;
	if (t->len + n + 1 > t->cap) {
		size_t cap = (t->cap ? t->cap : 256);
		char *s;

		while (cap < t->len + n + 1)
			cap *= 2;
		s = realloc(t->s, cap);
		if (!s) {
			t->failed = true;
			return;
		}
		t->s = s;
		t->cap = cap;
	}
	memcpy(t->s + t->len, p, n);
	t->len += n;
	t->s[t->len] = '\0';
}

static void
mt_str(struct mtext *t, const char *s)
{
	mt_add(t, s, strlen(s));
}

static bool
oom(struct nk_error *err)
{
	return nk_error_set(err, "53200", "out of memory");
}

/* ---- sorting ---- */

struct sort_ctx {
	struct merge *m;
	int how;
	struct nk_error *err;
	bool failed;
};

static int
row_order(const void *x, const void *y, void *arg)
{
	struct sort_ctx *c = arg;
	const struct mrow *a = *(const struct mrow *const *)x, *b = *(const struct mrow *const *)y;
	const struct plan_merge *s = c->m->spec;
	uint32_t vis[c->m->nvis ? c->m->nvis : 1];
	int out = 0;
	bool ok;

	if (c->failed)
		return 0;
	if (c->how == 0) {
		ok = merge_cmp_sort(c->m, a, b, s->nsort, &out, c->err);
	} else if (c->how == 1) {
		ok = merge_cmp_cols(c->m, a, b, s->group_cols, s->ngroup, &out, c->err);
	} else {
		for (uint32_t i = 0; i < c->m->nvis; i++)
			vis[i] = i;
		ok = merge_cmp_cols(c->m, a, b, vis, c->m->nvis, &out, c->err);
	}
	c->failed = !ok;
	if (out == 0)
		out = a->seq < b->seq ? -1 : a->seq > b->seq;
	return out;
}

/* merge_sort_rows: see merge_int.h. */
bool
merge_sort_rows(struct merge *m, int how, struct nk_error *err)
{
	struct sort_ctx c = { .m = m, .how = how, .err = err };

	for (uint32_t i = 0; i < m->nrows; i++)
		m->rows[i]->seq = i;
	if (m->nrows > 1)
		qsort_r(m->rows, m->nrows, sizeof(*m->rows), row_order, &c);
	return !c.failed;
}

/* ---- combining one aggregate over a run of partial rows ---- */

static bool
put_int(struct mrow *r, uint32_t c, const struct mv_type *t, int64_t v)
{
	char buf[24];

	if (!t->binary) {
		int n = snprintf(buf, sizeof(buf), "%lld", (long long)v);

		return mrow_set(r, c, buf, n);
	}
	for (int i = 0; i < 8; i++)
		buf[i] = (char)((uint64_t)v >> (56 - 8 * i));
	return mrow_set(r, c, buf, 8);
}

static bool
put_mdec(struct mrow *r, uint32_t c, const struct mv_type *t, const struct mdec *d)
{
	bool ok;

	if (!t->binary) {
		char *s = mdec_text(d);

		ok = s && mrow_set(r, c, s, (int64_t)strlen(s));
		free(s);
		return ok;
	}
	struct pktbuf pb;

	pktbuf_init(&pb, 64);
	mdec_put_binary(d, &pb);
	ok = !pktbuf_failed(&pb) && mrow_set(r, c, pb.buf + 4, (int64_t)pb.len - 4);
	pktbuf_cleanup(&pb);
	return ok;
}

static bool
bad_partial(struct nk_error *err, const struct mv_type *t)
{
	return nk_error_set(err, "0A000", "cannot combine partial aggregates of type %u across "
			    "shards", t->oid);
}

static bool
combine_count(struct mrow **run, uint32_t n, uint32_t c, const struct mv_type *t,
	      struct nk_error *err)
{
	int64_t sum = 0, v;

	for (uint32_t i = 0; i < n; i++) {
		if (!run[i]->vals[c].p)
			continue;
		if (!mv_int(t, &run[i]->vals[c], &v))
			return bad_partial(err, t);
		if (__builtin_add_overflow(sum, v, &sum))
			return nk_error_set(err, "22003", "bigint out of range");
	}
	return put_int(run[0], c, t, sum) || oom(err);
}

static bool
combine_numeric(struct mrow **run, uint32_t n, uint32_t c, const struct mv_type *t,
		struct nk_error *err)
{
	struct mdec acc, v;
	bool any = false, ok = true;

	memset(&acc, 0, sizeof(acc));
	for (uint32_t i = 0; i < n && ok; i++) {
		const struct proto_value *pv = &run[i]->vals[c];

		if (!pv->p)
			continue;
		if (!(t->binary ? mdec_from_binary(&v, t->oid, pv->p, pv->len)
				: mdec_from_text(&v, pv->p, pv->len))) {
			mdec_free(&acc);
			return bad_partial(err, t);
		}
		if (!any)
			acc = v;
		else {
			ok = mdec_add(&acc, &v);
			mdec_free(&v);
		}
		any = true;
	}
	ok = ok && (any ? put_mdec(run[0], c, t, &acc) : mrow_set(run[0], c, NULL, 0));
	mdec_free(&acc);
	return ok || oom(err);
}

/* Float sums: added in run order; the final SQL prints them (as Postgres would). */
static bool
combine_float(struct mrow **run, uint32_t n, uint32_t c, const struct mv_type *t,
	      struct nk_error *err)
{
	double sum = 0, v;
	bool any = false;
	char buf[40];

	for (uint32_t i = 0; i < n; i++) {
		if (!run[i]->vals[c].p)
			continue;
		if (!mv_float(t, &run[i]->vals[c], &v))
			return bad_partial(err, t);
		sum = any ? (t->kind == MV_FLOAT4 ? (double)((float)sum + (float)v) : sum + v) : v;
		any = true;
	}
	if (!any)
		return mrow_set(run[0], c, NULL, 0) || oom(err);
	if (t->binary) {	/* kept in the column's format (a text of 4 or 8 bytes would not be) */
		uint8_t b[8];
		uint64_t u;
		uint32_t w = t->kind == MV_FLOAT4 ? 4 : 8;

		if (w == 4) {
			float g = (float)sum;
			uint32_t x;

			memcpy(&x, &g, 4);
			u = x;
		} else {
			memcpy(&u, &sum, 8);
		}
		for (uint32_t k = 0; k < w; k++)
			b[k] = (uint8_t)(u >> (8 * (w - 1 - k)));
		return mrow_set(run[0], c, b, w) || oom(err);
	}
	int len = snprintf(buf, sizeof(buf), "%.17g", sum);

	return mrow_set(run[0], c, buf, len) || oom(err);
}

static bool
combine_sum(struct mrow **run, uint32_t n, uint32_t c, const struct mv_type *t,
	    struct nk_error *err)
{
	switch (t->kind) {
	case MV_INT: {
		bool any = false;

		for (uint32_t i = 0; i < n; i++)
			any = any || run[i]->vals[c].p;
		return any ? combine_count(run, n, c, t, err)
			   : (mrow_set(run[0], c, NULL, 0) || oom(err));
	}
	case MV_NUMERIC:
		return combine_numeric(run, n, c, t, err);
	case MV_FLOAT4:
	case MV_FLOAT8:
		return combine_float(run, n, c, t, err);
	default:
		return bad_partial(err, t);
	}
}

static bool
combine_minmax(struct merge *m, struct mrow **run, uint32_t n, uint32_t c, bool max,
	       struct nk_error *err)
{
	const struct proto_value *best = NULL;
	int cmp;

	for (uint32_t i = 0; i < n; i++) {
		const struct proto_value *v = &run[i]->vals[c];

		if (!v->p)
			continue;
		if (best && !mv_cmp(&m->types[c], v, best, &cmp, err))
			return false;
		if (!best || (max ? cmp > 0 : cmp < 0))
			best = v;
	}
	if (best == &run[0]->vals[c])
		return true;
	return (best ? mrow_set(run[0], c, best->p, best->len) : mrow_set(run[0], c, NULL, 0)) ||
	       oom(err);
}

static bool
combine_bool(struct mrow **run, uint32_t n, uint32_t c, const struct mv_type *t, bool and)
{
	int res = -1;

	for (uint32_t i = 0; i < n; i++) {
		const struct proto_value *v = &run[i]->vals[c];
		bool b;

		if (!v->p)
			continue;
		b = v->len == 1 && (v->p[0] == 't' || v->p[0] == 1);
		res = res < 0 ? b : and ? (res && b) : (res || b);
	}
	if (res < 0)
		return mrow_set(run[0], c, NULL, 0);
	char ch = t->binary ? (char)res : res ? 't' : 'f';

	return mrow_set(run[0], c, &ch, 1);
}

static bool
combine_string(struct mrow **run, uint32_t n, uint32_t c, const char *delim)
{
	struct mtext t = { 0 };
	bool any = false, ok;

	for (uint32_t i = 0; i < n; i++) {
		const struct proto_value *v = &run[i]->vals[c];

		if (!v->p)
			continue;
		if (any)
			mt_str(&t, delim);
		mt_add(&t, (const char *)v->p, v->len);
		any = true;
	}
	ok = !t.failed && (any ? mrow_set(run[0], c, t.s ? t.s : "", (int64_t)t.len)
			       : mrow_set(run[0], c, NULL, 0));
	free(t.s);
	return ok;
}

static uint32_t
rd32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void
mt_u32(struct mtext *t, uint32_t v)
{
	char b[4] = { (char)(v >> 24), (char)(v >> 16), (char)(v >> 8), (char)v };

	mt_add(t, b, 4);
}

/* Binary one-dimensional arrays: one header, every element. */
static bool
combine_array_binary(struct mrow **run, uint32_t n, uint32_t c, struct nk_error *err)
{
	struct mtext body = { 0 }, out = { 0 };
	uint32_t count = 0, hasnull = 0, elem = 0;
	bool any = false, ok;

	for (uint32_t i = 0; i < n; i++) {
		const struct proto_value *v = &run[i]->vals[c];

		if (!v->p)
			continue;
		if (v->len < 20 || rd32(v->p) != 1) {
			free(body.s);
			return nk_error_set(err, "0A000", "cannot combine multidimensional "
					    "array_agg() results across shards");
		}
		hasnull |= rd32(v->p + 4);
		elem = rd32(v->p + 8);
		count += rd32(v->p + 12);
		mt_add(&body, (const char *)v->p + 20, v->len - 20);
		any = true;
	}
	if (!any)
		return mrow_set(run[0], c, NULL, 0) || oom(err);
	mt_u32(&out, 1);
	mt_u32(&out, hasnull ? 1 : 0);
	mt_u32(&out, elem);
	mt_u32(&out, count);
	mt_u32(&out, 1);
	mt_add(&out, body.s ? body.s : "", body.len);
	ok = !out.failed && !body.failed && mrow_set(run[0], c, out.s, (int64_t)out.len);
	free(body.s);
	free(out.s);
	return ok || oom(err);
}

/* Text arrays: "{a,b}" + "{c}" -> "{a,b,c}" (also for arrays of arrays). */
static bool
combine_array(struct mrow **run, uint32_t n, uint32_t c, const struct mv_type *t,
	      struct nk_error *err)
{
	struct mtext s = { 0 };
	bool any = false, ok;

	if (t->binary)
		return combine_array_binary(run, n, c, err);
	mt_str(&s, "{");
	for (uint32_t i = 0; i < n; i++) {
		const struct proto_value *v = &run[i]->vals[c];

		if (!v->p)
			continue;
		if (v->len < 2 || v->p[0] != '{' || v->p[v->len - 1] != '}') {
			free(s.s);
			return nk_error_set(err, "0A000", "cannot combine array_agg() results with "
					    "explicit bounds across shards");
		}
		if (any)
			mt_str(&s, ",");
		mt_add(&s, (const char *)v->p + 1, v->len - 2);
		any = true;
	}
	mt_str(&s, "}");
	ok = !s.failed && (any ? mrow_set(run[0], c, s.s, (int64_t)s.len)
			       : mrow_set(run[0], c, NULL, 0));
	free(s.s);
	return ok || oom(err);
}

/* Ordered string_agg / array_agg: the key and value arrays of every shard, concatenated
 * alike (the final SQL orders them). */
static bool
combine_ordered(struct merge *m, const struct plan_merge_agg *a, struct mrow **run, uint32_t n,
		struct nk_error *err)
{
	for (uint32_t k = 0; k < a->nkeys; k++)
		if (!combine_array(run, n, a->keycol + k, &m->types[a->keycol + k], err))
			return false;
	return combine_array(run, n, a->col, &m->types[a->col], err);
}

static bool
combine_agg(struct merge *m, const struct plan_merge_agg *a, struct mrow **run, uint32_t n,
	    struct nk_error *err)
{
	const struct mv_type *t = &m->types[a->col];

	switch (a->kind) {
	case PLAN_AGG_COUNT:
		return combine_count(run, n, a->col, t, err);
	case PLAN_AGG_SUM:
		return combine_sum(run, n, a->col, t, err);
	case PLAN_AGG_AVG:
		return combine_sum(run, n, a->col, t, err) &&
		       combine_count(run, n, a->col2, &m->types[a->col2], err);
	case PLAN_AGG_MIN:
	case PLAN_AGG_MAX:
		return combine_minmax(m, run, n, a->col, a->kind == PLAN_AGG_MAX, err);
	case PLAN_AGG_BOOL_AND:
	case PLAN_AGG_BOOL_OR:
		return combine_bool(run, n, a->col, t, a->kind == PLAN_AGG_BOOL_AND) || oom(err);
	case PLAN_AGG_STRING_AGG:
		if (a->nkeys)
			return combine_ordered(m, a, run, n, err);
		if (t->kind != MV_TEXT)
			return bad_partial(err, t);
		return combine_string(run, n, a->col, a->delim) || oom(err);
	case PLAN_AGG_ARRAY_AGG:
		if (a->nkeys)
			return combine_ordered(m, a, run, n, err);
		return combine_array(run, n, a->col, t, err);
	case PLAN_AGG_COUNT_DISTINCT:
		return combine_array(run, n, a->col, t, err);
	}
	return bad_partial(err, t);
}

/* Sort by group, combine each run into its first row, keep one row per group. */
static bool
combine_groups(struct merge *m, struct nk_error *err)
{
	const struct plan_merge *s = m->spec;
	uint32_t out = 0, i = 0;
	int c;

	if (!merge_sort_rows(m, 1, err))
		return false;
	while (i < m->nrows) {
		uint32_t j = i + 1;

		while (j < m->nrows) {
			if (!merge_cmp_cols(m, m->rows[i], m->rows[j], s->group_cols, s->ngroup, &c,
					    err))
				return false;
			if (c != 0)
				break;
			j++;
		}
		for (uint32_t a = 0; a < s->naggs; a++)
			if (!combine_agg(m, &s->aggs[a], m->rows + i, j - i, err))
				return false;
		for (uint32_t k = i + 1; k < j; k++)
			mrow_free(m->rows[k], m->ncols);
		m->rows[out++] = m->rows[i];
		i = j;
	}
	m->nrows = out;
	return true;
}

/* ---- the final combine SQL ---- */

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
	return a->kind == PLAN_AGG_AVG || a->kind == PLAN_AGG_COUNT_DISTINCT || a->nkeys > 0 ||
	       (a->kind == PLAN_AGG_SUM && (m->types[a->col].kind == MV_FLOAT4 ||
					    m->types[a->col].kind == MV_FLOAT8));
}

static void
mt_quoted(struct mtext *t, const uint8_t *p, uint32_t len)
{
	mt_str(t, "'");
	for (uint32_t i = 0; i < len; i++)
		mt_add(t, p[i] == '\'' ? "''" : (const char *)p + i, p[i] == '\'' ? 2 : 1);
	mt_str(t, "'");
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
	if (t->kind == MV_FLOAT4 || t->kind == MV_FLOAT8) {
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

/* A value of column <c> of <r> as a typed SQL literal. */
static bool
literal(struct merge *m, const struct mrow *r, uint32_t c, struct mtext *t, struct nk_error *err)
{
	const char *type = mv_type_name(m->types[c].oid);
	const struct proto_value *v = &r->vals[c];
	char *text = v->p && type ? val_text(m, c, v) : NULL;

	if (!type || (v->p && !text))
		return nk_error_set(err, "0A000", "cannot compute an expression over aggregates of "
				    "type %u across shards", m->types[c].oid);
	if (text)
		mt_quoted(t, (const uint8_t *)text, (uint32_t)strlen(text));
	else
		mt_str(t, "NULL");
	free(text);
	mt_str(t, "::");
	mt_str(t, type);
	return true;
}

/* (SELECT string_agg(v, 'd' ORDER BY k1) FROM unnest(<k1 array>, <v array>) AS u(k1, v)) */
static bool
ordered_literal(struct merge *m, const struct mrow *r, const struct plan_merge_agg *a,
		struct mtext *t, struct nk_error *err)
{
	char name[16];

	mt_str(t, a->kind == PLAN_AGG_STRING_AGG ? "(SELECT string_agg(v, " : "(SELECT array_agg(v ");
	if (a->kind == PLAN_AGG_STRING_AGG) {
		mt_quoted(t, (const uint8_t *)a->delim, (uint32_t)strlen(a->delim));
		mt_str(t, " ");
	}
	mt_str(t, a->order);
	mt_str(t, ") FROM unnest(");
	for (uint32_t k = 0; k < a->nkeys; k++) {
		if (!literal(m, r, a->keycol + k, t, err))
			return false;
		mt_str(t, ", ");
	}
	if (!literal(m, r, a->col, t, err))
		return false;
	mt_str(t, ") AS u(");
	for (uint32_t k = 0; k < a->nkeys; k++) {
		snprintf(name, sizeof(name), "k%u, ", k + 1);
		mt_str(t, name);
	}
	mt_str(t, "v))");
	return true;
}

static bool
agg_literal(struct merge *m, const struct mrow *r, uint32_t ai, struct mtext *t,
	    struct nk_error *err)
{
	const struct plan_merge_agg *a = &m->spec->aggs[ai];
	enum mv_kind k = m->types[a->col].kind;
	const char *div = k == MV_FLOAT4 || k == MV_FLOAT8 ? "float8" : "numeric";
	const struct proto_value *sum = &r->vals[a->col], *cnt = &r->vals[a->col2];

	if (a->nkeys > 0)
		return ordered_literal(m, r, a, t, err);
	if (a->kind == PLAN_AGG_COUNT_DISTINCT) {	/* the shards' distinct values, counted */
		mt_str(t, "(SELECT count(DISTINCT e) FROM unnest(");
		if (!literal(m, r, a->col, t, err))
			return false;
		mt_str(t, ") AS e)");
		return true;
	}
	if (a->kind != PLAN_AGG_AVG)
		return literal(m, r, a->col, t, err);
	char *st = sum->p ? val_text(m, a->col, sum) : NULL;
	char *ct = cnt->p ? val_text(m, a->col2, cnt) : NULL;

	if (!st || !ct || strcmp(ct, "0") == 0) {
		mt_str(t, "NULL::");
		mt_str(t, div);
	} else {
		mt_str(t, "(");
		mt_quoted(t, (const uint8_t *)st, (uint32_t)strlen(st));
		mt_str(t, "::");
		mt_str(t, div);
		mt_str(t, " / ");
		mt_quoted(t, (const uint8_t *)ct, (uint32_t)strlen(ct));
		mt_str(t, "::");
		mt_str(t, div);
		mt_str(t, ")");
	}
	free(st);
	free(ct);
	return true;
}

static bool
expr_sql(struct merge *m, const struct mrow *r, const struct plan_merge_expr *e,
	 struct mtext *t, struct nk_error *err)
{
	mt_str(t, "(");
	for (uint32_t i = 0; i <= e->nagg; i++) {
		mt_str(t, e->text[i]);
		if (i == e->nagg)
			break;
		mt_str(t, " ");
		if (!agg_literal(m, r, e->agg[i], t, err))
			return false;
		mt_str(t, " ");
	}
	mt_str(t, ")");
	return true;
}

static bool
build_final(struct merge *m, struct nk_error *err)
{
	const struct plan_merge *s = m->spec;
	struct mtext t = { 0 };

	mt_str(&t, "VALUES ");
	for (uint32_t g = 0; g < m->nrows; g++) {
		bool first = true;

		mt_str(&t, g ? ", (" : "(");
		for (uint32_t i = 0; i < s->ncols; i++) {
			if (!m->final_col[i])
				continue;
			mt_str(&t, first ? "" : ", ");
			first = false;
			if (!expr_sql(m, m->rows[g], &s->cols[i].expr, &t, err))
				goto fail;
		}
		if (s->has_having) {
			mt_str(&t, first ? "" : ", ");
			if (!expr_sql(m, m->rows[g], &s->having, &t, err))
				goto fail;
		}
		mt_str(&t, ")");
	}
	if (t.failed) {
		oom(err);
		goto fail;
	}
	m->final_sql = t.s;
	return true;
fail:
	free(t.s);
	return false;
}

/* merge_agg_finish: see merge_int.h. */
bool
merge_agg_finish(struct merge *m, struct nk_error *err)
{
	const struct plan_merge *s = m->spec;

	if (!m->described)
		return nk_error_set(err, "XX000", "no shard described its result");
	if (!s->grouped)
		return merge_result_order(m, err);
	if (!combine_groups(m, err))
		return false;
	m->final_col = calloc(s->ncols ? s->ncols : 1, sizeof(*m->final_col));
	if (!m->final_col)
		return oom(err);
	for (uint32_t i = 0; i < s->ncols; i++) {
		m->final_col[i] = col_needs_final(m, i);
		m->nfinal += m->final_col[i];
	}
	m->nfinal += s->has_having;
	if (!m->nfinal || !m->nrows)
		return merge_result_order(m, err);
	if (!build_final(m, err))
		return false;
	m->state = MERGE_NEED_FINAL;
	return true;
}

/* Text of a final value -> the column's format. */
static bool
final_value(struct merge *m, struct mrow *r, uint32_t c, const struct proto_value *v,
	    struct nk_error *err)
{
	const struct mv_type *t = &m->types[c];
	struct mv_type text = *t;
	int64_t i;
	double f;

	if (!t->binary || !v->p || t->kind == MV_TEXT)	/* (text: the same bytes) */
		return mrow_set(r, c, v->p, v->len) || oom(err);
	text.binary = false;
	if (t->kind == MV_INT && mv_int(&text, v, &i)) {
		uint8_t b[8];
		uint32_t w = t->oid == 21 ? 2 : t->oid == 20 ? 8 : 4;

		for (uint32_t k = 0; k < w; k++)
			b[k] = (uint8_t)((uint64_t)i >> (8 * (w - 1 - k)));
		return mrow_set(r, c, b, w) || oom(err);
	}
	if ((t->kind == MV_FLOAT8 || t->kind == MV_FLOAT4) && mv_float(&text, v, &f)) {
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
		return mrow_set(r, c, b, w) || oom(err);
	}
	if (t->kind == MV_NUMERIC) {
		struct mdec d;
		bool ok;

		if (!mdec_from_text(&d, v->p, v->len))
			return bad_partial(err, t);
		ok = put_mdec(r, c, t, &d);
		mdec_free(&d);
		return ok || oom(err);
	}
	return nk_error_set(err, "0A000", "cannot send a combined value of type %u in binary "
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
		return nk_error_set(err, "XX000", "final combine result does not fit the merge");
	proto_datarow_values(&dr, v, m->nfinal);
	r = m->rows[m->final_rows++];
	for (uint32_t i = 0; i < m->spec->ncols; i++)
		if (m->final_col[i] && !final_value(m, r, i, &v[k++], err))
			return false;
	if (m->spec->has_having)
		r->drop = !(v[k].p && v[k].len == 1 && v[k].p[0] == 't');
	return true;
}

/* merge_agg_final_done: see merge_int.h. */
bool
merge_agg_final_done(struct merge *m, struct nk_error *err)
{
	if (m->final_rows != m->nrows)
		return nk_error_set(err, "XX000", "final combine query returned %u rows for %u "
				    "groups", m->final_rows, m->nrows);
	m->state = MERGE_NEED_ROWS;
	return merge_result_order(m, err);
}

/* Drop rows equal to the previous kept row on <nkeys> sort keys (how 0) or all columns. */
static bool
drop_dups(struct merge *m, int how, uint32_t nkeys, struct nk_error *err)
{
	uint32_t vis[m->nvis ? m->nvis : 1];
	const struct mrow *prev = NULL;
	int c;

	for (uint32_t i = 0; i < m->nvis; i++)
		vis[i] = i;
	for (uint32_t i = 0; i < m->nrows; i++) {
		struct mrow *r = m->rows[i];

		if (r->drop)
			continue;
		if (prev && !(how == 0 ? merge_cmp_sort(m, prev, r, nkeys, &c, err)
				       : merge_cmp_cols(m, prev, r, vis, m->nvis, &c,
							err)))
			return false;
		if (prev && c == 0)
			r->drop = true;
		else
			prev = r;
	}
	return true;
}

/* merge_result_order: see merge_int.h. */
bool
merge_result_order(struct merge *m, struct nk_error *err)
{
	const struct plan_merge *s = m->spec;

	if (s->distinct && !s->distinct_on &&
	    (!merge_sort_rows(m, 2, err) || !drop_dups(m, 2, 0, err)))
		return false;
	if (s->nsort && !merge_sort_rows(m, 0, err))
		return false;
	if (s->distinct_on && !drop_dups(m, 0, s->distinct_on, err))
		return false;
	m->finished = true;
	return true;
}
