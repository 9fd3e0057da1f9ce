/* kvbench.c — kvbench: benchmarks of kvd's engine, its peers, and kvd itself. */
#include "bench.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: kvbench COMMAND [options]\n"
	        "commands:\n"
	        "  engine   db_bench-style workloads: kvd engine against RocksDB and LevelDB\n"
	        "  keydir   key-directory memory per key and speed\n"
	        "  open     time to open a database: from hint files, by log scan\n"
	        "  merge    merge time, space reclaimed, writer latency during a merge\n"
	        "  rpc      Get/Put throughput and latency through kvd, with transport baselines\n"
	        "  activate time to activate a passive tenant; first Get through kvd\n"
	        "  ycsb     YCSB workloads A-F: kvd against Redis, RocksDB, LevelDB, LMDB\n"
	        "  versions the newest m versions of a key: kvd's Versions against a Redis chain\n"
	        "  durable  puts with sync=always at 1-64 clients: kvd against Redis (always)\n"
	        "  coldstart a new process opening a database (or connecting) and doing k ops\n"
	        "  device   the block-device backend side by side with fio on the same device\n"
	        "  handover a tenant moved between two nodes of a shared device\n"
	        "  codec    put/get throughput and stored/logical bytes per value codec\n"
	        "  blob     a file as a blob through kvd, written and read, against dd\n"
	        "  evict    memory of evict=oldest's write order per key; puts that evict\n"

	        "run 'kvbench COMMAND --help' for the options of a command\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
		usage(stdout);
		return 0;
	}
	if (strcmp(argv[1], "keydir") == 0)
		return bench_keydir(argc - 1, argv + 1);
	if (strcmp(argv[1], "open") == 0)
		return bench_open(argc - 1, argv + 1);
	if (strcmp(argv[1], "merge") == 0)
		return bench_merge(argc - 1, argv + 1);
	if (strcmp(argv[1], "engine") == 0)
		return bench_engine(argc - 1, argv + 1);
	if (strcmp(argv[1], "rpc") == 0)
		return bench_rpc(argc - 1, argv + 1);
	if (strcmp(argv[1], "activate") == 0)
		return bench_activate(argc - 1, argv + 1);
	if (strcmp(argv[1], "ycsb") == 0)
		return bench_ycsb(argc - 1, argv + 1);
	if (strcmp(argv[1], "versions") == 0)
		return bench_versions(argc - 1, argv + 1);
	if (strcmp(argv[1], "durable") == 0)
		return bench_durable(argc - 1, argv + 1);
	if (strcmp(argv[1], "coldstart") == 0)
		return bench_coldstart(argc - 1, argv + 1);
	if (strcmp(argv[1], "device") == 0)
		return bench_device(argc - 1, argv + 1);
	if (strcmp(argv[1], "handover") == 0)
		return bench_handover(argc - 1, argv + 1);
	if (strcmp(argv[1], "codec") == 0)
		return bench_codec(argc - 1, argv + 1);
	if (strcmp(argv[1], "blob") == 0)
		return bench_blob(argc - 1, argv + 1);
	if (strcmp(argv[1], "evict") == 0)
		return bench_evict(argc - 1, argv + 1);
	fprintf(stderr, "kvbench: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
