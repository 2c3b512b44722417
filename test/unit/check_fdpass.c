/*
 * check_fdpass.c - tests of src/net/fdpass.c over real AF_UNIX sockets: a datagram pair
 * carries a payload with descriptors that work on the other side (a pipe written through
 * the received end), several senders share one pair, an empty queue is EAGAIN, a message
 * too long or with too many descriptors is refused whole with its descriptors closed, and a
 * stream socketpair carries a descriptor with the first byte of its payload; a send to a full
 * queue waits for the reader (or times out).
 */
#include "neki/base.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "neki/fdpass.h"
#include "suites.h"

/* True when <fd> is an open descriptor. */
static bool
fd_is_open(int fd)
{
	return fcntl(fd, F_GETFD) != -1;
}

START_TEST(test_pair_carries_payload_and_fds)
{
	int sv[2], p[2], got[FDPASS_MAX_FDS];
	char buf[64], c = 0;
	size_t nfds = 99;
	ssize_t n;

	ck_assert(fdpass_pair(sv));
	ck_assert_int_eq(pipe(p), 0);
	ck_assert(fdpass_send(sv[1], "link", 4, &p[1], 1));
	close(p[1]);	/* the sender's copy goes; the one in flight stays open */
	n = fdpass_recv(sv[0], buf, sizeof(buf), got, FDPASS_MAX_FDS, &nfds);
	ck_assert_int_eq(n, 4);
	ck_assert(memcmp(buf, "link", 4) == 0);
	ck_assert_uint_eq(nfds, 1);
	ck_assert(fcntl(got[0], F_GETFD) & FD_CLOEXEC);
	ck_assert_int_eq(write(got[0], "x", 1), 1);
	ck_assert_int_eq(read(p[0], &c, 1), 1);
	ck_assert_int_eq(c, 'x');
	close(got[0]);
	/* nothing more: EAGAIN, not a block */
	ck_assert_int_eq(fdpass_recv(sv[0], buf, sizeof(buf), got, FDPASS_MAX_FDS, &nfds), -1);
	ck_assert_int_eq(errno, EAGAIN);
	ck_assert_uint_eq(nfds, 0);
	close(p[0]);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

START_TEST(test_shared_sender_keeps_messages_whole)
{
	int sv[2], other, got[FDPASS_MAX_FDS];
	char buf[16];
	size_t nfds;

	ck_assert(fdpass_pair(sv));
	other = dup(sv[1]);	/* a second process's copy of the sending end */
	ck_assert(fdpass_send(sv[1], "one", 3, NULL, 0));
	ck_assert(fdpass_send(other, "second", 6, NULL, 0));
	ck_assert_int_eq(fdpass_recv(sv[0], buf, sizeof(buf), got, FDPASS_MAX_FDS, &nfds), 3);
	ck_assert_int_eq(fdpass_recv(sv[0], buf, sizeof(buf), got, FDPASS_MAX_FDS, &nfds), 6);
	ck_assert(memcmp(buf, "second", 6) == 0);
	close(other);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

START_TEST(test_oversized_message_refused_whole)
{
	int sv[2], p[2], got[1], fds[2];
	char big[100] = { 0 }, buf[10];
	size_t nfds = 7;

	ck_assert(fdpass_pair(sv));
	ck_assert_int_eq(pipe(p), 0);
	/* too long for the reader's buffer: refused, its descriptor closed */
	ck_assert(fdpass_send(sv[1], big, sizeof(big), &p[1], 1));
	ck_assert_int_eq(fdpass_recv(sv[0], buf, sizeof(buf), got, 1, &nfds), -1);
	ck_assert_int_eq(errno, EMSGSIZE);
	ck_assert_uint_eq(nfds, 0);
	/* more descriptors than the reader takes: refused, all of them closed */
	fds[0] = p[1];
	fds[1] = p[1];
	ck_assert(fdpass_send(sv[1], "ab", 2, fds, 2));
	close(p[1]);
	ck_assert_int_eq(fdpass_recv(sv[0], buf, sizeof(buf), got, 1, &nfds), -1);
	ck_assert_int_eq(errno, EMSGSIZE);
	/* every copy of the write end is gone: the pipe reads end of file */
	ck_assert_int_eq(read(p[0], buf, 1), 0);
	/* bad arguments */
	ck_assert(!fdpass_send(sv[1], "", 0, NULL, 0));
	ck_assert_int_eq(errno, EINVAL);
	close(p[0]);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

START_TEST(test_stream_socket_carries_fd_with_payload)
{
	int sv[2], p[2], got[FDPASS_MAX_FDS];
	char buf[32];
	size_t nfds;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	ck_assert_int_eq(pipe(p), 0);
	ck_assert(fdpass_send(sv[1], "row-1", 5, &p[0], 1));
	ck_assert_int_eq(fdpass_recv(sv[0], buf, sizeof(buf), got, FDPASS_MAX_FDS, &nfds), 5);
	ck_assert_uint_eq(nfds, 1);
	ck_assert(fd_is_open(got[0]));
	close(got[0]);
	close(sv[1]);
	ck_assert_int_eq(fdpass_recv(sv[0], buf, sizeof(buf), got, FDPASS_MAX_FDS, &nfds), 0);
	close(p[0]);
	close(p[1]);
	close(sv[0]);
}
END_TEST

/* Fill the queue of <sv>'s datagram pair until EAGAIN; the number of messages queued. */
static int
fill_queue(int sv[2])
{
	int n = 0;

	while (fdpass_send(sv[1], "fill", 4, NULL, 0))
		n++;
	ck_assert_int_eq(errno, EAGAIN);
	return n;
}

START_TEST(test_send_wait_for_a_full_queue)
{
	int sv[2], got[FDPASS_MAX_FDS], status;
	char buf[16];
	size_t nfds;
	pid_t pid;

	ck_assert(fdpass_pair(sv));
	ck_assert_int_gt(fill_queue(sv), 0);
	/* nobody reads: the wait ends with ETIMEDOUT and nothing sent */
	ck_assert(!fdpass_send_wait(sv[1], "late", 4, NULL, 0, 50));
	ck_assert_int_eq(errno, ETIMEDOUT);
	/* a reader takes one message after a while: the waiting send goes through */
	pid = fork();
	ck_assert_int_ne(pid, -1);
	if (pid == 0) {
		struct timespec ts = { 0, 100 * 1000 * 1000 };

		nanosleep(&ts, NULL);
		_exit(fdpass_recv(sv[0], buf, sizeof(buf), got, FDPASS_MAX_FDS, &nfds) == 4 ? 0 : 1);
	}
	ck_assert(fdpass_send_wait(sv[1], "late", 4, NULL, 0, 5000));
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

Suite *
fdpass_suite(void)
{
	Suite *s = suite_create("fdpass");
	TCase *tc = tcase_create("fdpass");

	tcase_add_test(tc, test_pair_carries_payload_and_fds);
	tcase_add_test(tc, test_shared_sender_keeps_messages_whole);
	tcase_add_test(tc, test_oversized_message_refused_whole);
	tcase_add_test(tc, test_stream_socket_carries_fd_with_payload);
	tcase_add_test(tc, test_send_wait_for_a_full_queue);
	suite_add_tcase(s, tc);
	return s;
}
