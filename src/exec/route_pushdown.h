/*
 * route_pushdown.h - what goes with a table the router reads first
 * (src/exec/route_pushdown.c): of the WHERE of the query level that reads it and of the ON
 * of its join, the AND-conjuncts that read nothing but that table's own columns; and the
 * columns the statement may read of it.
 */
#ifndef NEKI_EXEC_ROUTE_PUSHDOWN_H
#define NEKI_EXEC_ROUTE_PUSHDOWN_H

#include "neki/base.h"

#include "neki/parse.h"
#include "neki/plan.h"

/*
 * The conjuncts that may filter table <own>->rels[<ri>] (its name ending at <e> in <sql>)
 * before any join: those of the WHERE of the query level whose FROM list reads it (unless
 * the table is on the nullable side of an outer join: a WHERE there also drops the
 * NULL-extended rows), and those of the ON of the inner or LEFT join whose right operand it
 * is (they only decide which of its rows pair). Each reads only columns the catalog <cat>
 * finds in the table (unqualified, or qualified by its alias, or by its name when it has
 * none), constants, operators and immutable functions; no subquery, no other table's or
 * outer query's column, no volatile call. <cat> is <in>'s catalog, an unqualified table's
 * schema its session's (search_path). Written `(c1) AND (c2)` with bound values <params>
 * written in as typed constants (malloc'd), or NULL when there is none (a condition that is
 * an OR at its top has none; not a SELECT, UPDATE or DELETE; no memory). The statement keeps its whole WHERE
 * and ON: the conjuncts it copies hold for every row it keeps.
 */
char *route_pushdown_where(const char *sql, const struct stmt *own, uint32_t ri, const char *e,
			   const struct plan_input *in, const struct plan_param *params,
			   uint32_t nparams);

/*
 * The select list a read of table <own>->rels[<ri>] needs: the columns whose name occurs as
 * a word of <sql> (unqualified or qualified by anything: a superset of those the statement
 * reads), in the table's order, each quoted (malloc'd). NULL when every column is to be
 * read (`*`): all of them are named; a `*` may expand the table (a select list's, the
 * table's `alias.*`; not count(*), a multiplication, another table's `x.*`, EXISTS (SELECT
 * * ...)); the table's name or alias stands alone (a whole-row value, `row_to_json(o)`);
 * NATURAL or TABLE is written; the alias renames its columns; the catalog lacks the table;
 * no memory.
 */
char *route_pushdown_columns(const char *sql, const struct stmt *own, uint32_t ri,
			     const struct plan_input *in);

#endif /* NEKI_EXEC_ROUTE_PUSHDOWN_H */
