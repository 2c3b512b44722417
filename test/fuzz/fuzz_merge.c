/*
 * fuzz_merge.c - the merge of shard replies (src/merge, plan_merge_build() of
 * src/router/plan_merge.c): a multi-shard SELECT's merge spec, then the shards' messages
 * as the executor feeds them. Input: the statement (byte 0 picks one of a list of merge
 * shapes; 0xff: the text up to the first NUL), the shards, collation, LIMIT / OFFSET and
 * output options (byte 1, 2), then operations, each a byte (shard in the low bits, a shard
 * number past the last one is the final combine query) and its data: a RowDescription of
 * typed columns, a DataRow of values, a CommandComplete, a raw message, a pull. The merge
 * must refuse what does not fit its spec, never read out of bounds, and everything it lets
 * out must be well-formed RowDescription / DataRow / CommandComplete messages.
 */
#include "fuzz.h"

#include "neki/merge.h"
#include "neki/parse.h"
#include "neki/pktbuf.h"
#include "neki/plan.h"
#include "neki/proto.h"

#define FZ_MCOLS 16

static const char *const shapes[] = {
	"SELECT id FROM t ORDER BY id",
	"SELECT * FROM t ORDER BY id DESC",
	("SELECT g, count(*), sum(x), min(s), max(s), bool_and(b), bool_or(b), "
	 "string_agg(s, '-'), array_agg(x) FROM t GROUP BY g"),
	"SELECT sum(n), count(n), max(n) FROM t",
	"SELECT g, avg(x) FROM t GROUP BY g HAVING count(*) > 1 ORDER BY 2 DESC",
	"SELECT DISTINCT n FROM t ORDER BY n",
	"SELECT DISTINCT ON (g) g, id FROM t ORDER BY g, id DESC",
	"SELECT id FROM t ORDER BY id LIMIT 10 OFFSET 2",
	"SELECT count(DISTINCT x), string_agg(DISTINCT s, ',' ORDER BY s DESC NULLS FIRST) FROM t",
	"SELECT stddev(x), var_pop(x), stddev_pop(x), variance(x) FROM t",
	"SELECT g, max(x) - g FROM t GROUP BY g HAVING g > 1",
	"SELECT bit_or(a), bit_xor(b), jsonb_agg(c) FROM t",
	"SELECT a FROM t UNION SELECT b FROM u",
	"SELECT name COLLATE \"C\", id FROM t ORDER BY 1 NULLS FIRST, 2 DESC",
	"SELECT g, json_agg(x ORDER BY y), min(d), max(ts) FROM t GROUP BY g ORDER BY g",
	"SELECT x, count(*) FROM t GROUP BY x ORDER BY count(*) DESC, x LIMIT 3",
};

static const uint32_t oids[] = { 16, 17, 20, 21, 23, 25, 700, 701, 1700, 1082, 1114, 1184,
				 2950, 114, 3802, 1043, 18, 26, 1186, 0 };

/* Every message in <pb> is a well-formed T, D or C. */
static void
check_out(const struct pktbuf *pb)
{
	struct nk_error err;
	struct proto_frame f;
	struct proto_rowdesc_msg rd;
	struct proto_datarow_msg dr;
	const char *tag;
	size_t off = 0;

	FZ_CHECK(!pb->failed);
	while (off < pb->len) {
		FZ_CHECK(proto_frame_next(pb->buf + off, pb->len - off, false, UINT32_MAX, &f,
					  &err) == PROTO_FRAME_OK);
		if (f.type == 'T')
			FZ_CHECK(proto_parse_row_description(f.body, f.body_len, &rd, &err));
		else if (f.type == 'D')
			FZ_CHECK(proto_parse_data_row(f.body, f.body_len, &dr, &err));
		else
			FZ_CHECK(f.type == 'C' && proto_parse_command_complete(f.body, f.body_len,
									  &tag, &err));
		off += f.total;
	}
}

/* Build the message of one operation into <pb> (reset first). */
static void
build_msg(uint8_t kind, const uint8_t **d, size_t *n, struct pktbuf *pb)
{
	struct proto_column cols[FZ_MCOLS];
	struct proto_value vals[FZ_MCOLS];
	uint32_t nc = fz_byte(d, n) % FZ_MCOLS;
	char tag[32];

	pktbuf_reset(pb);
	memset(cols, 0, sizeof(cols));
	switch (kind) {
	case 0:
		for (uint32_t i = 0; i < nc; i++) {
			uint8_t b = fz_byte(d, n);

			cols[i].name = "c";
			cols[i].type_oid = oids[(b & 0x7f) % NK_ARRAY_LEN(oids)];
			cols[i].typmod = -1;
			cols[i].typlen = -1;
			cols[i].format = b >> 7;
		}
		pktbuf_write_row_description(pb, cols, nc);
		return;
	case 1:
		for (uint32_t i = 0; i < nc; i++) {
			uint8_t len = fz_byte(d, n);

			vals[i].p = len == 0xff ? NULL : *d;
			vals[i].len = len == 0xff ? 0 : (uint32_t)(len % 64 < *n ? len % 64 : *n);
			*d += vals[i].len;
			*n -= vals[i].len;
		}
		pktbuf_write_data_row(pb, vals, nc);
		return;
	case 2:
		snprintf(tag, sizeof(tag), "SELECT %u", nc);
		pktbuf_write_command_complete(pb, tag);
		return;
	default: {
		uint8_t type = fz_byte(d, n);
		size_t len = fz_byte(d, n) % 128;

		len = len < *n ? len : *n;
		pktbuf_put_byte(pb, type);
		pktbuf_put_int32(pb, (int32_t)len + 4);
		pktbuf_put_bytes(pb, *d, len);
		*d += len;
		*n -= len;
		return;
	}
	}
}

/* Run the operations of <d>/<n> on <m>; stops at the first refusal. */
static void
run_ops(struct merge *m, uint32_t nshards, const uint8_t *d, size_t n)
{
	struct nk_error err;
	struct pktbuf msg, out;
	uint64_t rows;
	bool ok = true;

	pktbuf_init(&msg, 256);
	pktbuf_init(&out, 256);
	while (n > 0 && ok) {
		uint8_t op = fz_byte(&d, &n), kind = (uint8_t)((op >> 2) % 5);
		uint32_t shard = (op & 3u) < nshards ? (op & 3u) : MERGE_FINAL;

		if (kind == 4) {
			int64_t max = (int64_t)(fz_byte(&d, &n) % 5) - 1;

			pktbuf_reset(&out);
			ok = merge_pull_rows(m, &out, max, &rows, &err);
			if (ok)
				check_out(&out);
			continue;
		}
		build_msg(kind, &d, &n, &msg);
		FZ_CHECK(!msg.failed && msg.len >= 5);
		ok = merge_feed(m, shard, (char)msg.buf[0], msg.buf + 5, msg.len - 5, &err);
	}
	if (ok) {
		pktbuf_reset(&out);
		if (merge_pull(m, &out, &err))
			check_out(&out);
		if (merge_state(m) == MERGE_NEED_FINAL)
			FZ_CHECK(merge_final_sql(m) != NULL);
	}
	pktbuf_cleanup(&msg);
	pktbuf_cleanup(&out);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const collations[] = { "C", NULL, "en_US.UTF-8", "POSIX" };
	const uint8_t *d = data, *part;
	size_t n = size;
	uint8_t pick = fz_byte(&d, &n), b1 = fz_byte(&d, &n), b2 = fz_byte(&d, &n);
	struct rarena *a = rarena_new();
	struct merge_options opt;
	struct plan_merge spec;
	struct nk_error err;
	struct merge *m;
	char *sql;

	FZ_CHECK(a != NULL);
	if (pick == 0xff) {
		size_t len = fz_part(&d, &n, &part);

		sql = fz_strndup(part, len);
	} else {
		sql = fz_strndup((const uint8_t *)shapes[pick % NK_ARRAY_LEN(shapes)],
				 strlen(shapes[pick % NK_ARRAY_LEN(shapes)]));
	}
	memset(&opt, 0, sizeof(opt));
	opt.collation = collations[(b1 >> 2) % 4];
	opt.limit = b2 & 0x80 ? (int64_t)(b2 & 0x7) : -1;
	opt.offset = (b2 >> 3) & 0x3;
	opt.omit_rowdesc = (b1 >> 4) & 1;
	opt.omit_tail = (b1 >> 5) & 1;
	if (plan_merge_build(a, sql, &spec, &err)) {
		FZ_CHECK(spec.shard_sql != NULL && spec.nvisible <= spec.ncols);
		m = merge_new(&spec, (b1 & 3u) + 1, &opt, &err);
		if (m) {
			run_ops(m, (b1 & 3u) + 1, d, n);
			merge_free(m);
		}
	}
	free(sql);
	rarena_free(a);
	return 0;
}
