/*
 * route_listen.h - the entry points of src/exec/route_listen.c (its header comment says what it
 * does); the executor's shared types are route_int.h's.
 */
#ifndef NEKI_EXEC_ROUTE_LISTEN_H
#define NEKI_EXEC_ROUTE_LISTEN_H

#include "neki/base.h"

#include "route_int.h"

/* LISTEN / UNLISTEN / NOTIFY <sql>: set up the exec on the notify shard (*<exec>), or for
 * UNLISTEN when nothing listens, *<exec> false: the router answers. False with <err>. */
NK_MUSTCHECK bool route_listen_stmt(struct route *r, const char *tag, const char *sql,
				    const void *img, bool *exec, struct nk_error *err);
/* A NotificationResponse on <sh>'s link: sent now when the client is idle outside a
 * transaction, else held until it is; false pauses the link (too many held). */
bool route_listen_notify(struct route *r, struct rshard *sh, struct link *l,
			 const struct sbuf_pkt *pkt);
/* pg_notification_queue_usage(): the NOTICE naming __neki.notification_queue_usage(). */
NK_MUSTCHECK bool route_listen_usage_notice(struct route *r);

void route_listen_free(struct route *r);

#endif /* NEKI_EXEC_ROUTE_LISTEN_H */
