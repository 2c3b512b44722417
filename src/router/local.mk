# router module files
libneki_a_SOURCES += src/router/parse.c
noinst_HEADERS += include/neki/router.h
