/*
 * check_proto.c - unit tests for src/proto's codec: every pktbuf writer against the
 * exact bytes, the bounds-checked reader, framing, startup packets, the options
 * parameter and the client/server message parsers.
 */
#include "neki/base.h"

#include <check.h>
#include <string.h>

#include "neki/pktbuf.h"
#include "neki/proto.h"
#include "suites.h"

/* Expected bytes as a string literal (may contain \0): length excludes the final NUL. */
#define EXPECT_BYTES(pb, lit) expect_bytes((pb), (const uint8_t *)(lit), sizeof(lit) - 1, #lit)

static void
expect_bytes(struct pktbuf *pb, const uint8_t *want, size_t n, const char *what)
{
	ck_assert_msg(!pktbuf_failed(pb), "pktbuf failed building %s", what);
	ck_assert_msg(pb->len == n, "length %zu, want %zu for %s", pb->len, n, what);
	for (size_t i = 0; i < n; i++)
		ck_assert_msg(pb->buf[i] == want[i], "byte %zu: 0x%02x, want 0x%02x for %s", i,
			      pb->buf[i], want[i], what);
	pktbuf_reset(pb);
}

/* ---- pktbuf basics ---- */

START_TEST(test_pktbuf_puts)
{
	struct pktbuf pb;

	pktbuf_init(&pb, 0);
	pktbuf_put_byte(&pb, 0xab);
	pktbuf_put_int16(&pb, -2);
	pktbuf_put_int32(&pb, 0x01020304);
	pktbuf_put_string(&pb, "hi");
	pktbuf_put_bytes(&pb, "xyz", 3);
	EXPECT_BYTES(&pb, "\xab\xff\xfe\x01\x02\x03\x04hi\0xyz");
	/* growth beyond the first chunk */
	for (int i = 0; i < 10000; i++)
		pktbuf_put_int32(&pb, i);
	ck_assert(!pktbuf_failed(&pb));
	ck_assert_uint_eq(pb.len, 40000);
	ck_assert_uint_eq(pb.buf[39999], 9999 & 0xff);
	pktbuf_cleanup(&pb);
}
END_TEST

START_TEST(test_pktbuf_fixed_overflow_sticky)
{
	uint8_t mem[8];
	struct pktbuf pb;

	pktbuf_init_fixed(&pb, mem, sizeof(mem));
	pktbuf_write_sync(&pb);		/* 5 bytes: fits */
	ck_assert(!pktbuf_failed(&pb));
	pktbuf_write_query(&pb, "SELECT 1");	/* does not fit */
	ck_assert(pktbuf_failed(&pb));
	pktbuf_put_byte(&pb, 1);	/* no-op once failed */
	ck_assert(pktbuf_failed(&pb));
	pktbuf_reset(&pb);
	ck_assert(!pktbuf_failed(&pb));
	pktbuf_write_flush(&pb);
	EXPECT_BYTES(&pb, "H\0\0\0\4");
	pktbuf_cleanup(&pb);
}
END_TEST

/* ---- writers to clients ---- */

START_TEST(test_write_auth)
{
	struct pktbuf pb;
	const uint8_t salt[4] = { 1, 2, 3, 4 };
	const char *mechs[] = { "SCRAM-SHA-256" };

	pktbuf_init(&pb, 64);
	pktbuf_write_auth_ok(&pb);
	EXPECT_BYTES(&pb, "R\0\0\0\x08\0\0\0\0");
	pktbuf_write_auth_cleartext(&pb);
	EXPECT_BYTES(&pb, "R\0\0\0\x08\0\0\0\x03");
	pktbuf_write_auth_md5(&pb, salt);
	EXPECT_BYTES(&pb, "R\0\0\0\x0c\0\0\0\x05\x01\x02\x03\x04");
	pktbuf_write_auth_sasl(&pb, mechs, 1);
	EXPECT_BYTES(&pb, "R\0\0\0\x17\0\0\0\x0aSCRAM-SHA-256\0\0");
	pktbuf_write_auth_sasl_continue(&pb, "r=abc", 5);
	EXPECT_BYTES(&pb, "R\0\0\0\x0d\0\0\0\x0br=abc");
	pktbuf_write_auth_sasl_final(&pb, "v=xy", 4);
	EXPECT_BYTES(&pb, "R\0\0\0\x0c\0\0\0\x0cv=xy");
	pktbuf_cleanup(&pb);
}
END_TEST

START_TEST(test_write_session_messages)
{
	struct pktbuf pb;

	pktbuf_init(&pb, 0);
	pktbuf_write_parameter_status(&pb, "TimeZone", "UTC");
	EXPECT_BYTES(&pb, "S\0\0\0\x11TimeZone\0UTC\0");
	pktbuf_write_backend_key_data(&pb, 0x01020304, 0xa0b0c0d0);
	EXPECT_BYTES(&pb, "K\0\0\0\x0c\x01\x02\x03\x04\xa0\xb0\xc0\xd0");
	pktbuf_write_ready_for_query(&pb, 'I');
	EXPECT_BYTES(&pb, "Z\0\0\0\x05I");
	pktbuf_write_command_complete(&pb, "SELECT 1");
	EXPECT_BYTES(&pb, "C\0\0\0\x0dSELECT 1\0");
	pktbuf_write_empty_query(&pb);
	EXPECT_BYTES(&pb, "I\0\0\0\x04");
	pktbuf_write_parse_complete(&pb);
	EXPECT_BYTES(&pb, "1\0\0\0\x04");
	pktbuf_write_bind_complete(&pb);
	EXPECT_BYTES(&pb, "2\0\0\0\x04");
	pktbuf_write_close_complete(&pb);
	EXPECT_BYTES(&pb, "3\0\0\0\x04");
	pktbuf_write_no_data(&pb);
	EXPECT_BYTES(&pb, "n\0\0\0\x04");
	pktbuf_write_portal_suspended(&pb);
	EXPECT_BYTES(&pb, "s\0\0\0\x04");
	pktbuf_write_notification(&pb, 7, "ch", "hi");
	EXPECT_BYTES(&pb, "A\0\0\0\x0e\0\0\0\x07" "ch\0hi\0");
	pktbuf_cleanup(&pb);
}
END_TEST

START_TEST(test_write_error_notice)
{
	struct pktbuf pb;
	struct nk_error err;
	const struct proto_err_field extra[] = { { 'P', "12" }, { 'W', "ctx" } };

	pktbuf_init(&pb, 0);
	nk_error_set(&err, "08P01", "bad");
	pktbuf_write_error(&pb, &err);
	EXPECT_BYTES(&pb, "E\0\0\0\x1fSERROR\0VERROR\0C08P01\0Mbad\0\0");
	err.severity = NK_SEV_FATAL;
	nk_error_detail(&err, "d");
	nk_error_hint(&err, "h");
	pktbuf_write_error(&pb, &err);
	EXPECT_BYTES(&pb, "E\0\0\0\x25SFATAL\0VFATAL\0C08P01\0Mbad\0Dd\0Hh\0\0");
	nk_error_set(&err, "00000", "note");
	err.severity = NK_SEV_NOTICE;
	pktbuf_write_notice(&pb, &err);
	EXPECT_BYTES(&pb, "N\0\0\0\x22SNOTICE\0VNOTICE\0C00000\0Mnote\0\0");
	nk_error_set(&err, "42601", "syntax");
	pktbuf_write_error_ex(&pb, 'E', &err, extra, 2);
	EXPECT_BYTES(&pb, "E\0\0\0\x2bSERROR\0VERROR\0C42601\0Msyntax\0P12\0Wctx\0\0");
	pktbuf_cleanup(&pb);
}
END_TEST

START_TEST(test_write_rows)
{
	struct pktbuf pb;
	const struct proto_column cols[] = {
		{ "id", 16384, 1, 23, 4, -1, 0 },
	};
	const char *vals[] = { "42", NULL };
	const struct proto_value bvals[] = { { (const uint8_t *)"\x01", 1 }, { NULL, 0 } };
	const uint32_t oids[] = { 23, 25 };

	pktbuf_init(&pb, 0);
	pktbuf_write_row_description(&pb, cols, 1);
	EXPECT_BYTES(&pb, "T\0\0\0\x1b\0\x01id\0\0\0\x40\0\0\x01\0\0\0\x17\0\x04\xff\xff\xff\xff\0\0");
	pktbuf_write_data_row_text(&pb, vals, 2);
	EXPECT_BYTES(&pb, "D\0\0\0\x10\0\x02\0\0\0\x02" "42\xff\xff\xff\xff");
	pktbuf_write_data_row(&pb, bvals, 2);
	EXPECT_BYTES(&pb, "D\0\0\0\x0f\0\x02\0\0\0\x01\x01\xff\xff\xff\xff");
	pktbuf_write_parameter_description(&pb, oids, 2);
	EXPECT_BYTES(&pb, "t\0\0\0\x0e\0\x02\0\0\0\x17\0\0\0\x19");
	pktbuf_cleanup(&pb);
}
END_TEST

START_TEST(test_write_copy_and_negotiate)
{
	struct pktbuf pb;
	const int16_t fmts[] = { 0, 1 };
	const char *opts[] = { "_pq_.foo" };

	pktbuf_init(&pb, 0);
	pktbuf_write_copy_response(&pb, 'G', 0, fmts, 2);
	EXPECT_BYTES(&pb, "G\0\0\0\x0b\0\0\x02\0\0\0\x01");
	pktbuf_write_copy_response(&pb, 'H', 1, NULL, 0);
	EXPECT_BYTES(&pb, "H\0\0\0\x07\x01\0\0");
	pktbuf_write_copy_data(&pb, "a\tb\n", 4);
	EXPECT_BYTES(&pb, "d\0\0\0\x08" "a\tb\n");
	pktbuf_write_copy_done(&pb);
	EXPECT_BYTES(&pb, "c\0\0\0\x04");
	pktbuf_write_copy_fail(&pb, "no");
	EXPECT_BYTES(&pb, "f\0\0\0\x07no\0");
	pktbuf_write_negotiate_protocol(&pb, 0, opts, 1);
	EXPECT_BYTES(&pb, "v\0\0\0\x15\0\0\0\0\0\0\0\x01_pq_.foo\0");
	pktbuf_cleanup(&pb);
}
END_TEST

/* ---- writers to servers ---- */

START_TEST(test_write_startup_auth_to_server)
{
	struct pktbuf pb;
	const struct proto_param params[] = { { "user", "bob" }, { "database", "db" } };

	pktbuf_init(&pb, 0);
	pktbuf_write_startup(&pb, params, 2);
	EXPECT_BYTES(&pb, "\0\0\0\x1e\0\x03\0\0user\0bob\0database\0db\0\0");
	pktbuf_write_password(&pb, "md5abc");
	EXPECT_BYTES(&pb, "p\0\0\0\x0bmd5abc\0");
	pktbuf_write_sasl_initial(&pb, "SCRAM-SHA-256", "n,,n=,r=x", 9);
	EXPECT_BYTES(&pb, "p\0\0\0\x1fSCRAM-SHA-256\0\0\0\0\x09n,,n=,r=x");
	pktbuf_write_sasl_initial(&pb, "X", NULL, 0);
	EXPECT_BYTES(&pb, "p\0\0\0\x0aX\0\xff\xff\xff\xff");
	pktbuf_write_sasl_response(&pb, "c=biws", 6);
	EXPECT_BYTES(&pb, "p\0\0\0\x0a" "c=biws");
	pktbuf_write_cancel_request(&pb, 5, 6);
	EXPECT_BYTES(&pb, "\0\0\0\x10\x04\xd2\x16\x2e\0\0\0\x05\0\0\0\x06");
	pktbuf_write_ssl_request(&pb);
	EXPECT_BYTES(&pb, "\0\0\0\x08\x04\xd2\x16\x2f");
	pktbuf_cleanup(&pb);
}
END_TEST

START_TEST(test_write_extended_to_server)
{
	struct pktbuf pb;
	const uint32_t oids[] = { 23 };
	const int16_t pfmt[] = { 1 };
	const int16_t rfmt[] = { 0 };
	const struct proto_value params[] = { { (const uint8_t *)"\0\0\0\x07", 4 }, { NULL, 0 } };
	struct proto_bind_spec b = { "", "s1", pfmt, 1, params, 2, rfmt, 1 };

	pktbuf_init(&pb, 0);
	pktbuf_write_query(&pb, "SELECT 1");
	EXPECT_BYTES(&pb, "Q\0\0\0\x0dSELECT 1\0");
	pktbuf_write_parse(&pb, "s1", "SELECT $1", oids, 1);
	EXPECT_BYTES(&pb, "P\0\0\0\x17s1\0SELECT $1\0\0\x01\0\0\0\x17");
	pktbuf_write_bind(&pb, &b);
	EXPECT_BYTES(&pb, "B\0\0\0\x1e\0s1\0\0\x01\0\x01\0\x02\0\0\0\x04\0\0\0\x07"
		     "\xff\xff\xff\xff\0\x01\0\0");
	pktbuf_write_describe(&pb, 'S', "s1");
	EXPECT_BYTES(&pb, "D\0\0\0\x08Ss1\0");
	pktbuf_write_execute(&pb, "", 0);
	EXPECT_BYTES(&pb, "E\0\0\0\x09\0\0\0\0\0");
	pktbuf_write_close(&pb, 'P', "p");
	EXPECT_BYTES(&pb, "C\0\0\0\x07Pp\0");
	pktbuf_write_sync(&pb);
	EXPECT_BYTES(&pb, "S\0\0\0\x04");
	pktbuf_write_flush(&pb);
	EXPECT_BYTES(&pb, "H\0\0\0\x04");
	pktbuf_write_terminate(&pb);
	EXPECT_BYTES(&pb, "X\0\0\0\x04");
	pktbuf_cleanup(&pb);
}
END_TEST

/* ---- reader ---- */

START_TEST(test_reader_bounds)
{
	struct proto_reader r;
	struct nk_error err;
	const uint8_t body[] = { 0, 1, 0, 0, 0, 2, 'a', 0, 'x' };

	proto_reader_init(&r, 'X', body, sizeof(body));
	ck_assert_int_eq(proto_get_int16(&r), 1);
	ck_assert_int_eq(proto_get_int32(&r), 2);
	ck_assert_str_eq(proto_get_string(&r), "a");
	ck_assert_uint_eq(proto_reader_left(&r), 1);
	ck_assert(!proto_reader_end(&r, &err));
	ck_assert_str_eq(err.sqlstate, "08P01");
	ck_assert_str_eq(err.message, "invalid message format");

	proto_reader_init(&r, 'X', body, 3);
	(void)proto_get_int32(&r);
	ck_assert(!proto_reader_ok(&r));
	ck_assert_int_eq(proto_get_byte(&r), 0);	/* sticky */
	ck_assert(!proto_reader_end(&r, &err));
	ck_assert_str_eq(err.message, "insufficient data left in message");

	proto_reader_init(&r, 'X', body + 8, 1);	/* "x" without NUL */
	ck_assert_str_eq(proto_get_string(&r), "");
	ck_assert(!proto_reader_end(&r, &err));
	ck_assert_str_eq(err.message, "invalid string in message");

	proto_reader_init(&r, 'X', body, sizeof(body));
	ck_assert_ptr_null(proto_get_bytes(&r, 10));
	proto_reader_init(&r, 'X', body, sizeof(body));
	ck_assert_ptr_nonnull(proto_get_bytes(&r, 9));
	ck_assert(proto_reader_end(&r, &err));
}
END_TEST

START_TEST(test_frame_next)
{
	struct proto_frame f;
	struct nk_error err;
	const uint8_t two[] = "Q\0\0\0\x06x\0S\0\0\0\x04";
	const uint8_t bad[] = "Q\0\0\0\x03";
	const uint8_t big[] = "d\0\x10\0\0";
	const uint8_t st_short[] = "\0\0\0\x07\0\x03\0\0";
	const uint8_t st_big[] = "\0\0\x27\x11";

	ck_assert_int_eq(proto_frame_next(two, 4, false, 1000, &f, &err), PROTO_FRAME_PARTIAL);
	ck_assert(!f.have_header);
	ck_assert_int_eq(proto_frame_next(two, 6, false, 1000, &f, &err), PROTO_FRAME_PARTIAL);
	ck_assert(f.have_header);
	ck_assert_uint_eq(f.total, 7);
	ck_assert_int_eq(proto_frame_next(two, 12, false, 1000, &f, &err), PROTO_FRAME_OK);
	ck_assert_int_eq(f.type, 'Q');
	ck_assert_uint_eq(f.body_len, 2);
	ck_assert_int_eq(f.body[0], 'x');
	ck_assert_int_eq(proto_frame_next(two + 7, 5, false, 1000, &f, &err), PROTO_FRAME_OK);
	ck_assert_int_eq(f.type, 'S');
	ck_assert_uint_eq(f.body_len, 0);

	ck_assert_int_eq(proto_frame_next(bad, 5, false, 1000, &f, &err), PROTO_FRAME_BAD);
	ck_assert_str_eq(err.sqlstate, "08P01");
	ck_assert_str_eq(err.message, "invalid message length");
	ck_assert_int_eq(proto_frame_next(big, 5, false, 1000, &f, &err), PROTO_FRAME_BAD);
	ck_assert_str_eq(err.message, "invalid message length");
	/* the same header passes with a big enough max_packet_size, streaming-style */
	ck_assert_int_eq(proto_frame_next(big, 5, false, 0x7fffffff, &f, &err),
			 PROTO_FRAME_PARTIAL);
	ck_assert(f.have_header);
	ck_assert_uint_eq(f.total, 0x100001);

	ck_assert_int_eq(proto_frame_next(st_short, 8, true, 0, &f, &err), PROTO_FRAME_BAD);
	ck_assert_str_eq(err.message, "invalid length of startup packet");
	ck_assert_int_eq(proto_frame_next(st_big, 4, true, 0, &f, &err), PROTO_FRAME_BAD);
}
END_TEST

START_TEST(test_frontend_types)
{
	struct nk_error err;
	const char *ok = "QPBEDCHSXdcfFp";

	for (const char *p = ok; *p; p++)
		ck_assert(proto_frontend_type_check(*p, &err));
	ck_assert(!proto_frontend_type_check('Z', &err));
	ck_assert_str_eq(err.sqlstate, "08P01");
	ck_assert_str_eq(err.message, "invalid frontend message type 90");
	ck_assert(!proto_frontend_type_check('\0', &err));
	ck_assert_str_eq(err.message, "invalid frontend message type 0");
}
END_TEST

Suite *
proto_suite(void)
{
	Suite *s = suite_create("proto");
	TCase *tc = tcase_create("pktbuf");

	tcase_add_test(tc, test_pktbuf_puts);
	tcase_add_test(tc, test_pktbuf_fixed_overflow_sticky);
	tcase_add_test(tc, test_write_auth);
	tcase_add_test(tc, test_write_session_messages);
	tcase_add_test(tc, test_write_error_notice);
	tcase_add_test(tc, test_write_rows);
	tcase_add_test(tc, test_write_copy_and_negotiate);
	tcase_add_test(tc, test_write_startup_auth_to_server);
	tcase_add_test(tc, test_write_extended_to_server);
	suite_add_tcase(s, tc);

	tc = tcase_create("reader");
	tcase_add_test(tc, test_reader_bounds);
	tcase_add_test(tc, test_frame_next);
	tcase_add_test(tc, test_frontend_types);
	suite_add_tcase(s, tc);
	return s;
}
