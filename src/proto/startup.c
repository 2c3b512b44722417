/*
 * startup.c - startup-phase packets and the `options` startup parameter.
 *
 * proto_startup_parse() classifies a packet (StartupMessage, SSLRequest,
 * GSSENCRequest, CancelRequest) and validates a StartupMessage as Postgres'
 * ProcessStartupPacket does: supported major version, parameter layout with a
 * final terminator, a user name, the `replication` value. Protocol 3.x with x > 0
 * and `_pq_.` options are accepted and answered with NegotiateProtocolVersion
 * (neki speaks 3.0). proto_options_parse() implements pgbouncer's subset of the
 * `options` parameter. What to do with each parameter is the session's business.
 */
#include "neki/base.h"

#include "neki/byteorder.h"
#include "neki/proto.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Newest minor version of protocol 3 that neki speaks. */
#define STARTUP_LATEST_MINOR 0

/*
 * Postgres' parse_bool: case-insensitive unique prefixes of true/false/yes/no,
 * "on", "of[f]", "1", "0". Stores the value in <out>.
 */
static bool
startup_parse_bool(const char *s, bool *out)
{
	size_t n = strlen(s);

	if (n == 0)
		return false;
	if (strncasecmp(s, "true", n) == 0 || strncasecmp(s, "yes", n) == 0) {
		*out = true;
		return true;
	}
	if (strncasecmp(s, "false", n) == 0 || strncasecmp(s, "no", n) == 0) {
		*out = false;
		return true;
	}
	if (n >= 2 && strncasecmp(s, "on", n) == 0) {
		*out = true;
		return true;
	}
	if (n >= 2 && strncasecmp(s, "off", n) == 0) {
		*out = false;
		return true;
	}
	if (strcmp(s, "1") == 0 || strcmp(s, "0") == 0) {
		*out = s[0] == '1';
		return true;
	}
	return false;
}

/* The `replication` parameter: "database" or a boolean. */
static bool
startup_set_replication(struct proto_startup *st, const char *value, struct nk_error *err)
{
	bool b;

	if (strcmp(value, "database") == 0) {
		st->replication = PROTO_REPL_LOGICAL;
		return true;
	}
	if (!startup_parse_bool(value, &b)) {
		nk_error_set(err, ERRCODE_INVALID_PARAMETER_VALUE,
			     "invalid value for parameter \"%s\": \"%s\"",
			     "replication", value);
		nk_error_hint(err, "Valid values are: \"false\", 0, \"true\", 1, \"database\".");
		return false;
	}
	st->replication = b ? PROTO_REPL_PHYSICAL : PROTO_REPL_NONE;
	return true;
}

const char *
proto_pair_next(const uint8_t *buf, size_t len, size_t *pos, const char **value)
{
	const char *name = (const char *)buf + *pos;

	if (*pos >= len)
		return NULL;
	*value = name + strlen(name) + 1;
	*pos += strlen(name) + strlen(*value) + 2;
	return name;
}

/* Iterate the name/value pairs of a parsed StartupMessage. */
bool
proto_startup_next_param(const struct proto_startup *st, size_t *pos, struct proto_param *out)
{
	const char *base = (const char *)st->params;
	size_t at = *pos;

	/* the layout was validated by proto_startup_parse(): strings are terminated */
	if (st->params == NULL || at >= st->params_len || base[at] == '\0')
		return false;
	out->name = base + at;
	at += strlen(out->name) + 1;
	out->value = base + at;
	at += strlen(out->value) + 1;
	*pos = at;
	return true;
}

/* Note one parameter in <st>; false on a bad `replication` value. */
static bool
startup_note_param(struct proto_startup *st, const char *name, const char *value,
		   struct nk_error *err)
{
	st->nparams++;
	if (strcmp(name, "user") == 0)
		st->user = value;
	else if (strcmp(name, "database") == 0)
		st->database = value;
	else if (strcmp(name, "options") == 0)
		st->options = value;
	else if (strcmp(name, "application_name") == 0)
		st->application_name = value;
	else if (strcmp(name, "replication") == 0)
		return startup_set_replication(st, value, err);
	else if (strncmp(name, "_pq_.", 5) == 0)
		st->npq_options++;
	return true;
}

/* Validate the name/value list of a StartupMessage and pick out the known names. */
static bool
startup_parse_params(struct proto_startup *st, struct nk_error *err)
{
	const char *base = (const char *)st->params;
	size_t len = st->params_len, at = 0;

	while (at < len && base[at] != '\0') {
		const char *name = base + at, *value, *nul;

		nul = memchr(name, '\0', len - at);
		if (!nul || (size_t)(nul - base) + 1 >= len)
			break;
		value = nul + 1;
		nul = memchr(value, '\0', len - (size_t)(value - base));
		if (!nul)
			break;
		if (!startup_note_param(st, name, value, err))
			return false;
		at = (size_t)(nul - base) + 1;
	}
	/* at the last byte, and that byte the terminator (a last "x" is no name: it has no NUL) */
	if (len == 0 || at != len - 1 || base[at] != '\0')
		return nk_error_set(err, PROTO_SQLSTATE_VIOLATION,
		"invalid startup packet layout: expected terminator as last byte");
	return true;
}

/* Postgres' answer to a startup packet of a version it does not speak. */
static bool
startup_unsupported(const struct proto_startup *st, struct nk_error *err)
{
	return nk_error_set(err, ERRCODE_FEATURE_NOT_SUPPORTED,
			    "unsupported frontend protocol %u.%u: server supports 3.0 to 3.%u",
			    st->major, st->minor, STARTUP_LATEST_MINOR);
}

/* proto_startup_refuse_repeat: see proto.h. */
bool
proto_startup_refuse_repeat(const struct proto_startup *st, struct nk_error *err)
{
	return startup_unsupported(st, err);
}

/* proto_startup_bad_length: see proto.h. */
bool
proto_startup_bad_length(struct nk_error *err)
{
	return nk_error_set(err, PROTO_SQLSTATE_VIOLATION, "invalid length of startup packet");
}

/* A StartupMessage: version check, then parameters. */
static bool
startup_parse_message(struct proto_startup *st, const uint8_t *rest, size_t rest_len,
		      struct nk_error *err)
{
	if (st->major != 3)
		return startup_unsupported(st, err);
	st->params = rest;
	st->params_len = rest_len;
	if (!startup_parse_params(st, err))
		return false;
	if (st->user == NULL || st->user[0] == '\0')
		return nk_error_set(err, ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION,
				    "no PostgreSQL user name specified in startup packet");
	if (st->database == NULL || st->database[0] == '\0')
		st->database = st->user;
	return true;
}

/* Classify a startup-phase packet and validate a StartupMessage. */
bool
proto_startup_parse(const uint8_t *body, size_t len, struct proto_startup *st,
		    struct nk_error *err)
{
	memset(st, 0, sizeof(*st));
	if (len < 4 || len > PROTO_MAX_STARTUP_LEN)
		return proto_startup_bad_length(err);
	st->version = nk_get_be32(body);
	st->major = (uint16_t)(st->version >> 16);
	st->minor = (uint16_t)(st->version & 0xffff);
	switch (st->version) {
	case PROTO_CANCEL_CODE:
		st->kind = PROTO_STARTUP_CANCEL;
		if (len != 12)
			return nk_error_set(err, PROTO_SQLSTATE_VIOLATION,
					    "invalid length of query cancel packet");
		st->cancel_pid = nk_get_be32(body + 4);
		st->cancel_key = nk_get_be32(body + 8);
		return true;
	case PROTO_SSL_CODE:
		st->kind = PROTO_STARTUP_SSL;
		return true;
	case PROTO_GSSENC_CODE:
		st->kind = PROTO_STARTUP_GSSENC;
		return true;
	default:
		st->kind = PROTO_STARTUP_MESSAGE;
		return startup_parse_message(st, body + 4, len - 4, err);
	}
}

/* Minor version above 3.0 or `_pq_.` options present. */
bool
proto_startup_needs_negotiation(const struct proto_startup *st)
{
	return st->kind == PROTO_STARTUP_MESSAGE &&
	       (st->minor > STARTUP_LATEST_MINOR || st->npq_options > 0);
}

/* NegotiateProtocolVersion naming every `_pq_.` option of <st>. */
void
proto_startup_write_negotiation(struct pktbuf *pb, const struct proto_startup *st)
{
	const char **names = NULL;
	struct proto_param p;
	size_t pos = 0, n = 0;

	if (st->npq_options > 0) {
		names = calloc(st->npq_options, sizeof(*names));
		if (!names) {
			pb->failed = true;
			return;
		}
	}
	while (proto_startup_next_param(st, &pos, &p))
		if (strncmp(p.name, "_pq_.", 5) == 0 && n < st->npq_options)
			names[n++] = p.name;
	/* the newest version for the major one asked, as a whole number (3.0 = 196608), as
	 * Postgres and pgbouncer send it and libpq reads it */
	pktbuf_write_negotiate_protocol(pb, (3u << 16) | STARTUP_LATEST_MINOR, names, n);
	free(names);
}

/* ---- options ---- */

static const char *
skip_ws(const char *p)
{
	while (*p && isspace((unsigned char)*p))
		p++;
	return p;
}

/*
 * Copy the token at *<pos> into <out> without its backslash escapes, up to the
 * first unescaped white space; advance *<pos> past it.
 */
static void
options_read_token(const char **pos, char *out)
{
	const char *p = *pos;

	while (*p && !isspace((unsigned char)*p)) {
		if (*p == '\\') {
			p++;
			if (*p == '\0')
				break;
		}
		*out++ = *p++;
	}
	*out = '\0';
	*pos = p;
}

/* One `-c name=value` / `--name=value` item at *<pos>; false with <err> on a bad form. */
static bool
options_next(const char **pos, char *scratch, const char **name, const char **value,
	     struct nk_error *err)
{
	const char *p = skip_ws(*pos);
	char *eq;

	if (strncmp(p, "-c", 2) == 0)
		p = skip_ws(p + 2);
	else if (strncmp(p, "--", 2) == 0)
		p += 2;
	else
		goto bad;
	options_read_token(&p, scratch);
	eq = strchr(scratch, '=');
	if (!eq)
		goto bad;
	*eq = '\0';
	*name = scratch;
	*value = eq + 1;
	*pos = p;
	return true;
bad:
	return nk_error_set(err, PROTO_SQLSTATE_VIOLATION,
			    "unsupported options startup parameter: only '-c config=val' and "
			    "'--config=val' are allowed");
}

/* pgbouncer's set_startup_options() grammar; calls <cb> per item. */
bool
proto_options_parse(const char *options, proto_option_cb cb, void *arg, struct nk_error *err)
{
	const char *pos = options;
	char *scratch;
	bool ok = true;

	/* an unescaped token is never longer than the input */
	scratch = malloc(strlen(options) + 1);
	if (!scratch)
		return nk_error_oom(err);
	/* like pgbouncer, trailing white space counts as a (bad) further item */
	while (ok && *pos) {
		const char *name = NULL, *value = NULL;

		ok = options_next(&pos, scratch, &name, &value, err) && cb(arg, name, value, err);
	}
	free(scratch);
	return ok;
}

/* pgbouncer's error for an options item the session cannot track. */
bool
proto_options_unsupported(struct nk_error *err, const char *name)
{
	return nk_error_set(err, PROTO_SQLSTATE_VIOLATION,
			    "unsupported startup parameter in options: %s", name);
}
