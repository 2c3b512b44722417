/*
 * route_seq.c - sequence values the router supplies (spec 6.1, DESIGN.md 4): a plan with
 * fills (omitted identity/serial columns of a sharded or reference-table INSERT) or
 * nextval('seq') calls takes its values from the worker's allocator (neki/sequence.h);
 * when a sequence has too few, the session runs the reservation statement on its home
 * shard as an exec of its own (RX_SEQ: the rows are runs of values, nothing reaches the
 * client; no BEGIN is sent, so the values never join the client's transaction) and plans
 * the statement again once it answered. A session needing a sequence whose reservation
 * another session of this worker runs waits for it (never two reservations of one
 * sequence at once in a worker). With the values, the statement is rewritten
 * (plan_rewrite) and the filled shard key routes each row (plan_fill_route). INSERT ...
 * SELECT takes its values row batch by row batch (route_seq_fill_values).
 * Entry points: route_seq_plan(), route_seq_fill_values(), route_seq_msg(), route_seq_end(),
 * route_seq_free().
 */
#include "neki/base.h"

#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "neki/config.h"
#include "neki/link.h"
#include "neki/log.h"
#include "neki/proto.h"
#include "neki/sequence.h"
#include "neki/shm.h"
#include "neki/shm_seq.h"
#include "route_int.h"
#include "route_client.h"
#include "route_exec.h"
#include "route_ext.h"
#include "route_seq.h"

#define ROUTE_SEQ_SQL_MAX 2048
#define ROUTE_SEQ_FILLS_MAX 32	/* identity/serial columns of one table the router fills */

static struct seq_alloc *seq_values;	/* the worker's allocator (sequence_batch) */
static struct route *seq_waiters;	/* sessions waiting for another one's reservation */

/* The session's last value of one sequence (currval). */
struct rseq_last {
	char *schema, *name;
	int64_t value;
};

/* One sequence a statement needs values of. */
struct seq_need {
	struct seq_entry *e;
	const char *schema, *name, *home;
	int64_t cache;
	uint32_t n;
};

/* ---- waiting for another session's reservation ---- */

static void
seq_unwait(struct route *r)
{
	for (struct route **pp = &seq_waiters; *pp != NULL; pp = &(*pp)->seq.next) {
		if (*pp == r) {
			*pp = r->seq.next;
			break;
		}
	}
	r->seq.next = NULL;
	r->seq.wait = NULL;
}

/* The reservation of <e> ended: every session waiting for it plans its statement again. */
static void
seq_wake(struct seq_entry *e)
{
	struct route **pp = &seq_waiters;

	while (*pp != NULL) {
		struct route *w = *pp;

		if (w->seq.wait != e) {
			pp = &w->seq.next;
			continue;
		}
		*pp = w->seq.next;
		w->seq.next = NULL;
		w->seq.wait = NULL;
		event_active(w->ev, EV_TIMEOUT, 0);
	}
}

/* This session's reservation (if any) is over: let others reserve and wake them. */
static void
seq_fill_over(struct route *r)
{
	struct seq_entry *e = r->seq.fill;

	if (e == NULL)
		return;
	r->seq.fill = NULL;
	seq_refill_end(e);
	seq_wake(e);
}

/* route_seq_discard: see route_int.h. */
void
route_seq_discard(struct route *r)
{
	for (uint32_t i = 0; i < r->seq.nlast; i++) {
		free(r->seq.last[i].schema);
		free(r->seq.last[i].name);
	}
	free(r->seq.last);
	r->seq.last = NULL;
	r->seq.nlast = 0;
	r->seq.has_lastval = false;
}

void
route_seq_free(struct route *r)
{
	seq_unwait(r);
	seq_fill_over(r);
	route_seq_discard(r);
}

/* ---- currval / lastval: the session's last values ---- */

static struct rseq_last *
seq_last_find(struct route *r, const char *schema, const char *name)
{
	for (uint32_t i = 0; i < r->seq.nlast; i++)
		if (route_streq(r->seq.last[i].schema, schema) &&
		    route_streq(r->seq.last[i].name, name))
			return &r->seq.last[i];
	return NULL;
}

/* <schema>.<name>'s currval() is <v> now (handed out by nextval() when <used>: lastval()
 * names it from now on); false on no memory. */
static bool
seq_last_set(struct route *r, const char *schema, const char *name, int64_t v, bool used)
{
	struct rseq_last *e = seq_last_find(r, schema, name), *g;

	if (e == NULL) {
		if ((g = realloc(r->seq.last, (r->seq.nlast + 1) * sizeof(*g))) == NULL)
			return false;
		r->seq.last = g;
		e = &g[r->seq.nlast];
		e->schema = strdup(schema);
		e->name = strdup(name);
		if (e->schema == NULL || e->name == NULL) {
			free(e->schema);
			free(e->name);
			return false;
		}
		r->seq.nlast++;
	}
	e->value = v;
	if (used) {
		r->seq.last_used = (uint32_t)(e - r->seq.last);
		r->seq.has_lastval = true;
	}
	return true;
}

/* Remember the values this statement took and give currval()/lastval() theirs (in text
 * order, after the fills): 55000 as Postgres when the session has none yet. */
static bool
seq_resolve(struct route *r, const struct plan *p, const int64_t *values, int64_t *nextvals,
	    struct nk_error *err)
{
	for (uint32_t f = 0; f < p->nfills; f++)
		if (p->nrows > 0 && !seq_last_set(r, p->fills[f].seq_schema, p->fills[f].seq_name,
						  values[(size_t)f * p->nrows + p->nrows - 1], true))
			return nk_error_oom(err);
	for (uint32_t k = 0; k < p->nnextvals; k++) {
		const struct plan_nextval *nv = &p->nextvals[k];
		const struct rseq_last *e;

		switch (nv->fn) {
		case PLAN_SEQ_NEXTVAL:
			if (!seq_last_set(r, nv->seq_schema, nv->seq_name, nextvals[k], true))
				return nk_error_oom(err);
			break;
		case PLAN_SEQ_CURRVAL:
			if ((e = seq_last_find(r, nv->seq_schema, nv->seq_name)) == NULL)
				return nk_error_set(err, ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
						    "currval of sequence \"%s\" is not "
						    "yet defined in this session", nv->seq_name);
			nextvals[k] = e->value;
			break;
		case PLAN_SEQ_LASTVAL:
			if (!r->seq.has_lastval)
				return nk_error_set(err, ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
						    "lastval is not yet defined in this "
						    "session");
			nextvals[k] = r->seq.last[r->seq.last_used].value;
			break;
		}
	}
	return true;
}

/*
 * setval() as Postgres: the sequence's next nextval() follows the new value (every worker's
 * reserved values are dropped through the generation in shared memory); with is_called its
 * currval() is the new value, and so is lastval() when nextval() last used that sequence.
 * After an error the values are dropped too (the statement may have failed after setval()
 * ran: it is not transactional), unless setval() itself refused.
 */
void
route_seq_setvals_done(struct route *r, bool ok)
{
	/* errors setval() itself raises before it changes anything */
	static const char *const unset[] = {
		ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE, ERRCODE_INVALID_TEXT_REPRESENTATION,
		ERRCODE_UNDEFINED_TABLE, ERRCODE_INSUFFICIENT_PRIVILEGE, ERRCODE_WRONG_OBJECT_TYPE,
		ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
	};

	for (uint32_t i = 0; i < NK_ARRAY_LEN(unset) && !ok; i++)
		if (route_streq(r->x.err.sqlstate, unset[i]))
			r->seq.nsetvals = 0;
	for (uint32_t i = 0; i < r->seq.nsetvals; i++) {
		const struct plan_setval *sv = &r->seq.setvals[i];

		shm_seq_bump(r->db, sv->seq_schema, sv->seq_name);
		shm_seq_announce();	/* (the other neki hosts drop theirs too) */
		if (ok && sv->is_called &&
		    !seq_last_set(r, sv->seq_schema, sv->seq_name, sv->value, false))
			route_client_log(r, LOG_LVL_WARNING, "out of memory: currval() of \"%s\" not "
				 "kept", sv->seq_name);
	}
	r->seq.nsetvals = 0;
}

/* route_seq_ddl: see route_int.h. */
bool
route_seq_ddl(const char *tag)
{
	static const char *const tags[] = { "AlterSeqStmt", "DropStmt", "TruncateStmt",
					    "AlterTableStmt", "RenameStmt", "AlterObjectSchemaStmt",
					    "DropOwnedStmt" };

	for (size_t i = 0; tag != NULL && i < NK_ARRAY_LEN(tags); i++)
		if (route_streq(tag, tags[i]))
			return true;
	return false;
}

/* ---- the needs of a plan ---- */

static bool
seq_need_add(struct route *r, struct seq_need *nd, uint32_t *nn, const char *schema,
	     const char *name, const char *home, int64_t cache, uint32_t n, struct nk_error *err)
{
	uint32_t i;

	for (i = 0; i < *nn; i++)
		if (route_streq(nd[i].schema, schema) && route_streq(nd[i].name, name))
			break;
	if (i == *nn) {
		nd[i] = (struct seq_need){ seq_alloc_get(seq_values, r->db, schema, name), schema,
					   name, home, cache, 0 };
		if (nd[i].e == NULL)
			return nk_error_oom(err);
		(*nn)++;
	}
	nd[i].n += n;
	return true;
}

/* Start the reservation of <nd> on its home shard (an RX_SEQ exec), or wait for the one
 * another session runs. */
static enum route_seq_rc
seq_reserve(struct route *r, const struct seq_need *nd, struct nk_error *err)
{
	char sql[ROUTE_SEQ_SQL_MAX];
	int64_t n = seq_refill_begin(seq_values, nd->e, nd->cache, nd->n);

	if (n == 0) {
		route_exec_reset(r);
		r->x.after = RX_AFTER_SEQ;
		r->x.combine = RX_SEQ;
		r->x.has_err = false;
		r->busy = true;
		r->seq.wait = nd->e;
		r->seq.next = seq_waiters;
		seq_waiters = r;
		return ROUTE_SEQ_ASYNC;
	}
	r->seq.fill = nd->e;
	if (!seq_reserve_sql(sql, sizeof(sql), nd->schema, nd->name, n)) {
		seq_fill_over(r);
		nk_error_set(err, ERRCODE_NAME_TOO_LONG,
			     "sequence name \"%s.%s\" is too long", nd->schema,
			     nd->name);
		return ROUTE_SEQ_FAILED;
	}
	if (!route_exec_setup(r, &nd->home, 1, sql, err)) {
		seq_fill_over(r);
		return ROUTE_SEQ_FAILED;
	}
	r->x.combine = RX_SEQ;
	r->x.after = RX_AFTER_SEQ;
	r->busy = true;
	if (!route_exec_start(r, err)) {
		seq_fill_over(r);
		return ROUTE_SEQ_FAILED;
	}
	return ROUTE_SEQ_ASYNC;
}

/* Take every value the plan needs (all sequences had enough: checked before). */
static void
seq_take_all(const struct plan *p, struct seq_need *nd, uint32_t nn, int64_t *values,
	     int64_t *nextvals)
{
	for (uint32_t f = 0; f < p->nfills; f++)
		for (uint32_t i = 0; i < nn; i++)
			if (route_streq(nd[i].schema, p->fills[f].seq_schema) &&
			    route_streq(nd[i].name, p->fills[f].seq_name))
				(void)!seq_take(nd[i].e, p->nrows, &values[(size_t)f * p->nrows]);
	for (uint32_t k = 0; k < p->nnextvals; k++)
		for (uint32_t i = 0; i < nn && p->nextvals[k].fn == PLAN_SEQ_NEXTVAL; i++)
			if (route_streq(nd[i].schema, p->nextvals[k].seq_schema) &&
			    route_streq(nd[i].name, p->nextvals[k].seq_name))
				(void)!seq_take(nd[i].e, 1, &nextvals[k]);
}

/* Extended protocol: the Parse every target gets carries <sql> instead of the client's. */
static bool
seq_ext_query(struct route *r, const char *sql)
{
	const uint8_t *m = r->x.ext_msg;
	size_t plen, qoff, qend, slen = strlen(sql), nlen;
	uint8_t *out;

	if (!route_ext_unnamed(r))	/* (a text of its own: Parse it unnamed) */
		return false;
	m = r->x.ext_msg;
	if (r->x.ext_len < 5 || m[0] != 'P')
		return false;
	plen = 1 + ((size_t)m[1] << 24 | (size_t)m[2] << 16 | (size_t)m[3] << 8 | m[4]);
	qoff = 5 + strnlen((const char *)m + 5, plen - 5) + 1;	/* after the name */
	if (qoff >= plen)
		return false;
	qend = qoff + strnlen((const char *)m + qoff, plen - qoff) + 1;
	nlen = r->x.ext_len - (qend - qoff) + slen + 1;
	if (qend > plen || (out = malloc(nlen)) == NULL)
		return false;
	memcpy(out, m, qoff);
	memcpy(out + qoff, sql, slen + 1);
	memcpy(out + qoff + slen + 1, m + qend, r->x.ext_len - qend);
	plen = plen - (qend - qoff) + slen + 1 - 1;
	out[1] = (uint8_t)(plen >> 24);
	out[2] = (uint8_t)(plen >> 16);
	out[3] = (uint8_t)(plen >> 8);
	out[4] = (uint8_t)plen;
	free(r->x.ext_msg);
	r->x.ext_msg = out;
	r->x.ext_len = nlen;
	return true;
}

enum route_seq_rc
route_seq_plan(struct route *r, const struct plan_input *in, struct plan *p, const char **sql,
	       struct nk_error *err)
{
	uint32_t nn = 0, nvals = p->nfills * p->nrows;
	struct seq_need *nd = rarena_alloc(r->arena, (p->nfills + p->nnextvals) * sizeof(*nd));
	int64_t *values = rarena_alloc(r->arena, (nvals + 1) * sizeof(int64_t));
	int64_t *nextvals = rarena_alloc(r->arena, (p->nnextvals + 1) * sizeof(int64_t));
	const char *text;

	if (seq_values == NULL)
		seq_values = seq_alloc_new(r->c.cfg->neki.sequence_batch);
	if (nd == NULL || values == NULL || nextvals == NULL || seq_values == NULL) {
		nk_error_oom(err);
		return ROUTE_SEQ_FAILED;
	}
	for (uint32_t f = 0; f < p->nfills; f++)
		if (!seq_need_add(r, nd, &nn, p->fills[f].seq_schema, p->fills[f].seq_name,
				  p->fills[f].home, p->fills[f].cache, p->nrows, err))
			return ROUTE_SEQ_FAILED;
	for (uint32_t k = 0; k < p->nnextvals; k++)
		if (p->nextvals[k].fn == PLAN_SEQ_NEXTVAL && !seq_need_add(r, nd, &nn, p->nextvals[k].seq_schema, p->nextvals[k].seq_name,
				  p->nextvals[k].home, p->nextvals[k].cache, 1, err))
			return ROUTE_SEQ_FAILED;
	for (uint32_t i = 0; i < nn; i++)	/* values reserved before a setval() go */
		seq_sync(nd[i].e, shm_seq_generation(r->db, nd[i].schema, nd[i].name));
	for (uint32_t i = 0; i < nn; i++)
		if (seq_available(nd[i].e) < nd[i].n) {
			r->seq.params = in->params;	/* (extended: the arena keeps them) */
			r->seq.nparams = in->nparams;
			return seq_reserve(r, &nd[i], err);
		}
	seq_take_all(p, nd, nn, values, nextvals);
	if (!seq_resolve(r, p, values, nextvals, err))
		return ROUTE_SEQ_FAILED;
	if (p->route_by_fill && !plan_fill_route(r->arena, in, p, values, err))
		return ROUTE_SEQ_FAILED;
	if ((text = plan_rewrite(r->arena, *sql, p, NULL, values, nextvals, err)) == NULL)
		return ROUTE_SEQ_FAILED;
	if (r->x.ext_exec && !seq_ext_query(r, text)) {
		nk_error_oom(err);
		return ROUTE_SEQ_FAILED;
	}
	*sql = text;
	return ROUTE_SEQ_READY;
}

/* route_seq_fill_values: see route_int.h. */
enum route_seq_rc
route_seq_fill_values(struct route *r, const struct plan_fill *const *fills, uint32_t nfills,
		      uint32_t n, int64_t *values, struct nk_error *err)
{
	struct seq_need nd[ROUTE_SEQ_FILLS_MAX];
	uint32_t nn = 0;

	if (seq_values == NULL)
		seq_values = seq_alloc_new(r->c.cfg->neki.sequence_batch);
	if (seq_values == NULL || nfills > ROUTE_SEQ_FILLS_MAX) {
		nk_error_oom(err);
		return ROUTE_SEQ_FAILED;
	}
	for (uint32_t f = 0; f < nfills; f++)
		if (!seq_need_add(r, nd, &nn, fills[f]->seq_schema, fills[f]->seq_name,
				  fills[f]->home, fills[f]->cache, n, err))
			return ROUTE_SEQ_FAILED;
	for (uint32_t i = 0; i < nn; i++) {	/* values reserved before a setval() go */
		seq_sync(nd[i].e, shm_seq_generation(r->db, nd[i].schema, nd[i].name));
		if (seq_available(nd[i].e) < nd[i].n)
			return seq_reserve(r, &nd[i], err);
	}
	for (uint32_t f = 0; f < nfills; f++) {
		struct seq_entry *e = seq_alloc_get(seq_values, r->db, fills[f]->seq_schema,
						    fills[f]->seq_name);

		/* (every sequence had enough: the takes cannot fail) */
		if (e == NULL || !seq_take(e, n, &values[(size_t)f * n]) ||
		    (n > 0 && !seq_last_set(r, fills[f]->seq_schema, fills[f]->seq_name,
					    values[(size_t)f * n + n - 1], true))) {
			nk_error_oom(err);
			return ROUTE_SEQ_FAILED;
		}
	}
	return ROUTE_SEQ_READY;
}

/* ---- the reservation's answer ---- */

static bool
seq_row(struct route *r, const struct sbuf_pkt *pkt)
{
	struct proto_datarow_msg m;
	struct proto_value v[3];
	char text[3][32];
	struct nk_error err;

	if (!proto_parse_data_row(pkt->data + 5, pkt->len - 5, &m, &err) ||
	    proto_datarow_values(&m, v, 3) != 3) {
		nk_error_set(&err, ERRCODE_PROTOCOL_VIOLATION, "invalid sequence reservation row");
	} else {
		for (int i = 0; i < 3; i++) {
			uint32_t n = v[i].p == NULL ? 0 : v[i].len < 31 ? v[i].len : 31;

			memcpy(text[i], v[i].p != NULL ? (const char *)v[i].p : "", n);
			text[i][n] = '\0';
		}
		if (r->seq.fill != NULL &&
		    seq_refill_add_run(r->seq.fill, text[0], text[1], text[2], &err))
			return true;
	}
	if (!r->x.has_err) {
		r->x.err = err;
		r->x.has_err = true;
	}
	return true;
}

bool
route_seq_msg(struct route *r, struct rshard *sh, struct link *l, const struct sbuf_pkt *pkt)
{
	if (pkt->type == 'D') {
		if (pkt->avail < pkt->len) {
			if (sbuf_hold(link_sbuf(l), pkt->len))
				return true;
			route_client_fatal(r, "server sent too big packet");
			return false;
		}
		seq_row(r, pkt);
	}
	sbuf_skip(link_sbuf(l), pkt->len);
	return true;
}

bool
route_seq_end(struct route *r)
{
	seq_unwait(r);
	seq_fill_over(r);
	return !r->x.has_err;
}
