/*
 * merge_arr.c - order of array values as Postgres' array_cmp gives it: element by element
 * (in storage order, whatever the dimensions) with the element type's order, a NULL element
 * above every value; on a tie the array with fewer elements first, then fewer dimensions,
 * then smaller dimension lengths, then smaller lower bounds. Text format ({...} with quoting
 * and backslash escapes, an optional [l:u]= prefix) and binary format.
 * Entry point: mv_cmp_array().
 */
#include "neki/base.h"

#include "merge_int.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define ARR_MAXDIM 6	/* Postgres' MAXDIM */

struct arr {
	uint32_t ndims;
	int64_t dims[ARR_MAXDIM], lb[ARR_MAXDIM];
	uint32_t n, cap;
	struct proto_value *e;	/* elements (p NULL: a NULL element) */
	uint8_t *scratch;	/* text: the unescaped element bytes */
};

static void
arr_free(struct arr *a)
{
	free(a->e);
	free(a->scratch);
}

static bool
arr_push(struct arr *a, const uint8_t *p, uint32_t len)
{
	if (a->n == a->cap) {
		uint32_t cap = a->cap ? a->cap * 2 : 16;
		struct proto_value *e = realloc(a->e, cap * sizeof(*e));

		if (!e)
			return false;
		a->e = e;
		a->cap = cap;
	}
	a->e[a->n].p = p;
	a->e[a->n++].len = p ? len : 0;
	return true;
}

static uint32_t
get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Binary: ndim, flags, element type, (length, lower bound) per dimension, then the elements
 * as (length or -1, bytes). */
static bool
arr_binary(struct arr *a, const struct proto_value *v)
{
	const uint8_t *p = v->p, *end = v->p + v->len;
	uint64_t total = 1;

	if (v->len < 12 || (a->ndims = get32(p)) > ARR_MAXDIM || v->len < 12 + 8 * a->ndims)
		return false;
	p += 12;
	for (uint32_t d = 0; d < a->ndims; d++, p += 8) {
		a->dims[d] = (int32_t)get32(p);
		a->lb[d] = (int32_t)get32(p + 4);
		if (a->dims[d] < 0 || (total *= (uint64_t)a->dims[d]) > v->len)
			return false;
	}
	for (uint64_t i = 0; a->ndims && i < total; i++) {
		int32_t len;

		if (end - p < 4)
			return false;
		len = (int32_t)get32(p);
		p += 4;
		if (len < -1 || (len > 0 && end - p < len))
			return false;
		if (!arr_push(a, len < 0 ? NULL : p, len < 0 ? 0 : (uint32_t)len))
			return false;
		p += len > 0 ? len : 0;
	}
	return p == end;
}

/* "[l:u][l:u]=": the lower bounds; *<pos> past the '='. */
static bool
arr_bounds(struct arr *a, const char *value, uint32_t len, uint32_t *pos)
{
	char s[8 + ARR_MAXDIM * 24];	/* a NUL-terminated copy for strtoll (the value is not) */
	uint32_t d = 0, i = 0;

	len = len < sizeof(s) - 1 ? len : (uint32_t)sizeof(s) - 1;
	memcpy(s, value, len);
	s[len] = '\0';
	while (i < len && s[i] == '[') {
		char *end;

		if (d == ARR_MAXDIM)
			return false;
		a->lb[d] = strtoll(s + i + 1, &end, 10);
		if (*end != ':')
			return false;
		(void)strtoll(end + 1, &end, 10);
		if (*end != ']')
			return false;
		i = (uint32_t)(end + 1 - s);
		d++;
	}
	if (d && (i >= len || s[i] != '='))
		return false;
	*pos = d ? i + 1 : 0;
	return true;
}

/* One element at s[*i] (quoted or not), unescaped into <out>; false when malformed. */
static bool
arr_elem(struct arr *a, const char *s, uint32_t len, uint32_t *i, uint8_t **out)
{
	uint8_t *start = *out;
	bool quoted = s[*i] == '"';

	if (quoted)
		(*i)++;
	while (*i < len) {
		char c = s[*i];

		if (quoted ? c == '"' : (c == ',' || c == '}'))
			break;
		if (c == '\\' && *i + 1 < len)
			c = s[++*i];
		*(*out)++ = (uint8_t)c;
		(*i)++;
	}
	if (quoted) {
		if (*i >= len)
			return false;
		(*i)++;
	}
	if (!quoted && *out - start == 4 && strncasecmp((char *)start, "NULL", 4) == 0)
		return arr_push(a, NULL, 0);
	return arr_push(a, start, (uint32_t)(*out - start));
}

/* Text: nested braces; the dimension lengths are the item counts of the first group at
 * each depth (Postgres prints rectangular arrays). */
static bool
arr_text(struct arr *a, const struct proto_value *v)
{
	const char *s = (const char *)v->p;
	uint32_t len = v->len, i, depth = 0;
	bool closed[ARR_MAXDIM] = { false }, item = false;
	uint8_t *out;

	for (uint32_t d = 0; d < ARR_MAXDIM; d++)
		a->lb[d] = 1;
	if (!arr_bounds(a, s, len, &i) || !(out = a->scratch = malloc(len ? len : 1)))
		return false;
	for (; i < len; i++) {
		if (s[i] == '{') {
			if (depth == ARR_MAXDIM)
				return false;
			if (!closed[depth] && depth >= a->ndims)
				a->ndims = depth + 1;
			depth++;
			item = false;
		} else if (s[i] == '}') {
			if (!depth)
				return false;
			depth--;
			if (!closed[depth] && item)
				a->dims[depth]++;
			closed[depth] = true;
			item = true;
		} else if (s[i] == ',') {
			if (!depth || !item)
				return false;
			if (!closed[depth - 1])
				a->dims[depth - 1]++;
			item = false;
		} else if (depth) {
			if (!arr_elem(a, s, len, &i, &out))
				return false;
			i--;
			item = true;
		} else {
			return false;
		}
	}
	if (depth || a->ndims == 0)
		return false;
	if (a->ndims == 1 && a->dims[0] == 0)
		a->ndims = 0;	/* {} */
	return true;
}

static bool
arr_parse(const struct mv_type *t, const struct proto_value *v, struct arr *a)
{
	return t->binary ? arr_binary(a, v) : arr_text(a, v);
}

static int
cmp_shape(const struct arr *x, const struct arr *y)
{
	if (x->n != y->n)
		return x->n < y->n ? -1 : 1;
	if (x->ndims != y->ndims)
		return x->ndims < y->ndims ? -1 : 1;
	for (uint32_t d = 0; d < x->ndims; d++)
		if (x->dims[d] != y->dims[d])
			return x->dims[d] < y->dims[d] ? -1 : 1;
	for (uint32_t d = 0; d < x->ndims; d++)
		if (x->lb[d] != y->lb[d])
			return x->lb[d] < y->lb[d] ? -1 : 1;
	return 0;
}

/* mv_cmp_array: see merge_int.h. */
bool
mv_cmp_array(const struct mv_type *t, const struct proto_value *a, const struct proto_value *b,
	     int *out, struct nk_error *err)
{
	struct mv_type et = { .oid = mv_elem_of(t->oid), .binary = t->binary, .loc = t->loc };
	struct arr x, y;
	bool ok;

	memset(&x, 0, sizeof(x));
	memset(&y, 0, sizeof(y));
	et.kind = mv_kind_of(et.oid);
	ok = arr_parse(t, a, &x) && arr_parse(t, b, &y);
	if (!ok) {
		arr_free(&x);
		arr_free(&y);
		return nk_error_set(err, ERRCODE_INTERNAL_ERROR,
				    "cannot merge a result value of type %u: "
				    "unexpected %s form", t->oid, t->binary ? "binary" : "text");
	}
	*out = 0;
	for (uint32_t i = 0; ok && *out == 0 && i < x.n && i < y.n; i++) {
		const struct proto_value *p = &x.e[i], *q = &y.e[i];

		if (!p->p || !q->p)
			*out = !p->p && !q->p ? 0 : !p->p ? 1 : -1;
		else
			ok = mv_cmp(&et, p, q, out, err);	/* (it sets <err>) */
	}
	if (ok && *out == 0)
		*out = cmp_shape(&x, &y);
	arr_free(&x);
	arr_free(&y);
	return ok;
}
