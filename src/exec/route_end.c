/*
 * route_end.c - a routed session: the end of an exec. Once every target of an exec has
 * answered (or failed), the results are combined (route_combine), the statement's follow-up
 * runs (COMMIT of an implicit transaction, sequence reservations, the bind check, ...) and
 * the statement loop goes on (route.c). Entry points: route_exec_finished(),
 * route_stmt_finish(), route_copy_done(), route_ext_implicit_end().
 */
#include "neki/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "neki/catalog_image.h"
#include "neki/log.h"
#include "neki/pktbuf.h"
#include "neki/proc.h"
#include "neki/proto.h"
#include "neki/shm_seq.h"
#include "route_int.h"
#include "route_2pc.h"
#include "route_client.h"
#include "route_copy.h"
#include "route_cursor.h"
#include "route_exec.h"
#include "route_explain.h"
#include "route_ext.h"
#include "route_insel.h"
#include "route_loop.h"
#include "route_merge.h"
#include "route_portal.h"
#include "route_pull.h"
#include "route_seq.h"
#include "route_sets.h"
#include "route_sqltext.h"
#include "route_state.h"
#include "route_subq.h"

/* An extended-protocol exec ended: the batch goes on (or skips to Sync after an error). */
static void
route_ext_done(struct route *r, bool ok)
{
	if (r->x.bind_owed && !route_bind_complete(r))	/* (an exec that sent nothing) */
		return;
	route_portal_ran(r, ok);
	r->x.ext_exec = false;
	r->x.ext_pst = NULL;
	r->x.ext_norm = NULL;
	r->x.ext_portal_describe = false;
	r->busy = false;
	r->cancel_pending = false;
	r->query_start_us = 0;
	route_client_idle(r);
	if (!ok) {
		r->ext_failed = true;
		if (r->tx == 'T')
			r->tx = 'E';
	}
	if (r->x.sync_pending && !route_ext_sync(r))
		return;
	if (!r->in_cb && !route_client_closed(r))
		sbuf_continue(r->c.sb);
}

/*
 * An extended-protocol statement that opened its own implicit transaction (INSERT ...
 * SELECT outside a block) ended: commit it on every shard it touched (uid order), or roll it
 * back after an error, before the batch goes on. True while that runs (route_stmt_end() is
 * called again when it ended, with the COMMIT's outcome).
 */
bool
route_ext_implicit_end(struct route *r, bool ok)
{
	if (!r->implicit_end) {
		r->implicit_end = true;
		r->ext_implicit_failed = !ok;
		route_strcpy(r->ext_tag, sizeof(r->ext_tag), r->last_tag);
		if (route_tx_end(r, ok && r->tx == 'T', "") == RSTEP_ASYNC)
			return true;
	}
	for (uint32_t i = 0; i < r->nsh; i++)
		r->sh[i].in_tx = false;
	r->implicit = r->implicit_end = r->ext_implicit = false;
	r->tx = 'I';
	route_strcpy(r->last_tag, sizeof(r->last_tag), r->ext_tag);	/* (its portal's) */
	return false;
}

/* The statement ended: next one of the Query, or the Query's end after an error. */
static void
route_stmt_end(struct route *r, bool ok)
{
	route_subq_reads_free(r);
	r->x.an.on = false;
	r->x.pull.portal = NULL;
	r->x.pull.op = RPULL_NONE;
	route_cursor_settle(r, ok);
	if (r->x.ext_exec) {
		if (r->ext_implicit && route_ext_implicit_end(r, ok))
			return;
		route_ext_done(r, ok && !r->ext_implicit_failed);
		r->ext_implicit_failed = false;
		return;
	}
	if (!ok || r->implicit_end) {
		route_query_end(r);
		return;
	}
	r->cur++;
	route_next(r);
}

/* The failed target of a sequential exec (its number in tg), or ntg. */
static uint32_t
route_failed_at(const struct route *r)
{
	for (uint32_t i = 0; i < r->x.ntg; i++)
		if (r->sh[r->x.tg[i]].failed)
			return i;
	return r->x.ntg;
}

/* The combined CommandComplete (and RX_SPLIT's rows in input order). */
static bool
route_combine(struct route *r)
{
	struct rshard *first = &r->sh[r->x.tg[0]];
	uint64_t total = 0;
	char tag[96];
	struct pktbuf pb;

	if (r->x.combine == RX_QUIET || r->x.combine == RX_PULL) {	/* the router's own tag */
		if (r->reply_tag[0] == '\0')	/* (DISCARD ALL's, if any) */
			return r->x.end_tag[0] == '\0' || route_reply_tag(r, r->x.end_tag);
		pktbuf_init(&pb, 64);
		if (r->reply_nodata)
			pktbuf_write_no_data(&pb);
		pktbuf_write_command_complete(&pb, r->reply_tag);
		return route_send(r, &pb);
	}
	if (r->x.combine == RX_PASS || r->x.combine == RX_MERGE)
		return true;
	pktbuf_init(&pb, 256);
	if (r->x.combine == RX_SPLIT) {
		for (uint32_t i = 0; i < r->x.split_n; i++) {
			struct rshard *sh = &r->sh[r->x.tg[r->x.split_shard[i]]];

			if (r->x.split_pos[i] < sh->nrows)
				pktbuf_put_bytes(&pb, sh->rows[r->x.split_pos[i]].msg,
						       sh->rows[r->x.split_pos[i]].len);
		}
	}
	for (uint32_t i = 0; i < r->x.ntg; i++)
		total += r->sh[r->x.tg[i]].count;
	if (r->x.combine == RX_FIRST)
		total = first->count;
	if (first->counted)
		snprintf(tag, sizeof(tag), "%s %llu", first->tag, (unsigned long long)total);
	else
		route_strcpy(tag, sizeof(tag), first->tag);
	pktbuf_write_command_complete(&pb, tag);
	return route_send(r, &pb);
}

static void
route_after_error(struct route *r)
{
	route_sets_failed(r);
	if (!r->x.err_forwarded) {
		if (r->x.sequential && r->x.after == RX_AFTER_STMT && r->x.ntg > 1)
			route_detail_shards(r, &r->x.err, r->x.end_tag, 0, route_failed_at(r));
		route_send_err(r, &r->x.err);
	}
	if (r->tx == 'T')
		r->tx = 'E';
	route_stmt_end(r, false);
}

/* A COMMIT failed on one shard: the later ones are rolled back, the client told which. */
static void
route_after_commit(struct route *r)
{
	uint32_t k = route_failed_at(r);
	const char *rest[ROUTE_SHARDS_MAX];
	uint32_t n = 0;
	struct nk_error e;

	r->commit_err = r->x.err;
	r->commit_failed = true;
	route_detail_shards(r, &r->commit_err, "The transaction was committed", 0, k);
	for (uint32_t i = k + 1; i < r->x.ntg; i++)
		rest[n++] = r->sh[r->x.tg[i]].uid;
	r->tx = 'I';
	if (n > 0 && route_exec_setup(r, rest, n, "ROLLBACK", &e)) {
		r->x.combine = RX_QUIET;
		r->x.after = RX_AFTER_ROLLBACK;
		if (route_exec_start(r, &e))
			return;
	}
	r->commit_failed = false;
	route_send_err(r, &r->commit_err);
	route_exec_reset(r);
	route_stmt_end(r, false);
}

/* COMMIT / ROLLBACK went through on the shards (or a COMMIT failed). */
static void
route_after_tx(struct route *r)
{
	bool failed = r->x.after == RX_AFTER_COMMIT && r->x.has_err;
	bool stop;

	/* the transaction's settings: kept when every shard committed; a failed COMMIT (some
	 * shards committed) and a ROLLBACK drop them */
	route_sets_end(r, r->x.after == RX_AFTER_COMMIT && !r->x.has_err, !failed);
	for (uint32_t i = 0; i < r->x.ntg; i++)
		r->sh[r->x.tg[i]].in_tx = false;
	if (failed) {
		route_after_commit(r);
		return;
	}
	r->tx = 'I';
	stop = r->commit_failed || r->x.has_err;
	if (r->commit_failed)
		route_send_err(r, &r->commit_err);
	else if (r->x.has_err)
		route_send_err(r, &r->x.err);
	else if (r->x.end_tag[0] != '\0' && !route_reply_tag(r, r->x.end_tag))
		return;
	r->commit_failed = false;
	route_exec_reset(r);
	route_stmt_end(r, !stop);
}

/* Sequence values were reserved (or another session's reservation ended): plan the
 * statement again; it takes them now. */
static void
route_after_seq(struct route *r)
{
	enum rstep rc;

	if (!route_seq_end(r)) {
		route_after_error(r);
		return;
	}
	route_exec_reset(r);
	if (!r->x.ext_exec) {
		route_next(r);
		return;
	}
	r->hold.fetch_off = true;	/* (planned with the catalog of its first plan) */
	rc = route_stmt(r, r->xportal != NULL ? r->xportal->query : "", false, r->seq.params,
			r->seq.nparams);
	r->hold.fetch_off = false;
	if (rc != RSTEP_ASYNC && !route_client_closed(r))
		route_ext_done(r, rc == RSTEP_DONE);
}

/* A shard bound the values the router refused (route_ext_bind_check()): its error answers the
 * Bind; if it took them, the router's error follows its BindComplete. */
static void
route_after_bind_check(struct route *r)
{
	struct nk_error e = *r->x.bind_err;

	free(r->x.bind_err);
	r->x.bind_err = NULL;
	if (r->x.has_err)
		route_after_error(r);
	else
		route_stmt_finish(r, NULL, &e);
}

void
route_exec_finished(struct route *r)
{
	if (route_client_closed(r))
		return;
	if (r->x.after == RX_AFTER_2PC) {
		route_2pc_finished(r);
		return;
	}
	if (r->x.insel != NULL) {		/* a round of INSERT ... SELECT, or its reservation */
		route_insel_next(r);
		return;
	}
	if (r->x.copy != NULL) {
		route_copy_finished(r);
		return;
	}
	if (r->seq.nsetvals > 0)
		route_seq_setvals_done(r, !r->x.has_err);
	if (r->x.ddl.seq) {	/* (also after a failure: some shards may have done it) */
		r->x.ddl.seq = false;
		shm_seq_bump_all();
	}
	if (r->x.after == RX_AFTER_SEQ) {
		route_after_seq(r);
		return;
	}
	if (r->x.after == RX_AFTER_COMMIT || r->x.after == RX_AFTER_ROLLBACK) {
		route_after_tx(r);
		return;
	}
	if (r->x.bind_err != NULL) {
		route_after_bind_check(r);
		return;
	}
	if (r->x.subq_capture && r->x.has_err) {
		(void)route_subq_finished(r);	/* (its error, or the refusal) */
		route_after_error(r);
		return;
	}
	if (r->x.has_err) {
		route_after_error(r);
		return;
	}
	if (r->x.pull.op != RPULL_NONE && route_pull_more(r) != RPULL_DONE) {
		if (r->x.has_err && !route_client_closed(r))
			route_after_error(r);	/* (otherwise a round runs, or the client waits) */
		return;
	}
	if (r->x.combine == RX_MERGE && route_merge_final(r))
		return;
	if (r->x.subq_capture) {		/* the subquery's rows: the statement again */
		if (!route_subq_finished(r))
			route_after_error(r);
		return;
	}
	if (r->x.an.on ? !route_analyze_reply(r) : !route_combine(r))
		return;
	if (!route_sets_done(r))	/* SET / RESET / set_config(): the model follows */
		return;
	if (r->x.ddl.all_shards) {
		r->x.ddl.notice = true;
		r->hold.cat_wait = shm_cat_request_refresh();
		r->hold.poll_deadline_us = nk_now_us() + ROUTE_CAT_WAIT_US;
	}
	route_exec_reset(r);
	route_stmt_end(r, true);
}

void
route_copy_done(struct route *r, const char *tag, const struct nk_error *err)
{
	route_stmt_finish(r, tag, err);
}

void
route_stmt_finish(struct route *r, const char *tag, const struct nk_error *err)
{
	route_exec_reset(r);
	if (err != NULL) {
		(void)route_fail(r, err);
		route_stmt_end(r, false);
	} else if (route_reply_tag(r, tag)) {
		route_stmt_end(r, true);
	}
}

void
route_finish_cb(evutil_socket_t fd, short what, void *arg)
{
	route_exec_finished(arg);
}
