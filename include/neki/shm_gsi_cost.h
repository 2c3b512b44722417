/*
 * shm_gsi_cost.h - the estimates of what reads through non-unique GSIs cost, shared by every
 * process (src/shm/shm_gsi_cost.c; src/router/plan_gsi_cost.c says what a word holds): one
 * 64-bit word per GSI, found by a nonzero key (a hash of its database and name), changed
 * by compare-and-swap. Without shared memory (unit tests), a table of this process.
 */
#ifndef NEKI_SHM_GSI_COST_H
#define NEKI_SHM_GSI_COST_H

#include "neki/base.h"

#include <stdatomic.h>

/* The word kept for <key> (nonzero); 0 when none is. */
uint64_t shm_gsi_cost_load(uint64_t key);

/* <key>'s word becomes <word> if it still is <old> (what shm_gsi_cost_load() returned):
 * false when another process changed it first. A new key takes a free slot, or the place
 * of another when none is free (an estimate is lost, not a key mixed up). */
bool shm_gsi_cost_swap(uint64_t key, uint64_t old, uint64_t word);

/* The table in the segment (shm.c, when it maps it; NULL: this process's again). */
void shm_gsi_cost_attach(_Atomic uint64_t (*t)[2]);

#endif /* NEKI_SHM_GSI_COST_H */
