/*
 * suites.h - the list of Check suites run by check_main.c. Each module's
 * test/unit/check_<module>.c defines one <module>_suite(); add it here once.
 */
#ifndef NEKI_TEST_UNIT_SUITES_H
#define NEKI_TEST_UNIT_SUITES_H

#include <check.h>

#define NK_UNIT_SUITES(X) \
	X(common) \
	X(proto) \
	X(auth) \
	X(keyspace) \
	X(sbuf) \
	X(fdpass) \
	X(fdrow) \
	X(dns) \
	X(config) \
	X(shm) \
	X(shm_names) \
	X(topology) \
	X(pool) \
	X(admin) \
	X(router) \
	X(catalog) \
	X(tls) \
	X(dnssrv) \
	X(session) \
	X(merge) \
	X(merge_agg) \
	X(route_copy) \
	X(exec)

#define NK_DECLARE_SUITE(name) Suite *name##_suite(void);
NK_UNIT_SUITES(NK_DECLARE_SUITE)

#endif
