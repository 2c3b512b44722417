/*
 * neki/plan_cursor.h - cursors through the router (src/router/plan_cursor.c): the query a
 * DECLARE names, where a cursor stands, and the steps a FETCH / MOVE runs, as Postgres moves
 * a portal. Pure.
 */
#ifndef NEKI_PLAN_CURSOR_H
#define NEKI_PLAN_CURSOR_H

#include "neki/base.h"

#include "neki/parse_kinds.h"

/* The text of the query of DECLARE <s> (stmt->cursor->op STMT_CUR_DECLARE): borrowed. */
const char *plan_cursor_query(const struct stmt *s);

/* Where a cursor stands, as Postgres keeps a portal's position. */
struct plan_cursor_pos {
	bool at_start;		/* nothing fetched yet, or moved back before the first row */
	bool at_end;		/* moved past the last row */
	uint64_t pos;		/* rows before the current one (1 = on the first row) */
};

enum plan_fetch_op {
	PLAN_FETCH_FORWARD = 0,	/* run forward <count> rows */
	PLAN_FETCH_BACKWARD,	/* run backward <count> rows (needs a scrollable cursor) */
	PLAN_FETCH_REWIND,	/* back before the first row (needs one unless at the start) */
};

struct plan_fetch_step {
	enum plan_fetch_op op;
	int64_t count;		/* rows; STMT_FETCH_ALL: as many as there are */
	bool to_client;		/* the statement's result (FETCH's rows); else skipped */
};

/* How one FETCH / MOVE moves a cursor: at most three steps run in order; the command tag
 * counts the rows of the last one, or <fixed> when that is not negative (MOVE 0, MOVE
 * BACKWARD ALL: the steps then count for nothing). */
struct plan_fetch {
	struct plan_fetch_step steps[3];
	uint32_t nsteps;
	int64_t fixed;
};

/*
 * The steps of FETCH / MOVE (<is_move>) <dir> <count> from position <pos>, as Postgres runs
 * a cursor fetch (ABSOLUTE: rewind and go forward, or move relative when that is shorter;
 * a zero count re-fetches the current row). Pure.
 */
void plan_fetch_plan(const struct plan_cursor_pos *pos, enum stmt_fetch_dir dir, int64_t count,
		     bool is_move, struct plan_fetch *out);

/*
 * <pos> after one step: <op> asked for <count> rows (STMT_FETCH_ALL: all, 0: none) and
 * <n> came (fewer than asked: the end, or the start going backward).
 */
void plan_cursor_moved(struct plan_cursor_pos *pos, enum plan_fetch_op op, int64_t count,
		       uint64_t n);

#endif /* NEKI_PLAN_CURSOR_H */
