/*
 * route_explain.c - EXPLAIN (NEKI_PLAN [, ANALYZE]) of a routed statement: the plan as a
 * `QUERY PLAN` result (text, one row per line, or one JSON value); with ANALYZE the
 * explained statement runs first on its shards (its rows dropped, counted) and the answer is
 * the plan with each shard's rows and time. Entry points: route_explain(),
 * route_analyze_reply().
 */
#include "neki/base.h"

#include <stdlib.h>
#include <string.h>

#include "neki/clock.h"
#include "neki/plan_explain.h"
#include "route_int.h"
#include "route_explain.h"
#include "route_loop.h"

/* route_explain_reply: see route_explain.h. */
enum rstep
route_explain_reply(struct route *r, char *text, bool json)
{
	const char *lines[256];
	size_t n = 0;
	struct nk_error err;
	bool ok;

	if (text == NULL) {
		nk_error_oom(&err);
		return route_fail(r, &err);
	}
	if (json) {
		lines[n++] = text;
	} else {
		for (char *l = text; l != NULL && *l != '\0' && n < 256;) {
			char *nl = strchr(l, '\n');

			lines[n++] = l;
			if (nl != NULL)
				*nl++ = '\0';
			l = nl;
		}
	}
	ok = route_reply_rows(r, "QUERY PLAN", json ? ROUTE_OID_JSON : ROUTE_OID_TEXT, lines, n,
			      "EXPLAIN");
	free(text);
	return ok ? RSTEP_DONE : RSTEP_STOP;
}

/* <p> with its strings in the statement arena (the topology image is unpinned before the
 * exec ends). */
static struct plan *
route_plan_copy(struct route *r, const struct plan *p)
{
	struct plan *c = rarena_alloc(r->arena, sizeof(*c));
	const char **v = rarena_alloc(r->arena, (p->nshards + p->nvalues + 1) * sizeof(*v));

	if (c == NULL || v == NULL)
		return NULL;
	*c = *p;
	c->group = p->group != NULL ? rarena_strdup(r->arena, p->group) : NULL;
	c->shards = v;
	c->values = v + p->nshards;
	for (uint32_t i = 0; i < p->nshards; i++)
		if ((v[i] = rarena_strdup(r->arena, p->shards[i])) == NULL)
			return NULL;
	for (uint32_t i = 0; i < p->nvalues; i++)
		if ((v[p->nshards + i] = rarena_strdup(r->arena, p->values[i])) == NULL)
			return NULL;
	return c;
}

/* route_explain: see route_explain.h. */
enum rstep
route_explain(struct route *r, const struct plan *p, const char *sql)
{
	bool json = !p->stmt->explain->format_text;
	struct nk_error err;
	enum rstep rc;

	if (!p->stmt->explain->analyze)
		return route_explain_reply(r, plan_explain(p->inner, json), json);
	if (r->x.ext_exec) {
		nk_error_set(&err, ERRCODE_FEATURE_NOT_SUPPORTED,
			     "EXPLAIN (NEKI_PLAN, ANALYZE) is not supported with the "
			     "extended query protocol yet");
		nk_error_hint(&err, "Use the simple query protocol.");
		return route_fail(r, &err);
	}
	if (p->inner->op == PLAN_OP_INSERT_SELECT) {
		nk_error_set(&err, ERRCODE_FEATURE_NOT_SUPPORTED,
			     "EXPLAIN (NEKI_PLAN, ANALYZE) of an INSERT ... SELECT "
			     "the router runs across shards is not supported yet");
		nk_error_hint(&err, "Run the statement itself, or EXPLAIN (NEKI_PLAN) without "
			      "ANALYZE.");
		return route_fail(r, &err);
	}
	if (p->inner->nfills > 0 || p->inner->nnextvals > 0) {
		nk_error_set(&err, ERRCODE_FEATURE_NOT_SUPPORTED,
			     "EXPLAIN (NEKI_PLAN, ANALYZE) of a statement taking "
			     "sequence values from the router is not supported yet");
		nk_error_hint(&err, "Run the statement itself, or EXPLAIN (NEKI_PLAN) without "
			      "ANALYZE.");
		return route_fail(r, &err);
	}
	if ((r->x.an.plan = route_plan_copy(r, p->inner)) == NULL) {
		nk_error_oom(&err);
		return route_fail(r, &err);
	}
	r->x.an.on = true;
	r->x.an.json = json;
	r->x.an.rows = 0;
	r->x.an.start_us = nk_now_us();
	rc = route_shards(r, p->inner, plan_explained_text(sql));
	if (rc != RSTEP_ASYNC)
		r->x.an.on = false;
	return rc;
}

/* route_analyze_reply: see route_explain.h. */
bool
route_analyze_reply(struct route *r)
{
	struct plan_actual_shard sa[ROUTE_SHARDS_MAX];
	struct plan_actual act = { sa, r->x.ntg, 0, 0 };
	bool merged = r->x.combine == RX_MERGE;

	for (uint32_t i = 0; i < r->x.ntg; i++) {
		const struct rshard *sh = &r->sh[r->x.tg[i]];

		sa[i].shard = sh->uid;
		sa[i].rows = sh->a_rows > 0 || !sh->counted ? sh->a_rows : sh->count;
		sa[i].ms = (double)(sh->a_done_us - sh->a_sent_us) / 1000.0;
		act.rows += sa[i].rows;
	}
	if (merged)
		act.rows = r->x.an.rows;
	else if (r->x.combine == RX_FIRST && r->x.ntg > 0)
		act.rows = sa[0].rows;	/* every copy of a reference table */
	act.total_ms = (double)(nk_now_us() - r->x.an.start_us) / 1000.0;
	return route_explain_reply(r, plan_explain_analyze(r->x.an.plan, r->x.an.json, &act),
				   r->x.an.json) == RSTEP_DONE;
}
