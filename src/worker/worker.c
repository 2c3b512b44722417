/*
 * worker.c - the worker process: the child runtime on the main listeners.
 *
 * A worker accepts clients on the sockets the master bound (TCP and Unix) and, until
 * the session layer exists, answers them with the pre-login responder.
 */
#include "neki/base.h"

#include "neki/worker.h"

void
worker_main(unsigned slot)
{
	struct child_spec s = {
		.slot = slot,
		.kind = SHM_PROC_WORKER,
		.listens = LISTEN_MAIN,
		.on_accept = prelogin_accept,
	};

	child_run(&s);
}
