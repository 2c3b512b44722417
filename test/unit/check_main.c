/*
 * check_main.c - runs every unit suite listed in suites.h.
 *
 * Usage: check_neki [suite-name]   (no argument: all suites)
 * Prints Check's own summary line ("100%: Checks: N, Failures: 0, Errors: 0").
 */
#include "neki/base.h"

#include <stdlib.h>
#include <string.h>

#include "suites.h"

int
main(int argc, char **argv)
{
	SRunner *sr = srunner_create(NULL);
	const char *only = argc > 1 ? argv[1] : NULL;
	int failed;

#define NK_ADD_SUITE(name) \
	if (!only || strcmp(only, #name) == 0) \
		srunner_add_suite(sr, name##_suite());
	NK_UNIT_SUITES(NK_ADD_SUITE)
#undef NK_ADD_SUITE

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
