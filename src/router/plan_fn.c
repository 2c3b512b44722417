/*
 * plan_fn.c - the router-managed function calls of a SELECT or DML statement (spec 3.3
 * "Functions / expressions", 6.1):
 *   - advisory locks route by their key through the database's default shard group and
 *     that group's default shard index (doc/router.md "Decisions"), so two sessions locking
 *     one key meet on one shard whatever tables their statements read: 11 when the key
 *     gives no routing value, 60 for a session-level lock on a shard other than the one
 *     holding the session's locks, 62 when the statement cannot run where the lock goes;
 *   - setval() runs on its sequence's home shard (plan_setval() in plan_seq.c);
 *   - pg_notify(), pg_listening_channels() and pg_notification_queue_usage() run on the
 *     notify shard (the authoritative group's shard, where NOTIFY and LISTEN go);
 *   - set_config() runs wherever the statement does, and is listed in plan.set_configs for
 *     the executor, which models the session's settings (its arguments must be constants).
 * A statement without tables moves to the shard its calls need; a statement with tables
 * must already run there alone. Entry point: plan_calls().
 */
#include "neki/base.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "plan_int.h"

/* The notify shard: the authoritative group's (only) shard. */
static const char *
notify_shard(const struct pctx *c)
{
	return topo_image_range_shard(c->img, topo_image_authoritative(c->img), 0);
}

static bool
is_advisory(enum stmt_fn fn)
{
	return fn == STMT_FN_LOCK || fn == STMT_FN_XACT_LOCK || fn == STMT_FN_UNLOCK ||
	       fn == STMT_FN_UNLOCK_ALL;
}

/* Append the routed key to the plan's values (EXPLAIN "Values:"). */
static bool
note_key(struct pctx *c, int64_t key)
{
	struct plan *o = c->out;
	const char **v = rarena_alloc(c->a, (o->nvalues + 1) * sizeof(*v));
	char text[24];

	snprintf(text, sizeof(text), "%" PRId64, key);
	if (!v || !(v[o->nvalues] = rarena_strdup(c->a, text)))
		return nk_error_oom(c->err);
	if (o->nvalues)
		memcpy(v, o->values, o->nvalues * sizeof(*v));
	o->values = v;
	o->nvalues++;
	c->vcap = o->nvalues;
	return true;
}

/*
 * The key of an advisory-lock call as one bigint: the one-argument form as it is, the
 * (int4, int4) form as k1 * 2^32 + k2 (k2 taken as unsigned 32 bits), the layout Postgres
 * itself gives a bigint key. *<routed> is false when the call names no key the router can
 * read without Postgres' own checks (no arguments, three, named ones, a NULL, a value of
 * another type): the shard then raises its error or, for a NULL, takes no lock. A key that
 * is not a constant (a column, a function, a subquery) cannot route: 11.
 */
static bool
lock_key(struct pctx *c, const struct stmt_call *call, int64_t *key, bool *routed)
{
	int64_t k[2] = { 0, 0 };
	bool is_null = false;

	*routed = false;
	if (call->named || call->nargs == 0 || call->nargs > 2)
		return true;
	for (uint32_t i = 0; i < call->nargs; i++) {
		const struct stmt_value *v = &call->args[i];

		if (v->kind != STMT_V_SLOT && v->kind != STMT_V_CONST && v->kind != STMT_V_NULL)
			return nk_error_nk013(c->err, 11);
		if (!plan_value_int(c, v, call->nargs == 1 ? KS_TYPE_INT8 : KS_TYPE_INT4, &k[i],
				    &is_null)) {
			nk_error_clear(c->err);	/* not a key of this type: the shard says so */
			return true;
		}
		if (is_null)
			return true;
	}
	*key = call->nargs == 1 ? k[0] :
	       (int64_t)((uint64_t)(uint32_t)k[0] << 32 | (uint64_t)(uint32_t)k[1]);
	*routed = true;
	return note_key(c, *key);
}

/*
 * The shard of advisory-lock key <key>: the database's default group (the topology's when
 * the database names none, the authoritative one when neither does); through its default
 * index as a bigint value, or its only shard when the group has no index. An index that
 * cannot take a bigint (an expression over several columns, or over text) is 11.
 */
static bool
key_shard(struct pctx *c, int64_t key, const char **uid)
{
	uint32_t g = topo_image_database_group(c->img, c->in->sess->db);
	struct ks_value col, val;
	struct nk_error e;
	const struct ks_expr *x;
	uint32_t idx, range;
	bool ok;

	if (g == TOPO_IMG_NONE)
		g = topo_image_authoritative(c->img);
	idx = topo_image_group_index(c->img, g);
	if (idx == TOPO_IMG_NONE) {
		*uid = topo_image_range_shard(c->img, g, 0);
		return true;
	}
	x = topo_image_index_expr(c->img, idx);
	if (x->ncolumns != 1)
		return nk_error_nk013(c->err, 11);
	memset(&col, 0, sizeof(col));
	col.type = KS_TYPE_INT8;
	col.i = key;
	if (ks_expr_is_column(x)) {
		ok = topo_image_route(c->img, g, idx, &col, &range, &e);
	} else {
		ok = ks_expr_eval(x, &col, &val, &e);
		if (ok) {
			ok = topo_image_route(c->img, g, idx, &val, &range, &e);
			ks_value_cleanup(&val);
		}
	}
	if (!ok)
		return nk_error_nk013(c->err, 11);
	*uid = topo_image_range_shard(c->img, g, range);
	return true;
}

/* set_config()'s arguments must be constants the router reads: 0A000 naming the fix. */
static bool
set_config_refuse(struct pctx *c)
{
	nk_error_set(c->err, ERRCODE_FEATURE_NOT_SUPPORTED,
		     "set_config() on a sharded database needs constant "
		     "arguments");
	nk_error_hint(c->err, "Pass the name, the value and is_local as literals or parameters, "
		      "or use SET.");
	return false;
}

/* is_local of a set_config() call into *<is_local>; *<known> false when the shard will
 * refuse it (text that is no boolean). NULL is false, as Postgres reads it. */
static bool
set_config_local(struct pctx *c, const struct stmt_value *v, bool *is_local, bool *known)
{
	const char *text;
	bool is_null;

	*is_local = false;
	*known = true;
	if (v->kind == STMT_V_SLOT && v->is_param && v->slot < c->in->nparams &&
	    c->in->params[v->slot].binary) {
		const struct plan_param *pp = &c->in->params[v->slot];

		*known = pp->len <= 1;
		*is_local = pp->len == 1 && pp->data[0] != 0;
		return true;
	}
	if (!plan_value_text(c, v, &text, &is_null))
		return false;
	*known = is_null || (text && plan_bool_text(text, is_local));
	return true;
}

/*
 * set_config(name, value, is_local): the setting is listed in plan.set_configs (the
 * executor remembers it once the statement ran); a NULL value resets it, as Postgres does.
 * A call the shard will refuse (a NULL name, a wrong signature, an is_local that is no
 * boolean) is not listed; session_authorization is Neki's 27, as SET SESSION AUTHORIZATION.
 */
static bool
plan_set_config(struct pctx *c, const struct stmt_call *call)
{
	struct plan *o = c->out;
	struct plan_set_config sc, *grown;
	bool is_null, known;
	char *name;

	if (call->named || call->nargs != 3)
		return true;
	for (uint32_t i = 0; i < 3; i++)
		if (call->args[i].kind == STMT_V_EXPR || call->args[i].kind == STMT_V_DEFAULT)
			return set_config_refuse(c);
	memset(&sc, 0, sizeof(sc));
	if (!plan_value_text(c, &call->args[0], &sc.name, &is_null))
		return false;
	if (is_null || !sc.name)
		return true;
	if (!(name = rarena_strdup(c->a, sc.name)))
		return nk_error_oom(c->err);
	for (char *p = name; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	sc.name = name;
	if (strcmp(name, "session_authorization") == 0)
		return nk_error_nk013(c->err, 27);
	if (!plan_value_text(c, &call->args[1], &sc.value, &is_null) ||
	    !set_config_local(c, &call->args[2], &sc.is_local, &known))
		return false;
	if (is_null)
		sc.value = NULL;
	if (!plan_check_setting(c, sc.name, sc.value))
		return false;
	if (!known)
		return true;
	if (!(grown = rarena_alloc(c->a, (o->nset_configs + 1) * sizeof(*grown))))
		return nk_error_oom(c->err);
	if (o->nset_configs)
		memcpy(grown, o->set_configs, o->nset_configs * sizeof(*grown));
	grown[o->nset_configs++] = sc;
	o->set_configs = grown;
	return true;
}

/* Where <call> must run: *<uid>, NULL when anywhere will do. */
static bool
call_shard(struct pctx *c, const struct stmt_call *call, const char **uid)
{
	int64_t key;
	bool routed;

	*uid = NULL;
	switch (call->fn) {
	case STMT_FN_LOCK:
	case STMT_FN_XACT_LOCK:
	case STMT_FN_UNLOCK:
		if (!lock_key(c, call, &key, &routed))
			return false;
		return !routed || key_shard(c, key, uid);
	case STMT_FN_UNLOCK_ALL:
		*uid = c->in->sess->lock_shard;	/* where the session's locks are */
		return true;
	case STMT_FN_SETVAL:
		return plan_setval(c, call, uid);
	case STMT_FN_SET_CONFIG:
		return plan_set_config(c, call);
	case STMT_FN_QUEUE_USAGE:
		c->out->queue_usage = true;
		/* FALLTHROUGH */
	default:
		*uid = notify_shard(c);
		return true;
	}
}

static const char *
fn_name(enum stmt_fn fn)
{
	switch (fn) {
	case STMT_FN_SETVAL:
		return "setval";
	case STMT_FN_NOTIFY:
		return "pg_notify";
	case STMT_FN_LISTENING:
		return "pg_listening_channels";
	case STMT_FN_QUEUE_USAGE:
		return "pg_notification_queue_usage";
	default:
		return "pg_advisory_lock";
	}
}

/* Calls <a> and <b> need shards <x> and <y>: one statement cannot do both. */
static bool
refuse_split(struct pctx *c, const struct stmt_call *a, const struct stmt_call *b,
	     const char *x, const char *y)
{
	if (a->fn == STMT_FN_LOCK && b->fn == STMT_FN_LOCK)
		return nk_error_nk013(c->err, 60);
	if (is_advisory(a->fn) || is_advisory(b->fn))
		return nk_error_nk013(c->err, 62);
	nk_error_set(c->err, ERRCODE_FEATURE_NOT_SUPPORTED,
		     "%s() and %s() of this statement must run on different "
		     "shards (\"%s\" and \"%s\")", fn_name(a->fn), fn_name(b->fn), x, y);
	nk_error_hint(c->err, "Call them in separate statements.");
	return false;
}

/* The statement cannot run on <uid>, the shard that <call> needs. */
static bool
refuse_place(struct pctx *c, const struct stmt_call *call, const char *uid)
{
	if (is_advisory(call->fn))
		return nk_error_nk013(c->err, 62);
	if (call->fn == STMT_FN_SETVAL)
		return nk_error_nk013(c->err, 101);
	nk_error_set(c->err, ERRCODE_FEATURE_NOT_SUPPORTED,
		     "%s() must run on the notify shard \"%s\", and this "
		     "statement's tables are elsewhere", fn_name(call->fn), uid);
	nk_error_hint(c->err, "Call it in a statement of its own.");
	return false;
}

/*
 * Run the statement on <uid>: a statement without tables (or reading only reference tables
 * with a copy there) moves to it; any other must already be planned on that shard alone.
 */
static bool
place(struct pctx *c, const char *uid, const struct stmt_call *call)
{
	struct plan *o = c->out;
	bool refs = o->kind == PLAN_SINGLE && c->nrels > 0;

	if (o->kind == PLAN_SINGLE && o->nshards == 1 && strcmp(o->shards[0], uid) == 0) {
		if (o->op == PLAN_OP_ANY)
			o->op = PLAN_OP_FUNCTION;
		return true;
	}
	for (uint32_t i = 0; i < c->nrels && refs; i++)
		refs = c->rels[i].res.kind == TOPO_REL_REFERENCE &&
		       plan_ref_has_copy(c, &c->rels[i], uid);
	if (o->kind == PLAN_SINGLE && (o->op == PLAN_OP_ANY || refs)) {
		plan_set_single(c, uid, refs ? PLAN_OP_REFERENCE : PLAN_OP_FUNCTION);
		return !nk_error_is_set(c->err);
	}
	return refuse_place(c, call, uid);
}

/* What the executor does with the session's link after the statement (plan.pin). */
static void
note_pin(struct plan *o, enum stmt_fn fn)
{
	if (fn == STMT_FN_LOCK)
		o->pin = PLAN_PIN_LOCK;
	else if ((fn == STMT_FN_UNLOCK || fn == STMT_FN_UNLOCK_ALL) && o->pin == PLAN_PIN_NONE)
		o->pin = PLAN_PIN_PROBE;
}

/* plan_calls: see plan_int.h. With __neki.shard set the statement stays on that shard. */
bool
plan_calls(struct pctx *c)
{
	const struct plan_session *sess = c->in->sess;
	const struct stmt_call *at_call = NULL;
	const char *at = NULL, *uid;
	bool direct = sess->shard[0] != '\0';

	for (uint32_t i = 0; i < c->s->ncalls; i++) {
		const struct stmt_call *call = &c->s->calls[i];

		note_pin(c->out, call->fn);
		if (direct)
			uid = call->fn == STMT_FN_LOCK ? sess->shard : NULL;
		else if (!call_shard(c, call, &uid))
			return false;
		if (call->fn == STMT_FN_LOCK && uid && sess->lock_shard &&
		    strcmp(uid, sess->lock_shard) != 0)
			return nk_error_nk013(c->err, 60);
		if (!uid || direct)
			continue;
		if (at && strcmp(at, uid) != 0)
			return refuse_split(c, at_call, call, at, uid);
		if (!at || call->fn == STMT_FN_LOCK)
			at_call = call;
		at = uid;
	}
	return !at || place(c, at, at_call);
}
