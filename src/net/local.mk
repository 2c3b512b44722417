# net module files
libneki_a_SOURCES += src/net/sbuf.c
noinst_HEADERS += include/neki/sbuf.h
libneki_a_SOURCES += src/net/listen.c src/net/dns.c src/net/tls.c src/net/tls_ctx.c src/net/fdpass.c
noinst_HEADERS += include/neki/net.h include/neki/tls.h include/neki/fdpass.h
noinst_HEADERS += include/neki/dns.h src/net/tls_int.h
