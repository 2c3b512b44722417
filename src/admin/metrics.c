/*
 * metrics.c - Prometheus / OpenMetrics text over HTTP from the admin process, on
 * metrics_listen_addr:metrics_listen_port (off when the port is 0), so that no external
 * exporter is needed.
 *
 * Any GET answers the whole exposition (the path is ignored): per-database stats (the
 * SHOW STATS totals, counters), pools (SHOW POOLS, gauges, gathered from every worker like
 * the console's lists), workers (state, clients, links, topology revision) and shards (the
 * [shards] entries with the server links of their databases). One request per connection
 * (HTTP/1.0 style: the answer ends with the connection). Entry point: metrics_init().
 */
#include "neki/base.h"

#include "admin_int.h"
#include "recover.h"
#include "servers.h"

#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "neki/config.h"
#include "neki/log.h"
#include "neki/shm_servers.h"

#define METRICS_REQ_MAX 8192	/* bytes of request head accepted */

/* One HTTP connection. */
struct mconn {
	int fd;
	struct event *ev;		/* owned: read, then write */
	char req[METRICS_REQ_MAX];
	size_t rlen;
	char *out;			/* owned: the response */
	size_t olen, ocap, opos;
	bool oom;			/* the response could not be built */
};

static struct event_base *mbase;	/* borrowed */
static struct event *listen_ev;		/* owned */

static void
mconn_free(struct mconn *c)
{
	if (c->ev != NULL)
		event_free(c->ev);
	close(c->fd);
	free(c->out);
	free(c);
}

/* Append printf text to the response. */
static void mput(struct mconn *c, const char *fmt, ...) NK_PRINTF(2, 3);

static void
mput(struct mconn *c, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(c->out ? c->out + c->olen : NULL, c->out ? c->ocap - c->olen : 0,
			      fmt, ap);
		va_end(ap);
		if (n < 0 || c->oom)
			return;
		if (c->out != NULL && c->olen + (size_t)n < c->ocap) {
			c->olen += (size_t)n;
			return;
		}
		size_t nc = (c->ocap ? c->ocap * 2 : 16384) + (size_t)n;
		char *no = realloc(c->out, nc);

		if (no == NULL) {
			c->oom = true;
			return;
		}
		c->out = no;
		c->ocap = nc;
	}
}

/* "# TYPE" and "# HELP" lines of a family. */
static void
family(struct mconn *c, const char *name, const char *type, const char *help)
{
	mput(c, "# TYPE %s %s\n# HELP %s %s\n", name, type, name, help);
}

/* A label value with OpenMetrics escaping (backslash, quote, newline). */
static void
label(struct mconn *c, const char *v)
{
	for (; *v != '\0'; v++) {
		if (*v == '\\' || *v == '"')
			mput(c, "\\%c", *v);
		else if (*v == '\n')
			mput(c, "\\n");
		else
			mput(c, "%c", *v);
	}
}

static void
write_stats(struct mconn *c)
{
	size_t n;
	struct shm_stats total;
	struct stats_row *rows = stats_rows(&n, &total);

	for (size_t k = 0; k < SHM_STATS_WORDS; k++) {
		char name[96];

		snprintf(name, sizeof(name), "neki_stats_%s", stats_field_name(k));
		family(c, name, "counter", strstr(name, "time") ?
		       "SHOW STATS total (microseconds) per database" :
		       "SHOW STATS total per database");
		for (size_t i = 0; i < n; i++) {
			mput(c, "%s_total{database=\"", name);
			label(c, rows[i].name);
			mput(c, "\"} %" PRIu64 "\n", ((const uint64_t *)&rows[i].cur)[k]);
		}
	}
	free(rows);
}

/* SHOW POOLS columns exported, with their index in the row. */
static const struct { int col; const char *name; } pool_cols[] = {
	{ 2, "cl_active" }, { 3, "cl_waiting" }, { 6, "sv_active" }, { 9, "sv_idle" },
	{ 10, "sv_used" }, { 11, "sv_tested" }, { 12, "sv_login" }, { 14, "maxwait_us" },
};

struct pool_pass {
	struct mconn *c;
	size_t k;		/* which pool_cols entry */
};

static void
pool_sample(void *arg, const char *const *v)
{
	struct pool_pass *p = arg;

	mput(p->c, "neki_pool_%s{database=\"", pool_cols[p->k].name);
	label(p->c, v[0]);
	mput(p->c, "\",user=\"");
	label(p->c, v[1]);
	mput(p->c, "\"} %s\n", v[pool_cols[p->k].col]);
}

static void
write_pools(struct mconn *c)
{
	for (size_t k = 0; k < NK_ARRAY_LEN(pool_cols); k++) {
		struct pool_pass p = { c, k };
		char name[64];

		snprintf(name, sizeof(name), "neki_pool_%s", pool_cols[k].name);
		family(c, name, "gauge", "SHOW POOLS column, summed over the workers");
		lists_foreach_pool(pool_sample, &p);
	}
}

static void
write_workers(struct mconn *c)
{
	static const char *const fams[] = { "up", "clients", "links", "revision" };

	for (size_t f = 0; f < NK_ARRAY_LEN(fams); f++) {
		char name[48];

		snprintf(name, sizeof(name), "neki_worker_%s", fams[f]);
		family(c, name, "gauge", f == 0 ? "1 when the worker runs (not paused or stopping)" :
		       "SHOW WORKERS column");
		for (unsigned i = 0; i < shm_n_procs(); i++) {
			struct shm_proc *p = shm_proc(i);
			int64_t v = f == 0 ? atomic_load(&p->state) == SHM_PST_RUNNING :
				    f == 1 ? atomic_load(&p->clients) :
				    f == 2 ? atomic_load(&p->links) :
				    (int64_t)atomic_load(&p->revision_seen);

			if (atomic_load(&p->kind) != SHM_PROC_WORKER || atomic_load(&p->pid) == 0)
				continue;
			mput(c, "%s{slot=\"%u\"} %" PRId64 "\n", name, i, v);
		}
	}
}

/* The polled servers of the shards with standbys: which one is the primary, or lags. */
static void
write_servers(struct mconn *c, const struct cfg *cfg, bool lag)
{
	family(c, lag ? "neki_shard_server_lag_seconds" : "neki_shard_server_primary", "gauge",
	       lag ? "replay lag of a standby behind its primary (known lags only)" :
	       "1 for the server of a shard with standbys that writes go to, else 0");
	for (size_t i = 0; i < cfg->n_shards; i++) {
		struct shm_server v[CFG_SHARD_SERVERS_MAX];
		size_t n = servers_snapshot(cfg->shards[i].uid, v, NK_ARRAY_LEN(v));

		for (size_t k = 0; k < n; k++) {
			if (lag && !((v[k].flags & SHM_SRV_F_LAG) && v[k].role == SHM_SRV_STANDBY))
				continue;
			mput(c, "%s{shard=\"", lag ? "neki_shard_server_lag_seconds" :
			     "neki_shard_server_primary");
			label(c, cfg->shards[i].uid);
			if (lag)
				mput(c, "\",server=\"%u\"} %.3f\n", v[k].index,
				     (double)v[k].lag_ms / 1000.0);
			else
				mput(c, "\",server=\"%u\"} %d\n", v[k].index,
				     (v[k].flags & SHM_SRV_F_CHOSEN) != 0);
		}
	}
}

/* Atomic commits the recovery found in doubt (its last pass, every second). */
static void
write_in_doubt(struct mconn *c)
{
	double oldest;
	size_t n = recover_in_doubt(&oldest);

	family(c, "neki_atomic_in_doubt", "gauge",
	       "prepared transactions of atomic commits older than the grace period");
	mput(c, "neki_atomic_in_doubt %zu\n", n);
	family(c, "neki_atomic_in_doubt_oldest_seconds", "gauge",
	       "age of the oldest of them (0 when none)");
	mput(c, "neki_atomic_in_doubt_oldest_seconds %.3f\n", oldest);
}

static void
write_shards(struct mconn *c)
{
	const struct cfg *cfg = cfg_current();

	family(c, "neki_shard_configured", "gauge", "1 for every [shards] entry");
	for (size_t i = 0; i < cfg->n_shards; i++) {
		mput(c, "neki_shard_configured{shard=\"");
		label(c, cfg->shards[i].uid);
		mput(c, "\"} 1\n");
	}
	write_servers(c, cfg, false);
	write_servers(c, cfg, true);
}

/* Write what is left of the response; the connection ends with it. */
static void
write_cb(evutil_socket_t fd, short what, void *arg)
{
	struct mconn *c = arg;
	ssize_t n;

	if ((what & EV_TIMEOUT) != 0) {
		mconn_free(c);
		return;
	}
	while (c->opos < c->olen) {
		n = send(fd, c->out + c->opos, c->olen - c->opos, MSG_NOSIGNAL);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0)
			break;
		c->opos += (size_t)n;
	}
	mconn_free(c);
}

/* The rows are gathered: build the exposition and start writing. */
static void
respond(void *arg)
{
	struct mconn *c = arg;
	struct timeval tv = { 10, 0 };

	mput(c, "HTTP/1.0 200 OK\r\nContent-Type: application/openmetrics-text; "
	     "version=1.0.0; charset=utf-8\r\nConnection: close\r\n\r\n");
	write_stats(c);
	write_pools(c);
	write_workers(c);
	write_shards(c);
	write_in_doubt(c);
	mput(c, "# EOF\n");
	event_free(c->ev);
	c->ev = event_new(mbase, c->fd, EV_WRITE | EV_PERSIST, write_cb, c);
	if (c->oom || c->ev == NULL || event_add(c->ev, &tv) == -1) {
		log_warn("metrics: could not build the response");
		mconn_free(c);
	}
}

/* Read the request head; once complete, gather the workers' rows. */
static void
read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct mconn *c = arg;
	ssize_t n;

	if ((what & EV_TIMEOUT) != 0) {
		mconn_free(c);
		return;
	}
	n = recv(fd, c->req + c->rlen, sizeof(c->req) - 1 - c->rlen, 0);
	if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (n <= 0) {
		mconn_free(c);
		return;
	}
	c->rlen += (size_t)n;
	c->req[c->rlen] = '\0';
	if (strstr(c->req, "\r\n\r\n") == NULL && strstr(c->req, "\n\n") == NULL) {
		if (c->rlen == sizeof(c->req) - 1)
			mconn_free(c);	/* an oversized head: no answer */
		return;
	}
	event_del(c->ev);
	if (!lists_gather_run(respond, c))
		mconn_free(c);
}

static void
accept_cb(evutil_socket_t lfd, short what, void *arg)
{
	struct timeval tv = { 10, 0 };

	for (int i = 0; i < 16; i++) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct mconn *c;

		if (fd == -1)
			return;
		if ((c = calloc(1, sizeof(*c))) == NULL) {
			close(fd);
			return;
		}
		c->fd = fd;
		c->ev = event_new(mbase, fd, EV_READ | EV_PERSIST, read_cb, c);
		if (c->ev == NULL || event_add(c->ev, &tv) == -1)
			mconn_free(c);
	}
}

/* A listening socket on <addr>:<port> ("*" = every address), or -1 (logged). */
static int
metrics_bind(const char *addr, int port)
{
	struct addrinfo hints = { .ai_flags = AI_PASSIVE | AI_NUMERICSERV,
				  .ai_socktype = SOCK_STREAM }, *res;
	char service[16];
	int fd = -1, one = 1, rc;

	snprintf(service, sizeof(service), "%d", port);
	rc = getaddrinfo(strcmp(addr, "*") == 0 || addr[0] == '\0' ? NULL : addr, service, &hints,
			 &res);
	if (rc != 0) {
		log_error("metrics: cannot resolve %s: %s", addr, gai_strerror(rc));
		return -1;
	}
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd == -1 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == -1 ||
	    bind(fd, res->ai_addr, res->ai_addrlen) == -1 || listen(fd, 64) == -1) {
		log_error("metrics: could not listen on %s:%d: %s", addr, port, strerror(errno));
		if (fd != -1)
			close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	return fd;
}

void
metrics_init(struct event_base *base)
{
	const struct cfg *c = cfg_current();
	int fd;

	mbase = base;
	if (c->neki.metrics_listen_port == 0 || listen_ev != NULL)
		return;
	fd = metrics_bind(c->neki.metrics_listen_addr ? c->neki.metrics_listen_addr : "127.0.0.1",
			  c->neki.metrics_listen_port);
	if (fd == -1)
		return;
	listen_ev = event_new(base, fd, EV_READ | EV_PERSIST, accept_cb, NULL);
	if (listen_ev == NULL || event_add(listen_ev, NULL) == -1) {
		log_error("metrics: could not watch the listener");
		close(fd);
		return;
	}
	log_info("metrics: serving OpenMetrics on %s:%d", c->neki.metrics_listen_addr,
		 c->neki.metrics_listen_port);
}
