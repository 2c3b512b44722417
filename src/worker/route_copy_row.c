/*
 * route_copy_row.c - COPY FROM input as the router reads it: where each row ends and the
 * shard-key field of a complete row. Text rows end at a newline not escaped by a
 * backslash; CSV rows at a newline outside quotes (an escape other than the quote char
 * protects a quote or escape inside quotes); binary rows are tuples of length-prefixed
 * fields after the file header. The rules are Postgres' (copyfromparse.c) as far as the
 * row boundaries and one field's value go; the shards parse every field themselves.
 * Pure: no sockets. Entry points: copy_scan_row(), copy_row_key(), copy_row_content().
 */
#include "neki/base.h"

#include <string.h>

#include "route_copy_int.h"

#define COPY_BIN_HEADER 19

static uint32_t
be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* ---- row ends ---- */

static bool
scan_text(struct copy_scan *s, const uint8_t *p, size_t n, size_t *end)
{
	for (size_t i = 0; i < n; i++) {
		if (s->esc) {
			s->esc = false;
		} else if (p[i] == '\\') {
			s->esc = true;
		} else if (p[i] == '\n') {
			*end = i + 1;
			return true;
		}
	}
	return false;
}

static bool
scan_csv(const struct copy_opts *o, struct copy_scan *s, const uint8_t *p, size_t n,
	 size_t *end)
{
	for (size_t i = 0; i < n; i++) {
		uint8_t c = p[i];

		if (s->in_quote && o->escape != '\0' && c == (uint8_t)o->escape)
			s->esc = !s->esc;
		if (c == (uint8_t)o->quote && !s->esc)
			s->in_quote = !s->in_quote;
		if (o->escape == '\0' || c != (uint8_t)o->escape)
			s->esc = false;
		if (c == '\n' && !s->in_quote) {
			*end = i + 1;
			return true;
		}
	}
	return false;
}

/* Collect <want> bytes of a number or header into s->nb; true once complete. */
static bool
bin_collect(struct copy_scan *s, uint32_t want, const uint8_t *p, size_t n, size_t *i)
{
	size_t take = want - s->nbn < n - *i ? want - s->nbn : n - *i;

	memcpy(s->nb + s->nbn, p + *i, take);
	s->nbn += (uint32_t)take;
	*i += take;
	if (s->nbn < want)
		return false;
	s->nbn = 0;
	return true;
}

/* One step of the binary scan at p[*i]; true when a row (header, tuple, trailer) ended. */
static bool
bin_step(struct copy_scan *s, const uint8_t *p, size_t n, size_t *i)
{
	size_t take;

	switch (s->bst) {
	case COPY_BIN_SIG:
		if (!bin_collect(s, COPY_BIN_HEADER, p, n, i))
			return false;
		s->need = be32(s->nb + 15);
		s->bst = s->need > 0 ? COPY_BIN_EXT : COPY_BIN_COUNT;
		s->header_row = s->need == 0;
		return s->header_row;
	case COPY_BIN_EXT:
		take = s->need < n - *i ? s->need : n - *i;
		*i += take;
		s->need -= (uint32_t)take;
		if (s->need > 0)
			return false;
		s->bst = COPY_BIN_COUNT;
		s->header_row = true;
		return true;
	case COPY_BIN_COUNT:
		if (!bin_collect(s, 2, p, n, i))
			return false;
		s->fields = (int16_t)(s->nb[0] << 8 | s->nb[1]);
		s->trailer = s->fields < 0;
		if (s->fields <= 0)
			return true;
		s->bst = COPY_BIN_LEN;
		return false;
	case COPY_BIN_LEN:
		if (!bin_collect(s, 4, p, n, i))
			return false;
		s->need = be32(s->nb);
		if ((int32_t)s->need > 0) {
			s->bst = COPY_BIN_DATA;
			return false;
		}
		break;
	case COPY_BIN_DATA:
		take = s->need < n - *i ? s->need : n - *i;
		*i += take;
		s->need -= (uint32_t)take;
		if (s->need > 0)
			return false;
		break;
	}
	s->bst = --s->fields > 0 ? COPY_BIN_LEN : COPY_BIN_COUNT;
	return s->fields == 0;
}

bool
copy_scan_row(const struct copy_opts *o, struct copy_scan *s, const uint8_t *p, size_t n,
	      size_t *end)
{
	size_t i = 0;

	if (o->fmt == COPY_FMT_TEXT)
		return scan_text(s, p, n, end);
	if (o->fmt == COPY_FMT_CSV)
		return scan_csv(o, s, p, n, end);
	s->header_row = s->trailer = false;
	while (i < n)
		if (bin_step(s, p, n, &i)) {
			*end = i;
			return true;
		}
	return false;
}

size_t
copy_row_content(const uint8_t *row, size_t len)
{
	if (len > 0 && row[len - 1] == '\n')
		len--;
	if (len > 0 && row[len - 1] == '\r')
		len--;
	return len;
}

/* ---- the key field ---- */

static int
hexval(uint8_t c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 :
	       c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Unescape text field <p>/<n> into <out>; returns the length. */
static size_t
text_unescape(const uint8_t *p, size_t n, uint8_t *out)
{
	static const char from[] = "bfnrtv", to[] = "\b\f\n\r\t\v";
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		const char *m;
		int v, d;

		if (p[i] != '\\' || i + 1 == n) {
			out[k++] = p[i];
			continue;
		}
		i++;
		if (p[i] >= '0' && p[i] <= '7') {
			v = p[i] - '0';
			for (int j = 0; j < 2 && i + 1 < n && p[i + 1] >= '0' && p[i + 1] <= '7'; j++)
				v = v * 8 + (p[++i] - '0');
			out[k++] = (uint8_t)v;
		} else if (p[i] == 'x' && i + 1 < n && hexval(p[i + 1]) >= 0) {
			v = hexval(p[++i]);
			if (i + 1 < n && (d = hexval(p[i + 1])) >= 0) {
				v = v * 16 + d;
				i++;
			}
			out[k++] = (uint8_t)v;
		} else {
			m = p[i] != '\0' ? strchr(from, p[i]) : NULL;
			out[k++] = m != NULL ? (uint8_t)to[m - from] : p[i];
		}
	}
	return k;
}

static enum copy_key_rc
text_key(const struct copy_opts *o, const uint8_t *p, size_t n, uint8_t *buf,
	 const uint8_t **val, size_t *vlen)
{
	size_t start = 0, i = 0;
	uint32_t f = 0;

	for (;; i++) {
		if (i < n && p[i] == '\\') {
			i++;
			continue;
		}
		if (i < n && p[i] != (uint8_t)o->delim)
			continue;
		if (f == o->key_pos)
			break;
		if (i >= n)
			return COPY_KEY_MISSING;
		f++;
		start = i + 1;
	}
	if (i > n)
		i = n;
	if (i - start == o->null_len && memcmp(p + start, o->null_str, o->null_len) == 0)
		return COPY_KEY_NULL;
	*val = buf;
	*vlen = text_unescape(p + start, i - start, buf);
	return COPY_KEY_OK;
}

/* One CSV field from p[*i]: its value into <buf> when <keep>; *<i> past its delimiter. */
static size_t
csv_field(const struct copy_opts *o, const uint8_t *p, size_t n, size_t *i, uint8_t *buf,
	  bool *quoted, bool *at_end)
{
	char esc = o->escape != '\0' ? o->escape : o->quote;
	bool inq = false;
	size_t k = 0;

	*quoted = false;
	for (; *i < n; (*i)++) {
		uint8_t c = p[*i];

		if (inq && c == (uint8_t)esc && *i + 1 < n &&
		    (p[*i + 1] == (uint8_t)o->quote || p[*i + 1] == (uint8_t)esc)) {
			buf[k++] = p[++*i];
		} else if (c == (uint8_t)o->quote) {
			inq = !inq;
			*quoted = true;
		} else if (!inq && c == (uint8_t)o->delim) {
			(*i)++;
			*at_end = false;
			return k;
		} else {
			buf[k++] = c;
		}
	}
	*at_end = true;
	return k;
}

static enum copy_key_rc
csv_key(const struct copy_opts *o, const uint8_t *p, size_t n, uint8_t *buf,
	const uint8_t **val, size_t *vlen)
{
	size_t i = 0, start, k;
	bool quoted, at_end = false;

	for (uint32_t f = 0;; f++) {
		if (at_end)
			return COPY_KEY_MISSING;
		start = i;
		k = csv_field(o, p, n, &i, buf, &quoted, &at_end);
		if (f == o->key_pos)
			break;
	}
	if (o->force_not_null) {
		/* never NULL */
	} else if (!quoted && k == o->null_len && memcmp(p + start, o->null_str, k) == 0) {
		return COPY_KEY_NULL;
	} else if (o->force_null && k == o->null_len && memcmp(buf, o->null_str, k) == 0) {
		return COPY_KEY_NULL;
	}
	*val = buf;
	*vlen = k;
	return COPY_KEY_OK;
}

static enum copy_key_rc
binary_key(const struct copy_opts *o, const uint8_t *p, size_t n, const uint8_t **val,
	   size_t *vlen)
{
	int32_t nf = n >= 2 ? (int16_t)(p[0] << 8 | p[1]) : 0;
	size_t off = 2;

	if (nf <= (int32_t)o->key_pos)
		return COPY_KEY_MISSING;
	for (uint32_t f = 0; off + 4 <= n; f++) {
		int32_t len = (int32_t)be32(p + off);

		off += 4;
		if (f == o->key_pos) {
			if (len < 0)
				return COPY_KEY_NULL;
			*val = p + off;
			*vlen = (size_t)len;
			return off + (size_t)len <= n ? COPY_KEY_OK : COPY_KEY_MISSING;
		}
		off += len > 0 ? (size_t)len : 0;
	}
	return COPY_KEY_MISSING;
}

enum copy_key_rc
copy_row_key(const struct copy_opts *o, const uint8_t *row, size_t len, uint8_t *buf,
	     const uint8_t **val, size_t *vlen)
{
	if (o->fmt == COPY_FMT_BINARY)
		return binary_key(o, row, len, val, vlen);
	len = copy_row_content(row, len);
	if (o->fmt == COPY_FMT_CSV)
		return csv_key(o, row, len, buf, val, vlen);
	return text_key(o, row, len, buf, val, vlen);
}
