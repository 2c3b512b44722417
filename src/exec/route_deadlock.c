/*
 * route_deadlock.c - a route's side of the distributed deadlock detector (src/admin/
 * deadlock.c): the links it lists, and the cancel that breaks a wait cycle across shards.
 *
 * No Postgres server sees a cycle whose waits are on different servers (client A's
 * statement waits on shard 1 for B, B's waits on shard 2 for A), so each waits until a
 * lock_timeout or statement_timeout, if any. The admin process finds such cycles from the
 * shards' pg_locks and the links every worker lists, and asks the worker holding the
 * client it chose to cancel the statement that waits. That statement's backend answers
 * 57014 "canceling statement due to user request"; the client gets what Postgres sends
 * the victim of a deadlock it detects itself: 40P01 "deadlock detected", with a DETAIL
 * naming the cycle, in a transaction that is now aborted (the client rolls back and
 * retries, as it does after a deadlock of one server).
 * Entry points: route_foreach_link(), route_cancel_deadlocked(), route_deadlock_error().
 */
#include "neki/base.h"

#include <stdlib.h>
#include <string.h>

#include "neki/exec.h"
#include "neki/link.h"
#include "route_int.h"
#include "route_client.h"
#include "route_deadlock.h"

/* route_foreach_link: see neki/exec.h. */
void
route_foreach_link(const struct route *r,
		   void (*fn)(void *arg, const char *uid, uint32_t backend_pid), void *arg)
{
	for (uint32_t i = 0; i < r->nsh; i++)
		if (r->sh[i].link != NULL)
			fn(arg, r->sh[i].uid, link_backend_pid(r->sh[i].link));
}

/* route_cancel_deadlocked: see neki/exec.h. */
bool
route_cancel_deadlocked(struct route *r, const char *uid, uint32_t backend_pid,
			const char *detail)
{
	if (!r->busy)
		return false;
	for (uint32_t i = 0; i < r->nsh; i++) {
		struct rshard *sh = &r->sh[i];
		char *copy;

		if (sh->link == NULL || !sh->target || !sh->sent || sh->done ||
		    strcmp(sh->uid, uid) != 0 || link_backend_pid(sh->link) != backend_pid)
			continue;
		if ((copy = strdup(detail)) == NULL)
			return false;
		free(sh->deadlock);
		sh->deadlock = copy;
		route_client_cancel_link(r, sh->link);
		return true;
	}
	return false;
}

/* route_deadlock_error: see route_deadlock.h. */
bool
route_deadlock_error(const struct rshard *sh, struct nk_error *err)
{
	if (sh->deadlock == NULL || strcmp(err->sqlstate, ERRCODE_QUERY_CANCELED) != 0)
		return false;
	nk_error_set(err, ERRCODE_T_R_DEADLOCK_DETECTED, "deadlock detected");
	nk_error_detail(err, "%s", sh->deadlock);
	nk_error_hint(err, "The cycle spans shards, so no one Postgres server could detect it; "
		      "neki canceled this statement. Roll back and retry the transaction.");
	return true;
}
