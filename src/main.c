/*
 * main.c - the neki master: command line, start-up, supervision, signals.
 *
 * Start-up: parse flags and the ini, configure logging, create the shm segment,
 * bind every listener, go to the background (-d), write the pidfile, drop root,
 * fork `workers` workers and one admin process, tell systemd READY=1 once they all
 * run. With -R (online restart) the listeners and every client and server socket come
 * from the running neki instead (neki/takeover.h), which is shut down before the pidfile
 * is written; the workers rebuild the sessions they are given. Then the master only
 * supervises: it waits for signals synchronously
 * (sigtimedwait: the signals stay blocked, so no handler runs asynchronously, and
 * the loop acts on them one at a time, as nginx's flag-setting handlers do), reaps
 * and restarts children with exponential backoff, forwards reload / pause / resume
 * and the shutdown modes to the children through their shm mailboxes, and exits
 * when the shutdown mode's condition holds. This is the only file that forks,
 * handles SIGCHLD and knows child pids.
 */
#include "neki/base.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "neki/admin.h"
#include "neki/clock.h"
#include "neki/config.h"
#include "neki/daemon.h"
#include "neki/fdchan.h"
#include "neki/hash.h"
#include "neki/log.h"
#include "neki/net.h"
#include "neki/proc.h"
#include "neki/router.h"
#include "neki/sdnotify.h"
#include "neki/session.h"
#include "neki/shm.h"
#include "neki/shm_counter.h"
#include "neki/shm_names.h"
#include "neki/shm_wait.h"
#include "neki/takeover.h"
#include "neki/tls.h"
#include "neki/worker.h"

#define BACKOFF_FIRST_MS 100		/* delay before restarting a child that died young */
#define BACKOFF_MAX_MS 30000
#define CHILD_STABLE_MS 10000		/* a child that ran this long restarts at once */
#define STATUS_EVERY_MS 5000		/* progress line while waiting to shut down */
#define KILL_GRACE_MS 2000		/* SIGTERM to SIGKILL on immediate exit */
#define HEARTBEAT_LATE_MS 5000		/* a child silent this long is reported */
#define RELOAD_WAIT_MS 5000		/* how long READY=1 waits for the children's reload acks */

/* The command line. */
struct opts {
	bool daemon;		/* -d */
	bool reboot;		/* -R: take over a running neki (reset when none runs) */
	bool quiet;		/* -q */
	int verbose;		/* number of -v */
	const char *user;	/* -u */
	const char *ini;	/* the one positional argument */
};

/* The master's view of one child slot. */
struct child {
	pid_t pid;			/* 0 when not running */
	enum shm_proc_kind kind;
	uint64_t started_ms;		/* when it was forked (nk_now_ms) */
	uint64_t restart_at_ms;		/* when to fork it again; 0 = not scheduled */
	unsigned failures;		/* consecutive early deaths: the backoff exponent */
	bool late;			/* its heartbeat is overdue (reported once) */
};

enum master_state {
	MASTER_RUNNING = 0,
	MASTER_WAIT_CLIENTS = 1,	/* SIGTERM: children exit when their clients are gone */
	MASTER_WAIT_SERVERS = 2,	/* SIGINT: children exit when their server links are gone */
	MASTER_EXITING = 3,		/* SIGQUIT or a second signal: children are being killed */
};

static struct opts opts;
static struct child children[SHM_MAX_PROCS];
static unsigned n_children;		/* workers + the admin (the last slot) */
static enum master_state state;
static bool paused;			/* SIGUSR1 seen, no SIGUSR2 since */
static bool ready_sent;			/* READY=1 sent after start-up */
static pid_t master_pid;
static sigset_t orig_mask;		/* the mask to give back to children */
static uint64_t reload_seqs[SHM_MAX_PROCS]; /* RELOAD sequence numbers to wait on */
static uint64_t reload_deadline_ms;	/* 0 = no reload in progress */

static void
usage(FILE *out)
{
	fprintf(out,
		"neki is a sharding router and connection pooler for PostgreSQL.\n\n"
		"Usage:\n"
		"  neki [OPTION]... CONFIG_FILE\n\n"
		"Options:\n"
		"  -d, --daemon         run in the background (needs logfile or syslog, and pidfile)\n"
		"  -R, --reboot         do an online restart: take over the running neki\n"
		"  -q, --quiet          do not log to stderr\n"
		"  -v, --verbose        more log output (repeat for more)\n"
		"  -u, --user=USERNAME  switch to USERNAME after binding sockets\n"
		"  -V, --version        show version and library versions, then exit\n"
		"  -h, --help           show this help, then exit\n");
}

static void
print_version(void)
{
	printf("%s\n", NK_VERSION_LINE);
	printf("libevent %s\n", event_get_version());
	printf("adns: c-ares %s\n", dns_library_version());
	printf("tls: %s\n", tls_library_version());
	printf("%s\n", parse_library_version());
}

/* Parse argv into opts; exits for -h, -V and usage errors. */
static void
parse_args(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "daemon", no_argument, NULL, 'd' }, { "reboot", no_argument, NULL, 'R' },
		{ "quiet", no_argument, NULL, 'q' }, { "verbose", no_argument, NULL, 'v' },
		{ "user", required_argument, NULL, 'u' }, { "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "dRqvu:Vh", longopts, NULL)) != -1) {
		switch (c) {
		case 'd': opts.daemon = true; break;
		case 'R': opts.reboot = true; break;
		case 'q': opts.quiet = true; break;
		case 'v': opts.verbose++; break;
		case 'u': opts.user = optarg; break;
		case 'V': print_version(); exit(0);
		case 'h': usage(stdout); exit(0);
		default:
			fprintf(stderr, "Try \"neki --help\" for more information.\n");
			exit(1);
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "neki: no configuration file specified\n");
		exit(1);
	}
	if (optind + 1 < argc) {
		fprintf(stderr, "neki: too many arguments: only one configuration file is accepted\n");
		exit(1);
	}
	opts.ini = argv[optind];
}

/* Load the ini and configure logging; exits on errors. */
static const struct cfg *
load_config(void)
{
	struct nk_error err;
	struct cfg *c = cfg_load(opts.ini, &err);

	if (c == NULL)
		fatal("%s", err.message);
	cfg_set_current(c);
	cfg_unref(c);
	if (!reload_configure_log(cfg_current(), opts.quiet, opts.verbose))
		fatal("could not open logfile \"%s\"", cfg_current()->proc.logfile);
	return cfg_current();
}

/* The user to switch to (-u or the user setting); resolved before anything is bound. */
struct run_user {
	const char *name;	/* NULL: stay who we are */
	uid_t uid;
	gid_t gid;
};

/*
 * -R: is there a process to take over? pgbouncer's refusals first (no Unix socket
 * directory, an abstract socket, sockets from systemd); with nobody on the Unix socket the
 * start goes on as a normal one.
 */
static void
check_reboot(const struct cfg *c)
{
	struct nk_error err;

	if (!opts.reboot)
		return;
	if (!takeover_possible(c, &err))
		fatal("%s", err.message);
	if (!takeover_old_alive(c)) {
		log_info("old process not found, try to continue normally");
		opts.reboot = false;
	}
}

/*
 * The start-up refusals, all before anything is bound or written: root without a user to
 * switch to, an unknown user, -d without its files, a live pidfile (but for -R: the old
 * process's, which goes away during the takeover).
 */
static void
check_startup(const struct cfg *c, struct run_user *ru)
{
	struct nk_error err;

	check_reboot(c);
	ru->name = opts.user ? opts.user : (c->proc.user && c->proc.user[0] ? c->proc.user : NULL);
	if (geteuid() == 0 && ru->name == NULL)
		fatal("neki should not run as root: use -u USER (or the user setting) to switch "
		      "to an unprivileged user");
	if (ru->name != NULL && !daemon_user_ids(ru->name, &ru->uid, &ru->gid, &err))
		fatal("%s", err.message);
	if (opts.daemon && (c->proc.pidfile == NULL || c->proc.pidfile[0] == '\0'))
		fatal("in daemon mode (-d) the pidfile setting is required");
	if (opts.daemon && (c->proc.logfile == NULL || c->proc.logfile[0] == '\0') && !c->log.syslog)
		fatal("in daemon mode (-d) a logfile or syslog is required");
	if (!opts.reboot && !daemon_pidfile_check(c->proc.pidfile, &err))
		fatal("%s", err.message);
	if (!tls_check(c, &err))
		fatal("TLS setup failed: %s", err.message);
}

/* A start-up failure after sockets were bound: remove what we created, then exit 1. */
static NK_NORETURN void
startup_fail(const char *msg)
{
	listen_close_all();
	listen_unlink_unix();
	daemon_pidfile_remove();
	fatal("%s", msg);
}

/* Slot <i> of n_children: the admin is the last one. */
static enum shm_proc_kind
slot_kind(unsigned i)
{
	return i + 1 == n_children ? SHM_PROC_ADMIN : SHM_PROC_WORKER;
}

/*
 * Post <cmd> to every child slot (a slot being restarted takes it at start); <seqs>
 * receives the sequence numbers to wait on (may be NULL).
 */
static void
post_all(enum shm_cmd cmd, uint64_t *seqs)
{
	static uint64_t scratch[SHM_MAX_PROCS];
	struct shm_msg m = { .cmd = (uint32_t)cmd };
	unsigned n = shm_mbox_broadcast(SHM_PROC_NONE, &m, seqs ? seqs : scratch);

	if (n < n_children)
		log_warn("%u child mailboxes are full, command %u not delivered there",
			 n_children - n, (unsigned)cmd);
}

/* In a freshly forked child: die with the master, restore signals, run the child. */
static NK_NORETURN void
child_start(unsigned i)
{
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) == -1 || getppid() != master_pid)
		_exit(1);
	/* terminal signals go to the whole process group; only the master acts on them */
	signal(SIGINT, SIG_IGN);
	signal(SIGQUIT, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGUSR1, SIG_IGN);
	signal(SIGUSR2, SIG_IGN);
	signal(SIGTERM, SIG_DFL);
	signal(SIGCHLD, SIG_DFL);
	sigprocmask(SIG_SETMASK, &orig_mask, NULL);
	fdchan_child_init(children[i].kind == SHM_PROC_ADMIN);
	takeover_keep_only(children[i].kind == SHM_PROC_WORKER ? (int)i : -1);
	if (children[i].kind == SHM_PROC_ADMIN)
		admin_main(i);
	worker_main(i);
}

/* Fork the child of slot <i>. A failed fork is retried like a crash. */
static void
spawn(unsigned i)
{
	struct child *ch = &children[i];
	pid_t pid;

	shm_proc_reset(i, ch->kind);
	ch->restart_at_ms = 0;
	ch->late = false;
	ch->started_ms = nk_now_ms();
	pid = fork();
	if (pid == -1) {
		log_error("could not fork %s %u: %s", shm_proc_kind_str(ch->kind), i,
			  strerror(errno));
		ch->restart_at_ms = nk_now_ms() + BACKOFF_MAX_MS;
		return;
	}
	if (pid == 0)
		child_start(i);
	ch->pid = pid;
	atomic_store(&shm_proc(i)->pid, (int32_t)pid);
	log_info("%s %u started (pid %d)", shm_proc_kind_str(ch->kind), i, (int)pid);
}

/* Describe a wait() status ("exited with status 1", "killed by signal 9"). */
static void
format_status(int status, char *buf, size_t len)
{
	if (WIFEXITED(status))
		snprintf(buf, len, "exited with status %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, len, "killed by signal %d (%s)%s", WTERMSIG(status),
			 strsignal(WTERMSIG(status)), WCOREDUMP(status) ? ", core dumped" : "");
	else
		snprintf(buf, len, "ended with wait status %d", status);
}

/* A child ended: give back its counters, and schedule a restart with backoff. */
static void
child_ended(unsigned i, int status)
{
	struct child *ch = &children[i];
	uint64_t now = nk_now_ms(), delay = 0;
	char what[96];
	pid_t pid;

	format_status(status, what, sizeof(what));
	pid = ch->pid;
	ch->pid = 0;
	shm_counter_reclaim(i);
	shm_wait_reclaim(i);
	shm_names_reclaim(i);
	atomic_store(&shm_proc(i)->pid, 0);
	if (state != MASTER_RUNNING) {
		log_info("%s %u (pid %d) %s", shm_proc_kind_str(ch->kind), i, (int)pid, what);
		return;
	}
	if (now - ch->started_ms >= CHILD_STABLE_MS) {
		ch->failures = 0;
	} else {
		ch->failures++;
		delay = (uint64_t)BACKOFF_FIRST_MS << (ch->failures < 10 ? ch->failures - 1 : 9);
		delay = delay > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : delay;
	}
	ch->restart_at_ms = now + delay;
	log_warn("%s %u (pid %d) %s; restarting in %.1f s", shm_proc_kind_str(ch->kind), i,
		 (int)pid, what, (double)delay / 1000.0);
}

/* waitpid() every ended child. */
static void
reap_children(void)
{
	for (;;) {
		int status;
		pid_t pid = waitpid(-1, &status, WNOHANG);

		if (pid <= 0)
			return;
		for (unsigned i = 0; i < n_children; i++) {
			if (children[i].pid == pid) {
				child_ended(i, status);
				break;
			}
		}
	}
}

/* Fork every child whose restart time has come; returns ms until the next one (or -1). */
static int64_t
restart_due(void)
{
	uint64_t now = nk_now_ms();
	int64_t next = -1;

	for (unsigned i = 0; i < n_children; i++) {
		struct child *ch = &children[i];

		if (ch->pid != 0 || ch->restart_at_ms == 0 || state != MASTER_RUNNING)
			continue;
		if (ch->restart_at_ms <= now) {
			if (paused) {
				struct shm_msg m = { .cmd = SHM_CMD_PAUSE };

				if (shm_mbox_post(i, &m) == 0)
					log_warn("could not tell the new %s %u to pause",
						 shm_proc_kind_str(ch->kind), i);
			}
			spawn(i);
		} else {
			int64_t left = (int64_t)(ch->restart_at_ms - now);

			next = next < 0 || left < next ? left : next;
		}
	}
	return next;
}

/* Number of children still alive. */
static unsigned
live_children(void)
{
	unsigned n = 0;

	for (unsigned i = 0; i < n_children; i++)
		n += children[i].pid != 0;
	return n;
}

/* Clients still connected to any child (what SIGTERM waits for). */
static int64_t
total_clients(void)
{
	int64_t n = 0;

	for (unsigned i = 0; i < n_children; i++)
		n += children[i].pid != 0 ? atomic_load(&shm_proc(i)->clients) : 0;
	return n;
}

/*
 * Remove what the master created in the file system and exit; after an online restart took
 * the sockets (SHOW FDS while suspended), the Unix socket file is the new process's.
 */
static NK_NORETURN void
master_exit(int status)
{
	listen_close_all();
	if (shm_handover_is_set())
		log_info("leaving the unix socket to the process that took over");
	else
		listen_unlink_unix();
	daemon_pidfile_remove();
	log_info("neki exiting");
	log_close();
	exit(status);
}

/* SIGQUIT, or a second SIGTERM/SIGINT: end every child now, then exit. */
static NK_NORETURN void
exit_immediately(void)
{
	uint64_t deadline = nk_now_ms() + KILL_GRACE_MS;

	sdnotify_stopping("exiting immediately");
	state = MASTER_EXITING;
	for (unsigned i = 0; i < n_children; i++) {
		if (children[i].pid != 0)
			kill(children[i].pid, SIGTERM);
	}
	while (live_children() > 0) {
		struct timespec ts = { 0, 10 * 1000 * 1000 };

		if (nk_now_ms() > deadline) {
			for (unsigned i = 0; i < n_children; i++) {
				if (children[i].pid != 0)
					kill(children[i].pid, SIGKILL);
			}
		}
		nanosleep(&ts, NULL);
		reap_children();
	}
	master_exit(0);
}

/* SIGTERM / SIGINT: stop listening and tell the children to exit when <mode> holds. */
static void
begin_shutdown(enum master_state mode, const char *what)
{
	log_info("%s", what);
	sdnotify_stopping(what);
	state = mode;
	listen_close_all();
	post_all(mode == MASTER_WAIT_CLIENTS ? SHM_CMD_SHUTDOWN_CLIENTS : SHM_CMD_SHUTDOWN_SERVERS,
		 NULL);
}

static void
on_sighup(void)
{
	log_info("got SIGHUP, re-reading config");
	sdnotify_reloading();
	if (!reload_config(NULL)) {
		log_warn("keeping the previous configuration");
		sdnotify_ready("reload failed, running with the previous configuration");
		return;
	}
	reload_check_tls();
	post_all(SHM_CMD_RELOAD, reload_seqs);
	reload_deadline_ms = nk_now_ms() + RELOAD_WAIT_MS;
}

/* After a reload: READY=1 once every child has acted on it (or the wait timed out). */
static void
check_reload_done(void)
{
	if (reload_deadline_ms == 0)
		return;
	if (shm_mbox_broadcast_done(reload_seqs)) {
		log_info("configuration reloaded in every process");
	} else if (nk_now_ms() >= reload_deadline_ms) {
		log_warn("not every process acknowledged the reload within %d s", RELOAD_WAIT_MS / 1000);
	} else {
		return;
	}
	reload_deadline_ms = 0;
	sdnotify_ready("configuration reloaded");
}

/* SUSPEND is in force: every live worker reports it. */
static bool
workers_suspended(void)
{
	unsigned n = 0;

	for (unsigned i = 0; i < n_children; i++) {
		if (children[i].kind != SHM_PROC_WORKER || children[i].pid == 0)
			continue;
		if (atomic_load(&shm_proc(i)->state) != SHM_PST_SUSPENDED)
			return false;
		n++;
	}
	return n > 0;
}

/* Act on one signal taken by sigtimedwait. */
static void
handle_signal(int sig)
{
	switch (sig) {
	case SIGHUP:
		on_sighup();
		break;
	case SIGTERM:
	case SIGINT:
		if (state == MASTER_RUNNING && workers_suspended()) {
			log_info("got SIG%s: suspend was in progress, going down immediately",
				 sigabbrev_np(sig));
			exit_immediately();
		}
		if (state != MASTER_RUNNING) {
			log_info("got SIG%s during shutdown, exiting immediately", sigabbrev_np(sig));
			exit_immediately();
		}
		if (sig == SIGTERM)
			begin_shutdown(MASTER_WAIT_CLIENTS, "got SIGTERM, shutting down, waiting for all clients to disconnect");
		else
			begin_shutdown(MASTER_WAIT_SERVERS, "got SIGINT, shutting down, waiting for all servers connections to be released");
		break;
	case SIGQUIT:
		log_info("got SIGQUIT, fast exit");
		exit_immediately();
	case SIGUSR1:
		log_info("got SIGUSR1, pausing all activity");
		paused = true;
		post_all(SHM_CMD_PAUSE, NULL);
		break;
	case SIGUSR2:
		if (state != MASTER_RUNNING) {
			log_info("got SIGUSR2 while shutting down, ignoring");
			break;
		}
		log_info("got SIGUSR2, continuing from PAUSE");
		paused = false;
		post_all(SHM_CMD_RESUME, NULL);
		break;
	default:
		break;		/* SIGCHLD: reaping happens every round */
	}
}

/* Send READY=1 once every child reports running. */
static void
check_ready(void)
{
	char status[128];

	if (ready_sent)
		return;
	for (unsigned i = 0; i < n_children; i++) {
		uint32_t st = atomic_load(&shm_proc(i)->state);

		if (children[i].pid == 0 || (st != SHM_PST_RUNNING && st != SHM_PST_PAUSED &&
					     st != SHM_PST_SUSPENDED))
			return;
	}
	ready_sent = true;
	snprintf(status, sizeof(status), "%u workers and the admin process are running",
		 n_children - 1);
	log_info("%s", status);
	sdnotify_ready(status);
}

/*
 * Report a child whose heartbeat (one a second from its loop) is overdue: its loop is
 * stuck, or it was stopped. It is not killed: its clients would go with it.
 */
static void
check_heartbeats(void)
{
	uint64_t now = nk_now_ms();

	for (unsigned i = 0; i < n_children; i++) {
		struct child *ch = &children[i];
		uint64_t beat = atomic_load(&shm_proc(i)->heartbeat_ms);
		bool late = ch->pid != 0 && beat != 0 && now - beat > HEARTBEAT_LATE_MS;

		if (late && !ch->late)
			log_warn("%s %u (pid %d) has not run its loop for %.1f s",
				 shm_proc_kind_str(ch->kind), i, (int)ch->pid,
				 (double)(now - beat) / 1000.0);
		else if (!late && ch->late && ch->pid != 0)
			log_info("%s %u (pid %d) runs its loop again", shm_proc_kind_str(ch->kind),
				 i, (int)ch->pid);
		ch->late = late;
	}
}

/* During shutdown: exit when no child is left; say what we wait for now and then. */
static void
check_shutdown(uint64_t *last_status)
{
	uint64_t now = nk_now_ms();

	if (state == MASTER_RUNNING)
		return;
	if (live_children() == 0)
		master_exit(0);
	if (now - *last_status >= STATUS_EVERY_MS) {
		*last_status = now;
		log_info("shutdown: waiting for %lld clients on %u processes",
			 (long long)total_clients(), live_children());
	}
}

/* The master's loop: wait for a signal or the next deadline, then act. */
static NK_NORETURN void
supervise(const sigset_t *sigs)
{
	uint64_t last_status = nk_now_ms();

	for (;;) {
		int64_t next = restart_due();
		int64_t wait_ms = !ready_sent || reload_deadline_ms ? 10
				  : (next >= 0 && next < 1000 ? next : 1000);
		struct timespec ts = { wait_ms / 1000, (long)(wait_ms % 1000) * 1000000L };
		int sig = sigtimedwait(sigs, NULL, &ts);

		if (sig > 0)
			handle_signal(sig);
		reap_children();
		check_ready();
		check_reload_done();
		check_heartbeats();
		check_shutdown(&last_status);
	}
}

/* Block the signals the loop takes with sigtimedwait; ignore SIGPIPE. */
static void
block_signals(sigset_t *sigs)
{
	static const int taken[] = { SIGHUP, SIGTERM, SIGINT, SIGQUIT, SIGUSR1, SIGUSR2, SIGCHLD };

	sigemptyset(sigs);
	for (size_t i = 0; i < NK_ARRAY_LEN(taken); i++)
		sigaddset(sigs, taken[i]);
	signal(SIGPIPE, SIG_IGN);
	if (sigprocmask(SIG_BLOCK, sigs, &orig_mask) == -1)
		fatal("could not block signals: %s", strerror(errno));
}

/*
 * Create shm and bind every listener (before any fork or user switch); for an online
 * restart the listeners come from the old process instead (takeover_begin).
 */
static void
setup_resources(const struct cfg *c)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	struct nk_error err;
	char msg[256];

	n_children = (unsigned)(c->neki.workers > 0 ? c->neki.workers : (ncpu > 0 ? ncpu : 1)) + 1;
	if (n_children > SHM_MAX_PROCS)
		fatal("workers = %u is too many (at most %d)", n_children - 1, SHM_MAX_PROCS - 1);
	if (!shm_create((size_t)c->neki.shm_size, n_children, msg, sizeof(msg)))
		fatal("%s", msg);
	if (!nk_hash_secret_init())	/* (the children inherit it: one secret per neki) */
		log_warn("no random bytes for the hash secret: %s", strerror(errno));
	if (!opts.reboot && !listen_open_all(c, &err))
		fatal("%s", err.message);
	if (!admin_forward_open(c->proc.listen_port, &err) || !fdchan_open(&err))
		fatal("%s", err.message);
	for (unsigned i = 0; i < n_children; i++)
		children[i].kind = slot_kind(i);
}

/*
 * -R: become the old process's user now (its console trusts the user pgbouncer of its own
 * uid), then SUSPEND it and take its sockets.
 */
static void
take_over(const struct cfg *c, const struct run_user *ru, const sigset_t *sigs)
{
	struct nk_error err;

	if (!opts.reboot)
		return;
	if (ru->name != NULL) {
		daemon_give_file(c->proc.logfile, ru->uid, ru->gid);
		if (!daemon_switch_user(ru->name, &err))
			fatal("%s", err.message);
	}
	takeover_begin(c, sigs);
}

/*
 * -d, pidfile, user switch, in that order (the pidfile holds the daemon's pid). For -R, the
 * old process is shut down first (its pidfile must be gone).
 */
static void
become_master(const struct cfg *c, const struct run_user *ru, const sigset_t *sigs)
{
	struct nk_error err;

	if (opts.daemon)
		daemon_detach();
	master_pid = getpid();
	if (opts.reboot)
		takeover_finish(c, sigs);
	if (!daemon_pidfile_write(c->proc.pidfile, &err))
		startup_fail(err.message);
	if (ru->name == NULL || opts.reboot)
		return;
	listen_chown_unix(ru->uid);
	daemon_give_file(c->proc.logfile, ru->uid, ru->gid);
	if (!daemon_switch_user(ru->name, &err))
		startup_fail(err.message);
}

/* What the process runtime (src/proc/) tells the sessions of every process. */
static const struct proc_hooks session_hooks = {
	.pools_reload = session_reload_pools,
	.servers_reconnect = session_reconnect_all,
};

int
main(int argc, char **argv)
{
	const struct cfg *c;
	struct run_user ru;
	sigset_t sigs;

	proc_set_hooks(&session_hooks);
	parse_args(argc, argv);
	c = load_config();
	check_startup(c, &ru);
	log_info("process up: %s, libevent %s, adns: c-ares %s, tls: %s", NK_VERSION_LINE,
		 event_get_version(), dns_library_version(), tls_library_version());
	sdnotify_init();
	block_signals(&sigs);
	setup_resources(c);
	take_over(c, &ru, &sigs);
	become_master(c, &ru, &sigs);
	if (opts.reboot)
		takeover_assign(c, n_children - 1);
	for (unsigned i = 0; i < n_children; i++)
		spawn(i);
	takeover_release();	/* the workers have their shares */
	supervise(&sigs);
}
