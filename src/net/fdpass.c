/*
 * fdpass.c - sendmsg/recvmsg with SCM_RIGHTS (see neki/fdpass.h). No event loop here: the
 * callers poll their sockets with their own events and call these when readable (or, for
 * fdpass_send_wait, wait here in poll for a full queue to drain).
 */
#include "neki/base.h"
#include "neki/clock.h"
#include "neki/fdpass.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define FDPASS_WAIT_NAP_MS 5	/* fdpass_send_wait: longest sleep between two tries */

/* Control buffer for FDPASS_MAX_FDS descriptors, aligned as struct cmsghdr needs. */
union fdpass_cbuf {
	char buf[CMSG_SPACE(sizeof(int) * FDPASS_MAX_FDS)];
	struct cmsghdr align;
};

bool
fdpass_pair(int sv[2])
{
	return socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0;
}

bool
fdpass_send(int sock, const void *msg, size_t len, const int *fds, size_t nfds)
{
	union fdpass_cbuf cbuf;
	struct iovec iov = { .iov_base = (void *)msg, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	if (len == 0 || nfds > FDPASS_MAX_FDS) {
		errno = EINVAL;
		return false;
	}
	if (nfds > 0) {
		struct cmsghdr *cm;

		memset(&cbuf, 0, sizeof(cbuf));
		mh.msg_control = cbuf.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(cm), fds, sizeof(int) * nfds);
	}
	do {
		n = sendmsg(sock, &mh, MSG_NOSIGNAL);
	} while (n == -1 && errno == EINTR);
	if (n == -1)
		return false;
	if ((size_t)n != len) {
		errno = EMSGSIZE;	/* a stream socket took part of it: the caller's protocol
					 * is broken, the socket must be closed */
		return false;
	}
	return true;
}

bool
fdpass_send_wait(int sock, const void *msg, size_t len, const int *fds, size_t nfds,
		 int timeout_ms)
{
	int64_t deadline = (int64_t)nk_now_ms() + timeout_ms;

	for (;;) {
		struct pollfd pfd = { .fd = sock, .events = POLLOUT };
		int64_t left;

		if (fdpass_send(sock, msg, len, fds, nfds))
			return true;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return false;
		left = deadline - (int64_t)nk_now_ms();
		if (left <= 0) {
			errno = ETIMEDOUT;
			return false;
		}
		/*
		 * Short naps: a datagram socket polls writable only once its send buffer is
		 * three quarters empty, while a send fits as soon as one message left.
		 */
		if (left > FDPASS_WAIT_NAP_MS)
			left = FDPASS_WAIT_NAP_MS;
		if (poll(&pfd, 1, (int)left) == -1 && errno != EINTR)
			return false;
	}
}

/* Take the descriptors of <mh>'s SCM_RIGHTS messages into <fds>; close those beyond <maxfds>. */
static bool
fdpass_take_fds(struct msghdr *mh, int *fds, size_t maxfds, size_t *nfds)
{
	bool fit = true;

	*nfds = 0;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm != NULL; cm = CMSG_NXTHDR(mh, cm)) {
		size_t n;
		const unsigned char *p;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		p = CMSG_DATA(cm);
		for (size_t i = 0; i < n; i++) {
			int fd;

			memcpy(&fd, p + i * sizeof(int), sizeof(int));
			if (*nfds < maxfds) {
				fds[(*nfds)++] = fd;
			} else {
				close(fd);
				fit = false;
			}
		}
	}
	return fit;
}

ssize_t
fdpass_recv(int sock, void *buf, size_t cap, int *fds, size_t maxfds, size_t *nfds)
{
	union fdpass_cbuf cbuf;
	struct iovec iov = { .iov_base = buf, .iov_len = cap };
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = cbuf.buf, .msg_controllen = sizeof(cbuf.buf),
	};
	ssize_t n;
	bool fit;

	*nfds = 0;
	do {
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	} while (n == -1 && errno == EINTR);
	if (n == -1)
		return -1;
	fit = fdpass_take_fds(&mh, fds, maxfds, nfds);
	if (!fit || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0) {
		for (size_t i = 0; i < *nfds; i++)
			close(fds[i]);
		*nfds = 0;
		errno = EMSGSIZE;
		return -1;
	}
	return n;
}
