/*
 * route_ddl.h - the entry points of src/exec/route_ddl.c (its header comment says what it
 * does); the executor's shared types are route_int.h's.
 */
#ifndef NEKI_EXEC_ROUTE_DDL_H
#define NEKI_EXEC_ROUTE_DDL_H

#include "neki/base.h"

#include "route_int.h"

/* After DDL, the catalog loaded: the NOTICE naming __neki.wait_for_ddl(schema_version,
 * cluster_version), outside a transaction block. */
void route_ddl_notice(struct route *r);
/* The table DDL statement <st> creates or alters, for the advisor's NOTICEs after it. */
void route_ddl_target(struct route *r, const struct stmt *st);

#endif /* NEKI_EXEC_ROUTE_DDL_H */
