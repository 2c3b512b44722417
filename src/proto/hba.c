/*
 * hba.c - auth_hba_file: pg_hba.conf syntax (pgbouncer's subset) and the matcher.
 *
 * Line: TYPE DATABASE USER [ADDRESS [MASK]] METHOD [map=NAME]
 *   TYPE      local | host | hostssl | hostnossl
 *   DATABASE  comma list of names, "quoted names", all, sameuser, replication, @file
 *   USER      comma list of names, "quoted names", all, @file
 *   ADDRESS   all | IPv4/IPv6 address with /bits or a separate mask (not for local)
 *   METHOD    trust reject md5 password plain scram-sha-256 cert peer
 * pgbouncer's methods this build lacks (gss, ldap, pam: no GSSAPI, LDAP or PAM here) keep
 * their line as a rule that refuses, with a warning: a client it matches is rejected, not
 * let through to a later, looser line. Unsupported forms (+group, samerole, samehost,
 * samenet, host names, other methods or options) make the line invalid; like pgbouncer,
 * invalid lines are reported and skipped, the rest of the file still applies. Entry points:
 * hba_parse(), hba_load(), hba_match().
 */
#include "neki/base.h"

#include "neki/auth.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

enum hba_type {
	HBA_T_LOCAL = 0,
	HBA_T_HOST = 1,
	HBA_T_HOSTSSL = 2,
	HBA_T_HOSTNOSSL = 3,
};

/* A DATABASE or USER field. */
struct hba_names {
	bool all;		/* keyword all */
	bool sameuser;		/* keyword sameuser (database field) */
	bool replication;	/* keyword replication (database field) */
	char **names;		/* owned: literal names */
	size_t n, cap;
};

struct hba_rule {
	enum hba_type type;
	struct hba_names db;
	struct hba_names user;
	int family;		/* 0 = any address ("all" or local) */
	uint8_t addr[16];	/* network order, already masked */
	uint8_t mask[16];
	enum hba_method method;
	char *map;		/* owned; NULL when absent */
};

struct hba {
	struct hba_rule *rules;	/* owned */
	size_t n, cap;
};

/* One token of a line: a word or a quoted string (quotes removed). */
struct hba_tok {
	char text[512];
	bool quoted;
	bool comma_after;	/* directly followed by ',': the list goes on */
};

/* Parsing state of one line. */
struct hba_line {
	const char *p;		/* cursor in the line */
	const char *dir;	/* where @files are */
	const char *why;	/* reason of the first failure */
	const char *note;	/* a warning about a rule that is kept (static string) */
};

/* pgbouncer methods neki's build lacks: the rule is kept as "reject" (fail closed). */
static const char *const hba_unbuilt[] = { "gss", "ldap", "pam" };

static bool
names_add(struct hba_names *nm, const char *name)
{
	char *copy;

	if (nm->n == nm->cap) {
		size_t ncap = nm->cap ? nm->cap * 2 : 4;
		char **nn = realloc(nm->names, ncap * sizeof(*nn));

		if (!nn)
			return false;
		nm->names = nn;
		nm->cap = ncap;
	}
	copy = strdup(name);
	if (!copy)
		return false;
	nm->names[nm->n++] = copy;
	return true;
}

static void
names_free(struct hba_names *nm)
{
	for (size_t i = 0; i < nm->n; i++)
		free(nm->names[i]);
	free(nm->names);
}

/*
 * Next token at l->p (stopping at white space, ',' or '#' outside quotes).
 * False at the end of the line or on an unterminated quote / over-long token.
 */
static bool
line_token(struct hba_line *l, struct hba_tok *t)
{
	const char *p = l->p;
	size_t n = 0;

	while (*p && isspace((unsigned char)*p))
		p++;
	if (*p == '\0' || *p == '#')
		return false;
	t->quoted = false;
	while (*p && !isspace((unsigned char)*p) && *p != ',' && *p != '#') {
		if (*p == '"') {	/* a quoted part; "" inside it is one quote (pgbouncer) */
			t->quoted = true;
			for (p++;; p++) {
				if (*p == '\0') {
					l->why = "unterminated quoted string";
					return false;
				}
				if (*p == '"' && *++p != '"')
					break;
				if (n >= sizeof(t->text) - 1) {
					l->why = "token too long";
					return false;
				}
				t->text[n++] = *p;
			}
			continue;
		}
		if (n >= sizeof(t->text) - 1) {
			l->why = "token too long";
			return false;
		}
		t->text[n++] = *p++;
	}
	t->text[n] = '\0';
	/* "a , b": blanks may stand around the commas of a list (pgbouncer) */
	for (const char *q = p; *q == ' ' || *q == '\t'; q++)
		if (q[1] == ',')
			p = q + 1;
	t->comma_after = *p == ',';
	l->p = *p == ',' ? p + 1 : p;
	return true;
}

/* Add the names listed in <file> (relative to l->dir) to <nm>. */
static bool
names_from_file(struct hba_line *l, const char *file, struct hba_names *nm)
{
	char path[4096], buf[4096];
	FILE *f;
	bool ok = true;

	if (file[0] == '/' || !l->dir)
		snprintf(path, sizeof(path), "%s", file);
	else
		snprintf(path, sizeof(path), "%s/%s", l->dir, file);
	f = fopen(path, "r");
	if (!f) {
		l->why = "could not open @file";
		return false;
	}
	while (ok && fgets(buf, sizeof(buf), f)) {
		struct hba_line sub = { buf, l->dir, NULL, NULL };
		struct hba_tok t;

		while (ok && line_token(&sub, &t))
			ok = names_add(nm, t.text);
		if (sub.why)
			ok = false;
	}
	fclose(f);
	return ok;
}

/* One list element of a DATABASE (<is_db>) or USER field. */
static bool
names_element(struct hba_line *l, const struct hba_tok *t, bool is_db, struct hba_names *nm)
{
	const char *s = t->text;

	if (t->quoted)
		return names_add(nm, s);
	if (strcmp(s, "all") == 0)
		nm->all = true;
	else if (is_db && strcmp(s, "sameuser") == 0)
		nm->sameuser = true;
	else if (is_db && strcmp(s, "replication") == 0)
		nm->replication = true;
	else if (s[0] == '@')
		return names_from_file(l, s + 1, nm);
	else if (s[0] == '+' || strcmp(s, "samerole") == 0 || strcmp(s, "samegroup") == 0) {
		l->why = "group names are not supported";
		return false;
	} else
		return names_add(nm, s);
	return true;
}

/* A whole DATABASE / USER field: elements joined by commas. */
static bool
parse_names(struct hba_line *l, bool is_db, struct hba_names *nm)
{
	struct hba_tok t;

	do {
		if (!line_token(l, &t)) {
			if (!l->why)
				l->why = is_db ? "missing database field" : "missing user field";
			return false;
		}
		if (!names_element(l, &t, is_db, nm))
			return false;
	} while (t.comma_after);
	return true;
}

/* Netmask of <bits> bits into <mask>. */
static bool
mask_from_bits(const char *s, int family, uint8_t mask[16])
{
	char *end;
	long bits;
	int max = family == AF_INET ? 32 : 128;

	errno = 0;
	bits = strtol(s, &end, 10);
	if (errno || *end || end == s || bits < 0 || bits > max)
		return false;
	memset(mask, 0, 16);
	for (long i = 0; i < bits / 8; i++)
		mask[i] = 0xff;
	if (bits % 8)
		mask[bits / 8] = (uint8_t)(0xff << (8 - bits % 8));
	return true;
}

/* ADDRESS [MASK] of a host rule. */
static bool
parse_address(struct hba_line *l, struct hba_rule *r)
{
	struct hba_tok t, m;
	char *slash;

	if (!line_token(l, &t) || t.comma_after) {
		l->why = "missing or invalid address";
		return false;
	}
	if (!t.quoted && strcmp(t.text, "all") == 0)
		return true;	/* family 0: any address */
	slash = strchr(t.text, '/');
	if (slash)
		*slash = '\0';
	if (inet_pton(AF_INET, t.text, r->addr) == 1)
		r->family = AF_INET;
	else if (inet_pton(AF_INET6, t.text, r->addr) == 1)
		r->family = AF_INET6;
	else {
		l->why = "invalid IP address (host names, samehost and samenet are not supported)";
		return false;
	}
	if (slash) {
		if (!mask_from_bits(slash + 1, r->family, r->mask)) {
			l->why = "invalid CIDR mask";
			return false;
		}
	} else if (!line_token(l, &m) || inet_pton(r->family, m.text, r->mask) != 1) {
		l->why = "missing or invalid netmask";
		return false;
	}
	for (int i = 0; i < 16; i++)
		r->addr[i] &= r->mask[i];
	return true;
}

static const struct {
	const char *name;
	enum hba_method method;
} hba_methods[] = {
	{ "trust", HBA_TRUST }, { "reject", HBA_REJECT }, { "md5", HBA_MD5 },
	{ "password", HBA_PLAIN }, { "plain", HBA_PLAIN }, { "scram-sha-256", HBA_SCRAM },
	{ "cert", HBA_CERT }, { "peer", HBA_PEER },
};

/* The hba keyword of <m> (static string). */
const char *
hba_method_str(enum hba_method m)
{
	for (size_t i = 0; i < NK_ARRAY_LEN(hba_methods); i++)
		if (hba_methods[i].method == m)
			return hba_methods[i].name;
	return m == HBA_NO_MATCH ? "no match" : "unknown";
}

/* METHOD and options (only map=NAME). */
static bool
parse_method(struct hba_line *l, struct hba_rule *r)
{
	struct hba_tok t;
	size_t i;

	if (!line_token(l, &t)) {
		l->why = "missing authentication method";
		return false;
	}
	for (i = 0; i < NK_ARRAY_LEN(hba_methods); i++)
		if (strcmp(t.text, hba_methods[i].name) == 0)
			break;
	for (size_t k = 0; i == NK_ARRAY_LEN(hba_methods) && k < NK_ARRAY_LEN(hba_unbuilt); k++) {
		if (strcmp(t.text, hba_unbuilt[k]) != 0)
			continue;
		l->note = "authentication method not supported by this build (no GSSAPI, LDAP or "
			  "PAM): connections matching this line are refused";
		r->method = HBA_REJECT;
		while (line_token(l, &t))
			;	/* its options (include_realm=0, ldapurl=...) do not matter */
		return l->why == NULL;
	}
	if (i == NK_ARRAY_LEN(hba_methods)) {
		l->why = "unsupported authentication method";
		return false;
	}
	r->method = hba_methods[i].method;
	while (line_token(l, &t)) {
		if (strncmp(t.text, "map=", 4) != 0 || r->map) {
			l->why = "unsupported authentication option";
			return false;
		}
		r->map = strdup(t.text + 4);
		if (!r->map)
			return false;
	}
	return l->why == NULL;
}

/* The TYPE keyword. */
static bool
parse_type(const struct hba_tok *t, enum hba_type *type)
{
	static const char *const names[] = { "local", "host", "hostssl", "hostnossl" };

	for (size_t i = 0; i < NK_ARRAY_LEN(names); i++) {
		if (strcmp(t->text, names[i]) == 0) {
			*type = (enum hba_type)i;
			return true;
		}
	}
	return false;
}

static void
rule_cleanup(struct hba_rule *r)
{
	names_free(&r->db);
	names_free(&r->user);
	free(r->map);
}

/* Parse one line into <r>; returns 1 for a rule, 0 for a blank line, -1 on error. */
static int
parse_line(struct hba_line *l, struct hba_rule *r)
{
	struct hba_tok t;

	memset(r, 0, sizeof(*r));
	if (!line_token(l, &t))
		return l->why ? -1 : 0;
	if (!parse_type(&t, &r->type)) {
		l->why = "unknown connection type";
		return -1;
	}
	if (!parse_names(l, true, &r->db) || !parse_names(l, false, &r->user))
		return -1;
	if (r->type != HBA_T_LOCAL && !parse_address(l, r))
		return -1;
	return parse_method(l, r) ? 1 : -1;
}

static bool
hba_add(struct hba *h, const struct hba_rule *r)
{
	if (h->n == h->cap) {
		size_t ncap = h->cap ? h->cap * 2 : 8;
		struct hba_rule *nr = realloc(h->rules, ncap * sizeof(*nr));

		if (!nr)
			return false;
		h->rules = nr;
		h->cap = ncap;
	}
	h->rules[h->n++] = *r;
	return true;
}

/* Parse <text> line by line, keeping the valid rules; caller frees with hba_free(). */
struct hba *
hba_parse(const char *text, const char *dir, hba_warn_fn warn, void *warn_arg)
{
	struct hba *h = calloc(1, sizeof(*h));
	const char *p = text;
	int lineno = 0;

	while (h && *p) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		char *line = strndup(p, len);
		struct hba_line l = { line, dir, NULL, NULL };
		struct hba_rule r;
		int res;

		lineno++;
		p += len + (nl ? 1 : 0);
		if (!line)
			goto oom;
		res = parse_line(&l, &r);
		free(line);
		if (res == 1 && !hba_add(h, &r))
			res = -2;
		if (res < 0) {
			if (warn)
				warn(warn_arg, lineno, l.why ? l.why : "out of memory");
			rule_cleanup(&r);
		} else if (res == 1 && l.note != NULL && warn) {
			warn(warn_arg, lineno, l.note);
		}
	}
	return h;
oom:
	hba_free(h);
	return NULL;
}

/* Read <path> whole; @files are resolved next to it. */
struct hba *
hba_load(const char *path, hba_warn_fn warn, void *warn_arg, struct nk_error *err)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL, *dir, *slash;
	size_t cap = 0;
	ssize_t n;
	struct hba *h;

	if (!f) {
		nk_error_set(err, ERRCODE_UNDEFINED_FILE,
			     "could not open auth_hba_file \"%s\": %s", path,
			     strerror(errno));
		return NULL;
	}
	n = getdelim(&buf, &cap, '\0', f);	/* the whole file (no NULs in text) */
	fclose(f);
	dir = strdup(path);
	slash = dir ? strrchr(dir, '/') : NULL;
	if (slash)
		*slash = '\0';
	h = hba_parse(n > 0 ? buf : "", slash ? dir : ".", warn, warn_arg);
	free(dir);
	free(buf);
	if (!h)
		nk_error_oom(err);
	return h;
}

/* Free <h> and its rules; NULL is fine. */
void
hba_free(struct hba *h)
{
	if (!h)
		return;
	for (size_t i = 0; i < h->n; i++)
		rule_cleanup(&h->rules[i]);
	free(h->rules);
	free(h);
}

/* Number of rules kept (0 for NULL). */
size_t
hba_rule_count(const struct hba *h)
{
	return h ? h->n : 0;
}

static bool
names_contain(const struct hba_names *nm, const char *name)
{
	for (size_t i = 0; i < nm->n; i++)
		if (strcmp(nm->names[i], name) == 0)
			return true;
	return false;
}

/* Does rule <r> apply to <c>'s transport and address? */
static bool
match_addr(const struct hba_rule *r, const struct hba_conn *c)
{
	size_t len;

	if (c->is_unix)
		return r->type == HBA_T_LOCAL;
	if (r->type == HBA_T_LOCAL || (r->type == HBA_T_HOSTSSL && !c->is_tls) ||
	    (r->type == HBA_T_HOSTNOSSL && c->is_tls))
		return false;
	if (r->family == 0)
		return true;
	if (r->family != c->family)
		return false;
	len = r->family == AF_INET ? 4 : 16;
	for (size_t i = 0; i < len; i++)
		if ((c->addr[i] & r->mask[i]) != r->addr[i])
			return false;
	return true;
}

/* Postgres' check_db(): physical replication only matches "replication". */
static bool
match_db(const struct hba_rule *r, const struct hba_conn *c)
{
	if (c->physical_replication)
		return r->db.replication;
	return r->db.all || (r->db.sameuser && strcmp(c->db, c->user) == 0) ||
	       names_contain(&r->db, c->db);
}

/* First-match evaluation as pgbouncer's hba_eval(); <map> borrows from <h>. */
enum hba_method
hba_match(const struct hba *h, const struct hba_conn *c, const char **map)
{
	if (map)
		*map = NULL;
	for (size_t i = 0; h && i < h->n; i++) {
		const struct hba_rule *r = &h->rules[i];

		if (!match_addr(r, c) || !match_db(r, c))
			continue;
		if (!r->user.all && !names_contain(&r->user, c->user))
			continue;
		if (map)
			*map = r->map;
		return r->method;
	}
	return HBA_NO_MATCH;
}

/* See neki/auth.h. */
enum auth_exchange
auth_pick_exchange(enum hba_method method, const char *secret)
{
	switch (method) {
	case HBA_TRUST:
		return AUTH_X_NONE;
	case HBA_PLAIN:
		return AUTH_X_CLEARTEXT;
	case HBA_MD5:
		if (secret && auth_secret_kind(secret) == AUTH_SECRET_SCRAM)
			return AUTH_X_SCRAM;
		return AUTH_X_MD5;
	case HBA_SCRAM:
		return AUTH_X_SCRAM;
	case HBA_CERT:
		return AUTH_X_CERT;
	case HBA_PEER:
		return AUTH_X_PEER;
	case HBA_REJECT:
	case HBA_NO_MATCH:
	default:
		return AUTH_X_REJECT;
	}
}
