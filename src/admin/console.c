/*
 * console.c - one console connection on the admin port: startup, authentication, simple
 * query. A recognised __neki call becomes a struct adm_req (nekifn.c); any other statement
 * goes to the console commands (adm_console_command).
 *
 * States (struct adm_conn.state), written only by con_set_state():
 *   CON_ST_STARTUP   startup framing; reading SSLRequest / GSSENCRequest (answered 'N'),
 *                    CancelRequest (closed) or the StartupMessage
 *     --StartupMessage accepted--> CON_ST_IDLE (trust + listed user, any, local pgbouncer)
 *                                  CON_ST_PASSWORD (plain / md5 challenge sent)
 *     --refused--> CON_ST_CLOSED (after a FATAL)
 *   CON_ST_PASSWORD  waiting for the PasswordMessage --ok--> CON_ST_IDLE, --bad--> CLOSED
 *   CON_ST_IDLE      reading Query / Terminate; other messages end the connection
 *     --__neki call--> CON_ST_BUSY
 *   CON_ST_BUSY      the next message waits until adm_req_finish() sends the reply (an EOF
 *                    meanwhile closes) --> CON_ST_IDLE
 *   CON_ST_CLOSED    socket closed; on the reap list until freed outside callbacks
 */
#include "neki/base.h"

#include "admin_int.h"

#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <inttypes.h>
#include <stdio.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "neki/admin.h"
#include "neki/config.h"
#include "neki/fdchan.h"
#include "neki/log.h"
#include "neki/proto.h"
#include "neki/sbuf.h"
#include "neki/spool.h"
#include "neki/shm.h"
#include "neki/shm_list.h"
#include "neki/shm_dbstats.h"
#include "neki/tls.h"
#include "neki/proc.h"

#define CON_SERVER_VERSION NK_PGBOUNCER_VERSION "/bouncer"

enum con_state {
	CON_ST_STARTUP = 0,
	CON_ST_PASSWORD = 1,
	CON_ST_IDLE = 2,
	CON_ST_BUSY = 3,
	CON_ST_CLOSED = 4,
};

struct adm_conn {
	struct sbuf sb;			/* owned transport */
	enum con_state state;
	bool is_unix;			/* arrived over a Unix socket */
	bool forwarded;			/* a worker's connection on the internal socket */
	bool local_admin;		/* forwarded: the worker vouches for local user pgbouncer */
	bool adopted;			/* a worker handed its socket over (console_adopt) */
	int peer_pid;			/* adopted: the Unix peer's pid (SO_PEERCRED), 0 unknown */
	char user[ADM_NAME_MAX];
	char db[ADM_NAME_MAX];
	enum adm_access access;
	struct con_auth auth;		/* owned: the password exchange (CON_ST_PASSWORD) */
	struct adm_req *req;		/* weak: the call in flight (cleared by adm_req_finish) */
	struct adm_conn *next_dead;	/* reap list */
	struct adm_conn *prev, *next;	/* live list (SHOW CLIENTS) */
	uint64_t id;			/* SHOW CLIENTS id */
	bool counted;			/* its query is in the pgbouncer database's stats */
	struct session_console_units units; /* its client-limit units (not forwarded ones:
					 * the worker holds theirs) */
	time_t connect_time, request_time;
	char app_name[ADM_NAME_MAX];
};

static struct adm_conn *dead_list;	/* closed connections, freed by reap_cb */
static struct adm_conn *live_list;	/* open connections (weak links) */
static struct event *reap_ev;		/* owned */

static const char *
con_state_str(enum con_state st)
{
	switch (st) {
	case CON_ST_STARTUP: return "startup";
	case CON_ST_PASSWORD: return "password";
	case CON_ST_IDLE: return "idle";
	case CON_ST_BUSY: return "busy";
	case CON_ST_CLOSED: return "closed";
	}
	return "unknown";
}

static void
reap_cb(evutil_socket_t fd, short what, void *arg)
{
	while (dead_list != NULL) {
		struct adm_conn *c = dead_list;

		dead_list = c->next_dead;
		sbuf_cleanup(&c->sb);
		con_auth_cleanup(&c->auth);
		free(c);
	}
}

/* The only writer of c->state. */
static void
con_set_state(struct adm_conn *c, enum con_state st)
{
	log_noise("console %s@%s: %s -> %s", c->user, c->db, con_state_str(c->state),
		  con_state_str(st));
	NK_ASSERT(c->state != CON_ST_CLOSED);
	c->state = st;
	switch (st) {
	case CON_ST_STARTUP:
		break;
	case CON_ST_PASSWORD:
		sbuf_set_startup(&c->sb, false);
		break;
	case CON_ST_IDLE:
		sbuf_set_startup(&c->sb, false);
		sbuf_continue(&c->sb);
		break;
	case CON_ST_BUSY:
		/*
		 * Still read: a client that goes away meanwhile is seen at once (a SUSPEND it
		 * issued ends with it, as pgbouncer's); a message it sends ahead pauses the socket
		 * (con_sbuf_cb) until the reply is out.
		 */
		break;
	case CON_ST_CLOSED:
		if (c->prev != NULL)
			c->prev->next = c->next;
		else
			live_list = c->next;
		if (c->next != NULL)
			c->next->prev = c->prev;
		if (c->req != NULL)
			c->req->conn = NULL;
		c->req = NULL;
		ctl_console_gone(c);
		session_console_release(&c->units);
		sbuf_close(&c->sb);
		c->next_dead = dead_list;
		dead_list = c;
		event_active(reap_ev, EV_TIMEOUT, 0);
		child_client_closed();
		break;
	}
}

/*
 * Close <c> for <reason>. A session a worker handed over (console_adopt) logs it the way the
 * worker logs its clients' ends, as pgbouncer logs an admin client's.
 */
static void
con_close(struct adm_conn *c, const char *reason)
{
	if (c->state == CON_ST_CLOSED)
		return;
	if (c->adopted && cfg_current()->log.log_disconnections)
		log_info("C-%p: %s/%s@unix(%d):%d closing because: %s (age=%llds)", (void *)c,
			 c->db, c->user, c->peer_pid, cfg_current()->proc.listen_port, reason,
			 (long long)(time(NULL) - c->connect_time));
	con_set_state(c, CON_ST_CLOSED);
}

/* Queue the bytes of <pb> (a failed build closes the connection). */
static void
con_send(struct adm_conn *c, const struct pktbuf *pb)
{
	if (pktbuf_failed(pb) || !sbuf_send(&c->sb, pb->buf, pb->len)) {
		log_warn("console %s: could not send a reply", c->user);
		con_close(c, "client connection failed");
	}
}

/* Send a FATAL error and close. */
static void
con_fatal(struct adm_conn *c, const char *sqlstate, const char *msg)
{
	struct pktbuf pb;
	struct nk_error err;

	nk_error_set(&err, sqlstate, "%s", msg);
	err.severity = NK_SEV_FATAL;
	adm_pooler_error(&err);
	pktbuf_init(&pb, 128);
	pktbuf_write_error(&pb, &err);
	con_send(c, &pb);
	pktbuf_cleanup(&pb);
	con_close(c, msg);
}

/* Send an ERROR (and, when <rfq>, ReadyForQuery). */
static void
con_error(struct adm_conn *c, const struct nk_error *err, bool rfq)
{
	struct pktbuf pb;

	adm_pooler_error(err);
	pktbuf_init(&pb, 128);
	pktbuf_write_error(&pb, err);
	if (rfq)
		pktbuf_write_ready_for_query(&pb, 'I');
	con_send(c, &pb);
	pktbuf_cleanup(&pb);
}

/* The pid of a Unix socket peer, 0 when unknown. */
static int
con_peer_pid(const struct adm_conn *c)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (!c->is_unix || getsockopt(sbuf_fd(&c->sb), SOL_SOCKET, SO_PEERCRED, &cred, &len) == -1)
		return 0;
	return (int)cred.pid;
}

/* True when the peer of a Unix socket connection runs under our own uid. */
static bool
peer_is_us(const struct adm_conn *c)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (!c->is_unix)
		return false;
	if (getsockopt(sbuf_fd(&c->sb), SOL_SOCKET, SO_PEERCRED, &cred, &len) == -1)
		return false;
	return cred.uid == getuid();
}

/* The local "pgbouncer" user over the Unix socket with our own uid (pgbouncer's rule). */
static bool
is_local_pgbouncer(const struct adm_conn *c)
{
	if (strcmp(c->user, "pgbouncer") != 0)
		return false;
	if (c->forwarded)	/* the worker checked its client's socket */
		return c->local_admin && peer_is_us(c);
	return peer_is_us(c);
}

/* A forwarded login's ADMIN_LOCAL_PARAM (ignored from anyone else). */
static void
con_read_local_param(struct adm_conn *c, const struct proto_startup *st)
{
	struct proto_param p;
	size_t pos = 0;

	while (c->forwarded && proto_startup_next_param(st, &pos, &p)) {
		if (strcmp(p.name, ADMIN_LOCAL_PARAM) == 0)
			c->local_admin = strcmp(p.value, "on") == 0;
	}
}

/*
 * The client limits of a login on the admin port (a worker counts the console logins it
 * forwards): false when refused (closed with pgbouncer's FATAL).
 */
static bool
con_take_limits(struct adm_conn *c)
{
	struct nk_error err;

	if (session_console_take(cfg_current(), c->db, c->user, is_local_pgbouncer(c), &c->units,
				 &err))
		return true;
	log_info("console login refused: user=%s db=%s: %s", c->user, c->db, err.message);
	con_fatal(c, err.sqlstate, err.message);
	return false;
}

/* Login succeeded: AuthenticationOk, parameters, BackendKeyData, ReadyForQuery. */
static void
con_login_ok(struct adm_conn *c)
{
	static const char *const params[][2] = {
		{ "server_version", CON_SERVER_VERSION }, { "client_encoding", "UTF8" },
		{ "server_encoding", "UTF8" }, { "DateStyle", "ISO" }, { "TimeZone", "GMT" },
		{ "standard_conforming_strings", "on" }, { "is_superuser", "on" },
	};
	const struct cfg *cfg = cfg_current();
	struct pktbuf pb;

	if (c->access != ADM_ACCESS_ADMIN) {
		if (cfg_list_has(cfg->auth.admin_users, c->user))
			c->access = ADM_ACCESS_ADMIN;
		else if (cfg_list_has(cfg->auth.stats_users, c->user) || cfg->auth.auth_type == CFG_AUTH_ANY)
			c->access = ADM_ACCESS_STATS;
	}
	if (!c->forwarded && !con_take_limits(c))
		return;
	/* pgbouncer's console admits only listed users; the neki database checks per function */
	if (c->access == ADM_ACCESS_NONE && strcmp(c->db, "pgbouncer") == 0) {
		con_fatal(c, ERRCODE_PROTOCOL_VIOLATION, "not allowed");
		return;
	}
	if (strcmp(c->db, "pgbouncer") == 0)	/* (the neki database has no stats row) */
		shm_dbstats_get("pgbouncer")->total_client_login_count++;
	pktbuf_init(&pb, 256);
	pktbuf_write_auth_ok(&pb);
	for (size_t i = 0; i < NK_ARRAY_LEN(params); i++)
		pktbuf_write_parameter_status(&pb, params[i][0], params[i][1]);
	pktbuf_write_backend_key_data(&pb, (uint32_t)getpid(), (uint32_t)random());
	pktbuf_write_ready_for_query(&pb, 'I');
	con_send(c, &pb);
	pktbuf_cleanup(&pb);
	if (c->state != CON_ST_CLOSED)
		con_set_state(c, CON_ST_IDLE);
	log_debug("console login: user=%s db=%s access=%d", c->user, c->db, (int)c->access);
}

/* Send <pb>, then log in (OK), wait (CONTINUE) or fail with <err>. */
static void
con_auth_outcome(struct adm_conn *c, enum con_auth_result r, struct pktbuf *pb,
		 const struct nk_error *err)
{
	if (pb->len > 0)
		con_send(c, pb);
	if (c->state == CON_ST_CLOSED)
		return;
	switch (r) {
	case CON_AUTH_OK:
		con_auth_cleanup(&c->auth);
		con_login_ok(c);
		break;
	case CON_AUTH_CONTINUE:
		if (c->state == CON_ST_STARTUP)
			con_set_state(c, CON_ST_PASSWORD);
		break;
	case CON_AUTH_FAIL:
		log_info("console login failed: user=%s db=%s: %s", c->user, c->db, err->message);
		con_auth_cleanup(&c->auth);
		con_fatal(c, err->sqlstate, err->message);
		break;
	}
}

/* Choose how to authenticate the StartupMessage's user. */
static void
con_authenticate(struct adm_conn *c)
{
	const struct cfg *cfg = cfg_current();
	struct pktbuf pb;
	struct nk_error err;
	enum con_auth_result r;

	if (is_local_pgbouncer(c)) {
		c->access = ADM_ACCESS_ADMIN;
		con_login_ok(c);
		return;
	}
	if (cfg->auth.auth_type == CFG_AUTH_ANY) {
		con_login_ok(c);
		return;
	}
	if (c->forwarded) {
		if (peer_is_us(c))
			con_login_ok(c);
		else
			con_fatal(c, ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION,
				  "forwarded console connections must come from neki");
		return;
	}
	pktbuf_init(&pb, 64);
	r = con_auth_start(&c->auth, c->user, c->db, sbuf_fd(&c->sb), c->is_unix, &pb, &err);
	con_auth_outcome(c, r, &pb, &err);
	pktbuf_cleanup(&pb);
}

/* The TLS handshake ended: go on reading the StartupMessage, or close. */
static void
con_tls_done(struct sbuf *sb, bool ok, const char *errmsg, void *arg)
{
	struct adm_conn *c = arg;

	if (ok)
		return;
	log_info("console TLS handshake failed: %s", errmsg);
	con_close(c, "TLS handshake failed");
}

/* SSLRequest: 'S' and the handshake when client TLS is on; GSSENCRequest (and no TLS): 'N'. */
static void
con_on_ssl_request(struct adm_conn *c, bool ssl)
{
	struct tls_ctx *ctx = tls_client_ctx();
	bool offer = ssl && ctx != NULL && tls_client_offer(c->is_unix) &&
		     !tls_sbuf_is_tls(&c->sb);
	struct nk_error err;
	struct pktbuf pb;

	pktbuf_init(&pb, 8);
	pktbuf_put_byte(&pb, offer ? 'S' : 'N');
	con_send(c, &pb);
	pktbuf_cleanup(&pb);
	if (offer && c->state != CON_ST_CLOSED &&
	    !tls_sbuf_accept(&c->sb, ctx, con_tls_done, c, &err))
		con_fatal(c, err.sqlstate, err.message);
}

/* The StartupMessage: user and database. */
static void
con_on_startup_message(struct adm_conn *c, const uint8_t *body, size_t len)
{
	struct proto_startup st;
	struct nk_error err;

	if (!proto_startup_parse(body, len, &st, &err)) {
		con_fatal(c, err.sqlstate, err.message);
		return;
	}
	if (st.kind == PROTO_STARTUP_SSL || st.kind == PROTO_STARTUP_GSSENC) {
		con_on_ssl_request(c, st.kind == PROTO_STARTUP_SSL);
		return;
	}
	if (st.kind == PROTO_STARTUP_CANCEL) {
		con_close(c, "cancel request for the console");
		return;
	}
	if (tls_client_required(c->is_unix) && !tls_sbuf_is_tls(&c->sb)) {
		con_fatal(c, ERRCODE_PROTOCOL_VIOLATION, "SSL required");
		return;
	}
	snprintf(c->user, sizeof(c->user), "%s", st.user);
	snprintf(c->app_name, sizeof(c->app_name), "%s", st.application_name ? st.application_name :
		 "");
	snprintf(c->db, sizeof(c->db), "%s", st.database);
	con_read_local_param(c, &st);
	if (strcmp(c->db, "neki") != 0 && strcmp(c->db, "pgbouncer") != 0) {
		char msg[128];

		snprintf(msg, sizeof(msg), "no such database: %s", c->db);
		con_fatal(c, ERRCODE_PROTOCOL_VIOLATION, msg);
		return;
	}
	con_authenticate(c);
}

/*
 * The admin database's SHOW STATS figures, as pgbouncer keeps them: a console session's
 * first query counts one query and one transaction (pgbouncer starts the clock of a
 * console session's query and never stops it: there is no server to answer it).
 */
static void
con_count_query(struct adm_conn *c)
{
	struct shm_stats *st;

	if (c->counted || strcmp(c->db, "pgbouncer") != 0)
		return;
	c->counted = true;
	if ((st = shm_dbstats_get("pgbouncer")) == NULL)
		return;
	st->total_query_count++;
	st->total_xact_count++;
}

/* A Query message. */
static void
con_on_query(struct adm_conn *c, const uint8_t *body, size_t len)
{
	struct adm_req *req;
	struct nk_error err;
	const char *sql;

	c->request_time = time(NULL);
	con_count_query(c);
	if (!proto_parse_query(body, len, &sql, &err)) {
		con_fatal(c, err.sqlstate, err.message);
		return;
	}
	if (sql[strspn(sql, " \t\r\n;")] == '\0') {
		struct pktbuf pb;

		pktbuf_init(&pb, 16);
		pktbuf_write_empty_query(&pb);
		pktbuf_write_ready_for_query(&pb, 'I');
		con_send(c, &pb);
		pktbuf_cleanup(&pb);
		return;
	}
	req = calloc(1, sizeof(*req));
	if (req == NULL) {
		nk_error_oom(&err);
		con_error(c, &err, true);
		return;
	}
	switch (adm_call_parse(sql, &req->call, &err)) {
	case ADM_CALL_ERROR:
		free(req);
		con_error(c, &err, true);
		return;
	case ADM_CALL_NOT_NEKI:
	case ADM_CALL_OK:
		break;
	}
	req->conn = c;
	snprintf(req->user, sizeof(req->user), "%s", c->user);
	req->access = c->access;
	adm_result_init(&req->res);
	if (req->call.ncols > 0 && strcmp(req->call.cols[0], "*") != 0)
		adm_result_select(&req->res, (const char (*)[ADM_NAME_MAX])req->call.cols,
				  req->call.ncols);
	c->req = req;
	con_set_state(c, CON_ST_BUSY);
	if (req->call.fn[0] != '\0')
		nekifn_start(req);
	else
		adm_command(req, sql);
}

/* adm_req_fail: see admin_int.h. */
void
adm_req_fail(struct adm_req *req, const struct nk_error *err)
{
	adm_result_error(&req->res, err);
	adm_req_finish(req);
}

void
adm_req_finish(struct adm_req *req)
{
	struct adm_conn *c = req->conn;

	if (c != NULL) {
		c->req = NULL;
		if (req->res.bad_col[0] != '\0') {
			struct nk_error err;

			nk_error_set(&err, ERRCODE_UNDEFINED_COLUMN,
				     "column \"%s\" does not exist", req->res.bad_col);
			pktbuf_reset(&req->res.pb);
			pktbuf_write_error(&req->res.pb, &err);
		}
		pktbuf_write_ready_for_query(&req->res.pb, 'I');
		con_send(c, &req->res.pb);
		if (c->state == CON_ST_BUSY)
			con_set_state(c, CON_ST_IDLE);
	}
	if (req->done != NULL)
		req->done(req->done_arg, req->res.error);
	adm_call_cleanup(&req->call);
	adm_result_cleanup(&req->res);
	free(req);
}

struct adm_req *
adm_req_internal(void (*done)(void *arg, const struct nk_error *err), void *arg)
{
	struct adm_req *req = calloc(1, sizeof(*req));

	if (req == NULL)
		return NULL;
	adm_result_init(&req->res);
	snprintf(req->user, sizeof(req->user), "neki");
	req->access = ADM_ACCESS_ADMIN;
	req->done = done;
	req->done_arg = arg;
	return req;
}

/* A whole message after login. */
static void
con_on_message(struct adm_conn *c, char type, const uint8_t *body, size_t len)
{
	struct nk_error err;

	switch (type) {
	case 'Q':
		con_on_query(c, body, len);
		return;
	case 'X':
		con_close(c, "client close request");
		return;
	case 'P': case 'B': case 'E': case 'D': case 'C': case 'S': case 'H':
		nk_error_set(&err, ERRCODE_PROTOCOL_VIOLATION,
			     "extended query protocol not supported by admin console");
		break;
	default:
		nk_error_set(&err, ERRCODE_PROTOCOL_VIOLATION,
			     "unsupported packet type for admin console: %d", type);
		break;
	}
	err.severity = NK_SEV_FATAL;
	con_error(c, &err, false);
	con_close(c, err.message);
}

/* An answer during the password exchange. */
static void
con_on_password(struct adm_conn *c, char type, const uint8_t *body, size_t len)
{
	struct pktbuf pb;
	struct nk_error err;
	enum con_auth_result r;

	pktbuf_init(&pb, 128);
	r = con_auth_step(&c->auth, type, body, len, &pb, &err);
	con_auth_outcome(c, r, &pb, &err);
	pktbuf_cleanup(&pb);
}

/* A whole packet <pkt> is buffered: act on it by state. */
static void
con_on_packet(struct adm_conn *c, const struct sbuf_pkt *pkt)
{
	size_t hdr = pkt->type == 0 ? 4 : 5;
	const uint8_t *body = pkt->data + hdr;
	size_t len = pkt->len - hdr;

	switch (c->state) {
	case CON_ST_STARTUP:
		con_on_startup_message(c, body, len);
		break;
	case CON_ST_PASSWORD:
		con_on_password(c, (char)pkt->type, body, len);
		break;
	case CON_ST_IDLE:
		con_on_message(c, (char)pkt->type, body, len);
		break;
	case CON_ST_BUSY:
	case CON_ST_CLOSED:
		break;
	}
}

static bool
con_sbuf_cb(struct sbuf *sb, enum sbuf_event ev, const struct sbuf_pkt *pkt, int err, void *arg)
{
	struct adm_conn *c = arg;

	if (ev != SBUF_EV_PKT) {
		if (ev == SBUF_EV_EOF)
			con_close(c, "client unexpected eof");
		else if (ev == SBUF_EV_RECV_FAILED || ev == SBUF_EV_SEND_FAILED)
			con_close(c, "client connection failed");
		else if (ev == SBUF_EV_BAD_PKT)
			con_close(c, "invalid message length");
		return true;
	}
	if (c->state == CON_ST_BUSY || c->state == CON_ST_CLOSED)
		return false;
	if (c->state == CON_ST_STARTUP && tls_pkt_is_client_hello(pkt)) {
		struct nk_error e;
		struct tls_ctx *ctx = tls_client_ctx();

		if (ctx == NULL || c->is_unix ||
		    !tls_sbuf_accept_direct(sb, ctx, pkt, con_tls_done, c, &e)) {
			con_close(c, "TLS handshake failed");
			return false;
		}
		return true;
	}
	if (pkt->avail < pkt->len) {
		if (!sbuf_hold(sb, pkt->len)) {
			con_fatal(c, ERRCODE_PROTOCOL_VIOLATION,
				  "message too large for the admin console");
			return false;
		}
		return true;
	}
	sbuf_skip(sb, pkt->len);
	con_on_packet(c, pkt);
	return c->state != CON_ST_CLOSED;
}

/*
 * A console connection on the accepted socket <fd> (closed on failure), or NULL; <id> is its
 * socket id (0: a new one, but none for a worker's relay).
 */
static struct adm_conn *
con_new(int fd, bool is_unix, bool forwarded, uint64_t id)
{
	struct adm_conn *c = calloc(1, sizeof(*c));
	struct sbuf_opts opts;

	if (reap_ev == NULL)
		reap_ev = event_new(child_base(), -1, 0, reap_cb, NULL);
	sbuf_opts_from_cfg(&opts, cfg_current());
	if (c == NULL || reap_ev == NULL ||
	    !sbuf_init(&c->sb, child_base(), con_sbuf_cb, c, &opts)) {
		log_warn("out of memory accepting a console connection");
		goto fail;
	}
	c->is_unix = is_unix;
	c->forwarded = forwarded;
	c->state = CON_ST_STARTUP;
	sbuf_set_startup(&c->sb, true);
	if (!sbuf_accept(&c->sb, fd, is_unix)) {
		log_warn("could not watch a console connection");
		goto fail;
	}
	/* a worker's relay is not a socket of its own: the worker's client has the id */
	c->id = forwarded ? 0 : id != 0 ? id : shm_socket_id_next();
	c->connect_time = c->request_time = time(NULL);
	c->next = live_list;
	if (live_list != NULL)
		live_list->prev = c;
	live_list = c;
	child_client_opened();
	return c;
fail:
	if (c != NULL) {
		sbuf_cleanup(&c->sb);
		free(c);
	}
	close(fd);
	return NULL;
}

void
console_accept(int fd, bool is_unix, bool forwarded)
{
	(void)con_new(fd, is_unix, forwarded, 0);
}

void
console_adopt(int fd, const struct fdchan_console *who)
{
	struct adm_conn *c = con_new(fd, true, false, who->id);

	if (c == NULL)
		return;
	snprintf(c->user, sizeof(c->user), "%s", who->user);
	snprintf(c->db, sizeof(c->db), "%s", who->db);
	snprintf(c->app_name, sizeof(c->app_name), "%s", who->app_name);
	c->adopted = true;
	c->peer_pid = con_peer_pid(c);
	log_debug("console %s@%s: taken from a worker", c->user, c->db);
	con_authenticate(c);	/* the local pgbouncer user: admin access, no password */
}

int
console_pass_fd_socket(const struct adm_conn *c)
{
	if (c->forwarded || !is_local_pgbouncer(c) || tls_sbuf_is_tls(&c->sb) ||
	    sbuf_queued(&c->sb) > 0 || c->state == CON_ST_CLOSED)
		return -1;
	return sbuf_fd(&c->sb);
}

/* ---- SHOW CLIENTS / SOCKETS / POOLS for the console's own sessions ---- */

void
adm_sockaddr_text(const struct sockaddr_storage *ss, char *host, size_t hlen, int *port)
{
	snprintf(host, hlen, "unix");
	*port = 0;
	if (ss->ss_family == AF_INET) {
		inet_ntop(AF_INET, &((const struct sockaddr_in *)ss)->sin_addr, host,
			  (socklen_t)hlen);
		*port = ntohs(((const struct sockaddr_in *)ss)->sin_port);
	} else if (ss->ss_family == AF_INET6) {
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)ss)->sin6_addr, host,
			  (socklen_t)hlen);
		*port = ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
	}
}

/* "host", port of the peer (<peer>) or the local end of <fd>. */
static void
sock_addr(int fd, bool peer, bool is_unix, char *host, size_t hlen, int *port)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int rc = peer ? getpeername(fd, (struct sockaddr *)&ss, &len) :
		 getsockname(fd, (struct sockaddr *)&ss, &len);

	snprintf(host, hlen, "unix");
	*port = 0;
	if (rc == -1 || is_unix)
		return;
	adm_sockaddr_text(&ss, host, hlen, port);
}

/* A console session's row in wlist.c's format (30 values, times as epoch seconds). */
static bool
console_row(void *buf, size_t cap, size_t *len, const struct adm_conn *c)
{
	char addr[64], laddr[64], port[16], lport[16], ct[24], rt[24], ptr[32], id[24];
	char tls[128], rpid[16];
	int p, lp;
	bool login = c->state == CON_ST_STARTUP || c->state == CON_ST_PASSWORD;
	const char *vals[30] = {
		"C", c->user, c->db, "none", "active", addr, port, laddr, lport, ct, rt, "0", "0",
		"0", ptr, "", rpid, tls, c->app_name, "0", id, "0", "0", "0", "0", "0", "0", "0",
		login ? "cl_login" : "cl_active", login ? "0" : "1",
	};

	sock_addr(sbuf_fd(&c->sb), true, c->is_unix, addr, sizeof(addr), &p);
	sock_addr(sbuf_fd(&c->sb), false, c->is_unix, laddr, sizeof(laddr), &lp);
	if (c->adopted)		/* the main port's Unix socket: its port, as pgbouncer shows */
		p = lp = cfg_current()->proc.listen_port;
	snprintf(port, sizeof(port), "%d", p);
	snprintf(lport, sizeof(lport), "%d", lp);
	snprintf(rpid, sizeof(rpid), "%d", c->peer_pid);
	snprintf(ct, sizeof(ct), "%lld", (long long)c->connect_time);
	snprintf(rt, sizeof(rt), "%lld", (long long)c->request_time);
	snprintf(ptr, sizeof(ptr), "0x%" PRIx64, c->id);
	snprintf(id, sizeof(id), "%" PRIu64, c->id);
	tls_sbuf_info(&c->sb, tls, sizeof(tls));
	return shm_list_put_row(buf, cap, len, 'c', vals, 30);
}

bool
console_list_rows(void *buf, size_t cap, size_t *len)
{
	unsigned n = 0;
	char active[16];
	const char *pool[17] = {
		"pgbouncer", "pgbouncer", active, "0", "0", "0", "0", "0", "0", "0", "0", "0", "0",
		"0", "0", "statement", NULL,
	};
	bool ok = true;

	for (const struct adm_conn *c = live_list; c != NULL; c = c->next) {
		/* a worker's relay: the worker lists that client, with its real address */
		if (!c->forwarded)
			ok = console_row(buf, cap, len, c) && ok;
		n += c->state == CON_ST_IDLE || c->state == CON_ST_BUSY;
	}
	snprintf(active, sizeof(active), "%u", n);
	return shm_list_put_row(buf, cap, len, 'p', pool, 17) && ok;
}
