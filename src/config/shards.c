/*
 * shards.c - the [shards] section: "shard_uid = <libpq connection string>".
 *
 * The string is libpq's key=value form: blanks around '=' allowed, a value bare (up
 * to the next blank) or single-quoted, a backslash escaping the next character in
 * both. Only libpq's keywords are accepted. host, port, dbname, user, password and
 * sslmode are copied out (port and host may be comma lists for several hosts; the
 * first port is kept in cfg_shard.port); the string itself is kept as written and
 * is what the backend connector hands to libpq. neki's own keys replicas= and rdonly= list
 * the shard's standbys (shard_servers.c; the key=value form only). The URI form
 * postgresql://[user[:password]@][host[:port],...][/dbname][?key=value&...] is read
 * too (%XX escapes decoded). Entry point: sections_shard_add().
 */
#include "neki/base.h"

#include "config_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* libpq's connection keywords (Postgres 15 to 17). */
static const char *const shard_libpq_keys[] = {
	"host", "hostaddr", "port", "dbname", "user", "password", "passfile",
	"channel_binding", "connect_timeout", "client_encoding", "options",
	"application_name", "fallback_application_name", "keepalives", "keepalives_idle",
	"keepalives_interval", "keepalives_count", "tcp_user_timeout", "replication",
	"gssencmode", "sslmode", "sslnegotiation", "requiressl", "sslcompression", "sslcert",
	"sslkey", "sslpassword", "sslcertmode", "sslrootcert", "sslcrl", "sslcrldir", "sslsni",
	"requirepeer", "require_auth", "ssl_min_protocol_version", "ssl_max_protocol_version",
	"krbsrvname", "gsslib", "gssdelegation", "service", "target_session_attrs",
	"load_balance_hosts", NULL
};

static const char *const shard_sslmodes[] = {
	"disable", "allow", "prefer", "require", "verify-ca", "verify-full", NULL
};

/* True when <key> is a libpq keyword (case-sensitive, as libpq). */
static bool
shard_is_libpq_key(const char *key)
{
	for (int i = 0; shard_libpq_keys[i]; i++) {
		if (strcmp(shard_libpq_keys[i], key) == 0)
			return true;
	}
	return false;
}

/* Fill <err>: the connection string of shard <uid> is malformed because <why>. */
static bool
shard_error(struct nk_error *err, const char *uid, const char *why)
{
	nk_error_set(err, CFG_SQLSTATE, "invalid connection string for shard \"%s\": %s",
		     uid, why);
	nk_error_hint(err, "write a libpq key=value connection string such as "
		      "host=10.0.0.5 port=5432 dbname=app user=neki");
	return false;
}

/* Skip whitespace (libpq treats any as a separator). */
static const char *
shard_skip_blank(const char *p)
{
	while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
		p++;
	return p;
}

static bool
shard_is_blank(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r';
}

/*
 * Read a value at <*pp> (libpq rules) into a new string. Returns NULL with <*bad>
 * true on an unterminated quote, or with <*bad> false when out of memory.
 */
static char *
shard_read_value(const char **pp, bool *bad)
{
	const char *p = *pp;
	bool quoted = *p == '\'';
	char *out = malloc(strlen(p) + 1), *o = out;

	*bad = false;
	if (!out)
		return NULL;
	if (quoted)
		p++;
	while (*p && (quoted ? *p != '\'' : !shard_is_blank(*p))) {
		if (*p == '\\' && p[1])
			p++;
		*o++ = *p++;
	}
	if (quoted && *p != '\'') {
		free(out);
		*bad = true;
		return NULL;
	}
	*o = '\0';
	*pp = quoted ? p + 1 : p;
	return out;
}

/* Check a comma list of ports; store the first into <*first>. */
static bool
shard_parse_ports(const char *val, int *first)
{
	char *copy = strdup(val), *save = NULL;
	bool ok = copy != NULL;
	int64_t n;

	*first = 0;
	for (char *t = ok ? strtok_r(copy, ",", &save) : NULL; t; t = strtok_r(NULL, ",", &save)) {
		if (!settings_parse_int(t, 1, 65535, &n)) {
			ok = false;
			break;
		}
		if (*first == 0)
			*first = (int)n;
	}
	free(copy);
	return ok && *first != 0;
}

/* Keep the value of a key neki reads (<val> is consumed). */
static bool
shard_take(struct cfg_shard *s, const char *key, char *val, struct nk_error *err)
{
	char **dst = NULL;

	if (strcmp(key, "port") == 0) {
		bool ok = shard_parse_ports(val, &s->port);

		free(val);
		return ok || shard_error(err, s->uid, "port must be a number from 1 to 65535 "
					 "(or a comma list of them)");
	}
	if (strcmp(key, "sslmode") == 0 && settings_enum_index(shard_sslmodes, val) < 0) {
		free(val);
		return shard_error(err, s->uid, "sslmode must be disable, allow, prefer, "
				   "require, verify-ca or verify-full");
	}
	if (strcmp(key, "host") == 0)
		dst = &s->host;
	else if (strcmp(key, "dbname") == 0)
		dst = &s->dbname;
	else if (strcmp(key, "user") == 0)
		dst = &s->user;
	else if (strcmp(key, "password") == 0)
		dst = &s->password;
	else if (strcmp(key, "sslmode") == 0)
		dst = &s->sslmode;
	if (!dst) {
		free(val);
		return true;
	}
	free(*dst);
	*dst = val;
	return true;
}

/* What shard_parse() learns of the keys besides their values. */
struct shard_seen {
	bool neki_key;		/* the last pair was replicas= / rdonly= (not for libpq) */
	bool hostaddr;		/* a hostaddr= was given */
};

/* Read one "key = value" at <*pp> into <s>. */
static bool
shard_parse_pair(struct cfg_shard *s, const char **pp, struct shard_seen *seen,
		 struct nk_error *err)
{
	const char *p = *pp, *k = p;
	char key[64], *val;
	bool bad;

	while (*p && *p != '=' && !shard_is_blank(*p))
		p++;
	if ((size_t)(p - k) >= sizeof(key))
		return shard_error(err, s->uid, "a keyword is too long");
	memcpy(key, k, (size_t)(p - k));
	key[p - k] = '\0';
	p = shard_skip_blank(p);
	if (*p != '=' || key[0] == '\0')
		return shard_error(err, s->uid, "expected \"=\" after a keyword");
	seen->neki_key = strcmp(key, "replicas") == 0 || strcmp(key, "rdonly") == 0;
	seen->hostaddr |= strcmp(key, "hostaddr") == 0;
	if (!seen->neki_key && !shard_is_libpq_key(key)) {
		nk_error_set(err, CFG_SQLSTATE, "unrecognized connection parameter: %s", key);
		nk_error_detail(err, "shard \"%s\" takes a libpq connection string; host, port, "
				"dbname, user, password, sslmode and the other libpq keywords "
				"are accepted", s->uid);
		return false;
	}
	p = shard_skip_blank(p + 1);
	val = shard_read_value(&p, &bad);
	if (!val)
		return bad ? shard_error(err, s->uid, "unterminated quoted string")
			   : nk_error_set(err, CFG_SQLSTATE, "out of memory");
	*pp = shard_skip_blank(p);
	if (seen->neki_key) {
		bool ok = shard_servers_add(s, key, val, err);

		free(val);
		return ok;
	}
	return shard_take(s, key, val, err);
}

/* Free the strings of <s> and zero it. */
static void
shard_clear(struct cfg_shard *s)
{
	free(s->uid);
	free(s->conninfo);
	free(s->host);
	free(s->dbname);
	free(s->user);
	free(s->password);
	free(s->sslmode);
	shard_servers_free(s);
	memset(s, 0, sizeof(*s));
}

/* The value of one hex digit, or -1. */
static int
shard_hex(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/*
 * Decode the <len> bytes at <p> (URI %XX escapes) into a new string. Returns NULL
 * with <*oom> false on a bad escape, or with <*oom> true when out of memory.
 */
static char *
shard_pct_decode(const char *p, size_t len, bool *oom)
{
	char *out = malloc(len + 1), *o = out;

	*oom = out == NULL;
	for (size_t i = 0; out && i < len; i++) {
		if (p[i] != '%') {
			*o++ = p[i];
			continue;
		}
		if (i + 2 >= len || shard_hex(p[i + 1]) < 0 || shard_hex(p[i + 2]) < 0) {
			free(out);
			return NULL;
		}
		*o++ = (char)(shard_hex(p[i + 1]) * 16 + shard_hex(p[i + 2]));
		i += 2;
	}
	if (out)
		*o = '\0';
	return out;
}

/* Decode <len> bytes at <p> and hand them to shard_take() as <key>. */
static bool
shard_take_decoded(struct cfg_shard *s, const char *key, const char *p, size_t len,
		   struct nk_error *err)
{
	bool oom;
	char *val = shard_pct_decode(p, len, &oom);

	if (!val)
		return oom ? nk_error_set(err, CFG_SQLSTATE, "out of memory")
			   : shard_error(err, s->uid, "bad %-escape in the URI");
	return shard_take(s, key, val, err);
}

/* "user[:password]" of a URI. */
static bool
shard_uri_userinfo(struct cfg_shard *s, const char *p, size_t len, struct nk_error *err)
{
	const char *colon = memchr(p, ':', len);
	size_t ulen = colon ? (size_t)(colon - p) : len;

	if (ulen > 0 && !shard_take_decoded(s, "user", p, ulen, err))
		return false;
	if (colon && !shard_take_decoded(s, "password", colon + 1, len - ulen - 1, err))
		return false;
	return true;
}

/*
 * Split one "host[:port]" or "[v6][:port]" item of a URI's host list: the host
 * (without brackets) is <*host>/<*hlen>, the port <*port>/<*plen> (NULL/0 if none).
 */
static bool
shard_uri_host_item(const char *p, size_t len, const char **host, size_t *hlen,
		    const char **port, size_t *plen)
{
	const char *end = p + len, *colon;

	*host = p;
	*port = NULL;
	*plen = 0;
	if (len > 0 && *p == '[') {
		const char *close = memchr(p, ']', len);

		if (!close || (close + 1 < end && close[1] != ':'))
			return false;
		*host = p + 1;
		*hlen = (size_t)(close - p - 1);
		colon = close + 1 < end ? close + 1 : NULL;
	} else {
		colon = memchr(p, ':', len);
		*hlen = colon ? (size_t)(colon - p) : len;
	}
	if (colon) {
		*port = colon + 1;
		*plen = (size_t)(end - *port);
	}
	return true;
}

/* The comma list of hosts (with optional ports) of a URI; hosts joined by ",". */
static bool
shard_uri_hosts(struct cfg_shard *s, const char *p, size_t len, struct nk_error *err)
{
	char hosts[1024] = "", ports[256] = "";
	const char *end = p + len;

	while (p < end) {
		const char *comma = memchr(p, ',', (size_t)(end - p)), *host, *port;
		size_t ilen = comma ? (size_t)(comma - p) : (size_t)(end - p), hlen, plen;

		if (!shard_uri_host_item(p, ilen, &host, &hlen, &port, &plen))
			return shard_error(err, s->uid, "bad host in the URI");
		if (strlen(hosts) + hlen + 2 > sizeof(hosts) || strlen(ports) + plen + 2 > sizeof(ports))
			return shard_error(err, s->uid, "the URI's host list is too long");
		snprintf(hosts + strlen(hosts), sizeof(hosts) - strlen(hosts), "%s%.*s",
			 hosts[0] ? "," : "", (int)hlen, host);
		if (plen > 0)
			snprintf(ports + strlen(ports), sizeof(ports) - strlen(ports), "%s%.*s",
				 ports[0] ? "," : "", (int)plen, port);
		p += ilen + (comma ? 1 : 0);
	}
	if (hosts[0] && !shard_take_decoded(s, "host", hosts, strlen(hosts), err))
		return false;
	return !ports[0] || shard_take_decoded(s, "port", ports, strlen(ports), err);
}

/* "key=value&..." after the "?" of a URI; keys must be libpq keywords. */
static bool
shard_uri_params(struct cfg_shard *s, const char *p, struct nk_error *err)
{
	while (*p) {
		size_t len = strcspn(p, "&");
		const char *eq = memchr(p, '=', len);
		char key[64];

		if (!eq || eq == p || (size_t)(eq - p) >= sizeof(key))
			return shard_error(err, s->uid, "a URI parameter is not key=value");
		memcpy(key, p, (size_t)(eq - p));
		key[eq - p] = '\0';
		if (strcmp(key, "replicas") == 0 || strcmp(key, "rdonly") == 0)
			return shard_error(err, s->uid, "replicas= and rdonly= are read in the "
					   "key=value form only, not in a URI");
		if (!shard_is_libpq_key(key)) {
			nk_error_set(err, CFG_SQLSTATE, "unrecognized connection parameter: %s", key);
			nk_error_detail(err, "shard \"%s\" takes a libpq connection string", s->uid);
			return false;
		}
		if (!shard_take_decoded(s, key, eq + 1, len - (size_t)(eq + 1 - p), err))
			return false;
		p += len + (p[len] == '&' ? 1 : 0);
	}
	return true;
}

/* A libpq connection URI: postgresql://[user[:password]@][hosts][/dbname][?params]. */
static bool
shard_parse_uri(struct cfg_shard *s, const char *uri, struct nk_error *err)
{
	const char *p = strstr(uri, "://") + 3;
	size_t netlen = strcspn(p, "/?");
	const char *at = NULL;

	for (size_t i = 0; i < netlen; i++) {
		if (p[i] == '@')
			at = p + i;
	}
	if (at) {
		if (!shard_uri_userinfo(s, p, (size_t)(at - p), err))
			return false;
		netlen -= (size_t)(at + 1 - p);
		p = at + 1;
	}
	if (!shard_uri_hosts(s, p, netlen, err))
		return false;
	p += netlen;
	if (*p == '/') {
		size_t dlen = strcspn(++p, "?");

		if (dlen > 0 && !shard_take_decoded(s, "dbname", p, dlen, err))
			return false;
		p += dlen;
	}
	return *p != '?' || shard_uri_params(s, p + 1, err);
}

/*
 * Parse <conninfo> into <s> (whose uid is set); the pairs neki reads itself (replicas=,
 * rdonly=) are left out of the string kept for libpq.
 */
static bool
shard_parse(struct cfg_shard *s, const char *conninfo, struct nk_error *err)
{
	const char *p = shard_skip_blank(conninfo);
	struct shard_seen seen = { false, false };
	char *base;
	bool ok = true;

	if (*p == '\0')
		return shard_error(err, s->uid, "the connection string is empty");
	if (strncmp(p, "postgresql://", 13) == 0 || strncmp(p, "postgres://", 11) == 0)
		return shard_parse_uri(s, p, err) && shard_servers_finish(s, s->conninfo, false, err);
	if ((base = calloc(1, strlen(p) + 2)) == NULL)
		return nk_error_set(err, CFG_SQLSTATE, "out of memory");
	while (*p && ok) {
		const char *start = p;

		ok = shard_parse_pair(s, &p, &seen, err);
		if (ok && !seen.neki_key)
			strncat(base, start, (size_t)(p - start));
	}
	while (base[0] != '\0' && base[strlen(base) - 1] == ' ')
		base[strlen(base) - 1] = '\0';
	ok = ok && shard_servers_finish(s, base, seen.hostaddr, err);
	free(base);
	return ok;
}

/*
 * Add the [shards] entry <uid> = <conninfo>. Returns false with <err> set on a
 * malformed string, an unknown keyword, a bad port or sslmode, or a uid declared twice.
 */
bool
sections_shard_add(struct cfg *c, const char *uid, const char *conninfo, struct nk_error *err)
{
	struct cfg_shard s = { .port = 5432 }, *slot;

	if (cfg_shard_find(c, uid))
		return nk_error_set(err, CFG_SQLSTATE, "shard \"%s\" is declared twice", uid);
	s.uid = strdup(uid);
	s.conninfo = strdup(conninfo);
	if (!s.uid || !s.conninfo) {
		shard_clear(&s);
		return nk_error_set(err, CFG_SQLSTATE, "out of memory");
	}
	if (!shard_parse(&s, conninfo, err)) {
		shard_clear(&s);
		return false;
	}
	slot = realloc(c->shards, (c->n_shards + 1) * sizeof(s));
	if (!slot) {
		shard_clear(&s);
		return nk_error_set(err, CFG_SQLSTATE, "out of memory");
	}
	c->shards = slot;
	c->shards[c->n_shards++] = s;
	return true;
}
