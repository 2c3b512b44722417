/*
 * route_sets.h - the entry points of src/exec/route_sets.c (its header comment says what it
 * does); the executor's shared types are route_int.h's.
 */
#ifndef NEKI_EXEC_ROUTE_SETS_H
#define NEKI_EXEC_ROUTE_SETS_H

#include "neki/base.h"

#include "route_int.h"

/* What one operation on the session's settings does (route_sets.c). */
enum rguc_kind {
	RGUC_SET = 0,	/* SET [SESSION] name, set_config(name, v, false): the session's value */
	RGUC_LOCAL,	/* SET LOCAL, SET TRANSACTION, set_config(name, v, true): to the end of
			 * the transaction */
	RGUC_RESET,	/* RESET name, SET name TO DEFAULT, set_config(name, NULL, false) */
	RGUC_RESET_ALL,	/* RESET ALL: every parameter but role */
};

/* One operation on the session's settings: what the session ran, replayed on links. */
struct rguc {
	enum rguc_kind kind;
	char *name;		/* owned: lowercased parameter name; NULL for RESET ALL */
	char *sql;		/* owned: a statement doing it on a link */
};

/* The exec set up for SET / RESET / SET TRANSACTION <st> (text <sql>): r->xsets gets what it
 * does once it succeeds. False on no memory. */
NK_MUSTCHECK bool route_sets_stmt(struct route *r, const struct stmt *st, const char *sql);
/* ... for the set_config() calls of plan <p>. */
NK_MUSTCHECK bool route_sets_calls(struct route *r, const struct plan *p);
/* A new exec is set up: nothing of the previous one's r->xsets is left. */
void route_sets_exec_clear(struct route *r);
/* The exec succeeded: r->xsets take effect on the model (at once outside a transaction,
 * pending until its end inside one) and on its targets' bookkeeping; a RESET of reported
 * parameters brings them back to the session's login values (the client is told, the
 * targets set). False when the client is gone (the session is closed). */
NK_MUSTCHECK bool route_sets_done(struct route *r);
/* DISCARD ALL on the reported parameters: back to the login values, the client told (false
 * when it is gone). */
NK_MUSTCHECK bool route_sets_defaults_all(struct route *r);
/* The exec failed: targets that ran r->xsets outside a transaction of their own did what the
 * model does not have (reset before their next use, and at release). */
void route_sets_failed(struct route *r);
/* The transaction (block, implicit, extended-protocol batch) ends: <commit> folds its
 * operations into the session's SETs, else they are dropped; <undone>: the shard
 * transactions of the links in it were rolled back (false: some may have committed). */
void route_sets_end(struct route *r, bool commit, bool undone);
/* DISCARD ALL: every setting forgotten; the links are reset before their next use. */
void route_sets_discard(struct route *r);
void route_sets_free(struct route *r);
/* Bring link <l> of <sh> to the session's SETs (one injected Query, swallowed): <fresh>, just
 * from the pool, gets the varcache diff and r->sets; otherwise (behind) RESET ROLE; RESET
 * ALL, every tracked value and r->sets. False when it could not be sent. */
NK_MUSTCHECK bool route_sets_replay(struct rshard *sh, struct link *l, bool fresh);
/* Run on <sh>'s link the operations of r->pend it lacks (after its BEGIN in a transaction). */
NK_MUSTCHECK bool route_sets_replay_pending(struct rshard *sh);
/* The same up to r->pend[<upto>] (a savepoint's mark); ROLLBACK TO a savepoint set after
 * <mark> operations drops the later ones (links in the transaction undo them themselves). */
NK_MUSTCHECK bool route_sets_replay_upto(struct rshard *sh, uint32_t upto);
void route_sets_rollback_to(struct route *r, uint32_t mark);
/* Give <sh>'s link <l> back to its pool: through a reset when it is dirty, closed when it
 * is not idle. */
void route_give_back(struct rshard *sh, struct link *l);

#endif /* NEKI_EXEC_ROUTE_SETS_H */
