/*
 * neki/shm.h - the shared memory segment every neki process maps (DESIGN.md §2).
 *
 * The master creates one segment (memfd + mmap, shm_size bytes) before forking; the
 * children inherit the mapping. It holds, in this order:
 *   - a header: magic, layout version, the published topology (slot + revision, one
 *     atomic word) and the catalog version;
 *   - one slot per child process (workers, then the admin): pid, kind, state,
 *     heartbeat, the topology revision it has switched to, client/link gauges, a stats
 *     block and a command mailbox woken by an eventfd;
 *   - the global pool counters (limits that are global across workers) and each
 *     process's share of them, so a dead child's share can be given back;
 *   - per process and pool id, since when its oldest client that no link is coming for
 *     waits (shm_wait.h);
 *   - the name registry: one small id per database, user and pool name, the same in every
 *     process, which the counters and waits are indexed by (shm_names.h);
 *   - each pool's welcome, the server parameters its first login reported (shm_welcome.h);
 *   - the servers of shards with standbys: role, lag, the chosen primary (shm_servers.h);
 *   - the topology image slots: raw byte areas written by the admin and published with
 *     one atomic store; a slot is reused only when nobody pins it;
 *   - the catalog image slots, handled the same way (shm_cat_*), and the catalog refresh
 *     requests workers make after DDL (a counter the admin polls);
 *   - the setval() generation cells (shm_seq_*).
 * Everything shared is a C11 atomic; no locks. Entry points: shm_create(),
 * shm_attach_self(), shm_proc(), shm_mbox_*, shm_topo_*, shm_cat_*; the counters, the list
 * areas, the per-database stats and the setval() cells have their own headers
 * (neki/shm_counter.h, shm_list.h, shm_dbstats.h, shm_seq.h).
 */
#ifndef NEKI_SHM_H
#define NEKI_SHM_H

#include "neki/base.h"

#include <stdatomic.h>

#include "neki/shm_names.h"

#define SHM_MAGIC UINT64_C(0x314d48534b454e)	/* "NEKSHM1" */
#define SHM_LAYOUT_VERSION 11
#define SHM_CACHE_LINE 64
#define SHM_MAX_PROCS 1025		/* 1024 workers + the admin */
#define SHM_TOPO_SLOTS 4
#define SHM_CAT_SLOTS 4		/* catalog image slots (same rules as the topology ones) */
#define SHM_GSI_COSTS 64	/* non-unique GSIs whose reads' cost is estimated */
/* global pool counters: max_client_conn, then seven ranges of one id per name (spool.c) */
#define SHM_N_COUNTERS (1 + 7 * SHM_NAMES_IDS)
#define SHM_N_WAITS (3 * SHM_NAMES_IDS)	/* waits per pool, db and user id (shm_wait.h) */
#define SHM_MBOX_DEPTH 64		/* messages per mailbox (a power of two) */
#define SHM_MSG_KEY_MAX 32		/* cancel key bytes carried by a message */
#define SHM_MSG_NAME_MAX 64		/* database name carried by a message */
#define SHM_SEQ_GENS 1024		/* setval() generation cells (by sequence name hash) */
#define SHM_MSG_TEXT_MAX 1024		/* a console SET's "key=value" (file paths) */

/* What a process slot belongs to. */
enum shm_proc_kind {
	SHM_PROC_NONE = 0,
	SHM_PROC_WORKER = 1,
	SHM_PROC_ADMIN = 2,
};

/* A child's life cycle, as it reports it in its slot. */
enum shm_proc_state {
	SHM_PST_EMPTY = 0,	/* never started or reaped by the master */
	SHM_PST_STARTING = 1,	/* forked, setting up its loop */
	SHM_PST_RUNNING = 2,	/* accepting and serving */
	SHM_PST_PAUSED = 3,	/* got PAUSE (SIGUSR1); RESUME goes back to RUNNING */
	SHM_PST_STOPPING = 4,	/* got a shutdown command: no longer accepting */
	SHM_PST_SUSPENDED = 5,	/* got SUSPEND: not accepting, client sockets not read */
};

/* Mailbox commands (fixed-size messages). */
enum shm_cmd {
	SHM_CMD_NONE = 0,
	SHM_CMD_RELOAD = 1,		/* re-read the configuration */
	SHM_CMD_PAUSE = 2,		/* PAUSE [db] (name empty = all) */
	SHM_CMD_RESUME = 3,		/* RESUME [db] */
	SHM_CMD_RECONNECT = 4,		/* RECONNECT [db] */
	SHM_CMD_KILL = 5,		/* KILL [db] */
	SHM_CMD_SHUTDOWN_NOW = 6,	/* exit at once */
	SHM_CMD_SHUTDOWN_CLIENTS = 7,	/* stop listening, exit when no client is left */
	SHM_CMD_SHUTDOWN_SERVERS = 8,	/* stop listening, exit when no server link is left */
	SHM_CMD_CANCEL = 9,		/* forward a CancelRequest: key[] names the session */
	SHM_CMD_TOPOLOGY = 10,		/* a topology revision was published: switch to it */
	SHM_CMD_DISABLE = 11,		/* DISABLE db: refuse new clients of name[] */
	SHM_CMD_ENABLE = 12,		/* ENABLE db */
	SHM_CMD_SET = 13,		/* console SET: name[] holds "key=value" */
	SHM_CMD_KILL_CLIENT = 14,	/* KILL_CLIENT: key[] holds the uint64_t client id */
	SHM_CMD_WAIT_CLOSE = 15,	/* WAIT_CLOSE [db]: acked when no link is close_needed */
	SHM_CMD_LIST = 16,		/* write the process's rows into its list area (SHOW) */
	SHM_CMD_SUSPEND = 17,		/* SUSPEND: stop accepting and reading client sockets */
	SHM_CMD_FDS = 18,		/* SHOW FDS: send the sockets to the admin (fdchan.h);
					 * key[] the request number, name[0] 'L': listeners too */
	SHM_CMD_TAKEOVER_DONE = 19,	/* the online restart took the sockets: close the
					 * clients it could not take, with a FATAL */
	SHM_CMD_DEADLOCK = 20,		/* cancel a statement to break a wait cycle across
					 * shards: key[] the uint64_t client id and uint32_t
					 * backend pid, name[] the shard, text[] the DETAIL */
};

/* One mailbox message. */
struct shm_msg {
	uint32_t cmd;			/* enum shm_cmd */
	uint32_t key_len;		/* bytes used in key[] */
	uint64_t seq;			/* set by shm_mbox_post(); acked by the receiver */
	uint8_t key[SHM_MSG_KEY_MAX];	/* SHM_CMD_CANCEL: the BackendKeyData bytes */
	char name[SHM_MSG_NAME_MAX];	/* database name for PAUSE/RESUME/KILL/RECONNECT */
	char text[SHM_MSG_TEXT_MAX];	/* SHM_CMD_SET: "key=value", NUL-terminated */
};

/*
 * pgbouncer's SHOW STATS totals, in its column order. Each process keeps a plain copy and
 * publishes it into its slot (shm_stats_publish) about once a second; readers add the slots
 * up. client_login_count: logins that got past authentication and the client limits.
 */
#define SHM_STATS_FIELDS(X)				\
	X(server_assignment_count)			\
	X(xact_count)					\
	X(query_count)					\
	X(received)					\
	X(sent)						\
	X(xact_time)					\
	X(query_time)					\
	X(wait_time)					\
	X(client_parse_count)				\
	X(server_parse_count)				\
	X(bind_count)					\
	X(client_login_count)

struct shm_stats {
#define SHM_STATS_DECLARE(name) uint64_t total_##name;
	SHM_STATS_FIELDS(SHM_STATS_DECLARE)
#undef SHM_STATS_DECLARE
};

#define SHM_STATS_WORDS (sizeof(struct shm_stats) / sizeof(uint64_t))

#define SHM_DB_STATS_MAX 128	/* databases with their own stats, per process */

/*
 * One database's stats as a process published them. name "" is the overflow entry: the
 * databases beyond SHM_DB_STATS_MAX - 1 of one process (counted in totals, not listed).
 */
struct shm_dbstat {
	char name[SHM_MSG_NAME_MAX];		/* client-side database name */
	struct shm_stats st;
};

/* One mailbox cell (Vyukov bounded queue: seq tells whose turn the cell is). */
struct shm_mbox_cell {
	_Atomic uint64_t turn;
	struct shm_msg msg;
};

/* A command mailbox: many senders, one receiver (the slot's process). */
struct shm_mbox {
	_Alignas(SHM_CACHE_LINE) _Atomic uint64_t head;	/* next position to take */
	_Alignas(SHM_CACHE_LINE) _Atomic uint64_t tail;	/* next position to fill */
	_Alignas(SHM_CACHE_LINE) _Atomic uint64_t acked;	/* last seq the receiver acted on */
	struct shm_mbox_cell cells[SHM_MBOX_DEPTH];
};

/* One child process's slot. Written by its owner except where noted. */
struct shm_proc {
	_Alignas(SHM_CACHE_LINE) _Atomic int32_t pid;	/* 0 when no process */
	_Atomic uint32_t kind;			/* enum shm_proc_kind (set by the master) */
	_Atomic uint32_t state;			/* enum shm_proc_state */
	_Atomic uint32_t generation;		/* bumped by the master at each (re)start */
	_Atomic uint64_t heartbeat_ms;		/* CLOCK_MONOTONIC ms of the last tick */
	_Atomic uint64_t revision_seen;		/* topology revision this process serves */
	_Atomic int64_t clients;		/* connected clients (gauge) */
	_Atomic int64_t links;			/* server links (gauge) */
	_Atomic uint64_t ctl_found_seq;		/* seq of the last KILL_CLIENT that found its
						 * client in this process */
	_Atomic uint32_t pool_wake;		/* 1: another process asked it to look at its
						 * pools again (shm_wait_wake); set by others */
	_Atomic uint32_t stats_seq;		/* seqlock: odd while stats are written */
	_Atomic uint64_t stats[SHM_STATS_WORDS]; /* struct shm_stats, word by word */
	int eventfd;				/* wakes the owner; created by the master */
	int link_rx;				/* the owner receives server links here (an
						 * AF_UNIX datagram pair's end, from the master) */
	int link_tx;				/* others send this process links here */
	_Alignas(SHM_CACHE_LINE) struct shm_mbox mbox;
};

/* One topology image slot. The image bytes live elsewhere (shm_topo_data). */
struct shm_topo_slot {
	_Atomic uint32_t pins;			/* readers holding it; SHM_TOPO_WRITER while written */
	_Atomic uint64_t revision;		/* the revision it holds (0 = none) */
	_Atomic uint64_t len;			/* bytes of image */
};

#define SHM_TOPO_WRITER UINT32_C(0x80000000)

#define SHM_ADVICE_MAX 8192		/* bytes of advisor findings kept after DDL */

/* The segment header. */
struct shm_header {
	uint64_t magic;				/* SHM_MAGIC */
	uint32_t layout_version;		/* SHM_LAYOUT_VERSION */
	uint32_t n_procs;			/* process slots */
	uint64_t size;				/* bytes mapped */
	uint64_t topo_area;			/* bytes per topology image slot */
	_Alignas(SHM_CACHE_LINE) _Atomic uint64_t topo_current; /* rev << 8 | (slot + 1); 0 = none */
	_Atomic uint64_t catalog_version;	/* the published catalog version (0 = none) */
	struct shm_topo_slot topo[SHM_TOPO_SLOTS];
	_Alignas(SHM_CACHE_LINE) _Atomic uint64_t cat_current; /* version << 8 | (slot + 1) */
	_Atomic uint64_t cat_requests;		/* catalog refreshes asked for (shm_cat_request_refresh) */
	_Atomic uint64_t cat_served;		/* requests the published catalog includes */
	struct shm_topo_slot cat[SHM_CAT_SLOTS];	/* revision = catalog version */
	_Alignas(SHM_CACHE_LINE) _Atomic uint64_t last_socket_id; /* shm_socket_id_next() */
	_Alignas(SHM_CACHE_LINE) _Atomic uint64_t seq_gen[SHM_SEQ_GENS]; /* shm_seq_*() */
	_Atomic uint64_t seq_gen_all;		/* shm_seq_bump_all(): every sequence */
	_Atomic uint32_t handed_over;		/* shm_handover_set(): SHOW FDS passed the sockets */
	_Atomic uint64_t schema_version;	/* cluster schema version of the catalog in force */
	_Atomic uint64_t seq_announce;		/* setval()s for the admin to tell other hosts */
	_Atomic uint32_t advice_seq;		/* shm_advice_*: odd while being written */
	_Atomic uint64_t advice_version;	/* the schema version the advice is of */
	_Atomic uint64_t tx_epoch;		/* neki/shm_epoch.h: global ids' epoch (0 = none yet) */
	_Alignas(SHM_CACHE_LINE) _Atomic uint64_t gsi_cost[SHM_GSI_COSTS][2]; /* shm_gsi_cost.h */
	char advice[SHM_ADVICE_MAX];		/* the advisor's findings after DDL */
};

/* A pinned topology image (see shm_topo_pin). */
struct shm_topo_ref {
	unsigned slot;				/* slot index */
	uint64_t revision;
	const void *data;			/* borrowed; valid until shm_topo_unpin */
	size_t len;
};

/*
 * Create and map the segment: <size> bytes (rounded up to pages), <n_procs> process
 * slots, an eventfd per slot. Fails (false, <err_buf> filled) when <size> cannot hold
 * the fixed parts plus a minimal topology area, or a syscall fails. Call once, in the
 * master, before forking.
 */
NK_MUSTCHECK bool shm_create(size_t size, unsigned n_procs, char *err_buf, size_t err_len);

/* Unmap the segment and close the eventfds (master at exit; tests). */
void shm_destroy(void);

/* The smallest segment size that holds <n_procs> slots and a usable topology area. */
size_t shm_min_size(unsigned n_procs);

/* The header (NULL before shm_create). */
struct shm_header *shm_header(void);

/* Number of process slots. */
unsigned shm_n_procs(void);

/* Process slot <i> (0 <= i < shm_n_procs()). */
struct shm_proc *shm_proc(unsigned i);

/* Declare that this process owns slot <i> (-1 = the master). Used by counters. */
void shm_attach_self(int i);

/* The slot this process owns, or -1 (master). */
int shm_self(void);

/*
 * The id of a new client or server socket (SHOW CLIENTS / SERVERS `id`, KILL_CLIENT): one
 * counter for every process, clients and servers alike, as pgbouncer's single counter, so
 * ids are global and consecutive (1, 2, ...). One atomic add per connection. Without a
 * segment (unit tests) a process-local counter.
 */
uint64_t shm_socket_id_next(void);

/*
 * The online restart (neki -R): SHOW FDS passed every socket to a new process while the
 * workers were suspended (set by the admin; cleared when they resume). The master then
 * leaves the Unix socket file to the new process at exit, and SHUTDOWN first closes the
 * clients that could not be handed over. False without a segment.
 */
void shm_handover_set(bool on);
bool shm_handover_is_set(void);

/* Owner side of a slot: set state / beat / gauges. */
void shm_proc_set_state(struct shm_proc *p, enum shm_proc_state st);
void shm_proc_beat(struct shm_proc *p);
const char *shm_proc_state_str(enum shm_proc_state st);
const char *shm_proc_kind_str(enum shm_proc_kind k);

/* Master side: prepare slot <i> for a new child of <kind> (clears state, gauges, mailbox turn). */
void shm_proc_reset(unsigned i, enum shm_proc_kind kind);

/* Publish <s> into <p> (owner) / read a consistent copy (anyone). */
void shm_stats_publish(struct shm_proc *p, const struct shm_stats *s);
void shm_stats_read(const struct shm_proc *p, struct shm_stats *out);

/*
 * Post <msg> to slot <i>'s mailbox and wake it. Returns the message's sequence
 * number (> 0; wait with shm_mbox_acked() >= seq), or 0 when the mailbox is full.
 */
NK_MUSTCHECK uint64_t shm_mbox_post(unsigned i, const struct shm_msg *msg);

/*
 * Receiver: take the next message of this process's mailbox <p> into <out>. Returns
 * false when empty. Messages come out in sequence order.
 */
NK_MUSTCHECK bool shm_mbox_take(struct shm_proc *p, struct shm_msg *out);

/* Receiver: mark every message up to <seq> as acted on. */
void shm_mbox_ack(struct shm_proc *p, uint64_t seq);

/* The last sequence number slot <i>'s owner acted on. */
uint64_t shm_mbox_acked(unsigned i);

/*
 * Post <msg> to every slot whose kind is <kind> (SHM_PROC_NONE: every slot). seqs[i]
 * (shm_n_procs() entries) receives slot i's sequence number, 0 when the slot was not
 * addressed or its mailbox was full. Returns the number of slots posted to.
 */
unsigned shm_mbox_broadcast(enum shm_proc_kind kind, const struct shm_msg *msg, uint64_t *seqs);

/*
 * True when every slot i with seqs[i] != 0 has acted on it, or has no process (a
 * replacement started later takes the command from the mailbox when it starts).
 */
bool shm_mbox_broadcast_done(const uint64_t *seqs);

/* Receiver: clear the eventfd's count (call before draining the mailbox). */
void shm_mbox_drain_eventfd(struct shm_proc *p);

/*
 * Topology images. The writer claims a free slot, writes up to shm_topo_capacity()
 * bytes into shm_topo_data(), then publishes it (one atomic store). Readers pin the
 * current image, use it, and unpin.
 */
NK_MUSTCHECK bool shm_topo_claim(unsigned *slot);
void *shm_topo_data(unsigned slot);
size_t shm_topo_capacity(void);
void shm_topo_publish(unsigned slot, uint64_t revision, size_t len);
void shm_topo_abandon(unsigned slot);
NK_MUSTCHECK bool shm_topo_pin(struct shm_topo_ref *ref);
void shm_topo_unpin(const struct shm_topo_ref *ref);

/* The published topology revision (0 = none): one atomic load. */
uint64_t shm_topo_revision(void);

/*
 * Catalog images: the same protocol as the topology images, with the catalog version in
 * place of the revision (struct shm_topo_ref describes a pinned catalog image too).
 */
NK_MUSTCHECK bool shm_cat_claim(unsigned *slot);
void *shm_cat_data(unsigned slot);
size_t shm_cat_capacity(void);
/* Publish <slot> as <version>, including every refresh request up to <served>. */
void shm_cat_publish(unsigned slot, uint64_t version, uint64_t served, size_t len);
void shm_cat_abandon(unsigned slot);
NK_MUSTCHECK bool shm_cat_pin(struct shm_topo_ref *ref);
void shm_cat_unpin(const struct shm_topo_ref *ref);

/* The published catalog version (0 = none): one atomic load. */
uint64_t shm_cat_version(void);

/*
 * Ask the admin to reload the catalog (after DDL through neki). Returns the request's
 * number: the reload is done once shm_cat_served() >= it. Never blocks.
 */
uint64_t shm_cat_request_refresh(void);

/* The admin: the newest request number, to load for (0 = none ever made). */
uint64_t shm_cat_requested(void);

/* The highest request number the published catalog includes. */
uint64_t shm_cat_served(void);

/* The cluster schema version (counted on the authoritative shard, one per DDL through any
 * neki host) the published catalog includes; the admin sets it before publishing. */
uint64_t shm_schema_version(void);
void shm_schema_version_set(uint64_t v);

/* The schema advisor's findings after the DDL of schema version <v> (lines "object\trule\t
 * advice\n"): the admin sets them before publishing that catalog; a worker copies them into
 * <out> (<cap> bytes), false when they are of another version. */
void shm_advice_set(uint64_t v, const char *text);
bool shm_advice_get(uint64_t v, char *out, size_t cap);

#endif /* NEKI_SHM_H */
