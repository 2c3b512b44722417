# worker module files: the child runtime, the worker process, reload, pre-login responder
libneki_a_SOURCES += src/worker/child.c src/worker/worker.c src/worker/reload.c \
	src/worker/prelogin.c
noinst_HEADERS += include/neki/worker.h
