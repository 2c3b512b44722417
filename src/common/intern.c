/*
 * intern.c - interned strings (neki/intern.h): a chained hash table of reference-counted
 * entries keyed by the text; the string handed out is the entry's own bytes, so
 * intern_unref() finds the entry from the pointer. The table doubles when it holds more
 * entries than buckets and never shrinks (the texts are parameter values: a few hundred at
 * most in a worker). Entry points: intern_ref(), intern_unref(), intern_count().
 */
#include "neki/base.h"
#include "neki/hash.h"
#include "neki/intern.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

struct intern_entry {
	struct intern_entry *next;	/* in its bucket */
	uint32_t refs;
	uint32_t hash;
	char text[];			/* the interned string */
};

static struct intern_entry **intern_buckets;	/* owned: intern_nbuckets chains */
static size_t intern_nbuckets;
static size_t intern_n;

static uint32_t
intern_hash(const char *s)
{
	return (uint32_t)nk_hash64_str(s);
}

/* Double the table (or create it); false on no memory (the old table stays usable). */
static bool
intern_grow(void)
{
	size_t n = intern_nbuckets != 0 ? intern_nbuckets * 2 : 64;
	struct intern_entry **b = calloc(n, sizeof(*b));

	if (b == NULL)
		return false;
	for (size_t i = 0; i < intern_nbuckets; i++) {
		while (intern_buckets[i] != NULL) {
			struct intern_entry *e = intern_buckets[i];

			intern_buckets[i] = e->next;
			e->next = b[e->hash & (n - 1)];
			b[e->hash & (n - 1)] = e;
		}
	}
	free(intern_buckets);
	intern_buckets = b;
	intern_nbuckets = n;
	return true;
}

const char *
intern_ref(const char *s)
{
	uint32_t h;
	size_t len;
	struct intern_entry *e;

	if (s == NULL)
		return NULL;
	h = intern_hash(s);
	if (intern_nbuckets != 0) {
		for (e = intern_buckets[h & (intern_nbuckets - 1)]; e != NULL; e = e->next) {
			if (e->hash == h && strcmp(e->text, s) == 0) {
				e->refs++;
				return e->text;
			}
		}
	}
	if (intern_n >= intern_nbuckets && !intern_grow() && intern_nbuckets == 0)
		return NULL;
	len = strlen(s);
	if ((e = malloc(sizeof(*e) + len + 1)) == NULL)
		return NULL;
	memcpy(e->text, s, len + 1);
	e->refs = 1;
	e->hash = h;
	e->next = intern_buckets[h & (intern_nbuckets - 1)];
	intern_buckets[h & (intern_nbuckets - 1)] = e;
	intern_n++;
	return e->text;
}

void
intern_unref(const char *s)
{
	struct intern_entry *e, **pp;

	if (s == NULL)
		return;
	e = (struct intern_entry *)(void *)((char *)(uintptr_t)s -
					    offsetof(struct intern_entry, text));
	NK_ASSERT(e->refs > 0);
	if (--e->refs > 0)
		return;
	for (pp = &intern_buckets[e->hash & (intern_nbuckets - 1)]; *pp != e; pp = &(*pp)->next)
		NK_ASSERT(*pp != NULL);
	*pp = e->next;
	intern_n--;
	free(e);
}

size_t
intern_count(void)
{
	return intern_n;
}
