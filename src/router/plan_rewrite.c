/*
 * plan_rewrite.c - the text the executor sends when the router supplies sequence values
 * (spec 6.1): a small lexer over the statement text (strings, quoted identifiers, dollar
 * quotes and comments are skipped whole as neki/sqlscan.h reads them, parentheses nest), the nextval('seq') calls it
 * finds, and plan_rewrite(), which copies the text with each nextval() call replaced by its
 * value and, for an INSERT with fills, the column list extended, OVERRIDING SYSTEM VALUE
 * added and each VALUES row of one shard's part extended by its values.
 */
#include "neki/base.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "neki/sqlscan.h"
#include "plan_int.h"

/* ---- lexer ---- */

static bool
word_char(char ch, bool first)
{
	unsigned char u = (unsigned char)ch;

	return isalpha(u) || u == '_' || u >= 0x80 || (!first && (isdigit(u) || u == '$'));
}

/*
 * One token at <i> of <sql> (<n> bytes; not whitespace, not a comment): its kind and end.
 * Strings, quoted identifiers and dollar quotes as sqlscan.c reads them; an escape, bit,
 * national or Unicode string or a dollar quote is 'S' (never a sequence name).
 */
static size_t
lex_one(const char *sql, size_t i, size_t n, char *kind)
{
	enum sql_item it;
	size_t e = sql_scan_item(sql, i, n, &it);

	if (it == SQL_ITEM_STRING || it == SQL_ITEM_QUOTED_IDENT) {
		*kind = it == SQL_ITEM_STRING ? 's' : sql[i] == '"' ? 'q' : 'S';
		return e;
	}
	if (it != SQL_ITEM_NONE) {
		*kind = 'S';
		return e;
	}
	if (word_char(sql[i], true)) {
		for (e = i + 1; e < n && word_char(sql[e], false); e++)
			;
		*kind = 'w';
		return e;
	}
	*kind = strchr("(),.;:", sql[i]) ? 'p' : 'o';
	return i + 1;
}

/* plan_lex: see plan_int.h. */
bool
plan_lex(struct rarena *a, const char *sql, struct ptok **out, uint32_t *n)
{
	uint32_t cap = 64;
	size_t len = strlen(sql), i = 0;

	*n = 0;
	*out = rarena_alloc(a, cap * sizeof(**out));
	if (!*out)
		return false;
	while (i < len) {
		struct ptok *t;
		enum sql_item it;
		size_t e;
		char kind;

		if (isspace((unsigned char)sql[i])) {
			i++;
			continue;
		}
		e = sql_scan_item(sql, i, len, &it);
		if (it == SQL_ITEM_COMMENT) {
			i = e;
			continue;
		}
		e = lex_one(sql, i, len, &kind);
		if (*n == cap) {
			struct ptok *g = rarena_alloc(a, 2 * cap * sizeof(*g));

			if (!g)
				return false;
			memcpy(g, *out, cap * sizeof(*g));
			*out = g;
			cap *= 2;
		}
		t = &(*out)[(*n)++];
		t->start = (uint32_t)i;
		t->len = (uint32_t)(e - i);
		t->kind = kind;
		i = e;
	}
	return true;
}

bool
ptok_is(const char *sql, const struct ptok *t, const char *word)
{
	return (t->kind == 'w' || t->kind == 'p') && strlen(word) == t->len &&
	       strncasecmp(sql + t->start, word, t->len) == 0;
}

/* plan_find_nextval: see plan_int.h. */
bool
plan_find_nextval(const char *sql, const struct ptok *t, uint32_t n, uint32_t i,
		  const char *fname, uint32_t *arg, uint32_t *end)
{
	uint32_t k = i + 2;

	if (i + 2 >= n || !ptok_is(sql, &t[i], fname) || !ptok_is(sql, &t[i + 1], "(") ||
	    (i >= 2 && ptok_is(sql, &t[i - 1], ".") && !ptok_is(sql, &t[i - 2], "pg_catalog")))
		return false;
	if (strcmp(fname, "lastval") == 0) {
		*arg = i;
		*end = i + 2;
		return ptok_is(sql, &t[i + 2], ")");
	}
	if (i + 3 >= n)
		return false;
	*arg = k;
	k++;
	if (k + 3 < n && ptok_is(sql, &t[k], ":") && ptok_is(sql, &t[k + 1], ":") &&
	    (ptok_is(sql, &t[k + 2], "regclass") || ptok_is(sql, &t[k + 2], "text")))
		k += 3;
	if (k >= n || !ptok_is(sql, &t[k], ")"))
		return false;
	*end = k;
	return true;
}

/* ---- rewrite ---- */

struct rw {
	struct rarena *a;
	const char *sql;
	char *buf;
	size_t len, cap;
	bool oom;
	const struct plan *p;
	const int64_t *nextvals;
};

static void
put(struct rw *w, const char *s, size_t n)
{
	if (w->len + n + 1 > w->cap) {
		size_t cap = (w->cap + n + 1) * 2;
		char *g = rarena_alloc(w->a, cap);

		if (!g) {
			w->oom = true;
			return;
		}
		if (w->len)
			memcpy(g, w->buf, w->len);
		w->buf = g;
		w->cap = cap;
	}
	memcpy(w->buf + w->len, s, n);
	w->len += n;
	w->buf[w->len] = '\0';
}

static void
puts_(struct rw *w, const char *s)
{
	put(w, s, strlen(s));
}

static void
put_int(struct rw *w, int64_t v)
{
	char b[32];

	snprintf(b, sizeof(b), "%" PRId64, v);
	puts_(w, b);
}

static void
put_ident(struct rw *w, const char *name)
{
	puts_(w, "\"");
	for (const char *c = name; *c; c++)
		put(w, *c == '"' ? "\"\"" : c, *c == '"' ? 2 : 1);
	puts_(w, "\"");
}

/* Copy sql[from, to) replacing the nextval() calls that start inside it. */
static void
copy_span(struct rw *w, uint32_t from, uint32_t to)
{
	uint32_t pos = from;

	for (uint32_t k = 0; k < w->p->nnextvals; k++) {
		const struct plan_nextval *nv = &w->p->nextvals[k];

		if (nv->start < from || nv->start >= to)
			continue;
		put(w, w->sql + pos, nv->start - pos);
		puts_(w, "(SELECT ");
		put_int(w, w->nextvals[k]);
		puts_(w, nv->fn == PLAN_SEQ_CURRVAL ? "::int8 AS currval)" :
			 nv->fn == PLAN_SEQ_LASTVAL ? "::int8 AS lastval)" : "::int8 AS nextval)");
		pos = nv->start + nv->len;
	}
	if (to > pos)
		put(w, w->sql + pos, to - pos);
}

/* Where the parts of an INSERT ... VALUES are in the token list. */
struct ins_shape {
	uint32_t rel_end;		/* byte after the table name (and alias) */
	int32_t cols_open, cols_close;	/* token numbers of the column list's parens; -1 */
	bool overriding;		/* an OVERRIDING clause is present */
	uint32_t values_kw;		/* token number of VALUES */
	uint32_t *row_open, *row_close;	/* token numbers, per row */
	uint32_t nrows;
};

static int32_t
match_paren(const char *sql, const struct ptok *t, uint32_t n, uint32_t open)
{
	int depth = 0;

	for (uint32_t k = open; k < n; k++) {
		depth += ptok_is(sql, &t[k], "(") ? 1 : ptok_is(sql, &t[k], ")") ? -1 : 0;
		if (depth == 0)
			return (int32_t)k;
	}
	return -1;
}

static bool
is_name(const struct ptok *t)
{
	return t->kind == 'w' || t->kind == 'q';
}

/* Find INSERT INTO name [[AS] alias] [(cols)] [OVERRIDING x VALUE] VALUES (..), ... */
static bool
insert_shape(struct rw *w, const struct ptok *t, uint32_t n, struct ins_shape *sh)
{
	const char *s = w->sql;
	uint32_t k = 0;
	int depth = 0;

	for (; k < n; k++) {
		depth += ptok_is(s, &t[k], "(") ? 1 : ptok_is(s, &t[k], ")") ? -1 : 0;
		if (depth == 0 && ptok_is(s, &t[k], "insert"))
			break;
	}
	if (k + 3 >= n || !ptok_is(s, &t[k + 1], "into") || !is_name(&t[k + 2]))
		return false;
	k += 3;
	if (k + 1 < n && ptok_is(s, &t[k], ".") && is_name(&t[k + 1]))
		k += 2;
	if (k + 1 < n && ptok_is(s, &t[k], "as") && is_name(&t[k + 1]))
		k += 2;
	else if (k < n && (t[k].kind == 'q' || (t[k].kind == 'w' && !ptok_is(s, &t[k], "values") &&
						  !ptok_is(s, &t[k], "overriding") &&
						  !ptok_is(s, &t[k], "default"))))
		k++;
	sh->rel_end = t[k - 1].start + t[k - 1].len;
	sh->cols_open = sh->cols_close = -1;
	if (k < n && ptok_is(s, &t[k], "(")) {
		sh->cols_open = (int32_t)k;
		sh->cols_close = match_paren(s, t, n, k);
		if (sh->cols_close < 0)
			return false;
		k = (uint32_t)sh->cols_close + 1;
	}
	sh->overriding = k < n && ptok_is(s, &t[k], "overriding");
	if (sh->overriding)
		k += 3;
	if (k >= n || !ptok_is(s, &t[k], "values"))
		return false;
	sh->values_kw = k++;
	sh->row_open = rarena_alloc(w->a, (n + 1) * sizeof(uint32_t));
	sh->row_close = rarena_alloc(w->a, (n + 1) * sizeof(uint32_t));
	if (!sh->row_open || !sh->row_close)
		return (w->oom = true), false;
	sh->nrows = 0;
	while (k < n && ptok_is(s, &t[k], "(")) {
		int32_t close = match_paren(s, t, n, k);

		if (close < 0)
			return false;
		sh->row_open[sh->nrows] = k;
		sh->row_close[sh->nrows++] = (uint32_t)close;
		k = (uint32_t)close + 1;
		if (k < n && ptok_is(s, &t[k], ","))
			k++;
		else
			break;
	}
	return sh->nrows == w->p->nrows;
}

/* The column list: the statement's extended, or plan.cols written out, plus the fills. */
static void
put_columns(struct rw *w, const struct ptok *t, const struct ins_shape *sh)
{
	bool first = true;

	if (sh->cols_open >= 0) {
		copy_span(w, sh->rel_end, t[sh->cols_close].start);
		first = false;
	} else {
		puts_(w, " (");
		for (uint32_t i = 0; i < w->p->ncols; i++, first = false) {
			if (!first)
				puts_(w, ", ");
			put_ident(w, w->p->cols[i]);
		}
	}
	for (uint32_t f = 0; f < w->p->nfills; f++) {
		if (w->p->fills[f].cell >= 0)
			continue;	/* listed already */
		if (!first)
			puts_(w, ", ");
		put_ident(w, w->p->fills[f].column);
		first = false;
	}
	puts_(w, ")");
}

/* The fill whose given cell is <cell>, or -1. */
static int32_t
fill_of_cell(const struct plan *p, uint32_t cell)
{
	for (uint32_t f = 0; f < p->nfills; f++)
		if (p->fills[f].cell == (int32_t)cell)
			return (int32_t)f;
	return -1;
}

/* Copy row <r> replacing the DEFAULT cells of given fill columns by their values. */
static void
copy_row(struct rw *w, const struct ptok *t, const struct ins_shape *sh, uint32_t r,
	 const int64_t *values)
{
	uint32_t open = sh->row_open[r], close = sh->row_close[r], pos = t[open].start, cell = 0;
	int depth = 0;

	for (uint32_t k = open + 1; k < close; k++) {
		int32_t f;

		if (ptok_is(w->sql, &t[k], "(") || ptok_is(w->sql, &t[k], "["))
			depth++;
		else if (ptok_is(w->sql, &t[k], ")") || ptok_is(w->sql, &t[k], "]"))
			depth--;
		else if (depth == 0 && ptok_is(w->sql, &t[k], ","))
			cell++;
		else if (depth == 0 && ptok_is(w->sql, &t[k], "default") &&
			 (k == open + 1 || ptok_is(w->sql, &t[k - 1], ",")) &&
			 (k + 1 == close || ptok_is(w->sql, &t[k + 1], ",")) &&
			 (f = fill_of_cell(w->p, cell)) >= 0) {
			copy_span(w, pos, t[k].start);
			put_int(w, values[(size_t)f * w->p->nrows + r]);
			pos = t[k].start + t[k].len;
		}
	}
	copy_span(w, pos, t[close].start);
}

static void
put_row(struct rw *w, const struct ptok *t, const struct ins_shape *sh, uint32_t r,
	const int64_t *values)
{
	bool empty = sh->row_close[r] == sh->row_open[r] + 1;

	copy_row(w, t, sh, r, values);
	for (uint32_t f = 0; f < w->p->nfills; f++) {
		if (w->p->fills[f].cell >= 0)
			continue;
		if (!empty)
			puts_(w, ", ");
		empty = false;
		put_int(w, values[(size_t)f * w->p->nrows + r]);
	}
	puts_(w, ")");
}

static bool
rewrite_insert(struct rw *w, const struct ptok *t, uint32_t n, const struct plan_part *part,
	       const int64_t *values)
{
	struct ins_shape sh;
	uint32_t after;

	if (!insert_shape(w, t, n, &sh))
		return false;
	copy_span(w, 0, sh.rel_end);
	put_columns(w, t, &sh);
	after = sh.cols_close >= 0 ? t[sh.cols_close].start + 1 : sh.rel_end;
	copy_span(w, after, t[sh.values_kw].start);
	if (!sh.overriding)
		puts_(w, "OVERRIDING SYSTEM VALUE ");
	puts_(w, "VALUES ");
	for (uint32_t i = 0; i < (part ? part->nrows : sh.nrows); i++) {
		if (i > 0)
			puts_(w, ", ");
		put_row(w, t, &sh, part ? part->rows[i] : i, values);
	}
	after = t[sh.row_close[sh.nrows - 1]].start + 1;
	copy_span(w, after, (uint32_t)strlen(w->sql));
	return true;
}

/* plan_rewrite: see plan.h. */
char *
plan_rewrite(struct rarena *a, const char *sql, const struct plan *p,
	     const struct plan_part *part, const int64_t *values, const int64_t *nextvals,
	     struct nk_error *err)
{
	struct rw w = { a, sql, NULL, 0, 0, false, p, nextvals };
	struct ptok *t;
	uint32_t n;

	puts_(&w, "");
	if (!plan_lex(a, sql, &t, &n)) {
		nk_error_oom(err);
		return NULL;
	}
	if (p->nfills == 0)
		copy_span(&w, 0, (uint32_t)strlen(sql));
	else if (!rewrite_insert(&w, t, n, part, values) && !w.oom) {
		nk_error_set(err, ERRCODE_SYNTAX_ERROR, "INSERT text does not match its plan");
		return NULL;
	}
	if (w.oom || !w.buf) {
		nk_error_oom(err);
		return NULL;
	}
	return w.buf;
}
