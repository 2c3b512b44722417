/*
 * neki/dns.h - non-blocking host name resolution for backend links (c-ares, src/net/dns.c).
 *
 * One struct dns per event loop. dns_lookup() answers through a callback, always from the
 * loop (a cached answer too), never inside the call. Answers are cached per name, as
 * pgbouncer does: positive ones for dns_max_ttl (the records' own TTL is ignored), failures
 * for dns_nxdomain_ttl. Concurrent lookups of one name share one query. A name with several
 * addresses hands them out round-robin. With dns_zone_check_period > 0 the SOA serial of
 * each zone (the name minus its first label) is polled; when it grows, the zone's names are
 * resolved again at once. A pending lookup can be cancelled; its callback then never runs.
 * A name that stops resolving fails new lookups ("could not resolve host ...") while the
 * connections made earlier are untouched; addresses that vanish from an answer are reported
 * through dns_opts.addr_gone (pgbouncer then closes the links to them once released).
 */
#ifndef NEKI_DNS_H
#define NEKI_DNS_H

#include "neki/base.h"

#include <sys/socket.h>

#include "neki/error.h"

struct dns;
struct dns_req;
struct event_base;

/*
 * An address that <name> resolved to before is missing from its new answer (<sa>, port 0).
 * Called from the loop.
 */
typedef void (*dns_addr_gone_fn)(void *arg, const char *name, const struct sockaddr *sa,
				 socklen_t salen);

/* Resolver settings. */
struct dns_opts {
	double max_ttl;		/* dns_max_ttl: cache positive answers this long (s) */
	double nxdomain_ttl;	/* dns_nxdomain_ttl: cache failures this long (s) */
	const char *resolv_conf; /* resolv_conf: file instead of /etc/resolv.conf; NULL/"" */
	const char *lookups;	/* c-ares lookup order ("fb" default; "f" hosts, "b" DNS) */
};

/* More resolver settings (all zero = defaults), for dns_new_ext / dns_reconfigure. */
struct dns_opts_ext {
	double zone_check_period; /* dns_zone_check_period (s); 0 = no SOA polling */
	int port;		/* DNS server port instead of 53 (tests); 0 = 53 */
	dns_addr_gone_fn addr_gone; /* may be NULL */
	void *addr_gone_arg;	/* borrowed: its argument */
};

struct cfg;

/* Fill <o> and <x> from the [pgbouncer] settings of <c> (borrowed strings; no callback). */
void dns_opts_from_cfg(struct dns_opts *o, struct dns_opts_ext *x, const struct cfg *c);

/*
 * Answer for a lookup: <sa> (port set to the requested port) or NULL with <errmsg>
 * ("could not resolve host \"x\": <reason>"). <sa> is valid during the call only.
 */
typedef void (*dns_cb_fn)(void *arg, const struct sockaddr *sa, socklen_t salen,
			  const char *errmsg);

/* A resolver on <base>. NULL with <err> set when c-ares cannot start. */
struct dns *dns_new(struct event_base *base, const struct dns_opts *o, struct nk_error *err);
/* The same with the settings of <x> too (<x> may be NULL). */
struct dns *dns_new_ext(struct event_base *base, const struct dns_opts *o,
			const struct dns_opts_ext *x, struct nk_error *err);

/* Stop: pending lookups are dropped without callbacks. */
void dns_free(struct dns *d);

/*
 * Apply reloadable settings (dns_max_ttl, dns_nxdomain_ttl from <o>; dns_zone_check_period
 * and the callback from <x>, which may be NULL) to <d>; cached answers keep their expiry.
 * resolv_conf, lookups and port need a new resolver.
 */
void dns_reconfigure(struct dns *d, const struct dns_opts *o, const struct dns_opts_ext *x);

/*
 * Resolve <host> for <port>; <cb>(<arg>, ...) runs later from the loop. Numeric IPv4/IPv6
 * addresses are answered without a query. Returns the pending request (for dns_cancel), or
 * NULL when out of memory (then <cb> never runs).
 */
struct dns_req *dns_lookup(struct dns *d, const char *host, int port, dns_cb_fn cb, void *arg);

/* pgbouncer's name for dns_lookup(). */
static inline struct dns_req *
dns_resolve(struct dns *d, const char *host, int port, dns_cb_fn cb, void *arg)
{
	return dns_lookup(d, host, port, cb, arg);
}

/* Forget <r>: its callback will not run. */
void dns_cancel(struct dns_req *r);

/* Lookups answered from the cache so far (tests, stats). */
uint64_t dns_cache_hits(const struct dns *d);

/* ---- SHOW DNS_HOSTS / DNS_ZONES / LISTS ---- */

/*
 * One cached name: <ttl> seconds until it expires (0 once expired), <addrs> its addresses
 * joined with commas ("" for a failure or a first lookup still running).
 */
typedef void (*dns_host_walk_fn)(void *arg, const char *name, uint64_t ttl,
				 const char *addrs);
/* One zone: its last SOA <serial> (0 before the first answer) and <count> names in it. */
typedef void (*dns_zone_walk_fn)(void *arg, const char *zone, uint32_t serial, int count);

/* Call <fn> for every cached name, in name order. */
void dns_walk_hosts(struct dns *d, dns_host_walk_fn fn, void *arg);
/* Call <fn> for every zone, in name order. */
void dns_walk_zones(struct dns *d, dns_zone_walk_fn fn, void *arg);

/* SHOW LISTS rows dns_names, dns_zones, dns_queries, dns_pending. */
struct dns_info {
	int names;		/* cached names */
	int zones;		/* zones known */
	int queries;		/* c-ares queries in flight (names and SOA) */
	int pending;		/* lookups waiting for an answer */
};
void dns_get_info(const struct dns *d, struct dns_info *out);

/* ---- the process's resolver (workers) ---- */

/*
 * Create this process's resolver on <base> from the settings of <c> (once, at start). False
 * with <err> when c-ares cannot start.
 */
NK_MUSTCHECK bool dns_process_init(struct event_base *base, const struct cfg *c,
				   struct nk_error *err);
/* The process's resolver (borrowed), or NULL before dns_process_init(). */
struct dns *dns_process(void);
/* Who hears of addresses gone from the process's resolver (kept across reloads). */
void dns_process_on_addr_gone(dns_addr_gone_fn fn, void *arg);
/* RELOAD: apply the reloadable DNS settings of <c> (no-op without a resolver). */
void dns_process_reload(const struct cfg *c);
/* Free the process's resolver (exit, tests). */
void dns_process_free(void);

#endif /* NEKI_DNS_H */
