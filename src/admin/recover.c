/*
 * recover.c - the recovery of atomic commits (include/neki/twophase.h) in the admin
 * process: every second, on every shard of every sharded database of the topology, the
 * prepared transactions neki left (gid neki:...) older than a grace period are finished as
 * their decision participant (the gid's last field) decided. An abort row is inserted there
 * first (ON CONFLICT DO NOTHING: whoever inserts first decides, a coordinator still running
 * then fails its decision and rolls back), then the row's outcome is read and COMMIT
 * PREPARED or ROLLBACK PREPARED runs where the transaction is prepared. A decision shard
 * that does not answer means wait, never guess; one lacking the table gets it (no decision
 * could have been committed there). The shards are listed from their maintenance database
 * (postgres); a connection to a user database is opened only for a pass that finishes
 * something there, and closed after it. Such a pass also deletes the decision rows older
 * than a minute whose gid no shard holds prepared, when every shard answered (the
 * coordinators delete theirs).
 * Any neki finishes any neki's transactions (a host that never comes back included).
 * The grace period is the setting atomic_recovery_grace (10 s by default), read every pass.
 * Entry points: recover_init(), recover_show().
 */
#include "neki/base.h"

#include "admin_int.h"
#include "recover.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "neki/config.h"
#include "neki/log.h"
#include "neki/proc.h"
#include "neki/topology.h"
#include "neki/twophase.h"

#define RC_TICK_MS 1000
#define RC_PAIRS_MAX 64
#define RC_MAINT_DB "postgres"		/* where the shards are listed from */

/* One connection to shard <uid>: its maintenance database (listing, kept), or database
 * <db> (temp: opened for a pass that has something to finish there, closed after it). */
struct rc_conn {
	char db[ADM_NAME_MAX];		/* the topology's name ("" for the maintenance one) */
	char uid[ADM_NAME_MAX];
	struct pgc *pgc;		/* owned */
	bool temp;
	bool used;			/* temp: the pass sent it a query */
};

/* A prepared transaction seen on a shard. */
struct rc_item {
	size_t conn;			/* the connection to its database where it is prepared */
	char gid[NK_2PC_GID_MAX];
	char prepared[40];		/* pg_prepared_xacts.prepared as text */
	bool old;			/* older than the grace period */
	double age_s;			/* seconds since it was prepared, at the listing */
	char outcome;			/* 'c', 'a'; 0 until decided */
};

static struct event_base *rc_base;	/* borrowed */
static struct event *rc_tick_ev;	/* owned */
static struct rc_conn *rc_conns;	/* owned */
static size_t rc_nconns;
static bool rc_busy;			/* a pass runs */

/* The pass: the shards to list, what they hold, the position. */
static size_t rc_pairs[RC_PAIRS_MAX];	/* rc_conns indexes of the maintenance connections */
static size_t rc_npairs, rc_pos;
static bool rc_incomplete;		/* a shard did not answer: no GC this pass */
static struct rc_item *rc_items;	/* owned */
static size_t rc_nitems, rc_capitems;
static size_t rc_ngc;			/* temp connections the GC went through */
static struct rc_item *rc_last;		/* owned: the items of the last pass (SHOW) */
static char (*rc_last_where)[2][ADM_NAME_MAX];	/* owned: their shard and database */
static size_t rc_nlast;

static void rc_next(void);

static long
rc_grace_ms(void)
{
	return (long)(cfg_current()->neki.atomic_recovery_grace * 1000);
}

/* The server-side name of topology database <db> on shard <s>. */
static const char *
rc_server_db(const struct cfg_shard *s, const char *db)
{
	return s->dbname != NULL ? s->dbname : db;
}

/* ---- connections ---- */

/* The connection to <db> ("": the maintenance database) on <uid>, made on first use;
 * SIZE_MAX when it cannot be. */
static size_t
rc_conn_of(const char *db_in, const char *uid_in)
{
	char db[ADM_NAME_MAX], uid[ADM_NAME_MAX];	/* (the caller's may be in rc_conns) */
	const struct cfg_shard *s;
	struct rc_conn *v;
	char *ci;

	if (strlen(db_in) >= ADM_NAME_MAX || strlen(uid_in) >= ADM_NAME_MAX)
		return SIZE_MAX;
	strcpy(db, db_in);
	strcpy(uid, uid_in);
	s = cfg_shard_find(cfg_current(), uid);
	for (size_t i = 0; i < rc_nconns; i++)
		if (strcmp(rc_conns[i].db, db) == 0 && strcmp(rc_conns[i].uid, uid) == 0)
			return i;
	if (s == NULL || (v = realloc(rc_conns, (rc_nconns + 1) * sizeof(*v))) == NULL)
		return SIZE_MAX;
	rc_conns = v;
	v += rc_nconns;
	memset(v, 0, sizeof(*v));
	snprintf(v->db, ADM_NAME_MAX, "%s", db);
	snprintf(v->uid, ADM_NAME_MAX, "%s", uid);
	v->temp = db[0] != '\0';
	if (asprintf(&ci, "%s dbname=%s application_name=neki-recovery", s->conninfo,
		     db[0] != '\0' ? rc_server_db(s, db) : RC_MAINT_DB) == -1)
		return SIZE_MAX;
	v->pgc = pgc_new(rc_base, uid);
	if (v->pgc != NULL) {
		pgc_set_quiet(v->pgc, true);	/* (a shard that is down is retried every second) */
		pgc_set_conninfo(v->pgc, ci);
	}
	free(ci);
	return v->pgc != NULL ? rc_nconns++ : SIZE_MAX;
}

/* The pass ended: its temp connections go (no backend stays in the users' databases). */
/* Keep what the pass saw for SHOW TRANSACTIONS (its connections are about to go). */
static void
rc_keep(void)
{
	free(rc_last);
	free(rc_last_where);
	rc_nlast = 0;
	rc_last = rc_nitems ? malloc(rc_nitems * sizeof(*rc_last)) : NULL;
	rc_last_where = rc_nitems ? malloc(rc_nitems * sizeof(*rc_last_where)) : NULL;
	if (rc_last == NULL || rc_last_where == NULL)
		return;
	for (size_t i = 0; i < rc_nitems; i++) {
		rc_last[i] = rc_items[i];
		snprintf(rc_last_where[i][0], ADM_NAME_MAX, "%s", rc_conns[rc_items[i].conn].uid);
		snprintf(rc_last_where[i][1], ADM_NAME_MAX, "%s", rc_conns[rc_items[i].conn].db);
	}
	rc_nlast = rc_nitems;
}

static void
rc_done(void)
{
	size_t k = 0;

	rc_keep();

	for (size_t i = 0; i < rc_nconns; i++) {
		if (rc_conns[i].temp)
			pgc_free_later(rc_conns[i].pgc);
		else
			rc_conns[k++] = rc_conns[i];
	}
	rc_nconns = k;
	rc_nitems = 0;
	rc_busy = false;
}

/* ---- listing ---- */

static void
rc_add_pair(const char *uid)
{
	size_t c = rc_conn_of("", uid);

	for (size_t i = 0; i < rc_npairs; i++)
		if (rc_pairs[i] == c)
			return;
	if (c != SIZE_MAX && rc_npairs < RC_PAIRS_MAX)
		rc_pairs[rc_npairs++] = c;
}

/* Every shard of the topology. */
static void
rc_collect(const struct topo_model *m)
{
	rc_npairs = 0;
	for (size_t g = 0; g < m->ngroups; g++)
		for (size_t k = 0; k < m->groups[g].nranges; k++)
			if (m->groups[g].ranges[k].shard_uid != NULL)
				rc_add_pair(m->groups[g].ranges[k].shard_uid);
}

/* The topology database whose server-side name on <uid> is <server_db>; NULL if none. */
static const char *
rc_topology_db(const char *uid, const char *server_db)
{
	const struct rev_current *cur = rev_get();
	const struct cfg_shard *s = cfg_shard_find(cfg_current(), uid);

	for (size_t d = 0; s != NULL && cur->model != NULL && d < cur->model->ndbs; d++)
		if (strcmp(rc_server_db(s, cur->model->dbs[d].name), server_db) == 0)
			return cur->model->dbs[d].name;
	return NULL;
}

static bool
rc_item_add(const char *uid, const char *gid, bool old, const char *server_db,
	    const char *prepared, double age_s)
{
	const char *db = rc_topology_db(uid, server_db);
	struct rc_item *it;
	size_t c;

	if (db == NULL || (c = rc_conn_of(db, uid)) == SIZE_MAX)
		return false;
	if (rc_nitems == rc_capitems) {
		size_t cap = rc_capitems ? rc_capitems * 2 : 16;

		if ((it = realloc(rc_items, cap * sizeof(*it))) == NULL)
			return false;
		rc_items = it;
		rc_capitems = cap;
	}
	it = &rc_items[rc_nitems++];
	memset(it, 0, sizeof(*it));
	it->conn = c;
	snprintf(it->gid, sizeof(it->gid), "%s", gid);
	snprintf(it->prepared, sizeof(it->prepared), "%s", prepared);
	it->old = old;
	it->age_s = age_s;
	return true;
}

static void
listed_cb(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	size_t pair = (size_t)(uintptr_t)arg;
	char uid[ADM_NAME_MAX];		/* (rc_item_add() may move rc_conns) */

	snprintf(uid, sizeof(uid), "%s", rc_conns[rc_pairs[pair]].uid);

	if (err != NULL) {
		log_debug("recovery: shard %s not listed: %s", uid, err->message);
		rc_incomplete = true;
	}
	for (size_t r = 0; err == NULL && r < pgc_res_rows(res); r++) {
		bool old = strcmp(pgc_res_get(res, r, 1), "t") == 0;

		(void)rc_item_add(uid, pgc_res_get(res, r, 0), old, pgc_res_get(res, r, 2),
				  pgc_res_get(res, r, 3), strtod(pgc_res_get(res, r, 4), NULL));
	}
	rc_pos++;
	rc_next();
}

/* List the prepared transactions of neki on shard <p> (every database). */
static void
rc_list(size_t p)
{
	char grace[32];
	const char *params[1] = { grace };

	snprintf(grace, sizeof(grace), "%ld milliseconds", rc_grace_ms());
	pgc_query(rc_conns[rc_pairs[p]].pgc, "SELECT gid, prepared < now() - $1::interval, "
		  "database, prepared, extract(epoch FROM now() - prepared) "
		  "FROM pg_catalog.pg_prepared_xacts WHERE gid LIKE '" NK_2PC_PREFIX
		  "%' ORDER BY prepared", 1, params, listed_cb, (void *)(uintptr_t)p);
}

/* "<verb> '<gid>'" (quotes doubled); NULL on no memory. */
static char *
rc_sql(const char *verb, const char *gid)
{
	char lit[2 * NK_2PC_GID_MAX + 1], *p = lit, *out;

	for (const char *q = gid; *q != '\0'; q++) {
		if (*q == '\'')
			*p++ = '\'';
		*p++ = *q;
	}
	*p = '\0';
	return asprintf(&out, "%s '%s'", verb, lit) == -1 ? NULL : out;
}

static void
resolved_cb(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	struct rc_item *it = &rc_items[(size_t)(uintptr_t)arg];

	/* (42704: finished meanwhile) */
	if (err != NULL && strcmp(err->sqlstate, ERRCODE_UNDEFINED_OBJECT) != 0)
		log_warn("recovery: %s on shard %s: %s", it->gid, rc_conns[it->conn].uid,
			 err->message);
	else
		log_info("recovery: %s %s on shard %s", it->outcome == 'c' ? "committed" :
			 "rolled back", it->gid, rc_conns[it->conn].uid);
	rc_pos++;
	rc_next();
}

static void
ensured_cb(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	if (err != NULL)
		log_warn("recovery: could not create " NK_2PC_TABLE ": %s", err->message);
	rc_pos++;		/* (the next pass decides) */
	rc_next();
}

/* Create the decision table on connection <c> (the next pass decides). */
static void
rc_ensure(size_t c)
{
	pgc_query(rc_conns[c].pgc, NK_2PC_ENSURE_SQL, 0, NULL, ensured_cb, NULL);
}

static void
decided_cb(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	size_t i = (size_t)(uintptr_t)arg;
	struct rc_item *it = &rc_items[i];
	const char *dsh = strrchr(it->gid, ':') + 1;
	char *sql;

	if (err != NULL) {
		/* no table: none decided there */
		if (strcmp(err->sqlstate, ERRCODE_UNDEFINED_TABLE) == 0) {
			rc_ensure(rc_conn_of(rc_conns[it->conn].db, dsh));
			return;
		}
		log_warn("recovery: %s waits for its decision shard %s: %s", it->gid, dsh,
			 err->message);
		rc_pos++;
		rc_next();
		return;
	}
	it->outcome = pgc_res_rows(res) > 0 && strcmp(pgc_res_get(res, 0, 0), "t") == 0 ?
		      'c' : 'a';
	sql = rc_sql(it->outcome == 'c' ? "COMMIT PREPARED" : "ROLLBACK PREPARED", it->gid);
	if (sql == NULL) {
		rc_pos++;
		rc_next();
		return;
	}
	rc_conns[it->conn].used = true;
	pgc_query(rc_conns[it->conn].pgc, sql, 0, NULL, resolved_cb, arg);
	free(sql);
}

/* Item <i>: its decision (the abort row unless one is there), then its end. */
static void
rc_decide(size_t i)
{
	struct rc_item *it = &rc_items[i];
	const char *colon = strrchr(it->gid, ':');
	const char *params[2] = { it->gid, "false" };
	size_t d;

	if (colon == NULL || (d = rc_conn_of(rc_conns[it->conn].db, colon + 1)) == SIZE_MAX) {
		log_warn("recovery: %s: no decision shard \"%s\" in [shards]", it->gid,
			 colon != NULL ? colon + 1 : "");
		rc_pos++;
		rc_next();
		return;
	}
	rc_conns[d].used = true;
	pgc_query(rc_conns[d].pgc, NK_2PC_DECIDE_SQL, 2, params, decided_cb, (void *)(uintptr_t)i);
}

static void
gc_cb(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	rc_next();
}

/* Connection <c> (a database the pass finished something in): drop its decision rows older
 * than a minute whose gid no shard holds prepared (the coordinators drop theirs). */
static void
rc_gc(size_t c)
{
	size_t cap = 3, len = 0;
	const char *params[1];
	char *arr;

	for (size_t i = 0; i < rc_nitems; i++)
		cap += strlen(rc_items[i].gid) + 3;
	if ((arr = malloc(cap)) == NULL) {
		rc_next();
		return;
	}
	arr[len++] = '{';
	for (size_t i = 0; i < rc_nitems; i++)	/* (neki's gids hold no quote or backslash) */
		len += (size_t)snprintf(arr + len, cap - len, "%s\"%s\"", i ? "," : "",
					rc_items[i].gid);
	snprintf(arr + len, cap - len, "}");
	params[0] = arr;
	pgc_query(rc_conns[c].pgc, "DELETE FROM " NK_2PC_TABLE " WHERE decided < now() - "
		  "interval '1 minute' AND gid <> ALL ($1::text[])", 1, params, gc_cb, NULL);
	free(arr);
}

/* The pass's next query: list every shard, decide every old item, then the GC. */
static void
rc_next(void)
{
	size_t phase2 = rc_npairs + rc_nitems;

	while (rc_pos >= rc_npairs && rc_pos < phase2 && !rc_items[rc_pos - rc_npairs].old)
		rc_pos++;
	if (rc_pos < rc_npairs) {
		rc_list(rc_pos);
		return;
	}
	if (rc_pos < phase2) {
		rc_decide(rc_pos - rc_npairs);
		return;
	}
	for (; !rc_incomplete && rc_ngc < rc_nconns; rc_ngc++)
		if (rc_conns[rc_ngc].temp && rc_conns[rc_ngc].used) {
			rc_conns[rc_ngc].used = false;
			rc_gc(rc_ngc++);
			return;
		}
	rc_done();
}

static void
rc_tick_cb(evutil_socket_t fd, short what, void *arg)
{
	const struct rev_current *cur = rev_get();

	if (rc_busy || cur == NULL || cur->model == NULL)
		return;
	rc_collect(cur->model);
	if (rc_npairs == 0)
		return;
	rc_busy = true;
	rc_incomplete = false;
	rc_pos = rc_ngc = 0;
	rc_next();
}

/* recover_show: see recover.h. */
void
recover_show(struct adm_result *r)
{
	static const struct adm_col cols[] = {
		{ "gid", ADM_T_TEXT }, { "shard", ADM_T_TEXT }, { "database", ADM_T_TEXT },
		{ "decision_shard", ADM_T_TEXT }, { "prepared", ADM_T_TIMESTAMPTZ },
		{ "state", ADM_T_TEXT },
	};

	adm_result_columns(r, cols, NK_ARRAY_LEN(cols));
	for (size_t i = 0; i < rc_nlast; i++) {
		const struct rc_item *it = &rc_last[i];
		const char *colon = strrchr(it->gid, ':');
		const char *vals[6] = { it->gid, rc_last_where[i][0], rc_last_where[i][1],
					colon != NULL ? colon + 1 : "", it->prepared,
					it->old ? "in doubt" : "committing" };

		adm_result_row(r, vals);
	}
}

/* recover_in_doubt: see recover.h. */
size_t
recover_in_doubt(double *oldest_s)
{
	size_t n = 0;

	*oldest_s = 0;
	for (size_t i = 0; i < rc_nlast; i++) {
		if (!rc_last[i].old)
			continue;
		n++;
		if (rc_last[i].age_s > *oldest_s)
			*oldest_s = rc_last[i].age_s;
	}
	return n;
}

/* ---- __neki.resolve_transaction(gid, 'commit' | 'abort') ---- */

struct rc_resolve {
	struct adm_req *req;		/* borrowed until finished */
	char gid[NK_2PC_GID_MAX];
	char db[ADM_NAME_MAX];
	char shards[RC_PAIRS_MAX][ADM_NAME_MAX];	/* where the last pass saw it prepared */
	size_t nshards, pos;
	bool commit;			/* asked */
	bool unchecked;			/* its decision shard did not answer */
	struct pgc *pgc;		/* owned: the step's connection */
};

static void rs_next(struct rc_resolve *rs);

static void
rs_end(struct rc_resolve *rs, const char *sqlstate, const char *msg)
{
	static const struct adm_col cols[] = { { "gid", ADM_T_TEXT }, { "outcome", ADM_T_TEXT },
					       { "shards", ADM_T_INT4 }, { "note", ADM_T_TEXT } };
	char n[16];
	const char *vals[4] = { rs->gid, rs->commit ? "committed" : "rolled back", n,
				rs->unchecked ? "its decision shard did not answer: the "
				"outcome was not checked against its decision" : "" };
	struct nk_error err;

	if (sqlstate != NULL) {
		nk_error_set(&err, sqlstate, "%s", msg);
		adm_result_error(&rs->req->res, &err);
	} else {
		snprintf(n, sizeof(n), "%zu", rs->nshards);
		adm_result_columns(&rs->req->res, cols, NK_ARRAY_LEN(cols));
		adm_result_row(&rs->req->res, vals);
		adm_result_complete(&rs->req->res, "SELECT", true);
	}
	adm_req_finish(rs->req);
	free(rs);
}

/* A connection of its own to <db> on <uid> for one query; NULL when it cannot be. */
static struct pgc *
rs_conn(const char *db, const char *uid)
{
	const struct cfg_shard *s = cfg_shard_find(cfg_current(), uid);
	struct pgc *c;
	char *ci;

	if (s == NULL || asprintf(&ci, "%s dbname=%s application_name=neki-recovery",
				  s->conninfo, rc_server_db(s, db)) == -1)
		return NULL;
	if ((c = pgc_new(rc_base, uid)) != NULL) {
		pgc_set_quiet(c, true);
		pgc_set_conninfo(c, ci);
	}
	free(ci);
	return c;
}

static void
rs_finished_cb(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	struct rc_resolve *rs = arg;

	if (err != NULL && strcmp(err->sqlstate, ERRCODE_UNDEFINED_OBJECT) != 0)
		log_warn("resolve_transaction: %s on shard %s: %s", rs->gid,
			 rs->shards[rs->pos], err->message);
	pgc_free_later(rs->pgc);
	rs->pos++;
	rs_next(rs);
}

/* COMMIT / ROLLBACK PREPARED on the next shard. */
static void
rs_next(struct rc_resolve *rs)
{
	char *sql;

	if (rs->pos >= rs->nshards) {
		rs_end(rs, NULL, NULL);
		return;
	}
	sql = rc_sql(rs->commit ? "COMMIT PREPARED" : "ROLLBACK PREPARED", rs->gid);
	if (sql == NULL || (rs->pgc = rs_conn(rs->db, rs->shards[rs->pos])) == NULL) {
		free(sql);
		rs_end(rs, ERRCODE_OUT_OF_MEMORY, "out of memory");
		return;
	}
	pgc_query(rs->pgc, sql, 0, NULL, rs_finished_cb, rs);
	free(sql);
}

static void
rs_decided_cb(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	struct rc_resolve *rs = arg;
	char msg[NK_2PC_GID_MAX + 128];

	pgc_free_later(rs->pgc);
	if (err != NULL) {
		rs->unchecked = true;	/* (the operator's word, as asked) */
	} else if (pgc_res_rows(res) > 0 &&
		   (strcmp(pgc_res_get(res, 0, 0), "t") == 0) != rs->commit) {
		snprintf(msg, sizeof(msg), "transaction %s was already decided: %s", rs->gid,
			 rs->commit ? "abort" : "commit");
		rs_end(rs, ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE, msg);
		return;
	}
	rs_next(rs);
}

/* recover_resolve: see recover.h. */
void
recover_resolve(struct adm_req *req, const char *gid, const char *how)
{
	struct rc_resolve *rs = calloc(1, sizeof(*rs));
	const char *colon = gid != NULL ? strrchr(gid, ':') : NULL;
	const char *params[2];

	if (rs == NULL) {
		adm_req_finish(req);
		return;
	}
	rs->req = req;
	snprintf(rs->gid, sizeof(rs->gid), "%s", gid != NULL ? gid : "");
	if (how == NULL || (strcmp(how, "commit") != 0 && strcmp(how, "abort") != 0)) {
		rs_end(rs, ERRCODE_INVALID_PARAMETER_VALUE,
		       "the outcome must be 'commit' or 'abort'");
		return;
	}
	rs->commit = strcmp(how, "commit") == 0;
	for (size_t i = 0; i < rc_nlast && rs->nshards < RC_PAIRS_MAX; i++)
		if (strcmp(rc_last[i].gid, rs->gid) == 0) {
			snprintf(rs->shards[rs->nshards++], ADM_NAME_MAX, "%s", rc_last_where[i][0]);
			snprintf(rs->db, sizeof(rs->db), "%s", rc_last_where[i][1]);
		}
	if (rs->nshards == 0 || colon == NULL) {
		rs_end(rs, ERRCODE_UNDEFINED_OBJECT,
		       "no shard holds this transaction prepared (SHOW TRANSACTIONS "
		       "lists what the recovery saw in its last pass)");
		return;
	}
	if ((rs->pgc = rs_conn(rs->db, colon + 1)) == NULL) {
		rs->unchecked = true;
		rs_next(rs);
		return;
	}
	params[0] = rs->gid;
	params[1] = rs->commit ? "true" : "false";
	pgc_query(rs->pgc, NK_2PC_DECIDE_SQL, 2, params, rs_decided_cb, rs);
}

/* recover_init: see recover.h. */
void
recover_init(struct event_base *base)
{
	struct timeval tv = { RC_TICK_MS / 1000, (RC_TICK_MS % 1000) * 1000 };

	rc_base = base;
	rc_tick_ev = event_new(base, -1, EV_PERSIST, rc_tick_cb, NULL);
	if (rc_tick_ev == NULL || event_add(rc_tick_ev, &tv) == -1)
		fatal("could not set up the recovery of atomic commits");
}
