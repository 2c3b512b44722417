/*
 * check_dns_server.c - net/dns.c against a tiny DNS server written here: UDP on 127.0.0.1,
 * served from the test's own event_base, answering A, AAAA and SOA questions from a table
 * the tests change. The resolver reads a test-owned resolv.conf (resolv_conf setting) and
 * uses the server's port. Covers: dns_max_ttl expiry and changes of address (with the
 * addr_gone report), NXDOMAIN caching for dns_nxdomain_ttl and a name that stops resolving,
 * one query shared by concurrent lookups, round-robin over several addresses, cancellation,
 * SOA serial polling (dns_zone_check_period) that re-resolves a changed zone, the SHOW
 * DNS_HOSTS / DNS_ZONES / LISTS data, and a test-owned hosts file (CARES_HOSTS).
 */
#include "neki/base.h"

#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "neki/config.h"
#include "neki/dns.h"
#include "evloop.h"
#include "suites.h"

#define MAX_NAMES 8
#define MAX_ZONES 4

/* ---- the fake DNS server ---- */

struct fake_name {
	const char *name;
	int naddrs;
	const char *addrs[4];		/* IPv4 */
	bool nx;			/* answer NXDOMAIN */
	int queries;			/* A questions seen */
};

struct fake_zone {
	const char *name;
	uint32_t serial;
	int queries;			/* SOA questions seen */
};

static struct fake_name names[MAX_NAMES];
static struct fake_zone zones[MAX_ZONES];
static struct event_base *base;
static struct event *uev;
static int ufd = -1;
static int uport;
static char dir[128];
static char resolv[256];

static struct fake_name *
fake_name(const char *n)
{
	for (int i = 0; i < MAX_NAMES && names[i].name != NULL; i++) {
		if (strcasecmp(names[i].name, n) == 0)
			return &names[i];
	}
	return NULL;
}

static struct fake_zone *
fake_zone(const char *n)
{
	for (int i = 0; i < MAX_ZONES && zones[i].name != NULL; i++) {
		if (strcasecmp(zones[i].name, n) == 0)
			return &zones[i];
	}
	return NULL;
}

/* Decode the question name at <p> into <out>; returns the bytes after it, or NULL. */
static const uint8_t *
parse_qname(const uint8_t *p, const uint8_t *end, char *out, size_t len)
{
	size_t o = 0;

	while (p < end && *p != 0) {
		uint8_t l = *p++;

		if (p + l > end || o + l + 2 > len)
			return NULL;
		if (o > 0)
			out[o++] = '.';
		memcpy(out + o, p, l);
		o += l;
		p += l;
	}
	out[o] = '\0';
	return p < end ? p + 1 : NULL;
}

static size_t
put16(uint8_t *p, unsigned v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
	return 2;
}

static size_t
put32(uint8_t *p, uint32_t v)
{
	put16(p, v >> 16);
	put16(p + 2, v & 0xffff);
	return 4;
}

/* Resource record header pointing at the question name. */
static size_t
put_rr(uint8_t *p, unsigned type, unsigned rdlen)
{
	size_t n = 0;

	n += put16(p + n, 0xc00c);
	n += put16(p + n, type);
	n += put16(p + n, 1);
	n += put32(p + n, 300);
	n += put16(p + n, rdlen);
	return n;
}

/* Answers for <qname>/<qtype> after the copied question at <p>; sets <ancount>, <rcode>. */
static size_t
answer(uint8_t *p, const char *qname, unsigned qtype, unsigned *ancount, unsigned *rcode)
{
	struct fake_name *fn = fake_name(qname);
	struct fake_zone *fz = fake_zone(qname);
	size_t n = 0;

	*ancount = 0;
	*rcode = 0;
	if (qtype == 6 && fz != NULL) {
		fz->queries++;
		n += put_rr(p + n, 6, 22);
		p[n++] = 0;	/* mname: root */
		p[n++] = 0;	/* rname: root */
		n += put32(p + n, fz->serial);
		for (int i = 0; i < 4; i++)
			n += put32(p + n, 60);
		*ancount = 1;
		return n;
	}
	if (fn == NULL || fn->nx) {
		*rcode = fz != NULL ? 0 : 3;
		return 0;
	}
	if (qtype != 1)
		return 0;	/* AAAA: the name exists, no IPv6 data */
	fn->queries++;
	for (int i = 0; i < fn->naddrs; i++) {
		n += put_rr(p + n, 1, 4);
		inet_pton(AF_INET, fn->addrs[i], p + n);
		n += 4;
		(*ancount)++;
	}
	return n;
}

static void
server_cb(evutil_socket_t fd, short what, void *arg)
{
	uint8_t q[512], r[1024];
	struct sockaddr_storage from;
	socklen_t flen = sizeof(from);
	char qname[256];
	const uint8_t *qe;
	unsigned qtype, ancount, rcode;
	ssize_t n = recvfrom(fd, q, sizeof(q), 0, (struct sockaddr *)&from, &flen);
	size_t qlen, len;

	(void)what;
	(void)arg;
	if (n < 17)
		return;
	qe = parse_qname(q + 12, q + n, qname, sizeof(qname));
	if (qe == NULL || qe + 4 > q + n)
		return;
	qtype = (unsigned)(qe[0] << 8 | qe[1]);
	qlen = (size_t)(qe + 4 - q);
	memcpy(r, q, qlen);
	len = qlen + answer(r + qlen, qname, qtype, &ancount, &rcode);
	r[2] = 0x81 | (q[2] & 0x01);	/* response, RD copied */
	r[3] = (uint8_t)(0x80 | rcode);	/* RA, rcode */
	put16(r + 4, 1);
	put16(r + 6, ancount);
	put16(r + 8, 0);
	put16(r + 10, 0);
	(void)sendto(fd, r, len, 0, (struct sockaddr *)&from, flen);
}

/* ---- loop and answers ---- */

struct ans {
	int calls;
	bool ok;
	char ip[64];
	int port;
	char err[400];
};

static void
ans_cb(void *arg, const struct sockaddr *sa, socklen_t len, const char *errmsg)
{
	struct ans *a = arg;

	(void)len;
	a->calls++;
	a->ok = sa != NULL;
	if (sa == NULL) {
		snprintf(a->err, sizeof(a->err), "%s", errmsg);
		return;
	}
	inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, a->ip, sizeof(a->ip));
	a->port = ntohs(((const struct sockaddr_in *)sa)->sin_port);
}

/* Run the loop until <done>(<arg>) or <secs> seconds (evloop.h). */
static bool
run_until(bool (*done)(void *), void *arg, double secs)
{
	return evloop_run_until(base, done, arg, secs);
}

static bool
answered(void *arg)
{
	return ((struct ans *)arg)->calls > 0;
}

/* Let the loop run for <secs> (the cache's clock moves; nothing is expected). */
static void
pass(double secs)
{
	(void)run_until(evloop_never, NULL, secs);
}

/* Look <name> up and wait for the answer. */
static struct ans
resolve(struct dns *d, const char *name, int port)
{
	struct ans a = { 0 };

	ck_assert_ptr_nonnull(dns_lookup(d, name, port, ans_cb, &a));
	ck_assert_int_eq(a.calls, 0);
	ck_assert_msg(run_until(answered, &a, 5), "no answer for %s", name);
	ck_assert_int_eq(a.calls, 1);
	return a;
}

/* ---- gone addresses ---- */

static char gone[8][64];
static int n_gone;

static void
gone_cb(void *arg, const char *name, const struct sockaddr *sa, socklen_t len)
{
	(void)arg;
	(void)len;
	if (n_gone < 8) {
		int o = snprintf(gone[n_gone], sizeof(gone[0]), "%s/", name);

		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr,
			  gone[n_gone] + o, sizeof(gone[0]) - (size_t)o);
	}
	n_gone++;
}

static struct dns *
mk_dns(double max_ttl, double nx_ttl, double zone_period)
{
	struct dns_opts o = { max_ttl, nx_ttl, resolv, "b" };
	struct dns_opts_ext x = { zone_period, uport, gone_cb, NULL };
	struct nk_error err;
	struct dns *d = dns_new_ext(base, &o, &x, &err);

	ck_assert_msg(d != NULL, "%s", err.message);
	return d;
}

static void
setup(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	FILE *f;

	memset(names, 0, sizeof(names));
	memset(zones, 0, sizeof(zones));
	n_gone = 0;
	base = event_base_new();
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ufd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	ck_assert_int_eq(bind(ufd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(getsockname(ufd, (struct sockaddr *)&sa, &len), 0);
	uport = ntohs(sa.sin_port);
	uev = event_new(base, ufd, EV_READ | EV_PERSIST, server_cb, NULL);
	event_add(uev, NULL);
	snprintf(dir, sizeof(dir), "/tmp/neki-check-dns-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(resolv, sizeof(resolv), "%s/resolv.conf", dir);
	f = fopen(resolv, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "nameserver 127.0.0.1\noptions ndots:1 timeout:1 attempts:2\n");
	fclose(f);
}

static void
teardown(void)
{
	char cmd[200];

	event_free(uev);
	close(ufd);
	event_base_free(base);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		ck_abort_msg("cleanup failed");
}

/* ---- tests ---- */

START_TEST(test_ttl_and_change_of_address)
{
	struct dns *d = mk_dns(0.3, 15, 0);
	struct ans a;

	names[0] = (struct fake_name){ .name = "db.zone.test", .naddrs = 1,
				       .addrs = { "10.1.1.1" } };
	a = resolve(d, "db.zone.test", 5432);
	ck_assert_msg(a.ok, "%s", a.err);
	ck_assert_str_eq(a.ip, "10.1.1.1");
	ck_assert_int_eq(a.port, 5432);
	/* the DNS answer changes; the cached one is used until dns_max_ttl */
	names[0].addrs[0] = "10.1.1.2";
	a = resolve(d, "db.zone.test", 6000);
	ck_assert_str_eq(a.ip, "10.1.1.1");
	ck_assert_int_eq(a.port, 6000);
	ck_assert_int_eq(names[0].queries, 1);
	ck_assert_uint_eq(dns_cache_hits(d), 1);
	pass(0.4);
	a = resolve(d, "db.zone.test", 5432);
	ck_assert_str_eq(a.ip, "10.1.1.2");
	ck_assert_int_eq(names[0].queries, 2);
	ck_assert_int_eq(n_gone, 1);
	ck_assert_str_eq(gone[0], "db.zone.test/10.1.1.1");
	dns_free(d);
}
END_TEST

START_TEST(test_nxdomain_and_stops_resolving)
{
	struct dns *d = mk_dns(0.2, 0.3, 0);
	struct ans a;

	names[0] = (struct fake_name){ .name = "gone.zone.test", .naddrs = 1,
				       .addrs = { "10.2.2.2" } };
	a = resolve(d, "gone.zone.test", 1);
	ck_assert(a.ok);
	/* the name stops resolving: after its TTL new lookups fail with a clear error */
	names[0].nx = true;
	pass(0.25);
	a = resolve(d, "gone.zone.test", 1);
	ck_assert(!a.ok);
	ck_assert_str_eq(a.err, "could not resolve host \"gone.zone.test\": Domain name not found");
	/* the failure is cached for dns_nxdomain_ttl */
	int q = names[0].queries;
	a = resolve(d, "gone.zone.test", 1);
	ck_assert(!a.ok);
	ck_assert_int_eq(names[0].queries, q);
	/* and the name comes back after that */
	names[0].nx = false;
	pass(0.35);
	a = resolve(d, "gone.zone.test", 1);
	ck_assert_msg(a.ok, "%s", a.err);
	ck_assert_str_eq(a.ip, "10.2.2.2");
	/* a name the server never knew */
	a = resolve(d, "unknown.other.test", 1);
	ck_assert(!a.ok);
	ck_assert(strstr(a.err, "Domain name not found") != NULL);
	dns_free(d);
}
END_TEST

static bool
all_answered(void *arg)
{
	struct ans *v = arg;

	return v[0].calls > 0 && v[1].calls > 0 && v[3].calls > 0;
}

START_TEST(test_shared_query_round_robin_cancel)
{
	struct dns *d = mk_dns(15, 15, 0);
	struct ans v[4] = { { 0 } };
	struct dns_req *r;
	struct dns_info info;

	names[0] = (struct fake_name){ .name = "rr.zone.test", .naddrs = 2,
				       .addrs = { "10.3.3.1", "10.3.3.2" } };
	for (int i = 0; i < 4; i++) {
		r = dns_lookup(d, "rr.zone.test", 100 + i, ans_cb, &v[i]);
		ck_assert_ptr_nonnull(r);
		if (i == 2)
			dns_cancel(r);
	}
	dns_get_info(d, &info);
	ck_assert_int_eq(info.pending, 4);
	ck_assert_int_eq(info.queries, 1);
	ck_assert(run_until(all_answered, v, 5));
	pass(0.05);
	ck_assert_int_eq(v[2].calls, 0);
	ck_assert_int_eq(names[0].queries, 1);	/* one query for all four */
	ck_assert(v[0].ok && v[1].ok && v[3].ok);
	ck_assert_str_ne(v[0].ip, v[1].ip);	/* round-robin */
	ck_assert_int_eq(v[3].port, 103);
	dns_get_info(d, &info);
	ck_assert_int_eq(info.pending, 0);
	ck_assert_int_eq(info.queries, 0);
	ck_assert_int_eq(info.names, 1);
	ck_assert_int_eq(info.zones, 1);
	dns_free(d);
}
END_TEST

struct seen_hosts {
	int n;
	char text[4][128];
};

static void
host_walk_cb(void *arg, const char *name, uint64_t ttl, const char *addrs)
{
	struct seen_hosts *s = arg;

	if (s->n < 4)
		snprintf(s->text[s->n], sizeof(s->text[0]), "%s|%s|%s", name,
			 ttl > 50 && ttl <= 60 ? "ttl-ok" : ttl == 0 ? "ttl-0" : "ttl-?", addrs);
	s->n++;
}

struct seen_zones {
	int n;
	char text[4][128];
};

static void
zone_walk_cb(void *arg, const char *zone, uint32_t serial, int count)
{
	struct seen_zones *s = arg;

	if (s->n < 4)
		snprintf(s->text[s->n], sizeof(s->text[0]), "%s|%u|%d", zone, serial, count);
	s->n++;
}

static bool
zone_queried(void *arg)
{
	return zones[0].queries >= *(int *)arg;
}

static bool
name_queried(void *arg)
{
	return names[0].queries >= *(int *)arg;
}

START_TEST(test_zone_serial_check)
{
	struct dns *d = mk_dns(60, 15, 0.2);
	struct seen_hosts h = { 0 };
	struct seen_zones z = { 0 };
	struct ans a;
	int want;

	names[0] = (struct fake_name){ .name = "a.zone.test", .naddrs = 2,
				       .addrs = { "10.0.0.1", "10.0.0.2" } };
	names[1] = (struct fake_name){ .name = "b.zone.test", .nx = true };
	zones[0] = (struct fake_zone){ .name = "zone.test", .serial = 100 };
	a = resolve(d, "a.zone.test", 1);
	ck_assert(a.ok);
	a = resolve(d, "b.zone.test", 1);
	ck_assert(!a.ok);
	want = 1;
	ck_assert(run_until(zone_queried, &want, 5));
	pass(0.05);
	dns_walk_zones(d, zone_walk_cb, &z);
	ck_assert_int_eq(z.n, 1);
	ck_assert_str_eq(z.text[0], "zone.test|100|2");
	dns_walk_hosts(d, host_walk_cb, &h);
	ck_assert_int_eq(h.n, 2);
	ck_assert_str_eq(h.text[0], "a.zone.test|ttl-ok|10.0.0.1,10.0.0.2");
	ck_assert_msg(strncmp(h.text[1], "b.zone.test|", 12) == 0 &&
		      strcmp(h.text[1] + strlen(h.text[1]) - 1, "|") == 0, "%s", h.text[1]);
	/* an unchanged serial changes nothing */
	want = 3;
	ck_assert(run_until(zone_queried, &want, 5));
	ck_assert_int_eq(names[0].queries, 1);
	/* the serial grows: the zone's names are resolved again before their TTL */
	names[0].addrs[0] = "10.0.0.9";
	names[0].naddrs = 1;
	zones[0].serial = 101;
	want = 2;
	ck_assert(run_until(name_queried, &want, 5));
	pass(0.05);
	a = resolve(d, "a.zone.test", 1);
	ck_assert_str_eq(a.ip, "10.0.0.9");
	ck_assert_int_eq(names[0].queries, 2);
	ck_assert_int_eq(n_gone, 2);
	z.n = 0;
	dns_walk_zones(d, zone_walk_cb, &z);
	ck_assert_str_eq(z.text[0], "zone.test|101|2");
	dns_free(d);
}
END_TEST

START_TEST(test_hosts_file_and_numeric)
{
	struct dns_opts o = { 15, 15, resolv, "f" };
	char hosts[256];
	struct nk_error err;
	struct dns *d;
	struct ans a;
	FILE *f;

	snprintf(hosts, sizeof(hosts), "%s/hosts", dir);
	f = fopen(hosts, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "10.9.9.9 myshard.example myshard\n");
	fclose(f);
	setenv("CARES_HOSTS", hosts, 1);
	d = dns_new(base, &o, &err);
	ck_assert_ptr_nonnull(d);
	a = resolve(d, "myshard.example", 7000);
	ck_assert_msg(a.ok, "%s", a.err);
	ck_assert_str_eq(a.ip, "10.9.9.9");
	ck_assert_int_eq(a.port, 7000);
	a = resolve(d, "10.4.4.4", 1);
	ck_assert_str_eq(a.ip, "10.4.4.4");
	a = resolve(d, "not-in-hosts.example", 1);
	ck_assert(!a.ok);
	/* Unix socket directories never reach the resolver */
	a = resolve(d, "/var/run/postgresql", 1);
	ck_assert(!a.ok);
	ck_assert_str_eq(a.err, "could not resolve host \"/var/run/postgresql\": it is a Unix "
			 "socket directory");
	dns_free(d);
	unsetenv("CARES_HOSTS");
}
END_TEST

START_TEST(test_free_with_queries_in_flight)
{
	struct dns *d = mk_dns(15, 15, 0.01);
	struct ans a = { 0 };

	/* a name the server ignores (no zone, no name: NXDOMAIN) and a SOA round running */
	zones[0] = (struct fake_zone){ .name = "zone.test", .serial = 1 };
	ck_assert_ptr_nonnull(dns_lookup(d, "x.zone.test", 1, ans_cb, &a));
	dns_free(d);
	pass(0.05);
	ck_assert_int_eq(a.calls, 0);
}
END_TEST

START_TEST(test_process_resolver)
{
	struct cfg c;
	struct nk_error err;
	struct ans a;

	memset(&c, 0, sizeof(c));
	c.dns.dns_max_ttl = 15;
	c.dns.dns_nxdomain_ttl = 15;
	c.proc.resolv_conf = resolv;
	ck_assert_ptr_null(dns_process());
	dns_process_reload(&c);		/* no resolver yet: nothing happens */
	ck_assert(dns_process_init(base, &c, &err));
	ck_assert_ptr_nonnull(dns_process());
	a = resolve(dns_process(), "127.0.0.1", 5);
	ck_assert(a.ok);
	c.dns.dns_zone_check_period = 1;
	dns_process_reload(&c);
	dns_process_free();
	ck_assert_ptr_null(dns_process());
}
END_TEST

Suite *
dnssrv_suite(void)
{
	Suite *s = suite_create("dnssrv");
	TCase *tc = tcase_create("dnssrv");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_ttl_and_change_of_address);
	tcase_add_test(tc, test_nxdomain_and_stops_resolving);
	tcase_add_test(tc, test_shared_query_round_robin_cancel);
	tcase_add_test(tc, test_zone_serial_check);
	tcase_add_test(tc, test_hosts_file_and_numeric);
	tcase_add_test(tc, test_free_with_queries_in_flight);
	tcase_add_test(tc, test_process_resolver);
	suite_add_tcase(s, tc);
	return s;
}
