/*
 * neki/session.h - the client session of a worker process (src/worker/session*.c).
 *
 * Everything between an accepted client socket and a pooled backend link: startup packet,
 * client authentication, the welcome (ParameterStatus, BackendKeyData), pool modes, session
 * state kept across links (varcache, prepared statements), timeouts, limits, cancel, stats.
 * The worker's child runtime hands every accepted connection to session_accept() and every
 * forwarded CancelRequest (SHM_CMD_CANCEL from its mailbox) to session_cancel_forwarded().
 */
#ifndef NEKI_SESSION_H
#define NEKI_SESSION_H

#include "neki/base.h"

struct cfg;
struct listener;
struct nk_error;
struct shm_msg;

/* Take the accepted, non-blocking client socket <fd> from listener <l>; owns <fd> from here. */
void session_accept(int fd, const struct listener *l);

/*
 * The worker slot (0..<n_workers>-1) that owns the client whose BackendKeyData is <key>
 * (pid << 32 | secret) in the layout <peering> selects: the worker the key was made in, or,
 * for a key made by a process that had more workers (before an online restart), that slot
 * modulo <n_workers>: the online restart hands each client to that same worker. -1 for a
 * key that names no worker.
 */
int session_cancel_key_worker(uint64_t key, unsigned n_workers, bool peering);

/*
 * A CancelRequest for one of this worker's sessions arrived through the shm mailbox:
 * <key> holds the 8 bytes of the client's BackendKeyData (pid, key, network order).
 * Unknown keys and idle sessions are ignored, as Postgres does.
 */
void session_cancel_forwarded(const uint8_t *key, size_t len);

/*
 * Another worker woke this one (shm_wait_wake): every pool gives up an idle link to a client
 * that waits longer elsewhere, or serves its own waiters (pool_wake).
 */
void session_pools_wake(void);

/* The oldest topology revision a running statement of this worker was planned with; 0 when
 * none runs (child_spec.oldest_planned_revision). */
uint64_t session_oldest_planned_revision(void);

/*
 * SHOW FDS (SHM_CMD_FDS, src/worker/session_fds.c): send this worker's sockets and their rows
 * to the admin over the descriptor channel (neki/fdchan.h); key[] holds the request number,
 * name[0] 'L' asks for the listening sockets too.
 */
void session_fds(const struct shm_msg *m);
/*
 * The online restart is committed (SHM_CMD_TAKEOVER_DONE): close, with a FATAL that says why,
 * every client whose socket SHOW FDS did not hand over (TLS, sharded, console, ...).
 */
void session_fds_left_behind(void);

/*
 * A worker of an online restart (neki/takeover.h), before it serves: rebuild the client
 * sessions and server links the master took over for this worker (src/worker/session_adopt.c).
 * Nothing to do in a worker started otherwise.
 */
void session_adopt_start(void);

/* The worker's loop exists: take the server links other workers hand this one (linkmove.c). */
void session_worker_start(void);

/* Number of client sessions alive in this worker (SHOW CLIENTS, shutdown). */
size_t session_count(void);

/*
 * SHM_CMD_LIST (wlist.c): append this worker's console rows to <buf> (<cap> bytes, *<len>
 * used): 'c' clients and 's' servers (the 21 SHOW CLIENTS columns, the 7 SOCKETS columns,
 * the socket state, "1" when listed by SHOW CLIENTS / SERVERS; times as epoch seconds),
 * 'p' pools (the 17 SHOW POOLS columns), 'h' DNS hosts, 'z' DNS zones, 'm' memory.
 * False when some rows did not fit.
 */
bool session_list_rows(void *buf, size_t cap, size_t *len);

/*
 * A pooling command from the mailbox (PAUSE, RESUME, KILL, KILL_CLIENT, RECONNECT, DISABLE,
 * ENABLE, WAIT_CLOSE; src/worker/sctl.c). Returns true when it is done, false when it waits
 * (PAUSE until the links are gone, WAIT_CLOSE until no link is close_needed): poll
 * session_control_settled() until every wait is over.
 */
bool session_control(const struct shm_msg *m);
bool session_control_settled(void);

/* Server links of this worker in any state but closing (SHUTDOWN WAIT_FOR_SERVERS). */
size_t session_link_count(void);

/* SHUTDOWN WAIT_FOR_SERVERS / SIGINT: pause every pool, fail the clients waiting for a link. */
void session_shutdown_servers(void);

/*
 * RELOAD changed the server-side TLS settings or files: every server link of this worker is
 * replaced as with RECONNECT (idle ones now, busy ones when released).
 */
void session_reconnect_all(void);
/*
 * The configuration in force changed (RELOAD, SIGHUP, console SET): every pool follows it
 * now (stale links are closed) and the pools of a database gone from the file are dropped.
 */
void session_reload_pools(void);

#endif /* NEKI_SESSION_H */
