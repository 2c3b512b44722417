/*
 * cmd.c - the pgbouncer console commands: the grammar (`WORD [WORD] [;]`, `SELECT x` as an
 * alias of `SHOW x`, `SET key = value`), the access rules (stats_users: read-only SHOW,
 * admin_users: everything) and the SHOW commands answered from shared memory.
 * Entry point: adm_command().
 */
#include "neki/base.h"

#include "admin_int.h"
#include "recover.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "neki/auth.h"
#include "neki/config.h"
#include "neki/config_settings.h"
#include "neki/log.h"
#include "neki/shm.h"

/* One parsed console command. */
struct cmd {
	char verb[ADM_NAME_MAX];	/* lowercased; "show" for SELECT x */
	char arg[ADM_NAME_MAX];		/* first argument, lowercased unless quoted; "" */
	bool has_arg;
};

typedef void (*show_fn)(struct adm_result *r);

static void
fail(struct adm_result *r, const char *sqlstate, const char *msg)
{
	struct nk_error err;

	nk_error_set(&err, sqlstate, "%s", msg);
	adm_result_error(r, &err);
}

/* pgbouncer's answer to anything it does not understand. */
static void
invalid(struct adm_result *r, const char *sql)
{
	struct nk_error err;

	nk_error_set(&err, ERRCODE_PROTOCOL_VIOLATION, "invalid command '%s', use SHOW HELP;", sql);
	adm_result_error(r, &err);
}

/* Read a WORD ([0-9a-z_]+ or "quoted") at *<p> into <out>; false when none. */
static bool
read_word(const char **p, char out[ADM_NAME_MAX])
{
	size_t n = 0;

	while (isspace((unsigned char)**p))
		(*p)++;
	if (**p == '"') {
		const char *e = strchr(*p + 1, '"');

		if (e == NULL || e == *p + 1)
			return false;
		n = (size_t)(e - *p - 1) < ADM_NAME_MAX - 1 ? (size_t)(e - *p - 1) : ADM_NAME_MAX - 1;
		memcpy(out, *p + 1, n);
		out[n] = '\0';
		*p = e + 1;
		return true;
	}
	while (isalnum((unsigned char)**p) || **p == '_') {
		if (n < ADM_NAME_MAX - 1)
			out[n++] = (char)tolower((unsigned char)**p);
		(*p)++;
	}
	out[n] = '\0';
	return n > 0;
}

/* `WORD [WORD] [;]`. */
static bool
parse_cmd(const char *sql, struct cmd *c)
{
	const char *p = sql;

	memset(c, 0, sizeof(*c));
	if (!read_word(&p, c->verb))
		return false;
	c->has_arg = read_word(&p, c->arg);
	while (isspace((unsigned char)*p))
		p++;
	if (*p == ';')
		p++;
	while (isspace((unsigned char)*p))
		p++;
	if (*p != '\0')
		return false;
	if (strcmp(c->verb, "select") == 0)
		snprintf(c->verb, sizeof(c->verb), "show");
	return true;
}

/* ---- SHOW ---- */

static void
show_version(struct adm_result *r)
{
	static const struct adm_col col = { "version", ADM_T_TEXT };
	const char *v = NK_VERSION_LINE;

	adm_result_columns(r, &col, 1);
	adm_result_row(r, &v);
}

/* Seconds process <pid> has been running (from /proc), or 0 when unknown. */
static uint64_t
proc_uptime(pid_t pid)
{
	char path[64], buf[1024];
	unsigned long long start = 0;
	double up = 0;
	FILE *fp;
	char *p;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((fp = fopen(path, "r")) == NULL)
		return 0;
	p = fgets(buf, sizeof(buf), fp);
	fclose(fp);
	if (p == NULL || (p = strrchr(buf, ')')) == NULL)
		return 0;
	/* field 22 (starttime) is the 20th after the ')' */
	for (int i = 0; i < 20 && p != NULL; i++)
		p = strchr(p + 1, ' ');
	if (p == NULL || sscanf(p, " %llu", &start) != 1)
		return 0;
	if ((fp = fopen("/proc/uptime", "r")) == NULL)
		return 0;
	if (fscanf(fp, "%lf", &up) != 1)
		up = 0;
	fclose(fp);
	up -= (double)start / (double)sysconf(_SC_CLK_TCK);
	return up > 0 ? (uint64_t)up : 0;
}

static void
show_workers(struct adm_result *r)
{
	static const struct adm_col cols[] = {
		{ "slot", ADM_T_INT4 }, { "pid", ADM_T_INT4 }, { "state", ADM_T_TEXT },
		{ "clients", ADM_T_INT8 }, { "links", ADM_T_INT8 }, { "revision", ADM_T_INT8 },
		{ "uptime", ADM_T_INT8 },
	};

	adm_result_columns(r, cols, NK_ARRAY_LEN(cols));
	for (unsigned i = 0; i < shm_n_procs(); i++) {
		struct shm_proc *p = shm_proc(i);
		char v[6][24];
		const char *vals[7] = { v[0], v[1], NULL, v[2], v[3], v[4], v[5] };
		int32_t pid = atomic_load(&p->pid);

		if (atomic_load(&p->kind) != SHM_PROC_WORKER || pid == 0)
			continue;
		snprintf(v[0], sizeof(v[0]), "%u", i);
		snprintf(v[1], sizeof(v[1]), "%d", (int)pid);
		vals[2] = shm_proc_state_str(atomic_load(&p->state));
		snprintf(v[2], sizeof(v[2]), "%" PRId64, atomic_load(&p->clients));
		snprintf(v[3], sizeof(v[3]), "%" PRId64, atomic_load(&p->links));
		snprintf(v[4], sizeof(v[4]), "%" PRIu64, atomic_load(&p->revision_seen));
		snprintf(v[5], sizeof(v[5]), "%" PRIu64, proc_uptime(pid));
		adm_result_row(r, vals);
	}
}

static void
show_help(struct adm_result *r)
{
	struct nk_error n;

	nk_error_set(&n, ERRCODE_SUCCESSFUL_COMPLETION, "Console usage");
	n.severity = NK_SEV_NOTICE;
	nk_error_detail(&n, "\n\tSHOW HELP|CONFIG|DATABASES|POOLS|CLIENTS|SERVERS|USERS|VERSION"
			"\n\tSHOW PEERS|PEER_POOLS\n\tSHOW FDS|SOCKETS|ACTIVE_SOCKETS|LISTS|MEM|STATE"
			"\n\tSHOW DNS_HOSTS|DNS_ZONES\n\tSHOW STATS|STATS_TOTALS|STATS_AVERAGES|TOTALS"
			"\n\tSHOW WORKERS|SHARDS|TRANSACTIONS\n\tSET key = arg\n\tRELOAD\n\tPAUSE [<db>]"
			"\n\tRESUME [<db>]\n\tDISABLE <db>\n\tENABLE <db>\n\tRECONNECT [<db>]"
			"\n\tKILL [<db>]\n\tKILL_CLIENT <client_id>\n\tSUSPEND\n\tSHUTDOWN"
			"\n\tSHUTDOWN WAIT_FOR_SERVERS|WAIT_FOR_CLIENTS\n\tWAIT_CLOSE [<db>]"
			"\n\tSWITCHOVER <shard>"
			"\n\tSELECT * FROM __neki.<function>(...)");
	adm_result_notice(r, &n);
}

/* Format an int into one of the row buffers. */
static const char *
fmt_int(char buf[24], int64_t v)
{
	snprintf(buf, 24, "%" PRId64, v);
	return buf;
}

static void
show_config(struct adm_result *r)
{
	static const struct adm_col cols[] = {
		{ "key", ADM_T_TEXT }, { "value", ADM_T_TEXT }, { "default", ADM_T_TEXT },
		{ "changeable", ADM_T_TEXT },
	};
	const struct cfg *c = cfg_current();
	size_t n;
	const struct cfg_setting *t = cfg_settings(&n);

	adm_result_columns(r, cols, NK_ARRAY_LEN(cols));
	for (size_t i = 0; i < n; i++) {
		char val[1024];
		const char *vals[4] = { t[i].name, val, t[i].default_value,
					t[i].reloadable ? "yes" : "no" };

		cfg_setting_format(c, &t[i], val, sizeof(val));
		adm_result_row(r, vals);
	}
}

/* pgbouncer's rule for a per-database or per-user limit: <entry> when > 0, else <global>. */
static int
eff_limit(int entry, int global)
{
	return entry > 0 ? entry : global;
}

/*
 * One SHOW DATABASES row for [databases] entry <d>: pool sizes, lifetime and limits as in
 * force; pool_mode only when the entry sets one (NULL: the global mode), as pgbouncer.
 */
static void
database_row(struct adm_result *r, const struct cfg *c, const struct cfg_database *d)
{
	char b[9][24];
	int pool = d->pool_size >= 0 ? d->pool_size : c->pool.default_pool_size;
	int min = d->min_pool_size >= 0 ? d->min_pool_size : c->pool.min_pool_size;
	int res = d->reserve_pool_size >= 0 ? d->reserve_pool_size : c->pool.reserve_pool_size;
	int maxc = eff_limit(d->max_db_connections, c->pool.max_db_connections);
	int maxcl = eff_limit(d->max_db_client_connections, c->pool.max_db_client_connections);
	double life = d->server_lifetime >= 0 ? d->server_lifetime : c->srv.server_lifetime;
	bool lb_list = d->host != NULL && strchr(d->host, ',') != NULL;
	const char *vals[17] = {
		d->name, d->host, fmt_int(b[0], d->port), d->dbname ? d->dbname : d->name, d->user,
		fmt_int(b[1], pool), fmt_int(b[2], min), fmt_int(b[3], res),
		fmt_int(b[4], (int64_t)life),
		d->pool_mode != CFG_POOL_UNSET ? cfg_pool_mode_str(d->pool_mode) : NULL,
		lb_list ? (d->load_balance_hosts ? "round-robin" : "disable") : NULL,
		fmt_int(b[5], maxc), fmt_int(b[7], lists_count(LISTS_DB_SERVERS, d->name)),
		fmt_int(b[6], maxcl), fmt_int(b[8], lists_count(LISTS_DB_CLIENTS, d->name)), "0", "0",
	};

	adm_result_row(r, vals);
}

/*
 * The admin database's row: pgbouncer's fixed pool (2, statement mode, forced user
 * pgbouncer) under the global lifetime and limits.
 */
static void
admin_database_row(struct adm_result *r, const struct cfg *c)
{
	char b[5][24];
	const char *vals[17] = {
		"pgbouncer", NULL, fmt_int(b[0], c->proc.listen_port), "pgbouncer", "pgbouncer",
		"2", "0", "0", fmt_int(b[1], (int64_t)c->srv.server_lifetime), "statement", NULL,
		fmt_int(b[2], c->pool.max_db_connections), "0",
		fmt_int(b[3], c->pool.max_db_client_connections),
		fmt_int(b[4], lists_count(LISTS_DB_CLIENTS, "pgbouncer")), "0", "0",
	};

	adm_result_row(r, vals);
}

static int
database_cmp(const void *a, const void *b)
{
	return strcmp((*(const struct cfg_database *const *)a)->name,
		      (*(const struct cfg_database *const *)b)->name);
}

/* SHOW DATABASES: the entries and the admin database, sorted by name as pgbouncer's list. */
static void
show_databases(struct adm_result *r)
{
	static const struct adm_col cols[] = {
		{ "name", ADM_T_TEXT }, { "host", ADM_T_TEXT }, { "port", ADM_T_INT4 },
		{ "database", ADM_T_TEXT }, { "force_user", ADM_T_TEXT }, { "pool_size", ADM_T_INT4 },
		{ "min_pool_size", ADM_T_INT4 }, { "reserve_pool_size", ADM_T_INT4 },
		{ "server_lifetime", ADM_T_INT4 }, { "pool_mode", ADM_T_TEXT },
		{ "load_balance_hosts", ADM_T_TEXT }, { "max_connections", ADM_T_INT4 },
		{ "current_connections", ADM_T_INT4 }, { "max_client_connections", ADM_T_INT4 },
		{ "current_client_connections", ADM_T_INT4 }, { "paused", ADM_T_INT4 },
		{ "disabled", ADM_T_INT4 },
	};
	const struct cfg *c = cfg_current();
	const struct cfg_database **dbs = calloc(c->n_databases + 1, sizeof(*dbs));
	bool admin_done = false;

	if (dbs == NULL) {
		fail(r, ERRCODE_OUT_OF_MEMORY, "out of memory");
		return;
	}
	adm_result_columns(r, cols, NK_ARRAY_LEN(cols));
	for (size_t i = 0; i < c->n_databases; i++)
		dbs[i] = &c->databases[i];
	qsort(dbs, c->n_databases, sizeof(*dbs), database_cmp);
	for (size_t i = 0; i < c->n_databases; i++) {
		if (!admin_done && strcmp(dbs[i]->name, "pgbouncer") > 0) {
			admin_database_row(r, c);
			admin_done = true;
		}
		database_row(r, c, dbs[i]);
	}
	if (!admin_done)
		admin_database_row(r, c);
	free(dbs);
}

/* pgbouncer prints the users' pool sizes as %9d text, empty when unset. */
static const char *
fmt_pad(char buf[24], int v)
{
	if (v < 0)
		return "";
	snprintf(buf, 24, "%9d", v);
	return buf;
}

/* One SHOW USERS row: <u> is the user's [users] entry, or NULL (the global defaults). */
static void
users_row(struct adm_result *r, const struct cfg *c, const char *name, const struct cfg_user *u)
{
	char b[6][24];
	int max_conn = eff_limit(u != NULL ? u->max_user_connections : -1,
				 c->pool.max_user_connections);
	int max_cl = eff_limit(u != NULL ? u->max_user_client_connections : -1,
			       c->pool.max_user_client_connections);
	const char *vals[8] = {
		name, fmt_pad(b[0], u != NULL ? u->pool_size : -1),
		fmt_pad(b[1], u != NULL ? u->reserve_pool_size : -1),
		u != NULL && u->pool_mode != CFG_POOL_UNSET ? cfg_pool_mode_str(u->pool_mode) : NULL,
		fmt_int(b[2], max_conn), fmt_int(b[4], lists_count(LISTS_USER_SERVERS, name)),
		fmt_int(b[3], max_cl), fmt_int(b[5], lists_count(LISTS_USER_CLIENTS, name)),
	};

	adm_result_row(r, vals);
}

static int
name_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/*
 * Every user neki knows, sorted by name as pgbouncer's user tree: the [users] entries and
 * the auth_file's users (<*af> owns the latter's names; free it after the array). NULL when
 * out of memory.
 */
static const char **
known_users(const struct cfg *c, struct auth_file **af, size_t *n_out)
{
	struct nk_error err;
	const char **names;
	size_t n = 0, m = 0;

	*af = NULL;
	if (c->auth.auth_file != NULL && c->auth.auth_file[0] != '\0' &&
	    (*af = auth_file_load(c->auth.auth_file, &err)) == NULL)
		log_warn("could not load auth_file: %s", err.message);
	names = calloc(c->n_users + (*af != NULL ? (*af)->n : 0) + 1, sizeof(*names));
	if (names == NULL)
		return NULL;
	for (size_t i = 0; i < c->n_users; i++)
		names[n++] = c->users[i].name;
	for (size_t i = 0; *af != NULL && i < (*af)->n; i++)
		names[n++] = (*af)->entries[i].user;
	qsort(names, n, sizeof(*names), name_cmp);
	for (size_t i = 0; i < n; i++)
		if (m == 0 || strcmp(names[i], names[m - 1]) != 0)
			names[m++] = names[i];
	*n_out = m;
	return names;
}

/* SHOW USERS. */
static void
show_users(struct adm_result *r)
{
	static const struct adm_col cols[] = {
		{ "name", ADM_T_TEXT }, { "pool_size", ADM_T_TEXT },
		{ "reserve_pool_size", ADM_T_TEXT }, { "pool_mode", ADM_T_TEXT },
		{ "max_user_connections", ADM_T_INT4 }, { "current_connections", ADM_T_INT4 },
		{ "max_user_client_connections", ADM_T_INT4 },
		{ "current_client_connections", ADM_T_INT4 },
	};
	const struct cfg *c = cfg_current();
	struct auth_file *af;
	size_t n = 0;
	const char **names = known_users(c, &af, &n);

	adm_result_columns(r, cols, NK_ARRAY_LEN(cols));
	for (size_t i = 0; names != NULL && i < n; i++)
		users_row(r, c, names[i], cfg_user_find(c, names[i]));
	free(names);
	auth_file_free(af);
}

/* How many users SHOW USERS lists (SHOW LISTS `users`). */
static int64_t
known_user_count(const struct cfg *c)
{
	struct auth_file *af;
	size_t n = 0;
	const char **names = known_users(c, &af, &n);
	int64_t count = names != NULL ? (int64_t)n : (int64_t)c->n_users;

	free(names);
	auth_file_free(af);
	return count;
}

static void
show_peers(struct adm_result *r)
{
	static const struct adm_col cols[] = {
		{ "peer_id", ADM_T_INT4 }, { "host", ADM_T_TEXT }, { "port", ADM_T_INT4 },
		{ "pool_size", ADM_T_INT4 },
	};
	const struct cfg *c = cfg_current();

	adm_result_columns(r, cols, NK_ARRAY_LEN(cols));
	for (size_t i = 0; i < c->n_peers; i++) {
		const struct cfg_peer *p = &c->peers[i];
		char b[3][24];
		const char *vals[4] = {
			fmt_int(b[0], p->peer_id), p->host, fmt_int(b[1], p->port),
			fmt_int(b[2], p->pool_size >= 0 ? p->pool_size : c->pool.default_pool_size),
		};

		adm_result_row(r, vals);
	}
}

/* True when every live worker is in state <st>. */
static bool
workers_all(enum shm_proc_state st)
{
	bool any = false;

	for (unsigned i = 0; i < shm_n_procs(); i++) {
		struct shm_proc *p = shm_proc(i);

		if (atomic_load(&p->kind) != SHM_PROC_WORKER || atomic_load(&p->pid) == 0)
			continue;
		any = true;
		if (atomic_load(&p->state) != (uint32_t)st)
			return false;
	}
	return any;
}

static void
show_state(struct adm_result *r)
{
	static const struct adm_col cols[] = { { "key", ADM_T_TEXT }, { "value", ADM_T_TEXT } };
	bool paused = workers_all(SHM_PST_PAUSED);
	bool suspended = workers_all(SHM_PST_SUSPENDED);
	const char *rows[3][2] = {
		{ "active", paused || suspended ? "no" : "yes" },
		{ "paused", paused ? "yes" : "no" }, { "suspended", suspended ? "yes" : "no" },
	};

	adm_result_columns(r, cols, 2);
	for (size_t i = 0; i < 3; i++)
		adm_result_row(r, rows[i]);
}

static void
show_lists(struct adm_result *r)
{
	static const struct adm_col cols[] = { { "list", ADM_T_TEXT }, { "items", ADM_T_INT4 } };
	static const char *const names[] = {
		"databases", "users", "peers", "pools", "peer_pools", "free_clients", "used_clients",
		"login_clients", "free_servers", "used_servers", "dns_names", "dns_zones",
		"dns_queries", "dns_pending",
	};
	const struct cfg *c = cfg_current();
	const int64_t v_of[NK_ARRAY_LEN(names)] = {
		(int64_t)c->n_databases + 1, known_user_count(c), (int64_t)c->n_peers,
		lists_count(LISTS_POOLS, NULL), (int64_t)c->n_peers, 0,
		lists_count(LISTS_USED_CLIENTS, NULL), lists_count(LISTS_LOGIN_CLIENTS, NULL), 0,
		lists_count(LISTS_USED_SERVERS, NULL), lists_count(LISTS_DNS_NAMES, NULL),
		lists_count(LISTS_DNS_ZONES, NULL), 0, 0,
	};

	adm_result_columns(r, cols, 2);
	for (size_t i = 0; i < NK_ARRAY_LEN(names); i++) {
		int64_t v = v_of[i];
		char b[24];
		const char *vals[2] = { names[i], fmt_int(b, v) };

		adm_result_row(r, vals);
	}
}

/* SHOW commands; <gather>: run on the rows gathered from every worker (lists.c). */
static const struct {
	const char *name;
	show_fn fn;
	bool admin_only;
	bool gather;
} shows[] = {
	{ "help", show_help, false, false },
	{ "version", show_version, false, false },
	{ "config", show_config, false, false },
	{ "databases", show_databases, false, true },
	{ "users", show_users, false, true },
	{ "peers", show_peers, false, false },
	{ "peer_pools", lists_show_peer_pools, false, true },
	{ "state", show_state, false, false },
	{ "lists", show_lists, false, true },
	{ "totals", stats_show_totals, false, true },
	{ "stats", stats_show_stats, false, true },
	{ "stats_totals", stats_show_totals_by_db, false, true },
	{ "stats_averages", stats_show_averages, false, true },
	{ "mem", lists_show_mem, false, true },
	{ "dns_hosts", lists_show_dns_hosts, false, true },
	{ "dns_zones", lists_show_dns_zones, false, true },
	{ "workers", show_workers, false, false },
	{ "transactions", recover_show, false, false },
	{ "clients", lists_show_clients, false, true },
	{ "sockets", lists_show_sockets, false, true },
	{ "active_sockets", lists_show_active_sockets, false, true },
	{ "servers", lists_show_servers, false, true },
	{ "pools", lists_show_pools, false, true },
};

/* SHOW <what>. */
static void
cmd_show(struct adm_req *req, const struct cmd *c, const char *sql)
{
	if (strcmp(c->arg, "shards") == 0 && req->access != ADM_ACCESS_NONE) {
		follow_show_shards(req);	/* probes every shard, answers later */
		return;
	}
	if (strcmp(c->arg, "fds") == 0) {
		if (req->access == ADM_ACCESS_ADMIN) {
			fds_start(req);		/* asks every worker, answers later */
			return;
		}
		fail(&req->res, ERRCODE_INSUFFICIENT_PRIVILEGE, "admin access needed");
		adm_req_finish(req);
		return;
	}
	for (size_t i = 0; i < NK_ARRAY_LEN(shows); i++) {
		if (strcmp(shows[i].name, c->arg) != 0)
			continue;
		if (req->access == ADM_ACCESS_NONE ||
		    (shows[i].admin_only && req->access != ADM_ACCESS_ADMIN)) {
			fail(&req->res, ERRCODE_INSUFFICIENT_PRIVILEGE, "admin access needed");
			adm_req_finish(req);
			return;
		}
		if (shows[i].gather) {
			lists_gather(req, shows[i].fn);
			return;
		}
		shows[i].fn(&req->res);
		adm_result_complete(&req->res, "SHOW", false);
		adm_req_finish(req);
		return;
	}
	if (req->access == ADM_ACCESS_NONE)
		fail(&req->res, ERRCODE_INSUFFICIENT_PRIVILEGE, "admin access needed");
	else
		invalid(&req->res, sql);
	adm_req_finish(req);
}

void
adm_command(struct adm_req *req, const char *sql)
{
	struct cmd c;

	if (cmd_is_set(sql)) {
		cmd_set(req, sql);
		return;
	}
	if (!parse_cmd(sql, &c)) {
		invalid(&req->res, sql);
	} else if (strcmp(c.verb, "show") == 0 && c.has_arg) {
		cmd_show(req, &c, sql);
		return;
	} else if (req->access != ADM_ACCESS_ADMIN) {
		fail(&req->res, ERRCODE_INSUFFICIENT_PRIVILEGE, "admin access needed");
	} else {
		ctl_command(req, c.verb, c.has_arg ? c.arg : NULL, sql);
		return;
	}
	adm_req_finish(req);
}
