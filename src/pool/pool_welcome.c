/*
 * pool_welcome.c - a pool's welcome: the server parameters of its first login, which every
 * client of the pool gets in its own welcome; shared across processes (welcome_publish,
 * welcome_fetch of pool_limits_ops) so that another worker's first client need not wait
 * for a login. Entry points: pool_save_welcome(), welcome_take_shared(), welcome_forget().
 */
#include "neki/base.h"
#include "neki/pool.h"

#include <stdlib.h>
#include <string.h>

#include "neki/intern.h"
#include "pool_int.h"

#define WELCOME_SHARE_MAX 4096	/* bytes of a welcome shared across processes */

void
welcome_free(struct pool *p)
{
	for (size_t i = 0; i < p->nwelcome; i++) {
		free(p->welcome[i].name);
		intern_unref(p->welcome[i].value);
	}
	free(p->welcome);
	p->welcome = NULL;
	p->nwelcome = 0;
}

/* Append <name> = <value> to the welcome being built (p->welcome has room for it). */
static bool
welcome_add(struct pool *p, const char *name, const char *value)
{
	struct link_param *w = &p->welcome[p->nwelcome];

	w->name = strdup(name);
	w->value = w->name != NULL ? intern_ref(value) : NULL;
	if (w->value == NULL) {
		free(w->name);
		return false;
	}
	p->nwelcome++;
	return true;
}

/* Publish the saved welcome for the other processes' pools of the same pair. */
static void
welcome_publish(const struct pool *p)
{
	char buf[WELCOME_SHARE_MAX];
	size_t len = 0;

	if (p->limits->welcome_publish == NULL)
		return;
	for (size_t i = 0; i < p->nwelcome; i++) {
		size_t nl = strlen(p->welcome[i].name) + 1, vl = strlen(p->welcome[i].value) + 1;

		if (len + nl + vl > sizeof(buf))
			return;		/* (too long to share: each process learns its own) */
		memcpy(buf + len, p->welcome[i].name, nl);
		memcpy(buf + len + nl, p->welcome[i].value, vl);
		len += nl + vl;
	}
	p->limits->welcome_publish(p->limits_ctx, buf, len);
}

/*
 * The pool was reset (pgbouncer's tag_pool_dirty): forget its welcome, here and for the other
 * processes, so that the next client waits for a login with the settings now in force.
 */
void
welcome_forget(struct pool *p)
{
	welcome_free(p);
	p->welcome_ready = false;
	if (p->limits->welcome_clear != NULL)
		p->limits->welcome_clear(p->limits_ctx);
}

/* The welcome another process published, taken as this pool's; false when none. */
bool
welcome_take_shared(struct pool *p)
{
	char buf[WELCOME_SHARE_MAX];
	size_t len, n = 0;

	if (p->welcome != NULL || p->limits->welcome_fetch == NULL ||
	    (len = p->limits->welcome_fetch(p->limits_ctx, buf, sizeof(buf))) == 0 ||
	    buf[len - 1] != '\0')
		return false;
	for (size_t i = 0; i < len; i++)
		n += buf[i] == '\0';
	if (n % 2 != 0 || (p->welcome = calloc(n / 2 + 1, sizeof(*p->welcome))) == NULL)
		return false;
	for (size_t at = 0; at < len;) {	/* (an even count of NULs, the last one last) */
		const char *name = buf + at, *value = name + strlen(name) + 1;

		at = (size_t)(value - buf) + strlen(value) + 1;
		if (!welcome_add(p, name, value)) {
			welcome_free(p);
			return false;
		}
	}
	p->welcome_ready = true;
	return true;
}

/* Copy the first login's parameters as the pool's welcome message. */
void
pool_save_welcome(struct pool *p, const struct link *l)
{
	size_t n = link_param_count(l);
	const char *name, *value;

	p->welcome = calloc(n ? n : 1, sizeof(*p->welcome));
	if (p->welcome == NULL)
		return;
	for (size_t i = 0; i < n; i++) {
		link_param_at(l, i, &name, &value);
		if (!welcome_add(p, name, value))
			return;	/* keep what we have; welcome_ready stays false */
	}
	p->welcome_ready = true;
	welcome_publish(p);
}
