/*
 * neki/plan.h - the router's plans (spec section 3): given a statement model (parse.h), the
 * topology image, the column types (a catalog the caller supplies), the session's __neki
 * settings and the values of this execution, decide where the statement goes, or refuse it
 * with Neki's error before any shard sees it. Pure: no sockets, no shared state. Beside it:
 * neki/plan_cache.h (the plan cache), plan_settings.h (the __neki.* session settings),
 * plan_explain.h (EXPLAIN (NEKI_PLAN)), plan_cursor.h (cursor moves), plan_merge.h (the
 * merge specification of a multi-shard SELECT), plan_gsi.h (global secondary indexes).
 *
 * Executor's view, per statement:
 *   parse_normalize() -> plan_cache_get() (or parse_statement() + plan_cache_put())
 *   -> plan_build() -> run plan.kind on plan.shards (INSERT: plan.parts) -> merge by plan.merge.
 */
#ifndef NEKI_PLAN_H
#define NEKI_PLAN_H

#include "neki/base.h"

#include "neki/catalog.h"
#include "neki/error.h"
#include "neki/keyspace.h"
#include "neki/parse.h"

struct plan_gsi;
struct plan_memo;

/* Column types and relation kinds: the catalog module (or a test) supplies these. */
struct plan_catalog {
	void *arg;
	/* Type OID of <schema>.<table>.<column>; 0 when unknown or no such column. */
	uint32_t (*column_type)(void *arg, const char *schema, const char *table,
				const char *column);
	/* Name of column number <attnum> (1-based, dropped columns skipped); NULL past the end. */
	const char *(*column_name)(void *arg, const char *schema, const char *table,
				   uint32_t attnum);
	/* pg_class.relkind ('r', 'p', 'v', 'm', 'S', 'i', 'f', ...); 0 when unknown. May be NULL. */
	char (*relkind)(void *arg, const char *schema, const char *table);
	uint64_t version;	/* catalog version: part of the plan cache key */
	/* Optional (NULL: unknown). Column <attnum> (1-based) of <schema>.<table>; false past
	 * the end or when unknown. */
	bool (*column)(void *arg, const char *schema, const char *table, uint32_t attnum,
		       struct cat_column *out);
	/* CACHE of sequence <schema>.<name>; 0 when unknown. */
	int64_t (*seq_cache)(void *arg, const char *schema, const char *name);
	/* Inheritance children (not partitions) of <schema>.<table>; 0 when none or unknown. */
	uint32_t (*inh_children)(void *arg, const char *schema, const char *table);
	/* The <i>th relation the query of view or materialized view <schema>.<view> reads;
	 * false past the end or when unknown. */
	bool (*view_base)(void *arg, const char *schema, const char *view, uint32_t i,
			  const char **base_schema, const char **base_name);
	/* The <i>th relation of the database (any kind); false past the end (333). */
	bool (*table_at)(void *arg, uint32_t i, const char **schema, const char **name);
	/* Schema and name of type <oid>; false when unknown (333). */
	bool (*type_name)(void *arg, uint32_t oid, const char **schema, const char **name);
	bool (*is_aggregate)(void *arg, const char *name);	/* optional: a user aggregate? (212) */
	/* Optional: column <i> of <schema>.<table>'s primary key into *<col>: 1; 0 past its end
	 * (or none); -1 when the table is unknown (V11). */
	int (*pk_column)(void *arg, const char *schema, const char *table, uint32_t i,
			 const char **col);
	/* Optional: whether the merge orders and groups values of type <oid> (a column's),
	 * neki/merge.h's merge_orders_type() or an enum the catalog knows. */
	bool (*merges_type)(void *arg, uint32_t oid);
	/* Optional: whether a rule or a BEFORE INSERT row trigger on <schema>.<table> (or a
	 * partition) may store another row than the one inserted (true when unknown). */
	bool (*rewrites_insert)(void *arg, const char *schema, const char *table);
};

enum plan_fanout {
	PLAN_FANOUT_SCATTER = 0,	/* default: anything */
	PLAN_FANOUT_MULTI,		/* a bounded set of shards */
	PLAN_FANOUT_SINGLE,		/* one shard */
};

enum plan_tx_mode {
	PLAN_TX_MULTI = 0,
	PLAN_TX_SINGLE,
	PLAN_TX_ATOMIC,			/* multi, committed with two-phase commit (src/exec) */
};

#define PLAN_SHARD_MAX 64

/* The __neki.* settings of a session (spec 3.4) and what planning needs of the session. */
struct plan_session {
	enum plan_fanout fanout;
	enum plan_tx_mode tx_mode;
	char shard[PLAN_SHARD_MAX];	/* __neki.shard; "" = normal routing */
	char target[16];		/* __neki.target: primary, replica, rdonly */
	char replica_recency[16], replica_locality[16], replica_affinity[16];
	const char *db;			/* borrowed: database name in the topology */
	const char *schema;		/* borrowed: first schema of search_path ("public") */
	bool in_transaction;
	bool gsi_step;			/* a step the executor runs for a GSI: planned as is */
	bool explain;			/* the statement of a plain EXPLAIN: it reads no row */
	const char *tx_shard;		/* borrowed: a shard the transaction already uses; NULL */
	const char *lock_shard;		/* borrowed: the shard whose link holds the session's
					 * advisory locks; NULL when it holds none */
	struct ks_text_ctx text_ctx;	/* TimeZone for timestamptz keys */
	uint64_t revision;		/* the topology revision the last statement was planned
					 * with (the executor sets it; route_busy_revision) */
};

/* Defaults: scatter, multi, no shard, primary, prefer/prefer/none, schema "public". */
void plan_session_init(struct plan_session *s, const char *db);

/* One bound parameter ($n). */
struct plan_param {
	const uint8_t *data;	/* borrowed */
	int32_t len;		/* -1: NULL */
	bool binary;		/* format code 1 */
	uint32_t type_oid;	/* declared type; 0 = unspecified (use the column's type) */
};

/* A sharded table of the statement that the catalog does not know: it was planned without
 * its columns and their types (plan_input.unknown). */
struct plan_unknown {
	const char *schema, *table;		/* borrowed (statement, session); NULL: none */
};

struct plan_input {
	const void *topo;			/* topology image (topology_image.h) */
	const struct plan_catalog *cat;
	const struct plan_session *sess;
	const struct plan_param *params;	/* $1..$n of this execution */
	uint32_t nparams;
	const struct parse_norm *norm;		/* this execution's literals; NULL: none */
	bool extended;				/* extended query protocol */
	bool multi_statement;			/* one of several statements of a Query */
	const char *sql;			/* this execution's text (nextval() spans); NULL:
						 * the analysed text */
	struct plan_unknown *unknown;		/* NULL, or filled with the first sharded table
						 * the catalog lacks (not for DDL): the caller
						 * may load it and plan again */
};

enum plan_kind {
	PLAN_SINGLE = 0,	/* one shard: forward the statement unchanged */
	PLAN_SHARD_SET,		/* some shards of one group: send to each, merge */
	PLAN_SCATTER,		/* every shard of one group: send to each, merge */
	PLAN_EVERY_COPY,	/* reference-table write: every shard holding a copy */
	PLAN_ALL_SHARDS,	/* DDL, maintenance, privileges: every shard, in plan order */
	PLAN_ROUTER,		/* answered by the router itself (plan.action) */
};

/* Route operators as EXPLAIN (NEKI_PLAN) prints them. */
enum plan_op {
	PLAN_OP_EQUAL_UNIQUE = 0,	/* Route [EqualUnique] */
	PLAN_OP_IN,			/* Route [IN] */
	PLAN_OP_SCATTER,		/* Route [Scatter] */
	PLAN_OP_UNSHARDED,		/* Route [Unsharded] */
	PLAN_OP_REFERENCE,		/* Route [Reference]: one copy */
	PLAN_OP_REFERENCE_WRITE,	/* Route [ReferenceWrite]: every copy */
	PLAN_OP_ANY,			/* Route [Any]: no table */
	PLAN_OP_DIRECT,			/* Route [Direct]: __neki.shard */
	PLAN_OP_ALL_SHARDS,		/* Route [AllShards]: DDL */
	PLAN_OP_INSERT_SPLIT,		/* Route [InsertSplit]: multi-row VALUES over shards */
	PLAN_OP_COPY,			/* Route [Copy]: COPY FROM rows routed one by one */
	PLAN_OP_FUNCTION,		/* Route [Function]: no table, placed by a router-managed
					 * function (advisory lock key, setval, pg_notify) */
	PLAN_OP_INSERT_SELECT,		/* Route [InsertSelect]: the router reads the source's
					 * rows and writes each where the target wants it */
	PLAN_OP_NONE,			/* PLAN_ROUTER */
};

enum plan_action {
	PLAN_ACT_NONE = 0,
	PLAN_ACT_EMPTY,		/* empty query */
	PLAN_ACT_TX,		/* BEGIN/COMMIT/ROLLBACK (stmt->tx) */
	PLAN_ACT_SET,		/* ordinary SET / RESET / SET TRANSACTION (stmt->set, stmt->tx) */
	PLAN_ACT_SHOW,		/* ordinary SHOW: answer from the session or any shard */
	PLAN_ACT_NEKI_SET,	/* __neki.* SET/RESET: apply with plan_neki_apply() */
	PLAN_ACT_NEKI_SHOW,	/* __neki.* SHOW: plan.show_value */
	PLAN_ACT_SESSION,	/* PREPARE, EXECUTE, DEALLOCATE, DISCARD, LISTEN, ... */
	PLAN_ACT_EXPLAIN,	/* EXPLAIN (NEKI_PLAN): print plan.inner with plan_explain() */
	PLAN_ACT_CURSOR,	/* DECLARE (plan.inner: its query's plan), FETCH, MOVE, CLOSE
				 * (stmt->cursor): the executor's cursors */
};

/* INSERT rows going to one shard, in input order. */
struct plan_part {
	const char *shard;
	uint32_t *rows;		/* VALUES row numbers (0-based) */
	uint32_t nrows;
};

/*
 * A column of a sharded or reference-table INSERT the executor fills with values of its
 * sequence reserved by the router (spec 6.1): the column was omitted (or positional VALUES
 * stopped before it). One value per VALUES row, from the allocator of neki/sequence.h.
 */
struct plan_fill {
	const char *column;
	const char *seq_schema, *seq_name;
	const char *home;		/* uid of the sequence's home shard (reserve there) */
	int64_t cache;			/* the sequence's CACHE; 0 unknown */
	bool is_key;			/* the shard key: rows route by their new value */
	int32_t cell;			/* -1: added to the INSERT; >= 0: the INSERT gives the
					 * column in this cell of each row, and only its DEFAULT
					 * cells take the values */
	uint32_t attnum;		/* the column's number; INSERT ... SELECT without a column
					 * list fills it only when the source has fewer columns */
};

/* Sequence functions the router evaluates (spec 6.1: nextval/currval are router-managed). */
enum plan_seq_fn {
	PLAN_SEQ_NEXTVAL = 0,	/* a value from the router's batches */
	PLAN_SEQ_CURRVAL,	/* the session's last value of the sequence (55000 when none) */
	PLAN_SEQ_LASTVAL,	/* the session's last value of any sequence (no seq_* fields) */
};

/* A nextval('seq') / currval('seq') / lastval() call the router evaluates: the executor
 * replaces the call's text by its value. */
struct plan_nextval {
	enum plan_seq_fn fn;
	const char *seq_schema, *seq_name;
	const char *home;		/* NEXTVAL only */
	int64_t cache;
	uint32_t start, len;		/* the call `nextval('seq')` in plan_input.sql */
};

/*
 * What a statement does to the session's held links (spec 3.3 advisory locks): a link that
 * may hold a session-level advisory lock is kept by the session across transactions until
 * its shard says it holds none (the executor asks it after each such statement).
 */
enum plan_pin {
	PLAN_PIN_NONE = 0,
	PLAN_PIN_PROBE,		/* an unlock: the link may hold no lock after it */
	PLAN_PIN_LOCK,		/* may take a session-level lock: the link is held */
};

/* A setval() call (spec 6.1): once its home shard ran it, the executor drops the values
 * every worker reserved for the sequence and sets currval() as Postgres does. Calls that
 * change nothing (a NULL argument) are not listed. */
struct plan_setval {
	const char *seq_schema, *seq_name;
	int64_t value;			/* the new value */
	bool is_called;			/* third argument (default true) */
};

/* Where the rows of an INSERT ... SELECT the router runs (PLAN_OP_INSERT_SELECT) go. */
enum plan_insel_target {
	PLAN_INSEL_SHARDED = 0,		/* each row to the shard its key routes to (plan.key) */
	PLAN_INSEL_REFERENCE,		/* every row to every copy */
	PLAN_INSEL_UNSHARDED,		/* every row to the table's shard */
};

/*
 * An INSERT ... SELECT whose source does not meet the inserted rows on one shard: the
 * source is planned as the SELECT it is (source: single shard, concatenation or a merge
 * step), the executor reads its rows and writes them in batches of
 * `<head>[, fill columns]) [OVERRIDING SYSTEM VALUE] VALUES ($k, ...), ... <tail>` to the
 * shards the target wants. Strings in the plan's arena.
 */
struct plan_insel {
	enum plan_insel_target target;
	const char *table;		/* the target table's name (errors) */
	const char **targets;		/* every shard a row may go to (reference: the copies) */
	uint32_t ntargets;
	struct plan *source;		/* the source SELECT's plan (its query: the normalised
					 * source text) */
	const char *source_sql;		/* the source's text as executed (WITH of the INSERT
					 * first), to run on the shards */
	const char *head;		/* `INSERT INTO t [AS a] (cols` or `INSERT INTO t [AS a]`
					 * (no column list: cols_paren false) */
	bool cols_paren;		/* the INSERT has a column list (head lacks its ')') */
	bool overriding;		/* OVERRIDING SYSTEM VALUE was written */
	const char *tail;		/* ON CONFLICT ... and RETURNING ... as written ("") */
	const char *tail_noret;		/* the tail without RETURNING (reference copies but the
					 * first) */
	bool returning;
	uint32_t ncols;			/* columns the INSERT lists; 0: positional */
	const char **table_cols;	/* positional: the table's columns in order (fills) */
	uint32_t ntable_cols;
	int32_t key_col;		/* sharded: the key's position among the inserted columns
					 * (positional: its attnum - 1); -1: filled */
	uint32_t key_attnum;		/* sharded: the key column's number (0 unknown) */
	struct plan_fill *fills;	/* identity/serial columns the router fills */
	uint32_t nfills;
	bool *untyped;			/* per select-list entry: an untyped literal or parameter
					 * (its value is written untyped: the column decides) */
	uint32_t nuntyped;
};

/* A set_config(name, value, is_local) call (spec 3.3: router-managed): once the statement
 * ran, the executor remembers it as the SET (SET LOCAL with is_local) it is, so the
 * session's other links get it and a rollback undoes it. */
struct plan_set_config {
	const char *name;		/* lowercased */
	const char *value;		/* NULL: set_config(name, NULL, ...) resets it */
	bool is_local;
};

/* How COPY FROM (and the executor generally) computes a row's shard. */
struct plan_key {
	uint32_t group, index;		/* image numbers */
	enum ks_type col_type;		/* type of the base column */
	int32_t col_pos;		/* COPY: position of the key column in the input; -1 */
	const char *column;		/* base column name */
};

struct plan {
	enum plan_kind kind;
	enum plan_op op;
	enum plan_action action;
	const char *group;		/* group uid; NULL when not one group */
	const char **shards;		/* distinct shard uids (ALL_SHARDS: authoritative first) */
	uint32_t nshards;
	struct plan_part *parts;	/* INSERT: rows per shard; NULL otherwise */
	uint32_t nparts;
	uint32_t merge;			/* stmt flags the merge step needs (enum stmt_flag) */
	enum plan_fanout level;		/* fan-out level this plan needs */
	const char **values;		/* routing values as text (EXPLAIN "Values:") */
	uint32_t nvalues;
	struct plan_key key;		/* valid when has_key */
	bool has_key;
	struct plan_fill *fills;	/* INSERT: columns to fill with sequence values */
	uint32_t nfills;
	uint32_t nrows;			/* INSERT ... VALUES: rows (values per fill) */
	bool route_by_fill;		/* a fill is the shard key: call plan_fill_route() */
	const char **cols;		/* fills without a column list: the columns given */
	uint32_t ncols;
	struct plan_nextval *nextvals;	/* in text order */
	uint32_t nnextvals;
	enum plan_pin pin;		/* session-level advisory lock calls */
	struct plan_setval *setvals;	/* setval() calls, in text order */
	uint32_t nsetvals;
	struct plan_set_config *set_configs;	/* set_config() calls, in text order */
	uint32_t nset_configs;
	bool queue_usage;		/* pg_notification_queue_usage(): the router's NOTICE */
	const char *show_value;		/* NEKI_SHOW: the value */
	const char *query;		/* normalised text sent to shards (EXPLAIN "Query:") */
	const struct stmt *stmt;	/* borrowed: the statement planned */
	struct plan *inner;		/* the plan of EXPLAIN's statement, DECLARE's query */
	struct plan_insel *insel;	/* PLAN_OP_INSERT_SELECT; NULL otherwise */
	struct plan_gsi *gsi;		/* an owner of enabled GSIs: plan_gsi.h; NULL */
	const char *gsi_not_used;	/* a non-unique GSI the read could go through, left
					 * out: its lookups lately led to every shard (the
					 * scatter costs less, plan_gsi_cost_scatter()); NULL */
	bool bad_param;			/* refused: a bound value not of its type (Bind's) */
	uint16_t materialize;		/* refused for this scope: evaluate it first; 0 */
	uint32_t broadcast;		/* refused for stmt.rels[broadcast - 1]: evaluate it */
};

/*
 * Plan <s> for this execution. The plan and its arrays are allocated in <a> (scratch of the
 * statement). On refusal fills <err> (NK013 with its code, NK306, 23502, NK017, ...) and
 * returns false; nothing has been sent anywhere.
 */
bool plan_build(struct rarena *a, const struct stmt *s, const struct plan_input *in,
		struct plan *out, struct nk_error *err) NK_MUSTCHECK;

/*
 * plan_build() for the top-level statement of an execution, with <memo> the plan cache's
 * memo of <s> (plan_cache_memo(); NULL: plain plan_build()). A plan that only a shard-key
 * value decides (one sharded table, one routing value from a $n or a normalised literal,
 * no function the router manages) is kept there, and the next executions with the same
 * database, schema and protocol only route their value: the same plan with its shard.
 */
bool plan_build_memo(struct rarena *a, const struct stmt *s, const struct plan_input *in,
		     struct plan_memo *memo, struct plan *out, struct nk_error *err) NK_MUSTCHECK;

/* Shard of one COPY/row key given as text (plan.has_key). */
bool plan_route_text(const struct plan_input *in, const struct plan *p, const char *text,
		     size_t len, const char **shard, struct nk_error *err) NK_MUSTCHECK;
/* The same for a key in Postgres binary form (binary COPY: the base column's type). */
bool plan_route_binary(const struct plan_input *in, const struct plan *p, const uint8_t *data,
		       size_t len, const char **shard, struct nk_error *err) NK_MUSTCHECK;

/*
 * Plans with fills whose shard key is filled (route_by_fill): with <values>[f * nrows + r]
 * the value of fill f for VALUES row r, compute the shards and parts (PLAN_SINGLE or
 * PLAN_SHARD_SET / INSERT_SPLIT). Allocated in <a>.
 */
bool plan_fill_route(struct rarena *a, const struct plan_input *in, struct plan *p,
		     const int64_t *values, struct nk_error *err) NK_MUSTCHECK;

/*
 * The text to send for a plan with fills or nextval() calls (plan_rewrite.c): <sql> (the
 * text planned, plan_input.sql) with each nextval() call replaced by its value
 * <nextvals>[k] and, for fills, the INSERT restricted to the rows of <part> (NULL: every
 * row), each row extended by its fill values (<values> as for plan_fill_route), the fill
 * columns added to the column list (plan.cols written out when the statement had none) and
 * OVERRIDING SYSTEM VALUE added. NUL-terminated, in <a>; NULL with <err> (42601 when the
 * text does not have the shape planned, 53200 no memory).
 */
char *plan_rewrite(struct rarena *a, const char *sql, const struct plan *p,
		   const struct plan_part *part, const int64_t *values, const int64_t *nextvals,
		   struct nk_error *err);

#endif /* NEKI_PLAN_H */
