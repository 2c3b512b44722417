/*
 * route_portal.h - the entry points of src/exec/route_portal.c (its header comment says what it
 * does); the executor's shared types are route_int.h's.
 */
#ifndef NEKI_EXEC_ROUTE_PORTAL_H
#define NEKI_EXEC_ROUTE_PORTAL_H

#include "neki/base.h"

#include "route_int.h"

/* Where a portal stands (route_portal.c). */
enum rportal_state {
	RPORTAL_BOUND = 0,	/* bound (Bind, DECLARE): not executed yet */
	RPORTAL_OPEN,		/* executed, suspended: more rows may come */
	RPORTAL_DONE,		/* ran to completion: an Execute gives no more rows */
};

/*
 * A portal of the session by client name: a Bind, or a cursor DECLAREd in SQL (Postgres
 * keeps both in one namespace). A portal whose rows one shard gives has a portal (or a
 * cursor) of its own on that shard's link, its "mirror" (route_portal_mirror()); one over
 * several shards is read by the router (pull, route_pull.c) from a mirror on each.
 */
struct rportal {
	struct rportal *next;
	char *name;			/* owned; "" is the unnamed portal */
	char *query;			/* owned: the statement's text */
	uint8_t *oids;			/* owned: its parameter types, noids big-endian uint32 */
	uint16_t noids;
	uint8_t *bind;			/* owned: its Bind with both names empty (its formats and
					 * values; DECLARE over the extended protocol: its Bind's);
					 * NULL: none */
	size_t bind_len;
	bool one_block;			/* name, query, oids and bind live in its own block */
	bool describe;			/* Describe P arrived: answered with the first Execute */
	bool bind_owed;			/* its Bind is not answered yet: the first shard that binds
					 * its values answers it (route_ext.c) */
	bool is_cursor;			/* DECLARE (else Bind) */
	bool hold, binary, scroll;	/* cursor options WITH HOLD, BINARY, SCROLL */
	bool tx_new;			/* created in the open transaction (ROLLBACK drops it) */
	uint32_t svp_gen;		/* route_svp_gen() when created (ROLLBACK TO drops it) */
	enum rportal_state state;
	bool rows;			/* DONE: its statement returns rows (Execute: "<tag> 0") */
	char tag[64];			/* DONE: its command tag without the row count */
	uint32_t mask;			/* bit i: r->sh[i] holds its mirror */
	bool lost;			/* a link holding a mirror broke: it cannot go on */
	struct rpull *pull;		/* owned: several shards: the router's side of it */
	struct prep_stmt *pst;		/* counted: its statement's (NULL: sent with Parse) */
	struct rnorm *norm;		/* counted: its statement's (NULL: a cursor's) */
};

/* The portal (or cursor) <name>; NULL when there is none. */
struct rportal *route_portal_find(struct route *r, const char *name);
/* A new portal <name> (not in the session's list yet); NULL on no memory. */
struct rportal *route_portal_new(const char *name);
/* A new portal of a Bind: <name>, a copy of <query> and of its <noids> parameter types,
 * and <rest>, the Bind after its two names; one allocation. NULL on no memory. */
struct rportal *route_portal_new_bind(const char *name, const char *query, const uint8_t *oids,
				      uint16_t noids, const uint8_t *rest, size_t rest_len);
/* Put <p> in the session's list; the unnamed portal replaces the one there was. */
void route_portal_add(struct route *r, struct rportal *p);
/* Take <p> out of the list and free it; <close>: close its mirrors on their links first. */
void route_portal_drop(struct route *r, struct rportal *p, bool close);
/* Free <p> (not in the list) with its router-side part. */
void route_portal_free(struct rportal *p);
/* The name of <p>'s mirror on its shards (the unnamed portal's is a name of its own, so
 * the router's own unnamed statements never replace it). */
const char *route_portal_mirror(const struct rportal *p);
/* The transaction ends: every portal goes but the WITH HOLD cursors (<commit>: also those
 * it declared); also outside a transaction at Sync. */
void route_portals_tx_end(struct route *r, bool commit);
/* DISCARD ALL / CLOSE ALL succeeded: every portal goes (<unpin>: links of WITH HOLD
 * cursors are closed). */
void route_portals_drop_all(struct route *r, bool unpin);
void route_portals_free(struct route *r);
/* The link of r->sh[<i>] broke: the portals it held a mirror of are lost. */
void route_portals_link_lost(struct route *r, uint32_t i);
/* 08006 for lost portal <p> in <err>; false. */
bool route_portal_lost(const struct rportal *p, struct nk_error *err);
/* <p>'s Bind read into <m> (which points into <p>: valid while <p> is); a portal without one
 * (NULL, a SQL cursor) reads as a Bind without values. */
NK_MUSTCHECK bool route_portal_bind_msg(const struct rportal *p, struct proto_bind_msg *m,
					struct nk_error *err);
/* Execute of a portal already executed, or of a cursor; false when the session closed. */
bool route_portal_execute(struct route *r, struct rportal *p, int32_t max_rows);
/* Describe P of a portal already executed (or a cursor): answered at once or by its shard. */
bool route_portal_describe(struct route *r, struct rportal *p);
/* The extended-protocol exec of r->xportal ended (<ok>): its state, its mirror. */
void route_portal_ran(struct route *r, bool ok);
/* Does the statement of <st> return rows (SELECT, RETURNING, FETCH, SHOW, EXPLAIN)? */
bool route_stmt_returns_rows(const struct stmt *st);

#endif /* NEKI_EXEC_ROUTE_PORTAL_H */
