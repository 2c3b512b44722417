/*
 * neki/parse.h - the router's statement model: what the planner needs to know about one SQL
 * statement, translated from the libpg_query parse tree (src/router/parse*.c). The
 * per-statement arena that owns it is neki/rarena.h, the literal normaliser of the simple
 * protocol neki/normalize.h, the parts that one kind of statement has (INSERT rows, MERGE's
 * inserts, transactions, SET, COPY, cursors, EXPLAIN) and the calls of the functions the
 * router manages neki/parse_kinds.h.
 *
 * Values in the model never hold literal text: a literal is a "slot" like a parameter.
 * Slots 0..nparams-1 are $1..$n; the literals found by parse_normalize() follow. So one model
 * serves every statement with the same normalised text, and routing reads the values of the
 * current execution (plan.h). Everything here is pure: no sockets, no shared state.
 */
#ifndef NEKI_PARSE_H
#define NEKI_PARSE_H

#include "neki/base.h"

#include "neki/error.h"
#include "neki/normalize.h"
#include "neki/parse_split.h"
#include "neki/rarena.h"

/* ---- the statement model ---- */

enum stmt_kind {
	STMT_EMPTY = 0,		/* only comments / semicolons */
	STMT_SELECT,
	STMT_INSERT,
	STMT_UPDATE,
	STMT_DELETE,
	STMT_MERGE,
	STMT_TX,		/* transaction control (stmt_tx) */
	STMT_SET,		/* SET / SET LOCAL (stmt_set) */
	STMT_RESET,		/* RESET name / RESET ALL */
	STMT_SHOW,
	STMT_COPY,
	STMT_EXPLAIN,
	STMT_DDL,		/* schema-changing: runs on every shard */
	STMT_MAINT,		/* VACUUM, ANALYZE, REINDEX, CLUSTER, CHECKPOINT: every shard */
	STMT_PRIV,		/* GRANT/REVOKE/COMMENT/SECURITY LABEL/publication DDL: every shard */
	STMT_SESSION,		/* PREPARE/EXECUTE/DEALLOCATE/DISCARD/LISTEN/NOTIFY/...: router */
	STMT_OTHER,		/* anything else (DO, CALL, LOCK, ...) */
	STMT_KIND_COUNT
};

/* Value of an expression position the router may need to read. */
enum stmt_vkind {
	STMT_V_EXPR = 0,	/* anything the router does not read (function call, column...) */
	STMT_V_SLOT,		/* a parameter or a normalised literal: slot */
	STMT_V_NULL,		/* NULL literal */
	STMT_V_DEFAULT,		/* DEFAULT in VALUES / SET */
	STMT_V_CONST,		/* a literal that was not normalised: text */
};

struct stmt_value {
	enum stmt_vkind kind;
	uint32_t slot;		/* SLOT: 0-based slot (parameter $n is slot n-1) */
	bool negate;		/* SLOT/CONST: a unary minus folded into the literal */
	bool is_param;		/* SLOT: a $n parameter (not a literal) */
	bool is_array;		/* SLOT: a whole-array parameter (= ANY($n)) */
	bool has_subquery;	/* EXPR: contains a sub-SELECT */
	bool is_subquery;	/* EXPR: is a sub-SELECT itself: (SELECT ...) */
	bool is_srf;		/* EXPR: a set-returning call (generate_series, unnest) */
	const char *text;	/* CONST: the literal text; arena */
	const char *cast;	/* explicit cast type name (last component), or NULL */
};

/* A table reference (FROM item, DML target, COPY relation, DDL object). */
struct stmt_rel {
	const char *schema;	/* NULL: unqualified (search_path) */
	const char *name;
	const char *alias;	/* NULL: none */
	uint16_t scope;		/* SELECT scope id (0 = top level) */
	bool only;		/* ONLY: no inheritance children */
	bool is_target;		/* DML target */
	bool sampled;		/* TABLESAMPLE */
	bool outer_join;	/* on the nullable side of an outer join, or FULL */
	bool is_cte_ref;	/* names a CTE of the statement, not a table */
	uint16_t cte_scope;	/* is_cte_ref: the CTE's scope; 0 when not known (a reference
				 * to a CTE from inside its own query) */
	int32_t loc;		/* a plain FROM item: its offset in the text; -1 */
};

/* A shard-key candidate predicate: <lhs> op values. */
enum stmt_pred_op {
	STMT_P_EQ = 0,		/* lhs = v */
	STMT_P_IN,		/* lhs IN (v1, ...) or lhs = ANY(ARRAY[v1, ...]) */
	STMT_P_ANY_PARAM,	/* lhs = ANY($n): one array parameter */
};

struct stmt_pred {
	enum stmt_pred_op op;
	const char *qual;	/* table name or alias qualifying the column; NULL if none */
	const char *lhs;	/* column name, or canonical expression text: lower(sku) */
	bool lhs_is_expr;
	const char *column;	/* the one base column of an expression lhs (== lhs for a column) */
	struct stmt_value *vals;
	uint32_t nvals;
};

/* AND/OR tree of a WHERE/ON clause. OTHER leaves constrain nothing the router can use. */
enum stmt_cond_kind {
	STMT_C_OTHER = 0,
	STMT_C_PRED,
	STMT_C_AND,
	STMT_C_OR,
};

struct stmt_cond {
	enum stmt_cond_kind kind;
	struct stmt_pred *pred;		/* PRED */
	struct stmt_cond **args;	/* AND/OR */
	uint32_t nargs;
};

/*
 * Column equality a.x = b.y (join predicate): an AND-conjunct of a WHERE clause (node -1) or
 * of a join's ON (node: that JOIN node), or a JOIN ... USING column. An equality under OR,
 * NOT or in any other expression is not recorded: it does not hold for every row.
 */
struct stmt_join_eq {
	const char *lqual, *lcol;
	const char *rqual, *rcol;
	uint16_t scope;
	int32_t node;		/* the JOIN node (stmt.nodes) whose ON holds it; -1: WHERE */
};

/* A qualifier of a column reference (t.col) in a scope's expressions, or (<defines>) the
 * alias of a derived table of a scope's FROM: what tells a correlated subquery. */
struct stmt_qual {
	const char *name;
	uint16_t scope;
	bool defines;
};

/* A plain column reference qual.col (qual NULL: unqualified). */
struct stmt_colref {
	const char *qual, *col;
};

/* What a scope is within its statement. */
enum stmt_scope_kind {
	STMT_SC_TOP = 0,	/* the statement's own SELECT / UPDATE / DELETE / MERGE */
	STMT_SC_FROM,		/* a derived table: FROM (SELECT ...) alias */
	STMT_SC_LATERAL,	/* FROM LATERAL (SELECT ...) alias */
	STMT_SC_CTE,		/* a WITH query */
	STMT_SC_SUBLINK,	/* a subquery in an expression: EXISTS, IN, ANY, ALL, scalar, ARRAY */
	STMT_SC_SETOP,		/* an arm of UNION / INTERSECT / EXCEPT */
	STMT_SC_OTHER,		/* INSERT ... SELECT source, COPY (query), DDL bodies */
};

/* The scope's own clauses (not those of its subqueries). */
enum stmt_scope_flag {
	STMT_SCF_AGG = 1u << 0,		/* an aggregate call, GROUP BY or HAVING */
	STMT_SCF_DISTINCT = 1u << 1,	/* DISTINCT or DISTINCT ON */
	STMT_SCF_LIMIT = 1u << 2,	/* LIMIT / FETCH FIRST / OFFSET */
	STMT_SCF_WINDOW = 1u << 3,	/* a window function call */
	STMT_SCF_UNION = 1u << 4,	/* the scope is a UNION (removing duplicates) of arms */
	STMT_SCF_UNION_ALL = 1u << 5,	/* the scope is a UNION ALL of arms */
	STMT_SCF_SETOP_OTHER = 1u << 6,	/* the scope is an INTERSECT or EXCEPT */
	STMT_SCF_RECURSIVE = 1u << 7,	/* a CTE of WITH RECURSIVE */
	STMT_SCF_WRITE = 1u << 8,	/* a data-modifying CTE (INSERT/UPDATE/DELETE/MERGE) */
	STMT_SCF_IN = 1u << 9,		/* SUBLINK: `x [NOT] IN (SELECT ...)` or `x = ANY (...)` */
	STMT_SCF_GATHER_AGG = 1u << 10,	/* an aggregate the merge cannot combine (stmt.gather_agg) */
};

/* A window function call of a scope: its PARTITION BY items that are plain columns. */
struct stmt_window {
	struct stmt_colref *part;
	uint32_t npart;
	const char *ref;	/* OVER name / OVER (name ...): the WINDOW entry; NULL */
};

/* One SELECT/DML scope (the top level, each subquery, each CTE). */
struct stmt_scope {
	struct stmt_cond *where;	/* NULL: no WHERE */
	uint16_t parent;		/* enclosing scope (0 for the top level itself) */
	enum stmt_scope_kind kind;
	uint32_t flags;			/* enum stmt_scope_flag */
	int32_t from;			/* first FROM item (stmt.nodes); -1: none */
	struct stmt_colref *group;	/* GROUP BY's plain columns (positions resolved) */
	uint32_t ngroup;
	struct stmt_colref *distinct;	/* DISTINCT ON items, or for DISTINCT the plain
					 * columns of the select list */
	uint32_t ndistinct;
	struct stmt_colref *order;	/* ORDER BY's plain columns (positions resolved) */
	uint32_t norder;
	struct stmt_window *windows;	/* every window function call */
	uint32_t nwindows;
	struct stmt_colref test;	/* STMT_SCF_IN: the tested plain column (col NULL) */
	struct stmt_colref out;		/* the only select-list entry when a plain column */
	int32_t loc;			/* SUBLINK, CTE: its offset; FROM: its first token's */
};

/* A FROM item: a table (or CTE reference), a subquery, a function or VALUES, a join. */
enum stmt_node_kind {
	STMT_N_REL = 0,		/* ref: index in stmt.rels */
	STMT_N_SCOPE,		/* ref: the scope of a derived table (FROM / LATERAL) */
	STMT_N_FUNC,		/* a function in FROM (its argument subqueries: SUBLINK scopes) */
	STMT_N_JOIN,		/* left JOIN right */
};

enum stmt_join_kind {
	STMT_J_INNER = 0,	/* [INNER] JOIN, CROSS JOIN */
	STMT_J_LEFT,
	STMT_J_RIGHT,
	STMT_J_FULL,
};

struct stmt_node {
	enum stmt_node_kind kind;
	enum stmt_join_kind join;	/* JOIN */
	uint16_t scope;			/* the scope whose FROM holds it */
	uint32_t ref;			/* REL / SCOPE: see enum stmt_node_kind */
	int32_t left, right;		/* JOIN: node indexes */
	int32_t next;			/* the scope's next FROM-list item; -1 */
	uint32_t rel_lo, rel_hi;	/* stmt.rels added while translating the item, any scope */
	struct stmt_cond *on;		/* JOIN: its ON clause; NULL (USING, NATURAL, CROSS) */
	bool on_eq;			/* JOIN: an ON conjunct compares columns with = */
};

/* Statement-shape flags the planner and the merge step look at. */
enum stmt_flag {
	STMT_F_AGG = 1u << 0,		/* aggregate calls */
	STMT_F_ORDER = 1u << 1,		/* ORDER BY at the top level */
	STMT_F_LIMIT = 1u << 2,		/* LIMIT / FETCH FIRST */
	STMT_F_OFFSET = 1u << 3,
	STMT_F_GROUP = 1u << 4,		/* GROUP BY */
	STMT_F_HAVING = 1u << 5,
	STMT_F_DISTINCT = 1u << 6,	/* DISTINCT or DISTINCT ON */
	STMT_F_UNION = 1u << 7,		/* UNION [ALL] */
	STMT_F_INTERSECT = 1u << 8,	/* INTERSECT or EXCEPT */
	STMT_F_WINDOW = 1u << 9,
	STMT_F_SUBQUERY = 1u << 10,	/* sub-SELECT anywhere */
	STMT_F_CTE = 1u << 11,
	STMT_F_SAMPLE = 1u << 12,	/* TABLESAMPLE */
	STMT_F_GROUPING_SETS = 1u << 13,
	STMT_F_LOCKING = 1u << 14,	/* FOR UPDATE / SHARE */
	STMT_F_WITH_TIES = 1u << 15,
	STMT_F_INTO = 1u << 16,		/* SELECT ... INTO */
	STMT_F_RETURNING = 1u << 17,
	STMT_F_WRITING_CTE = 1u << 18,	/* data-modifying WITH */
	STMT_F_LO_CALL = 1u << 19,	/* a large-object function (lo_*, loread, ...) */
	STMT_F_FROM_VALUES = 1u << 20,	/* INSERT's source is VALUES */
	STMT_F_FROM_SELECT = 1u << 21,	/* INSERT ... SELECT */
	STMT_F_OVERRIDING_USER = 1u << 22,
	STMT_F_ON_CONFLICT = 1u << 23,
	STMT_F_ON_CONFLICT_UPDATE = 1u << 24,
	STMT_F_CURRENT_OF = 1u << 25,	/* WHERE CURRENT OF */
	STMT_F_OUTER_JOIN = 1u << 26,
	STMT_F_SEQ_WHERE = 1u << 27,	/* nextval() in a WHERE/ON condition */
	STMT_F_SEQ_SET = 1u << 28,	/* nextval() in UPDATE SET / ON CONFLICT DO UPDATE SET */
	STMT_F_SEQ_ROW = 1u << 29,	/* nextval() anywhere else but a VALUES cell */
};

/* Shapes the router cannot process itself (spec 4.2); refused when it would have to. */
enum stmt_shape {
	STMT_SH_ORDER_SUBQUERY = 1u << 0,	/* sub-SELECT in the top ORDER BY: 108 */
	STMT_SH_ORDER_SRF = 1u << 1,		/* set-returning call in the top ORDER BY: 140 */
	STMT_SH_ARRAY_SUBQUERY = 1u << 2,	/* ARRAY(SELECT ...): 153 */
	STMT_SH_SUB_SETOP = 1u << 3,		/* INTERSECT/EXCEPT in a subquery: 151 */
	STMT_SH_VALUES_SUBQUERY = 1u << 4,	/* scalar subquery that is VALUES: 152 */
	STMT_SH_ROW_ALL = 1u << 5,		/* (a, b) op ALL (SELECT ...): 109 */
	STMT_SH_LATERAL_VALUES = 1u << 6,	/* LATERAL (VALUES ...): 111 */
	STMT_SH_GROUP_ROUTER_ONLY = 1u << 7,	/* now(), random(), ... in GROUP BY: 107 */
	STMT_SH_SET_SUBQUERY = 1u << 8,		/* sub-SELECT in SET of UPDATE ... FROM: 100 */
	STMT_SH_CHAINED_CTE = 1u << 9,		/* chained CTEs feeding DML FROM/USING: 105 */
	STMT_SH_PARAM_SUBSCRIPT = 1u << 10,	/* INSERT INTO t (a[$1]): 142 */
	STMT_SH_RETURNING_OLDNEW = 1u << 11,	/* old.x / new.x in RETURNING: 143 */
	STMT_SH_RETURNING_ROUTER = 1u << 12,	/* router-only call in RETURNING: 144 */
	STMT_SH_ADVISORY_SESSION = 1u << 13,	/* a session-level advisory-lock function */
	STMT_SH_ADVISORY_XACT = 1u << 14,	/* a transaction-level one (pg_*_xact_*) */
	STMT_SH_VALUES_ORDER = 1u << 15,	/* INSERT ... VALUES (...) ORDER BY: 150 */
	STMT_SH_SLICE_SET = 1u << 16,		/* UPDATE SET a[1:2] = / a[1][2] =: 67 */
	STMT_SH_MERGE_DERIVED = 1u << 17,	/* MERGE ... USING (subquery): 121 */
	STMT_SH_AGG_SRF = 1u << 18,		/* a set-returning call in the select list of an
						 * aggregate query: the merge cannot combine */
	STMT_SH_OUTER_AGG = 1u << 19,		/* an aggregate of a subquery over columns of an
						 * enclosing query only (its aggregate): 135 */
};

/* The parts of one kind of statement, the calls of functions the router manages
 * (neki/parse_kinds.h). */
struct stmt_call;
struct stmt_insert;
struct stmt_merge_insert;
struct stmt_tx;
struct stmt_set;
struct stmt_copy;
struct stmt_explain;
struct stmt_cursor;

/* CREATE TABLE AS (the planner checks where its rows come from). */
enum stmt_ctas {
	STMT_CTAS_NONE = 0,	/* not a CREATE TABLE AS (or a materialized view) */
	STMT_CTAS_QUERY,	/* any query */
	STMT_CTAS_COPY,		/* SELECT <list> FROM <one table> [WHERE ...], nothing else,
				 * no column names: each row is one of the table's */
	STMT_CTAS_NO_DATA,	/* WITH NO DATA: no rows */
};

/* STMT_CTAS_COPY: one select-list entry. */
struct stmt_ctas_col {
	const char *out;	/* its column name in the new table; "*" for a `*` */
	const char *col;	/* the source column it is when a plain column; else NULL */
};

struct stmt {
	enum stmt_kind kind;
	enum stmt_ctas ctas;		/* CREATE TABLE AS: the shape of its query */
	struct stmt_ctas_col *ctas_cols;	/* STMT_CTAS_COPY: the select list */
	uint32_t nctas_cols;
	bool names_aggregate;		/* CREATE AGGREGATE, or ALTER AGGREGATE that renames one
					 * or moves it to another schema */
	const char *tag;		/* parse-tree node name ("CreateStmt"), for DDL/utility */
	uint32_t flags;			/* enum stmt_flag */
	uint32_t shape;			/* enum stmt_shape */
	const char *gen_expr_col;	/* ALTER TABLE ... ALTER COLUMN c DROP EXPRESSION: c */
	const char *db_locale;		/* CREATE DATABASE: the libc locale asked for */
	const char *enum_schema;	/* ALTER TYPE ... RENAME VALUE: the type's schema (NULL
					 * unqualified) */
	const char *enum_rename;	/* ... and its name; NULL for other statements */
	int reject;			/* NK013 code decided from the statement alone; 0 none */
	uint32_t nslots;		/* nparams + literals: values the router may read */
	uint32_t nparams;
	struct stmt_rel *rels;		/* every table referenced, target first for DML */
	uint32_t nrels;
	struct stmt_scope *scopes;
	uint32_t nscopes;
	struct stmt_join_eq *joins;
	uint32_t njoins;
	struct stmt_node *nodes;	/* FROM items of every scope (stmt_scope.from) */
	uint32_t nnodes;
	const char **set_cols;		/* UPDATE SET targets (column names) */
	uint32_t nset_cols;
	const char **funcs;		/* lowercased function names called (distinct) */
	uint32_t nfuncs;
	struct stmt_qual *quals;	/* qualifiers used and derived-table aliases (distinct) */
	uint32_t nquals;
	struct stmt_call *calls;	/* router-managed function calls, in text order */
	uint32_t ncalls;
	struct stmt_insert *insert;	/* INSERT */
	struct stmt_merge_insert *merge_inserts;	/* MERGE: its INSERT actions */
	uint32_t nmerge_inserts;
	struct stmt_tx *tx;		/* TX and SET TRANSACTION / SESSION CHARACTERISTICS */
	struct stmt_set *set;		/* SET/RESET/SHOW */
	struct stmt_copy *copy;		/* COPY */
	struct stmt_explain *explain;	/* EXPLAIN */
	struct stmt_cursor *cursor;	/* DECLARE / FETCH / MOVE / CLOSE (kind STMT_SESSION) */
	const char *neki_fn;		/* the first neki function called (`__neki.<fn>()`, not
					 * a shard's: the caller answers it); NULL none */
	uint32_t neki_ncalls;		/* calls of neki functions in the statement */
	int32_t neki_loc;		/* the first one's byte offset in sql (-1: unknown) */
	bool neki_in_from;		/* ... is a FROM item (RangeFunction) */
	bool neki_alias;		/* ... with an alias, column list, ORDINALITY or LATERAL */
	const char *gather_agg;		/* the top level's first aggregate call the merge
					 * cannot combine (stmt_aggregate_class()); NULL none */
	struct stmt_colref float_arg;	/* a plain column the top level's stddev / variance
					 * reads (col NULL: none): of a float type, 0A000 */
	const char **cols_read;		/* every column name a column reference names, once
					 * ("*" for a star; a covering GSI read checks them) */
	uint32_t ncols_read;
	const char *sql;		/* the text it was parsed from; arena */
	uint32_t nstatements;		/* statements in the text (the model is the first) */
};

/*
 * Parse <sql> with libpg_query and translate its first statement into a model allocated in
 * <a>. <norm> (may be NULL) is parse_normalize()'s output for the same <sql>: literals it
 * normalised become slots; without it literals are STMT_V_CONST. A syntax error fills <err>
 * (42601, the parser's message and position in <err>->where) and returns NULL; also NULL
 * with 53200 on no memory. The libpg_query result is freed before returning.
 */
struct stmt *parse_statement(struct rarena *a, const char *sql, const struct parse_norm *norm,
			     struct nk_error *err);

/* "SELECT", "INSERT", ... */
const char *stmt_kind_str(enum stmt_kind k);

/* True when <name> (lowercase) is one of Postgres' built-in aggregates. */
bool stmt_builtin_aggregate(const char *name);

/* What the merge can do with built-in aggregate <name> across shards. */
enum stmt_agg_class {
	STMT_AGG_NONE = 0,	/* not a built-in aggregate */
	STMT_AGG_COMBINED,	/* combined from the shards' partials (merge_agg.c) */
	STMT_AGG_FLOAT_STATE,	/* corr, covar_*, regr_*: a float state SQL cannot read */
	STMT_AGG_ORDERED_SET,	/* percentile_*, mode, the hypothetical-set ones */
	STMT_AGG_UNCOMBINED,	/* any_value and the others without a combine */
};
enum stmt_agg_class stmt_aggregate_class(const char *name);

/* True when <s> calls function <name> (lowercase, unqualified). */
bool stmt_calls(const struct stmt *s, const char *name);

#endif /* NEKI_PARSE_H */
