/*
 * neki/rarena.h - the arena: memory handed out by bump allocation and freed in one call
 * (src/common/rarena.c): the router's per-statement scratch and models, a topology model, a
 * catalog.
 */
#ifndef NEKI_RARENA_H
#define NEKI_RARENA_H

#include "neki/base.h"

struct rarena;

/* A new arena; NULL on no memory. */
struct rarena *rarena_new(void);
/* Forget everything allocated from <a> but keep one chunk for the next statement. */
void rarena_reset(struct rarena *a);
/* Free <a> and everything allocated from it (NULL is fine). */
void rarena_free(struct rarena *a);
/* <size> zeroed bytes from <a>, 8-byte aligned; NULL on no memory. */
void *rarena_alloc(struct rarena *a, size_t size);
/* Copy of <s> / of <s>[0..len) NUL-terminated, in <a>; NULL on no memory. */
char *rarena_strdup(struct rarena *a, const char *s);
char *rarena_strndup(struct rarena *a, const char *s, size_t len);
/* Bytes handed out by <a> so far (for tests and stats). */
size_t rarena_used(const struct rarena *a);

#endif
