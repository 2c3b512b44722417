/*
 * cat_int.h - private helpers of src/catalog: the model arena shared by the loader
 * (load.c) and the model (model.c).
 */
#ifndef NEKI_CATALOG_CAT_INT_H
#define NEKI_CATALOG_CAT_INT_H

#include "neki/base.h"

#include "neki/catalog.h"

/* Allocate <size> zeroed bytes from <c>'s arena; NULL on no memory. */
void *cat_alloc(struct catalog *c, size_t size);

/* Copy <s> into <c>'s arena; NULL on no memory (or when <s> is NULL). */
const char *cat_strdup(struct catalog *c, const char *s);

/* A new, empty catalog with its arena; NULL on no memory. */
struct catalog *cat_new(void);

/* Sort the tables by (schema, name) and the types by oid. */
void cat_sort(struct catalog *c);

/* Sort <t>'s columns by attnum / its children by (schema, name). */
void cat_sort_columns(struct cat_table *t);
void cat_sort_children(struct cat_table *t);

/* Compare two (schema, name) pairs like strcmp. */
int cat_relname_cmp(const char *s1, const char *n1, const char *s2, const char *n2);

#endif /* NEKI_CATALOG_CAT_INT_H */
