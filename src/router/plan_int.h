/*
 * plan_int.h - private to the planner (plan.c routes SELECT and DML, plan_util.c plans
 * utility statements and the checks every plan passes, plan_insert.c INSERT).
 */
#ifndef NEKI_ROUTER_PLAN_INT_H
#define NEKI_ROUTER_PLAN_INT_H

#include "neki/base.h"

#include "neki/parse_kinds.h"
#include "neki/plan.h"
#include "neki/plan_merge.h"
#include "neki/topology_image.h"

#define PLAN_RENDER_MAX 256
#define PLAN_MEMO_NAME 64		/* database and schema names a memo can hold */

/* A relation of the statement, resolved against the topology. */
struct prel {
	const struct stmt_rel *r;	/* borrowed: from the model */
	const char *schema;		/* effective schema */
	struct topo_img_rel res;
	bool sharded;			/* TABLE with a shard index */
	const struct ks_expr *expr;	/* sharded: the index expression (image) */
	const char *key_col;		/* sharded: its base column */
	char key_text[PLAN_RENDER_MAX];	/* sharded: canonical text of the expression */
	enum ks_type col_type;		/* type of key_col */
	bool typed;			/* col_type known */
	uint8_t *bits;			/* routing set over the group's ranges; NULL = all */
	bool from_eq;			/* constrained by equality only */
	uint32_t comp;			/* union-find parent (co-located component) */
	int32_t att;			/* at a component's root: the rel (of an enclosing scope)
					 * whose rows its rows follow, -1: none (see plan.c) */
	bool att_in;			/* att comes from `key IN (SELECT key ...)` */
	bool where_key;			/* its scope's WHERE restricts its shard key (= / IN:
					 * such a predicate also rejects its NULL-extended rows) */
};

/* Planning state of one statement. */
struct pctx {
	struct rarena *a;
	const struct stmt *s;
	const struct plan_input *in;
	const void *img;
	struct nk_error *err;
	struct plan *out;
	struct prel *rels;
	uint32_t nrels;
	int32_t *rel_of;		/* stmt.rels index -> rels index; -1 (a CTE reference) */
	uint32_t vcap;			/* capacity of out->values */
	/* what planning read of this execution's values (plan_memo.c decides from it
	 * whether the next executions may reuse the plan) */
	uint32_t nslot_reads;		/* slots ($n, normalised literals) read */
	uint32_t nkey_values;		/* shard-key values routed by plan_value_range() */
	const struct stmt_value *key_value;	/* the last of them */
	const struct prel *key_rel;
	bool key_direct;
};

/* A routing set: all ranges, or a bitmap over the ranges of one group. */
struct rset {
	bool all;
	uint8_t *bits;
};

/* plan.c */
bool plan_resolve_rels(struct pctx *c);
/* True when <p> is a view or materialized view whose query reads a sharded table. */
bool plan_view_of_sharded(struct pctx *c, const struct prel *p);
/* The root of rel <i>'s co-located component. */
uint32_t plan_comp(struct pctx *c, uint32_t i);
/* The rel (index in c->rels) a column reference of <scope> names, innermost scope first;
 * -1 when unknown or ambiguous. */
int plan_resolve_col(struct pctx *c, uint16_t scope, const char *qual, const char *col);
/* <col> of sharded rel <i> is its shard key's base column (equal values meet on a shard);
 * never for a key over several columns. */
bool plan_is_key_col(const struct pctx *c, int i, const char *col);
/* <p> is sharded by an expression over several columns (spec 2.5 V3): stored, but no value
 * routes it (INSERT 10, INSERT ... SELECT 117, `=` on every base column 115, COPY 45). */
bool plan_multi_key(const struct prel *p);
/* <col> is one of the base columns of sharded <p>'s key (assigning it: 145). */
bool plan_is_key_base(const struct prel *p, const char *col);
bool plan_route_rels(struct pctx *c);
bool plan_decide(struct pctx *c);
/* Key value of <v> for rel <p> (<direct>: already the expression's value) routed to a range. */
bool plan_value_range(struct pctx *c, const struct prel *p, const struct stmt_value *v,
		      bool direct, uint32_t *range, bool *is_null);
/* The integer value of <v> (a literal or a bound parameter) read as <type> into *<out>;
 * *<is_null> for NULL. False with <err> (22P02, 22003, ...) when it is not one. */
bool plan_value_int(struct pctx *c, const struct stmt_value *v, enum ks_type type, int64_t *out,
		    bool *is_null);
/* The text of <v> (CONST text, a literal, a text-format parameter; copied into the arena);
 * *<out> NULL for other values, *<is_null> for NULL. 0A000 for a binary parameter. */
bool plan_value_text(struct pctx *c, const struct stmt_value *v, const char **out,
		     bool *is_null);
/* Reference table <p> has a copy on shard <uid>. */
bool plan_ref_has_copy(const struct pctx *c, const struct prel *p, const char *uid);
/* Fill out->shards (distinct, sorted) from <bits> over group <g>. */
bool plan_shards_from_bits(struct pctx *c, uint32_t g, const uint8_t *bits);
bool plan_add_shard(struct pctx *c, const char *uid);
void plan_set_single(struct pctx *c, const char *shard, enum plan_op op);
/* Sharded rels <a> and <b> give equal keys the same shard (same group, equivalent index). */
bool plan_colocated(const struct pctx *c, const struct prel *a, const struct prel *b);
/* The innermost subquery the executor could evaluate first holding scope <sc>, or <sc>
 * itself: a subquery in an expression, a derived table, a WITH query (not recursive, not
 * writing) or an arm of the top level's set operation (plan_top_arm()) whose text is known, that qualifies no column of its outer query and would not
 * need rows of its own read first (plan_scope_gathers()); 0 when none. What
 * plan.materialize names. */
uint16_t plan_evaluable_of(struct pctx *c, uint16_t sc);
/* Is scope <sc> (or one inside it) planned on its own over several shards in need of rows
 * read first: a window function, an aggregate the merge cannot combine, or sharded tables
 * of components that meet off the shard key? The executor does not nest such reads: the
 * tables are read instead (plan.broadcast), one per round. */
bool plan_scope_gathers(struct pctx *c, uint16_t sc);
/* Is scope <s> <sc> or inside it? */
bool plan_within(const struct pctx *c, uint16_t s, uint16_t sc);
/* Is scope <sc> an arm of the top level's set operation (of a SELECT: every scope above it a
 * set operation) and no set operation itself? The executor can evaluate it first (its text
 * is an arm between the set operation's keywords). */
bool plan_top_arm(const struct pctx *c, uint16_t sc);
/* Does scope <sc> qualify a column with a name no FROM item inside it defines (`k.code` of
 * its outer query: correlated), or compare with = an unqualified column that the catalog
 * finds only in a table outside it (`l_partkey = p_partkey`)? Other unqualified outer
 * columns are not seen. */
bool plan_reads_outer(struct pctx *c, uint16_t sc);
/* The statement is refused for where the rows of rels[<i>] are: unless a scope is named
 * already (plan.materialize), name that table (a plain FROM item) for the executor to read
 * as a derived table, then evaluate first (plan.broadcast). */
void plan_broadcast(struct pctx *c, int32_t i);
/* Scope <sc> of a SELECT over several shards needs every row it reads in one place (a
 * window not partitioned by the shard key, an aggregate the merge cannot combine): name a
 * derived table inside it (plan.materialize) or a sharded table (plan.broadcast), so the
 * router reads them first, one per round, and the scope runs over their rows. Returns
 * false: the caller has set the refusal, which stands when no rows can be read so. */
bool plan_gather(struct pctx *c, uint16_t sc);
/* Key columns (GROUP BY, DISTINCT, ORDER BY) of a type the merge cannot order, and stddev /
 * variance of a float column, at the top level of a SELECT over several shards: refused
 * with what to read first (plan_gather()); true when there is none. */
bool plan_check_gather_types(struct pctx *c);
/* The table column <ref> of the top level names: a FROM item's, or one of a derived table
 * of the top level's FROM that has such a column (`(SELECT * FROM orders) orders`, how a
 * table read through the router first is written); NULL when none. */
const struct prel *plan_top_column_rel(struct pctx *c, const struct stmt_colref *ref);
/* plan_merge_agg.c: 0A000 for built-in aggregate <name> that has no combine; false. */
bool plan_refuse_aggregate(struct nk_error *err, const char *name);
/* Reference table <p> has a copy on shard <uid>. */
bool plan_ref_has_copy(const struct pctx *c, const struct prel *p, const char *uid);

/* plan_insert.c */
bool plan_insert(struct pctx *c);

/* plan_insel.c: INSERT ... SELECT into <t> (rels resolved, fills planned; <pos> the shard
 * key's position among the inserted columns, -1 when absent or not sharded): forwarded
 * when the rows meet their source, else PLAN_OP_INSERT_SELECT (plan.insel). */
bool plan_insert_select(struct pctx *c, struct prel *t, int pos);

/* plan_seq.c: sequence values the router supplies (fills of omitted identity/serial
 * columns, nextval() calls); the target rel <t> is resolved. */
bool plan_fills(struct pctx *c, struct prel *t);
bool plan_fill_key_plan(struct pctx *c, struct prel *t);
bool plan_nextvals(struct pctx *c);
/* Postgres' boolean input <s> (prefixes of true/false/yes/no, on/off with two letters at
 * least, 1/0, any case) into *<out>; false when it is none of them. */
bool plan_bool_text(const char *s, bool *out);
/* A session setting the router cannot follow (SET or set_config(), <value> NULL for a
 * reset): standard_conforming_strings off. False with the error in c->err. */
bool plan_check_setting(struct pctx *c, const char *name, const char *value);

/* plan_fn.c: the router-managed function calls of a planned SELECT / DML statement
 * (advisory locks by key, setval on the sequence's home shard, the notification functions
 * on the notify shard): moves a table-less statement to the shard they need, refuses 11,
 * 60, 62, and records what the executor does after (plan.pin, plan.setvals). */
bool plan_calls(struct pctx *c);
/* plan_seq.c: setval(<call>): its sequence's home shard into *<home>, the plan_setval kept. */
bool plan_setval(struct pctx *c, const struct stmt_call *call, const char **home);

/* plan_rewrite.c: a token of the statement text ('w' word, 'q' quoted identifier, 's' plain
 * string, 'S' other string, 'p' one of ( ) , . ; :, 'o' anything else). */
struct ptok {
	uint32_t start, len;
	char kind;
};

/* Tokens of <sql> (comments and whitespace skipped), in <a>; false on no memory. */
bool plan_lex(struct rarena *a, const char *sql, struct ptok **out, uint32_t *n);
/* Token <t> is the word or punctuation <word> (case-insensitive). */
bool ptok_is(const char *sql, const struct ptok *t, const char *word);
/* Tokens i.. are `<fname> ( <arg> [::regclass] )` (nextval, currval), or `lastval ( )`
 * for <fname> lastval (*arg = i then): the argument's and the ')' token. */
bool plan_find_nextval(const char *sql, const struct ptok *t, uint32_t n, uint32_t i,
		       const char *fname, uint32_t *arg, uint32_t *end);

/* plan_dist.c: a statement planned over several shards gives what one server would (each
 * row from exactly one shard), else the refusal; a reference-table write reading sharded
 * tables is refused on any number of shards. */
bool plan_check_dist(struct pctx *c);

/* plan_gsi.c: what a statement on the owner of an enabled GSI needs besides its route
 * (plan.gsi), or its refusal; planned after the route. */
bool plan_gsi(struct pctx *c);
/* An UPDATE of <t> may assign GSI column <col>: an indexed column of an enabled GSI (the
 * router moves its lookup rows), or the executor's own step. */
bool plan_gsi_assignable(const struct pctx *c, const struct prel *t, const char *col);
/* TRUNCATE naming the owner of an enabled GSI names its lookup table too, and the other
 * way round, else 0A000. */
bool plan_gsi_truncate(struct pctx *c);
/* COPY FROM into <t>: plan.gsi of kind COPY when <t> owns an enabled GSI, each lookup
 * column read from the input (NK013 44 when the COPY does not give one). */
bool plan_gsi_copy(struct pctx *c, const struct prel *t);
/* A statement naming the lookup table of an enabled GSI is 0A000 (spec 3.3), but for the
 * executor's own steps (plan_session.gsi_step) and a plain EXPLAIN. */
bool plan_gsi_refuse_lookups(struct pctx *c);
/* <p> owns an enabled GSI: *<name> (the first). */
bool plan_gsi_enabled(const struct pctx *c, const struct prel *p, const char **name);

/* plan_util.c */
/* Field number of column <col> of <p> in each row of the COPY's input, or -1. */
int plan_copy_field(const struct pctx *c, const struct prel *p, const char *col);
/* plan_binary_value() (neki/plan_gsi.h) into *<out> in the arena; false when the router
 * cannot read the value (or no memory: <err>). */
bool plan_binary_text(struct pctx *c, uint32_t oid, const char *data, int32_t len,
		      const char **out);
/* <p> owns a global secondary index (enabled or not) declaring <column>, or an enabled one
 * whose lookup rows hold it (owner_pk_columns). */
bool plan_owner_gsi(const struct pctx *c, const struct prel *p, const char *column);
/* Tables that cannot meet on one shard: 113, or 103 when an UPDATE / DELETE joins a
 * FROM / USING source (spec: a DML source join that cannot be planned safely), 121 for a
 * MERGE whose source is a derived table. */
bool plan_refuse_join(struct pctx *c);
bool plan_utility(struct pctx *c);
/* plan_memo.c: a plan the next executions of the statement may reuse (see plan.h). */
struct plan_memo {
	bool set;			/* holds a plan */
	uint32_t fails;			/* plans that could not be kept: give up after a few */
	uint64_t replays;		/* executions planned from it */
	struct plan tmpl;		/* the plan, its per-execution pointers cleared */
	const struct stmt_value *value;	/* the routing value (in the cached model) */
	const struct stmt_rel *rel;	/* its table (in the cached model) */
	bool direct;			/* the value is the index expression's */
	bool insert;			/* a one-row INSERT: plan.parts is its one row */
	uint32_t group, index;		/* image numbers */
	enum ks_type col_type;
	uint32_t nparams;		/* of the execution planned */
	bool extended, multi;
	bool gsi_step;			/* planned as a GSI's step (the plan has no GSI part) */
	struct rarena *arena;		/* the cache entry's: where tmpl.gsi is kept */
	char db[PLAN_MEMO_NAME], schema[PLAN_MEMO_NAME];
};

/* The plan of <c> (built) kept in <m> when it is one that only its key value decides. */
void plan_memo_record(struct pctx *c, struct plan_memo *m);
/* When <m> applies to this execution: build c->out from it and true, with *<ok> what
 * plan_build() returns (c->err set when false). False when it does not apply (plan
 * fully; c->out and c->err as they were). */
bool plan_memo_replay(struct pctx *c, struct plan_memo *m, bool *ok);

/* plan_cursor.c: DECLARE (its query planned as plan.inner), FETCH, MOVE, CLOSE. */
bool plan_cursor(struct pctx *c);
bool plan_check_session(struct pctx *c);
/* A write under __neki.target replica or rdonly: refused, 25006 (target.c). */
bool plan_check_target(struct pctx *c);

#endif /* NEKI_ROUTER_PLAN_INT_H */
