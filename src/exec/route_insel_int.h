/*
 * route_insel_int.h - the state of an INSERT ... SELECT across shards, shared by
 * route_insel.c (rounds, rows, answers) and route_insel_sql.c (the messages sent).
 */
#ifndef NEKI_EXEC_ROUTE_INSEL_INT_H
#define NEKI_EXEC_ROUTE_INSEL_INT_H

#include "neki/base.h"

#include "neki/merge.h"
#include "neki/pktbuf.h"
#include "route_int.h"

#define INSEL_CURSOR "__neki_insel"
#define INSEL_FETCH_ROWS 1000		/* rows one FETCH asks a source shard for */
#define INSEL_BATCH_ROWS 1000		/* rows of one INSERT */
#define INSEL_PARAMS_MAX 65535		/* parameters of one statement (an int16 count) */
#define INSEL_INSERTS_MAX 8		/* INSERTs of one target in one round */
#define INSEL_OPS_MAX (INSEL_INSERTS_MAX + 4)
#define INSEL_CLIENT_MAX (256 * 1024)	/* client queue bytes before the next round waits */
#define INSEL_FIRST_USER_OID 16384	/* OIDs below are built in, equal on every server */
#define INSEL_OID_INT8 20
#define INSEL_OID_BYTEA 17
#define INSEL_OID_TEXT 25

/* Source columns that need a merge step across shards (as route.c's merged SELECT). */
#define INSEL_MERGE_FLAGS (STMT_F_AGG | STMT_F_ORDER | STMT_F_LIMIT | STMT_F_OFFSET | \
			   STMT_F_GROUP | STMT_F_HAVING | STMT_F_DISTINCT | STMT_F_UNION | \
			   STMT_F_INTERSECT | STMT_F_WINDOW | STMT_F_WITH_TIES | \
			   STMT_F_GROUPING_SETS)

/* One statement of a shard's message in a round; its answer ends with CommandComplete. */
enum insel_op {
	INSEL_OP_NONE = 0,
	INSEL_OP_DECLARE,	/* DECLARE the cursor over the source's shard query */
	INSEL_OP_FETCH,		/* FETCH FORWARD n: RowDescription, rows, FETCH k */
	INSEL_OP_CLOSE,		/* CLOSE the cursor */
	INSEL_OP_INSERT,	/* one batch: [RowDescription, RETURNING rows], INSERT 0 k */
	INSEL_OP_FINAL,		/* the merge's final combine query */
	INSEL_OP_DESCRIBE,	/* RETURNING and no row at all: RowDescription only */
};

struct insel_buf {
	uint8_t *p;		/* owned */
	size_t len, cap;
};

/* A row waiting for its INSERT: where its Bind values are in the target's buffer. */
struct insel_pend {
	uint64_t seq;		/* its number in source order (RETURNING) */
	uint32_t len;		/* bytes of its values */
};

/* One shard of the statement: a source (a cursor), a target (rows to write), or both. */
struct insel_shard {
	uint32_t sh;			/* index in r->sh */
	bool is_src, is_tgt;
	uint32_t src_no;		/* source number (the merge's shard number) */
	bool declared, open, exhausted, described;
	bool first_copy;		/* the target whose RETURNING and count the client gets */
	struct insel_buf vals;		/* Bind values of the rows waiting */
	struct insel_pend *pend;	/* owned: the rows waiting, in source order */
	uint32_t npend, cap_pend;
	/* the round in flight */
	enum insel_op ops[INSEL_OPS_MAX];
	uint32_t nops, cur;
	uint64_t *sent;			/* owned: seq of each row its INSERTs carry */
	uint32_t nsent, cap_sent;
	struct rrow *ret;		/* owned: its RETURNING rows */
	uint32_t nret, cap_ret;
};

struct rinsel {
	struct plan plan;		/* the INSERT's plan (arrays in r->arena) */
	const struct plan_insel *is;	/* plan.insel */
	struct shm_topo_ref ref;	/* the image the statement was planned with, pinned */
	bool pinned;
	struct plan_input in;		/* for plan_route_text(): that image, the session */
	struct insel_shard s[ROUTE_SHARDS_MAX];
	uint32_t ns, nsrc;
	int8_t by_sh[ROUTE_SHARDS_MAX];	/* r->sh index -> s index (-1 none) */
	const char *shard_ptr[ROUTE_SHARDS_MAX];	/* routed uid pointers and their s index */
	uint32_t shard_s[ROUTE_SHARDS_MAX], nshard_ptr;
	const char *src_sql;		/* what each source shard's cursor reads */
	struct plan_merge spec;		/* merged source: its spec (in r->arena) */
	struct merge *mg;		/* owned: merged source */
	bool final_sent;
	/* the source's columns, known from the first RowDescription */
	bool have_desc;
	uint32_t ncols;
	uint32_t *oids;			/* owned: Parse type of each column (0: unknown) */
	const struct plan_fill **fills;	/* owned array: the fills of this source's width */
	uint32_t nfills;
	int32_t key_col, key_fill;	/* sharded: the key's column, or its fill (-1) */
	int64_t *fill_vals;		/* owned: values for the staged rows */
	uint32_t fill_cap;
	/* rows read and not routed yet: DataRow bodies, each after its uint32 length */
	struct insel_buf stage;
	uint32_t nstage;
	uint64_t seq;			/* rows routed so far */
	uint64_t total;			/* rows inserted (the tag's count) */
	uint32_t batch;			/* rows per INSERT */
	bool rowdesc_sent, describe_done, client_wait;
	bool failed;			/* a row or the merge refused: <err> */
	struct nk_error err;
	/* the client's bound values (extended protocol): $1..$m of every statement sent */
	uint16_t ncp;			/* m: their count */
	uint8_t *cfmt;			/* owned: m int16 format codes */
	uint8_t *cvals;			/* owned: m (int32 len, bytes) */
	size_t cvals_len;
	uint8_t *rfmt;			/* owned: RETURNING result format codes */
	uint16_t nrfmt;
};

/* ---- route_insel.c ---- */

/* Append <n> bytes to <b> (doubling its capacity); false on no memory, <b> unchanged. */
bool insel_buf_put(struct insel_buf *b, const void *p, size_t n);
/* Make the array <*arr> of <*cap> elements of <size> bytes hold <need>; false on no memory
 * (the array stays as it was). */
bool insel_grow(void **arr, uint32_t *cap, uint32_t need, size_t size);
/* A big-endian uint32 (message lengths, value lengths). */
uint32_t insel_be32(const uint8_t *p);

/* ---- route_insel_sql.c ---- */

/* Append text <s> (no NUL) to the statement being built. */
bool insel_sql_put(struct insel_buf *b, const char *s);
/* Parse + Bind (+ Describe) + Execute of <sql>, with the client's values when <client>. */
bool insel_put_stmt(struct route *r, struct rinsel *x, struct pktbuf *pb, const char *sql,
		    bool client, bool describe);
/* The INSERTs of target <e> in this round (its waiting rows, INSEL_INSERTS_MAX batches at
 * most); the rows sent leave the waiting list, their numbers are kept for RETURNING. */
bool insel_put_inserts(struct route *r, struct rinsel *x, struct insel_shard *e,
		       struct pktbuf *pb);
/* RETURNING and no row written: the RowDescription a batch would have. */
bool insel_put_describe(struct route *r, struct rinsel *x, struct insel_shard *e,
			struct pktbuf *pb);

#endif /* NEKI_EXEC_ROUTE_INSEL_INT_H */
