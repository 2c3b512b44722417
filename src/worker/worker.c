/*
 * worker.c - the worker process: the child runtime on the main listeners.
 *
 * A worker accepts clients on the sockets the master bound (TCP and Unix) and runs their
 * sessions (src/worker/session*.c); cancels forwarded by other workers arrive through its
 * shm mailbox. A worker started by an online restart (neki -R) first rebuilds the sessions
 * and links the master took over for it (session_adopt_start).
 */
#include "neki/base.h"

#include "neki/worker.h"

#include "neki/proc.h"
#include "neki/session.h"

/* The loop exists: the link channel, then (after an online restart) the sessions taken over. */
static void
worker_start(void)
{
	session_worker_start();
	session_adopt_start();
}

void
worker_main(unsigned slot)
{
	struct child_spec s = {
		.slot = slot,
		.kind = SHM_PROC_WORKER,
		.listens = LISTEN_MAIN,
		.on_accept = session_accept,
		.on_start = worker_start,
		.on_cancel = session_cancel_forwarded,
		.on_pool_wake = session_pools_wake,
		.on_control = session_control,
		.control_settled = session_control_settled,
		.server_links = session_link_count,
		.on_stop_servers = session_shutdown_servers,
		.on_list = session_list_rows,
		.on_fds = session_fds,
		.oldest_planned_revision = session_oldest_planned_revision,
	};

	child_run(&s);
}
