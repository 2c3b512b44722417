/*
 * neki/normalize.h - the literal normaliser of the simple protocol (src/router/normalize.c):
 * the plan cache's key of a statement text and the literals it took out.
 */
#ifndef NEKI_NORMALIZE_H
#define NEKI_NORMALIZE_H

#include "neki/base.h"

#include "neki/rarena.h"

struct parse_literal {
	uint32_t start, len;		/* the token in the original text */
	const char *value;		/* its value as Postgres text (unescaped); arena */
	bool quoted;			/* a '...' string (else a number) */
};

struct parse_norm {
	const char *key;		/* text with every literal replaced by $k; arena */
	uint64_t key_hash;		/* a hash of key (the plan cache's) */
	uint32_t nparams;		/* highest $n in the original text */
	struct parse_literal *lits;	/* in text order; literal i is slot nparams + i */
	uint32_t nlits;
};

/*
 * Normalise <sql> into <out> (allocated in <a>): numeric literals and standard strings
 * ('...') become $k, numbered after the text's own highest $n. Comments are dropped and
 * whitespace runs collapse to one space, so formatting does not split the cache. Other
 * literal forms (E'', $$..$$, B'', X'', U&'') stay in the key. False on no memory only.
 */
bool parse_normalize(struct rarena *a, const char *sql, struct parse_norm *out) NK_MUSTCHECK;

#endif
