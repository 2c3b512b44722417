/*
 * neki/parse_split.h - a multi-statement text split into its statements with the Postgres
 * scanner (src/router/parse.c). Included by neki/parse.h.
 */
#ifndef NEKI_PARSE_SPLIT_H
#define NEKI_PARSE_SPLIT_H

#include "neki/base.h"

#include "neki/error.h"
#include "neki/rarena.h"

/* One statement of a multi-statement text. */
struct parse_span {
	uint32_t start, len;	/* bytes of the statement in the text (no ';') */
};

/*
 * Split <sql> into its statements with the Postgres scanner (semicolons inside strings,
 * comments and dollar quotes do not split). <out> is allocated in <a>; empty statements are
 * skipped. A text of several statements is also parsed whole, as Postgres does before it
 * runs any of them: a syntax error in any statement fails the split. False on no memory or
 * a scanner or syntax error (53200 / 42601 in <err>, a syntax error's position in the whole
 * text in <err>->where).
 */
bool parse_split(struct rarena *a, const char *sql, struct parse_span **out, uint32_t *n,
		 struct nk_error *err) NK_MUSTCHECK;

#endif
