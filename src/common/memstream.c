/*
 * memstream.c - nk_memstream() (neki/memstream.h): a fopencookie() stream whose writes
 * append to a string that doubles as it grows; the caller's pointer and size follow every
 * write, as open_memstream() makes them follow every flush.
 */
#include "neki/base.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "neki/memstream.h"

struct nk_ms {
	char **bufp;
	size_t *sizep;
	size_t cap;
};

static ssize_t
ms_write(void *cookie, const char *data, size_t n)
{
	struct nk_ms *ms = cookie;
	size_t len = *ms->sizep;

	if (len + n + 1 > ms->cap) {
		size_t cap = ms->cap ? ms->cap : 64;
		char *grown;

		while (cap < len + n + 1)
			cap *= 2;
		if ((grown = realloc(*ms->bufp, cap)) == NULL) {
			errno = ENOMEM;
			return -1;
		}
		*ms->bufp = grown;
		ms->cap = cap;
	}
	memcpy(*ms->bufp + len, data, n);
	(*ms->bufp)[len + n] = '\0';
	*ms->sizep = len + n;
	return (ssize_t)n;
}

static int
ms_close(void *cookie)
{
	free(cookie);
	return 0;
}

/* nk_memstream: see neki/memstream.h. */
FILE *
nk_memstream(char **bufp, size_t *sizep)
{
	static const cookie_io_functions_t io = { NULL, ms_write, NULL, ms_close };
	struct nk_ms *ms = malloc(sizeof(*ms));
	FILE *f;

	*bufp = calloc(1, 1);
	*sizep = 0;
	if (ms == NULL || *bufp == NULL) {
		free(ms);
		free(*bufp);
		*bufp = NULL;
		errno = ENOMEM;
		return NULL;
	}
	*ms = (struct nk_ms){ bufp, sizep, 1 };
	if ((f = fopencookie(ms, "w", io)) == NULL) {
		free(ms);
		free(*bufp);
		*bufp = NULL;
	}
	return f;
}
