/*
 * shm_welcome.c - the pools' welcomes in the shared segment (neki/shm_welcome.h).
 *
 * A slot's state word is (pool id + 1) << 2 | phase: 0 is an empty slot, WRITING a claimed
 * one whose bytes are being written, READY a published one. Claiming is one CAS from 0;
 * the bytes and the length are written before the release store of READY, and a reader
 * copies them only after an acquire load of READY, so no reader sees a half-written welcome.
 * A slot never changes once READY. A publisher that dies while WRITING leaves its pool
 * unshared (readers treat WRITING as "none yet").
 */
#include "neki/base.h"

#include "neki/shm_welcome.h"

#include <stdatomic.h>
#include <string.h>

#include "shm_int.h"

enum { WELCOME_WRITING = 1, WELCOME_READY = 2 };

static struct shm_welcome_slot *
slot_at(unsigned i)
{
	const struct shm_layout *l = shm_layout_get();

	return (struct shm_welcome_slot *)(l->base + l->welcome_off) + i;
}

static uint32_t
state_of(unsigned pool_id, unsigned phase)
{
	return ((uint32_t)pool_id + 1) << 2 | phase;
}

/* The slot of <pool_id>, claimed for it when <claim> and it has none; NULL when none. */
static struct shm_welcome_slot *
find(unsigned pool_id, bool claim, bool *claimed)
{
	*claimed = false;
	for (unsigned n = 0; n < SHM_WELCOME_SLOTS; n++) {
		struct shm_welcome_slot *s = slot_at((pool_id + n) % SHM_WELCOME_SLOTS);
		uint32_t st = atomic_load_explicit(&s->state, memory_order_acquire);

		if (st == 0 && claim &&
		    atomic_compare_exchange_strong_explicit(&s->state, &st,
							    state_of(pool_id, WELCOME_WRITING),
							    memory_order_acq_rel,
							    memory_order_acquire)) {
			*claimed = true;
			return s;
		}
		if (st == 0)
			return NULL;
		if (st >> 2 == (uint32_t)pool_id + 1)
			return s;
	}
	return NULL;
}

/* shm_welcome_publish: see neki/shm_welcome.h. */
bool
shm_welcome_publish(unsigned pool_id, const void *data, size_t len)
{
	bool claimed;
	struct shm_welcome_slot *s;

	if (len > SHM_WELCOME_MAX)
		return false;
	s = find(pool_id, true, &claimed);
	if (s == NULL)
		return false;
	if (!claimed)	/* (an earlier welcome, or one being written) */
		return (atomic_load_explicit(&s->state, memory_order_acquire) & 3) ==
		       WELCOME_READY;
	memcpy(s->data, data, len);
	s->len = (uint32_t)len;
	atomic_store_explicit(&s->state, state_of(pool_id, WELCOME_READY), memory_order_release);
	return true;
}

/* shm_welcome_get: see neki/shm_welcome.h. */
size_t
shm_welcome_get(unsigned pool_id, void *buf, size_t cap)
{
	bool claimed;
	struct shm_welcome_slot *s = find(pool_id, false, &claimed);

	if (s == NULL ||
	    (atomic_load_explicit(&s->state, memory_order_acquire) & 3) != WELCOME_READY ||
	    s->len > cap)
		return 0;
	memcpy(buf, s->data, s->len);
	return s->len;
}
