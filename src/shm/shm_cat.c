/*
 * shm_cat.c - catalog image slots in shared memory, and catalog refresh requests.
 *
 * SHM_CAT_SLOTS byte areas each hold one self-contained catalog image (neki/catalog_image.h).
 * They follow the topology slots' protocol (shm_topo.c): the published image is named by
 * one atomic word, cat_current = version << 8 | (slot + 1); the writer (the admin) claims a
 * slot that is neither current nor pinned by setting SHM_TOPO_WRITER in its pin count,
 * fills it, publishes it, then drops the writer bit; readers pin the current slot and check
 * it is still current.
 *
 * Refresh requests: a worker that ran DDL bumps cat_requests; the admin polls
 * shm_cat_requested() and, once the catalog it loaded after seeing request n is published,
 * stores cat_served = n, so the worker knows its DDL is in the catalog.
 */
#include "neki/base.h"

#include "neki/shm.h"

#include "shm_int.h"

_Static_assert(SHM_CAT_SLOTS < 255, "slot index must fit in the low byte of cat_current");

static uint64_t
current_word(void)
{
	return atomic_load_explicit(&shm_header()->cat_current, memory_order_acquire);
}

/* Slot named by a cat_current word, or -1 for none. */
static int
word_slot(uint64_t w)
{
	return (int)(w & 0xff) - 1;
}

bool
shm_cat_claim(unsigned *slot)
{
	struct shm_header *h = shm_header();

	for (unsigned s = 0; s < SHM_CAT_SLOTS; s++) {
		uint32_t zero = 0;

		if (word_slot(current_word()) == (int)s)
			continue;
		if (!atomic_compare_exchange_strong(&h->cat[s].pins, &zero, SHM_TOPO_WRITER))
			continue;
		/* Another writer may have published s before our claim: look again. */
		if (word_slot(current_word()) == (int)s) {
			atomic_fetch_and(&h->cat[s].pins, ~SHM_TOPO_WRITER);
			continue;
		}
		*slot = s;
		return true;
	}
	return false;
}

void *
shm_cat_data(unsigned slot)
{
	const struct shm_layout *l = shm_layout_get();

	NK_ASSERT(slot < SHM_CAT_SLOTS);
	return l->base + l->cat_off + (size_t)slot * l->topo_area;
}

size_t
shm_cat_capacity(void)
{
	return shm_layout_get()->topo_area;
}

/* shm_cat_publish: see shm.h. catalog_version mirrors the published version. */
void
shm_cat_publish(unsigned slot, uint64_t version, uint64_t served, size_t len)
{
	struct shm_header *h = shm_header();
	struct shm_topo_slot *cs = &h->cat[slot];

	NK_ASSERT(slot < SHM_CAT_SLOTS && len <= shm_cat_capacity());
	NK_ASSERT(atomic_load(&cs->pins) & SHM_TOPO_WRITER);
	NK_ASSERT(version < (UINT64_C(1) << 56));
	atomic_store(&cs->revision, version);
	atomic_store(&cs->len, len);
	atomic_store_explicit(&h->cat_current, version << 8 | (slot + 1), memory_order_release);
	atomic_store(&h->catalog_version, version);
	atomic_store(&h->cat_served, served);
	atomic_fetch_and(&cs->pins, ~SHM_TOPO_WRITER);
}

void
shm_cat_abandon(unsigned slot)
{
	NK_ASSERT(slot < SHM_CAT_SLOTS);
	atomic_fetch_and(&shm_header()->cat[slot].pins, ~SHM_TOPO_WRITER);
}

bool
shm_cat_pin(struct shm_topo_ref *ref)
{
	struct shm_header *h = shm_header();

	for (;;) {
		uint64_t w = current_word();
		int s = word_slot(w);
		uint32_t prev;

		if (s < 0)
			return false;
		prev = atomic_fetch_add(&h->cat[s].pins, 1);
		if ((prev & SHM_TOPO_WRITER) == 0 && current_word() == w) {
			ref->slot = (unsigned)s;
			ref->revision = w >> 8;
			ref->data = shm_cat_data((unsigned)s);
			ref->len = atomic_load(&h->cat[s].len);
			return true;
		}
		atomic_fetch_sub(&h->cat[s].pins, 1);
	}
}

void
shm_cat_unpin(const struct shm_topo_ref *ref)
{
	uint32_t prev = atomic_fetch_sub(&shm_header()->cat[ref->slot].pins, 1);

	NK_ASSERT((prev & ~SHM_TOPO_WRITER) > 0);
}

uint64_t
shm_cat_version(void)
{
	return current_word() >> 8;
}

uint64_t
shm_cat_request_refresh(void)
{
	return atomic_fetch_add(&shm_header()->cat_requests, 1) + 1;
}

uint64_t
shm_cat_requested(void)
{
	return atomic_load(&shm_header()->cat_requests);
}

uint64_t
shm_cat_served(void)
{
	return atomic_load(&shm_header()->cat_served);
}
