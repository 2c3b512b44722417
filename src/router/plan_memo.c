/*
 * plan_memo.c - plans kept for the next executions of a statement (plan_build_memo()).
 * Most statements an application repeats are `... WHERE key = $1` on one sharded table (or a
 * one-row `INSERT ... VALUES ($1, ...)`): the same plan each time but for the shard, which
 * only the key's value decides. Such a plan is
 * kept in the plan cache's entry of the statement, its per-execution parts cleared; an
 * execution it applies to (same database, schema and protocol; __neki.shard unset) routes
 * its value and takes the kept plan with that shard, without resolving the table, reading
 * the catalog or walking the WHERE clause again. A value that does not route (NULL, not of
 * the key's type) plans fully, so its answer is the planner's own. An INSERT into the owner
 * of GSIs keeps its GSI part too (the RETURNING text, the lookup tables and the lookup
 * INSERTs over the statement's slots: none of it depends on the values), copied into the cache entry's arena; a GSI step's plan (which has
 * none) is kept apart from a client's of the same text.
 */
#include "neki/base.h"

#include <string.h>

#include "neki/plan_gsi.h"
#include "plan_int.h"

#define MEMO_FAILS_MAX 4	/* plans not kept before the memo stops trying */

static bool
name_fits(const char *s)
{
	return s && strlen(s) < PLAN_MEMO_NAME;
}

/* An INSERT of one VALUES row, which goes where its key cell routes (its one part). */
static bool
one_row_insert(const struct pctx *c)
{
	const struct plan *o = c->out;

	return c->s->insert && c->s->insert->nrows == 1 && !(c->s->flags & STMT_F_FROM_SELECT) &&
	       o->nparts == 1 && o->parts[0].nrows == 1;
}

/* The one part of a one-row INSERT, on <uid>, in the statement's arena. */
static bool
one_part(struct pctx *c, struct plan *p, const char *uid)
{
	struct plan_part *part = rarena_alloc(c->a, sizeof(*part));
	uint32_t *row = rarena_alloc(c->a, sizeof(*row));

	if (part == NULL || row == NULL)
		return nk_error_oom(c->err);
	*row = 0;
	*part = (struct plan_part){ uid, row, 1 };
	p->parts = part;
	p->nparts = 1;
	return true;
}

/* The plan is a single shard's that its one routing value decided, and nothing else of
 * this execution shows in it. */
static bool
keepable(const struct pctx *c)
{
	const struct plan *o = c->out;
	const struct stmt *s = c->s;

	if (s->kind != STMT_SELECT && s->kind != STMT_UPDATE && s->kind != STMT_DELETE &&
	    !(s->kind == STMT_INSERT && one_row_insert(c)))
		return false;
	if (s->nrels != 1 || c->nrels != 1 || s->ncalls != 0 || c->in->sess->shard[0])
		return false;
	if (c->nslot_reads != 1 || c->nkey_values != 1 || c->key_rel != &c->rels[0] ||
	    c->key_value->kind != STMT_V_SLOT || !c->rels[0].typed)
		return false;
	if (o->kind != PLAN_SINGLE || o->op != PLAN_OP_EQUAL_UNIQUE || o->nshards != 1 ||
	    o->nvalues != 1 || o->bad_param)
		return false;
	return (!o->parts || s->kind == STMT_INSERT) && !o->fills && !o->cols && !o->nextvals &&
	       !o->setvals &&
	       !o->set_configs && !o->show_value && !o->inner && !o->insel &&
	       o->pin == PLAN_PIN_NONE && !o->queue_usage && !o->route_by_fill && !o->has_key &&
	       (!o->gsi || (o->gsi->kind == PLAN_GSI_INSERT_AFTER && !o->gsi->nfirst &&
			    !o->gsi->lock && !o->gsi->update && !o->gsi->nfields &&
			    !o->gsi->cover));
}

static bool
keep_str(struct rarena *a, const char **s)
{
	return *s == NULL || (*s = rarena_strdup(a, *s)) != NULL;
}

/* An INSERT_AFTER's GSI part <g> (nothing in it depends on the values) again in <a>. */
static struct plan_gsi *
keep_gsi(struct rarena *a, const struct plan_gsi *g)
{
	struct plan_gsi *k = rarena_alloc(a, sizeof(*k));
	struct plan_gsi_lookup *lk = rarena_alloc(a, (g->nlookups + 1) * sizeof(*lk));

	if (k == NULL || lk == NULL)
		return NULL;
	*k = *g;
	k->lookups = lk;
	if (!keep_str(a, &k->name) || !keep_str(a, &k->returning))
		return NULL;
	if (g->nalongside > 0 &&
	    (k->alongside = rarena_alloc(a, g->nalongside * sizeof(*k->alongside))) == NULL)
		return NULL;
	for (uint32_t i = 0; i < g->nalongside; i++)
		if ((k->alongside[i] = rarena_strdup(a, g->alongside[i])) == NULL)
			return NULL;
	for (uint32_t i = 0; i < g->nlookups; i++) {
		const struct plan_gsi_lookup *src = &g->lookups[i];
		const char **cols = rarena_alloc(a, (src->ncols + 1) * sizeof(*cols));
		uint32_t *pos = rarena_alloc(a, (src->ncols + 1) * sizeof(*pos));

		lk[i] = *src;
		if (cols == NULL || pos == NULL || !keep_str(a, &lk[i].name) ||
		    !keep_str(a, &lk[i].table))
			return NULL;
		for (uint32_t j = 0; j < src->ncols; j++)
			if ((cols[j] = rarena_strdup(a, src->cols[j])) == NULL)
				return NULL;
		memcpy(pos, src->pos, src->ncols * sizeof(*pos));
		lk[i].cols = cols;
		lk[i].pos = pos;
	}
	return k;
}

/* plan_memo_record: see plan_int.h. */
void
plan_memo_record(struct pctx *c, struct plan_memo *m)
{
	const struct plan_session *sess = c->in->sess;
	const struct prel *p = &c->rels[0];

	if (m->set || m->fails >= MEMO_FAILS_MAX)
		return;
	if (!c->in->norm || !keepable(c) || !name_fits(sess->db) || !name_fits(sess->schema)) {
		m->fails++;
		return;
	}
	m->tmpl = *c->out;
	if (c->out->gsi != NULL &&
	    (m->arena == NULL || (m->tmpl.gsi = keep_gsi(m->arena, c->out->gsi)) == NULL)) {
		m->fails++;
		return;
	}
	m->tmpl.stmt = NULL;
	m->tmpl.query = NULL;
	m->tmpl.group = NULL;
	m->tmpl.shards = NULL;
	m->tmpl.nshards = 0;
	m->tmpl.values = NULL;
	m->tmpl.nvalues = 0;
	m->tmpl.parts = NULL;
	m->tmpl.nparts = 0;
	m->insert = c->s->kind == STMT_INSERT;
	m->value = c->key_value;
	m->rel = p->r;
	m->direct = c->key_direct;
	m->group = p->res.group;
	m->index = p->res.index;
	m->col_type = p->col_type;
	m->nparams = c->in->nparams;
	m->extended = c->in->extended;
	m->multi = c->in->multi_statement;
	m->gsi_step = sess->gsi_step;
	strcpy(m->db, sess->db);
	strcpy(m->schema, sess->schema);
	m->set = true;
}

static bool
applies(const struct pctx *c, const struct plan_memo *m)
{
	const struct plan_session *sess = c->in->sess;

	return m->set && c->in->norm && !sess->shard[0] && m->nparams == c->in->nparams &&
	       m->extended == c->in->extended && m->multi == c->in->multi_statement &&
	       m->gsi_step == sess->gsi_step &&
	       sess->db && sess->schema && strcmp(m->db, sess->db) == 0 &&
	       strcmp(m->schema, sess->schema) == 0;
}

/* plan_memo_replay: see plan_int.h. */
bool
plan_memo_replay(struct pctx *c, struct plan_memo *m, bool *ok)
{
	struct pctx before;
	struct plan mine, *out = c->out;
	struct prel p;
	uint32_t range;
	const char *uid;
	bool routed, is_null;

	if (!applies(c, m))
		return false;
	memset(&p, 0, sizeof(p));
	p.r = m->rel;
	p.res.kind = TOPO_REL_TABLE;
	p.res.group = m->group;
	p.res.index = m->index;
	p.sharded = true;
	p.expr = topo_image_index_expr(c->img, m->index);
	p.key_col = p.expr->columns[0];
	p.col_type = m->col_type;
	p.typed = true;
	mine = m->tmpl;
	mine.stmt = c->s;
	mine.query = c->in->norm->key;
	before = *c;
	c->out = &mine;
	routed = plan_value_range(c, &p, m->value, m->direct, &range, &is_null);
	if (!routed || is_null) {
		/* (NULL, or not a value of the key's type: the planner answers) */
		*c = before;
		nk_error_clear(c->err);
		return false;
	}
	m->replays++;
	mine.group = topo_image_group_uid(c->img, m->group);
	uid = topo_image_range_shard(c->img, m->group, range);
	*ok = plan_add_shard(c, uid) && (!m->insert || one_part(c, &mine, uid));
	*out = mine;
	c->out = out;
	*ok = *ok && plan_check_session(c);
	return true;
}
