/*
 * activity.c - __neki.stat_get_activity(): the client sessions of every neki host of the
 * cluster. The caller's host bumps `__neki.cluster_state.activity_epoch` and sends `NOTIFY
 * neki_activity, '<epoch>'`; every host (the caller too: it listens on the same channel)
 * gathers its SHOW CLIENTS rows (lists.c) and upserts them as text into `__neki.activity`;
 * the caller waits (at most ACT_WAIT_MS) until every host with a fresh heartbeat has
 * answered, then returns the rows of all. Without a store it returns its own.
 * Entry points: activity_start(), activity_notified().
 */
#include "neki/base.h"

#include "admin_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "neki/byteorder.h"
#include "neki/clock.h"
#include "neki/log.h"
#include "neki/memstream.h"
#include "neki/shm.h"
#include "neki/proc.h"

#define ACT_WAIT_MS 3000
#define ACT_POLL_MS 50

/* SHOW CLIENTS columns kept, in the result's order after host_id. */
static const struct { const char *name; enum adm_type type; size_t col; } act_cols[] = {
	{ "user", ADM_T_TEXT, 1 }, { "database", ADM_T_TEXT, 2 }, { "state", ADM_T_TEXT, 4 },
	{ "addr", ADM_T_TEXT, 5 }, { "port", ADM_T_INT4, 6 }, { "connect_time", ADM_T_TEXT, 9 },
	{ "request_time", ADM_T_TEXT, 10 }, { "wait_us", ADM_T_INT4, 12 },
	{ "link", ADM_T_TEXT, 15 }, { "remote_pid", ADM_T_INT4, 16 },
	{ "application_name", ADM_T_TEXT, 18 },
};

#define ACT_NCOLS (NK_ARRAY_LEN(act_cols) + 1)

/* One stat_get_activity waiting for the hosts. */
struct act_job {
	struct adm_req *req;		/* borrowed until finished */
	uint64_t epoch;
	uint64_t deadline_ms;
	struct event *timer;		/* owned */
	bool busy;			/* a query is in flight */
};

/* The DataRows of SHOW CLIENTS in <pb> as lines of tab-separated kept columns (malloc'd). */
static char *
rows_text(const struct pktbuf *pb)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = nk_memstream(&out, &len);

	if (f == NULL)
		return NULL;
	for (size_t at = 0; at + 5 <= pb->len; ) {
		const uint8_t *m = pb->buf + at;
		size_t mlen = nk_get_be32(m + 1), n = 0, p = 7;
		const uint8_t *vals[32];
		int32_t lens[32];

		at += 1 + mlen;
		if (m[0] != 'D' || mlen < 6)
			continue;
		for (; n < 32 && p + 4 <= 1 + mlen; n++) {
			lens[n] = (int32_t)nk_get_be32(m + p);
			vals[n] = m + p + 4;
			p += 4 + (lens[n] > 0 ? (size_t)lens[n] : 0);
		}
		for (size_t k = 0; k < NK_ARRAY_LEN(act_cols); k++) {
			size_t c = act_cols[k].col;

			if (k > 0)
				fputc('\t', f);
			if (c < n && lens[c] >= 0)
				for (int32_t i = 0; i < lens[c]; i++)	/* (no tabs, newlines) */
					fputc(vals[c][i] == '\t' || vals[c][i] == '\n' ? ' ' :
					      vals[c][i], f);
			else
				fputs("\\N", f);
		}
		fputc('\n', f);
	}
	if (fclose(f) != 0) {
		free(out);
		return NULL;
	}
	return out;
}

/* Split one line into the kept columns (in place); NULL for "\N". */
static void
line_cols(char *line, const char **vals)
{
	for (size_t k = 0; k < NK_ARRAY_LEN(act_cols); k++) {
		char *tab = line ? strchr(line, '\t') : NULL;

		if (tab != NULL)
			*tab = '\0';
		vals[k] = line != NULL && strcmp(line, "\\N") != 0 ? line : NULL;
		line = tab != NULL ? tab + 1 : NULL;
	}
}

/* Add the rows of host <host> (<text> as rows_text made it) to <r>. */
static void
emit_host(struct adm_result *r, const char *host, const char *text)
{
	char *copy = strdup(text ? text : ""), *save = NULL;

	for (char *l = copy ? strtok_r(copy, "\n", &save) : NULL; l; l = strtok_r(NULL, "\n",
										   &save)) {
		const char *vals[ACT_NCOLS];

		vals[0] = host;
		line_cols(l, vals + 1);
		adm_result_row(r, vals);
	}
	free(copy);
}

static void
columns(struct adm_result *r)
{
	struct adm_col cols[ACT_NCOLS];

	cols[0] = (struct adm_col){ "host_id", ADM_T_TEXT };
	for (size_t k = 0; k < NK_ARRAY_LEN(act_cols); k++)
		cols[k + 1] = (struct adm_col){ act_cols[k].name, act_cols[k].type };
	adm_result_columns(r, cols, ACT_NCOLS);
}

/* ---- every host: publish its sessions ---- */

static void
published_cb(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	if (err != NULL)
		log_warn("could not publish this host's sessions: %s", err->message);
}

/* Gathered: the text of this host's sessions, upserted for <arg> (the epoch). */
static void
publish_run(void *arg)
{
	struct adm_result tmp;
	char epoch[24], *text;
	const char *params[3];

	adm_result_init(&tmp);
	lists_show_clients(&tmp);
	text = rows_text(&tmp.pb);
	adm_result_cleanup(&tmp);
	snprintf(epoch, sizeof(epoch), "%" PRIu64, (uint64_t)(uintptr_t)arg);
	params[0] = follow_host_id();
	params[1] = epoch;
	params[2] = text ? text : "";
	if (!follow_query_params("INSERT INTO __neki.activity (host_id, epoch, sessions) VALUES"
				 " ($1, $2, $3) ON CONFLICT (host_id) DO UPDATE SET epoch ="
				 " excluded.epoch, sessions = excluded.sessions", 3, params,
				 published_cb, NULL))
		log_debug("no store to publish this host's sessions to");
	free(text);
}

/* activity_notified: see admin_int.h. */
void
activity_notified(uint64_t epoch)
{
	if (!lists_gather_run(publish_run, (void *)(uintptr_t)epoch))
		log_warn("out of memory gathering this host's sessions");
}

/* ---- the caller ---- */

static void
act_end(struct act_job *j, const struct nk_error *err)
{
	if (err != NULL)
		adm_result_error(&j->req->res, err);
	else
		adm_result_complete(&j->req->res, "SELECT", true);
	adm_req_finish(j->req);
	if (j->timer != NULL)
		event_free(j->timer);
	free(j);
}

static void
rows_cb(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	struct act_job *j = arg;

	if (err == NULL) {
		columns(&j->req->res);
		for (size_t i = 0; i < pgc_res_rows(res); i++)
			emit_host(&j->req->res, pgc_res_get(res, i, 0), pgc_res_get(res, i, 1));
	}
	act_end(j, err);
}

static void
read_rows(struct act_job *j)
{
	char e[24];
	const char *params[1] = { e };

	snprintf(e, sizeof(e), "%" PRIu64, j->epoch);
	if (!follow_query_params("SELECT host_id, sessions FROM __neki.activity WHERE epoch >= $1"
				 " ORDER BY host_id", 1, params, rows_cb, j)) {
		struct nk_error err;

		nk_error_set(&err, ERRCODE_CONNECTION_FAILURE,
			     "the authoritative shard is not followed");
		act_end(j, &err);
	}
}

static void
behind_cb(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	struct act_job *j = arg;
	struct timeval tv = { 0, ACT_POLL_MS * 1000 };

	j->busy = false;
	if (err == NULL && pgc_res_rows(res) > 0 && strcmp(pgc_res_get(res, 0, 0), "0") == 0) {
		read_rows(j);
		return;
	}
	if (nk_now_ms() >= j->deadline_ms) {
		read_rows(j);	/* (the hosts that answered) */
		return;
	}
	event_add(j->timer, &tv);
}

static void
poll_cb(evutil_socket_t fd, short what, void *arg)
{
	struct act_job *j = arg;
	char e[24];
	const char *params[1] = { e };

	(void)fd, (void)what;
	snprintf(e, sizeof(e), "%" PRIu64, j->epoch);
	j->busy = true;
	if (!follow_query_params("SELECT count(*) FROM __neki.routers r WHERE r.heartbeat > now()"
				 " - interval '10 seconds' AND NOT EXISTS (SELECT 1 FROM"
				 " __neki.activity a WHERE a.host_id = r.host_id AND a.epoch >= $1)",
				 1, params, behind_cb, j))
		read_rows(j);
}

static void local_run(void *arg);

static void
bumped_cb(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	struct act_job *j = arg;

	if (err != NULL || pgc_res_rows(res) == 0) {	/* (no store yet): this host's only */
		struct adm_req *req = j->req;

		log_warn("stat_get_activity: the store could not be asked (%s); this host only",
			 err ? err->message : "no cluster_state row");
		event_free(j->timer);
		free(j);
		if (!lists_gather_run(local_run, req)) {
			struct nk_error e;

			nk_error_oom(&e);
			adm_req_fail(req, &e);
		}
		return;
	}
	j->epoch = strtoull(pgc_res_get(res, 0, 0), NULL, 10);
	poll_cb(-1, 0, j);
}

/* Without a store: this host's sessions only. */
static void
local_run(void *arg)
{
	struct adm_req *req = arg;
	struct adm_result tmp;
	char *text;

	adm_result_init(&tmp);
	lists_show_clients(&tmp);
	text = rows_text(&tmp.pb);
	adm_result_cleanup(&tmp);
	columns(&req->res);
	emit_host(&req->res, follow_host_id(), text);
	free(text);
	adm_result_complete(&req->res, "SELECT", true);
	adm_req_finish(req);
}

/* activity_start: see admin_int.h. */
void
activity_start(struct adm_req *req)
{
	struct act_job *j = calloc(1, sizeof(*j));
	struct nk_error err;

	if (j == NULL || (j->timer = evtimer_new(child_base(), poll_cb, j)) == NULL) {
		free(j);
		nk_error_oom(&err);
		adm_req_fail(req, &err);
		return;
	}
	j->req = req;
	j->deadline_ms = nk_now_ms() + ACT_WAIT_MS;
	if (!follow_query_params("WITH u AS (UPDATE __neki.cluster_state SET activity_epoch ="
				 " activity_epoch + 1 RETURNING activity_epoch) SELECT"
				 " activity_epoch, pg_catalog.pg_notify('neki_activity',"
				 " activity_epoch::text) FROM u", 0, NULL, bumped_cb, j)) {
		event_free(j->timer);
		free(j);
		if (!lists_gather_run(local_run, req)) {
			nk_error_oom(&err);
			adm_req_fail(req, &err);
		}
	}
}
