/*
 * call.h - the __neki calls the admin recognises (src/admin/call.c): `SELECT [* FROM]
 * __neki.<fn>(args)` and its literals decoded.
 */
#ifndef NEKI_ADMIN_CALL_H
#define NEKI_ADMIN_CALL_H

#include "neki/base.h"

#include <stddef.h>

#define ADM_CALL_MAX_ARGS 8
#define ADM_NAME_MAX 64

enum adm_arg_kind {
	ADM_ARG_NULL = 0,
	ADM_ARG_STRING = 1,	/* '...', E'...', $$...$$ */
	ADM_ARG_NUMBER = 2,	/* text holds the digits as written (with sign) */
	ADM_ARG_BOOL = 3,	/* text holds "true" or "false" */
};

struct adm_arg {
	enum adm_arg_kind kind;
	char *text;			/* owned: decoded value; NULL for ADM_ARG_NULL */
	char cast[ADM_NAME_MAX];	/* last ::type, lowercased; "" when none */
	char name[ADM_NAME_MAX];	/* named notation `name => value`; "" when positional */
};

struct adm_call {
	char fn[ADM_NAME_MAX];		/* function name, lowercased (without __neki.) */
	bool from_form;			/* SELECT <cols> FROM __neki.fn(...) */
	char cols[ADM_CALL_MAX_ARGS][ADM_NAME_MAX]; /* selected columns ("*" = all) */
	size_t ncols;
	struct adm_arg args[ADM_CALL_MAX_ARGS];
	size_t nargs;
};

enum adm_call_parse_result {
	ADM_CALL_NOT_NEKI = 0,	/* not a __neki call: the console handles it */
	ADM_CALL_OK = 1,	/* <call> filled (free with adm_call_cleanup) */
	ADM_CALL_ERROR = 2,	/* a __neki call with a syntax error: <err> set (42601) */
};

/*
 * Recognise <sql> as `SELECT * FROM __neki.fn(args)`, `SELECT col, ... FROM __neki.fn(args)`
 * or `SELECT __neki.fn(args)`, with an optional `;`. Arguments are literals: strings
 * (standard, E'' escapes, dollar quoting), numbers, true/false, NULL, each with optional
 * `::type` casts and optional `name =>` notation. Comments are skipped.
 */
enum adm_call_parse_result adm_call_parse(const char *sql, struct adm_call *call,
					  struct nk_error *err);

/* Free the argument texts of <call> (safe on a zeroed or failed call). */
void adm_call_cleanup(struct adm_call *call);

/*
 * Parse an interval literal: "<n>" seconds, "<n> <unit>" (ms, s, min, h, d and their long
 * forms, several parts allowed) or "HH:MM:SS". Returns false when not understood.
 */
NK_MUSTCHECK bool adm_parse_interval(const char *text, double *seconds);

#endif /* NEKI_ADMIN_CALL_H */
