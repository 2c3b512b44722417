/*
 * check_dns.c - the c-ares adapter (src/net/dns.c) on a private event_base: numeric and
 * hosts-file names, failures, the answer cache (positive and negative), cancellation, and
 * that answers never arrive inside dns_lookup(). Lookups use the hosts file only ("f") so
 * the tests need no network; /etc/hosts always has "localhost".
 */
#include "neki/base.h"

#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "neki/dns.h"
#include "evloop.h"
#include "suites.h"

static struct event_base *base;

struct answer {
	int calls;
	bool ok;
	int family;
	char ip[64];
	int port;
	char err[256];
};

static void
answer_cb(void *arg, const struct sockaddr *sa, socklen_t len, const char *errmsg)
{
	struct answer *a = arg;

	a->calls++;
	a->ok = sa != NULL;
	if (sa == NULL) {
		snprintf(a->err, sizeof(a->err), "%s", errmsg);
		return;
	}
	a->family = sa->sa_family;
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)sa;

		inet_ntop(AF_INET, &sin->sin_addr, a->ip, sizeof(a->ip));
		a->port = ntohs(sin->sin_port);
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)sa;

		inet_ntop(AF_INET6, &sin6->sin6_addr, a->ip, sizeof(a->ip));
		a->port = ntohs(sin6->sin6_port);
	}
}

static bool
answered(void *arg)
{
	return ((struct answer *)arg)->calls > 0;
}

/* Run the loop until <a> got an answer or <secs> passed. */
static bool
wait_answer(struct answer *a, double secs)
{
	return evloop_run_until(base, answered, a, secs);
}

static struct dns *
mk_dns(double max_ttl, double nx_ttl)
{
	struct dns_opts o = { max_ttl, nx_ttl, NULL, "f" };
	struct nk_error err;
	struct dns *d = dns_new(base, &o, &err);

	ck_assert_msg(d != NULL, "%s", err.message);
	return d;
}

static void
setup(void)
{
	base = event_base_new();
}

static void
teardown(void)
{
	event_base_free(base);
}

START_TEST(test_numeric_and_hosts_file)
{
	struct dns *d = mk_dns(15, 15);
	struct answer a = { 0 }, b = { 0 };

	ck_assert_ptr_nonnull(dns_lookup(d, "127.0.0.1", 5432, answer_cb, &a));
	ck_assert_int_eq(a.calls, 0);	/* never inside dns_lookup() */
	ck_assert(wait_answer(&a, 5));
	ck_assert_msg(a.ok, "%s", a.err);
	ck_assert_str_eq(a.ip, "127.0.0.1");
	ck_assert_int_eq(a.port, 5432);

	ck_assert_ptr_nonnull(dns_lookup(d, "localhost", 6000, answer_cb, &b));
	ck_assert_int_eq(b.calls, 0);
	ck_assert(wait_answer(&b, 5));
	ck_assert_msg(b.ok, "%s", b.err);
	ck_assert(strcmp(b.ip, "127.0.0.1") == 0 || strcmp(b.ip, "::1") == 0);
	ck_assert_int_eq(b.port, 6000);
	dns_free(d);
}
END_TEST

START_TEST(test_failure_and_negative_cache)
{
	struct dns *d = mk_dns(15, 15);
	struct answer a = { 0 }, b = { 0 };

	ck_assert_ptr_nonnull(dns_lookup(d, "no-such-host.invalid", 1, answer_cb, &a));
	ck_assert(wait_answer(&a, 5));
	ck_assert(!a.ok);
	ck_assert(strncmp(a.err, "could not resolve host \"no-such-host.invalid\": ", 46) == 0);
	ck_assert_uint_eq(dns_cache_hits(d), 0);
	ck_assert_ptr_nonnull(dns_lookup(d, "no-such-host.invalid", 1, answer_cb, &b));
	ck_assert_int_eq(b.calls, 0);
	ck_assert(wait_answer(&b, 5));
	ck_assert(!b.ok);
	ck_assert_str_eq(a.err, b.err);
	ck_assert_uint_eq(dns_cache_hits(d), 1);
	dns_free(d);
}
END_TEST

START_TEST(test_cache_ttl_and_cancel)
{
	struct dns *d = mk_dns(0.2, 0);
	struct answer a = { 0 }, b = { 0 }, c = { 0 }, e = { 0 };
	struct dns_req *r;

	ck_assert_ptr_nonnull(dns_lookup(d, "localhost", 1, answer_cb, &a));
	ck_assert(wait_answer(&a, 5));
	ck_assert_ptr_nonnull(dns_lookup(d, "localhost", 2, answer_cb, &b));
	ck_assert(wait_answer(&b, 5));
	ck_assert_uint_eq(dns_cache_hits(d), 1);
	ck_assert_int_eq(b.port, 2);
	/* after dns_max_ttl the name is resolved again */
	{
		struct answer never = { 0 };

		(void)wait_answer(&never, 0.3);
	}
	ck_assert_ptr_nonnull(dns_lookup(d, "localhost", 3, answer_cb, &c));
	ck_assert(wait_answer(&c, 5));
	ck_assert_uint_eq(dns_cache_hits(d), 1);
	/* a cancelled lookup never calls back */
	r = dns_lookup(d, "localhost", 4, answer_cb, &e);
	ck_assert_ptr_nonnull(r);
	dns_cancel(r);
	ck_assert(!wait_answer(&e, 0.3));
	/* and pending lookups die quietly with the resolver */
	ck_assert_ptr_nonnull(dns_lookup(d, "no-such-host.invalid", 4, answer_cb, &e));
	dns_free(d);
	ck_assert_int_eq(e.calls, 0);
}
END_TEST

Suite *
dns_suite(void)
{
	Suite *s = suite_create("dns");
	TCase *tc = tcase_create("dns");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_numeric_and_hosts_file);
	tcase_add_test(tc, test_failure_and_negative_cache);
	tcase_add_test(tc, test_cache_ttl_and_cancel);
	suite_add_tcase(s, tc);
	return s;
}
