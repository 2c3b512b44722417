/*
 * fdchan.c - the workers' descriptor channel to the admin process (see neki/fdchan.h): the
 * datagram pair, sending with a bounded wait, receiving with the header checked against
 * what arrived. Entry points: fdchan_open(), fdchan_child_init(), fdchan_send(),
 * fdchan_recv().
 */
#include "neki/base.h"

#include "neki/fdchan.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "neki/log.h"

static int chan[2] = { -1, -1 };	/* [0] the admin reads, [1] the workers send */

bool
fdchan_open(struct nk_error *err)
{
	if (fdpass_pair(chan))
		return true;
	return nk_error_set(err, ERRCODE_SYSTEM_ERROR,
			    "could not open the workers' channel to the admin "
			    "process: %s", strerror(errno));
}

void
fdchan_child_init(bool admin)
{
	int *other = &chan[admin ? 1 : 0];

	if (*other != -1)
		close(*other);
	*other = -1;
}

bool
fdchan_send(struct fdchan_hdr *h, const void *payload, size_t len, const int *fds, size_t nfds)
{
	static uint8_t msg[FDCHAN_MSG_MAX];

	NK_ASSERT(sizeof(*h) + len <= sizeof(msg));
	if (chan[1] == -1) {
		log_error("the channel to the admin process is not open");
		return false;
	}
	h->magic = FDCHAN_MAGIC;
	memcpy(msg, h, sizeof(*h));
	if (len > 0)
		memcpy(msg + sizeof(*h), payload, len);
	if (fdpass_send_wait(chan[1], msg, sizeof(*h) + len, fds, nfds, FDCHAN_SEND_WAIT_MS))
		return true;
	log_error("could not send %zu descriptors to the admin process: %s", nfds,
		  strerror(errno));
	return false;
}

int
fdchan_recv_fd(void)
{
	return chan[0];
}

/* Does the payload of <h> (<len> bytes in all) with <nfds> descriptors match its kind? */
static bool
fdchan_well_formed(const struct fdchan_hdr *h, size_t len, size_t nfds)
{
	size_t body = len - sizeof(*h);

	if (h->magic != FDCHAN_MAGIC)
		return false;
	switch ((enum fdchan_kind)h->kind) {
	case FDCHAN_CONSOLE:
		return body == sizeof(struct fdchan_console) && nfds == 1;
	case FDCHAN_ROWS:
		return h->n > 0 && h->n <= FDCHAN_ROWS_MAX && body == h->n * sizeof(struct fdrow) &&
		       nfds == h->n;
	case FDCHAN_END:
		return body == 0 && nfds == 0;
	}
	return false;
}

const struct fdchan_hdr *
fdchan_recv(void *buf, int *fds, size_t *nfds)
{
	ssize_t n = fdpass_recv(chan[0], buf, FDCHAN_MSG_MAX, fds, FDPASS_MAX_FDS, nfds);

	if (n == -1) {
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			log_warn("the workers' channel: %s", strerror(errno));
		return NULL;
	}
	if ((size_t)n >= sizeof(struct fdchan_hdr) &&
	    fdchan_well_formed(buf, (size_t)n, *nfds))
		return buf;
	log_warn("the workers' channel: a malformed message of %zd bytes with %zu descriptors "
		 "was dropped", n, *nfds);
	for (size_t i = 0; i < *nfds; i++)
		close(fds[i]);
	*nfds = 0;
	return NULL;
}
