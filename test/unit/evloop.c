/*
 * evloop.c - drive a libevent loop in unit tests (evloop.h).
 */
#include "evloop.h"

#include <time.h>

#include <event2/event.h>

static void
tick_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
}

static double
now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

bool
evloop_run_until(struct event_base *base, bool (*done)(void *), void *arg, double secs)
{
	struct event *tick = event_new(base, -1, EV_PERSIST, tick_cb, NULL);
	struct timeval tv = { 0, 5000 };	/* wake up often enough to re-check <done> */
	double t0 = now_s();
	bool ok = false;

	event_add(tick, &tv);
	for (;;) {
		if (done(arg)) {
			ok = true;
			break;
		}
		if (now_s() - t0 > secs)
			break;
		event_base_loop(base, EVLOOP_ONCE);
	}
	event_free(tick);
	return ok;
}

bool
evloop_never(void *arg)
{
	(void)arg;
	return false;
}
