/*
 * dns.c - the c-ares adapter (the only file that includes ares.h): non-blocking name
 * resolution on a libevent loop, with pgbouncer's answer cache (dns_max_ttl for answers,
 * dns_nxdomain_ttl for failures; the records' own TTL is ignored, as pgbouncer does).
 *
 * c-ares tells us which sockets to watch (dns_sock_state_cb); we give it readiness
 * (dns_fd_cb) and timeouts (one timer, rearmed from ares_timeout). Every answer, cached or
 * fresh, is delivered from a per-request event so that callbacks never run inside
 * dns_lookup(). Entry points: dns_new, dns_lookup, dns_cancel, dns_free, and
 * dns_library_version for `neki -V`.
 */
#include "neki/base.h"
#include "neki/dns.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ares.h>
#include <event2/event.h>

#include "neki/net.h"

/* One socket c-ares asked us to watch. */
struct dns_fd {
	struct dns_fd *next;		/* the resolver's list */
	struct dns *d;			/* borrowed: owner */
	ares_socket_t fd;
	struct event *ev;		/* owned */
};

/* One cached answer. */
struct dns_cache {
	struct dns_cache *next;		/* the resolver's list */
	char *name;			/* owned */
	bool ok;			/* an address, or a cached failure */
	struct sockaddr_storage addr;	/* port 0 */
	socklen_t addrlen;
	char err[200];			/* the failure's reason */
	uint64_t expires_us;		/* monotonic */
};

struct dns_req {
	struct dns_req *next;		/* the resolver's list of pending requests */
	struct dns *d;			/* borrowed: owner */
	char *name;			/* owned */
	int port;
	dns_cb_fn cb;			/* NULL once cancelled */
	void *arg;			/* borrowed */
	struct event *ev;		/* owned: delivers the answer from the loop */
	bool answered;			/* c-ares (or the cache) answered */
	bool ok;
	struct sockaddr_storage addr;
	socklen_t addrlen;
	char err[200];
};

struct dns {
	struct event_base *base;	/* borrowed */
	ares_channel ch;		/* owned */
	struct event *timer;		/* owned: c-ares timeouts */
	struct dns_fd *fds;		/* owned list */
	struct dns_cache *cache;	/* owned list */
	struct dns_req *reqs;		/* owned list of pending requests */
	uint64_t max_ttl_us;
	uint64_t nx_ttl_us;
	uint64_t hits;			/* answers served from the cache */
	bool destroying;		/* dns_free() in progress */
};

/* Version of the c-ares library (neki -V, startup log). */
const char *
dns_library_version(void)
{
	return ares_version(NULL);
}

static uint64_t
dns_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
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

/* ---- cache ---- */

static struct dns_cache *
dns_cache_find(struct dns *d, const char *name)
{
	for (struct dns_cache *c = d->cache; c != NULL; c = c->next) {
		if (strcmp(c->name, name) == 0)
			return c;
	}
	return NULL;
}

/* Remember <r>'s answer for the configured TTL. */
static void
dns_cache_store(struct dns *d, const struct dns_req *r)
{
	uint64_t ttl = r->ok ? d->max_ttl_us : d->nx_ttl_us;
	struct dns_cache *c;

	if (ttl == 0)
		return;
	c = dns_cache_find(d, r->name);
	if (c == NULL) {
		c = calloc(1, sizeof(*c));
		if (c == NULL || (c->name = strdup(r->name)) == NULL) {
			free(c);
			return;
		}
		c->next = d->cache;
		d->cache = c;
	}
	c->ok = r->ok;
	c->addr = r->addr;
	c->addrlen = r->addrlen;
	snprintf(c->err, sizeof(c->err), "%s", r->err);
	c->expires_us = dns_now_us() + ttl;
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
	free(r->name);
	free(r);
}

/* Deliver the answer (from the loop), then free the request. */
static void
dns_deliver_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dns_req *r = arg;
	struct sockaddr_storage ss = r->addr;

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

/* c-ares finished a lookup. */
static void
dns_ares_cb(void *arg, int status, int timeouts, struct ares_addrinfo *res)
{
	struct dns_req *r = arg;

	r->answered = true;
	if (status == ARES_SUCCESS && res != NULL && res->nodes != NULL &&
	    res->nodes->ai_addrlen <= sizeof(r->addr)) {
		r->ok = true;
		memcpy(&r->addr, res->nodes->ai_addr, res->nodes->ai_addrlen);
		r->addrlen = res->nodes->ai_addrlen;
	} else {
		snprintf(r->err, sizeof(r->err), "could not resolve host \"%s\": %s", r->name,
			 status == ARES_SUCCESS ? "no address" : ares_strerror(status));
	}
	if (res != NULL)
		ares_freeaddrinfo(res);
	if (r->d->destroying || status == ARES_EDESTRUCTION) {
		dns_req_free(r);
		return;
	}
	dns_cache_store(r->d, r);
	event_active(r->ev, EV_TIMEOUT, 0);
}

/* Answer <r> from a valid cache entry; false when there is none. */
static bool
dns_from_cache(struct dns *d, struct dns_req *r)
{
	struct dns_cache *c = dns_cache_find(d, r->name);

	if (c == NULL || dns_now_us() >= c->expires_us)
		return false;
	r->answered = true;
	r->ok = c->ok;
	r->addr = c->addr;
	r->addrlen = c->addrlen;
	snprintf(r->err, sizeof(r->err), "%s", c->err);
	d->hits++;
	event_active(r->ev, EV_TIMEOUT, 0);
	return true;
}

/* A numeric IPv4/IPv6 address needs no lookup: answer <r> from the loop. */
static bool
dns_numeric(struct dns_req *r)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)&r->addr;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&r->addr;

	if (inet_pton(AF_INET, r->name, &sin->sin_addr) == 1) {
		sin->sin_family = AF_INET;
		r->addrlen = sizeof(*sin);
	} else if (inet_pton(AF_INET6, r->name, &sin6->sin6_addr) == 1) {
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

/* Start resolving <host>; see neki/dns.h. */
struct dns_req *
dns_lookup(struct dns *d, const char *host, int port, dns_cb_fn cb, void *arg)
{
	struct ares_addrinfo_hints hints;
	struct dns_req *r = calloc(1, sizeof(*r));

	if (r == NULL)
		return NULL;
	r->d = d;
	r->port = port;
	r->cb = cb;
	r->arg = arg;
	r->name = strdup(host);
	r->ev = event_new(d->base, -1, 0, dns_deliver_cb, r);
	if (r->name == NULL || r->ev == NULL) {
		if (r->ev != NULL)
			event_free(r->ev);
		free(r->name);
		free(r);
		return NULL;
	}
	r->next = d->reqs;
	d->reqs = r;
	if (dns_numeric(r) || dns_from_cache(d, r))
		return r;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	ares_getaddrinfo(d->ch, host, NULL, &hints, dns_ares_cb, r);
	dns_rearm_timer(d);
	return r;
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

/* ---- resolver ---- */

/* Create a resolver; see neki/dns.h. */
struct dns *
dns_new(struct event_base *base, const struct dns_opts *o, struct nk_error *err)
{
	static bool lib_ready;
	struct ares_options ao;
	int mask = ARES_OPT_SOCK_STATE_CB;
	struct dns *d;
	int rc;

	if (!lib_ready && ares_library_init(ARES_LIB_INIT_ALL) != ARES_SUCCESS) {
		nk_error_set(err, "58000", "could not initialise c-ares");
		return NULL;
	}
	lib_ready = true;
	d = calloc(1, sizeof(*d));
	if (d == NULL || (d->timer = event_new(base, -1, 0, dns_timer_cb, d)) == NULL) {
		free(d);
		nk_error_set(err, "53200", "out of memory");
		return NULL;
	}
	d->base = base;
	d->max_ttl_us = o->max_ttl > 0 ? (uint64_t)(o->max_ttl * 1e6) : 0;
	d->nx_ttl_us = o->nxdomain_ttl > 0 ? (uint64_t)(o->nxdomain_ttl * 1e6) : 0;
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
	rc = ares_init_options(&d->ch, &ao, mask);
	if (rc != ARES_SUCCESS) {
		nk_error_set(err, "58000", "could not start the DNS resolver: %s", ares_strerror(rc));
		event_free(d->timer);
		free(d);
		return NULL;
	}
	return d;
}

/* Stop the resolver; pending requests end silently. */
void
dns_free(struct dns *d)
{
	struct dns_cache *c, *cn;

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
	for (c = d->cache; c != NULL; c = cn) {
		cn = c->next;
		free(c->name);
		free(c);
	}
	event_free(d->timer);
	free(d);
}
