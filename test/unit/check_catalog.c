/*
 * check_catalog.c - unit tests of src/catalog: building the model from canned rows of
 * cat_load_sql() (a storefront database), search_path lookup, routing types through
 * domains and enums, unreadable rows, the shared-memory image round trip, and the topology
 * rules V4 and V11 against the storefront topology.
 */
#include "neki/base.h"

#include <check.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "neki/catalog.h"
#include "neki/catalog_image.h"
#include "neki/shm.h"
#include "neki/topology.h"

#include "suites.h"
#include "topo_fixtures.h"

#define N NULL

/* The storefront catalog as cat_load_sql() would return it (deliberately out of order). */
static const char *const store_rows[][CAT_LOAD_COLS] = {
	{ "a", "16410", "2", "id", "20", "-1", "true", "a", "false", "" },
	{ "a", "16410", "1", "customer_id", "20", "-1", "true", "", "false", "" },
	{ "a", "16410", "4", "total", "16520", "-1", "false", "", "false", "" },
	{ "a", "16410", "3", "status", "16500", "-1", "true", "", "true", "" },
	{ "a", "16410", "5", "tags", "1016", "-1", "false", "", "false", "" },
	{ "a", "16410", "6", "total_cents", "20", "-1", "false", "", "true", "s" },
	{ "d", "store", "en_US.UTF-8", "C.UTF-8", N, N, N, N, N, N },
	{ "r", "16400", "public", "customers", "r", "false", N, N, N, N },
	{ "r", "16410", "public", "orders", "r", "false", N, N, N, N },
	{ "r", "16420", "public", "order_items", "r", "false", N, N, N, N },
	{ "r", "16430", "public", "countries", "r", "false", N, N, N, N },
	{ "r", "16440", "public", "products", "r", "false", N, N, N, N },
	{ "r", "16445", "public", "orders_by_id", "r", "false", N, N, N, N },
	{ "r", "16450", "public", "customers_id_seq", "S", "false", N, N, N, N },
	{ "r", "16460", "public", "events", "p", "false", N, N, N, N },
	{ "r", "16461", "public", "events_2024", "r", "true", N, N, N, N },
	{ "r", "16462", "public", "events_2025", "r", "true", N, N, N, N },
	{ "r", "16470", "app", "customers", "r", "false", N, N, N, N },
	{ "r", "16480", "public", "v_orders", "v", "false", N, N, N, N },
	{ "r", "16490", "public", "customers_pkey", "i", "false", N, N, N, N },
	{ "r", "16530", "public", "audit", "r", "false", N, N, N, N },
	{ "r", "16531", "public", "audit_orders", "r", "false", N, N, N, N },
	{ "a", "16400", "1", "id", "20", "-1", "true", "d", "false", "" },
	{ "a", "16400", "2", "email", "16510", "-1", "false", "", "false", "" },
	{ "a", "16400", "4", "name", "25", "-1", "false", "", "false", "" },
	{ "a", "16420", "1", "customer_id", "20", "-1", "true", "", "false", "" },
	{ "a", "16420", "2", "order_id", "20", "-1", "true", "", "false", "" },
	{ "a", "16420", "3", "sku", "1043", "68", "true", "", "false", "" },
	{ "a", "16420", "4", "qty", "23", "-1", "true", "", "false", "" },
	{ "a", "16430", "1", "code", "25", "-1", "true", "", "false", "" },
	{ "a", "16440", "1", "sku", "25", "-1", "true", "", "false", "" },
	{ "a", "16440", "2", "loc", "600", "-1", "false", "", "false", "" },
	{ "a", "16445", "1", "customer_id", "20", "-1", "true", "", "false", "" },
	{ "a", "16445", "2", "id", "20", "-1", "true", "", "false", "" },
	{ "a", "16460", "1", "customer_id", "20", "-1", "true", "", "false", "" },
	{ "a", "16461", "1", "customer_id", "20", "-1", "true", "", "false", "" },
	{ "a", "16462", "1", "customer_id", "20", "-1", "true", "", "false", "" },
	{ "a", "16470", "1", "id", "23", "-1", "true", "", "false", "" },
	{ "a", "16480", "1", "id", "20", "-1", "false", "", "false", "" },
	{ "t", "20", "pg_catalog", "int8", "8", "true", "N", "b", "0", "0" },
	{ "t", "23", "pg_catalog", "int4", "4", "true", "N", "b", "0", "0" },
	{ "t", "25", "pg_catalog", "text", "-1", "false", "S", "b", "0", "0" },
	{ "t", "1043", "pg_catalog", "varchar", "-1", "false", "S", "b", "0", "0" },
	{ "t", "600", "pg_catalog", "point", "16", "false", "G", "b", "0", "701" },
	{ "t", "1016", "pg_catalog", "_int8", "-1", "false", "A", "b", "0", "20" },
	{ "t", "1700", "pg_catalog", "numeric", "-1", "false", "N", "b", "0", "0" },
	{ "t", "16500", "public", "order_status", "4", "true", "E", "e", "0", "0" },
	{ "t", "16510", "public", "email", "-1", "false", "S", "d", "16511", "0" },
	{ "t", "16511", "public", "short_text", "-1", "false", "S", "d", "25", "0" },
	{ "t", "16520", "public", "money_amount", "-1", "false", "N", "d", "1700", "0" },
	{ "e", "16500", "2", "shipped", N, N, N, N, N, N },
	{ "e", "16500", "1.5", "paid", N, N, N, N, N, N },
	{ "e", "16500", "1", "new", N, N, N, N, N, N },
	{ "k", "16410", "orders_status_key", "u", "3 2", "2", N, N, N, N },
	{ "k", "16410", "orders_pkey", "p", "1 2", "2", N, N, N, N },
	{ "k", "16410", "orders_expr_key", "u", "0", "1", N, N, N, N },
	{ "k", "16420", "order_items_pkey", "p", "1 2 3 4", "3", N, N, N, N },
	{ "k", "16400", "customers_pkey", "p", "1", "1", N, N, N, N },
	{ "k", "16445", "orders_by_id_pkey", "p", "1 2", "2", N, N, N, N },
	{ "q", "16450", "20", "1", "1", "1", "9223372036854775807", "20", "false", N },
	{ "s", "16400", "1", "16450", N, N, N, N, N, N },
	{ "i", "16462", "16460", N, N, N, N, N, N, N },
	{ "i", "16461", "16460", N, N, N, N, N, N, N },
	{ "i", "16531", "16530", N, N, N, N, N, N, N },
	{ "v", "16410", "16480", N, N, N, N, N, N, N },
};

struct canned {
	const char *const (*rows)[CAT_LOAD_COLS];
	size_t n;
};

static size_t
canned_nrows(const void *src)
{
	return ((const struct canned *)src)->n;
}

static const char *
canned_get(const void *src, size_t row, size_t col)
{
	return ((const struct canned *)src)->rows[row][col];
}

static struct catalog *
build_canned(const char *db, const char *const (*rows)[CAT_LOAD_COLS], size_t n,
	     struct nk_error *err)
{
	struct canned c = { rows, n };
	struct cat_rows r = { canned_nrows, canned_get, &c };

	return cat_build(db, &r, err);
}

static struct catalog *
store(void)
{
	struct nk_error err;
	struct catalog *c = build_canned("store", store_rows, NK_ARRAY_LEN(store_rows), &err);

	ck_assert_msg(c != NULL, "%s", err.message);
	return c;
}

START_TEST(test_build_tables)
{
	struct catalog *c = store();
	const struct cat_table *t;

	ck_assert_str_eq(c->dbname, "store");
	ck_assert_str_eq(c->collate, "en_US.UTF-8");
	ck_assert_str_eq(c->ctype, "C.UTF-8");
	ck_assert_uint_eq(c->ntables, 15);
	ck_assert_str_eq(c->tables[0].schema, "app");	/* sorted by (schema, name) */
	for (size_t i = 1; i < c->ntables; i++) {
		int r = strcmp(c->tables[i - 1].schema, c->tables[i].schema);

		ck_assert_int_lt(r ? r : strcmp(c->tables[i - 1].name, c->tables[i].name), 0);
	}
	t = cat_find_table(c, "public", "v_orders");
	ck_assert_int_eq(t->kind, CAT_REL_VIEW);
	ck_assert_int_eq(cat_find_table(c, "public", "customers_pkey")->kind, CAT_REL_INDEX);
	ck_assert_int_eq(cat_find_table(c, "public", "events")->kind, CAT_REL_PARTITIONED);
	ck_assert(cat_find_table(c, "public", "events_2024")->is_partition);
	ck_assert_ptr_null(cat_find_table(c, "public", "nope"));
	ck_assert_ptr_null(cat_find_table(c, "nope", "customers"));
	cat_free(c);
}
END_TEST

START_TEST(test_build_columns)
{
	struct catalog *c = store();
	const struct cat_table *t = cat_find_table(c, "public", "orders");
	const struct cat_column *col;

	ck_assert_uint_eq(t->ncols, 6);
	for (size_t i = 0; i < t->ncols; i++)
		ck_assert_int_eq(t->cols[i].attnum, (int)i + 1);
	ck_assert_str_eq(t->cols[0].name, "customer_id");
	col = cat_find_column(t, "id");
	ck_assert_int_eq(col->identity, CAT_IDENT_ALWAYS);
	ck_assert(col->not_null);
	ck_assert_uint_eq(col->type_oid, 20);
	col = cat_find_column(t, "status");
	ck_assert(col->has_default);
	ck_assert_int_eq(col->identity, CAT_IDENT_NONE);
	ck_assert(cat_find_column(t, "total_cents")->generated);
	ck_assert(!cat_find_column(t, "total")->generated);
	ck_assert_ptr_null(cat_find_column(t, "nope"));
	t = cat_find_table(c, "public", "order_items");
	ck_assert_int_eq(cat_find_column(t, "sku")->typmod, 68);
	/* a dropped column leaves a gap in attnums */
	t = cat_find_table(c, "public", "customers");
	ck_assert_uint_eq(t->ncols, 3);
	ck_assert_int_eq(t->cols[2].attnum, 4);
	ck_assert_int_eq(t->cols[0].identity, CAT_IDENT_BY_DEFAULT);
	cat_free(c);
}
END_TEST

START_TEST(test_build_keys_sequences_children)
{
	struct catalog *c = store();
	const struct cat_table *t = cat_find_table(c, "public", "orders");
	const struct cat_key *pk = cat_primary_key(t);

	/* the PK first, the expression index left out */
	ck_assert_uint_eq(t->nkeys, 2);
	ck_assert_str_eq(pk->name, "orders_pkey");
	ck_assert_uint_eq(pk->ncols, 2);
	ck_assert_str_eq(t->cols[pk->cols[0]].name, "customer_id");
	ck_assert_str_eq(t->cols[pk->cols[1]].name, "id");
	ck_assert_str_eq(t->keys[1].name, "orders_status_key");
	ck_assert(!t->keys[1].primary);
	ck_assert_str_eq(t->cols[t->keys[1].cols[0]].name, "status");
	/* INCLUDE columns are not key columns */
	pk = cat_primary_key(cat_find_table(c, "public", "order_items"));
	ck_assert_uint_eq(pk->ncols, 3);
	ck_assert_ptr_null(cat_primary_key(cat_find_table(c, "public", "products")));
	/* serial / identity: the owned sequence and its CACHE */
	t = cat_find_table(c, "public", "customers");
	ck_assert_str_eq(t->cols[0].seq.schema, "public");
	ck_assert_str_eq(t->cols[0].seq.name, "customers_id_seq");
	ck_assert_ptr_null(t->cols[1].seq.name);
	t = cat_find_table(c, t->cols[0].seq.schema, t->cols[0].seq.name);
	ck_assert_int_eq(t->kind, CAT_REL_SEQUENCE);
	ck_assert_int_eq(t->seq.cache, 20);
	ck_assert_int_eq(t->seq.max, INT64_MAX);
	ck_assert_uint_eq(t->seq.type_oid, 20);
	ck_assert(!t->seq.cycle);
	/* children in name order */
	t = cat_find_table(c, "public", "events");
	ck_assert_uint_eq(t->nchildren, 2);
	ck_assert_str_eq(t->children[0].name, "events_2024");
	ck_assert_str_eq(t->children[1].name, "events_2025");
	cat_free(c);
}
END_TEST

START_TEST(test_types)
{
	struct catalog *c = store();
	const struct cat_type *ty = cat_find_type(c, 16500);
	enum ks_type k;

	ck_assert_uint_eq(c->ntypes, 11);
	ck_assert_int_eq(ty->typtype, CAT_TYPTYPE_ENUM);
	ck_assert_uint_eq(ty->nlabels, 3);
	ck_assert_str_eq(ty->labels[0], "new");
	ck_assert_str_eq(ty->labels[1], "paid");
	ck_assert_str_eq(ty->labels[2], "shipped");
	ck_assert_int_eq(ty->category, 'E');
	ty = cat_find_type(c, 1016);
	ck_assert_uint_eq(ty->elem_oid, 20);
	ck_assert_str_eq(ty->name, "_int8");
	ck_assert_int_eq(cat_find_type(c, 20)->len, 8);
	ck_assert(cat_find_type(c, 20)->byval);
	ck_assert(cat_ks_type(c, 16500, &k));
	ck_assert_int_eq(k, KS_TYPE_ENUM);
	ck_assert(cat_ks_type(c, 16510, &k));	/* domain over a domain over text */
	ck_assert_int_eq(k, KS_TYPE_TEXT);
	ck_assert(cat_ks_type(c, 16520, &k));
	ck_assert_int_eq(k, KS_TYPE_NUMERIC);
	ck_assert(cat_ks_type(c, 1043, &k));
	ck_assert_int_eq(k, KS_TYPE_VARCHAR);
	ck_assert(!cat_ks_type(c, 600, &k));	/* point */
	ck_assert(!cat_ks_type(c, 1016, &k));	/* arrays have no rule */
	ck_assert(!cat_ks_type(c, 99999, &k));
	ck_assert_str_eq(cat_relkind_str(CAT_REL_MATVIEW), "materialized view");
	cat_free(c);
}
END_TEST

START_TEST(test_search_path)
{
	struct catalog *c = store();
	const char *const app_first[] = { "app", "public" };
	const char *const user_first[] = { "$user", "public" };
	const char *const none[] = { "nope" };

	ck_assert_str_eq(cat_lookup_table(c, NULL, "customers", app_first, 2)->schema, "app");
	ck_assert_str_eq(cat_lookup_table(c, NULL, "customers", user_first, 2)->schema, "public");
	ck_assert_str_eq(cat_lookup_table(c, NULL, "orders", app_first, 2)->schema, "public");
	ck_assert_str_eq(cat_lookup_table(c, "public", "customers", app_first, 2)->schema,
			 "public");
	ck_assert_ptr_null(cat_lookup_table(c, NULL, "customers", none, 1));
	ck_assert_ptr_null(cat_lookup_table(c, "app", "orders", app_first, 2));
	cat_free(c);
}
END_TEST

START_TEST(test_bad_rows)
{
	static const char *const bad_oid[][CAT_LOAD_COLS] = {
		{ "d", "x", "C", "C", N, N, N, N, N, N },
		{ "r", "12x", "public", "t", "r", "false", N, N, N, N },
	};
	static const char *const null_name[][CAT_LOAD_COLS] = {
		{ "r", "1", "public", N, "r", "false", N, N, N, N },
	};
	static const char *const empty[][CAT_LOAD_COLS] = {
		{ "z", N, N, N, N, N, N, N, N, N },
	};
	struct nk_error err;
	struct catalog *c;

	ck_assert_ptr_null(build_canned("x", bad_oid, 2, &err));
	ck_assert_str_eq(err.sqlstate, "XX000");
	ck_assert_str_eq(err.message, "could not load the catalog of database \"x\": row 2 "
			 "(kind 'r'): a number is not readable");
	ck_assert_ptr_null(build_canned("x", null_name, 1, &err));
	ck_assert_ptr_nonnull(strstr(err.message, "a name is NULL"));
	/* unknown kinds are ignored; no database row: empty collation */
	c = build_canned("x", empty, 1, &err);
	ck_assert_ptr_nonnull(c);
	ck_assert_uint_eq(c->ntables, 0);
	ck_assert_str_eq(c->collate, "");
	cat_free(c);
}
END_TEST

START_TEST(test_load_sql_shape)
{
	const char *sql = cat_load_sql();

	/* one statement; every branch of the UNION has CAT_LOAD_COLS columns (checked against
	 * a real server by test/admin/test_catalog.py) */
	ck_assert_ptr_null(strchr(sql, ';'));
	ck_assert_ptr_nonnull(strstr(sql, "pg_catalog.pg_attribute"));
	ck_assert_ptr_nonnull(strstr(sql, "'__neki'"));
}
END_TEST

/* Every table, column, key, child and type of <c> reads back the same from database <d>. */
static void
check_image_matches(const void *img, uint32_t d, const struct catalog *c)
{
	struct cat_img_db db;

	cat_image_db(img, d, &db);
	ck_assert_str_eq(db.name, c->dbname);
	ck_assert_str_eq(db.collate, c->collate);
	ck_assert_uint_eq(db.ntables, c->ntables);
	for (size_t i = 0; i < c->ntables; i++) {
		const struct cat_table *t = &c->tables[i];
		uint32_t it = cat_image_find_table(img, d, t->schema, t->name);
		struct cat_img_table o;

		ck_assert_uint_ne(it, CAT_IMG_NONE);
		cat_image_table(img, it, &o);
		ck_assert_str_eq(o.name, t->name);
		ck_assert_int_eq(o.kind, t->kind);
		ck_assert_uint_eq(o.oid, t->oid);
		ck_assert_int_eq(o.is_partition, t->is_partition);
		ck_assert_uint_eq(o.ncols, t->ncols);
		ck_assert_uint_eq(o.nkeys, t->nkeys);
		ck_assert_uint_eq(o.nchildren, t->nchildren);
		ck_assert_int_eq(o.seq.cache, t->seq.cache);
		ck_assert_int_eq(o.seq.max, t->seq.max);
		for (uint32_t k = 0; k < t->ncols; k++) {
			struct cat_column col;

			cat_image_column(img, it, k, &col);
			ck_assert_str_eq(col.name, t->cols[k].name);
			ck_assert_uint_eq(cat_image_find_column(img, it, col.name), k);
			ck_assert_uint_eq(col.type_oid, t->cols[k].type_oid);
			ck_assert_int_eq(col.typmod, t->cols[k].typmod);
			ck_assert_int_eq(col.attnum, t->cols[k].attnum);
			ck_assert_int_eq(col.not_null, t->cols[k].not_null);
			ck_assert_int_eq(col.has_default, t->cols[k].has_default);
			ck_assert_int_eq(col.generated, t->cols[k].generated);
			ck_assert_int_eq(col.identity, t->cols[k].identity);
			ck_assert_int_eq(col.seq.name == NULL, t->cols[k].seq.name == NULL);
			if (col.seq.name)
				ck_assert_str_eq(col.seq.name, t->cols[k].seq.name);
		}
		for (uint32_t k = 0; k < t->nkeys; k++) {
			struct cat_img_key key;

			cat_image_key(img, it, k, &key);
			ck_assert_str_eq(key.name, t->keys[k].name);
			ck_assert_int_eq(key.primary, t->keys[k].primary);
			ck_assert_uint_eq(key.ncols, t->keys[k].ncols);
			for (uint32_t j = 0; j < key.ncols; j++)
				ck_assert_uint_eq(cat_image_key_col(img, it, k, j),
						  t->keys[k].cols[j]);
		}
		for (uint32_t k = 0; k < t->nchildren; k++) {
			struct cat_relref ch;

			cat_image_child(img, it, k, &ch);
			ck_assert_str_eq(ch.name, t->children[k].name);
		}
	}
	for (size_t i = 0; i < c->ntypes; i++) {
		const struct cat_type *t = &c->types[i];
		uint32_t ty = cat_image_find_type(img, d, t->oid);
		struct cat_img_type o;
		enum ks_type k1, k2;

		ck_assert_uint_ne(ty, CAT_IMG_NONE);
		cat_image_type(img, ty, &o);
		ck_assert_str_eq(o.name, t->name);
		ck_assert_int_eq(o.len, t->len);
		ck_assert_int_eq(o.byval, t->byval);
		ck_assert_int_eq(o.category, t->category);
		ck_assert_int_eq(o.typtype, t->typtype);
		ck_assert_uint_eq(o.base_oid, t->base_oid);
		ck_assert_uint_eq(o.elem_oid, t->elem_oid);
		ck_assert_uint_eq(o.nlabels, t->nlabels);
		for (uint32_t j = 0; j < o.nlabels; j++)
			ck_assert_str_eq(cat_image_type_label(img, ty, j), t->labels[j]);
		ck_assert_int_eq(cat_image_ks_type(img, d, t->oid, &k1), cat_ks_type(c, t->oid, &k2));
	}
}

START_TEST(test_image_round_trip)
{
	static const char *const other_rows[][CAT_LOAD_COLS] = {
		{ "d", "analytics", "C", "C", N, N, N, N, N, N },
		{ "r", "1", "public", "customers", "r", "false", N, N, N, N },
		{ "a", "1", "1", "tenant", "25", "-1", "true", "", "false", "" },
	};
	struct nk_error err;
	struct catalog *a = store();
	struct catalog *b = build_canned("analytics", other_rows, 3, &err);
	const struct catalog *cats[] = { a, b };
	size_t size = cat_image_size(cats, 2);
	uint64_t *buf = calloc(1, size + 8);
	const char *const path[] = { "app", "public" };
	uint32_t d, t;
	struct cat_img_table o;

	ck_assert_int_eq(cat_image_build(cats, 2, 7, buf, size - 8), -1);
	ck_assert_int_eq(cat_image_build(cats, 2, 7, buf, size), (ssize_t)size);
	ck_assert(cat_image_is_valid(buf, size));
	ck_assert(!cat_image_is_valid(buf, size - 1));
	ck_assert_uint_eq(cat_image_version(buf), 7);
	ck_assert_uint_eq(cat_image_len(buf), size);
	ck_assert_uint_eq(cat_image_db_count(buf), 2);
	ck_assert_uint_eq(cat_image_find_db(buf, "nope"), CAT_IMG_NONE);
	d = cat_image_find_db(buf, "store");
	check_image_matches(buf, d, a);
	check_image_matches(buf, cat_image_find_db(buf, "analytics"), b);
	t = cat_image_lookup_table(buf, d, NULL, "customers", path, 2);
	cat_image_table(buf, t, &o);
	ck_assert_str_eq(o.schema, "app");
	ck_assert_uint_eq(cat_image_lookup_table(buf, d, NULL, "nope", path, 2), CAT_IMG_NONE);
	ck_assert_uint_eq(cat_image_find_table(buf, d, "public", "zzz"), CAT_IMG_NONE);
	ck_assert_uint_eq(cat_image_find_column(buf, t, "nope"), CAT_IMG_NONE);
	ck_assert_uint_eq(cat_image_find_type(buf, d, 4242), CAT_IMG_NONE);
	/* the router's plan_catalog conveniences */
	ck_assert_uint_eq(cat_image_column_type(buf, d, "public", "customers", "email"), 16510);
	ck_assert_uint_eq(cat_image_base_type(buf, d, 16510), 25);	/* email -> short_text -> text */
	ck_assert_uint_eq(cat_image_base_type(buf, d, 16500), 16500);	/* enums stay */
	ck_assert_uint_eq(cat_image_column_type(buf, d, "public", "customers", "nope"), 0);
	ck_assert_uint_eq(cat_image_column_type(buf, d, "public", "nope", "id"), 0);
	ck_assert_str_eq(cat_image_column_name(buf, d, "public", "customers", 3), "name");
	ck_assert_ptr_null(cat_image_column_name(buf, d, "public", "customers", 4));
	ck_assert_ptr_null(cat_image_column_name(buf, d, "public", "customers", 0));
	ck_assert_int_eq(cat_image_relkind(buf, d, "public", "events"), 'p');
	ck_assert_int_eq(cat_image_relkind(buf, d, "public", "customers_id_seq"), 'S');
	ck_assert_int_eq(cat_image_relkind(buf, d, "public", "nope"), 0);
	/* the image is position independent */
	{
		uint64_t *moved = malloc(size);

		memcpy(moved, buf, size);
		memset(buf, 0xa5, size);
		check_image_matches(moved, cat_image_find_db(moved, "store"), a);
		free(moved);
	}
	free(buf);
	cat_free(a);
	cat_free(b);
}
END_TEST

/* Authoritative OIDs: the pairs of the shards whose OIDs differ, through the image. */
START_TEST(test_oid_pairs)
{
	static const char *const auth[][CAT_LOAD_COLS] = {
		{ "16500", "public", "mood" }, { "16501", "public", "_mood" },
		{ "16600", "app", "mood" }, { "16700", "public", "addr" },
	};
	static const char *const shard_a[][CAT_LOAD_COLS] = {	/* swapped, and one of its own */
		{ "16501", "public", "mood" }, { "16500", "public", "_mood" },
		{ "16600", "app", "mood" }, { "16800", "public", "pad" },
	};
	static const char *const bad[][CAT_LOAD_COLS] = { { "x", "public", "mood" } };
	struct canned ca = { auth, NK_ARRAY_LEN(auth) }, cs = { shard_a, NK_ARRAY_LEN(shard_a) };
	struct canned cb = { bad, 1 };
	struct cat_rows ra = { canned_nrows, canned_get, &ca };
	struct cat_rows rs = { canned_nrows, canned_get, &cs };
	struct cat_rows rb = { canned_nrows, canned_get, &cb };
	struct catalog *c = store();
	const struct catalog *cats[] = { c };
	struct nk_error err;
	uint64_t *buf;
	size_t size;
	uint32_t d;

	ck_assert(strstr(cat_types_sql(), "16384") != NULL);
	ck_assert(cat_set_auth_types(c, &ra, &err));
	ck_assert(cat_map_shard_types(c, "shard-a", &rs, &err));
	ck_assert(cat_map_shard_types(c, "shard-b", &ra, &err));	/* the same OIDs */
	ck_assert(!cat_map_shard_types(c, "shard-c", &rb, &err));
	ck_assert_str_eq(err.sqlstate, "XX000");
	ck_assert_uint_eq(c->noidmap, 2);
	size = cat_image_size(cats, 1);
	buf = calloc(1, size);
	ck_assert_int_eq(cat_image_build(cats, 1, 1, buf, size), (ssize_t)size);
	d = cat_image_find_db(buf, "store");
	ck_assert(cat_image_shard_has_oids(buf, d, "shard-a"));
	ck_assert(!cat_image_shard_has_oids(buf, d, "shard-b"));
	ck_assert_uint_eq(cat_image_auth_oid(buf, d, "shard-a", 16501), 16500);
	ck_assert_uint_eq(cat_image_auth_oid(buf, d, "shard-a", 16500), 16501);
	ck_assert_uint_eq(cat_image_auth_oid(buf, d, "shard-a", 16800), 16800);
	ck_assert_uint_eq(cat_image_auth_oid(buf, d, "shard-b", 16501), 16501);
	ck_assert_uint_eq(cat_image_shard_oid(buf, d, "shard-a", 16500), 16501);
	ck_assert_uint_eq(cat_image_shard_oid(buf, d, "shard-a", 16700), 16700);
	ck_assert_uint_eq(cat_image_auth_oid(buf, d, "shard-a", 0), 0);
	free(buf);
	cat_free(c);
}
END_TEST

START_TEST(test_image_empty)
{
	uint64_t buf[64];
	size_t size = cat_image_size(NULL, 0);

	ck_assert_uint_le(size, sizeof(buf));
	ck_assert_int_eq(cat_image_build(NULL, 0, 1, buf, sizeof(buf)), (ssize_t)size);
	ck_assert(cat_image_is_valid(buf, size));
	ck_assert_uint_eq(cat_image_find_db(buf, "store"), CAT_IMG_NONE);
	buf[0] ^= 1;
	ck_assert(!cat_image_is_valid(buf, size));
}
END_TEST

/* The storefront topology with <extra> spliced into its shard_indexes and products entry. */
static struct topo_model *
storefront_with(const char *products_entry, const char *extra_index)
{
	char *json = fx_read_file("etc/topology-storefront.json");
	struct topo_findings f;
	struct topo_model *m;
	char *p, *out;

	ck_assert_ptr_nonnull(json);
	p = strstr(json, "\"products\": { \"shard_group\": \"catalog\" }");
	ck_assert_ptr_nonnull(p);
	*p = '\0';
	p += strlen("\"products\": { \"shard_group\": \"catalog\" }");
	ck_assert_int_ne(asprintf(&out, "%s\"products\": %s%s", json, products_entry, p), -1);
	free(json);
	json = out;
	p = strstr(json, "\"shard_indexes\": {");
	ck_assert_ptr_nonnull(p);
	p += strlen("\"shard_indexes\": {");
	*(p - 1) = '\0';
	ck_assert_int_ne(asprintf(&out, "%s{ %s %s", json, extra_index, p), -1);
	free(json);
	topo_findings_init(&f);
	m = topo_parse(out, strlen(out), &f);
	ck_assert_msg(m && f.n == 0, "%s", f.n ? f.v[0].message : "no model");
	topo_findings_cleanup(&f);
	free(out);
	return m;
}

static void
check_v4(const char *products_entry, const char *extra_index, const char *message)
{
	struct catalog *c = store();
	struct topo_model *m = storefront_with(products_entry, extra_index);
	struct topo_findings rej, dis;

	topo_findings_init(&rej);
	topo_findings_init(&dis);
	cat_check_topology(c, m, &rej, &dis);
	if (!message) {
		ck_assert_msg(rej.n == 0, "%s", rej.n ? rej.v[0].message : "");
	} else {
		ck_assert_uint_eq(rej.n, 1);
		ck_assert_str_eq(rej.v[0].message, message);
		ck_assert_str_eq(rej.v[0].rule, "tables/shard-key-type");
		ck_assert_str_eq(rej.v[0].path, "databases.store.schemas.public.tables.products");
		ck_assert(!rej.v[0].forceable);
		ck_assert_ptr_nonnull(topo_findings_first_blocking(&rej, true));
	}
	topo_findings_cleanup(&rej);
	topo_findings_cleanup(&dis);
	topo_model_free(m);
	cat_free(c);
}

START_TEST(test_v4)
{
	/* the storefront as it is: every sharded table's key is routable */
	check_v4("{ \"shard_group\": \"catalog\" }", "", NULL);
	check_v4("{ \"shard_group\": \"catalog\", \"shard_index\": \"m\" }",
		 "\"m\": { \"type\": \"modulo\", \"columns\": [\"sku\"], "
		 "\"index_params\": { \"modulus\": 4 } },",
		 "table \"public.products\" cannot be sharded by shard index \"m\": shard index "
		 "of type \"modulo\" needs an integer key, not text");
	check_v4("{ \"shard_group\": \"catalog\", \"shard_index\": \"p\" }",
		 "\"p\": { \"type\": \"xxhash\", \"columns\": [\"loc\"] },",
		 "shard key column \"loc\" of table \"public.products\" has type point, which has "
		 "no routing rule");
	check_v4("{ \"shard_group\": \"catalog\", \"shard_index\": \"n\" }",
		 "\"n\": { \"type\": \"xxhash\", \"columns\": [\"upper(nope)\"] },",
		 "shard key column \"nope\" of shard index \"n\" does not exist in table "
		 "\"public.products\"");
}
END_TEST

START_TEST(test_v11)
{
	struct catalog *c = store();
	struct topo_model *m = fx_storefront();
	const struct topo_database *d = topo_find_database(m, "store");
	struct topo_findings rej, dis;

	/* orders_by_id's PK is (customer_id, id), not the GSI's columns [id] */
	topo_findings_init(&rej);
	topo_findings_init(&dis);
	cat_check_topology(c, m, &rej, &dis);
	ck_assert_uint_eq(rej.n, 0);
	ck_assert_uint_eq(dis.n, 1);
	ck_assert_str_eq(dis.v[0].rule, "gsi/lookup-pk");
	ck_assert_str_eq(dis.v[0].path, "databases.store.global_secondary_indexes.orders_by_id");
	ck_assert_str_eq(dis.v[0].message, "unique global secondary index \"orders_by_id\" is "
			 "disabled: the primary key of lookup table \"orders_by_id\" is not its "
			 "columns");
	ck_assert(cat_gsi_disabled(c, d, &d->gsis[0]));
	topo_findings_cleanup(&rej);
	topo_findings_cleanup(&dis);
	cat_free(c);
	topo_model_free(m);
}
END_TEST

START_TEST(test_v11_matching_pk)
{
	static const char *const rows[][CAT_LOAD_COLS] = {
		{ "r", "1", "public", "orders_by_id", "r", "false", N, N, N, N },
		{ "a", "1", "1", "customer_id", "20", "-1", "true", "", "false", "" },
		{ "a", "1", "2", "id", "20", "-1", "true", "", "false", "" },
		{ "k", "1", "orders_by_id_pkey", "p", "2", "1", N, N, N, N },
	};
	struct nk_error err;
	struct catalog *c = build_canned("store", rows, NK_ARRAY_LEN(rows), &err);
	struct topo_model *m = fx_storefront();
	const struct topo_database *d = topo_find_database(m, "store");
	struct catalog *empty = build_canned("store", rows, 0, &err);

	ck_assert(!cat_gsi_disabled(c, d, &d->gsis[0]));
	/* a lookup table that does not exist yet does not disable the GSI */
	ck_assert(!cat_gsi_disabled(empty, d, &d->gsis[0]));
	cat_free(c);
	cat_free(empty);
	topo_model_free(m);
}
END_TEST

static void
shm_setup(void)
{
	char err[256];

	ck_assert_msg(shm_create(shm_min_size(2) + (1 << 20), 2, err, sizeof(err)), "%s", err);
}

static void
shm_teardown(void)
{
	shm_destroy();
}

/* Build the storefront catalog image as <version> into a claimed slot and publish it. */
static unsigned
publish_store(uint64_t version, uint64_t served)
{
	struct catalog *c = store();
	const struct catalog *cats[] = { c };
	unsigned slot;
	ssize_t len;

	ck_assert(shm_cat_claim(&slot));
	len = cat_image_build(cats, 1, version, shm_cat_data(slot), shm_cat_capacity());
	ck_assert_int_gt(len, 0);
	shm_cat_publish(slot, version, served, (size_t)len);
	cat_free(c);
	return slot;
}

START_TEST(test_shm_publish_pin)
{
	struct shm_topo_ref r1, r2;
	unsigned s1, s2, slot, n = 0;
	struct catalog *c = store();

	ck_assert(!shm_cat_pin(&r1));
	ck_assert_uint_eq(shm_cat_version(), 0);
	ck_assert_uint_ge(shm_cat_capacity(), 4096);
	/* the catalog area follows the topology slots without overlapping them */
	ck_assert((char *)shm_topo_data(SHM_TOPO_SLOTS - 1) + shm_topo_capacity() <=
		  (char *)shm_cat_data(0));
	s1 = publish_store(1, 0);
	ck_assert(shm_cat_pin(&r1));
	ck_assert_uint_eq(r1.revision, 1);
	ck_assert(cat_image_is_valid(r1.data, r1.len));
	check_image_matches(r1.data, cat_image_find_db(r1.data, "store"), c);
	s2 = publish_store(2, 0);
	ck_assert_uint_ne(s1, s2);
	ck_assert_uint_eq(shm_cat_version(), 2);
	ck_assert_uint_eq(atomic_load(&shm_header()->catalog_version), 2);
	ck_assert(shm_cat_pin(&r2));
	ck_assert_uint_eq(cat_image_version(r2.data), 2);
	/* neither the current nor the pinned slot is handed out */
	while (shm_cat_claim(&slot)) {
		ck_assert_uint_ne(slot, s1);
		ck_assert_uint_ne(slot, s2);
		n++;
	}
	ck_assert_uint_eq(n, SHM_CAT_SLOTS - 2);
	for (unsigned i = 0; i < SHM_CAT_SLOTS; i++)
		if (i != s1 && i != s2)
			shm_cat_abandon(i);
	check_image_matches(r1.data, 0, c);	/* still readable while pinned */
	shm_cat_unpin(&r1);
	shm_cat_unpin(&r2);
	ck_assert_uint_eq(atomic_load(&shm_header()->cat[s1].pins), 0);
	ck_assert_uint_eq(shm_topo_revision(), 0);	/* the topology is untouched */
	cat_free(c);
}
END_TEST

START_TEST(test_shm_refresh_requests)
{
	uint64_t mine;

	ck_assert_uint_eq(shm_cat_requested(), 0);
	mine = shm_cat_request_refresh();
	ck_assert_uint_eq(mine, 1);
	ck_assert_uint_eq(shm_cat_request_refresh(), 2);
	ck_assert_uint_eq(shm_cat_requested(), 2);
	ck_assert_uint_lt(shm_cat_served(), mine);
	/* the admin loads after seeing request 2 and publishes with served = 2 */
	publish_store(5, shm_cat_requested());
	ck_assert_uint_ge(shm_cat_served(), mine);
	ck_assert_uint_eq(shm_cat_version(), 5);
}
END_TEST

START_TEST(test_shm_view)
{
	struct cat_view v;

	/* nothing published: every lookup is "unknown" */
	cat_view_acquire(&v, "store");
	ck_assert_ptr_null(v.img);
	ck_assert_uint_eq(cat_view_column_type(&v, "public", "orders", "id"), 0);
	ck_assert_ptr_null(cat_view_column_name(&v, "public", "orders", 1));
	ck_assert_int_eq(cat_view_relkind(&v, "public", "orders"), 0);
	cat_view_release(&v);
	publish_store(3, 0);
	cat_view_acquire(&v, "store");
	ck_assert_uint_eq(v.version, 3);
	ck_assert_uint_eq(atomic_load(&shm_header()->cat[v.ref.slot].pins), 1);
	ck_assert_uint_eq(cat_view_column_type(&v, "public", "orders", "id"), 20);
	ck_assert_uint_eq(cat_view_column_type(&v, "public", "customers", "email"), 25);
	ck_assert_uint_eq(cat_view_column_type(&v, "public", "orders", "nope"), 0);
	ck_assert_str_eq(cat_view_column_name(&v, "public", "orders", 2), "id");
	ck_assert_int_eq(cat_view_relkind(&v, "public", "v_orders"), 'v');
	{
		struct cat_column col;
		const char *bs, *bn;

		/* the router's optional callbacks */
		ck_assert(cat_view_column(&v, "public", "customers", 1, &col));
		ck_assert_str_eq(col.name, "id");
		ck_assert_int_eq(col.identity, CAT_IDENT_BY_DEFAULT);
		ck_assert_str_eq(col.seq.name, "customers_id_seq");
		ck_assert(!cat_view_column(&v, "public", "customers", 4, &col));
		ck_assert(!cat_view_column(&v, "public", "nope", 1, &col));
		ck_assert_int_eq(cat_view_seq_cache(&v, "public", "customers_id_seq"), 20);
		ck_assert_int_eq(cat_view_seq_cache(&v, "public", "customers"), 0);
		ck_assert_uint_eq(cat_view_inh_children(&v, "public", "audit"), 1);
		ck_assert_uint_eq(cat_view_inh_children(&v, "public", "events"), 0); /* partitions */
		ck_assert_uint_eq(cat_view_inh_children(&v, "public", "orders"), 0);
		ck_assert(cat_view_view_base(&v, "public", "v_orders", 0, &bs, &bn));
		ck_assert_str_eq(bs, "public");
		ck_assert_str_eq(bn, "orders");
		ck_assert(!cat_view_view_base(&v, "public", "v_orders", 1, &bs, &bn));
		ck_assert(!cat_view_view_base(&v, "public", "audit", 0, &bs, &bn));
	}
	/* a new version does not disturb the pinned view; the next acquire sees it */
	publish_store(4, 0);
	ck_assert_str_eq(cat_view_column_name(&v, "public", "orders", 1), "customer_id");
	cat_view_release(&v);
	cat_view_acquire(&v, "store");
	ck_assert_uint_eq(v.version, 4);
	cat_view_release(&v);
	/* a database the catalog lacks */
	cat_view_acquire(&v, "other");
	ck_assert_ptr_nonnull(v.img);
	ck_assert_uint_eq(v.db, CAT_IMG_NONE);
	ck_assert_uint_eq(cat_view_column_type(&v, "public", "orders", "id"), 0);
	cat_view_release(&v);
	for (unsigned i = 0; i < SHM_CAT_SLOTS; i++)
		ck_assert_uint_eq(atomic_load(&shm_header()->cat[i].pins), 0);
}
END_TEST

Suite *
catalog_suite(void)
{
	Suite *s = suite_create("catalog");
	TCase *tc = tcase_create("catalog");

	tcase_add_test(tc, test_build_tables);
	tcase_add_test(tc, test_build_columns);
	tcase_add_test(tc, test_build_keys_sequences_children);
	tcase_add_test(tc, test_types);
	tcase_add_test(tc, test_search_path);
	tcase_add_test(tc, test_bad_rows);
	tcase_add_test(tc, test_load_sql_shape);
	tcase_add_test(tc, test_image_round_trip);
	tcase_add_test(tc, test_image_empty);
	tcase_add_test(tc, test_oid_pairs);
	tcase_add_test(tc, test_v4);
	tcase_add_test(tc, test_v11);
	tcase_add_test(tc, test_v11_matching_pk);
	suite_add_tcase(s, tc);
	tc = tcase_create("shm");
	tcase_add_checked_fixture(tc, shm_setup, shm_teardown);
	tcase_add_test(tc, test_shm_publish_pin);
	tcase_add_test(tc, test_shm_refresh_requests);
	tcase_add_test(tc, test_shm_view);
	suite_add_tcase(s, tc);
	return s;
}
