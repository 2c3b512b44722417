/*
 * admin.c - the admin process: the child runtime on the admin listener(s), serving the
 * console (console.c) and the __neki functions (nekifn.c), and keeping the topology
 * revisions (revision.c, follow.c). Entry point: admin_main().
 */
#include "neki/base.h"

#include "neki/admin.h"

#include <sys/socket.h>

#include "neki/worker.h"

#include "admin_int.h"

/* Accept a console connection from listener <l>. */
static void
admin_accept(int fd, const struct listener *l)
{
	console_accept(fd, l->family == AF_UNIX);
}

/* The loop exists: load and publish the topology, start following the store. */
static void
admin_start(void)
{
	rev_init(child_base());
}

void
admin_main(unsigned slot)
{
	struct child_spec s = {
		.slot = slot,
		.kind = SHM_PROC_ADMIN,
		.listens = LISTEN_ADMIN,
		.on_accept = admin_accept,
		.on_start = admin_start,
	};

	child_run(&s);
}
