/*
 * route_client.c - the executor's log lines about its client, through the client sink
 * (neki/exec.h): formatted and prefixed by the session.
 */
#include "neki/base.h"

#include <stdarg.h>

#include "route_client.h"

void
route_client_log(const struct route *r, int lvl, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	r->c.ops->log(r->c.ctx, lvl, fmt, ap);
	va_end(ap);
}
