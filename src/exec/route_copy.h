/*
 * route_copy.h - the entry points of src/exec/route_copy.c (its header comment says what it
 * does); the executor's shared types are route_int.h's.
 */
#ifndef NEKI_EXEC_ROUTE_COPY_H
#define NEKI_EXEC_ROUTE_COPY_H

#include "neki/base.h"

#include "route_int.h"

/* Start COPY FROM STDIN planned as <p> (<img>: the image it was planned with). */
NK_MUSTCHECK bool route_copy_from(struct route *r, const struct plan *p, const char *sql,
				  const void *img, struct nk_error *err);
/* A shard's message during COPY FROM; false pauses the link. */
bool route_copy_on_link(struct route *r, struct rshard *sh, struct link *l,
			const struct sbuf_pkt *pkt);
/* The client's message during COPY FROM; false pauses the client. */
bool route_copy_on_client(struct route *r, const struct sbuf_pkt *pkt);
/* The link of target <sh> broke during COPY FROM (r->x.err says so): the others abort. */
void route_copy_link_lost(struct route *r, struct rshard *sh);
/* Every target of the COPY FROM answered: report and go on. */
void route_copy_finished(struct route *r);
void route_copy_free(struct route *r);
/* COPY TO over several shards: one CopyOutResponse, header, trailer and CopyDone. */
void route_copy_out_setup(struct route *r, const struct stmt_copy *cp);
bool route_copy_out_pkt(struct route *r, struct rshard *sh, struct link *l,
			const struct sbuf_pkt *pkt);

#endif /* NEKI_EXEC_ROUTE_COPY_H */
