/*
 * deadlock.h - the distributed deadlock detector in the admin process (deadlock.c).
 */
#ifndef NEKI_ADMIN_DEADLOCK_H
#define NEKI_ADMIN_DEADLOCK_H

#include <event2/event.h>

/* Every second (while distributed_deadlock_timeout is not 0), look for wait cycles across
 * shards among this neki's clients and cancel a statement of each one found. */
void deadlock_init(struct event_base *base);

#endif /* NEKI_ADMIN_DEADLOCK_H */
