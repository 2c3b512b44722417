/*
 * route_int.h - the executor of sharded databases (a session whose [databases] entry has
 * topology=yes): shared by src/worker/route*.c and the session hooks only.
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
#ifndef NEKI_WORKER_ROUTE_INT_H
#define NEKI_WORKER_ROUTE_INT_H

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

/* What one operation on the session's settings does (route_sets.c). */
enum rguc_kind {
	RGUC_SET = 0,	/* SET [SESSION] name, set_config(name, v, false): the session's value */
	RGUC_LOCAL,	/* SET LOCAL, SET TRANSACTION, set_config(name, v, true): to the end of
			 * the transaction */
	RGUC_RESET,	/* RESET name, SET name TO DEFAULT, set_config(name, NULL, false) */
	RGUC_RESET_ALL,	/* RESET ALL: every parameter but role */
};

/* One operation on the session's settings: what the session ran, replayed on links. */
struct rguc {
	enum rguc_kind kind;
	char *name;		/* owned: lowercased parameter name; NULL for RESET ALL */
	char *sql;		/* owned: a statement doing it on a link */
};

/* A DataRow kept for reordering (RX_SPLIT). */
struct rrow {
	uint8_t *msg;		/* owned: the whole message */
	uint32_t len;
};

/* A statement of the extended protocol (Parse), by client name. */
struct rstmt {
	struct rstmt *next;
	char *name, *query;		/* owned */
	uint8_t *oids;			/* owned: noids big-endian uint32 */
	uint16_t noids;
	bool tx_exit;			/* COMMIT / ROLLBACK: runs in an aborted transaction */
	bool rows;			/* it returns rows */
	struct prep_stmt *pst;		/* counted: a named one, kept prepared on the shard links
					 * (prepared.c); NULL: unnamed, or max_prepared_statements 0 */
	struct rnorm *norm;		/* counted: its normalisation */
};

/* A statement of SQL-level PREPARE (route_prep.c). */
struct rprep {
	struct rprep *next;
	char *name, *body;		/* owned */
	char **types;			/* owned: declared parameter types (text) */
	uint32_t ntypes, nparams;
};

/* Where a portal stands (route_portal.c). */
enum rportal_state {
	RPORTAL_BOUND = 0,	/* bound (Bind, DECLARE): not executed yet */
	RPORTAL_OPEN,		/* executed, suspended: more rows may come */
	RPORTAL_DONE,		/* ran to completion: an Execute gives no more rows */
};

/*
 * A portal of the session by client name: a Bind, or a cursor DECLAREd in SQL (Postgres
 * keeps both in one namespace). A portal whose rows one shard gives has a portal (or a
 * cursor) of its own on that shard's link, its "mirror" (route_portal_mirror()); one over
 * several shards is read by the router (pull, route_pull.c) from a mirror on each.
 */
struct rportal {
	struct rportal *next;
	char *name;			/* owned; "" is the unnamed portal */
	char *query;			/* owned: the statement's text */
	uint8_t *oids;			/* owned: its parameter types, noids big-endian uint32 */
	uint16_t noids;
	uint8_t *bind;			/* owned: its Bind with both names empty (its formats and
					 * values; DECLARE over the extended protocol: its Bind's);
					 * NULL: none */
	size_t bind_len;
	bool one_block;			/* name, query, oids and bind live in its own block */
	bool describe;			/* Describe P arrived: answered with the first Execute */
	bool bind_owed;			/* its Bind is not answered yet: the first shard that binds
					 * its values answers it (route_ext.c) */
	bool is_cursor;			/* DECLARE (else Bind) */
	bool hold, binary, scroll;	/* cursor options WITH HOLD, BINARY, SCROLL */
	bool tx_new;			/* created in the open transaction (ROLLBACK drops it) */
	uint32_t svp_gen;		/* route_svp_gen() when created (ROLLBACK TO drops it) */
	enum rportal_state state;
	bool rows;			/* DONE: its statement returns rows (Execute: "<tag> 0") */
	char tag[64];			/* DONE: its command tag without the row count */
	uint32_t mask;			/* bit i: r->sh[i] holds its mirror */
	bool lost;			/* a link holding a mirror broke: it cannot go on */
	struct rpull *pull;		/* owned: several shards: the router's side of it */
	struct prep_stmt *pst;		/* counted: its statement's (NULL: sent with Parse) */
	struct rnorm *norm;		/* counted: its statement's (NULL: a cursor's) */
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
				 * the statement again once r->cat_wait is served */
};

#define ROUTE_CAT_WAIT_US 5000000	/* longest wait for a catalog refresh */

/* What the catalog poll timer resumes once a refresh after DDL (or a catalog load asked for
 * a table it lacked) is served, or what the session waits for before it is served. */
enum route_resume {
	ROUTE_RESUME_NEXT = 0,	/* the next statement of the Query */
	ROUTE_RESUME_QUERY_END,	/* the Query's ReadyForQuery */
	ROUTE_RESUME_SYNC,	/* the extended protocol's Sync */
	ROUTE_RESUME_EXEC,	/* the extended protocol's Execute, planned again */
	ROUTE_RESUME_HOLD,	/* the first message, once topology and catalog are loaded */
};

/* The specification of an exec's merge (route_merge.c). */
struct rmerge_spec {
	struct plan_merge spec;		/* in arena */
	const struct parse_norm *norm;	/* simple protocol: spec is of this normalised text (in
					 * arena), its $k the literals of src (in arena); NULL */
	const char *src;
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
	uint64_t cat_wait;		/* catalog refresh to wait for (0 none): after DDL, the
					 * next statement and ReadyForQuery wait for it */
	enum route_resume resume;	/* what the poll timer resumes */
	uint64_t cat_done_us;		/* the last wait for r->cat_wait ended (route_hold.c) */
	bool fetch_off;			/* a plan again after sequence values: no catalog wait */
	bool ready;			/* topology and catalog of r->db were loaded: served */
	bool hold_asked;		/* held: a catalog load was asked for (once) */
	uint64_t hold_since_us;		/* the first message began to wait then */
	struct event *ev;		/* owned: deferred end of an exec */
	struct event *ev_poll;		/* owned: catalog refresh poll timer */
	uint64_t poll_deadline_us;	/* give up waiting for the catalog then */
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
	/* the Query being executed */
	char *query;			/* owned: its text */
	struct parse_span *spans;	/* in query_arena */
	uint32_t nspans, cur;
	struct rarena *query_arena;	/* owned: spans of the current Query */
	/* the current exec */
	uint32_t tg[ROUTE_SHARDS_MAX];	/* shard numbers, in plan order */
	uint32_t ntg, pos, nwait;
	bool acq_urgent;		/* the session held links when the exec started: its
					 * targets' links are asked for urgently, all at once */
	uint32_t tg_mask;		/* bit i: r->sh[i] is a target (kept after the exec) */
	bool sequential;
	enum rx_combine combine;
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
	bool commit_failed;		/* a COMMIT failed; the rest is being rolled back */
	struct nk_error commit_err;	/* what the client is told then */
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
	struct rseq seq;		/* sequence values (route_seq.c) */
	struct rnotes notes;		/* notifications of the listening link (route_listen.c) */
	bool ext_open;			/* extended-protocol messages since the last Sync */
	/* INSERT ... SELECT the router runs (route_insel.c) */
	struct rinsel *insel;		/* owned: in progress; every exec end goes to it */
	/* COPY (route_copy.c) */
	struct rcopy *copy;		/* owned: COPY FROM in progress; freed with the exec */
	struct rcopy_out cout;		/* COPY TO over several shards */
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
/* r->stmt_sql becomes a copy of <sql>; false on no memory. */
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
/* Send the BindComplete the exec owes (r->bind_owed), once; false when the client is gone. */
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

/* ---- route_hold.c ---- */

/* The first message of a session: true when the topology and the catalog of its database are
 * loaded (the session is served from now on); false when it waits (the client's packet is
 * offered again once they are, or the session ends at query_wait_timeout). */
bool route_hold_ready(struct route *r);
/* The poll timer of a held session (ROUTE_RESUME_HOLD). */
void route_hold_poll(struct route *r);
/* The plan met <u>, a sharded table the catalog lacks: true when a catalog load was asked
 * for and the statement waits for it (r->cat_wait); false when it goes on as planned (a
 * wait ended less than a second ago, or r->fetch_off), and then the plan's refusal <err>
 * (NULL: it was not refused) says in its DETAIL that the catalog lacks the table. */
bool route_hold_unknown(struct route *r, const struct plan_unknown *u, struct nk_error *err);
/* What Parse needs to know of a statement (route_analyse()). */
struct route_stmt_info {
	bool tx_exit;		/* COMMIT, ROLLBACK [TO], PREPARE TRANSACTION: allowed in an
				 * aborted transaction */
	bool rows;		/* it returns rows (its description is refused there) */
	struct parse_norm norm;	/* its normalisation (in r->arena) */
};

/* A statement's normalisation, kept from its Parse (shared by the statement and its portals,
 * refcounted; the key, literals and their values in the same allocation). */
struct rnorm {
	int refs;
	struct parse_norm norm;
};
/* A copy of <n> in one allocation, one reference; NULL on no memory. Drop a reference. */
struct rnorm *route_norm_copy(const struct parse_norm *n);
void route_norm_unref(struct rnorm *n);

/* Normalise and analyse <sql> (cached): syntax errors at Parse; <info> may be NULL. */
NK_MUSTCHECK bool route_analyse(struct route *r, const char *sql,
				struct route_stmt_info *info, struct nk_error *err);
/* Plan <sql> with bound <params> and run it with r->ext_msg; false when the session closed. */
bool route_run_ext(struct route *r, const char *sql, const struct plan_param *params,
		   uint32_t nparams);
/* Send r->ext_msg (Parse + Describe S + Sync) to one shard holding the tables of <sql>. */
bool route_describe_stmt(struct route *r, const char *sql);

/* ---- route_ext.c ---- */

/* Parse / Bind / Describe / Execute / Close / Sync / Flush of a routed session. */
bool route_on_ext(struct route *r, const struct sbuf_pkt *pkt);
/* <sh>'s own messages for its text sh->sql (an INSERT split's part): r->ext_msg with its
 * Parse replaced; the parameters the part does not reference get a type (text, bytea for a
 * binary value) so the shard accepts the whole Bind. False on no memory. */
NK_MUSTCHECK bool route_ext_part(struct route *r, struct rshard *sh);
/* Make r->ext_msg run <sql>, the shard query of r->mspec (hidden columns in text, Describe P
 * for the merge) or with <final> its final combine query (text), with the portal's values. */
NK_MUSTCHECK bool route_ext_merge_msgs(struct route *r, const char *sql, bool final,
				       struct nk_error *err);
/* Make r->ext_msg start with the unnamed statement's Parse (when it binds a statement the
 * links keep: a part of its own, a rewritten text); false on no memory. */
NK_MUSTCHECK bool route_ext_unnamed(struct route *r);
/* The Sync that waited for an exec. */
bool route_ext_sync(struct route *r);
/* The shard query's result formats: the client's (<m>'s) for the visible columns of <spec>,
 * text for the hidden ones; false with <err> when they do not fit. */
/* The result formats of <mg>'s final combine query into Bind <pb>: binary where the client
 * reads a final value in binary (the merge passes those bytes on), text for the rest. False
 * on no memory. */
NK_MUSTCHECK bool route_merge_final_formats(struct pktbuf *pb, const struct merge *mg);
NK_MUSTCHECK bool route_merge_formats(struct pktbuf *pb, const struct proto_bind_msg *m,
				      const struct plan_merge *spec, struct nk_error *err);
/* Parameter types of a merge query <sql>: <x>'s (NULL: none); a parameter <sql> does not
 * reference and the client left untyped gets int8 for LIMIT/OFFSET of <spec>, bytea
 * (bound in binary in <m>) or text otherwise (Postgres refuses a type it cannot infer). */
void route_merge_oids(const struct plan_merge *spec, const struct rportal *x,
		      const struct proto_bind_msg *m, const char *sql, uint16_t n, uint32_t *o);
/* The Sync that waited for a catalog refresh (route_cat_wait()). */
void route_ext_sync_resume(struct route *r);
void route_ext_free(struct route *r);
/* The protocol-level statement <name> (one namespace with SQL-level PREPARE, as Postgres):
 * is there one, drop it (false when there was none), drop them all. */
bool route_ext_has_stmt(struct route *r, const char *name);
bool route_ext_drop_stmt(struct route *r, const char *name);
void route_ext_drop_stmts(struct route *r);

/* ---- route_exec.c ---- */


/* The rshard of <uid> (added when new); NULL when too many or the shard is not declared. */
struct rshard *route_shard(struct route *r, const char *uid, struct nk_error *err);
/* Start the exec set up in r->tg/ntg/...: acquire links, send. False: nothing was sent. */
NK_MUSTCHECK bool route_exec_start(struct route *r, struct nk_error *err);
/* Give back every link (outside a transaction) / break them at session close. */
void route_release_links(struct route *r);
void route_drop_links(struct route *r);
/* Clear the per-exec state of every shard. */
void route_exec_reset(struct route *r);

/* Send <sql> to <l> as a simple Query; false when it could not be queued. */
NK_MUSTCHECK bool route_link_query(struct link *l, const char *sql);

/* ---- route_sets.c ---- */

/* The exec set up for SET / RESET / SET TRANSACTION <st> (text <sql>): r->xsets gets what it
 * does once it succeeds. False on no memory. */
NK_MUSTCHECK bool route_sets_stmt(struct route *r, const struct stmt *st, const char *sql);
/* ... for the set_config() calls of plan <p>. */
NK_MUSTCHECK bool route_sets_calls(struct route *r, const struct plan *p);
/* A new exec is set up: nothing of the previous one's r->xsets is left. */
void route_sets_exec_clear(struct route *r);
/* The exec succeeded: r->xsets take effect on the model (at once outside a transaction,
 * pending until its end inside one) and on its targets' bookkeeping; a RESET of reported
 * parameters brings them back to the session's login values (the client is told, the
 * targets set). False when the client is gone (the session is closed). */
NK_MUSTCHECK bool route_sets_done(struct route *r);
/* DISCARD ALL on the reported parameters: back to the login values, the client told (false
 * when it is gone). */
NK_MUSTCHECK bool route_sets_defaults_all(struct route *r);
/* The exec failed: targets that ran r->xsets outside a transaction of their own did what the
 * model does not have (reset before their next use, and at release). */
void route_sets_failed(struct route *r);
/* The transaction (block, implicit, extended-protocol batch) ends: <commit> folds its
 * operations into the session's SETs, else they are dropped; <undone>: the shard
 * transactions of the links in it were rolled back (false: some may have committed). */
void route_sets_end(struct route *r, bool commit, bool undone);
/* DISCARD ALL: every setting forgotten; the links are reset before their next use. */
void route_sets_discard(struct route *r);
void route_sets_free(struct route *r);
/* Bring link <l> of <sh> to the session's SETs (one injected Query, swallowed): <fresh>, just
 * from the pool, gets the varcache diff and r->sets; otherwise (behind) RESET ROLE; RESET
 * ALL, every tracked value and r->sets. False when it could not be sent. */
NK_MUSTCHECK bool route_sets_replay(struct rshard *sh, struct link *l, bool fresh);
/* Run on <sh>'s link the operations of r->pend it lacks (after its BEGIN in a transaction). */
NK_MUSTCHECK bool route_sets_replay_pending(struct rshard *sh);
/* The same up to r->pend[<upto>] (a savepoint's mark); ROLLBACK TO a savepoint set after
 * <mark> operations drops the later ones (links in the transaction undo them themselves). */
NK_MUSTCHECK bool route_sets_replay_upto(struct rshard *sh, uint32_t upto);
void route_sets_rollback_to(struct route *r, uint32_t mark);
/* Give <sh>'s link <l> back to its pool: through a reset when it is dirty, closed when it
 * is not idle. */
void route_give_back(struct rshard *sh, struct link *l);

/* ---- route_sql.c ---- */

/* Read an ErrorResponse message (whole, with type and length) into <out>. */
void route_error_from_msg(const uint8_t *msg, uint32_t len, struct nk_error *out);
/* Append "<word> on shards a, b" of the targets [0, upto) to <err>'s DETAIL. */
void route_detail_shards(struct route *r, struct nk_error *err, const char *what,
			 uint32_t from, uint32_t upto);

/*
 * The statements of r->query into r->spans / r->nspans (in r->query_arena): a text of one
 * statement (no ';' but maybe a final one) needs no scanner's split (its syntax errors come
 * from its analysis; whitespace before it is kept, so the shard's error positions stay those
 * of the client's text); any other goes through parse_split(). False with <err> set.
 */
NK_MUSTCHECK bool route_query_split(struct route *r, struct nk_error *err);

/* ---- route_prep.c ---- */

/* PREPARE name [(types)] AS stmt: kept for the session (its syntax checked now). */
NK_MUSTCHECK bool route_prepare(struct route *r, const char *sql, struct nk_error *err);
/* EXECUTE name [(args)]: the statement's text with the arguments (malloc'd), NULL on error. */
char *route_execute_sql(struct route *r, const char *sql, struct nk_error *err);
/* DEALLOCATE [PREPARE] name | ALL (*all set for ALL). */
NK_MUSTCHECK bool route_deallocate(struct route *r, const char *sql, bool *all,
				   struct nk_error *err);
/* Is there a PREPAREd statement <name>? Drop it (false when there is none). */
bool route_prep_has(struct route *r, const char *name);
bool route_prep_drop(struct route *r, const char *name);
void route_prep_free(struct route *r);

/* ---- route_merge.c ---- */

/* The database's collation in <cv> (NULL when unknown: byte order). */
const char *route_db_collation(const struct cat_view *cv);
/* The merge options of the session's merges: its collation, router_work_mem, the catalog's
 * enum types (looked up when a result column has one). */
struct merge_options route_merge_options(struct route *r);
/* plan_catalog.merges_type over a struct cat_view <arg>. */
bool route_merges_type(void *arg, uint32_t oid);
/* Make the exec set up on the targets run the merge step of SELECT <sql> (RX_MERGE). */
NK_MUSTCHECK bool route_merge_setup(struct route *r, const char *sql, struct nk_error *err);
/* A whole 'T', 'D' or 'C' of the target being read; false when the session closed. */
bool route_merge_feed(struct route *r, const struct sbuf_pkt *pkt);
/* Every target answered: true when the final combine query was started (or the session
 * closed), false when the merge is complete. */
bool route_merge_final(struct route *r);
void route_merge_free(struct route *r);
/* merge_streams: may target <k> be read now (false: the merge holds enough of its rows, or
 * the client's queue is long)? */
bool route_merge_may_read(struct route *r, uint32_t k);
/* merge_streams: resume the held targets that may be read again. */
void route_merge_resume(struct route *r);

/* ---- route_portal.c ---- */

/* The portal (or cursor) <name>; NULL when there is none. */
struct rportal *route_portal_find(struct route *r, const char *name);
/* A new portal <name> (not in the session's list yet); NULL on no memory. */
struct rportal *route_portal_new(const char *name);
/* A new portal of a Bind: <name>, a copy of <query> and of its <noids> parameter types,
 * and <rest>, the Bind after its two names; one allocation. NULL on no memory. */
struct rportal *route_portal_new_bind(const char *name, const char *query, const uint8_t *oids,
				      uint16_t noids, const uint8_t *rest, size_t rest_len);
/* Put <p> in the session's list; the unnamed portal replaces the one there was. */
void route_portal_add(struct route *r, struct rportal *p);
/* Take <p> out of the list and free it; <close>: close its mirrors on their links first. */
void route_portal_drop(struct route *r, struct rportal *p, bool close);
/* Free <p> (not in the list) with its router-side part. */
void route_portal_free(struct rportal *p);
/* The name of <p>'s mirror on its shards (the unnamed portal's is a name of its own, so
 * the router's own unnamed statements never replace it). */
const char *route_portal_mirror(const struct rportal *p);
/* The transaction ends: every portal goes but the WITH HOLD cursors (<commit>: also those
 * it declared); also outside a transaction at Sync. */
void route_portals_tx_end(struct route *r, bool commit);
/* DISCARD ALL / CLOSE ALL succeeded: every portal goes (<unpin>: links of WITH HOLD
 * cursors are closed). */
void route_portals_drop_all(struct route *r, bool unpin);
void route_portals_free(struct route *r);
/* The link of r->sh[<i>] broke: the portals it held a mirror of are lost. */
void route_portals_link_lost(struct route *r, uint32_t i);
/* 08006 for lost portal <p> in <err>; false. */
bool route_portal_lost(const struct rportal *p, struct nk_error *err);
/* <p>'s Bind read into <m> (which points into <p>: valid while <p> is); a portal without one
 * (NULL, a SQL cursor) reads as a Bind without values. */
NK_MUSTCHECK bool route_portal_bind_msg(const struct rportal *p, struct proto_bind_msg *m,
					struct nk_error *err);
/* Execute of a portal already executed, or of a cursor; false when the session closed. */
bool route_portal_execute(struct route *r, struct rportal *p, int32_t max_rows);
/* Describe P of a portal already executed (or a cursor): answered at once or by its shard. */
bool route_portal_describe(struct route *r, struct rportal *p);
/* The extended-protocol exec of r->xportal ended (<ok>): its state, its mirror. */
void route_portal_ran(struct route *r, bool ok);
/* Does the statement of <st> return rows (SELECT, RETURNING, FETCH, SHOW, EXPLAIN)? */
bool route_stmt_returns_rows(const struct stmt *st);

/* ---- route_cursor.c ---- */

/* DECLARE / FETCH / MOVE / CLOSE planned as <p> (<sql> the statement's text). */
enum rstep route_cursor_stmt(struct route *r, const struct plan *p, const char *sql);
/* The statement ended (<ok>): a DECLAREd cursor is added, a CLOSEd one dropped. */
void route_cursor_settle(struct route *r, bool ok);

/* ---- route_pull.c ---- */

enum rpull_rc {
	RPULL_ASYNC = 0,	/* a round of shard pulls runs (or the client's queue is long) */
	RPULL_DONE,		/* the operation's answer is sent */
	RPULL_FAILED,		/* r->err says why (nothing of it was sent) */
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

/* ---- route_seq.c ---- */

enum route_seq_rc {
	ROUTE_SEQ_READY = 0,	/* values taken: send *sql (the plan is routed) */
	ROUTE_SEQ_ASYNC,	/* a reservation runs (or is waited for): plan again after it */
	ROUTE_SEQ_FAILED,	/* <err> says why; nothing was sent */
};

/*
 * A plan with fills or nextval() calls (<in> as planned, <*sql> the statement's text):
 * take the values and rewrite *sql (extended protocol: r->ext_msg's Parse too), or start
 * the reservation on the home shard (RX_SEQ exec, RX_AFTER_SEQ) or wait for another
 * session's one (route_exec_finished() is called either way).
 */
enum route_seq_rc route_seq_plan(struct route *r, const struct plan_input *in, struct plan *p,
				 const char **sql, struct nk_error *err);
/* A message of the reservation's answer other than ReadyForQuery / ErrorResponse. */
bool route_seq_msg(struct route *r, struct link *l, const struct sbuf_pkt *pkt);
/* The reservation (or the wait) ended: false when it failed (r->err). */
bool route_seq_end(struct route *r);
/* Session close: leave the waiters' list, end a reservation in flight. */
void route_seq_free(struct route *r);
/* setval() of the exec ran (<ok>) or failed (r->err): every worker drops the values it
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
 * session's is awaited); route_exec_finished() follows with r->after RX_AFTER_SEQ, then
 * route_seq_end() and this again.
 */
enum route_seq_rc route_seq_fill_values(struct route *r, const struct plan_fill *const *fills,
					uint32_t nfills, uint32_t n, int64_t *values,
					struct nk_error *err);

/* ---- route_pin.c ---- */

/* A statement of kind <pin> (a session-level advisory-lock call) goes to <sh>'s link. */
void route_pin_mark(struct rshard *sh, enum plan_pin pin);
/* The shard whose link holds the session's advisory locks (the planner's 60); NULL. */
const char *route_pin_lock_shard(const struct route *r);
/* Is <sh>'s link held by the session across transactions (or asked about)? */
bool route_pin_held(const struct rshard *sh);
/* The exec's statement went to <sh>: send the probe behind it when one is due and the link
 * is outside a transaction after it. False when sending failed. */
NK_MUSTCHECK bool route_pin_after_send(struct route *r, struct rshard *sh);
/* A message of the probe's answer (sh->probe_reading); *<done> after its ReadyForQuery. */
bool route_pin_probe_msg(struct route *r, struct rshard *sh, struct link *l,
			 const struct sbuf_pkt *pkt, bool *done);
/* <sh>'s link broke: when it was held, the session ends (its LISTEN and locks are gone on
 * the shard) and true is returned. */
bool route_pin_lost(struct route *r, struct rshard *sh, const struct nk_error *err);
/* DISCARD ALL: an exec on every held link releasing what it holds (UNLISTEN *, every
 * advisory lock), answered "DISCARD ALL"; false with <err> unset when none is held. */
bool route_pin_discard(struct route *r, struct nk_error *err);

/* ---- route_listen.c ---- */

/* LISTEN / UNLISTEN / NOTIFY <sql>: set up the exec on the notify shard (*<exec>), or for
 * UNLISTEN when nothing listens, *<exec> false: the router answers. False with <err>. */
NK_MUSTCHECK bool route_listen_stmt(struct route *r, const char *tag, const char *sql,
				    const void *img, bool *exec, struct nk_error *err);
/* A NotificationResponse on <sh>'s link: sent now when the client is idle outside a
 * transaction, else held until it is; false pauses the link (too many held). */
bool route_listen_notify(struct route *r, struct rshard *sh, struct link *l,
			 const struct sbuf_pkt *pkt);
/* pg_notification_queue_usage(): the NOTICE naming __neki.notification_queue_usage(). */
NK_MUSTCHECK bool route_listen_usage_notice(struct route *r);

/* After DDL, the catalog loaded: the NOTICE naming __neki.wait_for_ddl(schema_version,
 * cluster_version), outside a transaction block (route_ddl.c). */
void route_ddl_notice(struct route *r);
/* The shard that answers statements needing "any shard" (route.c): one the transaction
 * uses, or the authoritative group's shard; <img> the pinned topology image. */
const char *route_any_shard(struct route *r, const void *img);

/* The table DDL statement <st> creates or alters, for the advisor's NOTICEs after it. */
void route_ddl_target(struct route *r, const struct stmt *st);
void route_listen_free(struct route *r);

/* ---- route_insel.c ---- */

/* Start INSERT ... SELECT planned as <p> (PLAN_OP_INSERT_SELECT) with image <img>: the
 * source's cursors are declared and read; false with <err> when nothing was started. It
 * joins the open transaction (a block, a Query's or a batch's implicit one) or, with none
 * open (r->tx 'I'), opens its own implicit one (ended with the Query or its Execute). */
NK_MUSTCHECK bool route_insel_start(struct route *r, const struct plan *p, const void *img,
				    struct nk_error *err);
/* An answer of a round (RX_INSEL) other than ErrorResponse / ReadyForQuery / notices. */
bool route_insel_msg(struct route *r, struct rshard *sh, struct link *l,
		     const struct sbuf_pkt *pkt);
/* An exec of the statement ended (a round, a sequence reservation): go on or finish. */
void route_insel_next(struct route *r);
/* The client's queue drained: a round waiting for it starts; false when none waited. */
bool route_insel_client_ready(struct route *r);
void route_insel_free(struct route *r);
/* ---- route_copy.c ---- */

/* Start COPY FROM STDIN planned as <p> (<img>: the image it was planned with). */
NK_MUSTCHECK bool route_copy_from(struct route *r, const struct plan *p, const char *sql,
				  const void *img, struct nk_error *err);
/* A shard's message during COPY FROM; false pauses the link. */
bool route_copy_on_link(struct route *r, struct rshard *sh, struct link *l,
			const struct sbuf_pkt *pkt);
/* The client's message during COPY FROM; false pauses the client. */
bool route_copy_on_client(struct route *r, const struct sbuf_pkt *pkt);
/* The link of target <sh> broke during COPY FROM (r->err says so): the others abort. */
void route_copy_link_lost(struct route *r, struct rshard *sh);
/* Every target of the COPY FROM answered: report and go on. */
void route_copy_finished(struct route *r);
void route_copy_free(struct route *r);
/* COPY TO over several shards: one CopyOutResponse, header, trailer and CopyDone. */
void route_copy_out_setup(struct route *r, const struct stmt_copy *cp);
bool route_copy_out_pkt(struct route *r, struct link *l, const struct sbuf_pkt *pkt);

#endif /* NEKI_WORKER_ROUTE_INT_H */
