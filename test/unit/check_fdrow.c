/*
 * check_fdrow.c - tests of src/proto/fdrow.c: a SHOW FDS row written as a DataRow reads
 * back field by field (NULL columns, SCRAM keys as "\x<hex>" bytea), the column names are
 * pgbouncer's, and rows that are not SHOW FDS rows are refused (too few columns, a value
 * too long for its field, an unknown task, a bad number, a half set of SCRAM keys).
 */
#include "neki/base.h"

#include <check.h>
#include <string.h>

#include "neki/fdrow.h"
#include "neki/pktbuf.h"
#include "suites.h"

/* Write <r> and parse it back into <out>; the parse result. */
static bool
roundtrip(const struct fdrow *r, struct fdrow *out)
{
	struct pktbuf pb;
	struct nk_error err;
	bool ok;

	pktbuf_init(&pb, 256);
	fdrow_write(&pb, r);
	ck_assert(!pktbuf_failed(&pb));
	ck_assert_int_eq(pb.buf[0], 'D');
	ok = fdrow_parse(pb.buf + 5, pb.len - 5, out, &err);
	pktbuf_cleanup(&pb);
	return ok;
}

START_TEST(test_client_row_roundtrip)
{
	struct fdrow r = {
		.fd = 17, .task = FDROW_CLIENT, .user = "alice", .db = "app", .addr = "127.0.0.1",
		.port = 51234, .cancel = UINT64_C(0x00100001deadbeef), .link = 23,
		.client_encoding = "UTF8", .std_strings = "on", .datestyle = "ISO, MDY",
		.timezone = "Europe/Paris", .password = "SCRAM-SHA-256$4096:abc", .has_scram = true,
	}, out;

	for (size_t i = 0; i < SCRAM_KEY_LEN; i++) {
		r.scram_client_key[i] = (uint8_t)i;
		r.scram_server_key[i] = (uint8_t)(0xff - i);
	}
	ck_assert(roundtrip(&r, &out));
	ck_assert_int_eq(out.fd, 17);
	ck_assert_int_eq(out.task, FDROW_CLIENT);
	ck_assert_str_eq(out.user, "alice");
	ck_assert_str_eq(out.db, "app");
	ck_assert_str_eq(out.addr, "127.0.0.1");
	ck_assert_int_eq(out.port, 51234);
	ck_assert(out.cancel == UINT64_C(0x00100001deadbeef));
	ck_assert_int_eq(out.link, 23);
	ck_assert_str_eq(out.datestyle, "ISO, MDY");
	ck_assert_str_eq(out.timezone, "Europe/Paris");
	ck_assert_str_eq(out.password, "SCRAM-SHA-256$4096:abc");
	ck_assert(out.has_scram);
	ck_assert(memcmp(out.scram_client_key, r.scram_client_key, SCRAM_KEY_LEN) == 0);
	ck_assert(memcmp(out.scram_server_key, r.scram_server_key, SCRAM_KEY_LEN) == 0);
}
END_TEST

START_TEST(test_pooler_row_nulls)
{
	struct fdrow r = { .fd = 5, .task = FDROW_POOLER, .addr = "unix", .port = 6432 }, out;
	struct pktbuf pb;

	ck_assert(roundtrip(&r, &out));
	ck_assert_int_eq(out.task, FDROW_POOLER);
	ck_assert_str_eq(out.user, "");
	ck_assert_str_eq(out.password, "");
	ck_assert(!out.has_scram);
	ck_assert(out.cancel == 0 && out.link == 0);
	/* the empty columns are SQL NULLs on the wire (length -1), as pgbouncer sends them */
	pktbuf_init(&pb, 128);
	fdrow_write(&pb, &r);
	ck_assert(memmem(pb.buf, pb.len, "pooler\xff\xff\xff\xff\xff\xff\xff\xff", 14) != NULL);
	pktbuf_cleanup(&pb);
}
END_TEST

START_TEST(test_column_names)
{
	static const char *const want[FDROW_NCOLS] = {
		"fd", "task", "user", "database", "addr", "port", "cancel", "link",
		"client_encoding", "std_strings", "datestyle", "timezone", "password",
		"scram_client_key", "scram_server_key",
	};

	for (size_t i = 0; i < FDROW_NCOLS; i++)
		ck_assert_str_eq(fdrow_column_name(i), want[i]);
	ck_assert_uint_eq(fdrow_column_type(0), 23);
	ck_assert_uint_eq(fdrow_column_type(6), 20);
	ck_assert_uint_eq(fdrow_column_type(13), 17);
}
END_TEST

/* A DataRow of <n> text values parsed as a SHOW FDS row. */
static bool
parse_values(const char *const *vals, size_t n)
{
	struct pktbuf pb;
	struct nk_error err;
	struct fdrow out;
	bool ok;

	pktbuf_init(&pb, 256);
	pktbuf_write_data_row_text(&pb, vals, n);
	ok = fdrow_parse(pb.buf + 5, pb.len - 5, &out, &err);
	if (!ok)
		ck_assert_str_eq(err.sqlstate, "08P01");
	pktbuf_cleanup(&pb);
	return ok;
}

START_TEST(test_bad_rows_refused)
{
	const char *good[FDROW_NCOLS] = {
		"3", "server", "u", "d", "10.0.0.1", "5432", "42", "0", NULL, NULL, NULL, NULL,
		NULL, NULL, NULL,
	};
	const char *row[FDROW_NCOLS];
	char longname[FDROW_NAME_MAX + 1];

	ck_assert(parse_values(good, FDROW_NCOLS));
	ck_assert(!parse_values(good, FDROW_NCOLS - 1));
	memcpy(row, good, sizeof(row));
	row[1] = "listener";
	ck_assert(!parse_values(row, FDROW_NCOLS));
	memcpy(row, good, sizeof(row));
	row[0] = "-1";
	ck_assert(!parse_values(row, FDROW_NCOLS));
	row[0] = "3x";
	ck_assert(!parse_values(row, FDROW_NCOLS));
	memcpy(row, good, sizeof(row));
	row[6] = "99999999999999999999999";
	ck_assert(!parse_values(row, FDROW_NCOLS));
	memcpy(row, good, sizeof(row));
	memset(longname, 'x', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	row[2] = longname;
	ck_assert(!parse_values(row, FDROW_NCOLS));
	memcpy(row, good, sizeof(row));
	row[13] = "\\x00";
	ck_assert(!parse_values(row, FDROW_NCOLS));
	row[13] = "\\x0001020304050607080900010203040506070809000102030405060708090001";
	ck_assert(!parse_values(row, FDROW_NCOLS));	/* the server key is missing */
	row[14] = row[13];
	ck_assert(parse_values(row, FDROW_NCOLS));
}
END_TEST

Suite *
fdrow_suite(void)
{
	Suite *s = suite_create("fdrow");
	TCase *tc = tcase_create("fdrow");

	tcase_add_test(tc, test_client_row_roundtrip);
	tcase_add_test(tc, test_pooler_row_nulls);
	tcase_add_test(tc, test_column_names);
	tcase_add_test(tc, test_bad_rows_refused);
	suite_add_tcase(s, tc);
	return s;
}
