/*
 * shm_names.c - the name registry of the shared segment (neki/shm_names.h).
 *
 * Each kind has a table of SHM_NAMES_SLOTS slots, looked up by open addressing (linear
 * probing from the key's nk_hash64). A slot's state word goes EMPTY -> CLAIMING (a CAS by
 * the process that found it empty; the claimer's process slot + 1 in the upper bits) ->
 * READY (a release store once the key bytes are written), and never back: nothing is freed,
 * so a key that is in the table is always found before the first empty slot of its probe
 * sequence. A lookup that meets a CLAIMING slot yields until it is READY and then compares
 * the stored key exactly: two processes racing for one key end in the same slot. A claimer
 * that dies in between leaves its slot to the master, which marks it DEAD (passed over) in
 * shm_names_reclaim(). Entry points: shm_names_id(), shm_names_reclaim().
 */
#include "neki/base.h"

#include "neki/hash.h"
#include "neki/shm_names.h"

#include <sched.h>
#include <string.h>

#include "neki/log.h"
#include "neki/shm.h"

#include "shm_int.h"

enum names_state {
	NAMES_ST_EMPTY = 0,	/* never used (the segment starts zeroed) */
	NAMES_ST_CLAIMING = 1,	/* [transient] a process writes the key */
	NAMES_ST_READY = 2,	/* key and len are written and never change */
	NAMES_ST_DEAD = 3,	/* its claimer died before READY: never matches */
};

#define NAMES_ST_MASK UINT32_C(0xff)
#define NAMES_OWNER_SHIFT 8	/* CLAIMING: the claimer's process slot + 1 (0 = master) */

/* Why a key got a shared id (one warning per process, kind and reason). */
enum names_fallback {
	NAMES_FB_LONG = 0,	/* longer than SHM_NAMES_KEY_MAX */
	NAMES_FB_FULL = 1,	/* every slot of its table holds another key */
};

static bool warned[SHM_NAMES_KINDS][2];

const char *
shm_names_kind_str(enum shm_names_kind kind)
{
	switch (kind) {
	case SHM_NAMES_DB: return "database";
	case SHM_NAMES_USER: return "user";
	case SHM_NAMES_POOL: return "pool";
	}
	return "unknown";
}

/* Slot <i> of the table of <kind>. */
static struct shm_names_slot *
names_slot(enum shm_names_kind kind, unsigned i)
{
	const struct shm_layout *l = shm_layout_get();

	NK_ASSERT((unsigned)kind < SHM_NAMES_KINDS && i < SHM_NAMES_SLOTS);
	return (struct shm_names_slot *)(l->base + l->names_off) +
	       (size_t)kind * SHM_NAMES_SLOTS + i;
}

static uint64_t
names_hash(const void *key, size_t len)
{
	return nk_hash64(key, len);
}

/* The shared id of a key of hash <h> that has no slot, warning once about <why>. */
static unsigned
names_fallback(enum shm_names_kind kind, uint64_t h, enum names_fallback why)
{
	if (!warned[kind][why]) {
		warned[kind][why] = true;
		if (why == NAMES_FB_LONG)
			log_warn("a %s name longer than %d bytes shares its global limits with "
				 "other such names (shm name registry)",
				 shm_names_kind_str(kind), SHM_NAMES_KEY_MAX);
		else
			log_warn("the shm name registry is full (%d %s names): new names share "
				 "their global limits", SHM_NAMES_SLOTS, shm_names_kind_str(kind));
	}
	return SHM_NAMES_SLOTS + (unsigned)(h % SHM_NAMES_SHARED);
}

/* Write <key> into <s>, which this process has just claimed, and publish it. */
static void
names_fill(struct shm_names_slot *s, const void *key, size_t len)
{
	s->len = (uint32_t)len;
	memcpy(s->key, key, len);
	atomic_store_explicit(&s->state, NAMES_ST_READY, memory_order_release);
}

/*
 * Does slot <s> hold <key> once settled? An empty slot is claimed for it (true); a slot
 * being claimed is waited for; a dead one never matches.
 */
static bool
names_settle(struct shm_names_slot *s, const void *key, size_t len)
{
	uint32_t mine = NAMES_ST_CLAIMING | (uint32_t)(shm_self() + 1) << NAMES_OWNER_SHIFT;
	uint32_t st = atomic_load_explicit(&s->state, memory_order_acquire);

	for (;;) {
		switch (st & NAMES_ST_MASK) {
		case NAMES_ST_EMPTY:
			if (!atomic_compare_exchange_weak_explicit(&s->state, &st, mine,
								   memory_order_acq_rel,
								   memory_order_acquire))
				continue;	/* <st> holds what won */
			names_fill(s, key, len);
			return true;
		case NAMES_ST_CLAIMING:
			sched_yield();	/* the claimer writes at most SHM_NAMES_KEY_MAX bytes */
			st = atomic_load_explicit(&s->state, memory_order_acquire);
			continue;
		case NAMES_ST_READY:
			return s->len == len && memcmp(s->key, key, len) == 0;
		default:
			return false;
		}
	}
}

unsigned
shm_names_id(enum shm_names_kind kind, const void *key, size_t len)
{
	uint64_t h = names_hash(key, len);

	if (len > SHM_NAMES_KEY_MAX)
		return names_fallback(kind, h, NAMES_FB_LONG);
	for (unsigned n = 0; n < SHM_NAMES_SLOTS; n++) {
		unsigned i = (unsigned)((h + n) % SHM_NAMES_SLOTS);

		if (names_settle(names_slot(kind, i), key, len))
			return i;
	}
	return names_fallback(kind, h, NAMES_FB_FULL);
}

unsigned
shm_names_name(enum shm_names_kind kind, const char *name)
{
	return shm_names_id(kind, name, strlen(name));
}

unsigned
shm_names_pool(unsigned db_id, unsigned user_id)
{
	uint32_t key[2] = { db_id, user_id };

	return shm_names_id(SHM_NAMES_POOL, key, sizeof(key));
}

void
shm_names_reclaim(unsigned i)
{
	uint32_t theirs = NAMES_ST_CLAIMING | (i + 1) << NAMES_OWNER_SHIFT;

	for (unsigned k = 0; k < SHM_NAMES_KINDS; k++) {
		for (unsigned j = 0; j < SHM_NAMES_SLOTS; j++) {
			struct shm_names_slot *s = names_slot((enum shm_names_kind)k, j);
			uint32_t st = theirs;

			atomic_compare_exchange_strong(&s->state, &st, NAMES_ST_DEAD);
		}
	}
}
