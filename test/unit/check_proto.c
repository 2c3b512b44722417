/*
 * check_proto.c - unit tests for src/proto's codec: every pktbuf writer against the
 * exact bytes, the bounds-checked reader, framing, startup packets, the options
 * parameter and the client/server message parsers.
 */
#include "neki/base.h"

#include <check.h>
#include <stdio.h>
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
	pktbuf_write_copy_response(&pb, 'W', 0, fmts, 1);
	EXPECT_BYTES(&pb, "W\0\0\0\x09\0\0\x01\0\0");
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
	pktbuf_write_ssl_answer(&pb, 'N');
	EXPECT_BYTES(&pb, "N");
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
	const uint8_t st_big[] = "\0\0\x27\x15";

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
	for (const char *p = ok; *p; p++)
		ck_assert_str_ne(proto_frontend_msg_name(*p), "unknown");
	ck_assert_str_eq(proto_frontend_msg_name('P'), "Parse");
	ck_assert_str_eq(proto_frontend_msg_name('Z'), "unknown");
	ck_assert_str_eq(proto_backend_msg_name('Z'), "ReadyForQuery");
	ck_assert_str_eq(proto_backend_msg_name('v'), "NegotiateProtocolVersion");
	ck_assert_str_eq(proto_backend_msg_name('Q'), "unknown");
}
END_TEST


/* ---- startup ---- */

/* Build a startup packet body (version + params) into <pb> and return its body. */
static const uint8_t *
startup_body(struct pktbuf *pb, uint32_t version, const char *params, size_t plen, size_t *len)
{
	pktbuf_reset(pb);
	pktbuf_put_int32(pb, (int32_t)version);
	pktbuf_put_bytes(pb, params, plen);
	*len = pb->len;
	return pb->buf;
}

#define STARTUP(pb, v, lit, lenp) startup_body((pb), (v), (lit), sizeof(lit) - 1, (lenp))

START_TEST(test_startup_message)
{
	struct pktbuf pb;
	struct proto_startup st;
	struct proto_param p;
	struct nk_error err;
	const uint8_t *b;
	size_t len, pos = 0;

	pktbuf_init(&pb, 0);
	b = STARTUP(&pb, PROTO_V3_0, "user\0bob\0options\0-c a=b\0application_name\0psql\0\0", &len);
	ck_assert(proto_startup_parse(b, len, &st, &err));
	ck_assert_int_eq(st.kind, PROTO_STARTUP_MESSAGE);
	ck_assert_uint_eq(st.nparams, 3);
	ck_assert_str_eq(st.user, "bob");
	ck_assert_str_eq(st.database, "bob");	/* defaults to the user */
	ck_assert_str_eq(st.options, "-c a=b");
	ck_assert_str_eq(st.application_name, "psql");
	ck_assert_int_eq(st.replication, PROTO_REPL_NONE);
	ck_assert(!proto_startup_needs_negotiation(&st));
	ck_assert(proto_startup_next_param(&st, &pos, &p));
	ck_assert_str_eq(p.name, "user");
	ck_assert_str_eq(p.value, "bob");
	ck_assert(proto_startup_next_param(&st, &pos, &p));
	ck_assert(proto_startup_next_param(&st, &pos, &p));
	ck_assert_str_eq(p.value, "psql");
	ck_assert(!proto_startup_next_param(&st, &pos, &p));

	b = STARTUP(&pb, PROTO_V3_0, "user\0bob\0database\0\0replication\0database\0\0", &len);
	ck_assert(proto_startup_parse(b, len, &st, &err));
	ck_assert_str_eq(st.database, "bob");
	ck_assert_int_eq(st.replication, PROTO_REPL_LOGICAL);
	b = STARTUP(&pb, PROTO_V3_0, "user\0bob\0replication\0ON\0\0", &len);
	ck_assert(proto_startup_parse(b, len, &st, &err));
	ck_assert_int_eq(st.replication, PROTO_REPL_PHYSICAL);
	b = STARTUP(&pb, PROTO_V3_0, "user\0bob\0replication\0f\0\0", &len);
	ck_assert(proto_startup_parse(b, len, &st, &err));
	ck_assert_int_eq(st.replication, PROTO_REPL_NONE);
	b = STARTUP(&pb, PROTO_V3_0, "user\0bob\0replication\0maybe\0\0", &len);
	ck_assert(!proto_startup_parse(b, len, &st, &err));
	ck_assert_str_eq(err.sqlstate, "22023");
	ck_assert_str_eq(err.message, "invalid value for parameter \"replication\": \"maybe\"");
	pktbuf_cleanup(&pb);
}
END_TEST

START_TEST(test_startup_errors)
{
	struct pktbuf pb;
	struct proto_startup st;
	struct nk_error err;
	const uint8_t *b;
	size_t len;

	pktbuf_init(&pb, 0);
	b = STARTUP(&pb, PROTO_V3_0, "user\0bob\0", &len);	/* no terminator */
	ck_assert(!proto_startup_parse(b, len, &st, &err));
	ck_assert_str_eq(err.sqlstate, "08P01");
	ck_assert_str_eq(err.message,
			 "invalid startup packet layout: expected terminator as last byte");
	b = STARTUP(&pb, PROTO_V3_0, "user\0bob", &len);	/* unterminated value */
	ck_assert(!proto_startup_parse(b, len, &st, &err));
	ck_assert_str_eq(err.sqlstate, "08P01");
	b = STARTUP(&pb, PROTO_V3_0, "user", &len);
	ck_assert(!proto_startup_parse(b, len, &st, &err));
	b = STARTUP(&pb, PROTO_V3_0, "user\0bob\0\0extra", &len);
	ck_assert(!proto_startup_parse(b, len, &st, &err));
	/* a last byte that is not the terminator (found by test/fuzz/fuzz_client: the
	 * parameter walk then read past the packet) */
	b = STARTUP(&pb, PROTO_V3_0, "user\0bob\0L", &len);
	ck_assert(!proto_startup_parse(b, len, &st, &err));
	ck_assert_str_eq(err.message, "invalid startup packet layout: expected terminator as "
			 "last byte");
	b = STARTUP(&pb, PROTO_V3_0, "", &len);
	ck_assert(!proto_startup_parse(b, len, &st, &err));
	b = STARTUP(&pb, PROTO_V3_0, "database\0db\0\0", &len);
	ck_assert(!proto_startup_parse(b, len, &st, &err));
	ck_assert_str_eq(err.sqlstate, "28000");
	ck_assert_str_eq(err.message, "no PostgreSQL user name specified in startup packet");
	b = STARTUP(&pb, PROTO_VERSION(2, 0), "user\0bob\0\0", &len);
	ck_assert(!proto_startup_parse(b, len, &st, &err));
	ck_assert_str_eq(err.sqlstate, "0A000");
	ck_assert_str_eq(err.message, "unsupported frontend protocol 2.0: server supports 3.0 to 3.0");
	b = STARTUP(&pb, PROTO_VERSION(4, 0), "user\0bob\0\0", &len);
	ck_assert(!proto_startup_parse(b, len, &st, &err));
	ck_assert_str_eq(err.message, "unsupported frontend protocol 4.0: server supports 3.0 to 3.0");
	ck_assert(!proto_startup_parse(b, 3, &st, &err));
	ck_assert_str_eq(err.message, "invalid length of startup packet");
	pktbuf_cleanup(&pb);
}
END_TEST

START_TEST(test_startup_requests)
{
	struct pktbuf pb;
	struct proto_startup st;
	struct nk_error err;
	const uint8_t *b;
	size_t len;

	pktbuf_init(&pb, 0);
	b = STARTUP(&pb, 80877103, "", &len);
	ck_assert(proto_startup_parse(b, len, &st, &err));
	ck_assert_int_eq(st.kind, PROTO_STARTUP_SSL);
	/* a second one on the connection: Postgres' answer to version 1234.5679 */
	ck_assert(!proto_startup_refuse_repeat(&st, &err));
	ck_assert_str_eq(err.sqlstate, "0A000");
	ck_assert_str_eq(err.message, "unsupported frontend protocol 1234.5679: server supports "
			 "3.0 to 3.0");
	b = STARTUP(&pb, 80877104, "", &len);
	ck_assert(proto_startup_parse(b, len, &st, &err));
	ck_assert_int_eq(st.kind, PROTO_STARTUP_GSSENC);
	ck_assert(!proto_startup_refuse_repeat(&st, &err));
	ck_assert_str_eq(err.message, "unsupported frontend protocol 1234.5680: server supports "
			 "3.0 to 3.0");
	b = STARTUP(&pb, 80877102, "\0\0\0\x05\xde\xad\xbe\xef", &len);
	ck_assert(proto_startup_parse(b, len, &st, &err));
	ck_assert_int_eq(st.kind, PROTO_STARTUP_CANCEL);
	ck_assert_uint_eq(st.cancel_pid, 5);
	ck_assert_uint_eq(st.cancel_key, 0xdeadbeef);
	b = STARTUP(&pb, 80877102, "\0\0\0\x05", &len);
	ck_assert(!proto_startup_parse(b, len, &st, &err));
	ck_assert_str_eq(err.sqlstate, "08P01");
	/* the builder's own packets parse back */
	pktbuf_reset(&pb);
	pktbuf_write_cancel_request(&pb, 9, 10);
	ck_assert(proto_startup_parse(pb.buf + 4, pb.len - 4, &st, &err));
	ck_assert_int_eq(st.kind, PROTO_STARTUP_CANCEL);
	ck_assert_uint_eq(st.cancel_key, 10);
	pktbuf_cleanup(&pb);
}
END_TEST

START_TEST(test_startup_negotiation)
{
	struct pktbuf pb, out;
	struct proto_startup st;
	struct nk_error err;
	const uint8_t *b;
	size_t len;

	pktbuf_init(&pb, 0);
	pktbuf_init(&out, 0);
	b = STARTUP(&pb, PROTO_VERSION(3, 2), "user\0bob\0\0", &len);
	ck_assert(proto_startup_parse(b, len, &st, &err));
	ck_assert_uint_eq(st.minor, 2);
	ck_assert(proto_startup_needs_negotiation(&st));
	proto_startup_write_negotiation(&out, &st);
	/* the newest version as a whole number, 3.0 = 0x00030000, as Postgres sends it */
	EXPECT_BYTES(&out, "v\0\0\0\x0c\0\x03\0\0\0\0\0\0");
	b = STARTUP(&pb, PROTO_V3_0, "_pq_.a\0x\0user\0bob\0_pq_.b\0y\0\0", &len);
	ck_assert(proto_startup_parse(b, len, &st, &err));
	ck_assert_uint_eq(st.npq_options, 2);
	ck_assert(proto_startup_needs_negotiation(&st));
	proto_startup_write_negotiation(&out, &st);
	EXPECT_BYTES(&out, "v\0\0\0\x1a\0\x03\0\0\0\0\0\x02_pq_.a\0_pq_.b\0");
	pktbuf_cleanup(&out);
	pktbuf_cleanup(&pb);
}
END_TEST

/* ---- options ---- */

struct opt_collect {
	char buf[512];		/* "name=value;" per item */
	const char *refuse;	/* name to refuse, or NULL */
};

static bool
opt_cb(void *arg, const char *name, const char *value, struct nk_error *err)
{
	struct opt_collect *c = arg;
	size_t n = strlen(c->buf);

	if (c->refuse && strcmp(name, c->refuse) == 0)
		return proto_options_unsupported(err, name);
	snprintf(c->buf + n, sizeof(c->buf) - n, "%s=%s;", name, value);
	return true;
}

static const char *
opts(const char *in, struct nk_error *err, bool *ok)
{
	static struct opt_collect c;

	memset(&c, 0, sizeof(c));
	c.refuse = "enable_seqscan";
	*ok = proto_options_parse(in, opt_cb, &c, err);
	return c.buf;
}

START_TEST(test_options_forms)
{
	struct nk_error err;
	bool ok;

	ck_assert_str_eq(opts("-c timezone=Europe/Lisbon", &err, &ok), "timezone=Europe/Lisbon;");
	ck_assert(ok);
	ck_assert_str_eq(opts("-ctimezone=Europe/Lisbon  -cdatestyle=German,\\ YMD", &err, &ok),
			 "timezone=Europe/Lisbon;datestyle=German, YMD;");
	ck_assert(ok);
	ck_assert_str_eq(opts("--timezone=UTC  --datestyle=ISO", &err, &ok),
			 "timezone=UTC;datestyle=ISO;");
	ck_assert(ok);
	ck_assert_str_eq(opts("-c t\\imezone=\\E\\u\\r\\o\\pe/Lisbon  -c    dat\\estyle\\=\\Ge\\rman,\\ YMD",
			      &err, &ok),
			 "timezone=Europe/Lisbon;datestyle=German, YMD;");
	ck_assert(ok);
	ck_assert_str_eq(opts("  -c a=b=c", &err, &ok), "a=b=c;");
	ck_assert(ok);
	ck_assert_str_eq(opts("", &err, &ok), "");
	ck_assert(ok);
}
END_TEST

START_TEST(test_options_errors)
{
	static const char *const bad[] = { "-d", "-c timezone", "-c", "timezone=UTC", "-c a=b ",
					   "-c a=b -x" };
	const char *msg = "unsupported options startup parameter: only '-c config=val' and "
			  "'--config=val' are allowed";
	struct nk_error err;
	bool ok;

	for (size_t i = 0; i < NK_ARRAY_LEN(bad); i++) {
		(void)opts(bad[i], &err, &ok);
		ck_assert_msg(!ok, "accepted %s", bad[i]);
		ck_assert_str_eq(err.sqlstate, "08P01");
		ck_assert_str_eq(err.message, msg);
	}
	ck_assert_str_eq(opts("-c a=1 -c enable_seqscan=false", &err, &ok), "a=1;");
	ck_assert(!ok);
	ck_assert_str_eq(err.message, "unsupported startup parameter in options: enable_seqscan");
}
END_TEST

/* ---- client message parsers ---- */

START_TEST(test_parse_client_messages)
{
	struct nk_error err;
	struct proto_parse_msg pm;
	struct proto_target_msg tm;
	struct proto_execute_msg em;
	struct proto_sasl_initial_msg sm;
	const char *s;

	ck_assert(proto_parse_query((const uint8_t *)"SELECT 1", 9, &s, &err));
	ck_assert_str_eq(s, "SELECT 1");
	ck_assert(!proto_parse_query((const uint8_t *)"SELECT 1", 8, &s, &err));
	ck_assert_str_eq(err.message, "invalid string in message");
	ck_assert(!proto_parse_query((const uint8_t *)"a\0b", 4, &s, &err));
	ck_assert_str_eq(err.message, "invalid message format");

	ck_assert(proto_parse_parse((const uint8_t *)"s\0SELECT $1\0\0\x02\0\0\0\x17\0\0\0\x19", 22,
				    &pm, &err));
	ck_assert_str_eq(pm.name, "s");
	ck_assert_str_eq(pm.query, "SELECT $1");
	ck_assert_uint_eq(pm.nparams, 2);
	ck_assert_uint_eq(proto_parse_param_oid(&pm, 1), 25);
	ck_assert(!proto_parse_parse((const uint8_t *)"s\0SELECT $1\0\0\x02\0\0\0\x17", 18, &pm,
				     &err));
	ck_assert_str_eq(err.message, "insufficient data left in message");

	ck_assert(proto_parse_describe((const uint8_t *)"Sstmt", 6, &tm, &err));
	ck_assert_int_eq(tm.kind, 'S');
	ck_assert_str_eq(tm.name, "stmt");
	ck_assert(!proto_parse_describe((const uint8_t *)"X", 2, &tm, &err));
	ck_assert_str_eq(err.message, "invalid DESCRIBE message subtype 88");
	ck_assert(proto_parse_close((const uint8_t *)"P", 2, &tm, &err));
	ck_assert(!proto_parse_close((const uint8_t *)"Q", 2, &tm, &err));
	ck_assert_str_eq(err.message, "invalid CLOSE message subtype 81");

	ck_assert(proto_parse_execute((const uint8_t *)"\0\0\0\0\x0a", 5, &em, &err));
	ck_assert_int_eq(em.max_rows, 10);
	ck_assert(proto_parse_empty('S', 0, &err));
	ck_assert(!proto_parse_empty('S', 1, &err));
	ck_assert_str_eq(err.sqlstate, "08P01");
	ck_assert(proto_parse_copy_fail((const uint8_t *)"oops", 5, &s, &err));
	ck_assert_str_eq(s, "oops");
	ck_assert(proto_parse_password((const uint8_t *)"md5x", 5, &s, &err));
	ck_assert_str_eq(s, "md5x");

	ck_assert(proto_parse_sasl_initial((const uint8_t *)"SCRAM-SHA-256\0\0\0\0\x03n,,", 21,
					   &sm, &err));
	ck_assert_str_eq(sm.mechanism, "SCRAM-SHA-256");
	ck_assert_uint_eq(sm.len, 3);
	ck_assert(memcmp(sm.data, "n,,", 3) == 0);
	ck_assert(proto_parse_sasl_initial((const uint8_t *)"M\0\xff\xff\xff\xff", 6, &sm, &err));
	ck_assert_ptr_null(sm.data);
	ck_assert(!proto_parse_sasl_initial((const uint8_t *)"M\0\0\0\0\x09n,,", 9, &sm, &err));
	ck_assert(!proto_parse_sasl_initial((const uint8_t *)"M\0\xff\xff\xff\xfe", 6, &sm, &err));
	ck_assert(!proto_function_call_refuse(&err));
	ck_assert_str_eq(err.sqlstate, "0A000");
}
END_TEST

START_TEST(test_parse_bind)
{
	struct pktbuf pb;
	struct nk_error err;
	struct proto_bind_msg m;
	struct proto_value v[4];
	const int16_t pfmt[] = { 1 };
	const int16_t rfmt[] = { 0, 1 };
	const struct proto_value params[] = { { (const uint8_t *)"ab", 2 }, { NULL, 0 },
					      { (const uint8_t *)"", 0 } };
	struct proto_bind_spec b = { "p", "s", pfmt, 1, params, 3, rfmt, 2 };

	pktbuf_init(&pb, 0);
	pktbuf_write_bind(&pb, &b);
	ck_assert(proto_parse_bind(pb.buf + 5, pb.len - 5, &m, &err));
	ck_assert_str_eq(m.portal, "p");
	ck_assert_str_eq(m.stmt, "s");
	ck_assert_uint_eq(m.nparams, 3);
	ck_assert_uint_eq(proto_bind_params(&m, v, 4), 3);
	ck_assert_uint_eq(v[0].len, 2);
	ck_assert(memcmp(v[0].p, "ab", 2) == 0);
	ck_assert_ptr_null(v[1].p);
	ck_assert_ptr_nonnull(v[2].p);
	ck_assert_uint_eq(v[2].len, 0);
	ck_assert_int_eq(proto_bind_param_format(&m, 2), 1);	/* one code applies to all */
	ck_assert_int_eq(proto_bind_result_format(&m, 0), 0);
	ck_assert_int_eq(proto_bind_result_format(&m, 1), 1);
	/* every truncation of the message is refused */
	for (size_t cut = 0; cut < pb.len - 5; cut++)
		ck_assert_msg(!proto_parse_bind(pb.buf + 5, cut, &m, &err), "cut %zu", cut);
	/* negative length other than -1: Postgres' pq_getmsgbytes() refuses it so */
	ck_assert(!proto_parse_bind((const uint8_t *)"\0\0\0\0\0\x01\xff\xff\xff\xfe\0\0", 12, &m,
				    &err));
	ck_assert_str_eq(err.sqlstate, "08P01");
	ck_assert_str_eq(err.message, "insufficient data left in message");
	/* 2 formats for 1 parameter */
	ck_assert(!proto_parse_bind((const uint8_t *)"\0\0\0\x02\0\0\0\0\0\x01\xff\xff\xff\xff\0\0",
				    16, &m, &err));
	ck_assert_str_eq(err.message, "bind message has 2 parameter formats but 1 parameters");
	pktbuf_cleanup(&pb);
}
END_TEST

/* ---- server message parsers ---- */

START_TEST(test_parse_server_messages)
{
	struct pktbuf pb;
	struct nk_error err, nk;
	struct proto_auth_msg am;
	struct proto_param p;
	struct proto_server_error se;
	uint32_t pid, key;
	char st;
	const char *tag, *chan, *payload;
	const char *mechs[] = { "SCRAM-SHA-256-PLUS", "SCRAM-SHA-256" };
	const uint8_t salt[4] = { 9, 8, 7, 6 };
	const struct proto_err_field extra[] = { { 'P', "8" }, { 'R', "parser" }, { 'x', "?" } };

	pktbuf_init(&pb, 0);
	pktbuf_write_auth_sasl(&pb, mechs, 2);
	ck_assert(proto_parse_auth(pb.buf + 5, pb.len - 5, &am, &err));
	ck_assert_int_eq(am.code, PROTO_AUTH_SASL);
	ck_assert(proto_auth_sasl_has(&am, "SCRAM-SHA-256"));
	ck_assert(!proto_auth_sasl_has(&am, "SCRAM"));
	ck_assert(!proto_parse_auth(pb.buf + 5, pb.len - 6, &am, &err));
	pktbuf_reset(&pb);
	pktbuf_write_auth_md5(&pb, salt);
	ck_assert(proto_parse_auth(pb.buf + 5, pb.len - 5, &am, &err));
	ck_assert_int_eq(am.code, PROTO_AUTH_MD5);
	ck_assert_uint_eq(am.len, 4);
	ck_assert_int_eq(am.data[0], 9);
	ck_assert(!proto_parse_auth(pb.buf + 5, pb.len - 6, &am, &err));
	ck_assert(!proto_parse_auth((const uint8_t *)"\0\0\0\0x", 5, &am, &err));

	ck_assert(proto_parse_parameter_status((const uint8_t *)"a\0b", 4, &p, &err));
	ck_assert_str_eq(p.value, "b");
	ck_assert(proto_parse_backend_key((const uint8_t *)"\0\0\0\x01\0\0\0\x02", 8, &pid, &key,
					  &err));
	ck_assert_uint_eq(key, 2);
	ck_assert(!proto_parse_backend_key((const uint8_t *)"\0\0\0\x01\0\0\0", 7, &pid, &key,
					   &err));
	pktbuf_reset(&pb);
	pktbuf_write_notification(&pb, 4242, "jobs", "42");
	ck_assert(proto_parse_notification(pb.buf + 5, pb.len - 5, &pid, &chan, &payload, &err));
	ck_assert_uint_eq(pid, 4242);
	ck_assert_str_eq(chan, "jobs");
	ck_assert_str_eq(payload, "42");
	ck_assert(!proto_parse_notification(pb.buf + 5, pb.len - 6, &pid, &chan, &payload, &err));
	ck_assert(!proto_parse_notification((const uint8_t *)"\0\0", 2, &pid, &chan, &payload,
					    &err));
	ck_assert(proto_parse_ready_for_query((const uint8_t *)"T", 1, &st, &err));
	ck_assert_int_eq(st, 'T');
	ck_assert(!proto_parse_ready_for_query((const uint8_t *)"Q", 1, &st, &err));
	ck_assert(proto_parse_command_complete((const uint8_t *)"INSERT 0 1", 11, &tag, &err));
	ck_assert_str_eq(tag, "INSERT 0 1");

	pktbuf_reset(&pb);
	nk_error_set(&nk, "42P01", "relation \"t\" does not exist");
	pktbuf_write_error_ex(&pb, 'E', &nk, extra, 3);
	ck_assert(proto_parse_server_error(pb.buf + 5, pb.len - 5, &se, &err));
	ck_assert_str_eq(se.severity, "ERROR");
	ck_assert_str_eq(se.sqlstate, "42P01");
	ck_assert_str_eq(se.position, "8");
	ck_assert_str_eq(se.routine, "parser");
	ck_assert_ptr_null(se.detail);
	proto_server_error_to_nk(&se, &nk);
	ck_assert_str_eq(nk.message, "relation \"t\" does not exist");
	ck_assert_int_eq(nk.severity, NK_SEV_ERROR);
	ck_assert(!proto_parse_server_error(pb.buf + 5, pb.len - 6, &se, &err));
	ck_assert(proto_parse_server_error((const uint8_t *)"VFATAL\0", 8, &se, &err));
	proto_server_error_to_nk(&se, &nk);
	ck_assert_int_eq(nk.severity, NK_SEV_FATAL);
	pktbuf_cleanup(&pb);
}
END_TEST

START_TEST(test_parse_rows)
{
	struct pktbuf pb;
	struct nk_error err;
	struct proto_rowdesc_msg rd;
	struct proto_datarow_msg dr;
	struct proto_column c[2];
	struct proto_value v[3];
	const struct proto_column cols[] = { { "a", 1, 2, 23, 4, -1, 0 },
					     { "b", 0, 0, 25, -1, -1, 1 } };
	const char *vals[] = { "x", NULL, "" };

	pktbuf_init(&pb, 0);
	pktbuf_write_row_description(&pb, cols, 2);
	ck_assert(proto_parse_row_description(pb.buf + 5, pb.len - 5, &rd, &err));
	ck_assert_uint_eq(proto_rowdesc_columns(&rd, c, 2), 2);
	ck_assert_str_eq(c[1].name, "b");
	ck_assert_uint_eq(c[0].type_oid, 23);
	ck_assert_int_eq(c[1].typlen, -1);
	ck_assert_int_eq(c[1].format, 1);
	ck_assert_uint_eq(c[0].table_oid, 1);
	for (size_t cut = 0; cut < pb.len - 5; cut++)
		ck_assert(!proto_parse_row_description(pb.buf + 5, cut, &rd, &err));
	pktbuf_reset(&pb);
	pktbuf_write_data_row_text(&pb, vals, 3);
	ck_assert(proto_parse_data_row(pb.buf + 5, pb.len - 5, &dr, &err));
	ck_assert_uint_eq(proto_datarow_values(&dr, v, 3), 3);
	ck_assert_uint_eq(v[0].len, 1);
	ck_assert_ptr_null(v[1].p);
	ck_assert_ptr_nonnull(v[2].p);
	for (size_t cut = 0; cut < pb.len - 5; cut++)
		ck_assert(!proto_parse_data_row(pb.buf + 5, cut, &dr, &err));
	pktbuf_cleanup(&pb);
}
END_TEST

/* Garbage must never crash a parser: feed pseudo-random bodies to all of them. */
START_TEST(test_parsers_garbage)
{
	uint8_t buf[64];
	uint32_t seed = 12345;
	struct nk_error err;
	union {
		struct proto_parse_msg pm;
		struct proto_bind_msg bm;
		struct proto_target_msg tm;
		struct proto_execute_msg em;
		struct proto_sasl_initial_msg sm;
		struct proto_auth_msg am;
		struct proto_server_error se;
		struct proto_rowdesc_msg rd;
		struct proto_datarow_msg dr;
		struct proto_startup st;
	} u;
	const char *s;
	int nok = 0;

	for (int iter = 0; iter < 20000; iter++) {
		size_t len = (size_t)(seed % sizeof(buf));

		for (size_t i = 0; i < sizeof(buf); i++) {
			seed = seed * 1103515245u + 12345u;
			buf[i] = (uint8_t)(seed >> 16);
			if ((seed >> 8) % 4 == 0)
				buf[i] = 0;
		}
		nok += proto_parse_query(buf, len, &s, &err);
		nok += proto_parse_parse(buf, len, &u.pm, &err);
		nok += proto_parse_bind(buf, len, &u.bm, &err);
		nok += proto_parse_describe(buf, len, &u.tm, &err);
		nok += proto_parse_execute(buf, len, &u.em, &err);
		nok += proto_parse_sasl_initial(buf, len, &u.sm, &err);
		nok += proto_parse_auth(buf, len, &u.am, &err);
		nok += proto_parse_server_error(buf, len, &u.se, &err);
		nok += proto_parse_row_description(buf, len, &u.rd, &err);
		nok += proto_parse_data_row(buf, len, &u.dr, &err);
		nok += proto_startup_parse(buf, len, &u.st, &err);
	}
	/* most garbage is refused, but some (e.g. a Query "x\0") is fine */
	ck_assert_int_lt(nok, 20000 * 11);
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
	tcase_add_test(tc, test_parse_client_messages);
	tcase_add_test(tc, test_parse_bind);
	tcase_add_test(tc, test_parse_server_messages);
	tcase_add_test(tc, test_parse_rows);
	tcase_add_test(tc, test_parsers_garbage);
	suite_add_tcase(s, tc);

	tc = tcase_create("startup");
	tcase_add_test(tc, test_startup_message);
	tcase_add_test(tc, test_startup_errors);
	tcase_add_test(tc, test_startup_requests);
	tcase_add_test(tc, test_startup_negotiation);
	tcase_add_test(tc, test_options_forms);
	tcase_add_test(tc, test_options_errors);
	suite_add_tcase(s, tc);
	return s;
}
