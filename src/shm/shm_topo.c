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

/* The topology family: header words and slot areas (the protocol is in shm_image.c). */
static struct shm_image_family
topo_family(void)
{
	struct shm_header *h = shm_header();

	return (struct shm_image_family){ &h->topo_current, h->topo, SHM_TOPO_SLOTS,
					  shm_layout_get()->topo_off };
}

bool
shm_topo_claim(unsigned *slot)
{
	struct shm_image_family f = topo_family();

	return shm_image_claim(&f, slot);
}

void *
shm_topo_data(unsigned slot)
{
	struct shm_image_family f = topo_family();

	return shm_image_data(&f, slot);
}

size_t
shm_topo_capacity(void)
{
	return shm_layout_get()->topo_area;
}

void
shm_topo_publish(unsigned slot, uint64_t revision, size_t len)
{
	struct shm_image_family f = topo_family();

	shm_image_publish(&f, slot, revision, len);
}

void
shm_topo_abandon(unsigned slot)
{
	struct shm_image_family f = topo_family();

	shm_image_abandon(&f, slot);
}

bool
shm_topo_pin(struct shm_topo_ref *ref)
{
	struct shm_image_family f = topo_family();

	return shm_image_pin(&f, ref);
}

void
shm_topo_unpin(const struct shm_topo_ref *ref)
{
	struct shm_image_family f = topo_family();

	shm_image_unpin(&f, ref);
}

uint64_t
shm_topo_revision(void)
{
	struct shm_image_family f = topo_family();

	return shm_image_version(&f);
}
