/*
 * merge_fixtures.c - helpers of the merge unit suites (check_merge.c, check_merge_agg.c):
 * shard messages built and fed to a merge, the client's messages read back as text, merge
 * specs built from SQL in an arena freed after each test.
 */
#include "neki/base.h"

#include "merge_fixtures.h"

#include <check.h>
#include <stdio.h>
#include <string.h>

#include "neki/proto.h"

/* ---- building shard messages and reading the client's ---- */

void
mfx_feed_msg(struct merge *m, uint32_t shard, struct pktbuf *pb)
{
	struct nk_error err;

	ck_assert(!pb->failed);
	ck_assert_msg(merge_feed(m, shard, (char)pb->buf[0], pb->buf + 5, pb->len - 5, &err),
		      "%s", err.message);
	pktbuf_reset(pb);
}

void
mfx_feed_desc(struct merge *m, uint32_t shard, uint32_t n, const uint32_t *oids, int16_t format)
{
	struct proto_column cols[16];
	struct pktbuf pb;

	memset(cols, 0, sizeof(cols));
	for (uint32_t i = 0; i < n; i++) {
		cols[i].name = "c";
		cols[i].type_oid = oids[i];
		cols[i].typmod = -1;
		cols[i].format = format;
	}
	pktbuf_init(&pb, 256);
	pktbuf_write_row_description(&pb, cols, n);
	mfx_feed_msg(m, shard, &pb);
	pktbuf_cleanup(&pb);
}

void
mfx_feed_row(struct merge *m, uint32_t shard, uint32_t n, const struct mfx_val *v)
{
	struct proto_value vals[16];
	struct pktbuf pb;

	for (uint32_t i = 0; i < n; i++) {
		vals[i].p = (const uint8_t *)v[i].p;
		vals[i].len = v[i].p ? (v[i].len ? v[i].len : (uint32_t)strlen(v[i].p)) : 0;
	}
	pktbuf_init(&pb, 256);
	pktbuf_write_data_row(&pb, vals, n);
	mfx_feed_msg(m, shard, &pb);
	pktbuf_cleanup(&pb);
}

/* One text value per row. */
void
mfx_feed_text(struct merge *m, uint32_t shard, const char *v)
{
	struct mfx_val t = { v, 0 };

	mfx_feed_row(m, shard, 1, &t);
}

void
mfx_feed_done(struct merge *m, uint32_t shard, const char *tag)
{
	struct pktbuf pb;

	pktbuf_init(&pb, 64);
	pktbuf_write_command_complete(&pb, tag);
	mfx_feed_msg(m, shard, &pb);
	pktbuf_cleanup(&pb);
}

void
mfx_read_out(const struct pktbuf *pb, struct mfx_out *o, bool hex)
{
	size_t pos = 0;

	while (pos < pb->len) {
		char type = (char)pb->buf[pos];
		uint32_t len = (uint32_t)pb->buf[pos + 1] << 24 | (uint32_t)pb->buf[pos + 2] << 16 |
			       (uint32_t)pb->buf[pos + 3] << 8 | pb->buf[pos + 4];
		const uint8_t *body = pb->buf + pos + 5;
		struct nk_error err;

		if (type == 'T') {
			struct proto_rowdesc_msg rd;

			ck_assert(proto_parse_row_description(body, len - 4, &rd, &err));
			o->ncols = rd.ncols;
			o->has_desc = true;
		} else if (type == 'D') {
			struct proto_datarow_msg dr;
			struct proto_value v[16];
			size_t n;

			ck_assert(proto_parse_data_row(body, len - 4, &dr, &err));
			n = proto_datarow_values(&dr, v, 16);
			if (o->nrows++)
				strcat(o->rows, ";");
			for (size_t i = 0; i < n; i++) {
				char buf[256] = "\\N";

				if (v[i].p && !hex)
					snprintf(buf, sizeof(buf), "%.*s", (int)v[i].len, v[i].p);
				else if (v[i].p)
					for (uint32_t k = 0; k < v[i].len && k < 100; k++)
						snprintf(buf + 2 * k, 3, "%02x", v[i].p[k]);
				if (v[i].p && hex && v[i].len == 0)
					buf[0] = '\0';
				if (i)
					strcat(o->rows, "|");
				strcat(o->rows, buf);
			}
		} else if (type == 'C') {
			snprintf(o->tag, sizeof(o->tag), "%s", (const char *)body);
		}
		pos += 1 + len;
	}
}

void
mfx_pull(struct merge *m, struct pktbuf *pb)
{
	struct nk_error err;

	ck_assert_msg(merge_pull(m, pb, &err), "%s", err.message);
}

struct merge *
mfx_new_merge(const struct plan_merge *s, uint32_t nshards, int64_t limit, int64_t offset)
{
	struct merge_options opt = { .collation = "C", .limit = limit, .offset = offset };
	struct nk_error err;
	struct merge *m = merge_new(s, nshards, &opt, &err);

	ck_assert_msg(m != NULL, "%s", err.message);
	return m;
}

static struct rarena *arena;	/* the specs' memory, freed after each test */

/* mfx_arena: see merge_fixtures.h. */
struct rarena *
mfx_arena(void)
{
	if (!arena)
		arena = rarena_new();
	return arena;
}

/* mfx_free_arena: see merge_fixtures.h. */
void
mfx_free_arena(void)
{
	rarena_free(arena);
	arena = NULL;
}

void
mfx_spec_of(const char *sql, struct plan_merge *s)
{
	struct nk_error err;

	ck_assert_msg(plan_merge_build(mfx_arena(), sql, s, &err), "%s: %s", sql, err.message);
}

void
mfx_feed_all_text(struct merge *m, uint32_t shard, uint32_t n, const uint32_t *oids,
	      const char *const *rows, uint32_t nrows)
{
	struct mfx_val v[16];

	mfx_feed_desc(m, shard, n, oids, 0);
	for (uint32_t r = 0; r < nrows; r++) {
		for (uint32_t c = 0; c < n; c++) {
			v[c].p = rows[r * n + c];
			v[c].len = 0;
		}
		mfx_feed_row(m, shard, n, v);
	}
	mfx_feed_done(m, shard, "SELECT 1");
}

