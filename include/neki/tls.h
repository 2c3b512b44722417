/*
 * neki/tls.h - TLS for client and server connections (OpenSSL, src/net/tls.c).
 *
 * A struct tls_ctx is one configured OpenSSL context: the ACCEPT role serves clients
 * (client_tls_* settings), the CONNECT role talks to Postgres (server_tls_* settings). Each
 * process keeps a current pair (tls_init at start, tls_reload on RELOAD: new files apply to
 * new connections, connections already open keep their context; a failed reload keeps the
 * old pair). TLS plugs into a struct sbuf as its I/O operations:
 *
 *   clients   SSLRequest: answer 'S' with sbuf_send(), then tls_sbuf_accept()
 *             direct TLS (first byte 0x16): tls_sbuf_accept_direct() from the packet callback
 *   servers   after SBUF_EV_CONNECT_OK: tls_sbuf_connect() sends the SSLRequest itself
 *
 * While the negotiation runs the sbuf is paused and the owner must not send; the result comes
 * through a tls_done_fn from the event loop. On success the sbuf is resumed (reading through
 * TLS) before the callback runs; on failure the owner closes the sbuf. sbuf_close() ends the
 * TLS state (close_notify when the session was open) whatever the phase.
 */
#ifndef NEKI_TLS_H
#define NEKI_TLS_H

#include "neki/base.h"

#include "neki/config.h"
#include "neki/error.h"

struct sbuf;
struct sbuf_pkt;
struct tls_ctx;

/* Which side of the TLS handshake neki plays. */
enum tls_role {
	TLS_ROLE_ACCEPT = 0,	/* neki is the TLS server: connections from clients */
	TLS_ROLE_CONNECT = 1,	/* neki is the TLS client: connections to Postgres */
};

/* The settings one context is built from (strings borrowed; NULL or "" = unset). */
struct tls_settings {
	enum cfg_sslmode sslmode;
	const char *key_file;
	const char *cert_file;
	const char *ca_file;
	const char *protocols;		/* "secure", "all", "legacy", "tlsv1.2,tlsv1.3", ... */
	const char *ciphers;		/* OpenSSL cipher list for TLS <= 1.2; "default" */
	const char *tls13_ciphers;	/* OpenSSL TLS 1.3 suites; "" = library default */
	const char *ecdhcurve;		/* "auto", "none", or a group list ("X25519:P-256") */
	const char *dheparams;		/* "auto", "none", "legacy" */
};

/* Fill <s> from the client_tls_* settings of <c> (borrowed strings). */
void tls_settings_client(struct tls_settings *s, const struct cfg *c);
/* Fill <s> from the server_tls_* settings of <c> (borrowed strings). */
void tls_settings_server(struct tls_settings *s, const struct cfg *c);

/*
 * Build a context for <role> from <s>: protocols, ciphers, groups, DH, key + certificate
 * (required for ACCEPT), CA file, peer verification from the sslmode (ACCEPT: verify-ca and
 * verify-full demand a client certificate; CONNECT: verify-ca checks the chain, verify-full
 * also the host name), ALPN "postgresql". Returns a context with one reference, or NULL with
 * <err> naming the setting and OpenSSL's reason.
 */
struct tls_ctx *tls_ctx_new(enum tls_role role, const struct tls_settings *s,
			    struct nk_error *err);
void tls_ctx_ref(struct tls_ctx *ctx);
void tls_ctx_unref(struct tls_ctx *ctx);
enum cfg_sslmode tls_ctx_sslmode(const struct tls_ctx *ctx);

/* ---- the process's current contexts ---- */

/*
 * Build the current contexts from <c> (start-up). False with <err> when a context that the
 * sslmodes need cannot be built; then nothing changes.
 */
NK_MUSTCHECK bool tls_init(const struct cfg *c, struct nk_error *err);

/* Build and drop the contexts <c> asks for: start-up validation in the master. */
NK_MUSTCHECK bool tls_check(const struct cfg *c, struct nk_error *err);

/*
 * RELOAD: rebuild both contexts from <c> (re-reading the files). On failure keeps the old
 * pair and returns false with the reason in <err> (the caller logs it: pgbouncer's line is
 * "TLS setup failed: <reason>"). <server_changed> (may be NULL) is set when the server-side
 * settings or file contents differ from the previous ones (pgbouncer then reconnects the
 * servers). Does nothing (true) in a process that never ran tls_init() (the master).
 */
NK_MUSTCHECK bool tls_reload(const struct cfg *c, bool *server_changed, struct nk_error *err);

/* Borrowed current contexts; NULL when the sslmode is disable (or before tls_init). */
struct tls_ctx *tls_client_ctx(void);
struct tls_ctx *tls_server_ctx(void);

/* Drop the current contexts (process exit, tests). Open connections keep theirs. */
void tls_cleanup(void);

/*
 * Client side policy helpers (pgbouncer: Unix socket clients are never offered TLS nor
 * required to use it). tls_client_offer(): answer 'S' to an SSLRequest. tls_client_required():
 * a plain StartupMessage must be refused with "SSL required".
 */
bool tls_client_offer(bool is_unix);
bool tls_client_required(bool is_unix);

/* ---- connections ---- */

/*
 * Negotiation result for <sb>: <ok>, or the reason in <errmsg> (valid during the call).
 * On success after tls_sbuf_connect() the connection may still be plain: prefer/allow and the
 * server answered 'N' (tls_sbuf_is_tls() tells).
 */
typedef void (*tls_done_fn)(struct sbuf *sb, bool ok, const char *errmsg, void *arg);

/*
 * After an SSLRequest was skipped and 'S' sent on <sb>: start the TLS server handshake with
 * <ctx>. False with <err> (and nothing started) when bytes beyond the SSLRequest are already
 * buffered ("received unencrypted data after SSL request"), the 'S' is still queued, or out
 * of memory. Call it from the SBUF_EV_PKT callback after sbuf_skip(), or later.
 */
NK_MUSTCHECK bool tls_sbuf_accept(struct sbuf *sb, struct tls_ctx *ctx, tls_done_fn done,
				  void *arg, struct nk_error *err);

/*
 * Direct TLS (Postgres 17 sslnegotiation=direct): <pkt> is the first startup-phase packet
 * event and its first byte is 0x16. Takes the buffered bytes (consumes them from <sb>) as the
 * start of the ClientHello. The client must negotiate ALPN "postgresql", else the handshake
 * fails. Call from the SBUF_EV_PKT callback without choosing another action; return true.
 */
NK_MUSTCHECK bool tls_sbuf_accept_direct(struct sbuf *sb, struct tls_ctx *ctx,
					 const struct sbuf_pkt *pkt, tls_done_fn done, void *arg,
					 struct nk_error *err);

/* True when the startup-phase packet <pkt> is the start of a TLS ClientHello. */
bool tls_pkt_is_client_hello(const struct sbuf_pkt *pkt);

/*
 * On a freshly connected server <sb>: send an SSLRequest, read the answer and handshake with
 * <ctx> (<host> for SNI and the verify-full name check; an IP address is checked as one).
 * 'N' is an error for require and stronger modes ("server refused SSL"), a plain connection
 * otherwise. Unix sockets and a NULL <ctx> finish at once as plain (from the loop). False
 * only when out of memory.
 */
NK_MUSTCHECK bool tls_sbuf_connect(struct sbuf *sb, struct tls_ctx *ctx, const char *host,
				   tls_done_fn done, void *arg);

/* True when <sb> speaks TLS (handshake done). */
bool tls_sbuf_is_tls(const struct sbuf *sb);

/*
 * SHOW CLIENTS/SERVERS `tls` column and the login log line, pgbouncer's format:
 * "TLSv1.3/TLS_AES_256_GCM_SHA384/ECDH=X25519". "" for a plain connection.
 */
void tls_sbuf_info(const struct sbuf *sb, char *buf, size_t len);

/*
 * The peer certificate's subject common name into <buf> (auth_type=cert). False when there
 * is no TLS, no certificate or no CN.
 */
bool tls_sbuf_peer_cn(const struct sbuf *sb, char *buf, size_t len);

#endif /* NEKI_TLS_H */
