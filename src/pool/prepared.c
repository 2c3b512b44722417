/*
 * prepared.c - protocol-level prepared statements in transaction and statement mode
 * (pgbouncer 1.21+'s max_prepared_statements, spec/PGBOUNCER-INTERFACE.md §5.3).
 *
 * - A worker-wide table deduplicates statements by (query text, parameter types); each gets
 *   the internal name NEKI_<n>.
 * - Each client maps its own names to table entries (struct prep_client).
 * - Each link remembers which entries its server has prepared, as an LRU of at most
 *   max_prepared_statements (struct prep_link, in the link's extension data); eviction sends
 *   Close and swallows its CloseComplete.
 * - Parse, Bind, Describe('S') and Close('S') with a name are rewritten; a link lacking the
 *   statement gets a Parse injected first (its ParseComplete swallowed). A client Parse of a
 *   statement the link already has becomes Close + Parse, so the client's ParseComplete comes
 *   from the server in order. A client Close('S') drops the name and becomes a Close of a name
 *   that never exists, which the server answers with CloseComplete, again in order.
 * Unnamed statements and portals pass untouched (session_fwd.c). The rewriting of a client's
 * messages is src/worker/session_prep.c (prep_client_msg()); this file keeps the table, the
 * client names and the link LRU. The router (route_exec.c) keeps its sessions' named statements prepared on shard links the
 * same way, with the same table and link LRU: prep_stmt_ref(), prep_link_prepare().
 */
#include "neki/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "neki/hash.h"
#include "neki/log.h"
#include "neki/pktbuf.h"
#include "neki/proto.h"
#include "neki/link.h"
#include "neki/prepared.h"
#include "neki/spool.h"

#define PREP_BUCKETS 4096		/* worker table buckets (a power of two) */

static struct prep_stmt *prep_table[PREP_BUCKETS];	/* owned chains */
static size_t prep_n;
static size_t prep_bytes;	/* query texts and parameter types of the table's statements */

size_t
prep_stmt_count(void)
{
	return prep_n;
}

size_t
prep_stmt_text_bytes(void)
{
	return prep_bytes;
}

/* The statement's key: the text with its NUL (so it ends unambiguously), the types. */
static struct nk_hash128
prep_key(const char *query, size_t qlen, const uint8_t *oids, size_t olen)
{
	return nk_hash128_keyed(query, qlen + 1, oids, olen);
}

static struct prep_stmt **
prep_bucket(struct nk_hash128 key)
{
	return &prep_table[key.lo & (PREP_BUCKETS - 1)];
}

/* The entry of <key>, NULL when the table has none. */
static struct prep_stmt *
prep_find_key(struct nk_hash128 key)
{
	for (struct prep_stmt *st = *prep_bucket(key); st != NULL; st = st->hnext)
		if (st->key.lo == key.lo && st->key.hi == key.hi)
			return st;
	return NULL;
}

/* A new entry of <key> without its text (refs 1), in the table; NULL without memory. */
static struct prep_stmt *
prep_stmt_new(struct nk_hash128 key)
{
	struct prep_stmt *st = calloc(1, sizeof(*st)), **b = prep_bucket(key);

	if (st == NULL)
		return NULL;
	st->key = key;
	snprintf(st->name, sizeof(st->name), "NEKI_%016llx%016llx", (unsigned long long)key.hi,
		 (unsigned long long)key.lo);
	st->refs = 1;
	st->hnext = *b;
	*b = st;
	prep_n++;
	return st;
}

/* Give <st> its text and parameter types; false without memory (it stays without). */
static bool
prep_stmt_set_text(struct prep_stmt *st, const char *query, size_t qlen, const uint8_t *oids,
		   uint16_t nparams)
{
	size_t olen = (size_t)nparams * 4;
	char *q = malloc(qlen + 1);
	uint8_t *o = malloc(olen ? olen : 1);

	if (q == NULL || o == NULL) {
		free(q);
		free(o);
		return false;
	}
	memcpy(q, query, qlen + 1);
	if (olen > 0)
		memcpy(o, oids, olen);
	st->query = q;
	st->oids = o;
	st->query_len = qlen;
	st->nparams = nparams;
	prep_bytes += qlen + 1 + (olen ? olen : 1);
	return true;
}

/* The table entry for <m> (found or created), with one more reference; NULL without memory. */
struct prep_stmt *
prep_stmt_get(const struct proto_parse_msg *m)
{
	return prep_stmt_ref(m->query, m->oids, m->nparams);
}

struct prep_stmt *
prep_stmt_ref(const char *query, const uint8_t *oids, uint16_t nparams)
{
	size_t qlen = strlen(query);
	struct nk_hash128 key = prep_key(query, qlen, oids, (size_t)nparams * 4);
	struct prep_stmt *st = prep_find_key(key);

	if (st != NULL) {
		st->refs++;
		if (st->query == NULL && !prep_stmt_set_text(st, query, qlen, oids, nparams)) {
			prep_stmt_unref(st);
			return NULL;
		}
		return st;
	}
	if ((st = prep_stmt_new(key)) == NULL)
		return NULL;
	if (!prep_stmt_set_text(st, query, qlen, oids, nparams)) {
		prep_stmt_unref(st);
		return NULL;
	}
	return st;
}

/* prep_stmt_ref_key: see session_int.h. */
struct prep_stmt *
prep_stmt_ref_key(struct nk_hash128 key)
{
	struct prep_stmt *st = prep_find_key(key);

	if (st == NULL)
		return prep_stmt_new(key);
	st->refs++;
	return st;
}

struct prep_stmt *
prep_stmt_addref(struct prep_stmt *st)
{
	st->refs++;
	return st;
}

void
prep_stmt_unref(struct prep_stmt *st)
{
	struct prep_stmt **pp;

	NK_ASSERT(st->refs > 0);
	if (--st->refs > 0)
		return;
	for (pp = prep_bucket(st->key); *pp != NULL; pp = &(*pp)->hnext) {
		if (*pp == st) {
			*pp = st->hnext;
			break;
		}
	}
	prep_n--;
	if (st->query != NULL)
		prep_bytes -= st->query_len + 1 + (st->nparams ? (size_t)st->nparams * 4 : 1);
	free(st->query);
	free(st->oids);
	free(st);
}

/* ---- client names ---- */

struct prep_name *
prep_client_find(const struct prep_client *pc, const char *name)
{
	for (struct prep_name *n = pc->names; n != NULL; n = n->next) {
		if (strcmp(n->name, name) == 0)
			return n;
	}
	return NULL;
}

bool
prep_client_add(struct prep_client *pc, const char *name, struct prep_stmt *st)
{
	struct prep_name *n = calloc(1, sizeof(*n));

	if (n == NULL || (n->name = strdup(name)) == NULL) {
		free(n);
		return false;
	}
	n->st = st;
	st->refs++;
	n->next = pc->names;
	pc->names = n;
	pc->count++;
	return true;
}

void
prep_client_remove(struct prep_client *pc, const char *name)
{
	for (struct prep_name **pp = &pc->names; *pp != NULL; pp = &(*pp)->next) {
		struct prep_name *n = *pp;

		if (strcmp(n->name, name) == 0) {
			*pp = n->next;
			prep_stmt_unref(n->st);
			free(n->name);
			free(n);
			pc->count--;
			return;
		}
	}
}

void
prep_client_clear(struct prep_client *pc)
{
	while (pc->names != NULL) {
		struct prep_name *n = pc->names;

		pc->names = n->next;
		prep_stmt_unref(n->st);
		free(n->name);
		free(n);
	}
	pc->count = 0;
}

void
prep_client_cleanup(struct prep_client *pc)
{
	prep_client_clear(pc);
}

/* ---- link LRU ---- */

ssize_t
prep_link_find(const struct prep_link *pl, const struct prep_stmt *st)
{
	for (size_t i = pl->n; i > 0; i--) {
		if (pl->lru[i - 1] == st)
			return (ssize_t)(i - 1);
	}
	return -1;
}

/* Move entry <i> to the most recent end. */
void
prep_link_touch(struct prep_link *pl, size_t i)
{
	struct prep_stmt *st = pl->lru[i];

	memmove(&pl->lru[i], &pl->lru[i + 1], (pl->n - i - 1) * sizeof(pl->lru[0]));
	pl->lru[pl->n - 1] = st;
}

void
prep_link_remove_at(struct prep_link *pl, size_t i)
{
	struct prep_stmt *st = pl->lru[i];

	memmove(&pl->lru[i], &pl->lru[i + 1], (pl->n - i - 1) * sizeof(pl->lru[0]));
	pl->n--;
	prep_stmt_unref(st);
}

bool
prep_link_add(struct prep_link *pl, struct prep_stmt *st)
{
	if (pl->n == pl->cap) {
		size_t ncap = pl->cap ? pl->cap * 2 : 16;
		struct prep_stmt **nl = realloc(pl->lru, ncap * sizeof(*nl));

		if (nl == NULL)
			return false;
		pl->lru = nl;
		pl->cap = ncap;
	}
	pl->lru[pl->n++] = st;
	st->refs++;
	return true;
}

void
prep_link_clear(struct prep_link *pl)
{
	while (pl->n > 0)
		prep_link_remove_at(pl, pl->n - 1);
}

void
prep_link_cleanup(struct prep_link *pl)
{
	prep_link_clear(pl);
	free(pl->lru);
	pl->lru = NULL;
	pl->cap = 0;
}

void
prep_link_confirm(struct link *l, struct prep_stmt *st)
{
	struct link_ext *ext = spool_link_ext(l);
	ssize_t i;

	if (ext != NULL && (i = prep_link_find(&ext->prep, st)) >= 0)
		prep_link_touch(&ext->prep, (size_t)i);
}

void
prep_link_forget(struct link *l, struct prep_stmt *st)
{
	struct link_ext *ext = spool_link_ext(l);
	ssize_t i;

	if (ext != NULL && (i = prep_link_find(&ext->prep, st)) >= 0)
		prep_link_remove_at(&ext->prep, (size_t)i);
}

/* ---- rewriting ---- */

/* Parse of <st> under its internal name into <pb>; false without memory. */
bool
prep_put_parse(struct pktbuf *pb, const struct prep_stmt *st)
{
	uint32_t oids_small[64] = { 0 }, *oids = oids_small;

	if (st->nparams > NK_ARRAY_LEN(oids_small) &&
	    (oids = malloc(st->nparams * sizeof(*oids))) == NULL)
		return false;
	for (size_t i = 0; i < st->nparams; i++) {
		const uint8_t *p = st->oids + i * 4;

		oids[i] = ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) |
			  p[3];
	}
	pktbuf_write_parse(pb, st->name, st->query, st->nparams > 0 ? oids : NULL, st->nparams);
	if (oids != oids_small)
		free(oids);
	return true;
}

/* prep_link_prepare: see neki/prepared.h. */
bool
prep_link_prepare(struct link *l, struct prep_stmt *st, size_t max, struct pktbuf *pb,
		  bool *parsed)
{
	struct link_ext *ext = spool_link_ext(l);
	ssize_t i;

	*parsed = false;
	if (ext == NULL)
		return false;
	if ((i = prep_link_find(&ext->prep, st)) >= 0) {
		prep_link_touch(&ext->prep, (size_t)i);
		return true;
	}
	while (ext->prep.n > 0 && ext->prep.n >= max) {	/* room: the least recently used go */
		pktbuf_write_close(pb, 'S', ext->prep.lru[0]->name);
		prep_link_remove_at(&ext->prep, 0);
	}
	if (!prep_put_parse(pb, st) || !prep_link_add(&ext->prep, st))
		return false;
	*parsed = true;
	return true;
}

/* ---- a link's statements when it moves to another worker ---- */

/* prep_link_export: see neki/prepared.h. */
void
prep_link_export(const struct prep_link *pl, struct pktbuf *pb)
{
	pktbuf_put_int16(pb, (int16_t)pl->n);
	for (size_t i = 0; i < pl->n; i++) {	/* least recently used first */
		pktbuf_put_uint64(pb, pl->lru[i]->key.hi);
		pktbuf_put_uint64(pb, pl->lru[i]->key.lo);
	}
}

/* prep_link_import: see session_int.h. */
bool
prep_link_import(struct prep_link *pl, struct proto_reader *r)
{
	uint16_t n = proto_get_uint16(r);

	for (uint16_t i = 0; i < n && proto_reader_ok(r); i++) {
		struct nk_hash128 key;
		struct prep_stmt *st;
		bool ok;

		key.hi = proto_get_uint64(r);
		key.lo = proto_get_uint64(r);
		if (!proto_reader_ok(r))
			break;
		if ((st = prep_stmt_ref_key(key)) == NULL)
			return false;
		ok = prep_link_find(pl, st) >= 0 || prep_link_add(pl, st);
		prep_stmt_unref(st);
		if (!ok)
			return false;
	}
	return proto_reader_ok(r);
}
