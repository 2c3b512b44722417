/*
 * check_router_multikey.c - tables sharded by an expression over two columns (spec 2.5 V3,
 * `"columns": ["a + b"]`): INSERT ... VALUES is 10, INSERT ... SELECT 117, `=` on one base
 * column scatters, `=` on every base column is 115, UPDATE assigning a base column is 145
 * (even without WHERE), MERGE inserting into one is 10, COPY 45, and a plan asked to route
 * one value of such a key refuses instead of reading a second one. Its own topology; added
 * to the "router" suite by router_add_multikey_tests().
 */
#include "neki/base.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "neki/plan.h"
#include "neki/topology.h"
#include "neki/topology_image.h"
#include "router_fixtures.h"
#include "topo_fixtures.h"

/* Database app: pairs and pairs2 (group pair, xxhash over a + b), singles (the same group,
 * xxhash over a alone). */
static const char mk_topology[] =
	"{'authoritative_shard_group':'authoritative','default_shard_group':'authoritative',"
	"'shard_groups':[{'uid':'authoritative','key_ranges':[{'shard_uid':'auth'}]},"
	"{'uid':'pair','default_shard_index':'by_sum','key_ranges':["
	"{'shard_uid':'shard-a','end':'40'},{'shard_uid':'shard-b','start':'40','end':'80'},"
	"{'shard_uid':'shard-c','start':'80','end':'c0'},{'shard_uid':'shard-d','start':'c0'}]}],"
	"'shard_indexes':{'by_sum':{'type':'xxhash','columns':['a + b']},"
	"'by_a':{'type':'xxhash','columns':['a']}},"
	"'databases':{'app':{'schemas':{'public':{'tables':{"
	"'pairs':{'shard_group':'pair'},'pairs2':{'shard_group':'pair'},"
	"'singles':{'shard_group':'pair','shard_index':'by_a'}}}}}}}";

#define MK_ALL "shard-a,shard-b,shard-c,shard-d"

static void *mimg;

/* Every table has columns a int8, b int8, v text. */
static uint32_t
mk_column_type(void *arg, const char *schema, const char *table, const char *column)
{
	(void)arg;
	(void)schema;
	(void)table;
	return strcmp(column, "v") == 0 ? 25 : strcmp(column, "a") == 0 ||
	       strcmp(column, "b") == 0 ? 20 : 0;
}

static const char *
mk_column_name(void *arg, const char *schema, const char *table, uint32_t attnum)
{
	static const char *const names[] = { "a", "b", "v" };

	(void)arg;
	(void)schema;
	(void)table;
	return attnum >= 1 && attnum <= 3 ? names[attnum - 1] : NULL;
}

static const struct plan_catalog mk_cat = { NULL, mk_column_type, mk_column_name, NULL, 1,
					    NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL };

static void
setup_mk_image(void)
{
	struct nk_error err;
	struct topo_model *m = fx_check(mk_topology, NULL, false, &err);
	size_t size;

	ck_assert_msg(m != NULL, "%s", err.message);
	size = topo_image_size(m);
	mimg = aligned_alloc(8, (size + 7) & ~(size_t)7);
	ck_assert_ptr_nonnull(mimg);
	ck_assert_int_eq(topo_image_build(m, 1, mimg, size), (ssize_t)size);
	topo_model_free(m);
}

static void
teardown_mk_image(void)
{
	free(mimg);
	mimg = NULL;
}

static void
mk_input(struct plan_input *in, struct plan_session *sess, struct rt_fx *fx,
	 const struct plan_param *params, uint32_t nparams)
{
	plan_session_init(sess, "app");
	memset(in, 0, sizeof(*in));
	in->topo = mimg;
	in->cat = &mk_cat;
	in->sess = sess;
	in->params = params;
	in->nparams = nparams;
	in->norm = &fx->norm;
}

/* The shards of <p>, comma-separated, into <out>. */
static void
mk_shards(const struct plan *p, char *out, size_t cap)
{
	size_t len = 0;

	out[0] = '\0';
	for (uint32_t i = 0; i < p->nshards && len < cap; i++)
		len += (size_t)snprintf(out + len, cap - len, "%s%s", i ? "," : "", p->shards[i]);
}

struct mk_case {
	const char *sql;
	int code;		/* NK013 code expected; 0: planned */
	enum plan_kind kind;	/* when planned */
	const char *shards;
};

static const struct mk_case mk_cases[] = {
	{ "INSERT INTO pairs (a, b, v) VALUES (1, 2, 'x')", 10, 0, NULL },
	{ "INSERT INTO pairs VALUES (1, 2, 'x'), (3, 4, 'y')", 10, 0, NULL },
	{ "INSERT INTO pairs (v) VALUES ('x')", 10, 0, NULL },
	{ "INSERT INTO pairs DEFAULT VALUES", 10, 0, NULL },
	{ "INSERT INTO pairs (a, b) VALUES ($1, $2)", 10, 0, NULL },
	{ "INSERT INTO pairs (a, b) VALUES (1, 2) ON CONFLICT DO NOTHING", 10, 0, NULL },
	{ "INSERT INTO pairs (a, b) VALUES (1, 2) ON CONFLICT (a) DO UPDATE SET b = 3", 10, 0,
	  NULL },
	{ "INSERT INTO pairs SELECT a, b, v FROM singles", 117, 0, NULL },
	{ "INSERT INTO pairs (a, b) SELECT 1, 2", 117, 0, NULL },
	{ "SELECT * FROM pairs WHERE a = 1", 0, PLAN_SCATTER, MK_ALL },
	{ "SELECT * FROM pairs WHERE b = $1", 0, PLAN_SCATTER, MK_ALL },
	{ "SELECT * FROM pairs WHERE a + b = 3", 0, PLAN_SCATTER, MK_ALL },
	{ "SELECT * FROM pairs WHERE a > 1 AND b > 2", 0, PLAN_SCATTER, MK_ALL },
	{ "SELECT * FROM pairs WHERE a IN (1, 2) AND b = 2", 0, PLAN_SCATTER, MK_ALL },
	{ "SELECT * FROM pairs WHERE a = 1 OR b = 2", 0, PLAN_SCATTER, MK_ALL },
	/* equal a values do not meet on one shard */
	{ "SELECT * FROM pairs p JOIN singles s ON s.a = p.a WHERE s.a = 1", 113, 0, NULL },
	{ "SELECT * FROM pairs WHERE a = 1 AND b = 2", 115, 0, NULL },
	{ "SELECT * FROM pairs p WHERE p.b = $1 AND v = 'x' AND p.a = $2", 115, 0, NULL },
	{ "SELECT * FROM pairs WHERE (a = 1 AND b = 2) OR v = 'x'", 115, 0, NULL },
	{ "SELECT * FROM singles s JOIN pairs p ON p.a = 1 AND p.b = 2", 115, 0, NULL },
	{ "DELETE FROM pairs WHERE a = 1", 0, PLAN_SCATTER, MK_ALL },
	{ "DELETE FROM pairs WHERE b = 2 AND a = 1", 115, 0, NULL },
	{ "UPDATE pairs SET v = 'y' WHERE a = 1", 0, PLAN_SCATTER, MK_ALL },
	{ "UPDATE pairs SET v = 'y' WHERE a = 1 AND b = 2", 115, 0, NULL },
	{ "UPDATE pairs SET b = 5", 145, 0, NULL },
	{ "UPDATE pairs SET a = 1 WHERE a = 1", 145, 0, NULL },
	{ "UPDATE pairs SET v = 'z', b = b + 1 WHERE v = 'y'", 145, 0, NULL },
	{ "MERGE INTO pairs p USING singles s ON p.a = s.a WHEN NOT MATCHED THEN "
	  "INSERT VALUES (s.a, s.b, s.v)", 10, 0, NULL },
	{ "MERGE INTO pairs p USING singles s ON p.a = s.a WHEN MATCHED THEN UPDATE SET b = 1",
	  145, 0, NULL },
	{ "COPY pairs FROM STDIN", 45, 0, NULL },
	/* the one-column table of the same group still routes by its key */
	{ "INSERT INTO singles (a, b) VALUES (1, 2)", 0, PLAN_SINGLE, NULL },
	{ "SELECT * FROM singles WHERE a = 1", 0, PLAN_SINGLE, NULL },
};

START_TEST(test_multikey_plan)
{
	const struct mk_case *tc = &mk_cases[_i];
	static const uint8_t one[] = "1", two[] = "2";
	const struct plan_param params[] = { { one, 1, false, 0 }, { two, 1, false, 0 } };
	struct plan_session sess;
	struct plan_input in;
	struct rt_fx fx;
	struct plan out;
	struct nk_error err;
	char got[256];
	bool ok;

	rt_parse(&fx, tc->sql);
	mk_input(&in, &sess, &fx, params, 2);
	nk_error_clear(&err);
	ok = plan_build(fx.a, fx.s, &in, &out, &err);
	if (tc->code != 0) {
		ck_assert_msg(!ok, "%s: planned, expected NK013 %d", tc->sql, tc->code);
		ck_assert_str_eq(err.sqlstate, "NK013");
		ck_assert_msg(err.code == tc->code, "%s: code %d (%s), expected %d", tc->sql,
			      err.code, err.message, tc->code);
	} else {
		ck_assert_msg(ok, "%s: %s %s", tc->sql, err.sqlstate, err.message);
		ck_assert_int_eq(out.kind, tc->kind);
		mk_shards(&out, got, sizeof(got));
		if (tc->shards)
			ck_assert_str_eq(got, tc->shards);
		else
			ck_assert_uint_eq(out.nshards, 1);
	}
	rt_fx_done(&fx);
}
END_TEST

/* The messages: 10 and 145 with the catalog's sentences. */
START_TEST(test_multikey_messages)
{
	struct plan_session sess;
	struct plan_input in;
	struct rt_fx fx;
	struct plan out;
	struct nk_error err;

	rt_parse(&fx, "INSERT INTO pairs (a, b) VALUES (1, 2)");
	mk_input(&in, &sess, &fx, NULL, 0);
	ck_assert(!plan_build(fx.a, fx.s, &in, &out, &err));
	ck_assert_str_eq(err.message, "not implemented: [10] Multi-column partitioning indexes "
			 "are unavailable.");
	rt_fx_done(&fx);
	rt_parse(&fx, "UPDATE pairs SET b = 1");
	mk_input(&in, &sess, &fx, NULL, 0);
	ck_assert(!plan_build(fx.a, fx.s, &in, &out, &err));
	ck_assert_str_eq(err.message, "not implemented: [145] Updating an index column is "
			 "unavailable.");
	rt_fx_done(&fx);
}
END_TEST

/* A plan whose key is the two-column index: routing one value (a COPY row, an INSERT ...
 * SELECT row) refuses with 10 instead of evaluating a + b over one value. */
START_TEST(test_multikey_route_value)
{
	static const uint8_t bin[8] = { 0, 0, 0, 0, 0, 0, 0, 7 };
	struct plan_session sess;
	struct plan_input in;
	struct rt_fx fx;
	struct plan p;
	struct nk_error err;
	const char *shard = NULL;

	rt_parse(&fx, "SELECT 1");
	mk_input(&in, &sess, &fx, NULL, 0);
	memset(&p, 0, sizeof(p));
	p.has_key = true;
	p.key.group = topo_image_find_group(mimg, "pair");
	p.key.index = topo_image_find_index(mimg, "by_sum");
	p.key.col_type = KS_TYPE_INT8;
	nk_error_clear(&err);
	ck_assert(!plan_route_text(&in, &p, "7", 1, &shard, &err));
	ck_assert_int_eq(err.code, 10);
	ck_assert_ptr_null(shard);
	nk_error_clear(&err);
	ck_assert(!plan_route_binary(&in, &p, bin, sizeof(bin), &shard, &err));
	ck_assert_int_eq(err.code, 10);
	p.key.index = topo_image_find_index(mimg, "by_a");
	ck_assert(plan_route_text(&in, &p, "7", 1, &shard, &err));
	ck_assert_ptr_nonnull(shard);
	rt_fx_done(&fx);
}
END_TEST

/* router_add_multikey_tests: see router_fixtures.h. */
void
router_add_multikey_tests(Suite *s)
{
	TCase *tc = tcase_create("multikey");

	tcase_add_unchecked_fixture(tc, setup_mk_image, teardown_mk_image);
	tcase_add_loop_test(tc, test_multikey_plan, 0, NK_ARRAY_LEN(mk_cases));
	tcase_add_test(tc, test_multikey_messages);
	tcase_add_test(tc, test_multikey_route_value);
	suite_add_tcase(s, tc);
}
