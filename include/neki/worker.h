/*
 * neki/worker.h - the worker process (src/worker/): child_run() (neki/proc.h) with the main
 * listeners and the client sessions (neki/session.h).
 */
#ifndef NEKI_WORKER_H
#define NEKI_WORKER_H

#include "neki/base.h"

/* A worker process on shm slot <slot>; never returns. */
NK_NORETURN void worker_main(unsigned slot);

#endif /* NEKI_WORKER_H */
