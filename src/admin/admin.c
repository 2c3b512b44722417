/*
 * admin.c - the admin process: the child runtime on the admin listener(s).
 */
#include "neki/base.h"

#include "neki/admin.h"

#include "neki/worker.h"

void
admin_main(unsigned slot)
{
	struct child_spec s = {
		.slot = slot,
		.kind = SHM_PROC_ADMIN,
		.listens = LISTEN_ADMIN,
		.on_accept = prelogin_accept,
	};

	child_run(&s);
}
