/*
 * listen.c - the listening sockets, opened once by the master before it forks.
 *
 * What lives here: TCP listeners (listen_addr list and the admin port), the Unix
 * socket with pgbouncer's stale-socket and in-use checks, sockets passed by systemd
 * socket activation (LISTEN_PID/LISTEN_FDS). What does not: accepting connections
 * (each child's loop does that) and per-connection socket tuning.
 * Entry points: listen_open_all(), listen_at(), listen_close_all().
 */
#include "neki/base.h"

#include "neki/net.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "neki/log.h"

#define SD_LISTEN_FDS_START 3
#define DEFER_ACCEPT_SECS 45		/* pgbouncer's fixed TCP_DEFER_ACCEPT value */

static struct listener listeners[LISTEN_MAX];
static size_t n_listeners;
static int listen_errno;		/* errno of the last failed TCP bind/listen */

size_t
listen_count(void)
{
	return n_listeners;
}

const struct listener *
listen_at(size_t i)
{
	NK_ASSERT(i < n_listeners);
	return &listeners[i];
}

/* Append a listener record; false when the table is full. */
static bool
add_listener(int fd, enum listen_kind kind, int family, const char *name, struct nk_error *err)
{
	struct listener *l;

	if (n_listeners == LISTEN_MAX)
		return nk_error_set(err, ERRCODE_CONFIG_FILE_ERROR,
				    "too many listening sockets (at most %d)",
				    LISTEN_MAX);
	l = &listeners[n_listeners++];
	memset(l, 0, sizeof(*l));
	l->fd = fd;
	l->kind = kind;
	l->family = family;
	snprintf(l->name, sizeof(l->name), "%s", name);
	log_info("listening on %s", name);
	return true;
}

/* "host:port" (IPv6 in brackets) for <sa>. */
static void
format_addr(const struct sockaddr *sa, socklen_t len, char *buf, size_t size)
{
	char host[NI_MAXHOST], port[NI_MAXSERV];

	if (getnameinfo(sa, len, host, sizeof(host), port, sizeof(port),
			NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
		snprintf(buf, size, "(unknown address)");
		return;
	}
	snprintf(buf, size, sa->sa_family == AF_INET6 ? "[%s]:%s" : "%s:%s", host, port);
}

/*
 * tcp_defer_accept: the kernel hands a TCP connection to accept() only once the client
 * has sent something (or after DEFER_ACCEPT_SECS), so silent connections never wake a
 * worker. -1 and errno on failure.
 */
static int
set_defer_accept(int fd, const struct cfg *c)
{
	int secs = c->net.tcp_defer_accept ? DEFER_ACCEPT_SECS : 0;

	return setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &secs, sizeof(secs));
}

/* Socket, options, bind and listen for one resolved TCP address. -1 and errno on failure. */
static int
bind_tcp(const struct addrinfo *ai, const struct cfg *c)
{
	int one = 1, fd, saved;

	fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
	if (fd == -1)
		return -1;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == -1)
		goto fail;
	if (c->proc.so_reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) == -1)
		goto fail;
	if (ai->ai_family == AF_INET6 &&
	    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) == -1)
		goto fail;
	if (set_defer_accept(fd, c) == -1)
		goto fail;
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) == -1)
		goto fail;
	if (listen(fd, c->proc.listen_backlog > 0 ? c->proc.listen_backlog : 128) == -1)
		goto fail;
	return fd;
fail:
	saved = errno;
	close(fd);
	errno = saved;
	return -1;
}

/* Listen on every address <host> ("*" = all) resolves to, port <port>. */
static bool
open_tcp_host(const char *host, int port, enum listen_kind kind, const struct cfg *c,
	      struct nk_error *err)
{
	struct addrinfo hints = { .ai_flags = AI_PASSIVE, .ai_socktype = SOCK_STREAM };
	struct addrinfo *res, *ai;
	char portstr[16], name[LISTEN_NAME_MAX];
	int rc;
	bool any = strcmp(host, "*") == 0;

	snprintf(portstr, sizeof(portstr), "%d", port);
	rc = getaddrinfo(any ? NULL : host, portstr, &hints, &res);
	if (rc != 0)
		return nk_error_set(err, ERRCODE_CONFIG_FILE_ERROR,
				    "could not resolve listen address \"%s\": %s",
				    host, gai_strerror(rc));
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		int fd = bind_tcp(ai, c);

		format_addr(ai->ai_addr, ai->ai_addrlen, name, sizeof(name));
		if (fd == -1 && any && errno == EAFNOSUPPORT) {
			log_warn("cannot listen on %s: %s", name, strerror(errno));
			continue;
		}
		if (fd == -1) {
			listen_errno = errno;
			nk_error_set(err, ERRCODE_CONFIG_FILE_ERROR,
				     "could not listen on %s: %s", name,
				     strerror(errno));
			freeaddrinfo(res);
			return false;
		}
		if (!add_listener(fd, kind, ai->ai_family, name, err)) {
			close(fd);
			freeaddrinfo(res);
			return false;
		}
	}
	freeaddrinfo(res);
	return true;
}

/* Listen on each entry of the comma list <addrs> at <port>. */
static bool
open_tcp_list(const char *addrs, int port, enum listen_kind kind, const struct cfg *c,
	      struct nk_error *err)
{
	char *copy = strdup(addrs), *save = NULL, *tok;
	bool ok = true;

	if (copy == NULL)
		return nk_error_oom(err);
	for (tok = strtok_r(copy, ",", &save); ok && tok; tok = strtok_r(NULL, ",", &save)) {
		while (*tok == ' ' || *tok == '\t')
			tok++;
		for (char *e = tok + strlen(tok); e > tok && (e[-1] == ' ' || e[-1] == '\t'); e--)
			e[-1] = '\0';
		if (*tok != '\0')
			ok = open_tcp_host(tok, port, kind, c, err);
	}
	free(copy);
	return ok;
}

/* True when something accepts connections on the Unix socket <path>. */
static bool
unix_socket_is_live(const struct sockaddr_un *sa, socklen_t len)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool live;

	if (fd == -1)
		return false;
	live = connect(fd, (const struct sockaddr *)sa, len) == 0;
	close(fd);
	return live;
}

/* Fill <sa> for "<dir>/.s.PGSQL.<port>" ("@dir" = abstract); returns its length or 0. */
static socklen_t
unix_address(const char *dir, int port, struct sockaddr_un *sa, char *path, size_t path_len)
{
	int n = snprintf(path, path_len, "%s/.s.PGSQL.%d", dir, port);

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (n < 0 || (size_t)n >= sizeof(sa->sun_path) || (size_t)n >= path_len)
		return 0;
	memcpy(sa->sun_path, path, (size_t)n);
	if (path[0] == '@') {
		sa->sun_path[0] = '\0';
		return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + (size_t)n);
	}
	return (socklen_t)sizeof(*sa);
}

/* chmod and chgrp the socket file as unix_socket_mode / unix_socket_group say. */
static bool
unix_set_perms(const char *path, const struct cfg *c, struct nk_error *err)
{
	if (chmod(path, (mode_t)c->proc.unix_socket_mode) == -1)
		return nk_error_set(err, ERRCODE_CONFIG_FILE_ERROR,
				    "could not set mode of \"%s\": %s", path,
				    strerror(errno));
	if (c->proc.unix_socket_group && c->proc.unix_socket_group[0]) {
		struct group *g = getgrnam(c->proc.unix_socket_group);

		if (g == NULL)
			return nk_error_set(err, ERRCODE_CONFIG_FILE_ERROR,
					    "unix_socket_group \"%s\" does not exist",
					    c->proc.unix_socket_group);
		if (chown(path, (uid_t)-1, g->gr_gid) == -1)
			return nk_error_set(err, ERRCODE_CONFIG_FILE_ERROR,
					    "could not set group of \"%s\": %s",
					    path, strerror(errno));
	}
	return true;
}

/* Remove <path> if it is a dead socket; fail if a live server holds it. */
static bool
unix_check_stale(const char *path, const struct sockaddr_un *sa, socklen_t len,
		 struct nk_error *err)
{
	struct stat st;

	if (path[0] == '@' || lstat(path, &st) == -1)
		return true;
	if (unix_socket_is_live(sa, len))
		return nk_error_set(err, ERRCODE_CONFIG_FILE_ERROR,
				    "unix socket is in use, cannot continue");
	if (!S_ISSOCK(st.st_mode))
		return nk_error_set(err, ERRCODE_CONFIG_FILE_ERROR,
				    "\"%s\" exists and is not a socket", path);
	log_info("removing stale unix socket \"%s\"", path);
	if (unlink(path) == -1)
		return nk_error_set(err, ERRCODE_CONFIG_FILE_ERROR,
				    "could not remove stale unix socket \"%s\": %s",
				    path, strerror(errno));
	return true;
}

/* The Unix socket <unix_socket_dir>/.s.PGSQL.<listen_port>. */
static bool
open_unix(const struct cfg *c, struct nk_error *err)
{
	struct sockaddr_un sa;
	char path[LISTEN_NAME_MAX], name[LISTEN_NAME_MAX + 8];
	socklen_t len = unix_address(c->proc.unix_socket_dir, c->proc.listen_port, &sa, path, sizeof(path));
	int fd;

	if (len == 0)
		return nk_error_set(err, ERRCODE_CONFIG_FILE_ERROR,
				    "unix socket path in \"%s\" is too long",
				    c->proc.unix_socket_dir);
	if (!unix_check_stale(path, &sa, len, err))
		return false;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd == -1)
		return nk_error_set(err, ERRCODE_CONFIG_FILE_ERROR,
				    "could not create unix socket: %s", strerror(errno));
	if (bind(fd, (struct sockaddr *)&sa, len) == -1) {
		int e = errno;

		close(fd);
		if (e == EADDRINUSE)
			return nk_error_set(err, ERRCODE_CONFIG_FILE_ERROR,
					    "unix socket is in use, cannot continue");
		return nk_error_set(err, ERRCODE_CONFIG_FILE_ERROR,
				    "could not bind unix socket \"%s\": %s", path,
				    strerror(e));
	}
	snprintf(name, sizeof(name), "unix:%s", path);
	if ((path[0] != '@' && !unix_set_perms(path, c, err)) ||
	    listen(fd, c->proc.listen_backlog > 0 ? c->proc.listen_backlog : 128) == -1 ||
	    !add_listener(fd, LISTEN_MAIN, AF_UNIX, name, err)) {
		if (!nk_error_is_set(err))
			nk_error_set(err, ERRCODE_CONFIG_FILE_ERROR,
				     "could not listen on \"%s\": %s", path,
				     strerror(errno));
		close(fd);
		if (path[0] != '@')
			unlink(path);
		return false;
	}
	if (path[0] != '@')
		snprintf(listeners[n_listeners - 1].unix_path, LISTEN_NAME_MAX, "%s", path);
	return true;
}

/* Port of a bound inet socket, or -1. */
static int
socket_port(int fd, int *family)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &len) == -1)
		return -1;
	*family = ss.ss_family;
	if (ss.ss_family == AF_INET)
		return ntohs(((struct sockaddr_in *)&ss)->sin_port);
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return -1;
}

/* Describe the activated socket <fd> into <name>. */
static void
describe_activated(int fd, int family, char *name, size_t size)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char addr[LISTEN_NAME_MAX];
	int n;

	if (getsockname(fd, (struct sockaddr *)&ss, &len) == -1) {
		snprintf(name, size, "systemd fd %d", fd);
		return;
	}
	if (family == AF_UNIX) {
		const struct sockaddr_un *su = (const struct sockaddr_un *)&ss;

		n = snprintf(name, size, "unix:%s%s (systemd)", su->sun_path[0] ? "" : "@",
			     su->sun_path[0] ? su->sun_path : su->sun_path + 1);
	} else {
		format_addr((struct sockaddr *)&ss, len, addr, sizeof(addr));
		n = snprintf(name, size, "%s (systemd)", addr);
	}
	if (n < 0 || (size_t)n >= size)
		snprintf(name, size, "systemd fd %d", fd);
}

/* Number of sockets systemd passed to this very process (LISTEN_PID/LISTEN_FDS), or 0. */
static int
activated_count(void)
{
	const char *pid_s = getenv("LISTEN_PID"), *fds_s = getenv("LISTEN_FDS");
	int n;

	if (pid_s == NULL || fds_s == NULL || atol(pid_s) != (long)getpid())
		return 0;
	n = atoi(fds_s);
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	return n > 0 ? n : 0;
}

/* Take the sockets systemd passed; a TCP one on admin_listen_port serves the admin. */
static bool
take_activated(int n, const struct cfg *c, bool *admin_taken, struct nk_error *err)
{
	for (int fd = SD_LISTEN_FDS_START; fd < SD_LISTEN_FDS_START + n; fd++) {
		char name[LISTEN_NAME_MAX];
		int family = AF_UNSPEC, port = socket_port(fd, &family);
		enum listen_kind kind = LISTEN_MAIN;
		int flags = fcntl(fd, F_GETFL);

		if (flags == -1 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) == -1 ||
		    fcntl(fd, F_SETFD, FD_CLOEXEC) == -1)
			return nk_error_set(err, ERRCODE_CONFIG_FILE_ERROR,
					    "bad socket from systemd (fd %d): %s",
					    fd, strerror(errno));
		if (port > 0 && set_defer_accept(fd, c) == -1)
			log_warn("could not set TCP_DEFER_ACCEPT on the socket from systemd: %s",
				 strerror(errno));
		if (port > 0 && port == c->neki.admin_listen_port) {
			kind = LISTEN_ADMIN;
			*admin_taken = true;
		}
		describe_activated(fd, family, name, sizeof(name));
		if (!add_listener(fd, kind, family, name, err))
			return false;
		listeners[n_listeners - 1].activated = true;
	}
	if (c->proc.listen_addr && c->proc.listen_addr[0])
		log_warn("listen_addr is ignored: sockets were passed by systemd");
	if (c->proc.unix_socket_dir && strcmp(c->proc.unix_socket_dir, "/tmp") != 0)
		log_warn("unix_socket_dir is ignored: sockets were passed by systemd");
	return true;
}

/* The main listeners: systemd's sockets, or listen_addr and the Unix socket. */
static bool
open_main(const struct cfg *c, bool *admin_taken, struct nk_error *err)
{
	int n = activated_count();

	if (n > 0)
		return take_activated(n, c, admin_taken, err);
	if (c->proc.listen_addr && c->proc.listen_addr[0] &&
	    !open_tcp_list(c->proc.listen_addr, c->proc.listen_port, LISTEN_MAIN, c, err))
		return false;
	if (c->proc.unix_socket_dir && c->proc.unix_socket_dir[0] && !open_unix(c, err))
		return false;
	return true;
}

/*
 * The admin port. A pgbouncer.ini names no admin port, and several such instances on one host
 * (pgbouncer's own test suite, a so_reuseport group) would all want the default 6433: when the
 * file sets neither admin_listen_addr nor admin_listen_port and the default port is taken, neki
 * starts without it (a warning); the console stays on the main port, as in pgbouncer.
 */
static bool
open_admin(const struct cfg *c, struct nk_error *err)
{
	const char *addr = c->neki.admin_listen_addr && c->neki.admin_listen_addr[0] ? c->neki.admin_listen_addr
									    : "127.0.0.1";

	listen_errno = 0;
	if (open_tcp_list(addr, c->neki.admin_listen_port, LISTEN_ADMIN, c, err))
		return true;
	if (c->neki.admin_listen_given || listen_errno != EADDRINUSE)
		return false;
	log_warn("%s (the default admin_listen_port); the admin console is served on the main "
		 "port only", err->message);
	return true;
}

bool
listen_open_all(const struct cfg *c, struct nk_error *err)
{
	bool admin_taken = false;

	NK_ASSERT(n_listeners == 0);
	if (!open_main(c, &admin_taken, err))
		goto fail;
	if (!admin_taken && c->neki.admin_listen_port > 0 && !open_admin(c, err))
		goto fail;
	return true;
fail:
	listen_close_all();
	listen_unlink_unix();
	n_listeners = 0;
	return false;
}

/* The name of a listener bound to <ss> into <name>, its socket file (or "") into <path>. */
static void
describe_adopted(const struct sockaddr_storage *ss, socklen_t len, char *name, size_t size,
		 char *path, size_t path_size)
{
	const struct sockaddr_un *su = (const struct sockaddr_un *)ss;

	path[0] = '\0';
	if (ss->ss_family != AF_UNIX) {
		format_addr((const struct sockaddr *)ss, len, name, size);
		return;
	}
	if (su->sun_path[0] != '\0')
		snprintf(path, path_size, "%.*s", (int)sizeof(su->sun_path), su->sun_path);
	snprintf(name, size, "unix:%s%.*s", su->sun_path[0] ? "" : "@",
		 (int)sizeof(su->sun_path) - 1, su->sun_path[0] ? su->sun_path : su->sun_path + 1);
}

bool
listen_adopt(int fd, int admin_port, struct nk_error *err)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char name[LISTEN_NAME_MAX], path[LISTEN_NAME_MAX];
	int accepting = 0, family = AF_UNSPEC, port;
	socklen_t alen = sizeof(accepting);
	int flags = fcntl(fd, F_GETFL);

	if (getsockname(fd, (struct sockaddr *)&ss, &len) == -1 ||
	    getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &alen) == -1 || !accepting)
		return nk_error_set(err, ERRCODE_CONFIG_FILE_ERROR,
				    "a socket handed over as a listener is not "
				    "listening (fd %d)", fd);
	if (flags == -1 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) == -1 ||
	    fcntl(fd, F_SETFD, FD_CLOEXEC) == -1)
		return nk_error_set(err, ERRCODE_CONFIG_FILE_ERROR,
				    "could not set up a listening socket handed over: "
				    "%s", strerror(errno));
	port = socket_port(fd, &family);
	describe_adopted(&ss, len, name, sizeof(name), path, sizeof(path));
	if (!add_listener(fd, port > 0 && port == admin_port ? LISTEN_ADMIN : LISTEN_MAIN,
			  ss.ss_family, name, err))
		return false;
	snprintf(listeners[n_listeners - 1].unix_path, LISTEN_NAME_MAX, "%s", path);
	return true;
}

void
listen_close(size_t i)
{
	NK_ASSERT(i < n_listeners);
	if (listeners[i].fd != -1)
		close(listeners[i].fd);
	listeners[i].fd = -1;
}

void
listen_close_all(void)
{
	for (size_t i = 0; i < n_listeners; i++)
		listen_close(i);
}

void
listen_unlink_unix(void)
{
	for (size_t i = 0; i < n_listeners; i++) {
		if (listeners[i].unix_path[0] != '\0' && !listeners[i].activated)
			unlink(listeners[i].unix_path);
		listeners[i].unix_path[0] = '\0';
	}
}

void
listen_chown_unix(uid_t uid)
{
	for (size_t i = 0; i < n_listeners; i++) {
		if (listeners[i].unix_path[0] != '\0' &&
		    chown(listeners[i].unix_path, uid, (gid_t)-1) == -1)
			log_warn("could not give unix socket \"%s\" to uid %d: %s",
				 listeners[i].unix_path, (int)uid, strerror(errno));
	}
}
