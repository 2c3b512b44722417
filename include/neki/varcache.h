/*
 * neki/varcache.h - the tracked parameters of a client and of a link (src/pool/varcache.c):
 * client_encoding, DateStyle, TimeZone, standard_conforming_strings, application_name and
 * track_extra_parameters, and the light lexer that sees what a query text does to them.
 */
#ifndef NEKI_VARCACHE_H
#define NEKI_VARCACHE_H

#include "neki/base.h"

struct cfg;
struct link;
struct session;

#define VAR_MAX 16		/* tracked parameters: 5 fixed + track_extra_parameters */

/* A set of tracked values; val[i] belongs to varcache_name(i). NULL = unknown / default. */
struct varcache {
	const char *val[VAR_MAX];	/* interned (intern_ref): compared by pointer */
	char *search_path;	/* owned: raw SQL value of the last SET search_path; NULL = default */
};

/* A statement that bears on search_path, as the lexer saw it. */
enum sp_op_kind {
	SP_OP_SET = 0,		/* SET [SESSION] search_path, set_config('search_path', v, false) */
	SP_OP_RESET = 1,	/* RESET search_path / ALL, SET search_path TO DEFAULT, DISCARD ALL */
	SP_OP_SAVEPOINT = 2,	/* SAVEPOINT name */
	SP_OP_RELEASE = 3,	/* RELEASE [SAVEPOINT] name */
	SP_OP_ROLLBACK_TO = 4,	/* ROLLBACK [WORK | TRANSACTION] TO [SAVEPOINT] name */
};

#define QFX_OPS_MAX 8		/* search_path statements kept per query text (the last ones) */

struct query_op {
	enum sp_op_kind kind;
	char arg[512];		/* SET: the value as SQL; savepoints: the name (folded) */
};

/* What a simple-protocol query text does to session state (a light lexer, no parser). */
struct query_effects {
	bool discard_all;	/* DISCARD ALL */
	bool deallocate_all;	/* DEALLOCATE [PREPARE] ALL */
	size_t n_ops;
	struct query_op ops[QFX_OPS_MAX];	/* in statement order */
};

/* Number of tracked parameter names (5 fixed + track_extra_parameters). */
size_t varcache_count(void);
/* Name of tracked parameter <i>, as the server reports it. */
const char *varcache_name(size_t i);
/* Index of <name> (case-insensitive), -1 when not tracked. */
int varcache_index(const char *name);
/* Rebuild the name table from the configuration (track_extra_parameters). */
void varcache_configure(const struct cfg *c);
/* Set <name> = <value> in <vc>; false when <name> is not tracked (or no memory). */
bool varcache_set(struct varcache *vc, const char *name, const char *value);
void varcache_cleanup(struct varcache *vc);
/*
 * Append to <sql> (capacity <cap>) the SET statements that make link <l> (whose
 * search_path is <link_sp>) match <vc>; a NULL <l> gets every value <vc> has (a link just
 * reset). Returns the number of SETs, -1 if it does not fit.
 */
int varcache_diff_sql(const struct varcache *vc, struct link *l, const char *link_sp,
		      char *sql, size_t cap);
/* Scan a simple-protocol query text for session-state effects. */
void varcache_scan_query(const char *sql, size_t len, struct query_effects *fx);

#endif /* NEKI_VARCACHE_H */
