/*
 * error.c - struct nk_error helpers and the NK013 "not implemented" catalog.
 *
 * The catalog is the one table of Neki's codes and their exact sentences
 * (NEKI-SPEC.md section 4.2). Messages read "not implemented: [<code>] <sentence>".
 * Codes 44 and 336 keep the typographic apostrophe (U+2019) the docs use.
 */
#include "neki/base.h"

#include "neki/error.h"

#include <stdio.h>
#include <string.h>

struct nk013_entry {
	int code;
	const char *sentence;
};

/* Sorted by code; nk_nk013_sentence() searches it by bisection. */
static const struct nk013_entry nk013_catalog[] = {
	{ 1, "SELECT INTO statements are unavailable." },
	{ 2, "Replication from a replica is unavailable." },
	{ 10, "Multi-column partitioning indexes are unavailable." },
	{ 11, "This shard index cannot route advisory locks." },
	{ 20, "This statement type is unavailable." },
	{ 21, "Reading an inheritance parent without ONLY is unavailable." },
	{ 22, "AND CHAIN is unavailable for this transaction command." },
	{ 23, "This transaction command is unavailable." },
	{ 24, "This transaction isolation level is unavailable." },
	{ 25, "This transaction option is unavailable." },
	{ 26, "Atomic transaction mode is unavailable." },
	{ 27, "This SET statement variant is unavailable." },
	{ 28, "SET FROM CURRENT is unavailable." },
	{ 29, "SET TRANSACTION SNAPSHOT is unavailable." },
	{ 30, "This statement cannot be analyzed with EXPLAIN neki_plan." },
	{ 31, "Data-modifying CTEs cannot be analyzed with EXPLAIN neki_plan." },
	{ 32, "This EXPLAIN option is unavailable." },
	{ 33, "This EXPLAIN format is unavailable." },
	{ 40, "COPY TO is unavailable for sharded tables." },
	{ 41, "File COPY is unavailable for sharded tables." },
	{ 42, "COPY TO is unavailable for reference tables." },
	{ 43, "File COPY is unavailable for reference tables." },
	{ 44, "COPY FROM cannot maintain this table\xe2\x80\x99""s secondary index." },
	{ 45, "COPY does not support a multi-column primary shard index." },
	{ 46, "COPY FROM cannot evaluate this reference-table default consistently." },
	{ 47, "COPY TO PROGRAM is unavailable." },
	{ 48, "COPY from a query is unavailable." },
	{ 49, "COPY of a SELECT result is unavailable." },
	{ 50, "COPY FROM with a WHERE clause is unavailable." },
	{ 51, "COPY FROM cannot evaluate this column default on the router." },
	{ 52, "This COPY option is unavailable for sharded COPY." },
	{ 53, "This input encoding is unavailable for sharded COPY." },
	{ 54, "COPY is unavailable in a multi-statement query." },
	{ 55, "COPY is unavailable in the extended query protocol." },
	{ 56, "COPY FROM a materialized view is unavailable." },
	{ 60, "A session cannot hold session advisory locks on multiple shards." },
	{ 61, "Mixing session and transaction advisory locks is unavailable." },
	{ 62, "Advisory locks are unavailable in this evaluation context." },
	{ 63, "This join type is unavailable." },
	{ 67, "Array-slice and multidimensional array assignment are unavailable." },
	{ 69, "Subqueries in VALUES are unavailable." },
	{ 80, "Composite FOREACH targets are unavailable in PL/pgSQL." },
	{ 81, "This FOREACH target type is unavailable in PL/pgSQL." },
	{ 82, "Nested and array-slice assignment targets are unavailable in PL/pgSQL." },
	{ 83, "Non-scalar assignment targets are unavailable in PL/pgSQL." },
	{ 84, "Record-field references in embedded SQL are unavailable in PL/pgSQL." },
	{ 85, "Composite INTO targets are unavailable in PL/pgSQL." },
	{ 86, "Record fields with varying runtime types are unavailable in PL/pgSQL." },
	{ 87, "Function configuration parameters are unavailable for router-side execution." },
	{ 88, "Polymorphic routines are unavailable for router-side execution." },
	{ 90, "This PL/pgSQL statement is unavailable." },
	{ 91, "EXIT to a block label is unavailable in PL/pgSQL." },
	{ 92, "A bare RAISE is unavailable in PL/pgSQL." },
	{ 93, "RAISE USING is unavailable in PL/pgSQL." },
	{ 94, "RETURN NEXT without an expression requires OUT parameters." },
	{ 95, "RETURN QUERY EXECUTE is unavailable in PL/pgSQL." },
	{ 100, "Subqueries are unavailable in this DML clause." },
	{ 101, "Per-row router-only expression evaluation is unavailable here." },
	{ 102, "This RETURNING expression extraction is unavailable." },
	{ 103, "This DML source join cannot be planned safely." },
	{ 104, "This mutation cannot maintain active secondary indexes." },
	{ 105, "This CTE execution shape is unavailable on the router." },
	{ 106, "This window-function shape is unavailable across shards." },
	{ 107, "Expression extraction is unavailable in this clause." },
	{ 108, "This subquery shape is unavailable in ORDER BY." },
	{ 109, "This quantified-subquery shape is unavailable." },
	{ 110, "This correlated-subquery shape cannot be decorrelated safely." },
	{ 111, "This lateral or range-function shape is unavailable." },
	{ 112, "This full outer join has no usable equality key." },
	{ 113, "This cross-shard join expression cannot be assigned to one input." },
	{ 114, "This secondary-index routing shape is unavailable." },
	{ 115, "Multiple routing-parameter values are unavailable." },
	{ 116, "This INSERT subquery shape is unavailable." },
	{ 117, "This INSERT SELECT shape is unavailable." },
	{ 118, "These INSERT values cannot be materialized on the router." },
	{ 119, "This ON CONFLICT shape is unavailable." },
	{ 120, "This column default cannot be materialized on the router." },
	{ 121, "This MERGE shape is unavailable." },
	{ 122, "This view cannot be routed safely." },
	{ 123, "This materialized view cannot be routed safely." },
	{ 124, "This set-operation shape is unavailable." },
	{ 125, "This grouping-set form is unavailable." },
	{ 126, "TABLESAMPLE is unavailable." },
	{ 127, "Explicit derived-table column names are unavailable." },
	{ 128, "WHERE CURRENT OF is unavailable for DML." },
	{ 129, "DISTINCT cannot safely evaluate this volatile record expression." },
	{ 130, "This combination of select-list subqueries is unavailable." },
	{ 131, "TRUNCATE RESTART IDENTITY with CASCADE is unavailable." },
	{ 132, "TRUNCATE RESTART IDENTITY cannot include descendant tables." },
	{ 133, "This whole-row reference is ambiguous to the SQL builder." },
	{ 135, "Aggregates over columns of an enclosing query are unavailable." },
	{ 136, "Correlated column references are unavailable in this clause." },
	{ 137, "Reading a sequence or index as a relation is unavailable." },
	{ 138, "FETCH FIRST WITH TIES is unavailable across shards." },
	{ 139, "Advisory locks are unavailable in this plan position." },
	{ 140, "Set-returning functions are unavailable in router-side ORDER BY." },
	{ 141, "INSERT OVERRIDING USER VALUE is unavailable." },
	{ 142, "Parameterized subscripts are unavailable in INSERT targets." },
	{ 143, "OLD and NEW references are unavailable in sharded INSERT ON CONFLICT RETURNING." },
	{ 144, "Router-only expressions are unavailable in sharded INSERT ON CONFLICT RETURNING." },
	{ 145, "Updating an index column is unavailable." },
	{ 146, "This volatile router-only WHERE expression is unavailable." },
	{ 147, "This volatile router-only UPDATE assignment is unavailable." },
	{ 149, "Window functions inside aggregates are unavailable." },
	{ 150, "This ORDER BY expression is unavailable for VALUES." },
	{ 151, "INTERSECT and EXCEPT subqueries are unavailable." },
	{ 152, "This subquery statement type is unavailable." },
	{ 153, "ARRAY subqueries are unavailable." },
	{ 200, "This built-in function is unavailable in the evaluation engine." },
	{ 202, "This built-in type input function is unavailable in the evaluation engine." },
	{ 203, "This type cast is unavailable in the evaluation engine." },
	{ 210, "User-defined functions are unavailable in the evaluation engine." },
	{ 211, "User-defined operators are unavailable in the evaluation engine." },
	{ 212, "User-defined aggregate transition functions are unavailable in the evaluation engine." },
	{ 213, "User-defined aggregate final functions are unavailable in the evaluation engine." },
	{ 214, "User-defined aggregate moving transition functions are unavailable in the evaluation engine." },
	{ 215, "User-defined aggregate moving inverse functions are unavailable in the evaluation engine." },
	{ 216, "User-defined aggregate moving final functions are unavailable in the evaluation engine." },
	{ 300, "Creating an operator class is unavailable." },
	{ 301, "Creating an operator family is unavailable." },
	{ 302, "Creating a text search configuration is unavailable." },
	{ 303, "Creating a text search dictionary is unavailable." },
	{ 304, "Event triggers are unavailable." },
	{ 305, "Rewrite rules are unavailable." },
	{ 306, "Large objects are unavailable." },
	{ 307, "Creating a procedural language is unavailable." },
	{ 308, "Creating a tablespace is unavailable." },
	{ 309, "Creating an access method is unavailable." },
	{ 310, "Creating a collation is unavailable." },
	{ 311, "Creating a conversion is unavailable." },
	{ 312, "Foreign data wrappers are unavailable." },
	{ 313, "Creating a foreign server is unavailable." },
	{ 314, "Foreign tables are unavailable." },
	{ 315, "User mappings are unavailable." },
	{ 316, "Creating a text search parser is unavailable." },
	{ 317, "Creating a text search template is unavailable." },
	{ 318, "Creating a transform is unavailable." },
	{ 319, "Changing composite-type attributes is unavailable." },
	{ 320, "Shared library loading is unavailable." },
	{ 321, "IMPORT FOREIGN SCHEMA is unavailable." },
	{ 323, "Per-column statistics overrides are unavailable." },
	{ 324, "Per-column foreign-table options are unavailable." },
	{ 325, "This function language is unavailable." },
	{ 326, "This procedure language is unavailable." },
	{ 327, "CREATE LANGUAGE with a handler is unavailable." },
	{ 328, "Renaming a domain constraint is unavailable." },
	{ 329, "ALTER DOMAIN is unavailable." },
	{ 330, "The IS_TEMPLATE database option is unavailable." },
	{ 331, "Database tablespace selection is unavailable." },
	{ 332, "This database locale is unavailable to the router." },
	{ 333, "Renaming an enum label used as a sharding key is unavailable." },
	{ 334, "Column storage selection is unavailable." },
	{ 335, "Column compression selection is unavailable." },
	{ 336, "Changing a routing column\xe2\x80\x99""s generated expression is unavailable." },
	{ 338, "Temporary tables, views and sequences are unavailable." },
};

void
nk_error_clear(struct nk_error *err)
{
	if (!err)
		return;
	/* (every string empty: cheaper than clearing its 2 kB, on every routed statement) */
	err->severity = 0;
	err->sqlstate[0] = '\0';
	err->code = 0;
	err->message[0] = err->detail[0] = err->hint[0] = err->where[0] = '\0';
}

bool
nk_error_is_set(const struct nk_error *err)
{
	return err && err->sqlstate[0] != '\0';
}

bool
nk_error_setv(struct nk_error *err, const char *sqlstate, const char *fmt, va_list ap)
{
	if (!err)
		return false;
	memset(err, 0, sizeof(*err));
	err->severity = NK_SEV_ERROR;
	snprintf(err->sqlstate, sizeof(err->sqlstate), "%s", sqlstate);
	vsnprintf(err->message, sizeof(err->message), fmt, ap);
	return false;
}

bool
nk_error_set(struct nk_error *err, const char *sqlstate, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	nk_error_setv(err, sqlstate, fmt, ap);
	va_end(ap);
	return false;
}

bool
nk_error_oom(struct nk_error *err)
{
	return nk_error_set(err, ERRCODE_OUT_OF_MEMORY, "out of memory");
}

void
nk_error_detail(struct nk_error *err, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return;
	va_start(ap, fmt);
	vsnprintf(err->detail, sizeof(err->detail), fmt, ap);
	va_end(ap);
}

void
nk_error_hint(struct nk_error *err, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return;
	va_start(ap, fmt);
	vsnprintf(err->hint, sizeof(err->hint), fmt, ap);
	va_end(ap);
}

const char *
nk_nk013_sentence(int code)
{
	size_t lo = 0, hi = NK_ARRAY_LEN(nk013_catalog);

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (nk013_catalog[mid].code == code)
			return nk013_catalog[mid].sentence;
		if (nk013_catalog[mid].code < code)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

bool
nk_error_nk013(struct nk_error *err, int code)
{
	const char *sentence = nk_nk013_sentence(code);

	if (!sentence)
		nk_panic(__FILE__, __LINE__, "unknown NK013 code %d", code);
	nk_error_set(err, NK_ERRCODE_NOT_IMPLEMENTED, "not implemented: [%d] %s", code, sentence);
	if (err)
		err->code = code;
	return false;
}

size_t
nk_nk013_count(void)
{
	return NK_ARRAY_LEN(nk013_catalog);
}

int
nk_nk013_code_at(size_t i)
{
	NK_ASSERT(i < NK_ARRAY_LEN(nk013_catalog));
	return nk013_catalog[i].code;
}
