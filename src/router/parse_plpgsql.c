/*
 * parse_plpgsql.c - the PL/pgSQL limits of router-side execution (NK013 80-95) for a DO
 * block: Neki translates the PL/pgSQL routines the router runs and refuses the constructs
 * its translator lacks. neki runs no PL/pgSQL on the router (DO is 20), but a body using
 * one of those constructs reports the more precise code, as the first gap reached. The body
 * is parsed with libpg_query's PL/pgSQL parser (wrapped as a function) and its JSON tree
 * walked. Entry point: pb_plpgsql_code().
 */
#include "neki/base.h"

#include <ctype.h>
#include <pg_query.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "parse_int.h"

#define PLPGSQL_DEPTH_MAX 64

struct plw {
	const cJSON *datums;		/* the function's variables, by varno */
	const char *blocks[PLPGSQL_DEPTH_MAX];	/* labels of the enclosing blocks */
	int nblocks;
	int code;
};

/* A variable of record or %ROWTYPE type (or a row/record datum): composite. */
static bool
composite_var(const struct plw *w, int varno)
{
	const cJSON *d = cJSON_GetArrayItem(w->datums, varno);
	const char *tag = jtag(d), *ty;

	if (!tag)
		return false;
	if (strcmp(tag, "PLpgSQL_rec") == 0)
		return true;
	ty = jstr(jas(jget(jget(d, tag), "datatype"), "PLpgSQL_type"), "typname");
	return ty && (strcasecmp(ty, "record") == 0 || strcasestr(ty, "%rowtype") != NULL);
}

/* The variable name of datum <varno>, or NULL. */
static const char *
var_name(const struct plw *w, int varno)
{
	const cJSON *d = cJSON_GetArrayItem(w->datums, varno);

	return jstr(jget(d, jtag(d)), "refname");
}

/* Does the SQL text <q> reference a field of a composite variable (name followed by '.')? */
static bool
refs_record_field(const struct plw *w, const char *q)
{
	int n = cJSON_GetArraySize(w->datums);

	for (int v = 0; q && v < n; v++) {
		const char *name = var_name(w, v);
		size_t len = name ? strlen(name) : 0;

		if (!len || !composite_var(w, v))
			continue;
		for (const char *p = strcasestr(q, name); p; p = strcasestr(p + 1, name))
			if (p[len] == '.' && (p == q || !(isalnum((unsigned char)p[-1]) || p[-1] == '_')))
				return true;
	}
	return false;
}

static const char *
expr_query(const cJSON *stmt, const char *key)
{
	return jstr(jas(jget(stmt, key), "PLpgSQL_expr"), "query");
}

/* An assignment target "a[1:2]" or "a[1][2]" (the text before ":="). */
static bool
nested_target(const char *q)
{
	const char *end = q ? strstr(q, ":=") : NULL;
	int brackets = 0;

	for (const char *p = q; p && p < end; p++) {
		if (*p == '[')
			brackets++;
		if (*p == ':' && brackets > 0)
			return true;
	}
	return brackets > 1;
}

static bool
block_label(const struct plw *w, const char *label)
{
	for (int i = 0; label && i < w->nblocks; i++)
		if (w->blocks[i] && strcmp(w->blocks[i], label) == 0)
			return true;
	return false;
}

/* The code a statement <tag> <s> hits; 0 none. */
static int
stmt_code(const struct plw *w, const char *tag, const cJSON *s)
{
	if (strcmp(tag, "PLpgSQL_stmt_foreach_a") == 0)
		return composite_var(w, jint(s, "varno", -1)) ? 80 : jint(s, "slice", 0) > 0 ? 81 : 0;
	if (strcmp(tag, "PLpgSQL_stmt_assign") == 0) {
		if (nested_target(expr_query(s, "expr")))
			return 82;
		return composite_var(w, jint(s, "varno", -1)) ? 83 : 0;
	}
	if (strcmp(tag, "PLpgSQL_stmt_execsql") == 0 && jbool(s, "into")) {
		const cJSON *f, *row = jas(jget(s, "target"), "PLpgSQL_row");

		cJSON_ArrayForEach(f, jget(row, "fields"))
			if (composite_var(w, jint(f, "varno", -1)))
				return 85;
		if (jget(s, "target") && !row)
			return 85;
	}
	if (strcmp(tag, "PLpgSQL_stmt_getdiag") == 0 && jbool(s, "is_stacked"))
		return 90;
	if (strcmp(tag, "PLpgSQL_stmt_exit") == 0 && block_label(w, jstr(s, "label")))
		return 91;
	if (strcmp(tag, "PLpgSQL_stmt_raise") == 0) {
		if (!jget(s, "condname") && !jget(s, "message") && !jget(s, "options"))
			return 92;
		if (jget(s, "options"))
			return 93;
	}
	if (strcmp(tag, "PLpgSQL_stmt_return_next") == 0 && !jget(s, "expr") &&
	    !jget(s, "retvarno"))
		return 94;
	if (strcmp(tag, "PLpgSQL_stmt_return_query") == 0 && jget(s, "dynquery"))
		return 95;
	return 0;
}

/* Statements in text order: the first one hitting a limit decides. */
static void
walk(struct plw *w, const cJSON *n, int depth)
{
	const cJSON *c;

	if (!n || w->code || depth > 200)
		return;
	if (cJSON_IsObject(n) && n->child && !n->child->next && n->child->string &&
	    strncmp(n->child->string, "PLpgSQL_stmt_", 13) == 0) {
		const char *tag = n->child->string;
		const cJSON *s = n->child;
		bool block = strcmp(tag, "PLpgSQL_stmt_block") == 0;
		const char *q = expr_query(s, "expr") ? expr_query(s, "expr") :
				expr_query(s, "sqlstmt");

		if ((w->code = stmt_code(w, tag, s)) != 0)
			return;
		if (refs_record_field(w, q) && strcmp(tag, "PLpgSQL_stmt_assign") != 0) {
			w->code = 84;
			return;
		}
		if (block && w->nblocks < PLPGSQL_DEPTH_MAX)
			w->blocks[w->nblocks++] = jstr(s, "label");
		cJSON_ArrayForEach(c, s)
			walk(w, c, depth + 1);
		if (block && w->nblocks > 0)
			w->nblocks--;
		return;
	}
	cJSON_ArrayForEach(c, n)
		walk(w, c, depth + 1);
}

/* pb_plpgsql_code: see parse_int.h. */
int
pb_plpgsql_code(const cJSON *dostmt)
{
	static const char head[] = "CREATE FUNCTION neki_do() RETURNS void LANGUAGE plpgsql AS "
				   "$neki_do$";
	static const char tail[] = "$neki_do$";
	const char *body = NULL, *lang = NULL;
	const cJSON *o;
	PgQueryPlpgsqlParseResult r;
	struct plw w;
	cJSON *tree;
	char *sql;
	size_t len;

	cJSON_ArrayForEach(o, jget(dostmt, "args")) {
		const cJSON *d = jas(o, "DefElem");

		if (jstr(d, "defname") && strcmp(jstr(d, "defname"), "as") == 0)
			body = jsval(jget(d, "arg"));
		else if (jstr(d, "defname") && strcmp(jstr(d, "defname"), "language") == 0)
			lang = jsval(jget(d, "arg"));
	}
	if (!body || (lang && strcasecmp(lang, "plpgsql") != 0) || strstr(body, tail))
		return 0;
	len = strlen(head) + strlen(body) + strlen(tail) + 1;
	if (!(sql = malloc(len)))
		return 0;
	snprintf(sql, len, "%s%s%s", head, body, tail);
	r = pg_query_parse_plpgsql(sql);
	free(sql);
	memset(&w, 0, sizeof(w));
	tree = !r.error && r.plpgsql_funcs ? cJSON_Parse(r.plpgsql_funcs) : NULL;
	if (tree) {
		const cJSON *fn = jas(cJSON_GetArrayItem(tree, 0), "PLpgSQL_function");

		w.datums = jget(fn, "datums");
		walk(&w, jget(fn, "action"), 0);
		cJSON_Delete(tree);
	}
	pg_query_free_plpgsql_parse_result(r);
	return w.code;
}
