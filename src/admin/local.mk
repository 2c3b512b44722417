# admin module files
libneki_a_SOURCES += src/admin/admin.c src/admin/call.c src/admin/catcheck.c src/admin/cmd.c src/admin/cmd_ctl.c src/admin/console.c src/admin/console_auth.c \
	src/admin/flatjson.c src/admin/follow.c src/admin/nekifn.c src/admin/pgconn.c \
	src/admin/result.c src/admin/revision.c src/admin/stats.c src/admin/lists.c \
	src/admin/metrics.c
noinst_HEADERS += include/neki/admin.h src/admin/admin_int.h
libneki_a_SOURCES += src/admin/catload.c src/admin/shardfn.c
# the workers' side of the internal socket: console and __neki calls from the main port
libneki_a_SOURCES += src/admin/relay.c
noinst_HEADERS += include/neki/admin_relay.h
