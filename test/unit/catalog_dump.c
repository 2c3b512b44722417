/*
 * catalog_dump.c - test driver for the catalog loader against a real server
 * (test/admin/test_catalog.py).
 *
 *   catalog_dump --sql        print cat_load_sql()
 *   catalog_dump DBNAME       read the query's rows from stdin (fields separated by 0x1f,
 *                             one row per line, "\N" for NULL), build the catalog, build its
 *                             shared-memory image and print what the image readers see, one
 *                             fact per line (db, table, col, key, child, seq, type)
 * Exit status 1 (message on stderr) when the rows cannot be built into a catalog.
 */
#include "neki/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "neki/catalog.h"
#include "neki/catalog_image.h"

struct rowset {
	char **fields;		/* owned: nrows * CAT_LOAD_COLS, NULL for SQL NULL */
	size_t nrows;
};

static size_t
rs_n(const void *src)
{
	return ((const struct rowset *)src)->nrows;
}

static const char *
rs_get(const void *src, size_t row, size_t col)
{
	return ((const struct rowset *)src)->fields[row * CAT_LOAD_COLS + col];
}

/* Split one line into CAT_LOAD_COLS fields appended to <rs>. */
static void
add_line(struct rowset *rs, char *line)
{
	char **f;

	rs->fields = realloc(rs->fields, (rs->nrows + 1) * CAT_LOAD_COLS * sizeof(char *));
	if (!rs->fields)
		exit(2);
	f = rs->fields + rs->nrows * CAT_LOAD_COLS;
	for (size_t c = 0; c < CAT_LOAD_COLS; c++) {
		char *sep = line ? strchr(line, '\x1f') : NULL;

		if (sep)
			*sep = '\0';
		f[c] = line && strcmp(line, "\\N") != 0 ? strdup(line) : NULL;
		line = sep ? sep + 1 : NULL;
	}
	rs->nrows++;
}

static const char *
type_name(const void *img, uint32_t d, uint32_t oid)
{
	uint32_t ty = cat_image_find_type(img, d, oid);
	struct cat_img_type t;

	if (ty == CAT_IMG_NONE)
		return "?";
	cat_image_type(img, ty, &t);
	return t.name;
}

static void
dump_columns(const void *img, uint32_t d, uint32_t t, const struct cat_img_table *it)
{
	for (uint32_t c = 0; c < it->ncols; c++) {
		struct cat_column col;
		enum ks_type k;
		bool routable;

		cat_image_column(img, t, c, &col);
		routable = cat_image_ks_type(img, d, col.type_oid, &k);
		printf("col %s.%s %d %s %s typmod=%d notnull=%d ident=%d default=%d gen=%d "
		       "seq=%s%s%s ks=%s\n", it->schema, it->name, col.attnum, col.name,
		       type_name(img, d, col.type_oid), col.typmod, col.not_null, col.identity,
		       col.has_default, col.generated, col.seq.schema ? col.seq.schema : "-",
		       col.seq.schema ? "." : "", col.seq.name ? col.seq.name : "",
		       routable ? ks_type_str(k) : "-");
	}
}

static void
dump_keys_children(const void *img, uint32_t t, const struct cat_img_table *it)
{
	for (uint32_t k = 0; k < it->nkeys; k++) {
		struct cat_img_key key;

		cat_image_key(img, t, k, &key);
		printf("key %s.%s %s %c ", it->schema, it->name, key.name, key.primary ? 'p' : 'u');
		for (uint32_t i = 0; i < key.ncols; i++) {
			struct cat_column col;

			cat_image_column(img, t, cat_image_key_col(img, t, k, i), &col);
			printf("%s%s", i ? "," : "", col.name);
		}
		printf("\n");
	}
	for (uint32_t i = 0; i < it->nchildren; i++) {
		struct cat_relref ch;

		cat_image_child(img, t, i, &ch);
		printf("child %s.%s %s.%s\n", it->schema, it->name, ch.schema, ch.name);
	}
	if (it->kind == CAT_REL_SEQUENCE)
		printf("seq %s.%s cache=%lld type=%u\n", it->schema, it->name,
		       (long long)it->seq.cache, it->seq.type_oid);
}

static void
dump_types(const void *img, uint32_t d, const struct catalog *c)
{
	for (size_t i = 0; i < c->ntypes; i++) {
		uint32_t ty = cat_image_find_type(img, d, c->types[i].oid);
		struct cat_img_type t;

		cat_image_type(img, ty, &t);
		printf("type %s.%s %d base=%s elem=%s labels=", t.schema, t.name, t.typtype,
		       t.base_oid ? type_name(img, d, t.base_oid) : "-",
		       t.elem_oid ? type_name(img, d, t.elem_oid) : "-");
		for (uint32_t j = 0; j < t.nlabels; j++)
			printf("%s%s", j ? "," : "", cat_image_type_label(img, ty, j));
		printf("\n");
	}
}

static void
dump(const void *img, const struct catalog *c)
{
	uint32_t d = cat_image_find_db(img, c->dbname);
	struct cat_img_db db;

	cat_image_db(img, d, &db);
	printf("db %s %s %s\n", db.name, db.collate, db.ctype);
	for (size_t i = 0; i < c->ntables; i++) {
		uint32_t t = cat_image_find_table(img, d, c->tables[i].schema, c->tables[i].name);
		struct cat_img_table it;

		cat_image_table(img, t, &it);
		printf("table %s.%s %s partition=%d\n", it.schema, it.name,
		       cat_relkind_str(it.kind), it.is_partition);
		dump_columns(img, d, t, &it);
		dump_keys_children(img, t, &it);
	}
	dump_types(img, d, c);
}

int
main(int argc, char **argv)
{
	struct rowset rs = { NULL, 0 };
	struct cat_rows rows = { rs_n, rs_get, &rs };
	struct nk_error err;
	struct catalog *c;
	char line[65536];
	void *img;
	size_t size;

	if (argc == 2 && strcmp(argv[1], "--sql") == 0) {
		puts(cat_load_sql());
		return 0;
	}
	if (argc != 2)
		return 2;
	while (fgets(line, sizeof(line), stdin)) {
		line[strcspn(line, "\n")] = '\0';
		add_line(&rs, line);
	}
	c = cat_build(argv[1], &rows, &err);
	if (!c) {
		fprintf(stderr, "%s\n", err.message);
		return 1;
	}
	size = cat_image_size((const struct catalog *const *)&c, 1);
	img = aligned_alloc(8, (size + 7) & ~(size_t)7);
	if (!img || cat_image_build((const struct catalog *const *)&c, 1, 1, img, size) < 0 ||
	    !cat_image_is_valid(img, size))
		return 2;
	dump(img, c);
	return 0;
}
