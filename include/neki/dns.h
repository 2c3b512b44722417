/*
 * neki/dns.h - non-blocking host name resolution for backend links (c-ares, src/net/dns.c).
 *
 * One struct dns per event loop. dns_lookup() answers through a callback, always from the
 * loop (a cached answer too), never inside the call. Answers are cached per name: positive
 * ones for min(record TTL, dns_max_ttl), failures for dns_nxdomain_ttl (pgbouncer's
 * settings). A pending lookup can be cancelled; its callback then never runs.
 */
#ifndef NEKI_DNS_H
#define NEKI_DNS_H

#include "neki/base.h"

#include <sys/socket.h>

#include "neki/error.h"

struct dns;
struct dns_req;
struct event_base;

/* Resolver settings. */
struct dns_opts {
	double max_ttl;		/* dns_max_ttl: cache positive answers at most this long (s) */
	double nxdomain_ttl;	/* dns_nxdomain_ttl: cache failures this long (s) */
	const char *resolv_conf; /* resolv_conf: file instead of /etc/resolv.conf; NULL/"" */
	const char *lookups;	/* c-ares lookup order ("fb" default; "f" = hosts file only) */
};

/*
 * Answer for a lookup: <sa> (port set to the requested port) or NULL with <errmsg>
 * ("could not resolve host \"x\": <reason>"). <sa> is valid during the call only.
 */
typedef void (*dns_cb_fn)(void *arg, const struct sockaddr *sa, socklen_t salen,
			  const char *errmsg);

/* A resolver on <base>. NULL with <err> set when c-ares cannot start. */
struct dns *dns_new(struct event_base *base, const struct dns_opts *o, struct nk_error *err);

/* Stop: pending lookups are dropped without callbacks. */
void dns_free(struct dns *d);

/*
 * Resolve <host> for <port>; <cb>(<arg>, ...) runs later from the loop. Returns the pending
 * request (for dns_cancel), or NULL when out of memory (then <cb> never runs).
 */
struct dns_req *dns_lookup(struct dns *d, const char *host, int port, dns_cb_fn cb, void *arg);

/* Forget <r>: its callback will not run. */
void dns_cancel(struct dns_req *r);

/* Lookups answered from the cache so far (tests, stats). */
uint64_t dns_cache_hits(const struct dns *d);

#endif /* NEKI_DNS_H */
