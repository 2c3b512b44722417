/*
 * route_release.c - the end of a routed session's use of its shard links: an exec's
 * per-shard state cleared, the links given back to their pools after a transaction (or
 * closed at a disconnect when the server is not ready), a cancel sent to the shards an exec
 * waits on, and what a session holds or waits for (SHOW / pool accounting). Entry points:
 * route_exec_reset(), route_release_links(), route_drop_links(), route_cancel(),
 * route_pool_use().
 */
#include "neki/base.h"

#include <stdlib.h>
#include <string.h>

#include "neki/link.h"
#include "neki/pool.h"
#include "route_int.h"
#include "route_client.h"
#include "route_copy.h"
#include "route_exec.h"
#include "route_merge.h"
#include "route_pin.h"
#include "route_sets.h"

/* route_pool_use: see route_int.h. */
void
route_pool_use(const struct route *r, const struct spool *sp, struct route_use *u)
{
	memset(u, 0, sizeof(*u));
	for (uint32_t i = 0; i < r->nsh; i++) {
		const struct rshard *sh = &r->sh[i];

		if (sp != NULL && sh->sp != sp)
			continue;
		if (sh->waiting && (!u->waiting || sh->waiter.since_us < u->wait_since_us)) {
			u->waiting = true;
			u->wait_since_us = sh->waiter.since_us;
		}
		if (sh->link != NULL && u->link == NULL)
			u->link = sh->link;
	}
}

/* ---- cancel ---- */

void
route_cancel(struct route *r)
{
	if (!r->busy)
		return;		/* nothing running: nothing to cancel, as Postgres */
	r->cancel_pending = true;
	for (uint32_t i = 0; i < r->nsh; i++) {
		struct rshard *sh = &r->sh[i];

		if (sh->link != NULL && sh->target && sh->sent && !sh->done)
			route_client_cancel_link(r, sh->link);
	}
}

/* ---- release ---- */

void
route_exec_reset(struct route *r)
{
	for (uint32_t i = 0; r->x.shards_used && i < r->nsh; i++) {	/* (none used: all clear) */
		struct rshard *sh = &r->sh[i];

		sh->target = sh->sent = sh->done = sh->failed = sh->held = false;
		sh->prep_used = false;
		route_prep_wait_clear(sh);
		free(sh->sql);
		sh->sql = NULL;
		free(sh->deadlock);
		sh->deadlock = NULL;
		free(sh->ext_msg);
		sh->ext_msg = NULL;
		sh->ext_len = 0;
		sh->count = sh->a_rows = sh->a_sent_us = sh->a_done_us = 0;
		sh->counted = false;
		sh->tag[0] = '\0';
		for (uint32_t k = 0; k < sh->nrows; k++)
			free(sh->rows[k].msg);
		free(sh->rows);
		sh->rows = NULL;
		sh->nrows = sh->caprows = 0;
	}
	r->x.shards_used = false;
	r->x.ntg = r->x.pos = 0;
	r->x.cout.on = false;
	r->seq.setvals = NULL;
	r->seq.nsetvals = 0;
	free(r->x.bind_err);
	r->x.bind_err = NULL;
	route_merge_free(r);
	route_copy_free(r);
}

void
route_release_links(struct route *r)
{
	for (uint32_t i = 0; i < r->nsh; i++) {
		struct rshard *sh = &r->sh[i];
		struct link *l = sh->link;

		if (l == NULL || sh->swallow > 0 || route_pin_held(sh) || sh->holds > 0)
			continue;	/* (held: LISTEN or advisory locks, route_pin.c; a WITH
					 * HOLD cursor, route_portal.c) */
		sh->link = NULL;
		sh->in_tx = false;
		route_give_back(sh, l);	/* (reset when the session's SETs are on it) */
	}
}

void
route_drop_links(struct route *r)
{
	for (uint32_t i = 0; i < r->nsh; i++) {
		struct rshard *sh = &r->sh[i];
		struct link *l = sh->link;

		if (sh->waiting)
			pool_cancel_wait(&sh->waiter);
		sh->waiting = false;
		sh->link = NULL;
		if (l == NULL)
			continue;
		if (r->busy && sh->target && sh->sent && !sh->done)
			route_client_cancel_link(r, l);	/* stop the shard's part too */
		if (route_pin_held(sh))		/* its LISTEN and locks end with the session */
			link_close(l, true, "client disconnect while the server held its LISTEN "
				   "or advisory locks");
		else if (r->busy || sh->swallow > 0 || sh->holds > 0 || link_tx_status(l) != 'I')
			link_close(l, true, "client disconnect while server was not ready");
		else
			route_give_back(sh, l);
	}
}
