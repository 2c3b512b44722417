/*
 * topo_fixtures.c - helpers shared by the topology unit tests: single-quoted JSON, the
 * declared shards, reading the storefront example from the source tree.
 */
#include "neki/base.h"

#include "topo_fixtures.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const fx_shards[] = { "auth", "shard-a", "shard-b", "shard-c", "shard-d" };

const struct topo_validate_input *
fx_input(const struct topo_model *prev)
{
	static struct topo_validate_input in;

	in.shard_uids = fx_shards;
	in.nshards = NK_ARRAY_LEN(fx_shards);
	in.previous = prev;
	return &in;
}

char *
fx_q(const char *json_q)
{
	char *d = strdup(json_q);

	ck_assert_ptr_nonnull(d);
	for (char *p = d; *p; p++)
		if (*p == '\'')
			*p = '"';
	return d;
}

struct topo_model *
fx_parse_validate(const char *json_q, const struct topo_model *prev, struct topo_findings *f)
{
	char *json = fx_q(json_q);
	struct topo_model *m;

	topo_findings_init(f);
	m = topo_parse(json, strlen(json), f);
	if (m)
		topo_validate(m, fx_input(prev), f);
	free(json);
	return m;
}

struct topo_model *
fx_check(const char *json_q, const struct topo_model *prev, bool force, struct nk_error *err)
{
	char *json = fx_q(json_q);
	struct topo_model *m = topo_check(json, strlen(json), fx_input(prev), force, NULL, err);

	free(json);
	return m;
}

static char *
slurp(const char *path)
{
	FILE *fp = fopen(path, "rb");
	char *buf;
	long n;

	if (!fp)
		return NULL;
	fseek(fp, 0, SEEK_END);
	n = ftell(fp);
	fseek(fp, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	if (buf && fread(buf, 1, (size_t)n, fp) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	if (buf)
		buf[n] = '\0';
	fclose(fp);
	return buf;
}

char *
fx_read_file(const char *rel)
{
	static const char *const prefixes[] = { "", "../", "../../" };
	const char *srcdir = getenv("srcdir");
	char path[1024];
	char *text;

#ifdef NK_SRCDIR
	if (!srcdir)
		srcdir = NK_SRCDIR;
#endif
	if (srcdir) {
		snprintf(path, sizeof(path), "%s/%s", srcdir, rel);
		if ((text = slurp(path)))
			return text;
	}
	for (size_t i = 0; i < NK_ARRAY_LEN(prefixes); i++) {
		snprintf(path, sizeof(path), "%s%s", prefixes[i], rel);
		if ((text = slurp(path)))
			return text;
	}
	return NULL;
}

struct topo_model *
fx_storefront(void)
{
	char *text = fx_read_file("etc/topology-storefront.json");
	struct nk_error err;
	struct topo_model *m;

	ck_assert_ptr_nonnull(text);
	m = topo_check(text, strlen(text), fx_input(NULL), false, NULL, &err);
	ck_assert_msg(m != NULL, "storefront: %s", err.message);
	free(text);
	return m;
}
