/*
 * shm_servers.c - the servers table in the shared segment (neki/shm_servers.h).
 *
 * One writer (the admin) makes `seq` odd, stores the count and the entries word by word
 * (relaxed atomics: no data race while a reader copies), and makes `seq` even again with a
 * release store. A reader copies between two equal even values of `seq`, retrying a few
 * times while the admin writes; it never sees a half-written table.
 */
#include "neki/base.h"

#include "neki/shm_servers.h"

#include <stdatomic.h>
#include <string.h>

#include "shm_int.h"

#define SRV_WORDS (sizeof(struct shm_server) / sizeof(uint64_t))
_Static_assert(sizeof(struct shm_server) % 8 == 0, "a server fills whole words");

static struct shm_servers_area local_area;	/* without a segment */

static struct shm_servers_area *
area(void)
{
	const struct shm_layout *l = shm_header() != NULL ? shm_layout_get() : NULL;

	return l != NULL ? (struct shm_servers_area *)(l->base + l->servers_off) : &local_area;
}

/* shm_servers_publish: see neki/shm_servers.h. */
void
shm_servers_publish(const struct shm_server *v, size_t n)
{
	struct shm_servers_area *a = area();
	uint32_t seq = atomic_load_explicit(&a->seq, memory_order_relaxed);
	uint64_t w[SRV_WORDS];

	if (n > SHM_SERVERS_MAX)
		n = SHM_SERVERS_MAX;
	atomic_store_explicit(&a->seq, seq | 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	atomic_store_explicit(&a->n, (uint32_t)n, memory_order_relaxed);
	for (size_t i = 0; i < n; i++) {
		memcpy(w, &v[i], sizeof(w));
		for (size_t k = 0; k < SRV_WORDS; k++)
			atomic_store_explicit(&a->words[i][k], w[k], memory_order_relaxed);
	}
	atomic_store_explicit(&a->seq, (seq | 1) + 1, memory_order_release);
	atomic_fetch_add_explicit(&a->version, 1, memory_order_relaxed);
}

/* One attempt at a consistent copy; false when the admin wrote meanwhile. */
static bool
read_once(struct shm_servers_area *a, const char *uid, struct shm_server *out, size_t cap,
	  size_t *got)
{
	uint32_t s1 = atomic_load_explicit(&a->seq, memory_order_acquire), n;
	uint64_t w[SRV_WORDS];

	*got = 0;
	if ((s1 & 1) != 0)
		return false;
	n = atomic_load_explicit(&a->n, memory_order_relaxed);
	for (size_t i = 0; i < n && i < SHM_SERVERS_MAX && *got < cap; i++) {
		struct shm_server sv;

		for (size_t k = 0; k < SRV_WORDS; k++)
			w[k] = atomic_load_explicit(&a->words[i][k], memory_order_relaxed);
		memcpy(&sv, w, sizeof(sv));
		sv.uid[SHM_SERVER_UID_MAX - 1] = '\0';
		if (strcmp(sv.uid, uid) == 0)
			out[(*got)++] = sv;
	}
	atomic_thread_fence(memory_order_acquire);
	return atomic_load_explicit(&a->seq, memory_order_relaxed) == s1;
}

/* shm_servers_read: see neki/shm_servers.h. */
size_t
shm_servers_read(const char *uid, struct shm_server *out, size_t cap)
{
	struct shm_servers_area *a = area();
	size_t got = 0;

	for (int tries = 0; tries < 100; tries++)
		if (read_once(a, uid, out, cap, &got))
			return got;
	return 0;
}

/* shm_servers_version: see neki/shm_servers.h. */
uint64_t
shm_servers_version(void)
{
	return atomic_load_explicit(&area()->version, memory_order_relaxed);
}

const char *
shm_srv_role_str(enum shm_srv_role r)
{
	switch (r) {
	case SHM_SRV_PRIMARY:
		return "primary";
	case SHM_SRV_STANDBY:
		return "standby";
	case SHM_SRV_DOWN:
		return "down";
	case SHM_SRV_UNKNOWN:
		break;
	}
	return "unknown";
}
