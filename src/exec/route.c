/*
 * route.c - a routed session (sharded database): the statement loop. Each simple Query is
 * split into statements (parse_split); each statement is normalised, looked up in the
 * worker's plan cache (parsed and cached on a miss) and planned against the published
 * topology image, the catalog view and the session's __neki settings; then the plan runs:
 * the router answers PLAN_ROUTER itself (transactions, SET/SHOW, __neki.*, EXPLAIN
 * (NEKI_PLAN)), every other kind becomes an exec on shard links (route_exec.c). The router
 * owns ReadyForQuery and the transaction status the client sees. Entry points: (neki/exec.h)
 * route_session_start(), route_session_free(), route_on_pkt(); exec ends: route_end.c. */
#include "neki/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "neki/admin.h"
#include "neki/catalog_image.h"
#include "neki/log.h"
#include "neki/pktbuf.h"
#include "neki/plan_cache.h"
#include "neki/proto.h"
#include "neki/topology_image.h"
#include "neki/proc.h"
#include "neki/plan_explain.h"
#include "neki/plan_settings.h"
#include "route_int.h"
#include "route_2pc.h"
#include "route_client.h"
#include "route_compose.h"
#include "route_copy.h"
#include "route_cursor.h"
#include "route_ddl.h"
#include "route_exec.h"
#include "route_explain.h"
#include "route_ext.h"
#include "route_gsi.h"
#include "route_hold.h"
#include "route_insel.h"
#include "route_listen.h"
#include "route_loop.h"
#include "route_merge.h"
#include "route_pin.h"
#include "route_portal.h"
#include "route_prep.h"
#include "route_pull.h"
#include "route_seq.h"
#include "route_sets.h"
#include "route_sqltext.h"
#include "route_subq.h"
#include "route_svp.h"
#include "route_target.h"

#define ROUTE_CACHE_ENTRIES 1024

/* Flags whose statements need a merge step across shards (issue 7's src/merge plugs in). */
#define ROUTE_MERGE_FLAGS (STMT_F_AGG | STMT_F_ORDER | STMT_F_LIMIT | STMT_F_OFFSET | \
			   STMT_F_GROUP | STMT_F_HAVING | STMT_F_DISTINCT | STMT_F_UNION | \
			   STMT_F_INTERSECT | STMT_F_WINDOW | STMT_F_WITH_TIES | \
			   STMT_F_GROUPING_SETS)

static struct plan_cache *route_cache;	/* the worker's plan cache */

/* ---- replies ---- */

bool
route_send(struct route *r, struct pktbuf *pb)
{
	if (r->x.bind_owed && !route_bind_complete(r)) {
		pktbuf_cleanup(pb);
		return false;
	}
	if (route_client_send(r, pb))
		return true;
	route_client_close(r, "client connection failed", NULL);
	return false;
}

/* route_bind_complete: see route_int.h. */
bool
route_bind_complete(struct route *r)
{
	struct pktbuf pb;
	uint8_t mem[8];

	r->x.bind_owed = false;
	pktbuf_init_fixed(&pb, mem, sizeof(mem));
	pktbuf_write_bind_complete(&pb);
	return route_send(r, &pb);
}

/* Send <err> as ErrorResponse, with a shard's CONTEXT or a syntax error's position (a client
 * gone closes the session). */
void
route_send_err(struct route *r, const struct nk_error *err)
{
	struct proto_err_field f;
	char buf[24];
	bool extra = route_err_field(r, err, !r->x.ext_exec, &f, buf, sizeof(buf));
	struct pktbuf pb;

	pktbuf_init(&pb, 256);
	pktbuf_write_error_ex(&pb, 'E', err, &f, extra ? 1 : 0);
	if (!route_send(r, &pb))
		return;		/* the session is closed */
}

bool
route_reply_tag(struct route *r, const char *tag)
{
	struct pktbuf pb;
	uint8_t mem[128];	/* (a longer tag: sent from a buffer of its own) */

	if (strlen(tag) + 6 <= sizeof(mem))
		pktbuf_init_fixed(&pb, mem, sizeof(mem));
	else
		pktbuf_init(&pb, strlen(tag) + 6);
	pktbuf_write_command_complete(&pb, tag);
	return route_send(r, &pb);
}

bool
route_reply_notice(struct route *r, const char *sqlstate, const char *msg)
{
	struct nk_error e;
	struct pktbuf pb;

	nk_error_set(&e, sqlstate, "%s", msg);
	e.severity = NK_SEV_WARNING;
	pktbuf_init(&pb, 128);
	pktbuf_write_notice(&pb, &e);
	return route_send(r, &pb);
}

/* An error ends the statement: inside a transaction block it is aborted (as Postgres). */
enum rstep
route_fail(struct route *r, const struct nk_error *err)
{
	struct nk_error e = *err;

	e.severity = NK_SEV_ERROR;
	if (r->tx == 'T')
		r->tx = 'E';
	route_send_err(r, &e);
	return RSTEP_STOP;
}

/* route_reply_rows: see route_loop.h. */
bool
route_reply_rows(struct route *r, const char *name, uint32_t oid, const char *const *vals,
		 size_t n, const char *tag)
{
	struct proto_column col = { name, 0, 0, oid, -1, -1, 0 };
	struct pktbuf pb;

	pktbuf_init(&pb, 256);
	pktbuf_write_row_description(&pb, &col, 1);
	for (size_t i = 0; i < n; i++)
		pktbuf_write_data_row_text(&pb, &vals[i], 1);
	pktbuf_write_command_complete(&pb, tag);
	return route_send(r, &pb);
}

/* ---- the Query ---- */

/*
 * The Query ended. Its implicit transaction (several statements outside a transaction
 * block, or one write over several shards) is committed first, or rolled back after an
 * error, on every shard it touched; then ReadyForQuery.
 */
void
route_query_end(struct route *r)
{
	struct pktbuf pb;
	uint8_t mem[8];

	route_subq_reads_free(r);	/* (a statement that failed in a round ends here) */
	if (r->implicit && !r->implicit_end) {
		r->implicit_end = true;
		if (route_tx_end(r, r->tx == 'T', "") == RSTEP_ASYNC)
			return;
		if (route_client_closed(r))
			return;
		for (uint32_t i = 0; i < r->nsh; i++)
			r->sh[i].in_tx = false;	/* released dirty: closed by the pool */
		r->tx = 'I';
	}
	r->implicit = r->implicit_end = false;
	if (r->tx == 'I')	/* (an end not reached through COMMIT / ROLLBACK: undone) */
		route_sets_end(r, false, false);
	if (route_cat_wait(r, ROUTE_RESUME_QUERY_END))
		return;		/* DDL: ReadyForQuery once the catalog shows it */
	r->cancel_pending = false;
	r->query_start_us = 0;
	route_client_idle(r);	/* idle (in transaction) from now */
	if (r->tx == 'I')
		route_release_links(r);
	if (!route_listen_flush(r))
		return;
	pktbuf_init_fixed(&pb, mem, sizeof(mem));
	route_ready_write(r, &pb);
	if (!route_send(r, &pb))
		return;
	sbuf_set_cork(r->c.sb, SBUF_CORK_OFF);	/* the Query's answer, in one send (and
							 * what the session sends itself next,
							 * a __neki call's answer, at once) */
	r->busy = false;
	if (!r->in_cb)
		sbuf_continue(r->c.sb);
}

/* The uids of the shards the open transaction touched, in link order; returns how many. */
uint32_t
route_tx_shards(const struct route *r, const char **uids)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < r->nsh; i++)
		if (r->sh[i].in_tx)
			uids[n++] = r->sh[i].uid;
	return n;
}

/* One shard the open transaction touched (with <data>: where it ran more than SET and
 * SHOW, what __neki.tx_mode single counts); NULL when none. */
static const char *
route_tx_shard(const struct route *r, bool data)
{
	for (uint32_t i = 0; i < r->nsh; i++)
		if (r->sh[i].in_tx && (r->sh[i].tx_data || !data))
			return r->sh[i].uid;
	return NULL;
}

/* route_any_shard: see route_int.h. */
const char *
route_any_shard(struct route *r, const void *img)
{
	const char *uid = route_tx_shard(r, false);

	return uid != NULL ? uid : topo_image_group_shard(img, topo_image_authoritative(img), 0);
}

/* route_keep_sql: see route_int.h (the buffer is reused: a statement per exec). */
bool
route_keep_sql(struct route *r, const char *sql)
{
	size_t n = strlen(sql) + 1;

	if (n > r->x.stmt_sql_cap) {
		char *p = realloc(r->x.stmt_sql, n);

		if (p == NULL)
			return false;
		r->x.stmt_sql = p;
		r->x.stmt_sql_cap = n;
	}
	memmove(r->x.stmt_sql, sql, n);	/* (<sql> may be r->x.stmt_sql itself) */
	return true;
}

/* Set up an exec on <uids>[0..n) running <sql> (route_int.h). */
bool
route_exec_setup(struct route *r, const char *const *uids, uint32_t n, const char *sql,
		 struct nk_error *err)
{
	route_exec_reset(r);
	r->x.shards_used = true;
	if (!route_keep_sql(r, sql))
		return nk_error_oom(err);
	r->x.tg_mask = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct rshard *sh = route_shard(r, uids[i], err);

		if (sh == NULL)
			return false;
		r->x.tg[r->x.ntg++] = (uint32_t)(sh - r->sh);
		r->x.tg_mask |= 1u << (sh - r->sh);
	}
	r->x.sequential = false;
	r->x.ddl.all_shards = r->x.ddl.seq = r->settings_exec = r->exec_reads = false;
	r->x.pull.final = false;
	route_sets_exec_clear(r);
	r->x.combine = n == 1 ? RX_PASS : RX_SUM;
	r->x.after = RX_AFTER_STMT;
	r->x.end_tag[0] = '\0';
	return true;
}

/*
 * A Query, batch exec or round of <r> starts running: query_timeout counts from the first of
 * them, transaction_timeout from the first of the client's transaction.
 */
void
route_set_busy(struct route *r)
{
	uint64_t now = nk_now_us();

	r->busy = true;
	if (r->query_start_us == 0)
		r->query_start_us = now;
	if (r->stats_start_us == 0)
		r->stats_start_us = now;
	if (r->xact_start_us == 0)
		r->xact_start_us = now;
}

/* ReadyForQuery with the client's transaction status into <pb>: a query ends (and, at 'I',
 * a transaction) for SHOW STATS, as a server's ReadyForQuery does on pass-through. */
void
route_ready_write(struct route *r, struct pktbuf *pb)
{
	struct shm_stats *st = r->c.stats;
	uint64_t now = nk_now_us();

	st->total_query_count++;	/* (the router's own answers: no time counted) */
	if (r->stats_start_us != 0)
		st->total_query_time += now - r->stats_start_us;
	r->stats_start_us = 0;
	if (r->tx == 'I' && r->xact_start_us != 0) {
		st->total_xact_count++;
		st->total_xact_time += now - r->xact_start_us;
	}
	if (r->tx == 'I')
		r->xact_start_us = 0;
	pktbuf_write_ready_for_query(pb, r->tx);
}

enum rstep
route_exec_run(struct route *r)
{
	struct nk_error err;

	route_set_busy(r);
	if (!route_exec_start(r, &err))
		return route_fail(r, &err);
	return RSTEP_ASYNC;
}

/* ---- SET / SHOW / __neki ---- */

/* Ordinary SET / RESET / SHOW: run on the transaction's shards or one shard (which joins the
 * transaction: the SET is undone there if it rolls back); what it did is remembered when it
 * succeeds (route_sets.c). */
static enum rstep
route_set(struct route *r, const struct plan *p, const char *sql, const void *img)
{
	const char *uids[ROUTE_SHARDS_MAX];
	uint32_t n = route_tx_shards(r, uids);
	struct nk_error err;

	if (n == 0)
		uids[n++] = p->nshards > 0 ? p->shards[0] : route_any_shard(r, img);
	if (!route_exec_setup(r, uids, n, sql, &err))
		return route_fail(r, &err);
	r->x.combine = n == 1 ? RX_PASS : RX_FIRST;
	r->settings_exec = true;	/* (not data: __neki.tx_mode single) */
	if (p->action == PLAN_ACT_SET && !route_sets_stmt(r, p->stmt, sql)) {
		nk_error_oom(&err);
		return route_fail(r, &err);
	}
	return route_exec_run(r);
}

static enum rstep
route_neki(struct route *r, const struct plan *p, const void *img)
{
	const struct stmt_set *set = p->stmt->set;
	struct plan_session probe = r->ps;
	struct nk_error err;

	if (p->action == PLAN_ACT_NEKI_SHOW) {
		const char *v = p->show_value != NULL ? p->show_value : "";

		return route_reply_rows(r, set->name, ROUTE_OID_TEXT, &v, 1, "SHOW") ?
		       RSTEP_DONE : RSTEP_STOP;
	}
	if (!plan_neki_apply(&probe, set->name,
			     set->kind == STMT_SET_VALUE ? set->value : NULL, &err))
		return route_fail(r, &err);
	if (probe.tx_mode == PLAN_TX_ATOMIC && r->ps.tx_mode != PLAN_TX_ATOMIC)
		return route_2pc_check(r, img);	/* the shards first */
	r->ps = probe;
	return route_reply_tag(r, set->kind == STMT_SET_RESET ? "RESET" : "SET") ?
	       RSTEP_DONE : RSTEP_STOP;
}

/*
 * DISCARD ALL (the session's SETs, prepared statements, sequence state and what its held
 * links hold: UNLISTEN *, every advisory lock; not inside a transaction block, as Postgres)
 * and DISCARD SEQUENCES; other forms are refused.
 */
static enum rstep
route_discard(struct route *r, const char *sql)
{
	bool all = strncasecmp(sql, "discard all", 11) == 0;
	struct nk_error err;

	if (!all && strncasecmp(sql, "discard sequences", 17) != 0) {
		nk_error_set(&err, ERRCODE_FEATURE_NOT_SUPPORTED,
			     "DiscardStmt is not supported on a sharded database");
		return route_fail(r, &err);
	}
	route_seq_discard(r);
	if (!all)
		return route_reply_tag(r, "DISCARD SEQUENCES") ? RSTEP_DONE : RSTEP_STOP;
	if (r->tx != 'I' || r->implicit) {
		nk_error_set(&err, ERRCODE_ACTIVE_SQL_TRANSACTION,
			     "DISCARD ALL cannot run inside a transaction block");
		return route_fail(r, &err);
	}
	route_sets_discard(r);
	if (!route_sets_defaults_all(r))
		return RSTEP_STOP;
	route_prep_free(r);
	route_ext_drop_stmts(r);
	route_portals_drop_all(r, true);	/* CLOSE ALL: WITH HOLD cursors too */
	if (route_pin_discard(r, &err))
		return route_exec_run(r);
	if (nk_error_is_set(&err))
		return route_fail(r, &err);
	return route_reply_tag(r, "DISCARD ALL") ? RSTEP_DONE : RSTEP_STOP;
}

/*
 * PREPARE / EXECUTE / DEALLOCATE (kept by the router: route_prep.c), LISTEN / UNLISTEN /
 * NOTIFY (the notify shard: route_listen.c), DISCARD.
 */
static enum rstep
route_session_stmt(struct route *r, const char *tag, const char *sql, const void *img)
{
	struct nk_error err;
	bool all;

	nk_error_clear(&err);
	if (r->x.ext_exec && route_streq(tag, "ExecuteStmt")) {
		nk_error_set(&err, ERRCODE_FEATURE_NOT_SUPPORTED,
			     "SQL-level EXECUTE needs the simple query protocol on "
			     "a sharded database");
		nk_error_hint(&err, "Use the extended protocol's own prepared statements.");
		return route_fail(r, &err);
	}
	if (route_streq(tag, "PrepareStmt"))
		return !route_prepare(r, sql, &err) ? route_fail(r, &err) :
		       route_reply_tag(r, "PREPARE") ? RSTEP_DONE : RSTEP_STOP;
	if (route_streq(tag, "ExecuteStmt")) {
		free(r->redo_sql);
		if ((r->redo_sql = route_execute_sql(r, sql, &err)) == NULL)
			return route_fail(r, &err);
		return RSTEP_REDO;
	}
	if (route_streq(tag, "DeallocateStmt"))
		return !route_deallocate(r, sql, &all, &err) ? route_fail(r, &err) :
		       route_reply_tag(r, all ? "DEALLOCATE ALL" : "DEALLOCATE") ? RSTEP_DONE :
		       RSTEP_STOP;
	if (route_streq(tag, "ListenStmt") || route_streq(tag, "UnlistenStmt") ||
	    route_streq(tag, "NotifyStmt")) {
		bool exec;

		if (!route_listen_stmt(r, tag, sql, img, &exec, &err))
			return route_fail(r, &err);
		if (exec)
			return route_exec_run(r);
		return route_reply_tag(r, "UNLISTEN") ? RSTEP_DONE : RSTEP_STOP;
	}
	if (route_streq(tag, "DiscardStmt"))
		return route_discard(r, sql);
	nk_error_set(&err, ERRCODE_FEATURE_NOT_SUPPORTED,
		     "%s is not supported on a sharded database", tag);
	return route_fail(r, &err);
}

static enum rstep
route_action(struct route *r, const struct plan *p, const char *sql, const void *img)
{
	struct nk_error err;
	struct pktbuf pb;

	switch (p->action) {
	case PLAN_ACT_EMPTY:
		pktbuf_init(&pb, 8);
		pktbuf_write_empty_query(&pb);
		return route_send(r, &pb) ? RSTEP_DONE : RSTEP_STOP;
	case PLAN_ACT_TX:
		return route_tx(r, p->stmt->tx, sql);
	case PLAN_ACT_SET:
	case PLAN_ACT_SHOW:
		return route_set(r, p, sql, img);
	case PLAN_ACT_NEKI_SET:
	case PLAN_ACT_NEKI_SHOW:
		return route_neki(r, p, img);
	case PLAN_ACT_EXPLAIN:
		return route_explain(r, p, sql);
	case PLAN_ACT_CURSOR:
		return route_cursor_stmt(r, p, sql);
	case PLAN_ACT_SESSION:
		if (p->stmt->tag != NULL)
			return route_session_stmt(r, p->stmt->tag, sql, img);
		/* FALLTHROUGH */
	default:
		nk_error_set(&err, ERRCODE_FEATURE_NOT_SUPPORTED,
			     "%s is not supported on a sharded database",
			     p->stmt->tag != NULL ? p->stmt->tag : "this statement");
		return route_fail(r, &err);
	}
}

/* ---- shard plans ---- */

/* A write over several shards outside a transaction block runs in an implicit transaction
 * (committed at the Query's end or at the extended protocol's Sync; an INSERT ... SELECT
 * each shard runs on its own rows, as its batch's last Execute with no batch transaction
 * open, is ended with that Execute): a failure on one shard rolls the others back, as on
 * one Postgres. In a Query or batch whose implicit transaction is open (r->tx 'T') the
 * write joins it. */
static bool
route_write_implicit(struct route *r, const struct plan *p)
{
	enum stmt_kind k = p->stmt->kind;
	bool insel = k == STMT_INSERT && (p->stmt->flags & STMT_F_FROM_SELECT);

	if (r->tx != 'I' || (k != STMT_INSERT && k != STMT_UPDATE && k != STMT_DELETE &&
			     k != STMT_MERGE))
		return true;
	if (p->op == PLAN_OP_INSERT_SPLIT ? p->nparts < 2 :
	    (p->kind != PLAN_SHARD_SET && p->kind != PLAN_SCATTER) || p->nshards < 2)
		return true;
	r->ext_implicit = r->x.ext_exec && insel;
	return route_implicit_begin(r);
}

/* INSERT split: each shard gets its rows; RETURNING rows come back in input order. */
static enum rstep
route_split(struct route *r, const struct plan *p, const char *sql)
{
	uint32_t want = p->stmt->insert->nrows;
	uint32_t *starts = rarena_alloc(r->arena, (size_t)want * sizeof(uint32_t));
	uint32_t *lens = rarena_alloc(r->arena, (size_t)want * sizeof(uint32_t));
	const char *uids[ROUTE_SHARDS_MAX];
	uint32_t nrows, n = p->nparts < ROUTE_SHARDS_MAX ? p->nparts : ROUTE_SHARDS_MAX;
	struct nk_error err;

	if (starts == NULL || lens == NULL) {
		nk_error_oom(&err);
		return route_fail(r, &err);
	}
	if (!route_values_rows(sql, starts, lens, want, &nrows) || nrows != want) {
		nk_error_set(&err, ERRCODE_FEATURE_NOT_SUPPORTED,
			     "this multi-row INSERT cannot be split across shards");
		return route_fail(r, &err);
	}
	for (uint32_t i = 0; i < n; i++)
		uids[i] = p->parts[i].shard;
	if (!route_exec_setup(r, uids, n, sql, &err))
		return route_fail(r, &err);
	free(r->x.split_shard);
	free(r->x.split_pos);
	r->x.split_shard = calloc(nrows, sizeof(uint32_t));
	r->x.split_pos = calloc(nrows, sizeof(uint32_t));
	if (r->x.split_shard == NULL || r->x.split_pos == NULL) {
		nk_error_oom(&err);
		return route_fail(r, &err);
	}
	r->x.split_n = nrows;
	if (p->nset_configs > 0 && !route_sets_calls(r, p)) {
		nk_error_oom(&err);
		return route_fail(r, &err);
	}
	for (uint32_t i = 0; i < n; i++) {
		struct rshard *sh = &r->sh[r->x.tg[i]];

		sh->sql = route_insert_part(sql, starts, lens, nrows, p->parts[i].rows,
					    p->parts[i].nrows);
		if (sh->sql == NULL || (r->x.ext_exec && !route_ext_part(r, sh))) {
			nk_error_oom(&err);
			return route_fail(r, &err);
		}
		for (uint32_t k = 0; k < p->parts[i].nrows; k++) {
			r->x.split_shard[p->parts[i].rows[k]] = i;
			r->x.split_pos[p->parts[i].rows[k]] = k;
		}
	}
	r->x.combine = RX_SPLIT;
	return route_exec_run(r);
}

/* route_shards: see route_loop.h. */
enum rstep
route_shards(struct route *r, const struct plan *p, const char *sql)
{
	struct nk_error err;
	bool merge;

	if (r->x.ext_exec && r->x.ext_max_rows > 0) {
		/* a portal fetched in parts lives in a transaction on its shards: outside a
		 * block, the batch's implicit one (committed at Sync, as Postgres) */
		if (r->tx == 'I' && route_stmt_returns_rows(p->stmt) && !route_implicit_begin(r)) {
			nk_error_oom(&err);
			return route_fail(r, &err);
		}
		if ((p->kind == PLAN_SHARD_SET || p->kind == PLAN_SCATTER) && p->nshards > 1 &&
		    route_stmt_returns_rows(p->stmt))	/* (no rows: the limit changes nothing) */
			return route_pull_portal(r, p, sql);
	}
	if (!route_write_implicit(r, p)) {
		nk_error_oom(&err);
		return route_fail(r, &err);
	}
	if (p->op == PLAN_OP_INSERT_SPLIT && p->nparts > 1)
		return route_split(r, p, sql);
	merge = (p->kind == PLAN_SHARD_SET || p->kind == PLAN_SCATTER) && p->nshards > 1 &&
		(p->merge & ROUTE_MERGE_FLAGS) != 0;
	if (!route_exec_setup(r, p->shards, p->nshards, sql, &err) ||
	    (merge && !route_merge_setup(r, sql, &err)))
		return route_fail(r, &err);
	r->exec_reads = route_2pc_reads(p->stmt);
	r->x.ddl.all_shards = p->kind == PLAN_ALL_SHARDS && p->stmt->kind == STMT_DDL;
	if (r->x.ddl.all_shards)
		route_ddl_target(r, p->stmt);
	r->x.ddl.seq = r->x.ddl.all_shards && route_seq_ddl(p->stmt->tag);
	if (p->stmt->kind == STMT_COPY && p->nshards > 1)
		route_copy_out_setup(r, p->stmt->copy);
	if (p->pin != PLAN_PIN_NONE && r->x.ntg == 1)	/* session advisory locks */
		route_pin_mark(&r->sh[r->x.tg[0]], p->pin);
	r->seq.setvals = p->setvals;
	r->seq.nsetvals = p->nsetvals;
	if (p->nset_configs > 0 && !route_sets_calls(r, p)) {
		nk_error_oom(&err);
		return route_fail(r, &err);
	}
	if (p->queue_usage && !route_listen_usage_notice(r))
		return RSTEP_STOP;
	if (p->kind == PLAN_ALL_SHARDS || p->kind == PLAN_EVERY_COPY) {
		r->x.sequential = true;
		r->x.combine = p->nshards == 1 ? RX_PASS : RX_FIRST;
		snprintf(r->x.end_tag, sizeof(r->x.end_tag), "%s",
			 p->kind == PLAN_EVERY_COPY ? "Committed" : "Applied");
	}
	return route_exec_run(r);
}

/* ---- one statement ---- */

static bool
route_is_tx_end(const struct plan *p)
{
	return p->kind == PLAN_ROUTER && p->action == PLAN_ACT_TX &&
	       (p->stmt->tx->kind == STMT_TX_COMMIT || p->stmt->tx->kind == STMT_TX_ROLLBACK ||
		p->stmt->tx->kind == STMT_TX_ROLLBACK_TO);
}

static enum rstep
route_dispatch(struct route *r, const struct plan *p, const char *sql, const void *img)
{
	struct nk_error err;

	if (r->tx == 'E' && !route_is_tx_end(p)) {
		nk_error_set(&err, ERRCODE_IN_FAILED_SQL_TRANSACTION,
			     "current transaction is aborted, commands ignored "
			     "until end of transaction block");
		return route_fail(r, &err);
	}
	if (p->kind == PLAN_ROUTER)
		return route_action(r, p, sql, img);
	if (p->stmt->kind == STMT_COPY && p->stmt->copy != NULL && p->stmt->copy->is_from)
		return route_copy_from(r, p, sql, img, &err) ? RSTEP_ASYNC : route_fail(r, &err);
	if (p->op == PLAN_OP_INSERT_SELECT && p->nset_configs > 0) {
		/* (its source runs in rounds the session's settings model does not follow) */
		nk_error_set(&err, ERRCODE_FEATURE_NOT_SUPPORTED,
			     "set_config() in an INSERT ... SELECT the router runs "
			     "across shards is not supported");
		nk_error_hint(&err, "Call set_config() in a statement of its own.");
		return route_fail(r, &err);
	}
	if (p->op == PLAN_OP_INSERT_SELECT)
		return route_insel_start(r, p, img, &err) ? RSTEP_ASYNC : route_fail(r, &err);
	return route_shards(r, p, sql);
}

/* EXPLAIN (NEKI_PLAN) of a statement whose part the router evaluates first: that part's
 * plan (route_subq_explain()), or <refusal>. */
static enum rstep
route_subq_explained(struct route *r, const struct stmt *st, const char *sql,
		     const struct parse_norm *norm, const struct plan_input *in,
		     const struct plan *p, const struct nk_error *refusal)
{
	char *text = route_subq_explain(r, st, sql, norm, in, p);

	if (text == NULL)
		return route_fail(r, refusal);
	return route_explain_reply(r, text, st->explain != NULL && !st->explain->format_text);
}

/* route_text_shard: see route_loop.h. */
bool
route_text_shard(struct route *r, const struct plan_input *in, const char *sql, char *uid)
{
	struct plan_unknown unknown = { NULL, NULL };
	struct plan_input sub = *in;
	struct parse_norm norm;
	const struct stmt *st;
	struct nk_error err;
	struct plan p;
	bool step = r->ps.gsi_step, ok;

	nk_error_clear(&err);
	if (!parse_normalize(r->arena, sql, &norm) ||
	    ((st = plan_cache_get(route_cache, &norm, r->ps.revision, in->cat->version)) == NULL &&
	     (st = plan_cache_put(route_cache, sql, &norm, r->ps.revision, in->cat->version,
				  &err)) == NULL) ||
	    st->kind != STMT_INSERT)
		return false;
	sub.params = NULL;
	sub.nparams = 0;
	sub.norm = &norm;
	sub.extended = sub.multi_statement = false;
	sub.sql = sql;
	sub.unknown = &unknown;
	r->ps.gsi_step = true;
	ok = plan_build_memo(r->arena, st, &sub, plan_cache_memo(route_cache), &p, &err) &&
	     unknown.table == NULL && p.kind == PLAN_SINGLE && p.nshards == 1 && p.gsi == NULL &&
	     p.nfills == 0 && p.nnextvals == 0 && p.nset_configs == 0 &&
	     (p.op != PLAN_OP_INSERT_SPLIT || p.nparts < 2) &&
	     strlen(p.shards[0]) < PLAN_SHARD_MAX;
	r->ps.gsi_step = step;
	if (ok)
		strcpy(uid, p.shards[0]);
	return ok;
}

static enum rstep
stmt_run(struct route *r, const char *sql, bool multi, const struct plan_param *params,
	 uint32_t nparams)
{
	struct shm_topo_ref ref;
	struct cat_view cv;
	struct plan_catalog pc;
	struct parse_norm norm;
	const struct stmt *st;
	struct plan p;
	struct nk_error err;
	enum rstep rc;
	bool cfailed, sub_simple = false, cover = false;
	char *composed = route_compose_take(r, &cfailed, &err);	/* (a call's rows in its place) */

	if (cfailed)
		return route_fail(r, &err);
	if (composed == NULL && r->x.subq != NULL)	/* (a subquery, or its statement again) */
		composed = route_subq_take(r, &sub_simple);
	if (composed == NULL && r->x.gsi != NULL)		/* (a step of a secondary index) */
		composed = route_gsi_take(r, &sub_simple, &cover);
	if (composed != NULL)
		sql = composed;
	if (composed != NULL && r->x.ext_exec && !route_ext_composed(r, composed)) {
		free(composed);
		return route_fail(r, (nk_error_oom(&err), &err));
	}
	nk_error_clear(&err);	/* the planner reads it (nk_error_is_set) */
	if (!shm_topo_pin(&ref)) {
		free(composed);
		nk_error_set(&err, ERRCODE_CONNECTION_EXCEPTION, "no data topology is published");
		return route_fail(r, &err);
	}
	cat_view_acquire(&cv, r->db);
	r->x.collate = route_db_collation(&cv);
	pc = (struct plan_catalog){ &cv, cat_view_column_type, cat_view_column_name,
				    cat_view_relkind, cv.version, cat_view_column,
				    cat_view_seq_cache, cat_view_inh_children, cat_view_view_base,
				    cat_view_table_at, cat_view_type_name, cat_view_is_aggregate,
				    cat_view_pk_column, route_merges_type,
				    cat_view_rewrites_insert };
	if (!r->x.ext_exec && !sub_simple)
		rarena_reset(r->arena);	/* (extended: holds the bound values already) */
	r->ps.in_transaction = r->tx != 'I' && !r->implicit;
	r->ps.revision = ref.revision;
	r->ps.gsi_step = route_gsi_capturing(r) || cover;
	r->ps.tx_shard = route_tx_shard(r, true);
	r->ps.lock_shard = route_pin_lock_shard(r);
	if (r->x.ext_exec && r->x.ext_norm != NULL)
		norm = *r->x.ext_norm;	/* a protocol statement: normalised at its Parse */
	if (!(r->x.ext_exec && r->x.ext_norm != NULL) && !parse_normalize(r->arena, sql, &norm)) {
		nk_error_oom(&err);
		rc = route_fail(r, &err);
	} else if ((st = plan_cache_get(route_cache, &norm, ref.revision, cv.version)) == NULL &&
		   (st = plan_cache_put(route_cache, sql, &norm, ref.revision, cv.version,
					&err)) == NULL) {
		rc = route_fail(r, &err);
	} else if (st->neki_fn != NULL) {
		rc = route_compose_start(r, st, sql);	/* (the admin runs the call) */
	} else {
		struct plan_unknown unknown = { NULL, NULL };
		struct plan_input in = { ref.data, &pc, &r->ps, params, nparams, &norm,
					 r->x.ext_exec, multi, sql, &unknown };

		enum route_seq_rc sq = ROUTE_SEQ_READY;
		bool planned;

		r->x.ms.stmt_norm = norm;
		r->x.ms.stmt_sql = r->x.ext_exec ? NULL : sql;
		if (r->x.ext_exec)
			r->xrows = route_stmt_returns_rows(st);
		planned = plan_build_memo(r->arena, st, &in, plan_cache_memo(route_cache), &p,
					  &err);
		if (unknown.table != NULL && route_hold_unknown(r, &unknown, planned ? NULL : &err))
			rc = RSTEP_WAIT;	/* (nothing sent: planned again once loaded) */
		else if (!planned && p.bad_param && r->x.bind_owed)
			rc = route_ext_bind_check(r, route_any_shard(r, ref.data), &err);
		else if (!planned && (p.materialize > 0 || p.broadcast > 0) &&
			 st->kind == STMT_EXPLAIN)
			rc = route_subq_explained(r, st, sql, &norm, &in, &p, &err);
		else if (!planned && (p.materialize > 0 || p.broadcast > 0))
			rc = route_subq_start(r, st, sql, &norm, &p, &in, &err);
		else if (!planned || ((p.nfills > 0 || p.nnextvals > 0) &&
				      (sq = route_seq_plan(r, &in, &p, &sql, &err)) ==
				      ROUTE_SEQ_FAILED))
			rc = route_fail(r, &err);
		else if (sq == ROUTE_SEQ_ASYNC)
			rc = RSTEP_ASYNC;
		else if (p.gsi == NULL || st->kind == STMT_EXPLAIN ||
			 !route_gsi_step(r, &p, &in, sql, &rc)) {
			if (p.gsi == NULL && r->x.gsi != NULL && !route_gsi_capturing(r))
				route_gsi_free(r);	/* (not the statement it was for) */
			rc = route_dispatch(r, &p, sql, ref.data);
		}
	}
	cat_view_release(&cv);
	shm_topo_unpin(&ref);
	free(composed);
	return rc;
}

/* Normalise, look up or parse, plan, run: all while the topology image is pinned. */
enum rstep
route_stmt(struct route *r, const char *sql, bool multi, const struct plan_param *params,
	   uint32_t nparams)
{
	enum rstep rc = stmt_run(r, sql, multi, params, nparams);

	if (r->x.subq != NULL)
		route_subq_settle(r, rc);
	if (r->x.gsi != NULL && rc != RSTEP_ASYNC && rc != RSTEP_WAIT)
		route_gsi_free(r);	/* (a step refused, or a statement it was not for) */
	return rc;
}

bool
route_analyse(struct route *r, const char *sql, struct route_stmt_info *info,
	      struct nk_error *err)
{
	struct parse_norm norm;
	uint64_t rev = shm_topo_revision();
	const struct stmt *st = NULL;
	struct cat_view cv;

	nk_error_clear(err);
	cat_view_acquire(&cv, r->db);
	rarena_reset(r->arena);
	if (!parse_normalize(r->arena, sql, &norm))
		nk_error_oom(err);
	else if ((st = plan_cache_get(route_cache, &norm, rev, cv.version)) == NULL)
		st = plan_cache_put(route_cache, sql, &norm, rev, cv.version, err);
	if (st != NULL && st->neki_fn != NULL && !admin_fn_exists(st->neki_fn) &&
	    !admin_fn_unknown(st->neki_fn, err))
		st = NULL;	/* (42883; a call of one is composed when the statement runs) */
	cat_view_release(&cv);
	if (info != NULL)
		info->norm = norm;
	if (info != NULL && st != NULL) {	/* (Postgres' transaction exits) */
		info->tx_exit = st->kind == STMT_TX &&
				(st->tx->kind == STMT_TX_COMMIT || st->tx->kind == STMT_TX_ROLLBACK ||
				 st->tx->kind == STMT_TX_ROLLBACK_TO ||
				 st->tx->kind == STMT_TX_PREPARE);
		info->rows = route_stmt_returns_rows(st);
	}
	return st != NULL;
}

bool
route_cat_wait(struct route *r, enum route_resume resume)
{
	struct timeval tv = { 0, 10000 };

	if (r->hold.cat_wait == 0)
		return false;
	if (shm_cat_served() >= r->hold.cat_wait || nk_now_us() >= r->hold.poll_deadline_us) {
		if (shm_cat_served() < r->hold.cat_wait)
			route_client_log(r, LOG_LVL_WARNING, "catalog refresh not served within %d s",
				 ROUTE_CAT_WAIT_US / 1000000);
		r->hold.cat_wait = 0;
		r->hold.cat_done_us = nk_now_us();
		if (r->x.ddl.notice)
			route_ddl_notice(r);
		return false;
	}
	r->hold.resume = resume;
	evtimer_add(r->hold.ev_poll, &tv);
	return true;
}

static void
route_poll_cb(evutil_socket_t fd, short what, void *arg)
{
	struct route *r = arg;
	enum route_resume resume = r->hold.resume;

	r->hold.resume = ROUTE_RESUME_NEXT;
	if (resume == ROUTE_RESUME_QUERY_END)
		route_query_end(r);
	else if (resume == ROUTE_RESUME_SYNC)
		route_ext_sync_resume(r);
	else if (resume == ROUTE_RESUME_EXEC)
		route_ext_exec_resume(r);
	else if (resume == ROUTE_RESUME_HOLD)
		route_hold_poll(r);
	else
		route_next(r);
}

/* Run the statements of the Query from r->cur on, until one goes async or fails. */
void
route_next(struct route *r)
{
	while (r->cur < r->nspans) {
		const struct parse_span *sp = &r->spans[r->cur];
		char *sql;
		enum rstep rc;

		if (route_cat_wait(r, ROUTE_RESUME_NEXT))
			return;
		if (r->tx == 'I' && r->nspans > 1 && !route_implicit_begin(r)) {
			route_client_fatal(r, "out of memory");
			return;
		}
		child_switch_topology();
		sql = strndup(r->query + sp->start, sp->len);
		if (sql == NULL) {
			route_client_fatal(r, "out of memory");
			return;
		}
		rc = route_stmt(r, sql, r->nspans > 1, NULL, 0);
		free(sql);
		if (rc == RSTEP_REDO) {		/* EXECUTE: its statement with the arguments */
			sql = r->redo_sql;
			r->redo_sql = NULL;
			rc = route_stmt(r, sql, r->nspans > 1, NULL, 0);
			free(sql);
			if (rc == RSTEP_REDO)	/* EXECUTE of an EXECUTE */
				rc = RSTEP_STOP;
		}
		if (rc == RSTEP_ASYNC || route_client_closed(r))
			return;
		if (rc == RSTEP_STOP)
			break;
		if (rc != RSTEP_WAIT)	/* (waits for the catalog, then runs again) */
			r->cur++;
	}
	route_query_end(r);
}

/* ---- client packets ---- */

static bool
route_on_query(struct route *r, const struct sbuf_pkt *pkt)
{
	const char *sql;
	struct nk_error err;

	if (pkt->avail < pkt->len) {
		if (sbuf_hold(r->c.sb, pkt->len))
			return true;
		route_client_fatal(r, "client sent too big packet");
		return false;
	}
	r->c.stats->total_received += pkt->len;
	if (!proto_parse_query(pkt->data + 5, pkt->len - 5, &sql, &err)) {
		err.severity = NK_SEV_FATAL;
		route_client_close(r, err.message, &err);
		return false;
	}
	free(r->query);
	r->query = strdup(sql);
	sbuf_skip(r->c.sb, pkt->len);
	if (r->query == NULL) {
		route_client_fatal(r, "out of memory");
		return false;
	}
	r->cancel_pending = false;
	r->query_start_us = 0;		/* a new query: its own clock */
	route_set_busy(r);
	r->in_cb = true;
	rarena_reset(r->query_arena);
	r->cur = 0;
	if (!route_query_split(r, &err)) {
		(void)route_fail(r, &err);
		route_query_end(r);
	} else if (r->nspans == 0) {
		struct pktbuf pb;

		pktbuf_init(&pb, 8);
		pktbuf_write_empty_query(&pb);
		if (route_send(r, &pb))
			route_query_end(r);
	} else {
		route_next(r);
	}
	r->in_cb = false;
	return !route_client_closed(r) && !r->busy;
}

bool
route_on_pkt(struct route *r, const struct sbuf_pkt *pkt)
{
	if (!r->hold.ready && !route_hold_ready(r))
		return false;	/* offered again once topology and catalog are loaded */
	/* What the router answers itself waits in the client's queue: it leaves with the
	 * shards' forwarded answer while an exec runs (route_exec.c), or at ReadyForQuery,
	 * Flush or CopyInResponse (or 8 kB at a time), as from Postgres's output buffer. */
	sbuf_set_cork(r->c.sb, SBUF_CORK_ON);
	if (r->x.copy != NULL)
		return route_copy_on_client(r, pkt);
	switch (pkt->type) {
	case 'Q':
		return route_on_query(r, pkt);
	case 'P':
	case 'B':
	case 'D':
	case 'E':
	case 'C':
	case 'H':
	case 'S':
		return route_on_ext(r, pkt);
	default:	/* CopyData / CopyDone / CopyFail outside COPY */
		sbuf_skip(r->c.sb, pkt->len);
		return true;
	}
}

/* ---- the session ---- */

struct route *
route_session_start(const struct exec_client *c)
{
	struct route *r;

	if (route_cache == NULL && (route_cache = plan_cache_new(ROUTE_CACHE_ENTRIES)) == NULL)
		return NULL;
	if ((r = calloc(1, sizeof(*r))) == NULL)
		return NULL;
	r->c = *c;
	r->tx = 'I';
	r->db = strdup(c->dbname);
	r->arena = rarena_new();
	r->query_arena = rarena_new();
	r->ev = event_new(c->base, -1, 0, route_finish_cb, r);
	r->hold.ev_poll = evtimer_new(c->base, route_poll_cb, r);
	if (r->db == NULL || r->arena == NULL || r->query_arena == NULL || r->ev == NULL ||
	    r->hold.ev_poll == NULL) {
		route_session_free(r);
		return NULL;
	}
	plan_session_init(&r->ps, r->db);
	if (c->db != NULL && c->db->read_target != CFG_SRV_PRIMARY)	/* [databases] target= */
		snprintf(r->ps.target, sizeof(r->ps.target), "%s",
			 c->db->read_target == CFG_SRV_REPLICA ? "replica" : "rdonly");
	r->sets_version = 1;
	return r;
}

bool
route_session_options(struct route *r, const uint8_t *opts, size_t len, struct nk_error *err)
{
	struct shm_topo_ref ref;
	const char *name, *value;
	size_t pos = 0;
	bool ok = true;

	if (len == 0)
		return true;
	if (!shm_topo_pin(&ref))
		return nk_error_set(err, ERRCODE_CONNECTION_EXCEPTION,
				    "no data topology is published");
	while (ok && (name = proto_pair_next(opts, len, &pos, &value)) != NULL)
		ok = plan_neki_apply_checked(&r->ps, ref.data, name, value, err);
	shm_topo_unpin(&ref);
	return ok && (r->ps.tx_mode != PLAN_TX_ATOMIC || route_2pc_options(r, err));
}

void
route_session_free(struct route *r)
{
	if (r == NULL)
		return;
	route_seq_free(r);
	route_insel_free(r);
	route_drop_links(r);
	route_listen_free(r);
	route_exec_reset(r);
	route_sets_free(r);
	route_ext_free(r);
	route_portals_free(r);
	route_prep_free(r);
	for (uint32_t i = 0; i < r->nsh; i++) {
		route_target_free(&r->sh[i]);
		spool_unref(r->sh[i].sp);
	}
	free(r->redo_sql);
	route_compose_free(r);
	route_subq_free(r);
	route_gsi_free(r);
	free(r->x.ext_msg);
	if (r->ev != NULL)
		event_free(r->ev);
	if (r->hold.ev_poll != NULL)
		event_free(r->hold.ev_poll);
	rarena_free(r->arena);
	rarena_free(r->query_arena);
	free(r->db);
	free(r->query);
	free(r->begin_sql);
	route_svp_end(r);
	route_2pc_free(r);
	free(r->x.stmt_sql);
	free(r->x.split_shard);
	free(r->x.split_pos);
	free(r);
}
