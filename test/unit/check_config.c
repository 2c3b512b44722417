/*
 * check_config.c - unit tests for src/config: the ini syntax, the settings table,
 * value parsing, the [databases]/[users]/[peers]/[shards] sections, %include,
 * reload helpers, and the shipped neki.ini.sample / doc/neki.ini.5.md.
 *
 * Most cases are tables of (ini text, expected outcome). Files for %include are
 * written into a private temporary directory.
 */
#include "neki/base.h"

#include <check.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "neki/config.h"
#include "neki/config_settings.h"
#include "neki/error.h"
#include "neki/plan.h"
#include "suites.h"

/* Load <text> as "t.ini"; on failure <err> is filled. */
static struct cfg *
load(const char *text, struct nk_error *err)
{
	return cfg_load_string("t.ini", text, err);
}

/* Load <text>, which must succeed. */
static struct cfg *
load_ok(const char *text)
{
	struct nk_error err;
	struct cfg *c = load(text, &err);

	ck_assert_msg(c != NULL, "load failed: %s (%s)", err.message, err.detail);
	return c;
}

/* The formatted value of setting <name> in <c>. */
static const char *
value_of(const struct cfg *c, const char *name)
{
	static char buf[1024];
	const struct cfg_setting *s = cfg_setting_find(name);

	ck_assert_msg(s != NULL, "no setting %s", name);
	cfg_setting_format(c, s, buf, sizeof(buf));
	return buf;
}

START_TEST(test_basic_file)
{
	struct cfg *c = load_ok(
		"; a comment\n"
		"# another comment\n"
		"[databases]\n"
		"app = host=127.0.0.1 port=5433 dbname=appdb\n"
		"\n"
		"[pgbouncer]\n"
		"listen_port = 7432\n"
		"  pool_mode=transaction  \n"
		"\tmax_client_conn\t=\t500\r\n"
		"admin_users = alice, bob ; not a comment\n"
		"server_reset_query = DISCARD ALL # also not a comment\n");

	ck_assert_int_eq(c->proc.listen_port, 7432);
	ck_assert_int_eq(c->pool.pool_mode, CFG_POOL_TRANSACTION);
	ck_assert_int_eq(c->pool.max_client_conn, 500);
	ck_assert_str_eq(c->auth.admin_users, "alice, bob ; not a comment");
	ck_assert_str_eq(c->srv.server_reset_query, "DISCARD ALL # also not a comment");
	ck_assert_uint_eq(c->n_databases, 1);
	ck_assert_str_eq(c->databases[0].name, "app");
	ck_assert_str_eq(c->databases[0].host, "127.0.0.1");
	ck_assert_int_eq(c->databases[0].port, 5433);
	ck_assert_str_eq(c->databases[0].dbname, "appdb");
	ck_assert_str_eq(c->databases[0].source, "t.ini:4");
	ck_assert_str_eq(c->path, "t.ini");
	ck_assert_str_eq(c->proc.conffile, "t.ini");
	ck_assert_int_eq(c->refcount, 1);
	cfg_unref(c);
}
END_TEST

/* Comment forms: indented, after a section header, '#' and ';' inside values. */
START_TEST(test_comments)
{
	struct cfg *c = load_ok(
		"   ; indented comment\n"
		"\t# indented hash comment\n"
		"[pgbouncer] ; comment after the header\n"
		"[pgbouncer]\t# hash comment after the header\n"
		";listen_port = 1\n"
		"#listen_port = 2\n"
		"logfile = /var/log/neki#1.log\n"
		"stats_users = a;b\n");

	ck_assert_int_eq(c->proc.listen_port, 6432);
	ck_assert_str_eq(c->proc.logfile, "/var/log/neki#1.log");
	ck_assert_str_eq(c->auth.stats_users, "a;b");
	cfg_unref(c);
}
END_TEST

/* Every numeric row accepts its bounds and refuses one step outside them. */
START_TEST(test_bounds_every_row)
{
	size_t n;
	const struct cfg_setting *tab = cfg_settings(&n);
	struct cfg *c = cfg_new_defaults();
	struct nk_error err;
	char v[64];

	for (size_t i = 0; i < n; i++) {
		const struct cfg_setting *s = &tab[i];
		double lo = s->min, hi = s->max;

		if (s->type == CFG_T_STRING || s->type == CFG_T_ENUM || s->type == CFG_T_BOOL)
			continue;
		snprintf(v, sizeof(v), s->type == CFG_T_TIME ? "%g" : "%.0f", lo);
		ck_assert_msg(cfg_setting_apply(c, s, v, &err), "%s = %s (min)", s->name, v);
		snprintf(v, sizeof(v), s->type == CFG_T_TIME ? "%.1f" : "%.0f", hi);
		ck_assert_msg(cfg_setting_apply(c, s, v, &err), "%s = %s (max)", s->name, v);
		snprintf(v, sizeof(v), s->type == CFG_T_TIME ? "%.1f" : "%.0f", hi + 1);
		ck_assert_msg(!cfg_setting_apply(c, s, v, &err), "%s = %s accepted", s->name, v);
		snprintf(v, sizeof(v), s->type == CFG_T_TIME ? "%g" : "%.0f",
			 s->type == CFG_T_TIME && lo == 0 ? -0.5 : lo - 1);
		ck_assert_msg(!cfg_setting_apply(c, s, v, &err), "%s = %s accepted", s->name, v);
		ck_assert_msg(strstr(err.message, s->name) != NULL, "%s", err.message);
	}
	cfg_unref(c);
}
END_TEST

START_TEST(test_neki_section_alias)
{
	struct cfg *c = load_ok("[neki]\nworkers = 3\nshm_size = 128MB\n"
				"[pgbouncer]\nlisten_port = 7000\n");

	ck_assert_int_eq(c->neki.workers, 3);
	ck_assert_int_eq(c->neki.shm_size, 128LL << 20);
	ck_assert_int_eq(c->proc.listen_port, 7000);
	cfg_unref(c);
}
END_TEST

START_TEST(test_empty_file_is_defaults)
{
	struct cfg *c = load_ok("");
	struct cfg *d = cfg_new_defaults();
	size_t n;
	const struct cfg_setting *tab = cfg_settings(&n);

	for (size_t i = 0; i < n; i++) {
		if (strcmp(tab[i].name, "conffile") == 0)
			continue;
		ck_assert_msg(!cfg_setting_changed(c, d, &tab[i]), "%s differs", tab[i].name);
	}
	ck_assert_int_ge(c->neki.workers, 1);
	cfg_unref(c);
	cfg_unref(d);
}
END_TEST

/* Every default of every row: parse, format, parse the formatted text again. */
START_TEST(test_defaults_round_trip)
{
	size_t n;
	const struct cfg_setting *tab = cfg_settings(&n);
	struct cfg *c = cfg_new_defaults(), *d = cfg_new_defaults();
	struct nk_error err;
	char buf[1024];

	ck_assert_ptr_nonnull(c);
	for (size_t i = 0; i < n; i++) {
		const struct cfg_setting *s = &tab[i];

		ck_assert_msg(cfg_setting_apply(c, s, s->default_value, &err),
			      "default of %s rejected: %s", s->name, err.message);
		cfg_setting_format(c, s, buf, sizeof(buf));
		ck_assert_msg(cfg_setting_apply(d, s, buf, &err),
			      "formatted default of %s (%s) rejected: %s", s->name, buf,
			      err.message);
		ck_assert_msg(!cfg_setting_changed(c, d, s), "%s does not round-trip", s->name);
	}
	cfg_unref(c);
	cfg_unref(d);
}
END_TEST

START_TEST(test_table_shape)
{
	size_t n, pgb = 0, neki = 0;
	const struct cfg_setting *tab = cfg_settings(&n);

	for (size_t i = 0; i < n; i++) {
		const struct cfg_setting *s = &tab[i];

		if (i > 0)
			ck_assert_msg(strcmp(tab[i - 1].name, s->name) < 0, "%s out of order",
				      s->name);
		ck_assert_msg(s->description && strlen(s->description) > 10,
			      "%s has no description", s->name);
		ck_assert_msg(s->unit != NULL, "%s unit", s->name);
		ck_assert_msg((int)s->group >= 0 && s->group < CFG_G_COUNT, "%s group", s->name);
		ck_assert_msg((s->type == CFG_T_ENUM) == (s->enum_values != NULL),
			      "%s enum values", s->name);
		if (s->type != CFG_T_STRING && s->type != CFG_T_ENUM)
			ck_assert_msg(s->min <= s->max, "%s bounds", s->name);
		ck_assert_ptr_eq(cfg_setting_find(s->name), s);
		if (s->neki_only) {
			neki++;
			ck_assert_int_eq(s->group, CFG_G_NEKI);
		} else {
			pgb++;
		}
	}
	ck_assert_uint_eq(pgb, 101);
	ck_assert_uint_eq(neki, 15);
	ck_assert_ptr_null(cfg_setting_find("bogus"));
	ck_assert_ptr_null(cfg_setting_find("Listen_Port"));
}
END_TEST

/* pgbouncer's CF_NO_RELOAD settings, exactly, plus neki's startup-only ones. */
START_TEST(test_reloadable_marks)
{
	static const char *const fixed[] = {
		"admin_listen_addr", "admin_listen_port", "disable_pqexec", "job_name",
		"listen_addr", "listen_backlog", "listen_port", "metrics_listen_addr",
		"metrics_listen_port", "pidfile", "pkt_buf", "resolv_conf", "service_name",
		"shm_size", "so_reuseport", "topology_file", "track_extra_parameters",
		"unix_socket_dir", "unix_socket_group", "unix_socket_mode", "user", "workers",
	};
	size_t n, count = 0;
	const struct cfg_setting *tab = cfg_settings(&n);

	for (size_t i = 0; i < n; i++) {
		bool listed = false;

		for (size_t j = 0; j < NK_ARRAY_LEN(fixed); j++)
			listed |= strcmp(fixed[j], tab[i].name) == 0;
		ck_assert_msg(tab[i].reloadable == !listed, "%s reloadable mark", tab[i].name);
		count += listed;
	}
	ck_assert_uint_eq(count, NK_ARRAY_LEN(fixed));
}
END_TEST

/* Selected defaults as pgbouncer 1.25 documents them. */
START_TEST(test_pgbouncer_defaults)
{
	static const struct { const char *name, *value; } cases[] = {
		{ "listen_port", "6432" }, { "unix_socket_dir", "/tmp" },
		{ "unix_socket_mode", "511" }, /* 0777 in decimal, as pgbouncer shows it */
		{ "pool_mode", "session" },
		{ "max_client_conn", "100" }, { "default_pool_size", "20" },
		{ "reserve_pool_timeout", "5" }, { "track_extra_parameters", "IntervalStyle" },
		{ "max_prepared_statements", "200" }, { "autodb_idle_timeout", "3600" },
		{ "stats_period", "60" }, { "scram_iterations", "4096" }, { "auth_type", "md5" },
		{ "server_reset_query", "DISCARD ALL" }, { "server_check_delay", "30" },
		{ "server_check_query", "<empty>" }, { "server_lifetime", "3600" },
		{ "server_idle_timeout", "600" }, { "server_connect_timeout", "15" },
		{ "server_login_retry", "15" }, { "client_login_timeout", "60" },
		{ "query_wait_timeout", "120" }, { "query_wait_notify", "5" },
		{ "cancel_wait_timeout", "10" }, { "suspend_timeout", "10" },
		{ "syslog_ident", "pgbouncer" }, { "syslog_facility", "daemon" },
		{ "log_connections", "1" }, { "dns_max_ttl", "15" }, { "pkt_buf", "4096" },
		{ "max_packet_size", "2147483647" }, { "sbuf_loopcnt", "5" },
		{ "tcp_defer_accept", "1" }, { "tcp_keepalive", "1" },
		{ "client_tls_sslmode", "disable" }, { "server_tls_sslmode", "prefer" },
		{ "client_tls_protocols", "secure" }, { "client_tls_ciphers", "default" },
		{ "client_tls_ecdhcurve", "auto" }, { "client_tls_dheparams", "auto" },
		{ "listen_backlog", "128" }, { "job_name", "pgbouncer" }, { "peer_id", "0" },
		{ "admin_listen_addr", "127.0.0.1" }, { "admin_listen_port", "6433" },
		{ "metrics_listen_port", "0" }, { "shm_size", "64MB" },
		{ "router_work_mem", "64MB" }, { "sequence_batch", "1000" }, { "listen_addr", "" }, { "logfile", "" },
		{ "auth_query", "SELECT rolname, CASE WHEN rolvaliduntil < now() THEN NULL "
		  "ELSE rolpassword END FROM pg_authid WHERE rolname=$1 AND rolcanlogin" },
	};
	struct cfg *c = cfg_new_defaults();

	for (size_t i = 0; i < NK_ARRAY_LEN(cases); i++)
		ck_assert_msg(strcmp(value_of(c, cases[i].name), cases[i].value) == 0,
			      "%s = %s, expected %s", cases[i].name, value_of(c, cases[i].name),
			      cases[i].value);
	cfg_unref(c);
}
END_TEST

/* Accepted values per type: (setting, ini text, formatted result). */
START_TEST(test_values_accepted)
{
	static const struct { const char *name, *in, *out; } cases[] = {
		{ "max_client_conn", "0x10", "16" },
		{ "max_client_conn", "010", "8" },
		{ "max_client_conn", "2147483647", "2147483647" },
		{ "unix_socket_mode", "0777", "511" },
		{ "unix_socket_mode", "0600", "384" },
		{ "unix_socket_mode", "384", "384" },
		{ "job_name", "svc", "svc" },
		{ "service_name", "svc", "svc" },
		{ "server_lifetime", "1.5", "1.5" },
		{ "server_lifetime", "0", "0" },
		{ "server_lifetime", "1e3", "1000" },
		{ "log_connections", "0", "0" },
		{ "log_connections", "1", "1" },
		{ "log_connections", "2", "1" },
		{ "log_connections", "off", "0" },
		{ "log_connections", "ON", "1" },
		{ "log_connections", "yes", "1" },
		{ "log_connections", "no", "0" },
		{ "log_connections", "true", "1" },
		{ "log_connections", "false", "0" },
		{ "pool_mode", "session", "session" },
		{ "pool_mode", "Transaction", "transaction" },
		{ "pool_mode", "statement", "statement" },
		{ "auth_type", "any", "any" }, { "auth_type", "trust", "trust" },
		{ "auth_type", "plain", "plain" }, { "auth_type", "md5", "md5" },
		{ "auth_type", "scram-sha-256", "scram-sha-256" }, { "auth_type", "cert", "cert" },
		{ "auth_type", "hba", "hba" },
		{ "server_tls_sslmode", "verify-full", "verify-full" },
		{ "client_tls_sslmode", "require", "require" },
		{ "client_tls_sslmode", "verify-ca", "verify-ca" },
		{ "client_tls_sslmode", "allow", "allow" },
		{ "shm_size", "1048576", "1MB" },
		{ "shm_size", "2048kB", "2MB" },
		{ "shm_size", "3GB", "3GB" },
		{ "shm_size", "1TB", "1TB" },
		{ "shm_size", "1048577", "1048577" },
		{ "shm_size", "100 MB", "100MB" },
		{ "listen_addr", "*", "*" },
		{ "server_check_query", "", "" },
		{ "workers", "7", "7" },
		{ "peer_id", "16383", "16383" },
	};

	for (size_t i = 0; i < NK_ARRAY_LEN(cases); i++) {
		struct cfg *c = cfg_new_defaults();
		struct nk_error err;
		const struct cfg_setting *s = cfg_setting_find(cases[i].name);

		ck_assert_msg(cfg_setting_apply(c, s, cases[i].in, &err), "%s = %s: %s",
			      cases[i].name, cases[i].in, err.message);
		ck_assert_msg(strcmp(value_of(c, cases[i].name), cases[i].out) == 0,
			      "%s = %s gave %s", cases[i].name, cases[i].in,
			      value_of(c, cases[i].name));
		cfg_unref(c);
	}
}
END_TEST

/* Rejected values: (setting, ini text, expected DETAIL or message part). */
START_TEST(test_values_rejected)
{
	static const struct { const char *name, *in, *expect; } cases[] = {
		{ "max_client_conn", "abc", "expected an integer from 0 to 2147483647" },
		{ "max_client_conn", "12abc", "expected an integer" },
		{ "max_client_conn", "", "expected an integer" },
		{ "max_client_conn", "-1", "expected an integer from 0" },
		{ "max_client_conn", "2147483648", "expected an integer" },
		{ "max_client_conn", "99999999999999999999", "expected an integer" },
		{ "max_client_conn", "1.5", "expected an integer" },
		{ "listen_port", "0", "from 1 to 65535" },
		{ "listen_port", "65536", "from 1 to 65535" },
		{ "peer_id", "16384", "from 0 to 16383" },
		{ "unix_socket_mode", "010000", "octal file mode" },
		{ "unix_socket_mode", "rwx", "octal file mode" },
		{ "server_lifetime", "-1", "expected a number of seconds" },
		{ "server_lifetime", "10s", "expected a number of seconds" },
		{ "server_lifetime", "nan", "expected a number of seconds" },
		{ "server_lifetime", "inf", "expected a number of seconds" },
		{ "server_lifetime", "", "expected a number of seconds" },
		{ "stats_period", "0", "from 1 to" },
		{ "log_connections", "maybe", "expected 0 or 1" },
		{ "log_connections", "", "expected 0 or 1" },
		{ "pool_mode", "sessions", "accepted values: session, transaction, statement" },
		{ "pool_mode", "", "accepted values" },
		{ "auth_type", "password", "accepted values: any, trust, plain, md5, "
		  "scram-sha-256, cert, hba" },
		{ "auth_type", "peer", "accepted values" },
		{ "auth_type", "ldap", "not supported by this build" },
		{ "auth_type", "pam", "not supported by this build" },
		{ "auth_ldap_options", "ldapurl=ldap://x", "LDAP authentication is not supported by "
		  "this build | only the empty value is accepted" },
		{ "server_tls_sslmode", "on", "accepted values: disable, allow, prefer, require, "
		  "verify-ca, verify-full" },
		{ "shm_size", "64XB", "kB, MB, GB or TB" },
		{ "shm_size", "1000", "from 1048576" },
		{ "shm_size", "-5MB", "expected a size" },
		{ "shm_size", "2TB", "expected a size" },
		{ "workers", "1025", "from 0 to 1024" },
		{ "workers", "-1", "from 0 to 1024" },
		{ "sequence_batch", "0", "from 1 to" },
		{ "admin_listen_port", "70000", "from 0 to 65535" },
		{ "pkt_buf", "10", "from 64" },
		{ "auth_dbname", "pgbouncer", "cannot use the reserved \"pgbouncer\" database as "
		  "an auth_dbname" },
		{ "auth_dbname", "neki", "cannot use the reserved \"neki\" database" },
	};

	for (size_t i = 0; i < NK_ARRAY_LEN(cases); i++) {
		struct cfg *c = cfg_new_defaults();
		struct nk_error err;
		const struct cfg_setting *s = cfg_setting_find(cases[i].name);
		char before[1024], all[2048];

		snprintf(before, sizeof(before), "%s", value_of(c, cases[i].name));
		ck_assert_msg(!cfg_setting_apply(c, s, cases[i].in, &err), "%s = %s accepted",
			      cases[i].name, cases[i].in);
		ck_assert_str_eq(err.sqlstate, "F0000");
		snprintf(all, sizeof(all), "%s | %s", err.message, err.detail);
		ck_assert_msg(strstr(all, cases[i].expect) != NULL, "%s = %s: got \"%s\"",
			      cases[i].name, cases[i].in, all);
		ck_assert_msg(strstr(err.message, "invalid value") != NULL, "%s", err.message);
		ck_assert_str_eq(value_of(c, cases[i].name), before);
		cfg_unref(c);
	}
}
END_TEST

/* Whole-file errors: (ini text, message part, where). */
START_TEST(test_file_errors)
{
	static const struct { const char *text, *expect, *where; } cases[] = {
		{ "[pgbouncer]\nbogus_setting = 1\n",
		  "unknown parameter: pgbouncer/bogus_setting in configuration (t.ini:2)",
		  "t.ini:2" },
		{ "[neki]\n\nbogus = 1\n", "unknown parameter: neki/bogus in configuration "
		  "(t.ini:3)", "t.ini:3" },
		{ "[pgbouncer]\nListen_Port = 1\n", "unknown parameter: pgbouncer/Listen_Port",
		  "t.ini:2" },
		{ "[foo]\n", "invalid section \"foo\" in configuration (t.ini:1)", "t.ini:1" },
		{ "[PgBouncer]\n", "invalid section \"PgBouncer\"", "t.ini:1" },
		{ "[Databases]\n", "invalid section \"Databases\"", "t.ini:1" },
		{ "listen_port = 1\n", "is outside of any section", "t.ini:1" },
		{ "[pgbouncer]\nlisten_port 6432\n", "syntax error in configuration (t.ini:2)",
		  "t.ini:2" },
		{ "[pgbouncer]\n= 6432\n", "syntax error", "t.ini:2" },
		{ "[pgbouncer\n", "syntax error in configuration (t.ini:1)", "t.ini:1" },
		{ "[pgbouncer] junk\n", "syntax error", "t.ini:1" },
		{ "[pgbouncer]\n'listen_port = 1\n", "syntax error", "t.ini:2" },
		{ "[pgbouncer]\n'' = 1\n", "syntax error", "t.ini:2" },
		{ "[pgbouncer]\n'a' b = 1\n", "syntax error", "t.ini:2" },
		{ "[pgbouncer]\nlisten/port = 1\n", "syntax error", "t.ini:2" },
		{ "[pgbouncer]\n%include\n", "syntax error", "t.ini:2" },
		{ "[pgbouncer]\nlisten_port = 6432\nmax_client_conn = lots\n",
		  "invalid value \"lots\" for parameter max_client_conn in configuration "
		  "(t.ini:3)", "t.ini:3" },
		{ "[pgbouncer]\nauth_type = ldap\n", "not supported by this build", "t.ini:2" },
		{ "[pgbouncer]\nlisten_port = 7000\nadmin_listen_port = 7000\n",
		  "admin_listen_port (7000) must differ from listen_port", "" },
		{ "[pgbouncer]\nmetrics_listen_port = 6433\n",
		  "metrics_listen_port (6433) must differ", "" },
		{ "[pgbouncer]\n%include /nonexistent/neki-test.ini\n",
		  "could not open configuration file \"/nonexistent/neki-test.ini\": No such "
		  "file or directory in configuration (t.ini:2)", "t.ini:2" },
	};

	for (size_t i = 0; i < NK_ARRAY_LEN(cases); i++) {
		struct nk_error err;
		struct cfg *c = load(cases[i].text, &err);

		ck_assert_msg(c == NULL, "case %zu loaded", i);
		ck_assert_str_eq(err.sqlstate, "F0000");
		ck_assert_msg(strstr(err.message, cases[i].expect) != NULL,
			      "case %zu: got \"%s\"", i, err.message);
		ck_assert_msg(strcmp(err.where, cases[i].where) == 0, "case %zu: where \"%s\"",
			      i, err.where);
	}
}
END_TEST

START_TEST(test_unknown_parameter_hint)
{
	struct nk_error err;
	char buf[1024];

	ck_assert_ptr_null(load("[pgbouncer]\nmax_client_con = 10\n", &err));
	ck_assert_str_eq(err.hint, "did you mean \"max_client_conn\"? The accepted settings "
			 "are listed in neki.ini(5)");
	ck_assert_ptr_null(load("[pgbouncer]\nxyzzy_quux_frob = 10\n", &err));
	ck_assert_str_eq(err.hint, "the accepted settings are listed in neki.ini(5)");
	ck_assert_ptr_null(load("[pgbouncer]\npool_mode = sesion\n", &err));
	ck_assert_str_eq(err.detail, "accepted values: session, transaction, statement");
	ck_assert_str_eq(cfg_error_text(&err, buf, sizeof(buf)), "invalid value \"sesion\" for "
			 "parameter pool_mode in configuration (t.ini:2): accepted values: "
			 "session, transaction, statement");
	ck_assert_ptr_null(load("[pgbouncer]\nmax_client_con = 10\n", &err));
	ck_assert_str_eq(cfg_error_text(&err, buf, sizeof(buf)), "unknown parameter: "
			 "pgbouncer/max_client_con in configuration (t.ini:2); did you mean "
			 "\"max_client_conn\"? The accepted settings are listed in neki.ini(5)");
	ck_assert_ptr_null(load("[foo]\n", &err));
	ck_assert_str_eq(cfg_error_text(&err, buf, 40), "invalid section \"foo\" in configuration ");
}
END_TEST

START_TEST(test_quoted_keys_and_values)
{
	struct cfg *c = load_ok(
		"[pgbouncer]\n"
		"'listen_port' = 7001\n"
		"\"max_client_conn\" = 42\n"
		"[databases]\n"
		"'my db' = host=h1 dbname='with '' quote'\n"
		"\"we\"\"ird\" = host=h2 application_name='a b c'\n"
		"my-db.x = host=h3\n");

	ck_assert_int_eq(c->proc.listen_port, 7001);
	ck_assert_int_eq(c->pool.max_client_conn, 42);
	ck_assert_ptr_nonnull(cfg_database_find(c, "my db"));
	ck_assert_str_eq(cfg_database_find(c, "my db")->dbname, "with ' quote");
	ck_assert_ptr_nonnull(cfg_database_find(c, "we\"ird"));
	ck_assert_str_eq(cfg_database_find(c, "we\"ird")->application_name, "a b c");
	ck_assert_str_eq(cfg_database_find(c, "my-db.x")->host, "h3");
	cfg_unref(c);
}
END_TEST

START_TEST(test_later_value_wins)
{
	struct cfg *c = load_ok("[pgbouncer]\nlisten_port = 1000\nlisten_port = 2000\n"
				"[databases]\na = host=x\na = host=y\n");

	ck_assert_int_eq(c->proc.listen_port, 2000);
	ck_assert_uint_eq(c->n_databases, 1);
	ck_assert_str_eq(cfg_database_find(c, "a")->host, "y");
	cfg_unref(c);
}
END_TEST

/* cfg_dup: an equal, independent deep copy. */
START_TEST(test_dup)
{
	struct cfg *c = load_ok(
		"[pgbouncer]\nlisten_port = 7777\nadmin_users = root\n"
		"[databases]\na = host=h dbname=d password=p\n* = host=auto\n"
		"[users]\nu = pool_size=4\n[peers]\n3 = host=p3\n"
		"[shards]\ns1 = host=sh port=6000 dbname=x user=y password=z sslmode=disable\n");
	struct cfg *d = cfg_dup(c);
	size_t n;
	const struct cfg_setting *tab = cfg_settings(&n);
	struct nk_error err;

	ck_assert_ptr_nonnull(d);
	ck_assert_int_eq(d->refcount, 1);
	for (size_t i = 0; i < n; i++)
		ck_assert_msg(!cfg_setting_changed(c, d, &tab[i]), "%s differs", tab[i].name);
	ck_assert_str_eq(d->path, c->path);
	ck_assert_ptr_ne(d->auth.admin_users, c->auth.admin_users);
	ck_assert_str_eq(cfg_database_find(d, "a")->password, "p");
	ck_assert_ptr_ne(cfg_database_find(d, "a")->host, cfg_database_find(c, "a")->host);
	ck_assert_str_eq(cfg_database_auto(d)->host, "auto");
	ck_assert_int_eq(cfg_user_find(d, "u")->pool_size, 4);
	ck_assert_str_eq(cfg_peer_find(d, 3)->host, "p3");
	ck_assert_str_eq(cfg_shard_find(d, "s1")->conninfo, cfg_shard_find(c, "s1")->conninfo);
	ck_assert_int_eq(cfg_shard_find(d, "s1")->port, 6000);
	ck_assert_str_eq(cfg_shard_find(d, "s1")->sslmode, "disable");

	/* a SET on the copy leaves the original alone */
	ck_assert(cfg_setting_apply(d, cfg_setting_find("admin_users"), "alice", &err));
	ck_assert_str_eq(c->auth.admin_users, "root");
	ck_assert_str_eq(d->auth.admin_users, "alice");
	cfg_unref(c);
	ck_assert_str_eq(cfg_database_find(d, "a")->dbname, "d");
	cfg_unref(d);
}
END_TEST

START_TEST(test_refcount_and_current)
{
	struct cfg *a = load_ok("[pgbouncer]\nlisten_port = 1111\n");
	struct cfg *b = load_ok("[pgbouncer]\nlisten_port = 2222\n");

	ck_assert_ptr_null(cfg_current());
	cfg_set_current(a);
	ck_assert_int_eq(a->refcount, 2);
	ck_assert_int_eq(cfg_current()->proc.listen_port, 1111);
	cfg_set_current(b);
	ck_assert_int_eq(a->refcount, 1);
	ck_assert_int_eq(cfg_current()->proc.listen_port, 2222);
	cfg_ref(b);
	ck_assert_int_eq(b->refcount, 3);
	cfg_unref(b);
	cfg_set_current(NULL);
	ck_assert_ptr_null(cfg_current());
	ck_assert_int_eq(b->refcount, 1);
	cfg_unref(a);
	cfg_unref(b);
	cfg_unref(NULL);
}
END_TEST

/* [databases]: every key, the alias, the defaults of an entry. */
START_TEST(test_databases_keys)
{
	struct cfg *c = load_ok(
		"[databases]\n"
		"full = dbname=real host=h1,h2 port=6000 user=u password='p w' auth_user=au "
		"auth_query='SELECT 1' auth_dbname=adb pool_size=5 min_pool_size=1 "
		"reserve_pool_size=2 max_db_connections=9 max_db_client_connections=90 "
		"pool_mode=statement server_lifetime=1.5 query_wait_timeout=7 "
		"load_balance_hosts=disable connect_query='SET x = 1' client_encoding=UTF8 "
		"datestyle=ISO timezone=UTC application_name=app topology=yes\n"
		"alias = reserve_pool=3\n"
		"bare =\n"
		"* = host=auto\n");
	const struct cfg_database *d = cfg_database_find(c, "full");

	ck_assert_ptr_nonnull(d);
	ck_assert_str_eq(d->dbname, "real");
	ck_assert_str_eq(d->host, "h1,h2");
	ck_assert_int_eq(d->port, 6000);
	ck_assert_str_eq(d->user, "u");
	ck_assert_str_eq(d->password, "p w");
	ck_assert_str_eq(d->auth_user, "au");
	ck_assert_str_eq(d->auth_query, "SELECT 1");
	ck_assert_str_eq(d->auth_dbname, "adb");
	ck_assert_int_eq(d->pool_size, 5);
	ck_assert_int_eq(d->min_pool_size, 1);
	ck_assert_int_eq(d->reserve_pool_size, 2);
	ck_assert_int_eq(d->max_db_connections, 9);
	ck_assert_int_eq(d->max_db_client_connections, 90);
	ck_assert_int_eq(d->pool_mode, CFG_POOL_STATEMENT);
	ck_assert(fabs(d->server_lifetime - 1.5) < 1e-9);
	ck_assert(fabs(d->query_wait_timeout - 7) < 1e-9);
	ck_assert(!d->load_balance_hosts);
	ck_assert_str_eq(d->connect_query, "SET x = 1");
	ck_assert_str_eq(d->client_encoding, "UTF8");
	ck_assert_str_eq(d->datestyle, "ISO");
	ck_assert_str_eq(d->timezone, "UTC");
	ck_assert_str_eq(d->application_name, "app");
	ck_assert(d->topology);
	ck_assert_int_eq(cfg_database_find(c, "alias")->reserve_pool_size, 3);

	d = cfg_database_find(c, "bare");
	ck_assert_ptr_null(d->dbname);
	ck_assert_ptr_null(d->host);
	ck_assert_int_eq(d->port, 5432);
	ck_assert_int_eq(d->pool_size, -1);
	ck_assert_int_eq(d->min_pool_size, -1);
	ck_assert_int_eq(d->reserve_pool_size, -1);
	ck_assert_int_eq(d->max_db_connections, -1);
	ck_assert_int_eq(d->max_db_client_connections, -1);
	ck_assert_int_eq(d->pool_mode, CFG_POOL_UNSET);
	ck_assert(d->server_lifetime < 0 && d->query_wait_timeout < 0);
	ck_assert(d->load_balance_hosts);
	ck_assert(!d->topology);

	ck_assert_ptr_null(cfg_database_find(c, "*"));
	ck_assert_str_eq(cfg_database_auto(c)->host, "auto");
	ck_assert_ptr_null(cfg_database_find(c, "nope"));
	cfg_unref(c);
}
END_TEST

/* Every [databases] key accepted by a one-key entry (the 22 + alias + topology). */
START_TEST(test_databases_each_key)
{
	static const char *const keys[] = {
		"dbname=x", "host=x", "port=1", "user=x", "password=x", "auth_user=x",
		"auth_query=x", "auth_dbname=x", "pool_size=1", "min_pool_size=1",
		"reserve_pool_size=1", "reserve_pool=1", "max_db_connections=1",
		"max_db_client_connections=1", "pool_mode=session", "server_lifetime=1",
		"query_wait_timeout=1", "load_balance_hosts=round-robin", "connect_query=x",
		"client_encoding=x", "datestyle=x", "timezone=x", "application_name=x",
		"topology=no",
	};
	char text[256];

	for (size_t i = 0; i < NK_ARRAY_LEN(keys); i++) {
		struct cfg *c;

		snprintf(text, sizeof(text), "[databases]\ndb = %s\n", keys[i]);
		c = load_ok(text);
		ck_assert_uint_eq(c->n_databases, 1);
		cfg_unref(c);
	}
}
END_TEST

/* Section entry errors: (ini text, message part, detail part). */
START_TEST(test_section_errors)
{
	static const struct { const char *text, *msg, *detail; } cases[] = {
		{ "[databases]\ndb = host=x bogus=1\n",
		  "unrecognized connection parameter: bogus in configuration (t.ini:2)",
		  "dbname, host, port" },
		{ "[databases]\ndb = Host=x\n", "unrecognized connection parameter: Host", "" },
		{ "[databases]\ndb = host=\n", "syntax error in connection string of database "
		  "\"db\"", "connection parameter \"host\" has an empty value" },
		{ "[databases]\ndb = host=''\n", "syntax error", "has an empty value" },
		{ "[databases]\ndb = host='x\n", "syntax error", "has no closing quote" },
		{ "[databases]\ndb = host\n", "syntax error", "expected \"=\" after \"host\"" },
		{ "[databases]\ndb = =x\n", "syntax error", "expected \"=\"" },
		{ "[databases]\ndb = port=0\n", "invalid value \"0\" for parameter port of "
		  "database \"db\"", "from 1 to 65535" },
		{ "[databases]\ndb = port=abc\n", "invalid value \"abc\"", "from 1 to 65535" },
		{ "[databases]\ndb = pool_size=-1\n", "invalid value \"-1\" for parameter "
		  "pool_size", "from 0 to 2147483647" },
		{ "[databases]\ndb = pool_mode=fast\n", "invalid value \"fast\" for parameter "
		  "pool_mode", "session, transaction, statement" },
		{ "[databases]\ndb = server_lifetime=-5\n", "invalid value \"-5\"",
		  "number of seconds" },
		{ "[databases]\ndb = load_balance_hosts=random\n", "invalid value \"random\"",
		  "round-robin, disable" },
		{ "[databases]\ndb = topology=maybe\n", "invalid value \"maybe\"",
		  "expected yes or no" },
		{ "[databases]\npgbouncer = host=x\n", "database name \"pgbouncer\" is reserved",
		  "" },
		{ "[databases]\nneki = host=x\n", "database name \"neki\" is reserved", "" },
		{ "[users]\nbob = pool_size=1 max_db_connections=1\n",
		  "unrecognized user parameter: max_db_connections", "pool_mode, pool_size" },
		{ "[databases]\nd = host=x target=standby\n", "invalid value \"standby\" for "
		  "parameter target", "primary, replica, rdonly" },
		{ "[users]\nbob = pool_mode=none\n", "invalid value \"none\" for parameter "
		  "pool_mode of user \"bob\"", "" },
		{ "[users]\nbob = query_timeout=x\n", "invalid value \"x\"", "seconds" },
		{ "[peers]\n1 = port=6432\n", "host was not provided for peer 1", "" },
		{ "[peers]\n0 = host=x\n", "invalid peer id \"0\"", "from 1 to 65535" },
		{ "[peers]\n65536 = host=x\n", "invalid peer id \"65536\"", "" },
		{ "[peers]\nabc = host=x\n", "invalid peer id \"abc\"", "" },
		{ "[peers]\n1 = host=x dbname=y\n", "unrecognized connection parameter: dbname",
		  "host, port, pool_size" },
		{ "[peers]\n1 = host=x port=99999\n", "invalid value \"99999\"", "" },
		{ "[shards]\ns1 =\n", "invalid connection string for shard \"s1\": the "
		  "connection string is empty", "" },
		{ "[shards]\ns1 = postgresql://h/db?bogus=1\n", "unrecognized connection "
		  "parameter: bogus", "libpq" },
		{ "[shards]\ns1 = postgresql://h:99999/db\n", "port must be a number", "" },
		{ "[shards]\ns1 = postgresql://h/db?sslmode=x\n", "sslmode must be", "" },
		{ "[shards]\ns1 = postgresql://h/d%4\n", "bad %-escape in the URI", "" },
		{ "[shards]\ns1 = postgresql://h/d?x\n", "not key=value", "" },
		{ "[shards]\ns1 = postgresql://[::1/d\n", "bad host in the URI", "" },
		{ "[shards]\ns1 = host=h bogus=1\n", "unrecognized connection parameter: bogus",
		  "libpq" },
		{ "[shards]\ns1 = host=h port=x\n", "port must be a number from 1 to 65535", "" },
		{ "[shards]\ns1 = host=h port=5432,0\n", "port must be a number", "" },
		{ "[shards]\ns1 = host=h sslmode=maybe\n", "sslmode must be disable", "" },
		{ "[shards]\ns1 = host='h\n", "unterminated quoted string", "" },
		{ "[shards]\ns1 = host\n", "expected \"=\" after a keyword", "" },
		{ "[shards]\ns1 = host=a\ns1 = host=b\n", "shard \"s1\" is declared twice "
		  "in configuration (t.ini:3)", "" },
		{ "[shards]\ns1 = host=a replicas=\n", "invalid replicas for shard \"s1\": "
		  "\"\" has an empty item", "" },
		{ "[shards]\ns1 = host=a replicas=b,,c\n", "has an empty item", "" },
		{ "[shards]\ns1 = host=a replicas=b:99999\n", "invalid replicas for shard "
		  "\"s1\": \"b:99999\" is not host[:port]", "" },
		{ "[shards]\ns1 = host=a rdonly=b:x\n", "invalid rdonly for shard", "" },
		{ "[shards]\ns1 = host=a replicas=[::1\n", "is not host[:port]", "" },
		{ "[shards]\ns1 = port=5432 replicas=b\n", "shard \"s1\" lists standbys but "
		  "does not name one primary host", "" },
		{ "[shards]\ns1 = host=a,b replicas=c\n", "does not name one primary", "" },
		{ "[shards]\ns1 = host=a hostaddr=1.2.3.4 replicas=c\n", "does not name one",
		  "" },
		{ "[shards]\ns1 = host=a port=5432 replicas=a:5432\n", "shard \"s1\" names "
		  "server a:5432 twice", "" },
		{ "[shards]\ns1 = postgresql://a/db?replicas=b\n", "key=value form only", "" },
		{ "[shards]\ns1 = host=a replicas=b1,b2,b3,b4,b5,b6,b7,b8,b9,b10,b11,b12,b13,"
		  "b14,b15,b16\n", "\"b16\" is one server too many", "" },
	};

	for (size_t i = 0; i < NK_ARRAY_LEN(cases); i++) {
		struct nk_error err;
		struct cfg *c = load(cases[i].text, &err);

		ck_assert_msg(c == NULL, "case %zu loaded", i);
		ck_assert_msg(strstr(err.message, cases[i].msg) != NULL, "case %zu: got \"%s\"",
			      i, err.message);
		ck_assert_msg(strstr(err.detail, cases[i].detail) != NULL,
			      "case %zu: detail \"%s\"", i, err.detail);
		ck_assert_msg(strstr(err.where, "t.ini:") == err.where, "case %zu: where", i);
	}
}
END_TEST

START_TEST(test_users_and_peers)
{
	struct cfg *c = load_ok(
		"[users]\n"
		"alice = pool_mode=transaction pool_size=3 reserve_pool_size=1 "
		"max_user_connections=4 max_user_client_connections=40 query_timeout=1.5 "
		"query_wait_timeout=2 idle_transaction_timeout=3 transaction_timeout=4 "
		"client_idle_timeout=5\n"
		"bob =\n"
		"[peers]\n"
		"1 = host=/tmp/p1\n"
		"65535 = host=10.0.0.2 port=7000 pool_size=8\n");
	const struct cfg_user *u = cfg_user_find(c, "alice");
	const struct cfg_peer *p;

	ck_assert_int_eq(u->pool_mode, CFG_POOL_TRANSACTION);
	ck_assert_int_eq(u->pool_size, 3);
	ck_assert_int_eq(u->reserve_pool_size, 1);
	ck_assert_int_eq(u->max_user_connections, 4);
	ck_assert_int_eq(u->max_user_client_connections, 40);
	ck_assert(fabs(u->query_timeout - 1.5) < 1e-9);
	ck_assert(u->query_wait_timeout == 2 && u->idle_transaction_timeout == 3);
	ck_assert(u->transaction_timeout == 4 && u->client_idle_timeout == 5);
	u = cfg_user_find(c, "bob");
	ck_assert_int_eq(u->pool_mode, CFG_POOL_UNSET);
	ck_assert(u->pool_size == -1 && u->reserve_pool_size == -1);
	ck_assert(u->max_user_connections == -1 && u->max_user_client_connections == -1);
	ck_assert(u->query_timeout < 0 && u->query_wait_timeout < 0);
	ck_assert(u->idle_transaction_timeout < 0 && u->transaction_timeout < 0);
	ck_assert(u->client_idle_timeout < 0);
	ck_assert_ptr_null(cfg_user_find(c, "carol"));

	p = cfg_peer_find(c, 1);
	ck_assert_str_eq(p->host, "/tmp/p1");
	ck_assert_int_eq(p->port, 6432);
	ck_assert_int_eq(p->pool_size, -1);
	p = cfg_peer_find(c, 65535);
	ck_assert_str_eq(p->host, "10.0.0.2");
	ck_assert_int_eq(p->port, 7000);
	ck_assert_int_eq(p->pool_size, 8);
	ck_assert_ptr_null(cfg_peer_find(c, 2));
	cfg_unref(c);
}
END_TEST

START_TEST(test_shards)
{
	struct cfg *c = load_ok(
		"[shards]\n"
		"s1 = host=10.0.0.1 port=5433 dbname=shop user=neki password=secret "
		"sslmode=require\n"
		"s2 = host = 'my host' password='it\\'s' connect_timeout=5 application_name=x\n"
		"s3 = host=a,b port=5432,5433 options='-c geqo=off'\n"
		"s4 = dbname=d\\ x\n");
	const struct cfg_shard *s = cfg_shard_find(c, "s1");

	ck_assert_uint_eq(c->n_shards, 4);
	ck_assert_str_eq(s->uid, "s1");
	ck_assert_str_eq(s->conninfo, "host=10.0.0.1 port=5433 dbname=shop user=neki "
			 "password=secret sslmode=require");
	ck_assert_str_eq(s->host, "10.0.0.1");
	ck_assert_int_eq(s->port, 5433);
	ck_assert_str_eq(s->dbname, "shop");
	ck_assert_str_eq(s->user, "neki");
	ck_assert_str_eq(s->password, "secret");
	ck_assert_str_eq(s->sslmode, "require");
	s = cfg_shard_find(c, "s2");
	ck_assert_str_eq(s->host, "my host");
	ck_assert_str_eq(s->password, "it's");
	ck_assert_int_eq(s->port, 5432);
	ck_assert_ptr_null(s->dbname);
	ck_assert_ptr_null(s->user);
	ck_assert_ptr_null(s->sslmode);
	s = cfg_shard_find(c, "s3");
	ck_assert_str_eq(s->host, "a,b");
	ck_assert_int_eq(s->port, 5432);
	ck_assert_str_eq(cfg_shard_find(c, "s4")->dbname, "d x");
	ck_assert_ptr_null(cfg_shard_find(c, "s9"));
	ck_assert_uint_eq(cfg_shard_find(c, "s1")->n_servers, 1);
	ck_assert_str_eq(cfg_shard_find(c, "s1")->servers[0].host, "10.0.0.1");
	ck_assert_int_eq(cfg_shard_find(c, "s1")->servers[0].port, 5433);
	ck_assert_ptr_null(cfg_shard_find(c, "s4")->servers[0].host);
	cfg_unref(c);

	/* [databases] target= (a sharded database's first __neki.target) */
	c = load_ok("[databases]\nd1 = host=x topology=yes target=replica\n"
		    "d2 = host=x target=rdonly\nd3 = host=x\n");
	ck_assert_int_eq(cfg_database_find(c, "d1")->read_target, CFG_SRV_REPLICA);
	ck_assert_int_eq(cfg_database_find(c, "d2")->read_target, CFG_SRV_RDONLY);
	ck_assert_int_eq(cfg_database_find(c, "d3")->read_target, CFG_SRV_PRIMARY);
	cfg_unref(c);

	/* [databases] tx_mode= (a sharded database's first __neki.tx_mode) */
	c = load_ok("[databases]\nd1 = host=x topology=yes tx_mode=atomic\n"
		    "d2 = host=x tx_mode=single\nd3 = host=x tx_mode=multi\nd4 = host=x\n");
	ck_assert_int_eq(cfg_database_find(c, "d1")->tx_mode, PLAN_TX_ATOMIC);
	ck_assert_int_eq(cfg_database_find(c, "d2")->tx_mode, PLAN_TX_SINGLE);
	ck_assert_int_eq(cfg_database_find(c, "d3")->tx_mode, PLAN_TX_MULTI);
	ck_assert_int_eq(cfg_database_find(c, "d4")->tx_mode, PLAN_TX_MULTI);
	cfg_unref(c);
	{
		struct nk_error err;

		ck_assert_ptr_null(load("[databases]\nd1 = host=x tx_mode=atomically\n", &err));
		ck_assert_msg(strstr(err.message, "atomically") != NULL ||
			      strstr(err.detail, "multi, single, atomic") != NULL, "%s / %s",
			      err.message, err.detail);
	}

	/* standbys: replicas= and rdonly= (left out of the string for libpq) */
	c = load_ok("[shards]\n"
		    "r1 = host=10.0.0.1 port=6000 replicas=10.0.0.2:6001,10.0.0.3 "
		    "dbname=shop rdonly=[::1]:7000,/run/pg:6002\n");
	s = cfg_shard_find(c, "r1");
	ck_assert_uint_eq(s->n_servers, 5);
	ck_assert_str_eq(s->servers[0].host, "10.0.0.1");
	ck_assert_int_eq(s->servers[0].port, 6000);
	ck_assert_int_eq(s->servers[0].kind, CFG_SRV_PRIMARY);
	ck_assert_str_eq(s->servers[1].host, "10.0.0.2");
	ck_assert_int_eq(s->servers[1].port, 6001);
	ck_assert_int_eq(s->servers[1].kind, CFG_SRV_REPLICA);
	ck_assert_str_eq(s->servers[2].host, "10.0.0.3");
	ck_assert_int_eq(s->servers[2].port, 6000);
	ck_assert_str_eq(s->servers[3].host, "::1");
	ck_assert_int_eq(s->servers[3].port, 7000);
	ck_assert_int_eq(s->servers[3].kind, CFG_SRV_RDONLY);
	ck_assert_str_eq(s->servers[4].host, "/run/pg");
	ck_assert_int_eq(s->servers[4].port, 6002);
	ck_assert_str_eq(s->dbname, "shop");
	ck_assert_str_eq(s->conninfo, "host=10.0.0.1 port=6000 dbname=shop "
			 "host='10.0.0.1,10.0.0.2,10.0.0.3,::1,/run/pg' "
			 "port=6000,6001,6000,7000,6002 target_session_attrs=read-write");
	ck_assert_str_eq(s->servers[1].conninfo, "host=10.0.0.1 port=6000 dbname=shop "
			 "host='10.0.0.2' port=6001 target_session_attrs=any");
	{
		struct cfg *d = cfg_dup(c);

		ck_assert_ptr_nonnull(d);
		ck_assert_uint_eq(cfg_shard_find(d, "r1")->n_servers, 5);
		ck_assert_str_eq(cfg_shard_find(d, "r1")->servers[4].host, "/run/pg");
		cfg_unref(d);
	}
	cfg_unref(c);

	/* the URI form */
	c = load_ok("[shards]\n"
		    "u1 = postgresql://neki:p%40ss@10.0.0.1:5433/shop?sslmode=require&"
		    "application_name=x\n"
		    "u2 = postgres://h1:6001,h2:6002\n"
		    "u3 = postgresql://[::1]:7000/db\n"
		    "u4 = postgresql:///only_db\n"
		    "u5 = postgresql://user@host\n");
	s = cfg_shard_find(c, "u1");
	ck_assert_str_eq(s->user, "neki");
	ck_assert_str_eq(s->password, "p@ss");
	ck_assert_str_eq(s->host, "10.0.0.1");
	ck_assert_int_eq(s->port, 5433);
	ck_assert_str_eq(s->dbname, "shop");
	ck_assert_str_eq(s->sslmode, "require");
	s = cfg_shard_find(c, "u2");
	ck_assert_str_eq(s->host, "h1,h2");
	ck_assert_int_eq(s->port, 6001);
	ck_assert_ptr_null(s->dbname);
	s = cfg_shard_find(c, "u3");
	ck_assert_str_eq(s->host, "::1");
	ck_assert_int_eq(s->port, 7000);
	s = cfg_shard_find(c, "u4");
	ck_assert_ptr_null(s->host);
	ck_assert_str_eq(s->dbname, "only_db");
	s = cfg_shard_find(c, "u5");
	ck_assert_str_eq(s->user, "user");
	ck_assert_ptr_null(s->password);
	ck_assert_str_eq(s->host, "host");
	cfg_unref(c);
}
END_TEST

/* A private temporary directory for %include files. */
static char tmpdir[256];

static void
tmpdir_setup(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/neki-check-config-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void
tmpdir_teardown(void)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
}

/* Write <text> to <tmpdir>/<name>; returns the full path (static buffer rotation). */
static const char *
write_tmp(const char *name, const char *text)
{
	static char paths[4][PATH_MAX];

	ck_assert_uint_lt(strlen(tmpdir) + strlen(name) + 2, PATH_MAX);
	static int next;
	char *path = paths[next++ % 4];
	FILE *f;

	strcpy(path, tmpdir);
	strcat(path, "/");
	strcat(path, name);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	ck_assert_int_eq(fclose(f), 0);
	return path;
}

START_TEST(test_include)
{
	char text[PATH_MAX * 2];
	const char *top;
	struct cfg *c;
	struct nk_error err;

	write_tmp("inner.ini", "max_client_conn = 77\n[databases]\nfrom_inner = host=i\n");
	snprintf(text, sizeof(text), "listen_port = 7100\n%%include %s/inner.ini\n", tmpdir);
	write_tmp("middle.ini", text);
	snprintf(text, sizeof(text), "[pgbouncer]\n%%include %s/middle.ini  \n"
		 "[pgbouncer]\nmax_client_conn = 88\n", tmpdir);
	top = write_tmp("top.ini", text);
	c = cfg_load(top, &err);
	ck_assert_msg(c != NULL, "%s", err.message);
	ck_assert_int_eq(c->proc.listen_port, 7100);
	ck_assert_int_eq(c->pool.max_client_conn, 88);
	ck_assert_ptr_nonnull(cfg_database_find(c, "from_inner"));
	ck_assert_str_eq(c->path, top);
	ck_assert_str_eq(c->proc.conffile, top);
	cfg_unref(c);
}
END_TEST

START_TEST(test_include_relative_to_cwd)
{
	char old[PATH_MAX];
	struct cfg *c;

	write_tmp("rel.ini", "[pgbouncer]\nlisten_port = 7200\n");
	ck_assert_ptr_nonnull(getcwd(old, sizeof(old)));
	ck_assert_int_eq(chdir(tmpdir), 0);
	c = load_ok("%include rel.ini\n");
	ck_assert_int_eq(chdir(old), 0);
	ck_assert_int_eq(c->proc.listen_port, 7200);
	cfg_unref(c);
}
END_TEST

START_TEST(test_include_errors)
{
	char text[PATH_MAX * 2], expect[PATH_MAX * 2];
	const char *path;
	struct nk_error err;

	/* an error inside an included file names that file and line */
	path = write_tmp("bad.ini", "; first\nbogus = 1\n");
	snprintf(text, sizeof(text), "[pgbouncer]\n%%include %s\n", path);
	ck_assert_ptr_null(load(text, &err));
	snprintf(expect, sizeof(expect), "unknown parameter: pgbouncer/bogus in "
		 "configuration (%s:2)", path);
	ck_assert_str_eq(err.message, expect);

	/* a file including itself */
	snprintf(text, sizeof(text), "%%include %s/self.ini\n", tmpdir);
	path = write_tmp("self.ini", text);
	ck_assert_ptr_null(cfg_load(path, &err));
	ck_assert_msg(strstr(err.message, "%include loop") != NULL, "%s", err.message);
	snprintf(expect, sizeof(expect), "%s:1", path);
	ck_assert_str_eq(err.where, expect);

	/* a loop through two files */
	snprintf(text, sizeof(text), "%%include %s/b.ini\n", tmpdir);
	path = write_tmp("a.ini", text);
	snprintf(text, sizeof(text), "[pgbouncer]\n%%include %s/a.ini\n", tmpdir);
	write_tmp("b.ini", text);
	ck_assert_ptr_null(cfg_load(path, &err));
	ck_assert_msg(strstr(err.message, "%include loop") != NULL, "%s", err.message);

	/* the same file twice in a row is not a loop */
	path = write_tmp("leaf.ini", "[pgbouncer]\nlisten_port = 7300\n");
	snprintf(text, sizeof(text), "%%include %s\n%%include %s\n", path, path);
	cfg_unref(load_ok(text));

	/* a missing top file */
	ck_assert_ptr_null(cfg_load("/nonexistent/neki.ini", &err));
	ck_assert_str_eq(err.message, "could not open configuration file "
			 "\"/nonexistent/neki.ini\": No such file or directory");
}
END_TEST

START_TEST(test_reload_from_conffile)
{
	const char *path, *other;
	char text[PATH_MAX + 64];
	struct nk_error err;
	struct cfg *old, *next;

	other = write_tmp("other.ini", "[pgbouncer]\nlisten_port = 8001\nmax_client_conn = 3\n");
	snprintf(text, sizeof(text), "[pgbouncer]\nlisten_port = 8000\nconffile = %s\n", other);
	path = write_tmp("first.ini", text);
	old = cfg_load(path, &err);
	ck_assert_msg(old != NULL, "%s", err.message);
	ck_assert_str_eq(old->proc.conffile, other);

	/* the reload reads conffile, keeps listen_port (not reloadable) */
	next = cfg_reload(old, &err);
	ck_assert_msg(next != NULL, "%s", err.message);
	ck_assert_int_eq(next->proc.listen_port, 8000);
	ck_assert_int_eq(next->pool.max_client_conn, 3);
	ck_assert_str_eq(next->proc.conffile, other);

	/* a broken file: NULL, the error names the line, the old config is untouched */
	write_tmp("other.ini", "[pgbouncer]\nmax_client_conn = 4\nbogus = 1\n");
	cfg_unref(old);
	old = next;
	next = cfg_reload(old, &err);
	ck_assert_ptr_null(next);
	snprintf(text, sizeof(text), "%s:3", other);
	ck_assert_str_eq(err.where, text);
	ck_assert_int_eq(old->pool.max_client_conn, 3);
	cfg_unref(old);
}
END_TEST

START_TEST(test_include_depth)
{
	char name[32], text[PATH_MAX + 64];
	struct nk_error err;
	struct cfg *c;

	/* d0 includes d1 ... d10 (depth 10 is accepted), d11 would be too deep */
	for (int i = 0; i <= 11; i++) {
		snprintf(name, sizeof(name), "d%d.ini", i);
		if (i < 11)
			snprintf(text, sizeof(text), "%%include %s/d%d.ini\n", tmpdir, i + 1);
		else
			snprintf(text, sizeof(text), "[pgbouncer]\nlisten_port = 7400\n");
		write_tmp(name, text);
	}
	snprintf(text, sizeof(text), "%s/d1.ini", tmpdir);
	c = cfg_load(text, &err);
	ck_assert_msg(c != NULL, "%s", err.message);
	ck_assert_int_eq(c->proc.listen_port, 7400);
	cfg_unref(c);
	snprintf(text, sizeof(text), "%s/d0.ini", tmpdir);
	ck_assert_ptr_null(cfg_load(text, &err));
	ck_assert_msg(strstr(err.message, "%include nesting is too deep (more than 10 "
			     "levels)") != NULL, "%s", err.message);
}
END_TEST

START_TEST(test_reload_helpers)
{
	struct cfg *old = load_ok("[pgbouncer]\nlisten_port = 7000\nmax_client_conn = 10\n"
				  "unix_socket_dir = /a\n");
	struct cfg *next = load_ok("[pgbouncer]\nlisten_port = 7001\nmax_client_conn = 20\n"
				   "unix_socket_dir = /b\n");
	const struct cfg_setting *changed[4];
	size_t n = 99;

	ck_assert(cfg_setting_changed(old, next, cfg_setting_find("listen_port")));
	ck_assert(cfg_setting_changed(old, next, cfg_setting_find("unix_socket_dir")));
	ck_assert(!cfg_setting_changed(old, next, cfg_setting_find("pool_mode")));
	ck_assert(cfg_keep_not_reloadable(next, old, changed, 4, &n));
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(changed[0]->name, "listen_port");
	ck_assert_str_eq(changed[1]->name, "unix_socket_dir");
	ck_assert_int_eq(next->proc.listen_port, 7000);
	ck_assert_str_eq(next->proc.unix_socket_dir, "/a");
	ck_assert_int_eq(next->pool.max_client_conn, 20);
	ck_assert(cfg_keep_not_reloadable(next, old, NULL, 0, &n));
	ck_assert_uint_eq(n, 0);
	cfg_unref(old);
	cfg_unref(next);
}
END_TEST

START_TEST(test_database_reconnect)
{
	static const struct { const char *next; bool reconnect; } cases[] = {
		{ "host=h port=1 dbname=d", false },
		{ "host=h port=1 dbname=d pool_size=9 pool_mode=transaction", false },
		{ "host=h2 port=1 dbname=d", true },
		{ "host=h port=2 dbname=d", true },
		{ "host=h port=1 dbname=e", true },
		{ "host=h port=1 dbname=d user=u", true },
		{ "host=h port=1 dbname=d connect_query=x", true },
		{ "host=h port=1 dbname=d auth_dbname=x", true },
		{ "host=h port=1 dbname=d auth_query=x", true },
		{ "host=h port=1 dbname=d load_balance_hosts=disable", true },
	};
	struct cfg *old = load_ok("[databases]\ndb = host=h port=1 dbname=d\n");
	char text[256];

	for (size_t i = 0; i < NK_ARRAY_LEN(cases); i++) {
		struct cfg *next;

		snprintf(text, sizeof(text), "[databases]\ndb = %s\n", cases[i].next);
		next = load_ok(text);
		ck_assert_msg(cfg_database_needs_reconnect(cfg_database_find(old, "db"),
							   cfg_database_find(next, "db")) ==
			      cases[i].reconnect, "case %zu", i);
		cfg_unref(next);
	}
	cfg_unref(old);
}
END_TEST

/* service_name and job_name are one setting under two names, as in pgbouncer. */
START_TEST(test_job_name_alias)
{
	struct cfg *c = load_ok("[pgbouncer]\nservice_name = one\n");

	ck_assert_str_eq(c->proc.job_name, "one");
	ck_assert_str_eq(c->proc.service_name, "one");
	cfg_unref(c);
	c = load_ok("[pgbouncer]\nservice_name = one\njob_name = two\n");
	ck_assert_str_eq(c->proc.job_name, "two");
	ck_assert_str_eq(c->proc.service_name, "two");
	cfg_unref(c);
}
END_TEST

START_TEST(test_workers_auto_and_enums)
{
	struct cfg *c = load_ok("[neki]\nworkers = 0\n");
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

	ck_assert_int_eq(c->neki.workers, ncpu < 1 ? 1 : (ncpu > 1024 ? 1024 : ncpu));
	cfg_unref(c);
	ck_assert_str_eq(cfg_pool_mode_str(CFG_POOL_TRANSACTION), "transaction");
	ck_assert_str_eq(cfg_pool_mode_str(CFG_POOL_UNSET), "unset");
	ck_assert_str_eq(cfg_auth_type_str(CFG_AUTH_SCRAM), "scram-sha-256");
	ck_assert_str_eq(cfg_auth_type_str(CFG_AUTH_PEER), "peer");
	ck_assert_str_eq(cfg_auth_type_str(CFG_AUTH_REJECT), "reject");
	ck_assert_str_eq(cfg_sslmode_str(CFG_SSL_VERIFY_FULL), "verify-full");
}
END_TEST

/* The source directory (env NK_SRCDIR wins over the build's). */
static const char *
srcdir(void)
{
	const char *env = getenv("NK_SRCDIR");

	return env && env[0] ? env : NK_SRCDIR;
}

/* Read <path> entirely into a new string. */
static char *
read_all(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf;
	long len;

	ck_assert_msg(f != NULL, "cannot open %s", path);
	ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
	len = ftell(f);
	rewind(f);
	buf = malloc((size_t)len + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_uint_eq(fread(buf, 1, (size_t)len, f), (size_t)len);
	buf[len] = '\0';
	fclose(f);
	return buf;
}

/* Compare the committed <rel> with the generated text; NK_REGEN_DOCS=1 rewrites it. */
static void
check_generated(const char *rel, bool sample)
{
	char path[PATH_MAX], *gen = NULL, *have;
	size_t len = 0;
	FILE *mem = open_memstream(&gen, &len);

	ck_assert_ptr_nonnull(mem);
	ck_assert(cfg_write_doc(mem, sample));
	ck_assert_int_eq(fclose(mem), 0);
	snprintf(path, sizeof(path), "%s/%s", srcdir(), rel);
	if (getenv("NK_REGEN_DOCS")) {
		FILE *f = fopen(path, "w");

		ck_assert_ptr_nonnull(f);
		fputs(gen, f);
		ck_assert_int_eq(fclose(f), 0);
	}
	have = read_all(path);
	ck_assert_msg(strcmp(have, gen) == 0, "%s is not what the settings table generates; "
		      "run NK_REGEN_DOCS=1 test/unit/check_neki config", rel);
	free(have);
	free(gen);
}

START_TEST(test_docs_generated)
{
	check_generated("neki.ini.sample", true);
	check_generated("doc/neki.ini.5.md", false);
}
END_TEST

/* Every setting and every section key is documented in both files. */
START_TEST(test_docs_mention_everything)
{
	char path[PATH_MAX], needle[128];
	char *sample, *man;
	size_t n;
	const struct cfg_setting *tab = cfg_settings(&n);
	static const char *const sect_keys[] = {
		"dbname", "host", "port", "user", "password", "auth_user", "auth_query",
		"auth_dbname", "pool_size", "min_pool_size", "reserve_pool_size", "reserve_pool",
		"max_db_connections", "max_db_client_connections", "pool_mode",
		"server_lifetime", "query_wait_timeout", "load_balance_hosts", "connect_query",
		"client_encoding", "datestyle", "timezone", "application_name", "topology",
		"max_user_connections", "max_user_client_connections", "query_timeout",
		"idle_transaction_timeout", "transaction_timeout", "client_idle_timeout",
	};

	snprintf(path, sizeof(path), "%s/neki.ini.sample", srcdir());
	sample = read_all(path);
	snprintf(path, sizeof(path), "%s/doc/neki.ini.5.md", srcdir());
	man = read_all(path);
	for (size_t i = 0; i < n; i++) {
		snprintf(needle, sizeof(needle), "\n;%s =", tab[i].name);
		ck_assert_msg(strstr(sample, needle) != NULL, "%s not in the sample", tab[i].name);
		snprintf(needle, sizeof(needle), "\n### %s\n", tab[i].name);
		ck_assert_msg(strstr(man, needle) != NULL, "%s not in the man page", tab[i].name);
	}
	for (size_t i = 0; i < NK_ARRAY_LEN(sect_keys); i++) {
		snprintf(needle, sizeof(needle), "| `%s` |", sect_keys[i]);
		ck_assert_msg(strstr(man, needle) != NULL, "key %s not in the man page",
			      sect_keys[i]);
	}
	ck_assert_ptr_nonnull(strstr(man, "# SECTION [shards]"));
	free(sample);
	free(man);
}
END_TEST

/* The sample loads as shipped, and with every example line uncommented. */
START_TEST(test_sample_loads)
{
	char path[PATH_MAX];
	struct nk_error err;
	struct cfg *c, *d = cfg_new_defaults();
	char *text, *out, *o;
	size_t n;
	const struct cfg_setting *tab = cfg_settings(&n);

	snprintf(path, sizeof(path), "%s/neki.ini.sample", srcdir());
	c = cfg_load(path, &err);
	ck_assert_msg(c != NULL, "%s", err.message);
	ck_assert_uint_eq(c->n_databases + c->n_users + c->n_peers + c->n_shards, 0);
	cfg_unref(c);

	/* drop the ";" of every line that starts with exactly one */
	text = read_all(path);
	out = o = malloc(strlen(text) + 1);
	ck_assert_ptr_nonnull(out);
	for (const char *p = text; *p; p++) {
		bool bol = p == text || p[-1] == '\n';

		if (bol && p[0] == ';' && p[1] != ';')
			continue;
		*o++ = *p;
	}
	*o = '\0';
	c = load(out, &err);
	ck_assert_msg(c != NULL, "uncommented sample: %s", err.message);
	for (size_t i = 0; i < n; i++) {
		if (strcmp(tab[i].name, "conffile") != 0)
			ck_assert_msg(!cfg_setting_changed(c, d, &tab[i]),
				      "uncommented %s is not its default", tab[i].name);
	}
	ck_assert_str_eq(c->proc.conffile, "t.ini");
	ck_assert_uint_ge(c->n_databases, 4);
	ck_assert_ptr_nonnull(cfg_database_auto(c));
	ck_assert_uint_ge(c->n_users, 1);
	ck_assert_uint_ge(c->n_peers, 2);
	ck_assert_uint_ge(c->n_shards, 2);
	cfg_unref(c);
	cfg_unref(d);
	free(text);
	free(out);
}
END_TEST

/*
 * Mutated inputs (a fixed pseudo-random sequence over the uncommented sample and
 * over short byte soups) never crash the parser: each either loads or fails with a
 * message and SQLSTATE F0000. Run under ASan by `make check`.
 */
START_TEST(test_mutations_never_crash)
{
	static const char alphabet[] = "[]=;#%' \"\n\t\\abcdefghijklmnop_*-.,0123456789";
	char path[PATH_MAX], *base, *buf;
	size_t len;
	uint32_t seed = 12345;

	snprintf(path, sizeof(path), "%s/neki.ini.sample", srcdir());
	base = read_all(path);
	len = strlen(base);
	buf = malloc(len + 1);
	ck_assert_ptr_nonnull(buf);
	for (int round = 0; round < 400; round++) {
		struct nk_error err;
		struct cfg *c;

		memcpy(buf, base, len + 1);
		for (int k = 0; k < 1 + round % 8; k++) {
			seed = seed * 1103515245u + 12345u;
			buf[(seed >> 8) % len] = alphabet[(seed >> 20) % (sizeof(alphabet) - 1)];
		}
		c = load(buf, &err);
		if (c)
			cfg_unref(c);
		else
			ck_assert_str_eq(err.sqlstate, "F0000");
	}
	for (int round = 0; round < 2000; round++) {
		char soup[64];
		struct nk_error err;
		struct cfg *c;
		size_t n = round % (sizeof(soup) - 1);

		for (size_t k = 0; k < n; k++) {
			seed = seed * 1103515245u + 12345u;
			soup[k] = alphabet[(seed >> 16) % (sizeof(alphabet) - 1)];
		}
		soup[n] = '\0';
		c = load(soup, &err);
		if (c)
			cfg_unref(c);
		else
			ck_assert_msg(err.message[0] != '\0', "no message for \"%s\"", soup);
	}
	free(buf);
	free(base);
}
END_TEST

/* cfg_list_has: names separated by commas and blanks, whole names, case-sensitive. */
START_TEST(test_list_has)
{
	static const struct { const char *list, *name; bool has; } cases[] = {
		{ "admin", "admin", true }, { " a, admin ,b", "admin", true },
		{ "a\tadmin", "admin", true }, { "a b admin", "admin", true },
		{ "administrator", "admin", false }, { "xadmin, admins", "admin", false },
		{ "Admin", "admin", false }, { "", "admin", false }, { NULL, "admin", false },
		{ "a,,b", "", false },
	};

	for (size_t i = 0; i < NK_ARRAY_LEN(cases); i++)
		ck_assert_msg(cfg_list_has(cases[i].list, cases[i].name) == cases[i].has,
			      "\"%s\" in \"%s\"", cases[i].name,
			      cases[i].list != NULL ? cases[i].list : "");
}
END_TEST

Suite *
config_suite(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("config");

	tcase_add_test(tc, test_basic_file);
	tcase_add_test(tc, test_comments);
	tcase_add_test(tc, test_bounds_every_row);
	tcase_add_test(tc, test_neki_section_alias);
	tcase_add_test(tc, test_empty_file_is_defaults);
	tcase_add_test(tc, test_defaults_round_trip);
	tcase_add_test(tc, test_table_shape);
	tcase_add_test(tc, test_reloadable_marks);
	tcase_add_test(tc, test_pgbouncer_defaults);
	tcase_add_test(tc, test_values_accepted);
	tcase_add_test(tc, test_values_rejected);
	tcase_add_test(tc, test_file_errors);
	tcase_add_test(tc, test_unknown_parameter_hint);
	tcase_add_test(tc, test_quoted_keys_and_values);
	tcase_add_test(tc, test_later_value_wins);
	tcase_add_test(tc, test_refcount_and_current);
	tcase_add_test(tc, test_dup);
	tcase_add_test(tc, test_databases_keys);
	tcase_add_test(tc, test_databases_each_key);
	tcase_add_test(tc, test_section_errors);
	tcase_add_test(tc, test_users_and_peers);
	tcase_add_test(tc, test_shards);
	tcase_add_test(tc, test_reload_helpers);
	tcase_add_test(tc, test_database_reconnect);
	tcase_add_test(tc, test_workers_auto_and_enums);
	tcase_add_test(tc, test_job_name_alias);
	tcase_add_test(tc, test_docs_generated);
	tcase_add_test(tc, test_docs_mention_everything);
	tcase_add_test(tc, test_sample_loads);
	tcase_add_test(tc, test_mutations_never_crash);
	tcase_add_test(tc, test_list_has);
	suite_add_tcase(s, tc);

	tc = tcase_create("include");
	tcase_add_checked_fixture(tc, tmpdir_setup, tmpdir_teardown);
	tcase_add_test(tc, test_include);
	tcase_add_test(tc, test_include_relative_to_cwd);
	tcase_add_test(tc, test_include_errors);
	tcase_add_test(tc, test_include_depth);
	tcase_add_test(tc, test_reload_from_conffile);
	suite_add_tcase(s, tc);
	return s;
}
