/*
 * neki/shm_wait.h - clients waiting for a server link, seen across processes (shm_wait.c).
 *
 * Pool limits are global (shm_counter_*), so the only link a full pool may have can sit in
 * one worker while a client of another worker waits for it. Each process publishes, per
 * wait key (0..SHM_N_WAITS-1: src/pool/spool.c gives a range of SHM_NAMES_IDS keys each to
 * pool ids, database ids and user ids, for pool_size, max_db_connections and
 * max_user_connections), since when the
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

/* This process's oldest waiter of <key> started at <since_us> (monotonic; 0 = none). */
void shm_wait_publish(unsigned key, uint64_t since_us);

/* The earliest start published for <key> by another live process (0 = none). */
uint64_t shm_wait_oldest_other(unsigned key);
/* ... and the slot of that process, -1 when none. */
int shm_wait_oldest_other_proc(unsigned key);

/*
 * Wake the other live workers that published a waiter in <key>, and, when <holder_ctr>
 * is a counter id (>= 0), those holding units of that counter (the links it counts).
 */
void shm_wait_wake(unsigned key, int holder_ctr);

/* Receiver: was this process woken since the last call? (clears the flag) */
bool shm_wait_take_wake(struct shm_proc *p);

/* Master: slot <i>'s process is gone; forget what it published. */
void shm_wait_reclaim(unsigned i);

#endif /* NEKI_SHM_WAIT_H */
