/*
 * view.c - a worker's view of the catalog: the published image pinned in shared memory
 * (shm_cat_pin) with one database selected, and the router's struct plan_catalog callbacks
 * over it. A session acquires a view at a statement boundary, plans with it, and releases
 * it; a new catalog version is seen at the next acquire. Entry points: cat_view_acquire(),
 * cat_view_release(), cat_view_column_type(), cat_view_column_name(), cat_view_relkind().
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
