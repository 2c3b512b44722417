/*
 * route_copy_int.h - COPY through a sharded database (route_copy.c, route_copy_row.c).
 *
 * COPY FROM STDIN: the COPY statement goes to every target shard; once each answered
 * CopyInResponse the client gets one. A sharded table's input is cut into rows (text, CSV,
 * binary; a row may span CopyData messages), each row's shard-key field is read and routed
 * (plan_route_text / plan_route_binary) and the row appended to that shard's next CopyData;
 * a reference or unsharded table's input goes unchanged to every target. The header line /
 * binary header goes to every shard. A bad row or a shard's error sends CopyFail to the
 * other shards; the client gets the first error, its CONTEXT line renumbered to the input's.
 * Reading the client stops while a shard's send queue is long (back-pressure). Into the
 * owner of an enabled global secondary index, each row's lookup columns are read too and
 * kept (route_gsi_copy_keep()); their lookup rows are inserted once every row passed.
 */
#ifndef NEKI_WORKER_ROUTE_COPY_INT_H
#define NEKI_WORKER_ROUTE_COPY_INT_H

#include "neki/base.h"

#include "neki/plan.h"
#include "neki/shm.h"

struct event;
struct route;

enum copy_fmt {
	COPY_FMT_TEXT = 0,
	COPY_FMT_CSV,
	COPY_FMT_BINARY,
};

/* What the router must know of the input to find a row's key. */
struct copy_opts {
	enum copy_fmt fmt;
	char delim, quote, escape;	/* CSV escape 0 when it equals the quote */
	const char *null_str;		/* borrowed */
	size_t null_len;
	bool force_null, force_not_null;	/* the key column is in FORCE_NULL / FORCE_NOT_NULL */
	uint32_t key_pos;		/* the key's field number in each row */
};

enum copy_bin_state {
	COPY_BIN_SIG = 0,	/* signature, flags, extension length (19 bytes) */
	COPY_BIN_EXT,		/* header extension */
	COPY_BIN_COUNT,		/* a tuple's field count (2 bytes) */
	COPY_BIN_LEN,		/* a field's length (4 bytes) */
	COPY_BIN_DATA,		/* a field's bytes */
};

/* The line end style of text and CSV input: the first line's, as Postgres detects it. */
enum copy_eol {
	COPY_EOL_UNKNOWN = 0,
	COPY_EOL_NL,			/* "\n" */
	COPY_EOL_CR,			/* "\r" (old Mac) */
	COPY_EOL_CRNL,			/* "\r\n" */
};

/* A look-ahead of the text / CSV scan (the next byte decides). */
enum copy_pend {
	COPY_P_NONE = 0,
	COPY_P_ESC,			/* text: after a backslash */
	COPY_P_CR,			/* a line-ending "\r": a "\n" may follow */
	COPY_P_BS,			/* CSV: a backslash starting the row */
	COPY_P_MARK,			/* after the end-of-data marker "\." */
	COPY_P_MARK_CR,			/* CRNL: after "\.\r" */
};

/* Where the scan of the input is (kept across CopyData messages). */
struct copy_scan {
	bool esc;			/* CSV: after the escape char inside quotes */
	bool in_quote;			/* CSV */
	bool mid_row;			/* the row's first byte was seen */
	enum copy_eol eol;
	enum copy_pend pend;
	uint8_t replay[2];		/* CSV: bytes after a row-starting backslash */
	uint32_t nreplay;
	uint64_t rowpos;		/* bytes of the row before this message */
	uint64_t marker;		/* COPY_SCAN_EOD: the row's bytes before "\." */
	uint32_t lines;			/* CSV: line ends counted inside quotes (Postgres' rule) */
	uint32_t row_lines;		/* those of the row that ended */
	uint32_t term;			/* the ended row's line end bytes (0, 1, 2) */
	const char *err, *hint;		/* COPY_SCAN_ERROR: Postgres' message and hint */
	enum copy_bin_state bst;
	uint8_t nb[19];			/* binary: the number (or header) being read */
	uint32_t nbn, need;
	int32_t fields;			/* binary: fields left in the tuple */
	bool header_row;		/* binary: the row that ended is the file header */
	bool trailer;			/* binary: the row that ended is the trailer (-1) */
};

/* The key of one row. */
enum copy_key_rc {
	COPY_KEY_OK = 0,
	COPY_KEY_NULL,
	COPY_KEY_MISSING,	/* the row has fewer fields */
};

enum copy_scan_rc {
	COPY_SCAN_MORE = 0,	/* every byte belongs to the current row */
	COPY_SCAN_ROW,		/* a row ended: *end bytes (its line end, s->term bytes, included) */
	COPY_SCAN_EOD,		/* the end-of-data marker: *end bytes read through it; the row's
				 * first s->marker bytes (0: none) are a last row; the rest is not
				 * read */
	COPY_SCAN_ERROR,	/* Postgres' 22P04 (s->err, s->hint) on the current line */
};

/*
 * Scan <p>[0..n) for the end of the current row, with the line ends, end-of-data marker and
 * errors of Postgres' CopyReadLineText: text and CSV lines end at "\n", "\r\n" or "\r", as
 * the first line does; another one later is an error ("literal carriage return found in
 * data"), so is a bad "\." (the scan state is kept across calls).
 */
enum copy_scan_rc copy_scan_row(const struct copy_opts *o, struct copy_scan *s, const uint8_t *p,
				size_t n, size_t *end);

/* The input ended inside a row (text and CSV): the look-ahead resolved as at Postgres' EOF.
 * COPY_SCAN_ROW (the bytes read are a row), COPY_SCAN_ERROR or COPY_SCAN_MORE (none). */
enum copy_scan_rc copy_scan_finish(const struct copy_opts *o, struct copy_scan *s);

/*
 * The key field of the complete row <row>/<len> (text and CSV: without its line end; binary:
 * a tuple). Text values are unescaped into <buf> (at least <len> bytes); binary values point
 * into the row. Sets val and vlen on COPY_KEY_OK.
 */
enum copy_key_rc copy_row_key(const struct copy_opts *o, const uint8_t *row, size_t len,
			      uint8_t *buf, const uint8_t **val, size_t *vlen);

/* The length of the row of <len> bytes that ended last without its line end. */
size_t copy_row_content(const struct copy_scan *s, size_t len);

/* One target shard of COPY FROM. */
struct rcopy_target {
	enum { COPY_T_SENT = 0, COPY_T_IN, COPY_T_ENDING, COPY_T_DONE } st;
	uint8_t *buf;			/* owned: the CopyData being filled (5-byte header first) */
	size_t len, cap;
	uint32_t *ring;			/* owned: input line of its recent lines (routed) */
	uint64_t lines;			/* lines sent to it */
};

struct rcopy {
	bool routed;			/* sharded: rows by key; else the input to every target */
	bool started;			/* the client got CopyInResponse */
	bool aborted, client_done, eod, has_err;
	struct nk_error err;		/* the first error (where: CONTEXT) */
	char table[64];			/* for CONTEXT: COPY <table>, line N */
	char key_col[64];
	bool header;			/* text / CSV HEADER */
	struct copy_opts opts;
	struct copy_scan scan;
	struct plan plan;		/* copy; arrays in the route's arena */
	struct plan_input in;
	struct shm_topo_ref ref;	/* pinned while routing */
	bool pinned;
	const char *shard_ptr[32];	/* shard uid pointers seen, and their target */
	uint32_t shard_tg[32], nshard_ptr;
	uint32_t ngot;			/* CopyInResponses */
	uint8_t *gmsg;			/* owned: the first CopyInResponse */
	uint32_t glen;
	uint64_t line;			/* input lines (rows) so far */
	uint8_t *carry;			/* owned: the row begun in an earlier message */
	size_t clen, ccap;
	uint8_t *val;			/* owned: unescaped key value */
	size_t vcap;
	bool bin_trailer;		/* binary: the trailer came */
	struct copy_opts *gsi_opts;	/* owned: plan.gsi's fields, each read as a key is */
	struct event *ev_wait;		/* owned: back-pressure poll */
	struct rcopy_target t[32];	/* by target number */
};

#endif /* NEKI_WORKER_ROUTE_COPY_INT_H */
