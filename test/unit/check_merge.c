/*
 * check_merge.c - the merge step (src/merge) through its public API with hand-made specs and
 * shard messages: typed order of every supported type in text and binary format, k-way
 * merges with ties and NULLs, ASC/DESC and NULLS FIRST/LAST, LIMIT/OFFSET while streaming,
 * every aggregate combine, GROUP BY with partial groups from several shards, the final
 * combine SQL with HAVING, DISTINCT and DISTINCT ON; and the merge spec built by the router
 * (src/router/plan_merge.c): shard query text, columns, sort and group keys, refusals and
 * LIMIT/OFFSET binding.
 */
#include "neki/base.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "neki/merge.h"
#include "neki/parse.h"
#include "neki/plan.h"
#include "neki/proto.h"
#include "neki/rarena.h"
#include "merge_fixtures.h"
#include "suites.h"

/* A spec of <ncols> plain columns sorted by column 0. */
static struct plan_merge_sort sort0[2];

static void
sorted_spec(struct plan_merge *s, struct plan_merge_col *cols, uint32_t ncols, bool desc,
	    bool nulls_first)
{
	memset(s, 0, sizeof(*s));
	memset(cols, 0, ncols * sizeof(*cols));
	s->ncols = s->nvisible = ncols;
	s->cols = cols;
	sort0[0].col = 0;
	sort0[0].desc = desc;
	sort0[0].nulls_first = nulls_first;
	sort0[0].byte_order = false;
	s->sort = sort0;
	s->nsort = 1;
}

/* ---- typed order: values in Postgres order, dealt to 3 shards, merged back ---- */

struct order_case {
	uint32_t oid;
	const char *vals[10];	/* ascending, as Postgres prints them */
};

static const struct order_case text_orders[] = {
	{ 21, { "-32768", "-1", "0", "7", "32767" } },
	{ 23, { "-2147483648", "-5", "0", "9", "10", "2147483647" } },
	{ 20, { "-9223372036854775808", "-1", "0", "99", "100", "9223372036854775807" } },
	{ 1700, { "-Infinity", "-100.5", "-1", "-0.001", "0", "1.50", "2", "Infinity",
		  "NaN" } },
	{ 701, { "-Infinity", "-1e+300", "-0.5", "0", "1.5", "1e+300", "Infinity",
		 "NaN" } },
	{ 700, { "-Infinity", "-3.5", "0", "0.25", "3e+38", "Infinity", "NaN" } },
	{ 25, { "", "A", "B", "Z", "a", "ab", "b", "\xc3\xa9" } },
	{ 1043, { "10", "9", "X", "x", "xy" } },
	{ 1042, { "a", "a b", "ab  ", "b" } },
	{ 17, { "\\x", "\\x00", "\\x0001", "\\x01", "\\xff" } },
	{ 16, { "f", "t" } },
	{ 1082, { "-infinity", "0044-03-15 BC", "0001-01-01", "1999-12-31", "2000-01-01",
		  "2024-02-29", "infinity" } },
	{ 1114, { "-infinity", "0044-03-15 12:00:00 BC", "1999-12-31 23:59:59.999999",
		  "2000-01-01 00:00:00", "2000-01-01 00:00:00.5", "infinity" } },
	{ 1184, { "2024-03-10 05:00:00+05", "2024-03-10 01:00:00+00", "2024-03-10 00:30:00-01",
		  "2024-03-10 07:00:00+05:30", "2024-03-10 02:00:00+00", "infinity" } },
	{ 2950, { "00000000-0000-0000-0000-000000000000", "0a000000-0000-0000-0000-000000000000",
		  "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "ffffffff-ffff-ffff-ffff-ffffffffffff" } },
	/* arrays: elements, then element count, dimensions, lower bounds; NULL elements last */
	{ 1007, { "{}", "{-5}", "[0:0]={1}", "{1}", "{{1}}", "{1,2}", "{1,2,3}", "{1,NULL}",
		  "{NULL}" } },
	{ 1009, { "{}", "{\"\"}", "{a,NULL}", "{\"a b\",c}", "{\"a\\\"b\"}", "{NULL}" } },
	{ 1186, { "-1 years", "-00:00:01.5", "00:00:00", "23:59:59", "1 day 00:00:00.000001",
		  "29 days 24:00:01", "1 mon 00:00:02", "-1 days +1000:00:00", "1 year" } },
	{ 1187, { "{\"-1 days\"}", "{\"1 day\"}", "{\"1 day\",\"00:00:01\"}", "{NULL}" } },
	{ 869, { "10.0.0.0/8", "10.0.0.1/8", "10.0.0.1", "192.168.1.0/24", "::1",
		 "2001:db8::1/64" } },
	{ 1562, { "", "0", "00", "01", "1", "10", "1000000001", "11" } },
	{ 1083, { "00:00:00", "07:30:00.5", "23:59:59.999999", "24:00:00" } },
	{ 1266, { "12:00:00+01", "06:00:00-05", "12:00:00+00", "12:00:00-00:00:30" } },
	/* ranges: empty first, then lower bounds (infinite, inclusive before exclusive), then
	 * upper bounds (exclusive before inclusive, infinite last); quoted bounds */
	{ 3906, { "empty", "(,1)", "(,)", "[-1.5,0)", "[1,2)", "[1,2]", "[1.0,)", "(1,2)",
		  "[10,11)" } },
	{ 3910, { "[\"2024-01-01 01:00:00+02\",)",	/* (23:00 the day before, UTC) */
		  "[\"2024-01-01 00:00:00+00\",\"2024-01-02 00:00:00+00\")",
		  "(\"2024-01-01 00:00:00+00\",)" } },
	/* "char" as unsigned bytes (charout's \ooo above 127), money, macaddr */
	{ 18, { "", "A", "a", "\\200", "\\310" } },
	{ 790, { "-$1,000.00", "($2.00)", "-$0.01", "$0.00", "$9.99", "$1,000.00" } },
	{ 829, { "00:00:00:00:00:00", "08:00:2b:01:02:03", "08:00:2b:01:02:0a", "ff:00:00:00:00:00" } },
};

START_TEST(test_order_text)
{
	const struct order_case *c = &text_orders[_i];
	struct plan_merge s;
	struct plan_merge_col cols[1];
	struct merge *m;
	struct pktbuf pb;
	struct mfx_out o;
	char want[1024] = "";
	uint32_t n = 0;

	sorted_spec(&s, cols, 1, false, false);
	m = mfx_new_merge(&s, 3, -1, 0);
	for (uint32_t sh = 0; sh < 3; sh++)
		mfx_feed_desc(m, sh, 1, &c->oid, 0);
	while (n < 10 && c->vals[n])
		n++;
	/* shard i gets values i, i+3, ... (each shard's stream is sorted) */
	for (uint32_t i = 0; i < n; i++)
		mfx_feed_text(m, (n - 1 - i) % 3, c->vals[i]);
	for (uint32_t sh = 0; sh < 3; sh++)
		mfx_feed_done(m, sh, "SELECT 1");
	pktbuf_init(&pb, 1024);
	mfx_pull(m, &pb);
	memset(&o, 0, sizeof(o));
	mfx_read_out(&pb, &o, false);
	for (uint32_t i = 0; i < n; i++) {
		if (i)
			strcat(want, ";");
		strcat(want, c->vals[i]);
	}
	ck_assert_str_eq(o.rows, want);
	ck_assert_uint_eq(o.nrows, n);
	ck_assert_int_eq(merge_state(m), MERGE_DONE);
	pktbuf_cleanup(&pb);
	merge_free(m);
}
END_TEST

/* Binary values, ascending. */
struct bin_case {
	uint32_t oid;
	struct mfx_val vals[6];
};

static const struct bin_case bin_orders[] = {
	{ 23, { { "\xff\xff\xff\xfe", 4 }, { "\x00\x00\x00\x00", 4 }, { "\x00\x00\x01\x00", 4 },
		{ "\x7f\x00\x00\x00", 4 } } },
	{ 20, { { "\x80\x00\x00\x00\x00\x00\x00\x00", 8 }, { "\xff\xff\xff\xff\xff\xff\xff\xff", 8 },
		{ "\x00\x00\x00\x00\x00\x00\x00\x02", 8 } } },
	/* -2, 1.5, 10000.0001, NaN */
	{ 1700, { { "\x00\x01\x00\x00\x40\x00\x00\x00\x00\x02", 10 },
		  { "\x00\x02\x00\x00\x00\x00\x00\x01\x00\x01\x13\x88", 12 },
		  { "\x00\x03\x00\x01\x00\x00\x00\x04\x00\x01\x00\x00\x00\x01", 14 },
		  { "\x00\x00\x00\x00\xc0\x00\x00\x00", 8 } } },
	/* -Infinity, -0.5, 2, NaN */
	{ 701, { { "\xff\xf0\x00\x00\x00\x00\x00\x00", 8 }, { "\xbf\xe0\x00\x00\x00\x00\x00\x00", 8 },
		 { "\x40\x00\x00\x00\x00\x00\x00\x00", 8 }, { "\x7f\xf8\x00\x00\x00\x00\x00\x00", 8 } } },
	{ 700, { { "\xbf\x00\x00\x00", 4 }, { "\x3f\x80\x00\x00", 4 }, { "\x7f\xc0\x00\x00", 4 } } },
	{ 16, { { "\x00", 1 }, { "\x01", 1 } } },
	{ 1082, { { "\xff\xff\xff\x00", 4 }, { "\x00\x00\x00\x00", 4 }, { "\x00\x00\x20\x00", 4 } } },
	{ 1184, { { "\xff\xff\xff\xff\xff\x00\x00\x00", 8 }, { "\x00\x00\x00\x00\x00\x00\x00\x01", 8 },
		  { "\x7f\xff\xff\xff\xff\xff\xff\xff", 8 } } },
	{ 25, { { "", 0 }, { "a", 1 }, { "ab", 2 }, { "b\x00", 2 } } },
	{ 17, { { "\x00", 1 }, { "\x00\x00", 2 }, { "\xff", 1 } } },
	{ 2950, { { "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01", 16 },
		  { "\x80\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00", 16 } } },
	/* int4range: empty, (,5), [1,5), [2,) (flags, then length-prefixed bounds) */
	{ 3904, { { "\x01", 1 }, { "\x08\x00\x00\x00\x04\x00\x00\x00\x05", 9 },
		  { "\x02\x00\x00\x00\x04\x00\x00\x00\x01\x00\x00\x00\x04\x00\x00\x00\x05", 17 },
		  { "\x12\x00\x00\x00\x04\x00\x00\x00\x02", 9 } } },
	{ 18, { { "\x01", 1 }, { "\x7f", 1 }, { "\x80", 1 } } },
	{ 790, { { "\xff\xff\xff\xff\xff\xff\xff\x9c", 8 }, { "\x00\x00\x00\x00\x00\x00\x00\x01", 8 } } },
};

START_TEST(test_order_binary)
{
	const struct bin_case *c = &bin_orders[_i];
	struct plan_merge s;
	struct plan_merge_col cols[1];
	struct merge *m;
	struct pktbuf pb;
	struct mfx_out o;
	char want[1024] = "";
	uint32_t n = 0;

	sorted_spec(&s, cols, 1, true, false);	/* DESC this time */
	m = mfx_new_merge(&s, 2, -1, 0);
	mfx_feed_desc(m, 0, 1, &c->oid, 1);
	mfx_feed_desc(m, 1, 1, &c->oid, 1);
	while (n < 6 && c->vals[n].p)
		n++;
	for (uint32_t i = n; i-- > 0;)
		mfx_feed_row(m, i % 2, 1, &c->vals[i]);
	mfx_feed_done(m, 0, "SELECT 1");
	mfx_feed_done(m, 1, "SELECT 1");
	pktbuf_init(&pb, 1024);
	mfx_pull(m, &pb);
	memset(&o, 0, sizeof(o));
	mfx_read_out(&pb, &o, true);
	for (uint32_t i = n; i-- > 0;) {
		char hex[64] = "";

		for (uint32_t k = 0; k < c->vals[i].len; k++)
			snprintf(hex + 2 * k, 3, "%02x", (uint8_t)c->vals[i].p[k]);
		if (i != n - 1)
			strcat(want, ";");
		strcat(want, hex);
	}
	ck_assert_str_eq(o.rows, want);
	pktbuf_cleanup(&pb);
	merge_free(m);
}
END_TEST

/* ---- streaming: NULLs, ties, LIMIT/OFFSET, concatenation ---- */

static const uint32_t int4_oid = 23;

START_TEST(test_nulls_first_and_ties)
{
	struct plan_merge s;
	struct plan_merge_col cols[2];
	struct merge *m;
	struct pktbuf pb;
	struct mfx_out o;

	sorted_spec(&s, cols, 2, false, true);	/* ASC NULLS FIRST */
	m = mfx_new_merge(&s, 3, -1, 0);
	for (uint32_t sh = 0; sh < 3; sh++)
		mfx_feed_desc(m, sh, 2, (const uint32_t[]){ 23, 25 }, 0);
	mfx_feed_row(m, 0, 2, (const struct mfx_val[]){ { NULL, 0 }, { "a0", 0 } });
	mfx_feed_row(m, 0, 2, (const struct mfx_val[]){ { "1", 0 }, { "b0", 0 } });
	mfx_feed_row(m, 0, 2, (const struct mfx_val[]){ { "3", 0 }, { "c0", 0 } });
	mfx_feed_row(m, 1, 2, (const struct mfx_val[]){ { NULL, 0 }, { "a1", 0 } });
	mfx_feed_row(m, 1, 2, (const struct mfx_val[]){ { "1", 0 }, { "b1", 0 } });
	mfx_feed_row(m, 2, 2, (const struct mfx_val[]){ { "2", 0 }, { "c2", 0 } });
	for (uint32_t sh = 0; sh < 3; sh++)
		mfx_feed_done(m, sh, "SELECT 1");
	pktbuf_init(&pb, 1024);
	mfx_pull(m, &pb);
	memset(&o, 0, sizeof(o));
	mfx_read_out(&pb, &o, false);
	/* ties keep shard order */
	ck_assert_str_eq(o.rows, "\\N|a0;\\N|a1;1|b0;1|b1;2|c2;3|c0");
	ck_assert_str_eq(o.tag, "SELECT 6");
	pktbuf_cleanup(&pb);
	merge_free(m);

	sorted_spec(&s, cols, 1, true, false);	/* DESC NULLS LAST */
	m = mfx_new_merge(&s, 2, -1, 0);
	mfx_feed_desc(m, 0, 1, &int4_oid, 0);
	mfx_feed_desc(m, 1, 1, &int4_oid, 0);
	mfx_feed_text(m, 0, "5");
	mfx_feed_text(m, 0, NULL);
	mfx_feed_text(m, 1, "7");
	mfx_feed_text(m, 1, "-1");
	mfx_feed_text(m, 1, NULL);
	mfx_feed_done(m, 0, "SELECT 2");
	mfx_feed_done(m, 1, "SELECT 3");
	pktbuf_init(&pb, 1024);
	mfx_pull(m, &pb);
	memset(&o, 0, sizeof(o));
	mfx_read_out(&pb, &o, false);
	ck_assert_str_eq(o.rows, "7;5;-1;\\N;\\N");
	pktbuf_cleanup(&pb);
	merge_free(m);
}
END_TEST

START_TEST(test_streaming_limit_offset)
{
	struct plan_merge s;
	struct plan_merge_col cols[1];
	struct merge *m;
	struct pktbuf pb;
	struct mfx_out o;

	sorted_spec(&s, cols, 1, false, false);
	m = mfx_new_merge(&s, 2, 2, 1);	/* LIMIT 2 OFFSET 1 */
	mfx_feed_desc(m, 0, 1, &int4_oid, 0);
	mfx_feed_desc(m, 1, 1, &int4_oid, 0);
	mfx_feed_text(m, 0, "1");
	mfx_feed_text(m, 0, "3");
	mfx_feed_text(m, 0, "5");
	mfx_feed_text(m, 1, "2");
	pktbuf_init(&pb, 1024);
	mfx_pull(m, &pb);
	memset(&o, 0, sizeof(o));
	mfx_read_out(&pb, &o, false);
	/* 1 skipped, 2 sent; 3 waits for shard 1's next row */
	ck_assert(o.has_desc);
	ck_assert_str_eq(o.rows, "2");
	ck_assert_str_eq(o.tag, "");
	ck_assert_uint_eq(merge_queued(m, 0), 2);
	ck_assert_int_eq(merge_state(m), MERGE_NEED_ROWS);
	mfx_feed_text(m, 1, "4");
	pktbuf_reset(&pb);
	mfx_pull(m, &pb);
	memset(&o, 0, sizeof(o));
	mfx_read_out(&pb, &o, false);
	ck_assert_str_eq(o.rows, "3");
	ck_assert_str_eq(o.tag, "SELECT 2");
	ck_assert_int_eq(merge_state(m), MERGE_DONE);
	mfx_feed_text(m, 1, "6");	/* after the LIMIT: ignored */
	mfx_feed_done(m, 1, "SELECT 3");
	pktbuf_cleanup(&pb);
	merge_free(m);
}
END_TEST

START_TEST(test_concatenation_streams)
{
	struct plan_merge s;
	struct plan_merge_col cols[1];
	struct merge *m;
	struct pktbuf pb;
	struct mfx_out o;

	sorted_spec(&s, cols, 1, false, false);
	s.nsort = 0;
	m = mfx_new_merge(&s, 2, -1, 0);
	mfx_feed_desc(m, 1, 1, &int4_oid, 0);
	mfx_feed_text(m, 1, "9");
	pktbuf_init(&pb, 1024);
	mfx_pull(m, &pb);
	memset(&o, 0, sizeof(o));
	mfx_read_out(&pb, &o, false);
	ck_assert_str_eq(o.rows, "9");	/* before shard 0 said anything */
	mfx_feed_desc(m, 0, 1, &int4_oid, 0);
	mfx_feed_text(m, 0, "1");
	mfx_feed_done(m, 0, "SELECT 1");
	mfx_feed_done(m, 1, "SELECT 1");
	pktbuf_reset(&pb);
	mfx_pull(m, &pb);
	memset(&o, 0, sizeof(o));
	mfx_read_out(&pb, &o, false);
	ck_assert_str_eq(o.rows, "1");
	ck_assert_str_eq(o.tag, "SELECT 2");
	pktbuf_cleanup(&pb);
	merge_free(m);
}
END_TEST

/* ---- specs from SQL, merged ---- */

/* A portal fetched in parts: merge_pull_rows() lets out at most n rows, the others stay
 * queued; without a tail the executor writes its own tag; buffered results come out in
 * parts too. */
START_TEST(test_pull_rows_in_parts)
{
	struct merge_options opt = { .collation = "C", .limit = 5, .offset = 1,
				     .omit_rowdesc = true, .omit_tail = true };
	struct plan_merge s;
	struct plan_merge_col cols[1];
	struct nk_error err;
	struct merge *m;
	struct pktbuf pb;
	struct mfx_out o;
	uint64_t n;

	sorted_spec(&s, cols, 1, false, false);
	ck_assert((m = merge_new(&s, 2, &opt, &err)) != NULL);	/* LIMIT 5 OFFSET 1 */
	ck_assert(!merge_buffered(m));
	mfx_feed_desc(m, 0, 1, &int4_oid, 0);
	mfx_feed_desc(m, 1, 1, &int4_oid, 0);
	for (const char *const *v = (const char *const[]){ "1", "3", "5", "7", "9", NULL }; *v;
	     v++)
		mfx_feed_text(m, 0, *v);
	mfx_feed_text(m, 1, "2");
	mfx_feed_text(m, 1, "4");
	mfx_feed_done(m, 1, "SELECT 2");
	pktbuf_init(&pb, 1024);
	ck_assert(merge_pull_rows(m, &pb, 2, &n, &err));
	memset(&o, 0, sizeof(o));
	mfx_read_out(&pb, &o, false);
	ck_assert_uint_eq(n, 2);
	ck_assert(!o.has_desc);
	ck_assert_str_eq(o.rows, "2;3");	/* 1 skipped by the OFFSET */
	ck_assert_int_eq(merge_state(m), MERGE_NEED_ROWS);
	ck_assert_uint_eq(merge_queued(m, 0), 3);	/* 5, 7, 9 */
	pktbuf_reset(&pb);
	ck_assert(merge_pull_rows(m, &pb, 10, &n, &err));
	memset(&o, 0, sizeof(o));
	mfx_read_out(&pb, &o, false);
	ck_assert_uint_eq(n, 3);
	ck_assert_str_eq(o.rows, "4;5;7");	/* the LIMIT: done, and no tag */
	ck_assert_str_eq(o.tag, "");
	ck_assert_int_eq(merge_state(m), MERGE_DONE);
	pktbuf_reset(&pb);
	ck_assert(merge_pull_rows(m, &pb, 10, &n, &err));
	ck_assert_uint_eq(n, 0);
	ck_assert_uint_eq(pb.len, 0);
	pktbuf_cleanup(&pb);
	merge_free(m);
}
END_TEST

START_TEST(test_pull_rows_buffered)
{
	static const uint32_t oids[] = { 23, 20, 23 };	/* g, count(*), g (the group key) */
	static const char *const s0[] = { "1", "2", "1", "3", "1", "3" };
	static const char *const s1[] = { "1", "4", "1", "2", "5", "2" };
	struct merge_options opt = { .collation = "C", .limit = -1, .omit_tail = true };
	struct plan_merge s;
	struct nk_error err;
	struct merge *m;
	struct pktbuf pb;
	struct mfx_out o;
	uint64_t n;

	mfx_spec_of("SELECT g, count(*) FROM t GROUP BY g", &s);
	ck_assert((m = merge_new(&s, 2, &opt, &err)) != NULL);
	ck_assert(merge_buffered(m));
	mfx_feed_all_text(m, 0, 3, oids, s0, 2);
	mfx_feed_all_text(m, 1, 3, oids, s1, 2);
	pktbuf_init(&pb, 1024);
	ck_assert(merge_pull_rows(m, &pb, 1, &n, &err));
	memset(&o, 0, sizeof(o));
	mfx_read_out(&pb, &o, false);
	ck_assert(o.has_desc);
	ck_assert_str_eq(o.rows, "1|6");
	ck_assert_int_eq(merge_state(m), MERGE_NEED_ROWS);
	pktbuf_reset(&pb);
	ck_assert(merge_pull_rows(m, &pb, -1, &n, &err));
	memset(&o, 0, sizeof(o));
	mfx_read_out(&pb, &o, false);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(o.rows, "2|5;3|1");
	ck_assert_str_eq(o.tag, "");
	ck_assert_int_eq(merge_state(m), MERGE_DONE);
	pktbuf_cleanup(&pb);
	merge_free(m);
}
END_TEST

START_TEST(test_group_combine)
{
	static const uint32_t oids[] = { 23, 20, 20, 25, 25, 16, 16, 25, 1007, 23 };
	static const char *const s0[] = {
		"1", "2", "5", "b", "d", "t", "t", "b-d", "{1,4}", "1",
		"2", "1", NULL, NULL, NULL, NULL, NULL, NULL, "{NULL}", "2",
	};
	static const char *const s1[] = {
		"1", "3", "-2", "a", "c", "f", "f", "a-c-c", "{2,2,-6}", "1",
	};
	static const char *const s2[] = {
		"3", "1", "7", "z", "z", "t", "t", "z", "{7}", "3",
		"2", "2", "4", "m", "n", "f", "t", "m-n", "{NULL,4}", "2",
	};
	struct plan_merge s;
	struct merge *m;
	struct pktbuf pb;
	struct mfx_out o;

	mfx_spec_of("SELECT g, count(*), sum(x), min(s), max(s), bool_and(b), bool_or(b), "
		"string_agg(s, '-'), array_agg(x) FROM t GROUP BY g", &s);
	ck_assert_uint_eq(s.ncols, 10);
	ck_assert_uint_eq(s.nvisible, 9);
	ck_assert(s.grouped);
	m = mfx_new_merge(&s, 3, -1, 0);
	mfx_feed_all_text(m, 0, 10, oids, s0, 2);
	mfx_feed_all_text(m, 1, 10, oids, s1, 1);
	mfx_feed_all_text(m, 2, 10, oids, s2, 2);
	ck_assert_int_eq(merge_state(m), MERGE_NEED_ROWS);
	ck_assert(merge_final_sql(m) == NULL);
	pktbuf_init(&pb, 1024);
	mfx_pull(m, &pb);
	memset(&o, 0, sizeof(o));
	mfx_read_out(&pb, &o, false);
	ck_assert_uint_eq(o.ncols, 9);
	ck_assert_str_eq(o.rows, "1|5|3|a|d|f|t|b-d-a-c-c|{1,4,2,2,-6};"
				 "2|3|4|m|n|f|t|m-n|{NULL,NULL,4};"
				 "3|1|7|z|z|t|t|z|{7}");
	ck_assert_str_eq(o.tag, "SELECT 3");
	pktbuf_cleanup(&pb);
	merge_free(m);
}
END_TEST

START_TEST(test_numeric_sum_and_empty)
{
	static const uint32_t oids[] = { 1700, 20, 1700 };
	static const char *const s0[] = { "1.50", "2", "-3" };
	static const char *const s1[] = { "-0.125", "1", NULL };
	static const char *const s2[] = { "99999999999999999999.5", "3", "0.001" };
	static const char *const empty[] = { NULL, "0", NULL };
	struct plan_merge s;
	struct merge *m;
	struct pktbuf pb;
	struct mfx_out o;

	mfx_spec_of("SELECT sum(n), count(n), max(n) FROM t", &s);
	m = mfx_new_merge(&s, 4, -1, 0);
	mfx_feed_all_text(m, 0, 3, oids, s0, 1);
	mfx_feed_all_text(m, 1, 3, oids, s1, 1);
	mfx_feed_all_text(m, 2, 3, oids, s2, 1);
	mfx_feed_all_text(m, 3, 3, oids, empty, 1);
	pktbuf_init(&pb, 1024);
	mfx_pull(m, &pb);
	memset(&o, 0, sizeof(o));
	mfx_read_out(&pb, &o, false);
	ck_assert_str_eq(o.rows, "100000000000000000000.875|6|0.001");
	ck_assert_str_eq(o.tag, "SELECT 1");
	pktbuf_cleanup(&pb);
	merge_free(m);
}
END_TEST

START_TEST(test_final_sql_avg_having)
{
	static const uint32_t oids[] = { 23, 1700, 20, 20, 23, 20 };
	/* g, avg(x) (ignored), sum(x), count(x), g (group key), count(*) */
	static const char *const s0[] = { "1", "1.5", "3", "2", "1", "2", "2", "5", "5", "1",
					  "2", "1" };
	static const char *const s1[] = { "1", "4", "4", "1", "1", "1", "3", NULL, NULL, "0",
					  "3", "1" };
	struct plan_merge s;
	struct merge *m;
	struct pktbuf pb;
	struct mfx_out o;
	struct mfx_val v[2];

	mfx_spec_of("SELECT g, avg(x) FROM t GROUP BY g HAVING count(*) > 1 ORDER BY 2 DESC", &s);
	ck_assert_uint_eq(s.ncols, 6);
	ck_assert_str_eq(s.shard_sql, "SELECT g, avg(x) FILTER (WHERE false), sum((x) * 1::int2), "
				      "count(x), g, count(*) FROM t GROUP BY g HAVING (count(*) > 1) "
				      "OR true ");
	m = mfx_new_merge(&s, 2, -1, 0);
	mfx_feed_all_text(m, 0, 6, oids, s0, 2);
	mfx_feed_all_text(m, 1, 6, oids, s1, 2);
	ck_assert_int_eq(merge_state(m), MERGE_NEED_FINAL);
	ck_assert_str_eq(merge_final_sql(m),
			 "SELECT ( (__neki_v.c2 / __neki_v.c3) ), ( __neki_v.c5 > 1) FROM (VALUES "
			 "(1, '7'::numeric, '3'::numeric, '3'::int8), (2, '5'::numeric, "
			 "'1'::numeric, '1'::int8), (3, NULL::numeric, '0'::numeric, '1'::int8)) "
			 "AS __neki_v(n, c2, c3, c5) ORDER BY __neki_v.n");
	pktbuf_init(&pb, 1024);
	mfx_pull(m, &pb);
	ck_assert_uint_eq(pb.len, 0);	/* nothing before the final query's result */
	v[0] = (struct mfx_val){ "2.3333333333333333", 0 };
	v[1] = (struct mfx_val){ "t", 0 };
	mfx_feed_desc(m, MERGE_FINAL, 2, (const uint32_t[]){ 1700, 16 }, 0);
	for (int r = 0; r < 3; r++) {
		struct pktbuf row;
		struct proto_value pv[2] = {
			{ (const uint8_t *)(r == 0 ? v[0].p : r == 1 ? "5.0000000000000000" : NULL),
			  0 },
			{ (const uint8_t *)(r == 0 ? "t" : "f"), 1 },
		};

		pv[0].len = pv[0].p ? (uint32_t)strlen((const char *)pv[0].p) : 0;
		pktbuf_init(&row, 64);
		pktbuf_write_data_row(&row, pv, 2);
		mfx_feed_msg(m, MERGE_FINAL, &row);
		pktbuf_cleanup(&row);
	}
	mfx_feed_done(m, MERGE_FINAL, "SELECT 3");
	mfx_pull(m, &pb);
	memset(&o, 0, sizeof(o));
	mfx_read_out(&pb, &o, false);
	ck_assert_uint_eq(o.ncols, 2);
	ck_assert_str_eq(o.rows, "1|2.3333333333333333");	/* HAVING dropped g 2 and 3 */
	ck_assert_str_eq(o.tag, "SELECT 1");
	ck_assert_int_eq(merge_state(m), MERGE_DONE);
	pktbuf_cleanup(&pb);
	merge_free(m);
}
END_TEST

START_TEST(test_distinct_and_distinct_on)
{
	static const uint32_t num[] = { 1700 };
	static const char *const d0[] = { "1.0", "2" };
	static const char *const d1[] = { "1.00", "3", "2" };
	static const uint32_t two[] = { 23, 23 };
	static const char *const o0[] = { "1", "5", "1", "2", "2", "9" };
	static const char *const o1[] = { "1", "7", "3", "1" };
	struct plan_merge s;
	struct merge *m;
	struct pktbuf pb;
	struct mfx_out o;

	mfx_spec_of("SELECT DISTINCT n FROM t ORDER BY n", &s);
	ck_assert(s.distinct);
	m = mfx_new_merge(&s, 2, -1, 0);
	mfx_feed_all_text(m, 0, 1, num, d0, 2);
	mfx_feed_all_text(m, 1, 1, num, d1, 3);
	pktbuf_init(&pb, 1024);
	mfx_pull(m, &pb);
	memset(&o, 0, sizeof(o));
	mfx_read_out(&pb, &o, false);
	ck_assert_str_eq(o.rows, "1.0;2;3");	/* 1.0 = 1.00 */
	merge_free(m);

	mfx_spec_of("SELECT DISTINCT ON (g) g, id FROM t ORDER BY g, id DESC", &s);
	ck_assert_uint_eq(s.distinct_on, 1);
	m = mfx_new_merge(&s, 2, -1, 0);
	mfx_feed_all_text(m, 0, 2, two, o0, 3);
	mfx_feed_all_text(m, 1, 2, two, o1, 2);
	pktbuf_reset(&pb);
	mfx_pull(m, &pb);
	memset(&o, 0, sizeof(o));
	mfx_read_out(&pb, &o, false);
	ck_assert_str_eq(o.rows, "1|7;2|9;3|1");
	ck_assert_str_eq(o.tag, "SELECT 3");
	pktbuf_cleanup(&pb);
	merge_free(m);
}
END_TEST

START_TEST(test_binary_combine)
{
	static const uint32_t oids[] = { 20, 1700 };
	struct plan_merge s;
	struct merge *m;
	struct pktbuf pb;
	struct mfx_out o;

	mfx_spec_of("SELECT count(*), sum(big) FROM t", &s);
	m = mfx_new_merge(&s, 2, -1, 0);
	mfx_feed_desc(m, 0, 2, oids, 1);
	mfx_feed_desc(m, 1, 2, oids, 1);
	/* 2 + 3; 1.5 + (-2) */
	mfx_feed_row(m, 0, 2, (const struct mfx_val[]){ { "\0\0\0\0\0\0\0\2", 8 },
						 { "\x00\x02\x00\x00\x00\x00\x00\x01\x00\x01\x13\x88",
						   12 } });
	mfx_feed_row(m, 1, 2, (const struct mfx_val[]){ { "\0\0\0\0\0\0\0\3", 8 },
						 { "\x00\x01\x00\x00\x40\x00\x00\x00\x00\x02", 10 } });
	mfx_feed_done(m, 0, "SELECT 1");
	mfx_feed_done(m, 1, "SELECT 1");
	pktbuf_init(&pb, 1024);
	mfx_pull(m, &pb);
	memset(&o, 0, sizeof(o));
	mfx_read_out(&pb, &o, true);
	/* 5; -0.5 = ndigits 1, weight -1, NEG, dscale 1, 5000 */
	ck_assert_str_eq(o.rows, "0000000000000005|0001ffff400000011388");
	pktbuf_cleanup(&pb);
	merge_free(m);
}
END_TEST

START_TEST(test_unknown_collation_refused)
{
	struct plan_merge s;
	struct plan_merge_col cols[1];
	struct merge_options opt = { .collation = "xx_NOWHERE.UTF-8", .limit = -1 };
	struct nk_error err;

	sorted_spec(&s, cols, 1, false, false);
	ck_assert(merge_new(&s, 2, &opt, &err) == NULL);
	ck_assert_str_eq(err.sqlstate, "0A000");
	ck_assert(strstr(err.message, "xx_NOWHERE.UTF-8") != NULL);
}
END_TEST

/* A DataRow of one text value <v> fed to shard <shard> of <m>; merge_feed's result. */
static bool
feed_one(struct merge *m, uint32_t shard, const char *v, struct nk_error *err)
{
	struct proto_value pv = { (const uint8_t *)v, (uint32_t)strlen(v) };
	struct pktbuf pb;
	bool ok;

	pktbuf_init(&pb, 64);
	pktbuf_write_data_row(&pb, &pv, 1);
	ok = merge_feed(m, shard, 'D', pb.buf + 5, pb.len - 5, err);
	pktbuf_cleanup(&pb);
	return ok;
}

/* router_work_mem: a buffered merge holding more than mem_max bytes fails with 53400. */
START_TEST(test_mem_bound)
{
	static const uint32_t oid = 25;
	struct merge_options opt = { .collation = "C", .limit = -1, .mem_max = 4096 };
	char v[200];
	struct plan_merge s;
	struct nk_error err;
	struct merge *m;
	uint32_t i;

	mfx_spec_of("SELECT DISTINCT s FROM t", &s);
	m = merge_new(&s, 2, &opt, &err);
	ck_assert_ptr_nonnull(m);
	mfx_feed_desc(m, 0, 1, &oid, 0);
	memset(v, 'x', sizeof(v) - 1);
	v[sizeof(v) - 1] = '\0';
	for (i = 0; i < 100 && feed_one(m, 0, v, &err); i++)
		;
	ck_assert_uint_lt(i, 30);	/* about 4096 / 200 rows */
	ck_assert_str_eq(err.sqlstate, "53400");
	ck_assert(strstr(err.message, "router_work_mem") != NULL);
	ck_assert(strstr(err.detail, "router_work_mem is 4096 bytes") != NULL);
	ck_assert(strstr(err.hint, "Raise router_work_mem") != NULL);
	merge_free(m);
}
END_TEST

/* Malformed array, interval, inet, time, range, "char" and money values are errors, not
 * crashes. */
START_TEST(test_malformed_values)
{
	static const struct { uint32_t oid; const char *v; } bad[] = {
		{ 1007, "{1,2" }, { 1007, "1,2}" }, { 1007, "{{1},{2}}}" }, { 1007, "[1:2={1}" },
		{ 1007, "{\"1}" }, { 1007, "{,}" }, { 1007, "{{{{{{{1}}}}}}}" },
		{ 1186, "@ 1 day" }, { 1186, "P1D" }, { 1186, "1 fortnight" },
		{ 869, "10.0.0.300" }, { 869, "hello" }, { 1083, "noon" }, { 1266, "12:00:00" },
		{ 3906, "[1,2" }, { 3906, "1,2)" }, { 3906, "[\"1,2)" }, { 3906, "[1,2,3)" },
		{ 3906, "[x,2)" }, { 18, "ab" }, { 790, "free" },
		{ 20, "9223372036854775808" }, { 20, "-9223372036854775809" }, { 20, "" },
		{ 20, "-" }, { 23, "12a" }, { 23, " 5" }, { 20, "99999999999999999999" },
	};
	struct plan_merge s;
	struct plan_merge_col cols[1];
	struct nk_error err;

	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		struct merge *m;
		bool ok;

		sorted_spec(&s, cols, 1, false, false);
		m = mfx_new_merge(&s, 2, -1, 0);
		mfx_feed_desc(m, 0, 1, &bad[k].oid, 0);
		mfx_feed_desc(m, 1, 1, &bad[k].oid, 0);
		ok = feed_one(m, 0, bad[k].v, &err) && feed_one(m, 1, bad[k].v, &err);
		if (ok) {	/* the comparison happens when both heads are there */
			struct pktbuf pb;

			pktbuf_init(&pb, 64);
			ok = merge_pull(m, &pb, &err);
			pktbuf_cleanup(&pb);
		}
		ck_assert_msg(!ok, "%u '%s' accepted", bad[k].oid, bad[k].v);
		ck_assert(strcmp(err.sqlstate, "XX000") == 0 || strcmp(err.sqlstate, "0A000") == 0);
		merge_free(m);
	}
}
END_TEST

/* ---- the merge spec and the shard query ---- */

struct spec_case {
	const char *sql, *shard_sql;
	uint32_t nvisible, ncols, nsort;
	bool grouped, distinct;
};

static const struct spec_case spec_cases[] = {
	{ "SELECT id, name FROM t", "SELECT id, name FROM t", 2, 2, 0, false, false },
	{ "SELECT id FROM t ORDER BY lower(name) DESC LIMIT 10 OFFSET 5",
	  "SELECT id, lower(name) FROM t ORDER BY lower(name) DESC LIMIT 15 ", 1, 2, 1, false,
	  false },
	{ "SELECT id AS k FROM t ORDER BY k LIMIT $1 OFFSET $2 FOR UPDATE",
	  "SELECT id AS k FROM t ORDER BY k LIMIT ($1::int8 + $2::int8) FOR UPDATE", 1, 1, 1,
	  false, false },
	{ "SELECT id FROM t ORDER BY id OFFSET 3", "SELECT id FROM t ORDER BY id ", 1, 1, 1,
	  false, false },
	{ "SELECT id FROM t ORDER BY id FETCH FIRST 4 ROWS ONLY;",
	  "SELECT id FROM t ORDER BY id LIMIT 4 ;", 1, 1, 1, false, false },
	{ "SELECT g, count(*) FROM t WHERE x > 0 GROUP BY g HAVING sum(x) > 2 ORDER BY 2 LIMIT 3",
	  "SELECT g, count(*), g, sum(x) FROM t WHERE x > 0 GROUP BY g HAVING (sum(x) > 2) OR true ",
	  2, 4, 1, true, false },
	{ "SELECT count(*) * 2 FROM t", "SELECT count(*) * 2, count(*) FROM t", 1, 2, 0, true,
	  false },
	{ "SELECT string_agg(s, ';' ORDER BY b COLLATE \"C\" DESC, c) FROM t",
	  "SELECT string_agg(s, ';' ORDER BY b COLLATE \"C\" DESC, c) FILTER (WHERE false), "
	  "array_agg((b COLLATE \"C\") ORDER BY b COLLATE \"C\" DESC, c), "
	  "array_agg((c) ORDER BY b COLLATE \"C\" DESC, c), "
	  "array_agg((s) ORDER BY b COLLATE \"C\" DESC, c) FROM t", 1, 4, 0, true, false },
	{ "SELECT g, count(DISTINCT x) FILTER (WHERE y) FROM t GROUP BY g",
	  "SELECT g, count(DISTINCT x) FILTER (WHERE false), array_agg(DISTINCT x) FILTER (WHERE y), "
	  "g FROM t GROUP BY g", 2, 4, 0, true, false },
	{ "SELECT DISTINCT g FROM t ORDER BY g", "SELECT DISTINCT g FROM t ORDER BY g", 1, 1, 1,
	  false, true },
	{ "SELECT a FROM t UNION ALL SELECT b FROM u UNION SELECT c FROM v",
	  "SELECT a FROM t UNION ALL SELECT b FROM u UNION SELECT c FROM v", 1, 1, 0, false, true },
	{ "SELECT a FROM t UNION SELECT DISTINCT b FROM u", "SELECT a FROM t UNION SELECT DISTINCT b "
	  "FROM u", 1, 1, 0, false, true },
	{ "SELECT a FROM t UNION SELECT b FROM u ORDER BY 1 LIMIT 2",
	  "SELECT a FROM t UNION SELECT b FROM u ORDER BY 1 LIMIT 2 ", 1, 1, 1, false, true },
	{ "SELECT 'x,(y' AS \"a,b\", $$;$$ FROM t -- c, d\n ORDER BY 1",
	  "SELECT 'x,(y' AS \"a,b\", $$;$$ FROM t -- c, d\n ORDER BY 1", 2, 2, 1, false, false },
	{ "SELECT * FROM t ORDER BY id DESC", "SELECT *, id FROM t ORDER BY id DESC", 1, 2, 1,
	  false, false },
	/* a window partitioned by the shard key (the planner let each shard run it) */
	{ "SELECT k, rank() OVER (PARTITION BY k ORDER BY a) AS r FROM t ORDER BY r, 1 LIMIT 2",
	  "SELECT k, rank() OVER (PARTITION BY k ORDER BY a) AS r FROM t ORDER BY r, 1 LIMIT 2 ",
	  2, 2, 2, false, false },
	{ "WITH c AS (SELECT * FROM t ORDER BY id LIMIT 5) SELECT id FROM c ORDER BY id",
	  "WITH c AS (SELECT * FROM t ORDER BY id LIMIT 5) SELECT id FROM c ORDER BY id", 1, 1, 1,
	  false, false },
};

START_TEST(test_spec)
{
	const struct spec_case *c = &spec_cases[_i];
	struct plan_merge s;

	mfx_spec_of(c->sql, &s);
	ck_assert_str_eq(s.shard_sql, c->shard_sql);
	ck_assert_uint_eq(s.nvisible, c->nvisible);
	ck_assert_uint_eq(s.ncols, c->ncols);
	ck_assert_uint_eq(s.nsort, c->nsort);
	ck_assert_int_eq(s.grouped, c->grouped);
	ck_assert_int_eq(s.distinct, c->distinct);
}
END_TEST

static void
same_expr(const struct plan_merge_expr *a, const struct plan_merge_expr *b)
{
	ck_assert_uint_eq(a->nagg, b->nagg);
	ck_assert((a->text == NULL) == (b->text == NULL));
	for (uint32_t i = 0; a->text != NULL && i <= a->nagg; i++)
		ck_assert_pstr_eq(a->text[i], b->text[i]);
	for (uint32_t i = 0; i < a->nagg; i++)
		ck_assert_uint_eq(a->agg[i], b->agg[i]);
}

/* Every field of <a> and <b> the same, and none of <b>'s arrays the memory of <a>'s. */
static void
same_spec(const struct plan_merge *a, const struct plan_merge *b)
{
	ck_assert_str_eq(a->shard_sql, b->shard_sql);
	ck_assert_ptr_ne(a->shard_sql, b->shard_sql);
	ck_assert(a->nvisible == b->nvisible && a->star == b->star && a->ncols == b->ncols &&
		  a->naggs == b->naggs && a->grouped == b->grouped && a->ngroup == b->ngroup &&
		  a->has_having == b->has_having && a->nsort == b->nsort &&
		  a->distinct == b->distinct && a->distinct_on == b->distinct_on);
	ck_assert(memcmp(&a->limit, &b->limit, sizeof(a->limit)) == 0 &&
		  memcmp(&a->offset, &b->offset, sizeof(a->offset)) == 0);
	for (uint32_t i = 0; i < a->ncols; i++) {
		ck_assert(a->cols[i].kind == b->cols[i].kind && a->cols[i].agg == b->cols[i].agg);
		same_expr(&a->cols[i].expr, &b->cols[i].expr);
	}
	for (uint32_t i = 0; i < a->naggs; i++) {
		const struct plan_merge_agg *x = &a->aggs[i], *y = &b->aggs[i];

		ck_assert(x->kind == y->kind && x->col == y->col && x->col2 == y->col2 &&
			  x->col3 == y->col3 && x->nkeys == y->nkeys && x->keycol == y->keycol &&
			  x->sample == y->sample && x->root == y->root && x->carrier == y->carrier);
		ck_assert_pstr_eq(x->delim, y->delim);
		ck_assert_pstr_eq(x->final, y->final);
	}
	ck_assert(a->ngroup == 0 || memcmp(a->group_cols, b->group_cols,
					   a->ngroup * sizeof(*a->group_cols)) == 0);
	ck_assert(a->nsort == 0 || memcmp(a->sort, b->sort, a->nsort * sizeof(*a->sort)) == 0);
	same_expr(&a->having, &b->having);
}

/* plan_merge_cached gives plan_merge_build's spec, built (a miss) or copied (a hit, the
 * caller's arena reset between: the cache keeps its own copy). */
START_TEST(test_spec_cached)
{
	static const char *const more[] = {
		"SELECT g, avg(x), stddev(x), string_agg(y, ',' ORDER BY y DESC) FROM t GROUP BY g "
		"HAVING count(DISTINCT y) > 1 ORDER BY g LIMIT $1",
		"SELECT DISTINCT ON (a) a, b FROM t ORDER BY a, b DESC",
		"SELECT a FROM t UNION SELECT b FROM u ORDER BY 1",
	};
	const char *sql = _i < (int)NK_ARRAY_LEN(spec_cases) ? spec_cases[_i].sql :
			  more[_i - NK_ARRAY_LEN(spec_cases)];
	struct rarena *a = rarena_new(), *b = rarena_new();
	struct plan_merge built, cached;
	struct nk_error err;

	ck_assert(plan_merge_build(a, sql, &built, &err));
	for (int round = 0; round < 2; round++) {
		rarena_reset(b);
		ck_assert_msg(plan_merge_cached(b, sql, &cached, &err), "%s: %s", sql, err.message);
		same_spec(&built, &cached);
	}
	rarena_free(a);
	rarena_free(b);
}
END_TEST

struct refuse_case {
	const char *sql, *sqlstate;
	int code;
};

static const struct refuse_case refuse_cases[] = {
	{ "SELECT a FROM t INTERSECT SELECT b FROM u", "NK013", 124 },
	{ "SELECT a FROM t EXCEPT ALL SELECT b FROM u", "NK013", 124 },
	{ "SELECT a, count(*) FROM t GROUP BY CUBE (a)", "NK013", 125 },
	{ "SELECT a FROM t TABLESAMPLE system (10)", "NK013", 126 },
	{ "SELECT a FROM t ORDER BY a FETCH FIRST 2 ROWS WITH TIES", "NK013", 138 },
	{ "SELECT my_agg(DISTINCT a) FROM t", "NK013", 212 },
	{ "SELECT corr(a, b) FROM t", "0A000", 0 },
	{ "SELECT count(DISTINCT a, b) FROM t", "0A000", 0 },
	{ "SELECT array_agg(a ORDER BY b USING <) FROM t", "0A000", 0 },
	{ "SELECT string_agg(a, b) FROM t", "0A000", 0 },
	{ "SELECT a % 2, count(*) FROM t GROUP BY a % 2 HAVING a % 2 = 1", "0A000", 0 },
	{ "SELECT a FROM t UNION SELECT b FROM u UNION ALL SELECT c FROM v", "0A000", 0 },
	{ "SELECT count(*) FROM t UNION ALL SELECT count(*) FROM u", "0A000", 0 },
	{ "SELECT a FROM t UNION SELECT max(b) FROM u GROUP BY c", "0A000", 0 },
	{ "SELECT a FROM t UNION ALL (SELECT b FROM u LIMIT 2)", "0A000", 0 },
	{ "SELECT a FROM t UNION ALL SELECT DISTINCT b FROM u", "0A000", 0 },
	{ "SELECT a FROM t UNION ALL (SELECT b FROM u UNION SELECT c FROM v)", "0A000", 0 },
	{ "SELECT a FROM t ORDER BY a LIMIT (SELECT 1)", "0A000", 0 },
	{ "SELECT *, count(*) FROM t GROUP BY id", "0A000", 0 },
	{ "SELECT *, a AS k FROM t ORDER BY k", "0A000", 0 },
	{ "INSERT INTO t VALUES (1)", "0A000", 0 },
	{ "SELEC 1", "42601", 0 },
};

START_TEST(test_spec_refused)
{
	const struct refuse_case *c = &refuse_cases[_i];
	struct plan_merge s;
	struct nk_error err;

	ck_assert_msg(!plan_merge_build(mfx_arena(), c->sql, &s, &err), "%s", c->sql);
	ck_assert_str_eq(err.sqlstate, c->sqlstate);
	ck_assert_int_eq(err.code, c->code);
}
END_TEST

START_TEST(test_spec_bind)
{
	struct plan_merge s;
	struct plan_input in;
	struct plan_param params[2] = {
		{ (const uint8_t *)"10", 2, false, 0 },
		{ (const uint8_t *)"\0\0\0\0\0\0\0\5", 8, true, 20 },
	};
	struct parse_norm norm;
	struct nk_error err;
	int64_t limit, offset;

	mfx_spec_of("SELECT id FROM t ORDER BY id LIMIT $1 OFFSET $2", &s);
	memset(&in, 0, sizeof(in));
	in.params = params;
	in.nparams = 2;
	ck_assert(plan_merge_bind(&s, &in, &limit, &offset, &err));
	ck_assert_int_eq(limit, 10);
	ck_assert_int_eq(offset, 5);
	params[0].len = -1;	/* LIMIT NULL: no limit */
	ck_assert(plan_merge_bind(&s, &in, &limit, &offset, &err));
	ck_assert_int_eq(limit, -1);

	/* simple protocol: normalised literals */
	ck_assert(parse_normalize(mfx_arena(), "SELECT id FROM t ORDER BY id LIMIT 7 OFFSET 2", &norm));
	mfx_spec_of(norm.key, &s);
	ck_assert_str_eq(s.shard_sql, "SELECT id FROM t ORDER BY id LIMIT ($1::int8 + $2::int8) ");
	memset(&in, 0, sizeof(in));
	in.norm = &norm;
	ck_assert(plan_merge_bind(&s, &in, &limit, &offset, &err));
	ck_assert_int_eq(limit, 7);
	ck_assert_int_eq(offset, 2);
}
END_TEST

START_TEST(test_star_widens_visible)
{
	static const uint32_t oids[] = { 23, 25, 23 };
	static const char *const s0[] = { "3", "c", "3", "1", "a", "1" };
	static const char *const s1[] = { "2", "b", "2" };
	struct plan_merge s;
	struct merge *m;
	struct pktbuf pb;
	struct mfx_out o;

	mfx_spec_of("SELECT * FROM t ORDER BY id DESC", &s);
	ck_assert(s.star);
	ck_assert(s.sort[0].hidden);
	m = mfx_new_merge(&s, 2, -1, 0);
	mfx_feed_all_text(m, 0, 3, oids, s0, 2);	/* * is (id, name); then the hidden id */
	mfx_feed_all_text(m, 1, 3, oids, s1, 1);
	pktbuf_init(&pb, 1024);
	mfx_pull(m, &pb);
	memset(&o, 0, sizeof(o));
	mfx_read_out(&pb, &o, false);
	ck_assert_uint_eq(o.ncols, 2);
	ck_assert_str_eq(o.rows, "3|c;2|b;1|a");
	pktbuf_cleanup(&pb);
	merge_free(m);
}
END_TEST

Suite *
merge_suite(void)
{
	Suite *s = suite_create("merge");
	TCase *tc = tcase_create("merge");

	tcase_add_checked_fixture(tc, NULL, mfx_free_arena);
	tcase_add_loop_test(tc, test_order_text, 0, NK_ARRAY_LEN(text_orders));
	tcase_add_loop_test(tc, test_order_binary, 0, NK_ARRAY_LEN(bin_orders));
	tcase_add_test(tc, test_nulls_first_and_ties);
	tcase_add_test(tc, test_streaming_limit_offset);
	tcase_add_test(tc, test_concatenation_streams);
	tcase_add_test(tc, test_group_combine);
	tcase_add_test(tc, test_numeric_sum_and_empty);
	tcase_add_test(tc, test_final_sql_avg_having);
	tcase_add_test(tc, test_distinct_and_distinct_on);
	tcase_add_test(tc, test_binary_combine);
	tcase_add_test(tc, test_unknown_collation_refused);
	tcase_add_test(tc, test_mem_bound);
	tcase_add_test(tc, test_malformed_values);
	tcase_add_test(tc, test_star_widens_visible);
	tcase_add_test(tc, test_pull_rows_in_parts);
	tcase_add_test(tc, test_pull_rows_buffered);
	tcase_add_loop_test(tc, test_spec, 0, NK_ARRAY_LEN(spec_cases));
	tcase_add_loop_test(tc, test_spec_cached, 0, NK_ARRAY_LEN(spec_cases) + 3);
	tcase_add_loop_test(tc, test_spec_refused, 0, NK_ARRAY_LEN(refuse_cases));
	tcase_add_test(tc, test_spec_bind);
	suite_add_tcase(s, tc);
	return s;
}
