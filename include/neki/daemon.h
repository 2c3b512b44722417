/*
 * neki/daemon.h - process plumbing for the master (src/common/daemon.c): the pidfile,
 * going to the background (-d) and dropping root (-u / the user setting).
 */
#ifndef NEKI_DAEMON_H
#define NEKI_DAEMON_H

#include "neki/base.h"
#include "neki/error.h"

/*
 * Refuse to start when <path> names a live process (pgbouncer: "pidfile exists,
 * another instance running?"); remove it when it is stale (no such process, or a
 * zombie: a killed master not reaped yet), logging "stale pidfile, removing" as
 * pgbouncer does. False and <err> filled when it is live or cannot be read or removed.
 */
NK_MUSTCHECK bool daemon_pidfile_check(const char *path, struct nk_error *err);

/*
 * Write this process's pid to <path> (created exclusively) and remember the path for
 * daemon_pidfile_remove(). Relative paths are made absolute first.
 */
NK_MUSTCHECK bool daemon_pidfile_write(const char *path, struct nk_error *err);

/* Remove the pidfile written by daemon_pidfile_write (no-op when none). */
void daemon_pidfile_remove(void);

/*
 * Go to the background: fork, setsid, fork again; stdin/stdout/stderr go to
 * /dev/null. Only the grandchild returns; the original process exits 0.
 */
void daemon_detach(void);

/* Look up the uid and gid of user <name>; false and <err> filled when unknown. */
NK_MUSTCHECK bool daemon_user_ids(const char *name, uid_t *uid, gid_t *gid,
				  struct nk_error *err);

/*
 * Give <path> (the logfile, the pidfile) to <uid>/<gid> when root owns it, so the
 * process can still reopen and remove it after dropping root. NULL/"" is a no-op.
 */
void daemon_give_file(const char *path, uid_t uid, gid_t gid);

/*
 * Switch to user <name> (its uid, gid and supplementary groups), handing it the
 * pidfile first. False and <err> filled when the user does not exist or a set*id
 * call fails.
 */
NK_MUSTCHECK bool daemon_switch_user(const char *name, struct nk_error *err);

/*
 * Raise this process's soft limit of open files to its hard limit (best effort, logged when
 * it fails): the online restart holds every socket of the old process in one process.
 */
void daemon_raise_fd_limit(void);

#endif /* NEKI_DAEMON_H */
