/*
 * shm_list.c - per-process list areas: how the admin gathers the workers' client, server,
 * pool and DNS rows for the console (SHOW CLIENTS, SERVERS, POOLS, SOCKETS, ...).
 *
 * Each process slot has one area: a small header (the request number the admin asked for,
 * the one the owner answered, the answer's length) and the bytes of the answer. The admin
 * bumps `want` and posts SHM_CMD_LIST; the owner writes its rows, stores the length and then
 * `done` (release), so a reader that sees done == its request sees the whole answer. The
 * admin runs one request at a time, so an area is never written while being read.
 * Entry points: shm_list_request(), shm_list_result(), shm_list_area(), shm_list_done().
 */
#include "neki/base.h"

#include "neki/shm.h"
#include "neki/shm_list.h"

#include <string.h>

#include "shm_int.h"

/* The header at the start of each area. */
struct list_hdr {
	_Atomic uint64_t want;		/* request number asked for (admin) */
	_Atomic uint64_t done;		/* request number answered (owner) */
	_Atomic uint64_t len;		/* bytes of the answer */
	_Atomic uint32_t truncated;	/* rows were left out for lack of room */
};

#define LIST_HDR_SIZE ((sizeof(struct list_hdr) + SHM_CACHE_LINE - 1) / SHM_CACHE_LINE * \
		       SHM_CACHE_LINE)

static struct list_hdr *
list_hdr(unsigned i)
{
	const struct shm_layout *l = shm_layout_get();

	NK_ASSERT(i < l->n_procs);
	return (struct list_hdr *)(l->base + l->list_off + (size_t)i * l->list_area);
}

size_t
shm_list_capacity(void)
{
	return shm_layout_get()->list_area - LIST_HDR_SIZE;
}

uint64_t
shm_list_request(unsigned i)
{
	struct shm_msg m = { .cmd = SHM_CMD_LIST };
	uint64_t req = atomic_fetch_add(&list_hdr(i)->want, 1) + 1;

	return shm_mbox_post(i, &m) != 0 ? req : 0;
}

const void *
shm_list_result(unsigned i, uint64_t req, size_t *len, bool *truncated)
{
	struct list_hdr *h = list_hdr(i);

	if (atomic_load_explicit(&h->done, memory_order_acquire) != req)
		return NULL;
	*len = atomic_load_explicit(&h->len, memory_order_relaxed);
	*truncated = atomic_load_explicit(&h->truncated, memory_order_relaxed) != 0;
	return (const char *)h + LIST_HDR_SIZE;
}

void *
shm_list_area(unsigned i, size_t *cap, uint64_t *req)
{
	struct list_hdr *h = list_hdr(i);

	*cap = shm_list_capacity();
	*req = atomic_load_explicit(&h->want, memory_order_acquire);
	return (char *)h + LIST_HDR_SIZE;
}

void
shm_list_done(unsigned i, uint64_t req, size_t len, bool truncated)
{
	struct list_hdr *h = list_hdr(i);

	atomic_store_explicit(&h->len, len, memory_order_relaxed);
	atomic_store_explicit(&h->truncated, truncated ? 1 : 0, memory_order_relaxed);
	atomic_store_explicit(&h->done, req, memory_order_release);
}

/* Row bytes: kind, count, then per value a flag (0 NULL, 1 text) and the NUL-ended text. */
bool
shm_list_put_row(void *buf, size_t cap, size_t *len, char kind, const char *const *vals,
		 size_t n)
{
	char *out = buf;
	size_t need = 2;

	NK_ASSERT(n <= SHM_LIST_MAX_COLS);
	for (size_t k = 0; k < n; k++)
		need += 1 + (vals[k] != NULL ? strlen(vals[k]) + 1 : 0);
	if (*len + need > cap)
		return false;
	out += *len;
	*out++ = kind;
	*out++ = (char)n;
	for (size_t k = 0; k < n; k++) {
		*out++ = vals[k] != NULL;
		if (vals[k] != NULL) {
			size_t l = strlen(vals[k]) + 1;

			memcpy(out, vals[k], l);
			out += l;
		}
	}
	*len += need;
	return true;
}

bool
shm_list_next_row(const void *data, size_t len, size_t *pos, char *kind, const char **vals,
		  size_t *n)
{
	const char *p = (const char *)data + *pos, *end = (const char *)data + len;

	if (end - p < 2 || (unsigned char)p[1] > SHM_LIST_MAX_COLS)
		return false;
	*kind = p[0];
	*n = (unsigned char)p[1];
	p += 2;
	for (size_t k = 0; k < *n; k++) {
		const char *z;

		if (p >= end)
			return false;
		if (*p++ == 0) {
			vals[k] = NULL;
			continue;
		}
		if ((z = memchr(p, '\0', (size_t)(end - p))) == NULL)
			return false;
		vals[k] = p;
		p = z + 1;
	}
	*pos = (size_t)(p - (const char *)data);
	return true;
}
