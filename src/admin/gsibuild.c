/*
 * gsibuild.c - __neki.gsi_build(): build a global secondary index of an owner table that has
 * rows, online, with the routers writing meanwhile (doc/topology.md "Building a GSI"):
 *
 *  1. The GSI must be declared and disabled (or write-only: a build that stopped, resumed).
 *     A disabled one's lookup table is emptied on its shards, then a revision declares the
 *     GSI enabled and write_only: every router maintains its lookup rows, none reads them.
 *  2. Wait until every router runs that revision with no statement planned before it still
 *     running (follow_wait: a process reports a revision as switched to only then), then
 *     on every owner shard until the transactions begun before that moment have ended.
 *  3. Fill: each owner shard in primary-key order, GB_CHUNK rows read FOR SHARE in one
 *     transaction (no UPDATE or DELETE of them till their lookup rows are there), their
 *     lookup rows inserted ON CONFLICT DO NOTHING on the lookup table's shards, COMMIT. A
 *     unique GSI's conflict with a lookup row naming another owner row is a duplicate.
 *  4. Verify: the same pass again, until one writes no row (every owner row has its lookup
 *     row; a row whose key moved behind the pass is found then), at most GB_PASSES in all;
 *     a unique GSI: no value twice on one owner shard; every lookup row names an owner row
 *     (asked of every owner shard; one that does not is asked again GB_RECHECKS times, as a
 *     write in flight commits on two shards one after the other).
 *  5. A revision declares the GSI enabled: reads use it.
 * A duplicate or a NULL the index refuses puts the GSI back to disabled and fails (23505,
 * 23502). Any other failure leaves it write-only (maintained): a new call resumes.
 * This file: the call, the revisions, the waits, the steps in order; gsibuild_scan.c: the
 * fill and the verification, chunk by chunk.
 * Entry points: gsibuild_init(), gsibuild_start().
 */
#include "neki/base.h"

#include "admin_int.h"
#include "gsibuild.h"
#include "gsibuild_int.h"
#include "nekidesc.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "neki/clock.h"
#include "neki/log.h"
#include "neki/memstream.h"
#include "neki/shm.h"
#include "neki/sqlscan.h"
#include "neki/sqlstate.h"
#include "neki/topology.h"
#include "neki/topology_image.h"

static struct event_base *gb_base;
static struct gb *running;

/* The last build that ended (gsi_build_status). */
static struct {
	bool set;
	char name[ADM_NAME_MAX], db[ADM_NAME_MAX], state[32];
	char error[NK_ERR_MSG_MAX];
	size_t pass;
	uint64_t written, scanned;
	time_t started, ended;
} last_build;

/* What each step does, for gsi_build_status. */
static const char *const step_names[] = {
	[GB_PREP] = "preparing", [GB_TRUNCATE] = "emptying the lookup table",
	[GB_WRITE_ONLY] = "making it write-only", [GB_ROUTERS] = "waiting for the routers",
	[GB_OLD_TX] = "waiting for older transactions", [GB_FILL] = "filling",
	[GB_DUPS] = "checking duplicates", [GB_ORPHANS] = "checking lookup rows",
	[GB_RECHECK] = "checking lookup rows again", [GB_ENABLE] = "enabling",
	[GB_REVERT] = "disabling it again",
};

/* Keep <b>'s end for gsi_build_status: <state>, <err> (NULL: none). */
static void
keep_end(const struct gb *b, const char *state, const struct nk_error *err)
{
	last_build.set = true;
	snprintf(last_build.name, sizeof(last_build.name), "%s", b->name);
	snprintf(last_build.db, sizeof(last_build.db), "%s", b->db);
	snprintf(last_build.state, sizeof(last_build.state), "%s", state);
	snprintf(last_build.error, sizeof(last_build.error), "%s", err ? err->message : "");
	last_build.pass = b->pass;
	last_build.written = b->written;
	last_build.scanned = b->scanned_pass;
	last_build.started = b->started;
	last_build.ended = time(NULL);
}

/* ---- the end ---- */

static void
gb_free(struct gb *b)
{
	for (size_t i = 0; b->oc != NULL && i < b->noc; i++)
		if (b->oc[i].c != NULL)
			pgc_free_later(b->oc[i].c);
	for (size_t i = 0; b->lk != NULL && i < b->nlk; i++)
		if (b->lk[i].c != NULL)
			pgc_free_later(b->lk[i].c);
	for (size_t k = 0; k < GB_MAX_COLS; k++) {
		free(b->lc[k]);
		free(b->lct[k]);
		free(b->pk[k]);
		free(b->lkey[k]);
	}
	gb_rows_clear(&b->chunk);
	gb_rows_clear(&b->last);
	gb_rows_clear(&b->cand);
	free(b->oc);
	free(b->lk);
	free(b->dest);
	free(b->hit);
	free(b->kept);
	free(b->owner);
	free(b->lookup);
	if (b->timer != NULL)
		event_free(b->timer);
	if (running == b)
		running = NULL;
	free(b);
}

static void
gb_reply(struct gb *b)
{
	size_t ncols;
	const struct adm_col *cols = nekidesc_cols("gsi_build", &ncols);	/* (one table) */
	char v[4][24];
	const char *vals[5] = { b->name, v[0], v[1], v[2], v[3] };

	snprintf(v[0], sizeof(v[0]), "%" PRIu64, b->revision);
	snprintf(v[1], sizeof(v[1]), "%" PRIu64, b->written);
	snprintf(v[2], sizeof(v[2]), "%" PRIu64, b->scanned_pass);
	snprintf(v[3], sizeof(v[3]), "%zu", b->pass);
	adm_result_columns(&b->req->res, cols, ncols);
	adm_result_row(&b->req->res, vals);
	adm_result_complete(&b->req->res, "SELECT", true);
	log_info("gsi_build %s: enabled in revision %" PRIu64 " (%" PRIu64 " lookup rows "
		 "written, %" PRIu64 " owner rows verified)", b->name, b->revision, b->written,
		 b->scanned_pass);
	keep_end(b, "enabled", NULL);
	adm_req_finish(b->req);
	gb_free(b);
}

/* Does the topology in force declare the GSI write-only (this call's revision or before)? */
static bool
write_only_now(const struct gb *b)
{
	return !b->was_disabled || b->step >= GB_ROUTERS;
}

static void
gb_end_error(struct gb *b)
{
	log_warn("gsi_build %s failed: %s", b->name, b->err.message);
	keep_end(b, b->step == GB_REVERT ? "failed, disabled again" :
		 write_only_now(b) ? "failed, write-only" : "failed", &b->err);
	adm_req_fail(b->req, &b->err);
	gb_free(b);
}

/* Fail with <err>; <revert>: a duplicate or a NULL, the GSI goes back to disabled. */
void
gb_fail(struct gb *b, const struct nk_error *err, bool revert)
{
	if (err != &b->err)
		b->err = *err;
	if (b->in_tx)
		pgc_query(b->oc[b->cur].c, "ROLLBACK", 0, NULL, NULL, NULL);
	b->in_tx = false;
	if (!revert || !write_only_now(b)) {
		if (b->err.hint[0] == '\0' && write_only_now(b))
			nk_error_hint(&b->err, "The index stays write-only (maintained, not read): "
				      "__neki.gsi_build('%s') resumes the build.", b->name);
		gb_end_error(b);
		return;
	}
	b->step = GB_REVERT;
	gb_next(b);
}

void
gb_oom(struct gb *b)
{
	struct nk_error err;

	nk_error_oom(&err);
	gb_fail(b, &err, false);
}

/* A query's error: fails the build (true). */
bool
gb_failed(struct gb *b, const struct nk_error *err, const char *uid)
{
	struct nk_error e;

	if (err == NULL)
		return false;
	e = *err;
	nk_error_detail(&e, "gsi_build of \"%s\", on shard \"%s\".", b->name, uid);
	gb_fail(b, &e, false);
	return true;
}

/* ---- revisions ---- */

static void gb_reply(struct gb *b);

static void
revision_done(void *arg, const struct nk_error *err)
{
	struct gb *b = arg;
	struct nk_error e;

	if (b->step == GB_REVERT) {
		if (err != NULL)
			log_warn("gsi_build %s: disabling the index again failed: %s", b->name,
				 err->message);
		gb_end_error(b);
		return;
	}
	if (err == NULL && rev_get()->revision == b->revision) {
		nk_error_set(&e, ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE, "the data topology "
			     "changed while __neki.gsi_build(\"%s\") ran", b->name);
		err = &e;
	}
	if (err != NULL) {
		gb_fail(b, err, false);
		return;
	}
	b->revision = rev_get()->revision;
	if (b->step == GB_ENABLE) {
		gb_reply(b);
		return;
	}
	b->step++;
	gb_next(b);
}

/* The topology in force as JSON, with the GSI <enabled> and <write_only>; NULL when it no
 * longer declares the GSI (*<found> false) or no memory. */
static char *
changed_topology(const struct gb *b, bool enabled, bool write_only, bool *found)
{
	const struct rev_current *cur = rev_get();
	struct topo_findings f;
	struct topo_model *m;
	char *json;

	topo_findings_init(&f);
	m = cur->json != NULL ? topo_parse(cur->json, strlen(cur->json), &f) : NULL;
	for (size_t d = 0; m != NULL && d < m->ndbs; d++)
		for (size_t g = 0; strcmp(m->dbs[d].name, b->db) == 0 && g < m->dbs[d].ngsis; g++)
			if (strcmp(m->dbs[d].gsis[g].name, b->name) == 0) {
				m->dbs[d].gsis[g].enabled = enabled;
				m->dbs[d].gsis[g].write_only = write_only;
				*found = true;
			}
	json = *found ? topo_to_json(m, false) : NULL;
	topo_model_free(m);
	topo_findings_cleanup(&f);
	return json;
}

/* The topology in force with the GSI <enabled> and <write_only>, stored as the next
 * revision (expected_revision: a change made meanwhile fails the build). */
static void
set_revision(struct gb *b, bool enabled, bool write_only)
{
	bool found = false;
	char *json = changed_topology(b, enabled, write_only, &found), *opts = NULL, num[64];
	size_t len = 0, cap = 0;
	struct adm_req *req = NULL;
	struct nk_error err;
	bool ok;

	b->revision = rev_get()->revision;
	snprintf(num, sizeof(num), ", \"expected_revision\": %" PRIu64 "}", b->revision);
	ok = json != NULL && adm_json_put_raw(&opts, &len, &cap, "{\"comment\": ") &&
	     adm_json_put_string(&opts, &len, &cap, !enabled ? "__neki.gsi_build: disabled again"
				 : write_only ? "__neki.gsi_build: write-only"
				 : "__neki.gsi_build: enabled") &&
	     adm_json_put_raw(&opts, &len, &cap, num) &&
	     (req = adm_req_internal(revision_done, b)) != NULL;
	if (ok)
		rev_set(req, json, true, opts);
	else if (!found)
		gb_fail(b, (nk_error_set(&err, ERRCODE_UNDEFINED_OBJECT, "global secondary index "
					 "\"%s\" is no longer declared", b->name), &err), false);
	else
		gb_oom(b);
	free(json);
	free(opts);
}

static void
routers_done(void *arg, const struct nk_error *err)
{
	struct gb *b = arg;

	if (err != NULL) {
		gb_fail(b, err, false);
		return;
	}
	b->step++;
	b->cur = 0;
	gb_next(b);
}

/* ---- GB_PREP ---- */

/* The primary-key columns of table $1, in order, with their types. */
#define PK_SQL "SELECT a.attname, t.typname FROM pg_index i CROSS JOIN LATERAL unnest(" \
	"i.indkey) WITH ORDINALITY AS k(attnum, n) JOIN pg_attribute a ON a.attrelid = " \
	"i.indrelid AND a.attnum = k.attnum JOIN pg_type t ON t.oid = a.atttypid WHERE " \
	"i.indrelid = $1::regclass AND i.indisprimary ORDER BY k.n"

static int
lc_find(const struct gb *b, const char *col)
{
	for (size_t k = 0; k < b->nlc; k++)
		if (strcmp(b->lc[k], col) == 0)
			return (int)k;
	return -1;
}

static void prep_lookup_cb(void *arg, const struct pgc_res *res, const struct nk_error *err);

/* The owner's column types; then the lookup's primary key (one query at a time: a failure
 * ends the build with nothing else in flight). */
static void
prep_types_cb(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	struct gb *b = arg;
	const char *lookup = b->lookup;
	struct nk_error e;

	if (gb_failed(b, err, b->oc[0].uid))
		return;
	for (size_t r = 0; r < pgc_res_rows(res); r++) {
		int k = lc_find(b, pgc_res_get(res, r, 0));

		if (k >= 0 && (b->lct[k] = strdup(pgc_res_get(res, r, 1))) == NULL) {
			gb_oom(b);
			return;
		}
	}
	for (size_t k = 0; k < b->nlc; k++)
		if (b->lct[k] == NULL) {
			nk_error_set(&e, ERRCODE_UNDEFINED_COLUMN, "column \"%s\" of relation %s "
				     "does not exist", b->lc[k], b->owner);
			gb_fail(b, &e, false);
			return;
		}
	pgc_query(b->lk[0].c, PK_SQL, 1, &lookup, prep_lookup_cb, b);
}

static void
prep_pk_cb(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	struct gb *b = arg;
	struct nk_error e;

	if (gb_failed(b, err, b->oc[0].uid))
		return;
	for (size_t r = 0; r < pgc_res_rows(res) && b->npk < GB_MAX_COLS; r++)
		if ((b->pk[b->npk++] = strdup(pgc_res_get(res, r, 0))) == NULL) {
			gb_oom(b);
			return;
		}
	if (b->npk == 0) {
		nk_error_set(&e, ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
			     "table %s has no primary key", b->owner);
		nk_error_detail(&e, "__neki.gsi_build reads the owner table in primary-key order.");
		nk_error_hint(&e, "Add a primary key to %s on every shard.", b->owner);
		gb_fail(b, &e, false);
	}
}

/* The lookup's key as the orphan scan reads it in order: its primary key (all of it in the
 * lookup row), else every column of the row. */
static bool
set_lookup_key(struct gb *b, const struct pgc_res *res)
{
	size_t n = pgc_res_rows(res);
	bool inside = n > 0 && n <= b->nlc;

	for (size_t r = 0; inside && r < n; r++)
		inside = lc_find(b, pgc_res_get(res, r, 0)) >= 0;
	b->nkey = inside ? n : b->nlc;
	for (size_t r = 0; r < b->nkey; r++) {
		b->lkpos[r] = inside ? (size_t)lc_find(b, pgc_res_get(res, r, 0)) : r;
		if ((b->lkey[r] = strdup(b->lc[b->lkpos[r]])) == NULL)
			return false;
	}
	return true;
}

/* The lookup's primary key: a unique GSI's must be its columns (V11); its shard key's
 * type (the indexed column it is sharded by is part of it). */
static void
prep_lookup_cb(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	struct gb *b = arg;
	size_t n = err == NULL ? pgc_res_rows(res) : 0, match = 0;
	bool typed = b->lindex == TOPO_IMG_NONE;
	struct nk_error e;

	if (gb_failed(b, err, b->lk[0].uid))
		return;
	for (size_t r = 0; r < n; r++) {
		int k = lc_find(b, pgc_res_get(res, r, 0));

		match += k >= 0 && (size_t)k < b->nidx;
		if (k >= 0 && (size_t)k == b->lkeycol && !typed)
			typed = ks_type_from_name(pgc_res_get(res, r, 1), &b->ltype);
	}
	if (b->unique && (match != b->nidx || n != b->nidx)) {
		nk_error_set(&e, ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE, "the primary key of %s "
			     "is not the columns of unique global secondary index \"%s\"",
			     b->lookup, b->name);
		nk_error_detail(&e, "It could not keep the values unique (V11).");
		gb_fail(b, &e, false);
		return;
	}
	if (!typed) {
		nk_error_set(&e, ERRCODE_FEATURE_NOT_SUPPORTED, "neki cannot route the lookup rows "
			     "of global secondary index \"%s\"", b->name);
		nk_error_detail(&e, "The shard key \"%s\" of %s is not in its primary key, or is "
				"of a type the router does not hash.", b->lc[b->lkeycol], b->lookup);
		gb_fail(b, &e, false);
		return;
	}
	if (!set_lookup_key(b, res)) {
		gb_oom(b);
		return;
	}
	b->step = b->was_disabled ? GB_TRUNCATE : GB_ROUTERS;
	gb_next(b);
}

static void
prep(struct gb *b)
{
	static const char *const types_sql =
		"SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute WHERE "
		"attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped";
	const char *owner = b->owner;

	pgc_query(b->oc[0].c, PK_SQL, 1, &owner, prep_pk_cb, b);
	pgc_query(b->oc[0].c, types_sql, 1, &owner, prep_types_cb, b);
}

/* ---- GB_TRUNCATE, GB_OLD_TX ---- */

static void
truncated_cb(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	struct gb_conn *c = arg;
	struct gb *b = c->b;

	if (gb_failed(b, err, c->uid) || --b->pending > 0)
		return;
	b->step++;
	gb_next(b);
}

static void
truncate_lookups(struct gb *b)
{
	char sql[512];

	snprintf(sql, sizeof(sql), "TRUNCATE %s", b->lookup);
	b->pending = b->nlk;
	for (size_t i = 0; i < b->nlk; i++)
		pgc_query(b->lk[i].c, sql, 0, NULL, truncated_cb, &b->lk[i]);
}

static void old_tx_poll(struct gb *b);

static void
old_tx_cb(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	struct gb *b = arg;
	struct timeval tv = { 0, GB_POLL_MS * 1000 };
	const char *n = err == NULL && pgc_res_rows(res) ? pgc_res_get(res, 0, 0) : NULL;
	struct nk_error e;

	if (gb_failed(b, err, b->oc[b->cur].uid))
		return;
	if (n != NULL && strcmp(n, "0") == 0) {
		b->cur++;
		gb_next(b);
	} else if (nk_now_ms() >= b->deadline_ms) {
		nk_error_set(&e, ERRCODE_QUERY_CANCELED, "timed out waiting for the transactions "
			     "begun before global secondary index \"%s\" was write-only", b->name);
		nk_error_detail(&e, "%s of them are still open on shard \"%s\" (pg_stat_activity "
				"or pg_prepared_xacts, begun before %s).", n ? n : "some",
				b->oc[b->cur].uid, b->since);
		gb_fail(b, &e, false);
	} else {
		evtimer_add(b->timer, &tv);
	}
}

static void
old_tx_poll(struct gb *b)
{
	static const char *const sql =
		"SELECT (SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
		" AND backend_type = 'client backend' AND pid <> pg_backend_pid() AND xact_start"
		" < $1::timestamptz) + (SELECT count(*) FROM pg_prepared_xacts WHERE database ="
		" current_database() AND prepared < $1::timestamptz)";
	const char *since = b->since;

	pgc_query(b->oc[b->cur].c, sql, 1, &since, old_tx_cb, b);
}

static void
since_cb(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	struct gb *b = arg;

	if (gb_failed(b, err, b->oc[b->cur].uid))
		return;
	snprintf(b->since, sizeof(b->since), "%s", pgc_res_get(res, 0, 0));
	old_tx_poll(b);
}

static void
old_tx(struct gb *b)
{
	if (b->cur == b->noc) {
		b->step++;
		b->cur = 0;
		gb_next(b);
		return;
	}
	if (b->cur == 0)
		b->deadline_ms = nk_now_ms() + (uint64_t)(b->timeout_s * 1000);
	pgc_query(b->oc[b->cur].c, "SELECT now()::text", 0, NULL, since_cb, b);
}

/* ---- steps ---- */

static void
timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct gb *b = arg;

	(void)fd;
	(void)what;
	if (b->step == GB_OLD_TX)
		old_tx_poll(b);
	else
		gb_recheck(b);
}

void
gb_next(struct gb *b)
{
	struct adm_req *req;

	switch (b->step) {
	case GB_PREP:
		prep(b);
		break;
	case GB_TRUNCATE:
		truncate_lookups(b);
		break;
	case GB_WRITE_ONLY:
		log_info("gsi_build %s: the lookup table is empty; the index becomes write-only",
			 b->name);
		set_revision(b, true, true);
		break;
	case GB_ROUTERS:
		if ((req = adm_req_internal(routers_done, b)) == NULL) {
			gb_oom(b);
			return;
		}
		follow_wait(req, rev_get()->revision, b->timeout_s);
		break;
	case GB_OLD_TX:
		old_tx(b);
		break;
	case GB_FILL:
		log_info("gsi_build %s: every router maintains it; filling", b->name);
		b->pass = 0;
		b->cur = 0;
		gb_rows_clear(&b->last);
		gb_fill_chunk(b);
		break;
	case GB_DUPS:
		gb_dups(b);
		break;
	case GB_ORPHANS:
		b->cur = 0;
		gb_rows_clear(&b->last);
		gb_orphan_chunk(b);
		break;
	case GB_RECHECK:
		gb_recheck(b);
		break;
	case GB_ENABLE:
		set_revision(b, true, false);
		break;
	case GB_REVERT:
		set_revision(b, false, false);
		break;
	}
}

/* ---- the call ---- */

static char *
qualified(const char *schema, const char *table)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = nk_memstream(&buf, &len);

	if (f == NULL)
		return NULL;
	sql_put_ident(f, schema);
	fputc('.', f);
	sql_put_ident(f, table);
	return gb_text_end(f, &buf);
}

static bool
add_lc(struct gb *b, const char *col, struct nk_error *err)
{
	if (lc_find(b, col) >= 0)
		return true;
	if (b->nlc == GB_MAX_COLS)
		return nk_error_set(err, ERRCODE_FEATURE_NOT_SUPPORTED, "global secondary index "
				    "\"%s\" has more than %d lookup columns", b->name,
				    GB_MAX_COLS);
	return (b->lc[b->nlc++] = strdup(col)) != NULL || nk_error_oom(err);
}

static bool
conns_of(struct gb *b, const void *img, uint32_t g, struct gb_conn **out, size_t *n,
	 struct nk_error *err)
{
	static const char *const settings =
		"SELECT set_config('TimeZone', 'UTC', false), set_config('DateStyle', 'ISO, YMD', "
		"false), set_config('extra_float_digits', '3', false), set_config('lock_timeout', "
		"'" GB_LOCK_TIMEOUT "', false)";
	size_t count = topo_image_group_shard_count(img, g);

	if ((*out = calloc(count, sizeof(**out))) == NULL)
		return nk_error_oom(err);
	for (*n = 0; *n < count; (*n)++) {
		struct gb_conn *c = &(*out)[*n];
		char *ci;

		c->b = b;
		c->idx = *n;
		snprintf(c->uid, sizeof(c->uid), "%s", topo_image_group_shard(img, g, (uint32_t)*n));
		if ((ci = catload_conninfo(c->uid, b->db, "neki-gsi-build")) == NULL ||
		    (c->c = pgc_new(gb_base, c->uid)) == NULL) {
			free(ci);
			return nk_error_oom(err);
		}
		pgc_set_conninfo(c->c, ci);
		free(ci);
		pgc_query(c->c, settings, 0, NULL, NULL, NULL);
	}
	return true;
}

/* The owner's and the lookup table's placement, the lookup row's columns, connections. */
static bool
resolve_tables(struct gb *b, const struct topo_gsi *gs, const char *schema, const void *img,
	       struct nk_error *err)
{
	struct topo_img_rel owner, lookup;
	const struct ks_expr *e;

	topo_image_resolve_table(img, b->db, schema, gs->owner_table, &owner);
	topo_image_resolve_table(img, b->db, schema, gs->table, &lookup);
	if (owner.kind != TOPO_REL_TABLE || lookup.kind != TOPO_REL_TABLE)
		return nk_error_set(err, ERRCODE_FEATURE_NOT_SUPPORTED, "__neki.gsi_build needs "
				    "the owner and the lookup table of \"%s\" to be sharded or "
				    "unsharded tables (not reference tables)", b->name);
	for (size_t k = 0; k < gs->columns.n; k++)
		if (!add_lc(b, gs->columns.v[k], err))
			return false;
	b->nidx = b->nlc;
	e = owner.index != TOPO_IMG_NONE ? topo_image_index_expr(img, owner.index) : NULL;
	for (size_t k = 0; gs->has_owner_sk && k < gs->owner_sk_columns.n; k++)
		if (!add_lc(b, gs->owner_sk_columns.v[k], err))
			return false;
	for (uint32_t k = 0; !gs->has_owner_sk && e != NULL && k < e->ncolumns; k++)
		if (!add_lc(b, e->columns[k], err))
			return false;
	for (size_t k = 0; !gs->unique && k < gs->owner_pk_columns.n; k++)
		if (!add_lc(b, gs->owner_pk_columns.v[k], err))
			return false;
	b->lgroup = lookup.group;
	b->lindex = lookup.index;
	e = lookup.index != TOPO_IMG_NONE ? topo_image_index_expr(img, lookup.index) : NULL;
	if (e != NULL && (e->ncolumns != 1 || lc_find(b, e->columns[0]) < 0))
		return nk_error_set(err, ERRCODE_FEATURE_NOT_SUPPORTED, "the lookup table of "
				    "\"%s\" is not sharded by one of its indexed columns", b->name);
	b->lkeycol = e != NULL ? (size_t)lc_find(b, e->columns[0]) : 0;
	return conns_of(b, img, owner.group, &b->oc, &b->noc, err) &&
	       conns_of(b, img, lookup.group, &b->lk, &b->nlk, err);
}

/* The GSI named <name> (in <db>, or the one database declaring it). */
static const struct topo_gsi *
find_gsi(struct gb *b, const struct topo_model *m, const char *db, struct nk_error *err)
{
	const struct topo_gsi *out = NULL;
	size_t n = 0;

	for (size_t d = 0; m != NULL && d < m->ndbs; d++)
		for (size_t g = 0; g < m->dbs[d].ngsis; g++)
			if ((db == NULL || strcmp(m->dbs[d].name, db) == 0) &&
			    strcmp(m->dbs[d].gsis[g].name, b->name) == 0 && n++ == 0) {
				out = &m->dbs[d].gsis[g];
				snprintf(b->db, sizeof(b->db), "%s", m->dbs[d].name);
			}
	if (n == 1)
		return out;
	if (n == 0)
		nk_error_set(err, ERRCODE_UNDEFINED_OBJECT, "global secondary index \"%s\" does not "
			     "exist", b->name);
	else
		nk_error_set(err, ERRCODE_INVALID_PARAMETER_VALUE, "global secondary index \"%s\" "
			     "is declared in %zu databases", b->name, n);
	if (n > 1)
		nk_error_hint(err, "Name the database: __neki.gsi_build('%s', database => ...).",
			      b->name);
	return NULL;
}

/* The schema holding the lookup table: the GSI's own, else the one listing it. */
static const char *
gsi_schema(const struct topo_model *m, const char *db, const struct topo_gsi *gs)
{
	const struct topo_database *d = topo_find_database(m, db);

	for (size_t s = 0; gs->schema == NULL && d != NULL && s < d->nschemas; s++)
		if (topo_find_table(&d->schemas[s], gs->table) != NULL)
			return d->schemas[s].name;
	return gs->schema;
}

static bool
gb_resolve(struct gb *b, const char *db, struct nk_error *err)
{
	const struct topo_model *m = rev_get()->model;
	const struct topo_gsi *gs = find_gsi(b, m, db, err);
	const char *schema = gs != NULL ? gsi_schema(m, b->db, gs) : NULL;
	struct shm_topo_ref ref;
	bool ok;

	if (gs == NULL)
		return false;
	if (gs->enabled && !gs->write_only) {
		nk_error_set(err, ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE, "global secondary index "
			     "\"%s\" is enabled already", b->name);
		nk_error_hint(err, "The router maintains an enabled index; to build it again, "
			      "declare it \"enabled\": false first.");
		return false;
	}
	if (schema == NULL)
		return nk_error_set(err, ERRCODE_UNDEFINED_TABLE, "no schema of database \"%s\" "
				    "lists the lookup table \"%s\"", b->db, gs->table);
	b->was_disabled = !gs->enabled;
	b->unique = gs->unique;
	b->ignore_null = gs->ignore_null;
	if ((b->owner = qualified(schema, gs->owner_table)) == NULL ||
	    (b->lookup = qualified(schema, gs->table)) == NULL)
		return nk_error_oom(err);
	if (!shm_topo_pin(&ref))
		return nk_error_set(err, ERRCODE_CONNECTION_EXCEPTION,
				    "no data topology is published");
	ok = resolve_tables(b, gs, schema, ref.data, err);
	shm_topo_unpin(&ref);
	return ok;
}

/* gsibuild_start: see gsibuild.h. */
void
gsibuild_start(struct adm_req *req, const char *name, const char *db, double timeout_s)
{
	struct nk_error err;
	struct gb *b;

	if (running != NULL) {
		nk_error_set(&err, ERRCODE_OBJECT_IN_USE, "global secondary index \"%s\" is being "
			     "built", running->name);
		nk_error_hint(&err, "One build runs at a time: call __neki.gsi_build again once "
			      "it has ended.");
		adm_req_fail(req, &err);
		return;
	}
	if ((b = calloc(1, sizeof(*b))) == NULL) {
		adm_req_fail(req, (nk_error_oom(&err), &err));
		return;
	}
	b->req = req;
	b->timeout_s = timeout_s;
	snprintf(b->name, sizeof(b->name), "%s", name);
	if (!gb_resolve(b, db, &err) ||
	    ((b->timer = evtimer_new(gb_base, timer_cb, b)) == NULL && nk_error_oom(&err))) {
		adm_req_fail(req, &err);
		gb_free(b);
		return;
	}
	running = b;
	b->started = time(NULL);
	log_info("gsi_build %s: started (%s)", b->name,
		 b->was_disabled ? "disabled" : "write-only: resumed");
	gb_next(b);
}

static void
put_time(char *buf, size_t len, time_t t)
{
	struct tm tm;

	buf[0] = '\0';
	if (t != 0 && gmtime_r(&t, &tm) != NULL)
		strftime(buf, len, "%Y-%m-%d %H:%M:%S+00", &tm);
}

/* The current shard of the running build's step. */
static const char *
step_shard(const struct gb *b)
{
	if (b->step == GB_OLD_TX || b->step == GB_FILL || b->step == GB_DUPS)
		return b->cur < b->noc ? b->oc[b->cur].uid : NULL;
	if (b->step == GB_ORPHANS)
		return b->cur < b->nlk ? b->lk[b->cur].uid : NULL;
	return NULL;
}

/* gsibuild_status: see gsibuild.h. */
void
gsibuild_status(struct adm_req *req)
{
	size_t ncols;
	const struct adm_col *cols = nekidesc_cols("gsi_build_status", &ncols);
	char n[3][24], t[2][40];
	const char *v[10];

	adm_result_columns(&req->res, cols, ncols);
	if (running != NULL) {
		snprintf(n[0], sizeof(n[0]), "%zu", running->pass + (running->step == GB_FILL));
		snprintf(n[1], sizeof(n[1]), "%" PRIu64, running->written);
		snprintf(n[2], sizeof(n[2]), "%" PRIu64, running->scanned_pass);
		put_time(t[0], sizeof(t[0]), running->started);
		v[0] = running->name, v[1] = running->db, v[2] = step_names[running->step];
		v[3] = step_shard(running), v[4] = n[0], v[5] = n[1], v[6] = n[2], v[7] = t[0];
		v[8] = NULL, v[9] = NULL;
		adm_result_row(&req->res, v);
	}
	if (last_build.set) {
		snprintf(n[0], sizeof(n[0]), "%zu", last_build.pass);
		snprintf(n[1], sizeof(n[1]), "%" PRIu64, last_build.written);
		snprintf(n[2], sizeof(n[2]), "%" PRIu64, last_build.scanned);
		put_time(t[0], sizeof(t[0]), last_build.started);
		put_time(t[1], sizeof(t[1]), last_build.ended);
		v[0] = last_build.name, v[1] = last_build.db, v[2] = last_build.state, v[3] = NULL;
		v[4] = n[0], v[5] = n[1], v[6] = n[2], v[7] = t[0], v[8] = t[1];
		v[9] = last_build.error[0] ? last_build.error : NULL;
		adm_result_row(&req->res, v);
	}
	adm_result_complete(&req->res, "SELECT", true);
	adm_req_finish(req);
}

/* gsibuild_init: see gsibuild.h. */
void
gsibuild_init(struct event_base *base)
{
	gb_base = base;
}
