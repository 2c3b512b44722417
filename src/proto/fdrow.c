/*
 * fdrow.c - SHOW FDS rows as DataRow messages (see neki/fdrow.h): written by the admin for
 * the console, read back by a new neki during its online restart (-R) and by the admin
 * itself for the rows its workers send. Numbers are decimal text, bytea is "\x<hex>".
 * Entry points: fdrow_write(), fdrow_parse(), fdrow_column_name(), fdrow_column_type().
 */
#include "neki/base.h"

#include "neki/fdrow.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "neki/pktbuf.h"
#include "neki/proto.h"

#define FDROW_OID_INT4 23
#define FDROW_OID_INT8 20
#define FDROW_OID_TEXT 25
#define FDROW_OID_BYTEA 17

static const struct {
	const char *name;
	uint32_t type;
} fdrow_cols[FDROW_NCOLS] = {
	{ "fd", FDROW_OID_INT4 }, { "task", FDROW_OID_TEXT }, { "user", FDROW_OID_TEXT },
	{ "database", FDROW_OID_TEXT }, { "addr", FDROW_OID_TEXT }, { "port", FDROW_OID_INT4 },
	{ "cancel", FDROW_OID_INT8 }, { "link", FDROW_OID_INT4 },
	{ "client_encoding", FDROW_OID_TEXT }, { "std_strings", FDROW_OID_TEXT },
	{ "datestyle", FDROW_OID_TEXT }, { "timezone", FDROW_OID_TEXT },
	{ "password", FDROW_OID_TEXT }, { "scram_client_key", FDROW_OID_BYTEA },
	{ "scram_server_key", FDROW_OID_BYTEA },
};

static const char *const fdrow_tasks[] = { "pooler", "client", "server" };

const char *
fdrow_task_str(enum fdrow_task t)
{
	return (unsigned)t < NK_ARRAY_LEN(fdrow_tasks) ? fdrow_tasks[t] : "?";
}

const char *
fdrow_column_name(size_t i)
{
	NK_ASSERT(i < FDROW_NCOLS);
	return fdrow_cols[i].name;
}

uint32_t
fdrow_column_type(size_t i)
{
	NK_ASSERT(i < FDROW_NCOLS);
	return fdrow_cols[i].type;
}

/* "" is written as NULL. */
static const char *
fdrow_nullable(const char *s)
{
	return s[0] != '\0' ? s : NULL;
}

/* "\x" and the hex digits of <key> into <out> (2 + 2 * SCRAM_KEY_LEN + 1 bytes). */
static void
fdrow_hex(const uint8_t *key, char *out)
{
	static const char digits[] = "0123456789abcdef";

	out[0] = '\\';
	out[1] = 'x';
	for (size_t i = 0; i < SCRAM_KEY_LEN; i++) {
		out[2 + 2 * i] = digits[key[i] >> 4];
		out[3 + 2 * i] = digits[key[i] & 0x0f];
	}
	out[2 + 2 * SCRAM_KEY_LEN] = '\0';
}

void
fdrow_write(struct pktbuf *pb, const struct fdrow *r)
{
	char fd[16], port[16], cancel[24], link[16];
	char ck[3 + 2 * SCRAM_KEY_LEN], sk[3 + 2 * SCRAM_KEY_LEN];
	const char *vals[FDROW_NCOLS] = {
		fd, fdrow_task_str(r->task), fdrow_nullable(r->user), fdrow_nullable(r->db),
		r->addr, port, cancel, link, fdrow_nullable(r->client_encoding),
		fdrow_nullable(r->std_strings), fdrow_nullable(r->datestyle),
		fdrow_nullable(r->timezone), fdrow_nullable(r->password),
		r->has_scram ? ck : NULL, r->has_scram ? sk : NULL,
	};

	snprintf(fd, sizeof(fd), "%d", r->fd);
	snprintf(port, sizeof(port), "%d", r->port);
	snprintf(cancel, sizeof(cancel), "%" PRIu64, r->cancel);
	snprintf(link, sizeof(link), "%d", r->link);
	fdrow_hex(r->scram_client_key, ck);
	fdrow_hex(r->scram_server_key, sk);
	pktbuf_write_data_row_text(pb, vals, FDROW_NCOLS);
}

/* Copy value <v> (NULL: "") into <out> of <cap> bytes; false when it does not fit. */
static bool
fdrow_copy(const struct proto_value *v, char *out, size_t cap)
{
	if (v->p == NULL) {
		out[0] = '\0';
		return true;
	}
	if (v->len >= cap || memchr(v->p, '\0', v->len) != NULL)
		return false;
	memcpy(out, v->p, v->len);
	out[v->len] = '\0';
	return true;
}

/* A decimal value of at most <max> into <out>; NULL reads as 0. */
static bool
fdrow_number(const struct proto_value *v, uint64_t max, uint64_t *out)
{
	char buf[24], *end;
	unsigned long long n;

	*out = 0;
	if (v->p == NULL)
		return true;
	if (!fdrow_copy(v, buf, sizeof(buf)) || buf[0] < '0' || buf[0] > '9')
		return false;
	errno = 0;
	n = strtoull(buf, &end, 10);
	if (*end != '\0' || errno != 0 || n > max)
		return false;
	*out = n;
	return true;
}

static int
fdrow_hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* A bytea value "\x<hex>" of exactly SCRAM_KEY_LEN bytes into <out>; *<set> when not NULL. */
static bool
fdrow_key(const struct proto_value *v, uint8_t *out, bool *set)
{
	*set = v->p != NULL;
	if (v->p == NULL)
		return true;
	if (v->len != 2 + 2 * SCRAM_KEY_LEN || v->p[0] != '\\' || v->p[1] != 'x')
		return false;
	for (size_t i = 0; i < SCRAM_KEY_LEN; i++) {
		int hi = fdrow_hexval((char)v->p[2 + 2 * i]);
		int lo = fdrow_hexval((char)v->p[3 + 2 * i]);

		if (hi < 0 || lo < 0)
			return false;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return true;
}

/* The task column into <r>. */
static bool
fdrow_task(const struct proto_value *v, struct fdrow *r)
{
	char task[16];

	if (v->p == NULL || !fdrow_copy(v, task, sizeof(task)))
		return false;
	for (size_t i = 0; i < NK_ARRAY_LEN(fdrow_tasks); i++) {
		if (strcmp(task, fdrow_tasks[i]) == 0) {
			r->task = (enum fdrow_task)i;
			return true;
		}
	}
	return false;
}

/* The text columns 2-4 and 8-12 into <r>. */
static bool
fdrow_texts(const struct proto_value *v, struct fdrow *r)
{
	return fdrow_copy(&v[2], r->user, sizeof(r->user)) &&
	       fdrow_copy(&v[3], r->db, sizeof(r->db)) &&
	       fdrow_copy(&v[4], r->addr, sizeof(r->addr)) &&
	       fdrow_copy(&v[8], r->client_encoding, sizeof(r->client_encoding)) &&
	       fdrow_copy(&v[9], r->std_strings, sizeof(r->std_strings)) &&
	       fdrow_copy(&v[10], r->datestyle, sizeof(r->datestyle)) &&
	       fdrow_copy(&v[11], r->timezone, sizeof(r->timezone)) &&
	       fdrow_copy(&v[12], r->password, sizeof(r->password));
}

bool
fdrow_parse(const uint8_t *body, size_t len, struct fdrow *r, struct nk_error *err)
{
	struct proto_datarow_msg m;
	struct proto_value v[FDROW_NCOLS];
	uint64_t fd, port, link;
	bool ck, sk;

	memset(r, 0, sizeof(*r));
	if (!proto_parse_data_row(body, len, &m, err))
		return false;
	if (m.ncols < FDROW_NCOLS || proto_datarow_values(&m, v, FDROW_NCOLS) != FDROW_NCOLS)
		return nk_error_set(err, ERRCODE_PROTOCOL_VIOLATION,
				    "a SHOW FDS row has %u columns, expected %d",
				    (unsigned)m.ncols, FDROW_NCOLS);
	if (!fdrow_number(&v[0], INT32_MAX, &fd) || !fdrow_task(&v[1], r) ||
	    !fdrow_texts(v, r) || !fdrow_number(&v[5], INT32_MAX, &port) ||
	    !fdrow_number(&v[6], UINT64_MAX, &r->cancel) ||
	    !fdrow_number(&v[7], INT32_MAX, &link) ||
	    !fdrow_key(&v[13], r->scram_client_key, &ck) ||
	    !fdrow_key(&v[14], r->scram_server_key, &sk) || ck != sk)
		return nk_error_set(err, ERRCODE_PROTOCOL_VIOLATION, "malformed SHOW FDS row");
	r->fd = (int)fd;
	r->port = (int)port;
	r->link = (int)link;
	r->has_scram = ck;
	return true;
}
