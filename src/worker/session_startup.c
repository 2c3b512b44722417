/*
 * session_startup.c - the LOGIN phase up to authentication, and the welcome after it.
 *
 * The startup packet: SSLRequest and GSSENCRequest answered 'N' (TLS is a later layer),
 * CancelRequest handed to session_cancel.c, StartupMessage parameters checked as pgbouncer
 * does (tracked parameters, `options`, ignore_startup_parameters, `_pq_.` negotiation),
 * max_client_conn, the database lookup (reported only after authentication). After
 * authentication: the pool, per-database / per-user client limits, the pool mode, and the
 * welcome (AuthenticationOk, ParameterStatus, BackendKeyData, ReadyForQuery).
 * Entry points: sess_on_login_pkt(), sess_login_done(), sess_send_welcome().
 */
#include "neki/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "neki/admin_relay.h"
#include "neki/log.h"
#include "neki/pktbuf.h"
#include "neki/proto.h"
#include "neki/tls.h"
#include "neki/worker.h"
#include "route_int.h"
#include "session_int.h"

/* True when comma list <list> contains <name> (case-insensitive, spaces ignored). */
static bool
sess_list_has(const char *list, const char *name)
{
	size_t nl = strlen(name);

	while (list != NULL && *list != '\0') {
		const char *end;
		size_t len;

		while (*list == ' ' || *list == ',' || *list == '\t')
			list++;
		end = list;
		while (*end != '\0' && *end != ',')
			end++;
		len = (size_t)(end - list);
		while (len > 0 && (list[len - 1] == ' ' || list[len - 1] == '\t'))
			len--;
		if (len == nl && len > 0 && strncasecmp(list, name, len) == 0)
			return true;
		list = end;
	}
	return false;
}

static bool
sess_is_ignored(const struct session *s, const char *name)
{
	return sess_list_has(s->cfg->ignore_startup_parameters, name);
}

/* One `-c name=value` of the options parameter. */
static bool
sess_option_cb(void *arg, const char *name, const char *value, struct nk_error *err)
{
	struct session *s = arg;

	if (varcache_set(&s->vars, name, value)) {
		sess_log(s, LOG_LVL_DEBUG, "got var from options: %s=%s", name, value);
		return true;
	}
	if (sess_is_ignored(s, name) || sess_is_ignored(s, "options"))
		return true;
	sess_log(s, LOG_LVL_WARNING, "unsupported startup parameter in options: %s=%s", name,
		 value);
	return proto_options_unsupported(err, name);
}

/* application_name, with application_name_add_host. */
static bool
sess_set_appname(struct session *s, const char *app)
{
	char buf[512];

	if (s->cfg->application_name_add_host) {
		snprintf(buf, sizeof(buf), "%s - %s:%d", app != NULL ? app : "app", s->addr,
			 s->port);
		app = buf;
	}
	if (app == NULL)
		return true;
	return varcache_set(&s->vars, "application_name", app);
}

/* Keep <p> for a replication client's server startup packet (name\0value\0). */
static bool
sess_repl_keep(struct session *s, const struct proto_param *p)
{
	size_t nl = strlen(p->name) + 1, vl = strlen(p->value) + 1;
	uint8_t *b = realloc(s->repl_startup, s->repl_startup_len + nl + vl);

	if (b == NULL)
		return false;
	memcpy(b + s->repl_startup_len, p->name, nl);
	memcpy(b + s->repl_startup_len + nl, p->value, vl);
	s->repl_startup = b;
	s->repl_startup_len += nl + vl;
	return true;
}

/*
 * A replication client's parameter: the walsender takes no SET, so the parameters go to the
 * server in its startup packet, `options` unparsed (pgbouncer 1.23 does the same).
 */
static bool
sess_repl_param(struct session *s, const struct proto_param *p, struct nk_error *err)
{
	const char *n = p->name;

	if (strcmp(n, "user") == 0 || strcmp(n, "database") == 0 ||
	    strcmp(n, "replication") == 0 || strncmp(n, "_pq_.", 5) == 0 || sess_is_ignored(s, n))
		return true;
	if (strcmp(n, "options") != 0 && strcmp(n, "application_name") != 0 &&
	    !varcache_set(&s->vars, n, p->value)) {
		sess_log(s, LOG_LVL_WARNING, "unsupported startup parameter: %s=%s", n, p->value);
		return nk_error_set(err, "08P01", "unsupported startup parameter: %s", n);
	}
	return sess_repl_keep(s, p) ? true : nk_error_set(err, "53200", "out of memory");
}

/* One startup parameter. False with <err> when the client must be refused. */
static bool
sess_startup_param(struct session *s, const struct proto_param *p, struct nk_error *err)
{
	const char *n = p->name;

	if (strcmp(n, "user") == 0 || strcmp(n, "database") == 0 ||
	    strcmp(n, "application_name") == 0 || strncmp(n, "_pq_.", 5) == 0)
		return true;
	if (strcmp(n, "options") == 0)
		return proto_options_parse(p->value, sess_option_cb, s, err);
	if (varcache_set(&s->vars, n, p->value))
		return true;
	if (sess_is_ignored(s, n))
		return true;
	sess_log(s, LOG_LVL_WARNING, "unsupported startup parameter: %s=%s", n, p->value);
	return nk_error_set(err, "08P01", "unsupported startup parameter: %s", n);
}

static bool
sess_startup_params(struct session *s, const struct proto_startup *st, struct nk_error *err)
{
	struct proto_param p;
	size_t pos = 0;

	s->replication = st->replication;
	while (proto_startup_next_param(st, &pos, &p)) {
		if (!(s->replication != PROTO_REPL_NONE ? sess_repl_param(s, &p, err) :
		      sess_startup_param(s, &p, err)))
			return false;
	}
	if (!sess_set_appname(s, st->application_name))
		return nk_error_set(err, "53200", "out of memory");
	return true;
}

/* Database lookup: the entry, or the "*" auto-database; missing is reported after auth. */
static void
sess_find_db(struct session *s)
{
	s->ucfg = cfg_user_find(s->cfg, s->user);
	if (sess_console_check(s))
		return;
	s->db = cfg_database_find(s->cfg, s->dbname);
	if (s->db == NULL && (s->db = cfg_database_auto(s->cfg)) != NULL &&
	    spool_find(s->dbname) == NULL)	/* pgbouncer's line when it creates one */
		sess_log(s, LOG_LVL_INFO, "registered new auto-database: db=%s", s->dbname);
	s->db_missing = s->db == NULL;
}

static void
sess_refuse(struct session *s, struct nk_error *err)
{
	err->severity = NK_SEV_FATAL;
	sess_close(s, err->message, err);
}

/* ---- client TLS (net/tls.c) ---- */

/* The client's TLS negotiation ended; on failure the session closes. */
static void
sess_tls_done(struct sbuf *sb, bool ok, const char *errmsg, void *arg)
{
	struct session *s = arg;

	(void)sb;
	if (!ok)
		sess_close(s, errmsg != NULL ? errmsg : "TLS handshake failed", NULL);
}

/* SSLRequest (already skipped): 'S' and the handshake when client TLS is on, else 'N'. */
static void
sess_on_ssl_request(struct session *s)
{
	struct nk_error err;

	if (tls_sbuf_is_tls(&s->sb)) {
		sess_close(s, "SSL req inside SSL", NULL);
		return;
	}
	if (!tls_client_offer(s->is_unix)) {
		if (!sbuf_send(&s->sb, "N", 1))
			sess_close(s, "failed to nak SSL", NULL);
		return;
	}
	if (!sbuf_send(&s->sb, "S", 1)) {
		sess_close(s, "failed to ack SSL", NULL);
		return;
	}
	if (!tls_sbuf_accept(&s->sb, tls_client_ctx(), sess_tls_done, s, &err))
		sess_close(s, err.message, NULL);
}

/* Direct TLS (PG17 sslnegotiation=direct): the first packet is a TLS ClientHello. */
static bool
sess_on_client_hello(struct session *s, const struct sbuf_pkt *pkt)
{
	struct nk_error err;

	if (!tls_client_offer(s->is_unix) || tls_sbuf_is_tls(&s->sb)) {
		sess_close(s, "direct TLS connection refused: client TLS is off", NULL);
		return false;
	}
	if (!tls_sbuf_accept_direct(&s->sb, tls_client_ctx(), pkt, sess_tls_done, s, &err)) {
		sess_close(s, err.message, NULL);
		return false;
	}
	return true;
}

/* client_tls_sslmode require and stronger: a plain TCP client is refused (pgbouncer's text). */
static bool
sess_tls_missing(struct session *s)
{
	struct nk_error err;

	if (!tls_client_required(s->is_unix) || tls_sbuf_is_tls(&s->sb))
		return false;
	nk_error_set(&err, "08P01", "SSL required");
	sess_refuse(s, &err);
	return true;
}

/* A whole StartupMessage. */
static void
sess_on_startup_msg(struct session *s, const struct proto_startup *st)
{
	struct nk_error err;
	struct pktbuf pb;
	char tls[128];

	if (sess_tls_missing(s))
		return;
	if (child_is_stopping() && !arelay_is_console_db(st->database)) {
		/* a Unix socket kept open for cancels and, as pgbouncer, the console */
		nk_error_set(&err, "57P03", "the database system is shutting down");
		sess_refuse(s, &err);
		return;
	}
	s->user = strdup(st->user);
	s->dbname = strdup(st->database);
	if (s->user == NULL || s->dbname == NULL) {
		sess_fatal(s, "out of memory");
		return;
	}
	if (!sess_startup_params(s, st, &err)) {
		sess_refuse(s, &err);
		return;
	}
	if (proto_startup_needs_negotiation(st)) {
		pktbuf_init(&pb, 64);
		proto_startup_write_negotiation(&pb, st);
		if (!sess_send_pb(s, &pb)) {
			sess_close(s, "client connection failed", NULL);
			return;
		}
	}
	if (!spool_client_try(s, &s->counted_global, NULL, NULL, &err)) {
		sess_refuse(s, &err);
		return;
	}
	sbuf_set_startup(&s->sb, false);
	sess_find_db(s);
	if (!s->db_missing && sctl_db_disabled(s->dbname)) {
		nk_error_set(&err, "08P01", "database \"%s\" is disabled", s->dbname);
		sess_refuse(s, &err);
		return;
	}
	tls_sbuf_info(&s->sb, tls, sizeof(tls));
	if (s->cfg->log_connections)
		sess_log(s, LOG_LVL_INFO, "login attempt: db=%s user=%s tls=%s", s->dbname,
			 s->user, tls[0] != '\0' ? tls : "no");
	sess_auth_start(s);
}

/* A startup-phase packet (whole). */
static void
sess_on_startup_pkt(struct session *s, const uint8_t *body, size_t len)
{
	struct proto_startup st;
	struct nk_error err;

	if (!proto_startup_parse(body, len, &st, &err)) {
		sess_refuse(s, &err);
		return;
	}
	switch (st.kind) {
	case PROTO_STARTUP_SSL:
		sess_on_ssl_request(s);
		break;
	case PROTO_STARTUP_GSSENC:
		if (!sbuf_send(&s->sb, "N", 1))
			sess_close(s, "failed to nak SSL", NULL);
		break;
	case PROTO_STARTUP_CANCEL:
		sess_cancel_request(st.cancel_pid, st.cancel_key);
		sess_close(s, "cancel request", NULL);
		break;
	case PROTO_STARTUP_MESSAGE:
		sess_on_startup_msg(s, &st);
		break;
	}
}

/* Any packet in LOGIN: startup-phase packets, then 'p' messages of the auth exchange. */
bool
sess_on_login_pkt(struct session *s, const struct sbuf_pkt *pkt)
{
	uint32_t hdr = pkt->type == 0 ? 4 : 5;

	if (s->auth_step == SESS_AUTH_STARTUP && tls_pkt_is_client_hello(pkt))
		return sess_on_client_hello(s, pkt);
	if (pkt->avail < pkt->len) {
		if (pkt->len <= PROTO_MAX_STARTUP_LEN + 5 && sbuf_hold(&s->sb, pkt->len))
			return true;
		if (pkt->type == 0)	/* Postgres logs this one and closes without a reply */
			sess_close(s, "invalid length of startup packet", NULL);
		else
			sess_fatal(s, "client sent too big packet in startup phase");
		return false;
	}
	sbuf_skip(&s->sb, pkt->len);
	if (s->auth_step == SESS_AUTH_STARTUP) {
		if (pkt->type != 0)
			sess_fatal(s, "bad packet");
		else
			sess_on_startup_pkt(s, pkt->data + hdr, pkt->len - hdr);
	} else if (pkt->type == 'p') {
		sess_auth_on_msg(s, pkt->data + hdr, pkt->len - hdr);
	} else if (pkt->type == 'X') {
		sess_close(s, "client close request", NULL);
	} else {
		sess_fatal(s, "bad packet");
	}
	return s->state != SESS_ST_CLOSED;
}

/* ---- after authentication ---- */

/* The effective pool mode: [users] entry, then [databases] entry, then the global one. */
static enum cfg_pool_mode
sess_pool_mode(const struct session *s)
{
	if (s->ucfg != NULL && s->ucfg->pool_mode != CFG_POOL_UNSET)
		return s->ucfg->pool_mode;
	if (s->db->pool_mode != CFG_POOL_UNSET)
		return s->db->pool_mode;
	return s->cfg->pool_mode;
}

/* The password the pool logs into the server with (forced user's, then the user's secret). */
static const char *
sess_server_password(const struct session *s)
{
	if (s->db->user != NULL && s->db->user[0] != '\0') {
		/* a forced user without password= logs in with its auth_file secret */
		if (s->db->password != NULL && s->db->password[0] != '\0')
			return s->db->password;
		return sess_auth_file_secret(s->cfg, s->db->user);
	}
	if (s->db->password != NULL && s->db->password[0] != '\0')
		return s->db->password;
	return s->secret;
}

/* Fill the client's unset tracked parameters from the pool's first-login values. */
static void
sess_fill_vars(struct session *s, const struct pool *p)
{
	for (size_t i = 0; i < pool_param_count(p); i++) {
		const char *name, *value;
		int idx;

		pool_param_at(p, i, &name, &value);
		idx = varcache_index(name);
		if (idx >= 0 && s->vars.val[idx] == NULL)
			(void)varcache_set(&s->vars, name, value);
	}
}

/* login_notify_message: a NOTICE before the first ReadyForQuery (psql prints it). */
static void
sess_write_login_notice(const struct session *s, struct pktbuf *pb)
{
	const char *msg = s->cfg->login_notify_message;
	struct nk_error notice;

	if (msg == NULL || msg[0] == '\0')
		return;
	nk_error_set(&notice, "00000", "%s", msg);
	notice.severity = NK_SEV_NOTICE;
	pktbuf_write_notice(pb, &notice);
}

/* AuthenticationOk, ParameterStatus, BackendKeyData, ReadyForQuery; then IDLE. */
void
sess_send_welcome(struct session *s)
{
	struct pool *p = spool_pool(s->sp);
	struct pktbuf pb;

	sess_fill_vars(s, p);
	if (s->route != NULL)
		route_sets_welcome(s->route);	/* what RESET goes back to */
	pktbuf_init(&pb, 512);
	pktbuf_write_auth_ok(&pb);
	for (size_t i = 0; i < pool_param_count(p); i++) {
		const char *name, *value;
		int idx;

		pool_param_at(p, i, &name, &value);
		idx = varcache_index(name);
		if (idx >= 0 && s->vars.val[idx] != NULL)
			value = s->vars.val[idx];
		pktbuf_write_parameter_status(&pb, name, value);
	}
	pktbuf_write_backend_key_data(&pb, s->key_pid, s->key_secret);
	sess_write_login_notice(s, &pb);
	pktbuf_write_ready_for_query(&pb, 'I');
	if (!sess_send_pb(s, &pb)) {
		sess_close(s, "failed to send welcome message", NULL);
		return;
	}
	s->auth_step = SESS_AUTH_DONE;
	s->activity_us = sess_now_us();
	sess_set_state(s, SESS_ST_IDLE);
	sbuf_continue(&s->sb);
}

/* Ask the pool for a link only to learn the server's parameters. */
static void
sess_wait_welcome(struct session *s)
{
	struct link *l;
	struct nk_error err;

	sess_set_state(s, SESS_ST_WELCOME);
	sbuf_pause(&s->sb);
	switch (pool_acquire(spool_pool(s->sp), &s->waiter, &l, &err)) {
	case POOL_GOT:
		pool_release_unused(l);
		sess_send_welcome(s);
		break;
	case POOL_QUEUED:
		sess_wait_begin(s);
		break;
	case POOL_FAILED:
		err.severity = NK_SEV_FATAL;
		sess_close(s, err.message, &err);
		break;
	}
}

/* The per-database and per-user client limits, after the pool is known. */
static bool
sess_check_client_limits(struct session *s)
{
	struct nk_error err;

	if (spool_client_try(s, NULL, &s->counted_db, &s->counted_user, &err))
		return true;
	sess_refuse(s, &err);
	return false;
}

void
sess_login_done(struct session *s)
{
	struct nk_error err;
	char msg[256];
	const char *pool_user;

	if (s->console) {
		sess_console_start(s);
		return;
	}
	if (s->db_missing) {
		snprintf(msg, sizeof(msg), "no such database: %s", s->dbname);
		sess_fatal(s, msg);
		return;
	}
	pool_user = s->db->user != NULL && s->db->user[0] != '\0' ? s->db->user : s->user;
	if (s->replication != PROTO_REPL_NONE && s->db->topology) {
		nk_error_set(&err, "0A000", "replication connections to a sharded database are not "
			     "supported");
		nk_error_hint(&err, "connect to a shard directly, or name a [databases] entry "
			      "without topology");
		sess_refuse(s, &err);
		return;
	}
	if (s->replication != PROTO_REPL_NONE) {
		struct spool_repl r = {
			s->replication == PROTO_REPL_LOGICAL ? "database" : "true",
			s->repl_startup, s->repl_startup_len,
		};

		s->sp = spool_get_or_create_repl(s->cfg, s->db, s->dbname, pool_user,
						 sess_server_password(s), &r, &err);
	} else {
		s->sp = spool_get_or_create(s->cfg, s->db, s->dbname, pool_user,
					    sess_server_password(s), &err);
	}
	if (s->sp == NULL) {
		sess_refuse(s, &err);
		return;
	}
	s->stats = shm_dbstats_get(s->dbname);
	if (!sess_check_client_limits(s))
		return;
	if (s->scram_keys.valid && sess_server_password(s) == s->secret)
		pool_set_scram_keys(spool_pool(s->sp), &s->scram_keys);
	/* replication connections are always session-pooled (pgbouncer 1.23) */
	s->mode = s->replication != PROTO_REPL_NONE ? CFG_POOL_SESSION : sess_pool_mode(s);
	s->prep_on = s->mode != CFG_POOL_SESSION && s->cfg->max_prepared_statements > 0;
	pool_client_attach(spool_pool(s->sp));
	s->attached = true;
	if (s->db->topology && shm_topo_revision() != 0 && !route_session_start(s)) {
		sess_fatal(s, "out of memory");
		return;
	}
	pool_waiter_init(&s->waiter, sess_pool_ready, sess_link_cb, s);
	s->waiter.log = sess_waiter_log;
	if (pool_welcome_ready(spool_pool(s->sp)))
		sess_send_welcome(s);
	else
		sess_wait_welcome(s);
}

void
sess_release_counts(struct session *s)
{
	spool_client_release(s, &s->counted_global, &s->counted_db, &s->counted_user);
}
