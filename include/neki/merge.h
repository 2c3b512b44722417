/*
 * neki/merge.h - the merge step of a multi-shard SELECT: turns the result messages of several
 * shards into the messages one Postgres holding all the rows would have sent. Pure: no sockets,
 * no event loop; the executor feeds each shard's RowDescription / DataRow / CommandComplete and
 * pulls client messages.
 *
 *   plan_merge_build(sql) -> spec; send spec.shard_sql to every shard (columns >= nvisible in
 *   text format); merge_new(spec, nshards, options) -> merge_feed(shard, msg) ... merge_pull()
 *   ... when merge_state() is MERGE_NEED_FINAL: run merge_final_sql() on any one shard (simple
 *   query protocol) and feed its messages with shard MERGE_FINAL; merge_pull() until MERGE_DONE.
 *
 * Without aggregates, GROUP BY or DISTINCT the merge streams: rows go out as soon as their
 * order is known (one row queued from every unfinished shard). With them, partial rows are
 * held until every shard completed. See doc/router.md "Merging".
 */
#ifndef NEKI_MERGE_H
#define NEKI_MERGE_H

#include "neki/base.h"

#include "neki/error.h"
#include "neki/pktbuf.h"
#include "neki/plan.h"
#include "neki/plan_merge.h"

/* Shard number of the final combine query's messages. */
#define MERGE_FINAL UINT32_MAX

/* A user-defined enum type as the catalog knows it (merge_options.find_enum). */
struct merge_enum {
	char *sql_name;		/* "schema"."name", for casts in the final combine SQL */
	char **labels;		/* in sort order (pg_enum.enumsortorder) */
	uint32_t nlabels;
};

/* Does the merge order and group values of built-in type <oid> itself (merge_val.c's
 * kinds, arrays of them)? */
bool merge_orders_type(uint32_t oid);

/* Frees what merge_options.find_enum filled in. */
void merge_enum_free(struct merge_enum *e);

struct merge_options {
	const char *collation;	/* the database's LC_COLLATE; NULL, "C", "POSIX", "C.UTF-8": bytes */
	int64_t limit;		/* plan_merge_bind(): -1 = none */
	int64_t offset;		/* 0 = none */
	bool omit_rowdesc;	/* extended protocol without Describe: no RowDescription out */
	bool omit_tail;		/* no CommandComplete out (the executor writes its own tag:
				 * a portal or cursor read in parts) */
	int64_t mem_max;	/* bytes of shard rows the merge may hold (router_work_mem);
				 * 0 = no bound */
	/* Type <oid> (a user-defined type's OID on the authoritative shard) of a result column,
	 * when it is an enum the catalog knows: fills <out> (the merge owns it) and returns
	 * true, so its values order by their labels' sort order. NULL: none is looked up. */
	bool (*find_enum)(void *arg, uint32_t oid, struct merge_enum *out);
	void *find_arg;
};

enum merge_state {
	MERGE_NEED_ROWS = 0,	/* feed shard messages */
	MERGE_NEED_FINAL,	/* run merge_final_sql() on one shard and feed it as MERGE_FINAL */
	MERGE_DONE,		/* every message pulled, CommandComplete included */
};

struct merge;

/*
 * A merge of <nshards> shard results following <spec> (borrowed: it must outlive the merge).
 * NULL with <err> on no memory or an unusable collation.
 */
struct merge *merge_new(const struct plan_merge *spec, uint32_t nshards,
			const struct merge_options *opt, struct nk_error *err);
/* Frees every byte; after a merge that held much, the heap is trimmed back to the system. */
void merge_free(struct merge *m);

/*
 * One backend message of shard <shard> (0..nshards-1, or MERGE_FINAL): 'T' RowDescription,
 * 'D' DataRow, 'C' CommandComplete; other types are refused (the executor handles errors,
 * notices and ReadyForQuery itself). False with <err> on a malformed message, a result that
 * does not fit the spec, or a value the merge cannot order or combine exactly.
 */
bool merge_feed(struct merge *m, uint32_t shard, char type, const uint8_t *body, size_t len,
		struct nk_error *err) NK_MUSTCHECK;

/* Append every client message that is ready to <out>. False with <err> as merge_feed(). */
bool merge_pull(struct merge *m, struct pktbuf *out, struct nk_error *err) NK_MUSTCHECK;

/*
 * merge_pull() letting out at most <max_rows> DataRows (negative: no limit); *<nrows> gets
 * how many it did. The rows not let out stay queued for the next pull (a portal fetched in
 * parts: Execute with a row limit, FETCH n).
 */
bool merge_pull_rows(struct merge *m, struct pktbuf *out, int64_t max_rows, uint64_t *nrows,
		     struct nk_error *err) NK_MUSTCHECK;

/* True when the merge holds every row until all shards completed (aggregates, GROUP BY,
 * DISTINCT, UNION): reading the shards in parts gains nothing then. */
bool merge_buffered(const struct merge *m);

enum merge_state merge_state(const struct merge *m);

/* The final combine query (MERGE_NEED_FINAL only; NULL otherwise). Owned by the merge. */
const char *merge_final_sql(const struct merge *m);

/*
 * Result formats to ask of the final combine query (extended protocol): one per column it
 * returns, 1 where the client wants binary (the merge takes those bytes as they come), in
 * <out> (the first <max>). Returns the column count (maybe more than <max>); 0 outside
 * MERGE_NEED_FINAL. Values sent in text are converted where the merge can.
 */
uint32_t merge_final_formats(const struct merge *m, int16_t *out, uint32_t max);

/* Rows of shard <shard> held by the merge (back-pressure: stop reading a shard that is ahead). */
uint32_t merge_queued(const struct merge *m, uint32_t shard);

/* True when shard <shard> sent its CommandComplete. */
bool merge_shard_done(const struct merge *m, uint32_t shard);

/* The SQL name of built-in type <oid> for a cast ("int4", "numeric[]", "\"char\""), or NULL
 * when the merge does not know it (or no cast names it exactly, as bit). */
const char *merge_type_sql(uint32_t oid);

#endif /* NEKI_MERGE_H */
