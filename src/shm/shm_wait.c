/*
 * shm_wait.c - clients waiting for a server link, seen across processes (neki/shm_wait.h).
 *
 * One cell per (process, wait key): the monotonic microseconds at which that process's
 * oldest client that no link is coming for began to wait, 0 when it has none. Only the
 * owner writes its row (the master clears a dead child's); everyone reads. CLOCK_MONOTONIC
 * is one clock for every process of the host, so the times compare across processes.
 * Wake-ups are a flag in the target's slot plus a write to its eventfd: a sender that finds
 * the flag already set does nothing, so a process gets at most one wake-up in flight.
 * Entry points: shm_wait_publish(), shm_wait_oldest_other(), shm_wait_wake(),
 * shm_wait_take_wake(), shm_wait_reclaim().
 */
#include "neki/base.h"

#include "neki/shm_wait.h"
#include "neki/shm_counter.h"

#include <errno.h>
#include <unistd.h>

#include "shm_int.h"

/* Process <proc>'s cell of <key>. */
static _Atomic uint64_t *
wait_cell(unsigned proc, unsigned key)
{
	const struct shm_layout *l = shm_layout_get();

	NK_ASSERT(proc < l->n_procs && key < SHM_N_WAITS);
	return (_Atomic uint64_t *)(l->base + l->waits_off) + (size_t)proc * SHM_N_WAITS + key;
}

/* Is slot <i> a live worker other than this process? */
static bool
wait_other_worker(unsigned i)
{
	struct shm_proc *p = shm_proc(i);

	return (int)i != shm_self() && atomic_load(&p->pid) != 0 &&
	       atomic_load(&p->kind) == (uint32_t)SHM_PROC_WORKER;
}

void
shm_wait_publish(unsigned key, uint64_t since_us)
{
	int self = shm_self();

	if (self >= 0)
		atomic_store_explicit(wait_cell((unsigned)self, key), since_us,
				      memory_order_release);
}

/* The earliest start published for <key> elsewhere (0: none), its slot in *<proc>. */
static uint64_t
wait_oldest(unsigned key, int *proc)
{
	uint64_t best = 0;

	*proc = -1;
	for (unsigned i = 0; i < shm_n_procs(); i++) {
		uint64_t v;

		if (!wait_other_worker(i))
			continue;
		v = atomic_load_explicit(wait_cell(i, key), memory_order_acquire);
		if (v != 0 && (best == 0 || v < best)) {
			best = v;
			*proc = (int)i;
		}
	}
	return best;
}

uint64_t
shm_wait_oldest_other(unsigned key)
{
	int proc;

	return wait_oldest(key, &proc);
}

int
shm_wait_oldest_other_proc(unsigned key)
{
	int proc;

	(void)wait_oldest(key, &proc);
	return proc;
}

/* Raise slot <i>'s flag; write its eventfd when the flag was down. */
static void
wait_wake_one(unsigned i)
{
	struct shm_proc *p = shm_proc(i);
	uint64_t one = 1;

	if (atomic_exchange_explicit(&p->pool_wake, 1, memory_order_acq_rel) != 0)
		return;		/* a wake-up is already on its way */
	/* EAGAIN means the counter is already huge: the owner is awake anyway. */
	while (write(p->eventfd, &one, sizeof(one)) == -1 && errno == EINTR)
		;
}

void
shm_wait_wake(unsigned key, int holder_ctr)
{
	for (unsigned i = 0; i < shm_n_procs(); i++) {
		bool waits, holds;

		if (!wait_other_worker(i))
			continue;
		waits = atomic_load_explicit(wait_cell(i, key), memory_order_acquire) != 0;
		holds = holder_ctr >= 0 && holder_ctr < SHM_N_COUNTERS &&
			atomic_load_explicit(shm_counter_share(i, (unsigned)holder_ctr),
					     memory_order_acquire) > 0;
		if (waits || holds)
			wait_wake_one(i);
	}
}

bool
shm_wait_take_wake(struct shm_proc *p)
{
	return atomic_exchange_explicit(&p->pool_wake, 0, memory_order_acq_rel) != 0;
}

void
shm_wait_reclaim(unsigned i)
{
	for (unsigned b = 0; b < SHM_N_WAITS; b++)
		atomic_store(wait_cell(i, b), 0);
}
