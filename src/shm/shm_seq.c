/*
 * shm_seq.c - setval() generations: SHM_SEQ_GENS atomic counters in the segment header,
 * one cell per sequence name hash (FNV-1a of "db\x1fschema\x1fname"). setval() through any
 * worker bumps its sequence's cell; each worker's sequence allocator (neki/sequence.h
 * seq_sync) drops the values it reserved under an older generation, so the next nextval()
 * follows the new value wherever the session runs. One more counter moves every sequence's
 * generation at once (DDL that may restart, drop or rename sequences): a generation is the
 * sum of its cell and that counter. Entry points: shm_seq_generation(), shm_seq_bump(),
 * shm_seq_bump_all().
 */
#include "neki/base.h"

#include <string.h>

#include "neki/hash.h"
#include "neki/shm.h"
#include "neki/shm_seq.h"

static _Atomic uint64_t local_gen[SHM_SEQ_GENS];	/* no segment: this process's cells */
static _Atomic uint64_t local_all;

static uint64_t
name_hash(const char *db, const char *schema, const char *name)
{
	const char *parts[3] = { db ? db : "", schema, name };
	uint64_t h = NK_FNV1A_BASIS;

	for (int i = 0; i < 3; i++)
		h = nk_fnv1a(nk_fnv1a(h, parts[i], strlen(parts[i])), "\x1f", 1);
	return h;
}

/* The cell of a sequence, in the segment when there is one. */
static _Atomic uint64_t *
cell(const char *db, const char *schema, const char *name)
{
	struct shm_header *h = shm_header();
	uint64_t i = name_hash(db, schema, name) % SHM_SEQ_GENS;

	return h != NULL ? &h->seq_gen[i] : &local_gen[i];
}

/* The counter that moves every generation. */
static _Atomic uint64_t *
cell_all(void)
{
	struct shm_header *h = shm_header();

	return h != NULL ? &h->seq_gen_all : &local_all;
}

/* shm_seq_generation: see neki/shm.h. */
uint64_t
shm_seq_generation(const char *db, const char *schema, const char *name)
{
	return atomic_load_explicit(cell(db, schema, name), memory_order_acquire) +
	       atomic_load_explicit(cell_all(), memory_order_acquire);
}

/* shm_seq_bump: see neki/shm.h. */
void
shm_seq_bump(const char *db, const char *schema, const char *name)
{
	atomic_fetch_add_explicit(cell(db, schema, name), 1, memory_order_acq_rel);
}

/* shm_seq_bump_all: see neki/shm.h. */
void
shm_seq_bump_all(void)
{
	atomic_fetch_add_explicit(cell_all(), 1, memory_order_acq_rel);
}

/* shm_seq_announce: see neki/shm.h. */
void
shm_seq_announce(void)
{
	if (shm_header())
		atomic_fetch_add(&shm_header()->seq_announce, 1);
}

uint64_t
shm_seq_announced(void)
{
	return shm_header() ? atomic_load(&shm_header()->seq_announce) : 0;
}
