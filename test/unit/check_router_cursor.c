/*
 * check_router_cursor.c - cursor statements in the router: DECLARE (options, name, where its
 * query starts), FETCH / MOVE directions and counts, CLOSE [ALL], DECLARE's query planned
 * as plan.inner, and the movement rules of plan_fetch_plan() / plan_cursor_moved(): a
 * cursor over five rows driven through the steps must give exactly what Postgres 15 gives
 * (the expected rows and tags were read from a real server), and a NO SCROLL cursor needs
 * a backward step exactly where Postgres raises "cursor can only scan forward". Added to
 * the "router" suite by router_add_cursor_tests().
 */
#include "neki/base.h"

#include <check.h>
#include <stdio.h>
#include <string.h>

#include "neki/plan.h"
#include "neki/plan_cursor.h"
#include "router_fixtures.h"

/* ---- the statement model ---- */

struct declare_case {
	const char *sql;
	const char *name;
	bool binary, scroll, no_scroll, hold;
	const char *query;	/* text from query_start */
};

static const struct declare_case declare_cases[] = {
	{ "DECLARE c CURSOR FOR SELECT 1", "c", false, false, false, false, "SELECT 1" },
	{ "declare \"Cur\" binary scroll cursor with hold for select * from t where a = 1",
	  "Cur", true, true, false, true, "select * from t where a = 1" },
	{ "DECLARE cursor NO SCROLL CURSOR WITHOUT HOLD FOR TABLE t", "cursor", false, false,
	  true, false, "TABLE t" },
	{ "DECLARE \"for\" /* a CURSOR FOR x */ INSENSITIVE CURSOR -- for\n FOR\n\tVALUES (1)",
	  "for", false, false, false, false, "VALUES (1)" },
	{ "DECLARE U&\"d\\0061t\" ASENSITIVE CURSOR WITH HOLD FOR WITH q AS (SELECT 2) "
	  "SELECT * FROM q", "dat", false, false, false, true,
	  "WITH q AS (SELECT 2) SELECT * FROM q" },
};

START_TEST(test_declare_model)
{
	const struct declare_case *c = &declare_cases[_i];
	struct rt_fx fx;
	const struct stmt *s = rt_parse(&fx, c->sql);
	const struct stmt_cursor *cur = s->cursor;

	ck_assert_int_eq(s->kind, STMT_SESSION);
	ck_assert_ptr_nonnull(cur);
	ck_assert_int_eq(cur->op, STMT_CUR_DECLARE);
	ck_assert_str_eq(cur->name, c->name);
	ck_assert(cur->binary == c->binary && cur->scroll == c->scroll);
	ck_assert(cur->no_scroll == c->no_scroll && cur->hold == c->hold);
	ck_assert_ptr_nonnull(cur->query);
	ck_assert_int_eq(cur->query->kind, STMT_SELECT);
	ck_assert_str_eq(plan_cursor_query(s), c->query);
	rt_fx_done(&fx);
}
END_TEST

struct fetch_case {
	const char *sql;
	bool move;
	enum stmt_fetch_dir dir;
	int64_t count;
	const char *name;
};

static const struct fetch_case fetch_cases[] = {
	{ "FETCH c", false, STMT_FETCH_FORWARD, 1, "c" },
	{ "FETCH NEXT FROM c", false, STMT_FETCH_FORWARD, 1, "c" },
	{ "FETCH PRIOR IN c", false, STMT_FETCH_BACKWARD, 1, "c" },
	{ "FETCH FIRST c", false, STMT_FETCH_ABSOLUTE, 1, "c" },
	{ "FETCH LAST c", false, STMT_FETCH_ABSOLUTE, -1, "c" },
	{ "FETCH ABSOLUTE -3 c", false, STMT_FETCH_ABSOLUTE, -3, "c" },
	{ "FETCH RELATIVE 0 c", false, STMT_FETCH_RELATIVE, 0, "c" },
	{ "FETCH 25 FROM \"My c\"", false, STMT_FETCH_FORWARD, 25, "My c" },
	{ "FETCH -4 c", false, STMT_FETCH_FORWARD, -4, "c" },
	{ "FETCH ALL c", false, STMT_FETCH_FORWARD, STMT_FETCH_ALL, "c" },
	{ "FETCH FORWARD ALL c", false, STMT_FETCH_FORWARD, STMT_FETCH_ALL, "c" },
	{ "FETCH BACKWARD ALL c", false, STMT_FETCH_BACKWARD, STMT_FETCH_ALL, "c" },
	{ "FETCH BACKWARD 7 c", false, STMT_FETCH_BACKWARD, 7, "c" },
	{ "FETCH FORWARD 0 c", false, STMT_FETCH_FORWARD, 0, "c" },
	{ "MOVE c", true, STMT_FETCH_FORWARD, 1, "c" },
	{ "MOVE BACKWARD ALL IN c", true, STMT_FETCH_BACKWARD, STMT_FETCH_ALL, "c" },
	{ "MOVE ABSOLUTE 2 c", true, STMT_FETCH_ABSOLUTE, 2, "c" },
};

START_TEST(test_fetch_model)
{
	const struct fetch_case *c = &fetch_cases[_i];
	struct rt_fx fx;
	const struct stmt *s = rt_parse(&fx, c->sql);

	ck_assert_int_eq(s->kind, STMT_SESSION);
	ck_assert_int_eq(s->cursor->op, STMT_CUR_FETCH);
	ck_assert_msg(s->cursor->is_move == c->move && s->cursor->dir == c->dir &&
		      s->cursor->count == c->count, "%s: move %d dir %d count %lld", c->sql,
		      s->cursor->is_move, s->cursor->dir, (long long)s->cursor->count);
	ck_assert_str_eq(s->cursor->name, c->name);
	rt_fx_done(&fx);
}
END_TEST

START_TEST(test_close_model)
{
	struct rt_fx fx;
	const struct stmt *s = rt_parse(&fx, "CLOSE c");

	ck_assert_int_eq(s->cursor->op, STMT_CUR_CLOSE);
	ck_assert_str_eq(s->cursor->name, "c");
	rt_fx_done(&fx);
	s = rt_parse(&fx, "CLOSE ALL");
	ck_assert_int_eq(s->cursor->op, STMT_CUR_CLOSE);
	ck_assert_ptr_null(s->cursor->name);
	rt_fx_done(&fx);
}
END_TEST

/* ---- movement: a SCROLL cursor over rows 1..5 ---- */

#define SIM_ROWS 5

struct sim_case {
	const char *sql;	/* "<FETCH | MOVE> <direction>" (FROM c added) */
	const char *rows;	/* the rows a FETCH returns, comma-separated */
	const char *tag;
};

/* One after the other on the same cursor, as read from PostgreSQL 15. */
static const struct sim_case sim_cases[] = {
	{ "FETCH ALL", "1,2,3,4,5", "FETCH 5" },
	{ "FETCH BACKWARD ALL", "5,4,3,2,1", "FETCH 5" },
	{ "FETCH NEXT", "1", "FETCH 1" },
	{ "FETCH PRIOR", "", "FETCH 0" },
	{ "FETCH FORWARD ALL", "1,2,3,4,5", "FETCH 5" },
	{ "MOVE BACKWARD ALL", "", "MOVE 5" },
	{ "FETCH ABSOLUTE -2", "4", "FETCH 1" },
	{ "FETCH RELATIVE -1", "3", "FETCH 1" },
	{ "FETCH -1", "2", "FETCH 1" },
	{ "MOVE 0", "", "MOVE 1" },
	{ "FETCH 0", "2", "FETCH 1" },
	{ "FETCH ABSOLUTE 4", "4", "FETCH 1" },
	{ "FETCH ABSOLUTE 2", "2", "FETCH 1" },
	{ "FETCH RELATIVE 2", "4", "FETCH 1" },
	{ "FETCH LAST", "5", "FETCH 1" },
	{ "FETCH NEXT", "", "FETCH 0" },
	{ "FETCH RELATIVE 0", "", "FETCH 0" },
	{ "FETCH PRIOR", "5", "FETCH 1" },
	{ "FETCH RELATIVE 0", "5", "FETCH 1" },
	{ "FETCH FIRST", "1", "FETCH 1" },
	{ "MOVE FORWARD 10", "", "MOVE 4" },
	{ "FETCH ABSOLUTE 0", "", "FETCH 0" },
	{ "FETCH FORWARD 2", "1,2", "FETCH 2" },
	{ "MOVE BACKWARD ALL", "", "MOVE 1" },
	{ "FETCH ABSOLUTE 9", "", "FETCH 0" },
	{ "FETCH ABSOLUTE -9", "", "FETCH 0" },
	{ "FETCH BACKWARD 2", "", "FETCH 0" },
	{ "MOVE -1", "", "MOVE 0" },
	{ "MOVE LAST", "", "MOVE 1" },
	{ "MOVE 0", "", "MOVE 1" },
	{ "FETCH 3", "", "FETCH 0" },
};

/* Run one step over rows 1..SIM_ROWS: the rows it reads (appended to <out> when it is the
 * result), how many. */
static uint64_t
sim_step(struct plan_cursor_pos *pos, const struct plan_fetch_step *st, char *out,
	 size_t cap)
{
	uint64_t cur = pos->at_start ? 0 : pos->at_end ? pos->pos + 1 : pos->pos, n = 0;
	int64_t k = (int64_t)cur;

	if (st->op == PLAN_FETCH_FORWARD && !pos->at_end && st->count > 0)
		for (k++; k <= SIM_ROWS && (st->count == STMT_FETCH_ALL ||
					    (int64_t)n < st->count); k++, n++)
			if (st->to_client)
				snprintf(out + strlen(out), cap - strlen(out), "%s%lld",
					 out[0] ? "," : "", (long long)k);
	if (st->op == PLAN_FETCH_BACKWARD && !pos->at_start && st->count > 0)
		for (k--; k >= 1 && (st->count == STMT_FETCH_ALL || (int64_t)n < st->count);
		     k--, n++)
			if (st->to_client)
				snprintf(out + strlen(out), cap - strlen(out), "%s%lld",
					 out[0] ? "," : "", (long long)k);
	plan_cursor_moved(pos, st->op, st->count, n);
	return n;
}

START_TEST(test_fetch_moves_like_postgres)
{
	struct plan_cursor_pos pos = { true, false, 0 };

	for (size_t i = 0; i < NK_ARRAY_LEN(sim_cases); i++) {
		const struct sim_case *c = &sim_cases[i];
		char sql[64], rows[64] = "", tag[32];
		struct rt_fx fx;
		const struct stmt *s;
		struct plan_fetch f;
		uint64_t n = 0;

		snprintf(sql, sizeof(sql), "%s FROM c", c->sql);
		s = rt_parse(&fx, sql);
		plan_fetch_plan(&pos, s->cursor->dir, s->cursor->count, s->cursor->is_move, &f);
		for (uint32_t k = 0; k < f.nsteps; k++) {
			uint64_t got = sim_step(&pos, &f.steps[k], rows, sizeof(rows));

			if (f.steps[k].to_client)
				n = got;
		}
		snprintf(tag, sizeof(tag), "%s %llu", s->cursor->is_move ? "MOVE" : "FETCH",
			 (unsigned long long)(f.fixed >= 0 ? (uint64_t)f.fixed : n));
		ck_assert_msg(strcmp(tag, c->tag) == 0 && (s->cursor->is_move ||
			      strcmp(rows, c->rows) == 0), "%zu %s: %s [%s], want %s [%s]", i,
			      c->sql, tag, rows, c->tag, c->rows);
		rt_fx_done(&fx);
	}
}
END_TEST

/* A NO SCROLL cursor: which fetches need to go backward (Postgres' 55000), from where. */
struct noscroll_case {
	const char *before;	/* fetched first (forward) */
	const char *sql;
	bool backward;
};

static const struct noscroll_case noscroll_cases[] = {
	{ NULL, "FETCH FIRST", false },		/* a rewind at the start does nothing */
	{ NULL, "FETCH 0", false },
	{ NULL, "FETCH RELATIVE 0", false },
	{ NULL, "FETCH ABSOLUTE 3", false },
	{ NULL, "FETCH BACKWARD 0", true },	/* Postgres checks before it looks */
	{ "FETCH 2", "FETCH BACKWARD 1", true },
	{ "FETCH 2", "FETCH RELATIVE 0", true },	/* the current row again */
	{ "FETCH 2", "FETCH -1", true },
	{ "FETCH 2", "FETCH ABSOLUTE 3", false },
	{ "FETCH 2", "FETCH ABSOLUTE 2", true },
	{ "FETCH 2", "FETCH FIRST", true },
	{ "FETCH 2", "MOVE LAST", true },
	{ "FETCH 2", "MOVE 0", false },
	{ "FETCH 2", "MOVE BACKWARD ALL", true },
	{ "FETCH 2", "FETCH ALL", false },
};

START_TEST(test_no_scroll_backward_steps)
{
	const struct noscroll_case *c = &noscroll_cases[_i];
	struct plan_cursor_pos pos = { true, false, 0 };
	char rows[64] = "", sql[64];
	bool backward = false;
	struct rt_fx fx;
	const struct stmt *s;
	struct plan_fetch f;

	if (c->before != NULL) {
		snprintf(sql, sizeof(sql), "%s FROM c", c->before);
		s = rt_parse(&fx, sql);
		plan_fetch_plan(&pos, s->cursor->dir, s->cursor->count, false, &f);
		for (uint32_t k = 0; k < f.nsteps; k++)
			(void)sim_step(&pos, &f.steps[k], rows, sizeof(rows));
		rt_fx_done(&fx);
	}
	snprintf(sql, sizeof(sql), "%s FROM c", c->sql);
	s = rt_parse(&fx, sql);
	plan_fetch_plan(&pos, s->cursor->dir, s->cursor->count, s->cursor->is_move, &f);
	for (uint32_t k = 0; k < f.nsteps && !backward; k++) {
		backward = f.steps[k].op == PLAN_FETCH_BACKWARD ||
			   (f.steps[k].op == PLAN_FETCH_REWIND && !(pos.at_start && !pos.at_end));
		(void)sim_step(&pos, &f.steps[k], rows, sizeof(rows));
	}
	ck_assert_msg(backward == c->backward, "%s then %s: backward %d", c->before, c->sql,
		      backward);
	rt_fx_done(&fx);
}
END_TEST

void
router_add_cursor_tests(Suite *s)
{
	TCase *tc = tcase_create("cursor");

	tcase_add_loop_test(tc, test_declare_model, 0, NK_ARRAY_LEN(declare_cases));
	tcase_add_loop_test(tc, test_fetch_model, 0, NK_ARRAY_LEN(fetch_cases));
	tcase_add_test(tc, test_close_model);
	tcase_add_test(tc, test_fetch_moves_like_postgres);
	tcase_add_loop_test(tc, test_no_scroll_backward_steps, 0, NK_ARRAY_LEN(noscroll_cases));
	suite_add_tcase(s, tc);
}
