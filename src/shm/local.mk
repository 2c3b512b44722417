# shm module files: the segment, process slots, mailboxes, counters, name registry, topology slots
libneki_a_SOURCES += src/shm/shm.c src/shm/shm_mbox.c src/shm/shm_counter.c src/shm/shm_image.c \
	src/shm/shm_topo.c src/shm/shm_cat.c src/shm/shm_dbstats.c \
	src/shm/shm_list.c src/shm/shm_seq.c src/shm/shm_wait.c src/shm/shm_names.c \
	src/shm/shm_welcome.c src/shm/shm_servers.c src/shm/shm_epoch.c src/shm/shm_gsi_cost.c
noinst_HEADERS += include/neki/shm.h include/neki/shm_wait.h include/neki/shm_names.h \
	include/neki/shm_welcome.h include/neki/shm_servers.h include/neki/shm_epoch.h \
	include/neki/shm_list.h include/neki/shm_dbstats.h include/neki/shm_seq.h \
	include/neki/shm_counter.h include/neki/shm_gsi_cost.h \
	src/shm/shm_int.h
