/*
 * login.c - answering a Postgres server's authentication requests.
 *
 * The state machine is driven by the server: each 'R' message is parsed with
 * proto_parse_auth() and answered from the credentials (see neki/login.h for
 * which secret serves which method). Kerberos, GSS and SSPI requests are refused.
 */
#include "neki/base.h"

#include "neki/login.h"

#include <string.h>

#include "neki/auth.h"
#include "neki/proto.h"

/* The error pgbouncer gives when the stored secret cannot serve the request. */
static bool
login_wrong_type(struct nk_error *err)
{
	return nk_error_set(err, ERRCODE_PROTOCOL_VIOLATION,
			    "server login failed: wrong password type");
}

/* Set up <l>. */
void
login_init(struct login *l, const char *user, const char *secret, const struct scram_keys *keys)
{
	memset(l, 0, sizeof(*l));
	l->user = user;
	l->secret = secret;
	if (keys)
		l->keys = *keys;
}

/* Free the SCRAM state, if any. */
void
login_cleanup(struct login *l)
{
	if (l->scram_active)
		scram_client_cleanup(&l->scram);
	l->scram_active = false;
}

static enum auth_secret_kind
login_kind(const struct login *l)
{
	return l->secret ? auth_secret_kind(l->secret) : AUTH_SECRET_PLAIN;
}

static bool
login_cleartext(struct login *l, struct pktbuf *out, struct nk_error *err)
{
	if (!l->secret || login_kind(l) != AUTH_SECRET_PLAIN)
		return login_wrong_type(err);
	pktbuf_write_password(out, l->secret);
	return true;
}

static bool
login_md5(struct login *l, const struct proto_auth_msg *m, struct pktbuf *out,
	  struct nk_error *err)
{
	char resp[AUTH_MD5_LEN + 1];

	if (!l->secret || !auth_md5_response(l->secret, l->user, m->data, resp))
		return login_wrong_type(err);
	pktbuf_write_password(out, resp);
	return true;
}

/* AuthenticationSASL: start SCRAM from the password or the pass-through keys. */
static bool
login_sasl_start(struct login *l, const struct proto_auth_msg *m, struct pktbuf *out,
		 struct nk_error *err)
{
	const char *first;
	bool ok;

	if (!proto_auth_sasl_has(m, SCRAM_MECHANISM))
		return nk_error_set(err, ERRCODE_PROTOCOL_VIOLATION,
		"server login failed: none of the server's SASL authentication "
		"mechanisms are supported");
	if (l->scram_active)
		return nk_error_set(err, ERRCODE_PROTOCOL_VIOLATION,
				    "server login failed: unexpected SASL request");
	if (l->secret && login_kind(l) == AUTH_SECRET_PLAIN)
		ok = scram_client_init_password(&l->scram, l->secret, "", NULL);
	else if (l->keys.valid)
		ok = scram_client_init_keys(&l->scram, &l->keys, "", NULL);
	else
		return login_wrong_type(err);
	l->scram_active = true;
	if (!ok)
		return nk_error_oom(err);
	first = scram_client_first_msg(&l->scram);
	pktbuf_write_sasl_initial(out, SCRAM_MECHANISM, first, strlen(first));
	return true;
}

static bool
login_sasl_continue(struct login *l, const struct proto_auth_msg *m, struct pktbuf *out,
		    struct nk_error *err)
{
	const char *final;

	if (!l->scram_active || l->scram.state != SCRAM_CLI_FIRST_SENT)
		return nk_error_set(err, ERRCODE_PROTOCOL_VIOLATION,
				    "server login failed: unexpected SASL continue");
	if (!scram_client_server_first(&l->scram, m->data, m->len, err))
		return false;
	final = scram_client_final_msg(&l->scram);
	pktbuf_write_sasl_response(out, final, strlen(final));
	return true;
}

static bool
login_sasl_final(struct login *l, const struct proto_auth_msg *m, struct nk_error *err)
{
	if (!l->scram_active || l->scram.state != SCRAM_CLI_FINAL_SENT)
		return nk_error_set(err, ERRCODE_PROTOCOL_VIOLATION,
				    "server login failed: unexpected SASL final");
	return scram_client_server_final(&l->scram, m->data, m->len, err);
}

/* Dispatch one Authentication message; see neki/login.h. */
bool
login_on_auth(struct login *l, const uint8_t *body, size_t len, struct pktbuf *out,
	      struct nk_error *err)
{
	struct proto_auth_msg m;

	if (!proto_parse_auth(body, len, &m, err))
		return false;
	switch (m.code) {
	case PROTO_AUTH_OK:
		if (l->scram_active && l->scram.state != SCRAM_CLI_DONE)
			return nk_error_set(err, ERRCODE_PROTOCOL_VIOLATION,
					    "server login failed: SCRAM exchange did not complete");
		l->ok = true;
		return true;
	case PROTO_AUTH_CLEARTEXT:
		return login_cleartext(l, out, err);
	case PROTO_AUTH_MD5:
		return login_md5(l, &m, out, err);
	case PROTO_AUTH_SASL:
		return login_sasl_start(l, &m, out, err);
	case PROTO_AUTH_SASL_CONTINUE:
		return login_sasl_continue(l, &m, out, err);
	case PROTO_AUTH_SASL_FINAL:
		return login_sasl_final(l, &m, err);
	default:
		return nk_error_set(err, ERRCODE_PROTOCOL_VIOLATION,
				    "server login failed: unsupported authentication method %d",
				    (int)m.code);
	}
}
