/*
 * neki/sequence.h - router-side sequence values (spec 6.1, DESIGN.md 4): a per-worker
 * allocator that hands out values of each sequence from batches reserved on the sequence's
 * home shard, the SQL that reserves a batch there, and the SQL of the uuidv7() function neki
 * creates on shards whose server lacks it. Pure: the executor runs the SQL and feeds the
 * result rows back; nothing here touches a socket or shared memory.
 *
 * Executor's view, for a plan with fills (plan.h) or a nextval('seq') call:
 *   e = seq_alloc_get(alloc, db, schema, name);
 *   seq_sync(e, generation);                        setval() ran somewhere: values dropped
 *   if (!seq_take(e, need, values)) {
 *       n = seq_refill_begin(alloc, e, cache, need);   0: a refill is in flight, wait
 *       seq_reserve_sql(&buf, schema, name, n) -> run on the home shard (own link, autocommit)
 *       each result row: seq_refill_add_run(e, row[0], row[1], row[2], &err)
 *       seq_refill_end(e); then seq_take() again
 *   }
 */
#ifndef NEKI_SEQUENCE_H
#define NEKI_SEQUENCE_H

#include "neki/base.h"

#include "neki/error.h"

struct seq_alloc;
struct seq_entry;

/* An allocator whose batches hold at least <batch> values (the sequence_batch setting). */
struct seq_alloc *seq_alloc_new(int64_t batch);
void seq_alloc_free(struct seq_alloc *a);

/*
 * The state of sequence <db>.<schema>.<name>, created empty on first use; stays valid until
 * seq_alloc_free(). NULL on no memory.
 */
struct seq_entry *seq_alloc_get(struct seq_alloc *a, const char *db, const char *schema,
				const char *name);

/* Values reserved and not handed out yet. */
uint64_t seq_available(const struct seq_entry *e);

/*
 * Hand out <n> values into <out>[0..n), in reservation order (each value exactly once, in
 * this process). False, taking nothing, when fewer than <n> are available.
 */
bool seq_take(struct seq_entry *e, uint32_t n, int64_t *out) NK_MUSTCHECK;

/*
 * Start a refill for a need of <need> values: returns how many to reserve, at least
 * max(batch, <cache>, need - available) (spec 6.1: the router's reservation size or the
 * sequence's CACHE, whichever is larger). Returns 0 when a refill of <e> is already in
 * flight: wait for it instead of reserving again.
 */
int64_t seq_refill_begin(struct seq_alloc *a, struct seq_entry *e, int64_t cache,
			 uint32_t need);

/*
 * One row of seq_reserve_sql()'s result: a run of <count> values <first>, <first> + inc,
 * ... (text as the server sent it). False with 22P02 on text that is not a run.
 */
bool seq_refill_add_run(struct seq_entry *e, const char *first, const char *count,
			const char *inc, struct nk_error *err) NK_MUSTCHECK;

/*
 * The sequence's setval() generation is <gen> (the executor reads it from shared memory,
 * bumped by every setval() through any worker): when it differs from the one <e>'s values
 * were reserved under, they are all dropped (the next values must follow the new one), and
 * so are the rows of a refill begun before the change.
 */
void seq_sync(struct seq_entry *e, uint64_t gen);

/* The refill ended (every row added, or it failed): another may start. */
void seq_refill_end(struct seq_entry *e);
bool seq_refill_pending(const struct seq_entry *e);

/*
 * The statement reserving <n> values of <schema>.<name> on its home shard, into <buf>.
 * It calls nextval() <n> times in one statement, so it is atomic per value and correct
 * under any concurrency (other routers, other workers, direct clients): every value comes
 * from the sequence itself, and the rows it returns are the runs of consecutive values
 * actually obtained, (first, count, increment) as text, in call order. An exhausted
 * sequence fails the statement with the server's error. False when <cap> is too small.
 */
bool seq_reserve_sql(char *buf, size_t cap, const char *schema, const char *name, int64_t n)
	NK_MUSTCHECK;

/*
 * CREATE FUNCTION statement for uuidv7() in schema public, for servers before PostgreSQL
 * 18 (run it where `SELECT 1 FROM pg_proc WHERE proname = 'uuidv7'` finds nothing): 48 bits
 * of Unix milliseconds, version 7, 12 bits of sub-millisecond time, variant 10, 62 random
 * bits (RFC 9562, as PostgreSQL 18's uuidv7()), so values made in different microseconds
 * sort by creation time.
 */
const char *seq_uuidv7_sql(void);

#endif /* NEKI_SEQUENCE_H */
