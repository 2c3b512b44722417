/*
 * prelogin.c - what a worker does with a client before the session
 * layer exists: read the startup packet, answer SSLRequest and GSSENCRequest with
 * 'N', drop CancelRequest, and answer a StartupMessage with one FATAL ErrorResponse,
 * then close. The client counts as connected from accept to close (so SIGTERM waits
 * for it) and is closed after client_login_timeout if it sends nothing.
 *
 * The client session state machine of the pooler replaces this file.
 *
 * States (struct prelogin.state), written once here:
 *   PL_ST_READ_STARTUP  read event armed, login timer armed; reading 8 header bytes,
 *                       then discarding the rest of the packet; acts once it is whole
 *     --SSLRequest/GSSENCRequest--> PL_ST_SEND_REFUSAL
 *     --StartupMessage-->           PL_ST_SEND_ERROR
 *     --CancelRequest, EOF, bad length, timeout--> PL_ST_CLOSED
 *   PL_ST_SEND_REFUSAL  [transient] write event armed until 'N' is out
 *     --sent--> PL_ST_READ_STARTUP
 *   PL_ST_SEND_ERROR    [transient] write event armed until the error is out
 *     --sent or write error--> PL_ST_CLOSED
 *   PL_ST_CLOSED        no event armed, fd closed; on the reap list until freed
 */
#include "neki/base.h"

#include "neki/worker.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "neki/config.h"
#include "neki/error.h"
#include "neki/log.h"
#include "neki/pktbuf.h"
#include "neki/proto_types.h"


enum prelogin_state {
	PL_ST_READ_STARTUP = 0,
	PL_ST_SEND_REFUSAL = 1,
	PL_ST_SEND_ERROR = 2,
	PL_ST_CLOSED = 3,
};

struct prelogin {
	int fd;				/* owned; -1 once closed */
	enum prelogin_state state;
	struct event *rd;		/* owned: readable */
	struct event *wr;		/* owned: writable, armed while out[] is pending */
	struct event *timer;		/* owned: client_login_timeout */
	uint8_t head[8];		/* length + code of the packet being read */
	size_t head_len;		/* bytes of head[] filled */
	size_t skip;			/* bytes of the packet body still to discard */
	uint32_t code;			/* request code of the packet being read */
	uint8_t out[512];		/* pending reply */
	size_t out_len, out_off;
	struct prelogin *next_dead;	/* reap list link (weak: cleared by reap_cb) */
};

static struct prelogin *dead_list;	/* closed objects, freed by reap_cb */
static struct event *reap_ev;		/* owned; created on first use */

static const char *
prelogin_state_str(enum prelogin_state st)
{
	switch (st) {
	case PL_ST_READ_STARTUP: return "read-startup";
	case PL_ST_SEND_REFUSAL: return "send-refusal";
	case PL_ST_SEND_ERROR: return "send-error";
	case PL_ST_CLOSED: return "closed";
	}
	return "unknown";
}

/* Free every closed object (runs outside their callbacks). */
static void
reap_cb(evutil_socket_t fd, short what, void *arg)
{
	while (dead_list != NULL) {
		struct prelogin *pl = dead_list;

		dead_list = pl->next_dead;
		event_free(pl->rd);
		event_free(pl->wr);
		event_free(pl->timer);
		free(pl);
	}
}

/* The only writer of pl->state: arms the events the new state needs. */
static void
prelogin_set_state(struct prelogin *pl, enum prelogin_state st)
{
	log_noise("prelogin fd %d: %s -> %s", pl->fd, prelogin_state_str(pl->state),
		  prelogin_state_str(st));
	pl->state = st;
	switch (st) {
	case PL_ST_READ_STARTUP:
		event_del(pl->wr);
		event_add(pl->rd, NULL);
		break;
	case PL_ST_SEND_REFUSAL:
	case PL_ST_SEND_ERROR:
		event_del(pl->rd);
		event_add(pl->wr, NULL);
		break;
	case PL_ST_CLOSED:
		event_del(pl->rd);
		event_del(pl->wr);
		event_del(pl->timer);
		close(pl->fd);
		pl->fd = -1;
		pl->next_dead = dead_list;
		dead_list = pl;
		event_active(reap_ev, EV_TIMEOUT, 0);
		child_client_closed();
		break;
	}
}

/* The answer to a StartupMessage until the session layer exists. */
static void
queue_startup_refusal(struct prelogin *pl)
{
	struct nk_error err;
	struct pktbuf pb;

	nk_error_set(&err, "0A000", "neki cannot serve client sessions yet");
	err.severity = NK_SEV_FATAL;
	nk_error_detail(&err, "This neki build runs the process model but has no connection pooler.");
	pktbuf_init_fixed(&pb, pl->out, sizeof(pl->out));
	pktbuf_write_error(&pb, &err);
	NK_ASSERT(!pktbuf_failed(&pb));
	pl->out_len = pb.len;
	pl->out_off = 0;
}

/* A whole packet has been read (its body discarded): decide what happens next. */
static void
on_packet(struct prelogin *pl)
{
	uint32_t code = pl->code;

	pl->code = 0;
	if (code == PROTO_CANCEL_CODE) {
		prelogin_set_state(pl, PL_ST_CLOSED);
	} else if (code == PROTO_SSL_CODE || code == PROTO_GSSENC_CODE) {
		struct pktbuf pb;

		/* the one-byte answer of a server without SSL or GSSAPI encryption */
		pktbuf_init_fixed(&pb, pl->out, sizeof(pl->out));
		pktbuf_put_byte(&pb, 'N');
		pl->out_len = pb.len;
		pl->out_off = 0;
		prelogin_set_state(pl, PL_ST_SEND_REFUSAL);
	} else {
		queue_startup_refusal(pl);
		prelogin_set_state(pl, PL_ST_SEND_ERROR);
	}
}

/* head[] is full: check the length, remember the code, discard the body next. */
static void
on_packet_header(struct prelogin *pl)
{
	uint32_t len, code;

	memcpy(&len, pl->head, 4);
	memcpy(&code, pl->head + 4, 4);
	len = ntohl(len);
	pl->head_len = 0;
	if (len < 8 || len > PROTO_MAX_STARTUP_LEN) {
		prelogin_set_state(pl, PL_ST_CLOSED);
		return;
	}
	pl->code = ntohl(code);
	pl->skip = len - 8;
	if (pl->skip == 0)
		on_packet(pl);
}

/*
 * Read what is there: header bytes into head[], body bytes discarded. The reply
 * waits until the whole packet is read: closing a socket with unread input resets
 * the connection, and the client might lose the error.
 */
static void
on_read_startup(struct prelogin *pl)
{
	uint8_t buf[1024];

	while (pl->state == PL_ST_READ_STARTUP) {
		size_t want = pl->skip > 0 ? (pl->skip < sizeof(buf) ? pl->skip : sizeof(buf))
					   : sizeof(pl->head) - pl->head_len;
		ssize_t n = read(pl->fd, pl->skip > 0 ? buf : pl->head + pl->head_len, want);

		if (n == -1 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0) {
			prelogin_set_state(pl, PL_ST_CLOSED);
			return;
		}
		if (pl->skip > 0) {
			pl->skip -= (size_t)n;
			if (pl->skip == 0)
				on_packet(pl);
		} else if ((pl->head_len += (size_t)n) == sizeof(pl->head)) {
			on_packet_header(pl);
		}
	}
}

/* Write the pending reply; move on when it is out. */
static void
on_send(struct prelogin *pl)
{
	while (pl->out_off < pl->out_len) {
		ssize_t n = write(pl->fd, pl->out + pl->out_off, pl->out_len - pl->out_off);

		if (n == -1 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n == -1) {
			prelogin_set_state(pl, PL_ST_CLOSED);
			return;
		}
		pl->out_off += (size_t)n;
	}
	if (pl->state == PL_ST_SEND_REFUSAL)
		prelogin_set_state(pl, PL_ST_READ_STARTUP);
	else
		prelogin_set_state(pl, PL_ST_CLOSED);
}

static void
io_cb(evutil_socket_t fd, short what, void *arg)
{
	struct prelogin *pl = arg;

	switch (pl->state) {
	case PL_ST_READ_STARTUP:
		on_read_startup(pl);
		break;
	case PL_ST_SEND_REFUSAL:
	case PL_ST_SEND_ERROR:
		on_send(pl);
		break;
	case PL_ST_CLOSED:
		break;
	}
}

static void
timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct prelogin *pl = arg;

	log_debug("closing client fd %d: client_login_timeout", pl->fd);
	if (pl->state != PL_ST_CLOSED)
		prelogin_set_state(pl, PL_ST_CLOSED);
}

/* Arm the login timer from client_login_timeout (0 = none). */
static void
arm_login_timer(struct prelogin *pl)
{
	const struct cfg *c = cfg_current();
	double t = c ? c->client_login_timeout : 60.0;
	struct timeval tv;

	if (t <= 0)
		return;
	tv.tv_sec = (time_t)t;
	tv.tv_usec = (suseconds_t)((t - (double)tv.tv_sec) * 1e6);
	event_add(pl->timer, &tv);
}

void
prelogin_accept(int fd, const struct listener *l)
{
	struct event_base *base = child_base();
	struct prelogin *pl = calloc(1, sizeof(*pl));

	if (reap_ev == NULL)
		reap_ev = event_new(base, -1, 0, reap_cb, NULL);
	if (pl == NULL || reap_ev == NULL)
		goto fail;
	pl->fd = fd;
	pl->rd = event_new(base, fd, EV_READ | EV_PERSIST, io_cb, pl);
	pl->wr = event_new(base, fd, EV_WRITE | EV_PERSIST, io_cb, pl);
	pl->timer = evtimer_new(base, timeout_cb, pl);
	if (pl->rd == NULL || pl->wr == NULL || pl->timer == NULL)
		goto fail;
	child_client_opened();
	arm_login_timer(pl);
	prelogin_set_state(pl, PL_ST_READ_STARTUP);
	return;
fail:
	log_warn("out of memory accepting a client on %s", l->name);
	if (pl != NULL) {
		if (pl->rd)
			event_free(pl->rd);
		if (pl->wr)
			event_free(pl->wr);
		if (pl->timer)
			event_free(pl->timer);
		free(pl);
	}
	close(fd);
}
