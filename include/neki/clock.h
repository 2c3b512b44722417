/*
 * neki/clock.h - the monotonic clock in microseconds and milliseconds (timeouts, waits,
 * durations, heartbeats): the one reader of CLOCK_MONOTONIC.
 */
#ifndef NEKI_CLOCK_H
#define NEKI_CLOCK_H

#include "neki/base.h"

#include <time.h>

/* CLOCK_MONOTONIC in microseconds. */
static inline uint64_t
nk_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* CLOCK_MONOTONIC in milliseconds. */
static inline uint64_t
nk_now_ms(void)
{
	return nk_now_us() / 1000u;
}

#endif /* NEKI_CLOCK_H */
