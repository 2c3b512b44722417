/*
 * session_prep.h - a client's protocol-level prepared statements on its link
 * (session_prep.c), for session_fwd.c.
 */
#ifndef NEKI_WORKER_SESSION_PREP_H
#define NEKI_WORKER_SESSION_PREP_H

#include "session_int.h"

/*
 * Handle a client message that names statements: Parse 'P', Bind 'B', Describe 'D',
 * Close 'C' (whole packet <pkt> of <len> bytes) on link <l>. Sends what the server must get
 * (with injected Parse / Close) and records tracked requests. Returns false with <err>
 * set when the client must get an error (and nothing was sent).
 */
NK_MUSTCHECK bool prep_client_msg(struct session *s, struct link *l, const uint8_t *pkt,
				  uint32_t len, struct nk_error *err, bool *fatal);
/*
 * A client without a link: is its next batch, all buffered, named Parse and Close('S')
 * messages ending with a Sync (libpq's PQprepare) that prep_local_answer() can answer with no
 * server? Returns the batch's length (from <pkt>, the current client packet, through the
 * Sync), 0 when it is not such a batch. <known>: every statement it parses is prepared on a
 * link of the client's pool (it parsed there).
 */
uint32_t prep_local_batch(struct session *s, const struct sbuf_pkt *pkt, bool *known);
/*
 * Answer that batch of <batch_len> bytes: the client's statement names change as the server
 * would change them, ParseComplete / CloseComplete and ReadyForQuery 'I' go to the client,
 * the bytes are consumed. The statements are parsed on the link of their first Bind, as on a
 * link that lacks them. False when the session must close (no memory, the client is gone).
 */
NK_MUSTCHECK bool prep_local_answer(struct session *s, const struct sbuf_pkt *pkt,
				    uint32_t batch_len);

#endif /* NEKI_WORKER_SESSION_PREP_H */
