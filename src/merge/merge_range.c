/*
 * merge_range.c - order of range values as range_cmp gives it, text or binary format: an
 * empty range before every other; then the lower bounds, then the upper bounds, each as
 * range_cmp_bounds orders them (an infinite lower bound first, an infinite upper bound last;
 * on equal values an exclusive lower bound after an inclusive one, an exclusive upper bound
 * before an inclusive one), the bound values by the subtype's own order (mv_cmp()).
 * Discrete ranges (int4range, int8range, daterange) come canonical ('[)') from Postgres.
 * Entry points: mv_cmp_range(), mv_range_subtype().
 */
#include "neki/base.h"

#include "merge_int.h"

#include <string.h>

#define RANGE_TEXT_MAX 256	/* bytes of one unquoted bound of a text range */

/* One bound: infinite, or a value (in <buf> for text, in the message for binary). */
struct rbound {
	bool infinite, inclusive;
	struct proto_value v;
	char buf[RANGE_TEXT_MAX];
};

struct rval {
	bool empty;
	struct rbound lo, hi;
};

static const struct {
	uint32_t range, subtype;
} range_types[] = {
	{ 3904, 23 }, { 3926, 20 }, { 3906, 1700 }, { 3912, 1082 }, { 3908, 1114 }, { 3910, 1184 },
};

/* mv_range_subtype: see merge_int.h. */
uint32_t
mv_range_subtype(uint32_t oid)
{
	for (size_t i = 0; i < NK_ARRAY_LEN(range_types); i++)
		if (range_types[i].range == oid)
			return range_types[i].subtype;
	return 0;
}

static uint32_t
get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* range_send: flags byte, then each finite bound as int4 length and the subtype's bytes. */
static bool
range_binary(const struct proto_value *v, struct rval *out)
{
	const uint8_t *p = v->p, *end = p + v->len;
	struct rbound *b[2] = { &out->lo, &out->hi };
	uint8_t flags;

	if (v->len < 1)
		return false;
	flags = *p++;
	out->empty = (flags & 0x01) != 0;
	out->lo.inclusive = (flags & 0x02) != 0;
	out->hi.inclusive = (flags & 0x04) != 0;
	out->lo.infinite = (flags & 0x08) != 0;
	out->hi.infinite = (flags & 0x10) != 0;
	for (int i = 0; i < 2 && !out->empty; i++) {
		uint32_t n;

		if (b[i]->infinite)
			continue;
		if (end - p < 4 || (n = get32(p)) > (uint32_t)(end - p - 4))
			return false;
		b[i]->v.p = p + 4;
		b[i]->v.len = n;
		p += 4 + n;
	}
	return out->empty || p == end;
}

/* One bound's text at <p> up to ',' or the closing bracket: empty (infinite), plain, or
 * with "..." and backslash escapes (range_out quotes what needs it); *<p> past it. */
static bool
text_bound(const char **p, const char *end, struct rbound *b)
{
	size_t n = 0;
	bool quoted = false, any = false;

	for (; *p < end && (quoted || (**p != ',' && **p != ')' && **p != ']')); (*p)++) {
		char c = **p;

		any = true;
		if (c == '"') {
			if (quoted && *p + 1 < end && (*p)[1] == '"') {
				(*p)++;		/* "" inside quotes */
			} else {
				quoted = !quoted;
				continue;
			}
		} else if (c == '\\' && *p + 1 < end) {
			c = *++(*p);
		}
		if (n + 1 >= sizeof(b->buf))
			return false;
		b->buf[n++] = c;
	}
	b->buf[n] = '\0';
	b->infinite = !any;
	b->v.p = (const uint8_t *)b->buf;
	b->v.len = (uint32_t)n;
	return !quoted;
}

/* range_out: "empty", or "[lo,hi)" with either bracket. */
static bool
range_text(const struct proto_value *v, struct rval *out)
{
	const char *p = (const char *)v->p, *end = p + v->len;

	if (v->len == 5 && memcmp(p, "empty", 5) == 0) {
		out->empty = true;
		return true;
	}
	if (v->len < 3 || (*p != '[' && *p != '('))
		return false;
	out->empty = false;
	out->lo.inclusive = *p++ == '[';
	if (!text_bound(&p, end, &out->lo) || p >= end || *p++ != ',' ||
	    !text_bound(&p, end, &out->hi) || p + 1 != end || (*p != ']' && *p != ')'))
		return false;
	out->hi.inclusive = *p == ']';
	return true;
}

/* range_cmp_bounds() for two lower (<lower>) or two upper bounds. */
static bool
cmp_bounds(const struct mv_type *sub, const struct rbound *a, const struct rbound *b,
	   bool lower, int *out, struct nk_error *err)
{
	if (a->infinite || b->infinite) {
		*out = a->infinite == b->infinite ? 0 : (a->infinite == lower ? -1 : 1);
		return true;
	}
	if (!mv_cmp(sub, &a->v, &b->v, out, err))
		return false;
	if (*out == 0 && a->inclusive != b->inclusive)	/* the exclusive one is inside */
		*out = (a->inclusive ? -1 : 1) * (lower ? 1 : -1);
	return true;
}

/* mv_cmp_range: see merge_int.h. */
bool
mv_cmp_range(const struct mv_type *t, const struct proto_value *a, const struct proto_value *b,
	     int *out, struct nk_error *err)
{
	struct mv_type sub = { .oid = mv_range_subtype(t->oid), .binary = t->binary };
	struct rval rx, ry, *x = &rx, *y = &ry;

	sub.kind = mv_kind_of(sub.oid);
	if (!(t->binary ? range_binary(a, x) && range_binary(b, y)
			: range_text(a, x) && range_text(b, y)))
		return nk_error_set(err, ERRCODE_INTERNAL_ERROR, "cannot merge a result value "
				    "of type %u: unexpected %s form", t->oid,
				    t->binary ? "binary" : "text");
	if (x->empty || y->empty) {
		*out = x->empty == y->empty ? 0 : x->empty ? -1 : 1;
		return true;
	}
	return cmp_bounds(&sub, &x->lo, &y->lo, true, out, err) &&
	       (*out != 0 || cmp_bounds(&sub, &x->hi, &y->hi, false, out, err));
}
