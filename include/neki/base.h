/*
 * neki/base.h - the first include of every neki source file.
 *
 * Pulls in autoconf.h (configure's results) and the standard integer/bool types, and defines
 * the few attributes and helpers every module uses: NK_MUSTCHECK, NK_PRINTF,
 * container_of, NK_ARRAY_LEN, NK_ASSERT (always on) and nk_panic().
 */
#ifndef NEKI_BASE_H
#define NEKI_BASE_H

#include "autoconf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define NK_MUSTCHECK __attribute__((warn_unused_result))
#define NK_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#define NK_NORETURN __attribute__((noreturn))
#define NK_UNUSED __attribute__((unused))

/*
 * The pgbouncer release whose interface neki implements. NK_VERSION_LINE is what SHOW VERSION
 * answers and the first line of `neki -V`: tools (and pgbouncer's own test suite) compare the
 * two and parse "PgBouncer X.Y.Z" from either.
 */
#define NK_PGBOUNCER_VERSION "1.25.2"
#define NK_VERSION_LINE "PgBouncer " NK_PGBOUNCER_VERSION " (neki " NEKI_VERSION ")"

#define NK_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#define container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))

/* Log file:line and the message, then abort. Used by NK_ASSERT. */
NK_NORETURN void nk_panic(const char *file, int line, const char *fmt, ...) NK_PRINTF(3, 4);

/* Invariant check; stays on in release builds. */
#define NK_ASSERT(cond)                                                        \
	do {                                                                   \
		if (__builtin_expect(!(cond), 0))                              \
			nk_panic(__FILE__, __LINE__, "assertion failed: %s", #cond); \
	} while (0)

#endif /* NEKI_BASE_H */
