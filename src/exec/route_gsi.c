/*
 * route_gsi.c - the steps of a statement on the owner of an enabled global secondary index
 * (plan.gsi, src/router/plan_gsi.c), each a statement of its own routed like any other, its
 * answer kept here (nothing of it reaches the client), in the statement's transaction (a
 * write outside a block opens the Query's or batch's implicit one, so the owner rows and
 * their lookup rows commit together; under __neki.tx_mode atomic with two-phase commit):
 * - READ: the lookup query, then the statement on the shards of the owner keys it returned
 *   (one shard when none: the statement's WHERE finds no row there either); covered by a
 *   unique GSI's lookup (plan_gsi.cover): that text in place of the statement, its rows the
 *   client's;
 * - INSERT_AFTER, DELETE: the statement with RETURNING of the lookup columns (its bound
 *   values written into the text), then an INSERT (a duplicate of a unique GSI fails
 *   there: 23505, and the transaction with it) or a DELETE of those lookup rows, then the
 *   client's `INSERT 0 n` / `DELETE n`; a one-row INSERT planned with its lookup INSERTs
 *   (plan_gsi.alongside, each routed to one shard, no value NULL) runs them in the same
 *   round instead (beside_start(): on the owner's shard as WITH queries of the statement,
 *   elsewhere in one Query; a lookup shard apart prepares with it under atomic commit);
 * - UPDATE: the rows locked (their ctid, shard key and lookup values read), exactly those
 *   updated RETURNING the new values, then the changed lookup rows deleted and written;
 * - INSERT (one with its own RETURNING): the lookup INSERTs, then the statement.
 * - COPY: the COPY runs (route_copy.c hands each row's lookup columns to
 *   route_gsi_copy_keep()), then the INSERTs of those lookup rows, then `COPY n`.
 * Over the extended protocol the steps run as simple Queries (their values are constants),
 * the statement itself at the Execute. Entry points: route_gsi_step(), route_gsi_take(),
 * route_gsi_keep(), route_gsi_copy_keep(), route_gsi_copied(), route_gsi_finished(),
 * route_gsi_free().
 */
#include "neki/base.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "neki/memstream.h"
#include "neki/merge.h"
#include "neki/pktbuf.h"
#include "neki/plan_gsi.h"
#include "neki/proto.h"
#include "neki/sqlscan.h"
#include "route_int.h"
#include "route_exec.h"
#include "route_gsi.h"
#include "route_loop.h"
#include "route_sqltext.h"
#include "route_subq.h"

#define GSI_COLS 64			/* columns of a step's answer */
#define GSI_TYPE_MAX 160
#define GSI_STEP_ROWS 1000		/* lookup rows per INSERT or DELETE step */

enum gsi_phase {
	G_STEPS,		/* READ / INSERT: the steps before the statement */
	G_MAIN,			/* ... done: the statement runs next, as planned */
	G_LOCK,			/* UPDATE: the rows locked, their lookup columns read */
	G_RETURNING,		/* INSERT_AFTER, DELETE, UPDATE: the statement RETURNING the
				 * lookup columns of its rows */
	G_LOOKUPS,		/* ... then the INSERTs or DELETEs of their lookup rows */
	G_COPY,			/* COPY: its rows pass, their lookup columns kept */
	G_COVER,		/* READ covered by the lookup: the statement on it, next */
};

struct glookup {			/* a plan_gsi_lookup, owned */
	char *name, *table;
	char **cols;
	uint32_t *pos;
	uint32_t ncols, nindexed;
	bool ignore_null;
};

struct rgsi {
	enum plan_gsi_kind kind;
	enum gsi_phase phase;
	bool ext;			/* the statement is an Execute */
	bool own_tx;			/* outside a block, the statement alone in its Query (or
					 * the last Execute before Sync): its implicit
					 * transaction ends with it */
	bool capture;			/* a step runs */
	bool beside;			/* INSERT_AFTER: its lookup INSERTs run beside it, in
					 * one round (plan_gsi.alongside) */
	char *sql;			/* the statement's text as planned (G_MAIN is for it) */
	char **texts;			/* the steps to run (owned, taken one by one) */
	uint32_t ntexts, next;
	/* the answer of the running step */
	uint16_t ncols;
	char (*types)[GSI_TYPE_MAX];	/* DELETE: each returned column's SQL type */
	char **vals;			/* READ: the owner keys; DELETE: nrows x ncols values
					 * (NULL for NULL) */
	size_t nvals, cap, bytes;
	uint64_t nrows;
	char **old;			/* UPDATE: the locked rows' values (as vals) */
	uint64_t nold;
	size_t nold_vals;
	char *update, *update_tail;	/* UPDATE: plan_gsi.update (its values written in) and
					 * .update_tail */
	uint32_t nkey;
	uint32_t off;			/* UPDATE: 1 (the lists start with the ctid or the row
					 * number); 0 */
	struct glookup *lk;		/* INSERT_AFTER, DELETE, UPDATE: the lookup tables */
	uint32_t nlk;
	int32_t inserted_pos;		/* plan_gsi.inserted_pos */
};

static void
free_texts(struct rgsi *q)
{
	for (uint32_t i = 0; i < q->ntexts; i++)
		free(q->texts[i]);
	free(q->texts);
	q->texts = NULL;
	q->ntexts = q->next = 0;
}

void
route_gsi_free(struct route *r)
{
	struct rgsi *q = r->x.gsi;

	if (q == NULL)
		return;
	if (q->capture) {
		r->x.subq_capture = false;
		if (q->ext)
			r->x.ext_exec = true;
	}
	free_texts(q);
	free(q->sql);
	for (size_t i = 0; i < q->nvals; i++)
		free(q->vals[i]);
	free(q->vals);
	for (size_t i = 0; i < q->nold_vals; i++)
		free(q->old[i]);
	free(q->old);
	free(q->update);
	free(q->update_tail);
	free(q->types);
	for (uint32_t i = 0; i < q->nlk; i++) {
		for (uint32_t k = 0; k < q->lk[i].ncols; k++)
			free(q->lk[i].cols[k]);
		free(q->lk[i].cols);
		free(q->lk[i].pos);
		free(q->lk[i].table);
		free(q->lk[i].name);
	}
	free(q->lk);
	free(q);
	r->x.gsi = NULL;
}

bool
route_gsi_capturing(const struct route *r)
{
	return r->x.gsi != NULL && r->x.gsi->capture;
}

/* route_gsi_last_step: see route_gsi.h. */
bool
route_gsi_last_step(const struct route *r)
{
	const struct rgsi *q = r->x.gsi;

	return q != NULL && q->capture && q->own_tx &&
	       (q->beside || (q->phase == G_LOOKUPS && q->next == q->ntexts));
}

static void
gsi_resume(struct route *r)
{
	struct timeval tv = { 0, 0 };

	r->hold.resume = r->x.gsi->ext ? ROUTE_RESUME_EXEC : ROUTE_RESUME_NEXT;
	if (r->x.gsi->ext)
		r->busy = true;	/* the client waits with its Execute */
	evtimer_add(r->hold.ev_poll, &tv);
}

/* route_gsi_take: see route_gsi.h. */
char *
route_gsi_take(struct route *r, bool *simple, bool *cover)
{
	struct rgsi *q = r->x.gsi;
	char *text;

	*simple = *cover = false;
	if (q == NULL || q->capture || q->phase == G_MAIN || q->next >= q->ntexts)
		return NULL;
	text = q->texts[q->next];
	q->texts[q->next++] = NULL;
	if (q->phase == G_COVER) {	/* the statement itself, on the lookup table */
		*cover = true;
		route_gsi_free(r);
		return text;
	}
	q->capture = r->x.subq_capture = true;
	if (q->ext) {
		*simple = true;
		r->x.ext_exec = false;	/* (until the step ends) */
	}
	return text;
}

/* ---- starting ---- */

static bool
add_text(struct rgsi *q, char *text)
{
	char **nt;

	if (text == NULL || (nt = realloc(q->texts, (q->ntexts + 1) * sizeof(*nt))) == NULL) {
		free(text);
		return false;
	}
	q->texts = nt;
	q->texts[q->ntexts++] = text;
	return true;
}

static bool
copy_lookups(struct rgsi *q, const struct plan_gsi *g)
{
	if ((q->lk = calloc(g->nlookups, sizeof(*q->lk))) == NULL)
		return false;
	q->nlk = g->nlookups;
	for (uint32_t i = 0; i < g->nlookups; i++) {
		const struct plan_gsi_lookup *s = &g->lookups[i];
		struct glookup *d = &q->lk[i];

		d->name = strdup(s->name);
		d->table = strdup(s->table);
		d->cols = calloc(s->ncols, sizeof(*d->cols));
		d->pos = calloc(s->ncols, sizeof(*d->pos));
		if (d->name == NULL || d->table == NULL || d->cols == NULL || d->pos == NULL)
			return false;
		d->ncols = s->ncols;
		d->nindexed = s->nindexed;
		d->ignore_null = s->ignore_null;
		for (uint32_t k = 0; k < s->ncols; k++) {
			d->pos[k] = s->pos[k];
			if ((d->cols[k] = strdup(s->cols[k])) == NULL)
				return false;
		}
	}
	return true;
}

/* The steps of statement <p> into <q>; false with <err>. */
static bool
gsi_plan_steps(struct rgsi *q, const struct plan *p, const char *sql,
	       const struct plan_param *params, uint32_t nparams, struct nk_error *err)
{
	const struct plan_gsi *g = p->gsi;
	char *text;

	if (g->kind == PLAN_GSI_READ && g->cover != NULL) {
		q->phase = G_COVER;
		return add_text(q, strdup(g->cover)) || nk_error_oom(err);
	}
	if (g->kind == PLAN_GSI_READ || g->kind == PLAN_GSI_INSERT) {
		for (uint32_t i = 0; i < g->nfirst; i++)
			if (!add_text(q, strdup(g->first[i])))
				return nk_error_oom(err);
		return true;
	}
	q->inserted_pos = g->inserted_pos;
	q->nkey = g->nkey;
	if (!copy_lookups(q, g))
		return nk_error_oom(err);
	if (g->kind == PLAN_GSI_COPY)
		return true;	/* (the COPY first; the steps once its rows passed) */
	if (g->kind == PLAN_GSI_UPDATE) {	/* (the lock first; the update once it ran) */
		q->phase = G_LOCK;
		q->off = 1;
		return (q->update = route_sql_inline_params(g->update, params, nparams, err)) != NULL &&
		       (q->update_tail = route_sql_inline_params(g->update_tail, params, nparams,
						       err)) != NULL &&
		       add_text(q, route_sql_inline_params(g->lock, params, nparams, err)) ?
		       true : nk_error_is_set(err) ? false : nk_error_oom(err);
	}
	if ((text = route_sql_inline_params(sql, params, nparams, err)) == NULL)
		return false;
	{
		char *full = NULL;

		if (asprintf(&full, "%s\n%s", text, g->returning) < 0)
			full = NULL;
		free(text);
		if (!add_text(q, full))
			return nk_error_oom(err);
	}
	q->phase = G_RETURNING;
	return true;
}

/* COPY: the kept fields' SQL types (none for one the catalog does not name: the lookup
 * table's column gives it); then the COPY runs, its rows kept as they pass. */
static bool
copy_start(struct route *r, struct rgsi *q, const struct plan_gsi *g)
{
	q->phase = G_COPY;
	q->ncols = (uint16_t)g->nfields;
	if ((q->types = calloc(g->nfields + 1, sizeof(*q->types))) == NULL)
		return false;
	for (uint32_t k = 0; k < g->nfields; k++)
		if (g->fields[k].type_oid == 0 ||
		    !route_subq_type_sql(r, g->fields[k].type_oid, q->types[k],
					 sizeof(q->types[k])))
			q->types[k][0] = '\0';
	return true;
}

/* READ: <p> narrowed to the shards of the keys the lookup returned. */
static bool
narrow(struct route *r, struct plan *p, const void *img)
{
	struct rgsi *q = r->x.gsi;
	const char **uids = rarena_alloc(r->arena, (p->nshards + 1) * sizeof(*uids));
	uint32_t n;

	if (uids == NULL)
		return false;
	n = plan_gsi_shards(img, p->gsi, &r->ps.text_ctx, (const char *const *)q->vals,
			    (uint32_t)q->nvals, p->shards, p->nshards, uids, p->nshards);
	if (!p->gsi->unique)		/* (what the next reads' plans estimate from) */
		plan_gsi_cost_observe(r->db, p->gsi->name, n, p->nshards);
	if (n == 0)		/* no owner row: any one shard answers, with no row */
		uids[n++] = p->shards[0];
	p->shards = uids;
	p->nshards = n;
	p->kind = n == 1 ? PLAN_SINGLE : PLAN_SHARD_SET;
	return true;
}

/* ---- the lookup rows written beside the statement ---- */

/* The texts of the round beside an INSERT (<q>'s one text, on shard <owner>) and its lookup
 * INSERTs <texts>[0..n) (on <uids>): the owner's shard runs those that route there as WITH
 * queries of the statement (one statement: one count, one error), each other shard its own
 * in one Query. The exec is set up, the owner's shard first (route_2pc_with_prepare()
 * prepares the other when it is sent after it). */
static bool
beside_exec(struct route *r, struct rgsi *q, const char *owner, char *const *texts,
	    const char (*uids)[PLAN_SHARD_MAX], uint32_t n, struct nk_error *err)
{
	const char *tg[1 + PLAN_GSI_LOOKUPS_MAX] = { owner };
	char *own = NULL;
	size_t len = 0;
	uint32_t ntg = 1, nwith = 0;
	FILE *f = nk_memstream(&own, &len);
	bool ok;

	if (f == NULL)
		return nk_error_oom(err);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t k = 0;

		if (strcmp(uids[i], owner) == 0) {
			fprintf(f, "%s__neki_gsi%u AS (%s)", nwith++ ? ", " : "WITH ", i, texts[i]);
			continue;
		}
		while (k < ntg && strcmp(tg[k], uids[i]) != 0)
			k++;
		if (k == ntg)
			tg[ntg++] = uids[i];
	}
	fprintf(f, "%s%s", nwith ? " " : "", q->texts[0]);
	if (fclose(f) != 0) {
		free(own);
		return nk_error_oom(err);
	}
	ok = route_exec_setup(r, tg, ntg, own, err);
	free(own);
	for (uint32_t k = 1; ok && k < ntg; k++) {
		struct rshard *sh = &r->sh[r->x.tg[k]];
		char *text = NULL;
		size_t tl = 0;

		if ((f = nk_memstream(&text, &tl)) == NULL)
			return nk_error_oom(err);
		for (uint32_t i = 0, m = 0; i < n; i++)
			if (strcmp(uids[i], tg[k]) == 0)
				fprintf(f, "%s%s", m++ ? ";\n" : "", texts[i]);
		if (fclose(f) != 0 || (sh->sql = text) == NULL)
			ok = nk_error_oom(err);
	}
	return ok;
}

/* INSERT_AFTER planned with its lookup INSERTs beside it (plan_gsi.alongside): their
 * values written in and each planned; when none is NULL and each goes to one shard, the
 * statement (RETURNING its lookup columns: its rows counted) and they run in one round,
 * true (*<rc>); false: the steps one after the other (nothing changed). */
static bool
beside_start(struct route *r, struct rgsi *q, const struct plan *p, const struct plan_input *in,
	     enum rstep *rc)
{
	const struct plan_gsi *g = p->gsi;
	char *texts[PLAN_GSI_LOOKUPS_MAX] = { NULL };
	char uids[PLAN_GSI_LOOKUPS_MAX][PLAN_SHARD_MAX], owner[PLAN_SHARD_MAX];
	uint32_t n = g->nalongside;
	struct nk_error err;
	bool ok = true, has_null = false;

	if (n == 0 || n > PLAN_GSI_LOOKUPS_MAX || p->kind != PLAN_SINGLE || p->nshards != 1 ||
	    (p->op == PLAN_OP_INSERT_SPLIT && p->nparts > 1) || in->norm == NULL ||
	    q->phase != G_RETURNING || q->ntexts != 1 || strlen(p->shards[0]) >= sizeof(owner))
		return false;
	strcpy(owner, p->shards[0]);
	nk_error_clear(&err);
	for (uint32_t i = 0; ok && i < n; i++)	/* (all written before any is planned: the
						 * plans may take <g> from the cache) */
		ok = (texts[i] = route_sql_inline_slots(g->alongside[i], in->norm, in->sql,
							in->params, in->nparams, &has_null,
							&err)) != NULL && !has_null;
	for (uint32_t i = 0; ok && i < n; i++)
		ok = route_text_shard(r, in, texts[i], uids[i]);
	if (ok) {
		q->beside = q->capture = r->x.subq_capture = true;
		if (q->ext)
			r->x.ext_exec = false;	/* (a simple Query, until the round ends) */
		*rc = beside_exec(r, q, owner, texts, (const char (*)[PLAN_SHARD_MAX])uids, n,
				  &err) ? route_exec_run(r) : route_fail(r, &err);
	}
	for (uint32_t i = 0; i < n; i++)
		free(texts[i]);
	return ok;
}

/* route_gsi_step: see route_gsi.h. */
bool
route_gsi_step(struct route *r, struct plan *p, const struct plan_input *in, const char *sql,
	       enum rstep *rc)
{
	const char *planned = in->sql;
	const void *img = in->topo;
	struct rgsi *q = r->x.gsi;
	struct nk_error err;

	if (q != NULL && q->capture)
		return false;		/* (a step's own statement) */
	if (q != NULL && q->phase == G_MAIN && strcmp(q->sql, planned) == 0) {	/* steps ran */
		bool ok = p->gsi->kind != PLAN_GSI_READ || narrow(r, p, img);

		route_gsi_free(r);
		if (!ok)
			*rc = route_fail(r, (nk_error_oom(&err), &err));
		return !ok;
	}
	route_gsi_free(r);
	if (r->tx == 'E')
		return false;		/* (refused as any statement there) */
	if (p->gsi->client_returning) {	/* (its rows and the lookup columns: one list) */
		*rc = route_fail(r, (nk_error_nk013(&err, 104), &err));
		return true;
	}
	if ((q = r->x.gsi = calloc(1, sizeof(*q))) == NULL) {
		*rc = route_fail(r, (nk_error_oom(&err), &err));
		return true;
	}
	q->kind = p->gsi->kind;
	q->ext = r->x.ext_exec;
	if ((q->sql = strdup(planned)) == NULL) {
		route_gsi_free(r);
		*rc = route_fail(r, (nk_error_oom(&err), &err));
		return true;
	}
	/* a write outside a block: the Query's (batch's) implicit transaction holds it all (a
	 * Query of several statements, a batch with more after this Execute, began it already) */
	q->own_tx = r->tx == 'I';
	if (!gsi_plan_steps(q, p, sql, in->params, in->nparams, &err) ||
	    (q->kind != PLAN_GSI_READ && r->tx == 'I' && !route_implicit_begin(r) &&
	     (nk_error_oom(&err), true))) {
		route_gsi_free(r);
		*rc = route_fail(r, &err);
		return true;
	}
	if (q->kind == PLAN_GSI_COPY) {
		if (copy_start(r, q, p->gsi))
			return false;	/* (the COPY runs now) */
		route_gsi_free(r);
		*rc = route_fail(r, (nk_error_oom(&err), &err));
		return true;
	}
	if (q->kind == PLAN_GSI_INSERT_AFTER && beside_start(r, q, p, in, rc))
		return true;
	gsi_resume(r);
	*rc = RSTEP_ASYNC;
	return true;
}

/* ---- a step's answer ---- */

static bool
keep_desc(struct route *r, struct rgsi *q, const uint8_t *body, size_t len)
{
	struct proto_column cols[GSI_COLS];
	struct proto_rowdesc_msg m;
	struct nk_error e;
	size_t n;

	if (q->ncols > 0 || q->phase == G_LOOKUPS || q->phase == G_MAIN || q->beside)
		return true;	/* (beside: its rows are only counted) */
	if (!proto_parse_row_description(body, len, &m, &e))
		return route_subq_refused(r, &e);
	if ((n = proto_rowdesc_columns(&m, cols, GSI_COLS)) < m.ncols || n == 0)
		return route_subq_refused(r, (nk_error_set(&e, ERRCODE_INTERNAL_ERROR,
				   "a lookup step returned %u columns", m.ncols), &e));
	free(q->types);
	if ((q->types = calloc(n, sizeof(*q->types))) == NULL)
		return route_subq_refused(r, (nk_error_oom(&e), &e));
	for (size_t k = 0; q->phase != G_STEPS && k < n; k++)
		if (!route_subq_type_sql(r, cols[k].type_oid, q->types[k], sizeof(q->types[k])))
			return route_subq_refused(r, (nk_error_set(&e, ERRCODE_FEATURE_NOT_SUPPORTED,
					   "the router cannot write a value of type %u of column "
					   "\"%s\" of a global secondary index", cols[k].type_oid,
					   cols[k].name), &e));
	q->ncols = (uint16_t)n;
	return true;
}

/* Keep value <s> (owned; NULL for NULL) of <len> bytes; false with <e> past
 * router_work_mem (or no memory). */
static bool
push_value(const struct route *r, struct rgsi *q, char *s, size_t len, struct nk_error *e)
{
	if (q->nvals == q->cap) {
		size_t cap = q->cap ? q->cap * 2 : 16;
		char **nv = realloc(q->vals, cap * sizeof(*nv));

		if (nv == NULL) {
			free(s);
			return nk_error_oom(e);
		}
		q->vals = nv;
		q->cap = cap;
	}
	q->vals[q->nvals++] = s;
	q->bytes += len + sizeof(char *);
	if (r->c.cfg->neki.router_work_mem > 0 && (int64_t)q->bytes > r->c.cfg->neki.router_work_mem) {
		nk_error_set(e, ERRCODE_CONFIGURATION_LIMIT_EXCEEDED,
			     "the lookup rows of a global secondary index the router keeps for "
			     "this statement are larger than router_work_mem allows");
		nk_error_detail(e, "They passed %zu bytes; router_work_mem is %lld bytes.",
				q->bytes, (long long)r->c.cfg->neki.router_work_mem);
		nk_error_hint(e, "Raise router_work_mem, or write the rows in smaller "
			      "batches.");
		return false;
	}
	return true;
}

static bool
keep_value(struct route *r, struct rgsi *q, const struct proto_value *v)
{
	struct nk_error e;
	char *s = NULL;

	if (v->p != NULL && (s = strndup((const char *)v->p, v->len)) == NULL)
		return route_subq_refused(r, (nk_error_oom(&e), &e));
	if (!push_value(r, q, s, v->p != NULL ? v->len : 0, &e))
		return route_subq_refused(r, &e);
	return true;
}

/* route_gsi_copy_keep: see route_gsi.h. */
bool
route_gsi_copy_keep(struct route *r, char **vals, struct nk_error *err)
{
	struct rgsi *q = r->x.gsi;
	uint16_t k = 0;

	for (; k < q->ncols; k++)
		if (!push_value(r, q, vals[k], vals[k] ? strlen(vals[k]) : 0, err))
			break;
	if (k == q->ncols) {
		q->nrows++;
		return true;
	}
	while (++k < q->ncols)
		free(vals[k]);
	return false;
}

static bool
keep_row(struct route *r, struct rgsi *q, const uint8_t *body, size_t len)
{
	struct proto_value vals[GSI_COLS];
	struct proto_datarow_msg m;
	struct nk_error e;

	if (r->x.has_err || q->phase == G_LOOKUPS || q->phase == G_MAIN)
		return true;
	if (q->beside) {
		q->nrows++;
		return true;
	}
	if (!proto_parse_data_row(body, len, &m, &e))
		return route_subq_refused(r, &e);
	if (m.ncols != q->ncols || proto_datarow_values(&m, vals, GSI_COLS) != q->ncols)
		return route_subq_refused(r, (nk_error_set(&e, ERRCODE_PROTOCOL_VIOLATION,
				   "a shard's row has %u columns, its description %u", m.ncols,
				   q->ncols), &e));
	q->nrows++;
	for (uint16_t k = 0; k < (q->phase == G_STEPS ? 1 : q->ncols); k++)
		if (!keep_value(r, q, &vals[k]) || r->x.has_err)
			return true;
	return true;
}

/* route_gsi_keep: see route_gsi.h. */
bool
route_gsi_keep(struct route *r, char type, const uint8_t *body, size_t len)
{
	return type == 'T' ? keep_desc(r, r->x.gsi, body, len) : keep_row(r, r->x.gsi, body, len);
}

/* ---- the next step ---- */

/* Returned row <v>'s values of lookup <lk> as a typed VALUES row into <f> (<v> past the
 * leading column of an UPDATE's lists, q->off). */
static void
put_lookup_row(FILE *f, const struct rgsi *q, const struct glookup *lk, char *const *v)
{
	fputc('(', f);
	for (uint32_t k = 0; k < lk->ncols; k++) {
		const char *type = q->types[q->off + lk->pos[k]];

		fputs(k ? ", " : "", f);
		sql_put_literal(f, v[lk->pos[k]], strlen(v[lk->pos[k]]));
		if (type[0] != '\0')
			fprintf(f, "::%s", type);
	}
	fputc(')', f);
}

/* Does returned row <v> have a lookup row of <lk>? A NULL indexed value under ignore_null
 * has none; a NULL otherwise is 23502 when writing it (<e>), none when deleting. */
static bool
has_lookup_row(const struct rgsi *q, const struct glookup *lk, char *const *v, bool deleting,
	       bool *refused, struct nk_error *e)
{
	*refused = false;
	if (q->inserted_pos >= 0 && (v[q->inserted_pos] == NULL || v[q->inserted_pos][0] != 't'))
		return false;		/* (updated by ON CONFLICT: its lookup row stands) */
	for (uint32_t k = 0; k < lk->ncols; k++) {
		if (v[lk->pos[k]] != NULL)
			continue;
		if (deleting || (k < lk->nindexed && lk->ignore_null))
			return false;
		nk_error_set(e, ERRCODE_NOT_NULL_VIOLATION, "null value in column %s of a row "
			     "violates global secondary index \"%s\"", lk->cols[k], lk->name);
		return !(*refused = true);
	}
	return true;
}

/* `<first indexed column> IN (v, ...) AND (` of the rows <rows> that have a lookup row of
 * <lk> into <f>: a lookup table is sharded by its indexed columns (V10), so a DELETE of one
 * goes to the shards that hold its rows. */
static void
put_first_col_in(FILE *f, const struct rgsi *q, const struct glookup *lk, char **const *rows,
		 uint64_t nrows)
{
	struct glookup first = *lk;
	struct nk_error e;
	uint64_t n = 0;
	bool refused;

	first.ncols = 1;
	fprintf(f, "%s IN (", lk->cols[0]);
	for (uint64_t row = 0; row < nrows; row++) {
		if (!has_lookup_row(q, lk, rows[row], true, &refused, &e))
			continue;
		fputs(n++ ? ", " : "", f);
		put_lookup_row(f, q, &first, rows[row]);
	}
	fputs(n ? ") AND (" : "NULL) AND (", f);
}

/* The DELETE (<deleting>) or INSERT of lookup <lk>'s rows for the returned rows <rows>
 * (malloc'd), or NULL: none has one (*<none>), a refusal (<e>), no memory. */
static char *
lookup_step(const struct rgsi *q, const struct glookup *lk, char **const *rows, uint64_t nrows,
	    bool deleting, bool *none, struct nk_error *e)
{
	char *out = NULL;
	size_t len = 0;
	uint64_t n = 0;
	bool refused = false;
	FILE *f = nk_memstream(&out, &len);

	*none = false;
	if (f == NULL)
		return nk_error_oom(e), NULL;
	fprintf(f, deleting ? "DELETE FROM %s WHERE " : "INSERT INTO %s (", lk->table);
	if (deleting)		/* (the lookup's own key first: the DELETE goes to its shards) */
		put_first_col_in(f, q, lk, rows, nrows);
	for (uint32_t k = 0; k < lk->ncols; k++)
		fprintf(f, "%s%s", k ? ", " : "", lk->cols[k]);
	fputs(deleting ? ") IN (VALUES " : ") VALUES ", f);
	for (uint64_t row = 0; row < nrows && !refused; row++) {
		if (!has_lookup_row(q, lk, rows[row], deleting, &refused, e))
			continue;
		fputs(n++ ? ", " : "", f);
		put_lookup_row(f, q, lk, rows[row]);
	}
	if (deleting)
		fputc(')', f);
	if (fclose(f) != 0 || n == 0 || refused) {
		*none = n == 0 && !refused;
		if (!refused && !*none)
			nk_error_oom(e);
		free(out);
		return NULL;
	}
	return out;
}

/* The DELETE (<deleting>) or INSERT steps of lookup <lk>'s rows for <rows>, at most
 * GSI_STEP_ROWS of them each. */
static bool
add_step(struct route *r, struct rgsi *q, const struct glookup *lk, char **const *rows,
	 uint64_t nrows, bool deleting)
{
	struct nk_error e;
	bool none;

	for (uint64_t at = 0; at < nrows; at += GSI_STEP_ROWS) {
		uint64_t n = nrows - at < GSI_STEP_ROWS ? nrows - at : GSI_STEP_ROWS;
		char *text = lookup_step(q, lk, rows + at, n, deleting, &none, &e);

		if (text == NULL && none)
			continue;
		if (text == NULL)
			return route_subq_refused(r, &e), false;
		if (!add_text(q, text))
			return route_subq_refused(r, (nk_error_oom(&e), &e)), false;
	}
	return true;
}

static bool
same_value(const char *a, const char *b)
{
	return a == NULL ? b == NULL : b != NULL && strcmp(a, b) == 0;
}

/* UPDATE: <olds>/<news> the rows (old and new values, past their leading column) whose
 * <lk> columns changed; an updated row names its locked row by its number. */
static uint64_t
changed_rows(const struct rgsi *q, const struct glookup *lk, char ***olds, char ***news)
{
	uint64_t n = 0;

	for (uint64_t row = 0; row < q->nrows; row++) {
		char **v = &q->vals[row * q->ncols], **o;
		uint64_t at = v[0] ? strtoull(v[0], NULL, 10) : q->nold;
		bool changed = false;

		if (at >= q->nold)
			continue;	/* (cannot be: the row numbers are ours) */
		o = &q->old[at * q->ncols];
		for (uint32_t k = 0; k < lk->ncols; k++)
			changed = changed || !same_value(o[1 + lk->pos[k]], v[1 + lk->pos[k]]);
		if (changed) {
			olds[n] = o + 1;
			news[n++] = v + 1;
		}
	}
	return n;
}

/* UPDATE: for each lookup, the old lookup rows of the rows whose values changed deleted,
 * their new ones written. */
static bool
update_steps(struct route *r, struct rgsi *q)
{
	char ***olds = calloc(q->nrows + 1, sizeof(*olds));
	char ***news = calloc(q->nrows + 1, sizeof(*news));
	bool ok = olds != NULL && news != NULL;
	struct nk_error e;

	for (uint32_t i = 0; ok && i < q->nlk; i++) {
		uint64_t n = changed_rows(q, &q->lk[i], olds, news);

		ok = add_step(r, q, &q->lk[i], olds, n, true) &&
		     add_step(r, q, &q->lk[i], news, n, false);
	}
	free(olds);
	free(news);
	if (!ok && !r->x.has_err)
		route_subq_refused(r, (nk_error_oom(&e), &e));
	return ok;
}

/* The owner rows are written (or gone): their lookup rows' steps next (or the answer,
 * when none). */
static bool
lookup_steps(struct route *r, struct rgsi *q)
{
	char ***rows = NULL;
	bool ok = true;

	free_texts(q);
	q->phase = G_LOOKUPS;
	if (q->kind == PLAN_GSI_UPDATE)
		return q->nrows == 0 || update_steps(r, q);
	if (q->nrows > 0 && (rows = calloc(q->nrows, sizeof(*rows))) == NULL) {
		struct nk_error e;

		return route_subq_refused(r, (nk_error_oom(&e), &e)), false;
	}
	for (uint64_t i = 0; i < q->nrows; i++)
		rows[i] = &q->vals[i * q->ncols];
	for (uint32_t i = 0; ok && i < q->nlk; i++)
		ok = add_step(r, q, &q->lk[i], (char **const *)rows, q->nrows,
			      q->kind == PLAN_GSI_DELETE);
	free(rows);
	return ok;
}

/* UPDATE: the rows are locked; the update of exactly those next: each one by its ctid and
 * shard key (a ctid names a row of one shard only), with its number. */
static bool
update_after_lock(struct route *r, struct rgsi *q)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = nk_memstream(&out, &len);
	struct nk_error e;

	q->old = q->vals;
	q->nold = q->nrows;
	q->nold_vals = q->nvals;
	q->vals = NULL;
	q->nvals = q->cap = 0;
	q->nrows = 0;
	free_texts(q);
	q->phase = G_RETURNING;
	if (f == NULL)
		return route_subq_refused(r, (nk_error_oom(&e), &e)), false;
	fputs(q->update, f);
	for (uint64_t i = 0; i < q->nold; i++) {
		char *const *v = &q->old[i * q->ncols];

		fputs(i ? ", (" : "(", f);
		for (uint32_t k = 0; k <= q->nkey; k++) {
			fputs(k ? ", " : "", f);
			sql_put_literal(f, v[k] ? v[k] : "", v[k] ? strlen(v[k]) : 0);
			fprintf(f, "::%s", q->types[k]);
		}
		fprintf(f, ", %" PRIu64 ")", i);
	}
	fputs(q->update_tail, f);
	if (fclose(f) != 0 || !add_text(q, out))
		return route_subq_refused(r, (nk_error_oom(&e), &e)), false;
	return true;
}

/* All done: the client's answer (DELETE n, INSERT 0 n, UPDATE n). */
static void
write_answer(struct route *r)
{
	const char *what = r->x.gsi->kind == PLAN_GSI_DELETE ? "DELETE" :
			   r->x.gsi->kind == PLAN_GSI_UPDATE ? "UPDATE" :
			   r->x.gsi->kind == PLAN_GSI_COPY ? "COPY" : "INSERT 0";
	char tag[64];
	struct pktbuf pb;

	snprintf(tag, sizeof(tag), "%s %" PRIu64, what, r->x.gsi->nrows);
	route_gsi_free(r);
	snprintf(r->last_tag, sizeof(r->last_tag), "%s", what);	/* (its portal's) */
	if (r->x.ext_exec && r->x.ext_describe) {
		pktbuf_init(&pb, 8);
		pktbuf_write_no_data(&pb);
		if (!route_send(r, &pb))
			return;
	}
	route_stmt_finish(r, tag, NULL);
}

/* route_gsi_copied: see route_gsi.h. */
bool
route_gsi_copied(struct route *r)
{
	struct rgsi *q = r->x.gsi;

	if (!lookup_steps(r, q) || q->ntexts == 0)
		return false;
	route_exec_reset(r);
	gsi_resume(r);
	return true;
}

/* route_gsi_finished: see route_gsi.h. */
bool
route_gsi_finished(struct route *r)
{
	struct rgsi *q = r->x.gsi;

	q->capture = r->x.subq_capture = false;
	if (q->ext)
		r->x.ext_exec = true;	/* (the Execute's again) */
	if (r->x.has_err) {
		route_gsi_free(r);
		return false;
	}
	if (q->phase == G_LOCK && q->nrows == 0) {
		q->phase = G_LOOKUPS;		/* (nothing to update: UPDATE 0) */
		free_texts(q);
	} else if (q->beside) {
		q->phase = G_LOOKUPS;		/* (written with the rows) */
		free_texts(q);
	} else if (q->phase == G_LOCK ? !update_after_lock(r, q) :
		   q->phase == G_RETURNING && !lookup_steps(r, q)) {
		route_gsi_free(r);
		return false;
	}
	if (q->next >= q->ntexts && q->phase == G_LOOKUPS) {
		write_answer(r);
		return true;
	}
	if (q->next >= q->ntexts)
		q->phase = G_MAIN;	/* (READ keeps the keys it read) */
	q->ncols = 0;
	route_exec_reset(r);
	gsi_resume(r);
	return true;
}
