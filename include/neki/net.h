/*
 * neki/net.h - listening sockets (src/net/listen.c).
 *
 * The master opens every listening socket before it forks, as pgbouncer does: TCP on
 * listen_addr:listen_port (comma list, "*" = every address; unset = Unix socket only),
 * the Unix socket <unix_socket_dir>/.s.PGSQL.<listen_port> ("@dir" = abstract
 * namespace), and the admin port admin_listen_addr:admin_listen_port. Sockets handed
 * over by systemd (LISTEN_FDS) replace the main ones. All are non-blocking, so the
 * processes that share them can race on accept() and treat EAGAIN as normal.
 * Children inherit the descriptors; listen_close_all() is how a process stops
 * listening (the socket closes for good once every process has closed it).
 */
#ifndef NEKI_NET_H
#define NEKI_NET_H

#include "neki/base.h"
#include "neki/config.h"
#include "neki/error.h"

#define LISTEN_MAX 32
#define LISTEN_NAME_MAX 128

/* Who accepts on a listener. */
enum listen_kind {
	LISTEN_MAIN = 0,	/* clients: the workers */
	LISTEN_ADMIN = 1,	/* the admin console: the admin process */
};

struct listener {
	int fd;				/* -1 once closed */
	enum listen_kind kind;
	int family;			/* AF_INET, AF_INET6 or AF_UNIX */
	bool activated;			/* handed over by systemd (not ours to unlink) */
	char name[LISTEN_NAME_MAX];	/* "127.0.0.1:6432", "unix:/tmp/.s.PGSQL.6432" */
	char unix_path[LISTEN_NAME_MAX]; /* file to unlink at exit; "" for none or abstract */
};

/*
 * Open every listener <c> asks for (or take systemd's). Logs "listening on ..." per
 * socket. False and <err> filled (with what was opened closed again) when a socket
 * cannot be bound, including "unix socket is in use, cannot continue" when a live
 * server holds the Unix socket. A stale Unix socket file is removed.
 */
NK_MUSTCHECK bool listen_open_all(const struct cfg *c, struct nk_error *err);

/*
 * Take the listening socket <fd> the process before an online restart handed over (neki -R):
 * the admin port when it is bound to <admin_port>, the main port otherwise; a Unix socket's
 * file becomes this process's to remove at exit. Logs "listening on ...". False with <err>
 * filled when <fd> is not a listening socket or the table is full (<fd> stays the caller's).
 */
NK_MUSTCHECK bool listen_adopt(int fd, int admin_port, struct nk_error *err);

/* Number of listeners and listener <i> (borrowed). */
size_t listen_count(void);
const struct listener *listen_at(size_t i);

/* Close this process's copy of listener <i> (a child that does not serve it). */
void listen_close(size_t i);

/* Close every listener in this process (children on shutdown; the master at exit). */
void listen_close_all(void);

/* Remove the Unix socket files this process created (the master at exit). */
void listen_unlink_unix(void);

/* Give the Unix socket files to <uid> (before the master drops root, so it can remove them). */
void listen_chown_unix(uid_t uid);

/* Library versions for `neki -V` and the startup log (src/net/dns.c, src/net/tls.c). */
const char *dns_library_version(void);
const char *tls_library_version(void);

#endif /* NEKI_NET_H */
