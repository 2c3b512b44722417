/*
 * route_prep.c - SQL-level PREPARE / EXECUTE / DEALLOCATE of a routed session. The router
 * keeps each PREPAREd statement's text and declared parameter types per session (a shard
 * link is not the session's: transaction pooling). EXECUTE name(args) becomes the
 * statement's text with each $n replaced by its argument (CAST(arg AS type) when the type
 * was declared, (arg) otherwise), which is then planned like any statement: its values
 * route it as a Bind's would. Entry points: route_prepare(), route_execute_sql(),
 * route_deallocate(), route_prep_free().
 */
#include "neki/base.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "neki/pktbuf.h"
#include "route_int.h"
#include "route_ext.h"
#include "route_prep.h"
#include "route_sqltext.h"

#define ROUTE_PREP_PARAMS_MAX 256
#define ROUTE_PREP_NAME_MAX 256	/* bytes of a statement name (Postgres: 63) */

/* ---- lexing ---- */

static const char *
rp_ws(const char *sql, const char *p)
{
	for (;;) {
		const char *e;

		while (isspace((unsigned char)*p))
			p++;
		if ((p[0] == '-' && p[1] == '-') || (p[0] == '/' && p[1] == '*')) {
			e = route_sql_skip_token(sql, p);
			if (e != p) {
				p = e;
				continue;
			}
		}
		return p;
	}
}

/* The keyword <word> at <p> (case-insensitive): the position after it, or NULL. */
static const char *
rp_word(const char *p, const char *word)
{
	size_t n = strlen(word);

	if (strncasecmp(p, word, n) != 0 || isalnum((unsigned char)p[n]) || p[n] == '_')
		return NULL;
	return p + n;
}

/* An identifier ("quoted" kept, plain folded to lower case) into <out>; NULL when none. */
static const char *
rp_ident(const char *p, char *out, size_t cap)
{
	size_t n = 0;

	if (*p == '"') {
		for (p++; *p != '\0'; p++) {
			if (*p == '"' && p[1] != '"')
				break;
			if (*p == '"')
				p++;
			if (n + 1 < cap)
				out[n++] = *p;
		}
		if (*p != '"' || n == 0)
			return NULL;
		out[n] = '\0';
		return p + 1;
	}
	if (!isalpha((unsigned char)*p) && *p != '_' && !((unsigned char)*p & 0x80))
		return NULL;
	while (isalnum((unsigned char)*p) || *p == '_' || *p == '$' || ((unsigned char)*p & 0x80)) {
		if (n + 1 < cap)
			out[n++] = (char)tolower((unsigned char)*p);
		p++;
	}
	out[n] = '\0';
	return p;
}

/*
 * The comma-separated items of the parenthesised list at <p> ('(' there): each item's span
 * (trimmed) into <starts>/<lens>, up to <max>; returns the position after ')' or NULL.
 */
static const char *
rp_list(const char *sql, const char *p, const char **starts, size_t *lens, uint32_t max,
	uint32_t *n)
{
	const char *item = p + 1;
	int depth = 0;

	*n = 0;
	for (p++; *p != '\0';) {
		const char *e = route_sql_skip_token(sql, p);

		if (e != p) {
			p = e;
			continue;
		}
		if (*p == '(') {
			depth++;
		} else if ((*p == ',' && depth == 0) || (*p == ')' && depth == 0)) {
			const char *s = rp_ws(sql, item), *t = p;

			while (t > s && isspace((unsigned char)t[-1]))
				t--;
			if (t > s || *p == ',' || *n > 0) {
				if (*n == max || t == s)
					return NULL;
				starts[*n] = s;
				lens[(*n)++] = (size_t)(t - s);
			}
			if (*p == ')')
				return p + 1;
			item = p + 1;
		} else if (*p == ')') {
			depth--;
		}
		p++;
	}
	return NULL;
}

/* ---- the session's statements ---- */

static struct rprep *
rp_find(struct route *r, const char *name)
{
	for (struct rprep *p = r->preps; p != NULL; p = p->next)
		if (route_streq(p->name, name))
			return p;
	return NULL;
}

static void
rp_free(struct rprep *p)
{
	for (uint32_t i = 0; i < p->ntypes; i++)
		free(p->types[i]);
	free(p->types);
	free(p->name);
	free(p->body);
	free(p);
}

/* The highest $n of <body> (0 when none). */
static uint32_t
rp_max_param(const char *body)
{
	bool used[ROUTE_PREP_PARAMS_MAX] = { false };
	uint32_t n = 0;

	route_sql_params(body, used, ROUTE_PREP_PARAMS_MAX);
	for (uint32_t i = 0; i < ROUTE_PREP_PARAMS_MAX; i++)
		if (used[i])
			n = i + 1;
	return n;
}

static bool
rp_syntax(struct nk_error *err, const char *what)
{
	return nk_error_set(err, ERRCODE_SYNTAX_ERROR, "syntax error in %s", what);
}

/* Postgres prepares SELECT, INSERT, UPDATE, DELETE, MERGE and VALUES (with WITH, TABLE). */
static bool
rp_preparable(const char *q)
{
	static const char *const words[] = { "select", "insert", "update", "delete", "merge",
					     "values", "with", "table" };

	if (*q == '(')
		return true;
	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if (rp_word(q, words[i]) != NULL)
			return true;
	return false;
}

bool
route_prepare(struct route *r, const char *sql, struct nk_error *err)
{
	const char *starts[ROUTE_PREP_PARAMS_MAX];
	size_t lens[ROUTE_PREP_PARAMS_MAX];
	uint32_t ntypes = 0;
	char name[ROUTE_PREP_NAME_MAX];
	struct rprep *p;
	const char *q = rp_word(rp_ws(sql, sql), "prepare");

	if (q == NULL || (q = rp_ident(rp_ws(sql, q), name, sizeof(name))) == NULL)
		return rp_syntax(err, "PREPARE");
	q = rp_ws(sql, q);
	if (*q == '(' && (q = rp_list(sql, q, starts, lens, ROUTE_PREP_PARAMS_MAX, &ntypes)) == NULL)
		return rp_syntax(err, "PREPARE");
	if ((q = rp_word(rp_ws(sql, q), "as")) == NULL)
		return rp_syntax(err, "PREPARE");
	q = rp_ws(sql, q);
	if (!rp_preparable(q))
		return nk_error_set(err, ERRCODE_SYNTAX_ERROR, "syntax error at or near \"%.*s\"",
				    (int)strcspn(q, " \t\r\n(;"), q);
	if (rp_find(r, name) != NULL || route_ext_has_stmt(r, name))
		return nk_error_set(err, ERRCODE_DUPLICATE_PSTATEMENT,
				    "prepared statement \"%s\" already exists", name);
	if (!route_analyse(r, q, NULL, err))	/* syntax errors now, as Postgres */
		return false;
	if ((p = calloc(1, sizeof(*p))) == NULL ||
	    (ntypes > 0 && (p->types = calloc(ntypes, sizeof(char *))) == NULL))
		goto oom;
	p->name = strdup(name);
	p->body = strdup(q);
	for (p->ntypes = 0; p->ntypes < ntypes; p->ntypes++)
		if ((p->types[p->ntypes] = strndup(starts[p->ntypes], lens[p->ntypes])) == NULL)
			goto oom;
	if (p->name == NULL || p->body == NULL)
		goto oom;
	p->nparams = rp_max_param(p->body);
	if (p->nparams < ntypes)
		p->nparams = ntypes;
	p->next = r->preps;
	r->preps = p;
	return true;
oom:
	if (p != NULL)
		rp_free(p);
	return nk_error_oom(err);
}

/* Append <n> bytes of <s> to the growing <buf>. */
static bool
rp_put(char **buf, size_t *len, size_t *cap, const char *s, size_t n)
{
	if (*len + n + 1 > *cap) {
		size_t ncap = (*len + n + 1) * 2;
		char *nb = realloc(*buf, ncap);

		if (nb == NULL)
			return false;
		*buf = nb;
		*cap = ncap;
	}
	memcpy(*buf + *len, s, n);
	*len += n;
	(*buf)[*len] = '\0';
	return true;
}

/* <body> with $k replaced by argument k (malloc'd; NULL on no memory). */
static char *
rp_substitute(const struct rprep *p, const char *const *args, const size_t *alens)
{
	const char *body = p->body;
	char *out = NULL;
	size_t len = 0, cap = 0;
	bool ok = rp_put(&out, &len, &cap, "", 0);

	for (const char *s = body; ok && *s != '\0';) {
		const char *e = route_sql_skip_token(body, s);
		unsigned long k;
		char *end;

		if (e != s) {
			ok = rp_put(&out, &len, &cap, s, (size_t)(e - s));
			s = e;
			continue;
		}
		if (*s != '$' || !isdigit((unsigned char)s[1]) ||
		    (s > body && (isalnum((unsigned char)s[-1]) || s[-1] == '_'))) {
			ok = rp_put(&out, &len, &cap, s++, 1);
			continue;
		}
		k = strtoul(s + 1, &end, 10);
		if (k < 1 || k > p->nparams) {
			ok = rp_put(&out, &len, &cap, s, (size_t)(end - s));
		} else if (k <= p->ntypes) {
			ok = rp_put(&out, &len, &cap, "CAST((", 6) &&
			     rp_put(&out, &len, &cap, args[k - 1], alens[k - 1]) &&
			     rp_put(&out, &len, &cap, ") AS ", 5) &&
			     rp_put(&out, &len, &cap, p->types[k - 1], strlen(p->types[k - 1])) &&
			     rp_put(&out, &len, &cap, ")", 1);
		} else {
			ok = rp_put(&out, &len, &cap, "(", 1) &&
			     rp_put(&out, &len, &cap, args[k - 1], alens[k - 1]) &&
			     rp_put(&out, &len, &cap, ")", 1);
		}
		s = end;
	}
	if (!ok) {
		free(out);
		return NULL;
	}
	return out;
}

char *
route_execute_sql(struct route *r, const char *sql, struct nk_error *err)
{
	const char *args[ROUTE_PREP_PARAMS_MAX];
	size_t alens[ROUTE_PREP_PARAMS_MAX];
	uint32_t nargs = 0;
	char name[ROUTE_PREP_NAME_MAX];
	const struct rprep *p;
	const char *q = rp_word(rp_ws(sql, sql), "execute");
	char *out;

	if (q == NULL || (q = rp_ident(rp_ws(sql, q), name, sizeof(name))) == NULL) {
		rp_syntax(err, "EXECUTE");
		return NULL;
	}
	q = rp_ws(sql, q);
	if (*q == '(' && rp_list(sql, q, args, alens, ROUTE_PREP_PARAMS_MAX, &nargs) == NULL) {
		rp_syntax(err, "EXECUTE");
		return NULL;
	}
	if ((p = rp_find(r, name)) == NULL) {
		nk_error_set(err, ERRCODE_INVALID_SQL_STATEMENT_NAME,
			     "prepared statement \"%s\" does not exist", name);
		return NULL;
	}
	if (nargs != p->nparams) {
		nk_error_set(err, ERRCODE_SYNTAX_ERROR,
			     "wrong number of parameters for prepared statement "
			     "\"%s\"", name);
		nk_error_detail(err, "Expected %u parameters but got %u.", p->nparams, nargs);
		return NULL;
	}
	if ((out = rp_substitute(p, args, alens)) == NULL)
		nk_error_oom(err);
	return out;
}

bool
route_deallocate(struct route *r, const char *sql, bool *all, struct nk_error *err)
{
	char name[ROUTE_PREP_NAME_MAX];
	const char *q = rp_word(rp_ws(sql, sql), "deallocate"), *t;

	*all = false;
	if (q == NULL)
		return rp_syntax(err, "DEALLOCATE");
	q = rp_ws(sql, q);
	if ((t = rp_word(q, "prepare")) != NULL)
		q = rp_ws(sql, t);
	if ((t = rp_word(q, "all")) != NULL && *rp_ws(sql, t) == '\0') {
		*all = true;
		route_prep_free(r);
		route_ext_drop_stmts(r);
		return true;
	}
	if (rp_ident(q, name, sizeof(name)) == NULL)
		return rp_syntax(err, "DEALLOCATE");
	if (route_prep_drop(r, name) || route_ext_drop_stmt(r, name))
		return true;
	return nk_error_set(err, ERRCODE_INVALID_SQL_STATEMENT_NAME,
			    "prepared statement \"%s\" does not exist", name);
}

bool
route_prep_has(struct route *r, const char *name)
{
	return rp_find(r, name) != NULL;
}

bool
route_prep_drop(struct route *r, const char *name)
{
	for (struct rprep **pp = &r->preps; *pp != NULL; pp = &(*pp)->next) {
		if (route_streq((*pp)->name, name)) {
			struct rprep *p = *pp;

			*pp = p->next;
			rp_free(p);
			return true;
		}
	}
	return false;
}

void
route_prep_free(struct route *r)
{
	while (r->preps != NULL) {
		struct rprep *p = r->preps;

		r->preps = p->next;
		rp_free(p);
	}
}
