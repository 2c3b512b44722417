/*
 * neki/keyspace.h - routing values: typed shard-key values, their canonical bytes, the
 * xxhash / modulo / range routing functions and key-range bounds (DESIGN.md section 4.1).
 *
 * A shard-key value arrives as Postgres text (a literal or a text-format parameter) or as
 * Postgres binary (a binary-format parameter). ks_value_from_text() and
 * ks_value_from_binary() turn either into one struct ks_value; the same value always yields
 * the same routing value whatever its form. Every function here is pure: no sockets, no
 * shared state. The rules below can never change once data has been written with them.
 */
#ifndef NEKI_KEYSPACE_H
#define NEKI_KEYSPACE_H

#include "neki/base.h"

#include "neki/error.h"

/* The shard-index types of the topology JSON ("type"). */
enum ks_index_type {
	KS_INDEX_XXHASH = 0,
	KS_INDEX_MODULO = 1,
	KS_INDEX_RANGE = 2,
};

/* Postgres types that have a routing rule (spec section 2.2). */
enum ks_type {
	KS_TYPE_INT2 = 0,
	KS_TYPE_INT4,
	KS_TYPE_INT8,
	KS_TYPE_TEXT,
	KS_TYPE_VARCHAR,
	KS_TYPE_BPCHAR,
	KS_TYPE_ENUM,		/* any enum type: hashed by label */
	KS_TYPE_BYTEA,
	KS_TYPE_FLOAT4,
	KS_TYPE_FLOAT8,
	KS_TYPE_NUMERIC,
	KS_TYPE_DATE,
	KS_TYPE_TIMESTAMP,
	KS_TYPE_TIMESTAMPTZ,
	KS_TYPE_UUID,
	KS_TYPE_COUNT
};

/*
 * A shard-key value in canonical form. Which fields are used depends on <type>:
 * integers: i; text-like, bytea and numeric (canonical decimal text): bytes/len;
 * float4/float8: f (float4 widened to double); date: i (days since 2000-01-01);
 * timestamp/timestamptz: i (microseconds since 2000-01-01 00:00:00 UTC); uuid: uuid.
 */
struct ks_value {
	enum ks_type type;
	int64_t i;		/* integer value, days or microseconds */
	double f;		/* float value */
	uint8_t uuid[16];	/* uuid bytes */
	const char *bytes;	/* borrowed from the input, or points into owned */
	size_t len;		/* length of bytes */
	char *owned;		/* heap buffer owned by the value; freed by ks_value_cleanup */
};

/* Parsing context for text input that depends on the session. */
struct ks_text_ctx {
	const char *tz_name;	/* session TimeZone as a tzdata name ("Europe/Berlin"), for
				 * timestamptz text without a zone; NULL: use tz_offset_secs */
	int32_t tz_offset_secs;	/* fixed session offset, seconds east of UTC (0 = UTC) */
};

/* Postgres type name ("int4", "integer", "character varying", ...) to enum; false if none. */
bool ks_type_from_name(const char *name, enum ks_type *out) NK_MUSTCHECK;

/* Built-in type OID (21, 23, 20, 25, ...) to enum; false if the OID has no routing rule. */
bool ks_type_from_oid(uint32_t oid, enum ks_type *out) NK_MUSTCHECK;

/* Canonical name of <type> ("int4", "text", ...). */
const char *ks_type_str(enum ks_type type);

/* True for int2, int4 and int8. */
bool ks_type_is_integer(enum ks_type type);

/* True for text, varchar, bpchar and enum. */
bool ks_type_is_text(enum ks_type type);

/* "xxhash", "modulo", "range" to enum; false if unknown. */
bool ks_index_type_from_str(const char *s, enum ks_index_type *out) NK_MUSTCHECK;
const char *ks_index_type_str(enum ks_index_type t);

/*
 * Parse the Postgres text form <s>/<len> of a value of <type> into <out>. Text-like values
 * borrow <s>; others may allocate out->owned. <ctx> may be NULL (UTC). On a malformed value
 * fills <err> (22P02, 22003 or 22008 as Postgres would) and returns false; <out> then owns
 * nothing.
 */
bool ks_value_from_text(enum ks_type type, const char *s, size_t len,
			const struct ks_text_ctx *ctx, struct ks_value *out,
			struct nk_error *err) NK_MUSTCHECK;

/* Same for the Postgres binary send format <p>/<len> of <type>. */
bool ks_value_from_binary(enum ks_type type, const uint8_t *p, size_t len,
			  struct ks_value *out, struct nk_error *err) NK_MUSTCHECK;

/* Make <v> a text value holding a copy of <s>/<len> (used by the expression evaluator). */
bool ks_value_set_text(struct ks_value *v, enum ks_type type, const char *s, size_t len)
	NK_MUSTCHECK;

/* Free what <v> owns; <v> stays a valid, empty value. */
void ks_value_cleanup(struct ks_value *v);

/* The canonical bytes of <v> that xxhash hashes (DESIGN.md 4.1) into <buf>; returns the
 * length and sets *<data> to the bytes (either <buf> or v->bytes). <buf> holds >= 16 bytes. */
size_t ks_canonical_bytes(const struct ks_value *v, uint8_t buf[16], const uint8_t **data);

/* XXH3_64bits (seed 0) of the canonical bytes of <v>. */
uint64_t ks_xxhash(const struct ks_value *v);

/*
 * The routing value of <v> for an index of type <itype> (<modulus> only for modulo).
 * modulo and range accept integers only: another type fills <err> (42804) and returns false.
 */
bool ks_routing_value(enum ks_index_type itype, int64_t modulus, const struct ks_value *v,
		      uint64_t *out, struct nk_error *err) NK_MUSTCHECK;

/* modulo routing value of integer <v>: floor(((v mod m) made non-negative) * 2^64 / m). */
uint64_t ks_modulo_value(int64_t v, int64_t modulus);

/* range routing value of integer <v>: v XOR 2^63 (order-preserving). */
uint64_t ks_range_value(int64_t v);

/*
 * Parse a key-range bound. Hex: 1-16 hex digits, the high-order digits of the routing value
 * ("4" = "40" = 0x4000000000000000). Decimal (groups of type range): a signed 64-bit integer,
 * mapped with ks_range_value(). Return false on bad syntax.
 */
bool ks_bound_parse_hex(const char *s, uint64_t *out) NK_MUSTCHECK;
bool ks_bound_parse_decimal(const char *s, uint64_t *out) NK_MUSTCHECK;

/*
 * Index of the key range holding <value>, given the sorted, contiguous, complete ranges'
 * inclusive starts <starts>[0..n) (starts[0] == 0). Binary search; n must be >= 1.
 */
size_t ks_range_find(const uint64_t *starts, size_t n, uint64_t value);

/* ---- shard-key expressions ---- */

#define KS_EXPR_MAX_NODES 32
#define KS_EXPR_MAX_COLUMNS 4
#define KS_NAME_MAX 64		/* Postgres NAMEDATALEN */

/* Operations of a compiled shard-key expression. */
enum ks_expr_op {
	KS_OP_COLUMN = 0,	/* base column number ival */
	KS_OP_CONST_INT,	/* integer constant ival (int4, or int8 when it does not fit) */
	KS_OP_LOWER,		/* lower(a) */
	KS_OP_UPPER,		/* upper(a) */
	KS_OP_LEFT,		/* left(a, b): b an integer constant */
	KS_OP_ADD,		/* a + b, integers */
	KS_OP_SUB,		/* a - b */
	KS_OP_MUL,		/* a * b */
	KS_OP_DIV,		/* a / b, truncating */
	KS_OP_CAST_INT2,	/* a::int2 */
	KS_OP_CAST_INT4,	/* a::int4 */
	KS_OP_CAST_INT8,	/* a::int8 */
	KS_OP_CAST_TEXT,	/* a::text (also varchar) */
	KS_OP_COUNT
};

/* One node; children are earlier nodes (a, b are node numbers, -1 when unused). */
struct ks_expr_node {
	uint32_t op;		/* enum ks_expr_op */
	int32_t a, b;
	uint32_t pad;
	int64_t ival;
};

/*
 * A compiled shard-key expression: pointer-free and fixed-size, so it can be copied into the
 * shared-memory image as is. The root is nodes[nnodes - 1]. A bare column is one COLUMN node.
 */
struct ks_expr {
	uint32_t nnodes;
	uint32_t ncolumns;	/* distinct base columns; > 1: stored but not routable (V3) */
	char columns[KS_EXPR_MAX_COLUMNS][KS_NAME_MAX];	/* base column names */
	struct ks_expr_node nodes[KS_EXPR_MAX_NODES];
};

/*
 * Compile the `columns` entry <text> (a column name or an expression over unqualified
 * columns) with the Postgres parser. Unsupported constructs fill <err> (22023, the message
 * names the construct) and return false.
 */
bool ks_expr_parse(const char *text, struct ks_expr *out, struct nk_error *err) NK_MUSTCHECK;

/* True when <e> is a bare column. */
bool ks_expr_is_column(const struct ks_expr *e);

/*
 * Type of <e>'s result given the types of its base columns <coltypes>; false (with <err>,
 * 42883) when an operation does not apply to those types.
 */
bool ks_expr_result_type(const struct ks_expr *e, const enum ks_type *coltypes,
			 enum ks_type *out, struct nk_error *err) NK_MUSTCHECK;

/*
 * V4: can an index of type <itype> route the result of <e> over columns of <coltypes>?
 * xxhash takes every routable type, modulo and range only integers. Sets *<result> to the
 * key's type. False with <err> (42883 for an expression that does not apply, 22023 for a
 * type the index cannot route).
 */
bool ks_index_accepts(enum ks_index_type itype, const struct ks_expr *e,
		      const enum ks_type *coltypes, enum ks_type *result, struct nk_error *err)
	NK_MUSTCHECK;

/*
 * Evaluate <e> over the base column values <cols> (one per column, in e->columns order) into
 * <out> (which may borrow from <cols>; ks_value_cleanup it). Errors as Postgres would raise
 * them (22003 out of range, 22012 division by zero, 42883 wrong argument type).
 */
bool ks_expr_eval(const struct ks_expr *e, const struct ks_value *cols, struct ks_value *out,
		  struct nk_error *err) NK_MUSTCHECK;

#endif /* NEKI_KEYSPACE_H */
