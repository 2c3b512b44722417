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
 * Unnamed statements and portals pass untouched (session_fwd.c). Entry point: prep_client_msg().
 * The router (route_exec.c) keeps its sessions' named statements prepared on shard links the
 * same way, with the same table and link LRU: prep_stmt_ref(), prep_link_prepare().
 */
#include "neki/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "neki/log.h"
#include "neki/pktbuf.h"
#include "neki/proto.h"
#include "session_int.h"

#define PREP_BUCKETS 4096		/* worker table buckets (a power of two) */
#define PREP_NOOP_NAME "NEKI_NOOP"	/* never prepared: Close of it is a no-op */

static struct prep_stmt *prep_table[PREP_BUCKETS];	/* owned chains */
static uint64_t prep_next_id = 1;
static size_t prep_n;
static size_t prep_bytes;	/* query texts and parameter types of the table's statements */

/* FNV-1a over the query text and the parameter type bytes. */
static uint64_t
prep_hash(const char *q, size_t qlen, const uint8_t *oids, size_t olen)
{
	uint64_t h = UINT64_C(14695981039346656037);

	for (size_t i = 0; i < qlen; i++)
		h = (h ^ (uint8_t)q[i]) * UINT64_C(1099511628211);
	for (size_t i = 0; i < olen; i++)
		h = (h ^ oids[i]) * UINT64_C(1099511628211);
	return h;
}

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

/* The table entry for <m> (found or created), with one more reference; NULL without memory. */
static struct prep_stmt *
prep_stmt_get(const struct proto_parse_msg *m)
{
	return prep_stmt_ref(m->query, m->oids, m->nparams);
}

struct prep_stmt *
prep_stmt_ref(const char *query, const uint8_t *oids, uint16_t nparams)
{
	size_t qlen = strlen(query), olen = (size_t)nparams * 4;
	uint64_t h = prep_hash(query, qlen, oids, olen);
	struct prep_stmt **b = &prep_table[h & (PREP_BUCKETS - 1)], *st;

	for (st = *b; st != NULL; st = st->hnext) {
		if (st->hash == h && st->query_len == qlen && st->nparams == nparams &&
		    memcmp(st->query, query, qlen) == 0 &&
		    (olen == 0 || memcmp(st->oids, oids, olen) == 0)) {
			st->refs++;
			return st;
		}
	}
	st = calloc(1, sizeof(*st));
	if (st == NULL)
		return NULL;
	st->query = malloc(qlen + 1);
	st->oids = malloc(olen ? olen : 1);
	if (st->query == NULL || st->oids == NULL) {
		free(st->query);
		free(st->oids);
		free(st);
		return NULL;
	}
	memcpy(st->query, query, qlen + 1);
	if (olen > 0)
		memcpy(st->oids, oids, olen);
	st->query_len = qlen;
	st->nparams = nparams;
	st->hash = h;
	st->id = prep_next_id++;
	snprintf(st->name, sizeof(st->name), "NEKI_%llu", (unsigned long long)st->id);
	st->refs = 1;
	st->hnext = *b;
	*b = st;
	prep_n++;
	prep_bytes += qlen + 1 + (olen ? olen : 1);
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
	for (pp = &prep_table[st->hash & (PREP_BUCKETS - 1)]; *pp != NULL; pp = &(*pp)->hnext) {
		if (*pp == st) {
			*pp = st->hnext;
			break;
		}
	}
	prep_n--;
	prep_bytes -= st->query_len + 1 + (st->nparams ? (size_t)st->nparams * 4 : 1);
	free(st->query);
	free(st->oids);
	free(st);
}

/* ---- client names ---- */

static struct prep_name *
prep_client_find(const struct prep_client *pc, const char *name)
{
	for (struct prep_name *n = pc->names; n != NULL; n = n->next) {
		if (strcmp(n->name, name) == 0)
			return n;
	}
	return NULL;
}

static bool
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

static void
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

static ssize_t
prep_link_find(const struct prep_link *pl, const struct prep_stmt *st)
{
	for (size_t i = pl->n; i > 0; i--) {
		if (pl->lru[i - 1] == st)
			return (ssize_t)(i - 1);
	}
	return -1;
}

/* Move entry <i> to the most recent end. */
static void
prep_link_touch(struct prep_link *pl, size_t i)
{
	struct prep_stmt *st = pl->lru[i];

	memmove(&pl->lru[i], &pl->lru[i + 1], (pl->n - i - 1) * sizeof(pl->lru[0]));
	pl->lru[pl->n - 1] = st;
}

static void
prep_link_remove_at(struct prep_link *pl, size_t i)
{
	struct prep_stmt *st = pl->lru[i];

	memmove(&pl->lru[i], &pl->lru[i + 1], (pl->n - i - 1) * sizeof(pl->lru[0]));
	pl->n--;
	prep_stmt_unref(st);
}

static bool
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
static bool
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

/*
 * Parse of <st> under its internal name, tracked; <swallow> when the client did not ask.
 * <counted>: the server lacked the statement (server_parse_count, as pgbouncer counts it).
 */
static bool
prep_write_parse(struct session *s, struct pktbuf *pb, struct prep_stmt *st, bool swallow,
		 bool counted)
{
	bool ok;

	if (!prep_put_parse(pb, st))
		return false;
	ok = sess_track_request(s, REQ_PARSE, swallow, st);
	if (counted)
		sess_stats(s)->total_server_parse_count++;
	return ok;
}

/* Room for one more statement on the link: Close the least recently used one. */
static bool
prep_make_room(struct session *s, struct prep_link *pl, struct pktbuf *pb)
{
	int setting = cfg_current()->max_prepared_statements;
	size_t max = setting > 0 ? (size_t)setting : 1;	/* 0 = off, from the next batch on */

	while (pl->n > 0 && pl->n >= max) {
		pktbuf_write_close(pb, 'S', pl->lru[0]->name);
		if (!sess_track_request(s, REQ_CLOSE, true, NULL))
			return false;
		prep_link_remove_at(pl, 0);
	}
	return true;
}

/* Make sure the link's server has <st> (inject a swallowed Parse when it does not). */
static bool
prep_ensure(struct session *s, struct link_ext *ext, struct pktbuf *pb, struct prep_stmt *st)
{
	ssize_t i = prep_link_find(&ext->prep, st);

	if (i >= 0) {
		prep_link_touch(&ext->prep, (size_t)i);
		return true;
	}
	return prep_make_room(s, &ext->prep, pb) && prep_write_parse(s, pb, st, true, true) &&
	       prep_link_add(&ext->prep, st);
}

/* prep_link_prepare: see session_int.h. */
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

static bool
prep_oom(struct nk_error *err)
{
	return nk_error_set(err, "53200", "out of memory");
}

static bool
prep_unknown(struct nk_error *err)
{
	return nk_error_set(err, "08P01", "prepared statement did not exist");
}

static bool
prep_on_parse(struct session *s, struct link_ext *ext, const uint8_t *body, size_t len,
	      struct pktbuf *pb, struct nk_error *err)
{
	struct proto_parse_msg m;
	struct prep_stmt *st;
	ssize_t i;
	bool ok;

	if (!proto_parse_parse(body, len, &m, err))
		return false;
	sess_stats(s)->total_client_parse_count++;
	if (prep_client_find(&s->prep, m.name) != NULL) {
		/* pgbouncer closes such a client too: its statement names map 1:1 */
		sess_log(s, LOG_LVL_ERROR, "prepared statement '%s' was already prepared", m.name);
		return nk_error_set(err, "42P05", "prepared statement \"%s\" already exists",
				    m.name);
	}
	if ((st = prep_stmt_get(&m)) == NULL)
		return prep_oom(err);
	ok = prep_client_add(&s->prep, m.name, st);
	i = prep_link_find(&ext->prep, st);
	if (ok && i >= 0) {
		/*
		 * The server has it: Close + Parse, so that the ParseComplete is the server's
		 * and comes in order. Not a server parse in pgbouncer's count, which answers
		 * this Parse itself.
		 */
		pktbuf_write_close(pb, 'S', st->name);
		ok = sess_track_request(s, REQ_CLOSE, true, NULL);
		prep_link_touch(&ext->prep, (size_t)i);
		ok = ok && prep_write_parse(s, pb, st, false, false);
	} else if (ok) {
		ok = prep_make_room(s, &ext->prep, pb) &&
		     prep_write_parse(s, pb, st, false, true) && prep_link_add(&ext->prep, st);
	}
	prep_stmt_unref(st);
	return ok ? true : prep_oom(err);
}

/* Bind: portal name, statement name, then the rest of the message unchanged. */
static bool
prep_on_bind(struct session *s, struct link_ext *ext, const uint8_t *body, size_t len,
	     struct pktbuf *pb, struct nk_error *err)
{
	struct proto_reader r;
	const char *portal, *stmt;
	struct prep_name *n;
	size_t left;

	proto_reader_init(&r, 'B', body, len);
	portal = proto_get_string(&r);
	stmt = proto_get_string(&r);
	if (!proto_reader_ok(&r))
		return proto_reader_error(&r, err);
	if ((n = prep_client_find(&s->prep, stmt)) == NULL)
		return prep_unknown(err);
	if (!prep_ensure(s, ext, pb, n->st))
		return prep_oom(err);
	left = proto_reader_left(&r);
	pktbuf_begin(pb, 'B');
	pktbuf_put_string(pb, portal);
	pktbuf_put_string(pb, n->st->name);
	pktbuf_put_bytes(pb, proto_get_bytes(&r, left), left);
	pktbuf_end(pb);
	sess_stats(s)->total_bind_count++;
	return true;
}

static bool
prep_on_describe(struct session *s, struct link_ext *ext, const uint8_t *body, size_t len,
		 struct pktbuf *pb, struct nk_error *err)
{
	struct proto_target_msg m;
	struct prep_name *n;

	if (!proto_parse_describe(body, len, &m, err))
		return false;
	if ((n = prep_client_find(&s->prep, m.name)) == NULL)
		return prep_unknown(err);
	if (!prep_ensure(s, ext, pb, n->st))
		return prep_oom(err);
	pktbuf_write_describe(pb, 'S', n->st->name);
	return true;
}

static bool
prep_on_close(struct session *s, const uint8_t *body, size_t len, struct pktbuf *pb,
	      struct nk_error *err)
{
	struct proto_target_msg m;

	if (!proto_parse_close(body, len, &m, err))
		return false;
	prep_client_remove(&s->prep, m.name);
	pktbuf_write_close(pb, 'S', PREP_NOOP_NAME);
	return sess_track_request(s, REQ_CLOSE, false, NULL) ? true : prep_oom(err);
}

bool
prep_client_msg(struct session *s, struct link *l, const uint8_t *pkt, uint32_t len,
		struct nk_error *err, bool *fatal)
{
	struct link_ext *ext = spool_link_ext(l);
	const uint8_t *body = pkt + 5;
	size_t blen = len - 5;
	struct pktbuf pb;
	bool ok = false;

	*fatal = true;
	if (ext == NULL)
		return prep_oom(err);
	pktbuf_init(&pb, len + 64);
	switch (pkt[0]) {
	case 'P':
		ok = prep_on_parse(s, ext, body, blen, &pb, err);
		break;
	case 'B':
		ok = prep_on_bind(s, ext, body, blen, &pb, err);
		break;
	case 'D':
		ok = prep_on_describe(s, ext, body, blen, &pb, err);
		break;
	case 'C':
		ok = prep_on_close(s, body, blen, &pb, err);
		break;
	default:
		nk_error_set(err, "08P01", "unexpected message type \"%c\"", pkt[0]);
		break;
	}
	if (ok && (pktbuf_failed(&pb) || !link_send(l, pb.buf, pb.len)))
		ok = prep_oom(err);
	pktbuf_cleanup(&pb);
	return ok;
}
