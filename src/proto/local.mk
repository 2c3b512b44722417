# proto module files
libneki_a_SOURCES += src/proto/pktbuf.c src/proto/msg.c src/proto/startup.c src/proto/srvmsg.c
noinst_HEADERS += include/neki/pktbuf.h include/neki/proto.h include/neki/proto_types.h
