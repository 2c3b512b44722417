/*
 * merge_int.h - private to src/merge/: typed values (merge_val.c), exact decimals
 * (merge_num.c), the row store and the aggregate combine (merge_agg.c), the final combine
 * SQL (merge_final.c).
 */
#ifndef NEKI_MERGE_INT_H
#define NEKI_MERGE_INT_H

#include "neki/base.h"

#include "neki/error.h"
#include "neki/merge.h"
#include "neki/pktbuf.h"
#include "neki/plan.h"
#include "neki/proto_types.h"

#include <locale.h>

/* How values of one column compare. */
enum mv_kind {
	MV_UNSUPPORTED = 0,
	MV_INT,		/* int2, int4, int8, oid */
	MV_NUMERIC,
	MV_FLOAT4,
	MV_FLOAT8,
	MV_TEXT,	/* text, varchar, name */
	MV_BPCHAR,	/* trailing spaces do not count */
	MV_BYTEA,
	MV_BOOL,
	MV_DATE,
	MV_TIMESTAMP,
	MV_TIMESTAMPTZ,
	MV_UUID,
	MV_INTERVAL,	/* months as 30 days, days as 24 hours (merge_kinds.c) */
	MV_TIME,
	MV_TIMETZ,
	MV_INET,	/* inet, cidr */
	MV_BIT,		/* bit, varbit */
	MV_ARRAY,	/* of an element type with one of the kinds above (merge_arr.c) */
	MV_CHAR,	/* "char": one unsigned byte (merge_kinds.c) */
	MV_MACADDR,	/* macaddr, macaddr8: the bytes (fixed-width lowercase hex in text) */
	MV_MONEY,	/* an int8 count of the currency's smallest unit (merge_kinds.c) */
	MV_RANGE,	/* of an ordered subtype: range_cmp (merge_range.c) */
	MV_ENUM,	/* a user-defined enum: its labels' sort order (mv_type.en) */
};

struct mv_type {
	uint32_t oid;
	enum mv_kind kind;
	bool binary;		/* format code 1 */
	locale_t loc;		/* text: strcoll_l under this locale; 0 = byte order */
	const struct merge_enum *en;	/* MV_ENUM: its labels (owned by the merge) */
};

/* Kind of type <oid>; MV_UNSUPPORTED when values of it cannot be compared here. */
enum mv_kind mv_kind_of(uint32_t oid);
/* SQL name of a built-in type or of its array type (for casts in the final combine SQL);
 * NULL when the type is not known here. */
const char *mv_type_name(uint32_t oid);
/* Array type of built-in type <oid>; 0 when not known here. */
uint32_t mv_array_of(uint32_t oid);
/* Element type of built-in array type <oid>; 0 when not known here. */
uint32_t mv_elem_of(uint32_t oid);

/* Order of two non-NULL values (<0, 0, >0); false with <err> when a value is malformed. */
bool mv_cmp(const struct mv_type *t, const struct proto_value *a, const struct proto_value *b,
	    int *out, struct nk_error *err) NK_MUSTCHECK;

/* mv_cmp() of MV_ARRAY values (merge_arr.c) and of the kinds from MV_INTERVAL to MV_BIT
 * (merge_kinds.c). */
bool mv_cmp_array(const struct mv_type *t, const struct proto_value *a,
		  const struct proto_value *b, int *out, struct nk_error *err) NK_MUSTCHECK;
bool mv_cmp_kind(const struct mv_type *t, const struct proto_value *a,
		 const struct proto_value *b, int *out, struct nk_error *err) NK_MUSTCHECK;
/* mv_cmp() of MV_RANGE values (merge_range.c); the subtype of a range type (0: none). */
bool mv_cmp_range(const struct mv_type *t, const struct proto_value *a,
		  const struct proto_value *b, int *out, struct nk_error *err) NK_MUSTCHECK;
uint32_t mv_range_subtype(uint32_t oid);
/* The SQL name of column type <t> for a cast: a built-in's, or an enum's. NULL: none. */
const char *mv_sql_name(const struct mv_type *t);

/* Integer (int2/4/8, oid) and float values of either format; false when malformed. */
bool mv_int(const struct mv_type *t, const struct proto_value *v, int64_t *out) NK_MUSTCHECK;
bool mv_float(const struct mv_type *t, const struct proto_value *v, double *out) NK_MUSTCHECK;

/* ---- exact decimals (merge_num.c) ---- */

enum mdec_special { MDEC_FINITE = 0, MDEC_NAN, MDEC_PINF, MDEC_NINF };

struct mdec {
	enum mdec_special special;
	bool neg;
	char *digits;		/* malloc'd ASCII digits, integer then fraction; no leading zeros */
	uint32_t ndigits;
	uint32_t scale;		/* fraction digits (Postgres dscale) */
};

void mdec_free(struct mdec *d);
/* From Postgres text (numeric or integer output) or binary numeric / int2/4/8. */
bool mdec_from_text(struct mdec *d, const uint8_t *p, uint32_t len) NK_MUSTCHECK;
bool mdec_from_binary(struct mdec *d, uint32_t oid, const uint8_t *p, uint32_t len)
	NK_MUSTCHECK;
int mdec_cmp(const struct mdec *a, const struct mdec *b);
/* *acc += *b (Postgres numeric addition: the larger scale). False on no memory. */
bool mdec_add(struct mdec *acc, const struct mdec *b) NK_MUSTCHECK;
/* Text as Postgres prints it, malloc'd. */
char *mdec_text(const struct mdec *d);
/* Binary numeric as Postgres sends it, appended to <pb>. */
void mdec_put_binary(const struct mdec *d, struct pktbuf *pb);

/* ---- rows and the merge state (merge.c, merge_agg.c) ---- */

struct mrow {
	struct mrow *next;		/* shard queue */
	uint64_t seq;			/* arrival order (stable sorts) */
	struct proto_value *vals;	/* ncols */
	uint8_t **owned;		/* ncols: value bytes the row allocated (NULL: in buf) */
	uint8_t *buf;			/* the DataRow body */
	size_t mem;			/* bytes charged to the merge for the row */
	bool drop;			/* HAVING said false */
};

struct mshard {
	struct mrow *head, *tail;
	uint32_t queued;
	bool described, done;
};

struct merge {
	const struct plan_merge *spec;
	uint32_t nshards;
	struct mshard *shards;
	struct proto_column *cols;	/* from the first RowDescription; names owned */
	struct mv_type *types;		/* ncols */
	uint32_t ncols, nvis;		/* result columns and client columns (a * widens both) */
	uint32_t *sortcol;		/* column of each sort key */
	bool described;
	locale_t loc;			/* database collation; 0 = byte order */
	int64_t limit, offset, skipped, sent;
	uint64_t seq;
	bool buffered;			/* groups / DISTINCT: hold every row until the end */
	struct mrow **rows;		/* buffered rows (and the result rows after combining) */
	uint32_t nrows, cap;
	uint32_t pos;			/* next result row to send */
	struct mrow *last;		/* DISTINCT ON: last row sent */
	struct merge_enum *enums;	/* ncols: the enum types of columns (find_enum) */
	bool (*find_enum)(void *arg, uint32_t oid, struct merge_enum *out);
	void *find_arg;
	bool *final_col;		/* ncols: the value comes from the final combine SQL */
	uint32_t nfinal;		/* final SQL columns (HAVING included) */
	int16_t *final_fmt;		/* nfinal: formats of the final query's columns */
	char *final_sql;
	uint32_t final_rows;		/* DataRows of the final query received */
	enum merge_state state;
	bool finished;			/* every shard done; result rows ready (buffered) */
	bool head_sent, tail_sent;
	bool omit_rowdesc;		/* merge_options.omit_rowdesc */
	bool omit_tail;			/* merge_options.omit_tail */
	int64_t budget;			/* DataRows merge_pull_rows() may still let out; -1 any */
	uint64_t pulled;		/* DataRows let out by the current pull */
	int64_t mem, mem_max, mem_peak;	/* bytes of rows held, bound (0: none), most */
};

/* Growable text (merge_agg.c); a failed allocation sticks in <failed>. */
struct mtext {
	char *s;	/* owned, NUL-terminated */
	size_t len, cap;
	bool failed;
};

void mtext_add(struct mtext *t, const char *p, size_t n);
void mtext_str(struct mtext *t, const char *s);

/* Charge <n> more bytes to the merge; false with <err> naming router_work_mem past the bound. */
bool merge_mem_charge(struct merge *m, size_t n, struct nk_error *err) NK_MUSTCHECK;

/* Fill <err> with out of memory; returns false. */
bool merge_oom(struct nk_error *err);
/* Value <c> of <r> set to <d> in the column's format. False on no memory. */
bool merge_put_mdec(struct mrow *r, uint32_t c, const struct mv_type *t, const struct mdec *d);
/* The first RowDescription arrived: refuse partial types the spec cannot combine exactly. */
bool merge_agg_check_types(struct merge *m, struct nk_error *err) NK_MUSTCHECK;

void mrow_free(struct mrow *r, uint32_t ncols);
/* Set value <c> of <r> to a copy of <p>/<len> (p NULL = SQL NULL). False on no memory. */
bool mrow_set(struct mrow *r, uint32_t c, const void *p, int64_t len) NK_MUSTCHECK;
/* Order of rows <a> and <b> by the spec's sort keys (0: equal). */
bool merge_cmp_sort(struct merge *m, const struct mrow *a, const struct mrow *b, uint32_t nkeys,
		    int *out, struct nk_error *err) NK_MUSTCHECK;
/* Order by columns <cols>[0..n) ascending, NULLs last. */
bool merge_cmp_cols(struct merge *m, const struct mrow *a, const struct mrow *b,
		    const uint32_t *cols, uint32_t n, int *out, struct nk_error *err) NK_MUSTCHECK;
/* Stable sort of m->rows[0..nrows) by <how> (0 sort keys, 1 group columns, 2 visible columns). */
bool merge_sort_rows(struct merge *m, int how, struct nk_error *err) NK_MUSTCHECK;

/* Every shard done, buffered mode: combine groups, prepare the final SQL (merge_agg.c). */
bool merge_agg_finish(struct merge *m, struct nk_error *err) NK_MUSTCHECK;
/* After combining: which columns come from the final SQL, and its text (merge_final.c);
 * m->final_sql stays NULL when none does. */
bool merge_final_build(struct merge *m, struct nk_error *err) NK_MUSTCHECK;
/* The final query's RowDescription: the formats its values come in. */
bool merge_agg_final_desc(struct merge *m, const uint8_t *body, size_t len,
			  struct nk_error *err) NK_MUSTCHECK;
/* One DataRow of the final combine query. */
bool merge_agg_final_row(struct merge *m, const uint8_t *body, size_t len,
			 struct nk_error *err) NK_MUSTCHECK;
/* The final query completed: HAVING, DISTINCT, sort. */
bool merge_agg_final_done(struct merge *m, struct nk_error *err) NK_MUSTCHECK;
/* After grouping (and the final query): HAVING filter applied, DISTINCT, ORDER BY. */
bool merge_result_order(struct merge *m, struct nk_error *err) NK_MUSTCHECK;

#endif /* NEKI_MERGE_INT_H */
