/*
 * sbuf.c - the stream transport: socket, framing, forwarding, write queue, backpressure.
 *
 * Reading: sbuf_read_cb() alternates "process what is buffered" (sbuf_process: frame packets,
 * ask the protocol callback, apply its action) and "read more" (sbuf_fill), at most
 * opts.loopcnt reads per wakeup. Forwarded bytes are collected into one contiguous batch of
 * the read buffer and handed to the destination (sbuf_deliver) before the next read, so that
 * several small packets leave in one send(). Writing: sbuf_deliver() sends directly when the
 * destination's queue is empty and copies only what the socket did not take.
 *
 * Entry points: sbuf_init/accept/connect/close/cleanup, the actions (forward/skip/hold),
 * sbuf_send, sbuf_pause/continue. Not here: what packets mean (the callback's business).
 */
#include "neki/base.h"
#include "neki/byteorder.h"
#include "neki/sbuf.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "neki/config.h"
#include "neki/log.h"

/* What happens to the bytes of the current packet. */
enum sbuf_action {
	SBUF_ACT_NONE = 0,	/* at a packet boundary: the callback decides */
	SBUF_ACT_FORWARD = 1,	/* act_remain bytes go to dst */
	SBUF_ACT_SKIP = 2,	/* act_remain bytes are dropped */
	SBUF_ACT_HOLD = 3,	/* wait until act_remain bytes (the packet) are buffered */
};

/* Outcome of one read. */
enum sbuf_fill {
	SBUF_FILL_FULL = 0,	/* the read filled the free space: more may be waiting */
	SBUF_FILL_SHORT = 1,	/* got bytes, the socket is probably drained */
	SBUF_FILL_AGAIN = 2,	/* nothing to read now */
	SBUF_FILL_END = 3,	/* EOF or error, already reported */
};

#define SBUF_MIN_BUF 256
#define SBUF_WQ_MIN 4096
#define SBUF_CORK_MAX 8192	/* corked: queued bytes that are written at once (Postgres's
				 * own output buffer is as big) */
#define SBUF_WQ_KEEP 16384	/* a drained write queue bigger than this is freed */

static void sbuf_read_cb(evutil_socket_t fd, short what, void *arg);
static void sbuf_write_cb(evutil_socket_t fd, short what, void *arg);
static void sbuf_flush_queue(struct sbuf *sb);

/* ---- plain socket I/O ---- */

static ssize_t
sbuf_plain_recv(struct sbuf *sb, void *buf, size_t len)
{
	return recv(sb->fd, buf, len, 0);
}

static ssize_t
sbuf_plain_send(struct sbuf *sb, const void *buf, size_t len)
{
	return send(sb->fd, buf, len, MSG_NOSIGNAL);
}

static const struct sbuf_io_ops sbuf_plain_table = {
	.recv = sbuf_plain_recv,
	.send = sbuf_plain_send,
	.shutdown = NULL,
};

/* The plain-socket operations table (static, never freed). */
const struct sbuf_io_ops *
sbuf_plain_io(void)
{
	return &sbuf_plain_table;
}

/* Use <ops> with state <ctx> for <sb>'s I/O from now on. */
void
sbuf_set_io(struct sbuf *sb, const struct sbuf_io_ops *ops, void *ctx)
{
	sb->io = ops;
	sb->io_ctx = ctx;
}

/* ---- options ---- */

/* pgbouncer's defaults for the transport settings. */
void
sbuf_opts_default(struct sbuf_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->pkt_buf = 4096;
	o->max_pkt = 2147483647u;
	o->loopcnt = 5;
	o->tcp_keepalive = true;
}

/* Copy the transport settings of <c> into <o>. */
void
sbuf_opts_from_cfg(struct sbuf_opts *o, const struct cfg *c)
{
	sbuf_opts_default(o);
	if (c->net.pkt_buf > 0)
		o->pkt_buf = (uint32_t)c->net.pkt_buf;
	if (c->net.max_packet_size > 0)
		o->max_pkt = (uint32_t)c->net.max_packet_size;
	o->loopcnt = c->net.sbuf_loopcnt > 0 ? (unsigned)c->net.sbuf_loopcnt : 0;
	o->tcp_keepalive = c->net.tcp_keepalive;
	o->tcp_keepcnt = c->net.tcp_keepcnt;
	o->tcp_keepidle = c->net.tcp_keepidle;
	o->tcp_keepintvl = c->net.tcp_keepintvl;
	o->tcp_user_timeout = c->net.tcp_user_timeout;
	o->tcp_socket_buffer = c->net.tcp_socket_buffer;
}

static void
sbuf_setopt(int fd, int level, int name, int val, const char *what)
{
	if (setsockopt(fd, level, name, &val, sizeof(val)) == -1)
		log_debug("setsockopt(%s=%d) failed: %s", what, val, strerror(errno));
}

/*
 * Apply the socket settings of <o> to <fd>. TCP sockets get TCP_NODELAY (we batch ourselves)
 * and the keepalive family; failures are logged at debug level and otherwise ignored, as the
 * kernel may not support every option.
 */
void
sbuf_tune_socket(int fd, bool is_unix, const struct sbuf_opts *o)
{
	if (o->tcp_socket_buffer > 0) {
		sbuf_setopt(fd, SOL_SOCKET, SO_SNDBUF, o->tcp_socket_buffer, "SO_SNDBUF");
		sbuf_setopt(fd, SOL_SOCKET, SO_RCVBUF, o->tcp_socket_buffer, "SO_RCVBUF");
	}
	if (is_unix)
		return;
	sbuf_setopt(fd, IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY");
	sbuf_setopt(fd, SOL_SOCKET, SO_KEEPALIVE, o->tcp_keepalive ? 1 : 0, "SO_KEEPALIVE");
	if (o->tcp_keepalive && o->tcp_keepcnt > 0)
		sbuf_setopt(fd, IPPROTO_TCP, TCP_KEEPCNT, o->tcp_keepcnt, "TCP_KEEPCNT");
	if (o->tcp_keepalive && o->tcp_keepidle > 0)
		sbuf_setopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, o->tcp_keepidle, "TCP_KEEPIDLE");
	if (o->tcp_keepalive && o->tcp_keepintvl > 0)
		sbuf_setopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, o->tcp_keepintvl, "TCP_KEEPINTVL");
	if (o->tcp_user_timeout > 0)
		sbuf_setopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, o->tcp_user_timeout,
			    "TCP_USER_TIMEOUT");
}

/* ---- lifecycle ---- */

/*
 * Set up <sb> (not yet connected) on <base>. Allocates the pkt_buf read buffer and two
 * unassigned events. Returns false when out of memory; sbuf_cleanup() is safe either way.
 */
bool
sbuf_init(struct sbuf *sb, struct event_base *base, sbuf_cb_fn cb, void *arg,
	  const struct sbuf_opts *opts)
{
	memset(sb, 0, sizeof(*sb));
	sb->fd = -1;
	sb->base = base;
	sb->cb = cb;
	sb->cb_arg = arg;
	sb->opts = *opts;
	if (sb->opts.pkt_buf < SBUF_MIN_BUF)
		sb->opts.pkt_buf = SBUF_MIN_BUF;
	sb->io = &sbuf_plain_table;
	sb->rcap = sb->opts.pkt_buf;
	sb->rbuf = malloc(sb->rcap);
	sb->ev_read = event_new(base, -1, 0, sbuf_read_cb, sb);
	sb->ev_write = event_new(base, -1, 0, sbuf_write_cb, sb);
	return sb->rbuf != NULL && sb->ev_read != NULL && sb->ev_write != NULL;
}

/* Free everything <sb> owns; closes it first if needed. Not from inside its callback. */
void
sbuf_cleanup(struct sbuf *sb)
{
	sbuf_close(sb);
	if (sb->ev_read != NULL)
		event_free(sb->ev_read);
	if (sb->ev_write != NULL)
		event_free(sb->ev_write);
	free(sb->rbuf);
	free(sb->wbuf);
	sb->ev_read = NULL;
	sb->ev_write = NULL;
	sb->rbuf = NULL;
	sb->wbuf = NULL;
}

static void
sbuf_read_on(struct sbuf *sb)
{
	if (sb->read_on || sb->closed || sb->eof || sb->fd == -1)
		return;
	if (event_add(sb->ev_read, NULL) == 0)
		sb->read_on = true;
}

static void
sbuf_read_off(struct sbuf *sb)
{
	if (!sb->read_on)
		return;
	event_del(sb->ev_read);
	sb->read_on = false;
}

static void
sbuf_write_on(struct sbuf *sb, const struct timeval *tv)
{
	if (sb->write_on || sb->fd == -1)
		return;
	if (event_add(sb->ev_write, tv) == 0)
		sb->write_on = true;
}

static void
sbuf_write_off(struct sbuf *sb)
{
	if (!sb->write_on)
		return;
	event_del(sb->ev_write);
	sb->write_on = false;
}

/* Point both events at <fd>. */
static bool
sbuf_assign_fd(struct sbuf *sb, int fd, bool is_unix)
{
	sb->fd = fd;
	sb->is_unix = is_unix;
	if (event_assign(sb->ev_read, sb->base, fd, EV_READ | EV_PERSIST, sbuf_read_cb, sb) == -1)
		return false;
	return event_assign(sb->ev_write, sb->base, fd, EV_WRITE | EV_PERSIST, sbuf_write_cb,
			    sb) == 0;
}

/* Adopt the connected socket <fd>: non-blocking, tuned, reading. */
bool
sbuf_accept(struct sbuf *sb, int fd, bool is_unix)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl == -1 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) == -1)
		return false;
	sbuf_tune_socket(fd, is_unix, &sb->opts);
	if (!sbuf_assign_fd(sb, fd, is_unix))
		return false;
	sbuf_read_on(sb);
	return sb->read_on;
}

/*
 * Begin connecting to <sa>. The outcome is always reported from the loop through ev_write
 * (even an immediate success or failure), so the caller's state is consistent first.
 */
bool
sbuf_connect(struct sbuf *sb, const struct sockaddr *sa, socklen_t salen, double timeout)
{
	bool is_unix = sa->sa_family == AF_UNIX;
	struct timeval tv;
	int fd;

	fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd == -1)
		return false;
	sbuf_tune_socket(fd, is_unix, &sb->opts);
	if (!sbuf_assign_fd(sb, fd, is_unix)) {
		close(fd);
		sb->fd = -1;
		errno = ENOMEM;
		return false;
	}
	sb->connecting = true;
	if (connect(fd, sa, salen) == -1 && errno != EINPROGRESS) {
		sb->pending_err = errno;
		event_active(sb->ev_write, EV_WRITE, 0);
		return true;
	}
	tv.tv_sec = (time_t)timeout;
	tv.tv_usec = (suseconds_t)((timeout - (double)tv.tv_sec) * 1e6);
	sbuf_write_on(sb, timeout > 0 ? &tv : NULL);
	return true;
}

/* Connect finished (or timed out): report it, start reading. */
static void
sbuf_on_connect(struct sbuf *sb, short what)
{
	int err = sb->pending_err;
	socklen_t len = sizeof(err);

	sbuf_write_off(sb);
	sb->connecting = false;
	if (err == 0 && (what & EV_TIMEOUT))
		err = ETIMEDOUT;
	if (err == 0 && getsockopt(sb->fd, SOL_SOCKET, SO_ERROR, &err, &len) == -1)
		err = errno;
	if (err != 0) {
		sb->pending_err = err;
		sb->eof = true;
		sb->cb(sb, SBUF_EV_CONNECT_FAILED, NULL, err, sb->cb_arg);
		return;
	}
	sbuf_read_on(sb);
	if (sb->wend > sb->wpos)
		sbuf_write_on(sb, NULL);
	sb->cb(sb, SBUF_EV_CONNECT_OK, NULL, 0, sb->cb_arg);
}

/* Use startup-phase framing (no type byte) while <on>. */
void
sbuf_set_startup(struct sbuf *sb, bool on)
{
	sb->startup = on;
}

/* ---- forwarding targets ---- */

/* Unlink <sb> from its destination's list of sources. */
static void
sbuf_unlink_dst(struct sbuf *sb)
{
	struct sbuf **pp;

	if (sb->dst == NULL)
		return;
	for (pp = &sb->dst->srcs; *pp != NULL; pp = &(*pp)->dst_next) {
		if (*pp == sb) {
			*pp = sb->dst_next;
			break;
		}
	}
	sb->dst = NULL;
	sb->dst_next = NULL;
}

/*
 * Restart reading on <sb> from the loop (never inside the current call chain). The handler
 * runs with EV_TIMEOUT, not EV_READ: it processes what is buffered, and reads only when the
 * socket is reported readable (or the I/O layer may hold bytes). With nothing buffered, no
 * packet half acted on and a plain socket, it is not run: the socket's readiness runs it.
 */
static void
sbuf_kick(struct sbuf *sb)
{
	if (sb->closed || sb->paused || sb->waiting || sb->eof || sb->fd == -1)
		return;
	sbuf_read_on(sb);
	if (sb->rpos == sb->rend && sb->act_remain == 0 && sb->fwd_len == 0 &&
	    sb->io == &sbuf_plain_table && sb->read_on)
		return;
	event_active(sb->ev_read, EV_TIMEOUT, 0);
}

/* The queue of <dst> drained (or <dst> closed): let blocked sources read again. */
static void
sbuf_wake_srcs(struct sbuf *dst)
{
	struct sbuf *src;

	for (src = dst->srcs; src != NULL; src = src->dst_next) {
		if (src->waiting) {
			src->waiting = false;
			sbuf_kick(src);
		}
	}
}

/* ---- writing ---- */

/* Make room for <len> more bytes in the write queue. */
static bool
sbuf_wq_reserve(struct sbuf *sb, size_t len)
{
	size_t used = sb->wend - sb->wpos;
	size_t ncap;
	uint8_t *nb;

	if (sb->wpos > 0 && sb->wcap - sb->wend < len) {
		memmove(sb->wbuf, sb->wbuf + sb->wpos, used);
		sb->wpos = 0;
		sb->wend = used;
	}
	if (sb->wcap - sb->wend >= len)
		return true;
	ncap = sb->wcap ? sb->wcap * 2 : SBUF_WQ_MIN;
	while (ncap < used + len)
		ncap *= 2;
	nb = realloc(sb->wbuf, ncap);
	if (nb == NULL)
		return false;
	sb->wbuf = nb;
	sb->wcap = ncap;
	return true;
}

/* A send on <sb> failed with <err>: report it from <sb>'s own write event. */
static void
sbuf_fail_send(struct sbuf *sb, int err)
{
	sb->pending_err = err;
	if (sb->ev_write != NULL && sb->fd != -1)
		event_active(sb->ev_write, EV_WRITE, 0);
}

/* Write the queue of <dst> now; what the socket refuses waits for the write event. */
static void
sbuf_write_queue(struct sbuf *dst)
{
	sbuf_flush_queue(dst);
	if (dst->pending_err != 0)
		sbuf_fail_send(dst, dst->pending_err);
	else if (dst->wend > dst->wpos)
		sbuf_write_on(dst, NULL);
}

/* Append <len> bytes to <dst>'s write queue; false (the sbuf failed, ENOMEM) when no room. */
static bool
sbuf_wq_append(struct sbuf *dst, const uint8_t *data, size_t len)
{
	if (!sbuf_wq_reserve(dst, len)) {
		sbuf_fail_send(dst, ENOMEM);
		return false;
	}
	memcpy(dst->wbuf + dst->wend, data, len);
	dst->wend += len;
	return true;
}

/* Corked <dst> (the socket not full): queue <len> bytes, written once SBUF_CORK_MAX are
 * queued (a big message alone goes out as it is). False: not queued (write it now). */
static bool
sbuf_cork_queue(struct sbuf *dst, const uint8_t *data, size_t len)
{
	size_t queued = dst->wend - dst->wpos;

	if (queued == 0 && len >= SBUF_CORK_MAX)
		return false;
	if (!sbuf_wq_append(dst, data, len))
		return true;	/* (failed: pending_err tells the caller) */
	if (queued + len >= SBUF_CORK_MAX)
		sbuf_write_queue(dst);
	return true;
}

/* Corked <dst>: true when <len> bytes (<fwd>: forwarded by a source) were queued, or went
 * out with what was queued (see sbuf_set_cork); false: write them as when not corked. */
static bool
sbuf_corked(struct sbuf *dst, const uint8_t *data, size_t len, bool fwd)
{
	if (dst->cork == SBUF_CORK_ON || !fwd)
		return sbuf_cork_queue(dst, data, len);
	if (dst->wend == dst->wpos)
		return false;
	/* FWD: what waited leaves with the forwarded bytes, in one write */
	if (!sbuf_wq_append(dst, data, len))
		return true;	/* (failed: pending_err tells the caller) */
	sbuf_write_queue(dst);
	return true;
}

/*
 * Hand <len> bytes to <dst> (<fwd>: forwarded by a source): try the socket first when
 * nothing is queued, queue the rest; corked, see sbuf_corked(). Returns false when the bytes
 * were dropped (dst closed or failed, or no memory).
 */
static bool
sbuf_deliver(struct sbuf *dst, const uint8_t *data, size_t len, bool fwd)
{
	ssize_t n;

	if (dst->closed || dst->pending_err != 0 || dst->fd == -1)
		return false;
	if (dst->cork != SBUF_CORK_OFF && !dst->write_on && !dst->connecting && len > 0 &&
	    sbuf_corked(dst, data, len, fwd))
		return dst->pending_err == 0;
	if (dst->wend == dst->wpos && !dst->connecting && len > 0) {
		n = dst->io->send(dst, data, len);
		if (n == -1 && errno != EAGAIN && errno != EWOULDBLOCK) {
			sbuf_fail_send(dst, errno);
			return false;
		}
		if (n > 0) {
			data += n;
			len -= (size_t)n;
		}
	}
	if (len == 0)
		return true;
	if (!sbuf_wq_append(dst, data, len))
		return false;
	if (!dst->connecting)
		sbuf_write_on(dst, NULL);
	return true;
}

/* Send the pending forward batch of <src> to its destination. */
static void
sbuf_flush_batch(struct sbuf *src)
{
	uint32_t len = src->fwd_len;

	if (len == 0)
		return;
	src->fwd_len = 0;
	if (src->dst != NULL)
		(void)sbuf_deliver(src->dst, src->rbuf + src->fwd_start, len, true);
}

/* Queue a message built by the protocol layer, after bytes already forwarded to <sb>. */
bool
sbuf_send(struct sbuf *sb, const void *data, size_t len)
{
	struct sbuf *src;

	if (sb->closed || sb->pending_err != 0 || sb->fd == -1)
		return false;
	for (src = sb->srcs; src != NULL; src = src->dst_next)
		sbuf_flush_batch(src);
	return sbuf_deliver(sb, data, len, false);
}

/* Write queued bytes until the socket refuses; errors land in pending_err. */
static void
sbuf_flush_queue(struct sbuf *sb)
{
	ssize_t n;

	while (sb->wend > sb->wpos) {
		n = sb->io->send(sb, sb->wbuf + sb->wpos, sb->wend - sb->wpos);
		if (n == -1) {
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				sb->pending_err = errno;
			return;
		}
		sb->wpos += (size_t)n;
	}
	sb->wpos = 0;
	sb->wend = 0;
}

/* Writable (or connect done, or a failure to report). */
static void
sbuf_write_cb(evutil_socket_t fd, short what, void *arg)
{
	struct sbuf *sb = arg;
	bool was_full = sb->wend > sb->wpos;

	if (sb->closed)
		return;
	if (sb->connecting) {
		sbuf_on_connect(sb, what);
		return;
	}
	if (sb->pending_err == 0)
		sbuf_flush_queue(sb);
	if (sb->pending_err != 0) {
		sbuf_write_off(sb);
		if (!sb->send_failed) {
			sb->send_failed = true;
			sb->cb(sb, SBUF_EV_SEND_FAILED, NULL, sb->pending_err, sb->cb_arg);
		}
		return;
	}
	if (sb->wend > sb->wpos)
		return;
	sbuf_write_off(sb);
	sbuf_wake_srcs(sb);
	if (was_full && sb->notify_send_done)
		sb->cb(sb, SBUF_EV_SEND_DONE, NULL, 0, sb->cb_arg);
}

/* Corked output in <mode> (see sbuf.h); turning it off writes what is queued, under the old
 * mode, so that pending forwards and the queue leave in one write. */
void
sbuf_set_cork(struct sbuf *sb, enum sbuf_cork mode)
{
	if (mode == SBUF_CORK_OFF && sb->cork != SBUF_CORK_OFF)
		sbuf_flush(sb);
	sb->cork = (uint8_t)mode;
}

/* Write what is queued for <sb> (forwards pending to it first), corked or not. */
void
sbuf_flush(struct sbuf *sb)
{
	struct sbuf *src;

	for (src = sb->srcs; src != NULL; src = src->dst_next)
		sbuf_flush_batch(src);
	if (sb->closed || sb->fd == -1 || sb->connecting || sb->write_on || sb->pending_err != 0 ||
	    sb->wend == sb->wpos)
		return;
	sbuf_write_queue(sb);
	if (sb->wend > sb->wpos || sb->pending_err != 0)
		return;
	if (sb->wcap > SBUF_WQ_KEEP) {	/* a big answer passed: do not keep its room */
		free(sb->wbuf);
		sb->wbuf = NULL;
		sb->wcap = 0;
	}
	sbuf_wake_srcs(sb);
}

/* Report SBUF_EV_SEND_DONE after a drained queue while <on>. */
void
sbuf_set_notify_send_done(struct sbuf *sb, bool on)
{
	sb->notify_send_done = on;
}

/* ---- actions ---- */

/* Forward the next <n> bytes of the stream to <dst>. */
void
sbuf_forward(struct sbuf *sb, struct sbuf *dst, uint32_t n)
{
	NK_ASSERT(sb->act == SBUF_ACT_NONE);
	NK_ASSERT(dst != sb);
	if (dst != sb->dst) {
		sbuf_flush_batch(sb);
		sbuf_unlink_dst(sb);
		if (dst != NULL && !dst->closed) {
			sb->dst = dst;
			sb->dst_next = dst->srcs;
			dst->srcs = sb;
		}
	}
	sb->act = SBUF_ACT_FORWARD;
	sb->act_remain = n;
	sb->rewritten = false;
}

/* Drop the next <n> bytes of the stream. */
void
sbuf_skip(struct sbuf *sb, uint32_t n)
{
	NK_ASSERT(sb->act == SBUF_ACT_NONE);
	sb->act = SBUF_ACT_SKIP;
	sb->act_remain = n;
	sb->rewritten = false;
}

/* sbuf_rewrite: see sbuf.h. */
uint8_t *
sbuf_rewrite(struct sbuf *sb, const struct sbuf_pkt *pkt)
{
	NK_ASSERT(sb->act == SBUF_ACT_NONE && pkt->avail == pkt->len &&
		  pkt->data == sb->rbuf + sb->rpos);
	if (sb->rewritten)
		return NULL;
	sb->rewritten = true;
	return sb->rbuf + sb->rpos;
}

/* Wait for the whole current packet of <pkt_len> bytes (at most max_pkt). */
bool
sbuf_hold(struct sbuf *sb, uint32_t pkt_len)
{
	NK_ASSERT(sb->act == SBUF_ACT_NONE);
	NK_ASSERT(sb->rend - sb->rpos < pkt_len);
	if (pkt_len > sb->opts.max_pkt)
		return false;
	sb->act = SBUF_ACT_HOLD;
	sb->act_remain = pkt_len;
	return true;
}

/* Forget the forward target (flushing what is pending; the rest of a packet is dropped). */
void
sbuf_detach(struct sbuf *sb)
{
	if (sb->act == SBUF_ACT_FORWARD)
		sb->act = SBUF_ACT_SKIP;
	sbuf_flush_batch(sb);
	sbuf_unlink_dst(sb);
	if (sb->waiting) {
		sb->waiting = false;
		sbuf_kick(sb);
	}
}

/* ---- reading ---- */

/*
 * Describe the packet starting at rpos in <pkt>. Returns 1 when a header is available, 0 when
 * more bytes are needed, -1 on a framing error.
 */
static int
sbuf_parse_header(const struct sbuf *sb, struct sbuf_pkt *pkt)
{
	const uint8_t *p = sb->rbuf + sb->rpos;
	uint32_t have = sb->rend - sb->rpos;
	uint32_t hdr = sb->startup ? 4 : 5;
	uint32_t n;

	if (have < hdr)
		return 0;
	n = nk_get_be32(sb->startup ? p : p + 1);
	if (n < 4 || n > 0x7fffffffu)
		return -1;
	pkt->type = sb->startup ? 0 : p[0];
	pkt->len = sb->startup ? n : n + 1;
	pkt->data = p;
	pkt->avail = have < pkt->len ? have : pkt->len;
	return 1;
}

/* Apply the current forward/skip action to the buffered bytes it covers. */
static void
sbuf_apply_action(struct sbuf *sb)
{
	uint32_t have = sb->rend - sb->rpos;
	uint32_t n = have < sb->act_remain ? have : sb->act_remain;

	if (sb->act == SBUF_ACT_FORWARD && sb->dst != NULL) {
		if (sb->fwd_len > 0 && sb->fwd_start + sb->fwd_len != sb->rpos)
			sbuf_flush_batch(sb);
		if (sb->fwd_len == 0)
			sb->fwd_start = sb->rpos;
		sb->fwd_len += n;
	}
	sb->rpos += n;
	sb->act_remain -= n;
	if (sb->act_remain == 0)
		sb->act = SBUF_ACT_NONE;
}

/* The read side ended: report <ev> once, stop reading. */
static void
sbuf_read_end(struct sbuf *sb, enum sbuf_event ev, int err)
{
	sbuf_flush_batch(sb);
	sbuf_read_off(sb);
	sb->eof = true;
	sb->cb(sb, ev, NULL, err, sb->cb_arg);
}

/*
 * Act on everything buffered: one callback per packet start. Returns false when processing
 * must stop (paused by the callback, closed, framing error), true when more bytes are needed.
 */
static bool
sbuf_process(struct sbuf *sb)
{
	struct sbuf_pkt pkt;
	int rc;

	while (!sb->closed && !sb->paused && !sb->eof) {
		if (sb->act == SBUF_ACT_FORWARD || sb->act == SBUF_ACT_SKIP) {
			if (sb->rpos == sb->rend)
				return true;
			sbuf_apply_action(sb);
			continue;
		}
		rc = sbuf_parse_header(sb, &pkt);
		if (rc < 0) {
			sbuf_read_end(sb, SBUF_EV_BAD_PKT, 0);
			return false;
		}
		if (rc == 0)
			return true;
		if (sb->act == SBUF_ACT_HOLD) {
			if (pkt.avail < pkt.len)
				return true;
			sb->act = SBUF_ACT_NONE;
		}
		if (!sb->cb(sb, SBUF_EV_PKT, &pkt, 0, sb->cb_arg)) {
			sbuf_pause(sb);
			return false;
		}
		NK_ASSERT(sb->closed || sb->paused || sb->act != SBUF_ACT_NONE);
	}
	return false;
}

/* Make the read buffer ready for the next recv(): compact, grow for a hold, or shrink. */
static bool
sbuf_prepare_read(struct sbuf *sb)
{
	uint32_t used = sb->rend - sb->rpos;
	uint32_t want = sb->act == SBUF_ACT_HOLD ? sb->act_remain : 0;
	uint8_t *nb;

	if (used == 0) {
		sb->rpos = sb->rend = 0;
		if (sb->rcap > sb->opts.pkt_buf && want <= sb->opts.pkt_buf) {
			nb = realloc(sb->rbuf, sb->opts.pkt_buf);
			if (nb != NULL) {
				sb->rbuf = nb;
				sb->rcap = sb->opts.pkt_buf;
			}
		}
	} else if (sb->rpos > 0) {
		memmove(sb->rbuf, sb->rbuf + sb->rpos, used);
		sb->rpos = 0;
		sb->rend = used;
	}
	if (want > sb->rcap) {
		nb = realloc(sb->rbuf, want);
		if (nb == NULL)
			return false;
		sb->rbuf = nb;
		sb->rcap = want;
	}
	return true;
}

/* Read once into the free space. Reports EOF and errors itself. */
static enum sbuf_fill
sbuf_fill(struct sbuf *sb)
{
	uint32_t space;
	ssize_t n;

	if (!sbuf_prepare_read(sb)) {
		sbuf_read_end(sb, SBUF_EV_RECV_FAILED, ENOMEM);
		return SBUF_FILL_END;
	}
	space = sb->rcap - sb->rend;
	NK_ASSERT(space > 0);
	n = sb->io->recv(sb, sb->rbuf + sb->rend, space);
	if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return SBUF_FILL_AGAIN;
	if (n == -1) {
		sbuf_read_end(sb, SBUF_EV_RECV_FAILED, errno);
		return SBUF_FILL_END;
	}
	if (n == 0) {
		if (sb->rpos == sb->rend && sb->act == SBUF_ACT_NONE)
			sbuf_read_end(sb, SBUF_EV_EOF, 0);
		else
			sbuf_read_end(sb, SBUF_EV_RECV_FAILED, 0);
		return SBUF_FILL_END;
	}
	sb->rend += (uint32_t)n;
	return (uint32_t)n == space ? SBUF_FILL_FULL : SBUF_FILL_SHORT;
}

/* Backpressure: stop reading while the destination still has queued bytes. */
static bool
sbuf_must_wait(struct sbuf *sb)
{
	/* (a corked destination's queue is no backpressure until its socket is full) */
	if (sb->dst == NULL || sb->dst->wend == sb->dst->wpos ||
	    (sb->dst->cork != SBUF_CORK_OFF && !sb->dst->write_on))
		return false;
	sb->waiting = true;
	sbuf_read_off(sb);
	return true;
}

/*
 * Readable (or kicked): process, flush forwards, read; at most loopcnt reads. A kick on a
 * plain socket reads nothing (the level-triggered event reports waiting bytes; a speculative
 * recv() there mostly costs an EAGAIN). Paused: the event was left on (sbuf_pause); stop it
 * now that the socket has bytes for us.
 */
static void
sbuf_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct sbuf *sb = arg;
	unsigned reads = 0;
	enum sbuf_fill rc = SBUF_FILL_FULL;

	if (sb->paused) {
		sbuf_read_off(sb);
		return;
	}
	if (!(what & EV_READ) && sb->io == &sbuf_plain_table)
		rc = SBUF_FILL_SHORT;
	for (;;) {
		if (!sbuf_process(sb)) {
			sbuf_flush_batch(sb);
			return;
		}
		sbuf_flush_batch(sb);
		if (sb->closed || sbuf_must_wait(sb) || rc == SBUF_FILL_SHORT)
			return;
		if (sb->opts.loopcnt > 0 && reads++ >= sb->opts.loopcnt)
			return;
		rc = sbuf_fill(sb);
		if (rc == SBUF_FILL_AGAIN || rc == SBUF_FILL_END)
			return;
	}
}

/* ---- flow control, close ---- */

/*
 * Stop reading until sbuf_continue(). The read event stays added: a paused client usually
 * sends nothing until it is answered, so the event is only removed if the socket becomes
 * readable meanwhile (sbuf_read_cb), saving two epoll_ctl calls per pause.
 */
void
sbuf_pause(struct sbuf *sb)
{
	sb->paused = true;
}

/* Resume reading; what is buffered is processed from the loop. */
void
sbuf_continue(struct sbuf *sb)
{
	sb->paused = false;
	sbuf_kick(sb);
}

/* Close the socket after a last non-blocking flush; detach from every peer. */
void
sbuf_close(struct sbuf *sb)
{
	struct sbuf *src, *next;

	if (sb->closed)
		return;
	sb->closed = true;
	sbuf_flush_batch(sb);
	sbuf_unlink_dst(sb);
	if (sb->fd != -1 && !sb->connecting && sb->pending_err == 0)
		sbuf_flush_queue(sb);
	sbuf_read_off(sb);
	sbuf_write_off(sb);
	for (src = sb->srcs; src != NULL; src = next) {
		next = src->dst_next;
		src->dst = NULL;
		src->dst_next = NULL;
		src->fwd_len = 0;
		if (src->waiting) {
			src->waiting = false;
			sbuf_kick(src);
		}
	}
	sb->srcs = NULL;
	if (sb->fd != -1) {
		if (sb->io->shutdown != NULL)
			sb->io->shutdown(sb);
		close(sb->fd);
		sb->fd = -1;
	}
}

/* ---- state ---- */

/* Nothing buffered for reading and no packet half processed. */
bool
sbuf_is_empty(const struct sbuf *sb)
{
	return sb->rpos == sb->rend && sb->act == SBUF_ACT_NONE;
}

/* Bytes in the write queue. */
size_t
sbuf_queued(const struct sbuf *sb)
{
	return sb->wend - sb->wpos;
}

/* Buffered bytes not covered by the current forward/skip action. */
uint32_t
sbuf_unclaimed(const struct sbuf *sb)
{
	uint32_t have = sb->rend - sb->rpos;
	uint32_t claimed = 0;

	if (sb->act == SBUF_ACT_FORWARD || sb->act == SBUF_ACT_SKIP)
		claimed = sb->act_remain < have ? sb->act_remain : have;
	return have - claimed;
}

uint32_t
sbuf_lookahead(const struct sbuf *sb)
{
	return sb->rend - sb->rpos;
}

/* Schedule the read handler (the I/O layer holds bytes the socket does not show). */
void
sbuf_wake(struct sbuf *sb)
{
	sbuf_kick(sb);
}
