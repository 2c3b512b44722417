/*
 * epoch.h - the epoch of the atomic commit's global ids, taken by the admin process (epoch.c).
 */
#ifndef NEKI_ADMIN_EPOCH_H
#define NEKI_ADMIN_EPOCH_H

/* Take this start's epoch from the authoritative shard and publish it into shm, unless it
 * is published already or being taken; called on the watcher connection's every beat. */
void epoch_take(void);

#endif /* NEKI_ADMIN_EPOCH_H */
