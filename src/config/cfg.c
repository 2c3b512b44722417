/*
 * cfg.c - loading a neki.ini into a struct cfg, refcounting, the current config,
 * and what a reload needs.
 *
 * cfg_load() starts from every default of the table, feeds each ini line to the
 * section it belongs to ([pgbouncer] or [neki]: the settings table; [databases],
 * [users], [peers], [shards]: sections.c / shards.c), then checks the whole (cross-
 * setting rules). Any error leaves nothing behind: the caller keeps its old config.
 * Entry points: cfg_load(), cfg_load_string(), cfg_new_defaults(), cfg_ref/unref(),
 * cfg_current(), cfg_set_current(), cfg_reload(), cfg_keep_not_reloadable(), cfg_list_has().
 */
#include "neki/base.h"

#include "config_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "neki/log.h"
#include "neki/config_settings.h"

enum cfg_section {
	CFG_SECT_NONE = 0,	/* before the first section header */
	CFG_SECT_MAIN = 1,	/* [pgbouncer] or [neki] */
	CFG_SECT_DATABASES = 2,
	CFG_SECT_USERS = 3,
	CFG_SECT_PEERS = 4,
	CFG_SECT_SHARDS = 5,
};

static const struct {
	const char *name;
	enum cfg_section sect;
} cfg_sections[] = {
	{ "pgbouncer", CFG_SECT_MAIN },
	{ "neki", CFG_SECT_MAIN },
	{ "databases", CFG_SECT_DATABASES },
	{ "users", CFG_SECT_USERS },
	{ "peers", CFG_SECT_PEERS },
	{ "shards", CFG_SECT_SHARDS },
};

/* The loader's state while the ini callbacks run. */
struct cfg_loader {
	struct cfg *c;			/* being filled (owned by the caller) */
	enum cfg_section sect;
	char sect_name[32];		/* as written ("pgbouncer" or "neki") for messages */
};

/* The configuration in force in this process (owned reference), or NULL. */
static struct cfg *cfg_current_ptr;

/* Free <c> and everything it owns. */
static void
cfg_free(struct cfg *c)
{
	settings_free_strings(c);
	sections_free(c);
	free(c->path);
	free(c);
}

/* "<message>: <detail>; <hint>" for logs. See config.h. */
const char *
cfg_error_text(const struct nk_error *err, char *buf, size_t len)
{
	snprintf(buf, len, "%s%s%s%s%s", err->message, err->detail[0] ? ": " : "", err->detail,
		 err->hint[0] ? "; " : "", err->hint);
	return buf;
}

/* A new struct cfg with every default applied (refcount 1), or NULL when out of memory. */
struct cfg *
cfg_new_defaults(void)
{
	struct cfg *c = calloc(1, sizeof(*c));
	struct nk_error err;

	if (!c)
		return NULL;
	c->refcount = 1;
	if (!settings_apply_defaults(c, &err)) {
		/* the unit tests prove every default parses; only memory can fail here */
		cfg_free(c);
		return NULL;
	}
	return c;
}

/* A deep copy of <c> with refcount 1, or NULL when out of memory. */
struct cfg *
cfg_dup(const struct cfg *c)
{
	struct cfg *d = calloc(1, sizeof(*d));
	size_t n;
	const struct cfg_setting *tab = cfg_settings(&n);

	if (!d)
		return NULL;
	d->refcount = 1;
	for (size_t i = 0; i < n; i++) {
		if (!settings_copy_value(d, c, &tab[i]))
			goto fail;
	}
	d->path = c->path ? strdup(c->path) : NULL;
	if ((c->path && !d->path) || !sections_copy(d, c))
		goto fail;
	return d;
fail:
	cfg_free(d);
	return NULL;
}

/* Take a reference to <c>. */
void
cfg_ref(struct cfg *c)
{
	NK_ASSERT(c->refcount > 0);
	c->refcount++;
}

/* Drop a reference to <c> (NULL is allowed); frees it with the last one. */
void
cfg_unref(struct cfg *c)
{
	if (!c)
		return;
	NK_ASSERT(c->refcount > 0);
	if (--c->refcount == 0)
		cfg_free(c);
}

/* The configuration in force in this process (borrowed), or NULL before the first. */
const struct cfg *
cfg_current(void)
{
	return cfg_current_ptr;
}

/* Make <c> current: takes a reference, drops the previous current one. */
void
cfg_set_current(struct cfg *c)
{
	struct cfg *old = cfg_current_ptr;

	if (c)
		cfg_ref(c);
	cfg_current_ptr = c;
	cfg_unref(old);
}

/* A section header: switch sections or refuse an unknown one. */
static bool
cfg_loader_section(struct cfg_loader *ld, const char *name, struct nk_error *err)
{
	for (size_t i = 0; i < NK_ARRAY_LEN(cfg_sections); i++) {
		if (strcmp(cfg_sections[i].name, name) == 0) {
			ld->sect = cfg_sections[i].sect;
			snprintf(ld->sect_name, sizeof(ld->sect_name), "%s", name);
			return true;
		}
	}
	nk_error_set(err, CFG_SQLSTATE, "invalid section \"%s\"", name);
	nk_error_detail(err, "accepted sections: [pgbouncer] (or [neki]), [databases], "
			"[users], [peers], [shards]; names are case-sensitive");
	return false;
}

/* A key of [pgbouncer]/[neki]: one row of the settings table. */
static bool
cfg_loader_setting(struct cfg_loader *ld, const char *key, const char *value,
		   struct nk_error *err)
{
	const struct cfg_setting *s = cfg_setting_find(key);
	const struct cfg_setting *near;

	if (!s) {
		nk_error_set(err, CFG_SQLSTATE, "unknown parameter: %s/%s", ld->sect_name, key);
		near = settings_nearest(key);
		if (near)
			nk_error_hint(err, "did you mean \"%s\"? The accepted settings are "
				      "listed in neki.ini(5)", near->name);
		else
			nk_error_hint(err, "the accepted settings are listed in neki.ini(5)");
		return false;
	}
	if (strcmp(s->name, "admin_listen_port") == 0 || strcmp(s->name, "admin_listen_addr") == 0)
		ld->c->neki.admin_listen_given = true;
	return cfg_setting_apply(ld->c, s, value, err);
}

/* The ini callback: dispatch one line to its section. */
static bool
cfg_loader_item(void *arg, const struct ini_item *it, struct nk_error *err)
{
	struct cfg_loader *ld = arg;
	char where[NK_ERR_MSG_MAX];

	if (it->kind == INI_SECTION)
		return cfg_loader_section(ld, it->name, err);
	switch (ld->sect) {
	case CFG_SECT_NONE:
		nk_error_set(err, CFG_SQLSTATE, "parameter \"%s\" is outside of any section",
			     it->name);
		nk_error_hint(err, "put settings under [pgbouncer] (or [neki])");
		return false;
	case CFG_SECT_MAIN:
		return cfg_loader_setting(ld, it->name, it->value, err);
	case CFG_SECT_DATABASES:
		snprintf(where, sizeof(where), "%s:%d", it->file, it->line);
		return sections_database_add(ld->c, it->name, it->value, where, err);
	case CFG_SECT_USERS:
		return sections_user_add(ld->c, it->name, it->value, err);
	case CFG_SECT_PEERS:
		return sections_peer_add(ld->c, it->name, it->value, err);
	case CFG_SECT_SHARDS:
		return sections_shard_add(ld->c, it->name, it->value, err);
	}
	return false;
}

/* Rules that involve several settings; checked once the whole file is read. */
static bool
cfg_validate(const struct cfg *c, struct nk_error *err)
{
	if (c->neki.admin_listen_port != 0 && c->neki.admin_listen_port == c->proc.listen_port)
		return nk_error_set(err, CFG_SQLSTATE, "admin_listen_port (%d) must differ from "
				    "listen_port", c->neki.admin_listen_port);
	if (c->neki.metrics_listen_port != 0 && (c->neki.metrics_listen_port == c->proc.listen_port ||
					    c->neki.metrics_listen_port == c->neki.admin_listen_port))
		return nk_error_set(err, CFG_SQLSTATE, "metrics_listen_port (%d) must differ from "
				    "listen_port and admin_listen_port", c->neki.metrics_listen_port);
	return true;
}

/* Finish a parsed config: conffile default, the whole-config checks. */
static struct cfg *
cfg_finish(struct cfg_loader *ld, const char *path, bool parsed, struct nk_error *err)
{
	struct cfg *c = ld->c;
	const struct cfg_setting *conffile = cfg_setting_find("conffile");

	if (!parsed || !cfg_validate(c, err))
		goto fail;
	c->path = strdup(path);
	if (!c->path)
		goto oom;
	/* conffile unset or empty: the next RELOAD reads the file loaded now */
	if (c->proc.conffile[0] == '\0' && !cfg_setting_apply(c, conffile, path, err))
		goto fail;
	return c;
oom:
	nk_error_set(err, CFG_SQLSTATE, "out of memory");
fail:
	cfg_unref(c);
	return NULL;
}

/*
 * Parse and validate the file <path> (and what it includes). Returns a new struct
 * cfg (refcount 1), or NULL with <err> set: SQLSTATE F0000, a message naming
 * "(file:line)" when a line is at fault (err->where holds "file:line"), DETAIL or
 * HINT saying what is accepted.
 */
struct cfg *
cfg_load(const char *path, struct nk_error *err)
{
	struct cfg_loader ld = { .c = cfg_new_defaults() };
	bool ok;

	nk_error_clear(err);
	if (!ld.c) {
		nk_error_set(err, CFG_SQLSTATE, "out of memory");
		return NULL;
	}
	ok = ini_parse_file(path, cfg_loader_item, &ld, err);
	return cfg_finish(&ld, path, ok, err);
}

/* As cfg_load() for the text <text>; <name> stands for the file in messages. */
struct cfg *
cfg_load_string(const char *name, const char *text, struct nk_error *err)
{
	struct cfg_loader ld = { .c = cfg_new_defaults() };
	bool ok;

	nk_error_clear(err);
	if (!ld.c) {
		nk_error_set(err, CFG_SQLSTATE, "out of memory");
		return NULL;
	}
	ok = ini_parse_string(name, text, cfg_loader_item, &ld, err);
	return cfg_finish(&ld, name, ok, err);
}

/*
 * Keep the old value of every non-reloadable setting that changed, logging each
 * ("parameter X is not reloadable; restart needed"). See config.h.
 */
bool
cfg_keep_not_reloadable(struct cfg *next, const struct cfg *old,
			const struct cfg_setting **changed, size_t max, size_t *n_changed)
{
	size_t n, count = 0;
	const struct cfg_setting *tab = cfg_settings(&n);
	char oldv[256], newv[256];

	for (size_t i = 0; i < n; i++) {
		const struct cfg_setting *s = &tab[i];

		if (s->reloadable || !cfg_setting_changed(old, next, s))
			continue;
		cfg_setting_format(old, s, oldv, sizeof(oldv));
		cfg_setting_format(next, s, newv, sizeof(newv));
		log_warn("parameter %s is not reloadable; restart needed (keeping \"%s\", "
			 "file has \"%s\")", s->name, oldv, newv);
		if (changed && count < max)
			changed[count] = s;
		count++;
		if (!settings_copy_value(next, old, s)) {
			*n_changed = count;
			return false;
		}
	}
	*n_changed = count;
	return true;
}

/* Load <old>->proc.conffile and keep <old>'s non-reloadable values. See config.h. */
struct cfg *
cfg_reload(const struct cfg *old, struct nk_error *err)
{
	struct cfg *next = cfg_load(old->proc.conffile, err);
	size_t n;

	if (!next)
		return NULL;
	if (!cfg_keep_not_reloadable(next, old, NULL, 0, &n)) {
		cfg_unref(next);
		nk_error_set(err, CFG_SQLSTATE, "out of memory");
		return NULL;
	}
	return next;
}

/* See config.h. */
bool
cfg_list_has(const char *list, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = list; p != NULL && *p != '\0';) {
		size_t len;

		p += strspn(p, ", \t\r\n");
		len = strcspn(p, ", \t\r\n");
		if (len == n && len > 0 && strncmp(p, name, n) == 0)
			return true;
		p += len;
	}
	return false;
}
