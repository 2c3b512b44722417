/*
 * shardfn.c - the functions neki creates on every shard of the topology (issue 6, spec
 * 6.1): uuidv7() on servers that lack it (PostgreSQL before 18; the definition is the
 * router's seq_uuidv7_sql()). After each published topology revision, one statement on
 * every database of the topology on every shard of its groups (data-bearing and
 * schema-only), in turn over one pgc connection. The statement creates the function only
 * when no uuidv7() without arguments exists (so PostgreSQL 18's own and a user's are left
 * alone), under an advisory lock so several neki processes do not collide. A pair is done
 * once per connection string: a later revision runs the statement only on the pairs it adds
 * (or whose [shards] entry changed), so a revision that moves nothing costs the shards no
 * login (each pair was one more backend started per revision). A failure is a warning; the
 * next revision tries that pair again. Entry points: shardfn_init(),
 * shardfn_topology_changed().
 */
#include "neki/base.h"

#include "admin_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "neki/log.h"
#include "neki/sequence.h"
#include "neki/topology.h"

/* One round over every (shard, database) pair of a topology. */
struct shardfn_job {
	char **uids, **dbs;		/* owned: pair i is (uids[i], dbs[i]) */
	size_t n, next;
};

static struct event_base *sf_base;	/* borrowed */
static struct pgc *sf_conn;		/* owned */
static struct shardfn_job *sf_job;	/* owned: the round in flight, or NULL */
static bool sf_again;			/* start another round when this one ends */
static char *sf_sql;			/* owned: the statement */
static char **sf_done;			/* owned: conninfo of every pair it succeeded on */
static size_t sf_ndone, sf_capdone;

static void job_next(struct shardfn_job *j);

static void
job_free(struct shardfn_job *j)
{
	for (size_t i = 0; i < j->n; i++) {
		free(j->uids[i]);
		free(j->dbs[i]);
	}
	free(j->uids);
	free(j->dbs);
	free(j);
}

/* The statement: create uuidv7() unless one exists, under an advisory lock. */
static char *
build_sql(void)
{
	static const char fmt[] =
		"DO $neki_fn$ BEGIN PERFORM pg_catalog.pg_advisory_xact_lock(7357002);"
		" IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_proc WHERE proname = 'uuidv7'"
		" AND pronargs = 0) THEN EXECUTE $neki_q$%s$neki_q$; END IF; END $neki_fn$";
	size_t cap = sizeof(fmt) + strlen(seq_uuidv7_sql());
	char *s = malloc(cap);

	if (s != NULL)
		snprintf(s, cap, fmt, seq_uuidv7_sql());
	return s;
}

/* Has the statement succeeded over the connection string <ci>? */
static bool
done_has(const char *ci)
{
	for (size_t i = 0; i < sf_ndone; i++)
		if (strcmp(sf_done[i], ci) == 0)
			return true;
	return false;
}

/* Remember that it succeeded over <ci> (on no memory it runs again next time). */
static void
done_add(const char *ci)
{
	char *copy;

	if (sf_ndone == sf_capdone) {
		size_t cap = sf_capdone ? 2 * sf_capdone : 8;
		char **grown = realloc(sf_done, cap * sizeof(*grown));

		if (grown == NULL)
			return;
		sf_done = grown;
		sf_capdone = cap;
	}
	if ((copy = strdup(ci)) != NULL)
		sf_done[sf_ndone++] = copy;
}

static void
done_cb(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	struct shardfn_job *j = arg;

	(void)res;
	if (err != NULL)
		log_warn("could not create uuidv7() in database \"%s\" on shard \"%s\": %s",
			 j->dbs[j->next], j->uids[j->next], err->message);
	else
		done_add(pgc_conninfo(sf_conn));
	j->next++;
	job_next(j);
}

static void
job_next(struct shardfn_job *j)
{
	while (j->next < j->n) {
		char *ci = catload_conninfo(j->uids[j->next], j->dbs[j->next], "neki-setup");

		/* NULL: not declared in [shards], the topology rules report it */
		if (ci == NULL || done_has(ci)) {
			free(ci);
			j->next++;
			continue;
		}
		pgc_set_conninfo(sf_conn, ci);
		free(ci);
		pgc_query(sf_conn, sf_sql, 0, NULL, done_cb, j);
		return;
	}
	job_free(j);
	sf_job = NULL;
	if (sf_again) {
		sf_again = false;
		shardfn_topology_changed();
	}
}

static bool
add_pair(struct shardfn_job *j, const char *uid, const char *db)
{
	for (size_t i = 0; i < j->n; i++)
		if (strcmp(j->uids[i], uid) == 0 && strcmp(j->dbs[i], db) == 0)
			return true;
	j->uids[j->n] = strdup(uid);
	j->dbs[j->n] = strdup(db);
	if (j->uids[j->n] == NULL || j->dbs[j->n] == NULL) {
		free(j->uids[j->n]);
		free(j->dbs[j->n]);
		return false;
	}
	j->n++;
	return true;
}

/* Every (shard, database) pair of <m>; NULL on no memory. */
static struct shardfn_job *
job_new(const struct topo_model *m)
{
	struct shardfn_job *j = calloc(1, sizeof(*j));
	size_t cap = 1;

	for (size_t g = 0; g < m->ngroups; g++)
		cap += m->groups[g].nranges * (m->ndbs + 1);
	if (j == NULL || !(j->uids = calloc(cap, sizeof(char *))) ||
	    !(j->dbs = calloc(cap, sizeof(char *))))
		goto fail;
	for (size_t d = 0; d < m->ndbs; d++)
		for (size_t g = 0; g < m->ngroups; g++)
			for (size_t r = 0; r < m->groups[g].nranges; r++)
				if (m->groups[g].ranges[r].shard_uid &&
				    !add_pair(j, m->groups[g].ranges[r].shard_uid, m->dbs[d].name))
					goto fail;
	return j;
fail:
	if (j != NULL)
		job_free(j);
	return NULL;
}

/* shardfn_topology_changed: see admin_int.h. */
void
shardfn_topology_changed(void)
{
	const struct topo_model *m = rev_get()->model;

	if (sf_conn == NULL || sf_sql == NULL || m == NULL)
		return;
	if (sf_job != NULL) {
		sf_again = true;
		return;
	}
	sf_job = job_new(m);
	if (sf_job == NULL) {
		log_error("out of memory while creating neki's functions on the shards");
		return;
	}
	job_next(sf_job);
}

/* shardfn_init: see admin_int.h. */
void
shardfn_init(struct event_base *base)
{
	sf_base = base;
	sf_conn = pgc_new(base, "setup");
	sf_sql = build_sql();
	if (sf_conn == NULL || sf_sql == NULL)
		log_error("could not set up the creation of neki's functions on the shards");
	shardfn_topology_changed();
}
