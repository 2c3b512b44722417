/*
 * catoids.c - after the catalog of a database is built from the authoritative shard
 * (catload.c), read the user-defined types (cat_types_sql()) of the authoritative shard and
 * of every other shard of the topology, one query each over the catalog's connection, and
 * keep in the catalog the pairs (a shard's OID, the authoritative OID) that differ: the
 * workers rewrite RowDescription, ParameterDescription and Parse with them (src/exec/
 * route_oids.c). DDL through neki refreshes the catalog, so the pairs follow it. What a
 * shard answered is kept for its database and the cluster schema version it was read at:
 * a later load at the same version (a topology revision, a refresh without DDL) reuses it
 * and logs in nowhere; a DDL through any neki host (a new schema version) reads every shard
 * again. After a walk the connection goes back to the authoritative shard's settings, so no
 * session stays open on another shard. Entry point: catoids_load().
 */
#include "neki/base.h"

#include "catoids.h"

#include <stdlib.h>
#include <string.h>

#include "neki/catalog.h"
#include "neki/log.h"
#include "neki/topology.h"

#include "admin_int.h"

#define CATOIDS_MAX_SHARDS 256

/* One shard's answer to cat_types_sql(), kept for the next load (see above). */
struct catoids_kept {
	char *db, *uid;			/* owned */
	uint64_t version;		/* the schema version it was read at */
	char **vals;			/* owned: nrows x 3 values (oid, schema, name), owned */
	size_t nrows;
};

#define CATOIDS_KEPT_MAX 1024
static struct catoids_kept kept[CATOIDS_KEPT_MAX];
static size_t nkept;

struct catoids {
	struct pgc *conn;		/* borrowed: catload's connection */
	char *home;			/* owned: its conninfo before the walk */
	uint64_t version;		/* the schema version of this load */
	struct catalog *c;		/* borrowed: the catalog being loaded */
	char *uids[CATOIDS_MAX_SHARDS];	/* owned: the authoritative shard first, then the others */
	size_t n, next;			/* shards; the one being read */
	void (*done)(void *arg);
	void *arg;			/* borrowed: the caller's */
};

static void catoids_next(struct catoids *j);

static void
catoids_end(struct catoids *j)
{
	void (*done)(void *arg) = j->done;
	void *arg = j->arg;

	if (j->home != NULL)
		pgc_set_conninfo(j->conn, j->home);	/* (the next query logs in there) */
	for (size_t i = 0; i < j->n; i++)
		free(j->uids[i]);
	free(j->home);
	free(j);
	done(arg);
}

static struct catoids_kept *
kept_find(const char *db, const char *uid)
{
	for (size_t i = 0; i < nkept; i++)
		if (strcmp(kept[i].db, db) == 0 && strcmp(kept[i].uid, uid) == 0)
			return &kept[i];
	return NULL;
}

static size_t
kept_nrows(const void *src)
{
	return ((const struct catoids_kept *)src)->nrows;
}

static const char *
kept_get(const void *src, size_t row, size_t col)
{
	return ((const struct catoids_kept *)src)->vals[row * 3 + col];
}

static void
kept_clear(struct catoids_kept *k)
{
	for (size_t i = 0; i < k->nrows * 3; i++)
		free(k->vals[i]);
	free(k->vals);
	k->vals = NULL;
	k->nrows = 0;
}

/* Keep <rows> as what <uid> answered for <db> at <version> (nothing kept on no memory). */
static void
kept_put(const char *db, const char *uid, uint64_t version, const struct cat_rows *rows)
{
	struct catoids_kept *k = kept_find(db, uid);
	size_t n = rows->nrows(rows->src);

	if (k == NULL && nkept < CATOIDS_KEPT_MAX) {
		k = &kept[nkept];
		k->db = strdup(db);
		k->uid = strdup(uid);
		if (k->db == NULL || k->uid == NULL) {
			free(k->db);
			free(k->uid);
			return;
		}
		nkept++;
	}
	if (k == NULL)
		return;
	kept_clear(k);
	k->version = 0;
	k->vals = calloc(n * 3 + 1, sizeof(*k->vals));
	if (k->vals == NULL)
		return;
	for (size_t r = 0; r < n; r++)
		for (size_t col = 0; col < 3; col++) {
			const char *v = rows->get(rows->src, r, col);

			if ((k->vals[r * 3 + col] = strdup(v != NULL ? v : "")) == NULL) {
				k->nrows = r + 1;	/* (what was copied is freed) */
				kept_clear(k);
				return;
			}
		}
	k->nrows = n;
	k->version = version;
}

/* Apply one shard's types (<rows>) to the catalog: the authoritative ones first. */
static void
apply_types(struct catoids *j, const char *uid, const struct cat_rows *rows)
{
	struct nk_error e;
	bool ok = j->next == 0 ? cat_set_auth_types(j->c, rows, &e)
			       : cat_map_shard_types(j->c, uid, rows, &e);

	if (!ok)
		log_warn("%s", e.message);
}

/* Add shard <uid> unless it is there already. */
static void
add_uid(struct catoids *j, const char *uid)
{
	if (uid == NULL || j->n == CATOIDS_MAX_SHARDS)
		return;
	for (size_t i = 0; i < j->n; i++)
		if (strcmp(j->uids[i], uid) == 0)
			return;
	if ((j->uids[j->n] = strdup(uid)) != NULL)
		j->n++;
}

static void
types_cb(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	struct catoids *j = arg;
	const char *uid = j->uids[j->next];
	struct cat_rows rows = pgc_res_cat_rows(res);

	if (err != NULL) {
		log_warn("could not read the types of database \"%s\" on shard \"%s\": %s",
			 j->c->dbname, uid, err->message);
		if (j->next == 0) {	/* without the authoritative types, nothing to map */
			catoids_end(j);
			return;
		}
	} else {
		apply_types(j, uid, &rows);
		kept_put(j->c->dbname, uid, j->version, &rows);
	}
	j->next++;
	catoids_next(j);
}

/* Query the next shard, or end. */
static void
catoids_next(struct catoids *j)
{
	while (j->next < j->n) {
		const struct catoids_kept *k = kept_find(j->c->dbname, j->uids[j->next]);
		char *ci;

		if (k != NULL && k->version == j->version && k->vals != NULL) {
			struct cat_rows rows = { kept_nrows, kept_get, k };

			apply_types(j, j->uids[j->next], &rows);	/* (read at this version) */
			j->next++;
			continue;
		}
		ci = catload_conninfo(j->uids[j->next], j->c->dbname, "neki-catalog");
		if (ci != NULL) {
			if (j->home == NULL && pgc_conninfo(j->conn) != NULL)
				j->home = strdup(pgc_conninfo(j->conn));
			pgc_set_conninfo(j->conn, ci);
			free(ci);
			pgc_query(j->conn, cat_types_sql(), 0, NULL, types_cb, j);
			return;
		}
		log_warn("cannot read the types of shard \"%s\": it is not declared in [shards]",
			 j->uids[j->next]);
		if (j->next == 0)
			break;
		j->next++;
	}
	catoids_end(j);
}

/* catoids_load: see catoids.h. */
void
catoids_load(struct pgc *conn, const struct topo_model *m, const char *auth, struct catalog *c,
	     uint64_t version, void (*done)(void *arg), void *arg)
{
	struct catoids *j = calloc(1, sizeof(*j));

	if (j == NULL) {
		log_error("out of memory while reading the types of database \"%s\"", c->dbname);
		done(arg);
		return;
	}
	j->conn = conn;
	j->c = c;
	j->version = version;
	j->done = done;
	j->arg = arg;
	add_uid(j, auth);
	for (size_t g = 0; m != NULL && g < m->ngroups; g++)
		for (size_t k = 0; k < m->groups[g].nranges; k++)
			add_uid(j, m->groups[g].ranges[k].shard_uid);
	if (j->n < 2) {		/* one shard: its OIDs are the authoritative ones */
		catoids_end(j);
		return;
	}
	catoids_next(j);
}
