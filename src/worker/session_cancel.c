/*
 * session_cancel.c - BackendKeyData and cancel requests across workers.
 *
 * Each client gets its own key: pid = (worker slot + 1) << 20 | a per-worker counter, and a
 * random 32-bit secret. A CancelRequest may land on any worker (they share the listening
 * socket); the pid tells which worker owns the session. Another worker's cancel is posted
 * to its shm mailbox (SHM_CMD_CANCEL, woken by its eventfd); the owner checks the secret and,
 * if the session has a query running on a link, opens a connection to that server and sends
 * a CancelRequest with the backend's own pid and key. An idle session or an unknown key:
 * nothing happens, as in Postgres. Entry points: sess_cancel_key_init(),
 * sess_cancel_request(), session_cancel_forwarded(), sess_cancel_backend().
 */
#include "neki/base.h"

#include "neki/session.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "neki/log.h"
#include "neki/pktbuf.h"
#include "neki/scram.h"
#include "neki/worker.h"
#include "session_int.h"

#define CANCEL_SLOT_SHIFT 20
#define CANCEL_SEQ_MASK ((UINT32_C(1) << CANCEL_SLOT_SHIFT) - 1)
#define CANCEL_CONNECT_TIMEOUT 5	/* seconds to reach the server */

static uint32_t cancel_seq;		/* per-worker key counter */

void
sess_cancel_key_init(struct session *s)
{
	int self = shm_self();
	uint32_t slot = self >= 0 ? (uint32_t)self : 0;
	uint8_t rnd[4];

	cancel_seq = (cancel_seq + 1) & CANCEL_SEQ_MASK;
	if (cancel_seq == 0)
		cancel_seq = 1;
	s->key_pid = ((slot + 1) << CANCEL_SLOT_SHIFT) | cancel_seq;
	if (!scram_random_bytes(rnd, sizeof(rnd)))
		memset(rnd, 0x5a, sizeof(rnd));	/* cancel keys are not a secret worth dying for */
	memcpy(&s->key_secret, rnd, sizeof(rnd));
}

/* ---- sending the cancel to the server ---- */

struct cancel_conn {
	int fd;
	uint8_t pkt[16];		/* the CancelRequest */
};

/* The socket became writable (connected) or timed out: send, close, free. */
static void
cancel_conn_cb(evutil_socket_t fd, short what, void *arg)
{
	struct cancel_conn *cc = arg;

	if (what & EV_WRITE) {
		if (write(cc->fd, cc->pkt, sizeof(cc->pkt)) != (ssize_t)sizeof(cc->pkt))
			log_debug("cancel request could not be sent: %s", strerror(errno));
	} else {
		log_debug("cancel request: connect timeout");
	}
	close(cc->fd);
	free(cc);
}

/* Connect to <sa> and send a CancelRequest for backend <pid>/<key>, without blocking. */
static void
cancel_send(const struct sockaddr *sa, socklen_t len, uint32_t pid, uint32_t key)
{
	struct cancel_conn *cc = calloc(1, sizeof(*cc));
	struct timeval tv = { CANCEL_CONNECT_TIMEOUT, 0 };
	struct pktbuf pb;

	if (cc == NULL)
		return;
	pktbuf_init_fixed(&pb, cc->pkt, sizeof(cc->pkt));
	pktbuf_write_cancel_request(&pb, pid, key);
	cc->fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (pktbuf_failed(&pb) || cc->fd == -1)
		goto fail;
	if (connect(cc->fd, sa, len) == -1 && errno != EINPROGRESS)
		goto fail;
	if (event_base_once(child_base(), cc->fd, EV_WRITE, cancel_conn_cb, cc, &tv) == -1)
		goto fail;
	return;
fail:
	log_debug("cancel request could not be started: %s", strerror(errno));
	if (cc->fd != -1)
		close(cc->fd);
	free(cc);
}

void
sess_cancel_backend(struct session *s)
{
	const struct sockaddr *sa;
	socklen_t len;

	if (s->link == NULL)
		return;
	sa = link_server_addr(s->link, &len);
	sess_log(s, LOG_LVL_DEBUG, "sending cancel request to server");
	cancel_send(sa, len, link_backend_pid(s->link), link_backend_key(s->link));
}

/* ---- routing the request ---- */

/* A cancel for a session of this worker. */
static void
cancel_local(uint32_t pid, uint32_t key)
{
	struct session *s = sess_find_by_key(pid);

	if (s == NULL || s->key_secret != key) {
		log_debug("cancel request for an unknown key");
		return;
	}
	if (s->link == NULL || s->query_start_us == 0)
		return;	/* nothing running: nothing to cancel */
	sess_cancel_backend(s);
}

static void
cancel_key_bytes(uint8_t out[8], uint32_t pid, uint32_t key)
{
	for (int i = 0; i < 4; i++) {
		out[i] = (uint8_t)(pid >> (24 - 8 * i));
		out[4 + i] = (uint8_t)(key >> (24 - 8 * i));
	}
}

void
sess_cancel_request(uint32_t pid, uint32_t key)
{
	uint32_t slot = pid >> CANCEL_SLOT_SHIFT;
	struct shm_msg m;
	int self = shm_self();

	if (slot == 0 || slot > shm_n_procs())
		return;
	slot--;
	if (self < 0 || slot == (uint32_t)self) {
		cancel_local(pid, key);
		return;
	}
	if (atomic_load(&shm_proc(slot)->kind) != SHM_PROC_WORKER)
		return;
	memset(&m, 0, sizeof(m));
	m.cmd = SHM_CMD_CANCEL;
	m.key_len = 8;
	cancel_key_bytes(m.key, pid, key);
	if (shm_mbox_post(slot, &m) == 0)
		log_warn("cancel request dropped: worker %u mailbox is full", slot);
}

void
session_cancel_forwarded(const uint8_t *k, size_t len)
{
	uint32_t pid, key;

	if (len != 8)
		return;
	pid = (uint32_t)k[0] << 24 | (uint32_t)k[1] << 16 | (uint32_t)k[2] << 8 | k[3];
	key = (uint32_t)k[4] << 24 | (uint32_t)k[5] << 16 | (uint32_t)k[6] << 8 | k[7];
	cancel_local(pid, key);
}
