/*
 * image.c - build the pointer-free image of the catalogs (layout in image_int.h).
 *
 * The fill pass runs twice: once measuring (no buffer: only the list words and string bytes
 * are counted), once writing. Databases are written in name order; within one, tables keep
 * the model's (schema, name) order and types its oid order, so readers binary-search.
 * Entry points: cat_image_size(), cat_image_build(). Readers are in image_read.c.
 */
#include "neki/base.h"

#include "neki/catalog_image.h"

#include <string.h>

#include "neki/image_area.h"

#include "image_int.h"

#define CIMG_MAX_DBS 1024

struct cimg_w {
	uint8_t *buf;				/* NULL while measuring */
	struct cimg_hdr h;			/* the layout being filled */
	struct image_area a;			/* strings and lists */
	const struct catalog *const *cats;	/* borrowed, in name order */
	size_t n;
};

static void *
w_at(struct cimg_w *w, uint32_t off)
{
	return w->buf ? w->buf + off : NULL;
}

static void
fill_column(struct cimg_w *w, const struct cat_column *c, struct cimg_col *out)
{
	struct cimg_col ic = {
		.name = image_str(&w->a, c->name),
		.type_oid = c->type_oid,
		.typmod = c->typmod,
		.attnum = c->attnum,
		.flags = (c->not_null ? CIMG_COL_NOT_NULL : 0) |
			 (c->has_default ? CIMG_COL_HAS_DEFAULT : 0) |
			 (c->generated ? CIMG_COL_GENERATED : 0),
		.identity = c->identity,
		.seq_schema = image_str(&w->a, c->seq.schema),
		.seq_name = image_str(&w->a, c->seq.name),
	};

	if (out)
		*out = ic;
}

static void
fill_key(struct cimg_w *w, const struct cat_key *k, struct cimg_key *out)
{
	struct cimg_key ik = { image_str(&w->a, k->name), k->primary,
			       image_list(&w->a, (uint32_t)k->ncols), 0 };

	for (size_t i = 0; i < k->ncols; i++)
		image_list_set(&w->a, ik.cols, (uint32_t)i, k->cols[i]);
	if (out)
		*out = ik;
}

/* The list of strings schema, name, ... of <c>'s user-defined aggregates. */
static uint32_t
fill_aggs(struct cimg_w *w, const struct catalog *c)
{
	uint32_t h = image_list(&w->a, (uint32_t)c->naggs * 2);

	for (size_t i = 0; i < c->naggs; i++) {
		uint32_t schema = image_str(&w->a, c->aggs[i].schema);
		uint32_t name = image_str(&w->a, c->aggs[i].name);

		image_list_set(&w->a, h, (uint32_t)(2 * i), schema);
		image_list_set(&w->a, h, (uint32_t)(2 * i + 1), name);
	}
	return h;
}

/* The list of triples shard, shard OID, authoritative OID of <c>'s OID pairs. */
static uint32_t
fill_oidmap(struct cimg_w *w, const struct catalog *c)
{
	uint32_t h = image_list(&w->a, (uint32_t)c->noidmap * 3);

	for (size_t i = 0; i < c->noidmap; i++) {
		uint32_t shard = image_str(&w->a, c->oidmap[i].shard);

		image_list_set(&w->a, h, (uint32_t)(3 * i), shard);
		image_list_set(&w->a, h, (uint32_t)(3 * i + 1), c->oidmap[i].shard_oid);
		image_list_set(&w->a, h, (uint32_t)(3 * i + 2), c->oidmap[i].auth_oid);
	}
	return h;
}

static uint32_t
fill_children(struct cimg_w *w, const struct cat_table *t)
{
	uint32_t h = image_list(&w->a, (uint32_t)t->nchildren * 2);

	for (size_t i = 0; i < t->nchildren; i++) {
		uint32_t schema = image_str(&w->a, t->children[i].schema);
		uint32_t name = image_str(&w->a, t->children[i].name);

		image_list_set(&w->a, h, (uint32_t)(2 * i), schema);
		image_list_set(&w->a, h, (uint32_t)(2 * i + 1), name);
	}
	return h;
}

/* Write table <t> as table number <tn>; its columns from <*col>, keys from <*key>. */
static void
fill_table(struct cimg_w *w, const struct cat_table *t, uint32_t tn, uint32_t *col,
	   uint32_t *key)
{
	struct cimg_table *tables = w_at(w, w->h.tables.off);
	struct cimg_col *cols = w_at(w, w->h.cols.off);
	struct cimg_key *keys = w_at(w, w->h.keys.off);
	struct cimg_table it = {
		t->seq.start, t->seq.increment, t->seq.min, t->seq.max, t->seq.cache,
		t->seq.type_oid, t->seq.cycle, image_str(&w->a, t->schema),
		image_str(&w->a, t->name), t->oid,
		t->kind, t->is_partition, t->rewrites_insert, *col, (uint32_t)t->ncols, *key,
		(uint32_t)t->nkeys,
		fill_children(w, t),
	};

	for (size_t i = 0; i < t->ncols; i++, (*col)++)
		fill_column(w, &t->cols[i], cols ? &cols[*col] : NULL);
	for (size_t i = 0; i < t->nkeys; i++, (*key)++)
		fill_key(w, &t->keys[i], keys ? &keys[*key] : NULL);
	if (tables)
		tables[tn] = it;
}

static void
fill_type(struct cimg_w *w, const struct cat_type *t, struct cimg_type *out)
{
	struct cimg_type it = {
		t->oid, image_str(&w->a, t->schema), image_str(&w->a, t->name), t->len, t->byval,
		(uint8_t)t->category, t->typtype, t->base_oid, t->elem_oid,
		image_list(&w->a, (uint32_t)t->nlabels),
	};

	for (size_t i = 0; i < t->nlabels; i++)
		image_list_set(&w->a, it.labels, (uint32_t)i, image_str(&w->a, t->labels[i]));
	if (out)
		*out = it;
}

/* One pass over every database (measuring when w->buf is NULL). */
static void
fill(struct cimg_w *w)
{
	struct cimg_db *dbs = w_at(w, w->h.dbs.off);
	struct cimg_type *types = w_at(w, w->h.types.off);
	uint32_t tn = 0, col = 0, key = 0, ty = 0;

	image_area_begin(&w->a, w->buf, w->h.lists.off, w->h.strings.off);
	for (size_t d = 0; d < w->n; d++) {
		const struct catalog *c = w->cats[d];
		struct cimg_db idb = { image_str(&w->a, c->dbname), image_str(&w->a, c->collate),
				       image_str(&w->a, c->ctype), tn, (uint32_t)c->ntables, ty,
				       (uint32_t)c->ntypes, fill_aggs(w, c), fill_oidmap(w, c), 0 };

		for (size_t i = 0; i < c->ntables; i++, tn++)
			fill_table(w, &c->tables[i], tn, &col, &key);
		for (size_t i = 0; i < c->ntypes; i++, ty++)
			fill_type(w, &c->types[i], types ? &types[ty] : NULL);
		if (dbs)
			dbs[d] = idb;
	}
}

static uint32_t
align8(uint64_t n)
{
	return (uint32_t)((n + 7) & ~UINT64_C(7));
}

/* Put section <sec> of <count> elements of <elem> bytes at *<off>; advance *<off>. */
static void
place(uint64_t *off, struct cimg_section *sec, size_t count, size_t elem)
{
	sec->off = (uint32_t)*off;
	sec->n = (uint32_t)count;
	*off = align8(*off + (uint64_t)count * elem);
}

/* Lay the sections out after a measuring pass; returns the total size. */
static uint64_t
layout(struct cimg_w *w)
{
	uint64_t off = align8(sizeof(struct cimg_hdr));
	size_t nt = 0, nc = 0, nk = 0, nty = 0;

	for (size_t d = 0; d < w->n; d++) {
		nt += w->cats[d]->ntables;
		nty += w->cats[d]->ntypes;
		for (size_t i = 0; i < w->cats[d]->ntables; i++) {
			nc += w->cats[d]->tables[i].ncols;
			nk += w->cats[d]->tables[i].nkeys;
		}
	}
	place(&off, &w->h.dbs, w->n, sizeof(struct cimg_db));
	place(&off, &w->h.tables, nt, sizeof(struct cimg_table));
	place(&off, &w->h.cols, nc, sizeof(struct cimg_col));
	place(&off, &w->h.keys, nk, sizeof(struct cimg_key));
	place(&off, &w->h.types, nty, sizeof(struct cimg_type));
	place(&off, &w->h.lists, w->a.list_used, sizeof(uint32_t));
	place(&off, &w->h.strings, w->a.str_used, 1);
	return off;
}

/* Put <cats> in name order into <sorted> (insertion sort; few databases). */
static void
sort_dbs(const struct catalog *const *cats, size_t n, const struct catalog **sorted)
{
	for (size_t i = 0; i < n; i++) {
		size_t j = i;

		for (; j > 0 && strcmp(sorted[j - 1]->dbname, cats[i]->dbname) > 0; j--)
			sorted[j] = sorted[j - 1];
		sorted[j] = cats[i];
	}
}

/* Measure: fills w->h's layout; returns the image size. */
static uint64_t
measure(struct cimg_w *w)
{
	memset(&w->h, 0, sizeof(w->h));
	w->buf = NULL;
	fill(w);
	return layout(w);
}

size_t
cat_image_size(const struct catalog *const *cats, size_t n)
{
	const struct catalog *sorted[CIMG_MAX_DBS];
	struct cimg_w w = { .cats = sorted, .n = n };

	NK_ASSERT(n <= CIMG_MAX_DBS);
	sort_dbs(cats, n, sorted);
	return (size_t)measure(&w);
}

/* cat_image_build: see catalog_image.h. */
ssize_t
cat_image_build(const struct catalog *const *cats, size_t n, uint64_t version, void *buf,
		size_t cap)
{
	const struct catalog *sorted[CIMG_MAX_DBS];
	struct cimg_w w = { .cats = sorted, .n = n };
	uint64_t total;

	NK_ASSERT(n <= CIMG_MAX_DBS && ((uintptr_t)buf & 7) == 0);
	sort_dbs(cats, n, sorted);
	total = measure(&w);
	if (total > cap || total > UINT32_MAX)
		return -1;
	memset(buf, 0, (size_t)total);
	w.buf = buf;
	fill(&w);
	w.h.magic = CAT_IMAGE_MAGIC;
	w.h.version = CAT_IMAGE_VERSION;
	w.h.cat_version = version;
	w.h.total_len = total;
	memcpy(buf, &w.h, sizeof(w.h));
	return (ssize_t)total;
}
