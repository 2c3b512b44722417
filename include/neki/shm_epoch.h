/*
 * shm_epoch.h - the epoch of the atomic commit's global ids (include/neki/twophase.h): the
 * admin process takes one per start of the router from the authoritative shard
 * (src/admin/epoch.c, table __neki.router_epochs) and publishes it here; the workers put it
 * in every global id they make (src/exec/route_2pc.c). 0 until it is known.
 */
#ifndef NEKI_SHM_EPOCH_H
#define NEKI_SHM_EPOCH_H

#include <stdint.h>

/* The published epoch; 0 when none is (or without shared memory). */
uint64_t shm_tx_epoch(void);

/* Publish epoch <e> (the admin process). */
void shm_tx_epoch_set(uint64_t e);

#endif /* NEKI_SHM_EPOCH_H */
