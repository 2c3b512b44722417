/*
 * session_adopt.c - the sessions of a worker born from an online restart (neki -R): the
 * client and server sockets the master took over (neki/takeover.h) that were given to this
 * worker become logged-in sessions and pool links again, before the worker serves anything.
 *
 * A client row brings its user, database, cancel key (kept: the key names this worker, see
 * session_cancel_key_worker), client_encoding, standard_conforming_strings, DateStyle,
 * TimeZone and the pool's SCRAM keys (its links log in with them, as after a SCRAM login);
 * the password column, when set, is the secret auth_query had found. What the old process
 * knew beyond that (application_name, search_path, protocol-level prepared statements) is
 * lost. A client that had a link gets it back ACTIVE (pool_takeover_link), in whatever its
 * server was doing: a query may still be running, a transaction may be open. The old
 * process's count of the ReadyForQuery messages still owed is not in the row, so the
 * session sends the server an empty query first (the fence): every message before the
 * fence's EmptyQueryResponse and ReadyForQuery belongs to what the client had sent, goes to
 * the client and is not counted; the fence's two are swallowed; from there on the usual
 * bookkeeping holds, and the link goes back to the pool at the next ReadyForQuery 'I' in
 * transaction mode (after DISCARD ALL, see pool_takeover.c). An idle link (server row
 * without a client) is rebuilt in its pool. A socket that cannot be rebuilt (its database
 * is gone from the configuration, out of memory) is closed; a client gets a FATAL first.
 * Entry points: session_adopt_start(), sess_fence_pkt().
 */
#include "neki/base.h"

#include "neki/session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "neki/log.h"
#include "neki/pktbuf.h"
#include "neki/takeover.h"
#include "neki/proc.h"
#include "neki/shm_dbstats.h"
#include "session_int.h"

/* The four parameters a row carries, as the server names them. */
static const char *const adopt_params[] = {
	"client_encoding", "standard_conforming_strings", "DateStyle", "TimeZone",
};

/* The row's values of adopt_params, in that order (NULL: unknown). */
static void
adopt_values(const struct fdrow *r, const char *vals[NK_ARRAY_LEN(adopt_params)])
{
	vals[0] = r->client_encoding[0] ? r->client_encoding : NULL;
	vals[1] = r->std_strings[0] ? r->std_strings : NULL;
	vals[2] = r->datestyle[0] ? r->datestyle : NULL;
	vals[3] = r->timezone[0] ? r->timezone : NULL;
}

/* The row's SCRAM keys for the pool, when it has them. */
static void
adopt_scram(struct pool *p, const struct fdrow *r, struct scram_keys *out)
{
	memset(out, 0, sizeof(*out));
	if (!r->has_scram)
		return;
	out->valid = true;
	memcpy(out->client_key, r->scram_client_key, SCRAM_KEY_LEN);
	memcpy(out->server_key, r->scram_server_key, SCRAM_KEY_LEN);
	if (p != NULL)
		pool_set_scram_keys(p, out);
}

/* The pool of a server row: (database, login user) with the password it logs in with. */
static struct spool *
adopt_server_pool(const struct fdrow *r, struct nk_error *err)
{
	const struct cfg *c = cfg_current();
	const struct cfg_database *db = sess_db_entry(c, r->db);
	const char *pw;

	if (db == NULL || sess_db_is_sharded(db)) {
		nk_error_set(err, ERRCODE_PROTOCOL_VIOLATION,
			     "database \"%s\" is not in the configuration any more",
			     r->db);
		return NULL;
	}
	pw = r->password[0] ? r->password : sess_pool_password(c, db,
								sess_auth_file_secret(c, r->user));
	return spool_get_or_create(c, db, r->db, r->user, pw, err);
}

/* Server row <t>: its link rebuilt in pool <sp> for client <s> (ACTIVE), or idle (<s> NULL). */
static struct link *
adopt_link(struct takeover_sock *t, struct spool *sp, struct session *s)
{
	const char *vals[NK_ARRAY_LEN(adopt_params)];
	struct pool_takeover a = {
		.fd = t->fd, .be_pid = (uint32_t)(t->row.cancel >> 32),
		.be_key = (uint32_t)t->row.cancel, .names = adopt_params, .values = vals,
		.n = NK_ARRAY_LEN(adopt_params), .cb = s != NULL ? sess_link_cb : NULL, .ctx = s,
	};
	struct scram_keys keys;
	struct link *l;

	adopt_values(&t->row, vals);
	adopt_scram(spool_pool(sp), &t->row, &keys);	/* before its pool may log in again */
	if ((l = pool_takeover_link(spool_pool(sp), &a)) == NULL)
		return NULL;
	t->fd = -1;	/* the link's now */
	return l;
}

/* An idle server row: its link, back in its pool. */
static bool
adopt_idle_link(struct takeover_sock *t)
{
	struct nk_error err;
	struct spool *sp = adopt_server_pool(&t->row, &err);

	if (sp == NULL || adopt_link(t, sp, NULL) == NULL) {
		log_warn("online restart: an idle server connection of %s/%s could not be taken "
			 "over: %s", t->row.db, t->row.user, sp == NULL ? err.message :
			 "out of memory");
		return false;
	}
	return true;
}

/* Identity, secret, database and pool of an adopted client; false with <err>. */
static bool
adopt_login(struct session *s, const struct fdrow *r, struct nk_error *err)
{
	const struct cfg *c = s->cfg;
	const char *secret = r->password[0] ? r->password : sess_auth_file_secret(c, r->user);
	const char *pool_user;

	s->user = strdup(r->user);
	s->dbname = strdup(r->db);
	if (s->user == NULL || s->dbname == NULL || (secret != NULL &&
						    (s->secret = strdup(secret)) == NULL))
		return nk_error_oom(err);
	s->key_pid = (uint32_t)(r->cancel >> 32);
	s->key_secret = (uint32_t)r->cancel;
	s->ucfg = cfg_user_find(c, s->user);
	s->db = sess_db_entry(c, s->dbname);
	if (s->db == NULL || sess_db_is_sharded(s->db))
		return nk_error_set(err, ERRCODE_PROTOCOL_VIOLATION,
				    "database \"%s\" is not in the configuration any "
				    "more", s->dbname);
	pool_user = s->db->user != NULL && s->db->user[0] != '\0' ? s->db->user : s->user;
	s->sp = spool_get_or_create(c, s->db, s->dbname, pool_user,
				    sess_pool_password(c, s->db, s->secret), err);
	if (s->sp == NULL)
		return false;
	adopt_scram(NULL, r, &s->auth.scram_keys);
	if (s->auth.scram_keys.valid)
		pool_set_scram_keys(spool_pool(s->sp), &s->auth.scram_keys);
	s->stats = shm_dbstats_get(s->dbname);
	spool_client_adopt(s, &s->counted_global, &s->counted_db, &s->counted_user);
	return true;
}

/* What a logged-in session has, after adopt_login. */
static void
adopt_session_state(struct session *s, const struct fdrow *r)
{
	const char *vals[NK_ARRAY_LEN(adopt_params)];

	adopt_values(r, vals);
	for (size_t i = 0; i < NK_ARRAY_LEN(adopt_params); i++) {
		if (vals[i] != NULL)
			(void)varcache_set(&s->vars, adopt_params[i], vals[i]);
	}
	s->mode = sess_pool_mode(s);
	s->prep_on = s->mode != CFG_POOL_SESSION && s->cfg->pool.max_prepared_statements > 0;
	pool_client_attach(spool_pool(s->sp));
	spool_ref(s->sp);
	s->attached = true;
	pool_waiter_init(&s->waiter, sess_pool_ready, sess_link_cb, s);
	s->waiter.log = sess_waiter_log;
	s->auth_step = SESS_AUTH_DONE;
	s->sync.tx_status = 'I';
}

/* Give <s> its link back and send the fence (see the file comment). */
static bool
adopt_attach(struct session *s, struct link *l)
{
	struct pktbuf pb;
	bool ok;

	s->link = l;
	s->sync.tx_status = 'T';	/* unknown until the fence's ReadyForQuery: not releasable */
	s->sync.syncs_sent = 1;	/* the fence */
	s->sync.z_recv = 0;
	s->adm.fence = true;
	sess_set_state(s, SESS_ST_ACTIVE);
	pktbuf_init(&pb, 16);
	pktbuf_write_query(&pb, "");
	ok = !pktbuf_failed(&pb) && link_send(l, pb.buf, pb.len);
	pktbuf_cleanup(&pb);
	return ok;
}

/* A client row, and its link's row <lt> (NULL: none). */
static void
adopt_client(struct takeover_sock *t, struct takeover_sock *lt)
{
	struct session *s = sess_adopt_new(t->fd);
	struct nk_error err;
	struct link *l;

	t->fd = -1;
	if (s == NULL) {
		log_warn("online restart: out of memory taking over a client of %s", t->row.db);
		return;
	}
	if (!adopt_login(s, &t->row, &err)) {
		sess_log(s, LOG_LVL_WARNING, "online restart: %s", err.message);
		err.severity = NK_SEV_FATAL;
		sess_close(s, err.message, &err);
		return;
	}
	adopt_session_state(s, &t->row);
	if (lt == NULL) {
		sess_set_state(s, SESS_ST_IDLE);
		return;
	}
	if ((l = adopt_link(lt, s->sp, s)) == NULL || !adopt_attach(s, l)) {
		sess_fatal(s, "the online restart could not take over the server connection");
		return;
	}
	sess_log(s, LOG_LVL_DEBUG, "taken over with its server connection");
}

/* The sockets of this worker of task <task> (servers: the idle ones), rebuilt. */
static size_t
adopt_all(int self, enum fdrow_task task)
{
	size_t n = 0;

	for (size_t i = 0; i < takeover_count(); i++) {
		struct takeover_sock *t = takeover_at(i);

		if (t->worker != self || t->fd == -1 || t->row.task != task)
			continue;
		if (task == FDROW_CLIENT) {
			adopt_client(t, t->pair >= 0 ? takeover_at((size_t)t->pair) : NULL);
			n++;
		} else if (t->pair < 0) {
			n += adopt_idle_link(t);
		}
	}
	return n;
}

void
session_adopt_start(void)
{
	int self = shm_self();
	size_t clients, links;

	if (takeover_count() == 0)
		return;
	clients = adopt_all(self, FDROW_CLIENT);
	links = adopt_all(self, FDROW_SERVER);
	takeover_keep_only(-1);		/* what was not rebuilt */
	if (clients + links > 0)
		log_info("online restart: worker %d took over %zu clients and %zu idle server "
			 "connections", self, clients, links);
}

bool
sess_fence_pkt(struct session *s, struct link *l, const struct sbuf_pkt *pkt)
{
	struct sbuf *lsb = link_sbuf(l);
	char status;

	if (pkt->type == 'Z' && pkt->avail < pkt->len) {
		if (sbuf_hold(lsb, pkt->len))
			return true;
		sess_fatal(s, "server sent too big packet");
		return false;
	}
	status = pkt->type == 'Z' && pkt->len >= 6 ? (char)pkt->data[5] : s->sync.tx_status;
	if (pkt->type == 'I' && !s->adm.fence_empty) {
		s->adm.fence_empty = true;		/* the fence's EmptyQueryResponse */
		sbuf_skip(lsb, pkt->len);
		return true;
	}
	if (pkt->type == 'Z' && s->adm.fence_empty) {
		sbuf_skip(lsb, pkt->len);	/* the fence's ReadyForQuery */
		s->adm.fence = s->adm.fence_empty = false;
		s->sync.z_recv++;
		s->sync.tx_status = status;
		sess_release_soon(s);
		return true;
	}
	if (pkt->type == 'Z')
		s->sync.tx_status = status;		/* what the client had sent ends: not counted */
	sess_stats(s)->total_sent += pkt->len;
	sbuf_forward(lsb, &s->sb, pkt->len);
	return true;
}
