/*
 * sctl.c - what a worker does with the console's pooling commands (and SIGUSR1/SIGUSR2/SIGINT
 * through the master): PAUSE, RESUME, KILL, KILL_CLIENT, RECONNECT, DISABLE, ENABLE and
 * WAIT_CLOSE, per database (empty name = every database), with pgbouncer 1.25's semantics.
 *
 *   PAUSE [db]     the db's pools stop handing out links: a client's next transaction waits
 *                  (query_wait_timeout applies), links close at release ("pause mode").
 *                  Done when the pools have no link left.
 *   RESUME [db]    undoes PAUSE / KILL (no name: every pause); the waiting clients go on.
 *   KILL [db]      the db's clients get FATAL "database removed", its links close; the db
 *                  stays paused until RESUME.
 *   KILL_CLIENT id that client gets FATAL "admin forced disconnect"; the worker that had it
 *                  reports it in its shm slot (ctl_found_seq) for the console's answer.
 *   RECONNECT [db] every link is closed at its next release (idle ones now).
 *   DISABLE db     new clients of db are refused: FATAL database "db" is disabled.
 *   WAIT_CLOSE [db] done when no link of the db is still marked close_needed.
 *   SUSPEND        stop accepting (the listeners stay open), stop reading each client (and
 *                  its link) once it is at rest, then freeze the pools (sess_suspend_step);
 *                  done when all are, or at suspend_timeout, which closes the others
 *                  ("suspend_timeout"). The console is never suspended. RESUME (no name)
 *                  reads them all again.
 *   TAKEOVER_DONE  an online restart took the sockets SHOW FDS sent: close the clients it
 *                  could not take, each with a FATAL saying why (session_fds.c).
 *   DEADLOCK       the admin's distributed deadlock detector chose a client: cancel its
 *                  statement waiting on that shard's backend (exec/route_deadlock.c).
 *   SHUTDOWN WAIT_FOR_SERVERS pauses everything and fails the queued clients
 *                  ("server shutting down").
 *
 * Commands that wait (PAUSE, WAIT_CLOSE) stay pending here; the child runtime holds their
 * mailbox acknowledgement until sctl_settled() says every wait is over, so the console answers
 * only when every worker has acted. Entry points: session_control(),
 * session_control_settled(), session_link_count(), session_shutdown_servers() (neki/session.h),
 * sctl_db_paused(), sctl_db_disabled() (session_int.h).
 */
#include "neki/base.h"

#include <stdio.h>
#include <string.h>

#include "neki/clock.h"
#include "neki/exec.h"
#include "neki/log.h"
#include "neki/session.h"
#include "session_int.h"

#define SCTL_MAX_DBS 64
#define SCTL_MAX_WAITS 32

/* A set of database names. */
struct sctl_names {
	char name[SCTL_MAX_DBS][SHM_MSG_NAME_MAX];
};

enum sctl_wait_kind {
	SCTL_WAIT_PAUSE = 0,		/* no link left */
	SCTL_WAIT_CLOSE = 1,		/* no close_needed link left */
	SCTL_WAIT_SUSPEND = 2,		/* every client at rest suspended */
};

struct sctl_wait {
	enum sctl_wait_kind kind;
	char db[SHM_MSG_NAME_MAX];	/* "" = every database */
};

static bool all_paused;
static bool suspended;			/* SUSPEND in force */
static uint64_t suspend_start_ms;	/* when it came (nk_now_ms) */
static bool shutting_down;		/* SHUTDOWN WAIT_FOR_SERVERS */
static struct sctl_names paused, disabled;
static struct sctl_wait waits[SCTL_MAX_WAITS];
static size_t n_waits;

/* ---- name sets ---- */

static int
names_find(const struct sctl_names *ns, const char *db)
{
	for (int i = 0; i < SCTL_MAX_DBS; i++)
		if (strcmp(ns->name[i], db) == 0)
			return i;
	return -1;
}

static bool
names_has(const struct sctl_names *ns, const char *db)
{
	return db[0] != '\0' && names_find(ns, db) >= 0;
}

static void
names_add(struct sctl_names *ns, const char *db)
{
	int slot;

	if (names_find(ns, db) >= 0)
		return;
	if ((slot = names_find(ns, "")) < 0) {
		log_warn("more than %d databases paused or disabled; %s is not", SCTL_MAX_DBS, db);
		return;
	}
	snprintf(ns->name[slot], sizeof(ns->name[slot]), "%s", db);
}

static void
names_del(struct sctl_names *ns, const char *db)
{
	int slot = names_find(ns, db);

	if (slot >= 0 && db[0] != '\0')
		ns->name[slot][0] = '\0';
}

/* ---- queries from the session layer ---- */

bool
sctl_db_paused(const char *db)
{
	return all_paused || shutting_down || names_has(&paused, db);
}

bool
sctl_shutting_down(void)
{
	return shutting_down;
}

bool
sctl_is_suspended(void)
{
	return suspended;
}

bool
sctl_db_disabled(const char *db)
{
	return names_has(&disabled, db);
}

static bool
sctl_matches(const char *want, const char *db)
{
	return want[0] == '\0' || strcmp(want, db) == 0;
}

/* ---- acting on pools ---- */

/* Every pool gets the pause state its database should have. */
static void
sctl_apply_pauses(void)
{
	for (struct spool *sp = spool_first(); sp != NULL; sp = spool_next(sp))
		pool_pause(spool_pool(sp), sctl_db_paused(spool_db(sp)));
}

static size_t
sctl_count(const char *db, size_t (*count)(const struct pool *p))
{
	size_t n = 0;

	for (struct spool *sp = spool_first(); sp != NULL; sp = spool_next(sp))
		if (sctl_matches(db, spool_db(sp)))
			n += count(spool_pool(sp));
	return n;
}

size_t
session_link_count(void)
{
	return sctl_count("", pool_link_total);
}

static void
sctl_reconnect(const char *db)
{
	for (struct spool *sp = spool_first(); sp != NULL; sp = spool_next(sp))
		if (sctl_matches(db, spool_db(sp)))
			pool_reconnect(spool_pool(sp));
}

void
session_reconnect_all(void)
{
	sctl_reconnect("");
}

/* KILL: the db's logged-in clients first (their links go with them), then its idle links. */
static void
sctl_kill(const char *db)
{
	sess_kill_db(db, "database removed");
	for (struct spool *sp = spool_first(); sp != NULL; sp = spool_next(sp))
		if (sctl_matches(db, spool_db(sp)))
			pool_close_all(spool_pool(sp), "database removed");
}

static void
sctl_wait_add(enum sctl_wait_kind kind, const char *db)
{
	if (n_waits == SCTL_MAX_WAITS) {
		log_warn("too many console commands waiting; not waiting for one more");
		return;
	}
	waits[n_waits].kind = kind;
	snprintf(waits[n_waits].db, sizeof(waits[n_waits].db), "%s", db);
	n_waits++;
}

/* Is what PAUSE wait <w> paused still paused? */
static bool
sctl_wait_paused(const struct sctl_wait *w)
{
	if (w->db[0] == '\0')
		return all_paused || shutting_down;
	return sctl_db_paused(w->db);
}

/* RESUME: the pauses it lifts end their PAUSE waits too (nothing left to wait for). */
static void
sctl_resume(const char *db)
{
	size_t j = 0;

	if (db[0] == '\0') {
		all_paused = false;
		memset(&paused, 0, sizeof(paused));
	} else {
		names_del(&paused, db);
	}
	if (db[0] == '\0' && suspended) {
		suspended = false;
		sess_resume_all();
	}
	for (size_t i = 0; i < n_waits; i++) {
		if (waits[i].kind == SCTL_WAIT_PAUSE && !sctl_wait_paused(&waits[i]))
			continue;
		if (waits[i].kind == SCTL_WAIT_SUSPEND && !suspended)
			continue;
		waits[j++] = waits[i];
	}
	n_waits = j;
	sctl_apply_pauses();
}

static void
sctl_suspend(void)
{
	if (!suspended) {
		suspended = true;
		suspend_start_ms = nk_now_ms();
	}
	sctl_wait_add(SCTL_WAIT_SUSPEND, "");
}

/* Clients not suspended yet; after suspend_timeout they are closed instead. */
static size_t
sctl_suspend_left(void)
{
	double tmo = cfg_current()->cli.suspend_timeout;
	bool force = tmo > 0 && nk_now_ms() - suspend_start_ms >= (uint64_t)(tmo * 1000);

	return suspended ? sess_suspend_step(force) : 0;
}

static void
sctl_pause(const char *db)
{
	if (db[0] == '\0')
		all_paused = true;
	else
		names_add(&paused, db);
	sctl_apply_pauses();
	sctl_wait_add(SCTL_WAIT_PAUSE, db);
}

void
session_shutdown_servers(void)
{
	shutting_down = true;
	sctl_apply_pauses();
	for (struct spool *sp = spool_first(); sp != NULL; sp = spool_next(sp))
		pool_fail_waiting(spool_pool(sp), "server shutting down");
}

/* KILL_CLIENT: the id travels in key[] (8 bytes, host order). */
static void
sctl_kill_client(const struct shm_msg *m)
{
	uint64_t id = 0;

	if (m->key_len != sizeof(id))
		return;
	memcpy(&id, m->key, sizeof(id));
	if (sess_kill_id(id, "admin forced disconnect"))
		atomic_store(&shm_proc((unsigned)shm_self())->ctl_found_seq, m->seq);
}

/* DEADLOCK: the victim of a wait cycle across shards, when it is one of this worker's. */
struct sctl_victim {
	uint64_t id;
	uint32_t backend_pid;
	char uid[SHM_MSG_NAME_MAX];
	const char *detail;
};

static void
sctl_cancel_victim(struct session *s, void *arg)
{
	const struct sctl_victim *v = arg;

	if (s->id == v->id && s->state != SESS_ST_CLOSED && s->route != NULL &&
	    route_cancel_deadlocked(s->route, v->uid, v->backend_pid, v->detail))
		sess_log(s, LOG_LVL_INFO, "distributed deadlock: canceled the statement waiting on "
			 "shard %s (backend %u)", v->uid, v->backend_pid);
}

static void
sctl_deadlock(const struct shm_msg *m)
{
	struct sctl_victim v = { .detail = m->text };

	if (m->key_len != sizeof(v.id) + sizeof(v.backend_pid) ||
	    memchr(m->text, '\0', sizeof(m->text)) == NULL)
		return;
	memcpy(&v.id, m->key, sizeof(v.id));
	memcpy(&v.backend_pid, m->key + sizeof(v.id), sizeof(v.backend_pid));
	snprintf(v.uid, sizeof(v.uid), "%s", m->name);
	sess_foreach(sctl_cancel_victim, &v);
}

bool
session_control(const struct shm_msg *m)
{
	char db[SHM_MSG_NAME_MAX];

	snprintf(db, sizeof(db), "%s", m->name);
	switch ((enum shm_cmd)m->cmd) {
	case SHM_CMD_PAUSE:
		sctl_pause(db);
		break;
	case SHM_CMD_RESUME:
		sctl_resume(db);
		break;
	case SHM_CMD_KILL:
		if (db[0] == '\0')
			all_paused = true;
		else
			names_add(&paused, db);
		sctl_apply_pauses();
		sctl_kill(db);
		break;
	case SHM_CMD_KILL_CLIENT:
		sctl_kill_client(m);
		break;
	case SHM_CMD_DEADLOCK:
		sctl_deadlock(m);
		break;
	case SHM_CMD_RECONNECT:
		sctl_reconnect(db);
		break;
	case SHM_CMD_DISABLE:
		names_add(&disabled, db);
		break;
	case SHM_CMD_ENABLE:
		names_del(&disabled, db);
		break;
	case SHM_CMD_WAIT_CLOSE:
		sctl_wait_add(SCTL_WAIT_CLOSE, db);
		break;
	case SHM_CMD_SUSPEND:
		sctl_suspend();
		break;
	case SHM_CMD_TAKEOVER_DONE:
		session_fds_left_behind();
		break;
	default:
		return true;
	}
	return session_control_settled();
}

bool
session_control_settled(void)
{
	size_t j = 0;

	for (size_t i = 0; i < n_waits; i++) {
		size_t left = waits[i].kind == SCTL_WAIT_SUSPEND ? sctl_suspend_left() :
			      sctl_count(waits[i].db, waits[i].kind == SCTL_WAIT_PAUSE
						      ? pool_link_total : pool_close_needed_count);

		if (left > 0)
			waits[j++] = waits[i];
	}
	n_waits = j;
	return n_waits == 0;
}
