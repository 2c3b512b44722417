/*
 * fuzz_copy.c - the COPY FROM row scanner of a sharded COPY (src/exec/route_copy_row.c):
 * how the executor cuts the client's CopyData into rows (text, CSV, binary) and reads the
 * shard-key field of each. The first bytes pick the options (format, delimiter, quote,
 * escape, the key's field, the NULL string, FORCE_NULL / FORCE_NOT_NULL) and the size of
 * the CopyData pieces; the rest is the input. It is fed once whole and once in pieces, as
 * route_copy.c feeds it (a row begun in one message carried into the next): both must
 * find the same rows, the same end (end-of-data marker, error) and the same keys, and a
 * key must lie inside its row (binary) or its unescape buffer (text, CSV).
 */
#include "fuzz.h"

#include "../../src/exec/route_copy_int.h"

#define FZ_ROWS 256

/* What one feeding found. */
struct scan_result {
	size_t ends[FZ_ROWS];		/* input offset after each row */
	int keys[FZ_ROWS];		/* copy_key_rc of each (-1: header or trailer) */
	uint64_t khash[FZ_ROWS];	/* the key's bytes, hashed */
	size_t nrows;
	enum copy_scan_rc last;		/* MORE (input ended), EOD or ERROR */
	size_t eod_keep;		/* EOD: bytes of the last row before the marker */
};

static uint64_t
hash_bytes(const uint8_t *p, size_t n)
{
	uint64_t h = 1469598103934665603ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h ^ n;
}

/* The key of the complete row <row>/<len> the scan <s> ended. */
static void
row_key(const struct copy_opts *o, const struct copy_scan *s, const uint8_t *row, size_t len,
	struct scan_result *r)
{
	size_t content = o->fmt == COPY_FMT_BINARY ? len : copy_row_content(s, len);
	uint8_t *buf = malloc(len + 1);
	const uint8_t *val = NULL;
	size_t vlen = 0;
	enum copy_key_rc rc;

	FZ_CHECK(buf != NULL && content <= len);
	if (r->nrows >= FZ_ROWS) {
		free(buf);
		return;
	}
	r->khash[r->nrows] = 0;
	if (o->fmt == COPY_FMT_BINARY && (s->header_row || s->trailer)) {
		r->keys[r->nrows] = -1;
	} else {
		rc = copy_row_key(o, row, content, buf, &val, &vlen);
		r->keys[r->nrows] = (int)rc;
		if (rc == COPY_KEY_OK) {
			FZ_CHECK((val >= buf && val + vlen <= buf + len + 1) ||
				 (val >= row && val + vlen <= row + len));
			r->khash[r->nrows] = hash_bytes(val, vlen);
		}
	}
	free(buf);
}

/* Feed <p>/<n> in pieces of <step> bytes (0: whole), carrying a row across pieces. */
static void
feed(const struct copy_opts *o, const uint8_t *p, size_t n, size_t step, struct scan_result *r)
{
	struct copy_scan s;
	uint8_t *carry = malloc(n + 1);
	size_t clen = 0, off = 0, end;

	FZ_CHECK(carry != NULL);
	memset(&s, 0, sizeof(s));
	memset(r, 0, sizeof(*r));
	r->last = COPY_SCAN_MORE;
	while (off < n && r->last == COPY_SCAN_MORE) {
		size_t len = step == 0 || n - off < step ? n - off : step, pos = 0;

		while (pos < len) {
			enum copy_scan_rc rc = copy_scan_row(o, &s, p + off + pos, len - pos, &end);

			if (rc == COPY_SCAN_MORE) {
				memcpy(carry + clen, p + off + pos, len - pos);
				clen += len - pos;
				break;
			}
			FZ_CHECK(rc == COPY_SCAN_ERROR || end <= len - pos);
			if (rc != COPY_SCAN_ROW) {
				r->last = rc;
				r->eod_keep = rc == COPY_SCAN_EOD ? (size_t)s.marker : 0;
				break;
			}
			memcpy(carry + clen, p + off + pos, end);
			clen += end;
			row_key(o, &s, carry, clen, r);
			if (r->nrows < FZ_ROWS)
				r->ends[r->nrows++] = off + pos + end;
			clen = 0;
			pos += end;
		}
		off += len;
	}
	if (r->last == COPY_SCAN_MORE && o->fmt != COPY_FMT_BINARY &&
	    copy_scan_finish(o, &s) == COPY_SCAN_ERROR)
		r->last = COPY_SCAN_ERROR;
	free(carry);
}

static void
same(const struct scan_result *a, const struct scan_result *b)
{
	FZ_CHECK(a->nrows == b->nrows && a->last == b->last && a->eod_keep == b->eod_keep);
	for (size_t i = 0; i < a->nrows; i++)
		FZ_CHECK(a->ends[i] == b->ends[i] && a->keys[i] == b->keys[i] &&
			 a->khash[i] == b->khash[i]);
}

/* Options Postgres accepts (ProcessCopyOptions): the shards refuse others before any data. */
static bool
valid_opts(const struct copy_opts *o)
{
	static const char text_bad[] = "\\.abcdefghijklmnopqrstuvwxyz0123456789";

	if (o->delim == '\n' || o->delim == '\r' || o->delim == '\0' ||
	    memchr(o->null_str, o->delim, o->null_len))
		return false;
	if (o->fmt == COPY_FMT_TEXT)
		return strchr(text_bad, o->delim) == NULL;
	if (o->fmt != COPY_FMT_CSV)
		return true;
	return o->quote != o->delim && o->quote != '\n' && o->quote != '\r' && o->quote != 0 &&
	       o->escape != '\n' && o->escape != '\r' &&
	       !memchr(o->null_str, o->quote, o->null_len);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const nulls[] = { "\\N", "", "NULL", "x" };
	static struct scan_result whole, pieces;
	struct copy_opts o;
	uint8_t b0, step;

	if (size < 6)
		return 0;
	b0 = data[0];
	memset(&o, 0, sizeof(o));
	o.fmt = (enum copy_fmt)(b0 % 3);
	o.delim = (char)(data[1] ? data[1] : (o.fmt == COPY_FMT_CSV ? ',' : '\t'));
	o.quote = (char)(data[2] ? data[2] : '"');
	o.escape = (char)(data[3] == o.quote ? 0 : data[3]);
	o.key_pos = data[4] % 8;
	o.null_str = nulls[(b0 >> 2) % 4];
	o.null_len = strlen(o.null_str);
	o.force_null = (b0 >> 4) & 1;
	o.force_not_null = (b0 >> 5) & 1;
	step = (uint8_t)(data[5] % 17 + 1);
	if (!valid_opts(&o))
		return 0;
	feed(&o, data + 6, size - 6, 0, &whole);
	feed(&o, data + 6, size - 6, step, &pieces);
	same(&whole, &pieces);
	return 0;
}
