/*
 * router_fixtures.c - helpers shared by the router unit tests.
 */
#include "neki/base.h"

#include "router_fixtures.h"

#include <string.h>

/* rt_parse: see router_fixtures.h. */
struct stmt *
rt_parse(struct rt_fx *fx, const char *sql)
{
	struct nk_error err;

	memset(fx, 0, sizeof(*fx));
	nk_error_clear(&err);
	fx->a = rarena_new();
	ck_assert_ptr_nonnull(fx->a);
	ck_assert(parse_normalize(fx->a, sql, &fx->norm));
	fx->s = parse_statement(fx->a, sql, &fx->norm, &err);
	ck_assert_msg(fx->s != NULL, "%s: %s", sql, err.message);
	return fx->s;
}

/* rt_fx_done: see router_fixtures.h. */
void
rt_fx_done(struct rt_fx *fx)
{
	rarena_free(fx->a);
	memset(fx, 0, sizeof(*fx));
}
