/*
 * main.c - the neki master process (placeholder until the process model lands).
 */
#include "neki/base.h"

#include <stdio.h>

int
main(void)
{
	printf("neki %s\n", NEKI_VERSION);
	return 0;
}
