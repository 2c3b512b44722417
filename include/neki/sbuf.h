/*
 * neki/sbuf.h - the stream transport under every client and backend connection.
 *
 * A struct sbuf owns one non-blocking socket, a read buffer (pkt_buf bytes, grown up to
 * max_packet_size only while a whole packet must be held) and a write queue. It frames the
 * byte stream into v3 protocol packets and calls ONE protocol callback with an event; the
 * protocol layer never touches the socket, it only says what happens to the current packet:
 *
 *   sbuf_forward(sb, dst, n)  pass the next n bytes to another sbuf (zero-copy: sent from
 *                             this sbuf's read buffer; copied into dst's queue only when
 *                             dst's socket is full)
 *   sbuf_skip(sb, n)          drop / consume the next n bytes
 *   sbuf_hold(sb)             call me again when the whole packet is in the buffer
 *   return false              stop reading (sbuf_pause), resume with sbuf_continue()
 *
 * Backpressure: a source stops reading while a destination it forwards to has queued
 * bytes, and resumes when that queue drains. Each wakeup does at most sbuf_loopcnt reads.
 * Closing: sbuf_close() may be called anywhere, including inside the callback; it never
 * frees memory. The owner frees with sbuf_cleanup() later, at a safe point (its reap step).
 *
 * I/O goes through a struct sbuf_io_ops table (plain sockets here; TLS in net/tls.c).
 * Not here: protocol meaning of packets (proto, link, session), DNS (net/dns).
 */
#ifndef NEKI_SBUF_H
#define NEKI_SBUF_H

#include "neki/base.h"

#include <sys/socket.h>

struct cfg;
struct event;
struct event_base;
struct sbuf;

/* What the protocol callback is told. */
enum sbuf_event {
	SBUF_EV_PKT = 0,		/* a packet starts (or, after sbuf_hold, is whole) */
	SBUF_EV_CONNECT_OK = 1,		/* sbuf_connect() finished; reading is on */
	SBUF_EV_CONNECT_FAILED = 2,	/* connect error or server_connect_timeout; see err */
	SBUF_EV_SEND_DONE = 3,		/* the write queue drained after the socket was full */
	SBUF_EV_EOF = 4,		/* peer closed the stream at a packet boundary */
	SBUF_EV_RECV_FAILED = 5,	/* read error, or EOF in the middle of a packet */
	SBUF_EV_SEND_FAILED = 6,	/* write error (peer gone) */
	SBUF_EV_BAD_PKT = 7,		/* framing error: a length field below its minimum */
};

/* The packet an SBUF_EV_PKT event describes. Valid only during the callback. */
struct sbuf_pkt {
	uint8_t type;		/* message type byte; 0 for startup-phase packets */
	uint32_t len;		/* whole packet: type byte (if any) + length field + body */
	const uint8_t *data;	/* borrowed: the packet's first byte in the read buffer */
	uint32_t avail;		/* bytes of the packet present at data (<= len) */
};

/*
 * The protocol callback. <pkt> is non-NULL only for SBUF_EV_PKT. For SBUF_EV_PKT return true
 * after choosing an action (forward / skip / hold); return false to stop reading: the sbuf is
 * paused (or was closed) and the same packet is offered again after sbuf_continue(). For the
 * other events the return value is ignored. <err> is an errno value for the failure events,
 * 0 otherwise.
 */
typedef bool (*sbuf_cb_fn)(struct sbuf *sb, enum sbuf_event ev, const struct sbuf_pkt *pkt,
			   int err, void *arg);

/*
 * The I/O seam (TLS later). recv/send return bytes moved, 0 from recv at EOF, or -1 with
 * errno set (EAGAIN / EWOULDBLOCK when the socket is not ready).
 */
struct sbuf_io_ops {
	ssize_t (*recv)(struct sbuf *sb, void *buf, size_t len);
	ssize_t (*send)(struct sbuf *sb, const void *buf, size_t len);
	void (*shutdown)(struct sbuf *sb);	/* before close(); may be NULL */
};

/* Plain-socket operations (the default). */
const struct sbuf_io_ops *sbuf_plain_io(void);

/* Replace the I/O operations of <sb> with <ops> and their state <ctx> (TLS). */
void sbuf_set_io(struct sbuf *sb, const struct sbuf_io_ops *ops, void *ctx);

/* Buffer and socket settings, normally from the [pgbouncer] section (sbuf_opts_from_cfg). */
struct sbuf_opts {
	uint32_t pkt_buf;		/* read buffer bytes (pkt_buf) */
	uint32_t max_pkt;		/* largest packet sbuf_hold() accepts (max_packet_size) */
	unsigned loopcnt;		/* reads per wakeup (sbuf_loopcnt); 0 = no limit */
	bool tcp_keepalive;		/* SO_KEEPALIVE on TCP sockets */
	int tcp_keepcnt;		/* TCP_KEEPCNT; 0 = OS default */
	int tcp_keepidle;		/* TCP_KEEPIDLE seconds; 0 = OS default */
	int tcp_keepintvl;		/* TCP_KEEPINTVL seconds; 0 = OS default */
	int tcp_user_timeout;		/* TCP_USER_TIMEOUT milliseconds; 0 = OS default */
	int tcp_socket_buffer;		/* SO_SNDBUF/SO_RCVBUF bytes; 0 = OS default */
};

/*
 * Stream buffer. Embedded in its owner (client session or backend link); all fields are
 * private to sbuf.c, read them through the accessors below.
 */
struct sbuf {
	int fd;				/* owned; -1 when not open */
	struct event_base *base;	/* borrowed: the worker's loop */
	struct event *ev_read;		/* owned: EV_READ|EV_PERSIST */
	struct event *ev_write;		/* owned: EV_WRITE|EV_PERSIST; also the connect wait */
	const struct sbuf_io_ops *io;	/* borrowed, static table */
	void *io_ctx;			/* owned by the io layer (TLS state), freed by its shutdown */
	sbuf_cb_fn cb;			/* the protocol callback */
	void *cb_arg;			/* borrowed: the owner */
	struct sbuf_opts opts;		/* copy */

	uint8_t *rbuf;			/* owned read buffer */
	uint32_t rcap;			/* its size (pkt_buf, or more while holding) */
	uint32_t rpos;			/* first unprocessed byte */
	uint32_t rend;			/* end of received bytes */

	uint8_t act;			/* action on the current packet (sbuf.c enum) */
	uint32_t act_remain;		/* bytes of the current packet still to act on */
	uint32_t fwd_start;		/* pending forward batch: offset in rbuf */
	uint32_t fwd_len;		/* pending forward batch: bytes (sent before next read) */
	struct sbuf *dst;		/* weak (cleared by dst's close): current forward target */
	struct sbuf *dst_next;		/* next source in dst->srcs */
	struct sbuf *srcs;		/* weak list of sbufs whose dst is this one */

	uint8_t *wbuf;			/* owned write queue */
	size_t wcap;			/* its allocated size */
	size_t wpos;			/* first unsent byte */
	size_t wend;			/* end of queued bytes */

	int pending_err;		/* errno of a failed send/connect, reported from ev_write */
	bool send_failed;		/* SBUF_EV_SEND_FAILED was reported */
	bool connecting;		/* sbuf_connect() in progress */
	bool startup;			/* startup-phase framing: 4-byte length, no type byte */
	bool paused;			/* reading stopped by the owner */
	bool waiting;			/* reading stopped by backpressure from dst */
	bool read_on;			/* ev_read is added */
	bool write_on;			/* ev_write is added */
	bool eof;			/* the read side ended (EOF or error reported) */
	bool closed;			/* sbuf_close() was called */
	bool is_unix;			/* AF_UNIX socket */
	bool notify_send_done;		/* report SBUF_EV_SEND_DONE when the queue drains */
	uint8_t cork;			/* enum sbuf_cork */
	bool rewritten;			/* the current packet was rewritten (sbuf_rewrite) */
};

/* Fill <o> from the configuration <c> (pkt_buf, max_packet_size, sbuf_loopcnt, tcp_*). */
void sbuf_opts_from_cfg(struct sbuf_opts *o, const struct cfg *c);

/* Defaults matching pgbouncer's (pkt_buf 4096, max_packet_size 2 GB - 1, loopcnt 5). */
void sbuf_opts_default(struct sbuf_opts *o);

/*
 * Prepare <sb> on <base> with callback <cb>(<arg>) and <opts>. Allocates the read buffer and
 * the events. Returns false when out of memory (then sbuf_cleanup() is still safe).
 */
NK_MUSTCHECK bool sbuf_init(struct sbuf *sb, struct event_base *base, sbuf_cb_fn cb, void *arg,
			    const struct sbuf_opts *opts);

/* Free the buffers and events of a closed (or never opened) <sb>. Never from its callback. */
void sbuf_cleanup(struct sbuf *sb);

/*
 * Adopt the connected socket <fd> (made non-blocking, tuned) and start reading.
 * Returns false (and closes nothing) when the events cannot be added.
 */
NK_MUSTCHECK bool sbuf_accept(struct sbuf *sb, int fd, bool is_unix);

/*
 * Start a non-blocking connect to <sa>. The result comes as SBUF_EV_CONNECT_OK or
 * SBUF_EV_CONNECT_FAILED (also after <timeout> seconds when > 0), always from the event
 * loop, never from inside this call. Returns false with errno set when the socket cannot
 * even be created.
 */
NK_MUSTCHECK bool sbuf_connect(struct sbuf *sb, const struct sockaddr *sa, socklen_t salen,
			       double timeout);

/* Frame packets as startup-phase packets (4-byte length, no type) while <on>. */
void sbuf_set_startup(struct sbuf *sb, bool on);

/* ---- actions, called from the callback on SBUF_EV_PKT ---- */

/* Forward the next <n> bytes to <dst> (n may exceed what is buffered; the rest streams). */
void sbuf_forward(struct sbuf *sb, struct sbuf *dst, uint32_t n);
/* Drop (or mark consumed) the next <n> bytes. */
void sbuf_skip(struct sbuf *sb, uint32_t n);
/*
 * Ask for the whole current packet: the callback is called again once it is buffered.
 * Returns false when the packet is larger than max_pkt (nothing changes then).
 */
NK_MUSTCHECK bool sbuf_hold(struct sbuf *sb, uint32_t pkt_len);

/*
 * The current packet, whole in the read buffer (<pkt>->avail == <pkt>->len), to be rewritten
 * in place without changing its length before it is forwarded. NULL when this packet was
 * rewritten already (it is offered again after a pause or a hold).
 */
uint8_t *sbuf_rewrite(struct sbuf *sb, const struct sbuf_pkt *pkt);

/* ---- flow control ---- */

/*
 * Stop reading until sbuf_continue() (the read event is left added until the socket becomes
 * readable, so a pause/continue pair with a quiet peer costs no epoll_ctl).
 */
void sbuf_pause(struct sbuf *sb);
/* Resume reading; buffered packets are processed from the loop, not inside this call. */
void sbuf_continue(struct sbuf *sb);

/*
 * Queue <len> bytes of <data> (a message built with pktbuf) for sending, after any bytes
 * already forwarded to <sb>. Sent at once when the socket allows, the rest is copied.
 * Returns false when <sb> is closed or failed, or out of memory.
 */
NK_MUSTCHECK bool sbuf_send(struct sbuf *sb, const void *data, size_t len);

/*
 * Forget the forward target of <sb> (after its packets went to a client that is now unlinked),
 * so that the old target's queue no longer holds back reading. Flushes pending forwards first;
 * the unread rest of a packet being forwarded is dropped.
 */
void sbuf_detach(struct sbuf *sb);

/*
 * Corked output (default off): the answer of a statement leaves in one send, as from
 * Postgres's own output buffer. ON: what is sent or forwarded to <sb> is queued until
 * sbuf_flush() or until 8 kB are queued (then written at once). FWD: what sbuf_send() gives
 * is queued and leaves with the next bytes a source forwards (written at once, as when off).
 * The queue of a corked sbuf holds back no source until its socket is full. OFF flushes.
 */
enum sbuf_cork {
	SBUF_CORK_OFF = 0,
	SBUF_CORK_FWD,
	SBUF_CORK_ON,
};
void sbuf_set_cork(struct sbuf *sb, enum sbuf_cork mode);
/* Write what is queued for <sb> now (forwards pending to it first), corked or not. */
void sbuf_flush(struct sbuf *sb);

/* Report SBUF_EV_SEND_DONE when the queue drains after the socket was full (default off). */
void sbuf_set_notify_send_done(struct sbuf *sb, bool on);

/*
 * Close the socket (after a last best-effort send of the queue). Safe inside the callback and
 * on an already closed sbuf. Sources forwarding to <sb> drop the rest of their packet.
 */
void sbuf_close(struct sbuf *sb);

/* ---- state ---- */

/* True when nothing is buffered and no packet is half processed. */
bool sbuf_is_empty(const struct sbuf *sb);
/* Bytes waiting in the write queue. */
size_t sbuf_queued(const struct sbuf *sb);
/*
 * Buffered bytes beyond the current packet action (the callback's forward/skip): bytes the
 * peer sent ahead. TLS refuses plaintext sent after an SSLRequest with it.
 */
uint32_t sbuf_unclaimed(const struct sbuf *sb);

/*
 * During SBUF_EV_PKT, before an action: the bytes buffered from the current packet's first
 * byte (pkt->data) on, that packet and what the peer sent after it (a whole batch a client
 * sent in one write), for a look at the messages that follow.
 */
uint32_t sbuf_lookahead(const struct sbuf *sb);
/*
 * Run the read handler again from the loop (when not paused, waiting or closed): for an I/O
 * layer that holds decrypted bytes the socket's readiness does not show.
 */
void sbuf_wake(struct sbuf *sb);

static inline bool
sbuf_is_unix(const struct sbuf *sb)
{
	return sb->is_unix;
}

/* Does <sb> run over another I/O layer than the plain socket (TLS)? */
static inline bool
sbuf_io_is_tls(const struct sbuf *sb)
{
	return sb->io != sbuf_plain_io();
}

static inline bool
sbuf_is_closed(const struct sbuf *sb)
{
	return sb->closed;
}

static inline int
sbuf_fd(const struct sbuf *sb)
{
	return sb->fd;
}

/* Apply the keepalive / buffer settings of <o> to the socket <fd> (TCP_NODELAY for TCP). */
void sbuf_tune_socket(int fd, bool is_unix, const struct sbuf_opts *o);

#endif /* NEKI_SBUF_H */
