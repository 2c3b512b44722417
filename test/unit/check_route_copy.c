/*
 * check_route_copy.c - COPY FROM input as the router reads it (src/exec/route_copy_row.c):
 * row ends across CopyData messages (text escapes, CSV quotes and escapes, binary tuples),
 * the line end style of the first line ("\n", "\r\n", "\r") and Postgres' errors for another
 * one, the end-of-data marker, the lines counted inside CSV quotes, and the shard-key field
 * of a row (escapes, NULL strings, FORCE_NULL / FORCE_NOT_NULL).
 */
#include "neki/base.h"

#include <check.h>
#include <stdio.h>
#include <string.h>

#include "../../src/exec/route_copy_int.h"
#include "suites.h"

static struct copy_opts
opts(enum copy_fmt fmt, uint32_t key)
{
	struct copy_opts o;

	memset(&o, 0, sizeof(o));
	o.fmt = fmt;
	o.delim = fmt == COPY_FMT_CSV ? ',' : '\t';
	o.quote = '"';
	o.null_str = fmt == COPY_FMT_CSV ? "" : "\\N";
	o.null_len = strlen(o.null_str);
	o.key_pos = key;
	return o;
}

/* The row ends of <in> fed in pieces of <step> bytes, written as "len,len,...". */
static void
row_ends(const struct copy_opts *o, const char *in, size_t len, size_t step, char *out)
{
	struct copy_scan s;
	size_t row = 0, end;

	memset(&s, 0, sizeof(s));
	out[0] = '\0';
	for (size_t pos = 0; pos < len; pos += step) {
		size_t n = pos + step < len ? step : len - pos, off = 0;

		while (off < n && copy_scan_row(o, &s, (const uint8_t *)in + pos + off, n - off,
						&end) == COPY_SCAN_ROW) {
			row += end;
			sprintf(out + strlen(out), "%zu,", row);
			row = 0;
			off += end;
		}
		row += n - off;
	}
}

START_TEST(text_rows_span_messages)
{
	struct copy_opts o = opts(COPY_FMT_TEXT, 0);
	const char *in = "1\ta\\\nb\n22\t\\\\\n333\tx\n";
	char out[128];

	for (size_t step = 1; step <= strlen(in); step++) {
		row_ends(&o, in, strlen(in), step, out);
		ck_assert_msg(strcmp(out, "7,6,6,") == 0, "step %zu: %s", step, out);
	}
}
END_TEST

START_TEST(csv_rows_quotes_and_escapes)
{
	struct copy_opts o = opts(COPY_FMT_CSV, 0);
	const char *in = "1,\"a\nb\"\"c\"\n2,x\n";
	char out[128];

	for (size_t step = 1; step <= strlen(in); step++) {
		row_ends(&o, in, strlen(in), step, out);
		ck_assert_msg(strcmp(out, "11,4,") == 0, "step %zu: %s", step, out);
	}
	o.escape = '\\';		/* an escaped quote does not end the quoted field */
	in = "1,\"a\\\"\nb\"\n2,\"\\\\\"\n";
	row_ends(&o, in, strlen(in), 3, out);
	ck_assert_str_eq(out, "10,7,");
}
END_TEST

START_TEST(binary_tuples_span_messages)
{
	static const uint8_t in[] = {
		'P', 'G', 'C', 'O', 'P', 'Y', '\n', 0xff, '\r', '\n', 0, 0, 0, 0, 0, 0, 0, 0, 2,
		0xaa, 0xbb,					/* header extension */
		0, 2, 0, 0, 0, 1, 7, 0xff, 0xff, 0xff, 0xff,	/* (7, NULL) */
		0, 1, 0, 0, 0, 0,				/* ('') */
		0xff, 0xff,					/* trailer */
	};
	struct copy_opts o = opts(COPY_FMT_BINARY, 0);
	char out[128];

	for (size_t step = 1; step <= sizeof(in); step++) {
		row_ends(&o, (const char *)in, sizeof(in), step, out);
		ck_assert_msg(strcmp(out, "21,11,6,2,") == 0, "step %zu: %s", step, out);
	}
}
END_TEST

/*
 * The whole input <in> scanned in pieces of <step> bytes, then finished: "R<len>" per row
 * ("+<n>" lines counted inside its quotes), "D<len>/<before>" for the end-of-data marker,
 * "X<line>:<message>|<hint>" for an error (its line counted as route_copy.c does), "F<len>"
 * for the row the end of the input closes.
 */
static void
scan_all(const struct copy_opts *o, const char *in, size_t step, char *out)
{
	struct copy_scan s;
	size_t len = strlen(in), row = 0, end;
	uint32_t line = 0;
	enum copy_scan_rc rc = COPY_SCAN_MORE;

	memset(&s, 0, sizeof(s));
	out[0] = '\0';
	for (size_t pos = 0; pos < len && rc != COPY_SCAN_EOD && rc != COPY_SCAN_ERROR;
	     pos += step) {
		size_t n = pos + step < len ? step : len - pos, off = 0;

		while (off < n) {
			rc = copy_scan_row(o, &s, (const uint8_t *)in + pos + off, n - off, &end);
			if (rc == COPY_SCAN_MORE) {
				row += n - off;
				break;
			}
			if (rc == COPY_SCAN_ERROR)
				break;
			row += end;
			off += end;
			if (rc == COPY_SCAN_EOD) {
				sprintf(out + strlen(out), "D%zu/%llu,", row,
					(unsigned long long)s.marker);
				break;
			}
			line += 1 + s.row_lines;
			sprintf(out + strlen(out), s.row_lines ? "R%zu+%u," : "R%zu,", row,
				s.row_lines);
			row = 0;
		}
	}
	if (rc == COPY_SCAN_MORE && (rc = copy_scan_finish(o, &s)) == COPY_SCAN_ROW)
		sprintf(out + strlen(out), "F%zu,", row);
	if (rc == COPY_SCAN_ERROR)
		sprintf(out + strlen(out), "X%u:%s|%s", line + 1 + s.lines, s.err,
			s.hint ? s.hint : "");
}

/* <in> gives <want> in pieces of every size. */
static void
check_scan(const struct copy_opts *o, const char *in, const char *want)
{
	char out[512];

	for (size_t step = 1; step <= strlen(in); step++) {
		scan_all(o, in, step, out);
		ck_assert_msg(strcmp(out, want) == 0, "%s, step %zu: %s (want %s)", in, step, out,
			      want);
	}
}

START_TEST(text_line_end_styles)
{
	struct copy_opts o = opts(COPY_FMT_TEXT, 0);

	check_scan(&o, "1\ta\r2\tb\r3\tc\r", "R4,R4,R4,");	/* old Mac */
	check_scan(&o, "1\ta\r\n2\tb\r\n", "R5,R5,");
	check_scan(&o, "1\ta\n22\tb\n", "R4,R5,");
	check_scan(&o, "1\ta\r2\tb", "R4,F3,");
	check_scan(&o, "1\ta\\\r2\r3\r", "R7,R2,");	/* an escaped \r is data */
	check_scan(&o, "1\ta\n2\tb\r3\n", "R4,X2:literal carriage return found in data|"
		   "Use \"\\r\" to represent carriage return.");
	check_scan(&o, "1\ta\r2\tb\n3\r", "R4,X2:literal newline found in data|"
		   "Use \"\\n\" to represent newline.");
	check_scan(&o, "1\ta\r\n2\tb\n", "R5,X2:literal newline found in data|"
		   "Use \"\\n\" to represent newline.");
	check_scan(&o, "1\ta\r\n2\tb\r3\n", "R5,X2:literal carriage return found in data|"
		   "Use \"\\r\" to represent carriage return.");
	check_scan(&o, "1\ta\r\n2\tb\r", "R5,X2:literal carriage return found in data|"
		   "Use \"\\r\" to represent carriage return.");
}
END_TEST

START_TEST(text_end_of_data_marker)
{
	struct copy_opts o = opts(COPY_FMT_TEXT, 0);

	check_scan(&o, "1\ta\r\\.\rjunk", "R4,D3/0,");
	check_scan(&o, "1\ta\r\n\\.\r\n", "R5,D4/0,");
	check_scan(&o, "\\.\n1\tb\n", "D3/0,");
	check_scan(&o, "1\tab\\.\n2\tb\n", "D7/4,");	/* text: "\." ends the data anywhere */
	check_scan(&o, "1\t\\\\.\n", "R6,");		/* an escaped backslash, then "." */
	check_scan(&o, "1\ta\r\\.\n", "R4,X2:end-of-copy marker does not match previous newline "
		   "style|");
	check_scan(&o, "1\ta\n\\.\r", "R4,X2:end-of-copy marker does not match previous newline "
		   "style|");
	check_scan(&o, "1\ta\r\n\\.\n", "R5,X2:end-of-copy marker does not match previous "
		   "newline style|");
	check_scan(&o, "1\ta\n\\.", "R4,X2:end-of-copy marker corrupt|");
	check_scan(&o, "1\ta\n\\.x\n", "R4,X2:end-of-copy marker corrupt|");
	check_scan(&o, "1\ta\r\n\\.\rx", "R5,X2:end-of-copy marker corrupt|");
}
END_TEST

START_TEST(csv_line_end_styles)
{
	struct copy_opts o = opts(COPY_FMT_CSV, 0);

	check_scan(&o, "1,\"a\rb\"\r2,c\r", "R8+1,R4,");	/* "\r" inside quotes is data */
	check_scan(&o, "1,\"x\ny\"\r2,b\r", "R8,R4,");	/* (an unknown style counts \r) */
	check_scan(&o, "1,a\r\n2,\"b\r\nc\"\r\n3,d\r\n", "R5,R10+1,R5,");
	check_scan(&o, "1,a\n2,b\r", "R4,X2:unquoted carriage return found in data|"
		   "Use quoted CSV field to represent carriage return.");
	check_scan(&o, "1,a\r2,b\n", "R4,X2:unquoted newline found in data|"
		   "Use quoted CSV field to represent newline.");
	check_scan(&o, "1,\"a\rb\"\n2,\"x\ry\"\r", "R8+1,X3:unquoted carriage return found "
		   "in data|Use quoted CSV field to represent carriage return.");
	check_scan(&o, "1,\"a\nb\"\r2,c\n", "R8,X2:unquoted newline found in data|"
		   "Use quoted CSV field to represent newline.");
}
END_TEST

START_TEST(csv_end_of_data_marker)
{
	struct copy_opts o = opts(COPY_FMT_CSV, 0);

	check_scan(&o, "1,a\r\\.\r2,b\r", "R4,D3/0,");
	check_scan(&o, "1,a\n\\.x\n2,b\n", "R4,R4,R4,");	/* only "\." alone is the marker */
	check_scan(&o, "1,a\n2,\\.\n", "R4,R5,");
	check_scan(&o, "1,a\r\\.", "R4,F2,");		/* data at the end of the input */
	check_scan(&o, "1,a\r\n\\.x\r\n", "R5,R5,");
	check_scan(&o, "1,a\r\n\\.\n2,b\r\n", "R5,X2:unquoted newline found in data|"
		   "Use quoted CSV field to represent newline.");
	check_scan(&o, "1,a\n\\.\r", "R4,X2:end-of-copy marker does not match previous newline "
		   "style|");
	check_scan(&o, "1,a\r\n\\.\r", "R5,X2:unquoted carriage return found in data|"
		   "Use quoted CSV field to represent carriage return.");
}
END_TEST

/* The key of <row> (its line end stripped, as route_copy.c does). */
static enum copy_key_rc
key(const struct copy_opts *o, const char *row, char *val)
{
	uint8_t buf[128];
	const uint8_t *v = NULL;
	size_t n = 0, len = strlen(row);
	enum copy_key_rc rc;

	if (len > 0 && row[len - 1] == '\n')
		len--;
	if (len > 0 && row[len - 1] == '\r')
		len--;
	rc = copy_row_key(o, (const uint8_t *)row, len, buf, &v, &n);

	if (rc == COPY_KEY_OK) {
		memcpy(val, v, n);
		val[n] = '\0';
	}
	return rc;
}

START_TEST(text_key_field)
{
	struct copy_opts o = opts(COPY_FMT_TEXT, 1);
	char v[128];

	ck_assert_int_eq(key(&o, "a\\tb\t4\\x32\\0631\t9\n", v), COPY_KEY_OK);
	ck_assert_str_eq(v, "4231");
	ck_assert_int_eq(key(&o, "a\t\\N\tz\r\n", v), COPY_KEY_NULL);
	ck_assert_int_eq(key(&o, "a\\\tb\n", v), COPY_KEY_MISSING);	/* escaped delimiter */
	ck_assert_int_eq(key(&o, "a\t-12\r\n", v), COPY_KEY_OK);
	ck_assert_str_eq(v, "-12");
	o.key_pos = 0;
	o.null_str = "";
	o.null_len = 0;
	ck_assert_int_eq(key(&o, "\tx\n", v), COPY_KEY_NULL);
}
END_TEST

START_TEST(csv_key_field)
{
	struct copy_opts o = opts(COPY_FMT_CSV, 1);
	char v[128];

	ck_assert_int_eq(key(&o, "\"x,y\",\"1\"\"2\",3\n", v), COPY_KEY_OK);
	ck_assert_str_eq(v, "1\"2");
	ck_assert_int_eq(key(&o, "a,,b\n", v), COPY_KEY_NULL);
	ck_assert_int_eq(key(&o, "a,\"\",b\n", v), COPY_KEY_OK);	/* quoted: not NULL */
	ck_assert_str_eq(v, "");
	o.force_null = true;
	ck_assert_int_eq(key(&o, "a,\"\",b\n", v), COPY_KEY_NULL);
	o.force_null = false;
	o.force_not_null = true;
	ck_assert_int_eq(key(&o, "a,,b\n", v), COPY_KEY_OK);
	ck_assert_int_eq(key(&o, "a\n", v), COPY_KEY_MISSING);
}
END_TEST

START_TEST(binary_key_field)
{
	static const uint8_t row[] = { 0, 2, 0, 0, 0, 2, 'h', 'i', 0, 0, 0, 3, 1, 2, 3 };
	static const uint8_t nul[] = { 0, 2, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff };
	struct copy_opts o = opts(COPY_FMT_BINARY, 1);
	const uint8_t *v = NULL;
	size_t n = 0;

	ck_assert_int_eq(copy_row_key(&o, row, sizeof(row), NULL, &v, &n), COPY_KEY_OK);
	ck_assert_int_eq((int)n, 3);
	ck_assert(v == row + 12);
	ck_assert_int_eq(copy_row_key(&o, nul, sizeof(nul), NULL, &v, &n), COPY_KEY_NULL);
	o.key_pos = 2;
	ck_assert_int_eq(copy_row_key(&o, row, sizeof(row), NULL, &v, &n), COPY_KEY_MISSING);
}
END_TEST

Suite *
route_copy_suite(void)
{
	Suite *s = suite_create("route_copy");
	TCase *tc = tcase_create("rows");

	tcase_add_test(tc, text_rows_span_messages);
	tcase_add_test(tc, csv_rows_quotes_and_escapes);
	tcase_add_test(tc, binary_tuples_span_messages);
	tcase_add_test(tc, text_line_end_styles);
	tcase_add_test(tc, text_end_of_data_marker);
	tcase_add_test(tc, csv_line_end_styles);
	tcase_add_test(tc, csv_end_of_data_marker);
	tcase_add_test(tc, text_key_field);
	tcase_add_test(tc, csv_key_field);
	tcase_add_test(tc, binary_key_field);
	suite_add_tcase(s, tc);
	return s;
}
