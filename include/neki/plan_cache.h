/*
 * neki/plan_cache.h - the plan cache (src/router/plan_cache.c): statement models by their
 * normalised text, topology revision and catalog version, least recently used evicted, each
 * with the plan memo its executions replay.
 */
#ifndef NEKI_PLAN_CACHE_H
#define NEKI_PLAN_CACHE_H

#include "neki/base.h"

#include "neki/error.h"
#include "neki/parse.h"

struct plan_memo;

struct plan_cache;

/* A cache holding at most <max_entries> analyses (LRU); NULL on no memory. */
struct plan_cache *plan_cache_new(uint32_t max_entries);
void plan_cache_free(struct plan_cache *c);

/*
 * The cached statement model for normalised text <norm>->key under topology revision
 * <topo_rev> and catalog version <cat_ver>, or NULL (counted as a miss). The model stays
 * valid until the next plan_cache_put() on <c>.
 */
const struct stmt *plan_cache_get(struct plan_cache *c, const struct parse_norm *norm,
				  uint64_t topo_rev, uint64_t cat_ver);

/*
 * Parse <sql> (normalised as <norm>) and cache the model; evicts the least recently used
 * entry when full. Returns the model or NULL with <err>.
 */
const struct stmt *plan_cache_put(struct plan_cache *c, const char *sql,
				  const struct parse_norm *norm, uint64_t topo_rev,
				  uint64_t cat_ver, struct nk_error *err);

/* The plan memo (plan_build_memo()) of the model the last plan_cache_get() or
 * plan_cache_put() returned; NULL when that model is not cached (or none was). Valid as
 * long as the model. */
struct plan_memo *plan_cache_memo(struct plan_cache *c);

struct plan_cache_stats {
	uint64_t hits, misses, evictions;
	uint32_t entries;
	uint64_t memo_replays;		/* executions the cached entries' memos planned */
};

void plan_cache_stats(const struct plan_cache *c, struct plan_cache_stats *out);

#endif /* NEKI_PLAN_CACHE_H */
