/*
 * check_sbuf.c - tests of the stream transport (src/net/sbuf.c) over real sockets:
 * socketpairs, a TCP listener on 127.0.0.1 and a unix socket, each with a private
 * event_base. Covers framing, forwarding (batched and streamed), hold / grow / max_pkt,
 * backpressure, loopcnt, EOF vs truncated packet, bad length, connect ok / refused /
 * timeout, close from inside the callback, and corked output.
 */
#include "neki/base.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "neki/sbuf.h"
#include "evloop.h"
#include "suites.h"

#define MAX_SEEN 64

/* What one test sbuf's callback saw and is told to do. */
struct tcase_state {
	struct sbuf sb;
	struct sbuf *fwd_to;		/* forward every packet here (NULL: skip) */
	bool hold_all;			/* hold every packet not whole */
	bool close_on_first;		/* sbuf_close() from inside the first callback */
	bool pause_on_type;		/* return false on packets of type pause_type */
	uint8_t pause_type;
	int n_pkt;
	uint8_t types[MAX_SEEN];
	uint32_t lens[MAX_SEEN];
	uint32_t avails[MAX_SEEN];
	int n_events[8];
	int last_err;
	bool hold_refused;
};

static bool
tc_cb(struct sbuf *sb, enum sbuf_event ev, const struct sbuf_pkt *pkt, int err, void *arg)
{
	struct tcase_state *t = arg;

	t->n_events[ev]++;
	if (ev != SBUF_EV_PKT) {
		t->last_err = err;
		return true;
	}
	if (t->close_on_first) {
		sbuf_close(sb);
		return false;
	}
	if (t->hold_all && pkt->avail < pkt->len) {
		if (!sbuf_hold(sb, pkt->len)) {
			t->hold_refused = true;
			sbuf_skip(sb, pkt->len);
		}
		return true;
	}
	if (t->pause_on_type && pkt->type == t->pause_type) {
		t->pause_on_type = false;
		return false;
	}
	if (t->n_pkt < MAX_SEEN) {
		t->types[t->n_pkt] = pkt->type;
		t->lens[t->n_pkt] = pkt->len;
		t->avails[t->n_pkt] = pkt->avail;
	}
	t->n_pkt++;
	if (t->fwd_to != NULL)
		sbuf_forward(sb, t->fwd_to, pkt->len);
	else
		sbuf_skip(sb, pkt->len);
	return true;
}

static struct event_base *base;

/* Run the loop until <done>(<arg>) or <secs> seconds (evloop.h). */
static bool
run_until(bool (*done)(void *), void *arg, double secs)
{
	return evloop_run_until(base, done, arg, secs);
}

static void
put_pkt(uint8_t *p, uint8_t type, uint32_t body)
{
	uint32_t n = body + 4;

	p[0] = type;
	p[1] = (uint8_t)(n >> 24);
	p[2] = (uint8_t)(n >> 16);
	p[3] = (uint8_t)(n >> 8);
	p[4] = (uint8_t)n;
	memset(p + 5, type, body);
}

static void
tc_setup(struct tcase_state *t, uint32_t pkt_buf)
{
	struct sbuf_opts o;

	memset(t, 0, sizeof(*t));
	sbuf_opts_default(&o);
	o.pkt_buf = pkt_buf;
	ck_assert(sbuf_init(&t->sb, base, tc_cb, t, &o));
}

static void
setup(void)
{
	base = event_base_new();
	ck_assert_ptr_nonnull(base);
}

static void
teardown(void)
{
	event_base_free(base);
	base = NULL;
}

static void
make_pair(int sv[2])
{
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
}

struct count_goal {
	struct tcase_state *t;
	int n_pkt;
};

static bool
got_pkts(void *arg)
{
	struct count_goal *g = arg;

	return g->t->n_pkt >= g->n_pkt;
}

static bool
got_end(void *arg)
{
	struct tcase_state *t = arg;

	return t->n_events[SBUF_EV_EOF] + t->n_events[SBUF_EV_RECV_FAILED] +
	       t->n_events[SBUF_EV_BAD_PKT] > 0;
}

START_TEST(test_framing_batch)
{
	struct tcase_state t;
	uint8_t buf[64];
	int sv[2];
	struct count_goal g = { &t, 3 };

	tc_setup(&t, 4096);
	make_pair(sv);
	ck_assert(sbuf_accept(&t.sb, sv[0], true));
	put_pkt(buf, 'Q', 10);
	put_pkt(buf + 15, 'S', 0);
	put_pkt(buf + 20, 'X', 3);
	ck_assert_int_eq(write(sv[1], buf, 28), 28);
	ck_assert(run_until(got_pkts, &g, 5));
	ck_assert_int_eq(t.types[0], 'Q');
	ck_assert_int_eq(t.lens[0], 15);
	ck_assert_int_eq(t.types[1], 'S');
	ck_assert_int_eq(t.lens[1], 5);
	ck_assert_int_eq(t.types[2], 'X');
	ck_assert_int_eq(t.avails[2], 8);
	close(sv[1]);
	ck_assert(run_until(got_end, &t, 5));
	ck_assert_int_eq(t.n_events[SBUF_EV_EOF], 1);
	sbuf_cleanup(&t.sb);
}
END_TEST

/* A header split over two writes, and startup framing. */
START_TEST(test_split_header_and_startup)
{
	struct tcase_state t;
	uint8_t buf[16] = { 0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f };
	int sv[2];
	struct count_goal g = { &t, 1 };

	tc_setup(&t, 4096);
	make_pair(sv);
	ck_assert(sbuf_accept(&t.sb, sv[0], true));
	sbuf_set_startup(&t.sb, true);
	ck_assert_int_eq(write(sv[1], buf, 2), 2);
	ck_assert(!run_until(got_pkts, &g, 0.05));
	ck_assert_int_eq(write(sv[1], buf + 2, 6), 6);
	ck_assert(run_until(got_pkts, &g, 5));
	ck_assert_int_eq(t.types[0], 0);
	ck_assert_int_eq(t.lens[0], 8);
	sbuf_set_startup(&t.sb, false);
	put_pkt(buf, 'p', 2);
	ck_assert_int_eq(write(sv[1], buf, 3), 3);
	g.n_pkt = 2;
	ck_assert(!run_until(got_pkts, &g, 0.05));
	ck_assert_int_eq(write(sv[1], buf + 3, 4), 4);
	ck_assert(run_until(got_pkts, &g, 5));
	ck_assert_int_eq(t.types[1], 'p');
	ck_assert_int_eq(t.lens[1], 7);
	close(sv[1]);
	sbuf_cleanup(&t.sb);
}
END_TEST

/* A packet bigger than pkt_buf is held whole (buffer grows); above max_pkt it is refused. */
START_TEST(test_hold_grow_and_max)
{
	struct tcase_state t;
	size_t big = 20000;
	uint8_t *buf = malloc(big + 5);
	int sv[2];
	struct count_goal g = { &t, 1 };

	tc_setup(&t, 256);
	t.hold_all = true;
	t.sb.opts.max_pkt = 30000;
	make_pair(sv);
	ck_assert(sbuf_accept(&t.sb, sv[0], true));
	put_pkt(buf, 'D', (uint32_t)big);
	ck_assert_int_eq(write(sv[1], buf, big + 5), (ssize_t)(big + 5));
	ck_assert(run_until(got_pkts, &g, 5));
	ck_assert_uint_eq(t.lens[0], big + 5);
	ck_assert_uint_eq(t.avails[0], big + 5);
	ck_assert(!t.hold_refused);
	/* now a packet over max_pkt: the hold is refused, the callback skips it */
	t.sb.opts.max_pkt = 1000;
	ck_assert_int_eq(write(sv[1], buf, big + 5), (ssize_t)(big + 5));
	put_pkt(buf, 'Z', 1);
	ck_assert_int_eq(write(sv[1], buf, 6), 6);
	g.n_pkt = 2;
	ck_assert(run_until(got_pkts, &g, 5));
	ck_assert(t.hold_refused);
	ck_assert_int_eq(t.types[1], 'Z');
	ck_assert_uint_le(t.sb.rcap, 256);	/* shrunk back after the big packet */
	close(sv[1]);
	sbuf_cleanup(&t.sb);
	free(buf);
}
END_TEST

/* sbuf_rewrite: once per packet, also when the packet is offered again after a pause. */
struct rw_state {
	int calls, got, refused;
	uint8_t seen[4];		/* the body's first byte of each packet consumed */
	int n;
	bool paused;
	bool resumed;			/* sbuf_continue() was called: wait for both packets */
};

static bool
rw_cb(struct sbuf *sb, enum sbuf_event ev, const struct sbuf_pkt *pkt, int err, void *arg)
{
	struct rw_state *t = arg;
	uint8_t *m;

	(void)err;
	if (ev != SBUF_EV_PKT)
		return true;
	t->calls++;
	m = sbuf_rewrite(sb, pkt);
	if (m != NULL) {
		t->got++;
		m[5] = (uint8_t)(m[5] + 1);	/* in place, the length kept */
	} else {
		t->refused++;
	}
	if (!t->paused) {		/* the first packet: offered again after a pause */
		t->paused = true;
		return false;
	}
	if (t->n < 4)
		t->seen[t->n++] = pkt->data[5];
	sbuf_skip(sb, pkt->len);
	return true;
}

static bool
rw_done(void *arg)
{
	const struct rw_state *t = arg;

	return t->resumed ? t->n >= 2 : t->paused;
}

START_TEST(test_rewrite_once)
{
	struct rw_state t = { 0 };
	struct sbuf sb;
	struct sbuf_opts o;
	uint8_t buf[12];
	int sv[2];

	sbuf_opts_default(&o);
	ck_assert(sbuf_init(&sb, base, rw_cb, &t, &o));
	make_pair(sv);
	ck_assert(sbuf_accept(&sb, sv[0], true));
	put_pkt(buf, 'T', 1);
	put_pkt(buf + 6, 'T', 1);
	ck_assert_int_eq(write(sv[1], buf, 12), 12);
	ck_assert(run_until(rw_done, &t, 5));	/* paused on the first */
	t.resumed = true;
	sbuf_continue(&sb);
	ck_assert(run_until(rw_done, &t, 5));
	ck_assert_int_eq(t.got, 2);		/* each packet rewritten once */
	ck_assert_int_eq(t.refused, 1);		/* the first, offered again */
	ck_assert_int_eq(t.seen[0], 'T' + 1);
	ck_assert_int_eq(t.seen[1], 'T' + 1);
	close(sv[1]);
	sbuf_cleanup(&sb);
}
END_TEST

START_TEST(test_truncated_and_bad)
{
	struct tcase_state t;
	uint8_t buf[16];
	int sv[2];

	tc_setup(&t, 4096);
	t.hold_all = true;
	make_pair(sv);
	ck_assert(sbuf_accept(&t.sb, sv[0], true));
	put_pkt(buf, 'Q', 10);
	ck_assert_int_eq(write(sv[1], buf, 8), 8);
	close(sv[1]);
	ck_assert(run_until(got_end, &t, 5));
	ck_assert_int_eq(t.n_events[SBUF_EV_RECV_FAILED], 1);
	ck_assert_int_eq(t.n_events[SBUF_EV_EOF], 0);
	sbuf_cleanup(&t.sb);

	tc_setup(&t, 4096);
	make_pair(sv);
	ck_assert(sbuf_accept(&t.sb, sv[0], true));
	memcpy(buf, "Q\0\0\0\3", 5);
	ck_assert_int_eq(write(sv[1], buf, 5), 5);
	ck_assert(run_until(got_end, &t, 5));
	ck_assert_int_eq(t.n_events[SBUF_EV_BAD_PKT], 1);
	ck_assert_int_eq(t.n_pkt, 0);
	close(sv[1]);
	sbuf_cleanup(&t.sb);
}
END_TEST

/* Read everything available on <fd> into <out> (non-blocking); returns bytes read. */
static size_t
drain_fd(int fd, uint8_t *out, size_t cap)
{
	size_t got = 0;
	ssize_t n;

	while (got < cap && (n = recv(fd, out + got, cap - got, MSG_DONTWAIT)) > 0)
		got += (size_t)n;
	return got;
}

struct fwd_goal {
	int fd;
	uint8_t *out;
	size_t got;
	size_t want;
};

static bool
fwd_done(void *arg)
{
	struct fwd_goal *g = arg;

	g->got += drain_fd(g->fd, g->out + g->got, g->want - g->got);
	return g->got >= g->want;
}

/*
 * Forward a mixed stream (small packets + one 3 MB packet) from A to B while B's peer reads
 * late: A must stop reading (backpressure), then everything arrives in order, byte-exact.
 */
START_TEST(test_forward_stream_backpressure)
{
	struct tcase_state a, b;
	int in[2], out[2];
	size_t big = 3u << 20, total = 15 + (big + 5) + 6;
	uint8_t *src = malloc(total), *dst = malloc(total);
	struct fwd_goal g = { 0, dst, 0, total };
	size_t off = 0;
	ssize_t n;
	int fl;

	tc_setup(&a, 4096);
	tc_setup(&b, 4096);
	a.fwd_to = &b.sb;
	make_pair(in);
	make_pair(out);
	ck_assert(sbuf_accept(&a.sb, in[0], true));
	ck_assert(sbuf_accept(&b.sb, out[0], true));
	put_pkt(src, 'T', 10);
	put_pkt(src + 15, 'D', (uint32_t)big);
	for (size_t i = 0; i < big; i++)
		src[20 + i] = (uint8_t)(i * 7);
	put_pkt(src + 15 + big + 5, 'C', 1);
	fl = fcntl(in[1], F_GETFL);
	fcntl(in[1], F_SETFL, fl | O_NONBLOCK);
	/* write as much as the socket takes, spinning the loop without reading `out` */
	for (int i = 0; i < 2000 && off < total; i++) {
		n = write(in[1], src + off, total - off);
		if (n > 0)
			off += (size_t)n;
		event_base_loop(base, EVLOOP_NONBLOCK);
	}
	ck_assert(a.sb.waiting);	/* A stopped reading: B's queue is not empty */
	ck_assert_uint_gt(sbuf_queued(&b.sb), 0);
	ck_assert_uint_lt(sbuf_queued(&b.sb), 1u << 20);
	g.fd = out[1];
	while (off < total) {
		n = write(in[1], src + off, total - off);
		if (n > 0)
			off += (size_t)n;
		fwd_done(&g);
		event_base_loop(base, EVLOOP_NONBLOCK);
	}
	ck_assert(run_until(fwd_done, &g, 10));
	ck_assert_uint_eq(g.got, total);
	ck_assert(memcmp(src, dst, total) == 0);
	ck_assert_int_eq(a.n_pkt, 3);
	close(in[1]);
	close(out[1]);
	sbuf_cleanup(&a.sb);
	sbuf_cleanup(&b.sb);
	free(src);
	free(dst);
}
END_TEST

/* sbuf_send() after forwarded bytes keeps their order; closing B drops A's forward. */
START_TEST(test_send_order_and_dst_close)
{
	struct tcase_state a, b;
	int in[2], out[2];
	uint8_t buf[64], got[64];
	struct count_goal g = { &a, 1 };
	struct fwd_goal fg = { 0, got, 0, 17 };

	tc_setup(&a, 4096);
	tc_setup(&b, 4096);
	a.fwd_to = &b.sb;
	make_pair(in);
	make_pair(out);
	ck_assert(sbuf_accept(&a.sb, in[0], true));
	ck_assert(sbuf_accept(&b.sb, out[0], true));
	put_pkt(buf, 'A', 7);
	ck_assert_int_eq(write(in[1], buf, 12), 12);
	ck_assert(run_until(got_pkts, &g, 5));
	put_pkt(buf, 'Z', 0);
	ck_assert(sbuf_send(&b.sb, buf, 5));
	fg.fd = out[1];
	ck_assert(run_until(fwd_done, &fg, 5));
	ck_assert_int_eq(got[0], 'A');
	ck_assert_int_eq(got[12], 'Z');
	/* B closes: A keeps working and drops what it would forward */
	sbuf_close(&b.sb);
	ck_assert(!sbuf_send(&b.sb, buf, 5));
	ck_assert_ptr_null(a.sb.dst);
	put_pkt(buf, 'B', 1);
	ck_assert_int_eq(write(in[1], buf, 6), 6);
	g.n_pkt = 2;
	ck_assert(run_until(got_pkts, &g, 5));
	close(in[1]);
	close(out[1]);
	sbuf_cleanup(&a.sb);
	sbuf_cleanup(&b.sb);
}
END_TEST

/*
 * Corked output: forwarded packets and sbuf_send() bytes stay queued, in order, until
 * sbuf_flush() (the source keeps reading meanwhile); 8 kB queued are written at once; a
 * big message alone goes out as it is; uncorking flushes; FWD mode holds sent bytes until
 * the next forwarded ones.
 */
START_TEST(test_corked_output)
{
	struct tcase_state a, b;
	int in[2], out[2];
	static uint8_t buf[20000], got[20000];
	struct count_goal g = { &a, 2 };
	struct fwd_goal fg = { 0, got, 0, 0 };

	tc_setup(&a, 4096);
	tc_setup(&b, 4096);
	a.fwd_to = &b.sb;
	make_pair(in);
	make_pair(out);
	ck_assert(sbuf_accept(&a.sb, in[0], true));
	ck_assert(sbuf_accept(&b.sb, out[0], true));
	sbuf_set_cork(&b.sb, SBUF_CORK_ON);
	put_pkt(buf, 'A', 7);
	ck_assert_int_eq(write(in[1], buf, 12), 12);
	g.n_pkt = 1;
	ck_assert(run_until(got_pkts, &g, 5));
	put_pkt(buf, 'B', 3);		/* read although B holds A's packet */
	ck_assert_int_eq(write(in[1], buf, 8), 8);
	g.n_pkt = 2;
	ck_assert(run_until(got_pkts, &g, 5));
	put_pkt(buf, 'Z', 1);
	ck_assert(sbuf_send(&b.sb, buf, 6));
	ck_assert_uint_eq(sbuf_queued(&b.sb), 26);
	ck_assert_uint_eq(drain_fd(out[1], got, sizeof(got)), 0);
	sbuf_flush(&b.sb);
	ck_assert_uint_eq(sbuf_queued(&b.sb), 0);
	ck_assert_uint_eq(drain_fd(out[1], got, sizeof(got)), 26);
	ck_assert(got[0] == 'A' && got[12] == 'B' && got[20] == 'Z');
	/* 8 kB queued: written without a flush */
	put_pkt(buf, 'D', 5000);
	ck_assert(sbuf_send(&b.sb, buf, 5005));
	ck_assert_uint_eq(sbuf_queued(&b.sb), 5005);
	ck_assert(sbuf_send(&b.sb, buf, 5005));
	fg.fd = out[1];
	fg.want = 10010;
	ck_assert(run_until(fwd_done, &fg, 5));
	/* a big message alone is not copied into the queue */
	put_pkt(buf, 'E', 19000);
	ck_assert(sbuf_send(&b.sb, buf, 19005));
	fg.got = 0;
	fg.want = 19005;
	ck_assert(run_until(fwd_done, &fg, 5));
	ck_assert_int_eq(got[0], 'E');
	/* uncorking writes what waits */
	put_pkt(buf, 'F', 0);
	ck_assert(sbuf_send(&b.sb, buf, 5));
	ck_assert_uint_eq(sbuf_queued(&b.sb), 5);
	sbuf_set_cork(&b.sb, SBUF_CORK_OFF);
	ck_assert_uint_eq(drain_fd(out[1], got, sizeof(got)), 5);
	ck_assert(sbuf_send(&b.sb, buf, 5));
	ck_assert_uint_eq(sbuf_queued(&b.sb), 0);
	ck_assert_uint_eq(drain_fd(out[1], got, sizeof(got)), 5);
	/* FWD: a sent message waits for the next forwarded bytes and leaves with them */
	sbuf_set_cork(&b.sb, SBUF_CORK_FWD);
	put_pkt(buf, '2', 0);
	ck_assert(sbuf_send(&b.sb, buf, 5));
	ck_assert_uint_eq(sbuf_queued(&b.sb), 5);
	ck_assert_uint_eq(drain_fd(out[1], got, sizeof(got)), 0);
	put_pkt(buf, 'T', 2);
	ck_assert_int_eq(write(in[1], buf, 7), 7);
	g.n_pkt = 3;
	ck_assert(run_until(got_pkts, &g, 5));
	ck_assert_uint_eq(sbuf_queued(&b.sb), 0);
	ck_assert_uint_eq(drain_fd(out[1], got, sizeof(got)), 12);
	ck_assert(got[0] == '2' && got[5] == 'T');
	put_pkt(buf, 'D', 1);		/* nothing queued: forwarded at once */
	ck_assert_int_eq(write(in[1], buf, 6), 6);
	g.n_pkt = 4;
	ck_assert(run_until(got_pkts, &g, 5));
	fg.got = 0;
	fg.want = 6;
	ck_assert(run_until(fwd_done, &fg, 5));
	ck_assert_int_eq(got[0], 'D');
	close(in[1]);
	close(out[1]);
	sbuf_cleanup(&a.sb);
	sbuf_cleanup(&b.sb);
}
END_TEST

/* Pausing in the callback re-offers the same packet after sbuf_continue(). */
START_TEST(test_pause_continue)
{
	struct tcase_state t;
	uint8_t buf[32];
	int sv[2];
	struct count_goal g = { &t, 2 };

	tc_setup(&t, 4096);
	t.pause_on_type = true;
	t.pause_type = 'P';
	make_pair(sv);
	ck_assert(sbuf_accept(&t.sb, sv[0], true));
	put_pkt(buf, 'P', 1);
	put_pkt(buf + 6, 'Q', 1);
	ck_assert_int_eq(write(sv[1], buf, 12), 12);
	ck_assert(!run_until(got_pkts, &g, 0.05));
	ck_assert_int_eq(t.n_pkt, 0);
	ck_assert(t.sb.paused);
	sbuf_continue(&t.sb);
	ck_assert(run_until(got_pkts, &g, 5));
	ck_assert_int_eq(t.types[0], 'P');
	ck_assert_int_eq(t.types[1], 'Q');
	close(sv[1]);
	sbuf_cleanup(&t.sb);
}
END_TEST

/*
 * A pause leaves the read event added while the peer is quiet (no epoll_ctl per pause); the
 * event is removed when bytes arrive during the pause, and nothing is read until continue.
 */
START_TEST(test_pause_lazy_event)
{
	struct tcase_state t;
	uint8_t buf[32];
	int sv[2];
	struct count_goal g = { &t, 1 };

	tc_setup(&t, 4096);
	t.pause_on_type = true;
	t.pause_type = 'P';
	make_pair(sv);
	ck_assert(sbuf_accept(&t.sb, sv[0], true));
	put_pkt(buf, 'P', 1);
	ck_assert_int_eq(write(sv[1], buf, 6), 6);
	ck_assert(!run_until(got_pkts, &g, 0.05));
	ck_assert(t.sb.paused);
	ck_assert(t.sb.read_on);	/* quiet peer: still added */
	sbuf_continue(&t.sb);
	ck_assert(run_until(got_pkts, &g, 5));
	ck_assert(t.sb.read_on);

	t.pause_on_type = true;
	t.pause_type = 'R';
	put_pkt(buf, 'R', 1);
	ck_assert_int_eq(write(sv[1], buf, 6), 6);
	g.n_pkt = 2;
	ck_assert(!run_until(got_pkts, &g, 0.05));
	ck_assert(t.sb.paused && t.sb.read_on);
	put_pkt(buf, 'S', 1);	/* the peer talks during the pause */
	ck_assert_int_eq(write(sv[1], buf, 6), 6);
	ck_assert(!run_until(got_pkts, &g, 0.05));
	ck_assert(!t.sb.read_on);
	ck_assert_int_eq(t.n_pkt, 1);
	sbuf_continue(&t.sb);
	g.n_pkt = 3;
	ck_assert(run_until(got_pkts, &g, 5));
	ck_assert_int_eq(t.types[1], 'R');
	ck_assert_int_eq(t.types[2], 'S');
	close(sv[1]);
	sbuf_cleanup(&t.sb);
}
END_TEST

/*
 * sbuf_continue() with nothing buffered (the last packet consumed, then paused by its
 * owner) does not run the handler from the loop: the socket's readiness does, so the next
 * packet still arrives, and one buffered during the pause is offered at once.
 */
START_TEST(test_continue_nothing_buffered)
{
	struct tcase_state t;
	uint8_t buf[32];
	int sv[2];
	struct count_goal g = { &t, 1 };

	tc_setup(&t, 4096);
	make_pair(sv);
	ck_assert(sbuf_accept(&t.sb, sv[0], true));
	put_pkt(buf, 'P', 1);
	ck_assert_int_eq(write(sv[1], buf, 6), 6);
	ck_assert(run_until(got_pkts, &g, 5));
	sbuf_pause(&t.sb);		/* as the route does while an exec runs */
	sbuf_continue(&t.sb);		/* nothing buffered: only the read event stays added */
	ck_assert(t.sb.read_on && t.sb.rpos == t.sb.rend);
	put_pkt(buf, 'Q', 1);
	ck_assert_int_eq(write(sv[1], buf, 6), 6);
	g.n_pkt = 2;
	ck_assert(run_until(got_pkts, &g, 5));
	ck_assert_int_eq(t.types[1], 'Q');
	close(sv[1]);
	sbuf_cleanup(&t.sb);
}
END_TEST

static int recv_calls;

static ssize_t
counting_recv(struct sbuf *sb, void *buf, size_t len)
{
	recv_calls++;
	return sbuf_plain_io()->recv(sb, buf, len);
}

/* sbuf_loopcnt bounds the reads per wakeup; the I/O goes through the ops table. */
START_TEST(test_loopcnt_and_io_ops)
{
	struct tcase_state t;
	struct sbuf_io_ops ops = *sbuf_plain_io();
	uint8_t buf[4096];
	int sv[2];

	ops.recv = counting_recv;
	tc_setup(&t, 256);
	t.sb.opts.loopcnt = 2;
	sbuf_set_io(&t.sb, &ops, NULL);
	make_pair(sv);
	for (size_t i = 0; i + 64 <= sizeof(buf); i += 64)
		put_pkt(buf + i, 'd', 59);
	ck_assert_int_eq(write(sv[1], buf, sizeof(buf)), (ssize_t)sizeof(buf));
	recv_calls = 0;
	ck_assert(sbuf_accept(&t.sb, sv[0], true));
	event_base_loop(base, EVLOOP_ONCE);
	ck_assert_int_eq(recv_calls, 2);	/* loopcnt reads per wakeup */
	ck_assert_int_eq(t.n_pkt, 2 * 256 / 64);
	close(sv[1]);
	sbuf_cleanup(&t.sb);
}
END_TEST

START_TEST(test_close_inside_callback)
{
	struct tcase_state t;
	uint8_t buf[16];
	int sv[2];

	tc_setup(&t, 4096);
	t.close_on_first = true;
	make_pair(sv);
	ck_assert(sbuf_accept(&t.sb, sv[0], true));
	put_pkt(buf, 'Q', 1);
	put_pkt(buf + 6, 'Q', 1);
	ck_assert_int_eq(write(sv[1], buf, 12), 12);
	for (int i = 0; i < 20 && !sbuf_is_closed(&t.sb); i++)
		event_base_loop(base, EVLOOP_ONCE);
	ck_assert(sbuf_is_closed(&t.sb));
	ck_assert_int_eq(t.n_events[SBUF_EV_PKT], 1);
	ck_assert_int_eq(sbuf_fd(&t.sb), -1);
	event_base_loop(base, EVLOOP_NONBLOCK);
	sbuf_cleanup(&t.sb);
	close(sv[1]);
}
END_TEST

static bool
connect_result(void *arg)
{
	struct tcase_state *t = arg;

	return t->n_events[SBUF_EV_CONNECT_OK] + t->n_events[SBUF_EV_CONNECT_FAILED] > 0;
}

START_TEST(test_connect_tcp_and_refused)
{
	struct tcase_state t;
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	int lfd = socket(AF_INET, SOCK_STREAM, 0), cfd;
	uint8_t buf[16];

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	ck_assert_int_eq(listen(lfd, 4), 0);
	ck_assert_int_eq(getsockname(lfd, (struct sockaddr *)&sin, &len), 0);

	tc_setup(&t, 4096);
	ck_assert(sbuf_connect(&t.sb, (struct sockaddr *)&sin, sizeof(sin), 5));
	put_pkt(buf, 'X', 0);
	ck_assert(sbuf_send(&t.sb, buf, 5));	/* queued until connected */
	ck_assert(run_until(connect_result, &t, 5));
	ck_assert_int_eq(t.n_events[SBUF_EV_CONNECT_OK], 1);
	cfd = accept(lfd, NULL, NULL);
	ck_assert_int_ge(cfd, 0);
	{
		struct fwd_goal fg = { cfd, buf + 5, 0, 5 };

		ck_assert(run_until(fwd_done, &fg, 5));
		ck_assert_int_eq(buf[5], 'X');
	}
	close(cfd);
	sbuf_cleanup(&t.sb);
	close(lfd);	/* now nobody listens on that port */

	tc_setup(&t, 4096);
	ck_assert(sbuf_connect(&t.sb, (struct sockaddr *)&sin, sizeof(sin), 5));
	ck_assert(run_until(connect_result, &t, 5));
	ck_assert_int_eq(t.n_events[SBUF_EV_CONNECT_FAILED], 1);
	ck_assert_int_eq(t.last_err, ECONNREFUSED);
	sbuf_cleanup(&t.sb);
}
END_TEST

START_TEST(test_connect_unix_and_timeout)
{
	struct tcase_state t;
	struct sockaddr_un sun;
	char dir[] = "/tmp/nk_sbuf_XXXXXX";
	int lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_in sin;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s/.s.PGSQL.5432", dir);
	ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	ck_assert_int_eq(listen(lfd, 4), 0);
	tc_setup(&t, 4096);
	ck_assert(sbuf_connect(&t.sb, (struct sockaddr *)&sun, sizeof(sun), 5));
	ck_assert(run_until(connect_result, &t, 5));
	ck_assert_int_eq(t.n_events[SBUF_EV_CONNECT_OK], 1);
	ck_assert(t.sb.is_unix);
	sbuf_cleanup(&t.sb);
	close(lfd);
	unlink(sun.sun_path);
	rmdir(dir);

	/*
	 * A listener whose accept queue is full drops SYNs (Linux, tcp_abort_on_overflow=0):
	 * the connect hangs and server_connect_timeout must fire.
	 */
	{
		socklen_t len = sizeof(sin);
		int fill[4];

		lfd = socket(AF_INET, SOCK_STREAM, 0);
		memset(&sin, 0, sizeof(sin));
		sin.sin_family = AF_INET;
		sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sin, sizeof(sin)), 0);
		ck_assert_int_eq(listen(lfd, 0), 0);
		ck_assert_int_eq(getsockname(lfd, (struct sockaddr *)&sin, &len), 0);
		for (int i = 0; i < 4; i++) {
			fill[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
			(void)connect(fill[i], (struct sockaddr *)&sin, sizeof(sin));
		}
		tc_setup(&t, 4096);
		ck_assert(sbuf_connect(&t.sb, (struct sockaddr *)&sin, sizeof(sin), 0.3));
		ck_assert(run_until(connect_result, &t, 5));
		ck_assert_int_eq(t.n_events[SBUF_EV_CONNECT_FAILED], 1);
		ck_assert_int_eq(t.last_err, ETIMEDOUT);
		for (int i = 0; i < 4; i++)
			close(fill[i]);
		close(lfd);
	}
	sbuf_cleanup(&t.sb);
}
END_TEST

Suite *
sbuf_suite(void)
{
	Suite *s = suite_create("sbuf");
	TCase *tc = tcase_create("sbuf");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_framing_batch);
	tcase_add_test(tc, test_split_header_and_startup);
	tcase_add_test(tc, test_hold_grow_and_max);
	tcase_add_test(tc, test_rewrite_once);
	tcase_add_test(tc, test_truncated_and_bad);
	tcase_add_test(tc, test_forward_stream_backpressure);
	tcase_add_test(tc, test_send_order_and_dst_close);
	tcase_add_test(tc, test_corked_output);
	tcase_add_test(tc, test_pause_continue);
	tcase_add_test(tc, test_pause_lazy_event);
	tcase_add_test(tc, test_continue_nothing_buffered);
	tcase_add_test(tc, test_loopcnt_and_io_ops);
	tcase_add_test(tc, test_close_inside_callback);
	tcase_add_test(tc, test_connect_tcp_and_refused);
	tcase_add_test(tc, test_connect_unix_and_timeout);
	suite_add_tcase(s, tc);
	return s;
}
