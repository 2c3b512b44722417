/*
 * cmd_ctl.c - the console's control commands (admin_users only) and SET. Each command that
 * acts on the workers is posted to every worker's shm mailbox; the console answers when
 * every worker has acknowledged it (shm_mbox_broadcast_done), polled from the loop.
 *   PAUSE [db], RESUME [db], RECONNECT [db], KILL [db], DISABLE db, ENABLE db, WAIT_CLOSE [db]
 *   SWITCHOVER shard (switchover.c)
 *   RELOAD (the master re-reads the file too), SHUTDOWN [WAIT_FOR_SERVERS|WAIT_FOR_CLIENTS]
 *   (the master's signals), SUSPEND, KILL_CLIENT id, SET k = v. A SUSPEND ends with RESUME,
 *   or when the console session that issued it goes away (pgbouncer's auto-resume). After a
 *   SHOW FDS that handed the sockets over (the online restart, fds.c), SHUTDOWN first has the
 *   workers close the clients that could not be handed over, then exits.
 * Entry points: ctl_command(), cmd_is_set(), cmd_set().
 */
#include "neki/base.h"

#include "admin_int.h"
#include "servers.h"

#include <ctype.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <event2/event.h>

#include "neki/clock.h"
#include "neki/config.h"
#include "neki/config_settings.h"
#include "neki/log.h"
#include "neki/shm.h"
#include "neki/tls.h"
#include "neki/proc.h"

#define CTL_POLL_MS 20
#define CTL_TIMEOUT_MS 60000
#define CTL_MAX_DBS 64

/* A command waiting for every worker's acknowledgement. */
struct ctl_job {
	struct adm_req *req;		/* borrowed until finished */
	const char *tag;		/* CommandComplete tag */
	uint64_t *seqs;			/* owned: shm_n_procs() sequence numbers */
	uint64_t deadline_ms;
	struct event *timer;		/* owned */
	/* NULL, or answers instead of the plain tag once every worker acted */
	void (*finish)(struct ctl_job *j);
};

/* Databases paused / disabled through the console (for RESUME's check). */
static char paused_dbs[CTL_MAX_DBS][SHM_MSG_NAME_MAX];

/* The console session that issued the SUSPEND in force (weak: ctl_console_gone clears it). */
static const void *suspender;

static void ctl_fail(struct adm_req *req, const char *sqlstate, const char *fmt, ...)
	NK_PRINTF(3, 4);

/* Answer <req> with an error (printf-style message). */
static void
ctl_fail(struct adm_req *req, const char *sqlstate, const char *fmt, ...)
{
	struct nk_error err;
	va_list ap;

	va_start(ap, fmt);
	nk_error_setv(&err, sqlstate, fmt, ap);
	va_end(ap);
	adm_req_fail(req, &err);
}

static void
ctl_done(struct adm_req *req, const char *tag)
{
	adm_result_complete(&req->res, tag, false);
	adm_req_finish(req);
}

static void
ctl_job_free(struct ctl_job *j)
{
	if (j->timer != NULL)
		event_free(j->timer);
	free(j->seqs);
	free(j);
}

static void
ctl_poll(evutil_socket_t fd, short what, void *arg)
{
	struct ctl_job *j = arg;
	struct timeval tv = { 0, CTL_POLL_MS * 1000 };
	struct nk_error err;

	if (shm_mbox_broadcast_done(j->seqs)) {
		if (j->finish != NULL)
			j->finish(j);
		else
			ctl_done(j->req, j->tag);
		ctl_job_free(j);
	} else if (nk_now_ms() >= j->deadline_ms) {
		nk_error_set(&err, ERRCODE_QUERY_CANCELED,
			     "not every neki worker acted on %s within %d s", j->tag,
			     CTL_TIMEOUT_MS / 1000);
		adm_result_error(&j->req->res, &err);
		adm_req_finish(j->req);
		ctl_job_free(j);
	} else {
		event_add(j->timer, &tv);
	}
}

/* Post <m> to every worker; answer <tag> (or call <finish>) once all acted. */
static void
ctl_broadcast_msg(struct adm_req *req, struct shm_msg m, const char *tag,
		  void (*finish)(struct ctl_job *j))
{
	struct ctl_job *j = calloc(1, sizeof(*j));

	if (j == NULL || (j->seqs = calloc(shm_n_procs(), sizeof(uint64_t))) == NULL ||
	    (j->timer = evtimer_new(child_base(), ctl_poll, j)) == NULL) {
		if (j != NULL)
			ctl_job_free(j);
		ctl_fail(req, ERRCODE_OUT_OF_MEMORY, "out of memory");
		return;
	}
	j->req = req;
	j->tag = tag;
	j->finish = finish;
	j->deadline_ms = nk_now_ms() + CTL_TIMEOUT_MS;
	(void)shm_mbox_broadcast(SHM_PROC_WORKER, &m, j->seqs);
	ctl_poll(-1, 0, j);
}

/* Post <cmd> (with database <db> or NULL) to every worker; answer <tag> once all acted. */
static void
ctl_broadcast(struct adm_req *req, enum shm_cmd cmd, const char *db, const char *tag)
{
	struct shm_msg m = { .cmd = cmd };

	/* callers checked the length: names and SET's "key=value" fit SHM_MSG_NAME_MAX */
	if (db != NULL)
		memcpy(m.name, db, strnlen(db, sizeof(m.name) - 1));
	ctl_broadcast_msg(req, m, tag, NULL);
}

/* KILL_CLIENT acted everywhere: did a worker find the client (its ctl_found_seq)? */
static void
ctl_kill_client_done(struct ctl_job *j)
{
	for (unsigned i = 0; i < shm_n_procs(); i++) {
		if (j->seqs[i] != 0 && atomic_load(&shm_proc(i)->ctl_found_seq) == j->seqs[i]) {
			ctl_done(j->req, "KILL_CLIENT");
			return;
		}
	}
	ctl_fail(j->req, ERRCODE_PROTOCOL_VIOLATION, "client not found");
}

/* KILL_CLIENT id: the id of SHOW CLIENTS (global across workers). */
static void
ctl_kill_client(struct adm_req *req, const char *arg)
{
	struct shm_msg m = { .cmd = SHM_CMD_KILL_CLIENT, .key_len = sizeof(uint64_t) };
	unsigned long long id;
	uint64_t id64;
	char *end;

	if (arg == NULL || !isdigit((unsigned char)arg[0]) ||
	    (id = strtoull(arg, &end, 10), *end != '\0')) {
		ctl_fail(req, ERRCODE_PROTOCOL_VIOLATION, "invalid client pointer supplied");
		return;
	}
	id64 = id;
	memcpy(m.key, &id64, sizeof(id64));
	ctl_broadcast_msg(req, m, "KILL_CLIENT", ctl_kill_client_done);
}

/* True when every live worker is in state <st> (false when there is none). */
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

static bool shutdown_asked;	/* SHUTDOWN WAIT_FOR_* came through this console */

/* A shutdown is under way: asked here, or some worker already stops (a signal). */
static bool
shutting_down(void)
{
	if (shutdown_asked)
		return true;
	for (unsigned i = 0; i < shm_n_procs(); i++) {
		struct shm_proc *p = shm_proc(i);

		if (atomic_load(&p->kind) == SHM_PROC_WORKER && atomic_load(&p->pid) != 0 &&
		    atomic_load(&p->state) == (uint32_t)SHM_PST_STOPPING)
			return true;
	}
	return false;
}

/* Slot of <db> in paused_dbs, or -1. */
static int
paused_find(const char *db)
{
	for (int i = 0; i < CTL_MAX_DBS; i++)
		if (strcmp(paused_dbs[i], db) == 0)
			return i;
	return -1;
}

static bool
any_db_paused(void)
{
	for (int i = 0; i < CTL_MAX_DBS; i++)
		if (paused_dbs[i][0] != '\0')
			return true;
	return false;
}

/* Remember <db> as paused. */
static void
paused_add(const char *db)
{
	int slot;

	if (paused_find(db) < 0 && (slot = paused_find("")) >= 0)
		snprintf(paused_dbs[slot], sizeof(paused_dbs[slot]), "%s", db);
}

/* KILL leaves the killed databases paused (pgbouncer 1.25). */
static void
mark_killed(const char *db)
{
	const struct cfg *c = cfg_current();

	if (db != NULL) {
		paused_add(db);
		return;
	}
	for (size_t i = 0; i < c->n_databases; i++)
		paused_add(c->databases[i].name);
}

/* Check the database argument of <verb>: exists, is not the admin db. */
static bool
check_db(struct adm_req *req, const char *verb, const char *db)
{
	if (strcmp(db, "pgbouncer") == 0) {
		ctl_fail(req, ERRCODE_PROTOCOL_VIOLATION, "cannot %s admin db: %s", verb, db);
		return false;
	}
	if (cfg_database_find(cfg_current(), db) == NULL) {
		ctl_fail(req, ERRCODE_PROTOCOL_VIOLATION, "no such database: %s", db);
		return false;
	}
	return true;
}

static void
ctl_pause(struct adm_req *req, const char *db)
{
	if (db == NULL) {
		if (workers_all(SHM_PST_PAUSED) || workers_all(SHM_PST_SUSPENDED)) {
			ctl_fail(req, ERRCODE_PROTOCOL_VIOLATION, "already suspended/paused");
			return;
		}
		kill(getppid(), SIGUSR1);	/* the master pauses children it restarts */
	} else {
		if (!check_db(req, "pause", db))
			return;
		paused_add(db);
	}
	ctl_broadcast(req, SHM_CMD_PAUSE, db, "PAUSE");
}

/* SUSPEND: answered once every worker stopped reading its clients (or closed them). */
static void
ctl_suspend(struct adm_req *req)
{
	if (workers_all(SHM_PST_PAUSED) || workers_all(SHM_PST_SUSPENDED)) {
		ctl_fail(req, ERRCODE_PROTOCOL_VIOLATION, "already suspended/paused");
		return;
	}
	if (any_db_paused()) {
		ctl_fail(req, ERRCODE_PROTOCOL_VIOLATION, "cannot suspend with paused databases");
		return;
	}
	suspender = req->conn;
	log_info("SUSPEND command issued");
	ctl_broadcast(req, SHM_CMD_SUSPEND, NULL, "SUSPEND");
}

void
ctl_console_gone(const void *conn)
{
	struct shm_msg m = { .cmd = SHM_CMD_RESUME };
	uint64_t *seqs;

	if (conn == NULL || conn != suspender)
		return;
	suspender = NULL;
	if (!workers_all(SHM_PST_SUSPENDED))
		return;
	log_info("the console session that issued SUSPEND went away: resuming");
	shm_handover_set(false);	/* an online restart gave up: the sockets are ours */
	if ((seqs = calloc(shm_n_procs(), sizeof(*seqs))) == NULL)
		return;
	(void)shm_mbox_broadcast(SHM_PROC_WORKER, &m, seqs);
	free(seqs);
}

static void
ctl_resume(struct adm_req *req, const char *db)
{
	int slot;

	if (db == NULL) {
		if (shutting_down()) {
			ctl_fail(req, ERRCODE_PROTOCOL_VIOLATION, "pooler is shutting down");
			return;
		}
		if (!workers_all(SHM_PST_PAUSED) && !workers_all(SHM_PST_SUSPENDED) &&
		    !any_db_paused()) {
			ctl_fail(req, ERRCODE_PROTOCOL_VIOLATION, "pooler is not paused/suspended");
			return;
		}
		suspender = NULL;
		memset(paused_dbs, 0, sizeof(paused_dbs));
		shm_handover_set(false);
		kill(getppid(), SIGUSR2);
	} else {
		if (cfg_database_find(cfg_current(), db) == NULL) {
			ctl_fail(req, ERRCODE_PROTOCOL_VIOLATION, "no such database: %s", db);
			return;
		}
		if ((slot = paused_find(db)) < 0) {
			ctl_fail(req, ERRCODE_PROTOCOL_VIOLATION, "database %s is not paused", db);
			return;
		}
		paused_dbs[slot][0] = '\0';
	}
	ctl_broadcast(req, SHM_CMD_RESUME, db, "RESUME");
}

/* The workers closed the clients the online restart could not take: now exit. */
static void
ctl_takeover_done(struct ctl_job *j)
{
	(void)j;	/* the console connection stays open until the process exits */
	log_info("SHUTDOWN after the online restart: exiting");
	kill(getppid(), SIGQUIT);
}

static void
ctl_shutdown(struct adm_req *req, const char *arg)
{
	int sig = SIGQUIT;

	if (arg != NULL && strcmp(arg, "wait_for_servers") == 0)
		sig = SIGINT;
	else if (arg != NULL && strcmp(arg, "wait_for_clients") == 0)
		sig = SIGTERM;
	else if (arg != NULL) {
		ctl_fail(req, ERRCODE_PROTOCOL_VIOLATION,
			 "invalid command 'SHUTDOWN %s', use SHOW HELP;", arg);
		return;
	}
	log_info("SHUTDOWN%s%s requested on the console", arg ? " " : "", arg ? arg : "");
	shutdown_asked = true;
	if (sig == SIGQUIT && shm_handover_is_set()) {
		struct shm_msg m = { .cmd = SHM_CMD_TAKEOVER_DONE };

		ctl_broadcast_msg(req, m, "SHUTDOWN", ctl_takeover_done);
		return;
	}
	kill(getppid(), sig);
	if (sig == SIGQUIT)	/* the connection stays open until the process exits */
		return;
	ctl_done(req, "SHUTDOWN");
}

/* The workers reloaded, but TLS setup failed (the rest applies, as in pgbouncer). */
static void
ctl_reload_tls_failed(struct ctl_job *j)
{
	ctl_fail(j->req, ERRCODE_CONFIG_FILE_ERROR,
		 "RELOAD failed, see logs for additional details");
}

/*
 * RELOAD: every process re-reads the file. A file that does not load changes nothing; TLS
 * settings that cannot be set up keep the old contexts (the master logs why) while the rest
 * applies: both answer pgbouncer's error.
 */
static void
ctl_reload(struct adm_req *req)
{
	struct shm_msg m = { .cmd = SHM_CMD_RELOAD };
	bool tls_ok;

	if (!reload_config(&tls_ok)) {
		ctl_fail(req, ERRCODE_CONFIG_FILE_ERROR,
			 "RELOAD failed, see logs for additional details");
		return;
	}
	kill(getppid(), SIGHUP);	/* the master's copy, for the children it restarts */
	ctl_broadcast_msg(req, m, "RELOAD", tls_ok ? NULL : ctl_reload_tls_failed);
}

/*
 * A console SET of a TLS setting: set the contexts up again here (the console's own TLS,
 * and the check for the workers, which do the same); when that fails, the setting stays
 * set but the old contexts stay in use, as pgbouncer does: the reason is logged and the
 * SET is answered with a NOTICE.
 */
static void
ctl_set_tls(struct adm_req *req, const char *key)
{
	struct nk_error err;

	if (strstr(key, "_tls_") == NULL && strstr(key, "_tls13_") == NULL)
		return;
	if (tls_reload(cfg_current(), NULL, &err))
		return;
	log_error("TLS setup failed: %s", err.message);
	nk_error_set(&err, ERRCODE_SUCCESSFUL_COMPLETION,
		     "TLS settings could not be applied, still using old "
		     "configuration");
	err.severity = NK_SEV_NOTICE;
	adm_result_notice(&req->res, &err);
}

/* Commands that need a database: DISABLE, ENABLE. */
static void
ctl_disable_enable(struct adm_req *req, const char *verb, const char *db)
{
	bool disable = strcmp(verb, "disable") == 0;

	if (db == NULL) {
		ctl_fail(req, ERRCODE_PROTOCOL_VIOLATION, "a database is required");
		return;
	}
	if (!check_db(req, verb, db))
		return;
	ctl_broadcast(req, disable ? SHM_CMD_DISABLE : SHM_CMD_ENABLE, db,
		      disable ? "DISABLE" : "ENABLE");
}

void
ctl_command(struct adm_req *req, const char *verb, const char *arg, const char *sql)
{
	if (strcmp(verb, "pause") == 0) {
		ctl_pause(req, arg);
	} else if (strcmp(verb, "resume") == 0) {
		ctl_resume(req, arg);
	} else if (strcmp(verb, "reconnect") == 0) {
		if (arg == NULL || check_db(req, "reconnect", arg))
			ctl_broadcast(req, SHM_CMD_RECONNECT, arg, "RECONNECT");
	} else if (strcmp(verb, "kill") == 0) {
		if (workers_all(SHM_PST_PAUSED) || workers_all(SHM_PST_SUSPENDED))
			ctl_fail(req, ERRCODE_PROTOCOL_VIOLATION, "already suspended/paused");
		else if (arg == NULL || check_db(req, "kill", arg)) {
			mark_killed(arg);
			ctl_broadcast(req, SHM_CMD_KILL, arg, "KILL");
		}
	} else if (strcmp(verb, "disable") == 0 || strcmp(verb, "enable") == 0) {
		ctl_disable_enable(req, verb, arg);
	} else if (strcmp(verb, "wait_close") == 0) {
		if (arg == NULL || check_db(req, "wait in", arg))
			ctl_broadcast(req, SHM_CMD_WAIT_CLOSE, arg, "WAIT_CLOSE");
	} else if (strcmp(verb, "reload") == 0 && arg == NULL) {
		ctl_reload(req);
	} else if (strcmp(verb, "shutdown") == 0) {
		ctl_shutdown(req, arg);
	} else if (strcmp(verb, "suspend") == 0 && arg == NULL) {
		ctl_suspend(req);
	} else if (strcmp(verb, "kill_client") == 0) {
		ctl_kill_client(req, arg);
	} else if (strcmp(verb, "switchover") == 0) {
		switchover_run(req, arg);	/* (switchover.c) */
	} else {
		ctl_fail(req, ERRCODE_PROTOCOL_VIOLATION,
			 "invalid command '%s', use SHOW HELP;", sql);
	}
}

/* ---- SET ---- */

bool
cmd_is_set(const char *sql)
{
	while (isspace((unsigned char)*sql))
		sql++;
	return strncasecmp(sql, "set", 3) == 0 && isspace((unsigned char)sql[3]);
}

/*
 * `SET key =|TO value`: value a word or a 'string' with '' escaping. A value longer than
 * <vlen> - 1 bytes sets <*too_long> (and is cut).
 */
static bool
parse_set(const char *sql, char *key, size_t klen, char *val, size_t vlen, bool *too_long)
{
	const char *p = sql + strspn(sql, " \t\r\n") + 3;
	size_t n = 0;

	p += strspn(p, " \t\r\n");
	while ((isalnum((unsigned char)*p) || *p == '_') && n < klen - 1)
		key[n++] = (char)tolower((unsigned char)*p++);
	key[n] = '\0';
	p += strspn(p, " \t\r\n");
	if (*p == '=')
		p++;
	else if (strncasecmp(p, "to", 2) == 0 && isspace((unsigned char)p[2]))
		p += 2;
	else
		return false;
	p += strspn(p, " \t\r\n");
	n = 0;
	if (*p == '\'') {
		for (p++; *p && !(p[0] == '\'' && p[1] != '\''); p++) {
			if (p[0] == '\'')
				p++;
			if (n < vlen - 1)
				val[n++] = *p;
			else
				*too_long = true;
		}
		if (*p++ != '\'')
			return false;
	} else {
		while (*p && !isspace((unsigned char)*p) && *p != ';') {
			if (n < vlen - 1)
				val[n++] = *p;
			else
				*too_long = true;
			p++;
		}
	}
	val[n] = '\0';
	p += strspn(p, " \t\r\n;");
	return key[0] != '\0' && *p == '\0';
}

/* A SET the workers need not hear of: fake parameters and not-reloadable settings. */
static bool
set_answered_here(struct adm_req *req, const char *key, const struct cfg_setting *s)
{
	static const char *const fake[] = {
		"client_encoding", "default_transaction_isolation", "standard_conforming_strings",
		"datestyle", "timezone",
	};
	struct nk_error err;

	for (size_t i = 0; i < NK_ARRAY_LEN(fake); i++) {
		if (strcmp(key, fake[i]) == 0) {
			nk_error_set(&err, ERRCODE_SUCCESSFUL_COMPLETION, "SET ignored");
			err.severity = NK_SEV_NOTICE;
			adm_result_notice(&req->res, &err);
			ctl_done(req, "SET");
			return true;
		}
	}
	if (s == NULL || s->reloadable)
		return false;
	/* pgbouncer answers these with SET and ignores them: only a start reads them */
	log_info("SET %s ignored: not reloadable", key);
	nk_error_set(&err, ERRCODE_WARNING,
		     "parameter \"%s\" cannot be changed at run time; the SET "
		     "has no effect (change the file and restart neki)", key);
	err.severity = NK_SEV_WARNING;
	adm_result_notice(&req->res, &err);
	ctl_done(req, "SET");
	return true;
}

void
cmd_set(struct adm_req *req, const char *sql)
{
	static struct shm_msg m;	/* 1 kB: not on the stack */
	char key[64], val[SHM_MSG_TEXT_MAX];
	const struct cfg_setting *s;
	struct nk_error err;
	struct cfg *next;
	bool too_long = false;

	if (!parse_set(sql, key, sizeof(key), val, sizeof(val), &too_long)) {
		ctl_fail(req, ERRCODE_PROTOCOL_VIOLATION,
			 "invalid command '%s', use SHOW HELP;", sql);
		return;
	}
	s = cfg_setting_find(key);
	if (req->access != ADM_ACCESS_ADMIN && s != NULL) {
		ctl_fail(req, ERRCODE_INSUFFICIENT_PRIVILEGE, "admin access needed");
		return;
	}
	if (set_answered_here(req, key, s))
		return;
	if (req->access != ADM_ACCESS_ADMIN) {
		ctl_fail(req, ERRCODE_INSUFFICIENT_PRIVILEGE, "admin access needed");
		return;
	}
	if (s == NULL) {
		ctl_fail(req, ERRCODE_PROTOCOL_VIOLATION,
			 "SET failed: unknown parameter \"%s\"", key);
		return;
	}
	if (too_long || strlen(key) + strlen(val) + 2 > SHM_MSG_TEXT_MAX) {
		ctl_fail(req, ERRCODE_PROTOCOL_VIOLATION,
			 "SET failed: the value of \"%s\" is longer than %d bytes",
			 key, (int)(SHM_MSG_TEXT_MAX - strlen(key) - 2));
		return;
	}
	next = cfg_dup(cfg_current());
	if (next == NULL || !cfg_setting_apply(next, s, val, &err)) {
		ctl_fail(req, ERRCODE_PROTOCOL_VIOLATION,
			 "SET failed: %s", next ? err.message : "out of memory");
		if (next != NULL)
			cfg_unref(next);
		return;
	}
	cfg_set_current(next);
	cfg_unref(next);
	if (!reload_apply_log())	/* verbose and syslog at once, here too */
		log_warn("could not reopen the logfile; logging goes where it went before");
	ctl_set_tls(req, key);
	m.cmd = SHM_CMD_SET;
	snprintf(m.text, sizeof(m.text), "%s=%s", key, val);
	ctl_broadcast_msg(req, m, "SET", NULL);
}
