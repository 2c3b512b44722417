/*
 * shm_gsi_cost.c - the GSI cost words in the segment header (neki/shm_gsi_cost.h): slot i
 * is a pair (key, word), a key's home slot key % SHM_GSI_COSTS and the PROBE next ones
 * after it. A key is claimed by compare-and-swap from 0; a reader that meets a key being
 * replaced may read the other's word once, which only moves an estimate. shm.c attaches the
 * segment's table when it maps it (the children inherit it); until then, a table of this
 * process.
 */
#include "neki/base.h"

#include <stdatomic.h>

#include "neki/shm.h"
#include "neki/shm_gsi_cost.h"

#define PROBE 4

static _Atomic uint64_t local_costs[SHM_GSI_COSTS][2];	/* (no segment mapped) */
static _Atomic uint64_t (*costs)[2] = local_costs;	/* the segment's, once mapped */

void
shm_gsi_cost_attach(_Atomic uint64_t (*t)[2])
{
	costs = t != NULL ? t : local_costs;
}

static _Atomic uint64_t (*table(void))[2]
{
	return costs;
}

/* The slot of <key>, claiming one when <claim>; NULL when none. */
static _Atomic uint64_t *
slot_of(uint64_t key, bool claim)
{
	_Atomic uint64_t (*t)[2] = table();
	uint64_t home = key % SHM_GSI_COSTS;

	for (uint64_t i = 0; i < PROBE; i++) {
		_Atomic uint64_t *s = t[(home + i) % SHM_GSI_COSTS];
		uint64_t k = atomic_load(&s[0]);

		if (k == key)
			return s;
		if (k == 0 && claim && atomic_compare_exchange_strong(&s[0], &k, key)) {
			atomic_store(&s[1], 0);
			return s;
		}
		if (k == key)	/* (claimed by another process meanwhile) */
			return s;
	}
	if (!claim)
		return NULL;
	atomic_store(&t[home][1], 0);	/* (the home slot's estimate gives way) */
	atomic_store(&t[home][0], key);
	return t[home];
}

uint64_t
shm_gsi_cost_load(uint64_t key)
{
	_Atomic uint64_t *s = slot_of(key, false);

	return s != NULL ? atomic_load(&s[1]) : 0;
}

bool
shm_gsi_cost_swap(uint64_t key, uint64_t old, uint64_t word)
{
	_Atomic uint64_t *s = slot_of(key, true);

	return atomic_compare_exchange_strong(&s[1], &old, word);
}
