/*
 * fuzz_proto.c - libFuzzer target for the protocol decoder (src/proto).
 *
 * The first input byte picks a decoder; the rest is its input: framing (typed and
 * startup phase), every client and server message parser, startup packets and
 * the `options` parameter, the SCRAM server (client-first and client-final), the
 * SCRAM client (server-first), userlist.txt and hba text. Every parser must
 * refuse garbage without crashing, leaking or reading out of bounds.
 * Build and run: test/fuzz/run-fuzz-proto [seconds].
 */
#include "neki/base.h"

#include <stdlib.h>
#include <string.h>

#include "neki/auth.h"
#include "neki/pktbuf.h"
#include "neki/proto.h"
#include "neki/scram.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool
ignore_option(void *arg, const char *name, const char *value, struct nk_error *err)
{
	(void)arg;
	(void)value;
	return name[0] != 'x' || proto_options_unsupported(err, name);
}

/* Client and server message parsers on <d>. */
static void
fuzz_messages(const uint8_t *d, size_t n)
{
	struct nk_error err;
	struct proto_parse_msg pm;
	struct proto_bind_msg bm;
	struct proto_target_msg tm;
	struct proto_execute_msg em;
	struct proto_sasl_initial_msg sm;
	struct proto_auth_msg am;
	struct proto_server_error se;
	struct proto_rowdesc_msg rd;
	struct proto_datarow_msg dr;
	struct proto_param pp;
	struct proto_value vals[8];
	struct proto_column cols[8];
	const char *s;
	uint32_t a, b;
	char c;

	if (proto_parse_query(d, n, &s, &err))
		(void)strlen(s);
	if (proto_parse_parse(d, n, &pm, &err) && pm.nparams > 0)
		(void)proto_parse_param_oid(&pm, pm.nparams - 1u);
	if (proto_parse_bind(d, n, &bm, &err)) {
		(void)proto_bind_params(&bm, vals, 8);
		(void)proto_bind_param_format(&bm, 3);
		(void)proto_bind_result_format(&bm, 3);
	}
	(void)proto_parse_describe(d, n, &tm, &err);
	(void)proto_parse_close(d, n, &tm, &err);
	(void)proto_parse_execute(d, n, &em, &err);
	(void)proto_parse_copy_fail(d, n, &s, &err);
	(void)proto_parse_password(d, n, &s, &err);
	(void)proto_parse_sasl_initial(d, n, &sm, &err);
	if (proto_parse_auth(d, n, &am, &err))
		(void)proto_auth_sasl_has(&am, SCRAM_MECHANISM);
	if (proto_parse_server_error(d, n, &se, &err))
		proto_server_error_to_nk(&se, &err);
	if (proto_parse_row_description(d, n, &rd, &err))
		(void)proto_rowdesc_columns(&rd, cols, 8);
	if (proto_parse_data_row(d, n, &dr, &err))
		(void)proto_datarow_values(&dr, vals, 8);
	(void)proto_parse_parameter_status(d, n, &pp, &err);
	(void)proto_parse_backend_key(d, n, &a, &b, &err);
	(void)proto_parse_ready_for_query(d, n, &c, &err);
	(void)proto_parse_command_complete(d, n, &s, &err);
}

/* Framing and startup packets on <d>. */
static void
fuzz_stream(const uint8_t *d, size_t n)
{
	struct nk_error err;
	struct proto_frame f;
	struct proto_startup st;
	struct pktbuf pb;
	size_t off = 0, pos = 0;
	struct proto_param p;

	while (off < n && proto_frame_next(d + off, n - off, false, 8192, &f, &err) ==
	       PROTO_FRAME_OK) {
		fuzz_messages(f.body, f.body_len);
		off += f.total;
	}
	if (proto_frame_next(d, n, true, 0, &f, &err) == PROTO_FRAME_OK &&
	    proto_startup_parse(f.body, f.body_len, &st, &err) &&
	    st.kind == PROTO_STARTUP_MESSAGE) {
		while (proto_startup_next_param(&st, &pos, &p))
			(void)strlen(p.value);
		pktbuf_init(&pb, 0);
		if (proto_startup_needs_negotiation(&st))
			proto_startup_write_negotiation(&pb, &st);
		if (st.options)
			(void)proto_options_parse(st.options, ignore_option, NULL, &err);
		pktbuf_cleanup(&pb);
	}
}

/* True when server-first <d> asks for few enough PBKDF2 iterations to fuzz quickly. */
static bool
cheap_iterations(const uint8_t *d, size_t n)
{
	for (size_t i = 0; i + 2 < n; i++) {
		if (d[i] == 'i' && d[i + 1] == '=') {
			size_t k = i + 2;

			while (k < n && d[k] >= '0' && d[k] <= '9')
				k++;
			if (k - (i + 2) > 2)
				return false;
		}
	}
	return true;
}

/* SCRAM exchanges fed with <d> split at the first NUL. */
static void
fuzz_scram(const uint8_t *d, size_t n)
{
	/* "pencil", 1 iteration: keeps the server side fast */
	static const char secret[] = "SCRAM-SHA-256$1:c2FsdA==$"
		"Otk5kdnAo/6UDUcm0KaO+uESed84FVLF7Qg4N9v1MRA=:"
		"Uc4DDcQRN5WJ44eNiyKPEO+MJvVo84Ucr4WI9nixz60=";
	struct nk_error err;
	struct scram_server s;
	struct scram_client c;
	const uint8_t *nul = memchr(d, 0, n);
	size_t n1 = nul ? (size_t)(nul - d) : n;

	scram_server_init(&s, "u", secret);
	if (scram_server_client_first(&s, d, n1, &err) && nul)
		(void)scram_server_client_final(&s, nul + 1, n - n1 - 1, &err);
	scram_server_cleanup(&s);
	if (!cheap_iterations(d, n1))
		return;
	if (scram_client_init_password(&c, "pencil", "", "fixednonce")) {
		if (scram_client_server_first(&c, d, n1, &err) && nul)
			(void)scram_client_server_final(&c, nul + 1, n - n1 - 1, &err);
	}
	scram_client_cleanup(&c);
}

/* Text formats: userlist.txt, hba, the options parameter, stored secrets. */
static void
fuzz_text(const uint8_t *d, size_t n)
{
	char *t = malloc(n + 1);
	struct auth_file *af;
	struct hba *h;
	struct scram_secret sec;
	struct nk_error err;
	char *prep;

	if (!t)
		return;
	memcpy(t, d, n);
	t[n] = '\0';
	af = auth_file_parse(t, n);
	auth_file_free(af);
	h = hba_parse(t, "/nonexistent", NULL, NULL);
	hba_free(h);
	ident_map_free(ident_map_parse(t, NULL, NULL));
	(void)proto_options_parse(t, ignore_option, NULL, &err);
	(void)scram_secret_parse(t, &sec);
	if (scram_saslprep(t, &prep) == SCRAM_SASLPREP_OK)
		free(prep);
	free(t);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	switch (data[0] % 4) {
	case 0:
		fuzz_messages(data + 1, size - 1);
		break;
	case 1:
		fuzz_stream(data + 1, size - 1);
		break;
	case 2:
		fuzz_scram(data + 1, size - 1);
		break;
	default:
		fuzz_text(data + 1, size - 1);
		break;
	}
	return 0;
}
