/*
 * route_tx.c - a routed session's transactions: BEGIN / COMMIT / ROLLBACK as the router runs
 * them (on every shard the transaction touched, COMMIT in uid order), and the implicit
 * transaction of a Query or of an extended batch. Entry points: route_tx(), route_tx_end(),
 * route_implicit_begin(), route_implicit_end(), route_in_block().
 */
#include "neki/base.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "neki/log.h"
#include "neki/pktbuf.h"
#include "neki/proto.h"
#include "route_int.h"
#include "route_2pc.h"
#include "route_loop.h"
#include "route_portal.h"
#include "route_sets.h"
#include "route_svp.h"

static int
route_uid_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* COMMIT or ROLLBACK on every shard the transaction touched (COMMIT in uid order). */
enum rstep
route_tx_end(struct route *r, bool commit, const char *tag)
{
	const char *uids[ROUTE_SHARDS_MAX];
	uint32_t n = route_tx_shards(r, uids);
	struct nk_error err;

	if (commit && r->tx == 'T' && route_2pc_wanted(r) && route_2pc_refused(r, &r->commit_err)) {
		r->commit_failed = true;	/* (answered when the ROLLBACK is done) */
		commit = false;
	}
	free(r->begin_sql);
	r->begin_sql = NULL;
	route_svp_end(r);
	route_portals_tx_end(r, commit && r->tx == 'T');	/* its portals end with it */
	if (n == 0) {
		(void)route_2pc_forget_early(r);	/* (no exec: nothing to roll back) */
		route_sets_end(r, commit, true);
		r->tx = 'I';
		return tag[0] == '\0' || route_reply_tag(r, tag) ? RSTEP_DONE : RSTEP_STOP;
	}
	qsort(uids, n, sizeof(uids[0]), route_uid_cmp);
	if (commit && r->tx == 'T' && route_2pc_wanted(r))
		return route_2pc_commit(r, uids, n, tag);
	if (!route_tx_end_setup(r, uids, n, commit, tag, &err) ||
	    (!commit && !route_2pc_forget_early(r) && (nk_error_oom(&err), true)))
		return route_fail(r, &err);
	return route_exec_run(r);
}

/* route_tx_end_setup: see route_loop.h. */
bool
route_tx_end_setup(struct route *r, const char *const *uids, uint32_t n, bool commit,
		   const char *tag, struct nk_error *err)
{
	if (!route_exec_setup(r, uids, n, commit ? "COMMIT" : "ROLLBACK", err))
		return false;
	r->x.sequential = commit;
	r->x.combine = RX_QUIET;
	r->x.after = commit ? RX_AFTER_COMMIT : RX_AFTER_ROLLBACK;
	route_strcpy(r->x.end_tag, sizeof(r->x.end_tag), tag);
	return true;
}

/* Open the Query's implicit transaction: BEGIN goes to each shard it touches. */
bool
route_implicit_begin(struct route *r)
{
	free(r->begin_sql);
	if ((r->begin_sql = strdup("BEGIN")) == NULL)
		return false;
	r->tx = 'T';
	r->implicit = true;
	return true;
}

/* route_implicit_end: see route_int.h. */
bool
route_implicit_end(struct route *r)
{
	r->implicit_end = true;
	if (route_tx_end(r, r->tx == 'T', "") == RSTEP_ASYNC)
		return true;
	for (uint32_t i = 0; i < r->nsh; i++)
		r->sh[i].in_tx = false;
	r->tx = 'I';
	return false;
}

/* route_in_block: see route_int.h (an extended-protocol batch's implicit transaction is
 * not a block, a simple Query's is: Postgres' IsTransactionBlock()). */
bool
route_in_block(const struct route *r)
{
	return r->tx != 'I' && !(r->implicit && r->x.ext_exec);
}

/* BEGIN in the Query's implicit transaction makes it a transaction block (as Postgres:
 * the statements before it are part of it). */
static enum rstep
route_tx_explicit(struct route *r, const char *sql)
{
	const char *uids[ROUTE_SHARDS_MAX];

	r->implicit = false;
	if (route_tx_shards(r, uids) == 0) {
		char *b = strdup(sql);

		if (b != NULL) {
			free(r->begin_sql);
			r->begin_sql = b;
		}
	}
	return route_reply_tag(r, strncasecmp(sql, "start", 5) == 0 ? "START TRANSACTION" :
			       "BEGIN") ? RSTEP_DONE : RSTEP_STOP;
}

/* BEGIN / START TRANSACTION, COMMIT / END, ROLLBACK, ... as the router runs them. */
enum rstep
route_tx(struct route *r, const struct stmt_tx *tx, const char *sql)
{
	bool commit = tx->kind == STMT_TX_COMMIT;

	if (tx->kind == STMT_TX_BEGIN && r->implicit)
		return route_tx_explicit(r, sql);
	if ((commit || tx->kind == STMT_TX_ROLLBACK) && r->implicit) {
		/* ends the implicit transaction, with Postgres's warning */
		r->implicit = false;
		if (!route_reply_notice(r, ERRCODE_NO_ACTIVE_SQL_TRANSACTION,
					"there is no transaction in progress"))
			return RSTEP_STOP;
		return route_tx_end(r, commit, commit ? "COMMIT" : "ROLLBACK");
	}
	switch (tx->kind) {
	case STMT_TX_BEGIN:
		if (r->tx != 'I') {
			if (!route_reply_notice(r, ERRCODE_ACTIVE_SQL_TRANSACTION,
						"there is already a transaction in "
						"progress"))
				return RSTEP_STOP;
		} else {
			free(r->begin_sql);
			r->begin_sql = strdup(sql);
			r->tx = 'T';
		}
		return route_reply_tag(r, strncasecmp(sql, "start", 5) == 0 ?
				       "START TRANSACTION" : "BEGIN") ? RSTEP_DONE : RSTEP_STOP;
	case STMT_TX_COMMIT:
	case STMT_TX_ROLLBACK:
		if (r->tx == 'I') {
			if (!route_reply_notice(r, ERRCODE_NO_ACTIVE_SQL_TRANSACTION,
						"there is no transaction in progress"))
				return RSTEP_STOP;
			return route_reply_tag(r, tx->kind == STMT_TX_COMMIT ? "COMMIT" :
					       "ROLLBACK") ? RSTEP_DONE : RSTEP_STOP;
		}
		if (tx->kind == STMT_TX_COMMIT && r->tx == 'T')
			return route_tx_end(r, true, "COMMIT");
		return route_tx_end(r, false, "ROLLBACK");
	case STMT_TX_SAVEPOINT:
	case STMT_TX_RELEASE:
	case STMT_TX_ROLLBACK_TO:
		return route_svp_stmt(r, tx);
	default:
		break;
	}
	{
		struct nk_error err;

		nk_error_nk013(&err, 23);
		return route_fail(r, &err);
	}
}
