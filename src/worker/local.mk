# worker module files: the child runtime, the worker process, reload
libneki_a_SOURCES += src/worker/child.c src/worker/worker.c src/worker/reload.c
noinst_HEADERS += include/neki/worker.h
# the client session: state machine, startup, auth, forwarding, cancel, varcache, prepared
# statements, the worker's pools
libneki_a_SOURCES += src/worker/session.c src/worker/session_startup.c \
	src/worker/session_auth.c src/worker/session_fwd.c src/worker/session_cancel.c \
	src/worker/varcache.c src/worker/prepared.c src/worker/spool.c src/worker/sctl.c \
	src/worker/session_admin.c src/worker/wlist.c src/worker/session_sp.c
# the executor of sharded databases (topology=yes): statement loop, shard links, texts
libneki_a_SOURCES += src/worker/route.c src/worker/route_exec.c src/worker/route_sql.c \
	src/worker/route_ext.c src/worker/route_merge.c src/worker/route_seq.c \
	src/worker/route_copy.c src/worker/route_copy_row.c \
	src/worker/route_prep.c src/worker/route_portal.c src/worker/route_cursor.c \
	src/worker/route_pull.c src/worker/route_insel.c src/worker/route_sets.c
# links a session holds across transactions (LISTEN, advisory locks) and notifications
libneki_a_SOURCES += src/worker/route_pin.c src/worker/route_listen.c
noinst_HEADERS += include/neki/session.h src/worker/session_int.h src/worker/route_int.h \
	src/worker/route_copy_int.h
