/*
 * fuzz_client.c - the client protocol as a worker reads it (src/proto): the input is the
 * byte stream of one client connection. Startup-phase packets first (SSLRequest and
 * GSSENCRequest answered once each, as the session does, CancelRequest, StartupMessage with
 * its parameters, the `options` parameter and protocol negotiation), then every typed
 * message in sequence, framed as the session frames them and handed to its parser. Every
 * parser must refuse garbage without reading out of bounds; a parsed Query, Parse,
 * Describe, Close or Execute written back with pktbuf must give the same bytes.
 */
#include "fuzz.h"

#include "neki/pktbuf.h"
#include "neki/proto.h"

#define FZ_MAX_PACKET (1u << 20)

static bool
note_option(void *arg, const char *name, const char *value, struct nk_error *err)
{
	(void)arg;
	(void)value;
	return name[0] != 'x' || proto_options_unsupported(err, name);
}

/* <pb>'s message (type byte, length) is <type> with body <body>/<len>. */
static void
same_message(const struct pktbuf *pb, char type, const uint8_t *body, size_t len)
{
	FZ_CHECK(!pb->failed && pb->len == len + 5 && pb->buf[0] == (uint8_t)type);
	FZ_CHECK(memcmp(pb->buf + 5, body, len) == 0);
}

/* Messages the session reads once logged in (and 'p' during authentication). */
static void
client_message(char type, const uint8_t *body, size_t len)
{
	struct nk_error err;
	struct proto_parse_msg pm;
	struct proto_bind_msg bm;
	struct proto_target_msg tm;
	struct proto_execute_msg em;
	struct proto_sasl_initial_msg sm;
	struct proto_value vals[8];
	struct pktbuf pb;
	const char *s;

	if (!proto_frontend_type_check(type, &err))
		return;
	pktbuf_init(&pb, 64);
	switch (type) {
	case 'Q':
		if (proto_parse_query(body, len, &s, &err)) {
			pktbuf_write_query(&pb, s);
			same_message(&pb, 'Q', body, len);
		}
		break;
	case 'P':
		if (proto_parse_parse(body, len, &pm, &err) && pm.nparams > 0)
			(void)proto_parse_param_oid(&pm, pm.nparams - 1u);
		break;
	case 'B':
		if (proto_parse_bind(body, len, &bm, &err)) {
			FZ_CHECK(proto_bind_params(&bm, vals, 8) <= 8);
			(void)proto_bind_param_format(&bm, bm.nparams);
			(void)proto_bind_result_format(&bm, 3);
		}
		break;
	case 'D':
	case 'C':
		if (type == 'D' ? proto_parse_describe(body, len, &tm, &err) :
		    proto_parse_close(body, len, &tm, &err)) {
			if (type == 'D')
				pktbuf_write_describe(&pb, tm.kind, tm.name);
			else
				pktbuf_write_close(&pb, tm.kind, tm.name);
			same_message(&pb, type, body, len);
		}
		break;
	case 'E':
		if (proto_parse_execute(body, len, &em, &err) && em.max_rows >= 0) {
			pktbuf_write_execute(&pb, em.portal, (uint32_t)em.max_rows);
			same_message(&pb, 'E', body, len);
		}
		break;
	case 'f':
		fz_ignore(proto_parse_copy_fail(body, len, &s, &err));
		break;
	case 'p':
		fz_ignore(proto_parse_password(body, len, &s, &err));
		fz_ignore(proto_parse_sasl_initial(body, len, &sm, &err));
		break;
	case 'F':
		FZ_CHECK(!proto_function_call_refuse(&err));
		break;
	default:	/* S H X c: no body; d: data passed on */
		fz_ignore(proto_parse_empty(type, len, &err));
		break;
	}
	pktbuf_cleanup(&pb);
}

/* A StartupMessage that parsed: its parameters, `options` and the negotiation reply. */
static void
startup_message(const struct proto_startup *st)
{
	struct nk_error err;
	struct proto_param p;
	struct pktbuf pb;
	size_t pos = 0, n = 0;

	while (proto_startup_next_param(st, &pos, &p)) {
		FZ_CHECK(p.name != NULL && p.value != NULL);
		n++;
	}
	FZ_CHECK(n == st->nparams);
	if (st->options)
		fz_ignore(proto_options_parse(st->options, note_option, NULL, &err));
	pktbuf_init(&pb, 0);
	if (proto_startup_needs_negotiation(st))
		proto_startup_write_negotiation(&pb, st);
	FZ_CHECK(!pb.failed);
	pktbuf_cleanup(&pb);
}

/* The startup phase: packets until a StartupMessage (true) or a refusal (false). */
static bool
startup_phase(const uint8_t *d, size_t n, size_t *off)
{
	struct nk_error err;
	struct proto_frame f;
	struct proto_startup st;
	bool ssl = false, gss = false;

	while (proto_frame_next(d + *off, n - *off, true, 0, &f, &err) == PROTO_FRAME_OK) {
		*off += f.total;
		if (!proto_startup_parse(f.body, f.body_len, &st, &err))
			return false;
		if ((st.kind == PROTO_STARTUP_SSL && ssl) ||
		    (st.kind == PROTO_STARTUP_GSSENC && gss)) {
			FZ_CHECK(!proto_startup_refuse_repeat(&st, &err));
			return false;
		}
		ssl = ssl || st.kind == PROTO_STARTUP_SSL;
		gss = gss || st.kind == PROTO_STARTUP_GSSENC;
		if (st.kind == PROTO_STARTUP_CANCEL)
			return false;
		if (st.kind == PROTO_STARTUP_MESSAGE) {
			startup_message(&st);
			return true;
		}
	}
	return false;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct nk_error err;
	struct proto_frame f;
	size_t off = 0;

	/* a leading 'Q'..'z' skips the startup phase (messages of a logged-in client) */
	if (size > 0 && data[0] >= 'A' && data[0] <= 'z')
		off = 0;
	else if (!startup_phase(data, size, &off))
		return 0;
	while (off < size && proto_frame_next(data + off, size - off, false, FZ_MAX_PACKET, &f,
					      &err) == PROTO_FRAME_OK) {
		client_message(f.type, f.body, f.body_len);
		off += f.total;
	}
	return 0;
}
