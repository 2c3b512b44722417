/*
 * shm.c - the shared memory segment: creation, layout, process slots and stats.
 *
 * The master maps one anonymous shared segment (a memfd, so it shows up by name in
 * /proc/<pid>/maps) before forking; children inherit it at the same address. The
 * mailboxes, counters, name registry, topology and catalog slots live in shm_mbox.c,
 * shm_counter.c, shm_names.c, shm_topo.c and shm_cat.c. Entry points: shm_create(),
 * shm_proc(), shm_stats_publish().
 */
#include "neki/base.h"

#include "neki/clock.h"
#include "neki/shm.h"
#include "neki/shm_gsi_cost.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "shm_int.h"

#define SHM_MIN_TOPO_AREA 4096	/* the smallest topology slot worth having */
#define SHM_LIST_MIN (16 * 1024)	/* list area bounds per process (bytes) */
#define SHM_LIST_MAX (4 * 1024 * 1024)

static struct shm_layout layout;	/* zero until shm_create */
static int self_slot = -1;		/* the slot this process owns; -1 = master */

static size_t
align_up(size_t n, size_t a)
{
	return (n + a - 1) / a * a;
}

/*
 * Bytes of each process's list area (SHOW CLIENTS rows): a quarter of the segment shared
 * out, between SHM_LIST_MIN and SHM_LIST_MAX per process.
 */
static size_t
list_area_size(size_t size, unsigned n_procs)
{
	size_t a = size / 4 / (n_procs ? n_procs : 1);

	a = a < SHM_LIST_MIN ? SHM_LIST_MIN : a > SHM_LIST_MAX ? SHM_LIST_MAX : a;
	return a / SHM_CACHE_LINE * SHM_CACHE_LINE;
}

/* Fill <l> for <n_procs> slots in <size> bytes; topo_area is what is left over. */
static void
layout_compute(struct shm_layout *l, size_t size, unsigned n_procs)
{
	size_t off = align_up(sizeof(struct shm_header), SHM_CACHE_LINE);

	l->size = size;
	l->n_procs = n_procs;
	l->procs_off = off;
	off += align_up(sizeof(struct shm_proc) * n_procs, SHM_CACHE_LINE);
	l->counters_off = off;
	off += align_up(sizeof(_Atomic int64_t) * SHM_N_COUNTERS, SHM_CACHE_LINE);
	l->shares_off = off;
	off += align_up(sizeof(_Atomic int32_t) * SHM_N_COUNTERS * n_procs, SHM_CACHE_LINE);
	l->waits_off = off;
	off += align_up(sizeof(_Atomic uint64_t) * SHM_N_WAITS * n_procs, SHM_CACHE_LINE);
	l->names_off = off;
	off += align_up(sizeof(struct shm_names_slot) * SHM_NAMES_KINDS * SHM_NAMES_SLOTS,
			SHM_CACHE_LINE);
	l->welcome_off = off;
	off += align_up(sizeof(struct shm_welcome_slot) * SHM_WELCOME_SLOTS, SHM_CACHE_LINE);
	l->dbstats_off = off;
	off += align_up(sizeof(struct shm_dbstats_area) * n_procs, SHM_CACHE_LINE);
	l->servers_off = off;
	off += align_up(sizeof(struct shm_servers_area), SHM_CACHE_LINE);
	l->list_off = off;
	/* a quarter of what the fixed parts (slots with their mailboxes, counters) leave */
	l->list_area = list_area_size(size > off ? size - off : 0, n_procs);
	off += l->list_area * n_procs;
	l->topo_off = off;
	l->topo_area = size > off ? (size - off) / (SHM_TOPO_SLOTS + SHM_CAT_SLOTS) /
				    SHM_CACHE_LINE * SHM_CACHE_LINE : 0;
	l->cat_off = off + SHM_TOPO_SLOTS * l->topo_area;
}

size_t
shm_min_size(unsigned n_procs)
{
	struct shm_layout l;

	layout_compute(&l, 0, n_procs);
	return l.topo_off + (SHM_TOPO_SLOTS + SHM_CAT_SLOTS) * SHM_MIN_TOPO_AREA;
}

/* Map <size> bytes of a fresh memfd, shared. NULL and <err_buf> filled on failure. */
static void *
map_segment(size_t size, char *err_buf, size_t err_len)
{
	int fd = memfd_create("neki-shm", MFD_CLOEXEC);
	void *p;

	if (fd == -1) {
		snprintf(err_buf, err_len, "could not create shared memory: memfd_create: %s",
			 strerror(errno));
		return NULL;
	}
	if (ftruncate(fd, (off_t)size) == -1) {
		snprintf(err_buf, err_len, "could not size shared memory to %zu bytes: %s", size,
			 strerror(errno));
		close(fd);
		return NULL;
	}
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		snprintf(err_buf, err_len, "could not map %zu bytes of shared memory: %s", size,
			 strerror(errno));
		return NULL;
	}
	return p;
}

/*
 * Create each slot's eventfd and link channel (a datagram pair: the slot's process reads
 * link_rx, everyone may write link_tx). False (<err_buf> filled) on failure; shm_destroy()
 * closes what was made.
 */
static bool
create_slot_fds(char *err_buf, size_t err_len)
{
	for (unsigned i = 0; i < layout.n_procs; i++)
		shm_proc(i)->eventfd = shm_proc(i)->link_rx = shm_proc(i)->link_tx = -1;
	for (unsigned i = 0; i < layout.n_procs; i++) {
		int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC), sv[2];

		if (fd == -1) {
			snprintf(err_buf, err_len, "could not create an eventfd: %s",
				 strerror(errno));
			return false;
		}
		shm_proc(i)->eventfd = fd;
		if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == -1) {
			snprintf(err_buf, err_len, "could not create a socket pair: %s",
				 strerror(errno));
			return false;
		}
		shm_proc(i)->link_rx = sv[0];
		shm_proc(i)->link_tx = sv[1];
	}
	return true;
}

bool
shm_create(size_t size, unsigned n_procs, char *err_buf, size_t err_len)
{
	long page = sysconf(_SC_PAGESIZE);
	struct shm_header *h;
	void *p;

	NK_ASSERT(layout.base == NULL);
	if (n_procs == 0 || n_procs > SHM_MAX_PROCS) {
		snprintf(err_buf, err_len, "cannot create %u process slots (at most %u)", n_procs,
			 SHM_MAX_PROCS);
		return false;
	}
	size = align_up(size, page > 0 ? (size_t)page : 4096);
	if (size < shm_min_size(n_procs)) {
		snprintf(err_buf, err_len,
			 "shm_size %zu is too small for %u processes: at least %zu bytes are needed",
			 size, n_procs, shm_min_size(n_procs));
		return false;
	}
	p = map_segment(size, err_buf, err_len);
	if (p == NULL)
		return false;
	layout_compute(&layout, size, n_procs);
	layout.base = p;
	h = p;
	h->magic = SHM_MAGIC;
	h->layout_version = SHM_LAYOUT_VERSION;
	h->n_procs = n_procs;
	h->size = size;
	h->topo_area = layout.topo_area;
	for (unsigned i = 0; i < n_procs; i++)
		shm_mbox_init(&shm_proc(i)->mbox);
	shm_gsi_cost_attach(h->gsi_cost);
	if (!create_slot_fds(err_buf, err_len)) {
		shm_destroy();
		return false;
	}
	return true;
}

void
shm_destroy(void)
{
	if (layout.base == NULL)
		return;
	for (unsigned i = 0; i < layout.n_procs; i++) {
		struct shm_proc *p = shm_proc(i);

		if (p->eventfd != -1)
			close(p->eventfd);
		if (p->link_rx != -1)
			close(p->link_rx);
		if (p->link_tx != -1)
			close(p->link_tx);
	}
	shm_gsi_cost_attach(NULL);
	munmap(layout.base, layout.size);
	memset(&layout, 0, sizeof(layout));
	self_slot = -1;
}

const struct shm_layout *
shm_layout_get(void)
{
	NK_ASSERT(layout.base != NULL);
	return &layout;
}

struct shm_header *
shm_header(void)
{
	return (struct shm_header *)layout.base;
}

unsigned
shm_n_procs(void)
{
	return layout.n_procs;
}

struct shm_proc *
shm_proc(unsigned i)
{
	NK_ASSERT(layout.base != NULL && i < layout.n_procs);
	return (struct shm_proc *)(layout.base + layout.procs_off) + i;
}

void
shm_attach_self(int i)
{
	NK_ASSERT(i >= -1 && i < (int)layout.n_procs);
	self_slot = i;
}

int
shm_self(void)
{
	return self_slot;
}

uint64_t
shm_socket_id_next(void)
{
	static uint64_t local_last;	/* without a segment */

	if (layout.base == NULL)
		return ++local_last;
	return atomic_fetch_add_explicit(&shm_header()->last_socket_id, 1,
					 memory_order_relaxed) + 1;
}

void
shm_handover_set(bool on)
{
	if (layout.base != NULL)
		atomic_store(&shm_header()->handed_over, on ? 1u : 0u);
}

bool
shm_handover_is_set(void)
{
	return layout.base != NULL && atomic_load(&shm_header()->handed_over) != 0;
}

void
shm_proc_set_state(struct shm_proc *p, enum shm_proc_state st)
{
	atomic_store(&p->state, (uint32_t)st);
}

void
shm_proc_beat(struct shm_proc *p)
{
	atomic_store_explicit(&p->heartbeat_ms, nk_now_ms(), memory_order_relaxed);
}

const char *
shm_proc_state_str(enum shm_proc_state st)
{
	switch (st) {
	case SHM_PST_EMPTY: return "empty";
	case SHM_PST_STARTING: return "starting";
	case SHM_PST_RUNNING: return "running";
	case SHM_PST_PAUSED: return "paused";
	case SHM_PST_STOPPING: return "stopping";
	case SHM_PST_SUSPENDED: return "suspended";
	}
	return "unknown";
}

const char *
shm_proc_kind_str(enum shm_proc_kind k)
{
	switch (k) {
	case SHM_PROC_NONE: return "none";
	case SHM_PROC_WORKER: return "worker";
	case SHM_PROC_ADMIN: return "admin";
	}
	return "unknown";
}

/*
 * Prepare slot <i> for a new child of <kind>. The mailbox is kept: commands posted
 * to a child that died are acted on by its replacement. Stats are kept too, so
 * totals survive a restart (the new child starts from what the slot holds).
 */
void
shm_proc_reset(unsigned i, enum shm_proc_kind kind)
{
	struct shm_proc *p = shm_proc(i);

	atomic_store(&p->pid, 0);
	atomic_store(&p->kind, (uint32_t)kind);
	atomic_store(&p->state, (uint32_t)SHM_PST_EMPTY);
	atomic_fetch_add(&p->generation, 1);
	/* counted from the fork: a child stopped before its first beat is reported late too */
	atomic_store(&p->heartbeat_ms, nk_now_ms());
	atomic_store(&p->revision_seen, 0);
	atomic_store(&p->clients, 0);
	atomic_store(&p->links, 0);
	atomic_store(&p->ctl_found_seq, 0);
	atomic_store(&p->pool_wake, 0);
}

/* Seqlock writer: readers retry while stats_seq is odd or has moved. */
void
shm_stats_publish(struct shm_proc *p, const struct shm_stats *s)
{
	uint64_t words[SHM_STATS_WORDS];

	memcpy(words, s, sizeof(words));
	atomic_fetch_add_explicit(&p->stats_seq, 1, memory_order_acq_rel);
	for (size_t i = 0; i < SHM_STATS_WORDS; i++)
		atomic_store_explicit(&p->stats[i], words[i], memory_order_relaxed);
	atomic_fetch_add_explicit(&p->stats_seq, 1, memory_order_release);
}

void
shm_stats_read(const struct shm_proc *p, struct shm_stats *out)
{
	uint64_t words[SHM_STATS_WORDS];
	uint32_t s1, s2;

	do {
		s1 = atomic_load_explicit(&p->stats_seq, memory_order_acquire);
		for (size_t i = 0; i < SHM_STATS_WORDS; i++)
			words[i] = atomic_load_explicit(&p->stats[i], memory_order_relaxed);
		atomic_thread_fence(memory_order_acquire);
		s2 = atomic_load_explicit(&p->stats_seq, memory_order_relaxed);
	} while ((s1 & 1) != 0 || s1 != s2);
	memcpy(out, words, sizeof(words));
}
