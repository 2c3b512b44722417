/*
 * neki/proc.h - the child processes' runtime and the configuration reload (src/proc/),
 * below the worker and the admin: it reaches the sessions only through struct proc_hooks.
 *
 * Every child of the master (the workers and the admin) runs child_run(): its own
 * libevent loop that accepts on the inherited listening sockets of its kind, beats
 * a heartbeat into its shm slot, publishes its stats, acts on the commands in its
 * shm mailbox (reload, pause, resume, shutdown modes, cancel forwarding) and exits
 * when told to or when the master is gone. What a process does with an accepted
 * connection is its child_accept_fn.
 *
 * Connection handlers report to the runtime with child_client_opened()/_closed(),
 * which keep the client gauge in shm (what SIGTERM's "wait for clients" watches).
 */
#ifndef NEKI_PROC_H
#define NEKI_PROC_H

#include "neki/base.h"
#include "neki/net.h"
#include "neki/shm.h"

struct event_base;

/* Called for each accepted, non-blocking connection <fd> that arrived on <l>. */
typedef void (*child_accept_fn)(int fd, const struct listener *l);

/* Called for a forwarded CancelRequest (SHM_CMD_CANCEL): <key> is the BackendKeyData. */
typedef void (*child_cancel_fn)(const uint8_t *key, size_t len);

/* What one child process is. */
struct child_spec {
	unsigned slot;			/* its shm process slot */
	enum shm_proc_kind kind;	/* worker or admin */
	enum listen_kind listens;	/* which listeners it accepts on */
	child_accept_fn on_accept;	/* takes ownership of the accepted fd */
	void (*on_start)(void);		/* NULL, or called once the loop exists, before serving */
	child_cancel_fn on_cancel;	/* NULL: forwarded cancels are ignored */
	/* Another process woke this one (shm_wait_wake): look at the pools. NULL: ignored. */
	void (*on_pool_wake)(void);
	/*
	 * Pooling commands (PAUSE, RESUME, KILL, KILL_CLIENT, RECONNECT, DISABLE, ENABLE,
	 * WAIT_CLOSE). on_control returns false when the command waits: its acknowledgement
	 * (and every later one) is held until control_settled() returns true. NULL: acked at once.
	 */
	bool (*on_control)(const struct shm_msg *m);
	bool (*control_settled)(void);
	/* Server links left (SHUTDOWN WAIT_FOR_SERVERS exits at 0); NULL: the shm gauge. */
	size_t (*server_links)(void);
	/* SHUTDOWN WAIT_FOR_SERVERS began: stop handing out links. NULL: nothing to do. */
	void (*on_stop_servers)(void);
	/*
	 * SHM_CMD_LIST: append the console rows of this process (shm_list_put_row) to <buf>
	 * (<cap> bytes, *<len> used). False when some did not fit. NULL: no rows.
	 */
	bool (*on_list)(void *buf, size_t cap, size_t *len);
	/* SHM_CMD_FDS: send this process's sockets to the admin (SHOW FDS). NULL: ignored. */
	void (*on_fds)(const struct shm_msg *m);
	/* The oldest topology revision a running statement was planned with, 0 when none:
	 * the process reports no newer revision than that as switched to. NULL: none. */
	uint64_t (*oldest_planned_revision)(void);
};

/* Run the child's loop until it is told to exit; never returns. */
NK_NORETURN void child_run(const struct child_spec *spec);

/* The child's event base (borrowed; valid inside child_run). */
struct event_base *child_base(void);

/* Connection handlers: one more / one fewer client on this process. */
void child_client_opened(void);
void child_client_closed(void);

/* This process's stats totals (published into its shm slot once a second). */
struct shm_stats *child_stats(void);

/*
 * Record the published topology revision as the one this process runs (its shm slot's
 * revision_seen, what wait_for_data_topology waits on). Sessions call it at statement
 * boundaries; the runtime calls it on SHM_CMD_TOPOLOGY and every tick.
 */
void child_switch_topology(void);

/*
 * SUSPEND: stop (<pause>) or start again taking connections from the listeners (they stay
 * open: the kernel queues new connections meanwhile).
 */
void child_accept_pause(bool pause);

/* True once a shutdown command arrived (handlers should not start new work). */
bool child_is_stopping(void);

/*
 * What the runtime asks of the client sessions of this process (the worker's pools). The
 * master sets them once, before forking (main.c); a NULL member is not called.
 */
struct proc_hooks {
	/* The configuration in force changed: reconfigure the pools (session_reload_pools). */
	void (*pools_reload)(void);
	/* The server TLS settings changed: reconnect every server link (session_reconnect_all). */
	void (*servers_reconnect)(void);
};

/* Install <h> (copied). */
void proc_set_hooks(const struct proc_hooks *h);

/* Call the pools_reload hook, if any. */
void proc_pools_reload(void);

/*
 * Re-read the configuration file of the configuration in force and make it current,
 * reopening the log. Settings that cannot change at run time keep their old values
 * (with a warning). Returns false (old config kept, error logged) when the file is
 * invalid. Used by the master on SIGHUP and by children on SHM_CMD_RELOAD. A child also
 * rebuilds its TLS contexts: *<tls_ok> (may be NULL) says whether that worked (the old
 * ones stay in use otherwise; the master logs why, see reload_check_tls).
 */
NK_MUSTCHECK bool reload_config(bool *tls_ok);

/*
 * Rebuild this child's TLS contexts from the configuration in force (a change of the server
 * side reconnects every server link). False when that failed: the old ones stay, noted at
 * DEBUG only (the process that checked the change logs it).
 */
bool reload_tls_contexts(void);

/*
 * The master, after a reload (it holds no TLS contexts): check the TLS settings and files
 * of the configuration in force; on failure log pgbouncer's two lines, "TLS setup failed:
 * <reason>" and "TLS configuration could not be reloaded, keeping old configuration", once
 * for all the processes (which keep their old contexts).
 */
void reload_check_tls(void);

/*
 * Configure logging from <c> plus the command line's <quiet> and <verbose> (which
 * reload_config keeps using). Returns false when the logfile cannot be opened.
 */
NK_MUSTCHECK bool reload_configure_log(const struct cfg *c, bool quiet, int verbose);

/*
 * Configure logging again from the configuration in force and the command line's flags
 * (a console SET of verbose or a syslog setting takes effect at once). False as above.
 */
NK_MUSTCHECK bool reload_apply_log(void);

#endif /* NEKI_PROC_H */
