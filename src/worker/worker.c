/*
 * worker.c - the worker process: the child runtime on the main listeners.
 *
 * A worker accepts clients on the sockets the master bound (TCP and Unix) and runs their
 * sessions (src/worker/session*.c); cancels forwarded by other workers arrive through its
 * shm mailbox.
 */
#include "neki/base.h"

#include "neki/worker.h"

#include "neki/session.h"

void
worker_main(unsigned slot)
{
	struct child_spec s = {
		.slot = slot,
		.kind = SHM_PROC_WORKER,
		.listens = LISTEN_MAIN,
		.on_accept = session_accept,
		.on_cancel = session_cancel_forwarded,
		.on_pool_wake = session_pools_wake,
		.on_control = session_control,
		.control_settled = session_control_settled,
		.server_links = session_link_count,
		.on_stop_servers = session_shutdown_servers,
		.on_list = session_list_rows,
	};

	child_run(&s);
}
