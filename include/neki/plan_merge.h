/*
 * neki/plan_merge.h - the merge specification of a SELECT that runs on several shards
 * (src/router/plan_merge.c builds it from the statement's text): what each shard runs and
 * how the router combines their rows (src/merge does it): partial aggregates, groups,
 * HAVING, sort keys, DISTINCT, LIMIT / OFFSET.
 */
#ifndef NEKI_PLAN_MERGE_H
#define NEKI_PLAN_MERGE_H

#include "neki/base.h"

#include "neki/error.h"

struct plan_input;
struct rarena;

enum plan_agg {
	PLAN_AGG_COUNT = 1,	/* partial: count; combine: sum of counts (also regr_count) */
	PLAN_AGG_SUM,		/* partial: sum; combine: sum (floats: final combine SQL) */
	PLAN_AGG_MIN,
	PLAN_AGG_MAX,
	PLAN_AGG_AVG,		/* partials: sum((x) * 1::int2) and count; final combine SQL */
	PLAN_AGG_BOOL_AND,	/* also every() */
	PLAN_AGG_BOOL_OR,
	PLAN_AGG_STRING_AGG,	/* partial strings joined by the constant delimiter */
	PLAN_AGG_ARRAY_AGG,	/* partial arrays concatenated */
	PLAN_AGG_DISTINCT,	/* agg(DISTINCT x ...): partial array_agg(DISTINCT x); the final
				 * SQL runs <final> over the union of the arrays */
	PLAN_AGG_BIT_AND,	/* integers: the partials and-ed, or-ed, xor-ed */
	PLAN_AGG_BIT_OR,
	PLAN_AGG_BIT_XOR,
	PLAN_AGG_VARIANCE,	/* stddev / variance family of integers and numeric: partials
				 * count, sum and sum of squares as numeric; final combine SQL */
	PLAN_AGG_JSON_AGG,	/* partial arrays joined (col2: the element type is structured) */
	PLAN_AGG_JSONB_AGG,	/* partial arrays joined */
	PLAN_AGG_JSON_OBJECT_AGG, /* partial objects joined */
	PLAN_AGG_JSONB_OBJECT_AGG, /* final SQL: the partial objects concatenated with || */
	PLAN_AGG_REAGG,		/* final SQL: <final> over the partials (xmlagg, range_agg,
				 * range_intersect_agg) */
};

/* One aggregate call: where its partial values are in the shard result. */
struct plan_merge_agg {
	enum plan_agg kind;
	uint32_t col;		/* shard column of the partial (AVG, VARIANCE: the sum) */
	uint32_t col2;		/* AVG, VARIANCE: the count; JSON_AGG: the structured flag */
	uint32_t col3;		/* VARIANCE: the sum of squares */
	const char *delim;	/* STRING_AGG: the delimiter */
	/* With ORDER BY inside (string_agg, array_agg, json_agg, jsonb_agg, xmlagg): col is
	 * array_agg of the values and keycol.. keycol+nkeys-1 array_agg of each sort key (all
	 * in that order); the final SQL aggregates unnest(k1, .., v) AS u(k1, .., v) with
	 * <final> ("string_agg(v, ',' ORDER BY k1 DESC, ..)") */
	uint32_t nkeys, keycol;
	/* ORDERED, DISTINCT, REAGG: the final aggregate call over v / e ("sum(DISTINCT e)") */
	const char *final;
	bool sample, root;	/* VARIANCE: sample (not population), square root (stddev) */
	uint32_t carrier;	/* the call's own column when its value comes from the final SQL
				 * (the shard computes it with FILTER (WHERE false)); UINT32_MAX */
};

/* A hole of a plan_merge_expr that is a plain value: column (agg & ~PLAN_MERGE_HOLE_COL). */
#define PLAN_MERGE_HOLE_COL 0x80000000u

/* Text with aggregate results (or grouped values) in between: text[0] agg[0] text[1] ...
 * text[nagg]; a hole with PLAN_MERGE_HOLE_COL is the value of a (text format) column. */
struct plan_merge_expr {
	const char **text;
	uint32_t *agg;
	uint32_t nagg;
};

enum plan_mcol_kind {
	PLAN_MCOL_PLAIN = 0,	/* the shard's value (a group key, or any column without GROUP) */
	PLAN_MCOL_AGG,		/* one aggregate call: its combined value */
	PLAN_MCOL_EXPR,		/* an expression over aggregates: final combine SQL */
};

/* A select-list column of the shard query (visible first, then the hidden ones). */
struct plan_merge_col {
	enum plan_mcol_kind kind;
	uint32_t agg;			/* AGG */
	struct plan_merge_expr expr;	/* EXPR (and AGG: the call as a template) */
};

struct plan_merge_sort {
	uint32_t col;			/* shard column */
	bool desc, nulls_first;
	bool byte_order;		/* COLLATE "C"/"POSIX": byte order whatever the database's */
	bool hidden;			/* a hidden column (moves with the expansion of a *) */
};

/* LIMIT / OFFSET value: absent, a constant or a slot ($n or normalised literal). */
struct plan_merge_count {
	bool present;
	bool is_slot;
	uint32_t slot;
	int64_t value;
};

struct plan_merge {
	const char *shard_sql;		/* the statement each shard runs */
	uint32_t nvisible;		/* client columns: the shard's first nvisible */
	bool star;			/* a * in the select list: the RowDescription has more
					 * visible columns (one per column * expands to) */
	uint32_t ncols;			/* shard result columns */
	struct plan_merge_col *cols;	/* ncols */
	struct plan_merge_agg *aggs;
	uint32_t naggs;
	bool grouped;			/* aggregate query: combine partial rows by group */
	uint32_t *group_cols;		/* columns forming the group key */
	uint32_t ngroup;
	bool has_having;
	struct plan_merge_expr having;	/* evaluated by the final combine SQL */
	struct plan_merge_sort *sort;
	uint32_t nsort;
	bool distinct;			/* DISTINCT, UNION: duplicates across shards removed */
	uint32_t distinct_on;		/* DISTINCT ON: the leading sort keys forming the key */
	struct plan_merge_count limit, offset;
};

/* 0A000 for stddev / variance of real or double precision values across shards (their
 * float state cannot be read from the shards): the planner's and the merge's; false. */
bool plan_refuse_float_variance(struct nk_error *err);

/*
 * Merge spec of a SELECT going to several shards, from the text <sql> the executor sends (the
 * plan's query: literals normalised to $k). Allocated in <a>. Refuses shapes that cannot be
 * merged exactly with NK013 (124 INTERSECT/EXCEPT, 125 grouping sets, 126 TABLESAMPLE,
 * 138 WITH TIES, 212 user-defined aggregates) or 0A000 naming the shape (a window function
 * is the shards' own: the planner lets only windows partitioned by the shard key through).
 */
bool plan_merge_build(struct rarena *a, const char *sql, struct plan_merge *out,
		      struct nk_error *err) NK_MUSTCHECK;

/* plan_merge_build() through the cache of the specifications of the texts built last
 * (src/router/plan_merge_cache.c): what the executor calls. The same answer, in <a>. */
bool plan_merge_cached(struct rarena *a, const char *sql, struct plan_merge *out,
		       struct nk_error *err) NK_MUSTCHECK;

/* LIMIT and OFFSET values of this execution (-1: no LIMIT; 0: no OFFSET). */
bool plan_merge_bind(const struct plan_merge *m, const struct plan_input *in, int64_t *limit,
		     int64_t *offset, struct nk_error *err) NK_MUSTCHECK;

#endif /* NEKI_PLAN_MERGE_H */
