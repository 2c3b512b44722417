/*
 * route_ext.h - the entry points of src/exec/route_ext.c (its header comment says what it
 * does); the executor's shared types are route_int.h's.
 */
#ifndef NEKI_EXEC_ROUTE_EXT_H
#define NEKI_EXEC_ROUTE_EXT_H

#include "neki/base.h"

#include "route_int.h"

/* A statement of the extended protocol (Parse), by client name. */
struct rstmt {
	struct rstmt *next;
	char *name, *query;		/* owned */
	uint8_t *oids;			/* owned: noids big-endian uint32 */
	uint16_t noids;
	bool tx_exit;			/* COMMIT / ROLLBACK: runs in an aborted transaction */
	bool rows;			/* it returns rows */
	struct prep_stmt *pst;		/* counted: a named one, kept prepared on the shard links
					 * (prepared.c); NULL: unnamed, or max_prepared_statements 0 */
	struct rnorm *norm;		/* counted: its normalisation */
};

/* What Parse needs to know of a statement (route_analyse()). */
struct route_stmt_info {
	bool tx_exit;		/* COMMIT, ROLLBACK [TO], PREPARE TRANSACTION: allowed in an
				 * aborted transaction */
	bool rows;		/* it returns rows (its description is refused there) */
	struct parse_norm norm;	/* its normalisation (in r->arena) */
};

/* A statement's normalisation, kept from its Parse (shared by the statement and its portals,
 * refcounted; the key, literals and their values in the same allocation). */
struct rnorm {
	int refs;
	struct parse_norm norm;
};
/* A copy of <n> in one allocation, one reference; NULL on no memory. Drop a reference. */
struct rnorm *route_norm_copy(const struct parse_norm *n);
void route_norm_unref(struct rnorm *n);

/* Normalise and analyse <sql> (cached; route.c): syntax errors at Parse; <info> may be NULL. */
NK_MUSTCHECK bool route_analyse(struct route *r, const char *sql,
				struct route_stmt_info *info, struct nk_error *err);
/* Plan <sql> with bound <params> and run it with r->x.ext_msg; false when the session closed. */
bool route_run_ext(struct route *r, const char *sql, const struct plan_param *params,
		   uint32_t nparams);
/* Send r->x.ext_msg (Parse + Describe S + Sync) to one shard holding the tables of <sql>. */
bool route_describe_stmt(struct route *r, const char *sql);

/* Parse / Bind / Describe / Execute / Close / Sync / Flush of a routed session. */
bool route_on_ext(struct route *r, const struct sbuf_pkt *pkt);
/* <sh>'s own messages for its text sh->sql (an INSERT split's part): r->x.ext_msg with its
 * Parse replaced; the parameters the part does not reference get a type (text, bytea for a
 * binary value) so the shard accepts the whole Bind. False on no memory. */
NK_MUSTCHECK bool route_ext_part(struct route *r, struct rshard *sh);
/* Make r->x.ext_msg run <sql>, the shard query of r->mspec (hidden columns in text, Describe P
 * for the merge) or with <final> its final combine query (text), with the portal's values. */
NK_MUSTCHECK bool route_ext_merge_msgs(struct route *r, const char *sql, bool final,
				       struct nk_error *err);
/* Make r->x.ext_msg start with the unnamed statement's Parse (when it binds a statement the
 * links keep: a part of its own, a rewritten text); false on no memory. */
NK_MUSTCHECK bool route_ext_unnamed(struct route *r);
/* The Sync that waited for an exec. */
bool route_ext_sync(struct route *r);
/* The shard query's result formats: the client's (<m>'s) for the visible columns of <spec>,
 * text for the hidden ones; false with <err> when they do not fit. */
/* The result formats of <mg>'s final combine query into Bind <pb>: binary where the client
 * reads a final value in binary (the merge passes those bytes on), text for the rest. False
 * on no memory. */
NK_MUSTCHECK bool route_merge_final_formats(struct pktbuf *pb, const struct merge *mg);
NK_MUSTCHECK bool route_merge_formats(struct pktbuf *pb, const struct proto_bind_msg *m,
				      const struct plan_merge *spec, struct nk_error *err);
/* Parameter types of a merge query <sql>: <x>'s (NULL: none); a parameter <sql> does not
 * reference and the client left untyped gets int8 for LIMIT/OFFSET of <spec>, bytea
 * (bound in binary in <m>) or text otherwise (Postgres refuses a type it cannot infer). */
void route_merge_oids(const struct plan_merge *spec, const struct rportal *x,
		      const struct proto_bind_msg *m, const char *sql, uint16_t n, uint32_t *o);
/* The Sync that waited for a catalog refresh (route_cat_wait()). */
void route_ext_sync_resume(struct route *r);
void route_ext_free(struct route *r);
/* The protocol-level statement <name> (one namespace with SQL-level PREPARE, as Postgres):
 * is there one, drop it (false when there was none), drop them all. */
bool route_ext_has_stmt(struct route *r, const char *name);
bool route_ext_drop_stmt(struct route *r, const char *name);
void route_ext_drop_stmts(struct route *r);

#endif /* NEKI_EXEC_ROUTE_EXT_H */
