/*
 * neki/intern.h - interned strings: one shared, reference-counted copy per distinct text in
 * a process, so that holders of interned strings compare them by pointer.
 *
 * The session parameters a client set and the ones a server link reported are interned
 * (src/pool/varcache.c, src/pool/link.c): before every transaction a link serves, the
 * router compares them, and two interned strings are equal exactly when they are the same
 * pointer. Not thread-safe: each process (worker) has its own table.
 */
#ifndef NEKI_INTERN_H
#define NEKI_INTERN_H

#include "neki/base.h"

/* The interned copy of <s> with one more reference (never NULL for a non-NULL <s> unless
 * out of memory); NULL for NULL. */
NK_MUSTCHECK const char *intern_ref(const char *s);
/* Drop one reference of interned <s> (NULL is ignored); the copy is freed with the last. */
void intern_unref(const char *s);
/* Distinct strings currently interned (tests, SHOW MEM-style figures). */
size_t intern_count(void);

#endif /* NEKI_INTERN_H */
