/*
 * nekidesc.h - what a __neki function takes and returns, for Describe (nekidesc.c; the
 * parameter types are nekifn.c's table).
 */
#ifndef NEKI_ADMIN_NEKIDESC_H
#define NEKI_ADMIN_NEKIDESC_H

#include "neki/base.h"

#include <stddef.h>

struct adm_col;

/* The result columns of __neki.<fn> (NULL with *<n> 0 when it returns none, or is unknown). */
const struct adm_col *nekidesc_cols(const char *fn, size_t *n);

/*
 * The type OID of parameter <name> (named notation) or else number <pos> (0-based) of
 * __neki.<fn>: 25 text, 16 boolean, 20 bigint, 1186 interval. 0 when there is none.
 */
uint32_t nekifn_param_oid(const char *fn, const char *name, size_t pos);

#endif /* NEKI_ADMIN_NEKIDESC_H */
