/*
 * admin.c - the admin process: the child runtime on the admin listener(s), serving the
 * console (console.c) and the __neki functions (nekifn.c), and keeping the topology
 * revisions (revision.c, follow.c). Entry point: admin_main().
 */
#include "neki/base.h"

#include "neki/admin.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "neki/config.h"
#include "neki/fdchan.h"
#include "neki/log.h"
#include "neki/tls.h"

#include "neki/proc.h"

#include "admin_int.h"
#include "servers.h"
#include "recover.h"
#include "deadlock.h"
#include "gsibuild.h"

static int forward_fd = -1;		/* owned: the internal socket (bound by the master) */
static struct event *forward_ev;	/* owned */
static struct sockaddr_un forward_sa;	/* its address (inherited by every child) */
static socklen_t forward_len;		/* 0 until admin_forward_open() */

/* Accept a console connection from listener <l>. */
static void
admin_accept(int fd, const struct listener *l)
{
	console_accept(fd, l->family == AF_UNIX, false);
}

/* The abstract address "@neki-admin<tag>/.s.PGSQL.<port>" into <out>; its length. */
static socklen_t
forward_name(const char *tag, int port, struct sockaddr_un *out)
{
	int n;

	memset(out, 0, sizeof(*out));
	out->sun_family = AF_UNIX;
	/* abstract namespace (sun_path[0] = 0), named as libpq names sockets */
	n = snprintf(out->sun_path + 1, sizeof(out->sun_path) - 1, "neki-admin%s/.s.PGSQL.%d",
		     tag, port);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

socklen_t
admin_forward_address(int port, struct sockaddr_un *out)
{
	if (forward_len == 0)
		return forward_name("", port, out);
	*out = forward_sa;
	return forward_len;
}

/* Bind and listen on <sa>; the socket or -1 (errno set). */
static int
forward_bind(const struct sockaddr_un *sa, socklen_t len)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd == -1)
		return -1;
	if (bind(fd, (const struct sockaddr *)sa, len) == -1 || listen(fd, 128) == -1) {
		int saved = errno;

		close(fd);
		errno = saved;
		return -1;
	}
	return fd;
}

bool
admin_forward_open(int port, struct nk_error *err)
{
	char tag[32];

	forward_len = forward_name("", port, &forward_sa);
	forward_fd = forward_bind(&forward_sa, forward_len);
	if (forward_fd == -1 && errno == EADDRINUSE) {
		/* another neki shares listen_port (so_reuseport): a name of our own */
		snprintf(tag, sizeof(tag), "-%d", (int)getpid());
		forward_len = forward_name(tag, port, &forward_sa);
		forward_fd = forward_bind(&forward_sa, forward_len);
	}
	if (forward_fd != -1)
		return true;
	forward_len = 0;
	return nk_error_set(err, ERRCODE_SYSTEM_ERROR,
			    "could not open the admin's internal socket: %s",
			    strerror(errno));
}

int
admin_forward_connect(int port)
{
	struct sockaddr_un sa;
	socklen_t len = admin_forward_address(port, &sa);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd == -1)
		return -1;
	if (connect(fd, (struct sockaddr *)&sa, len) == -1 && errno != EINPROGRESS &&
	    errno != EAGAIN) {
		int saved = errno;

		close(fd);
		errno = saved;
		return -1;
	}
	return fd;
}

/* Does <sql> name __neki anywhere (a cheap look before parsing it as a call: every
 * statement of a routed session is asked)? */
static bool
admin_names_neki(const char *sql)
{
	for (const char *p = strchr(sql, '_'); p != NULL; p = strchr(p + 1, '_'))
		if (strncasecmp(p, "__neki", 6) == 0)
			return true;
	return false;
}

bool
admin_is_neki_call(const char *sql)
{
	struct adm_call call;
	struct nk_error err;
	enum adm_call_parse_result r;

	r = admin_names_neki(sql) ? adm_call_parse(sql, &call, &err) : ADM_CALL_NOT_NEKI;
	if (r == ADM_CALL_OK)
		adm_call_cleanup(&call);
	return r == ADM_CALL_OK;	/* the rest: the router's grammar and guard decide */
}

static void
forward_accept_cb(evutil_socket_t fd, short what, void *arg)
{
	for (int i = 0; i < 16; i++) {
		int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (cfd == -1)
			return;
		console_accept(cfd, true, true);
	}
}

/* Accept on the internal socket (bound by the master) the connections of workers. */
static void
forward_listen(void)
{
	if (forward_fd == -1) {
		log_warn("the admin's internal socket is not open: no console on the main port");
		return;
	}
	forward_ev = event_new(child_base(), forward_fd, EV_READ | EV_PERSIST, forward_accept_cb,
			       NULL);
	if (forward_ev == NULL || event_add(forward_ev, NULL) == -1)
		log_warn("could not watch the admin's internal socket");
}

/* The workers' descriptor channel: console clients handed over, SHOW FDS answers. */
static void
fdchan_cb(evutil_socket_t fd, short what, void *arg)
{
	uint8_t *buf = arg;

	for (int i = 0; i < 64; i++) {
		int fds[FDPASS_MAX_FDS];
		size_t nfds = 0;
		const struct fdchan_hdr *h = fdchan_recv(buf, fds, &nfds);

		if (h == NULL)
			return;
		if (h->kind == FDCHAN_CONSOLE)
			console_adopt(fds[0], (const struct fdchan_console *)(h + 1));
		else
			fds_on_message(h, fds, nfds);
	}
}

/* Watch the descriptor channel (opened by the master). */
static void
fdchan_listen(void)
{
	static uint8_t buf[FDCHAN_MSG_MAX];
	struct event *ev;

	if (fdchan_recv_fd() == -1) {
		log_warn("the workers' descriptor channel is not open: no SHOW FDS descriptors");
		return;
	}
	ev = event_new(child_base(), fdchan_recv_fd(), EV_READ | EV_PERSIST, fdchan_cb, buf);
	if (ev == NULL || event_add(ev, NULL) == -1)
		log_warn("could not watch the workers' descriptor channel");
}

/* The loop exists: load and publish the topology, start following the store. */
static void
admin_start(void)
{
	struct nk_error err;

	if (!tls_init(cfg_current(), &err))
		log_error("console TLS is off: %s", err.message);
	forward_listen();
	fdchan_listen();
	rev_init(child_base());
	catload_init(child_base());
	ddlsync_init(child_base());
	shardfn_init(child_base());
	servers_init(child_base());
	recover_init(child_base());
	deadlock_init(child_base());
	gsibuild_init(child_base());
	adm_stats_tick();	/* the clock of the stats averages starts now */
	metrics_init(child_base());
}

void
admin_main(unsigned slot)
{
	struct child_spec s = {
		.slot = slot,
		.kind = SHM_PROC_ADMIN,
		.listens = LISTEN_ADMIN,
		.on_accept = admin_accept,
		.on_start = admin_start,
	};

	child_run(&s);
}
