/*
 * session_fds.c - a worker's part of SHOW FDS and of the online restart (neki -R) in the
 * process being taken over.
 *
 *   SHM_CMD_FDS (session_fds): this worker's rows and sockets go to the admin over the
 *     descriptor channel (neki/fdchan.h), one descriptor per row: its listening sockets when
 *     the admin asks for them ("pooler"), every logged-in client ("client") followed by
 *     its link ("server"), then the idle links of its pools ("server"). Rows carry this
 *     worker's fd numbers; the admin renumbers them. Left out, because no other process can
 *     go on with them: TLS connections (no kernel TLS: the TLS state lives in this process)
 *     and the links of such clients, sessions of sharded databases (their routing state and
 *     shard links), replication connections, console sessions, clients not logged in.
 *   SHM_CMD_TAKEOVER_DONE (session_fds_left_behind): the new process has every socket and
 *     is about to end this one: each client left out is closed now with a FATAL that says
 *     why, rather than silently when the process ends.
 * Entry points: session_fds(), session_fds_left_behind().
 */
#include "neki/base.h"

#include "neki/session.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "neki/fdchan.h"
#include "neki/log.h"
#include "neki/net.h"
#include "neki/tls.h"
#include "session_int.h"

/* The rows of one answer, sent FDCHAN_ROWS_MAX at a time. */
struct fds_out {
	struct fdchan_hdr hdr;
	struct fdrow rows[FDCHAN_ROWS_MAX];
	int fds[FDCHAN_ROWS_MAX];
	uint32_t total;			/* rows sent */
	bool failed;			/* a message could not be sent */
};

/* Send what is batched. */
static void
fds_flush(struct fds_out *o)
{
	if (o->hdr.n == 0)
		return;
	o->hdr.kind = FDCHAN_ROWS;
	if (!o->failed && fdchan_send(&o->hdr, o->rows, o->hdr.n * sizeof(o->rows[0]), o->fds,
				      o->hdr.n))
		o->total += o->hdr.n;
	else
		o->failed = true;
	o->hdr.n = 0;
}

/* A new row for socket <fd> of <task>, zeroed but for those two; the batch grows. */
static struct fdrow *
fds_row(struct fds_out *o, int fd, enum fdrow_task task)
{
	struct fdrow *r;

	if (o->hdr.n == FDCHAN_ROWS_MAX)
		fds_flush(o);
	r = &o->rows[o->hdr.n];
	memset(r, 0, sizeof(*r));
	r->fd = fd;
	r->task = task;
	o->fds[o->hdr.n++] = fd;
	return r;
}

static void
fds_copy(char *dst, size_t cap, const char *src)
{
	snprintf(dst, cap, "%s", src != NULL ? src : "");
}

/* addr and port of <fd>'s peer (<peer>) or own address; "unix" and <unix_port> for Unix. */
static void
fds_addr(struct fdrow *r, int fd, bool peer, int unix_port)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int rc = peer ? getpeername(fd, (struct sockaddr *)&ss, &len) :
		 getsockname(fd, (struct sockaddr *)&ss, &len);

	fds_copy(r->addr, sizeof(r->addr), "unix");
	r->port = unix_port;
	if (rc == -1)
		return;
	if (ss.ss_family == AF_INET) {
		inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, r->addr,
			  sizeof(r->addr));
		r->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	} else if (ss.ss_family == AF_INET6) {
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, r->addr,
			  sizeof(r->addr));
		r->port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	}
}

/* The main port's listening sockets ("pooler"). */
static void
fds_listeners(struct fds_out *o)
{
	for (size_t i = 0; i < listen_count(); i++) {
		const struct listener *l = listen_at(i);

		if (l->fd != -1 && l->kind == LISTEN_MAIN)
			fds_addr(fds_row(o, l->fd, FDROW_POOLER), l->fd, false,
				 cfg_current()->proc.listen_port);
	}
}

/* The SCRAM pass-through keys of <p> into <r>, when it has them. */
static void
fds_scram(struct fdrow *r, struct pool *p)
{
	const struct scram_keys *k = pool_scram_keys(p);

	if (!k->valid)
		return;
	r->has_scram = true;
	memcpy(r->scram_client_key, k->client_key, SCRAM_KEY_LEN);
	memcpy(r->scram_server_key, k->server_key, SCRAM_KEY_LEN);
}

/* "password": sent only when the new process could not find <have> in the configuration. */
static void
fds_password(struct fdrow *r, const char *have, const char *derived)
{
	if (have != NULL && (derived == NULL || strcmp(have, derived) != 0))
		fds_copy(r->password, sizeof(r->password), have);
}

/* A row for link <l> of pool <sp>, paired with client fd <client_fd> (0: idle). */
static void
fds_link_row(struct fds_out *o, struct spool *sp, struct link *l, int client_fd)
{
	int fd = sbuf_fd(link_sbuf(l));
	struct fdrow *r = fds_row(o, fd, FDROW_SERVER);
	struct pool *p = spool_pool(sp);
	const struct cfg *c = cfg_current();
	const struct cfg_database *db = sess_db_entry(c, spool_db(sp));

	fds_copy(r->user, sizeof(r->user), pool_user_name(p));
	fds_copy(r->db, sizeof(r->db), pool_db_name(p));
	fds_addr(r, fd, true, 0);
	r->cancel = (uint64_t)link_backend_pid(l) << 32 | link_backend_key(l);
	r->link = client_fd;
	fds_copy(r->client_encoding, sizeof(r->client_encoding), link_param(l, "client_encoding"));
	fds_copy(r->std_strings, sizeof(r->std_strings),
		 link_param(l, "standard_conforming_strings"));
	fds_copy(r->datestyle, sizeof(r->datestyle), link_param(l, "DateStyle"));
	fds_copy(r->timezone, sizeof(r->timezone), link_param(l, "TimeZone"));
	if (db != NULL)
		fds_password(r, pool_password(p), sess_pool_password(c, db,
				sess_auth_file_secret(c, pool_user_name(p))));
	fds_scram(r, p);
}

/* The client's tracked value of <name> into <dst>. */
static void
fds_var(const struct session *s, const char *name, char *dst, size_t cap)
{
	int i = varcache_index(name);

	fds_copy(dst, cap, i >= 0 ? s->vars.val[i] : NULL);
}

/* A row for client <s> (and, after it, for its link). */
static void
fds_client_row(struct fds_out *o, struct session *s)
{
	int fd = sbuf_fd(&s->sb);
	struct fdrow *r = fds_row(o, fd, FDROW_CLIENT);

	fds_copy(r->user, sizeof(r->user), s->user);
	fds_copy(r->db, sizeof(r->db), s->dbname);
	fds_copy(r->addr, sizeof(r->addr), s->from.is_unix ? "unix" : s->from.addr);
	r->port = s->from.port;
	r->cancel = (uint64_t)s->key_pid << 32 | s->key_secret;
	r->link = s->link != NULL ? sbuf_fd(link_sbuf(s->link)) : 0;
	fds_var(s, "client_encoding", r->client_encoding, sizeof(r->client_encoding));
	fds_var(s, "standard_conforming_strings", r->std_strings, sizeof(r->std_strings));
	fds_var(s, "DateStyle", r->datestyle, sizeof(r->datestyle));
	fds_var(s, "TimeZone", r->timezone, sizeof(r->timezone));
	fds_password(r, s->secret, sess_auth_file_secret(s->cfg, s->user));
	fds_scram(r, spool_pool(s->sp));
	if (s->link != NULL)
		fds_link_row(o, s->sp, s->link, fd);
	s->adm.handed = true;
}

/* Why <s> cannot move to another process; NULL when it can. */
static const char *
fds_stays_because(const struct session *s)
{
	if (s->adm.console || s->relay != NULL)
		return "console sessions are not handed over";
	if ((s->state != SESS_ST_IDLE && s->state != SESS_ST_ACTIVE) || s->sp == NULL)
		return "the client was not logged in";
	if (tls_sbuf_is_tls(&s->sb) || (s->link != NULL && tls_sbuf_is_tls(link_sbuf(s->link))))
		return "TLS connections cannot be handed over without kernel TLS";
	if (s->sharded || s->route != NULL)
		return "sessions of sharded databases are not handed over";
	if (s->replication != PROTO_REPL_NONE)
		return "replication connections are not handed over";
	return NULL;
}

static void
fds_session_cb(struct session *s, void *arg)
{
	s->adm.handed = false;	/* (a SHOW FDS before this one may have listed it) */
	if (fds_stays_because(s) == NULL)
		fds_client_row(arg, s);
}

/* pool_foreach_link's argument: the answer and the pool walked. */
struct fds_pool_walk {
	struct fds_out *o;
	struct spool *sp;
};

static void
fds_idle_link_cb(struct link *l, void *arg)
{
	struct fds_pool_walk *w = arg;

	if ((link_state(l) == LINK_ST_IDLE || link_state(l) == LINK_ST_USED) &&
	    !tls_sbuf_is_tls(link_sbuf(l)))
		fds_link_row(w->o, w->sp, l, 0);
}

void
session_fds(const struct shm_msg *m)
{
	static struct fds_out o;	/* 17 kB: not on the stack */
	uint64_t req;

	memset(&o, 0, sizeof(o));
	if (m->key_len != sizeof(req))
		return;
	memcpy(&req, m->key, sizeof(req));
	o.hdr.req = req;
	o.hdr.slot = (uint16_t)shm_self();
	if (m->name[0] == 'L')
		fds_listeners(&o);
	sess_foreach(fds_session_cb, &o);
	for (struct spool *sp = spool_first(); sp != NULL; sp = spool_next(sp)) {
		struct fds_pool_walk w = { &o, sp };

		if (spool_is_passthrough(sp))
			pool_foreach_link(spool_pool(sp), fds_idle_link_cb, &w);
	}
	fds_flush(&o);
	o.hdr.kind = FDCHAN_END;
	o.hdr.n = o.total;
	o.hdr.flags = o.failed ? FDCHAN_END_INCOMPLETE : 0;
	if (!fdchan_send(&o.hdr, NULL, 0, NULL, 0))
		log_error("SHOW FDS: could not tell the admin process that this worker's rows "
			  "are complete");
}

/* Close <s>, left out of the online restart, with a FATAL that says why; true when closed. */
static bool
fds_close_left(struct session *s, void *arg)
{
	const char *why = fds_stays_because(s);
	struct nk_error err;
	size_t *n = arg;

	if (s->adm.handed)
		return false;
	if (why == NULL)
		why = "the client was not at rest when its sockets were listed";
	sess_log(s, LOG_LVL_WARNING, "online restart: closing the connection: %s", why);
	nk_error_set(&err, ERRCODE_ADMIN_SHUTDOWN, "terminating connection for the online restart");
	nk_error_detail(&err, "%c%s.", toupper((unsigned char)why[0]), why + 1);
	nk_error_hint(&err, "Connect again: the new process accepts new connections.");
	err.severity = NK_SEV_FATAL;
	sess_close(s, "online restart", &err);
	(*n)++;
	return true;
}

void
session_fds_left_behind(void)
{
	size_t n = 0;

	sess_foreach_closing(fds_close_left, &n);
	if (n > 0)
		log_info("online restart: %zu client%s could not be handed over and %s closed", n,
			 n == 1 ? "" : "s", n == 1 ? "was" : "were");
}
