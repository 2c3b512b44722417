/*
 * image_read.c - read a topology image in place (layout in image_int.h): resolution of
 * tables and sequences (spec 2.3), groups, key ranges (binary search), indexes, GSIs.
 * No allocation, no writes: workers call these on shared memory.
 */
#include "neki/base.h"

#include "neki/topology_image.h"

#include <string.h>

#include "image_int.h"

static const struct img_hdr *
hdr(const void *img)
{
	return img;
}

static const void *
sec(const void *img, const struct img_section *s)
{
	return (const uint8_t *)img + s->off;
}

static const char *
str(const void *img, uint32_t off)
{
	return off ? (const char *)img + off : NULL;
}

static const struct img_group *
group(const void *img, uint32_t g)
{
	NK_ASSERT(g < hdr(img)->groups.n);
	return (const struct img_group *)sec(img, &hdr(img)->groups) + g;
}

static const struct img_index *
index_at(const void *img, uint32_t i)
{
	NK_ASSERT(i < hdr(img)->indexes.n);
	return (const struct img_index *)sec(img, &hdr(img)->indexes) + i;
}

static bool
section_ok(const struct img_section *s, size_t elem, size_t len)
{
	return (uint64_t)s->off + (uint64_t)s->n * elem <= len;
}

/* topo_image_is_valid: see topology_image.h. */
bool
topo_image_is_valid(const void *img, size_t len)
{
	const struct img_hdr *h = img;

	if (len < sizeof(*h) || ((uintptr_t)img & 7) != 0)
		return false;
	if (h->magic != TOPO_IMAGE_MAGIC || h->version != TOPO_IMAGE_VERSION ||
	    h->total_len > len)
		return false;
	len = h->total_len;
	return section_ok(&h->groups, sizeof(struct img_group), len) &&
	       section_ok(&h->ranges, sizeof(struct img_range), len) &&
	       section_ok(&h->starts, sizeof(uint64_t), len) &&
	       section_ok(&h->indexes, sizeof(struct img_index), len) &&
	       section_ok(&h->rels, sizeof(struct img_rel), len) &&
	       section_ok(&h->schemas, sizeof(struct img_schema), len) &&
	       section_ok(&h->dbs, sizeof(struct img_db), len) &&
	       section_ok(&h->gsis, sizeof(struct img_gsi), len) &&
	       section_ok(&h->lists, sizeof(uint32_t), len) &&
	       section_ok(&h->strings, 1, len) && section_ok(&h->json, 1, len - 1) &&
	       ((const char *)img)[h->json.off + h->json.n] == '\0';
}

uint64_t
topo_image_revision(const void *img)
{
	return hdr(img)->revision;
}

size_t
topo_image_len(const void *img)
{
	return (size_t)hdr(img)->total_len;
}

const char *
topo_image_json(const void *img, size_t *len)
{
	if (len)
		*len = hdr(img)->json.n;
	return sec(img, &hdr(img)->json);
}

uint32_t
topo_image_list_len(const void *img, uint32_t list)
{
	return ((const uint32_t *)sec(img, &hdr(img)->lists))[list];
}

uint32_t
topo_image_list_at(const void *img, uint32_t list, uint32_t i)
{
	NK_ASSERT(i < topo_image_list_len(img, list));
	return ((const uint32_t *)sec(img, &hdr(img)->lists))[list + 1 + i];
}

const char *
topo_image_list_str(const void *img, uint32_t list, uint32_t i)
{
	return str(img, topo_image_list_at(img, list, i));
}

/* Order of (db, schema, name) keys; NULL sorts nowhere (callers pass strings). */
static int
cmp3(const void *img, uint32_t kdb, uint32_t kschema, uint32_t kname, const char *db,
     const char *schema, const char *name)
{
	int c = strcmp(str(img, kdb), db);

	if (c == 0)
		c = strcmp(str(img, kschema), schema);
	if (c == 0 && name)
		c = strcmp(str(img, kname), name);
	return c;
}

static int
cmp_rel(const void *img, const struct img_rel *r, const char *db, const char *schema,
	const char *name)
{
	return cmp3(img, r->db, r->schema, r->name, db, schema, name);
}

/* First rel with (db, schema, name), or NONE. */
static uint32_t
rel_lower_bound(const void *img, const char *db, const char *schema, const char *name)
{
	const struct img_rel *rels = sec(img, &hdr(img)->rels);
	uint32_t lo = 0, hi = hdr(img)->rels.n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (cmp_rel(img, &rels[mid], db, schema, name) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < hdr(img)->rels.n && cmp_rel(img, &rels[lo], db, schema, name) == 0)
		return lo;
	return TOPO_IMG_NONE;
}

/* The rel of <kind> named <db>.<schema>.<name>, or NULL. */
static const struct img_rel *
find_rel(const void *img, const char *db, const char *schema, const char *name,
	 enum img_rel_kind kind)
{
	const struct img_rel *rels = sec(img, &hdr(img)->rels);
	uint32_t i = rel_lower_bound(img, db, schema, name);

	for (; i < hdr(img)->rels.n && cmp_rel(img, &rels[i], db, schema, name) == 0; i++)
		if (rels[i].kind == kind)
			return &rels[i];
	return NULL;
}

/* Effective default group of <db>.<schema>: schema, database, topology. */
static uint32_t
default_group(const void *img, const char *db, const char *schema)
{
	const struct img_schema *sch = sec(img, &hdr(img)->schemas);
	const struct img_db *dbs = sec(img, &hdr(img)->dbs);

	for (uint32_t i = 0; i < hdr(img)->schemas.n; i++)
		if (sch[i].default_group != TOPO_IMG_NONE &&
		    cmp3(img, sch[i].db, sch[i].schema, 0, db, schema, NULL) == 0)
			return sch[i].default_group;
	for (uint32_t i = 0; i < hdr(img)->dbs.n; i++)
		if (dbs[i].default_group != TOPO_IMG_NONE && strcmp(str(img, dbs[i].name), db) == 0)
			return dbs[i].default_group;
	return hdr(img)->default_group;
}

/* topo_image_has_database: see topology_image.h. */
bool
topo_image_has_database(const void *img, const char *db)
{
	const struct img_db *dbs = sec(img, &hdr(img)->dbs);

	for (uint32_t i = 0; i < hdr(img)->dbs.n; i++)
		if (strcmp(str(img, dbs[i].name), db) == 0)
			return true;
	return false;
}

/* topo_image_database_group: see topology_image.h. */
uint32_t
topo_image_database_group(const void *img, const char *db)
{
	const struct img_db *dbs = sec(img, &hdr(img)->dbs);

	for (uint32_t i = 0; i < hdr(img)->dbs.n; i++)
		if (dbs[i].default_group != TOPO_IMG_NONE && strcmp(str(img, dbs[i].name), db) == 0)
			return dbs[i].default_group;
	return hdr(img)->default_group;
}

/* topo_image_resolve_table: see topology_image.h. */
void
topo_image_resolve_table(const void *img, const char *db, const char *schema,
			 const char *table, struct topo_img_rel *out)
{
	const struct img_rel *t = find_rel(img, db, schema, table, IMG_REL_TABLE);
	const struct img_rel *r = t ? NULL : find_rel(img, db, schema, table, IMG_REL_REFERENCE);

	memset(out, 0, sizeof(*out));
	out->group = out->index = TOPO_IMG_NONE;
	out->listed = t || r;
	if (r) {
		out->kind = TOPO_REL_REFERENCE;
		out->list = r->list;
		return;
	}
	out->group = t && t->group != TOPO_IMG_NONE ? t->group : default_group(img, db, schema);
	if (out->group == TOPO_IMG_NONE)
		return;
	out->kind = TOPO_REL_TABLE;
	out->index = t && t->index != TOPO_IMG_NONE ? t->index : group(img, out->group)->index;
	out->list = t ? t->list : 0;
}

/* topo_image_resolve_sequence: see topology_image.h. */
uint32_t
topo_image_resolve_sequence(const void *img, const char *db, const char *schema,
			    const char *seq, const struct topo_seq_owner *owners, size_t nowners)
{
	const struct img_rel *q = find_rel(img, db, schema, seq, IMG_REL_SEQUENCE);
	uint32_t g = TOPO_IMG_NONE;

	if (q && q->group != TOPO_IMG_NONE)
		return q->group;
	for (size_t i = 0; i < nowners; i++) {
		struct topo_img_rel r;

		topo_image_resolve_table(img, db, owners[i].schema, owners[i].table, &r);
		if (r.kind != TOPO_REL_TABLE || r.index != TOPO_IMG_NONE ||
		    (g != TOPO_IMG_NONE && g != r.group)) {
			g = TOPO_IMG_NONE;
			break;
		}
		g = r.group;
	}
	if (g != TOPO_IMG_NONE && topo_image_group_shard_count(img, g) == 1)
		return g;
	return hdr(img)->authoritative;
}

uint32_t
topo_image_group_count(const void *img)
{
	return hdr(img)->groups.n;
}

uint32_t
topo_image_find_group(const void *img, const char *uid)
{
	for (uint32_t g = 0; g < hdr(img)->groups.n; g++)
		if (strcmp(str(img, group(img, g)->uid), uid) == 0)
			return g;
	return TOPO_IMG_NONE;
}

uint32_t
topo_image_authoritative(const void *img)
{
	return hdr(img)->authoritative;
}

const char *
topo_image_group_uid(const void *img, uint32_t g)
{
	return str(img, group(img, g)->uid);
}

uint32_t
topo_image_group_index(const void *img, uint32_t g)
{
	return group(img, g)->index;
}

uint32_t
topo_image_group_range_count(const void *img, uint32_t g)
{
	return group(img, g)->nranges;
}

uint32_t
topo_image_group_shard_count(const void *img, uint32_t g)
{
	return topo_image_list_len(img, group(img, g)->shards);
}

const char *
topo_image_group_shard(const void *img, uint32_t g, uint32_t k)
{
	return topo_image_list_str(img, group(img, g)->shards, k);
}

/* topo_image_find_range: see topology_image.h. Binary search over the group's starts. */
uint32_t
topo_image_find_range(const void *img, uint32_t g, uint64_t value)
{
	const struct img_group *ig = group(img, g);
	const uint64_t *starts = sec(img, &hdr(img)->starts);

	return (uint32_t)ks_range_find(starts + ig->first_range, ig->nranges, value);
}

static const struct img_range *
range_at(const void *img, uint32_t g, uint32_t r)
{
	const struct img_group *ig = group(img, g);

	NK_ASSERT(r < ig->nranges);
	return (const struct img_range *)sec(img, &hdr(img)->ranges) + ig->first_range + r;
}

const char *
topo_image_range_shard(const void *img, uint32_t g, uint32_t r)
{
	return str(img, range_at(img, g, r)->shard_uid);
}

uint64_t
topo_image_range_start(const void *img, uint32_t g, uint32_t r)
{
	return range_at(img, g, r)->start;
}

bool
topo_image_range_end(const void *img, uint32_t g, uint32_t r, uint64_t *end)
{
	const struct img_range *ir = range_at(img, g, r);

	*end = ir->end;
	return ir->has_end != 0;
}

uint32_t
topo_image_index_count(const void *img)
{
	return hdr(img)->indexes.n;
}

/* topo_image_find_index: binary search; indexes are sorted by name. */
uint32_t
topo_image_find_index(const void *img, const char *name)
{
	uint32_t lo = 0, hi = hdr(img)->indexes.n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		int c = strcmp(str(img, index_at(img, mid)->name), name);

		if (c == 0)
			return mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return TOPO_IMG_NONE;
}

const char *
topo_image_index_name(const void *img, uint32_t i)
{
	return str(img, index_at(img, i)->name);
}

enum ks_index_type
topo_image_index_type(const void *img, uint32_t i)
{
	return (enum ks_index_type)index_at(img, i)->type;
}

int64_t
topo_image_index_modulus(const void *img, uint32_t i)
{
	return index_at(img, i)->modulus;
}

const char *
topo_image_index_column(const void *img, uint32_t i)
{
	return str(img, index_at(img, i)->column);
}

const struct ks_expr *
topo_image_index_expr(const void *img, uint32_t i)
{
	const struct img_index *ix = index_at(img, i);

	return ix->expr.nnodes ? &ix->expr : NULL;
}

/* topo_image_route: see topology_image.h. */
bool
topo_image_route(const void *img, uint32_t g, uint32_t i, const struct ks_value *key,
		 uint32_t *range, struct nk_error *err)
{
	uint64_t v;

	if (!ks_routing_value(topo_image_index_type(img, i), topo_image_index_modulus(img, i), key,
			      &v, err))
		return false;
	*range = topo_image_find_range(img, g, v);
	return true;
}

uint32_t
topo_image_gsi_count(const void *img)
{
	return hdr(img)->gsis.n;
}

void
topo_image_gsi(const void *img, uint32_t n, struct topo_img_gsi *out)
{
	const struct img_gsi *g;

	NK_ASSERT(n < hdr(img)->gsis.n);
	g = (const struct img_gsi *)sec(img, &hdr(img)->gsis) + n;
	out->db = str(img, g->db);
	out->name = str(img, g->name);
	out->schema = str(img, g->schema);
	out->table = str(img, g->table);
	out->owner_table = str(img, g->owner_table);
	out->columns = g->columns;
	out->owner_sk_columns = g->owner_sk;
	out->owner_pk_columns = g->owner_pk;
	out->unique = (g->flags & IMG_GSI_UNIQUE) != 0;
	out->ignore_null = (g->flags & IMG_GSI_IGNORE_NULL) != 0;
	out->enabled = (g->flags & IMG_GSI_ENABLED) != 0;
	out->write_only = (g->flags & IMG_GSI_WRITE_ONLY) != 0;
}
