/*
 * route_ddl.c - after DDL on every shard (the catalog reloaded, route_cat_wait()): Neki's
 * NOTICE naming __neki.wait_for_ddl(schema_version, cluster_version), the barrier that
 * returns once every live neki host has the new catalog (src/admin/ddlsync.c).
 * Entry point: route_ddl_notice().
 */
#include "neki/base.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "neki/log.h"
#include "neki/pktbuf.h"
#include "neki/proto.h"
#include "neki/shm.h"
#include "route_int.h"
#include "route_ddl.h"

/* route_ddl_target: see route_int.h. */
void
route_ddl_target(struct route *r, const struct stmt *st)
{
	r->x.ddl.target[0] = '\0';
	for (uint32_t i = 0; i < st->nrels; i++)
		if (st->rels[i].is_target && st->rels[i].name != NULL) {
			snprintf(r->x.ddl.target, sizeof(r->x.ddl.target), "%s.%s",
				 st->rels[i].schema ? st->rels[i].schema : "public",
				 st->rels[i].name);
			return;
		}
}

/* The advisor's findings about the DDL's table: one NOTICE each, the advice as HINT. */
static void
route_ddl_advice(struct route *r, struct pktbuf *pb)
{
	static char text[SHM_ADVICE_MAX];
	size_t tl = strlen(r->x.ddl.target);
	char *line, *save = NULL;

	if (tl == 0 || !shm_advice_get(shm_schema_version(), text, sizeof(text)))
		return;
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *rule = strchr(line, '\t'), *advice = rule ? strchr(rule + 1, '\t') : NULL;
		struct nk_error e;

		if (advice == NULL || strncmp(line, r->x.ddl.target, tl) != 0 ||
		    (line[tl] != '\t' && line[tl] != '.'))
			continue;
		*rule++ = '\0';
		*advice++ = '\0';
		nk_error_set(&e, ERRCODE_SUCCESSFUL_COMPLETION,
			     "%s breaks the schema rule %s (__neki.check_schema)",
			     line, rule);
		nk_error_hint(&e, "%s", advice);
		e.severity = NK_SEV_NOTICE;
		pktbuf_write_notice(pb, &e);
	}
}

/* route_ddl_notice: see route_int.h. */
void
route_ddl_notice(struct route *r)
{
	struct nk_error e;
	struct pktbuf pb;

	r->x.ddl.notice = false;
	if (r->tx != 'I')
		return;		/* (in a transaction block: not committed yet) */
	nk_error_set(&e, ERRCODE_SUCCESSFUL_COMPLETION,
		     "DDL is committed and the change is visible on this router; "
		     "other routers may not see it yet. To wait until it is visible on every "
		     "router, use __neki.wait_for_ddl(%" PRIu64 ", %" PRIu64 ")",
		     shm_schema_version(), shm_topo_revision());
	e.severity = NK_SEV_NOTICE;
	pktbuf_init(&pb, 320);
	pktbuf_write_notice(&pb, &e);
	route_ddl_advice(r, &pb);
	if (!route_send(r, &pb))
		log_debug("the wait_for_ddl notice was not sent");	/* (the session closes) */
}
