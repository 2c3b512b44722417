/*
 * neki/catalog_image.h - the pointer-free image of the catalogs of every logical database,
 * published by the admin into a shared-memory catalog slot and read in place by workers.
 *
 * The image holds offsets only, so it means the same at any address; the readers never
 * allocate and never write. Databases, tables, columns, keys and types are referred to by
 * number (uint32_t); CAT_IMG_NONE means "none". Table numbers are global across databases;
 * column and key numbers are positions within their table. The buffer is 8-byte aligned.
 */
#ifndef NEKI_CATALOG_IMAGE_H
#define NEKI_CATALOG_IMAGE_H

#include "neki/base.h"

#include "neki/catalog.h"
#include "neki/keyspace.h"
#include "neki/shm.h"

#define CAT_IMAGE_MAGIC UINT32_C(0x49434b4e)	/* "NKCI" */
#define CAT_IMAGE_VERSION 3
#define CAT_IMG_NONE UINT32_MAX

/* ---- building (admin) ---- */

/* Bytes cat_image_build() needs for the catalogs <cats>[0..n). */
size_t cat_image_size(const struct catalog *const *cats, size_t n);

/*
 * Write the image of <cats>[0..n) (one per logical database, distinct names) as catalog
 * version <version> into <buf> (8-byte aligned, <cap> bytes). Returns the bytes written, or
 * -1 when <cap> is too small.
 */
ssize_t cat_image_build(const struct catalog *const *cats, size_t n, uint64_t version,
			void *buf, size_t cap);

/* ---- reading (workers; no allocation) ---- */

/* True when <img>/<len> is a complete catalog image of this layout version. */
bool cat_image_is_valid(const void *img, size_t len);

uint64_t cat_image_version(const void *img);
size_t cat_image_len(const void *img);

/* Databases. */
struct cat_img_db {
	const char *name;
	const char *collate;
	const char *ctype;
	uint32_t ntables;
};

uint32_t cat_image_db_count(const void *img);
uint32_t cat_image_find_db(const void *img, const char *name);
void cat_image_db(const void *img, uint32_t d, struct cat_img_db *out);

/* True when database <d> has a user-defined aggregate <name> (in any schema). */
bool cat_image_is_aggregate(const void *img, uint32_t d, const char *name);

/*
 * Authoritative OIDs (catalog.h, struct cat_oid_pair): the authoritative shard's OID of shard
 * <shard>'s type <oid> in database <d>, and the other way, shard <shard>'s OID of the type
 * whose authoritative OID is <oid>; <oid> itself when the two are the same or unknown.
 * cat_image_shard_has_oids() tells whether <shard> has any OID that differs.
 */
uint32_t cat_image_auth_oid(const void *img, uint32_t d, const char *shard, uint32_t oid);
uint32_t cat_image_shard_oid(const void *img, uint32_t d, const char *shard, uint32_t oid);
bool cat_image_shard_has_oids(const void *img, uint32_t d, const char *shard);

/* Table number of the <i>th relation (i < ntables) of database <d>. */
uint32_t cat_image_db_table(const void *img, uint32_t d, uint32_t i);

/* Relation <schema>.<name> of database <d>, or CAT_IMG_NONE. */
uint32_t cat_image_find_table(const void *img, uint32_t d, const char *schema, const char *name);

/* As cat_lookup_table(): <schema> NULL resolves <name> through <path>[0..n). */
uint32_t cat_image_lookup_table(const void *img, uint32_t d, const char *schema,
				const char *name, const char *const *path, size_t n);

struct cat_img_table {
	const char *schema;
	const char *name;
	uint32_t oid;
	enum cat_relkind kind;
	bool is_partition;
	bool rewrites_insert;		/* cat_table.rewrites_insert */
	uint32_t ncols, nkeys, nchildren;
	struct cat_seq seq;		/* sequences only */
};

void cat_image_table(const void *img, uint32_t t, struct cat_img_table *out);

/* Column number of <name> in table <t>, or CAT_IMG_NONE. */
uint32_t cat_image_find_column(const void *img, uint32_t t, const char *name);

/* Column <c> of table <t> (strings borrowed from the image). */
void cat_image_column(const void *img, uint32_t t, uint32_t c, struct cat_column *out);

/* Key <k> of table <t> (the primary key, when there is one, is key 0). */
struct cat_img_key {
	const char *name;
	bool primary;
	uint32_t ncols;
};

void cat_image_key(const void *img, uint32_t t, uint32_t k, struct cat_img_key *out);
/* Column number of the <i>th column of key <k>. */
uint32_t cat_image_key_col(const void *img, uint32_t t, uint32_t k, uint32_t i);

/* Inheritance child or partition <i> of table <t>. */
void cat_image_child(const void *img, uint32_t t, uint32_t i, struct cat_relref *out);

/* Types of database <d>. */
struct cat_img_type {
	uint32_t oid;
	const char *schema;
	const char *name;
	int16_t len;
	bool byval;
	char category;
	enum cat_typtype typtype;
	uint32_t base_oid, elem_oid;
	uint32_t nlabels;
};

/* Type number of <oid> in database <d>, or CAT_IMG_NONE. */
uint32_t cat_image_find_type(const void *img, uint32_t d, uint32_t oid);
void cat_image_type(const void *img, uint32_t ty, struct cat_img_type *out);
const char *cat_image_type_label(const void *img, uint32_t ty, uint32_t i);

/* As cat_ks_type(), on database <d> of the image. */
bool cat_image_ks_type(const void *img, uint32_t d, uint32_t oid, enum ks_type *out)
	NK_MUSTCHECK;

/*
 * Conveniences for the router's struct plan_catalog callbacks (the worker wires them to the
 * pinned image and its database number <d>).
 */

/* Declared type OID of <schema>.<table>.<column>; 0 when unknown. */
uint32_t cat_image_column_type(const void *img, uint32_t d, const char *schema,
			       const char *table, const char *column);

/* <oid> with domains followed to their base type (what routing reads values as). */
uint32_t cat_image_base_type(const void *img, uint32_t d, uint32_t oid);

/* Name of the <n>th column (1-based, dropped columns skipped) of <schema>.<table>; NULL past
 * the end or when the table is unknown. */
const char *cat_image_column_name(const void *img, uint32_t d, const char *schema,
				  const char *table, uint32_t n);

/* pg_class.relkind letter of <schema>.<table> ('r', 'p', 'v', 'm', 'S', 'i', 'f'); 0 when
 * unknown. */
char cat_image_relkind(const void *img, uint32_t d, const char *schema, const char *table);

/* ---- a worker's view: the published image pinned, one database chosen (view.c) ---- */

struct cat_view {
	const void *img;		/* borrowed from shm while pinned; NULL when none */
	uint32_t db;			/* database number in img; CAT_IMG_NONE when absent */
	uint64_t version;		/* catalog version of img (0: none) */
	struct shm_topo_ref ref;	/* the pin */
	bool pinned;
};

/*
 * Pin the published catalog image and select database <dbname> in it. Always fills <v>:
 * with no catalog published, img is NULL and db CAT_IMG_NONE (every lookup answers
 * "unknown"). Release with cat_view_release() (before the next acquire).
 */
void cat_view_acquire(struct cat_view *v, const char *dbname);
void cat_view_release(struct cat_view *v);

/*
 * struct plan_catalog callbacks over a struct cat_view <arg>: the type OID of a column
 * (domains resolved to their base type, as routing reads values), the name of column <n>
 * (1-based), the relkind letter. 0 / NULL when unknown.
 */
uint32_t cat_view_column_type(void *arg, const char *schema, const char *table,
			      const char *column);
const char *cat_view_column_name(void *arg, const char *schema, const char *table, uint32_t n);
char cat_view_relkind(void *arg, const char *schema, const char *table);

/*
 * The optional struct plan_catalog callbacks: column <n> (1-based) with its identity,
 * default and owned sequence; a sequence's CACHE (0 unknown); the inheritance children
 * that are not partitions; the <i>th relation a view or materialized view reads.
 */
bool cat_view_column(void *arg, const char *schema, const char *table, uint32_t n,
		     struct cat_column *out);
int64_t cat_view_seq_cache(void *arg, const char *schema, const char *name);
uint32_t cat_view_inh_children(void *arg, const char *schema, const char *table);
bool cat_view_view_base(void *arg, const char *schema, const char *view, uint32_t i,
			const char **base_schema, const char **base_name);
/* Whether the database has a user-defined aggregate <name> (plan_catalog 212). */
bool cat_view_is_aggregate(void *arg, const char *name);
/* plan_catalog.pk_column (neki/plan.h) over the view. */
int cat_view_pk_column(void *arg, const char *schema, const char *table, uint32_t i,
		       const char **col);
/* plan_catalog.rewrites_insert (neki/plan.h) over the view. */
bool cat_view_rewrites_insert(void *arg, const char *schema, const char *table);
/* The <i>th relation of the database; schema and name of a type (plan_catalog 333). */
bool cat_view_table_at(void *arg, uint32_t i, const char **schema, const char **name);
bool cat_view_type_name(void *arg, uint32_t oid, const char **schema, const char **name);

/*
 * Authoritative OIDs in a view: shard <shard>'s type <oid> as the authoritative shard's OID
 * (<to_auth>), or the authoritative <oid> as <shard>'s; <oid> when no pair differs or no
 * catalog is pinned. cat_view_shard_has_oids(): whether <shard> has any OID that differs.
 */
uint32_t cat_view_type_oid(const struct cat_view *v, const char *shard, uint32_t oid,
			   bool to_auth);
bool cat_view_shard_has_oids(const struct cat_view *v, const char *shard);

#endif /* NEKI_CATALOG_IMAGE_H */
