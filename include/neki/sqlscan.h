/*
 * neki/sqlscan.h - the one reader of the lexical items of SQL text whose insides are not SQL
 * (src/common/sqlscan.c): string constants, quoted identifiers, dollar-quoted strings and
 * comments, read as the Postgres lexer reads them (standard_conforming_strings on). Every
 * scanner of SQL text in neki (the normaliser, the statement splitter of a Query, the rewrites
 * of the planner and the executor, the tracked-SET lexer) skips these through it, so a quote,
 * a comment or a dollar quote means the same thing everywhere.
 */
#ifndef NEKI_SQLSCAN_H
#define NEKI_SQLSCAN_H

#include "neki/base.h"

#include <stddef.h>
#include <stdio.h>

enum sql_item {
	SQL_ITEM_NONE = 0,	/* not one of the items below: SQL the caller reads itself */
	SQL_ITEM_STRING,	/* '...' ('' is a quote) */
	SQL_ITEM_STRING_PREFIXED, /* E'...' (backslash escapes), B'...', X'...', N'...', U&'...' */
	SQL_ITEM_DOLLAR,	/* $tag$...$tag$ (also $$...$$) */
	SQL_ITEM_QUOTED_IDENT,	/* "..." and U&"..." ("" is a quote) */
	SQL_ITEM_COMMENT,	/* -- to the end of the line (the newline not included), or a
				 * nested slash-star comment */
};

/*
 * The item that starts at s[i] (<n> bytes of text): its kind in *<kind> and the index just
 * after it (<n> when it is not terminated). When none starts there (a parameter $1, a prefix
 * letter or a '$' inside an identifier, any other SQL), SQL_ITEM_NONE and <i>.
 */
size_t sql_scan_item(const char *s, size_t i, size_t n, enum sql_item *kind);

/* The same for NUL-terminated <sql> at <p>: the end of the item (or <p> when none starts). */
const char *sql_skip_item(const char *sql, const char *p);

/* Can <c> be part of an identifier (letters, digits, _, $, bytes of non-ASCII UTF-8)? */
static inline bool
sql_ident_char(char c)
{
	unsigned char u = (unsigned char)c;

	return (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || (u >= '0' && u <= '9') ||
	       u == '_' || u == '$' || u >= 0x80;
}

/* Write <name> as a quoted identifier ("a""b"), and <len> bytes at <p> as a string constant
 * E'...' (read the same under either standard_conforming_strings): the writers of the SQL
 * the router composes. */
void sql_put_ident(FILE *f, const char *name);
void sql_put_literal(FILE *f, const char *p, size_t len);

#endif /* NEKI_SQLSCAN_H */
