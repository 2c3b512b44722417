/*
 * neki/memstream.h - a string built with stdio (src/common/memstream.c): open_memstream()'s
 * contract without its cost. glibc's open_memstream() zeroes an 8 kB buffer at every open,
 * which was most of what a routed statement that writes SQL text (a GSI step, an inlined
 * parameter, a lookup INSERT) cost the router; this stream grows its string as it is
 * written, from nothing.
 */
#ifndef NEKI_MEMSTREAM_H
#define NEKI_MEMSTREAM_H

#include "neki/base.h"

#include <stddef.h>
#include <stdio.h>

/*
 * As open_memstream(3): a stream for writing whose bytes, after each fflush() and at
 * fclose(), are in *<bufp> (NUL-terminated, malloc'd: the caller frees it, also when the
 * stream failed) with their count in *<sizep>. NULL (errno set) when out of memory.
 */
FILE *nk_memstream(char **bufp, size_t *sizep);

#endif /* NEKI_MEMSTREAM_H */
