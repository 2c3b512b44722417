/*
 * stats.h - the console's statistics (src/admin/stats.c): SHOW STATS, TOTALS,
 * STATS_TOTALS, STATS_AVERAGES, the snapshots every stats_period and the log_stats line.
 */
#ifndef NEKI_ADMIN_STATS_H
#define NEKI_ADMIN_STATS_H

#include "neki/base.h"

#include "neki/shm.h"

struct adm_result;

/* Once a second (follow.c's tick): every stats_period, the snapshots and the log_stats line. */
void adm_stats_tick(void);

/* One database's stats: the live sums over every process and the older snapshot. */
struct stats_row {
	char name[SHM_MSG_NAME_MAX];
	struct shm_stats cur;
	struct shm_stats older;
};

/*
 * The databases' rows, sorted by name, the admin database `pgbouncer` included; <total>
 * gets the sum of everything (unlisted overflow too). Caller frees; NULL (n 0) on no memory.
 */
struct stats_row *stats_rows(size_t *n, struct shm_stats *total);
/* pgbouncer's calc_average of <cur> against <old> over the time since <old> was taken. */
void stats_average(const struct shm_stats *cur, const struct shm_stats *old,
		   struct shm_stats *avg);
/* The totals' older snapshot. */
const struct shm_stats *stats_total_older(void);
/* pgbouncer's name of stats field <k> (SHOW TOTALS without the total_/avg_ prefix). */
const char *stats_field_name(size_t k);
void stats_show_stats(struct adm_result *r);
void stats_show_totals_by_db(struct adm_result *r);
void stats_show_averages(struct adm_result *r);
void stats_show_totals(struct adm_result *r);

#endif /* NEKI_ADMIN_STATS_H */
