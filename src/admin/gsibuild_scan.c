/*
 * gsibuild_scan.c - the chunked passes of __neki.gsi_build (gsibuild.c runs the steps): the
 * fill of the lookup table from each owner shard in primary-key order, FOR SHARE, and its
 * verification (a unique GSI's duplicates on one shard, lookup rows naming no owner row),
 * with the SQL texts they send.
 * Entry points: gb_fill_chunk(), gb_dups(), gb_orphan_chunk(), gb_recheck().
 */
#include "neki/base.h"

#include "admin_int.h"
#include "gsibuild_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "neki/keyspace.h"
#include "neki/log.h"
#include "neki/memstream.h"
#include "neki/shm.h"
#include "neki/sqlscan.h"
#include "neki/sqlstate.h"
#include "neki/topology_image.h"

/* ---- values and texts ---- */

void
gb_rows_clear(struct gb_rows *r)
{
	for (size_t i = 0; r->v != NULL && i < r->n * r->ncols; i++)
		free(r->v[i]);
	free(r->v);
	*r = (struct gb_rows){ 0, 0, NULL };
}

/* Keep the rows of <res> in <r>. */
static bool
rows_keep(struct gb_rows *r, const struct pgc_res *res, size_t ncols)
{
	size_t n = pgc_res_rows(res);

	gb_rows_clear(r);
	r->ncols = ncols;
	if (n == 0)
		return true;
	if ((r->v = calloc(n * ncols, sizeof(char *))) == NULL)
		return false;
	r->n = n;
	for (size_t i = 0; i < n * ncols; i++) {
		const char *s = pgc_res_get(res, i / ncols, i % ncols);

		if (s != NULL && (r->v[i] = strdup(s)) == NULL)
			return false;
	}
	return true;
}

/* Append row <row> of <src> to <r>: its columns <pos>[0..r->ncols), or <off> onwards. */
static bool
rows_add(struct gb_rows *r, const struct gb_rows *src, size_t row, size_t off,
	 const size_t *pos)
{
	char **v = realloc(r->v, (r->n + 1) * r->ncols * sizeof(char *));

	if (v == NULL)
		return false;
	r->v = v;
	for (size_t k = 0; k < r->ncols; k++) {
		const char *s = src->v[row * src->ncols + (pos != NULL ? pos[k] : off + k)];

		v[r->n * r->ncols + k] = s != NULL ? strdup(s) : NULL;
	}
	r->n++;
	return true;
}

static const char *
cell(const struct gb_rows *r, size_t row, size_t col)
{
	return r->v[row * r->ncols + col];
}

static void
put_idents(FILE *f, char *const *names, size_t n, const char *qual)
{
	for (size_t k = 0; k < n; k++) {
		fputs(k ? ", " : "", f);
		if (qual != NULL)
			fprintf(f, "%s.", qual);
		sql_put_ident(f, names[k]);
	}
}

/* (<lead>v1, v2, ...) of row <row> of <r>, columns <off>..<off + n), each cast to its
 * <types> entry when <types> is given. */
static void
put_tuple(FILE *f, const char *lead, const struct gb_rows *r, size_t row, size_t off,
	  size_t n, char *const *types)
{
	fprintf(f, "(%s", lead);
	for (size_t k = 0; k < n; k++) {
		const char *s = cell(r, row, off + k);

		fputs(k ? ", " : "", f);
		if (s == NULL)
			fputs("NULL", f);
		else
			sql_put_literal(f, s, strlen(s));
		if (types != NULL)
			fprintf(f, "::%s", types[k]);
	}
	fputc(')', f);
}

/* `(a, b) > ('x', 'y')` after the last row of a chunk, or nothing at the start. */
static void
put_after(FILE *f, char *const *cols, size_t n, const struct gb_rows *last)
{
	if (last->n == 0)
		return;
	fputs(" WHERE (", f);
	put_idents(f, cols, n, NULL);
	fputs(") > ", f);
	put_tuple(f, "", last, 0, 0, n, NULL);
}

char *
gb_text_end(FILE *f, char **buf)
{
	if (fclose(f) != 0) {
		free(*buf);
		return NULL;
	}
	return *buf;
}

/*
 * `SELECT v.n FROM (VALUES (0, <row>), ...) AS v(n, <lc>) WHERE EXISTS (SELECT 1 FROM
 * <table> AS t WHERE t.c = v.c AND ...)`: which rows (of <r>, lookup columns at <off>) the
 * table holds, typed as the owner's columns. <dup>: a lookup row of the same indexed value
 * naming another owner row. <dest>: only the rows whose entry is <want>.
 */
static char *
exists_sql(const struct gb *b, const char *table, const struct gb_rows *r, size_t off,
	   const size_t *dest, size_t want, bool dup)
{
	char *buf = NULL, lead[32];
	size_t len = 0, any = 0;
	FILE *f = nk_memstream(&buf, &len);

	if (f == NULL)
		return NULL;
	fputs("SELECT v.n FROM (VALUES ", f);
	for (size_t i = 0; i < r->n; i++) {
		if (dest != NULL && dest[i] != want)
			continue;
		snprintf(lead, sizeof(lead), "%zu, ", i);
		fputs(any++ ? ", " : "", f);
		put_tuple(f, lead, r, i, off, b->nlc, b->lct);
	}
	fputs(") AS v(n, ", f);
	put_idents(f, b->lc, b->nlc, NULL);
	fprintf(f, ") WHERE EXISTS (SELECT 1 FROM %s AS t WHERE ", table);
	for (size_t k = 0; k < (dup ? b->nidx : b->nlc); k++) {
		fputs(k ? " AND " : "", f);
		fputs("t.", f);
		sql_put_ident(f, b->lc[k]);
		fputs(" = v.", f);
		sql_put_ident(f, b->lc[k]);
	}
	if (dup) {
		fputs(" AND (", f);
		put_idents(f, b->lc + b->nidx, b->nlc - b->nidx, "t");
		fputs(", NULL) IS DISTINCT FROM (", f);
		put_idents(f, b->lc + b->nidx, b->nlc - b->nidx, "v");
		fputs(", NULL)", f);
	}
	fputc(')', f);
	return gb_text_end(f, &buf);
}

/*
 * `<lead>SELECT [<key>, ]<lookup columns> FROM <table> [WHERE (<key>) > (<the last row's>)]
 * ORDER BY <key> LIMIT GB_CHUNK<tail>`: the next chunk in key order.
 */
static char *
chunk_sql(const struct gb *b, const char *lead, const char *table, char *const *key,
	  size_t nkey, bool with_key, const char *tail)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = nk_memstream(&buf, &len);

	if (f == NULL)
		return NULL;
	fprintf(f, "%sSELECT ", lead);
	if (with_key) {
		put_idents(f, key, nkey, NULL);
		fputs(", ", f);
	}
	put_idents(f, b->lc, b->nlc, NULL);
	fprintf(f, " FROM %s", table);
	put_after(f, key, nkey, &b->last);
	fputs(" ORDER BY ", f);
	put_idents(f, key, nkey, NULL);
	fprintf(f, " LIMIT %d%s", GB_CHUNK, tail);
	return gb_text_end(f, &buf);
}

/* Queue <sql> (freed) on <c>; false when it is NULL: out of memory, the build failed. */
static bool
send_sql(struct gb *b, struct gb_conn *c, char *sql, pgc_done_fn cb, void *arg)
{
	if (sql == NULL) {
		gb_oom(b);
		return false;
	}
	pgc_query(c->c, sql, 0, NULL, cb, arg);
	free(sql);
	return true;
}

/* The rows of <res> as the chunk (<ncols> columns), its last row's key (<nkey> columns at
 * <pos>, or the first ones) where the next chunk starts (none after an empty chunk: its
 * shard is done); false when out of memory (the build failed). */
static bool
take_chunk(struct gb *b, const struct pgc_res *res, size_t ncols, size_t nkey,
	   const size_t *pos)
{
	gb_rows_clear(&b->last);
	b->last.ncols = nkey;
	if (!rows_keep(&b->chunk, res, ncols) ||
	    (b->chunk.n > 0 && !rows_add(&b->last, &b->chunk, b->chunk.n - 1, 0, pos))) {
		gb_oom(b);
		return false;
	}
	return true;
}

/* ---- GB_FILL ---- */

/* The lookup shard of chunk row <row> (SIZE_MAX: no lookup row); false with <err>. */
static bool
row_dest(struct gb *b, const void *img, size_t row, size_t *dest, struct nk_error *err)
{
	const char *key;
	struct ks_value v, out;
	const struct ks_expr *e;
	uint32_t range;
	bool ok;

	*dest = SIZE_MAX;
	for (size_t k = 0; k < b->nlc; k++) {
		if (cell(&b->chunk, row, b->npk + k) != NULL)
			continue;
		if (k < b->nidx && b->ignore_null)
			return true;
		nk_error_set(err, ERRCODE_NOT_NULL_VIOLATION, "null value in column \"%s\" of "
			     "relation %s violates global secondary index \"%s\"", b->lc[k],
			     b->owner, b->name);
		return false;
	}
	if (b->lindex == TOPO_IMG_NONE) {
		*dest = 0;
		return true;
	}
	key = cell(&b->chunk, row, b->npk + b->lkeycol);
	if (!ks_value_from_text(b->ltype, key, strlen(key), &(struct ks_text_ctx){ "UTC", 0 },
				&v, err))
		return false;
	e = topo_image_index_expr(img, b->lindex);
	if (ks_expr_is_column(e)) {
		ok = topo_image_route(img, b->lgroup, b->lindex, &v, &range, err);
	} else if ((ok = ks_expr_eval(e, &v, &out, err))) {
		ok = topo_image_route(img, b->lgroup, b->lindex, &out, &range, err);
		ks_value_cleanup(&out);
	}
	ks_value_cleanup(&v);
	for (size_t i = 0; ok && i < b->nlk; i++)
		if (strcmp(b->lk[i].uid, topo_image_range_shard(img, b->lgroup, range)) == 0)
			*dest = i;
	if (ok && *dest == SIZE_MAX)
		return nk_error_set(err, ERRCODE_CONNECTION_EXCEPTION, "a lookup row of \"%s\" "
				    "routes to a shard the build does not know", b->name);
	return ok;
}

static void
fill_committed_cb(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	struct gb *b = arg;

	b->in_tx = false;
	if (gb_failed(b, err, b->oc[b->cur].uid))
		return;
	if (b->chunk.n < GB_CHUNK) {
		b->cur++;
		gb_rows_clear(&b->last);
	}
	gb_fill_chunk(b);
}

static void
fill_part_done(struct gb *b)
{
	if (--b->pending == 0)
		pgc_query(b->oc[b->cur].c, "COMMIT", 0, NULL, fill_committed_cb, b);
}

static void
dup_cb(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	struct gb_conn *c = arg;
	struct gb *b = c->b;
	struct nk_error e;
	size_t row;

	if (gb_failed(b, err, c->uid))
		return;
	if (pgc_res_rows(res) == 0) {
		fill_part_done(b);
		return;
	}
	row = strtoul(pgc_res_get(res, 0, 0), NULL, 10);
	nk_error_set(&e, ERRCODE_UNIQUE_VIOLATION, "could not create unique global secondary "
		     "index \"%s\"", b->name);
	nk_error_detail(&e, "Key (%s)=(%s) is duplicated.", b->lc[0],
			row < b->chunk.n ? cell(&b->chunk, row, b->npk) : "?");
	nk_error_hint(&e, "The index is disabled again: make the values of %s unique, then "
		      "call __neki.gsi_build('%s') again.", b->owner, b->name);
	gb_fail(b, &e, true);
}

static void
insert_cb(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	struct gb_conn *c = arg;
	struct gb *b = c->b;
	uint64_t sent = 0, got = err == NULL ? pgc_res_affected(res) : 0;

	if (gb_failed(b, err, c->uid))
		return;
	for (size_t i = 0; i < b->chunk.n; i++)
		sent += b->dest[i] == c->idx;
	b->written += got;
	b->written_pass += got;
	if (!b->unique || got == sent) {
		fill_part_done(b);
		return;
	}
	send_sql(b, c, exists_sql(b, b->lookup, &b->chunk, b->npk, b->dest, c->idx, true),
		 dup_cb, c);
}

/* INSERT INTO <lookup> (...) VALUES <the chunk rows of lookup shard i> ON CONFLICT DO
 * NOTHING */
static char *
insert_sql(const struct gb *b, size_t i)
{
	char *buf = NULL;
	size_t len = 0, any = 0;
	FILE *f = nk_memstream(&buf, &len);

	if (f == NULL)
		return NULL;
	fprintf(f, "INSERT INTO %s (", b->lookup);
	put_idents(f, b->lc, b->nlc, NULL);
	fputs(") VALUES ", f);
	for (size_t r = 0; r < b->chunk.n; r++)
		if (b->dest[r] == i) {
			fputs(any++ ? ", " : "", f);
			put_tuple(f, "", &b->chunk, r, b->npk, b->nlc, NULL);
		}
	fputs(" ON CONFLICT DO NOTHING", f);
	return gb_text_end(f, &buf);
}

/* The chunk's rows are locked: route them, insert their lookup rows. */
static void
fill_route(struct gb *b)
{
	struct shm_topo_ref ref;
	struct nk_error e;
	bool ok = shm_topo_pin(&ref);

	free(b->dest);
	if (!ok || (b->dest = calloc(b->chunk.n, sizeof(size_t))) == NULL) {
		if (ok)
			shm_topo_unpin(&ref);
		gb_oom(b);
		return;
	}
	for (size_t r = 0; ok && r < b->chunk.n; r++)
		ok = row_dest(b, ref.data, r, &b->dest[r], &e);
	shm_topo_unpin(&ref);
	if (!ok) {
		gb_fail(b, &e, strcmp(e.sqlstate, ERRCODE_NOT_NULL_VIOLATION) == 0);
		return;
	}
	b->pending = 1;		/* (held till every insert is sent) */
	for (size_t i = 0; i < b->nlk; i++) {
		size_t n = 0;

		for (size_t r = 0; r < b->chunk.n; r++)
			n += b->dest[r] == i;
		if (n > 0 && !send_sql(b, &b->lk[i], insert_sql(b, i), insert_cb, &b->lk[i]))
			return;
		b->pending += n > 0;
	}
	fill_part_done(b);
}

static void
fill_rows_cb(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	struct gb *b = arg;

	if (gb_failed(b, err, b->oc[b->cur].uid))
		return;
	if (!take_chunk(b, res, b->npk + b->nlc, b->npk, NULL))
		return;
	b->scanned_pass += b->chunk.n;
	if (b->chunk.n == 0) {
		b->pending = 1;
		fill_part_done(b);
		return;
	}
	fill_route(b);
}

/* A pass ended: another, the next step, or a failure. */
static void
fill_pass_end(struct gb *b)
{
	struct nk_error e;

	b->pass++;
	if (b->pass > 1 && b->written_pass == 0) {
		b->step++;
		b->cur = 0;
		gb_next(b);
		return;
	}
	if (b->pass == GB_PASSES) {
		nk_error_set(&e, ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE, "global secondary index "
			     "\"%s\" kept missing lookup rows", b->name);
		nk_error_detail(&e, "Pass %zu still found %" PRIu64 " owner rows without their "
				"lookup row (rows whose primary key moved behind each pass?).",
				b->pass, b->written_pass);
		gb_fail(b, &e, false);
		return;
	}
	log_info("gsi_build %s: pass %zu wrote %" PRIu64 " lookup rows of %" PRIu64 " owner rows",
		 b->name, b->pass, b->written_pass, b->scanned_pass);
	b->cur = 0;
	b->written_pass = b->scanned_pass = 0;
	gb_fill_chunk(b);
}

void
gb_fill_chunk(struct gb *b)
{
	if (b->cur == b->noc) {
		fill_pass_end(b);
		return;
	}
	b->in_tx = true;
	send_sql(b, &b->oc[b->cur], chunk_sql(b, "BEGIN; ", b->owner, b->pk, b->npk, true,
					  " FOR SHARE"), fill_rows_cb, b);
}

/* ---- GB_DUPS ---- */

static void
dups_cb(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	struct gb *b = arg;
	struct nk_error e;

	if (gb_failed(b, err, b->oc[b->cur].uid))
		return;
	if (pgc_res_rows(res) == 0) {
		b->cur++;
		gb_dups(b);
		return;
	}
	nk_error_set(&e, ERRCODE_UNIQUE_VIOLATION, "could not create unique global secondary "
		     "index \"%s\"", b->name);
	nk_error_detail(&e, "Key (%s)=(%s) is duplicated on shard \"%s\".", b->lc[0],
			pgc_res_get(res, 0, 0) ? pgc_res_get(res, 0, 0) : "null",
			b->oc[b->cur].uid);
	nk_error_hint(&e, "The index is disabled again: make the values of %s unique, then "
		      "call __neki.gsi_build('%s') again.", b->owner, b->name);
	gb_fail(b, &e, true);
}

/* A unique GSI: `SELECT <indexed> FROM <owner> WHERE <indexed> IS NOT NULL GROUP BY ...
 * HAVING count(*) > 1` on each owner shard (two owner rows with one shard key and one value
 * share one lookup row: the fill cannot see them). */
static char *
dups_sql(const struct gb *b)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = nk_memstream(&buf, &len);

	if (f == NULL)
		return NULL;
	fputs("SELECT ", f);
	put_idents(f, b->lc, b->nidx, NULL);
	fprintf(f, " FROM %s WHERE ", b->owner);
	for (size_t k = 0; k < b->nidx; k++) {
		fputs(k ? " AND " : "", f);
		sql_put_ident(f, b->lc[k]);
		fputs(" IS NOT NULL", f);
	}
	fputs(" GROUP BY ", f);
	put_idents(f, b->lc, b->nidx, NULL);
	fputs(" HAVING count(*) > 1 LIMIT 1", f);
	return gb_text_end(f, &buf);
}

void
gb_dups(struct gb *b)
{
	if (!b->unique || b->cur == b->noc) {
		b->step++;
		b->cur = 0;
		gb_next(b);
		return;
	}
	send_sql(b, &b->oc[b->cur], dups_sql(b), dups_cb, b);
}

/* ---- GB_ORPHANS, GB_RECHECK ---- */

/* Ask every shard of <conns> which rows of the chunk its <table> holds (<cb> marks them). */
static bool
ask_exists(struct gb *b, struct gb_conn *conns, size_t n, const char *table,
	   pgc_done_fn cb)
{
	char *sql = exists_sql(b, table, &b->chunk, 0, NULL, 0, false);

	if (sql == NULL)
		return false;
	for (size_t i = 0; i < n; i++)
		pgc_query(conns[i].c, sql, 0, NULL, cb, &conns[i]);
	free(sql);
	b->pending += n;
	return true;
}

static void
mark(bool *marks, size_t n, const struct pgc_res *res)
{
	for (size_t r = 0; r < pgc_res_rows(res); r++) {
		size_t i = strtoul(pgc_res_get(res, r, 0), NULL, 10);

		if (i < n)
			marks[i] = true;
	}
}

/* The lookup rows of the recheck that name no owner row yet: fail after GB_RECHECKS. */
static void
recheck_end(struct gb *b)
{
	struct timeval tv = { 0, GB_RECHECK_MS * 1000 };
	struct nk_error e;

	gb_rows_clear(&b->cand);
	b->cand.ncols = b->nlc;
	for (size_t r = 0; r < b->chunk.n; r++)
		if (b->kept[r] && !b->hit[r] && !rows_add(&b->cand, &b->chunk, r, 0, NULL)) {
			gb_oom(b);
			return;
		}
	if (b->cand.n == 0) {
		b->step = b->scan_done ? GB_ENABLE : GB_ORPHANS;
		gb_rows_clear(&b->chunk);
		b->scan_done ? gb_next(b) : gb_orphan_chunk(b);
		return;
	}
	if (++b->rechecks < GB_RECHECKS) {
		evtimer_add(b->timer, &tv);
		return;
	}
	nk_error_set(&e, ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE, "lookup table %s holds %zu%s "
		     "rows naming no owner row", b->lookup, b->cand.n,
		     b->scan_done ? "" : " (or more)");
	nk_error_detail(&e, "One of them: (%s)=(%s).", b->lc[0],
			cell(&b->cand, 0, 0) ? cell(&b->cand, 0, 0) : "null");
	nk_error_hint(&e, "Delete them from the lookup table on its shard (or disable the index "
		      "and build it again).");
	gb_fail(b, &e, false);
}

static void
recheck_cb(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	struct gb_conn *c = arg;
	struct gb *b = c->b;

	if (gb_failed(b, err, c->uid))
		return;
	mark(c >= b->oc && c < b->oc + b->noc ? b->hit : b->kept, b->chunk.n, res);
	if (--b->pending == 0)
		recheck_end(b);
}

/* The candidates again: does the lookup still hold them, does an owner shard now? */
void
gb_recheck(struct gb *b)
{
	gb_rows_clear(&b->chunk);
	b->chunk = b->cand;
	b->cand = (struct gb_rows){ 0, 0, NULL };
	free(b->hit);
	free(b->kept);
	b->hit = calloc(b->chunk.n, sizeof(bool));
	b->kept = calloc(b->chunk.n, sizeof(bool));
	b->pending = 0;
	if (b->hit == NULL || b->kept == NULL ||
	    !ask_exists(b, b->oc, b->noc, b->owner, recheck_cb) ||
	    !ask_exists(b, b->lk, b->nlk, b->lookup, recheck_cb))
		gb_oom(b);
}

static void
orphan_hit_cb(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	struct gb_conn *c = arg;
	struct gb *b = c->b;
	struct timeval tv = { 0, GB_RECHECK_MS * 1000 };

	if (gb_failed(b, err, c->uid))
		return;
	mark(b->hit, b->chunk.n, res);
	if (--b->pending > 0)
		return;
	for (size_t r = 0; r < b->chunk.n; r++)
		if (!b->hit[r] && !rows_add(&b->cand, &b->chunk, r, 0, NULL)) {
			gb_oom(b);
			return;
		}
	if (b->chunk.n < GB_CHUNK) {
		b->cur++;
		gb_rows_clear(&b->last);
	}
	if (b->cand.n >= GB_CHUNK) {	/* (asked again before the scan goes on) */
		b->step = GB_RECHECK;
		b->rechecks = 0;
		evtimer_add(b->timer, &tv);
		return;
	}
	gb_orphan_chunk(b);
}

static void
orphan_rows_cb(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	struct gb *b = arg;

	if (gb_failed(b, err, b->lk[b->cur].uid))
		return;
	if (!take_chunk(b, res, b->nlc, b->nkey, b->lkpos))
		return;
	if (b->chunk.n == 0) {
		b->cur++;
		gb_orphan_chunk(b);
		return;
	}
	free(b->hit);
	b->pending = 0;
	if ((b->hit = calloc(b->chunk.n, sizeof(bool))) == NULL ||
	    !ask_exists(b, b->oc, b->noc, b->owner, orphan_hit_cb))
		gb_oom(b);
}

/* The next chunk of lookup rows, in the order of the lookup's primary key. */
void
gb_orphan_chunk(struct gb *b)
{
	struct timeval tv = { 0, GB_RECHECK_MS * 1000 };

	b->cand.ncols = b->nlc;
	if (b->cur == b->nlk) {
		b->scan_done = true;
		b->step = b->cand.n ? GB_RECHECK : GB_ENABLE;
		b->rechecks = 0;
		if (b->cand.n)
			evtimer_add(b->timer, &tv);
		else
			gb_next(b);
		return;
	}
	send_sql(b, &b->lk[b->cur], chunk_sql(b, "", b->lookup, b->lkey, b->nkey, false, ""),
	     orphan_rows_cb, b);
}
