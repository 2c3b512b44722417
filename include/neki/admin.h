/*
 * neki/admin.h - the admin process (src/admin/).
 *
 * One child of the master runs the admin: the console on the admin port (pgbouncer's SHOW
 * and control commands, plus neki's) and the __neki.* topology functions; it validates,
 * stores and publishes topology revisions into shm.
 *
 * Forwarding from the main port: a worker that receives `SELECT * FROM __neki.<fn>(...)`
 * (admin_is_neki_call) on a sharded database, or a session on the virtual databases
 * `pgbouncer` / `neki`, connects to the admin's internal Unix socket (admin_forward_address),
 * sends a v3 StartupMessage with the client's `user` and database `neki` (or `pgbouncer`), and
 * relays the client's Query messages and the admin's replies (neki/admin_relay.h). The admin
 * trusts the user name on that socket only when the peer runs under neki's own uid
 * (SO_PEERCRED): the worker has already authenticated the client. The worker adds the startup
 * parameter ADMIN_LOCAL_PARAM = on when the client is user `pgbouncer` on the main Unix socket
 * with neki's uid (pgbouncer's rule: admin whatever the auth_type).
 */
#ifndef NEKI_ADMIN_H
#define NEKI_ADMIN_H

#include "neki/base.h"

#include <sys/socket.h>
#include <sys/un.h>

#include "neki/proto_types.h"

struct nk_error;

/* Startup parameter of a forwarded login: the client is the local pgbouncer user. */
#define ADMIN_LOCAL_PARAM "neki.local_admin"

/* Run the admin process on shm slot <slot>; never returns. */
NK_NORETURN void admin_main(unsigned slot);

/* True when <sql> is a whole call of a __neki function (a simple-protocol query text, as
 * adm_call_parse accepts it); anything else is left to the router. */
bool admin_is_neki_call(const char *sql);

/* True when <fn> (without the schema) names one of neki's own __neki functions. */
bool admin_fn_exists(const char *fn);

/* <err> (42883) for a call of __neki.<fn>, which neki does not have. False. */
bool admin_fn_unknown(const char *fn, struct nk_error *err);

/* What a Describe of a __neki call answers (admin_fn_describe). */
#define ADMIN_DESC_MAX_PARAMS 8
#define ADMIN_DESC_MAX_COLS 16
#define ADMIN_DESC_MARK '\x01'	/* first byte of the literal standing for a $n */

struct admin_fn_desc {
	uint32_t param_oids[ADMIN_DESC_MAX_PARAMS];	/* $1..: the argument's type; 0 unknown */
	struct proto_column cols[ADMIN_DESC_MAX_COLS];	/* names borrowed (static); format 0 */
	size_t ncols;					/* 0: the call returns no rows */
};

/*
 * Describe the __neki call <sql>, whose `$n` parameters are written as string literals of
 * ADMIN_DESC_MARK followed by n: the types of the arguments they stand for and the result
 * columns the call selects. False with <err> (42601, 42883, 42703) when it is not one.
 */
NK_MUSTCHECK bool admin_fn_describe(const char *sql, struct admin_fn_desc *d,
				    struct nk_error *err);

/*
 * The master, before forking: bind the admin's internal socket for forwarded connections,
 * the abstract Unix socket "@neki-admin/.s.PGSQL.<port>" (<port> = listen_port;
 * `psql -h @neki-admin` reaches it), or "@neki-admin-<master pid>/.s.PGSQL.<port>" when
 * another neki on the same port (so_reuseport) holds the first name. The admin process
 * (and each restart of it) accepts on the inherited socket. False with <err> on failure.
 */
NK_MUSTCHECK bool admin_forward_open(int port, struct nk_error *err);

/*
 * The address of the admin's internal socket (the one admin_forward_open bound, else the
 * plain name for <port>). Fills <out>; returns the length to pass to connect().
 */
socklen_t admin_forward_address(int port, struct sockaddr_un *out);

/*
 * Start a non-blocking connection to the admin's internal socket for listen_port <port>.
 * Returns the socket (the connect completes at once or with EINPROGRESS; watch it for
 * writing), or -1 with errno set.
 */
int admin_forward_connect(int port);

#endif /* NEKI_ADMIN_H */
