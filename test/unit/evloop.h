/*
 * evloop.h - drive a libevent loop in unit tests: bounded polling, never a bare sleep.
 */
#ifndef NEKI_TEST_EVLOOP_H
#define NEKI_TEST_EVLOOP_H

#include <stdbool.h>

struct event_base;

/* Run <base> until <done>(<arg>) is true (true) or <secs> seconds pass (false). */
bool evloop_run_until(struct event_base *base, bool (*done)(void *), void *arg, double secs);

/* A <done> that never is: evloop_run_until(base, evloop_never, NULL, s) runs for <s>. */
bool evloop_never(void *arg);

#endif /* NEKI_TEST_EVLOOP_H */
