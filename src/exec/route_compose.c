/*
 * route_compose.c - a __neki function inside a larger statement of a simple-protocol Query
 * (`SELECT count(*) FROM __neki.list_shards() WHERE has_writable_primary`, ORDER BY, LIMIT,
 * joins): the call alone runs in the admin as the session's user (arelay_fetch), its rows
 * replace it in the text as a VALUES list of the same column names and types, and that
 * statement is routed like any other (one with no table goes to one shard; a join with
 * sharded tables is routed by them). One call per statement. Over the extended protocol the
 * same at the Execute (the call's arguments constants, parameters elsewhere): the composed
 * text replaces the Parse's in what the shards get (route_ext_composed()). Entry points:
 * route_compose_start(), route_compose_take().
 */
#include "neki/base.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/event.h>

#include "neki/admin.h"
#include "neki/memstream.h"
#include "neki/parse.h"
#include "route_int.h"
#include "route_client.h"
#include "route_compose.h"
#include "route_sqltext.h"

/* The statement waiting for its call's rows. */
struct rcompose {
	char *sql;			/* owned: the statement's text */
	size_t start, end;		/* the call's bytes in it */
	bool in_from, alias;		/* a FROM item; with its own alias */
	char fn[64];
	char *composed;			/* owned: the text to route once the rows came */
	bool failed;			/* extended protocol: the call failed, with <err> */
	struct nk_error err;
};

/* The SQL name of a column type the __neki functions return (text otherwise). */
static const char *
type_sql(uint32_t oid)
{
	static const struct { uint32_t oid; const char *name; } types[] = {
		{ 16, "boolean" }, { 17, "bytea" }, { 20, "bigint" }, { 21, "smallint" },
		{ 23, "integer" }, { 701, "double precision" }, { 1184, "timestamptz" },
		{ 1700, "numeric" }, { 114, "json" }, { 3802, "jsonb" },
	};

	for (size_t i = 0; i < NK_ARRAY_LEN(types); i++)
		if (types[i].oid == oid)
			return types[i].name;
	return "text";
}

static void
put_quoted(FILE *f, const char *s, char q)
{
	fputc(q, f);
	for (; *s; s++) {
		if (*s == q)
			fputc(q, f);
		fputc(*s, f);
	}
	fputc(q, f);
}

/* The call's rows as a parenthesised SELECT (malloc'd text); NULL on no memory. */
static char *
rows_sql(const struct rcompose *c, const struct arelay_rows *rs)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = nk_memstream(&out, &len);

	if (f == NULL)
		return NULL;
	fputs("(SELECT * FROM (VALUES ", f);
	for (size_t r = 0; r < (rs->nrows ? rs->nrows : 1); r++) {
		fputs(r ? ", (" : "(", f);
		for (size_t k = 0; k < rs->ncols; k++) {
			const char *v = rs->nrows ? rs->vals[r * rs->ncols + k] : NULL;

			fputs(k ? ", " : "", f);
			if (v == NULL)
				fputs("NULL", f);
			else
				put_quoted(f, v, '\'');
			fprintf(f, "::%s", type_sql(rs->oids[k]));
		}
		fputc(')', f);
	}
	fputs(") AS __neki_rows(", f);
	for (size_t k = 0; k < rs->ncols; k++) {
		fputs(k ? ", " : "", f);
		put_quoted(f, rs->names[k], '"');
	}
	fputs(rs->nrows ? "))" : ") WHERE false)", f);
	if (c->in_from && !c->alias)
		fprintf(f, " AS %s", c->fn);
	if (fclose(f) != 0) {
		free(out);
		return NULL;
	}
	return out;
}

static void
compose_resume(struct route *r, enum route_resume how)
{
	struct timeval tv = { 0, 0 };

	r->hold.resume = how;
	evtimer_add(r->hold.ev_poll, &tv);
}

/* The call's rows (or its error) came back. */
static void
compose_fetched(void *arg, const struct arelay_rows *rows, const struct nk_error *err)
{
	struct route *r = arg;
	struct rcompose *c = r->x.compose;
	struct nk_error e;
	char *mid = NULL;

	route_client_set_relay(r, NULL);
	if (err == NULL && rows->ncols == 0)
		err = (nk_error_set(&e, ERRCODE_FEATURE_NOT_SUPPORTED,
				    "__neki.%s() returns no rows to compose",
				    c->fn), &e);
	if (err == NULL && (mid = rows_sql(c, rows)) == NULL)
		err = (nk_error_oom(&e), &e);
	if (err == NULL && asprintf(&c->composed, "%.*s%s%s", (int)c->start, c->sql, mid,
				    c->sql + c->end) == -1) {
		c->composed = NULL;
		err = (nk_error_oom(&e), &e);
	}
	free(mid);
	if (err != NULL && r->x.ext_exec) {	/* (the Execute fails when it runs again) */
		c->failed = true;
		c->err = *err;
		compose_resume(r, ROUTE_RESUME_EXEC);
		return;
	}
	if (err != NULL) {
		route_compose_free(r);
		(void)route_fail(r, err);
		compose_resume(r, ROUTE_RESUME_QUERY_END);
		return;
	}
	/* the statement again, composed this time */
	compose_resume(r, r->x.ext_exec ? ROUTE_RESUME_EXEC : ROUTE_RESUME_NEXT);
}

/* Is <p> (in <sql>) the start of `__neki . <fn> (`? Sets <*open> to its '('. */
static bool
call_at(const char *sql, const char *p, const char *fn, const char **open)
{
	size_t n = strlen(fn);

	if (p > sql && (isalnum((unsigned char)p[-1]) || p[-1] == '_' || p[-1] == '"'))
		return false;
	if (strncmp(p, "\"__neki\"", 8) == 0)
		p += 8;
	else if (strncasecmp(p, "__neki", 6) == 0)
		p += 6;
	else
		return false;
	while (isspace((unsigned char)*p))
		p++;
	if (*p++ != '.')
		return false;
	while (isspace((unsigned char)*p))
		p++;
	if (*p == '"' && strncmp(p + 1, fn, n) == 0 && p[n + 1] == '"')
		p += n + 2;
	else if (strncasecmp(p, fn, n) == 0 && !isalnum((unsigned char)p[n]) && p[n] != '_')
		p += n;
	else
		return false;
	while (isspace((unsigned char)*p))
		p++;
	*open = p;
	return *p == '(';
}

/* The call's bytes [*start, *end) in <sql>: false when it cannot be found. */
static bool
call_span(const char *sql, const char *fn, size_t *start, size_t *end)
{
	const char *open;

	for (const char *p = sql; *p; ) {
		const char *e = route_sql_skip_token(sql, p);

		if (e != p) {
			p = e;
			continue;
		}
		if (!call_at(sql, p, fn, &open)) {
			p++;
			continue;
		}
		*start = (size_t)(p - sql);
		for (int depth = 0; *open; ) {
			e = route_sql_skip_token(sql, open);
			if (e != open) {
				open = e;
				continue;
			}
			depth += *open == '(' ? 1 : *open == ')' ? -1 : 0;
			open++;
			if (depth == 0) {
				*end = (size_t)(open - sql);
				return true;
			}
		}
		return false;
	}
	return false;
}

/* route_compose_names_call: see route_compose.h. */
bool
route_compose_names_call(const char *sql)
{
	for (const char *p = sql; *p; ) {
		const char *e = route_sql_skip_token(sql, p);
		size_t n = strncmp(p, "\"__neki\"", 8) == 0 ? 8 :
			   strncasecmp(p, "__neki", 6) == 0 ? 6 : 0;

		if (e != p && n != 8) {
			p = e;
			continue;
		}
		if (n > 0 && (p == sql || (!isalnum((unsigned char)p[-1]) && p[-1] != '_'))) {
			const char *q = p + n;

			while (isspace((unsigned char)*q))
				q++;
			if (*q == '.')
				return true;
		}
		p += n > 0 ? n : 1;
	}
	return false;
}

void
route_compose_free(struct route *r)
{
	if (r->x.compose == NULL)
		return;
	free(r->x.compose->sql);
	free(r->x.compose->composed);
	free(r->x.compose);
	r->x.compose = NULL;
}

/* route_compose_take: see route_compose.h. */
char *
route_compose_take(struct route *r, bool *failed, struct nk_error *err)
{
	char *sql = r->x.compose ? r->x.compose->composed : NULL;

	*failed = r->x.compose != NULL && r->x.compose->failed;
	if (*failed) {
		*err = r->x.compose->err;
		route_compose_free(r);
		return NULL;
	}
	if (sql != NULL) {
		r->x.compose->composed = NULL;
		route_compose_free(r);
	}
	return sql;
}

/* route_compose_start: see route_int.h. */
enum rstep
route_compose_start(struct route *r, const struct stmt *st, const char *sql)
{
	struct nk_error err;
	struct rcompose *c;
	bool started;
	char *call;

	if (!admin_fn_exists(st->neki_fn)) {
		(void)admin_fn_unknown(st->neki_fn, &err);
		return route_fail(r, &err);
	}
	if (st->neki_ncalls > 1) {
		nk_error_set(&err, ERRCODE_FEATURE_NOT_SUPPORTED,
			     "a statement may call one __neki function");
		nk_error_hint(&err, "Call the others in statements of their own.");
		return route_fail(r, &err);
	}
	route_compose_free(r);
	c = r->x.compose = calloc(1, sizeof(*c));
	if (c == NULL || (c->sql = strdup(sql)) == NULL) {
		route_compose_free(r);
		return route_fail(r, (nk_error_oom(&err), &err));
	}
	snprintf(c->fn, sizeof(c->fn), "%s", st->neki_fn);
	c->in_from = st->neki_in_from;
	c->alias = st->neki_alias;
	if (!call_span(sql, c->fn, &c->start, &c->end)) {
		route_compose_free(r);
		nk_error_set(&err, ERRCODE_FEATURE_NOT_SUPPORTED,
			     "the call of __neki.%s() could not be composed",
			     st->neki_fn);
		nk_error_hint(&err, "Write it as __neki.%s(...), unquoted.", st->neki_fn);
		return route_fail(r, &err);
	}
	if (r->x.ext_exec && route_sql_has_param(sql, c->start, c->end)) {
		route_compose_free(r);
		nk_error_set(&err, ERRCODE_FEATURE_NOT_SUPPORTED,
			     "the arguments of __neki.%s() inside a larger "
			     "statement cannot be parameters", st->neki_fn);
		nk_error_hint(&err, "Write them as constants; parameters may be used in the rest "
			      "of the statement.");
		return route_fail(r, &err);
	}
	if (asprintf(&call, "SELECT * FROM %.*s", (int)(c->end - c->start), sql + c->start) == -1)
		call = NULL;
	started = call != NULL && route_client_admin_fetch(r, call, compose_fetched, r);
	free(call);
	if (!started) {
		route_compose_free(r);
		return route_fail(r, (nk_error_set(&err, ERRCODE_CONNECTION_FAILURE,
						   "the admin process is not "
						   "reachable"), &err));
	}
	if (r->x.ext_exec)
		r->busy = true;	/* the client waits with its Execute (route_ext_exec_resume) */
	return RSTEP_ASYNC;
}
