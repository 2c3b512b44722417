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
#include "neki/error.h"
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

	ck_assert_int_eq(c->listen_port, 7432);
	ck_assert_int_eq(c->pool_mode, CFG_POOL_TRANSACTION);
	ck_assert_int_eq(c->max_client_conn, 500);
	ck_assert_str_eq(c->admin_users, "alice, bob ; not a comment");
	ck_assert_str_eq(c->server_reset_query, "DISCARD ALL # also not a comment");
	ck_assert_uint_eq(c->n_databases, 1);
	ck_assert_str_eq(c->databases[0].name, "app");
	ck_assert_str_eq(c->databases[0].host, "127.0.0.1");
	ck_assert_int_eq(c->databases[0].port, 5433);
	ck_assert_str_eq(c->databases[0].dbname, "appdb");
	ck_assert_str_eq(c->databases[0].source, "t.ini:4");
	ck_assert_str_eq(c->path, "t.ini");
	ck_assert_str_eq(c->conffile, "t.ini");
	ck_assert_int_eq(c->refcount, 1);
	cfg_unref(c);
}
END_TEST

START_TEST(test_neki_section_alias)
{
	struct cfg *c = load_ok("[neki]\nworkers = 3\nshm_size = 128MB\n"
				"[pgbouncer]\nlisten_port = 7000\n");

	ck_assert_int_eq(c->workers, 3);
	ck_assert_int_eq(c->shm_size, 128LL << 20);
	ck_assert_int_eq(c->listen_port, 7000);
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
	ck_assert_int_ge(c->workers, 1);
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
	ck_assert_uint_eq(neki, 8);
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
		{ "unix_socket_mode", "0777" }, { "pool_mode", "session" },
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
		{ "sequence_batch", "1000" }, { "listen_addr", "" }, { "logfile", "" },
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
		{ "unix_socket_mode", "0777", "0777" },
		{ "unix_socket_mode", "0600", "0600" },
		{ "unix_socket_mode", "384", "0600" },
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
		{ "pkt_buf", "100", "from 512" },
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

	ck_assert_ptr_null(load("[pgbouncer]\nmax_client_con = 10\n", &err));
	ck_assert_str_eq(err.hint, "did you mean \"max_client_conn\"? The accepted settings "
			 "are listed in neki.ini(5)");
	ck_assert_ptr_null(load("[pgbouncer]\nxyzzy_quux_frob = 10\n", &err));
	ck_assert_str_eq(err.hint, "the accepted settings are listed in neki.ini(5)");
	ck_assert_ptr_null(load("[pgbouncer]\npool_mode = sesion\n", &err));
	ck_assert_str_eq(err.detail, "accepted values: session, transaction, statement");
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

	ck_assert_int_eq(c->listen_port, 7001);
	ck_assert_int_eq(c->max_client_conn, 42);
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

	ck_assert_int_eq(c->listen_port, 2000);
	ck_assert_uint_eq(c->n_databases, 1);
	ck_assert_str_eq(cfg_database_find(c, "a")->host, "y");
	cfg_unref(c);
}
END_TEST

START_TEST(test_refcount_and_current)
{
	struct cfg *a = load_ok("[pgbouncer]\nlisten_port = 1111\n");
	struct cfg *b = load_ok("[pgbouncer]\nlisten_port = 2222\n");

	ck_assert_ptr_null(cfg_current());
	cfg_set_current(a);
	ck_assert_int_eq(a->refcount, 2);
	ck_assert_int_eq(cfg_current()->listen_port, 1111);
	cfg_set_current(b);
	ck_assert_int_eq(a->refcount, 1);
	ck_assert_int_eq(cfg_current()->listen_port, 2222);
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

Suite *
config_suite(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("config");

	tcase_add_test(tc, test_basic_file);
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
	suite_add_tcase(s, tc);
	return s;
}
