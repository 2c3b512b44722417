/*
 * shm_epoch.c - the global ids' epoch in the segment header (include/neki/shm_epoch.h).
 */
#include "neki/base.h"

#include <stdatomic.h>

#include "neki/shm.h"
#include "neki/shm_epoch.h"

uint64_t
shm_tx_epoch(void)
{
	return shm_header() ? atomic_load(&shm_header()->tx_epoch) : 0;
}

void
shm_tx_epoch_set(uint64_t e)
{
	if (shm_header())
		atomic_store(&shm_header()->tx_epoch, e);
}
