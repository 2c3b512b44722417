/*
 * neki/parse_kinds.h - the parts of the statement model (neki/parse.h) that one kind of
 * statement has: an INSERT's VALUES rows and select list, MERGE's INSERT actions, transaction
 * control, SET / RESET / SHOW, COPY, cursors, EXPLAIN; and the calls of the functions the
 * router manages, anywhere in a statement (src/router/parse*.c fill them).
 */
#ifndef NEKI_PARSE_KINDS_H
#define NEKI_PARSE_KINDS_H

#include "neki/base.h"

#include "neki/parse.h"

/*
 * Functions whose calls the router manages (spec 3.3 "Functions / expressions", 6.1): the
 * advisory locks (routed by their key), setval() (the sequence's home shard, then the
 * router's reserved values are dropped), the notification functions (the notify shard) and
 * set_config() (the executor models the setting as the SET it is).
 */
enum stmt_fn {
	STMT_FN_LOCK = 0,	/* pg_[try_]advisory_lock[_shared]: a session-level lock */
	STMT_FN_XACT_LOCK,	/* pg_[try_]advisory_xact_lock[_shared] */
	STMT_FN_UNLOCK,		/* pg_advisory_unlock[_shared] */
	STMT_FN_UNLOCK_ALL,	/* pg_advisory_unlock_all() */
	STMT_FN_SETVAL,		/* setval(seq, value [, is_called]) */
	STMT_FN_NOTIFY,		/* pg_notify(channel, payload) */
	STMT_FN_LISTENING,	/* pg_listening_channels() */
	STMT_FN_QUEUE_USAGE,	/* pg_notification_queue_usage() */
	STMT_FN_SET_CONFIG,	/* set_config(name, value, is_local): a session setting */
};

#define STMT_CALL_ARGS 3

/* One call of a router-managed function, anywhere in the statement, in text order. */
struct stmt_call {
	enum stmt_fn fn;
	uint32_t nargs;				/* arguments the call has */
	struct stmt_value args[STMT_CALL_ARGS];	/* the first ones (EXPR: not a constant) */
	bool named;				/* an argument is written name => value */
};

/* INSERT ... SELECT: one select-list entry, a column of the source or a value. */
struct stmt_target {
	const char *qual, *column;	/* a plain column reference; column NULL otherwise */
	struct stmt_value val;		/* otherwise: its value */
	uint16_t scope;			/* scope of the SELECT */
};

/* MERGE ... WHEN NOT MATCHED THEN INSERT [(cols)] VALUES (...) | DEFAULT VALUES. */
struct stmt_merge_insert {
	const char **cols;		/* NULL: the table's order */
	uint32_t ncols;
	struct stmt_value *vals;	/* nvals values (none: DEFAULT VALUES) */
	struct stmt_colref *refs;	/* per value: the plain column it is; col NULL if not */
	uint32_t nvals;
};

/* INSERT: one VALUES row. */
struct stmt_row {
	struct stmt_value *cells;	/* ncols entries, in stmt_insert.cols order */
};

struct stmt_insert {
	const char **cols;		/* target columns; NULL when omitted (table order) */
	uint32_t ncols;
	struct stmt_row *rows;		/* VALUES rows */
	uint32_t nrows;
	const char **conflict_cols;	/* ON CONFLICT (cols) arbiter; NULL: none / ON CONSTRAINT */
	uint32_t nconflict_cols;
	const char *conflict_constraint;	/* ON CONFLICT ON CONSTRAINT name */
	const char **set_cols;		/* ON CONFLICT DO UPDATE SET columns */
	uint32_t nset_cols;
	struct stmt_target *select_targets;	/* INSERT ... SELECT: the top select list */
	uint32_t nselect_targets;
};

/* Transaction control. */
enum stmt_tx_kind {
	STMT_TX_BEGIN = 0,	/* BEGIN / START TRANSACTION */
	STMT_TX_COMMIT,		/* COMMIT / END */
	STMT_TX_ROLLBACK,	/* ROLLBACK / ABORT */
	STMT_TX_SAVEPOINT,
	STMT_TX_RELEASE,
	STMT_TX_ROLLBACK_TO,
	STMT_TX_PREPARE,	/* PREPARE TRANSACTION */
	STMT_TX_COMMIT_PREPARED,
	STMT_TX_ROLLBACK_PREPARED,
};

enum stmt_isolation {
	STMT_ISO_DEFAULT = 0,
	STMT_ISO_READ_UNCOMMITTED,
	STMT_ISO_READ_COMMITTED,
	STMT_ISO_REPEATABLE_READ,
	STMT_ISO_SERIALIZABLE,
};

struct stmt_tx {
	enum stmt_tx_kind kind;
	enum stmt_isolation isolation;
	int read_only;		/* -1 unspecified, 0 READ WRITE, 1 READ ONLY */
	int deferrable;		/* -1 unspecified, 0 NOT DEFERRABLE, 1 DEFERRABLE */
	bool chain;		/* AND CHAIN */
	const char *name;	/* savepoint name or prepared gid */
};

/* SET / RESET / SHOW and the SET TRANSACTION family. */
enum stmt_set_kind {
	STMT_SET_VALUE = 0,	/* SET name = values */
	STMT_SET_DEFAULT,	/* SET name TO DEFAULT */
	STMT_SET_CURRENT,	/* SET name FROM CURRENT */
	STMT_SET_TRANSACTION,	/* SET TRANSACTION ... (stmt.tx holds the options) */
	STMT_SET_SESSION_CHARACTERISTICS,
	STMT_SET_SNAPSHOT,	/* SET TRANSACTION SNAPSHOT */
	STMT_SET_RESET,		/* RESET name */
	STMT_SET_RESET_ALL,
	STMT_SET_SHOW,		/* SHOW name (name "all" for SHOW ALL) */
};

struct stmt_set {
	enum stmt_set_kind kind;
	const char *name;	/* lowercased GUC name ("timezone", "__neki.fanout") */
	const char *value;	/* SET_VALUE: the value as text, comma-joined for lists */
	bool is_local;		/* SET LOCAL */
	bool is_neki;		/* name starts with "__neki." */
};

struct stmt_copy {
	bool is_from;
	bool is_program;
	bool has_file;		/* a server file (not STDIN/STDOUT) */
	bool has_query;		/* COPY (query) */
	bool has_where;
	const char **cols;
	uint32_t ncols;
	const char *format;	/* "text", "csv", "binary" (lowercased) */
	const char *encoding;	/* ENCODING option as written, NULL when absent */
	bool has_sharded_only_bad_opt;	/* ON_ERROR / REJECT_LIMIT / LOG_VERBOSITY */
	bool header;		/* HEADER (true or MATCH) */
	/* options the router needs to find a row's shard key (NULL: absent, the default) */
	const char *delimiter, *null_string, *quote, *escape;
	const char **force_null, **force_not_null;	/* CSV column lists */
	uint32_t nforce_null, nforce_not_null;
	bool force_null_all, force_not_null_all;	/* FORCE_NULL * / FORCE_NOT_NULL * */
};

/* DECLARE / FETCH / MOVE / CLOSE: a cursor (or protocol portal) by name. */
enum stmt_cursor_op {
	STMT_CUR_DECLARE = 0,
	STMT_CUR_FETCH,		/* FETCH, or MOVE when is_move */
	STMT_CUR_CLOSE,		/* CLOSE name; CLOSE ALL when name is NULL */
};

/* FETCH / MOVE directions as Postgres keeps them (NEXT = FORWARD 1, PRIOR = BACKWARD 1,
 * FIRST = ABSOLUTE 1, LAST = ABSOLUTE -1, a bare count = FORWARD count). */
enum stmt_fetch_dir {
	STMT_FETCH_FORWARD = 0,
	STMT_FETCH_BACKWARD,
	STMT_FETCH_ABSOLUTE,
	STMT_FETCH_RELATIVE,
};

#define STMT_FETCH_ALL INT64_MAX	/* FETCH ALL / FORWARD ALL / BACKWARD ALL */

struct stmt_cursor {
	enum stmt_cursor_op op;
	const char *name;	/* the cursor (portal) name; NULL for CLOSE ALL */
	/* DECLARE */
	bool binary;		/* BINARY */
	bool scroll;		/* SCROLL */
	bool no_scroll;		/* NO SCROLL (neither: Postgres decides by the plan) */
	bool hold;		/* WITH HOLD */
	struct stmt *query;	/* the cursor's query; arena */
	uint32_t query_start;	/* its text: stmt.sql + query_start to the end */
	/* FETCH / MOVE */
	bool is_move;
	enum stmt_fetch_dir dir;
	int64_t count;		/* rows (negative: the other way), STMT_FETCH_ALL */
};

struct stmt_explain {
	bool neki_plan;		/* NEKI_PLAN option */
	bool analyze;
	bool costs_off;
	bool format_json;	/* FORMAT JSON; default when NEKI_PLAN without FORMAT TEXT */
	bool format_text;
	int reject;		/* 32 / 33 / 30 / 31 found in the options or target; 0 none */
	struct stmt *inner;	/* the explained statement; arena */
};

#endif /* NEKI_PARSE_KINDS_H */
