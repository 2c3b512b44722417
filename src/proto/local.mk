# proto module files
libneki_a_SOURCES += src/proto/pktbuf.c src/proto/msg.c src/proto/startup.c src/proto/srvmsg.c
libneki_a_SOURCES += src/proto/fdrow.c
libneki_a_SOURCES += src/proto/md5.c src/proto/scram.c src/proto/saslprep.c src/proto/auth_file.c src/proto/hba.c src/proto/ident.c src/proto/login.c
noinst_HEADERS += include/neki/pktbuf.h include/neki/proto.h include/neki/proto_types.h include/neki/auth.h include/neki/scram.h include/neki/login.h include/neki/fdrow.h
