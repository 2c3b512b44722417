/*
 * session_sp.h - search_path changes of a pass-through session, transactional
 * (src/worker/session_sp.c): what each statement, portal and batch in flight does to it,
 * applied when its transaction commits, undone when it rolls back.
 */
#ifndef NEKI_WORKER_SESSION_SP_H
#define NEKI_WORKER_SESSION_SP_H

#include "neki/base.h"

#include "neki/varcache.h"

struct link;
struct query_effects;
struct sbuf_pkt;
struct session;

#define SP_NAMES_MAX 8		/* statements / portals that change search_path, per client */
#define SP_STAGED_MAX 32	/* statements sent and not yet committed or rolled back */

/* One statement's bearing on search_path: SET value (NULL arg: reset) or a savepoint op. */
struct sp_effect {
	enum sp_op_kind kind;
	char *arg;			/* owned where stored */
};

struct sp_entry {
	bool used;
	char *name;			/* owned: client-side statement / portal name */
	struct sp_effect eff;
};

struct sp_staged {
	uint64_t gen;			/* sync point whose ReadyForQuery ends its batch */
	struct sp_effect eff;		/* arg owned */
};

struct sess_sp {
	struct sp_entry stmts[SP_NAMES_MAX];
	struct sp_entry portals[SP_NAMES_MAX];
	struct sp_staged staged[SP_STAGED_MAX];
	size_t n;			/* staged[0..n) */
	bool saw_commit, saw_rollback, saw_error; /* since the last ReadyForQuery 'I' */
};

/* A Query was sent (after syncs_sent counted it): stage its search_path change. */
void sp_on_query(struct session *s, const struct query_effects *fx);
/* Does a client message of <type> need sp_on_client_ext() (whole packet)? */
bool sp_wants(const struct session *s, uint8_t type);
/* A whole Parse / Bind / Execute / Close packet (<pkt>, <len> bytes) is being sent. */
void sp_on_client_ext(struct session *s, const uint8_t *pkt, uint32_t len);
/* A server CommandComplete / ErrorResponse; a ReadyForQuery with <status> on link <l>. */
void sp_on_server(struct session *s, const struct sbuf_pkt *pkt);
void sp_on_ready(struct session *s, struct link *l, char status);
/* Forget staged changes (new link, broken link) / everything (session end). */
void sp_reset(struct session *s);
void sp_cleanup(struct session *s);

#endif /* NEKI_WORKER_SESSION_SP_H */
