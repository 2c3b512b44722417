/*
 * neki/proto.h - reading the v3 wire protocol from byte arrays.
 *
 * - struct proto_reader: a bounds-checked cursor over one message body with a
 *   sticky error and an end-of-message check (Postgres' pq_getmsg* family).
 * - proto_frame_next(): splits a byte stream into messages (typed, or the
 *   startup-phase packets without a type byte) and validates their length.
 * - proto_startup_parse(): StartupMessage / SSLRequest / GSSENCRequest /
 *   CancelRequest, protocol versions and `_pq_.` options; proto_options_parse()
 *   for the `options` parameter (pgbouncer's `-c name=value` subset).
 * - parsers for the client messages and the server messages neki interprets.
 * Every malformed input yields false and an nk_error with SQLSTATE 08P01 and a
 * Postgres-like message. All returned pointers borrow from the input bytes.
 * Pure: no sockets, no event loop.
 */
#ifndef NEKI_PROTO_H
#define NEKI_PROTO_H

#include "neki/base.h"

#include "neki/error.h"
#include "neki/pktbuf.h"
#include "neki/proto_types.h"

/* SQLSTATE of every malformed-message error. */
#define PROTO_SQLSTATE_VIOLATION "08P01"

/* ---- reader ---- */

enum proto_read_fault {
	PROTO_READ_OK = 0,
	PROTO_READ_SHORT = 1,		/* "insufficient data left in message" */
	PROTO_READ_BAD_STRING = 2,	/* "invalid string in message" */
	PROTO_READ_TRAILING = 3,	/* "invalid message format" (bytes left over) */
};

struct proto_reader {
	char type;			/* message type byte, 0 for startup packets */
	const uint8_t *p;		/* borrowed: the body (after the length) */
	size_t len;			/* body length */
	size_t pos;			/* read offset */
	enum proto_read_fault fault;	/* sticky: first fault seen */
};

void proto_reader_init(struct proto_reader *r, char type, const uint8_t *body, size_t len);
/* Getters return 0 / "" / NULL after a fault; check with proto_reader_ok(). */
uint8_t proto_get_byte(struct proto_reader *r);
int16_t proto_get_int16(struct proto_reader *r);
uint16_t proto_get_uint16(struct proto_reader *r);
int32_t proto_get_int32(struct proto_reader *r);
uint64_t proto_get_uint64(struct proto_reader *r);
/* A NUL-terminated string inside the body (pointer into it). */
const char *proto_get_string(struct proto_reader *r);
/* <n> raw bytes (pointer into the body), NULL on fault. */
const uint8_t *proto_get_bytes(struct proto_reader *r, size_t n);
/* Bytes not read yet. */
size_t proto_reader_left(const struct proto_reader *r);
static inline bool
proto_reader_ok(const struct proto_reader *r)
{
	return r->fault == PROTO_READ_OK;
}
/*
 * Finish a message: false (with <err> filled, 08P01) on an earlier fault or when
 * bytes are left over. True when the whole body was consumed cleanly.
 */
NK_MUSTCHECK bool proto_reader_end(struct proto_reader *r, struct nk_error *err);
/* Fill <err> from the reader's fault (08P01); returns false. */
bool proto_reader_error(const struct proto_reader *r, struct nk_error *err);

/* ---- framing ---- */

enum proto_frame_result {
	PROTO_FRAME_OK = 0,		/* a whole message is in the buffer */
	PROTO_FRAME_PARTIAL = 1,	/* need more bytes; header fields set if known */
	PROTO_FRAME_BAD = 2,		/* invalid length: <err> set, end the connection */
};

struct proto_frame {
	char type;		/* type byte; 0 for startup-phase packets */
	bool have_header;	/* type and len are known (even when PARTIAL) */
	uint32_t len;		/* the length field (counts itself, not the type byte) */
	size_t total;		/* bytes the message occupies in the stream */
	const uint8_t *body;	/* borrowed: after the length field; only when OK */
	size_t body_len;	/* len - 4 */
};

/*
 * Look at the next message in <buf> (<avail> bytes). <startup> selects the
 * startup-phase layout (no type byte, 8 <= len <= PROTO_MAX_STARTUP_LEN + 4); otherwise
 * 4 <= len <= <max_len> ("invalid message length" / "invalid length of startup
 * packet" otherwise). On PARTIAL with have_header the caller may stream the
 * message instead of buffering it (COPY data bigger than the buffer).
 */
enum proto_frame_result proto_frame_next(const uint8_t *buf, size_t avail, bool startup,
					 uint32_t max_len, struct proto_frame *f,
					 struct nk_error *err);

/*
 * True when <type> is a message a client may send after startup (Q P B E D C H S
 * X d c f F p). Otherwise fills <err>: "invalid frontend message type %d".
 */
NK_MUSTCHECK bool proto_frontend_type_check(char type, struct nk_error *err);

/* Message names for logs: "Parse", "DataRow", ...; "unknown" for other bytes. */
const char *proto_frontend_msg_name(char type);
const char *proto_backend_msg_name(char type);

/* ---- startup phase (src/proto/startup.c) ---- */

enum proto_startup_kind {
	PROTO_STARTUP_MESSAGE = 0,	/* StartupMessage, major version 3 */
	PROTO_STARTUP_SSL = 1,		/* SSLRequest 80877103 */
	PROTO_STARTUP_GSSENC = 2,	/* GSSENCRequest 80877104 */
	PROTO_STARTUP_CANCEL = 3,	/* CancelRequest 80877102 */
};

enum proto_replication {
	PROTO_REPL_NONE = 0,
	PROTO_REPL_PHYSICAL = 1,	/* replication=true/on/yes/1 */
	PROTO_REPL_LOGICAL = 2,		/* replication=database */
};

struct proto_startup {
	enum proto_startup_kind kind;
	uint32_t version;		/* raw version / request code */
	uint16_t major, minor;		/* of version */
	const uint8_t *params;		/* borrowed: name\0value\0...\0 (MESSAGE only) */
	size_t params_len;		/* bytes at params, final NUL included */
	size_t nparams;			/* name/value pairs */
	size_t npq_options;		/* how many names start with "_pq_." */
	const char *user;		/* borrowed; NULL when absent */
	const char *database;		/* borrowed; defaults to user when absent or empty */
	const char *options;		/* borrowed; NULL when absent */
	const char *application_name;	/* borrowed; NULL when absent */
	enum proto_replication replication;
	uint32_t cancel_pid;		/* CANCEL only */
	uint32_t cancel_key;		/* CANCEL only */
};

/*
 * Parse a startup-phase packet body (after the length: version code + rest).
 * Errors (08P01 unless noted): "invalid length of startup packet", "invalid
 * startup packet layout: expected terminator as last byte", "unsupported frontend
 * protocol %u.%u: server supports 3.0 to 3.0" (0A000), "no PostgreSQL user name
 * specified in startup packet" (28000), invalid replication value (22023).
 */
NK_MUSTCHECK bool proto_startup_parse(const uint8_t *body, size_t len, struct proto_startup *st,
				      struct nk_error *err);
/*
 * A second SSLRequest or GSSENCRequest <st> on one connection (the first was answered):
 * Postgres reads it as a StartupMessage of version 1234.5679 / 1234.5680, so the error is
 * its "unsupported frontend protocol ..." (0A000). Fills <err>, returns false.
 */
bool proto_startup_refuse_repeat(const struct proto_startup *st, struct nk_error *err);
/* "invalid length of startup packet" (08P01) into <err>; returns false. */
bool proto_startup_bad_length(struct nk_error *err);
/* Walk the parameters: start with *<pos> = 0; false at the end. */
bool proto_startup_next_param(const struct proto_startup *st, size_t *pos,
			      struct proto_param *out);
/*
 * The name\0value\0 pair at *<pos> of <buf> (<len> bytes: a session's saved startup
 * parameters or __neki options): its name (and *<value>), *<pos> moved past it; NULL at the
 * end.
 */
const char *proto_pair_next(const uint8_t *buf, size_t len, size_t *pos, const char **value);
/* True when the client must get a NegotiateProtocolVersion (minor > 0 or `_pq_.` options). */
bool proto_startup_needs_negotiation(const struct proto_startup *st);
/* Write the NegotiateProtocolVersion for <st> (newest minor 0, its `_pq_.` names). */
void proto_startup_write_negotiation(struct pktbuf *pb, const struct proto_startup *st);

/* Called for each `name=value` found in `options`; false stops with <err> set. */
typedef bool (*proto_option_cb)(void *arg, const char *name, const char *value,
				struct nk_error *err);
/*
 * Parse the `options` startup parameter as pgbouncer does: a sequence of
 * `-c name=value` / `-cname=value` / `--name=value`, backslash escaping any
 * character (so `\ ` is a space inside a value). Any other form fails with
 * "unsupported options startup parameter: only '-c config=val' and
 * '--config=val' are allowed" (08P01).
 */
NK_MUSTCHECK bool proto_options_parse(const char *options, proto_option_cb cb, void *arg,
				      struct nk_error *err);
/* Error for a name the session does not track ("unsupported startup parameter in options: %s"). */
bool proto_options_unsupported(struct nk_error *err, const char *name);

/* ---- client messages (src/proto/msg.c) ---- */

struct proto_parse_msg {
	const char *name;		/* borrowed, "" = unnamed */
	const char *query;		/* borrowed */
	uint16_t nparams;		/* declared parameter types */
	const uint8_t *oids;		/* borrowed: nparams big-endian uint32 */
};

struct proto_bind_msg {
	const char *portal;		/* borrowed */
	const char *stmt;		/* borrowed */
	uint16_t nformats;		/* parameter format codes */
	const uint8_t *formats;		/* borrowed: nformats int16 */
	uint16_t nparams;
	const uint8_t *params;		/* borrowed: nparams (int32 len, bytes) */
	size_t params_len;		/* bytes at params */
	uint16_t nresult_formats;
	const uint8_t *result_formats;	/* borrowed: nresult_formats int16 */
};

/* Describe ('D') and Close ('C'): kind 'S' or 'P' and a name. */
struct proto_target_msg {
	char kind;
	const char *name;		/* borrowed */
};

struct proto_execute_msg {
	const char *portal;		/* borrowed */
	int32_t max_rows;		/* 0 = no limit */
};

struct proto_sasl_initial_msg {
	const char *mechanism;		/* borrowed */
	const uint8_t *data;		/* borrowed; NULL when the length was -1 */
	size_t len;
};

/* Each parser takes the message body (after type and length). */
NK_MUSTCHECK bool proto_parse_query(const uint8_t *body, size_t len, const char **sql,
				    struct nk_error *err);
NK_MUSTCHECK bool proto_parse_parse(const uint8_t *body, size_t len, struct proto_parse_msg *m,
				    struct nk_error *err);
uint32_t proto_parse_param_oid(const struct proto_parse_msg *m, size_t i);
NK_MUSTCHECK bool proto_parse_bind(const uint8_t *body, size_t len, struct proto_bind_msg *m,
				   struct nk_error *err);
/* Copy up to <max> parameter values into <out>; returns the number copied. */
size_t proto_bind_params(const struct proto_bind_msg *m, struct proto_value *out, size_t max);
/* Format code of parameter / result column <i> (Postgres rules: 0 codes = text, 1 = all). */
int16_t proto_bind_param_format(const struct proto_bind_msg *m, size_t i);
int16_t proto_bind_result_format(const struct proto_bind_msg *m, size_t i);
NK_MUSTCHECK bool proto_parse_describe(const uint8_t *body, size_t len,
				       struct proto_target_msg *m, struct nk_error *err);
NK_MUSTCHECK bool proto_parse_close(const uint8_t *body, size_t len, struct proto_target_msg *m,
				    struct nk_error *err);
NK_MUSTCHECK bool proto_parse_execute(const uint8_t *body, size_t len,
				      struct proto_execute_msg *m, struct nk_error *err);
/* Sync, Flush, Terminate, CopyDone: the body must be empty. */
NK_MUSTCHECK bool proto_parse_empty(char type, size_t len, struct nk_error *err);
NK_MUSTCHECK bool proto_parse_copy_fail(const uint8_t *body, size_t len, const char **msg,
					struct nk_error *err);
/* PasswordMessage: one string (cleartext or "md5..." response). */
NK_MUSTCHECK bool proto_parse_password(const uint8_t *body, size_t len, const char **password,
				       struct nk_error *err);
NK_MUSTCHECK bool proto_parse_sasl_initial(const uint8_t *body, size_t len,
					   struct proto_sasl_initial_msg *m,
					   struct nk_error *err);
/* FunctionCall is refused: fills "function call messages are not supported" (0A000). */
bool proto_function_call_refuse(struct nk_error *err);

/* ---- server messages (src/proto/srvmsg.c) ---- */

struct proto_auth_msg {
	int32_t code;			/* enum proto_auth_code */
	const uint8_t *data;		/* borrowed: bytes after the code */
	size_t len;
};

/* All fields of an ErrorResponse / NoticeResponse; NULL when absent. */
struct proto_server_error {
	const char *severity;		/* S (localised) */
	const char *severity_nl;	/* V */
	const char *sqlstate;		/* C */
	const char *message;		/* M */
	const char *detail;		/* D */
	const char *hint;		/* H */
	const char *position;		/* P */
	const char *internal_position;	/* p */
	const char *internal_query;	/* q */
	const char *where;		/* W */
	const char *schema;		/* s */
	const char *table;		/* t */
	const char *column;		/* c */
	const char *datatype;		/* d */
	const char *constraint;		/* n */
	const char *file;		/* F */
	const char *line;		/* L */
	const char *routine;		/* R */
};

struct proto_rowdesc_msg {
	uint16_t ncols;
	const uint8_t *fields;		/* borrowed: the validated field records */
	size_t fields_len;
};

struct proto_datarow_msg {
	uint16_t ncols;
	const uint8_t *values;		/* borrowed: ncols (int32 len, bytes) */
	size_t values_len;
};

NK_MUSTCHECK bool proto_parse_auth(const uint8_t *body, size_t len, struct proto_auth_msg *m,
				   struct nk_error *err);
/* True when an AuthenticationSASL message lists mechanism <mech>. */
bool proto_auth_sasl_has(const struct proto_auth_msg *m, const char *mech);
NK_MUSTCHECK bool proto_parse_parameter_status(const uint8_t *body, size_t len,
					       struct proto_param *out, struct nk_error *err);
NK_MUSTCHECK bool proto_parse_backend_key(const uint8_t *body, size_t len, uint32_t *pid,
					  uint32_t *key, struct nk_error *err);
/* NotificationResponse: sender pid, channel and payload (strings borrowed from <body>). */
NK_MUSTCHECK bool proto_parse_notification(const uint8_t *body, size_t len, uint32_t *pid,
					   const char **channel, const char **payload,
					   struct nk_error *err);
NK_MUSTCHECK bool proto_parse_ready_for_query(const uint8_t *body, size_t len, char *status,
					      struct nk_error *err);
NK_MUSTCHECK bool proto_parse_server_error(const uint8_t *body, size_t len,
					   struct proto_server_error *e, struct nk_error *err);
/* Copy a parsed server error into an nk_error (severity mapped, message/detail/hint/where). */
void proto_server_error_to_nk(const struct proto_server_error *e, struct nk_error *out);
NK_MUSTCHECK bool proto_parse_row_description(const uint8_t *body, size_t len,
					      struct proto_rowdesc_msg *m, struct nk_error *err);
/* Decode up to <max> columns into <out> (names borrowed); returns the number decoded. */
size_t proto_rowdesc_columns(const struct proto_rowdesc_msg *m, struct proto_column *out,
			     size_t max);
NK_MUSTCHECK bool proto_parse_data_row(const uint8_t *body, size_t len,
				       struct proto_datarow_msg *m, struct nk_error *err);
size_t proto_datarow_values(const struct proto_datarow_msg *m, struct proto_value *out,
			    size_t max);
NK_MUSTCHECK bool proto_parse_command_complete(const uint8_t *body, size_t len,
					       const char **tag, struct nk_error *err);

#endif /* NEKI_PROTO_H */
