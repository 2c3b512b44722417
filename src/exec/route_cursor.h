/*
 * route_cursor.h - the entry points of src/exec/route_cursor.c (its header comment says what it
 * does); the executor's shared types are route_int.h's.
 */
#ifndef NEKI_EXEC_ROUTE_CURSOR_H
#define NEKI_EXEC_ROUTE_CURSOR_H

#include "neki/base.h"

#include "route_int.h"

/* DECLARE / FETCH / MOVE / CLOSE planned as <p> (<sql> the statement's text). */
enum rstep route_cursor_stmt(struct route *r, const struct plan *p, const char *sql);
/* The statement ended (<ok>): a DECLAREd cursor is added, a CLOSEd one dropped. */
void route_cursor_settle(struct route *r, bool ok);

#endif /* NEKI_EXEC_ROUTE_CURSOR_H */
