/*
 * shm_counter.c - global pool counters shared by every process.
 *
 * Limits such as max_client_conn or max_db_connections are global, not per worker
 * (DESIGN.md §1): each is an atomic counter in shm, addressed by a small id that the
 * caller assigns (spool.c: a range per limit, one counter per shm_names.h id). Taking a unit
 * is a compare-and-swap against the limit. Each process also records its own share per
 * counter, so when a child dies the master gives its units back (shm_counter_reclaim) and
 * the limits do not leak.
 */
#include "neki/base.h"

#include "neki/shm.h"
#include "neki/shm_counter.h"

#include "shm_int.h"

_Atomic int64_t *
shm_counter_cell(unsigned idx)
{
	const struct shm_layout *l = shm_layout_get();

	NK_ASSERT(idx < SHM_N_COUNTERS);
	return (_Atomic int64_t *)(l->base + l->counters_off) + idx;
}

_Atomic int32_t *
shm_counter_share(unsigned proc, unsigned idx)
{
	const struct shm_layout *l = shm_layout_get();

	NK_ASSERT(idx < SHM_N_COUNTERS && proc < l->n_procs);
	return (_Atomic int32_t *)(l->base + l->shares_off) + (size_t)proc * SHM_N_COUNTERS + idx;
}

/* Record <delta> in this process's share of <idx> (the master keeps none). */
static void
share_add(unsigned idx, int32_t delta)
{
	int self = shm_self();

	if (self >= 0)
		atomic_fetch_add_explicit(shm_counter_share((unsigned)self, idx), delta,
					  memory_order_relaxed);
}

bool
shm_counter_try_acquire(unsigned idx, int64_t limit)
{
	_Atomic int64_t *c = shm_counter_cell(idx);
	int64_t cur = atomic_load_explicit(c, memory_order_relaxed);

	do {
		if (limit > 0 && cur >= limit)
			return false;
	} while (!atomic_compare_exchange_weak_explicit(c, &cur, cur + 1, memory_order_acq_rel,
							 memory_order_relaxed));
	share_add(idx, 1);
	return true;
}

void
shm_counter_release(unsigned idx)
{
	int64_t prev = atomic_fetch_sub_explicit(shm_counter_cell(idx), 1, memory_order_acq_rel);

	NK_ASSERT(prev > 0);
	share_add(idx, -1);
}

void
shm_counter_share_move(unsigned idx, unsigned from, unsigned to)
{
	atomic_fetch_add_explicit(shm_counter_share(to, idx), 1, memory_order_relaxed);
	atomic_fetch_sub_explicit(shm_counter_share(from, idx), 1, memory_order_relaxed);
}

int64_t
shm_counter_get(unsigned idx)
{
	return atomic_load_explicit(shm_counter_cell(idx), memory_order_acquire);
}

uint64_t
shm_counter_next(unsigned idx)
{
	return (uint64_t)atomic_fetch_add_explicit(shm_counter_cell(idx), 1, memory_order_relaxed);
}

void
shm_counter_advance(unsigned idx, uint64_t from)
{
	int64_t cur = (int64_t)from;

	(void)atomic_compare_exchange_strong_explicit(shm_counter_cell(idx), &cur, cur + 1,
						      memory_order_acq_rel, memory_order_relaxed);
}

void
shm_counter_reclaim(unsigned i)
{
	for (unsigned idx = 0; idx < SHM_N_COUNTERS; idx++) {
		int32_t held = atomic_exchange(shm_counter_share(i, idx), 0);

		if (held != 0)
			atomic_fetch_sub(shm_counter_cell(idx), held);
	}
}
