/*
 * check_exec.c - the executor (src/exec/) behind its client sink (neki/exec.h), with a fake
 * client: the statements the router answers itself (transactions, an empty query, a syntax
 * error) go through route_on_pkt() and come back through the sink as the messages Postgres
 * would send, with the transaction status the route reports. The storefront topology is
 * published in a private shm segment; no shard is reached (no link is taken: a BEGIN is
 * lazy, a ROLLBACK of a transaction that touched no shard is answered at once).
 */
#include "neki/base.h"

#include <check.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "neki/exec.h"
#include "neki/pktbuf.h"
#include "neki/sbuf.h"
#include "neki/shm.h"
#include "neki/topology.h"
#include "neki/topology_image.h"
#include "neki/varcache.h"
#include "neki/normalize.h"
#include "neki/rarena.h"
#include "../../src/exec/route_int.h"
#include "../../src/exec/route_exec.h"
#include "../../src/exec/route_pushdown.h"
#include "../../src/exec/route_sqltext.h"
#include "evloop.h"
#include "suites.h"
#include "topo_fixtures.h"

/* The fake client: what the route sent it, and what it asked. */
struct fake {
	struct sbuf sb;			/* the client connection (one end of a socketpair) */
	int peer;			/* the other end: the test writes the client's packets */
	struct route *r;
	uint8_t out[8192];		/* the messages the route sent, in order */
	size_t out_len;
	int fatals, closes, errors, logs;
	bool closed;
	struct shm_stats stats;
	struct varcache vars;
};

static struct event_base *base;
static struct fake fk;

static bool
fk_closed(void *ctx)
{
	return ((struct fake *)ctx)->closed;
}

static bool
fk_send(void *ctx, struct pktbuf *pb)
{
	struct fake *f = ctx;
	bool ok = !pktbuf_failed(pb) && f->out_len + pb->len <= sizeof(f->out);

	if (ok) {
		memcpy(f->out + f->out_len, pb->buf, pb->len);
		f->out_len += pb->len;
	}
	pktbuf_cleanup(pb);
	return ok;
}

static bool
fk_send_error(void *ctx, const struct nk_error *err)
{
	struct fake *f = ctx;
	struct pktbuf pb;

	f->errors++;
	pktbuf_init(&pb, 128);
	pktbuf_write_error(&pb, err);
	return fk_send(ctx, &pb);
}

static void
fk_fatal(void *ctx, const char *msg)
{
	struct fake *f = ctx;

	f->fatals++;
	f->closed = true;
}

static void
fk_close(void *ctx, const char *reason, const struct nk_error *err)
{
	struct fake *f = ctx;

	f->closes++;
	f->closed = true;
}

static void NK_PRINTF(3, 0)
fk_log(void *ctx, int lvl, const char *fmt, va_list ap)
{
	((struct fake *)ctx)->logs++;
}

static void
fk_idle(void *ctx)
{
}

static bool
fk_relay_busy(void *ctx)
{
	return false;
}

static void
fk_cancel_link(struct link *l)
{
	ck_abort_msg("no link to cancel");
}

static const struct exec_client_ops fk_ops = {
	.closed = fk_closed,
	.send = fk_send,
	.send_error = fk_send_error,
	.fatal = fk_fatal,
	.close = fk_close,
	.log = fk_log,
	.idle = fk_idle,
	.relay_busy = fk_relay_busy,
	.cancel_link = fk_cancel_link,
};

/* The client's connection hands each packet to the route, as the session does. */
static bool
fk_sbuf_cb(struct sbuf *sb, enum sbuf_event ev, const struct sbuf_pkt *pkt, int err,
	   void *arg)
{
	struct fake *f = arg;

	if (ev != SBUF_EV_PKT)
		return true;
	return route_on_pkt(f->r, pkt);
}

/* Publish the storefront topology (database "store") as revision 1. */
static void
publish_topology(void)
{
	struct topo_model *m = fx_storefront();
	size_t size = topo_image_size(m);
	unsigned slot;

	ck_assert_uint_le(size, shm_topo_capacity());
	ck_assert(shm_topo_claim(&slot));
	ck_assert_int_eq(topo_image_build(m, 1, shm_topo_data(slot), size), (ssize_t)size);
	shm_topo_publish(slot, 1, size);
	topo_model_free(m);
}

static void
setup(void)
{
	char err[256];
	struct sbuf_opts o;
	int sv[2];
	struct exec_client c = {
		.ops = &fk_ops,
		.ctx = &fk,
		.sb = &fk.sb,
		.dbname = "store",
		.user = "app",
		.stats = &fk.stats,
		.vars = &fk.vars,
	};

	ck_assert_msg(shm_create(shm_min_size(2) + (4 << 20), 2, err, sizeof(err)), "%s", err);
	publish_topology();
	base = event_base_new();
	ck_assert_ptr_nonnull(base);
	memset(&fk, 0, sizeof(fk));
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	sbuf_opts_default(&o);
	ck_assert(sbuf_init(&fk.sb, base, fk_sbuf_cb, &fk, &o));
	ck_assert(sbuf_accept(&fk.sb, sv[0], true));
	fk.peer = sv[1];
	c.base = base;
	fk.r = route_session_start(&c);
	ck_assert_ptr_nonnull(fk.r);
	fk.r->hold.ready = true;	/* (the catalog wait of route_hold.c is not what is tested) */
}

static void
teardown(void)
{
	route_session_free(fk.r);
	sbuf_close(&fk.sb);
	sbuf_cleanup(&fk.sb);
	close(fk.peer);
	event_base_free(base);
	base = NULL;
	shm_destroy();
}

/* Has the route sent a ReadyForQuery? */
static bool
fk_ready(void *arg)
{
	const struct fake *f = arg;

	for (size_t at = 0; at + 5 <= f->out_len;) {
		uint32_t n = (uint32_t)f->out[at + 1] << 24 | (uint32_t)f->out[at + 2] << 16 |
			     (uint32_t)f->out[at + 3] << 8 | f->out[at + 4];

		if (f->out[at] == 'Z')
			return true;
		at += 1 + n;
	}
	return false;
}

/*
 * Send Query <sql> as the client and wait for ReadyForQuery; <want> is what came back, one
 * letter per message ("C:BEGIN" a CommandComplete with its tag, "E:42601" an ErrorResponse
 * with its SQLSTATE, "Z:T" ReadyForQuery with its status, "D:v" a DataRow whose first column
 * is v, "I" EmptyQueryResponse, the type letter of any other), joined by spaces.
 */
static void
query(const char *sql, const char *want)
{
	struct pktbuf pb;
	char got[512] = "";
	size_t at = 0;

	fk.out_len = 0;
	pktbuf_init(&pb, 64);
	pktbuf_write_query(&pb, sql);
	ck_assert(!pktbuf_failed(&pb));
	ck_assert_int_eq(write(fk.peer, pb.buf, pb.len), (ssize_t)pb.len);
	pktbuf_cleanup(&pb);
	ck_assert_msg(evloop_run_until(base, fk_ready, &fk, 5.0), "%s: no ReadyForQuery", sql);
	while (at + 5 <= fk.out_len) {
		const uint8_t *m = fk.out + at;
		uint32_t n = (uint32_t)m[1] << 24 | (uint32_t)m[2] << 16 | (uint32_t)m[3] << 8 | m[4];
		char one[80];

		if (m[0] == 'C')
			snprintf(one, sizeof(one), "C:%s", (const char *)m + 5);
		else if (m[0] == 'Z')
			snprintf(one, sizeof(one), "Z:%c", m[5]);
		else if (m[0] == 'E') {
			const char *f = (const char *)m + 5;

			while (*f != '\0' && *f != 'C')
				f += strlen(f) + 1;
			snprintf(one, sizeof(one), "E:%s", *f == 'C' ? f + 1 : "?");
		} else if (m[0] == 'D' && n >= 10) {	/* the first column's text */
			int32_t vl = (int32_t)((uint32_t)m[7] << 24 | (uint32_t)m[8] << 16 |
					       (uint32_t)m[9] << 8 | m[10]);

			snprintf(one, sizeof(one), "D:%.*s", vl > 0 && vl < 64 ? (int)vl : 0,
				 (const char *)m + 11);
		} else
			snprintf(one, sizeof(one), "%c", m[0]);
		if (got[0] != '\0')
			strncat(got, " ", sizeof(got) - strlen(got) - 1);
		strncat(got, one, sizeof(got) - strlen(got) - 1);
		at += 1 + n;
	}
	ck_assert_str_eq(got, want);
	ck_assert_int_eq(fk.fatals + fk.closes, 0);
}

START_TEST(test_begin_rollback)
{
	query("BEGIN", "C:BEGIN Z:T");
	ck_assert_int_eq(route_tx_status(fk.r), 'T');
	ck_assert(!route_is_busy(fk.r));
	query("ROLLBACK", "C:ROLLBACK Z:I");
	ck_assert_int_eq(route_tx_status(fk.r), 'I');
	/* the client's bytes are counted where the sink says (SHOW STATS) */
	ck_assert_uint_eq(fk.stats.total_received, (1 + 4 + 6) + (1 + 4 + 9));
}
END_TEST

START_TEST(test_one_query_two_statements)
{
	query("BEGIN; ROLLBACK", "C:BEGIN C:ROLLBACK Z:I");
	query("START TRANSACTION", "C:START TRANSACTION Z:T");
	query("COMMIT", "C:COMMIT Z:I");
}
END_TEST

START_TEST(test_empty_query)
{
	query("", "I Z:I");
	query("  ;  ", "I Z:I");
}
END_TEST

START_TEST(test_syntax_error)
{
	query("SELEC 1", "E:42601 Z:I");
	/* inside a transaction block the error aborts it, as in Postgres */
	query("BEGIN", "C:BEGIN Z:T");
	query("SELEC 1", "E:42601 Z:E");
	query("ROLLBACK", "C:ROLLBACK Z:I");
}
END_TEST

START_TEST(test_neki_settings)
{
	query("SET __neki.fanout = single", "C:SET Z:I");
	query("SHOW __neki.fanout", "T D:single C:SHOW Z:I");
	query("SET __neki.fanout = bogus", "E:22023 Z:I");
	query("RESET __neki.fanout", "C:RESET Z:I");
}
END_TEST

/* The texts the executor writes for its steps: each $n (outside quotes, comments and
 * identifiers) becomes the bound value or the statement's literal; the rest stays as it
 * is, a final ';' dropped. */
START_TEST(test_inline_texts)
{
	struct plan_param params[2] = {
		{ (const uint8_t *)"it's", 4, false, 0 }, { NULL, -1, false, 0 },
	};
	const char *src = "INSERT INTO t VALUES ($1, 5, 'x''y', $2)";
	struct parse_norm norm;
	struct rarena *a = rarena_new();
	struct nk_error err;
	bool has_null;
	char *out;

	ck_assert(parse_normalize(a, src, &norm));
	ck_assert_uint_eq(norm.nparams, 2);
	out = route_sql_inline_params("SELECT $1, '$1', \"$2\", x$1 -- $2\n, $2;", params, 2,
				      &err);
	ck_assert_str_eq(out, "SELECT (E'it''s'), '$1', \"$2\", x$1 -- $2\n, NULL");
	free(out);
	out = route_sql_inline_slots("VALUES ($4, $3, $1)", &norm, src, params, 2, &has_null,
				     &err);
	ck_assert_str_eq(out, "VALUES ('x''y', 5, (E'it''s'))");
	ck_assert(!has_null);
	free(out);
	out = route_sql_inline_slots("VALUES ($2)", &norm, src, params, 2, &has_null, &err);
	ck_assert(has_null);
	free(out);
	rarena_free(a);
}
END_TEST

/* The fake catalog of the pushdown test: orders (id, status, total, customer_id), customers
 * (id, name, country). */
static const char *const *
fake_columns(const char *table, size_t *n)
{
	static const char *const orders[] = { "id", "status", "total", "customer_id" };
	static const char *const customers[] = { "id", "name", "country" };
	bool o = strcmp(table, "orders") == 0;

	*n = o ? NK_ARRAY_LEN(orders) : NK_ARRAY_LEN(customers);
	return o ? orders : customers;
}

static uint32_t
fake_column_type(void *arg, const char *schema, const char *table, const char *column)
{
	size_t n;
	const char *const *cols = fake_columns(table, &n);

	for (size_t i = 0; i < n; i++)
		if (strcmp(cols[i], column) == 0)
			return 23;
	return 0;
}

static const char *
fake_column_name(void *arg, const char *schema, const char *table, uint32_t attnum)
{
	size_t n;
	const char *const *cols = fake_columns(table, &n);

	return attnum >= 1 && attnum <= n ? cols[attnum - 1] : NULL;
}

/* What route_pushdown_where() (or, <columns>, route_pushdown_columns()) gives of <sql> for
 * its table named <table>. */
static char *
pushed(const char *sql, const char *table, bool columns)
{
	struct plan_catalog cat = { .column_type = fake_column_type,
				    .column_name = fake_column_name };
	struct plan_session sess = { .schema = "public" };
	struct plan_input in = { .cat = &cat, .sess = &sess };
	struct rarena *a = rarena_new();
	struct parse_norm norm;
	struct nk_error err;
	const struct stmt *st;
	char *out = NULL;

	ck_assert(parse_normalize(a, sql, &norm));
	ck_assert_ptr_nonnull(st = parse_statement(a, sql, &norm, &err));
	for (uint32_t i = 0; i < st->nrels; i++) {
		const struct stmt_rel *rel = &st->rels[i];
		const char *e = sql + rel->loc + strlen(rel->name);

		if (strcmp(rel->name, table) != 0 || rel->loc < 0 || out != NULL)
			continue;
		out = columns ? route_pushdown_columns(sql, st, i, &in) :
			route_pushdown_where(sql, st, i, e, &in, NULL, 0);
	}
	rarena_free(a);
	return out;
}

/* What orders' read takes of statement <sql> (its conjuncts; <columns>: its select list) is
 * <want> (NULL: nothing; every column). */
static void
expect_read(const char *sql, bool columns, const char *want)
{
	char *got = pushed(sql, "orders", columns);

	ck_assert_msg(want == NULL ? got == NULL : got != NULL && strcmp(got, want) == 0,
		      "%s: got %s, not %s", sql, got ? got : "NULL", want ? want : "NULL");
	free(got);
}

static void
expect_taken(const char *sql, const char *want)
{
	expect_read(sql, false, want);
}

static void
expect_columns(const char *sql, const char *want)
{
	expect_read(sql, true, want);
}

/* The same for a join of customers and orders off the key with <where> after it. */
static void
expect_pushed(const char *where, const char *want)
{
	char sql[512];

	snprintf(sql, sizeof(sql), "SELECT * FROM customers c JOIN orders o ON o.id = c.id * 10 "
		 "%s", where);
	expect_taken(sql, want);
}

/* Of a join's WHERE, the conjuncts that read only the table read first go into its read;
 * another table's column, a volatile call, an OR at the top, the nullable side: nothing. */
START_TEST(test_pushdown_conjuncts)
{
	expect_pushed("WHERE o.total > 20 AND c.name <> 'x'", "(o.total > 20)");
	expect_pushed("WHERE total > 20 AND status = 'paid' ORDER BY 1",
		      "(total > 20) AND (status = 'paid')");
	expect_pushed("WHERE o.total BETWEEN 10 AND 50 AND c.id > 1", "(o.total BETWEEN 10 AND 50)");
	expect_pushed("WHERE lower(o.status) IN ('a', 'b') AND o.total::int >= 5",
		      "(lower(o.status) IN ('a', 'b')) AND (o.total::int >= 5)");
	expect_pushed("WHERE CAST(o.total AS numeric(10, 2)) > 20",
		      "(CAST(o.total AS numeric(10, 2)) > 20)");
	expect_pushed("WHERE CASE WHEN o.total > 1 AND o.id < 5 THEN true END",
		      "(CASE WHEN o.total > 1 AND o.id < 5 THEN true END)");
	expect_pushed("WHERE o.status = 'a AND b' /* AND c.id = 1 */ AND o.total IS NULL",
		      "(o.status = 'a AND b' /* AND c.id = 1 */) AND (o.total IS NULL)");
	expect_pushed("WHERE o.status = 'x' -- AND c.id\n AND o.id > date '2024-01-01' - 5",
		      "(o.status = 'x' -- AND c.id\n) AND (o.id > date '2024-01-01' - 5)");
	expect_pushed("WHERE o.total > c.id", NULL);
	expect_pushed("WHERE name <> 'x' AND o.status = 'new'", "(o.status = 'new')");
	expect_pushed("WHERE random() < 2 AND o.status = 'paid'", "(o.status = 'paid')");
	expect_pushed("WHERE o.total > 20 OR c.id = 1", NULL);
	expect_pushed("WHERE o.id IN (SELECT 1) AND o.x = 1 AND public.o.id = 1", NULL);
	expect_pushed("GROUP BY 1", NULL);
	expect_pushed("WHERE o.total > 1 AND a_name_of_more_than_sixty_three_bytes_that_ends_"
		      "like_a_column_status = 'x'", "(o.total > 1)");
	expect_pushed("WHERE \"end\" > 1 AND \"lower\"(o.status) = 'x' AND \"total\" > 2",
		      "(\"total\" > 2)");
	expect_pushed("WHERE o.status COLLATE \"C\" < 'b' AND "
		      "o.status COLLATE pg_catalog.\"default\" > 'a'",
		      "(o.status COLLATE \"C\" < 'b') AND "
		      "(o.status COLLATE pg_catalog.\"default\" > 'a')");
	expect_taken("SELECT * FROM customers c LEFT JOIN orders o ON o.id = c.id WHERE "
		     "o.status = 'x'", NULL);
	expect_taken("SELECT * FROM (SELECT * FROM orders) s, customers c WHERE s.id = 1 AND "
		     "c.id = 2", NULL);	/* (its level, the derived table, has no WHERE) */
	expect_taken("SELECT * FROM customers c LEFT JOIN orders o ON o.id = c.id AND "
		     "left(o.status, 1) = 'p' AND o.total > 1 JOIN countries k ON k.code = "
		     "c.country WHERE o.total > 5 AND c.id > 1",
		     "(left(o.status, 1) = 'p') AND (o.total > 1)");	/* (ON only) */
	expect_taken("SELECT * FROM customers c JOIN orders AS o ON o.status = 'p' AND "
		     "o.id = c.id WHERE o.total > 5", "(o.total > 5) AND (o.status = 'p')");
	expect_taken("SELECT * FROM customers c RIGHT JOIN orders o ON o.id = c.id AND "
		     "o.status = 'p'", NULL);	/* (the preserved side of its join) */
	expect_taken("SELECT * FROM customers c JOIN orders o USING (id) WHERE c.id > 1", NULL);
	expect_taken("UPDATE customers c SET name = 'x' FROM orders o WHERE o.id = c.id AND "
		     "o.total > 1 RETURNING c.id", "(o.total > 1)");
	expect_taken("INSERT INTO customers SELECT c.* FROM customers c JOIN orders o ON "
		     "o.id = c.id WHERE o.total > 1", NULL);	/* (planned apart) */
	expect_taken("SELECT 1 FROM customers c, orders WHERE orders.total > 1",
		     "(orders.total > 1)");
}
END_TEST

/* The columns of orders a read through the router selects: those the statement names
 * anywhere (a superset), unless a star, a whole-row value, NATURAL or a column list could
 * read the rest. */
START_TEST(test_pushdown_columns)
{
	const char *j = "FROM customers c JOIN orders o ON o.id = c.id * 10";
	char sql[512];
	static const struct {
		const char *list, *rest, *want;
	} cases[] = {
		{ "SELECT count(*)", "", "\"id\"" },
		{ "SELECT c.*, o.total * 2", "", "\"id\", \"total\"" },
		{ "SELECT o.\"status\", (o.total) * 2", "", "\"id\", \"status\", \"total\"" },
		{ "SELECT 1", " WHERE EXISTS (SELECT * FROM customers x WHERE x.id = o.id)",
		  "\"id\"" },
		{ "SELECT c.name", " WHERE 'customer_id' <> '' -- total", "\"id\"" },
		{ "SELECT o.id, o.status, o.total, o.customer_id", "", NULL },
		{ "SELECT *", "", NULL },
		{ "SELECT c.name, o.*", "", NULL },
		{ "SELECT DISTINCT *", "", NULL },
		{ "SELECT DISTINCT ON (c.id) *", "", NULL },
		{ "SELECT c.id, *", "", NULL },
		{ "SELECT row_to_json(o)", "", NULL },
		{ "SELECT o IS NULL", "", NULL },
		{ "SELECT 1", " WHERE c.id IN (SELECT * FROM customers)", NULL },
		{ "SELECT 1", " NATURAL JOIN customers k", NULL },
	};

	for (size_t i = 0; i < NK_ARRAY_LEN(cases); i++) {
		snprintf(sql, sizeof(sql), "%s %s%s", cases[i].list, j, cases[i].rest);
		expect_columns(sql, cases[i].want);
	}
	expect_columns("SELECT o.a FROM customers c JOIN orders AS o (a, b) ON o.a = c.id", NULL);
	expect_columns("SELECT x.name FROM customers x, orders WHERE orders.id = x.id * 10",
		       "\"id\"");
	expect_columns("SELECT x.name FROM customers x, orders WHERE x.name = 'a'", "\"id\"");
}
END_TEST

/* The handlers route_exec_handlers() gives an exec of <combine> with <flags> ("capture",
 * "analyze", "final", "cout" joined by spaces), as one letter each in table order. */
static void
expect_handlers(enum rx_combine combine, const char *flags, const char *want)
{
	static const char letter[RXH_COUNT] = {
		[RXH_SEQ] = 'S', [RXH_CAPTURE] = 'K', [RXH_PULL] = 'P', [RXH_INSEL] = 'I',
		[RXH_ANALYZE] = 'A', [RXH_MERGE] = 'M', [RXH_COPY_OUT] = 'O',
	};
	struct route *r = calloc(1, sizeof(*r));
	char got[RXH_COUNT + 1] = "";

	ck_assert_ptr_nonnull(r);
	r->x.combine = combine;
	r->x.subq_capture = strstr(flags, "capture") != NULL;
	r->x.an.on = strstr(flags, "analyze") != NULL;
	r->x.merge_final = strstr(flags, "final") != NULL;
	r->x.cout.on = strstr(flags, "cout") != NULL;
	route_exec_handlers(r);
	for (uint8_t k = 0; k < r->x.nhandlers; k++)
		got[k] = letter[r->x.handler[k]];
	ck_assert_msg(strcmp(got, want) == 0, "combine %d, %s: got \"%s\", want \"%s\"",
		      (int)combine, flags, got, want);
	free(r);
}

/* Which handlers claim an exec's packets before forwarding: one per way of combining, in
 * the table's order; a subquery's capture gives way to a merge and INSERT ... SELECT, which
 * keep what they read, and EXPLAIN ANALYZE's counting to the merge and its final query. */
START_TEST(test_answer_handlers)
{
	expect_handlers(RX_PASS, "", "");
	expect_handlers(RX_SUM, "", "");
	expect_handlers(RX_QUIET, "", "");
	expect_handlers(RX_SEQ, "", "S");
	expect_handlers(RX_PULL, "", "P");
	expect_handlers(RX_INSEL, "", "I");
	expect_handlers(RX_MERGE, "", "M");
	expect_handlers(RX_PASS, "capture", "K");
	expect_handlers(RX_MERGE, "capture", "M");
	expect_handlers(RX_INSEL, "capture", "I");
	expect_handlers(RX_SUM, "analyze", "A");
	expect_handlers(RX_SUM, "analyze final", "");
	expect_handlers(RX_MERGE, "analyze", "M");
	expect_handlers(RX_SUM, "cout", "O");
	expect_handlers(RX_MERGE, "cout", "MO");
	expect_handlers(RX_PULL, "analyze cout", "PAO");
	expect_handlers(RX_SEQ, "capture analyze cout", "SKAO");
}
END_TEST

Suite *
exec_suite(void)
{
	Suite *s = suite_create("exec");
	TCase *tc = tcase_create("client_sink");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_begin_rollback);
	tcase_add_test(tc, test_one_query_two_statements);
	tcase_add_test(tc, test_empty_query);
	tcase_add_test(tc, test_syntax_error);
	tcase_add_test(tc, test_neki_settings);
	suite_add_tcase(s, tc);
	tc = tcase_create("texts");
	tcase_add_test(tc, test_inline_texts);
	tcase_add_test(tc, test_pushdown_conjuncts);
	tcase_add_test(tc, test_pushdown_columns);
	tcase_add_test(tc, test_answer_handlers);
	suite_add_tcase(s, tc);
	return s;
}
