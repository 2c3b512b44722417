/*
 * tls.c - the OpenSSL adapter for connections (with proto/scram.c, the only files that
 * include OpenSSL headers).
 *
 * For now it only reports the library version for `neki -V` and the startup log.
 */
#include "neki/base.h"

#include "neki/net.h"

#include <openssl/crypto.h>

const char *
tls_library_version(void)
{
	return OpenSSL_version(OPENSSL_VERSION);
}
