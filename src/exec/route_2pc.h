/*
 * route_2pc.h - __neki.tx_mode atomic (route_2pc.c): the two-phase commit of a transaction
 * that wrote on more than one shard, and the check SET runs before it takes the mode.
 */
#ifndef NEKI_EXEC_ROUTE_2PC_H
#define NEKI_EXEC_ROUTE_2PC_H

#include "neki/base.h"

#include "neki/parse.h"

struct route;
struct rshard;
enum rstep;

/* Does the COMMIT of the open transaction need the two-phase commit (atomic mode, more than
 * one shard ran something other than SET / SHOW)? */
bool route_2pc_wanted(const struct route *r);
/* Is <st> a plain read (a SELECT without INTO or a data-modifying WITH)? A shard that ran
 * only such statements is asked at the COMMIT whether it wrote (a function may have). */
bool route_2pc_reads(const struct stmt *st);
/* What Postgres cannot prepare and the router sees before any PREPARE: a cursor WITH HOLD
 * declared in the transaction. True with <err> (the transaction is then rolled back). */
bool route_2pc_refused(const struct route *r, struct nk_error *err);
/* Commit the open transaction atomically on its shards <uids>[0..n) (uid order), answering
 * <tag> ("" for an implicit transaction): PREPARE TRANSACTION on every participant but
 * the decision one, the decision row committed there, then COMMIT PREPARED. */
enum rstep route_2pc_commit(struct route *r, const char *const *uids, uint32_t n,
			    const char *tag);
/* The text to send to <sh> in place of <sql>, the statement that ends the implicit
 * transaction (a GSI's last step, route_gsi_last_step()): <sql>, then
 * PREPARE TRANSACTION in the same Query, when the transaction will commit atomically, <sh>
 * is new to it and the one other participant wrote (it decides; when the exec has two
 * shards, it is the other). Its COMMIT is then one round shorter: the decision, then
 * COMMIT PREPARED. NULL: send <sql> as it is (also on no memory). */
char *route_2pc_with_prepare(struct route *r, const struct rshard *sh, const char *sql);
/* The transaction rolls back, its ROLLBACK exec set up: a participant that was to prepare
 * with its statement and did (the statement beside it failed) gets ROLLBACK PREPARED
 * instead; one whose statement failed (its PREPARE with it) the ROLLBACK. False on no
 * memory. */
bool route_2pc_forget_early(struct route *r);
/* SET __neki.tx_mode = atomic: every shard of topology image <img> is checked first
 * (max_prepared_transactions above 0, the decision table there: created when missing). */
enum rstep route_2pc_check(struct route *r, const void *img);
/* The session's atomic mode came from its startup options: SET's check (prepared
 * transactions enabled) runs on the participants of its first COMMIT that needs the
 * two-phase commit, before anything is prepared. False with <err> (no memory). */
bool route_2pc_options(struct route *r, struct nk_error *err);
/* An exec of the protocol (r->x.after RX_AFTER_2PC) ended: the next step. */
void route_2pc_finished(struct route *r);
/* Before a statement is sent to <sh>: where a COMMIT PREPARED of this session failed (its
 * client got a WARNING), a wait for the recovery to finish it goes first (polling
 * pg_prepared_xacts, query_wait_timeout at most; its answer dropped). False when it
 * could not be sent. */
bool route_2pc_wait_send(struct route *r, struct rshard *sh);
/* The session ends. */
void route_2pc_free(struct route *r);

#endif /* NEKI_EXEC_ROUTE_2PC_H */
