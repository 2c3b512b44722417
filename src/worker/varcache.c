/*
 * varcache.c - session parameters that survive pooling ("varcache", pgbouncer's name).
 *
 * Tracked: client_encoding, DateStyle, TimeZone, standard_conforming_strings,
 * application_name, plus every name in track_extra_parameters (default IntervalStyle).
 * Values come from the startup packet, `options`, and the ParameterStatus the server sends
 * after a client's SET. search_path is not reported by Postgres 15, so it is followed by
 * recognising SET/RESET search_path in simple-protocol query texts (a light lexer: comments,
 * quotes and dollar quotes are skipped, statements split at top-level semicolons).
 * Before a link serves a client, varcache_diff_sql() builds one "SET a=...; SET b=..." for
 * the values that differ. Entry points: varcache_set(), varcache_diff_sql(),
 * varcache_scan_query(), varcache_configure().
 */
#include "neki/base.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "session_int.h"

static const char *const var_fixed[] = {
	"client_encoding", "DateStyle", "TimeZone", "standard_conforming_strings",
	"application_name",
};

static char var_names[VAR_MAX][64];	/* the tracked names, fixed ones first */
static size_t var_count;
static const struct cfg *var_cfg;	/* weak: the config the table was built from */

/* Index of <name> among the first <n> names, -1 when absent. */
static int
var_find(const char *name, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (strcasecmp(var_names[i], name) == 0)
			return (int)i;
	}
	return -1;
}

void
varcache_configure(const struct cfg *c)
{
	const char *p = c != NULL ? c->track_extra_parameters : "IntervalStyle";

	var_count = 0;
	for (size_t i = 0; i < NK_ARRAY_LEN(var_fixed); i++)
		snprintf(var_names[var_count++], sizeof(var_names[0]), "%s", var_fixed[i]);
	while (p != NULL && *p != '\0' && var_count < VAR_MAX) {
		size_t len;

		while (*p == ' ' || *p == ',' || *p == '\t')
			p++;
		len = strcspn(p, ", \t");
		if (len > 0 && len < sizeof(var_names[0])) {
			memcpy(var_names[var_count], p, len);
			var_names[var_count][len] = '\0';
			if (var_find(var_names[var_count], var_count) < 0)
				var_count++;
		}
		p += len;
	}
	var_cfg = c;
}

static void
varcache_ensure(void)
{
	const struct cfg *c = cfg_current();

	if (var_count == 0 || (c != NULL && c != var_cfg))
		varcache_configure(c);
}

size_t
varcache_count(void)
{
	varcache_ensure();
	return var_count;
}

const char *
varcache_name(size_t i)
{
	NK_ASSERT(i < var_count);
	return var_names[i];
}

int
varcache_index(const char *name)
{
	varcache_ensure();
	return var_find(name, var_count);
}

bool
varcache_set(struct varcache *vc, const char *name, const char *value)
{
	int i = varcache_index(name);
	char *v;

	if (i < 0)
		return false;
	if (vc->val[i] != NULL && strcmp(vc->val[i], value) == 0)
		return true;
	v = strdup(value);
	if (v == NULL)
		return false;
	free(vc->val[i]);
	vc->val[i] = v;
	return true;
}

void
varcache_cleanup(struct varcache *vc)
{
	for (size_t i = 0; i < VAR_MAX; i++) {
		free(vc->val[i]);
		vc->val[i] = NULL;
	}
	free(vc->search_path);
	vc->search_path = NULL;
}

/* ---- building the SET batch ---- */

struct sqlbuf {
	char *p;
	size_t len, cap;
	bool overflow;
};

static void
sqlbuf_add(struct sqlbuf *b, const char *s, size_t n)
{
	if (b->overflow || b->len + n + 1 > b->cap) {
		b->overflow = true;
		return;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void
sqlbuf_str(struct sqlbuf *b, const char *s)
{
	sqlbuf_add(b, s, strlen(s));
}

/* Append <v> as a string literal: quotes doubled; E'' with doubled backslashes if needed. */
static void
sqlbuf_literal(struct sqlbuf *b, const char *v)
{
	bool esc = strchr(v, '\\') != NULL;

	sqlbuf_str(b, esc ? "E'" : "'");
	for (; *v != '\0'; v++) {
		if (*v == '\'' || (*v == '\\' && esc))
			sqlbuf_add(b, v, 1);
		sqlbuf_add(b, v, 1);
	}
	sqlbuf_str(b, "'");
}

static bool
str_eq(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return strcmp(a, b) == 0;
}

int
varcache_diff_sql(const struct varcache *vc, struct link *l, const char *link_sp, char *sql,
		  size_t cap)
{
	struct sqlbuf b = { sql, 0, cap, false };
	int n = 0;

	varcache_ensure();
	for (size_t i = 0; i < var_count; i++) {
		const char *want = vc->val[i];

		if (want == NULL || str_eq(link_param(l, var_names[i]), want))
			continue;
		sqlbuf_str(&b, "SET ");
		sqlbuf_str(&b, var_names[i]);
		sqlbuf_str(&b, "=");
		sqlbuf_literal(&b, want);
		sqlbuf_str(&b, ";");
		n++;
	}
	if (!str_eq(vc->search_path, link_sp)) {
		sqlbuf_str(&b, "SET search_path TO ");
		sqlbuf_str(&b, vc->search_path != NULL ? vc->search_path : "DEFAULT");
		sqlbuf_str(&b, ";");
		n++;
	}
	return b.overflow ? -1 : n;
}

/* ---- the query lexer ---- */

struct lexer {
	const char *start;	/* borrowed: the whole text */
	const char *p, *end;
};

/* Skip whitespace and comments (nested block comments, as Postgres allows). */
static void
lex_skip_space(struct lexer *lx)
{
	while (lx->p < lx->end) {
		if (isspace((unsigned char)*lx->p)) {
			lx->p++;
		} else if (lx->p + 1 < lx->end && lx->p[0] == '-' && lx->p[1] == '-') {
			while (lx->p < lx->end && *lx->p != '\n')
				lx->p++;
		} else if (lx->p + 1 < lx->end && lx->p[0] == '/' && lx->p[1] == '*') {
			int depth = 0;

			do {
				if (lx->p + 1 < lx->end && lx->p[0] == '/' && lx->p[1] == '*') {
					depth++;
					lx->p += 2;
				} else if (lx->p + 1 < lx->end && lx->p[0] == '*' && lx->p[1] == '/') {
					depth--;
					lx->p += 2;
				} else {
					lx->p++;
				}
			} while (depth > 0 && lx->p < lx->end);
		} else {
			return;
		}
	}
}

/* The next word (letters, digits, _ and $) compared to <kw>, case-insensitive; consumed. */
static bool
lex_word(struct lexer *lx, const char *kw)
{
	size_t n = strlen(kw);
	const char *q;

	lex_skip_space(lx);
	if ((size_t)(lx->end - lx->p) < n || strncasecmp(lx->p, kw, n) != 0)
		return false;
	q = lx->p + n;
	if (q < lx->end && (isalnum((unsigned char)*q) || *q == '_' || *q == '$'))
		return false;
	lx->p = q;
	return true;
}

/* Skip a quoted string / identifier starting at lx->p (which is the opening quote). */
static void
lex_skip_quoted(struct lexer *lx, char quote, bool backslash)
{
	lx->p++;
	while (lx->p < lx->end) {
		if (backslash && *lx->p == '\\' && lx->p + 1 < lx->end) {
			lx->p += 2;
		} else if (*lx->p == quote) {
			if (lx->p + 1 < lx->end && lx->p[1] == quote) {
				lx->p += 2;
			} else {
				lx->p++;
				return;
			}
		} else {
			lx->p++;
		}
	}
}

/* Skip a dollar-quoted string if one starts at lx->p; false when it is not one. */
static bool
lex_skip_dollar(struct lexer *lx)
{
	const char *q = lx->p + 1;
	size_t taglen;

	while (q < lx->end && (isalnum((unsigned char)*q) || *q == '_'))
		q++;
	if (q >= lx->end || *q != '$' || (q > lx->p + 1 && isdigit((unsigned char)lx->p[1])))
		return false;
	taglen = (size_t)(q - lx->p) + 1;
	for (q = q + 1; q + taglen <= lx->end; q++) {
		if (memcmp(q, lx->p, taglen) == 0) {
			lx->p = q + taglen;
			return true;
		}
	}
	lx->p = lx->end;
	return true;
}

/* Move to the end of the current statement (a top-level ';' or the end). */
static void
lex_to_stmt_end(struct lexer *lx)
{
	while (lx->p < lx->end && *lx->p != ';') {
		char c = *lx->p;

		if (c == '\'') {
			bool e = lx->p > lx->start && (lx->p[-1] == 'E' || lx->p[-1] == 'e');

			lex_skip_quoted(lx, '\'', e);
		} else if (c == '"') {
			lex_skip_quoted(lx, '"', false);
		} else if (c == '$' && lex_skip_dollar(lx)) {
			continue;
		} else if (c == '-' || c == '/') {
			const char *before = lx->p;

			lex_skip_space(lx);
			if (lx->p == before)
				lx->p++;
		} else {
			lx->p++;
		}
	}
}

/* SET [SESSION] search_path {TO | =} value: record the value text. */
static void
lex_set_stmt(struct lexer *lx, struct query_effects *fx)
{
	const char *start, *stop;
	size_t len;

	if (lex_word(lx, "LOCAL"))
		return;
	(void)lex_word(lx, "SESSION");
	if (!lex_word(lx, "search_path"))
		return;
	lex_skip_space(lx);
	if (lx->p < lx->end && *lx->p == '=')
		lx->p++;
	else if (!lex_word(lx, "TO"))
		return;
	lex_skip_space(lx);
	start = lx->p;
	lex_to_stmt_end(lx);
	stop = lx->p;
	while (stop > start && isspace((unsigned char)stop[-1]))
		stop--;
	len = (size_t)(stop - start);
	if (len == 7 && strncasecmp(start, "DEFAULT", 7) == 0) {
		fx->set_search_path = false;
		fx->reset_search_path = true;
	} else if (len > 0 && len < sizeof(fx->search_path)) {
		memcpy(fx->search_path, start, len);
		fx->search_path[len] = '\0';
		fx->set_search_path = true;
		fx->reset_search_path = false;
	}
}

/* One statement starting at lx->p. */
static void
lex_statement(struct lexer *lx, struct query_effects *fx)
{
	if (lex_word(lx, "SET")) {
		lex_set_stmt(lx, fx);
	} else if (lex_word(lx, "RESET")) {
		if (lex_word(lx, "search_path") || lex_word(lx, "ALL")) {
			fx->set_search_path = false;
			fx->reset_search_path = true;
		}
	} else if (lex_word(lx, "DISCARD")) {
		if (lex_word(lx, "ALL")) {
			fx->discard_all = true;
			fx->set_search_path = false;
			fx->reset_search_path = true;
		}
	} else if (lex_word(lx, "DEALLOCATE")) {
		(void)lex_word(lx, "PREPARE");
		if (lex_word(lx, "ALL"))
			fx->deallocate_all = true;
	}
	lex_to_stmt_end(lx);
}

void
varcache_scan_query(const char *sql, size_t len, struct query_effects *fx)
{
	struct lexer lx = { sql, sql, sql + len };

	memset(fx, 0, sizeof(*fx) - sizeof(fx->search_path));
	fx->search_path[0] = '\0';
	if (len > 0 && sql[len - 1] == '\0')
		lx.end--;
	while (lx.p < lx.end) {
		lex_statement(&lx, fx);
		if (lx.p < lx.end)
			lx.p++;	/* the ';' */
	}
}
