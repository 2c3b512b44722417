/*
 * sections.c - the [databases], [users], [peers] and [shards] entries.
 *
 * [databases], [users] and [peers] lines are "name = key=value key='quoted '' value'"
 * in pgbouncer's own connection-string syntax: a value is bare (up to the next
 * blank) or single-quoted with '' standing for a quote; empty values are refused;
 * only pgbouncer's keys are accepted (plus neki's topology=yes|no and target= on databases).
 * [shards] lines are "shard_uid = <libpq connection string>" in libpq's key=value
 * syntax (backslash escapes); host, port, dbname, user, password and sslmode are
 * taken out of it and the string is kept as written. A later line with the same
 * database, user or peer name replaces the earlier one (as in pgbouncer); a shard
 * uid may be declared once. Entry points: sections_*_add(), sections_free() and
 * the cfg_*_find() lookups.
 */
#include "neki/base.h"

#include "config_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DB(f) offsetof(struct cfg_database, f)
#define USR(f) offsetof(struct cfg_user, f)
#define PEER(f) offsetof(struct cfg_peer, f)

/* pgbouncer's 22 [databases] keys, the reserve_pool alias and neki's topology and target. */
static const struct sections_key sect_db_keys[] = {
	{ "dbname", SECTIONS_K_STR, DB(dbname),
	  "server-side database name (default: the entry name; for \"*\", the name the "
	  "client asked for)" },
	{ "host", SECTIONS_K_STR, DB(host),
	  "server host name or IP address, a Unix socket directory (starting with /), an "
	  "@abstract socket, or a comma list of them (default: the Unix socket in "
	  "unix_socket_dir)" },
	{ "port", SECTIONS_K_PORT_LIST, DB(port),
	  "server port (default 5432), or a comma list with one port per host of the host list" },
	{ "user", SECTIONS_K_STR, DB(user),
	  "forced user: every client of this database logs in to the server as this user, "
	  "one pool per database" },
	{ "password", SECTIONS_K_STR, DB(password),
	  "password of the forced user (default: the one in auth_file)" },
	{ "auth_user", SECTIONS_K_STR, DB(auth_user),
	  "user that runs auth_query for this database (overrides auth_user)" },
	{ "auth_query", SECTIONS_K_STR, DB(auth_query),
	  "query that loads passwords for this database (overrides auth_query)" },
	{ "auth_dbname", SECTIONS_K_STR, DB(auth_dbname),
	  "database in which auth_query runs for this database (overrides auth_dbname)" },
	{ "pool_size", SECTIONS_K_COUNT, DB(pool_size),
	  "server connections per pool of this database (overrides default_pool_size)" },
	{ "min_pool_size", SECTIONS_K_COUNT, DB(min_pool_size),
	  "overrides min_pool_size for this database" },
	{ "reserve_pool_size", SECTIONS_K_COUNT, DB(reserve_pool_size),
	  "overrides reserve_pool_size for this database" },
	{ "reserve_pool", SECTIONS_K_COUNT, DB(reserve_pool_size),
	  "alias of reserve_pool_size" },
	{ "max_db_connections", SECTIONS_K_COUNT, DB(max_db_connections),
	  "overrides max_db_connections for this database (0 or less: the global value)" },
	{ "max_db_client_connections", SECTIONS_K_COUNT, DB(max_db_client_connections),
	  "overrides max_db_client_connections for this database (0 or less: the global value)" },
	{ "pool_mode", SECTIONS_K_POOL_MODE, DB(pool_mode),
	  "overrides pool_mode (session, transaction, statement); a [users] pool_mode wins" },
	{ "server_lifetime", SECTIONS_K_TIME, DB(server_lifetime),
	  "overrides server_lifetime (seconds)" },
	{ "query_wait_timeout", SECTIONS_K_TIME, DB(query_wait_timeout),
	  "overrides query_wait_timeout (seconds)" },
	{ "load_balance_hosts", SECTIONS_K_LOAD_BALANCE, DB(load_balance_hosts),
	  "round-robin (default): use the hosts of a comma list in turn; disable: try them "
	  "in order" },
	{ "target_session_attrs", SECTIONS_K_TARGET_ATTRS, DB(target_session_attrs),
	  "any (default), read-write, read-only, primary or standby: a server of the host list "
	  "that does not qualify after login is closed and the next host is tried" },
	{ "connect_query", SECTIONS_K_STR, DB(connect_query),
	  "query run once on every new server connection" },
	{ "client_encoding", SECTIONS_K_STR, DB(client_encoding),
	  "client_encoding sent to the server at connect time" },
	{ "datestyle", SECTIONS_K_STR, DB(datestyle),
	  "DateStyle sent to the server at connect time" },
	{ "timezone", SECTIONS_K_STR, DB(timezone),
	  "TimeZone sent to the server at connect time" },
	{ "application_name", SECTIONS_K_STR, DB(application_name),
	  "application_name sent to the server at connect time" },
	{ "topology", SECTIONS_K_BOOL, DB(topology),
	  "yes: a sharded logical database routed by the data topology (neki); no "
	  "(default): a plain pooled database, unless the published topology's databases "
	  "name it (then it is sharded all the same)" },
	{ "target", SECTIONS_K_READ_TARGET, DB(read_target),
	  "primary (default), replica or rdonly: the __neki.target a session of this sharded "
	  "database starts with (neki; SET and startup options change it)" },
	{ "tx_mode", SECTIONS_K_TX_MODE, DB(tx_mode),
	  "multi (default), single or atomic: the __neki.tx_mode a session of this sharded "
	  "database starts with (neki; SET and startup options change it; atomic is checked "
	  "on the shards at the session's first commit needing two-phase commit)" },
	{ NULL, SECTIONS_K_STR, 0, NULL },
};

/* pgbouncer's 10 [users] keys. */
static const struct sections_key sect_user_keys[] = {
	{ "pool_mode", SECTIONS_K_POOL_MODE, USR(pool_mode),
	  "pool mode of this user's pools (wins over the database and the global setting)" },
	{ "pool_size", SECTIONS_K_COUNT, USR(pool_size),
	  "server connections per pool of this user (wins over the database and "
	  "default_pool_size)" },
	{ "reserve_pool_size", SECTIONS_K_COUNT, USR(reserve_pool_size),
	  "overrides reserve_pool_size for this user" },
	{ "max_user_connections", SECTIONS_K_COUNT, USR(max_user_connections),
	  "overrides max_user_connections for this user (0 or less: the global value)" },
	{ "max_user_client_connections", SECTIONS_K_COUNT, USR(max_user_client_connections),
	  "overrides max_user_client_connections for this user (0 or less: the global value)" },
	{ "query_timeout", SECTIONS_K_TIME, USR(query_timeout),
	  "overrides query_timeout (seconds)" },
	{ "query_wait_timeout", SECTIONS_K_TIME, USR(query_wait_timeout),
	  "overrides query_wait_timeout (seconds)" },
	{ "idle_transaction_timeout", SECTIONS_K_TIME, USR(idle_transaction_timeout),
	  "overrides idle_transaction_timeout (seconds)" },
	{ "transaction_timeout", SECTIONS_K_TIME, USR(transaction_timeout),
	  "overrides transaction_timeout (seconds)" },
	{ "client_idle_timeout", SECTIONS_K_TIME, USR(client_idle_timeout),
	  "overrides client_idle_timeout (seconds)" },
	{ NULL, SECTIONS_K_STR, 0, NULL },
};

/* pgbouncer's 3 [peers] keys. */
static const struct sections_key sect_peer_keys[] = {
	{ "host", SECTIONS_K_STR, PEER(host),
	  "host name, IP address or Unix socket directory of the peer (required)" },
	{ "port", SECTIONS_K_PORT, PEER(port),
	  "port of the peer (default 6432)" },
	{ "pool_size", SECTIONS_K_COUNT, PEER(pool_size),
	  "maximum cancel requests forwarded to the peer at once (default: "
	  "default_pool_size)" },
	{ NULL, SECTIONS_K_STR, 0, NULL },
};

/* The key table of <section> ("databases", "users", "peers"), or NULL. */
const struct sections_key *
sections_keys(const char *section)
{
	if (strcmp(section, "databases") == 0)
		return sect_db_keys;
	if (strcmp(section, "users") == 0)
		return sect_user_keys;
	if (strcmp(section, "peers") == 0)
		return sect_peer_keys;
	return NULL;
}

/* One section's parsing context, for messages. */
struct sect_ctx {
	const char *what;		/* "database", "user", "peer" */
	const char *name;		/* the entry name */
	const char *unknown;		/* message prefix for an unknown key */
	const struct sections_key *keys;
	void *entry;			/* the entry being filled */
};

/* Skip spaces and tabs. */
static const char *
sections_skip_blank(const char *p)
{
	while (*p == ' ' || *p == '\t')
		p++;
	return p;
}

/* Fill <err> with a connection-string syntax error of <ctx>; DETAIL from <fmt>. */
static bool NK_PRINTF(3, 4)
sections_syntax_error(const struct sect_ctx *ctx, struct nk_error *err, const char *fmt, ...)
{
	char detail[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	nk_error_set(err, CFG_SQLSTATE, "syntax error in connection string of %s \"%s\"",
		     ctx->what, ctx->name);
	nk_error_detail(err, "%s", detail);
	nk_error_hint(err, "write key=value pairs separated by blanks; quote a value "
		      "with blanks as 'value' and a quote inside it as ''");
	return false;
}

/* Read a single-quoted value ('' = one quote) after the opening quote at <*pp>. */
static char *
sections_quoted_value(const char **pp)
{
	const char *p = *pp + 1;
	char *out = malloc(strlen(p) + 1), *o = out;

	if (!out)
		return NULL;
	for (;;) {
		if (*p == '\0') {
			free(out);
			return NULL;
		}
		if (*p == '\'') {
			if (p[1] != '\'')
				break;
			p++;
		}
		*o++ = *p++;
	}
	*o = '\0';
	*pp = p + 1;
	return out;
}

/*
 * Read the next key=value pair at <*pp>. Returns 1 with owned <*key>/<*val>, 0 at the
 * end of the string, -1 with <err> set on a syntax error (or no memory).
 */
static int
sections_next_pair(const struct sect_ctx *ctx, const char **pp, char **key, char **val,
		   struct nk_error *err)
{
	const char *p = sections_skip_blank(*pp), *k = p;

	if (*p == '\0')
		return 0;
	while (*p && *p != '=' && *p != ' ' && *p != '\t')
		p++;
	*key = strndup(k, (size_t)(p - k));
	p = sections_skip_blank(p);
	if (!*key || *p != '=' || p == k || **key == '\0') {
		sections_syntax_error(ctx, err, "expected \"=\" after \"%s\"", *key ? *key : "");
		free(*key);
		return -1;
	}
	p = sections_skip_blank(p + 1);
	if (*p == '\'') {
		*val = sections_quoted_value(&p);
	} else {
		const char *v = p;

		while (*p && *p != ' ' && *p != '\t')
			p++;
		*val = strndup(v, (size_t)(p - v));
	}
	if (!*val || **val == '\0') {
		if (*val)
			sections_syntax_error(ctx, err, "connection parameter \"%s\" has an "
					      "empty value", *key);
		else
			sections_syntax_error(ctx, err, "the value of connection parameter "
					      "\"%s\" has no closing quote", *key);
		free(*key);
		free(*val);
		return -1;
	}
	*pp = p;
	return 1;
}

/* Write the accepted key names of <keys> into <buf>. */
static void
sections_key_list(const struct sections_key *keys, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (int i = 0; keys[i].name && used < len; i++)
		used += snprintf(buf + used, len - used, "%s%s", i ? ", " : "", keys[i].name);
}

/* "invalid value" for <key> of the entry in <ctx>, with <detail>. */
static bool
sections_bad_value(const struct sect_ctx *ctx, const char *key, const char *value,
		   const char *detail, struct nk_error *err)
{
	nk_error_set(err, CFG_SQLSTATE, "invalid value \"%s\" for parameter %s of %s \"%s\"",
		     value, key, ctx->what, ctx->name);
	nk_error_detail(err, "%s", detail);
	return false;
}

/* Parse a numeric / enum kind of <k> into the entry field. */
static bool
sections_set_number(const struct sect_ctx *ctx, const struct sections_key *k, const char *val,
		    struct nk_error *err)
{
	char *field = (char *)ctx->entry + k->offset;
	int64_t n;
	int mode;

	switch (k->kind) {
	case SECTIONS_K_PORT:
		if (!settings_parse_int(val, 1, 65535, &n))
			return sections_bad_value(ctx, k->name, val,
						  "expected a port number from 1 to 65535", err);
		*(int *)field = (int)n;
		return true;
	case SECTIONS_K_COUNT:
		if (!settings_parse_int(val, 0, 2147483647.0, &n))
			return sections_bad_value(ctx, k->name, val,
						  "expected an integer from 0 to 2147483647", err);
		*(int *)field = (int)n;
		return true;
	case SECTIONS_K_POOL_MODE:
		mode = settings_pool_mode_parse(val);
		if (mode < 0)
			return sections_bad_value(ctx, k->name, val, "accepted values: session, "
						  "transaction, statement", err);
		*(int *)field = mode;
		return true;
	default:
		break;
	}
	NK_ASSERT(false);
	return false;
}

/* libpq's target_session_attrs names, by enum cfg_target_attrs (prefer-standby is refused). */
static const char *const sections_tsa_names[CFG_TSA_STANDBY + 1] = {
	"any", "read-write", "read-only", "primary", "standby",
};

/* port=<val>: one port, or a comma list of them (pgbouncer: one per host). */
static bool
sections_parse_ports(const char *val, struct cfg_database *d)
{
	char one[16];
	unsigned n = 0;
	int64_t v;

	for (const char *p = val;; p++) {
		size_t len = strcspn(p, ",");

		if (n == CFG_PORTS_MAX || len == 0 || len >= sizeof(one))
			return false;
		memcpy(one, p, len);
		one[len] = '\0';
		if (!settings_parse_int(one, 1, 65535, &v))
			return false;
		d->ports[n++] = (uint16_t)v;
		p += len;
		if (*p == '\0')
			break;
	}
	d->port = d->ports[0];
	d->nports = n;
	return true;
}

/* target_session_attrs <val> as libpq spells it; false for anything else. */
static bool
sections_parse_target_attrs(const char *val, enum cfg_target_attrs *out)
{
	for (size_t i = 0; i <= CFG_TSA_STANDBY; i++) {
		if (strcmp(val, sections_tsa_names[i]) == 0) {
			*out = (enum cfg_target_attrs)i;
			return true;
		}
	}
	return false;
}

/* Store <val> (owned, consumed) for key <k> into the entry of <ctx>. */
static bool
sections_set(const struct sect_ctx *ctx, const struct sections_key *k, char *val,
	     struct nk_error *err)
{
	char *field = (char *)ctx->entry + k->offset;
	bool ok = true, b;

	switch (k->kind) {
	case SECTIONS_K_STR:
		free(*(char **)field);
		*(char **)field = val;
		return true;
	case SECTIONS_K_TIME:
		ok = settings_parse_time(val, (double *)field);
		if (!ok)
			sections_bad_value(ctx, k->name, val, "expected a number of seconds "
					   "(fractions allowed, not negative)", err);
		break;
	case SECTIONS_K_LOAD_BALANCE:
		ok = strcmp(val, "round-robin") == 0 || strcmp(val, "disable") == 0;
		if (ok)
			*(bool *)field = strcmp(val, "round-robin") == 0;
		else
			sections_bad_value(ctx, k->name, val, "accepted values: round-robin, "
					   "disable", err);
		break;
	case SECTIONS_K_PORT_LIST:
		ok = sections_parse_ports(val, (struct cfg_database *)ctx->entry);
		if (!ok)
			sections_bad_value(ctx, k->name, val, "expected a port number from 1 to "
					   "65535, or a comma list of them (one per host)", err);
		break;
	case SECTIONS_K_TARGET_ATTRS:
		ok = sections_parse_target_attrs(val, (enum cfg_target_attrs *)field);
		if (!ok)
			sections_bad_value(ctx, k->name, val, "accepted values: any, read-write, "
					   "read-only, primary, standby", err);
		break;
	case SECTIONS_K_READ_TARGET:
		ok = strcmp(val, "primary") == 0 || strcmp(val, "replica") == 0 ||
		     strcmp(val, "rdonly") == 0;
		if (ok)
			*(int *)field = val[0] == 'p' ? CFG_SRV_PRIMARY : val[1] == 'e' ?
					CFG_SRV_REPLICA : CFG_SRV_RDONLY;
		else
			sections_bad_value(ctx, k->name, val, "accepted values: primary, replica, "
					   "rdonly", err);
		break;
	case SECTIONS_K_TX_MODE:
		ok = strcmp(val, "multi") == 0 || strcmp(val, "single") == 0 ||
		     strcmp(val, "atomic") == 0;
		if (ok)
			*(int *)field = val[0] == 'm' ? 0 : val[0] == 's' ? 1 : 2;
		else
			sections_bad_value(ctx, k->name, val, "accepted values: multi, single, "
					   "atomic", err);
		break;
	case SECTIONS_K_BOOL:
		ok = settings_parse_bool(val, &b);
		if (ok)
			*(bool *)field = b;
		else
			sections_bad_value(ctx, k->name, val, "expected yes or no (also 1/0, "
					   "on/off, true/false)", err);
		break;
	default:
		ok = sections_set_number(ctx, k, val, err);
		break;
	}
	free(val);
	return ok;
}

/* Parse the whole connection string <value> into the entry of <ctx>. */
static bool
sections_parse_connstr(const struct sect_ctx *ctx, const char *value, struct nk_error *err)
{
	const char *p = value;
	char *key, *val, names[512];
	int r;

	while ((r = sections_next_pair(ctx, &p, &key, &val, err)) == 1) {
		const struct sections_key *k = ctx->keys;

		while (k->name && strcmp(k->name, key) != 0)
			k++;
		if (!k->name) {
			nk_error_set(err, CFG_SQLSTATE, "%s: %s", ctx->unknown, key);
			sections_key_list(ctx->keys, names, sizeof(names));
			nk_error_detail(err, "%s \"%s\" accepts: %s", ctx->what, ctx->name, names);
			free(key);
			free(val);
			return false;
		}
		free(key);
		if (!sections_set(ctx, k, val, err))
			return false;
	}
	return r == 0;
}

/* Free the strings of a database entry. */
static void
sections_database_clear(struct cfg_database *d)
{
	char **strs[] = { &d->name, &d->dbname, &d->host, &d->user, &d->password,
			  &d->auth_user, &d->auth_query, &d->auth_dbname, &d->connect_query,
			  &d->client_encoding, &d->datestyle, &d->timezone,
			  &d->application_name, &d->source };

	for (size_t i = 0; i < NK_ARRAY_LEN(strs); i++) {
		free(*strs[i]);
		*strs[i] = NULL;
	}
}

/* Grow the array <*arr> of <*n> elements of <size> by one; the new slot is zeroed. */
static void *
sections_append(void **arr, size_t *n, size_t size)
{
	char *grown = realloc(*arr, (*n + 1) * size);

	if (!grown)
		return NULL;
	memset(grown + *n * size, 0, size);
	*arr = grown;
	return grown + (*n)++ * size;
}

/* True when <name> is reserved for a console database. */
static bool
sections_reserved_db(const char *name)
{
	return strcmp(name, "pgbouncer") == 0 || strcmp(name, "neki") == 0;
}

/* Defaults of a [databases] entry: every override unset. */
static void
sections_database_init(struct cfg_database *d)
{
	memset(d, 0, sizeof(*d));
	d->port = 5432;
	d->pool_size = -1;
	d->min_pool_size = -1;
	d->reserve_pool_size = -1;
	d->max_db_connections = -1;
	d->max_db_client_connections = -1;
	d->pool_mode = CFG_POOL_UNSET;
	d->server_lifetime = -1;
	d->query_wait_timeout = -1;
	d->load_balance_hosts = true;
}

/* Find the database named <name> including "*" (mutable), or NULL. */
static struct cfg_database *
sections_database_slot(struct cfg *c, const char *name)
{
	for (size_t i = 0; i < c->n_databases; i++) {
		if (strcmp(c->databases[i].name, name) == 0)
			return &c->databases[i];
	}
	return NULL;
}

/* A port list names one port per host (pgbouncer's "invalid number of ports"). */
static bool
sections_check_ports(const struct cfg_database *d, const char *name, struct nk_error *err)
{
	unsigned hosts = 1;

	if (d->nports <= 1)
		return true;
	for (const char *c = d->host ? d->host : ""; *c != '\0'; c++)
		hosts += *c == ',';
	if (hosts == d->nports)
		return true;
	return nk_error_set(err, CFG_SQLSTATE, "invalid number of ports for database \"%s\": "
			    "%u ports for %u hosts (give one port, or one per host)", name,
			    d->nports, hosts);
}

/*
 * Add (or replace) the [databases] entry <name> = <value>; <where> is "file:line".
 * Returns false with <err> set on a reserved name, a syntax error, an unknown key
 * or a bad value; <c> is then unchanged.
 */
bool
sections_database_add(struct cfg *c, const char *name, const char *value, const char *where,
		      struct nk_error *err)
{
	struct cfg_database d, *slot;
	struct sect_ctx ctx = { "database", name, "unrecognized connection parameter",
				sect_db_keys, &d };

	if (sections_reserved_db(name))
		return nk_error_set(err, CFG_SQLSTATE, "database name \"%s\" is reserved", name);
	sections_database_init(&d);
	if (!sections_parse_connstr(&ctx, value, err)) {
		sections_database_clear(&d);
		return false;
	}
	if (!sections_check_ports(&d, name, err)) {
		sections_database_clear(&d);
		return false;
	}
	d.name = strdup(name);
	d.source = strdup(where);
	slot = d.name && d.source ? sections_database_slot(c, name) : NULL;
	if (slot)
		sections_database_clear(slot);
	else if (d.name && d.source)
		slot = sections_append((void **)&c->databases, &c->n_databases, sizeof(d));
	if (!slot) {
		sections_database_clear(&d);
		return nk_error_set(err, CFG_SQLSTATE, "out of memory");
	}
	*slot = d;
	return true;
}

/* Add (or replace) the [users] entry <name> = <value>. */
bool
sections_user_add(struct cfg *c, const char *name, const char *value, struct nk_error *err)
{
	struct cfg_user u = {
		.pool_mode = CFG_POOL_UNSET, .pool_size = -1, .reserve_pool_size = -1,
		.max_user_connections = -1, .max_user_client_connections = -1,
		.query_timeout = -1, .query_wait_timeout = -1, .idle_transaction_timeout = -1,
		.transaction_timeout = -1, .client_idle_timeout = -1,
	};
	struct sect_ctx ctx = { "user", name, "unrecognized user parameter",
				sect_user_keys, &u };
	struct cfg_user *slot = (struct cfg_user *)cfg_user_find(c, name);

	if (!sections_parse_connstr(&ctx, value, err))
		return false;
	u.name = strdup(name);
	if (u.name && !slot)
		slot = sections_append((void **)&c->users, &c->n_users, sizeof(u));
	else if (u.name)
		free(slot->name);
	if (!u.name || !slot) {
		free(u.name);
		return nk_error_set(err, CFG_SQLSTATE, "out of memory");
	}
	*slot = u;
	return true;
}

/* Add (or replace) the [peers] entry <name> (a peer id) = <value>. */
bool
sections_peer_add(struct cfg *c, const char *name, const char *value, struct nk_error *err)
{
	struct cfg_peer p = { .port = 6432, .pool_size = -1 };
	struct sect_ctx ctx = { "peer", name, "unrecognized connection parameter",
				sect_peer_keys, &p };
	struct cfg_peer *slot;
	int64_t id;

	if (!settings_parse_int(name, 1, 65535, &id)) {
		nk_error_set(err, CFG_SQLSTATE, "invalid peer id \"%s\"", name);
		nk_error_detail(err, "a peer id is an integer from 1 to 65535");
		return false;
	}
	p.peer_id = (int)id;
	if (!sections_parse_connstr(&ctx, value, err)) {
		free(p.host);
		return false;
	}
	if (!p.host)
		return nk_error_set(err, CFG_SQLSTATE, "host was not provided for peer %d",
				    p.peer_id);
	slot = (struct cfg_peer *)cfg_peer_find(c, p.peer_id);
	if (!slot)
		slot = sections_append((void **)&c->peers, &c->n_peers, sizeof(p));
	else
		free(slot->host);
	if (!slot) {
		free(p.host);
		return nk_error_set(err, CFG_SQLSTATE, "out of memory");
	}
	*slot = p;
	return true;
}

/* Free every section entry of <c>. */
void
sections_free(struct cfg *c)
{
	for (size_t i = 0; i < c->n_databases; i++)
		sections_database_clear(&c->databases[i]);
	free(c->databases);
	for (size_t i = 0; i < c->n_users; i++)
		free(c->users[i].name);
	free(c->users);
	for (size_t i = 0; i < c->n_peers; i++)
		free(c->peers[i].host);
	free(c->peers);
	for (size_t i = 0; i < c->n_shards; i++) {
		struct cfg_shard *s = &c->shards[i];

		free(s->uid);
		free(s->conninfo);
		free(s->host);
		free(s->dbname);
		free(s->user);
		free(s->password);
		free(s->sslmode);
		shard_servers_free(s);
	}
	free(c->shards);
	c->databases = NULL;
	c->users = NULL;
	c->peers = NULL;
	c->shards = NULL;
	c->n_databases = c->n_users = c->n_peers = c->n_shards = 0;
}

/* *<dst> = a copy of <src> (NULL stays NULL); false when out of memory. */
static bool
sections_strdup(char **dst, const char *src)
{
	*dst = src ? strdup(src) : NULL;
	return !src || *dst;
}

/* Copy <src> into <dst>, duplicating its strings. */
static bool
sections_database_copy(struct cfg_database *dst, const struct cfg_database *src)
{
	*dst = *src;
	return sections_strdup(&dst->name, src->name) &&
	       sections_strdup(&dst->dbname, src->dbname) &&
	       sections_strdup(&dst->host, src->host) &&
	       sections_strdup(&dst->user, src->user) &&
	       sections_strdup(&dst->password, src->password) &&
	       sections_strdup(&dst->auth_user, src->auth_user) &&
	       sections_strdup(&dst->auth_query, src->auth_query) &&
	       sections_strdup(&dst->auth_dbname, src->auth_dbname) &&
	       sections_strdup(&dst->connect_query, src->connect_query) &&
	       sections_strdup(&dst->client_encoding, src->client_encoding) &&
	       sections_strdup(&dst->datestyle, src->datestyle) &&
	       sections_strdup(&dst->timezone, src->timezone) &&
	       sections_strdup(&dst->application_name, src->application_name) &&
	       sections_strdup(&dst->source, src->source);
}

static bool
sections_shard_copy(struct cfg_shard *dst, const struct cfg_shard *src)
{
	*dst = *src;
	dst->servers = NULL;
	dst->n_servers = 0;
	return sections_strdup(&dst->uid, src->uid) &&
	       sections_strdup(&dst->conninfo, src->conninfo) &&
	       sections_strdup(&dst->host, src->host) &&
	       sections_strdup(&dst->dbname, src->dbname) &&
	       sections_strdup(&dst->user, src->user) &&
	       sections_strdup(&dst->password, src->password) &&
	       sections_strdup(&dst->sslmode, src->sslmode) &&
	       shard_servers_copy(dst, src);
}

/*
 * Allocate zeroed arrays in <dst> for the entries of <src>, so that sections_free()
 * works at any point of a partial copy (the counts say how many are filled).
 */
static bool
sections_copy_alloc(struct cfg *dst, const struct cfg *src)
{
	dst->databases = calloc(src->n_databases + 1, sizeof(*dst->databases));
	dst->users = calloc(src->n_users + 1, sizeof(*dst->users));
	dst->peers = calloc(src->n_peers + 1, sizeof(*dst->peers));
	dst->shards = calloc(src->n_shards + 1, sizeof(*dst->shards));
	return dst->databases && dst->users && dst->peers && dst->shards;
}

bool
sections_copy(struct cfg *dst, const struct cfg *src)
{
	if (!sections_copy_alloc(dst, src))
		return false;
	for (; dst->n_databases < src->n_databases; dst->n_databases++) {
		if (!sections_database_copy(&dst->databases[dst->n_databases],
					    &src->databases[dst->n_databases])) {
			dst->n_databases++;
			return false;
		}
	}
	for (; dst->n_users < src->n_users; dst->n_users++) {
		dst->users[dst->n_users] = src->users[dst->n_users];
		if (!sections_strdup(&dst->users[dst->n_users].name, src->users[dst->n_users].name))
			return false;
	}
	for (; dst->n_peers < src->n_peers; dst->n_peers++) {
		dst->peers[dst->n_peers] = src->peers[dst->n_peers];
		if (!sections_strdup(&dst->peers[dst->n_peers].host, src->peers[dst->n_peers].host))
			return false;
	}
	for (; dst->n_shards < src->n_shards; dst->n_shards++) {
		if (!sections_shard_copy(&dst->shards[dst->n_shards], &src->shards[dst->n_shards])) {
			dst->n_shards++;
			return false;
		}
	}
	return true;
}

/* The [databases] entry <name> ("*" is not returned), or NULL. */
const struct cfg_database *
cfg_database_find(const struct cfg *c, const char *name)
{
	if (strcmp(name, "*") == 0)
		return NULL;
	return sections_database_slot((struct cfg *)c, name);
}

/* The "*" entry, or NULL. */
const struct cfg_database *
cfg_database_auto(const struct cfg *c)
{
	return sections_database_slot((struct cfg *)c, "*");
}

/* The [users] entry <name>, or NULL. */
const struct cfg_user *
cfg_user_find(const struct cfg *c, const char *name)
{
	for (size_t i = 0; i < c->n_users; i++) {
		if (strcmp(c->users[i].name, name) == 0)
			return &c->users[i];
	}
	return NULL;
}

/* The [peers] entry <peer_id>, or NULL. */
const struct cfg_peer *
cfg_peer_find(const struct cfg *c, int peer_id)
{
	for (size_t i = 0; i < c->n_peers; i++) {
		if (c->peers[i].peer_id == peer_id)
			return &c->peers[i];
	}
	return NULL;
}

/* The [shards] entry <uid>, or NULL. */
const struct cfg_shard *
cfg_shard_find(const struct cfg *c, const char *uid)
{
	for (size_t i = 0; i < c->n_shards; i++) {
		if (strcmp(c->shards[i].uid, uid) == 0)
			return &c->shards[i];
	}
	return NULL;
}

/* strcmp() equality with NULL equal to "". */
static bool
sections_str_eq(const char *a, const char *b)
{
	return strcmp(a ? a : "", b ? b : "") == 0;
}

/* True when <old> and <next> differ in a key that makes server connections stale. */
bool
cfg_database_needs_reconnect(const struct cfg_database *old, const struct cfg_database *next)
{
	return !sections_str_eq(old->dbname, next->dbname) ||
	       !sections_str_eq(old->host, next->host) || old->port != next->port ||
	       old->nports != next->nports ||
	       memcmp(old->ports, next->ports, sizeof(old->ports)) != 0 ||
	       !sections_str_eq(old->user, next->user) ||
	       !sections_str_eq(old->connect_query, next->connect_query) ||
	       !sections_str_eq(old->auth_dbname, next->auth_dbname) ||
	       !sections_str_eq(old->auth_query, next->auth_query) ||
	       old->load_balance_hosts != next->load_balance_hosts ||
	       old->target_session_attrs != next->target_session_attrs;
}

const char *
cfg_target_attrs_str(enum cfg_target_attrs t)
{
	return (size_t)t < NK_ARRAY_LEN(sections_tsa_names) ? sections_tsa_names[t] : "any";
}
