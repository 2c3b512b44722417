/*
 * relay_fmt.h - private to relay.c: the result formats a driver's Bind asked for, applied
 * to the admin's text reply (relay_fmt.c).
 */
#ifndef NEKI_ADMIN_RELAY_FMT_H
#define NEKI_ADMIN_RELAY_FMT_H

#include "neki/base.h"

#define RELAY_FMT_MAX 32

struct pktbuf;

struct relay_fmt {
	int16_t req[RELAY_FMT_MAX];	/* the Bind's result format codes */
	size_t nreq;
	uint32_t oids[RELAY_FMT_MAX];	/* the reply's column types */
	size_t ncols;
	bool any_binary;		/* some column goes in binary: DataRows are rewritten */
	bool unsupported;		/* a binary column of a type not converted */
};

void relay_fmt_init(struct relay_fmt *f, const int16_t *formats, size_t n);
/* The admin's RowDescription <body> with the asked formats into <out>; false when a binary
 * column cannot be converted (or the message is malformed). */
bool relay_fmt_row_desc(struct relay_fmt *f, const uint8_t *body, size_t len,
			struct pktbuf *out);
/* A DataRow <body> with the binary columns converted into <out>; false when malformed. */
bool relay_fmt_data_row(const struct relay_fmt *f, const uint8_t *body, size_t len,
			struct pktbuf *out);

#endif /* NEKI_ADMIN_RELAY_FMT_H */
