/*
 * neki/prepared.h - protocol-level prepared statements (src/pool/prepared.c): the worker's
 * table of statements shared by clients and links, the names each client gave them and the
 * statements prepared on each link.
 */
#ifndef NEKI_PREPARED_H
#define NEKI_PREPARED_H

#include "neki/base.h"

#include "neki/hash.h"

struct link;
struct nk_error;
struct pktbuf;
struct proto_reader;
struct sbuf_pkt;
struct session;

/*
 * A statement known to the worker, shared by clients and links (refcounted). Its key (and
 * the server-side name made from it) is the same in every worker of this neki, so a link
 * that moves to another worker keeps its statements (prep_link_export / _import).
 */
struct prep_stmt {
	struct nk_hash128 key;		/* nk_hash128_keyed of the text (with its NUL), types */
	char name[40];			/* "NEKI_<32 hex digits of key>", the server-side name */
	char *query;			/* owned; NULL while known by its key only (a link that
					 * came from another worker has it prepared) */
	size_t query_len;
	uint8_t *oids;			/* owned: nparams big-endian uint32 */
	uint16_t nparams;
	int refs;			/* client names + link entries + pending requests */
	struct prep_stmt *hnext;	/* bucket chain of the worker table */
};

/* One client-side name. */
struct prep_name {
	char *name;			/* owned */
	struct prep_stmt *st;		/* counted reference */
	struct prep_name *next;
};

/* A client's named statements. */
struct prep_client {
	struct prep_name *names;	/* owned list */
	size_t count;
};

/* The statements prepared on one link (the link's extension data). */
struct prep_link {
	struct prep_stmt **lru;		/* owned array of counted references, most recent last */
	size_t n, cap;
};

void prep_client_cleanup(struct prep_client *pc);
void prep_link_cleanup(struct prep_link *pl);
/* Drop every name of the client (DEALLOCATE ALL, DISCARD ALL). */
void prep_client_clear(struct prep_client *pc);
void prep_link_clear(struct prep_link *pl);
/* A ParseComplete for an injected Parse of <st> arrived: the link has it now. */
void prep_link_confirm(struct link *l, struct prep_stmt *st);
/* An injected Parse of <st> was not answered (error in its batch): forget it on <l>. */
void prep_link_forget(struct link *l, struct prep_stmt *st);
/* One more / one less reference to <st> (the last one frees it); addref returns <st>. */
struct prep_stmt *prep_stmt_addref(struct prep_stmt *st);
void prep_stmt_unref(struct prep_stmt *st);
/* The worker table's entry for <query> with the <nparams> big-endian parameter types <oids>
 * (found or created), with one more reference; NULL without memory. */
struct prep_stmt *prep_stmt_ref(const char *query, const uint8_t *oids, uint16_t nparams);
/* The entry of <key> (found, or created without its text), with one more reference. */
struct prep_stmt *prep_stmt_ref_key(struct nk_hash128 key);
/*
 * The router: make <l>'s server have <st> under its internal name. When it has it already,
 * the LRU is touched and *<parsed> is false; otherwise <pb> gets a Close of each least
 * recently used statement beyond <max> and a Parse of <st>, the link counts <st> from now on
 * (prep_link_forget() if the server refuses that Parse) and *<parsed> is true. The server's
 * CloseComplete / ParseComplete are the caller's to drop. False without memory.
 */
NK_MUSTCHECK bool prep_link_prepare(struct link *l, struct prep_stmt *st, size_t max,
				    struct pktbuf *pb, bool *parsed);
/*
 * A link moves to another worker: its statements go as their keys (prep_link_export, least
 * recently used first), and come in as entries of the receiving worker's table, found or
 * created without their texts (prep_link_import; false when malformed or without memory).
 */
void prep_link_export(const struct prep_link *pl, struct pktbuf *pb);
NK_MUSTCHECK bool prep_link_import(struct prep_link *pl, struct proto_reader *r);
/* Number of distinct statements in the worker table, and the bytes of their texts. */
size_t prep_stmt_count(void);
size_t prep_stmt_text_bytes(void);

/* ---- for the client side (src/worker/session_prep.c) ---- */

struct proto_parse_msg;

/* The table entry for <m> (found or created), with one more reference; NULL without memory. */
struct prep_stmt *prep_stmt_get(const struct proto_parse_msg *m);
/* A client's name <name>: its entry, or NULL. */
struct prep_name *prep_client_find(const struct prep_client *pc, const char *name);
/* Name <name> for <st> (one more reference); false without memory. */
NK_MUSTCHECK bool prep_client_add(struct prep_client *pc, const char *name,
				  struct prep_stmt *st);
/* Drop the client's name <name> (if it has it). */
void prep_client_remove(struct prep_client *pc, const char *name);
/* The index of <st> in the link's LRU, -1 when the link lacks it. */
ssize_t prep_link_find(const struct prep_link *pl, const struct prep_stmt *st);
/* Move entry <i> to the most recent end. */
void prep_link_touch(struct prep_link *pl, size_t i);
/* Drop entry <i> (its reference). */
void prep_link_remove_at(struct prep_link *pl, size_t i);
/* The link has <st> from now on (one more reference); false without memory. */
NK_MUSTCHECK bool prep_link_add(struct prep_link *pl, struct prep_stmt *st);
/* Parse of <st> under its internal name into <pb>; false without memory. */
NK_MUSTCHECK bool prep_put_parse(struct pktbuf *pb, const struct prep_stmt *st);

#endif /* NEKI_PREPARED_H */
