/*
 * merge_fixtures.h - helpers of the merge unit suites: feeding hand-made shard messages to a
 * merge (RowDescription, DataRow, CommandComplete) and reading the client's messages back.
 */
#ifndef NEKI_TEST_UNIT_MERGE_FIXTURES_H
#define NEKI_TEST_UNIT_MERGE_FIXTURES_H

#include "neki/base.h"

#include "neki/merge.h"
#include "neki/parse.h"
#include "neki/pktbuf.h"
#include "neki/plan.h"

struct mfx_val {
	const char *p;	/* NULL: SQL NULL */
	uint32_t len;	/* 0: strlen(p) */
};

/* Client output: rows rendered as "a|b|\N" lines joined by ';', and the tag. */
struct mfx_out {
	char rows[4096];
	char tag[64];
	uint32_t nrows, ncols;
	bool has_desc;
};

/* Feed the message in <pb> (reset after) to shard <shard>; the test fails on an error. */
void mfx_feed_msg(struct merge *m, uint32_t shard, struct pktbuf *pb);
/* RowDescription of <n> columns of types <oids>, all in <format>. */
void mfx_feed_desc(struct merge *m, uint32_t shard, uint32_t n, const uint32_t *oids,
		   int16_t format);
/* One DataRow of <n> values. */
void mfx_feed_row(struct merge *m, uint32_t shard, uint32_t n, const struct mfx_val *v);
/* One DataRow of one text value. */
void mfx_feed_text(struct merge *m, uint32_t shard, const char *v);
/* CommandComplete <tag>. */
void mfx_feed_done(struct merge *m, uint32_t shard, const char *tag);
/* RowDescription (text), <nrows> rows of <n> values (row-major, NULL: SQL NULL), done. */
void mfx_feed_all_text(struct merge *m, uint32_t shard, uint32_t n, const uint32_t *oids,
		       const char *const *rows, uint32_t nrows);
/* Client messages of <pb> into <o> (values in hex when <hex>). */
void mfx_read_out(const struct pktbuf *pb, struct mfx_out *o, bool hex);
/* merge_pull() into <pb>; the test fails on an error. */
void mfx_pull(struct merge *m, struct pktbuf *pb);
/* A merge of <nshards> under collation "C". */
struct merge *mfx_new_merge(const struct plan_merge *s, uint32_t nshards, int64_t limit,
			    int64_t offset);
/* The merge spec of <sql> (the test fails when it is refused), in mfx_arena(). */
void mfx_spec_of(const char *sql, struct plan_merge *s);
/* The arena of the specs; mfx_free_arena() (a test fixture) frees it. */
struct rarena *mfx_arena(void);
void mfx_free_arena(void);

#endif /* NEKI_TEST_UNIT_MERGE_FIXTURES_H */
