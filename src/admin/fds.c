/*
 * fds.c - SHOW FDS (admin_users only): every socket of every neki process, with pgbouncer's
 * 15 columns (neki/fdrow.h), and for the online restart (neki -R) the sockets themselves.
 *
 * The sockets live in the workers (clients, links, the main listeners) and here (the admin
 * port's listeners). The admin asks one worker at a time (SHM_CMD_FDS; the first is asked
 * for the listeners too); the worker sends its rows, one descriptor each, over the
 * descriptor channel (neki/fdchan.h), then FDCHAN_END. The rows carry the worker's fd
 * numbers: the admin renumbers them with the numbers the descriptors got here, so that fd
 * and link stay unique and paired across workers. Once every worker has answered, the
 * reply goes out: on a console session that may receive descriptors (the local user
 * pgbouncer on the Unix socket, as pgbouncer) each DataRow is sent with its descriptor
 * (SCM_RIGHTS) on the blocking socket, pgbouncer's way; elsewhere the rows only. A worker
 * that does not answer within FDS_WORKER_WAIT_MS makes the command fail: an online restart
 * must not go on with a part of the sockets. When the reply went out with descriptors while
 * every worker is suspended, shm records that the sockets are handed over (the master then
 * leaves the Unix socket file to the new process; SHUTDOWN closes what stayed behind).
 * Entry points: fds_start(), fds_on_message().
 */
#include "neki/base.h"

#include "admin_int.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <event2/event.h>

#include "neki/clock.h"
#include "neki/daemon.h"
#include "neki/fdchan.h"
#include "neki/log.h"
#include "neki/net.h"
#include "neki/proc.h"

#define FDS_WORKER_WAIT_MS 10000	/* one worker's whole answer */
#define FDS_POLL_MS 50
#define FDS_SEND_TIMEOUT_S 30		/* one blocking send to the console client */

/* One socket of the reply. */
struct fds_entry {
	struct fdrow row;		/* fd and link renumbered once its worker is done */
	int fd;				/* owned (received here), or the admin's own listener */
	bool own;			/* the admin's own socket: not closed at the end */
	unsigned slot;			/* the worker that sent it */
};

/* The SHOW FDS in progress (one at a time). */
struct fds_job {
	struct adm_req *req;		/* borrowed until finished */
	uint64_t reqno;			/* the request number the workers answer */
	unsigned next;			/* next slot to look at */
	int asking;			/* slot asked now, -1 when none */
	size_t first;			/* its first entry */
	bool listeners_asked;		/* a worker was asked for the main listeners */
	uint64_t deadline_ms;		/* for the worker asked now */
	struct event *timer;		/* owned */
	struct fds_entry *e;		/* owned */
	size_t n, cap;
	char failed[256];		/* why the command fails ("" = it does not) */
};

static struct fds_job *job;		/* owned: the running job, NULL when none */
static uint64_t last_reqno;

static struct fds_entry *
fds_add(struct fds_job *j)
{
	if (j->n == j->cap) {
		size_t nc = j->cap ? j->cap * 2 : 64;
		struct fds_entry *ne = realloc(j->e, nc * sizeof(*ne));

		if (ne == NULL)
			return NULL;
		j->e = ne;
		j->cap = nc;
	}
	memset(&j->e[j->n], 0, sizeof(j->e[0]));
	return &j->e[j->n++];
}

static void
fds_job_free(struct fds_job *j)
{
	for (size_t i = 0; i < j->n; i++)
		if (!j->e[i].own)
			close(j->e[i].fd);
	if (j->timer != NULL)
		event_free(j->timer);
	free(j->e);
	free(j);
}

/* The admin's own listening sockets (the admin port) as "pooler" rows. */
static bool
fds_own_listeners(struct fds_job *j)
{
	for (size_t i = 0; i < listen_count(); i++) {
		const struct listener *l = listen_at(i);
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);
		struct fds_entry *e;

		if (l->fd == -1 || l->kind != LISTEN_ADMIN)
			continue;
		if ((e = fds_add(j)) == NULL)
			return false;
		e->fd = e->row.fd = l->fd;
		e->own = true;
		e->row.task = FDROW_POOLER;
		snprintf(e->row.addr, sizeof(e->row.addr), "unix");
		if (getsockname(l->fd, (struct sockaddr *)&ss, &len) == 0)
			adm_sockaddr_text(&ss, e->row.addr, sizeof(e->row.addr), &e->row.port);
	}
	return true;
}

/* Renumber the rows of the worker just done: fd and link become the admin's numbers. */
static void
fds_renumber(struct fds_job *j)
{
	for (size_t i = j->first; i < j->n; i++) {
		struct fds_entry *e = &j->e[i];
		int link = 0;

		for (size_t k = j->first; k < j->n && e->row.link != 0; k++) {
			if (j->e[k].row.fd == e->row.link && k != i) {
				link = j->e[k].fd;
				break;
			}
		}
		e->row.link = link;
	}
	for (size_t i = j->first; i < j->n; i++)
		j->e[i].row.fd = j->e[i].fd;
}

static void fds_next(struct fds_job *j);

/* Ask the next live worker for its sockets; finish when none is left. */
static bool
fds_ask(struct fds_job *j, unsigned slot)
{
	struct shm_msg m = { .cmd = SHM_CMD_FDS, .key_len = sizeof(j->reqno) };
	struct shm_proc *p = shm_proc(slot);

	if (atomic_load(&p->kind) != SHM_PROC_WORKER || atomic_load(&p->pid) == 0)
		return false;
	memcpy(m.key, &j->reqno, sizeof(j->reqno));
	if (!j->listeners_asked)
		m.name[0] = 'L';
	if (shm_mbox_post(slot, &m) == 0) {
		snprintf(j->failed, sizeof(j->failed), "the mailbox of worker %u is full", slot);
		return false;
	}
	j->listeners_asked = true;
	j->asking = (int)slot;
	j->first = j->n;
	j->deadline_ms = nk_now_ms() + FDS_WORKER_WAIT_MS;
	return true;
}

static void fds_finish(struct fds_job *j);

static void
fds_next(struct fds_job *j)
{
	struct timeval tv = { 0, FDS_POLL_MS * 1000 };

	j->asking = -1;
	while (j->failed[0] == '\0' && j->next < shm_n_procs()) {
		if (fds_ask(j, j->next++)) {
			event_add(j->timer, &tv);
			return;
		}
	}
	fds_finish(j);
}

static void
fds_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct fds_job *j = arg;
	struct timeval tv = { 0, FDS_POLL_MS * 1000 };

	if (j->asking < 0)
		return;
	if (atomic_load(&shm_proc((unsigned)j->asking)->pid) == 0) {
		snprintf(j->failed, sizeof(j->failed), "worker %d exited", j->asking);
	} else if (nk_now_ms() >= j->deadline_ms) {
		snprintf(j->failed, sizeof(j->failed), "worker %d did not answer within %d s",
			 j->asking, FDS_WORKER_WAIT_MS / 1000);
	} else {
		event_add(j->timer, &tv);
		return;
	}
	fds_next(j);
}

/* One ROWS message of the worker asked: keep each row with the descriptor that came. */
static void
fds_take_rows(struct fds_job *j, const struct fdchan_hdr *h, const int *fds, size_t nfds)
{
	const struct fdrow *rows = (const struct fdrow *)(h + 1);

	for (size_t i = 0; i < nfds; i++) {
		struct fds_entry *e = fds_add(j);

		if (e == NULL) {
			snprintf(j->failed, sizeof(j->failed), "out of memory");
			for (size_t k = i; k < nfds; k++)
				close(fds[k]);
			return;
		}
		e->row = rows[i];
		e->fd = fds[i];
		e->slot = h->slot;
	}
}

void
fds_on_message(const struct fdchan_hdr *h, const int *fds, size_t nfds)
{
	struct fds_job *j = job;

	if (j == NULL || j->asking < 0 || h->req != j->reqno || h->slot != (unsigned)j->asking) {
		log_debug("SHOW FDS: a late answer of worker %u dropped", (unsigned)h->slot);
		for (size_t i = 0; i < nfds; i++)
			close(fds[i]);
		return;
	}
	if (h->kind == FDCHAN_ROWS) {
		fds_take_rows(j, h, fds, nfds);
		return;
	}
	if (h->flags & FDCHAN_END_INCOMPLETE)
		snprintf(j->failed, sizeof(j->failed), "worker %u could not send all its sockets",
			 (unsigned)h->slot);
	else if (h->n != j->n - j->first)
		snprintf(j->failed, sizeof(j->failed), "worker %u sent %u sockets, %zu arrived",
			 (unsigned)h->slot, h->n, j->n - j->first);
	fds_renumber(j);
	event_del(j->timer);
	fds_next(j);
}

/* The RowDescription of SHOW FDS into <r>. */
static void
fds_columns(struct adm_result *r)
{
	struct adm_col cols[FDROW_NCOLS];

	for (size_t i = 0; i < FDROW_NCOLS; i++)
		cols[i] = (struct adm_col){ fdrow_column_name(i),
					    (enum adm_type)fdrow_column_type(i) };
	adm_result_columns(r, cols, FDROW_NCOLS);
}

/* The rows only, in the reply (a console session that gets no descriptors). */
static void
fds_reply_rows(struct fds_job *j)
{
	for (size_t i = 0; i < j->n; i++) {
		fdrow_write(&j->req->res.pb, &j->e[i].row);
		j->req->res.nrows++;
	}
}

/* Send <pb> on the blocking socket <fd> with descriptor <pass> (-1: none). */
static bool
fds_send_one(int fd, struct pktbuf *pb, int pass)
{
	bool ok = !pktbuf_failed(pb) && fdpass_send(fd, pb->buf, pb->len, &pass, pass >= 0);

	pktbuf_reset(pb);
	return ok;
}

/*
 * RowDescription and each DataRow with its descriptor, written straight to socket <fd>
 * (blocking while it is written, as pgbouncer does for this result set).
 */
static bool
fds_reply_passing(struct fds_job *j, int fd)
{
	struct timeval tmo = { FDS_SEND_TIMEOUT_S, 0 };
	struct adm_result r;
	int fl = fcntl(fd, F_GETFL);
	bool ok;

	if (fl == -1 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) == -1)
		return false;
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tmo, sizeof(tmo));
	adm_result_init(&r);
	fds_columns(&r);
	ok = fds_send_one(fd, &r.pb, -1);
	for (size_t i = 0; ok && i < j->n; i++) {
		fdrow_write(&r.pb, &j->e[i].row);
		ok = fds_send_one(fd, &r.pb, j->e[i].fd);
	}
	adm_result_cleanup(&r);
	tmo.tv_sec = 0;
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tmo, sizeof(tmo));
	if (fcntl(fd, F_SETFL, fl) == -1)
		ok = false;
	if (!ok)
		log_error("SHOW FDS: could not send the sockets to the console client: %s",
			  strerror(errno));
	return ok;
}

/* True when every live worker is suspended. */
static bool
fds_all_suspended(void)
{
	bool any = false;

	for (unsigned i = 0; i < shm_n_procs(); i++) {
		struct shm_proc *p = shm_proc(i);

		if (atomic_load(&p->kind) != SHM_PROC_WORKER || atomic_load(&p->pid) == 0)
			continue;
		any = true;
		if (atomic_load(&p->state) != SHM_PST_SUSPENDED)
			return false;
	}
	return any;
}

/* Every worker answered (or one failed): reply, then free the job. */
static void
fds_finish(struct fds_job *j)
{
	struct adm_req *req = j->req;
	struct nk_error err;
	int fd = req->conn != NULL ? console_pass_fd_socket(req->conn) : -1;

	job = NULL;
	if (j->failed[0] != '\0') {
		log_warn("SHOW FDS failed: %s", j->failed);
		nk_error_set(&err, ERRCODE_SYSTEM_ERROR,
			     "SHOW FDS could not gather every process's sockets");
		nk_error_detail(&err, "%c%s.", toupper((unsigned char)j->failed[0]), j->failed + 1);
		adm_result_error(&req->res, &err);
	} else if (fd >= 0) {
		if (fds_reply_passing(j, fd)) {
			adm_result_complete(&req->res, "SHOW", false);
			if (fds_all_suspended()) {
				shm_handover_set(true);
				log_info("SHOW FDS sent %zu sockets: they are handed over", j->n);
			}
		}
	} else {
		fds_columns(&req->res);
		fds_reply_rows(j);
		adm_result_complete(&req->res, "SHOW", false);
	}
	adm_req_finish(req);
	fds_job_free(j);
}

void
fds_start(struct adm_req *req)
{
	struct fds_job *j;
	struct nk_error err;

	if (job != NULL) {
		nk_error_set(&err, ERRCODE_OBJECT_IN_USE, "another SHOW FDS is in progress");
		adm_req_fail(req, &err);
		return;
	}
	j = calloc(1, sizeof(*j));
	if (j == NULL || (j->timer = evtimer_new(child_base(), fds_timer_cb, j)) == NULL ||
	    !fds_own_listeners(j)) {
		if (j != NULL)
			fds_job_free(j);
		nk_error_oom(&err);
		adm_req_fail(req, &err);
		return;
	}
	j->req = req;
	j->reqno = ++last_reqno;
	j->asking = -1;
	job = j;
	daemon_raise_fd_limit();	/* every worker's sockets are held here for a moment */
	fds_next(j);
}
