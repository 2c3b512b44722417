/*
 * route_target.h - which server of a shard a routed session's link comes from (NEKI-SPEC
 * 3.5) and the hold of a shard without a primary (route_target.c; route_server_pool() is
 * route_exec.c's). Included after route_int.h.
 */
#ifndef NEKI_ROUTE_TARGET_H
#define NEKI_ROUTE_TARGET_H

enum rtarget_bind {
	RTARGET_OK = 0,		/* sh->sp is the pool of the server to use */
	RTARGET_HOLD,		/* no primary now: held (a timer goes on with the exec) */
	RTARGET_FAIL,		/* refused (<err>: NK205) */
};

/*
 * Before <sh> asks a pool for a link: point sh->sp at the pool of the server the session's
 * __neki.target wants (the chosen primary, or a standby by replica_recency / _affinity); a
 * shard without standbys keeps its primary. No primary (a failover): held for at most
 * failover_hold_timeout, polled; the timer calls route_exec_continue() once there is one.
 */
enum rtarget_bind route_target_bind(struct route *r, struct rshard *sh, struct nk_error *err);
/*
 * <sh> could not connect to its shard's primary: with standbys and target primary, the
 * server is taken as lost until the admin's next rounds say otherwise, and <sh> is held
 * as when the shard has no primary (true: waiting, r->x.nwait counted); false: fail as usual.
 */
bool route_target_lost(struct route *r, struct rshard *sh);
/* Before sh->sp is unreferenced at the session's end: back to the primary's pool, the
 * standbys' pools and the timer given back. */
void route_target_free(struct rshard *sh);

/* The pool of server <k> of shard <shd> for <r>'s session (not referenced for it). */
struct spool *route_server_pool(const struct route *r, const struct cfg_shard *shd, size_t k,
				struct nk_error *err);

/* A target's wait ended (a pool's link, a failover hold): the next one's turn, or the exec. */
void route_exec_continue(struct route *r);

#endif
