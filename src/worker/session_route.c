/*
 * session_route.c - the session's side of the executor (neki/exec.h): the client sink a
 * routed session gives its route. Entry point: sess_route_start().
 */
#include "neki/base.h"

#include "neki/exec.h"
#include "neki/log.h"
#include "neki/proc.h"
#include "neki/admin_relay.h"
#include "session_int.h"

static bool
sink_closed(void *ctx)
{
	const struct session *s = ctx;

	return s->state == SESS_ST_CLOSED;
}

static bool
sink_send(void *ctx, struct pktbuf *pb)
{
	return sess_send_pb(ctx, pb);
}

static bool
sink_send_error(void *ctx, const struct nk_error *err)
{
	return sess_send_error(ctx, err);
}

static void
sink_fatal(void *ctx, const char *msg)
{
	sess_fatal(ctx, msg);
}

static void
sink_close(void *ctx, const char *reason, const struct nk_error *err)
{
	sess_close(ctx, reason, err);
}

static void NK_PRINTF(3, 0)
sink_log(void *ctx, int lvl, const char *fmt, va_list ap)
{
	sess_vlog(ctx, lvl, fmt, ap);
}

static void
sink_idle(void *ctx)
{
	struct session *s = ctx;

	s->tm.activity_us = sess_now_us();
}

static bool
sink_relay_busy(void *ctx)
{
	const struct session *s = ctx;

	return s->relay != NULL;
}

static void
sink_set_relay(void *ctx, struct arelay *relay)
{
	struct session *s = ctx;

	s->relay = relay;
}

static bool
sink_admin_fetch(void *ctx, const char *sql, arelay_fetch_fn fetched, void *arg)
{
	struct session *s = ctx;

	s->relay = arelay_fetch(&s->sb, s->user, sql, fetched, arg);
	return s->relay != NULL;
}

static const struct exec_client_ops sink_ops = {
	.closed = sink_closed,
	.send = sink_send,
	.send_error = sink_send_error,
	.fatal = sink_fatal,
	.close = sink_close,
	.log = sink_log,
	.idle = sink_idle,
	.relay_busy = sink_relay_busy,
	.set_relay = sink_set_relay,
	.admin_fetch = sink_admin_fetch,
	.cancel_link = sess_cancel_link,
};

bool
sess_route_start(struct session *s)
{
	struct exec_client c = {
		.ops = &sink_ops,
		.ctx = s,
		.base = child_base(),
		.sb = &s->sb,
		.cfg = s->cfg,
		.db = s->db,
		.dbname = s->dbname,
		.user = s->user,
		.secret = s->secret,
		.sp = s->sp,
		.stats = s->stats,
		.vars = &s->vars,
		.key_pid = s->key_pid,
	};

	s->route = route_session_start(&c);
	return s->route != NULL;
}
