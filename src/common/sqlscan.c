/*
 * sqlscan.c - string constants, quoted identifiers, dollar quotes and comments of SQL text
 * (neki/sqlscan.h), as Postgres' lexer (src/backend/parser/scan.l) reads them:
 *   - '...' with '' for a quote; a prefix letter (E, B, X, N; U&) glued before the quote
 *     makes a prefixed string, E'...' also with backslash escapes; a prefix only counts where
 *     an identifier could not go on (the letter does not follow an identifier character);
 *   - "..." with "" for a quote (U&"..." too);
 *   - $tag$ ... $tag$ where tag is empty or an identifier not starting with a digit ($1 is a
 *     parameter) and the '$' does not go on an identifier ("a$b$" is one identifier);
 *   - -- to the end of the line, and slash-star comments, which nest.
 * Entry points: sql_scan_item(), sql_skip_item().
 */
#include "neki/base.h"
#include "neki/sqlscan.h"

#include <string.h>

/* The end of a quoted run opened at s[i] by <q> ('' or "" doubled inside), <esc>: with
 * backslash escapes. */
#define SKIP_WINDOW 4096	/* bytes sql_skip_item() measures before scanning an item */

static size_t
scan_quoted(const char *s, size_t i, size_t n, char q, bool esc)
{
	for (size_t j = i + 1; j < n; j++) {
		if (esc && s[j] == '\\' && j + 1 < n) {
			j++;
		} else if (s[j] == q) {
			if (j + 1 < n && s[j + 1] == q)
				j++;
			else
				return j + 1;
		}
	}
	return n;
}

/* The end of $tag$...$tag$ opened at s[i], or <i> when s[i] opens no dollar quote. */
static size_t
scan_dollar(const char *s, size_t i, size_t n)
{
	size_t j = i + 1, tl;

	if (i > 0 && sql_ident_char(s[i - 1]))
		return i;	/* inside an identifier */
	if (j < n && s[j] >= '0' && s[j] <= '9')
		return i;	/* a parameter */
	while (j < n && s[j] != '$' && sql_ident_char(s[j]))
		j++;
	if (j >= n || s[j] != '$')
		return i;
	tl = j + 1 - i;
	for (size_t k = j + 1; k + tl <= n; k++)
		if (s[k] == '$' && memcmp(s + k, s + i, tl) == 0)
			return k + tl;
	return n;
}

/* The end of the comment at s[i] (its start checked by the caller). */
static size_t
scan_comment(const char *s, size_t i, size_t n)
{
	size_t depth = 0;

	if (s[i] == '-') {
		const char *nl = memchr(s + i, '\n', n - i);

		return nl != NULL ? (size_t)(nl - s) : n;
	}
	for (size_t j = i; j + 1 < n; j++) {
		if (s[j] == '/' && s[j + 1] == '*') {
			depth++;
			j++;
		} else if (s[j] == '*' && s[j + 1] == '/') {
			j++;
			if (--depth == 0)
				return j + 1;
		}
	}
	return n;
}

/* A prefixed string or identifier at s[i] (E'', B'', X'', N'', U&'', U&""), or <i>. */
static size_t
scan_prefixed(const char *s, size_t i, size_t n, enum sql_item *kind)
{
	char c = s[i];

	if (i > 0 && sql_ident_char(s[i - 1]))
		return i;
	if (i + 1 < n && s[i + 1] == '\'' && strchr("eEbBxXnN", c) != NULL) {
		*kind = SQL_ITEM_STRING_PREFIXED;
		return scan_quoted(s, i + 1, n, '\'', c == 'e' || c == 'E');
	}
	if ((c == 'u' || c == 'U') && i + 2 < n && s[i + 1] == '&' &&
	    (s[i + 2] == '\'' || s[i + 2] == '"')) {
		*kind = s[i + 2] == '"' ? SQL_ITEM_QUOTED_IDENT : SQL_ITEM_STRING_PREFIXED;
		return scan_quoted(s, i + 2, n, s[i + 2], false);
	}
	return i;
}

size_t
sql_scan_item(const char *s, size_t i, size_t n, enum sql_item *kind)
{
	size_t e;

	*kind = SQL_ITEM_NONE;
	if (i >= n)
		return i;
	switch (s[i]) {
	case '\'':
		*kind = SQL_ITEM_STRING;
		return scan_quoted(s, i, n, '\'', false);
	case '"':
		*kind = SQL_ITEM_QUOTED_IDENT;
		return scan_quoted(s, i, n, '"', false);
	case '$':
		e = scan_dollar(s, i, n);
		*kind = e != i ? SQL_ITEM_DOLLAR : SQL_ITEM_NONE;
		return e;
	case '-':
	case '/':
		if (i + 1 < n && s[i + 1] == (s[i] == '-' ? '-' : '*')) {
			*kind = SQL_ITEM_COMMENT;
			return scan_comment(s, i, n);
		}
		return i;
	default:
		return scan_prefixed(s, i, n, kind);
	}
}

const char *
sql_skip_item(const char *sql, const char *p)
{
	size_t i = (size_t)(p - sql), n, end;
	enum sql_item kind;
	char c = p[0];

	/* (no item starts here: the common case, without measuring the rest of the text) */
	if (c != '\'' && c != '"' && c != '$' && !(c == '-' && p[1] == '-') &&
	    !(c == '/' && p[1] == '*') && !(c != '\0' && p[1] == '\'') &&
	    !((c == 'u' || c == 'U') && p[1] == '&'))
		return p;
	n = i + strnlen(p, SKIP_WINDOW);	/* (an item is scanned in a window of the text; one
						 * that does not end inside it, with all of it) */
	end = sql_scan_item(sql, i, n, &kind);
	if (end == n && n - i == SKIP_WINDOW)
		end = sql_scan_item(sql, i, n + strlen(sql + n), &kind);
	return sql + end;
}

void
sql_put_ident(FILE *f, const char *name)
{
	fputc('"', f);
	for (const char *q; (q = strchr(name, '"')) != NULL; name = q + 1) {
		fwrite(name, 1, (size_t)(q + 1 - name), f);
		fputc('"', f);		/* (doubled) */
	}
	fputs(name, f);
	fputc('"', f);
}

void
sql_put_literal(FILE *f, const char *p, size_t len)
{
	size_t run = 0;		/* (the bytes since the last doubled one: one write) */

	fputs("E'", f);
	for (size_t i = 0; i < len; i++) {
		if (p[i] != '\\' && p[i] != '\'')
			continue;
		fwrite(p + run, 1, i + 1 - run, f);
		run = i;	/* (it again: doubled) */
	}
	fwrite(p + run, 1, len - run, f);
	fputc('\'', f);
}
