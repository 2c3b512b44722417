/*
 * fuzz_keyexpr.c - shard-key expressions and routing values (src/topology: keyexpr.c,
 * kxeval.c, keyspace.c, pgtext.c, pgtime.c). The first input byte picks the part:
 *   0  an expression (`columns` entry), NUL, values: compiled; its result type and whether
 *      each index type takes it, for every column type; evaluated over the values (one per
 *      base column, read as the column types) and routed;
 *   1  a value of the type the second byte names, read as Postgres text (in a session
 *      time zone the third byte picks) and as Postgres binary; each that reads is hashed
 *      and routed by every index type. A value read from text, written in the binary send
 *      format and read back, must hash to the same routing value (spec 2.2: one value, one
 *      shard, whatever its form);
 *   2  key-range bounds (hex and decimal) and the range search over them.
 */
#include "fuzz.h"

#include "neki/keyspace.h"

static const enum ks_type col_types[] = { KS_TYPE_INT2, KS_TYPE_INT4, KS_TYPE_INT8,
					  KS_TYPE_TEXT, KS_TYPE_VARCHAR };

/* Route <v> by every index type. */
static void
route_all(const struct ks_value *v, int64_t modulus)
{
	struct nk_error err;
	uint64_t out;
	uint8_t buf[16];
	const uint8_t *bytes;

	(void)ks_canonical_bytes(v, buf, &bytes);
	(void)ks_xxhash(v);
	for (int t = KS_INDEX_XXHASH; t <= KS_INDEX_RANGE; t++)
		fz_ignore(ks_routing_value((enum ks_index_type)t, modulus, v, &out, &err));
}

/* Evaluate <e> with its base columns of types <types> over the texts <d>/<n> (at NULs). */
static void
eval_over(const struct ks_expr *e, const enum ks_type *types, const uint8_t *d, size_t n)
{
	struct ks_value cols[KS_EXPR_MAX_COLUMNS], out;
	struct nk_error err;
	uint32_t ok = 0;

	for (; ok < e->ncolumns; ok++) {
		const uint8_t *part;
		size_t len = fz_part(&d, &n, &part);

		if (!ks_value_from_text(types[ok], (const char *)part, len, NULL, &cols[ok], &err))
			break;
	}
	if (ok == e->ncolumns && ks_expr_eval(e, cols, &out, &err)) {
		route_all(&out, 7);
		ks_value_cleanup(&out);
	}
	for (uint32_t i = 0; i < ok; i++)
		ks_value_cleanup(&cols[i]);
}

static void
expression(const uint8_t *d, size_t n)
{
	const uint8_t *part;
	size_t len = fz_part(&d, &n, &part);
	char *text = fz_strndup(part, len);
	struct ks_expr e;
	struct nk_error err;
	enum ks_type types[KS_EXPR_MAX_COLUMNS], res;

	if (ks_expr_parse(text, &e, &err)) {
		FZ_CHECK(e.nnodes >= 1 && e.nnodes <= KS_EXPR_MAX_NODES);
		FZ_CHECK(e.ncolumns >= 1 && e.ncolumns <= KS_EXPR_MAX_COLUMNS);
		(void)ks_expr_is_column(&e);
		for (size_t t = 0; t < NK_ARRAY_LEN(col_types); t++) {
			for (uint32_t k = 0; k < KS_EXPR_MAX_COLUMNS; k++)
				types[k] = col_types[(t + k) % NK_ARRAY_LEN(col_types)];
			for (int it = KS_INDEX_XXHASH; it <= KS_INDEX_RANGE; it++)
				fz_ignore(ks_index_accepts((enum ks_index_type)it, &e, types,
							   &res, &err));
			if (ks_expr_result_type(&e, types, &res, &err))
				eval_over(&e, types, d, n);
		}
	}
	free(text);
}

/* <v> (read from text) in Postgres' binary send format into <buf>; its length, or -1. */
static ssize_t
to_binary(const struct ks_value *v, uint8_t *buf, size_t cap)
{
	size_t w = 0;
	uint64_t bits = (uint64_t)v->i;
	float f4;
	uint32_t b4;

	switch (v->type) {
	case KS_TYPE_INT2: w = 2; break;
	case KS_TYPE_INT4: case KS_TYPE_DATE: w = 4; break;
	case KS_TYPE_INT8: case KS_TYPE_TIMESTAMP: case KS_TYPE_TIMESTAMPTZ: w = 8; break;
	case KS_TYPE_FLOAT4:
		f4 = (float)v->f;
		memcpy(&b4, &f4, 4);
		bits = b4;
		w = 4;
		break;
	case KS_TYPE_FLOAT8:
		memcpy(&bits, &v->f, 8);
		w = 8;
		break;
	case KS_TYPE_UUID:
		memcpy(buf, v->uuid, 16);
		return 16;
	case KS_TYPE_NUMERIC:
		return -1;
	default:	/* text-like and bytea: the canonical bytes themselves */
		if (v->len > cap)
			return -1;
		memcpy(buf, v->bytes, v->len);
		return (ssize_t)v->len;
	}
	for (size_t k = 0; k < w; k++)
		buf[k] = (uint8_t)(bits >> (8 * (w - 1 - k)));
	return (ssize_t)w;
}

static void
value(const uint8_t *d, size_t n)
{
	static const char *const zones[] = { NULL, "Europe/Berlin", "America/New_York",
					     "Australia/Lord_Howe", "UTC", "Nowhere/Else" };
	enum ks_type type = (enum ks_type)(fz_byte(&d, &n) % KS_TYPE_COUNT);
	uint8_t z = fz_byte(&d, &n);
	struct ks_text_ctx ctx = { zones[z % NK_ARRAY_LEN(zones)], (int32_t)(z * 900) - 43200 };
	struct ks_value v, w;
	struct nk_error err;
	uint8_t bin[4096];
	ssize_t blen;

	if (ks_value_from_text(type, (const char *)d, n, &ctx, &v, &err)) {
		route_all(&v, (int64_t)z + 1);
		blen = to_binary(&v, bin, sizeof(bin));
		if (blen >= 0) {
			FZ_CHECK(ks_value_from_binary(type, bin, (size_t)blen, &w, &err));
			FZ_CHECK(ks_xxhash(&v) == ks_xxhash(&w));
			ks_value_cleanup(&w);
		}
		ks_value_cleanup(&v);
	}
	if (ks_value_from_binary(type, d, n, &v, &err)) {
		route_all(&v, 1);
		ks_value_cleanup(&v);
	}
}

static void
bounds(const uint8_t *d, size_t n)
{
	uint64_t starts[16] = { 0 }, v;
	size_t k = 1;
	const uint8_t *part;

	while (n > 0 && k < NK_ARRAY_LEN(starts)) {
		size_t len = fz_part(&d, &n, &part);
		char *s = fz_strndup(part, len);

		if ((ks_bound_parse_hex(s, &v) || ks_bound_parse_decimal(s, &v)) &&
		    v > starts[k - 1])
			starts[k++] = v;
		free(s);
	}
	for (size_t i = 0; i < k; i++) {
		size_t r = ks_range_find(starts, k, starts[i]);

		FZ_CHECK(r == i);
		if (starts[i] != UINT64_MAX)
			FZ_CHECK(ks_range_find(starts, k, starts[i] + 1) ==
				 (i + 1 < k && starts[i + 1] == starts[i] + 1 ? i + 1 : i));
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	switch (data[0] % 3) {
	case 0:
		expression(data + 1, size - 1);
		break;
	case 1:
		value(data + 1, size - 1);
		break;
	default:
		bounds(data + 1, size - 1);
		break;
	}
	return 0;
}
