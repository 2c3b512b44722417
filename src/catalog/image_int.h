/*
 * image_int.h - the byte layout of a catalog image, shared by the builder (image.c) and
 * the readers (image_read.c). References are offsets from the image start (strings; 0 means
 * NULL, the string area starts with a NUL) or numbers into one of the arrays.
 */
#ifndef NEKI_CATALOG_IMAGE_INT_H
#define NEKI_CATALOG_IMAGE_INT_H

#include "neki/base.h"

struct cimg_section {
	uint32_t off;		/* byte offset from the image start */
	uint32_t n;		/* element count (bytes for strings) */
};

struct cimg_hdr {
	uint32_t magic;		/* CAT_IMAGE_MAGIC */
	uint32_t version;	/* CAT_IMAGE_VERSION */
	uint64_t cat_version;	/* the catalog version the admin published */
	uint64_t total_len;	/* bytes of the whole image */
	struct cimg_section dbs;	/* struct cimg_db[] sorted by name */
	struct cimg_section tables;	/* struct cimg_table[]: by db, then (schema, name) */
	struct cimg_section cols;	/* struct cimg_col[]: by table, attnum order */
	struct cimg_section keys;	/* struct cimg_key[]: by table, the PK first */
	struct cimg_section types;	/* struct cimg_type[]: by db, then oid */
	struct cimg_section lists;	/* uint32_t[]: each list is a count and its items */
	struct cimg_section strings;	/* NUL-terminated strings */
};

struct cimg_db {
	uint32_t name, collate, ctype;	/* strings */
	uint32_t first_table, ntables;
	uint32_t first_type, ntypes;
	uint32_t aggs;			/* list of strings: schema, name, schema, name, ... */
	uint32_t oidmap;		/* list of triples: shard (string), its OID, the
					 * authoritative OID (struct cat_oid_pair) */
	uint32_t pad;
};

struct cimg_table {
	int64_t seq_start, seq_increment, seq_min, seq_max, seq_cache;
	uint32_t seq_type_oid;
	uint32_t seq_cycle;
	uint32_t schema, name;		/* strings */
	uint32_t oid;
	uint32_t kind;			/* enum cat_relkind */
	uint32_t is_partition;
	uint32_t rewrites_insert;
	uint32_t first_col, ncols;
	uint32_t first_key, nkeys;
	uint32_t children;		/* list of strings: schema, name, schema, name, ... */
};

struct cimg_col {
	uint32_t name;			/* string */
	uint32_t type_oid;
	int32_t typmod;
	int32_t attnum;
	uint32_t flags;			/* CIMG_COL_* */
	uint32_t identity;		/* enum cat_identity */
	uint32_t seq_schema, seq_name;	/* strings; 0 when no owned sequence */
};

#define CIMG_COL_NOT_NULL 1u
#define CIMG_COL_HAS_DEFAULT 2u
#define CIMG_COL_GENERATED 4u

struct cimg_key {
	uint32_t name;			/* string */
	uint32_t primary;
	uint32_t cols;			/* list of column numbers */
	uint32_t pad;
};

struct cimg_type {
	uint32_t oid;
	uint32_t schema, name;		/* strings */
	int32_t len;
	uint32_t byval;
	uint32_t category;		/* a letter */
	uint32_t typtype;		/* enum cat_typtype */
	uint32_t base_oid, elem_oid;
	uint32_t labels;		/* list of strings */
};

#endif /* NEKI_CATALOG_IMAGE_INT_H */
