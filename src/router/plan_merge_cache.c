/*
 * plan_merge_cache.c - merge specifications kept by statement text, so a merged statement
 * that runs again (a prepared statement at every Execute, a dashboard's query) is not parsed
 * again: plan_merge_build() reads the whole text with libpg_query and walks its JSON tree,
 * many times the cost of the rest of the routed path. A specification depends on the text
 * alone (no catalog, no setting), so an entry never goes stale; PMC_ENTRIES of them, the
 * least recently used replaced, each in its own arena, texts up to PMC_TEXT_MAX bytes.
 * A hit is copied into the caller's arena (the caller may hold it past any eviction). A
 * text whose specification cannot be built is kept too, with its error (a refusal, or a
 * normalised text the grammar does not take: the executor then uses the text itself).
 * Entry point: plan_merge_cached().
 */
#include "neki/base.h"

#include <stdlib.h>
#include <string.h>

#include "neki/hash.h"
#include "neki/plan_merge.h"
#include "neki/rarena.h"

#define PMC_ENTRIES 64
#define PMC_TEXT_MAX 16384

struct pmc_entry {
	uint64_t hash, used;		/* used: 0 = free */
	char *sql;			/* in arena */
	struct rarena *arena;		/* owned */
	struct plan_merge spec;		/* in arena */
	struct nk_error *failed;	/* in arena: why it has no spec; NULL: it has one */
};

static struct pmc_entry entries[PMC_ENTRIES];	/* (a process has one thread) */
static uint64_t clock_tick;

/* <n> bytes of <src> in <a> (NULL stays NULL); false on no memory. */
static bool
dup_mem(struct rarena *a, const void *src, size_t n, void *dstp)
{
	void **dst = dstp;

	*dst = NULL;
	if (src == NULL || n == 0)
		return true;
	if ((*dst = rarena_alloc(a, n)) == NULL)
		return false;
	memcpy(*dst, src, n);
	return true;
}

static bool
dup_str(struct rarena *a, const char **s)
{
	return *s == NULL || (*s = rarena_strdup(a, *s)) != NULL;
}

static bool
dup_expr(struct rarena *a, struct plan_merge_expr *e)
{
	if (e->text == NULL)
		return dup_mem(a, e->agg, e->nagg * sizeof(*e->agg), &e->agg);
	if (!dup_mem(a, e->text, (e->nagg + 1) * sizeof(*e->text), &e->text) ||
	    !dup_mem(a, e->agg, e->nagg * sizeof(*e->agg), &e->agg))
		return false;
	for (uint32_t i = 0; i <= e->nagg; i++)
		if (!dup_str(a, &e->text[i]))
			return false;
	return true;
}

/* <src> again in <a>, every string and array of it: *<dst>. */
static bool
copy_spec(struct rarena *a, const struct plan_merge *src, struct plan_merge *dst)
{
	bool ok;

	*dst = *src;
	ok = dup_str(a, &dst->shard_sql) &&
	     dup_mem(a, src->cols, src->ncols * sizeof(*src->cols), &dst->cols) &&
	     dup_mem(a, src->aggs, src->naggs * sizeof(*src->aggs), &dst->aggs) &&
	     dup_mem(a, src->group_cols, src->ngroup * sizeof(*src->group_cols),
		     &dst->group_cols) &&
	     dup_mem(a, src->sort, src->nsort * sizeof(*src->sort), &dst->sort) &&
	     dup_expr(a, &dst->having);
	for (uint32_t i = 0; ok && i < dst->ncols; i++)
		ok = dup_expr(a, &dst->cols[i].expr);
	for (uint32_t i = 0; ok && i < dst->naggs; i++)
		ok = dup_str(a, &dst->aggs[i].delim) && dup_str(a, &dst->aggs[i].final);
	return ok;
}

static struct pmc_entry *
find(uint64_t hash, const char *sql)
{
	for (size_t i = 0; i < PMC_ENTRIES; i++)
		if (entries[i].used != 0 && entries[i].hash == hash &&
		    strcmp(entries[i].sql, sql) == 0)
			return &entries[i];
	return NULL;
}

/* Keep <spec> of <sql>, or its build's error <failed>, in the least recently used entry
 * (nothing when out of memory). */
static void
keep(uint64_t hash, const char *sql, const struct plan_merge *spec,
     const struct nk_error *failed)
{
	struct pmc_entry *e = &entries[0];

	for (size_t i = 1; i < PMC_ENTRIES && e->used != 0; i++)
		if (entries[i].used < e->used)
			e = &entries[i];
	e->used = 0;
	if (e->arena == NULL && (e->arena = rarena_new()) == NULL)
		return;
	rarena_reset(e->arena);
	e->failed = NULL;
	if ((e->sql = rarena_strdup(e->arena, sql)) == NULL)
		return;
	if (failed != NULL) {
		if ((e->failed = rarena_alloc(e->arena, sizeof(*failed))) == NULL)
			return;
		*e->failed = *failed;
	} else if (!copy_spec(e->arena, spec, &e->spec)) {
		return;
	}
	e->hash = hash;
	e->used = ++clock_tick;
}

/* plan_merge_cached: see neki/plan_merge.h. */
bool
plan_merge_cached(struct rarena *a, const char *sql, struct plan_merge *out,
		  struct nk_error *err)
{
	size_t len = strlen(sql);
	uint64_t hash = len <= PMC_TEXT_MAX ? nk_hash64(sql, len) : 0;
	struct pmc_entry *e = len <= PMC_TEXT_MAX ? find(hash, sql) : NULL;

	if (e != NULL) {
		e->used = ++clock_tick;
		if (e->failed != NULL) {
			*err = *e->failed;
			return false;
		}
		return copy_spec(a, &e->spec, out) || nk_error_oom(err);
	}
	if (!plan_merge_build(a, sql, out, err)) {
		if (len <= PMC_TEXT_MAX && strcmp(err->sqlstate, ERRCODE_OUT_OF_MEMORY) != 0)
			keep(hash, sql, NULL, err);
		return false;
	}
	if (len <= PMC_TEXT_MAX)
		keep(hash, sql, out, NULL);
	return true;
}
