# Check unit suites: one check_<module>.c per module, run by check_main.c
unit_sources += test/unit/check_main.c test/unit/check_common.c test/unit/evloop.c
noinst_HEADERS += test/unit/evloop.h
unit_sources += test/unit/check_proto.c test/unit/check_auth.c
unit_sources += test/unit/check_config.c
unit_sources += test/unit/check_shm.c test/unit/check_shm_names.c
noinst_HEADERS += test/unit/suites.h
unit_sources += test/unit/check_keyspace.c
unit_sources += test/unit/check_sbuf.c test/unit/check_fdpass.c test/unit/check_fdrow.c
# check_config.c finds neki.ini.sample and doc/neki.ini.5.md through NK_SRCDIR
AM_CPPFLAGS += -DNK_SRCDIR='"$(abs_top_srcdir)"'
unit_sources += test/unit/check_topology.c test/unit/check_topology_resolve.c \
	test/unit/topo_fixtures.c test/unit/check_topoimage.c
noinst_HEADERS += test/unit/topo_fixtures.h
unit_sources += test/unit/check_pool.c
unit_sources += test/unit/check_admin.c
unit_sources += test/unit/check_router.c test/unit/check_router_plan.c \
	test/unit/check_router_seq.c test/unit/check_router_fn.c test/unit/check_router_cursor.c \
	test/unit/router_fixtures.c \
	test/unit/check_router_insel.c test/unit/check_router_dist.c \
	test/unit/check_router_multikey.c test/unit/check_router_gsi.c
noinst_HEADERS += test/unit/router_fixtures.h
unit_sources += test/unit/check_dns.c
unit_sources += test/unit/check_catalog.c
unit_sources += test/unit/check_tls.c
# catalog_dump: loads a real server's catalog rows for test/admin/test_catalog.py
noinst_PROGRAMS += test/unit/catalog_dump
test_unit_catalog_dump_SOURCES = test/unit/catalog_dump.c
test_unit_catalog_dump_LDADD = libneki.a $(DEP_LIBS)
unit_sources += test/unit/check_dns_server.c
unit_sources += test/unit/check_session.c
# router_sql: prints the router's generated SQL for test/routing/test_sequence_sql.py
noinst_PROGRAMS += test/unit/router_sql
test_unit_router_sql_SOURCES = test/unit/router_sql.c
test_unit_router_sql_LDADD = libneki.a $(DEP_LIBS)
# merge_run: feeds real servers' results through the merge step for test/merge/
noinst_PROGRAMS += test/unit/merge_run
test_unit_merge_run_SOURCES = test/unit/merge_run.c
test_unit_merge_run_LDADD = libneki.a $(DEP_LIBS)
unit_sources += test/unit/check_merge.c test/unit/check_merge_agg.c test/unit/merge_fixtures.c
noinst_HEADERS += test/unit/merge_fixtures.h
unit_sources += test/unit/check_route_copy.c test/unit/check_exec.c
