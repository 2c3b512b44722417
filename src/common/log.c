/*
 * log.c - pgbouncer-format log lines to stderr, a logfile and syslog.
 *
 * Line format: "YYYY-MM-DD HH:MM:SS.mmm TZ [pid] LEVEL message". Each process
 * holds its own file descriptor for the logfile (opened with O_APPEND so lines
 * from several processes interleave whole). Entry points: log_configure(),
 * log_msg(), fatal(), nk_panic().
 */
#include "neki/base.h"

#include "neki/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

static int log_fd = -1;			/* the logfile, -1 when none */
static bool log_quiet;
int log_verbose;			/* neki/log.h */
static bool log_syslog;
static char log_ident[64] = "neki";	/* openlog keeps the pointer: static storage */

static const char *const level_names[] = {
	[LOG_LVL_FATAL] = "FATAL",
	[LOG_LVL_ERROR] = "ERROR",
	[LOG_LVL_WARNING] = "WARNING",
	[LOG_LVL_INFO] = "LOG",
	[LOG_LVL_DEBUG] = "DEBUG",
	[LOG_LVL_NOISE] = "NOISE",
};

static const int level_syslog_prio[] = {
	[LOG_LVL_FATAL] = LOG_CRIT,
	[LOG_LVL_ERROR] = LOG_ERR,
	[LOG_LVL_WARNING] = LOG_WARNING,
	[LOG_LVL_INFO] = LOG_INFO,
	[LOG_LVL_DEBUG] = LOG_DEBUG,
	[LOG_LVL_NOISE] = LOG_DEBUG,
};

struct facility_name {
	const char *name;
	int value;
};

static const struct facility_name facilities[] = {
	{ "auth", LOG_AUTH }, { "authpriv", LOG_AUTHPRIV }, { "daemon", LOG_DAEMON },
	{ "user", LOG_USER }, { "local0", LOG_LOCAL0 }, { "local1", LOG_LOCAL1 },
	{ "local2", LOG_LOCAL2 }, { "local3", LOG_LOCAL3 }, { "local4", LOG_LOCAL4 },
	{ "local5", LOG_LOCAL5 }, { "local6", LOG_LOCAL6 }, { "local7", LOG_LOCAL7 },
};

static int
facility_value(const char *name)
{
	for (size_t i = 0; name && i < NK_ARRAY_LEN(facilities); i++) {
		if (strcmp(facilities[i].name, name) == 0)
			return facilities[i].value;
	}
	return LOG_DAEMON;
}

bool
log_configure(const struct log_settings *s)
{
	bool ok = true;

	log_quiet = s->quiet;
	log_verbose = s->verbose;
	if (s->logfile && s->logfile[0]) {
		int fd = open(s->logfile, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);

		if (fd == -1) {
			fprintf(stderr, "neki: could not open logfile \"%s\": %s\n", s->logfile,
				strerror(errno));
			ok = false;
		} else {
			if (log_fd != -1)
				close(log_fd);
			log_fd = fd;
		}
	} else if (log_fd != -1) {
		close(log_fd);
		log_fd = -1;
	}
	if (log_syslog)
		closelog();
	log_syslog = s->use_syslog;
	if (log_syslog) {
		snprintf(log_ident, sizeof(log_ident), "%s",
			 s->syslog_ident && s->syslog_ident[0] ? s->syslog_ident : "neki");
		openlog(log_ident, LOG_PID, facility_value(s->syslog_facility));
	}
	return ok;
}

void
log_close(void)
{
	if (log_fd != -1)
		close(log_fd);
	log_fd = -1;
	if (log_syslog)
		closelog();
	log_syslog = false;
}

/* Format the "YYYY-MM-DD HH:MM:SS.mmm TZ [pid] LEVEL " prefix into <buf>. */
static size_t
format_prefix(char *buf, size_t len, enum log_level lvl)
{
	struct timeval tv;
	struct tm tm;
	char stamp[64];

	gettimeofday(&tv, NULL);
	localtime_r(&tv.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%d %H:%M:%S", &tm);
	int n = snprintf(buf, len, "%s.%03d %s [%d] %s ", stamp, (int)(tv.tv_usec / 1000),
			 tm.tm_zone ? tm.tm_zone : "UTC", (int)getpid(), level_names[lvl]);
	return n < 0 ? 0 : ((size_t)n >= len ? len - 1 : (size_t)n);
}

static void
write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);

		if (w == -1) {
			if (errno == EINTR)
				continue;
			return;
		}
		p += w;
		n -= (size_t)w;
	}
}

static void
log_vmsg(enum log_level lvl, const char *fmt, va_list ap)
{
	char line[4096];
	size_t off = format_prefix(line, sizeof(line), lvl);
	size_t msg_off = off;
	int n;

	n = vsnprintf(line + off, sizeof(line) - off - 1, fmt, ap);
	if (n < 0)
		n = 0;
	off += (size_t)n < sizeof(line) - off - 1 ? (size_t)n : sizeof(line) - off - 2;
	line[off++] = '\n';
	if (!log_quiet || lvl == LOG_LVL_FATAL)
		write_all(STDERR_FILENO, line, off);
	if (log_fd != -1)
		write_all(log_fd, line, off);
	if (log_syslog) {
		line[off - 1] = '\0';
		syslog(level_syslog_prio[lvl], "%s %s", level_names[lvl], line + msg_off);
	}
}

void
log_msg(enum log_level lvl, const char *fmt, ...)
{
	va_list ap;

	if (!log_enabled(lvl))
		return;
	va_start(ap, fmt);
	log_vmsg(lvl, fmt, ap);
	va_end(ap);
}

void
fatal(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vmsg(LOG_LVL_FATAL, fmt, ap);
	va_end(ap);
	exit(1);
}

void
nk_panic(const char *file, int line, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_msg(LOG_LVL_FATAL, "panic at %s:%d: %s", file, line, msg);
	abort();
}
