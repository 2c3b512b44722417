/*
 * image_read.c - read a catalog image in place (layout in image_int.h): databases by name,
 * tables by (schema, name) and search_path, columns, keys, children, types by oid and the
 * routing type of a column type. No allocation, no writes: workers call these on shared
 * memory.
 */
#include "neki/base.h"

#include "neki/catalog_image.h"

#include <string.h>

#include "image_int.h"

static const struct cimg_hdr *
hdr(const void *img)
{
	return img;
}

static const void *
sec(const void *img, const struct cimg_section *s)
{
	return (const uint8_t *)img + s->off;
}

static const char *
str(const void *img, uint32_t off)
{
	return off ? (const char *)img + off : NULL;
}

static const struct cimg_db *
db_at(const void *img, uint32_t d)
{
	NK_ASSERT(d < hdr(img)->dbs.n);
	return (const struct cimg_db *)sec(img, &hdr(img)->dbs) + d;
}

static const struct cimg_table *
table_at(const void *img, uint32_t t)
{
	NK_ASSERT(t < hdr(img)->tables.n);
	return (const struct cimg_table *)sec(img, &hdr(img)->tables) + t;
}

static const struct cimg_type *
type_at(const void *img, uint32_t ty)
{
	NK_ASSERT(ty < hdr(img)->types.n);
	return (const struct cimg_type *)sec(img, &hdr(img)->types) + ty;
}

static const uint32_t *
list(const void *img, uint32_t h)
{
	NK_ASSERT(h < hdr(img)->lists.n);
	return (const uint32_t *)sec(img, &hdr(img)->lists) + h;
}

static bool
section_ok(const struct cimg_section *s, size_t elem, size_t len)
{
	return (uint64_t)s->off + (uint64_t)s->n * elem <= len;
}

/* cat_image_is_valid: see catalog_image.h. */
bool
cat_image_is_valid(const void *img, size_t len)
{
	const struct cimg_hdr *h = img;

	if (len < sizeof(*h) || ((uintptr_t)img & 7) != 0)
		return false;
	if (h->magic != CAT_IMAGE_MAGIC || h->version != CAT_IMAGE_VERSION ||
	    h->total_len > len)
		return false;
	len = h->total_len;
	return section_ok(&h->dbs, sizeof(struct cimg_db), len) &&
	       section_ok(&h->tables, sizeof(struct cimg_table), len) &&
	       section_ok(&h->cols, sizeof(struct cimg_col), len) &&
	       section_ok(&h->keys, sizeof(struct cimg_key), len) &&
	       section_ok(&h->types, sizeof(struct cimg_type), len) &&
	       section_ok(&h->lists, sizeof(uint32_t), len) &&
	       section_ok(&h->strings, 1, len) && h->strings.n > 0 &&
	       ((const char *)img)[h->strings.off + h->strings.n - 1] == '\0';
}

uint64_t
cat_image_version(const void *img)
{
	return hdr(img)->cat_version;
}

size_t
cat_image_len(const void *img)
{
	return (size_t)hdr(img)->total_len;
}

uint32_t
cat_image_db_count(const void *img)
{
	return hdr(img)->dbs.n;
}

/* cat_image_find_db: binary search over the databases' names. */
uint32_t
cat_image_find_db(const void *img, const char *name)
{
	uint32_t lo = 0, hi = hdr(img)->dbs.n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		int r = strcmp(name, str(img, db_at(img, mid)->name));

		if (r == 0)
			return mid;
		if (r < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return CAT_IMG_NONE;
}

void
cat_image_db(const void *img, uint32_t d, struct cat_img_db *out)
{
	const struct cimg_db *db = db_at(img, d);

	out->name = str(img, db->name);
	out->collate = str(img, db->collate);
	out->ctype = str(img, db->ctype);
	out->ntables = db->ntables;
}

/* cat_image_is_aggregate: see catalog_image.h. */
bool
cat_image_is_aggregate(const void *img, uint32_t d, const char *name)
{
	const uint32_t *l = list(img, db_at(img, d)->aggs);

	for (uint32_t i = 0; i + 1 < l[0]; i += 2) {
		const char *s = str(img, l[2 + i]);

		if (s && strcmp(s, name) == 0)
			return true;
	}
	return false;
}

/*
 * Look <oid> up in database <d>'s OID pairs of <shard>: as a shard OID (<to_auth>) or as an
 * authoritative OID; the other OID of the pair, or <oid>. With <oid> 0, any pair of <shard>
 * answers 1.
 */
static uint32_t
oidmap_find(const void *img, uint32_t d, const char *shard, uint32_t oid, bool to_auth)
{
	const uint32_t *l = list(img, db_at(img, d)->oidmap);

	for (uint32_t i = 0; i + 2 < l[0]; i += 3) {
		const char *s = str(img, l[1 + i]);
		uint32_t from = l[1 + i + (to_auth ? 1 : 2)];

		if ((oid == 0 || from == oid) && s != NULL && strcmp(s, shard) == 0)
			return oid == 0 ? 1 : l[1 + i + (to_auth ? 2 : 1)];
	}
	return oid;
}

/* cat_image_auth_oid: see catalog_image.h. */
uint32_t
cat_image_auth_oid(const void *img, uint32_t d, const char *shard, uint32_t oid)
{
	return oid == 0 ? 0 : oidmap_find(img, d, shard, oid, true);
}

uint32_t
cat_image_shard_oid(const void *img, uint32_t d, const char *shard, uint32_t oid)
{
	return oid == 0 ? 0 : oidmap_find(img, d, shard, oid, false);
}

bool
cat_image_shard_has_oids(const void *img, uint32_t d, const char *shard)
{
	return oidmap_find(img, d, shard, 0, true) != 0;
}

/* cat_image_find_table: binary search within database <d>'s tables. */
uint32_t
cat_image_db_table(const void *img, uint32_t d, uint32_t i)
{
	return db_at(img, d)->first_table + i;
}

uint32_t
cat_image_find_table(const void *img, uint32_t d, const char *schema, const char *name)
{
	const struct cimg_db *db = db_at(img, d);
	uint32_t lo = db->first_table, hi = db->first_table + db->ntables;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		const struct cimg_table *t = table_at(img, mid);
		int r = strcmp(schema, str(img, t->schema));

		if (r == 0)
			r = strcmp(name, str(img, t->name));
		if (r == 0)
			return mid;
		if (r < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return CAT_IMG_NONE;
}

uint32_t
cat_image_lookup_table(const void *img, uint32_t d, const char *schema, const char *name,
		       const char *const *path, size_t n)
{
	if (schema)
		return cat_image_find_table(img, d, schema, name);
	for (size_t i = 0; i < n; i++) {
		uint32_t t;

		if (!path[i] || strcmp(path[i], "$user") == 0)
			continue;
		t = cat_image_find_table(img, d, path[i], name);
		if (t != CAT_IMG_NONE)
			return t;
	}
	return CAT_IMG_NONE;
}

void
cat_image_table(const void *img, uint32_t t, struct cat_img_table *out)
{
	const struct cimg_table *it = table_at(img, t);

	out->schema = str(img, it->schema);
	out->name = str(img, it->name);
	out->oid = it->oid;
	out->kind = (enum cat_relkind)it->kind;
	out->is_partition = it->is_partition != 0;
	out->rewrites_insert = it->rewrites_insert != 0;
	out->ncols = it->ncols;
	out->nkeys = it->nkeys;
	out->nchildren = list(img, it->children)[0] / 2;
	out->seq = (struct cat_seq){ it->seq_type_oid, it->seq_start, it->seq_increment,
				     it->seq_min, it->seq_max, it->seq_cache, it->seq_cycle != 0 };
}

static const struct cimg_col *
col_at(const void *img, uint32_t t, uint32_t c)
{
	const struct cimg_table *it = table_at(img, t);

	NK_ASSERT(c < it->ncols);
	return (const struct cimg_col *)sec(img, &hdr(img)->cols) + it->first_col + c;
}

uint32_t
cat_image_find_column(const void *img, uint32_t t, const char *name)
{
	uint32_t n = table_at(img, t)->ncols;

	for (uint32_t c = 0; c < n; c++)
		if (strcmp(str(img, col_at(img, t, c)->name), name) == 0)
			return c;
	return CAT_IMG_NONE;
}

void
cat_image_column(const void *img, uint32_t t, uint32_t c, struct cat_column *out)
{
	const struct cimg_col *ic = col_at(img, t, c);

	out->name = str(img, ic->name);
	out->attnum = (int16_t)ic->attnum;
	out->type_oid = ic->type_oid;
	out->typmod = ic->typmod;
	out->not_null = (ic->flags & CIMG_COL_NOT_NULL) != 0;
	out->has_default = (ic->flags & CIMG_COL_HAS_DEFAULT) != 0;
	out->generated = (ic->flags & CIMG_COL_GENERATED) != 0;
	out->identity = (enum cat_identity)ic->identity;
	out->seq.schema = str(img, ic->seq_schema);
	out->seq.name = str(img, ic->seq_name);
}

static const struct cimg_key *
key_at(const void *img, uint32_t t, uint32_t k)
{
	const struct cimg_table *it = table_at(img, t);

	NK_ASSERT(k < it->nkeys);
	return (const struct cimg_key *)sec(img, &hdr(img)->keys) + it->first_key + k;
}

void
cat_image_key(const void *img, uint32_t t, uint32_t k, struct cat_img_key *out)
{
	const struct cimg_key *ik = key_at(img, t, k);

	out->name = str(img, ik->name);
	out->primary = ik->primary != 0;
	out->ncols = list(img, ik->cols)[0];
}

uint32_t
cat_image_key_col(const void *img, uint32_t t, uint32_t k, uint32_t i)
{
	const uint32_t *l = list(img, key_at(img, t, k)->cols);

	NK_ASSERT(i < l[0]);
	return l[1 + i];
}

void
cat_image_child(const void *img, uint32_t t, uint32_t i, struct cat_relref *out)
{
	const uint32_t *l = list(img, table_at(img, t)->children);

	NK_ASSERT(2 * i + 1 < l[0]);
	out->schema = str(img, l[1 + 2 * i]);
	out->name = str(img, l[2 + 2 * i]);
}

/* cat_image_find_type: binary search within database <d>'s types (sorted by oid). */
uint32_t
cat_image_find_type(const void *img, uint32_t d, uint32_t oid)
{
	const struct cimg_db *db = db_at(img, d);
	uint32_t lo = db->first_type, hi = db->first_type + db->ntypes;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		uint32_t m = type_at(img, mid)->oid;

		if (m == oid)
			return mid;
		if (oid < m)
			hi = mid;
		else
			lo = mid + 1;
	}
	return CAT_IMG_NONE;
}

void
cat_image_type(const void *img, uint32_t ty, struct cat_img_type *out)
{
	const struct cimg_type *it = type_at(img, ty);

	out->oid = it->oid;
	out->schema = str(img, it->schema);
	out->name = str(img, it->name);
	out->len = (int16_t)it->len;
	out->byval = it->byval != 0;
	out->category = (char)it->category;
	out->typtype = (enum cat_typtype)it->typtype;
	out->base_oid = it->base_oid;
	out->elem_oid = it->elem_oid;
	out->nlabels = list(img, it->labels)[0];
}

const char *
cat_image_type_label(const void *img, uint32_t ty, uint32_t i)
{
	const uint32_t *l = list(img, type_at(img, ty)->labels);

	NK_ASSERT(i < l[0]);
	return str(img, l[1 + i]);
}

/* cat_image_ks_type: as cat_ks_type(); the depth bound guards a corrupt image. */
bool
cat_image_ks_type(const void *img, uint32_t d, uint32_t oid, enum ks_type *out)
{
	for (int depth = 0; depth < 16; depth++) {
		uint32_t ty;
		const struct cimg_type *it;

		if (ks_type_from_oid(oid, out))
			return true;
		ty = cat_image_find_type(img, d, oid);
		if (ty == CAT_IMG_NONE)
			return false;
		it = type_at(img, ty);
		if (it->typtype == CAT_TYPTYPE_ENUM) {
			*out = KS_TYPE_ENUM;
			return true;
		}
		if (it->typtype != CAT_TYPTYPE_DOMAIN)
			return false;
		oid = it->base_oid;
	}
	return false;
}

uint32_t
cat_image_column_type(const void *img, uint32_t d, const char *schema, const char *table,
		      const char *column)
{
	uint32_t t = cat_image_find_table(img, d, schema, table), c;

	if (t == CAT_IMG_NONE)
		return 0;
	c = cat_image_find_column(img, t, column);
	return c == CAT_IMG_NONE ? 0 : col_at(img, t, c)->type_oid;
}

/* cat_image_base_type: the depth bound guards a corrupt image. */
uint32_t
cat_image_base_type(const void *img, uint32_t d, uint32_t oid)
{
	for (int depth = 0; depth < 16; depth++) {
		uint32_t ty = cat_image_find_type(img, d, oid);

		if (ty == CAT_IMG_NONE || type_at(img, ty)->typtype != CAT_TYPTYPE_DOMAIN)
			return oid;
		oid = type_at(img, ty)->base_oid;
	}
	return oid;
}

const char *
cat_image_column_name(const void *img, uint32_t d, const char *schema, const char *table,
		      uint32_t n)
{
	uint32_t t = cat_image_find_table(img, d, schema, table);

	if (t == CAT_IMG_NONE || n == 0 || n > table_at(img, t)->ncols)
		return NULL;
	return str(img, col_at(img, t, n - 1)->name);
}

char
cat_image_relkind(const void *img, uint32_t d, const char *schema, const char *table)
{
	static const char letters[] = "rpvmSif";	/* enum cat_relkind order */
	uint32_t t = cat_image_find_table(img, d, schema, table);
	uint32_t k;

	if (t == CAT_IMG_NONE)
		return 0;
	k = table_at(img, t)->kind;
	return k < sizeof(letters) - 1 ? letters[k] : 0;
}
