/*
 * neki/shm_names.h - the name registry of the shared segment (shm_names.c): a small id per
 * database name, user name and pool, the same in every process.
 *
 * The global limits (shm_counter_*) and the waits across workers (shm_wait_*) are arrays
 * indexed by such an id. Each kind has its own fixed table of SHM_NAMES_SLOTS slots; the
 * first process to look a key up claims a slot for it (lock-free), every later lookup in any
 * process finds the same slot, so two names never share an id. Slots are never freed: the
 * keys are bounded by the configuration and by successful logins, and an id must stay what
 * it is while any process may hold units of its counters.
 *
 * Two cases fall back to sharing: a key longer than SHM_NAMES_KEY_MAX bytes and a key that
 * finds its table full get one of SHM_NAMES_SHARED hashed ids after the exact ones (the old
 * behaviour: such keys may share a counter with each other, never with an exact key, which
 * makes their limit stricter, never looser). A warning is logged once per process and kind.
 * Entry points: shm_names_name(), shm_names_pool(), shm_names_reclaim().
 */
#ifndef NEKI_SHM_NAMES_H
#define NEKI_SHM_NAMES_H

#include "neki/base.h"

#include <stddef.h>

/* What a key names; each kind has its own table and its own ids. */
enum shm_names_kind {
	SHM_NAMES_DB = 0,	/* a client-side database name (a routed shard's "<db>@<uid>") */
	SHM_NAMES_USER = 1,	/* a user name */
	SHM_NAMES_POOL = 2,	/* a pool: its database id and user id (shm_names_pool) */
};

#define SHM_NAMES_KINDS 3
#define SHM_NAMES_SLOTS 4096	/* exact ids per kind: 0..SHM_NAMES_SLOTS-1 */
#define SHM_NAMES_SHARED 64	/* hashed ids after them, for keys the table cannot hold */
#define SHM_NAMES_IDS (SHM_NAMES_SLOTS + SHM_NAMES_SHARED)	/* ids per kind */
#define SHM_NAMES_KEY_MAX 128	/* key bytes a slot holds (Postgres names are <= 63) */

/*
 * The id (0..SHM_NAMES_IDS-1) of the <len> bytes at <key> in the table of <kind>, claiming
 * a slot when the key is new. Equal keys get equal ids in every process; an id below
 * SHM_NAMES_SLOTS belongs to that key alone. May wait (yielding) while another process
 * writes a slot the lookup passes. Needs the segment (shm_create).
 */
unsigned shm_names_id(enum shm_names_kind kind, const void *key, size_t len);

/* shm_names_id() of the NUL-terminated <name>. */
unsigned shm_names_name(enum shm_names_kind kind, const char *name);

/* The SHM_NAMES_POOL id of the pool of database id <db_id> and user id <user_id>. */
unsigned shm_names_pool(unsigned db_id, unsigned user_id);

/* Is <id> a key's own (not one of the shared fallback ids)? */
static inline bool
shm_names_is_exact(unsigned id)
{
	return id < SHM_NAMES_SLOTS;
}

/*
 * Master: slot <i>'s process is gone. A slot it had begun to claim and not published is
 * marked dead (lookups pass over it), so that nobody waits for it forever.
 */
void shm_names_reclaim(unsigned i);

/* "database", "user", "pool". */
const char *shm_names_kind_str(enum shm_names_kind kind);

#endif /* NEKI_SHM_NAMES_H */
