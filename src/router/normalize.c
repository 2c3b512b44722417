/*
 * normalize.c - literal normalisation for the plan cache (spec 3.1): a one-pass lexer over
 * the SQL text, no parse. Numeric literals and standard '...' strings become $k (numbered
 * after the text's own highest $n), comments become one space and whitespace runs collapse,
 * so `WHERE id = 1` and `where id  =  2 -- x` ... differ only where the SQL does.
 *
 * A unary minus in front of a number joins the literal when what precedes it cannot end an
 * operand (an operator, '(', ',', '[' or a keyword such as WHERE/AND/IN): the parser folds
 * those into the constant too. Other literal forms (E'', N'', B'', X'', U&'', $tag$...$tag$)
 * and strings continued over a newline stay verbatim in the key, but for an E'' string
 * without a backslash, which is the standard string of the same value (the router's own
 * statements quote so). Entry: parse_normalize().
 */
#include "neki/base.h"

#include "neki/hash.h"
#include "neki/sqlscan.h"
#include "neki/parse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define NORM_BY_MAX 16

struct norm_lex {
	const char *s;		/* the SQL text */
	size_t len;		/* its bytes */
	size_t pos;		/* next source byte */
	struct rarena *a;	/* everything below is allocated here */
	char *out;		/* key being built */
	size_t olen, ocap;
	struct parse_literal *lits;
	uint32_t nlits, lcap;
	uint32_t maxparam;
	bool pending_space;	/* whitespace or a comment since the last token */
	bool oom;
	/* the last significant token, for the unary-minus rule */
	size_t minus_out;	/* key offset of a '-' just emitted; SIZE_MAX: none */
	size_t minus_src;	/* its source offset */
	bool minus_space;	/* a space was emitted before that '-' */
	bool prev_operand_end;	/* the token before that '-' (or the last one) ends an operand */
	/* ORDER BY / GROUP BY lists, where a number starting an item is a column position
	 * (kept verbatim): the parenthesis depth of each open list, innermost last */
	uint16_t depth;		/* parentheses open */
	uint16_t by_depth[NORM_BY_MAX];
	uint8_t nby;
	bool by_pending;	/* the last word was ORDER or GROUP */
	uint8_t on_pending;	/* 1: the last word was DISTINCT, 2: DISTINCT ON (its '('
				 * opens a list whose numbers are positions too) */
	bool by_all;		/* lists nested past NORM_BY_MAX: every number verbatim */
	bool after_list_start;	/* the last token was BY or ',' of the innermost list */
};

/* ASCII classes (the SQL lexer's, whatever the C locale): one table lookup per byte. */
enum { CH_SPACE = 1, CH_IDENT_START = 2, CH_IDENT = 4, CH_DIGIT = 8 };

static const uint8_t char_class[256] = {
	['\t'] = CH_SPACE, ['\n'] = CH_SPACE, ['\v'] = CH_SPACE, ['\f'] = CH_SPACE,
	['\r'] = CH_SPACE, [' '] = CH_SPACE,
	['0' ... '9'] = CH_IDENT | CH_DIGIT, ['$'] = CH_IDENT,
	['A' ... 'Z'] = CH_IDENT_START | CH_IDENT, ['a' ... 'z'] = CH_IDENT_START | CH_IDENT,
	['_'] = CH_IDENT_START | CH_IDENT, [0x80 ... 0xff] = CH_IDENT_START | CH_IDENT,
};

static inline bool
is_space(char c)
{
	return (char_class[(unsigned char)c] & CH_SPACE) != 0;
}

static inline bool
is_digit(char c)
{
	return (char_class[(unsigned char)c] & CH_DIGIT) != 0;
}

static inline bool
is_ident_start(char c)
{
	return (char_class[(unsigned char)c] & CH_IDENT_START) != 0;
}

static inline bool
is_ident_char(char c)
{
	return (char_class[(unsigned char)c] & CH_IDENT) != 0;
}

/* Grow the key for <n> more bytes (rarely: it starts at twice the text's size). */
static bool
out_grow(struct norm_lex *l, size_t n)
{
	size_t cap = (l->ocap + n + 1) * 2;
	char *o = rarena_alloc(l->a, cap);

	if (!o) {
		l->oom = true;
		return false;
	}
	if (l->olen)
		memcpy(o, l->out, l->olen);
	l->out = o;
	l->ocap = cap;
	return true;
}

/* Append <p>[0..n) to the key (terminated once, at the end). */
static inline void
out_put(struct norm_lex *l, const char *p, size_t n)
{
	if (l->olen + n + 1 > l->ocap && !out_grow(l, n))
		return;
	if (n == 1)
		l->out[l->olen] = *p;
	else
		memcpy(l->out + l->olen, p, n);
	l->olen += n;
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
	size_t start = l->pos, pos = start;

	for (;;) {
		enum sql_item it;
		size_t e;

		if (is_space(s[pos])) {
			pos++;
			continue;
		}
		if (s[pos] != '-' && s[pos] != '/')
			break;
		e = sql_scan_item(s, pos, l->len, &it);
		if (it != SQL_ITEM_COMMENT)
			break;
		pos = e;
	}
	l->pos = pos;
	return pos > start;
}

/*
 * Keywords after which a '-' is unary (the parser folds it into a following number), by
 * first letter: a word is compared, lowered, with the few of its letter and length.
 */
static bool
keyword_before_operand(const char *w, size_t n)
{
	struct kw {
		uint8_t len;
		char word[10];
	};
	static const struct kw by_letter[26][5] = {
		['a' - 'a'] = { { 3, "and" }, { 3, "any" }, { 3, "all" }, { 5, "array" } },
		['b' - 'a'] = { { 7, "between" }, { 2, "by" } }, ['c' - 'a'] = { { 4, "case" } },
		['d' - 'a'] = { { 8, "distinct" } }, ['e' - 'a'] = { { 4, "else" } },
		['f' - 'a'] = { { 5, "fetch" }, { 5, "first" } }, ['h' - 'a'] = { { 6, "having" } },
		['i' - 'a'] = { { 2, "in" }, { 2, "is" }, { 5, "ilike" } },
		['l' - 'a'] = { { 5, "limit" }, { 4, "like" } },
		['n' - 'a'] = { { 3, "not" }, { 4, "next" } },
		['o' - 'a'] = { { 2, "or" }, { 6, "offset" }, { 2, "on" } },
		['r' - 'a'] = { { 9, "returning" }, { 6, "return" } },
		['s' - 'a'] = { { 6, "select" }, { 3, "set" }, { 4, "some" } },
		['t' - 'a'] = { { 4, "then" } }, ['u' - 'a'] = { { 5, "using" } },
		['v' - 'a'] = { { 6, "values" } }, ['w' - 'a'] = { { 5, "where" }, { 4, "when" } },
	};
	unsigned first = (unsigned)((unsigned char)w[0] | 0x20) - 'a';

	if (n < 2 || n > 9 || first >= 26)
		return false;
	for (const struct kw *k = by_letter[first]; k->len != 0; k++) {
		size_t i = 1;

		if (k->len != n)
			continue;
		while (i < n && (char)(w[i] | 0x20) == k->word[i])	/* (no non-letter matches) */
			i++;
		if (i == n)
			return true;
	}
	return false;
}

static void
add_literal(struct norm_lex *l, size_t start, size_t len, char *value)
{
	char num[16];
	int n;

	if (!value) {
		l->oom = true;
		return;
	}
	if (l->nlits == l->lcap) {
		uint32_t cap = l->lcap ? l->lcap * 2 : 8;
		struct parse_literal *v = rarena_alloc(l->a, cap * sizeof(*v));

		if (!v) {
			l->oom = true;
			return;
		}
		if (l->nlits)
			memcpy(v, l->lits, l->nlits * sizeof(*v));
		l->lits = v;
		l->lcap = cap;
	}
	l->lits[l->nlits].start = (uint32_t)start;
	l->lits[l->nlits].len = (uint32_t)len;
	l->lits[l->nlits].value = value;
	l->nlits++;
	n = sizeof(num);	/* "$<k>", written backwards (no snprintf per literal) */
	for (uint32_t k = l->maxparam + l->nlits; n == sizeof(num) || k > 0; k /= 10)
		num[--n] = (char)('0' + k % 10);
	num[--n] = '$';
	out_put(l, num + n, sizeof(num) - n);
}

/* A number token at l->pos; absorbs a unary minus emitted just before it. */
static void
lex_number(struct norm_lex *l)
{
	const char *s = l->s;
	size_t start = l->pos, n;
	bool neg = l->minus_out != SIZE_MAX && !l->prev_operand_end;
	char *v;

	while (is_digit(s[l->pos]))
		l->pos++;
	if (s[l->pos] == '.' && s[l->pos + 1] != '.') {
		l->pos++;
		while (is_digit(s[l->pos]))
			l->pos++;
	}
	if ((s[l->pos] == 'e' || s[l->pos] == 'E') &&
	    (is_digit(s[l->pos + 1]) ||
	     ((s[l->pos + 1] == '+' || s[l->pos + 1] == '-') &&
	      is_digit(s[l->pos + 2])))) {
		l->pos += 2;
		while (is_digit(s[l->pos]))
			l->pos++;
	}
	n = l->pos - start;
	if ((l->after_list_start || l->by_all) && !neg) {
		tok_begin(l);
		out_put(l, s + start, n);	/* ORDER BY 2: a position, not a value */
		return;
	}
	if (neg) {
		l->olen = l->minus_out;	/* drop the '-' (and the space before it) */
		l->pending_space = false;
		if (l->minus_space)
			out_put(l, " ", 1);
		v = rarena_alloc(l->a, n + 2);
		if (v) {
			v[0] = '-';
			memcpy(v + 1, s + start, n);
			v[n + 1] = '\0';
		}
		add_literal(l, l->minus_src, l->pos - l->minus_src, v);
	} else {
		tok_begin(l);
		add_literal(l, start, n, rarena_strndup(l->a, s + start, n));
	}
}

/* A standard string '...' ('' inside) at l->pos, or an escape string without a backslash
 * (E'...': the same value) when <prefix> is 1: a literal unless continued. */
static void
lex_string(struct norm_lex *l, size_t prefix)
{
	const char *s = l->s;
	size_t start = l->pos, end, save;
	enum sql_item it;
	char *v, *w;

	l->pos = sql_scan_item(s, l->pos, l->len, &it);
	end = l->pos;
	save = l->pos;
	while (s[save] == ' ' || s[save] == '\t' || s[save] == '\r' || s[save] == '\n')
		save++;
	tok_begin(l);
	if (s[save] == '\'' && memchr(s + end, '\n', save - end)) {
		/* continued over a newline: copy every piece (and what joins them) verbatim */
		while (s[save] == '\'' && memchr(s + end, '\n', save - end)) {
			l->pos = sql_scan_item(s, save, l->len, &it);
			end = save = l->pos;
			while (is_space(s[save]))
				save++;
		}
		out_put(l, s + start, end - start);
		return;
	}
	v = rarena_alloc(l->a, end - start);
	if (v) {
		w = v;
		for (size_t i = start + prefix + 1; i + 1 < end; i++) {
			*w++ = s[i];
			if (s[i] == '\'')
				i++;
		}
		*w = '\0';
	}
	add_literal(l, start, end - start, v);
	if (!l->oom)
		l->lits[l->nlits - 1].quoted = true;
}

/* Copy the quoted item at l->pos (neki/sqlscan.h: a quoted identifier, a prefixed string, a
 * dollar quote) verbatim; false when none starts there. */
static bool
copy_item(struct norm_lex *l)
{
	size_t start = l->pos;
	enum sql_item it;

	l->pos = sql_scan_item(l->s, start, l->len, &it);
	if (it == SQL_ITEM_NONE)
		return false;
	out_put(l, l->s + start, l->pos - start);
	return true;
}

/* $n parameter or $tag$...$tag$ at l->pos. */
static void
lex_dollar(struct norm_lex *l)
{
	const char *s = l->s;
	size_t start = l->pos;

	tok_begin(l);
	if (is_digit(s[l->pos + 1])) {
		l->pos++;	/* $n: counted by prescan_params() */
		while (is_digit(s[l->pos]))
			l->pos++;
		out_put(l, s + start, l->pos - start);
		return;
	}
	if (!copy_item(l)) {	/* a lone '$' */
		l->pos++;
		out_put(l, "$", 1);
	}
}

static inline bool
word_is(const char *w, size_t n, const char *kw)
{
	return (w[0] | 0x20) == kw[0] && strlen(kw) == n && strncasecmp(w, kw, n) == 0;
}

/* Does word <w> end an ORDER BY / GROUP BY list at its own depth? */
static bool
ends_by_list(const char *w, size_t n)
{
	static const char *const words[] = { "limit", "offset", "fetch", "for", "having",
					     "window", "union", "intersect", "except", "returning",
					     "order" };

	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if (word_is(w, n, words[i]))
			return true;
	return false;
}

static void by_open(struct norm_lex *l);

/* Track ORDER BY / GROUP BY lists, whose bare integers are column positions: a list opens
 * at BY after ORDER or GROUP (or inside DISTINCT ON's parentheses) and ends at a word that
 * ends it, at the ')' closing its depth, or at ';'. */
static void
by_track(struct norm_lex *l, const char *w, size_t n)
{
	bool pending = l->by_pending;

	l->by_pending = false;
	l->after_list_start = false;
	if (pending && word_is(w, n, "by")) {
		by_open(l);
		l->on_pending = 0;
		return;
	}
	if (l->nby > 0 && l->by_depth[l->nby - 1] == l->depth && ends_by_list(w, n))
		l->nby--;
	l->by_pending = n == 5 && (word_is(w, n, "order") || word_is(w, n, "group"));
	l->on_pending = l->on_pending == 1 && word_is(w, n, "on") ? 2 :
			word_is(w, n, "distinct") ? 1 : 0;
}

/* Open a list at the current depth (its first item starts now). */
static void
by_open(struct norm_lex *l)
{
	if (l->nby == NORM_BY_MAX)
		l->by_all = true;
	else
		l->by_depth[l->nby++] = l->depth;
	l->after_list_start = true;
}

/* Punctuation <c> for the lists of by_track(). */
static void
by_punct(struct norm_lex *l, char c)
{
	bool on = l->on_pending == 2;

	l->by_pending = false;
	l->on_pending = 0;
	l->after_list_start = false;
	if (c == '(') {
		l->depth++;
		if (on)
			by_open(l);	/* DISTINCT ON (1, 2): positions */
	} else if (c == ')') {
		l->depth -= l->depth > 0;
		while (l->nby > 0 && l->by_depth[l->nby - 1] > l->depth)
			l->nby--;
	} else if (c == ';') {
		l->nby = 0;
		l->depth = 0;
	} else if (c == ',') {
		l->after_list_start = l->nby > 0 && l->by_depth[l->nby - 1] == l->depth;
	}
}

/* E'...' at l->pos holding no backslash: the value of '...' (what the router's own
 * statements write, whatever standard_conforming_strings is). */
static bool
plain_escape_string(const struct norm_lex *l)
{
	enum sql_item it;
	size_t end;

	if ((l->s[l->pos] | 0x20) != 'e' || l->s[l->pos + 1] != '\'')
		return false;
	end = sql_scan_item(l->s, l->pos, l->len, &it);
	return it != SQL_ITEM_NONE && memchr(l->s + l->pos, '\\', end - l->pos) == NULL;
}

/* An identifier or keyword; prefixed strings (B'', X'', N'', U&'', E'' with a backslash)
 * verbatim. */
static void
lex_word(struct norm_lex *l)
{
	const char *s = l->s;
	size_t start = l->pos;
	const char *e = s + start;

	if (plain_escape_string(l)) {
		lex_string(l, 1);
		l->prev_operand_end = true;
		l->after_list_start = false;
		return;
	}
	tok_begin(l);
	while (is_ident_char(*e))	/* (a local pointer: the loop stays in registers) */
		e++;
	l->pos = (size_t)(e - s);
	if (l->pos - start == 1 && (s[l->pos] == '\'' || s[l->pos] == '&')) {
		l->pos = start;
		if (copy_item(l)) {	/* E'', B'', X'', N'', U&'', U&"" */
			l->prev_operand_end = true;
			return;
		}
		l->pos = start + 1;
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

	if (is_digit(c) ||
	    (c == '.' && is_digit(s[l->pos + 1]))) {
		lex_number(l);
		l->prev_operand_end = true;
		l->after_list_start = false;
	} else if (c == '\'') {
		lex_string(l, 0);
		l->prev_operand_end = true;
		l->after_list_start = false;
	} else if (c == '"') {
		tok_begin(l);
		(void)copy_item(l);
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
		by_punct(l, c);
	}
	if (!was_minus)
		l->minus_out = SIZE_MAX;
}

/* Highest $n in <sql> outside identifiers (a quick pre-scan: literals are numbered after
 * it, so the key can be written in one pass; a $n inside a string only shifts numbers). */
static uint32_t
prescan_params(const char *sql)
{
	uint32_t max = 0;

	for (const char *p = strchr(sql, '$'); p; p = strchr(p + 1, '$')) {
		unsigned long n;

		if (!is_digit(p[1]) || (p > sql && is_ident_char(p[-1])))
			continue;
		n = strtoul(p + 1, NULL, 10);
		if (n > max && n < 65536)
			max = (uint32_t)n;
	}
	return max;
}


/* parse_normalize: see parse.h. */
bool
parse_normalize(struct rarena *a, const char *sql, struct parse_norm *out)
{
	struct norm_lex l;

	memset(&l, 0, sizeof(l));
	memset(out, 0, sizeof(*out));
	l.a = a;
	l.s = sql;
	l.len = strlen(sql);
	l.minus_out = SIZE_MAX;
	l.maxparam = prescan_params(sql);
	l.ocap = 2 * l.len + 32;	/* ($k for a one-digit literal: rarely more) */
	l.out = rarena_alloc(a, l.ocap);
	if (!l.out)
		return false;
	while (!l.oom) {
		if (skip_space(&l))
			l.pending_space = true;
		if (!sql[l.pos])
			break;
		lex_token(&l);
	}
	if (l.oom)
		return false;
	l.out[l.olen] = '\0';	/* (out_put() keeps room for it) */
	out->key = l.out;
	out->key_hash = nk_hash64(l.out, l.olen);
	out->nparams = l.maxparam;
	out->lits = l.lits;
	out->nlits = l.nlits;
	return true;
}
