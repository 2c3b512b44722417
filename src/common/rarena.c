/*
 * rarena.c - the arena (neki/rarena.h): a list of chunks handed out by bump allocation and
 * freed in one call (STYLE.md 2.6). The router's statement models, plans and scratch memory
 * of one analysis live in one (the plan cache keeps an entry's arena alive); a topology
 * model and a catalog each live in one too.
 */
#include "neki/base.h"

#include "neki/rarena.h"

#include <stdlib.h>
#include <string.h>

#define RARENA_CHUNK 4096

struct rarena_chunk {
	struct rarena_chunk *next;	/* owned: the previous chunk */
	size_t size, used;		/* bytes of data[] and bytes handed out */
	max_align_t data[];
};

struct rarena {
	struct rarena_chunk *head;	/* owned: newest chunk first */
	size_t total;			/* bytes handed out */
};

/* rarena_new: see neki/rarena.h. */
struct rarena *
rarena_new(void)
{
	return calloc(1, sizeof(struct rarena));
}

/* rarena_free: see neki/rarena.h. */
void
rarena_free(struct rarena *a)
{
	struct rarena_chunk *c, *next;

	if (!a)
		return;
	for (c = a->head; c; c = next) {
		next = c->next;
		free(c);
	}
	free(a);
}

/* rarena_reset: see neki/rarena.h. Keeps the oldest chunk (the first, normal-sized one). */
void
rarena_reset(struct rarena *a)
{
	struct rarena_chunk *c = a->head, *next;

	if (!c)
		return;
	while (c->next) {
		next = c->next;
		free(c);
		c = next;
	}
	c->used = 0;
	a->head = c;
	a->total = 0;
}

static struct rarena_chunk *
chunk_new(struct rarena *a, size_t need)
{
	size_t size = need > RARENA_CHUNK ? need : RARENA_CHUNK;
	struct rarena_chunk *c = malloc(sizeof(*c) + size);

	if (!c)
		return NULL;
	c->next = a->head;
	c->size = size;
	c->used = 0;
	a->head = c;
	return c;
}

/* rarena_alloc: see neki/rarena.h. */
void *
rarena_alloc(struct rarena *a, size_t size)
{
	struct rarena_chunk *c = a->head;
	size_t need = (size + 7) & ~(size_t)7;
	void *p;

	if (need == 0)
		need = 8;
	if (!c || c->size - c->used < need) {
		c = chunk_new(a, need);
		if (!c)
			return NULL;
	}
	p = (char *)c->data + c->used;
	c->used += need;
	a->total += need;
	memset(p, 0, size);
	return p;
}

/* rarena_strndup: see neki/rarena.h. */
char *
rarena_strndup(struct rarena *a, const char *s, size_t len)
{
	char *p = rarena_alloc(a, len + 1);

	if (p) {
		memcpy(p, s, len);
		p[len] = '\0';
	}
	return p;
}

/* rarena_strdup: see neki/rarena.h. */
char *
rarena_strdup(struct rarena *a, const char *s)
{
	return rarena_strndup(a, s, strlen(s));
}

/* rarena_used: see neki/rarena.h. */
size_t
rarena_used(const struct rarena *a)
{
	return a->total;
}
