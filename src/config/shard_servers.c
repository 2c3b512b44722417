/*
 * shard_servers.c - the servers of a [shards] entry: the primary its host= / port= name,
 * and the standbys of its replicas= and rdonly= keys (neki's own keys, not libpq's).
 *
 *   shard-a = host=10.0.0.1 port=5432 replicas=10.0.0.2:5432,10.0.0.3 rdonly=10.0.0.4
 *
 * Each item is a host name, an address ([v6] in brackets when a port follows) or a Unix
 * socket directory (starting with /), with an optional :port (default: the primary's
 * port). Every other key of the string applies to every server. With standbys, the
 * string kept for libpq (cfg_shard.conninfo) names every server with
 * target_session_attrs=read-write, so the admin's connections find the primary after a
 * promotion. Entry points: shard_servers_add(), shard_servers_finish().
 */
#include "neki/base.h"

#include "config_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Fill <err>: item <item> of <key> of shard <uid> is unusable because <why>. */
static bool
servers_error(struct nk_error *err, const char *uid, const char *key, const char *item,
	      const char *why)
{
	nk_error_set(err, CFG_SQLSTATE, "invalid %s for shard \"%s\": \"%s\" %s", key, uid,
		     item, why);
	nk_error_hint(err, "write %s=host[:port],... (a host name, an address, [v6]:port or a "
		      "Unix socket directory), e.g. %s=10.0.0.2:5432,10.0.0.3", key, key);
	return false;
}

/* Split "host[:port]" / "[v6][:port]" / "/dir[:port]": <host> gets the host, *port the
 * port (0 = none). False when malformed. */
static bool
servers_split(char *item, char **host, int *port)
{
	char *colon;
	int64_t n;

	*port = 0;
	*host = item;
	if (item[0] == '[') {
		char *close = strchr(item, ']');

		if (close == NULL || close == item + 1 || (close[1] != '\0' && close[1] != ':'))
			return false;
		*close = '\0';
		*host = item + 1;
		colon = close[1] == ':' ? close + 1 : NULL;
	} else {
		colon = strrchr(item, ':');
		if (colon != NULL && item[0] != '/' && strchr(item, ':') != colon)
			colon = NULL;		/* a bare IPv6 address: no port */
	}
	if (colon == NULL)
		return **host != '\0';
	*colon = '\0';
	if (!settings_parse_int(colon + 1, 1, 65535, &n))
		return false;
	*port = (int)n;
	return **host != '\0';
}

/* Append a server to <s>; false when out of memory (<err> set). */
static bool
servers_push(struct cfg_shard *s, const char *host, int port, enum cfg_server_kind kind,
	     struct nk_error *err)
{
	struct cfg_server *v = realloc(s->servers, (s->n_servers + 1) * sizeof(*v));

	if (v == NULL)
		return nk_error_set(err, CFG_SQLSTATE, "out of memory");
	s->servers = v;
	v[s->n_servers].host = host != NULL ? strdup(host) : NULL;
	v[s->n_servers].port = port;
	v[s->n_servers].kind = kind;
	v[s->n_servers].conninfo = NULL;
	if (host != NULL && v[s->n_servers].host == NULL)
		return nk_error_set(err, CFG_SQLSTATE, "out of memory");
	s->n_servers++;
	return true;
}

/* shard_servers_add: see config_int.h. */
bool
shard_servers_add(struct cfg_shard *s, const char *key, const char *list, struct nk_error *err)
{
	enum cfg_server_kind kind = strcmp(key, "rdonly") == 0 ? CFG_SRV_RDONLY : CFG_SRV_REPLICA;
	char *copy = strdup(list), *save = NULL, *host;
	bool ok = true;
	int port;

	if (copy == NULL)
		return nk_error_set(err, CFG_SQLSTATE, "out of memory");
	if (list[0] == '\0' || list[0] == ',' || list[strlen(list) - 1] == ',' ||
	    strstr(list, ",,") != NULL)
		ok = servers_error(err, s->uid, key, list, "has an empty item");
	for (char *t = ok ? strtok_r(copy, ",", &save) : NULL; ok && t != NULL;
	     t = strtok_r(NULL, ",", &save)) {
		char item[256];

		snprintf(item, sizeof(item), "%s", t);
		if (!servers_split(t, &host, &port))
			ok = servers_error(err, s->uid, key, item, "is not host[:port] with a port "
					   "from 1 to 65535");
		else if (s->n_servers + 2 > CFG_SHARD_SERVERS_MAX)
			ok = servers_error(err, s->uid, key, item, "is one server too many (a shard "
					   "has at most 16)");
		else
			ok = servers_push(s, host, port, kind, err);
	}
	free(copy);
	return ok;
}

/* cfg_conninfo_put_quoted: see neki/config.h. */
void
cfg_conninfo_put_quoted(char *buf, size_t cap, const char *v)
{
	size_t n = strlen(buf);

	if (n + 1 < cap)
		buf[n++] = '\'';
	for (; *v && n + 3 < cap; v++) {
		if (*v == '\'' || *v == '\\')
			buf[n++] = '\\';
		buf[n++] = *v;
	}
	if (n + 1 < cap)
		buf[n++] = '\'';
	buf[n] = '\0';
}

/* Each server's own string: <base>, its host and port, any role. */
static bool
servers_own_conninfo(struct cfg_shard *s, const char *base, struct nk_error *err)
{
	for (size_t i = 0; i < s->n_servers; i++) {
		struct cfg_server *v = &s->servers[i];
		size_t cap = strlen(base) + 2 * strlen(v->host) + 80;

		free(v->conninfo);
		if ((v->conninfo = malloc(cap)) == NULL)
			return nk_error_set(err, CFG_SQLSTATE, "out of memory");
		snprintf(v->conninfo, cap, "%s host=", base);
		cfg_conninfo_put_quoted(v->conninfo, cap, v->host);
		snprintf(v->conninfo + strlen(v->conninfo), cap - strlen(v->conninfo),
			 " port=%d target_session_attrs=any", v->port);
	}
	return true;
}

/* The libpq string: <base> (without neki's keys), then every server with read-write. */
static bool
servers_conninfo(struct cfg_shard *s, const char *base, struct nk_error *err)
{
	size_t cap = strlen(base) + 128;
	char *out, ports[16 * CFG_SHARD_SERVERS_MAX] = "", *hosts;

	for (size_t i = 0; i < s->n_servers; i++)
		cap += 2 * strlen(s->servers[i].host) + 8;
	hosts = calloc(1, cap);
	out = malloc(cap * 2);
	if (hosts == NULL || out == NULL) {
		free(hosts);
		free(out);
		return nk_error_set(err, CFG_SQLSTATE, "out of memory");
	}
	for (size_t i = 0; i < s->n_servers; i++) {
		snprintf(hosts + strlen(hosts), cap - strlen(hosts), "%s%s", i ? "," : "",
			 s->servers[i].host);
		snprintf(ports + strlen(ports), sizeof(ports) - strlen(ports), "%s%d", i ? "," : "",
			 s->servers[i].port);
	}
	snprintf(out, cap * 2, "%s host=", base);
	cfg_conninfo_put_quoted(out, cap * 2, hosts);
	snprintf(out + strlen(out), cap * 2 - strlen(out), " port=%s "
		 "target_session_attrs=read-write", ports);
	free(hosts);
	free(s->conninfo);
	s->conninfo = out;
	return true;
}

/* shard_servers_finish: see config_int.h. */
bool
shard_servers_finish(struct cfg_shard *s, const char *base, bool hostaddr,
		     struct nk_error *err)
{
	size_t n = s->n_servers;
	struct cfg_server primary;

	if (!servers_push(s, s->host, s->port, CFG_SRV_PRIMARY, err))
		return false;
	primary = s->servers[n];
	memmove(&s->servers[1], &s->servers[0], n * sizeof(s->servers[0]));
	s->servers[0] = primary;
	for (size_t i = 1; i < s->n_servers; i++)
		if (s->servers[i].port == 0)
			s->servers[i].port = s->port;
	if (s->n_servers == 1)
		return (s->servers[0].conninfo = strdup(s->conninfo)) != NULL ||
		       nk_error_set(err, CFG_SQLSTATE, "out of memory");
	if (s->host == NULL || strchr(s->host, ',') != NULL || hostaddr) {
		nk_error_set(err, CFG_SQLSTATE, "shard \"%s\" lists standbys but does not name "
			     "one primary host", s->uid);
		nk_error_hint(err, "with replicas= or rdonly=, write host= (one host, no list) "
			      "and no hostaddr=: the primary is that host");
		return false;
	}
	for (size_t i = 0; i < s->n_servers; i++)
		for (size_t j = 0; j < i; j++)
			if (strcmp(s->servers[i].host, s->servers[j].host) == 0 &&
			    s->servers[i].port == s->servers[j].port) {
				nk_error_set(err, CFG_SQLSTATE, "shard \"%s\" names server %s:%d "
					     "twice", s->uid, s->servers[i].host,
					     s->servers[i].port);
				return false;
			}
	return servers_own_conninfo(s, base, err) && servers_conninfo(s, base, err);
}

/* shard_servers_free: see config_int.h. */
void
shard_servers_free(struct cfg_shard *s)
{
	for (size_t i = 0; i < s->n_servers; i++) {
		free(s->servers[i].host);
		free(s->servers[i].conninfo);
	}
	free(s->servers);
	s->servers = NULL;
	s->n_servers = 0;
}

/* shard_servers_copy: see config_int.h. */
bool
shard_servers_copy(struct cfg_shard *dst, const struct cfg_shard *src)
{
	dst->servers = calloc(src->n_servers ? src->n_servers : 1, sizeof(*dst->servers));
	dst->n_servers = 0;
	if (dst->servers == NULL)
		return false;
	for (size_t i = 0; i < src->n_servers; i++) {
		dst->servers[i] = src->servers[i];
		dst->servers[i].host = dst->servers[i].conninfo = NULL;
		dst->n_servers++;
		if ((src->servers[i].host != NULL &&
		     (dst->servers[i].host = strdup(src->servers[i].host)) == NULL) ||
		    (src->servers[i].conninfo != NULL &&
		     (dst->servers[i].conninfo = strdup(src->servers[i].conninfo)) == NULL))
			return false;
	}
	return true;
}
