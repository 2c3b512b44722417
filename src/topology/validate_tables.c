/*
 * validate_tables.c - the per-database rules: table bindings (groups and index overrides
 * that exist and fit), reference tables, sequences (V12) and global secondary indexes
 * (V10 and the owner/lookup declarations). Entry point: topo_validate_database().
 */
#include "neki/base.h"

#include "neki/topology.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "topo_int.h"

/* Paths of a database's entries: "databases.<db>.schemas.<schema>.<kind>.<name><suffix>". */
static const char * NK_PRINTF(2, 3)
pathf(char *buf, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, TOPO_PATH_MAX, fmt, ap);
	va_end(ap);
	return buf;
}

/* Record a finding (22023) that blocks even with "force". */
static void NK_PRINTF(4, 5)
add(struct topo_findings *f, const char *path, const char *rule, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	topo_findings_addv(f, path, rule, ERRCODE_INVALID_PARAMETER_VALUE, false, fmt, ap);
	va_end(ap);
}

/* Record a finding (22023) that "force" may let through. */
static void NK_PRINTF(4, 5)
add_forceable(struct topo_findings *f, const char *path, const char *rule, const char *fmt,
	      ...)
{
	va_list ap;

	va_start(ap, fmt);
	topo_findings_addv(f, path, rule, ERRCODE_INVALID_PARAMETER_VALUE, true, fmt, ap);
	va_end(ap);
}

struct vt_ctx {
	const struct topo_model *m;
	const struct topo_database *d;
	const struct topo_schema *s;
	struct topo_findings *f;
};

static void
check_group_ref(const struct vt_ctx *c, const char *uid, const char *path)
{
	if (uid && !topo_find_group(c->m, uid))
		add(c->f, path, "references/shard-group", "shard group \"%s\" does not exist", uid);
}

static bool
strlist_has(const struct topo_strlist *l, const char *s)
{
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->v[i], s) == 0)
			return true;
	return false;
}

static bool
strlist_eq(const struct topo_strlist *a, const struct topo_strlist *b)
{
	if (a->n != b->n)
		return false;
	for (size_t i = 0; i < a->n; i++)
		if (strcmp(a->v[i], b->v[i]) != 0)
			return false;
	return true;
}

static const struct topo_gsi *
find_gsi(const struct topo_database *d, const char *name)
{
	for (size_t i = 0; name && i < d->ngsis; i++)
		if (strcmp(d->gsis[i].name, name) == 0)
			return &d->gsis[i];
	return NULL;
}

static void
check_secondary(const struct vt_ctx *c, const struct topo_table *t, size_t k)
{
	const struct topo_secondary_index *si = &t->sis[k];
	const struct topo_gsi *g = find_gsi(c->d, si->name);
	char p[TOPO_PATH_MAX];

	if (!si->name)
		return;
	pathf(p, "databases.%s.schemas.%s.tables.%s.secondary_indexes[%zu].%s", c->d->name,
	      c->s->name, t->name, k, g && strlist_eq(&si->columns, &g->columns) ? "name" :
									      "columns");
	if (!g)
		add_forceable(c->f, p, "gsi/unknown",
			      "global secondary index \"%s\" is not declared in "
			      "databases.%s.global_secondary_indexes", si->name, c->d->name);
	else if (g->owner_table && strcmp(g->owner_table, t->name) != 0)
		add_forceable(c->f, p, "gsi/owner-mismatch",
			      "global secondary index \"%s\" belongs to owner table \"%s\", not "
			      "\"%s\"", si->name, g->owner_table, t->name);
	else if (!strlist_eq(&si->columns, &g->columns))
		add_forceable(c->f, p, "gsi/columns-mismatch",
			      "columns must equal the columns of global secondary index \"%s\"",
			      si->name);
}

/* The override index <t>->shard_index must fit the layout of its group's key ranges. */
static void
check_override(const struct vt_ctx *c, const struct topo_table *t,
	       const struct topo_resolution *r, const char *path)
{
	const struct topo_shard_index *ix = topo_find_index(c->m, t->shard_index);
	const struct topo_shard_index *dflt;

	if (!ix) {
		add(c->f, path, "references/shard-index", "shard index \"%s\" does not exist",
		    t->shard_index);
		return;
	}
	dflt = r->group ? topo_find_index(c->m, r->group->default_shard_index) : NULL;
	if (dflt && dflt->type_ok && ix->type_ok && dflt->type != ix->type)
		add(c->f, path, "tables/index-compatible",
		    "shard index \"%s\" (type %s) does not fit shard group \"%s\", whose key "
		    "ranges are laid out for type %s", ix->name, ks_index_type_str(ix->type),
		    r->group->uid, ks_index_type_str(dflt->type));
}

static void
check_table(const struct vt_ctx *c, const struct topo_table *t)
{
	char p[TOPO_PATH_MAX], base[TOPO_PATH_MAX];
	struct topo_resolution r;

	pathf(base, "databases.%s.schemas.%s.tables.%s", c->d->name, c->s->name, t->name);
	check_group_ref(c, t->shard_group, pathf(p, "%s.shard_group", base));
	topo_resolve_table(c->m, c->d->name, c->s->name, t->name, &r);
	if (!r.group && (!t->shard_group || topo_find_group(c->m, t->shard_group)))
		add_forceable(c->f, base, "tables/no-group",
			      "table has no shard group: set \"shard_group\" or a schema, database "
			      "or topology default_shard_group");
	if (t->shard_index)
		check_override(c, t, &r, pathf(p, "%s.shard_index", base));
	for (size_t k = 0; k < t->nsis; k++)
		check_secondary(c, t, k);
}

static void
check_ref(const struct vt_ctx *c, const struct topo_ref_table *rt)
{
	char p[TOPO_PATH_MAX], base[TOPO_PATH_MAX];
	const char *from;

	pathf(base, "databases.%s.schemas.%s.reference_tables.%s", c->d->name, c->s->name,
	      rt->name);
	if (topo_find_table(c->s, rt->name))
		add(c->f, base, "tables/duplicate",
		    "table \"%s\" is listed both in tables and in reference_tables", rt->name);
	if (!rt->has_groups) {
		if (!topo_find_group(c->m, topo_default_group(c->m, c->d->name, c->s->name, &from)))
			add(c->f, base, "reference/no-group",
			    "reference table needs \"shard_groups\": no schema, database or "
			    "topology default_shard_group resolves");
		return;
	}
	if (rt->shard_groups.n == 0)
		add(c->f, pathf(p, "%s.shard_groups", base), "reference/no-group",
		    "shard_groups must not be empty");
	for (size_t i = 0; i < rt->shard_groups.n; i++)
		check_group_ref(c, rt->shard_groups.v[i], pathf(p, "%s.shard_groups[%zu]", base, i));
}

static void
check_seq(const struct vt_ctx *c, const struct topo_sequence *q)
{
	const struct topo_shard_group *g = topo_find_group(c->m, q->shard_group);
	char p[TOPO_PATH_MAX];
	size_t n;

	pathf(p, "databases.%s.schemas.%s.sequences.%s.shard_group", c->d->name, c->s->name,
	      q->name);
	check_group_ref(c, q->shard_group, p);
	if (g && (n = topo_group_shard_count(g)) != 1)
		add(c->f, p, "sequences/single-shard",
		    "sequence shard group \"%s\" must contain exactly one shard, not %zu", g->uid, n);
}

/* The schema holding the lookup table of <g> ("schema", or the one schema listing it). */
static const struct topo_schema *
gsi_schema(const struct vt_ctx *c, const struct topo_gsi *g, const char *base)
{
	const struct topo_schema *found = NULL;
	char p[TOPO_PATH_MAX];
	size_t n = 0;

	if (g->schema) {
		found = topo_find_schema(c->d, g->schema);
		if (!found)
			add_forceable(c->f, pathf(p, "%s.schema", base), "gsi/lookup-table",
				      "schema \"%s\" is not in databases.%s.schemas", g->schema,
				      c->d->name);
		return found;
	}
	for (size_t s = 0; s < c->d->nschemas; s++)
		if (topo_find_table(&c->d->schemas[s], g->table) && n++ == 0)
			found = &c->d->schemas[s];
	if (n > 1)
		add_forceable(c->f, pathf(p, "%s.schema", base), "gsi/schema-ambiguous",
			      "lookup table \"%s\" is in several schemas: set \"schema\"", g->table);
	else if (n == 0)
		add_forceable(c->f, pathf(p, "%s.table", base), "gsi/lookup-table",
			      "lookup table \"%s\" needs its own entry in tables", g->table);
	return n == 1 ? found : NULL;
}

/* V10: a sharded lookup table must be sharded by one of the GSI's indexed columns. */
static void
check_gsi_lookup(const struct vt_ctx *c, const struct topo_gsi *g,
		 const struct topo_schema *sc, const char *base)
{
	struct topo_resolution r;
	char p[TOPO_PATH_MAX];

	if (!topo_find_table(sc, g->table)) {
		add_forceable(c->f, pathf(p, "%s.table", base), "gsi/lookup-table",
			      "lookup table \"%s\" needs its own entry in tables", g->table);
		return;
	}
	topo_resolve_table(c->m, c->d->name, sc->name, g->table, &r);
	if (r.kind != TOPO_REL_TABLE || !r.index || !r.index->expr)
		return;
	for (uint32_t k = 0; k < r.index->expr->ncolumns; k++)
		if (!strlist_has(&g->columns, r.index->expr->columns[k]))
			add_forceable(c->f, pathf(p, "%s.table", base), "gsi/lookup-sharding",
				      "lookup table \"%s\" is sharded by column \"%s\", which is not "
				      "one of the index's columns", g->table,
				      r.index->expr->columns[k]);
}

/* The owner must resolve; its shard key must be (or be inferable as) owner_sk_columns. */
static void
check_gsi_owner(const struct vt_ctx *c, const struct topo_gsi *g, const char *schema,
		const char *base)
{
	struct topo_resolution r;
	char p[TOPO_PATH_MAX];
	const struct ks_expr *e;

	topo_resolve_table(c->m, c->d->name, schema, g->owner_table, &r);
	if (r.kind != TOPO_REL_TABLE) {
		add_forceable(c->f, pathf(p, "%s.owner_table", base), "gsi/owner-table",
			      "owner table \"%s\" does not resolve to a shard group", g->owner_table);
		return;
	}
	e = r.index ? r.index->expr : NULL;
	if (!g->has_owner_sk && !e)
		add_forceable(c->f, base, "gsi/owner-sk-columns",
			      "owner_sk_columns must be given: owner table \"%s\" has no shard index "
			      "to infer them from", g->owner_table);
	for (uint32_t k = 0; g->has_owner_sk && e && k < e->ncolumns; k++)
		if (!strlist_has(&g->owner_sk_columns, e->columns[k]))
			add_forceable(c->f, pathf(p, "%s.owner_sk_columns", base),
				      "gsi/owner-sk-columns",
				      "owner_sk_columns must include \"%s\", the shard key of owner "
				      "table \"%s\"", e->columns[k], g->owner_table);
}

static void
check_gsi(const struct vt_ctx *c, const struct topo_gsi *g)
{
	char base[TOPO_PATH_MAX], p[TOPO_PATH_MAX];
	const struct topo_schema *sc;

	pathf(base, "databases.%s.global_secondary_indexes.%s", c->d->name, g->name);
	if (g->columns.v && g->columns.n == 0)
		add_forceable(c->f, pathf(p, "%s.columns", base), "gsi/columns",
			      "a global secondary index needs at least one column");
	if (!g->unique && (!g->has_owner_pk || g->owner_pk_columns.n == 0))
		add_forceable(c->f, base, "gsi/owner-pk-columns",
			      "a non-unique global secondary index needs owner_pk_columns");
	if (g->write_only && !g->enabled)
		add_forceable(c->f, pathf(p, "%s.write_only", base), "gsi/write-only",
			      "a write-only global secondary index must be enabled (write_only: the "
			      "router maintains its lookup rows but does not read through them)");
	if (!g->table || !g->owner_table)
		return;	/* missing: reported by the reader */
	sc = gsi_schema(c, g, base);
	if (!sc)
		return;
	check_gsi_lookup(c, g, sc, base);
	check_gsi_owner(c, g, sc->name, base);
}

/* topo_validate_database: see topo_int.h. */
void
topo_validate_database(const struct topo_model *m, const struct topo_database *d,
		       struct topo_findings *f)
{
	struct vt_ctx c = { m, d, NULL, f };
	char p[TOPO_PATH_MAX];

	check_group_ref(&c, d->default_shard_group,
			pathf(p, "databases.%s.default_shard_group", d->name));
	for (size_t s = 0; s < d->nschemas; s++) {
		c.s = &d->schemas[s];
		check_group_ref(&c, c.s->default_shard_group,
				pathf(p, "databases.%s.schemas.%s.default_shard_group", d->name,
				      c.s->name));
		for (size_t i = 0; i < c.s->ntables; i++)
			check_table(&c, &c.s->tables[i]);
		for (size_t i = 0; i < c.s->nrefs; i++)
			check_ref(&c, &c.s->refs[i]);
		for (size_t i = 0; i < c.s->nseqs; i++)
			check_seq(&c, &c.s->seqs[i]);
	}
	for (size_t g = 0; g < d->ngsis; g++)
		check_gsi(&c, &d->gsis[g]);
}
