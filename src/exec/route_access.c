/*
 * route_access.c - what neki/exec.h lets the session read of its route: busy, an open
 * extended-protocol batch, the transaction status, the clocks (struct route stays private).
 */
#include "neki/base.h"

#include "route_int.h"

bool
route_is_busy(const struct route *r)
{
	return r->busy;
}

uint64_t
route_busy_revision(const struct route *r)
{
	return r->busy ? r->ps.revision : 0;
}

bool
route_in_ext_batch(const struct route *r)
{
	return r->ext_failed || r->x.ext_exec || r->x.sync_pending;
}

char
route_tx_status(const struct route *r)
{
	return r->tx;
}

void
route_clocks(const struct route *r, uint64_t *query_start_us, uint64_t *xact_start_us)
{
	*query_start_us = r->query_start_us;
	*xact_start_us = r->xact_start_us;
}
