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
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "neki/config.h"
#include "neki/log.h"
#include "neki/tls.h"

#include "neki/worker.h"

#include "admin_int.h"

static int forward_fd = -1;		/* owned: the internal socket */
static struct event *forward_ev;	/* owned */

/* Accept a console connection from listener <l>. */
static void
admin_accept(int fd, const struct listener *l)
{
	console_accept(fd, l->family == AF_UNIX, false);
}

socklen_t
admin_forward_address(int port, struct sockaddr_un *out)
{
	int n;

	memset(out, 0, sizeof(*out));
	out->sun_family = AF_UNIX;
	/*
	 * abstract namespace (sun_path[0] = 0); named as libpq names sockets, so that
	 * `psql -h @neki-admin -p <listen_port>` reaches it too
	 */
	n = snprintf(out->sun_path + 1, sizeof(out->sun_path) - 1, "neki-admin/.s.PGSQL.%d", port);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
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

bool
admin_is_neki_call(const char *sql)
{
	struct adm_call call;
	struct nk_error err;
	enum adm_call_parse_result r = adm_call_parse(sql, &call, &err);

	if (r == ADM_CALL_OK)
		adm_call_cleanup(&call);
	return r != ADM_CALL_NOT_NEKI;
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

/* Listen on the internal socket for connections forwarded by workers. */
static void
forward_listen(void)
{
	struct sockaddr_un sa;
	socklen_t len = admin_forward_address(cfg_current()->listen_port, &sa);

	forward_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (forward_fd == -1 || bind(forward_fd, (struct sockaddr *)&sa, len) == -1 ||
	    listen(forward_fd, 128) == -1) {
		log_warn("could not open the admin's internal socket: %s", strerror(errno));
		if (forward_fd != -1)
			close(forward_fd);
		forward_fd = -1;
		return;
	}
	forward_ev = event_new(child_base(), forward_fd, EV_READ | EV_PERSIST, forward_accept_cb,
			       NULL);
	if (forward_ev == NULL || event_add(forward_ev, NULL) == -1)
		log_warn("could not watch the admin's internal socket");
}

/* The loop exists: load and publish the topology, start following the store. */
static void
admin_start(void)
{
	struct nk_error err;

	if (!tls_init(cfg_current(), &err))
		log_error("console TLS is off: %s", err.message);
	forward_listen();
	rev_init(child_base());
	catload_init(child_base());
	adm_stats_tick();	/* the clock of the stats averages starts now */
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
