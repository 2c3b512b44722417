/*
 * router_fixtures.h - helpers shared by the router unit tests (router_fixtures.c).
 */
#ifndef NEKI_TEST_UNIT_ROUTER_FIXTURES_H
#define NEKI_TEST_UNIT_ROUTER_FIXTURES_H

#include "neki/base.h"

#include <check.h>

#include "neki/parse.h"

/* One parsed statement with its arena and normalisation. */
struct rt_fx {
	struct rarena *a;	/* owned */
	struct parse_norm norm;
	struct stmt *s;
};

/* Normalise and parse <sql> (asserting success); the model lives until rt_fx_done(). */
struct stmt *rt_parse(struct rt_fx *fx, const char *sql);
void rt_fx_done(struct rt_fx *fx);

/* Plan tests (check_router_plan.c). */
void router_add_plan_tests(Suite *s);

/* Router-managed function calls: advisory locks, setval, notify (check_router_fn.c). */
void router_add_fn_tests(Suite *s);

/* Sequence allocator tests (check_router_seq.c). */
void router_add_seq_tests(Suite *s);

/* Cursor statements and their movement rules (check_router_cursor.c). */
void router_add_cursor_tests(Suite *s);

#endif
