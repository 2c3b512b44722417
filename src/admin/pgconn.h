/*
 * pgconn.h - libpq on the admin's event loop (pgconn.c, the only file that includes
 * libpq-fe.h): one asynchronous connection per struct pgc, queries queued in order.
 */
#ifndef NEKI_ADMIN_PGCONN_H
#define NEKI_ADMIN_PGCONN_H

#include "neki/base.h"

#include "neki/catalog.h"
#include "neki/error.h"

struct event_base;

struct pgc;
struct pgc_res;

/* A query finished: <res> (borrowed, valid during the call) or <err> (then res is NULL). */
typedef void (*pgc_done_fn)(void *arg, const struct pgc_res *res, const struct nk_error *err);
/* A NOTIFY arrived on a LISTENed channel. */
typedef void (*pgc_notify_fn)(void *arg, const char *channel, const char *payload);
/* The connection came up (<up> true) or was lost / failed (false). */
typedef void (*pgc_state_fn)(void *arg, bool up);

/* A connection named <name> (for logs and errors) on <base>; connects on first use. */
struct pgc *pgc_new(struct event_base *base, const char *name);
/* Close the connection, fail queued queries, free <c>. Callbacks are not called after. */
void pgc_free(struct pgc *c);
/* pgc_free() from the loop: safe inside one of <c>'s own callbacks; no callback after. */
void pgc_free_later(struct pgc *c);
/* Use <conninfo> from now on (reconnects when it changed). */
void pgc_set_conninfo(struct pgc *c, const char *conninfo);
const char *pgc_conninfo(const struct pgc *c);

/* Log <c>'s connects and losses at DEBUG (a poller that logs what they mean itself). */
void pgc_set_quiet(struct pgc *c, bool quiet);
void pgc_set_callbacks(struct pgc *c, pgc_notify_fn on_notify, pgc_state_fn on_state, void *arg);
/* Start connecting now if down (queries also do it). */
void pgc_connect(struct pgc *c);
bool pgc_is_up(const struct pgc *c);
/*
 * Queue <sql> with <n> text parameters (copied; NULL = SQL NULL). Queries run one at a time in
 * order; <cb> (may be NULL) is always called, from the loop, never inside this call. A failed connection
 * fails every queued query with SQLSTATE 08006.
 */
void pgc_query(struct pgc *c, const char *sql, size_t n, const char *const *params,
	       pgc_done_fn cb, void *arg);
/* Rows of a result, and the text of (row, col): NULL for SQL NULL. */
size_t pgc_res_rows(const struct pgc_res *r);
const char *pgc_res_get(const struct pgc_res *r, size_t row, size_t col);
/* A result as the catalog builder reads rows (neki/catalog.h's struct cat_rows). */
struct cat_rows pgc_res_cat_rows(const struct pgc_res *r);
/* Rows affected by the command (INSERT/UPDATE), 0 when not a count. */
uint64_t pgc_res_affected(const struct pgc_res *r);

#endif
