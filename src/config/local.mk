# config: the ini parser, the settings table, the sections, load/reload
libneki_a_SOURCES += src/config/ini.c src/config/settings.c src/config/sections.c \
	src/config/shards.c src/config/shard_servers.c src/config/cfg.c src/config/doc.c
noinst_HEADERS += src/config/config_int.h
EXTRA_DIST += doc/neki.ini.5.md
noinst_HEADERS += include/neki/config.h include/neki/config_groups.h include/neki/config_shard.h \
	include/neki/config_settings.h
