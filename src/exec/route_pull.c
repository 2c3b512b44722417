/*
 * route_pull.c - a portal whose rows come from several shards, read in parts by the router:
 * a protocol portal executed with a row limit, or a SQL cursor. Each shard holds a portal
 * (Bind + Execute with a row limit) or a cursor (DECLARE ... NO SCROLL, then FETCH) of the
 * portal's name, its "mirror", and the router keeps the merge of their results (struct
 * rpull, owned by the portal). An operation (an Execute, the steps of a FETCH or MOVE) takes
 * the rows it wants from the merge; when the merge needs rows of a shard whose queue is
 * empty it runs a "round": every such shard gets one pull (ROUTE_PULL_CHUNK rows, or all
 * of them when the merge holds every row anyway), and the rows are fed to the merge as they
 * come. Memory stays bounded by a chunk per shard plus what the client has not read (the
 * next round waits while the client's queue is long). A SCROLL cursor keeps the rows it let
 * out (up to ROUTE_PULL_STORE_MAX bytes) to move backward over them.
 *
 * Entry points: route_pull_new(), route_pull_free(), route_pull_start(), route_pull_more(),
 * route_pull_answer(), route_pull_resume(), route_pull_rowdesc() and the message builders.
 */
#include "neki/base.h"

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
#include "route_ext.h"
#include "route_merge.h"
#include "route_portal.h"
#include "route_pull.h"
#include "route_sqltext.h"
#include "route_state.h"

#define ROUTE_PULL_CHUNK 256			/* rows one shard pull asks for */
#define ROUTE_PULL_CLIENT_MAX (256 * 1024)	/* client queue bytes before a round waits */
#define ROUTE_PULL_STORE_MAX (64u * 1024 * 1024)	/* rows a SCROLL cursor keeps */

/* A row a SCROLL cursor keeps (a DataRow message in the client's formats). */
struct rpull_row {
	uint8_t *msg;			/* owned */
	uint32_t len;
};

struct rpull {
	struct rarena *arena;		/* owned: the merge spec and its strings */
	struct plan_merge spec;
	struct merge *merge;		/* owned */
	uint32_t n;			/* shards; merge shard i is uid[i] */
	char uid[ROUTE_SHARDS_MAX][PLAN_SHARD_MAX];
	uint32_t described;		/* bit i: shard i was asked for its RowDescription */
	uint32_t round[ROUTE_SHARDS_MAX];	/* target k of the round -> merge shard */
	bool cursor;			/* the mirrors are cursors (FETCH), else portals */
	uint32_t chunk;			/* rows per pull; 0: all */
	char *mirror;			/* owned: the mirrors' name */
	char *qmirror;			/* owned: ... as a quoted identifier */
	struct proto_column *cols;	/* owned (names too): the client's columns */
	uint32_t ncols;
	bool fmt_set;			/* the rows' formats are fixed (first pull) */
	uint8_t *fmt;			/* owned: their result format codes (nfmt int16) */
	uint16_t nfmt;
	struct plan_cursor_pos pos;	/* cursor position (route_cursor.c moves it) */
	bool scroll;			/* keep the rows let out (SCROLL cursor) */
	struct rpull_row *store;	/* owned: rows 1..nstore */
	uint32_t nstore, capstore;
	size_t store_bytes;
};

/* ---- life cycle ---- */

/* route_pull_new: see route_int.h. */
struct rpull *
route_pull_new(struct route *r, const char *sql, const struct plan_input *in,
	       const char *const *uids, uint32_t n, const char *mirror, bool cursor,
	       struct nk_error *err)
{
	struct merge_options opt = route_merge_options(r);
	struct rpull *pl = calloc(1, sizeof(*pl));

	opt.omit_rowdesc = opt.omit_tail = true;
	if (pl == NULL || (pl->arena = rarena_new()) == NULL ||
	    (pl->mirror = strdup(mirror)) == NULL ||
	    (pl->qmirror = route_quote_ident(mirror)) == NULL) {
		route_pull_free(pl);
		nk_error_oom(err);
		return NULL;
	}
	pl->n = n < ROUTE_SHARDS_MAX ? n : ROUTE_SHARDS_MAX;
	for (uint32_t i = 0; i < pl->n; i++)
		snprintf(pl->uid[i], sizeof(pl->uid[i]), "%s", uids[i]);
	pl->cursor = cursor;
	pl->pos.at_start = true;
	if (!plan_merge_cached(pl->arena, sql, &pl->spec, err) ||
	    !plan_merge_bind(&pl->spec, in, &opt.limit, &opt.offset, err) ||
	    (pl->merge = merge_new(&pl->spec, pl->n, &opt, err)) == NULL) {
		route_pull_free(pl);
		return NULL;
	}
	pl->chunk = merge_buffered(pl->merge) ? 0 : ROUTE_PULL_CHUNK;
	return pl;
}

/* route_pull_free: see route_int.h. */
void
route_pull_free(struct rpull *pl)
{
	if (pl == NULL)
		return;
	merge_free(pl->merge);
	rarena_free(pl->arena);
	for (uint32_t i = 0; i < pl->ncols; i++)
		free((char *)pl->cols[i].name);
	for (uint32_t i = 0; i < pl->nstore; i++)
		free(pl->store[i].msg);
	free(pl->store);
	free(pl->cols);
	free(pl->fmt);
	free(pl->mirror);
	free(pl->qmirror);
	free(pl);
}

/* route_pull_pos: see route_int.h. */
struct plan_cursor_pos *
route_pull_pos(struct rpull *pl)
{
	return &pl->pos;
}

/* route_pull_set_scroll: see route_int.h. */
void
route_pull_set_scroll(struct rpull *pl, bool scroll)
{
	pl->scroll = scroll;
}

/* route_quote_ident: see route_int.h. */
char *
route_quote_ident(const char *name)
{
	size_t n = strlen(name);
	char *q = malloc(2 * n + 3), *o = q;

	if (q == NULL)
		return NULL;
	*o++ = '"';
	for (const char *p = name; *p; p++) {
		if (*p == '"')
			*o++ = '"';
		*o++ = *p;
	}
	*o++ = '"';
	*o = '\0';
	return q;
}

/* ---- columns and formats ---- */

/* Result format code of visible column <i> under <nfmt> codes <fmt> (Bind's rules). */
static int16_t
fmt_of(const uint8_t *fmt, uint16_t nfmt, uint32_t i)
{
	const uint8_t *c;

	if (nfmt == 0)
		return 0;
	c = fmt + 2 * (nfmt == 1 ? 0 : i);
	return nfmt > 1 && i >= nfmt ? 0 : (int16_t)((uint16_t)c[0] << 8 | c[1]);
}

/* route_pull_set_cols: see route_int.h. */
bool
route_pull_set_cols(struct rpull *pl, const uint8_t *body, size_t len, struct nk_error *err)
{
	struct proto_rowdesc_msg rd;
	int64_t nvis;

	if (pl->cols != NULL)
		return true;
	if (!proto_parse_row_description(body, len, &rd, err))
		return false;
	nvis = (int64_t)pl->spec.nvisible + ((int64_t)rd.ncols - pl->spec.ncols);
	if ((rd.ncols != pl->spec.ncols && !pl->spec.star) || nvis < 0 || nvis > rd.ncols)
		return nk_error_set(err, ERRCODE_INTERNAL_ERROR,
				    "shard result has %u columns, the merge expects "
				    "%u", rd.ncols, pl->spec.ncols);
	pl->cols = calloc(rd.ncols ? rd.ncols : 1, sizeof(*pl->cols));
	if (pl->cols == NULL)
		return nk_error_oom(err);
	proto_rowdesc_columns(&rd, pl->cols, rd.ncols);
	for (uint32_t i = 0; i < rd.ncols; i++) {
		if (i >= nvis) {
			pl->cols[i].name = NULL;
			continue;
		}
		if ((pl->cols[i].name = strdup(pl->cols[i].name)) == NULL) {
			pl->ncols = i;
			return nk_error_oom(err);
		}
		pl->ncols = i + 1;
	}
	return true;
}

/* route_pull_rowdesc: see route_int.h. */
bool
route_pull_rowdesc(const struct rpull *pl, const uint8_t *fmt, uint16_t nfmt,
		   struct pktbuf *pb)
{
	struct proto_column *c;

	if (pl->cols == NULL || (c = calloc(pl->ncols ? pl->ncols : 1, sizeof(*c))) == NULL)
		return false;
	for (uint32_t i = 0; i < pl->ncols; i++) {
		c[i] = pl->cols[i];
		c[i].format = fmt_of(fmt, nfmt, i);
	}
	pktbuf_write_row_description(pb, c, pl->ncols);
	free(c);
	return true;
}

/* route_pull_formats: see route_int.h. */
bool
route_pull_formats(struct rpull *pl, const uint8_t *fmt, uint16_t nfmt, bool unset_only,
		   struct nk_error *err)
{
	uint32_t n = pl->ncols > nfmt ? pl->ncols : nfmt;

	if (pl->fmt_set && unset_only)
		return true;
	if (!pl->fmt_set) {
		if (nfmt > 0 && (pl->fmt = malloc((size_t)nfmt * 2)) == NULL)
			return nk_error_oom(err);
		if (nfmt > 0)
			memcpy(pl->fmt, fmt, (size_t)nfmt * 2);
		pl->nfmt = nfmt;
		pl->fmt_set = true;
		return true;
	}
	for (uint32_t i = 0; i < (n > 0 ? n : 1); i++)
		if (fmt_of(fmt, nfmt, i) != fmt_of(pl->fmt, pl->nfmt, i)) {
			nk_error_set(err, ERRCODE_FEATURE_NOT_SUPPORTED,
				     "cannot change the result format of cursor "
				     "\"%s\" over several shards", pl->mirror);
			nk_error_detail(err, "Its rows are read in the formats its first fetch "
					"asked for.");
			return false;
		}
	return true;
}

/* ---- messages to the shards ---- */

/* Parse <sql> + Bind <portal> with the values of <p>'s Bind (NULL: none) and the rows'
 * formats for the visible columns (text for the hidden ones), or with <final> the formats
 * the merge's final combine query is read in. */
static bool
put_parse_bind(struct pktbuf *pb, const struct rpull *pl, const struct rportal *p,
	       const char *sql, const char *portal, bool final, struct nk_error *err)
{
	struct proto_bind_msg m, rf;
	uint32_t o[256];
	bool ok;

	ok = route_portal_bind_msg(p, &m, err);
	if (ok && m.nparams > 256)
		ok = nk_error_set(err, ERRCODE_PROGRAM_LIMIT_EXCEEDED,
				  "too many parameters in a SELECT over several "
				  "shards");
	if (ok) {
		route_merge_oids(&pl->spec, p, &m, sql, m.nparams, o);
		memset(&rf, 0, sizeof(rf));
		rf.nresult_formats = pl->nfmt;
		rf.result_formats = pl->fmt;
		pktbuf_write_parse(pb, "", sql, o, m.nparams);
		pktbuf_begin(pb, 'B');
		pktbuf_put_string(pb, portal);
		pktbuf_put_string(pb, "");
		pktbuf_put_int16(pb, (int16_t)m.nformats);
		pktbuf_put_bytes(pb, m.formats, (size_t)m.nformats * 2);
		pktbuf_put_int16(pb, (int16_t)m.nparams);
		pktbuf_put_bytes(pb, m.params, m.params_len);
		if (final)
			ok = route_merge_final_formats(pb, pl->merge) ||
			     nk_error_oom(err);
		else
			ok = route_merge_formats(pb, &rf, &pl->spec, err);
		pktbuf_end(pb);
	}
	return ok;
}

/* FETCH FORWARD <chunk> FROM <mirror> (malloc'd; NULL on no memory). */
static char *
fetch_sql(const struct rpull *pl)
{
	size_t n = strlen(pl->qmirror) + 48;
	char *sql = malloc(n);

	if (sql == NULL)
		return NULL;
	if (pl->chunk > 0)
		snprintf(sql, n, "FETCH FORWARD %u FROM %s", pl->chunk, pl->qmirror);
	else
		snprintf(sql, n, "FETCH FORWARD ALL FROM %s", pl->qmirror);
	return sql;
}

/* The messages of merge shard <i> in a round (<final>: the merge's final combine query). */
static bool
round_msgs(struct route *r, struct rpull *pl, uint32_t i, bool final, struct pktbuf *pb,
	   struct nk_error *err)
{
	const struct rportal *p = r->x.pull.portal;
	bool describe = !final && (pl->described & (1u << i)) == 0;

	if (final) {
		if (!put_parse_bind(pb, pl, p, merge_final_sql(pl->merge), "", true, err))
			return false;
		pktbuf_write_execute(pb, "", 0);
	} else if (pl->cursor) {
		char *fetch = fetch_sql(pl);
		bool ok = fetch != NULL && put_parse_bind(pb, pl, NULL, fetch, "", false, err);

		free(fetch);
		if (!ok)
			return nk_error_is_set(err) ? false :
			       nk_error_oom(err);
		if (describe)
			pktbuf_write_describe(pb, 'P', "");
		pktbuf_write_execute(pb, "", 0);
	} else {
		if (describe) {		/* the first pull creates the shard's portal */
			pktbuf_write_close(pb, 'P', pl->mirror);
			if (!put_parse_bind(pb, pl, p, pl->spec.shard_sql, pl->mirror, false, err))
				return false;
			pktbuf_write_describe(pb, 'P', pl->mirror);
		}
		pktbuf_write_execute(pb, pl->mirror, pl->chunk);
	}
	pktbuf_write_sync(pb);
	if (describe)
		pl->described |= 1u << i;
	return !pktbuf_failed(pb) || nk_error_oom(err);
}

/* Start a round: one pull from every shard whose queue is empty (or the final query). */
static enum rpull_rc
round_start(struct route *r, struct rpull *pl, bool final)
{
	const char *uids[ROUTE_SHARDS_MAX];
	uint32_t n = 0;
	struct nk_error err;

	nk_error_clear(&err);
	for (uint32_t i = 0; i < pl->n && !final; i++)
		if (!merge_shard_done(pl->merge, i) && merge_queued(pl->merge, i) == 0) {
			pl->round[n] = i;
			uids[n++] = pl->uid[i];
		}
	if (final) {
		pl->round[0] = MERGE_FINAL;
		uids[n++] = pl->uid[0];
	}
	if (n == 0)
		nk_error_set(&err, ERRCODE_INTERNAL_ERROR,
			     "the merge of portal \"%s\" waits for no shard",
			     pl->mirror);
	else if (route_exec_setup(r, uids, n, "", &err)) {
		r->x.combine = RX_PULL;
		r->x.merge_streams = true;
		r->x.pull.final = final;
		for (uint32_t k = 0; k < n && !nk_error_is_set(&err); k++) {
			struct rshard *sh = &r->sh[r->x.tg[k]];
			struct pktbuf pb;

			pktbuf_init(&pb, 256);
			if (!round_msgs(r, pl, pl->round[k], final, &pb, &err)) {
				pktbuf_cleanup(&pb);
				break;
			}
			sh->ext_msg = pb.buf;	/* taken over */
			sh->ext_len = pb.len;
		}
		route_set_busy(r);
		if (!nk_error_is_set(&err) && route_exec_start(r, &err))
			return RPULL_ASYNC;
	}
	r->x.err = err;
	r->x.err.severity = NK_SEV_ERROR;
	r->x.has_err = true;
	return RPULL_FAILED;
}

/* route_pull_declare_msgs: see route_int.h. */
bool
route_pull_declare_msgs(struct rpull *pl, const struct rportal *p, bool hold, bool describe,
			struct pktbuf *pb, struct nk_error *err)
{
	size_t n = strlen(pl->qmirror) + strlen(pl->spec.shard_sql) + 64;
	char *sql = malloc(n);
	bool ok;

	if (sql == NULL)
		return nk_error_oom(err);
	snprintf(sql, n, "DECLARE %s NO SCROLL CURSOR%s FOR %s", pl->qmirror,
		 hold ? " WITH HOLD" : "", pl->spec.shard_sql);
	ok = put_parse_bind(pb, pl, p, sql, "", true, err);
	free(sql);
	if (!ok)
		return false;
	pktbuf_write_execute(pb, "", 0);
	if (describe)
		pktbuf_write_describe(pb, 'P', pl->mirror);
	pktbuf_write_sync(pb);
	return !pktbuf_failed(pb) || nk_error_oom(err);
}

/* ---- the rows an operation reads ---- */

static bool
pull_fail(struct route *r, const struct nk_error *err)
{
	if (!r->x.has_err) {
		r->x.err = *err;
		r->x.err.severity = NK_SEV_ERROR;
		r->x.has_err = true;
	}
	return false;
}

/* Backward movement (or a rewind) of a cursor that only goes forward. */
static bool
no_scroll(struct route *r)
{
	struct nk_error e;

	nk_error_set(&e, ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE, "cursor can only scan forward");
	nk_error_hint(&e, "Declare it with SCROLL option to enable backward scan.");
	return pull_fail(r, &e);
}

/* The row number the cursor is on (0 before the first, rows + 1 after the last). */
static uint64_t
cur_row(const struct plan_cursor_pos *pos)
{
	return pos->at_start ? 0 : pos->at_end ? pos->pos + 1 : pos->pos;
}

/* The RowDescription the operation owes (FETCH, a described Execute), before its rows. */
static bool
send_head(struct route *r, struct rpull *pl)
{
	struct pktbuf pb;
	struct nk_error e;

	if (!r->x.pull.head)
		return true;
	r->x.pull.head = false;
	pktbuf_init(&pb, 256);
	if (!route_pull_rowdesc(pl, pl->fmt, pl->nfmt, &pb)) {
		pktbuf_cleanup(&pb);
		nk_error_set(&e, ERRCODE_INTERNAL_ERROR,
			     "the columns of portal \"%s\" are not known",
			     pl->mirror);
		return pull_fail(r, &e);
	}
	return route_send(r, &pb);
}

/* <n> rows the step read, in <pb> (taken): the result of FETCH or Execute goes to the
 * client, other steps' rows and MOVE's are only counted. */
static bool
step_rows(struct route *r, struct rpull *pl, struct pktbuf *pb, uint64_t n)
{
	const struct plan_fetch_step *st = &r->x.pull.plan.steps[r->x.pull.step];

	r->x.pull.rows += n;
	if (!st->to_client || r->x.pull.op == RPULL_MOVE || n == 0) {
		pktbuf_cleanup(pb);
		return true;
	}
	if (!send_head(r, pl)) {
		pktbuf_cleanup(pb);
		return false;
	}
	r->c.stats->total_sent += pb->len;
	return route_send(r, pb);
}

/* SCROLL: keep the DataRows of <buf>[0..len) (ROUTE_PULL_STORE_MAX bytes at most). */
static bool
store_add(struct rpull *pl, const uint8_t *buf, size_t len, struct nk_error *err)
{
	for (size_t o = 0; o + 5 <= len;) {
		uint32_t n = 1 + ((uint32_t)buf[o + 1] << 24 | (uint32_t)buf[o + 2] << 16 |
				  (uint32_t)buf[o + 3] << 8 | buf[o + 4]);
		struct rpull_row *row;

		if (pl->store_bytes + n > ROUTE_PULL_STORE_MAX) {
			nk_error_set(err, ERRCODE_PROGRAM_LIMIT_EXCEEDED,
				     "scrollable cursor \"%s\" over several shards "
				     "needs more than %u MB on the router", pl->mirror,
				     ROUTE_PULL_STORE_MAX >> 20);
			nk_error_hint(err, "Declare it NO SCROLL to read it forward only.");
			return false;
		}
		if (pl->nstore == pl->capstore) {
			uint32_t cap = pl->capstore ? pl->capstore * 2 : 256;
			struct rpull_row *s = realloc(pl->store, cap * sizeof(*s));

			if (s == NULL)
				return nk_error_oom(err);
			pl->store = s;
			pl->capstore = cap;
		}
		row = &pl->store[pl->nstore];
		if ((row->msg = malloc(n)) == NULL)
			return nk_error_oom(err);
		memcpy(row->msg, buf + o, n);
		row->len = n;
		pl->nstore++;
		pl->store_bytes += n;
		o += n;
	}
	return true;
}

/* Rows still wanted by the step (-1: all). */
static int64_t
step_budget(const struct route *r)
{
	if (r->x.pull.want == STMT_FETCH_ALL)
		return -1;
	return r->x.pull.rows >= (uint64_t)r->x.pull.want ? 0 :
	       r->x.pull.want - (int64_t)r->x.pull.rows;
}

/* A forward step over rows a SCROLL cursor kept already. */
static bool
take_stored(struct route *r, struct rpull *pl)
{
	int64_t budget = step_budget(r);
	uint64_t at = r->x.pull.base + r->x.pull.rows, n = 0;
	struct pktbuf pb;

	if (!pl->scroll || at >= pl->nstore || budget == 0)
		return true;
	pktbuf_init(&pb, 256);
	for (; at + n < pl->nstore && (budget < 0 || (int64_t)n < budget); n++)
		pktbuf_put_bytes(&pb, pl->store[at + n].msg, pl->store[at + n].len);
	return step_rows(r, pl, &pb, n);
}

/* A forward step over the rows the merge can let out now. */
static bool
take_merged(struct route *r, struct rpull *pl)
{
	int64_t budget = step_budget(r);
	struct nk_error err;
	struct pktbuf pb;
	uint64_t n;

	if (!r->x.pull.running || budget == 0 ||
	    (pl->scroll && r->x.pull.base + r->x.pull.rows < pl->nstore))
		return true;
	pktbuf_init(&pb, 256);
	nk_error_clear(&err);
	if (!merge_pull_rows(pl->merge, &pb, budget, &n, &err) ||
	    (pl->scroll && !store_add(pl, pb.buf, pb.len, &err))) {
		pktbuf_cleanup(&pb);
		return pull_fail(r, &err);
	}
	return step_rows(r, pl, &pb, n);
}

/* A backward step (SCROLL): the kept rows before the current one, nearest first. */
static bool
step_backward(struct route *r, struct rpull *pl, const struct plan_fetch_step *st)
{
	uint64_t cur = cur_row(&pl->pos), n = 0;
	struct pktbuf pb;

	pktbuf_init(&pb, 256);
	if (!pl->pos.at_start && st->count > 0)
		for (uint64_t k = cur - 1; k >= 1 && k <= pl->nstore &&
		     (st->count == STMT_FETCH_ALL || (int64_t)n < st->count); k--, n++)
			pktbuf_put_bytes(&pb, pl->store[k - 1].msg, pl->store[k - 1].len);
	return step_rows(r, pl, &pb, n);
}

/* The step ended with r->x.pull.rows rows: move the cursor, go to the next one. */
static bool
step_finish(struct route *r, struct rpull *pl)
{
	const struct plan_fetch_step *st = &r->x.pull.plan.steps[r->x.pull.step];

	if (st->to_client && r->x.pull.op != RPULL_MOVE && !send_head(r, pl))
		return false;		/* (no rows: the description all the same) */
	plan_cursor_moved(&pl->pos, st->op, st->count, r->x.pull.rows);
	if (st->to_client)
		r->x.pull.result = r->x.pull.rows;
	r->x.pull.running = false;
	r->x.pull.step++;
	return true;
}

/* Start step r->x.pull.step: a rewind or a backward step runs at once (from the kept rows),
 * a forward one reads the rows (r->x.pull.running) the loop of route_pull_more() takes. */
static bool
step_begin(struct route *r, struct rpull *pl)
{
	const struct plan_fetch_step *st = &r->x.pull.plan.steps[r->x.pull.step];
	const struct plan_cursor_pos *pos = &pl->pos;

	r->x.pull.rows = 0;
	switch (st->op) {
	case PLAN_FETCH_REWIND:
		if (!(pos->at_start && !pos->at_end) && !pl->scroll)
			return no_scroll(r);
		return step_finish(r, pl);
	case PLAN_FETCH_BACKWARD:
		if (!pl->scroll)
			return no_scroll(r);
		return step_backward(r, pl, st) && step_finish(r, pl);
	default:
		if (pos->at_end || st->count <= 0)
			return step_finish(r, pl);	/* no movement */
		r->x.pull.base = cur_row(pos);
		r->x.pull.want = st->count;
		r->x.pull.running = true;
		return true;
	}
}

/* A forward step has its rows, or the result has no more. */
static bool
step_complete(const struct route *r, const struct rpull *pl)
{
	if (step_budget(r) == 0)
		return true;
	return merge_state(pl->merge) == MERGE_DONE &&
	       (!pl->scroll || r->x.pull.base + r->x.pull.rows >= pl->nstore);
}

/* The operation ran its steps: its command tag (or PortalSuspended). */
static bool
op_finish(struct route *r, struct rportal *p)
{
	const struct plan_fetch *f = &r->x.pull.plan;
	uint64_t n = f->fixed >= 0 ? (uint64_t)f->fixed : r->x.pull.result;
	enum rpull_op op = r->x.pull.op;
	char tag[48];
	struct pktbuf pb;

	r->x.pull.portal = NULL;
	r->x.pull.op = RPULL_NONE;
	pktbuf_init(&pb, 64);
	if (op == RPULL_MOVE && r->x.ext_exec && r->x.ext_describe)
		pktbuf_write_no_data(&pb);	/* (a described MOVE returns no rows) */
	if (op == RPULL_EXECUTE && f->steps[0].count != STMT_FETCH_ALL &&
	    n == (uint64_t)f->steps[0].count) {
		pktbuf_write_portal_suspended(&pb);
		if (!p->is_cursor)
			p->state = RPORTAL_OPEN;
	} else {
		snprintf(tag, sizeof(tag), "%s %llu", op == RPULL_FETCH ? "FETCH" :
			 op == RPULL_MOVE ? "MOVE" : "SELECT", (unsigned long long)n);
		pktbuf_write_command_complete(&pb, tag);
		if (op == RPULL_EXECUTE && !p->is_cursor) {
			p->state = RPORTAL_DONE;
			p->rows = true;
			snprintf(p->tag, sizeof(p->tag), "SELECT");
		}
	}
	return route_send(r, &pb);
}

/* route_pull_more: see route_int.h. */
enum rpull_rc
route_pull_more(struct route *r)
{
	struct rportal *p = r->x.pull.portal;
	struct rpull *pl = p != NULL ? p->pull : NULL;
	struct nk_error e;

	if (pl == NULL || p->lost) {
		if (p != NULL)
			(void)route_portal_lost(p, &e);
		else
			nk_error_set(&e, ERRCODE_INVALID_CURSOR_NAME, "the portal read was closed");
		(void)pull_fail(r, &e);
	}
	while (!route_client_closed(r) && !r->x.has_err) {
		if (!r->x.pull.running) {
			if (r->x.pull.step == r->x.pull.plan.nsteps)
				return op_finish(r, p) ? RPULL_DONE : RPULL_ASYNC;
			if (!step_begin(r, pl))
				break;
			continue;
		}
		if (!take_stored(r, pl) || !take_merged(r, pl))
			break;
		if (step_complete(r, pl)) {
			if (!step_finish(r, pl))
				break;
			continue;
		}
		if (merge_state(pl->merge) == MERGE_NEED_FINAL)
			return round_start(r, pl, true);
		if (sbuf_queued(r->c.sb) >= ROUTE_PULL_CLIENT_MAX) {
			r->x.pull.wait = true;	/* route_pull_resume() goes on */
			sbuf_set_notify_send_done(r->c.sb, true);
			return RPULL_ASYNC;
		}
		return round_start(r, pl, false);
	}
	if (route_client_closed(r) || !r->x.has_err)
		return RPULL_ASYNC;
	r->x.pull.portal = NULL;
	r->x.pull.op = RPULL_NONE;
	return RPULL_FAILED;
}

/* route_pull_start: see route_int.h. */
enum rpull_rc
route_pull_start(struct route *r, struct rportal *p, enum rpull_op op,
		 const struct plan_fetch *plan, bool head)
{
	r->x.pull.portal = p;
	r->x.pull.op = op;
	r->x.pull.plan = *plan;
	r->x.pull.step = 0;
	r->x.pull.running = false;
	r->x.pull.result = 0;
	r->x.pull.head = head;
	r->x.pull.wait = false;
	r->x.pull.final = false;
	r->x.has_err = false;
	return route_pull_more(r);
}

/* route_pull_portal: see route_int.h. */
enum rstep
route_pull_portal(struct route *r, const struct plan *p, const char *sql)
{
	struct rportal *x = r->xportal;
	struct plan_input in;
	struct proto_bind_msg m;
	struct plan_fetch f;
	struct nk_error err;
	bool ok;

	memset(&in, 0, sizeof(in));
	in.params = r->x.ext_params;
	in.nparams = r->x.ext_nparams;
	nk_error_clear(&err);
	if (p->stmt->kind != STMT_SELECT || x == NULL) {
		nk_error_set(&err, ERRCODE_FEATURE_NOT_SUPPORTED,
			     "only a SELECT over several shards can be fetched in "
			     "parts (Execute with a row limit)");
		return route_fail(r, &err);
	}
	if ((x->pull = route_pull_new(r, sql, &in, p->shards, p->nshards,
				      route_portal_mirror(x), false, &err)) == NULL)
		return route_fail(r, &err);
	ok = route_portal_bind_msg(x, &m, &err) &&
	     route_pull_formats(x->pull, m.result_formats, m.nresult_formats, false, &err);
	for (uint32_t i = 0; ok && i < p->nshards; i++) {
		struct rshard *sh = route_shard(r, p->shards[i], &err);

		ok = sh != NULL;
		if (ok)
			x->mask |= 1u << (sh - r->sh);
	}
	if (!ok)
		return route_fail(r, &err);
	memset(&f, 0, sizeof(f));
	f.fixed = -1;
	f.nsteps = 1;
	f.steps[0] = (struct plan_fetch_step){ PLAN_FETCH_FORWARD, r->x.ext_max_rows, true };
	switch (route_pull_start(r, x, RPULL_EXECUTE, &f, r->x.ext_describe)) {
	case RPULL_ASYNC:
		return RSTEP_ASYNC;
	case RPULL_DONE:
		return RSTEP_DONE;
	default:
		return route_fail(r, &r->x.err);
	}
}

/* route_pull_resume: see route_int.h. */
void
route_pull_resume(struct route *r)
{
	if (!r->x.pull.wait)
		return;
	r->x.pull.wait = false;
	sbuf_set_notify_send_done(r->c.sb, false);
	route_exec_finished(r);
}

/* A cursor's FETCH pull ended the shard's rows: fewer than asked for. */
static bool
fetch_ended(const struct rpull *pl, const uint8_t *body, size_t len)
{
	const char *tag;
	struct nk_error e;
	char head[16];
	uint64_t n = 0;
	bool counted = false;

	if (pl->chunk == 0 || !proto_parse_command_complete(body, len, &tag, &e))
		return true;
	route_tag_split(tag, head, sizeof(head), &n, &counted);
	return !counted || n < pl->chunk;
}

/* route_pull_answer: see route_int.h. */
bool
route_pull_answer(struct route *r, struct rshard *sh, struct link *l,
		  const struct sbuf_pkt *pkt)
{
	struct rpull *pl = r->x.pull.portal != NULL ? r->x.pull.portal->pull : NULL;
	const uint8_t *body = pkt->data + 5;
	size_t len = pkt->len - 5;
	struct nk_error err;
	bool ok = true;

	(void)sh;
	if (pkt->avail < pkt->len) {
		if (sbuf_hold(link_sbuf(l), pkt->len))
			return true;
		route_client_fatal(r, "server sent too big packet");
		return false;
	}
	nk_error_clear(&err);
	if (pl != NULL && !r->x.has_err && (pkt->type == 'T' || r->x.pull.op != RPULL_NONE)) {
		uint32_t i = r->x.pull.final ? MERGE_FINAL : pl->round[r->x.reading];

		/* not fed: DECLARE's description, the end of a part of a shard that has more */
		bool more = pkt->type == 's' || (pkt->type == 'C' && pl->cursor && !r->x.pull.final &&
						 !fetch_ended(pl, body, len));

		if (pkt->type == 'T' && !r->x.pull.final)
			ok = route_pull_set_cols(pl, body, len, &err);
		if (ok && r->x.pull.op != RPULL_NONE && !more)
			ok = merge_feed(pl->merge, i, (char)pkt->type, body, len, &err);
		if (!ok)
			(void)pull_fail(r, &err);
		else if (r->x.pull.op != RPULL_NONE)
			(void)take_merged(r, pl);
	}
	sbuf_skip(link_sbuf(l), pkt->len);
	return true;
}
