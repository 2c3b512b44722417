/*
 * parse_cursor.c - the cursor statements of the libpg_query JSON tree: DECLARE (name,
 * BINARY / SCROLL / NO SCROLL / WITH HOLD, the cursor's query as a model of its own and
 * where its text starts), FETCH / MOVE (direction and count as Postgres keeps them) and
 * CLOSE name / ALL. What a cursor does at run time is the executor's (src/worker/
 * route_cursor.c); planning DECLARE's query is plan_cursor.c's. Entry point: pb_cursor().
 */
#include "neki/base.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "parse_int.h"

/* Cursor option bits of DeclareCursorStmt.options (Postgres' parsenodes.h). */
#define PB_CURSOR_OPT_BINARY 0x0001
#define PB_CURSOR_OPT_SCROLL 0x0002
#define PB_CURSOR_OPT_NO_SCROLL 0x0004
#define PB_CURSOR_OPT_HOLD 0x0020

/* <p> past white space and comments (nested block comments, as the Postgres scanner). */
static const char *
skip_space(const char *p)
{
	for (;;) {
		while (isspace((unsigned char)*p))
			p++;
		if (p[0] == '-' && p[1] == '-') {
			while (*p && *p != '\n')
				p++;
			continue;
		}
		if (p[0] != '/' || p[1] != '*')
			return p;
		p += 2;
		for (int depth = 1; *p && depth > 0;) {
			if (p[0] == '/' && p[1] == '*')
				depth++, p += 2;
			else if (p[0] == '*' && p[1] == '/')
				depth--, p += 2;
			else
				p++;
		}
	}
}

static bool
ident_char(unsigned char c)
{
	return isalnum(c) || c == '_' || c == '$' || c >= 0x80;
}

/* The end of the token at <p>: a word, a quoted identifier ("..." or U&"..."), else one
 * character. *<quoted> tells whether it was quoted (then it is never a keyword). */
static const char *
token_end(const char *p, bool *quoted)
{
	*quoted = false;
	if ((p[0] == 'U' || p[0] == 'u') && p[1] == '&' && p[2] == '"')
		p += 2;
	if (*p == '"') {
		*quoted = true;
		for (p++; *p; p++) {
			if (*p != '"')
				continue;
			if (p[1] != '"')
				return p + 1;
			p++;	/* a doubled quote inside the name */
		}
		return p;
	}
	if (!ident_char((unsigned char)*p))
		return *p ? p + 1 : p;
	while (ident_char((unsigned char)*p))
		p++;
	return p;
}

static bool
is_word(const char *p, const char *end, bool quoted, const char *kw)
{
	size_t n = strlen(kw);

	return !quoted && (size_t)(end - p) == n && strncasecmp(p, kw, n) == 0;
}

/*
 * Offset of the cursor's query in `DECLARE name [options] CURSOR [WITH | WITHOUT HOLD] FOR
 * query`: the grammar fixes the shape, so the first unquoted CURSOR after the name ends the
 * options (the name itself may be the word "cursor"), and FOR follows it or the HOLD clause.
 */
static uint32_t
declare_query_start(const char *sql)
{
	const char *p = skip_space(sql), *e;
	bool quoted, seen_cursor = false;

	for (int tok = 0; *p; tok++, p = skip_space(e)) {
		e = token_end(p, &quoted);
		if (tok < 2)
			continue;	/* DECLARE and the name */
		if (!seen_cursor) {
			seen_cursor = is_word(p, e, quoted, "cursor");
			continue;
		}
		if (is_word(p, e, quoted, "for"))
			return (uint32_t)(skip_space(e) - sql);
	}
	return (uint32_t)strlen(sql);
}

/* The DECLARE's query as a model of its own, sharing the statement's slots (as EXPLAIN). */
static struct stmt *
declare_query(struct pb *b, const cJSON *q)
{
	struct pb inner;

	memset(&inner, 0, sizeof(inner));
	inner.a = b->a;
	inner.sql = b->sql;
	inner.norm = b->norm;
	inner.s = pb_alloc(b, sizeof(*inner.s));
	if (!inner.s)
		return NULL;
	inner.s->sql = b->sql;
	inner.s->nparams = b->s->nparams;
	inner.s->nslots = b->s->nslots;
	inner.s->nstatements = 1;
	pb_statement(&inner, q);
	b->oom = b->oom || inner.oom;
	return inner.s;
}

static enum stmt_fetch_dir
fetch_dir(const char *d)
{
	if (d && strcmp(d, "FETCH_BACKWARD") == 0)
		return STMT_FETCH_BACKWARD;
	if (d && strcmp(d, "FETCH_ABSOLUTE") == 0)
		return STMT_FETCH_ABSOLUTE;
	if (d && strcmp(d, "FETCH_RELATIVE") == 0)
		return STMT_FETCH_RELATIVE;
	return STMT_FETCH_FORWARD;
}

/* howMany: absent means 0; ALL is LONG_MAX, which a double cannot hold exactly. */
static int64_t
fetch_count(const cJSON *body)
{
	const cJSON *v = jget(body, "howMany");

	if (!cJSON_IsNumber(v))
		return 0;
	if (v->valuedouble >= 9.2e18)
		return STMT_FETCH_ALL;
	return (int64_t)v->valuedouble;
}

/* pb_cursor: see parse_int.h. */
void
pb_cursor(struct pb *b, const char *tag, const cJSON *body)
{
	struct stmt_cursor *c = pb_alloc(b, sizeof(*c));
	const char *name = jstr(body, "portalname");
	int opt;

	if (!c)
		return;
	b->s->kind = STMT_SESSION;
	b->s->cursor = c;
	c->name = name ? pb_strdup(b, name) : NULL;
	if (strcmp(tag, "DeclareCursorStmt") == 0) {
		opt = jint(body, "options", 0);
		c->op = STMT_CUR_DECLARE;
		c->binary = (opt & PB_CURSOR_OPT_BINARY) != 0;
		c->scroll = (opt & PB_CURSOR_OPT_SCROLL) != 0;
		c->no_scroll = (opt & PB_CURSOR_OPT_NO_SCROLL) != 0;
		c->hold = (opt & PB_CURSOR_OPT_HOLD) != 0;
		c->query = declare_query(b, jget(body, "query"));
		c->query_start = declare_query_start(b->sql);
	} else if (strcmp(tag, "FetchStmt") == 0) {
		c->op = STMT_CUR_FETCH;
		c->is_move = jbool(body, "ismove");
		c->dir = fetch_dir(jstr(body, "direction"));
		c->count = fetch_count(body);
	} else {
		c->op = STMT_CUR_CLOSE;
	}
}
