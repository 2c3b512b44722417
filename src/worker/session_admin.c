/*
 * session_admin.c - the sessions whose statements the admin process answers
 * (src/worker/relay.c does the talking):
 *   - the console on the main port: a client of the virtual database `pgbouncer` or `neki`
 *     logs in like any client, then every message is relayed to the admin, which applies the
 *     admin_users / stats_users rules; user `pgbouncer` on the Unix socket with neki's uid
 *     needs nothing, as pgbouncer, and its socket is handed to the admin process (the
 *     descriptor channel, neki/fdchan.h), which serves it directly;
 *   - `SELECT * FROM __neki.<fn>(...)` (simple protocol) on a sharded database: the call is
 *     relayed, the reply goes to the client with the session's own ReadyForQuery status.
 *     The call runs at once in the admin, outside the client's transaction: allowed inside a
 *     transaction block, never rolled back.
 * Entry points: sess_console_check(), sess_console_start(), sess_admin_pkt(),
 * sess_admin_try_call(), sess_admin_release().
 */
#include "neki/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "neki/admin.h"
#include "neki/admin_relay.h"
#include "neki/fdchan.h"
#include "neki/log.h"
#include "neki/pktbuf.h"
#include "neki/proto.h"
#include "neki/session.h"
#include "neki/tls.h"
#include "neki/exec.h"
#include "session_int.h"

/* The longest query text scanned for a __neki call (a topology document fits). */
#define SESS_CALL_SCAN_MAX (16u << 20)

bool
sess_console_check(struct session *s)
{
	if (!arelay_is_console_db(s->dbname))
		return false;
	s->adm.console = true;
	s->db = NULL;
	s->db_missing = true;	/* no pool, no auth_query: the admin database has none */
	return true;
}

bool
sess_console_local_admin(const struct session *s)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (!s->adm.console || !s->from.is_unix || strcmp(s->user, "pgbouncer") != 0)
		return false;
	if (getsockopt(sbuf_fd(&s->sb), SOL_SOCKET, SO_PEERCRED, &cred, &len) == -1)
		return false;
	return cred.uid == getuid();
}

/* The admin ended the console session: the client follows. */
static void
sess_console_done(void *arg, enum arelay_end end)
{
	struct session *s = arg;

	s->relay = NULL;
	sess_close(s, end == ARELAY_BROKEN ? "admin connection failed" : "admin console closed",
		   NULL);
}

/*
 * The local user pgbouncer on the Unix socket: hand the socket to the admin process, which
 * serves it on its own (there SHOW FDS can pass descriptors to it, as pgbouncer's console
 * does for the online restart). False when it must be relayed instead: the client sent
 * more than its startup packet already, or the channel is not there.
 */
static bool
sess_console_hand_over(struct session *s, const struct arelay_login *login)
{
	struct fdchan_hdr h = { .kind = FDCHAN_CONSOLE, .slot = (uint16_t)shm_self() };
	struct fdchan_console who;
	int fd = sbuf_fd(&s->sb);

	if (!login->local_admin || sbuf_unclaimed(&s->sb) > 0 || sbuf_queued(&s->sb) > 0 ||
	    tls_sbuf_is_tls(&s->sb))
		return false;
	memset(&who, 0, sizeof(who));
	who.id = s->id;
	snprintf(who.user, sizeof(who.user), "%s", login->user);
	snprintf(who.db, sizeof(who.db), "%s", login->dbname);
	snprintf(who.app_name, sizeof(who.app_name), "%s", login->app_name ? login->app_name : "");
	if (!fdchan_send(&h, &who, sizeof(who), &fd, 1))
		return false;
	log_debug("C-%p: console session handed to the admin process", (void *)s);
	sess_close(s, NULL, NULL);	/* no "closing because": it goes on in the admin */
	return true;
}

void
sess_console_start(struct session *s)
{
	struct arelay_login login = {
		.user = s->user,
		.dbname = s->dbname,
		.app_name = s->vars.val[varcache_index("application_name")],
		.local_admin = sess_console_local_admin(s),
	};
	struct nk_error err;

	if (!session_console_take(s->cfg, s->dbname, s->user, login.local_admin,
				  &s->console_units, &err)) {
		err.severity = NK_SEV_FATAL;
		sess_close(s, err.message, &err);
		return;
	}
	if (login.local_admin && s->cfg->log.log_connections)
		sess_log(s, LOG_LVL_INFO, "pgbouncer access from unix socket");
	s->auth_step = SESS_AUTH_DONE;
	if (sess_console_hand_over(s, &login))
		return;
	sbuf_pause(&s->sb);
	s->relay = arelay_console(&s->sb, &login, sess_console_done, s);
	if (s->relay == NULL) {
		sess_fatal(s, "could not reach the admin console");
		return;
	}
	sess_set_state(s, SESS_ST_IDLE);
}

bool
sess_admin_pkt(struct session *s, const struct sbuf_pkt *pkt)
{
	if (!s->adm.console)
		return false;	/* a __neki call is running: wait for its end */
	if (pkt->type == 'X') {	/* Terminate: the admin side ends with the relay */
		sess_close(s, "client close request", NULL);
		return false;
	}
	return arelay_client_pkt(s->relay, &s->sb, pkt);
}

/* The transaction status the client sees (routed or pooled session). */
static char
sess_tx_now(const struct session *s)
{
	if (s->route != NULL)
		return route_tx_status(s->route);
	return s->link != NULL ? s->sync.tx_status : 'I';
}

/* The call's reply went to the client (or the admin connection broke midway). */
static void
sess_call_done(void *arg, enum arelay_end end)
{
	sess_admin_call_done(arg, end);
}

void
sess_admin_call_done(struct session *s, enum arelay_end end)
{
	s->relay = NULL;
	if (end == ARELAY_BROKEN) {
		sess_fatal(s, "admin connection failed during a __neki call");
		return;
	}
	if (!sess_admin_ready(s))
		return;
	sbuf_flush(&s->sb);	/* (a routed session's output may be corked mid-batch) */
	sbuf_continue(&s->sb);
}

bool
sess_admin_ready(struct session *s)
{
	struct pktbuf pb;

	if (s->route != NULL && !route_listen_flush(s->route))
		return false;	/* (notifications held during the call) */
	pktbuf_init(&pb, 8);
	pktbuf_write_ready_for_query(&pb, sess_tx_now(s));
	if (!sess_send_pb(s, &pb)) {
		sess_close(s, "client connection failed", NULL);
		return false;
	}
	return true;
}

int
sess_admin_try_call(struct session *s, const struct sbuf_pkt *pkt)
{
	struct nk_error err;
	const char *sql;

	if ((pkt->type != 'Q' && pkt->type != 'P' && pkt->type != 'B' && pkt->type != 'D') ||
	    !s->sharded ||
	    pkt->len > SESS_CALL_SCAN_MAX)
		return -1;
	if (s->link != NULL && (s->sync.syncs_sent != s->sync.z_recv || s->sync.unsynced))
		return -1;	/* the server is still answering: keep the order, let it fail there */
	if (s->route != NULL && (route_is_busy(s->route) || route_in_ext_batch(s->route)))
		return -1;
	if (pkt->avail < pkt->len) {
		if (sbuf_hold(&s->sb, pkt->len))
			return 1;
		sess_fatal(s, "client sent too big packet");
		return 0;
	}
	if (pkt->type == 'P')
		return sess_nekiext_try_parse(s, pkt);
	if (pkt->type == 'B' || pkt->type == 'D')
		return sess_nekiext_try_kept(s, pkt);
	if (!proto_parse_query(pkt->data + 5, pkt->len - 5, &sql, &err) ||
	    !admin_is_neki_call(sql))
		return -1;
	s->relay = arelay_call(&s->sb, s->user, sql, sess_call_done, s);
	if (s->relay == NULL) {
		sess_fatal(s, "could not reach the admin process");
		return 0;
	}
	sbuf_skip(&s->sb, pkt->len);
	sess_stats(s)->total_received += pkt->len;
	return 0;	/* paused until sess_call_done */
}

void
sess_admin_release(struct session *s)
{
	sess_nekiext_free(s);
	if (s->relay != NULL)
		arelay_abandon(s->relay);
	s->relay = NULL;
}
