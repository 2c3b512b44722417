/*
 * catcheck.c - the topology rules that need the shards' catalog, checked by
 * set_data_topology before anything is stored: for every database of the new topology, the
 * catalog is read from the authoritative shard (cat_load_sql, one round trip per database, over
 * one connection kept between calls: a login per call cost the shard a backend start at every
 * revision) and cat_check_topology() reports V4 (a shard key whose column
 * type no routing rule accepts: the set fails) and V11 (unique GSIs that will be disabled:
 * logged). A database the shard does not have yet has no tables to check.
 * Entry point: catcheck_run().
 */
#include "neki/base.h"

#include "admin_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "neki/catalog.h"
#include "neki/config.h"
#include "neki/log.h"
#include "neki/topology.h"
#include "neki/proc.h"

struct catcheck {
	const struct topo_model *m;	/* borrowed: the job keeps it alive */
	char auth_uid[ADM_NAME_MAX];
	bool force;
	size_t next_db;			/* index in m->dbs of the database being read */
	catcheck_done_fn done;
	void *arg;			/* borrowed: the caller's */
};

static struct pgc *cc_conn;		/* owned: the connection of the checks, kept */
static char cc_conn_uid[ADM_NAME_MAX];	/* the shard it is named after */

static void catcheck_next(struct catcheck *cc);

/* End the check with <err> (NULL: passed). */
static void
catcheck_end(struct catcheck *cc, const struct nk_error *err)
{
	cc->done(cc->arg, err);
	free(cc);
}

/* Check the catalog <c> of one database against the topology. False with <err>: V4. */
static bool
check_one(struct catcheck *cc, const struct catalog *c, struct nk_error *err)
{
	struct topo_findings reject, disabled;
	const struct topo_finding *block;
	bool ok = true;

	topo_findings_init(&reject);
	topo_findings_init(&disabled);
	cat_check_topology(c, cc->m, &reject, &disabled);
	for (size_t i = 0; i < disabled.n; i++)
		log_warn("data topology: %s: %s (the GSI is disabled)", disabled.v[i].path,
			 disabled.v[i].message);
	block = topo_findings_first_blocking(&reject, cc->force);
	if (block != NULL)
		ok = topo_finding_to_error(block, err);
	topo_findings_cleanup(&reject);
	topo_findings_cleanup(&disabled);
	return ok;
}

static void
loaded_cb(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	struct catcheck *cc = arg;
	const char *db = cc->m->dbs[cc->next_db].name;
	struct cat_rows rows = pgc_res_cat_rows(res);
	struct nk_error e;
	struct catalog *c;

	cc->next_db++;
	if (err != NULL) {
		/* no such database yet */
		if (strcmp(err->sqlstate, ERRCODE_INVALID_CATALOG_NAME) == 0) {
			catcheck_next(cc);
			return;
		}
		catcheck_end(cc, err);
		return;
	}
	c = cat_build(db, &rows, &e);
	if (c == NULL || !check_one(cc, c, &e)) {
		cat_free(c);
		catcheck_end(cc, &e);
		return;
	}
	cat_free(c);
	catcheck_next(cc);
}

/* The connection of the checks, named after the authoritative shard <uid>; NULL on no memory.
 * (Set_data_topology runs one at a time, so one connection serves every check.) */
static struct pgc *
catcheck_conn(const char *uid)
{
	if (cc_conn != NULL && strcmp(cc_conn_uid, uid) != 0) {
		pgc_free_later(cc_conn);
		cc_conn = NULL;
	}
	if (cc_conn == NULL && (cc_conn = pgc_new(child_base(), uid)) != NULL)
		snprintf(cc_conn_uid, sizeof(cc_conn_uid), "%s", uid);
	return cc_conn;
}

/* Read the catalog of the next database, or finish. */
static void
catcheck_next(struct catcheck *cc)
{
	const struct cfg_shard *s = cfg_shard_find(cfg_current(), cc->auth_uid);
	struct nk_error err;
	struct pgc *pgc;
	char *conninfo;

	if (cc->next_db >= cc->m->ndbs) {
		catcheck_end(cc, NULL);
		return;
	}
	if (s == NULL) {
		nk_error_set(&err, ERRCODE_UNDEFINED_OBJECT,
			     "the authoritative shard \"%s\" is not declared in [shards]",
			     cc->auth_uid);
		catcheck_end(cc, &err);
		return;
	}
	/* a shard whose string names a dbname always uses it */
	if (asprintf(&conninfo, "%s%s%s application_name=neki-admin", s->conninfo,
		     s->dbname ? "" : " dbname=", s->dbname ? "" : cc->m->dbs[cc->next_db].name) == -1 ||
	    (pgc = catcheck_conn(cc->auth_uid)) == NULL) {
		nk_error_oom(&err);
		catcheck_end(cc, &err);
		return;
	}
	pgc_set_conninfo(pgc, conninfo);
	free(conninfo);
	pgc_query(pgc, cat_load_sql(), 0, NULL, loaded_cb, cc);
}

void
catcheck_run(const struct topo_model *m, const char *auth_uid, bool force, catcheck_done_fn done,
	     void *arg)
{
	struct catcheck *cc = calloc(1, sizeof(*cc));
	struct nk_error err;

	if (cc == NULL) {
		nk_error_oom(&err);
		done(arg, &err);
		return;
	}
	cc->m = m;
	snprintf(cc->auth_uid, sizeof(cc->auth_uid), "%s", auth_uid);
	cc->force = force;
	cc->done = done;
	cc->arg = arg;
	catcheck_next(cc);
}
