/*
 * gsibuild_int.h - what gsibuild.c (the steps of __neki.gsi_build) and gsibuild_scan.c (its
 * chunked passes) share: the state of the one build running.
 */
#ifndef NEKI_ADMIN_GSIBUILD_INT_H
#define NEKI_ADMIN_GSIBUILD_INT_H

#include "neki/base.h"

#include <stdio.h>
#include <time.h>

#include <event2/event.h>

#include "neki/error.h"
#include "neki/keyspace.h"
#include "pgconn.h"

#define GB_CHUNK 1000		/* owner rows per chunk; lookup rows per orphan check */
#define GB_PASSES 3		/* the fill, then verifying passes till one writes nothing */
#define GB_RECHECKS 5		/* looks at a lookup row naming no owner row */
#define GB_RECHECK_MS 200
#define GB_POLL_MS 100
#define GB_MAX_COLS 16
/* A lock the build waits for longer (an owner row a transaction holds, a wait cycle with
 * one over two shards that no server sees) fails it with 55P03: a new call resumes. */
#define GB_LOCK_TIMEOUT "30s"

enum gb_step {
	GB_PREP,	/* the owner's primary key and column types, the lookup's key */
	GB_TRUNCATE,	/* (a disabled GSI) the lookup table emptied */
	GB_WRITE_ONLY,	/* revision: enabled, write_only */
	GB_ROUTERS,	/* every router runs it, nothing planned before still runs */
	GB_OLD_TX,	/* per owner shard: the transactions begun before have ended */
	GB_FILL,	/* per owner shard, chunk by chunk; GB_PASSES at most */
	GB_DUPS,	/* unique: no value twice on one owner shard */
	GB_ORPHANS,	/* per lookup shard, chunk by chunk */
	GB_RECHECK,	/* the lookup rows that named no owner row, asked again */
	GB_ENABLE,	/* revision: enabled */
	GB_REVERT,	/* revision: disabled (a duplicate or a NULL), then the error */
};

struct gb;

struct gb_conn {
	struct gb *b;
	size_t idx;			/* in its array */
	char uid[ADM_NAME_MAX];
	struct pgc *c;
};

/* Rows kept past their callback: v[row * ncols + col], NULL for SQL NULL. */
struct gb_rows {
	size_t n, ncols;
	char **v;
};

struct gb {
	struct adm_req *req;
	char db[ADM_NAME_MAX], name[ADM_NAME_MAX];
	double timeout_s;
	uint64_t deadline_ms;
	char *owner, *lookup;		/* "schema"."table" */
	char *lc[GB_MAX_COLS];		/* the lookup row's columns: the indexed ones first */
	char *lct[GB_MAX_COLS];		/* their types in the owner */
	char *pk[GB_MAX_COLS];		/* the owner's primary key */
	char *lkey[GB_MAX_COLS];	/* the lookup's primary key */
	size_t lkpos[GB_MAX_COLS];	/* where each lkey column is in lc */
	size_t nlc, nidx, nkey, npk;
	bool unique, ignore_null, was_disabled, in_tx;
	struct gb_conn *oc, *lk;	/* owner shards, lookup shards */
	size_t noc, nlk;
	uint32_t lgroup, lindex;	/* the lookup table's group and index (NONE) */
	size_t lkeycol;			/* the lc column its index reads */
	enum ks_type ltype;
	enum gb_step step;
	size_t cur, pending, pass, rechecks;
	struct gb_rows chunk, last, cand;
	bool scan_done;			/* GB_RECHECK: the orphan scan has ended */
	size_t *dest;			/* GB_FILL: each chunk row's lookup shard (SIZE_MAX: none) */
	bool *hit, *kept;		/* GB_ORPHANS, GB_RECHECK: per chunk row */
	uint64_t written, written_pass, scanned_pass, revision;
	char since[64];
	time_t started;
	struct event *timer;
	struct nk_error err;
};

/* gsibuild.c */
void gb_next(struct gb *b);	/* run b->step */
/* Fail with <err>; <revert>: a duplicate or a NULL, the GSI goes back to disabled. */
void gb_fail(struct gb *b, const struct nk_error *err, bool revert);
void gb_oom(struct gb *b);
/* A query's error <err> (NULL: none) on shard <uid> fails the build: true then. */
bool gb_failed(struct gb *b, const struct nk_error *err, const char *uid);

/* gsibuild_scan.c */
void gb_rows_clear(struct gb_rows *r);
/* The text written to <f> (closed), *<buf>; NULL (freed) when it failed. */
char *gb_text_end(FILE *f, char **buf);
void gb_fill_chunk(struct gb *b);	/* GB_FILL: the next chunk (of b->cur), or the pass end */
void gb_dups(struct gb *b);		/* GB_DUPS: owner shard b->cur, or the next step */
void gb_orphan_chunk(struct gb *b);	/* GB_ORPHANS: the next chunk of lookup rows */
void gb_recheck(struct gb *b);		/* GB_RECHECK: the candidates asked again */

#endif /* NEKI_ADMIN_GSIBUILD_INT_H */
