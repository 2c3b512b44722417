/*
 * neki/proto_types.h - plain types and constants of the v3 wire protocol, shared by
 * the builder (neki/pktbuf.h) and the readers (neki/proto.h). No functions here.
 */
#ifndef NEKI_PROTO_TYPES_H
#define NEKI_PROTO_TYPES_H

#include "neki/base.h"

/* Protocol version codes of startup-phase packets (major << 16 | minor). */
#define PROTO_VERSION(major, minor) (((uint32_t)(major) << 16) | (uint32_t)(minor))
#define PROTO_V3_0 PROTO_VERSION(3, 0)
#define PROTO_CANCEL_CODE PROTO_VERSION(1234, 5678)	/* 80877102 */
#define PROTO_SSL_CODE PROTO_VERSION(1234, 5679)	/* 80877103 */
#define PROTO_GSSENC_CODE PROTO_VERSION(1234, 5680)	/* 80877104 */

/* Longest startup packet Postgres accepts (MAX_STARTUP_PACKET_LENGTH). */
#define PROTO_MAX_STARTUP_LEN 10000

/* Authentication request codes ('R' messages). */
enum proto_auth_code {
	PROTO_AUTH_OK = 0,
	PROTO_AUTH_KERBEROS_V5 = 2,
	PROTO_AUTH_CLEARTEXT = 3,
	PROTO_AUTH_MD5 = 5,
	PROTO_AUTH_GSS = 7,
	PROTO_AUTH_GSS_CONTINUE = 8,
	PROTO_AUTH_SSPI = 9,
	PROTO_AUTH_SASL = 10,
	PROTO_AUTH_SASL_CONTINUE = 11,
	PROTO_AUTH_SASL_FINAL = 12,
};

/* One extra field of an ErrorResponse / NoticeResponse (e.g. 'P' "12"). */
struct proto_err_field {
	char code;		/* field type byte, never 0 */
	const char *value;	/* borrowed, NUL-terminated */
};

/* A startup parameter name/value pair. */
struct proto_param {
	const char *name;	/* borrowed */
	const char *value;	/* borrowed */
};

/* A possibly-NULL value (DataRow column, Bind parameter). */
struct proto_value {
	const uint8_t *p;	/* borrowed; NULL = SQL NULL */
	uint32_t len;		/* bytes at p (0 for NULL) */
};

/* One RowDescription field. */
struct proto_column {
	const char *name;	/* borrowed */
	uint32_t table_oid;	/* 0 when not a table column */
	int16_t attnum;		/* 0 when not a table column */
	uint32_t type_oid;
	int16_t typlen;		/* pg_type.typlen; -1 varlena */
	int32_t typmod;		/* -1 when none */
	int16_t format;		/* 0 text, 1 binary */
};

/* Everything a Bind message carries (for writing one). */
struct proto_bind_spec {
	const char *portal;		/* borrowed, "" = unnamed */
	const char *stmt;		/* borrowed, "" = unnamed */
	const int16_t *param_formats;	/* borrowed, nparam_formats entries */
	size_t nparam_formats;
	const struct proto_value *params; /* borrowed, nparams entries */
	size_t nparams;
	const int16_t *result_formats;	/* borrowed, nresult_formats entries */
	size_t nresult_formats;
};

#endif /* NEKI_PROTO_TYPES_H */
