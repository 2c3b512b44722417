/*
 * link.c - one backend link (server connection): connect, login, per-state packet handling,
 * close. The pool (pool.c) decides what a link is used for; this file only drives it.
 *
 * Handlers per state (link_on_pkt): login (startup, auth, parameters, key, connect_query),
 * idle/used (only asynchronous messages are expected), tested (check/reset query), active
 * (track ReadyForQuery and ParameterStatus, pass every packet to the client's callback).
 * Transport events (EOF, errors, connect result) arrive in link_sbuf_cb().
 * Entry points: link_new, link_set_state, link_start_test, link_activate/deactivate,
 * link_close, link_free, plus the accessors of neki/link.h.
 */
#include "neki/base.h"
#include "neki/clock.h"
#include "neki/link.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <event2/event.h>

#include "neki/config.h"
#include "neki/dns.h"
#include "neki/intern.h"
#include "neki/log.h"
#include "neki/pktbuf.h"
#include "neki/proto.h"
#include "neki/shm.h"
#include "neki/tls.h"
#include "pool_int.h"

static const char *const link_state_names[LINK_ST_COUNT] = {
	[LINK_ST_LOGIN] = "login",
	[LINK_ST_IDLE] = "idle",
	[LINK_ST_USED] = "used",
	[LINK_ST_TESTED] = "tested",
	[LINK_ST_ACTIVE] = "active",
	[LINK_ST_CLOSING] = "closing",
};

static void link_close_err(struct link *l, bool send_term, const char *reason,
			   const struct nk_error *err);

/* ---- accessors ---- */

/* Name of <st> as SHOW SERVERS would print it. */
const char *
link_state_str(enum link_state st)
{
	return (unsigned)st < LINK_ST_COUNT ? link_state_names[st] : "?";
}

/* The state of <l> (which pool list it is on). */
uint64_t
link_id(const struct link *l)
{
	return l->id;
}

enum link_state
link_state(const struct link *l)
{
	return l->state;
}

/* The server connection's transport, to forward into or act on from a link_cb_fn. */
struct sbuf *
link_sbuf(struct link *l)
{
	return &l->sb;
}

/* Transaction status of the last ReadyForQuery ('I', 'T', 'E'; '?' before login). */
char
link_tx_status(const struct link *l)
{
	return l->tx_status;
}

/* The backend's process id from BackendKeyData. */
uint32_t
link_backend_pid(const struct link *l)
{
	return l->be_pid;
}

/* The backend's cancel key from BackendKeyData. */
uint32_t
link_backend_key(const struct link *l)
{
	return l->be_key;
}

/* The server address of <l> for logs (borrowed). */
const char *
link_addr(const struct link *l)
{
	return l->addr_str;
}

/* Seconds since the connect started. */
double
link_age(const struct link *l)
{
	return (double)(nk_now_us() - l->connect_us) / 1e6;
}

/* The server's last ParameterStatus value of <name> (borrowed), or NULL. */
const char *
link_param(const struct link *l, const char *name)
{
	for (size_t i = 0; i < l->nparams; i++) {
		if (strcmp(l->params[i].name, name) == 0)
			return l->params[i].value;
	}
	return NULL;
}

static const char *const *track_names;	/* borrowed: link_track_params() */
static size_t track_n;
static uint32_t track_gen = 1;

void
link_track_params(const char *const *names, size_t n)
{
	NK_ASSERT(n <= LINK_TRACK_MAX);
	track_names = names;
	track_n = n;
	if (++track_gen == 0)
		track_gen = 1;
}

/* Find every tracked name among <l>'s parameters (GUC names are case-insensitive). */
static void
link_track_rebuild(struct link *l)
{
	for (size_t i = 0; i < track_n; i++) {
		l->track_val[i] = NULL;
		for (size_t k = 0; k < l->nparams; k++) {
			if (strcasecmp(l->params[k].name, track_names[i]) == 0) {
				l->track_val[i] = l->params[k].value;
				break;
			}
		}
	}
	l->track_gen = track_gen;
}

const char *const *
link_tracked(struct link *l)
{
	if (l->track_gen != track_gen)
		link_track_rebuild(l);
	return l->track_val;
}

/* How many ParameterStatus values <l> knows. */
size_t
link_param_count(const struct link *l)
{
	return l->nparams;
}

/* The <i>th known parameter (borrowed strings). */
void
link_param_at(const struct link *l, size_t i, const char **name, const char **value)
{
	NK_ASSERT(i < l->nparams);
	*name = l->params[i].name;
	*value = l->params[i].value;
}

/* The session layer's data attached to <l> (borrowed), or NULL. */
void *
link_user_data(const struct link *l)
{
	return l->user_data;
}

/* Attach <data> to <l>, freed with <free_fn> when replaced or when the link is freed. */
void
link_set_user_data(struct link *l, void *data, link_data_free_fn free_fn)
{
	if (l->user_free != NULL && l->user_data != NULL && l->user_data != data)
		l->user_free(l->user_data);
	l->user_data = data;
	l->user_free = free_fn;
}

/* The address <l> connected to (a CancelRequest must go there); <*len> is set. */
const struct sockaddr *
link_server_addr(const struct link *l, socklen_t *len)
{
	*len = l->addrlen;
	return (const struct sockaddr *)&l->addr;
}

/* Mark <l> to be closed at release instead of reused. */
void
link_set_close_needed(struct link *l)
{
	l->close_needed = true;
}

/* True when <l> is marked close_needed. */
bool
link_close_needed(const struct link *l)
{
	return l->close_needed;
}

/*
 * server_fast_close: true when <l> is close_needed, the setting is on, the pool is in session
 * mode and the server is between transactions, so the session should release it now (and
 * take a fresh link for its next transaction) instead of waiting for the client to leave.
 */
bool
link_fast_close_due(const struct link *l)
{
	return l->close_needed && l->pool->cfg->srv.server_fast_close &&
	       pool_mode(l->pool) == CFG_POOL_SESSION && l->ready && l->tx_status == 'I';
}

/* Queue bytes for the server (see sbuf_send). */
bool
link_send(struct link *l, const void *data, size_t len)
{
	if (l->state == LINK_ST_CLOSING)
		return false;
	return sbuf_send(&l->sb, data, len);
}

/* Log with pgbouncer's server prefix: "S-0x...: db/user@addr msg". */
void
link_log(const struct link *l, int lvl, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (!log_enabled((enum log_level)lvl))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_msg((enum log_level)lvl, "S-%p: %s/%s@%s %s", (const void *)l, l->pool->db_name,
		l->pool->user_name, l->addr_str, msg);
}

/* ---- state ---- */

/* The only writer of l->state: moves <l> from its list to the list of <st>. */
void
link_set_state(struct link *l, enum link_state st)
{
	struct pool *p = l->pool;

	NK_ASSERT((unsigned)st < LINK_ST_COUNT);
	NK_ASSERT(l->state != LINK_ST_CLOSING || st == LINK_ST_CLOSING);
	if (list_node_linked(&l->node))
		list_remove(&p->lists[l->state], &l->node);
	log_noise("S-%p: %s -> %s", (void *)l, link_state_str(l->state), link_state_str(st));
	l->state = st;
	if (st == LINK_ST_IDLE)
		l->idle_since_us = nk_now_us();
	list_push_front(&p->lists[st], &l->node);
}

/* Record ParameterStatus <name> = <value> (replacing an earlier value). */
static bool
link_param_set(struct link *l, const char *name, const char *value)
{
	struct link_param *np;
	const char *v = intern_ref(value);

	if (v == NULL)
		return false;
	for (size_t i = 0; i < l->nparams; i++) {
		if (strcmp(l->params[i].name, name) == 0) {
			intern_unref(l->params[i].value);
			l->params[i].value = v;
			l->track_gen = 0;	/* link_tracked() looks again */
			return true;
		}
	}
	np = realloc(l->params, (l->nparams + 1) * sizeof(*np));
	if (np == NULL || (np[l->nparams].name = strdup(name)) == NULL) {
		if (np != NULL)
			l->params = np;
		intern_unref(v);
		return false;
	}
	np[l->nparams].value = v;
	l->params = np;
	l->nparams++;
	l->track_gen = 0;	/* a new name: link_tracked() looks again */
	return true;
}

/* Send a message built in <pb>, then free it. */
static bool
link_send_pb(struct link *l, struct pktbuf *pb)
{
	bool ok = !pktbuf_failed(pb) && sbuf_send(&l->sb, pb->buf, pb->len);

	pktbuf_cleanup(pb);
	return ok;
}

/* ---- login ---- */

#define LINK_STARTUP_MAX 64	/* parameters in a startup packet we build */

/*
 * A replication link's StartupMessage: user, database, `replication` and the client's own
 * startup parameters (options and application_name included, unparsed): a walsender takes no
 * SET, so what the client asked for must be there from the start.
 */
static bool
link_send_repl_startup(struct link *l, struct proto_param *params, size_t n)
{
	const struct pool *p = l->pool;
	const uint8_t *q = p->startup, *end = p->startup + p->startup_len;
	struct pktbuf pb;

	params[n++] = (struct proto_param){ "replication", p->replication };
	while (q < end && n < LINK_STARTUP_MAX) {
		const char *name = (const char *)q, *value;

		q += strlen(name) + 1;
		if (q >= end)
			break;
		value = (const char *)q;
		q += strlen(value) + 1;
		params[n++] = (struct proto_param){ name, value };
	}
	pktbuf_init(&pb, 256 + p->startup_len);
	pktbuf_write_startup(&pb, params, n);
	return link_send_pb(l, &pb);
}

/* StartupMessage: user, database and the [databases] entry's startup parameters. */
static bool
link_send_startup(struct link *l)
{
	const struct pool *p = l->pool;
	const struct cfg_database *db = p->db;
	struct proto_param params[LINK_STARTUP_MAX];
	struct pktbuf pb;
	size_t n = 0;

	params[n++] = (struct proto_param){ "user", p->user_name };
	params[n++] = (struct proto_param){ "database",
					    db->dbname != NULL ? db->dbname : p->db_name };
	if (p->replication != NULL)
		return link_send_repl_startup(l, params, n);
	if (db->client_encoding != NULL && db->client_encoding[0] != '\0')
		params[n++] = (struct proto_param){ "client_encoding", db->client_encoding };
	if (db->datestyle != NULL && db->datestyle[0] != '\0')
		params[n++] = (struct proto_param){ "DateStyle", db->datestyle };
	if (db->timezone != NULL && db->timezone[0] != '\0')
		params[n++] = (struct proto_param){ "TimeZone", db->timezone };
	if (db->application_name != NULL && db->application_name[0] != '\0')
		params[n++] = (struct proto_param){ "application_name", db->application_name };
	pktbuf_init(&pb, 256);
	pktbuf_write_startup(&pb, params, n);
	return link_send_pb(l, &pb);
}

/* "ip:port" of our end of the socket, for "new connection to server (from ...)". */
static void
link_local_addr(const struct link *l, char *buf, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char ip[INET6_ADDRSTRLEN];

	snprintf(buf, len, "unix:%d", l->host_idx < l->pool->nhosts ?
		 l->pool->hosts[l->host_idx].port : l->pool->db->port);
	if (l->sb.is_unix || getsockname(l->sb.fd, (struct sockaddr *)&ss, &sl) == -1)
		return;
	if (ss.ss_family == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)&ss;

		inet_ntop(AF_INET, &sin->sin_addr, ip, sizeof(ip));
		snprintf(buf, len, "%s:%d", ip, ntohs(sin->sin_port));
	} else if (ss.ss_family == AF_INET6) {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;

		inet_ntop(AF_INET6, &sin6->sin6_addr, ip, sizeof(ip));
		snprintf(buf, len, "[%s]:%d", ip, ntohs(sin6->sin6_port));
	}
}

/* server_tls_sslmode negotiation ended: go on with the StartupMessage, or give up. */
static void
link_tls_done(struct sbuf *sb, bool ok, const char *errmsg, void *arg)
{
	struct link *l = arg;

	if (!ok) {
		link_log(l, LOG_LVL_WARNING, "server TLS negotiation failed: %s",
			 errmsg != NULL ? errmsg : "unknown error");
		link_close(l, false, errmsg != NULL ? errmsg : "server TLS negotiation failed");
		return;
	}
	if (!link_send_startup(l))
		link_close(l, false, "failed to send startup packet");
}

/* Connected: with server TLS configured (TCP only), negotiate it first; then log in. */
static void
link_on_connected(struct link *l)
{
	const struct pool *p = l->pool;
	struct tls_ctx *ctx = tls_server_ctx();
	char local[128];

	if (p->cfg->log.log_connections) {
		link_local_addr(l, local, sizeof(local));
		link_log(l, LOG_LVL_INFO, "new connection to server (from %s)", local);
	}
	if (ctx != NULL && !sbuf_is_unix(&l->sb)) {
		if (!tls_sbuf_connect(&l->sb, ctx, l->host_idx < p->nhosts ?
				      p->hosts[l->host_idx].name : NULL, link_tls_done, l))
			link_close(l, false, "out of memory");
		return;
	}
	if (!link_send_startup(l))
		link_close(l, false, "failed to send startup packet");
}

/* The server refused the login with ErrorResponse <body>. */
static void
link_on_login_error(struct link *l, const uint8_t *body, size_t len)
{
	struct proto_server_error se;
	struct nk_error err;

	if (!proto_parse_server_error(body, len, &se, &err)) {
		link_close_err(l, false, "bad error packet from server", &err);
		return;
	}
	proto_server_error_to_nk(&se, &err);
	if (l->pool->replication != NULL) {
		/*
		 * As pgbouncer: a walsender can be refused for reasons of its own (no REPLICATION
		 * role, no replication line in pg_hba.conf) while ordinary logins work, so only
		 * its client fails, with a generic error; the server's words go to the log.
		 */
		log_error("S: login failed: %s: %s", se.severity != NULL ? se.severity : "ERROR",
			  err.message);
		nk_error_set(&err, ERRCODE_PROTOCOL_VIOLATION, "login failed");
		link_close_err(l, true, err.message, &err);
		return;
	}
	link_log(l, LOG_LVL_WARNING, "server login failed: %s %s",
		 se.severity != NULL ? se.severity : "ERROR", err.message);
	link_close_err(l, true, err.message, &err);
}

/* ParameterStatus <name> of the server is "on". */
static bool
link_param_on(const struct link *l, const char *name)
{
	const char *v = link_param(l, name);

	return v != NULL && strcmp(v, "on") == 0;
}

/*
 * Does the server qualify for the database's target_session_attrs? Judged as libpq does with a
 * server of version 14 or later, by the in_hot_standby and default_transaction_read_only it
 * reported at login (after connect_query, which may change the latter); a server that reports
 * neither qualifies only for "any".
 */
static bool
link_target_ok(const struct link *l)
{
	enum cfg_target_attrs want = l->pool->db->target_session_attrs;
	bool standby = link_param_on(l, "in_hot_standby");
	bool ro = standby || link_param_on(l, "default_transaction_read_only");

	if (want != CFG_TSA_ANY && link_param(l, "in_hot_standby") == NULL)
		return false;
	switch (want) {
	case CFG_TSA_READ_WRITE:
		return !ro;
	case CFG_TSA_READ_ONLY:
		return ro;
	case CFG_TSA_PRIMARY:
		return !standby;
	case CFG_TSA_STANDBY:
		return standby;
	case CFG_TSA_ANY:
	default:
		return true;
	}
}

/* ReadyForQuery during login: run connect_query first if the database has one. */
static void
link_on_login_ready(struct link *l)
{
	const char *cq = l->pool->db->connect_query;
	struct pktbuf pb;

	if (!l->exec_connect_query && cq != NULL && cq[0] != '\0' && l->pool->replication == NULL) {
		l->exec_connect_query = true;
		link_log(l, LOG_LVL_DEBUG, "server connect ok, send exec_on_connect");
		pktbuf_init(&pb, 64);
		pktbuf_write_query(&pb, cq);
		if (!link_send_pb(l, &pb))
			link_close(l, false, "exec_on_connect query failed");
		return;
	}
	l->exec_connect_query = false;
	if (!link_target_ok(l)) {	/* a failed login: the pool tries the next host */
		link_close(l, true, LINK_TARGET_MISMATCH);
		return;
	}
	event_del(l->timer);
	link_auth_cleanup(l);
	l->ready = true;
	l->tx_status = 'I';
	link_log(l, LOG_LVL_DEBUG, "server login ok, start accepting queries");
	pool_on_login_ok(l);
}

/* One whole packet during LOGIN (already consumed from the buffer). */
static void
link_on_login_msg(struct link *l, uint8_t type, const uint8_t *body, size_t len)
{
	struct proto_param ps;
	struct nk_error err;
	bool done = false;

	if (l->exec_connect_query && type == 'E') {
		link_log(l, LOG_LVL_WARNING, "error while executing exec_on_connect query");
		return;
	}
	switch (type) {
	case 'R':
		if (!link_auth_answer(l, body, len, &done, &err))
			link_close_err(l, false, err.message, &err);
		break;
	case 'S':
		if (!proto_parse_parameter_status(body, len, &ps, &err) ||
		    !link_param_set(l, ps.name, ps.value))
			link_close(l, false, "bad ParameterStatus from server");
		break;
	case 'K':
		if (!proto_parse_backend_key(body, len, &l->be_pid, &l->be_key, &err))
			link_close(l, true, "bad cancel key");
		break;
	case 'E':
		link_on_login_error(l, body, len);
		break;
	case 'Z':
		link_on_login_ready(l);
		break;
	case 'N':
	case 'v':
	case 'C':
	case 'T':
	case 'D':
	case 'I':
		break;	/* notices, protocol negotiation, connect_query results */
	default:
		link_log(l, LOG_LVL_ERROR, "unknown pkt from server: '%c'", type);
		link_close(l, true, "unknown pkt from server");
		break;
	}
}

/* Make sure the whole packet is buffered; false (and closed) when it is too big. */
static bool
link_need_whole(struct link *l, const struct sbuf_pkt *pkt)
{
	if (sbuf_hold(&l->sb, pkt->len))
		return true;
	link_close(l, false, "server sent too big packet");
	return false;
}

/* ---- per-state packet handlers ---- */

static bool
link_on_login_pkt(struct link *l, const struct sbuf_pkt *pkt)
{
	if (pkt->avail < pkt->len)
		return link_need_whole(l, pkt);
	sbuf_skip(&l->sb, pkt->len);
	link_on_login_msg(l, pkt->type, pkt->data + 5, pkt->len - 5);
	return l->state != LINK_ST_CLOSING;
}

/* ParameterStatus on a logged-in link: remember the value. */
static void
link_track_param(struct link *l, const struct sbuf_pkt *pkt)
{
	struct proto_param ps;
	struct nk_error err;

	if (proto_parse_parameter_status(pkt->data + 5, pkt->len - 5, &ps, &err))
		(void)link_param_set(l, ps.name, ps.value);
}

/* Idle and used links: only asynchronous messages are expected. */
static bool
link_on_idle_pkt(struct link *l, const struct sbuf_pkt *pkt)
{
	if (pkt->avail < pkt->len)
		return link_need_whole(l, pkt);
	sbuf_skip(&l->sb, pkt->len);
	switch (pkt->type) {
	case 'S':
		link_track_param(l, pkt);
		break;
	case 'A':
		break;	/* a notification nobody listens to any more */
	case 'N':
	case 'E':
		/* between transactions this usually means a dying backend: drop it at reuse */
		l->ready = false;
		break;
	default:
		link_log(l, LOG_LVL_ERROR, "unknown pkt from server: '%c'", pkt->type);
		link_close(l, true, "unknown pkt from server");
		return false;
	}
	return true;
}

/* TESTED: skip the check/reset query's results until ReadyForQuery. */
static bool
link_on_test_pkt(struct link *l, const struct sbuf_pkt *pkt)
{
	if ((pkt->type == 'Z' || pkt->type == 'S') && pkt->avail < pkt->len)
		return link_need_whole(l, pkt);
	sbuf_skip(&l->sb, pkt->len);
	if (pkt->type == 'E')
		l->test_failed = true;
	else if (pkt->type == 'S')
		link_track_param(l, pkt);
	if (pkt->type != 'Z')
		return true;
	l->tx_status = pkt->len >= 6 ? (char)pkt->data[5] : '?';
	if (l->test_failed || l->tx_status != 'I') {
		link_close(l, true, l->test == LINK_TEST_RESET ? "reset query failed" :
			   "server check query failed");
		return false;
	}
	l->ready = true;
	l->test = LINK_TEST_NONE;
	pool_on_test_done(l);
	return true;
}

/* ACTIVE: note the transaction state and parameters, then the client decides. */
static bool
link_on_active_pkt(struct link *l, const struct sbuf_pkt *pkt)
{
	if ((pkt->type == 'Z' || pkt->type == 'S') && pkt->avail < pkt->len)
		return link_need_whole(l, pkt);
	if (pkt->type == 'Z') {
		l->tx_status = pkt->len >= 6 ? (char)pkt->data[5] : '?';
		l->ready = l->tx_status == 'I';
	} else if (pkt->type == 'S') {
		link_track_param(l, pkt);
	} else if (pkt->type != 'A') {
		l->ready = false;
	}
	if (l->client_cb == NULL) {
		sbuf_skip(&l->sb, pkt->len);
		return true;
	}
	return l->client_cb(l, LINK_EV_PKT, pkt, NULL, l->client_ctx);
}

static bool
link_on_pkt(struct link *l, const struct sbuf_pkt *pkt)
{
	switch (l->state) {
	case LINK_ST_LOGIN:
		return link_on_login_pkt(l, pkt);
	case LINK_ST_IDLE:
	case LINK_ST_USED:
		return link_on_idle_pkt(l, pkt);
	case LINK_ST_TESTED:
		return link_on_test_pkt(l, pkt);
	case LINK_ST_ACTIVE:
		return link_on_active_pkt(l, pkt);
	case LINK_ST_CLOSING:
		break;
	}
	return false;
}

/* The connection broke (or the pool goes away): close, and tell a client holding it. */
void
link_break(struct link *l, const char *reason)
{
	link_cb_fn cb = l->client_cb;
	void *ctx = l->client_ctx;
	bool active = l->state == LINK_ST_ACTIVE;
	struct nk_error err;

	if (l->state == LINK_ST_CLOSING)
		return;
	link_close(l, false, reason);
	if (active && cb != NULL) {
		nk_error_set(&err, ERRCODE_PROTOCOL_VIOLATION, "%s", reason);
		cb(l, LINK_EV_BROKEN, NULL, &err, ctx);
	}
}

/* The single sbuf callback of every link. */
static bool
link_sbuf_cb(struct sbuf *sb, enum sbuf_event ev, const struct sbuf_pkt *pkt, int err, void *arg)
{
	struct link *l = arg;

	switch (ev) {
	case SBUF_EV_PKT:
		return link_on_pkt(l, pkt);
	case SBUF_EV_CONNECT_OK:
		link_on_connected(l);
		break;
	case SBUF_EV_CONNECT_FAILED:
		link_log(l, LOG_LVL_DEBUG, "connect failed: %s", strerror(err));
		snprintf(l->pool->connect_errno_text, sizeof(l->pool->connect_errno_text), "%s",
			 strerror(err));
		link_close(l, false, "connect failed");
		break;
	case SBUF_EV_EOF:
	case SBUF_EV_RECV_FAILED:
		link_break(l, "server conn crashed?");
		break;
	case SBUF_EV_SEND_FAILED:
		link_break(l, "server connection closed");
		break;
	case SBUF_EV_BAD_PKT:
		link_break(l, "server sent bad packet length");
		break;
	case SBUF_EV_SEND_DONE:
		break;
	}
	return false;
}

/* server_connect_timeout covers connect and login. */
static void
link_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct link *l = arg;

	if (l->state == LINK_ST_LOGIN)
		link_close(l, false, "connect timeout");
}

/* ---- lifecycle ---- */

/* Connect to l->addr (known by now). */
static void
link_connect(struct link *l)
{
	if (!sbuf_connect(&l->sb, (struct sockaddr *)&l->addr, l->addrlen, 0)) {
		link_log(l, LOG_LVL_WARNING, "could not create socket: %s", strerror(errno));
		snprintf(l->pool->connect_errno_text, sizeof(l->pool->connect_errno_text),
			 "could not create socket: %s", strerror(errno));
		link_close(l, false, "connect failed");
	}
}

/* "ip:port" of a resolved address, for logs. */
static void
link_format_addr(struct link *l)
{
	char ip[INET6_ADDRSTRLEN];
	const struct sockaddr_in *sin = (const struct sockaddr_in *)&l->addr;
	const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)&l->addr;

	if (l->addr.ss_family == AF_INET && inet_ntop(AF_INET, &sin->sin_addr, ip, sizeof(ip)))
		snprintf(l->addr_str, sizeof(l->addr_str), "%s:%d", ip, ntohs(sin->sin_port));
	else if (l->addr.ss_family == AF_INET6 &&
		 inet_ntop(AF_INET6, &sin6->sin6_addr, ip, sizeof(ip)))
		snprintf(l->addr_str, sizeof(l->addr_str), "[%s]:%d", ip, ntohs(sin6->sin6_port));
}

/* The resolver answered for this link's host. */
static void
link_dns_cb(void *arg, const struct sockaddr *sa, socklen_t salen, const char *errmsg)
{
	struct link *l = arg;

	l->dns_req = NULL;
	if (sa == NULL || salen > sizeof(l->addr)) {
		link_log(l, LOG_LVL_WARNING, "%s", errmsg != NULL ? errmsg : "bad address");
		link_close(l, false, "server DNS lookup failed");
		return;
	}
	memcpy(&l->addr, sa, salen);
	l->addrlen = salen;
	link_format_addr(l);
	link_connect(l);
}

/* Arm server_connect_timeout (it covers DNS, connect and login). */
static void
link_arm_login_timer(struct link *l)
{
	double tmo = l->pool->cfg->srv.server_connect_timeout;
	struct timeval tv;

	if (tmo <= 0)
		return;
	tv.tv_sec = (time_t)tmo;
	tv.tv_usec = (suseconds_t)((tmo - (double)tv.tv_sec) * 1e6);
	event_add(l->timer, &tv);
}

/*
 * Start a new link of <p> to its next host (load_balance_hosts): resolve the name when
 * needed, then connect; everything after this call happens from the loop. It is on the
 * LOGIN list when this returns. NULL when out of memory.
 */
/* A link object of <p> on no list, with its sbuf and timer; NULL without memory. */
static struct link *
link_alloc(struct pool *p)
{
	struct link *l = calloc(1, sizeof(*l));

	if (l == NULL)
		return NULL;
	l->pool = p;
	l->state = LINK_ST_LOGIN;
	l->tx_status = '?';
	list_node_init(&l->node);
	if (!sbuf_init(&l->sb, p->base, link_sbuf_cb, l, &p->sbuf_opts) ||
	    (l->timer = event_new(p->base, -1, 0, link_timer_cb, l)) == NULL) {
		if (l->timer != NULL)
			event_free(l->timer);
		sbuf_cleanup(&l->sb);
		free(l);
		return NULL;
	}
	return l;
}

struct link *
link_new(struct pool *p)
{
	struct link *l = link_alloc(p);
	const struct pool_host *h;

	if (l == NULL)
		return NULL;
	l->connect_us = nk_now_us();
	l->id = shm_socket_id_next();
	l->counted = true;	/* pool_launch() took a slot for it */
	l->host_idx = pool_pick_host(p);
	h = &p->hosts[l->host_idx];
	snprintf(l->addr_str, sizeof(l->addr_str), "%s", h->label);
	link_set_state(l, LINK_ST_LOGIN);
	link_arm_login_timer(l);
	if (h->resolved) {
		memcpy(&l->addr, &h->addr, h->addrlen);
		l->addrlen = h->addrlen;
		link_connect(l);
	} else {
		l->dns_req = dns_lookup(p->dns, h->name, h->port, link_dns_cb, l);
		if (l->dns_req == NULL)
			link_close(l, false, "server DNS lookup failed");
	}
	return l;
}

/* The pool host <l>'s address belongs to (its port compared too), or 0. */
static size_t
link_host_of(const struct link *l)
{
	const struct pool *p = l->pool;

	for (size_t i = 0; i < p->nhosts; i++) {
		if (p->hosts[i].resolved && p->hosts[i].addrlen == l->addrlen &&
		    memcmp(&p->hosts[i].addr, &l->addr, l->addrlen) == 0)
			return i;
	}
	return 0;
}

/*
 * Undo link_alloc() and what a constructor added (parameters) for a link that never got a
 * socket: <l>'s sbuf does not own the fd the caller still holds.
 */
static void
link_unalloc(struct link *l)
{
	for (size_t i = 0; i < l->nparams; i++) {
		free(l->params[i].name);
		intern_unref(l->params[i].value);
	}
	free(l->params);
	event_free(l->timer);
	l->sb.fd = -1;		/* (the caller closes its fd) */
	sbuf_cleanup(&l->sb);
	free(l);
}

/*
 * A link of <p> on the connected, logged-in server socket <fd> the process before an online
 * restart handed over: its address from the socket, BackendKeyData <be_pid>/<be_key>, the
 * <n> parameters <names>/<values> as its ParameterStatus values so far. It holds a limits
 * slot the caller took; not on any list yet (the caller chooses its state). NULL when out of
 * memory or the socket cannot be watched (<fd> is then still the caller's).
 */
struct link *
link_taken_over(struct pool *p, int fd, uint32_t be_pid, uint32_t be_key,
		const char *const *names, const char *const *values, size_t n)
{
	struct link *l = link_alloc(p);

	if (l == NULL)
		return NULL;
	l->connect_us = nk_now_us();
	l->id = shm_socket_id_next();
	l->be_pid = be_pid;
	l->be_key = be_key;
	l->addrlen = sizeof(l->addr);
	if (getpeername(fd, (struct sockaddr *)&l->addr, &l->addrlen) == -1)
		l->addrlen = 0;
	l->host_idx = link_host_of(l);
	snprintf(l->addr_str, sizeof(l->addr_str), "%s", p->hosts[l->host_idx].label);
	link_format_addr(l);
	for (size_t i = 0; i < n; i++) {
		if (values[i] != NULL && !link_param_set(l, names[i], values[i])) {
			link_unalloc(l);
			return NULL;
		}
	}
	if (!sbuf_accept(&l->sb, fd, l->addr.ss_family == AF_UNIX)) {
		link_unalloc(l);
		return NULL;
	}
	l->counted = true;
	return l;
}

/* Send <sql> ("<empty>": an empty query) and wait for its ReadyForQuery in TESTED. */
void
link_start_test(struct link *l, enum link_test why, const char *sql)
{
	struct pktbuf pb;

	link_set_state(l, LINK_ST_TESTED);
	l->test = why;
	l->test_failed = false;
	l->ready = false;
	if (why == LINK_TEST_RESET)
		link_log(l, LOG_LVL_DEBUG, "resetting: %s", sql);
	pktbuf_init(&pb, 64);
	pktbuf_write_query(&pb, strcmp(sql, "<empty>") == 0 ? "" : sql);
	if (!link_send_pb(l, &pb))
		link_close(l, false, why == LINK_TEST_RESET ? "reset query failed" :
			   "server check query failed");
}

/* Give <l> to a session. */
void
link_activate(struct link *l, link_cb_fn cb, void *ctx)
{
	l->client_cb = cb;
	l->client_ctx = ctx;
	link_set_state(l, LINK_ST_ACTIVE);
}

/* Take <l> back from its session. */
void
link_deactivate(struct link *l)
{
	l->client_cb = NULL;
	l->client_ctx = NULL;
	if (!l->sb.closed)
		sbuf_detach(&l->sb);
}

void
link_cancel_start(struct link *l, void *ctx, link_cancel_detach_fn detach)
{
	l->cancel_ctx = ctx;
	l->cancel_detach = detach;
}

bool
link_cancel_pending(const struct link *l)
{
	return l->cancel_ctx != NULL;
}

bool
link_being_canceled(const struct link *l)
{
	return l->cancel_parked;
}

void
link_cancel_done(struct link *l)
{
	bool parked = l->cancel_parked;

	l->cancel_ctx = NULL;
	l->cancel_detach = NULL;
	l->cancel_parked = false;
	if (parked)
		pool_release(l, NULL);
}

/* Common close path; <err> is the server's login error when there is one. */
static void
link_close_err(struct link *l, bool send_term, const char *reason, const struct nk_error *err)
{
	struct pktbuf pb;

	if (l->state == LINK_ST_CLOSING)
		return;
	if (reason != NULL && l->pool->cfg->log.log_disconnections)
		link_log(l, LOG_LVL_INFO, "closing because: %s (age=%llus)", reason,
			 (unsigned long long)((nk_now_us() - l->connect_us) / 1000000));
	if (l->state == LINK_ST_LOGIN)
		pool_on_login_failed(l, err, reason);
	if (send_term && !l->sb.closed && !l->sb.connecting) {
		pktbuf_init(&pb, 8);
		pktbuf_write_terminate(&pb);
		(void)link_send_pb(l, &pb);
	}
	if (l->timer != NULL)
		event_del(l->timer);
	if (l->dns_req != NULL) {
		dns_cancel(l->dns_req);
		l->dns_req = NULL;
	}
	if (l->cancel_detach != NULL)
		l->cancel_detach(l->cancel_ctx);
	l->cancel_ctx = NULL;
	l->cancel_detach = NULL;
	l->cancel_parked = false;
	sbuf_close(&l->sb);
	link_auth_cleanup(l);
	l->client_cb = NULL;
	l->client_ctx = NULL;
	link_set_state(l, LINK_ST_CLOSING);
	pool_on_link_closed(l);
}

/* Close <l> with <reason>; see neki/link.h. */
void
link_close(struct link *l, bool send_term, const char *reason)
{
	link_close_err(l, send_term, reason, NULL);
}

/* Free a CLOSING link: its lists entry, socket state, parameters. */
void
link_free(struct link *l)
{
	NK_ASSERT(l->state == LINK_ST_CLOSING);
	list_remove(&l->pool->lists[LINK_ST_CLOSING], &l->node);
	if (l->timer != NULL)
		event_free(l->timer);
	sbuf_cleanup(&l->sb);
	for (size_t i = 0; i < l->nparams; i++) {
		free(l->params[i].name);
		intern_unref(l->params[i].value);
	}
	free(l->params);
	if (l->user_free != NULL && l->user_data != NULL)
		l->user_free(l->user_data);
	free(l);
}

/* ---- moving to another process ---- */

/* link_is_movable: see neki/pool.h. */
bool
link_is_movable(const struct link *l)
{
	return (l->state == LINK_ST_IDLE || l->state == LINK_ST_USED) && l->ready && l->tx_status == 'I' && !l->close_needed &&
	       l->counted && l->cancel_ctx == NULL && l->reset_sql == NULL &&
	       l->pool->replication == NULL && !sbuf_io_is_tls(&l->sb) &&
	       sbuf_is_empty(&l->sb) && sbuf_queued(&l->sb) == 0 && !sbuf_is_closed(&l->sb);
}

/* link_export: see neki/pool.h. */
void
link_export(const struct link *l, struct pktbuf *pb)
{
	pktbuf_put_uint64(pb, l->id);
	pktbuf_put_uint64(pb, l->connect_us);
	pktbuf_put_uint64(pb, l->idle_since_us);
	pktbuf_put_int32(pb, (int32_t)l->be_pid);
	pktbuf_put_int32(pb, (int32_t)l->be_key);
	pktbuf_put_int32(pb, (int32_t)l->host_idx);
	pktbuf_put_int32(pb, (int32_t)l->addrlen);
	pktbuf_put_bytes(pb, &l->addr, l->addrlen);
	pktbuf_put_string(pb, l->addr_str);
	pktbuf_put_byte(pb, l->check_after_use);
	pktbuf_put_int16(pb, (int16_t)l->nparams);
	for (size_t i = 0; i < l->nparams; i++) {
		pktbuf_put_string(pb, l->params[i].name);
		pktbuf_put_string(pb, l->params[i].value);
	}
}

/* The exported state of a link from <r> into <l>; false when malformed or out of memory. */
static bool
link_import_state(struct link *l, struct proto_reader *r)
{
	uint32_t alen;
	uint16_t n;
	const void *addr;

	l->id = proto_get_uint64(r);
	l->connect_us = proto_get_uint64(r);
	l->idle_since_us = proto_get_uint64(r);
	l->be_pid = (uint32_t)proto_get_int32(r);
	l->be_key = (uint32_t)proto_get_int32(r);
	l->host_idx = (size_t)(uint32_t)proto_get_int32(r);
	alen = (uint32_t)proto_get_int32(r);
	if (!proto_reader_ok(r) || alen > sizeof(l->addr) || l->host_idx >= l->pool->nhosts ||
	    (addr = proto_get_bytes(r, alen)) == NULL)
		return false;
	memcpy(&l->addr, addr, alen);
	l->addrlen = alen;
	snprintf(l->addr_str, sizeof(l->addr_str), "%s", proto_get_string(r));
	l->check_after_use = proto_get_byte(r) != 0;
	n = proto_get_uint16(r);
	for (uint16_t i = 0; i < n && proto_reader_ok(r); i++) {
		const char *name = proto_get_string(r), *value = proto_get_string(r);

		if (proto_reader_ok(r) && !link_param_set(l, name, value))
			return false;
	}
	return proto_reader_ok(r);
}

/* link_adopt: see neki/pool.h. */
struct link *
link_adopt(struct pool *p, int fd, struct proto_reader *r)
{
	struct link *l = link_alloc(p);
	uint64_t idle_since;

	if (l == NULL)
		return NULL;
	if (!link_import_state(l, r) ||
	    !sbuf_accept(&l->sb, fd, l->addr.ss_family == AF_UNIX)) {
		link_unalloc(l);
		return NULL;
	}
	l->counted = true;	/* its slot came with it (shm_counter_share_move) */
	l->tx_status = 'I';
	l->ready = true;
	idle_since = l->idle_since_us;
	link_set_state(l, LINK_ST_IDLE);
	l->idle_since_us = idle_since;
	link_log(l, LOG_LVL_DEBUG, "taken over from another worker");
	return l;
}

/* link_moved: see neki/pool.h. */
void
link_moved(struct link *l)
{
	link_log(l, LOG_LVL_DEBUG, "handed to another worker for a client waiting there");
	l->counted = false;	/* the slot went with it */
	link_close_err(l, false, NULL, NULL);
}
