/*
 * image.c - build the pointer-free image of a validated topology (layout in image_int.h).
 *
 * The builder runs its fill pass twice: once measuring (no buffer: only the sizes of the
 * list and string areas are counted), once writing. Numbers: groups keep JSON order,
 * indexes their sorted order, GSIs are numbered database by database. Entry points:
 * topo_image_size(), topo_image_build(). Readers are in image_read.c.
 */
#include "neki/base.h"

#include "neki/topology_image.h"

#include <stdlib.h>
#include <string.h>

#include "neki/image_area.h"

#include "image_int.h"
#include "topo_int.h"

struct img_w {
	uint8_t *buf;			/* NULL while measuring */
	struct img_hdr h;		/* the layout being filled */
	struct image_area a;		/* strings and lists */
	const struct topo_model *m;	/* borrowed */
};

static void *
w_at(struct img_w *w, uint32_t off)
{
	return w->buf ? w->buf + off : NULL;
}

static uint32_t
w_strlist(struct img_w *w, const struct topo_strlist *l)
{
	uint32_t h = image_list(&w->a, (uint32_t)l->n);

	for (size_t i = 0; i < l->n; i++)
		image_list_set(&w->a, h, (uint32_t)i, image_str(&w->a, l->v[i]));
	return h;
}

static uint32_t
group_no(const struct topo_model *m, const char *uid)
{
	ssize_t i = topo_group_index(m, uid);

	return i < 0 ? TOPO_IMG_NONE : (uint32_t)i;
}

static uint32_t
index_no(const struct topo_model *m, const char *name)
{
	const struct topo_shard_index *ix = topo_find_index(m, name);

	return ix ? (uint32_t)(ix - m->indexes) : TOPO_IMG_NONE;
}

/* Distinct shards of <g>, in range order. */
static uint32_t
w_group_shards(struct img_w *w, const struct topo_shard_group *g)
{
	uint32_t h = image_list(&w->a, (uint32_t)topo_group_shard_count(g)), k = 0;

	for (size_t i = 0; i < g->nranges; i++) {
		const char *uid = g->ranges[i].shard_uid;
		size_t j;

		if (!uid)
			continue;
		for (j = 0; j < i; j++)
			if (g->ranges[j].shard_uid && strcmp(g->ranges[j].shard_uid, uid) == 0)
				break;
		if (j == i)
			image_list_set(&w->a, h, k++, image_str(&w->a, uid));
	}
	return h;
}

static void
fill_groups(struct img_w *w)
{
	struct img_group *groups = w_at(w, w->h.groups.off);
	struct img_range *ranges = w_at(w, w->h.ranges.off);
	uint64_t *starts = w_at(w, w->h.starts.off);
	uint32_t r = 0;

	for (size_t gi = 0; gi < w->m->ngroups; gi++) {
		const struct topo_shard_group *g = &w->m->groups[gi];
		struct img_group ig = { image_str(&w->a, g->uid),
					index_no(w->m, g->default_shard_index), r,
					(uint32_t)g->nranges, w_group_shards(w, g), 0 };

		for (size_t j = 0; j < g->nranges; j++, r++) {
			const struct topo_key_range *kr = &g->ranges[j];
			struct img_range ir = { kr->start, kr->end, image_str(&w->a, kr->shard_uid),
						kr->has_end };

			if (ranges) {
				ranges[r] = ir;
				starts[r] = kr->start;
			}
		}
		if (groups)
			groups[gi] = ig;
	}
}

static void
fill_indexes(struct img_w *w)
{
	struct img_index *out = w_at(w, w->h.indexes.off);

	for (size_t i = 0; i < w->m->nindexes; i++) {
		const struct topo_shard_index *ix = &w->m->indexes[i];
		uint32_t name = image_str(&w->a, ix->name);
		uint32_t column = image_str(&w->a, ix->columns.n ? ix->columns.v[0] : NULL);

		if (!out)
			continue;
		memset(&out[i], 0, sizeof(out[i]));
		if (ix->expr)
			out[i].expr = *ix->expr;
		out[i].modulus = ix->modulus;
		out[i].name = name;
		out[i].type = ix->type;
		out[i].column = column;
	}
}

/* GSI number of <name> in database number <dbn>'s GSIs (numbered after earlier dbs). */
static uint32_t
gsi_no(const struct topo_model *m, size_t dbn, const char *name)
{
	uint32_t base = 0;

	for (size_t d = 0; d < dbn; d++)
		base += (uint32_t)m->dbs[d].ngsis;
	for (size_t g = 0; name && g < m->dbs[dbn].ngsis; g++)
		if (strcmp(m->dbs[dbn].gsis[g].name, name) == 0)
			return base + (uint32_t)g;
	return TOPO_IMG_NONE;
}

static void
put_rel(struct img_w *w, uint32_t *n, const struct img_rel *r)
{
	struct img_rel *rels = w_at(w, w->h.rels.off);

	if (rels)
		rels[*n] = *r;
	(*n)++;
}

static void
fill_table(struct img_w *w, size_t dbn, struct img_rel *r, const struct topo_table *t,
	   uint32_t *n)
{
	r->kind = IMG_REL_TABLE;
	r->group = group_no(w->m, t->shard_group);
	r->index = index_no(w->m, t->shard_index);
	r->list = image_list(&w->a, (uint32_t)t->nsis);
	for (size_t k = 0; k < t->nsis; k++)
		image_list_set(&w->a, r->list, (uint32_t)k, gsi_no(w->m, dbn, t->sis[k].name));
	put_rel(w, n, r);
}

static void
fill_ref(struct img_w *w, struct img_rel *r, const struct topo_ref_table *t, uint32_t *n)
{
	r->kind = IMG_REL_REFERENCE;
	r->list = image_list(&w->a, (uint32_t)t->shard_groups.n);
	for (size_t k = 0; k < t->shard_groups.n; k++)
		image_list_set(&w->a, r->list, (uint32_t)k, group_no(w->m, t->shard_groups.v[k]));
	put_rel(w, n, r);
}

/* Merge the schema's tables, reference tables and sequences into name order. */
static void
fill_schema_rels(struct img_w *w, size_t dbn, const struct topo_schema *s, uint32_t dbs,
		 uint32_t *n)
{
	size_t it = 0, ir = 0, iq = 0;
	uint32_t schema = image_str(&w->a, s->name);

	while (it < s->ntables || ir < s->nrefs || iq < s->nseqs) {
		const char *nt = it < s->ntables ? s->tables[it].name : NULL;
		const char *nr = ir < s->nrefs ? s->refs[ir].name : NULL;
		const char *nq = iq < s->nseqs ? s->seqs[iq].name : NULL;
		const char *least = nt;
		struct img_rel r = { dbs, schema, 0, 0, TOPO_IMG_NONE, TOPO_IMG_NONE, 0, 0 };

		if (!least || (nr && strcmp(nr, least) < 0))
			least = nr;
		if (!least || (nq && strcmp(nq, least) < 0))
			least = nq;
		r.name = image_str(&w->a, least);
		if (nt && strcmp(nt, least) == 0) {
			fill_table(w, dbn, &r, &s->tables[it++], n);
		} else if (nr && strcmp(nr, least) == 0) {
			fill_ref(w, &r, &s->refs[ir++], n);
		} else {
			r.kind = IMG_REL_SEQUENCE;
			r.group = group_no(w->m, s->seqs[iq++].shard_group);
			put_rel(w, n, &r);
		}
	}
}

static void
fill_gsis(struct img_w *w, size_t dbn, uint32_t dbs, uint32_t *n)
{
	struct img_gsi *out = w_at(w, w->h.gsis.off);
	const struct topo_database *d = &w->m->dbs[dbn];

	for (size_t g = 0; g < d->ngsis; g++, (*n)++) {
		const struct topo_gsi *gs = &d->gsis[g];
		struct img_gsi ig = {
			dbs, image_str(&w->a, gs->name), image_str(&w->a, gs->schema),
			image_str(&w->a, gs->table),
			image_str(&w->a, gs->owner_table), w_strlist(w, &gs->columns),
			w_strlist(w, &gs->owner_sk_columns), w_strlist(w, &gs->owner_pk_columns),
			(gs->unique ? IMG_GSI_UNIQUE : 0) | (gs->ignore_null ? IMG_GSI_IGNORE_NULL : 0) |
				(gs->enabled ? IMG_GSI_ENABLED : 0) |
				(gs->write_only ? IMG_GSI_WRITE_ONLY : 0),
		};

		if (out)
			out[*n] = ig;
	}
}

static void
fill_databases(struct img_w *w)
{
	struct img_schema *schemas = w_at(w, w->h.schemas.off);
	struct img_db *dbs = w_at(w, w->h.dbs.off);
	uint32_t nrel = 0, nsch = 0, ngsi = 0;

	for (size_t d = 0; d < w->m->ndbs; d++) {
		const struct topo_database *db = &w->m->dbs[d];
		struct img_db idb = { image_str(&w->a, db->name),
				      group_no(w->m, db->default_shard_group) };

		for (size_t s = 0; s < db->nschemas; s++, nsch++) {
			const struct topo_schema *sc = &db->schemas[s];
			struct img_schema is = { idb.name, image_str(&w->a, sc->name),
						 group_no(w->m, sc->default_shard_group) };

			if (schemas)
				schemas[nsch] = is;
			fill_schema_rels(w, d, sc, idb.name, &nrel);
		}
		fill_gsis(w, d, idb.name, &ngsi);
		if (dbs)
			dbs[d] = idb;
	}
}

/* One fill pass over everything but the header's layout. */
static void
fill(struct img_w *w)
{
	image_area_begin(&w->a, w->buf, w->h.lists.off, w->h.strings.off);
	fill_groups(w);
	fill_indexes(w);
	fill_databases(w);
}

static size_t
count_rels(const struct topo_model *m, size_t *nschemas, size_t *ngsis)
{
	size_t n = 0;

	*nschemas = *ngsis = 0;
	for (size_t d = 0; d < m->ndbs; d++) {
		*ngsis += m->dbs[d].ngsis;
		*nschemas += m->dbs[d].nschemas;
		for (size_t s = 0; s < m->dbs[d].nschemas; s++) {
			const struct topo_schema *sc = &m->dbs[d].schemas[s];

			n += sc->ntables + sc->nrefs + sc->nseqs;
		}
	}
	return n;
}

static uint32_t
place(size_t *cursor, size_t bytes)
{
	uint32_t off = (uint32_t)*cursor;

	*cursor = (*cursor + bytes + 7) & ~(size_t)7;
	return off;
}

/* Lay out every section (lists and strings sized by a measuring pass) from <json_len>. */
static size_t
layout(struct img_w *w, size_t json_len)
{
	const struct topo_model *m = w->m;
	size_t cur = 0, nranges = 0, nschemas, ngsis, nrels = count_rels(m, &nschemas, &ngsis);
	struct img_hdr *h = &w->h;

	for (size_t g = 0; g < m->ngroups; g++)
		nranges += m->groups[g].nranges;
	place(&cur, sizeof(*h));
	h->groups = (struct img_section){ place(&cur, m->ngroups * sizeof(struct img_group)),
					  (uint32_t)m->ngroups };
	h->ranges = (struct img_section){ place(&cur, nranges * sizeof(struct img_range)),
					  (uint32_t)nranges };
	h->starts = (struct img_section){ place(&cur, nranges * sizeof(uint64_t)),
					  (uint32_t)nranges };
	h->indexes = (struct img_section){ place(&cur, m->nindexes * sizeof(struct img_index)),
					   (uint32_t)m->nindexes };
	h->rels = (struct img_section){ place(&cur, nrels * sizeof(struct img_rel)),
					(uint32_t)nrels };
	h->schemas = (struct img_section){ place(&cur, nschemas * sizeof(struct img_schema)),
					   (uint32_t)nschemas };
	h->dbs = (struct img_section){ place(&cur, m->ndbs * sizeof(struct img_db)),
				       (uint32_t)m->ndbs };
	h->gsis = (struct img_section){ place(&cur, ngsis * sizeof(struct img_gsi)),
					(uint32_t)ngsis };
	h->lists = (struct img_section){ place(&cur, w->a.list_used * sizeof(uint32_t)),
					 w->a.list_used };
	h->strings = (struct img_section){ place(&cur, w->a.str_used), w->a.str_used };
	h->json = (struct img_section){ place(&cur, json_len + 1), (uint32_t)json_len };
	return cur;
}

/* Measure, then lay out; returns the total size, 0 when too big for 32-bit offsets. */
static size_t
plan(struct img_w *w, size_t json_len)
{
	size_t total;

	w->buf = NULL;
	memset(&w->h, 0, sizeof(w->h));
	fill(w);
	total = layout(w, json_len);
	return total > UINT32_MAX ? 0 : total;
}

/* topo_image_size: see topology_image.h. */
size_t
topo_image_size(const struct topo_model *m)
{
	struct img_w w = { .m = m };
	char *json = topo_to_json(m, false);
	size_t total;

	if (!json)
		return 0;
	total = plan(&w, strlen(json));
	free(json);
	return total;
}

/* topo_image_build: see topology_image.h. */
ssize_t
topo_image_build(const struct topo_model *m, uint64_t revision, void *buf, size_t cap)
{
	struct img_w w = { .m = m };
	char *json = topo_to_json(m, false);
	size_t json_len, total;

	if (!json)
		return -1;
	json_len = strlen(json);
	total = plan(&w, json_len);
	if (total == 0 || total > cap || ((uintptr_t)buf & 7) != 0) {
		free(json);
		return -1;
	}
	memset(buf, 0, total);
	w.buf = buf;
	fill(&w);
	memcpy(w.buf + w.h.json.off, json, json_len + 1);
	free(json);
	w.h.magic = TOPO_IMAGE_MAGIC;
	w.h.version = TOPO_IMAGE_VERSION;
	w.h.revision = revision;
	w.h.total_len = total;
	w.h.authoritative = group_no(m, m->authoritative_shard_group);
	w.h.default_group = group_no(m, m->default_shard_group);
	memcpy(buf, &w.h, sizeof(w.h));
	return (ssize_t)total;
}
