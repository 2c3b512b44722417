/*
 * child.c - the runtime every child process (worker or admin) runs.
 *
 * One libevent loop per process with three kinds of events:
 *   - a read event per inherited listening socket of the child's kind: accept until
 *     EAGAIN (several processes share a socket, so losing the race is normal) and hand
 *     each connection to the child's accept function;
 *   - the shm mailbox eventfd: take every pending command, act, acknowledge (SHOW's list
 *     and SHOW FDS's sockets are answered at once, whatever waits); a pooling
 *     command that waits (PAUSE until the links are gone) holds its acknowledgement, and
 *     every later one, until the handler says it is settled (polled every 20 ms); the same
 *     eventfd carries the pool wake-ups of shm_wait_wake() (on_pool_wake);
 *   - a one-second tick: heartbeat and stats into the shm slot, and exit if the master
 *     is gone (PR_SET_PDEATHSIG does that too; the tick covers the fork window).
 * Shutdown modes: SHUTDOWN_NOW exits at once; SHUTDOWN_CLIENTS and SHUTDOWN_SERVERS stop
 * listening on TCP (the Unix sockets stay, for cancel requests and the console) and exit when
 * the client gauge reaches zero, resp. once no server link is left. Entry point: child_run().
 */
#include "neki/base.h"

#include "neki/proc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "neki/clock.h"
#include "neki/config.h"
#include "neki/config_settings.h"
#include "neki/dns.h"
#include "neki/log.h"
#include "neki/shm_wait.h"
#include "neki/tls.h"
#include "neki/shm_dbstats.h"
#include "neki/shm_list.h"

#define CHILD_CTL_POLL_MS 20		/* held commands and shutdown conditions are polled */
#define CHILD_SWITCH_LOOK_MS 10		/* a held topology switch: sessions looked at again */

enum child_exit_mode {
	CHILD_RUN = 0,			/* serving */
	CHILD_WAIT_CLIENTS = 1,		/* SIGTERM: exit when no client is left */
	CHILD_WAIT_SERVERS = 2,		/* SIGINT: exit when no server link is left */
};

static struct child_spec spec;		/* what this process is */
static struct shm_proc *slot;		/* its shm slot (borrowed from the segment) */
static struct event_base *base;		/* owned; freed at exit */
static struct event *listen_ev[LISTEN_MAX]; /* owned; NULL when not listening */
static struct event *mbox_ev;		/* owned */
static struct event *tick_ev;		/* owned */
static struct event *accept_pause_ev;	/* owned: resumes accepting after a shortage */
static struct event *ctl_ev;		/* owned: polls held commands and shutdown conditions */
static uint64_t taken_seq;		/* last mailbox message taken */
static uint64_t held_seq;		/* first message whose ack waits (0 = none) */
static enum child_exit_mode exit_mode;
static pid_t master_pid;		/* getppid() at start; a change means it died */
static struct shm_stats stats;		/* the sum of shm_dbstats, published each tick */

struct event_base *
child_base(void)
{
	return base;
}

bool
child_is_stopping(void)
{
	return exit_mode != CHILD_RUN;
}

struct shm_stats *
child_stats(void)
{
	return &stats;
}

/*
 * A console SET of a TLS setting takes effect for the next connection, as pgbouncer's does:
 * the contexts are rebuilt as on RELOAD (a broken file keeps the old ones; the admin logs
 * why), and a change towards servers replaces the server links (idle now, busy when
 * released).
 */
static void
child_apply_tls(void)
{
	(void)reload_tls_contexts();
}

/* A console SET: apply "key=value" <kv> to a copy of the configuration and make it current. */
static void
child_apply_setting(const char *kv)
{
	char key[SHM_MSG_NAME_MAX];
	const char *eq = strchr(kv, '=');
	const struct cfg_setting *s;
	struct nk_error err;
	struct cfg *next;

	if (eq == NULL || (size_t)(eq - kv) >= sizeof(key))
		return;
	memcpy(key, kv, (size_t)(eq - kv));
	key[eq - kv] = '\0';
	if ((s = cfg_setting_find(key)) == NULL || (next = cfg_dup(cfg_current())) == NULL)
		return;
	if (cfg_setting_apply(next, s, eq + 1, &err)) {
		cfg_set_current(next);
		proc_pools_reload();
		if (!reload_apply_log())
			log_warn("could not reopen the logfile; logging goes where it went before");
	} else
		log_warn("SET %s failed: %s", kv, err.message);
	cfg_unref(next);
	if (strncmp(key, "client_tls", 10) == 0 || strncmp(key, "server_tls", 10) == 0)
		child_apply_tls();
}

void
child_switch_topology(void)
{
	static uint64_t seen = UINT64_MAX; /* what slot->revision_seen holds: store on a change */
	static uint64_t held_ms;	/* a statement planned before held the switch then */
	uint64_t rev = shm_topo_revision(), oldest, now;

	if (slot == NULL)
		return;		/* not in child_run (the executor's unit tests) */
	if (rev == seen)
		return;
	/* a statement planned with an older revision still runs: not switched yet (looked at
	 * again at most every CHILD_SWITCH_LOOK_MS, so a long statement does not make every
	 * other one walk the sessions); a GSI build waits for exactly this (doc/topology.md) */
	now = nk_now_ms();
	if (held_ms != 0 && now - held_ms < CHILD_SWITCH_LOOK_MS)
		return;
	oldest = spec.oldest_planned_revision != NULL ? spec.oldest_planned_revision() : 0;
	held_ms = oldest != 0 && oldest < rev ? now : 0;
	if (held_ms != 0)
		rev = oldest;
	if (rev != seen) {
		seen = rev;
		atomic_store(&slot->revision_seen, rev);
	}
}

/* Copy the per-database counters and their sum into the shm slot. */
static void
child_publish_stats(void)
{
	shm_dbstats_publish(spec.slot);
	shm_dbstats_total(&stats);
	shm_stats_publish(slot, &stats);
}

/* Publish the final stats and end the process (open connections close with it). */
static NK_NORETURN void
child_exit(int status)
{
	child_publish_stats();
	log_debug("%s %u exiting", shm_proc_kind_str(spec.kind), spec.slot);
	exit(status);
}

/* Publish this process's server links into its slot (the gauge SHOW WORKERS reads). */
static void
child_publish_links(void)
{
	if (spec.server_links != NULL)
		atomic_store(&slot->links, (int64_t)spec.server_links());
}

/*
 * Server links left in every process (what SHUTDOWN WAIT_FOR_SERVERS waits for). A process
 * publishes its count before it reports STOPPING and at every poll after, so once every live
 * process is STOPPING the sum is at most one poll old (links only go away meanwhile). As in
 * pgbouncer, no process leaves (dropping its idle clients) while another still has links.
 */
static int64_t
child_server_links(void)
{
	int64_t n = 0;

	child_publish_links();
	for (unsigned i = 0; i < shm_n_procs(); i++) {
		struct shm_proc *p = shm_proc(i);

		if (atomic_load(&p->pid) == 0)
			continue;
		if (atomic_load(&p->state) != SHM_PST_STOPPING)
			return 1;	/* not counted yet: it has not begun the shutdown */
		n += atomic_load(&p->links);
	}
	return n;
}

/* Is a worker process still alive (the admin serves the console until the last one exits)? */
static bool
child_workers_alive(void)
{
	for (unsigned i = 0; i < shm_n_procs(); i++) {
		struct shm_proc *p = shm_proc(i);

		if (atomic_load(&p->kind) == SHM_PROC_WORKER && atomic_load(&p->pid) != 0)
			return true;
	}
	return false;
}

/* Exit when the current shutdown mode's condition holds. */
static void
check_exit(void)
{
	if (exit_mode == CHILD_WAIT_CLIENTS && atomic_load(&slot->clients) == 0 &&
	    (spec.kind != SHM_PROC_ADMIN || !child_workers_alive()))
		child_exit(0);
	else if (exit_mode == CHILD_WAIT_SERVERS && child_server_links() == 0)
		child_exit(0);
}

void
child_client_opened(void)
{
	atomic_fetch_add(&slot->clients, 1);
}

void
child_client_closed(void)
{
	int64_t prev = atomic_fetch_sub(&slot->clients, 1);

	NK_ASSERT(prev > 0);
	check_exit();
}

/* Watch (<on>) or stop watching every listener this process serves. */
static void
watch_listeners(bool on)
{
	for (size_t i = 0; i < LISTEN_MAX; i++) {
		if (listen_ev[i] != NULL && (on ? event_add(listen_ev[i], NULL)
						: event_del(listen_ev[i])) == -1)
			log_error("could not %s listener events", on ? "add" : "remove");
	}
}

/* A second after an fd or memory shortage: accept again (unless shutting down). */
static void
resume_accepting_cb(evutil_socket_t fd, short what, void *arg)
{
	watch_listeners(true);	/* only the listeners still open have events */
}

/*
 * Out of file descriptors or memory: the listener stays readable, so accepting again
 * at once would spin. Stop for a second, as pgbouncer does.
 */
static void
pause_accepting(const char *name, int err)
{
	struct timeval one_sec = { 1, 0 };

	log_warn("accept on %s failed: %s; not accepting new connections for 1 s", name,
		 strerror(err));
	watch_listeners(false);
	evtimer_add(accept_pause_ev, &one_sec);
}

/* Accept every pending connection on the listener <arg>. */
static void
accept_cb(evutil_socket_t fd, short what, void *arg)
{
	const struct listener *l = arg;

	for (int i = 0; i < 64; i++) {
		int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (cfd == -1) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
				pause_accepting(l->name, errno);
			else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
				 errno != ECONNABORTED)
				log_warn("accept on %s failed: %s", l->name, strerror(errno));
			return;
		}
		log_debug("accepted a connection on %s (fd %d)", l->name, cfd);
		spec.on_accept(cfd, l);
	}
}

/*
 * A shutdown that waits (for the clients or for the server links): stop accepting on TCP and
 * close this process's copies of those listening sockets, as pgbouncer's
 * cleanup_tcp_sockets(). The Unix sockets stay open until the process exits: on a worker's,
 * a client that arrives only gets "shutting down", but a CancelRequest for a query still
 * running here (sent by one of our clients, or forwarded by a peer during a rolling restart)
 * is served, and so is a console login (as pgbouncer), which reaches the admin through its
 * internal socket: the admin keeps that one (waiting for the clients, it stays until the
 * last worker has exited).
 */
static void
stop_listening(void)
{
	for (size_t i = 0; i < LISTEN_MAX; i++) {
		if (listen_ev[i] == NULL)
			continue;
		if (i < listen_count() && listen_at(i)->family == AF_UNIX)
			continue;
		event_free(listen_ev[i]);
		listen_ev[i] = NULL;
		listen_close(i);
	}
}

/* Watch the listeners of our kind; close the others (another process serves them). */
static void
start_listening(void)
{
	for (size_t i = 0; i < listen_count(); i++) {
		const struct listener *l = listen_at(i);

		if (l->fd == -1)
			continue;
		if (l->kind != spec.listens) {
			listen_close(i);
			continue;
		}
		listen_ev[i] = event_new(base, l->fd, EV_READ | EV_PERSIST, accept_cb,
					 (void *)(uintptr_t)l);
		if (listen_ev[i] == NULL || event_add(listen_ev[i], NULL) == -1)
			fatal("could not watch listener %s", l->name);
	}
}

void
child_accept_pause(bool pause)
{
	for (size_t i = 0; i < LISTEN_MAX; i++) {
		if (listen_ev[i] == NULL)
			continue;
		if (pause)
			event_del(listen_ev[i]);
		else if (!event_pending(listen_ev[i], EV_READ, NULL) &&
			 event_add(listen_ev[i], NULL) == -1)
			log_error("could not watch a listener again");
	}
}

/* Poll held commands / the shutdown condition again soon. */
static void
ctl_poll_arm(void)
{
	struct timeval tv = { 0, CHILD_CTL_POLL_MS * 1000 };

	if (ctl_ev != NULL && !evtimer_pending(ctl_ev, NULL))
		evtimer_add(ctl_ev, &tv);
}

/* Acknowledge what was taken, up to the first held command. */
static void
ctl_ack(void)
{
	if (held_seq != 0 && spec.control_settled != NULL && spec.control_settled())
		held_seq = 0;
	shm_mbox_ack(slot, held_seq != 0 ? held_seq - 1 : taken_seq);
	if (held_seq != 0)
		ctl_poll_arm();
}

static void
ctl_poll_cb(evutil_socket_t fd, short what, void *arg)
{
	ctl_ack();
	check_exit();
	if (exit_mode != CHILD_RUN)
		ctl_poll_arm();
}

/* A pooling command: to the handler, and hold the ack while it waits. */
static void
child_control(const struct shm_msg *m)
{
	if (spec.on_control == NULL || spec.on_control(m))
		return;
	if (held_seq == 0)
		held_seq = m->seq;
}

/* Enter shutdown mode <mode>: stop listening, then exit when its condition holds. */
static void
begin_shutdown(enum child_exit_mode mode)
{
	if (exit_mode == CHILD_RUN)
		stop_listening();
	exit_mode = mode;
	if (mode == CHILD_WAIT_SERVERS && spec.on_stop_servers != NULL)
		spec.on_stop_servers();
	child_publish_links();
	shm_proc_set_state(slot, SHM_PST_STOPPING);
	ctl_poll_arm();
	check_exit();
}

/* SHM_CMD_LIST: write this process's rows into its list area, at once (never held). */
static void
child_list(void)
{
	size_t cap, len = 0;
	uint64_t req;
	void *buf = shm_list_area(spec.slot, &cap, &req);
	bool complete;

	child_publish_stats();	/* a SHOW STATS gathers first: it reads current figures */
	complete = spec.on_list == NULL || spec.on_list(buf, cap, &len);

	shm_list_done(spec.slot, req, len, !complete);
}

/* Act on one mailbox command. */
static void
handle_command(const struct shm_msg *m)
{
	enum shm_proc_state st = atomic_load(&slot->state);

	switch ((enum shm_cmd)m->cmd) {
	case SHM_CMD_RELOAD:
		if (!reload_config(NULL))
			log_warn("keeping the previous configuration");
		break;
	case SHM_CMD_PAUSE:
		if (st == SHM_PST_RUNNING && m->name[0] == '\0')
			shm_proc_set_state(slot, SHM_PST_PAUSED);
		child_control(m);
		break;
	case SHM_CMD_RESUME:
		if ((st == SHM_PST_PAUSED || st == SHM_PST_SUSPENDED) && m->name[0] == '\0')
			shm_proc_set_state(slot, SHM_PST_RUNNING);
		child_accept_pause(false);
		child_control(m);
		break;
	case SHM_CMD_SUSPEND:
		if (st == SHM_PST_RUNNING)
			shm_proc_set_state(slot, SHM_PST_SUSPENDED);
		child_accept_pause(true);
		child_control(m);
		break;
	case SHM_CMD_SHUTDOWN_NOW:
		shm_mbox_ack(slot, m->seq);
		child_exit(0);
	case SHM_CMD_SHUTDOWN_CLIENTS:
		begin_shutdown(CHILD_WAIT_CLIENTS);
		break;
	case SHM_CMD_SHUTDOWN_SERVERS:
		begin_shutdown(CHILD_WAIT_SERVERS);
		break;
	case SHM_CMD_TOPOLOGY:
		child_switch_topology();
		break;
	case SHM_CMD_SET:
		child_apply_setting(m->text);
		break;
	case SHM_CMD_CANCEL:
		if (spec.on_cancel != NULL)
			spec.on_cancel(m->key, m->key_len <= SHM_MSG_KEY_MAX ? m->key_len : 0);
		break;
	case SHM_CMD_DISABLE:
	case SHM_CMD_ENABLE:
	case SHM_CMD_RECONNECT:
	case SHM_CMD_KILL:
	case SHM_CMD_KILL_CLIENT:
	case SHM_CMD_DEADLOCK:
	case SHM_CMD_WAIT_CLOSE:
		child_control(m);
		break;
	case SHM_CMD_LIST:
		child_list();
		break;
	case SHM_CMD_FDS:	/* answered at once, as SHM_CMD_LIST */
		if (spec.on_fds != NULL)
			spec.on_fds(m);
		break;
	case SHM_CMD_TAKEOVER_DONE:
		child_control(m);
		break;
	case SHM_CMD_NONE:
		break;
	}
}

/* The mailbox eventfd fired (or start-up): act on and acknowledge every command. */
static void
mbox_cb(evutil_socket_t fd, short what, void *arg)
{
	struct shm_msg m;

	shm_mbox_drain_eventfd(slot);
	while (shm_mbox_take(slot, &m)) {
		log_debug("%s: got command %u (seq %llu)", shm_proc_kind_str(spec.kind), m.cmd,
			  (unsigned long long)m.seq);
		taken_seq = m.seq;
		handle_command(&m);
	}
	ctl_ack();
	if (shm_wait_take_wake(slot) && spec.on_pool_wake != NULL)
		spec.on_pool_wake();
}

/* Once a second: heartbeat, stats, and exit when the master is gone. */
static void
tick_cb(evutil_socket_t fd, short what, void *arg)
{
	shm_proc_beat(slot);
	child_publish_stats();
	child_publish_links();
	child_switch_topology();
	if (getppid() != master_pid) {
		log_warn("%s: the master process is gone, exiting", shm_proc_kind_str(spec.kind));
		child_exit(1);
	}
}

/* Create the loop and its events. */
static void
setup_events(void)
{
	struct timeval one_sec = { 1, 0 };

	base = event_base_new();
	if (base == NULL)
		fatal("could not create the event loop");
	start_listening();
	mbox_ev = event_new(base, slot->eventfd, EV_READ | EV_PERSIST, mbox_cb, NULL);
	tick_ev = event_new(base, -1, EV_PERSIST, tick_cb, NULL);
	accept_pause_ev = evtimer_new(base, resume_accepting_cb, NULL);
	ctl_ev = evtimer_new(base, ctl_poll_cb, NULL);
	if (mbox_ev == NULL || tick_ev == NULL || accept_pause_ev == NULL || ctl_ev == NULL ||
	    event_add(mbox_ev, NULL) == -1 ||
	    event_add(tick_ev, &one_sec) == -1)
		fatal("could not set up the event loop");
}

/*
 * Workers: the TLS contexts (client and server side) and the resolver for server host names
 * (net/tls.c, net/dns.c). A worker never serves with TLS settings it cannot honour.
 */
static void
start_net(void)
{
	struct nk_error err;

	if (spec.kind != SHM_PROC_WORKER)
		return;
	if (!tls_init(cfg_current(), &err))
		fatal("TLS setup failed: %s", err.message);
	if (!dns_process_init(base, cfg_current(), &err))
		fatal("%s", err.message);
}

void
child_run(const struct child_spec *s)
{
	spec = *s;
	master_pid = getppid();
	shm_attach_self((int)spec.slot);
	slot = shm_proc(spec.slot);
	atomic_store(&slot->pid, (int32_t)getpid());
	shm_proc_set_state(slot, SHM_PST_STARTING);
	shm_dbstats_restore(spec.slot);	/* totals survive a restart of this slot */
	setup_events();
	start_net();
	if (spec.on_start != NULL)
		spec.on_start();
	shm_proc_beat(slot);
	shm_proc_set_state(slot, SHM_PST_RUNNING);
	child_switch_topology();	/* a restarted process starts on the published revision */
	mbox_cb(-1, 0, NULL);		/* commands posted before we were up */
	event_base_dispatch(base);
	child_exit(0);
}
