/*
 * shm_welcome.c - the pools' welcomes in the shared segment (neki/shm_welcome.h).
 *
 * A slot belongs to one pool id for good once claimed (one CAS of `owner` from 0). Its
 * welcome is guarded by a seqlock: a writer (publish, or clear when the pool is reset) makes
 * `seq` odd with one CAS, writes the length and the words, and makes it even again with a
 * release store; a reader copies only between two equal even values of `seq`, so no reader
 * takes a half-written or cleared welcome. The bytes live in atomic words (relaxed), so
 * copying them while a writer runs is no data race. A writer that dies with `seq` odd leaves
 * its pool unshared (readers and writers take an odd `seq` as "busy": none).
 */
#include "neki/base.h"

#include "neki/shm_welcome.h"

#include <stdatomic.h>
#include <string.h>

#include "shm_int.h"

_Static_assert(SHM_WELCOME_MAX % 8 == 0, "a welcome fills whole words");

static struct shm_welcome_slot *
slot_at(unsigned i)
{
	const struct shm_layout *l = shm_layout_get();

	return (struct shm_welcome_slot *)(l->base + l->welcome_off) + i;
}

/* The slot of <pool_id>, claimed for it when <claim> and it has none; NULL when none. */
static struct shm_welcome_slot *
find(unsigned pool_id, bool claim)
{
	uint32_t me = (uint32_t)pool_id + 1;

	for (unsigned n = 0; n < SHM_WELCOME_SLOTS; n++) {
		struct shm_welcome_slot *s = slot_at((pool_id + n) % SHM_WELCOME_SLOTS);
		uint32_t owner = atomic_load_explicit(&s->owner, memory_order_acquire);

		if (owner == 0 && claim &&
		    atomic_compare_exchange_strong_explicit(&s->owner, &owner, me,
							    memory_order_acq_rel,
							    memory_order_acquire))
			return s;
		if (owner == 0)
			return NULL;
		if (owner == me)
			return s;
	}
	return NULL;
}

/* Begin writing <s>: true with *<seq> the odd value it holds now; false when busy. */
static bool
write_begin(struct shm_welcome_slot *s, uint32_t *seq)
{
	uint32_t even = atomic_load_explicit(&s->seq, memory_order_acquire);

	if ((even & 1) != 0 ||
	    !atomic_compare_exchange_strong_explicit(&s->seq, &even, even + 1,
						     memory_order_acq_rel, memory_order_acquire))
		return false;
	*seq = even + 1;
	return true;
}

static void
write_end(struct shm_welcome_slot *s, uint32_t seq)
{
	atomic_store_explicit(&s->seq, seq + 1, memory_order_release);
}

/* shm_welcome_publish: see neki/shm_welcome.h. */
bool
shm_welcome_publish(unsigned pool_id, const void *data, size_t len)
{
	uint64_t w[SHM_WELCOME_WORDS] = { 0 };
	struct shm_welcome_slot *s;
	uint32_t seq;

	if (len == 0 || len > SHM_WELCOME_MAX || (s = find(pool_id, true)) == NULL)
		return false;
	if (!write_begin(s, &seq))
		return false;	/* another process is writing it */
	if (atomic_load_explicit(&s->len, memory_order_relaxed) != 0) {
		write_end(s, seq);	/* an earlier welcome: kept */
		return true;
	}
	memcpy(w, data, len);
	for (size_t k = 0; k < (len + 7) / 8; k++)
		atomic_store_explicit(&s->words[k], w[k], memory_order_relaxed);
	atomic_store_explicit(&s->len, (uint32_t)len, memory_order_relaxed);
	write_end(s, seq);
	return true;
}

/* shm_welcome_clear: see neki/shm_welcome.h. */
void
shm_welcome_clear(unsigned pool_id)
{
	struct shm_welcome_slot *s = find(pool_id, false);
	uint32_t seq;

	for (int tries = 0; s != NULL && tries < 1000; tries++) {
		if (write_begin(s, &seq)) {
			atomic_store_explicit(&s->len, 0, memory_order_relaxed);
			write_end(s, seq);
			return;
		}
	}
}

/* shm_welcome_get: see neki/shm_welcome.h. */
size_t
shm_welcome_get(unsigned pool_id, void *buf, size_t cap)
{
	struct shm_welcome_slot *s = find(pool_id, false);
	uint64_t w[SHM_WELCOME_WORDS];
	uint32_t s1, s2, len;

	if (s == NULL)
		return 0;
	s1 = atomic_load_explicit(&s->seq, memory_order_acquire);
	len = atomic_load_explicit(&s->len, memory_order_relaxed);
	if ((s1 & 1) != 0 || len == 0 || len > SHM_WELCOME_MAX || len > cap)
		return 0;
	for (size_t k = 0; k < (len + 7) / 8; k++)
		w[k] = atomic_load_explicit(&s->words[k], memory_order_relaxed);
	atomic_thread_fence(memory_order_acquire);
	s2 = atomic_load_explicit(&s->seq, memory_order_relaxed);
	if (s1 != s2)
		return 0;	/* written meanwhile: none for now */
	memcpy(buf, w, len);
	return len;
}
