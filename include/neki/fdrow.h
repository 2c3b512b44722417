/*
 * neki/fdrow.h - one row of SHOW FDS, the online restart's (-R) description of a socket
 * (src/proto/fdrow.c). Pure: no sockets, only the DataRow bytes.
 *
 * pgbouncer's 15 columns, in order: fd(i), task, user, database, addr, port(i), cancel(q),
 * link(i), client_encoding, std_strings, datestyle, timezone, password, scram_client_key(b),
 * scram_server_key(b). task is "pooler" (a listening socket), "client" or "server"; cancel
 * is the 8 bytes of the socket's BackendKeyData read as one big-endian number (the key neki
 * gave a client, the server's own key for a server); link is the fd of the socket paired
 * with it (0 = none); the four parameters are the client's (client) or the server's
 * (server) values; password is sent only for a user the new process cannot look up itself
 * (auth_query); the SCRAM keys (bytea, text form "\x<hex>") only for a pool that logs in
 * with a client's SCRAM keys. NULL columns read back as empty strings and has_scram false.
 */
#ifndef NEKI_FDROW_H
#define NEKI_FDROW_H

#include "neki/base.h"

#include "neki/auth.h"
#include "neki/error.h"
#include "neki/scram.h"

struct pktbuf;

#define FDROW_NCOLS 15
#define FDROW_NAME_MAX AUTH_MAX_USERNAME	/* user, database, addr, parameter values */
#define FDROW_PASSWORD_MAX AUTH_MAX_PASSWORD	/* the longest secret an auth_file holds */

enum fdrow_task {
	FDROW_POOLER = 0,	/* a listening socket */
	FDROW_CLIENT = 1,
	FDROW_SERVER = 2,
};

struct fdrow {
	int fd;					/* the sending process's descriptor number */
	enum fdrow_task task;
	char user[FDROW_NAME_MAX];		/* "" = NULL (pooler) */
	char db[FDROW_NAME_MAX];
	char addr[FDROW_NAME_MAX];		/* peer (or listen) address; "unix" */
	int port;
	uint64_t cancel;			/* BackendKeyData: pid << 32 | key */
	int link;				/* fd of the paired socket; 0 = none */
	char client_encoding[FDROW_NAME_MAX];	/* "" = NULL */
	char std_strings[FDROW_NAME_MAX];
	char datestyle[FDROW_NAME_MAX];
	char timezone[FDROW_NAME_MAX];
	char password[FDROW_PASSWORD_MAX];	/* "" = NULL */
	bool has_scram;				/* the two keys below are set */
	uint8_t scram_client_key[SCRAM_KEY_LEN];
	uint8_t scram_server_key[SCRAM_KEY_LEN];
};

/* "pooler", "client", "server". */
const char *fdrow_task_str(enum fdrow_task t);

/* The column names and type OIDs of SHOW FDS, FDROW_NCOLS each. */
const char *fdrow_column_name(size_t i);
uint32_t fdrow_column_type(size_t i);

/* Append <r> as a DataRow (text format) to <pb> (its failure flag tells). */
void fdrow_write(struct pktbuf *pb, const struct fdrow *r);

/*
 * Read the DataRow body <body> (<len> bytes, after the type and length) into <r>. False with
 * <err> (08P01) when it is not a SHOW FDS row: too few columns, a value too long for its field,
 * an unknown task, a number or bytea that does not parse.
 */
NK_MUSTCHECK bool fdrow_parse(const uint8_t *body, size_t len, struct fdrow *r,
			      struct nk_error *err);

#endif /* NEKI_FDROW_H */
