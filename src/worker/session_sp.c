/*
 * session_sp.c - the client's search_path as Postgres has it, for the varcache.
 *
 * Postgres 15 does not report search_path (no ParameterStatus; pgbouncer can only track it
 * with track_extra_parameters on servers that report it, PG 18 or Citus), so neki follows the
 * statements that change it (varcache_scan_query: SET [SESSION] search_path, SELECT
 * set_config('search_path', '<literal>', false), RESET search_path / ALL, DISCARD ALL) and
 * keeps them transactional, as Postgres does:
 *   - a change is staged when its statement is sent: a simple Query, or an Execute of a portal
 *     bound to a statement whose Parse text changes it (extended protocol: statement and portal
 *     names are followed from Parse / Bind / Close);
 *   - it takes effect (s->vars.search_path and the link's value) when the transaction it ran
 *     in ends: at ReadyForQuery 'I' after a COMMIT, or after an implicit transaction that got
 *     no error; it is dropped when the transaction rolled back (CommandComplete ROLLBACK, or an
 *     ErrorResponse in an implicit transaction). Staged changes carry the sync point they
 *     belong to, so pipelined batches resolve in order;
 *   - SAVEPOINT, RELEASE and ROLLBACK TO are staged with the changes and replayed in order
 *     when the transaction ends, so a change made after a savepoint that was rolled back to
 *     is undone, as in Postgres.
 * Not followed: set_config() with a parameter or an expression, calls inside functions, and
 * more than SP_STAGED_MAX statements open at once (the oldest are dropped).
 * Entry points: sp_on_query(), sp_on_client_ext(), sp_on_server(), sp_on_ready(), sp_reset(),
 * sp_cleanup().
 */
#include "neki/base.h"

#include <stdlib.h>
#include <string.h>

#include "neki/proto.h"
#include "session_int.h"

/* ---- name -> effect maps (statements, portals) ---- */

static struct sp_entry *
sp_find(struct sp_entry *tab, const char *name)
{
	for (size_t i = 0; i < SP_NAMES_MAX; i++)
		if (tab[i].used && strcmp(tab[i].name, name) == 0)
			return &tab[i];
	return NULL;
}

static void
sp_del(struct sp_entry *tab, const char *name)
{
	struct sp_entry *e = sp_find(tab, name);

	if (e == NULL)
		return;
	free(e->name);
	free(e->eff.arg);
	memset(e, 0, sizeof(*e));
}

static void
sp_clear(struct sp_entry *tab)
{
	for (size_t i = 0; i < SP_NAMES_MAX; i++) {
		free(tab[i].name);
		free(tab[i].eff.arg);
		memset(&tab[i], 0, sizeof(tab[i]));
	}
}

/* Remember <name> -> <eff> (a copy); the oldest entry goes when the table is full. */
static void
sp_put(struct sp_entry *tab, const char *name, const struct sp_effect *eff)
{
	struct sp_entry *e;

	sp_del(tab, name);
	e = NULL;
	for (size_t i = 0; i < SP_NAMES_MAX && e == NULL; i++)
		if (!tab[i].used)
			e = &tab[i];
	if (e == NULL) {
		sp_del(tab, tab[0].name);
		memmove(&tab[0], &tab[1], (SP_NAMES_MAX - 1) * sizeof(*tab));
		memset(&tab[SP_NAMES_MAX - 1], 0, sizeof(*tab));
		e = &tab[SP_NAMES_MAX - 1];
	}
	e->name = strdup(name);
	e->eff.kind = eff->kind;
	e->eff.arg = eff->arg != NULL ? strdup(eff->arg) : NULL;
	if (e->name == NULL || (eff->arg != NULL && e->eff.arg == NULL)) {
		free(e->name);
		free(e->eff.arg);
		memset(e, 0, sizeof(*e));
		return;
	}
	e->used = true;
}

/* ---- staged changes ---- */

/*
 * Stage <eff> for the batch ending at sync point <gen>. A RELEASE or ROLLBACK TO that meets its
 * own SAVEPOINT as the last staged statement changes nothing: the pair (RELEASE) or the
 * ROLLBACK TO is not kept, so ORM-style savepoint blocks do not pile up.
 */
static void
sp_stage(struct session *s, const struct sp_effect *eff, uint64_t gen)
{
	struct sess_sp *sp = &s->sync.sp_state;
	struct sp_staged *st, *last = sp->n > 0 ? &sp->staged[sp->n - 1] : NULL;

	if ((eff->kind == SP_OP_RELEASE || eff->kind == SP_OP_ROLLBACK_TO) && last != NULL &&
	    last->eff.kind == SP_OP_SAVEPOINT && strcmp(last->eff.arg, eff->arg) == 0) {
		if (eff->kind == SP_OP_RELEASE) {
			free(last->eff.arg);
			sp->n--;
		}
		return;
	}
	if (sp->n == SP_STAGED_MAX) {	/* drop the oldest */
		free(sp->staged[0].eff.arg);
		memmove(&sp->staged[0], &sp->staged[1], (SP_STAGED_MAX - 1) * sizeof(*st));
		sp->n--;
	}
	st = &sp->staged[sp->n];
	st->gen = gen;
	st->eff.kind = eff->kind;
	st->eff.arg = eff->arg != NULL ? strdup(eff->arg) : NULL;
	if (eff->arg != NULL && st->eff.arg == NULL)
		return;
	sp->n++;
}

/* The effect of one scanned statement (a borrowed view of <op>). */
static void
sp_effect_of(const struct query_op *op, struct sp_effect *eff)
{
	eff->kind = op->kind;
	eff->arg = op->kind == SP_OP_RESET ? NULL : (char *)op->arg;
}

void
sp_on_query(struct session *s, const struct query_effects *fx)
{
	struct sp_effect eff;

	if (fx->discard_all || fx->deallocate_all)
		sp_clear(s->sync.sp_state.stmts);
	for (size_t i = 0; i < fx->n_ops; i++) {
		sp_effect_of(&fx->ops[i], &eff);
		sp_stage(s, &eff, s->sync.syncs_sent);	/* the Query's own sync point */
	}
}

/* Parse: remember statements whose text changes search_path. */
static void
sp_on_parse(struct session *s, const uint8_t *body, size_t len)
{
	struct proto_parse_msg m;
	struct query_effects fx;
	struct sp_effect eff;
	struct nk_error err;

	if (!proto_parse_parse(body, len, &m, &err))
		return;
	varcache_scan_query(m.query, strlen(m.query), &fx);
	if (fx.n_ops > 0) {	/* one statement per Parse */
		sp_effect_of(&fx.ops[0], &eff);
		sp_put(s->sync.sp_state.stmts, m.name, &eff);
	} else {
		sp_del(s->sync.sp_state.stmts, m.name);
	}
}

static void
sp_on_bind(struct session *s, const uint8_t *body, size_t len)
{
	struct proto_bind_msg m;
	struct nk_error err;
	struct sp_entry *e;

	if (!proto_parse_bind(body, len, &m, &err))
		return;
	if ((e = sp_find(s->sync.sp_state.stmts, m.stmt)) != NULL)
		sp_put(s->sync.sp_state.portals, m.portal, &e->eff);
	else
		sp_del(s->sync.sp_state.portals, m.portal);
}

static void
sp_on_execute(struct session *s, const uint8_t *body, size_t len)
{
	struct proto_execute_msg m;
	struct nk_error err;
	struct sp_entry *e;

	if (proto_parse_execute(body, len, &m, &err) &&
	    (e = sp_find(s->sync.sp_state.portals, m.portal)) != NULL)
		sp_stage(s, &e->eff, s->sync.syncs_sent + 1);	/* the next Sync ends its batch */
}

static void
sp_on_close(struct session *s, const uint8_t *body, size_t len)
{
	struct proto_target_msg m;
	struct nk_error err;

	if (proto_parse_close(body, len, &m, &err))
		sp_del(m.kind == 'S' ? s->sync.sp_state.stmts : s->sync.sp_state.portals, m.name);
}

static bool
sp_tracking(const struct session *s)
{
	for (size_t i = 0; i < SP_NAMES_MAX; i++)
		if (s->sync.sp_state.stmts[i].used)
			return true;
	return false;
}

bool
sp_wants(const struct session *s, uint8_t type)
{
	return type == 'P' || type == 'C' || ((type == 'B' || type == 'E') && sp_tracking(s));
}

void
sp_on_client_ext(struct session *s, const uint8_t *pkt, uint32_t len)
{
	const uint8_t *body = pkt + 5;
	size_t blen = len - 5;

	switch (pkt[0]) {
	case 'P':
		sp_on_parse(s, body, blen);
		break;
	case 'B':
		if (sp_tracking(s))
			sp_on_bind(s, body, blen);
		break;
	case 'E':
		if (sp_tracking(s))
			sp_on_execute(s, body, blen);
		break;
	case 'C':
		sp_on_close(s, body, blen);
		break;
	default:
		break;
	}
}

/* ---- the server's answers ---- */

void
sp_on_server(struct session *s, const struct sbuf_pkt *pkt)
{
	struct sess_sp *sp = &s->sync.sp_state;

	if (sp->n == 0)
		return;
	if (pkt->type == 'E') {
		sp->saw_error = true;
	} else if (pkt->type == 'C' && pkt->avail >= pkt->len && pkt->len > 5) {
		const char *tag = (const char *)pkt->data + 5;

		if (strncmp(tag, "COMMIT", pkt->len - 5) == 0)
			sp->saw_commit = true;
		else if (strncmp(tag, "ROLLBACK", pkt->len - 5) == 0)
			sp->saw_rollback = true;
	}
}

/* Set the committed search_path of the session and of <l> to <value> (NULL = default). */
static void
sp_commit(struct session *s, struct link *l, const char *value)
{
	struct link_ext *ext = l != NULL ? spool_link_ext(l) : NULL;
	char *v = value != NULL ? strdup(value) : NULL;	/* <value> may be the old one */

	if (ext != NULL) {
		free(ext->search_path);
		ext->search_path = v != NULL ? strdup(v) : NULL;
	}
	free(s->vars.search_path);
	s->vars.search_path = v;
}

/*
 * Replay staged[0..done) on top of the committed value, with Postgres' savepoint rules: a
 * SAVEPOINT remembers the value, RELEASE forgets it (and the ones after it), ROLLBACK TO
 * restores it (keeping it). Returns whether anything was set; the result in *out (borrowed).
 */
static bool
sp_replay(const struct session *s, size_t done, const char **out)
{
	const struct sess_sp *sp = &s->sync.sp_state;
	const char *cur = s->vars.search_path, *saved[SP_STAGED_MAX], *names[SP_STAGED_MAX];
	size_t depth = 0;
	bool changed = false;

	for (size_t i = 0; i < done; i++) {
		const struct sp_effect *e = &sp->staged[i].eff;
		size_t k = depth;

		if (e->kind == SP_OP_SET || e->kind == SP_OP_RESET) {
			cur = e->arg;
			changed = true;
			continue;
		}
		if (e->kind == SP_OP_SAVEPOINT) {
			names[depth] = e->arg;
			saved[depth++] = cur;
			continue;
		}
		while (k > 0 && strcmp(names[k - 1], e->arg) != 0)
			k--;
		if (k == 0)
			continue;	/* unknown savepoint: the statement failed */
		if (e->kind == SP_OP_RELEASE) {
			depth = k - 1;
		} else {
			cur = saved[k - 1];
			depth = k;
			changed = true;
		}
	}
	*out = cur;
	return changed;
}

void
sp_on_ready(struct session *s, struct link *l, char status)
{
	struct sess_sp *sp = &s->sync.sp_state;
	const char *value;
	bool keep;
	size_t done = 0, j = 0;

	if (sp->n == 0 || status != 'I')
		return;
	keep = sp->saw_commit || (!sp->saw_error && !sp->saw_rollback);
	while (done < sp->n && sp->staged[done].gen <= s->sync.z_recv)
		done++;
	if (keep && sp_replay(s, done, &value))
		sp_commit(s, l, value);
	for (size_t i = 0; i < sp->n; i++) {
		if (i < done)
			free(sp->staged[i].eff.arg);
		else
			sp->staged[j++] = sp->staged[i];
	}
	sp->n = j;
	sp->saw_commit = sp->saw_error = sp->saw_rollback = false;
}

void
sp_reset(struct session *s)
{
	struct sess_sp *sp = &s->sync.sp_state;

	for (size_t i = 0; i < sp->n; i++)
		free(sp->staged[i].eff.arg);
	sp->n = 0;
	sp->saw_commit = sp->saw_error = sp->saw_rollback = false;
}

void
sp_cleanup(struct session *s)
{
	sp_reset(s);
	sp_clear(s->sync.sp_state.stmts);
	sp_clear(s->sync.sp_state.portals);
}
