/*
 * switchover.c - the console's SWITCHOVER <shard> (NEKI-SPEC 6.6, a planned switchover):
 *
 *   1. pause: the shard publishes no primary, so the workers hold its new statements (for
 *      at most failover_hold_timeout; other shards go on);
 *   2. the old primary becomes read-only (ALTER SYSTEM SET default_transaction_read_only,
 *      reload) and its write transactions are waited for (SW_DRAIN_MS);
 *   3. the standby with the least lag replays up to the old primary's last WAL position
 *      (SW_CATCHUP_MS);
 *   4. pg_promote() on the standby; it is the shard's primary, the held statements run.
 * A failure before the promotion makes the old primary writable again and resumes it. The
 * old primary stays read-only afterwards: make it a standby of the new one (pg_rewind,
 * standby.signal) or stop it. The steps use the poller's connections (servers.c).
 * Entry point: switchover_run().
 */
#include "neki/base.h"

#include "admin_int.h"
#include "servers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "neki/clock.h"
#include "neki/log.h"
#include "neki/shm.h"
#include "neki/proc.h"

#define SW_DRAIN_MS 2000
#define SW_CATCHUP_MS 3000
#define SW_POLL_MS 20

struct sw_job {
	struct adm_req *req;		/* borrowed until finished */
	char uid[ADM_NAME_MAX];
	int from, to;
	char lsn[64];			/* the old primary's last WAL position */
	uint64_t deadline_ms;
	struct event *ev;		/* owned: the polls' timer */
	void (*next)(struct sw_job *j);	/* what the timer runs */
};

static void sw_drain(struct sw_job *j);
static void sw_catchup(struct sw_job *j);

static void
sw_free(struct sw_job *j)
{
	if (j->ev != NULL)
		event_free(j->ev);
	free(j);
}

/* Answer with <err>: nothing was promoted, the old primary is writable again. */
static void
sw_abort(struct sw_job *j, const struct nk_error *err)
{
	struct pgc *from = servers_pgc(j->uid, j->from);

	log_warn("shard %s: switchover abandoned: %s", j->uid, err->message);
	if (from != NULL) {
		pgc_query(from, "ALTER SYSTEM RESET default_transaction_read_only", 0, NULL, NULL,
			  NULL);
		pgc_query(from, "SELECT pg_catalog.pg_reload_conf()", 0, NULL, NULL, NULL);
	}
	servers_switch_end(j->uid, j->from);
	adm_result_error(&j->req->res, err);
	adm_req_finish(j->req);
	sw_free(j);
}

static void
sw_fail(struct sw_job *j, const char *step, const struct nk_error *why)
{
	struct nk_error err;

	nk_error_set(&err, ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
		     "switchover of shard \"%s\" failed: %s", j->uid, step);
	if (why != NULL)
		nk_error_detail(&err, "%s", why->message);
	nk_error_hint(&err, "The old primary is writable again and keeps the shard's writes.");
	sw_abort(j, &err);
}

static void
sw_timer(evutil_socket_t fd, short what, void *arg)
{
	struct sw_job *j = arg;

	(void)fd;
	(void)what;
	j->next(j);
}

static void
sw_later(struct sw_job *j, void (*next)(struct sw_job *j))
{
	struct timeval tv = { 0, SW_POLL_MS * 1000 };

	j->next = next;
	evtimer_add(j->ev, &tv);
}

static void
promoted(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	struct sw_job *j = arg;
	struct nk_error n;

	if (err != NULL || pgc_res_rows(res) != 1 || strcmp(pgc_res_get(res, 0, 0), "t") != 0) {
		sw_fail(j, "pg_promote() on the standby did not succeed", err);
		return;
	}
	servers_switch_end(j->uid, j->to);
	nk_error_set(&n, ERRCODE_SUCCESSFUL_COMPLETION,
		     "shard \"%s\": server %d is the primary now", j->uid, j->to);
	n.severity = NK_SEV_NOTICE;
	nk_error_detail(&n, "Server %d stays read-only (default_transaction_read_only): make it "
			"a standby of the new primary or stop it.", j->from);
	adm_result_notice(&j->req->res, &n);
	adm_result_complete(&j->req->res, "SWITCHOVER", false);
	adm_req_finish(j->req);
	sw_free(j);
}

static void
caught_up(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	struct sw_job *j = arg;
	struct pgc *to = servers_pgc(j->uid, j->to);

	if (err != NULL || to == NULL) {
		sw_fail(j, "the standby could not be asked how far it replayed", err);
		return;
	}
	if (pgc_res_rows(res) == 1 && strcmp(pgc_res_get(res, 0, 0), "t") == 0) {
		pgc_query(to, "SELECT pg_catalog.pg_promote(true, 30)", 0, NULL, promoted, j);
		return;
	}
	if (nk_now_ms() >= j->deadline_ms) {
		sw_fail(j, "the standby did not catch up within 3 s", NULL);
		return;
	}
	sw_later(j, sw_catchup);
}

static void
sw_catchup(struct sw_job *j)
{
	struct pgc *to = servers_pgc(j->uid, j->to);
	const char *params[1] = { j->lsn };

	if (to == NULL) {
		sw_fail(j, "the standby is not watched", NULL);
		return;
	}
	pgc_query(to, "SELECT pg_catalog.pg_last_wal_replay_lsn() >= $1::pg_catalog.pg_lsn", 1,
		  params, caught_up, j);
}

static void
last_lsn(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	struct sw_job *j = arg;

	if (err != NULL || pgc_res_rows(res) != 1 || pgc_res_get(res, 0, 0) == NULL) {
		sw_fail(j, "the old primary's WAL position could not be read", err);
		return;
	}
	snprintf(j->lsn, sizeof(j->lsn), "%s", pgc_res_get(res, 0, 0));
	j->deadline_ms = nk_now_ms() + SW_CATCHUP_MS;
	sw_catchup(j);
}

static void
drained(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	struct sw_job *j = arg;
	struct pgc *from = servers_pgc(j->uid, j->from);

	if (err != NULL || from == NULL || pgc_res_rows(res) != 1) {
		sw_fail(j, "the old primary could not be asked for its write transactions", err);
		return;
	}
	if (strcmp(pgc_res_get(res, 0, 0), "0") == 0) {
		pgc_query(from, "SELECT pg_catalog.pg_current_wal_insert_lsn()", 0, NULL, last_lsn,
			  j);
		return;
	}
	if (nk_now_ms() >= j->deadline_ms) {
		sw_fail(j, "write transactions on the old primary did not end within 2 s", NULL);
		return;
	}
	sw_later(j, sw_drain);
}

static void
sw_drain(struct sw_job *j)
{
	struct pgc *from = servers_pgc(j->uid, j->from);

	if (from == NULL) {
		sw_fail(j, "the old primary is not watched", NULL);
		return;
	}
	pgc_query(from, "SELECT count(*) FROM pg_catalog.pg_stat_activity WHERE backend_xid IS "
		  "NOT NULL AND pid <> pg_catalog.pg_backend_pid()", 0, NULL, drained, j);
}

static void
read_only(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	struct sw_job *j = arg;

	(void)res;
	if (err != NULL) {
		sw_fail(j, "the old primary could not be made read-only", err);
		return;
	}
	j->deadline_ms = nk_now_ms() + SW_DRAIN_MS;
	sw_drain(j);
}

static void
altered(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	struct sw_job *j = arg;
	struct pgc *from = servers_pgc(j->uid, j->from);

	(void)res;
	if (err != NULL || from == NULL) {
		sw_fail(j, "the old primary could not be made read-only", err);
		return;
	}
	pgc_query(from, "SELECT pg_catalog.pg_reload_conf()", 0, NULL, read_only, j);
}

/* switchover_run: see admin_int.h. */
void
switchover_run(struct adm_req *req, const char *uid)
{
	struct sw_job *j = calloc(1, sizeof(*j));
	struct nk_error err;
	struct pgc *from;

	if (uid == NULL) {
		nk_error_set(&err, ERRCODE_PROTOCOL_VIOLATION,
			     "SWITCHOVER needs a shard: SWITCHOVER \"<uid>\"");
		adm_req_fail(req, &err);
		free(j);
		return;
	}
	if (j == NULL || (j->ev = evtimer_new(child_base(), sw_timer, j)) == NULL) {
		nk_error_oom(&err);
		adm_req_fail(req, &err);
		free(j);
		return;
	}
	j->req = req;
	snprintf(j->uid, sizeof(j->uid), "%s", uid);
	if (!servers_switch_begin(uid, &j->from, &j->to, &err) ||
	    (from = servers_pgc(uid, j->from)) == NULL) {
		adm_req_fail(req, &err);
		sw_free(j);
		return;
	}
	pgc_query(from, "ALTER SYSTEM SET default_transaction_read_only = on", 0, NULL, altered,
		  j);
}
