/*
 * relay_fmt.c - binary result columns for __neki calls over the extended protocol: the
 * admin answers in text; a driver whose Bind asked for binary results (pgjdbc on a named
 * statement) gets the RowDescription with the format codes it asked for and each such value
 * converted from text: int2, int4, int8, float8, bool and the text types. A binary column of
 * another type makes the reply a 0A000 error. Runs in workers (src/worker/relay.c).
 * Entry points: relay_fmt_init(), relay_fmt_row_desc(), relay_fmt_data_row().
 */
#include "neki/base.h"

#include "relay_fmt.h"

#include <stdlib.h>
#include <string.h>

#include "neki/pktbuf.h"

static uint32_t
get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint16_t
get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

/* relay_fmt_init: see relay_fmt.h. */
void
relay_fmt_init(struct relay_fmt *f, const int16_t *formats, size_t n)
{
	memset(f, 0, sizeof(*f));
	f->nreq = n < RELAY_FMT_MAX ? n : RELAY_FMT_MAX;
	memcpy(f->req, formats, f->nreq * sizeof(*formats));
}

/* The format column <i> is sent in (Postgres rules: no code = text, one code = all). */
static int16_t
fmt_of(const struct relay_fmt *f, size_t i)
{
	if (f->nreq == 0)
		return 0;
	return f->nreq == 1 ? f->req[0] : i < f->nreq ? f->req[i] : 0;
}

static bool
convertible(uint32_t oid)
{
	static const uint32_t ok[] = { 16, 20, 21, 23, 701, 25, 1043, 19 };

	for (size_t i = 0; i < NK_ARRAY_LEN(ok); i++)
		if (ok[i] == oid)
			return true;
	return false;
}

/* relay_fmt_row_desc: see relay_fmt.h. */
bool
relay_fmt_row_desc(struct relay_fmt *f, const uint8_t *body, size_t len, struct pktbuf *out)
{
	size_t at = 2, n;

	if (len < 2)
		return false;
	n = get16(body);
	pktbuf_begin(out, 'T');
	pktbuf_put_int16(out, (int16_t)n);
	for (size_t i = 0; i < n; i++) {
		const uint8_t *name = body + at, *end = memchr(name, '\0', len - at);

		if (end == NULL || (size_t)(end - body) + 19 > len)
			return false;
		at = (size_t)(end - body) + 1;
		pktbuf_put_bytes(out, name, (size_t)(end - name) + 1);
		pktbuf_put_bytes(out, body + at, 16);	/* table, attnum, type, typlen, typmod */
		if (i < RELAY_FMT_MAX)
			f->oids[i] = get32(body + at + 6);
		pktbuf_put_int16(out, fmt_of(f, i));
		if (fmt_of(f, i) == 1 && (i >= RELAY_FMT_MAX || !convertible(f->oids[i])))
			f->unsupported = true;
		at += 18;
	}
	pktbuf_end(out);
	f->ncols = n;
	f->any_binary = false;
	for (size_t i = 0; i < n; i++)
		f->any_binary |= fmt_of(f, i) == 1;
	return !f->unsupported;
}

/* Text <s> (<n> bytes) of type <oid> in binary into <out>; false when it does not parse. */
static bool
to_binary(uint32_t oid, const char *s, size_t n, struct pktbuf *out)
{
	char buf[64], *end;

	if (oid == 25 || oid == 1043 || oid == 19) {
		pktbuf_put_int32(out, (int32_t)n);
		pktbuf_put_bytes(out, s, n);
		return true;
	}
	if (n >= sizeof(buf))
		return false;
	memcpy(buf, s, n);
	buf[n] = '\0';
	if (oid == 16) {
		pktbuf_put_int32(out, 1);
		pktbuf_put_byte(out, buf[0] == 't');
		return true;
	}
	if (oid == 701) {
		double d = strtod(buf, &end);
		uint64_t u;

		memcpy(&u, &d, sizeof(u));
		pktbuf_put_int32(out, 8);
		pktbuf_put_uint64(out, u);
		return *end == '\0';
	}
	{
		long long v = strtoll(buf, &end, 10);

		if (*end != '\0')
			return false;
		pktbuf_put_int32(out, oid == 21 ? 2 : oid == 23 ? 4 : 8);
		if (oid == 21)
			pktbuf_put_int16(out, (int16_t)v);
		else if (oid == 23)
			pktbuf_put_int32(out, (int32_t)v);
		else
			pktbuf_put_uint64(out, (uint64_t)v);
	}
	return true;
}

/* relay_fmt_data_row: see relay_fmt.h. */
bool
relay_fmt_data_row(const struct relay_fmt *f, const uint8_t *body, size_t len,
		   struct pktbuf *out)
{
	size_t at = 2, n;

	if (len < 2)
		return false;
	n = get16(body);
	pktbuf_begin(out, 'D');
	pktbuf_put_int16(out, (int16_t)n);
	for (size_t i = 0; i < n; i++) {
		int32_t vl;

		if (at + 4 > len)
			return false;
		vl = (int32_t)get32(body + at);
		at += 4;
		if (vl < 0) {
			pktbuf_put_int32(out, -1);
			continue;
		}
		if (at + (size_t)vl > len)
			return false;
		if (fmt_of(f, i) == 1 && i < RELAY_FMT_MAX) {
			if (!to_binary(f->oids[i], (const char *)body + at, (size_t)vl, out))
				return false;
		} else {
			pktbuf_put_int32(out, vl);
			pktbuf_put_bytes(out, body + at, (size_t)vl);
		}
		at += (size_t)vl;
	}
	pktbuf_end(out);
	return true;
}
