# common: logging, errors (NK013 catalog)
libneki_a_SOURCES += src/common/log.c src/common/error.c
