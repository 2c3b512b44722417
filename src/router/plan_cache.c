/*
 * plan_cache.c - the analysis cache: statement models keyed by normalised text (so
 * `id = 1` and `id = 2` share one), valid for one topology revision and one catalog
 * version, bounded, least recently used evicted first. Each entry owns the arena of its
 * model. Only SELECT/INSERT/UPDATE/DELETE/MERGE models are shared: a utility statement's
 * literals are part of its meaning (SET x = 'a'), so its model is kept only until the next
 * put. Entries: plan_cache_new(), plan_cache_get(), plan_cache_put(), plan_cache_free().
 */
#include "neki/base.h"

#include "neki/plan.h"
#include "neki/plan_cache.h"

#include <stdlib.h>
#include <string.h>

#include "plan_int.h"

struct pc_entry {
	char *key;			/* owned: normalised text */
	uint64_t hash, topo_rev, cat_ver;
	struct rarena *arena;		/* owned: holds the model */
	const struct stmt *stmt;	/* in arena */
	struct plan_memo memo;		/* the plan its next executions may reuse */
	struct pc_entry *chain;		/* weak: next in the bucket */
	struct pc_entry *prev, *next;	/* weak: LRU list, most recent first */
};

struct plan_cache {
	struct pc_entry **buckets;	/* owned array; entries owned through the LRU list */
	uint32_t nbuckets, max, count;
	struct pc_entry *head, *tail;	/* LRU ends */
	struct rarena *scratch;		/* owned: the last uncached (utility) model */
	struct pc_entry *last;		/* weak: the entry the last get or put returned */
	struct plan_cache_stats stats;
};

/* plan_cache_new: see neki/plan_cache.h. */
struct plan_cache *
plan_cache_new(uint32_t max_entries)
{
	struct plan_cache *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->max = max_entries ? max_entries : 1;
	c->nbuckets = 16;
	while (c->nbuckets < c->max)
		c->nbuckets *= 2;
	c->buckets = calloc(c->nbuckets, sizeof(*c->buckets));
	if (!c->buckets) {
		free(c);
		return NULL;
	}
	return c;
}

static void
lru_unlink(struct plan_cache *c, struct pc_entry *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		c->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		c->tail = e->prev;
	e->prev = e->next = NULL;
}

static void
lru_push(struct plan_cache *c, struct pc_entry *e)
{
	e->next = c->head;
	e->prev = NULL;
	if (c->head)
		c->head->prev = e;
	c->head = e;
	if (!c->tail)
		c->tail = e;
}

static void
entry_free(struct pc_entry *e)
{
	rarena_free(e->arena);
	free(e->key);
	free(e);
}

/* Unlink <e> from its bucket and the LRU list and free it. */
static void
pc_remove(struct plan_cache *c, struct pc_entry *e)
{
	struct pc_entry **pp = &c->buckets[e->hash & (c->nbuckets - 1)];

	while (*pp != e)
		pp = &(*pp)->chain;
	*pp = e->chain;
	lru_unlink(c, e);
	entry_free(e);
	c->count--;
}

/* plan_cache_free: see neki/plan_cache.h. */
void
plan_cache_free(struct plan_cache *c)
{
	struct pc_entry *e, *next;

	if (!c)
		return;
	for (e = c->head; e; e = next) {
		next = e->next;
		entry_free(e);
	}
	rarena_free(c->scratch);
	free(c->buckets);
	free(c);
}

static struct pc_entry *
pc_find(const struct plan_cache *c, const char *key, uint64_t h)
{
	struct pc_entry *e;

	for (e = c->buckets[h & (c->nbuckets - 1)]; e; e = e->chain)
		if (e->hash == h && strcmp(e->key, key) == 0)
			return e;
	return NULL;
}

/* plan_cache_get: see neki/plan_cache.h. An entry of another revision is dropped. */
const struct stmt *
plan_cache_get(struct plan_cache *c, const struct parse_norm *norm, uint64_t topo_rev,
	       uint64_t cat_ver)
{
	uint64_t h = norm->key_hash;
	struct pc_entry *e = pc_find(c, norm->key, h);

	if (e && (e->topo_rev != topo_rev || e->cat_ver != cat_ver)) {
		pc_remove(c, e);
		e = NULL;
	}
	c->last = e;
	if (!e) {
		c->stats.misses++;
		return NULL;
	}
	c->stats.hits++;
	lru_unlink(c, e);
	lru_push(c, e);
	return e->stmt;
}

static bool
is_shared_kind(enum stmt_kind k)
{
	return k == STMT_SELECT || k == STMT_INSERT || k == STMT_UPDATE || k == STMT_DELETE ||
	       k == STMT_MERGE;
}

/* plan_cache_put: see neki/plan_cache.h. */
const struct stmt *
plan_cache_put(struct plan_cache *c, const char *sql, const struct parse_norm *norm,
	       uint64_t topo_rev, uint64_t cat_ver, struct nk_error *err)
{
	struct rarena *a = rarena_new();
	const struct stmt *s = a ? parse_statement(a, sql, norm, err) : NULL;
	uint64_t h = norm->key_hash;
	struct pc_entry *e, *old;

	c->last = NULL;
	if (!a)
		nk_error_oom(err);
	if (!s || !is_shared_kind(s->kind)) {
		rarena_free(s ? c->scratch : a);
		if (s)
			c->scratch = a;
		return s;
	}
	e = calloc(1, sizeof(*e));
	if (!e || !(e->key = strdup(norm->key))) {
		free(e);
		rarena_free(c->scratch);
		c->scratch = a;		/* still usable until the next put */
		return s;
	}
	if ((old = pc_find(c, norm->key, h)))
		pc_remove(c, old);
	if (c->count >= c->max) {
		pc_remove(c, c->tail);
		c->stats.evictions++;
	}
	e->hash = h;
	e->topo_rev = topo_rev;
	e->cat_ver = cat_ver;
	e->arena = a;
	e->memo.arena = a;	/* (a kept plan's GSI part lives with the model) */
	e->stmt = s;
	e->chain = c->buckets[h & (c->nbuckets - 1)];
	c->buckets[h & (c->nbuckets - 1)] = e;
	lru_push(c, e);
	c->count++;
	c->last = e;
	return s;
}

/* plan_cache_memo: see neki/plan_cache.h. */
struct plan_memo *
plan_cache_memo(struct plan_cache *c)
{
	return c->last ? &c->last->memo : NULL;
}

/* plan_cache_stats: see neki/plan_cache.h. */
void
plan_cache_stats(const struct plan_cache *c, struct plan_cache_stats *out)
{
	*out = c->stats;
	out->entries = c->count;
	out->memo_replays = 0;
	for (const struct pc_entry *e = c->head; e; e = e->next)
		out->memo_replays += e->memo.replays;
}
