# topology module files
libneki_a_SOURCES += src/topology/keyspace.c src/topology/pgtext.c src/topology/pgtime.c \
	src/topology/tzfile.c
noinst_HEADERS += include/neki/keyspace.h src/topology/keyspace_int.h
libneki_a_SOURCES += src/topology/model.c src/topology/json.c src/topology/validate.c \
	src/topology/validate_tables.c src/topology/keyexpr.c src/topology/kxeval.c
noinst_HEADERS += include/neki/topology.h src/topology/topo_int.h
libneki_a_SOURCES += src/topology/image.c src/topology/image_read.c
noinst_HEADERS += include/neki/topology_image.h src/topology/image_int.h
