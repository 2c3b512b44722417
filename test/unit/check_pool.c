/*
 * check_pool.c - backend links and pools against a real PostgreSQL 15 (no mocks).
 *
 * The suite starts one private cluster with test/harness/cluster (one shard; roles
 * neki_test = SCRAM, neki_md5 = md5, neki_plain = cleartext, others trust) in an unchecked
 * fixture, and every test drives a pool on its own event_base with process-local limits.
 * When the harness or /usr/lib/postgresql/15/bin is missing, every test prints why and passes
 * without running (CI has both).
 *
 * Covered: login over TCP and unix socket, startup parameters from [databases], wrong
 * password error, LIFO / FIFO reuse, pool_size and max_db/max_user limits, reserve pool,
 * server_idle_timeout, server_lifetime, server_check_query, server_reset_query by pool mode,
 * connect_query, broken links (pg_terminate_backend) idle and active, connect failure with
 * server_login_retry fast fail, query_wait_timeout, server_connect_timeout, log phrases,
 * links handed over between the pools of two workers (pool_wait.c's hooks).
 */
#include "neki/base.h"

#include <check.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "neki/auth.h"
#include "neki/config.h"
#include "neki/dns.h"
#include "neki/link.h"
#include "neki/log.h"
#include "neki/pktbuf.h"
#include "neki/pool.h"
#include "neki/proto.h"
#include "neki/scram.h"
#include "neki/tls.h"
#include "evloop.h"
#include "suites.h"

/* ---- the cluster (suite-wide, started in the parent process) ---- */

static char cl_dir[512];
static char cl_sock[512];
static char cl_script[512];
static int cl_port;
static bool cl_up;
static const char *cl_skip = "not started";

/* Find test/harness/cluster from the build or source directory. */
static bool
cl_find_script(void)
{
	const char *top = getenv("NEKI_TOP_SRCDIR");
	const char *cands[] = { "test/harness/cluster", "../../test/harness/cluster",
				"../test/harness/cluster" };

#ifdef NK_SRCDIR
	if (top == NULL)
		top = NK_SRCDIR;
#endif
	if (top != NULL) {
		snprintf(cl_script, sizeof(cl_script), "%s/test/harness/cluster", top);
		if (access(cl_script, X_OK) == 0)
			return true;
	}
	for (size_t i = 0; i < NK_ARRAY_LEN(cands); i++) {
		if (access(cands[i], X_OK) == 0) {
			snprintf(cl_script, sizeof(cl_script), "%s", cands[i]);
			return true;
		}
	}
	return false;
}

static void
cl_parse_line(const char *line)
{
	if (sscanf(line, "NEKI_CLUSTER_DIR=%511s", cl_dir) == 1)
		return;
	if (sscanf(line, "PGHOST_SOCK=%511s", cl_sock) == 1)
		return;
	(void)sscanf(line, "SHARD_A_PORT=%d", &cl_port);
}

/* Run <sql> as postgres through psql on the cluster's socket. */
static void
cl_psql(const char *sql)
{
	char cmd[2048];

	snprintf(cmd, sizeof(cmd),
		 "runuser -u postgres -- /usr/lib/postgresql/15/bin/psql -X -q -h %s -p %d "
		 "-U postgres -d postgres -c \"%s\" >/dev/null 2>&1 || "
		 "/usr/lib/postgresql/15/bin/psql -X -q -h %s -p %d -U postgres -d postgres "
		 "-c \"%s\" >/dev/null 2>&1", cl_sock, cl_port, sql, cl_sock, cl_port, sql);
	if (system(cmd) != 0)
		fprintf(stderr, "check_pool: psql failed: %s\n", sql);
}

static void
cluster_up(void)
{
	char cmd[1024], line[1024];
	FILE *f;

	if (access("/usr/lib/postgresql/15/bin/postgres", X_OK) != 0) {
		cl_skip = "/usr/lib/postgresql/15/bin is absent";
		return;
	}
	if (!cl_find_script()) {
		cl_skip = "test/harness/cluster not found (set NEKI_TOP_SRCDIR)";
		return;
	}
	snprintf(cmd, sizeof(cmd), "%s start --shards 1 2>/dev/null", cl_script);
	f = popen(cmd, "r");
	if (f == NULL)
		return;
	while (fgets(line, sizeof(line), f) != NULL)
		cl_parse_line(line);
	if (pclose(f) != 0 || cl_port == 0 || cl_dir[0] == '\0') {
		cl_skip = "test/harness/cluster start failed";
		return;
	}
	cl_up = true;
	cl_psql("CREATE ROLE nk_u1 LOGIN; CREATE ROLE nk_u2 LOGIN; CREATE ROLE nk_u3 LOGIN");
}

static void
cluster_down(void)
{
	char cmd[1100];

	if (!cl_up)
		return;
	snprintf(cmd, sizeof(cmd), "%s stop %s >/dev/null 2>&1", cl_script, cl_dir);
	if (system(cmd) != 0)
		fprintf(stderr, "check_pool: cluster stop failed\n");
	cl_up = false;
}

#define NEED_CLUSTER()                                                          \
	do {                                                                    \
		if (!cl_up) {                                                   \
			fprintf(stderr, "check_pool: SKIPPED %s: %s\n", __func__, cl_skip); \
			return;                                                 \
		}                                                               \
	} while (0)

/* ---- per-test environment ---- */

static struct event_base *base;
static struct cfg *cfg;
static struct pool_limits_local *lim;
static char logpath[256];

/* Run the loop until <done>(<arg>) or <secs> seconds (evloop.h). */
static bool
run_until(bool (*done)(void *), void *arg, double secs)
{
	return evloop_run_until(base, done, arg, secs);
}

/* Spin the loop for <secs> (to let timers fire); a bounded wait on nothing. */
static void
run_for(double secs)
{
	(void)run_until(evloop_never, NULL, secs);
}

static void
setup(void)
{
	struct log_settings ls = { 0 };

	base = event_base_new();
	lim = pool_limits_local_new();
	snprintf(logpath, sizeof(logpath), "/tmp/nk_check_pool_%d.log", (int)getpid());
	unlink(logpath);
	ls.logfile = logpath;
	ls.quiet = true;
	ls.verbose = 0;
	ck_assert(log_configure(&ls));
}

static void
teardown(void)
{
	if (cfg != NULL)
		cfg_unref(cfg);
	cfg = NULL;
	pool_limits_local_free(lim);
	event_base_free(base);
	log_close();
	unlink(logpath);
}

static void
drop_cfg(void)
{
	cfg_unref(cfg);
	cfg = NULL;
}

/* Load a config: [databases] <dbs> (%d = the cluster's port, %s = its socket dir). */
static void
load_cfg(const char *dbs, const char *settings)
{
	char text[4096], dbtext[2048];
	struct nk_error err;

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
	snprintf(dbtext, sizeof(dbtext), dbs, cl_port, cl_sock);
#pragma GCC diagnostic pop
	snprintf(text, sizeof(text), "[databases]\n%s\n[pgbouncer]\nlisten_port = 6999\n"
		 "admin_listen_port = 0\n%s\n", dbtext, settings);
	cfg = cfg_load_string("check_pool.ini", text, &err);
	ck_assert_msg(cfg != NULL, "config: %s", err.message);
}

/* A pool of [databases] entry <db> for <user> (<password>, NULL: the entry's) whose limits
 * are <ops> over <ctx>. */
static struct pool *
mk_pool_with(const char *db, const char *user, const char *password,
	     const struct pool_limits_ops *ops, void *ctx)
{
	struct pool_conf pc = { 0 };
	struct nk_error err;
	struct pool *p;

	pc.cfg = cfg;
	pc.db = cfg_database_find(cfg, db);
	ck_assert_ptr_nonnull(pc.db);
	pc.user = cfg_user_find(cfg, user);
	pc.db_name = db;
	pc.user_name = pc.db->user != NULL ? pc.db->user : user;
	pc.password = password != NULL ? password : pc.db->password;
	pc.limits = ops;
	pc.limits_ctx = ctx;
	p = pool_new(base, &pc, &err);
	ck_assert_msg(p != NULL, "pool_new: %s", err.message);
	return p;
}

static struct pool *
mk_pool_limits(const char *db, const char *user, const struct pool_limits_ops *ops, void *ctx)
{
	return mk_pool_with(db, user, NULL, ops, ctx);
}

static struct pool *
mk_pool(const char *db, const char *user, const char *password)
{
	return mk_pool_with(db, user, password, pool_limits_local_ops(), lim);
}

/* How many times the logfile (its first 64 kB) contains <needle>. */
static int
log_count(const char *needle)
{
	char buf[65536];
	FILE *f = fopen(logpath, "r");
	size_t n;
	int count = 0;

	if (f == NULL)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	for (const char *at = strstr(buf, needle); at != NULL; at = strstr(at + 1, needle))
		count++;
	return count;
}

/* True when the logfile contains <needle>. */
static bool
log_has(const char *needle)
{
	return log_count(needle) > 0;
}

/* ---- a scripted client ---- */

struct tclient {
	struct pool_waiter w;
	struct link *link;		/* the link it holds */
	bool done;			/* the acquire finished */
	bool failed;			/* ... with an error */
	bool broken;			/* LINK_EV_BROKEN seen */
	struct nk_error err;
	bool got_z;
	bool got_error;
	char sqlstate[6];
	char value[256];		/* first column of the last DataRow */
};

static void
tc_ready(struct pool_waiter *w, struct link *l, const struct nk_error *err)
{
	struct tclient *c = container_of(w, struct tclient, w);

	c->done = true;
	c->link = l;
	if (err != NULL) {
		c->failed = true;
		c->err = *err;
	}
}

/* First column of a DataRow body into <out>. */
static void
tc_datarow(struct tclient *c, const uint8_t *b, size_t len)
{
	uint32_t n;

	if (len < 6)
		return;
	n = ((uint32_t)b[2] << 24) | ((uint32_t)b[3] << 16) | ((uint32_t)b[4] << 8) | b[5];
	if (n == 0xffffffffu || n + 6 > len || n >= sizeof(c->value))
		return;
	memcpy(c->value, b + 6, n);
	c->value[n] = '\0';
}

static bool
tc_link_cb(struct link *l, enum link_event ev, const struct sbuf_pkt *pkt,
	   const struct nk_error *err, void *ctx)
{
	struct tclient *c = ctx;
	struct proto_server_error se;
	struct nk_error perr;

	if (ev == LINK_EV_BROKEN) {
		c->broken = true;
		c->err = *err;
		c->link = NULL;
		return true;
	}
	if (pkt->avail < pkt->len) {
		ck_assert(sbuf_hold(link_sbuf(l), pkt->len));
		return true;
	}
	if (pkt->type == 'D')
		tc_datarow(c, pkt->data + 5, pkt->len - 5);
	if (pkt->type == 'E' && proto_parse_server_error(pkt->data + 5, pkt->len - 5, &se, &perr)) {
		c->got_error = true;
		snprintf(c->sqlstate, sizeof(c->sqlstate), "%s", se.sqlstate ? se.sqlstate : "");
	}
	if (pkt->type == 'Z')
		c->got_z = true;
	sbuf_skip(link_sbuf(l), pkt->len);
	return true;
}

static bool
tc_done(void *arg)
{
	return ((struct tclient *)arg)->done;
}

static bool
tc_z(void *arg)
{
	struct tclient *c = arg;

	return c->got_z || c->broken;
}

/* Start acquiring; returns the immediate result. */
static enum pool_acquire_result
tc_start(struct tclient *c, struct pool *p)
{
	enum pool_acquire_result r;
	struct link *l;

	memset(c, 0, sizeof(*c));
	pool_waiter_init(&c->w, tc_ready, tc_link_cb, c);
	r = pool_acquire(p, &c->w, &l, &c->err);
	if (r == POOL_GOT) {
		c->link = l;
		c->done = true;
	} else if (r == POOL_FAILED) {
		c->done = true;
		c->failed = true;
	}
	return r;
}

/* Acquire and wait (bounded) until a link or an error. */
static void
tc_get(struct tclient *c, struct pool *p)
{
	(void)tc_start(c, p);
	ck_assert_msg(run_until(tc_done, c, 20), "acquire did not finish");
}

/* Acquire, insisting on a link. */
static void
tc_get_ok(struct tclient *c, struct pool *p)
{
	tc_get(c, p);
	ck_assert_msg(!c->failed, "acquire failed: %s", c->err.message);
	ck_assert_ptr_nonnull(c->link);
	ck_assert_int_eq(link_state(c->link), LINK_ST_ACTIVE);
}

/* Run <sql> on the client's link; returns the first value of the last row. */
static const char *
tc_query(struct tclient *c, const char *sql)
{
	struct pktbuf pb;

	c->got_z = false;
	c->got_error = false;
	c->value[0] = '\0';
	pktbuf_init(&pb, 64);
	pktbuf_write_query(&pb, sql);
	ck_assert(link_send(c->link, pb.buf, pb.len));
	pktbuf_cleanup(&pb);
	ck_assert_msg(run_until(tc_z, c, 20), "query did not finish: %s", sql);
	return c->value;
}

struct count_goal {
	struct pool *p;
	enum link_state st;
	size_t n;
};

static bool
count_is(void *arg)
{
	struct count_goal *g = arg;

	return pool_count(g->p, g->st) == g->n;
}

/* Count the server's backends of <user> (through a superuser pool). */
static int
server_backends(struct pool *admin, const char *user)
{
	struct tclient c;
	char sql[256];
	int n;

	tc_get_ok(&c, admin);
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM pg_stat_activity WHERE usename = '%s'",
		 user);
	n = atoi(tc_query(&c, sql));
	pool_release(c.link, NULL);
	return n;
}

/* Wait (bounded) until <user> has <want> backends: a backend whose connection neki closed
 * leaves pg_stat_activity only when the server has noticed. */
static bool
server_backends_become(struct pool *admin, const char *user, int want)
{
	for (int i = 0; i < 100; i++) {
		if (server_backends(admin, user) == want)
			return true;
		run_for(0.05);
	}
	return false;
}

/* Terminate the backend <pid> from a superuser pool. */
static void
server_kill(struct pool *admin, uint32_t pid)
{
	struct tclient c;
	char sql[128];

	tc_get_ok(&c, admin);
	snprintf(sql, sizeof(sql), "SELECT pg_terminate_backend(%u)", pid);
	ck_assert_str_eq(tc_query(&c, sql), "t");
	pool_release(c.link, NULL);
}

#define DB_TCP "db = host=127.0.0.1 port=%d dbname=postgres\n" \
	"admin = host=127.0.0.1 port=%1$d dbname=postgres user=postgres\n"

/* ---- tests ---- */

START_TEST(test_login_tcp_trust_params)
{
	struct pool *p;
	struct tclient c;
	struct count_goal g;

	NEED_CLUSTER();
	load_cfg("db = host=127.0.0.1 port=%d dbname=postgres application_name=nk_app "
		 "timezone=UTC datestyle=ISO,DMY\n", "");
	p = mk_pool("db", "nk_u1", NULL);
	ck_assert_int_eq(tc_start(&c, p), POOL_QUEUED);
	ck_assert_int_eq(pool_count(p, LINK_ST_LOGIN), 0);	/* launched from the loop */
	ck_assert(run_until(tc_done, &c, 20));
	ck_assert(!c.failed);
	ck_assert_int_eq(link_state(c.link), LINK_ST_ACTIVE);
	ck_assert_uint_gt(link_backend_pid(c.link), 0);
	ck_assert_str_eq(link_param(c.link, "application_name"), "nk_app");
	ck_assert_str_eq(link_param(c.link, "TimeZone"), "UTC");
	ck_assert_str_eq(link_param(c.link, "DateStyle"), "ISO, DMY");
	ck_assert_ptr_nonnull(link_param(c.link, "server_version"));
	ck_assert_int_eq(link_tx_status(c.link), 'I');
	ck_assert(pool_welcome_ready(p));
	ck_assert_str_eq(tc_query(&c, "SELECT current_user"), "nk_u1");
	ck_assert_str_eq(tc_query(&c, "SELECT pg_backend_pid()")[0] != '\0' ? "ok" : "", "ok");
	ck_assert_uint_eq((uint32_t)atoi(c.value), link_backend_pid(c.link));
	pool_release(c.link, NULL);
	/* session mode (default): DISCARD ALL runs before the link is idle again */
	ck_assert_int_eq(pool_count(p, LINK_ST_TESTED), 1);
	g = (struct count_goal){ p, LINK_ST_IDLE, 1 };
	ck_assert(run_until(count_is, &g, 5));
	ck_assert(log_has("new connection to server (from 127.0.0.1:"));
	ck_assert(log_has(": db/nk_u1@127.0.0.1:"));
	pool_free(p);
	ck_assert(log_has("closing because: pooler is shutting down (age="));
	ck_assert_int_eq(pool_limits_local_db_count(lim, "db"), 0);
}
END_TEST

START_TEST(test_login_unix_cleartext_and_wrong_password)
{
	struct pool *p, *bad;
	struct tclient c, c2;

	NEED_CLUSTER();
	load_cfg("db = host=%2$s port=%1$d dbname=postgres\n", "");
	p = mk_pool("db", "neki_plain", "neki_plain_pw");
	tc_get_ok(&c, p);
	ck_assert_str_eq(link_addr(c.link), link_addr(c.link));
	ck_assert(strncmp(link_addr(c.link), "unix:", 5) == 0);
	ck_assert_str_eq(tc_query(&c, "SELECT current_user"), "neki_plain");
	pool_release(c.link, NULL);
	pool_free(p);

	bad = mk_pool("db", "neki_plain", "not-the-password");
	tc_get(&c, bad);
	ck_assert(c.failed);
	ck_assert_str_eq(c.err.sqlstate, "28P01");
	ck_assert_str_eq(c.err.message, "password authentication failed for user \"neki_plain\"");
	ck_assert(log_has("server login failed: FATAL password authentication failed for user "
			  "\"neki_plain\""));
	/* a new request fails fast with the cached error (server_login_retry) */
	ck_assert_int_eq(tc_start(&c2, bad), POOL_FAILED);
	ck_assert_str_eq(c2.err.message, "server login has been failing, cached error: password "
			 "authentication failed for user \"neki_plain\" (server_login_retry)");
	pool_free(bad);
}
END_TEST

/* LIFO reuse by default, FIFO with server_round_robin. */
static void
check_reuse_order(bool round_robin)
{
	struct pool *p;
	struct tclient a, b, c;
	struct link *la, *lb;

	load_cfg(DB_TCP, round_robin ? "pool_mode = transaction\nserver_round_robin = 1" :
		 "pool_mode = transaction");
	p = mk_pool("db", "nk_u1", NULL);
	tc_get_ok(&a, p);
	tc_get_ok(&b, p);
	la = a.link;
	lb = b.link;
	ck_assert_ptr_ne(la, lb);
	pool_release(la, NULL);
	pool_release(lb, NULL);	/* b is the most recently used */
	tc_get_ok(&c, p);
	ck_assert_ptr_eq(c.link, round_robin ? la : lb);
	pool_release(c.link, NULL);
	pool_free(p);
}

START_TEST(test_lifo_fifo)
{
	NEED_CLUSTER();
	check_reuse_order(false);
	drop_cfg();
	check_reuse_order(true);
}
END_TEST

/* pool_size bounds the links; the third client waits for a release. */
START_TEST(test_pool_size_and_wait)
{
	struct pool *p, *admin;
	struct tclient a, b, c;

	NEED_CLUSTER();
	load_cfg(DB_TCP, "default_pool_size = 2");
	p = mk_pool("db", "nk_u2", NULL);
	admin = mk_pool("admin", "postgres", NULL);
	tc_get_ok(&a, p);
	tc_get_ok(&b, p);
	ck_assert_int_eq(tc_start(&c, p), POOL_QUEUED);
	run_for(0.5);
	ck_assert(!c.done);
	ck_assert_int_eq(pool_waiting(p), 1);
	ck_assert_int_eq(pool_count(p, LINK_ST_LOGIN), 0);
	ck_assert_int_eq(server_backends(admin, "nk_u2"), 2);
	pool_release(a.link, NULL);
	ck_assert(run_until(tc_done, &c, 5));
	ck_assert_ptr_eq(c.link, a.link);
	ck_assert_int_eq(pool_limits_local_db_count(lim, "db"), 2);
	pool_release(b.link, NULL);
	pool_release(c.link, NULL);
	pool_free(p);
	pool_free(admin);
}
END_TEST

/* max_db_connections and max_user_connections hold across pools sharing the limits. */
START_TEST(test_db_and_user_limits)
{
	struct pool *p1, *p2, *q1, *q2;
	struct tclient a, b, c, d;

	NEED_CLUSTER();
	load_cfg("db = host=127.0.0.1 port=%d dbname=postgres max_db_connections=1\n"
		 "d1 = host=127.0.0.1 port=%1$d dbname=postgres\n"
		 "d2 = host=127.0.0.1 port=%1$d dbname=postgres\n", "max_user_connections = 1");
	p1 = mk_pool("db", "nk_u1", NULL);
	p2 = mk_pool("db", "nk_u2", NULL);
	tc_get_ok(&a, p1);
	ck_assert_int_eq(tc_start(&b, p2), POOL_QUEUED);
	run_for(0.4);
	ck_assert(!b.done);	/* the database is full */
	pool_release(a.link, NULL);
	pool_free(p1);		/* frees the slot */
	ck_assert(run_until(tc_done, &b, 5));
	ck_assert(!b.failed);
	pool_release(b.link, NULL);
	pool_free(p2);

	q1 = mk_pool("d1", "nk_u3", NULL);
	q2 = mk_pool("d2", "nk_u3", NULL);
	tc_get_ok(&c, q1);
	ck_assert_int_eq(tc_start(&d, q2), POOL_QUEUED);
	run_for(0.4);
	ck_assert(!d.done);	/* the user is full */
	ck_assert_int_eq(pool_limits_local_user_count(lim, "nk_u3"), 1);
	pool_release(c.link, NULL);
	pool_free(q1);
	ck_assert(run_until(tc_done, &d, 5));
	pool_release(d.link, NULL);
	pool_free(q2);
}
END_TEST

/* A client waiting reserve_pool_timeout gets a link from the reserve pool. */
START_TEST(test_reserve_pool)
{
	struct pool *p;
	struct tclient a, b, c;

	NEED_CLUSTER();
	load_cfg(DB_TCP, "default_pool_size = 1\nreserve_pool_size = 1\n"
		 "reserve_pool_timeout = 0.5");
	p = mk_pool("db", "nk_u1", NULL);
	tc_get_ok(&a, p);
	ck_assert_int_eq(tc_start(&b, p), POOL_QUEUED);
	run_for(0.25);
	ck_assert(!b.done);
	ck_assert(run_until(tc_done, &b, 5));
	ck_assert(!b.failed);
	ck_assert(log_has("taking connection from reserve_pool"));
	ck_assert_int_eq(pool_limits_local_db_count(lim, "db"), 2);
	ck_assert_int_eq(tc_start(&c, p), POOL_QUEUED);	/* pool + reserve are full */
	run_for(0.8);
	ck_assert(!c.done);
	pool_release(a.link, NULL);
	ck_assert(run_until(tc_done, &c, 5));
	pool_release(b.link, NULL);
	pool_release(c.link, NULL);
	pool_free(p);
}
END_TEST

START_TEST(test_idle_timeout_and_lifetime)
{
	struct pool *p, *admin;
	struct tclient a;
	struct count_goal g;

	NEED_CLUSTER();
	load_cfg(DB_TCP, "pool_mode = transaction\nserver_idle_timeout = 0.5");
	p = mk_pool("db", "nk_u3", NULL);
	admin = mk_pool("admin", "postgres", NULL);
	tc_get_ok(&a, p);
	pool_release(a.link, NULL);
	g = (struct count_goal){ p, LINK_ST_IDLE, 0 };
	ck_assert(run_until(count_is, &g, 5));
	ck_assert(log_has("closing because: server idle timeout (age="));
	ck_assert(server_backends_become(admin, "nk_u3", 0));
	pool_free(p);
	pool_free(admin);
	drop_cfg();

	load_cfg(DB_TCP, "pool_mode = transaction\nserver_lifetime = 0.3");
	p = mk_pool("db", "nk_u3", NULL);
	tc_get_ok(&a, p);
	run_for(0.4);
	pool_release(a.link, NULL);	/* lifetime is enforced at release */
	ck_assert_int_eq(pool_count(p, LINK_ST_IDLE), 0);
	ck_assert(log_has("closing because: server lifetime over (age="));
	pool_free(p);
	drop_cfg();

	/* server_lifetime = 0 (use each link once): a link taken only for the welcome is
	 * not a use; it goes back idle and serves the client next */
	load_cfg(DB_TCP, "pool_mode = session\nserver_lifetime = 0");
	p = mk_pool("db", "nk_u3", NULL);
	tc_get_ok(&a, p);
	pool_release_unused(a.link);
	ck_assert_int_eq(pool_count(p, LINK_ST_IDLE), 1);
	tc_get_ok(&a, p);
	pool_release(a.link, NULL);
	ck_assert_int_eq(pool_count(p, LINK_ST_IDLE), 0);
	pool_free(p);
}
END_TEST

/* server_check_delay = 0: every reuse runs server_check_query first. */
START_TEST(test_check_query)
{
	struct pool *p;
	struct tclient a, b;
	struct link *la;

	NEED_CLUSTER();
	load_cfg(DB_TCP, "pool_mode = transaction\nserver_check_delay = 0\n"
		 "server_check_query = select 1");
	p = mk_pool("db", "nk_u1", NULL);
	tc_get_ok(&a, p);
	la = a.link;
	pool_release(la, NULL);
	ck_assert_int_eq(tc_start(&b, p), POOL_QUEUED);
	ck_assert_int_eq(link_state(la), LINK_ST_TESTED);
	ck_assert(run_until(tc_done, &b, 5));
	ck_assert_ptr_eq(b.link, la);
	pool_release(b.link, NULL);
	pool_free(p);
	drop_cfg();

	/* the default "<empty>" check query is an empty query; a long delay skips it */
	load_cfg(DB_TCP, "pool_mode = transaction\nserver_check_delay = 0");
	p = mk_pool("db", "nk_u1", NULL);
	tc_get_ok(&a, p);
	la = a.link;
	pool_release(la, NULL);
	ck_assert_int_eq(tc_start(&b, p), POOL_QUEUED);
	ck_assert(run_until(tc_done, &b, 5));
	ck_assert_ptr_eq(b.link, la);
	pool_release(b.link, NULL);
	pool_free(p);
	drop_cfg();
	load_cfg(DB_TCP, "pool_mode = transaction\nserver_check_delay = 30");
	p = mk_pool("db", "nk_u1", NULL);
	tc_get_ok(&a, p);
	la = a.link;
	pool_release(la, NULL);
	ck_assert_int_eq(tc_start(&b, p), POOL_GOT);
	pool_release(b.link, NULL);
	pool_free(p);
}
END_TEST

/* server_reset_query runs on release in session mode, not in transaction mode. */
static void
check_reset(const char *mode, const char *expect)
{
	struct pool *p;
	struct tclient a;
	char settings[256];

	snprintf(settings, sizeof(settings), "pool_mode = %s\nserver_reset_query = RESET ALL",
		 mode);
	load_cfg(DB_TCP, settings);
	p = mk_pool("db", "nk_u1", NULL);
	tc_get_ok(&a, p);
	tc_query(&a, "SET work_mem = '7MB'");
	pool_release(a.link, NULL);
	tc_get_ok(&a, p);
	ck_assert_str_eq(tc_query(&a, "SHOW work_mem"), expect);
	pool_release(a.link, NULL);
	pool_free(p);
	drop_cfg();
}

START_TEST(test_reset_query)
{
	NEED_CLUSTER();
	check_reset("session", "4MB");
	check_reset("transaction", "7MB");
	check_reset("transaction\nserver_reset_query_always = 1", "4MB");
	load_cfg("db = host=127.0.0.1 port=%d dbname=postgres "
		 "connect_query='SET work_mem = ''3MB'''\n", "");
	{
		struct pool *p = mk_pool("db", "nk_u1", NULL);
		struct tclient a;

		tc_get_ok(&a, p);
		ck_assert_str_eq(tc_query(&a, "SHOW work_mem"), "3MB");
		pool_release(a.link, NULL);
		pool_free(p);
	}
}
END_TEST

static bool
no_links(void *arg)
{
	return pool_link_total(arg) == 0;
}

/*
 * pool_release_reset(): the query runs before the link is idle again (TESTED meanwhile), then
 * the pool's own server_reset_query when it has one; a failing reset closes the link.
 */
START_TEST(test_release_reset)
{
	struct pool *p;
	struct tclient a, b;
	struct link *la;

	NEED_CLUSTER();
	load_cfg(DB_TCP, "pool_mode = transaction");
	p = mk_pool("db", "nk_u1", NULL);
	tc_get_ok(&a, p);
	la = a.link;
	tc_query(&a, "SET work_mem = '7MB'");
	pool_release_reset(la, "RESET ALL");
	ck_assert_int_eq(link_state(la), LINK_ST_TESTED);
	ck_assert_int_eq(tc_start(&b, p), POOL_QUEUED);
	ck_assert(run_until(tc_done, &b, 5));
	ck_assert_ptr_eq(b.link, la);
	ck_assert_str_eq(tc_query(&b, "SHOW work_mem"), "4MB");
	pool_release_reset(b.link, "SELECT no_such_column");
	ck_assert(run_until(no_links, p, 5));
	ck_assert(log_has("closing because: reset query failed"));
	pool_free(p);
	drop_cfg();

	/* with server_reset_query (session mode) both run, in that order */
	load_cfg(DB_TCP, "pool_mode = session\nserver_reset_query = SET statement_timeout = 5000");
	p = mk_pool("db", "nk_u1", NULL);
	tc_get_ok(&a, p);
	la = a.link;
	tc_query(&a, "SET work_mem = '7MB'");
	tc_query(&a, "SET statement_timeout = 1000");
	pool_release_reset(la, "RESET ALL");
	tc_get_ok(&b, p);
	ck_assert_ptr_eq(b.link, la);
	ck_assert_str_eq(tc_query(&b, "SHOW work_mem"), "4MB");
	ck_assert_str_eq(tc_query(&b, "SHOW statement_timeout"), "5s");
	pool_release(b.link, NULL);
	pool_free(p);
	drop_cfg();
}
END_TEST

/* A terminated backend: an idle link is dropped, an active one reports to its client. */
START_TEST(test_broken_links)
{
	struct pool *p, *admin;
	struct tclient a, b;
	struct count_goal g;

	NEED_CLUSTER();
	load_cfg(DB_TCP, "");
	p = mk_pool("db", "nk_u2", NULL);
	admin = mk_pool("admin", "postgres", NULL);
	tc_get_ok(&a, p);
	tc_get_ok(&b, p);
	pool_release(a.link, NULL);
	server_kill(admin, link_backend_pid(a.link));
	g = (struct count_goal){ p, LINK_ST_IDLE, 0 };
	ck_assert(run_until(count_is, &g, 5));
	ck_assert(log_has("closing because: server conn crashed? (age="));

	server_kill(admin, link_backend_pid(b.link));
	ck_assert(run_until(tc_z, &b, 5));
	ck_assert(b.broken);
	ck_assert_str_eq(b.err.message, "server conn crashed?");
	ck_assert_int_eq(pool_count(p, LINK_ST_ACTIVE), 0);
	ck_assert_int_eq(pool_limits_local_db_count(lim, "db"), 0);
	/* the pool still works */
	tc_get_ok(&a, p);
	ck_assert_str_eq(tc_query(&a, "SELECT 41 + 1"), "42");
	pool_release(a.link, NULL);
	pool_free(p);
	pool_free(admin);
}
END_TEST

/* A dirty release closes the link; a clean one in a transaction is dirty too. */
START_TEST(test_dirty_release)
{
	struct pool *p;
	struct tclient a;

	NEED_CLUSTER();
	load_cfg(DB_TCP, "");
	p = mk_pool("db", "nk_u1", NULL);
	tc_get_ok(&a, p);
	tc_query(&a, "BEGIN");
	ck_assert_int_eq(link_tx_status(a.link), 'T');
	pool_release(a.link, NULL);
	ck_assert(log_has("closing because: client disconnect while server was not ready"));
	ck_assert_int_eq(pool_count(p, LINK_ST_IDLE), 0);
	tc_get_ok(&a, p);
	pool_release(a.link, "client unexpected eof");
	ck_assert(log_has("closing because: client unexpected eof"));
	pool_free(p);
}
END_TEST

/* Nothing listens: connect failed, then fast fail, then query_wait_timeout for waiters. */
START_TEST(test_connect_failed_login_retry)
{
	struct pool *p;
	struct tclient a, b;
	struct sockaddr_in sin = { 0 };
	socklen_t len = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	char dbs[256];

	NEED_CLUSTER();
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
	close(fd);	/* a port nobody listens on */
	snprintf(dbs, sizeof(dbs), "db = host=127.0.0.1 port=%d dbname=postgres\n",
		 ntohs(sin.sin_port));
	load_cfg(dbs, "query_wait_timeout = 0.6\nserver_login_retry = 30");
	p = mk_pool("db", "nk_u1", NULL);
	ck_assert_int_eq(tc_start(&a, p), POOL_QUEUED);
	ck_assert(run_until(tc_done, &a, 5));
	ck_assert(a.failed);
	ck_assert_str_eq(a.err.message, "query_wait_timeout");
	ck_assert(log_has("closing because: connect failed (age=0s)"));
	ck_assert_int_eq(tc_start(&b, p), POOL_FAILED);
	ck_assert_str_eq(b.err.message, "server login has been failing, cached error: connect "
			 "failed (server_login_retry)");
	ck_assert_int_eq(pool_limits_local_db_count(lim, "db"), 0);
	pool_free(p);
}
END_TEST

/*
 * A fail-fast pool (a shard of a sharded database): the refused connect ends the wait at
 * once (08001, the socket error), within server_login_retry pool_acquire fails at once; the
 * janitor probes the refusing server at every tick, waiters or not (so the pool uses it as
 * soon as it accepts logins), and "could not connect" is logged once per
 * server_login_retry; a wrong password (a login error) ends the wait with the server's
 * message and is not probed.
 */
START_TEST(test_fail_fast)
{
	struct pool *p;
	struct tclient a, b, c;
	struct sockaddr_in sin = { 0 };
	socklen_t len = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	char dbs[256];
	int n;

	NEED_CLUSTER();
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
	close(fd);	/* a port nobody listens on */
	snprintf(dbs, sizeof(dbs), "db = host=127.0.0.1 port=%d dbname=postgres\n",
		 ntohs(sin.sin_port));
	load_cfg(dbs, "query_wait_timeout = 30\nserver_login_retry = 0.5");
	p = mk_pool("db", "nk_u1", NULL);
	pool_set_fail_fast(p, true);
	ck_assert_int_eq(tc_start(&a, p), POOL_QUEUED);
	ck_assert(run_until(tc_done, &a, 5));
	ck_assert(a.failed && a.w.connect_failed);
	ck_assert_str_eq(a.err.sqlstate, "08001");
	ck_assert_str_eq(a.err.message, "Connection refused");
	ck_assert_int_eq(tc_start(&b, p), POOL_FAILED);	/* within server_login_retry */
	ck_assert(b.w.connect_failed);
	ck_assert_str_eq(b.err.message, "Connection refused");
	ck_assert_int_eq(log_count("could not connect to"), 1);
	run_for(0.6);	/* no waiter: the janitor probes meanwhile (every 250 ms) */
	ck_assert_int_ge(log_count("closing because: connect failed (age=0s)"), 3);
	ck_assert_int_le(log_count("could not connect to"), 2);
	ck_assert_int_eq(tc_start(&c, p), POOL_FAILED);	/* a probe failed just now */
	ck_assert(c.w.connect_failed);
	ck_assert_str_eq(c.err.message, "Connection refused");
	ck_assert_int_eq(pool_limits_local_db_count(lim, "db"), 0);
	pool_free(p);

	/* a login error: the server's own message */
	drop_cfg();
	load_cfg(DB_TCP, "server_login_retry = 0.2");
	p = mk_pool("db", "neki_plain", "not-the-password");
	pool_set_fail_fast(p, true);
	ck_assert_int_eq(tc_start(&a, p), POOL_QUEUED);
	ck_assert(run_until(tc_done, &a, 5));
	ck_assert(a.failed && a.w.connect_failed);
	ck_assert_str_eq(a.err.sqlstate, "08001");
	ck_assert_str_eq(a.err.message, "password authentication failed for user \"neki_plain\"");
	n = log_count("password authentication failed");
	run_for(0.6);	/* the server answered: no probe, no other login */
	ck_assert_int_eq(log_count("password authentication failed"), n);
	pool_free(p);
}
END_TEST

/* A server that never answers the SYN: server_connect_timeout. */
START_TEST(test_connect_timeout)
{
	struct pool *p;
	struct tclient a;
	struct sockaddr_in sin = { 0 };
	socklen_t len = sizeof(sin);
	int lfd = socket(AF_INET, SOCK_STREAM, 0), fill[4];
	char dbs[256];

	NEED_CLUSTER();
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	ck_assert_int_eq(listen(lfd, 0), 0);
	ck_assert_int_eq(getsockname(lfd, (struct sockaddr *)&sin, &len), 0);
	for (int i = 0; i < 4; i++) {
		fill[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		(void)connect(fill[i], (struct sockaddr *)&sin, sizeof(sin));
	}
	snprintf(dbs, sizeof(dbs), "db = host=127.0.0.1 port=%d dbname=postgres\n",
		 ntohs(sin.sin_port));
	load_cfg(dbs, "server_connect_timeout = 0.4\nserver_login_retry = 0");
	p = mk_pool("db", "nk_u1", NULL);
	ck_assert_int_eq(tc_start(&a, p), POOL_QUEUED);
	run_for(0.1);
	ck_assert_int_eq(pool_count(p, LINK_ST_LOGIN), 1);
	for (int i = 0; i < 200 && !log_has("closing because: connect timeout"); i++)
		run_for(0.02);
	ck_assert(log_has("closing because: connect timeout (age=0s)"));
	ck_assert(!a.done);	/* connect failures keep waiters queued (retried) */
	pool_cancel_wait(&a.w);
	ck_assert_int_eq(pool_waiting(p), 0);
	pool_free(p);
	for (int i = 0; i < 4; i++)
		close(fill[i]);
	close(lfd);
}
END_TEST

/* min_pool_size opens links while a client uses the pool. */
START_TEST(test_min_pool_size)
{
	struct pool *p;
	struct count_goal g;

	NEED_CLUSTER();
	load_cfg("db = host=127.0.0.1 port=%d dbname=postgres min_pool_size=2\n", "");
	p = mk_pool("db", "nk_u1", NULL);
	run_for(0.6);
	ck_assert_int_eq(pool_count(p, LINK_ST_IDLE), 0);	/* no client yet */
	pool_client_attach(p);
	g = (struct count_goal){ p, LINK_ST_IDLE, 2 };
	ck_assert(run_until(count_is, &g, 10));
	run_for(0.6);
	ck_assert_int_eq(pool_count(p, LINK_ST_IDLE), 2);
	pool_client_detach(p);
	pool_free(p);
}
END_TEST

/* Log in as <user> with <secret> (and <keys>); "" on success, else the error message. */
static const char *
try_login(const char *user, const char *secret, const struct scram_keys *keys,
	  struct tclient *c)
{
	struct pool_conf pc = { 0 };
	struct nk_error err;
	struct pool *p;

	pc.cfg = cfg;
	pc.db = cfg_database_find(cfg, "db");
	pc.db_name = "db";
	pc.user_name = user;
	pc.password = secret;
	pc.scram_keys = keys;
	pc.limits = pool_limits_local_ops();
	pc.limits_ctx = lim;
	p = pool_new(base, &pc, &err);
	ck_assert_ptr_nonnull(p);
	tc_get(c, p);
	if (!c->failed) {
		ck_assert_str_eq(tc_query(c, "SELECT current_user"), user);
		pool_release(c->link, NULL);
	}
	pool_free(p);
	return c->failed ? c->err.message : "";
}

/* Recover ClientKey/ServerKey the way a client's SCRAM login to neki does. */
static void
recover_keys(const char *user, const char *secret, const char *password,
	     struct scram_keys *out)
{
	struct scram_server srv;
	struct scram_client cli;
	struct nk_error e;
	const char *m;

	scram_server_init(&srv, user, secret, SCRAM_DEFAULT_ITERATIONS);
	ck_assert(scram_client_init_password(&cli, password, "", NULL));
	m = scram_client_first_msg(&cli);
	ck_assert(scram_server_client_first(&srv, (const uint8_t *)m, strlen(m), &e));
	m = scram_server_first_msg(&srv);
	ck_assert(scram_client_server_first(&cli, (const uint8_t *)m, strlen(m), &e));
	m = scram_client_final_msg(&cli);
	ck_assert_msg(scram_server_client_final(&srv, (const uint8_t *)m, strlen(m), &e), "%s",
		      e.message);
	ck_assert(srv.keys.valid);
	*out = srv.keys;
	scram_server_cleanup(&srv);
	scram_client_cleanup(&cli);
}

/* The server's stored secret of <user> (pg_authid). */
static void
stored_secret(const char *user, char *out, size_t len)
{
	struct pool *admin = mk_pool("admin", "postgres", NULL);
	struct tclient c;
	char sql[128];

	tc_get_ok(&c, admin);
	snprintf(sql, sizeof(sql), "SELECT rolpassword FROM pg_authid WHERE rolname = '%s'",
		 user);
	snprintf(out, len, "%s", tc_query(&c, sql));
	pool_release(c.link, NULL);
	pool_free(admin);
}

START_TEST(test_auth_md5)
{
	struct tclient c;
	char secret[AUTH_MD5_LEN + 1];

	NEED_CLUSTER();
	load_cfg(DB_TCP, "pool_mode = transaction");
	ck_assert_str_eq(try_login("neki_md5", "neki_md5_pw", NULL, &c), "");
	auth_md5_secret("neki_md5", "neki_md5_pw", secret);
	ck_assert_str_eq(try_login("neki_md5", secret, NULL, &c), "");
	ck_assert_str_eq(try_login("neki_md5", "wrong", NULL, &c),
			 "password authentication failed for user \"neki_md5\"");
	ck_assert_str_eq(c.err.sqlstate, "28P01");
	/* an md5 secret cannot answer a cleartext request */
	auth_md5_secret("neki_plain", "neki_plain_pw", secret);
	ck_assert_str_eq(try_login("neki_plain", secret, NULL, &c),
			 "server login failed: wrong password type");
	ck_assert_str_eq(try_login("neki_plain", NULL, NULL, &c),
			 "server login failed: no password configured");
}
END_TEST

START_TEST(test_auth_scram)
{
	struct tclient c;
	struct scram_keys keys;
	char secret[512], md5[AUTH_MD5_LEN + 1];

	NEED_CLUSTER();
	load_cfg(DB_TCP, "pool_mode = transaction");
	ck_assert_str_eq(try_login("neki_test", "neki_test_pw", NULL, &c), "");
	ck_assert_str_eq(try_login("neki_test", "nope", NULL, &c),
			 "password authentication failed for user \"neki_test\"");
	ck_assert_str_eq(c.err.sqlstate, "28P01");
	auth_md5_secret("neki_test", "neki_test_pw", md5);
	ck_assert_str_eq(try_login("neki_test", md5, NULL, &c),
			 "server login failed: wrong password type");
	/* pass-through: the stored SCRAM secret plus keys recovered from a client's login */
	stored_secret("neki_test", secret, sizeof(secret));
	ck_assert(strncmp(secret, "SCRAM-SHA-256$", 14) == 0);
	ck_assert_str_eq(try_login("neki_test", secret, NULL, &c),
			 "server login failed: wrong password type");
	ck_assert(log_has("cannot do SCRAM authentication: password is SCRAM secret but "
			  "client authentication did not provide SCRAM keys"));
	recover_keys("neki_test", secret, "neki_test_pw", &keys);
	ck_assert_str_eq(try_login("neki_test", secret, &keys, &c), "");
}
END_TEST

/* ---- a session-like forwarder: server packets go straight to a client socket ---- */

struct fwd_client {
	struct pool_waiter w;
	struct link *link;
	bool done;
	struct sbuf csb;		/* the "client" connection (one end of a socketpair) */
	int peer;			/* the other end, read by the test */
	bool saw_z;			/* the link passed a ReadyForQuery */
	bool saw_backpressure;		/* the link stopped reading for the client */
};

static bool
fwd_csb_cb(struct sbuf *sb, enum sbuf_event ev, const struct sbuf_pkt *pkt, int err, void *arg)
{
	if (ev == SBUF_EV_PKT)
		sbuf_skip(sb, pkt->len);
	return true;
}

static void
fwd_ready(struct pool_waiter *w, struct link *l, const struct nk_error *err)
{
	struct fwd_client *f = container_of(w, struct fwd_client, w);

	f->done = true;
	f->link = l;
}

static bool
fwd_link_cb(struct link *l, enum link_event ev, const struct sbuf_pkt *pkt,
	    const struct nk_error *err, void *ctx)
{
	struct fwd_client *f = ctx;

	if (ev != LINK_EV_PKT)
		return true;
	if (link_sbuf(l)->waiting)
		f->saw_backpressure = true;
	if (pkt->type == 'Z')
		f->saw_z = true;
	sbuf_forward(link_sbuf(l), &f->csb, pkt->len);
	return true;
}

static bool
fwd_done(void *arg)
{
	return ((struct fwd_client *)arg)->done;
}

/* Parse whole messages out of <buf>; count DataRows; true once a 'Z' was seen. */
static bool
count_msgs(const uint8_t *buf, size_t len, size_t *off, long *rows)
{
	while (len - *off >= 5) {
		const uint8_t *p = buf + *off;
		uint32_t n = ((uint32_t)p[1] << 24) | ((uint32_t)p[2] << 16) |
			     ((uint32_t)p[3] << 8) | p[4];

		if (len - *off < n + 1)
			break;
		if (p[0] == 'D')
			(*rows)++;
		*off += n + 1;
		if (p[0] == 'Z')
			return true;
	}
	return false;
}

/*
 * 20 MB of rows forwarded zero-copy from the link to a client that reads late: the link
 * stops reading (backpressure), nothing is lost or reordered, the link is clean afterwards.
 */
/* The client's side of a socket pair read as the loop runs, until a ReadyForQuery. */
struct peer_drain {
	int peer;
	uint8_t *buf;
	size_t cap, got, off;
	long rows;
};

static bool
drain_peer(void *arg)
{
	struct peer_drain *d = arg;
	ssize_t n;

	while (d->got < d->cap &&
	       (n = recv(d->peer, d->buf + d->got, d->cap - d->got, MSG_DONTWAIT)) > 0)
		d->got += (size_t)n;
	return count_msgs(d->buf, d->got, &d->off, &d->rows);
}

START_TEST(test_forward_to_client_backpressure)
{
	struct pool *p;
	struct fwd_client f;
	struct sbuf_opts o;
	struct link *l;
	struct pktbuf pb;
	int sv[2];
	size_t cap = 32u << 20;
	uint8_t *buf = malloc(cap);
	struct peer_drain d = { 0 };

	NEED_CLUSTER();
	load_cfg(DB_TCP, "pool_mode = transaction");
	p = mk_pool("db", "nk_u1", NULL);
	memset(&f, 0, sizeof(f));
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	sbuf_opts_default(&o);
	ck_assert(sbuf_init(&f.csb, base, fwd_csb_cb, &f, &o));
	ck_assert(sbuf_accept(&f.csb, sv[0], true));
	f.peer = sv[1];
	pool_waiter_init(&f.w, fwd_ready, fwd_link_cb, &f);
	if (pool_acquire(p, &f.w, &l, NULL) == POOL_GOT)
		fwd_ready(&f.w, l, NULL);
	ck_assert(run_until(fwd_done, &f, 20));
	ck_assert_ptr_nonnull(f.link);
	pktbuf_init(&pb, 128);
	pktbuf_write_query(&pb, "SELECT repeat('x', 1000) FROM generate_series(1, 20000)");
	ck_assert(link_send(f.link, pb.buf, pb.len));
	pktbuf_cleanup(&pb);
	run_for(0.5);		/* nobody reads the client socket yet */
	ck_assert(link_sbuf(f.link)->waiting);
	ck_assert_uint_lt(sbuf_queued(&f.csb), 1u << 20);
	d.peer = f.peer;
	d.buf = buf;
	d.cap = cap;
	ck_assert(run_until(drain_peer, &d, 60));	/* a bounded wait, not a count of spins */
	ck_assert_int_eq(d.rows, 20000);
	ck_assert(f.saw_z);
	ck_assert_int_eq(link_tx_status(f.link), 'I');
	pool_release(f.link, NULL);
	ck_assert_int_eq(pool_count(p, LINK_ST_IDLE), 1);
	sbuf_cleanup(&f.csb);
	close(sv[1]);
	pool_free(p);
	free(buf);
}
END_TEST

/* RECONNECT: idle links close now ("database configuration changed"), active ones at release. */
START_TEST(test_reconnect_close_needed)
{
	struct pool *p;
	struct tclient a, b;

	NEED_CLUSTER();
	load_cfg(DB_TCP, "pool_mode = transaction");
	p = mk_pool("db", "nk_u1", NULL);
	tc_get_ok(&a, p);
	tc_get_ok(&b, p);
	pool_release(b.link, NULL);
	ck_assert_int_eq(pool_count(p, LINK_ST_IDLE), 1);
	pool_reconnect(p);
	ck_assert_int_eq(pool_count(p, LINK_ST_IDLE), 0);
	ck_assert(log_has("closing because: database configuration changed (age="));
	ck_assert(link_close_needed(a.link));
	ck_assert_str_eq(tc_query(&a, "SELECT 1"), "1");	/* still usable meanwhile */
	pool_release(a.link, NULL);
	ck_assert(log_has("closing because: close_needed (age="));
	ck_assert_int_eq(pool_limits_local_db_count(lim, "db"), 0);
	tc_get_ok(&a, p);	/* a new link */
	ck_assert(!link_close_needed(a.link));
	pool_release(a.link, NULL);
	pool_free(p);
}
END_TEST

/* pool_free with a link in use: its client is told, nothing leaks. */
START_TEST(test_free_with_active_link)
{
	struct pool *p;
	struct tclient a, b;

	NEED_CLUSTER();
	load_cfg(DB_TCP, "default_pool_size = 1");
	p = mk_pool("db", "nk_u1", NULL);
	tc_get_ok(&a, p);
	ck_assert_int_eq(tc_start(&b, p), POOL_QUEUED);
	pool_free(p);
	ck_assert(a.broken);
	ck_assert_str_eq(a.err.message, "pooler is shutting down");
	ck_assert(b.failed);
	ck_assert_str_eq(b.err.message, "pooler is shutting down");
	ck_assert_int_eq(pool_limits_local_db_count(lim, "db"), 0);
}
END_TEST

/* Host lists: round-robin (default), disable, and failover to the next host. */
START_TEST(test_host_list)
{
	struct pool *p;
	struct tclient a, b;
	char unix_label[32], tcp_label[32];

	NEED_CLUSTER();
	snprintf(unix_label, sizeof(unix_label), "unix:%d", cl_port);
	snprintf(tcp_label, sizeof(tcp_label), "127.0.0.1:%d", cl_port);
	load_cfg("db = host=%2$s,127.0.0.1 port=%1$d dbname=postgres\n", "pool_mode = transaction");
	p = mk_pool("db", "nk_u1", NULL);
	tc_get_ok(&a, p);
	tc_get_ok(&b, p);
	ck_assert_str_eq(link_addr(a.link), unix_label);
	ck_assert_str_eq(link_addr(b.link), tcp_label);
	pool_release(a.link, NULL);
	pool_release(b.link, NULL);
	pool_free(p);
	drop_cfg();

	load_cfg("db = host=%2$s,127.0.0.1 port=%1$d dbname=postgres load_balance_hosts=disable\n",
		 "pool_mode = transaction");
	p = mk_pool("db", "nk_u1", NULL);
	tc_get_ok(&a, p);
	tc_get_ok(&b, p);
	ck_assert_str_eq(link_addr(a.link), unix_label);
	ck_assert_str_eq(link_addr(b.link), unix_label);
	pool_release(a.link, NULL);
	pool_release(b.link, NULL);
	pool_free(p);
	drop_cfg();

	load_cfg("db = host=/nonexistent-nk-dir,127.0.0.1 port=%1$d dbname=postgres "
		 "load_balance_hosts=disable\n", "pool_mode = transaction\nserver_login_retry = 0");
	p = mk_pool("db", "nk_u1", NULL);
	tc_get_ok(&a, p);
	ck_assert_str_eq(link_addr(a.link), tcp_label);
	ck_assert(log_has("closing because: connect failed (age=0s)"));
	pool_release(a.link, NULL);
	pool_free(p);
}
END_TEST

/* Host names through the c-ares resolver; a name that does not resolve fails fast after. */
START_TEST(test_dns_hosts)
{
	struct dns_opts o = { 15, 15, NULL, "f" };
	struct pool_conf pc = { 0 };
	struct nk_error err;
	struct dns *d;
	struct pool *p;
	struct tclient a, b;
	char tcp_label[32];

	NEED_CLUSTER();
	/*
	 * A test-owned hosts file: "localhost" may also map to ::1, where the cluster does not
	 * listen (Debian's default /etc/hosts), so use a name that maps to 127.0.0.1 only.
	 */
	char hosts[] = "/tmp/neki-pool-hosts.XXXXXX";
	int hfd = mkstemp(hosts);

	ck_assert_int_ne(hfd, -1);
	ck_assert_int_gt(write(hfd, "127.0.0.1 neki-pool-db.test\n", 28), 0);
	close(hfd);
	setenv("CARES_HOSTS", hosts, 1);
	d = dns_new(base, &o, &err);
	ck_assert_ptr_nonnull(d);
	load_cfg("db = host=neki-pool-db.test port=%d dbname=postgres\n"
		 "bad = host=no-such-host.invalid port=%1$d dbname=postgres\n",
		 "pool_mode = transaction\nquery_wait_timeout = 0.5");
	pc.cfg = cfg;
	pc.db = cfg_database_find(cfg, "db");
	pc.db_name = "db";
	pc.user_name = "nk_u1";
	pc.dns = d;
	pc.limits = pool_limits_local_ops();
	pc.limits_ctx = lim;
	p = pool_new(base, &pc, &err);
	ck_assert_ptr_nonnull(p);
	tc_get_ok(&a, p);
	snprintf(tcp_label, sizeof(tcp_label), "127.0.0.1:%d", cl_port);
	ck_assert_str_eq(link_addr(a.link), tcp_label);
	ck_assert_str_eq(tc_query(&a, "SELECT 7"), "7");
	pool_release(a.link, NULL);
	pool_free(p);

	pc.db = cfg_database_find(cfg, "bad");
	pc.db_name = "bad";
	p = pool_new(base, &pc, &err);
	ck_assert_ptr_nonnull(p);
	tc_get(&a, p);
	ck_assert(a.failed);
	ck_assert_str_eq(a.err.message, "query_wait_timeout");
	ck_assert(log_has("could not resolve host \"no-such-host.invalid\""));
	ck_assert(log_has("closing because: server DNS lookup failed"));
	ck_assert_int_eq(tc_start(&b, p), POOL_FAILED);
	ck_assert_str_eq(b.err.message, "server login has been failing, cached error: server DNS "
			 "lookup failed (server_login_retry)");
	pool_free(p);
	dns_free(d);
	unsetenv("CARES_HOSTS");
	unlink(hosts);
}
END_TEST

/* max_db_connections / max_user_connections: idle links of sibling pools are evicted. */
START_TEST(test_evict_for_db_and_user_limits)
{
	struct pool *p1, *p2, *q1, *q2;
	struct tclient a, b;

	NEED_CLUSTER();
	load_cfg("db = host=127.0.0.1 port=%d dbname=postgres max_db_connections=1\n"
		 "d1 = host=127.0.0.1 port=%1$d dbname=postgres\n"
		 "d2 = host=127.0.0.1 port=%1$d dbname=postgres\n",
		 "pool_mode = transaction\nmax_user_connections = 1");
	p1 = mk_pool("db", "nk_u1", NULL);
	p2 = mk_pool("db", "nk_u2", NULL);
	tc_get_ok(&a, p1);
	pool_release(a.link, NULL);	/* idle, but holds the database's only slot */
	tc_get_ok(&b, p2);
	ck_assert(log_has("closing because: evicted (age="));
	ck_assert_int_eq(pool_count(p1, LINK_ST_IDLE), 0);
	ck_assert_int_eq(pool_limits_local_db_count(lim, "db"), 1);
	pool_release(b.link, NULL);
	pool_free(p1);
	pool_free(p2);

	q1 = mk_pool("d1", "nk_u3", NULL);
	q2 = mk_pool("d2", "nk_u3", NULL);
	tc_get_ok(&a, q1);
	pool_release(a.link, NULL);
	tc_get_ok(&b, q2);		/* the user's only slot moves from d1 to d2 */
	ck_assert_int_eq(pool_count(q1, LINK_ST_IDLE), 0);
	ck_assert_int_eq(pool_limits_local_user_count(lim, "nk_u3"), 1);
	pool_release(b.link, NULL);
	pool_free(q1);
	pool_free(q2);
}
END_TEST

/*
 * ---- two workers in one process ----
 * Two pools of the same (database, user) stand for the pools of two workers: the limits are
 * the process-local ones (shared, as shm's are), the waiting hooks read the other pool's
 * pool_wait_since() and a wake runs the other pool's pool_wake() from the loop, as another
 * worker's eventfd would.
 */
static struct pool *xw_pool[2];
static int xw_id[2] = { 0, 1 };
static int xw_wakes[2];
static struct event *xw_ev[2];

static bool
xw_try(void *ctx, const char *db, const char *user, int pool_max, int db_max, int user_max)
{
	return pool_limits_local_ops()->try_acquire(lim, db, user, pool_max, db_max, user_max);
}

static void
xw_release(void *ctx, const char *db, const char *user)
{
	pool_limits_local_ops()->release(lim, db, user);
}

static int
xw_count(void *ctx, const char *db, const char *user, enum pool_scope scope)
{
	return pool_limits_local_ops()->count(lim, db, user, scope);
}

static void
xw_publish(void *ctx, const char *db, const char *user)
{
	(void)ctx;	/* the other side reads pool_wait_since() directly */
}

/* The other worker's wait in <scope>: its pool's, or the one its database or user limit
 * keeps (the two pools share a database and a user). */
static uint64_t
xw_elsewhere(void *ctx, const char *db, const char *user, enum pool_scope scope)
{
	struct pool *other = xw_pool[1 - *(int *)ctx];

	if (other == NULL || (scope != POOL_SCOPE_POOL && pool_wait_scope(other) != scope))
		return 0;
	return pool_wait_since(other);
}

static void
xw_wake(void *ctx, const char *db, const char *user, enum pool_scope scope, bool holders)
{
	int other = 1 - *(int *)ctx;

	xw_wakes[other]++;
	event_active(xw_ev[other], EV_TIMEOUT, 0);
}

static void
xw_wake_cb(evutil_socket_t fd, short what, void *arg)
{
	struct pool *p = xw_pool[*(int *)arg];

	if (p != NULL)
		pool_wake(p);
}

static const struct pool_limits_ops xw_ops = {
	.try_acquire = xw_try, .release = xw_release, .count = xw_count,
	.wait_publish = xw_publish, .wait_elsewhere = xw_elsewhere, .wake = xw_wake,
};

/*
 * move_idle as a worker's link channel would do it, inside one process: the state through
 * link_export and a reader, a copy of the socket (SCM_RIGHTS gives the other process one),
 * adopted by the other pool. Counts the moves.
 */
static int xw_moves;

static bool
xw_move(void *ctx, struct link *l)
{
	struct pool *other = xw_pool[1 - *(int *)ctx];
	struct proto_reader r;
	struct pktbuf pb;
	int fd = dup(sbuf_fd(link_sbuf(l)));
	bool ok;

	pktbuf_init(&pb, 256);
	link_export(l, &pb);
	proto_reader_init(&r, 0, pb.buf, pb.len);
	ok = fd != -1 && !pktbuf_failed(&pb) && pool_adopt_link(other, fd, &r) != NULL;
	if (!ok && fd != -1)
		close(fd);
	pktbuf_cleanup(&pb);
	xw_moves += ok;
	return ok;
}

static const struct pool_limits_ops xw_move_ops = {
	.try_acquire = xw_try, .release = xw_release, .count = xw_count,
	.wait_publish = xw_publish, .wait_elsewhere = xw_elsewhere, .wake = xw_wake,
	.move_idle = xw_move,
};

static void
xw_start_ops(const struct pool_limits_ops *ops, const char *extra)
{
	char conf[256];

	snprintf(conf, sizeof(conf), "pool_mode = transaction\ndefault_pool_size = 1\n%s", extra);
	load_cfg(DB_TCP, conf);
	xw_moves = 0;
	for (int i = 0; i < 2; i++) {
		xw_wakes[i] = 0;
		xw_ev[i] = event_new(base, -1, 0, xw_wake_cb, &xw_id[i]);
		xw_pool[i] = mk_pool_limits("db", "nk_u1", ops, &xw_id[i]);
	}
}

static void
xw_start(void)
{
	xw_start_ops(&xw_ops, "");
}

static void
xw_stop(void)
{
	for (int i = 0; i < 2; i++) {
		pool_free(xw_pool[i]);
		xw_pool[i] = NULL;
		event_free(xw_ev[i]);
	}
	ck_assert_int_eq(pool_limits_local_db_count(lim, "db"), 0);
}

/*
 * pool_size = 1 over two workers: the link idle in worker 0 is closed as soon as a client of
 * worker 1 waits (worker 0 is woken; no janitor run needed), and the slot goes to worker 1.
 */
START_TEST(test_idle_link_goes_to_other_worker)
{
	struct tclient a, b;

	NEED_CLUSTER();
	xw_start();
	tc_get_ok(&a, xw_pool[0]);
	pool_release(a.link, NULL);
	ck_assert_int_eq(pool_count(xw_pool[0], LINK_ST_IDLE), 1);
	ck_assert_int_eq(tc_start(&b, xw_pool[1]), POOL_QUEUED);
	ck_assert(run_until(tc_done, &b, 5));
	ck_assert(!b.failed);
	ck_assert_int_gt(xw_wakes[0], 0);
	ck_assert_int_eq(pool_count(xw_pool[0], LINK_ST_IDLE), 0);
	ck_assert(log_has("closing because: idle link released for a client waiting in another "
			  "worker"));
	ck_assert_uint_eq(pool_wait_since(xw_pool[1]), 0);	/* served: nothing published */
	/* back: worker 0's new client is served by the link worker 1 gives up */
	pool_release(b.link, NULL);
	tc_get_ok(&a, xw_pool[0]);
	ck_assert_int_eq(pool_count(xw_pool[1], LINK_ST_IDLE), 0);
	pool_release(a.link, NULL);
	xw_stop();
}
END_TEST

/*
 * With move_idle (and a plain socket: server_tls_sslmode = disable) the idle link itself goes
 * to worker 1's client: the same backend, no new login, no close; and back again.
 */
START_TEST(test_idle_link_moves_to_other_worker)
{
	struct tclient a, b;
	uint32_t pid;

	NEED_CLUSTER();
	xw_start_ops(&xw_move_ops, "server_tls_sslmode = disable");
	tc_get_ok(&a, xw_pool[0]);
	pid = link_backend_pid(a.link);
	pool_release(a.link, NULL);
	ck_assert_int_eq(tc_start(&b, xw_pool[1]), POOL_QUEUED);
	ck_assert(run_until(tc_done, &b, 5));
	ck_assert(!b.failed);
	ck_assert_int_eq(xw_moves, 1);
	ck_assert_uint_eq(link_backend_pid(b.link), pid);
	ck_assert_str_eq(link_param(b.link, "server_encoding"), "UTF8");
	ck_assert(!log_has("closing because"));
	ck_assert_int_eq(pool_limits_local_db_count(lim, "db"), 1);
	pool_release(b.link, NULL);
	run_for(0.05);	/* (the moved link's old object is reaped in worker 0) */
	ck_assert_int_eq(pool_link_total(xw_pool[0]), 0);
	tc_get_ok(&a, xw_pool[0]);
	ck_assert_int_eq(xw_moves, 2);
	ck_assert_uint_eq(link_backend_pid(a.link), pid);
	ck_assert_int_eq(pool_link_total(xw_pool[1]), 0);
	pool_release(a.link, NULL);
	xw_stop();
}
END_TEST

/*
 * The link is never idle in worker 0 (its next client is queued when the first releases it),
 * yet the client of worker 1, who waited longer by more than the hand-over margin, gets it
 * first; worker 0's client follows when worker 1 is done, and no new link was started for it
 * meanwhile (the freed slot is not taken back).
 */
START_TEST(test_busy_link_goes_to_older_waiter)
{
	struct tclient a, b, c;

	NEED_CLUSTER();
	xw_start();
	tc_get_ok(&a, xw_pool[0]);
	ck_assert_int_eq(tc_start(&b, xw_pool[1]), POOL_QUEUED);
	run_for(0.15);			/* b waits, blocked by the limit: published */
	ck_assert_uint_ne(pool_wait_since(xw_pool[1]), 0);
	ck_assert_int_eq(tc_start(&c, xw_pool[0]), POOL_QUEUED);
	pool_release(a.link, NULL);
	ck_assert(run_until(tc_done, &b, 5));
	ck_assert(!b.failed);
	ck_assert(!c.done);
	ck_assert_int_eq(pool_count(xw_pool[0], LINK_ST_LOGIN), 0);
	ck_assert_uint_ne(pool_wait_since(xw_pool[0]), 0);
	pool_release(b.link, NULL);
	ck_assert(run_until(tc_done, &c, 5));
	ck_assert(!c.failed);
	pool_release(c.link, NULL);
	ck_assert_int_eq(pool_limits_local_db_count(lim, "db"), 1);
	xw_stop();
}
END_TEST

/* server_fast_close in session mode; KILL (pool_close_all); maxwait. */
START_TEST(test_fast_close_kill_maxwait)
{
	struct pool *p;
	struct tclient a, b, c;

	NEED_CLUSTER();
	load_cfg(DB_TCP, "server_fast_close = 1\ndefault_pool_size = 2");
	p = mk_pool("db", "nk_u1", NULL);
	tc_get_ok(&a, p);
	ck_assert(!link_fast_close_due(a.link));
	pool_reconnect(p);
	ck_assert(link_fast_close_due(a.link));
	tc_query(&a, "BEGIN");
	ck_assert(!link_fast_close_due(a.link));	/* wait for the transaction to end */
	tc_query(&a, "COMMIT");
	ck_assert(link_fast_close_due(a.link));
	pool_release(a.link, NULL);
	ck_assert(log_has("closing because: close_needed"));

	tc_get_ok(&a, p);
	tc_get_ok(&b, p);
	ck_assert_int_eq(tc_start(&c, p), POOL_QUEUED);
	run_for(0.3);
	ck_assert_uint_ge(pool_max_wait_us(p), 250000);
	pool_close_all(p, "database killed");	/* KILL */
	ck_assert(a.broken && b.broken);
	ck_assert_str_eq(a.err.message, "database killed");
	ck_assert_int_eq(pool_limits_local_db_count(lim, "db"), 0);
	ck_assert(run_until(tc_done, &c, 10));	/* the waiter gets a fresh link */
	ck_assert(!c.failed);
	ck_assert_uint_eq(pool_max_wait_us(p), 0);
	pool_release(c.link, NULL);
	pool_free(p);
	drop_cfg();

	load_cfg(DB_TCP, "server_fast_close = 0");
	p = mk_pool("db", "nk_u1", NULL);
	tc_get_ok(&a, p);
	pool_reconnect(p);
	ck_assert(!link_fast_close_due(a.link));
	pool_release(a.link, NULL);
	pool_free(p);
}
END_TEST

/* A reload that moves the database renews the links; one that does not keeps them. */
START_TEST(test_reconfigure_moves_links)
{
	struct pool *p;
	struct tclient a, b;
	struct cfg *old, *same;
	struct link *la;
	char unix_label[32];

	NEED_CLUSTER();
	snprintf(unix_label, sizeof(unix_label), "unix:%d", cl_port);
	load_cfg(DB_TCP, "pool_mode = transaction");
	p = mk_pool("db", "nk_u1", NULL);
	tc_get_ok(&a, p);
	tc_get_ok(&b, p);
	la = a.link;
	pool_release(a.link, NULL);

	old = cfg;
	cfg = NULL;
	load_cfg(DB_TCP, "pool_mode = transaction\nserver_idle_timeout = 100");
	same = cfg;
	pool_reconfigure(p, same, cfg_database_find(same, "db"), NULL);
	ck_assert_int_eq(pool_count(p, LINK_ST_IDLE), 1);	/* nothing stale */
	cfg_unref(old);

	cfg = NULL;
	load_cfg("db = host=%2$s port=%1$d dbname=postgres\n", "pool_mode = transaction");
	pool_reconfigure(p, cfg, cfg_database_find(cfg, "db"), NULL);
	cfg_unref(same);
	ck_assert_int_eq(pool_count(p, LINK_ST_IDLE), 0);	/* closed: obsolete */
	ck_assert(log_has("closing because: database configuration changed"));
	ck_assert(link_close_needed(b.link));
	tc_get_ok(&a, p);
	ck_assert_ptr_ne(a.link, la);
	ck_assert_str_eq(link_addr(a.link), unix_label);
	pool_release(a.link, NULL);
	pool_release(b.link, NULL);
	ck_assert(log_has("closing because: close_needed"));
	pool_free(p);
}
END_TEST

/* server_tls_sslmode: TCP links speak TLS (pg_stat_ssl says so), unix ones stay plain. */
START_TEST(test_server_tls)
{
	struct pool *p;
	struct tclient a;
	struct nk_error err;

	NEED_CLUSTER();
	load_cfg("db = host=127.0.0.1 port=%d dbname=postgres\n"
		 "sock = host=%2$s port=%1$d dbname=postgres\n",
		 "pool_mode = transaction\nserver_tls_sslmode = require");
	ck_assert_msg(tls_init(cfg, &err), "%s", err.message);
	p = mk_pool("db", "nk_u1", NULL);
	tc_get_ok(&a, p);
	ck_assert(tls_sbuf_is_tls(link_sbuf(a.link)));
	ck_assert_str_eq(tc_query(&a, "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()"),
			 "t");
	pool_release(a.link, NULL);
	pool_free(p);
	p = mk_pool("sock", "nk_u1", NULL);
	tc_get_ok(&a, p);
	ck_assert(!tls_sbuf_is_tls(link_sbuf(a.link)));
	pool_release(a.link, NULL);
	pool_free(p);
	tls_cleanup();
	drop_cfg();

	/* verify-full without the server's CA: the handshake fails, the link is not used */
	load_cfg(DB_TCP, "server_tls_sslmode = verify-full\nquery_wait_timeout = 1");
	if (!tls_init(cfg, &err)) {
		fprintf(stderr, "check_pool: verify-full needs a CA file here: %s\n", err.message);
		return;
	}
	p = mk_pool("db", "nk_u1", NULL);
	tc_get(&a, p);
	ck_assert(a.failed);
	ck_assert(log_has("server TLS negotiation failed: "));
	pool_free(p);
	tls_cleanup();
}
END_TEST

Suite *
pool_suite(void)
{
	Suite *s = suite_create("pool");
	TCase *tc = tcase_create("pool");

	tcase_add_unchecked_fixture(tc, cluster_up, cluster_down);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_login_tcp_trust_params);
	tcase_add_test(tc, test_login_unix_cleartext_and_wrong_password);
	tcase_add_test(tc, test_lifo_fifo);
	tcase_add_test(tc, test_pool_size_and_wait);
	tcase_add_test(tc, test_db_and_user_limits);
	tcase_add_test(tc, test_reserve_pool);
	tcase_add_test(tc, test_idle_timeout_and_lifetime);
	tcase_add_test(tc, test_check_query);
	tcase_add_test(tc, test_reset_query);
	tcase_add_test(tc, test_release_reset);
	tcase_add_test(tc, test_broken_links);
	tcase_add_test(tc, test_dirty_release);
	tcase_add_test(tc, test_connect_failed_login_retry);
	tcase_add_test(tc, test_connect_timeout);
	tcase_add_test(tc, test_fail_fast);
	tcase_add_test(tc, test_min_pool_size);
	tcase_add_test(tc, test_auth_md5);
	tcase_add_test(tc, test_auth_scram);
	tcase_add_test(tc, test_forward_to_client_backpressure);
	tcase_add_test(tc, test_reconnect_close_needed);
	tcase_add_test(tc, test_free_with_active_link);
	tcase_add_test(tc, test_host_list);
	tcase_add_test(tc, test_dns_hosts);
	tcase_add_test(tc, test_evict_for_db_and_user_limits);
	tcase_add_test(tc, test_idle_link_goes_to_other_worker);
	tcase_add_test(tc, test_idle_link_moves_to_other_worker);
	tcase_add_test(tc, test_busy_link_goes_to_older_waiter);
	tcase_add_test(tc, test_fast_close_kill_maxwait);
	tcase_add_test(tc, test_reconfigure_moves_links);
	tcase_add_test(tc, test_server_tls);
	suite_add_tcase(s, tc);
	return s;
}
