/*
 * merge.c - the merge step's life cycle: shard messages in, client messages out. Streaming
 * mode (no aggregate, GROUP BY or plain DISTINCT) keeps a queue per shard and sends the
 * smallest head by the sort keys once every unfinished shard has one (a k-way merge; plain
 * concatenation without ORDER BY), applying OFFSET, LIMIT and DISTINCT ON on the way.
 * Buffered mode hands the rows to merge_agg.c when every shard completed.
 */
#include "neki/base.h"

#include "merge_int.h"

#include "neki/proto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

/* A merge that held this much gives the freed heap back to the system (malloc_trim). */
#define MERGE_TRIM_BYTES (4 * 1024 * 1024)

/* Locales that order text like byte comparison of UTF-8. */
static bool
byte_order_locale(const char *name)
{
	static const char *const names[] = { "C", "POSIX", "C.UTF-8", "C.utf8", "ucs_basic" };

	if (!name || !name[0])
		return true;
	for (size_t i = 0; i < NK_ARRAY_LEN(names); i++)
		if (strcmp(name, names[i]) == 0)
			return true;
	return false;
}

/* merge_new: see merge.h. */
struct merge *
merge_new(const struct plan_merge *spec, uint32_t nshards, const struct merge_options *opt,
	  struct nk_error *err)
{
	struct merge *m = calloc(1, sizeof(*m));

	if (!m || !(m->shards = calloc(nshards ? nshards : 1, sizeof(*m->shards)))) {
		free(m);
		nk_error_oom(err);
		return NULL;
	}
	m->spec = spec;
	m->nshards = nshards;
	m->limit = opt ? opt->limit : -1;
	m->offset = opt && opt->offset > 0 ? opt->offset : 0;
	m->omit_rowdesc = opt && opt->omit_rowdesc;
	m->omit_tail = opt && opt->omit_tail;
	m->budget = -1;
	m->mem_max = opt && opt->mem_max > 0 ? opt->mem_max : 0;
	m->buffered = spec->grouped || (spec->distinct && !spec->distinct_on);
	m->find_enum = opt ? opt->find_enum : NULL;
	m->find_arg = opt ? opt->find_arg : NULL;
	if (opt && !byte_order_locale(opt->collation)) {
		m->loc = newlocale(LC_COLLATE_MASK, opt->collation, (locale_t)0);
		if (!m->loc) {
			nk_error_set(err, ERRCODE_FEATURE_NOT_SUPPORTED,
				     "cannot merge text across shards under collation "
				     "\"%s\": the locale is not available on the router",
				     opt->collation);
			merge_free(m);
			return NULL;
		}
	}
	return m;
}

void
mrow_free(struct mrow *r, uint32_t ncols)
{
	if (!r)
		return;
	for (uint32_t i = 0; r->owned && i < ncols; i++)
		free(r->owned[i]);
	free(r->owned);
	free(r->vals);
	free(r->buf);
	free(r);
}

/* merge_free: see merge.h. */
void
merge_free(struct merge *m)
{
	uint32_t nc = m ? m->ncols : 0;

	if (!m)
		return;
	for (uint32_t s = 0; s < m->nshards; s++)
		for (struct mrow *r = m->shards[s].head, *n; r; r = n) {
			n = r->next;
			mrow_free(r, nc);
		}
	for (uint32_t i = 0; i < m->nrows; i++)
		mrow_free(m->rows[i], nc);
	if (m->last && !m->buffered)
		mrow_free(m->last, nc);
	for (uint32_t i = 0; m->cols && i < nc; i++)
		free((char *)m->cols[i].name);
	for (uint32_t i = 0; m->enums && i < nc; i++)
		merge_enum_free(&m->enums[i]);
	free(m->enums);
	if (m->loc)
		freelocale(m->loc);
	free(m->cols);
	free(m->types);
	free(m->sortcol);
	free(m->rows);
	free(m->final_col);
	free(m->final_fmt);
	free(m->final_sql);
	free(m->shards);
#ifdef __GLIBC__
	if (m->mem_peak >= MERGE_TRIM_BYTES)
		malloc_trim(0);
#endif
	free(m);
}

/* mrow_set: see merge_int.h. */
bool
mrow_set(struct mrow *r, uint32_t c, const void *p, int64_t len)
{
	uint8_t *copy = NULL;

	if (p) {
		copy = malloc(len ? (size_t)len : 1);
		if (!copy)
			return false;
		memcpy(copy, p, (size_t)len);
	}
	free(r->owned[c]);
	r->owned[c] = copy;
	r->vals[c].p = copy;
	r->vals[c].len = p ? (uint32_t)len : 0;
	return true;
}

/* merge_mem_charge: see merge_int.h. */
bool
merge_mem_charge(struct merge *m, size_t n, struct nk_error *err)
{
	m->mem += (int64_t)n;
	if (m->mem > m->mem_peak)
		m->mem_peak = m->mem;
	if (!m->mem_max || m->mem <= m->mem_max)
		return true;
	nk_error_set(err, ERRCODE_CONFIGURATION_LIMIT_EXCEEDED,
		     "merging the shard results needs more memory than "
		     "router_work_mem allows");
	nk_error_detail(err, "The rows held on the router for this statement passed %lld "
			"bytes; router_work_mem is %lld bytes.", (long long)m->mem,
			(long long)m->mem_max);
	nk_error_hint(err, "Raise router_work_mem, or narrow the query (a WHERE clause, fewer "
		      "or smaller columns, a LIMIT) so that fewer rows are merged.");
	return false;
}

static bool
oom(struct nk_error *err)
{
	return nk_error_oom(err);
}

/* Columns of the first RowDescription: a * in the select list widens the visible part. */
static bool
set_columns(struct merge *m, const struct proto_rowdesc_msg *rd, struct nk_error *err)
{
	const struct plan_merge *s = m->spec;
	int64_t extra = (int64_t)rd->ncols - s->ncols;

	if (extra && (!s->star || extra < -1 || (int64_t)s->nvisible + extra < 0))
		return nk_error_set(err, ERRCODE_INTERNAL_ERROR,
				    "shard result has %u columns, the merge expects %u",
				    rd->ncols, s->ncols);
	m->ncols = rd->ncols;
	m->nvis = (uint32_t)((int64_t)s->nvisible + extra);
	m->cols = calloc(m->ncols ? m->ncols : 1, sizeof(*m->cols));
	m->types = calloc(m->ncols ? m->ncols : 1, sizeof(*m->types));
	m->sortcol = calloc(s->nsort ? s->nsort : 1, sizeof(*m->sortcol));
	if (!m->cols || !m->types || !m->sortcol)
		return oom(err);
	for (uint32_t k = 0; k < s->nsort; k++) {
		int64_t c = s->sort[k].col + (s->sort[k].hidden ? extra : 0);

		if (c < 0 || c >= m->ncols)
			return nk_error_set(err, ERRCODE_INVALID_COLUMN_REFERENCE,
					    "ORDER BY position %u is not in select list",
					    s->sort[k].col + 1);
		m->sortcol[k] = (uint32_t)c;
	}
	return true;
}

/* merge_enum_free: see merge.h. */
void
merge_enum_free(struct merge_enum *e)
{
	for (uint32_t i = 0; e->labels && i < e->nlabels; i++)
		free(e->labels[i]);
	free(e->labels);
	free(e->sql_name);
	memset(e, 0, sizeof(*e));
}

/* Column <i> of a user-defined type: an enum the catalog knows orders by its labels. */
static bool
find_enum(struct merge *m, uint32_t i, struct nk_error *err)
{
	if (m->find_enum == NULL || m->types[i].oid < 16384)	/* (FirstNormalObjectId) */
		return true;
	if (m->enums == NULL && (m->enums = calloc(m->ncols, sizeof(*m->enums))) == NULL)
		return oom(err);
	if (m->find_enum(m->find_arg, m->types[i].oid, &m->enums[i])) {
		m->types[i].kind = MV_ENUM;
		m->types[i].en = &m->enums[i];
	}
	return true;
}

/* The first RowDescription fixes the columns; later ones must agree in count. */
static bool
feed_rowdesc(struct merge *m, struct mshard *sh, const uint8_t *body, size_t len,
	     struct nk_error *err)
{
	struct proto_rowdesc_msg rd;

	if (!proto_parse_row_description(body, len, &rd, err))
		return false;
	if (m->described && rd.ncols != m->ncols)
		return nk_error_set(err, ERRCODE_INTERNAL_ERROR,
				    "shard result has %u columns, the merge expects %u",
				    rd.ncols, m->ncols);
	sh->described = true;
	if (m->described)
		return true;
	if (!set_columns(m, &rd, err))
		return false;
	proto_rowdesc_columns(&rd, m->cols, m->ncols);
	for (uint32_t i = 0; i < m->ncols; i++) {
		m->cols[i].name = strdup(m->cols[i].name);
		if (!m->cols[i].name)
			return oom(err);
		m->types[i].oid = m->cols[i].type_oid;
		m->types[i].kind = mv_kind_of(m->cols[i].type_oid);
		m->types[i].binary = m->cols[i].format == 1;
		m->types[i].loc = m->loc;
		if (m->types[i].kind == MV_UNSUPPORTED && !find_enum(m, i, err))
			return false;
	}
	for (uint32_t k = 0; k < m->spec->nsort; k++)
		if (m->spec->sort[k].byte_order)
			m->types[m->sortcol[k]].loc = (locale_t)0;
	m->described = true;
	return merge_agg_check_types(m, err);
}

static struct mrow *
row_from_datarow(struct merge *m, const uint8_t *body, size_t len, struct nk_error *err)
{
	struct proto_datarow_msg dr;
	uint32_t nc = m->ncols;
	struct mrow *r;

	if (!proto_parse_data_row(body, len, &dr, err))
		return NULL;
	if (dr.ncols != nc) {
		nk_error_set(err, ERRCODE_INTERNAL_ERROR,
			     "shard row has %u columns, the merge expects %u",
			     dr.ncols, nc);
		return NULL;
	}
	r = calloc(1, sizeof(*r));
	if (!r || !(r->buf = malloc(len ? len : 1)) ||
	    !(r->vals = calloc(nc ? nc : 1, sizeof(*r->vals))) ||
	    !(r->owned = calloc(nc ? nc : 1, sizeof(*r->owned)))) {
		mrow_free(r, nc);
		oom(err);
		return NULL;
	}
	memcpy(r->buf, body, len);
	r->mem = sizeof(*r) + len + nc * (sizeof(*r->vals) + sizeof(*r->owned));
	if (!merge_mem_charge(m, r->mem, err) || !proto_parse_data_row(r->buf, len, &dr, err)) {
		m->mem -= (int64_t)r->mem;
		mrow_free(r, nc);
		return NULL;
	}
	proto_datarow_values(&dr, r->vals, nc);
	r->seq = m->seq++;
	return r;
}

static bool
push_row(struct merge *m, struct mrow *r)
{
	if (m->nrows == m->cap) {
		uint32_t cap = m->cap ? m->cap * 2 : 64;
		struct mrow **rows = realloc(m->rows, cap * sizeof(*rows));

		if (!rows)
			return false;
		m->rows = rows;
		m->cap = cap;
	}
	m->rows[m->nrows++] = r;
	return true;
}

static bool
feed_datarow(struct merge *m, struct mshard *sh, const uint8_t *body, size_t len,
	     struct nk_error *err)
{
	struct mrow *r;

	if (!sh->described)
		return nk_error_set(err, ERRCODE_PROTOCOL_VIOLATION,
				    "DataRow before RowDescription from a shard");
	if (m->state == MERGE_DONE)
		return true;	/* LIMIT reached: the rest is not needed */
	r = row_from_datarow(m, body, len, err);
	if (!r)
		return false;
	if (m->buffered) {
		if (!push_row(m, r)) {
			mrow_free(r, m->ncols);
			return oom(err);
		}
		return true;
	}
	if (sh->tail)
		sh->tail->next = r;
	else
		sh->head = r;
	sh->tail = r;
	sh->queued++;
	return true;
}

static bool
all_done(const struct merge *m)
{
	for (uint32_t s = 0; s < m->nshards; s++)
		if (!m->shards[s].done)
			return false;
	return true;
}

static bool
feed_final(struct merge *m, char type, const uint8_t *body, size_t len, struct nk_error *err)
{
	if (m->state != MERGE_NEED_FINAL)
		return nk_error_set(err, ERRCODE_INTERNAL_ERROR,
				    "final combine result fed without a final query");
	if (type == 'T')
		return merge_agg_final_desc(m, body, len, err);
	if (type == 'D')
		return merge_agg_final_row(m, body, len, err);
	return merge_agg_final_done(m, err);
}

/* merge_feed: see merge.h. */
bool
merge_feed(struct merge *m, uint32_t shard, char type, const uint8_t *body, size_t len,
	   struct nk_error *err)
{
	struct mshard *sh;

	if (type != 'T' && type != 'D' && type != 'C')
		return nk_error_set(err, ERRCODE_INTERNAL_ERROR,
				    "message '%c' is not part of a result to merge",
				    type);
	if (shard == MERGE_FINAL)
		return feed_final(m, type, body, len, err);
	if (shard >= m->nshards)
		return nk_error_set(err, ERRCODE_INTERNAL_ERROR,
				    "merge fed by shard %u of %u", shard, m->nshards);
	sh = &m->shards[shard];
	if (sh->done)
		return nk_error_set(err, ERRCODE_PROTOCOL_VIOLATION,
				    "result message after CommandComplete");
	if (type == 'T')
		return feed_rowdesc(m, sh, body, len, err);
	if (type == 'D')
		return feed_datarow(m, sh, body, len, err);
	sh->done = true;
	if (m->buffered && all_done(m) && m->state == MERGE_NEED_ROWS)
		return merge_agg_finish(m, err);
	return true;
}

/* Compare one column of two rows, NULLs as <nulls_first> says; no direction applied. */
static bool
cmp_col(struct merge *m, const struct mrow *a, const struct mrow *b, uint32_t c,
	bool nulls_first, int *out, struct nk_error *err)
{
	const struct proto_value *x = &a->vals[c], *y = &b->vals[c];

	if (!x->p || !y->p) {
		*out = !x->p && !y->p ? 0 : (!x->p) == nulls_first ? -1 : 1;
		return true;
	}
	return mv_cmp(&m->types[c], x, y, out, err);
}

/* merge_cmp_sort: see merge_int.h. */
bool
merge_cmp_sort(struct merge *m, const struct mrow *a, const struct mrow *b, uint32_t nkeys,
	       int *out, struct nk_error *err)
{
	*out = 0;
	for (uint32_t k = 0; k < nkeys && *out == 0; k++) {
		const struct plan_merge_sort *s = &m->spec->sort[k];

		if (!cmp_col(m, a, b, m->sortcol[k], s->nulls_first != s->desc, out, err))
			return false;
		if (s->desc)
			*out = -*out;
	}
	return true;
}

/* merge_cmp_cols: see merge_int.h. */
bool
merge_cmp_cols(struct merge *m, const struct mrow *a, const struct mrow *b, const uint32_t *cols,
	       uint32_t n, int *out, struct nk_error *err)
{
	*out = 0;
	for (uint32_t k = 0; k < n && *out == 0; k++)
		if (!cmp_col(m, a, b, cols[k], false, out, err))
			return false;
	return true;
}

static void
put_rowdesc(struct merge *m, struct pktbuf *out)
{
	if (!m->omit_rowdesc)
		pktbuf_write_row_description(out, m->cols, m->nvis);
	m->head_sent = true;
}

/* Send <r> unless OFFSET skips it; false when LIMIT is reached. */
static bool
put_row(struct merge *m, const struct mrow *r, struct pktbuf *out)
{
	if (m->limit >= 0 && m->sent >= m->limit)
		return false;
	if (m->skipped < m->offset) {
		m->skipped++;
		return true;
	}
	pktbuf_write_data_row(out, r->vals, m->nvis);
	m->sent++;
	m->pulled++;
	if (m->budget > 0)
		m->budget--;
	return m->limit < 0 || m->sent < m->limit;
}

static void
put_tail(struct merge *m, struct pktbuf *out)
{
	char tag[32];

	if (!m->omit_tail) {
		snprintf(tag, sizeof(tag), "SELECT %lld", (long long)m->sent);
		pktbuf_write_command_complete(out, tag);
	}
	m->tail_sent = true;
	m->state = MERGE_DONE;
}

/* Streaming: the shard whose head goes next, -1 when one must still send (or all ended). */
static bool
next_shard(struct merge *m, int *pick, struct nk_error *err)
{
	*pick = -1;
	for (uint32_t s = 0; s < m->nshards; s++) {
		struct mshard *sh = &m->shards[s];
		int c;

		if (!sh->head) {
			if (!sh->done && m->spec->nsort) {
				*pick = -1;
				return true;
			}
			continue;
		}
		if (*pick < 0) {
			*pick = (int)s;
			if (!m->spec->nsort)
				return true;
			continue;
		}
		if (!merge_cmp_sort(m, sh->head, m->shards[*pick].head, m->spec->nsort, &c, err))
			return false;
		if (c < 0)
			*pick = (int)s;
	}
	return true;
}

/* DISTINCT ON: true when <r> repeats the key of the last row sent. */
static bool
repeats_last(struct merge *m, const struct mrow *r, bool *out, struct nk_error *err)
{
	int c = 1;

	*out = false;
	if (!m->spec->distinct_on || !m->last)
		return true;
	if (!merge_cmp_sort(m, r, m->last, m->spec->distinct_on, &c, err))
		return false;
	*out = c == 0;
	return true;
}

static bool
pull_streaming(struct merge *m, struct pktbuf *out, struct nk_error *err)
{
	int pick;
	bool more = true, dup;

	while (more) {
		if (m->budget == 0)
			return true;	/* the caller's row limit: the rest stays queued */
		if (!next_shard(m, &pick, err))
			return false;
		if (pick < 0)
			break;
		struct mshard *sh = &m->shards[pick];
		struct mrow *r = sh->head;

		sh->head = r->next;
		if (!sh->head)
			sh->tail = NULL;
		sh->queued--;
		if (!repeats_last(m, r, &dup, err)) {
			m->mem -= (int64_t)r->mem;
			mrow_free(r, m->ncols);
			return false;
		}
		if (!dup)
			more = put_row(m, r, out);
		if (m->last)
			m->mem -= (int64_t)m->last->mem;
		mrow_free(m->last, m->ncols);
		m->last = r;
	}
	if (!more || all_done(m))
		put_tail(m, out);
	return true;
}

static bool
pull_buffered(struct merge *m, struct pktbuf *out)
{
	if (!m->finished)
		return true;
	for (; m->pos < m->nrows; m->pos++) {
		if (m->budget == 0)
			return true;	/* the caller's row limit */
		if (!m->rows[m->pos]->drop && !put_row(m, m->rows[m->pos], out)) {
			m->pos = m->nrows;
			break;
		}
	}
	put_tail(m, out);
	return true;
}

/* merge_pull: see merge.h. */
bool
merge_pull(struct merge *m, struct pktbuf *out, struct nk_error *err)
{
	if (m->state != MERGE_NEED_ROWS)
		return true;
	if (!m->head_sent) {
		if (!m->described) {
			if (!all_done(m))
				return true;
			return nk_error_set(err, ERRCODE_INTERNAL_ERROR,
					    "no shard described its result");
		}
		put_rowdesc(m, out);
	}
	if (m->buffered)
		return pull_buffered(m, out);
	return pull_streaming(m, out, err);
}

/* merge_pull_rows: see merge.h. */
bool
merge_pull_rows(struct merge *m, struct pktbuf *out, int64_t max_rows, uint64_t *nrows,
		struct nk_error *err)
{
	bool ok;

	m->budget = max_rows < 0 ? -1 : max_rows;
	m->pulled = 0;
	ok = merge_pull(m, out, err);
	*nrows = m->pulled;
	m->budget = -1;
	return ok;
}

bool
merge_buffered(const struct merge *m)
{
	return m->buffered;
}

enum merge_state
merge_state(const struct merge *m)
{
	return m->state;
}

const char *
merge_final_sql(const struct merge *m)
{
	return m->state == MERGE_NEED_FINAL ? m->final_sql : NULL;
}

uint32_t
merge_queued(const struct merge *m, uint32_t shard)
{
	return shard < m->nshards ? m->shards[shard].queued : 0;
}

bool
merge_shard_done(const struct merge *m, uint32_t shard)
{
	return shard < m->nshards && m->shards[shard].done;
}
