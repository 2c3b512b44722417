# pool module files: backend links and pools
libneki_a_SOURCES += src/pool/link.c src/pool/link_auth.c src/pool/pool.c src/pool/pool_wait.c
libneki_a_SOURCES += src/pool/pool_takeover.c src/pool/pool_slot.c src/pool/pool_janitor.c
libneki_a_SOURCES += src/pool/pool_host.c src/pool/pool_welcome.c src/pool/pool_limits.c
noinst_HEADERS += include/neki/link.h include/neki/pool.h include/neki/list.h src/pool/pool_int.h
# the worker's pools, varcache and prepared statements (session glue)
libneki_a_SOURCES += src/pool/varcache.c src/pool/prepared.c src/pool/spool.c
noinst_HEADERS += include/neki/spool.h include/neki/prepared.h include/neki/varcache.h
