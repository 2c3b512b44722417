/*
 * msg.c - the bounds-checked reader, stream framing and the client message parsers.
 *
 * The reader mirrors Postgres' pq_getmsg* functions: every getter checks the
 * remaining length, a fault is sticky, and proto_reader_end() insists that the
 * whole body was consumed. Error texts are the server's, so clients see the same
 * messages as from Postgres. Startup packets live in startup.c, server messages
 * in srvmsg.c.
 */
#include "neki/base.h"

#include "neki/byteorder.h"
#include "neki/proto.h"

#include <string.h>

/* Point <r> at <body> (borrowed) of <len> bytes of a message of <type>. */
void
proto_reader_init(struct proto_reader *r, char type, const uint8_t *body, size_t len)
{
	r->type = type;
	r->p = body;
	r->len = len;
	r->pos = 0;
	r->fault = PROTO_READ_OK;
}

/* Bytes between the cursor and the end of the body. */
size_t
proto_reader_left(const struct proto_reader *r)
{
	return r->len - r->pos;
}

/* Reserve <n> bytes; NULL (and a SHORT fault) when they are not there. */
static const uint8_t *
reader_take(struct proto_reader *r, size_t n)
{
	const uint8_t *p;

	if (r->fault != PROTO_READ_OK)
		return NULL;
	if (n > r->len - r->pos) {
		r->fault = PROTO_READ_SHORT;
		return NULL;
	}
	p = r->p + r->pos;
	r->pos += n;
	return p;
}

/* One byte; 0 after a fault. */
uint8_t
proto_get_byte(struct proto_reader *r)
{
	const uint8_t *p = reader_take(r, 1);

	return p ? p[0] : 0;
}

uint16_t
proto_get_uint16(struct proto_reader *r)
{
	const uint8_t *p = reader_take(r, 2);

	return p ? nk_get_be16(p) : 0;
}

int16_t
proto_get_int16(struct proto_reader *r)
{
	return (int16_t)proto_get_uint16(r);
}

int32_t
proto_get_int32(struct proto_reader *r)
{
	const uint8_t *p = reader_take(r, 4);

	if (!p)
		return 0;
	return (int32_t)nk_get_be32(p);
}

uint64_t
proto_get_uint64(struct proto_reader *r)
{
	uint64_t hi = (uint32_t)proto_get_int32(r);

	return hi << 32 | (uint32_t)proto_get_int32(r);
}

/* A NUL-terminated string inside the body; "" and BAD_STRING when unterminated. */
const char *
proto_get_string(struct proto_reader *r)
{
	const uint8_t *start, *nul;

	if (r->fault != PROTO_READ_OK)
		return "";
	start = r->p + r->pos;
	nul = memchr(start, '\0', r->len - r->pos);
	if (!nul) {
		r->fault = PROTO_READ_BAD_STRING;
		return "";
	}
	r->pos += (size_t)(nul - start) + 1;
	return (const char *)start;
}

/* <n> bytes inside the body; NULL and SHORT when they are not all there. */
const uint8_t *
proto_get_bytes(struct proto_reader *r, size_t n)
{
	return reader_take(r, n);
}

/* Translate the sticky fault into Postgres' wording (08P01). */
bool
proto_reader_error(const struct proto_reader *r, struct nk_error *err)
{
	switch (r->fault) {
	case PROTO_READ_BAD_STRING:
		return nk_error_set(err, PROTO_SQLSTATE_VIOLATION, "invalid string in message");
	case PROTO_READ_TRAILING:
		return nk_error_set(err, PROTO_SQLSTATE_VIOLATION, "invalid message format");
	case PROTO_READ_SHORT:
	case PROTO_READ_OK:
	default:
		return nk_error_set(err, PROTO_SQLSTATE_VIOLATION,
				    "insufficient data left in message");
	}
}

/* End-of-message check (pq_getmsgend): fault or leftover bytes fail. */
bool
proto_reader_end(struct proto_reader *r, struct nk_error *err)
{
	if (r->fault == PROTO_READ_OK && r->pos != r->len)
		r->fault = PROTO_READ_TRAILING;
	if (r->fault != PROTO_READ_OK)
		return proto_reader_error(r, err);
	return true;
}

/* ---- framing ---- */

/* Frame one message at the head of <buf>; never reads past <avail>. */
enum proto_frame_result
proto_frame_next(const uint8_t *buf, size_t avail, bool startup, uint32_t max_len,
		 struct proto_frame *f, struct nk_error *err)
{
	size_t hdr = startup ? 4 : 5;

	memset(f, 0, sizeof(*f));
	if (avail < hdr)
		return PROTO_FRAME_PARTIAL;
	f->type = startup ? 0 : (char)buf[0];
	f->len = nk_get_be32(buf + hdr - 4);
	if (startup && (f->len < 8 || f->len - 4 > PROTO_MAX_STARTUP_LEN)) {
		(void)proto_startup_bad_length(err);
		return PROTO_FRAME_BAD;
	}
	if (!startup && (f->len < 4 || f->len > max_len)) {
		nk_error_set(err, PROTO_SQLSTATE_VIOLATION, "invalid message length");
		return PROTO_FRAME_BAD;
	}
	f->have_header = true;
	f->total = (size_t)f->len + (startup ? 0 : 1);
	f->body_len = f->len - 4;
	if (avail < f->total)
		return PROTO_FRAME_PARTIAL;
	f->body = buf + hdr;
	return PROTO_FRAME_OK;
}

/* The message types Postgres' SocketBackend accepts after startup. */
bool
proto_frontend_type_check(char type, struct nk_error *err)
{
	static const char valid[] = "QPBEDCHSXdcfFp";

	if (type != '\0' && strchr(valid, type))
		return true;
	return nk_error_set(err, PROTO_SQLSTATE_VIOLATION, "invalid frontend message type %d",
			    (int)(unsigned char)type);
}

/* Name of a message a client sends. */
const char *
proto_frontend_msg_name(char type)
{
	switch (type) {
	case 'Q': return "Query";
	case 'P': return "Parse";
	case 'B': return "Bind";
	case 'E': return "Execute";
	case 'D': return "Describe";
	case 'C': return "Close";
	case 'H': return "Flush";
	case 'S': return "Sync";
	case 'X': return "Terminate";
	case 'd': return "CopyData";
	case 'c': return "CopyDone";
	case 'f': return "CopyFail";
	case 'F': return "FunctionCall";
	case 'p': return "PasswordMessage";
	default: return "unknown";
	}
}

/* Name of a message a server sends. */
const char *
proto_backend_msg_name(char type)
{
	switch (type) {
	case 'R': return "Authentication";
	case 'S': return "ParameterStatus";
	case 'K': return "BackendKeyData";
	case 'Z': return "ReadyForQuery";
	case 'E': return "ErrorResponse";
	case 'N': return "NoticeResponse";
	case 'T': return "RowDescription";
	case 'D': return "DataRow";
	case 'C': return "CommandComplete";
	case 'I': return "EmptyQueryResponse";
	case '1': return "ParseComplete";
	case '2': return "BindComplete";
	case '3': return "CloseComplete";
	case 'n': return "NoData";
	case 't': return "ParameterDescription";
	case 's': return "PortalSuspended";
	case 'G': return "CopyInResponse";
	case 'H': return "CopyOutResponse";
	case 'W': return "CopyBothResponse";
	case 'd': return "CopyData";
	case 'c': return "CopyDone";
	case 'v': return "NegotiateProtocolVersion";
	case 'A': return "NotificationResponse";
	case 'V': return "FunctionCallResponse";
	default: return "unknown";
	}
}

/* ---- client messages ---- */

/* Query: one string. *<sql> borrows from <body>. */
bool
proto_parse_query(const uint8_t *body, size_t len, const char **sql, struct nk_error *err)
{
	struct proto_reader r;

	proto_reader_init(&r, 'Q', body, len);
	*sql = proto_get_string(&r);
	return proto_reader_end(&r, err);
}

/* Parse: name, query, int16 count, that many type oids. */
bool
proto_parse_parse(const uint8_t *body, size_t len, struct proto_parse_msg *m,
		  struct nk_error *err)
{
	struct proto_reader r;

	proto_reader_init(&r, 'P', body, len);
	m->name = proto_get_string(&r);
	m->query = proto_get_string(&r);
	m->nparams = proto_get_uint16(&r);
	m->oids = proto_get_bytes(&r, (size_t)m->nparams * 4);
	return proto_reader_end(&r, err);
}

/* Type oid <i> declared by a parsed Parse message (<i> < nparams). */
uint32_t
proto_parse_param_oid(const struct proto_parse_msg *m, size_t i)
{
	NK_ASSERT(i < m->nparams);
	return nk_get_be32(m->oids + i * 4);
}

/* Skip <n> length-prefixed values (-1 = NULL); sets a fault on bad lengths. */
static void
skip_values(struct proto_reader *r, uint16_t n)
{
	for (uint16_t i = 0; i < n && proto_reader_ok(r); i++) {
		int32_t vlen = proto_get_int32(r);

		if (vlen == -1)
			continue;
		if (vlen < 0) {
			/* as pq_getmsgbytes() with a negative length */
			r->fault = PROTO_READ_SHORT;
			return;
		}
		(void)proto_get_bytes(r, (size_t)vlen);
	}
}

/* Bind: portal, statement, formats, values (-1 = NULL), result formats. */
bool
proto_parse_bind(const uint8_t *body, size_t len, struct proto_bind_msg *m,
		 struct nk_error *err)
{
	struct proto_reader r;
	size_t start;

	proto_reader_init(&r, 'B', body, len);
	m->portal = proto_get_string(&r);
	m->stmt = proto_get_string(&r);
	m->nformats = proto_get_uint16(&r);
	m->formats = proto_get_bytes(&r, (size_t)m->nformats * 2);
	m->nparams = proto_get_uint16(&r);
	start = r.pos;
	skip_values(&r, m->nparams);
	m->params = body + start;
	m->params_len = r.pos - start;
	m->nresult_formats = proto_get_uint16(&r);
	m->result_formats = proto_get_bytes(&r, (size_t)m->nresult_formats * 2);
	if (!proto_reader_end(&r, err))
		return false;
	if (m->nformats > 1 && m->nformats != m->nparams)
		return nk_error_set(err, PROTO_SQLSTATE_VIOLATION,
				    "bind message has %d parameter formats but %d parameters",
				    m->nformats, m->nparams);
	return true;
}

/* Decode the values of a validated Bind into <out>; returns how many. */
size_t
proto_bind_params(const struct proto_bind_msg *m, struct proto_value *out, size_t max)
{
	struct proto_reader r;
	size_t i;

	proto_reader_init(&r, 'B', m->params, m->params_len);
	for (i = 0; i < m->nparams && i < max; i++) {
		int32_t vlen = proto_get_int32(&r);

		if (vlen < 0) {
			out[i].p = NULL;
			out[i].len = 0;
		} else {
			out[i].p = proto_get_bytes(&r, (size_t)vlen);
			out[i].len = (uint32_t)vlen;
		}
	}
	return i;
}

/* Format code <i> of a format list with <n> entries (Postgres rules). */
static int16_t
format_at(const uint8_t *fmts, uint16_t n, size_t i)
{
	if (n == 0)
		return 0;
	if (n == 1)
		i = 0;
	else if (i >= n)
		return 0;
	return (int16_t)((fmts[i * 2] << 8) | fmts[i * 2 + 1]);
}

/* Format code of parameter <i>: none = text, one = all, else per parameter. */
int16_t
proto_bind_param_format(const struct proto_bind_msg *m, size_t i)
{
	return format_at(m->formats, m->nformats, i);
}

/* Format code of result column <i>, same rules as parameters. */
int16_t
proto_bind_result_format(const struct proto_bind_msg *m, size_t i)
{
	return format_at(m->result_formats, m->nresult_formats, i);
}

/* Describe and Close: kind + name; <what> names the message in the error. */
static bool
parse_target(char type, const char *what, const uint8_t *body, size_t len,
	     struct proto_target_msg *m, struct nk_error *err)
{
	struct proto_reader r;

	proto_reader_init(&r, type, body, len);
	m->kind = (char)proto_get_byte(&r);
	m->name = proto_get_string(&r);
	if (!proto_reader_end(&r, err))
		return false;
	if (m->kind != 'S' && m->kind != 'P')
		return nk_error_set(err, PROTO_SQLSTATE_VIOLATION, "invalid %s message subtype %d",
				    what, (int)(unsigned char)m->kind);
	return true;
}

/* Describe: kind 'S' or 'P' and a name. */
bool
proto_parse_describe(const uint8_t *body, size_t len, struct proto_target_msg *m,
		     struct nk_error *err)
{
	return parse_target('D', "DESCRIBE", body, len, m, err);
}

/* Close: kind 'S' or 'P' and a name. */
bool
proto_parse_close(const uint8_t *body, size_t len, struct proto_target_msg *m,
		  struct nk_error *err)
{
	return parse_target('C', "CLOSE", body, len, m, err);
}

/* Execute: portal name and row limit. */
bool
proto_parse_execute(const uint8_t *body, size_t len, struct proto_execute_msg *m,
		    struct nk_error *err)
{
	struct proto_reader r;

	proto_reader_init(&r, 'E', body, len);
	m->portal = proto_get_string(&r);
	m->max_rows = proto_get_int32(&r);
	return proto_reader_end(&r, err);
}

/* Messages without a body (Sync, Flush, Terminate, CopyDone): <len> must be 0. */
bool
proto_parse_empty(char type, size_t len, struct nk_error *err)
{
	struct proto_reader r;

	proto_reader_init(&r, type, NULL, len);
	r.p = (const uint8_t *)"";
	return proto_reader_end(&r, err);
}

/* CopyFail: the client's error message. */
bool
proto_parse_copy_fail(const uint8_t *body, size_t len, const char **msg, struct nk_error *err)
{
	struct proto_reader r;

	proto_reader_init(&r, 'f', body, len);
	*msg = proto_get_string(&r);
	return proto_reader_end(&r, err);
}

/* PasswordMessage: one string. */
bool
proto_parse_password(const uint8_t *body, size_t len, const char **password,
		     struct nk_error *err)
{
	struct proto_reader r;

	proto_reader_init(&r, 'p', body, len);
	*password = proto_get_string(&r);
	return proto_reader_end(&r, err);
}

/* SASLInitialResponse: mechanism, int32 length (-1 = none), data. */
bool
proto_parse_sasl_initial(const uint8_t *body, size_t len, struct proto_sasl_initial_msg *m,
			 struct nk_error *err)
{
	struct proto_reader r;
	int32_t dlen;

	proto_reader_init(&r, 'p', body, len);
	m->mechanism = proto_get_string(&r);
	dlen = proto_get_int32(&r);
	m->data = NULL;
	m->len = 0;
	if (dlen >= 0) {
		m->data = proto_get_bytes(&r, (size_t)dlen);
		m->len = (size_t)dlen;
	} else if (dlen != -1) {
		r.fault = PROTO_READ_SHORT;	/* as pq_getmsgbytes() with a negative length */
	}
	return proto_reader_end(&r, err);
}

/* The error neki answers a FunctionCall with (0A000). */
bool
proto_function_call_refuse(struct nk_error *err)
{
	nk_error_set(err, ERRCODE_FEATURE_NOT_SUPPORTED,
		     "function call messages are not supported");
	nk_error_hint(err, "Call the function with a SELECT statement instead.");
	return false;
}
