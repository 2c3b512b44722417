/*
 * linkmove.c - idle server links handed between workers (pool_limits_ops.move_idle).
 *
 * A pool's limits are global, so its one free link can be idle in worker A while a client of
 * worker B waits for it (src/pool/pool_wait.c). A sends B the link itself: the socket over
 * B's link channel (an AF_UNIX datagram pair made by the master, neki/shm.h link_rx /
 * link_tx) with SCM_RIGHTS, and in the same datagram what B needs to serve it as if it had
 * logged it in: the link's state (link_export), the session layer's (the search_path set on
 * it, the statements prepared on it by key) and the pool it belongs to. The server session
 * goes on untouched: no new login, the same backend for server_check_query, prepared
 * statements and a server whose password changed meanwhile.
 *
 * The link's slot of the global limits moves first (shm_counter_share_move), so a process
 * that dies is reclaimed exactly: a datagram still queued for a dead worker names its pid;
 * the worker restarted in that slot closes such a socket without giving back its slot (the
 * master gave back the dead one's already). A TLS link stays (its session keys cannot leave
 * the process; this build has no kernel TLS): it is closed for the client elsewhere, as
 * before. Entry points: linkmove_send(), linkmove_start().
 */
#include "neki/base.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "neki/fdpass.h"
#include "neki/log.h"
#include "neki/pktbuf.h"
#include "neki/proto.h"
#include "neki/session.h"
#include "neki/shm.h"
#include "neki/shm_wait.h"
#include "neki/proc.h"
#include "session_int.h"

#define LM_VERSION 1		/* layout of the datagram */
#define LM_MSG_MAX 65536	/* bytes of one datagram, at most */
#define LM_BATCH 32		/* datagrams taken per wake-up */

static struct event *lm_ev;	/* owned: the link channel's read event */

/* Terminate on a socket that no pool takes (the server ends the session cleanly). */
static void
linkmove_drop(int fd)
{
	static const uint8_t terminate[5] = { 'X', 0, 0, 0, 4 };

	(void)send(fd, terminate, sizeof(terminate), MSG_NOSIGNAL | MSG_DONTWAIT);
	close(fd);
}

/* The datagram for <l> of pool <sp> going to slot <to>; false when it cannot be built. */
static bool
linkmove_build(struct pktbuf *pb, const struct spool *sp, struct link *l, unsigned to)
{
	struct link_ext *ext = link_user_data(l);

	pktbuf_put_int32(pb, LM_VERSION);
	pktbuf_put_int32(pb, (int32_t)atomic_load(&shm_proc(to)->pid));
	spool_put_ids(sp, pb);
	link_export(l, pb);
	pktbuf_put_string(pb, ext != NULL && ext->search_path != NULL ? ext->search_path : "");
	pktbuf_put_byte(pb, ext != NULL && ext->search_path != NULL);
	if (ext != NULL) {
		prep_link_export(&ext->prep, pb);
	} else {
		pktbuf_put_int16(pb, 0);
	}
	return !pktbuf_failed(pb) && pb->len <= LM_MSG_MAX;
}

/* linkmove_send: see session_int.h. */
bool
linkmove_send(const struct spool *sp, struct link *l)
{
	int to = shm_wait_oldest_other_proc(spool_pool_id(sp));
	struct pktbuf pb;
	int fd = sbuf_fd(link_sbuf(l));
	bool ok;

	if (to < 0 || shm_self() < 0)
		return false;
	pktbuf_init(&pb, 512);
	ok = linkmove_build(&pb, sp, l, (unsigned)to);
	if (ok) {
		spool_move_slot(sp, shm_self(), to);
		ok = fdpass_send(shm_proc((unsigned)to)->link_tx, pb.buf, pb.len, &fd, 1);
		if (!ok) {
			log_debug("could not hand a link to process %d: %s", to, strerror(errno));
			spool_move_slot(sp, to, shm_self());
		}
	}
	pktbuf_cleanup(&pb);
	return ok;
}

/* Take one datagram's link (socket <fd>) into its pool; <fd> is closed when none takes it. */
static void
linkmove_take(const uint8_t *msg, size_t len, int fd)
{
	struct proto_reader r;
	struct spool_ids ids;
	struct spool *sp;
	struct link *l;

	proto_reader_init(&r, 0, msg, len);
	if (proto_get_int32(&r) != LM_VERSION ||
	    (pid_t)proto_get_int32(&r) != getpid()) {	/* for a previous life of the slot */
		close(fd);
		return;
	}
	if (!spool_get_ids(&r, &ids)) {
		log_warn("a link from another worker was malformed: dropped");
		close(fd);
		return;
	}
	sp = spool_find_ids(&ids);
	l = sp != NULL ? pool_adopt_link(spool_pool(sp), fd, &r) : NULL;
	if (l == NULL) {
		log_debug("a link from another worker has no pool here (%s/%s): closed", ids.db,
			  ids.user);
		spool_release_ids(&ids);
		linkmove_drop(fd);
		return;
	}
	if (!spool_link_ext_import(l, &r))
		link_set_close_needed(l);	/* its session data is unknown: do not reuse */
}

/* The link channel is readable: take what waits (a bounded batch per wake-up). */
static void
linkmove_read_cb(evutil_socket_t rx, short what, void *arg)
{
	static uint8_t buf[LM_MSG_MAX];
	int fds[FDPASS_MAX_FDS];

	(void)what;
	(void)arg;
	for (int i = 0; i < LM_BATCH; i++) {
		size_t nfds;
		ssize_t n = fdpass_recv(rx, buf, sizeof(buf), fds, NK_ARRAY_LEN(fds), &nfds);

		if (n == -1 && errno == EAGAIN)
			return;
		if (n <= 0)
			continue;	/* (EMSGSIZE: refused whole, its sockets closed) */
		if (nfds != 1) {
			for (size_t k = 0; k < nfds; k++)
				close(fds[k]);
			continue;
		}
		linkmove_take(buf, (size_t)n, fds[0]);
	}
}

/* linkmove_start: see session_int.h. */
bool
linkmove_start(struct event_base *base)
{
	int self = shm_self();

	if (self < 0 || lm_ev != NULL)
		return true;
	lm_ev = event_new(base, shm_proc((unsigned)self)->link_rx, EV_READ | EV_PERSIST,
			  linkmove_read_cb, NULL);
	return lm_ev != NULL && event_add(lm_ev, NULL) == 0;
}

/* session_worker_start: see neki/session.h. */
void
session_worker_start(void)
{
	if (!linkmove_start(child_base()))
		log_warn("could not watch the link channel: links stay in the worker that opened them");
}
