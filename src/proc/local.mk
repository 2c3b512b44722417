# proc module files: the child runtime of every process, the configuration reload, the
# descriptor channel between the workers and the admin
libneki_a_SOURCES += src/proc/child.c src/proc/reload.c src/proc/fdchan.c
noinst_HEADERS += include/neki/proc.h include/neki/fdchan.h
