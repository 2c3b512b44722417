/*
 * route_int.h - the executor of sharded databases (a session whose [databases] entry has
 * topology=yes): the types src/exec/route*.c share, and route.c's entry points; each other
 * file's are in its own header (route_exec.h, route_ext.h, route_portal.h, ...).
 *
 * A routed session plans every statement with the router (plan.h) and runs the plan on
 * links of per-shard pools, one struct rshard per shard it uses. route.c is the session
 * glue and the statement loop (split, normalise, cache, plan, router actions); route_exec.c
 * acquires links, sends to shards and reads their answers; route_sql.c builds per-shard
 * texts (INSERT split), reads command tags and shard errors; route_portal.c keeps the
 * session's portals and cursors, route_cursor.c runs DECLARE / FETCH / MOVE / CLOSE and
 * route_pull.c reads a portal over several shards in parts;
 * route_insel.c runs INSERT ... SELECT across shards in rounds of execs.
 *
 * Execution of one statement ("exec"): a list of target shards in plan order. Parallel
 * execs send to every target first and then read the answers target by target (the links
 * not being read are paused, so the answers arrive in plan order; a merge reads them all
 * as they come, with back-pressure: route_merge.c); sequential execs send
 * to the next target only after the previous one answered without error. How the answers
 * combine is enum rx_combine. The router owns ReadyForQuery: the shards' own are consumed.
 * Links go back to the pool outside transactions, except those the session holds for
 * LISTEN or session advisory locks (route_pin.c, route_listen.c).
 */
#ifndef NEKI_EXEC_ROUTE_INT_H
#define NEKI_EXEC_ROUTE_INT_H

#include "neki/base.h"

#include <string.h>

#include "neki/catalog_image.h"
#include "neki/error.h"
#include "neki/exec.h"
#include "neki/plan.h"
#include "neki/plan_merge.h"
#include "neki/pool.h"
#include "neki/proto.h"
#include "neki/sbuf.h"
#include "neki/shm.h"
#include "route_state.h"

struct merge;
struct rcopy;
struct spool;
struct event;
struct seq_entry;
struct rseq_last;
struct rnote;
struct rinsel;
struct link;
struct rpull;
struct pktbuf;
struct proto_bind_msg;
struct prep_stmt;
struct rnorm;

#define ROUTE_SHARDS_MAX 32	/* shards one session may use */

/* How the answers of an exec's targets reach the client. */
enum rx_combine {
	RX_PASS = 0,	/* one target: everything forwarded as the shard sends it */
	RX_SUM,		/* rows concatenated, CommandComplete counts summed */
	RX_FIRST,	/* rows and tag of the first target only (DDL, every copy, SET) */
	RX_SPLIT,	/* INSERT split: counts summed, RETURNING rows back in input order */
	RX_QUIET,	/* nothing forwarded (COMMIT / ROLLBACK on the shards) */
	RX_MERGE,	/* rows, descriptions and tags through the merge step (route_merge.c) */
	RX_SEQ,		/* a sequence reservation: rows kept by route_seq.c, nothing forwarded */
	RX_PULL,	/* a round of a router-side portal: rows through its merge (route_pull.c) */
	RX_INSEL,	/* a round of INSERT ... SELECT: every answer to route_insel.c */
};

/*
 * Why a session holds a shard link across its transactions (route_pin.c): the link's
 * backend listens on a channel, or may hold a session-level advisory lock. A held link is
 * never given back to the pool; the session's statements on that shard keep using it. The
 * bits are set when such a statement is sent and corrected from the shard's own answer to
 * the probe (route_pin.c) once the link is outside a transaction again.
 */
enum rpin {
	RPIN_LISTEN = 1u << 0,
	RPIN_LOCK = 1u << 1,
};

/* A DataRow kept for reordering (RX_SPLIT). */
struct rrow {
	uint8_t *msg;		/* owned: the whole message */
	uint32_t len;
};

/* One shard the session uses. */
struct rshard {
	struct route *r;		/* back pointer */
	char uid[PLAN_SHARD_MAX];
	struct spool *sp;		/* borrowed: the pool for (shard, user) */
	struct link *link;		/* weak: held link, NULL when none */
	struct pool_waiter waiter;
	bool waiting;			/* queued in the pool */
	bool in_tx;			/* BEGIN was sent in the current transaction */
	bool tx_data;			/* ... and a statement other than SET / SHOW ran in it
					 * (the transaction's shard for __neki.tx_mode single) */
	bool tx_write;			/* ... and one the planner did not see as a read (a
					 * plain SELECT): atomic mode asks the others whether
					 * they wrote (route_2pc.c) */
	uint32_t swallow;		/* injected Queries whose answers are dropped */
	uint32_t holds;			/* WITH HOLD cursors on its link: kept after the
					 * transaction (pinned to the session) */
	/* the current exec */
	bool target, sent, done, failed;
	bool held;			/* merge_streams: paused by back-pressure */
	char *sql;			/* owned: per-shard text (INSERT split); NULL = statement */
	uint64_t count;			/* rows of its CommandComplete */
	bool counted;			/* its tag had a row count */
	char tag[64];			/* its CommandComplete tag without the count */
	struct rrow *rows;		/* RX_SPLIT */
	uint32_t nrows, caprows;
	uint8_t *ext_msg;		/* owned: extended protocol, its own messages (INSERT
					 * split); NULL = route.ext_msg */
	size_t ext_len;
	struct prep_stmt *prep_wait;	/* counted: a Parse of it went with the exec, its
					 * ParseComplete did not come yet */
	bool prep_used;			/* the exec binds a statement the link keeps */
	uint64_t a_rows;		/* ANALYZE: DataRows it sent */
	uint64_t a_sent_us, a_done_us;	/* ANALYZE: statement sent, answer complete */
	/* held across transactions (route_pin.c) */
	uint8_t pin;			/* enum rpin; 0: given back after each transaction */
	bool probe_due;			/* a LISTEN / UNLISTEN / session advisory-lock call ran:
					 * ask the shard what the link holds at its next
					 * transaction end */
	bool probing;			/* the probe went out behind the current statement */
	bool probe_reading;		/* that statement answered: the probe's answer is read */
	bool probe_ok;			/* the probe's row arrived */
	uint8_t probe_pin;		/* ... and what it says (enum rpin) */
	/* the session's settings on the link (route_sets.c) */
	uint64_t sets_version;		/* the route's sets_version the link's SETs are at; 0:
					 * it may hold more (reset before its next use) */
	uint32_t pend_applied;		/* operations of r->pend the link has run */
	bool pend_notx;			/* ... some of them outside a transaction of its own */
	bool dirty;			/* holds a value a fresh backend lacks: reset when it
					 * goes back to the pool */
	struct rtarget *tgt;		/* owned: standbys' pools, failover hold (route_target.c) */
	char *deadlock;			/* owned: the DETAIL of the wait cycle across shards
					 * its cancel breaks (route_deadlock.c); NULL */
};

/* What the current exec does once every target answered. */
enum rx_after {
	RX_AFTER_STMT = 0,	/* a statement: combine, next statement */
	RX_AFTER_COMMIT,	/* COMMIT on the shards */
	RX_AFTER_ROLLBACK,	/* ROLLBACK on the shards (also after a failed COMMIT) */
	RX_AFTER_SEQ,		/* sequence values were reserved: plan the statement again */
	RX_AFTER_2PC,		/* a step of the atomic commit (route_2pc.c) */
};

/* How a statement went (route.c's loop). */
enum rstep {
	RSTEP_DONE = 0,		/* answered; go on with the next statement */
	RSTEP_ASYNC,		/* an exec runs; route_exec_finished() goes on */
	RSTEP_STOP,		/* an error was sent; the rest of the Query is skipped */
	RSTEP_REDO,		/* EXECUTE: plan r->redo_sql in its place */
	RSTEP_WAIT,		/* a sharded table the catalog lacks: nothing was sent; plan
				 * the statement again once r->hold.cat_wait is served */
};

#define ROUTE_CAT_WAIT_US 5000000	/* longest wait for a catalog refresh */

/* The specification of an exec's merge (route_merge.c). */
struct rmerge_spec {
	struct plan_merge spec;		/* in arena */
	const struct parse_norm *norm;	/* simple protocol: spec is of this normalised text (in
					 * arena), its $k the literals of src (in arena); NULL */
	const char *src;
	/* the running statement's normalisation (stmt_run()'s), for a merge of that same text
	 * (stmt_sql) not to normalise it again */
	struct parse_norm stmt_norm;
	const char *stmt_sql;
};

/*
 * The statement being executed (the current exec): its targets, how their answers are
 * combined, and what it runs (merge, INSERT ... SELECT, COPY, a portal operation, EXPLAIN
 * ANALYZE). Set as each statement is planned (route.c) and its exec starts
 * (route_exec_start()), its owned parts freed when the exec ends; what outlives a statement
 * (transaction, SETs, PREPAREs, portals, cursors, notifications) stays in struct route.
 */
struct rexec {
	/* an extended-protocol batch (route_ext.c) */
	bool ext_exec;			/* the current exec runs an extended-protocol batch */
	bool ext_portal_describe;	/* ... that only describes a portal (no 't') */
	bool sync_pending;		/* Sync waits for that describe */
	uint8_t *ext_msg;		/* owned: the messages every target gets */
	size_t ext_len;
	struct prep_stmt *ext_pst;	/* borrowed (the portal's): ext_msg binds it by name, each
					 * link prepares it first when it lacks it; NULL: ext_msg
					 * starts with the unnamed statement's Parse */
	const struct parse_norm *ext_norm;	/* borrowed (the portal's): the Execute's statement
						 * normalised at its Parse; NULL: normalise it */
	const struct plan_param *ext_params;	/* the Execute's bound values (arena) */
	uint32_t ext_nparams;
	int32_t ext_max_rows;		/* the Execute's row limit (0: none) */
	bool ext_describe;		/* the client described the portal being executed */
	bool bind_owed;			/* the exec owes the client its portal's BindComplete: sent
					 * at a shard's BindComplete, or before the router's first
					 * message; never when a shard's error answers the Bind */
	struct nk_error *bind_err;	/* owned: the exec is a shard's Bind of values the router
					 * refused (route_ext_bind_check()): the router's error, sent
					 * if the shard takes them; NULL otherwise */
	/* the targets and how their answers combine */
	uint32_t tg[ROUTE_SHARDS_MAX];	/* shard numbers, in plan order */
	uint32_t ntg, pos, nwait;
	bool acq_urgent;		/* the session held links when the exec started: its
					 * targets' links are asked for urgently, all at once */
	uint32_t tg_mask;		/* bit i: r->sh[i] is a target (kept after the exec) */
	bool shards_used;		/* the shards' per-exec state may be set: an exec was
					 * set up or started since route_exec_reset() */
	bool sequential;
	enum rx_combine combine;
	uint8_t handler[RXH_COUNT];	/* enum rx_handler: those claiming packets, in order */
	uint8_t nhandlers;
	enum rx_after after;
	bool rowdesc_sent;
	bool has_err;
	bool err_forwarded;		/* RX_PASS: the shard's ErrorResponse went to the client */
	struct nk_error err;		/* first error of the exec */
	char *stmt_sql;			/* owned: the statement text sent to the shards */
	size_t stmt_sql_cap;		/* bytes allocated for it */
	uint32_t *split_shard;		/* owned: RX_SPLIT: input row -> target index */
	uint32_t *split_pos;		/* owned: RX_SPLIT: input row -> row of that target */
	uint32_t split_n;
	char end_tag[64];		/* tag to send when the exec ends (COMMIT, ROLLBACK) */
	struct rddl ddl;		/* the statement's DDL (route_ddl.c) */
	struct rcompose *compose;	/* owned: a statement composed over a __neki call's rows
					 * (route_compose.c); NULL none */
	struct rsubq *subq;		/* owned: what is read first (route_subq.c); NULL */
	bool subq_capture;		/* ... it runs (or a route_gsi.c step): answer kept */
	struct rgsi *gsi;		/* owned: the steps of a secondary index; NULL */
	/* RX_MERGE (route_merge.c) */
	const char *collate;		/* borrowed while planning: the database's LC_COLLATE */
	struct rmerge_spec ms;		/* the merge's specification */
	struct merge *merge;		/* owned: freed with the exec */
	bool merge_final;		/* the exec runs the merge's final combine query */
	bool merge_streams;		/* every target is read as its answers come */
	bool client_full;		/* the client's queue is long: shards held */
	uint32_t reading;		/* target whose answer is being handled */
	uint32_t ndone;			/* merge_streams: targets that sent ReadyForQuery */
	struct ranalyze an;		/* EXPLAIN (NEKI_PLAN, ANALYZE) of the exec */
	struct rpull_cur pull;		/* the operation on a router-side portal (route_pull.c) */
	/* INSERT ... SELECT the router runs (route_insel.c), COPY (route_copy.c) */
	struct rinsel *insel;		/* owned: in progress; every exec end goes to it */
	struct rcopy *copy;		/* owned: COPY FROM in progress; freed with the exec */
	struct rcopy_out cout;		/* COPY TO over several shards */
};

struct route {
	struct exec_client c;		/* the client (neki/exec.h) */
	struct rarena *arena;		/* owned: per statement */
	struct plan_session ps;		/* __neki.* settings */
	char *db;			/* owned: database name in the topology */
	struct rshard sh[ROUTE_SHARDS_MAX];
	uint32_t nsh;
	char tx;			/* 'I', 'T' or 'E' as the client sees it */
	bool implicit;			/* tx 'T'/'E' is the Query's implicit transaction */
	bool implicit_end;		/* ... being committed / rolled back at the Query's end */
	bool ext_implicit;		/* the implicit transaction of one extended-protocol
					 * statement (INSERT ... SELECT), ended with it */
	bool ext_implicit_failed;	/* ... and that statement failed */
	char ext_tag[64];		/* ... and its tag (last_tag) kept over the COMMIT */
	char *begin_sql;		/* owned: BEGIN text sent lazily to each shard */
	struct rgucs gucs;		/* the session's settings (route_sets.c) */
	uint64_t sets_version;		/* bumped when r->sets change (never 0): a link behind
					 * it is reset and replayed before its next use */
	bool settings_exec;		/* the exec is a SET / RESET / SHOW (not data) */
	bool exec_reads;		/* the exec is a plain SELECT (no INTO, no writing CTE) */
	struct event *ev;		/* owned: deferred end of an exec */
	struct rhold hold;		/* held for the catalog (route_hold.c) */
	bool in_cb;			/* inside the client's packet callback */
	bool busy;			/* a Query is being executed */
	bool cancel_pending;		/* a cancel arrived: parts not sent yet are not sent */
	uint64_t query_start_us;	/* the running Query / batch began (query_timeout) */
	uint64_t stats_start_us;	/* the first work since the last ReadyForQuery began
					 * (SHOW STATS: query count and time) */
	uint64_t xact_start_us;		/* the client's transaction began: its first Query or
					 * exec (transaction_timeout); 0 after ReadyForQuery 'I' */
	bool ext_failed;		/* extended protocol: an error, skip up to Sync */
	struct rstmt *stmts;		/* owned: extended-protocol statements */
	struct rprep *preps;		/* owned: SQL-level PREPAREd statements */
	char *redo_sql;			/* owned: EXECUTE's statement, planned next */
	struct rportal *portals;	/* owned: the session's portals and cursors */
	struct route_svp *svp;		/* owned: the transaction's savepoints (route_svp.c) */
	struct route_2pc *tpc;		/* owned: atomic commit state (route_2pc.c) */
	struct rportal *xportal;	/* weak: the portal the extended-protocol exec runs */
	bool suspended;			/* the exec's shard sent PortalSuspended */
	bool xrows;			/* the extended-protocol statement returns rows */
	char last_tag[64];		/* the exec's last CommandComplete tag, without count */
	struct rportal *cur_new;	/* owned: a DECLAREd cursor, added when its exec succeeds */
	struct rportal *cur_close;	/* weak: dropped when its CLOSE's exec succeeds */
	bool cur_close_all;		/* CLOSE ALL: every portal then */
	char reply_tag[32];		/* the router's tag for an exec whose answers are dropped */
	bool reply_nodata;		/* ... after NoData (a described portal) */
	/* the Query being executed */
	char *query;			/* owned: its text */
	struct parse_span *spans;	/* in query_arena */
	uint32_t nspans, cur;
	struct rarena *query_arena;	/* owned: spans of the current Query */
	bool commit_failed;		/* a COMMIT failed; the rest is being rolled back */
	struct nk_error commit_err;	/* what the client is told then */
	struct rseq seq;		/* sequence values (route_seq.c) */
	struct rnotes notes;		/* notifications of the listening link (route_listen.c) */
	bool ext_open;			/* extended-protocol messages since the last Sync */
	struct rexec x;			/* the current exec (struct rexec) */
};

static inline bool
route_streq(const char *a, const char *b)
{
	return strcmp(a, b) == 0;
}

/* <src> into <dst> of <cap> bytes, cut to fit (a command tag per statement: no snprintf). */
static inline void
route_strcpy(char *dst, size_t cap, const char *src)
{
	size_t n = strnlen(src, cap - 1);

	memcpy(dst, src, n);
	dst[n] = '\0';
}

/* ---- route.c ---- */

/* The current exec ended (deferred from the last answer): combine and go on. */
void route_exec_finished(struct route *r);
/* r->x.stmt_sql becomes a copy of <sql>; false on no memory. */
NK_MUSTCHECK bool route_keep_sql(struct route *r, const char *sql);
/* Set up an exec on <uids>[0..n) running <sql> (parallel; RX_PASS for one target). */
NK_MUSTCHECK bool route_exec_setup(struct route *r, const char *const *uids, uint32_t n,
				   const char *sql, struct nk_error *err);
/* Open the Query's implicit transaction (committed or rolled back at the Query's end). */
NK_MUSTCHECK bool route_implicit_begin(struct route *r);
/* A COPY FROM ended: <err> (NULL: none) or <tag>, then the next statement. */
void route_copy_done(struct route *r, const char *tag, const struct nk_error *err);
/* A statement run by its own machinery (INSERT ... SELECT) ended: <err> (NULL: none) or
 * <tag>, then the next statement (or the Query's / the extended statement's end). */
void route_stmt_finish(struct route *r, const char *tag, const struct nk_error *err);
/* The field <err> adds to its ErrorResponse: a shard's CONTEXT ('W'), or the position ('P',
 * written into <buf>) of a syntax error found by the router, counted in the client's text
 * (<in_query>: in the current statement of r->query); false when none. */
bool route_err_field(const struct route *r, const struct nk_error *err, bool in_query,
		     struct proto_err_field *f, char *buf, size_t cap);
/* <err> read from a shard's ErrorResponse <msg> (whole, <len> bytes) keeps the error's
 * position (in err->where, as the router's syntax errors: route_err_field() counts it in
 * the whole Query) when the shards ran the statement as the client wrote it. */
void route_error_keep_position(const struct route *r, const uint8_t *msg, uint32_t len,
			       struct nk_error *err);
/* A shard's ErrorResponse <msg> (whole, <len> bytes) to a statement of a Query sent as the
 * client wrote it: into <pb> (begun and ended here) with its position ('P') counted in the
 * whole Query, as Postgres reports it; false (nothing written) when that does not apply. */
bool route_shard_err_in_query(const struct route *r, const uint8_t *msg, uint32_t len,
			      struct pktbuf *pb);
/* Send <pb> (freed) to the client; false when the client is gone (the session is closed). */
NK_MUSTCHECK bool route_send(struct route *r, struct pktbuf *pb);
/* An error ends the statement (sent; a transaction block becomes aborted): RSTEP_STOP. */
enum rstep route_fail(struct route *r, const struct nk_error *err);
/* Start the exec set up (r->busy): RSTEP_ASYNC, or RSTEP_STOP after route_fail(). */
enum rstep route_exec_run(struct route *r);
/* A Query, exec or round starts (r->busy): the query's and the transaction's clocks start
 * unless running (query_timeout, transaction_timeout). */
void route_set_busy(struct route *r);
/* ReadyForQuery with r->tx into <pb>; outside a transaction its clock stops. */
void route_ready_write(struct route *r, struct pktbuf *pb);
/* Send the BindComplete the exec owes (r->x.bind_owed), once; false when the client is gone. */
NK_MUSTCHECK bool route_bind_complete(struct route *r);
/* The router refused a bound value (plan.bad_param, <err>): shard <uid> binds the values, so
 * the client gets Postgres' own error at its Bind (or <err> if the shard takes them). */
enum rstep route_ext_bind_check(struct route *r, const char *uid, const struct nk_error *err);
/* Is the session in a transaction block (explicit, or a simple Query's implicit one)? */
bool route_in_block(const struct route *r);
/* End the extended-protocol batch's implicit transaction (at Sync): true while its COMMIT
 * (ROLLBACK after an error) runs on the shards. */
bool route_implicit_end(struct route *r);

/* A catalog refresh after DDL is not served yet: arm the poll timer to call <resume>
 * (true); false when there is nothing (more) to wait for. */
bool route_cat_wait(struct route *r, enum route_resume resume);
/* The extended protocol's Execute waited for a catalog load: plan and run it again. */
void route_ext_exec_resume(struct route *r);

/* The shard that answers statements needing "any shard": one the transaction
 * uses, or the authoritative group's shard; <img> the pinned topology image. */
const char *route_any_shard(struct route *r, const void *img);


#endif /* NEKI_EXEC_ROUTE_INT_H */
