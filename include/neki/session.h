/*
 * neki/session.h - the client session of a worker process (src/worker/session*.c).
 *
 * Everything between an accepted client socket and a pooled backend link: startup packet,
 * client authentication, the welcome (ParameterStatus, BackendKeyData), pool modes, session
 * state kept across links (varcache, prepared statements), timeouts, limits, cancel, stats.
 * The worker's child runtime hands every accepted connection to session_accept() and every
 * forwarded CancelRequest (SHM_CMD_CANCEL from its mailbox) to session_cancel_forwarded().
 */
#ifndef NEKI_SESSION_H
#define NEKI_SESSION_H

#include "neki/base.h"

struct listener;

/* Take the accepted, non-blocking client socket <fd> from listener <l>; owns <fd> from here. */
void session_accept(int fd, const struct listener *l);

/*
 * A CancelRequest for one of this worker's sessions arrived through the shm mailbox:
 * <key> holds the 8 bytes of the client's BackendKeyData (pid, key, network order).
 * Unknown keys and idle sessions are ignored, as Postgres does.
 */
void session_cancel_forwarded(const uint8_t *key, size_t len);

/* Number of client sessions alive in this worker (SHOW CLIENTS, shutdown). */
size_t session_count(void);

#endif /* NEKI_SESSION_H */
