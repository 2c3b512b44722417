/*
 * session_state.h - groups of a client session's state kept in structs of their own
 * (struct session, session_int.h, embeds them).
 */
#ifndef NEKI_WORKER_SESSION_STATE_H
#define NEKI_WORKER_SESSION_STATE_H

#include "neki/base.h"

#include <sys/socket.h>

#include "neki/scram.h"
#include "session_sp.h"

struct prep_stmt;

/* ---- server requests whose responses are tracked (session_fwd.c) ---- */

enum req_kind {
	REQ_PARSE = 0,		/* answered by ParseComplete '1' */
	REQ_CLOSE = 1,		/* answered by CloseComplete '3' */
};

struct req {
	uint8_t kind;			/* enum req_kind */
	bool swallow;			/* injected by neki: the client never sees the answer */
	uint64_t gen;			/* sync batch it belongs to */
	struct prep_stmt *st;		/* REQ_PARSE injected: counted reference, NULL otherwise */
};

struct req_queue {
	struct req *q;			/* owned ring */
	size_t head, n, cap;
};

/* Where a client connects from (SHOW CLIENTS, hba). */
struct sess_peer {
	char addr[64];			/* peer address text, "unix" for Unix sockets */
	int port;			/* peer port (Unix: the listen port, as pgbouncer shows) */
	int peer_pid;			/* Unix: the peer's pid (SO_PEERCRED), 0 when unknown */
	bool is_unix;
	struct sockaddr_storage peer;	/* for hba */
};

/* A login's authentication exchange (session_auth.c). */
struct sess_auth {
	uint8_t md5_salt[4];
	struct scram_server scram;	/* SCRAM exchange state */
	struct scram_keys scram_keys;	/* recovered from a successful SCRAM login */
	bool scram_active;
	char hba_map[64];		/* map= of the hba rule that matched ("" = none) */
};

/* Protocol bookkeeping while a link is held (session_fwd.c): sync points sent and
 * answered, the requests whose answers are tracked, search_path changes in flight. */
struct sess_sync {
	uint64_t syncs_sent;		/* sync points (Sync, Query, FunctionCall) sent */
	uint64_t z_recv;		/* ReadyForQuery received */
	uint64_t swallow_until;		/* swallow server messages while z_recv < this */
	bool unsynced;			/* extended messages sent since the last Sync */
	bool in_copy_in;		/* server sent CopyInResponse, client streams data */
	char tx_status;			/* last ReadyForQuery status seen by the client */
	struct req_queue reqs;		/* tracked Parse/Close responses */
	struct sess_sp sp_state;	/* search_path changes in flight (session_sp.c) */
};

/* A session's times (monotonic microseconds) and its timeouts' cancels. */
struct sess_clock {
	uint64_t connect_us;
	uint64_t activity_us;		/* last client packet */
	uint64_t query_start_us;	/* first packet of the current query, 0 = none */
	uint64_t xact_start_us;		/* first query of the current transaction, 0 = none */
	uint64_t wait_start_us;		/* started waiting for a link */
	bool query_timed_out;		/* cancel sent for query_timeout */
	bool cancel_inflight;
};

/* What the admin process did to a session (session_admin.c) and the online restart
 * (session_adopt.c). */
struct sess_admin_state {
	bool console;			/* a client of the console databases pgbouncer / neki */
	bool suspended;			/* SUSPEND stopped reading it (and its link) */
	bool handed;			/* SHOW FDS sent its socket (and its link's) to the admin:
					 * the online restart takes it; cleared by RESUME */
	bool fence;			/* adopted with its link: the empty query sent after what
					 * the old process had in flight has not been answered */
	bool fence_empty;		/* ... its EmptyQueryResponse came, its ReadyForQuery next */
};

#endif /* NEKI_WORKER_SESSION_STATE_H */
