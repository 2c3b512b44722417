/*
 * route_pull.h - the entry points of src/exec/route_pull.c (its header comment says what it
 * does); the executor's shared types are route_int.h's.
 */
#ifndef NEKI_EXEC_ROUTE_PULL_H
#define NEKI_EXEC_ROUTE_PULL_H

#include "neki/base.h"

#include "route_int.h"

enum rpull_rc {
	RPULL_ASYNC = 0,	/* a round of shard pulls runs (or the client's queue is long) */
	RPULL_DONE,		/* the operation's answer is sent */
	RPULL_FAILED,		/* r->x.err says why (nothing of it was sent) */
};

/*
 * The router's side of a portal over the shards <uids>[0..n): the merge of SELECT <sql>
 * (LIMIT / OFFSET values from <in>) whose mirrors are named <mirror>, cursors (<cursor>,
 * FETCH pulls them) or portals (Execute with a row limit). NULL with <err>.
 */
struct rpull *route_pull_new(struct route *r, const char *sql, const struct plan_input *in,
			     const char *const *uids, uint32_t n, const char *mirror, bool cursor,
			     struct nk_error *err);
void route_pull_free(struct rpull *pl);
/* The position of router-side cursor <pl> (FETCH / MOVE plan from it). */
struct plan_cursor_pos *route_pull_pos(struct rpull *pl);
/* A SCROLL cursor: keep the rows let out to move backward. */
void route_pull_set_scroll(struct rpull *pl, bool scroll);
/* The client's columns from a shard's RowDescription <body>, once. */
NK_MUSTCHECK bool route_pull_set_cols(struct rpull *pl, const uint8_t *body, size_t len,
				      struct nk_error *err);
/* Append the client's RowDescription (result formats <fmt>, <nfmt> int16 codes as in Bind);
 * false when the columns are not known yet. */
bool route_pull_rowdesc(const struct rpull *pl, const uint8_t *fmt, uint16_t nfmt,
			struct pktbuf *pb);
/* The rows are in formats <fmt> / <nfmt> (the first operation fixes them; a later one
 * asking for others is 0A000; <unset_only>: only when none are fixed yet). */
NK_MUSTCHECK bool route_pull_formats(struct rpull *pl, const uint8_t *fmt, uint16_t nfmt,
				     bool unset_only, struct nk_error *err);
/* The messages creating mirror cursor <pl> on a shard: DECLARE ... NO SCROLL CURSOR [WITH
 * HOLD] FOR <its shard query> with <p>'s values, (<describe>) its description, Sync. */
NK_MUSTCHECK bool route_pull_declare_msgs(struct rpull *pl, const struct rportal *p, bool hold,
					  bool describe, struct pktbuf *pb, struct nk_error *err);
/* Run <plan> (an Execute: one forward step) on router-side portal <p>; <head>: the
 * RowDescription goes before the result's rows. */
enum rpull_rc route_pull_start(struct route *r, struct rportal *p, enum rpull_op op,
			       const struct plan_fetch *plan, bool head);
/* The first Execute (with a row limit) of r->xportal planned over several shards as <p>
 * (SELECT <sql>): the portal becomes the router's, its first rows are read. */
enum rstep route_pull_portal(struct route *r, const struct plan *p, const char *sql);
/* A round ended (from route_exec_finished()): go on. */
enum rpull_rc route_pull_more(struct route *r);
/* RX_PULL: a 'T', 'D', 'C' or 's' of a shard. */
bool route_pull_answer(struct route *r, struct rshard *sh, struct link *l,
		       const struct sbuf_pkt *pkt);
/* The client's queue drained: a round that waited goes. */
void route_pull_resume(struct route *r);
/* <name> as a quoted identifier (malloc'd; NULL on no memory). */
char *route_quote_ident(const char *name);

#endif /* NEKI_EXEC_ROUTE_PULL_H */
