/*
 * route_ext.c - the extended query protocol of a routed session. Parse is analysed at once
 * (normalised and cached, syntax errors reported there) and answered by the router; Bind is
 * kept (its values pick the shard) and answered by the router; Execute plans the statement
 * with the bound parameters (text or binary) and sends Parse + Bind (+ Describe when the
 * client asked to describe the portal) + Execute + Sync of the unnamed statement to each
 * target shard; the shards' ParseComplete / BindComplete are dropped. Describe of a
 * statement is answered by one shard (the plan's, or the authoritative one). Close is the
 * router's. After an error the batch is skipped up to Sync, as Postgres does; Sync gets the
 * router's ReadyForQuery. Entry point: route_on_ext().
 */
#include "neki/base.h"

#include <stdlib.h>
#include <string.h>

#include "neki/admin.h"
#include "neki/pktbuf.h"
#include "neki/proto.h"
#include "route_int.h"
#include "session_int.h"

/* ---- statements and portals ---- */

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

static void
route_portal_clear(struct route *r)
{
	free(r->portal.query);
	free(r->portal.oids);
	free(r->portal.bind_rest);
	free(r->portal.name);
	memset(&r->portal, 0, sizeof(r->portal));
}

void
route_ext_free(struct route *r)
{
	route_ext_drop_stmts(r);
	route_portal_clear(r);
}

/* ---- errors and replies ---- */

static bool
route_ext_fail(struct route *r, const struct nk_error *err)
{
	struct nk_error e = *err;

	e.severity = NK_SEV_ERROR;
	r->ext_failed = true;
	if (r->tx == 'T')
		r->tx = 'E';
	if (!sess_send_error(r->s, &e)) {
		sess_close(r->s, "client connection failed", NULL);
		return false;
	}
	return true;
}

static bool
route_ext_reply(struct route *r, char type)
{
	struct pktbuf pb;

	pktbuf_init(&pb, 8);
	if (type == '1')
		pktbuf_write_parse_complete(&pb);
	else if (type == '2')
		pktbuf_write_bind_complete(&pb);
	else
		pktbuf_write_close_complete(&pb);
	return route_send(r, &pb);
}

/* ---- Parse / Bind / Close ---- */

static bool
route_on_parse(struct route *r, const uint8_t *body, size_t len)
{
	struct proto_parse_msg m;
	struct nk_error err;
	struct rstmt *st;

	if (!proto_parse_parse(body, len, &m, &err))
		return route_ext_fail(r, &err);
	if (admin_is_neki_call(m.query)) {
		/* forwarded to the admin's console, which speaks the simple protocol only */
		nk_error_set(&err, "0A000",
			     "__neki functions cannot be called with the extended query protocol");
		nk_error_hint(&err, "Send the call as a simple Query (psql, or a driver's execute "
			      "without parameters), or run it on the admin port.");
		return route_ext_fail(r, &err);
	}
	if (!route_analyse(r, m.query, &err))
		return route_ext_fail(r, &err);
	(void)route_ext_drop_stmt(r, m.name);
	st = calloc(1, sizeof(*st));
	if (st == NULL || (st->name = strdup(m.name)) == NULL ||
	    (st->query = strdup(m.query)) == NULL ||
	    (m.nparams > 0 && (st->oids = malloc((size_t)m.nparams * 4)) == NULL)) {
		if (st != NULL)
			route_stmt_free(st);
		nk_error_set(&err, "53200", "out of memory");
		return route_ext_fail(r, &err);
	}
	st->noids = m.nparams;
	if (m.nparams > 0)
		memcpy(st->oids, m.oids, (size_t)m.nparams * 4);
	st->next = r->stmts;
	r->stmts = st;
	return route_ext_reply(r, '1');
}

static bool
route_on_bind(struct route *r, const uint8_t *body, size_t len)
{
	struct proto_bind_msg m;
	struct nk_error err;
	const struct rstmt *st;
	size_t names;

	if (!proto_parse_bind(body, len, &m, &err))
		return route_ext_fail(r, &err);
	if ((st = route_find_stmt(r, m.stmt)) == NULL) {
		nk_error_set(&err, "26000", "prepared statement \"%s\" does not exist", m.stmt);
		return route_ext_fail(r, &err);
	}
	names = strlen(m.portal) + 1 + strlen(m.stmt) + 1;
	route_portal_clear(r);
	r->portal.name = strdup(m.portal);
	r->portal.query = strdup(st->query);
	r->portal.oids = st->noids > 0 ? malloc((size_t)st->noids * 4) : NULL;
	r->portal.bind_rest = malloc(len - names + 1);
	if (r->portal.name == NULL || r->portal.query == NULL || r->portal.bind_rest == NULL ||
	    (st->noids > 0 && r->portal.oids == NULL)) {
		route_portal_clear(r);
		nk_error_set(&err, "53200", "out of memory");
		return route_ext_fail(r, &err);
	}
	if (st->noids > 0)
		memcpy(r->portal.oids, st->oids, (size_t)st->noids * 4);
	r->portal.noids = st->noids;
	memcpy(r->portal.bind_rest, body + names, len - names);
	r->portal.bind_len = len - names;
	r->portal.valid = true;
	return route_ext_reply(r, '2');
}

static bool
route_on_close(struct route *r, const uint8_t *body, size_t len)
{
	struct proto_target_msg m;
	struct nk_error err;

	if (!proto_parse_close(body, len, &m, &err))
		return route_ext_fail(r, &err);
	if (m.kind == 'S' && !route_ext_drop_stmt(r, m.name))
		(void)route_prep_drop(r, m.name);	/* one namespace, as Postgres */
	else if (r->portal.valid && route_streq(r->portal.name, m.name))
		route_portal_clear(r);
	return route_ext_reply(r, '3');
}

/* ---- Describe / Execute: shard work ---- */

/* Bound values of the portal as plan parameters (arena of the statement). */
static bool
route_bind_params(struct route *r, struct plan_param **out, uint32_t *n, struct nk_error *err)
{
	struct pktbuf pb;
	struct proto_bind_msg m;
	struct proto_value vals[256];
	size_t nv;

	/* re-frame the kept Bind (empty names) to read it with the protocol's parser */
	pktbuf_init(&pb, r->portal.bind_len + 2);
	pktbuf_put_byte(&pb, 0);
	pktbuf_put_byte(&pb, 0);
	pktbuf_put_bytes(&pb, r->portal.bind_rest, r->portal.bind_len);
	if (pktbuf_failed(&pb) || !proto_parse_bind(pb.buf, pb.len, &m, err)) {
		pktbuf_cleanup(&pb);
		return false;
	}
	nv = proto_bind_params(&m, vals, 256);
	*out = rarena_alloc(r->arena, (nv ? nv : 1) * sizeof(**out));
	if (*out == NULL) {
		pktbuf_cleanup(&pb);
		return nk_error_set(err, "53200", "out of memory");
	}
	for (size_t i = 0; i < nv; i++) {
		struct plan_param *pp = &(*out)[i];
		uint8_t *copy = vals[i].p != NULL ? rarena_alloc(r->arena, vals[i].len + 1) : NULL;

		if (copy != NULL)
			memcpy(copy, vals[i].p, vals[i].len);
		pp->data = copy;
		pp->len = vals[i].p == NULL ? -1 : (int32_t)vals[i].len;
		pp->binary = proto_bind_param_format(&m, i) == 1;
		pp->type_oid = i < r->portal.noids ?
			       ((uint32_t)r->portal.oids[i * 4] << 24 |
				(uint32_t)r->portal.oids[i * 4 + 1] << 16 |
				(uint32_t)r->portal.oids[i * 4 + 2] << 8 | r->portal.oids[i * 4 + 3]) :
			       0;
	}
	*n = (uint32_t)nv;
	pktbuf_cleanup(&pb);
	return true;
}

/* The messages every target gets: Parse + Bind (+ Describe) (+ Execute) + Sync. */
static bool
route_ext_msgs(struct route *r, const char *query, const uint8_t *oids, uint16_t noids,
	       bool bind, bool describe_portal, bool describe_stmt, int32_t max_rows)
{
	uint32_t o[256];
	struct pktbuf pb;

	for (uint16_t i = 0; i < noids && i < 256; i++)
		o[i] = (uint32_t)oids[i * 4] << 24 | (uint32_t)oids[i * 4 + 1] << 16 |
		       (uint32_t)oids[i * 4 + 2] << 8 | oids[i * 4 + 3];
	pktbuf_init(&pb, strlen(query) + 64 + r->portal.bind_len);
	pktbuf_write_parse(&pb, "", query, o, noids < 256 ? noids : 256);
	if (describe_stmt)
		pktbuf_write_describe(&pb, 'S', "");
	if (bind) {
		pktbuf_begin(&pb, 'B');
		pktbuf_put_string(&pb, "");
		pktbuf_put_string(&pb, "");
		pktbuf_put_bytes(&pb, r->portal.bind_rest, r->portal.bind_len);
		pktbuf_end(&pb);
		if (describe_portal)
			pktbuf_write_describe(&pb, 'P', "");
		pktbuf_write_execute(&pb, "", (uint32_t)max_rows);
	}
	pktbuf_write_sync(&pb);
	if (pktbuf_failed(&pb)) {
		pktbuf_cleanup(&pb);
		return false;
	}
	free(r->ext_msg);
	r->ext_msg = pb.buf;		/* taken over */
	r->ext_len = pb.len;
	return true;
}

/* route_ext_part: see route_int.h. */
bool
route_ext_part(struct route *r, struct rshard *sh)
{
	uint32_t n = r->ext_nparams < 256 ? r->ext_nparams : 256, o[256];
	bool used[256] = { false };
	size_t first;
	struct pktbuf pb;

	if (r->ext_len < 5 || r->ext_msg[0] != 'P')
		return false;
	first = 1 + ((size_t)r->ext_msg[1] << 24 | (size_t)r->ext_msg[2] << 16 |
		     (size_t)r->ext_msg[3] << 8 | r->ext_msg[4]);
	route_sql_params(sh->sql, used, n);
	for (uint32_t i = 0; i < n; i++) {
		const uint8_t *b = i < r->portal.noids ? r->portal.oids + i * 4 : NULL;

		o[i] = b != NULL ? (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 |
				   (uint32_t)b[2] << 8 | b[3] : 0;
		if (!used[i])
			o[i] = r->ext_params[i].binary ? 17 : 25;	/* bytea, text */
	}
	pktbuf_init(&pb, strlen(sh->sql) + 16 + 4 * n + r->ext_len);
	pktbuf_write_parse(&pb, "", sh->sql, o, (uint16_t)n);
	pktbuf_put_bytes(&pb, r->ext_msg + first, r->ext_len - first);
	if (pktbuf_failed(&pb)) {
		pktbuf_cleanup(&pb);
		return false;
	}
	free(sh->ext_msg);
	sh->ext_msg = pb.buf;		/* taken over */
	sh->ext_len = pb.len;
	return true;
}

static bool
route_on_execute(struct route *r, const uint8_t *body, size_t len)
{
	struct proto_execute_msg m;
	struct plan_param *params = NULL;
	uint32_t nparams = 0;
	struct nk_error err;

	if (!proto_parse_execute(body, len, &m, &err))
		return route_ext_fail(r, &err);
	if (!r->portal.valid || !route_streq(r->portal.name, m.portal)) {
		nk_error_set(&err, "34000", "portal \"%s\" does not exist", m.portal);
		return route_ext_fail(r, &err);
	}
	r->ext_exec = true;
	rarena_reset(r->arena);
	if (!route_bind_params(r, &params, &nparams, &err) ||
	    !route_ext_msgs(r, r->portal.query, r->portal.oids, r->portal.noids, true,
			    r->portal.describe, false, m.max_rows))
		return route_ext_fail(r, &err);
	r->ext_max_rows = m.max_rows;
	r->ext_describe = r->portal.describe;
	r->portal.describe = false;
	return route_run_ext(r, r->portal.query, params, nparams);
}

/* Result format codes of the shard query: the client's for the visible columns, text for the
 * hidden ones (a * widens the visible part: the client gave one code per column it sees). */
static bool
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
		return nk_error_set(err, "08P01", "bind message has %u result formats but query "
				    "has %u columns", m->nresult_formats, spec->nvisible);
	uint32_t nvis = m->nresult_formats == 1 ? spec->nvisible : m->nresult_formats;

	pktbuf_put_int16(pb, (int16_t)(nvis + hidden));
	for (uint32_t i = 0; i < nvis; i++)
		pktbuf_put_int16(pb, proto_bind_result_format(m, i));
	for (uint32_t i = 0; i < hidden; i++)
		pktbuf_put_int16(pb, 0);
	return true;
}

/* Parameter types of a merge query: the client's; a parameter the query no longer references
 * (LIMIT/OFFSET of an aggregate query, HAVING) and the client left untyped gets int8 for
 * LIMIT/OFFSET, bytea or text otherwise (Postgres refuses a type it cannot infer). */
static void
route_merge_oids(struct route *r, const char *sql, uint16_t n, uint32_t *o)
{
	const struct plan_merge *spec = &r->mspec;
	bool used[256] = { false };

	route_sql_params(sql, used, n);
	for (uint16_t i = 0; i < n; i++) {
		const uint8_t *p = r->portal.oids + i * 4;
		bool count = (spec->limit.is_slot && spec->limit.slot == i) ||
			     (spec->offset.is_slot && spec->offset.slot == i);

		o[i] = i >= r->portal.noids ? 0 :
		       (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
		if (o[i] == 0 && !used[i])
			o[i] = count ? 20 : i < r->ext_nparams && r->ext_params[i].binary ? 17 : 25;
	}
}

bool
route_ext_merge_msgs(struct route *r, const char *sql, bool final, struct nk_error *err)
{
	struct pktbuf kept, pb;
	struct proto_bind_msg m;
	uint32_t o[256];
	bool ok;

	pktbuf_init(&kept, r->portal.bind_len + 2);	/* the kept Bind with empty names */
	pktbuf_put_byte(&kept, 0);
	pktbuf_put_byte(&kept, 0);
	pktbuf_put_bytes(&kept, r->portal.bind_rest, r->portal.bind_len);
	if (pktbuf_failed(&kept) || !proto_parse_bind(kept.buf, kept.len, &m, err)) {
		pktbuf_cleanup(&kept);
		return nk_error_is_set(err) || nk_error_set(err, "53200", "out of memory");
	}
	if (m.nparams > 256) {
		pktbuf_cleanup(&kept);
		return nk_error_set(err, "54000", "too many parameters in a merged SELECT");
	}
	route_merge_oids(r, sql, m.nparams, o);
	pktbuf_init(&pb, strlen(sql) + 64 + r->portal.bind_len);
	pktbuf_write_parse(&pb, "", sql, o, m.nparams);
	pktbuf_begin(&pb, 'B');
	pktbuf_put_string(&pb, "");
	pktbuf_put_string(&pb, "");
	pktbuf_put_int16(&pb, (int16_t)m.nformats);
	pktbuf_put_bytes(&pb, m.formats, (size_t)m.nformats * 2);
	pktbuf_put_int16(&pb, (int16_t)m.nparams);
	pktbuf_put_bytes(&pb, m.params, m.params_len);
	if (final)
		pktbuf_put_int16(&pb, 0);	/* the merge reads the final values in text */
	ok = final || route_merge_formats(&pb, &m, &r->mspec, err);
	pktbuf_end(&pb);
	if (!final)
		pktbuf_write_describe(&pb, 'P', "");	/* the merge needs the columns */
	pktbuf_write_execute(&pb, "", 0);
	pktbuf_write_sync(&pb);
	pktbuf_cleanup(&kept);
	if (!ok || pktbuf_failed(&pb)) {
		pktbuf_cleanup(&pb);
		return ok ? nk_error_set(err, "53200", "out of memory") : false;
	}
	free(r->ext_msg);
	r->ext_msg = pb.buf;		/* taken over */
	r->ext_len = pb.len;
	return true;
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
		if (!r->portal.valid || !route_streq(r->portal.name, m.name)) {
			nk_error_set(&err, "34000", "portal \"%s\" does not exist", m.name);
			return route_ext_fail(r, &err);
		}
		r->portal.describe = true;	/* answered with the Execute */
		return true;
	}
	if ((st = route_find_stmt(r, m.name)) == NULL) {
		nk_error_set(&err, "26000", "prepared statement \"%s\" does not exist", m.name);
		return route_ext_fail(r, &err);
	}
	if (!route_ext_msgs(r, st->query, st->oids, st->noids, false, false, true, 0)) {
		nk_error_set(&err, "53200", "out of memory");
		return route_ext_fail(r, &err);
	}
	r->ext_exec = true;
	return route_describe_stmt(r, st->query);
}

/* A portal described but never executed before Sync: describe it now. */
static bool
route_describe_pending(struct route *r)
{
	struct nk_error err;

	r->portal.describe = false;
	if (!route_ext_msgs(r, r->portal.query, r->portal.oids, r->portal.noids, false, false,
			    true, 0)) {
		nk_error_set(&err, "53200", "out of memory");
		return route_ext_fail(r, &err);
	}
	r->ext_exec = true;
	r->ext_portal_describe = true;
	return route_describe_stmt(r, r->portal.query);
}

static bool
route_on_sync(struct route *r)
{
	struct pktbuf pb;

	if (!r->ext_failed && r->portal.valid && r->portal.describe) {
		r->sync_pending = true;
		return route_describe_pending(r);
	}
	if (route_cat_wait(r, ROUTE_RESUME_SYNC)) {
		r->busy = true;		/* DDL: ReadyForQuery once the catalog shows it */
		return true;
	}
	r->ext_failed = false;
	r->sync_pending = false;
	if (r->tx == 'I') {
		route_portal_clear(r);
		route_release_links(r);
	}
	r->ext_open = false;
	if (!route_listen_flush(r))	/* notifications held during the batch */
		return false;
	pktbuf_init(&pb, 8);
	pktbuf_write_ready_for_query(&pb, r->tx);
	return route_send(r, &pb);
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
	if (route_on_sync(r) && !r->busy && r->s->state != SESS_ST_CLOSED)
		sbuf_continue(&r->s->sb);
}

bool
route_on_ext(struct route *r, const struct sbuf_pkt *pkt)
{
	struct session *s = r->s;
	const uint8_t *body;
	size_t len;
	bool ok;

	if (pkt->type != 'S' && pkt->type != 'H' && pkt->avail < pkt->len) {
		if (sbuf_hold(&s->sb, pkt->len))
			return true;
		sess_fatal(s, "client sent too big packet");
		return false;
	}
	body = pkt->data + 5;
	len = pkt->len - 5;
	sbuf_skip(&s->sb, pkt->len);
	sess_stats(r->s)->total_received += pkt->len;
	if (pkt->type == 'S')
		return route_on_sync(r) && !r->busy;
	r->ext_open = true;	/* a batch: no notification before its ReadyForQuery */
	if (r->ext_failed || pkt->type == 'H')
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
		ok = route_on_execute(r, body, len);
		break;
	}
	r->in_cb = false;
	return ok && s->state != SESS_ST_CLOSED && !r->busy;
}
