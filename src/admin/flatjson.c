/*
 * flatjson.c - the small JSON objects the admin reads and writes itself: the `options`
 * argument of set_data_topology ({"comment": ..., "expected_revision": 3, "force": true})
 * and the wrapper of the topology cache file. Topology documents are read by src/topology
 * (cJSON); here only one object of scalar members is understood, nested members are kept
 * as verbatim text. Entry points: adm_json_parse(), adm_json_get(), adm_json_put_string().
 */
#include "neki/base.h"

#include "admin_int.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct jscan {
	const char *p;			/* borrowed: next character */
};

static void
js_space(struct jscan *s)
{
	while (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r')
		s->p++;
}

static bool
js_grow(char **buf, size_t *len, size_t *cap, size_t more)
{
	if (*len + more + 1 > *cap) {
		size_t ncap = *cap ? *cap : 64;
		char *nb;

		while (*len + more + 1 > ncap)
			ncap *= 2;
		if ((nb = realloc(*buf, ncap)) == NULL)
			return false;
		*buf = nb;
		*cap = ncap;
	}
	return true;
}

static bool
js_put(char **buf, size_t *len, size_t *cap, const char *p, size_t n)
{
	if (!js_grow(buf, len, cap, n))
		return false;
	memcpy(*buf + *len, p, n);
	*len += n;
	(*buf)[*len] = '\0';
	return true;
}

/* Four hex digits at <p> into <out>. */
static bool
js_hex4(const char *p, unsigned *out)
{
	*out = 0;
	for (int i = 0; i < 4; i++) {
		if (!isxdigit((unsigned char)p[i]))
			return false;
		*out = *out * 16 + (unsigned)(isdigit((unsigned char)p[i]) ? p[i] - '0' :
					      tolower((unsigned char)p[i]) - 'a' + 10);
	}
	return true;
}

/* Encode <cp> as UTF-8 into <out>; returns the byte count. */
static size_t
js_utf8(unsigned long cp, char out[4])
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xc0 | (cp >> 6));
		out[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xe0 | (cp >> 12));
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		out[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | (cp >> 18));
	out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	out[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* A \u escape (with a surrogate pair when needed) at s->p (after "\u"). */
static bool
js_unicode(struct jscan *s, char **out, size_t *len, size_t *cap)
{
	unsigned hi, lo;
	unsigned long cp;
	char u[4];

	if (!js_hex4(s->p, &hi))
		return false;
	s->p += 4;
	cp = hi;
	if (hi >= 0xd800 && hi <= 0xdbff) {
		if (s->p[0] != '\\' || s->p[1] != 'u' || !js_hex4(s->p + 2, &lo) ||
		    lo < 0xdc00 || lo > 0xdfff)
			return false;
		s->p += 6;
		cp = 0x10000 + (((unsigned long)hi - 0xd800) << 10) + (lo - 0xdc00);
	}
	return js_put(out, len, cap, u, js_utf8(cp, u));
}

/* A JSON string at s->p (the opening quote) into a new malloc'd <out>. */
static bool
js_string(struct jscan *s, char **out)
{
	static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
	size_t len = 0, cap = 0;

	*out = NULL;
	if (*s->p++ != '"' || !js_put(out, &len, &cap, "", 0))
		return false;
	while (*s->p != '"') {
		const char *e;

		if ((unsigned char)*s->p < 0x20)
			return false;
		if (*s->p != '\\') {
			if (!js_put(out, &len, &cap, s->p++, 1))
				return false;
			continue;
		}
		s->p++;
		if (*s->p == 'u') {
			s->p++;
			if (!js_unicode(s, out, &len, &cap))
				return false;
		} else if (*s->p != '\0' && (e = strchr(from, *s->p)) != NULL) {
			if (!js_put(out, &len, &cap, &to[e - from], 1))
				return false;
			s->p++;
		} else {
			return false;
		}
	}
	s->p++;
	return true;
}

/* Skip a nested object or array (strings inside may hold brackets). */
static bool
js_skip_nested(struct jscan *s)
{
	int depth = 0;

	do {
		if (*s->p == '"') {
			char *tmp;

			if (!js_string(s, &tmp)) {
				free(tmp);
				return false;
			}
			free(tmp);
			continue;
		}
		if (*s->p == '{' || *s->p == '[')
			depth++;
		else if (*s->p == '}' || *s->p == ']')
			depth--;
		else if (*s->p == '\0')
			return false;
		s->p++;
	} while (depth > 0);
	return true;
}

/* A scalar or nested value into member <m>. */
static bool
js_value(struct jscan *s, struct adm_json_member *m)
{
	const char *start = s->p;
	static const struct { const char *word; enum adm_json_kind kind; } words[] = {
		{ "true", ADM_JSON_BOOL }, { "false", ADM_JSON_BOOL }, { "null", ADM_JSON_NULL },
	};

	if (*s->p == '"') {
		m->kind = ADM_JSON_STRING;
		return js_string(s, &m->text);
	}
	if (*s->p == '{' || *s->p == '[') {
		m->kind = ADM_JSON_NESTED;
		if (!js_skip_nested(s))
			return false;
		return (m->text = strndup(start, (size_t)(s->p - start))) != NULL;
	}
	for (size_t i = 0; i < NK_ARRAY_LEN(words); i++) {
		size_t n = strlen(words[i].word);

		if (strncmp(s->p, words[i].word, n) == 0) {
			s->p += n;
			m->kind = words[i].kind;
			return m->kind == ADM_JSON_NULL || (m->text = strdup(words[i].word)) != NULL;
		}
	}
	if (*s->p == '-')
		s->p++;
	if (!isdigit((unsigned char)*s->p))
		return false;
	while (isdigit((unsigned char)*s->p) || strchr(".eE+-", *s->p) != NULL)
		s->p++;
	m->kind = ADM_JSON_NUMBER;
	return (m->text = strndup(start, (size_t)(s->p - start))) != NULL;
}

/* The members of the object after '{'. */
static bool
js_members(struct jscan *s, struct adm_json_obj *obj)
{
	js_space(s);
	if (*s->p == '}') {
		s->p++;
		return true;
	}
	for (;;) {
		struct adm_json_member *m;

		if (obj->n == ADM_JSON_MAX_KEYS)
			return false;
		m = &obj->m[obj->n++];
		js_space(s);
		if (*s->p != '"' || !js_string(s, &m->key))
			return false;
		js_space(s);
		if (*s->p++ != ':')
			return false;
		js_space(s);
		if (!js_value(s, m))
			return false;
		js_space(s);
		if (*s->p == '}') {
			s->p++;
			return true;
		}
		if (*s->p++ != ',')
			return false;
	}
}

bool
adm_json_parse(const char *text, struct adm_json_obj *obj, struct nk_error *err)
{
	struct jscan s = { .p = text };

	memset(obj, 0, sizeof(*obj));
	js_space(&s);
	if (*s.p == '{') {
		s.p++;
		if (js_members(&s, obj)) {
			js_space(&s);
			if (*s.p == '\0')
				return true;
		}
	}
	adm_json_cleanup(obj);
	return nk_error_set(err, ERRCODE_INVALID_TEXT_REPRESENTATION,
			    "invalid input syntax for type json");
}

void
adm_json_cleanup(struct adm_json_obj *obj)
{
	for (size_t i = 0; i < obj->n; i++) {
		free(obj->m[i].key);
		free(obj->m[i].text);
	}
	memset(obj, 0, sizeof(*obj));
}

const struct adm_json_member *
adm_json_get(const struct adm_json_obj *obj, const char *key)
{
	for (size_t i = 0; i < obj->n; i++)
		if (obj->m[i].key != NULL && strcmp(obj->m[i].key, key) == 0)
			return &obj->m[i];
	return NULL;
}

bool
adm_json_put_string(char **out, size_t *len, size_t *cap, const char *s)
{
	if (!js_put(out, len, cap, "\"", 1))
		return false;
	for (; *s; s++) {
		char esc[8];
		size_t n = 0;

		switch (*s) {
		case '"': n = (size_t)snprintf(esc, sizeof(esc), "\\\""); break;
		case '\\': n = (size_t)snprintf(esc, sizeof(esc), "\\\\"); break;
		case '\n': n = (size_t)snprintf(esc, sizeof(esc), "\\n"); break;
		case '\r': n = (size_t)snprintf(esc, sizeof(esc), "\\r"); break;
		case '\t': n = (size_t)snprintf(esc, sizeof(esc), "\\t"); break;
		default:
			if ((unsigned char)*s < 0x20)
				n = (size_t)snprintf(esc, sizeof(esc), "\\u%04x", (unsigned)*s);
		}
		if (!(n ? js_put(out, len, cap, esc, n) : js_put(out, len, cap, s, 1)))
			return false;
	}
	return js_put(out, len, cap, "\"", 1);
}

bool
adm_json_put_raw(char **out, size_t *len, size_t *cap, const char *s)
{
	return js_put(out, len, cap, s, strlen(s));
}
