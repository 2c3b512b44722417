/*
 * route_client.h - the executor's calls into its client (the exec_client the session gave,
 * neki/exec.h), and the worker's pools, prepared statements and tracked parameters it
 * shares with the sessions (src/pool/): what every src/exec file includes after route_int.h
 * instead of reaching into the session.
 */
#ifndef NEKI_EXEC_ROUTE_CLIENT_H
#define NEKI_EXEC_ROUTE_CLIENT_H

#include "neki/base.h"

#include "neki/clock.h"
#include "neki/exec.h"
#include "neki/prepared.h"
#include "neki/spool.h"
#include "neki/varcache.h"
#include "route_int.h"

/* Is the client gone (its session closing)? */
static inline bool
route_client_closed(const struct route *r)
{
	return r->c.ops->closed(r->c.ctx);
}

/* One message built in <pb> (freed) to the client; false when it is gone. */
static inline bool
route_client_send(struct route *r, struct pktbuf *pb)
{
	return r->c.ops->send(r->c.ctx, pb);
}

/* An ErrorResponse (the client stays); false when it is gone. */
static inline bool
route_client_send_error(struct route *r, const struct nk_error *err)
{
	return r->c.ops->send_error(r->c.ctx, err);
}

/* FATAL 08P01 <msg>, then the session closes. */
static inline void
route_client_fatal(struct route *r, const char *msg)
{
	r->c.ops->fatal(r->c.ctx, msg);
}

/* Close the session: log <reason> (NULL: no line), send <err> (NULL: none). */
static inline void
route_client_close(struct route *r, const char *reason, const struct nk_error *err)
{
	r->c.ops->close(r->c.ctx, reason, err);
}

/* The client is idle from now (its idle and idle-in-transaction clocks start). */
static inline void
route_client_idle(struct route *r)
{
	r->c.ops->idle(r->c.ctx);
}

/* Does a __neki call or a console relay run for the client? */
static inline bool
route_client_relay_busy(const struct route *r)
{
	return r->c.ops->relay_busy(r->c.ctx);
}

/* Run the __neki call <sql> in the admin for the client, its rows to <fetched>. */
static inline bool
route_client_admin_fetch(struct route *r, const char *sql, arelay_fetch_fn fetched, void *arg)
{
	return r->c.ops->admin_fetch(r->c.ctx, sql, fetched, arg);
}

/* The session holds <relay> (a __neki call the route started; NULL: it ended). */
static inline void
route_client_set_relay(struct route *r, struct arelay *relay)
{
	r->c.ops->set_relay(r->c.ctx, relay);
}

/* A CancelRequest for the query running on <l> (its backend's own pid and key). */
static inline void
route_client_cancel_link(const struct route *r, struct link *l)
{
	r->c.ops->cancel_link(l);
}

/* Log with the client's prefix (route_client.c). */
void route_client_log(const struct route *r, int lvl, const char *fmt, ...) NK_PRINTF(3, 4);

#endif /* NEKI_EXEC_ROUTE_CLIENT_H */
