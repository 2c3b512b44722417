/*
 * validate.c - the topology rules: linking (index types, shard-key expressions, key-range
 * bounds), then every semantic rule of spec 2.5 (V1-V12) and DESIGN.md section 4 (sorted,
 * contiguous, complete key ranges; declared shards; index overrides that fit their group;
 * consistent GSIs; the authoritative shard never moves), and topo_check(), which decides
 * whether a new revision may be applied (pre-existing findings never block; "force" lets
 * the forceable ones through). Rule slugs and messages are listed in doc/topology.md.
 */
#include "neki/base.h"

#include "neki/topology.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "topo_int.h"

/* printf into a path buffer of TOPO_PATH_MAX bytes; returns it. */
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


static void
link_expr(struct topo_model *m, struct topo_shard_index *ix, struct topo_findings *f)
{
	char p[TOPO_PATH_MAX];
	struct nk_error err;
	struct ks_expr *e;

	if (ix->columns.n == 0) {
		add(f, pathf(p, "shard_indexes.%s.columns", ix->name), "shard-index/columns",
		    "a shard index needs exactly one entry in columns");
		return;
	}
	if (ix->columns.n > 1) {
		topo_findings_add(f, pathf(p, "shard_indexes.%s.columns", ix->name),
				  "shard-index/multi-column", NK_ERRCODE_NOT_IMPLEMENTED, false,
				  "multi-column partitioning indexes are not supported");
		f->v[f->n - 1].code = f->oom ? 0 : 10;
		return;
	}
	e = topo_alloc(m, sizeof(*e));
	if (!e) {
		add(f, "(root)", "json/out-of-memory", "out of memory while linking");
		return;
	}
	if (ks_expr_parse(ix->columns.v[0], e, &err))
		ix->expr = e;
	else
		add(f, pathf(p, "shard_indexes.%s.columns[0]", ix->name),
		    "shard-index/expression", "%s", err.message);
}

static void
link_index(struct topo_model *m, struct topo_shard_index *ix, struct topo_findings *f)
{
	char p[TOPO_PATH_MAX];

	if (ix->type_text && !(ix->type_ok = ks_index_type_from_str(ix->type_text, &ix->type)))
		add(f, pathf(p, "shard_indexes.%s.type", ix->name), "shard-index/type",
		    "unknown shard index type \"%s\": must be xxhash, modulo or range",
		    ix->type_text);
	link_expr(m, ix, f);
	if (ix->type_ok && ix->type == KS_INDEX_MODULO && ix->modulus <= 0)
		add(f, pathf(p, "shard_indexes.%s.index_params%s", ix->name,
			     ix->has_params ? ".modulus" : ""), "shard-index/modulus",
		    "a modulo shard index needs a positive integer index_params.modulus");
	else if (ix->type_ok && ix->type != KS_INDEX_MODULO && ix->has_modulus)
		add(f, pathf(p, "shard_indexes.%s.index_params.modulus", ix->name),
		    "shard-index/params", "modulus applies only to shard indexes of type modulo");
}

/* Parse one bound; returns whether it is valid (an absent bound is). */
static bool
link_bound(const char *text, enum ks_index_type t, uint64_t *out, const char *path,
	   struct topo_findings *f)
{
	if (!text)
		return true;
	if (t == KS_INDEX_RANGE ? ks_bound_parse_decimal(text, out) :
				  ks_bound_parse_hex(text, out))
		return true;
	if (t == KS_INDEX_RANGE)
		add(f, path, "key-ranges/bound",
		    "invalid bound \"%s\": the group's shard index is of type range, so bounds "
		    "are signed 64-bit decimal integers", text);
	else
		add(f, path, "key-ranges/bound",
		    "invalid bound \"%s\": expected 1 to 16 hexadecimal digits", text);
	return false;
}

static void
link_group(struct topo_model *m, size_t gi, struct topo_findings *f)
{
	struct topo_shard_group *g = &m->groups[gi];
	const struct topo_shard_index *ix = topo_find_index(m, g->default_shard_index);
	char p[TOPO_PATH_MAX];

	g->bound_type = ix && ix->type_ok ? ix->type : KS_INDEX_XXHASH;
	for (size_t j = 0; j < g->nranges; j++) {
		struct topo_key_range *r = &g->ranges[j];
		bool ok = link_bound(r->start_text, g->bound_type, &r->start,
				     pathf(p, "shard_groups[%zu].key_ranges[%zu].start", gi, j), f);

		ok &= link_bound(r->end_text, g->bound_type, &r->end,
				 pathf(p, "shard_groups[%zu].key_ranges[%zu].end", gi, j), f);
		r->has_end = r->end_text != NULL;
		r->bounds_ok = ok;
	}
}

/* topo_link: see topo_int.h. */
void
topo_link(struct topo_model *m, struct topo_findings *f)
{
	for (size_t i = 0; i < m->nindexes; i++)
		link_index(m, &m->indexes[i], f);
	for (size_t i = 0; i < m->ngroups; i++)
		link_group(m, i, f);
}

/* ---- key ranges ---- */

static void
check_range_pair(const struct topo_shard_group *g, size_t gi, size_t j, struct topo_findings *f)
{
	const struct topo_key_range *prev = &g->ranges[j - 1], *r = &g->ranges[j];
	char p[TOPO_PATH_MAX];

	pathf(p, "shard_groups[%zu].key_ranges[%zu].start", gi, j);
	if (!prev->has_end)
		add(f, p, "key-ranges/overlap",
		    "key ranges overlap: the previous range has no end, so this one must not exist");
	else if (r->start > prev->end)
		add(f, p, "key-ranges/gap",
		    "gap in key ranges: this range starts at \"%s\" but the previous one ends at "
		    "\"%s\"", topo_bound_text(r->start_text), prev->end_text);
	else if (r->start < prev->end)
		add(f, p, "key-ranges/overlap",
		    "key ranges overlap or are out of order: this range starts at \"%s\" but the "
		    "previous one ends at \"%s\"", topo_bound_text(r->start_text), prev->end_text);
}

static void
check_ranges(const struct topo_shard_group *g, size_t gi, struct topo_findings *f)
{
	char p[TOPO_PATH_MAX];
	size_t last = g->nranges - 1;

	for (size_t j = 0; j < g->nranges; j++)
		if (!g->ranges[j].bounds_ok)
			return;	/* bound syntax already reported */
	for (size_t j = 0; j < g->nranges; j++) {
		const struct topo_key_range *r = &g->ranges[j];

		if (r->has_end && r->end <= r->start)
			add(f, pathf(p, "shard_groups[%zu].key_ranges[%zu].end", gi, j),
			    "key-ranges/empty-range", "end \"%s\" must be greater than start \"%s\"",
			    r->end_text, topo_bound_text(r->start_text));
		if (j > 0)
			check_range_pair(g, gi, j, f);
	}
	if (g->ranges[0].start != 0)
		add(f, pathf(p, "shard_groups[%zu].key_ranges[0].start", gi), "key-ranges/complete",
		    "the first key range must start at the beginning of the keyspace (omit "
		    "\"start\"), not at \"%s\"", g->ranges[0].start_text);
	if (g->ranges[last].has_end)
		add(f, pathf(p, "shard_groups[%zu].key_ranges[%zu].end", gi, last),
		    "key-ranges/complete",
		    "the last key range must run to the end of the keyspace (omit \"end\"), not "
		    "stop at \"%s\"", g->ranges[last].end_text);
}

static bool
shard_declared(const struct topo_validate_input *in, const char *uid)
{
	for (size_t i = 0; i < in->nshards; i++)
		if (strcmp(in->shard_uids[i], uid) == 0)
			return true;
	return false;
}

static void
check_group(const struct topo_model *m, size_t gi, const struct topo_validate_input *in,
	    struct topo_findings *f)
{
	const struct topo_shard_group *g = &m->groups[gi];
	char p[TOPO_PATH_MAX];

	if (g->uid && topo_group_index(m, g->uid) != (ssize_t)gi)
		add(f, pathf(p, "shard_groups[%zu].uid", gi), "shard-groups/unique-uid",
		    "duplicate shard group uid \"%s\"", g->uid);
	if (g->default_shard_index && !topo_find_index(m, g->default_shard_index))
		add(f, pathf(p, "shard_groups[%zu].default_shard_index", gi),
		    "references/shard-index", "shard index \"%s\" does not exist",
		    g->default_shard_index);
	if (g->nranges == 0) {
		add(f, pathf(p, "shard_groups[%zu].key_ranges", gi), "key-ranges/empty",
		    "a shard group needs at least one key range");
		return;
	}
	if (g->nranges > 1 && !g->default_shard_index)
		add(f, pathf(p, "shard_groups[%zu].default_shard_index", gi),
		    "shard-groups/needs-index",
		    "a shard group with more than one key range needs a default_shard_index");
	check_ranges(g, gi, f);
	for (size_t j = 0; j < g->nranges; j++) {
		const char *uid = g->ranges[j].shard_uid;

		if (uid && !shard_declared(in, uid))
			topo_findings_add(f, pathf(p, "shard_groups[%zu].key_ranges[%zu].shard_uid",
						   gi, j), "key-ranges/shard-declared",
					  ERRCODE_UNDEFINED_OBJECT, true,
					  "data topology shard group \"%s\" key_ranges[%zu].shard_uid "
					  "\"%s\" is not a shard the cluster has created",
					  g->uid ? g->uid : "", j, uid);
	}
}

/* ---- authoritative group (V6, V7, V8) ---- */

/* The one shard of the authoritative group of <m>, or NULL when it has no single range. */
static const char *
authoritative_shard(const struct topo_model *m)
{
	const struct topo_shard_group *g = topo_find_group(m, m->authoritative_shard_group);

	return g && g->nranges == 1 ? g->ranges[0].shard_uid : NULL;
}

static void
check_authoritative(const struct topo_model *m, const struct topo_validate_input *in,
		    struct topo_findings *f)
{
	ssize_t gi = topo_group_index(m, m->authoritative_shard_group);
	const struct topo_shard_group *g = gi >= 0 ? &m->groups[gi] : NULL;
	const char *old_shard, *new_shard;
	char p[TOPO_PATH_MAX];

	if (!m->authoritative_shard_group)
		return;	/* missing: reported by the reader */
	if (!g) {
		add(f, "authoritative_shard_group", "references/shard-group",
		    "shard group \"%s\" does not exist", m->authoritative_shard_group);
		return;
	}
	if (g->nranges != 1 || g->ranges[0].start_text || g->ranges[0].end_text)
		add(f, pathf(p, "shard_groups[%zd].key_ranges", gi), "authoritative/one-range",
		    "the authoritative shard group \"%s\" must have exactly one key_range, with "
		    "no start or end", g->uid);
	if (m->default_shard_group && strcmp(m->default_shard_group, g->uid) != 0)
		add(f, "default_shard_group", "authoritative/default-group",
		    "default_shard_group \"%s\" must be omitted or equal authoritative_shard_group "
		    "\"%s\"", m->default_shard_group, g->uid);
	old_shard = in->previous ? authoritative_shard(in->previous) : NULL;
	new_shard = authoritative_shard(m);
	if (old_shard && new_shard && strcmp(old_shard, new_shard) != 0)
		add(f, "authoritative_shard_group", "authoritative/moved",
		    "authoritative shard cannot change from shard \"%s\" to shard \"%s\"",
		    old_shard, new_shard);
}

/* topo_validate: see topology.h. */
void
topo_validate(const struct topo_model *m, const struct topo_validate_input *in,
	      struct topo_findings *f)
{
	for (size_t i = 0; i < m->ngroups; i++)
		check_group(m, i, in, f);
	check_authoritative(m, in, f);
	for (size_t d = 0; d < m->ndbs; d++)
		topo_validate_database(m, &m->dbs[d], f);
}

/* topo_check: see topology.h. */
struct topo_model *
topo_check(const char *json, size_t len, const struct topo_validate_input *in, bool force,
	   struct topo_findings *f, struct nk_error *err)
{
	struct topo_findings local, before;
	struct topo_findings *all = f ? f : &local;
	const struct topo_finding *block;
	struct topo_model *m;

	if (!f)
		topo_findings_init(&local);
	m = topo_parse(json, len, all);
	if (m)
		topo_validate(m, in, all);
	if (in->previous) {
		struct topo_validate_input prev_in = { in->shard_uids, in->nshards, NULL };

		topo_findings_init(&before);
		topo_validate(in->previous, &prev_in, &before);
		topo_findings_mark_preexisting(all, &before);
		topo_findings_cleanup(&before);
	}
	block = topo_findings_first_blocking(all, force);
	if (block || all->oom || !m) {
		if (block)
			topo_finding_to_error(block, err);
		else
			nk_error_set(err, ERRCODE_OUT_OF_MEMORY,
				     "out of memory while validating the data topology");
		topo_model_free(m);
		m = NULL;
	}
	if (!f)
		topo_findings_cleanup(&local);
	return m;
}
