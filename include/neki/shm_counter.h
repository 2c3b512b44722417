/*
 * neki/shm_counter.h - global counters (src/shm/shm_counter.c): the limits every process shares (max_client_conn, max_db_connections, ...) and cursors.
 */
#ifndef NEKI_SHM_COUNTER_H
#define NEKI_SHM_COUNTER_H

#include "neki/base.h"

#include "neki/shm.h"

/*
 * Global counter <idx>: take one unit unless that would exceed <limit> (limit <= 0
 * means no limit). The calling process's share is recorded in its slot.
 */
NK_MUSTCHECK bool shm_counter_try_acquire(unsigned idx, int64_t limit);

/* Give back one unit of counter <idx> taken by this process. */
void shm_counter_release(unsigned idx);
/* One unit of <idx> held by process <from> is held by process <to> from now on (a link that
 * moves there): the global count stays, the shares follow, so reclaims stay right. */
void shm_counter_share_move(unsigned idx, unsigned from, unsigned to);

/* Current value of counter <idx>. */
int64_t shm_counter_get(unsigned idx);

/* Counter <idx> used as a cursor: add one and return the value before (no share recorded). */
uint64_t shm_counter_next(unsigned idx);

/* Cursor <idx>: move it from <from> to <from> + 1 unless another process moved it first. */
void shm_counter_advance(unsigned idx, uint64_t from);

/* Master: give back every unit slot <i>'s (dead) process still held. */
void shm_counter_reclaim(unsigned i);

#endif /* NEKI_SHM_COUNTER_H */
