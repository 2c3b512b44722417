/*
 * neki/config_settings.h - the settings table (src/config/settings.c): one row per setting
 * of the [pgbouncer] section, with its type, bounds, default, reload rule and
 * documentation; the parser, the console's SHOW CONFIG / SET, the reload and the generated
 * docs all read it.
 */
#ifndef NEKI_CONFIG_SETTINGS_H
#define NEKI_CONFIG_SETTINGS_H

#include "neki/base.h"

#include "neki/config.h"

/* Setting value types, as the settings table knows them. */
enum cfg_type {
	CFG_T_INT = 0,
	CFG_T_INT64 = 1,	/* sizes such as shm_size */
	CFG_T_BOOL = 2,
	CFG_T_TIME = 3,		/* seconds, float */
	CFG_T_STRING = 4,
	CFG_T_ENUM = 5,		/* pool_mode, auth_type, sslmodes */
	CFG_T_MODE = 6,		/* octal int such as unix_socket_mode */
};

/* Groups of settings, in the order neki.ini.sample and neki.ini(5) present them. */
enum cfg_group {
	CFG_G_PROCESS = 0,	/* process, listening, files */
	CFG_G_POOL = 1,		/* pooling and limits */
	CFG_G_AUTH = 2,		/* authentication and console access */
	CFG_G_SERVER = 3,	/* server connection lifecycle */
	CFG_G_CLIENT = 4,	/* client-side timeouts */
	CFG_G_LOG = 5,		/* logging */
	CFG_G_DNS = 6,		/* DNS */
	CFG_G_NET = 7,		/* low-level network */
	CFG_G_TLS = 8,		/* TLS */
	CFG_G_NEKI = 9,		/* neki's own settings */
	CFG_G_COUNT = 10,
};

/* One row of the settings table. */
struct cfg_setting {
	const char *name;
	enum cfg_type type;
	size_t offset;		/* offsetof(struct cfg, field) */
	const char *default_value; /* as written in the ini ("" = unset) */
	double min, max;	/* numeric bounds (inclusive) */
	bool reloadable;	/* false: only read at startup (pgbouncer's CF_NO_RELOAD) */
	bool neki_only;		/* neki's own setting (not in pgbouncer) */
	const char *const *enum_values; /* CFG_T_ENUM: NULL-terminated accepted names */
	const char *description; /* one line */
	const char *unit;	/* "s", "ms", "bytes" or "" (for docs and SHOW CONFIG) */
	enum cfg_group group;	/* where the docs and the sample list it */
	/* NULL, or run after a value is stored; false = out of memory (workers: 0 = CPUs;
	 * job_name and service_name: aliases kept equal, as in pgbouncer) */
	bool (*assign)(struct cfg *c);
};

/* The settings table, sorted by name, and its length. */
const struct cfg_setting *cfg_settings(size_t *n);

/* Find a setting by name (case-sensitive, as pgbouncer); NULL when unknown. */
const struct cfg_setting *cfg_setting_find(const char *name);

/*
 * Set one setting on <c> from its ini text (used by the parser and the console's
 * SET). Returns false and fills <err> when the value is not accepted.
 */
NK_MUSTCHECK bool cfg_setting_apply(struct cfg *c, const struct cfg_setting *s,
				    const char *value, struct nk_error *err);

/* Format the current value of <s> in <c> as the ini would write it. */
void cfg_setting_format(const struct cfg *c, const struct cfg_setting *s, char *buf, size_t len);

/* True when setting <s> has a different value in <a> and <b>. */
bool cfg_setting_changed(const struct cfg *a, const struct cfg *b, const struct cfg_setting *s);

#endif /* NEKI_CONFIG_SETTINGS_H */
