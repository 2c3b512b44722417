/*
 * auth_file.c - pgbouncer's userlist.txt, and the client-visible auth errors.
 *
 * Format: one `"user" "secret"` per line; `""` inside quotes is a literal quote;
 * anything after the second field is ignored; blank lines and lines starting
 * with `;` are skipped. A malformed line ends parsing (pgbouncer logs "broken
 * auth file" and keeps what it read so far). Entries are sorted for bsearch.
 */
#include "neki/base.h"

#include "neki/auth.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Read one quoted field starting at *<pos> (which must be '"'); returns the
 * unquoted copy (owned) and advances *<pos> past the closing quote. NULL when
 * the field is unterminated, longer than <max>, or on allocation failure.
 */
static char *
af_read_quoted(const char **pos, const char *end, size_t max)
{
	const char *p = *pos + 1;
	char *out, *o;

	out = malloc((size_t)(end - p) + 1);
	if (!out)
		return NULL;
	o = out;
	for (;;) {
		if (p >= end || *p == '\n')
			goto fail;
		if (*p == '"') {
			if (p + 1 < end && p[1] == '"') {
				*o++ = '"';
				p += 2;
				continue;
			}
			break;
		}
		*o++ = *p++;
	}
	*o = '\0';
	if ((size_t)(o - out) >= max)
		goto fail;
	*pos = p + 1;
	return out;
fail:
	free(out);
	return NULL;
}

/* Append (user, secret) to <af>; takes ownership. False on allocation failure. */
static bool
af_add(struct auth_file *af, char *user, char *secret, size_t *cap)
{
	if (af->n == *cap) {
		size_t ncap = *cap ? *cap * 2 : 16;
		struct auth_file_entry *ne = realloc(af->entries, ncap * sizeof(*ne));

		if (!ne)
			return false;
		af->entries = ne;
		*cap = ncap;
	}
	af->entries[af->n].user = user;
	af->entries[af->n].secret = secret;
	af->n++;
	return true;
}

/* An entry with its position in the file, so that sorting can keep the last duplicate. */
struct af_sorted {
	struct auth_file_entry e;
	size_t idx;
};

static int
af_cmp(const void *a, const void *b)
{
	const struct af_sorted *x = a, *y = b;
	int c = strcmp(x->e.user, y->e.user);

	if (c == 0)
		return x->idx < y->idx ? -1 : (x->idx > y->idx);
	return c;
}

/* Sort by user, then keep only the last entry of each duplicated user. */
static bool
af_sort_dedup(struct auth_file *af)
{
	struct af_sorted *tmp = calloc(af->n ? af->n : 1, sizeof(*tmp));
	size_t w = 0;

	if (!tmp)
		return false;
	for (size_t i = 0; i < af->n; i++) {
		tmp[i].e = af->entries[i];
		tmp[i].idx = i;
	}
	qsort(tmp, af->n, sizeof(*tmp), af_cmp);
	for (size_t i = 0; i < af->n; i++) {
		if (i + 1 < af->n && strcmp(tmp[i].e.user, tmp[i + 1].e.user) == 0) {
			free(tmp[i].e.user);
			free(tmp[i].e.secret);
			continue;
		}
		af->entries[w++] = tmp[i].e;
	}
	af->n = w;
	free(tmp);
	return true;
}

/* Parse one non-comment line at *<pos>; false when it is malformed (or no memory). */
static bool
af_parse_line(struct auth_file *af, const char **pos, const char *end, size_t *cap)
{
	const char *p = *pos;
	char *user, *secret;

	if (*p != '"')
		return false;
	user = af_read_quoted(&p, end, AUTH_MAX_USERNAME);
	if (!user)
		return false;
	while (p < end && *p != '"' && *p != '\n')
		p++;
	secret = (p < end && *p == '"') ? af_read_quoted(&p, end, AUTH_MAX_PASSWORD) : NULL;
	if (!secret || !af_add(af, user, secret, cap)) {
		free(user);
		free(secret);
		return false;
	}
	*pos = p;
	return true;
}

/* Parse userlist.txt <text> of <len> bytes; caller frees with auth_file_free(). */
struct auth_file *
auth_file_parse(const char *text, size_t len)
{
	struct auth_file *af = calloc(1, sizeof(*af));
	const char *p = text, *end = text + len;
	size_t cap = 0;
	int line = 1;

	if (!af)
		return NULL;
	while (p < end) {
		while (p < end && *p != '\n' && isspace((unsigned char)*p))
			p++;
		if (p < end && *p != '\n' && *p != ';' && !af_parse_line(af, &p, end, &cap)) {
			af->broken_line = line;
			break;
		}
		while (p < end && *p != '\n')
			p++;	/* rest of the line, or a comment */
		if (p < end) {
			p++;
			line++;
		}
	}
	if (!af_sort_dedup(af)) {
		auth_file_free(af);
		return NULL;
	}
	return af;
}

/* Read <path> whole and parse it; NULL with <err> (58P01) when unreadable. */
struct auth_file *
auth_file_load(const char *path, struct nk_error *err)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t len = 0, cap = 0, n;
	struct auth_file *af;

	if (!f) {
		nk_error_set(err, ERRCODE_UNDEFINED_FILE,
			     "could not open auth_file \"%s\": %s", path,
			     strerror(errno));
		return NULL;
	}
	do {
		if (len + 4096 > cap) {
			char *nb = realloc(buf, cap = len + 65536);

			if (!nb) {
				free(buf);
				fclose(f);
				nk_error_oom(err);
				return NULL;
			}
			buf = nb;
		}
		n = fread(buf + len, 1, cap - len, f);
		len += n;
	} while (n > 0);
	fclose(f);
	af = auth_file_parse(buf ? buf : "", len);
	free(buf);
	if (!af)
		nk_error_oom(err);
	return af;
}

/* Binary search for <user>; the secret is owned by <af>. */
const char *
auth_file_find(const struct auth_file *af, const char *user)
{
	size_t lo = 0, hi = af ? af->n : 0;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strcmp(user, af->entries[mid].user);

		if (c == 0)
			return af->entries[mid].secret;
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

/* Free <af> and every entry; NULL is fine. */
void
auth_file_free(struct auth_file *af)
{
	if (!af)
		return;
	for (size_t i = 0; i < af->n; i++) {
		free(af->entries[i].user);
		free(af->entries[i].secret);
	}
	free(af->entries);
	free(af);
}

/* ---- client-visible errors ---- */

/* Postgres' message for a failed password/md5/SCRAM login (28P01, FATAL). */
bool
auth_error_password_failed(struct nk_error *err, const char *user)
{
	nk_error_set(err, ERRCODE_INVALID_PASSWORD,
		     "password authentication failed for user \"%s\"", user);
	if (err)
		err->severity = NK_SEV_FATAL;
	return false;
}

/*
 * pgbouncer's refusal of a user that trust cannot vouch for (not in auth_file, not found by
 * auth_query): 08P01, FATAL, the same text whether or not the user exists on the server.
 */
bool
auth_error_trust_failed(struct nk_error *err)
{
	nk_error_set(err, ERRCODE_PROTOCOL_VIOLATION, "\"trust\" authentication failed");
	if (err)
		err->severity = NK_SEV_FATAL;
	return false;
}

/* Postgres' hba refusal, explicit reject rule or no matching entry (28000, FATAL). */
bool
auth_error_hba_reject(struct nk_error *err, const char *host, const char *user, const char *db,
		      bool is_tls, bool explicit_rule)
{
	const char *enc = is_tls ? "SSL encryption" : "no encryption";

	if (explicit_rule)
		nk_error_set(err, ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION,
		"pg_hba.conf rejects connection for host \"%s\", user \"%s\", database \"%s\", %s",
			     host, user, db, enc);
	else
		nk_error_set(err, ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION,
		"no pg_hba.conf entry for host \"%s\", user \"%s\", database \"%s\", %s",
			     host, user, db, enc);
	if (err)
		err->severity = NK_SEV_FATAL;
	return false;
}
