/*
 * kxeval.c - evaluate a compiled shard-key expression (struct ks_expr, built by keyexpr.c)
 * over the values of its base columns, and infer its result type.
 *
 * Semantics follow Postgres: integer operators take the wider operand type and raise
 * "<type> out of range" on overflow, division truncates and refuses zero, lower()/upper()
 * use Unicode simple case mapping (the C.UTF-8 locale, the same on every host), left()
 * counts characters. Entry points: ks_expr_eval(), ks_expr_result_type().
 */
#include "neki/base.h"

#include "neki/keyspace.h"

#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wctype.h>

static bool
is_texty(enum ks_type t)
{
	return t == KS_TYPE_TEXT || t == KS_TYPE_VARCHAR || t == KS_TYPE_BPCHAR;
}

static int
int_width(enum ks_type t)
{
	return t == KS_TYPE_INT2 ? 2 : t == KS_TYPE_INT4 ? 4 : 8;
}

static const char *
range_name(enum ks_type t)
{
	return t == KS_TYPE_INT2 ? "smallint" : t == KS_TYPE_INT4 ? "integer" : "bigint";
}

static enum ks_type
const_type(int64_t v)
{
	return v >= INT32_MIN && v <= INT32_MAX ? KS_TYPE_INT4 : KS_TYPE_INT8;
}

static bool
wrong_type(struct nk_error *err, const char *fn, enum ks_type t)
{
	return nk_error_set(err, ERRCODE_UNDEFINED_FUNCTION,
			    "function %s(%s) does not exist", fn, ks_type_str(t));
}

static const char *const op_names[KS_OP_COUNT] = {
	"column", "constant", "lower", "upper", "left", "+", "-", "*", "/", "int2", "int4",
	"int8", "text",
};

/* Result type of a unary node <op> applied to <a>. */
static bool
unary_type(enum ks_expr_op op, enum ks_type a, enum ks_type *out, struct nk_error *err)
{
	switch (op) {
	case KS_OP_LOWER:
	case KS_OP_UPPER:
	case KS_OP_LEFT:
		if (!is_texty(a))
			return wrong_type(err, op_names[op], a);
		*out = KS_TYPE_TEXT;
		return true;
	case KS_OP_CAST_INT2:
	case KS_OP_CAST_INT4:
	case KS_OP_CAST_INT8:
		if (!ks_type_is_integer(a) && !is_texty(a))
			return wrong_type(err, op_names[op], a);
		*out = op == KS_OP_CAST_INT2 ? KS_TYPE_INT2 :
		       op == KS_OP_CAST_INT4 ? KS_TYPE_INT4 : KS_TYPE_INT8;
		return true;
	default:
		if (!ks_type_is_integer(a) && !is_texty(a))
			return wrong_type(err, op_names[op], a);
		*out = KS_TYPE_TEXT;
		return true;
	}
}

static bool
node_type(const struct ks_expr *e, int k, const enum ks_type *cols, enum ks_type *out,
	  struct nk_error *err)
{
	const struct ks_expr_node *n = &e->nodes[k];
	enum ks_type a, b;

	if (n->op == KS_OP_COLUMN) {
		*out = cols[n->ival];
		return true;
	}
	if (n->op == KS_OP_CONST_INT) {
		*out = const_type(n->ival);
		return true;
	}
	if (!node_type(e, n->a, cols, &a, err))
		return false;
	if (n->op < KS_OP_ADD || n->op > KS_OP_DIV)
		return unary_type((enum ks_expr_op)n->op, a, out, err);
	if (!node_type(e, n->b, cols, &b, err))
		return false;
	if (!ks_type_is_integer(a) || !ks_type_is_integer(b))
		return nk_error_set(err, ERRCODE_UNDEFINED_FUNCTION,
				    "operator does not exist: %s %s %s",
				    ks_type_str(a), op_names[n->op], ks_type_str(b));
	*out = int_width(a) >= int_width(b) ? a : b;
	return true;
}

/* ks_expr_result_type: see keyspace.h. */
bool
ks_expr_result_type(const struct ks_expr *e, const enum ks_type *coltypes, enum ks_type *out,
		    struct nk_error *err)
{
	if (e->nnodes == 0)
		return nk_error_set(err, ERRCODE_INVALID_PARAMETER_VALUE,
				    "empty shard key expression");
	return node_type(e, (int)e->nnodes - 1, coltypes, out, err);
}

/* ks_index_accepts: see keyspace.h. */
bool
ks_index_accepts(enum ks_index_type itype, const struct ks_expr *e, const enum ks_type *coltypes,
		 enum ks_type *result, struct nk_error *err)
{
	if (!ks_expr_result_type(e, coltypes, result, err))
		return false;
	if (itype != KS_INDEX_XXHASH && !ks_type_is_integer(*result))
		return nk_error_set(err, ERRCODE_INVALID_PARAMETER_VALUE,
				    "shard index of type \"%s\" needs an integer key, not %s",
				    ks_index_type_str(itype), ks_type_str(*result));
	return true;
}

static bool
fits(enum ks_type t, __int128 v)
{
	if (t == KS_TYPE_INT2)
		return v >= INT16_MIN && v <= INT16_MAX;
	if (t == KS_TYPE_INT4)
		return v >= INT32_MIN && v <= INT32_MAX;
	return v >= INT64_MIN && v <= INT64_MAX;
}

static bool
eval_arith(enum ks_expr_op op, const struct ks_value *a, const struct ks_value *b,
	   struct ks_value *out, struct nk_error *err)
{
	enum ks_type t = int_width(a->type) >= int_width(b->type) ? a->type : b->type;
	__int128 r;

	if (!ks_type_is_integer(a->type) || !ks_type_is_integer(b->type))
		return nk_error_set(err, ERRCODE_UNDEFINED_FUNCTION,
				    "operator does not exist: %s %s %s",
				    ks_type_str(a->type), op_names[op], ks_type_str(b->type));
	if (op == KS_OP_DIV && b->i == 0)
		return nk_error_set(err, ERRCODE_DIVISION_BY_ZERO, "division by zero");
	r = op == KS_OP_ADD ? (__int128)a->i + b->i :
	    op == KS_OP_SUB ? (__int128)a->i - b->i :
	    op == KS_OP_MUL ? (__int128)a->i * b->i : (__int128)a->i / b->i;
	if (!fits(t, r))
		return nk_error_set(err, ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
				    "%s out of range", range_name(t));
	memset(out, 0, sizeof(*out));
	out->type = t;
	out->i = (int64_t)r;
	return true;
}

static locale_t
utf8_locale(void)
{
	static locale_t loc;

	if (!loc)
		loc = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
	return loc;
}

/* Decode one UTF-8 character at <s>[<i>..<len>); returns its length, 0 when invalid. */
static size_t
utf8_decode(const unsigned char *s, size_t i, size_t len, uint32_t *cp)
{
	size_t n = s[i] < 0x80 ? 1 : (s[i] & 0xe0) == 0xc0 ? 2 : (s[i] & 0xf0) == 0xe0 ? 3 :
		   (s[i] & 0xf8) == 0xf0 ? 4 : 0;
	static const uint32_t mins[5] = { 0, 0, 0x80, 0x800, 0x10000 };

	if (n == 0 || i + n > len)
		return 0;
	*cp = n == 1 ? s[i] : s[i] & (0x7f >> n);
	for (size_t k = 1; k < n; k++) {
		if ((s[i + k] & 0xc0) != 0x80)
			return 0;
		*cp = (*cp << 6) | (s[i + k] & 0x3f);
	}
	if (*cp < mins[n] || *cp > 0x10ffff || (*cp >= 0xd800 && *cp <= 0xdfff))
		return 0;
	return n;
}

static size_t
utf8_encode(uint32_t cp, char *out)
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xc0 | cp >> 6);
		out[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xe0 | cp >> 12);
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		out[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | cp >> 18);
	out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	out[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

static bool
bad_utf8(struct nk_error *err)
{
	return nk_error_set(err, ERRCODE_CHARACTER_NOT_IN_REPERTOIRE,
			    "invalid byte sequence for encoding \"UTF8\"");
}

static bool
eval_case(bool lower, const struct ks_value *a, struct ks_value *out, struct nk_error *err)
{
	const unsigned char *s = (const unsigned char *)a->bytes;
	locale_t loc = utf8_locale();
	char *buf = malloc(4 * a->len + 1);
	size_t i = 0, w = 0;

	if (!buf || !loc) {
		free(buf);
		return nk_error_oom(err);
	}
	while (i < a->len) {
		uint32_t cp;
		size_t n = utf8_decode(s, i, a->len, &cp);

		if (n == 0) {
			free(buf);
			return bad_utf8(err);
		}
		cp = (uint32_t)(lower ? towlower_l((wint_t)cp, loc) : towupper_l((wint_t)cp, loc));
		w += utf8_encode(cp, buf + w);
		i += n;
	}
	memset(out, 0, sizeof(*out));
	out->type = KS_TYPE_TEXT;
	out->owned = buf;
	out->bytes = buf;
	out->len = w;
	return true;
}

/* left(a, n): the first n characters; n < 0: all but the last -n. */
static bool
eval_left(const struct ks_value *a, int64_t n, struct ks_value *out, struct nk_error *err)
{
	const unsigned char *s = (const unsigned char *)a->bytes;
	size_t nchars = 0, i = 0, keep, end = 0;
	uint32_t cp;

	for (i = 0; i < a->len; nchars++) {
		size_t k = utf8_decode(s, i, a->len, &cp);

		if (k == 0)
			return bad_utf8(err);
		i += k;
	}
	keep = n >= 0 ? ((uint64_t)n < nchars ? (size_t)n : nchars) :
	       ((uint64_t)-(n + 1) + 1 >= nchars ? 0 : nchars - (size_t)-(n + 1) - 1);
	for (size_t c = 0; c < keep; c++)
		end += utf8_decode(s, end, a->len, &cp);
	memset(out, 0, sizeof(*out));
	out->type = KS_TYPE_TEXT;
	out->bytes = a->bytes;
	out->len = end;
	return true;
}

static bool
eval_cast_int(enum ks_type to, const struct ks_value *a, struct ks_value *out,
	      struct nk_error *err)
{
	if (is_texty(a->type))
		return ks_value_from_text(to, a->bytes, a->len, NULL, out, err);
	if (!ks_type_is_integer(a->type))
		return wrong_type(err, ks_type_str(to), a->type);
	if (!fits(to, a->i))
		return nk_error_set(err, ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
				    "%s out of range", range_name(to));
	memset(out, 0, sizeof(*out));
	out->type = to;
	out->i = a->i;
	return true;
}

static bool
eval_cast_text(const struct ks_value *a, struct ks_value *out, struct nk_error *err)
{
	char buf[24];
	int n;

	if (is_texty(a->type)) {
		*out = *a;
		out->owned = NULL;
		out->type = KS_TYPE_TEXT;
		return true;
	}
	if (!ks_type_is_integer(a->type))
		return wrong_type(err, "text", a->type);
	n = snprintf(buf, sizeof(buf), "%lld", (long long)a->i);
	memset(out, 0, sizeof(*out));
	if (!ks_value_set_text(out, KS_TYPE_TEXT, buf, (size_t)n))
		return nk_error_oom(err);
	return true;
}

/* Apply the unary node <n> (or left(), whose length is a constant) to <a>. */
static bool
eval_unary(const struct ks_expr *e, const struct ks_expr_node *n, const struct ks_value *a,
	   struct ks_value *out, struct nk_error *err)
{
	switch (n->op) {
	case KS_OP_LOWER:
	case KS_OP_UPPER:
	case KS_OP_LEFT:
		if (!is_texty(a->type))
			return wrong_type(err, op_names[n->op], a->type);
		if (n->op == KS_OP_LEFT)
			return eval_left(a, e->nodes[n->b].ival, out, err);
		return eval_case(n->op == KS_OP_LOWER, a, out, err);
	case KS_OP_CAST_INT2:
		return eval_cast_int(KS_TYPE_INT2, a, out, err);
	case KS_OP_CAST_INT4:
		return eval_cast_int(KS_TYPE_INT4, a, out, err);
	case KS_OP_CAST_INT8:
		return eval_cast_int(KS_TYPE_INT8, a, out, err);
	default:
		return eval_cast_text(a, out, err);
	}
}

static bool
eval_node(const struct ks_expr *e, int k, const struct ks_value *cols, struct ks_value *out,
	  struct nk_error *err)
{
	const struct ks_expr_node *n = &e->nodes[k];
	struct ks_value a, b;
	bool ok;

	if (n->op == KS_OP_COLUMN) {
		*out = cols[n->ival];
		out->owned = NULL;	/* borrowed */
		return true;
	}
	if (n->op == KS_OP_CONST_INT) {
		memset(out, 0, sizeof(*out));
		out->type = const_type(n->ival);
		out->i = n->ival;
		return true;
	}
	if (!eval_node(e, n->a, cols, &a, err))
		return false;
	if (n->op >= KS_OP_ADD && n->op <= KS_OP_DIV) {
		ok = eval_node(e, n->b, cols, &b, err) && eval_arith(n->op, &a, &b, out, err);
		ks_value_cleanup(&a);
		return ok;
	}
	ok = eval_unary(e, n, &a, out, err);
	if (ok && out->bytes && a.owned && out->bytes >= a.owned &&
	    out->bytes <= a.owned + a.len) {
		out->owned = a.owned;	/* the result points into a's buffer: take it over */
		a.owned = NULL;
	}
	ks_value_cleanup(&a);
	return ok;
}

/* ks_expr_eval: see keyspace.h. */
bool
ks_expr_eval(const struct ks_expr *e, const struct ks_value *cols, struct ks_value *out,
	     struct nk_error *err)
{
	if (e->nnodes == 0)
		return nk_error_set(err, ERRCODE_INVALID_PARAMETER_VALUE,
				    "empty shard key expression");
	return eval_node(e, (int)e->nnodes - 1, cols, out, err);
}
