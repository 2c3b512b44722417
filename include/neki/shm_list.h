/*
 * neki/shm_list.h - the list areas (src/shm/shm_list.c): the rows every worker writes for the console's SHOW commands.
 */
#ifndef NEKI_SHM_LIST_H
#define NEKI_SHM_LIST_H

#include "neki/base.h"

#include "neki/shm.h"

/*
 * List areas (shm_list.c): the console's SHOW CLIENTS / SERVERS / POOLS / ... asks every
 * worker for its rows. The admin bumps slot i's request number and posts SHM_CMD_LIST; the
 * worker writes its rows (at most shm_list_capacity() bytes) into the area and marks that
 * request done, whatever else its mailbox is waiting for. One request at a time per area
 * (the admin serialises them).
 */
/* Admin: ask slot <i> for its rows. Returns the request number, 0 when its mailbox is full. */
NK_MUSTCHECK uint64_t shm_list_request(unsigned i);
/* Admin: the rows of request <req> of slot <i> when done (NULL while not), <*len> bytes. */
const void *shm_list_result(unsigned i, uint64_t req, size_t *len, bool *truncated);
/* Owner: the area to write into (<*cap> bytes) and the request number asked for. */
void *shm_list_area(unsigned i, size_t *cap, uint64_t *req);
/* Owner: <len> bytes of rows (<truncated>: some did not fit) answer request <req>. */
void shm_list_done(unsigned i, uint64_t req, size_t len, bool truncated);
/* Bytes of one list area. */
size_t shm_list_capacity(void);

#define SHM_LIST_MAX_COLS 40	/* values per row */

/*
 * Append one row of <n> text values (NULL pointer = SQL NULL) of kind <kind> (a letter the
 * writer and the reader agree on) to <buf> (<cap> bytes, <*len> used). False when it does
 * not fit (nothing written).
 */
NK_MUSTCHECK bool shm_list_put_row(void *buf, size_t cap, size_t *len, char kind,
				   const char *const *vals, size_t n);
/*
 * Read the row at <*pos> of <data> (<len> bytes): its kind, its values (borrowed from
 * <data>, NULL for SQL NULL) into vals[SHM_LIST_MAX_COLS] and their number. False at the
 * end or on malformed bytes.
 */
NK_MUSTCHECK bool shm_list_next_row(const void *data, size_t len, size_t *pos, char *kind,
				    const char **vals, size_t *n);

#endif /* NEKI_SHM_LIST_H */
