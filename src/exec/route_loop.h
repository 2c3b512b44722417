/*
 * route_loop.h - what the statement loop (route.c) and the end of an exec (route_end.c)
 * share; private to those two files (the rest of the executor uses route_int.h).
 */
#ifndef NEKI_EXEC_ROUTE_LOOP_H
#define NEKI_EXEC_ROUTE_LOOP_H

#include "neki/base.h"

#include <event2/util.h>

#include "route_int.h"

/* ---- route.c ---- */

#define ROUTE_OID_TEXT 25
#define ROUTE_OID_JSON 114

/* A one-column result: <name> of type <oid> (ROUTE_OID_*), rows <vals>[0..n), then <tag>;
 * false when the client is gone. */
bool route_reply_rows(struct route *r, const char *name, uint32_t oid, const char *const *vals,
		      size_t n, const char *tag);
/* Send <err> as ErrorResponse (a client gone closes the session). */
void route_send_err(struct route *r, const struct nk_error *err);
/* CommandComplete <tag>; false when the client is gone. */
bool route_reply_tag(struct route *r, const char *tag);
/* NoticeResponse <sqlstate> <msg>; false when the client is gone. */
bool route_reply_notice(struct route *r, const char *sqlstate, const char *msg);
/* The uids of the shards the open transaction touched, in link order; returns how many. */
uint32_t route_tx_shards(const struct route *r, const char **uids);
/* The Query ended: its implicit transaction ends first, then ReadyForQuery. */
void route_query_end(struct route *r);
/* Run plan <p> (text <sql>) on its shards: an exec set up and started (a merge, an INSERT
 * split, a portal fetched in parts as the plan says). */
enum rstep route_shards(struct route *r, const struct plan *p, const char *sql);
/* The shard INSERT <sql> (a step's, planned as one: r->ps.gsi_step) runs on alone, planned
 * as <in> says, into <uid> (PLAN_SHARD_MAX bytes); false when it goes to more than one, or
 * another plan (the router's steps, sequence values, a table the catalog lacks). */
bool route_text_shard(struct route *r, const struct plan_input *in, const char *sql,
		      char *uid);
/* One statement: normalise, look up or parse, plan, run. */
enum rstep route_stmt(struct route *r, const char *sql, bool multi,
		      const struct plan_param *params, uint32_t nparams);
/* Run the statements of the Query from r->cur on, until one goes async or fails. */
void route_next(struct route *r);

/* ---- route_tx.c ---- */

/* COMMIT (<commit>) or ROLLBACK on every shard the transaction touched; <tag> to answer. */
enum rstep route_tx_end(struct route *r, bool commit, const char *tag);
/* Set up that exec on <uids>[0..n) (uid order; COMMIT one shard after the other): false
 * with <err>. */
NK_MUSTCHECK bool route_tx_end_setup(struct route *r, const char *const *uids, uint32_t n,
				     bool commit, const char *tag, struct nk_error *err);
/* A transaction statement <tx> (text <sql>) as the router runs it. */
enum rstep route_tx(struct route *r, const struct stmt_tx *tx, const char *sql);

/* ---- route_end.c ---- */

/* An extended-protocol statement that opened its own implicit transaction ended (<ok>):
 * commit it on every shard it touched, or roll it back; true while that runs. */
bool route_ext_implicit_end(struct route *r, bool ok);
/* The deferred event of route_exec_finished() (arg: the route). */
void route_finish_cb(evutil_socket_t fd, short what, void *arg);

#endif /* NEKI_EXEC_ROUTE_LOOP_H */
