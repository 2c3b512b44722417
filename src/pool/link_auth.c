/*
 * link_auth.c - a link authenticating to its server as a client: AuthenticationOk,
 * cleartext password, md5 and SCRAM-SHA-256 (the hashing lives in src/proto).
 *
 * Entry point: link_auth_answer(), called by link.c for every 'R' message during LOGIN.
 * The password (or stored secret) comes from the pool: the [databases] entry's password, the
 * auth_file, or what the client gave.
 */
#include "neki/base.h"

#include <stdlib.h>
#include <string.h>

#include "neki/error.h"
#include "neki/log.h"
#include "neki/pktbuf.h"
#include "neki/proto.h"
#include "pool_int.h"

/* The error a client sees when the link cannot log in for a reason of our own. */
static bool
link_auth_fail(struct nk_error *err, const char *what)
{
	return nk_error_set(err, "08P01", "server login failed: %s", what);
}

/* Send a PasswordMessage carrying <text>. */
static bool
link_auth_send_password(struct link *l, const char *text, struct nk_error *err)
{
	struct pktbuf pb;
	bool ok;

	pktbuf_init(&pb, 64);
	pktbuf_write_password(&pb, text);
	ok = !pktbuf_failed(&pb) && sbuf_send(&l->sb, pb.buf, pb.len);
	pktbuf_cleanup(&pb);
	return ok ? true : link_auth_fail(err, "could not send password");
}

/* AuthenticationCleartextPassword: only a plain password can answer it. */
static bool
link_auth_cleartext(struct link *l, struct nk_error *err)
{
	const char *pw = l->pool->password;

	link_log(l, LOG_LVL_DEBUG, "S: req cleartext password");
	if (pw == NULL || pw[0] == '\0')
		return link_auth_fail(err, "no password configured");
	if (strncmp(pw, "md5", 3) == 0 && strlen(pw) == 35)
		return link_auth_fail(err, "wrong password type");
	if (strncmp(pw, "SCRAM-SHA-256$", 14) == 0)
		return link_auth_fail(err, "wrong password type");
	return link_auth_send_password(l, pw, err);
}

/*
 * Answer one Authentication message. OK sets *<done>; the methods neki cannot answer fail
 * with a message naming the method.
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
	default:
		break;
	}
	return nk_error_set(err, "08P01", "server login failed: unsupported authentication "
			    "method %d", (int)m.code);
}

/* Nothing to free until SCRAM state exists. */
void
link_auth_cleanup(struct link *l)
{
	free(l->scram);
	l->scram = NULL;
}
