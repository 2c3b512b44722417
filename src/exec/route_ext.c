/*
 * route_ext.c - the extended query protocol of a routed session. Parse is analysed at once
 * (normalised and cached, syntax errors reported there) and answered by the router; Bind
 * makes a portal (route_portal.c keeps the session's portals: several at once, one
 * namespace with SQL cursors) and is answered by the router; the first Execute of a portal
 * plans its statement with the bound parameters (text or binary) and sends Parse + Bind (+
 * Describe when the client asked to describe the portal) + Execute + Sync of the unnamed
 * statement to each target shard (with a row limit the shard's portal is the portal's
 * mirror, kept for the next Execute); the shards' ParseComplete / BindComplete are
 * dropped. A later Execute goes on where the portal is (route_portal_execute()). Describe
 * of a statement is answered by one shard (the plan's, or the authoritative one). Close is
 * the router's. After an error the batch is skipped up to Sync, as Postgres does; Sync
 * ends the batch's implicit transaction when a row-limited Execute opened one and gets the
 * router's ReadyForQuery. Entry points: route_on_ext(), route_run_ext() (an Execute runs).
 */
#include "neki/base.h"

#include <stdlib.h>
#include <string.h>

#include "neki/admin.h"
#include "neki/merge.h"
#include "neki/pktbuf.h"
#include "neki/proc.h"
#include "neki/proto.h"
#include "route_int.h"
#include "route_client.h"
#include "route_compose.h"
#include "route_exec.h"
#include "route_ext.h"
#include "route_loop.h"
#include "route_portal.h"
#include "route_prep.h"
#include "route_sets.h"
#include "route_sqltext.h"

/* ---- statements and portals ---- */

/* route_norm_copy: see route_int.h. */
struct rnorm *
route_norm_copy(const struct parse_norm *n)
{
	size_t klen = strlen(n->key) + 1, size = sizeof(struct rnorm) + klen;
	struct rnorm *c;
	struct parse_literal *lits;
	char *p;

	size += (size_t)n->nlits * sizeof(*lits);
	for (uint32_t i = 0; i < n->nlits; i++)
		size += strlen(n->lits[i].value) + 1;
	if ((c = malloc(size)) == NULL)
		return NULL;
	lits = (struct parse_literal *)(c + 1);
	p = (char *)(lits + n->nlits);
	c->refs = 1;
	c->norm = *n;
	c->norm.lits = lits;
	c->norm.key = memcpy(p, n->key, klen);
	p += klen;
	for (uint32_t i = 0; i < n->nlits; i++) {
		size_t vlen = strlen(n->lits[i].value) + 1;

		lits[i] = n->lits[i];
		lits[i].value = memcpy(p, n->lits[i].value, vlen);
		p += vlen;
	}
	return c;
}

void
route_norm_unref(struct rnorm *n)
{
	if (n != NULL && --n->refs == 0)
		free(n);
}

static struct rstmt *
route_find_stmt(struct route *r, const char *name)
{
	for (struct rstmt *st = r->stmts; st != NULL; st = st->next)
		if (route_streq(st->name, name))
			return st;
	return NULL;
}

static void
route_stmt_free(struct rstmt *st)
{
	if (st->pst != NULL)
		prep_stmt_unref(st->pst);
	route_norm_unref(st->norm);
	free(st->name);
	free(st->query);
	free(st->oids);
	free(st);
}

bool
route_ext_drop_stmt(struct route *r, const char *name)
{
	for (struct rstmt **pp = &r->stmts; *pp != NULL; pp = &(*pp)->next) {
		if (route_streq((*pp)->name, name)) {
			struct rstmt *st = *pp;

			*pp = st->next;
			route_stmt_free(st);
			return true;
		}
	}
	return false;
}

bool
route_ext_has_stmt(struct route *r, const char *name)
{
	return route_find_stmt(r, name) != NULL;
}

void
route_ext_drop_stmts(struct route *r)
{
	while (r->stmts != NULL) {
		struct rstmt *st = r->stmts;

		r->stmts = st->next;
		route_stmt_free(st);
	}
}

void
route_ext_free(struct route *r)
{
	route_ext_drop_stmts(r);
}

/* ---- errors and replies ---- */

static bool
route_ext_fail(struct route *r, const struct nk_error *err)
{
	struct nk_error e = *err;
	struct proto_err_field f;
	char buf[24];
	struct pktbuf pb;

	e.severity = NK_SEV_ERROR;
	r->ext_failed = true;
	if (r->tx == 'T')
		r->tx = 'E';
	pktbuf_init(&pb, 256);
	pktbuf_write_error_ex(&pb, 'E', &e, &f, route_err_field(r, &e, false, &f, buf, sizeof(buf)));
	return route_send(r, &pb);
}

static bool
route_ext_reply(struct route *r, char type)
{
	struct pktbuf pb;
	uint8_t mem[8];

	pktbuf_init_fixed(&pb, mem, sizeof(mem));
	if (type == '1')
		pktbuf_write_parse_complete(&pb);
	else if (type == '2')
		pktbuf_write_bind_complete(&pb);
	else
		pktbuf_write_close_complete(&pb);
	return route_send(r, &pb);
}

/* ---- Parse / Bind / Close ---- */

/* 25P02 in <err> (a message other than a transaction's end in an aborted one). */
static const struct nk_error *
route_aborted(struct nk_error *err)
{
	nk_error_set(err, ERRCODE_IN_FAILED_SQL_TRANSACTION,
		     "current transaction is aborted, commands ignored until end "
		     "of transaction block");
	return err;
}

static bool
route_on_parse(struct route *r, const uint8_t *body, size_t len)
{
	struct proto_parse_msg m;
	struct nk_error err;
	struct rstmt *st;
	struct route_stmt_info info = { .tx_exit = false };

	if (!proto_parse_parse(body, len, &m, &err))
		return route_ext_fail(r, &err);
	r->c.stats->total_client_parse_count++;
	if (admin_is_neki_call(m.query)) {
		/* forwarded to the admin's console, which speaks the simple protocol only */
		nk_error_set(&err, ERRCODE_FEATURE_NOT_SUPPORTED,
			     "a __neki call cannot follow other statements in one "
			     "extended-protocol batch");
		nk_error_hint(&err, "Send it after a Sync, as a batch of its own.");
		return route_ext_fail(r, &err);
	}
	if (!route_analyse(r, m.query, &info, &err))
		return route_ext_fail(r, &err);
	if (r->tx == 'E' && !info.tx_exit)
		return route_ext_fail(r, route_aborted(&err));
	/* a named statement is never replaced (one namespace with PREPARE), the unnamed one is;
	 * as Postgres, after the syntax check */
	if (m.name[0] != '\0' && (route_find_stmt(r, m.name) != NULL || route_prep_has(r, m.name))) {
		nk_error_set(&err, ERRCODE_DUPLICATE_PSTATEMENT,
			     "prepared statement \"%s\" already exists", m.name);
		return route_ext_fail(r, &err);
	}
	(void)route_ext_drop_stmt(r, m.name);
	st = calloc(1, sizeof(*st));
	if (st == NULL || (st->name = strdup(m.name)) == NULL ||
	    (st->query = strdup(m.query)) == NULL ||
	    (st->norm = route_norm_copy(&info.norm)) == NULL ||
	    (m.nparams > 0 && (st->oids = malloc((size_t)m.nparams * 4)) == NULL)) {
		if (st != NULL)
			route_stmt_free(st);
		nk_error_oom(&err);
		return route_ext_fail(r, &err);
	}
	/* a named statement is kept prepared on the shard links (Parse once per link) */
	if (m.name[0] != '\0' && r->c.cfg->pool.max_prepared_statements > 0 &&
	    (st->pst = prep_stmt_ref(m.query, m.oids, m.nparams)) == NULL) {
		route_stmt_free(st);
		nk_error_oom(&err);
		return route_ext_fail(r, &err);
	}
	st->noids = m.nparams;
	st->tx_exit = info.tx_exit;
	st->rows = info.rows;
	if (m.nparams > 0)
		memcpy(st->oids, m.oids, (size_t)m.nparams * 4);
	st->next = r->stmts;
	r->stmts = st;
	return route_ext_reply(r, '1');
}

/* Bind: a new portal (a named one must not exist yet: cursors share the namespace). */
static bool
route_on_bind(struct route *r, const uint8_t *body, size_t len)
{
	struct proto_bind_msg m;
	struct nk_error err;
	const struct rstmt *st;
	struct rportal *p;
	size_t names;

	if (!proto_parse_bind(body, len, &m, &err))
		return route_ext_fail(r, &err);
	if ((st = route_find_stmt(r, m.stmt)) == NULL) {
		nk_error_set(&err, ERRCODE_INVALID_SQL_STATEMENT_NAME,
			     "prepared statement \"%s\" does not exist", m.stmt);
		return route_ext_fail(r, &err);
	}
	if (r->tx == 'E' && (!st->tx_exit || m.nparams > 0))
		return route_ext_fail(r, route_aborted(&err));
	if (m.portal[0] != '\0' && route_portal_find(r, m.portal) != NULL) {
		nk_error_set(&err, ERRCODE_DUPLICATE_CURSOR,
			     "cursor \"%s\" already exists", m.portal);
		return route_ext_fail(r, &err);
	}
	names = strlen(m.portal) + 1 + strlen(m.stmt) + 1;
	p = route_portal_new_bind(m.portal, st->query, st->oids, st->noids, body + names,
				  len - names);
	if (p == NULL) {
		nk_error_oom(&err);
		return route_ext_fail(r, &err);
	}
	p->tx_new = r->tx != 'I';
	p->rows = st->rows;
	p->pst = st->pst != NULL ? prep_stmt_addref(st->pst) : NULL;
	p->norm = st->norm;
	st->norm->refs++;
	route_portal_add(r, p);
	/* a value may not be one of its type: the shard that binds it answers (Postgres checks
	 * the values at Bind); without values the Bind cannot fail there */
	p->bind_owed = m.nparams > 0;
	return p->bind_owed || route_ext_reply(r, '2');
}

static bool
route_on_close(struct route *r, const uint8_t *body, size_t len)
{
	struct proto_target_msg m;
	struct nk_error err;

	if (!proto_parse_close(body, len, &m, &err))
		return route_ext_fail(r, &err);
	if (m.kind == 'S') {
		if (!route_ext_drop_stmt(r, m.name))
			(void)route_prep_drop(r, m.name);	/* one namespace, as Postgres */
	} else {
		struct rportal *p = route_portal_find(r, m.name);

		if (p != NULL)		/* (none: CloseComplete all the same, as Postgres) */
			route_portal_drop(r, p, true);
	}
	return route_ext_reply(r, '3');
}

/* ---- Describe / Execute: shard work ---- */

/* Bound values of the portal as plan parameters (arena of the statement). */
static bool
route_bind_params(struct route *r, struct plan_param **out, uint32_t *n, struct nk_error *err)
{
	struct proto_bind_msg m;
	const struct rportal *x = r->xportal;
	struct proto_value vals[256];
	size_t nv;

	if (!route_portal_bind_msg(x, &m, err))	/* the kept Bind */
		return false;
	nv = proto_bind_params(&m, vals, 256);
	*out = rarena_alloc(r->arena, (nv ? nv : 1) * sizeof(**out));
	if (*out == NULL)
		return nk_error_oom(err);
	for (size_t i = 0; i < nv; i++) {
		struct plan_param *pp = &(*out)[i];
		uint8_t *copy = vals[i].p != NULL ? rarena_alloc(r->arena, vals[i].len + 1) : NULL;

		if (copy != NULL)
			memcpy(copy, vals[i].p, vals[i].len);
		pp->data = copy;
		pp->len = vals[i].p == NULL ? -1 : (int32_t)vals[i].len;
		pp->binary = proto_bind_param_format(&m, i) == 1;
		pp->type_oid = i < x->noids ?
			       ((uint32_t)x->oids[i * 4] << 24 | (uint32_t)x->oids[i * 4 + 1] << 16 |
				(uint32_t)x->oids[i * 4 + 2] << 8 | x->oids[i * 4 + 3]) : 0;
	}
	*n = (uint32_t)nv;
	return true;
}

/* What route_ext_msgs() sends between the Parse and the Sync. */
enum rext_what {
	REXT_DESCRIBE_S = 1u << 0,	/* Describe of the statement */
	REXT_BIND = 1u << 1,		/* Bind of the portal (its parameters, its formats) */
	REXT_DESCRIBE_P = 1u << 2,	/* ... Describe of that portal */
	REXT_EXECUTE = 1u << 3,		/* ... Execute of it */
};


/* The Parse types <oids>[0..noids) a client declared (network order) into <o>; their
 * number (at most 256). */
static uint16_t
declared_types(const uint8_t *oids, uint16_t noids, uint32_t *o)
{
	uint16_t n = noids < 256 ? noids : 256;

	for (uint16_t i = 0; i < n; i++)
		o[i] = (uint32_t)oids[i * 4] << 24 | (uint32_t)oids[i * 4 + 1] << 16 |
		       (uint32_t)oids[i * 4 + 2] << 8 | oids[i * 4 + 3];
	return n;
}

/* The Parse types <o>[0..noids) of a text <query> for the Execute's bound values: each
 * value the text does not read (an evaluated subquery held it, another shard's part of an
 * INSERT has it) declared text or bytea, so that Postgres need not infer its type; the
 * number of types. */
static uint16_t
unread_params_typed(const struct route *r, const char *query, uint32_t *o, uint16_t noids)
{
	uint32_t n = r->x.ext_nparams < 256 ? r->x.ext_nparams : 256;
	bool used[256] = { false };

	route_sql_params(query, used, n);
	for (uint32_t i = 0; i < n; i++) {
		if (i >= noids)
			o[i] = 0;
		if (!used[i])
			o[i] = r->x.ext_params[i].binary ? 17 : 25;	/* bytea, text */
	}
	return (uint16_t)(n > noids ? n : noids);
}

/*
 * The messages every target gets: Parse of portal <x>'s statement (<x> NULL: of <st>), then
 * <what> (enum rext_what), then Sync. With a row limit the shard's portal is the portal's
 * mirror, which the shard keeps (inside the transaction) for the next Execute. With
 * r->x.ext_pst set (and a Bind) no Parse: the Bind names the statement the links keep
 * (route_send_named()).
 */
static bool
route_ext_msgs_text(struct route *r, const struct rportal *x, const struct rstmt *st,
		    const char *text, unsigned what, int32_t max_rows)
{
	bool bind = (what & REXT_BIND) != 0;
	const char *query = text != NULL ? text : x != NULL ? x->query : st->query;
	const uint8_t *oids = x != NULL ? x->oids : st->oids;
	uint16_t noids = x != NULL ? x->noids : st->noids;
	const char *portal = bind && max_rows > 0 ? route_portal_mirror(x) : "";
	const struct prep_stmt *named = bind ? r->x.ext_pst : NULL;
	uint32_t o[256];
	struct pktbuf pb;

	r->x.ext_pst = named != NULL ? r->x.ext_pst : NULL;
	pktbuf_init(&pb, (named != NULL ? 0 : strlen(query)) + 64 + (bind ? x->bind_len : 0));
	if (named == NULL) {
		noids = declared_types(oids, noids, o);
		if (text != NULL && bind)	/* (a composed text may no longer read some) */
			noids = unread_params_typed(r, query, o, noids);
		pktbuf_write_parse(&pb, "", query, o, noids);
	}
	if (what & REXT_DESCRIBE_S)
		pktbuf_write_describe(&pb, 'S', "");
	if (bind) {
		if (portal[0] != '\0')
			pktbuf_write_close(&pb, 'P', portal);	/* (none there: harmless) */
		pktbuf_begin(&pb, 'B');
		pktbuf_put_string(&pb, portal);
		pktbuf_put_string(&pb, named != NULL ? named->name : "");
		pktbuf_put_bytes(&pb, x->bind + 2, x->bind_len - 2);	/* (after the names) */
		pktbuf_end(&pb);
		if (what & REXT_DESCRIBE_P)
			pktbuf_write_describe(&pb, 'P', portal);
		if (what & REXT_EXECUTE)
			pktbuf_write_execute(&pb, portal, (uint32_t)max_rows);
	}
	pktbuf_write_sync(&pb);
	if (pktbuf_failed(&pb)) {
		pktbuf_cleanup(&pb);
		return false;
	}
	free(r->x.ext_msg);
	r->x.ext_msg = pb.buf;		/* taken over */
	r->x.ext_len = pb.len;
	return true;
}

/* route_ext_msgs_text() of the statement's own text. */
static bool
route_ext_msgs(struct route *r, const struct rportal *x, const struct rstmt *st, unsigned what,
	       int32_t max_rows)
{
	return route_ext_msgs_text(r, x, st, NULL, what, max_rows);
}

/* route_ext_bind_check: see route_int.h. */
enum rstep
route_ext_bind_check(struct route *r, const char *uid, const struct nk_error *err)
{
	struct nk_error e;

	if (!route_exec_setup(r, &uid, 1, "", &e))
		return route_fail(r, &e);
	if (!route_ext_msgs(r, r->xportal, NULL, REXT_BIND, 0) ||
	    (r->x.bind_err = malloc(sizeof(*r->x.bind_err))) == NULL) {
		nk_error_oom(&e);
		return route_fail(r, &e);
	}
	*r->x.bind_err = *err;
	return route_exec_run(r);
}

/* The messages of an Execute, with the portal's Describe when <describe>. */
static unsigned
route_ext_exec_what(bool describe)
{
	return REXT_BIND | REXT_EXECUTE | (describe ? REXT_DESCRIBE_P : 0);
}

/* route_ext_unnamed: see route_int.h. */
bool
route_ext_unnamed(struct route *r)
{
	const struct rportal *x = r->xportal;

	if (r->x.ext_pst == NULL)
		return true;
	r->x.ext_pst = NULL;
	return route_ext_msgs(r, x, NULL, route_ext_exec_what(r->x.ext_describe), r->x.ext_max_rows);
}

/* route_ext_composed: see route_compose.h. */
bool
route_ext_composed(struct route *r, const char *sql)
{
	r->x.ext_pst = NULL;	/* (the text is new each time: sent with its Parse) */
	r->x.ext_norm = NULL;	/* (normalised again) */
	return route_ext_msgs_text(r, r->xportal, NULL, sql, route_ext_exec_what(r->x.ext_describe),
				   r->x.ext_max_rows);
}

/* route_ext_part: see route_int.h. */
bool
route_ext_part(struct route *r, struct rshard *sh)
{
	uint32_t o[256];
	uint16_t n;
	size_t first;
	struct pktbuf pb;

	if (!route_ext_unnamed(r) || r->x.ext_len < 5 || r->x.ext_msg[0] != 'P')
		return false;
	first = 1 + ((size_t)r->x.ext_msg[1] << 24 | (size_t)r->x.ext_msg[2] << 16 |
		     (size_t)r->x.ext_msg[3] << 8 | r->x.ext_msg[4]);
	n = declared_types(r->xportal->oids, r->xportal->noids, o);
	n = unread_params_typed(r, sh->sql, o, n);
	pktbuf_init(&pb, strlen(sh->sql) + 16 + 4 * (size_t)n + r->x.ext_len);
	pktbuf_write_parse(&pb, "", sh->sql, o, n);
	pktbuf_put_bytes(&pb, r->x.ext_msg + first, r->x.ext_len - first);
	if (pktbuf_failed(&pb)) {
		pktbuf_cleanup(&pb);
		return false;
	}
	free(sh->ext_msg);
	sh->ext_msg = pb.buf;		/* taken over */
	sh->ext_len = pb.len;
	return true;
}

/*
 * Is the Execute <pkt> the last message of its batch before Sync (Flush aside), as far as
 * the client's buffered bytes show? Then, outside a transaction block, its statement alone
 * is the batch's implicit transaction: autocommit on its shards, no BEGIN / COMMIT.
 */
static bool
route_ext_last(struct route *r, const struct sbuf_pkt *pkt)
{
	uint32_t left = sbuf_unclaimed(r->c.sb);
	const uint8_t *p = pkt->data + pkt->len;

	while (left >= 5) {
		uint32_t n = ((uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 |
			      (uint32_t)p[3] << 8 | p[4]) + 1;

		if (p[0] == 'S')
			return true;
		if (p[0] != 'H' || n > left)
			return false;
		p += n;
		left -= n;
	}
	return false;
}

static bool
route_on_execute(struct route *r, const struct sbuf_pkt *pkt, const uint8_t *body, size_t len)
{
	struct proto_execute_msg m;
	struct plan_param *params = NULL;
	uint32_t nparams = 0;
	struct nk_error err;

	struct rportal *p;

	if (!proto_parse_execute(body, len, &m, &err))
		return route_ext_fail(r, &err);
	if ((p = route_portal_find(r, m.portal)) == NULL) {
		nk_error_set(&err, ERRCODE_INVALID_CURSOR_NAME,
			     "portal \"%s\" does not exist", m.portal);
		return route_ext_fail(r, &err);
	}
	/* Outside a block the messages up to Sync are one transaction (as Postgres): lazy BEGIN
	 * per shard, committed at Sync, unless this Execute is the batch's last message */
	if (r->tx == 'I' && !route_ext_last(r, pkt) && !route_implicit_begin(r)) {
		nk_error_oom(&err);
		return route_ext_fail(r, &err);
	}
	r->x.bind_owed = p->bind_owed;	/* the exec's first BindComplete answers its Bind */
	p->bind_owed = false;
	if (p->is_cursor || p->state != RPORTAL_BOUND)	/* it goes on where it is */
		return route_portal_execute(r, p, m.max_rows);
	r->x.ext_exec = true;
	r->xportal = p;
	r->last_tag[0] = '\0';
	p->state = RPORTAL_DONE;	/* (route_portal_ran() says what it is once it ran) */
	rarena_reset(r->arena);
	nk_error_clear(&err);
	r->x.ext_pst = p->pst;		/* named: the shard links keep it (route_send_named) */
	r->x.ext_norm = p->norm != NULL ? &p->norm->norm : NULL;	/* normalised at Parse */
	r->x.ext_max_rows = m.max_rows;
	r->x.ext_describe = p->describe;
	if (!route_bind_params(r, &params, &nparams, &err) ||
	    !route_ext_msgs(r, p, NULL, route_ext_exec_what(p->describe), m.max_rows)) {
		r->x.ext_exec = false;
		r->xportal = NULL;
		if (!nk_error_is_set(&err))
			nk_error_oom(&err);
		return route_ext_fail(r, &err);
	}
	p->describe = false;
	return route_run_ext(r, p->query, params, nparams);
}

/* Result format codes of the shard query: the client's for the visible columns, text for the
 * hidden ones (a * widens the visible part: the client gave one code per column it sees). */
bool
route_merge_formats(struct pktbuf *pb, const struct proto_bind_msg *m,
		    const struct plan_merge *spec, struct nk_error *err)
{
	uint32_t hidden = spec->ncols - spec->nvisible;
	bool any_binary = false;

	for (uint16_t i = 0; i < m->nresult_formats; i++)
		any_binary |= proto_bind_result_format(m, i) != 0;
	if (!any_binary) {
		pktbuf_put_int16(pb, 0);	/* every column in text */
		return true;
	}
	if (hidden == 0) {
		pktbuf_put_int16(pb, (int16_t)m->nresult_formats);
		pktbuf_put_bytes(pb, m->result_formats, (size_t)m->nresult_formats * 2);
		return true;
	}
	if (m->nresult_formats == 1 && spec->star) {
		pktbuf_put_int16(pb, 1);	/* width unknown here: hidden sort keys binary too */
		pktbuf_put_int16(pb, 1);
		return true;
	}
	if (m->nresult_formats > 1 && !spec->star && m->nresult_formats != spec->nvisible)
		return nk_error_set(err, ERRCODE_PROTOCOL_VIOLATION,
				    "bind message has %u result formats but query "
				    "has %u columns", m->nresult_formats, spec->nvisible);
	uint32_t nvis = m->nresult_formats == 1 ? spec->nvisible : m->nresult_formats;

	pktbuf_put_int16(pb, (int16_t)(nvis + hidden));
	for (uint32_t i = 0; i < nvis; i++)
		pktbuf_put_int16(pb, proto_bind_result_format(m, i));
	for (uint32_t i = 0; i < hidden; i++)
		pktbuf_put_int16(pb, 0);
	return true;
}

/* route_merge_final_formats: see route_int.h. */
bool
route_merge_final_formats(struct pktbuf *pb, const struct merge *mg)
{
	uint32_t n = mg != NULL ? merge_final_formats(mg, NULL, 0) : 0;
	int16_t *f = calloc(n ? n : 1, sizeof(*f));
	bool any = false;

	if (f == NULL || n > INT16_MAX) {
		free(f);
		return false;
	}
	merge_final_formats(mg, f, n);
	for (uint32_t i = 0; i < n; i++)
		any |= f[i] != 0;
	pktbuf_put_int16(pb, any ? (int16_t)n : 0);	/* none: every column in text */
	for (uint32_t i = 0; any && i < n; i++)
		pktbuf_put_int16(pb, f[i]);
	free(f);
	return true;
}

/* route_merge_oids: see route_int.h. */
void
route_merge_oids(const struct plan_merge *spec, const struct rportal *x,
		 const struct proto_bind_msg *m, const char *sql, uint16_t n, uint32_t *o)
{
	bool used[256] = { false };

	route_sql_params(sql, used, n);
	for (uint16_t i = 0; i < n; i++) {
		const uint8_t *p = x != NULL && i < x->noids ? x->oids + i * 4 : NULL;
		bool count = (spec->limit.is_slot && spec->limit.slot == i) ||
			     (spec->offset.is_slot && spec->offset.slot == i);

		o[i] = p == NULL ? 0 :
		       (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
		if (o[i] == 0 && !used[i])
			o[i] = count ? 20 : proto_bind_param_format(m, i) == 1 ? 17 : 25;
	}
}

bool
route_ext_merge_msgs(struct route *r, const char *sql, bool final, struct nk_error *err)
{
	struct pktbuf pb;
	struct proto_bind_msg m;
	uint32_t o[256];
	bool ok;

	if (!route_portal_bind_msg(r->xportal, &m, err))	/* the kept Bind */
		return false;
	if (m.nparams > 256)
		return nk_error_set(err, ERRCODE_PROGRAM_LIMIT_EXCEEDED,
				    "too many parameters in a merged SELECT");
	route_merge_oids(&r->x.ms.spec, r->xportal, &m, sql, m.nparams, o);
	pktbuf_init(&pb, strlen(sql) + 64 + (r->xportal != NULL ? r->xportal->bind_len : 0));
	pktbuf_write_parse(&pb, "", sql, o, m.nparams);
	pktbuf_begin(&pb, 'B');
	pktbuf_put_string(&pb, "");
	pktbuf_put_string(&pb, "");
	pktbuf_put_int16(&pb, (int16_t)m.nformats);
	pktbuf_put_bytes(&pb, m.formats, (size_t)m.nformats * 2);
	pktbuf_put_int16(&pb, (int16_t)m.nparams);
	pktbuf_put_bytes(&pb, m.params, m.params_len);
	ok = final ? route_merge_final_formats(&pb, r->x.merge) ||
		     nk_error_oom(err)
		   : route_merge_formats(&pb, &m, &r->x.ms.spec, err);
	pktbuf_end(&pb);
	if (!final)
		pktbuf_write_describe(&pb, 'P', "");	/* the merge needs the columns */
	pktbuf_write_execute(&pb, "", 0);
	pktbuf_write_sync(&pb);
	if (!ok || pktbuf_failed(&pb)) {
		pktbuf_cleanup(&pb);
		return ok ? nk_error_oom(err) : false;
	}
	free(r->x.ext_msg);
	r->x.ext_msg = pb.buf;		/* taken over */
	r->x.ext_len = pb.len;
	r->x.ext_pst = NULL;
	return true;
}

/* The portal whose answers (BindComplete, a Describe) wait for its Execute; NULL when none. */
static struct rportal *
route_describe_waiting(struct route *r)
{
	for (struct rportal *p = r->portals; p != NULL; p = p->next)
		if (p->describe || p->bind_owed)
			return p;
	return NULL;
}

/*
 * A Describe that cannot go to a shard fails with <err> (after the BindComplete it owes);
 * a Sync that waited for it goes on. False when the client is gone.
 */
static bool
route_describe_refused(struct route *r, const struct nk_error *err)
{
	if (r->x.bind_owed && !route_bind_complete(r))
		return false;
	route_fail(r, err);
	r->x.ext_exec = false;
	r->x.ext_portal_describe = false;
	r->busy = false;
	r->ext_failed = true;
	if (r->x.sync_pending)
		return route_ext_sync(r);
	return !route_client_closed(r);
}

/* route_describe_stmt: see route_int.h. */
bool
route_describe_stmt(struct route *r, const char *sql)
{
	struct shm_topo_ref ref;
	const char *uid;
	struct nk_error err;
	bool ok;

	if (route_compose_names_call(sql)) {	/* (no shard has the function) */
		nk_error_set(&err, ERRCODE_FEATURE_NOT_SUPPORTED,
			     "a statement calling a __neki function inside it "
			     "cannot be described before it runs");
		nk_error_hint(&err, "Describe the portal in the batch of its Execute, or send "
			      "the statement as a simple Query.");
		return route_describe_refused(r, &err);
	}
	if (!shm_topo_pin(&ref)) {
		nk_error_set(&err, ERRCODE_CONNECTION_EXCEPTION, "no data topology is published");
		return route_describe_refused(r, &err);
	}
	uid = route_any_shard(r, ref.data);
	ok = route_exec_setup(r, &uid, 1, "", &err);
	shm_topo_unpin(&ref);
	if (!ok || route_exec_run(r) == RSTEP_STOP) {
		if (!ok)
			route_fail(r, &err);
		r->x.ext_exec = false;
		r->busy = false;
		r->ext_failed = true;
	}
	return !route_client_closed(r);
}

/*
 * A portal not executed next: its waiting answers now (before the next message). One shard
 * gets its Parse, Bind (the client's values and result formats) and Describe: the shard's
 * BindComplete or error answers an unanswered Bind, its RowDescription (the portal's
 * formats) or NoData a Describe, as Postgres answers them.
 */
static bool
route_describe_pending(struct route *r, struct rportal *p)
{
	struct nk_error err;
	bool describe = p->describe || !p->bind_owed;	/* (or a portal that ran, described) */
	unsigned what = REXT_BIND | (describe ? REXT_DESCRIBE_P : 0);

	r->x.bind_owed = p->bind_owed;
	p->describe = p->bind_owed = false;
	if (!route_ext_msgs(r, p, NULL, what, 0)) {
		nk_error_oom(&err);
		return route_ext_fail(r, &err);
	}
	r->x.ext_exec = true;
	r->x.ext_portal_describe = true;
	return route_describe_stmt(r, p->query);
}

static bool
route_on_describe(struct route *r, const uint8_t *body, size_t len)
{
	struct proto_target_msg m;
	struct nk_error err;
	const struct rstmt *st;

	if (!proto_parse_describe(body, len, &m, &err))
		return route_ext_fail(r, &err);
	if (m.kind == 'P') {
		struct rportal *p = route_portal_find(r, m.name);

		if (p == NULL) {
			nk_error_set(&err, ERRCODE_INVALID_CURSOR_NAME,
				     "portal \"%s\" does not exist", m.name);
			return route_ext_fail(r, &err);
		}
		if (r->tx == 'E' && (p->rows || p->is_cursor))	/* (as Postgres) */
			return route_ext_fail(r, route_aborted(&err));
		if (p->is_cursor || p->pull != NULL || p->mask != 0)
			return route_portal_describe(r, p);	/* where it runs */
		if (p->state != RPORTAL_BOUND)		/* it ran to completion */
			return route_describe_pending(r, p);
		p->describe = true;	/* answered with its Execute (route_on_ext) */
		return true;
	}
	if ((st = route_find_stmt(r, m.name)) == NULL) {
		nk_error_set(&err, ERRCODE_INVALID_SQL_STATEMENT_NAME,
			     "prepared statement \"%s\" does not exist", m.name);
		return route_ext_fail(r, &err);
	}
	if (r->tx == 'E' && st->rows)
		return route_ext_fail(r, route_aborted(&err));
	if (!route_ext_msgs(r, NULL, st, REXT_DESCRIBE_S, 0)) {
		nk_error_oom(&err);
		return route_ext_fail(r, &err);
	}
	r->x.ext_exec = true;
	return route_describe_stmt(r, st->query);
}

static bool
route_on_sync(struct route *r)
{
	struct rportal *d = route_describe_waiting(r);
	struct pktbuf pb;
	uint8_t mem[8];

	if (!r->ext_failed && d != NULL) {
		r->x.sync_pending = true;
		return route_describe_pending(r, d);
	}
	if (r->implicit && !r->implicit_end) {	/* the batch's implicit transaction ends */
		r->x.sync_pending = true;
		r->x.ext_exec = true;
		if (route_implicit_end(r)) {
			r->busy = true;
			return true;
		}
		r->x.ext_exec = false;
	}
	r->implicit = r->implicit_end = false;
	if (route_cat_wait(r, ROUTE_RESUME_SYNC)) {
		r->busy = true;		/* DDL: ReadyForQuery once the catalog shows it */
		return true;
	}
	if (r->tx == 'I')	/* the batch's SETs: kept unless an error undid them (Postgres) */
		route_sets_end(r, !r->ext_failed, false);
	r->ext_failed = false;
	r->x.sync_pending = false;
	if (r->tx == 'I') {
		route_portals_tx_end(r, true);	/* outside a block: the portals end here */
		route_release_links(r);
	}
	r->ext_open = false;
	if (!route_listen_flush(r))	/* notifications held during the batch */
		return false;
	pktbuf_init_fixed(&pb, mem, sizeof(mem));
	route_ready_write(r, &pb);
	if (!route_send(r, &pb))
		return false;
	sbuf_set_cork(r->c.sb, SBUF_CORK_OFF);	/* the batch's answer, in one send */
	return true;
}

bool
route_ext_sync(struct route *r)
{
	return route_on_sync(r);
}

void
route_ext_sync_resume(struct route *r)
{
	r->busy = false;
	if (route_on_sync(r) && !r->busy && !route_client_closed(r))
		sbuf_continue(r->c.sb);
}

/* Is <pkt> (whole) the Execute of portal <p>, or its first Describe after an unanswered Bind
 * (Bind, Describe P, Execute: the Execute answers all three)? */
static bool
route_executes(const struct sbuf_pkt *pkt, const struct rportal *p)
{
	size_t n = strlen(p->name);

	if (pkt->type == 'D' && p->bind_owed && !p->describe)
		return pkt->len > 6 + n && pkt->data[5] == 'P' &&
		       memcmp(pkt->data + 6, p->name, n + 1) == 0;
	return pkt->type == 'E' && pkt->len > 5 + n && memcmp(pkt->data + 5, p->name, n + 1) == 0;
}

/*
 * A Describe P waits for its portal's Execute to answer with it; when another message
 * comes first (another portal's messages, Flush), the description is sent before that
 * message is handled (the packet is offered again once it is), as Postgres answers in
 * order. True when the packet must wait.
 */
static bool
route_describe_first(struct route *r, const struct sbuf_pkt *pkt)
{
	struct rportal *d;
	bool ok;

	if (pkt->type == 'S' || r->ext_failed || (d = route_describe_waiting(r)) == NULL ||
	    route_executes(pkt, d))
		return false;
	r->in_cb = true;
	ok = route_describe_pending(r, d);
	r->in_cb = false;
	return !ok || route_client_closed(r) || r->busy;
}

bool
route_on_ext(struct route *r, const struct sbuf_pkt *pkt)
{
	const uint8_t *body;
	size_t len;
	bool ok;

	if (pkt->type != 'S' && pkt->type != 'H' && pkt->avail < pkt->len) {
		if (sbuf_hold(r->c.sb, pkt->len))
			return true;
		route_client_fatal(r, "client sent too big packet");
		return false;
	}
	if (route_describe_first(r, pkt))
		return false;	/* offered again after the description */
	body = pkt->data + 5;
	len = pkt->len - 5;
	sbuf_skip(r->c.sb, pkt->len);
	r->c.stats->total_received += pkt->len;
	if (pkt->type == 'S')
		return route_on_sync(r) && !r->busy;
	r->ext_open = true;	/* a batch: no notification before its ReadyForQuery */
	if (pkt->type == 'H') {
		sbuf_flush(r->c.sb);	/* what the batch answered so far */
		return true;
	}
	if (r->ext_failed)
		return true;
	r->in_cb = true;
	switch (pkt->type) {
	case 'P':
		ok = route_on_parse(r, body, len);
		break;
	case 'B':
		ok = route_on_bind(r, body, len);
		break;
	case 'C':
		ok = route_on_close(r, body, len);
		break;
	case 'D':
		ok = route_on_describe(r, body, len);
		break;
	default:
		ok = route_on_execute(r, pkt, body, len);
		break;
	}
	r->in_cb = false;
	return ok && !route_client_closed(r) && !r->busy;
}

/* ---- the Execute runs ---- */

bool
route_run_ext(struct route *r, const char *sql, const struct plan_param *params,
	      uint32_t nparams)
{
	enum rstep rc;

	child_switch_topology();
	r->x.ext_params = params;
	r->x.ext_nparams = nparams;
	while ((rc = route_stmt(r, sql, false, params, nparams)) == RSTEP_WAIT) {
		if (route_cat_wait(r, ROUTE_RESUME_EXEC)) {
			r->busy = true;		/* the client waits with its Execute */
			return true;
		}
	}
	if (route_client_closed(r))
		return false;
	if (rc != RSTEP_ASYNC) {
		if (r->ext_implicit)	/* nothing was sent: no shard to end it on */
			(void)route_ext_implicit_end(r, false);
		r->ext_implicit_failed = false;
		route_portal_ran(r, rc == RSTEP_DONE);
		r->x.ext_exec = false;
		r->busy = false;	/* (an exec that could not start set it) */
		r->x.ext_pst = NULL;
		r->x.ext_norm = NULL;
		if (rc == RSTEP_STOP)
			r->ext_failed = true;
	}
	return true;
}

void
route_ext_exec_resume(struct route *r)
{
	r->busy = false;
	if (route_run_ext(r, r->xportal->query, r->x.ext_params, r->x.ext_nparams) && !r->busy &&
	    !route_client_closed(r))
		sbuf_continue(r->c.sb);
}
