/*
 * parse.c - the libpg_query adapter (the only file that includes pg_query.h).
 *
 * For now it only reports which Postgres grammar the library carries, for `neki -V`.
 */
#include "neki/base.h"

#include "neki/router.h"

#include <pg_query.h>

const char *
parse_library_version(void)
{
	return "libpg_query (PostgreSQL " PG_VERSION " grammar)";
}
