/*
 * neki/shm_welcome.h - the welcome of each pool shared by the processes (shm_welcome.c):
 * the server parameters (ParameterStatus) a pool's first login reported, which a new
 * client's welcome repeats. pgbouncer's one process keeps them once any server of the pool
 * logged in; each neki worker has pools of its own, and a worker that never had a link of
 * a pool would otherwise hold its clients' logins until it gets one (which, with global
 * pool limits, may be held by another worker). The first process to log a link in publishes
 * the pool's parameters here; the others take them.
 *
 * SHM_WELCOME_SLOTS slots, looked up by pool id (shm_names_pool) with linear probing and
 * never freed, like the ids they are keyed by. A welcome is written once (the first
 * publisher wins) until the pool is reset (RECONNECT, changed connection settings, a server
 * TLS change): then it is cleared, and the next login publishes a new one. A pool that finds
 * no slot, or a welcome too long for one, is not shared: its processes each learn it from a
 * link of their own, as before.
 */
#ifndef NEKI_SHM_WELCOME_H
#define NEKI_SHM_WELCOME_H

#include "neki/base.h"

#include <stddef.h>

#define SHM_WELCOME_SLOTS 512
#define SHM_WELCOME_MAX 2040	/* bytes of name\0value\0 pairs a slot holds */

/* Publish the <len> bytes at <data> as pool <pool_id>'s welcome unless it has one: true
 * when the pool now has a welcome in shm (this one or an earlier one). */
bool shm_welcome_publish(unsigned pool_id, const void *data, size_t len);

/* Forget pool <pool_id>'s welcome (the pool was reset; the next publish wins). */
void shm_welcome_clear(unsigned pool_id);

/* Pool <pool_id>'s welcome into <buf> (<cap> bytes): its length; 0 when none is published
 * (yet), it is being written, or it does not fit. */
size_t shm_welcome_get(unsigned pool_id, void *buf, size_t cap);

#endif /* NEKI_SHM_WELCOME_H */
