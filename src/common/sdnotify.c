/*
 * sdnotify.c - the systemd notify protocol, spoken directly on a datagram socket.
 *
 * systemd passes NOTIFY_SOCKET (a path, or "@name" for the abstract namespace) to a
 * Type=notify service; the service sends newline-separated KEY=VALUE datagrams. This
 * is all libsystemd's sd_notify() does, so neki needs no library for it.
 */
#include "neki/base.h"

#include "neki/clock.h"
#include "neki/sdnotify.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "neki/log.h"

static struct sockaddr_un notify_addr;
static socklen_t notify_len;		/* 0 = notifications off */

void
sdnotify_init(void)
{
	const char *s = getenv("NOTIFY_SOCKET");
	size_t n;

	notify_len = 0;
	if (s == NULL || (s[0] != '/' && s[0] != '@'))
		return;
	n = strlen(s);
	if (n >= sizeof(notify_addr.sun_path)) {
		log_warn("NOTIFY_SOCKET is too long, not notifying systemd");
		return;
	}
	memset(&notify_addr, 0, sizeof(notify_addr));
	notify_addr.sun_family = AF_UNIX;
	memcpy(notify_addr.sun_path, s, n);
	if (s[0] == '@')
		notify_addr.sun_path[0] = '\0';
	notify_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (s[0] == '/'));
	unsetenv("NOTIFY_SOCKET");
}

bool
sdnotify_enabled(void)
{
	return notify_len > 0;
}

void
sdnotify_send(const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	int fd, n;

	if (notify_len == 0)
		return;
	va_start(ap, fmt);
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(msg))
		return;
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd == -1 || sendto(fd, msg, (size_t)n, MSG_NOSIGNAL, (struct sockaddr *)&notify_addr,
			       notify_len) == -1)
		log_warn("could not notify systemd: %s", strerror(errno));
	if (fd != -1)
		close(fd);
}

void
sdnotify_ready(const char *status)
{
	sdnotify_send("READY=1\nSTATUS=%s", status);
}

void
sdnotify_reloading(void)
{
	sdnotify_send("RELOADING=1\nMONOTONIC_USEC=%llu", (unsigned long long)nk_now_us());
}

void
sdnotify_stopping(const char *status)
{
	sdnotify_send("STOPPING=1\nSTATUS=%s", status);
}
