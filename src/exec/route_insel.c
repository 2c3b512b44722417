/*
 * route_insel.c - INSERT ... SELECT whose source does not meet its rows on one shard
 * (PLAN_OP_INSERT_SELECT, plan_insel.c): the router reads the source and writes each row
 * where the target wants it.
 *
 * The statement runs in rounds, each one exec (route_exec.c) whose targets get one
 * extended-protocol message each (Parse / Bind / Execute ... Sync):
 *   round 0   every source shard: DECLARE __neki_insel NO SCROLL CURSOR FOR <source>
 *             (the source's shard query: its text, or the merge spec's shard query) and
 *             the first FETCH FORWARD n;
 *   round k   every target with rows: INSERT batches of the rows read in round k-1
 *             (`<head>) VALUES ($m+1, ...), ... <tail>`, the values typed by the source's
 *             column types, the client's own $1..$m first), and on every source shard the
 *             next FETCH (or CLOSE once it is exhausted or no longer needed);
 *   last      the merge's final combine query when it needs one; a Describe when RETURNING
 *             had no row at all.
 * Every cursor is declared before any row is written, in the same transaction as the writes
 * (the statement's implicit transaction outside a block, the client's inside one), so no
 * source sees a row of this statement (a cursor reads the snapshot of its DECLARE), as one
 * Postgres. Rows of a merged source (ORDER BY, LIMIT, aggregates, DISTINCT, UNION) go through
 * the merge step of a SELECT (merge.h); a source shard the merge holds enough rows of is not
 * fetched (back-pressure), nor is any while targets have rows waiting, so memory is bounded
 * by a few rounds of rows. Each row's shard is the target key's value routed as COPY does
 * (plan_route_text); identity/serial columns the INSERT omits get router-reserved values.
 * RETURNING rows go to the client in source order (a GSI step's are kept: route_gsi.c
 * writes the lookup rows of the rows written). Entry points: route_insel_start(),
 * route_insel_msg(), route_insel_next(), route_insel_client_ready(), route_insel_free().
 */
#include "neki/base.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "neki/link.h"
#include "neki/merge.h"
#include "neki/pktbuf.h"
#include "neki/proto.h"
#include "route_int.h"
#include "route_client.h"
#include "route_exec.h"
#include "route_insel.h"
#include "route_merge.h"
#include "route_portal.h"
#include "route_seq.h"
#include "route_subq.h"

#include "route_insel_int.h"
#include "route_sqltext.h"

/* ---- small helpers ---- */

/* Append <n> bytes to <b> (doubling its capacity); false on no memory, <b> unchanged. */
bool
insel_buf_put(struct insel_buf *b, const void *p, size_t n)
{
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		uint8_t *np;

		while (cap < b->len + n)
			cap *= 2;
		if ((np = realloc(b->p, cap)) == NULL)
			return false;
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
	return true;
}

/* Make the array <*arr> of <*cap> elements of <size> bytes hold <need>; false on no memory
 * (the array stays as it was). */
bool
insel_grow(void **arr, uint32_t *cap, uint32_t need, size_t size)
{
	uint32_t ncap;
	void *na;

	if (need <= *cap)
		return true;
	ncap = *cap ? *cap : 64;
	while (ncap < need)
		ncap *= 2;
	if ((na = realloc(*arr, (size_t)ncap * size)) == NULL)
		return false;
	*arr = na;
	*cap = ncap;
	return true;
}

/* A big-endian uint32 (message lengths, value lengths). */
uint32_t
insel_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* The first error of the statement found by the router (later ones are consequences). */
static void
insel_fail(struct rinsel *x, const struct nk_error *err)
{
	if (x->failed)
		return;
	x->err = *err;
	x->err.severity = NK_SEV_ERROR;
	x->failed = true;
}

/* The statement's entry of session shard <sh>; NULL when the statement does not use it. */
static struct insel_shard *
insel_entry(struct rinsel *x, const struct route *r, const struct rshard *sh)
{
	int8_t i = x->by_sh[sh - r->sh];

	return i >= 0 ? &x->s[i] : NULL;
}

/* Everything an entry owns (its waiting rows, this round's RETURNING rows). */
static void
insel_shard_free(struct insel_shard *e)
{
	free(e->vals.p);
	free(e->pend);
	free(e->sent);
	for (uint32_t k = 0; k < e->nret; k++)
		free(e->ret[k].msg);
	free(e->ret);
}

/* route_insel_free: see route_int.h. Also at session close, whatever is in flight (the
 * links are the session's: route_drop_links() closes the busy ones). */
void
route_insel_free(struct route *r)
{
	struct rinsel *x = r->x.insel;

	if (x == NULL)
		return;
	for (uint32_t i = 0; i < x->ns; i++)
		insel_shard_free(&x->s[i]);
	if (x->pinned)
		shm_topo_unpin(&x->ref);
	merge_free(x->mg);
	free(x->oids);
	free(x->fills);
	free(x->fill_vals);
	free(x->stage.p);
	free(x->cfmt);
	free(x->cvals);
	free(x->rfmt);
	free(x);
	r->x.insel = NULL;
}

/* ---- the source's columns ---- */

/* The fills of a source <n> columns wide: all of them with a column list, else those of
 * columns past the source's (positional: the first <n> columns get its values). */
static bool
insel_pick_fills(struct rinsel *x, uint32_t n)
{
	const struct plan_insel *is = x->is;

	x->fills = calloc(is->nfills + 1, sizeof(*x->fills));
	if (x->fills == NULL)
		return false;
	x->nfills = 0;
	x->key_fill = -1;
	for (uint32_t f = 0; f < is->nfills; f++) {
		if (is->ncols == 0 && is->fills[f].attnum <= n)
			continue;	/* the source gives it */
		if (is->fills[f].is_key)
			x->key_fill = (int32_t)x->nfills;
		x->fills[x->nfills++] = &is->fills[f];
	}
	return true;
}

/* Where the shard key of each row is: its column, or its fill; NK306 when neither. */
static bool
insel_pick_key(struct rinsel *x, uint32_t n, struct nk_error *err)
{
	const struct plan_insel *is = x->is;

	x->key_col = -1;
	if (is->target != PLAN_INSEL_SHARDED)
		return true;
	if (is->ncols > 0 ? is->key_col >= 0 : is->key_attnum > 0 && is->key_attnum <= n)
		x->key_col = is->ncols > 0 ? is->key_col : (int32_t)is->key_attnum - 1;
	if (x->key_col >= 0 || x->key_fill >= 0)
		return true;
	return nk_error_set(err, NK_ERRCODE_SHARD_KEY_MISSING,
			    "shard-key column \"%s\" of primary index 0 is "
			    "required but missing from INSERT", x->plan.key.column);
}

/*
 * The source's RowDescription <body>: its width picks the fills and the key's column; the
 * Parse type of each value is the column's type (built-in types only: other OIDs differ
 * between servers, and an untyped literal or parameter stays unknown, as Postgres lets the
 * target column type it), int8 for the fills.
 */
static bool
insel_columns(struct rinsel *x, const uint8_t *body, size_t len, struct nk_error *err)
{
	const struct plan_insel *is = x->is;
	struct proto_rowdesc_msg m;
	struct proto_column *cols;
	uint32_t width;

	if (!proto_parse_row_description(body, len, &m, err))
		return false;
	cols = calloc(m.ncols + 1u, sizeof(*cols));
	x->oids = calloc(m.ncols + 1u, sizeof(*x->oids));
	if (cols == NULL || x->oids == NULL || !insel_pick_fills(x, m.ncols)) {
		free(cols);
		return nk_error_oom(err);
	}
	x->ncols = (uint32_t)proto_rowdesc_columns(&m, cols, m.ncols);
	for (uint32_t i = 0; i < x->ncols; i++) {
		bool untyped = is->nuntyped == x->ncols && is->untyped[i];

		x->oids[i] = untyped || cols[i].type_oid >= INSEL_FIRST_USER_OID ? 0 :
			     cols[i].type_oid;
	}
	free(cols);
	x->have_desc = true;
	width = x->ncols + x->nfills;
	if (width == 0)
		return nk_error_set(err, ERRCODE_FEATURE_NOT_SUPPORTED,
				    "an INSERT ... SELECT of no columns cannot be "
				    "run across shards");
	x->batch = (INSEL_PARAMS_MAX - x->ncp) / width;
	if (x->batch > INSEL_BATCH_ROWS)
		x->batch = INSEL_BATCH_ROWS;
	if (x->batch == 0)
		return nk_error_set(err, ERRCODE_PROGRAM_LIMIT_EXCEEDED,
				    "an INSERT ... SELECT row has too many columns "
				    "to be written across shards");
	return insel_pick_key(x, x->ncols, err);
}

/* ---- rows ---- */

/* Keep a DataRow body of the source for routing at the round's end (the fill values it
 * needs may have to be reserved first, which cannot happen while answers are read). Each
 * entry is its length (host order) and the body. */
static bool
insel_stage(struct rinsel *x, const uint8_t *body, size_t len)
{
	uint32_t n = (uint32_t)len;

	if (!insel_buf_put(&x->stage, &n, sizeof(n)) || !insel_buf_put(&x->stage, body, len))
		return false;
	x->nstage++;
	return true;
}

/* Rows the merge lets out, after each message fed: its RowDescription gives the columns
 * (the visible ones: hidden sort keys and partial aggregates stay in the merge), its
 * DataRows are staged in the merge's order, which is the source's order. */
static bool
insel_pull(struct route *r, struct rinsel *x)
{
	struct pktbuf pb;
	struct nk_error err;
	bool ok = true;

	pktbuf_init(&pb, 4096);
	if (!merge_pull(x->mg, &pb, &err)) {
		pktbuf_cleanup(&pb);
		insel_fail(x, &err);
		return true;
	}
	for (size_t o = 0; ok && o + 5 <= pb.len;) {
		const uint8_t *msg = pb.buf + o;
		size_t mlen = 1 + insel_be32(msg + 1);

		if (msg[0] == 'T' && !x->have_desc && !insel_columns(x, msg + 5, mlen - 5, &err))
			insel_fail(x, &err);
		else if (msg[0] == 'D')
			ok = insel_stage(x, msg + 5, mlen - 5);
		o += mlen;
	}
	pktbuf_cleanup(&pb);
	return ok;
}

/* Feed one message of source <src> (MERGE_FINAL: the final query) to the merge. */
static bool
insel_feed(struct route *r, struct rinsel *x, uint32_t src, char type, const uint8_t *body,
	   size_t len)
{
	struct nk_error err;

	if (x->failed)
		return true;	/* the statement fails: the rest is not needed */
	if (!merge_feed(x->mg, src, type, body, len, &err)) {
		insel_fail(x, &err);
		return true;
	}
	return insel_pull(r, x);
}

/* The target (s index) a routing value's shard <uid> names. The uids are pointers into the
 * pinned image, so a pointer seen before is found without comparing strings. */
static bool
insel_target_of(struct rinsel *x, struct route *r, const char *uid, uint32_t *out)
{
	for (uint32_t k = 0; k < x->nshard_ptr; k++)
		if (x->shard_ptr[k] == uid) {
			*out = x->shard_s[k];
			return true;
		}
	for (uint32_t i = 0; i < x->ns; i++) {
		if (!x->s[i].is_tgt || !route_streq(r->sh[x->s[i].sh].uid, uid))
			continue;
		if (x->nshard_ptr < ROUTE_SHARDS_MAX) {
			x->shard_ptr[x->nshard_ptr] = uid;
			x->shard_s[x->nshard_ptr++] = i;
		}
		*out = i;
		return true;
	}
	return false;
}

/* The value of column <col> of DataRow <dm> (len -1: NULL); false when malformed. */
static bool
insel_value(const struct proto_datarow_msg *dm, uint32_t col, const uint8_t **p, int32_t *len)
{
	size_t o = 0;

	for (uint32_t i = 0; i <= col; i++) {
		int32_t n;

		if (o + 4 > dm->values_len)
			return false;
		n = (int32_t)insel_be32(dm->values + o);
		o += 4;
		if (i == col) {
			*p = dm->values + o;
			*len = n;
			return n < 0 || o + (size_t)n <= dm->values_len;
		}
		o += n > 0 ? (size_t)n : 0;
	}
	return false;
}

/* Append a row (its DataRow values, then a value per fill) to target <e>'s waiting rows. */
static bool
insel_append(struct rinsel *x, struct insel_shard *e, uint64_t seq,
	     const struct proto_datarow_msg *dm, const int64_t *fv, uint32_t stride)
{
	size_t before = e->vals.len;

	if (!insel_buf_put(&e->vals, dm->values, dm->values_len))
		return false;
	for (uint32_t f = 0; f < x->nfills; f++) {
		char text[24];
		int n = snprintf(text, sizeof(text), "%" PRId64, fv[(size_t)f * stride]);
		uint8_t len[4] = { 0, 0, 0, (uint8_t)n };

		if (!insel_buf_put(&e->vals, len, 4) || !insel_buf_put(&e->vals, text, (size_t)n))
			return false;
	}
	if (!insel_grow((void **)&e->pend, &e->cap_pend, e->npend + 1, sizeof(*e->pend)))
		return false;
	e->pend[e->npend].seq = seq;
	e->pend[e->npend++].len = (uint32_t)(e->vals.len - before);
	return true;
}

/* Route one source row (number <k> among the staged ones) to its target(s). */
static bool
insel_route_row(struct route *r, struct rinsel *x, const struct proto_datarow_msg *dm,
		uint32_t k, struct nk_error *err)
{
	const int64_t *fv = x->fill_vals + k;
	uint64_t seq = x->seq++;
	const char *uid;
	const uint8_t *key;
	int32_t klen;
	char text[24];
	uint32_t t = 0;

	if (x->is->target != PLAN_INSEL_SHARDED) {
		for (uint32_t i = 0; i < x->ns; i++)
			if (x->s[i].is_tgt && !insel_append(x, &x->s[i], seq, dm, fv, x->nstage))
				return nk_error_oom(err);
		return true;
	}
	if (x->key_fill >= 0) {
		klen = snprintf(text, sizeof(text), "%" PRId64,
				fv[(size_t)x->key_fill * x->nstage]);
		key = (const uint8_t *)text;
	} else if (!insel_value(dm, (uint32_t)x->key_col, &key, &klen)) {
		return nk_error_set(err, ERRCODE_PROTOCOL_VIOLATION,
				    "invalid DataRow from a source shard");
	}
	if (klen < 0)
		return nk_error_set(err, ERRCODE_NOT_NULL_VIOLATION,
				    "null value in column \"%s\" of relation \"%s\" "
				    "violates not-null constraint", x->plan.key.column,
				    x->is->table);
	if (!plan_route_text(&x->in, &x->plan, (const char *)key, (size_t)klen, &uid, err))
		return false;
	if (!insel_target_of(x, r, uid, &t))
		return nk_error_set(err, ERRCODE_INTERNAL_ERROR,
				    "shard \"%s\" is not a target of this INSERT",
				    uid);
	return insel_append(x, &x->s[t], seq, dm, fv, x->nstage) ||
	       nk_error_oom(err);
}

/* Route the staged rows (their fill values are in x->fill_vals). */
static bool
insel_route_staged(struct route *r, struct rinsel *x, struct nk_error *err)
{
	size_t o = 0;

	for (uint32_t k = 0; k < x->nstage; k++) {
		struct proto_datarow_msg dm;
		uint32_t blen;

		memcpy(&blen, x->stage.p + o, sizeof(blen));
		if (!proto_parse_data_row(x->stage.p + o + 4, blen, &dm, err))
			return false;
		if (dm.ncols != x->ncols)
			return nk_error_set(err, ERRCODE_PROTOCOL_VIOLATION,
					    "a source row has %u columns, its "
					    "RowDescription %u", dm.ncols, x->ncols);
		if (!insel_route_row(r, x, &dm, k, err))
			return false;
		o += 4 + blen;
	}
	x->stage.len = 0;
	x->nstage = 0;
	return true;
}

/* ---- the shards' answers ---- */

/* Each shard's answer is read in the order of its round's statements (e->ops, e->cur): a
 * CommandComplete (a DESCRIBE's RowDescription) ends one. */

static bool
insel_skip(struct link *l, const struct sbuf_pkt *pkt)
{
	sbuf_skip(link_sbuf(l), pkt->len);
	return true;
}

/* RowDescription: the source's columns (FETCH, FINAL), or RETURNING's (INSERT, DESCRIBE),
 * which the client gets once (extended protocol: when it described the portal). */
static bool
insel_on_desc(struct route *r, struct rinsel *x, struct insel_shard *e, enum insel_op op,
	      struct link *l, const struct sbuf_pkt *pkt)
{
	const uint8_t *body = pkt->data + 5;
	size_t len = pkt->len - 5;
	struct nk_error err;

	switch (op) {
	case INSEL_OP_FETCH:
		if (x->mg != NULL && !e->described) {
			e->described = true;
			if (!insel_feed(r, x, e->src_no, 'T', body, len))
				return false;
		} else if (x->mg == NULL && !x->have_desc && !x->failed &&
			   !insel_columns(x, body, len, &err)) {
			insel_fail(x, &err);
		}
		return insel_skip(l, pkt);
	case INSEL_OP_FINAL:
		return insel_feed(r, x, MERGE_FINAL, 'T', body, len) && insel_skip(l, pkt);
	case INSEL_OP_DESCRIBE:
		e->cur++;
		/* FALLTHROUGH */
	case INSEL_OP_INSERT:
		if (x->rowdesc_sent || (r->x.ext_exec && !r->x.ext_describe))
			return insel_skip(l, pkt);
		x->rowdesc_sent = true;
		if (r->x.subq_capture)	/* (a step of a GSI: its RETURNING kept) */
			return route_subq_keep(r, pkt->data, pkt->len) && insel_skip(l, pkt);
		r->c.stats->total_sent += pkt->len;
		sbuf_forward(link_sbuf(l), r->c.sb, pkt->len);
		return true;
	default:
		return insel_skip(l, pkt);
	}
}

/* A RETURNING row of target <e>: kept to be sent in source order after the round. */
static bool
insel_keep_returned(struct insel_shard *e, const struct sbuf_pkt *pkt)
{
	struct rrow *rr;

	if (!insel_grow((void **)&e->ret, &e->cap_ret, e->nret + 1, sizeof(*e->ret)))
		return false;
	rr = &e->ret[e->nret];
	if ((rr->msg = malloc(pkt->len)) == NULL)
		return false;
	memcpy(rr->msg, pkt->data, pkt->len);
	rr->len = pkt->len;
	e->nret++;
	return true;
}

static bool
insel_on_row(struct route *r, struct rinsel *x, struct insel_shard *e, enum insel_op op,
	     struct link *l, const struct sbuf_pkt *pkt)
{
	const uint8_t *body = pkt->data + 5;
	size_t len = pkt->len - 5;
	bool ok = true;

	if (op == INSEL_OP_FETCH && x->mg != NULL)
		ok = insel_feed(r, x, e->src_no, 'D', body, len);
	else if (op == INSEL_OP_FETCH && !x->failed)
		ok = insel_stage(x, body, len);
	else if (op == INSEL_OP_FINAL)
		ok = insel_feed(r, x, MERGE_FINAL, 'D', body, len);
	else if (op == INSEL_OP_INSERT)
		ok = insel_keep_returned(e, pkt);
	if (!ok) {
		route_client_fatal(r, "out of memory");
		return false;
	}
	return insel_skip(l, pkt);
}

/* CommandComplete ends the current statement of <e>'s message. */
static bool
insel_on_complete(struct route *r, struct rinsel *x, struct insel_shard *e, enum insel_op op,
		  struct link *l, const struct sbuf_pkt *pkt)
{
	const char *tag;
	char head[64];
	uint64_t n = 0;
	bool counted = false, ok = true;
	struct nk_error err;

	if (proto_parse_command_complete(pkt->data + 5, pkt->len - 5, &tag, &err))
		route_tag_split(tag, head, sizeof(head), &n, &counted);
	e->cur++;
	if (op == INSEL_OP_FETCH && n < INSEL_FETCH_ROWS) {
		e->exhausted = true;
		if (x->mg != NULL)
			ok = insel_feed(r, x, e->src_no, 'C', pkt->data + 5, pkt->len - 5);
	} else if (op == INSEL_OP_FINAL) {
		ok = insel_feed(r, x, MERGE_FINAL, 'C', pkt->data + 5, pkt->len - 5);
	} else if (op == INSEL_OP_INSERT &&
		   (x->is->target != PLAN_INSEL_REFERENCE || e->first_copy)) {
		x->total += n;
	}
	if (!ok) {
		route_client_fatal(r, "out of memory");
		return false;
	}
	return insel_skip(l, pkt);
}

/* route_insel_msg: see route_int.h. */
bool
route_insel_msg(struct route *r, struct rshard *sh, struct link *l, const struct sbuf_pkt *pkt)
{
	struct rinsel *x = r->x.insel;
	struct insel_shard *e = x != NULL ? insel_entry(x, r, sh) : NULL;
	enum insel_op op;

	if (e == NULL)
		return insel_skip(l, pkt);
	if (strchr("TDCn", pkt->type) != NULL && pkt->avail < pkt->len) {
		if (sbuf_hold(link_sbuf(l), pkt->len))
			return true;
		route_client_fatal(r, "server sent too big packet");
		return false;
	}
	op = e->cur < e->nops ? e->ops[e->cur] : INSEL_OP_NONE;
	switch (pkt->type) {
	case 'T':
		return insel_on_desc(r, x, e, op, l, pkt);
	case 'D':
		return insel_on_row(r, x, e, op, l, pkt);
	case 'C':
		return insel_on_complete(r, x, e, op, l, pkt);
	case 'n':
		if (op == INSEL_OP_DESCRIBE)
			e->cur++;	/* (no RETURNING columns: not expected) */
		return insel_skip(l, pkt);
	default:	/* ParseComplete, BindComplete, ParameterDescription */
		return insel_skip(l, pkt);
	}
}

/* ---- rounds ---- */

/* Some target holds more rows than one round writes: no more rows are read meanwhile. */
static bool
insel_backlog(const struct rinsel *x)
{
	for (uint32_t i = 0; i < x->ns; i++)
		if (x->s[i].is_tgt && x->s[i].npend > x->batch * INSEL_INSERTS_MAX)
			return true;
	return false;
}

/* Source <e> is read further: it may give rows, the merge wants them (a shard the merge
 * holds a FETCH of rows of waits), and no target has a backlog. */
static bool
insel_fetch_wanted(const struct rinsel *x, const struct insel_shard *e, bool backlog)
{
	if (!e->open || e->exhausted || backlog || x->failed)
		return false;
	return x->mg == NULL || (merge_state(x->mg) == MERGE_NEED_ROWS &&
				 merge_queued(x->mg, e->src_no) < INSEL_FETCH_ROWS);
}

/* Every source is read to its end (or no longer needed) and every row routed. */
static bool
insel_reading_done(const struct rinsel *x)
{
	for (uint32_t i = 0; i < x->ns; i++)
		if (x->s[i].is_src && (!x->s[i].declared || x->s[i].open))
			return false;
	return x->nstage == 0 && (x->mg == NULL || merge_state(x->mg) == MERGE_DONE);
}

static bool
insel_pending(const struct rinsel *x)
{
	for (uint32_t i = 0; i < x->ns; i++)
		if (x->s[i].npend > 0)
			return true;
	return false;
}

/* The source statements of <e> in this round: DECLARE + FETCH, FETCH, CLOSE, FINAL. */
static bool
insel_put_source(struct route *r, struct rinsel *x, struct insel_shard *e, struct pktbuf *pb,
		 bool backlog)
{
	static const char fetch[] = "FETCH FORWARD 1000 FROM " INSEL_CURSOR;
	bool done = x->mg != NULL && merge_state(x->mg) != MERGE_NEED_ROWS;
	bool ok = true;

	if (!e->declared) {
		struct insel_buf b = { NULL, 0, 0 };

		ok = insel_sql_put(&b, "DECLARE " INSEL_CURSOR " NO SCROLL CURSOR FOR ") &&
		     insel_sql_put(&b, x->src_sql) && insel_buf_put(&b, "", 1) &&
		     insel_put_stmt(r, x, pb, (const char *)b.p, true, false) &&
		     insel_put_stmt(r, x, pb, fetch, false, true);
		free(b.p);
		e->ops[e->nops++] = INSEL_OP_DECLARE;
		e->ops[e->nops++] = INSEL_OP_FETCH;
		e->declared = e->open = true;
	} else if (e->open && (e->exhausted || done || x->failed)) {
		ok = insel_put_stmt(r, x, pb, "CLOSE " INSEL_CURSOR, false, false);
		e->ops[e->nops++] = INSEL_OP_CLOSE;
		e->open = false;
	} else if (insel_fetch_wanted(x, e, backlog)) {
		ok = insel_put_stmt(r, x, pb, fetch, false, true);
		e->ops[e->nops++] = INSEL_OP_FETCH;
	}
	if (ok && e->src_no == 0 && x->mg != NULL && merge_state(x->mg) == MERGE_NEED_FINAL &&
	    !x->final_sent && !x->failed) {
		ok = insel_put_stmt(r, x, pb, merge_final_sql(x->mg), true, true);
		e->ops[e->nops++] = INSEL_OP_FINAL;
		x->final_sent = true;
	}
	return ok;
}

/* RETURNING without a row written (nothing read): the RowDescription is still owed. */
static bool
insel_describe_owed(struct route *r, const struct rinsel *x)
{
	return x->is->returning && !x->rowdesc_sent && !x->describe_done && x->have_desc &&
	       (!r->x.ext_exec || r->x.ext_describe) && insel_reading_done(x) && !insel_pending(x);
}

/* The message of <e> in this round into <pb> (nothing when it has no statement). */
static bool
insel_shard_msg(struct route *r, struct rinsel *x, struct insel_shard *e, struct pktbuf *pb,
		bool backlog, bool describe)
{
	for (uint32_t k = 0; k < e->nret; k++)
		free(e->ret[k].msg);
	e->nret = e->nops = e->cur = e->nsent = 0;
	if (e->is_tgt && e->npend > 0 && !x->failed && !insel_put_inserts(r, x, e, pb))
		return false;
	if (e->is_src && !insel_put_source(r, x, e, pb, backlog))
		return false;
	if (describe && e->is_tgt && (e->first_copy || x->is->target != PLAN_INSEL_REFERENCE)) {
		x->describe_done = true;
		if (!insel_put_describe(r, x, e, pb))
			return false;
	}
	if (e->nops > 0)
		pktbuf_write_sync(pb);
	return !pktbuf_failed(pb);
}

/*
 * Start the next round: one exec over every shard with a statement. *<started> false and
 * true returned: there was nothing left to do. False with <err>: nothing was started.
 */
static bool
insel_round(struct route *r, struct rinsel *x, bool *started, struct nk_error *err)
{
	const char *uids[ROUTE_SHARDS_MAX];
	struct pktbuf pb[ROUTE_SHARDS_MAX];
	bool backlog = insel_backlog(x), describe = insel_describe_owed(r, x), ok = true;
	uint32_t nt = 0;

	*started = false;
	for (uint32_t i = 0; i < x->ns; i++) {
		pktbuf_init(&pb[i], 256);
		ok = ok && insel_shard_msg(r, x, &x->s[i], &pb[i], backlog, describe && nt == 0);
		if (ok && x->s[i].nops > 0)
			uids[nt++] = r->sh[x->s[i].sh].uid;
	}
	if (ok && nt > 0 && route_exec_setup(r, uids, nt, "", err)) {
		for (uint32_t i = 0; i < x->ns; i++) {
			struct rshard *sh = &r->sh[x->s[i].sh];

			if (x->s[i].nops == 0)
				continue;
			sh->ext_msg = pb[i].buf;	/* taken over */
			sh->ext_len = pb[i].len;
			pktbuf_init(&pb[i], 0);
		}
		r->x.combine = RX_INSEL;
		*started = true;
	} else if (!ok) {
		nk_error_oom(err);
	}
	for (uint32_t i = 0; i < x->ns; i++)
		pktbuf_cleanup(&pb[i]);
	if (!ok || (nt > 0 && !*started))
		return false;
	return !*started || route_exec_start(r, err);
}

/* ---- after a round ---- */

/* Rows <pb> to the client, or kept when they are a GSI step's RETURNING (route_gsi.c
 * reads them through route_subq_keep()). False when the session is gone. */
static bool
insel_out(struct route *r, struct pktbuf *pb)
{
	bool ok;

	if (!r->x.subq_capture) {
		r->c.stats->total_sent += pb->len;
		return route_send(r, pb);
	}
	ok = route_subq_keep(r, pb->buf, pb->len);
	pktbuf_cleanup(pb);
	return ok;
}

/*
 * The round's RETURNING rows to the client in source order: each target returned its rows
 * in the order of its VALUES (sent[]); a target whose ON CONFLICT DO NOTHING skipped rows
 * returned fewer, which keep their order among themselves (a GSI step's: kept, insel_out()).
 * False when the client is gone.
 */
static bool
insel_send_returned(struct route *r, struct rinsel *x)
{
	uint32_t pos[ROUTE_SHARDS_MAX] = { 0 };
	struct pktbuf pb;

	pktbuf_init(&pb, 4096);
	for (;;) {
		int best = -1;
		uint64_t bseq = UINT64_MAX;

		for (uint32_t i = 0; i < x->ns; i++) {
			const struct insel_shard *e = &x->s[i];
			uint64_t seq;

			if (pos[i] >= e->nret)
				continue;
			seq = pos[i] < e->nsent ? e->sent[pos[i]] : UINT64_MAX;
			if (best < 0 || seq < bseq) {
				best = (int)i;
				bseq = seq;
			}
		}
		if (best < 0)
			break;
		pktbuf_put_bytes(&pb, x->s[best].ret[pos[best]].msg, x->s[best].ret[pos[best]].len);
		pos[best]++;
		if (pb.len >= 65536) {
			if (!insel_out(r, &pb))
				return false;
			pktbuf_init(&pb, 4096);
		}
	}
	if (pb.len == 0) {
		pktbuf_cleanup(&pb);
		return true;
	}
	return insel_out(r, &pb);
}

/* The statement ended (<err> NULL: its tag); the next statement or the Query's end. */
static void
insel_finish(struct route *r, const struct nk_error *err)
{
	struct rinsel *x = r->x.insel;
	bool nodata = err == NULL && r->x.ext_exec && r->x.ext_describe && !x->is->returning;
	struct nk_error e;
	char tag[64];
	struct pktbuf pb;

	snprintf(tag, sizeof(tag), "INSERT 0 %" PRIu64, x->total);
	snprintf(r->last_tag, sizeof(r->last_tag), "INSERT 0");	/* (its portal's) */
	if (err != NULL)
		e = *err;
	route_insel_free(r);
	route_exec_reset(r);
	if (r->x.subq_capture) {	/* a GSI step (its RETURNING kept): the statement goes on */
		if (err != NULL && !r->x.has_err) {
			r->x.err = e;
			r->x.has_err = true;
		}
		if (route_subq_finished(r) && !r->x.has_err)
			return;
		e = r->x.err;
		r->x.has_err = false;
		route_stmt_finish(r, NULL, &e);
		return;
	}
	if (nodata) {
		pktbuf_init(&pb, 8);
		pktbuf_write_no_data(&pb);
		if (!route_send(r, &pb))
			return;
	}
	route_stmt_finish(r, err == NULL ? tag : NULL, err != NULL ? &e : NULL);
}

/* Fill values for the staged rows, then route them; false when a reservation runs (or the
 * statement failed: finished). */
static bool
insel_route_all(struct route *r, struct rinsel *x)
{
	struct nk_error err;

	if (x->nstage == 0)
		return true;
	if (x->nfills > 0) {
		uint32_t need = x->nfills * x->nstage;

		if (!insel_grow((void **)&x->fill_vals, &x->fill_cap, need, sizeof(*x->fill_vals))) {
			nk_error_oom(&err);
			insel_finish(r, &err);
			return false;
		}
		switch (route_seq_fill_values(r, x->fills, x->nfills, x->nstage, x->fill_vals,
					      &err)) {
		case ROUTE_SEQ_READY:
			break;
		case ROUTE_SEQ_ASYNC:
			return false;	/* route_insel_next() again when it ended */
		case ROUTE_SEQ_FAILED:
			insel_finish(r, &err);
			return false;
		}
	}
	if (insel_route_staged(r, x, &err))
		return true;
	insel_finish(r, &err);
	return false;
}

/* After the rows were routed: wait for the client, start a round, or finish. */
static void
insel_go_on(struct route *r, struct rinsel *x)
{
	struct nk_error err;
	bool started;

	if (sbuf_queued(r->c.sb) >= INSEL_CLIENT_MAX) {
		x->client_wait = true;	/* RETURNING rows: the client reads slower */
		sbuf_set_notify_send_done(r->c.sb, true);
		return;
	}
	if (!insel_round(r, x, &started, &err)) {
		insel_finish(r, &err);
	} else if (!started && !(insel_reading_done(x) && !insel_pending(x))) {
		nk_error_set(&err, ERRCODE_INTERNAL_ERROR,
			     "INSERT ... SELECT stopped making progress");
		insel_finish(r, &err);
	} else if (!started) {
		insel_finish(r, NULL);
	}
}

/* route_insel_next: see route_int.h. */
void
route_insel_next(struct route *r)
{
	struct rinsel *x = r->x.insel;
	struct nk_error err;

	if (r->x.after == RX_AFTER_SEQ) {		/* a reservation for the fills ended */
		if (!route_seq_end(r)) {
			err = r->x.err;
			insel_finish(r, &err);
			return;
		}
		route_exec_reset(r);
		r->x.after = RX_AFTER_STMT;
	} else if (r->x.combine == RX_INSEL) {	/* a round ended */
		if (r->x.has_err) {
			err = r->x.err;
			insel_finish(r, &err);
			return;
		}
		if (!insel_send_returned(r, x))
			return;		/* the client is gone: the session is closed */
		route_exec_reset(r);
	}
	if (x->failed) {
		err = x->err;
		insel_finish(r, &err);
		return;
	}
	if (insel_route_all(r, x))
		insel_go_on(r, x);
}

/* route_insel_client_ready: see route_int.h. */
bool
route_insel_client_ready(struct route *r)
{
	struct rinsel *x = r->x.insel;

	if (x == NULL || !x->client_wait)
		return false;
	x->client_wait = false;
	sbuf_set_notify_send_done(r->c.sb, false);
	insel_go_on(r, x);
	return true;
}

/* ---- start ---- */

/* Extended protocol: the client's bound values and formats, for every statement sent. */
static bool
insel_client_values(struct route *r, struct rinsel *x, struct nk_error *err)
{
	struct proto_bind_msg m;
	bool ok;

	if (!r->x.ext_exec || r->xportal == NULL)
		return true;
	ok = route_portal_bind_msg(r->xportal, &m, err);
	if (ok && m.nparams > 256)
		ok = nk_error_set(err, ERRCODE_PROGRAM_LIMIT_EXCEEDED,
				  "an INSERT ... SELECT across shards takes at most "
				  "256 parameters");
	if (ok) {
		x->ncp = m.nparams;
		x->cfmt = malloc((size_t)m.nparams * 2 + 1);
		x->cvals = malloc(m.params_len + 1);
		x->rfmt = malloc((size_t)m.nresult_formats * 2 + 1);
		ok = x->cfmt != NULL && x->cvals != NULL && x->rfmt != NULL;
		for (uint16_t i = 0; ok && i < m.nparams; i++) {
			x->cfmt[2 * i] = 0;
			x->cfmt[2 * i + 1] = (uint8_t)proto_bind_param_format(&m, i);
		}
		if (ok) {
			memcpy(x->cvals, m.params, m.params_len);
			x->cvals_len = m.params_len;
			memcpy(x->rfmt, m.result_formats, (size_t)m.nresult_formats * 2);
			x->nrfmt = m.nresult_formats;
		} else {
			nk_error_oom(err);
		}
	}
	return ok || nk_error_is_set(err) || nk_error_oom(err);
}

/* The entry of shard <uid> (added when new). */
static struct insel_shard *
insel_add_shard(struct route *r, struct rinsel *x, const char *uid, struct nk_error *err)
{
	struct rshard *sh = route_shard(r, uid, err);
	int8_t *i;

	if (sh == NULL)
		return NULL;
	i = &x->by_sh[sh - r->sh];
	if (*i < 0) {
		*i = (int8_t)x->ns;
		x->s[x->ns++].sh = (uint32_t)(sh - r->sh);
	}
	return &x->s[*i];
}

/* The source's shards (their cursors) and the targets; a merged source's merge. */
static bool
insel_setup(struct route *r, struct rinsel *x, struct nk_error *err)
{
	const struct plan *src = x->is->source;
	struct plan_input in = { 0 };
	struct merge_options opt = route_merge_options(r);

	for (uint32_t i = 0; i < src->nshards; i++) {
		struct insel_shard *e = insel_add_shard(r, x, src->shards[i], err);

		if (e == NULL)
			return false;
		e->is_src = true;
		e->src_no = x->nsrc++;
	}
	for (uint32_t i = 0; i < x->is->ntargets; i++) {
		struct insel_shard *e = insel_add_shard(r, x, x->is->targets[i], err);

		if (e == NULL)
			return false;
		e->first_copy = e->first_copy || i == 0;
		e->is_tgt = true;
	}
	x->src_sql = x->is->source_sql;
	if (src->nshards < 2 || !(src->merge & INSEL_MERGE_FLAGS))
		return true;
	in.params = r->x.ext_exec ? r->x.ext_params : NULL;
	in.nparams = r->x.ext_exec ? r->x.ext_nparams : 0;
	if (!plan_merge_cached(r->arena, x->is->source_sql, &x->spec, err) ||
	    !plan_merge_bind(&x->spec, &in, &opt.limit, &opt.offset, err) ||
	    (x->mg = merge_new(&x->spec, x->nsrc, &opt, err)) == NULL)
		return false;
	x->src_sql = x->spec.shard_sql;
	return true;
}

/* route_insel_start: see route_int.h. */
bool
route_insel_start(struct route *r, const struct plan *p, const void *img, struct nk_error *err)
{
	struct rinsel *x = calloc(1, sizeof(*x));
	bool opened = r->tx == 'I', started;

	if (x == NULL)
		return nk_error_oom(err);
	if (r->x.ext_exec && r->x.ext_max_rows > 0 && p->insel->returning) {
		free(x);
		return nk_error_set(err, ERRCODE_FEATURE_NOT_SUPPORTED,
				    "the RETURNING rows of an INSERT ... SELECT run "
				    "across shards cannot be fetched in parts (Execute with a row "
				    "limit)");
	}
	r->x.insel = x;
	x->plan = *p;
	x->is = p->insel;
	memset(x->by_sh, -1, sizeof(x->by_sh));
	x->pinned = shm_topo_pin(&x->ref);
	x->in.topo = x->ref.data;
	x->in.sess = &r->ps;
	if (!x->pinned || x->ref.data != img)
		nk_error_set(err, ERRCODE_T_R_SERIALIZATION_FAILURE,
			     "the data topology changed while the INSERT started");
	else if (insel_client_values(r, x, err) && insel_setup(r, x, err) &&
		 (!opened || route_implicit_begin(r))) {
		/* all rows or none: one transaction over every shard, cursors included */
		r->ext_implicit = opened && r->x.ext_exec;
		route_set_busy(r);
		if (insel_round(r, x, &started, err) && started)
			return true;
		if (!nk_error_is_set(err))
			nk_error_set(err, ERRCODE_INTERNAL_ERROR,
				     "INSERT ... SELECT has no shard to read");
	} else if (!nk_error_is_set(err)) {
		nk_error_oom(err);
	}
	if (opened) {			/* nothing was sent: no transaction to end */
		r->implicit = r->ext_implicit = false;
		r->tx = 'I';
		free(r->begin_sql);
		r->begin_sql = NULL;
	}
	route_insel_free(r);
	route_exec_reset(r);
	return false;
}
