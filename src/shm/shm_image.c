/*
 * shm_image.c - the slot protocol shared by topology and catalog images.
 *
 * A family is a set of byte areas ("slots") plus one atomic word naming the published one:
 * current = version << 8 | (slot + 1), 0 = none, so a reader learns the version with one
 * load and can tell a reused slot from the one it saw.
 *
 * Writer (the admin): shm_image_claim() takes a slot that is neither current nor pinned by
 * setting SHM_TOPO_WRITER in its pin count, the caller fills shm_image_data(), then
 * shm_image_publish() stores the current word and only then drops the writer bit.
 * Reader: shm_image_pin() increments the pin count of the current slot and checks that the
 * slot is still the current one; otherwise it lets go and tries again.
 * shm_topo.c and shm_cat.c are the two families.
 */
#include "neki/base.h"

#include "shm_int.h"

_Static_assert(SHM_TOPO_SLOTS < 255 && SHM_CAT_SLOTS < 255,
	       "slot index must fit in the low byte of the current word");

static uint64_t
current_word(const struct shm_image_family *f)
{
	return atomic_load_explicit(f->current, memory_order_acquire);
}

/* Slot named by a current word, or -1 for none. */
static int
word_slot(uint64_t w)
{
	return (int)(w & 0xff) - 1;
}

/* Claim a free slot of <f> for writing; false when every slot is current or pinned. */
bool
shm_image_claim(const struct shm_image_family *f, unsigned *slot)
{
	for (unsigned s = 0; s < f->nslots; s++) {
		uint32_t zero = 0;

		if (word_slot(current_word(f)) == (int)s)
			continue;
		if (!atomic_compare_exchange_strong(&f->slots[s].pins, &zero, SHM_TOPO_WRITER))
			continue;
		/* Another writer may have published s before our claim: look again. */
		if (word_slot(current_word(f)) == (int)s) {
			atomic_fetch_and(&f->slots[s].pins, ~SHM_TOPO_WRITER);
			continue;
		}
		*slot = s;
		return true;
	}
	return false;
}

/* The bytes of slot <slot> of <f> (shm_layout's image area size each). */
void *
shm_image_data(const struct shm_image_family *f, unsigned slot)
{
	const struct shm_layout *l = shm_layout_get();

	NK_ASSERT(slot < f->nslots);
	return l->base + f->off + (size_t)slot * l->topo_area;
}

/* Publish the claimed <slot> of <f> as <version> holding <len> bytes; drops the claim. */
void
shm_image_publish(const struct shm_image_family *f, unsigned slot, uint64_t version, size_t len)
{
	struct shm_topo_slot *ts = &f->slots[slot];

	NK_ASSERT(slot < f->nslots && len <= shm_layout_get()->topo_area);
	NK_ASSERT(atomic_load(&ts->pins) & SHM_TOPO_WRITER);
	NK_ASSERT(version < (UINT64_C(1) << 56));
	atomic_store(&ts->revision, version);
	atomic_store(&ts->len, len);
	atomic_store_explicit(f->current, version << 8 | (slot + 1), memory_order_release);
	atomic_fetch_and(&ts->pins, ~SHM_TOPO_WRITER);
}

/* Give up a claimed slot without publishing it. */
void
shm_image_abandon(const struct shm_image_family *f, unsigned slot)
{
	NK_ASSERT(slot < f->nslots);
	atomic_fetch_and(&f->slots[slot].pins, ~SHM_TOPO_WRITER);
}

/* Pin the published image of <f> into <ref>; false when nothing is published. */
bool
shm_image_pin(const struct shm_image_family *f, struct shm_topo_ref *ref)
{
	for (;;) {
		uint64_t w = current_word(f);
		int s = word_slot(w);
		uint32_t prev;

		if (s < 0)
			return false;
		prev = atomic_fetch_add(&f->slots[s].pins, 1);
		if ((prev & SHM_TOPO_WRITER) == 0 && current_word(f) == w) {
			ref->slot = (unsigned)s;
			ref->revision = w >> 8;
			ref->data = shm_image_data(f, (unsigned)s);
			ref->len = atomic_load(&f->slots[s].len);
			return true;
		}
		atomic_fetch_sub(&f->slots[s].pins, 1);
	}
}

/* Drop a pin taken by shm_image_pin(). */
void
shm_image_unpin(const struct shm_image_family *f, const struct shm_topo_ref *ref)
{
	uint32_t prev = atomic_fetch_sub(&f->slots[ref->slot].pins, 1);

	NK_ASSERT((prev & ~SHM_TOPO_WRITER) > 0);
}

/* The published version of <f>, 0 when none. */
uint64_t
shm_image_version(const struct shm_image_family *f)
{
	return current_word(f) >> 8;
}
