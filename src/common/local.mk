# common: logging, errors (NK013 catalog), daemon plumbing, systemd notify
libneki_a_SOURCES += src/common/log.c src/common/error.c
libneki_a_SOURCES += src/common/daemon.c src/common/sdnotify.c src/common/image_area.c
libneki_a_SOURCES += src/common/intern.c src/common/hash.c src/common/sqlscan.c src/common/rarena.c
libneki_a_SOURCES += src/common/memstream.c
noinst_HEADERS += include/neki/daemon.h include/neki/sdnotify.h include/neki/image_area.h
noinst_HEADERS += include/neki/intern.h include/neki/hash.h include/neki/sqlscan.h include/neki/rarena.h include/neki/byteorder.h
noinst_HEADERS += include/neki/memstream.h
noinst_HEADERS += include/neki/base.h include/neki/error.h include/neki/log.h
noinst_HEADERS += include/neki/clock.h include/neki/twophase.h include/neki/sqlstate.h
