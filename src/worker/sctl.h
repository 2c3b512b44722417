/*
 * sctl.h - the console's pooling commands in a worker (src/worker/sctl.c: PAUSE, KILL,
 * DISABLE, SUSPEND, SHUTDOWN) and the hand-over of idle links between workers
 * (src/worker/linkmove.c).
 */
#ifndef NEKI_WORKER_SCTL_H
#define NEKI_WORKER_SCTL_H

#include "neki/base.h"

#include <stddef.h>

struct event_base;
struct link;
struct spool;

/*
 * linkmove.c: hand the idle link <l> of <sp> to the worker whose client waits longest for a
 * link of that pool (true: it left; the pool forgets it); start taking the links other
 * workers hand this one (from the worker's start).
 */
NK_MUSTCHECK bool linkmove_send(const struct spool *sp, struct link *l);
NK_MUSTCHECK bool linkmove_start(struct event_base *base);
/*
 * SUSPEND (sctl.c): stop reading every client at rest (logged in, nothing buffered either
 * way, nothing on its link the session layer must match later) and its link, then freeze the
 * pools (pool_suspend); returns how many clients, then links, could not be yet. With <force>
 * (suspend_timeout passed) the clients are closed ("suspend_timeout") instead.
 * sess_resume_all() reads them all again.
 */
size_t sess_suspend_step(bool force);
void sess_resume_all(void);

/* ---- sctl.c: the console's pooling commands ---- */

/* PAUSE / KILL in force for database <db> (or for all) / DISABLE in force for <db>. */
bool sctl_db_paused(const char *db);
bool sctl_db_disabled(const char *db);
/* SHUTDOWN WAIT_FOR_SERVERS is in progress: a client needing a link is closed. */
bool sctl_shutting_down(void);
/* SUSPEND is in force (sessions and pools are not touched until RESUME). */
bool sctl_is_suspended(void);

#endif /* NEKI_WORKER_SCTL_H */
