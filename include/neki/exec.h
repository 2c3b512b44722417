/*
 * neki/exec.h - the executor of sharded databases (src/exec/): what a client session of the
 * worker (src/worker/) asks of its route. A session whose [databases] entry is sharded gets
 * a route at login (route_session_start); each client packet of it goes to route_on_pkt();
 * the route runs the plans (src/router/) on shard links (src/pool/) and answers the client
 * itself, ReadyForQuery included. The executor's own types and files: src/exec/route_int.h.
 */
#ifndef NEKI_EXEC_H
#define NEKI_EXEC_H

#include "neki/base.h"

#include <stdarg.h>

struct cfg;
struct cfg_database;
struct event_base;
struct link;
struct nk_error;
struct pktbuf;
struct route;
struct sbuf;
struct sbuf_pkt;
struct shm_stats;
struct spool;
struct varcache;
struct arelay;

/* The rows of a fetched call: ncols names and type OIDs, nrows * ncols values (text; NULL
 * for SQL NULL), row-major. Borrowed during the callback. */
struct arelay_rows {
	char **names;
	uint32_t *oids;
	size_t ncols;
	char **vals;
	size_t nrows;
};
/* A fetch ended: <rows>, or <err> (then rows is NULL). The relay is gone after it. */
typedef void (*arelay_fetch_fn)(void *arg, const struct arelay_rows *rows,
				const struct nk_error *err);

/*
 * The client of a route, as its session serves it (the client sink). The executor answers
 * the client with messages it builds (rows, CommandComplete, ReadyForQuery, notices: send;
 * errors: send_error) and forwards the shards' rows to the client's connection <sb> as they
 * come (no copy); everything else it needs of the session is here. <ctx> is the session's.
 */
struct exec_client_ops {
	bool (*closed)(void *ctx);		/* the client is gone (its session is closing) */
	/* one message built in <pb> (freed); false when the client is gone */
	bool (*send)(void *ctx, struct pktbuf *pb);
	/* an ErrorResponse (the client stays), logged as a pooler error; false: client gone */
	bool (*send_error)(void *ctx, const struct nk_error *err);
	void (*fatal)(void *ctx, const char *msg);	/* FATAL 08P01 <msg>, then close */
	/* close: log <reason> (NULL: no line), send <err> (NULL: none) */
	void (*close)(void *ctx, const char *reason, const struct nk_error *err);
	/* a log line <fmt> <ap> with the client's prefix */
	void (*log)(void *ctx, int lvl, const char *fmt, va_list ap) NK_PRINTF(3, 0);
	void (*idle)(void *ctx);		/* the client is idle from now (timeouts) */
	bool (*relay_busy)(void *ctx);		/* a __neki call or console relay runs */
	/* run the __neki call <sql> in the admin as the client's user, its rows to <fetched>
	 * (from the loop); the session holds the relay as its own (abandoned when the client
	 * goes, no takeover meanwhile) until set_relay(NULL); false when it cannot start */
	bool (*admin_fetch)(void *ctx, const char *sql, arelay_fetch_fn fetched, void *arg);
	void (*set_relay)(void *ctx, struct arelay *relay);	/* (NULL: the fetch ended) */
	void (*cancel_link)(struct link *l);	/* CancelRequest for the query on <l> */
};

struct exec_client {
	const struct exec_client_ops *ops;
	void *ctx;
	struct event_base *base;		/* the loop the route's timers run on */
	struct sbuf *sb;			/* the client connection */
	const struct cfg *cfg;			/* the session's configuration */
	const struct cfg_database *db;		/* its [databases] entry */
	const char *dbname, *user, *secret;	/* client-side database, login user, secret */
	struct spool *sp;			/* its pool */
	struct shm_stats *stats;		/* the SHOW STATS counters it counts into */
	struct varcache *vars;			/* the tracked parameters the client wants */
	uint32_t key_pid;			/* its BackendKeyData pid */
};

/* A route for client <c> (copied; what it points to outlives the route); NULL on no
 * memory. */
struct route *route_session_start(const struct exec_client *c);
/*
 * Apply the __neki.* settings of the client's startup options (<opts>, <len> bytes of
 * name\0value\0 pairs) to <r>, checked as their SET would be; false with <err> (the client
 * is refused) on the first that fails.
 */
NK_MUSTCHECK bool route_session_options(struct route *r, const uint8_t *opts, size_t len,
					struct nk_error *err);
/* Give back its links and memory (session close). */
void route_session_free(struct route *r);

/* A client packet of a routed session (the session's sess_on_work_pkt hands it over). */
bool route_on_pkt(struct route *r, const struct sbuf_pkt *pkt);
/* The client's queue drained (SBUF_EV_SEND_DONE of a routed session). */
void route_on_send_done(struct route *r);
/* A CancelRequest for the session: cancel every shard part in flight (57014 once). */
void route_cancel(struct route *r);
/* The welcome was sent: the tracked parameters' values now are the session's defaults. */
void route_sets_welcome(struct route *r);
/* The client gets ReadyForQuery next: send the held notifications when it is outside a
 * transaction, resume paused listening links. False when the client is gone. */
NK_MUSTCHECK bool route_listen_flush(struct route *r);

/* The end of the comment, quoted string or dollar-quoted string at <p> of <sql> (<p> itself
 * when none there): the executor's SQL scanner. */
const char *route_sql_skip_token(const char *sql, const char *p);

/* Is a Query, exec or round of <r> running? */
bool route_is_busy(const struct route *r);
/* The topology revision the running statement of <r> was planned with; 0 when none runs. */
uint64_t route_busy_revision(const struct route *r);
/* Is an extended-protocol batch of <r> open (an exec, a failed one skipping to Sync, a Sync
 * owed)? */
bool route_in_ext_batch(const struct route *r);
/* The transaction status the client sees: 'I', 'T' or 'E'. */
char route_tx_status(const struct route *r);
/* When the running query and the open transaction started (monotonic us; 0 = none). */
void route_clocks(const struct route *r, uint64_t *query_start_us, uint64_t *xact_start_us);

/* What a routed session does with the links of one pool (SHOW CLIENTS / POOLS). */
struct route_use {
	bool waiting;			/* queued for a link */
	uint64_t wait_since_us;		/* ... since then (monotonic; the longest wait) */
	const struct link *link;	/* a link it holds (the first); NULL */
};
/* <r>'s use of the links of pool <sp> (NULL: of any pool) into <u>. */
void route_pool_use(const struct route *r, const struct spool *sp, struct route_use *u);

/* Each shard link <r> holds: <fn> gets its shard uid and backend pid (the rows the
 * distributed deadlock detector maps lock waits with, src/admin/deadlock.c). */
void route_foreach_link(const struct route *r,
			void (*fn)(void *arg, const char *uid, uint32_t backend_pid), void *arg);
/* The detector chose <r>'s statement waiting on shard <uid> in backend <backend_pid> to break
 * a wait cycle across shards: cancel it there, its 57014 reaches the client as 40P01 with
 * DETAIL <detail>. False when no such statement runs (the cycle is gone). */
bool route_cancel_deadlocked(struct route *r, const char *uid, uint32_t backend_pid,
			     const char *detail);

#endif /* NEKI_EXEC_H */
