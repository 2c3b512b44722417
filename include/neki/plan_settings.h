/*
 * neki/plan_settings.h - the __neki.* session settings (spec 3.4; src/router/plan_util.c):
 * SET / RESET / SHOW of them on a plan_session, and which names are built in.
 */
#ifndef NEKI_PLAN_SETTINGS_H
#define NEKI_PLAN_SETTINGS_H

#include "neki/base.h"

#include "neki/error.h"
#include "neki/plan.h"

/*
 * Apply SET/RESET of a __neki.* setting (<value> NULL = RESET) to <sess>. Unknown names are
 * custom settings: true and nothing changes (the session keeps them like any custom GUC).
 * Refuses inside a transaction (25001) and bad values (22023).
 */
bool plan_neki_apply(struct plan_session *sess, const char *name, const char *value,
		     struct nk_error *err) NK_MUSTCHECK;

/*
 * plan_neki_apply() with what a SET is checked against besides: a __neki.shard must be a
 * shard of topology image <img> (when that fails, <sess> holds the refused shard: apply it
 * to a copy, as a SET's planning does, or drop the session, as a refused login does).
 */
bool plan_neki_apply_checked(struct plan_session *sess, const void *img, const char *name,
			     const char *value, struct nk_error *err) NK_MUSTCHECK;

/* True when <name> is a built-in __neki.* setting (spec 3.4), not a custom one. */
bool plan_neki_is_setting(const char *name);

/* Current text of __neki.<name> for SHOW; NULL when not a built-in __neki setting. */
const char *plan_neki_show(const struct plan_session *sess, const char *name);

#endif /* NEKI_PLAN_SETTINGS_H */
