/*
 * twophase.h - what the atomic commit (src/exec/route_2pc.c) and its recovery in the admin
 * process (src/admin/recover.c) share: the decision table on every shard, the global ids'
 * prefix and the text that creates the table where it is missing.
 *
 * A global id is neki:<host>-<port>:<epoch>.<worker pid>:<seq>:<decision shard uid> (the
 * epoch taken for this start of the router from __neki.router_epochs on the authoritative
 * shard, src/admin/epoch.c; ids made before it were <worker pid>x<start> there); recovery
 * reads only the prefix and the last field. The decision participant commits a row (gid,
 * commit = true) in its own transaction, and that commit is the decision. Recovery inserts
 * (gid, false) ON CONFLICT DO NOTHING: the first row decides.
 */
#ifndef NEKI_TWOPHASE_H
#define NEKI_TWOPHASE_H

#define NK_2PC_TABLE "__neki.tx_decision"
#define NK_2PC_PREFIX "neki:"
#define NK_2PC_GID_MAX 200		/* Postgres' GIDSIZE */

/* Creates the decision table when it is missing (under an advisory lock, no NOTICE). */
#define NK_2PC_ENSURE_SQL \
	"DO $neki$BEGIN IF to_regclass('" NK_2PC_TABLE "') IS NULL THEN " \
	"PERFORM pg_advisory_xact_lock(7310431); CREATE SCHEMA IF NOT EXISTS __neki; " \
	"CREATE TABLE IF NOT EXISTS " NK_2PC_TABLE " (gid text PRIMARY KEY, " \
	"commit boolean NOT NULL, participants text NOT NULL DEFAULT '', " \
	"decided timestamptz NOT NULL DEFAULT now()); GRANT USAGE ON SCHEMA __neki TO PUBLIC; " \
	"GRANT SELECT, INSERT ON " NK_2PC_TABLE " TO PUBLIC; END IF; END$neki$;"

/* Inserts the decision ($1 gid, $2 commit) unless one is there; answers the row's commit. */
#define NK_2PC_DECIDE_SQL \
	"WITH ins AS (INSERT INTO " NK_2PC_TABLE " (gid, commit) VALUES ($1, $2::boolean) " \
	"ON CONFLICT (gid) DO NOTHING RETURNING commit) SELECT commit FROM ins UNION ALL " \
	"SELECT commit FROM " NK_2PC_TABLE " WHERE gid = $1"

#endif /* NEKI_TWOPHASE_H */
