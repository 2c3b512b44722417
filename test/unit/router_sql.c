/*
 * router_sql - prints SQL the router generates, for the integration tests that run it on a
 * real server (test/routing/test_sequence_sql.py):
 *   router_sql reserve <schema> <name> <n>   the batch reservation (seq_reserve_sql)
 *   router_sql uuidv7                        CREATE FUNCTION uuidv7() (seq_uuidv7_sql)
 */
#include "neki/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "neki/sequence.h"

int
main(int argc, char **argv)
{
	char buf[4096];

	if (argc == 5 && strcmp(argv[1], "reserve") == 0) {
		if (!seq_reserve_sql(buf, sizeof(buf), argv[2], argv[3], atoll(argv[4])))
			return 1;
		puts(buf);
		return 0;
	}
	if (argc == 2 && strcmp(argv[1], "uuidv7") == 0) {
		puts(seq_uuidv7_sql());
		return 0;
	}
	fprintf(stderr, "usage: router_sql reserve SCHEMA NAME N | uuidv7\n");
	return 2;
}
