# admin module files
libneki_a_SOURCES += src/admin/admin.c
noinst_HEADERS += include/neki/admin.h
