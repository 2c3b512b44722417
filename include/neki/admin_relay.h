/*
 * neki/admin_relay.h - a worker's connection to the admin process (src/worker/relay.c).
 *
 * Two uses, both over the admin's internal Unix socket (admin_forward_address), logged in
 * with the user the worker has already authenticated:
 *   - the console on the main port: a client of the virtual database `pgbouncer` or `neki`
 *     is relayed to the admin, every message both ways (arelay_console, arelay_client_pkt);
 *   - one `SELECT * FROM __neki.<fn>(...)` on the main port of a sharded database
 *     (arelay_call): the admin's reply (RowDescription, DataRow, CommandComplete or
 *     ErrorResponse, notices) goes to the client, its ReadyForQuery does not: the caller
 *     sends its own with the client's transaction status. The call runs at once in the admin,
 *     outside the client's transaction (it is never rolled back).
 * The relay owns its admin connection and frees itself from the loop after it reported
 * the end (done) or after arelay_abandon().
 */
#ifndef NEKI_ADMIN_RELAY_H
#define NEKI_ADMIN_RELAY_H

#include "neki/base.h"

#include "neki/exec.h"

struct sbuf;
struct sbuf_pkt;
struct arelay;
struct nk_error;

/* How a relay ended. */
enum arelay_end {
	ARELAY_REPLIED = 0,	/* call: the client got the whole reply (rows or an error) */
	ARELAY_CLOSED = 1,	/* console: the admin ended the session (its last words relayed) */
	ARELAY_BROKEN = 2,	/* the admin connection failed midway: the client must be closed */
};

/* The relay ended; it is freed after this returns (never call it again). */
typedef void (*arelay_done_fn)(void *arg, enum arelay_end end);

/* Who logs in to the admin. */
struct arelay_login {
	const char *user;		/* the authenticated client user */
	const char *dbname;		/* "pgbouncer" or "neki" */
	const char *app_name;		/* NULL or the client's application_name */
	bool local_admin;		/* user pgbouncer over the Unix socket with neki's uid */
};

/* True for the database names of the console on the main port ("pgbouncer", "neki"). */
bool arelay_is_console_db(const char *dbname);

/*
 * Relay client <client> (paused by the caller until the admin answers) to the console.
 * The admin's welcome or FATAL goes to the client as it comes. NULL when out of memory or
 * no socket; the caller then closes the client.
 */
struct arelay *arelay_console(struct sbuf *client, const struct arelay_login *login,
			      arelay_done_fn done, void *arg);

/*
 * A client packet of a console relay (called from the client's sbuf callback): forwarded
 * to the admin. Returns what the sbuf callback returns.
 */
bool arelay_client_pkt(struct arelay *r, struct sbuf *client, const struct sbuf_pkt *pkt);

/*
 * Run the simple-protocol __neki call <sql> as <user> and relay the reply to <client>.
 * The caller stops reading the client until <done>. NULL when out of memory or no socket.
 */
struct arelay *arelay_call(struct sbuf *client, const char *user, const char *sql,
			   arelay_done_fn done, void *arg);

/* arelay_call for an extended-protocol Execute: the admin's RowDescription reaches the
 * client only when it described the portal (<describe>); <formats> are the Bind's result
 * format codes (binary columns converted from the admin's text). */
struct arelay *arelay_call_ext(struct sbuf *client, const char *user, const char *sql,
			       bool describe, const int16_t *formats, size_t nformats,
			       arelay_done_fn done, void *arg);
/* struct arelay_rows and arelay_fetch_fn: neki/exec.h (the executor composes them). */
/*
 * Run the __neki call <sql> as <user> and collect its reply for <fetched> instead of
 * relaying it (<client>: the session's, not written to). NULL when out of memory.
 */
struct arelay *arelay_fetch(struct sbuf *client, const char *user, const char *sql,
			    arelay_fetch_fn fetched, void *arg);
/* The client is gone: close the admin side without calling done; freed from the loop. */
void arelay_abandon(struct arelay *r);

#endif /* NEKI_ADMIN_RELAY_H */
