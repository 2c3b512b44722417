/*
 * merge_run.c - test driver for the merge step against real Postgres results
 * (test/merge/test_merge_exact.py).
 *
 *   merge_run spec SQL           print the shard query (line 1) and LIMIT / OFFSET (line 2)
 *   merge_run merge SQL NSHARDS [COLLATION]
 *                                read records from stdin: uint32 shard (big-endian, 0xffffffff
 *                                for the final combine query) + one protocol message (type,
 *                                length, body); pull after every record and write the client
 *                                messages to stdout. When the final combine query is needed
 *                                and not in the input, print "FINAL\n<sql>" instead.
 * Exit status 2 with "ERROR <sqlstate> <message>" on stdout when the merge refuses.
 */
#include "neki/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "neki/merge.h"
#include "neki/parse.h"
#include "neki/plan.h"

static int
refuse(const struct nk_error *err)
{
	printf("ERROR %s %s\n", err->sqlstate, err->message);
	return 2;
}

static bool
read_exact(void *p, size_t n)
{
	return fread(p, 1, n, stdin) == n;
}

static uint32_t
be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int
run_merge(const struct plan_merge *spec, uint32_t nshards, const char *collation)
{
	struct merge_options opt = { .collation = collation, .limit = -1, .offset = 0 };
	struct plan_input in;
	struct nk_error err;
	struct merge *m;
	struct pktbuf out;
	uint8_t hdr[9];
	int rc = 0;

	memset(&in, 0, sizeof(in));
	nk_error_clear(&err);
	if (!plan_merge_bind(spec, &in, &opt.limit, &opt.offset, &err))
		return refuse(&err);
	m = merge_new(spec, nshards, &opt, &err);
	if (!m)
		return refuse(&err);
	pktbuf_init(&out, 4096);
	while (rc == 0 && read_exact(hdr, 9)) {
		uint32_t shard = be32(hdr), len = be32(hdr + 5) - 4;
		uint8_t *body = malloc(len ? len : 1);

		if (!body || !read_exact(body, len) ||
		    !merge_feed(m, shard, (char)hdr[4], body, len, &err) ||
		    !merge_pull(m, &out, &err))
			rc = refuse(&err);
		free(body);
	}
	if (rc == 0 && merge_state(m) == MERGE_NEED_FINAL) {
		printf("FINAL\n%s", merge_final_sql(m));
	} else if (rc == 0) {
		if (merge_state(m) != MERGE_DONE) {
			printf("ERROR XX000 merge not done\n");
			rc = 2;
		} else {
			fwrite(out.buf, 1, out.len, stdout);
		}
	}
	pktbuf_cleanup(&out);
	merge_free(m);
	return rc;
}

int
main(int argc, char **argv)
{
	struct rarena *a = rarena_new();
	struct plan_merge spec;
	struct nk_error err;
	int rc;

	nk_error_clear(&err);
	if (argc < 3 || !a) {
		fprintf(stderr, "usage: merge_run spec|merge SQL [NSHARDS [COLLATION]]\n");
		return 1;
	}
	if (!plan_merge_build(a, argv[2], &spec, &err)) {
		rc = refuse(&err);
	} else if (strcmp(argv[1], "spec") == 0) {
		printf("%s\n%lld %lld\n", spec.shard_sql,
		       spec.limit.present ? (long long)spec.limit.value : -1LL,
		       (long long)spec.offset.value);
		rc = 0;
	} else {
		rc = run_merge(&spec, argc > 3 ? (uint32_t)atoi(argv[3]) : 1,
			       argc > 4 ? argv[4] : NULL);
	}
	rarena_free(a);
	return rc;
}
