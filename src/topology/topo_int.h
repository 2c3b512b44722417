/*
 * topo_int.h - private helpers of src/topology: the model arena and name lookups shared by
 * the JSON reader, the validator, resolution and the image builder.
 */
#ifndef NEKI_TOPOLOGY_TOPO_INT_H
#define NEKI_TOPOLOGY_TOPO_INT_H

#include "neki/base.h"

#include "neki/topology.h"

/* Allocate <size> zeroed bytes from <m>'s arena; NULL on no memory. */
void *topo_alloc(struct topo_model *m, size_t size);

/* Copy <s> into <m>'s arena; NULL on no memory. */
const char *topo_strdup(struct topo_model *m, const char *s);

/* A new, empty model with its arena; NULL on no memory. */
struct topo_model *topo_model_new(void);

/* Sort every name-keyed array of <m> (databases, schemas, tables, ...) by name. */
void topo_model_sort(struct topo_model *m);

/* Index of the group <uid> in m->groups, or -1. */
ssize_t topo_group_index(const struct topo_model *m, const char *uid);

/*
 * Derive what depends on several parts of the document: each index's type and compiled
 * expression, each group's bounds (hex, or decimal for range groups). Problems go to <f>.
 * Called by topo_parse() (validate.c).
 */
void topo_link(struct topo_model *m, struct topo_findings *f);

/* Validate the tables, reference tables, sequences and GSIs of <d> (validate_tables.c). */
void topo_validate_database(const struct topo_model *m, const struct topo_database *d,
			    struct topo_findings *f);

/* Bound text of a range for messages: as written, or "(none)". */
const char *topo_bound_text(const char *s);

#endif /* NEKI_TOPOLOGY_TOPO_INT_H */
