/*
 * neki/sdnotify.h - systemd's notify protocol without libsystemd (src/common/sdnotify.c).
 *
 * When NOTIFY_SOCKET names a Unix datagram socket ("/path" or "@abstract"), the master
 * sends it state lines: READY=1, RELOADING=1 with MONOTONIC_USEC, STOPPING=1, STATUS=.
 * Without NOTIFY_SOCKET every call does nothing.
 */
#ifndef NEKI_SDNOTIFY_H
#define NEKI_SDNOTIFY_H

#include "neki/base.h"

/* Read NOTIFY_SOCKET once and drop it from the environment (children must not notify). */
void sdnotify_init(void);

/* True when a notify socket is configured. */
bool sdnotify_enabled(void);

/* Send one datagram built from the printf-style <fmt>; logs a warning on failure. */
void sdnotify_send(const char *fmt, ...) NK_PRINTF(1, 2);

/* "READY=1\nSTATUS=<status>". */
void sdnotify_ready(const char *status);

/* "RELOADING=1\nMONOTONIC_USEC=<now>". */
void sdnotify_reloading(void);

/* "STOPPING=1\nSTATUS=<status>". */
void sdnotify_stopping(const char *status);

#endif /* NEKI_SDNOTIFY_H */
