#include "bench.h"
#include <stdio.h>
int bench_engine(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "kvbench engine: not built yet\n");
	return 1;
}
