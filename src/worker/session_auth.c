/*
 * session_auth.c - client authentication: trust, any, plain, md5, scram-sha-256 (server-first
 * SCRAM, channel binding refused), hba (auth_hba_file), secrets from the auth_file or from
 * auth_query run as auth_user on a pooled link of the target server.
 *
 * Unknown users get a mock exchange that fails with the same message as a wrong password, so
 * user names cannot be probed; an unknown database is reported only after authentication.
 * Entry points: sess_auth_start(), sess_auth_on_msg(), sess_auth_cleanup(); the auth_query
 * link callback lives here too. The hashing is in src/proto (auth.h, scram.h).
 */
#include "neki/base.h"

#include <netinet/in.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/event.h>

#include "neki/admin_relay.h"
#include "neki/auth.h"
#include "neki/log.h"
#include "neki/pktbuf.h"
#include "neki/proto.h"
#include "neki/tls.h"
#include "session_int.h"

/* Worker-wide caches, reloaded when the configuration object changes. */
static struct auth_file *af_cache;	/* owned */
static struct hba *hba_cache;		/* owned */
static struct ident_map *idm_cache;	/* owned: auth_ident_file */
static struct cfg *auth_cache_cfg;	/* counted reference: what the caches were loaded for */

static void
sess_auth_caches_free(void)
{
	auth_file_free(af_cache);
	hba_free(hba_cache);
	ident_map_free(idm_cache);
	af_cache = NULL;
	hba_cache = NULL;
	idm_cache = NULL;
	if (auth_cache_cfg != NULL)
		cfg_unref(auth_cache_cfg);
	auth_cache_cfg = NULL;
}

void
sess_auth_reload(void)
{
	sess_auth_caches_free();
}

static void
sess_hba_warn(void *arg, int line, const char *reason)
{
	log_warn("%s:%d: %s", (const char *)arg, line, reason);
}

/* Make the caches match <c>: the auth_file and the hba file it names. */
static void
sess_auth_caches_load(const struct cfg *c)
{
	struct nk_error err;

	if (auth_cache_cfg == c)
		return;
	sess_auth_caches_free();
	auth_cache_cfg = (struct cfg *)c;
	cfg_ref(auth_cache_cfg);
	if (c->auth.auth_file[0] != '\0') {
		af_cache = auth_file_load(c->auth.auth_file, &err);
		if (af_cache == NULL)
			log_warn("could not load auth_file: %s", err.message);
		else if (af_cache->broken_line > 0)
			log_warn("broken auth file: %s line %d", c->auth.auth_file, af_cache->broken_line);
	}
	if (c->auth.auth_hba_file[0] != '\0') {
		hba_cache = hba_load(c->auth.auth_hba_file, sess_hba_warn, c->auth.auth_hba_file, &err);
		if (hba_cache == NULL)
			log_warn("could not load auth_hba_file: %s", err.message);
	}
	if (c->auth.auth_ident_file[0] != '\0') {
		idm_cache = ident_map_load(c->auth.auth_ident_file, sess_hba_warn, c->auth.auth_ident_file,
					   &err);
		if (idm_cache == NULL)
			log_warn("could not load auth_ident_file: %s", err.message);
	}
}

/* The auth_file secret of <user>, or NULL (borrowed: valid until the next reload). */
const char *
sess_auth_file_secret(const struct cfg *c, const char *user)
{
	sess_auth_caches_load(c);
	return af_cache != NULL ? auth_file_find(af_cache, user) : NULL;
}

void
sess_auth_cleanup(struct session *s)
{
	if (s->auth.scram_active)
		scram_server_cleanup(&s->auth.scram);
	s->auth.scram_active = false;
}

/* ---- failures ---- */

static void
sess_auth_fail(struct session *s, const char *reason)
{
	struct nk_error err;

	auth_error_password_failed(&err, s->user);
	err.severity = NK_SEV_FATAL;
	sess_close(s, reason, &err);
}

/* A SCRAM exchange failed (wrong password, unknown user, unusable secret): pgbouncer's text. */
static void
sess_scram_fail(struct session *s)
{
	struct nk_error err;

	nk_error_set(&err, ERRCODE_INVALID_PASSWORD, "SASL authentication failed");
	err.severity = NK_SEV_FATAL;
	sess_close(s, "SASL authentication failed", &err);
}

static void
sess_auth_trust_fail(struct session *s)
{
	struct nk_error err;

	auth_error_trust_failed(&err);
	sess_close(s, err.message, &err);
}

/* ---- method choice ---- */

static enum cfg_auth_type
sess_hba_to_auth(enum hba_method m)
{
	switch (m) {
	case HBA_TRUST: return CFG_AUTH_TRUST;
	case HBA_PLAIN: return CFG_AUTH_PLAIN;
	case HBA_MD5: return CFG_AUTH_MD5;
	case HBA_SCRAM: return CFG_AUTH_SCRAM;
	case HBA_CERT: return CFG_AUTH_CERT;
	case HBA_PEER: return CFG_AUTH_PEER;
	case HBA_REJECT:
	case HBA_NO_MATCH:
		break;
	}
	return CFG_AUTH_REJECT;
}

/* auth_type=hba: the first matching rule's method; false (closed) on reject / no match. */
static bool
sess_hba_method(struct session *s, enum cfg_auth_type *out)
{
	struct hba_conn hc = { .db = s->dbname, .user = s->user, .is_unix = s->from.is_unix,
			       .is_tls = tls_sbuf_is_tls(&s->sb) };
	enum hba_method m = HBA_NO_MATCH;
	const char *map = NULL;
	struct nk_error err;

	sess_auth_caches_load(s->cfg);
	if (s->from.peer.ss_family == AF_INET) {
		hc.family = AF_INET;
		memcpy(hc.addr, &((struct sockaddr_in *)&s->from.peer)->sin_addr, 4);
	} else if (s->from.peer.ss_family == AF_INET6) {
		hc.family = AF_INET6;
		memcpy(hc.addr, &((struct sockaddr_in6 *)&s->from.peer)->sin6_addr, 16);
	}
	if (hba_cache != NULL)
		m = hba_match(hba_cache, &hc, &map);
	snprintf(s->auth.hba_map, sizeof(s->auth.hba_map), "%s", map != NULL ? map : "");
	*out = sess_hba_to_auth(m);
	if (*out != CFG_AUTH_REJECT)
		return true;
	/* the reason in Postgres' words in the log; the client gets pgbouncer's */
	auth_error_hba_reject(&err, s->from.is_unix ? "[local]" : s->from.addr, s->user, s->dbname,
			      hc.is_tls, m == HBA_REJECT);
	sess_log(s, LOG_LVL_INFO, "%s", err.message);
	sess_fatal(s, m == HBA_REJECT ? "login rejected" : "no authentication method is found");
	return false;
}

/* ---- sending requests ---- */

static void
sess_send_or_close(struct session *s, struct pktbuf *pb)
{
	if (!sess_send_pb(s, pb))
		sess_close(s, "failed to send auth req", NULL);
}

static void
sess_request_password(struct session *s)
{
	struct pktbuf pb;

	pktbuf_init(&pb, 32);
	if (s->auth_method == CFG_AUTH_MD5) {
		if (!scram_random_bytes(s->auth.md5_salt, sizeof(s->auth.md5_salt))) {
			sess_fatal(s, "could not generate random salt");
			pktbuf_cleanup(&pb);
			return;
		}
		pktbuf_write_auth_md5(&pb, s->auth.md5_salt);
	} else {
		pktbuf_write_auth_cleartext(&pb);
	}
	s->auth_step = SESS_AUTH_PASSWORD;
	sess_send_or_close(s, &pb);
}

static void
sess_request_sasl(struct session *s)
{
	static const char *const mechs[] = { SCRAM_MECHANISM };
	struct pktbuf pb;

	pktbuf_init(&pb, 64);
	pktbuf_write_auth_sasl(&pb, mechs, 1);
	s->auth_step = SESS_AUTH_SASL_INIT;
	sess_send_or_close(s, &pb);
}

/* ---- the exchange ---- */

/* auth_type=any: the database must force a user; the client's user name is ignored. */
static void
sess_auth_any(struct session *s)
{
	if (s->db != NULL && (s->db->user == NULL || s->db->user[0] == '\0')) {
		sess_log(s, LOG_LVL_ERROR, "auth_type=any requires forced user");
		sess_fatal(s, "bouncer config error");
		return;
	}
	sess_login_done(s);
}

/*
 * auth_type=cert (net/tls.c): the client certificate's CN must be the user name, as
 * pgbouncer; each failure is logged with pgbouncer's reason.
 */
static void
sess_auth_cert(struct session *s)
{
	const char *why = NULL;
	struct nk_error err;
	bool mapped = true;
	char cn[256];

	if (!tls_sbuf_is_tls(&s->sb))
		why = "TLS connection required";
	else if (!tls_sbuf_peer_cn(&s->sb, cn, sizeof(cn)))
		why = "TLS client certificate required";
	else if (s->user_unknown)
		why = "TLS certificate name mismatch";
	else if (s->auth.hba_map[0] != '\0')	/* map=: the auth_ident_file decides */
		mapped = ident_map_allows(idm_cache, s->auth.hba_map, cn, s->user);
	else if (strcmp(cn, s->user) != 0)
		why = "TLS certificate name mismatch";
	if (why == NULL && mapped) {
		sess_login_done(s);
		return;
	}
	if (!mapped)
		sess_log(s, LOG_LVL_ERROR, "ident map: %s does not have a match", s->auth.hba_map);
	else
		sess_log(s, LOG_LVL_ERROR, "%s", why);
	nk_error_set(&err, ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION,
		     "certificate authentication failed");
	err.severity = NK_SEV_FATAL;
	sess_close(s, "certificate authentication failed", &err);
}

/*
 * hba method peer (Unix sockets): the peer's OS user (SO_PEERCRED) must be the user asked
 * for, or map to it in auth_ident_file (map=), as pgbouncer checks it.
 */
static void
sess_auth_peer(struct session *s)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	struct passwd pw, *res = NULL;
	char buf[1024];
	bool ok = false;

	if (s->from.is_unix && !s->user_unknown &&
	    getsockopt(sbuf_fd(&s->sb), SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 &&
	    getpwuid_r(cred.uid, &pw, buf, sizeof(buf), &res) == 0 && res != NULL) {
		if (s->auth.hba_map[0] == '\0')
			ok = strcmp(pw.pw_name, s->user) == 0;
		else if (!(ok = ident_map_allows(idm_cache, s->auth.hba_map, pw.pw_name, s->user)))
			sess_log(s, LOG_LVL_ERROR, "ident map %s cannot be matched", s->auth.hba_map);
	}
	if (ok)
		sess_login_done(s);
	else
		sess_fatal(s, "unix socket login rejected");
}

/* Run the chosen method. */
static void
sess_auth_run(struct session *s)
{
	enum cfg_auth_type m = s->auth_method;

	if (m == CFG_AUTH_MD5 && s->secret != NULL &&
	    auth_secret_kind(s->secret) == AUTH_SECRET_SCRAM)
		m = s->auth_method = CFG_AUTH_SCRAM;
	switch (m) {
	case CFG_AUTH_ANY:
		sess_auth_any(s);
		break;
	case CFG_AUTH_TRUST:
		if (s->user_unknown)	/* pgbouncer: trust still needs a known user */
			sess_auth_trust_fail(s);
		else
			sess_login_done(s);
		break;
	case CFG_AUTH_PLAIN:
	case CFG_AUTH_MD5:
		sess_request_password(s);
		break;
	case CFG_AUTH_SCRAM:
		sess_request_sasl(s);
		break;
	case CFG_AUTH_CERT:
		sess_auth_cert(s);
		break;
	case CFG_AUTH_PEER:
		sess_auth_peer(s);
		break;
	case CFG_AUTH_HBA:
	case CFG_AUTH_REJECT:
		sess_fatal(s, "login rejected");
		break;
	}
}

static const char *
sess_auth_user_name(const struct session *s)
{
	if (s->db != NULL && s->db->auth_user != NULL && s->db->auth_user[0] != '\0')
		return s->db->auth_user;
	return s->cfg->auth.auth_user[0] != '\0' ? s->cfg->auth.auth_user : NULL;
}

static void sess_authq_start(struct session *s, const char *auth_user);

void
sess_auth_start(struct session *s)
{
	const char *secret;
	const char *auth_user;

	if (sess_console_local_admin(s)) {	/* pgbouncer's rule, whatever auth_type */
		sess_login_done(s);
		return;
	}
	s->auth_method = s->cfg->auth.auth_type;
	if (s->auth_method == CFG_AUTH_HBA && !sess_hba_method(s, &s->auth_method))
		return;
	if (s->auth_method == CFG_AUTH_ANY) {
		sess_auth_run(s);
		return;
	}
	secret = sess_auth_file_secret(s->cfg, s->user);
	if (secret != NULL) {
		s->secret = strdup(secret);
		if (s->secret == NULL) {
			sess_fatal(s, "out of memory");
			return;
		}
	} else {
		auth_user = sess_auth_user_name(s);
		if (auth_user != NULL && (!s->db_missing || s->adm.console)) {
			sess_authq_start(s, auth_user);
			return;
		}
		/* pgbouncer: a [users] entry alone (no auth_file line) is no known user */
		sess_log(s, LOG_LVL_INFO, "no such user: %s", s->user);
		s->user_unknown = true;
	}
	sess_auth_run(s);
}

/* PasswordMessage for plain / md5. */
static void
sess_on_password(struct session *s, const uint8_t *body, size_t len)
{
	const char *pw;
	struct nk_error err;
	bool ok;

	if (!proto_parse_password(body, len, &pw, &err)) {
		err.severity = NK_SEV_FATAL;
		sess_close(s, err.message, &err);
		return;
	}
	if (pw[0] == '\0') {
		sess_fatal(s, "empty password returned by client");
		return;
	}
	if (s->user_unknown || s->secret == NULL || s->secret[0] == '\0')
		ok = false;
	else if (s->auth_method == CFG_AUTH_MD5)
		ok = auth_md5_verify(s->secret, s->user, s->auth.md5_salt, pw);
	else
		ok = auth_plain_verify(s->secret, s->user, pw);
	if (ok)
		sess_login_done(s);
	else
		sess_auth_fail(s, "password authentication failed");
}

/* SASLInitialResponse. */
static void
sess_on_sasl_initial(struct session *s, const uint8_t *body, size_t len)
{
	struct proto_sasl_initial_msg m;
	struct nk_error err;
	struct pktbuf pb;
	const char *first;

	if (!proto_parse_sasl_initial(body, len, &m, &err)) {
		err.severity = NK_SEV_FATAL;
		sess_close(s, err.message, &err);
		return;
	}
	if (strcmp(m.mechanism, SCRAM_MECHANISM) != 0) {
		sess_fatal(s, "client selected an invalid SASL authentication mechanism");
		return;
	}
	if (!s->user_unknown && s->secret != NULL &&
	    auth_secret_kind(s->secret) == AUTH_SECRET_MD5) {
		sess_log(s, LOG_LVL_ERROR, "SCRAM authentication failed: user has MD5 secret");
		sess_scram_fail(s);
		return;
	}
	scram_server_init(&s->auth.scram, s->user, s->user_unknown ? NULL : s->secret,
			  s->cfg->pool.scram_iterations);
	s->auth.scram_active = true;
	if (m.data == NULL || !scram_server_client_first(&s->auth.scram, m.data, m.len, &err)) {
		if (m.data == NULL)
			nk_error_set(&err, ERRCODE_PROTOCOL_VIOLATION,
				     "malformed SCRAM message (empty message)");
		err.severity = NK_SEV_FATAL;
		sess_close(s, "SASL authentication failed", &err);
		return;
	}
	first = scram_server_first_msg(&s->auth.scram);
	pktbuf_init(&pb, 128);
	pktbuf_write_auth_sasl_continue(&pb, first, strlen(first));
	s->auth_step = SESS_AUTH_SASL_CONT;
	sess_send_or_close(s, &pb);
}

/* SASLResponse (client-final). */
static void
sess_on_sasl_response(struct session *s, const uint8_t *body, size_t len)
{
	struct nk_error err;
	struct pktbuf pb;
	const char *final;

	if (!scram_server_client_final(&s->auth.scram, body, len, &err)) {
		/* not a wrong password: a malformed message */
		if (strcmp(err.sqlstate, ERRCODE_INVALID_PASSWORD) != 0) {
			err.severity = NK_SEV_FATAL;
			sess_close(s, "SASL authentication failed", &err);
			return;
		}
		sess_log(s, LOG_LVL_ERROR, "password authentication failed");
		sess_scram_fail(s);
		return;
	}
	final = scram_server_final_msg(&s->auth.scram);
	pktbuf_init(&pb, 128);
	pktbuf_write_auth_sasl_final(&pb, final, strlen(final));
	if (!sess_send_pb(s, &pb)) {
		sess_close(s, "failed to send auth req", NULL);
		return;
	}
	s->auth.scram_keys = s->auth.scram.keys;
	sess_auth_cleanup(s);
	sess_login_done(s);
}

void
sess_auth_on_msg(struct session *s, const uint8_t *body, size_t len)
{
	switch (s->auth_step) {
	case SESS_AUTH_PASSWORD:
		sess_on_password(s, body, len);
		break;
	case SESS_AUTH_SASL_INIT:
		sess_on_sasl_initial(s, body, len);
		break;
	case SESS_AUTH_SASL_CONT:
		sess_on_sasl_response(s, body, len);
		break;
	case SESS_AUTH_STARTUP:
	case SESS_AUTH_DONE:
		sess_fatal(s, "client password pkt before startup packet");
		break;
	}
}

/* ---- auth_query ---- */

/* Send Parse/Bind/Execute/Sync of auth_query with $1 = the user name. */
static bool
sess_authq_send(struct session *s, struct link *l)
{
	const char *q = s->db != NULL && s->db->auth_query != NULL && s->db->auth_query[0] != '\0'
			? s->db->auth_query : s->cfg->auth.auth_query;
	struct proto_value v = { (const uint8_t *)s->user, (uint32_t)strlen(s->user) };
	struct proto_bind_spec b = { .portal = "", .stmt = "", .params = &v, .nparams = 1 };
	struct pktbuf pb;
	bool ok;

	pktbuf_init(&pb, 256);
	pktbuf_write_parse(&pb, "", q, NULL, 0);
	pktbuf_write_bind(&pb, &b);
	pktbuf_write_execute(&pb, "", 0);
	pktbuf_write_sync(&pb);
	ok = !pktbuf_failed(&pb) && link_send(l, pb.buf, pb.len);
	pktbuf_cleanup(&pb);
	return ok;
}

/*
 * A DataRow of auth_query: (name, secret). A NULL name is no row (a lookup function answering
 * NULLs for a missing user); a NULL secret is a known user no password can match.
 */
static bool
sess_authq_row(struct session *s, const uint8_t *body, size_t len)
{
	struct proto_datarow_msg m;
	struct proto_value v[2];
	struct nk_error err;

	if (!proto_parse_data_row(body, len, &m, &err) || m.ncols != 2 ||
	    proto_datarow_values(&m, v, 2) != 2)
		return false;
	if (v[0].p == NULL)
		return true;
	free(s->secret);
	s->secret = NULL;
	s->authq_found = true;
	s->user_unknown = false;
	if (v[1].p == NULL)
		return true;	/* no login: secret stays NULL, every password fails */
	s->secret = strndup((const char *)v[1].p, v[1].len);
	return s->secret != NULL;
}

/*
 * auth_query finished (from the loop, once its ReadyForQuery is consumed): give the link
 * back and authenticate with what was found. As in pgbouncer, a user without a row ends with
 * "no such user" (there is no mock exchange on this path).
 */
void
sess_authq_finish(struct session *s)
{
	struct link *l = s->authq_link;

	s->authq_link = NULL;
	if (l != NULL)
		pool_release(l, NULL);
	if (!s->authq_found) {
		if (s->cfg->log.log_connections)
			sess_log(s, LOG_LVL_INFO, "login failed: db=%s", s->dbname);
		sess_fatal(s, "no such user");
		return;
	}
	sess_set_state(s, SESS_ST_LOGIN);
	sbuf_continue(&s->sb);
	sess_auth_run(s);
}

/* The server refused auth_query: log its error, drop the link, and the client (pgbouncer). */
static void
sess_authq_error(struct session *s, struct link *l, const struct sbuf_pkt *pkt)
{
	struct proto_server_error se;
	struct nk_error err;

	if (proto_parse_server_error(pkt->data + 5, pkt->len - 5, &se, &err)) {
		proto_server_error_to_nk(&se, &err);
		sess_log(s, LOG_LVL_ERROR, "error in auth_query: %s %s",
			 se.severity != NULL ? se.severity : "ERROR", err.message);
	}
	s->authq_link = NULL;
	link_close(l, true, "error response from auth_query");
	sess_fatal(s, "bouncer config error");
}

/* The auth_query link: rows, then ReadyForQuery. */
static bool
sess_authq_link_cb(struct link *l, enum link_event ev, const struct sbuf_pkt *pkt,
		   const struct nk_error *err, void *ctx)
{
	struct session *s = ctx;

	if (ev == LINK_EV_BROKEN) {
		s->authq_link = NULL;
		sess_fatal(s, "server conn crashed?");
		return false;
	}
	if (pkt->avail < pkt->len) {
		if (sbuf_hold(link_sbuf(l), pkt->len))
			return true;
		sbuf_skip(link_sbuf(l), pkt->len);
		return true;
	}
	if (pkt->type == 'E') {
		sess_authq_error(s, l, pkt);
		return false;
	}
	sbuf_skip(link_sbuf(l), pkt->len);
	if (pkt->type == 'D' && !sess_authq_row(s, pkt->data + 5, pkt->len - 5)) {
		sess_log(s, LOG_LVL_WARNING, "bad auth_query response row");
	} else if (pkt->type == 'Z') {
		/* released from the loop: the link is not at rest inside its own callback */
		s->release_pending = true;
		event_active(s->ev_release, EV_TIMEOUT, 0);
	}
	return true;
}

/* The auth_user's pool answered the acquire. */
static void
sess_authq_ready(struct pool_waiter *w, struct link *l, const struct nk_error *err)
{
	struct session *s = w->ctx;
	struct nk_error e;

	if (l == NULL) {
		e = *err;
		e.severity = NK_SEV_FATAL;
		sess_close(s, e.message, &e);
		return;
	}
	s->authq_link = l;
	s->authq_found = false;
	if (!sess_authq_send(s, l)) {
		s->authq_link = NULL;
		pool_release(l, "unable to send auth_query");
		sess_fatal(s, "unable to send auth_query");
	}
}

/*
 * The database auth_query runs in: auth_dbname (the database's, then the global one), else
 * the client's; one not in [databases] is served by "*" as pgbouncer registers it. <name>
 * gets its name; NULL when none serves it (or it is the console, checked by the caller).
 */
static const struct cfg_database *
sess_authq_db(struct session *s, const char **name)
{
	const char *n = s->db != NULL && s->db->auth_dbname != NULL && s->db->auth_dbname[0] ?
			s->db->auth_dbname : s->cfg->auth.auth_dbname;
	const struct cfg_database *d;

	if (n == NULL || n[0] == '\0') {
		*name = s->dbname;
		return s->db;
	}
	*name = n;
	d = cfg_database_find(s->cfg, n);
	return d != NULL ? d : cfg_database_auto(s->cfg);
}

/* Can auth_query run in <name>? Refuses the client (pgbouncer's messages) when not. */
static bool
sess_authq_db_usable(struct session *s, const struct cfg_database *adb, const char *name)
{
	char msg[256];

	if (arelay_is_console_db(name)) {
		sess_log(s, LOG_LVL_ERROR, "cannot use the reserved \"%s\" database as an "
			 "auth_dbname", name);
		sess_fatal(s, "bouncer config error");
		return false;
	}
	if (adb == NULL) {
		sess_log(s, LOG_LVL_ERROR, "authentication database \"%s\" is not configured.",
			 name);
		sess_fatal(s, "bouncer config error");
		return false;
	}
	if (sctl_db_disabled(name)) {
		snprintf(msg, sizeof(msg), "authentication database \"%s\" is disabled", name);
		sess_fatal(s, msg);
		return false;
	}
	return true;
}

static void
sess_authq_start(struct session *s, const char *auth_user)
{
	const struct cfg_database *adb;
	const char *adbname;
	struct nk_error err;
	struct link *l;

	adb = sess_authq_db(s, &adbname);
	if (!sess_authq_db_usable(s, adb, adbname))
		return;
	s->authq_sp = spool_get_or_create(s->cfg, adb, adbname, auth_user,
					  sess_auth_file_secret(s->cfg, auth_user), &err);
	if (s->authq_sp == NULL) {
		err.severity = NK_SEV_FATAL;
		sess_close(s, err.message, &err);
		return;
	}
	sess_set_state(s, SESS_ST_AUTHQ);
	sbuf_pause(&s->sb);
	pool_waiter_init(&s->waiter, sess_authq_ready, sess_authq_link_cb, s);
	switch (pool_acquire(spool_pool(s->authq_sp), &s->waiter, &l, &err)) {
	case POOL_GOT:
		sess_authq_ready(&s->waiter, l, NULL);
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
