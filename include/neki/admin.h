/*
 * neki/admin.h - the admin process (src/admin/).
 *
 * One child of the master runs the admin: the child runtime on the admin port. It
 * will serve the console commands and the __neki.* functions and publish topology
 * revisions into shm; for now it answers clients with the pre-login responder.
 */
#ifndef NEKI_ADMIN_H
#define NEKI_ADMIN_H

#include "neki/base.h"

/* Run the admin process on shm slot <slot>; never returns. */
NK_NORETURN void admin_main(unsigned slot);

#endif /* NEKI_ADMIN_H */
