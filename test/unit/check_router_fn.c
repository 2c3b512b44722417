/*
 * check_router_fn.c - the router-managed function calls (plan_fn.c, plan_setval()): advisory
 * locks routed by key through the database's default group and its index (both key forms,
 * literals and text / binary parameters, expression indexes, 11 / 60 / 62), the pin the
 * executor keeps, setval() on the sequence's home shard with the values it sets, and the
 * notification functions on the notify shard. Its own topology (a database per default
 * group shape). Added to the "router" suite by router_add_fn_tests().
 */
#include "neki/base.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "neki/plan.h"
#include "neki/plan_explain.h"
#include "neki/topology.h"
#include "neki/topology_image.h"
#include "router_fixtures.h"
#include "topo_fixtures.h"

/*
 * Databases: app (default group "data", xxhash over id), mul (default group "mul": modulo
 * 4 over id * 10), low (default group "cat": lower(name)), two (an expression over two
 * columns), none (no default: the authoritative group). Tables of app: events (sharded),
 * kinds (a reference table of data), notes (unsharded, on shard-b).
 */
static const char fn_topology[] =
	"{'authoritative_shard_group':'authoritative','default_shard_group':'authoritative',"
	"'shard_groups':[{'uid':'authoritative','key_ranges':[{'shard_uid':'auth'}]},"
	"{'uid':'data','default_shard_index':'by_id','key_ranges':["
	"{'shard_uid':'shard-a','end':'40'},{'shard_uid':'shard-b','start':'40','end':'80'},"
	"{'shard_uid':'shard-c','start':'80','end':'c0'},{'shard_uid':'shard-d','start':'c0'}]},"
	"{'uid':'mul','default_shard_index':'by_ten','key_ranges':["
	"{'shard_uid':'shard-a','end':'80'},{'shard_uid':'shard-b','start':'80'}]},"
	"{'uid':'cat','default_shard_index':'by_name','key_ranges':["
	"{'shard_uid':'shard-c','end':'80'},{'shard_uid':'shard-d','start':'80'}]},"
	"{'uid':'pair','default_shard_index':'by_sum','key_ranges':["
	"{'shard_uid':'shard-c','end':'80'},{'shard_uid':'shard-d','start':'80'}]},"
	"{'uid':'side','key_ranges':[{'shard_uid':'shard-b'}]}],"
	"'shard_indexes':{'by_id':{'type':'xxhash','columns':['id']},"
	"'by_ten':{'type':'modulo','columns':['id * 10'],'index_params':{'modulus':4}},"
	"'by_name':{'type':'xxhash','columns':['lower(name)']},"
	"'by_sum':{'type':'xxhash','columns':['a + b']}},"
	"'databases':{'app':{'default_shard_group':'data','schemas':{'public':{"
	"'tables':{'events':{},'notes':{'shard_group':'side'}},"
	"'reference_tables':{'kinds':{'shard_groups':['data']}},"
	"'sequences':{'events_id_seq':{'shard_group':'authoritative'},"
	"'side_seq':{'shard_group':'side'}}}}},"
	"'mul':{'default_shard_group':'mul'},'low':{'default_shard_group':'cat'},"
	"'two':{'default_shard_group':'pair'},'none':{}}}";

static void *fimg;

static uint32_t
fn_column_type(void *arg, const char *schema, const char *table, const char *column)
{
	(void)arg;
	(void)schema;
	if (strcmp(column, "id") == 0)
		return 20;
	return strcmp(table, "kinds") == 0 || strcmp(table, "notes") == 0 ? 25 : 0;
}

static const struct plan_catalog fn_cat = { NULL, fn_column_type, NULL, NULL, 1, NULL, NULL,
					    NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL };

static void
setup_fn_image(void)
{
	struct nk_error err;
	struct topo_model *m = fx_check(fn_topology, NULL, false, &err);
	size_t size;

	ck_assert_msg(m != NULL, "%s", err.message);
	size = topo_image_size(m);
	fimg = aligned_alloc(8, (size + 7) & ~(size_t)7);
	ck_assert_ptr_nonnull(fimg);
	ck_assert_int_eq(topo_image_build(m, 1, fimg, size), (ssize_t)size);
	topo_model_free(m);
}

static void
teardown_fn_image(void)
{
	free(fimg);
	fimg = NULL;
}

/* The shard group <g>'s index routes bigint <key> to. */
static const char *
key_shard(const char *g, int64_t key)
{
	uint32_t gi = topo_image_find_group(fimg, g);
	uint32_t idx = topo_image_group_index(fimg, gi);
	struct ks_value v = { .type = KS_TYPE_INT8, .i = key }, out;
	struct nk_error err;
	uint32_t r;

	if (strcmp(g, "mul") == 0) {
		ck_assert(ks_expr_eval(topo_image_index_expr(fimg, idx), &v, &out, &err));
		v = out;
	}
	ck_assert(topo_image_route(fimg, gi, idx, &v, &r, &err));
	return topo_image_range_shard(fimg, gi, r);
}

/* Plan <sql> on database <db> with <lock_shard> / <direct> set (NULL: none). */
static bool
fn_plan(struct rt_fx *fx, const char *db, const char *sql, const char *lock_shard,
	const struct plan_param *params, uint32_t nparams, struct plan *out,
	struct nk_error *err)
{
	static struct plan_session sess;
	struct plan_input in;

	plan_session_init(&sess, db);
	sess.lock_shard = lock_shard;
	rt_parse(fx, sql);
	memset(&in, 0, sizeof(in));
	in.topo = fimg;
	in.cat = &fn_cat;
	in.sess = &sess;
	in.params = params;
	in.nparams = nparams;
	in.norm = &fx->norm;
	nk_error_clear(err);
	return plan_build(fx->a, fx->s, &in, out, err);
}

/* ---- advisory locks ---- */

struct lock_case {
	const char *db, *sql;
	const char *group;	/* key routed through this group ... */
	int64_t key;		/* ... or NULL group: shard below */
	const char *shard;
	enum plan_op op;
	enum plan_pin pin;
};

#define K2(a, b) ((int64_t)((uint64_t)(uint32_t)(a) << 32 | (uint32_t)(b)))

static const struct lock_case lock_cases[] = {
	{ "app", "SELECT pg_advisory_lock(42)", "data", 42, NULL, PLAN_OP_FUNCTION, PLAN_PIN_LOCK },
	{ "app", "SELECT pg_advisory_lock(-7)", "data", -7, NULL, PLAN_OP_FUNCTION, PLAN_PIN_LOCK },
	{ "app", "SELECT pg_try_advisory_lock(1000)", "data", 1000, NULL, PLAN_OP_FUNCTION,
	  PLAN_PIN_LOCK },
	{ "app", "SELECT pg_advisory_lock_shared('12'::bigint)", "data", 12, NULL,
	  PLAN_OP_FUNCTION, PLAN_PIN_LOCK },
	{ "app", "SELECT pg_advisory_lock(1, 2)", "data", K2(1, 2), NULL, PLAN_OP_FUNCTION,
	  PLAN_PIN_LOCK },
	{ "app", "SELECT pg_try_advisory_lock(-1, 5)", "data", K2(-1, 5), NULL,
	  PLAN_OP_FUNCTION, PLAN_PIN_LOCK },
	{ "app", "SELECT pg_advisory_unlock(42)", "data", 42, NULL, PLAN_OP_FUNCTION,
	  PLAN_PIN_PROBE },
	{ "app", "SELECT pg_advisory_unlock_shared(3, 4)", "data", K2(3, 4), NULL,
	  PLAN_OP_FUNCTION, PLAN_PIN_PROBE },
	{ "app", "SELECT pg_advisory_xact_lock(42)", "data", 42, NULL, PLAN_OP_FUNCTION,
	  PLAN_PIN_NONE },
	{ "app", "SELECT pg_try_advisory_xact_lock_shared(9)", "data", 9, NULL,
	  PLAN_OP_FUNCTION, PLAN_PIN_NONE },
	{ "app", "SELECT CASE WHEN pg_try_advisory_lock(77) THEN 'mine' END", "data", 77, NULL,
	  PLAN_OP_FUNCTION, PLAN_PIN_LOCK },
	{ "app", "SELECT pg_advisory_lock(42), pg_advisory_lock(42)", "data", 42, NULL,
	  PLAN_OP_FUNCTION, PLAN_PIN_LOCK },
	{ "app", "SELECT * FROM pg_advisory_lock(42)", "data", 42, NULL, PLAN_OP_FUNCTION,
	  PLAN_PIN_LOCK },
	/* no key the router reads: the shard decides (NULL takes no lock; others fail) */
	{ "app", "SELECT pg_advisory_lock(NULL)", NULL, 0, "auth", PLAN_OP_ANY, PLAN_PIN_LOCK },
	{ "app", "SELECT pg_advisory_unlock_all()", NULL, 0, "auth", PLAN_OP_ANY,
	  PLAN_PIN_PROBE },
	{ "app", "SELECT pg_advisory_lock('x')", NULL, 0, "auth", PLAN_OP_ANY, PLAN_PIN_LOCK },
	/* a statement with tables on the key's shard */
	{ "app", "SELECT pg_advisory_xact_lock(42), count(*) FROM events WHERE id = 42", NULL, 0,
	  NULL, PLAN_OP_EQUAL_UNIQUE, PLAN_PIN_NONE },
	{ "app", "SELECT pg_advisory_lock(42), code FROM kinds", "data", 42, NULL,
	  PLAN_OP_REFERENCE, PLAN_PIN_LOCK },
	/* other default groups: an expression index, no index */
	{ "mul", "SELECT pg_advisory_lock(5)", "mul", 5, NULL, PLAN_OP_FUNCTION, PLAN_PIN_LOCK },
	{ "mul", "SELECT pg_advisory_lock(6)", "mul", 6, NULL, PLAN_OP_FUNCTION, PLAN_PIN_LOCK },
	{ "none", "SELECT pg_advisory_lock(42)", NULL, 0, "auth", PLAN_OP_FUNCTION,
	  PLAN_PIN_LOCK },
};

START_TEST(test_fn_lock_route)
{
	const struct lock_case *lc = &lock_cases[_i];
	struct rt_fx fx;
	struct plan p;
	struct nk_error err;
	const char *want;

	ck_assert_msg(fn_plan(&fx, lc->db, lc->sql, NULL, NULL, 0, &p, &err), "%s: %s", lc->sql,
		      err.message);
	want = lc->group ? key_shard(lc->group, lc->key) : lc->shard;
	if (!want)
		want = key_shard("data", 42);
	ck_assert_msg(p.kind == PLAN_SINGLE && p.nshards == 1, "%s: %s", lc->sql,
		      plan_kind_str(p.kind));
	ck_assert_msg(strcmp(p.shards[0], want) == 0, "%s: %s, want %s", lc->sql, p.shards[0],
		      want);
	ck_assert_msg(p.op == lc->op, "%s: %s", lc->sql, plan_op_str(p.op));
	ck_assert_msg(p.pin == lc->pin, "%s: pin %d", lc->sql, (int)p.pin);
	rt_fx_done(&fx);
}
END_TEST

/* A text parameter and a binary int8 parameter route like the literal. */
START_TEST(test_fn_lock_params)
{
	const uint8_t bin[8] = { 0, 0, 0, 0, 0, 0, 0, 42 };
	const struct plan_param text = { (const uint8_t *)"42", 2, false, 0 };
	const struct plan_param binary = { bin, 8, true, 20 };
	const struct plan_param pair[2] = { { (const uint8_t *)"1", 1, false, 0 },
					    { (const uint8_t *)"2", 1, false, 0 } };
	struct rt_fx fx;
	struct plan p;
	struct nk_error err;

	ck_assert(fn_plan(&fx, "app", "SELECT pg_advisory_lock($1)", NULL, &text, 1, &p, &err));
	ck_assert_str_eq(p.shards[0], key_shard("data", 42));
	rt_fx_done(&fx);
	ck_assert(fn_plan(&fx, "app", "SELECT pg_advisory_lock($1)", NULL, &binary, 1, &p, &err));
	ck_assert_str_eq(p.shards[0], key_shard("data", 42));
	rt_fx_done(&fx);
	ck_assert(fn_plan(&fx, "app", "SELECT pg_try_advisory_lock($1, $2)", NULL, pair, 2, &p,
			  &err));
	ck_assert_str_eq(p.shards[0], key_shard("data", K2(1, 2)));
	ck_assert_uint_eq(p.nvalues, 1);
	rt_fx_done(&fx);
}
END_TEST

/* Two keys (at least one pair of 1..40) route to different shards of the data group. */
static void
two_keys(int64_t *a, int64_t *b)
{
	*a = 1;
	for (*b = 2; *b < 40 && strcmp(key_shard("data", *a), key_shard("data", *b)) == 0; (*b)++)
		;
	ck_assert_int_lt(*b, 40);
}

#define NK(code, sentence) "NK013", "not implemented: [" #code "] " sentence

struct reject_case {
	const char *db, *sql;
	const char *sqlstate, *message;
};

static const struct reject_case reject_cases[] = {
	{ "app", "SELECT pg_advisory_lock(id) FROM events",
	  NK(11, "This shard index cannot route advisory locks.") },
	{ "app", "SELECT pg_advisory_lock(length('abc'))",
	  NK(11, "This shard index cannot route advisory locks.") },
	{ "app", "SELECT pg_advisory_lock((SELECT 1))",
	  NK(11, "This shard index cannot route advisory locks.") },
	{ "app", "SELECT * FROM events WHERE pg_try_advisory_xact_lock(id)",
	  NK(11, "This shard index cannot route advisory locks.") },
	{ "low", "SELECT pg_advisory_lock(1)",
	  NK(11, "This shard index cannot route advisory locks.") },
	{ "two", "SELECT pg_advisory_lock(1)",
	  NK(11, "This shard index cannot route advisory locks.") },
	{ "app", "SELECT pg_advisory_lock(1) FROM events",
	  NK(62, "Advisory locks are unavailable in this evaluation context.") },
	{ "app", "SELECT pg_advisory_lock(1), pg_advisory_xact_lock(1)",
	  NK(61, "Mixing session and transaction advisory locks is unavailable.") },
	{ "app", "CREATE TABLE t AS SELECT pg_advisory_lock(1)",
	  NK(139, "Advisory locks are unavailable in this plan position.") },
	{ "app", "SELECT pg_notify('c', 'x'), count(*) FROM events",
	  "0A000", "pg_notify() must run on the notify shard \"auth\", and this statement's "
	  "tables are elsewhere" },
	{ "app", "SELECT setval('events_id_seq', 5) FROM events",
	  NK(101, "Per-row router-only expression evaluation is unavailable here.") },
	{ "app", "SELECT setval('events_id_seq', id) FROM events",
	  NK(101, "Per-row router-only expression evaluation is unavailable here.") },
	{ "app", "SELECT setval('events_id_seq', (SELECT max(id) FROM events))",
	  "0A000", "setval() on a sharded database needs a constant value" },
	{ "app", "SELECT setval('events_id_seq', 5, random() > 0.5)",
	  "0A000", "setval() on a sharded database needs a constant is_called argument" },
	{ "app", "SELECT setval('events_id_seq', 1), setval('side_seq', 1)",
	  "0A000", "setval() and setval() of this statement must run on different shards "
	  "(\"auth\" and \"shard-b\")" },
	{ "app", "SELECT set_config('work_mem', current_setting('work_mem'), false)",
	  "0A000", "set_config() on a sharded database needs constant arguments" },
	{ "app", "SELECT set_config('work_mem', '1MB', random() > 0.5)",
	  "0A000", "set_config() on a sharded database needs constant arguments" },
	{ "app", "SELECT set_config('application_name', name, false) FROM events",
	  "0A000", "set_config() on a sharded database needs constant arguments" },
	{ "app", "SELECT set_config('Session_Authorization', 'x', false)",
	  NK(27, "This SET statement variant is unavailable.") },
};

START_TEST(test_fn_rejects)
{
	const struct reject_case *rc = &reject_cases[_i];
	struct rt_fx fx;
	struct plan p;
	struct nk_error err;

	ck_assert_msg(!fn_plan(&fx, rc->db, rc->sql, NULL, NULL, 0, &p, &err), "%s planned",
		      rc->sql);
	ck_assert_msg(strcmp(err.sqlstate, rc->sqlstate) == 0 &&
		      strcmp(err.message, rc->message) == 0, "%s: %s %s", rc->sql, err.sqlstate,
		      err.message);
	rt_fx_done(&fx);
}
END_TEST

/* 60: a second session lock on another shard than the session's locks; the same shard, an
 * unlock or a transaction-level lock elsewhere are fine. */
START_TEST(test_fn_lock_sixty)
{
	static const char sixty[] = "not implemented: [60] A session cannot hold session "
				    "advisory locks on multiple shards.";
	struct rt_fx fx;
	struct plan p;
	struct nk_error err;
	int64_t a, b;
	char sql[128];

	two_keys(&a, &b);
	snprintf(sql, sizeof(sql), "SELECT pg_advisory_lock(%lld)", (long long)b);
	ck_assert(!fn_plan(&fx, "app", sql, key_shard("data", a), NULL, 0, &p, &err));
	ck_assert_str_eq(err.message, sixty);
	rt_fx_done(&fx);
	snprintf(sql, sizeof(sql), "SELECT pg_advisory_lock(%lld), pg_advisory_lock(%lld)",
		 (long long)a, (long long)b);
	ck_assert(!fn_plan(&fx, "app", sql, NULL, NULL, 0, &p, &err));
	ck_assert_str_eq(err.message, sixty);
	rt_fx_done(&fx);
	snprintf(sql, sizeof(sql), "SELECT pg_advisory_lock(%lld)", (long long)a);
	ck_assert(fn_plan(&fx, "app", sql, key_shard("data", a), NULL, 0, &p, &err));
	rt_fx_done(&fx);
	snprintf(sql, sizeof(sql), "SELECT pg_advisory_unlock(%lld)", (long long)b);
	ck_assert(fn_plan(&fx, "app", sql, key_shard("data", a), NULL, 0, &p, &err));
	ck_assert_str_eq(p.shards[0], key_shard("data", b));
	rt_fx_done(&fx);
	snprintf(sql, sizeof(sql), "SELECT pg_advisory_xact_lock(%lld)", (long long)b);
	ck_assert(fn_plan(&fx, "app", sql, key_shard("data", a), NULL, 0, &p, &err));
	rt_fx_done(&fx);
	ck_assert(fn_plan(&fx, "app", "SELECT pg_advisory_unlock_all()", key_shard("data", a),
			  NULL, 0, &p, &err));
	ck_assert_str_eq(p.shards[0], key_shard("data", a));
	rt_fx_done(&fx);
	snprintf(sql, sizeof(sql), "SELECT pg_advisory_xact_lock(%lld), pg_advisory_xact_lock("
		 "%lld)", (long long)a, (long long)b);
	ck_assert(!fn_plan(&fx, "app", sql, NULL, NULL, 0, &p, &err));
	ck_assert_str_eq(err.message, "not implemented: [62] Advisory locks are unavailable in "
			 "this evaluation context.");
	rt_fx_done(&fx);
}
END_TEST

/* ---- setval and the notification functions ---- */

START_TEST(test_fn_setval)
{
	const struct plan_param called[2] = { { (const uint8_t *)"77", 2, false, 0 },
					      { (const uint8_t *)"\0", 1, true, 16 } };
	struct rt_fx fx;
	struct plan p;
	struct nk_error err;

	ck_assert(fn_plan(&fx, "app", "SELECT setval('events_id_seq', 100)", NULL, NULL, 0, &p,
			  &err));
	ck_assert_str_eq(p.shards[0], "auth");
	ck_assert_int_eq(p.op, PLAN_OP_FUNCTION);
	ck_assert_uint_eq(p.nsetvals, 1);
	ck_assert_str_eq(p.setvals[0].seq_schema, "public");
	ck_assert_str_eq(p.setvals[0].seq_name, "events_id_seq");
	ck_assert(p.setvals[0].is_called);
	ck_assert_int_eq(p.setvals[0].value, 100);
	rt_fx_done(&fx);
	ck_assert(fn_plan(&fx, "app", "SELECT pg_catalog.setval('public.side_seq'::regclass, -5, "
			  "false)", NULL, NULL, 0, &p, &err));
	ck_assert_str_eq(p.shards[0], "shard-b");
	ck_assert(!p.setvals[0].is_called);
	ck_assert_int_eq(p.setvals[0].value, -5);
	rt_fx_done(&fx);
	ck_assert(fn_plan(&fx, "app", "SELECT setval('\"events_id_seq\"', $1, $2)", NULL, called, 2,
			  &p, &err));
	ck_assert(!p.setvals[0].is_called);
	ck_assert_int_eq(p.setvals[0].value, 77);
	rt_fx_done(&fx);
	ck_assert(fn_plan(&fx, "app", "SELECT setval('events_id_seq', 5, 'yes')", NULL, NULL, 0, &p,
			  &err));
	ck_assert(p.setvals[0].is_called);
	rt_fx_done(&fx);
	/* calls that change nothing (strict NULL) or that the shard refuses are not listed */
	ck_assert(fn_plan(&fx, "app", "SELECT setval('events_id_seq', NULL)", NULL, NULL, 0, &p,
			  &err));
	ck_assert_uint_eq(p.nsetvals, 0);
	ck_assert_str_eq(p.shards[0], "auth");
	rt_fx_done(&fx);
	ck_assert(fn_plan(&fx, "app", "SELECT setval('events_id_seq', 5, NULL)", NULL, NULL, 0, &p,
			  &err));
	ck_assert_uint_eq(p.nsetvals, 0);
	rt_fx_done(&fx);
	ck_assert(fn_plan(&fx, "app", "SELECT setval('events_id_seq', 'x')", NULL, NULL, 0, &p,
			  &err));
	ck_assert_uint_eq(p.nsetvals, 0);
	rt_fx_done(&fx);
}
END_TEST

/* set_config() runs where the statement does and is listed for the executor (name
 * lowercased, a NULL value resets); calls the shard refuses are not listed. */
START_TEST(test_fn_set_config)
{
	const struct plan_param params[3] = { { (const uint8_t *)"Work_Mem", 8, false, 0 },
					      { (const uint8_t *)"2MB", 3, false, 0 },
					      { (const uint8_t *)"\1", 1, true, 16 } };
	struct rt_fx fx;
	struct plan p;
	struct nk_error err;

	ck_assert(fn_plan(&fx, "app", "SELECT set_config('work_mem', '1MB', false)", NULL, NULL, 0,
			  &p, &err));
	ck_assert_int_eq(p.op, PLAN_OP_ANY);
	ck_assert_uint_eq(p.nset_configs, 1);
	ck_assert_str_eq(p.set_configs[0].name, "work_mem");
	ck_assert_str_eq(p.set_configs[0].value, "1MB");
	ck_assert(!p.set_configs[0].is_local);
	rt_fx_done(&fx);
	ck_assert(fn_plan(&fx, "app", "SELECT pg_catalog.set_config($1, $2, $3), "
			  "set_config('Search_Path', NULL, 'off')", NULL, params, 3, &p, &err));
	ck_assert_uint_eq(p.nset_configs, 2);
	ck_assert_str_eq(p.set_configs[0].name, "work_mem");
	ck_assert_str_eq(p.set_configs[0].value, "2MB");
	ck_assert(p.set_configs[0].is_local);
	ck_assert_str_eq(p.set_configs[1].name, "search_path");
	ck_assert_ptr_null(p.set_configs[1].value);
	ck_assert(!p.set_configs[1].is_local);
	rt_fx_done(&fx);
	ck_assert(fn_plan(&fx, "app", "SELECT set_config('work_mem', '1MB', true), id FROM events "
			  "WHERE id = 1", NULL, NULL, 0, &p, &err));
	ck_assert_int_eq(p.kind, PLAN_SINGLE);
	ck_assert_uint_eq(p.nset_configs, 1);
	ck_assert(p.set_configs[0].is_local);
	rt_fx_done(&fx);
	ck_assert(fn_plan(&fx, "app", "SELECT set_config(NULL, '1MB', false)", NULL, NULL, 0, &p,
			  &err));
	ck_assert_uint_eq(p.nset_configs, 0);
	rt_fx_done(&fx);
	ck_assert(fn_plan(&fx, "app", "SELECT set_config('work_mem', '1MB', 'maybe')", NULL, NULL,
			  0, &p, &err));
	ck_assert_uint_eq(p.nset_configs, 0);
	rt_fx_done(&fx);
}
END_TEST

START_TEST(test_fn_notify)
{
	struct rt_fx fx;
	struct plan p;
	struct nk_error err;

	ck_assert(fn_plan(&fx, "app", "SELECT pg_notify('jobs', 'x')", NULL, NULL, 0, &p, &err));
	ck_assert_str_eq(p.shards[0], "auth");
	ck_assert(!p.queue_usage);
	rt_fx_done(&fx);
	ck_assert(fn_plan(&fx, "app", "SELECT * FROM pg_listening_channels()", NULL, NULL, 0, &p,
			  &err));
	ck_assert_str_eq(p.shards[0], "auth");
	rt_fx_done(&fx);
	ck_assert(fn_plan(&fx, "app", "SELECT pg_notification_queue_usage() > 0.5", NULL, NULL, 0,
			  &p, &err));
	ck_assert_str_eq(p.shards[0], "auth");
	ck_assert(p.queue_usage);
	rt_fx_done(&fx);
	/* a session lock and pg_notify on other shards cannot share a statement */
	ck_assert(!fn_plan(&fx, "app", "SELECT pg_notify('c', ''), pg_advisory_lock(42)", NULL,
			   NULL, 0, &p, &err));
	ck_assert_int_eq(err.code, 62);
	rt_fx_done(&fx);
}
END_TEST

/* With __neki.shard set a lock stays on that shard, 60 still applies; setval is refused. */
START_TEST(test_fn_direct)
{
	static struct plan_session sess;
	struct plan_input in;
	struct rt_fx fx;
	struct plan p;
	struct nk_error err;

	plan_session_init(&sess, "app");
	strcpy(sess.shard, "shard-c");
	memset(&in, 0, sizeof(in));
	in.topo = fimg;
	in.cat = &fn_cat;
	in.sess = &sess;
	rt_parse(&fx, "SELECT pg_advisory_lock(1)");
	in.norm = &fx.norm;
	ck_assert(plan_build(fx.a, fx.s, &in, &p, &err));
	ck_assert_str_eq(p.shards[0], "shard-c");
	ck_assert_int_eq(p.pin, PLAN_PIN_LOCK);
	sess.lock_shard = "shard-a";
	ck_assert(!plan_build(fx.a, fx.s, &in, &p, &err));
	ck_assert_int_eq(err.code, 60);
	rt_fx_done(&fx);
	sess.lock_shard = NULL;
	rt_parse(&fx, "SELECT setval('events_id_seq', 1)");
	in.norm = &fx.norm;
	ck_assert(!plan_build(fx.a, fx.s, &in, &p, &err));
	ck_assert_str_eq(err.message, "setval() is unavailable while __neki.shard is set");
	rt_fx_done(&fx);
}
END_TEST

/* router_add_fn_tests: see router_fixtures.h. */
void
router_add_fn_tests(Suite *s)
{
	TCase *tc = tcase_create("fn");

	tcase_add_unchecked_fixture(tc, setup_fn_image, teardown_fn_image);
	tcase_add_loop_test(tc, test_fn_lock_route, 0, (int)NK_ARRAY_LEN(lock_cases));
	tcase_add_test(tc, test_fn_lock_params);
	tcase_add_loop_test(tc, test_fn_rejects, 0, (int)NK_ARRAY_LEN(reject_cases));
	tcase_add_test(tc, test_fn_lock_sixty);
	tcase_add_test(tc, test_fn_setval);
	tcase_add_test(tc, test_fn_set_config);
	tcase_add_test(tc, test_fn_notify);
	tcase_add_test(tc, test_fn_direct);
	suite_add_tcase(s, tc);
}
