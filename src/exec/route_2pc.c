/*
 * route_2pc.c - __neki.tx_mode atomic: a transaction that ran statements (other than SET /
 * SHOW) on more than one shard and wrote on more than one commits with two-phase commit, its
 * decision durable on Postgres. The shards that ran only plain SELECTs are asked first, in one
 * parallel round, whether their transaction has an xid (a function may have written); those
 * that did not write, and the shards that only ran SET / SHOW, get a plain COMMIT (with one
 * writer or none, every shard does, in uid order). The decision participant is the first
 * writer in uid order; the other writers are prepared (PREPARE TRANSACTION '<gid>'), then the
 * decision row is inserted into __neki.tx_decision in the decision participant's own
 * transaction and that COMMIT is the decision; then COMMIT PREPARED on the others, then the
 * client's answer. A session whose mode came from its startup options gets SET's check
 * (TPC_MPX_SQL) on the participants of its first such COMMIT, before the probe
 * (route_2pc_options()). A failed PREPARE or decision rolls everything back (ROLLBACK
 * PREPARED); a decision participant lost during its COMMIT leaves the outcome to the admin's
 * recovery (src/admin/recover.c: it inserts an abort row for an id older than a grace
 * period, ON CONFLICT DO NOTHING, and finishes the prepared ones as the row says), and the
 * client gets 08007; a failed COMMIT PREPARED is retried (TPC_ATTEMPTS rounds), then a
 * WARNING naming the shard (recovery finishes it) and the session's next statement there
 * waits for it (route_2pc_wait_send()). Global id:
 * neki:<host>-<port>:<epoch>.<worker pid>:<seq>:<decision uid>, the epoch the admin process
 * took for this start of the router (src/admin/epoch.c; until it is published, a
 * transaction that would need 2PC is refused, 57P03). Test
 * failpoints (the file NEKI_TEST_FAILPOINT names holds one; the worker removes it and kills
 * itself): prepare:<k> after k PREPAREs, decision after the decision's COMMIT,
 * commit_prepared:<k> after k COMMIT PREPAREDs; commit_prepared_error:<k> makes the first k
 * COMMIT PREPARED rounds fail instead (removed when the commit ends), probe_error the round
 * asking the readers (removed then). Entry points:
 * route_2pc_wanted(), route_2pc_reads(), route_2pc_refused(), route_2pc_commit(),
 * route_2pc_with_prepare() (a last statement on a new shard prepares with it: the COMMIT
 * starts at the decision), route_2pc_forget_early(), route_2pc_check(),
 * route_2pc_options(), route_2pc_finished(), route_2pc_wait_send(), route_2pc_free().
 */
#include "neki/base.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "neki/link.h"
#include "neki/log.h"
#include "neki/shm_epoch.h"
#include "neki/topology_image.h"
#include "neki/twophase.h"
#include "route_int.h"
#include "route_2pc.h"
#include "route_client.h"
#include "route_exec.h"
#include "route_loop.h"
#include "route_portal.h"
#include "route_sqltext.h"

#define TPC_GID_MAX NK_2PC_GID_MAX
#define TPC_ENSURE_SQL NK_2PC_ENSURE_SQL

/* Prepared transactions enabled on a shard (writes nothing: also run in a transaction). */
#define TPC_MPX_SQL \
	"DO $neki$BEGIN IF current_setting('max_prepared_transactions')::int = 0 THEN " \
	"RAISE EXCEPTION 'max_prepared_transactions is 0 on this shard' USING ERRCODE = " \
	"'55000', HINT = '__neki.tx_mode atomic prepares transactions: set " \
	"max_prepared_transactions above 0 on every shard (it takes a restart).'; END IF; " \
	"END$neki$;"
/* SET's check of a shard: that, and the decision table. */
#define TPC_CHECK_SQL TPC_MPX_SQL TPC_ENSURE_SQL

#define TPC_ATTEMPTS 3			/* COMMIT PREPARED rounds before the client's answer */
#define TPC_WAITS_MAX 8

enum tpc_step {
	TPC_NONE = 0,
	TPC_CHECK,			/* SET's check on every shard */
	TPC_VERIFY,			/* mode from the startup options: TPC_MPX_SQL at the COMMIT */
	TPC_PROBE,			/* did the shards that only read write (a function)? */
	TPC_PREPARE,			/* PREPARE TRANSACTION on the participants */
	TPC_DECIDE,			/* the decision row and COMMIT on the decision participant */
	TPC_FINISH,			/* COMMIT PREPARED */
	TPC_ABORT,			/* ROLLBACK PREPARED / ROLLBACK */
};

struct route_2pc {
	enum tpc_step step;
	char gid[TPC_GID_MAX];
	char tag[64];			/* the COMMIT's answer ("" in an implicit transaction) */
	uint32_t d;			/* r->sh index of the decision participant */
	uint32_t part;			/* bit i: r->sh[i] is another participant (data) */
	uint32_t plain;			/* bit i: r->sh[i] did not write: plain COMMIT */
	uint32_t reads;			/* bit i: r->sh[i] only ran plain SELECTs (probed) */
	uint32_t writes;		/* bit i: r->sh[i] wrote (or may have) */
	uint32_t order[ROUTE_SHARDS_MAX];	/* the participants' r->sh indexes, uid order */
	uint32_t n;
	uint32_t prepared;		/* bit i: its PREPARE went through */
	uint32_t early;			/* bit i: r->sh[i] got its PREPARE with the statement
					 * that ended the implicit transaction (t->d and t->gid
					 * chosen then): route_2pc_with_prepare() */
	uint32_t attempts;		/* COMMIT PREPARED rounds made (TPC_ATTEMPTS at most) */
	struct tpc_wait {		/* what this session's next statement on a shard waits for */
		char uid[PLAN_SHARD_MAX];
		char gid[TPC_GID_MAX];
	} waits[TPC_WAITS_MAX];
	uint32_t nwaits;
	bool ensured;			/* the decision table was seen on this session */
	bool unchecked;			/* atomic from the startup options: no SET's check yet */
	bool failed;			/* the outcome is an error (err) */
	struct nk_error err;
};

static uint64_t tpc_seq;		/* global ids given by this worker */

/* Finished transactions whose decision row is deleted with the next decision on the same
 * shard and database (in that transaction: no round trip of its own). */
#define TPC_DONE_MAX 64
static struct tpc_done {
	char db[PLAN_SHARD_MAX];
	char uid[PLAN_SHARD_MAX];
	char gid[TPC_GID_MAX];
} tpc_done[TPC_DONE_MAX];
static size_t tpc_ndone;

static void
tpc_done_add(const struct route *r, const struct route_2pc *t)
{
	struct tpc_done *d;

	if (tpc_ndone == TPC_DONE_MAX)
		return;		/* (the recovery's GC deletes it) */
	d = &tpc_done[tpc_ndone++];
	snprintf(d->db, sizeof(d->db), "%s", r->db);
	snprintf(d->uid, sizeof(d->uid), "%s", r->sh[t->d].uid);
	snprintf(d->gid, sizeof(d->gid), "%s", t->gid);
}

/* "DELETE ... WHERE gid IN (...);" of the finished ones decided on <t>'s decision shard
 * (taken off the list), or ""; NULL on no memory. */
static char *
tpc_done_sql(const struct route *r, const struct route_2pc *t)
{
	size_t cap = 64, len, k = 0;
	char *sql;

	for (size_t i = 0; i < tpc_ndone; i++)
		cap += strlen(tpc_done[i].gid) + 4;
	if ((sql = malloc(cap)) == NULL)
		return NULL;
	len = (size_t)snprintf(sql, cap, "DELETE FROM " NK_2PC_TABLE " WHERE gid IN (");
	for (size_t i = 0; i < tpc_ndone; i++) {
		const struct tpc_done *d = &tpc_done[i];

		if (strchr(d->gid, '\'') != NULL)
			continue;	/* (left to the recovery's GC) */
		if (strcmp(d->db, r->db) != 0 || strcmp(d->uid, r->sh[t->d].uid) != 0) {
			tpc_done[k++] = *d;
			continue;
		}
		len += (size_t)snprintf(sql + len, cap - len, "%s'%s'", sql[len - 1] == '(' ?
					"" : ",", d->gid);	/* (no quote in a gid) */
	}
	if (sql[len - 1] == '(')
		sql[0] = '\0';
	else
		snprintf(sql + len, cap - len, ");");
	tpc_ndone = k;
	return sql;
}

/* ---- failpoints (tests only) ---- */

/* The file NEKI_TEST_FAILPOINT names (NULL: none), looked up once per process. */
static const char *
tpc_failpoint_path(void)
{
	static const char *path;
	static bool looked;

	if (!looked) {
		path = getenv("NEKI_TEST_FAILPOINT");
		looked = true;
	}
	return path;
}

/* The count of failpoint <name> in the file NEKI_TEST_FAILPOINT names ("name:k"; "name"
 * alone is 0); -1 when it is not set. */
static int
tpc_failpoint(const char *name)
{
	const char *path = tpc_failpoint_path();
	size_t n = strlen(name);
	char fp[64] = "";
	FILE *f;

	if (path == NULL || (f = fopen(path, "r")) == NULL)
		return -1;
	if (fgets(fp, sizeof(fp), f) == NULL)
		fp[0] = '\0';
	fclose(f);
	fp[strcspn(fp, "\n")] = '\0';
	if (strncmp(fp, name, n) != 0 || (fp[n] != '\0' && fp[n] != ':'))
		return -1;
	return fp[n] == ':' ? atoi(fp + n + 1) : 0;
}

/* Failpoint <where> reached: the file goes (one shot), the worker dies as in a crash. */
static void
tpc_crash(const struct route_2pc *t, const char *where)
{
	log_warn("S: failpoint %s reached (%s): the worker kills itself", where, t->gid);
	(void)unlink(tpc_failpoint_path());
	raise(SIGKILL);
}

/* ---- state ---- */

static struct route_2pc *
tpc_get(struct route *r)
{
	if (r->tpc == NULL)
		r->tpc = calloc(1, sizeof(*r->tpc));
	return r->tpc;
}

/* route_2pc_free: see route_2pc.h. */
void
route_2pc_free(struct route *r)
{
	free(r->tpc);
	r->tpc = NULL;
}

/* route_2pc_wanted: see route_2pc.h. */
bool
route_2pc_wanted(const struct route *r)
{
	uint32_t n = 0;

	if (r->ps.tx_mode != PLAN_TX_ATOMIC)
		return false;
	for (uint32_t i = 0; i < r->nsh; i++)
		n += r->sh[i].in_tx && r->sh[i].tx_data;
	return n > 1;
}

/* neki:<host>-<port>:<epoch>.<worker pid>:<seq>:<decision uid> (the epoch is known: see
 * route_2pc_refused()). */
static void
tpc_gid(struct route_2pc *t, const struct route *r, const char *duid)
{
	char host[64];
	size_t i;

	if (gethostname(host, sizeof(host)) == -1)
		strcpy(host, "localhost");
	host[sizeof(host) - 1] = '\0';
	for (i = 0; host[i] != '\0' && i < 40; i++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-",
			    host[i]))
			host[i] = '-';
	host[i] = '\0';
	snprintf(t->gid, sizeof(t->gid), NK_2PC_PREFIX "%s-%d:%llu.%ld:%llu:%s", host,
		 r->c.cfg->proc.listen_port, (unsigned long long)shm_tx_epoch(), (long)getpid(),
		 (unsigned long long)++tpc_seq, duid);
}

/* <fmt> with the gid as a literal ('' doubled) into a new string; NULL on no memory. */
static char *
tpc_sql(const char *gid, const char *before, const char *after)
{
	char lit[2 * TPC_GID_MAX + 3], *p = lit, *out;

	*p++ = '\'';
	for (const char *q = gid; *q != '\0'; q++) {
		if (*q == '\'')
			*p++ = '\'';
		*p++ = *q;
	}
	*p++ = '\'';
	*p = '\0';
	if (asprintf(&out, "%s%s%s", before, lit, after) == -1)
		return NULL;
	return out;
}

/* ---- steps ---- */

/* An exec of step <step> on the shards of bit mask <mask>, each running its text <sql>
 * (<sql2> for the shards of <mask2>, a subset); false with <err>. */
static bool
tpc_exec(struct route *r, enum tpc_step step, uint32_t mask, const char *sql, uint32_t mask2,
	 const char *sql2, struct nk_error *err)
{
	const char *uids[ROUTE_SHARDS_MAX];
	uint32_t n = 0;

	for (uint32_t i = 0; i < r->nsh; i++)
		if (mask & (1u << i))
			uids[n++] = r->sh[i].uid;
	route_exec_reset(r);
	if (!route_exec_setup(r, uids, n, sql, err))
		return false;
	for (uint32_t k = 0; k < r->x.ntg; k++) {
		uint32_t i = r->x.tg[k];
		const char *s = (mask2 & (1u << i)) ? sql2 : sql;

		if ((r->sh[i].sql = strdup(s)) == NULL)
			return nk_error_oom(err);
	}
	r->x.combine = RX_QUIET;
	r->x.after = RX_AFTER_2PC;
	r->x.sequential = false;
	r->settings_exec = true;
	r->tpc->step = step;
	return true;
}

/* The first <k> bits of <mask> (all when k < 0). */
static uint32_t
tpc_first(uint32_t mask, int k)
{
	uint32_t out = 0;

	for (uint32_t i = 0; i < 32 && k != 0; i++)
		if (mask & (1u << i)) {
			out |= 1u << i;
			k--;
		}
	return out;
}

/* The transaction is over: its answer through route_after_tx() (route_end.c). */
static void
tpc_end(struct route *r, bool committed)
{
	struct route_2pc *t = r->tpc;

	for (uint32_t i = 0; i < r->nsh; i++)
		r->sh[i].in_tx = false;
	t->step = TPC_NONE;
	r->x.after = committed ? RX_AFTER_COMMIT : RX_AFTER_ROLLBACK;
	r->x.has_err = t->failed;
	if (t->failed)
		r->x.err = t->err;
	route_strcpy(r->x.end_tag, sizeof(r->x.end_tag), committed ? t->tag : "ROLLBACK");
	r->x.ntg = 0;
	route_exec_finished(r);
}

/* Run the exec set up, or end with <err> when it could not start. */
static void
tpc_start(struct route *r, bool ok, struct nk_error *err)
{
	if (ok && route_exec_start(r, err))
		return;
	if (route_client_closed(r))
		return;
	r->tpc->failed = true;
	r->tpc->err = *err;
	tpc_end(r, false);
}

/* Roll back what was prepared and the decision participant's transaction. */
static void
tpc_abort(struct route *r)
{
	struct route_2pc *t = r->tpc;
	struct rshard *d = &r->sh[t->d];
	uint32_t mask = t->prepared;
	struct nk_error err;
	char *sql;
	bool ok;

	if (d->link != NULL && link_tx_status(d->link) != 'I')
		mask |= 1u << t->d;
	if (mask == 0) {
		tpc_end(r, false);
		return;
	}
	if ((sql = tpc_sql(t->gid, "ROLLBACK PREPARED ", "")) == NULL) {
		nk_error_oom(&err);
		tpc_start(r, false, &err);
		return;
	}
	ok = tpc_exec(r, TPC_ABORT, mask, sql, 1u << t->d, "ROLLBACK", &err);
	free(sql);
	tpc_start(r, ok, &err);
}

/* The decision's exec: the row and COMMIT in the decision participant's transaction. False
 * with <err>: set up (an error of the exec's start) or not (<*built> false: no memory). */
static bool
tpc_decide_setup(struct route *r, bool *built, struct nk_error *err)
{
	struct route_2pc *t = r->tpc;
	char parts[ROUTE_SHARDS_MAX * (PLAN_SHARD_MAX + 1) + 1] = "";
	char *sql, *tail, *del;
	size_t len = 0;
	bool ok;

	for (uint32_t i = 0; i < r->nsh; i++)
		if (t->part & (1u << i))
			len += (size_t)snprintf(parts + len, sizeof(parts) - len, "%s%s",
						len ? "," : "", r->sh[i].uid);
	for (char *p = parts; *p != '\0'; p++)
		if (*p == '\'')
			*p = '_';	/* (informative only) */
	if ((del = tpc_done_sql(r, t)) == NULL ||
	    asprintf(&tail, ", true, '%s'); %sCOMMIT", parts, del) == -1)
		tail = NULL;
	free(del);
	sql = tail == NULL ? NULL :
	      tpc_sql(t->gid, t->ensured ? "INSERT INTO " NK_2PC_TABLE " (gid, commit, participants) "
		      "VALUES (" : TPC_ENSURE_SQL "INSERT INTO " NK_2PC_TABLE
		      " (gid, commit, participants) VALUES (", tail);
	free(tail);
	*built = sql != NULL;
	if (sql == NULL)
		return nk_error_oom(err);
	ok = tpc_exec(r, TPC_DECIDE, 1u << t->d, sql, 0, NULL, err);
	free(sql);
	return ok;
}

/* The decision, now: its exec started, or everything rolled back when it could not be
 * built. */
static void
tpc_decide(struct route *r)
{
	struct nk_error err;
	bool built, ok = tpc_decide_setup(r, &built, &err);

	if (!built) {
		r->tpc->failed = true;
		r->tpc->err = err;
		tpc_abort(r);
		return;
	}
	tpc_start(r, ok, &err);
}

/* COMMIT PREPARED on the shards of <mask> (the prepared participants, then those where it
 * failed; failpoint commit_prepared:k: only k of them, commit_prepared_error:k: the first k
 * rounds fail). */
static void
tpc_finish_round(struct route *r, uint32_t mask)
{
	struct route_2pc *t = r->tpc;
	struct nk_error err;
	char *sql;
	bool ok;

	if ((sql = tpc_sql(t->gid, "COMMIT PREPARED ", "")) == NULL) {
		log_warn("S: out of memory: %s is left to the recovery", t->gid);
		tpc_end(r, true);
		return;
	}
	if (tpc_first(mask, tpc_failpoint("commit_prepared")) == 0)
		tpc_crash(t, "commit_prepared");	/* (commit_prepared:0) */
	if ((int)t->attempts < tpc_failpoint("commit_prepared_error"))
		strcpy(sql, "SELECT 1/0");	/* (a failed round, for the tests) */
	t->attempts++;
	ok = tpc_exec(r, TPC_FINISH, tpc_first(mask, tpc_failpoint("commit_prepared")), sql, 0,
		      NULL, &err);
	free(sql);
	if (!ok) {
		log_warn("S: %s: %s; left to the recovery", t->gid, err.message);
		tpc_end(r, true);
		return;
	}
	tpc_start(r, true, &err);
}

static void
tpc_finish(struct route *r)
{
	struct route_2pc *t = r->tpc;

	if (t->prepared == 0) {
		tpc_end(r, true);
		return;
	}
	t->attempts = 0;
	tpc_finish_round(r, t->prepared);
}

/* route_2pc_reads: see route_2pc.h. */
bool
route_2pc_reads(const struct stmt *st)
{
	return st->kind == STMT_SELECT && !(st->flags & (STMT_F_INTO | STMT_F_WRITING_CTE));
}

/* route_2pc_refused: see route_2pc.h. */
bool
route_2pc_refused(const struct route *r, struct nk_error *err)
{
	for (const struct rportal *p = r->portals; p != NULL; p = p->next) {
		if (!p->is_cursor || !p->hold || !p->tx_new)
			continue;
		nk_error_set(err, ERRCODE_FEATURE_NOT_SUPPORTED,
			     "cannot commit atomically a transaction that declared a "
			     "cursor WITH HOLD (\"%s\")", p->name);
		nk_error_detail(err, "Postgres cannot prepare such a transaction and "
				"__neki.tx_mode is atomic: it was rolled back on every shard.");
		nk_error_hint(err, "Declare the cursor WITHOUT HOLD, or SET __neki.tx_mode = "
			      "multi before the transaction.");
		return true;
	}
	if (shm_tx_epoch() == 0) {	/* (never a made-up epoch in a global id) */
		nk_error_set(err, ERRCODE_CANNOT_CONNECT_NOW,
			     "cannot commit atomically yet: this router has not "
			     "taken the epoch of its global transaction ids from the authoritative "
			     "shard");
		nk_error_detail(err, "The transaction was rolled back on every shard.");
		nk_error_hint(err, "Retry the transaction: neki's admin process takes the epoch "
			      "as soon as it reaches the authoritative shard.");
		return true;
	}
	return false;
}

/* Set up the PREPAREs (the writers but the first: t->d), with the plain COMMITs of the
 * shards that did not write; false with <err>. */
static bool
tpc_prepare_setup(struct route *r, struct nk_error *err)
{
	struct route_2pc *t = r->tpc;
	uint32_t mask, data;
	bool found = false, ok;
	char *sql;
	int k;

	t->part = 0;
	for (uint32_t j = 0; j < t->n; j++) {
		uint32_t i = t->order[j];

		if (!(t->writes & (1u << i)))
			continue;
		if (found)
			t->part |= 1u << i;
		else
			t->d = i;
		found = true;
	}
	tpc_gid(t, r, r->sh[t->d].uid);
	if ((sql = tpc_sql(t->gid, "PREPARE TRANSACTION ", "")) == NULL)
		return nk_error_oom(err);
	k = tpc_failpoint("prepare");
	data = tpc_first(t->part, k);
	mask = data | (k < 0 ? t->plain : 0);
	if (mask == 0)
		tpc_crash(t, "prepare");	/* (prepare:0) */
	ok = tpc_exec(r, TPC_PREPARE, mask, sql, t->plain, "COMMIT", err);
	free(sql);
	return ok;
}

/* The writers known: two of them or more prepare; else every participant's plain COMMIT
 * (uid order, as without atomic mode). False with <err>. */
static bool
tpc_plan(struct route *r, struct nk_error *err)
{
	struct route_2pc *t = r->tpc;
	const char *uids[ROUTE_SHARDS_MAX];
	uint32_t n = 0;

	if (__builtin_popcount(t->writes) > 1)
		return tpc_prepare_setup(r, err);
	for (uint32_t j = 0; j < t->n; j++)
		uids[n++] = r->sh[t->order[j]].uid;
	t->step = TPC_NONE;
	return route_tx_end_setup(r, uids, n, true, t->tag, err);
}

/* The shards that only read: one parallel round asking whether their transaction has an
 * xid (a volatile function may have written); its row (or none) is their count. */
#define TPC_PROBE_SQL "SELECT 1 WHERE pg_catalog.pg_current_xact_id_if_assigned() IS NULL"

/* The participants classified: the readers are probed first when there are other
 * participants, else the plan. False with <err>. */
static bool
tpc_probe_or_plan(struct route *r, struct nk_error *err)
{
	struct route_2pc *t = r->tpc;

	if (t->reads != 0 && __builtin_popcount(t->reads | t->writes) > 1)
		return tpc_exec(r, TPC_PROBE, t->reads, tpc_failpoint("probe_error") >= 0 ?
				"SELECT 1/0" : TPC_PROBE_SQL, 0, NULL, err);
	return tpc_plan(r, err);
}

/* The COMMIT of a transaction whose last participant was prepared with its statement
 * (t->early): the others but the decision one were writers there and then, so only the
 * decision and the COMMIT PREPAREDs are left. Failpoint prepare:k (k >= 1): the early
 * PREPAREs count. */
static enum rstep
tpc_commit_early(struct route *r)
{
	struct route_2pc *t = r->tpc;
	struct nk_error err;
	bool built;
	int k = tpc_failpoint("prepare");

	t->prepared = t->part = t->early;
	t->early = 0;
	for (uint32_t i = 0; i < r->nsh; i++)
		if (t->prepared & (1u << i))
			r->sh[i].in_tx = false;		/* prepared */
	if (k > 0 && k <= __builtin_popcount(t->prepared))
		tpc_crash(t, "prepare");
	route_set_busy(r);
	if (t->writes == (t->prepared | 1u << t->d) && t->reads == 0 && t->plain == 0) {
		if (tpc_decide_setup(r, &built, &err))
			return route_exec_run(r);
	} else {		/* (not the participants seen at the PREPARE: never so) */
		nk_error_set(&err, ERRCODE_INTERNAL_ERROR, "the participants of transaction %s "
			     "changed after its PREPARE", t->gid);
	}
	t->failed = true;
	t->err = err;
	tpc_abort(r);
	return RSTEP_ASYNC;
}

/* route_2pc_with_prepare: see route_2pc.h. */
char *
route_2pc_with_prepare(struct route *r, const struct rshard *sh, const char *sql)
{
	struct route_2pc *t = r->tpc;
	uint32_t self = (uint32_t)(sh - r->sh), d = UINT32_MAX;
	struct nk_error err;
	char *prep, *out;

	if (r->ps.tx_mode != PLAN_TX_ATOMIC || sh->in_tx || r->x.ntg > 2 || t == NULL ||
	    t->unchecked || tpc_failpoint("prepare") == 0 || route_2pc_refused(r, &err))
		return NULL;
	for (uint32_t i = 0; i < r->nsh; i++) {
		const struct rshard *o = &r->sh[i];

		if (i == self || !o->in_tx)
			continue;
		if (d != UINT32_MAX || !o->tx_data || !o->tx_write)
			return NULL;	/* (more participants, a reader: the COMMIT's rounds) */
		d = i;			/* the one writer before: it decides */
	}
	if (d == UINT32_MAX)
		return NULL;		/* (one shard: a plain COMMIT) */
	if (r->x.ntg == 2 && (r->x.tg_mask & (1u << d)) == 0)
		return NULL;		/* (the exec's other shard is not the one deciding) */
	tpc_gid(t, r, r->sh[d].uid);
	if ((prep = tpc_sql(t->gid, "PREPARE TRANSACTION ", "")) == NULL)
		return NULL;
	if (asprintf(&out, "%s\n;%s", sql, prep) == -1)
		out = NULL;
	free(prep);
	if (out != NULL) {
		t->early = 1u << self;
		t->d = d;
	}
	return out;
}

/* route_2pc_forget_early: see route_2pc.h. */
bool
route_2pc_forget_early(struct route *r)
{
	struct route_2pc *t = r->tpc;
	bool ok = true;

	if (t == NULL)
		return true;
	for (uint32_t k = 0; k < r->x.ntg && t->early != 0; k++) {
		struct rshard *sh = &r->sh[r->x.tg[k]];

		if ((t->early & (1u << r->x.tg[k])) != 0 && sh->link != NULL &&
		    link_tx_status(sh->link) == 'I') {	/* (its PREPARE ran) */
			free(sh->sql);
			ok = (sh->sql = tpc_sql(t->gid, "ROLLBACK PREPARED ", "")) != NULL;
		}
	}
	t->early = 0;
	return ok;
}

/* route_2pc_commit: see route_2pc.h. */
enum rstep
route_2pc_commit(struct route *r, const char *const *uids, uint32_t n, const char *tag)
{
	struct route_2pc *t = tpc_get(r);
	struct nk_error err;
	bool ok;

	if (t == NULL) {
		nk_error_oom(&err);
		return route_fail(r, &err);
	}
	t->part = t->plain = t->prepared = t->reads = t->writes = 0;
	t->n = 0;
	t->failed = false;
	route_strcpy(t->tag, sizeof(t->tag), tag);
	for (uint32_t j = 0; j < n; j++)
		for (uint32_t i = 0; i < r->nsh; i++) {
			if (strcmp(r->sh[i].uid, uids[j]) != 0)
				continue;
			t->order[t->n++] = i;
			if (!r->sh[i].tx_data)
				t->plain |= 1u << i;
			else if (!r->sh[i].tx_write)
				t->reads |= 1u << i;
			else
				t->writes |= 1u << i;
		}
	if (t->early != 0)
		return tpc_commit_early(r);
	if (t->unchecked)	/* (once per session: then as after SET's check) */
		ok = tpc_exec(r, TPC_VERIFY, t->reads | t->writes, TPC_MPX_SQL, 0, NULL, &err);
	else
		ok = tpc_probe_or_plan(r, &err);
	if (!ok)
		return route_fail(r, &err);
	return route_exec_run(r);
}

/* route_2pc_options: see route_2pc.h. */
bool
route_2pc_options(struct route *r, struct nk_error *err)
{
	if (tpc_get(r) == NULL)
		return nk_error_oom(err);
	r->tpc->unchecked = true;
	return true;
}

/* route_2pc_check: see route_2pc.h. */
enum rstep
route_2pc_check(struct route *r, const void *img)
{
	const char *uids[ROUTE_SHARDS_MAX];
	struct nk_error err;
	uint32_t n = 0;

	if (tpc_get(r) == NULL) {
		nk_error_oom(&err);
		return route_fail(r, &err);
	}
	for (uint32_t g = 0; g < topo_image_group_count(img); g++)
		for (uint32_t k = 0; k < topo_image_group_shard_count(img, g); k++) {
			const char *uid = topo_image_group_shard(img, g, k);
			bool dup = false;

			for (uint32_t j = 0; j < n && !dup; j++)
				dup = strcmp(uids[j], uid) == 0;
			if (!dup && n < ROUTE_SHARDS_MAX)
				uids[n++] = uid;
		}
	if (!route_exec_setup(r, uids, n, TPC_CHECK_SQL, &err))
		return route_fail(r, &err);
	r->x.combine = RX_QUIET;
	r->x.after = RX_AFTER_2PC;
	r->settings_exec = true;
	r->tpc->step = TPC_CHECK;
	return route_exec_run(r);
}

/* ---- the end of each step ---- */

/* <err>'s DETAIL says that the transaction was rolled back everywhere (after what it has). */
static void
tpc_rolled_back(struct nk_error *err)
{
	size_t off = strlen(err->detail);

	snprintf(err->detail + off, sizeof(err->detail) - off, "%sThe transaction was rolled "
		 "back on every shard.", off > 0 ? " " : "");
}

/* The exec's error <err>, with "Raised on shard x." naming the first target that failed. */
static void
tpc_blame(struct route *r, struct nk_error *err)
{
	*err = r->x.err;
	for (uint32_t k = 0; k < r->x.ntg; k++)
		if (r->sh[r->x.tg[k]].failed) {
			route_detail_shards(r, err, "Raised", k, k + 1);
			return;
		}
}

static void
tpc_checked(struct route *r)
{
	if (r->x.has_err) {
		struct nk_error e;

		tpc_blame(r, &e);
		route_stmt_finish(r, NULL, &e);
		return;
	}
	r->ps.tx_mode = PLAN_TX_ATOMIC;
	r->tpc->ensured = true;
	r->tpc->unchecked = false;
	r->tpc->step = TPC_NONE;
	route_stmt_finish(r, "SET", NULL);
}

/* Nothing prepared yet, the exec's error: ROLLBACK on every participant, then that error
 * (naming the shard; "The transaction was rolled back on every shard."). */
static void
tpc_rollback_all(struct route *r)
{
	struct route_2pc *t = r->tpc;
	const char *uids[ROUTE_SHARDS_MAX];
	struct nk_error err;
	uint32_t n = 0;

	tpc_blame(r, &r->commit_err);
	tpc_rolled_back(&r->commit_err);
	r->commit_failed = true;	/* (answered when the ROLLBACK is done) */
	for (uint32_t j = 0; j < t->n; j++)
		uids[n++] = r->sh[t->order[j]].uid;
	t->step = TPC_NONE;
	if (route_tx_end_setup(r, uids, n, false, "", &err) && route_exec_start(r, &err))
		return;
	if (!route_client_closed(r)) {
		t->failed = true;
		t->err = err;
		tpc_end(r, false);
	}
}

/* The probe's answers: a shard without an xid did not write (plain COMMIT); an error rolls
 * back every participant (nothing is prepared yet). */
static void
tpc_probed(struct route *r)
{
	struct route_2pc *t = r->tpc;
	struct nk_error err;

	for (uint32_t k = 0; k < r->x.ntg; k++) {
		uint32_t i = r->x.tg[k];

		if (r->sh[i].failed || r->sh[i].count != 1)
			t->writes |= 1u << i;
		else
			t->plain |= 1u << i;
	}
	if (!r->x.has_err) {
		tpc_start(r, tpc_plan(r, &err), &err);
		return;
	}
	if (tpc_failpoint("probe_error") >= 0)
		(void)unlink(tpc_failpoint_path());	/* (one shot) */
	tpc_rollback_all(r);
}

/* The startup options' atomic mode verified on the participants: on as after SET's check;
 * a shard without prepared transactions rolls every shard back with its error. */
static void
tpc_verified(struct route *r)
{
	struct nk_error err;

	if (r->x.has_err) {
		tpc_rollback_all(r);
		return;
	}
	r->tpc->unchecked = false;
	tpc_start(r, tpc_probe_or_plan(r, &err), &err);
}

static void
tpc_prepared(struct route *r)
{
	struct route_2pc *t = r->tpc;

	for (uint32_t k = 0; k < r->x.ntg; k++) {
		struct rshard *sh = &r->sh[r->x.tg[k]];

		if ((t->part & (1u << r->x.tg[k])) && sh->link != NULL && !sh->failed)
			t->prepared |= 1u << r->x.tg[k];
		sh->in_tx = false;	/* prepared, committed or gone */
	}
	if (tpc_failpoint("prepare") >= 0)
		tpc_crash(t, "prepare");
	if (r->x.has_err) {
		t->failed = true;
		tpc_blame(r, &t->err);
		tpc_rolled_back(&t->err);
		tpc_abort(r);
		return;
	}
	tpc_decide(r);
}

static void
tpc_decided(struct route *r)
{
	struct route_2pc *t = r->tpc;
	struct rshard *d = &r->sh[t->d];

	if (tpc_failpoint("decision") >= 0 && !r->x.has_err)
		tpc_crash(t, "decision");
	if (!r->x.has_err) {
		t->ensured = true;
		tpc_finish(r);
		return;
	}
	t->failed = true;
	if (d->link == NULL) {		/* lost during its COMMIT: decided or not */
		nk_error_set(&t->err, ERRCODE_TRANSACTION_RESOLUTION_UNKNOWN,
			     "the outcome of the transaction is unknown: the "
			     "connection to shard \"%s\" was lost during its commit", d->uid);
		nk_error_detail(&t->err, "Transaction %s is prepared on the other shards.", t->gid);
		nk_error_hint(&t->err, "neki's recovery commits or rolls it back as shard \"%s\" "
			      "decided, once the shard is back.", d->uid);
		tpc_end(r, false);
		return;
	}
	tpc_blame(r, &t->err);
	tpc_rolled_back(&t->err);
	tpc_abort(r);
}

/* The session's next statement on shard <uid> waits for <gid> to be finished there. */
static void
tpc_wait_add(struct route_2pc *t, const char *uid)
{
	struct tpc_wait *w;

	if (t->nwaits == TPC_WAITS_MAX)
		return;		/* (the oldest ones wait; recovery finishes this one anyway) */
	w = &t->waits[t->nwaits++];
	snprintf(w->uid, sizeof(w->uid), "%s", uid);
	snprintf(w->gid, sizeof(w->gid), "%s", t->gid);
}

static void
tpc_finished(struct route *r)
{
	struct route_2pc *t = r->tpc;
	uint32_t failed = 0, nfailed = 0;
	char msg[512];

	if (tpc_failpoint("commit_prepared") >= 0)
		tpc_crash(t, "commit_prepared");
	for (uint32_t k = 0; k < r->x.ntg; k++)
		if (r->sh[r->x.tg[k]].failed) {
			failed |= 1u << r->x.tg[k];
			nfailed++;
		}
	if (nfailed == 1 && t->attempts > 1 &&
	    strcmp(r->x.err.sqlstate, ERRCODE_UNDEFINED_OBJECT) == 0)
		failed = 0;	/* (the last round committed it, its answer was lost) */
	if (failed != 0 && t->attempts < TPC_ATTEMPTS) {
		tpc_finish_round(r, failed);
		return;
	}
	if (tpc_failpoint("commit_prepared_error") >= 0)
		(void)unlink(tpc_failpoint_path());	/* (one shot) */
	for (uint32_t i = 0; i < r->nsh; i++) {
		if (!(failed & (1u << i)))
			continue;
		log_warn("S: %s: COMMIT PREPARED failed %u times on shard %s; left to the "
			 "recovery", t->gid, t->attempts, r->sh[i].uid);
		snprintf(msg, sizeof(msg), "the transaction is committed but not yet on shard "
			 "\"%s\": neki's recovery finishes it (%s); this session's next statement "
			 "there waits for it", r->sh[i].uid, t->gid);
		tpc_wait_add(t, r->sh[i].uid);
		if (!route_reply_notice(r, ERRCODE_WARNING, msg))
			return;
	}
	if (failed == 0)
		tpc_done_add(r, t);
	tpc_end(r, true);
}

/* route_2pc_wait_send: see route_2pc.h. */
bool
route_2pc_wait_send(struct route *r, struct rshard *sh)
{
	struct route_2pc *t = r->tpc;
	double limit = r->c.cfg->cli.query_wait_timeout;
	char head[192], *sql;

	if (t == NULL || t->nwaits == 0 || r->x.after != RX_AFTER_STMT)
		return true;
	snprintf(head, sizeof(head), "DO $neki$BEGIN FOR i IN 1..%ld LOOP EXIT WHEN NOT EXISTS "
		 "(SELECT 1 FROM pg_catalog.pg_prepared_xacts WHERE gid = ",
		 limit > 0 ? (long)(limit * 10) + 1 : 1000000000L);
	for (uint32_t k = t->nwaits; k-- > 0;) {
		bool ok;

		if (strcmp(t->waits[k].uid, sh->uid) != 0)
			continue;
		log_info("S: shard %s: the statement waits for %s to be finished there", sh->uid,
			 t->waits[k].gid);
		sql = tpc_sql(t->waits[k].gid, head, "); PERFORM pg_catalog.pg_sleep(0.1); "
			      "END LOOP; END$neki$");
		t->waits[k] = t->waits[--t->nwaits];
		if (sql == NULL)
			return false;
		ok = route_link_query(sh->link, sql);
		free(sql);
		if (!ok)
			return false;
		sh->swallow++;
	}
	return true;
}

/* route_2pc_finished: see route_2pc.h. */
void
route_2pc_finished(struct route *r)
{
	switch (r->tpc->step) {
	case TPC_CHECK:
		tpc_checked(r);
		break;
	case TPC_VERIFY:
		tpc_verified(r);
		break;
	case TPC_PROBE:
		tpc_probed(r);
		break;
	case TPC_PREPARE:
		tpc_prepared(r);
		break;
	case TPC_DECIDE:
		tpc_decided(r);
		break;
	case TPC_FINISH:
		tpc_finished(r);
		break;
	case TPC_ABORT:
	case TPC_NONE:
		tpc_end(r, false);
		break;
	}
}
