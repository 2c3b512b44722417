/*
 * route_svp.c - savepoints of a routed transaction: SAVEPOINT, ROLLBACK TO [SAVEPOINT] and
 * RELEASE [SAVEPOINT] as one Postgres runs them, over every shard the transaction joined.
 *
 * The router keeps the open transaction's savepoints as a stack (r->svp): each with its
 * name, how many of the transaction's settings (r->gucs.pend, route_sets.c) came before it and
 * the generation the portals created after it are born in. A savepoint statement runs on
 * every shard in the transaction; a shard joining later gets, right after its BEGIN, each
 * savepoint of the stack in order with the settings that came before it, so that ROLLBACK
 * TO undoes on every shard exactly what one Postgres undoes. ROLLBACK TO also takes the
 * settings model back to the savepoint's mark and drops the portals and cursors created
 * after it (the shards dropped theirs). A shard whose link broke inside the transaction
 * lost its part of it: ROLLBACK TO is refused then (ROLLBACK ends the transaction).
 * Entry points: route_svp_stmt(), route_svp_join(), route_svp_lost(), route_svp_gen(),
 * route_svp_end().
 */
#include "neki/base.h"

#include <stdlib.h>
#include <string.h>

#include "neki/link.h"
#include "neki/pktbuf.h"
#include "route_int.h"
#include "route_loop.h"
#include "route_portal.h"
#include "route_sets.h"
#include "route_svp.h"

struct svp_entry {
	char *name;			/* owned */
	uint32_t npend;			/* r->gucs.npend when it was set */
	uint32_t gen;			/* portals created after it have svp_gen >= gen */
};

struct route_svp {
	struct svp_entry *v;		/* owned: oldest first */
	uint32_t n, cap;
	uint32_t gen;			/* the last generation given */
	char lost[PLAN_SHARD_MAX];	/* a shard whose part of the transaction broke ("") */
};

/* ---- the stack ---- */

static bool
svp_push(struct route *r, const char *name)
{
	struct route_svp *s = r->svp;

	if (s == NULL && (s = r->svp = calloc(1, sizeof(*s))) == NULL)
		return false;
	if (s->n == s->cap) {
		uint32_t cap = s->cap ? s->cap * 2 : 8;
		struct svp_entry *v = realloc(s->v, cap * sizeof(*v));

		if (v == NULL)
			return false;
		s->v = v;
		s->cap = cap;
	}
	if ((s->v[s->n].name = strdup(name)) == NULL)
		return false;
	s->v[s->n].npend = r->gucs.npend;
	s->v[s->n].gen = ++s->gen;
	s->n++;
	return true;
}

/* The newest savepoint named <name>; -1 when none. */
static int
svp_find(const struct route *r, const char *name)
{
	if (r->svp == NULL)
		return -1;
	for (uint32_t i = r->svp->n; i-- > 0;)
		if (strcmp(r->svp->v[i].name, name) == 0)
			return (int)i;
	return -1;
}

/* Forget the savepoints from <from> on. */
static void
svp_pop(struct route *r, uint32_t from)
{
	while (r->svp->n > from)
		free(r->svp->v[--r->svp->n].name);
}

/* route_svp_end: see route_svp.h. */
void
route_svp_end(struct route *r)
{
	if (r->svp == NULL)
		return;
	svp_pop(r, 0);
	free(r->svp->v);
	free(r->svp);
	r->svp = NULL;
}

/* route_svp_gen: see route_svp.h. */
uint32_t
route_svp_gen(const struct route *r)
{
	return r->svp != NULL ? r->svp->gen : 0;
}

/* route_svp_lost: see route_svp.h. */
void
route_svp_lost(struct route *r, const struct rshard *sh)
{
	if (r->svp != NULL && r->svp->lost[0] == '\0')
		route_strcpy(r->svp->lost, sizeof(r->svp->lost), sh->uid);
}

/* ---- texts ---- */

/* "<verb> <name>" with the name as a quoted identifier, as one Query message in <pb>. */
static bool
svp_query(struct pktbuf *pb, const char *verb, const char *name)
{
	size_t n = strlen(verb) + 2 * strlen(name) + 4;
	char *sql = malloc(n), *p;
	bool ok;

	if (sql == NULL)
		return false;
	p = sql + strlen(verb);
	memcpy(sql, verb, strlen(verb));
	*p++ = ' ';
	*p++ = '"';
	for (const char *q = name; *q != '\0'; q++) {
		if (*q == '"')
			*p++ = '"';
		*p++ = *q;
	}
	*p++ = '"';
	*p = '\0';
	pktbuf_write_query(pb, sql);
	ok = !pktbuf_failed(pb);
	free(sql);
	return ok;
}

/* route_svp_join: see route_svp.h. */
bool
route_svp_join(struct route *r, struct rshard *sh)
{
	struct pktbuf pb;
	bool ok;

	for (uint32_t i = 0; r->svp != NULL && i < r->svp->n; i++) {
		if (sh->pend_applied < r->svp->v[i].npend &&
		    !route_sets_replay_upto(sh, r->svp->v[i].npend))
			return false;
		pktbuf_init(&pb, 64);
		ok = svp_query(&pb, "SAVEPOINT", r->svp->v[i].name) &&
		     link_send(sh->link, pb.buf, pb.len);
		pktbuf_cleanup(&pb);
		if (!ok)
			return false;
		sh->swallow++;
	}
	return true;
}

/* ---- the statements ---- */

/* ROLLBACK TO savepoint <at>: the later ones go, the settings and portals made since. */
static void
svp_rollback_to(struct route *r, uint32_t at)
{
	const struct svp_entry *e;

	svp_pop(r, at + 1);
	e = &r->svp->v[at];
	route_sets_rollback_to(r, e->npend);
	for (struct rportal *p = r->portals, *next; p != NULL; p = next) {
		next = p->next;
		if (p->tx_new && p->svp_gen >= e->gen && p != r->xportal)
			route_portal_drop(r, p, false);	/* the shards dropped theirs */
	}
	r->tx = 'T';
}

/* Run <verb> <name> on every shard in the transaction; <tag> answers. */
static enum rstep
svp_run(struct route *r, const char *verb, const char *name, const char *tag)
{
	const char *uids[ROUTE_SHARDS_MAX];
	uint32_t n = route_tx_shards(r, uids);
	struct nk_error err;

	if (n == 0)
		return route_reply_tag(r, tag) ? RSTEP_DONE : RSTEP_STOP;
	if (!route_exec_setup(r, uids, n, verb, &err))
		return route_fail(r, &err);
	for (uint32_t k = 0; k < r->x.ntg; k++) {
		struct rshard *sh = &r->sh[r->x.tg[k]];
		struct pktbuf pb;

		pktbuf_init(&pb, 64);
		if (!svp_query(&pb, verb, name)) {
			pktbuf_cleanup(&pb);
			nk_error_oom(&err);
			return route_fail(r, &err);
		}
		sh->ext_msg = pb.buf;	/* taken over */
		sh->ext_len = pb.len;
	}
	r->x.combine = RX_QUIET;
	r->settings_exec = true;	/* (not data: __neki.tx_mode single) */
	route_strcpy(r->x.end_tag, sizeof(r->x.end_tag), tag);
	return route_exec_run(r);
}

static enum rstep
svp_refuse_lost(struct route *r)
{
	struct nk_error err;

	nk_error_set(&err, ERRCODE_IN_FAILED_SQL_TRANSACTION,
		     "cannot roll back to a savepoint: the transaction's part on "
		     "shard \"%s\" was lost", r->svp->lost);
	nk_error_detail(&err, "The connection to that shard broke inside the transaction, "
			"which undid everything the transaction did there.");
	nk_error_hint(&err, "End the transaction with ROLLBACK and run it again.");
	return route_fail(r, &err);
}

/* route_svp_stmt: see route_svp.h. */
enum rstep
route_svp_stmt(struct route *r, const struct stmt_tx *tx)
{
	static const char *const what[] = { "SAVEPOINT", "RELEASE SAVEPOINT",
					    "ROLLBACK TO SAVEPOINT" };
	int kind = tx->kind == STMT_TX_SAVEPOINT ? 0 : tx->kind == STMT_TX_RELEASE ? 1 : 2;
	const char *name = tx->name != NULL ? tx->name : "";
	struct nk_error err;
	int at;

	if (r->tx == 'I' || r->implicit) {
		nk_error_set(&err, ERRCODE_NO_ACTIVE_SQL_TRANSACTION,
			     "%s can only be used in transaction blocks", what[kind]);
		return route_fail(r, &err);
	}
	if (kind == 0) {
		if (!svp_push(r, name)) {
			nk_error_oom(&err);
			return route_fail(r, &err);
		}
		return svp_run(r, what[0], name, "SAVEPOINT");
	}
	if ((at = svp_find(r, name)) < 0) {
		nk_error_set(&err, ERRCODE_S_E_INVALID_SPECIFICATION,
			     "savepoint \"%s\" does not exist", name);
		return route_fail(r, &err);
	}
	if (kind == 1) {
		svp_pop(r, (uint32_t)at);
		return svp_run(r, what[1], name, "RELEASE");
	}
	if (r->svp->lost[0] != '\0')
		return svp_refuse_lost(r);
	svp_rollback_to(r, (uint32_t)at);
	return svp_run(r, what[2], name, "ROLLBACK");
}
