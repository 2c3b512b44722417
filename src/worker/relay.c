/*
 * relay.c - a worker's connection to the admin process: the console on the main port and
 * the __neki calls of sharded sessions (neki/admin_relay.h). Runs in workers.
 *
 * Phases (struct arelay.phase):
 *   RELAY_CONNECT  connecting to the internal socket; the client is paused by the caller
 *     --connected--> StartupMessage (+ the call's Query) sent --> RELAY_LOGIN or RELAY_CONSOLE
 *   RELAY_CONSOLE  every message both ways, until the admin ends the session
 *   RELAY_LOGIN    call: the admin's welcome is dropped up to its ReadyForQuery --> RELAY_REPLY
 *   RELAY_REPLY    call: the reply goes to the client, its ReadyForQuery ends the call
 *   RELAY_ENDED    admin socket closed; freed from the loop
 */
#include "neki/base.h"

#include "neki/admin_relay.h"

#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "neki/admin.h"
#include "neki/config.h"
#include "neki/log.h"
#include "neki/pktbuf.h"
#include "neki/proto.h"
#include "neki/sbuf.h"
#include "neki/proc.h"
#include "relay_fmt.h"

#define RELAY_CONNECT_TIMEOUT 5.0	/* seconds to reach the admin's socket */

enum relay_phase {
	RELAY_CONNECT = 0,
	RELAY_CONSOLE = 1,
	RELAY_LOGIN = 2,
	RELAY_REPLY = 3,
	RELAY_ENDED = 4,
};

struct arelay {
	struct sbuf sb;			/* owned: the admin connection */
	struct sbuf *client;		/* weak: NULL once abandoned or ended */
	enum relay_phase phase;
	bool console;
	bool forwarded;			/* part of the reply went to the client */
	bool no_row_desc;		/* call: drop the RowDescription (undescribed Execute) */
	bool fmt_on;			/* call: the Bind asked for binary results (relay_fmt.c) */
	bool fmt_failed;		/* ... which cannot be given: the rest is dropped */
	struct relay_fmt fmt;
	arelay_fetch_fn fetched;	/* fetch: the rows go here, not to the client */
	struct arelay_rows rows;	/* owned: what was fetched so far */
	struct pktbuf first;		/* owned: StartupMessage (+ Query), sent when connected */
	arelay_done_fn done;
	void *arg;
};

bool
arelay_is_console_db(const char *dbname)
{
	return dbname != NULL && (strcmp(dbname, "pgbouncer") == 0 || strcmp(dbname, "neki") == 0);
}

static void rows_free(struct arelay_rows *rs);
static void fetch_end(struct arelay *r, const struct nk_error *err);

static void
relay_free_cb(evutil_socket_t fd, short what, void *arg)
{
	struct arelay *r = arg;

	sbuf_cleanup(&r->sb);
	pktbuf_cleanup(&r->first);
	rows_free(&r->rows);
	free(r);
}

/* Close the admin side and free <r> from the loop (never inside its own callback). */
static void
relay_close(struct arelay *r)
{
	r->phase = RELAY_ENDED;
	r->client = NULL;
	sbuf_close(&r->sb);
	if (event_base_once(child_base(), -1, EV_TIMEOUT, relay_free_cb, r, NULL) == -1)
		log_error("admin relay: could not schedule its release (leaked)");
}

/* Report <end> to the owner and close. */
static void
relay_end(struct arelay *r, enum arelay_end end)
{
	arelay_done_fn done = r->done;
	void *arg = r->arg;
	bool tell = r->client != NULL;

	relay_close(r);
	if (tell)
		done(arg, end);
}

/* Send <err> to the client as an ErrorResponse of severity <sev>. */
static void
relay_client_error(struct arelay *r, struct nk_error *err, enum nk_severity sev)
{
	struct pktbuf pb;

	err->severity = sev;
	pktbuf_init(&pb, 128);
	pktbuf_write_error(&pb, err);
	if (r->client == NULL || pktbuf_failed(&pb) || !sbuf_send(r->client, pb.buf, pb.len))
		log_debug("admin relay: could not send an error to the client");
	pktbuf_cleanup(&pb);
}

/* The admin could not be reached or went away before a whole reply. */
static void
relay_failed(struct arelay *r, const char *why)
{
	struct nk_error err;

	log_warn("admin relay: %s", why);
	if (r->forwarded) {
		relay_end(r, ARELAY_BROKEN);
		return;
	}
	nk_error_set(&err, ERRCODE_CONNECTION_FAILURE,
		     "the admin process is not reachable: %s", why);
	if (r->fetched != NULL) {
		fetch_end(r, &err);
		return;
	}
	relay_client_error(r, &err, r->console ? NK_SEV_FATAL : NK_SEV_ERROR);
	relay_end(r, r->console ? ARELAY_CLOSED : ARELAY_REPLIED);
}

/* Connected: send the startup (and the call), let the console client talk. */
static void
relay_connected(struct arelay *r)
{
	if (!sbuf_send(&r->sb, r->first.buf, r->first.len)) {
		relay_failed(r, "could not send the startup packet");
		return;
	}
	pktbuf_cleanup(&r->first);
	pktbuf_init(&r->first, 0);
	r->phase = r->console ? RELAY_CONSOLE : RELAY_LOGIN;
	sbuf_set_startup(&r->sb, false);
	if (r->console && r->client != NULL)
		sbuf_continue(r->client);
}

/* A FATAL while the call logs in: the client gets it as an ERROR of its statement. */
static bool
relay_login_error(struct arelay *r, const struct sbuf_pkt *pkt)
{
	struct proto_server_error e;
	struct nk_error err;

	if (pkt->avail < pkt->len) {
		if (sbuf_hold(&r->sb, pkt->len))
			return true;
		relay_failed(r, "oversized login error");
		return false;
	}
	sbuf_skip(&r->sb, pkt->len);
	if (proto_parse_server_error(pkt->data + 5, pkt->len - 5, &e, &err))
		proto_server_error_to_nk(&e, &err);
	if (r->fetched != NULL) {
		fetch_end(r, &err);
		return false;
	}
	relay_client_error(r, &err, NK_SEV_ERROR);
	relay_end(r, ARELAY_REPLIED);
	return false;
}

/* A reply packet when the client asked for binary results: T and D rewritten. */
static bool
relay_reply_fmt(struct arelay *r, const struct sbuf_pkt *pkt)
{
	struct pktbuf pb;
	struct nk_error err;
	bool ok = true;

	if (pkt->avail < pkt->len) {
		if (sbuf_hold(&r->sb, pkt->len))
			return true;
		relay_failed(r, "oversized reply");
		return false;
	}
	if (r->fmt_failed || (pkt->type != 'T' && (pkt->type != 'D' || !r->fmt.any_binary))) {
		if (r->fmt_failed)
			sbuf_skip(&r->sb, pkt->len);
		else
			sbuf_forward(&r->sb, r->client, pkt->len);
		r->forwarded = true;
		return true;
	}
	pktbuf_init(&pb, pkt->len + 64);
	if (pkt->type == 'T')
		ok = relay_fmt_row_desc(&r->fmt, pkt->data + 5, pkt->len - 5, &pb);
	else
		ok = relay_fmt_data_row(&r->fmt, pkt->data + 5, pkt->len - 5, &pb);
	sbuf_skip(&r->sb, pkt->len);
	if (!ok) {
		pktbuf_reset(&pb);
		nk_error_set(&err, ERRCODE_FEATURE_NOT_SUPPORTED,
			     "this __neki function's results cannot be sent in "
			     "binary format");
		nk_error_hint(&err, "Ask for text results (pgjdbc: binaryTransfer=false).");
		pktbuf_write_error(&pb, &err);
		r->fmt_failed = true;
	} else if (pkt->type == 'T' && r->no_row_desc) {
		pktbuf_reset(&pb);
	}
	if (pb.len > 0 && (pktbuf_failed(&pb) || !sbuf_send(r->client, pb.buf, pb.len)))
		log_debug("admin relay: could not send a reply to the client");
	r->forwarded = true;
	pktbuf_cleanup(&pb);
	return true;
}

/* Free the fetched rows. */
static void
rows_free(struct arelay_rows *rs)
{
	for (size_t i = 0; i < rs->ncols; i++)
		free(rs->names[i]);
	for (size_t i = 0; i < rs->nrows * rs->ncols; i++)
		free(rs->vals[i]);
	free(rs->names);
	free(rs->oids);
	free(rs->vals);
	memset(rs, 0, sizeof(*rs));
}

/* A fetch ends: its rows (or <err>) to the owner, then close. */
static void
fetch_end(struct arelay *r, const struct nk_error *err)
{
	arelay_fetch_fn fn = r->fetched;
	void *arg = r->arg;
	struct arelay_rows rs = r->rows;

	memset(&r->rows, 0, sizeof(r->rows));
	relay_close(r);
	fn(arg, err ? NULL : &rs, err);
	rows_free(&rs);
}

static uint32_t
be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* RowDescription <b> of <len> bytes into r->rows. */
static bool
fetch_row_desc(struct arelay *r, const uint8_t *b, size_t len)
{
	struct arelay_rows *rs = &r->rows;
	size_t n = len >= 2 ? (size_t)(b[0] << 8 | b[1]) : 0, at = 2;

	rs->names = calloc(n + 1, sizeof(*rs->names));
	rs->oids = calloc(n + 1, sizeof(*rs->oids));
	if (rs->names == NULL || rs->oids == NULL)
		return false;
	for (size_t i = 0; i < n; i++) {
		const uint8_t *end = at < len ? memchr(b + at, '\0', len - at) : NULL;

		if (end == NULL || (size_t)(end - b) + 19 > len ||
		    (rs->names[i] = strdup((const char *)b + at)) == NULL)
			return false;
		rs->ncols = i + 1;
		at = (size_t)(end - b) + 1;
		rs->oids[i] = be32(b + at + 6);
		at += 18;
	}
	return true;
}

/* DataRow <b> of <len> bytes appended to r->rows. */
static bool
fetch_data_row(struct arelay *r, const uint8_t *b, size_t len)
{
	struct arelay_rows *rs = &r->rows;
	size_t at = 2;
	char **v = realloc(rs->vals, (rs->nrows + 1) * rs->ncols * sizeof(char *) + 1);

	if (v == NULL)
		return false;
	rs->vals = v;
	v += rs->nrows * rs->ncols;
	memset(v, 0, rs->ncols * sizeof(char *));
	rs->nrows++;
	for (size_t i = 0; i < rs->ncols; i++) {
		int32_t vl;

		if (at + 4 > len)
			return false;
		vl = (int32_t)be32(b + at);
		at += 4;
		if (vl < 0)
			continue;
		if (at + (size_t)vl > len || (v[i] = strndup((const char *)b + at, (size_t)vl)) ==
		    NULL)
			return false;
		at += (size_t)vl;
	}
	return true;
}

/* A reply packet of a fetch. */
static bool
relay_fetch_pkt(struct arelay *r, const struct sbuf_pkt *pkt)
{
	struct proto_server_error e;
	struct nk_error err;
	bool ok = true;

	if (pkt->avail < pkt->len) {
		if (sbuf_hold(&r->sb, pkt->len))
			return true;
		nk_error_set(&err, ERRCODE_PROGRAM_LIMIT_EXCEEDED,
			     "the __neki function's reply is too big");
		fetch_end(r, &err);
		return false;
	}
	if (pkt->type == 'T')
		ok = r->rows.ncols == 0 && fetch_row_desc(r, pkt->data + 5, pkt->len - 5);
	else if (pkt->type == 'D')
		ok = fetch_data_row(r, pkt->data + 5, pkt->len - 5);
	if (pkt->type == 'E' || pkt->type == 'Z' || !ok) {
		if (pkt->type == 'E' &&
		    proto_parse_server_error(pkt->data + 5, pkt->len - 5, &e, &err))
			proto_server_error_to_nk(&e, &err);
		else if (pkt->type == 'E' || !ok)
			nk_error_set(&err, ERRCODE_OUT_OF_MEMORY,
				     "could not read the __neki function's reply");
		sbuf_skip(&r->sb, pkt->len);
		fetch_end(r, pkt->type == 'Z' && ok ? NULL : &err);
		return false;
	}
	sbuf_skip(&r->sb, pkt->len);
	return true;
}

/* A packet from the admin. */
static bool
relay_on_pkt(struct arelay *r, const struct sbuf_pkt *pkt)
{
	switch (r->phase) {
	case RELAY_CONSOLE:
		sbuf_forward(&r->sb, r->client, pkt->len);
		return true;
	case RELAY_LOGIN:
		if (pkt->type == 'E')
			return relay_login_error(r, pkt);
		sbuf_skip(&r->sb, pkt->len);
		if (pkt->type == 'Z')
			r->phase = RELAY_REPLY;
		return true;
	case RELAY_REPLY:
		if (r->fetched != NULL)
			return relay_fetch_pkt(r, pkt);
		if (r->fmt_on && pkt->type != 'Z')
			return relay_reply_fmt(r, pkt);
		if (pkt->type == 'T' && r->no_row_desc) {
			sbuf_skip(&r->sb, pkt->len);
			return true;
		}
		if (pkt->type != 'Z') {
			r->forwarded = true;
			sbuf_forward(&r->sb, r->client, pkt->len);
			return true;
		}
		sbuf_skip(&r->sb, pkt->len);
		relay_end(r, ARELAY_REPLIED);
		return false;
	case RELAY_CONNECT:
	case RELAY_ENDED:
		break;
	}
	sbuf_skip(&r->sb, pkt->len);
	return true;
}

static bool
relay_sbuf_cb(struct sbuf *sb, enum sbuf_event ev, const struct sbuf_pkt *pkt, int err, void *arg)
{
	struct arelay *r = arg;

	if (r->phase == RELAY_ENDED || r->client == NULL)
		return false;
	switch (ev) {
	case SBUF_EV_PKT:
		return relay_on_pkt(r, pkt);
	case SBUF_EV_CONNECT_OK:
		relay_connected(r);
		break;
	case SBUF_EV_CONNECT_FAILED:
		relay_failed(r, strerror(err));
		break;
	case SBUF_EV_EOF:
	case SBUF_EV_RECV_FAILED:
	case SBUF_EV_SEND_FAILED:
	case SBUF_EV_BAD_PKT:
		if (r->console)
			relay_end(r, ARELAY_CLOSED);
		else
			relay_failed(r, "the admin closed the connection");
		break;
	case SBUF_EV_SEND_DONE:
		break;
	}
	return false;
}

/* A relay connecting to the admin, with <login>'s StartupMessage queued. */
static struct arelay *
relay_new(struct sbuf *client, const struct arelay_login *login, arelay_done_fn done, void *arg)
{
	struct arelay *r = calloc(1, sizeof(*r));
	struct proto_param params[4];
	struct sbuf_opts opts;
	struct sockaddr_un sa;
	socklen_t len = admin_forward_address(cfg_current()->proc.listen_port, &sa);
	size_t n = 0;

	if (r == NULL)
		return NULL;
	params[n++] = (struct proto_param){ "user", login->user };
	params[n++] = (struct proto_param){ "database", login->dbname };
	if (login->app_name != NULL)
		params[n++] = (struct proto_param){ "application_name", login->app_name };
	if (login->local_admin)
		params[n++] = (struct proto_param){ ADMIN_LOCAL_PARAM, "on" };
	pktbuf_init(&r->first, 256);
	pktbuf_write_startup(&r->first, params, n);
	sbuf_opts_from_cfg(&opts, cfg_current());
	r->client = client;
	r->done = done;
	r->arg = arg;
	if (!sbuf_init(&r->sb, child_base(), relay_sbuf_cb, r, &opts))
		goto fail;
	sbuf_set_startup(&r->sb, true);
	if (!sbuf_connect(&r->sb, (struct sockaddr *)&sa, len, RELAY_CONNECT_TIMEOUT))
		goto fail;
	return r;
fail:
	sbuf_cleanup(&r->sb);
	pktbuf_cleanup(&r->first);
	free(r);
	return NULL;
}

struct arelay *
arelay_console(struct sbuf *client, const struct arelay_login *login, arelay_done_fn done,
	       void *arg)
{
	struct arelay *r = relay_new(client, login, done, arg);

	if (r != NULL)
		r->console = true;
	return r;
}

bool
arelay_client_pkt(struct arelay *r, struct sbuf *client, const struct sbuf_pkt *pkt)
{
	if (r->phase != RELAY_CONSOLE)
		return false;	/* paused until the admin connection is up */
	sbuf_forward(client, &r->sb, pkt->len);
	return true;
}

struct arelay *
arelay_call(struct sbuf *client, const char *user, const char *sql, arelay_done_fn done,
	    void *arg)
{
	struct arelay_login login = { .user = user, .dbname = "neki" };
	struct arelay *r = relay_new(client, &login, done, arg);

	if (r == NULL)
		return NULL;
	pktbuf_write_query(&r->first, sql);
	if (pktbuf_failed(&r->first)) {
		arelay_abandon(r);
		return NULL;
	}
	return r;
}

struct arelay *
arelay_call_ext(struct sbuf *client, const char *user, const char *sql, bool describe,
		const int16_t *formats, size_t nformats, arelay_done_fn done, void *arg)
{
	struct arelay *r = arelay_call(client, user, sql, done, arg);

	if (r == NULL)
		return NULL;
	r->no_row_desc = !describe;
	for (size_t i = 0; i < nformats; i++)
		r->fmt_on |= formats[i] != 0;
	relay_fmt_init(&r->fmt, formats, nformats);
	return r;
}

struct arelay *
arelay_fetch(struct sbuf *client, const char *user, const char *sql, arelay_fetch_fn fetched,
	     void *arg)
{
	struct arelay *r = arelay_call(client, user, sql, NULL, arg);

	if (r != NULL)
		r->fetched = fetched;
	return r;
}

void
arelay_abandon(struct arelay *r)
{
	if (r->fetched != NULL)
		rows_free(&r->rows);
	if (r->phase != RELAY_ENDED)
		relay_close(r);
}
