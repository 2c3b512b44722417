/*
 * route_state.h - groups of a route's state kept in structs of their own (struct route,
 * route_int.h, holds the session's state; struct rexec there the statement's).
 */
#ifndef NEKI_EXEC_ROUTE_STATE_H
#define NEKI_EXEC_ROUTE_STATE_H

#include "neki/base.h"

#include "neki/parse_kinds.h"
#include "neki/plan.h"
#include "neki/plan_cursor.h"

struct plan_param;
struct plan_setval;
struct event;
struct rguc;
struct rnote;
struct route;
struct rportal;
struct rseq_last;
struct seq_entry;

/*
 * The ways an exec's answers are handled besides forwarding and counting them (the combines
 * RX_PASS .. RX_QUIET): each claims some packet types of its targets' answers (route_exec.c's
 * table, in this order); the exec's handlers are chosen once, when it sends.
 */
enum rx_handler {
	RXH_SEQ = 0,	/* a sequence reservation's rows (route_seq.c) */
	RXH_CAPTURE,	/* a subquery's or a GSI step's rows, kept (route_subq.c) */
	RXH_PULL,	/* a round of a router-side portal (route_pull.c) */
	RXH_INSEL,	/* a round of INSERT ... SELECT (route_insel.c) */
	RXH_ANALYZE,	/* EXPLAIN ANALYZE: rows counted, not forwarded (route_explain.c) */
	RXH_MERGE,	/* rows through the merge step (route_merge.c) */
	RXH_COPY_OUT,	/* COPY TO over several shards (route_copy.c) */
	RXH_COUNT,
};

#define ROUTE_VARS_MAX 16	/* tracked (reported) parameters: the varcache's VAR_MAX */

/* What an operation on a router-side portal does (route_pull.c). */
enum rpull_op {
	RPULL_NONE = 0,
	RPULL_EXECUTE,		/* protocol Execute: rows, then PortalSuspended or "SELECT n" */
	RPULL_FETCH,		/* FETCH: RowDescription, rows, "FETCH n" */
	RPULL_MOVE,		/* MOVE: rows counted, "MOVE n" */
};

/*
 * An operation on a router-side portal (route_pull.c), per statement: the steps of a FETCH /
 * MOVE, or an Execute; each step reads rows in rounds of shard pulls.
 */
struct rpull_cur {
	struct rportal *portal;		/* weak: the portal read (NULL: none) */
	enum rpull_op op;
	struct plan_fetch plan;		/* FETCH / MOVE: the steps */
	uint32_t step;			/* the step running */
	int64_t want;			/* rows the step wants (STMT_FETCH_ALL: all) */
	uint64_t rows;			/* rows the step had so far */
	uint64_t base;			/* the row the cursor was on when the step began */
	uint64_t result;		/* rows of the result step */
	bool running;			/* a forward step reads rows */
	bool final;			/* the round runs the merge's final combine query */
	bool wait;			/* the client's queue is long: the next round waits */
	bool head;			/* FETCH: RowDescription sent */
};

/*
 * EXPLAIN (NEKI_PLAN, ANALYZE): the exec runs the explained statement, its result is dropped
 * (counted) and the plan with the actuals is the answer (route.c).
 */
struct ranalyze {
	bool on;
	bool json;
	struct plan *plan;		/* in arena (strings copied) */
	uint64_t start_us;
	uint64_t rows;			/* rows the merge let out */
};

/* COPY TO over several shards (route_copy.c). */
struct rcopy_out {
	bool on, binary, header;
	uint32_t pos, ndata;		/* target being read, its CopyData count */
	uint64_t bytes;			/* its CopyData bytes */
};

/* The session's settings as the router models them (route_sets.c), session-long. */
struct rgucs {
	struct rguc *sets;		/* owned: committed session SETs (RGUC_SET, one per name,
					 * in the order set), replayed on every new link */
	uint32_t nsets, capsets;
	struct rguc *pend;		/* owned: what the open transaction did to settings */
	uint32_t npend, cappend;
	struct rguc *xsets;		/* owned: what the current exec does once it succeeds */
	uint32_t nxsets, capxsets;
	const char *vars0[ROUTE_VARS_MAX];	/* interned: the tracked parameters' values at
						 * login, what RESET goes back to */
};

/* A session's sequence values (route_seq.c): the statement's reservation and setval() calls,
 * and the session-long currval() / lastval() values. */
struct rseq {
	struct seq_entry *fill;		/* the reservation this session runs (RX_SEQ) */
	struct seq_entry *wait;		/* another session's reservation it waits for */
	struct route *next;		/* in the worker's list of waiting sessions */
	const struct plan_param *params;	/* extended: the bound values (arena) */
	uint32_t nparams;
	struct rseq_last *last;		/* owned: the session's last value per sequence */
	uint32_t nlast;
	bool has_lastval;		/* last_used is set */
	/* setval() calls of the current exec: applied when it ends */
	const struct plan_setval *setvals;	/* in arena */
	uint32_t nsetvals;
	uint32_t last_used;		/* lastval(): the last entry nextval() used */
};

/* The notifications of the listening link, held until the client may get them
 * (route_listen.c), session-long. */
struct rnotes {
	struct rnote *head;		/* owned: FIFO */
	struct rnote **tail;
	size_t bytes;
	bool paused;			/* a listening link is paused: too many held */
};

/* DDL a statement runs, for what follows it. */
struct rddl {
	bool all_shards;		/* DDL on every shard: refresh the catalog after it */
	bool seq;			/* ... that may restart, drop or rename a sequence:
					 * every worker drops its reserved values after it */
	bool notice;			/* ... send wait_for_ddl's NOTICE once it is loaded */
	char target[160];		/* ... "schema.table" it creates or alters; "" none */
};

/* What the catalog poll timer resumes once a refresh after DDL (or a catalog load asked for
 * a table it lacked) is served, or what the session waits for before it is served. */
enum route_resume {
	ROUTE_RESUME_NEXT = 0,	/* the next statement of the Query */
	ROUTE_RESUME_QUERY_END,	/* the Query's ReadyForQuery */
	ROUTE_RESUME_SYNC,	/* the extended protocol's Sync */
	ROUTE_RESUME_EXEC,	/* the extended protocol's Execute, planned again */
	ROUTE_RESUME_HOLD,	/* the first message, once topology and catalog are loaded */
};

/*
 * A session held until the catalog of its database is loaded or refreshed
 * (route_hold.c).
 */
struct rhold {
	uint64_t cat_wait;		/* catalog refresh to wait for (0 none): after DDL, the
					 * next statement and ReadyForQuery wait for it */
	enum route_resume resume;	/* what the poll timer resumes */
	uint64_t cat_done_us;		/* the last wait for r->hold.cat_wait ended (route_hold.c) */
	bool fetch_off;			/* a plan again after sequence values: no catalog wait */
	bool ready;			/* topology and catalog of r->db were loaded: served */
	bool hold_asked;		/* held: a catalog load was asked for (once) */
	uint64_t hold_since_us;		/* the first message began to wait then */
	struct event *ev_poll;		/* owned: catalog refresh poll timer */
	uint64_t poll_deadline_us;	/* give up waiting for the catalog then */
};

#endif /* NEKI_EXEC_ROUTE_STATE_H */
