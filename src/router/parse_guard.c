/*
 * parse_guard.c - the __neki store belongs to neki: a client statement that names an object
 * in the `__neki` schema (neki's topology store on the authoritative shard) is refused on its
 * parse tree, whatever the spelling, before it is planned. Only calls of neki's own
 * functions (`__neki.list_shards()`, ...) may name the schema.
 *
 * The parse tree has the identifiers as Postgres resolves them: unquoted ones folded to lower
 * case, quoted and U&"..." ones decoded, so one comparison with "__neki" covers every
 * spelling. What is refused, anywhere in the statement (CTEs, sub-queries, EXPLAIN, PREPARE,
 * rules, SQL-standard function bodies):
 *   - a qualified name through the schema (relation, function, type, operator, column
 *     reference, COPY / LOCK / TRUNCATE / ALTER target): RangeVar.schemaname, a String name
 *     component "__neki" outside string literals;
 *   - the schema itself as an object (DROP/ALTER/COMMENT ON SCHEMA, GRANT ... IN SCHEMA,
 *     ALTER ... SET SCHEMA __neki, ALTER SCHEMA x RENAME TO __neki);
 *   - a search_path naming it (SET, ALTER ROLE/DATABASE ... SET, set_config()), which would
 *     make unqualified names resolve into the store;
 *   - a DO block or a function body (a string) mentioning it.
 * Dynamic SQL built from pieces inside a function cannot be seen here: the store's
 * ownership (doc/topology.md, "The __neki store and roles") is what stops it.
 * A call of a neki function is left to the statement's caller (stmt.neki_fn).
 * Entry point: pb_guard_check().
 */
#include "neki/base.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "neki/error.h"
#include "parse_int.h"

#define GUARD_SCHEMA "__neki"

/* Does <s> mention the schema as a word (case-insensitive: an unquoted name in a string)? */
static bool
text_mentions(const char *s)
{
	size_t n = strlen(GUARD_SCHEMA);

	for (const char *p = s; p && (p = strcasestr(p, GUARD_SCHEMA)) != NULL; p += n) {
		unsigned char after = (unsigned char)p[n];

		if (!isalnum(after) && after != '_' && after != '$')
			return true;
	}
	return false;
}

/* A string field whose value is a schema name (the object's schema or the new one). */
static bool
is_schema_key(const char *key)
{
	static const char *const keys[] = { "schemaname", "newschema", "newname", "subname" };

	for (size_t i = 0; key && i < NK_ARRAY_LEN(keys); i++)
		if (strcmp(key, keys[i]) == 0)
			return true;
	return false;
}

/*
 * FuncCall <fc>: a call `__neki.<fn>(...)`? The store holds no functions (a statement
 * creating one is refused), so such a call is one of neki's own or of none: the statement's
 * caller answers it (stmt.neki_fn), no shard sees it.
 */
static bool
is_own_call(const cJSON *fc)
{
	const cJSON *names = jget(fc, "funcname");
	const char *schema, *fn;

	if (cJSON_GetArraySize(names) != 2)
		return false;
	schema = jsval(cJSON_GetArrayItem(names, 0));
	fn = jsval(cJSON_GetArrayItem(names, 1));
	return schema && fn && strcmp(schema, GUARD_SCHEMA) == 0;
}

/* Any string literal (A_Const sval) at or under <n> mentioning the schema? */
static bool
consts_mention(const cJSON *n)
{
	const cJSON *c;

	if (n == NULL)
		return false;
	if (n->string && strcmp(n->string, "A_Const") == 0)
		return text_mentions(jstr(jget(n, "sval"), "sval"));
	cJSON_ArrayForEach(c, n)
		if (consts_mention(c))
			return true;
	return false;
}

/* set_config('search_path', '...', ...) with a value naming the schema? */
static bool
is_search_path_call(const cJSON *fc)
{
	const cJSON *args = jget(fc, "args");
	const char *name = pb_last_name(jget(fc, "funcname"));
	const char *var = jstr(jget(jas(cJSON_GetArrayItem(args, 0), "A_Const"), "sval"), "sval");

	return name && strcmp(name, "set_config") == 0 && var &&
	       strcasecmp(var, "search_path") == 0 && consts_mention(cJSON_GetArrayItem(args, 1));
}

/* A body given as a string (DO, CREATE FUNCTION ... AS '...') mentioning the schema? */
static bool
body_mentions(const cJSON *defelem)
{
	const char *name = jstr(defelem, "defname");
	const cJSON *arg = jget(defelem, "arg"), *c;

	if (!name || strcmp(name, "as") != 0)
		return false;
	if (jsval(arg))
		return text_mentions(jsval(arg));
	cJSON_ArrayForEach(c, jget(jget(arg, "List"), "items"))	/* CREATE FUNCTION */
		if (jsval(c) && text_mentions(jsval(c)))
			return true;
	return false;
}

/* The calls of neki's own functions seen. */
struct guard_calls {
	const char *first;		/* the first one's function name */
	int32_t loc;			/* its byte offset in the text */
	unsigned n;
	bool in_from, alias;		/* it is a FROM item; with an alias */
	const cJSON *from_call;		/* the FuncCall of the RangeFunction being walked */
	bool from_alias;
};

/* Does the subtree <n> (member <n>->string of its parent) name the schema? The calls of
 * neki's own functions go to <own>. */
static bool
names_store(const cJSON *n, struct guard_calls *own)
{
	const char *key = n->string;
	const cJSON *c;

	if (cJSON_IsString(n))
		return is_schema_key(key) && strcmp(n->valuestring, GUARD_SCHEMA) == 0;
	if (key && strcmp(key, "A_Const") == 0)
		return false;		/* a string literal is data, not a name */
	if (key && strcmp(key, "String") == 0)
		return jstr(n, "sval") && strcmp(jstr(n, "sval"), GUARD_SCHEMA) == 0;
	if (jstr(n, "name") && strcasecmp(jstr(n, "name"), "search_path") == 0 &&
	    consts_mention(jget(n, "args")))
		return true;	/* a VariableSetStmt (wrapped, or ALTER ROLE's setstmt) */
	if (key && strcmp(key, "FuncCall") == 0) {
		if (is_search_path_call(n))
			return true;
		if (is_own_call(n)) {
			if (own->n++ == 0) {
				own->first = jsval(cJSON_GetArrayItem(jget(n, "funcname"), 1));
				own->loc = (int32_t)jint(n, "location", -1);
				own->in_from = n == own->from_call;
				own->alias = own->in_from && own->from_alias;
			}
			cJSON_ArrayForEach(c, n)
				if (strcmp(c->string, "funcname") != 0 && names_store(c, own))
					return true;
			return false;
		}
	}
	if (key && strcmp(key, "DefElem") == 0 && body_mentions(n))
		return true;
	if (key && strcmp(key, "RangeFunction") == 0) {	/* FROM __neki.fn(...) [AS a] */
		const cJSON *fns = jget(n, "functions");
		const cJSON *items = jget(jget(cJSON_GetArrayItem(fns, 0), "List"), "items");

		own->from_call = cJSON_GetArraySize(fns) == 1 ? jget(cJSON_GetArrayItem(items, 0),
								   "FuncCall") : NULL;
		own->from_alias = jget(n, "alias") != NULL || jget(n, "coldeflist") != NULL ||
				  jbool(n, "ordinality") || jbool(n, "lateral");
	}
	cJSON_ArrayForEach(c, n)
		if (names_store(c, own))
			return true;
	return false;
}

/* pb_guard_check: see parse_int.h. */
bool
pb_guard_check(struct pb *b, const cJSON *tree, struct nk_error *err)
{
	struct guard_calls own = { NULL, -1, 0, false, false, NULL, false };

	if (tree != NULL && names_store(tree, &own)) {
		nk_error_set(err, ERRCODE_INSUFFICIENT_PRIVILEGE,
			     "permission denied for schema " GUARD_SCHEMA);
		nk_error_detail(err, "The " GUARD_SCHEMA " schema holds neki's data topology "
				"store; a client statement may name only neki's own " GUARD_SCHEMA
				" functions.");
		nk_error_hint(err, "Call them as SELECT * FROM " GUARD_SCHEMA ".<function>(...);"
			      " __neki.list_metafuncs() lists them.");
		return false;
	}
	b->s->neki_fn = pb_strdup(b, own.first);
	b->s->neki_ncalls = own.n;
	b->s->neki_loc = own.loc;
	b->s->neki_in_from = own.in_from;
	b->s->neki_alias = own.alias;
	return true;
}
