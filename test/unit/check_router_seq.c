/*
 * check_router_seq.c - the sequence allocator (neki/sequence.h): values handed out once each
 * in reservation order across several runs, refill sizes (sequence_batch, CACHE, need), one
 * refill in flight per sequence, bad reservation rows, the reserve statement's quoting.
 * Added to the "router" suite by router_add_seq_tests(); the SQL itself runs against a real
 * server in test/routing/test_sequence_sql.py.
 */
#include "neki/base.h"

#include <check.h>
#include <stdio.h>
#include <string.h>

#include "neki/sequence.h"
#include "router_fixtures.h"

START_TEST(test_seq_take_runs)
{
	struct seq_alloc *a = seq_alloc_new(10);
	struct seq_entry *e = seq_alloc_get(a, "store", "public", "orders_id_seq");
	struct nk_error err;
	int64_t v[8];

	ck_assert_ptr_nonnull(e);
	ck_assert_ptr_eq(seq_alloc_get(a, "store", "public", "orders_id_seq"), e);
	ck_assert_ptr_ne(seq_alloc_get(a, "other", "public", "orders_id_seq"), e);
	ck_assert(!seq_take(e, 1, v));
	ck_assert_int_eq(seq_refill_begin(a, e, 1, 1), 10);
	ck_assert(seq_refill_pending(e));
	ck_assert_int_eq(seq_refill_begin(a, e, 1, 1), 0);	/* one refill at a time */
	ck_assert(seq_refill_add_run(e, "101", "3", "1", &err));
	ck_assert(seq_refill_add_run(e, "200", "2", "5", &err));
	seq_refill_end(e);
	ck_assert(!seq_refill_pending(e));
	ck_assert_uint_eq(seq_available(e), 5);
	ck_assert(!seq_take(e, 6, v));
	ck_assert_uint_eq(seq_available(e), 5);		/* all or nothing */
	ck_assert(seq_take(e, 4, v));
	ck_assert_int_eq(v[0], 101);
	ck_assert_int_eq(v[1], 102);
	ck_assert_int_eq(v[2], 103);
	ck_assert_int_eq(v[3], 200);
	ck_assert(seq_take(e, 1, v));
	ck_assert_int_eq(v[0], 205);
	ck_assert_uint_eq(seq_available(e), 0);
	ck_assert(!seq_take(e, 1, v));
	/* descending sequences */
	ck_assert_int_gt(seq_refill_begin(a, e, 1, 1), 0);
	ck_assert(seq_refill_add_run(e, "-1", "2", "-1", &err));
	seq_refill_end(e);
	ck_assert(seq_take(e, 2, v));
	ck_assert_int_eq(v[0], -1);
	ck_assert_int_eq(v[1], -2);
	seq_alloc_free(a);
}
END_TEST

START_TEST(test_seq_refill_size_and_rows)
{
	struct seq_alloc *a = seq_alloc_new(1000);
	struct seq_entry *e = seq_alloc_get(a, "d", "s", "q");
	struct nk_error err;

	ck_assert_int_eq(seq_refill_begin(a, e, 20, 1), 1000);	/* sequence_batch */
	seq_refill_end(e);
	ck_assert_int_eq(seq_refill_begin(a, e, 5000, 1), 5000);	/* CACHE is larger */
	seq_refill_end(e);
	ck_assert_int_eq(seq_refill_begin(a, e, 1, 2500), 2500);	/* one big INSERT */
	ck_assert(seq_refill_add_run(e, "1", "100", "1", &err));
	seq_refill_end(e);
	ck_assert_int_eq(seq_refill_begin(a, e, 1, 2500), 2400);
	seq_refill_end(e);
	ck_assert(!seq_refill_add_run(e, "x", "1", "1", &err));
	ck_assert_str_eq(err.sqlstate, "22P02");
	ck_assert(!seq_refill_add_run(e, "1", "0", "1", &err));
	ck_assert(!seq_refill_add_run(e, "1", "1", "0", &err));
	ck_assert(!seq_refill_add_run(e, NULL, "1", "1", &err));
	ck_assert_uint_eq(seq_available(e), 100);
	seq_alloc_free(a);
}
END_TEST

START_TEST(test_seq_many_sequences)
{
	struct seq_alloc *a = seq_alloc_new(1);
	struct nk_error err;
	char name[32];
	int64_t v;

	for (int i = 0; i < 200; i++) {
		struct seq_entry *e;

		snprintf(name, sizeof(name), "s%d", i);
		e = seq_alloc_get(a, "d", "public", name);
		ck_assert_ptr_nonnull(e);
		ck_assert(seq_refill_add_run(e, "7", "1", "1", &err));
		ck_assert_uint_eq(seq_available(e), 1);
	}
	for (int i = 0; i < 200; i++) {
		snprintf(name, sizeof(name), "s%d", i);
		ck_assert(seq_take(seq_alloc_get(a, "d", "public", name), 1, &v));
		ck_assert_int_eq(v, 7);
	}
	seq_alloc_free(a);
}
END_TEST

/* A setval() generation change drops the values reserved before it, also those of a
 * refill in flight; the same generation keeps them. */
START_TEST(test_seq_sync_drops)
{
	struct seq_alloc *a = seq_alloc_new(10);
	struct seq_entry *e = seq_alloc_get(a, "d", "public", "s");
	struct nk_error err;
	int64_t v;

	seq_sync(e, 3);
	ck_assert_int_gt(seq_refill_begin(a, e, 1, 1), 0);
	ck_assert(seq_refill_add_run(e, "1", "10", "1", &err));
	seq_refill_end(e);
	seq_sync(e, 3);
	ck_assert_uint_eq(seq_available(e), 10);
	ck_assert(seq_take(e, 1, &v));
	ck_assert_int_eq(v, 1);
	seq_sync(e, 4);					/* setval() somewhere */
	ck_assert_uint_eq(seq_available(e), 0);
	ck_assert(!seq_take(e, 1, &v));
	ck_assert_int_gt(seq_refill_begin(a, e, 1, 1), 0);	/* begun under 4 ... */
	seq_sync(e, 5);					/* ... another setval() meanwhile */
	ck_assert(seq_refill_add_run(e, "2", "9", "1", &err));
	seq_refill_end(e);
	ck_assert_uint_eq(seq_available(e), 0);		/* its rows are dropped */
	ck_assert_int_gt(seq_refill_begin(a, e, 1, 1), 0);
	ck_assert(seq_refill_add_run(e, "101", "10", "1", &err));
	seq_refill_end(e);
	ck_assert(seq_take(e, 1, &v));
	ck_assert_int_eq(v, 101);
	seq_alloc_free(a);
}
END_TEST

START_TEST(test_seq_reserve_sql)
{
	char buf[2048], small[64];

	ck_assert(seq_reserve_sql(buf, sizeof(buf), "public", "orders_id_seq", 1000));
	ck_assert_ptr_nonnull(strstr(buf, "pg_catalog.nextval('\"public\".\"orders_id_seq\"'"
					  "::pg_catalog.regclass)"));
	ck_assert_ptr_nonnull(strstr(buf, "generate_series(1, 1000)"));
	ck_assert(seq_reserve_sql(buf, sizeof(buf), "My\"Schema", "it's", 5));
	ck_assert_ptr_nonnull(strstr(buf, "'\"My\"\"Schema\".\"it''s\"'::pg_catalog.regclass"));
	ck_assert(!seq_reserve_sql(small, sizeof(small), "public", "s", 5));
	ck_assert(!seq_reserve_sql(buf, sizeof(buf), "public", "s", 0));
	ck_assert_ptr_nonnull(strstr(seq_uuidv7_sql(), "FUNCTION public.uuidv7()"));
}
END_TEST

/* router_add_seq_tests: see router_fixtures.h. */
void
router_add_seq_tests(Suite *s)
{
	TCase *tc = tcase_create("sequence");

	tcase_add_test(tc, test_seq_take_runs);
	tcase_add_test(tc, test_seq_refill_size_and_rows);
	tcase_add_test(tc, test_seq_many_sequences);
	tcase_add_test(tc, test_seq_sync_drops);
	tcase_add_test(tc, test_seq_reserve_sql);
	suite_add_tcase(s, tc);
}
