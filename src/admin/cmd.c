/*
 * cmd.c - the pgbouncer console commands: the grammar (`WORD [WORD] [;]`, `SELECT x` as an
 * alias of `SHOW x`, `SET key = value`), the access rules (stats_users: read-only SHOW,
 * admin_users: everything) and the SHOW commands answered from shared memory.
 * Entry point: adm_command().
 */
#include "neki/base.h"

#include "admin_int.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

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

	nk_error_set(&err, "08P01", "invalid command '%s', use SHOW HELP;", sql);
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
	const char *v = "PgBouncer 1.25.2 (neki " PACKAGE_VERSION ")";

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

	nk_error_set(&n, "00000", "Console usage");
	n.severity = NK_SEV_NOTICE;
	nk_error_detail(&n, "\n\tSHOW HELP|CONFIG|DATABASES|POOLS|CLIENTS|SERVERS|USERS|VERSION"
			"\n\tSHOW PEERS|PEER_POOLS\n\tSHOW FDS|SOCKETS|ACTIVE_SOCKETS|LISTS|MEM|STATE"
			"\n\tSHOW DNS_HOSTS|DNS_ZONES\n\tSHOW STATS|STATS_TOTALS|STATS_AVERAGES|TOTALS"
			"\n\tSHOW WORKERS|SHARDS\n\tSET key = arg\n\tRELOAD\n\tPAUSE [<db>]"
			"\n\tRESUME [<db>]\n\tDISABLE <db>\n\tENABLE <db>\n\tRECONNECT [<db>]"
			"\n\tKILL [<db>]\n\tKILL_CLIENT <client_id>\n\tSUSPEND\n\tSHUTDOWN"
			"\n\tSHUTDOWN WAIT_FOR_SERVERS|WAIT_FOR_CLIENTS\n\tWAIT_CLOSE [<db>]"
			"\n\tSELECT * FROM __neki.<function>(...)");
	adm_result_notice(r, &n);
}

static const struct { const char *name; show_fn fn; } shows[] = {
	{ "help", show_help },
	{ "version", show_version },
	{ "workers", show_workers },
};

/* SHOW <what>. */
static void
cmd_show(const struct cmd *c, const char *sql, enum adm_access access, struct adm_result *r)
{
	if (access == ADM_ACCESS_NONE) {
		fail(r, "42501", "admin access needed");
		return;
	}
	for (size_t i = 0; i < NK_ARRAY_LEN(shows); i++) {
		if (strcmp(shows[i].name, c->arg) == 0) {
			shows[i].fn(r);
			adm_result_complete(r, "SHOW", false);
			return;
		}
	}
	invalid(r, sql);
}

bool
adm_command(const char *sql, enum adm_access access, struct adm_result *r)
{
	struct cmd c;

	if (!parse_cmd(sql, &c)) {
		invalid(r, sql);
		return true;
	}
	if (strcmp(c.verb, "show") == 0 && c.has_arg) {
		cmd_show(&c, sql, access, r);
		return true;
	}
	if (access != ADM_ACCESS_ADMIN) {
		fail(r, "42501", "admin access needed");
		return true;
	}
	invalid(r, sql);
	return true;
}
