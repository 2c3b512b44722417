/*
 * dns.c - the c-ares adapter (the only file that includes ares.h).
 *
 * For now it only reports the library version for `neki -V` and the startup log.
 */
#include "neki/base.h"

#include "neki/net.h"

#include <ares.h>

const char *
dns_library_version(void)
{
	return ares_version(NULL);
}
