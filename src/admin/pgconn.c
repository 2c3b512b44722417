/*
 * pgconn.c - the libpq adapter: one asynchronous connection to a Postgres server (the
 * authoritative shard) driven by the admin's libevent loop, so the console never blocks.
 * The only file that includes libpq-fe.h.
 *
 * A struct pgc keeps a FIFO of queries and runs them one at a time. States:
 *   PGC_DOWN        no connection; a query or pgc_connect() starts one
 *   PGC_CONNECTING  PQconnectPoll() driven by a one-shot socket event + a 5 s timer
 *   PGC_IDLE        connected, nothing in flight; read event armed (notifications)
 *   PGC_BUSY        one query sent; read event armed, write event while PQflush() > 0
 * A lost or failed connection fails every queued query (08006) and goes back to DOWN.
 * Callbacks always run from the loop (a zero-timeout event), never inside pgc_query().
 */
#include "neki/base.h"

#include "admin_int.h"

#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <libpq-fe.h>

#include "neki/log.h"

#define PGC_CONNECT_TIMEOUT 5

enum pgc_state {
	PGC_DOWN = 0,
	PGC_CONNECTING = 1,
	PGC_IDLE = 2,
	PGC_BUSY = 3,
};

struct pgc_query {
	char *sql;			/* owned */
	char **params;			/* owned array of owned strings (NULL entries = NULL) */
	size_t nparams;
	pgc_done_fn cb;
	void *arg;			/* borrowed: the caller's */
	struct pgc_query *next;
};

struct pgc_res {
	PGresult *res;			/* borrowed from the pgc during the callback */
};

struct pgc {
	char name[64];			/* for messages: the shard uid */
	bool quiet;			/* connects and losses logged at debug level */
	char *conninfo;			/* owned */
	enum pgc_state state;
	PGconn *conn;			/* owned; NULL when DOWN */
	int sock;			/* PQsocket() the events watch; -1 */
	struct event_base *base;	/* borrowed */
	struct event *rd;		/* owned: persistent read (IDLE/BUSY) or one-shot (connect) */
	struct event *wr;		/* owned: write readiness */
	struct event *timer;		/* owned: connect timeout */
	struct event *kick;		/* owned: zero-timeout "run the queue" */
	struct pgc_query *head, *tail;	/* owned queue; head is in flight when BUSY */
	PGresult *last;			/* owned: last result of the query in flight */
	char last_err[NK_ERR_MSG_MAX];	/* first error of the query in flight */
	char last_state[6];
	struct pgc_query *failed;	/* owned: queries failed by a lost connection */
	char failed_msg[NK_ERR_MSG_MAX];
	pgc_notify_fn on_notify;
	pgc_state_fn on_state;
	void *cb_arg;
};

static void pgc_io_cb(evutil_socket_t fd, short what, void *arg);
static void pgc_run(struct pgc *c);

static void
query_free(struct pgc_query *q)
{
	for (size_t i = 0; i < q->nparams; i++)
		free(q->params[i]);
	free(q->params);
	free(q->sql);
	free(q);
}

static void
kick_cb(evutil_socket_t fd, short what, void *arg)
{
	pgc_run(arg);
}

static void
kick(struct pgc *c)
{
	event_active(c->kick, EV_TIMEOUT, 0);
}

struct pgc *
pgc_new(struct event_base *base, const char *name)
{
	struct pgc *c = calloc(1, sizeof(*c));

	if (c == NULL)
		return NULL;
	snprintf(c->name, sizeof(c->name), "%s", name);
	c->base = base;
	c->sock = -1;
	c->kick = event_new(base, -1, 0, kick_cb, c);
	c->timer = event_new(base, -1, 0, pgc_io_cb, c);
	if (c->kick == NULL || c->timer == NULL) {
		pgc_free(c);
		return NULL;
	}
	return c;
}

/* Stop watching the socket. */
static void
unwatch(struct pgc *c)
{
	if (c->rd != NULL)
		event_free(c->rd);
	if (c->wr != NULL)
		event_free(c->wr);
	c->rd = c->wr = NULL;
	c->sock = -1;
}

/* Drop the connection; queued queries move to the failed list (reported from the loop). */
static void
disconnect(struct pgc *c, const char *why)
{
	bool was_up = c->state == PGC_IDLE || c->state == PGC_BUSY;

	unwatch(c);
	event_del(c->timer);
	if (c->conn != NULL)
		PQfinish(c->conn);
	c->conn = NULL;
	if (c->last != NULL)
		PQclear(c->last);
	c->last = NULL;
	c->state = PGC_DOWN;
	snprintf(c->failed_msg, sizeof(c->failed_msg), "%s", why);
	while (c->head != NULL) {
		struct pgc_query *q = c->head;

		c->head = q->next;
		q->next = c->failed;
		c->failed = q;
	}
	c->tail = NULL;
	if (c->quiet)
		log_debug("server of shard %s: %s", c->name, why);
	else
		log_warn("authoritative shard \"%s\": %s", c->name, why);
	kick(c);
	if (was_up && c->on_state != NULL)
		c->on_state(c->cb_arg, false);
}

void
pgc_free(struct pgc *c)
{
	if (c == NULL)
		return;
	unwatch(c);
	if (c->conn != NULL)
		PQfinish(c->conn);
	if (c->last != NULL)
		PQclear(c->last);
	while (c->head != NULL) {
		struct pgc_query *q = c->head;

		c->head = q->next;
		query_free(q);
	}
	while (c->failed != NULL) {
		struct pgc_query *q = c->failed;

		c->failed = q->next;
		query_free(q);
	}
	if (c->kick != NULL)
		event_free(c->kick);
	if (c->timer != NULL)
		event_free(c->timer);
	free(c->conninfo);
	free(c);
}

static void
free_later_cb(evutil_socket_t fd, short what, void *arg)
{
	pgc_free(arg);
}

void
pgc_free_later(struct pgc *c)
{
	struct timeval zero = { 0, 0 };

	c->on_notify = NULL;
	c->on_state = NULL;
	for (struct pgc_query *q = c->head; q != NULL; q = q->next)
		q->cb = NULL;	/* (as pgc_free: no callback after) */
	for (struct pgc_query *q = c->failed; q != NULL; q = q->next)
		q->cb = NULL;
	if (event_base_once(c->base, -1, EV_TIMEOUT, free_later_cb, c, &zero) == -1)
		log_warn("could not free a probe connection");
}

void
pgc_set_conninfo(struct pgc *c, const char *conninfo)
{
	if (c->conninfo != NULL && strcmp(c->conninfo, conninfo) == 0)
		return;
	free(c->conninfo);
	c->conninfo = strdup(conninfo);
	if (c->state != PGC_DOWN)
		disconnect(c, "connection settings changed");
}

void
pgc_set_quiet(struct pgc *c, bool quiet)
{
	c->quiet = quiet;
}

const char *
pgc_conninfo(const struct pgc *c)
{
	return c->conninfo;
}

void
pgc_set_callbacks(struct pgc *c, pgc_notify_fn on_notify, pgc_state_fn on_state, void *arg)
{
	c->on_notify = on_notify;
	c->on_state = on_state;
	c->cb_arg = arg;
}

bool
pgc_is_up(const struct pgc *c)
{
	return c->state == PGC_IDLE || c->state == PGC_BUSY;
}

/* (Re)arm the socket events for <what> (EV_READ / EV_WRITE) on the current socket. */
static bool
watch(struct pgc *c, short what, bool persist)
{
	int sock = PQsocket(c->conn);

	if (sock != c->sock)
		unwatch(c);
	c->sock = sock;
	if (c->rd == NULL)
		c->rd = event_new(c->base, sock, EV_READ | (persist ? EV_PERSIST : 0), pgc_io_cb, c);
	if (c->wr == NULL)
		c->wr = event_new(c->base, sock, EV_WRITE, pgc_io_cb, c);
	if (c->rd == NULL || c->wr == NULL)
		return false;
	if ((what & EV_READ) && event_add(c->rd, NULL) == -1)
		return false;
	if ((what & EV_WRITE) && event_add(c->wr, NULL) == -1)
		return false;
	return true;
}

/* Advance PQconnectPoll(); on success switch to IDLE. */
static void
connect_step(struct pgc *c)
{
	switch (PQconnectPoll(c->conn)) {
	case PGRES_POLLING_READING:
		if (!watch(c, EV_READ, false))
			disconnect(c, "out of memory");
		return;
	case PGRES_POLLING_WRITING:
		if (!watch(c, EV_WRITE, false))
			disconnect(c, "out of memory");
		return;
	case PGRES_POLLING_OK:
		break;
	default: {
		char why[NK_ERR_MSG_MAX];

		snprintf(why, sizeof(why), "could not connect: %s", PQerrorMessage(c->conn));
		why[strcspn(why, "\n")] = '\0';
		disconnect(c, why);
		return;
	}
	}
	event_del(c->timer);
	unwatch(c);			/* re-created persistent for the connected phase */
	PQsetnonblocking(c->conn, 1);
	c->state = PGC_IDLE;
	if (!watch(c, EV_READ, true)) {
		disconnect(c, "out of memory");
		return;
	}
	if (c->quiet)
		log_debug("connected to a server of shard %s", c->name);
	else
		log_info("connected to the authoritative shard \"%s\"", c->name);
	if (c->on_state != NULL)
		c->on_state(c->cb_arg, true);
	kick(c);
}

void
pgc_connect(struct pgc *c)
{
	struct timeval tv = { PGC_CONNECT_TIMEOUT, 0 };

	if (c->state != PGC_DOWN || c->conninfo == NULL)
		return;
	c->conn = PQconnectStart(c->conninfo);
	if (c->conn == NULL || PQstatus(c->conn) == CONNECTION_BAD) {
		disconnect(c, c->conn ? PQerrorMessage(c->conn) : "out of memory");
		return;
	}
	c->state = PGC_CONNECTING;
	event_add(c->timer, &tv);
	connect_step(c);
}

/* Deliver the results of the finished query at the head of the queue. */
static void
finish_query(struct pgc *c)
{
	struct pgc_query *q = c->head;
	struct pgc_res r = { .res = c->last };
	struct nk_error err;

	c->head = q->next;
	if (c->head == NULL)
		c->tail = NULL;
	c->state = PGC_IDLE;
	if (c->last_err[0] != '\0') {
		nk_error_set(&err, c->last_state[0] ? c->last_state : ERRCODE_INTERNAL_ERROR,
			     "%s", c->last_err);
		if (q->cb != NULL)
			q->cb(q->arg, NULL, &err);
	} else if (q->cb != NULL) {
		q->cb(q->arg, &r, NULL);
	}
	if (c->last != NULL)
		PQclear(c->last);
	c->last = NULL;
	query_free(q);
}

/* Keep the last result of the query in flight and remember its first error. */
static void
take_result(struct pgc *c, PGresult *res)
{
	ExecStatusType st = PQresultStatus(res);

	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK && st != PGRES_EMPTY_QUERY &&
	    c->last_err[0] == '\0') {
		const char *code = PQresultErrorField(res, PG_DIAG_SQLSTATE);

		snprintf(c->last_err, sizeof(c->last_err), "%s",
			 PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) ?: PQresultErrorMessage(res));
		snprintf(c->last_state, sizeof(c->last_state), "%s",
			 code ? code : ERRCODE_INTERNAL_ERROR);
	}
	if (c->last != NULL)
		PQclear(c->last);
	c->last = res;
}

/* Hand every pending notification to the owner. */
static void
drain_notifies(struct pgc *c)
{
	PGnotify *n;

	while (c->conn != NULL && (n = PQnotifies(c->conn)) != NULL) {
		if (c->on_notify != NULL)
			c->on_notify(c->cb_arg, n->relname, n->extra);
		PQfreemem(n);
	}
}

/* The socket is readable (or writable) while connected. */
static void
on_connected_io(struct pgc *c, short what)
{
	if ((what & EV_WRITE) && PQflush(c->conn) == 1 && !watch(c, EV_WRITE, true))
		goto lost;
	if (!(what & EV_READ))
		return;
	if (!PQconsumeInput(c->conn))
		goto lost;
	drain_notifies(c);
	while (c->state == PGC_BUSY && !PQisBusy(c->conn)) {
		PGresult *res = PQgetResult(c->conn);

		if (res == NULL) {
			finish_query(c);
			kick(c);
			break;
		}
		take_result(c, res);
	}
	if (c->conn != NULL && PQstatus(c->conn) == CONNECTION_BAD)
		goto lost;
	return;
lost: {
	char why[NK_ERR_MSG_MAX];

	snprintf(why, sizeof(why), "connection lost: %s",
		 c->conn ? PQerrorMessage(c->conn) : "closed");
	why[strcspn(why, "\n")] = '\0';
	disconnect(c, why);
}
}

static void
pgc_io_cb(evutil_socket_t fd, short what, void *arg)
{
	struct pgc *c = arg;

	switch (c->state) {
	case PGC_CONNECTING:
		if (what & EV_TIMEOUT)
			disconnect(c, "could not connect: timeout expired");
		else
			connect_step(c);
		break;
	case PGC_IDLE:
	case PGC_BUSY:
		on_connected_io(c, what);
		break;
	case PGC_DOWN:
		break;
	}
}

/* Fail the queries of a lost connection. */
static void
report_failed(struct pgc *c)
{
	while (c->failed != NULL) {
		struct pgc_query *q = c->failed;
		struct nk_error err;

		c->failed = q->next;
		nk_error_set(&err, ERRCODE_CONNECTION_FAILURE,
			     "could not reach the authoritative shard \"%s\": %s",
			     c->name, c->failed_msg);
		if (q->cb != NULL)
			q->cb(q->arg, NULL, &err);
		query_free(q);
	}
}

/* Send the head query when idle; connect when down and work is waiting. */
static void
pgc_run(struct pgc *c)
{
	struct pgc_query *q;

	report_failed(c);
	if (c->head == NULL)
		return;
	if (c->state == PGC_DOWN) {
		pgc_connect(c);
		report_failed(c);
		return;
	}
	if (c->state != PGC_IDLE)
		return;
	q = c->head;
	c->last_err[0] = '\0';
	c->last_state[0] = '\0';
	/* without parameters use the simple protocol: several statements may go together */
	if (!(q->nparams == 0 ? PQsendQuery(c->conn, q->sql) :
	      PQsendQueryParams(c->conn, q->sql, (int)q->nparams, NULL,
				(const char *const *)q->params, NULL, NULL, 0))) {
		disconnect(c, PQerrorMessage(c->conn));
		return;
	}
	c->state = PGC_BUSY;
	if (PQflush(c->conn) == 1 && !watch(c, EV_WRITE, true))
		disconnect(c, "out of memory");
}

void
pgc_query(struct pgc *c, const char *sql, size_t n, const char *const *params,
	  pgc_done_fn cb, void *arg)
{
	struct pgc_query *q = calloc(1, sizeof(*q));
	bool ok = q != NULL && (q->sql = strdup(sql)) != NULL &&
		  (n == 0 || (q->params = calloc(n, sizeof(char *))) != NULL);

	for (size_t i = 0; ok && i < n; i++) {
		q->nparams++;
		if (params[i] != NULL && (q->params[i] = strdup(params[i])) == NULL)
			ok = false;
	}
	if (!ok) {
		if (q != NULL)
			query_free(q);
		nk_panic(__FILE__, __LINE__, "out of memory queueing a query");
	}
	q->cb = cb;
	q->arg = arg;
	if (c->tail != NULL)
		c->tail->next = q;
	else
		c->head = q;
	c->tail = q;
	kick(c);
}

size_t
pgc_res_rows(const struct pgc_res *r)
{
	return r->res ? (size_t)PQntuples(r->res) : 0;
}

const char *
pgc_res_get(const struct pgc_res *r, size_t row, size_t col)
{
	if (r->res == NULL || PQgetisnull(r->res, (int)row, (int)col))
		return NULL;
	return PQgetvalue(r->res, (int)row, (int)col);
}

static size_t
res_rows_cb(const void *src)
{
	return pgc_res_rows(src);
}

static const char *
res_get_cb(const void *src, size_t row, size_t col)
{
	return pgc_res_get(src, row, col);
}

struct cat_rows
pgc_res_cat_rows(const struct pgc_res *r)
{
	return (struct cat_rows){ res_rows_cb, res_get_cb, r };
}

uint64_t
pgc_res_affected(const struct pgc_res *r)
{
	const char *s = r->res ? PQcmdTuples(r->res) : "";

	return *s ? strtoull(s, NULL, 10) : 0;
}
