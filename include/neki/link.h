/*
 * neki/link.h - a backend link: one server connection owned by a pool (src/pool/link.c).
 *
 * A link logs in by itself (connect, StartupMessage, authentication as a client, parameters,
 * BackendKeyData, ReadyForQuery), then lives on its pool's lists. Only the pool creates and
 * frees links; a client session sees a link between pool_acquire() and pool_release():
 * it receives the server's packets through its link_cb_fn and writes with link_send() or by
 * forwarding into link_sbuf(). The link keeps its own view of the protocol state it needs
 * (transaction status from ReadyForQuery, ParameterStatus values) whatever the session does.
 *
 * States (the transition table; link_set_state() is the only writer of ->state):
 *
 *   LOGIN  --login ok-->  IDLE  --pool_acquire-->  ACTIVE  --pool_release-->  IDLE / TESTED
 *   IDLE   --idle > server_check_delay (janitor)-->  USED  --needed-->  TESTED  --'Z'-->  IDLE
 *   any    --error, timeout, lifetime, EOF-->  CLOSING [transient]  --reap-->  freed
 */
#ifndef NEKI_LINK_H
#define NEKI_LINK_H

#include "neki/base.h"

#include "neki/error.h"
#include "neki/sbuf.h"

#include <sys/socket.h>

struct link;

enum link_state {
	LINK_ST_LOGIN = 0,	/* pool->lists[LOGIN]; connecting or logging in; login timer armed */
	LINK_ST_IDLE = 1,	/* lists[IDLE]; ready ('I'), clean; reading (EOF detection) */
	LINK_ST_USED = 2,	/* lists[USED]; idle longer than server_check_delay: check before use */
	LINK_ST_TESTED = 3,	/* lists[TESTED]; running server_check_query or server_reset_query */
	LINK_ST_ACTIVE = 4,	/* lists[ACTIVE]; given to a client; packets go to its link_cb_fn */
	LINK_ST_CLOSING = 5,	/* [transient] lists[CLOSING]; socket closed, freed by the reap */
};
#define LINK_ST_COUNT 6

/* What the client holding an ACTIVE link is told. */
enum link_event {
	LINK_EV_PKT = 0,	/* a server packet starts: act on link_sbuf() as an sbuf callback */
	LINK_EV_BROKEN = 1,	/* the link died (already CLOSING): drop it, report <err> */
};

/*
 * The client's callback. LINK_EV_PKT has sbuf callback semantics: choose sbuf_forward /
 * sbuf_skip / sbuf_hold on link_sbuf(<l>) and return true, or return false to pause the link.
 * LINK_EV_BROKEN: <err> says why ("server conn crashed?", 08P01); never pool_release() it.
 */
typedef bool (*link_cb_fn)(struct link *l, enum link_event ev, const struct sbuf_pkt *pkt,
			   const struct nk_error *err, void *ctx);

/* "login", "idle", "used", "tested", "active", "closing". */
const char *link_state_str(enum link_state st);

enum link_state link_state(const struct link *l);

/* The link's global socket id (SHOW SERVERS `id`; shared numbering with the clients). */
uint64_t link_id(const struct link *l);

/* The server connection's transport (to forward into, or to act on inside link_cb_fn). */
struct sbuf *link_sbuf(struct link *l);

/* Queue <len> bytes for the server. False when the link is closing or out of memory. */
NK_MUSTCHECK bool link_send(struct link *l, const void *data, size_t len);

/* Transaction status of the last ReadyForQuery: 'I', 'T' or 'E'. */
char link_tx_status(const struct link *l);

/* The backend's process id and cancel key (BackendKeyData), for CancelRequest. */
uint32_t link_backend_pid(const struct link *l);
uint32_t link_backend_key(const struct link *l);

/* The server's current value of parameter <name> (ParameterStatus), or NULL. Borrowed. */
const char *link_param(const struct link *l, const char *name);
/*
 * The session layer's tracked parameters (its varcache) by number: link_track_params()
 * names them (<names>[0..n), n <= LINK_TRACK_MAX, borrowed until the next call) and
 * link_tracked() gives link <l>'s values of them, [i] for the <i>th name (borrowed until the
 * server reports a parameter again; NULL when it reported none), without a search by name:
 * it runs before every transaction a link serves.
 */
#define LINK_TRACK_MAX 16
void link_track_params(const char *const *names, size_t n);
const char *const *link_tracked(struct link *l);
/* The number of parameters known, and the <i>th (borrowed). */
size_t link_param_count(const struct link *l);
void link_param_at(const struct link *l, size_t i, const char **name, const char **value);

/* Server address for logs and SHOW SERVERS: "127.0.0.1:5432" or "unix:5432". */
const char *link_addr(const struct link *l);

/* Seconds since the connection was opened. */
double link_age(const struct link *l);

/*
 * Close <l> now with <reason> (logged as "closing because: <reason> (age=Ns)"). Sends a
 * Terminate first when <send_term>. Safe from any callback; the link is reaped later.
 * A client holding it is NOT called back (it asked for this).
 */
void link_close(struct link *l, bool send_term, const char *reason);

/*
 * Ask for <l> to be closed at release instead of reused (RECONNECT, config change). With
 * server_fast_close a session-mode client should release it at the next transaction end:
 * link_close_needed() tells it.
 */
void link_set_close_needed(struct link *l);
bool link_close_needed(const struct link *l);
/*
 * server_fast_close: <l> is close_needed, the pool is in session mode and the server is idle
 * between transactions: release it now (pool_release closes it) rather than at disconnect.
 */
bool link_fast_close_due(const struct link *l);

/*
 * Data a higher layer keeps per link (the session layer: prepared statements and search_path
 * on that server). <free_fn>(<data>) runs when the link is freed. Owned by the link from here.
 */
typedef void (*link_data_free_fn)(void *data);
void *link_user_data(const struct link *l);
void link_set_user_data(struct link *l, void *data, link_data_free_fn free_fn);

/* The server's socket address (for a CancelRequest connection); borrowed, <*len> set. */
const struct sockaddr *link_server_addr(const struct link *l, socklen_t *len);

/*
 * A CancelRequest for <l>'s backend is in flight on a connection the session layer owns
 * (<ctx>). Until link_cancel_done(), pool_release() parks <l> (kept ACTIVE with no client,
 * neither idle nor given to a waiter), so the cancel cannot hit the next query on it. If <l>
 * closes first, <detach>(<ctx>) runs and link_cancel_done() must not be called.
 */
typedef void (*link_cancel_detach_fn)(void *ctx);
void link_cancel_start(struct link *l, void *ctx, link_cancel_detach_fn detach);
bool link_cancel_pending(const struct link *l);
/* The cancel connection finished (answered, failed or timed out): a parked <l> is released. */
void link_cancel_done(struct link *l);
/* <l> was released while its cancel is in flight and waits for it (sv_being_canceled). */
bool link_being_canceled(const struct link *l);

#endif /* NEKI_LINK_H */
