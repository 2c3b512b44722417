/*
 * catoids.h - the admin's load of the authoritative OIDs of user-defined types (catoids.c).
 */
#ifndef NEKI_ADMIN_CATOIDS_H
#define NEKI_ADMIN_CATOIDS_H

#include "neki/base.h"

struct catalog;
struct pgc;
struct topo_model;

/*
 * Read the user-defined types of database <c>->dbname on the authoritative shard <auth>,
 * then on every other shard of topology <m>, over <conn> (pointed at each in turn), into <c>
 * (cat_set_auth_types(), cat_map_shard_types()); then call <done>(<arg>) (at once with one
 * shard or on no memory, else from the loop). A
 * shard that cannot be read keeps its own OIDs (a warning is logged). <c> must stay alive
 * until <done>. <version> is the cluster schema version of the load: what a shard answered
 * at the same version is reused, without a query.
 */
void catoids_load(struct pgc *conn, const struct topo_model *m, const char *auth,
		  struct catalog *c, uint64_t version, void (*done)(void *arg), void *arg);

#endif /* NEKI_ADMIN_CATOIDS_H */
