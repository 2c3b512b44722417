/*
 * revision.c - topology revisions in the admin process: what this router serves, the cache
 * file, publication into shared memory, and __neki.set_data_topology's store transaction.
 *
 * A set runs, one at a time (later calls queue behind it), as:
 *   check options and overwrite -> validate against the current revision (topo_check)
 *   -> on the authoritative shard: ensure the schema, BEGIN, LOCK the log, read the newest
 *      stored revision; expected_revision mismatch -> ROLLBACK, row (false, 0); a newer stored
 *      revision than ours -> validate again against it
 *   -> INSERT revision N+1 with NOTIFY neki_topology -> COMMIT
 *   -> cache file (temp + fsync + rename) -> publish into shm -> reply (true, N+1).
 * The log is written before anything is published, so a crash in between loses nothing: at
 * boot follow.c publishes the highest stored revision; a restarted admin process keeps the
 * revision shm holds (adopt_published). Entry points: rev_init(), rev_get(),
 * rev_install(), rev_set(), rev_list_revisions(), rev_store_first().
 */
#include "neki/base.h"

#include "admin_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>

#include "neki/config.h"
#include "neki/log.h"
#include "neki/shm.h"
#include "neki/topology.h"
#include "neki/topology_image.h"

/*
 * Schema of the durable store; run in one transaction under an advisory lock. The store
 * belongs to the [shards] login role of the authoritative shard and is granted to nobody
 * (doc/topology.md, "The __neki store and roles"): a schema someone else created first is
 * refused rather than used.
 */
static const char store_ddl[] =
	"BEGIN; SELECT pg_advisory_xact_lock(7357001);"
	" CREATE SCHEMA IF NOT EXISTS __neki AUTHORIZATION CURRENT_USER;"
	" DO $neki$ BEGIN IF (SELECT nspowner FROM pg_catalog.pg_namespace"
	"   WHERE nspname = '__neki') <> (SELECT oid FROM pg_catalog.pg_roles"
	"   WHERE rolname = current_user) THEN RAISE EXCEPTION 'schema __neki is not owned by"
	" role %', current_user USING ERRCODE = '42501', HINT = 'Drop it, or let neki''s"
	" [shards] login role own it: neki stores its topology there.'; END IF; END $neki$;"
	" CREATE TABLE IF NOT EXISTS __neki.data_topology_log ("
	"   revision bigint PRIMARY KEY, topology text NOT NULL,"
	"   created_at timestamptz NOT NULL DEFAULT now(), comment text, created_by text,"
	"   suppressed_findings text);"
	" CREATE TABLE IF NOT EXISTS __neki.routers ("
	"   host_id text PRIMARY KEY, revision bigint NOT NULL,"
	"   heartbeat timestamptz NOT NULL DEFAULT now(), started_at timestamptz NOT NULL"
	"   DEFAULT now());"
	" ALTER TABLE __neki.routers ADD COLUMN IF NOT EXISTS schema_version bigint NOT NULL"
	"   DEFAULT 0;"
	" CREATE TABLE IF NOT EXISTS __neki.cluster_state ("
	"   id int PRIMARY KEY CHECK (id = 1), schema_version bigint NOT NULL,"
	"   seq_epoch bigint NOT NULL);"
	" INSERT INTO __neki.cluster_state VALUES (1, 0, 0) ON CONFLICT (id) DO NOTHING;"
	" ALTER TABLE __neki.cluster_state ADD COLUMN IF NOT EXISTS activity_epoch bigint"
	"   NOT NULL DEFAULT 0;"
	" CREATE TABLE IF NOT EXISTS __neki.activity (host_id text PRIMARY KEY,"
	"   epoch bigint NOT NULL, sessions text NOT NULL);"
	" CREATE TABLE IF NOT EXISTS __neki.router_epochs (host_id text, epoch bigint,"
	"   started_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (host_id, epoch));"
	" REVOKE ALL ON SCHEMA __neki FROM PUBLIC;"
	" REVOKE ALL ON ALL TABLES IN SCHEMA __neki FROM PUBLIC;"
	" COMMIT";

#define REV_CATALOG_WAIT_S 5	/* set_data_topology waits this long for the catalog */

/* One set_data_topology in progress. */
struct set_job {
	struct adm_req *req;		/* borrowed until finished; NULL for rev_store_first */
	char *json;			/* owned: canonical text of the new document */
	struct topo_model *model;	/* owned: the new document */
	struct topo_findings findings;	/* owned: every finding of the last validation */
	char *comment;			/* owned; NULL when none */
	bool overwrite, force;
	bool has_expected;
	uint64_t expected;
	uint64_t stored;		/* newest stored revision (read in the transaction) */
	uint64_t new_revision;
	struct event *cat_timer;	/* owned: the bound on waiting for its catalog */
	struct set_job *next;
};

static struct rev_current cur;		/* what this router serves */
static struct event_base *rev_base;	/* borrowed */
static struct pgc *writer;		/* owned: the store transactions */
static struct set_job *queue_head, *queue_tail; /* owned; head is running */

static void set_run_next(void);

const char *
rev_store_ddl(void)
{
	return store_ddl;
}

const struct rev_current *
rev_get(void)
{
	return &cur;
}

/* The uid of the shard holding the authoritative group of <m>, or NULL. */
static const char *
authority_of(const struct topo_model *m)
{
	const struct topo_shard_group *g;

	if (m == NULL || m->authoritative_shard_group == NULL)
		return NULL;
	g = topo_find_group(m, m->authoritative_shard_group);
	if (g == NULL || g->nranges == 0)
		return NULL;
	return g->ranges[0].shard_uid;
}

/* The shard uids declared in [shards] (borrowed from the config). */
static size_t
declared_shards(const char **out, size_t max)
{
	const struct cfg *c = cfg_current();
	size_t n = 0;

	for (size_t i = 0; i < c->n_shards && n < max; i++)
		out[n++] = c->shards[i].uid;
	return n;
}

/* ---- publication ---- */

/* Tell every live worker a revision was published (they switch at once when idle). */
static void
nudge_workers(void)
{
	const struct shm_msg m = { .cmd = SHM_CMD_TOPOLOGY };

	for (unsigned i = 0; i < shm_n_procs(); i++) {
		struct shm_proc *p = shm_proc(i);

		if (atomic_load(&p->kind) == SHM_PROC_WORKER && atomic_load(&p->pid) != 0 &&
		    shm_mbox_post(i, &m) == 0)
			log_debug("mailbox of process %u is full; it switches at its next tick", i);
	}
}

/* Build the image of <m> as <revision> into a free shm slot and publish it. */
static bool
publish(uint64_t revision, const struct topo_model *m)
{
	unsigned slot;
	ssize_t len;

	if (!shm_topo_claim(&slot)) {
		log_error("no free topology image slot to publish revision %" PRIu64, revision);
		return false;
	}
	len = topo_image_build(m, revision, shm_topo_data(slot), shm_topo_capacity());
	if (len < 0) {
		shm_topo_abandon(slot);
		log_error("topology revision %" PRIu64 " needs %zu bytes of shm, the image slots hold"
			  " %zu (raise shm_size)", revision, topo_image_size(m), shm_topo_capacity());
		return false;
	}
	shm_topo_publish(slot, revision, (size_t)len);
	if (shm_self() >= 0)
		atomic_store(&shm_proc((unsigned)shm_self())->revision_seen, revision);
	nudge_workers();
	log_info("published data topology revision %" PRIu64, revision);
	return true;
}

/* ---- the cache file ---- */

/* Write <data> to <path> atomically: temp file, fsync, rename, fsync of the directory. */
static bool
write_atomic(const char *path, const char *data, size_t len)
{
	char tmp[4096], dir[4096];
	int fd, dfd;
	bool ok;

	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd == -1)
		return false;
	ok = write(fd, data, len) == (ssize_t)len && fsync(fd) == 0;
	ok = close(fd) == 0 && ok;
	if (!ok || rename(tmp, path) == -1) {
		unlink(tmp);
		return false;
	}
	snprintf(dir, sizeof(dir), "%s", path);
	dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd != -1) {
		fsync(dfd);
		close(dfd);
	}
	return true;
}

/* Write the cache file: {"neki_topology_cache": 1, "revision": N, "topology": "<json>"}. */
static void
cache_write(uint64_t revision, const char *json)
{
	const char *path = cfg_current()->neki.topology_file;
	char head[128];
	char *buf = NULL;
	size_t len = 0, cap = 0;

	if (path == NULL || path[0] == '\0')
		return;
	snprintf(head, sizeof(head), "{\"neki_topology_cache\": 1, \"revision\": %" PRIu64
		 ", \"topology\": ", revision);
	if (!adm_json_put_raw(&buf, &len, &cap, head) ||
	    !adm_json_put_string(&buf, &len, &cap, json) ||
	    !adm_json_put_raw(&buf, &len, &cap, "}\n")) {
		log_error("out of memory writing the topology cache file");
	} else if (!write_atomic(path, buf, len)) {
		log_error("could not write the topology cache file \"%s\": %s", path,
			  strerror(errno));
	}
	free(buf);
}

/* Read the whole file <path>; NULL when it cannot be read. */
static char *
read_file(const char *path)
{
	FILE *fp = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (fp == NULL)
		return NULL;
	if (fseek(fp, 0, SEEK_END) == 0 && (n = ftell(fp)) >= 0 && fseek(fp, 0, SEEK_SET) == 0 &&
	    (buf = malloc((size_t)n + 1)) != NULL) {
		if (fread(buf, 1, (size_t)n, fp) == (size_t)n) {
			buf[n] = '\0';
		} else {
			free(buf);
			buf = NULL;
		}
	}
	fclose(fp);
	return buf;
}

/*
 * Make <json> revision <revision> the one this router serves: written to the cache file
 * when <cache>, published into shm when <publish_it> (not when shm holds it already).
 */
static bool
install(uint64_t revision, const char *json, bool cache, bool publish_it)
{
	struct topo_findings f;
	struct topo_model *m;
	char *copy = strdup(json);
	const char *auth;

	topo_findings_init(&f);
	m = topo_parse(json, strlen(json), &f);
	if (m != NULL) {	/* stored revisions were validated when set: findings are ignored */
		const char *uids[256];
		struct topo_validate_input in = { .shard_uids = uids, .previous = NULL };

		in.nshards = declared_shards(uids, NK_ARRAY_LEN(uids));
		topo_validate(m, &in, &f);
	}
	topo_findings_cleanup(&f);
	if (m == NULL || copy == NULL) {
		log_error("could not load data topology revision %" PRIu64, revision);
		topo_model_free(m);
		free(copy);
		return false;
	}
	if (cache)
		cache_write(revision, json);
	if (publish_it && !publish(revision, m)) {
		topo_model_free(m);
		free(copy);
		return false;
	}
	topo_model_free(cur.model);
	free(cur.json);
	cur.model = m;
	cur.json = copy;
	cur.revision = revision;
	auth = authority_of(m);
	snprintf(cur.auth_uid, sizeof(cur.auth_uid), "%s", auth ? auth : "");
	follow_set_authority(cur.auth_uid);
	follow_announce();
	catload_topology_changed();
	shardfn_topology_changed();
	return true;
}

bool
rev_install(uint64_t revision, const char *json, bool cache)
{
	return install(revision, json, cache, true);
}

/*
 * A restarted admin process (the master keeps the segment) serves the revision already
 * published, without publishing it again: it never starts with no topology while the
 * workers route by one.
 */
static void
adopt_published(void)
{
	struct shm_topo_ref ref;
	const char *json;
	size_t len;

	if (shm_topo_revision() == 0 || !shm_topo_pin(&ref))
		return;
	if (topo_image_is_valid(ref.data, ref.len) &&
	    (json = topo_image_json(ref.data, &len)) != NULL &&
	    install(ref.revision, json, false, false))
		log_info("kept data topology revision %" PRIu64 " from shared memory",
			 ref.revision);
	shm_topo_unpin(&ref);
}

/* Boot: the cache file holds a cached revision or a hand-written first topology. */
static void
load_topology_file(void)
{
	const char *path = cfg_current()->neki.topology_file;
	struct adm_json_obj obj;
	const struct adm_json_member *rev, *doc;
	struct nk_error err;
	char *text;

	if (path == NULL || path[0] == '\0' || (text = read_file(path)) == NULL)
		return;
	if (adm_json_parse(text, &obj, &err) && adm_json_get(&obj, "neki_topology_cache")) {
		rev = adm_json_get(&obj, "revision");
		doc = adm_json_get(&obj, "topology");
		if (rev && doc && doc->kind == ADM_JSON_STRING &&
		    strtoull(rev->text, NULL, 10) > cur.revision &&
		    rev_install(strtoull(rev->text, NULL, 10), doc->text, false))
			log_info("data topology revision %s loaded from the cache file \"%s\"",
				 rev->text, path);
	} else if (cur.revision == 0) {
		log_info("data topology file \"%s\" holds a first topology: storing it", path);
		rev_store_first(text);
	}
	adm_json_cleanup(&obj);
	free(text);
}

void
rev_init(struct event_base *base)
{
	rev_base = base;
	writer = pgc_new(base, "store");
	if (writer == NULL)
		fatal("out of memory");
	follow_init(base);
	adopt_published();
	load_topology_file();
}

/* ---- set_data_topology ---- */

static void
job_free(struct set_job *j)
{
	free(j->json);
	free(j->comment);
	topo_model_free(j->model);
	topo_findings_cleanup(&j->findings);
	free(j);
}

/* End the running job: reply through its request (if any), start the next one. */
static void
job_end(struct set_job *j)
{
	NK_ASSERT(j == queue_head);
	queue_head = j->next;
	if (queue_head == NULL)
		queue_tail = NULL;
	if (j->req != NULL)
		adm_req_finish(j->req);
	job_free(j);
	set_run_next();
}

static void
job_fail(struct set_job *j, const struct nk_error *err)
{
	if (j->req != NULL)
		adm_result_error(&j->req->res, err);
	else
		log_error("storing the first data topology failed: %s", err->message);
	job_end(j);
}

/* Write the reply row (success, revision); the job still has to end. */
static void
job_row(struct set_job *j, bool success, uint64_t revision)
{
	static const struct adm_col cols[] = {
		{ "success", ADM_T_BOOL }, { "revision", ADM_T_INT8 },
	};
	char rev[24];
	const char *vals[2] = { success ? "t" : "f", rev };

	if (j->req != NULL) {
		snprintf(rev, sizeof(rev), "%" PRIu64, revision);
		adm_result_columns(&j->req->res, cols, 2);
		adm_result_row(&j->req->res, vals);
		adm_result_complete(&j->req->res, "SELECT", true);
	}
}

static void
catalog_loaded(void *arg)
{
	struct set_job *j = arg;

	if (j->cat_timer != NULL)
		event_free(j->cat_timer);
	j->cat_timer = NULL;
	job_end(j);
}

static void
catalog_late_cb(evutil_socket_t fd, short what, void *arg)
{
	struct set_job *j = arg;

	(void)fd;
	(void)what;
	log_warn("the catalog of data topology revision %" PRIu64 " was not loaded within %d s;"
		 " answering set_data_topology", j->new_revision, REV_CATALOG_WAIT_S);
	catload_forget(j);
	catalog_loaded(j);
}

/*
 * The revision is published: the answer waits (at most REV_CATALOG_WAIT_S) for the load of
 * its databases' catalogs, so the caller's next statement knows the column types of its
 * tables (shard-key values are read with them).
 */
static void
job_after_catalog(struct set_job *j)
{
	struct timeval tv = { REV_CATALOG_WAIT_S, 0 };

	if (!catload_after_revision(j->new_revision, catalog_loaded, j)) {
		job_end(j);
		return;
	}
	j->cat_timer = evtimer_new(rev_base, catalog_late_cb, j);
	if (j->cat_timer == NULL || evtimer_add(j->cat_timer, &tv) == -1) {
		catload_forget(j);
		catalog_loaded(j);
	}
}

/* After an error inside the transaction: roll back, then fail with <err>. */
static void
rollback_done_cb(void *arg, const struct pgc_res *res, const struct nk_error *e)
{
	struct set_job *j = arg;

	job_end(j);
}

static void
job_rollback_fail(struct set_job *j, const struct nk_error *err)
{
	if (j->req != NULL)
		adm_result_error(&j->req->res, err);
	pgc_query(writer, "ROLLBACK", 0, NULL, rollback_done_cb, j);
}

/*
 * Validate the job's document against <previous> (NULL: first topology). On success the
 * job owns the new model and its canonical text.
 */
static bool
job_validate(struct set_job *j, const char *json, const struct topo_model *previous,
	     struct nk_error *err)
{
	const char *uids[256];
	struct topo_validate_input in = { .shard_uids = uids, .previous = previous };
	struct topo_model *m;

	in.nshards = declared_shards(uids, NK_ARRAY_LEN(uids));
	topo_findings_cleanup(&j->findings);
	topo_findings_init(&j->findings);
	m = topo_check(json, strlen(json), &in, j->force, &j->findings, err);
	if (m == NULL)
		return false;
	if (!catload_check(m, previous, &j->findings, err)) {	/* V4: column types */
		topo_model_free(m);
		return false;
	}
	topo_model_free(j->model);
	j->model = m;
	free(j->json);
	j->json = topo_to_json(m, true);
	if (j->json == NULL)
		return nk_error_oom(err);
	return true;
}

/* The findings `force` suppressed, as a JSON array text (malloc'd; "[]" when none). */
static char *
suppressed_json(const struct set_job *j)
{
	char *buf = NULL;
	size_t len = 0, cap = 0;
	bool ok = adm_json_put_raw(&buf, &len, &cap, "[");
	bool first = true;

	for (size_t i = 0; ok && i < j->findings.n; i++) {
		const struct topo_finding *fi = &j->findings.v[i];
		char item[TOPO_PATH_MAX + TOPO_RULE_MAX + NK_ERR_MSG_MAX + 8];

		if (fi->preexisting)
			continue;
		snprintf(item, sizeof(item), "%s: %s: %s", fi->path, fi->rule, fi->message);
		ok = (first || adm_json_put_raw(&buf, &len, &cap, ", ")) &&
		     adm_json_put_string(&buf, &len, &cap, item);
		first = false;
	}
	if (!ok || !adm_json_put_raw(&buf, &len, &cap, "]")) {
		free(buf);
		return NULL;
	}
	return buf;
}

static void commit_cb(void *arg, const struct pgc_res *res, const struct nk_error *err);

/* INSERT the new revision (with its NOTIFY) inside the open transaction. */
static void
insert_cb(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	struct set_job *j = arg;

	if (err != NULL) {
		job_rollback_fail(j, err);
		return;
	}
	pgc_query(writer, "COMMIT", 0, NULL, commit_cb, j);
}

static void
job_insert(struct set_job *j)
{
	char rev[24];
	char *supp = suppressed_json(j);
	const char *params[5] = { rev, j->json, j->comment,
				  j->req ? j->req->user : "topology_file", supp };
	struct nk_error err;

	if (supp == NULL) {
		nk_error_oom(&err);
		job_rollback_fail(j, &err);
		return;
	}
	j->new_revision = j->stored + 1;
	snprintf(rev, sizeof(rev), "%" PRIu64, j->new_revision);
	pgc_query(writer,
		  "WITH ins AS (INSERT INTO __neki.data_topology_log"
		  " (revision, topology, comment, created_by, suppressed_findings)"
		  " VALUES ($1, $2, $3, $4, $5) RETURNING revision)"
		  " SELECT pg_notify('neki_topology', revision::text) FROM ins",
		  5, params, insert_cb, j);
	free(supp);
}

/* The transaction is committed: cache, publish, reply. */
static void
commit_cb(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	struct set_job *j = arg;

	if (err != NULL) {
		job_fail(j, err);
		return;
	}
	log_info("stored data topology revision %" PRIu64 " (by %s)", j->new_revision,
		 j->req ? j->req->user : "topology_file");
	if (!rev_install(j->new_revision, j->json, true)) {
		struct nk_error e;

		nk_error_set(&e, ERRCODE_INTERNAL_ERROR,
			     "data topology revision %" PRIu64 " was stored but could not"
			     " be published", j->new_revision);
		nk_error_hint(&e, "See the neki log; restarting neki publishes the stored revision.");
		job_fail(j, &e);
		return;
	}
	job_row(j, true, j->new_revision);
	job_after_catalog(j);
}

/*
 * The newest stored revision was read under the table lock: check expected_revision and
 * overwrite against it, validate again when it is not the one we serve, then insert.
 */
static void
newest_cb(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	struct set_job *j = arg;
	struct nk_error e;
	const char *stored_json;

	if (err != NULL) {
		job_rollback_fail(j, err);
		return;
	}
	j->stored = pgc_res_rows(res) ? strtoull(pgc_res_get(res, 0, 0), NULL, 10) : 0;
	stored_json = pgc_res_rows(res) ? pgc_res_get(res, 0, 1) : NULL;
	if (j->has_expected && j->expected != j->stored) {
		job_row(j, false, 0);
		pgc_query(writer, "ROLLBACK", 0, NULL, rollback_done_cb, j);
		return;
	}
	if (!j->overwrite && j->stored > 0) {
		nk_error_set(&e, ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
			     "a data topology already exists (revision %" PRIu64 ")",
			     j->stored);
		nk_error_hint(&e, "Call set_data_topology with overwrite => true to replace it.");
		job_rollback_fail(j, &e);
		return;
	}
	if (j->stored != cur.revision && stored_json != NULL) {
		struct topo_findings f;
		struct topo_model *prev;
		char *json = strdup(j->json);
		bool ok;

		topo_findings_init(&f);
		prev = topo_parse(stored_json, strlen(stored_json), &f);
		topo_findings_cleanup(&f);
		ok = json != NULL && job_validate(j, json, prev, &e);
		free(json);
		topo_model_free(prev);
		if (!ok) {
			job_rollback_fail(j, &e);
			return;
		}
	}
	job_insert(j);
}

static void
locked_cb(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	struct set_job *j = arg;

	if (err != NULL) {
		job_rollback_fail(j, err);
		return;
	}
	pgc_query(writer, "SELECT revision, topology FROM __neki.data_topology_log"
		  " ORDER BY revision DESC LIMIT 1", 0, NULL, newest_cb, j);
}

static void
ddl_cb(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	struct set_job *j = arg;

	if (err != NULL) {
		job_rollback_fail(j, err);
		return;
	}
	pgc_query(writer, "BEGIN; LOCK TABLE __neki.data_topology_log IN EXCLUSIVE MODE",
		  0, NULL, locked_cb, j);
}

/* The catalog rules passed (or <err>): start the store transaction. */
static void
catalog_checked(void *arg, const struct nk_error *err)
{
	struct set_job *j = arg;

	if (err != NULL) {
		job_fail(j, err);
		return;
	}
	pgc_query(writer, store_ddl, 0, NULL, ddl_cb, j);
}

/* Check the catalog rules, then store the job at the head of the queue. */
static void
set_run_next(void)
{
	struct set_job *j = queue_head;
	const char *auth;
	char *conninfo;
	struct nk_error err;

	if (j == NULL)
		return;
	auth = authority_of(j->model);
	conninfo = auth ? follow_conninfo(auth) : NULL;
	if (conninfo == NULL) {
		nk_error_set(&err, ERRCODE_UNDEFINED_OBJECT,
			     "the authoritative shard \"%s\" is not declared in [shards]",
			     auth ? auth : "");
		job_fail(j, &err);
		return;
	}
	pgc_set_conninfo(writer, conninfo);
	free(conninfo);
	catcheck_run(j->model, auth, j->force, catalog_checked, j);
}

/* Read the options JSON: comment, expected_revision, force; anything else is an error. */
static bool
job_options(struct set_job *j, const char *options, struct nk_error *err)
{
	struct adm_json_obj o;
	bool ok = true;

	if (options == NULL || options[strspn(options, " \t\r\n")] == '\0')
		return true;
	if (!adm_json_parse(options, &o, err))
		return false;
	for (size_t i = 0; ok && i < o.n; i++) {
		const struct adm_json_member *m = &o.m[i];

		if (strcmp(m->key, "comment") == 0 && m->kind == ADM_JSON_STRING) {
			ok = (j->comment = strdup(m->text)) != NULL;
		} else if (strcmp(m->key, "comment") == 0 && m->kind == ADM_JSON_NULL) {
			continue;
		} else if (strcmp(m->key, "expected_revision") == 0 && m->kind == ADM_JSON_NUMBER &&
			   m->text[0] != '-' && strspn(m->text, "0123456789") == strlen(m->text)) {
			j->has_expected = true;
			j->expected = strtoull(m->text, NULL, 10);
		} else if (strcmp(m->key, "force") == 0 && m->kind == ADM_JSON_BOOL) {
			j->force = strcmp(m->text, "true") == 0;
		} else if (strcmp(m->key, "comment") == 0 || strcmp(m->key, "force") == 0 ||
			   strcmp(m->key, "expected_revision") == 0) {
			ok = nk_error_set(err, ERRCODE_INVALID_PARAMETER_VALUE,
					  "invalid value for data topology option \"%s\"",
					  m->key);
		} else {
			ok = nk_error_set(err, ERRCODE_INVALID_PARAMETER_VALUE,
					  "unrecognized data topology option \"%s\"",
					  m->key);
			nk_error_hint(err, "The options are comment, expected_revision and force.");
		}
	}
	adm_json_cleanup(&o);
	return ok;
}

/* Queue job <j> (it starts at once when nothing else runs). */
static void
job_enqueue(struct set_job *j)
{
	if (queue_tail != NULL) {
		queue_tail->next = j;
		queue_tail = j;
		return;
	}
	queue_head = queue_tail = j;
	set_run_next();
}

void
rev_set(struct adm_req *req, const char *json, bool overwrite, const char *options)
{
	struct set_job *j = calloc(1, sizeof(*j));
	struct nk_error err;

	if (j == NULL) {
		nk_error_oom(&err);
		adm_req_fail(req, &err);
		return;
	}
	topo_findings_init(&j->findings);
	j->req = req;
	j->overwrite = overwrite;
	if (!job_options(j, options, &err) || !job_validate(j, json, cur.model, &err)) {
		adm_req_fail(req, &err);
		job_free(j);
		return;
	}
	job_enqueue(j);
}

void
rev_store_first(const char *json)
{
	struct set_job *j = calloc(1, sizeof(*j));
	struct nk_error err;

	if (j == NULL)
		return;
	topo_findings_init(&j->findings);
	if ((j->comment = strdup("loaded from topology_file")) == NULL ||
	    !job_validate(j, json, NULL, &err)) {
		log_error("the data topology in topology_file is not valid: %s",
			  j->comment ? err.message : "out of memory");
		job_free(j);
		return;
	}
	/* a first topology never replaces a stored one: stored > 0 fails overwrite */
	job_enqueue(j);
}

/* ---- list_topology_revisions ---- */

static void
revisions_cb(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	struct adm_req *req = arg;
	static const struct adm_col cols[] = {
		{ "revision", ADM_T_INT8 }, { "created_at", ADM_T_TIMESTAMPTZ },
		{ "comment", ADM_T_TEXT }, { "created_by", ADM_T_TEXT },
	};

	if (err != NULL) {
		adm_req_fail(req, err);
		return;
	}
	adm_result_columns(&req->res, cols, NK_ARRAY_LEN(cols));
	for (size_t r = 0; r < pgc_res_rows(res); r++) {
		const char *vals[4];

		for (size_t c = 0; c < 4; c++)
			vals[c] = pgc_res_get(res, r, c);
		adm_result_row(&req->res, vals);
	}
	adm_result_complete(&req->res, "SELECT", true);
	adm_req_finish(req);
}

void
rev_list_revisions(struct adm_req *req)
{
	struct nk_error err;

	/* the watcher, not the writer: never inside a set's transaction */
	if (!follow_query("SELECT revision, created_at, comment, created_by"
			  " FROM __neki.data_topology_log ORDER BY revision", revisions_cb, req)) {
		nk_error_set(&err, ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
			     "no data topology has been set");
		adm_req_fail(req, &err);
	}
}
