# admin module files
libneki_a_SOURCES += src/admin/admin.c src/admin/call.c src/admin/catcheck.c src/admin/cmd.c src/admin/cmd_ctl.c src/admin/console.c src/admin/console_auth.c \
	src/admin/flatjson.c src/admin/follow.c src/admin/nekifn.c src/admin/pgconn.c \
	src/admin/result.c src/admin/revision.c src/admin/stats.c src/admin/lists.c \
	src/admin/metrics.c
noinst_HEADERS += include/neki/admin.h src/admin/admin_int.h src/admin/servers.h \
	src/admin/call.h src/admin/flatjson.h src/admin/stats.h \
	src/admin/pgconn.h src/admin/recover.h src/admin/deadlock.h src/admin/catoids.h src/admin/nekidesc.h \
	src/admin/epoch.h src/admin/gsibuild.h src/admin/gsibuild_int.h
libneki_a_SOURCES += src/admin/catload.c src/admin/catoids.c src/admin/nekidesc.c src/admin/shardfn.c src/admin/servers.c \
	src/admin/switchover.c src/admin/ddlsync.c src/admin/advisor.c \
	src/admin/activity.c src/admin/recover.c src/admin/epoch.c \
	src/admin/deadlock.c src/admin/gsibuild.c src/admin/gsibuild_scan.c
# the online restart (-R): SHOW FDS
libneki_a_SOURCES += src/admin/fds.c
