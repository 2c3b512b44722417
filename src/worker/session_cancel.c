/*
 * session_cancel.c - BackendKeyData and cancel requests across workers and peers.
 *
 * Each client gets its own key (the pid and secret of its BackendKeyData). Without peering
 * the pid is (worker slot + 1) << 20 | a per-worker counter. With peer_id > 0 it has
 * pgbouncer's peering layout, so that neki and pgbouncer processes can forward each other's
 * cancels: bytes 1-2 of the 8-byte key carry peer_id (little-endian), the low 2 bits of
 * byte 7 a forwarding TTL (3), byte 0 has its sign bit clear; neki keeps the worker slot + 1
 * in the low 7 bits of byte 0 and the low 4 bits of byte 3. The secret is random.
 *
 * A CancelRequest may land on any worker (they share the listening socket), or, with
 * so_reuseport, on another neki or pgbouncer. A foreign peer_id: the request goes on to that
 * [peers] entry with the TTL decreased: at most pool_size at once per peer, the others queued
 * in arrival order until one in flight ends (the peer closes the connection after reading
 * the request, or 5 s pass); sess_cancel_peer_rows() gives SHOW PEER_POOLS. Ours: the slot
 * tells which worker owns the session; another worker's cancel is posted to its shm mailbox
 * (SHM_CMD_CANCEL, woken by its eventfd). A slot beyond the workers (a key handed out by a
 * process with more workers, before an online restart) names the worker its number modulo
 * the number of workers, where the restart put that client (session_cancel_key_worker).
 * The owner matches pid and secret and, if the
 * session has a query running on a link, opens a connection to that server and sends a
 * CancelRequest with the backend's own pid and key. An idle session or an unknown key:
 * nothing happens, as in Postgres. A routed session (sharded database) cancels every shard
 * part in flight, each with its own link's key (route_cancel()). cancel_wait_timeout bounds
 * how long a cancel may wait to be sent (connecting to the server or peer, queued for a
 * peer's free slot), as pgbouncer's; 0 = no bound. Once sent, a cancel to a server stays
 * open until the server closes it (or CANCEL_CLOSE_TIMEOUT); meanwhile its link is marked
 * (link_cancel_start()) so that pool_release() keeps the link out of the pool, and a late
 * cancel cannot stop the next client's query (pgbouncer's being_canceled).
 * Entry points: sess_cancel_key_init(), sess_cancel_request(), session_cancel_forwarded(),
 * sess_cancel_backend().
 */
#include "neki/base.h"

#include "neki/session.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/event.h>

#include "neki/dns.h"
#include "neki/log.h"
#include "neki/pktbuf.h"
#include "neki/scram.h"
#include "neki/proc.h"
#include "neki/exec.h"
#include "session_int.h"

#define CANCEL_SLOT_SHIFT 20
#define CANCEL_SEQ_MASK ((UINT32_C(1) << CANCEL_SLOT_SHIFT) - 1)
#define CANCEL_TTL_MASK 0x03u		/* pgbouncer's CANCELLATION_TTL_MASK (byte 7) */
#define CANCEL_CLOSE_TIMEOUT 5		/* seconds a sent cancel waits for the other end to close */
#define CANCEL_PEERS_TRACKED 32		/* peers whose in-flight forwards are counted */

static uint32_t cancel_seq;		/* per-worker key counter */

/* The peer id in a key of the peering layout (bytes 1-2, little-endian). */
static int
cancel_key_peer(uint32_t pid)
{
	return (int)(((pid >> 16) & 0xFF) | ((pid >> 8) & 0xFF) << 8);
}

/* The worker slot + 1 a key names (0 = none). */
static uint32_t
cancel_key_slot1(uint32_t pid, bool peering)
{
	if (!peering)
		return pid >> CANCEL_SLOT_SHIFT;
	return ((pid >> 24) & 0x7F) | (pid & 0x0F) << 7;
}

int
session_cancel_key_worker(uint64_t key, unsigned n_workers, bool peering)
{
	uint32_t slot1 = cancel_key_slot1((uint32_t)(key >> 32), peering);

	if (slot1 == 0 || n_workers == 0)
		return -1;
	return (int)((slot1 - 1) % n_workers);
}

void
sess_cancel_key_init(struct session *s)
{
	int self = shm_self();
	uint32_t slot1 = (self >= 0 ? (uint32_t)self : 0) + 1;	/* < 2^11 (SHM_MAX_PROCS) */
	uint32_t peer = (uint32_t)s->cfg->proc.peer_id;
	uint8_t rnd[4];

	cancel_seq = (cancel_seq + 1) & CANCEL_SEQ_MASK;
	if (cancel_seq == 0)
		cancel_seq = 1;
	if (!scram_random_bytes(rnd, sizeof(rnd)))
		memset(rnd, 0x5a, sizeof(rnd));	/* cancel keys are not a secret worth dying for */
	memcpy(&s->key_secret, rnd, sizeof(rnd));
	if (s->cfg->proc.peer_id <= 0) {
		s->key_pid = slot1 << CANCEL_SLOT_SHIFT | cancel_seq;
		return;
	}
	s->key_pid = (slot1 & 0x7F) << 24 | (peer & 0xFF) << 16 | ((peer >> 8) & 0xFF) << 8 |
		     (cancel_seq & 0x0F) << 4 | (slot1 >> 7);
	s->key_secret |= CANCEL_TTL_MASK;
}

/* ---- sending the cancel to the server ---- */

struct cancel_conn {
	int fd;
	int peer;			/* forwarded to this [peers] id; 0 = to a server */
	bool sent;			/* written: waiting for the other end to close */
	struct link *link;		/* borrowed: the link whose backend it cancels, or NULL */
	uint8_t pkt[16];		/* the CancelRequest */
};

/* A forward waiting for a free slot of its peer (pool_size in flight at most). */
struct cancel_wait {
	struct cancel_wait *next;
	uint32_t pid, key;
	uint64_t since_us;		/* monotonic: when it was queued (cancel_wait_timeout) */
};

/* Forwards per peer: in flight (connecting or sent) and queued. */
static struct cancel_peer {
	int peer;
	int connecting, sent;		/* sv_login / sv_active_cancel */
	int waiting;			/* queue length: cl_waiting_cancel_req */
	struct cancel_wait *head, *tail;	/* owned FIFO */
} peer_load[CANCEL_PEERS_TRACKED];

/* The state of <peer> (NULL when the table is full: not limited, not shown). */
static struct cancel_peer *
cancel_peer_state(int peer)
{
	for (size_t i = 0; i < CANCEL_PEERS_TRACKED; i++) {
		if (peer_load[i].peer == peer || peer_load[i].peer == 0) {
			peer_load[i].peer = peer;
			return &peer_load[i];
		}
	}
	return NULL;
}

static void cancel_peer_next(int peer);

static void
cancel_conn_free(struct cancel_conn *cc)
{
	struct cancel_peer *cp = cc->peer > 0 ? cancel_peer_state(cc->peer) : NULL;
	struct link *l;

	if (cp != NULL) {
		if (cc->sent && cp->sent > 0)
			cp->sent--;
		else if (!cc->sent && cp->connecting > 0)
			cp->connecting--;
	}
	if (cc->fd != -1)
		close(cc->fd);
	if (cc->peer > 0)
		cancel_peer_next(cc->peer);
	l = cc->link;
	free(cc);
	if (l != NULL)
		link_cancel_done(l);	/* may release a parked link */
}

/* The link closed before its cancel connection finished. */
static void
cancel_conn_detach(void *arg)
{
	struct cancel_conn *cc = arg;

	cc->link = NULL;
}

/* The other end closed (or went quiet): the forward is over. */
static void
cancel_conn_done_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	cancel_conn_free(arg);
}

/* cancel_wait_timeout as a timeval for event_base_once(); NULL when 0 (no bound). */
static const struct timeval *
cancel_wait_tv(struct timeval *tv)
{
	double secs = cfg_current()->cli.cancel_wait_timeout;

	if (secs <= 0)
		return NULL;
	tv->tv_sec = (time_t)secs;
	tv->tv_usec = (suseconds_t)((secs - (double)tv->tv_sec) * 1e6);
	return tv;
}

/* The socket became writable (connected) or timed out: send, then wait for the close. */
static void
cancel_conn_cb(evutil_socket_t fd, short what, void *arg)
{
	struct cancel_conn *cc = arg;
	struct cancel_peer *cp = cc->peer > 0 ? cancel_peer_state(cc->peer) : NULL;
	struct timeval tv = { CANCEL_CLOSE_TIMEOUT, 0 };

	(void)fd;
	if (!(what & EV_WRITE)) {
		if (cc->peer > 0)
			log_info("cancel request to peer %d dropped: cancel_wait_timeout",
				 cc->peer);
		else
			log_info("cancel request dropped: cancel_wait_timeout");
	} else if (write(cc->fd, cc->pkt, sizeof(cc->pkt)) != (ssize_t)sizeof(cc->pkt)) {
		log_debug("cancel request could not be sent: %s", strerror(errno));
	} else if (cc->peer > 0 || cc->link != NULL) {	/* in flight until the other end closes */
		cc->sent = true;
		if (cp != NULL) {
			cp->connecting--;
			cp->sent++;
		}
		if (event_base_once(child_base(), cc->fd, EV_READ, cancel_conn_done_cb, cc,
				    &tv) == 0)
			return;
	}
	cancel_conn_free(cc);
}

/*
 * Connect to <sa> and send a CancelRequest for <pid>/<key>, without blocking: to the backend
 * of link <l>, which stays marked until the server closes the connection after acting on the
 * request, or (<peer> > 0, <l> NULL) to that neki / pgbouncer peer, counted in flight until
 * the peer closes the connection after reading the request.
 */
static void
cancel_send(const struct sockaddr *sa, socklen_t len, uint32_t pid, uint32_t key, int peer,
	    struct link *l)
{
	struct cancel_conn *cc = calloc(1, sizeof(*cc));
	struct timeval tv;
	struct cancel_peer *cp = peer > 0 ? cancel_peer_state(peer) : NULL;
	struct pktbuf pb;

	if (cc == NULL) {
		if (peer > 0)
			cancel_peer_next(peer);
		return;
	}
	cc->fd = -1;
	cc->peer = peer;
	if (cp != NULL)
		cp->connecting++;
	pktbuf_init_fixed(&pb, cc->pkt, sizeof(cc->pkt));
	pktbuf_write_cancel_request(&pb, pid, key);
	cc->fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (pktbuf_failed(&pb) || cc->fd == -1)
		goto fail;
	if (connect(cc->fd, sa, len) == -1 && errno != EINPROGRESS)
		goto fail;
	if (event_base_once(child_base(), cc->fd, EV_WRITE, cancel_conn_cb, cc,
			    cancel_wait_tv(&tv)) == -1)
		goto fail;
	if (l != NULL) {
		cc->link = l;
		link_cancel_start(l, cc, cancel_conn_detach);
	}
	return;
fail:
	log_debug("cancel request could not be started: %s", strerror(errno));
	cancel_conn_free(cc);
}

void
sess_cancel_link(struct link *l)
{
	const struct sockaddr *sa;
	socklen_t len;

	if (link_cancel_pending(l))
		return;	/* the one in flight already stops the running query */
	sa = link_server_addr(l, &len);
	cancel_send(sa, len, link_backend_pid(l), link_backend_key(l), 0, l);
}

void
sess_cancel_backend(struct session *s)
{
	if (s->link == NULL)
		return;
	sess_log(s, LOG_LVL_DEBUG, "sending cancel request to server");
	sess_cancel_link(s->link);
}

/* ---- routing the request ---- */

/* A cancel for a session of this worker. */
static void
cancel_local(uint32_t pid, uint32_t key)
{
	struct session *s = sess_find_by_key(pid, key);

	if (s == NULL) {
		log_debug("cancel request for an unknown key");
		return;
	}
	if (s->route != NULL) {
		route_cancel(s->route);	/* every shard part in flight */
		return;
	}
	/* (adopted by an online restart, before its fence: what the client sent may run) */
	if (s->link == NULL || (s->tm.query_start_us == 0 && !s->adm.fence))
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

/* ---- forwarding to a peer ---- */

#define CANCEL_QUEUE_MAX 1024		/* forwards queued per peer before new ones are dropped */

/* A host-name peer being resolved. */
struct cancel_fwd {
	uint32_t pid, key;
	int peer;
};

static void
cancel_peer_resolved(void *arg, const struct sockaddr *sa, socklen_t salen, const char *errmsg)
{
	struct cancel_fwd *f = arg;
	struct cancel_peer *cp = cancel_peer_state(f->peer);

	if (cp != NULL && cp->connecting > 0)
		cp->connecting--;	/* cancel_send counts it again */
	if (sa == NULL) {
		log_warn("cancel request for peer %d dropped: %s", f->peer, errmsg);
		cancel_peer_next(f->peer);
	} else {
		cancel_send(sa, salen, f->pid, f->key, f->peer, NULL);
	}
	free(f);
}

/* Start forwarding to [peers] entry <p> (its Unix socket directory or host name). */
static void
cancel_peer_start(const struct cfg_peer *p, uint32_t pid, uint32_t key)
{
	struct cancel_peer *cp = cancel_peer_state(p->peer_id);
	struct sockaddr_un sun;
	struct cancel_fwd *f;

	log_debug("forwarding cancellation request to peer %d", p->peer_id);
	if (p->host[0] == '/') {
		memset(&sun, 0, sizeof(sun));
		sun.sun_family = AF_UNIX;
		snprintf(sun.sun_path, sizeof(sun.sun_path), "%s/.s.PGSQL.%d", p->host, p->port);
		cancel_send((struct sockaddr *)&sun, sizeof(sun), pid, key, p->peer_id, NULL);
		return;
	}
	f = calloc(1, sizeof(*f));
	if (f == NULL)
		return;
	*f = (struct cancel_fwd){ pid, key, p->peer_id };
	if (cp != NULL)
		cp->connecting++;	/* resolving counts as logging in */
	if (dns_process() == NULL ||
	    dns_lookup(dns_process(), p->host, p->port, cancel_peer_resolved, f) == NULL) {
		log_warn("cancel request for peer %d dropped: no resolver", p->peer_id);
		if (cp != NULL)
			cp->connecting--;
		free(f);
	}
}

/* Room for one more forward to <cp> under <p>'s pool_size? */
static bool
cancel_peer_has_room(const struct cfg *c, const struct cfg_peer *p, const struct cancel_peer *cp)
{
	int pool_size = p->pool_size >= 0 ? p->pool_size : c->pool.default_pool_size;

	return cp == NULL || pool_size <= 0 || cp->connecting + cp->sent < pool_size;
}

/* Take the oldest queued forward of <cp> off its queue (the caller frees it). */
static struct cancel_wait *
cancel_peer_pop(struct cancel_peer *cp)
{
	struct cancel_wait *w = cp->head;

	cp->head = w->next;
	if (cp->head == NULL)
		cp->tail = NULL;
	cp->waiting--;
	return w;
}

/* cancel_wait_timeout: drop the forwards queued for <cp> longer than that (oldest first). */
static void
cancel_peer_expire(struct cancel_peer *cp, uint64_t now)
{
	double secs = cfg_current()->cli.cancel_wait_timeout;

	while (secs > 0 && cp->head != NULL && now - cp->head->since_us >= (uint64_t)(secs * 1e6)) {
		log_info("cancel request to peer %d dropped: cancel_wait_timeout", cp->peer);
		free(cancel_peer_pop(cp));
	}
}

/* A forward to <peer> ended: start the oldest queued one if there is room. */
static void
cancel_peer_next(int peer)
{
	const struct cfg *c = cfg_current();
	const struct cfg_peer *p = cfg_peer_find(c, peer);
	struct cancel_peer *cp = cancel_peer_state(peer);
	struct cancel_wait *w;

	if (cp != NULL)
		cancel_peer_expire(cp, sess_now_us());
	while (cp != NULL && cp->head != NULL && p != NULL && cancel_peer_has_room(c, p, cp)) {
		w = cancel_peer_pop(cp);
		cancel_peer_start(p, w->pid, w->key);
		free(w);
	}
}

void
sess_cancel_janitor(uint64_t now)
{
	for (size_t i = 0; i < CANCEL_PEERS_TRACKED && peer_load[i].peer != 0; i++)
		cancel_peer_expire(&peer_load[i], now);
}

/* Queue a forward to <cp> until one in flight ends (pgbouncer's cl_waiting_cancel_req). */
static void
cancel_peer_queue(struct cancel_peer *cp, uint32_t pid, uint32_t key)
{
	struct cancel_wait *w;

	if (cp->waiting >= CANCEL_QUEUE_MAX || (w = calloc(1, sizeof(*w))) == NULL) {
		log_warn("cancel request for peer %d dropped: %d already waiting", cp->peer,
			 cp->waiting);
		return;
	}
	w->pid = pid;
	w->key = key;
	w->since_us = sess_now_us();
	if (cp->tail != NULL)
		cp->tail->next = w;
	else
		cp->head = w;
	cp->tail = w;
	cp->waiting++;
}

/* Send the request on to [peers] entry <peer>, or queue it while pool_size are in flight. */
static void
cancel_to_peer(const struct cfg *c, int peer, uint32_t pid, uint32_t key)
{
	const struct cfg_peer *p = cfg_peer_find(c, peer);
	struct cancel_peer *cp;

	if ((key & CANCEL_TTL_MASK) == 0) {
		log_info("failed to forward cancel request because its TTL was exhausted");
		return;
	}
	key--;	/* the TTL is in the lowest bits */
	if (p == NULL) {
		log_info("could not find peer to forward request to (peer_id %d)", peer);
		return;
	}
	cp = cancel_peer_state(peer);
	if (cp != NULL && (cp->head != NULL || !cancel_peer_has_room(c, p, cp))) {
		cancel_peer_queue(cp, pid, key);
		return;
	}
	cancel_peer_start(p, pid, key);
}

void
sess_cancel_peer_rows(void (*fn)(void *arg, int peer, int active, int waiting, int sent,
				 int login), void *arg)
{
	for (size_t i = 0; i < CANCEL_PEERS_TRACKED && peer_load[i].peer != 0; i++) {
		const struct cancel_peer *cp = &peer_load[i];

		fn(arg, cp->peer, cp->connecting + cp->sent, cp->waiting, cp->sent,
		   cp->connecting);
	}
}

void
sess_cancel_request(uint32_t pid, uint32_t key)
{
	const struct cfg *c = cfg_current();
	bool peering = c->proc.peer_id > 0;
	uint32_t slot;
	int n;
	struct shm_msg m;
	int self = shm_self();

	if (peering && cancel_key_peer(pid) != c->proc.peer_id) {
		cancel_to_peer(c, cancel_key_peer(pid), pid, key);
		return;
	}
	if (peering)
		key |= CANCEL_TTL_MASK;	/* our keys carry the full TTL */
	/* the workers are the slots before the admin's, the last one */
	n = session_cancel_key_worker((uint64_t)pid << 32 | key,
				      shm_n_procs() > 1 ? shm_n_procs() - 1 : 1, peering);
	if (n < 0)
		return;
	slot = (uint32_t)n;
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
