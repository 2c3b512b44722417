/*
 * neki/shm_dbstats.h - per-database stats (src/shm/shm_dbstats.c).
 */
#ifndef NEKI_SHM_DBSTATS_H
#define NEKI_SHM_DBSTATS_H

#include "neki/base.h"

#include "neki/shm.h"

/*
 * Per-database stats (shm_dbstats.c). The owner process counts into plain process-local
 * counters (shm_dbstats_get: no atomics on the hot path) and copies them into its slot's
 * area once a second (shm_dbstats_publish, a seqlock); readers copy an area out
 * (shm_dbstats_read) and add the processes up by name.
 */
/* The counters of database <name> in this process (created on first use; never NULL). */
struct shm_stats *shm_dbstats_get(const char *name);
/* Publish this process's per-database counters into slot <i>'s area. */
void shm_dbstats_publish(unsigned i);
/* Start from what slot <i>'s area holds (a restarted child keeps its slot's totals). */
void shm_dbstats_restore(unsigned i);
/* The sum of this process's per-database counters into <out>. */
void shm_dbstats_total(struct shm_stats *out);
/*
 * Copy slot <i>'s published entries into <out> (room for SHM_DB_STATS_MAX); returns how
 * many. A consistent copy (retries while the owner writes).
 */
size_t shm_dbstats_read(unsigned i, struct shm_dbstat *out);

#endif /* NEKI_SHM_DBSTATS_H */
