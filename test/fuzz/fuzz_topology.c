/*
 * fuzz_topology.c - the data topology JSON (src/topology: model, validation, canonical
 * JSON, the shared-memory image and resolution). The input is the document. Invariants:
 * a document that parses without findings writes canonical JSON that parses back without
 * findings and writes the same text; a document topo_check() accepts builds a valid image,
 * and every table it lists resolves in the image to the group and index the model
 * resolves it to; an integer key routed through a group's index lands on a range whose
 * bounds hold its routing value.
 */
#include "fuzz.h"

#include "neki/topology.h"
#include "neki/topology_image.h"

static const char *const shards[] = { "auth", "shard-a", "shard-b", "shard-c", "shard-d" };

static const struct topo_validate_input vin = { shards, NK_ARRAY_LEN(shards), NULL };

/* Canonical JSON of a finding-free model parses back to itself. */
static void
round_trip(const struct topo_model *m)
{
	struct topo_findings f;
	struct topo_model *m2;
	char *j1 = topo_to_json(m, false), *j2;

	FZ_CHECK(j1 != NULL);
	topo_findings_init(&f);
	m2 = topo_parse(j1, strlen(j1), &f);
	FZ_CHECK(m2 != NULL);
	if (f.n != 0)
		fprintf(stderr, "canonical JSON %s: %s: %s\n", j1, f.v[0].path, f.v[0].message);
	FZ_CHECK(f.n == 0);
	j2 = topo_to_json(m2, false);
	FZ_CHECK(j2 != NULL && strcmp(j1, j2) == 0);
	free(j2);
	topo_model_free(m2);
	topo_findings_cleanup(&f);
	free(j1);
}

/* The image resolves <db>.<schema>.<table> as the model does. */
static void
same_resolution(const struct topo_model *m, const void *img, const char *db, const char *sc,
		const char *table)
{
	struct topo_resolution r;
	struct topo_img_rel ir;

	topo_resolve_table(m, db, sc, table, &r);
	topo_image_resolve_table(img, db, sc, table, &ir);
	FZ_CHECK(r.kind == ir.kind);
	if (r.kind != TOPO_REL_TABLE)
		return;
	FZ_CHECK(strcmp(r.group->uid, topo_image_group_uid(img, ir.group)) == 0);
	FZ_CHECK((r.index == NULL) == (ir.index == TOPO_IMG_NONE));
	if (r.index)
		FZ_CHECK(strcmp(r.index->name, topo_image_index_name(img, ir.index)) == 0);
}

/* Route <key> through every group with an index: the range found holds the value. */
static void
route_keys(const void *img, int64_t key)
{
	struct ks_value v = { .type = KS_TYPE_INT8, .i = key }, out;
	struct nk_error err;
	uint32_t r;

	for (uint32_t g = 0; g < topo_image_group_count(img); g++) {
		uint32_t i = topo_image_group_index(img, g);
		const struct ks_expr *e;
		bool ok;

		if (i == TOPO_IMG_NONE || !(e = topo_image_index_expr(img, i)) || e->ncolumns != 1)
			continue;
		if (ks_expr_is_column(e)) {
			ok = topo_image_route(img, g, i, &v, &r, &err);
		} else {
			ok = ks_expr_eval(e, &v, &out, &err) &&
			     topo_image_route(img, g, i, &out, &r, &err);
			if (ok)
				ks_value_cleanup(&out);
		}
		if (ok)
			FZ_CHECK(r < topo_image_group_range_count(img, g) &&
				 topo_image_range_shard(img, g, r) != NULL);
	}
}

static void
image_of(const struct topo_model *m, int64_t key)
{
	size_t size = topo_image_size(m);
	void *img;

	FZ_CHECK(size > 0);
	img = aligned_alloc(8, (size + 7) & ~(size_t)7);
	FZ_CHECK(img != NULL);
	FZ_CHECK(topo_image_build(m, 7, img, size) == (ssize_t)size);
	FZ_CHECK(topo_image_is_valid(img, size) && topo_image_revision(img) == 7);
	for (size_t d = 0; d < m->ndbs; d++) {
		const struct topo_database *db = &m->dbs[d];

		for (size_t s = 0; s < db->nschemas; s++) {
			const struct topo_schema *sc = &db->schemas[s];

			for (size_t t = 0; t < sc->ntables; t++)
				same_resolution(m, img, db->name, sc->name, sc->tables[t].name);
			same_resolution(m, img, db->name, sc->name, "not_listed");
		}
	}
	same_resolution(m, img, "postgres", "public", "t");
	route_keys(img, key);
	free(img);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *json = fz_strndup(data, size);
	struct topo_findings f;
	struct topo_model *m;
	struct nk_error err;
	int64_t key = 0;

	for (size_t i = 0; i < size && i < 8; i++)
		key = (int64_t)((uint64_t)key << 8 | data[size - 1 - i]);
	topo_findings_init(&f);
	m = topo_parse(json, size, &f);
	if (m && f.n == 0)
		round_trip(m);
	if (m)
		topo_validate(m, &vin, &f);
	topo_model_free(m);
	topo_findings_cleanup(&f);
	m = topo_check(json, size, &vin, (size & 1) != 0, NULL, &err);
	if (m) {
		image_of(m, key);
		topo_model_free(m);
	}
	free(json);
	return 0;
}
