/*
 * takeover.c - the new process's side of the online restart, `neki -R` (see neki/takeover.h).
 *
 * The master of the new process is a console client of the old one for a moment: over the
 * old process's Unix socket it logs in as the local user pgbouncer (no password: same uid),
 * sends SUSPEND, then SHOW FDS, whose every DataRow comes with one descriptor (SCM_RIGHTS,
 * read with fdpass_recv: the descriptors queue up in arrival order and each row takes the
 * next; the old process sends a row and its descriptor in one sendmsg, so the descriptor
 * is there by the time the row is whole). pgbouncer's log lines mark the steps. Everything
 * blocks, with SIGTERM, SIGINT and SIGQUIT polled between waits: any of them, an error of
 * the old process, a malformed answer or a timeout end the new process at once (the old
 * one resumes when the connection goes). Entry points: takeover_begin(), takeover_assign(),
 * takeover_finish(), takeover_keep_only(), takeover_release().
 */
#include "neki/base.h"

#include "neki/clock.h"
#include "neki/takeover.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "neki/daemon.h"
#include "neki/fdpass.h"
#include "neki/log.h"
#include "neki/net.h"
#include "neki/pktbuf.h"
#include "neki/proto.h"
#include "neki/session.h"
#include "neki/shm.h"

#define TO_SLICE_MS 100			/* signal polling granularity */
#define TO_LOGIN_MS 10000		/* connect and log in */
#define TO_COMMAND_MS 60000		/* SUSPEND (at least), SHOW FDS, SHUTDOWN */
#define TO_PIDFILE_MS 30000		/* the old pidfile to go after SHUTDOWN */

/* The connection to the old process. */
struct to_conn {
	int fd;
	uint8_t *buf;			/* owned: bytes received, not yet consumed */
	size_t len, cap;
	int *fds;			/* owned: descriptors received, not yet given to a row */
	size_t nfds, fds_cap, fds_head;
	size_t last;			/* bytes of the message handed out last (dropped next) */
	uint64_t deadline_ms;
	const sigset_t *sigs;		/* borrowed: the blocked signals to poll */
};

static struct to_conn conn = { .fd = -1 };
static struct takeover_sock *socks;	/* owned */
static size_t n_socks, cap_socks;

/* "<unix_socket_dir>/.s.PGSQL.<listen_port>" of <c> into <sa>; its length, 0 when too long. */
static socklen_t
to_address(const struct cfg *c, struct sockaddr_un *sa)
{
	int n;

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	n = snprintf(sa->sun_path, sizeof(sa->sun_path), "%s/.s.PGSQL.%d", c->proc.unix_socket_dir,
		     c->proc.listen_port);
	return n > 0 && (size_t)n < sizeof(sa->sun_path) ? (socklen_t)sizeof(*sa) : 0;
}

bool
takeover_possible(const struct cfg *c, struct nk_error *err)
{
	struct sockaddr_un sa;

	if (c->proc.unix_socket_dir == NULL || c->proc.unix_socket_dir[0] == '\0')
		return nk_error_set(err, ERRCODE_CONFIG_FILE_ERROR,
				    "cannot reboot if unix dir not configured");
	/* the new process could not put its own socket in place of an abstract one */
	if (c->proc.unix_socket_dir[0] == '@')
		return nk_error_set(err, ERRCODE_CONFIG_FILE_ERROR,
				    "cannot reboot with abstract Unix socket");
	if (getenv("LISTEN_FDS") != NULL && getenv("LISTEN_PID") != NULL &&
	    atol(getenv("LISTEN_PID")) == (long)getpid())
		return nk_error_set(err, ERRCODE_CONFIG_FILE_ERROR,
				    "cannot reboot under service manager");
	if (to_address(c, &sa) == 0)
		return nk_error_set(err, ERRCODE_CONFIG_FILE_ERROR,
				    "unix socket path in \"%s\" is too long",
				    c->proc.unix_socket_dir);
	return true;
}

bool
takeover_old_alive(const struct cfg *c)
{
	struct sockaddr_un sa;
	socklen_t len = to_address(c, &sa);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool live;

	if (fd == -1)
		return false;
	live = len > 0 && connect(fd, (struct sockaddr *)&sa, len) == 0;
	close(fd);
	return live;
}

/* A blocked SIGTERM, SIGINT or SIGQUIT is pending: die now (others are dropped). */
static void
to_check_signals(const sigset_t *sigs)
{
	struct timespec zero = { 0, 0 };
	int sig;

	while ((sig = sigtimedwait(sigs, NULL, &zero)) > 0) {
		if (sig == SIGTERM || sig == SIGINT || sig == SIGQUIT)
			fatal("got SIG%s: takeover was in progress, going down immediately",
			      sigabbrev_np(sig));
	}
}

/* Wait until <fd> is ready for <events>; fatal at the deadline (<what> says for what). */
static void
to_wait(int fd, short events, const char *what)
{
	for (;;) {
		struct pollfd p = { .fd = fd, .events = events };
		uint64_t now = nk_now_ms();
		int rc;

		to_check_signals(conn.sigs);
		if (now >= conn.deadline_ms)
			fatal("takeover: timed out waiting for %s", what);
		rc = poll(&p, 1, TO_SLICE_MS);
		if (rc > 0)
			return;
		if (rc == -1 && errno != EINTR)
			fatal("takeover: poll failed: %s", strerror(errno));
	}
}

/* Queue descriptor <fd> for the next row. */
static void
to_push_fd(int fd)
{
	if (conn.nfds == conn.fds_cap) {
		size_t nc = conn.fds_cap ? conn.fds_cap * 2 : 64;
		int *nf = realloc(conn.fds, nc * sizeof(*nf));

		if (nf == NULL)
			fatal("takeover: out of memory");
		conn.fds = nf;
		conn.fds_cap = nc;
	}
	conn.fds[conn.nfds++] = fd;
}

/* Read what the old process sent; false at the end of the stream. */
static bool
to_read_more(const char *what)
{
	int fds[FDPASS_MAX_FDS];
	size_t nfds = 0;
	ssize_t n;

	if (conn.cap - conn.len < 8192) {
		size_t nc = conn.cap ? conn.cap * 2 : 65536;
		uint8_t *nb = realloc(conn.buf, nc);

		if (nb == NULL)
			fatal("takeover: out of memory");
		conn.buf = nb;
		conn.cap = nc;
	}
	to_wait(conn.fd, POLLIN, what);
	n = fdpass_recv(conn.fd, conn.buf + conn.len, conn.cap - conn.len, fds, FDPASS_MAX_FDS,
			&nfds);
	if (n == -1 && (errno == EAGAIN || errno == EINTR))
		return true;
	if (n == -1)
		fatal("takeover: reading from the old process failed: %s", strerror(errno));
	for (size_t i = 0; i < nfds; i++)
		to_push_fd(fds[i]);
	conn.len += (size_t)n;
	return n > 0;
}

/* One whole message: its type, body and body length (valid until the next one). */
struct to_msg {
	char type;
	const uint8_t *body;
	size_t len;
};

static void
to_next_msg(struct to_msg *m, const char *what)
{
	uint32_t len = 0;

	if (conn.last > 0) {
		memmove(conn.buf, conn.buf + conn.last, conn.len - conn.last);
		conn.len -= conn.last;
		conn.last = 0;
	}
	for (;;) {
		if (conn.len >= 5) {
			len = (uint32_t)conn.buf[1] << 24 | (uint32_t)conn.buf[2] << 16 |
			      (uint32_t)conn.buf[3] << 8 | conn.buf[4];
			if (len < 4 || len > (64u << 20))
				fatal("takeover: the old process sent a bad message length");
			if (conn.len >= (size_t)len + 1)
				break;
		}
		if (!to_read_more(what))
			fatal("takeover: the old process closed the connection while %s", what);
	}
	m->type = (char)conn.buf[0];
	m->body = conn.buf + 5;
	m->len = len - 4;
	conn.last = (size_t)len + 1;
}

/* Write the whole of <pb> (then freed). */
static void
to_send(struct pktbuf *pb, const char *what)
{
	size_t off = 0;

	if (pktbuf_failed(pb))
		fatal("takeover: out of memory");
	while (off < pb->len) {
		ssize_t n;

		to_wait(conn.fd, POLLOUT, what);
		n = send(conn.fd, pb->buf + off, pb->len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n == -1 && errno != EAGAIN && errno != EINTR)
			fatal("takeover: sending %s failed: %s", what, strerror(errno));
		off += n > 0 ? (size_t)n : 0;
	}
	pktbuf_cleanup(pb);
}

static void
to_query(const char *sql)
{
	struct pktbuf pb;

	pktbuf_init(&pb, 32);
	pktbuf_write_query(&pb, sql);
	to_send(&pb, sql);
}

/* An ErrorResponse of the old process: log it, give up. */
static NK_NORETURN void
to_old_error(const struct to_msg *m, const char *when)
{
	struct proto_server_error e;
	struct nk_error err;

	if (proto_parse_server_error(m->body, m->len, &e, &err))
		proto_server_error_to_nk(&e, &err);
	fatal("takeover: the old process refused %s: %s", when, err.message);
}

/* Connect and log in as the local user pgbouncer; fatal unless it lets us in at once. */
static void
to_login(const struct cfg *c)
{
	struct proto_param params[] = { { "user", "pgbouncer" }, { "database", "pgbouncer" } };
	struct to_msg m;
	struct sockaddr_un sa;
	socklen_t salen = to_address(c, &sa);
	struct proto_auth_msg auth;
	struct nk_error err;
	struct pktbuf pb;

	conn.fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (conn.fd == -1 || connect(conn.fd, (struct sockaddr *)&sa, salen) == -1)
		fatal("takeover: could not connect to the old process on \"%s\": %s", sa.sun_path,
		      strerror(errno));
	pktbuf_init(&pb, 64);
	pktbuf_write_startup(&pb, params, NK_ARRAY_LEN(params));
	to_send(&pb, "the startup packet");
	for (;;) {
		to_next_msg(&m, "logging in");
		if (m.type == 'E')
			to_old_error(&m, "the login");
		if (m.type == 'R' &&
		    (!proto_parse_auth(m.body, m.len, &auth, &err) || auth.code != 0))
			fatal("takeover: login failed: the old process asks for a password; run "
			      "the new process as the user the old one runs as");
		if (m.type == 'Z')
			break;
	}
	log_info("S-%p: pgbouncer/pgbouncer@unix:%d login OK, sending SUSPEND", (void *)&conn,
		 c->proc.listen_port);
}

/* The RowDescription of SHOW FDS must be pgbouncer's 15 columns. */
static void
to_check_columns(const struct to_msg *m)
{
	struct proto_rowdesc_msg rd;
	struct proto_column cols[FDROW_NCOLS + 1];
	struct nk_error err;
	size_t n;

	if (!proto_parse_row_description(m->body, m->len, &rd, &err) ||
	    (n = proto_rowdesc_columns(&rd, cols, NK_ARRAY_LEN(cols))) != FDROW_NCOLS)
		fatal("takeover: the old process sent an unexpected SHOW FDS result");
	for (size_t i = 0; i < n; i++) {
		if (strcmp(cols[i].name, fdrow_column_name(i)) != 0)
			fatal("takeover: SHOW FDS column %zu is \"%s\", expected \"%s\"", i + 1,
			      cols[i].name, fdrow_column_name(i));
	}
}

/* Keep a client or server socket for the workers. */
static void
to_keep(const struct fdrow *r, int fd)
{
	if (n_socks == cap_socks) {
		size_t nc = cap_socks ? cap_socks * 2 : 64;
		struct takeover_sock *ns = realloc(socks, nc * sizeof(*ns));

		if (ns == NULL)
			fatal("takeover: out of memory");
		socks = ns;
		cap_socks = nc;
	}
	socks[n_socks++] = (struct takeover_sock){ .row = *r, .fd = fd, .worker = -1, .pair = -1 };
}

/* A DataRow of SHOW FDS and the descriptor that came with it. */
static void
to_take_row(const struct cfg *c, const struct to_msg *m)
{
	struct nk_error err;
	struct fdrow r;
	int fd;

	if (conn.fds_head == conn.nfds)
		fatal("takeover: got row without fd info");
	fd = conn.fds[conn.fds_head++];
	if (!fdrow_parse(m->body, m->len, &r, &err))
		fatal("takeover: invalid data from old process: %s", err.message);
	log_debug("FD row: fd=%d(%d) linkfd=%d task=%s user=%s db=%s enc=%s", r.fd, fd, r.link,
		  fdrow_task_str(r.task), r.user, r.db, r.client_encoding);
	if (r.task != FDROW_POOLER) {
		to_keep(&r, fd);
		return;
	}
	if (!listen_adopt(fd, c->neki.admin_listen_port, &err))
		fatal("takeover: %s", err.message);
}

/* SUSPEND, then SHOW FDS, up to the ReadyForQuery that ends it. */
static void
to_suspend_and_list(const struct cfg *c)
{
	struct to_msg m;
	const char *tag;
	struct nk_error err;
	bool listed = false;

	to_query("SUSPEND;");
	for (;;) {
		to_next_msg(&m, listed ? "SHOW FDS" : "SUSPEND");
		switch (m.type) {
		case 'C':
			if (!proto_parse_command_complete(m.body, m.len, &tag, &err))
				fatal("takeover: bad result pkt");
			if (strcmp(tag, "SUSPEND") == 0) {
				log_info("SUSPEND finished, sending SHOW FDS");
				to_query("SHOW FDS;");
			} else if (strncmp(tag, "SHOW", 4) == 0) {
				log_info("SHOW FDS finished");
				listed = true;
			} else {
				fatal("takeover: got bad CMD from old process: %s", tag);
			}
			break;
		case 'T':
			to_check_columns(&m);
			break;
		case 'D':
			to_take_row(c, &m);
			break;
		case 'Z':
			if (listed)
				return;
			break;
		case 'E':
			to_old_error(&m, listed ? "SHOW FDS" : "SUSPEND or SHOW FDS");
		case 'N':
		case 'S':
			break;
		default:
			fatal("takeover_parse_data: unexpected pkt: '%c'", m.type);
		}
	}
}

void
takeover_begin(const struct cfg *c, const sigset_t *sigs)
{
	double wait = c->cli.suspend_timeout > 0 ? c->cli.suspend_timeout * 1000.0 + TO_COMMAND_MS
					     : TO_COMMAND_MS;

	log_warn("Online restart is deprecated, use so_reuseport instead");
	daemon_raise_fd_limit();
	conn.sigs = sigs;
	conn.deadline_ms = nk_now_ms() + TO_LOGIN_MS;
	log_info("takeover_init: launching connection");
	to_login(c);
	conn.deadline_ms = nk_now_ms() + (uint64_t)wait;
	to_suspend_and_list(c);
	if (conn.fds_head != conn.nfds)
		fatal("takeover: %zu descriptors came without a row", conn.nfds - conn.fds_head);
	log_info("disko over, going background");
}

/* Wait until the old process's pidfile <path> is gone. */
static void
to_wait_pidfile(const char *path)
{
	struct stat st;

	log_info("waiting for old pidfile to go away");
	conn.deadline_ms = nk_now_ms() + TO_PIDFILE_MS;
	while (stat(path, &st) == 0 || errno != ENOENT) {
		struct timespec ts = { 0, TO_SLICE_MS * 1000 * 1000 };

		to_check_signals(conn.sigs);
		if (nk_now_ms() >= conn.deadline_ms)
			fatal("takeover: the old pidfile \"%s\" is still there after %d s", path,
			      TO_PIDFILE_MS / 1000);
		nanosleep(&ts, NULL);
	}
}

void
takeover_finish(const struct cfg *c, const sigset_t *sigs)
{
	conn.sigs = sigs;
	conn.deadline_ms = nk_now_ms() + TO_COMMAND_MS;
	log_info("sending SHUTDOWN;");
	to_query("SHUTDOWN;");
	conn.len = conn.last = 0;
	while (to_read_more("the old process to exit"))
		conn.len = 0;	/* whatever it says before it goes */
	for (size_t i = conn.fds_head; i < conn.nfds; i++)
		close(conn.fds[i]);
	close(conn.fd);
	conn.fd = -1;
	free(conn.buf);
	free(conn.fds);
	conn.buf = NULL;
	conn.fds = NULL;
	if (c->proc.pidfile != NULL && c->proc.pidfile[0] != '\0')
		to_wait_pidfile(c->proc.pidfile);
	log_info("old process killed, resuming work");
}

/* The server row whose fd is <fd> (a client's link), or -1. */
static int
to_find_server(int fd)
{
	for (size_t i = 0; i < n_socks; i++)
		if (socks[i].row.task == FDROW_SERVER && socks[i].row.fd == fd)
			return (int)i;
	return -1;
}

/* Pair every client that has a link with that link's row. */
static void
to_pair(void)
{
	for (size_t i = 0; i < n_socks; i++) {
		struct takeover_sock *t = &socks[i];
		int k;

		if (t->row.task != FDROW_CLIENT || t->row.link == 0)
			continue;
		if ((k = to_find_server(t->row.link)) < 0 || socks[k].pair >= 0)
			continue;	/* left alone below: closed */
		t->pair = k;
		socks[k].pair = (int)i;
	}
}

void
takeover_assign(const struct cfg *c, unsigned n_workers)
{
	unsigned next = 0;

	to_pair();
	for (size_t i = 0; i < n_socks; i++) {
		struct takeover_sock *t = &socks[i];

		if (t->row.task == FDROW_CLIENT && (t->row.link == 0 || t->pair >= 0)) {
			t->worker = session_cancel_key_worker(t->row.cancel, n_workers,
							      c->proc.peer_id > 0);
			if (t->worker < 0)
				t->worker = 0;
			if (t->pair >= 0)
				socks[t->pair].worker = t->worker;
		} else if (t->row.task == FDROW_SERVER && t->row.link == 0) {
			t->worker = (int)(next++ % n_workers);	/* idle links: in turn */
		}
	}
	for (size_t i = 0; i < n_socks; i++) {
		if (socks[i].worker < 0)
			log_warn("takeover: the %s socket %d (%s/%s) has no partner; closing it",
				 fdrow_task_str(socks[i].row.task), socks[i].row.fd,
				 socks[i].row.db, socks[i].row.user);
	}
}

size_t
takeover_count(void)
{
	return n_socks;
}

struct takeover_sock *
takeover_at(size_t i)
{
	NK_ASSERT(i < n_socks);
	return &socks[i];
}

void
takeover_keep_only(int slot)
{
	for (size_t i = 0; i < n_socks; i++) {
		if (socks[i].fd != -1 && (slot < 0 || socks[i].worker != slot)) {
			close(socks[i].fd);
			socks[i].fd = -1;
		}
	}
}

void
takeover_release(void)
{
	takeover_keep_only(-1);
	free(socks);
	socks = NULL;
	n_socks = cap_socks = 0;
}
