/*
 * topo_fixtures.h - helpers shared by the topology unit tests (topo_fixtures.c).
 */
#ifndef NEKI_TEST_UNIT_TOPO_FIXTURES_H
#define NEKI_TEST_UNIT_TOPO_FIXTURES_H

#include "neki/base.h"

#include <check.h>

#include "neki/topology.h"

/* The validation input of the tests: shards auth, shard-a..shard-d; <prev> as previous. */
const struct topo_validate_input *fx_input(const struct topo_model *prev);

/* <json_q> with single quotes turned into double quotes (malloc'd). */
char *fx_q(const char *json_q);

/* Parse and validate <json_q> (single-quoted JSON) into <f> (initialized here). */
struct topo_model *fx_parse_validate(const char *json_q, const struct topo_model *prev,
				     struct topo_findings *f);

/* topo_check() on <json_q>. */
struct topo_model *fx_check(const char *json_q, const struct topo_model *prev, bool force,
			    struct nk_error *err);

/* Contents of the source-tree file <rel> (tries ., .., ../.., $srcdir); NULL if missing. */
char *fx_read_file(const char *rel);

/* The validated storefront example (etc/topology-storefront.json). */
struct topo_model *fx_storefront(void);

/* Resolution and expression tests (check_topology_resolve.c). */
void topology_add_resolution_tests(TCase *tc);

/* Image tests (check_topoimage.c). */
void topology_add_image_tests(TCase *tc);

#endif
