/*
 * route_sets.c - the session settings of a routed session as the router models them (spec
 * 3.3: the router is the session; its shard links are pooled per transaction).
 *
 * The model is two lists of operations (struct rguc, in r->gucs): sets, the committed session
 * SETs (one per name, in the order they were set), replayed on every link the session
 * acquires; and pend, what the open transaction did (SET, SET LOCAL, RESET, RESET ALL,
 * set_config()), in order. As in Postgres, a transaction that commits folds pend into sets
 * (SET LOCAL ends with it, RESET ALL keeps role) and one that rolls back (ROLLBACK, an error
 * in a multi-statement Query or in an extended-protocol batch, a failed COMMIT) drops it.
 *
 * Each link mirrors the model: a SET inside a transaction runs on the links inside it, and a
 * link joining the transaction later replays r->gucs.pend after its BEGIN, so Postgres itself
 * undoes them there on ROLLBACK. A link that may hold something the model no longer has (a
 * SET undone outside a shard transaction, a RESET done on another link) is "behind": before
 * its next use it gets RESET ROLE; RESET ALL and the whole model again. A link holding a
 * session value a fresh backend lacks (a SET of a parameter the server does not report: the
 * varcache diff brings the reported ones to each client's values) is "dirty": it is given
 * back to the pool through a RESET ROLE; RESET ALL (pool_release_reset()), so no other
 * session inherits it. Sessions that set nothing never pay for any of this.
 * Entry points: route_sets_stmt(), route_sets_calls(), route_sets_done(), route_sets_failed(),
 * route_sets_end(), route_sets_discard(), route_sets_replay(), route_sets_replay_pending(),
 * route_give_back().
 */
#include "neki/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "neki/intern.h"
#include "neki/link.h"
#include "neki/log.h"
#include "neki/pktbuf.h"
#include "neki/pool.h"
#include "route_int.h"
#include "route_client.h"
#include "route_exec.h"
#include "route_sets.h"

/* What a link that is behind or dirty runs to be like a fresh backend: RESET ALL does not
 * reset role (Postgres' GUC_NO_RESET_ALL); session_authorization cannot be SET (NK013 27). */
#define ROUTE_SETS_RESET "RESET ROLE;RESET ALL"

/* ---- a growing text ---- */

struct rtext {
	char *p;			/* owned: NUL-terminated */
	size_t len, cap;
	bool failed;			/* no memory: sticky */
};

static void
rtext_add(struct rtext *t, const char *s, size_t n)
{
	if (t->failed || n == 0)
		return;		/* (nothing to add: nothing allocated) */
	if (t->len + n + 1 > t->cap) {
		size_t cap = t->cap ? t->cap : 256;
		char *p;

		while (t->len + n + 1 > cap)
			cap *= 2;
		if ((p = realloc(t->p, cap)) == NULL) {
			t->failed = true;
			return;
		}
		t->p = p;
		t->cap = cap;
	}
	memcpy(t->p + t->len, s, n);
	t->len += n;
	t->p[t->len] = '\0';
}

static void
rtext_str(struct rtext *t, const char *s)
{
	rtext_add(t, s, strlen(s));
}

/* <v> as an E'' literal (quotes and backslashes doubled: right whatever
 * standard_conforming_strings is). */
static void
rtext_literal(struct rtext *t, const char *v)
{
	rtext_str(t, "E'");
	for (; *v != '\0'; v++) {
		if (*v == '\'' || *v == '\\')
			rtext_add(t, v, 1);
		rtext_add(t, v, 1);
	}
	rtext_str(t, "'");
}

/* Append statement <sql> and its separator: a newline first, so that a trailing "--"
 * comment of the client's text cannot swallow what follows. */
static void
rtext_stmt(struct rtext *t, const char *sql)
{
	rtext_str(t, sql);
	rtext_str(t, "\n;");
}

/* ---- operations ---- */

static void
rguc_clear(struct rguc *g)
{
	free(g->name);
	free(g->sql);
	g->name = g->sql = NULL;
}

static void
rguc_list_free(struct rguc *list, uint32_t *n)
{
	for (uint32_t i = 0; i < *n; i++)
		rguc_clear(&list[i]);
	*n = 0;
}

/* Append an operation to <*list> (<n> used of <cap>): the strings are copied. */
static bool
rguc_push(struct rguc **list, uint32_t *n, uint32_t *cap, enum rguc_kind kind,
	  const char *name, const char *sql)
{
	struct rguc *g;

	if (*n == *cap) {
		uint32_t ncap = *cap ? *cap * 2 : 8;
		struct rguc *grown = realloc(*list, ncap * sizeof(*grown));

		if (grown == NULL)
			return false;
		*list = grown;
		*cap = ncap;
	}
	g = &(*list)[*n];
	g->kind = kind;
	g->name = name != NULL ? strdup(name) : NULL;
	g->sql = strdup(sql);
	if ((name != NULL && g->name == NULL) || g->sql == NULL) {
		rguc_clear(g);
		return false;
	}
	(*n)++;
	return true;
}

/* Remove the committed SET of <name>; with <all> every one but role's (RESET ALL). */
static void
route_sets_remove(struct route *r, const char *name, bool all)
{
	uint32_t k = 0;

	for (uint32_t i = 0; i < r->gucs.nsets; i++) {
		bool drop = all ? !route_streq(r->gucs.sets[i].name, "role") :
			    route_streq(r->gucs.sets[i].name, name);

		if (drop)
			rguc_clear(&r->gucs.sets[i]);
		else
			r->gucs.sets[k++] = r->gucs.sets[i];
	}
	r->gucs.nsets = k;
}

/* Fold <g> into the committed SETs (a transaction committed, or autocommit). */
static void
route_sets_merge(struct route *r, const struct rguc *g)
{
	switch (g->kind) {
	case RGUC_SET:
		route_sets_remove(r, g->name, false);
		if (!rguc_push(&r->gucs.sets, &r->gucs.nsets, &r->gucs.capsets, RGUC_SET, g->name, g->sql))
			route_client_log(r, LOG_LVL_WARNING, "out of memory: the SET of \"%s\" is "
				 "not replayed on new links", g->name);
		break;
	case RGUC_RESET:
		route_sets_remove(r, g->name, false);
		break;
	case RGUC_RESET_ALL:
		route_sets_remove(r, NULL, true);
		break;
	case RGUC_LOCAL:
		break;		/* ends with its transaction */
	}
}

/* ---- what an exec does ---- */

static bool
route_xset(struct route *r, enum rguc_kind kind, const char *name, const char *sql)
{
	return rguc_push(&r->gucs.xsets, &r->gucs.nxsets, &r->gucs.capxsets, kind, name, sql);
}

/* SET SESSION CHARACTERISTICS AS TRANSACTION ...: the default_transaction_* it sets. */
static bool
route_xset_characteristics(struct route *r, const struct stmt_tx *tx)
{
	static const char *const iso[] = {
		[STMT_ISO_READ_UNCOMMITTED] = "read uncommitted",
		[STMT_ISO_READ_COMMITTED] = "read committed",
		[STMT_ISO_REPEATABLE_READ] = "repeatable read",
		[STMT_ISO_SERIALIZABLE] = "serializable",
	};
	char sql[96];
	bool ok = true;

	if (tx == NULL)
		return true;
	if (tx->isolation != STMT_ISO_DEFAULT) {
		snprintf(sql, sizeof(sql), "SET default_transaction_isolation = '%s'",
			 iso[tx->isolation]);
		ok = route_xset(r, RGUC_SET, "default_transaction_isolation", sql);
	}
	if (ok && tx->read_only >= 0)
		ok = route_xset(r, RGUC_SET, "default_transaction_read_only", tx->read_only ?
				"SET default_transaction_read_only = on" :
				"SET default_transaction_read_only = off");
	if (ok && tx->deferrable >= 0)
		ok = route_xset(r, RGUC_SET, "default_transaction_deferrable", tx->deferrable ?
				"SET default_transaction_deferrable = on" :
				"SET default_transaction_deferrable = off");
	return ok;
}

/* Parameters whose value lasts to the end of the transaction whatever SET says. */
static bool
route_is_tx_param(const char *name)
{
	return route_streq(name, "transaction_isolation") ||
	       route_streq(name, "transaction_read_only") ||
	       route_streq(name, "transaction_deferrable");
}

void
route_sets_exec_clear(struct route *r)
{
	rguc_list_free(r->gucs.xsets, &r->gucs.nxsets);
}

/* route_sets_stmt: see route_int.h. */
bool
route_sets_stmt(struct route *r, const struct stmt *st, const char *sql)
{
	const struct stmt_set *set = st->set;

	rguc_list_free(r->gucs.xsets, &r->gucs.nxsets);
	if (set == NULL)
		return true;
	switch (set->kind) {
	case STMT_SET_VALUE:
		if (set->name == NULL)
			return true;
		return route_xset(r, set->is_local || route_is_tx_param(set->name) ? RGUC_LOCAL :
				  RGUC_SET, set->name, sql);
	case STMT_SET_DEFAULT:
	case STMT_SET_RESET:
		if (set->name == NULL)
			return true;
		return route_xset(r, set->is_local ? RGUC_LOCAL : RGUC_RESET, set->name, sql);
	case STMT_SET_RESET_ALL:
		return route_xset(r, RGUC_RESET_ALL, NULL, sql);
	case STMT_SET_TRANSACTION:
		return route_xset(r, RGUC_LOCAL, "transaction", sql);
	case STMT_SET_SESSION_CHARACTERISTICS:
		return route_xset_characteristics(r, st->tx);
	default:
		return true;	/* SHOW */
	}
}

/* route_sets_calls: see route_int.h. */
bool
route_sets_calls(struct route *r, const struct plan *p)
{
	rguc_list_free(r->gucs.xsets, &r->gucs.nxsets);
	for (uint32_t i = 0; i < p->nset_configs; i++) {
		const struct plan_set_config *sc = &p->set_configs[i];
		struct rtext t = { 0 };
		bool ok;

		rtext_str(&t, "SELECT pg_catalog.set_config(");
		rtext_literal(&t, sc->name);
		rtext_str(&t, ", ");
		if (sc->value != NULL)
			rtext_literal(&t, sc->value);
		else
			rtext_str(&t, "NULL");
		rtext_str(&t, sc->is_local ? ", true)" : ", false)");
		ok = !t.failed && route_xset(r, sc->is_local ? RGUC_LOCAL : sc->value != NULL ?
					     RGUC_SET : RGUC_RESET, sc->name, t.p);
		free(t.p);
		if (!ok)
			return false;
	}
	return true;
}

/* Does a fresh link of <l>'s server lack a value the session gave <name>? False for the
 * parameters the server reports, which the varcache diff sets for every client. */
static bool
route_sets_dirties(struct link *l, const struct rguc *g)
{
	int i;

	if (g->kind != RGUC_SET)
		return false;	/* SET LOCAL ends, RESET leaves the default */
	i = varcache_index(g->name);
	return i < 0 || link_tracked(l)[i] == NULL;
}

_Static_assert(VAR_MAX <= ROUTE_VARS_MAX, "a login value per tracked parameter");

/* route_sets_welcome: see route_int.h. */
void
route_sets_welcome(struct route *r)
{
	for (size_t i = 0; i < varcache_count(); i++) {
		const char *v = r->c.vars->val[i];

		intern_unref(r->gucs.vars0[i]);
		r->gucs.vars0[i] = v != NULL ? intern_ref(v) : NULL;
	}
}

/*
 * A RESET of reported parameter <name> (NULL: of every one): Postgres goes back to the
 * session's default, its value at login, where a pooled link goes back to its own. The
 * session's values become the login ones again, the client gets the ParameterStatus of
 * those that change, and <fix> (NULL: none) the SETs that bring a link there after the
 * reset. False when the client is gone.
 */
static bool
route_sets_defaults(struct route *r, const char *name, struct rtext *fix)
{
	struct pktbuf pb;

	pktbuf_init(&pb, 128);
	for (size_t i = 0; i < varcache_count(); i++) {
		const char *v0 = r->gucs.vars0[i], *n = varcache_name(i);

		if (v0 == NULL || (name != NULL && strcasecmp(name, n) != 0))
			continue;
		if (fix != NULL) {
			rtext_str(fix, "SET ");
			rtext_str(fix, n);
			rtext_str(fix, " = ");
			rtext_literal(fix, v0);
			rtext_str(fix, "\n;");
		}
		if (r->c.vars->val[i] == v0 || !varcache_set(r->c.vars, n, v0))
			continue;	/* (both interned) */
		pktbuf_write_parameter_status(&pb, n, v0);
	}
	if (pb.len == 0) {
		pktbuf_cleanup(&pb);
		return true;
	}
	return route_send(r, &pb);
}

/* route_sets_defaults_all: see route_int.h. */
bool
route_sets_defaults_all(struct route *r)
{
	return route_sets_defaults(r, NULL, NULL);
}

/*
 * After RESET (of one reported parameter, or ALL) <g> ran on the exec's targets: the
 * session's login values back (route_sets_defaults()), set on the targets in a transaction
 * (an injected Query each, answered before their next statement's); the others are behind
 * (reset and replayed if the session uses them again before giving them back, which the
 * varcache diff of their next session then does). *<sql> (malloc'd, NULL when <g> is no such
 * RESET) is what a link joining the transaction runs in its place. False when the client is
 * gone or on no memory.
 */
static bool
route_sets_reset_fix(struct route *r, const struct rguc *g, char **sql)
{
	struct rtext fix = { 0 }, all = { 0 };
	bool ok;

	*sql = NULL;
	if (g->kind != RGUC_RESET_ALL && (g->kind != RGUC_RESET || varcache_index(g->name) < 0))
		return true;
	if (!route_sets_defaults(r, g->kind == RGUC_RESET ? g->name : NULL, &fix))
		return false;
	ok = !fix.failed;
	for (uint32_t i = 0; i < r->x.ntg && ok && fix.len > 0; i++) {
		struct rshard *sh = &r->sh[r->x.tg[i]];

		if (sh->link != NULL && sh->in_tx && route_link_query(sh->link, fix.p))
			sh->swallow++;
	}
	if (ok && fix.len > 0) {
		rtext_stmt(&all, g->sql);
		rtext_str(&all, fix.p);
		ok = !all.failed;
		*sql = all.p;
	}
	free(fix.p);
	return ok;
}

/* Is the exec in a transaction whose end decides its SETs (a block, the implicit one of a
 * multi-statement Query, an extended-protocol batch up to its Sync)? */
static bool
route_sets_scoped(const struct route *r)
{
	return r->tx != 'I' || r->x.ext_exec;
}

/* route_sets_done: see route_int.h. */
bool
route_sets_done(struct route *r)
{
	bool scoped = route_sets_scoped(r);

	for (uint32_t k = 0; k < r->gucs.nxsets; k++) {
		const struct rguc *g = &r->gucs.xsets[k];
		char *fixed;

		if (!route_sets_reset_fix(r, g, &fixed)) {
			if (route_client_closed(r))
				return false;
			route_client_log(r, LOG_LVL_WARNING, "out of memory: a RESET leaves the link's "
				 "defaults");
		}
		if (scoped) {
			if (!rguc_push(&r->gucs.pend, &r->gucs.npend, &r->gucs.cappend, g->kind, g->name,
				       fixed != NULL ? fixed : g->sql))
				route_client_log(r, LOG_LVL_WARNING, "out of memory: a setting of the "
					 "transaction is not replayed on its other links");
		} else {
			route_sets_merge(r, g);
			r->sets_version++;
		}
		for (uint32_t i = 0; i < r->x.ntg; i++) {
			struct rshard *sh = &r->sh[r->x.tg[i]];

			if (sh->link == NULL)
				continue;
			if (scoped) {
				sh->pend_applied = r->gucs.npend;
				sh->pend_notx |= !sh->in_tx;
			} else {
				sh->sets_version = r->sets_version;	/* ran it itself */
			}
			sh->dirty |= route_sets_dirties(sh->link, g);
			if (fixed != NULL && !sh->in_tx)
				sh->sets_version = 0;	/* at the link's defaults: behind */
		}
		free(fixed);
	}
	rguc_list_free(r->gucs.xsets, &r->gucs.nxsets);
	return true;
}

/* route_sets_failed: see route_int.h. */
void
route_sets_failed(struct route *r)
{
	for (uint32_t i = 0; i < r->x.ntg && r->gucs.nxsets > 0; i++) {
		struct rshard *sh = &r->sh[r->x.tg[i]];

		if (sh->link != NULL && sh->sent && !sh->failed && !sh->in_tx) {
			sh->sets_version = 0;	/* it did what the model does not have */
			sh->dirty = true;
		}
	}
	rguc_list_free(r->gucs.xsets, &r->gucs.nxsets);
}

/* route_sets_end: see route_int.h. */
void
route_sets_end(struct route *r, bool commit, bool undone)
{
	uint64_t before = r->sets_version;

	if (r->gucs.npend == 0)
		return;
	if (commit) {
		for (uint32_t k = 0; k < r->gucs.npend; k++)
			route_sets_merge(r, &r->gucs.pend[k]);
		r->sets_version++;
	}
	for (uint32_t i = 0; i < r->nsh; i++) {
		struct rshard *sh = &r->sh[i];

		if (sh->link != NULL && commit && sh->sets_version == before &&
		    sh->pend_applied == r->gucs.npend)
			sh->sets_version = r->sets_version;	/* has them all */
		else if (sh->link != NULL && !commit && sh->pend_applied > 0 &&
			 (!undone || !sh->in_tx || sh->pend_notx))
			sh->sets_version = 0;	/* keeps what the rollback undid */
		sh->pend_applied = 0;
		sh->pend_notx = false;
	}
	rguc_list_free(r->gucs.pend, &r->gucs.npend);
}

/* route_sets_discard: see route_int.h. */
void
route_sets_discard(struct route *r)
{
	rguc_list_free(r->gucs.sets, &r->gucs.nsets);
	rguc_list_free(r->gucs.pend, &r->gucs.npend);
	r->sets_version++;
	for (uint32_t i = 0; i < r->nsh; i++) {
		struct rshard *sh = &r->sh[i];

		sh->pend_applied = 0;
		sh->pend_notx = false;
		if (sh->link != NULL)
			sh->sets_version = 0;	/* reset before its next use */
	}
}

void
route_sets_free(struct route *r)
{
	rguc_list_free(r->gucs.sets, &r->gucs.nsets);
	rguc_list_free(r->gucs.pend, &r->gucs.npend);
	rguc_list_free(r->gucs.xsets, &r->gucs.nxsets);
	for (size_t i = 0; i < ROUTE_VARS_MAX; i++) {
		intern_unref(r->gucs.vars0[i]);
		r->gucs.vars0[i] = NULL;
	}
	free(r->gucs.sets);
	free(r->gucs.pend);
	free(r->gucs.xsets);
	r->gucs.sets = r->gucs.pend = r->gucs.xsets = NULL;
	r->gucs.capsets = r->gucs.cappend = r->gucs.capxsets = 0;
}

/* ---- links ---- */

/* Send <t> to <sh>'s link <l> as one injected Query (its answer dropped); frees <t>. */
static bool
route_sets_send(struct rshard *sh, struct link *l, struct rtext *t)
{
	bool ok = !t->failed;

	if (ok && t->len > 0) {
		sh->swallow++;
		ok = route_link_query(l, t->p);
	}
	free(t->p);
	return ok;
}

/* route_sets_replay: see route_int.h. */
bool
route_sets_replay(struct rshard *sh, struct link *l, bool fresh)
{
	struct route *r = sh->r;
	struct link_ext *ext = spool_link_ext(l);
	struct rtext t = { 0 };
	char vars[4096];

	if (ext == NULL)
		return false;
	vars[0] = '\0';
	if (!fresh) {		/* behind: from a clean backend, every tracked value again */
		rtext_str(&t, ROUTE_SETS_RESET "\n;");
		free(ext->search_path);
		ext->search_path = NULL;
		sh->dirty = false;
	}
	if (varcache_diff_sql(r->c.vars, fresh ? l : NULL, ext->search_path, vars,
			      sizeof(vars)) < 0)
		return false;
	rtext_str(&t, vars);
	for (uint32_t i = 0; i < r->gucs.nsets; i++) {
		rtext_stmt(&t, r->gucs.sets[i].sql);
		sh->dirty |= route_sets_dirties(l, &r->gucs.sets[i]);
	}
	sh->sets_version = r->sets_version;
	sh->pend_applied = 0;
	sh->pend_notx = false;
	return route_sets_send(sh, l, &t);
}

/* route_sets_replay_pending: see route_int.h. */
bool
route_sets_replay_pending(struct rshard *sh)
{
	return route_sets_replay_upto(sh, sh->r->gucs.npend);
}

/* route_sets_replay_upto: see route_int.h. */
bool
route_sets_replay_upto(struct rshard *sh, uint32_t upto)
{
	struct route *r = sh->r;
	struct rtext t = { 0 };

	for (uint32_t k = sh->pend_applied; k < upto && k < r->gucs.npend; k++) {
		rtext_stmt(&t, r->gucs.pend[k].sql);
		sh->dirty |= route_sets_dirties(sh->link, &r->gucs.pend[k]);
	}
	if (sh->pend_applied < upto) {
		sh->pend_notx |= !sh->in_tx;
		sh->pend_applied = upto < r->gucs.npend ? upto : r->gucs.npend;
	}
	return route_sets_send(sh, sh->link, &t);
}

/* route_sets_rollback_to: see route_int.h. */
void
route_sets_rollback_to(struct route *r, uint32_t mark)
{
	if (mark >= r->gucs.npend)
		return;
	for (uint32_t i = 0; i < r->nsh; i++) {
		struct rshard *sh = &r->sh[i];

		if (sh->pend_applied <= mark)
			continue;
		if (sh->link != NULL && (!sh->in_tx || sh->pend_notx))
			sh->sets_version = 0;	/* keeps what the rollback undid */
		sh->pend_applied = mark;
	}
	while (r->gucs.npend > mark)
		rguc_clear(&r->gucs.pend[--r->gucs.npend]);
}

/* route_give_back: see route_int.h. */
void
route_give_back(struct rshard *sh, struct link *l)
{
	if (link_tx_status(l) != 'I')
		pool_release(l, "client disconnect while server was not ready");
	else if (sh->dirty)
		pool_release_reset(l, ROUTE_SETS_RESET);
	else
		pool_release(l, NULL);
	sh->dirty = false;
}
