/*
 * neki/plan_gsi.h - what a statement on the owner table of an enabled global secondary index
 * needs besides its own route (spec 6.2, 3.3; src/router/plan_gsi.c plans it, the executor's
 * src/exec/route_gsi.c runs it): the lookup rows an INSERT writes, the lookup rows a DELETE
 * removes, the lookup read that narrows a SELECT to the owner rows' shards.
 */
#ifndef NEKI_PLAN_GSI_H
#define NEKI_PLAN_GSI_H

#include "neki/base.h"

#include "neki/keyspace.h"
#include "neki/plan.h"

#define PLAN_GSI_LOOKUPS_MAX 4		/* GSIs one write maintains */

enum plan_gsi_kind {
	PLAN_GSI_READ = 1,	/* read the lookup first, then the owner's shards it names */
	PLAN_GSI_INSERT,	/* write the lookup rows first (constants), then the owner rows
				 * (an INSERT with its own RETURNING) */
	PLAN_GSI_INSERT_AFTER,	/* insert the owner rows RETURNING their lookup columns, then
				 * those lookup rows (any other INSERT) */
	PLAN_GSI_DELETE,	/* delete the owner rows RETURNING their lookup columns, then
				 * those lookup rows */
	PLAN_GSI_UPDATE,	/* lock the owner rows reading their lookup columns, update
				 * exactly those rows RETURNING the new ones, then move the
				 * lookup rows that changed */
	PLAN_GSI_COPY,		/* COPY FROM: each input row's lookup columns read as it
				 * passes, those lookup rows inserted after the owner rows */
};

/* INSERT_AFTER, DELETE, UPDATE, COPY: one GSI's lookup table and where its columns are in
 * the RETURNING list (COPY: the list of fields read from each row; the indexed columns
 * first). */
struct plan_gsi_lookup {
	const char *name;		/* the GSI */
	const char *table;		/* "schema"."table", quoted */
	const char **cols;		/* its columns, quoted */
	uint32_t *pos;			/* each one's position in the RETURNING list */
	uint32_t ncols, nindexed;
	bool ignore_null;
};

/* COPY: an input field the lookup rows are made of. */
struct plan_gsi_field {
	const char *column;		/* the owner's column (unquoted) */
	uint32_t field;			/* its number in each input row */
	uint32_t type_oid;		/* its type (0: unknown) */
};

struct plan_gsi {
	enum plan_gsi_kind kind;
	const char *name;		/* the (first) GSI, for EXPLAIN */
	const char **first;		/* READ: the lookup query; INSERT: the lookup INSERTs */
	uint32_t nfirst;
	const char **alongside;		/* INSERT_AFTER of one VALUES row whose lookup values
					 * are all given (plan_gsi_insert.c): each GSI's lookup
					 * INSERT over the statement's slots ($k: slot k - 1),
					 * run beside the statement when they route to one
					 * shard each and none is NULL; NULL: after it */
	uint32_t nalongside;
	const char *returning;		/* INSERT_AFTER, DELETE: "RETURNING ..." added to the
					 * statement */
	int32_t inserted_pos;		/* INSERT_AFTER with ON CONFLICT DO UPDATE: the returned
					 * column saying the row was inserted (not updated); -1 */
	const char *lock;		/* UPDATE: `SELECT ctid, <shard key>, <lookup columns>
					 * FROM t WHERE (cond) FOR UPDATE` */
	const char *update;		/* UPDATE: `UPDATE t SET ... FROM (VALUES `, then the
					 * executor's rows (ctid, shard key, row number) of the
					 * locked rows, then update_tail */
	const char *update_tail;	/* `) AS __neki_v(...) WHERE (cond) AND ctid = ... AND
					 * key = ... RETURNING __neki_v.__neki_n, <lookup columns>` */
	uint32_t nkey;			/* UPDATE: the shard-key columns, after the ctid (or the
					 * row number) in both lists */
	struct plan_gsi_lookup *lookups;	/* INSERT_AFTER, DELETE, UPDATE, COPY: one per
						 * GSI */
	uint32_t nlookups;
	const struct plan_gsi_field *fields;	/* COPY: the fields read from each row */
	uint32_t nfields;
	bool client_returning;		/* DELETE: the statement has its own RETURNING (104) */
	struct plan_key owner;		/* READ: how an owner key routes (group, index, type) */
	bool unique;			/* READ: through a unique GSI (else its lookups are
					 * counted: plan_gsi_cost_observe()) */
	const char *cover;		/* READ of a unique GSI holding every column the
					 * statement reads: the statement on the lookup table,
					 * run instead (NULL: the lookup, then the owner) */
};

/*
 * READ: the shards of the owner key values <vals>[0..n) (text, as the lookup returned
 * them) in <img>, deduplicated into <uids> (room for <max>; in the order of <order>, the
 * plan's shards); their number, 0 when none routes (no owner row: any one shard answers).
 */
uint32_t plan_gsi_shards(const void *img, const struct plan_gsi *g,
			 const struct ks_text_ctx *tc, const char *const *vals, uint32_t n,
			 const char *const *order, uint32_t norder, const char **uids,
			 uint32_t max);

/* Would a read through non-unique GSI <name> of database <db> cost more than the scatter
 * it replaces: did its lookups lately lead to every shard (src/router/plan_gsi_cost.c)?
 * <count>: the read is planned to run (every so many of them read the lookup again, false);
 * false for an EXPLAIN's look. */
bool plan_gsi_cost_scatter(const char *db, const char *name, bool count);
/* A lookup through non-unique GSI <name> of <db> led to <hit> of the <of> shards its
 * statement was planned on. */
void plan_gsi_cost_observe(const char *db, const char *name, uint32_t hit, uint32_t of);

/* The text form of the binary-format value <data>/<len> of built-in type <oid> (bool,
 * integers, floats, numeric, text-like, uuid), malloc'd; NULL when the router cannot read
 * it (or no memory). What a bound value becomes in a text the router composes. */
char *plan_binary_value(uint32_t oid, const char *data, int32_t len);

#endif /* NEKI_PLAN_GSI_H */
