/*
 * shm_mbox.c - per-process command mailboxes in shared memory.
 *
 * Each process slot has a bounded queue of fixed-size messages (struct shm_msg):
 * any process may post (the master forwards signals, the admin sends PAUSE/KILL,
 * workers forward cancel requests), only the slot's owner takes. The queue is the
 * classic bounded MPMC ring: every cell carries a "turn" number saying whether it
 * waits for a writer at position pos (turn == pos) or for the reader (turn == pos+1).
 * A message's sequence number is its ring position + 1, so the reader acts in
 * sequence order and "acked >= seq" means "acted on this and everything before".
 * Posting writes 1 to the owner's eventfd, which its event loop watches.
 */
#include "neki/base.h"

#include "neki/shm.h"

#include <errno.h>
#include <stdint.h>
#include <unistd.h>

#include "shm_int.h"

#define MBOX_MASK (SHM_MBOX_DEPTH - 1)

_Static_assert((SHM_MBOX_DEPTH & MBOX_MASK) == 0, "SHM_MBOX_DEPTH must be a power of two");

/* Called by shm_create for every slot: cell i waits for the writer at position i. */
void
shm_mbox_init(struct shm_mbox *mb)
{
	atomic_store(&mb->head, 0);
	atomic_store(&mb->tail, 0);
	atomic_store(&mb->acked, 0);
	for (uint64_t i = 0; i < SHM_MBOX_DEPTH; i++)
		atomic_store(&mb->cells[i].turn, i);
}

/* Reserve the next free position of <mb>; false when the ring is full. */
static bool
reserve_position(struct shm_mbox *mb, uint64_t *pos_out)
{
	uint64_t pos = atomic_load_explicit(&mb->tail, memory_order_relaxed);

	for (;;) {
		struct shm_mbox_cell *cell = &mb->cells[pos & MBOX_MASK];
		uint64_t turn = atomic_load_explicit(&cell->turn, memory_order_acquire);
		int64_t diff = (int64_t)(turn - pos);

		if (diff == 0) {
			if (atomic_compare_exchange_weak_explicit(&mb->tail, &pos, pos + 1,
								  memory_order_relaxed,
								  memory_order_relaxed)) {
				*pos_out = pos;
				return true;
			}
		} else if (diff < 0) {
			return false;
		} else {
			pos = atomic_load_explicit(&mb->tail, memory_order_relaxed);
		}
	}
}

uint64_t
shm_mbox_post(unsigned i, const struct shm_msg *msg)
{
	struct shm_proc *p = shm_proc(i);
	struct shm_mbox_cell *cell;
	uint64_t pos, one = 1;

	if (!reserve_position(&p->mbox, &pos))
		return 0;
	cell = &p->mbox.cells[pos & MBOX_MASK];
	cell->msg = *msg;
	cell->msg.seq = pos + 1;
	atomic_store_explicit(&cell->turn, pos + 1, memory_order_release);
	/* EAGAIN means the counter is already huge: the owner is awake anyway. */
	while (write(p->eventfd, &one, sizeof(one)) == -1 && errno == EINTR)
		;
	return pos + 1;
}

bool
shm_mbox_take(struct shm_proc *p, struct shm_msg *out)
{
	struct shm_mbox *mb = &p->mbox;
	uint64_t pos = atomic_load_explicit(&mb->head, memory_order_relaxed);
	struct shm_mbox_cell *cell = &mb->cells[pos & MBOX_MASK];
	uint64_t turn = atomic_load_explicit(&cell->turn, memory_order_acquire);

	/* One reader per mailbox: nobody else moves head, so no CAS is needed. */
	if (turn != pos + 1)
		return false;
	*out = cell->msg;
	atomic_store_explicit(&mb->head, pos + 1, memory_order_relaxed);
	atomic_store_explicit(&cell->turn, pos + SHM_MBOX_DEPTH, memory_order_release);
	return true;
}

void
shm_mbox_ack(struct shm_proc *p, uint64_t seq)
{
	uint64_t cur = atomic_load(&p->mbox.acked);

	while (cur < seq && !atomic_compare_exchange_weak(&p->mbox.acked, &cur, seq))
		;
}

uint64_t
shm_mbox_acked(unsigned i)
{
	return atomic_load(&shm_proc(i)->mbox.acked);
}

unsigned
shm_mbox_broadcast(enum shm_proc_kind kind, const struct shm_msg *msg, uint64_t *seqs)
{
	unsigned n = 0;

	for (unsigned i = 0; i < shm_n_procs(); i++) {
		seqs[i] = 0;
		if (kind != SHM_PROC_NONE && atomic_load(&shm_proc(i)->kind) != (uint32_t)kind)
			continue;
		seqs[i] = shm_mbox_post(i, msg);
		n += seqs[i] != 0;
	}
	return n;
}

bool
shm_mbox_broadcast_done(const uint64_t *seqs)
{
	for (unsigned i = 0; i < shm_n_procs(); i++) {
		if (seqs[i] != 0 && atomic_load(&shm_proc(i)->pid) != 0 && shm_mbox_acked(i) < seqs[i])
			return false;
	}
	return true;
}

void
shm_mbox_drain_eventfd(struct shm_proc *p)
{
	uint64_t count;

	while (read(p->eventfd, &count, sizeof(count)) == -1 && errno == EINTR)
		;
}
