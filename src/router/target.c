/*
 * target.c - read targeting (neki/target.h) and the planner's refusal of writes under a
 * non-primary __neki.target (plan_check_target()).
 *
 * Spec 3.5, per destination shard: candidates are the serving standbys of the target's
 * type with a known lag of at most replica_lag_tolerable_max; they are ordered by recency
 * tier (lag at most replica_lag_tolerable_min first), then locality (one cell here), then
 * affinity (none: spread per statement; session: reuse); `require` policies filter; an
 * empty set is an error. A standby's type is what [shards] declares it (replicas= or
 * rdonly=); a declared primary that now answers as a standby (a former primary, re-pointed
 * after a failover) serves as a replica.
 */
#include "neki/base.h"

#include "neki/target.h"

#include <string.h>

#include "neki/config.h"
#include "plan_int.h"

enum target_kind
target_kind_from(const char *target)
{
	if (strcmp(target, "replica") == 0)
		return TARGET_REPLICA;
	if (strcmp(target, "rdonly") == 0)
		return TARGET_RDONLY;
	return TARGET_PRIMARY;
}

static enum target_policy3
policy3(const char *v)
{
	return strcmp(v, "require") == 0 ? TARGET_REQUIRE :
	       strcmp(v, "off") == 0 ? TARGET_OFF : TARGET_PREFER;
}

/* target_policy_from: see neki/target.h. */
void
target_policy_from(struct target_policy *p, const char *target, const char *recency,
		   const char *locality, const char *affinity, double lag_min_s, double lag_max_s)
{
	p->kind = target_kind_from(target);
	p->recency = policy3(recency);
	p->locality = policy3(locality);
	p->session_affinity = strcmp(affinity, "session") == 0;
	p->lag_max_ms = (int64_t)(lag_max_s * 1000.0);
	p->lag_min_ms = (int64_t)(lag_min_s * 1000.0);
	if (p->lag_min_ms > p->lag_max_ms)
		p->lag_min_ms = p->lag_max_ms;
}

/* Is <s> a standby of the type <p> targets, serving, with a known lag within the bound? */
static bool
candidate(const struct target_policy *p, const struct target_server *s)
{
	enum cfg_server_kind want = p->kind == TARGET_RDONLY ? CFG_SRV_RDONLY : CFG_SRV_REPLICA;
	enum cfg_server_kind is = s->declared == CFG_SRV_PRIMARY ? CFG_SRV_REPLICA :
				  (enum cfg_server_kind)s->declared;

	return is == want && s->st.role == SHM_SRV_STANDBY && (s->st.flags & SHM_SRV_F_LAG) &&
	       s->st.lag_ms <= p->lag_max_ms;
}

static enum target_result
pick_primary(const struct target_server *v, size_t n, uint32_t *index)
{
	for (size_t i = 0; i < n; i++)
		if ((v[i].st.flags & SHM_SRV_F_CHOSEN) &&
		    (v[i].st.role == SHM_SRV_PRIMARY || v[i].st.role == SHM_SRV_UNKNOWN)) {
			*index = v[i].index;
			return TARGET_OK;
		}
	return TARGET_HOLD;
}

/* target_pick: see neki/target.h. */
enum target_result
target_pick(const struct target_policy *p, const struct target_server *v, size_t n,
	    int sticky, uint64_t spread, uint32_t *index)
{
	uint32_t best[CFG_SHARD_SERVERS_MAX], nbest = 0;
	bool tier_seen = false;

	if (p->kind == TARGET_PRIMARY)
		return pick_primary(v, n, index);
	for (size_t i = 0; i < n; i++) {
		bool tier;

		if (!candidate(p, &v[i]))
			continue;
		tier = v[i].st.lag_ms <= p->lag_min_ms;
		if (p->recency == TARGET_REQUIRE && !tier)
			continue;
		if (p->recency == TARGET_PREFER && tier && !tier_seen) {
			tier_seen = true;
			nbest = 0;		/* the preferred tier only from now on */
		}
		if (p->recency == TARGET_PREFER && tier_seen && !tier)
			continue;
		if (nbest < CFG_SHARD_SERVERS_MAX)
			best[nbest++] = v[i].index;
	}
	if (nbest == 0)
		return TARGET_NONE;
	for (uint32_t i = 0; p->session_affinity && i < nbest; i++)
		if ((int)best[i] == sticky) {
			*index = best[i];
			return TARGET_OK;
		}
	*index = best[spread % nbest];
	return TARGET_OK;
}

/* target_error: see neki/target.h. */
bool
target_error(struct nk_error *err, const char *uid, enum target_kind kind)
{
	static const char *const types[] = { "PRIMARY", "REPLICA", "RDONLY" };

	nk_error_set(err, NK_ERRCODE_NO_HEALTHY_SIDECAR,
		     "no healthy sidecars available for shard %s with type "
		     "SIDECAR_TYPE_%s", uid, types[kind]);
	if (kind == TARGET_PRIMARY)
		nk_error_detail(err, "No server of shard %s answered as its primary within "
				"failover_hold_timeout.", uid);
	else
		nk_error_detail(err, "No %s of shard %s is serving with a known replay lag within "
				"the bounds of __neki.replica_recency and "
				"replica_lag_tolerable_max.", kind == TARGET_RDONLY ? "rdonly standby"
				: "replica", uid);
	nk_error_hint(err, "SHOW SHARDS on the admin console lists every server with its role "
		      "and lag.");
	return false;
}

/* ---- writes under a non-primary target (the planner) ---- */

/* What a statement that writes is called in the refusal; NULL when it only reads. */
static const char *
write_name(const struct pctx *c)
{
	const struct stmt *s = c->s;
	const struct plan *o = c->out;

	switch (s->kind) {
	case STMT_INSERT: return "INSERT";
	case STMT_UPDATE: return "UPDATE";
	case STMT_DELETE: return "DELETE";
	case STMT_MERGE: return "MERGE";
	case STMT_DDL: return s->tag != NULL ? s->tag : "DDL";
	case STMT_PRIV: case STMT_MAINT: case STMT_OTHER:
		return s->tag != NULL ? s->tag : "this statement";
	case STMT_COPY: return o->op == PLAN_OP_COPY ? "COPY FROM" : NULL;
	case STMT_SELECT:
		if (s->flags & STMT_F_INTO)
			return "SELECT INTO";
		if (s->flags & STMT_F_WRITING_CTE)
			return "a data-modifying WITH";
		if (s->flags & STMT_F_LOCKING)
			return "SELECT FOR UPDATE/SHARE";
		return o->nnextvals > 0 || o->nsetvals > 0 ? "a sequence function" : NULL;
	default:
		return NULL;
	}
}

/* plan_check_target: see plan_int.h. */
bool
plan_check_target(struct pctx *c)
{
	const char *target = c->in->sess->target, *what;

	if (target[0] == '\0' || strcmp(target, "primary") == 0 || (what = write_name(c)) == NULL)
		return true;
	nk_error_set(c->err, ERRCODE_READ_ONLY_SQL_TRANSACTION,
		     "cannot execute %s while __neki.target is %s", what,
		     target);
	nk_error_detail(c->err, "Only __neki.target = primary accepts writes; replica and rdonly "
			"sessions are read-only (no fallback to the primary).");
	nk_error_hint(c->err, "SET __neki.target = primary, outside a transaction, to write.");
	return false;
}
