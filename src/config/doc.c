/*
 * doc.c - neki.ini.sample and the neki.ini(5) page, generated from the tables.
 *
 * Both documents list every row of the settings table (grouped as pgbouncer's
 * sample is) and every key of the [databases], [users] and [peers] tables, so they
 * cannot drift from the parser: the unit tests compare the committed files with
 * this output (NK_REGEN_DOCS=1 test/unit/check_neki config rewrites them).
 * Entry point: cfg_write_doc().
 */
#include "neki/base.h"

#include "config_int.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

static const char *const doc_group_titles[CFG_G_COUNT] = {
	[CFG_G_PROCESS] = "Process, listening, files",
	[CFG_G_POOL] = "Pooling and limits",
	[CFG_G_AUTH] = "Authentication and console access",
	[CFG_G_SERVER] = "Server connection lifecycle",
	[CFG_G_CLIENT] = "Client-side timeouts",
	[CFG_G_LOG] = "Logging",
	[CFG_G_DNS] = "DNS",
	[CFG_G_NET] = "Low-level network",
	[CFG_G_TLS] = "TLS",
	[CFG_G_NEKI] = "neki's own settings",
};

/* Write <text> wrapped at about 78 columns, each line starting with <prefix>. */
static void
doc_wrap(FILE *out, const char *prefix, const char *text)
{
	size_t width = 78 - strlen(prefix), col = 0;
	const char *p = text;

	while (*p) {
		size_t len = strcspn(p, " ");

		if (col > 0 && col + 1 + len > width) {
			fputc('\n', out);
			col = 0;
		}
		if (col == 0) {
			fputs(prefix, out);
		} else {
			fputc(' ', out);
			col++;
		}
		fwrite(p, 1, len, out);
		col += len;
		p += len;
		while (*p == ' ')
			p++;
	}
	if (col > 0)
		fputc('\n', out);
}

/* The value shown for a setting's default in the docs. */
static const char *
doc_default_text(const struct cfg_setting *s)
{
	if (strcmp(s->name, "conffile") == 0)
		return "the file named on the command line";
	if (strcmp(s->name, "workers") == 0)
		return "0 (one worker per online CPU)";
	if (s->default_value[0] == '\0')
		return "not set";
	return NULL;
}

/* Header of the sample: syntax reminders. */
static const char doc_sample_head[] =
	";;; neki.ini.sample - every setting of neki with its default.\n"
	";;;\n"
	";;; Generated from the settings table (src/config/); regenerate with\n"
	";;; NK_REGEN_DOCS=1 test/unit/check_neki config. Full reference: neki.ini(5).\n"
	";;;\n"
	";;; neki reads pgbouncer.ini syntax and a pgbouncer.ini runs unchanged:\n"
	";;;   - a line starting with \";\" or \"#\" is a comment (later in a line they\n"
	";;;     are ordinary characters);\n"
	";;;   - key = value, the value running to the end of the line;\n"
	";;;   - %include file reads another file (relative to the working directory).\n"
	";;; An unknown section or key, or a bad value, stops startup; a reload with such\n"
	";;; an error keeps the running configuration.\n"
	";;; A line starting with a single \";\" shows a setting at its default: remove\n"
	";;; the \";\" to use it. [not reloadable] settings are read at startup only.\n\n";

/* The section examples of the sample (commented out). */
static const char doc_sample_sections[] =
	"[databases]\n\n"
	";; name = key=value ... with pgbouncer's keys: dbname host port user password\n"
	";; auth_user auth_query auth_dbname pool_size min_pool_size reserve_pool_size\n"
	";; max_db_connections max_db_client_connections pool_mode server_lifetime\n"
	";; query_wait_timeout load_balance_hosts connect_query client_encoding datestyle\n"
	";; timezone application_name, and neki's topology=yes|no. Values are bare or\n"
	";; 'single-quoted' ('' for a quote). \"pgbouncer\" and \"neki\" are reserved.\n\n"
	";; a database on the local Unix socket, same name on the server\n"
	";app = host=/var/run/postgresql\n"
	";; over TCP, another name on the server, a forced user\n"
	";bardb = host=10.0.0.4 port=5432 dbname=bar user=app_rw password='se''cret'\n"
	";; a sharded logical database: the entry points at its authoritative shard\n"
	";shop = host=10.0.0.11 dbname=shop topology=yes\n"
	";; several hosts used in turn, a per-database pool size and mode\n"
	";ha = host=10.0.0.21,10.0.0.22 pool_size=40 pool_mode=transaction\n"
	";; any other database name goes to this server\n"
	";* = host=10.0.0.4\n\n"
	"[users]\n\n"
	";; user = key=value ... overriding the global settings for one user: pool_mode\n"
	";; pool_size reserve_pool_size max_user_connections max_user_client_connections\n"
	";; query_timeout query_wait_timeout idle_transaction_timeout transaction_timeout\n"
	";; client_idle_timeout\n\n"
	";reporting = pool_mode=session max_user_connections=10 query_timeout=300\n\n"
	"[peers]\n\n"
	";; peer_id = host=... port=... pool_size=...: where to forward cancel requests\n"
	";; meant for another process of a group sharing a port (see peer_id)\n\n"
	";1 = host=/tmp/neki1\n"
	";2 = host=10.0.0.5 port=6432\n\n"
	"[shards]\n\n"
	";; shard uid = libpq connection string. Key ranges of the data topology name\n"
	";; these uids. A shard without dbname uses the client's database name.\n\n"
	";s1 = host=10.0.0.11 port=5432 user=neki password=secret\n"
	";s2 = host=10.0.0.12 port=5432 user=neki sslmode=require\n"
	";; the URI form works too\n"
	";s3 = postgresql://neki@10.0.0.13:5432/shop?sslmode=verify-full\n\n"
	"[pgbouncer]\n\n"
	";; This section may also be called [neki].\n\n";

/* One setting in the sample: its explanation, then ";name = default". */
static void
doc_sample_setting(FILE *out, const struct cfg_setting *s)
{
	char text[512];

	snprintf(text, sizeof(text), "%s%s%s%s", s->description,
		 s->unit[0] ? " [unit: " : "", s->unit, s->unit[0] ? "]" : "");
	if (!s->reloadable)
		snprintf(text + strlen(text), sizeof(text) - strlen(text), " [not reloadable]");
	doc_wrap(out, ";; ", text);
	fprintf(out, ";%s =%s%s\n\n", s->name, s->default_value[0] ? " " : "",
		s->default_value);
}

/* The whole sample: header, section examples, then every setting by group. */
static void
doc_write_sample(FILE *out)
{
	size_t n;
	const struct cfg_setting *tab = cfg_settings(&n);

	fputs(doc_sample_head, out);
	fputs(doc_sample_sections, out);
	for (int g = 0; g < CFG_G_COUNT; g++) {
		fprintf(out, ";;;\n;;; %s\n;;;\n\n", doc_group_titles[g]);
		for (size_t i = 0; i < n; i++) {
			if ((int)tab[i].group == g)
				doc_sample_setting(out, &tab[i]);
		}
	}
}

/* The man page's text before the settings. */
static const char doc_man_head[] =
	"% NEKI.INI(5) neki | File formats\n\n"
	"<!-- Generated from the settings table (src/config/); regenerate with\n"
	"     NK_REGEN_DOCS=1 test/unit/check_neki config -->\n\n"
	"# NAME\n\n"
	"neki.ini - configuration file of neki, the sharding router and pgbouncer "
	"replacement\n\n"
	"# DESCRIPTION\n\n"
	"neki reads one configuration file, named on its command line. It is a "
	"pgbouncer.ini: every pgbouncer 1.25 setting keeps its name, default and meaning, "
	"so a pgbouncer configuration runs unchanged. neki adds a few settings of its own "
	"and the `[shards]` section.\n\n"
	"# FILE SYNTAX\n\n"
	"- Sections are written `[name]`: `[pgbouncer]` (also accepted as `[neki]`), "
	"`[databases]`, `[users]`, `[peers]`, `[shards]`. Any other section is an error "
	"(`invalid section \"foo\" in configuration (file:line)`). Section and key names "
	"are case-sensitive.\n"
	"- A line whose first non-blank character is `;` or `#` is a comment. A `;` or "
	"`#` later in a line is an ordinary character (part of the value).\n"
	"- `key = value`: blanks around `=` are allowed; the value runs to the end of the "
	"line with trailing whitespace removed. A key is made of `A-Z a-z 0-9 _ . * -`, "
	"or is quoted as `'key'` or `\"key\"` (a doubled quote stands for one).\n"
	"- `%include file` reads another file at that point. A relative path is relative "
	"to the current working directory (as in pgbouncer). Includes nest at most 10 "
	"levels deep, and a file that includes itself, directly or through others, is an "
	"error.\n"
	"- A later line for the same setting (or the same database, user or peer) replaces "
	"the earlier one. A shard uid may be declared only once.\n\n"
	"# ERRORS AND RELOAD\n\n"
	"An unknown key, an unknown section or a value that is not accepted is an error "
	"that names the file and line, the key, and what is accepted, for example "
	"`unknown parameter: pgbouncer/bogus in configuration (neki.ini:9)` or "
	"`invalid value \"lots\" for parameter max_client_conn in configuration "
	"(neki.ini:3)` with the detail `expected an integer from 0 to 2147483647`. At "
	"startup any error stops neki. A reload (SIGHUP or the console's RELOAD) reads "
	"the whole file into a new configuration and only applies it when all of it is "
	"valid: a failed reload keeps the running configuration and logs why. Settings "
	"marked *not reloadable* below are read at startup only; when a reload finds "
	"one changed it logs `parameter X is not reloadable; restart needed` and keeps the "
	"old value.\n\n"
	"# VALUE TYPES\n\n"
	"integer\n:   parsed as C's strtol with base 0: `0x1F` is hexadecimal and `0777` "
	"octal.\n\n"
	"boolean\n:   `0` or `1` as in pgbouncer (any non-zero integer is true); `on`/`off`, "
	"`yes`/`no`, `true`/`false` are accepted too.\n\n"
	"seconds\n:   a non-negative decimal number of seconds, fractions allowed (`0.5`); "
	"no unit suffix.\n\n"
	"size\n:   bytes, or a number with a `kB`, `MB`, `GB` or `TB` suffix (powers of "
	"1024).\n\n"
	"enum\n:   one of the listed names, in any letter case.\n\n"
	"mode\n:   a file mode, octal with a leading `0` (`0777`).\n\n"
	"string\n:   the rest of the line, as written.\n\n"
	"# SECTION [pgbouncer] (ALSO [neki])\n\n";

/* The type text of <s> for the man page. */
static void
doc_type_text(const struct cfg_setting *s, char *buf, size_t len)
{
	static const char *const names[] = {
		[CFG_T_INT] = "integer", [CFG_T_INT64] = "size", [CFG_T_BOOL] = "boolean",
		[CFG_T_TIME] = "seconds", [CFG_T_STRING] = "string", [CFG_T_ENUM] = "enum",
		[CFG_T_MODE] = "mode",
	};
	size_t used = (size_t)snprintf(buf, len, "%s", names[s->type]);

	if (s->type == CFG_T_ENUM) {
		for (int i = 0; s->enum_values[i] && used < len; i++)
			used += (size_t)snprintf(buf + used, len - used, "%s`%s`",
						 i ? ", " : " (", s->enum_values[i]);
		if (used < len)
			snprintf(buf + used, len - used, ")");
	} else if (s->type == CFG_T_INT && s->unit[0] && used < len) {
		snprintf(buf + used, len - used, " (%s)", s->unit);
	}
}

/* Write <text> with the characters markdown would take for markup escaped. */
static void
doc_put_markdown(FILE *out, const char *text)
{
	for (const char *p = text; *p; p++) {
		if (*p == '<' || *p == '>' || *p == '*' || *p == '`')
			fputc('\\', out);
		fputc(*p, out);
	}
}

/* One setting of the man page. */
static void
doc_man_setting(FILE *out, const struct cfg_setting *s)
{
	char type[256];
	const char *def = doc_default_text(s);

	doc_type_text(s, type, sizeof(type));
	fprintf(out, "### %s\n\n%c", s->name, toupper((unsigned char)s->description[0]));
	doc_put_markdown(out, s->description + 1);
	fputs(".\n\n", out);
	fprintf(out, "Type: %s. Default: ", type);
	if (def)
		fprintf(out, "%s. ", def);
	else
		fprintf(out, "`%s`. ", s->default_value);
	fprintf(out, "%s%s\n\n", s->reloadable ? "Reloadable." : "Not reloadable (read at "
		"startup).", s->neki_only ? " neki only (not in pgbouncer)." : "");
}

/* The key table of one connection-string section. */
static void
doc_man_keys(FILE *out, const char *section)
{
	const struct sections_key *k = sections_keys(section);

	fputs("| key | meaning |\n|---|---|\n", out);
	for (; k->name; k++) {
		fprintf(out, "| `%s` | ", k->name);
		doc_put_markdown(out, k->description);
		fputs(" |\n", out);
	}
	fputc('\n', out);
}

/* The sections after [pgbouncer]. */
static const char doc_man_databases[] =
	"# SECTION [databases]\n\n"
	"Each line is `name = key=value key=value ...`, in pgbouncer's own syntax: a value "
	"is bare (up to the next blank) or single-quoted, with `''` for a quote inside; an "
	"empty value is refused. A name is made of `_0-9A-Za-z` (and the other key "
	"characters), or is quoted. The names `pgbouncer` and `neki` are reserved for the "
	"admin console. The name `*` is the auto-database: its connection string serves "
	"any database name that is not listed, `dbname` defaulting to the name the client "
	"asked for, and such databases are freed after `autodb_idle_timeout`. An unknown "
	"key is an error (`unrecognized connection parameter: key`). A change of dbname, "
	"host, port, user, connect_query, auth_dbname, auth_query or load_balance_hosts "
	"on reload closes the database's server connections once they are released. "
	"pool_mode and pool_size are taken from `[users]` first, then `[databases]`, "
	"then the global settings. The accepted keys:\n\n";

static const char doc_man_users[] =
	"# SECTION [users]\n\n"
	"Each line is `user = key=value ...` with the same syntax, overriding global "
	"settings for one user (an unknown key: `unrecognized user parameter: key`). As in "
	"pgbouncer, a timeout of 0 here leaves the global one in force. A user listed here but "
	"not in auth_file is looked up with auth_query when auth_user is set; otherwise it is "
	"a known user with no password (trust admits it, no password matches):\n\n";

static const char doc_man_peers[] =
	"# SECTION [peers]\n\n"
	"Each line is `peer_id = key=value ...`: where to forward a cancel request that "
	"belongs to another process of a peered group (see `peer_id`). The id is an "
	"integer from 1 to 65535; `host` is required; an entry for the process's own "
	"`peer_id` is allowed and ignored:\n\n";

static const char doc_man_tail[] =
	"# SECTION [shards]\n\n"
	"neki only. Each line is `shard_uid = libpq connection string`, in libpq's "
	"key=value form (blanks around `=` allowed, values bare or single-quoted, a "
	"backslash escaping the next character), for example `s1 = host=10.0.0.11 "
	"port=5432 user=neki password=secret sslmode=require`, or as a URI, "
	"`postgresql://[user[:password]@][host[:port],...][/dbname][?key=value&...]` "
	"with `%XX` escapes. Every libpq keyword is accepted; another keyword is an "
	"error, as are an empty string, a bad port (a comma list of ports goes with a "
	"comma list of hosts) and a bad sslmode. neki reads host, port, dbname, user, "
	"password and sslmode from it and hands the string as written to libpq. The key ranges of the data topology name these uids, so a range may "
	"only use a declared shard. A shard whose string names a dbname always uses that "
	"database; otherwise the client's database name is used on the shard. A "
	"`[databases]` entry with `topology=yes`, or named in the published topology's "
	"`databases`, is a sharded logical database; it points at the authoritative shard."
	"\n\n"
	"## Standbys: replicas and rdonly\n\n"
	"A shard is a primary plus zero or more standbys. neki's own keys `replicas` and "
	"`rdonly` (key=value form only, not in a URI) list them: "
	"`s1 = host=10.0.0.1 port=5432 replicas=10.0.0.2:5432,10.0.0.3 rdonly=10.0.0.4` "
	"names the primary (host, port) and three standbys. An item is a host name, an "
	"address (`[v6]:port` in brackets when a port follows) or a Unix socket directory "
	"(starting with `/`), with an optional `:port` (default: the primary's port); at most "
	"16 servers per shard. Every other key of the string (dbname, user, password, "
	"sslmode, ...) applies to every server. With standbys, "
	"`host` must name one host (no list, no `hostaddr`); an empty item, a bad port and a "
	"server named twice are errors. The string neki hands to libpq (the admin's "
	"connections) then lists every server with `target_session_attrs=read-write`, so "
	"it reaches whichever server is the primary. Roles are verified, not trusted: the "
	"admin process asks every server of such a shard `pg_is_in_recovery()` and its WAL "
	"position every `replica_poll_interval`; `SHOW SHARDS` and `__neki.list_shards()` "
	"show each server with its role, state and replay lag. `__neki.target` (`primary`, "
	"`replica`, `rdonly`; the `[databases]` key `target` gives a session's first value) "
	"chooses the servers a session reads from, within `replica_lag_tolerable_min` / "
	"`_max` (doc/router.md). When the primary stops answering and a standby is promoted, "
	"neki finds it (the first server that answers as a primary) and holds the shard's new "
	"statements meanwhile, for at most `failover_hold_timeout` (doc/operations.md).\n\n"
	"# EXAMPLE\n\n"
	"```\n[databases]\napp = host=127.0.0.1 port=5432\nshop = host=10.0.0.11 "
	"dbname=shop topology=yes\n\n[shards]\ns1 = host=10.0.0.11 dbname=shop\n"
	"s2 = host=10.0.0.12 dbname=shop\n\n[pgbouncer]\nlisten_addr = *\n"
	"listen_port = 6432\nauth_type = scram-sha-256\nauth_file = /etc/neki/userlist.txt\n"
	"pool_mode = transaction\nworkers = 4\n```\n\n"
	"The distribution's `neki.ini.sample` lists every setting with its default.\n\n"
	"# SEE ALSO\n\n"
	"neki(1), pgbouncer(5): <https://www.pgbouncer.org/config.html>\n";

/* The whole man page: syntax, every setting by group, then the sections. */
static void
doc_write_man(FILE *out)
{
	size_t n;
	const struct cfg_setting *tab = cfg_settings(&n);

	fputs(doc_man_head, out);
	for (int g = 0; g < CFG_G_COUNT; g++) {
		fprintf(out, "## %s\n\n", doc_group_titles[g]);
		for (size_t i = 0; i < n; i++) {
			if ((int)tab[i].group == g)
				doc_man_setting(out, &tab[i]);
		}
	}
	fputs(doc_man_databases, out);
	doc_man_keys(out, "databases");
	fputs(doc_man_users, out);
	doc_man_keys(out, "users");
	fputs(doc_man_peers, out);
	doc_man_keys(out, "peers");
	fputs(doc_man_tail, out);
}

/* Write neki.ini.sample (<sample>) or doc/neki.ini.5.md to <out>. */
bool
cfg_write_doc(FILE *out, bool sample)
{
	if (sample)
		doc_write_sample(out);
	else
		doc_write_man(out);
	return !ferror(out);
}
