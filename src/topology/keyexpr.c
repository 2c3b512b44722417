/*
 * keyexpr.c - compile a shard index `columns` entry (a column name or an expression over
 * unqualified columns) into a struct ks_expr, using the Postgres parser (libpg_query) on
 * "SELECT <entry>" and reading its JSON parse tree with cJSON. The only file that includes
 * pg_query.h in src/topology. Evaluation is in kxeval.c.
 *
 * Accepted: column references, integer constants, + - * / (and unary minus), lower(),
 * upper(), left(x, <integer constant>), casts to int2/int4/int8/text/varchar (no typmod).
 * Everything else is refused here, so an unsupported key fails at apply time.
 */
#include "neki/base.h"

#include "neki/keyspace.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <pg_query.h>

#define SQL_PREFIX "SELECT "

struct kx_build {
	struct ks_expr *e;
	const char *sql;	/* "SELECT <text>", for constants the JSON output mangles */
	const char *text;	/* the entry as written, for messages */
	struct nk_error *err;
};

static int kx_node(struct kx_build *b, const cJSON *node);

static int
kx_fail(struct kx_build *b, const char *what)
{
	nk_error_set(b->err, ERRCODE_INVALID_PARAMETER_VALUE,
		     "unsupported shard key expression \"%s\": %s", b->text,
		     what);
	return -1;
}

static int
kx_emit(struct kx_build *b, enum ks_expr_op op, int a, int c, int64_t ival)
{
	struct ks_expr_node *n;

	if (b->e->nnodes >= KS_EXPR_MAX_NODES)
		return kx_fail(b, "expression is too long");
	n = &b->e->nodes[b->e->nnodes];
	n->op = op;
	n->a = a;
	n->b = c;
	n->pad = 0;
	n->ival = ival;
	return (int)b->e->nnodes++;
}

/* The single String value of a one-element list of {"String": {"sval": ...}}. */
static const char *
string_item(const cJSON *item)
{
	const cJSON *s = cJSON_GetObjectItemCaseSensitive(item, "String");
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, "sval");

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int
kx_column(struct kx_build *b, const cJSON *ref)
{
	const cJSON *fields = cJSON_GetObjectItemCaseSensitive(ref, "fields");
	const char *name;
	uint32_t k;

	if (cJSON_GetArraySize(fields) != 1)
		return kx_fail(b, "columns must be unqualified");
	name = string_item(cJSON_GetArrayItem(fields, 0));
	if (!name)
		return kx_fail(b, "\"*\" is not a column");
	if (strlen(name) >= KS_NAME_MAX)
		return kx_fail(b, "column name is too long");
	for (k = 0; k < b->e->ncolumns; k++)
		if (strcmp(b->e->columns[k], name) == 0)
			break;
	if (k == b->e->ncolumns) {
		if (k == KS_EXPR_MAX_COLUMNS)
			return kx_fail(b, "too many columns");
		strcpy(b->e->columns[k], name);
		b->e->ncolumns++;
	}
	return kx_emit(b, KS_OP_COLUMN, -1, -1, k);
}

/*
 * Integer constant. libpg_query 15's JSON output drops negative and zero "ival" values, so
 * the number is read back from the SQL text at the node's location.
 */
static int
kx_const(struct kx_build *b, const cJSON *c)
{
	const cJSON *loc = cJSON_GetObjectItemCaseSensitive(c, "location");
	const cJSON *fval = cJSON_GetObjectItemCaseSensitive(c, "fval");
	const char *start;
	char *end;
	long long v;

	if (!cJSON_GetObjectItemCaseSensitive(c, "ival") && !fval)
		return kx_fail(b, "only integer constants are supported");
	if (!cJSON_IsNumber(loc) || loc->valueint < 0 ||
	    (size_t)loc->valueint >= strlen(b->sql))
		return kx_fail(b, "constant without a location");
	start = b->sql + loc->valueint;
	errno = 0;
	v = strtoll(start, &end, 10);
	if (end == start || errno == ERANGE || *end == '.' || *end == 'e' || *end == 'E')
		return kx_fail(b, "only integer constants that fit in bigint are supported");
	return kx_emit(b, KS_OP_CONST_INT, -1, -1, v);
}

static int
kx_operator(struct kx_build *b, const cJSON *ax)
{
	const cJSON *kind = cJSON_GetObjectItemCaseSensitive(ax, "kind");
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(ax, "name");
	const cJSON *l = cJSON_GetObjectItemCaseSensitive(ax, "lexpr");
	const char *op = cJSON_GetArraySize(name) == 1 ?
				 string_item(cJSON_GetArrayItem(name, 0)) : NULL;
	static const char ops[] = "+-*/";
	const char *hit;
	int a, c;

	if (!cJSON_IsString(kind) || strcmp(kind->valuestring, "AEXPR_OP") != 0 || !op ||
	    strlen(op) != 1 || !(hit = strchr(ops, op[0])))
		return kx_fail(b, "only the operators + - * / are supported");
	a = l ? kx_node(b, l) : kx_emit(b, KS_OP_CONST_INT, -1, -1, 0);
	if (a < 0)
		return -1;
	if (!l && op[0] != '-')
		return kx_fail(b, "only unary minus is supported");
	c = kx_node(b, cJSON_GetObjectItemCaseSensitive(ax, "rexpr"));
	if (c < 0)
		return -1;
	return kx_emit(b, (enum ks_expr_op)(KS_OP_ADD + (hit - ops)), a, c, 0);
}

/* A FuncCall must be a plain call: no DISTINCT, ORDER BY, FILTER, OVER, VARIADIC or *. */
static bool
plain_call(const cJSON *fc)
{
	static const char *const extras[] = { "agg_order", "agg_filter", "over", "agg_star",
					       "agg_distinct", "func_variadic", "agg_within_group" };

	for (size_t i = 0; i < NK_ARRAY_LEN(extras); i++)
		if (cJSON_GetObjectItemCaseSensitive(fc, extras[i]))
			return false;
	return true;
}

static int
kx_func(struct kx_build *b, const cJSON *fc)
{
	const cJSON *fname = cJSON_GetObjectItemCaseSensitive(fc, "funcname");
	const cJSON *args = cJSON_GetObjectItemCaseSensitive(fc, "args");
	int nname = cJSON_GetArraySize(fname), nargs = cJSON_GetArraySize(args), a, c;
	const char *name = string_item(cJSON_GetArrayItem(fname, nname - 1));
	const char *schema = nname == 2 ? string_item(cJSON_GetArrayItem(fname, 0)) : NULL;

	if (!name || nname > 2 || (nname == 2 && (!schema || strcmp(schema, "pg_catalog") != 0)) ||
	    !plain_call(fc))
		return kx_fail(b, "only lower(), upper() and left() calls are supported");
	if ((strcmp(name, "lower") == 0 || strcmp(name, "upper") == 0) && nargs == 1) {
		a = kx_node(b, cJSON_GetArrayItem(args, 0));
		return a < 0 ? -1 : kx_emit(b, name[0] == 'l' ? KS_OP_LOWER : KS_OP_UPPER, a, -1, 0);
	}
	if (strcmp(name, "left") == 0 && nargs == 2) {
		a = kx_node(b, cJSON_GetArrayItem(args, 0));
		if (a < 0)
			return -1;
		c = kx_node(b, cJSON_GetArrayItem(args, 1));
		if (c < 0)
			return -1;
		if (b->e->nodes[c].op != KS_OP_CONST_INT)
			return kx_fail(b, "the length of left() must be an integer constant");
		return kx_emit(b, KS_OP_LEFT, a, c, 0);
	}
	return kx_fail(b, "only lower(), upper() and left() calls are supported");
}

static int
kx_cast(struct kx_build *b, const cJSON *tc)
{
	static const struct {
		const char *name;
		enum ks_expr_op op;
	} casts[] = {
		{ "int2", KS_OP_CAST_INT2 }, { "int4", KS_OP_CAST_INT4 },
		{ "int8", KS_OP_CAST_INT8 }, { "text", KS_OP_CAST_TEXT },
		{ "varchar", KS_OP_CAST_TEXT },
	};
	const cJSON *tn = cJSON_GetObjectItemCaseSensitive(tc, "typeName");
	const cJSON *names = cJSON_GetObjectItemCaseSensitive(tn, "names");
	const char *name = string_item(cJSON_GetArrayItem(names, cJSON_GetArraySize(names) - 1));
	int a;

	if (!name || cJSON_GetObjectItemCaseSensitive(tn, "typmods") ||
	    cJSON_GetObjectItemCaseSensitive(tn, "arrayBounds"))
		return kx_fail(b, "only casts to int2, int4, int8, text and varchar are supported");
	for (size_t i = 0; i < NK_ARRAY_LEN(casts); i++) {
		if (strcmp(casts[i].name, name) != 0)
			continue;
		a = kx_node(b, cJSON_GetObjectItemCaseSensitive(tc, "arg"));
		return a < 0 ? -1 : kx_emit(b, casts[i].op, a, -1, 0);
	}
	return kx_fail(b, "only casts to int2, int4, int8, text and varchar are supported");
}

/* Compile one parse-tree node; returns its node number or -1 (error set). */
static int
kx_node(struct kx_build *b, const cJSON *node)
{
	const cJSON *inner = node ? node->child : NULL;
	const char *kind = inner ? inner->string : NULL;

	if (!kind)
		return kx_fail(b, "empty expression");
	if (strcmp(kind, "ColumnRef") == 0)
		return kx_column(b, inner);
	if (strcmp(kind, "A_Const") == 0)
		return kx_const(b, inner);
	if (strcmp(kind, "A_Expr") == 0)
		return kx_operator(b, inner);
	if (strcmp(kind, "FuncCall") == 0)
		return kx_func(b, inner);
	if (strcmp(kind, "TypeCast") == 0)
		return kx_cast(b, inner);
	return kx_fail(b, "only columns, integer constants, + - * /, lower(), upper(), left() "
			  "and integer or text casts are supported");
}

/* The one target of the one plain SELECT in the tree, or NULL. */
static const cJSON *
single_target(const cJSON *tree)
{
	const cJSON *stmts = cJSON_GetObjectItemCaseSensitive(tree, "stmts");
	const cJSON *stmt, *sel, *targets, *rt, *field;

	if (cJSON_GetArraySize(stmts) != 1)
		return NULL;
	stmt = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(stmts, 0), "stmt");
	sel = cJSON_GetObjectItemCaseSensitive(stmt, "SelectStmt");
	targets = cJSON_GetObjectItemCaseSensitive(sel, "targetList");
	if (!sel || cJSON_GetArraySize(targets) != 1)
		return NULL;
	cJSON_ArrayForEach(field, sel) {
		if (strcmp(field->string, "targetList") != 0 &&
		    strcmp(field->string, "limitOption") != 0 && strcmp(field->string, "op") != 0)
			return NULL;
	}
	rt = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(targets, 0), "ResTarget");
	if (!rt || cJSON_GetObjectItemCaseSensitive(rt, "name"))
		return NULL;
	return cJSON_GetObjectItemCaseSensitive(rt, "val");
}

static bool
compile_tree(struct kx_build *b, const char *json)
{
	cJSON *tree = cJSON_Parse(json);
	const cJSON *val;
	bool ok;

	if (!tree)
		return nk_error_oom(b->err);
	val = single_target(tree);
	ok = val ? kx_node(b, val) >= 0 : kx_fail(b, "must be a single expression") >= 0;
	/* a constant routes every row to one place: the spec wants an expression over columns */
	if (ok && b->e->ncolumns == 0)
		ok = kx_fail(b, "it names no column") >= 0;
	cJSON_Delete(tree);
	return ok;
}

/* ks_expr_parse: see keyspace.h. */
bool
ks_expr_parse(const char *text, struct ks_expr *out, struct nk_error *err)
{
	struct kx_build b = { out, NULL, text, err };
	size_t n = strlen(text);
	char *sql = malloc(sizeof(SQL_PREFIX) + n);
	PgQueryParseResult res;
	bool ok;

	memset(out, 0, sizeof(*out));
	if (!sql)
		return nk_error_oom(err);
	memcpy(sql, SQL_PREFIX, sizeof(SQL_PREFIX) - 1);
	memcpy(sql + sizeof(SQL_PREFIX) - 1, text, n + 1);
	b.sql = sql;
	res = pg_query_parse(sql);
	if (res.error) {
		nk_error_set(err, ERRCODE_INVALID_PARAMETER_VALUE,
			     "invalid shard key expression \"%s\": %s", text,
			     res.error->message);
		ok = false;
	} else {
		ok = compile_tree(&b, res.parse_tree);
	}
	pg_query_free_parse_result(res);
	free(sql);
	if (!ok)
		memset(out, 0, sizeof(*out));
	return ok;
}

/* ks_expr_is_column: see keyspace.h. */
bool
ks_expr_is_column(const struct ks_expr *e)
{
	return e->nnodes == 1 && e->nodes[0].op == KS_OP_COLUMN;
}
