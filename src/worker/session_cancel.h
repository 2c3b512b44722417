/*
 * session_cancel.h - cancel requests (src/worker/session_cancel.c): the BackendKeyData a
 * client gets, a CancelRequest that arrives (for a session of this worker, another one or a
 * peer neki), and the cancels the worker sends its servers.
 */
#ifndef NEKI_WORKER_SESSION_CANCEL_H
#define NEKI_WORKER_SESSION_CANCEL_H

#include "neki/base.h"

struct link;
struct session;

/* Choose the session's BackendKeyData (worker index encoded in the pid). */
void sess_cancel_key_init(struct session *s);
/* A CancelRequest packet arrived on a new connection (body: pid, key). */
void sess_cancel_request(uint32_t pid, uint32_t key);
/* Send a CancelRequest for the query running on <s>'s link (query_timeout, forwarded cancel). */
void sess_cancel_backend(struct session *s);
/*
 * SHOW PEER_POOLS figures of this worker, one call per peer forwarded to: requests in flight,
 * queued, sent and waiting for the peer to close, connecting (or resolving).
 */
void sess_cancel_peer_rows(void (*fn)(void *arg, int peer, int active, int waiting, int sent,
				      int login), void *arg);
/* The session janitor's tick (monotonic <now>): drop the peer forwards queued longer than
 * cancel_wait_timeout. */
void sess_cancel_janitor(uint64_t now);
/* Send a CancelRequest for the query running on <l> (its backend's own pid and key). */
void sess_cancel_link(struct link *l);

#endif /* NEKI_WORKER_SESSION_CANCEL_H */
