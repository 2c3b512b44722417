# topology module files
libneki_a_SOURCES += src/topology/keyspace.c src/topology/pgtext.c src/topology/pgtime.c
noinst_HEADERS += include/neki/keyspace.h src/topology/keyspace_int.h
