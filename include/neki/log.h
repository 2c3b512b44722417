/*
 * neki/log.h - logging with pgbouncer's line format.
 *
 *   2026-11-30 03:12:45.123 UTC [1234] LOG message
 *
 * Levels are pgbouncer's: FATAL, ERROR, WARNING, LOG, DEBUG, NOISE. The level is
 * checked before formatting. Output goes to stderr (unless quiet), the logfile and
 * syslog, as configured with log_configure(). Every process (master, workers,
 * admin) logs through this module; the pid in brackets tells them apart.
 */
#ifndef NEKI_LOG_H
#define NEKI_LOG_H

#include "neki/base.h"

enum log_level {
	LOG_LVL_FATAL = 0,
	LOG_LVL_ERROR = 1,
	LOG_LVL_WARNING = 2,
	LOG_LVL_INFO = 3,	/* printed as "LOG" */
	LOG_LVL_DEBUG = 4,	/* verbose >= 1 */
	LOG_LVL_NOISE = 5,	/* verbose >= 2 */
};

struct log_settings {
	const char *logfile;	/* borrowed; NULL or "" = none */
	bool use_syslog;
	const char *syslog_ident; /* borrowed */
	const char *syslog_facility; /* borrowed, e.g. "daemon", "local0" */
	bool quiet;		/* no stderr output */
	int verbose;		/* 0 = LOG, 1 = DEBUG, 2+ = NOISE */
};

/*
 * Apply <s>: (re)open the logfile, (re)open syslog. Called at startup and on every
 * reload (pgbouncer reopens its logfile on SIGHUP). Returns false and logs to stderr
 * when the logfile cannot be opened (the previous one, if any, stays in use).
 */
NK_MUSTCHECK bool log_configure(const struct log_settings *s);

/* Close the logfile and syslog (at exit). */
void log_close(void);

/* The configured verbosity (log_configure() sets it; read it through log_enabled()). */
extern int log_verbose;

/* True when a message of <lvl> would be written (check before costly formatting; inline:
 * the debug messages of the data path ask on every packet). */
static inline bool
log_enabled(enum log_level lvl)
{
	if (lvl <= LOG_LVL_INFO)
		return true;
	return log_verbose >= (lvl == LOG_LVL_DEBUG ? 1 : 2);
}

/* Write one line at <lvl>. */
void log_msg(enum log_level lvl, const char *fmt, ...) NK_PRINTF(2, 3);

#define log_fatal(...) log_msg(LOG_LVL_FATAL, __VA_ARGS__)
#define log_error(...) log_msg(LOG_LVL_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LVL_WARNING, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...) do { if (log_enabled(LOG_LVL_DEBUG)) log_msg(LOG_LVL_DEBUG, __VA_ARGS__); } while (0)
#define log_noise(...) do { if (log_enabled(LOG_LVL_NOISE)) log_msg(LOG_LVL_NOISE, __VA_ARGS__); } while (0)

/* Log at FATAL and exit(1). For startup errors only. */
NK_NORETURN void fatal(const char *fmt, ...) NK_PRINTF(1, 2);

#endif /* NEKI_LOG_H */
