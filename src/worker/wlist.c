/*
 * wlist.c - this worker's rows for the console's lists (SHOW CLIENTS, SERVERS, SOCKETS,
 * POOLS, DNS_HOSTS, DNS_ZONES, MEM), written into its shm list area on SHM_CMD_LIST.
 * MEM rows ('m': name, size, used, free, memtotal) count this worker's live objects when
 * asked: sessions, links, pools, socket buffers, shared prepared statements. PEER_POOLS rows
 * ('e': peer_id and pgbouncer's four counters) are its cancel forwards per peer. LINK rows
 * ('x': client id, shard uid, backend pid) are the shard links routed sessions hold, which
 * the distributed deadlock detector maps the shards' lock waits with (admin/deadlock.c).
 *
 * The admin process formats and merges the rows of every worker; here each row is text
 * values in pgbouncer's column order (shm_list_put_row). `ptr` and `link` are the global
 * socket ids in hex ("0x1f"): unique across workers, unlike heap addresses of forked
 * processes, and a client's `link` is its server's `ptr`. Times travel as epoch seconds.
 * Entry point: session_list_rows().
 */
#include "neki/base.h"

#include "neki/session.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "neki/dns.h"
#include "neki/shm.h"
#include "neki/shm_list.h"
#include "neki/tls.h"
#include "neki/exec.h"
#include "session_int.h"

#define WL_COLS 30		/* 21 + 7 SOCKETS columns + socket state + listed flag */
#define WL_POOL_COLS 17

/* The writer's state while one request is answered. */
struct wl {
	void *buf;
	size_t cap, len;
	bool complete;			/* every row fitted */
	uint64_t now_us;		/* monotonic */
	time_t now;			/* wall clock */
	struct pool *pool;		/* the pool whose links / clients are being counted */
	struct spool *sp;
	int cl_active, cl_waiting;	/* that pool's clients */
	uint64_t maxwait_us;
};

/* One row's value buffers. */
struct wl_row {
	char v[WL_COLS][64];
	char tls[128];
	const char *vals[WL_COLS];
};

static void
wl_put(struct wl *w, char kind, const char *const *vals, size_t n)
{
	if (!shm_list_put_row(w->buf, w->cap, &w->len, kind, vals, n))
		w->complete = false;
}

/* Column <k> of <r> as printf text. */
static void wl_set(struct wl_row *r, int k, const char *fmt, ...) NK_PRINTF(3, 4);

static void
wl_set(struct wl_row *r, int k, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->v[k], sizeof(r->v[k]), fmt, ap);
	va_end(ap);
	r->vals[k] = r->v[k];
}

/* The local end of <fd> into columns 7 (addr) and 8 (port). */
static void
wl_local_addr(struct wl_row *r, int fd, bool is_unix)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char host[INET6_ADDRSTRLEN] = "unix";
	int port = 0;

	if (!is_unix && fd >= 0 && getsockname(fd, (struct sockaddr *)&ss, &len) == 0) {
		if (ss.ss_family == AF_INET) {
			inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, host, sizeof(host));
			port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
		} else if (ss.ss_family == AF_INET6) {
			inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, host,
				  sizeof(host));
			port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
		}
	}
	wl_set(r, 7, "%s", host);
	wl_set(r, 8, "%d", port);
}

/* Columns 21..27 (pgbouncer's SOCKETS buffer positions) from <sb>. */
static void
wl_buffers(struct wl_row *r, const struct sbuf *sb)
{
	size_t send_remain = sb->wend - sb->wpos;

	wl_set(r, 21, "%u", sb->rend);
	wl_set(r, 22, "%u", sb->rpos);
	wl_set(r, 23, "%u", sb->act_remain);
	wl_set(r, 24, "%zu", sb->wpos);
	wl_set(r, 25, "%zu", send_remain);
	wl_set(r, 26, "%u", sb->rend - sb->rpos);
	wl_set(r, 27, "%zu", send_remain);
}

/* Epoch seconds of the monotonic instant <us>. */
static long long
wl_epoch(const struct wl *w, uint64_t us)
{
	return (long long)w->now - (long long)((w->now_us - us) / 1000000u);
}

/* The client's application_name: as it is now (SET), else as the startup packet had it. */
static const char *
wl_app_name(const struct session *s)
{
	int i = varcache_index("application_name");

	if (i >= 0 && s->vars.val[i] != NULL)
		return s->vars.val[i];
	return s->app_name ? s->app_name : "";
}

/* What <s> does with server links, as SHOW CLIENTS and POOLS count it: waiting for one of
 * pool <sp> (NULL: any pool) for *<wait> microseconds, holding *<link>. A routed session
 * waits for and holds links of its shards' pools (route_pool_use()). */
static bool
wl_client_use(const struct wl *w, const struct session *s, const struct spool *sp,
	      uint64_t *wait, const struct link **link)
{
	struct route_use u;

	if (s->route == NULL) {
		bool waiting = s->state == SESS_ST_WAIT;

		*wait = waiting && s->tm.wait_start_us ? w->now_us - s->tm.wait_start_us : 0;
		*link = s->link;
		return waiting;
	}
	route_pool_use(s->route, sp, &u);
	*wait = u.waiting && w->now_us > u.wait_since_us ? w->now_us - u.wait_since_us : 0;
	*link = u.link;
	return u.waiting;
}

static void
wl_client(struct session *s, void *arg)
{
	struct wl *w = arg;
	struct wl_row r = { 0 };
	bool login = s->state == SESS_ST_LOGIN || s->state == SESS_ST_AUTHQ ||
		     s->state == SESS_ST_WELCOME;
	const struct link *link;
	uint64_t wait;
	bool waiting = wl_client_use(w, s, NULL, &wait, &link);

	wl_set(&r, 0, "C");
	wl_set(&r, 1, "%s", s->user ? s->user : "");
	wl_set(&r, 2, "%s", s->dbname ? s->dbname : "");
	wl_set(&r, 3, "%s", s->replication == PROTO_REPL_LOGICAL ? "logical" :
	       s->replication == PROTO_REPL_PHYSICAL ? "physical" : "none");
	wl_set(&r, 4, "%s", waiting ? "waiting" : link != NULL || s->adm.console ? "active" : "idle");
	wl_set(&r, 5, "%s", s->from.addr);
	wl_set(&r, 6, "%d", s->from.port);
	wl_local_addr(&r, sbuf_fd(&s->sb), s->from.is_unix);
	if (s->from.is_unix)
		wl_set(&r, 8, "%d", s->from.port);	/* pgbouncer: the listen port on both ends */
	wl_set(&r, 9, "%lld", wl_epoch(w, s->tm.connect_us));
	wl_set(&r, 10, "%lld", wl_epoch(w, s->tm.activity_us));
	wl_set(&r, 11, "%" PRIu64, wait / 1000000u);
	wl_set(&r, 12, "%" PRIu64, wait % 1000000u);
	wl_set(&r, 13, "0");
	wl_set(&r, 14, "0x%" PRIx64, s->id);
	if (link != NULL)
		wl_set(&r, 15, "0x%" PRIx64, link_id(link));
	else
		wl_set(&r, 15, "%s", "");
	wl_set(&r, 16, "%d", s->from.peer_pid);	/* remote_pid: Unix peers only */
	tls_sbuf_info(&s->sb, r.tls, sizeof(r.tls));
	r.vals[17] = r.tls;
	wl_set(&r, 18, "%s", wl_app_name(s));
	wl_set(&r, 19, "%zu", s->prep.count);
	wl_set(&r, 20, "%" PRIu64, s->id);
	wl_buffers(&r, &s->sb);
	wl_set(&r, 28, "%s", login ? "cl_login" : waiting ? "cl_waiting" : "cl_active");
	wl_set(&r, 29, "%d", !login);
	wl_put(w, 'c', r.vals, WL_COLS);
}

static const char *
wl_server_state(const struct link *l, bool socket)
{
	static const char *const names[LINK_ST_COUNT][2] = {
		[LINK_ST_LOGIN] = { "new", "sv_login" }, [LINK_ST_IDLE] = { "idle", "sv_idle" },
		[LINK_ST_USED] = { "used", "sv_used" }, [LINK_ST_TESTED] = { "tested", "sv_tested" },
		[LINK_ST_ACTIVE] = { "active", "sv_active" },
		[LINK_ST_CLOSING] = { "closing", "sv_closing" },
	};

	if (link_being_canceled(l))
		return socket ? "sv_being_canceled" : "being_canceled";
	return names[link_state(l)][socket];
}

/* The link's peer: "host:port" of link_addr() split into columns 5 and 6. */
static void
wl_server_addr(struct wl_row *r, const struct link *l)
{
	const char *a = link_addr(l), *colon = strrchr(a, ':');
	size_t hl = colon ? (size_t)(colon - a) : strlen(a);

	if (hl > 0 && a[0] == '[' && a[hl - 1] == ']') {
		a++;
		hl -= 2;
	}
	wl_set(r, 5, "%.*s", (int)hl, a);
	wl_set(r, 6, "%s", colon ? colon + 1 : "0");
}

static void
wl_server(struct link *l, void *arg)
{
	struct wl *w = arg;
	struct wl_row r = { 0 };
	struct sbuf *sb = link_sbuf(l);
	const struct link_ext *ext = link_user_data(l);
	const char *app = link_param(l, "application_name");

	wl_set(&r, 0, "S");
	wl_set(&r, 1, "%s", pool_user_name(w->pool));
	wl_set(&r, 2, "%s", pool_db_name(w->pool));
	wl_set(&r, 3, "%s", w->sp == NULL || spool_repl(w->sp) == NULL ? "none" :
	       strcmp(spool_repl(w->sp), "database") == 0 ? "logical" : "physical");
	wl_set(&r, 4, "%s", wl_server_state(l, false));
	wl_server_addr(&r, l);
	wl_local_addr(&r, sbuf_fd(sb), strncmp(link_addr(l), "unix", 4) == 0);
	wl_set(&r, 9, "%lld", (long long)w->now - (long long)link_age(l));
	wl_set(&r, 10, "%s", r.v[9]);
	wl_set(&r, 11, "0");
	wl_set(&r, 12, "0");
	wl_set(&r, 13, "%d", link_close_needed(l));
	wl_set(&r, 14, "0x%" PRIx64, link_id(l));
	wl_set(&r, 15, "%s", "");
	wl_set(&r, 16, "%u", link_backend_pid(l));
	tls_sbuf_info(sb, r.tls, sizeof(r.tls));
	r.vals[17] = r.tls;
	wl_set(&r, 18, "%s", app ? app : "");
	wl_set(&r, 19, "%zu", ext ? ext->prep.n : 0);
	wl_set(&r, 20, "%" PRIu64, link_id(l));
	wl_buffers(&r, sb);
	wl_set(&r, 28, "%s", wl_server_state(l, true));
	wl_set(&r, 29, "1");
	wl_put(w, 's', r.vals, WL_COLS);
}

/* The shard links of a routed session: 'x' rows. */
struct wl_links {
	struct wl *w;
	uint64_t id;
};

static void
wl_route_link(void *arg, const char *uid, uint32_t backend_pid)
{
	const struct wl_links *x = arg;
	char id[24], pid[16];
	const char *vals[3] = { id, uid, pid };

	snprintf(id, sizeof(id), "%" PRIu64, x->id);
	snprintf(pid, sizeof(pid), "%" PRIu32, backend_pid);
	wl_put(x->w, 'x', vals, 3);
}

static void
wl_links(struct session *s, void *arg)
{
	struct wl_links x = { .w = arg, .id = s->id };

	if (s->route != NULL && s->state != SESS_ST_CLOSED)
		route_foreach_link(s->route, wl_route_link, &x);
}

/*
 * Count the clients of the pool being written: its logged-in clients (cl_active, or
 * cl_waiting while queued for a link: of any pool for a routed session, as SHOW CLIENTS
 * says); for the pool of a shard (<db>@<shard>), the routed sessions queued for one of its
 * links (cl_waiting) or holding one (cl_active). The longest routed wait counts in maxwait.
 */
static void
wl_count_client(struct session *s, void *arg)
{
	struct wl *w = arg;
	const struct link *link;
	uint64_t wait;
	bool waiting;

	if (s->state == SESS_ST_LOGIN || s->state == SESS_ST_AUTHQ ||
	    s->state == SESS_ST_WELCOME)
		return;
	if (s->sp == w->sp) {
		waiting = wl_client_use(w, s, NULL, &wait, &link);
	} else if (s->route != NULL) {
		waiting = wl_client_use(w, s, w->sp, &wait, &link);
		if (!waiting && link == NULL)
			return;		/* does not use this shard's pool now */
	} else {
		return;
	}
	if (waiting)
		w->cl_waiting++;
	else
		w->cl_active++;
	if (waiting && s->route != NULL && wait > w->maxwait_us)
		w->maxwait_us = wait;
}

/* One 'p' row for spool <sp> and 's' rows for its links. */
static void
wl_pool(struct wl *w, struct spool *sp)
{
	struct pool *p = spool_pool(sp);
	const struct cfg_database *db = NULL;
	char v[12][24];
	size_t canceled = pool_being_canceled(p);
	uint64_t maxwait;
	const char *vals[WL_POOL_COLS];

	w->pool = p;
	w->sp = sp;
	w->cl_active = w->cl_waiting = 0;
	w->maxwait_us = pool_max_wait_us(p);
	sess_foreach(wl_count_client, w);
	maxwait = w->maxwait_us;
	snprintf(v[0], 24, "%d", w->cl_active);
	snprintf(v[1], 24, "%d", w->cl_waiting);
	snprintf(v[2], 24, "%zu", pool_count(p, LINK_ST_ACTIVE) - canceled);
	snprintf(v[3], 24, "%zu", pool_count(p, LINK_ST_IDLE));
	snprintf(v[4], 24, "%zu", pool_count(p, LINK_ST_USED));
	snprintf(v[5], 24, "%zu", pool_count(p, LINK_ST_TESTED));
	snprintf(v[6], 24, "%zu", pool_count(p, LINK_ST_LOGIN));
	snprintf(v[7], 24, "%" PRIu64, maxwait / 1000000u);
	snprintf(v[8], 24, "%" PRIu64, maxwait % 1000000u);
	snprintf(v[9], 24, "%zu", canceled);
	db = cfg_database_find(cfg_current(), pool_db_name(p));
	vals[0] = pool_db_name(p);
	vals[1] = pool_user_name(p);
	vals[2] = v[0], vals[3] = v[1], vals[4] = "0", vals[5] = "0";
	vals[6] = v[2], vals[7] = "0", vals[8] = v[9], vals[9] = v[3], vals[10] = v[4];
	vals[11] = v[5], vals[12] = v[6], vals[13] = v[7], vals[14] = v[8];
	vals[15] = cfg_pool_mode_str(pool_mode(p));
	vals[16] = db != NULL && db->host != NULL && strchr(db->host, ',') != NULL ?
		   (db->load_balance_hosts ? "round-robin" : "disable") : NULL;
	wl_put(w, 'p', vals, WL_POOL_COLS);
	pool_foreach_link(p, wl_server, w);
}

static void
wl_dns_host(void *arg, const char *name, uint64_t ttl, const char *addrs)
{
	char t[24];
	const char *vals[3] = { name, t, addrs };

	snprintf(t, sizeof(t), "%" PRIu64, ttl);
	wl_put(arg, 'h', vals, 3);
}

static void
wl_dns_zone(void *arg, const char *zone, uint32_t serial, int count)
{
	char s[24], c[24];
	const char *vals[3] = { zone, s, c };

	snprintf(s, sizeof(s), "%u", serial);
	snprintf(c, sizeof(c), "%d", count);
	wl_put(arg, 'z', vals, 3);
}

/* SHOW MEM's tallies: objects in use and their bytes. */
struct wl_mem {
	size_t sessions, links, iobufs, iobuf_bytes;
};

static void
wl_mem_sbuf(struct wl_mem *m, const struct sbuf *sb)
{
	if (sb->rbuf == NULL && sb->wbuf == NULL)
		return;
	m->iobufs++;
	m->iobuf_bytes += (sb->rbuf != NULL ? sb->rcap : 0) + (sb->wbuf != NULL ? sb->wcap : 0);
}

static void
wl_mem_session(struct session *s, void *arg)
{
	struct wl_mem *m = arg;

	m->sessions++;
	wl_mem_sbuf(m, &s->sb);
}

static void
wl_mem_link(struct link *l, void *arg)
{
	struct wl_mem *m = arg;

	m->links++;
	wl_mem_sbuf(m, link_sbuf(l));
}

/* One 'm' row: <used> objects of <size> bytes holding <total> bytes (free lists: none). */
static void
wl_mem_row(struct wl *w, const char *name, size_t size, size_t used, size_t total)
{
	char v[3][24];
	const char *vals[5] = { name, v[0], v[1], "0", v[2] };

	snprintf(v[0], sizeof(v[0]), "%zu", size);
	snprintf(v[1], sizeof(v[1]), "%zu", used);
	snprintf(v[2], sizeof(v[2]), "%zu", total);
	wl_put(w, 'm', vals, 5);
}

static void
wl_mem(struct wl *w)
{
	struct wl_mem m = { 0 };
	size_t pools = 0, psize = pool_object_size() + spool_object_size();
	size_t lsize = pool_link_object_size(), stmts = prep_stmt_count();
	size_t bsize = (size_t)cfg_current()->net.pkt_buf;

	sess_foreach(wl_mem_session, &m);
	for (struct spool *sp = spool_first(); sp != NULL; sp = spool_next(sp)) {
		pools++;
		pool_foreach_link(spool_pool(sp), wl_mem_link, &m);
	}
	wl_mem_row(w, "client_cache", sizeof(struct session), m.sessions,
		   m.sessions * sizeof(struct session));
	wl_mem_row(w, "server_cache", lsize, m.links, m.links * lsize);
	wl_mem_row(w, "pool_cache", psize, pools, pools * psize);
	wl_mem_row(w, "iobuf_cache", bsize, m.iobufs, m.iobuf_bytes);
	wl_mem_row(w, "server_prepared_statement_cache", sizeof(struct prep_stmt), stmts,
		   stmts * sizeof(struct prep_stmt) + prep_stmt_text_bytes());
}

static void
wl_peer(void *arg, int peer, int active, int waiting, int sent, int login)
{
	char v[5][16];
	const char *vals[5] = { v[0], v[1], v[2], v[3], v[4] };
	const int n[5] = { peer, active, waiting, sent, login };

	for (int i = 0; i < 5; i++)
		snprintf(v[i], sizeof(v[i]), "%d", n[i]);
	wl_put(arg, 'e', vals, 5);
}

bool
session_list_rows(void *buf, size_t cap, size_t *len)
{
	struct wl w = { .buf = buf, .cap = cap, .len = *len, .complete = true,
			.now_us = sess_now_us(), .now = time(NULL) };
	struct dns *d = dns_process();

	sess_foreach(wl_client, &w);
	sess_foreach(wl_links, &w);
	for (struct spool *sp = spool_first(); sp != NULL; sp = spool_next(sp))
		wl_pool(&w, sp);
	if (d != NULL) {
		dns_walk_hosts(d, wl_dns_host, &w);
		dns_walk_zones(d, wl_dns_zone, &w);
	}
	wl_mem(&w);
	sess_cancel_peer_rows(wl_peer, &w);
	*len = w.len;
	return w.complete;
}
