/*
 * neki/fdpass.h - descriptors passed between processes over AF_UNIX sockets (SCM_RIGHTS).
 *
 * One message is a byte payload plus up to FDPASS_MAX_FDS descriptors. On a datagram socket
 * (fdpass_pair) a message is one datagram: it arrives whole or not at all, and several
 * processes may share the sending end. On a stream socket (the console's Unix socket, for
 * the -R takeover) the descriptors travel with the first byte of the payload. Received
 * descriptors are close-on-exec. Users: the pools' link handoff between workers and the
 * online restart (SHOW FDS).
 */
#ifndef NEKI_FDPASS_H
#define NEKI_FDPASS_H

#include "neki/base.h"

#define FDPASS_MAX_FDS 16	/* descriptors in one message */

/*
 * A non-blocking, close-on-exec AF_UNIX SOCK_DGRAM pair in <sv>: messages sent on sv[1]
 * arrive on sv[0]. False with errno set.
 */
NK_MUSTCHECK bool fdpass_pair(int sv[2]);

/*
 * Send <len> bytes of <msg> (at least 1) and the <nfds> descriptors of <fds> (the caller
 * keeps its copies) on <sock>. False with errno set (EAGAIN: the receiver's queue is full);
 * nothing was sent then, on a datagram socket.
 */
NK_MUSTCHECK bool fdpass_send(int sock, const void *msg, size_t len, const int *fds,
			      size_t nfds);

/*
 * fdpass_send() that waits while the receiver's queue is full (EAGAIN), at most <timeout_ms>
 * in all (poll for writability in between): for a sender that must not lose the message and
 * may block its loop that long. False with errno set (ETIMEDOUT when the queue stayed full).
 */
NK_MUSTCHECK bool fdpass_send_wait(int sock, const void *msg, size_t len, const int *fds,
				   size_t nfds, int timeout_ms);

/*
 * Receive one message on <sock>: its bytes into <buf> (<cap>), its descriptors into <fds>
 * (room for <maxfds>) with their number in *<nfds>. Returns the byte count, 0 at the end of
 * a stream, -1 with errno set (EAGAIN: nothing waits). A datagram longer than <cap> or with
 * more descriptors than <maxfds> is refused (EMSGSIZE) and the descriptors it carried are
 * closed: a message is never taken in part.
 */
ssize_t fdpass_recv(int sock, void *buf, size_t cap, int *fds, size_t maxfds, size_t *nfds);

#endif /* NEKI_FDPASS_H */
