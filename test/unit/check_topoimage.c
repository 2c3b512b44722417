/*
 * check_topoimage.c - unit tests for the pointer-free topology image: build from the
 * storefront example, read back in place, compare every answer with the model, copy the
 * bytes elsewhere (position independence), determinism, size and corruption checks.
 */
#include "neki/base.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "neki/topology_image.h"
#include "topo_fixtures.h"

/* Build the image of <m> into a fresh 8-aligned buffer; *<len> gets its size. */
static void *
build(const struct topo_model *m, uint64_t revision, size_t *len)
{
	size_t size = topo_image_size(m);
	void *buf = aligned_alloc(8, (size + 7) & ~(size_t)7);

	ck_assert_uint_gt(size, 0);
	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(topo_image_build(m, revision, buf, size), (ssize_t)size);
	ck_assert(topo_image_is_valid(buf, size));
	*len = size;
	return buf;
}

static const char *const probe_tables[][3] = {
	{ "store", "public", "customers" },	{ "store", "public", "orders" },
	{ "store", "public", "order_items" },	{ "store", "public", "products" },
	{ "store", "public", "orders_by_id" },	{ "store", "public", "countries" },
	{ "store", "public", "unlisted" },	{ "store", "other", "x" },
	{ "postgres", "public", "x" },
};

/* Every probe resolves the same in the image as in the model. */
static void
check_same_resolution(const struct topo_model *m, const void *img)
{
	for (size_t i = 0; i < NK_ARRAY_LEN(probe_tables); i++) {
		const char *const *p = probe_tables[i];
		struct topo_resolution r;
		struct topo_img_rel ir;

		topo_resolve_table(m, p[0], p[1], p[2], &r);
		topo_image_resolve_table(img, p[0], p[1], p[2], &ir);
		ck_assert_msg(r.kind == ir.kind, "%s kind", p[2]);
		if (r.kind != TOPO_REL_TABLE)
			continue;
		ck_assert_uint_eq(ir.group, (uint32_t)(r.group - m->groups));
		ck_assert_uint_eq(ir.index, r.index ? (uint32_t)(r.index - m->indexes) :
						      TOPO_IMG_NONE);
		ck_assert(ir.listed == (r.table != NULL));
	}
}

/* customer_id keys route to the same range through the image and through the model. */
static void
check_same_routing(const struct topo_model *m, const void *img)
{
	const struct topo_shard_group *g = topo_find_group(m, "customer_data");
	uint32_t gi = topo_image_find_group(img, "customer_data");
	uint32_t ix = topo_image_find_index(img, "by_customer");
	struct nk_error err;

	ck_assert_uint_ne(ix, TOPO_IMG_NONE);
	for (int64_t k = -500; k < 500; k++) {
		struct ks_value v = { .type = KS_TYPE_INT8, .i = k };
		uint32_t r;

		ck_assert(topo_image_route(img, gi, ix, &v, &r, &err));
		ck_assert_uint_eq(r, topo_group_find_range(g, ks_xxhash(&v)));
	}
}

static void
check_storefront_image(const struct topo_model *m, const void *img)
{
	struct topo_img_rel r;
	struct topo_img_gsi gsi;
	const struct topo_seq_owner owners[] = { { "public", "customers" } };
	uint32_t lsku = topo_image_find_index(img, "by_lower_sku");

	ck_assert_uint_eq(topo_image_revision(img), 42);
	ck_assert_uint_eq(topo_image_group_count(img), 3);
	ck_assert_uint_eq(topo_image_authoritative(img), 0);
	ck_assert_str_eq(topo_image_group_uid(img, 1), "customer_data");
	ck_assert_uint_eq(topo_image_group_range_count(img, 1), 4);
	ck_assert_uint_eq(topo_image_group_shard_count(img, 1), 4);
	ck_assert_str_eq(topo_image_group_shard(img, 1, 3), "shard-d");
	ck_assert_str_eq(topo_image_range_shard(img, 2, 1), "shard-d");
	ck_assert(topo_image_range_start(img, 1, 2) == UINT64_C(0x8000000000000000));
	ck_assert_uint_eq(topo_image_find_range(img, 1, UINT64_C(0x7fffffffffffffff)), 1);
	ck_assert_uint_eq(topo_image_find_group(img, "nope"), TOPO_IMG_NONE);
	ck_assert(topo_image_has_database(img, "store"));
	ck_assert(!topo_image_has_database(img, "stor"));
	ck_assert(!topo_image_has_database(img, "nope"));
	ck_assert_uint_eq(topo_image_index_type(img, lsku), KS_INDEX_XXHASH);
	ck_assert_str_eq(topo_image_index_column(img, lsku), "lower(sku)");
	ck_assert_ptr_nonnull(topo_image_index_expr(img, lsku));
	ck_assert_str_eq(topo_image_index_expr(img, lsku)->columns[0], "sku");
	ck_assert_uint_eq(topo_image_index_expr(img, lsku)->nnodes, 2);
	topo_image_resolve_table(img, "store", "public", "countries", &r);
	ck_assert_int_eq(r.kind, TOPO_REL_REFERENCE);
	ck_assert_uint_eq(topo_image_list_len(img, r.list), 2);
	ck_assert_uint_eq(topo_image_list_at(img, r.list, 0), 1);
	ck_assert_uint_eq(topo_image_list_at(img, r.list, 1), 2);
	topo_image_resolve_table(img, "store", "public", "orders", &r);
	ck_assert_uint_eq(topo_image_list_len(img, r.list), 1);
	topo_image_gsi(img, topo_image_list_at(img, r.list, 0), &gsi);
	ck_assert_str_eq(gsi.name, "orders_by_id");
	ck_assert_str_eq(gsi.owner_table, "orders");
	ck_assert_str_eq(topo_image_list_str(img, gsi.owner_sk_columns, 0), "customer_id");
	ck_assert_uint_eq(topo_image_list_len(img, gsi.owner_pk_columns), 0);
	ck_assert(gsi.unique && !gsi.enabled && !gsi.ignore_null);
	ck_assert_uint_eq(topo_image_resolve_sequence(img, "store", "public", "orders_id_seq",
						      NULL, 0), 0);
	ck_assert_uint_eq(topo_image_resolve_sequence(img, "store", "public", "s", owners, 1), 0);
	check_same_resolution(m, img);
	check_same_routing(m, img);
}

START_TEST(test_image_round_trip)
{
	struct topo_model *m = fx_storefront(), *m2;
	size_t len, jlen;
	void *img = build(m, 42, &len);
	char *json = topo_to_json(m, false), *json2;
	struct topo_findings f;

	check_storefront_image(m, img);
	ck_assert_str_eq(topo_image_json(img, &jlen), json);
	ck_assert_uint_eq(jlen, strlen(json));
	topo_findings_init(&f);
	m2 = topo_parse(topo_image_json(img, NULL), jlen, &f);
	ck_assert_uint_eq(f.n, 0);
	json2 = topo_to_json(m2, false);
	ck_assert_str_eq(json, json2);
	free(json);
	free(json2);
	free(img);
	topo_model_free(m2);
	topo_model_free(m);
}
END_TEST

/* A write-only GSI (what __neki.gsi_build declares): the flag in the model, the image and the
 * canonical JSON (only when set). */
START_TEST(test_image_gsi_write_only)
{
	struct topo_model *m = fx_storefront();
	struct topo_gsi *g = &m->dbs[0].gsis[0];
	struct topo_img_gsi out;
	size_t len;
	void *img;
	char *json;

	json = topo_to_json(m, false);
	ck_assert_ptr_null(strstr(json, "write_only"));
	free(json);
	g->enabled = g->write_only = true;
	img = build(m, 7, &len);
	topo_image_gsi(img, 0, &out);
	ck_assert(out.enabled && out.write_only);
	json = topo_to_json(m, false);
	ck_assert_ptr_nonnull(strstr(json, "\"write_only\":true"));
	free(json);
	free(img);
	g->write_only = false;
	img = build(m, 8, &len);
	topo_image_gsi(img, 0, &out);
	ck_assert(out.enabled && !out.write_only);
	free(img);
	topo_model_free(m);
}
END_TEST

/* The bytes mean the same anywhere: copy them, destroy the original and the model. */
START_TEST(test_image_relocatable)
{
	struct topo_model *m = fx_storefront(), *ref = fx_storefront();
	size_t len;
	void *img = build(m, 42, &len);
	void *copy = aligned_alloc(8, (len + 7) & ~(size_t)7);

	memcpy(copy, img, len);
	memset(img, 0xa5, len);
	free(img);
	topo_model_free(m);
	ck_assert(topo_image_is_valid(copy, len));
	check_storefront_image(ref, copy);
	free(copy);
	topo_model_free(ref);
}
END_TEST

START_TEST(test_image_deterministic_and_checked)
{
	struct topo_model *m = fx_storefront();
	size_t len, len2;
	uint8_t *a = build(m, 7, &len), *b = build(m, 7, &len2);

	ck_assert_uint_eq(len, len2);
	ck_assert(memcmp(a, b, len) == 0);
	ck_assert_int_eq(topo_image_build(m, 7, b, len - 1), -1);
	ck_assert(!topo_image_is_valid(a, len - 1));
	a[0] ^= 1;
	ck_assert(!topo_image_is_valid(a, len));
	a[0] ^= 1;
	ck_assert(topo_image_is_valid(a, len));
	ck_assert_int_eq(topo_image_build(m, 7, a + 4, len), -1);	/* misaligned */
	free(a);
	free(b);
	topo_model_free(m);
}
END_TEST

/* modulo and range groups route through the image as DESIGN.md 4.1 says. */
START_TEST(test_image_modulo_and_range)
{
	struct topo_findings f;
	struct topo_model *m = fx_parse_validate(
		"{'shard_groups':[{'uid':'auth','key_ranges':[{'shard_uid':'auth'}]},"
		"{'uid':'mod','default_shard_index':'m4','key_ranges':[{'shard_uid':'shard-a','end':"
		"'4'},{'shard_uid':'shard-b','start':'4','end':'8'},{'shard_uid':'shard-c','start':"
		"'8','end':'c'},{'shard_uid':'shard-d','start':'c'}]},{'uid':'rng',"
		"'default_shard_index':'r','key_ranges':[{'shard_uid':'shard-a','end':'0'},"
		"{'shard_uid':'shard-b','start':'0'}]}],'shard_indexes':{'m4':{'type':'modulo',"
		"'columns':['k'],'index_params':{'modulus':4}},'r':{'type':'range','columns':"
		"['k']}},'authoritative_shard_group':'auth'}", NULL, &f);
	size_t len;
	void *img;
	uint32_t gm, gr, im, ir, r;
	struct nk_error err;

	ck_assert_msg(f.n == 0, "%s: %s", f.n ? f.v[0].path : "", f.n ? f.v[0].message : "");
	img = build(m, 1, &len);
	gm = topo_image_find_group(img, "mod");
	gr = topo_image_find_group(img, "rng");
	im = topo_image_find_index(img, "m4");
	ir = topo_image_find_index(img, "r");
	ck_assert_int_eq(topo_image_index_modulus(img, im), 4);
	for (int64_t k = -20; k <= 20; k++) {
		struct ks_value v = { .type = KS_TYPE_INT4, .i = k };

		ck_assert(topo_image_route(img, gm, im, &v, &r, &err));
		ck_assert_uint_eq(r, (uint32_t)(((k % 4) + 4) % 4));
		ck_assert(topo_image_route(img, gr, ir, &v, &r, &err));
		ck_assert_uint_eq(r, k < 0 ? 0 : 1);
	}
	{
		struct ks_value t = { .type = KS_TYPE_TEXT, .bytes = "x", .len = 1 };

		ck_assert(!topo_image_route(img, gm, im, &t, &r, &err));
		ck_assert_str_eq(err.sqlstate, "42804");
	}
	free(img);
	topo_findings_cleanup(&f);
	topo_model_free(m);
}
END_TEST

void
topology_add_image_tests(TCase *tc)
{
	tcase_add_test(tc, test_image_round_trip);
	tcase_add_test(tc, test_image_relocatable);
	tcase_add_test(tc, test_image_gsi_write_only);
	tcase_add_test(tc, test_image_deterministic_and_checked);
	tcase_add_test(tc, test_image_modulo_and_range);
}
