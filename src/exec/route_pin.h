/*
 * route_pin.h - the entry points of src/exec/route_pin.c (its header comment says what it
 * does); the executor's shared types are route_int.h's.
 */
#ifndef NEKI_EXEC_ROUTE_PIN_H
#define NEKI_EXEC_ROUTE_PIN_H

#include "neki/base.h"

#include "route_int.h"

/* A statement of kind <pin> (a session-level advisory-lock call) goes to <sh>'s link. */
void route_pin_mark(struct rshard *sh, enum plan_pin pin);
/* The shard whose link holds the session's advisory locks (the planner's 60); NULL. */
const char *route_pin_lock_shard(const struct route *r);
/* Is <sh>'s link held by the session across transactions (or asked about)? */
bool route_pin_held(const struct rshard *sh);
/* The exec's statement went to <sh>: send the probe behind it when one is due and the link
 * is outside a transaction after it. False when sending failed. */
NK_MUSTCHECK bool route_pin_after_send(struct route *r, struct rshard *sh);
/* A message of the probe's answer (sh->probe_reading); *<done> after its ReadyForQuery. */
bool route_pin_probe_msg(struct route *r, struct rshard *sh, struct link *l,
			 const struct sbuf_pkt *pkt, bool *done);
/* <sh>'s link broke: when it was held, the session ends (its LISTEN and locks are gone on
 * the shard) and true is returned. */
bool route_pin_lost(struct route *r, struct rshard *sh, const struct nk_error *err);
/* DISCARD ALL: an exec on every held link releasing what it holds (UNLISTEN *, every
 * advisory lock), answered "DISCARD ALL"; false with <err> unset when none is held. */
bool route_pin_discard(struct route *r, struct nk_error *err);

#endif /* NEKI_EXEC_ROUTE_PIN_H */
