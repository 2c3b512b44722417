/*
 * neki/pktbuf.h - the one builder of outgoing protocol messages.
 *
 * A struct pktbuf is a growable (or fixed, borrowed) byte buffer with typed put
 * functions, a sticky `failed` flag (allocation failure or overflow of a fixed
 * buffer) that callers check once after building, and begin/end framing: begin
 * writes the type byte and a length placeholder, end patches the length.
 * On top of that there is exactly one writer per message type neki sends, to
 * clients (pktbuf_write_auth_ok ... pktbuf_write_notification) and to servers
 * (pktbuf_write_startup ... pktbuf_write_ssl_request). No other code assembles
 * protocol messages. Pure: no sockets, no event loop.
 */
#ifndef NEKI_PKTBUF_H
#define NEKI_PKTBUF_H

#include "neki/base.h"

#include "neki/error.h"
#include "neki/proto_types.h"

struct pktbuf {
	uint8_t *buf;		/* owned (growable) or borrowed (fixed) */
	size_t len;		/* bytes written */
	size_t cap;		/* allocated bytes */
	size_t msg_start;	/* offset of the open message's length field; SIZE_MAX if none */
	bool failed;		/* sticky: an allocation failed or a fixed buffer overflowed */
	bool fixed;		/* buf is borrowed and never grows or is freed */
};

/* Initialise a growable buffer with <initial> bytes reserved (0: allocate lazily). */
void pktbuf_init(struct pktbuf *pb, size_t initial);
/* Initialise over borrowed memory <mem> of <cap> bytes; overflow sets `failed`. */
void pktbuf_init_fixed(struct pktbuf *pb, void *mem, size_t cap);
/* Free an owned buffer; <pb> may be reused after pktbuf_init(). */
void pktbuf_cleanup(struct pktbuf *pb);
/* Forget the contents and the failure flag (keeps the allocation). */
void pktbuf_reset(struct pktbuf *pb);

/* True when some put since the last reset failed (nothing sent must rely on it then). */
static inline bool
pktbuf_failed(const struct pktbuf *pb)
{
	return pb->failed;
}

/* Typed puts, network byte order. Each is a no-op once `failed` is set. */
void pktbuf_put_byte(struct pktbuf *pb, uint8_t v);
void pktbuf_put_int16(struct pktbuf *pb, int16_t v);
void pktbuf_put_int32(struct pktbuf *pb, int32_t v);
void pktbuf_put_uint64(struct pktbuf *pb, uint64_t v);
void pktbuf_put_string(struct pktbuf *pb, const char *s);	/* with its NUL */
void pktbuf_put_bytes(struct pktbuf *pb, const void *p, size_t n);

/*
 * Open a message of <type> (0: a startup-phase packet without a type byte).
 * pktbuf_end() patches the length of the open message. Messages do not nest.
 */
void pktbuf_begin(struct pktbuf *pb, char type);
void pktbuf_end(struct pktbuf *pb);

/* ---- to clients ---- */

void pktbuf_write_auth_ok(struct pktbuf *pb);
void pktbuf_write_auth_cleartext(struct pktbuf *pb);
void pktbuf_write_auth_md5(struct pktbuf *pb, const uint8_t salt[4]);
/* AuthenticationSASL listing <n> mechanism names. */
void pktbuf_write_auth_sasl(struct pktbuf *pb, const char *const *mechs, size_t n);
void pktbuf_write_auth_sasl_continue(struct pktbuf *pb, const void *data, size_t len);
void pktbuf_write_auth_sasl_final(struct pktbuf *pb, const void *data, size_t len);
void pktbuf_write_parameter_status(struct pktbuf *pb, const char *name, const char *value);
void pktbuf_write_backend_key_data(struct pktbuf *pb, uint32_t pid, uint32_t key);
/* ReadyForQuery with <status> 'I', 'T' or 'E'. */
void pktbuf_write_ready_for_query(struct pktbuf *pb, char status);

/*
 * ErrorResponse ('E') / NoticeResponse ('N') from <err>: fields S and V (severity),
 * C, M, then D and H when non-empty. pktbuf_write_error_ex() appends <nextra>
 * further fields (e.g. 'P' position, 'W' context) before the terminator.
 */
void pktbuf_write_error(struct pktbuf *pb, const struct nk_error *err);
void pktbuf_write_notice(struct pktbuf *pb, const struct nk_error *err);
void pktbuf_write_error_ex(struct pktbuf *pb, char type, const struct nk_error *err,
			   const struct proto_err_field *extra, size_t nextra);

void pktbuf_write_row_description(struct pktbuf *pb, const struct proto_column *cols, size_t n);
/* DataRow: <vals>[i].p == NULL is an SQL NULL. */
void pktbuf_write_data_row(struct pktbuf *pb, const struct proto_value *vals, size_t n);
/* DataRow of text values; a NULL pointer is an SQL NULL. */
void pktbuf_write_data_row_text(struct pktbuf *pb, const char *const *vals, size_t n);
void pktbuf_write_command_complete(struct pktbuf *pb, const char *tag);
void pktbuf_write_empty_query(struct pktbuf *pb);
void pktbuf_write_parse_complete(struct pktbuf *pb);
void pktbuf_write_bind_complete(struct pktbuf *pb);
void pktbuf_write_close_complete(struct pktbuf *pb);
void pktbuf_write_no_data(struct pktbuf *pb);
void pktbuf_write_parameter_description(struct pktbuf *pb, const uint32_t *oids, size_t n);
void pktbuf_write_portal_suspended(struct pktbuf *pb);
/* CopyInResponse ('G'), CopyOutResponse ('H'), CopyBothResponse ('W'). */
void pktbuf_write_copy_response(struct pktbuf *pb, char type, uint8_t format,
				const int16_t *col_formats, size_t n);
void pktbuf_write_copy_data(struct pktbuf *pb, const void *data, size_t len);
void pktbuf_write_copy_done(struct pktbuf *pb);
void pktbuf_write_copy_fail(struct pktbuf *pb, const char *msg);
/* NegotiateProtocolVersion: newest <minor> supported and the unrecognised options. */
void pktbuf_write_negotiate_protocol(struct pktbuf *pb, uint32_t minor,
				     const char *const *options, size_t n);
void pktbuf_write_notification(struct pktbuf *pb, uint32_t pid, const char *channel,
			       const char *payload);

/* ---- to servers ---- */

/* StartupMessage v3.0 with <n> name/value pairs. */
void pktbuf_write_startup(struct pktbuf *pb, const struct proto_param *params, size_t n);
void pktbuf_write_password(struct pktbuf *pb, const char *password);
/* SASLInitialResponse; <data> NULL sends length -1 (no initial response). */
void pktbuf_write_sasl_initial(struct pktbuf *pb, const char *mech, const void *data,
			       size_t len);
void pktbuf_write_sasl_response(struct pktbuf *pb, const void *data, size_t len);
void pktbuf_write_query(struct pktbuf *pb, const char *sql);
void pktbuf_write_parse(struct pktbuf *pb, const char *name, const char *sql,
			const uint32_t *oids, size_t noids);
void pktbuf_write_bind(struct pktbuf *pb, const struct proto_bind_spec *b);
/* Describe / Close: <kind> 'S' (statement) or 'P' (portal). */
void pktbuf_write_describe(struct pktbuf *pb, char kind, const char *name);
void pktbuf_write_execute(struct pktbuf *pb, const char *portal, uint32_t max_rows);
void pktbuf_write_close(struct pktbuf *pb, char kind, const char *name);
void pktbuf_write_sync(struct pktbuf *pb);
void pktbuf_write_flush(struct pktbuf *pb);
void pktbuf_write_terminate(struct pktbuf *pb);
void pktbuf_write_cancel_request(struct pktbuf *pb, uint32_t pid, uint32_t key);
void pktbuf_write_ssl_request(struct pktbuf *pb);
/* The one-byte answer to SSLRequest / GSSENCRequest: 'S' (go ahead) or 'N' (refused). */
void pktbuf_write_ssl_answer(struct pktbuf *pb, char answer);

#endif /* NEKI_PKTBUF_H */
