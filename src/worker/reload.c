/*
 * reload.c - re-reading the configuration, in the master (SIGHUP) and in every child
 * (the RELOAD command the master forwards).
 *
 * The file is parsed into a new struct cfg; if it is invalid nothing changes. Settings
 * the table marks as not reloadable keep the values in force (pgbouncer ignores them
 * on reload too); the master logs each one that was changed in the file. Logging is
 * reconfigured from the new settings plus the command line's -q / -v.
 */
#include "neki/base.h"

#include "neki/worker.h"

#include <string.h>

#include "neki/config.h"
#include "neki/log.h"

static bool cli_quiet;		/* -q */
static int cli_verbose;		/* number of -v */

bool
reload_configure_log(const struct cfg *c, bool quiet, int verbose)
{
	struct log_settings s = {
		.logfile = c->logfile,
		.use_syslog = c->syslog,
		.syslog_ident = c->syslog_ident,
		.syslog_facility = c->syslog_facility,
		.quiet = quiet,
		.verbose = c->verbose > verbose ? c->verbose : verbose,
	};

	cli_quiet = quiet;
	cli_verbose = verbose;
	return log_configure(&s);
}

/* Give <nc> the values <old> has for every setting that cannot change at run time. */
static void
keep_startup_settings(const struct cfg *old, struct cfg *nc, bool log_changes)
{
	size_t n;
	const struct cfg_setting *t = cfg_settings(&n);

	for (size_t i = 0; i < n; i++) {
		char was[1024], now[1024];
		struct nk_error err;

		if (t[i].reloadable)
			continue;
		cfg_setting_format(old, &t[i], was, sizeof(was));
		cfg_setting_format(nc, &t[i], now, sizeof(now));
		if (strcmp(was, now) == 0)
			continue;
		if (log_changes)
			log_warn("setting \"%s\" cannot be changed by a reload, keeping \"%s\" "
				 "(restart neki to use \"%s\")", t[i].name, was, now);
		if (!cfg_setting_apply(nc, &t[i], was, &err))
			log_error("could not keep setting \"%s\": %s", t[i].name, err.message);
	}
}

bool
reload_config(bool log_changes)
{
	const struct cfg *cur = cfg_current();
	const char *path;
	struct nk_error err;
	struct cfg *nc;

	NK_ASSERT(cur != NULL);
	path = cur->conffile && cur->conffile[0] ? cur->conffile : cur->path;
	nc = cfg_load(path, &err);
	if (nc == NULL) {
		log_error("could not reload configuration: %s", err.message);
		return false;
	}
	keep_startup_settings(cur, nc, log_changes);
	cfg_set_current(nc);
	cfg_unref(nc);
	if (!reload_configure_log(cfg_current(), cli_quiet, cli_verbose))
		log_warn("could not reopen the logfile; logging goes where it went before");
	return true;
}
