/*
 * reload.c - re-reading the configuration, in the master (SIGHUP) and in every child
 * (the RELOAD command the master forwards).
 *
 * The file is parsed into a new struct cfg; if it is invalid nothing changes. Settings
 * the table marks as not reloadable keep the values in force (pgbouncer ignores them
 * on reload too; the config module logs each one). Logging is reconfigured from the
 * new settings plus the command line's -q / -v.
 */
#include "neki/base.h"

#include "neki/proc.h"

#include "neki/config.h"
#include "neki/dns.h"
#include "neki/log.h"
#include "neki/tls.h"

static bool cli_quiet;		/* -q */
static int cli_verbose;		/* number of -v */
static struct proc_hooks hooks;	/* what the sessions of this process asked to be told */

void
proc_set_hooks(const struct proc_hooks *h)
{
	hooks = *h;
}

void
proc_pools_reload(void)
{
	if (hooks.pools_reload != NULL)
		hooks.pools_reload();
}

bool
reload_configure_log(const struct cfg *c, bool quiet, int verbose)
{
	struct log_settings s = {
		.logfile = c->proc.logfile,
		.use_syslog = c->log.syslog,
		.syslog_ident = c->log.syslog_ident,
		.syslog_facility = c->log.syslog_facility,
		.quiet = quiet,
		.verbose = c->log.verbose > verbose ? c->log.verbose : verbose,
	};

	cli_quiet = quiet;
	cli_verbose = verbose;
	return log_configure(&s);
}

bool
reload_apply_log(void)
{
	return reload_configure_log(cfg_current(), cli_quiet, cli_verbose);
}

/*
 * The child's TLS contexts from the configuration in force. A failure is only noted here:
 * the master (RELOAD) or the admin (console SET) checks the same files and logs it once.
 */
bool
reload_tls_contexts(void)
{
	bool server_tls_changed;
	struct nk_error err;

	if (!tls_reload(cfg_current(), &server_tls_changed, &err)) {
		log_debug("keeping the old TLS contexts: %s", err.message);
		return false;
	}
	if (server_tls_changed) {
		log_info("server TLS settings changed: reconnecting every server link");
		/* links keep the context they were opened with */
		if (hooks.servers_reconnect != NULL)
			hooks.servers_reconnect();
	}
	return true;
}

void
reload_check_tls(void)
{
	struct nk_error err;

	if (tls_check(cfg_current(), &err))
		return;
	log_error("TLS setup failed: %s", err.message);
	log_error("TLS configuration could not be reloaded, keeping old configuration");
}

bool
reload_config(bool *tls_ok)
{
	struct nk_error err;
	struct cfg *nc;
	bool ok;

	NK_ASSERT(cfg_current() != NULL);
	nc = cfg_reload(cfg_current(), &err);
	if (nc == NULL) {
		/* the reason, then the line pgbouncer logs for a failed reload (operators grep it) */
		log_error("could not reload configuration: %s", err.message);
		log_warn("config file loading failed");
		return false;
	}
	cfg_set_current(nc);
	cfg_unref(nc);
	proc_pools_reload();
	ok = reload_tls_contexts();
	if (tls_ok != NULL)
		*tls_ok = ok;
	dns_process_reload(cfg_current());
	if (!reload_configure_log(cfg_current(), cli_quiet, cli_verbose))
		log_warn("could not reopen the logfile; logging goes where it went before");
	return true;
}
