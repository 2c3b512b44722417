/*
 * check_tls.c - tests of net/tls.c over real TCP sockets on 127.0.0.1 with a private
 * event_base. A test CA, server certificates (SAN localhost + 127.0.0.1) and a client
 * certificate (CN alice) are made with the `openssl` command in a temporary directory.
 * "acc" plays the client-facing side (SSLRequest / direct TLS), "con" the server-facing side
 * (tls_sbuf_connect). Covers: handshake and bulk data both ways, the info string, verify-full
 * by name and by IP, hostname mismatch, wrong CA, client certificates, protocol limits,
 * 'N' answers under prefer / require, plaintext after SSLRequest, direct TLS with a raw
 * OpenSSL client (ALPN postgresql, none, wrong), context errors and reload of files.
 */
#include "neki/base.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <openssl/ssl.h>

#include "neki/config.h"
#include "neki/sbuf.h"
#include "neki/tls.h"
#include "evloop.h"
#include "suites.h"

#define PKT_BODY 10000
#define PKT_COUNT 200

static char dir[256];
static struct event_base *base;

/* ---- certificates ---- */

static void
sh(const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	if (system(cmd) != 0)
		ck_abort_msg("command failed: %s", cmd);
}

static const char *
path(const char *name)
{
	static char buf[8][512];
	static int i;

	i = (i + 1) % 8;
	snprintf(buf[i], sizeof(buf[i]), "%s/%s", dir, name);
	return buf[i];
}

/* A key and a certificate signed by CA <ca> with subject CN <cn> and SANs <san> (or none). */
static void
make_cert(const char *ca, const char *name, const char *cn, const char *san)
{
	FILE *f;

	f = fopen(path("ext.cnf"), "w");
	ck_assert_ptr_nonnull(f);
	if (san != NULL)
		fprintf(f, "subjectAltName=%s\n", san);
	else
		fprintf(f, "basicConstraints=CA:FALSE\n");
	fclose(f);
	sh("cd %s && openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
	   "-keyout %s.key -out %s.csr -subj /CN=%s 2>/dev/null && openssl x509 -req -in %s.csr "
	   "-CA %s.crt -CAkey %s.key -CAcreateserial -out %s.crt -days 2 -extfile ext.cnf "
	   "2>/dev/null", dir, name, name, cn, name, ca, ca, name);
}

static void
make_ca(const char *name)
{
	sh("cd %s && openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
	   "-nodes -keyout %s.key -out %s.crt -days 2 -subj /CN=%s 2>/dev/null", dir, name,
	   name, name);
}

/* Once per test case (parent process): the whole PKI. */
static void
pki_setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/neki-check-tls-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	make_ca("ca");
	make_ca("otherca");
	make_cert("ca", "server", "localhost", "DNS:localhost,IP:127.0.0.1");
	make_cert("ca", "server2", "localhost2", "DNS:localhost,IP:127.0.0.1");
	make_cert("ca", "client", "alice", NULL);
}

static void
pki_teardown(void)
{
	sh("rm -rf %s", dir);
}

/* ---- loop ---- */

/* Run the loop until <done>(<arg>) or <secs> seconds (evloop.h). */
static bool
run_until(bool (*done)(void *), void *arg, double secs)
{
	return evloop_run_until(base, done, arg, secs);
}

/* ---- the two ends ---- */

struct end {
	struct sbuf sb;
	struct tls_ctx *ctx;		/* acc: answers SSLRequest with it; con: connects with it */
	const char *host;		/* con: the name to verify */
	bool nak;			/* acc: answer 'N' */
	bool reply;			/* acc: send a 'Z' packet once the startup packet came */
	bool done;			/* negotiation reported */
	bool ok;
	char err[600];
	bool refused;			/* acc: tls_sbuf_accept refused to start */
	bool startup;			/* acc: startup packet seen */
	uint64_t bytes;			/* bytes of regular packets received */
	int n_pkt;
};

static struct end ends[4];
static struct end *A = &ends[0];	/* the client-facing end in use */
static struct end *C = &ends[1];	/* the server-facing end in use */
static int lfd = -1;
static int lport;
static struct event *lev;

static void
done_cb(struct sbuf *sb, bool ok, const char *errmsg, void *arg)
{
	struct end *e = arg;

	(void)sb;
	e->done = true;
	e->ok = ok;
	snprintf(e->err, sizeof(e->err), "%s", errmsg != NULL ? errmsg : "");
	if (!ok)
		sbuf_close(&e->sb);
}

/* An SSLRequest (8 bytes, code 80877103) at the start of <pkt>. */
static bool
is_ssl_request(const struct sbuf_pkt *pkt)
{
	static const uint8_t req[8] = { 0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f };

	return pkt->type == 0 && pkt->len == 8 && pkt->avail == 8 &&
	       memcmp(pkt->data, req, 8) == 0;
}

static void
acc_on_ssl_request(struct end *e)
{
	struct nk_error err;

	sbuf_skip(&e->sb, 8);
	ck_assert(sbuf_send(&e->sb, e->nak ? "N" : "S", 1));
	if (e->nak)
		return;
	if (!tls_sbuf_accept(&e->sb, e->ctx, done_cb, e, &err)) {
		e->refused = true;
		snprintf(e->err, sizeof(e->err), "%s", err.message);
		sbuf_close(&e->sb);
	}
}

static bool
acc_cb(struct sbuf *sb, enum sbuf_event ev, const struct sbuf_pkt *pkt, int err, void *arg)
{
	struct end *e = arg;
	struct nk_error nerr;

	(void)err;
	if (ev != SBUF_EV_PKT)
		return true;
	if (!e->startup && !e->done && tls_pkt_is_client_hello(pkt)) {
		ck_assert(tls_sbuf_accept_direct(sb, e->ctx, pkt, done_cb, e, &nerr));
		return true;
	}
	if (pkt->type == 0 && pkt->avail < pkt->len && pkt->len <= 64)
		return sbuf_hold(sb, pkt->len);
	if (is_ssl_request(pkt)) {
		acc_on_ssl_request(e);
		return true;
	}
	sbuf_skip(sb, pkt->len);
	if (pkt->type == 0) {
		e->startup = true;
		sbuf_set_startup(sb, false);
		if (e->reply)
			ck_assert(sbuf_send(sb, "Z\0\0\0\4", 5));
		return true;
	}
	e->n_pkt++;
	e->bytes += pkt->len;
	return true;
}

static bool
con_cb(struct sbuf *sb, enum sbuf_event ev, const struct sbuf_pkt *pkt, int err, void *arg)
{
	struct end *e = arg;

	(void)err;
	if (ev == SBUF_EV_CONNECT_OK) {
		ck_assert(tls_sbuf_connect(sb, e->ctx, e->host, done_cb, e));
		return true;
	}
	if (ev != SBUF_EV_PKT)
		return true;
	sbuf_skip(sb, pkt->len);
	e->n_pkt++;
	e->bytes += pkt->len;
	return true;
}

static void
listen_cb(evutil_socket_t fd, short what, void *arg)
{
	int c = accept(fd, NULL, NULL);

	(void)what;
	(void)arg;
	if (c == -1)
		return;
	ck_assert(sbuf_accept(&A->sb, c, false));
	sbuf_set_startup(&A->sb, true);
}

static void
setup(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	struct sbuf_opts o;

	signal(SIGPIPE, SIG_IGN);	/* the raw OpenSSL client writes with write() */
	base = event_base_new();
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	ck_assert_int_ne(lfd, -1);
	ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(lfd, 16), 0);
	ck_assert_int_eq(getsockname(lfd, (struct sockaddr *)&sa, &len), 0);
	lport = ntohs(sa.sin_port);
	lev = event_new(base, lfd, EV_READ | EV_PERSIST, listen_cb, NULL);
	event_add(lev, NULL);
	sbuf_opts_default(&o);
	memset(A, 0, sizeof(*A));
	memset(C, 0, sizeof(*C));
	ck_assert(sbuf_init(&A->sb, base, acc_cb, A, &o));
	ck_assert(sbuf_init(&C->sb, base, con_cb, C, &o));
}

static void
teardown(void)
{
	sbuf_cleanup(&A->sb);
	sbuf_cleanup(&C->sb);
	tls_ctx_unref(A->ctx);
	tls_ctx_unref(C->ctx);
	event_free(lev);
	close(lfd);
	tls_cleanup();
	event_base_free(base);
}

/* Settings with the given files (names in the PKI dir; NULL = unset). */
static struct tls_settings
settings(enum cfg_sslmode mode, const char *key, const char *cert, const char *ca,
	 const char *protocols)
{
	struct tls_settings s;

	memset(&s, 0, sizeof(s));
	s.sslmode = mode;
	s.key_file = key != NULL ? path(key) : NULL;
	s.cert_file = cert != NULL ? path(cert) : NULL;
	s.ca_file = ca != NULL ? path(ca) : NULL;
	s.protocols = protocols;
	s.ciphers = "default";
	return s;
}

static struct tls_ctx *
ctx_or_die(enum tls_role role, struct tls_settings s)
{
	struct nk_error err;
	struct tls_ctx *c = tls_ctx_new(role, &s, &err);

	ck_assert_msg(c != NULL, "tls_ctx_new: %s", err.message);
	return c;
}

/* Default pair: acc requires TLS with server.crt; con verify-full against ca.crt. */
static void
default_ctxs(void)
{
	A->ctx = ctx_or_die(TLS_ROLE_ACCEPT, settings(CFG_SSL_REQUIRE, "server.key",
						       "server.crt", NULL, "secure"));
	C->ctx = ctx_or_die(TLS_ROLE_CONNECT, settings(CFG_SSL_VERIFY_FULL, NULL, NULL,
							"ca.crt", "secure"));
}

static void
start_connect(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons((uint16_t)lport);
	ck_assert(sbuf_connect(&C->sb, (struct sockaddr *)&sa, sizeof(sa), 5));
}

static bool
both_done(void *arg)
{
	(void)arg;
	return (A->done || A->refused) && C->done;
}

static bool
con_done(void *arg)
{
	(void)arg;
	return C->done;
}

/* Connect con to acc and wait for both negotiations. */
static void
negotiate(void)
{
	start_connect();
	ck_assert_msg(run_until(both_done, NULL, 10), "negotiation did not finish");
}

static bool
acc_got_all(void *arg)
{
	return A->bytes >= *(uint64_t *)arg;
}

static bool
con_got_all(void *arg)
{
	return C->bytes >= *(uint64_t *)arg;
}

/* A startup packet, then PKT_COUNT packets of PKT_BODY bytes from <from>. */
static void
send_bulk(struct sbuf *from, bool startup)
{
	static uint8_t pkt[PKT_BODY + 5];
	static const uint8_t st[12] = { 0, 0, 0, 12, 0, 3, 0, 0, 'u', 0, 0, 0 };
	uint32_t n = PKT_BODY + 4;
	int i;

	if (startup)
		ck_assert(sbuf_send(from, st, sizeof(st)));
	pkt[0] = 'd';
	pkt[1] = (uint8_t)(n >> 24);
	pkt[2] = (uint8_t)(n >> 16);
	pkt[3] = (uint8_t)(n >> 8);
	pkt[4] = (uint8_t)n;
	for (i = 0; i < PKT_COUNT; i++) {
		memset(pkt + 5, 'a' + i % 26, PKT_BODY);
		ck_assert(sbuf_send(from, pkt, sizeof(pkt)));
	}
}

/* ---- tests ---- */

START_TEST(test_handshake_and_bulk)
{
	uint64_t want = (uint64_t)PKT_COUNT * (PKT_BODY + 5);
	char info[128];

	default_ctxs();
	C->host = "localhost";
	negotiate();
	ck_assert_msg(A->ok && C->ok, "acc: %s / con: %s", A->err, C->err);
	ck_assert(tls_sbuf_is_tls(&A->sb) && tls_sbuf_is_tls(&C->sb));
	tls_sbuf_info(&A->sb, info, sizeof(info));
	ck_assert_str_eq(info, "TLSv1.3/TLS_AES_256_GCM_SHA384/ECDH=X25519");
	tls_sbuf_info(&C->sb, info, sizeof(info));
	ck_assert_str_eq(info, "TLSv1.3/TLS_AES_256_GCM_SHA384/ECDH=X25519");
	ck_assert(tls_sbuf_peer_cn(&C->sb, info, sizeof(info)));
	ck_assert_str_eq(info, "localhost");
	ck_assert(!tls_sbuf_peer_cn(&A->sb, info, sizeof(info)));
	send_bulk(&C->sb, true);
	ck_assert(run_until(acc_got_all, &want, 20));
	ck_assert_int_eq(A->n_pkt, PKT_COUNT);
	send_bulk(&A->sb, false);
	ck_assert(run_until(con_got_all, &want, 20));
	ck_assert_int_eq(C->n_pkt, PKT_COUNT);
	ck_assert_uint_eq(A->bytes, want);
	ck_assert_uint_eq(C->bytes, want);
}
END_TEST

static bool
acc_eof(void *arg)
{
	(void)arg;
	return A->sb.eof;
}

START_TEST(test_verify_full_ip_and_close)
{
	default_ctxs();
	C->host = "127.0.0.1";
	negotiate();
	ck_assert_msg(A->ok && C->ok, "acc: %s / con: %s", A->err, C->err);
	/* a close sends close_notify: the other side sees a clean EOF */
	sbuf_close(&C->sb);
	ck_assert(run_until(acc_eof, NULL, 5));
	ck_assert(!tls_sbuf_is_tls(&C->sb));
}
END_TEST

START_TEST(test_hostname_mismatch)
{
	default_ctxs();
	C->host = "wrong.example";
	negotiate();
	ck_assert(!C->ok);
	ck_assert_msg(strstr(C->err, "certificate verify failed: hostname mismatch") != NULL,
		      "%s", C->err);
	ck_assert(run_until(acc_eof, NULL, 5) || (A->done && !A->ok));
}
END_TEST

START_TEST(test_verify_ca_wrong_ca)
{
	A->ctx = ctx_or_die(TLS_ROLE_ACCEPT, settings(CFG_SSL_REQUIRE, "server.key",
						       "server.crt", NULL, "secure"));
	C->ctx = ctx_or_die(TLS_ROLE_CONNECT, settings(CFG_SSL_VERIFY_CA, NULL, NULL,
							"otherca.crt", "secure"));
	C->host = "localhost";
	negotiate();
	ck_assert(!C->ok);
	ck_assert_msg(strstr(C->err, "certificate verify failed") != NULL, "%s", C->err);
}
END_TEST

START_TEST(test_require_no_verify)
{
	/* require: encryption without checking the chain or the name */
	A->ctx = ctx_or_die(TLS_ROLE_ACCEPT, settings(CFG_SSL_REQUIRE, "server.key",
						       "server.crt", NULL, "secure"));
	C->ctx = ctx_or_die(TLS_ROLE_CONNECT, settings(CFG_SSL_REQUIRE, NULL, NULL, NULL,
							"secure"));
	C->host = "wrong.example";
	negotiate();
	ck_assert_msg(A->ok && C->ok, "acc: %s / con: %s", A->err, C->err);
}
END_TEST

START_TEST(test_client_cert)
{
	char cn[64];

	A->ctx = ctx_or_die(TLS_ROLE_ACCEPT, settings(CFG_SSL_VERIFY_FULL, "server.key",
						       "server.crt", "ca.crt", "secure"));
	C->ctx = ctx_or_die(TLS_ROLE_CONNECT, settings(CFG_SSL_VERIFY_FULL, "client.key",
							"client.crt", "ca.crt", "secure"));
	C->host = "localhost";
	negotiate();
	ck_assert_msg(A->ok && C->ok, "acc: %s / con: %s", A->err, C->err);
	ck_assert(tls_sbuf_peer_cn(&A->sb, cn, sizeof(cn)));
	ck_assert_str_eq(cn, "alice");
}
END_TEST

static bool
acc_done(void *arg)
{
	(void)arg;
	return A->done;
}

START_TEST(test_client_cert_missing)
{
	A->ctx = ctx_or_die(TLS_ROLE_ACCEPT, settings(CFG_SSL_VERIFY_CA, "server.key",
						       "server.crt", "ca.crt", "secure"));
	C->ctx = ctx_or_die(TLS_ROLE_CONNECT, settings(CFG_SSL_VERIFY_FULL, NULL, NULL,
							"ca.crt", "secure"));
	C->host = "localhost";
	start_connect();
	ck_assert(run_until(acc_done, NULL, 10));
	ck_assert(!A->ok);
	ck_assert_msg(strstr(A->err, "certificate") != NULL, "%s", A->err);
}
END_TEST

START_TEST(test_protocols)
{
	char info[128];

	/* server side TLS 1.3 only, client side TLS 1.2 only: no common version */
	A->ctx = ctx_or_die(TLS_ROLE_ACCEPT, settings(CFG_SSL_REQUIRE, "server.key",
						       "server.crt", NULL, "tlsv1.3"));
	C->ctx = ctx_or_die(TLS_ROLE_CONNECT, settings(CFG_SSL_REQUIRE, NULL, NULL, NULL,
							"tlsv1.2"));
	negotiate();
	ck_assert(!C->ok);
	ck_assert_msg(strstr(C->err, "TLS handshake failed") != NULL, "%s", C->err);
	teardown();
	setup();
	/* secure on one side, tlsv1.2 on the other: TLS 1.2 with ECDHE */
	A->ctx = ctx_or_die(TLS_ROLE_ACCEPT, settings(CFG_SSL_REQUIRE, "server.key",
						       "server.crt", NULL, "secure"));
	C->ctx = ctx_or_die(TLS_ROLE_CONNECT, settings(CFG_SSL_REQUIRE, NULL, NULL, NULL,
							"all,!tlsv1.3"));
	negotiate();
	ck_assert_msg(A->ok && C->ok, "acc: %s / con: %s", A->err, C->err);
	tls_sbuf_info(&A->sb, info, sizeof(info));
	ck_assert_msg(strncmp(info, "TLSv1.2/ECDHE-", 14) == 0, "%s", info);
	ck_assert_msg(strstr(info, "/ECDH=X25519") != NULL, "%s", info);
}
END_TEST

START_TEST(test_server_says_no)
{
	default_ctxs();
	A->nak = true;
	start_connect();
	ck_assert(run_until(con_done, NULL, 10));
	ck_assert(!C->ok);
	ck_assert_str_eq(C->err, "server refused SSL");
	teardown();
	setup();
	/* prefer: a plain connection, and the startup packet gets through */
	A->ctx = ctx_or_die(TLS_ROLE_ACCEPT, settings(CFG_SSL_REQUIRE, "server.key",
						       "server.crt", NULL, "secure"));
	C->ctx = ctx_or_die(TLS_ROLE_CONNECT, settings(CFG_SSL_PREFER, NULL, NULL, NULL,
							"secure"));
	A->nak = true;
	start_connect();
	ck_assert(run_until(con_done, NULL, 10));
	ck_assert(C->ok);
	ck_assert(!tls_sbuf_is_tls(&C->sb));
	uint64_t want = (uint64_t)PKT_COUNT * (PKT_BODY + 5);
	send_bulk(&C->sb, true);
	ck_assert(run_until(acc_got_all, &want, 20));
}
END_TEST

static bool
acc_refused(void *arg)
{
	(void)arg;
	return A->refused;
}

START_TEST(test_plaintext_after_request)
{
	static const uint8_t req[] = { 0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f, 0, 0, 0, 8, 0, 3, 0, 0 };
	struct sockaddr_in sa = { .sin_family = AF_INET };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	default_ctxs();
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons((uint16_t)lport);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(send(fd, req, sizeof(req), 0), (ssize_t)sizeof(req));
	ck_assert(run_until(acc_refused, NULL, 5));
	ck_assert_str_eq(A->err, "received unencrypted data after SSL request");
	close(fd);
}
END_TEST

START_TEST(test_unix_and_disabled_are_plain)
{
	int sv[2];

	default_ctxs();
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	ck_assert(sbuf_accept(&C->sb, sv[0], true));
	ck_assert(tls_sbuf_connect(&C->sb, C->ctx, "localhost", done_cb, C));
	ck_assert(!C->done);		/* reported from the loop, never inside the call */
	ck_assert(run_until(con_done, NULL, 5));
	ck_assert(C->ok && !tls_sbuf_is_tls(&C->sb));
	close(sv[1]);
	ck_assert(!tls_client_offer(false));	/* no current context yet */
	ck_assert(!tls_client_required(false));
}
END_TEST

/* ---- direct TLS with a raw OpenSSL client in a thread ---- */

struct raw {
	const unsigned char *alpn;	/* wire format or NULL */
	unsigned alpn_len;
	bool handshake_ok;
	uint8_t reply[5];
	int got;
	volatile bool finished;
};

static void *
raw_main(void *arg)
{
	static const uint8_t st[12] = { 0, 0, 0, 12, 0, 3, 0, 0, 'u', 0, 0, 0 };
	struct raw *r = arg;
	struct sockaddr_in sa = { .sin_family = AF_INET };
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	int fd = socket(AF_INET, SOCK_STREAM, 0), n;
	SSL *ssl;

	SSL_CTX_load_verify_locations(ctx, path("ca.crt"), NULL);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	if (r->alpn != NULL)
		SSL_CTX_set_alpn_protos(ctx, r->alpn, r->alpn_len);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons((uint16_t)lport);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		ssl = SSL_new(ctx);
		SSL_set_fd(ssl, fd);
		r->handshake_ok = SSL_connect(ssl) == 1;
		if (r->handshake_ok && SSL_write(ssl, st, sizeof(st)) == (int)sizeof(st)) {
			while (r->got < 5 && (n = SSL_read(ssl, r->reply + r->got,
							   5 - r->got)) > 0)
				r->got += n;
		}
		SSL_free(ssl);
	}
	close(fd);
	SSL_CTX_free(ctx);
	r->finished = true;
	return NULL;
}

static bool
raw_over(void *arg)
{
	struct raw *r = arg;

	return r->finished && (A->done || A->sb.eof);
}

/* Run a raw client with <alpn> against acc (direct TLS). */
static void
run_raw(struct raw *r)
{
	pthread_t th;

	A->ctx = ctx_or_die(TLS_ROLE_ACCEPT, settings(CFG_SSL_REQUIRE, "server.key",
						       "server.crt", NULL, "secure"));
	A->reply = true;
	ck_assert_int_eq(pthread_create(&th, NULL, raw_main, r), 0);
	ck_assert(run_until(raw_over, r, 10));
	pthread_join(th, NULL);
}

START_TEST(test_direct_alpn)
{
	struct raw r = { .alpn = (const unsigned char *)"\x0apostgresql", .alpn_len = 11 };

	run_raw(&r);
	ck_assert(r.handshake_ok);
	ck_assert_msg(A->ok, "%s", A->err);
	ck_assert(A->startup);
	ck_assert_int_eq(r.got, 5);
	ck_assert_int_eq(r.reply[0], 'Z');
}
END_TEST

START_TEST(test_direct_without_alpn)
{
	struct raw r = { .alpn = NULL };

	run_raw(&r);
	ck_assert(!A->ok);
	ck_assert_str_eq(A->err, "received direct SSL connection request without ALPN "
			 "protocol negotiation extension");
	ck_assert(!A->startup);
	ck_assert_int_eq(r.got, 0);
}
END_TEST

START_TEST(test_direct_wrong_alpn)
{
	struct raw r = { .alpn = (const unsigned char *)"\x08http/1.1", .alpn_len = 9 };

	run_raw(&r);
	ck_assert(!r.handshake_ok);
	ck_assert(!A->ok);
	ck_assert_msg(strstr(A->err, "no application protocol") != NULL, "%s", A->err);
}
END_TEST

/* ---- contexts and reload ---- */

START_TEST(test_ctx_errors)
{
	struct tls_settings s = settings(CFG_SSL_REQUIRE, NULL, NULL, NULL, "secure");
	struct nk_error err;

	ck_assert_ptr_null(tls_ctx_new(TLS_ROLE_ACCEPT, &s, &err));
	ck_assert_str_eq(err.message, "To allow TLS connections from clients, client_tls_key_file "
			 "and client_tls_cert_file must be set.");
	s = settings(CFG_SSL_REQUIRE, "server.key", "server.crt", NULL, "tlsv1.4");
	ck_assert_ptr_null(tls_ctx_new(TLS_ROLE_ACCEPT, &s, &err));
	ck_assert_str_eq(err.message, "invalid client_tls_protocols: tlsv1.4");
	s = settings(CFG_SSL_REQUIRE, "server.key", "server.crt", NULL, "secure");
	s.ciphers = "NO-SUCH-CIPHER";
	ck_assert_ptr_null(tls_ctx_new(TLS_ROLE_ACCEPT, &s, &err));
	ck_assert_str_eq(err.message, "invalid client_tls_ciphers: NO-SUCH-CIPHER");
	s.ciphers = "default";
	s.tls13_ciphers = "NO-SUCH-SUITE";
	ck_assert_ptr_null(tls_ctx_new(TLS_ROLE_ACCEPT, &s, &err));
	ck_assert_str_eq(err.message, "failed to set the TLSv1.3 cipher suites");
	s.protocols = "tlsv1.2";	/* (the suites are not used then, as in libtls) */
	tls_ctx_unref(ctx_or_die(TLS_ROLE_ACCEPT, s));
	s.protocols = "secure";
	s.tls13_ciphers = NULL;
	s.dheparams = "huge";
	ck_assert_ptr_null(tls_ctx_new(TLS_ROLE_ACCEPT, &s, &err));
	ck_assert_str_eq(err.message, "invalid client_tls_dheparams: huge");
	s.dheparams = "legacy";
	s.ecdhcurve = "no-such-curve";
	ck_assert_ptr_null(tls_ctx_new(TLS_ROLE_ACCEPT, &s, &err));
	ck_assert_str_eq(err.message, "invalid client_tls_ecdhcurve: no-such-curve");
	s.ecdhcurve = "prime256v1";
	tls_ctx_unref(ctx_or_die(TLS_ROLE_ACCEPT, s));
	s = settings(CFG_SSL_VERIFY_CA, "server.key", "server.crt", NULL, "secure");
	ck_assert_ptr_null(tls_ctx_new(TLS_ROLE_ACCEPT, &s, &err));
	ck_assert_str_eq(err.message, "client_tls_sslmode requires client_tls_ca_file");
	s = settings(CFG_SSL_REQUIRE, "client.key", "server.crt", NULL, "secure");
	ck_assert_ptr_null(tls_ctx_new(TLS_ROLE_ACCEPT, &s, &err));
	ck_assert_msg(strstr(err.message, "key values mismatch") != NULL, "%s", err.message);
	s = settings(CFG_SSL_VERIFY_FULL, NULL, NULL, "nonexistent.crt", "secure");
	ck_assert_ptr_null(tls_ctx_new(TLS_ROLE_CONNECT, &s, &err));
	ck_assert_msg(strncmp(err.message, "failed to load CA: error:", 25) == 0, "%s",
		      err.message);
}
END_TEST

static struct cfg tcfg;

/* A configuration with only the TLS settings filled: acc with server.crt. */
static void
cfg_fill(void)
{
	static char key[512], cert[512], ca[512];

	memset(&tcfg, 0, sizeof(tcfg));
	snprintf(key, sizeof(key), "%s", path("live.key"));
	snprintf(cert, sizeof(cert), "%s", path("live.crt"));
	snprintf(ca, sizeof(ca), "%s", path("ca.crt"));
	tcfg.tls.client_tls_sslmode = CFG_SSL_REQUIRE;
	tcfg.tls.client_tls_key_file = key;
	tcfg.tls.client_tls_cert_file = cert;
	tcfg.tls.client_tls_protocols = "secure";
	tcfg.tls.client_tls_ciphers = "default";
	tcfg.tls.client_tls_ecdhcurve = "auto";
	tcfg.tls.client_tls_dheparams = "auto";
	tcfg.tls.server_tls_sslmode = CFG_SSL_VERIFY_FULL;
	tcfg.tls.server_tls_ca_file = ca;
	tcfg.tls.server_tls_protocols = "secure";
	tcfg.tls.server_tls_ciphers = "default";
}

/* A fresh acc/con pair using the current contexts; returns the server certificate's CN. */
static void
connect_current(char *cn, size_t len)
{
	struct sbuf_opts o;

	if (A->sb.rbuf != NULL) {
		sbuf_cleanup(&A->sb);
		sbuf_cleanup(&C->sb);
		tls_ctx_unref(A->ctx);
		tls_ctx_unref(C->ctx);
	}
	memset(A, 0, sizeof(*A));
	memset(C, 0, sizeof(*C));
	sbuf_opts_default(&o);
	ck_assert(sbuf_init(&A->sb, base, acc_cb, A, &o));
	ck_assert(sbuf_init(&C->sb, base, con_cb, C, &o));
	A->ctx = tls_client_ctx();
	C->ctx = tls_server_ctx();
	tls_ctx_ref(A->ctx);
	tls_ctx_ref(C->ctx);
	C->host = "localhost";
	negotiate();
	ck_assert_msg(A->ok && C->ok, "acc: %s / con: %s", A->err, C->err);
	ck_assert(tls_sbuf_peer_cn(&C->sb, cn, len));
}

START_TEST(test_reload)
{
	struct end *old_a, *old_c;
	struct nk_error err;
	bool changed = true;
	char cn[64];
	uint64_t want = (uint64_t)PKT_COUNT * (PKT_BODY + 5);

	sh("cp %s %s && cp %s %s", path("server.key"), path("live.key"), path("server.crt"),
	   path("live.crt"));
	cfg_fill();
	/* before tls_init (the master): reload is a no-op, tls_check validates */
	ck_assert(tls_reload(&tcfg, &changed, &err));
	ck_assert(!changed);
	ck_assert_ptr_null(tls_client_ctx());
	ck_assert(tls_check(&tcfg, &err));
	tcfg.tls.client_tls_key_file = tcfg.tls.server_tls_ca_file;	/* a certificate, not a key */
	ck_assert(!tls_check(&tcfg, &err));
	ck_assert_msg(strncmp(err.message, "failed to load private key file \"", 33) == 0, "%s",
		      err.message);
	cfg_fill();
	ck_assert(tls_init(&tcfg, &err));
	ck_assert(tls_client_offer(false) && !tls_client_offer(true));
	ck_assert(tls_client_required(false) && !tls_client_required(true));
	connect_current(cn, sizeof(cn));
	ck_assert_str_eq(cn, "localhost");
	/* keep this pair open across the reloads; new pairs use the other two ends */
	old_a = A;
	old_c = C;
	A = &ends[2];
	C = &ends[3];
	memset(A, 0, sizeof(*A));
	memset(C, 0, sizeof(*C));

	/* new certificate files: new connections get them; server side unchanged */
	sh("cp %s %s && cp %s %s", path("server2.key"), path("live.key"), path("server2.crt"),
	   path("live.crt"));
	ck_assert(tls_reload(&tcfg, &changed, &err));
	ck_assert(!changed);
	connect_current(cn, sizeof(cn));
	ck_assert_str_eq(cn, "localhost2");

	/* a broken key: the reload fails and the previous files stay in use */
	sh("echo garbage > %s", path("live.key"));
	ck_assert(!tls_reload(&tcfg, &changed, &err));
	ck_assert_msg(strncmp(err.message, "failed to load private key file \"", 33) == 0, "%s",
		      err.message);
	connect_current(cn, sizeof(cn));
	ck_assert_str_eq(cn, "localhost2");

	/* server-side settings changed: reported for a RECONNECT */
	tcfg.tls.server_tls_sslmode = CFG_SSL_REQUIRE;
	sh("cp %s %s", path("server2.key"), path("live.key"));
	ck_assert(tls_reload(&tcfg, &changed, &err));
	ck_assert(changed);
	ck_assert(tls_reload(&tcfg, &changed, &err));
	ck_assert(!changed);

	/* the first connection kept working through all of it */
	sbuf_cleanup(&A->sb);
	sbuf_cleanup(&C->sb);
	tls_ctx_unref(A->ctx);
	tls_ctx_unref(C->ctx);
	A = old_a;
	C = old_c;
	A->bytes = 0;
	send_bulk(&C->sb, true);
	ck_assert(run_until(acc_got_all, &want, 20));
}
END_TEST

Suite *
tls_suite(void)
{
	Suite *s = suite_create("tls");
	TCase *tc = tcase_create("tls");

	tcase_add_unchecked_fixture(tc, pki_setup, pki_teardown);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_handshake_and_bulk);
	tcase_add_test(tc, test_verify_full_ip_and_close);
	tcase_add_test(tc, test_hostname_mismatch);
	tcase_add_test(tc, test_verify_ca_wrong_ca);
	tcase_add_test(tc, test_require_no_verify);
	tcase_add_test(tc, test_client_cert);
	tcase_add_test(tc, test_client_cert_missing);
	tcase_add_test(tc, test_protocols);
	tcase_add_test(tc, test_server_says_no);
	tcase_add_test(tc, test_plaintext_after_request);
	tcase_add_test(tc, test_unix_and_disabled_are_plain);
	tcase_add_test(tc, test_direct_alpn);
	tcase_add_test(tc, test_direct_without_alpn);
	tcase_add_test(tc, test_direct_wrong_alpn);
	tcase_add_test(tc, test_ctx_errors);
	tcase_add_test(tc, test_reload);
	suite_add_tcase(s, tc);
	return s;
}
