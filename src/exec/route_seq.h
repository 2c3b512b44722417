/*
 * route_seq.h - the entry points of src/exec/route_seq.c (its header comment says what it
 * does); the executor's shared types are route_int.h's.
 */
#ifndef NEKI_EXEC_ROUTE_SEQ_H
#define NEKI_EXEC_ROUTE_SEQ_H

#include "neki/base.h"

#include "route_int.h"

enum route_seq_rc {
	ROUTE_SEQ_READY = 0,	/* values taken: send *sql (the plan is routed) */
	ROUTE_SEQ_ASYNC,	/* a reservation runs (or is waited for): plan again after it */
	ROUTE_SEQ_FAILED,	/* <err> says why; nothing was sent */
};

/*
 * A plan with fills or nextval() calls (<in> as planned, <*sql> the statement's text):
 * take the values and rewrite *sql (extended protocol: r->x.ext_msg's Parse too), or start
 * the reservation on the home shard (RX_SEQ exec, RX_AFTER_SEQ) or wait for another
 * session's one (route_exec_finished() is called either way).
 */
enum route_seq_rc route_seq_plan(struct route *r, const struct plan_input *in, struct plan *p,
				 const char **sql, struct nk_error *err);
/* A message of the reservation's answer other than ReadyForQuery / ErrorResponse. */
bool route_seq_msg(struct route *r, struct rshard *sh, struct link *l, const struct sbuf_pkt *pkt);
/* The reservation (or the wait) ended: false when it failed (r->x.err). */
bool route_seq_end(struct route *r);
/* Session close: leave the waiters' list, end a reservation in flight. */
void route_seq_free(struct route *r);
/* setval() of the exec ran (<ok>) or failed (r->x.err): every worker drops the values it
 * reserved of those sequences (also after a failure setval() did not raise itself: it may
 * have run), and with <ok> currval() / lastval() follow Postgres. */
void route_seq_setvals_done(struct route *r, bool ok);
/* DDL <tag> may restart, drop or rename a sequence (ALTER SEQUENCE, TRUNCATE ... RESTART
 * IDENTITY, ALTER TABLE ... RESTART, DROP, RENAME, SET SCHEMA): the reserved values of
 * every sequence are dropped after it. */
bool route_seq_ddl(const char *tag);
/* DISCARD ALL / DISCARD SEQUENCES: forget the session's currval() and lastval(). */
void route_seq_discard(struct route *r);
/*
 * INSERT ... SELECT: <n> values of each fill <fills>[f] into <values>[f * n + k], the
 * session's last values (currval) set. ROUTE_SEQ_ASYNC: a reservation runs (or another
 * session's is awaited); route_exec_finished() follows with r->x.after RX_AFTER_SEQ, then
 * route_seq_end() and this again.
 */
enum route_seq_rc route_seq_fill_values(struct route *r, const struct plan_fill *const *fills,
					uint32_t nfills, uint32_t n, int64_t *values,
					struct nk_error *err);

#endif /* NEKI_EXEC_ROUTE_SEQ_H */
