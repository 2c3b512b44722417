/*
 * srvmsg.c - parsers for the server messages neki interprets itself.
 *
 * Authentication requests, ParameterStatus, BackendKeyData, ReadyForQuery,
 * ErrorResponse / NoticeResponse (every field), RowDescription, DataRow and
 * CommandComplete. Everything else coming from a server is forwarded untouched
 * and never parsed. Same reader and error conventions as msg.c.
 */
#include "neki/base.h"

#include "neki/proto.h"

#include <stdio.h>
#include <string.h>

/* The list of SASL mechanism names must be strings ending with an empty one. */
static bool
auth_check_sasl_list(struct proto_reader *r)
{
	const char *mech;

	do {
		mech = proto_get_string(r);
	} while (proto_reader_ok(r) && mech[0] != '\0');
	return proto_reader_ok(r);
}

/* Authentication request: code, then code-specific data (checked for md5 and SASL). */
bool
proto_parse_auth(const uint8_t *body, size_t len, struct proto_auth_msg *m,
		 struct nk_error *err)
{
	struct proto_reader r;

	proto_reader_init(&r, 'R', body, len);
	m->code = proto_get_int32(&r);
	m->data = body + r.pos;
	m->len = proto_reader_left(&r);
	switch (m->code) {
	case PROTO_AUTH_OK:
	case PROTO_AUTH_CLEARTEXT:
		break;
	case PROTO_AUTH_MD5:
		(void)proto_get_bytes(&r, 4);
		break;
	case PROTO_AUTH_SASL:
		(void)auth_check_sasl_list(&r);
		break;
	default:
		/* SASL data, GSS tokens: opaque here */
		(void)proto_get_bytes(&r, proto_reader_left(&r));
		break;
	}
	return proto_reader_end(&r, err);
}

/* Search the mechanism list of an AuthenticationSASL. */
bool
proto_auth_sasl_has(const struct proto_auth_msg *m, const char *mech)
{
	struct proto_reader r;
	const char *s;

	if (m->code != PROTO_AUTH_SASL)
		return false;
	proto_reader_init(&r, 'R', m->data, m->len);
	for (;;) {
		s = proto_get_string(&r);
		if (!proto_reader_ok(&r) || s[0] == '\0')
			return false;
		if (strcmp(s, mech) == 0)
			return true;
	}
}

/* ParameterStatus: name and value. */
bool
proto_parse_parameter_status(const uint8_t *body, size_t len, struct proto_param *out,
			     struct nk_error *err)
{
	struct proto_reader r;

	proto_reader_init(&r, 'S', body, len);
	out->name = proto_get_string(&r);
	out->value = proto_get_string(&r);
	return proto_reader_end(&r, err);
}

/* BackendKeyData: process id and 4-byte secret key. */
bool
proto_parse_backend_key(const uint8_t *body, size_t len, uint32_t *pid, uint32_t *key,
			struct nk_error *err)
{
	struct proto_reader r;

	proto_reader_init(&r, 'K', body, len);
	*pid = (uint32_t)proto_get_int32(&r);
	*key = (uint32_t)proto_get_int32(&r);
	return proto_reader_end(&r, err);
}

/* NotificationResponse: sender process id, channel and payload (borrowed from <body>). */
bool
proto_parse_notification(const uint8_t *body, size_t len, uint32_t *pid, const char **channel,
			 const char **payload, struct nk_error *err)
{
	struct proto_reader r;

	proto_reader_init(&r, 'A', body, len);
	*pid = (uint32_t)proto_get_int32(&r);
	*channel = proto_get_string(&r);
	*payload = proto_get_string(&r);
	return proto_reader_end(&r, err);
}

/* ReadyForQuery: one of I, T, E. */
bool
proto_parse_ready_for_query(const uint8_t *body, size_t len, char *status,
			    struct nk_error *err)
{
	struct proto_reader r;

	proto_reader_init(&r, 'Z', body, len);
	*status = (char)proto_get_byte(&r);
	if (!proto_reader_end(&r, err))
		return false;
	if (*status != 'I' && *status != 'T' && *status != 'E')
		return nk_error_set(err, PROTO_SQLSTATE_VIOLATION,
				    "unexpected transaction status \"%c\" in ReadyForQuery",
				    *status);
	return true;
}

/* Where field <code> of an ErrorResponse goes in <e>; NULL for unknown codes. */
static const char **
error_field_slot(struct proto_server_error *e, char code)
{
	switch (code) {
	case 'S': return &e->severity;
	case 'V': return &e->severity_nl;
	case 'C': return &e->sqlstate;
	case 'M': return &e->message;
	case 'D': return &e->detail;
	case 'H': return &e->hint;
	case 'P': return &e->position;
	case 'p': return &e->internal_position;
	case 'q': return &e->internal_query;
	case 'W': return &e->where;
	case 's': return &e->schema;
	case 't': return &e->table;
	case 'c': return &e->column;
	case 'd': return &e->datatype;
	case 'n': return &e->constraint;
	case 'F': return &e->file;
	case 'L': return &e->line;
	case 'R': return &e->routine;
	default: return NULL;
	}
}

/* Error/Notice fields until the terminator; unknown field types are skipped. */
bool
proto_parse_server_error(const uint8_t *body, size_t len, struct proto_server_error *e,
			 struct nk_error *err)
{
	struct proto_reader r;

	memset(e, 0, sizeof(*e));
	proto_reader_init(&r, 'E', body, len);
	for (;;) {
		char code = (char)proto_get_byte(&r);
		const char *value, **slot;

		if (!proto_reader_ok(&r) || code == '\0')
			break;
		value = proto_get_string(&r);
		slot = error_field_slot(e, code);
		if (slot && proto_reader_ok(&r))
			*slot = value;	/* unknown field types are skipped, as libpq does */
	}
	return proto_reader_end(&r, err);
}

/* Map a server severity word to ours (INFO, LOG, DEBUG become NOTICE). */
static enum nk_severity
severity_from_word(const char *w)
{
	if (w == NULL || strcmp(w, "ERROR") == 0)
		return NK_SEV_ERROR;
	if (strcmp(w, "FATAL") == 0 || strcmp(w, "PANIC") == 0)
		return NK_SEV_FATAL;
	if (strcmp(w, "WARNING") == 0)
		return NK_SEV_WARNING;
	return NK_SEV_NOTICE;
}

/* Copy the fields neki relays into <out> (truncating to its buffers). */
void
proto_server_error_to_nk(const struct proto_server_error *e, struct nk_error *out)
{
	nk_error_clear(out);
	out->severity = severity_from_word(e->severity_nl ? e->severity_nl : e->severity);
	snprintf(out->sqlstate, sizeof(out->sqlstate), "%s",
		 e->sqlstate ? e->sqlstate : ERRCODE_INTERNAL_ERROR);
	snprintf(out->message, sizeof(out->message), "%s", e->message ? e->message : "");
	snprintf(out->detail, sizeof(out->detail), "%s", e->detail ? e->detail : "");
	snprintf(out->hint, sizeof(out->hint), "%s", e->hint ? e->hint : "");
	snprintf(out->where, sizeof(out->where), "%s", e->where ? e->where : "");
}

/* Fixed part of a RowDescription field after its name. */
#define ROWDESC_FIXED 18

/* RowDescription: validate every field record. */
bool
proto_parse_row_description(const uint8_t *body, size_t len, struct proto_rowdesc_msg *m,
			    struct nk_error *err)
{
	struct proto_reader r;

	proto_reader_init(&r, 'T', body, len);
	m->ncols = proto_get_uint16(&r);
	m->fields = body + r.pos;
	for (uint16_t i = 0; i < m->ncols && proto_reader_ok(&r); i++) {
		(void)proto_get_string(&r);
		(void)proto_get_bytes(&r, ROWDESC_FIXED);
	}
	m->fields_len = (size_t)(body + r.pos - m->fields);
	return proto_reader_end(&r, err);
}

/* Decode validated RowDescription fields into <out>. */
size_t
proto_rowdesc_columns(const struct proto_rowdesc_msg *m, struct proto_column *out, size_t max)
{
	struct proto_reader r;
	size_t i;

	proto_reader_init(&r, 'T', m->fields, m->fields_len);
	for (i = 0; i < m->ncols && i < max; i++) {
		out[i].name = proto_get_string(&r);
		out[i].table_oid = (uint32_t)proto_get_int32(&r);
		out[i].attnum = proto_get_int16(&r);
		out[i].type_oid = (uint32_t)proto_get_int32(&r);
		out[i].typlen = proto_get_int16(&r);
		out[i].typmod = proto_get_int32(&r);
		out[i].format = proto_get_int16(&r);
	}
	return i;
}

/* DataRow: validate every value length. */
bool
proto_parse_data_row(const uint8_t *body, size_t len, struct proto_datarow_msg *m,
		     struct nk_error *err)
{
	struct proto_reader r;

	proto_reader_init(&r, 'D', body, len);
	m->ncols = proto_get_uint16(&r);
	m->values = body + r.pos;
	for (uint16_t i = 0; i < m->ncols && proto_reader_ok(&r); i++) {
		int32_t vlen = proto_get_int32(&r);

		if (vlen >= 0)
			(void)proto_get_bytes(&r, (size_t)vlen);
		else if (vlen != -1)
			r.fault = PROTO_READ_SHORT;	/* as pq_getmsgbytes() */
	}
	m->values_len = (size_t)(body + r.pos - m->values);
	return proto_reader_end(&r, err);
}

/* Decode validated DataRow values into <out>. */
size_t
proto_datarow_values(const struct proto_datarow_msg *m, struct proto_value *out, size_t max)
{
	struct proto_bind_msg b = { 0 };

	/* same layout as Bind parameters */
	b.nparams = m->ncols;
	b.params = m->values;
	b.params_len = m->values_len;
	return proto_bind_params(&b, out, max);
}

/* CommandComplete: the tag. */
bool
proto_parse_command_complete(const uint8_t *body, size_t len, const char **tag,
			     struct nk_error *err)
{
	struct proto_reader r;

	proto_reader_init(&r, 'C', body, len);
	*tag = proto_get_string(&r);
	return proto_reader_end(&r, err);
}
