/*
 * lists.c - the console's lists gathered from every worker: SHOW CLIENTS, SERVERS, SOCKETS,
 * ACTIVE_SOCKETS, POOLS, LISTS, USERS, DATABASES, DNS_HOSTS, DNS_ZONES.
 *
 * A SHOW that needs the workers' rows asks each live worker through its shm list area
 * (shm_list_request, SHM_CMD_LIST; the worker answers at once, even while a PAUSE holds its
 * mailbox acknowledgements), polls every LISTS_POLL_MS until all have answered (a worker that
 * has not answered within LISTS_TIMEOUT_MS is left out, with a warning in the log), adds the
 * admin's own console sessions, and runs the SHOW on the merged rows. One gathering at a
 * time: the areas are reused, so further requests queue behind it.
 * Entry points: lists_gather(), lists_show_*(), lists_count().
 */
#include "neki/base.h"

#include "admin_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "neki/clock.h"
#include "neki/config.h"
#include "neki/log.h"
#include "neki/proc.h"
#include "neki/shm_list.h"

#define LISTS_POLL_MS 5
#define LISTS_TIMEOUT_MS 3000
#define LISTS_LOCAL_CAP (256 * 1024)	/* the admin's own rows */

/* One row read back from an area. */
struct lrow {
	char kind;
	size_t n;
	const char *v[SHM_LIST_MAX_COLS];	/* borrowed from the areas / local buffer */
};

/* A SHOW waiting for (or running on) the workers' rows. */
struct ljob {
	struct adm_req *req;			/* borrowed until finished; NULL with <run> */
	lists_show_fn show;
	void (*run)(void *arg);			/* instead of a SHOW: called on the rows */
	void *arg;
	uint64_t *reqs;				/* owned: request number per slot, 0 = not asked */
	uint64_t deadline_ms;
	struct ljob *next;			/* the queue */
};

static struct ljob *queue_head, *queue_tail;	/* owned; head is running */
static struct event *poll_ev;			/* owned */
static char *local_buf;				/* owned: the admin's rows */
static struct lrow *rows;			/* owned: merged rows of the running job */
static size_t n_rows, cap_rows;

static bool
rows_add(const struct lrow *r)
{
	if (n_rows == cap_rows) {
		size_t nc = cap_rows ? cap_rows * 2 : 256;
		struct lrow *nr = realloc(rows, nc * sizeof(*nr));

		if (nr == NULL)
			return false;
		rows = nr;
		cap_rows = nc;
	}
	rows[n_rows++] = *r;
	return true;
}

/* Parse the rows of <data> into the merged set. */
static void
rows_parse(const void *data, size_t len)
{
	size_t pos = 0;
	struct lrow r;

	while (pos < len && shm_list_next_row(data, len, &pos, &r.kind, r.v, &r.n))
		if (!rows_add(&r))
			return;
}

static void job_start(struct ljob *j);

/* Run the SHOW of the head job on the merged rows, answer, start the next job. */
static void
job_finish(void)
{
	struct ljob *j = queue_head;
	size_t len = 0;
	bool trunc;

	if (local_buf != NULL && !console_list_rows(local_buf, LISTS_LOCAL_CAP, &len))
		log_warn("SHOW: the console's own rows did not all fit");
	rows_parse(local_buf, len);
	for (unsigned i = 0; i < shm_n_procs(); i++) {
		const void *d;

		if (j->reqs[i] == 0)
			continue;
		if ((d = shm_list_result(i, j->reqs[i], &len, &trunc)) == NULL) {
			log_warn("SHOW: process %u did not answer within %d ms; its rows are left out",
				 i, LISTS_TIMEOUT_MS);
			continue;
		}
		if (trunc)
			log_warn("SHOW: process %u had more rows than its list area holds", i);
		rows_parse(d, len);
	}
	if (j->run != NULL) {
		j->run(j->arg);
	} else {
		j->show(&j->req->res);
		adm_result_complete(&j->req->res, "SHOW", false);
		adm_req_finish(j->req);
	}
	n_rows = 0;
	queue_head = j->next;
	if (queue_head == NULL)
		queue_tail = NULL;
	free(j->reqs);
	free(j);
	if (queue_head != NULL)
		job_start(queue_head);
}

static bool
job_answered(const struct ljob *j)
{
	for (unsigned i = 0; i < shm_n_procs(); i++) {
		size_t len;
		bool trunc;

		if (j->reqs[i] != 0 && atomic_load(&shm_proc(i)->pid) != 0 &&
		    shm_list_result(i, j->reqs[i], &len, &trunc) == NULL)
			return false;
	}
	return true;
}

static void
poll_cb(evutil_socket_t fd, short what, void *arg)
{
	struct timeval tv = { 0, LISTS_POLL_MS * 1000 };

	if (job_answered(queue_head) || nk_now_ms() >= queue_head->deadline_ms)
		job_finish();
	else
		event_add(poll_ev, &tv);
}

/* Ask every live worker for its rows. */
static void
job_start(struct ljob *j)
{
	for (unsigned i = 0; i < shm_n_procs(); i++) {
		struct shm_proc *p = shm_proc(i);

		j->reqs[i] = 0;
		if (atomic_load(&p->kind) == SHM_PROC_WORKER && atomic_load(&p->pid) != 0)
			j->reqs[i] = shm_list_request(i);
	}
	j->deadline_ms = nk_now_ms() + LISTS_TIMEOUT_MS;
	poll_cb(-1, 0, NULL);
}

/* Queue <j> and start it when nothing runs. */
static void
job_queue(struct ljob *j)
{
	if (queue_tail != NULL) {
		queue_tail->next = j;
		queue_tail = j;
		return;
	}
	queue_head = queue_tail = j;
	job_start(j);
}

/* A new job, or NULL without memory. */
static struct ljob *
job_new(void)
{
	struct ljob *j = calloc(1, sizeof(*j));

	if (poll_ev == NULL)
		poll_ev = evtimer_new(child_base(), poll_cb, NULL);
	if (local_buf == NULL)
		local_buf = malloc(LISTS_LOCAL_CAP);
	if (j == NULL || poll_ev == NULL || local_buf == NULL ||
	    (j->reqs = calloc(shm_n_procs(), sizeof(uint64_t))) == NULL) {
		free(j);
		return NULL;
	}
	return j;
}

void
lists_gather(struct adm_req *req, lists_show_fn show)
{
	struct ljob *j = job_new();
	struct nk_error err;

	if (j == NULL) {
		nk_error_oom(&err);
		adm_req_fail(req, &err);
		return;
	}
	j->req = req;
	j->show = show;
	job_queue(j);
}

bool
lists_gather_run(void (*run)(void *arg), void *arg)
{
	struct ljob *j = job_new();

	if (j == NULL)
		return false;
	j->run = run;
	j->arg = arg;
	job_queue(j);
	return true;
}

/* ---- the SHOWs on the merged rows ---- */

static const struct adm_col socket_cols[] = {
	{ "type", ADM_T_TEXT }, { "user", ADM_T_TEXT }, { "database", ADM_T_TEXT },
	{ "replication", ADM_T_TEXT }, { "state", ADM_T_TEXT }, { "addr", ADM_T_TEXT },
	{ "port", ADM_T_INT4 }, { "local_addr", ADM_T_TEXT }, { "local_port", ADM_T_INT4 },
	{ "connect_time", ADM_T_TEXT }, { "request_time", ADM_T_TEXT }, { "wait", ADM_T_INT4 },
	{ "wait_us", ADM_T_INT4 }, { "close_needed", ADM_T_INT4 }, { "ptr", ADM_T_TEXT },
	{ "link", ADM_T_TEXT }, { "remote_pid", ADM_T_INT4 }, { "tls", ADM_T_TEXT },
	{ "application_name", ADM_T_TEXT }, { "prepared_statements", ADM_T_INT4 },
	{ "id", ADM_T_INT4 },
	/* SOCKETS adds: */
	{ "recv_pos", ADM_T_INT4 }, { "pkt_pos", ADM_T_INT4 }, { "pkt_remain", ADM_T_INT4 },
	{ "send_pos", ADM_T_INT4 }, { "send_remain", ADM_T_INT4 }, { "pkt_avail", ADM_T_INT4 },
	{ "send_avail", ADM_T_INT4 },
};

#define COL_STATE 4
#define COL_CONNECT 9
#define COL_REQUEST 10
#define COL_ID 20
#define COL_SEND_REMAIN 25
#define COL_PKT_AVAIL 26
#define COL_SOCK_STATE 28
#define COL_LISTED 29
#define SOCKET_ROW_COLS 30

/* Is <db> a routed database's pool on shard <uid> ("<client db>@<uid>", exec/route_exec.c)? */
static bool
at_shard(const char *db, const char *uid)
{
	const char *at = strrchr(db, '@');

	return at != NULL && strcmp(at + 1, uid) == 0;
}

static bool
is_socket(const struct lrow *r)
{
	return (r->kind == 'c' || r->kind == 's') && r->n == SOCKET_ROW_COLS;
}

static bool
is_listed(const struct lrow *r)
{
	return is_socket(r) && strcmp(r->v[COL_LISTED], "1") == 0;
}

static int
by_id(const void *a, const void *b)
{
	unsigned long long x = strtoull((*(const struct lrow *const *)a)->v[COL_ID], NULL, 10);
	unsigned long long y = strtoull((*(const struct lrow *const *)b)->v[COL_ID], NULL, 10);

	return x < y ? -1 : x > y;
}

/* pgbouncer's time columns: local time "YYYY-MM-DD HH:MM:SS TZ" of epoch text <epoch>. */
static void
fmt_time(char *buf, size_t len, const char *epoch)
{
	time_t t = (time_t)strtoll(epoch, NULL, 10);
	struct tm tm;

	localtime_r(&t, &tm);
	strftime(buf, len, "%Y-%m-%d %H:%M:%S %Z", &tm);
}

enum sock_view {
	SOCK_CLIENTS = 0,
	SOCK_SERVERS = 1,
	SOCK_ALL = 2,		/* SOCKETS */
	SOCK_ACTIVE = 3,	/* ACTIVE_SOCKETS */
};

static bool
sock_wanted(const struct lrow *r, enum sock_view view)
{
	switch (view) {
	case SOCK_CLIENTS: return r->kind == 'c' && is_listed(r);
	case SOCK_SERVERS: return r->kind == 's' && is_listed(r);
	case SOCK_ALL: return is_socket(r);
	case SOCK_ACTIVE:
		return is_socket(r) && (strcmp(r->v[COL_PKT_AVAIL], "0") != 0 ||
					strcmp(r->v[COL_SEND_REMAIN], "0") != 0);
	}
	return false;
}

/* The socket rows of <view>, sorted by id (connection order). */
static void
show_sockets(struct adm_result *r, enum sock_view view)
{
	size_t ncols = view == SOCK_ALL || view == SOCK_ACTIVE ? 28 : 21, n = 0;
	const struct lrow **sel = calloc(n_rows + 1, sizeof(*sel));

	adm_result_columns(r, socket_cols, ncols);
	for (size_t i = 0; sel != NULL && i < n_rows; i++)
		if (sock_wanted(&rows[i], view))
			sel[n++] = &rows[i];
	qsort(sel, n, sizeof(*sel), by_id);
	for (size_t i = 0; i < n; i++) {
		const char *vals[28];
		char ct[64], rt[64];

		memcpy(vals, sel[i]->v, ncols * sizeof(vals[0]));
		fmt_time(ct, sizeof(ct), sel[i]->v[COL_CONNECT]);
		fmt_time(rt, sizeof(rt), sel[i]->v[COL_REQUEST]);
		vals[COL_CONNECT] = ct;
		vals[COL_REQUEST] = rt;
		if (ncols == 28)
			vals[COL_STATE] = sel[i]->v[COL_SOCK_STATE];
		adm_result_row(r, vals);
	}
	free(sel);
}

void
lists_show_clients(struct adm_result *r)
{
	show_sockets(r, SOCK_CLIENTS);
}

void
lists_show_servers(struct adm_result *r)
{
	show_sockets(r, SOCK_SERVERS);
}

void
lists_show_sockets(struct adm_result *r)
{
	show_sockets(r, SOCK_ALL);
}

void
lists_show_active_sockets(struct adm_result *r)
{
	show_sockets(r, SOCK_ACTIVE);
}

/* ---- POOLS: the workers' rows of one (database, user) added up ---- */

#define POOL_COLS 17

struct pool_sum {
	const struct lrow *first;	/* names, pool_mode, load_balance_hosts */
	long long n[POOL_COLS];		/* columns 2..12 summed */
	unsigned long long maxwait_us;
};

static int
pool_cmp(const void *a, const void *b)
{
	const struct pool_sum *x = a, *y = b;
	int c = strcmp(x->first->v[0], y->first->v[0]);

	return c != 0 ? c : strcmp(x->first->v[1], y->first->v[1]);
}

/* The merged pools (caller frees); *<n> of them, sorted by database then user. */
static struct pool_sum *
pools_merge(size_t *n)
{
	struct pool_sum *ps = calloc(n_rows + 1, sizeof(*ps));

	*n = 0;
	for (size_t i = 0; ps != NULL && i < n_rows; i++) {
		const struct lrow *r = &rows[i];
		size_t k;
		unsigned long long w;

		if (r->kind != 'p' || r->n != POOL_COLS)
			continue;
		for (k = 0; k < *n; k++)
			if (strcmp(ps[k].first->v[0], r->v[0]) == 0 &&
			    strcmp(ps[k].first->v[1], r->v[1]) == 0)
				break;
		if (k == *n)
			ps[(*n)++].first = r;
		for (int c = 2; c <= 12; c++)
			ps[k].n[c] += strtoll(r->v[c], NULL, 10);
		w = strtoull(r->v[13], NULL, 10) * 1000000u + strtoull(r->v[14], NULL, 10);
		if (w > ps[k].maxwait_us)
			ps[k].maxwait_us = w;
	}
	if (ps != NULL)
		qsort(ps, *n, sizeof(*ps), pool_cmp);
	return ps;
}

/* SHOW POOLS row from a lists_foreach_pool() row: maxwait split into seconds + microseconds. */
static void
pool_row_show(void *arg, const char *const *row)
{
	unsigned long long us = strtoull(row[14], NULL, 10);
	char sec[24], usec[24];
	const char *vals[POOL_COLS];

	memcpy(vals, row, sizeof(vals));
	snprintf(sec, sizeof(sec), "%llu", us / 1000000u);
	snprintf(usec, sizeof(usec), "%llu", us % 1000000u);
	vals[13] = sec;
	vals[14] = usec;
	adm_result_row(arg, vals);
}

void
lists_show_pools(struct adm_result *r)
{
	static const char *const names[POOL_COLS] = {
		"database", "user", "cl_active", "cl_waiting", "cl_active_cancel_req",
		"cl_waiting_cancel_req", "sv_active", "sv_active_cancel", "sv_being_canceled",
		"sv_idle", "sv_used", "sv_tested", "sv_login", "maxwait", "maxwait_us", "pool_mode",
		"load_balance_hosts",
	};
	struct adm_col cols[POOL_COLS];

	for (size_t i = 0; i < POOL_COLS; i++)
		cols[i] = (struct adm_col){ names[i], i < 2 || i >= 15 ? ADM_T_TEXT : ADM_T_INT4 };
	adm_result_columns(r, cols, POOL_COLS);
	lists_foreach_pool(pool_row_show, r);
}

void
lists_foreach_pool(void (*fn)(void *arg, const char *const *vals), void *arg)
{
	size_t n;
	struct pool_sum *ps = pools_merge(&n);

	for (size_t i = 0; i < n; i++) {
		char v[POOL_COLS][24];
		const char *vals[POOL_COLS];

		for (int c = 0; c < POOL_COLS; c++)
			vals[c] = ps[i].first->v[c];
		for (int c = 2; c <= 12; c++) {
			snprintf(v[c], sizeof(v[c]), "%lld", ps[i].n[c]);
			vals[c] = v[c];
		}
		snprintf(v[14], sizeof(v[14]), "%llu", ps[i].maxwait_us);
		vals[14] = v[14];	/* the whole wait in microseconds */
		fn(arg, vals);
	}
	free(ps);
}

void
lists_foreach_row(char kind, size_t ncols, void (*fn)(void *arg, const char *const *v),
		  void *arg)
{
	for (size_t i = 0; i < n_rows; i++)
		if (rows[i].kind == kind && rows[i].n == ncols)
			fn(arg, rows[i].v);
}

/* ---- counts for LISTS, USERS, DATABASES ---- */

int64_t
lists_count(enum lists_what what, const char *name)
{
	int64_t n = 0;
	size_t np;
	struct pool_sum *ps;

	if (what == LISTS_POOLS) {
		ps = pools_merge(&np);
		free(ps);
		return (int64_t)np;
	}
	for (size_t i = 0; i < n_rows; i++) {
		const struct lrow *r = &rows[i];

		switch (what) {
		case LISTS_USED_CLIENTS: n += r->kind == 'c' && is_listed(r); break;
		case LISTS_LOGIN_CLIENTS: n += r->kind == 'c' && is_socket(r) && !is_listed(r); break;
		case LISTS_USED_SERVERS: n += r->kind == 's' && is_socket(r); break;
		case LISTS_DB_CLIENTS:
			n += r->kind == 'c' && is_listed(r) && strcmp(r->v[2], name) == 0;
			break;
		case LISTS_DB_SERVERS:
			n += r->kind == 's' && is_socket(r) && strcmp(r->v[2], name) == 0;
			break;
		case LISTS_USER_CLIENTS:
			n += r->kind == 'c' && is_listed(r) && strcmp(r->v[1], name) == 0;
			break;
		case LISTS_USER_SERVERS:
			n += r->kind == 's' && is_socket(r) && strcmp(r->v[1], name) == 0;
			break;
		case LISTS_SHARD_SERVERS:
			n += r->kind == 's' && is_socket(r) && at_shard(r->v[2], name);
			break;
		case LISTS_DNS_NAMES:
		case LISTS_DNS_ZONES:
			n += lists_first_of((what == LISTS_DNS_NAMES) ? 'h' : 'z', i);
			break;
		case LISTS_POOLS:
			break;
		}
	}
	return n;
}

/* True when row <i> is of <kind> and no earlier row of <kind> has its name (column 0). */
bool
lists_first_of(char kind, size_t i)
{
	if (rows[i].kind != kind || rows[i].n < 1)
		return false;
	for (size_t k = 0; k < i; k++)
		if (rows[k].kind == kind && rows[k].n >= 1 && strcmp(rows[k].v[0], rows[i].v[0]) == 0)
			return false;
	return true;
}

static int
by_name(const void *a, const void *b)
{
	return strcmp((*(const struct lrow *const *)a)->v[0], (*(const struct lrow *const *)b)->v[0]);
}

/* DNS_HOSTS / DNS_ZONES: every worker's cache, one row per name (the first worker's). */
static void
show_dns(struct adm_result *r, char kind, const struct adm_col *cols)
{
	const struct lrow **sel = calloc(n_rows + 1, sizeof(*sel));
	size_t n = 0;

	adm_result_columns(r, cols, 3);
	for (size_t i = 0; sel != NULL && i < n_rows; i++)
		if (rows[i].n == 3 && lists_first_of(kind, i))
			sel[n++] = &rows[i];
	qsort(sel, n, sizeof(*sel), by_name);
	for (size_t i = 0; i < n; i++)
		adm_result_row(r, sel[i]->v);
	free(sel);
}

void
lists_show_dns_hosts(struct adm_result *r)
{
	static const struct adm_col cols[] = {
		{ "hostname", ADM_T_TEXT }, { "ttl", ADM_T_INT8 }, { "addrs", ADM_T_TEXT },
	};

	show_dns(r, 'h', cols);
}

void
lists_show_dns_zones(struct adm_result *r)
{
	static const struct adm_col cols[] = {
		{ "zonename", ADM_T_TEXT }, { "serial", ADM_T_INT8 }, { "count", ADM_T_INT4 },
	};

	show_dns(r, 'z', cols);
}

/*
 * MEM: every worker's 'm' rows summed by name (size is per object; used / free / memtotal add
 * up), in the order the first worker listed them.
 */
void
lists_show_mem(struct adm_result *r)
{
	static const struct adm_col cols[] = {
		{ "name", ADM_T_TEXT }, { "size", ADM_T_INT4 }, { "used", ADM_T_INT4 },
		{ "free", ADM_T_INT4 }, { "memtotal", ADM_T_INT4 },
	};

	adm_result_columns(r, cols, 5);
	for (size_t i = 0; i < n_rows; i++) {
		long long sum[3] = { 0, 0, 0 };
		char b[4][24];
		const char *vals[5] = { rows[i].v[0], b[0], b[1], b[2], b[3] };

		if (rows[i].n != 5 || !lists_first_of('m', i))
			continue;
		for (size_t k = i; k < n_rows; k++) {
			if (rows[k].kind != 'm' || rows[k].n != 5 ||
			    strcmp(rows[k].v[0], rows[i].v[0]) != 0)
				continue;
			for (int c = 0; c < 3; c++)
				sum[c] += atoll(rows[k].v[2 + c]);
		}
		snprintf(b[0], sizeof(b[0]), "%s", rows[i].v[1]);
		for (int c = 0; c < 3; c++)
			snprintf(b[1 + c], sizeof(b[1 + c]), "%lld", sum[c]);
		adm_result_row(r, vals);
	}
}

/* PEER_POOLS: one row per [peers] entry, every worker's cancel forwards to it added up. */
void
lists_show_peer_pools(struct adm_result *r)
{
	static const struct adm_col cols[] = {
		{ "peer_id", ADM_T_INT4 }, { "cl_active_cancel_req", ADM_T_INT4 },
		{ "cl_waiting_cancel_req", ADM_T_INT4 }, { "sv_active_cancel", ADM_T_INT4 },
		{ "sv_login", ADM_T_INT4 },
	};
	const struct cfg *c = cfg_current();

	adm_result_columns(r, cols, NK_ARRAY_LEN(cols));
	for (size_t i = 0; i < c->n_peers; i++) {
		long long sum[4] = { 0, 0, 0, 0 };
		char b[5][24];
		const char *vals[5] = { b[0], b[1], b[2], b[3], b[4] };

		for (size_t k = 0; k < n_rows; k++) {
			if (rows[k].kind != 'e' || rows[k].n != 5 ||
			    atoi(rows[k].v[0]) != c->peers[i].peer_id)
				continue;
			for (int f = 0; f < 4; f++)
				sum[f] += atoll(rows[k].v[1 + f]);
		}
		snprintf(b[0], sizeof(b[0]), "%d", c->peers[i].peer_id);
		for (int f = 0; f < 4; f++)
			snprintf(b[1 + f], sizeof(b[1 + f]), "%lld", sum[f]);
		adm_result_row(r, vals);
	}
}
