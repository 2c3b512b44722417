/*
 * fuzz_router.c - the router's analysis and planning on arbitrary SQL (src/router over
 * libpg_query trees, src/topology's image): the input is a Query text. It is split into
 * statements as a Query is; each is normalised, modelled and planned against a fixture
 * topology (the storefront shape, a reference table, an unsharded table, a modulo index, an
 * expression key and one over two columns) and its catalog, with bound parameters, then
 * explained, its COPY / fill keys routed and its text rewritten where the plan says so.
 * Invariant: the plan memo (plan_build_memo(), the plan cache's fast path) gives for
 * the same statement and values, and for other values, what a fresh plan_build() gives.
 */
#include "fuzz.h"

#include "neki/parse.h"
#include "neki/plan.h"
#include "neki/plan_explain.h"
#include "neki/plan_cache.h"
#include "neki/topology.h"
#include "neki/topology_image.h"

static const char topology[] =
	"{\"authoritative_shard_group\":\"authoritative\","
	"\"default_shard_group\":\"authoritative\","
	"\"shard_groups\":[{\"uid\":\"authoritative\",\"key_ranges\":[{\"shard_uid\":\"auth\"}]},"
	"{\"uid\":\"customer_data\",\"default_shard_index\":\"by_customer\",\"key_ranges\":["
	"{\"shard_uid\":\"shard-a\",\"end\":\"40\"},{\"shard_uid\":\"shard-b\",\"start\":\"40\","
	"\"end\":\"80\"},{\"shard_uid\":\"shard-c\",\"start\":\"80\",\"end\":\"c0\"},"
	"{\"shard_uid\":\"shard-d\",\"start\":\"c0\"}]},"
	"{\"uid\":\"catalog\",\"default_shard_index\":\"by_lower_sku\",\"key_ranges\":["
	"{\"shard_uid\":\"shard-c\",\"end\":\"80\"},{\"shard_uid\":\"shard-d\",\"start\":\"80\"}]},"
	"{\"uid\":\"buckets\",\"default_shard_index\":\"by_bucket\",\"key_ranges\":["
	"{\"shard_uid\":\"shard-a\",\"end\":\"80\"},{\"shard_uid\":\"shard-b\",\"start\":\"80\"}]},"
	"{\"uid\":\"side\",\"key_ranges\":[{\"shard_uid\":\"shard-b\"}]}],"
	"\"shard_indexes\":{\"by_customer\":{\"type\":\"xxhash\",\"columns\":[\"customer_id\"]},"
	"\"customer_by_id\":{\"type\":\"xxhash\",\"columns\":[\"id\"]},"
	"\"order_by_id\":{\"type\":\"xxhash\",\"columns\":[\"id\"]},"
	"\"by_lower_sku\":{\"type\":\"xxhash\",\"columns\":[\"lower(sku)\"]},"
	"\"by_bucket\":{\"type\":\"modulo\",\"columns\":[\"id * 10\"],"
	"\"index_params\":{\"modulus\":4}},"
	"\"by_pair\":{\"type\":\"xxhash\",\"columns\":[\"a + b\"]}},"
	"\"databases\":{\"store\":{\"schemas\":{\"public\":{\"tables\":{"
	"\"customers\":{\"shard_group\":\"customer_data\",\"shard_index\":\"customer_by_id\"},"
	"\"orders\":{\"shard_group\":\"customer_data\",\"secondary_indexes\":["
	"{\"name\":\"orders_by_id\",\"columns\":[\"id\"]}]},"
	"\"order_items\":{\"shard_group\":\"customer_data\"},"
	"\"orders_by_id\":{\"shard_group\":\"customer_data\",\"shard_index\":\"order_by_id\"},"
	"\"products\":{\"shard_group\":\"catalog\"},\"events\":{\"shard_group\":\"buckets\"},"
	"\"pairs\":{\"shard_group\":\"customer_data\",\"shard_index\":\"by_pair\"},"
	"\"notes\":{\"shard_group\":\"side\"}},"
	"\"reference_tables\":{\"countries\":{\"shard_groups\":[\"customer_data\",\"catalog\"]}},"
	"\"sequences\":{\"orders_id_seq\":{\"shard_group\":\"authoritative\"}}}},"
	"\"global_secondary_indexes\":{\"orders_by_id\":{\"schema\":\"public\","
	"\"table\":\"orders_by_id\",\"owner_table\":\"orders\",\"columns\":[\"id\"],"
	"\"owner_sk_columns\":[\"customer_id\"],\"unique\":true,\"enabled\":false}}}}}";

static const char *const shards[] = { "auth", "shard-a", "shard-b", "shard-c", "shard-d" };

struct fz_col {
	const char *table, *column;
	uint32_t oid;
	const char *seq;	/* owned sequence (serial / identity) */
};

static const struct fz_col cols[] = {
	{ "customers", "id", 20, "customers_id_seq" }, { "customers", "name", 25, NULL },
	{ "customers", "country", 25, NULL }, { "orders", "customer_id", 20, NULL },
	{ "orders", "id", 20, "orders_id_seq" }, { "orders", "status", 25, NULL },
	{ "orders", "total", 1700, NULL }, { "order_items", "customer_id", 20, NULL },
	{ "order_items", "order_id", 20, NULL }, { "order_items", "qty", 23, NULL },
	{ "orders_by_id", "id", 20, NULL }, { "orders_by_id", "customer_id", 20, NULL },
	{ "products", "sku", 25, NULL }, { "products", "name", 25, NULL },
	{ "products", "price", 1700, NULL }, { "events", "id", 20, NULL },
	{ "events", "at", 1184, NULL }, { "pairs", "a", 20, NULL }, { "pairs", "b", 20, NULL },
	{ "pairs", "v", 25, NULL }, { "notes", "id", 23, "notes_id_seq" },
	{ "notes", "body", 25, NULL }, { "countries", "code", 25, NULL },
	{ "countries", "name", 25, NULL },
};

static void *img;

static uint32_t
cat_column_type(void *arg, const char *schema, const char *table, const char *column)
{
	(void)arg;
	(void)schema;
	for (size_t i = 0; i < NK_ARRAY_LEN(cols); i++)
		if (strcmp(cols[i].table, table) == 0 && strcmp(cols[i].column, column) == 0)
			return cols[i].oid;
	return 0;
}

static const struct fz_col *
nth_col(const char *table, uint32_t attnum)
{
	uint32_t n = 0;

	for (size_t i = 0; i < NK_ARRAY_LEN(cols); i++)
		if (strcmp(cols[i].table, table) == 0 && ++n == attnum)
			return &cols[i];
	return NULL;
}

static const char *
cat_column_name(void *arg, const char *schema, const char *table, uint32_t attnum)
{
	const struct fz_col *c = nth_col(table, attnum);

	(void)arg;
	(void)schema;
	return c ? c->column : NULL;
}

static char
cat_relkind(void *arg, const char *schema, const char *table)
{
	(void)arg;
	(void)schema;
	if (strstr(table, "_seq"))
		return 'S';
	if (strncmp(table, "v_", 2) == 0)
		return 'v';
	return nth_col(table, 1) ? 'r' : 0;
}

static bool
cat_column(void *arg, const char *schema, const char *table, uint32_t attnum,
	   struct cat_column *out)
{
	const struct fz_col *c = nth_col(table, attnum);

	(void)arg;
	(void)schema;
	memset(out, 0, sizeof(*out));
	if (!c)
		return false;
	out->name = c->column;
	if (c->seq) {
		out->identity = strcmp(table, "customers") == 0 ? CAT_IDENT_ALWAYS : CAT_IDENT_NONE;
		out->has_default = out->identity == CAT_IDENT_NONE;
		out->seq.schema = "public";
		out->seq.name = c->seq;
	}
	return true;
}

static int64_t
cat_seq_cache(void *arg, const char *schema, const char *name)
{
	(void)arg;
	(void)schema;
	return strcmp(name, "orders_id_seq") == 0 ? 50 : 1;
}

static bool
cat_view_base(void *arg, const char *schema, const char *view, uint32_t i, const char **bs,
	      const char **bn)
{
	(void)arg;
	if (strcmp(view, "v_orders") != 0 || i != 0)
		return false;
	*bs = schema;
	*bn = "orders";
	return true;
}

static const struct plan_catalog cat = { NULL, cat_column_type, cat_column_name, cat_relkind, 1,
					 cat_column, cat_seq_cache, NULL, cat_view_base, NULL,
					 NULL, NULL, NULL, NULL, NULL };

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static const struct topo_validate_input vin = { shards, NK_ARRAY_LEN(shards), NULL };
	struct nk_error err;
	struct topo_model *m = topo_check(topology, strlen(topology), &vin, false, NULL, &err);
	size_t size;

	(void)argc;
	(void)argv;
	if (!m)
		fprintf(stderr, "fuzz_router: topology: %s\n", err.message);
	FZ_CHECK(m != NULL);
	size = topo_image_size(m);
	img = aligned_alloc(8, (size + 7) & ~(size_t)7);
	FZ_CHECK(img != NULL && topo_image_build(m, 1, img, size) == (ssize_t)size);
	topo_model_free(m);
	return 0;
}

/* Plans <a> and <b> route alike (or both refuse alike). */
static void
same_plan(bool oka, const struct plan *a, const struct nk_error *ea, bool okb,
	  const struct plan *b, const struct nk_error *eb)
{
	FZ_CHECK(oka == okb);
	if (!oka) {
		FZ_CHECK(strcmp(ea->sqlstate, eb->sqlstate) == 0 && ea->code == eb->code);
		return;
	}
	FZ_CHECK(a->kind == b->kind && a->op == b->op && a->nshards == b->nshards);
	for (uint32_t i = 0; i < a->nshards; i++)
		FZ_CHECK(strcmp(a->shards[i], b->shards[i]) == 0);
}

/* What the executor does with a plan: explain it, route a COPY key, fill and rewrite. */
static void
use_plan(struct rarena *a, const struct plan_input *in, struct plan *p)
{
	static const int64_t values[4096];
	static const int64_t nextvals[256];
	struct nk_error err;
	const char *shard;
	char *text;

	for (int json = 0; json < 2; json++) {
		text = plan_explain(p, json);
		FZ_CHECK(text != NULL);
		free(text);
	}
	if (p->has_key)
		fz_ignore(plan_route_text(in, p, "42", 2, &shard, &err));
	if (p->route_by_fill && p->nfills * p->nrows <= NK_ARRAY_LEN(values))
		fz_ignore(plan_fill_route(a, in, p, values, &err));
	if ((p->nfills > 0 && p->nfills * p->nrows <= NK_ARRAY_LEN(values)) ||
	    (p->nnextvals > 0 && p->nnextvals <= NK_ARRAY_LEN(nextvals)))
		(void)plan_rewrite(a, in->sql, p, p->nparts ? &p->parts[0] : NULL, values,
				   nextvals, &err);
}

/* Plan one statement <sql> (with <params>), fresh and through the memo. */
static void
plan_one(const char *sql, bool multi, bool extended, const struct plan_param *pa,
	 const struct plan_param *pb, uint32_t np)
{
	struct rarena *a = rarena_new(), *b = rarena_new();
	struct plan_cache *cache = plan_cache_new(4);
	struct plan_session sess;
	struct plan_input in;
	struct parse_norm norm;
	struct nk_error err, e1, e2;
	const struct stmt *s;
	struct plan p1, p2;
	bool ok1, ok2;

	FZ_CHECK(a && b && cache);
	plan_session_init(&sess, "store");
	if (!parse_normalize(a, sql, &norm) ||
	    !(s = plan_cache_put(cache, sql, &norm, 1, 1, &err)))
		goto done;
	memset(&in, 0, sizeof(in));
	in.topo = img;
	in.cat = &cat;
	in.sess = &sess;
	in.norm = &norm;
	in.sql = sql;
	in.extended = extended;
	in.multi_statement = multi;
	for (int round = 0; round < 3; round++) {
		in.params = round == 2 ? pb : pa;
		in.nparams = np;
		rarena_reset(b);
		ok1 = plan_build(b, s, &in, &p1, &e1);
		if (ok1 && round == 0)
			use_plan(b, &in, &p1);
		ok2 = plan_build_memo(b, s, &in, plan_cache_memo(cache), &p2, &e2);
		same_plan(ok1, &p1, &e1, ok2, &p2, &e2);
	}
done:
	plan_cache_free(cache);
	rarena_free(b);
	rarena_free(a);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t v1[] = "42", v2[] = "ABC-1", v3[] = { 0, 0, 0, 0, 0, 0, 0, 7 };
	const struct plan_param pa[] = { { v1, 2, false, 0 }, { v2, 5, false, 0 },
					 { v3, 8, true, 20 }, { NULL, -1, false, 0 } };
	const struct plan_param pb[] = { { v2, 5, false, 0 }, { v1, 2, false, 0 },
					 { v3, 8, true, 20 }, { v1, 2, false, 23 } };
	char *sql = fz_strndup(data, size), *one;
	struct rarena *a = rarena_new();
	struct parse_span *spans;
	struct nk_error err;
	uint32_t n;

	FZ_CHECK(a != NULL);
	if (parse_split(a, sql, &spans, &n, &err)) {
		for (uint32_t i = 0; i < n && i < 8; i++) {
			one = fz_strndup((const uint8_t *)sql + spans[i].start, spans[i].len);
			plan_one(one, n > 1, (size & 1) != 0, pa, pb, 4);
			free(one);
		}
	}
	rarena_free(a);
	free(sql);
	return 0;
}
