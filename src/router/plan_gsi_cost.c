/*
 * plan_gsi_cost.c - whether a read through a non-unique GSI costs less than the scatter it
 * replaces (spec 3.3: "used only if estimated cheaper than the fallback route"). The read
 * costs a round to the lookup's shard, then the statement on the shards of the owner keys
 * it returned; the scatter one round to every shard of the group. So the GSI pays as long
 * as its lookups lead to fewer shards than all of them, and the estimate is what its
 * lookups found: an exponential average of the fraction of the planned shards a lookup led
 * to (route_gsi.c reports each one), kept for every process in shared memory
 * (neki/shm_gsi_cost.h). Once the average says every shard, reads plan as the scatter, and
 * every PROBE_EVERY-th one reads the lookup again (and so do the next ones until its
 * lookup reports: its statement is planned again after it), so a change of the data, or of
 * the values asked, is seen. A unique GSI is always used: a value has one owner row.
 * Entry points: plan_gsi_cost_scatter(), plan_gsi_cost_observe().
 */
#include "neki/base.h"

#include <string.h>

#include "neki/hash.h"
#include "neki/plan_gsi.h"
#include "neki/shm_gsi_cost.h"

#define COST_ONE 1024			/* the fraction 1 */
#define PROBE_EVERY 16			/* reads planned as the scatter between two lookups */
#define CAS_TRIES 8

/* A GSI's word: avg (fraction of the shards reached, in 1/COST_ONE) | of (the shards of
 * the last lookup's statement) << 16 | skipped (reads planned as the scatter since) << 24 |
 * probing << 32 | known << 33. */
struct gsi_cost {
	uint32_t avg, of, skipped;
	bool probing, known;
};

static struct gsi_cost
decode(uint64_t w)
{
	return (struct gsi_cost){ (uint32_t)(w & 0xffff), (uint32_t)(w >> 16 & 0xff),
				  (uint32_t)(w >> 24 & 0xff), (w >> 32 & 1) != 0,
				  (w >> 33 & 1) != 0 };
}

static uint64_t
encode(const struct gsi_cost *e)
{
	return (uint64_t)(e->avg & 0xffff) | (uint64_t)(e->of > 255 ? 255 : e->of) << 16 |
	       (uint64_t)(e->skipped & 0xff) << 24 | (uint64_t)e->probing << 32 |
	       (uint64_t)e->known << 33;
}

/* The key of GSI <name> of <db> (nonzero). */
static uint64_t
key_of(const char *db, const char *name)
{
	size_t a = strlen(db), b = strlen(name);
	char buf[256];

	if (a + b + 1 >= sizeof(buf))
		return 0;
	memcpy(buf, db, a + 1);
	memcpy(buf + a + 1, name, b);
	return nk_hash64(buf, a + 1 + b) | 1;
}

/* plan_gsi_cost_scatter: see neki/plan_gsi.h. */
bool
plan_gsi_cost_scatter(const char *db, const char *name, bool count)
{
	uint64_t key = db != NULL && name != NULL ? key_of(db, name) : 0;

	for (int i = 0; key != 0 && i < CAS_TRIES; i++) {
		uint64_t w = shm_gsi_cost_load(key);
		struct gsi_cost e = decode(w);
		bool scatter;

		if (!e.known || e.probing || e.of < 2 || e.avg < COST_ONE - COST_ONE / (2 * e.of))
			return false;	/* (unknown, measuring, fewer shards than all on average) */
		scatter = e.skipped + 1 < PROBE_EVERY;
		if (!count)
			return scatter;
		e.skipped = scatter ? e.skipped + 1 : 0;
		e.probing = !scatter;	/* (this one reads the lookup again) */
		if (shm_gsi_cost_swap(key, w, encode(&e)))
			return scatter;
	}
	return false;
}

/* plan_gsi_cost_observe: see neki/plan_gsi.h. */
void
plan_gsi_cost_observe(const char *db, const char *name, uint32_t hit, uint32_t of)
{
	uint64_t key = key_of(db, name);
	uint32_t sample = of > 0 ? (hit < of ? hit : of) * COST_ONE / of : 0;

	for (int i = 0; key != 0 && i < CAS_TRIES; i++) {
		uint64_t w = shm_gsi_cost_load(key);
		struct gsi_cost e = decode(w);

		e.avg = e.known ? (3 * e.avg + sample) / 4 : sample;
		e.of = of;
		e.skipped = 0;
		e.probing = false;
		e.known = true;
		if (shm_gsi_cost_swap(key, w, encode(&e)))
			return;
	}
}
