/*
 * dns.c - the c-ares adapter (the only file that includes ares.h): non-blocking name
 * resolution on a libevent loop with pgbouncer's cache semantics.
 *
 * c-ares tells us which sockets to watch (dns_sock_state_cb); we give it readiness
 * (dns_fd_cb) and timeouts (one timer, rearmed from ares_timeout). Each name has one
 * struct dns_host: its answer (all addresses, handed out round-robin), expiry and at most one
 * query in flight that every waiting request shares. Hosts belong to zones (the name minus
 * its first label); with dns_zone_check_period the zones' SOA serials are polled one after
 * the other and a grown serial re-resolves the zone's names. Every answer, cached or fresh,
 * is delivered from a per-request event so callbacks never run inside dns_lookup().
 *
 * Entry points: dns_new, dns_reconfigure, dns_lookup, dns_cancel, dns_free, the walkers for
 * the admin console, and dns_library_version for `neki -V`.
 */
#include "neki/base.h"
#include "neki/clock.h"
#include "neki/dns.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <ares.h>
#include <event2/event.h>

#include "neki/config.h"
#include "neki/log.h"
#include "neki/net.h"

#define DNS_MAX_ADDRS 16	/* addresses kept per name */
#define DNS_ERR_LEN 320
#define DNS_T_SOA 6		/* RR type SOA */
#define DNS_C_IN 1		/* class IN */

/* One socket c-ares asked us to watch. */
struct dns_fd {
	struct dns_fd *next;		/* the resolver's list */
	struct dns *d;			/* borrowed: owner */
	ares_socket_t fd;
	struct event *ev;		/* owned */
};

/* A zone: the part of a host name after its first label. */
struct dns_zone {
	struct dns_zone *next;		/* the resolver's list */
	char *name;			/* owned */
	uint32_t serial;		/* last SOA serial seen */
	bool have_serial;		/* serial is valid */
	int count;			/* hosts in the zone */
};

/* One cached name (never freed before the resolver). */
struct dns_host {
	struct dns_host *next;		/* the resolver's list */
	struct dns *d;			/* borrowed: owner */
	struct dns_zone *zone;		/* borrowed; NULL for a name without a dot */
	char *name;			/* owned */
	bool done;			/* an answer (address or failure) is stored */
	bool querying;			/* a c-ares lookup is in flight */
	bool ok;			/* the stored answer has addresses */
	int naddrs;
	struct sockaddr_storage addrs[DNS_MAX_ADDRS];	/* port 0 */
	socklen_t lens[DNS_MAX_ADDRS];
	unsigned rr;			/* round-robin position */
	char err[DNS_ERR_LEN];		/* the failure's text */
	uint64_t expires_us;		/* monotonic; the answer is used until then */
};

struct dns_req {
	struct dns_req *next;		/* the resolver's list of pending requests */
	struct dns *d;			/* borrowed: owner */
	struct dns_host *host;		/* borrowed; NULL for a numeric address */
	int port;
	dns_cb_fn cb;			/* NULL once cancelled */
	void *arg;			/* borrowed */
	struct event *ev;		/* owned: delivers the answer from the loop */
	bool answered;			/* the answer below is filled */
	bool ok;
	struct sockaddr_storage addr;
	socklen_t addrlen;
	char err[DNS_ERR_LEN];
};

struct dns {
	struct event_base *base;	/* borrowed */
	ares_channel ch;		/* owned */
	struct event *timer;		/* owned: c-ares timeouts */
	struct event *zone_timer;	/* owned: dns_zone_check_period */
	struct dns_fd *fds;		/* owned list */
	struct dns_host *hosts;		/* owned list */
	struct dns_zone *zones;		/* owned list */
	struct dns_zone *cur_zone;	/* borrowed: the zone whose SOA is being asked */
	struct dns_req *reqs;		/* owned list of pending requests */
	uint64_t max_ttl_us;
	uint64_t nx_ttl_us;
	uint64_t zone_period_us;	/* 0 = no zone checks */
	dns_addr_gone_fn addr_gone;	/* may be NULL */
	void *addr_gone_arg;		/* borrowed */
	int queries;			/* c-ares queries in flight */
	uint64_t hits;			/* answers served from the cache */
	bool destroying;		/* dns_free() in progress */
};

/* Version of the c-ares library (neki -V, startup log). */
const char *
dns_library_version(void)
{
	return ares_version(NULL);
}

/* ---- driving c-ares from the loop ---- */

static void
dns_rearm_timer(struct dns *d)
{
	struct timeval tv, *tvp;

	if (d->destroying)
		return;
	tvp = ares_timeout(d->ch, NULL, &tv);
	if (tvp != NULL)
		event_add(d->timer, tvp);
	else
		event_del(d->timer);
}

static void
dns_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dns *d = arg;

	ares_process_fd(d->ch, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
	dns_rearm_timer(d);
}

static void
dns_fd_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dns_fd *f = arg;
	struct dns *d = f->d;

	ares_process_fd(d->ch, (what & EV_READ) ? f->fd : ARES_SOCKET_BAD,
			(what & EV_WRITE) ? f->fd : ARES_SOCKET_BAD);
	dns_rearm_timer(d);
}

/* c-ares opens, changes or closes a socket: mirror it with an event. */
static void
dns_sock_state_cb(void *data, ares_socket_t fd, int readable, int writable)
{
	struct dns *d = data;
	struct dns_fd **pp, *f;
	short flags = (short)((readable ? EV_READ : 0) | (writable ? EV_WRITE : 0));

	for (pp = &d->fds; *pp != NULL && (*pp)->fd != fd; pp = &(*pp)->next)
		;
	f = *pp;
	if (flags == 0) {
		if (f != NULL) {
			*pp = f->next;
			event_free(f->ev);
			free(f);
		}
		return;
	}
	if (f == NULL) {
		f = calloc(1, sizeof(*f));
		if (f == NULL)
			return;
		f->d = d;
		f->fd = fd;
		f->next = d->fds;
		d->fds = f;
	} else {
		event_free(f->ev);
	}
	f->ev = event_new(d->base, fd, flags | EV_PERSIST, dns_fd_cb, f);
	if (f->ev != NULL)
		event_add(f->ev, NULL);
}

static uint64_t
dns_secs_to_us(double s)
{
	return s > 0 ? (uint64_t)(s * 1e6) : 0;
}

/* ---- zones ---- */

/* The zone of <name> (after the first dot), created on first use; NULL when none. */
static struct dns_zone *
dns_zone_get(struct dns *d, const char *name)
{
	const char *dot = strchr(name, '.');
	struct dns_zone *z;

	if (dot == NULL || dot[1] == '\0')
		return NULL;
	for (z = d->zones; z != NULL; z = z->next) {
		if (strcasecmp(z->name, dot + 1) == 0)
			return z;
	}
	z = calloc(1, sizeof(*z));
	if (z == NULL || (z->name = strdup(dot + 1)) == NULL) {
		free(z);
		return NULL;
	}
	z->next = d->zones;
	d->zones = z;
	return z;
}

/* ---- hosts ---- */

static struct dns_host *
dns_host_find(struct dns *d, const char *name)
{
	struct dns_host *h;

	for (h = d->hosts; h != NULL; h = h->next) {
		if (strcmp(h->name, name) == 0)
			return h;
	}
	return NULL;
}

/* A new cache entry for <name> (no answer yet), registered in its zone. */
static struct dns_host *
dns_host_new(struct dns *d, const char *name)
{
	struct dns_host *h = calloc(1, sizeof(*h));

	if (h == NULL || (h->name = strdup(name)) == NULL) {
		free(h);
		return NULL;
	}
	h->d = d;
	h->zone = dns_zone_get(d, name);
	if (h->zone != NULL)
		h->zone->count++;
	h->next = d->hosts;
	d->hosts = h;
	return h;
}

static void dns_ares_cb(void *arg, int status, int timeouts, struct ares_addrinfo *res);

/* Ask c-ares for <h>'s addresses (unless a query is already running). */
static void
dns_host_query(struct dns_host *h)
{
	struct ares_addrinfo_hints hints;

	if (h->querying)
		return;
	h->querying = true;
	h->d->queries++;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = ARES_AI_ENVHOSTS;	/* CARES_HOSTS may name another hosts file */
	ares_getaddrinfo(h->d->ch, h->name, NULL, &hints, dns_ares_cb, h);
	dns_rearm_timer(h->d);
}

static bool
dns_same_addr(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET)
		return memcmp(&((const struct sockaddr_in *)a)->sin_addr,
			      &((const struct sockaddr_in *)b)->sin_addr, 4) == 0;
	return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
		      &((const struct sockaddr_in6 *)b)->sin6_addr, 16) == 0;
}

static bool
dns_host_has(const struct dns_host *h, const struct sockaddr_storage *a)
{
	for (int i = 0; i < h->naddrs; i++) {
		if (dns_same_addr(&h->addrs[i], a))
			return true;
	}
	return false;
}

/* Report addresses of the previous answer <old> (n of them) missing from <h>'s new one. */
static void
dns_report_gone(struct dns_host *h, const struct sockaddr_storage *old,
		const socklen_t *lens, int n)
{
	char ip[INET6_ADDRSTRLEN];

	for (int i = 0; i < n; i++) {
		if (dns_host_has(h, &old[i]))
			continue;
		if (old[i].ss_family == AF_INET)
			inet_ntop(AF_INET, &((const struct sockaddr_in *)&old[i])->sin_addr, ip,
				  sizeof(ip));
		else
			inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)&old[i])->sin6_addr,
				  ip, sizeof(ip));
		log_info("DNS: address %s of host \"%s\" is gone", ip, h->name);
		if (h->d->addr_gone != NULL)
			h->d->addr_gone(h->d->addr_gone_arg, h->name,
					(const struct sockaddr *)&old[i], lens[i]);
	}
}

/* Store the addresses of <res> (IPv4 and IPv6 stream addresses, port 0) in <h>. */
static void
dns_host_take(struct dns_host *h, const struct ares_addrinfo *res)
{
	const struct ares_addrinfo_node *n;

	h->naddrs = 0;
	for (n = res != NULL ? res->nodes : NULL; n != NULL && h->naddrs < DNS_MAX_ADDRS;
	     n = n->ai_next) {
		if ((n->ai_family != AF_INET && n->ai_family != AF_INET6) ||
		    (size_t)n->ai_addrlen > sizeof(h->addrs[0]))
			continue;
		memset(&h->addrs[h->naddrs], 0, sizeof(h->addrs[0]));
		memcpy(&h->addrs[h->naddrs], n->ai_addr, (size_t)n->ai_addrlen);
		if (n->ai_family == AF_INET)
			((struct sockaddr_in *)&h->addrs[h->naddrs])->sin_port = 0;
		else
			((struct sockaddr_in6 *)&h->addrs[h->naddrs])->sin6_port = 0;
		if (dns_host_has(h, &h->addrs[h->naddrs]))
			continue;	/* c-ares may list an address once per protocol */
		h->lens[h->naddrs] = (socklen_t)n->ai_addrlen;
		h->naddrs++;
	}
}

/* Record the outcome of a lookup in <h> and set its expiry. */
static void
dns_host_store(struct dns_host *h, int status, const struct ares_addrinfo *res)
{
	struct sockaddr_storage old[DNS_MAX_ADDRS];
	socklen_t old_lens[DNS_MAX_ADDRS];
	int nold = h->ok ? h->naddrs : 0;

	memcpy(old, h->addrs, sizeof(old));
	memcpy(old_lens, h->lens, sizeof(old_lens));
	dns_host_take(h, status == ARES_SUCCESS ? res : NULL);
	h->ok = h->naddrs > 0;
	h->done = true;
	h->rr = 0;
	if (h->ok) {
		h->err[0] = '\0';
		h->expires_us = nk_now_us() + h->d->max_ttl_us;
	} else {
		snprintf(h->err, sizeof(h->err), "could not resolve host \"%s\": %s", h->name,
			 status == ARES_SUCCESS ? "no address" : ares_strerror(status));
		h->expires_us = nk_now_us() + h->d->nx_ttl_us;
		log_warn("DNS lookup failed: %s", h->err);
	}
	dns_report_gone(h, old, old_lens, nold);
}

/* Fill <r> from <h>'s stored answer (the next address of the round-robin). */
static void
dns_req_fill(struct dns_req *r, struct dns_host *h)
{
	r->answered = true;
	r->ok = h->ok;
	if (h->ok) {
		unsigned i = h->rr++ % (unsigned)h->naddrs;

		r->addr = h->addrs[i];
		r->addrlen = h->lens[i];
	} else {
		snprintf(r->err, sizeof(r->err), "%s", h->err);
	}
	event_active(r->ev, EV_TIMEOUT, 0);
}

/* c-ares finished a lookup: store it and answer every request waiting for the name. */
static void
dns_ares_cb(void *arg, int status, int timeouts, struct ares_addrinfo *res)
{
	struct dns_host *h = arg;
	struct dns *d = h->d;

	(void)timeouts;
	h->querying = false;
	d->queries--;
	if (d->destroying || status == ARES_EDESTRUCTION) {
		if (res != NULL)
			ares_freeaddrinfo(res);
		return;
	}
	dns_host_store(h, status, res);
	if (res != NULL)
		ares_freeaddrinfo(res);
	for (struct dns_req *r = d->reqs; r != NULL; r = r->next) {
		if (r->host == h && !r->answered)
			dns_req_fill(r, h);
	}
}

/* ---- requests ---- */

static void
dns_req_free(struct dns_req *r)
{
	struct dns_req **pp;

	for (pp = &r->d->reqs; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == r) {
			*pp = r->next;
			break;
		}
	}
	if (r->ev != NULL)
		event_free(r->ev);
	free(r);
}

/* Deliver the answer (from the loop), then free the request. */
static void
dns_deliver_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dns_req *r = arg;
	struct sockaddr_storage ss = r->addr;

	(void)fd;
	(void)what;
	if (r->cb != NULL && r->ok) {
		if (ss.ss_family == AF_INET)
			((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)r->port);
		else if (ss.ss_family == AF_INET6)
			((struct sockaddr_in6 *)&ss)->sin6_port = htons((uint16_t)r->port);
		r->cb(r->arg, (struct sockaddr *)&ss, r->addrlen, NULL);
	} else if (r->cb != NULL) {
		r->cb(r->arg, NULL, 0, r->err);
	}
	dns_req_free(r);
}

/* A numeric IPv4/IPv6 address needs no lookup: answer <r> from the loop. */
static bool
dns_numeric(struct dns_req *r, const char *name)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)&r->addr;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&r->addr;

	if (inet_pton(AF_INET, name, &sin->sin_addr) == 1) {
		sin->sin_family = AF_INET;
		r->addrlen = sizeof(*sin);
	} else if (inet_pton(AF_INET6, name, &sin6->sin6_addr) == 1) {
		sin6->sin6_family = AF_INET6;
		r->addrlen = sizeof(*sin6);
	} else {
		return false;
	}
	r->answered = true;
	r->ok = true;
	event_active(r->ev, EV_TIMEOUT, 0);
	return true;
}

/* A Unix socket directory ("/dir", "@abstract") is no host name: fail <r> from the loop. */
static bool
dns_unix_dir(struct dns_req *r, const char *name)
{
	if (name[0] != '/' && name[0] != '@')
		return false;
	r->answered = true;
	snprintf(r->err, sizeof(r->err), "could not resolve host \"%.200s\": it is a Unix "
		 "socket directory", name);
	event_active(r->ev, EV_TIMEOUT, 0);
	return true;
}

/* Answer <r> for <host>: from the cache, by joining a running query, or by a new query. */
static bool
dns_req_start(struct dns *d, struct dns_req *r, const char *host)
{
	struct dns_host *h = dns_host_find(d, host);

	if (h == NULL && (h = dns_host_new(d, host)) == NULL)
		return false;
	r->host = h;
	if (h->done && !h->querying && nk_now_us() < h->expires_us) {
		d->hits++;
		dns_req_fill(r, h);
		return true;
	}
	dns_host_query(h);
	return true;
}

/* Start resolving <host>; see neki/dns.h. */
struct dns_req *
dns_lookup(struct dns *d, const char *host, int port, dns_cb_fn cb, void *arg)
{
	struct dns_req *r = calloc(1, sizeof(*r));

	if (r == NULL)
		return NULL;
	r->d = d;
	r->port = port;
	r->cb = cb;
	r->arg = arg;
	r->ev = event_new(d->base, -1, 0, dns_deliver_cb, r);
	if (r->ev == NULL) {
		free(r);
		return NULL;
	}
	r->next = d->reqs;
	d->reqs = r;
	if (dns_numeric(r, host) || dns_unix_dir(r, host) || dns_req_start(d, r, host))
		return r;
	dns_req_free(r);
	return NULL;
}

/* Forget <r>: the answer (when it comes) is cached but not delivered. */
void
dns_cancel(struct dns_req *r)
{
	r->cb = NULL;
	r->arg = NULL;
}

uint64_t
dns_cache_hits(const struct dns *d)
{
	return d->hits;
}

/* ---- zone serial checks ---- */

static void dns_soa_cb(void *arg, int status, int timeouts, unsigned char *abuf, int alen);

/* Arm the next round of zone checks after dns_zone_check_period. */
static void
dns_zone_arm(struct dns *d)
{
	struct timeval tv;

	if (d->zone_period_us == 0 || d->destroying) {
		event_del(d->zone_timer);
		return;
	}
	tv.tv_sec = (time_t)(d->zone_period_us / 1000000u);
	tv.tv_usec = (suseconds_t)(d->zone_period_us % 1000000u);
	event_add(d->zone_timer, &tv);
}

/* Ask for the SOA of <z> (answered in dns_soa_cb). */
static void
dns_zone_ask(struct dns *d, struct dns_zone *z)
{
	d->cur_zone = z;
	d->queries++;
	log_debug("DNS: asking the SOA serial of zone \"%s\"", z->name);
	ares_query(d->ch, z->name, DNS_C_IN, DNS_T_SOA, dns_soa_cb, d);
	dns_rearm_timer(d);
}

/* The zone after d->cur_zone, or the end of the round (then wait for the next period). */
static void
dns_zone_next(struct dns *d)
{
	struct dns_zone *z = d->cur_zone != NULL ? d->cur_zone->next : NULL;

	if (z != NULL) {
		dns_zone_ask(d, z);
		return;
	}
	d->cur_zone = NULL;
	dns_zone_arm(d);
}

/* A round of zone checks starts. */
static void
dns_zone_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dns *d = arg;

	(void)fd;
	(void)what;
	if (d->zones == NULL || d->cur_zone != NULL) {
		dns_zone_arm(d);
		return;
	}
	dns_zone_ask(d, d->zones);
}

/*
 * <z> has SOA serial <serial>. The first answer is the baseline; a larger serial (in
 * serial-number arithmetic) expires the zone's names and resolves them again now.
 */
static void
dns_zone_serial(struct dns *d, struct dns_zone *z, uint32_t serial)
{
	struct dns_host *h;

	if (z->have_serial && (int32_t)(serial - z->serial) <= 0) {
		log_debug("DNS: zone \"%s\" unchanged: serial=%u", z->name, serial);
		return;
	}
	if (z->have_serial)
		log_info("DNS: zone \"%s\" serial changed: old=%u new=%u", z->name, z->serial,
			 serial);
	else
		log_debug("DNS: zone \"%s\" serial=%u", z->name, serial);
	if (!z->have_serial) {
		z->have_serial = true;
		z->serial = serial;
		return;
	}
	z->serial = serial;
	for (h = d->hosts; h != NULL; h = h->next) {
		if (h->zone == z && h->done) {
			h->expires_us = 0;
			dns_host_query(h);
		}
	}
}

/* The SOA of the zone in d->cur_zone arrived (or failed). */
static void
dns_soa_cb(void *arg, int status, int timeouts, unsigned char *abuf, int alen)
{
	struct dns *d = arg;
	struct ares_soa_reply *soa = NULL;
	struct dns_zone *z = d->cur_zone;

	(void)timeouts;
	d->queries--;
	if (d->destroying || status == ARES_EDESTRUCTION)
		return;
	if (status == ARES_SUCCESS)
		status = ares_parse_soa_reply(abuf, alen, &soa);
	if (status != ARES_SUCCESS) {
		log_debug("DNS: no SOA serial for zone \"%s\": %s", z->name, ares_strerror(status));
	} else {
		dns_zone_serial(d, z, soa->serial);
		ares_free_data(soa);
	}
	dns_zone_next(d);
}

/* ---- SHOW DNS_HOSTS / DNS_ZONES / LISTS ---- */

static int
dns_cmp_host(const void *a, const void *b)
{
	return strcmp((*(struct dns_host *const *)a)->name, (*(struct dns_host *const *)b)->name);
}

static int
dns_cmp_zone(const void *a, const void *b)
{
	return strcmp((*(struct dns_zone *const *)a)->name, (*(struct dns_zone *const *)b)->name);
}

/* <h>'s addresses joined with commas into <buf>. */
static void
dns_host_addrs(const struct dns_host *h, char *buf, size_t len)
{
	char ip[INET6_ADDRSTRLEN];
	size_t used = 0;

	buf[0] = '\0';
	for (int i = 0; h->ok && i < h->naddrs && used < len; i++) {
		if (h->addrs[i].ss_family == AF_INET)
			inet_ntop(AF_INET, &((const struct sockaddr_in *)&h->addrs[i])->sin_addr,
				  ip, sizeof(ip));
		else
			inet_ntop(AF_INET6,
				  &((const struct sockaddr_in6 *)&h->addrs[i])->sin6_addr, ip,
				  sizeof(ip));
		used += (size_t)snprintf(buf + used, len - used, "%s%s", i > 0 ? "," : "", ip);
	}
}

/* Every cached name in name order: remaining TTL in seconds and its addresses. */
void
dns_walk_hosts(struct dns *d, dns_host_walk_fn fn, void *arg)
{
	char addrs[DNS_MAX_ADDRS * (INET6_ADDRSTRLEN + 1)];
	uint64_t now = nk_now_us();
	struct dns_host **v, *h;
	size_t n = 0, i;

	for (h = d->hosts; h != NULL; h = h->next)
		n++;
	v = calloc(n > 0 ? n : 1, sizeof(*v));
	if (v == NULL)
		return;
	for (h = d->hosts, i = 0; h != NULL; h = h->next)
		v[i++] = h;
	qsort(v, n, sizeof(*v), dns_cmp_host);
	for (i = 0; i < n; i++) {
		dns_host_addrs(v[i], addrs, sizeof(addrs));
		fn(arg, v[i]->name, v[i]->expires_us > now ?
		   (v[i]->expires_us - now) / 1000000u : 0, addrs);
	}
	free(v);
}

/* Every zone in name order: its serial and the number of names in it. */
void
dns_walk_zones(struct dns *d, dns_zone_walk_fn fn, void *arg)
{
	struct dns_zone **v, *z;
	size_t n = 0, i;

	for (z = d->zones; z != NULL; z = z->next)
		n++;
	v = calloc(n > 0 ? n : 1, sizeof(*v));
	if (v == NULL)
		return;
	for (z = d->zones, i = 0; z != NULL; z = z->next)
		v[i++] = z;
	qsort(v, n, sizeof(*v), dns_cmp_zone);
	for (i = 0; i < n; i++)
		fn(arg, v[i]->name, v[i]->serial, v[i]->count);
	free(v);
}

/* Counts for SHOW LISTS. */
void
dns_get_info(const struct dns *d, struct dns_info *out)
{
	const struct dns_host *h;
	const struct dns_zone *z;
	const struct dns_req *r;

	memset(out, 0, sizeof(*out));
	for (h = d->hosts; h != NULL; h = h->next)
		out->names++;
	for (z = d->zones; z != NULL; z = z->next)
		out->zones++;
	for (r = d->reqs; r != NULL; r = r->next)
		out->pending += r->answered ? 0 : 1;
	out->queries = d->queries;
}

/* ---- resolver ---- */

/* The resolver settings of <c>. */
void
dns_opts_from_cfg(struct dns_opts *o, struct dns_opts_ext *x, const struct cfg *c)
{
	memset(o, 0, sizeof(*o));
	memset(x, 0, sizeof(*x));
	o->max_ttl = c->dns.dns_max_ttl;
	o->nxdomain_ttl = c->dns.dns_nxdomain_ttl;
	o->resolv_conf = c->proc.resolv_conf;
	x->zone_check_period = c->dns.dns_zone_check_period;
}

/* The c-ares channel for <o> and <x>. */
static bool
dns_channel(struct dns *d, const struct dns_opts *o, const struct dns_opts_ext *x,
	    struct nk_error *err)
{
	struct ares_options ao;
	int mask = ARES_OPT_SOCK_STATE_CB;
	int rc;

	memset(&ao, 0, sizeof(ao));
	ao.sock_state_cb = dns_sock_state_cb;
	ao.sock_state_cb_data = d;
	if (o->lookups != NULL && o->lookups[0] != '\0') {
		ao.lookups = (char *)(uintptr_t)o->lookups;	/* c-ares copies it */
		mask |= ARES_OPT_LOOKUPS;
	}
	if (o->resolv_conf != NULL && o->resolv_conf[0] != '\0') {
		ao.resolvconf_path = (char *)(uintptr_t)o->resolv_conf;	/* copied */
		mask |= ARES_OPT_RESOLVCONF;
	}
	if (x->port > 0) {
		ao.udp_port = (unsigned short)x->port;
		ao.tcp_port = (unsigned short)x->port;
		mask |= ARES_OPT_UDP_PORT | ARES_OPT_TCP_PORT;
	}
	rc = ares_init_options(&d->ch, &ao, mask);
	if (rc != ARES_SUCCESS)
		return nk_error_set(err, ERRCODE_SYSTEM_ERROR,
				    "could not start the DNS resolver: %s",
				    ares_strerror(rc));
	return true;
}

/* Create a resolver with default extra settings; see neki/dns.h. */
struct dns *
dns_new(struct event_base *base, const struct dns_opts *o, struct nk_error *err)
{
	return dns_new_ext(base, o, NULL, err);
}

/* Create a resolver; see neki/dns.h. */
struct dns *
dns_new_ext(struct event_base *base, const struct dns_opts *o, const struct dns_opts_ext *x,
	    struct nk_error *err)
{
	static const struct dns_opts_ext none;
	static bool lib_ready;
	struct dns *d;

	if (x == NULL)
		x = &none;

	if (!lib_ready && ares_library_init(ARES_LIB_INIT_ALL) != ARES_SUCCESS) {
		nk_error_set(err, ERRCODE_SYSTEM_ERROR, "could not initialise c-ares");
		return NULL;
	}
	lib_ready = true;
	d = calloc(1, sizeof(*d));
	if (d == NULL)
		goto fail_mem;
	d->base = base;
	d->timer = event_new(base, -1, 0, dns_timer_cb, d);
	d->zone_timer = event_new(base, -1, 0, dns_zone_timer_cb, d);
	if (d->timer == NULL || d->zone_timer == NULL)
		goto fail_mem;
	if (!dns_channel(d, o, x, err))
		goto fail;
	dns_reconfigure(d, o, x);
	return d;
fail_mem:
	nk_error_oom(err);
fail:
	if (d != NULL && d->timer != NULL)
		event_free(d->timer);
	if (d != NULL && d->zone_timer != NULL)
		event_free(d->zone_timer);
	free(d);
	return NULL;
}

/* Reloadable settings: TTLs, zone check period, the gone-address callback. */
void
dns_reconfigure(struct dns *d, const struct dns_opts *o, const struct dns_opts_ext *x)
{
	uint64_t period = x != NULL ? dns_secs_to_us(x->zone_check_period) : 0;

	d->max_ttl_us = dns_secs_to_us(o->max_ttl);
	d->nx_ttl_us = dns_secs_to_us(o->nxdomain_ttl);
	d->addr_gone = x != NULL ? x->addr_gone : NULL;
	d->addr_gone_arg = x != NULL ? x->addr_gone_arg : NULL;
	if (period != d->zone_period_us || period == 0) {
		d->zone_period_us = period;
		if (d->cur_zone == NULL)
			dns_zone_arm(d);
	}
}

/* Stop the resolver; pending requests end silently. */
void
dns_free(struct dns *d)
{
	struct dns_host *h, *hn;
	struct dns_zone *z, *zn;

	if (d == NULL)
		return;
	d->destroying = true;
	for (struct dns_req *r = d->reqs; r != NULL; r = r->next)
		dns_cancel(r);
	ares_destroy(d->ch);
	while (d->reqs != NULL)
		dns_req_free(d->reqs);
	while (d->fds != NULL)
		dns_sock_state_cb(d, d->fds->fd, 0, 0);
	for (h = d->hosts; h != NULL; h = hn) {
		hn = h->next;
		free(h->name);
		free(h);
	}
	for (z = d->zones; z != NULL; z = zn) {
		zn = z->next;
		free(z->name);
		free(z);
	}
	event_free(d->timer);
	event_free(d->zone_timer);
	free(d);
}

/* ---- the process's resolver ---- */

static struct dns *dns_proc;	/* dns_process_init(); owned */

/* Create the process's resolver from <c>. */
bool
dns_process_init(struct event_base *base, const struct cfg *c, struct nk_error *err)
{
	struct dns_opts o;
	struct dns_opts_ext x;

	if (dns_proc != NULL)
		return true;
	dns_opts_from_cfg(&o, &x, c);
	dns_proc = dns_new_ext(base, &o, &x, err);
	return dns_proc != NULL;
}

struct dns *
dns_process(void)
{
	return dns_proc;
}

void
dns_process_on_addr_gone(dns_addr_gone_fn fn, void *arg)
{
	if (dns_proc == NULL)
		return;
	dns_proc->addr_gone = fn;
	dns_proc->addr_gone_arg = arg;
}

/* Apply the reloadable settings of <c> to the process's resolver. */
void
dns_process_reload(const struct cfg *c)
{
	struct dns_opts o;
	struct dns_opts_ext x;

	if (dns_proc == NULL)
		return;
	dns_opts_from_cfg(&o, &x, c);
	x.addr_gone = dns_proc->addr_gone;
	x.addr_gone_arg = dns_proc->addr_gone_arg;
	dns_reconfigure(dns_proc, &o, &x);
}

void
dns_process_free(void)
{
	dns_free(dns_proc);
	dns_proc = NULL;
}
