/*
 * stats.c - pgbouncer's statistics on the console: SHOW STATS, STATS_TOTALS, STATS_AVERAGES,
 * TOTALS, and the log_stats line.
 *
 * Every process publishes its per-database counters into shm (shm_dbstats_*) once a second,
 * and the workers again when a SHOW gathers their lists (the console SHOWs of stats gather
 * first, so figures are current); the rows here add them up by database name. pgbouncer's averages: every stats_period the admin keeps a
 * snapshot (newer becomes older, the live sums become newer, as pgbouncer's refresh_stats);
 * an average compares the live sums with the older snapshot over the time since it was the
 * newer one. Counts and bytes are per second; xact_time per transaction, query_time per
 * query, wait_time per server assignment (microseconds). The log line (log_stats) is
 * pgbouncer's, once per stats_period, for the whole pooler.
 * Entry points: adm_stats_tick(), stats_rows(), stats_show_*().
 */
#include "neki/base.h"

#include "admin_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "neki/clock.h"
#include "neki/config.h"
#include "neki/log.h"
#include "neki/shm.h"
#include "neki/shm_dbstats.h"

#define USEC UINT64_C(1000000)

/* A database's snapshots (the refresh keeps one per name ever seen). */
struct snap {
	char name[SHM_MSG_NAME_MAX];
	struct shm_stats newer, older;
};

static struct snap *snaps;		/* owned array */
static size_t n_snaps, cap_snaps;
static struct shm_stats total_newer, total_older;
static uint64_t old_stamp, new_stamp;	/* monotonic microseconds of the last two refreshes */
static struct shm_dbstat *readbuf;	/* owned: SHM_DB_STATS_MAX entries */

/*
 * One stats field per row, in struct shm_stats order: its column names per output (TOTALS'
 * names come from pgbouncer's struct), and its place in the log_stats line (rank 1.. in
 * line order, 0 = not in the line) with the words around its average.
 */
static const struct {
	const char *stats_total, *stats_avg, *totals, *averages, *plain;
	int log_rank;
	const char *log_before, *log_after;
} fields[SHM_STATS_WORDS] = {
	{ "total_server_assignment_count", "avg_server_assignment_count",
	  "server_assignment_count", "server_assignment_count", "server_assignment_count",
	  0, NULL, NULL },
	{ "total_xact_count", "avg_xact_count", "xact_count", "xact_count", "xact_count",
	  1, "", " xacts/s" },
	{ "total_query_count", "avg_query_count", "query_count", "query_count", "query_count",
	  2, "", " queries/s" },
	{ "total_received", "avg_recv", "bytes_received", "bytes_received", "client_bytes",
	  7, "in ", " B/s" },
	{ "total_sent", "avg_sent", "bytes_sent", "bytes_sent", "server_bytes",
	  8, "out ", " B/s" },
	{ "total_xact_time", "avg_xact_time", "xact_time", "xact_time", "xact_time",
	  9, "xact ", " us" },
	{ "total_query_time", "avg_query_time", "query_time", "query_time", "query_time",
	  10, "query ", " us" },
	{ "total_wait_time", "avg_wait_time", "wait_time", "wait_time", "wait_time",
	  11, "wait ", " us" },
	{ "total_client_parse_count", "avg_client_parse_count", "client_parse_count",
	  "avg_client_parse_count", "ps_client_parse_count", 3, "", " client parses/s" },
	{ "total_server_parse_count", "avg_server_parse_count", "server_parse_count",
	  "avg_server_parse_count", "ps_server_parse_count", 4, "", " server parses/s" },
	{ "total_bind_count", "avg_bind_count", "bind_count", "avg_bind_count",
	  "ps_bind_count", 5, "", " binds/s" },
	{ "total_client_login_count", "avg_client_login_count", "client_login_count",
	  "avg_client_login_count", "client_login_count", 6, "", " client logins/s" },
};

/* pgbouncer's stats line of the averages <avg>: the fields by log_rank, comma-separated. */
static void
log_stats_line(const struct shm_stats *avg)
{
	const uint64_t *a = (const uint64_t *)avg;
	char line[512];
	size_t len = 0;

	line[0] = '\0';
	for (int rank = 1; rank <= (int)SHM_STATS_WORDS; rank++) {
		for (size_t k = 0; k < SHM_STATS_WORDS; k++) {
			int n;

			if (fields[k].log_rank != rank || len >= sizeof(line))
				continue;
			n = snprintf(line + len, sizeof(line) - len, "%s%s%" PRIu64 "%s",
				     len > 0 ? ", " : "", fields[k].log_before, a[k],
				     fields[k].log_after);
			len += n > 0 ? (size_t)n : 0;
		}
	}
	log_info("stats: %s", line);
}

/* pgbouncer's stats_setup: the clock of the averages starts a second before the first use. */
static void
stamps_start(void)
{
	if (new_stamp == 0) {
		new_stamp = nk_now_us();
		old_stamp = new_stamp - USEC;
	}
}

static void
stats_add(struct shm_stats *dst, const struct shm_stats *src)
{
	uint64_t *d = (uint64_t *)dst;
	const uint64_t *s = (const uint64_t *)src;

	for (size_t k = 0; k < SHM_STATS_WORDS; k++)
		d[k] += s[k];
}

static int
row_cmp(const void *a, const void *b)
{
	return strcmp(((const struct stats_row *)a)->name, ((const struct stats_row *)b)->name);
}

/* The row named <name> in rows[0..*n), appended (zeroed) when absent; NULL without memory. */
static struct stats_row *
row_get(struct stats_row **rows, size_t *n, size_t *cap, const char *name)
{
	for (size_t i = 0; i < *n; i++) {
		if (strcmp((*rows)[i].name, name) == 0)
			return &(*rows)[i];
	}
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 16;
		struct stats_row *nr = realloc(*rows, nc * sizeof(*nr));

		if (nr == NULL)
			return NULL;
		*rows = nr;
		*cap = nc;
	}
	memset(&(*rows)[*n], 0, sizeof(**rows));
	snprintf((*rows)[*n].name, sizeof((*rows)[*n].name), "%s", name);
	return &(*rows)[(*n)++];
}

/* The older snapshot of <name> (zeros when it has none). */
static const struct shm_stats *
snap_older(const char *name)
{
	static const struct shm_stats zero;

	for (size_t i = 0; i < n_snaps; i++) {
		if (strcmp(snaps[i].name, name) == 0)
			return &snaps[i].older;
	}
	return &zero;
}

/* Add slot <i>'s published databases to the rows (the unnamed bucket only to <total>). */
static bool
add_proc(unsigned i, struct stats_row **rows, size_t *n, size_t *cap, struct shm_stats *total)
{
	size_t k = shm_dbstats_read(i, readbuf);

	for (size_t e = 0; e < k; e++) {
		struct stats_row *r;

		stats_add(total, &readbuf[e].st);
		if (readbuf[e].name[0] == '\0')
			continue;
		if ((r = row_get(rows, n, cap, readbuf[e].name)) == NULL)
			return false;
		stats_add(&r->cur, &readbuf[e].st);
	}
	return true;
}

struct stats_row *
stats_rows(size_t *n_out, struct shm_stats *total)
{
	struct stats_row *rows = NULL;
	size_t n = 0, cap = 0;

	memset(total, 0, sizeof(*total));
	*n_out = 0;
	if (shm_self() >= 0)	/* our own (console) counters as they are now */
		shm_dbstats_publish((unsigned)shm_self());
	if (readbuf == NULL && (readbuf = calloc(SHM_DB_STATS_MAX, sizeof(*readbuf))) == NULL)
		return NULL;
	for (unsigned i = 0; i < shm_n_procs(); i++) {
		if (atomic_load(&shm_proc(i)->kind) == SHM_PROC_NONE)
			continue;
		if (!add_proc(i, &rows, &n, &cap, total))
			goto fail;
	}
	if (row_get(&rows, &n, &cap, "pgbouncer") == NULL)	/* the admin database */
		goto fail;
	qsort(rows, n, sizeof(*rows), row_cmp);
	for (size_t i = 0; i < n; i++)
		rows[i].older = *snap_older(rows[i].name);
	*n_out = n;
	return rows;
fail:
	free(rows);
	return NULL;
}

void
stats_average(const struct shm_stats *cur, const struct shm_stats *old, struct shm_stats *avg)
{
	uint64_t dur;
	uint64_t q = cur->total_query_count - old->total_query_count;
	uint64_t x = cur->total_xact_count - old->total_xact_count;
	uint64_t a = cur->total_server_assignment_count - old->total_server_assignment_count;
	const uint64_t *c = (const uint64_t *)cur, *o = (const uint64_t *)old;
	uint64_t *v = (uint64_t *)avg;

	memset(avg, 0, sizeof(*avg));
	stamps_start();
	dur = nk_now_us() - old_stamp;
	if (dur == 0)
		return;
	for (size_t k = 0; k < SHM_STATS_WORDS; k++)	/* rates first, then the three times */
		v[k] = (uint64_t)((unsigned __int128)(c[k] - o[k]) * USEC / dur);
	avg->total_xact_time = x ? (cur->total_xact_time - old->total_xact_time) / x : 0;
	avg->total_query_time = q ? (cur->total_query_time - old->total_query_time) / q : 0;
	avg->total_wait_time = a ? (cur->total_wait_time - old->total_wait_time) / a : 0;
}

/* The snapshots of <name>, created (zeroed) when new; NULL without memory. */
static struct snap *
snap_get(const char *name)
{
	for (size_t i = 0; i < n_snaps; i++) {
		if (strcmp(snaps[i].name, name) == 0)
			return &snaps[i];
	}
	if (n_snaps == cap_snaps) {
		size_t nc = cap_snaps ? cap_snaps * 2 : 16;
		struct snap *ns = realloc(snaps, nc * sizeof(*ns));

		if (ns == NULL)
			return NULL;
		snaps = ns;
		cap_snaps = nc;
	}
	memset(&snaps[n_snaps], 0, sizeof(snaps[n_snaps]));
	snprintf(snaps[n_snaps].name, sizeof(snaps[n_snaps].name), "%s", name);
	return &snaps[n_snaps++];
}

/* pgbouncer's refresh: older <- newer <- live, per database and in total; the log line. */
static void
refresh(void)
{
	struct shm_stats total, avg;
	size_t n;
	struct stats_row *rows = stats_rows(&n, &total);

	old_stamp = new_stamp;
	new_stamp = nk_now_us();
	for (size_t i = 0; i < n_snaps; i++)
		snaps[i].older = snaps[i].newer;
	for (size_t i = 0; rows != NULL && i < n; i++) {
		struct snap *sn = snap_get(rows[i].name);

		if (sn != NULL)
			sn->newer = rows[i].cur;
	}
	free(rows);
	total_older = total_newer;
	total_newer = total;
	stats_average(&total_newer, &total_older, &avg);
	if (cfg_current()->log.log_stats)
		log_stats_line(&avg);
}

void
adm_stats_tick(void)
{
	double period = cfg_current()->pool.stats_period;
	uint64_t now = nk_now_us();

	if (period <= 0)
		period = 60;
	stamps_start();
	if ((double)(now - new_stamp) >= period * (double)USEC)
		refresh();
}

/* The totals' older snapshot (SHOW TOTALS' averages). */
const struct shm_stats *
stats_total_older(void)
{
	return &total_older;
}

/* ---- SHOW ---- */

enum stats_view {
	STATS_VIEW_BOTH = 0,		/* SHOW STATS: totals then averages */
	STATS_VIEW_TOTALS = 1,		/* SHOW STATS_TOTALS */
	STATS_VIEW_AVERAGES = 2,	/* SHOW STATS_AVERAGES */
};

const char *
stats_field_name(size_t k)
{
	return fields[k].plain;
}

/* One row set per database: <view> selects the columns. */
static void
show_rows(struct adm_result *r, enum stats_view view)
{
	struct adm_col cols[1 + 2 * SHM_STATS_WORDS];
	size_t nc = 1, n;
	struct shm_stats total;
	struct stats_row *rows = stats_rows(&n, &total);

	cols[0] = (struct adm_col){ "database", ADM_T_TEXT };
	for (size_t k = 0; k < SHM_STATS_WORDS && view != STATS_VIEW_AVERAGES; k++)
		cols[nc++] = (struct adm_col){ view == STATS_VIEW_BOTH ? fields[k].stats_total :
					       fields[k].totals, ADM_T_NUMERIC };
	for (size_t k = 0; k < SHM_STATS_WORDS && view != STATS_VIEW_TOTALS; k++)
		cols[nc++] = (struct adm_col){ view == STATS_VIEW_BOTH ? fields[k].stats_avg :
					       fields[k].averages, ADM_T_NUMERIC };
	adm_result_columns(r, cols, nc);
	for (size_t i = 0; i < n; i++) {
		char v[2 * SHM_STATS_WORDS][24];
		const char *vals[1 + 2 * SHM_STATS_WORDS] = { rows[i].name };
		struct shm_stats avg;
		const uint64_t *t = (const uint64_t *)&rows[i].cur, *a = (const uint64_t *)&avg;
		size_t c = 1;

		stats_average(&rows[i].cur, &rows[i].older, &avg);
		for (size_t k = 0; k < SHM_STATS_WORDS && view != STATS_VIEW_AVERAGES; k++, c++)
			snprintf(v[c - 1], sizeof(v[0]), "%" PRIu64, t[k]);
		for (size_t k = 0; k < SHM_STATS_WORDS && view != STATS_VIEW_TOTALS; k++, c++)
			snprintf(v[c - 1], sizeof(v[0]), "%" PRIu64, a[k]);
		for (size_t k = 1; k < c; k++)
			vals[k] = v[k - 1];
		adm_result_row(r, vals);
	}
	free(rows);
}

void
stats_show_stats(struct adm_result *r)
{
	show_rows(r, STATS_VIEW_BOTH);
}

void
stats_show_totals_by_db(struct adm_result *r)
{
	show_rows(r, STATS_VIEW_TOTALS);
}

void
stats_show_averages(struct adm_result *r)
{
	show_rows(r, STATS_VIEW_AVERAGES);
}

/* SHOW TOTALS: name/value rows, total_<x> then avg_<x> (pgbouncer's field names). */
void
stats_show_totals(struct adm_result *r)
{
	static const struct adm_col cols[] = { { "name", ADM_T_TEXT }, { "value", ADM_T_NUMERIC } };
	struct shm_stats total, avg;
	size_t n;
	struct stats_row *rows = stats_rows(&n, &total);

	free(rows);
	stats_average(&total, &total_older, &avg);
	adm_result_columns(r, cols, 2);
	for (int pass = 0; pass < 2; pass++) {
		const uint64_t *w = (const uint64_t *)(pass ? &avg : &total);

		for (size_t k = 0; k < SHM_STATS_WORDS; k++) {
			char name[64], v[24];
			const char *vals[2] = { name, v };

			snprintf(name, sizeof(name), "%s_%s", pass ? "avg" : "total", fields[k].plain);
			snprintf(v, sizeof(v), "%" PRIu64, w[k]);
			adm_result_row(r, vals);
		}
	}
}
