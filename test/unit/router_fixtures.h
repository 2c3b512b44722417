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

struct plan;
struct plan_param;
struct plan_session;
struct nk_error;

/* The storefront fixture of check_router_plan.c: its image (set up / torn down as an
 * unchecked fixture), a plan of <sql> over it and its catalog (<sess> NULL: defaults), the
 * shard of a key ("c:42" customer_data, "p:abc" catalog through lower()). */
struct plan_cache;
void rt_storefront_setup(void);
/* The same with the GSI orders_by_id enabled (check_router_gsi.c). */
void rt_storefront_gsi_setup(void);
void rt_storefront_teardown(void);
bool rt_plan_storefront(struct rt_fx *fx, const char *sql, const struct plan_session *sess,
			const struct plan_param *params, uint32_t nparams, struct plan *out,
			struct nk_error *err);
const char *rt_storefront_shard(const char *key);
const void *rt_storefront_image(void);
/* The storefront's catalog says a BEFORE INSERT trigger is on orders (<on>) or not. */
void rt_storefront_rewrites_orders(bool on);
/* <sql> planned twice over the storefront image (<gsi_step>: as a GSI's step), through
 * plan cache <pc> with its memo (into <kept>, in <a>) and afresh; the two must agree
 * (check_router_plan.c's checks). */
void rt_plan_memo_vs_fresh(struct plan_cache *pc, const char *sql, bool gsi_step,
			   struct rarena *a, struct plan *kept);

/* INSERT ... SELECT plans (check_router_insel.c). */
void router_add_insel_tests(Suite *s);

/* Sequence allocator tests (check_router_seq.c). */
void router_add_seq_tests(Suite *s);

/* Cursor statements and their movement rules (check_router_cursor.c). */
void router_add_cursor_tests(Suite *s);

/* The planner's distribution checks and co-location links (check_router_dist.c). */
void router_add_dist_tests(Suite *s);

/* Keys over two columns (spec 2.5 V3) (check_router_multikey.c). */
void router_add_multikey_tests(Suite *s);

/* Global secondary indexes at planning (check_router_gsi.c). */
void router_add_gsi_tests(Suite *s);

#endif
