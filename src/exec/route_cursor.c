/*
 * route_cursor.c - SQL cursors of a routed session: DECLARE, FETCH, MOVE, CLOSE [ALL].
 * A cursor whose query runs on one shard is that shard's own cursor: DECLARE, FETCH, MOVE
 * and CLOSE go there unchanged (every direction, SCROLL, WITH HOLD as Postgres) on the link
 * the transaction holds; a WITH HOLD cursor keeps its link pinned to the session after the
 * commit until it is closed. A cursor over several shards is the router's (route_pull.c):
 * each shard declares a NO SCROLL cursor of the same name over the merge's shard query
 * (WITH HOLD when asked: each shard keeps its rows at the commit), and FETCH / MOVE move
 * the router's cursor the way Postgres moves a portal (plan_fetch_plan()); backward only
 * over a SCROLL one (its rows kept on the router, bounded), otherwise 55000 as Postgres
 * gives for a plan that cannot scan backward. Entry points: route_cursor_stmt(),
 * route_cursor_settle().
 */
#include "neki/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "neki/pktbuf.h"
#include "neki/proto.h"
#include "route_int.h"
#include "route_client.h"
#include "route_cursor.h"
#include "route_portal.h"
#include "route_pull.h"
#include "route_state.h"

static enum rstep
cursor_missing(struct route *r, const char *name)
{
	struct nk_error err;

	nk_error_set(&err, ERRCODE_INVALID_CURSOR_NAME, "cursor \"%s\" does not exist", name);
	return route_fail(r, &err);
}

/* The statement's exec ran; DECLARE, CLOSE of a cursor the router keeps answer here. */
static enum rstep
cursor_run(struct route *r, const char *tag)
{
	enum rstep rc;

	if (tag != NULL) {
		snprintf(r->reply_tag, sizeof(r->reply_tag), "%s", tag);
		r->reply_nodata = r->x.ext_exec && r->x.ext_describe;
	}
	rc = route_exec_run(r);
	if (rc != RSTEP_ASYNC)
		route_cursor_settle(r, false);
	return rc;
}

/* The shards of <mask> (bits of r->sh) as uids; returns how many. */
static uint32_t
mask_uids(const struct route *r, uint32_t mask, const char **uids)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < r->nsh; i++)
		if (mask & (1u << i))
			uids[n++] = r->sh[i].uid;
	return n;
}

/* ---- DECLARE ---- */

/* A cursor over several shards: each declares its part, the first also describes it. */
static enum rstep
declare_multi(struct route *r, struct rportal *cur, const struct plan *q,
	      const struct stmt *st)
{
	struct plan_input in;
	struct nk_error err;

	memset(&in, 0, sizeof(in));
	if (r->x.ext_exec) {
		in.params = r->x.ext_params;
		in.nparams = r->x.ext_nparams;
	}
	nk_error_clear(&err);
	cur->pull = route_pull_new(r, plan_cursor_query(st), &in, q->shards, q->nshards,
				   cur->name, true, &err);
	if (cur->pull == NULL)
		goto fail;
	route_pull_set_scroll(cur->pull, cur->scroll);
	if (cur->hold && r->tx == 'I' && !route_implicit_begin(r)) {
		nk_error_oom(&err);
		goto fail;	/* (WITH HOLD outside a block: declared everywhere or nowhere) */
	}
	if (!route_exec_setup(r, q->shards, q->nshards, "", &err))
		goto fail;
	r->x.combine = RX_PULL;
	r->x.merge_streams = true;
	r->x.pull.portal = cur;
	r->x.pull.op = RPULL_NONE;
	for (uint32_t k = 0; k < r->x.ntg; k++) {
		struct rshard *sh = &r->sh[r->x.tg[k]];
		struct pktbuf pb;

		pktbuf_init(&pb, 256);
		if (!route_pull_declare_msgs(cur->pull, cur, cur->hold, k == 0, &pb, &err)) {
			pktbuf_cleanup(&pb);
			goto fail;
		}
		sh->ext_msg = pb.buf;	/* taken over */
		sh->ext_len = pb.len;
	}
	cur->mask = r->x.tg_mask;
	r->cur_new = cur;
	return cursor_run(r, "DECLARE CURSOR");
fail:
	r->x.pull.portal = NULL;
	route_portal_free(cur);
	return route_fail(r, &err);
}

/* The DECLARE's values (extended protocol) stay with the cursor: its merge's final
 * combine query may use them (HAVING). */
static bool
declare_keep_bind(struct route *r, struct rportal *cur)
{
	const struct rportal *x = r->xportal;

	if (!r->x.ext_exec || x == NULL || x->bind == NULL)
		return true;
	if ((cur->bind = malloc(x->bind_len)) == NULL ||
	    (x->noids > 0 && (cur->oids = malloc((size_t)x->noids * 4)) == NULL))
		return false;
	memcpy(cur->bind, x->bind, x->bind_len);
	cur->bind_len = x->bind_len;
	if (x->noids > 0)
		memcpy(cur->oids, x->oids, (size_t)x->noids * 4);
	cur->noids = x->noids;
	return true;
}

static enum rstep
cursor_declare(struct route *r, const struct plan *p, const char *sql)
{
	const struct stmt_cursor *c = p->stmt->cursor;
	const struct plan *q = p->inner;
	struct rportal *cur;
	struct nk_error err;

	if (route_portal_find(r, c->name) != NULL) {
		nk_error_set(&err, ERRCODE_DUPLICATE_CURSOR,
			     "cursor \"%s\" already exists", c->name);
		return route_fail(r, &err);
	}
	if (!c->hold && !route_in_block(r)) {
		nk_error_set(&err, ERRCODE_NO_ACTIVE_SQL_TRANSACTION,
			     "DECLARE CURSOR can only be used in transaction blocks");
		return route_fail(r, &err);
	}
	if (q->nfills > 0 || q->nnextvals > 0 || q->nshards == 0 ||
	    (q->kind != PLAN_SINGLE && q->kind != PLAN_SHARD_SET && q->kind != PLAN_SCATTER)) {
		nk_error_set(&err, ERRCODE_FEATURE_NOT_SUPPORTED,
			     "DECLARE CURSOR of this query is not supported on a "
			     "sharded database");
		if (q->nfills > 0 || q->nnextvals > 0)
			nk_error_detail(&err, "Its sequence values would come from the router.");
		return route_fail(r, &err);
	}
	if ((cur = route_portal_new(c->name)) == NULL || !declare_keep_bind(r, cur)) {
		route_portal_free(cur);
		nk_error_oom(&err);
		return route_fail(r, &err);
	}
	cur->is_cursor = true;
	cur->hold = c->hold;
	cur->binary = c->binary;
	cur->scroll = c->scroll;
	/* (WITH HOLD over several shards outside a block gets an implicit transaction) */
	cur->tx_new = r->tx != 'I' || (cur->hold && q->kind != PLAN_SINGLE && q->nshards > 1);
	if (q->kind != PLAN_SINGLE && q->nshards > 1)
		return declare_multi(r, cur, q, p->stmt);
	/* one shard: its own cursor, the statement unchanged */
	if (!route_exec_setup(r, q->shards, 1, sql, &err)) {
		route_portal_free(cur);
		return route_fail(r, &err);
	}
	cur->mask = r->x.tg_mask;
	r->cur_new = cur;
	return cursor_run(r, NULL);
}

/* ---- FETCH / MOVE ---- */

/* The client's result formats of a FETCH from the router's cursor <cur>: the FETCH's Bind
 * (extended protocol), else the cursor's BINARY option; a MOVE keeps what there is. */
static bool
fetch_formats(struct route *r, struct rportal *cur, bool move, struct nk_error *err)
{
	static const uint8_t binary[2] = { 0, 1 };
	struct proto_bind_msg m;

	if (move)	/* (sends no rows: the formats there are, or the cursor's own) */
		return route_pull_formats(cur->pull, binary, cur->binary ? 1 : 0, true, err);
	if (!r->x.ext_exec)
		return route_pull_formats(cur->pull, binary, cur->binary ? 1 : 0, false, err);
	return route_portal_bind_msg(r->xportal, &m, err) &&
	       route_pull_formats(cur->pull, m.result_formats, m.nresult_formats, false, err);
}

static enum rstep
fetch_multi(struct route *r, struct rportal *cur, const struct stmt_cursor *c)
{
	struct plan_fetch f;
	struct nk_error err;

	nk_error_clear(&err);
	if (r->x.ext_exec && r->x.ext_max_rows > 0) {
		nk_error_set(&err, ERRCODE_FEATURE_NOT_SUPPORTED,
			     "a FETCH from cursor \"%s\" over several shards "
			     "cannot be run with a row limit", cur->name);
		nk_error_hint(&err, "Execute the FETCH without a row limit, or FETCH fewer rows.");
		return route_fail(r, &err);
	}
	if (!fetch_formats(r, cur, c->is_move, &err))
		return route_fail(r, &err);
	nk_error_clear(&err);
	plan_fetch_plan(route_pull_pos(cur->pull), c->dir, c->count, c->is_move, &f);
	switch (route_pull_start(r, cur, c->is_move ? RPULL_MOVE : RPULL_FETCH, &f,
				 !c->is_move && (!r->x.ext_exec || r->x.ext_describe))) {
	case RPULL_ASYNC:
		return RSTEP_ASYNC;
	case RPULL_DONE:
		return RSTEP_DONE;
	default:
		return route_fail(r, &r->x.err);
	}
}

static enum rstep
cursor_fetch(struct route *r, const struct stmt_cursor *c, const char *sql)
{
	struct rportal *cur = route_portal_find(r, c->name);
	const char *uids[ROUTE_SHARDS_MAX];
	struct nk_error err;

	if (cur == NULL)
		return cursor_missing(r, c->name);
	if (cur->lost) {
		(void)route_portal_lost(cur, &err);
		return route_fail(r, &err);
	}
	if (cur->pull != NULL)
		return fetch_multi(r, cur, c);
	if (mask_uids(r, cur->mask, uids) != 1) {
		nk_error_set(&err, ERRCODE_FEATURE_NOT_SUPPORTED,
			     "%s of portal \"%s\" is not supported on a sharded "
			     "database", c->is_move ? "MOVE" : "FETCH", c->name);
		nk_error_hint(&err, "Execute the portal with the extended query protocol.");
		return route_fail(r, &err);
	}
	if (!route_exec_setup(r, uids, 1, sql, &err))	/* its shard's cursor moves */
		return route_fail(r, &err);
	return cursor_run(r, NULL);
}

/* ---- CLOSE ---- */

static enum rstep
cursor_close_all(struct route *r, const char *sql)
{
	const char *uids[ROUTE_SHARDS_MAX];
	uint32_t mask = 0, n;
	struct nk_error err;
	struct pktbuf pb;

	for (const struct rportal *p = r->portals; p != NULL; p = p->next)
		mask |= p->mask;
	if ((n = mask_uids(r, mask, uids)) == 0) {
		route_portals_drop_all(r, false);
		pktbuf_init(&pb, 32);
		pktbuf_write_command_complete(&pb, "CLOSE CURSOR ALL");
		return route_send(r, &pb) ? RSTEP_DONE : RSTEP_STOP;
	}
	if (!route_exec_setup(r, uids, n, sql, &err))	/* CLOSE ALL on each of them */
		return route_fail(r, &err);
	r->x.combine = RX_QUIET;
	r->cur_close_all = true;
	return cursor_run(r, "CLOSE CURSOR ALL");
}

static enum rstep
cursor_close(struct route *r, const struct stmt_cursor *c, const char *sql)
{
	const char *uids[ROUTE_SHARDS_MAX];
	struct rportal *cur;
	struct nk_error err;
	struct pktbuf pb;
	uint32_t n;

	if (c->name == NULL)
		return cursor_close_all(r, sql);
	if ((cur = route_portal_find(r, c->name)) == NULL)
		return cursor_missing(r, c->name);
	if ((n = mask_uids(r, cur->mask, uids)) == 0) {	/* a portal no shard holds */
		route_portal_drop(r, cur, false);
		pktbuf_init(&pb, 32);
		pktbuf_write_command_complete(&pb, "CLOSE CURSOR");
		return route_send(r, &pb) ? RSTEP_DONE : RSTEP_STOP;
	}
	if (!route_exec_setup(r, uids, n, sql, &err))
		return route_fail(r, &err);
	r->cur_close = cur;
	if (cur->pull == NULL)
		return cursor_run(r, NULL);	/* its shard answers */
	r->x.combine = RX_QUIET;
	return cursor_run(r, "CLOSE CURSOR");
}

/* route_cursor_stmt: see route_int.h. */
enum rstep
route_cursor_stmt(struct route *r, const struct plan *p, const char *sql)
{
	const struct stmt_cursor *c = p->stmt->cursor;

	switch (c->op) {
	case STMT_CUR_DECLARE:
		return cursor_declare(r, p, sql);
	case STMT_CUR_FETCH:
		return cursor_fetch(r, c, sql);
	default:
		return cursor_close(r, c, sql);
	}
}

/* route_cursor_settle: see route_int.h. */
void
route_cursor_settle(struct route *r, bool ok)
{
	if (r->cur_new != NULL) {
		if (ok)
			route_portal_add(r, r->cur_new);
		else
			route_portal_free(r->cur_new);
		r->cur_new = NULL;
	}
	if (r->cur_close != NULL && ok)
		route_portal_drop(r, r->cur_close, false);
	r->cur_close = NULL;
	if (r->cur_close_all && ok)
		route_portals_drop_all(r, false);
	r->cur_close_all = false;
	r->reply_tag[0] = '\0';
	r->reply_nodata = false;
}
