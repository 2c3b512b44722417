/*
 * shm_dbstats.c - per-database stats (pgbouncer's SHOW STATS rows) of every process.
 *
 * The hot path never touches shared memory: a session holds a pointer to its database's
 * plain counters in a process-local table (shm_dbstats_get) and increments them. Once a
 * second the owner copies the table into its slot's area under a seqlock
 * (shm_dbstats_publish); the admin copies areas out (shm_dbstats_read) and adds them up by
 * database name. Entries are never removed: a name keeps its index for the life of the
 * process, so the copy is a plain array. The last entry (name "") takes the databases that
 * do not fit. Entry points: shm_dbstats_get(), shm_dbstats_publish(), shm_dbstats_read().
 */
#include "neki/base.h"

#include "neki/shm.h"
#include "neki/shm_dbstats.h"

#include <stdio.h>
#include <string.h>

#include "shm_int.h"

#define DBSTAT_WORDS (sizeof(struct shm_dbstat) / sizeof(uint64_t))

_Static_assert(sizeof(struct shm_dbstat) % sizeof(uint64_t) == 0, "whole words");

static struct shm_dbstat table[SHM_DB_STATS_MAX];	/* this process's counters */
static size_t n_used;					/* entries in use (named ones first) */

struct shm_dbstats_area *
shm_dbstats_area(unsigned i)
{
	const struct shm_layout *l = shm_layout_get();

	NK_ASSERT(i < l->n_procs);
	return (struct shm_dbstats_area *)(l->base + l->dbstats_off) + i;
}

struct shm_stats *
shm_dbstats_get(const char *name)
{
	size_t i;

	for (i = 0; i < n_used; i++) {
		if (strcmp(table[i].name, name) == 0)
			return &table[i].st;
	}
	if (n_used >= SHM_DB_STATS_MAX - 1) {	/* full: the overflow entry, named "" */
		n_used = SHM_DB_STATS_MAX;
		return &table[SHM_DB_STATS_MAX - 1].st;
	}
	snprintf(table[i].name, sizeof(table[i].name), "%s", name);
	n_used++;
	return &table[i].st;
}

void
shm_dbstats_publish(unsigned i)
{
	struct shm_dbstats_area *a = shm_dbstats_area(i);

	atomic_fetch_add_explicit(&a->seq, 1, memory_order_acq_rel);
	for (size_t e = 0; e < n_used; e++) {
		uint64_t w[DBSTAT_WORDS];

		memcpy(w, &table[e], sizeof(w));
		for (size_t k = 0; k < DBSTAT_WORDS; k++)
			atomic_store_explicit(&a->words[e][k], w[k], memory_order_relaxed);
	}
	atomic_store_explicit(&a->n, (uint32_t)n_used, memory_order_relaxed);
	atomic_fetch_add_explicit(&a->seq, 1, memory_order_release);
}

size_t
shm_dbstats_read(unsigned i, struct shm_dbstat *out)
{
	struct shm_dbstats_area *a = shm_dbstats_area(i);
	uint32_t s1, s2, n;

	do {
		s1 = atomic_load_explicit(&a->seq, memory_order_acquire);
		n = atomic_load_explicit(&a->n, memory_order_relaxed);
		if (n > SHM_DB_STATS_MAX)
			n = SHM_DB_STATS_MAX;
		for (uint32_t e = 0; e < n; e++) {
			uint64_t w[DBSTAT_WORDS];

			for (size_t k = 0; k < DBSTAT_WORDS; k++)
				w[k] = atomic_load_explicit(&a->words[e][k], memory_order_relaxed);
			memcpy(&out[e], w, sizeof(w));
		}
		atomic_thread_fence(memory_order_acquire);
		s2 = atomic_load_explicit(&a->seq, memory_order_relaxed);
	} while ((s1 & 1) != 0 || s1 != s2);
	for (uint32_t e = 0; e < n; e++)
		out[e].name[sizeof(out[e].name) - 1] = '\0';
	return n;
}

void
shm_dbstats_restore(unsigned i)
{
	n_used = shm_dbstats_read(i, table);
}

void
shm_dbstats_total(struct shm_stats *out)
{
	uint64_t *dst = (uint64_t *)out;

	memset(out, 0, sizeof(*out));
	for (size_t e = 0; e < n_used; e++) {
		const uint64_t *src = (const uint64_t *)&table[e].st;

		for (size_t k = 0; k < SHM_STATS_WORDS; k++)
			dst[k] += src[k];
	}
}
