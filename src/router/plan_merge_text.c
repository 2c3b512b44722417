/*
 * plan_merge_text.c - the token view of a SELECT's text that plan_merge.c splices: a small
 * scanner (quoted strings and identifiers, dollar quotes and comments through
 * neki/sqlscan.h; parentheses), the top-level clause positions and
 * the spans of list items and function calls starting at a parse-tree location.
 */
#include "neki/base.h"

#include "neki/sqlscan.h"
#include "plan_merge_int.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

/* Past whitespace and comments (as neki/sqlscan.h reads them) from <i>. */
static uint32_t
skip_space(const char *s, uint32_t i, uint32_t n)
{
	for (;;) {
		enum sql_item it;
		size_t e;

		while (i < n && isspace((unsigned char)s[i]))
			i++;
		e = sql_scan_item(s, i, n, &it);
		if (it != SQL_ITEM_COMMENT)
			return i;
		i = (uint32_t)e;
	}
}

static bool
word_char(char c)
{
	return isalnum((unsigned char)c) || c == '_' || c == '$' || (unsigned char)c >= 0x80;
}

/* One token at <i>; returns its end and kind. */
static uint32_t
scan_one(const char *s, uint32_t i, uint32_t n, char *kind)
{
	enum sql_item it;
	uint32_t e = (uint32_t)sql_scan_item(s, i, n, &it);
	char c = s[i];

	if (it != SQL_ITEM_NONE) {	/* (no comment: skip_space went past them) */
		*kind = it == SQL_ITEM_QUOTED_IDENT ? 'q' : 's';
		return e;
	}
	if (c == '$' && i + 1 < n && isdigit((unsigned char)s[i + 1])) {
		for (e = i + 1; e < n && isdigit((unsigned char)s[e]); e++)
			;
		*kind = 'p';
		return e;
	}
	if (word_char(c) || c == '.') {
		bool num = isdigit((unsigned char)c) || c == '.';

		for (e = i + 1; e < n && (word_char(s[e]) || (num && s[e] == '.')); e++)
			;
		*kind = num ? 'n' : 'w';
		return e;
	}
	*kind = 'o';
	return i + 1;
}

/* pm_scan: see plan_merge_int.h. */
bool
pm_scan(struct pm *p)
{
	const char *s = p->sql;
	uint32_t n = (uint32_t)strlen(s), i = 0, cap = 64;
	int depth = 0;

	p->toks = rarena_alloc(p->a, cap * sizeof(*p->toks));
	if (!p->toks)
		return false;
	for (;;) {
		i = skip_space(s, i, n);
		if (i >= n)
			break;
		if (p->ntoks == cap) {
			struct pm_tok *t = rarena_alloc(p->a, 2 * cap * sizeof(*t));

			if (!t)
				return false;
			memcpy(t, p->toks, cap * sizeof(*t));
			p->toks = t;
			cap *= 2;
		}
		struct pm_tok *t = &p->toks[p->ntoks++];

		t->start = i;
		i = scan_one(s, i, n, &t->kind);
		t->end = i;
		if (t->kind == 'o' && (s[t->start] == ')' || s[t->start] == ']'))
			depth--;
		t->depth = depth;
		if (t->kind == 'o' && (s[t->start] == '(' || s[t->start] == '['))
			depth++;
	}
	return true;
}

/* pm_is: see plan_merge_int.h. */
bool
pm_is(const struct pm *p, uint32_t t, const char *word)
{
	size_t len = strlen(word);

	if (t >= p->ntoks)
		return false;
	if (p->toks[t].kind == 'o')
		return p->toks[t].end - p->toks[t].start == len && p->sql[p->toks[t].start] == word[0];
	return p->toks[t].kind == 'w' && p->toks[t].end - p->toks[t].start == len &&
	       strncasecmp(p->sql + p->toks[t].start, word, len) == 0;
}

/* pm_tok_at: see plan_merge_int.h. */
uint32_t
pm_tok_at(const struct pm *p, uint32_t offset)
{
	for (uint32_t t = 0; t < p->ntoks; t++)
		if (p->toks[t].start >= offset)
			return t;
	return p->ntoks;
}

/* Token after the parenthesised group opening at <t>. */
static uint32_t
after_group(const struct pm *p, uint32_t t)
{
	int d = p->toks[t].depth;

	for (t++; t < p->ntoks; t++)
		if (pm_is(p, t, ")") && p->toks[t].depth == d)
			return t + 1;
	return p->ntoks;
}

/* pm_call_end: see plan_merge_int.h. */
uint32_t
pm_call_end(const struct pm *p, uint32_t t, uint32_t *open)
{
	while (t < p->ntoks && !pm_is(p, t, "("))
		t++;
	*open = t;
	if (t >= p->ntoks)
		return t;
	t = after_group(p, t);
	if (pm_is(p, t, "filter") && pm_is(p, t + 1, "("))
		t = after_group(p, t + 1);
	return t;
}

/* pm_clauses: see plan_merge_int.h. */
void
pm_clauses(struct pm *p, uint32_t from, int depth)
{
	static const char *const words[PM_CL_COUNT] = {
		"from", "where", "group", "having", "window", "order", "limit", "offset",
		"fetch", "for",
	};

	for (int c = 0; c < PM_CL_COUNT; c++)
		p->cl[c] = p->ntoks;
	for (uint32_t t = from; t < p->ntoks; t++) {
		if (p->toks[t].depth != depth)
			continue;
		if (pm_is(p, t, "union") || pm_is(p, t, "intersect") || pm_is(p, t, "except")) {
			for (int c = 0; c < PM_CL_COUNT; c++)
				p->cl[c] = p->ntoks;
			continue;
		}
		for (int c = 0; c < PM_CL_COUNT; c++)
			if (pm_is(p, t, words[c]) && p->cl[c] == p->ntoks &&
			    !(t > 0 && (pm_is(p, t - 1, "within") || pm_is(p, t - 1, "distinct"))))
				p->cl[c] = t;
	}
}

/* pm_clause_end: see plan_merge_int.h. */
uint32_t
pm_clause_end(const struct pm *p, int c)
{
	uint32_t end = p->end_tok;

	for (int k = c + 1; k < PM_CL_COUNT; k++)
		if (p->cl[k] < end && p->cl[k] > p->cl[c])
			end = p->cl[k];
	return end;
}

/* pm_split: see plan_merge_int.h. */
uint32_t
pm_split(const struct pm *p, uint32_t from, uint32_t to, struct pm_span *out, uint32_t max)
{
	uint32_t n = 0, start = from;

	if (from >= to)
		return 0;
	for (uint32_t t = from; t <= to; t++) {
		if (t < to && !(pm_is(p, t, ",") && p->toks[t].depth == p->toks[from].depth))
			continue;
		if (n < max) {
			out[n].first = start;
			out[n].last = t;
		}
		n++;
		start = t + 1;
	}
	return n;
}

/* pm_text: see plan_merge_int.h. */
const char *
pm_text(struct pm *p, uint32_t first, uint32_t last)
{
	if (first >= last)
		return "";
	return rarena_strndup(p->a, p->sql + p->toks[first].start,
			      p->toks[last - 1].end - p->toks[first].start);
}
