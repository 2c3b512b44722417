/*
 * check_router_plan.c - plans over the storefront topology (added to the "router" suite).
 */
#include "neki/base.h"

#include <check.h>

#include "router_fixtures.h"

/* router_add_plan_tests: see router_fixtures.h. */
void
router_add_plan_tests(Suite *s)
{
	(void)s;
}
