/*
 * link_auth.c - a link authenticating to its server as a client: AuthenticationOk,
 * cleartext password, md5 and SCRAM-SHA-256 (the hashing lives in src/proto: neki/auth.h,
 * neki/scram.h).
 *
 * Entry point: link_auth_answer(), called by link.c for every 'R' message during LOGIN.
 * The secret comes from the pool: a plain password, an md5 secret (answers md5 only) or a
 * SCRAM secret (answers SCRAM only, with the ClientKey/ServerKey a client's SCRAM login
 * recovered: pgbouncer's pass-through). Failures use pgbouncer's wording,
 * "server login failed: <why>".
 */
#include "neki/base.h"

#include <stdlib.h>
#include <string.h>

#include "neki/auth.h"
#include "neki/error.h"
#include "neki/log.h"
#include "neki/pktbuf.h"
#include "neki/proto.h"
#include "neki/scram.h"
#include "pool_int.h"

/* SCRAM exchange state of one link during LOGIN. */
struct link_scram {
	struct scram_client c;	/* owned strings inside; scram_client_cleanup() */
};

/* The error a client sees when the link cannot log in for a reason of our own. */
static bool
link_auth_fail(struct nk_error *err, const char *what)
{
	return nk_error_set(err, ERRCODE_PROTOCOL_VIOLATION, "server login failed: %s", what);
}

/* Send a message built in <pb> (and free it). */
static bool
link_auth_send(struct link *l, struct pktbuf *pb, struct nk_error *err)
{
	bool ok = !pktbuf_failed(pb) && sbuf_send(&l->sb, pb->buf, pb->len);

	pktbuf_cleanup(pb);
	return ok ? true : link_auth_fail(err, "could not send authentication response");
}

/* Send a PasswordMessage carrying <text>. */
static bool
link_auth_send_password(struct link *l, const char *text, struct nk_error *err)
{
	struct pktbuf pb;

	pktbuf_init(&pb, 64);
	pktbuf_write_password(&pb, text);
	return link_auth_send(l, &pb, err);
}

/* The pool's secret, or NULL with <err> set when there is none. */
static const char *
link_auth_secret(struct link *l, struct nk_error *err)
{
	const char *pw = l->pool->password;

	if (pw == NULL || pw[0] == '\0') {
		link_auth_fail(err, "no password configured");
		return NULL;
	}
	return pw;
}

/* AuthenticationCleartextPassword: only a plain password can answer it. */
static bool
link_auth_cleartext(struct link *l, struct nk_error *err)
{
	const char *pw = link_auth_secret(l, err);

	link_log(l, LOG_LVL_DEBUG, "S: req cleartext password");
	if (pw == NULL)
		return false;
	if (auth_secret_kind(pw) != AUTH_SECRET_PLAIN)
		return link_auth_fail(err, "wrong password type");
	return link_auth_send_password(l, pw, err);
}

/* AuthenticationMD5Password: from a plain password or an md5 secret. */
static bool
link_auth_md5(struct link *l, const struct proto_auth_msg *m, struct nk_error *err)
{
	const char *pw = link_auth_secret(l, err);
	char resp[AUTH_MD5_LEN + 1];

	link_log(l, LOG_LVL_DEBUG, "S: req md5-crypted psw");
	if (pw == NULL)
		return false;
	if (m->len < 4)
		return nk_error_set(err, ERRCODE_PROTOCOL_VIOLATION,
				    "server login failed: bad md5 request");
	if (!auth_md5_response(pw, l->pool->user_name, m->data, resp))
		return link_auth_fail(err, "wrong password type");
	return link_auth_send_password(l, resp, err);
}

/* Start SCRAM: from a plain password, or a SCRAM secret plus pass-through keys. */
static bool
link_auth_sasl_start(struct link *l, const struct proto_auth_msg *m, struct nk_error *err)
{
	const char *pw = link_auth_secret(l, err);
	const struct scram_keys *keys = &l->pool->scram_keys;
	const char *first;
	struct pktbuf pb;
	bool ok;

	link_log(l, LOG_LVL_DEBUG, "S: req SASL");
	if (pw == NULL)
		return false;
	if (l->scram != NULL)
		return nk_error_set(err, ERRCODE_PROTOCOL_VIOLATION,
				    "protocol error: duplicate AuthenticationSASL "
				    "message from server");
	if (!proto_auth_sasl_has(m, SCRAM_MECHANISM))
		return link_auth_fail(err, "none of the server's SASL authentication mechanisms "
				      "are supported");
	switch (auth_secret_kind(pw)) {
	case AUTH_SECRET_MD5:
		return link_auth_fail(err, "wrong password type");
	case AUTH_SECRET_SCRAM:
		if (!keys->valid) {
			/* pgbouncer logs the reason and tells the client the short one */
			link_log(l, LOG_LVL_ERROR, "cannot do SCRAM authentication: password is "
				 "SCRAM secret but client authentication did not provide SCRAM "
				 "keys");
			return link_auth_fail(err, "wrong password type");
		}
		break;
	case AUTH_SECRET_PLAIN:
		break;
	}
	l->scram = calloc(1, sizeof(*l->scram));
	if (l->scram == NULL)
		return link_auth_fail(err, "out of memory");
	ok = auth_secret_kind(pw) == AUTH_SECRET_SCRAM ?
	     scram_client_init_keys(&l->scram->c, keys, "", NULL) :
	     scram_client_init_password(&l->scram->c, pw, "", NULL);
	if (!ok)
		return link_auth_fail(err, "could not start SCRAM exchange");
	first = scram_client_first_msg(&l->scram->c);
	pktbuf_init(&pb, 128);
	pktbuf_write_sasl_initial(&pb, SCRAM_MECHANISM, first, strlen(first));
	return link_auth_send(l, &pb, err);
}

/* AuthenticationSASLContinue: server-first in, client-final out. */
static bool
link_auth_sasl_continue(struct link *l, const struct proto_auth_msg *m, struct nk_error *err)
{
	const char *final;
	struct pktbuf pb;

	link_log(l, LOG_LVL_DEBUG, "S: SASL cont");
	if (l->scram == NULL)
		return nk_error_set(err, ERRCODE_PROTOCOL_VIOLATION,
				    "server login failed: unexpected SASL message");
	if (!scram_client_server_first(&l->scram->c, m->data, m->len, err))
		return false;
	final = scram_client_final_msg(&l->scram->c);
	pktbuf_init(&pb, 256);
	pktbuf_write_sasl_response(&pb, final, strlen(final));
	return link_auth_send(l, &pb, err);
}

/* AuthenticationSASLFinal: the server proves it knew the secret too. */
static bool
link_auth_sasl_final(struct link *l, const struct proto_auth_msg *m, struct nk_error *err)
{
	link_log(l, LOG_LVL_DEBUG, "S: SASL final");
	if (l->scram == NULL)
		return nk_error_set(err, ERRCODE_PROTOCOL_VIOLATION,
				    "server login failed: unexpected SASL message");
	if (!scram_client_server_final(&l->scram->c, m->data, m->len, err))
		return link_auth_fail(err, "invalid server signature");
	return true;
}

/*
 * Answer one Authentication message. AuthenticationOk sets *<done>. Methods neki cannot
 * answer (Kerberos, GSS, SSPI) fail with a message naming the method code.
 */
bool
link_auth_answer(struct link *l, const uint8_t *body, size_t len, bool *done,
		 struct nk_error *err)
{
	struct proto_auth_msg m;

	*done = false;
	if (!proto_parse_auth(body, len, &m, err))
		return false;
	switch (m.code) {
	case PROTO_AUTH_OK:
		link_log(l, LOG_LVL_DEBUG, "S: auth ok");
		*done = true;
		return true;
	case PROTO_AUTH_CLEARTEXT:
		return link_auth_cleartext(l, err);
	case PROTO_AUTH_MD5:
		return link_auth_md5(l, &m, err);
	case PROTO_AUTH_SASL:
		return link_auth_sasl_start(l, &m, err);
	case PROTO_AUTH_SASL_CONTINUE:
		return link_auth_sasl_continue(l, &m, err);
	case PROTO_AUTH_SASL_FINAL:
		return link_auth_sasl_final(l, &m, err);
	default:
		break;
	}
	return nk_error_set(err, ERRCODE_PROTOCOL_VIOLATION,
			    "server login failed: unsupported authentication "
			    "method %d", (int)m.code);
}

/* Free the SCRAM state (after login, or when the link closes). */
void
link_auth_cleanup(struct link *l)
{
	if (l->scram == NULL)
		return;
	scram_client_cleanup(&l->scram->c);
	free(l->scram);
	l->scram = NULL;
}
