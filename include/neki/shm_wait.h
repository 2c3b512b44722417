/*
 * neki/shm_wait.h - clients waiting for a server link, seen across processes (shm_wait.c).
 *
 * Pool limits are global (shm_counter_*), so the only link a full pool may have can sit in
 * one worker while a client of another worker waits for it. Each process publishes, per
 * pool id (0..SHM_N_WAITS-1, the SHM_NAMES_POOL id of shm_names.h), since when the
 * oldest of its clients that no link is coming for has been waiting; the others read the
 * oldest one elsewhere to give up an idle or released link, or a freed slot, to it
 * (src/pool/pool_wait.c). A process is asked to look at its pools again with
 * shm_wait_wake(): a flag in its slot and its eventfd, so at most one wake-up is in flight
 * per process and the mailbox never fills with them.
 */
#ifndef NEKI_SHM_WAIT_H
#define NEKI_SHM_WAIT_H

#include "neki/base.h"

#include "neki/shm.h"

/* This process's oldest waiter of <pool_id> started at <since_us> (monotonic; 0 = none). */
void shm_wait_publish(unsigned pool_id, uint64_t since_us);

/* The earliest start published for <pool_id> by another live process (0 = none). */
uint64_t shm_wait_oldest_other(unsigned pool_id);

/*
 * Wake the other live workers that published a waiter in <pool_id>, and, when <holder_ctr>
 * is a counter id (>= 0), those holding units of that counter (the pool's links).
 */
void shm_wait_wake(unsigned pool_id, int holder_ctr);

/* Receiver: was this process woken since the last call? (clears the flag) */
bool shm_wait_take_wake(struct shm_proc *p);

/* Master: slot <i>'s process is gone; forget what it published. */
void shm_wait_reclaim(unsigned i);

#endif /* NEKI_SHM_WAIT_H */
