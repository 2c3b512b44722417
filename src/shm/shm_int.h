/*
 * shm_int.h - private to src/shm: where the parts of the segment lie.
 *
 * shm.c maps the segment and fills struct shm_layout once; shm_mbox.c, shm_counter.c,
 * shm_names.c, shm_topo.c and shm_cat.c find their parts through shm_layout_get(). Nothing
 * outside src/shm but the unit tests includes this file.
 */
#ifndef NEKI_SRC_SHM_SHM_INT_H
#define NEKI_SRC_SHM_SHM_INT_H

#include "neki/base.h"

#include <stdatomic.h>

#include "neki/shm.h"
#include "neki/shm_counter.h"
#include "neki/shm_dbstats.h"
#include "neki/shm_names.h"
#include "neki/shm_servers.h"
#include "neki/shm_welcome.h"

/* Offsets are from the start of the mapping. */
struct shm_layout {
	char *base;			/* the mapping (owned by shm.c) */
	size_t size;			/* bytes mapped */
	unsigned n_procs;		/* process slots */
	size_t procs_off;		/* struct shm_proc[n_procs] */
	size_t counters_off;		/* _Atomic int64_t[SHM_N_COUNTERS] */
	size_t shares_off;		/* _Atomic int32_t[n_procs][SHM_N_COUNTERS] */
	size_t waits_off;		/* _Atomic uint64_t[n_procs][SHM_N_WAITS] (shm_wait.c) */
	size_t names_off;		/* shm_names_slot[SHM_NAMES_KINDS][SHM_NAMES_SLOTS] */
	size_t welcome_off;		/* shm_welcome_slot[SHM_WELCOME_SLOTS] */
	size_t dbstats_off;		/* struct shm_dbstats_area[n_procs] */
	size_t servers_off;		/* struct shm_servers_area (shm_servers.c) */
	size_t list_off;		/* n_procs list areas of list_area bytes */
	size_t list_area;		/* bytes per list area (header included) */
	size_t topo_off;		/* SHM_TOPO_SLOTS areas of topo_area bytes */
	size_t topo_area;		/* bytes per topology image slot */
	size_t cat_off;			/* SHM_CAT_SLOTS areas of topo_area bytes */
};

/* One family of image slots (topology or catalog), see shm_image.c. */
struct shm_image_family {
	_Atomic uint64_t *current;	/* borrowed: version << 8 | (slot + 1); 0 = none */
	struct shm_topo_slot *slots;	/* borrowed: the family's slot headers */
	unsigned nslots;
	size_t off;			/* offset of slot 0's bytes in the mapping */
};

bool shm_image_claim(const struct shm_image_family *f, unsigned *slot);
void *shm_image_data(const struct shm_image_family *f, unsigned slot);
void shm_image_publish(const struct shm_image_family *f, unsigned slot, uint64_t version,
		       size_t len);
void shm_image_abandon(const struct shm_image_family *f, unsigned slot);
bool shm_image_pin(const struct shm_image_family *f, struct shm_topo_ref *ref);
void shm_image_unpin(const struct shm_image_family *f, const struct shm_topo_ref *ref);
uint64_t shm_image_version(const struct shm_image_family *f);

/* One slot of the name registry (shm_names.c). */
struct shm_names_slot {
	_Atomic uint32_t state;			/* enum names_state | claimer << 8 */
	uint32_t len;				/* key bytes (set before READY) */
	unsigned char key[SHM_NAMES_KEY_MAX];	/* the key (set before READY) */
};

#define SHM_WELCOME_WORDS (SHM_WELCOME_MAX / 8)

/* One pool's welcome (shm_welcome.c). */
struct shm_welcome_slot {
	_Atomic uint32_t owner;			/* pool id + 1; 0 free (claimed once, kept) */
	_Atomic uint32_t seq;			/* seqlock: odd while written or cleared */
	_Atomic uint32_t len;			/* bytes of data; 0 = no welcome */
	_Atomic uint64_t words[SHM_WELCOME_WORDS]; /* name\0value\0 pairs */
};

/* The servers of the shards with standbys, as the admin published them (shm_servers.c). */
struct shm_servers_area {
	_Atomic uint32_t seq;			/* seqlock: odd while written */
	_Atomic uint32_t n;			/* entries in use */
	_Atomic uint64_t version;		/* publications so far */
	_Atomic uint64_t words[SHM_SERVERS_MAX][sizeof(struct shm_server) / sizeof(uint64_t)];
};

/* A process's published per-database stats (shm_dbstats.c). */
struct shm_dbstats_area {
	_Atomic uint32_t seq;			/* seqlock: odd while written */
	_Atomic uint32_t n;			/* entries in use */
	_Atomic uint64_t words[SHM_DB_STATS_MAX][sizeof(struct shm_dbstat) / sizeof(uint64_t)];
};

struct shm_dbstats_area *shm_dbstats_area(unsigned i);

/* The layout of the mapped segment (NK_ASSERTs that it is mapped). */
const struct shm_layout *shm_layout_get(void);

/* Set up an empty mailbox (shm_create, for every slot). */
void shm_mbox_init(struct shm_mbox *mb);

/* Global counter <idx> and slot <proc>'s share of it. */
_Atomic int64_t *shm_counter_cell(unsigned idx);
_Atomic int32_t *shm_counter_share(unsigned proc, unsigned idx);

#endif /* NEKI_SRC_SHM_SHM_INT_H */
