/*
 * neki/login.h - neki logging into a Postgres server (backend authentication).
 *
 * One struct login per backend connection being opened. The link feeds every
 * Authentication* ('R') message body it receives to login_on_auth(), which
 * writes the answer (PasswordMessage, SASLInitialResponse, SASLResponse) into a
 * pktbuf, until AuthenticationOk. Credentials, as pgbouncer uses them:
 *   - a plain password answers cleartext, md5 and SCRAM requests;
 *   - an md5 secret answers md5 requests;
 *   - a SCRAM secret answers SCRAM requests only with recovered keys (pass-through);
 *   - anything else fails with "server login failed: wrong password type" (08P01).
 * Pure: no sockets.
 */
#ifndef NEKI_LOGIN_H
#define NEKI_LOGIN_H

#include "neki/base.h"

#include "neki/error.h"
#include "neki/pktbuf.h"
#include "neki/scram.h"

struct login {
	const char *user;		/* borrowed: the server-side user name */
	const char *secret;		/* borrowed: plain / md5 / SCRAM secret; NULL = none */
	struct scram_keys keys;		/* copy of the pass-through keys (valid = false if none) */
	struct scram_client scram;	/* owned state while a SCRAM exchange runs */
	bool scram_active;
	bool ok;			/* AuthenticationOk seen */
};

/*
 * Prepare a login as <user> with <secret> (may be NULL) and optional recovered
 * SCRAM <keys> (may be NULL). Strings are borrowed and must outlive the login.
 */
void login_init(struct login *l, const char *user, const char *secret,
		const struct scram_keys *keys);
/*
 * Handle one Authentication message body. Appends the reply, if any, to <out>.
 * False with <err> set when the request cannot be answered (wrong password type,
 * unsupported method, malformed or failed SCRAM exchange).
 */
NK_MUSTCHECK bool login_on_auth(struct login *l, const uint8_t *body, size_t len,
				struct pktbuf *out, struct nk_error *err);
/* True once AuthenticationOk arrived. */
static inline bool
login_is_done(const struct login *l)
{
	return l->ok;
}
void login_cleanup(struct login *l);

#endif /* NEKI_LOGIN_H */
