/*
 * check.c - the topology rules that need the catalog: V4 (every sharded table's shard-key
 * columns exist and have types its index can route) and V11 (a unique GSI is disabled when
 * its lookup table's primary key is not the GSI's columns). Entry points:
 * cat_check_topology(), cat_gsi_disabled().
 */
#include "neki/base.h"

#include "neki/catalog.h"

#include <stdio.h>
#include <string.h>

/* Can <kind> hold rows that are routed by a shard key? */
static bool
kind_is_routed(enum cat_relkind kind)
{
	return kind == CAT_REL_TABLE || kind == CAT_REL_PARTITIONED || kind == CAT_REL_FOREIGN;
}

static void
table_path(char *buf, const struct topo_database *d, const struct cat_table *t)
{
	snprintf(buf, TOPO_PATH_MAX, "databases.%s.schemas.%s.tables.%s", d->name, t->schema,
		 t->name);
}

/* Type name of <oid> for messages. */
static const char *
type_name(const struct catalog *c, uint32_t oid, char *buf, size_t len)
{
	const struct cat_type *ty = cat_find_type(c, oid);

	if (ty)
		return ty->name;
	snprintf(buf, len, "oid %u", oid);
	return buf;
}

/* Resolve the base column types of <ix> in <t>; false after a finding. */
static bool
column_types(const struct catalog *c, const struct cat_table *t,
	     const struct topo_shard_index *ix, enum ks_type *types, const char *path,
	     struct topo_findings *f)
{
	char tb[32];

	for (uint32_t k = 0; k < ix->expr->ncolumns; k++) {
		const struct cat_column *col = cat_find_column(t, ix->expr->columns[k]);

		if (!col) {
			topo_findings_add(f, path, "tables/shard-key-type",
					  ERRCODE_INVALID_PARAMETER_VALUE, false,
					  "shard key column \"%s\" of shard index \"%s\" does not "
					  "exist in table \"%s.%s\"", ix->expr->columns[k],
					  ix->name, t->schema, t->name);
			return false;
		}
		if (!cat_ks_type(c, col->type_oid, &types[k])) {
			topo_findings_add(f, path, "tables/shard-key-type",
					  ERRCODE_INVALID_PARAMETER_VALUE, false,
					  "shard key column \"%s\" of table \"%s.%s\" has type %s, "
					  "which has no routing rule", col->name, t->schema, t->name,
					  type_name(c, col->type_oid, tb, sizeof(tb)));
			return false;
		}
	}
	return true;
}

/* V4 for one catalog table. */
static void
check_table(const struct catalog *c, const struct topo_model *m, const struct topo_database *d,
	    const struct cat_table *t, struct topo_findings *f)
{
	struct topo_resolution r;
	enum ks_type types[KS_EXPR_MAX_COLUMNS], result;
	struct nk_error err;
	char path[TOPO_PATH_MAX];
	const struct topo_shard_index *ix;

	topo_resolve_table(m, d->name, t->schema, t->name, &r);
	ix = r.kind == TOPO_REL_TABLE ? r.index : NULL;
	if (!ix || !ix->expr || !ix->type_ok || ix->expr->ncolumns > KS_EXPR_MAX_COLUMNS)
		return;
	table_path(path, d, t);
	if (!column_types(c, t, ix, types, path, f))
		return;
	memset(&err, 0, sizeof(err));
	if (!ks_index_accepts(ix->type, ix->expr, types, &result, &err))
		topo_findings_add(f, path, "tables/shard-key-type", ERRCODE_INVALID_PARAMETER_VALUE,
				  false,
				  "table \"%s.%s\" cannot be sharded by shard index \"%s\": %s",
				  t->schema, t->name, ix->name, err.message);
}

/* The catalog table of GSI <g>'s lookup table (schema given, or the one listing it). */
static const struct cat_table *
gsi_lookup_table(const struct catalog *c, const struct topo_database *d,
		 const struct topo_gsi *g)
{
	const char *schema = g->schema;

	for (size_t s = 0; !schema && s < d->nschemas; s++)
		if (topo_find_table(&d->schemas[s], g->table))
			schema = d->schemas[s].name;
	return cat_find_table(c, schema ? schema : "public", g->table);
}

/* Does key <k> of <t> consist of exactly the columns <cols> (in any order)? */
static bool
key_matches(const struct cat_table *t, const struct cat_key *k, const struct topo_strlist *cols)
{
	if (k->ncols != cols->n)
		return false;
	for (size_t i = 0; i < cols->n; i++) {
		bool found = false;

		for (size_t j = 0; j < k->ncols && !found; j++)
			found = strcmp(t->cols[k->cols[j]].name, cols->v[i]) == 0;
		if (!found)
			return false;
	}
	return true;
}

/* cat_gsi_disabled: see catalog.h. A lookup table the catalog lacks does not disable. */
bool
cat_gsi_disabled(const struct catalog *c, const struct topo_database *d,
		 const struct topo_gsi *g)
{
	const struct cat_table *t;
	const struct cat_key *pk;

	if (!g->unique)
		return false;
	t = gsi_lookup_table(c, d, g);
	if (!t)
		return false;
	pk = cat_primary_key(t);
	return !pk || !key_matches(t, pk, &g->columns);
}

/* V11 for every GSI of <d>. */
static void
check_gsis(const struct catalog *c, const struct topo_database *d, struct topo_findings *f)
{
	char path[TOPO_PATH_MAX];

	for (size_t i = 0; i < d->ngsis; i++) {
		const struct topo_gsi *g = &d->gsis[i];

		if (!cat_gsi_disabled(c, d, g))
			continue;
		snprintf(path, sizeof(path), "databases.%s.global_secondary_indexes.%s", d->name,
			 g->name);
		topo_findings_add(f, path, "gsi/lookup-pk", ERRCODE_INVALID_PARAMETER_VALUE, true,
				  "unique global secondary index \"%s\" is disabled: the primary "
				  "key of lookup table \"%s\" is not its columns", g->name,
				  g->table);
	}
}

/* cat_check_topology: see catalog.h. Resolution (spec 2.3) says which tables are sharded. */
void
cat_check_topology(const struct catalog *c, const struct topo_model *m,
		   struct topo_findings *reject, struct topo_findings *disabled)
{
	const struct topo_database *d = topo_find_database(m, c->dbname);

	if (!d)
		return;
	for (size_t i = 0; i < c->ntables; i++) {
		const struct cat_table *t = &c->tables[i];

		/* a partition is routed by its parent's key: the parent is checked */
		if (kind_is_routed(t->kind) && !t->is_partition)
			check_table(c, m, d, t, reject);
	}
	check_gsis(c, d, disabled);
}
