/*
 * catload.c - the admin's side of the catalog (src/catalog): load it from the authoritative
 * shard for every database of the current topology, publish it into the shm catalog slots,
 * and apply the rules that need it (V4 at set_data_topology, V11 reported).
 *
 * A load runs cat_load_sql() once per database (those of the topology and the topology=yes
 * entries of [databases]) over one pgc connection (pointed at each database in turn),
 * builds each catalog with cat_build(), then publishes one image holding them all as the
 * next catalog version. A database whose load fails keeps the catalog it had (a warning is
 * logged); when this process has none of it but the published image has (a restarted admin
 * process, which goes on from the published version), nothing is published until a load
 * has it. Triggers: catload_init() (admin start), a published
 * topology revision (catload_topology_changed), and workers' refresh requests after DDL
 * (shm_cat_requested(), polled every CATLOAD_POLL_MS); a failed load is retried after
 * CATLOAD_RETRY_MS. Only one load runs at a time; a trigger during a load queues another.
 */
#include "neki/base.h"

#include "admin_int.h"
#include "catoids.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "neki/catalog.h"
#include "neki/catalog_image.h"
#include "neki/clock.h"
#include "neki/config.h"
#include "neki/log.h"
#include "neki/shm.h"
#include "neki/topology.h"

#define CATLOAD_POLL_MS 100
#define CATLOAD_RETRY_MS 5000

/* One load in progress. */
struct catload_job {
	struct catalog **cats;		/* owned: one per database (NULL: failed, keep the old) */
	char **dbs;			/* owned: the topology's database names */
	size_t n, next;			/* databases; the one being loaded */
	uint64_t requested;		/* shm_cat_requested() when the load started */
	uint64_t revision;		/* the topology revision whose databases it loads */
	uint64_t schema_version;	/* the cluster schema version it carries (ddlsync.c) */
	bool ddl;			/* it answers DDL through this host: the advisor runs */
	bool advised;			/* ... and has run (before the catalog is published) */
	bool failed;			/* some database failed: retry later */
};

/* Someone waiting for a load of a topology revision to end (catload_after_revision). */
struct catload_waiter {
	uint64_t revision;
	void (*cb)(void *arg);
	void *arg;
	struct catload_waiter *next;
};

static struct event_base *cl_base;	/* borrowed; NULL before catload_init */
static struct event *cl_poll;		/* owned: persistent poll timer */
static struct pgc *cl_conn;		/* owned: the catalog connection */
static struct catalog **cl_cats;	/* owned: the published catalogs */
static size_t cl_ncats;
static uint64_t cl_version;		/* last published catalog version */
static uint64_t cl_served;		/* refresh requests the published catalog includes */
static struct catload_job *cl_job;	/* owned: the load in flight, or NULL */
static bool cl_again;			/* load again once the current one ends */
static uint64_t cl_retry_at;		/* nk_now_ms() of the next retry; 0 = none */
static uint64_t cl_loaded_rev;		/* topology revision the last ended load read */
static struct catload_waiter *cl_waiters; /* owned */

static void job_next(struct catload_job *j);
static void job_advised(void *arg);

static void
job_free(struct catload_job *j)
{
	for (size_t i = 0; i < j->n; i++) {
		if (j->cats != NULL)
			cat_free(j->cats[i]);
		free(j->dbs[i]);
	}
	free(j->cats);
	free(j->dbs);
	free(j);
}

/* catload_conninfo: see admin_int.h. */
char *
catload_conninfo(const char *uid, const char *db, const char *app)
{
	const struct cfg_shard *s = cfg_shard_find(cfg_current(), uid);
	size_t cap;
	char *out;

	if (s == NULL)
		return NULL;
	cap = strlen(s->conninfo) + 2 * strlen(db) + strlen(app) + 64;
	out = malloc(cap);
	if (out == NULL)
		return NULL;
	snprintf(out, cap, "%s", s->conninfo);
	if (s->dbname == NULL) {
		strncat(out, " dbname=", cap - strlen(out) - 1);
		cfg_conninfo_put_quoted(out, cap, db);
	}
	strncat(out, " application_name=", cap - strlen(out) - 1);
	strncat(out, app, cap - strlen(out) - 1);
	return out;
}

/* The types of database j->dbs[j->next] are read too (catoids.c): the next database. */
static void
load_typed(void *arg)
{
	struct catload_job *j = arg;

	j->next++;
	job_next(j);
}

/* The rows of database j->dbs[j->next] arrived (or the query failed). */
static void
load_cb(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	struct catload_job *j = arg;
	const char *db = j->dbs[j->next];
	struct nk_error e;

	if (err != NULL) {
		log_warn("could not load the catalog of database \"%s\": %s", db, err->message);
		j->failed = true;
	} else {
		struct cat_rows rows = pgc_res_cat_rows(res);

		j->cats[j->next] = cat_build(db, &rows, &e);
		if (j->cats[j->next] == NULL) {
			log_warn("%s", e.message);
			j->failed = true;
		} else {
			catoids_load(cl_conn, rev_get()->model, rev_get()->auth_uid,
				     j->cats[j->next], j->schema_version, load_typed, j);
			return;
		}
	}
	j->next++;
	job_next(j);
}

/* The published catalog of <db>, taken out of cl_cats (NULL when none). */
static struct catalog *
take_old(const char *db)
{
	for (size_t i = 0; i < cl_ncats; i++) {
		if (cl_cats[i] && strcmp(cl_cats[i]->dbname, db) == 0) {
			struct catalog *c = cl_cats[i];

			cl_cats[i] = NULL;
			return c;
		}
	}
	return NULL;
}

/* Log what the rules that need the catalog say of the current topology. */
static void
report_rules(void)
{
	const struct topo_model *m = rev_get()->model;
	struct topo_findings rej, dis;

	if (m == NULL)
		return;
	topo_findings_init(&rej);
	topo_findings_init(&dis);
	for (size_t i = 0; i < cl_ncats; i++)
		cat_check_topology(cl_cats[i], m, &rej, &dis);
	for (size_t i = 0; i < rej.n; i++)
		log_warn("data topology: %s: %s", rej.v[i].path, rej.v[i].message);
	for (size_t i = 0; i < dis.n; i++)
		log_warn("data topology: %s: %s", dis.v[i].path, dis.v[i].message);
	topo_findings_cleanup(&rej);
	topo_findings_cleanup(&dis);
}

/* Build the image of cl_cats into a free slot and publish it as the next version. */
static bool
publish(uint64_t served, uint64_t schema_version)
{
	unsigned slot;
	ssize_t len;

	if (!shm_cat_claim(&slot)) {
		log_error("no free catalog image slot to publish catalog version %" PRIu64,
			  cl_version + 1);
		return false;
	}
	len = cat_image_build((const struct catalog *const *)cl_cats, cl_ncats, cl_version + 1,
			      shm_cat_data(slot), shm_cat_capacity());
	if (len < 0) {
		shm_cat_abandon(slot);
		log_error("the catalog needs %zu bytes of shm, the image slots hold %zu (raise "
			  "shm_size)", cat_image_size((const struct catalog *const *)cl_cats,
						      cl_ncats), shm_cat_capacity());
		return false;
	}
	cl_version++;
	cl_served = served;
	if (schema_version > shm_schema_version())
		shm_schema_version_set(schema_version);	/* (seen with served: before it) */
	shm_cat_publish(slot, cl_version, served, (size_t)len);
	follow_announce();	/* (the registry's schema_version: what wait_for_ddl reads) */
	log_info("published catalog version %" PRIu64 " (%zu database%s)", cl_version, cl_ncats,
		 cl_ncats == 1 ? "" : "s");
	return true;
}

/* Do we hold a catalog of <db> (loaded by this process)? */
static bool
has_old(const char *db)
{
	for (size_t i = 0; i < cl_ncats; i++)
		if (cl_cats[i] && strcmp(cl_cats[i]->dbname, db) == 0)
			return true;
	return false;
}

/*
 * Would publishing <j> drop a database the published image has? That is one whose load
 * failed while this process holds no catalog of it (a restarted admin process: the image in
 * shm is its predecessor's); the image stays then, until a load has it.
 */
static bool
job_would_drop(const struct catload_job *j)
{
	struct cat_view v;
	bool drop = false;

	for (size_t i = 0; i < j->n && !drop; i++) {
		if (j->cats[i] != NULL || has_old(j->dbs[i]))
			continue;
		cat_view_acquire(&v, j->dbs[i]);
		drop = v.db != CAT_IMG_NONE;
		cat_view_release(&v);
	}
	return drop;
}

/* Every database is loaded: swap the catalogs in, publish, report. */
static void
job_finish(struct catload_job *j)
{
	struct catalog **old = cl_cats;
	size_t nold = cl_ncats, n = 0;

	if (job_would_drop(j)) {
		log_warn("keeping catalog version %" PRIu64 " until every database it holds is "
			 "loaded again", cl_version);
		cl_retry_at = nk_now_ms() + CATLOAD_RETRY_MS;
		return;		/* (the job's catalogs are freed with it) */
	}
	for (size_t i = 0; i < j->n; i++) {
		if (j->cats[i] == NULL)
			j->cats[i] = take_old(j->dbs[i]);
		if (j->cats[i] != NULL)
			j->cats[n++] = j->cats[i];
	}
	cl_cats = j->cats;	/* the catalogs move to cl_cats */
	cl_ncats = n;
	j->cats = NULL;
	for (size_t i = 0; i < nold; i++)
		cat_free(old[i]);
	free(old);
	cl_retry_at = j->failed ? nk_now_ms() + CATLOAD_RETRY_MS : 0;
	if (!publish(j->requested, j->schema_version))
		cl_retry_at = nk_now_ms() + CATLOAD_RETRY_MS;
	report_rules();
}

/* Call the waiters whose revision a load has now read (each once, then forgotten). */
static void
wake_waiters(void)
{
	struct catload_waiter **pp = &cl_waiters;

	while (*pp != NULL) {
		struct catload_waiter *w = *pp;

		if (w->revision > cl_loaded_rev) {
			pp = &w->next;
			continue;
		}
		*pp = w->next;
		w->cb(w->arg);
		free(w);
		pp = &cl_waiters;	/* (a callback may have added or forgotten some) */
	}
}

/* catload_after_revision: see admin_int.h. */
bool
catload_after_revision(uint64_t revision, void (*cb)(void *arg), void *arg)
{
	struct catload_waiter *w;

	if (revision <= cl_loaded_rev || cl_base == NULL || (w = calloc(1, sizeof(*w))) == NULL)
		return false;
	w->revision = revision;
	w->cb = cb;
	w->arg = arg;
	w->next = cl_waiters;
	cl_waiters = w;
	return true;
}

/* catload_forget: see admin_int.h. */
void
catload_forget(void *arg)
{
	for (struct catload_waiter **pp = &cl_waiters; *pp != NULL; pp = &(*pp)->next) {
		struct catload_waiter *w = *pp;

		if (w->arg == arg) {
			*pp = w->next;
			free(w);
			return;
		}
	}
}

/* Load the next database of <j>, or finish. */
static void
job_next(struct catload_job *j)
{
	const char *auth = rev_get()->auth_uid;
	char *ci;

	while (j->next < j->n) {
		ci = auth[0] ? catload_conninfo(auth, j->dbs[j->next], "neki-catalog") : NULL;
		if (ci != NULL) {
			pgc_set_conninfo(cl_conn, ci);
			free(ci);
			pgc_query(cl_conn, cat_load_sql(), 0, NULL, load_cb, j);
			return;
		}
		log_warn("cannot load the catalog of database \"%s\": the authoritative shard "
			 "\"%s\" is not declared in [shards]", j->dbs[j->next], auth);
		j->failed = true;
		j->next++;
	}
	if (j->ddl && !j->advised) {	/* (the DDL's session sends its findings) */
		j->advised = true;
		advisor_after_ddl(j->schema_version, job_advised, j);
		return;
	}
	job_finish(j);
	if (j->revision > cl_loaded_rev)
		cl_loaded_rev = j->revision;
	job_free(j);	/* (its catalogs moved to cl_cats, unless job_finish kept the image) */
	cl_job = NULL;
	wake_waiters();
	if (cl_again) {
		cl_again = false;
		catload_refresh();
	}
}

/* Add database <name> to <j> unless it is there; false on no memory. */
static bool
job_add_db(struct catload_job *j, const char *name)
{
	for (size_t i = 0; i < j->n; i++)
		if (strcmp(j->dbs[i], name) == 0)
			return true;
	if ((j->dbs[j->n] = strdup(name)) == NULL)
		return false;
	j->n++;
	return true;
}

/*
 * A new job for the databases of the current topology and, when there is one, the
 * [databases] entries with topology=yes (sharded too: their sessions wait for their
 * catalog); NULL on no memory.
 */
static struct catload_job *
job_new(void)
{
	const struct topo_model *m = rev_get()->model;
	const struct cfg *c = cfg_current();
	size_t n = m ? m->ndbs + c->n_databases : 0;
	struct catload_job *j = calloc(1, sizeof(*j));

	if (j == NULL)
		return NULL;
	j->cats = calloc(n + 1, sizeof(*j->cats));
	j->dbs = calloc(n + 1, sizeof(*j->dbs));
	if (j->cats == NULL || j->dbs == NULL)
		goto fail;
	for (size_t i = 0; m != NULL && i < m->ndbs; i++)
		if (!job_add_db(j, m->dbs[i].name))
			goto fail;
	for (size_t i = 0; m != NULL && i < c->n_databases; i++)
		if (c->databases[i].topology && strcmp(c->databases[i].name, "*") != 0 &&
		    !job_add_db(j, c->databases[i].name))
			goto fail;
	j->requested = shm_cat_requested();
	j->revision = rev_get()->revision;
	return j;
fail:
	job_free(j);
	return NULL;
}

/* The advisor ran after the DDL: publish. */
static void
job_advised(void *arg)
{
	job_next(arg);
}

/* The version the job carries is known: load. */
static void
job_versioned(void *arg, uint64_t version)
{
	struct catload_job *j = arg;

	j->schema_version = version;
	job_next(j);
}

/* catload_refresh: see admin_int.h. */
void
catload_refresh(void)
{
	if (cl_base == NULL)
		return;		/* catload_init loads anyway */
	if (cl_job != NULL) {
		cl_again = true;
		return;
	}
	cl_job = job_new();
	if (cl_job == NULL) {
		log_error("out of memory while starting a catalog load");
		cl_retry_at = nk_now_ms() + CATLOAD_RETRY_MS;
		return;
	}
	/* answering DDL through this host (its workers asked): a new cluster schema version */
	cl_job->ddl = cl_job->requested > cl_served;
	ddlsync_version(cl_job->ddl, job_versioned, cl_job);
}

void
catload_topology_changed(void)
{
	catload_refresh();
}

/*
 * Every CATLOAD_POLL_MS: refresh requests from workers, and retries. After a failed load or
 * publication, requests wait for the retry too, so a shard that is down is not asked again
 * every poll.
 */
static void
poll_cb(evutil_socket_t fd, short what, void *arg)
{
	uint64_t requested = shm_cat_requested();

	if (cl_retry_at != 0) {
		if (nk_now_ms() < cl_retry_at || cl_job != NULL)
			return;
		cl_retry_at = 0;
		catload_refresh();
		return;
	}
	if (requested > cl_served && (cl_job == NULL || cl_job->requested < requested))
		catload_refresh();
}

void
catload_init(struct event_base *base)
{
	struct timeval tv = { 0, CATLOAD_POLL_MS * 1000 };

	cl_base = base;
	cl_version = shm_cat_version();	/* a restarted admin goes on from the published one */
	cl_served = shm_cat_served();
	cl_conn = pgc_new(base, "catalog");
	cl_poll = event_new(base, -1, EV_PERSIST, poll_cb, NULL);
	if (cl_conn == NULL || cl_poll == NULL || event_add(cl_poll, &tv) == -1)
		log_error("could not set up catalog loading");
	catload_refresh();
}

/* Add the findings of <m> against every loaded catalog: V4 to <rej>, V11 to <dis>. */
static void
check_all(const struct topo_model *m, struct topo_findings *rej, struct topo_findings *dis)
{
	for (size_t i = 0; i < cl_ncats; i++)
		cat_check_topology(cl_cats[i], m, rej, dis);
}

/* Copy every finding of <from> into <to>, keeping the preexisting mark. */
static void
copy_findings(struct topo_findings *to, const struct topo_findings *from)
{
	for (size_t i = 0; i < from->n; i++) {
		const struct topo_finding *fi = &from->v[i];
		size_t before = to->n;

		topo_findings_add(to, fi->path, fi->rule, fi->sqlstate, fi->forceable, "%s",
				  fi->message);
		if (to->n > before)
			to->v[to->n - 1].preexisting = fi->preexisting;
	}
}

/* catload_check: see admin_int.h. */
bool
catload_check(const struct topo_model *m, const struct topo_model *previous,
	      struct topo_findings *f, struct nk_error *err)
{
	struct topo_findings now, before, dis;
	const struct topo_finding *b;
	bool ok = true;

	topo_findings_init(&now);
	topo_findings_init(&before);
	topo_findings_init(&dis);
	check_all(m, &now, &dis);
	if (previous != NULL)
		check_all(previous, &before, &dis);
	topo_findings_mark_preexisting(&now, &before);
	copy_findings(f, &now);
	b = topo_findings_first_blocking(&now, false);
	if (b != NULL)
		ok = topo_finding_to_error(b, err);
	topo_findings_cleanup(&now);
	topo_findings_cleanup(&before);
	topo_findings_cleanup(&dis);
	return ok;
}

void
catload_add_findings(const struct topo_model *m, struct topo_findings *f)
{
	check_all(m, f, f);
}

uint64_t
catload_version(void)
{
	return cl_version;
}
