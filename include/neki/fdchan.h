/*
 * neki/fdchan.h - the descriptor channel from the workers to the admin process
 * (src/proc/fdchan.c): one AF_UNIX datagram pair the master opens before it forks; every
 * worker shares the sending end, the admin reads the other. A message is a fixed header,
 * a payload and up to FDPASS_MAX_FDS descriptors (neki/fdpass.h), whole or not at all.
 *
 * Two uses:
 *   - FDCHAN_CONSOLE: a worker hands the admin a console client it accepted on the main
 *     port's Unix socket (user pgbouncer with neki's uid), so that the admin serves it on
 *     its own socket, where SHOW FDS can pass descriptors as pgbouncer does;
 *   - FDCHAN_ROWS / FDCHAN_END: a worker's answer to SHOW FDS (SHM_CMD_FDS): its rows
 *     (struct fdrow, with the worker's own fd numbers) and one descriptor per row, then
 *     the end of its answer.
 * Both ends are the same build: the payloads are plain structs.
 */
#ifndef NEKI_FDCHAN_H
#define NEKI_FDCHAN_H

#include "neki/base.h"

#include "neki/error.h"
#include "neki/fdpass.h"
#include "neki/fdrow.h"

#define FDCHAN_MAGIC UINT32_C(0x4e4b4643)	/* "NKFC" */
#define FDCHAN_NAME_MAX 64
#define FDCHAN_ROWS_MAX FDPASS_MAX_FDS		/* rows in one message: one fd each */

enum fdchan_kind {
	FDCHAN_CONSOLE = 1,	/* payload struct fdchan_console, one fd */
	FDCHAN_ROWS = 2,	/* payload n struct fdrow, n fds */
	FDCHAN_END = 3,		/* no payload: n = rows sent in all for <req> */
};

struct fdchan_hdr {
	uint32_t magic;		/* FDCHAN_MAGIC */
	uint16_t kind;		/* enum fdchan_kind */
	uint16_t slot;		/* the sending worker's shm slot */
	uint64_t req;		/* ROWS, END: the SHOW FDS request answered */
	uint32_t n;		/* ROWS: rows here; END: rows sent in all */
	uint32_t flags;		/* END: FDCHAN_END_* */
};

#define FDCHAN_END_INCOMPLETE 1u	/* some rows could not be sent (logged by the worker) */

/* A console client handed to the admin: who logged in (the worker checked the socket). */
struct fdchan_console {
	uint64_t id;			/* its socket id (SHOW CLIENTS), kept */
	char user[FDCHAN_NAME_MAX];
	char db[FDCHAN_NAME_MAX];
	char app_name[FDCHAN_NAME_MAX];
};

/* The largest message: a header and FDCHAN_ROWS_MAX rows. */
#define FDCHAN_MSG_MAX (sizeof(struct fdchan_hdr) + FDCHAN_ROWS_MAX * sizeof(struct fdrow))

/* Master, before forking: create the pair. False with <err> filled. */
NK_MUSTCHECK bool fdchan_open(struct nk_error *err);

/* In a child: keep the end its kind uses (<admin>: the receiving one), close the other. */
void fdchan_child_init(bool admin);

/*
 * Worker: send <kind> with <payload> (<len> bytes) and the <nfds> descriptors of <fds> (the
 * caller keeps its copies). The admin reads as it goes; while its queue is full this waits,
 * at most FDCHAN_SEND_WAIT_MS. False (logged) when nothing was sent.
 */
#define FDCHAN_SEND_WAIT_MS 5000
NK_MUSTCHECK bool fdchan_send(struct fdchan_hdr *h, const void *payload, size_t len,
			      const int *fds, size_t nfds);

/* Admin: the receiving socket to watch (-1 when the channel is not open). */
int fdchan_recv_fd(void);

/*
 * Admin: take one message into <buf> (FDCHAN_MSG_MAX bytes) and its descriptors into <fds>
 * (FDPASS_MAX_FDS), checked against the header: returns the header (in <buf>), NULL when
 * nothing waits or the message was malformed (its descriptors closed, logged).
 */
const struct fdchan_hdr *fdchan_recv(void *buf, int *fds, size_t *nfds);

#endif /* NEKI_FDCHAN_H */
