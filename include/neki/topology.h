/*
 * neki/topology.h - the data topology: typed model of the topology JSON (spec section 2),
 * its validation (V1-V18 plus DESIGN.md section 4), resolution (spec 2.3), the canonical JSON
 * writer and the pointer-free image workers read in place from shared memory.
 *
 * Life of a revision (admin process): topo_check() parses, validates and compares against
 * the previous revision; topo_to_json() gives the canonical text; topo_image_build() writes
 * the image into a shm slot. Workers only use the topo_image_*() readers, which never
 * allocate. Everything here is pure: no sockets, no shared state.
 */
#ifndef NEKI_TOPOLOGY_H
#define NEKI_TOPOLOGY_H

#include "neki/base.h"

#include <stdarg.h>

#include "neki/error.h"
#include "neki/keyspace.h"

#define TOPO_PATH_MAX 256
#define TOPO_RULE_MAX 48

/* A list of strings, owned by the model. */
struct topo_strlist {
	const char **v;
	size_t n;
};

struct topo_key_range {
	const char *shard_uid;		/* NULL only when the JSON lacked it (a finding) */
	const char *start_text;		/* bound as written; NULL when omitted */
	const char *end_text;		/* bound as written; NULL when omitted */
	uint64_t start;			/* routing value, inclusive; 0 when omitted */
	uint64_t end;			/* routing value, exclusive; meaningless when !has_end */
	bool has_end;			/* false: the range runs to 2^64 */
	bool bounds_ok;			/* both bounds parsed for the group's index type */
};

struct topo_shard_group {
	const char *uid;
	const char *default_shard_index;	/* NULL: unsharded group */
	struct topo_key_range *ranges;
	size_t nranges;
	enum ks_index_type bound_type;	/* index type the bounds were read for (range: decimal) */
};

struct topo_shard_index {
	const char *name;
	const char *type_text;		/* as written; NULL when missing (a finding) */
	enum ks_index_type type;	/* valid when type_ok */
	bool type_ok;
	struct topo_strlist columns;
	bool has_params;		/* "index_params" present */
	bool has_modulus;
	int64_t modulus;		/* index_params.modulus; 0 when absent or invalid */
	struct ks_expr *expr;		/* owned: compiled columns[0]; NULL when invalid */
};

struct topo_secondary_index {
	const char *name;
	struct topo_strlist columns;
};

struct topo_table {
	const char *name;
	const char *shard_group;	/* NULL: inherit the schema/database/topology default */
	const char *shard_index;	/* NULL: the group's default_shard_index */
	struct topo_secondary_index *sis;
	size_t nsis;
};

struct topo_ref_table {
	const char *name;
	struct topo_strlist shard_groups;
	bool has_groups;		/* false: the effective default group */
};

struct topo_sequence {
	const char *name;
	const char *shard_group;	/* NULL: owner group or authoritative (spec 2.3) */
};

struct topo_schema {
	const char *name;
	const char *default_shard_group;
	struct topo_table *tables;	/* sorted by name */
	size_t ntables;
	struct topo_ref_table *refs;	/* sorted by name */
	size_t nrefs;
	struct topo_sequence *seqs;	/* sorted by name */
	size_t nseqs;
};

struct topo_gsi {
	const char *name;
	const char *schema;		/* NULL: the schema holding <table>, if unambiguous */
	const char *table;		/* the lookup table */
	const char *owner_table;
	struct topo_strlist columns;
	struct topo_strlist owner_sk_columns;
	struct topo_strlist owner_pk_columns;
	bool has_owner_sk, has_owner_pk;
	bool unique, ignore_null, enabled;
	bool write_only;		/* enabled: maintained, not read through (a build) */
};

struct topo_database {
	const char *name;
	const char *default_shard_group;
	struct topo_schema *schemas;	/* sorted by name */
	size_t nschemas;
	struct topo_gsi *gsis;		/* sorted by name */
	size_t ngsis;
};

struct rarena;

/* A parsed topology. Everything it points to lives in its arena (topo_model_free). */
struct topo_model {
	struct topo_database *dbs;	/* sorted by name */
	size_t ndbs;
	struct topo_shard_group *groups;	/* JSON order (paths use the index) */
	size_t ngroups;
	struct topo_shard_index *indexes;	/* sorted by name */
	size_t nindexes;
	const char *authoritative_shard_group;
	const char *default_shard_group;
	struct rarena *arena;		/* owned */
};

/* One validation finding. */
struct topo_finding {
	char path[TOPO_PATH_MAX];	/* JSON path, e.g. shard_groups[1].key_ranges[2].start */
	char rule[TOPO_RULE_MAX];	/* rule slug, e.g. key-ranges/contiguous (doc/topology.md) */
	char message[NK_ERR_MSG_MAX];	/* Postgres-style message, without the path */
	char sqlstate[6];		/* 22023 unless the rule says otherwise */
	int code;			/* NK013 catalog code, 0 otherwise */
	bool forceable;			/* the "force" option may apply despite it */
	bool preexisting;		/* the previous revision had it too (never blocks) */
};

struct topo_findings {
	struct topo_finding *v;		/* owned */
	size_t n, cap;
	bool oom;			/* a finding could not be recorded */
};

/* What validation needs besides the document. */
struct topo_validate_input {
	const char *const *shard_uids;	/* shards declared in the ini's [shards] */
	size_t nshards;
	const struct topo_model *previous;	/* the current revision; NULL for the first */
};

void topo_findings_init(struct topo_findings *f);
void topo_findings_cleanup(struct topo_findings *f);

/* Append a finding (printf-style message). Used by the validator and by the admin (V18). */
void topo_findings_add(struct topo_findings *f, const char *path, const char *rule,
		       const char *sqlstate, bool forceable, const char *fmt, ...) NK_PRINTF(6, 7);

/* Same with a va_list. */
void topo_findings_addv(struct topo_findings *f, const char *path, const char *rule,
			const char *sqlstate, bool forceable, const char *fmt, va_list ap)
	NK_PRINTF(6, 0);

/* Mark each finding of <now> that <before> also has (same path and rule) as preexisting. */
void topo_findings_mark_preexisting(struct topo_findings *now, const struct topo_findings *before);

/* First finding that blocks an apply (not preexisting; with <force>, not forceable). */
const struct topo_finding *topo_findings_first_blocking(const struct topo_findings *f, bool force);

/* Fill <err> from <fi>: message "invalid data topology: <path>: <message>" (V9/V8/NK013
 * keep their own texts), detail naming the rule, where = path. Returns false. */
bool topo_finding_to_error(const struct topo_finding *fi, struct nk_error *err);

/*
 * Parse <json>/<len> into a new model. Structural problems (JSON types, unknown or duplicate
 * keys, missing keys, bound syntax, shard-key expressions) are added to <f> and the model is
 * still returned. NULL only on invalid JSON or no memory (also a finding).
 */
struct topo_model *topo_parse(const char *json, size_t len, struct topo_findings *f);

/* Free <m> and everything it owns (NULL is fine). */
void topo_model_free(struct topo_model *m);

/* Add every semantic finding of <m> (V1-V12, key ranges, references, GSIs) to <f>. */
void topo_validate(const struct topo_model *m, const struct topo_validate_input *in,
		   struct topo_findings *f);

/*
 * What set_data_topology does before storing: parse, validate, mark the findings the
 * previous revision already had, and refuse if one blocks (see topo_findings_first_blocking).
 * On success returns the model (caller frees); otherwise NULL with <err> set from the first
 * blocking finding. <f> (may be NULL) receives every finding.
 */
struct topo_model *topo_check(const char *json, size_t len, const struct topo_validate_input *in,
			      bool force, struct topo_findings *f, struct nk_error *err);

/* Canonical JSON text of <m> (stable key order, maps sorted); malloc'd, NULL on no memory. */
char *topo_to_json(const struct topo_model *m, bool pretty);

/* ---- resolution (spec 2.3) on the model ---- */

enum topo_rel_kind {
	TOPO_REL_UNROUTABLE = 0,	/* nothing resolves: the table is not routable */
	TOPO_REL_TABLE = 1,		/* an ordinary (sharded or unsharded) table */
	TOPO_REL_REFERENCE = 2,		/* a reference table: copies on every shard of groups */
};

struct topo_resolution {
	enum topo_rel_kind kind;
	const struct topo_shard_group *group;	/* TABLE: its group */
	const struct topo_shard_index *index;	/* TABLE: its index; NULL = unsharded */
	const struct topo_table *table;		/* the tables entry; NULL when not listed */
	const struct topo_ref_table *ref;	/* REFERENCE: the entry */
	const char *group_from;			/* "table", "schema", "database", "topology" */
};

/* A column owning a sequence: the table it belongs to. */
struct topo_seq_owner {
	const char *schema;
	const char *table;
};

const struct topo_shard_group *topo_find_group(const struct topo_model *m, const char *uid);
const struct topo_shard_index *topo_find_index(const struct topo_model *m, const char *name);
const struct topo_database *topo_find_database(const struct topo_model *m, const char *name);
const struct topo_schema *topo_find_schema(const struct topo_database *d, const char *name);
const struct topo_table *topo_find_table(const struct topo_schema *s, const char *name);

/* The effective default group uid for <db>.<schema> (schema, database, topology), or NULL. */
const char *topo_default_group(const struct topo_model *m, const char *db, const char *schema,
				const char **from);

/* Resolve <db>.<schema>.<table>; always fills <out> (kind UNROUTABLE when nothing resolves). */
void topo_resolve_table(const struct topo_model *m, const char *db, const char *schema,
			const char *table, struct topo_resolution *out);

/* Group of sequence <db>.<schema>.<seq> owned by <owners>[0..n) (spec 2.3 steps 1-3). */
const struct topo_shard_group *topo_resolve_sequence(const struct topo_model *m, const char *db,
						     const char *schema, const char *seq,
						     const struct topo_seq_owner *owners,
						     size_t nowners);

/* Number of distinct shards of <g>. */
size_t topo_group_shard_count(const struct topo_shard_group *g);

/* Index of the range of <g> holding routing value <v> (validated model). */
size_t topo_group_find_range(const struct topo_shard_group *g, uint64_t v);

#endif /* NEKI_TOPOLOGY_H */
