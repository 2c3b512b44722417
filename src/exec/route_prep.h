/*
 * route_prep.h - the entry points of src/exec/route_prep.c (its header comment says what it
 * does); the executor's shared types are route_int.h's.
 */
#ifndef NEKI_EXEC_ROUTE_PREP_H
#define NEKI_EXEC_ROUTE_PREP_H

#include "neki/base.h"

#include "route_int.h"

/* A statement of SQL-level PREPARE (route_prep.c). */
struct rprep {
	struct rprep *next;
	char *name, *body;		/* owned */
	char **types;			/* owned: declared parameter types (text) */
	uint32_t ntypes, nparams;
};

/* PREPARE name [(types)] AS stmt: kept for the session (its syntax checked now). */
NK_MUSTCHECK bool route_prepare(struct route *r, const char *sql, struct nk_error *err);
/* EXECUTE name [(args)]: the statement's text with the arguments (malloc'd), NULL on error. */
char *route_execute_sql(struct route *r, const char *sql, struct nk_error *err);
/* DEALLOCATE [PREPARE] name | ALL (*all set for ALL). */
NK_MUSTCHECK bool route_deallocate(struct route *r, const char *sql, bool *all,
				   struct nk_error *err);
/* Is there a PREPAREd statement <name>? Drop it (false when there is none). */
bool route_prep_has(struct route *r, const char *name);
bool route_prep_drop(struct route *r, const char *name);
void route_prep_free(struct route *r);

#endif /* NEKI_EXEC_ROUTE_PREP_H */
