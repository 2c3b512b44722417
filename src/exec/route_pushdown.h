/*
 * route_pushdown.h - the filters that go with a table the router reads first
 * (src/exec/route_pushdown.c): of the WHERE of the query level that reads it, the
 * AND-conjuncts that read nothing but that table's own columns.
 */
#ifndef NEKI_EXEC_ROUTE_PUSHDOWN_H
#define NEKI_EXEC_ROUTE_PUSHDOWN_H

#include "neki/base.h"

#include "neki/parse.h"
#include "neki/plan.h"

/*
 * The conjuncts of the WHERE of the query level whose FROM list reads table
 * <own>->rels[<ri>] (its name ending at <e> in <sql>) that may filter that table's rows
 * before any join: each reads only columns the catalog <cat> finds in the table
 * (unqualified, or qualified by its alias, or by its name when it has none), constants,
 * operators and immutable functions; no subquery, no other table's or outer query's
 * column, no volatile call. <cat> is <in>'s catalog, an unqualified table's schema its
 * session's (search_path). Written `(c1) AND (c2)` with bound values <params> written in
 * as typed constants (malloc'd), or NULL when there is none, when the table is on the
 * nullable side of an outer join (a WHERE there also drops the NULL-extended rows), when
 * the WHERE holds an OR at its top or the statement is not a SELECT, or with no memory.
 * The statement keeps its whole WHERE: the conjuncts it copies hold for every row it keeps.
 */
char *route_pushdown_where(const char *sql, const struct stmt *own, uint32_t ri, const char *e,
			   const struct plan_input *in, const struct plan_param *params,
			   uint32_t nparams);

#endif /* NEKI_EXEC_ROUTE_PUSHDOWN_H */
