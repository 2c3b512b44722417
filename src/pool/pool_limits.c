/*
 * pool_limits.c - process-local pool limits (struct pool_limits_local): the pool_limits_ops
 * of tests and single-process use, where one process holds every pool.
 * Entry points: pool_limits_local_new(), pool_limits_local_ops(), pool_limits_local_free().
 */
#include "neki/base.h"
#include "neki/pool.h"

#include <stdlib.h>
#include <string.h>

#include "pool_int.h"

struct pool_limits_entry {
	char *db;		/* owned */
	char *user;		/* owned */
	int count;		/* server connections of this pool */
};

struct pool_limits_local {
	struct pool_limits_entry *e;	/* owned array */
	size_t n;
};

/* Process-local limits for tests and single-process use. NULL when out of memory. */
struct pool_limits_local *
pool_limits_local_new(void)
{
	return calloc(1, sizeof(struct pool_limits_local));
}

/* Free <pl> (NULL is fine). */
void
pool_limits_local_free(struct pool_limits_local *pl)
{
	if (pl == NULL)
		return;
	for (size_t i = 0; i < pl->n; i++) {
		free(pl->e[i].db);
		free(pl->e[i].user);
	}
	free(pl->e);
	free(pl);
}

/* The entry of (<db>, <user>), created when <create>. */
static struct pool_limits_entry *
pool_limits_find(struct pool_limits_local *pl, const char *db, const char *user, bool create)
{
	struct pool_limits_entry *ne;

	for (size_t i = 0; i < pl->n; i++) {
		if (strcmp(pl->e[i].db, db) == 0 && strcmp(pl->e[i].user, user) == 0)
			return &pl->e[i];
	}
	if (!create)
		return NULL;
	ne = realloc(pl->e, (pl->n + 1) * sizeof(*ne));
	if (ne == NULL)
		return NULL;
	pl->e = ne;
	ne = &pl->e[pl->n];
	ne->db = strdup(db);
	ne->user = strdup(user);
	ne->count = 0;
	if (ne->db == NULL || ne->user == NULL) {
		free(ne->db);
		free(ne->user);
		return NULL;
	}
	pl->n++;
	return ne;
}

/* Links counted for database <db>, all users. */
int
pool_limits_local_db_count(struct pool_limits_local *pl, const char *db)
{
	int sum = 0;

	for (size_t i = 0; i < pl->n; i++)
		sum += strcmp(pl->e[i].db, db) == 0 ? pl->e[i].count : 0;
	return sum;
}

/* Links counted for user <user>, all databases. */
int
pool_limits_local_user_count(struct pool_limits_local *pl, const char *user)
{
	int sum = 0;

	for (size_t i = 0; i < pl->n; i++)
		sum += strcmp(pl->e[i].user, user) == 0 ? pl->e[i].count : 0;
	return sum;
}

static bool
pool_limits_local_try(void *ctx, const char *db, const char *user, int pool_max, int db_max,
		      int user_max)
{
	struct pool_limits_local *pl = ctx;
	struct pool_limits_entry *e = pool_limits_find(pl, db, user, true);

	if (e == NULL || e->count >= pool_max)
		return false;
	if (db_max > 0 && pool_limits_local_db_count(pl, db) >= db_max)
		return false;
	if (user_max > 0 && pool_limits_local_user_count(pl, user) >= user_max)
		return false;
	e->count++;
	return true;
}

static void
pool_limits_local_release(void *ctx, const char *db, const char *user)
{
	struct pool_limits_entry *e = pool_limits_find(ctx, db, user, false);

	NK_ASSERT(e != NULL && e->count > 0);
	e->count--;
}

static int
pool_limits_local_count(void *ctx, const char *db, const char *user, enum pool_scope scope)
{
	struct pool_limits_entry *e;

	if (scope == POOL_SCOPE_DB)
		return pool_limits_local_db_count(ctx, db);
	if (scope == POOL_SCOPE_USER)
		return pool_limits_local_user_count(ctx, user);
	e = pool_limits_find(ctx, db, user, false);
	return e != NULL ? e->count : 0;
}

static const struct pool_limits_ops pool_limits_local_table = {
	.try_acquire = pool_limits_local_try,
	.release = pool_limits_local_release,
	.count = pool_limits_local_count,
};

/* The operations table of the process-local limits (static). */
const struct pool_limits_ops *
pool_limits_local_ops(void)
{
	return &pool_limits_local_table;
}
