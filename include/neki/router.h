/*
 * neki/router.h - statement analysis, plans and execution (src/router/).
 */
#ifndef NEKI_ROUTER_H
#define NEKI_ROUTER_H

#include "neki/base.h"

/* "libpg_query (PostgreSQL <version> grammar)": for `neki -V`. */
const char *parse_library_version(void);

#endif /* NEKI_ROUTER_H */
