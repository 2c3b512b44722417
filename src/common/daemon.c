/*
 * daemon.c - pidfile, daemonizing and dropping privileges, for the master only.
 *
 * The pidfile follows pgbouncer: a live pid in it stops a second instance, a stale
 * one (no such process, or a zombie: a SIGKILLed master its parent has not reaped yet)
 * is removed, and the file is removed again at exit. Entry points:
 * daemon_pidfile_check(), daemon_pidfile_write(), daemon_detach(), daemon_switch_user().
 */
#include "neki/base.h"

#include "neki/daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "neki/log.h"

static char pidfile_path[PATH_MAX];	/* "" when this process wrote none */

/* Read the pid stored in <path>: >0 found, 0 absent, -1 error (errno set). */
static long
read_pid(const char *path)
{
	char buf[32];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd == -1)
		return errno == ENOENT ? 0 : -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n == -1)
		return -1;
	buf[n] = '\0';
	return atol(buf) > 0 ? atol(buf) : 0;
}

/*
 * Is <pid> a live process? kill(pid, 0) also succeeds for a zombie (dead, not reaped yet:
 * a SIGKILLed master whose parent, systemd or a shell, has not waited for it), so the
 * state letter of /proc/<pid>/stat decides: Z (zombie) and X (dead) are not alive.
 */
static bool
pid_is_alive(long pid)
{
	char path[64], buf[512], *close_paren;
	ssize_t n;
	int fd;

	if (kill((pid_t)pid, 0) == -1 && errno != EPERM)
		return false;
	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd == -1)
		return errno != ENOENT;	/* no /proc: trust kill() */
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return true;
	buf[n] = '\0';
	close_paren = strrchr(buf, ')');	/* "pid (comm) S ...": comm may hold spaces */
	return close_paren == NULL || close_paren[1] != ' ' ||
	       (close_paren[2] != 'Z' && close_paren[2] != 'X');
}

bool
daemon_pidfile_check(const char *path, struct nk_error *err)
{
	long pid;

	if (path == NULL || path[0] == '\0')
		return true;
	pid = read_pid(path);
	if (pid == -1)
		return nk_error_set(err, ERRCODE_CONFIG_FILE_ERROR,
				    "could not read pidfile \"%s\": %s", path,
				    strerror(errno));
	if (pid == 0 && access(path, F_OK) == -1)
		return true;
	if (pid > 0 && pid_is_alive(pid))
		return nk_error_set(err, ERRCODE_CONFIG_FILE_ERROR,
				    "pidfile exists, another instance running? (\"%s\" holds pid %ld)",
				    path, pid);
	log_info("stale pidfile, removing");
	if (unlink(path) == -1 && errno != ENOENT)
		return nk_error_set(err, ERRCODE_CONFIG_FILE_ERROR,
				    "could not remove stale pidfile \"%s\": %s",
				    path, strerror(errno));
	return true;
}

/* Make <path> absolute (the daemon may change directory later) into pidfile_path. */
static bool
remember_path(const char *path, struct nk_error *err)
{
	char cwd[PATH_MAX];
	int n;

	if (path[0] == '/') {
		n = snprintf(pidfile_path, sizeof(pidfile_path), "%s", path);
	} else {
		if (getcwd(cwd, sizeof(cwd)) == NULL)
			return nk_error_set(err, ERRCODE_CONFIG_FILE_ERROR,
					    "could not get the current directory: %s",
					    strerror(errno));
		n = snprintf(pidfile_path, sizeof(pidfile_path), "%s/%s", cwd, path);
	}
	if (n < 0 || (size_t)n >= sizeof(pidfile_path)) {
		pidfile_path[0] = '\0';
		return nk_error_set(err, ERRCODE_CONFIG_FILE_ERROR,
				    "pidfile path \"%s\" is too long", path);
	}
	return true;
}

bool
daemon_pidfile_write(const char *path, struct nk_error *err)
{
	char buf[32];
	int fd, n;

	if (path == NULL || path[0] == '\0')
		return true;
	if (!remember_path(path, err))
		return false;
	fd = open(pidfile_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd == -1) {
		nk_error_set(err, ERRCODE_CONFIG_FILE_ERROR,
			     "could not create pidfile \"%s\": %s", path,
			     strerror(errno));
		pidfile_path[0] = '\0';
		return false;
	}
	n = snprintf(buf, sizeof(buf), "%d\n", (int)getpid());
	if (write(fd, buf, (size_t)n) != n) {
		nk_error_set(err, ERRCODE_CONFIG_FILE_ERROR,
			     "could not write pidfile \"%s\": %s", path,
			     strerror(errno));
		close(fd);
		daemon_pidfile_remove();
		return false;
	}
	close(fd);
	return true;
}

void
daemon_pidfile_remove(void)
{
	if (pidfile_path[0] != '\0')
		unlink(pidfile_path);
	pidfile_path[0] = '\0';
}

/* Fork; the parent exits 0 at once, the child returns. */
static void
fork_and_leave(void)
{
	pid_t pid = fork();

	if (pid == -1) {
		perror("neki: fork");
		exit(1);
	}
	if (pid > 0)
		_exit(0);
}

void
daemon_detach(void)
{
	int fd;

	fork_and_leave();
	if (setsid() == -1) {
		perror("neki: setsid");
		exit(1);
	}
	fork_and_leave();
	fd = open("/dev/null", O_RDWR);
	if (fd == -1)
		return;
	dup2(fd, STDIN_FILENO);
	dup2(fd, STDOUT_FILENO);
	dup2(fd, STDERR_FILENO);
	if (fd > STDERR_FILENO)
		close(fd);
}

bool
daemon_user_ids(const char *name, uid_t *uid, gid_t *gid, struct nk_error *err)
{
	struct passwd *pw;

	errno = 0;
	pw = getpwnam(name);
	if (pw == NULL)
		return nk_error_set(err, ERRCODE_CONFIG_FILE_ERROR,
				    "user \"%s\" does not exist%s%s", name,
				    errno ? ": " : "", errno ? strerror(errno) : "");
	*uid = pw->pw_uid;
	*gid = pw->pw_gid;
	return true;
}

void
daemon_give_file(const char *path, uid_t uid, gid_t gid)
{
	struct stat st;

	if (path == NULL || path[0] == '\0' || stat(path, &st) == -1 || st.st_uid != 0)
		return;
	if (chown(path, uid, gid) == -1)
		fprintf(stderr, "neki: could not give \"%s\" to uid %d: %s\n", path, (int)uid,
			strerror(errno));
}

bool
daemon_switch_user(const char *name, struct nk_error *err)
{
	uid_t uid;
	gid_t gid;

	if (!daemon_user_ids(name, &uid, &gid, err))
		return false;
	if (getuid() == uid && geteuid() == uid)
		return true;
	daemon_give_file(pidfile_path, uid, gid);
	if (initgroups(name, gid) == -1 || setgid(gid) == -1 || setuid(uid) == -1)
		return nk_error_set(err, ERRCODE_CONFIG_FILE_ERROR,
				    "could not switch to user \"%s\": %s", name,
				    strerror(errno));
	return true;
}

void
daemon_raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == -1 || rl.rlim_cur == rl.rlim_max)
		return;
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) == -1)
		log_warn("could not raise the open files limit: %s", strerror(errno));
}
