/*
 * oidmap.c - the authoritative OIDs of user-defined types: DDL fan-out creates a type on
 * every shard, where it gets each shard's next OID, so the same enum or composite type has
 * a different OID per shard. The catalog keeps the authoritative shard's user-defined types
 * (pg_type.oid >= 16384) by (schema, name) and, per other shard, the pairs (the shard's OID,
 * the authoritative OID) that differ; the router rewrites RowDescription and
 * ParameterDescription with them, and Parse's parameter types the other way.
 * Entry points: cat_types_sql(), cat_set_auth_types(), cat_map_shard_types().
 */
#include "neki/base.h"

#include <stdlib.h>
#include <string.h>

#include "neki/catalog.h"

#include "cat_int.h"

static const char types_sql[] =
	"SELECT t.oid::text, n.nspname::text, t.typname::text"
	" FROM pg_catalog.pg_type t JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace"
	" WHERE t.oid >= 16384";

/* cat_types_sql: see catalog.h. */
const char *
cat_types_sql(void)
{
	return types_sql;
}

static int
utype_cmp(const void *a, const void *b)
{
	const struct cat_utype *x = a, *y = b;

	return cat_relname_cmp(x->schema, x->name, y->schema, y->name);
}

/* Read row <i> of <rows> as a type; false when a value is missing or not an OID. */
static bool
read_utype(const struct cat_rows *rows, size_t i, struct cat_utype *out)
{
	const char *oid = rows->get(rows->src, i, 0);
	char *end;
	unsigned long v;

	out->schema = rows->get(rows->src, i, 1);
	out->name = rows->get(rows->src, i, 2);
	if (oid == NULL || out->schema == NULL || out->name == NULL)
		return false;
	v = strtoul(oid, &end, 10);
	out->oid = (uint32_t)v;
	return *end == '\0' && end != oid && v <= UINT32_MAX;
}

/* cat_set_auth_types: see catalog.h. */
bool
cat_set_auth_types(struct catalog *c, const struct cat_rows *rows, struct nk_error *err)
{
	size_t n = rows->nrows(rows->src);
	struct cat_utype *v = cat_alloc(c, (n > 0 ? n : 1) * sizeof(*v));

	if (v == NULL)
		return nk_error_oom(err);
	for (size_t i = 0; i < n; i++) {
		struct cat_utype t;

		if (!read_utype(rows, i, &t))
			return nk_error_set(err, ERRCODE_INTERNAL_ERROR,
					    "catalog types: bad row %zu", i);
		t.schema = cat_strdup(c, t.schema);
		t.name = cat_strdup(c, t.name);
		if (t.schema == NULL || t.name == NULL)
			return nk_error_oom(err);
		v[i] = t;
	}
	qsort(v, n, sizeof(*v), utype_cmp);
	c->utypes = v;
	c->nutypes = n;
	c->noidmap = 0;
	return true;
}

/* cat_map_shard_types: see catalog.h. */
bool
cat_map_shard_types(struct catalog *c, const char *shard, const struct cat_rows *rows,
		    struct nk_error *err)
{
	size_t n = rows->nrows(rows->src);
	const char *uid = cat_strdup(c, shard);
	struct cat_oid_pair *v = cat_alloc(c, (c->noidmap + n + 1) * sizeof(*v));

	if (uid == NULL || v == NULL)
		return nk_error_oom(err);
	if (c->noidmap > 0)
		memcpy(v, c->oidmap, c->noidmap * sizeof(*v));
	c->oidmap = v;		/* (room for every row of this shard) */
	for (size_t i = 0; i < n; i++) {
		struct cat_utype t;
		const struct cat_utype *a;

		if (!read_utype(rows, i, &t))
			return nk_error_set(err, ERRCODE_INTERNAL_ERROR,
					    "catalog types of shard \"%s\": bad row %zu", shard, i);
		a = c->nutypes > 0 ? bsearch(&t, c->utypes, c->nutypes, sizeof(t), utype_cmp)
				   : NULL;
		if (a != NULL && a->oid != t.oid)
			v[c->noidmap++] = (struct cat_oid_pair){ uid, t.oid, a->oid };
	}
	return true;
}
