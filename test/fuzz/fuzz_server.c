/*
 * fuzz_server.c - a server's replies as a link reads them (src/proto/srvmsg.c and the
 * backend login of src/proto/login.c): the input's first byte picks the credentials (a
 * plain password, an md5 secret, a SCRAM secret, none), the rest is the stream of typed
 * backend messages of one connection. Authentication requests go through the login
 * exchange until AuthenticationOk; every other message to its parser. A RowDescription,
 * DataRow, ParameterStatus, CommandComplete or BackendKeyData that parsed, written back
 * with pktbuf, must give the same bytes.
 */
#include "fuzz.h"

#include "neki/login.h"
#include "neki/pktbuf.h"
#include "neki/proto.h"

#define FZ_MAX_PACKET (1u << 20)
#define FZ_COLS 64

/* <pb>'s first message is <type> with body <body>/<len>. */
static void
same_message(const struct pktbuf *pb, char type, const uint8_t *body, size_t len)
{
	FZ_CHECK(!pb->failed && pb->len == len + 5 && pb->buf[0] == (uint8_t)type);
	FZ_CHECK(memcmp(pb->buf + 5, body, len) == 0);
}

static void
row_description(const uint8_t *body, size_t len, struct pktbuf *pb)
{
	struct proto_rowdesc_msg rd;
	struct proto_column cols[FZ_COLS];
	struct nk_error err;
	size_t n;

	if (!proto_parse_row_description(body, len, &rd, &err))
		return;
	n = proto_rowdesc_columns(&rd, cols, FZ_COLS);
	FZ_CHECK(n == (rd.ncols < FZ_COLS ? rd.ncols : FZ_COLS));
	if (rd.ncols > FZ_COLS)
		return;
	pktbuf_write_row_description(pb, cols, n);
	same_message(pb, 'T', body, len);
}

static void
data_row(const uint8_t *body, size_t len, struct pktbuf *pb)
{
	struct proto_datarow_msg dr;
	struct proto_value vals[FZ_COLS];
	struct nk_error err;
	size_t n;

	if (!proto_parse_data_row(body, len, &dr, &err))
		return;
	n = proto_datarow_values(&dr, vals, FZ_COLS);
	for (size_t i = 0; i < n; i++)
		FZ_CHECK(!vals[i].p ||
			 (vals[i].p >= body && vals[i].p + vals[i].len <= body + len));
	if (dr.ncols > FZ_COLS)
		return;
	pktbuf_write_data_row(pb, vals, n);
	same_message(pb, 'D', body, len);
}

/* Every message but authentication requests. */
static void
server_message(char type, const uint8_t *body, size_t len)
{
	struct nk_error err;
	struct proto_server_error se;
	struct proto_param pp;
	struct pktbuf pb;
	const char *s;
	uint32_t a, b;
	char c;

	pktbuf_init(&pb, 64);
	switch (type) {
	case 'E':
	case 'N':
		if (proto_parse_server_error(body, len, &se, &err))
			proto_server_error_to_nk(&se, &err);
		break;
	case 'T':
		row_description(body, len, &pb);
		break;
	case 'D':
		data_row(body, len, &pb);
		break;
	case 'S':
		if (proto_parse_parameter_status(body, len, &pp, &err)) {
			pktbuf_write_parameter_status(&pb, pp.name, pp.value);
			same_message(&pb, 'S', body, len);
		}
		break;
	case 'K':
		if (proto_parse_backend_key(body, len, &a, &b, &err)) {
			pktbuf_write_backend_key_data(&pb, a, b);
			same_message(&pb, 'K', body, len);
		}
		break;
	case 'C':
		if (proto_parse_command_complete(body, len, &s, &err)) {
			pktbuf_write_command_complete(&pb, s);
			same_message(&pb, 'C', body, len);
		}
		break;
	case 'Z':
		fz_ignore(proto_parse_ready_for_query(body, len, &c, &err));
		break;
	case 'A':
		fz_ignore(proto_parse_notification(body, len, &a, &s, &s, &err));
		break;
	default:
		break;
	}
	pktbuf_cleanup(&pb);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* "pencil" as a plain password, its md5 secret for user u, its SCRAM secret */
	static const char *const secrets[] = {
		"pencil", "md5ed89b5022f7767bef4ba6874e3000c1a",
		"SCRAM-SHA-256$1:c2FsdA==$Otk5kdnAo/6UDUcm0KaO+uESed84FVLF7Qg4N9v1MRA=:"
		"Uc4DDcQRN5WJ44eNiyKPEO+MJvVo84Ucr4WI9nixz60=", NULL,
	};
	struct nk_error err;
	struct proto_frame f;
	struct login l;
	struct pktbuf out;
	size_t off = 1;
	bool auth = true;

	if (size < 1)
		return 0;
	login_init(&l, "u", secrets[data[0] % 4], NULL);
	pktbuf_init(&out, 0);
	while (off < size && proto_frame_next(data + off, size - off, false, FZ_MAX_PACKET, &f,
					      &err) == PROTO_FRAME_OK) {
		off += f.total;
		if (f.type != 'R') {
			server_message(f.type, f.body, f.body_len);
			continue;
		}
		if (!auth || !fz_cheap_iterations(f.body, f.body_len))
			continue;
		pktbuf_reset(&out);
		auth = login_on_auth(&l, f.body, f.body_len, &out, &err) && !login_is_done(&l);
		FZ_CHECK(!out.failed);
	}
	pktbuf_cleanup(&out);
	login_cleanup(&l);
	return 0;
}
