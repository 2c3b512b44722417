/*
 * neki/topology_image.h - the pointer-free image of one validated topology revision.
 *
 * The admin process builds it (topo_image_build) straight into a shared-memory slot; every
 * worker reads it in place through the accessors below. The image holds no pointers, only
 * offsets from its start, so it means the same at any address; the accessors never
 * allocate and never write. Groups, ranges and indexes are referred to by number
 * (uint32_t); TOPO_IMG_NONE means "none". The buffer must be 8-byte aligned.
 */
#ifndef NEKI_TOPOLOGY_IMAGE_H
#define NEKI_TOPOLOGY_IMAGE_H

#include "neki/base.h"

#include "neki/error.h"
#include "neki/keyspace.h"
#include "neki/topology.h"

#define TOPO_IMAGE_MAGIC UINT32_C(0x49544b4e)	/* "NKTI" */
#define TOPO_IMAGE_VERSION 1
#define TOPO_IMG_NONE UINT32_MAX

/* ---- building (admin) ---- */

/* Bytes topo_image_build() needs for <m>; 0 on no memory. */
size_t topo_image_size(const struct topo_model *m);

/*
 * Write the image of the validated model <m> as revision <revision> (with its canonical
 * JSON text) into <buf> (8-byte aligned, <cap> bytes). Returns the bytes written, or -1
 * when <cap> is too small or memory runs out.
 */
ssize_t topo_image_build(const struct topo_model *m, uint64_t revision, void *buf, size_t cap);

/* ---- reading (workers; no allocation) ---- */

/* True when <img>/<len> is a complete image of this layout version. */
bool topo_image_is_valid(const void *img, size_t len);

uint64_t topo_image_revision(const void *img);
size_t topo_image_len(const void *img);

/* The canonical JSON text (NUL-terminated) and its length. */
const char *topo_image_json(const void *img, size_t *len);

/* Result of resolving a table in the image (spec 2.3). */
struct topo_img_rel {
	enum topo_rel_kind kind;
	uint32_t group;		/* TABLE: group number; NONE otherwise */
	uint32_t index;		/* TABLE: index number; NONE: unsharded */
	uint32_t list;		/* REFERENCE: list of group numbers; TABLE: list of GSI numbers
				 * of its secondary_indexes (0: empty list) */
	bool listed;		/* the table has an entry in the topology */
};

/* Resolve <db>.<schema>.<table>; always fills <out>. */
void topo_image_resolve_table(const void *img, const char *db, const char *schema,
			      const char *table, struct topo_img_rel *out);

/* True when the topology's `databases` names <db> (a sharded logical database). */
bool topo_image_has_database(const void *img, const char *db);

/* The default shard group of database <db>: its own default_shard_group, else the
 * topology's (the authoritative group); NONE when neither is set. */
uint32_t topo_image_database_group(const void *img, const char *db);

/* Group of sequence <db>.<schema>.<seq> owned by <owners> (spec 2.3); NONE if none. */
uint32_t topo_image_resolve_sequence(const void *img, const char *db, const char *schema,
				     const char *seq, const struct topo_seq_owner *owners,
				     size_t nowners);

/* Length and items of a list (see struct topo_img_rel). */
uint32_t topo_image_list_len(const void *img, uint32_t list);
uint32_t topo_image_list_at(const void *img, uint32_t list, uint32_t i);

/* Groups. */
uint32_t topo_image_group_count(const void *img);
uint32_t topo_image_find_group(const void *img, const char *uid);
uint32_t topo_image_authoritative(const void *img);
const char *topo_image_group_uid(const void *img, uint32_t g);
uint32_t topo_image_group_index(const void *img, uint32_t g);	/* default index or NONE */
uint32_t topo_image_group_range_count(const void *img, uint32_t g);
uint32_t topo_image_group_shard_count(const void *img, uint32_t g);	/* distinct shards */
const char *topo_image_group_shard(const void *img, uint32_t g, uint32_t k);

/* Key ranges of group <g> (r < range count). */
uint32_t topo_image_find_range(const void *img, uint32_t g, uint64_t value);
const char *topo_image_range_shard(const void *img, uint32_t g, uint32_t r);
uint64_t topo_image_range_start(const void *img, uint32_t g, uint32_t r);
bool topo_image_range_end(const void *img, uint32_t g, uint32_t r, uint64_t *end);

/* Shard indexes. */
uint32_t topo_image_index_count(const void *img);
uint32_t topo_image_find_index(const void *img, const char *name);
const char *topo_image_index_name(const void *img, uint32_t i);
enum ks_index_type topo_image_index_type(const void *img, uint32_t i);
int64_t topo_image_index_modulus(const void *img, uint32_t i);
const char *topo_image_index_column(const void *img, uint32_t i);	/* columns[0] text */
const struct ks_expr *topo_image_index_expr(const void *img, uint32_t i);

/*
 * Route key <key> (already the value of index <i>'s expression) in group <g>: the range
 * number holding its routing value. False with <err> when the index cannot route the type.
 */
bool topo_image_route(const void *img, uint32_t g, uint32_t i, const struct ks_value *key,
		      uint32_t *range, struct nk_error *err) NK_MUSTCHECK;

/* Global secondary indexes (database-level, numbered across the image). */
struct topo_img_gsi {
	const char *db, *name, *schema, *table, *owner_table;	/* schema NULL when omitted */
	uint32_t columns, owner_sk_columns, owner_pk_columns;	/* lists of strings */
	bool unique, ignore_null, enabled;
	bool write_only;	/* enabled, maintained, not read through (__neki.gsi_build) */
};

uint32_t topo_image_gsi_count(const void *img);
void topo_image_gsi(const void *img, uint32_t n, struct topo_img_gsi *out);

/* String item <i> of a list of strings. */
const char *topo_image_list_str(const void *img, uint32_t list, uint32_t i);

#endif /* NEKI_TOPOLOGY_IMAGE_H */
