/*
 * normalize.c - literal normalisation for the plan cache (spec 3.1): a one-pass lexer over
 * the SQL text, no parse. Numeric literals and standard '...' strings become $k (numbered
 * after the text's own highest $n), comments become one space and whitespace runs collapse,
 * so `WHERE id = 1` and `where id  =  2 -- x` ... differ only where the SQL does.
 *
 * A unary minus in front of a number joins the literal when what precedes it cannot end an
 * operand (an operator, '(', ',', '[' or a keyword such as WHERE/AND/IN): the parser folds
 * those into the constant too. Other literal forms (E'', N'', B'', X'', U&'', $tag$...$tag$)
 * and strings continued over a newline stay verbatim in the key. Entry: parse_normalize().
 */
#include "neki/base.h"

#include "neki/parse.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct norm_lex {
	const char *s;		/* the SQL text */
	size_t pos;		/* next source byte */
	char *out;		/* key being built (malloc'd scratch) */
	size_t olen, ocap;
	struct parse_literal *lits;	/* malloc'd scratch */
	uint32_t nlits, lcap;
	uint32_t maxparam;
	bool pending_space;	/* whitespace or a comment since the last token */
	bool oom;
	/* the last significant token, for the unary-minus rule */
	size_t minus_out;	/* key offset of a '-' just emitted; SIZE_MAX: none */
	size_t minus_src;	/* its source offset */
	bool minus_space;	/* a space was emitted before that '-' */
	bool prev_operand_end;	/* the token before that '-' (or the last one) ends an operand */
	int by_state;		/* 1: after ORDER/GROUP, 2: in a BY list where a number is a
				 * column position (kept verbatim), 0 otherwise */
	bool after_list_start;	/* the last token was BY or ',' inside such a list */
};

static void
out_put(struct norm_lex *l, const char *p, size_t n)
{
	if (l->oom)
		return;
	if (l->olen + n + 1 > l->ocap) {
		size_t cap = (l->ocap + n + 1) * 2;
		char *o = realloc(l->out, cap);

		if (!o) {
			l->oom = true;
			return;
		}
		l->out = o;
		l->ocap = cap;
	}
	memcpy(l->out + l->olen, p, n);
	l->olen += n;
	l->out[l->olen] = '\0';
}

/* Start a token: emit the pending separator. */
static void
tok_begin(struct norm_lex *l)
{
	if (l->pending_space && l->olen > 0)
		out_put(l, " ", 1);
	l->pending_space = false;
}

/* Skip whitespace and comments; true when anything was skipped. */
static bool
skip_space(struct norm_lex *l)
{
	const char *s = l->s;
	size_t start = l->pos;

	for (;;) {
		if (isspace((unsigned char)s[l->pos])) {
			l->pos++;
		} else if (s[l->pos] == '-' && s[l->pos + 1] == '-') {
			while (s[l->pos] && s[l->pos] != '\n')
				l->pos++;
		} else if (s[l->pos] == '/' && s[l->pos + 1] == '*') {
			int depth = 0;

			do {
				if (s[l->pos] == '/' && s[l->pos + 1] == '*') {
					depth++;
					l->pos += 2;
				} else if (s[l->pos] == '*' && s[l->pos + 1] == '/') {
					depth--;
					l->pos += 2;
				} else {
					l->pos++;
				}
			} while (depth > 0 && s[l->pos]);
		} else {
			break;
		}
	}
	return l->pos > start;
}

static bool
is_ident_start(char c)
{
	return isalpha((unsigned char)c) || c == '_' || (unsigned char)c >= 0x80;
}

static bool
is_ident_char(char c)
{
	return is_ident_start(c) || isdigit((unsigned char)c) || c == '$';
}

/* Keywords after which a '-' is unary (the parser folds it into a following number). */
static bool
keyword_before_operand(const char *w, size_t n)
{
	static const char *const kw[] = {
		"select", "where", "and", "or", "not", "in", "values", "between", "when", "then",
		"else", "limit", "offset", "returning", "set", "on", "by", "having", "any", "all",
		"some", "is", "case", "like", "ilike", "array", "distinct", "fetch", "first",
		"next", "return", "using",
	};

	for (size_t i = 0; i < NK_ARRAY_LEN(kw); i++)
		if (strlen(kw[i]) == n && strncasecmp(kw[i], w, n) == 0)
			return true;
	return false;
}

static void
add_literal(struct norm_lex *l, size_t start, size_t len, char *value)
{
	char num[16];

	if (!value) {
		l->oom = true;
		return;
	}
	if (l->nlits == l->lcap) {
		uint32_t cap = l->lcap ? l->lcap * 2 : 8;
		struct parse_literal *v = realloc(l->lits, cap * sizeof(*v));

		if (!v) {
			free(value);
			l->oom = true;
			return;
		}
		l->lits = v;
		l->lcap = cap;
	}
	l->lits[l->nlits].start = (uint32_t)start;
	l->lits[l->nlits].len = (uint32_t)len;
	l->lits[l->nlits].value = value;	/* malloc'd until copied into the arena */
	l->nlits++;
	/* the slot number is fixed later (after maxparam is known): a marker now */
	snprintf(num, sizeof(num), "\x01%u", l->nlits - 1);
	out_put(l, num, strlen(num));
}

/* A number token at l->pos; absorbs a unary minus emitted just before it. */
static void
lex_number(struct norm_lex *l)
{
	const char *s = l->s;
	size_t start = l->pos, n;
	bool neg = l->minus_out != SIZE_MAX && !l->prev_operand_end;
	char *v;

	while (isdigit((unsigned char)s[l->pos]))
		l->pos++;
	if (s[l->pos] == '.' && s[l->pos + 1] != '.') {
		l->pos++;
		while (isdigit((unsigned char)s[l->pos]))
			l->pos++;
	}
	if ((s[l->pos] == 'e' || s[l->pos] == 'E') &&
	    (isdigit((unsigned char)s[l->pos + 1]) ||
	     ((s[l->pos + 1] == '+' || s[l->pos + 1] == '-') &&
	      isdigit((unsigned char)s[l->pos + 2])))) {
		l->pos += 2;
		while (isdigit((unsigned char)s[l->pos]))
			l->pos++;
	}
	n = l->pos - start;
	if (l->after_list_start && !neg) {
		tok_begin(l);
		out_put(l, s + start, n);	/* ORDER BY 2: a position, not a value */
		return;
	}
	if (neg) {
		l->olen = l->minus_out;	/* drop the '-' (and the space before it) */
		l->pending_space = false;
		if (l->minus_space)
			out_put(l, " ", 1);
		v = malloc(n + 2);
		if (v) {
			v[0] = '-';
			memcpy(v + 1, s + start, n);
			v[n + 1] = '\0';
		}
		add_literal(l, l->minus_src, l->pos - l->minus_src, v);
	} else {
		tok_begin(l);
		add_literal(l, start, n, strndup(s + start, n));
	}
}

/* A standard string '...' ('' inside) at l->pos: a literal unless continued. */
static void
lex_string(struct norm_lex *l)
{
	const char *s = l->s;
	size_t start = l->pos, end, save;
	char *v, *w;

	l->pos++;
	while (s[l->pos] && !(s[l->pos] == '\'' && s[l->pos + 1] != '\''))
		l->pos += s[l->pos] == '\'' ? 2 : 1;
	if (s[l->pos])
		l->pos++;
	end = l->pos;
	save = l->pos;
	while (s[save] == ' ' || s[save] == '\t' || s[save] == '\r' || s[save] == '\n')
		save++;
	tok_begin(l);
	if (s[save] == '\'' && memchr(s + end, '\n', save - end)) {
		/* continued over a newline: copy every piece (and what joins them) verbatim */
		while (s[save] == '\'' && memchr(s + end, '\n', save - end)) {
			l->pos = save + 1;
			while (s[l->pos] && !(s[l->pos] == '\'' && s[l->pos + 1] != '\''))
				l->pos += s[l->pos] == '\'' ? 2 : 1;
			if (s[l->pos])
				l->pos++;
			end = save = l->pos;
			while (isspace((unsigned char)s[save]))
				save++;
		}
		out_put(l, s + start, end - start);
		return;
	}
	v = malloc(end - start);
	if (v) {
		w = v;
		for (size_t i = start + 1; i + 1 < end; i++) {
			*w++ = s[i];
			if (s[i] == '\'')
				i++;
		}
		*w = '\0';
	}
	add_literal(l, start, end - start, v);
}

/* Copy a quoted run (<q>...<q> with doubled <q> inside) verbatim. */
static void
copy_quoted(struct norm_lex *l, char q, bool backslash)
{
	const char *s = l->s;
	size_t start = l->pos;

	l->pos++;
	while (s[l->pos]) {
		if (backslash && s[l->pos] == '\\' && s[l->pos + 1]) {
			l->pos += 2;
		} else if (s[l->pos] == q) {
			l->pos++;
			if (s[l->pos] != q)
				break;
			l->pos++;
		} else {
			l->pos++;
		}
	}
	out_put(l, s + start, l->pos - start);
}

/* $n parameter or $tag$...$tag$ at l->pos. */
static void
lex_dollar(struct norm_lex *l)
{
	const char *s = l->s;
	size_t start = l->pos, tag;
	const char *close;

	tok_begin(l);
	if (isdigit((unsigned char)s[l->pos + 1])) {
		unsigned long n = strtoul(s + l->pos + 1, NULL, 10);

		l->pos++;
		while (isdigit((unsigned char)s[l->pos]))
			l->pos++;
		if (n > l->maxparam && n < 65536)
			l->maxparam = (uint32_t)n;
		out_put(l, s + start, l->pos - start);
		return;
	}
	tag = start + 1;
	while (is_ident_char(s[tag]) && s[tag] != '$')
		tag++;
	if (s[tag] != '$') {	/* a lone '$' */
		l->pos++;
		out_put(l, "$", 1);
		return;
	}
	{
		size_t tlen = tag + 1 - start;
		char *t = strndup(s + start, tlen);

		if (!t) {
			l->oom = true;
			return;
		}
		close = strstr(s + tag + 1, t);
		free(t);
		l->pos = close ? (size_t)(close - s) + tlen : strlen(s);
	}
	out_put(l, s + start, l->pos - start);
}

static bool
word_is(const char *w, size_t n, const char *kw)
{
	return strlen(kw) == n && strncasecmp(w, kw, n) == 0;
}

/* Track ORDER BY / GROUP BY lists, whose bare integers are column positions. */
static void
by_track(struct norm_lex *l, const char *w, size_t n)
{
	if (word_is(w, n, "order") || word_is(w, n, "group")) {
		l->by_state = 1;
	} else if (l->by_state == 1 && word_is(w, n, "by")) {
		l->by_state = 2;
		l->after_list_start = true;
		return;
	} else if (l->by_state == 2 && (word_is(w, n, "asc") || word_is(w, n, "desc") ||
					word_is(w, n, "nulls") || word_is(w, n, "first") ||
					word_is(w, n, "last"))) {
		l->after_list_start = false;
		return;
	} else {
		l->by_state = 0;
	}
	l->after_list_start = false;
}

/* An identifier or keyword; prefixed strings (E'', B'', X'', N'', U&'') verbatim. */
static void
lex_word(struct norm_lex *l)
{
	const char *s = l->s;
	size_t start = l->pos;

	tok_begin(l);
	while (is_ident_char(s[l->pos]))
		l->pos++;
	if (l->pos - start == 1 && s[l->pos] == '\'') {
		char c = (char)tolower((unsigned char)s[start]);

		out_put(l, s + start, 1);
		copy_quoted(l, '\'', c == 'e');
		l->prev_operand_end = true;
		return;
	}
	if (l->pos - start == 1 && (s[start] == 'u' || s[start] == 'U') && s[l->pos] == '&' &&
	    (s[l->pos + 1] == '\'' || s[l->pos + 1] == '"')) {
		out_put(l, s + start, 2);
		l->pos++;
		copy_quoted(l, s[l->pos], false);
		l->prev_operand_end = true;
		return;
	}
	out_put(l, s + start, l->pos - start);
	l->prev_operand_end = !keyword_before_operand(s + start, l->pos - start);
	by_track(l, s + start, l->pos - start);
}

/* One token at l->pos (after whitespace). */
static void
lex_token(struct norm_lex *l)
{
	const char *s = l->s;
	char c = s[l->pos];
	bool was_minus = false;

	if (isdigit((unsigned char)c) ||
	    (c == '.' && isdigit((unsigned char)s[l->pos + 1]))) {
		lex_number(l);
		l->prev_operand_end = true;
		l->after_list_start = false;
	} else if (c == '\'') {
		lex_string(l);
		l->prev_operand_end = true;
		l->after_list_start = false;
	} else if (c == '"') {
		tok_begin(l);
		copy_quoted(l, '"', false);
		l->prev_operand_end = true;
	} else if (c == '$') {
		lex_dollar(l);
		l->prev_operand_end = true;
	} else if (is_ident_start(c)) {
		lex_word(l);
	} else {
		size_t before = l->olen;

		tok_begin(l);
		if (c == '-') {
			l->minus_out = before;
			l->minus_src = l->pos;
			l->minus_space = l->olen > before;
			was_minus = true;
		}
		out_put(l, &c, 1);
		l->pos++;
		if (!was_minus)
			l->prev_operand_end = c == ')' || c == ']';
		l->after_list_start = l->by_state == 2 && c == ',';
		if (c == '(' || c == ')' || c == ';')
			l->by_state = 0;
	}
	if (!was_minus)
		l->minus_out = SIZE_MAX;
}

/* Replace the \x01<i> markers by $<nparams + i + 1> into a copy in <a>. */
static const char *
finish_key(struct rarena *a, const struct norm_lex *l)
{
	size_t cap = l->olen + (size_t)l->nlits * 8 + 1, o = 0;
	char *key = rarena_alloc(a, cap);

	if (!key)
		return NULL;
	for (size_t i = 0; i < l->olen;) {
		if (l->out[i] == '\x01') {
			char *end;
			unsigned long k = strtoul(l->out + i + 1, &end, 10);

			o += (size_t)snprintf(key + o, cap - o, "$%lu", l->maxparam + k + 1);
			i = (size_t)(end - l->out);
		} else {
			key[o++] = l->out[i++];
		}
	}
	key[o] = '\0';
	return key;
}

static bool
norm_finish(struct rarena *a, struct norm_lex *l, struct parse_norm *out)
{
	out->key = finish_key(a, l);
	out->nparams = l->maxparam;
	out->nlits = l->nlits;
	out->lits = l->nlits ? rarena_alloc(a, l->nlits * sizeof(*out->lits)) : NULL;
	if (!out->key || (l->nlits && !out->lits))
		return false;
	for (uint32_t i = 0; i < l->nlits; i++) {
		out->lits[i] = l->lits[i];
		out->lits[i].value = rarena_strdup(a, l->lits[i].value);
		if (!out->lits[i].value)
			return false;
	}
	return true;
}

/* parse_normalize: see parse.h. */
bool
parse_normalize(struct rarena *a, const char *sql, struct parse_norm *out)
{
	struct norm_lex l;
	bool ok;

	memset(&l, 0, sizeof(l));
	memset(out, 0, sizeof(*out));
	l.s = sql;
	l.minus_out = SIZE_MAX;
	out_put(&l, "", 0);
	while (!l.oom) {
		if (skip_space(&l))
			l.pending_space = true;
		if (!sql[l.pos])
			break;
		lex_token(&l);
	}
	ok = !l.oom && norm_finish(a, &l, out);
	for (uint32_t i = 0; i < l.nlits; i++)
		free((char *)l.lits[i].value);
	free(l.lits);
	free(l.out);
	return ok;
}
