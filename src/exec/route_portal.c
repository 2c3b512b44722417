/*
 * route_portal.c - the portals of a routed session, as Postgres keeps them: one namespace
 * for protocol portals (Bind) and SQL cursors (DECLARE), several open at once, the unnamed
 * one replaced by the next unnamed Bind, every portal dropped when its transaction ends
 * (at Sync outside a transaction block) except WITH HOLD cursors, which a COMMIT keeps.
 *
 * A portal runs its first Execute like any statement (route_ext.c, route.c); one suspended
 * on a single shard keeps a portal of its own name on that shard's link (its mirror:
 * Execute with a row limit there, inside the transaction, so the shard keeps it), and its
 * next Execute goes there; one over several shards is the router's (route_pull.c). A
 * portal that ran to completion answers a new Execute itself ("SELECT 0", or 55000 for a
 * statement that returns no rows), as Postgres.
 *
 * Entry points: route_portal_find(), route_portal_new(), route_portal_add(),
 * route_portal_drop(), route_portals_tx_end(), route_portal_execute(),
 * route_portal_describe(), route_portal_ran(), route_portal_bind_msg().
 */
#include "neki/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "neki/link.h"
#include "neki/pktbuf.h"
#include "neki/proto.h"
#include "route_int.h"
#include "route_client.h"
#include "route_ext.h"
#include "route_pin.h"
#include "route_portal.h"
#include "route_pull.h"
#include "route_state.h"
#include "route_svp.h"

/* The unnamed portal's mirror: a name of its own, so that the router's unnamed Binds (a
 * statement run at once, a merge's final query) leave a suspended one alone. */
#define ROUTE_UNNAMED_MIRROR "neki unnamed portal"

/* ---- the namespace ---- */

/* route_portal_find: see route_int.h. */
struct rportal *
route_portal_find(struct route *r, const char *name)
{
	for (struct rportal *p = r->portals; p != NULL; p = p->next)
		if (route_streq(p->name, name))
			return p;
	return NULL;
}

/* route_portal_new: see route_int.h. */
struct rportal *
route_portal_new(const char *name)
{
	struct rportal *p = calloc(1, sizeof(*p));

	if (p != NULL && (p->name = strdup(name)) == NULL) {
		free(p);
		return NULL;
	}
	return p;
}

/* route_portal_new_bind: see route_int.h. */
struct rportal *
route_portal_new_bind(const char *name, const char *query, const uint8_t *oids,
		      uint16_t noids, const uint8_t *rest, size_t rest_len)
{
	size_t nlen = strlen(name) + 1, qlen = strlen(query) + 1, olen = (size_t)noids * 4;
	struct rportal *p = calloc(1, sizeof(*p) + nlen + qlen + olen + 2 + rest_len);
	uint8_t *at;

	if (p == NULL)
		return NULL;
	p->one_block = true;
	at = (uint8_t *)(p + 1);
	p->name = memcpy(at, name, nlen);
	at += nlen;
	p->query = memcpy(at, query, qlen);
	at += qlen;
	p->oids = olen > 0 ? memcpy(at, oids, olen) : NULL;
	p->noids = noids;
	p->bind = at + olen;	/* (calloc'd: its two empty names are there) */
	if (rest_len > 0)
		memcpy(p->bind + 2, rest, rest_len);
	p->bind_len = rest_len + 2;
	return p;
}

/* route_portal_free: see route_int.h. */
void
route_portal_free(struct rportal *p)
{
	if (p == NULL)
		return;
	route_pull_free(p->pull);
	if (p->pst != NULL)
		prep_stmt_unref(p->pst);
	route_norm_unref(p->norm);
	if (!p->one_block) {
		free(p->name);
		free(p->query);
		free(p->oids);
		free(p->bind);
	}
	free(p);
}

/* route_portal_mirror: see route_int.h. */
const char *
route_portal_mirror(const struct rportal *p)
{
	return p->name[0] != '\0' ? p->name : ROUTE_UNNAMED_MIRROR;
}

/* Ask the link of r->sh[i] to close <p>'s mirror (its answers are dropped). */
static void
mirror_close(struct route *r, const struct rportal *p, uint32_t i)
{
	struct rshard *sh = &r->sh[i];
	struct pktbuf pb;
	char *sql = NULL;

	if (sh->link == NULL)
		return;
	pktbuf_init(&pb, 64);
	if (p->is_cursor) {
		char *q = route_quote_ident(p->name);
		size_t n = q != NULL ? strlen(q) + 8 : 0;

		if (q == NULL || (sql = malloc(n)) == NULL) {
			free(q);
			pktbuf_cleanup(&pb);
			return;
		}
		snprintf(sql, n, "CLOSE %s", q);
		free(q);
		pktbuf_write_query(&pb, sql);
	} else {
		pktbuf_write_close(&pb, 'P', route_portal_mirror(p));
		pktbuf_write_sync(&pb);
	}
	if (!pktbuf_failed(&pb) && link_send(sh->link, pb.buf, pb.len))
		sh->swallow++;
	pktbuf_cleanup(&pb);
	free(sql);
}

/* <p> leaves the list: unpin the links of a WITH HOLD cursor, close its mirrors. */
static void
portal_unlink(struct route *r, struct rportal *p, bool close)
{
	for (uint32_t i = 0; i < r->nsh; i++) {
		if ((p->mask & (1u << i)) == 0)
			continue;
		if (close)
			mirror_close(r, p, i);
		if (p->is_cursor && p->hold && r->sh[i].holds > 0)
			r->sh[i].holds--;
	}
}

/* route_portal_drop: see route_int.h. */
void
route_portal_drop(struct route *r, struct rportal *p, bool close)
{
	for (struct rportal **pp = &r->portals; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	}
	if (r->x.pull.portal == p)
		r->x.pull.portal = NULL;
	if (r->xportal == p)
		r->xportal = NULL;
	if (r->cur_close == p)
		r->cur_close = NULL;
	portal_unlink(r, p, close);
	route_portal_free(p);
}

/* route_portal_add: see route_int.h. */
void
route_portal_add(struct route *r, struct rportal *p)
{
	struct rportal *old = p->name[0] == '\0' ? route_portal_find(r, "") : NULL;

	if (old != NULL)	/* an unnamed Bind replaces the unnamed portal */
		route_portal_drop(r, old, true);
	p->next = r->portals;
	r->portals = p;
	p->svp_gen = route_svp_gen(r);
	if (p->is_cursor && p->hold)
		for (uint32_t i = 0; i < r->nsh; i++)
			if (p->mask & (1u << i))
				r->sh[i].holds++;
}

/* route_portals_tx_end: see route_int.h. */
void
route_portals_tx_end(struct route *r, bool commit)
{
	for (struct rportal **pp = &r->portals; *pp != NULL;) {
		struct rportal *p = *pp;

		if (p->is_cursor && p->hold && (commit || !p->tx_new)) {
			p->tx_new = false;	/* kept: its shards hold it after the commit */
			pp = &p->next;
			continue;
		}
		route_portal_drop(r, p, false);	/* the shards dropped theirs */
	}
}

/* route_portals_drop_all: see route_int.h. */
void
route_portals_drop_all(struct route *r, bool unpin)
{
	uint32_t pinned = 0;

	for (uint32_t i = 0; i < r->nsh; i++)
		if (r->sh[i].holds > 0)
			pinned |= 1u << i;
	while (r->portals != NULL)
		route_portal_drop(r, r->portals, false);
	for (uint32_t i = 0; i < r->nsh && unpin; i++) {
		struct rshard *sh = &r->sh[i];

		if ((pinned & (1u << i)) == 0 || sh->link == NULL) {
			sh->holds = 0;
			continue;
		}
		if (route_pin_held(sh)) {	/* held for LISTEN / locks too: closed there */
			struct pktbuf pb;

			pktbuf_init(&pb, 32);
			pktbuf_write_query(&pb, "CLOSE ALL");
			if (!pktbuf_failed(&pb) && link_send(sh->link, pb.buf, pb.len))
				sh->swallow++;
			pktbuf_cleanup(&pb);
		} else {			/* its cursors go with it */
			link_close(sh->link, true, "client closed its cursors");
			sh->link = NULL;
			sh->in_tx = false;
			sh->swallow = 0;
		}
		sh->holds = 0;
	}
}

/* route_portals_free: see route_int.h. */
void
route_portals_free(struct route *r)
{
	while (r->portals != NULL) {
		struct rportal *p = r->portals;

		r->portals = p->next;
		route_portal_free(p);
	}
	route_portal_free(r->cur_new);
	r->cur_new = NULL;
}

/* route_portals_link_lost: see route_int.h. */
void
route_portals_link_lost(struct route *r, uint32_t i)
{
	for (struct rportal *p = r->portals; p != NULL; p = p->next) {
		if ((p->mask & (1u << i)) == 0)
			continue;
		p->mask &= ~(1u << i);
		p->lost = true;
	}
	r->sh[i].holds = 0;
}

/* route_portal_lost: see route_int.h. */
bool
route_portal_lost(const struct rportal *p, struct nk_error *err)
{
	return nk_error_set(err, ERRCODE_CONNECTION_FAILURE,
			    "%s \"%s\" was lost with the connection to its shard",
			    p->is_cursor ? "cursor" : "portal", p->name);
}

/* route_portal_bind_msg: see route_int.h. */
bool
route_portal_bind_msg(const struct rportal *p, struct proto_bind_msg *m, struct nk_error *err)
{
	static const uint8_t none[8];	/* no names, formats, values, result formats */

	if (p != NULL && p->bind != NULL)
		return proto_parse_bind(p->bind, p->bind_len, m, err);
	return proto_parse_bind(none, sizeof(none), m, err);
}

/* ---- Execute and Describe of a portal executed already ---- */

static bool
portal_fail(struct route *r, const struct nk_error *err)
{
	struct nk_error e = *err;

	e.severity = NK_SEV_ERROR;
	r->ext_failed = true;
	if (r->tx == 'T')
		r->tx = 'E';
	if (!route_client_send_error(r, &e)) {
		route_client_close(r, "client connection failed", NULL);
		return false;
	}
	return true;
}

/* The one shard holding <p>'s mirror; NULL when none (or its link is gone). */
static struct rshard *
mirror_shard(struct route *r, const struct rportal *p)
{
	for (uint32_t i = 0; i < r->nsh; i++)
		if ((p->mask & (1u << i)) && r->sh[i].link != NULL)
			return &r->sh[i];
	return NULL;
}

/* Send <msgs> (taken) to <p>'s mirror shard as the exec of an extended-protocol message. */
static bool
mirror_exec(struct route *r, struct rportal *p, struct pktbuf *msgs, bool describe_only)
{
	struct rshard *sh = mirror_shard(r, p);
	const char *uid;
	struct nk_error err;

	if (sh == NULL || pktbuf_failed(msgs)) {
		pktbuf_cleanup(msgs);
		nk_error_set(&err, sh == NULL ? ERRCODE_CONNECTION_FAILURE : ERRCODE_OUT_OF_MEMORY,
			     sh == NULL ?
			     "the shard link of portal \"%s\" was lost" : "out of memory", p->name);
		return portal_fail(r, &err);
	}
	uid = sh->uid;
	if (!route_exec_setup(r, &uid, 1, "", &err)) {
		pktbuf_cleanup(msgs);
		return portal_fail(r, &err);
	}
	free(r->x.ext_msg);
	r->x.ext_msg = msgs->buf;		/* taken over */
	r->x.ext_len = msgs->len;
	r->x.ext_pst = NULL;		/* (its own messages) */
	r->x.ext_exec = true;
	r->x.ext_portal_describe = describe_only;
	r->xportal = describe_only ? NULL : p;
	if (route_exec_run(r) != RSTEP_ASYNC) {
		r->x.ext_exec = false;
		r->ext_failed = true;
	}
	return !route_client_closed(r);
}

/* A new Execute of a portal that ran to completion: no rows, as Postgres. */
static bool
portal_done_reply(struct route *r, const struct rportal *p)
{
	struct nk_error err;
	struct pktbuf pb;
	char tag[80];

	if (!p->rows) {
		nk_error_set(&err, ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
			     "portal \"%s\" cannot be run", p->name);
		return portal_fail(r, &err);
	}
	snprintf(tag, sizeof(tag), "%s 0", p->tag);	/* ("INSERT 0" + " 0") */
	pktbuf_init(&pb, 32);
	pktbuf_write_command_complete(&pb, tag);
	return route_send(r, &pb);
}

/* The client's result formats of a router-side Execute of <p>: its Bind's, or a cursor's
 * BINARY option. */
static bool
exec_formats(struct rportal *p, struct nk_error *err)
{
	static const uint8_t binary[2] = { 0, 1 };
	struct proto_bind_msg m;

	if (p->is_cursor)
		return route_pull_formats(p->pull, binary, p->binary ? 1 : 0, false, err);
	return route_portal_bind_msg(p, &m, err) &&
	       route_pull_formats(p->pull, m.result_formats, m.nresult_formats, false, err);
}

/* route_portal_execute: see route_int.h. */
bool
route_portal_execute(struct route *r, struct rportal *p, int32_t max_rows)
{
	struct plan_fetch f;
	struct nk_error err;
	struct pktbuf pb;

	if (p->lost)
		return !route_portal_lost(p, &err) && portal_fail(r, &err);
	if (r->tx == 'E') {	/* (a portal that ran is no transaction's end) */
		nk_error_set(&err, ERRCODE_IN_FAILED_SQL_TRANSACTION,
			     "current transaction is aborted, commands ignored "
			     "until end of transaction block");
		return portal_fail(r, &err);
	}
	if (p->state == RPORTAL_DONE && !p->is_cursor)
		return portal_done_reply(r, p);
	if (p->pull == NULL) {		/* one shard: its mirror goes on */
		pktbuf_init(&pb, 64);
		pktbuf_write_execute(&pb, route_portal_mirror(p), (uint32_t)max_rows);
		pktbuf_write_sync(&pb);
		return mirror_exec(r, p, &pb, false);
	}
	memset(&f, 0, sizeof(f));
	f.fixed = -1;
	f.nsteps = 1;
	f.steps[0].op = PLAN_FETCH_FORWARD;
	f.steps[0].count = max_rows > 0 ? max_rows : STMT_FETCH_ALL;
	f.steps[0].to_client = true;
	nk_error_clear(&err);
	if (!exec_formats(p, &err))
		return portal_fail(r, &err);
	r->x.ext_exec = true;
	switch (route_pull_start(r, p, RPULL_EXECUTE, &f, false)) {
	case RPULL_ASYNC:
		return !route_client_closed(r);
	case RPULL_DONE:
		r->x.ext_exec = false;
		return !route_client_closed(r);
	default:
		r->x.ext_exec = false;
		return portal_fail(r, &r->x.err);
	}
}

/* route_portal_describe: see route_int.h. */
bool
route_portal_describe(struct route *r, struct rportal *p)
{
	static const uint8_t binary[2] = { 0, 1 };
	struct proto_bind_msg m;
	struct pktbuf pb;
	struct nk_error err;
	bool ok;

	nk_error_clear(&err);
	if (p->lost)
		return !route_portal_lost(p, &err) && portal_fail(r, &err);
	if (p->pull != NULL) {		/* the router's: it knows the columns */
		pktbuf_init(&pb, 256);
		if (p->is_cursor)
			ok = route_pull_rowdesc(p->pull, binary, p->binary ? 1 : 0, &pb);
		else if ((ok = route_portal_bind_msg(p, &m, &err)))
			ok = route_pull_rowdesc(p->pull, m.result_formats, m.nresult_formats, &pb);
		if (!ok) {
			pktbuf_cleanup(&pb);
			if (!nk_error_is_set(&err))
				nk_error_set(&err, ERRCODE_INTERNAL_ERROR,
					     "the columns of portal \"%s\" are not "
					     "known", p->name);
			return portal_fail(r, &err);
		}
		return route_send(r, &pb);
	}
	pktbuf_init(&pb, 64);
	pktbuf_write_describe(&pb, 'P', route_portal_mirror(p));
	pktbuf_write_sync(&pb);
	return mirror_exec(r, p, &pb, true);
}

/* route_portal_ran: see route_int.h. */
void
route_portal_ran(struct route *r, bool ok)
{
	struct rportal *p = r->xportal;

	r->xportal = NULL;
	if (p == NULL || p->is_cursor || p->pull != NULL)
		return;		/* a cursor's state is its shard's; the router's own: route_pull.c */
	if (!ok) {
		p->state = RPORTAL_DONE;	/* failed: dropped with the transaction */
		p->rows = false;
		return;
	}
	if (r->suspended) {
		p->state = RPORTAL_OPEN;
		p->mask |= r->x.tg_mask;
		return;
	}
	p->state = RPORTAL_DONE;
	p->rows = r->xrows;
	route_strcpy(p->tag, sizeof(p->tag), r->last_tag[0] ? r->last_tag : "SELECT");
	if (r->x.ext_max_rows > 0)	/* it was bound as its mirror: closed with it */
		p->mask |= r->x.tg_mask;
}

/* route_stmt_returns_rows: see route_int.h. */
bool
route_stmt_returns_rows(const struct stmt *st)
{
	if (st->kind == STMT_SELECT || st->kind == STMT_SHOW || st->kind == STMT_EXPLAIN)
		return true;
	if (st->cursor != NULL)
		return st->cursor->op == STMT_CUR_FETCH && !st->cursor->is_move;
	return (st->flags & STMT_F_RETURNING) != 0;
}
