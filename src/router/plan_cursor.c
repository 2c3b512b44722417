/*
 * plan_cursor.c - cursors in the planner: DECLARE plans its query as plan.inner (where the
 * cursor's rows come from: one shard, or several merged by the router), FETCH / MOVE /
 * CLOSE are the router's (PLAN_ACT_CURSOR). Also the movement rules of a fetch, the way
 * Postgres runs one on a portal (ABSOLUTE, RELATIVE, a zero count, MOVE BACKWARD ALL), so
 * a cursor the router keeps over several shards moves exactly like one on a single server.
 * Pure. Entry points: plan_cursor(), plan_cursor_query(), plan_fetch_plan(),
 * plan_cursor_moved().
 */
#include "neki/base.h"

#include "neki/plan_cursor.h"
#include "plan_int.h"

#include <string.h>

/* plan_cursor: see plan_int.h. */
bool
plan_cursor(struct pctx *c)
{
	const struct stmt_cursor *cur = c->s->cursor;
	struct plan *ip;

	c->out->kind = PLAN_ROUTER;
	c->out->op = PLAN_OP_NONE;
	c->out->action = PLAN_ACT_CURSOR;
	c->out->level = PLAN_FANOUT_SINGLE;
	if (cur->op != STMT_CUR_DECLARE)
		return true;
	if (!cur->query || !(ip = rarena_alloc(c->a, sizeof(*ip))))
		return nk_error_oom(c->err);
	/* the query is planned as if it ran by itself (fan-out limit included); what it
	 * would read first is read first for the DECLARE (route_subq.c) */
	if (!plan_build(c->a, cur->query, c->in, ip, c->err)) {
		c->out->materialize = ip->materialize;
		c->out->broadcast = ip->broadcast;
		return false;
	}
	c->out->inner = ip;
	return true;
}

/* plan_cursor_query: see neki/plan_cursor.h. */
const char *
plan_cursor_query(const struct stmt *s)
{
	size_t len = strlen(s->sql);

	return s->sql + (s->cursor->query_start < len ? s->cursor->query_start : len);
}

static void
step(struct plan_fetch *f, enum plan_fetch_op op, int64_t count, bool result)
{
	struct plan_fetch_step *s = &f->steps[f->nsteps++];

	s->op = op;
	s->count = count;
	s->to_client = result;
}

/* ABSOLUTE n: n > 0 rewinds and goes forward to row n-1 (or moves relative from where the
 * cursor is when that is less than halfway back), then fetches one row forward; n < 0 goes
 * to the end and backs up; 0 rewinds and fetches nothing. */
static void
fetch_absolute(const struct plan_cursor_pos *pos, int64_t count, struct plan_fetch *f)
{
	if (count == 0) {
		step(f, PLAN_FETCH_REWIND, 0, false);
		step(f, PLAN_FETCH_FORWARD, 0, true);
		return;
	}
	if (count < 0) {
		step(f, PLAN_FETCH_FORWARD, STMT_FETCH_ALL, false);
		if (count < -1)
			step(f, PLAN_FETCH_BACKWARD, -count - 1, false);
		step(f, PLAN_FETCH_BACKWARD, 1, true);
		return;
	}
	if ((uint64_t)(count - 1) <= pos->pos / 2 || pos->pos >= (uint64_t)INT64_MAX) {
		step(f, PLAN_FETCH_REWIND, 0, false);
		if (count > 1)
			step(f, PLAN_FETCH_FORWARD, count - 1, false);
	} else {
		int64_t at = (int64_t)pos->pos + (pos->at_end ? 1 : 0);

		if (count <= at)
			step(f, PLAN_FETCH_BACKWARD, at - count + 1, false);
		else if (count > at + 1)
			step(f, PLAN_FETCH_FORWARD, count - at - 1, false);
	}
	step(f, PLAN_FETCH_FORWARD, 1, true);
}

/* plan_fetch_plan: see neki/plan_cursor.h. */
void
plan_fetch_plan(const struct plan_cursor_pos *pos, enum stmt_fetch_dir dir, int64_t count,
		bool is_move, struct plan_fetch *out)
{
	bool forward = true;

	memset(out, 0, sizeof(*out));
	out->fixed = -1;
	switch (dir) {
	case STMT_FETCH_ABSOLUTE:
		fetch_absolute(pos, count, out);
		return;
	case STMT_FETCH_RELATIVE:
		if (count != 0) {
			enum plan_fetch_op op = count > 0 ? PLAN_FETCH_FORWARD :
						PLAN_FETCH_BACKWARD;
			int64_t n = count > 0 ? count : -count;

			if (n > 1)
				step(out, op, n - 1, false);
			step(out, op, 1, true);
			return;
		}
		break;		/* RELATIVE 0 is FORWARD 0 */
	case STMT_FETCH_BACKWARD:
		forward = count < 0;
		count = count < 0 ? -count : count;
		break;
	default:
		forward = count >= 0;
		count = count < 0 ? -count : count;
		break;
	}
	if (count == 0) {	/* the current row again, if the cursor is on one */
		bool on_row = !pos->at_start && !pos->at_end;

		if (is_move) {
			out->fixed = on_row ? 1 : 0;
		} else if (on_row) {
			step(out, PLAN_FETCH_BACKWARD, 1, false);
			step(out, PLAN_FETCH_FORWARD, 1, true);
		} else {
			step(out, forward ? PLAN_FETCH_FORWARD : PLAN_FETCH_BACKWARD, 0, true);
		}
		return;
	}
	if (!forward && count == STMT_FETCH_ALL && is_move) {	/* a rewind */
		out->fixed = (int64_t)(pos->pos > 0 && !pos->at_end ? pos->pos - 1 : pos->pos);
		step(out, PLAN_FETCH_REWIND, 0, false);
		return;
	}
	step(out, forward ? PLAN_FETCH_FORWARD : PLAN_FETCH_BACKWARD, count, true);
}

/* plan_cursor_moved: see neki/plan_cursor.h. */
void
plan_cursor_moved(struct plan_cursor_pos *pos, enum plan_fetch_op op, int64_t count,
		  uint64_t n)
{
	bool all = count == STMT_FETCH_ALL;

	if (op == PLAN_FETCH_REWIND) {
		pos->at_start = true;
		pos->at_end = false;
		pos->pos = 0;
	} else if (op == PLAN_FETCH_FORWARD) {
		if (pos->at_end || count <= 0)
			return;		/* no movement */
		if (n > 0)
			pos->at_start = false;
		if (all || n < (uint64_t)count)
			pos->at_end = true;
		pos->pos += n;
	} else {
		if (pos->at_start || count <= 0)
			return;
		if (n > 0 && pos->at_end) {
			pos->at_end = false;
			pos->pos++;	/* the end counts as one past the last row */
		}
		if (all || n < (uint64_t)count) {
			pos->at_start = true;
			pos->pos = 0;
		} else {
			pos->pos -= n;
		}
	}
}
