/*
 * route_insel_sql.c - the messages of an INSERT ... SELECT across shards (route_insel.c):
 * the INSERT batches' text and Bind values, the source's DECLARE / FETCH / CLOSE and the
 * Describe owed when RETURNING had no row.
 */
#include "neki/base.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "neki/link.h"
#include "neki/pktbuf.h"
#include "neki/proto.h"
#include "route_insel_int.h"
#include "route_portal.h"
#include "route_sqltext.h"

/* ---- messages ---- */

/*
 * Every statement a shard gets is Parse / Bind / Execute of the unnamed statement; a shard's
 * statements of one round end with one Sync, so one ReadyForQuery ends its answer (after an
 * error the shard skips the rest up to it).
 */

/* Append text <s> (no NUL) to the statement being built. */
bool
insel_sql_put(struct insel_buf *b, const char *s)
{
	return insel_buf_put(b, s, strlen(s));
}

/* <name> as a quoted identifier. */
static bool
sql_ident(struct insel_buf *b, const char *name)
{
	bool ok = insel_buf_put(b, "\"", 1);

	for (const char *p = name; ok && *p; p++)
		ok = *p == '"' ? insel_buf_put(b, "\"\"", 2) : insel_buf_put(b, p, 1);
	return ok && insel_buf_put(b, "\"", 1);
}

/* The column list part after the head: fill columns (positional: the columns the source
 * gives written out first, as plan_rewrite() does for VALUES) and OVERRIDING SYSTEM VALUE,
 * which a GENERATED ALWAYS identity needs to take the router's values. */
static bool
insel_sql_cols(struct rinsel *x, struct insel_buf *b)
{
	const struct plan_insel *is = x->is;
	bool ok = true;
	uint32_t n = 0;

	if (x->nfills == 0)
		return !is->cols_paren || insel_sql_put(b, ")");
	if (!is->cols_paren) {
		ok = insel_sql_put(b, " (");
		for (; ok && n < x->ncols && n < is->ntable_cols; n++)
			ok = (n == 0 || insel_sql_put(b, ", ")) && sql_ident(b, is->table_cols[n]);
	}
	for (uint32_t f = 0; ok && f < x->nfills; f++)
		ok = ((is->cols_paren || n > 0 || f > 0) ? insel_sql_put(b, ", ") : true) &&
		     sql_ident(b, x->fills[f]->column);
	return ok && insel_sql_put(b, ")") && insel_sql_put(b, " OVERRIDING SYSTEM VALUE");
}

/* `<head>) VALUES ($m+1, ...), ... <tail>` for <nrows> rows to target <e>; malloc'd. The
 * client's own $1..$m keep their numbers, so ON CONFLICT / RETURNING may use them; a
 * reference copy other than the first has no RETURNING (the client gets one copy's rows). */
static char *
insel_insert_sql(struct rinsel *x, const struct insel_shard *e, uint32_t nrows)
{
	const struct plan_insel *is = x->is;
	struct insel_buf b = { NULL, 0, 0 };
	uint32_t width = x->ncols + x->nfills, k = x->ncp;
	bool ok = insel_sql_put(&b, is->head) && insel_sql_cols(x, &b);

	if (ok && is->overriding && x->nfills == 0)
		ok = insel_sql_put(&b, " OVERRIDING SYSTEM VALUE");
	ok = ok && insel_sql_put(&b, " VALUES ");
	for (uint32_t row = 0; ok && row < nrows; row++) {
		ok = insel_sql_put(&b, row ? ", (" : "(");
		for (uint32_t c = 0; ok && c < width; c++) {
			char p[16];

			snprintf(p, sizeof(p), "%s$%u", c ? ", " : "", ++k);
			ok = insel_sql_put(&b, p);
		}
		ok = ok && insel_sql_put(&b, ")");
	}
	ok = ok && insel_sql_put(&b, " ") &&
	     insel_sql_put(&b, is->target == PLAN_INSEL_REFERENCE && !e->first_copy ? is->tail_noret :
			 is->tail) && insel_buf_put(&b, "", 1);
	if (!ok) {
		free(b.p);
		return NULL;
	}
	return (char *)b.p;
}

/* Parse types of the client's parameters in <sql> (text, or bytea when bound in binary, for
 * one <sql> does not reference: the shard would refuse an untyped parameter it cannot
 * infer) into <o>[0..m). */
static void
insel_client_oids(struct route *r, struct rinsel *x, const char *sql, uint32_t *o)
{
	bool used[256] = { false };

	route_sql_params(sql, used, x->ncp);
	for (uint32_t i = 0; i < x->ncp; i++) {
		const struct rportal *xp = r->xportal;
		const uint8_t *b = xp != NULL && i < xp->noids ? xp->oids + i * 4 : NULL;

		o[i] = b != NULL ? insel_be32(b) : 0;
		if (!used[i])
			o[i] = x->cfmt[2 * i + 1] == 1 ? INSEL_OID_BYTEA : INSEL_OID_TEXT;
	}
}

/* Bind of the unnamed statement: the client's values first (<client>), then <nvals> of ours
 * (<vals>); results in text, or in the client's formats (<client_results>). */
static void
insel_put_bind(struct pktbuf *pb, const struct rinsel *x, bool client, const uint8_t *vals,
	       size_t vlen, uint32_t nvals, bool client_results)
{
	uint32_t m = client ? x->ncp : 0;

	pktbuf_begin(pb, 'B');
	pktbuf_put_string(pb, "");
	pktbuf_put_string(pb, "");
	if (m == 0) {
		pktbuf_put_int16(pb, 0);	/* every value in text */
	} else {
		pktbuf_put_int16(pb, (int16_t)(uint16_t)(m + nvals));
		pktbuf_put_bytes(pb, x->cfmt, (size_t)m * 2);
		for (uint32_t i = 0; i < nvals; i++)
			pktbuf_put_int16(pb, 0);
	}
	pktbuf_put_int16(pb, (int16_t)(uint16_t)(m + nvals));
	if (m > 0)
		pktbuf_put_bytes(pb, x->cvals, x->cvals_len);
	if (vlen > 0)
		pktbuf_put_bytes(pb, vals, vlen);
	if (client_results && x->nrfmt > 0) {
		pktbuf_put_int16(pb, (int16_t)x->nrfmt);
		pktbuf_put_bytes(pb, x->rfmt, (size_t)x->nrfmt * 2);
	} else {
		pktbuf_put_int16(pb, 0);
	}
	pktbuf_end(pb);
}

/* Parse + Bind (+ Describe) + Execute of <sql>, with the client's values when <client>
 * (DECLARE of a source reading $n, the merge's final query with HAVING's $n). */
bool
insel_put_stmt(struct route *r, struct rinsel *x, struct pktbuf *pb, const char *sql,
	       bool client, bool describe)
{
	uint32_t o[256];

	if (client)
		insel_client_oids(r, x, sql, o);
	pktbuf_write_parse(pb, "", sql, o, client ? x->ncp : 0);
	insel_put_bind(pb, x, client, NULL, 0, 0, false);
	if (describe)
		pktbuf_write_describe(pb, 'P', "");
	pktbuf_write_execute(pb, "", 0);
	return !pktbuf_failed(pb);
}

/* Parse types of one INSERT batch: the client's, each row's columns, int8 per fill. */
static uint32_t *
insel_batch_oids(struct route *r, struct rinsel *x, const char *sql, uint32_t nrows)
{
	uint32_t width = x->ncols + x->nfills, n = x->ncp + nrows * width;
	uint32_t *o = malloc(((size_t)n + 1) * sizeof(*o));

	if (o == NULL)
		return NULL;
	insel_client_oids(r, x, sql, o);
	for (uint32_t row = 0; row < nrows; row++)
		for (uint32_t c = 0; c < width; c++)
			o[x->ncp + row * width + c] = c < x->ncols ? x->oids[c] : INSEL_OID_INT8;
	return o;
}

/* One INSERT of <nrows> waiting rows of <e> (their values at <vals>, <vlen> bytes). */
static bool
insel_put_insert(struct route *r, struct rinsel *x, struct insel_shard *e, struct pktbuf *pb,
		 uint32_t nrows, const uint8_t *vals, size_t vlen)
{
	char *sql = insel_insert_sql(x, e, nrows);
	uint32_t *oids = sql != NULL ? insel_batch_oids(r, x, sql, nrows) : NULL;
	bool ret = x->is->returning && (x->is->target != PLAN_INSEL_REFERENCE || e->first_copy);

	if (oids == NULL) {
		free(sql);
		return false;
	}
	pktbuf_write_parse(pb, "", sql, oids, x->ncp + nrows * (x->ncols + x->nfills));
	insel_put_bind(pb, x, true, vals, vlen, nrows * (x->ncols + x->nfills), r->x.ext_exec);
	if (ret)
		pktbuf_write_describe(pb, 'P', "");
	pktbuf_write_execute(pb, "", 0);
	free(oids);
	free(sql);
	return !pktbuf_failed(pb);
}

/* The INSERTs of target <e> in this round (its waiting rows, INSEL_INSERTS_MAX batches at
 * most); the rows sent leave the waiting list, their numbers are kept for RETURNING. */
bool
insel_put_inserts(struct route *r, struct rinsel *x, struct insel_shard *e, struct pktbuf *pb)
{
	uint32_t done = 0;
	size_t off = 0;

	e->nsent = 0;
	for (uint32_t b = 0; b < INSEL_INSERTS_MAX && done < e->npend; b++) {
		uint32_t n = e->npend - done < x->batch ? e->npend - done : x->batch;
		size_t bytes = 0;

		if (!insel_grow((void **)&e->sent, &e->cap_sent, e->nsent + n, sizeof(*e->sent)))
			return false;
		for (uint32_t k = 0; k < n; k++) {
			bytes += e->pend[done + k].len;
			e->sent[e->nsent++] = e->pend[done + k].seq;
		}
		if (!insel_put_insert(r, x, e, pb, n, e->vals.p + off, bytes))
			return false;
		e->ops[e->nops++] = INSEL_OP_INSERT;
		done += n;
		off += bytes;
	}
	memmove(e->pend, e->pend + done, (size_t)(e->npend - done) * sizeof(*e->pend));
	e->npend -= done;
	memmove(e->vals.p, e->vals.p + off, e->vals.len - off);
	e->vals.len -= off;
	return true;
}

/* RETURNING and no row written: the RowDescription a batch would have (a Bind of NULLs,
 * Describe, no Execute). */
bool
insel_put_describe(struct route *r, struct rinsel *x, struct insel_shard *e, struct pktbuf *pb)
{
	uint32_t width = x->ncols + x->nfills;
	char *sql = insel_insert_sql(x, e, 1);
	uint32_t *oids = sql != NULL ? insel_batch_oids(r, x, sql, 1) : NULL;
	struct insel_buf nulls = { NULL, 0, 0 };
	bool ok = oids != NULL;

	for (uint32_t c = 0; ok && c < width; c++)
		ok = insel_buf_put(&nulls, "\377\377\377\377", 4);
	if (ok) {
		pktbuf_write_parse(pb, "", sql, oids, x->ncp + width);
		insel_put_bind(pb, x, true, nulls.p, nulls.len, width, r->x.ext_exec);
		pktbuf_write_describe(pb, 'P', "");
		e->ops[e->nops++] = INSEL_OP_DESCRIBE;
	}
	free(nulls.p);
	free(oids);
	free(sql);
	return ok && !pktbuf_failed(pb);
}
