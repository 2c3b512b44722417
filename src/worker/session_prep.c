/*
 * session_prep.c - a client's protocol-level prepared statements on its link (the tables
 * and LRUs are src/pool/prepared.c, neki/prepared.h): Parse, Bind, Describe('S') and
 * Close('S') with a name rewritten to the internal names, a Parse injected where the link
 * lacks the statement, the least recently used closed for room, and a link-less client's
 * Parse / Close batch answered here. Entry points: prep_client_msg(), prep_local_batch(),
 * prep_local_answer().
 */
#include "neki/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "neki/log.h"
#include "neki/pktbuf.h"
#include "neki/proto.h"
#include "session_int.h"
#include "session_prep.h"

#define PREP_NOOP_NAME "NEKI_NOOP"	/* never prepared: Close of it is a no-op */

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
	int setting = cfg_current()->pool.max_prepared_statements;
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

static bool
prep_oom(struct nk_error *err)
{
	return nk_error_oom(err);
}

static bool
prep_unknown(struct nk_error *err)
{
	return nk_error_set(err, ERRCODE_PROTOCOL_VIOLATION, "prepared statement did not exist");
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
		return nk_error_set(err, ERRCODE_DUPLICATE_PSTATEMENT,
				    "prepared statement \"%s\" already exists",
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
		nk_error_set(err, ERRCODE_PROTOCOL_VIOLATION,
			     "unexpected message type \"%c\"", pkt[0]);
		break;
	}
	if (ok && (pktbuf_failed(&pb) || !link_send(l, pb.buf, pb.len)))
		ok = prep_oom(err);
	pktbuf_cleanup(&pb);
	return ok;
}

/* ---- Parse and Close answered without a link ---- */

#define PREP_LOCAL_MAX 64	/* messages of one batch answered here, at most */

/* Is <st> prepared on a link of the client's pool: it parsed there for this pool? */
struct prep_pool_scan {
	const struct prep_stmt *st;
	bool found;
};

static void
prep_pool_scan_cb(struct link *l, void *arg)
{
	struct prep_pool_scan *sc = arg;
	struct link_ext *ext = link_user_data(l);

	if (!sc->found && ext != NULL && prep_link_find(&ext->prep, sc->st) >= 0)
		sc->found = true;
}

static bool
prep_pool_has(struct pool *p, const struct prep_stmt *st)
{
	struct prep_pool_scan sc = { st, false };

	pool_foreach_link(p, prep_pool_scan_cb, &sc);
	return sc.found;
}

/* Type and length of the message at <p> when it is whole in the <n> bytes there. */
static bool
prep_batch_msg(const uint8_t *p, uint32_t n, uint8_t *type, uint32_t *len)
{
	uint32_t l;

	if (n < 5)
		return false;
	l = ((uint32_t)p[1] << 24) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 8) | p[4];
	if (l < 4 || l > n - 1)
		return false;
	*type = p[0];
	*len = l + 1;
	return true;
}

/*
 * Is the message a named Parse whose statement the client does not use yet (<known>: and
 * that parsed on a link of the pool), or a Close of a named statement?
 */
static bool
prep_batch_msg_ok(struct session *s, const uint8_t *m, uint32_t len, bool *known)
{
	struct proto_parse_msg pm;
	struct proto_target_msg cm;
	struct nk_error err;
	struct prep_stmt *st;

	if (m[0] == 'C')
		return proto_parse_close(m + 5, len - 5, &cm, &err) && cm.kind == 'S' &&
		       cm.name[0] != '\0';
	if (!proto_parse_parse(m + 5, len - 5, &pm, &err) || pm.name[0] == '\0' ||
	    prep_client_find(&s->prep, pm.name) != NULL)
		return false;	/* (a name in use: the server path answers it) */
	if (*known) {
		if ((st = prep_stmt_get(&pm)) == NULL)
			return false;
		*known = prep_pool_has(spool_pool(s->sp), st);
		prep_stmt_unref(st);
	}
	return true;
}

/* prep_local_batch: see session_int.h. */
uint32_t
prep_local_batch(struct session *s, const struct sbuf_pkt *pkt, bool *known)
{
	const uint8_t *p = pkt->data;
	uint32_t n = sbuf_lookahead(&s->sb), off = 0, len;
	uint8_t type;

	*known = true;
	for (int i = 0; i < PREP_LOCAL_MAX && prep_batch_msg(p + off, n - off, &type, &len); i++) {
		if (type == 'S')
			return len == 5 && i > 0 ? off + len : 0;
		if ((type != 'P' && type != 'C') || !prep_batch_msg_ok(s, p + off, len, known))
			return 0;
		off += len;
	}
	return 0;
}

/* One message of the batch: the client's names change, its answer goes to <pb>. */
static bool
prep_local_msg(struct session *s, const uint8_t *m, uint32_t len, struct pktbuf *pb)
{
	struct proto_parse_msg pm;
	struct proto_target_msg cm;
	struct nk_error err;
	struct prep_stmt *st;
	bool ok;

	sp_on_client_ext(s, m, len);
	if (m[0] == 'C') {
		if (!proto_parse_close(m + 5, len - 5, &cm, &err))
			return false;
		prep_client_remove(&s->prep, cm.name);
		pktbuf_write_close_complete(pb);
		return true;
	}
	if (!proto_parse_parse(m + 5, len - 5, &pm, &err) || (st = prep_stmt_get(&pm)) == NULL)
		return false;
	ok = prep_client_add(&s->prep, pm.name, st);
	prep_stmt_unref(st);
	sess_stats(s)->total_client_parse_count++;
	pktbuf_write_parse_complete(pb);
	return ok;
}

/* prep_local_answer: see session_int.h. */
bool
prep_local_answer(struct session *s, const struct sbuf_pkt *pkt, uint32_t batch_len)
{
	const uint8_t *p = pkt->data;
	struct pktbuf pb;
	uint32_t off = 0, len;
	uint8_t type;
	bool ok = true;

	pktbuf_init(&pb, 64);
	while (ok && off < batch_len && prep_batch_msg(p + off, batch_len - off, &type, &len)) {
		if (type != 'S')
			ok = prep_local_msg(s, p + off, len, &pb);
		off += len;
	}
	pktbuf_write_ready_for_query(&pb, 'I');
	sess_stats(s)->total_received += batch_len;
	sbuf_skip(&s->sb, batch_len);
	ok = ok && !pktbuf_failed(&pb) && sess_send_pb(s, &pb);
	pktbuf_cleanup(&pb);
	return ok;
}
