# exec module files: the executor of sharded databases (topology=yes): statement loop,
# shard links, texts
libneki_a_SOURCES += src/exec/route.c src/exec/route_exec.c src/exec/route_release.c \
	src/exec/route_sql.c \
	src/exec/route_ext.c src/exec/route_merge.c src/exec/route_seq.c \
	src/exec/route_copy.c src/exec/route_copy_row.c \
	src/exec/route_prep.c src/exec/route_oids.c src/exec/route_portal.c src/exec/route_cursor.c \
	src/exec/route_pull.c src/exec/route_insel.c src/exec/route_insel_sql.c \
	src/exec/route_sets.c src/exec/route_hold.c src/exec/route_end.c src/exec/route_tx.c \
	src/exec/route_client.c src/exec/route_target.c src/exec/route_ddl.c src/exec/route_explain.c \
	src/exec/route_access.c src/exec/route_compose.c src/exec/route_subq.c src/exec/route_pushdown.c \
	src/exec/route_svp.c src/exec/route_2pc.c src/exec/route_gsi.c \
	src/exec/route_deadlock.c
# links a session holds across transactions (LISTEN, advisory locks) and notifications
libneki_a_SOURCES += src/exec/route_pin.c src/exec/route_listen.c
noinst_HEADERS += include/neki/exec.h src/exec/route_int.h src/exec/route_oids.h \
	src/exec/route_compose.h src/exec/route_subq.h src/exec/route_copy_int.h \
	src/exec/route_loop.h src/exec/route_insel_int.h src/exec/route_client.h \
	src/exec/route_target.h src/exec/route_state.h \
	src/exec/route_svp.h src/exec/route_2pc.h src/exec/route_gsi.h \
	src/exec/route_deadlock.h src/exec/route_sqltext.h src/exec/route_explain.h \
	src/exec/route_hold.h src/exec/route_ext.h src/exec/route_sets.h src/exec/route_prep.h \
	src/exec/route_merge.h src/exec/route_portal.h src/exec/route_cursor.h \
	src/exec/route_pull.h src/exec/route_seq.h src/exec/route_pin.h src/exec/route_listen.h \
	src/exec/route_insel.h src/exec/route_copy.h src/exec/route_ddl.h src/exec/route_exec.h \
	src/exec/route_pushdown.h
