/*
 * pool_int.h - types and functions shared by the files of src/pool only.
 *
 * struct link and struct pool live here so that the public headers stay opaque. link.c
 * drives one server connection; pool.c owns the lists the links move between and decides
 * when links are opened, handed out, tested and closed. link_auth.c answers the server's
 * authentication requests. pool_takeover.c is the pools' side of the online restart
 * (SUSPEND, links rebuilt from handed-over sockets).
 */
#ifndef NEKI_POOL_POOL_INT_H
#define NEKI_POOL_POOL_INT_H

#include "neki/base.h"

#include <sys/socket.h>

#include <event2/util.h>

#include "neki/link.h"
#include "neki/list.h"
#include "neki/pool.h"
#include "neki/sbuf.h"
#include "neki/scram.h"

/* Why a server that logged in is closed again (target_session_attrs; pgbouncer's words). */
#define LINK_TARGET_MISMATCH "server does not satisfy target_session_attrs"

struct dns;
struct dns_req;
struct event;
struct link_scram;

/* One ParameterStatus value. */
struct link_param {
	char *name;		/* owned */
	const char *value;	/* interned (intern_ref): compared by pointer */
};

/* Why a link is in TESTED. */
enum link_test {
	LINK_TEST_NONE = 0,
	LINK_TEST_CHECK = 1,	/* server_check_query before reuse */
	LINK_TEST_RESET = 2,	/* server_reset_query after release */
};

/* One host of a [databases] entry's host list. */
struct pool_host {
	char *name;			/* owned: as written (a "/dir" is a unix socket dir) */
	bool resolved;			/* addr is known (unix, numeric, or resolved at start) */
	struct sockaddr_storage addr;	/* with the port */
	socklen_t addrlen;
	char label[96];			/* "127.0.0.1:5432", "unix:5432", "db.host:5432" */
	int port;			/* this host's port (port= lists give one per host) */
};

struct link {
	struct sbuf sb;			/* the server connection (embedded) */
	struct list_node node;		/* on pool->lists[state] */
	enum link_state state;		/* written by link_set_state() only */
	uint64_t id;			/* global socket id (shm_socket_id_next), SHOW SERVERS */
	struct pool *pool;		/* borrowed: the owner */
	struct event *timer;		/* owned: login timeout (server_connect_timeout) */
	size_t host_idx;		/* which of the pool's hosts */
	struct sockaddr_storage addr;	/* the server's address (CancelRequest goes there) */
	socklen_t addrlen;
	char addr_str[96];		/* for logs and SHOW SERVERS */
	struct dns_req *dns_req;	/* owned while resolving the host */
	uint64_t connect_us;		/* monotonic time the connect started */
	uint64_t idle_since_us;		/* monotonic time it last became IDLE */
	uint32_t be_pid;		/* BackendKeyData */
	uint32_t be_key;
	struct link_param *params;	/* owned array of ParameterStatus values */
	size_t nparams;
	const char *track_val[LINK_TRACK_MAX];	/* borrowed from params: each tracked name's
						 * value, NULL when none */
	uint32_t track_gen;		/* link_track_params() generation of track_val (0: stale) */
	char tx_status;			/* 'I' / 'T' / 'E' from the last ReadyForQuery */
	bool ready;			/* at a ReadyForQuery 'I' with no query in flight */
	bool close_needed;		/* close instead of reuse */
	bool exec_connect_query;	/* LOGIN: running the database's connect_query */
	bool test_failed;		/* TESTED: the query got an ErrorResponse */
	bool counted;			/* holds a slot in the global limits */
	bool check_after_use;		/* released after a use: with server_check_delay = 0 the
					 * check query runs before the next one (cleared by a
					 * check or reset query) */
	enum link_test test;		/* TESTED: which query */
	struct link_scram *scram;	/* owned: SCRAM exchange state during LOGIN */
	link_cb_fn client_cb;		/* ACTIVE: the session's callback */
	void *client_ctx;		/* ACTIVE: borrowed session */
	void *cancel_ctx;		/* a CancelRequest in flight (link_cancel_start) */
	link_cancel_detach_fn cancel_detach;	/* called with cancel_ctx if the link closes first */
	bool cancel_parked;		/* released while cancel_ctx was set: waits for it */
	const char *reset_sql;		/* borrowed, static: pool_release_reset()'s query, run
					 * before the link is idle again; NULL */
	bool reset_then_pool;		/* ... and server_reset_query after it */
	void *user_data;		/* owned through user_free: the session layer's data */
	link_data_free_fn user_free;	/* frees user_data at link_free */
	bool taken_over;		/* handed over by the process before an online restart:
					 * not handed out before the pool knows its welcome */
	bool welcome_only;		/* opened to learn the welcome of a taken-over pool,
					 * beyond the limits: closed after login when over them */
};

struct pool {
	struct list_node all_node;	/* on pool.c's list of this process's pools */
	char *db_name;			/* owned: client-side database name */
	char *user_name;		/* owned: server login user */
	char *password;			/* owned: password / secret, NULL */
	char *replication;		/* owned: "database" / "true"; NULL = ordinary pool */
	uint8_t *startup;		/* owned: extra startup parameters (replication pools) */
	size_t startup_len;
	struct scram_keys scram_keys;	/* pass-through keys for a SCRAM secret (copy) */
	const struct cfg *cfg;		/* borrowed (see pool_reconfigure) */
	const struct cfg_database *db;	/* borrowed */
	const struct cfg_user *user;	/* borrowed, NULL */
	struct event_base *base;	/* borrowed: the worker's loop */
	const struct pool_limits_ops *limits; /* borrowed */
	void *limits_ctx;		/* borrowed */
	struct sbuf_opts sbuf_opts;	/* transport settings for new links */
	struct pool_host *hosts;	/* owned: the database's host list, in order */
	size_t nhosts;
	size_t next_host;		/* round-robin cursor, or (disable) the host in use */
	int port;			/* the database's port */
	struct dns *dns;		/* borrowed: the worker's resolver; NULL = resolve at start */
	char addr_str[128];		/* for pool-level logs: the first host */
	struct list lists[LINK_ST_COUNT]; /* links by state */
	struct list waiters;		/* struct pool_waiter, FIFO */
	struct event *ev_janitor;	/* owned: periodic maintenance */
	struct event *ev_dispatch;	/* owned: hand links to waiters (activated) */
	struct event *ev_reap;		/* owned: free CLOSING links (activated) */
	uint64_t last_connect_us;	/* when the last connect was started */
	uint64_t last_lifetime_close_us; /* spreads server_lifetime closes */
	bool last_connect_failed;	/* the last connect/login failed (server_login_retry) */
	bool last_login_failed;		/* ... and no login succeeded since (fast fail) */
	char last_error[256];		/* the cached error of that failure */
	char last_cause[NK_ERR_MSG_MAX]; /* fail_fast: what waiters are told of that failure */
	char connect_errno_text[128];	/* set by link.c: the socket error of a failed connect */
	bool connecting;		/* holds the pool's turn to connect (pool_connect_begin):
					 * its one link logging in */
	bool fail_fast;			/* pool_set_fail_fast(): connect failures end waits */
	bool fail_pending;		/* fail_fast: end the waits from the loop (pool_dispatch) */
	bool probe;			/* fail_fast: the server refused the connect or is starting
					 * up: the janitor tries again at every tick */
	uint64_t fail_logged_us;	/* fail_fast: when "could not connect" was last logged */
	struct link_param *welcome;	/* owned: parameters of the first login */
	size_t nwelcome;
	bool welcome_ready;
	int n_clients;			/* pool_client_attach() count */
	bool paused;			/* pool_pause(): no link handed out, released ones closed */
	bool freeing;			/* pool_free() in progress */
	/* waiting across workers (pool_wait.c) */
	bool slot_blocked;		/* the last dispatch could not start a link it wanted:
					 * a limit, or an older client waits elsewhere */
	enum pool_scope blocked_scope;	/* the limit that kept it (pool_full_scope()) */
	enum pool_scope wait_scope;	/* what the pool publishes (pool_wait_scope()) */
	uint64_t wait_since;		/* what the pool publishes (pool_wait_since()); 0 none */
	uint64_t shed_for;		/* the wait elsewhere an idle link was last closed for */
	/* the online restart (pool_takeover.c) */
	bool suspended;			/* SUSPEND: no janitor, no dispatch, idle links unread */
	bool welcome_asked;		/* a welcome_only link was started */
};

/* Janitor period: coarse timeouts (idle, lifetime, waits) are checked this often. */
#define POOL_JANITOR_US 250000
/* How soon a pool looks again when another process holds its turn to connect. */
#define POOL_CONNECT_RETRY_US 10000

/* Every pool of this process (a worker's pools), for eviction across pools. */
extern struct list pool_all;

/* Seconds of a setting in microseconds (the pool's clock is nk_now_us(), neki/clock.h). */
uint64_t pool_secs_to_us(double s);

/* ---- pool.c, for the pool's other files ---- */

/* The effective settings ([users] entry, then [databases] entry, then [pgbouncer]). */
int pool_reserve_size(const struct pool *p);
int pool_min_size(const struct pool *p);
int pool_db_max(const struct pool *p);
int pool_user_max(const struct pool *p);
/* Links that exist and are not on their way out or in. */
size_t pool_usable_links(const struct pool *p);
/* Take <w> off the queue (the last one leaving withdraws the pool's published wait). */
void pool_unqueue(struct pool_waiter *w);
/* Does a link need server_check_query before reuse (the setting is not empty)? */
bool pool_has_check_query(const struct pool *p);
/* Give idle links to waiters, in order; then make sure links are coming for the rest. */
void pool_dispatch(struct pool *p);
/* Has <l> outlived server_lifetime (spread so that a pool's links do not all go at once)? */
bool pool_life_over(struct pool *p, const struct link *l, uint64_t now);
/* fail_fast: try to connect again at every janitor tick while the server refuses. */
void pool_probe(struct pool *p);

/* ---- pool_host.c ---- */

/* Resolve the host list of the pool's database (names through the worker's resolver). */
bool pool_resolve(struct pool *p, struct nk_error *err);
void pool_free_hosts(struct pool_host *hosts, size_t n);
/* The database's address moved: resolve the new host list (keep the old one on failure). */
void pool_rehost(struct pool *p);

/* ---- pool_janitor.c ---- */

/* Lifetime, idle timeout and check delay of the links of one list. */
void pool_check_list(struct pool *p, enum link_state st, uint64_t now);
/* The janitor timer (every POOL_JANITOR_US). */
void pool_janitor_cb(evutil_socket_t fd, short what, void *arg);

/* ---- pool_slot.c ---- */

/* The pool's connection attempt ended (its link logged in or closed; or none started). */
void pool_connect_end(struct pool *p);
/* Open one more link for <for_w> (NULL: min_pool_size) if the limits allow; true if one
 * was started. */
bool pool_launch(struct pool *p, const struct pool_waiter *for_w);

/* ---- pool_welcome.c ---- */

void welcome_free(struct pool *p);
/* The pool was reset: forget its welcome, here and the one published for other processes. */
void welcome_forget(struct pool *p);
/* The welcome another process published, taken as this pool's; false when none. */
bool welcome_take_shared(struct pool *p);
/* Copy the first login's parameters as the pool's welcome message. */
void pool_save_welcome(struct pool *p, const struct link *l);

/* ---- pool.c and pool_slot.c, for pool_wait.c ---- */

/* The first queued waiter, NULL when none. */
struct pool_waiter *pool_first_waiter(const struct pool *p);
/* Run the pool's dispatch (hand out links, start new ones) from the loop. */
void pool_kick(struct pool *p);
/* Close the least recently used unused link of <p> (idle past server_check_delay first) for
 * <reason>; false when it has none. */
bool pool_close_unused(struct pool *p, const char *reason);
/*
 * Is the client elsewhere that waits since <since> for room under <p>'s <scope> limit one of
 * a pool of this worker sharing that limit (<p> included) with an unused link here? That
 * link goes to it (pool_wait_shed); nothing need be evicted for it.
 */
bool pool_sibling_serves(const struct pool *p, enum pool_scope scope, uint64_t since);
/* The limit on the links <scope> counts for <p> (0: none): pool_size, max_db_connections,
 * max_user_connections. */
int pool_scope_max(const struct pool *p, enum pool_scope scope);

/* The links counted globally in <scope> of <p> (its own, its database's, its user's). */
static inline int
pool_links_counted(const struct pool *p, enum pool_scope scope)
{
	return p->limits->count(p->limits_ctx, p->db_name, p->user_name, scope);
}

/* ---- pool_wait.c: waiting across workers, for pool.c ---- */

/* Publish <since> (0: none) as the pool's wait; wakes the other workers concerned. */
void pool_wait_set(struct pool *p, uint64_t since);
/* Since when the oldest client of another process has waited in <scope> (0: none). */
uint64_t pool_wait_elsewhere(const struct pool *p, enum pool_scope scope);
/* After a dispatch that has links coming for the first <coming> waiters. */
void pool_wait_update(struct pool *p, size_t coming);
/* A free link goes elsewhere rather than to a waiter here since <since> (0: none)? */
bool pool_wait_yields(const struct pool *p, uint64_t since);
/* A new link for <w> (NULL: min_pool_size) waits for an older client elsewhere? */
bool pool_wait_defers(const struct pool *p, const struct pool_waiter *w);
/* Close an idle link for a client elsewhere when it should go there; true when closed. */
bool pool_wait_shed(struct pool *p);
/* No client here waits for <p>'s idle links: one goes to a client elsewhere of the same pool
 * (pool_wait_shed), or is closed for one elsewhere that <p>'s database or user limit keeps
 * from a link; true when one went. */
bool pool_wait_give_up_idle(struct pool *p);
/* A link's slot was given back: wake the workers whose clients wait for one. */
void pool_wait_slot_freed(const struct pool *p);

/* ---- link.c, for pool.c ---- */

/*
 * A new link of <p> to its next host, holding the limits slot pool_launch() took (given back
 * when it closes); it may already be CLOSING when returned. NULL when out of memory (the
 * slot is then still the caller's).
 */
struct link *link_new(struct pool *p);
/* A link of <p> built from another process's export (see pool_adopt_link). */
struct link *link_adopt(struct pool *p, int fd, struct proto_reader *r);
/* Move <l> to <st>: the only writer of l->state; moves it between the pool's lists. */
void link_set_state(struct link *l, enum link_state st);
/* Run <sql> on an idle link for <why> (TESTED); "<empty>" sends an empty query. */
void link_start_test(struct link *l, enum link_test why, const char *sql);
/* Hand <l> to a session: ACTIVE with its callback. */
void link_activate(struct link *l, link_cb_fn cb, void *ctx);
/* Back from a session: forget the callback and the forward target. */
void link_deactivate(struct link *l);
/* Close <l> with <reason>; a client holding it gets LINK_EV_BROKEN with that reason. */
void link_break(struct link *l, const char *reason);
/* A link on a server socket handed over by an online restart; see link.c. */
struct link *link_taken_over(struct pool *p, int fd, uint32_t be_pid, uint32_t be_key,
			     const char *const *names, const char *const *values, size_t n);
/* Free a CLOSING link (from the pool's reap step only). */
void link_free(struct link *l);
/* Log "<prefix> <msg>" at <lvl> with the link's identity (pgbouncer's S-0x... prefix). */
void link_log(const struct link *l, int lvl, const char *fmt, ...) NK_PRINTF(3, 4);

/* ---- pool.c, for link.c ---- */

/* The host for a new link (load_balance_hosts), and the host that just failed. */
size_t pool_pick_host(struct pool *p);
void pool_host_failed(struct pool *p, size_t idx);

/* <l> finished logging in (now IDLE). */
void pool_on_login_ok(struct link *l);
/* <l> failed to log in; <err> is the server's error or NULL (connect failure, <reason>). */
void pool_on_login_failed(struct link *l, const struct nk_error *err, const char *reason);
/* <l> finished a check / reset query (now IDLE). */
void pool_on_test_done(struct link *l);
/* <l> went CLOSING: give back its slot, schedule the reap. */
void pool_on_link_closed(struct link *l);

/* ---- pool_takeover.c, for pool.c ---- */

/* <l> logged in: a welcome_only link over the pool's limits is closed (true then). */
bool pool_takeover_login_ok(struct link *l);

/* ---- link_auth.c ---- */

/*
 * Answer the server's Authentication request <body> (<len> bytes). Returns false with
 * <err> filled when login cannot continue. Sets *<done> when AuthenticationOk arrived.
 */
NK_MUSTCHECK bool link_auth_answer(struct link *l, const uint8_t *body, size_t len, bool *done,
				   struct nk_error *err);
/* Free SCRAM state (if any). */
void link_auth_cleanup(struct link *l);

#endif /* NEKI_POOL_POOL_INT_H */
