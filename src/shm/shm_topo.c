/*
 * shm_topo.c - topology image slots in shared memory.
 *
 * SHM_TOPO_SLOTS byte areas each hold one self-contained (offset-based) image of a
 * validated topology revision. The published image is named by one atomic word in
 * the header, topo_current = revision << 8 | (slot + 1), so workers learn the current
 * revision with one load and a reader can tell a reused slot from the one it saw.
 *
 * Writer (the admin): shm_topo_claim() takes a slot that is neither current nor
 * pinned by setting SHM_TOPO_WRITER in its pin count, fills shm_topo_data(), then
 * shm_topo_publish() stores topo_current and only then drops the writer bit.
 * Reader: shm_topo_pin() increments the pin count of the current slot and checks
 * that the slot is still the current one; otherwise it lets go and tries again.
 */
#include "neki/base.h"

#include "neki/shm.h"

#include "shm_int.h"

_Static_assert(SHM_TOPO_SLOTS < 255, "slot index must fit in the low byte of topo_current");

static uint64_t
current_word(void)
{
	return atomic_load_explicit(&shm_header()->topo_current, memory_order_acquire);
}

/* Slot named by a topo_current word, or -1 for none. */
static int
word_slot(uint64_t w)
{
	return (int)(w & 0xff) - 1;
}

bool
shm_topo_claim(unsigned *slot)
{
	struct shm_header *h = shm_header();

	for (unsigned s = 0; s < SHM_TOPO_SLOTS; s++) {
		uint32_t zero = 0;

		if (word_slot(current_word()) == (int)s)
			continue;
		if (!atomic_compare_exchange_strong(&h->topo[s].pins, &zero, SHM_TOPO_WRITER))
			continue;
		/* Another writer may have published s before our claim: look again. */
		if (word_slot(current_word()) == (int)s) {
			atomic_fetch_and(&h->topo[s].pins, ~SHM_TOPO_WRITER);
			continue;
		}
		*slot = s;
		return true;
	}
	return false;
}

void *
shm_topo_data(unsigned slot)
{
	const struct shm_layout *l = shm_layout_get();

	NK_ASSERT(slot < SHM_TOPO_SLOTS);
	return l->base + l->topo_off + (size_t)slot * l->topo_area;
}

size_t
shm_topo_capacity(void)
{
	return shm_layout_get()->topo_area;
}

void
shm_topo_publish(unsigned slot, uint64_t revision, size_t len)
{
	struct shm_topo_slot *ts = &shm_header()->topo[slot];

	NK_ASSERT(slot < SHM_TOPO_SLOTS && len <= shm_topo_capacity());
	NK_ASSERT(atomic_load(&ts->pins) & SHM_TOPO_WRITER);
	NK_ASSERT(revision < (UINT64_C(1) << 56));
	atomic_store(&ts->revision, revision);
	atomic_store(&ts->len, len);
	atomic_store_explicit(&shm_header()->topo_current, revision << 8 | (slot + 1),
			      memory_order_release);
	atomic_fetch_and(&ts->pins, ~SHM_TOPO_WRITER);
}

void
shm_topo_abandon(unsigned slot)
{
	NK_ASSERT(slot < SHM_TOPO_SLOTS);
	atomic_fetch_and(&shm_header()->topo[slot].pins, ~SHM_TOPO_WRITER);
}

bool
shm_topo_pin(struct shm_topo_ref *ref)
{
	struct shm_header *h = shm_header();

	for (;;) {
		uint64_t w = current_word();
		int s = word_slot(w);
		uint32_t prev;

		if (s < 0)
			return false;
		prev = atomic_fetch_add(&h->topo[s].pins, 1);
		if ((prev & SHM_TOPO_WRITER) == 0 && current_word() == w) {
			ref->slot = (unsigned)s;
			ref->revision = w >> 8;
			ref->data = shm_topo_data((unsigned)s);
			ref->len = atomic_load(&h->topo[s].len);
			return true;
		}
		atomic_fetch_sub(&h->topo[s].pins, 1);
	}
}

void
shm_topo_unpin(const struct shm_topo_ref *ref)
{
	uint32_t prev = atomic_fetch_sub(&shm_header()->topo[ref->slot].pins, 1);

	NK_ASSERT((prev & ~SHM_TOPO_WRITER) > 0);
}

uint64_t
shm_topo_revision(void)
{
	return current_word() >> 8;
}
