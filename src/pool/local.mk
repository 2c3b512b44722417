# pool module files: backend links and pools
libneki_a_SOURCES += src/pool/link.c src/pool/link_auth.c src/pool/pool.c src/pool/pool_wait.c
noinst_HEADERS += include/neki/link.h include/neki/pool.h include/neki/list.h src/pool/pool_int.h
