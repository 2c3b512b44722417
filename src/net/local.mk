# net module files
libneki_a_SOURCES += src/net/sbuf.c
noinst_HEADERS += include/neki/sbuf.h
