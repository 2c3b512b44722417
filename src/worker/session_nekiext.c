/*
 * session_nekiext.c - __neki calls over the extended query protocol on a sharded database
 * (drivers binding parameters: psycopg, pgjdbc). A Parse whose text is a whole call with
 * `$n` parameters (`SELECT * FROM __neki.wait_for_ddl($1, $2)`) starts a batch this file
 * answers up to its Sync:
 *   Parse -> ParseComplete, Bind -> BindComplete (text-format values), Describe of the
 *   statement -> ParameterDescription and RowDescription (text), Describe of the portal ->
 *   RowDescription in the Bind's formats (both from admin_fn_describe(), without running
 *   the call), Execute -> its rows and CommandComplete, Close -> CloseComplete, Flush
 *   ignored; Sync -> the call runs in the admin with the bound values as literals (the
 *   simple-protocol call, src/worker/relay.c), then ReadyForQuery.
 * Anything else in the batch (a second statement, binary values of other types) is 0A000,
 * and the rest of the batch is skipped up to Sync, as Postgres does after an error. The
 * statement is kept under its name until a Close or a Parse of that name: a later Bind or
 * Describe of it starts a batch (sess_nekiext_try_kept). Entry points:
 * sess_nekiext_try_parse(), sess_nekiext_try_kept(), sess_nekiext_pkt(), sess_nekiext_free().
 */
#include "neki/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "neki/admin.h"
#include "neki/admin_relay.h"
#include "neki/exec.h"
#include "neki/log.h"
#include "neki/memstream.h"
#include "neki/pktbuf.h"
#include "neki/proto.h"
#include "neki/sbuf.h"
#include "session_int.h"

#define NX_MAX_PARAMS 8
#define NX_MAX_RESULTS 32		/* result format codes kept (relay_fmt.h's limit) */

/* A statement whose text is a __neki call (kept until Close, or a Parse of its name). */
struct sess_nxstmt {
	char *name;			/* owned; "" = the unnamed statement */
	char *query;			/* owned: the Parse's text */
	uint16_t nparams;		/* highest $n of the text */
	uint32_t oids[NX_MAX_PARAMS];	/* the Parse's declared types (0: unspecified) */
	struct sess_nxstmt *next;
};

/* The batch up to Sync. */
struct sess_nx {
	struct sess_nxstmt *st;		/* borrowed: the statement bound or parsed */
	char *vals[NX_MAX_PARAMS];	/* owned: the bound values as SQL literals */
	bool bound, executed, failed;
	int16_t rfmt[NX_MAX_RESULTS];	/* the Bind's result format codes */
	size_t nrfmt;
	struct pktbuf out;		/* owned: the replies held until the call's */
};

/* The text of <sql> with each $n outside quotes replaced by <vals>[n-1] ("NULL" when <vals>
 * is NULL); <*maxn> the highest n. Malloc'd; NULL on no memory or an n past the limit. */
static char *
nx_substitute(const char *sql, char *const *vals, uint16_t *maxn)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = nk_memstream(&out, &len);
	bool ok = f != NULL;

	*maxn = 0;
	for (const char *p = sql; ok && *p; ) {
		if (*p == '\'' || *p == '"') {
			const char *e = route_sql_skip_token(sql, p);

			fwrite(p, 1, (size_t)(e - p), f);
			p = e;
		} else if (*p == '$' && p[1] >= '1' && p[1] <= '9') {
			char *end;
			unsigned long n = strtoul(p + 1, &end, 10);

			ok = n <= NX_MAX_PARAMS;
			if (ok && n > *maxn)
				*maxn = (uint16_t)n;
			if (ok)
				fputs(vals != NULL && vals[n - 1] != NULL ? vals[n - 1] : "NULL", f);
			p = end;
		} else {
			fputc(*p++, f);
		}
	}
	if (f != NULL && fclose(f) != 0)
		ok = false;
	if (!ok) {
		free(out);
		return NULL;
	}
	return out;
}

/* A value as a SQL string literal ('' doubled). Malloc'd. */
static char *
nx_literal(const uint8_t *p, uint32_t len)
{
	char *out = malloc((size_t)len * 2 + 3), *q = out;

	if (out == NULL)
		return NULL;
	*q++ = '\'';
	for (uint32_t i = 0; i < len; i++) {
		if (p[i] == '\'')
			*q++ = '\'';
		*q++ = (char)p[i];
	}
	*q++ = '\'';
	*q = '\0';
	return out;
}

/* A binary value of declared type <oid> as a SQL literal (integers, bool, text types).
 * Malloc'd; NULL when the type is not one of those or on no memory. */
static char *
nx_binary_literal(uint32_t oid, const uint8_t *p, uint32_t len)
{
	char buf[32];
	int64_t v = 0;

	switch (oid) {
	case 16:	/* bool */
		return len == 1 ? strdup(p[0] ? "true" : "false") : NULL;
	case 21:	/* int2 */
	case 23:	/* int4 */
	case 20:	/* int8 */
		if (len != (oid == 21 ? 2u : oid == 23 ? 4u : 8u))
			return NULL;
		for (uint32_t i = 0; i < len; i++)
			v = (int64_t)((uint64_t)v << 8 | p[i]);
		if (len < 8)	/* sign-extend */
			v = (v ^ ((int64_t)1 << (len * 8 - 1))) - ((int64_t)1 << (len * 8 - 1));
		snprintf(buf, sizeof(buf), "%lld", (long long)v);
		return strdup(buf);
	case 25:	/* text */
	case 1043:	/* varchar */
	case 19:	/* name */
		return nx_literal(p, len);
	}
	return NULL;
}

static void
nx_batch_free(struct session *s)
{
	struct sess_nx *nx = s->nx;

	if (nx == NULL)
		return;
	for (size_t i = 0; i < NX_MAX_PARAMS; i++)
		free(nx->vals[i]);
	pktbuf_cleanup(&nx->out);
	free(nx);
	s->nx = NULL;
}

static void
nx_stmt_free(struct sess_nxstmt *st)
{
	free(st->name);
	free(st->query);
	free(st);
}

/* The kept statement named <name>, or NULL. */
static struct sess_nxstmt *
nx_stmt_find(const struct session *s, const char *name)
{
	struct sess_nxstmt *st = s->nx_stmts;

	while (st != NULL && strcmp(st->name, name) != 0)
		st = st->next;
	return st;
}

/* Forget statement <name> (Close, or a Parse that replaces it). */
static void
nx_stmt_drop(struct session *s, const char *name)
{
	for (struct sess_nxstmt **pp = &s->nx_stmts; *pp != NULL; pp = &(*pp)->next) {
		if (strcmp((*pp)->name, name) == 0) {
			struct sess_nxstmt *st = *pp;

			*pp = st->next;
			nx_stmt_free(st);
			return;
		}
	}
}

void
sess_nekiext_free(struct session *s)
{
	nx_batch_free(s);
	while (s->nx_stmts != NULL) {
		struct sess_nxstmt *st = s->nx_stmts;

		s->nx_stmts = st->next;
		nx_stmt_free(st);
	}
}

/* Start a batch at a message of statement <st>. False on no memory (session closed). */
static bool
nx_batch_start(struct session *s, struct sess_nxstmt *st)
{
	s->nx = calloc(1, sizeof(*s->nx));
	if (s->nx == NULL) {
		sess_fatal(s, "out of memory");
		return false;
	}
	s->nx->st = st;
	pktbuf_init(&s->nx->out, 64);
	return true;
}

/* An error in the batch: it goes out now (after the replies before it); skip to Sync. */
static void
nx_fail(struct session *s, const char *sqlstate, const char *msg, const char *hint)
{
	struct nk_error err;

	nk_error_set(&err, sqlstate, "%s", msg);
	if (hint != NULL)
		nk_error_hint(&err, "%s", hint);
	pktbuf_write_error(&s->nx->out, &err);
	s->nx->failed = true;
}

/* The call ended (its reply went to the client): ReadyForQuery, as sess_call_done. */
static void
nx_call_done(void *arg, enum arelay_end end)
{
	struct session *s = arg;

	nx_batch_free(s);
	sess_admin_call_done(s, end);
}

/* Sync: send the held replies, then run the call (or just ReadyForQuery after an error). */
static bool
nx_sync(struct session *s)
{
	struct sess_nx *nx = s->nx;
	char *sql;

	uint16_t maxn;

	if (!sess_send_pb(s, &nx->out)) {
		sess_close(s, "client connection failed", NULL);
		return false;
	}
	pktbuf_init(&nx->out, 0);
	if (nx->failed || !nx->executed) {	/* (Parse, Bind, Describe: prepared, not run) */
		nx_batch_free(s);
		if (!sess_admin_ready(s))
			return false;
		sbuf_flush(&s->sb);	/* (corked when the router answered earlier messages) */
		return true;
	}
	sql = nx_substitute(nx->st->query, nx->vals, &maxn);
	/* (a described portal got its RowDescription at the Describe: nx_describe) */
	s->relay = sql ? arelay_call_ext(&s->sb, s->user, sql, false, nx->rfmt,
					 nx->nrfmt, nx_call_done, s) : NULL;
	free(sql);
	if (s->relay == NULL) {
		sess_fatal(s, "could not reach the admin process");
		return false;
	}
	return false;	/* paused until nx_call_done */
}

static void
nx_bind(struct session *s, const struct sbuf_pkt *pkt)
{
	struct sess_nx *nx = s->nx;
	struct proto_bind_msg m;
	struct proto_value v[NX_MAX_PARAMS];
	struct nk_error err;
	size_t n;

	if (!proto_parse_bind(pkt->data + 5, pkt->len - 5, &m, &err)) {
		nx_fail(s, err.sqlstate, err.message, NULL);
		return;
	}
	if (nx->st == NULL)
		nx->st = nx_stmt_find(s, m.stmt);
	if (nx->st == NULL || strcmp(m.stmt, nx->st->name) != 0 || m.portal[0] != '\0' ||
	    nx->bound) {
		nx_fail(s, ERRCODE_FEATURE_NOT_SUPPORTED,
			"a __neki call over the extended query protocol binds its own "
			"statement once, to the unnamed portal", NULL);
		return;
	}
	if (m.nparams != nx->st->nparams) {
		nx_fail(s, ERRCODE_PROTOCOL_VIOLATION,
			"bind message supplies a wrong number of parameters", NULL);
		return;
	}
	n = proto_bind_params(&m, v, NX_MAX_PARAMS);
	for (size_t i = 0; i < n; i++) {
		if (v[i].p == NULL)
			continue;	/* (NULL) */
		nx->vals[i] = proto_bind_param_format(&m, i) == 0 ? nx_literal(v[i].p, v[i].len) :
			      nx_binary_literal(nx->st->oids[i], v[i].p, v[i].len);
		if (nx->vals[i] == NULL) {
			nx_fail(s, ERRCODE_FEATURE_NOT_SUPPORTED,
				"__neki function arguments must be bound in text format, "
				"or in binary as integers, booleans or text",
				"Bind the parameters as text.");
			return;
		}
	}
	if (m.nresult_formats > NX_MAX_RESULTS) {
		nx_fail(s, ERRCODE_FEATURE_NOT_SUPPORTED,
			"too many result format codes for a __neki call", NULL);
		return;
	}
	nx->nrfmt = m.nresult_formats;
	for (size_t i = 0; i < nx->nrfmt; i++)
		nx->rfmt[i] = proto_bind_result_format(&m, i);
	nx->bound = true;
	pktbuf_write_bind_complete(&nx->out);
}

/*
 * Describe of statement <st> (<stmt>: its ParameterDescription, then the columns in text) or
 * of the bound portal (the columns in the Bind's result formats): RowDescription, or NoData
 * when the call returns no rows (admin_fn_describe). The Execute's reply then leaves out
 * the call's own RowDescription (the portal is described once).
 */
static void
nx_describe(struct session *s, const struct sess_nxstmt *st, bool stmt)
{
	struct sess_nx *nx = s->nx;
	char marks[NX_MAX_PARAMS][8], *vals[NX_MAX_PARAMS];
	struct admin_fn_desc d;
	struct nk_error err;
	uint32_t oids[NX_MAX_PARAMS];
	uint16_t maxn;
	char *sql;
	bool ok;

	for (size_t i = 0; i < NX_MAX_PARAMS; i++) {
		snprintf(marks[i], sizeof(marks[i]), "'%c%zu'", ADMIN_DESC_MARK, i + 1);
		vals[i] = marks[i];
	}
	sql = nx_substitute(st->query, vals, &maxn);
	ok = sql != NULL ? admin_fn_describe(sql, &d, &err)
			 : nk_error_oom(&err);
	free(sql);
	if (!ok) {
		nx_fail(s, err.sqlstate, err.message, NULL);
		return;
	}
	for (size_t i = 0; i < d.ncols; i++)
		d.cols[i].format = stmt || nx->nrfmt == 0 ? 0 :
				   nx->rfmt[nx->nrfmt == 1 ? 0 : i < nx->nrfmt ? i : 0];
	for (uint16_t i = 0; stmt && i < st->nparams; i++)
		oids[i] = st->oids[i] != 0 ? st->oids[i] : d.param_oids[i] != 0 ?
			  d.param_oids[i] : 25;
	if (stmt)
		pktbuf_write_parameter_description(&nx->out, oids, st->nparams);
	if (d.ncols > 0)
		pktbuf_write_row_description(&nx->out, d.cols, d.ncols);
	else
		pktbuf_write_no_data(&nx->out);
}

static void
nx_target(struct session *s, const struct sbuf_pkt *pkt)
{
	struct proto_target_msg m;
	struct nk_error err;
	bool ok = pkt->type == 'D' ? proto_parse_describe(pkt->data + 5, pkt->len - 5, &m, &err)
				   : proto_parse_close(pkt->data + 5, pkt->len - 5, &m, &err);

	if (!ok) {
		nx_fail(s, err.sqlstate, err.message, NULL);
	} else if (pkt->type == 'C') {
		if (m.kind == 'S' && (s->nx->st == NULL || strcmp(s->nx->st->name, m.name) != 0))
			nx_stmt_drop(s, m.name);
		pktbuf_write_close_complete(&s->nx->out);
	} else if (m.kind == 'P' && m.name[0] == '\0' && s->nx->bound) {
		nx_describe(s, s->nx->st, false);
	} else if (m.kind == 'S' && (s->nx->st != NULL ? strcmp(s->nx->st->name, m.name) == 0
				     : (s->nx->st = nx_stmt_find(s, m.name)) != NULL)) {
		nx_describe(s, s->nx->st, true);
	} else {
		nx_fail(s, ERRCODE_FEATURE_NOT_SUPPORTED,
			"a __neki call over the extended query protocol can describe "
			"only its own statement or its bound portal", "Describe the statement "
			"after its Parse, or the unnamed portal after Bind.");
	}
}

/* sess_nekiext_pkt: see session_int.h. */
bool
sess_nekiext_pkt(struct session *s, const struct sbuf_pkt *pkt)
{
	struct sess_nx *nx = s->nx;

	if (pkt->avail < pkt->len) {
		if (sbuf_hold(&s->sb, pkt->len))
			return true;
		sess_fatal(s, "client sent too big packet");
		return false;
	}
	sbuf_skip(&s->sb, pkt->len);
	sess_stats(s)->total_received += pkt->len;
	if (pkt->type == 'S')
		return nx_sync(s);
	if (pkt->type == 'X') {
		sess_close(s, "client close request", NULL);
		return false;
	}
	if (nx->failed || pkt->type == 'H')
		return true;
	switch (pkt->type) {
	case 'B':
		nx_bind(s, pkt);
		break;
	case 'D':
	case 'C':
		nx_target(s, pkt);
		break;
	case 'E':
		if (nx->bound && !nx->executed)
			nx->executed = true;
		else
			nx_fail(s, ERRCODE_FEATURE_NOT_SUPPORTED,
				"a __neki call over the extended query protocol runs "
				"once per Sync", NULL);
		break;
	default:
		nx_fail(s, ERRCODE_FEATURE_NOT_SUPPORTED,
			"a __neki call over the extended query protocol must be the "
			"only statement up to Sync", "Send the other statements after its Sync.");
		break;
	}
	return true;
}

/* sess_nekiext_try_parse: see session_int.h. */
int
sess_nekiext_try_parse(struct session *s, const struct sbuf_pkt *pkt)
{
	struct proto_parse_msg m;
	struct nk_error err;
	struct sess_nxstmt *st;
	uint16_t maxn;
	char *probe;
	bool call;

	if (!proto_parse_parse(pkt->data + 5, pkt->len - 5, &m, &err))
		return -1;	/* (the router reports it) */
	if (s->nx_stmts == NULL && strcasestr(m.query, "__neki") == NULL)
		return -1;	/* (every Parse of a routed session comes here: a cheap look) */
	if ((probe = nx_substitute(m.query, NULL, &maxn)) == NULL)
		return -1;
	call = admin_is_neki_call(probe);
	free(probe);
	nx_stmt_drop(s, m.name);	/* (a Parse of its name replaces a kept statement) */
	if (!call || m.nparams > maxn)
		return -1;
	st = calloc(1, sizeof(*st));
	if (st == NULL || (st->name = strdup(m.name)) == NULL ||
	    (st->query = strdup(m.query)) == NULL) {
		if (st != NULL)
			nx_stmt_free(st);
		sess_fatal(s, "out of memory");
		return 0;
	}
	st->nparams = maxn;
	for (uint16_t i = 0; i < m.nparams && i < NX_MAX_PARAMS; i++)
		st->oids[i] = proto_parse_param_oid(&m, i);
	st->next = s->nx_stmts;
	s->nx_stmts = st;
	sbuf_skip(&s->sb, pkt->len);
	sess_stats(s)->total_received += pkt->len;
	if (!nx_batch_start(s, st))
		return 0;
	pktbuf_write_parse_complete(&s->nx->out);
	return 1;
}

/* sess_nekiext_try_kept: see session_int.h. */
int
sess_nekiext_try_kept(struct session *s, const struct sbuf_pkt *pkt)
{
	struct proto_bind_msg b;
	struct proto_target_msg d;
	struct nk_error err;
	struct sess_nxstmt *st;
	const char *name;

	if (s->nx_stmts == NULL)
		return -1;
	if (pkt->type == 'B' && proto_parse_bind(pkt->data + 5, pkt->len - 5, &b, &err))
		name = b.stmt;
	else if (pkt->type == 'D' && proto_parse_describe(pkt->data + 5, pkt->len - 5, &d, &err) &&
		 d.kind == 'S')
		name = d.name;
	else
		return -1;
	if ((st = nx_stmt_find(s, name)) == NULL)
		return -1;
	if (!nx_batch_start(s, st))
		return 0;
	return sess_nekiext_pkt(s, pkt) ? 1 : 0;
}
