/*
 * route_oids.c - authoritative OIDs of user-defined types on a routed session: DDL fan-out
 * gives an enum, a domain or a composite type a different OID on each shard, and drivers
 * cache type OIDs (pgjdbc, psycopg, node-postgres), so the client always sees the
 * authoritative shard's. A RowDescription or ParameterDescription from another shard has its
 * OIDs rewritten in place before whoever reads it (forward, merge, portals); the parameter
 * types of a Parse sent to another shard are translated to that shard's OIDs. The pairs are
 * the catalog's (src/catalog/oidmap.c), loaded by the admin and refreshed after DDL.
 * Entry points: route_oids_answer(), route_oids_send().
 */
#include "neki/base.h"

#include "route_oids.h"

#include <stdlib.h>
#include <string.h>

#include "neki/catalog_image.h"
#include "route_int.h"
#include "route_client.h"

#define ROIDS_FIRST_USER 16384	/* FirstNormalObjectId: OIDs below are built-in */

static uint32_t
get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void
put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static uint16_t
get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

/* Translate the user-defined OID at <p> through <cv> for <shard>. */
static void
map_at(const struct cat_view *cv, const char *shard, uint8_t *p, bool to_auth)
{
	uint32_t oid = get32(p);

	if (oid >= ROIDS_FIRST_USER)
		put32(p, cat_view_type_oid(cv, shard, oid, to_auth));
}

/* The offset of the type OID of the field at <pos> of RowDescription <m> (<len> bytes, type
 * byte included), *<next> the next field's; 0 when malformed. */
static uint32_t
rowdesc_type_at(const uint8_t *m, uint32_t len, uint32_t pos, uint32_t *next)
{
	const uint8_t *nul = pos < len ? memchr(m + pos, '\0', len - pos) : NULL;
	uint32_t at = nul != NULL ? (uint32_t)(nul - m) + 1 : 0;

	if (nul == NULL || at + 18 > len)
		return 0;
	*next = at + 18;
	return at + 6;		/* (after table oid, attnum) */
}

/*
 * Does the whole RowDescription (<rowdesc>) or ParameterDescription <m> (<len> bytes, type
 * byte included) name a user-defined type? A built-in type's OID is the same on every shard:
 * nothing to map, no catalog to read. A malformed one does (it is left to the mapping).
 */
static bool
names_user_type(const uint8_t *m, uint32_t len, bool rowdesc)
{
	uint32_t pos = 7, at, n = len >= 7 ? get16(m + 5) : 0;

	for (uint32_t i = 0; i < n; i++) {
		if (rowdesc)
			at = rowdesc_type_at(m, len, pos, &pos);
		else
			at = 7 + 4 * (i + 1) <= len ? 7 + 4 * i : 0;
		if (at == 0 || get32(m + at) >= ROIDS_FIRST_USER)
			return true;
	}
	return false;
}

/* The OIDs of RowDescription <m> (<len> bytes, type byte included). */
static void
map_rowdesc(const struct cat_view *cv, const char *shard, uint8_t *m, uint32_t len)
{
	uint32_t pos = 7, at, n = len >= 7 ? get16(m + 5) : 0;

	for (uint32_t i = 0; i < n; i++) {
		if ((at = rowdesc_type_at(m, len, pos, &pos)) == 0)
			return;		/* (malformed: left as it is) */
		map_at(cv, shard, m + at, true);
	}
}

/* The <n> parameter OIDs at <p> (<avail> bytes there). */
static void
map_params(const struct cat_view *cv, const char *shard, uint8_t *p, size_t avail,
	   bool to_auth)
{
	uint16_t n = avail >= 2 ? get16(p) : 0;

	for (uint32_t i = 0; i < n && 2 + 4 * (size_t)(i + 1) <= avail; i++)
		map_at(cv, shard, p + 2 + 4 * i, to_auth);
}

/* route_oids_answer: see route_oids.h. */
enum roids_step
route_oids_answer(struct route *r, struct rshard *sh, struct link *l,
		  const struct sbuf_pkt *pkt)
{
	struct cat_view cv;
	uint8_t *m;

	if (pkt->type != 'T' && pkt->type != 't')
		return ROIDS_GO;
	if (pkt->avail == pkt->len && !names_user_type(pkt->data, pkt->len, pkt->type == 'T'))
		return ROIDS_GO;
	cat_view_acquire(&cv, r->db);
	if (!cat_view_shard_has_oids(&cv, sh->uid)) {
		cat_view_release(&cv);
		return ROIDS_GO;
	}
	if (pkt->avail < pkt->len) {
		cat_view_release(&cv);
		if (sbuf_hold(link_sbuf(l), pkt->len))
			return ROIDS_HELD;
		route_client_fatal(r, "server sent too big packet");
		return ROIDS_FAIL;
	}
	m = sbuf_rewrite(link_sbuf(l), pkt);
	if (m != NULL && pkt->type == 'T')
		map_rowdesc(&cv, sh->uid, m, pkt->len);
	else if (m != NULL)
		map_params(&cv, sh->uid, m + 5, pkt->len - 5, true);
	cat_view_release(&cv);
	return ROIDS_GO;
}

/* Does <msg>/<len> hold a Parse declaring a user-defined parameter type? */
static bool
has_user_param(const uint8_t *msg, size_t len)
{
	for (size_t pos = 0; pos + 5 <= len;) {
		size_t mlen = 1 + (size_t)get32(msg + pos + 1);
		const uint8_t *e = msg + pos + (mlen <= len - pos ? mlen : len - pos);
		const uint8_t *q = msg + pos + 5;

		if (mlen < 5 || q > e)
			return false;	/* (not messages: left as they are) */
		if (msg[pos] == 'P' && (q = memchr(q, '\0', (size_t)(e - q))) != NULL &&
		    (q = memchr(q + 1, '\0', (size_t)(e - q - 1))) != NULL)
			for (q += 3; q + 4 <= e; q += 4)
				if (get32(q) >= ROIDS_FIRST_USER)
					return true;
		pos += mlen;
	}
	return false;
}

/* Translate the parameter types of every Parse in <msg>/<len> for <shard>. */
static void
map_parses(const struct cat_view *cv, const char *shard, uint8_t *msg, size_t len)
{
	for (size_t pos = 0; pos + 5 <= len;) {
		size_t mlen = 1 + (size_t)get32(msg + pos + 1);
		uint8_t *e = msg + pos + (mlen <= len - pos ? mlen : len - pos);
		uint8_t *q = msg + pos + 5;

		if (mlen < 5 || q > e)
			return;
		if (msg[pos] == 'P' && (q = memchr(q, '\0', (size_t)(e - q))) != NULL &&
		    (q = memchr(q + 1, '\0', (size_t)(e - q - 1))) != NULL)
			map_params(cv, shard, q + 1, (size_t)(e - q - 1), false);
		pos += mlen;
	}
}

/* route_oids_send: see route_oids.h. */
bool
route_oids_send(struct route *r, struct rshard *sh, const uint8_t *msg, size_t len)
{
	struct cat_view cv;
	uint8_t *copy;
	bool ok;

	if (!has_user_param(msg, len))
		return link_send(sh->link, msg, len);
	cat_view_acquire(&cv, r->db);
	if (!cat_view_shard_has_oids(&cv, sh->uid) || (copy = malloc(len)) == NULL) {
		cat_view_release(&cv);
		return link_send(sh->link, msg, len);
	}
	memcpy(copy, msg, len);
	map_parses(&cv, sh->uid, copy, len);
	cat_view_release(&cv);
	ok = link_send(sh->link, copy, len);
	free(copy);
	return ok;
}
