/*
 * route_deadlock.h - the statement of a route the distributed deadlock detector cancels
 * (route_deadlock.c): its shard's 57014 becomes the client's 40P01.
 */
#ifndef NEKI_EXEC_ROUTE_DEADLOCK_H
#define NEKI_EXEC_ROUTE_DEADLOCK_H

#include "neki/base.h"

struct nk_error;
struct rshard;

/* The error <err> came from <sh>: when <sh>'s statement was canceled to break a wait cycle
 * (route_cancel_deadlocked) and <err> is that cancel's 57014, make it the 40P01 the client
 * gets, and true. */
bool route_deadlock_error(const struct rshard *sh, struct nk_error *err);

#endif /* NEKI_EXEC_ROUTE_DEADLOCK_H */
