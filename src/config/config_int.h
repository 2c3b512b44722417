/*
 * config_int.h - private interfaces between the files of src/config/.
 *
 *   ini.c       the pgbouncer.ini syntax: lines, sections, keys, %include
 *   settings.c  the settings table, value parsing and formatting
 *   sections.c  [databases], [users], [peers], [shards] entries
 *   cfg.c       cfg_load(), refcounting, cfg_current(), reload helpers
 *   doc.c       neki.ini.sample and neki.ini(5) generated from the table
 */
#ifndef NEKI_SRC_CONFIG_CONFIG_INT_H
#define NEKI_SRC_CONFIG_CONFIG_INT_H

#include "neki/base.h"

#include "neki/config.h"
#include "neki/config_settings.h"
#include "neki/error.h"

/* SQLSTATE of every configuration error (config_file_error). */
#define CFG_SQLSTATE "F0000"

/* Deepest %include nesting accepted (the top file is depth 0). */
#define INI_MAX_INCLUDE_DEPTH 10

enum ini_kind {
	INI_SECTION = 0,	/* "[name]": <name> is set, <value> is NULL */
	INI_KEYVAL = 1,		/* "key = value": both set */
};

/* One parsed line, passed to the ini callback. All strings are borrowed for the call. */
struct ini_item {
	enum ini_kind kind;
	const char *name;	/* section name, or the key (unquoted) */
	const char *value;	/* the value with trailing whitespace trimmed */
	const char *file;	/* the file (or string name) the line is in */
	int line;		/* 1-based */
};

/*
 * Called once per section header or key. Returns false with <err> set (without any
 * location: the parser appends " in configuration (file:line)" and sets err->where).
 */
typedef bool (*ini_item_fn)(void *arg, const struct ini_item *it, struct nk_error *err);

NK_MUSTCHECK bool ini_parse_file(const char *path, ini_item_fn cb, void *arg,
				 struct nk_error *err);
NK_MUSTCHECK bool ini_parse_string(const char *name, const char *text, ini_item_fn cb,
				   void *arg, struct nk_error *err);

/* Append " in configuration (<file>:<line>)" to err's message and set err->where. */
void ini_error_locate(struct nk_error *err, const char *file, int line);

/* settings.c */

/* Store every default of the table into <c> (strings allocated). */
NK_MUSTCHECK bool settings_apply_defaults(struct cfg *c, struct nk_error *err);

/* Free the setting strings of <c>. */
void settings_free_strings(struct cfg *c);

/* Copy the value of <s> from <src> into <dst>. False when out of memory. */
NK_MUSTCHECK bool settings_copy_value(struct cfg *dst, const struct cfg *src,
				      const struct cfg_setting *s);

/* The table entry nearest to <name> by edit distance (for "did you mean"), or NULL. */
const struct cfg_setting *settings_nearest(const char *name);

/* Parsers shared with sections.c. Each returns false and fills <err> on a bad value. */
NK_MUSTCHECK bool settings_parse_int(const char *value, double min, double max, int64_t *out);
NK_MUSTCHECK bool settings_parse_time(const char *value, double *out);
NK_MUSTCHECK bool settings_parse_bool(const char *value, bool *out);
/* Index of <value> in the NULL-terminated <names> (case-insensitive), or -1. */
int settings_enum_index(const char *const *names, const char *value);

/* A pool mode by name (session, transaction, statement; any case), or -1. */
int settings_pool_mode_parse(const char *value);

/* sections.c */

/* What a connection-string key of [databases]/[users]/[peers] holds. */
enum sections_kind {
	SECTIONS_K_STR = 0,		/* char *, owned */
	SECTIONS_K_PORT = 1,		/* int 1..65535 */
	SECTIONS_K_COUNT = 2,		/* int 0..INT_MAX */
	SECTIONS_K_POOL_MODE = 3,	/* enum cfg_pool_mode by name */
	SECTIONS_K_TIME = 4,		/* double seconds >= 0 */
	SECTIONS_K_LOAD_BALANCE = 5,	/* bool: round-robin (true) / disable (false) */
	SECTIONS_K_BOOL = 6,		/* bool: yes/no */
	SECTIONS_K_TARGET_ATTRS = 7,	/* enum cfg_target_attrs by libpq's name */
	SECTIONS_K_PORT_LIST = 8,	/* a database's port or port list (struct cfg_database) */
	SECTIONS_K_READ_TARGET = 9,	/* enum cfg_server_kind: primary, replica, rdonly */
	SECTIONS_K_TX_MODE = 10,	/* int: multi 0, single 1, atomic 2 (enum plan_tx_mode) */
};

/* One accepted key of a section's connection strings. */
struct sections_key {
	const char *name;
	enum sections_kind kind;
	size_t offset;			/* into the entry struct */
	const char *description;	/* one line, for the docs */
};

/* The NULL-terminated keys of "databases", "users" or "peers"; NULL for another name. */
const struct sections_key *sections_keys(const char *section);

/* Add one entry of the named section from its ini line. */
NK_MUSTCHECK bool sections_database_add(struct cfg *c, const char *name, const char *value,
					const char *where, struct nk_error *err);
NK_MUSTCHECK bool sections_user_add(struct cfg *c, const char *name, const char *value,
				    struct nk_error *err);
NK_MUSTCHECK bool sections_peer_add(struct cfg *c, const char *name, const char *value,
				    struct nk_error *err);
NK_MUSTCHECK bool sections_shard_add(struct cfg *c, const char *name, const char *value,
				     struct nk_error *err);

/* shard_servers.c */

/*
 * Add the standbys of <key> ("replicas" or "rdonly") = <list> to <s> (after its primary is
 * known: shard_servers_finish() puts it first). False with <err> on a malformed item.
 */
NK_MUSTCHECK bool shard_servers_add(struct cfg_shard *s, const char *key, const char *list,
				    struct nk_error *err);
/*
 * Once the whole string was read: servers[0] = the primary (host, port), standbys without a
 * port get the primary's; with standbys, s->conninfo = <base> (the string without neki's
 * keys) plus every server's host and port with target_session_attrs=read-write. Refuses
 * standbys with no host=, a host list or a hostaddr= (<hostaddr>), and a server named twice.
 */
NK_MUSTCHECK bool shard_servers_finish(struct cfg_shard *s, const char *base, bool hostaddr,
				       struct nk_error *err);
void shard_servers_free(struct cfg_shard *s);
NK_MUSTCHECK bool shard_servers_copy(struct cfg_shard *dst, const struct cfg_shard *src);

/* Free every section entry of <c>. */
void sections_free(struct cfg *c);

/* Deep-copy the section entries of <src> into <dst> (which has none). False: no memory. */
NK_MUSTCHECK bool sections_copy(struct cfg *dst, const struct cfg *src);

#endif /* NEKI_SRC_CONFIG_CONFIG_INT_H */
