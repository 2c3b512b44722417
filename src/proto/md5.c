/*
 * md5.c - MD5 (RFC 1321) and Postgres' md5 password scheme.
 *
 * A small self-contained MD5 so that OpenSSL stays confined to scram.c. The
 * password scheme: the stored secret is "md5" + hex(md5(password || user)); the
 * wire response to salt S is "md5" + hex(md5(hex_part_of_secret || S)).
 * Server side: auth_md5_verify(); client side: auth_md5_response().
 */
#include "neki/base.h"

#include "neki/auth.h"

#include <string.h>

#include "neki/scram.h"

struct md5_ctx {
	uint32_t a, b, c, d;
	uint64_t nbytes;
	uint8_t buf[64];
	size_t buflen;
};

/* Per-round shift amounts and the sine-derived constants of RFC 1321. */
static const uint8_t md5_shift[64] = {
	7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22,
	5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20,
	4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23,
	6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21,
};

static const uint32_t md5_k[64] = {
	0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613,
	0xfd469501, 0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193,
	0xa679438e, 0x49b40821, 0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d,
	0x02441453, 0xd8a1e681, 0xe7d3fbc8, 0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed,
	0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a, 0xfffa3942, 0x8771f681, 0x6d9d6122,
	0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70, 0x289b7ec6, 0xeaa127fa,
	0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665, 0xf4292244,
	0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
	0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb,
	0xeb86d391,
};

static uint32_t
rotl(uint32_t x, unsigned n)
{
	return (x << n) | (x >> (32 - n));
}

/* One 64-byte block. */
static void
md5_block(struct md5_ctx *c, const uint8_t *p)
{
	uint32_t m[16], a = c->a, b = c->b, cc = c->c, d = c->d;

	for (int i = 0; i < 16; i++)
		m[i] = (uint32_t)p[i * 4] | ((uint32_t)p[i * 4 + 1] << 8) |
		       ((uint32_t)p[i * 4 + 2] << 16) | ((uint32_t)p[i * 4 + 3] << 24);
	for (int i = 0; i < 64; i++) {
		uint32_t f, t;
		int g;

		if (i < 16) {
			f = (b & cc) | (~b & d);
			g = i;
		} else if (i < 32) {
			f = (d & b) | (~d & cc);
			g = (5 * i + 1) % 16;
		} else if (i < 48) {
			f = b ^ cc ^ d;
			g = (3 * i + 5) % 16;
		} else {
			f = cc ^ (b | ~d);
			g = (7 * i) % 16;
		}
		t = d;
		d = cc;
		cc = b;
		b = b + rotl(a + f + md5_k[i] + m[g], md5_shift[i]);
		a = t;
	}
	c->a += a;
	c->b += b;
	c->c += cc;
	c->d += d;
}

static void
md5_init(struct md5_ctx *c)
{
	c->a = 0x67452301;
	c->b = 0xefcdab89;
	c->c = 0x98badcfe;
	c->d = 0x10325476;
	c->nbytes = 0;
	c->buflen = 0;
}

static void
md5_update(struct md5_ctx *c, const void *data, size_t len)
{
	const uint8_t *p = data;

	c->nbytes += len;
	while (len > 0) {
		size_t n = 64 - c->buflen;

		if (n > len)
			n = len;
		memcpy(c->buf + c->buflen, p, n);
		c->buflen += n;
		p += n;
		len -= n;
		if (c->buflen == 64) {
			md5_block(c, c->buf);
			c->buflen = 0;
		}
	}
}

static void
md5_final(struct md5_ctx *c, uint8_t out[16])
{
	uint64_t bits = c->nbytes * 8;
	uint8_t pad = 0x80, zero = 0, len8[8];
	uint32_t w[4];

	md5_update(c, &pad, 1);
	while (c->buflen != 56)
		md5_update(c, &zero, 1);
	for (int i = 0; i < 8; i++)
		len8[i] = (uint8_t)(bits >> (8 * i));
	md5_update(c, len8, 8);
	w[0] = c->a;
	w[1] = c->b;
	w[2] = c->c;
	w[3] = c->d;
	for (int i = 0; i < 16; i++)
		out[i] = (uint8_t)(w[i / 4] >> (8 * (i % 4)));
}

/* hex(md5(<a> || <b>)) into <out> (33 bytes). */
static void
md5_hex2(const void *a, size_t alen, const void *b, size_t blen, char out[33])
{
	static const char hex[] = "0123456789abcdef";
	struct md5_ctx c;
	uint8_t d[16];

	md5_init(&c);
	md5_update(&c, a, alen);
	md5_update(&c, b, blen);
	md5_final(&c, d);
	for (int i = 0; i < 16; i++) {
		out[i * 2] = hex[d[i] >> 4];
		out[i * 2 + 1] = hex[d[i] & 15];
	}
	out[32] = '\0';
}

void
auth_md5_hex(const void *data, size_t len, char out[33])
{
	md5_hex2(data, len, "", 0, out);
}

void
auth_md5_secret(const char *user, const char *password, char out[AUTH_MD5_LEN + 1])
{
	memcpy(out, "md5", 3);
	md5_hex2(password, strlen(password), user, strlen(user), out + 3);
}

bool
auth_md5_response(const char *secret, const char *user, const uint8_t salt[4],
		  char out[AUTH_MD5_LEN + 1])
{
	char md5sec[AUTH_MD5_LEN + 1];

	if (secret == NULL)
		return false;	/* unknown user: the exchange fails like a wrong password */
	switch (auth_secret_kind(secret)) {
	case AUTH_SECRET_PLAIN:
		auth_md5_secret(user, secret, md5sec);
		break;
	case AUTH_SECRET_MD5:
		memcpy(md5sec, secret, sizeof(md5sec));
		break;
	case AUTH_SECRET_SCRAM:
	default:
		return false;	/* a SCRAM verifier cannot answer an md5 challenge */
	}
	memcpy(out, "md5", 3);
	md5_hex2(md5sec + 3, 32, salt, 4, out + 3);
	return true;
}

bool
auth_md5_verify(const char *secret, const char *user, const uint8_t salt[4],
		const char *response)
{
	char want[AUTH_MD5_LEN + 1];

	if (!auth_md5_response(secret, user, salt, want))
		return false;
	return auth_secure_streq(want, response);
}

/* Compare without an early exit on the first difference. */
bool
auth_secure_streq(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned diff = la != lb;

	for (size_t i = 0; i < la && i < lb; i++)
		diff |= (unsigned)(a[i] ^ b[i]);
	return diff == 0;
}

/* md5 needs "md5" + 32 lowercase hex digits, as Postgres' get_password_type(). */
enum auth_secret_kind
auth_secret_kind(const char *secret)
{
	struct scram_secret scram;
	size_t n = strlen(secret);

	if (n == AUTH_MD5_LEN && strncmp(secret, "md5", 3) == 0 &&
	    strspn(secret + 3, "0123456789abcdef") == 32)
		return AUTH_SECRET_MD5;
	/* like Postgres' get_password_type(): only a well-formed secret counts as SCRAM */
	if (strncmp(secret, "SCRAM-SHA-256$", 14) == 0 && scram_secret_parse(secret, &scram))
		return AUTH_SECRET_SCRAM;
	return AUTH_SECRET_PLAIN;
}
