/*
 * shm_cat.c - catalog image slots in shared memory, and catalog refresh requests.
 *
 * SHM_CAT_SLOTS byte areas each hold one self-contained catalog image (neki/catalog_image.h).
 * They follow the image slot protocol (shm_image.c): the published image is named by
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

#include <stdio.h>

#include "neki/shm.h"

#include "shm_int.h"

/* The catalog family: header words and slot areas (the protocol is in shm_image.c). */
static struct shm_image_family
cat_family(void)
{
	struct shm_header *h = shm_header();

	return (struct shm_image_family){ &h->cat_current, h->cat, SHM_CAT_SLOTS,
					  shm_layout_get()->cat_off };
}

bool
shm_cat_claim(unsigned *slot)
{
	struct shm_image_family f = cat_family();

	return shm_image_claim(&f, slot);
}

void *
shm_cat_data(unsigned slot)
{
	struct shm_image_family f = cat_family();

	return shm_image_data(&f, slot);
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
	struct shm_image_family f = cat_family();
	struct shm_header *h = shm_header();

	shm_image_publish(&f, slot, version, len);
	atomic_store(&h->catalog_version, version);
	atomic_store(&h->cat_served, served);
}

void
shm_cat_abandon(unsigned slot)
{
	struct shm_image_family f = cat_family();

	shm_image_abandon(&f, slot);
}

bool
shm_cat_pin(struct shm_topo_ref *ref)
{
	struct shm_image_family f = cat_family();

	return shm_image_pin(&f, ref);
}

void
shm_cat_unpin(const struct shm_topo_ref *ref)
{
	struct shm_image_family f = cat_family();

	shm_image_unpin(&f, ref);
}

uint64_t
shm_cat_version(void)
{
	struct shm_image_family f = cat_family();

	return shm_image_version(&f);
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

uint64_t
shm_schema_version(void)
{
	return shm_header() ? atomic_load(&shm_header()->schema_version) : 0;
}

void
shm_schema_version_set(uint64_t v)
{
	if (shm_header())
		atomic_store(&shm_header()->schema_version, v);
}

/* shm_advice_set: see shm.h (a seqlock: readers retry while the count is odd or moved). */
void
shm_advice_set(uint64_t v, const char *text)
{
	struct shm_header *h = shm_header();

	if (h == NULL)
		return;
	atomic_fetch_add(&h->advice_seq, 1);
	snprintf(h->advice, sizeof(h->advice), "%s", text);
	atomic_store(&h->advice_version, v);
	atomic_fetch_add(&h->advice_seq, 1);
}

bool
shm_advice_get(uint64_t v, char *out, size_t cap)
{
	struct shm_header *h = shm_header();

	for (int tries = 0; h != NULL && tries < 8; tries++) {
		uint32_t s1 = atomic_load(&h->advice_seq);
		bool ok;

		if (s1 & 1)
			continue;
		ok = atomic_load(&h->advice_version) == v;
		if (ok)
			snprintf(out, cap, "%s", h->advice);
		if (atomic_load(&h->advice_seq) == s1)
			return ok;
	}
	return false;
}
