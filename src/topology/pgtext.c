/*
 * pgtext.c - Postgres text input for routable types (literals and text-format parameters):
 * integers, floats, numeric (canonical decimal text), bytea (hex and escape formats), uuid
 * and text-like types. Dates and timestamps are in pgtime.c.
 *
 * Entry point: ks_value_from_text(). Error codes and wording follow Postgres' own input
 * functions, so a client sees what the server would have said.
 */
#include "neki/base.h"

#include "neki/keyspace.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "keyspace_int.h"

/* Longest input echoed back in an error message. */
#define ECHO_MAX 200

/* Postgres' user-facing name of <type> in input error messages. */
static const char *
pg_type_name(enum ks_type type)
{
	switch (type) {
	case KS_TYPE_INT2: return "smallint";
	case KS_TYPE_INT4: return "integer";
	case KS_TYPE_INT8: return "bigint";
	case KS_TYPE_FLOAT4: return "real";
	case KS_TYPE_FLOAT8: return "double precision";
	default: return ks_type_str(type);
	}
}

/* ksi_syntax_error: see keyspace_int.h. Always returns false. */
bool
ksi_syntax_error(struct nk_error *err, const char *tname, const char *s, size_t len)
{
	return nk_error_set(err, ERRCODE_INVALID_TEXT_REPRESENTATION,
			    "invalid input syntax for type %s: \"%.*s\"", tname,
			    (int)(len > ECHO_MAX ? ECHO_MAX : len), s);
}

static bool
out_of_range(struct nk_error *err, enum ks_type type, const char *s, size_t len)
{
	return nk_error_set(err, ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
			    "value \"%.*s\" is out of range for type %s",
			    (int)(len > ECHO_MAX ? ECHO_MAX : len), s, pg_type_name(type));
}

/* Drop leading and trailing white space from <*s>/<*len>. */
static void
trim(const char **s, size_t *len)
{
	while (*len > 0 && isspace((unsigned char)**s)) {
		(*s)++;
		(*len)--;
	}
	while (*len > 0 && isspace((unsigned char)(*s)[*len - 1]))
		(*len)--;
}

static bool
text_int(enum ks_type type, const char *s0, size_t len0, struct ks_value *out,
	 struct nk_error *err)
{
	const char *s = s0;
	size_t len = len0, i = 0;
	bool neg = false;
	uint64_t mag = 0, limit;

	trim(&s, &len);
	if (len > 0 && (s[0] == '-' || s[0] == '+'))
		neg = s[i++] == '-';
	if (i == len)
		return ksi_syntax_error(err, pg_type_name(type), s0, len0);
	limit = type == KS_TYPE_INT2 ? 32767 : type == KS_TYPE_INT4 ? 2147483647 : INT64_MAX;
	for (; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return ksi_syntax_error(err, pg_type_name(type), s0, len0);
		mag = mag * 10 + (uint64_t)(s[i] - '0');
		if (mag > limit + (neg ? 1 : 0))
			return out_of_range(err, type, s0, len0);
	}
	out->i = neg ? (int64_t)(0 - mag) : (int64_t)mag;
	return true;
}

/* NUL-terminated copy of <s>/<len> for the C library parsers; NULL on no memory. */
static char *
dup_text(const char *s, size_t len)
{
	char *c = malloc(len + 1);

	if (c) {
		memcpy(c, s, len);
		c[len] = '\0';
	}
	return c;
}

static bool
text_float(enum ks_type type, const char *s0, size_t len0, struct ks_value *out,
	   struct nk_error *err)
{
	const char *s = s0;
	size_t len = len0;
	char *c, *end;
	bool range_error;

	trim(&s, &len);
	c = dup_text(s, len);
	if (!c)
		return nk_error_oom(err);
	errno = 0;
	if (type == KS_TYPE_FLOAT4)
		out->f = strtof(c, &end);
	else
		out->f = strtod(c, &end);
	range_error = errno == ERANGE && (out->f == 0.0 || isinf(out->f));
	if (len == 0 || end != c + len) {
		free(c);
		return ksi_syntax_error(err, pg_type_name(type), s0, len0);
	}
	free(c);
	if (range_error)
		return nk_error_set(err, ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
				    "\"%.*s\" is out of range for type %s",
				    (int)(len0 > ECHO_MAX ? ECHO_MAX : len0), s0,
				    pg_type_name(type));
	return true;
}

/* ksi_numeric_special: see keyspace_int.h. */
void
ksi_numeric_special(struct ks_value *out, const char *text)
{
	out->bytes = text;
	out->len = strlen(text);
}

/* ksi_numeric_canonical: see keyspace_int.h. */
bool
ksi_numeric_canonical(bool neg, const char *digits, size_t n, int64_t point,
		      struct ks_value *out, struct nk_error *err)
{
	char *buf, *w;

	while (n > 0 && digits[0] == '0') {
		digits++;
		n--;
		point--;
	}
	while (n > 0 && digits[n - 1] == '0')
		n--;
	if (n == 0) {
		ksi_numeric_special(out, "0");
		return true;
	}
	if (point > KSI_NUMERIC_MAX_POINT || point < -KSI_NUMERIC_MAX_POINT)
		return nk_error_set(err, ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
				    "value overflows numeric format");
	w = buf = malloc(n + (size_t)(point < 0 ? -point : point) + 4);
	if (!buf)
		return nk_error_oom(err);
	if (neg)
		*w++ = '-';
	if (point <= 0) {
		*w++ = '0';
		*w++ = '.';
		for (int64_t k = 0; k < -point; k++)
			*w++ = '0';
		memcpy(w, digits, n);
		w += n;
	} else if ((size_t)point >= n) {
		memcpy(w, digits, n);
		w += n;
		for (size_t k = n; k < (size_t)point; k++)
			*w++ = '0';
	} else {
		memcpy(w, digits, (size_t)point);
		w += point;
		*w++ = '.';
		memcpy(w, digits + point, n - (size_t)point);
		w += n - (size_t)point;
	}
	*w = '\0';
	out->owned = buf;
	out->bytes = buf;
	out->len = (size_t)(w - buf);
	return true;
}

/* NaN and the infinities, spelled as numeric_in accepts them (case-insensitive). */
static bool
numeric_special_text(const char *s, size_t len, struct ks_value *out)
{
	static const struct {
		const char *in;
		const char *canon;
	} specials[] = {
		{ "nan", "NaN" }, { "infinity", "Infinity" }, { "+infinity", "Infinity" },
		{ "inf", "Infinity" }, { "+inf", "Infinity" }, { "-infinity", "-Infinity" },
		{ "-inf", "-Infinity" },
	};

	for (size_t i = 0; i < NK_ARRAY_LEN(specials); i++) {
		if (strlen(specials[i].in) == len && strncasecmp(s, specials[i].in, len) == 0) {
			ksi_numeric_special(out, specials[i].canon);
			return true;
		}
	}
	return false;
}

/* Parse "[+-]digits[.digits][e[+-]digits]" into digits (no point) and the point position. */
static bool
numeric_scan(const char *s, size_t len, char *digits, size_t *nd, int64_t *point, bool *neg)
{
	size_t i = 0, before = 0;
	bool seen_point = false;
	int64_t exp = 0;

	*neg = false;
	*nd = 0;
	if (i < len && (s[i] == '+' || s[i] == '-'))
		*neg = s[i++] == '-';
	for (; i < len; i++) {
		if (s[i] == '.' && !seen_point) {
			seen_point = true;
		} else if (s[i] >= '0' && s[i] <= '9') {
			digits[(*nd)++] = s[i];
			before += seen_point ? 0 : 1;
		} else {
			break;
		}
	}
	if (*nd == 0)
		return false;
	if (i < len && (s[i] == 'e' || s[i] == 'E')) {
		bool eneg = false;
		size_t start;

		if (++i < len && (s[i] == '+' || s[i] == '-'))
			eneg = s[i++] == '-';
		for (start = i; i < len && s[i] >= '0' && s[i] <= '9'; i++)
			if (exp < 10 * KSI_NUMERIC_MAX_POINT)
				exp = exp * 10 + (s[i] - '0');
		if (i == start)
			return false;
		exp = eneg ? -exp : exp;
	}
	*point = (int64_t)before + exp;
	return i == len;
}

static bool
text_numeric(const char *s0, size_t len0, struct ks_value *out, struct nk_error *err)
{
	const char *s = s0;
	size_t len = len0, nd;
	int64_t point;
	bool neg, ok;
	char *digits;

	trim(&s, &len);
	if (numeric_special_text(s, len, out))
		return true;
	digits = malloc(len + 1);
	if (!digits)
		return nk_error_oom(err);
	if (!numeric_scan(s, len, digits, &nd, &point, &neg)) {
		free(digits);
		return ksi_syntax_error(err, "numeric", s0, len0);
	}
	ok = ksi_numeric_canonical(neg, digits, nd, point, out, err);
	free(digits);
	return ok;
}

/* ksi_hex_digit: see keyspace_int.h. */
int
ksi_hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* bytea hex format "\x..": pairs of hex digits, white space allowed between pairs. */
static bool
bytea_hex(const char *s, size_t len, char *buf, size_t *n, struct nk_error *err)
{
	size_t i = 2;

	*n = 0;
	while (i < len) {
		int hi, lo;

		if (isspace((unsigned char)s[i])) {
			i++;
			continue;
		}
		hi = ksi_hex_digit(s[i]);
		if (hi < 0)
			return nk_error_set(err, ERRCODE_INVALID_PARAMETER_VALUE,
					    "invalid hexadecimal digit: \"%c\"", s[i]);
		if (i + 1 >= len)
			return nk_error_set(err, ERRCODE_INVALID_PARAMETER_VALUE,
					    "invalid hexadecimal data: odd number of digits");
		lo = ksi_hex_digit(s[i + 1]);
		if (lo < 0)
			return nk_error_set(err, ERRCODE_INVALID_PARAMETER_VALUE,
					    "invalid hexadecimal digit: \"%c\"",
					    s[i + 1]);
		buf[(*n)++] = (char)(hi << 4 | lo);
		i += 2;
	}
	return true;
}

/* bytea escape format: "\\" is a backslash, "\ooo" an octal byte, other bytes as is. */
static bool
bytea_escape(const char *s, size_t len, char *buf, size_t *n, struct nk_error *err)
{
	size_t i = 0;

	*n = 0;
	while (i < len) {
		if (s[i] != '\\') {
			buf[(*n)++] = s[i++];
		} else if (i + 1 < len && s[i + 1] == '\\') {
			buf[(*n)++] = '\\';
			i += 2;
		} else if (i + 3 < len && s[i + 1] >= '0' && s[i + 1] <= '3' && s[i + 2] >= '0' &&
			   s[i + 2] <= '7' && s[i + 3] >= '0' && s[i + 3] <= '7') {
			buf[(*n)++] = (char)((s[i + 1] - '0') << 6 | (s[i + 2] - '0') << 3 |
					     (s[i + 3] - '0'));
			i += 4;
		} else {
			return ksi_syntax_error(err, "bytea", s, len);
		}
	}
	return true;
}

static bool
text_bytea(const char *s, size_t len, struct ks_value *out, struct nk_error *err)
{
	char *buf = malloc(len + 1);
	size_t n;
	bool ok;

	if (!buf)
		return nk_error_oom(err);
	if (len >= 2 && s[0] == '\\' && s[1] == 'x')
		ok = bytea_hex(s, len, buf, &n, err);
	else
		ok = bytea_escape(s, len, buf, &n, err);
	if (!ok) {
		free(buf);
		return false;
	}
	out->owned = buf;
	out->bytes = buf;
	out->len = n;
	return true;
}

/* uuid: optional braces, 32 hex digits, a hyphen allowed after any group of four digits. */
static bool
text_uuid(const char *s0, size_t len0, struct ks_value *out, struct nk_error *err)
{
	const char *s = s0;
	size_t len = len0, i = 0;
	bool braces;

	trim(&s, &len);
	braces = len > 0 && s[0] == '{';
	if (braces) {
		if (len < 2 || s[len - 1] != '}')
			return ksi_syntax_error(err, "uuid", s0, len0);
		s++;
		len -= 2;
	}
	for (int b = 0; b < 16; b++) {
		int hi = i < len ? ksi_hex_digit(s[i]) : -1;
		int lo = i + 1 < len ? ksi_hex_digit(s[i + 1]) : -1;

		if (hi < 0 || lo < 0)
			return ksi_syntax_error(err, "uuid", s0, len0);
		out->uuid[b] = (uint8_t)(hi << 4 | lo);
		i += 2;
		if (b % 2 == 1 && b < 15 && i < len && s[i] == '-')
			i++;
	}
	if (i != len)
		return ksi_syntax_error(err, "uuid", s0, len0);
	return true;
}

/* Text-like values: the bytes themselves (bpchar without trailing spaces). */
static void
text_bytes(enum ks_type type, const char *s, size_t len, struct ks_value *out)
{
	if (type == KS_TYPE_BPCHAR)
		while (len > 0 && s[len - 1] == ' ')
			len--;
	out->bytes = s;
	out->len = len;
}

/* ks_value_from_text: see keyspace.h. */
bool
ks_value_from_text(enum ks_type type, const char *s, size_t len, const struct ks_text_ctx *ctx,
		   struct ks_value *out, struct nk_error *err)
{
	memset(out, 0, sizeof(*out));
	out->type = type;
	switch (type) {
	case KS_TYPE_INT2:
	case KS_TYPE_INT4:
	case KS_TYPE_INT8:
		return text_int(type, s, len, out, err);
	case KS_TYPE_FLOAT4:
	case KS_TYPE_FLOAT8:
		return text_float(type, s, len, out, err);
	case KS_TYPE_NUMERIC:
		return text_numeric(s, len, out, err);
	case KS_TYPE_BYTEA:
		return text_bytea(s, len, out, err);
	case KS_TYPE_UUID:
		return text_uuid(s, len, out, err);
	case KS_TYPE_DATE:
		return ksi_text_date(s, len, out, err);
	case KS_TYPE_TIMESTAMP:
	case KS_TYPE_TIMESTAMPTZ:
		return ksi_text_timestamp(type, s, len, ctx, out, err);
	default:
		text_bytes(type, s, len, out);
		return true;
	}
}
