/*
 * image_int.h - the byte layout of a topology image, shared by the builder (image.c) and
 * the readers (image_read.c). Every reference is an offset from the image start or a
 * number into one of its arrays; string offsets of 0 mean NULL (the pool starts with NUL).
 */
#ifndef NEKI_TOPOLOGY_IMAGE_INT_H
#define NEKI_TOPOLOGY_IMAGE_INT_H

#include "neki/base.h"

#include "neki/keyspace.h"

struct img_section {
	uint32_t off;		/* byte offset from the image start */
	uint32_t n;		/* element count (bytes for strings and json) */
};

struct img_hdr {
	uint32_t magic;		/* TOPO_IMAGE_MAGIC */
	uint32_t version;	/* TOPO_IMAGE_VERSION */
	uint64_t revision;
	uint64_t total_len;	/* bytes of the whole image */
	struct img_section json;	/* canonical JSON, NUL-terminated (n excludes the NUL) */
	struct img_section groups;	/* struct img_group[] */
	struct img_section ranges;	/* struct img_range[], grouped by group, sorted */
	struct img_section starts;	/* uint64_t[] parallel to ranges (binary search) */
	struct img_section indexes;	/* struct img_index[] sorted by name */
	struct img_section rels;	/* struct img_rel[] sorted by (db, schema, name, kind) */
	struct img_section schemas;	/* struct img_schema[] sorted by (db, schema) */
	struct img_section dbs;		/* struct img_db[] sorted by name */
	struct img_section gsis;	/* struct img_gsi[] by database, then name */
	struct img_section lists;	/* uint32_t[]: each list is a count and its items */
	struct img_section strings;	/* NUL-terminated strings */
	uint32_t authoritative;		/* group number */
	uint32_t default_group;		/* topology default group number or NONE */
};

struct img_group {
	uint32_t uid;		/* string */
	uint32_t index;		/* default index number or NONE */
	uint32_t first_range;	/* into ranges/starts */
	uint32_t nranges;
	uint32_t shards;	/* list of distinct shard uid strings */
	uint32_t pad;
};

struct img_range {
	uint64_t start;		/* inclusive */
	uint64_t end;		/* exclusive; meaningless unless has_end */
	uint32_t shard_uid;	/* string */
	uint32_t has_end;
};

struct img_index {
	struct ks_expr expr;	/* compiled columns[0] (nnodes 0: none) */
	int64_t modulus;
	uint32_t name;		/* string */
	uint32_t type;		/* enum ks_index_type */
	uint32_t column;	/* string: columns[0] as written */
	uint32_t pad;
};

enum img_rel_kind {
	IMG_REL_TABLE = 0,
	IMG_REL_REFERENCE = 1,
	IMG_REL_SEQUENCE = 2,
};

struct img_rel {
	uint32_t db, schema, name;	/* strings */
	uint32_t kind;			/* enum img_rel_kind */
	uint32_t group;			/* explicit shard_group number or NONE */
	uint32_t index;			/* table shard_index override number or NONE */
	uint32_t list;			/* reference: groups; table: GSI numbers */
	uint32_t pad;
};

struct img_schema {
	uint32_t db, schema;		/* strings */
	uint32_t default_group;		/* NONE when unset or unknown */
};

struct img_db {
	uint32_t name;			/* string */
	uint32_t default_group;		/* NONE when unset or unknown */
};

struct img_gsi {
	uint32_t db, name, schema, table, owner_table;	/* strings */
	uint32_t columns, owner_sk, owner_pk;		/* lists of strings */
	uint32_t flags;					/* IMG_GSI_* */
};

#define IMG_GSI_UNIQUE 1u
#define IMG_GSI_IGNORE_NULL 2u
#define IMG_GSI_ENABLED 4u
#define IMG_GSI_WRITE_ONLY 8u

#endif /* NEKI_TOPOLOGY_IMAGE_INT_H */
