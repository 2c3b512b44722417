/*
 * merge_agg.c - buffered merging: partial rows of an aggregate query combined by group (sort
 * by the group columns, then combine each run of partial rows into one), then (after the
 * final combine SQL of merge_final.c, when a value needs it) DISTINCT, ORDER BY and DISTINCT
 * ON over the result rows.
 */
#include "neki/base.h"

#include "merge_int.h"

#include "neki/proto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* mtext_add: see merge_int.h. */
void
mtext_add(struct mtext *t, const char *p, size_t n)
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

/* mtext_str: see merge_int.h. */
void
mtext_str(struct mtext *t, const char *s)
{
	mtext_add(t, s, strlen(s));
}

/* merge_oom: see merge_int.h. */
bool
merge_oom(struct nk_error *err)
{
	return nk_error_oom(err);
}

static bool
oom(struct nk_error *err)
{
	return merge_oom(err);
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
	int w = t->oid == 21 ? 2 : t->oid == 23 || t->oid == 26 ? 4 : 8;	/* the type's width */

	for (int i = 0; i < w; i++)
		buf[i] = (char)((uint64_t)v >> (8 * (w - 1 - i)));
	return mrow_set(r, c, buf, w);
}

/* merge_put_mdec: see merge_int.h. */
bool
merge_put_mdec(struct mrow *r, uint32_t c, const struct mv_type *t, const struct mdec *d)
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
	return nk_error_set(err, ERRCODE_FEATURE_NOT_SUPPORTED,
			    "cannot combine partial aggregates of type %u across "
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
			return nk_error_set(err, ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
					    "bigint out of range");
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
	ok = ok && (any ? merge_put_mdec(run[0], c, t, &acc) : mrow_set(run[0], c, NULL, 0));
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

/* The non-NULL partials of a run as a text array "{"a","b"}" (the final SQL aggregates
 * them again). */
static bool
combine_collect(struct mrow **run, uint32_t n, uint32_t c, struct nk_error *err)
{
	struct mtext s = { 0 };
	bool any = false, ok;

	mtext_str(&s, "{");
	for (uint32_t i = 0; i < n; i++) {
		const struct proto_value *v = &run[i]->vals[c];

		if (!v->p)
			continue;
		mtext_str(&s, any ? ",\"" : "\"");
		for (uint32_t k = 0; k < v->len; k++) {
			if (v->p[k] == '"' || v->p[k] == '\\')
				mtext_add(&s, "\\", 1);
			mtext_add(&s, (const char *)v->p + k, 1);
		}
		mtext_str(&s, "\"");
		any = true;
	}
	mtext_str(&s, "}");
	ok = !s.failed && mrow_set(run[0], c, s.s, (int64_t)s.len);
	free(s.s);
	return ok || oom(err);
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
	default:	/* interval, money: the final SQL adds them up (text partials only) */
		if (t->binary || !mv_array_of(t->oid))
			return bad_partial(err, t);
		return combine_collect(run, n, c, err);
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
			mtext_str(&t, delim);
		mtext_add(&t, (const char *)v->p, v->len);
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
mtext_u32(struct mtext *t, uint32_t v)
{
	char b[4] = { (char)(v >> 24), (char)(v >> 16), (char)(v >> 8), (char)v };

	mtext_add(t, b, 4);
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
			return nk_error_set(err, ERRCODE_FEATURE_NOT_SUPPORTED,
					    "cannot combine multidimensional "
					    "array_agg() results across shards");
		}
		hasnull |= rd32(v->p + 4);
		elem = rd32(v->p + 8);
		count += rd32(v->p + 12);
		mtext_add(&body, (const char *)v->p + 20, v->len - 20);
		any = true;
	}
	if (!any)
		return mrow_set(run[0], c, NULL, 0) || oom(err);
	mtext_u32(&out, 1);
	mtext_u32(&out, hasnull ? 1 : 0);
	mtext_u32(&out, elem);
	mtext_u32(&out, count);
	mtext_u32(&out, 1);
	mtext_add(&out, body.s ? body.s : "", body.len);
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
	mtext_str(&s, "{");
	for (uint32_t i = 0; i < n; i++) {
		const struct proto_value *v = &run[i]->vals[c];

		if (!v->p)
			continue;
		if (v->len < 2 || v->p[0] != '{' || v->p[v->len - 1] != '}') {
			free(s.s);
			return nk_error_set(err, ERRCODE_FEATURE_NOT_SUPPORTED,
					    "cannot combine array_agg() results with "
					    "explicit bounds across shards");
		}
		if (any)
			mtext_str(&s, ",");
		mtext_add(&s, (const char *)v->p + 1, v->len - 2);
		any = true;
	}
	mtext_str(&s, "}");
	ok = !s.failed && (any ? mrow_set(run[0], c, s.s, (int64_t)s.len)
			       : mrow_set(run[0], c, NULL, 0));
	free(s.s);
	return ok || oom(err);
}

/* Ordered aggregates: the key and value arrays of every shard, concatenated alike (the
 * final SQL orders them). */
static bool
combine_ordered(struct merge *m, const struct plan_merge_agg *a, struct mrow **run, uint32_t n,
		struct nk_error *err)
{
	for (uint32_t k = 0; k < a->nkeys; k++)
		if (!combine_array(run, n, a->keycol + k, &m->types[a->keycol + k], err))
			return false;
	return combine_array(run, n, a->col, &m->types[a->col], err);
}

/* bit_and / bit_or / bit_xor of integers (bit strings are refused by the type check). */
static bool
combine_bits(struct mrow **run, uint32_t n, uint32_t c, const struct mv_type *t,
	     enum plan_agg kind, struct nk_error *err)
{
	int64_t acc = 0, v;
	bool any = false;

	for (uint32_t i = 0; i < n; i++) {
		if (!run[i]->vals[c].p)
			continue;
		if (!mv_int(t, &run[i]->vals[c], &v))
			return bad_partial(err, t);
		acc = !any ? v : kind == PLAN_AGG_BIT_AND ? acc & v : kind == PLAN_AGG_BIT_OR ? acc | v
											    : acc ^ v;
		any = true;
	}
	return (any ? put_int(run[0], c, t, acc) : mrow_set(run[0], c, NULL, 0)) || oom(err);
}

/* Text of a JSON partial without its brackets: "[1, 2]" -> "1, 2" (jsonb binary: after the
 * version byte); false when it is not one. */
static bool
json_inner(const struct proto_value *v, const struct mv_type *t, size_t open, size_t close,
	   const uint8_t **p, size_t *len)
{
	size_t skip = t->binary && t->oid == 3802 ? 1 : 0;	/* jsonb binary: version 1 */

	if (v->len < skip + open + close || (skip && v->p[0] != 1))
		return false;
	*p = v->p + skip + open;
	*len = v->len - skip - open - close;
	return true;
}

/*
 * json_agg / jsonb_agg / json_object_agg: the partial arrays (objects) joined as the
 * aggregate writes them: ", " between elements (json_agg: ", \n " before a non-null element
 * of an array or composite type, <flag>), "{ " ... " }" around json_object_agg's pairs.
 */
static bool
combine_json(struct mrow **run, uint32_t n, uint32_t c, const struct mv_type *t, bool object,
	     bool structured, struct nk_error *err)
{
	struct mtext s = { 0 };
	const uint8_t *p;
	size_t len;
	bool any = false, ok;

	if (t->binary && t->oid == 3802)
		mtext_add(&s, "\1", 1);
	mtext_str(&s, object ? "{ " : "[");
	for (uint32_t i = 0; i < n; i++) {
		const struct proto_value *v = &run[i]->vals[c];

		if (!v->p)
			continue;
		if (!json_inner(v, t, object ? 2 : 1, object ? 2 : 1, &p, &len)) {
			free(s.s);
			return bad_partial(err, t);
		}
		if (any)
			mtext_str(&s, structured && !(len >= 4 && memcmp(p, "null", 4) == 0)
					      ? ", \n " : ", ");
		mtext_add(&s, (const char *)p, len);
		any = true;
	}
	mtext_str(&s, object ? " }" : "]");
	ok = !s.failed && (any ? mrow_set(run[0], c, s.s, (int64_t)s.len)
			       : mrow_set(run[0], c, NULL, 0));
	free(s.s);
	return ok || oom(err);
}

/* json_agg: the flag one of the shards sent (each sends it for every group it has). */
static bool
json_structured(struct mrow **run, uint32_t n, uint32_t flag)
{
	for (uint32_t i = 0; i < n; i++)
		if (run[i]->vals[flag].p)
			return run[i]->vals[flag].len == 1 && run[i]->vals[flag].p[0] == 't';
	return false;
}

static bool
combine_variance(struct merge *m, const struct plan_merge_agg *a, struct mrow **run,
		 uint32_t n, struct nk_error *err)
{
	return combine_count(run, n, a->col2, &m->types[a->col2], err) &&
	       combine_numeric(run, n, a->col, &m->types[a->col], err) &&
	       combine_numeric(run, n, a->col3, &m->types[a->col3], err);
}

static bool
combine_agg(struct merge *m, const struct plan_merge_agg *a, struct mrow **run, uint32_t n,
	    struct nk_error *err)
{
	const struct mv_type *t = &m->types[a->col];

	if (a->nkeys)
		return combine_ordered(m, a, run, n, err);
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
		if (t->kind != MV_TEXT)
			return bad_partial(err, t);
		return combine_string(run, n, a->col, a->delim) || oom(err);
	case PLAN_AGG_ARRAY_AGG:
	case PLAN_AGG_DISTINCT:
		return combine_array(run, n, a->col, t, err);
	case PLAN_AGG_BIT_AND:
	case PLAN_AGG_BIT_OR:
	case PLAN_AGG_BIT_XOR:
		return combine_bits(run, n, a->col, t, a->kind, err);
	case PLAN_AGG_VARIANCE:
		return combine_variance(m, a, run, n, err);
	case PLAN_AGG_JSON_AGG:
		return combine_json(run, n, a->col, t, false, json_structured(run, n, a->col2),
				    err);
	case PLAN_AGG_JSONB_AGG:
		return combine_json(run, n, a->col, t, false, false, err);
	case PLAN_AGG_JSON_OBJECT_AGG:
		return combine_json(run, n, a->col, t, true, false, err);
	case PLAN_AGG_JSONB_OBJECT_AGG:
	case PLAN_AGG_REAGG:
		return combine_collect(run, n, a->col, err);
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
		for (uint32_t k = i + 1; k < j; k++) {
			m->mem -= (int64_t)m->rows[k]->mem;
			mrow_free(m->rows[k], m->ncols);
		}
		m->rows[out++] = m->rows[i];
		i = j;
	}
	m->nrows = out;
	return true;
}

/* merge_agg_finish: see merge_int.h. */
bool
merge_agg_finish(struct merge *m, struct nk_error *err)
{
	const struct plan_merge *s = m->spec;

	if (!m->described)
		return nk_error_set(err, ERRCODE_INTERNAL_ERROR, "no shard described its result");
	if (!s->grouped)
		return merge_result_order(m, err);
	if (!combine_groups(m, err) || !merge_final_build(m, err))
		return false;
	if (!m->final_sql)
		return merge_result_order(m, err);
	m->state = MERGE_NEED_FINAL;
	return true;
}

static bool
refuse_type(struct nk_error *err, const char *what, uint32_t oid)
{
	return nk_error_set(err, ERRCODE_FEATURE_NOT_SUPPORTED,
			    "%s of type %u across shards are not merged", what, oid);
}

/* A partial the final SQL reads back: its type (an array's element) must be one the router
 * can name. */
static bool
check_named(const struct merge *m, const struct plan_merge_agg *a, struct nk_error *err)
{
	uint32_t oid = m->types[a->col].oid;

	if (!a->nkeys && (a->kind == PLAN_AGG_REAGG || a->kind == PLAN_AGG_JSONB_OBJECT_AGG))
		oid = mv_array_of(oid);	/* the partials are collected into an array */
	if (!oid || !mv_type_name(oid))
		return refuse_type(err, a->kind == PLAN_AGG_DISTINCT ? "aggregates with DISTINCT "
				   "over values" : "aggregates over values",
				   m->types[a->col].oid);
	for (uint32_t k = 0; k < a->nkeys; k++)
		if (!mv_type_name(m->types[a->keycol + k].oid))
			return refuse_type(err, "ORDER BY keys inside an aggregate",
					   m->types[a->keycol + k].oid);
	return true;
}

/* merge_agg_check_types: see merge_int.h. */
bool
merge_agg_check_types(struct merge *m, struct nk_error *err)
{
	const struct plan_merge *s = m->spec;

	for (uint32_t i = 0; i < s->naggs; i++) {
		const struct plan_merge_agg *a = &s->aggs[i];

		if (a->nkeys) {
			if (!check_named(m, a, err))
				return false;
			continue;
		}
		switch (a->kind) {
		case PLAN_AGG_VARIANCE:
			if (a->carrier < m->ncols && m->types[a->carrier].oid != 1700)
				return plan_refuse_float_variance(err);
			break;
		case PLAN_AGG_BIT_AND:
		case PLAN_AGG_BIT_OR:
		case PLAN_AGG_BIT_XOR:
			if (m->types[a->col].kind != MV_INT)
				return refuse_type(err, "bit_and, bit_or and bit_xor of values",
						   m->types[a->col].oid);
			break;
		case PLAN_AGG_DISTINCT:
		case PLAN_AGG_REAGG:
		case PLAN_AGG_JSONB_OBJECT_AGG:
			if (!check_named(m, a, err))
				return false;
			break;
		default:
			break;
		}
	}
	return true;
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
