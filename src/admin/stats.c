/*
 * stats.c - pgbouncer's averages for SHOW TOTALS: every stats_period the admin keeps a
 * snapshot of the summed shm stats; an average compares the last two snapshots. Counts and
 * bytes are per second; xact_time and query_time are per transaction / query; wait_time is
 * per server assignment (microseconds), as pgbouncer computes them.
 * Entry points: adm_stats_tick(), stats_avg().
 */
#include "neki/base.h"

#include "admin_int.h"

#include <string.h>

#include "neki/config.h"
#include "neki/shm.h"

static struct shm_stats prev, last;	/* the two newest snapshots */
static uint64_t last_ms;		/* when <last> was taken (0 = never) */
static double period_s = 60;		/* seconds between prev and last */

/* The sum of every process's published stats. */
static void
stats_sum(struct shm_stats *sum)
{
	memset(sum, 0, sizeof(*sum));
	for (unsigned i = 0; i < shm_n_procs(); i++) {
		struct shm_stats s;
		uint64_t *dst = (uint64_t *)sum;
		const uint64_t *src = (const uint64_t *)&s;

		if (atomic_load(&shm_proc(i)->kind) == SHM_PROC_NONE)
			continue;
		shm_stats_read(shm_proc(i), &s);
		for (size_t w = 0; w < SHM_STATS_WORDS; w++)
			dst[w] += src[w];
	}
}

void
adm_stats_tick(void)
{
	double period = cfg_current()->stats_period;
	uint64_t now = shm_now_ms();

	if (period <= 0)
		period = 60;
	if (last_ms != 0 && (double)(now - last_ms) < period * 1000)
		return;
	prev = last;
	stats_sum(&last);
	period_s = last_ms ? (double)(now - last_ms) / 1000 : period;
	if (last_ms == 0)
		prev = last;
	last_ms = now;
}

/* Delta of word <i> between the two snapshots. */
static uint64_t
delta(size_t i)
{
	return ((const uint64_t *)&last)[i] - ((const uint64_t *)&prev)[i];
}

uint64_t
stats_avg(size_t i)
{
	static const size_t per_xact = offsetof(struct shm_stats, total_xact_time) / 8;
	static const size_t per_query = offsetof(struct shm_stats, total_query_time) / 8;
	static const size_t per_wait = offsetof(struct shm_stats, total_wait_time) / 8;
	uint64_t d = delta(i), n;

	if (i == per_xact)
		n = delta(offsetof(struct shm_stats, total_xact_count) / 8);
	else if (i == per_query)
		n = delta(offsetof(struct shm_stats, total_query_count) / 8);
	else if (i == per_wait)
		n = delta(offsetof(struct shm_stats, total_server_assignment_count) / 8);
	else
		return period_s > 0 ? (uint64_t)((double)d / period_s) : 0;
	return n ? d / n : 0;
}

void
adm_stats_sum(struct shm_stats *sum)
{
	stats_sum(sum);
}
