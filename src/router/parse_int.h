/*
 * parse_int.h - private to the libpg_query adapter (parse.c, parse_expr.c, parse_util.c):
 * the translation state and the cJSON accessors over libpg_query's JSON parse tree.
 * plan_merge.c also reads the tree through these accessors (the merge spec).
 */
#ifndef NEKI_ROUTER_PARSE_INT_H
#define NEKI_ROUTER_PARSE_INT_H

#include "neki/base.h"

#include "neki/parse.h"
#include "neki/parse_kinds.h"

#include <cjson/cJSON.h>

/* A CTE: visible in the scope holding its WITH and below it. */
struct pb_cte {
	const char *name;		/* arena */
	uint16_t with;			/* the scope whose WITH defines it */
	uint16_t scope;			/* its own scope once translated; 0 before */
	bool visible;			/* a name may refer to it (WITH RECURSIVE: at once; else
					 * after its own query, as Postgres resolves names) */
};

/* Translation state of one statement. */
struct pb {
	struct rarena *a;		/* borrowed: the model's arena */
	struct stmt *s;			/* the model being filled */
	const char *sql;		/* borrowed: the parsed text */
	const struct parse_norm *norm;	/* borrowed; NULL: literals stay CONST */
	bool oom;			/* an allocation failed (the model is unusable) */
	uint32_t rel_cap, scope_cap, join_cap, func_cap, call_cap, node_cap, qual_cap;
	struct pb_cte *ctes;		/* every CTE of the statement so far */
	uint32_t nctes, cte_cap;
	int32_t cur_node;		/* the JOIN node whose ON is being translated; -1: none */
	uint32_t in_or;			/* depth of OR around the condition being translated */
	bool in_cond;			/* building a predicate: its values were walked already */
	enum pb_ctx { PB_CTX_OTHER = 0, PB_CTX_WHERE, PB_CTX_SET, PB_CTX_VALUES } ctx;
					/* clause being translated (where nextval() is) */
};

/* ---- cJSON accessors (NULL-safe) ---- */

static inline const cJSON *
jget(const cJSON *o, const char *key)
{
	return o ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
}

static inline const char *
jstr(const cJSON *o, const char *key)
{
	const cJSON *v = jget(o, key);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static inline bool
jbool(const cJSON *o, const char *key)
{
	return cJSON_IsTrue(jget(o, key));
}

static inline int
jint(const cJSON *o, const char *key, int dflt)
{
	const cJSON *v = jget(o, key);

	return cJSON_IsNumber(v) ? v->valueint : dflt;
}

/* The tag of a wrapped node {"Tag": {...}}, and its body. */
static inline const char *
jtag(const cJSON *n)
{
	return n && cJSON_IsObject(n) && n->child ? n->child->string : NULL;
}

static inline const cJSON *
jbody(const cJSON *n)
{
	return n && cJSON_IsObject(n) ? n->child : NULL;
}

/* The body of wrapped node <n> when its tag is <tag>, else NULL. */
static inline const cJSON *
jas(const cJSON *n, const char *tag)
{
	const char *t = jtag(n);

	return t && __builtin_strcmp(t, tag) == 0 ? n->child : NULL;
}

/* {"String": {"sval": s}} -> s */
static inline const char *
jsval(const cJSON *n)
{
	return jstr(jas(n, "String"), "sval");
}

/* DO block (the DoStmt body): the PL/pgSQL limit (80-95) its body hits; 0 none
 * (parse_plpgsql.c). */
int pb_plpgsql_code(const cJSON *dostmt);

/* Last String of a name list (["pg_catalog", "int4"] -> "int4"). */
const char *pb_last_name(const cJSON *list);

/* ---- model building (parse.c) ---- */

/* Arena allocation that records failure in <b>. */
void *pb_alloc(struct pb *b, size_t size);
const char *pb_strdup(struct pb *b, const char *s);
/* Record qualifier (or, <defines>, derived-table alias) <name> of <scope> (stmt.quals). */
void pb_qual(struct pb *b, const char *name, uint16_t scope, bool defines);

/* Grow-by-doubling push onto an arena array; returns the new zeroed element or NULL. */
void *pb_push(struct pb *b, void **arr, uint32_t *n, uint32_t *cap, size_t elem);

/* A new scope of <kind> under <parent> (no FROM items yet); returns its id. */
uint16_t pb_scope_new(struct pb *b, uint16_t parent, enum stmt_scope_kind kind);

/* A plain column reference <n> (ColumnRef without *) into <out> (names copied into the
 * arena); false otherwise. */
bool pb_colref(struct pb *b, const cJSON *n, struct stmt_colref *out);

/* Record a called function name (lowercased by the parser). */
void pb_func(struct pb *b, const char *name);

/* A new FROM node of <kind> in <scope>; its index, or -1 on no memory. */
int32_t pb_node(struct pb *b, enum stmt_node_kind kind, uint16_t scope);
/* Append node <n> to <scope>'s FROM list. */
void pb_from_append(struct pb *b, uint16_t scope, int32_t n);
/* Walk <n> (in <scope>) as clause <ctx>. */
void pb_walk_ctx(struct pb *b, const cJSON *n, uint16_t scope, enum pb_ctx ctx);
/* Add the table of RangeVar <rv> to the model. */
struct stmt_rel *pb_rel(struct pb *b, const cJSON *rv, uint16_t scope);
/* The ON clause of join node <nd> (its equalities carry the node). */
struct stmt_cond *pb_join_on(struct pb *b, const cJSON *quals, uint16_t scope, int32_t nd);
/* One FROM item of <scope> (<nullable>: under an outer join's nullable side); its node. */
int32_t pb_from_item(struct pb *b, const cJSON *n, uint16_t scope, bool nullable);
/* The WITH clause <with> of <scope>: each CTE a scope of its own. */
void pb_with(struct pb *b, const cJSON *with, uint16_t scope);

/* Shape matchers for pb_find(): a sub-SELECT, a router-only function (now(), ...), a
 * parameter $n, an OLD / NEW column (rules). */
bool m_sublink(const char *key, const cJSON *node);
bool m_router_only(const char *key, const cJSON *node);
bool m_param(const char *key, const cJSON *node);
bool m_old_new(const char *key, const cJSON *node);

/* Translate a SelectStmt body into scope <scope> (top: the statement's own SELECT). */
void pb_select(struct pb *b, const cJSON *sel, uint16_t scope, bool top);

/* Translate an InsertStmt/UpdateStmt/DeleteStmt/MergeStmt body into scope <scope> (0 for
 * the statement itself, a data-modifying CTE's scope otherwise). */
void pb_dml(struct pb *b, const char *tag, const cJSON *body, bool top, uint16_t scope);

/* ---- expressions (parse_expr.c) ---- */

/* Walk any subtree: functions, aggregates, windows, sub-SELECTs (new scopes), grouping sets. */
void pb_walk(struct pb *b, const cJSON *n, uint16_t scope, bool top);

/* WHERE/ON clause -> condition tree; also records join equalities and walks subqueries. */
struct stmt_cond *pb_cond(struct pb *b, const cJSON *n, uint16_t scope);

/* AND <extra> into scope <scope>'s WHERE. */
void pb_cond_and(struct pb *b, uint16_t scope, struct stmt_cond *extra);

/* A value position (VALUES cell, SET value, predicate right side). */
void pb_value(struct pb *b, const cJSON *n, uint16_t scope, struct stmt_value *out);

/* A set-returning function the router knows (generate_series, unnest, ...). */
bool pb_srf_name(const char *name);
/* Functions the router evaluates itself in Neki (spec 3.3 "Router-only expressions"). */
bool pb_router_only_name(const char *name);
/* An advisory-lock function: 1 session-level, 2 transaction-level (_xact_), 0 none. */
int pb_advisory_name(const char *name);
/* True when some member of <n> (at any depth) satisfies <match>(its key, itself). */
bool pb_find(const cJSON *n, bool (*match)(const char *key, const cJSON *node));

/* ---- the __neki store (parse_guard.c) ---- */

/* True unless the whole parse tree <tree> names an object in the __neki schema other than
 * neki's own functions; then <err> is 42501 and false. Sets b->s->neki_fn. */
bool pb_guard_check(struct pb *b, const cJSON *tree, struct nk_error *err);

/* ---- utility statements (parse_util.c) ---- */

/* Translate utility statement <tag>/<body> into b->s (kind, tx/set/copy/explain, reject). */
void pb_utility(struct pb *b, const char *tag, const cJSON *body);

/* DECLARE / FETCH / MOVE / CLOSE <tag>/<body> into b->s (parse_cursor.c). */
void pb_cursor(struct pb *b, const char *tag, const cJSON *body);

/* Translate a statement node (wrapped) of any kind into b->s. */
void pb_statement(struct pb *b, const cJSON *stmt);

#endif /* NEKI_ROUTER_PARSE_INT_H */
