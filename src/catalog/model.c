/*
 * model.c - the catalog model's memory (one arena per catalog), sorting and lookups:
 * tables by (schema, name) and by search_path, columns by name, types by oid, and the
 * routing type of a column type. Loading is load.c, the topology rules check.c, the
 * shared-memory image image.c / image_read.c.
 */
#include "neki/base.h"

#include "neki/catalog.h"
#include "neki/rarena.h"

#include <stdlib.h>
#include <string.h>

#include "cat_int.h"

/* cat_alloc: see cat_int.h. */
void *
cat_alloc(struct catalog *c, size_t size)
{
	return rarena_alloc(c->arena, size);
}

const char *
cat_strdup(struct catalog *c, const char *s)
{
	size_t n;
	char *p;

	if (!s)
		return NULL;
	n = strlen(s) + 1;
	p = cat_alloc(c, n);
	if (p)
		memcpy(p, s, n);
	return p;
}

struct catalog *
cat_new(void)
{
	struct catalog *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->arena = rarena_new();
	if (!c->arena) {
		free(c);
		return NULL;
	}
	return c;
}

/* cat_free: see catalog.h. */
void
cat_free(struct catalog *c)
{
	if (!c)
		return;
	rarena_free(c->arena);
	free(c);
}

int
cat_relname_cmp(const char *s1, const char *n1, const char *s2, const char *n2)
{
	int r = strcmp(s1, s2);

	return r ? r : strcmp(n1, n2);
}

static int
table_cmp(const void *a, const void *b)
{
	const struct cat_table *x = a, *y = b;

	return cat_relname_cmp(x->schema, x->name, y->schema, y->name);
}

static int
type_cmp(const void *a, const void *b)
{
	const struct cat_type *x = a, *y = b;

	return x->oid < y->oid ? -1 : x->oid > y->oid;
}

static int
relref_cmp(const void *a, const void *b)
{
	const struct cat_relref *x = a, *y = b;

	return cat_relname_cmp(x->schema, x->name, y->schema, y->name);
}

static int
column_cmp(const void *a, const void *b)
{
	const struct cat_column *x = a, *y = b;

	return x->attnum - y->attnum;
}

/* cat_sort: see cat_int.h. */
void
cat_sort(struct catalog *c)
{
	if (c->ntables)
		qsort(c->tables, c->ntables, sizeof(*c->tables), table_cmp);
	if (c->ntypes)
		qsort(c->types, c->ntypes, sizeof(*c->types), type_cmp);
}

void
cat_sort_columns(struct cat_table *t)
{
	if (t->ncols)
		qsort(t->cols, t->ncols, sizeof(*t->cols), column_cmp);
}

void
cat_sort_children(struct cat_table *t)
{
	if (t->nchildren)
		qsort(t->children, t->nchildren, sizeof(*t->children), relref_cmp);
}

/* cat_find_table: see catalog.h. Binary search over the sorted tables. */
const struct cat_table *
cat_find_table(const struct catalog *c, const char *schema, const char *name)
{
	size_t lo = 0, hi = c->ntables;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct cat_table *t = &c->tables[mid];
		int r = cat_relname_cmp(schema, name, t->schema, t->name);

		if (r == 0)
			return t;
		if (r < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

/* cat_lookup_table: see catalog.h. */
const struct cat_table *
cat_lookup_table(const struct catalog *c, const char *schema, const char *name,
		 const char *const *path, size_t n)
{
	if (schema)
		return cat_find_table(c, schema, name);
	for (size_t i = 0; i < n; i++) {
		const struct cat_table *t;

		if (!path[i] || strcmp(path[i], "$user") == 0)
			continue;
		t = cat_find_table(c, path[i], name);
		if (t)
			return t;
	}
	return NULL;
}

const struct cat_column *
cat_find_column(const struct cat_table *t, const char *name)
{
	for (size_t i = 0; i < t->ncols; i++)
		if (strcmp(t->cols[i].name, name) == 0)
			return &t->cols[i];
	return NULL;
}

const struct cat_type *
cat_find_type(const struct catalog *c, uint32_t oid)
{
	size_t lo = 0, hi = c->ntypes;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (c->types[mid].oid == oid)
			return &c->types[mid];
		if (oid < c->types[mid].oid)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

const struct cat_key *
cat_primary_key(const struct cat_table *t)
{
	return t->nkeys && t->keys[0].primary ? &t->keys[0] : NULL;
}

/*
 * cat_ks_type: see catalog.h. Domains over domains are followed a bounded number of steps
 * (Postgres forbids cycles; the bound only protects against a corrupt catalog).
 */
bool
cat_ks_type(const struct catalog *c, uint32_t oid, enum ks_type *out)
{
	for (int depth = 0; depth < 16; depth++) {
		const struct cat_type *t;

		if (ks_type_from_oid(oid, out))
			return true;
		t = cat_find_type(c, oid);
		if (!t)
			return false;
		if (t->typtype == CAT_TYPTYPE_ENUM) {
			*out = KS_TYPE_ENUM;
			return true;
		}
		if (t->typtype != CAT_TYPTYPE_DOMAIN)
			return false;
		oid = t->base_oid;
	}
	return false;
}

const char *
cat_relkind_str(enum cat_relkind k)
{
	switch (k) {
	case CAT_REL_TABLE: return "table";
	case CAT_REL_PARTITIONED: return "partitioned table";
	case CAT_REL_VIEW: return "view";
	case CAT_REL_MATVIEW: return "materialized view";
	case CAT_REL_SEQUENCE: return "sequence";
	case CAT_REL_INDEX: return "index";
	case CAT_REL_FOREIGN: return "foreign table";
	}
	return "unknown";
}
