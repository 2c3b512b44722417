/*
 * neki/takeover.h - the new process's side of the online restart, `neki -R` (pgbouncer's
 * takeover), run by the master before it forks (src/worker/takeover.c):
 *   1. takeover_begin(): connect to the old process's Unix socket as user pgbouncer,
 *      database pgbouncer; SUSPEND; SHOW FDS, which brings every socket of the old process
 *      with its row (neki/fdrow.h): the listening sockets go to listen.c at once, the
 *      clients and server links are kept here for the workers;
 *   2. takeover_assign(): each client (with its link) goes to the worker its cancel key names
 *      (session_cancel_key_worker), idle links in turn to every worker;
 *   3. takeover_finish(), once the new master is in the background: SHUTDOWN, wait until the
 *      old process has closed the connection and its pidfile is gone;
 *   4. each child keeps its share (takeover_keep_only) and the workers rebuild their
 *      sessions from it (session_adopt_start); the master closes its copies.
 * Blocking I/O, no event loop. A failure is fatal (the old process resumes when the
 * connection goes), and so are SIGTERM, SIGINT and SIGQUIT meanwhile: the caller blocks
 * them and passes the set, which is polled.
 */
#ifndef NEKI_TAKEOVER_H
#define NEKI_TAKEOVER_H

#include "neki/base.h"

#include <signal.h>

#include "neki/config.h"
#include "neki/error.h"
#include "neki/fdrow.h"

/* One socket taken over (a client or a server link). */
struct takeover_sock {
	struct fdrow row;		/* as the old process sent it */
	int fd;				/* owned: the descriptor received; -1 once given away */
	int worker;			/* the worker slot that takes it; -1: none (closed) */
	int pair;			/* index of the paired socket (client <-> link), -1 */
};

/*
 * Can <c> take over at all: a Unix socket in a directory (not abstract), no sockets from
 * systemd? False with <err> filled (pgbouncer's refusals).
 */
NK_MUSTCHECK bool takeover_possible(const struct cfg *c, struct nk_error *err);

/* Does something accept connections on the Unix socket of <c>? */
bool takeover_old_alive(const struct cfg *c);

/* Steps 1: SUSPEND and SHOW FDS; the listeners are adopted (listen_adopt). Fatal on error. */
void takeover_begin(const struct cfg *c, const sigset_t *sigs);

/* Step 2: choose the worker of every socket among <n_workers> (slots 0..n-1). */
void takeover_assign(const struct cfg *c, unsigned n_workers);

/* Step 3: SHUTDOWN the old process and wait until it is gone. Fatal on error. */
void takeover_finish(const struct cfg *c, const sigset_t *sigs);

/* The client and server sockets received (stable until takeover_release). */
size_t takeover_count(void);
struct takeover_sock *takeover_at(size_t i);

/* In a child: close every socket not given to worker <slot> (-1: all of them). */
void takeover_keep_only(int slot);

/* Close what is still open and forget the sockets (the master, once its children run). */
void takeover_release(void);

#endif /* NEKI_TAKEOVER_H */
