/*
 * bench/blob.c — kvbench blob: a file written as a blob through kvd and
 * read back, side by side with dd copying and reading the same file on the
 * same file system, in the same run.
 *
 *   kvbench blob [--size B] [--chunk-size C] [--append-size A] [--sync S]
 *                [--transport T] [--repeat N] [--dir DIR] [--kvd PATH]
 *                [--cold] [--quick] [--markdown] [--json]
 *
 * Setup (not timed): a source file of B bytes (a xorshift stream: it does
 * not compress) in DIR, and a kvd (its data directory in DIR, so on the
 * same file system) serving one tenant with the given sync mode and no
 * compression, reached over T (ipc: nng REQ/REP on a Unix socket; kv+ipc:
 * kvd's stream framing).
 *
 * Each round, timed from the first byte to the last:
 *   dd write   dd if=SRC of=DIR/dd.out bs=1M, with conv=fdatasync when
 *              sync=always (the blob is durable when its commit returns),
 *              without it otherwise;
 *   kvd write  the file read in A-byte pieces into kvc_blob_write, then
 *              kvc_blob_commit (what `kvctl blob put KEY FILE` does);
 *   dd read    dd if=DIR/dd.out of=/dev/null bs=1M;
 *   kvd read   kvc_blob_read in 4 MiB pieces (what `kvctl blob get` does,
 *              less the write to its output).
 * Both reads find their data in the page cache (each was just written),
 * or with --cold (root) neither does: the cache is emptied before each.
 * The blob read back is checked by XXH64 against the source (outside the
 * timed span); the run exits 1 on a mismatch.
 *
 * Reported: MB/s of each (the median of the rounds) and kvd/dd.
 */
#include "bench.h"
#include "opt.h"
#include "sys.h"

#include "kvclient.h"
#include "kvdrun.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

extern char **environ;

#define BB_SIZE_DEFAULT (1ull << 30)
#define BB_QUICK_SIZE   (16ull << 20)
#define BB_ROUNDS_MAX   16
#define BB_READ_PIECE   (4u << 20)

struct bb_opts {
	uint64_t size, chunk, append, repeat;
	const char *sync, *transport, *dir, *kvd;
	bool quick, size_set, json, markdown, cold;
};

struct bb_round {
	double dd_w, kvd_w, dd_r, kvd_r; /* seconds */
};

static double bb_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The source file: size bytes of a xorshift stream; its XXH64. */
static int bb_make_source(const char *path, uint64_t size, uint64_t *ret_hash)
{
	XXH64_state_t *xs = XXH64_createState();
	uint64_t s = 0x9E3779B97F4A7C15ull, off;
	uint8_t *buf = malloc(1u << 20);
	FILE *f = fopen(path, "wb");
	int rv = 0;

	if (xs == NULL || buf == NULL || f == NULL) {
		rv = -errno ? -errno : -ENOMEM;
		goto out;
	}
	XXH64_reset(xs, 0);
	for (off = 0; off < size; off += 1u << 20) {
		size_t n = size - off < (1u << 20) ? (size_t)(size - off) : (1u << 20);
		for (size_t i = 0; i + 8 <= n; i += 8) {
			s ^= s << 13;
			s ^= s >> 7;
			s ^= s << 17;
			memcpy(buf + i, &s, 8);
		}
		memset(buf + (n & ~(size_t)7), 0x5a, n & 7);
		XXH64_update(xs, buf, n);
		if (fwrite(buf, 1, n, f) != n) {
			rv = -EIO;
			goto out;
		}
	}
	*ret_hash = XXH64_digest(xs);
out:
	if (f != NULL && fclose(f) != 0 && rv == 0)
		rv = -EIO;
	free(buf);
	XXH64_freeState(xs);
	return rv;
}

/* Runs dd with the given operands; its time in *ret_s. */
static int bb_dd(const char *const *args, double *ret_s)
{
	char *argv[8];
	pid_t pid;
	int st, i = 0, null;
	posix_spawn_file_actions_t fa;
	double t0;

	argv[i++] = "dd";
	for (; *args != NULL && i < 7; args++)
		argv[i++] = (char *)*args;
	argv[i] = NULL;
	posix_spawn_file_actions_init(&fa);
	null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (null >= 0)
		posix_spawn_file_actions_adddup2(&fa, null, 2);
	t0 = bb_now();
	st = posix_spawnp(&pid, "dd", &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (null >= 0)
		close(null);
	if (st != 0)
		return -st;
	if (waitpid(pid, &st, 0) < 0)
		return -errno;
	*ret_s = bb_now() - t0;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -ECHILD;
}

static int bb_kvd_write(kvc *c, const struct kvc_call *call, const struct bb_opts *o,
                        const char *src, double *ret_s)
{
	struct kvc_blob_opts bo = KVC_BLOB_OPTS_INIT;
	kvc_blob_writer *w = NULL;
	uint8_t *buf = malloc(o->append);
	FILE *f = fopen(src, "rb");
	double t0 = bb_now();
	size_t n;
	int rv;

	bo.chunk_size = (uint32_t)o->chunk;
	bo.append_size = (uint32_t)o->append;
	if (buf == NULL || f == NULL) {
		rv = -ENOMEM;
		goto out;
	}
	if ((rv = kvc_blob_writer_open(c, call, "blob", 4, &bo, &w)) != 0)
		goto out;
	while ((n = fread(buf, 1, o->append, f)) > 0)
		if ((rv = kvc_blob_write(w, buf, n)) != 0)
			goto out;
	rv = kvc_blob_commit(w, NULL);
	*ret_s = bb_now() - t0;
out:
	kvc_blob_writer_close(w);
	if (f != NULL)
		fclose(f);
	free(buf);
	return rv;
}

static int bb_kvd_read(kvc *c, const struct kvc_call *call, uint64_t want_hash, double *ret_s)
{
	struct kvc_blob_info info;
	XXH64_state_t *xs = XXH64_createState();
	uint8_t *buf = malloc(BB_READ_PIECE);
	double t0 = bb_now(), hashing = 0;
	uint64_t off = 0;
	int rv;

	if (xs == NULL || buf == NULL) {
		rv = -ENOMEM;
		goto out;
	}
	XXH64_reset(xs, 0);
	if ((rv = kvc_blob_info(c, call, "blob", 4, 0, &info)) != 0)
		goto out;
	while (off < info.size) {
		size_t n = 0;
		double h0;
		if ((rv = kvc_blob_read(c, call, "blob", 4, info.version, off, buf, BB_READ_PIECE,
		                        &n)) != 0)
			goto out;
		if (n == 0) {
			rv = -EIO;
			goto out;
		}
		h0 = bb_now();
		XXH64_update(xs, buf, n);
		hashing += bb_now() - h0;
		off += n;
	}
	*ret_s = bb_now() - t0 - hashing;
	if (XXH64_digest(xs) != want_hash || info.xxh64 != want_hash)
		rv = -EILSEQ;
out:
	free(buf);
	XXH64_freeState(xs);
	return rv;
}

/* --cold: the page cache emptied (root), so a read comes from the disk. */
static int bb_drop_caches(void)
{
	FILE *f;

	sync();
	if ((f = fopen("/proc/sys/vm/drop_caches", "w")) == NULL)
		return -errno;
	if (fputs("3\n", f) == EOF) {
		fclose(f);
		return -EIO;
	}
	return fclose(f) == 0 ? 0 : -errno;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double bb_median(const struct bb_round *r, size_t n, size_t field)
{
	double v[BB_ROUNDS_MAX];

	for (size_t i = 0; i < n; i++)
		v[i] = ((const double *)&r[i])[field];
	qsort(v, n, sizeof(v[0]), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int bench_blob(int argc, char **argv)
{
	struct bb_opts o = {.size = BB_SIZE_DEFAULT,
	                    .chunk = 64 << 10,
	                    .append = 1 << 20,
	                    .repeat = 3,
	                    .sync = "always",
	                    .transport = "ipc",
	                    .dir = "."};
	struct bench_opt opts[] = {
	        {BENCH_OPT("size", BENCH_OPT_U64, &o.size, "B", "bytes of the file (default %D)"),
	         .lo = 1, .hi = 1ull << 40, .set = &o.size_set},
	        {BENCH_OPT("chunk-size", BENCH_OPT_U64, &o.chunk, "C",
	                   "the blob's chunk size (default %D)"),
	         .lo = 4096, .hi = 4 << 20},
	        {BENCH_OPT("append-size", BENCH_OPT_U64, &o.append, "A",
	                   "bytes per kvc_blob_write and BlobAppend (default %D)"),
	         .lo = 4096, .hi = 32 << 20},
	        {BENCH_OPT("sync", BENCH_OPT_STRING, &o.sync, "S",
	                   "the tenant's sync mode: always (dd with conv=fdatasync) or none\n"
	                   "(dd without) (default always)")},
	        {BENCH_OPT("transport", BENCH_OPT_STRING, &o.transport, "T",
	                   "ipc (nng REQ/REP) or kv+ipc (kvd's framing) (default ipc)")},
	        {BENCH_OPT("repeat", BENCH_OPT_U64, &o.repeat, "N",
	                   "rounds; the median is reported (default %D)"),
	         .lo = 1, .hi = BB_ROUNDS_MAX},
	        {BENCH_OPT("dir", BENCH_OPT_STRING, &o.dir, "DIR",
	                   "where the file, dd's copy and kvd's data go (default .)")},
	        {BENCH_OPT("kvd", BENCH_OPT_STRING, &o.kvd, "PATH",
	                   "the kvd binary (default: the build tree's)")},
	        {BENCH_OPT("cold", BENCH_OPT_FLAG, &o.cold, NULL,
	                   "empty the page cache before each read (root), so both reads\n"
	                   "come from the disk (default: both find the page cache warm)")},
	        {BENCH_OPT("quick", BENCH_OPT_FLAG, &o.quick, NULL,
	                   "smoke run: 16 MiB, one round (explicit --size wins)")},
	        BENCH_OPTS_REPORT(&o.markdown, &o.json),
	};
	struct bench_cmd cmd = {
	        "blob",
	        "A file written as a blob through kvd and read back, against dd copying and\n"
	        "reading the same file on the same file system, in the same run.\n",
	        "Exits 0 only when every blob read back as written.\n",
	        opts,
	        sizeof(opts) / sizeof(opts[0]),
	};
	struct bb_round rounds[BB_ROUNDS_MAX];
	char work[4096], src[4200], ddout[4200], kvdbin[4096], err[512], ofarg[4300],
	        ifarg[4300], ifsrc[4300];
	struct kvd_run run;
	struct kvc_call call = {.tenant = "bench"};
	kvc *c = NULL;
	uint64_t hash = 0;
	bool always, framed;
	int rv, status = 0;

	if ((rv = bench_opts_parse(&cmd, argc, argv)) != 0)
		return rv > 0 ? 0 : 2;
	if (o.quick && !o.size_set)
		o.size = BB_QUICK_SIZE;
	if (o.quick)
		o.repeat = 1;
	if (strcmp(o.sync, "always") != 0 && strcmp(o.sync, "none") != 0) {
		fprintf(stderr, "kvbench blob: --sync takes always or none\n");
		return 2;
	}
	if (strcmp(o.transport, "ipc") != 0 && strcmp(o.transport, "kv+ipc") != 0) {
		fprintf(stderr, "kvbench blob: --transport takes ipc or kv+ipc\n");
		return 2;
	}
	always = strcmp(o.sync, "always") == 0;
	framed = strcmp(o.transport, "kv+ipc") == 0;
	if ((rv = bench_kvd_path(o.kvd, kvdbin, sizeof(kvdbin))) != 0) {
		fprintf(stderr, "kvbench blob: no kvd binary (%s): %s\n", kvdbin, strerror(-rv));
		return 1;
	}
	snprintf(work, sizeof(work), "%s/kvbench-blob.XXXXXX", o.dir);
	if (mkdtemp(work) == NULL) {
		fprintf(stderr, "kvbench blob: mkdtemp %s: %s\n", work, strerror(errno));
		return 1;
	}
	snprintf(src, sizeof(src), "%s/source", work);
	snprintf(ddout, sizeof(ddout), "%s/dd.out", work);
	if ((rv = bb_make_source(src, o.size, &hash)) != 0) {
		fprintf(stderr, "kvbench blob: writing %s: %s\n", src, strerror(-rv));
		status = 1;
		goto out;
	}
	memset(&run, 0, sizeof(run));
	run.bin = kvdbin;
	run.dir = work;
	run.listen = KVD_RUN_LISTEN(framed ? KVD_RUN_KVIPC : KVD_RUN_IPC);
	run.config_text = always ? "[kvd]\nauto_create = yes\n[tenant-defaults]\nsync = always\n"
	                         : "[kvd]\nauto_create = yes\n[tenant-defaults]\nsync = none\n";
	if ((rv = kvd_run_start(&run, err, sizeof(err))) != 0) {
		fprintf(stderr, "kvbench blob: starting kvd: %s\n", err);
		status = 1;
		goto out;
	}
	{
		struct kvc_options ko;
		kvc_options_init(&ko);
		ko.endpoint = run.url[framed ? KVD_RUN_KVIPC : KVD_RUN_IPC];
		ko.timeout_ms = 600000;
		rv = kvc_open(&ko, &c);
	}
	if (rv != 0) {
		fprintf(stderr, "kvbench blob: kvc_open: %s\n", kvc_code_name(rv));
		status = 1;
		goto stop;
	}
	snprintf(ifsrc, sizeof(ifsrc), "if=%s", src);
	snprintf(ofarg, sizeof(ofarg), "of=%s", ddout);
	snprintf(ifarg, sizeof(ifarg), "if=%s", ddout);
	for (uint64_t i = 0; i < o.repeat; i++) {
		struct bb_round *r = &rounds[i];
		const char *wargs[] = {ifsrc, ofarg, "bs=1M", always ? "conv=fdatasync" : NULL, NULL};
		const char *rargs[] = {ifarg, "of=/dev/null", "bs=1M", NULL};
		const char *what = NULL;
		unlink(ddout);
		if ((rv = bb_dd(wargs, &r->dd_w)) != 0)
			what = "dd write";
		else if ((rv = bb_kvd_write(c, &call, &o, src, &r->kvd_w)) != 0)
			what = "kvd write";
		else if (o.cold && (rv = bb_drop_caches()) != 0)
			what = "dropping the page cache";
		else if ((rv = bb_dd(rargs, &r->dd_r)) != 0)
			what = "dd read";
		else if (o.cold && (rv = bb_drop_caches()) != 0)
			what = "dropping the page cache";
		else if ((rv = bb_kvd_read(c, &call, hash, &r->kvd_r)) != 0)
			what = "kvd read";
		if (what != NULL) {
			/* the dd steps and local failures are -errno, kvd's are -KVC codes */
			fprintf(stderr, "kvbench blob: round %" PRIu64 ", %s: %s\n", i + 1, what,
			        rv == -EILSEQ  ? "the blob read back differs from the file"
			        : rv == -ECHILD ? "dd failed"
			        : what[0] == 'k' && rv != -ENOMEM ? kvc_code_name(rv)
			                                          : strerror(-rv));
			status = 1;
			goto stop;
		}
		if (!o.json)
			fprintf(stderr, "kvbench blob: round %" PRIu64 " done\n", i + 1);
	}
	{
		size_t n = (size_t)o.repeat;
		double mb = (double)o.size / 1e6;
		double ddw = mb / bb_median(rounds, n, 0), kw = mb / bb_median(rounds, n, 1);
		double ddr = mb / bb_median(rounds, n, 2), kr = mb / bb_median(rounds, n, 3);
		if (o.json) {
			printf("{\"size\": %" PRIu64 ", \"chunk_size\": %" PRIu64
			       ", \"append_size\": %" PRIu64 ", \"sync\": \"%s\", \"transport\": \"%s\""
			       ", \"cold\": %s, \"rounds\": %zu, \"dd_write_mbs\": %.1f"
			       ", \"kvd_write_mbs\": %.1f, \"dd_read_mbs\": %.1f, \"kvd_read_mbs\": %.1f}\n",
			       o.size, o.chunk, o.append, o.sync, o.transport, o.cold ? "true" : "false", n,
			       ddw, kw, ddr, kr);
		} else {
			printf("# kvbench blob: %" PRIu64 " bytes, chunk %" PRIu64 ", append %" PRIu64
			       ", sync=%s, %s, %s reads, median of %zu\n",
			       o.size, o.chunk, o.append, o.sync, o.transport, o.cold ? "cold" : "warm",
			       n);
			printf("%s| what | dd MB/s | kvd MB/s | kvd/dd |\n|---|---|---|---|\n",
			       o.markdown ? "\n" : "");
			printf("| write | %.1f | %.1f | %.2f |\n", ddw, kw, kw / ddw);
			printf("| read | %.1f | %.1f | %.2f |\n", ddr, kr, kr / ddr);
		}
	}
stop:
	kvc_close(c);
	if (kvd_run_stop(&run, err, sizeof(err)) != 0) {
		fprintf(stderr, "kvbench blob: stopping kvd: %s\n", err);
		status = 1;
	}
out:
	bench_rmtree(work);
	return status;
}
