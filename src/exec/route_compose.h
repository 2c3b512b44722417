/*
 * route_compose.h - a __neki call inside a larger statement (route_compose.c): the call runs
 * in the admin and its rows replace it in the text, in a simple Query or over the extended
 * protocol (route_ext_composed() then sends the composed text in place of the Parse's).
 */
#ifndef NEKI_EXEC_ROUTE_COMPOSE_H
#define NEKI_EXEC_ROUTE_COMPOSE_H

#include "neki/base.h"

struct nk_error;
struct route;
struct stmt;

/* Run the call of <st> (text <sql>) in the admin; its rows replace it, then the statement
 * runs again composed (route_compose_take). RSTEP_ASYNC, or RSTEP_STOP on an error. */
enum rstep route_compose_start(struct route *r, const struct stmt *st, const char *sql);
/*
 * The composed text waiting to be routed in place of the statement (owned by the caller),
 * or NULL; over the extended protocol a call that failed leaves NULL with <*failed> set and
 * its error in <err>.
 */
char *route_compose_take(struct route *r, bool *failed, struct nk_error *err);
void route_compose_free(struct route *r);
/* Does <sql> (a statement the router accepted) name a __neki function outside its quotes and
 * comments? (The store guard refuses any other use of the schema.) */
bool route_compose_names_call(const char *sql);

/*
 * The messages of the running Execute (route_ext.c) again, with the composed text <sql> in
 * the Parse (unnamed, normalised again at planning). False on no memory.
 */
NK_MUSTCHECK bool route_ext_composed(struct route *r, const char *sql);

#endif /* NEKI_EXEC_ROUTE_COMPOSE_H */
