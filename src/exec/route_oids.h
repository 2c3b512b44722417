/*
 * route_oids.h - authoritative type OIDs on a routed session's shard messages (route_oids.c).
 */
#ifndef NEKI_EXEC_ROUTE_OIDS_H
#define NEKI_EXEC_ROUTE_OIDS_H

#include "neki/base.h"

struct link;
struct route;
struct rshard;
struct sbuf_pkt;

/* What route_oids_answer() did with a shard's packet. */
enum roids_step {
	ROIDS_GO = 0,		/* the packet is ready: handle it */
	ROIDS_HELD = 1,		/* the whole packet was asked for: it comes again */
	ROIDS_FAIL = 2,		/* too big to hold: the client was closed */
};

/*
 * A RowDescription or ParameterDescription <pkt> of shard <sh> (read on <l>): its type OIDs
 * of user-defined types that differ on <sh> become the authoritative shard's, in place (the
 * catalog's OID pairs). Any other packet, or a shard without pairs: ROIDS_GO at once.
 */
enum roids_step route_oids_answer(struct route *r, struct rshard *sh, struct link *l,
				  const struct sbuf_pkt *pkt);

/*
 * Send <msg>/<len> (whole protocol messages) to <sh>'s link, the parameter types of its
 * Parse messages translated from the authoritative OIDs to <sh>'s own. False when the send
 * failed (or on no memory).
 */
NK_MUSTCHECK bool route_oids_send(struct route *r, struct rshard *sh, const uint8_t *msg,
				  size_t len);

#endif /* NEKI_EXEC_ROUTE_OIDS_H */
