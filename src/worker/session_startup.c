/*
 * session_startup.c - the LOGIN phase up to authentication, and the welcome after it.
 *
 * The startup packet: SSLRequest (TLS or 'N') and GSSENCRequest ('N'), each once (a second
 * one is refused as Postgres does), a length out of bounds refused with 08P01, CancelRequest
 * handed to session_cancel.c, StartupMessage parameters checked as pgbouncer does (tracked
 * parameters, `options`, ignore_startup_parameters, `_pq_.` negotiation),
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
#include "neki/plan.h"
#include "neki/plan_settings.h"
#include "neki/proto.h"
#include "neki/shm.h"
#include "neki/shm_dbstats.h"
#include "neki/tls.h"
#include "neki/topology_image.h"
#include "neki/proc.h"
#include "neki/exec.h"
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
	return sess_list_has(s->cfg->pool.ignore_startup_parameters, name);
}

/* Append <name>\0<value>\0 to the owned buffer *<buf> of *<len> bytes; false on no memory. */
static bool
sess_pairs_add(uint8_t **buf, size_t *len, const char *name, const char *value)
{
	size_t nl = strlen(name) + 1, vl = strlen(value) + 1;
	uint8_t *b = realloc(*buf, *len + nl + vl);

	if (b == NULL)
		return false;
	memcpy(b + *len, name, nl);
	memcpy(b + *len + nl, value, vl);
	*buf = b;
	*len += nl + vl;
	return true;
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
	if (plan_neki_is_setting(name)) {	/* for the route (sess_neki_options) */
		sess_log(s, LOG_LVL_DEBUG, "got __neki setting from options: %s=%s", name, value);
		return sess_pairs_add(&s->neki_opts, &s->neki_opts_len, name, value) ? true :
		       nk_error_oom(err);
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

	if (s->cfg->pool.application_name_add_host) {
		snprintf(buf, sizeof(buf), "%s - %s:%d", app != NULL ? app : "app", s->from.addr,
			 s->from.port);
		app = buf;
	}
	if (app == NULL)
		return true;
	return varcache_set(&s->vars, "application_name", app);
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
		return nk_error_set(err, ERRCODE_PROTOCOL_VIOLATION,
				    "unsupported startup parameter: %s", n);
	}
	return sess_pairs_add(&s->repl_startup, &s->repl_startup_len, p->name, p->value) ? true :
	       nk_error_oom(err);
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
	return nk_error_set(err, ERRCODE_PROTOCOL_VIOLATION,
			    "unsupported startup parameter: %s", n);
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
		return nk_error_oom(err);
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

const struct cfg_database *
sess_db_entry(const struct cfg *c, const char *name)
{
	const struct cfg_database *db = cfg_database_find(c, name);

	return db != NULL ? db : cfg_database_auto(c);
}

static void
sess_refuse(struct session *s, struct nk_error *err)
{
	err->severity = NK_SEV_FATAL;
	sess_close(s, err->message, err);
}

/* sess_startup_bad_length: see session_int.h. Postgres only logs it and closes; the
 * client is told why (pgbouncer answers a startup length it cannot read with 08P01 too). */
void
sess_startup_bad_length(struct session *s)
{
	struct nk_error err;

	(void)proto_startup_bad_length(&err);
	sess_refuse(s, &err);
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

	s->ssl_asked = true;
	if (!tls_client_offer(s->from.is_unix)) {
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

	if (!tls_client_offer(s->from.is_unix) || tls_sbuf_is_tls(&s->sb)) {
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

	if (!tls_client_required(s->from.is_unix) || tls_sbuf_is_tls(&s->sb))
		return false;
	nk_error_set(&err, ERRCODE_PROTOCOL_VIOLATION, "SSL required");
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
		nk_error_set(&err, ERRCODE_CANNOT_CONNECT_NOW,
			     "the database system is shutting down");
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
		nk_error_set(&err, ERRCODE_PROTOCOL_VIOLATION,
			     "database \"%s\" is disabled", s->dbname);
		sess_refuse(s, &err);
		return;
	}
	tls_sbuf_info(&s->sb, tls, sizeof(tls));
	if (s->cfg->log.log_connections)
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
	/* one negotiation of each kind, as Postgres (TLS, also direct TLS, counts as SSL) */
	if ((st.kind == PROTO_STARTUP_SSL && (s->ssl_asked || tls_sbuf_is_tls(&s->sb))) ||
	    (st.kind == PROTO_STARTUP_GSSENC && s->gss_asked)) {
		(void)proto_startup_refuse_repeat(&st, &err);
		sess_refuse(s, &err);
		return;
	}
	switch (st.kind) {
	case PROTO_STARTUP_SSL:
		sess_on_ssl_request(s);
		break;
	case PROTO_STARTUP_GSSENC:
		s->gss_asked = true;
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
		if (pkt->type == 0)
			sess_startup_bad_length(s);
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

enum cfg_pool_mode
sess_pool_mode(const struct session *s)
{
	if (s->ucfg != NULL && s->ucfg->pool_mode != CFG_POOL_UNSET)
		return s->ucfg->pool_mode;
	if (s->db->pool_mode != CFG_POOL_UNSET)
		return s->db->pool_mode;
	return s->cfg->pool.pool_mode;
}

const char *
sess_pool_password(const struct cfg *c, const struct cfg_database *db, const char *secret)
{
	if (db->user != NULL && db->user[0] != '\0') {
		/* a forced user without password= logs in with its auth_file secret */
		if (db->password != NULL && db->password[0] != '\0')
			return db->password;
		return sess_auth_file_secret(c, db->user);
	}
	if (db->password != NULL && db->password[0] != '\0')
		return db->password;
	return secret;
}

/* The password the pool logs into the server with (forced user's, then the user's secret). */
static const char *
sess_server_password(const struct session *s)
{
	return sess_pool_password(s->cfg, s->db, s->secret);
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
	const char *msg = s->cfg->auth.login_notify_message;
	struct nk_error notice;

	if (msg == NULL || msg[0] == '\0')
		return;
	nk_error_set(&notice, ERRCODE_SUCCESSFUL_COMPLETION, "%s", msg);
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
	s->tm.activity_us = sess_now_us();
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
	switch (pool_acquire_welcome(spool_pool(s->sp), &s->waiter, &l, &err)) {
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

bool
sess_db_is_sharded(const struct cfg_database *d)
{
	struct shm_topo_ref ref;
	bool named;

	if (d->topology)
		return true;
	if (strcmp(d->name, "*") == 0 || shm_topo_revision() == 0 || !shm_topo_pin(&ref))
		return false;
	named = topo_image_has_database(ref.data, d->name);
	shm_topo_unpin(&ref);
	return named;
}

/* The first __neki.* setting of <s>'s options that ignore_startup_parameters does not
 * name (neither it nor "options"); NULL when none. */
static const char *
sess_neki_unignored(const struct session *s)
{
	const char *name, *value;
	size_t pos = 0;

	if (sess_is_ignored(s, "options"))
		return NULL;
	while ((name = proto_pair_next(s->neki_opts, s->neki_opts_len, &pos, &value)) != NULL)
		if (!sess_is_ignored(s, name))
			return name;
	return NULL;
}

/* The [databases] key tx_mode of a routed session: its first __neki.tx_mode, taken as an
 * option before the client's (which win). False on no memory. */
static bool
sess_db_tx_mode(struct session *s)
{
	static const char *const names[] = { "multi", "single", "atomic" };
	uint8_t *own = NULL, *b;
	size_t len = 0;

	if (s->route == NULL || s->db->tx_mode <= 0 || s->db->tx_mode > 2)
		return true;
	if (!sess_pairs_add(&own, &len, "__neki.tx_mode", names[s->db->tx_mode]) ||
	    (b = realloc(own, len + s->neki_opts_len)) == NULL) {
		free(own);
		return false;
	}
	if (s->neki_opts_len > 0)
		memcpy(b + len, s->neki_opts, s->neki_opts_len);
	free(s->neki_opts);
	s->neki_opts = b;
	s->neki_opts_len += len;
	return true;
}

/*
 * The __neki.* settings of the startup options (after the [databases] key tx_mode's
 * value): applied to the route as their SET would be; a session that is not routed (a pass-through database) cannot honour them, and is
 * refused as for any other option it cannot take (unless ignore_startup_parameters names
 * it). False when the client was refused.
 */
static bool
sess_neki_options(struct session *s)
{
	struct nk_error err;
	const char *name;

	if (!sess_db_tx_mode(s)) {
		sess_fatal(s, "out of memory");
		return false;
	}
	if (s->neki_opts_len == 0)
		return true;
	if (s->route == NULL) {
		if ((name = sess_neki_unignored(s)) == NULL)
			return true;
		proto_options_unsupported(&err, name);
		nk_error_detail(&err, "__neki settings apply to the sessions of a sharded "
				"database; \"%s\" is served pass-through.", s->dbname);
	} else if (route_session_options(s->route, s->neki_opts, s->neki_opts_len, &err)) {
		return true;
	}
	sess_refuse(s, &err);
	return false;
}

void
sess_login_done(struct session *s)
{
	struct nk_error err;
	char msg[256];
	const char *pool_user;

	if (s->adm.console) {
		sess_console_start(s);
		return;
	}
	if (s->db_missing) {
		snprintf(msg, sizeof(msg), "no such database: %s", s->dbname);
		sess_fatal(s, msg);
		return;
	}
	pool_user = s->db->user != NULL && s->db->user[0] != '\0' ? s->db->user : s->user;
	s->sharded = sess_db_is_sharded(s->db);
	if (s->replication != PROTO_REPL_NONE && s->sharded) {
		nk_error_set(&err, ERRCODE_FEATURE_NOT_SUPPORTED,
			     "replication connections to a sharded database are not "
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
	if (s->auth.scram_keys.valid && sess_server_password(s) == s->secret)
		pool_set_scram_keys(spool_pool(s->sp), &s->auth.scram_keys);
	/* replication connections are always session-pooled (pgbouncer 1.23) */
	s->mode = s->replication != PROTO_REPL_NONE ? CFG_POOL_SESSION : sess_pool_mode(s);
	s->prep_on = s->mode != CFG_POOL_SESSION && s->cfg->pool.max_prepared_statements > 0;
	pool_client_attach(spool_pool(s->sp));
	spool_ref(s->sp);
	s->attached = true;
	if (s->sharded && !sess_route_start(s)) {	/* (held until routable) */
		sess_fatal(s, "out of memory");
		return;
	}
	s->stats->total_client_login_count++;	/* before any wait for a welcome */
	if (!sess_neki_options(s))
		return;
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
	session_console_release(&s->console_units);
}
