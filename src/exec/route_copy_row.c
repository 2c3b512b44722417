/*
 * route_copy_row.c - COPY FROM input as the router reads it: where each row ends and the
 * shard-key field of a complete row. Text rows end at a line end not escaped by a
 * backslash; CSV rows at a line end outside quotes (an escape other than the quote char
 * protects a quote or escape inside quotes); a line end is "
", "
" or "
", as the
 * first line's, and another one later is Postgres' 22P04; "\." ends the input (text:
 * anywhere; CSV: alone on a line). Binary rows are tuples of length-prefixed fields after
 * the file header. The rules are Postgres' (copyfromparse.c) as far as the row boundaries,
 * line numbers and one field's value go; the shards parse every field themselves.
 * Pure: no sockets. Entry points: copy_scan_row(), copy_scan_finish(), copy_row_key(),
 * copy_row_content().
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

/* ---- row ends (text and CSV: Postgres' CopyReadLineText) ---- */

/* What one byte does to the row being scanned. */
enum copy_step {
	COPY_ST_NEXT = 0,	/* part of the row */
	COPY_ST_ROW,		/* the row ends with this byte */
	COPY_ST_ROW_BEFORE,	/* the row ended with the byte before (this one is the next row's) */
	COPY_ST_EOD,		/* the end-of-data marker ends with this byte */
	COPY_ST_ERROR,
};

static enum copy_step
scan_fail(struct copy_scan *s, const char *err, const char *hint)
{
	s->err = err;
	s->hint = hint;
	return COPY_ST_ERROR;
}

/* A line end that is not the input's style. */
static enum copy_step
bad_cr(const struct copy_opts *o, struct copy_scan *s)
{
	return o->fmt == COPY_FMT_CSV ?
	       scan_fail(s, "unquoted carriage return found in data",
			 "Use quoted CSV field to represent carriage return.") :
	       scan_fail(s, "literal carriage return found in data",
			 "Use \"\\r\" to represent carriage return.");
}

static enum copy_step
bad_nl(const struct copy_opts *o, struct copy_scan *s)
{
	return o->fmt == COPY_FMT_CSV ?
	       scan_fail(s, "unquoted newline found in data",
			 "Use quoted CSV field to represent newline.") :
	       scan_fail(s, "literal newline found in data", "Use \"\\n\" to represent newline.");
}

static enum copy_step scan_byte(const struct copy_opts *o, struct copy_scan *s, uint8_t c);

/*
 * "\." not followed by the end of a line: text input is corrupt; in CSV it was data (only a
 * line that is "\." ends the input), and its bytes after the backslash are read again (they
 * cannot end the row: a "\r" or "\n" here either is the marker or breaks the line style).
 */
static enum copy_step
not_marker(const struct copy_opts *o, struct copy_scan *s, uint8_t c, bool take_c)
{
	uint8_t again[3] = { '.' };
	uint32_t n = 1;
	enum copy_step st = COPY_ST_NEXT;

	if (o->fmt != COPY_FMT_CSV)
		return scan_fail(s, "end-of-copy marker corrupt", NULL);
	if (s->pend == COPY_P_MARK_CR)
		again[n++] = '\r';
	if (take_c)
		again[n++] = c;
	s->pend = COPY_P_NONE;
	for (uint32_t i = 0; i < n && st == COPY_ST_NEXT; i++)
		st = scan_byte(o, s, again[i]);
	return st == COPY_ST_ROW || st == COPY_ST_ROW_BEFORE ? COPY_ST_NEXT : st;
}

/* The byte after "\." (CRNL: after "\.\r"): the line end that must close the marker. */
static enum copy_step
marker_end(const struct copy_opts *o, struct copy_scan *s, uint8_t c)
{
	if (s->eol == COPY_EOL_CRNL && s->pend == COPY_P_MARK) {
		if (c == '\r') {
			s->pend = COPY_P_MARK_CR;
			return COPY_ST_NEXT;
		}
		if (c == '\n' && o->fmt != COPY_FMT_CSV)
			return scan_fail(s, "end-of-copy marker does not match previous newline "
					 "style", NULL);
		return not_marker(o, s, c, true);
	}
	if (c != '\r' && c != '\n')
		return not_marker(o, s, c, true);
	if ((s->eol == COPY_EOL_NL && c != '\n') || (s->eol == COPY_EOL_CRNL && c != '\n') ||
	    (s->eol == COPY_EOL_CR && c != '\r'))
		return scan_fail(s, "end-of-copy marker does not match previous newline style",
				 NULL);
	return COPY_ST_EOD;
}

/* The look-ahead byte <c> after a pending state; COPY_ST_NEXT when <c> is to be scanned. */
static enum copy_step
scan_pending(const struct copy_opts *o, struct copy_scan *s, uint8_t c, bool *done)
{
	enum copy_pend p = s->pend;

	*done = true;
	switch (p) {
	case COPY_P_CR:
		s->pend = COPY_P_NONE;
		if (c == '\n') {
			s->eol = COPY_EOL_CRNL;
			return COPY_ST_ROW;
		}
		if (s->eol == COPY_EOL_CRNL)
			return bad_cr(o, s);
		s->eol = COPY_EOL_CR;
		return COPY_ST_ROW_BEFORE;
	case COPY_P_ESC:	/* text: "\." is the marker, any other byte is escaped */
	case COPY_P_BS:		/* CSV row start: only "\." matters */
		s->pend = c == '.' ? COPY_P_MARK : COPY_P_NONE;
		*done = c == '.' || p == COPY_P_ESC;
		return COPY_ST_NEXT;
	case COPY_P_MARK:
	case COPY_P_MARK_CR:
		return marker_end(o, s, c);
	case COPY_P_NONE:
		break;
	}
	*done = false;
	return COPY_ST_NEXT;
}

/* CSV quotes and escapes, and the line ends Postgres counts inside quotes. */
static void
csv_track(const struct copy_opts *o, struct copy_scan *s, uint8_t c)
{
	if (s->in_quote && o->escape != '\0' && c == (uint8_t)o->escape)
		s->esc = !s->esc;
	if (c == (uint8_t)o->quote && !s->esc)
		s->in_quote = !s->in_quote;
	if (o->escape == '\0' || c != (uint8_t)o->escape)
		s->esc = false;
	if (s->in_quote && c == (s->eol == COPY_EOL_NL ? '\n' : '\r'))
		s->lines++;	/* (an unknown style counts "\r", as Postgres does) */
}

/* One byte of text or CSV input. */
static enum copy_step
scan_byte(const struct copy_opts *o, struct copy_scan *s, uint8_t c)
{
	bool csv = o->fmt == COPY_FMT_CSV, done, first = !s->mid_row;
	enum copy_step st = scan_pending(o, s, c, &done);

	if (done)
		return st;
	s->mid_row = true;
	if (csv)
		csv_track(o, s, c);
	if (c == '\r' && (!csv || !s->in_quote)) {
		if (s->eol == COPY_EOL_UNKNOWN || s->eol == COPY_EOL_CRNL) {
			s->pend = COPY_P_CR;
			return COPY_ST_NEXT;
		}
		return s->eol == COPY_EOL_NL ? bad_cr(o, s) : COPY_ST_ROW;
	}
	if (c == '\n' && (!csv || !s->in_quote)) {
		if (s->eol == COPY_EOL_CR || s->eol == COPY_EOL_CRNL)
			return bad_nl(o, s);
		s->eol = COPY_EOL_NL;
		return COPY_ST_ROW;
	}
	if (c == '\\' && (!csv || first))
		s->pend = csv ? COPY_P_BS : COPY_P_ESC;
	return COPY_ST_NEXT;
}

static void
row_done(struct copy_scan *s, uint32_t term)
{
	s->row_lines = s->lines;
	s->lines = 0;
	s->term = term;
	s->rowpos = 0;
	s->mid_row = s->in_quote = s->esc = false;
}

static enum copy_scan_rc
scan_text_csv(const struct copy_opts *o, struct copy_scan *s, const uint8_t *p, size_t n,
	      size_t *end)
{
	for (size_t i = 0; i < n; i++) {
		bool marker = s->pend == COPY_P_ESC || s->pend == COPY_P_BS;
		enum copy_step st = scan_byte(o, s, p[i]);

		if (marker && s->pend == COPY_P_MARK)	/* "\." began a byte before */
			s->marker = s->rowpos + i - 1;
		switch (st) {
		case COPY_ST_NEXT:
			continue;
		case COPY_ST_ROW:
			*end = i + 1;
			row_done(s, p[i] == '\n' && s->eol == COPY_EOL_CRNL ? 2 : 1);
			return COPY_SCAN_ROW;
		case COPY_ST_ROW_BEFORE:	/* the "\r" was the last byte read */
			*end = i;
			row_done(s, 1);
			return COPY_SCAN_ROW;
		case COPY_ST_EOD:
			*end = i + 1;
			s->row_lines = s->lines;
			s->term = 0;
			return COPY_SCAN_EOD;
		case COPY_ST_ERROR:
			return COPY_SCAN_ERROR;
		}
	}
	s->rowpos += n;
	return COPY_SCAN_MORE;
}

/* copy_scan_finish: see route_copy_int.h. */
enum copy_scan_rc
copy_scan_finish(const struct copy_opts *o, struct copy_scan *s)
{
	enum copy_step st = COPY_ST_NEXT;
	uint32_t term = 0;

	switch (s->pend) {
	case COPY_P_CR:		/* the input ends with "\r" */
		s->pend = COPY_P_NONE;
		if (s->eol == COPY_EOL_CRNL)
			st = bad_cr(o, s);
		term = 1;
		break;
	case COPY_P_MARK:	/* "\." at the end: no line end after it */
	case COPY_P_MARK_CR:
		st = not_marker(o, s, 0, false);
		if (st == COPY_ST_NEXT && s->pend == COPY_P_CR)
			return copy_scan_finish(o, s);
		break;
	default:
		s->pend = COPY_P_NONE;
		break;
	}
	if (st == COPY_ST_ERROR)
		return COPY_SCAN_ERROR;
	if (!s->mid_row && s->rowpos == 0)
		return COPY_SCAN_MORE;
	row_done(s, term);
	return COPY_SCAN_ROW;
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

/* copy_scan_row: see route_copy_int.h. */
enum copy_scan_rc
copy_scan_row(const struct copy_opts *o, struct copy_scan *s, const uint8_t *p, size_t n,
	      size_t *end)
{
	size_t i = 0;

	if (o->fmt != COPY_FMT_BINARY)
		return scan_text_csv(o, s, p, n, end);
	s->header_row = s->trailer = false;
	s->term = s->row_lines = 0;
	while (i < n)
		if (bin_step(s, p, n, &i)) {
			*end = i;
			return COPY_SCAN_ROW;
		}
	return COPY_SCAN_MORE;
}

/* copy_row_content: see route_copy_int.h. */
size_t
copy_row_content(const struct copy_scan *s, size_t len)
{
	return len >= s->term ? len - s->term : 0;
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
	if (o->fmt == COPY_FMT_CSV)
		return csv_key(o, row, len, buf, val, vlen);
	return text_key(o, row, len, buf, val, vlen);
}
