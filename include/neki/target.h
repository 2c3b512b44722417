/*
 * neki/target.h - read targeting (NEKI-SPEC 3.4, 3.5): which server of a shard a statement
 * goes to under __neki.target, and which statements a non-primary target refuses.
 *
 * target_pick() is pure: the caller (the executor) gives what the admin published about the
 * shard's servers (neki/shm_servers.h) and the session's policy, and gets a server index, a
 * hold (no primary: a failover is under way) or a refusal (no eligible standby). neki has
 * one cell (no availability zones): every server counts as local, so replica_locality
 * prefer, require and off choose alike. Entry points: target_pick(), target_error().
 */
#ifndef NEKI_TARGET_H
#define NEKI_TARGET_H

#include "neki/base.h"

#include "neki/error.h"
#include "neki/shm_servers.h"

enum target_kind {
	TARGET_PRIMARY = 0,
	TARGET_REPLICA,
	TARGET_RDONLY,
};

enum target_policy3 {
	TARGET_PREFER = 0,
	TARGET_REQUIRE,
	TARGET_OFF,
};

struct target_policy {
	enum target_kind kind;
	enum target_policy3 recency;	/* __neki.replica_recency */
	enum target_policy3 locality;	/* __neki.replica_locality (one cell: no effect) */
	bool session_affinity;		/* __neki.replica_affinity = session */
	int64_t lag_min_ms;		/* replica_lag_tolerable_min: the preferred tier */
	int64_t lag_max_ms;		/* replica_lag_tolerable_max: beyond, not read */
};

/* One server as target_pick() sees it. */
struct target_server {
	uint32_t index;			/* in cfg_shard.servers */
	uint8_t declared;		/* enum cfg_server_kind */
	struct shm_server st;		/* as the admin published it */
};

enum target_result {
	TARGET_OK = 0,		/* *index is the server */
	TARGET_HOLD,		/* target primary and the shard has none now */
	TARGET_NONE,		/* no eligible standby (NK205) */
};

/* Parse the session's __neki settings (lowercase values as plan_neki_apply() stores). */
void target_policy_from(struct target_policy *p, const char *target, const char *recency,
			const char *locality, const char *affinity, double lag_min_s,
			double lag_max_s);

/*
 * Choose a server of <v> (<n>, published ones) for <p>. <sticky>: the standby the session
 * read last (-1 none; session affinity reuses it while it stays in the best tier); <spread>
 * a number that differs per statement (affinity none spreads over the best tier).
 */
enum target_result target_pick(const struct target_policy *p, const struct target_server *v,
			       size_t n, int sticky, uint64_t spread, uint32_t *index);

/* NK205 "no healthy sidecars available for shard <uid> with type SIDECAR_TYPE_<kind>". */
bool target_error(struct nk_error *err, const char *uid, enum target_kind kind);

enum target_kind target_kind_from(const char *target);

#endif /* NEKI_TARGET_H */
