/*
 * sequence.c - the per-worker sequence allocator (spec 6.1): each sequence keeps a FIFO of
 * runs of reserved values (first, count, increment) and hands them out in order; a refill
 * reserves max(sequence_batch, CACHE, need) values on the home shard with one statement
 * (seq_reserve_sql) that calls nextval() once per value, so every value the router hands
 * out came from the sequence itself and no two routers or workers ever get the same one.
 * Also the SQL of uuidv7() for servers that lack it. Entry points: see neki/sequence.h.
 */
#include "neki/base.h"

#include "neki/hash.h"
#include "neki/sequence.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct seq_run {
	int64_t next;		/* next value to hand out */
	int64_t left;		/* values left in the run */
	int64_t inc;
};

struct seq_entry {
	char *key;		/* "db\0schema\0name" flattened with '\x1f' separators */
	struct seq_run *runs;	/* FIFO: runs[head .. nruns) */
	uint32_t head, nruns, cap;
	uint64_t available;
	bool refilling;
	uint64_t gen;		/* setval() generation the runs were reserved under */
	uint64_t refill_gen;	/* ... and the one of the refill in flight */
};

struct seq_alloc {
	int64_t batch;
	struct seq_entry **slots;	/* open addressing, power-of-two size */
	uint32_t nslots, nused;
};


struct seq_alloc *
seq_alloc_new(int64_t batch)
{
	struct seq_alloc *a = calloc(1, sizeof(*a));

	if (!a)
		return NULL;
	a->batch = batch > 0 ? batch : 1;
	a->nslots = 16;
	a->slots = calloc(a->nslots, sizeof(*a->slots));
	if (!a->slots) {
		free(a);
		return NULL;
	}
	return a;
}

void
seq_alloc_free(struct seq_alloc *a)
{
	if (!a)
		return;
	for (uint32_t i = 0; i < a->nslots; i++) {
		if (!a->slots[i])
			continue;
		free(a->slots[i]->key);
		free(a->slots[i]->runs);
		free(a->slots[i]);
	}
	free(a->slots);
	free(a);
}

/* Slot of <key>: its entry's, or the empty one where it would go. */
static uint32_t
slot_of(const struct seq_alloc *a, const char *key)
{
	uint32_t i = (uint32_t)nk_hash64_str(key) & (a->nslots - 1);

	while (a->slots[i] && strcmp(a->slots[i]->key, key) != 0)
		i = (i + 1) & (a->nslots - 1);
	return i;
}

static bool
grow(struct seq_alloc *a)
{
	struct seq_entry **old = a->slots;
	uint32_t n = a->nslots;

	a->slots = calloc((size_t)n * 2, sizeof(*a->slots));
	if (!a->slots) {
		a->slots = old;
		return false;
	}
	a->nslots = n * 2;
	for (uint32_t i = 0; i < n; i++)
		if (old[i])
			a->slots[slot_of(a, old[i]->key)] = old[i];
	free(old);
	return true;
}

struct seq_entry *
seq_alloc_get(struct seq_alloc *a, const char *db, const char *schema, const char *name)
{
	char key[512];
	struct seq_entry *e;
	uint32_t i;
	int len = snprintf(key, sizeof(key), "%s\x1f%s\x1f%s", db ? db : "", schema, name);

	if (len < 0 || (size_t)len >= sizeof(key))
		return NULL;
	i = slot_of(a, key);
	if (a->slots[i])
		return a->slots[i];
	if ((a->nused + 1) * 4 > a->nslots * 3) {
		if (!grow(a))
			return NULL;
		i = slot_of(a, key);
	}
	e = calloc(1, sizeof(*e));
	if (!e || !(e->key = strdup(key))) {
		free(e);
		return NULL;
	}
	a->slots[i] = e;
	a->nused++;
	return e;
}

uint64_t
seq_available(const struct seq_entry *e)
{
	return e->available;
}

bool
seq_take(struct seq_entry *e, uint32_t n, int64_t *out)
{
	if (e->available < n)
		return false;
	for (uint32_t i = 0; i < n; i++) {
		struct seq_run *r = &e->runs[e->head];

		out[i] = r->next;
		r->left--;
		if (r->left > 0)
			r->next += r->inc;
		else
			e->head++;
	}
	e->available -= n;
	if (e->head == e->nruns)
		e->head = e->nruns = 0;
	return true;
}

int64_t
seq_refill_begin(struct seq_alloc *a, struct seq_entry *e, int64_t cache, uint32_t need)
{
	int64_t n = a->batch;

	if (e->refilling)
		return 0;
	e->refilling = true;
	e->refill_gen = e->gen;
	if (cache > n)
		n = cache;
	if ((uint64_t)need > e->available && (int64_t)(need - e->available) > n)
		n = (int64_t)(need - e->available);
	return n;
}

static bool
parse_i64(const char *s, int64_t *out)
{
	char *end;

	if (!s || !*s)
		return false;
	errno = 0;
	*out = strtoll(s, &end, 10);
	return errno == 0 && *end == '\0';
}

bool
seq_refill_add_run(struct seq_entry *e, const char *first, const char *count, const char *inc,
		   struct nk_error *err)
{
	struct seq_run r;

	if (!parse_i64(first, &r.next) || !parse_i64(count, &r.left) || !parse_i64(inc, &r.inc) ||
	    r.left <= 0 || r.inc == 0)
		return nk_error_set(err, ERRCODE_INVALID_TEXT_REPRESENTATION,
				    "invalid sequence reservation row (%s, %s, %s)",
				    first ? first : "NULL", count ? count : "NULL",
				    inc ? inc : "NULL");
	if (e->refill_gen != e->gen)
		return true;	/* reserved before a setval(): dropped */
	if (e->nruns == e->cap) {
		uint32_t cap = e->cap ? e->cap * 2 : 4;
		struct seq_run *nr = realloc(e->runs, cap * sizeof(*nr));

		if (!nr)
			return nk_error_oom(err);
		e->runs = nr;
		e->cap = cap;
	}
	e->runs[e->nruns++] = r;
	e->available += (uint64_t)r.left;
	return true;
}

/* seq_sync: see neki/sequence.h. */
void
seq_sync(struct seq_entry *e, uint64_t gen)
{
	if (e->gen == gen)
		return;
	e->gen = gen;
	e->head = e->nruns = 0;
	e->available = 0;
}

void
seq_refill_end(struct seq_entry *e)
{
	e->refilling = false;
}

bool
seq_refill_pending(const struct seq_entry *e)
{
	return e->refilling;
}

/* Append <s> to <buf> doubling <q> (a quote character); false when <cap> runs out. */
static bool
put_quoted(char *buf, size_t cap, size_t *len, const char *s, char q)
{
	for (; *s; s++) {
		size_t need = *s == q ? 2 : 1;

		if (*len + need >= cap)
			return false;
		if (*s == q)
			buf[(*len)++] = q;
		buf[(*len)++] = *s;
	}
	buf[*len] = '\0';
	return true;
}

/* The regclass literal '"schema"."name"' (double quotes doubled, then single quotes). */
static bool
regclass_literal(char *buf, size_t cap, const char *schema, const char *name)
{
	char ident[300];
	size_t len = 0, out = 0;

	ident[0] = '"';
	len = 1;
	if (!put_quoted(ident, sizeof(ident), &len, schema, '"') || len + 3 >= sizeof(ident))
		return false;
	memcpy(ident + len, "\".\"", 4);
	len += 3;
	if (!put_quoted(ident, sizeof(ident), &len, name, '"') || len + 2 >= sizeof(ident))
		return false;
	ident[len++] = '"';
	ident[len] = '\0';
	if (cap < 3)
		return false;
	buf[out++] = '\'';
	if (!put_quoted(buf, cap, &out, ident, '\'') || out + 2 >= cap)
		return false;
	buf[out++] = '\'';
	buf[out] = '\0';
	return true;
}

/*
 * Runs of consecutive values in call order: a row breaks a run unless it is the previous
 * value plus the sequence's increment (another session took values in between, the
 * sequence cycled, or its increment changed: the run list stays exact in every case).
 */
bool
seq_reserve_sql(char *buf, size_t cap, const char *schema, const char *name, int64_t n)
{
	char rel[700];
	int len;

	if (n <= 0 || !regclass_literal(rel, sizeof(rel), schema, name))
		return false;
	len = snprintf(buf, cap,
		       "SELECT (pg_catalog.array_agg(v ORDER BY i))[1]::text, count(*)::text,"
		       " min(inc)::text FROM ("
		       "SELECT i, v, inc, sum(brk) OVER (ORDER BY i) AS run FROM ("
		       "SELECT i, v, inc, CASE WHEN v = pg_catalog.lag(v) OVER (ORDER BY i) + inc"
		       " THEN 0 ELSE 1 END AS brk FROM ("
		       "SELECT g.i, pg_catalog.nextval(%s::pg_catalog.regclass) AS v,"
		       " (SELECT s.seqincrement FROM pg_catalog.pg_sequence s"
		       " WHERE s.seqrelid = %s::pg_catalog.regclass) AS inc"
		       " FROM pg_catalog.generate_series(1, %lld) AS g(i)) a) b) c"
		       " GROUP BY run ORDER BY run",
		       rel, rel, (long long)n);
	return len > 0 && (size_t)len < cap;
}

static const char uuidv7_sql[] =
	"CREATE OR REPLACE FUNCTION public.uuidv7() RETURNS uuid"
	" LANGUAGE sql VOLATILE PARALLEL SAFE AS $neki$"
	" SELECT pg_catalog.encode("
	"pg_catalog.substr(pg_catalog.int8send(t.us / 1000), 3)"
	" || pg_catalog.int2send((28672 + (t.us % 1000) * 4096 / 1000)::int2)"
	" || pg_catalog.substr(pg_catalog.uuid_send(pg_catalog.gen_random_uuid()), 9),"
	" 'hex')::uuid"
	" FROM (SELECT pg_catalog.floor(EXTRACT(epoch FROM pg_catalog.clock_timestamp())"
	" * 1000000)::int8 AS us) t $neki$";

const char *
seq_uuidv7_sql(void)
{
	return uuidv7_sql;
}
