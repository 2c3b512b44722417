/*
 * call.c - recognise calls of the __neki functions in a simple-protocol query.
 *
 * The console and the main port's sharded databases accept
 *     SELECT * FROM __neki.fn(args) ;     SELECT a, b FROM __neki.fn(args)
 *     SELECT __neki.fn(args)
 * where each argument is a literal (string in any of Postgres' quoting forms, number,
 * boolean, NULL) with optional ::casts and optional `name =>` notation. This is a small
 * hand-written scanner, not the Postgres grammar: anything else that starts like a __neki
 * call is a syntax error naming the token, everything else is "not a __neki call".
 * Entry points: adm_call_parse(), adm_call_cleanup(), adm_parse_interval().
 */
#include "neki/base.h"

#include "admin_int.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct scan {
	const char *p;			/* borrowed: the next unread character */
	struct nk_error *err;		/* borrowed */
};

/* Skip white space and comments (-- to end of line, nested block comments). */
static void
skip_space(struct scan *s)
{
	for (;;) {
		while (isspace((unsigned char)*s->p))
			s->p++;
		if (s->p[0] == '-' && s->p[1] == '-') {
			while (*s->p && *s->p != '\n')
				s->p++;
		} else if (s->p[0] == '/' && s->p[1] == '*') {
			int depth = 0;

			do {
				if (s->p[0] == '/' && s->p[1] == '*')
					depth++, s->p++;
				else if (s->p[0] == '*' && s->p[1] == '/')
					depth--, s->p++;
				if (*s->p)
					s->p++;
			} while (*s->p && depth > 0);
		} else {
			return;
		}
	}
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

/* Fail with a syntax error at the current token. */
static bool
syntax_error(struct scan *s)
{
	char tok[32];
	size_t n = 0;

	while (s->p[n] && !isspace((unsigned char)s->p[n]) && n < sizeof(tok) - 1)
		n++;
	memcpy(tok, s->p, n);
	tok[n] = '\0';
	if (n == 0)
		return nk_error_set(s->err, ERRCODE_SYNTAX_ERROR, "syntax error at end of input");
	return nk_error_set(s->err, ERRCODE_SYNTAX_ERROR, "syntax error at or near \"%s\"", tok);
}

/*
 * Read an identifier (plain, lowercased, or "quoted" kept as is) into <out>. Returns
 * false (no error set) when there is none.
 */
static bool
read_ident(struct scan *s, char out[ADM_NAME_MAX])
{
	size_t n = 0;

	skip_space(s);
	if (*s->p == '"') {
		const char *q = s->p + 1;

		while (*q && !(q[0] == '"' && q[1] != '"')) {
			if (q[0] == '"')
				q++;
			if (n < ADM_NAME_MAX - 1)
				out[n++] = *q;
			q++;
		}
		if (*q != '"')
			return false;
		s->p = q + 1;
	} else if (is_ident_start(*s->p)) {
		while (is_ident_char(*s->p)) {
			if (n < ADM_NAME_MAX - 1)
				out[n++] = (char)tolower((unsigned char)*s->p);
			s->p++;
		}
	} else {
		return false;
	}
	out[n] = '\0';
	return true;
}

/* Consume keyword <kw> (case-insensitive, whole word) if it comes next. */
static bool
accept_kw(struct scan *s, const char *kw)
{
	size_t n = strlen(kw);

	skip_space(s);
	if (strncasecmp(s->p, kw, n) != 0 || is_ident_char(s->p[n]))
		return false;
	s->p += n;
	return true;
}

/* Consume the punctuation <tok> if it comes next. */
static bool
accept_tok(struct scan *s, const char *tok)
{
	size_t n = strlen(tok);

	skip_space(s);
	if (strncmp(s->p, tok, n) != 0)
		return false;
	s->p += n;
	return true;
}

/* Append byte <c> to a malloc'd string being built. */
static bool
buf_put(char **buf, size_t *len, size_t *cap, char c)
{
	if (*len + 2 > *cap) {
		size_t ncap = *cap ? *cap * 2 : 64;
		char *nb = realloc(*buf, ncap);

		if (nb == NULL)
			return false;
		*buf = nb;
		*cap = ncap;
	}
	(*buf)[(*len)++] = c;
	(*buf)[*len] = '\0';
	return true;
}

/* Append code point <cp> as UTF-8. */
static bool
buf_put_utf8(char **buf, size_t *len, size_t *cap, unsigned long cp)
{
	if (cp < 0x80)
		return buf_put(buf, len, cap, (char)cp);
	if (cp < 0x800)
		return buf_put(buf, len, cap, (char)(0xc0 | (cp >> 6))) &&
		       buf_put(buf, len, cap, (char)(0x80 | (cp & 0x3f)));
	if (cp < 0x10000)
		return buf_put(buf, len, cap, (char)(0xe0 | (cp >> 12))) &&
		       buf_put(buf, len, cap, (char)(0x80 | ((cp >> 6) & 0x3f))) &&
		       buf_put(buf, len, cap, (char)(0x80 | (cp & 0x3f)));
	return buf_put(buf, len, cap, (char)(0xf0 | (cp >> 18))) &&
	       buf_put(buf, len, cap, (char)(0x80 | ((cp >> 12) & 0x3f))) &&
	       buf_put(buf, len, cap, (char)(0x80 | ((cp >> 6) & 0x3f))) &&
	       buf_put(buf, len, cap, (char)(0x80 | (cp & 0x3f)));
}

/* One backslash escape of an E'' string at s->p (after the backslash). */
static bool
read_escape(struct scan *s, char **buf, size_t *len, size_t *cap)
{
	char c = *s->p++;
	unsigned long cp = 0;
	int ndig = 0, max = 0;

	switch (c) {
	case 'n': return buf_put(buf, len, cap, '\n');
	case 't': return buf_put(buf, len, cap, '\t');
	case 'r': return buf_put(buf, len, cap, '\r');
	case 'b': return buf_put(buf, len, cap, '\b');
	case 'f': return buf_put(buf, len, cap, '\f');
	case 'x': max = 2; break;
	case 'u': max = 4; break;
	case 'U': max = 8; break;
	default:
		if (c >= '0' && c <= '7') {
			cp = (unsigned long)(c - '0');
			for (ndig = 1; ndig < 3 && *s->p >= '0' && *s->p <= '7'; ndig++)
				cp = cp * 8 + (unsigned long)(*s->p++ - '0');
			return buf_put(buf, len, cap, (char)cp);
		}
		return buf_put(buf, len, cap, c);
	}
	while (ndig < max && isxdigit((unsigned char)*s->p)) {
		char h = *s->p++;

		cp = cp * 16 + (unsigned long)(isdigit((unsigned char)h) ? h - '0' :
					       tolower((unsigned char)h) - 'a' + 10);
		ndig++;
	}
	if (ndig == 0)
		return false;
	return c == 'x' ? buf_put(buf, len, cap, (char)cp) : buf_put_utf8(buf, len, cap, cp);
}

/* A quoted string starting at s->p ('), with '' doubling; E'' strings also take escapes. */
static bool
read_quoted(struct scan *s, bool escapes, char **out)
{
	size_t len = 0, cap = 0;

	*out = NULL;
	if (!buf_put(out, &len, &cap, '\0'))
		return nk_error_oom(s->err);
	len = 0;
	s->p++;
	for (;;) {
		if (*s->p == '\0')
			return nk_error_set(s->err, ERRCODE_SYNTAX_ERROR,
					    "unterminated quoted string");
		if (s->p[0] == '\'' && s->p[1] == '\'') {
			s->p += 2;
			if (!buf_put(out, &len, &cap, '\''))
				return nk_error_oom(s->err);
		} else if (s->p[0] == '\'') {
			s->p++;
			skip_space(s);
			if (*s->p != '\'')	/* 'a' 'b' on separate lines would continue */
				return true;
		} else if (escapes && s->p[0] == '\\') {
			s->p++;
			if (!read_escape(s, out, &len, &cap))
				return nk_error_set(s->err, ERRCODE_INVALID_ESCAPE_SEQUENCE,
						    "invalid Unicode escape");
		} else if (!buf_put(out, &len, &cap, *s->p++)) {
			return nk_error_oom(s->err);
		}
	}
}

/* A dollar-quoted string $tag$...$tag$ starting at s->p. */
static bool
read_dollar(struct scan *s, char **out)
{
	const char *tag_end = strchr(s->p + 1, '$');
	size_t tag_len;
	const char *body, *close;

	if (tag_end == NULL)
		return syntax_error(s);
	tag_len = (size_t)(tag_end - s->p) + 1;
	for (const char *q = s->p + 1; q < tag_end; q++)
		if (!is_ident_char(*q) || *q == '$')
			return syntax_error(s);
	body = tag_end + 1;
	for (close = body; (close = strchr(close, '$')) != NULL; close++)
		if (strncmp(close, s->p, tag_len) == 0)
			break;
	if (close == NULL)
		return nk_error_set(s->err, ERRCODE_SYNTAX_ERROR,
				    "unterminated dollar-quoted string");
	*out = strndup(body, (size_t)(close - body));
	if (*out == NULL)
		return nk_error_oom(s->err);
	s->p = close + tag_len;
	return true;
}

/* A numeric literal with optional sign, digits, fraction and exponent. */
static bool
read_number(struct scan *s, char **out)
{
	const char *start = s->p;
	bool digits = false;

	if (*s->p == '-' || *s->p == '+')
		s->p++;
	skip_space(s);
	while (isdigit((unsigned char)*s->p) || *s->p == '.' || *s->p == '_') {
		digits |= isdigit((unsigned char)*s->p) != 0;
		s->p++;
	}
	if (digits && (*s->p == 'e' || *s->p == 'E')) {
		s->p++;
		if (*s->p == '-' || *s->p == '+')
			s->p++;
		while (isdigit((unsigned char)*s->p))
			s->p++;
	}
	if (!digits) {
		s->p = start;
		return syntax_error(s);
	}
	*out = strndup(start, (size_t)(s->p - start));
	if (*out == NULL)
		return nk_error_oom(s->err);
	/* drop spaces between a sign and the digits, and digit separators */
	for (char *r = *out, *w = *out;; r++)
		if (!isspace((unsigned char)*r) && *r != '_' && (*w++ = *r) == '\0')
			break;
	return true;
}

/* The value of one argument (before its casts). */
static bool
read_value(struct scan *s, struct adm_arg *a)
{
	bool is_true;

	skip_space(s);
	if (*s->p == '\'') {
		a->kind = ADM_ARG_STRING;
		return read_quoted(s, false, &a->text);
	}
	if ((*s->p == 'E' || *s->p == 'e') && s->p[1] == '\'') {
		a->kind = ADM_ARG_STRING;
		s->p++;
		return read_quoted(s, true, &a->text);
	}
	if (*s->p == '$') {
		a->kind = ADM_ARG_STRING;
		return read_dollar(s, &a->text);
	}
	if (accept_kw(s, "null")) {
		a->kind = ADM_ARG_NULL;
		return true;
	}
	is_true = accept_kw(s, "true");
	if (is_true || accept_kw(s, "false")) {
		a->kind = ADM_ARG_BOOL;
		a->text = strdup(is_true ? "true" : "false");
		return a->text ? true : nk_error_oom(s->err);
	}
	if (*s->p == '(') {
		s->p++;
		if (!read_value(s, a))
			return false;
		return accept_tok(s, ")") ? true : syntax_error(s);
	}
	a->kind = ADM_ARG_NUMBER;
	return read_number(s, &a->text);
}

/* `::type`, where type may be several words (double precision) and take a (n). */
static bool
read_casts(struct scan *s, struct adm_arg *a)
{
	while (accept_tok(s, "::")) {
		char word[ADM_NAME_MAX];
		size_t n = 0;

		if (!read_ident(s, word))
			return syntax_error(s);
		a->cast[0] = '\0';
		do {
			n += (size_t)snprintf(a->cast + n, sizeof(a->cast) - n, "%s%s",
					      n ? " " : "", word);
			if (n >= sizeof(a->cast))
				n = sizeof(a->cast) - 1;
			skip_space(s);
		} while (is_ident_start(*s->p) && read_ident(s, word));
		if (accept_tok(s, "(")) {
			while (*s->p && *s->p != ')')
				s->p++;
			if (!accept_tok(s, ")"))
				return syntax_error(s);
		}
		if (accept_tok(s, "[")) {
			if (!accept_tok(s, "]"))
				return syntax_error(s);
		}
	}
	return true;
}

/* One argument: [name =>] value casts. */
static bool
read_arg(struct scan *s, struct adm_arg *a)
{
	const char *save = s->p;
	char name[ADM_NAME_MAX];

	if (read_ident(s, name) && (accept_tok(s, "=>") || accept_tok(s, ":="))) {
		snprintf(a->name, sizeof(a->name), "%s", name);
	} else {
		s->p = save;
	}
	return read_value(s, a) && read_casts(s, a);
}

/* The argument list after the function name: ( [arg {, arg}] ). */
static bool
read_args(struct scan *s, struct adm_call *call)
{
	if (!accept_tok(s, "("))
		return syntax_error(s);
	if (accept_tok(s, ")"))
		return true;
	do {
		if (call->nargs == ADM_CALL_MAX_ARGS)
			return nk_error_set(s->err, ERRCODE_TOO_MANY_ARGUMENTS,
					    "too many arguments");
		if (!read_arg(s, &call->args[call->nargs++]))
			return false;
	} while (accept_tok(s, ","));
	return accept_tok(s, ")") ? true : syntax_error(s);
}

/* `__neki` `.` fn: true when the schema is __neki (then fn is read). */
static bool
read_neki_name(struct scan *s, struct adm_call *call, bool *is_neki)
{
	char schema[ADM_NAME_MAX];
	const char *save = s->p;

	*is_neki = false;
	if (!read_ident(s, schema) || strcmp(schema, "__neki") != 0 || !accept_tok(s, ".")) {
		s->p = save;
		return true;
	}
	*is_neki = true;
	return read_ident(s, call->fn) ? true : syntax_error(s);
}

/* After SELECT: "* FROM", "cols FROM", or nothing (the call itself is the target). */
static void
read_targets(struct scan *s, struct adm_call *call)
{
	const char *save = s->p;

	if (accept_tok(s, "*")) {
		snprintf(call->cols[0], ADM_NAME_MAX, "*");
		call->ncols = 1;
	} else {
		do {
			if (call->ncols == ADM_CALL_MAX_ARGS || !read_ident(s, call->cols[call->ncols]))
				goto not_from;
			call->ncols++;
		} while (accept_tok(s, ","));
	}
	if (accept_kw(s, "from")) {
		call->from_form = true;
		return;
	}
not_from:
	s->p = save;
	call->ncols = 0;
}

enum adm_call_parse_result
adm_call_parse(const char *sql, struct adm_call *call, struct nk_error *err)
{
	struct scan s = { .p = sql, .err = err };
	bool is_neki;

	memset(call, 0, sizeof(*call));
	if (!accept_kw(&s, "select"))
		return ADM_CALL_NOT_NEKI;
	read_targets(&s, call);
	if (!read_neki_name(&s, call, &is_neki))
		goto fail;
	if (!is_neki) {
		adm_call_cleanup(call);
		return ADM_CALL_NOT_NEKI;
	}
	if (!read_args(&s, call))
		goto fail;
	if (call->from_form && (accept_kw(&s, "as") || is_ident_start((skip_space(&s), *s.p)))) {
		char alias[ADM_NAME_MAX];

		if (!read_ident(&s, alias)) {
			syntax_error(&s);
			goto fail;
		}
	}
	accept_tok(&s, ";");
	skip_space(&s);
	if (*s.p != '\0') {
		syntax_error(&s);
		goto fail;
	}
	return ADM_CALL_OK;
fail:
	adm_call_cleanup(call);
	return ADM_CALL_ERROR;
}

void
adm_call_cleanup(struct adm_call *call)
{
	for (size_t i = 0; i < ADM_CALL_MAX_ARGS; i++) {
		free(call->args[i].text);
		call->args[i].text = NULL;
	}
	call->nargs = 0;
}

/* Seconds per unit named <u> (plural and abbreviated forms), or 0 when unknown. */
static double
unit_seconds(const char *u, size_t n)
{
	static const struct { const char *name; double secs; } units[] = {
		{ "us", 1e-6 }, { "usec", 1e-6 }, { "usecs", 1e-6 }, { "microsecond", 1e-6 },
		{ "microseconds", 1e-6 }, { "ms", 1e-3 }, { "msec", 1e-3 }, { "msecs", 1e-3 },
		{ "millisecond", 1e-3 }, { "milliseconds", 1e-3 }, { "s", 1 }, { "sec", 1 },
		{ "secs", 1 }, { "second", 1 }, { "seconds", 1 }, { "m", 60 }, { "min", 60 },
		{ "mins", 60 }, { "minute", 60 }, { "minutes", 60 }, { "h", 3600 },
		{ "hour", 3600 }, { "hours", 3600 }, { "d", 86400 }, { "day", 86400 },
		{ "days", 86400 },
	};

	for (size_t i = 0; i < NK_ARRAY_LEN(units); i++)
		if (strlen(units[i].name) == n && strncasecmp(units[i].name, u, n) == 0)
			return units[i].secs;
	return 0;
}

bool
adm_parse_interval(const char *text, double *seconds)
{
	const char *p = text;
	double total = 0;
	bool any = false;
	unsigned h, m;
	double sec;
	int used = 0;

	if (sscanf(text, " %u:%u:%lf %n", &h, &m, &sec, &used) == 3 && text[used] == '\0') {
		*seconds = h * 3600.0 + m * 60.0 + sec;
		return true;
	}
	while (*p) {
		char *end;
		double v = strtod(p, &end);
		const char *u;
		double mult = 1;

		if (end == p)
			return false;
		for (p = end; isspace((unsigned char)*p); p++)
			;
		for (u = p; isalpha((unsigned char)*p); p++)
			;
		if (p > u && (mult = unit_seconds(u, (size_t)(p - u))) == 0)
			return false;
		total += v * mult;
		any = true;
		while (isspace((unsigned char)*p))
			p++;
	}
	if (!any || total < 0)
		return false;
	*seconds = total;
	return true;
}
