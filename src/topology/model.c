/*
 * model.c - the topology model's memory (one arena per model), validation findings, name
 * lookups and resolution (spec section 2.3): table -> shard group -> shard index, and
 * sequences. The JSON reader/writer is json.c, the rules validate.c, the image image.c.
 */
#include "neki/base.h"

#include "neki/rarena.h"
#include "neki/topology.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo_int.h"

/* topo_alloc: see topo_int.h. */
void *
topo_alloc(struct topo_model *m, size_t size)
{
	return rarena_alloc(m->arena, size);
}

const char *
topo_strdup(struct topo_model *m, const char *s)
{
	size_t n = strlen(s) + 1;
	char *p = topo_alloc(m, n);

	if (p)
		memcpy(p, s, n);
	return p;
}

struct topo_model *
topo_model_new(void)
{
	struct topo_model *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	m->arena = rarena_new();
	if (!m->arena) {
		free(m);
		return NULL;
	}
	return m;
}

/* topo_model_free: see topology.h. Shard-key expressions are in the arena too. */
void
topo_model_free(struct topo_model *m)
{
	if (!m)
		return;
	rarena_free(m->arena);
	free(m);
}

/* All name-keyed structs start with "const char *name", so one comparator serves all. */
static int
cmp_name(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* qsort by name; qsort must not see a NULL base, even for zero elements. */
static void
sort_named(void *base, size_t n, size_t size)
{
	if (n > 1)
		qsort(base, n, size, cmp_name);
}

/* topo_model_sort: see topo_int.h. */
void
topo_model_sort(struct topo_model *m)
{
	sort_named(m->dbs, m->ndbs, sizeof(*m->dbs));
	sort_named(m->indexes, m->nindexes, sizeof(*m->indexes));
	for (size_t d = 0; d < m->ndbs; d++) {
		struct topo_database *db = &m->dbs[d];

		sort_named(db->schemas, db->nschemas, sizeof(*db->schemas));
		sort_named(db->gsis, db->ngsis, sizeof(*db->gsis));
		for (size_t s = 0; s < db->nschemas; s++) {
			struct topo_schema *sc = &db->schemas[s];

			sort_named(sc->tables, sc->ntables, sizeof(*sc->tables));
			sort_named(sc->refs, sc->nrefs, sizeof(*sc->refs));
			sort_named(sc->seqs, sc->nseqs, sizeof(*sc->seqs));
		}
	}
}

/* Binary search of <name> in a sorted array of name-first structs. */
static const void *
find_named(const void *base, size_t n, size_t size, const char *name)
{
	if (!name || n == 0)
		return NULL;
	return bsearch(&name, base, n, size, cmp_name);
}

const struct topo_database *
topo_find_database(const struct topo_model *m, const char *name)
{
	return find_named(m->dbs, m->ndbs, sizeof(*m->dbs), name);
}

const struct topo_schema *
topo_find_schema(const struct topo_database *d, const char *name)
{
	return d ? find_named(d->schemas, d->nschemas, sizeof(*d->schemas), name) : NULL;
}

const struct topo_table *
topo_find_table(const struct topo_schema *s, const char *name)
{
	return s ? find_named(s->tables, s->ntables, sizeof(*s->tables), name) : NULL;
}

const struct topo_shard_index *
topo_find_index(const struct topo_model *m, const char *name)
{
	return find_named(m->indexes, m->nindexes, sizeof(*m->indexes), name);
}

/* topo_group_index: see topo_int.h. Groups keep JSON order, so this is linear. */
ssize_t
topo_group_index(const struct topo_model *m, const char *uid)
{
	if (!uid)
		return -1;
	for (size_t i = 0; i < m->ngroups; i++)
		if (m->groups[i].uid && strcmp(m->groups[i].uid, uid) == 0)
			return (ssize_t)i;
	return -1;
}

const struct topo_shard_group *
topo_find_group(const struct topo_model *m, const char *uid)
{
	ssize_t i = topo_group_index(m, uid);

	return i < 0 ? NULL : &m->groups[i];
}

const char *
topo_bound_text(const char *s)
{
	return s ? s : "(none)";
}

/* topo_default_group: see topology.h. */
const char *
topo_default_group(const struct topo_model *m, const char *db, const char *schema,
		   const char **from)
{
	const struct topo_database *d = topo_find_database(m, db);
	const struct topo_schema *s = topo_find_schema(d, schema);

	if (s && s->default_shard_group) {
		*from = "schema";
		return s->default_shard_group;
	}
	if (d && d->default_shard_group) {
		*from = "database";
		return d->default_shard_group;
	}
	*from = "topology";
	return m->default_shard_group;
}

/* topo_resolve_table: see topology.h. */
void
topo_resolve_table(const struct topo_model *m, const char *db, const char *schema,
		   const char *table, struct topo_resolution *out)
{
	const struct topo_schema *s = topo_find_schema(topo_find_database(m, db), schema);
	const struct topo_table *t = topo_find_table(s, table);
	const char *uid, *index_name;

	memset(out, 0, sizeof(*out));
	out->table = t;
	out->ref = s ? find_named(s->refs, s->nrefs, sizeof(*s->refs), table) : NULL;
	if (out->ref && !t) {
		out->kind = TOPO_REL_REFERENCE;
		return;
	}
	if (t && t->shard_group) {
		uid = t->shard_group;
		out->group_from = "table";
	} else {
		uid = topo_default_group(m, db, schema, &out->group_from);
	}
	out->group = topo_find_group(m, uid);
	if (!out->group) {
		out->group_from = NULL;
		return;
	}
	out->kind = TOPO_REL_TABLE;
	index_name = t && t->shard_index ? t->shard_index : out->group->default_shard_index;
	out->index = topo_find_index(m, index_name);
}

/* topo_group_shard_count: see topology.h. Ranges are few, so a quadratic scan is fine. */
size_t
topo_group_shard_count(const struct topo_shard_group *g)
{
	size_t n = 0;

	for (size_t i = 0; i < g->nranges; i++) {
		size_t j;

		if (!g->ranges[i].shard_uid)
			continue;
		for (j = 0; j < i; j++)
			if (g->ranges[j].shard_uid &&
			    strcmp(g->ranges[j].shard_uid, g->ranges[i].shard_uid) == 0)
				break;
		n += j == i;
	}
	return n;
}

/* Step 2 of sequence resolution: every owner an unsharded table of one single-shard group. */
static const struct topo_shard_group *
owner_group(const struct topo_model *m, const char *db, const struct topo_seq_owner *owners,
	    size_t n)
{
	const struct topo_shard_group *g = NULL;

	for (size_t i = 0; i < n; i++) {
		struct topo_resolution r;

		topo_resolve_table(m, db, owners[i].schema, owners[i].table, &r);
		if (r.kind != TOPO_REL_TABLE || r.index || (g && g != r.group))
			return NULL;
		g = r.group;
	}
	return g && topo_group_shard_count(g) == 1 ? g : NULL;
}

/* topo_resolve_sequence: see topology.h. */
const struct topo_shard_group *
topo_resolve_sequence(const struct topo_model *m, const char *db, const char *schema,
		      const char *seq, const struct topo_seq_owner *owners, size_t nowners)
{
	const struct topo_schema *s = topo_find_schema(topo_find_database(m, db), schema);
	const struct topo_sequence *q = s ? find_named(s->seqs, s->nseqs, sizeof(*s->seqs), seq) :
					    NULL;
	const struct topo_shard_group *g;

	if (q && q->shard_group)
		return topo_find_group(m, q->shard_group);
	g = owner_group(m, db, owners, nowners);
	return g ? g : topo_find_group(m, m->authoritative_shard_group);
}

/* topo_group_find_range: see topology.h. Ranges are sorted and contiguous once valid. */
size_t
topo_group_find_range(const struct topo_shard_group *g, uint64_t v)
{
	size_t lo = 0, hi = g->nranges;

	NK_ASSERT(g->nranges >= 1);
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (g->ranges[mid].start <= v)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

void
topo_findings_init(struct topo_findings *f)
{
	memset(f, 0, sizeof(*f));
}

void
topo_findings_cleanup(struct topo_findings *f)
{
	free(f->v);
	memset(f, 0, sizeof(*f));
}

/* topo_findings_addv: see topology.h. Truncates long paths and messages. */
void
topo_findings_addv(struct topo_findings *f, const char *path, const char *rule,
		   const char *sqlstate, bool forceable, const char *fmt, va_list ap)
{
	struct topo_finding *fi;

	if (!f)
		return;
	if (f->n == f->cap) {
		size_t cap = f->cap ? 2 * f->cap : 8;
		struct topo_finding *v = realloc(f->v, cap * sizeof(*v));

		if (!v) {
			f->oom = true;
			return;
		}
		f->v = v;
		f->cap = cap;
	}
	fi = &f->v[f->n++];
	memset(fi, 0, sizeof(*fi));
	snprintf(fi->path, sizeof(fi->path), "%s", path);
	snprintf(fi->rule, sizeof(fi->rule), "%s", rule);
	snprintf(fi->sqlstate, sizeof(fi->sqlstate), "%s", sqlstate);
	fi->forceable = forceable;
	vsnprintf(fi->message, sizeof(fi->message), fmt, ap);
}

/* topo_findings_add: see topology.h. */
void
topo_findings_add(struct topo_findings *f, const char *path, const char *rule,
		  const char *sqlstate, bool forceable, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	topo_findings_addv(f, path, rule, sqlstate, forceable, fmt, ap);
	va_end(ap);
}

/* topo_findings_mark_preexisting: see topology.h. */
void
topo_findings_mark_preexisting(struct topo_findings *now, const struct topo_findings *before)
{
	for (size_t i = 0; i < now->n; i++) {
		for (size_t j = 0; before && j < before->n; j++) {
			if (strcmp(now->v[i].path, before->v[j].path) == 0 &&
			    strcmp(now->v[i].rule, before->v[j].rule) == 0) {
				now->v[i].preexisting = true;
				break;
			}
		}
	}
}

/* topo_findings_first_blocking: see topology.h. */
const struct topo_finding *
topo_findings_first_blocking(const struct topo_findings *f, bool force)
{
	for (size_t i = 0; i < f->n; i++) {
		const struct topo_finding *fi = &f->v[i];

		if (!fi->preexisting && !(force && fi->forceable))
			return fi;
	}
	return NULL;
}

/* topo_finding_to_error: see topology.h. */
bool
topo_finding_to_error(const struct topo_finding *fi, struct nk_error *err)
{
	if (fi->code)
		nk_error_nk013(err, fi->code);
	else if (strcmp(fi->rule, "key-ranges/shard-declared") == 0 ||
		 strcmp(fi->rule, "authoritative/moved") == 0)
		nk_error_set(err, fi->sqlstate, "%s", fi->message);
	else
		nk_error_set(err, fi->sqlstate, "invalid data topology: %s: %s", fi->path,
			     fi->message);
	if (!err)
		return false;
	if (fi->code)
		nk_error_detail(err, "%s: %s (rule %s)", fi->path, fi->message, fi->rule);
	else
		nk_error_detail(err, "Broken rule: %s.", fi->rule);
	if (strcmp(fi->rule, "key-ranges/shard-declared") == 0)
		nk_error_hint(err, "Create the shard first: declare it in the [shards] section "
				   "of the configuration and reload.");
	snprintf(err->where, sizeof(err->where), "%s", fi->path);
	return false;
}
