/*
 * neki/error.h - client-visible errors and the NK013 catalog.
 *
 * A struct nk_error is what a lower layer fills when it refuses something: it is
 * turned into an ErrorResponse by the session layer (one function, in proto).
 * The NK013 "not implemented" catalog lives in one table (src/common/error.c);
 * nk_error_nk013() fills an error from a catalog code.
 */
#ifndef NEKI_ERROR_H
#define NEKI_ERROR_H

#include "neki/base.h"

#include <stdarg.h>

#include "neki/sqlstate.h"

#define NK_ERR_MSG_MAX 512
#define NK_ERR_DETAIL_MAX 1024

enum nk_severity {
	NK_SEV_ERROR = 0,
	NK_SEV_FATAL = 1,
	NK_SEV_WARNING = 2,
	NK_SEV_NOTICE = 3,
};

struct nk_error {
	enum nk_severity severity;	/* ERROR unless the connection must end */
	char sqlstate[6];		/* five characters + NUL, e.g. "08P01" */
	int code;			/* NK013 catalog code, 0 when not an NK013 error */
	char message[NK_ERR_MSG_MAX];	/* primary message, Postgres style */
	char detail[NK_ERR_DETAIL_MAX];	/* empty when absent */
	char hint[NK_ERR_MSG_MAX];	/* empty when absent */
	char where[NK_ERR_MSG_MAX];	/* config errors: "file:line"; JSON path; empty otherwise */
};

/* Clear <err> (no error). */
void nk_error_clear(struct nk_error *err);

/* True when <err> holds an error. */
bool nk_error_is_set(const struct nk_error *err);

/*
 * Fill <err> with <sqlstate> and a printf-style message. Returns false, so callers
 * can write `return nk_error_set(err, ERRCODE_INVALID_PARAMETER_VALUE, "...")` (the names
 * of neki/sqlstate.h). <err> may be NULL.
 */
bool nk_error_set(struct nk_error *err, const char *sqlstate, const char *fmt, ...)
	NK_PRINTF(3, 4);
bool nk_error_setv(struct nk_error *err, const char *sqlstate, const char *fmt, va_list ap);

/* 53200 "out of memory" in <err>; returns false as nk_error_set does. */
bool nk_error_oom(struct nk_error *err);

/* Set the DETAIL / HINT of an already-set error (printf-style). */
void nk_error_detail(struct nk_error *err, const char *fmt, ...) NK_PRINTF(2, 3);
void nk_error_hint(struct nk_error *err, const char *fmt, ...) NK_PRINTF(2, 3);

/*
 * Fill <err> with the NK013 catalog entry <code>: SQLSTATE NK013, message
 * "not implemented: [<code>] <sentence>". Returns false. Panics on an unknown code
 * (codes are compile-time constants; the unit tests walk the whole catalog).
 */
bool nk_error_nk013(struct nk_error *err, int code);

/* The catalog sentence for <code>, or NULL when the code is not in the catalog. */
const char *nk_nk013_sentence(int code);

/* Number of entries in the NK013 catalog and the code of entry <i> (for tests). */
size_t nk_nk013_count(void);
int nk_nk013_code_at(size_t i);

#endif /* NEKI_ERROR_H */
