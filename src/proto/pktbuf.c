/*
 * pktbuf.c - the outgoing message builder and one writer per message type.
 *
 * The buffer grows by doubling (unless fixed); every put is a no-op after a
 * failure, so a writer never checks anything and the caller tests
 * pktbuf_failed() once. Writers for client-bound messages come first, then the
 * server-bound ones. Message layouts follow the Postgres "Message Formats"
 * chapter; field order of ErrorResponse follows the server's (S V C M D H ...).
 */
#include "neki/base.h"

#include "neki/byteorder.h"
#include "neki/pktbuf.h"

#include <stdlib.h>
#include <string.h>

/* Growable buffer; <initial> bytes reserved up front (0: on first put). */
void
pktbuf_init(struct pktbuf *pb, size_t initial)
{
	memset(pb, 0, sizeof(*pb));
	pb->msg_start = SIZE_MAX;
	if (initial > 0) {
		pb->buf = malloc(initial);
		if (pb->buf)
			pb->cap = initial;
		else
			pb->failed = true;
	}
}

/* Fixed buffer over borrowed <mem>; overflowing it sets `failed`. */
void
pktbuf_init_fixed(struct pktbuf *pb, void *mem, size_t cap)
{
	memset(pb, 0, sizeof(*pb));
	pb->msg_start = SIZE_MAX;
	pb->buf = mem;
	pb->cap = cap;
	pb->fixed = true;
}

/* Release an owned buffer. */
void
pktbuf_cleanup(struct pktbuf *pb)
{
	if (!pb->fixed)
		free(pb->buf);
	pb->buf = NULL;
	pb->len = pb->cap = 0;
}

/* Empty <pb> and clear `failed`, keeping the memory. */
void
pktbuf_reset(struct pktbuf *pb)
{
	pb->len = 0;
	pb->failed = false;
	pb->msg_start = SIZE_MAX;
}

/* Make room for <n> more bytes; false (and `failed`) when impossible. */
static bool
pktbuf_reserve(struct pktbuf *pb, size_t n)
{
	size_t need, cap;
	uint8_t *nb;

	if (pb->failed)
		return false;
	if (n > SIZE_MAX - pb->len)
		goto fail;
	need = pb->len + n;
	if (need <= pb->cap)
		return true;
	if (pb->fixed)
		goto fail;
	cap = pb->cap ? pb->cap : 256;
	while (cap < need)
		cap = cap > SIZE_MAX / 2 ? need : cap * 2;
	nb = realloc(pb->buf, cap);
	if (!nb)
		goto fail;
	pb->buf = nb;
	pb->cap = cap;
	return true;
fail:
	pb->failed = true;
	return false;
}

/* Append <n> raw bytes. */
void
pktbuf_put_bytes(struct pktbuf *pb, const void *p, size_t n)
{
	if (!pktbuf_reserve(pb, n))
		return;
	if (n > 0)
		memcpy(pb->buf + pb->len, p, n);
	pb->len += n;
}

/* Append one byte. */
void
pktbuf_put_byte(struct pktbuf *pb, uint8_t v)
{
	if (pktbuf_reserve(pb, 1))
		pb->buf[pb->len++] = v;
}

void
pktbuf_put_int16(struct pktbuf *pb, int16_t v)
{
	uint16_t u = (uint16_t)v;

	if (!pktbuf_reserve(pb, 2))
		return;
	pb->buf[pb->len++] = (uint8_t)(u >> 8);
	pb->buf[pb->len++] = (uint8_t)u;
}

void
pktbuf_put_int32(struct pktbuf *pb, int32_t v)
{
	uint32_t u = (uint32_t)v;

	if (!pktbuf_reserve(pb, 4))
		return;
	nk_put_be32(pb->buf + pb->len, u);
	pb->len += 4;
}

void
pktbuf_put_uint64(struct pktbuf *pb, uint64_t v)
{
	pktbuf_put_int32(pb, (int32_t)(uint32_t)(v >> 32));
	pktbuf_put_int32(pb, (int32_t)(uint32_t)v);
}

/* Append <s> with its terminating NUL (NULL writes ""). */
void
pktbuf_put_string(struct pktbuf *pb, const char *s)
{
	pktbuf_put_bytes(pb, s ? s : "", strlen(s ? s : "") + 1);
}

/* Start a message: type byte (unless 0) and a length placeholder. */
void
pktbuf_begin(struct pktbuf *pb, char type)
{
	NK_ASSERT(pb->msg_start == SIZE_MAX);
	if (!pktbuf_reserve(pb, 5)) {
		pb->msg_start = pb->len;	/* (pktbuf_end() still closes it) */
		return;
	}
	if (type != 0)
		pb->buf[pb->len++] = (uint8_t)type;
	pb->msg_start = pb->len;
	memset(pb->buf + pb->len, 0, 4);	/* the length, patched by pktbuf_end() */
	pb->len += 4;
}

/* Patch the open message's length (it counts itself, not the type byte). */
void
pktbuf_end(struct pktbuf *pb)
{
	size_t start = pb->msg_start;
	size_t len;

	NK_ASSERT(start != SIZE_MAX);
	pb->msg_start = SIZE_MAX;
	if (pb->failed)
		return;
	len = pb->len - start;
	if (len > INT32_MAX) {
		pb->failed = true;
		return;
	}
	nk_put_be32(pb->buf + start, (uint32_t)len);
}

/* A message with no body (ParseComplete, Sync, ...). */
static void
write_empty(struct pktbuf *pb, char type)
{
	pktbuf_begin(pb, type);
	pktbuf_end(pb);
}

/* ---- to clients ---- */

/* An 'R' message carrying only <code>. */
static void
write_auth_code(struct pktbuf *pb, enum proto_auth_code code)
{
	pktbuf_begin(pb, 'R');
	pktbuf_put_int32(pb, (int32_t)code);
	pktbuf_end(pb);
}

/* AuthenticationOk. */
void
pktbuf_write_auth_ok(struct pktbuf *pb)
{
	write_auth_code(pb, PROTO_AUTH_OK);
}

/* AuthenticationCleartextPassword. */
void
pktbuf_write_auth_cleartext(struct pktbuf *pb)
{
	write_auth_code(pb, PROTO_AUTH_CLEARTEXT);
}

void
pktbuf_write_auth_md5(struct pktbuf *pb, const uint8_t salt[4])
{
	pktbuf_begin(pb, 'R');
	pktbuf_put_int32(pb, PROTO_AUTH_MD5);
	pktbuf_put_bytes(pb, salt, 4);
	pktbuf_end(pb);
}

/* AuthenticationSASL: mechanism names, then an empty one. */
void
pktbuf_write_auth_sasl(struct pktbuf *pb, const char *const *mechs, size_t n)
{
	pktbuf_begin(pb, 'R');
	pktbuf_put_int32(pb, PROTO_AUTH_SASL);
	for (size_t i = 0; i < n; i++)
		pktbuf_put_string(pb, mechs[i]);
	pktbuf_put_byte(pb, 0);
	pktbuf_end(pb);
}

/* An 'R' message with <code> followed by raw SASL data. */
static void
write_auth_data(struct pktbuf *pb, enum proto_auth_code code, const void *data, size_t len)
{
	pktbuf_begin(pb, 'R');
	pktbuf_put_int32(pb, (int32_t)code);
	pktbuf_put_bytes(pb, data, len);
	pktbuf_end(pb);
}

/* AuthenticationSASLContinue carrying server-first. */
void
pktbuf_write_auth_sasl_continue(struct pktbuf *pb, const void *data, size_t len)
{
	write_auth_data(pb, PROTO_AUTH_SASL_CONTINUE, data, len);
}

/* AuthenticationSASLFinal carrying server-final. */
void
pktbuf_write_auth_sasl_final(struct pktbuf *pb, const void *data, size_t len)
{
	write_auth_data(pb, PROTO_AUTH_SASL_FINAL, data, len);
}

/* ParameterStatus <name> = <value>. */
void
pktbuf_write_parameter_status(struct pktbuf *pb, const char *name, const char *value)
{
	pktbuf_begin(pb, 'S');
	pktbuf_put_string(pb, name);
	pktbuf_put_string(pb, value);
	pktbuf_end(pb);
}

/* BackendKeyData (protocol 3.0: 4-byte key). */
void
pktbuf_write_backend_key_data(struct pktbuf *pb, uint32_t pid, uint32_t key)
{
	pktbuf_begin(pb, 'K');
	pktbuf_put_int32(pb, (int32_t)pid);
	pktbuf_put_int32(pb, (int32_t)key);
	pktbuf_end(pb);
}

/* ReadyForQuery with the transaction status byte. */
void
pktbuf_write_ready_for_query(struct pktbuf *pb, char status)
{
	pktbuf_begin(pb, 'Z');
	pktbuf_put_byte(pb, (uint8_t)status);
	pktbuf_end(pb);
}

/* The non-localised severity word Postgres sends for <sev>. */
static const char *
severity_word(enum nk_severity sev)
{
	switch (sev) {
	case NK_SEV_FATAL:
		return "FATAL";
	case NK_SEV_WARNING:
		return "WARNING";
	case NK_SEV_NOTICE:
		return "NOTICE";
	case NK_SEV_ERROR:
	default:
		return "ERROR";
	}
}

/* Put one field (code byte + string) unless <value> is empty. */
static void
put_field(struct pktbuf *pb, char code, const char *value)
{
	if (value == NULL || value[0] == '\0')
		return;
	pktbuf_put_byte(pb, (uint8_t)code);
	pktbuf_put_string(pb, value);
}

/* Error/Notice fields in the server's order; empty optional fields are left out. */
void
pktbuf_write_error_ex(struct pktbuf *pb, char type, const struct nk_error *err,
		      const struct proto_err_field *extra, size_t nextra)
{
	const char *sev = severity_word(err->severity);

	pktbuf_begin(pb, type);
	put_field(pb, 'S', sev);
	put_field(pb, 'V', sev);
	put_field(pb, 'C', err->sqlstate[0] ? err->sqlstate : ERRCODE_INTERNAL_ERROR);
	/* M is mandatory: an empty message still gets its field */
	pktbuf_put_byte(pb, 'M');
	pktbuf_put_string(pb, err->message);
	put_field(pb, 'D', err->detail);
	put_field(pb, 'H', err->hint);
	for (size_t i = 0; i < nextra; i++)
		put_field(pb, extra[i].code, extra[i].value);
	pktbuf_put_byte(pb, 0);
	pktbuf_end(pb);
}

/* ErrorResponse from <err>. */
void
pktbuf_write_error(struct pktbuf *pb, const struct nk_error *err)
{
	pktbuf_write_error_ex(pb, 'E', err, NULL, 0);
}

/* NoticeResponse from <err> (severity usually NOTICE or WARNING). */
void
pktbuf_write_notice(struct pktbuf *pb, const struct nk_error *err)
{
	pktbuf_write_error_ex(pb, 'N', err, NULL, 0);
}

/* RowDescription with <n> fields. */
void
pktbuf_write_row_description(struct pktbuf *pb, const struct proto_column *cols, size_t n)
{
	pktbuf_begin(pb, 'T');
	pktbuf_put_int16(pb, (int16_t)n);
	for (size_t i = 0; i < n; i++) {
		pktbuf_put_string(pb, cols[i].name);
		pktbuf_put_int32(pb, (int32_t)cols[i].table_oid);
		pktbuf_put_int16(pb, cols[i].attnum);
		pktbuf_put_int32(pb, (int32_t)cols[i].type_oid);
		pktbuf_put_int16(pb, cols[i].typlen);
		pktbuf_put_int32(pb, cols[i].typmod);
		pktbuf_put_int16(pb, cols[i].format);
	}
	pktbuf_end(pb);
}

/* Put a length-prefixed value; NULL (p == NULL) is length -1 with no bytes. */
static void
put_value(struct pktbuf *pb, const struct proto_value *v)
{
	if (v->p == NULL) {
		pktbuf_put_int32(pb, -1);
		return;
	}
	if (v->len > INT32_MAX) {
		pb->failed = true;
		return;
	}
	pktbuf_put_int32(pb, (int32_t)v->len);
	pktbuf_put_bytes(pb, v->p, v->len);
}

/* DataRow from length-prefixed values (p == NULL: NULL). */
void
pktbuf_write_data_row(struct pktbuf *pb, const struct proto_value *vals, size_t n)
{
	pktbuf_begin(pb, 'D');
	pktbuf_put_int16(pb, (int16_t)n);
	for (size_t i = 0; i < n; i++)
		put_value(pb, &vals[i]);
	pktbuf_end(pb);
}

/* DataRow from C strings (NULL pointer: NULL). */
void
pktbuf_write_data_row_text(struct pktbuf *pb, const char *const *vals, size_t n)
{
	pktbuf_begin(pb, 'D');
	pktbuf_put_int16(pb, (int16_t)n);
	for (size_t i = 0; i < n; i++) {
		struct proto_value v = { (const uint8_t *)vals[i], vals[i] ? strlen(vals[i]) : 0 };

		put_value(pb, &v);
	}
	pktbuf_end(pb);
}

/* CommandComplete with <tag> ("SELECT 1", "INSERT 0 1", ...). */
void
pktbuf_write_command_complete(struct pktbuf *pb, const char *tag)
{
	pktbuf_begin(pb, 'C');
	pktbuf_put_string(pb, tag);
	pktbuf_end(pb);
}

/* EmptyQueryResponse. */
void
pktbuf_write_empty_query(struct pktbuf *pb)
{
	write_empty(pb, 'I');
}

/* ParseComplete. */
void
pktbuf_write_parse_complete(struct pktbuf *pb)
{
	write_empty(pb, '1');
}

/* BindComplete. */
void
pktbuf_write_bind_complete(struct pktbuf *pb)
{
	write_empty(pb, '2');
}

/* CloseComplete. */
void
pktbuf_write_close_complete(struct pktbuf *pb)
{
	write_empty(pb, '3');
}

/* NoData. */
void
pktbuf_write_no_data(struct pktbuf *pb)
{
	write_empty(pb, 'n');
}

/* ParameterDescription with <n> type oids. */
void
pktbuf_write_parameter_description(struct pktbuf *pb, const uint32_t *oids, size_t n)
{
	pktbuf_begin(pb, 't');
	pktbuf_put_int16(pb, (int16_t)n);
	for (size_t i = 0; i < n; i++)
		pktbuf_put_int32(pb, (int32_t)oids[i]);
	pktbuf_end(pb);
}

/* PortalSuspended. */
void
pktbuf_write_portal_suspended(struct pktbuf *pb)
{
	write_empty(pb, 's');
}

/* CopyIn/CopyOut/CopyBothResponse: overall format and per-column formats. */
void
pktbuf_write_copy_response(struct pktbuf *pb, char type, uint8_t format,
			   const int16_t *col_formats, size_t n)
{
	NK_ASSERT(type == 'G' || type == 'H' || type == 'W');
	pktbuf_begin(pb, type);
	pktbuf_put_byte(pb, format);
	pktbuf_put_int16(pb, (int16_t)n);
	for (size_t i = 0; i < n; i++)
		pktbuf_put_int16(pb, col_formats[i]);
	pktbuf_end(pb);
}

/* CopyData carrying <len> bytes. */
void
pktbuf_write_copy_data(struct pktbuf *pb, const void *data, size_t len)
{
	pktbuf_begin(pb, 'd');
	pktbuf_put_bytes(pb, data, len);
	pktbuf_end(pb);
}

/* CopyDone. */
void
pktbuf_write_copy_done(struct pktbuf *pb)
{
	write_empty(pb, 'c');
}

/* CopyFail with <msg>. */
void
pktbuf_write_copy_fail(struct pktbuf *pb, const char *msg)
{
	pktbuf_begin(pb, 'f');
	pktbuf_put_string(pb, msg);
	pktbuf_end(pb);
}

/* NegotiateProtocolVersion: newest version (major << 16 | minor) and the unknown options. */
void
pktbuf_write_negotiate_protocol(struct pktbuf *pb, uint32_t version,
				const char *const *options, size_t n)
{
	pktbuf_begin(pb, 'v');
	pktbuf_put_int32(pb, (int32_t)version);
	pktbuf_put_int32(pb, (int32_t)n);
	for (size_t i = 0; i < n; i++)
		pktbuf_put_string(pb, options[i]);
	pktbuf_end(pb);
}

/* NotificationResponse (LISTEN/NOTIFY). */
void
pktbuf_write_notification(struct pktbuf *pb, uint32_t pid, const char *channel,
			  const char *payload)
{
	pktbuf_begin(pb, 'A');
	pktbuf_put_int32(pb, (int32_t)pid);
	pktbuf_put_string(pb, channel);
	pktbuf_put_string(pb, payload);
	pktbuf_end(pb);
}

/* ---- to servers ---- */

/* StartupMessage 3.0 with name/value pairs and the final terminator. */
void
pktbuf_write_startup(struct pktbuf *pb, const struct proto_param *params, size_t n)
{
	pktbuf_begin(pb, 0);
	pktbuf_put_int32(pb, (int32_t)PROTO_V3_0);
	for (size_t i = 0; i < n; i++) {
		pktbuf_put_string(pb, params[i].name);
		pktbuf_put_string(pb, params[i].value);
	}
	pktbuf_put_byte(pb, 0);
	pktbuf_end(pb);
}

/* PasswordMessage (cleartext or md5 response). */
void
pktbuf_write_password(struct pktbuf *pb, const char *password)
{
	pktbuf_begin(pb, 'p');
	pktbuf_put_string(pb, password);
	pktbuf_end(pb);
}

/* SASLInitialResponse: mechanism and client-first (length -1 when NULL). */
void
pktbuf_write_sasl_initial(struct pktbuf *pb, const char *mech, const void *data, size_t len)
{
	pktbuf_begin(pb, 'p');
	pktbuf_put_string(pb, mech);
	if (data == NULL) {
		pktbuf_put_int32(pb, -1);
	} else if (len > INT32_MAX) {
		pb->failed = true;
	} else {
		pktbuf_put_int32(pb, (int32_t)len);
		pktbuf_put_bytes(pb, data, len);
	}
	pktbuf_end(pb);
}

/* SASLResponse carrying client-final. */
void
pktbuf_write_sasl_response(struct pktbuf *pb, const void *data, size_t len)
{
	pktbuf_begin(pb, 'p');
	pktbuf_put_bytes(pb, data, len);
	pktbuf_end(pb);
}

/* Query (simple protocol). */
void
pktbuf_write_query(struct pktbuf *pb, const char *sql)
{
	pktbuf_begin(pb, 'Q');
	pktbuf_put_string(pb, sql);
	pktbuf_end(pb);
}

/* Parse with <noids> parameter type oids. */
void
pktbuf_write_parse(struct pktbuf *pb, const char *name, const char *sql,
		   const uint32_t *oids, size_t noids)
{
	pktbuf_begin(pb, 'P');
	pktbuf_put_string(pb, name);
	pktbuf_put_string(pb, sql);
	pktbuf_put_int16(pb, (int16_t)noids);
	for (size_t i = 0; i < noids; i++)
		pktbuf_put_int32(pb, (int32_t)oids[i]);
	pktbuf_end(pb);
}

/* Put an int16 count followed by <n> int16 format codes. */
static void
put_formats(struct pktbuf *pb, const int16_t *fmts, size_t n)
{
	pktbuf_put_int16(pb, (int16_t)n);
	for (size_t i = 0; i < n; i++)
		pktbuf_put_int16(pb, fmts[i]);
}

/* Bind from a struct proto_bind_spec. */
void
pktbuf_write_bind(struct pktbuf *pb, const struct proto_bind_spec *b)
{
	pktbuf_begin(pb, 'B');
	pktbuf_put_string(pb, b->portal);
	pktbuf_put_string(pb, b->stmt);
	put_formats(pb, b->param_formats, b->nparam_formats);
	pktbuf_put_int16(pb, (int16_t)b->nparams);
	for (size_t i = 0; i < b->nparams; i++)
		put_value(pb, &b->params[i]);
	put_formats(pb, b->result_formats, b->nresult_formats);
	pktbuf_end(pb);
}

/* Describe / Close share their layout: kind byte + name. */
static void
write_kind_name(struct pktbuf *pb, char type, char kind, const char *name)
{
	NK_ASSERT(kind == 'S' || kind == 'P');
	pktbuf_begin(pb, type);
	pktbuf_put_byte(pb, (uint8_t)kind);
	pktbuf_put_string(pb, name);
	pktbuf_end(pb);
}

/* Describe a statement ('S') or portal ('P'). */
void
pktbuf_write_describe(struct pktbuf *pb, char kind, const char *name)
{
	write_kind_name(pb, 'D', kind, name);
}

/* Execute <portal>, at most <max_rows> rows (0: all). */
void
pktbuf_write_execute(struct pktbuf *pb, const char *portal, uint32_t max_rows)
{
	pktbuf_begin(pb, 'E');
	pktbuf_put_string(pb, portal);
	pktbuf_put_int32(pb, (int32_t)max_rows);
	pktbuf_end(pb);
}

/* Close a statement ('S') or portal ('P'). */
void
pktbuf_write_close(struct pktbuf *pb, char kind, const char *name)
{
	write_kind_name(pb, 'C', kind, name);
}

/* Sync. */
void
pktbuf_write_sync(struct pktbuf *pb)
{
	write_empty(pb, 'S');
}

/* Flush. */
void
pktbuf_write_flush(struct pktbuf *pb)
{
	write_empty(pb, 'H');
}

/* Terminate. */
void
pktbuf_write_terminate(struct pktbuf *pb)
{
	write_empty(pb, 'X');
}

/* CancelRequest (startup-phase packet, no type byte). */
void
pktbuf_write_cancel_request(struct pktbuf *pb, uint32_t pid, uint32_t key)
{
	pktbuf_begin(pb, 0);
	pktbuf_put_int32(pb, (int32_t)PROTO_CANCEL_CODE);
	pktbuf_put_int32(pb, (int32_t)pid);
	pktbuf_put_int32(pb, (int32_t)key);
	pktbuf_end(pb);
}

/* SSLRequest (startup-phase packet, no type byte). */
void
pktbuf_write_ssl_request(struct pktbuf *pb)
{
	pktbuf_begin(pb, 0);
	pktbuf_put_int32(pb, (int32_t)PROTO_SSL_CODE);
	pktbuf_end(pb);
}

/* The single byte answering SSLRequest / GSSENCRequest (not a framed message). */
void
pktbuf_write_ssl_answer(struct pktbuf *pb, char answer)
{
	NK_ASSERT(answer == 'S' || answer == 'N' || answer == 'G');
	pktbuf_put_byte(pb, (uint8_t)answer);
}
