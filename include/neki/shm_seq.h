/*
 * neki/shm_seq.h - setval() generations (src/shm/shm_seq.c).
 */
#ifndef NEKI_SHM_SEQ_H
#define NEKI_SHM_SEQ_H

#include "neki/base.h"

#include "neki/shm.h"

/*
 * setval() generations (shm_seq.c): one counter per cell, a sequence's cell chosen by a
 * hash of <db>.<schema>.<name>. A worker that ran setval() bumps it; every worker compares
 * the generation with the one its reserved values of that sequence were taken under and
 * drops them when it moved (two sequences sharing a cell only drop values early). Without a
 * segment (unit tests) the cells are process-local.
 */
uint64_t shm_seq_generation(const char *db, const char *schema, const char *name);
void shm_seq_bump(const char *db, const char *schema, const char *name);
/* Every sequence's generation moves (DDL that may restart, drop or rename sequences). */
void shm_seq_bump_all(void);
/* A worker ran setval(): the admin tells the other neki hosts (shm_seq_announced() is the
 * count it compares with what it told). */
void shm_seq_announce(void);
uint64_t shm_seq_announced(void);

#endif /* NEKI_SHM_SEQ_H */
