# worker module files: the worker process
libneki_a_SOURCES += src/worker/worker.c
noinst_HEADERS += include/neki/worker.h
# the client session: state machine, startup, auth, forwarding, cancel
libneki_a_SOURCES += src/worker/session.c src/worker/session_startup.c \
	src/worker/session_auth.c src/worker/session_fwd.c src/worker/session_cancel.c \
	src/worker/sctl.c src/worker/linkmove.c \
	src/worker/session_admin.c src/worker/wlist.c src/worker/session_sp.c \
	src/worker/session_prep.c src/worker/session_nekiext.c
# the session's side of the executor (the client sink of neki/exec.h)
libneki_a_SOURCES += src/worker/session_route.c
# the online restart (-R): SHOW FDS in the old process, the new master's client, sessions
# rebuilt in the new one
libneki_a_SOURCES += src/worker/session_fds.c src/worker/session_adopt.c src/worker/takeover.c
noinst_HEADERS += include/neki/takeover.h
# the workers' side of the admin's internal socket: console and __neki calls from the main port
libneki_a_SOURCES += src/worker/relay.c src/worker/relay_fmt.c
noinst_HEADERS += src/worker/relay_fmt.h
noinst_HEADERS += include/neki/admin_relay.h
noinst_HEADERS += include/neki/session.h src/worker/session_int.h src/worker/session_state.h src/worker/session_prep.h \
	src/worker/session_sp.h src/worker/session_cancel.h src/worker/sctl.h
