/*
 * session_sp.c - the client's search_path as Postgres has it, for the varcache.
 *
 * Postgres 15 does not report search_path (no ParameterStatus), so neki follows the statements
 * that change it (varcache_scan_query: SET [SESSION] search_path, RESET search_path / ALL,
 * DISCARD ALL) and keeps them transactional, as Postgres does:
 *   - a change is staged when its statement is sent: a simple Query, or an Execute of a portal
 *     bound to a statement whose Parse text changes it (extended protocol: statement and portal
 *     names are followed from Parse / Bind / Close);
 *   - it takes effect (s->vars.search_path and the link's value) when the transaction it ran
 *     in ends: at ReadyForQuery 'I' after a COMMIT, or after an implicit transaction that got
 *     no error; it is dropped when the transaction rolled back (CommandComplete ROLLBACK, or an
 *     ErrorResponse in an implicit transaction). Staged changes carry the sync point they
 *     belong to, so pipelined batches resolve in order.
 * Known limit: ROLLBACK TO SAVEPOINT is not told apart from a SET before the savepoint; the
 * transaction's last change wins at COMMIT.
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
	free(e->eff.value);
	memset(e, 0, sizeof(*e));
}

static void
sp_clear(struct sp_entry *tab)
{
	for (size_t i = 0; i < SP_NAMES_MAX; i++) {
		free(tab[i].name);
		free(tab[i].eff.value);
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
	e->eff.value = eff->value != NULL ? strdup(eff->value) : NULL;
	if (e->name == NULL || (eff->value != NULL && e->eff.value == NULL)) {
		free(e->name);
		free(e->eff.value);
		memset(e, 0, sizeof(*e));
		return;
	}
	e->used = true;
}

/* ---- staged changes ---- */

/* Stage <eff> for the batch ending at sync point <gen>. */
static void
sp_stage(struct session *s, const struct sp_effect *eff, uint64_t gen)
{
	struct sess_sp *sp = &s->sp_state;
	struct sp_staged *st;

	if (sp->n == SP_STAGED_MAX) {	/* drop the oldest: only the latest value matters */
		free(sp->staged[0].value);
		memmove(&sp->staged[0], &sp->staged[1], (SP_STAGED_MAX - 1) * sizeof(*st));
		sp->n--;
	}
	st = &sp->staged[sp->n];
	st->gen = gen;
	st->value = eff->value != NULL ? strdup(eff->value) : NULL;
	if (eff->value != NULL && st->value == NULL)
		return;
	sp->n++;
}

/* The effect of a scanned text; false when it does not touch search_path. */
static bool
sp_effect_of(const struct query_effects *fx, struct sp_effect *eff)
{
	if (!fx->set_search_path && !fx->reset_search_path)
		return false;
	eff->value = fx->set_search_path ? (char *)fx->search_path : NULL;
	return true;
}

void
sp_on_query(struct session *s, const struct query_effects *fx)
{
	struct sp_effect eff;

	if (fx->discard_all || fx->deallocate_all)
		sp_clear(s->sp_state.stmts);
	if (sp_effect_of(fx, &eff))
		sp_stage(s, &eff, s->syncs_sent);	/* the Query's own sync point */
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
	if (sp_effect_of(&fx, &eff))
		sp_put(s->sp_state.stmts, m.name, &eff);
	else
		sp_del(s->sp_state.stmts, m.name);
}

static void
sp_on_bind(struct session *s, const uint8_t *body, size_t len)
{
	struct proto_bind_msg m;
	struct nk_error err;
	struct sp_entry *e;

	if (!proto_parse_bind(body, len, &m, &err))
		return;
	if ((e = sp_find(s->sp_state.stmts, m.stmt)) != NULL)
		sp_put(s->sp_state.portals, m.portal, &e->eff);
	else
		sp_del(s->sp_state.portals, m.portal);
}

static void
sp_on_execute(struct session *s, const uint8_t *body, size_t len)
{
	struct proto_execute_msg m;
	struct nk_error err;
	struct sp_entry *e;

	if (proto_parse_execute(body, len, &m, &err) &&
	    (e = sp_find(s->sp_state.portals, m.portal)) != NULL)
		sp_stage(s, &e->eff, s->syncs_sent + 1);	/* the next Sync ends its batch */
}

static void
sp_on_close(struct session *s, const uint8_t *body, size_t len)
{
	struct proto_target_msg m;
	struct nk_error err;

	if (proto_parse_close(body, len, &m, &err))
		sp_del(m.kind == 'S' ? s->sp_state.stmts : s->sp_state.portals, m.name);
}

static bool
sp_tracking(const struct session *s)
{
	for (size_t i = 0; i < SP_NAMES_MAX; i++)
		if (s->sp_state.stmts[i].used)
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
	struct sess_sp *sp = &s->sp_state;

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

	free(s->vars.search_path);
	s->vars.search_path = value != NULL ? strdup(value) : NULL;
	if (ext != NULL) {
		free(ext->search_path);
		ext->search_path = value != NULL ? strdup(value) : NULL;
	}
}

void
sp_on_ready(struct session *s, struct link *l, char status)
{
	struct sess_sp *sp = &s->sp_state;
	bool keep;
	size_t done = 0, j = 0;

	if (sp->n == 0 || status != 'I')
		return;
	keep = sp->saw_commit || (!sp->saw_error && !sp->saw_rollback);
	while (done < sp->n && sp->staged[done].gen <= s->z_recv)
		done++;
	if (keep && done > 0)
		sp_commit(s, l, sp->staged[done - 1].value);
	for (size_t i = 0; i < sp->n; i++) {
		if (i < done)
			free(sp->staged[i].value);
		else
			sp->staged[j++] = sp->staged[i];
	}
	sp->n = j;
	sp->saw_commit = sp->saw_error = sp->saw_rollback = false;
}

void
sp_reset(struct session *s)
{
	struct sess_sp *sp = &s->sp_state;

	for (size_t i = 0; i < sp->n; i++)
		free(sp->staged[i].value);
	sp->n = 0;
	sp->saw_commit = sp->saw_error = sp->saw_rollback = false;
}

void
sp_cleanup(struct session *s)
{
	sp_reset(s);
	sp_clear(s->sp_state.stmts);
	sp_clear(s->sp_state.portals);
}
