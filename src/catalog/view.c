/*
 * view.c - a worker's view of the catalog: the published image pinned in shared memory
 * (shm_cat_pin) with one database selected, and the router's struct plan_catalog callbacks
 * over it. A session acquires a view at a statement boundary, plans with it, and releases
 * it; a new catalog version is seen at the next acquire. Entry points: cat_view_acquire(),
 * cat_view_release() and the callbacks cat_view_column_type(), cat_view_column_name(),
 * cat_view_relkind(), cat_view_column(), cat_view_seq_cache(), cat_view_inh_children(),
 * cat_view_view_base(), cat_view_table_at(), cat_view_type_name(), cat_view_is_aggregate(),
 * cat_view_pk_column(), cat_view_rewrites_insert(),
 * and the authoritative OIDs cat_view_type_oid(), cat_view_shard_has_oids().
 */
#include "neki/base.h"

#include "neki/catalog_image.h"

#include <string.h>

#include "neki/shm.h"

void
cat_view_acquire(struct cat_view *v, const char *dbname)
{
	memset(v, 0, sizeof(*v));
	v->db = CAT_IMG_NONE;
	if (!shm_cat_pin(&v->ref))
		return;
	v->pinned = true;
	if (!cat_image_is_valid(v->ref.data, v->ref.len))
		return;
	v->img = v->ref.data;
	v->version = cat_image_version(v->img);
	v->db = cat_image_find_db(v->img, dbname);
}

void
cat_view_release(struct cat_view *v)
{
	if (v->pinned)
		shm_cat_unpin(&v->ref);
	memset(v, 0, sizeof(*v));
	v->db = CAT_IMG_NONE;
}

static bool
view_ok(const struct cat_view *v)
{
	return v->img != NULL && v->db != CAT_IMG_NONE;
}

uint32_t
cat_view_column_type(void *arg, const char *schema, const char *table, const char *column)
{
	const struct cat_view *v = arg;
	uint32_t oid;

	if (!view_ok(v))
		return 0;
	oid = cat_image_column_type(v->img, v->db, schema, table, column);
	return oid ? cat_image_base_type(v->img, v->db, oid) : 0;
}

const char *
cat_view_column_name(void *arg, const char *schema, const char *table, uint32_t n)
{
	const struct cat_view *v = arg;

	return view_ok(v) ? cat_image_column_name(v->img, v->db, schema, table, n) : NULL;
}

char
cat_view_relkind(void *arg, const char *schema, const char *table)
{
	const struct cat_view *v = arg;

	return view_ok(v) ? cat_image_relkind(v->img, v->db, schema, table) : 0;
}

/* Table number of <schema>.<table> in the view's database, or CAT_IMG_NONE. */
static uint32_t
view_table(const struct cat_view *v, const char *schema, const char *table,
	   struct cat_img_table *out)
{
	uint32_t t;

	if (!view_ok(v))
		return CAT_IMG_NONE;
	t = cat_image_find_table(v->img, v->db, schema, table);
	if (t != CAT_IMG_NONE)
		cat_image_table(v->img, t, out);
	return t;
}

bool
cat_view_column(void *arg, const char *schema, const char *table, uint32_t n,
		struct cat_column *out)
{
	const struct cat_view *v = arg;
	struct cat_img_table it;
	uint32_t t = view_table(v, schema, table, &it);

	if (t == CAT_IMG_NONE || n == 0 || n > it.ncols)
		return false;
	cat_image_column(v->img, t, n - 1, out);
	return true;
}

bool
cat_view_rewrites_insert(void *arg, const char *schema, const char *table)
{
	struct cat_img_table it;

	return view_table(arg, schema, table, &it) == CAT_IMG_NONE || it.rewrites_insert;
}

int
cat_view_pk_column(void *arg, const char *schema, const char *table, uint32_t i,
		   const char **col)
{
	const struct cat_view *v = arg;
	struct cat_img_table it;
	struct cat_img_key k;
	struct cat_column c;
	uint32_t t = view_table(v, schema, table, &it);

	if (t == CAT_IMG_NONE)
		return -1;
	if (it.nkeys == 0)
		return 0;
	cat_image_key(v->img, t, 0, &k);
	if (!k.primary || i >= k.ncols)
		return 0;
	cat_image_column(v->img, t, cat_image_key_col(v->img, t, 0, i), &c);
	*col = c.name;
	return 1;
}

int64_t
cat_view_seq_cache(void *arg, const char *schema, const char *name)
{
	struct cat_img_table it;

	if (view_table(arg, schema, name, &it) == CAT_IMG_NONE || it.kind != CAT_REL_SEQUENCE)
		return 0;
	return it.seq.cache;
}

uint32_t
cat_view_inh_children(void *arg, const char *schema, const char *table)
{
	const struct cat_view *v = arg;
	struct cat_img_table it, child;
	struct cat_relref ref;
	uint32_t t = view_table(v, schema, table, &it), n = 0;

	if (t == CAT_IMG_NONE || it.kind != CAT_REL_TABLE)
		return 0;
	for (uint32_t i = 0; i < it.nchildren; i++) {
		cat_image_child(v->img, t, i, &ref);
		if (view_table(v, ref.schema, ref.name, &child) != CAT_IMG_NONE &&
		    !child.is_partition)
			n++;
	}
	return n;
}

bool
cat_view_view_base(void *arg, const char *schema, const char *view, uint32_t i,
		   const char **base_schema, const char **base_name)
{
	const struct cat_view *v = arg;
	struct cat_img_table it;
	struct cat_relref ref;
	uint32_t t = view_table(v, schema, view, &it);

	if (t == CAT_IMG_NONE || (it.kind != CAT_REL_VIEW && it.kind != CAT_REL_MATVIEW) ||
	    i >= it.nchildren)
		return false;
	cat_image_child(v->img, t, i, &ref);
	*base_schema = ref.schema;
	*base_name = ref.name;
	return true;
}

bool
cat_view_is_aggregate(void *arg, const char *name)
{
	const struct cat_view *v = arg;

	return view_ok(v) && cat_image_is_aggregate(v->img, v->db, name);
}

bool
cat_view_table_at(void *arg, uint32_t i, const char **schema, const char **name)
{
	const struct cat_view *v = arg;
	struct cat_img_db d;
	struct cat_img_table it;

	if (!view_ok(v))
		return false;
	cat_image_db(v->img, v->db, &d);
	if (i >= d.ntables)
		return false;
	cat_image_table(v->img, cat_image_db_table(v->img, v->db, i), &it);
	*schema = it.schema;
	*name = it.name;
	return true;
}

bool
cat_view_type_name(void *arg, uint32_t oid, const char **schema, const char **name)
{
	const struct cat_view *v = arg;
	struct cat_img_type ty;
	uint32_t n;

	if (!view_ok(v) || (n = cat_image_find_type(v->img, v->db, oid)) == CAT_IMG_NONE)
		return false;
	cat_image_type(v->img, n, &ty);
	*schema = ty.schema;
	*name = ty.name;
	return true;
}

/* cat_view_type_oid: see catalog_image.h. */
uint32_t
cat_view_type_oid(const struct cat_view *v, const char *shard, uint32_t oid, bool to_auth)
{
	if (!view_ok(v))
		return oid;
	return to_auth ? cat_image_auth_oid(v->img, v->db, shard, oid)
		       : cat_image_shard_oid(v->img, v->db, shard, oid);
}

/* cat_view_shard_has_oids: see catalog_image.h. */
bool
cat_view_shard_has_oids(const struct cat_view *v, const char *shard)
{
	return view_ok(v) && cat_image_shard_has_oids(v->img, v->db, shard);
}
