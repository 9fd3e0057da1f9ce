/*
 * maint.c — kvbench open and kvbench merge: how long opening a database takes
 * (from hint files, and from a full scan of the log), and what a merge costs
 * the writers that keep going while it runs.
 */
#include "bench.h"
#include "hist.h"
#include "opt.h"
#include "report.h"
#include "rng.h"

#include "kvengine.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void remove_image(const char *path)
{
	char p[4096];

	snprintf(p, sizeof(p), "%s/KEYDIR", path);
	unlink(p);
}

static int remove_hints(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *de;
	char p[4096];
	int n = 0;

	if (d == NULL)
		return 0;
	while ((de = readdir(d)) != NULL) {
		size_t l = strlen(de->d_name);
		if (l > 5 && strcmp(de->d_name + l - 5, ".hint") == 0) {
			snprintf(p, sizeof(p), "%s/%s", path, de->d_name);
			n += unlink(p) == 0;
		}
	}
	closedir(d);
	return n;
}

struct common {
	uint64_t keys;
	uint32_t key_size;
	uint32_t value_size;
	const char *dir;
	bool json;
	bool cold;
};

/* Empties the page cache (root only), so an open reads from the disk. */
static int drop_caches(void)
{
	FILE *f;

	sync();
	if ((f = fopen("/proc/sys/vm/drop_caches", "w")) == NULL)
		return -errno;
	fputs("3\n", f);
	return fclose(f) == 0 ? 0 : -errno;
}

static int fill(kv_db *db, const struct common *c, uint64_t seed, uint64_t count)
{
	char key[256], *val = malloc(c->value_size + 1);
	struct kv_op ops[256];
	char keys[256][256];
	uint64_t s = seed;

	if (val == NULL)
		return -ENOMEM;
	memset(val, 'v', c->value_size);
	for (uint64_t i = 0; i < count;) {
		size_t n = 0;
		for (; n < 256 && i < count; n++, i++) {
			uint64_t k = bench_rng(&s) % c->keys;
			snprintf(key, sizeof(key), "%0*" PRIu64, (int)c->key_size, k);
			memcpy(keys[n], key, c->key_size);
			ops[n] = (struct kv_op){.type = KV_OP_PUT,
			                        .key = keys[n],
			                        .key_len = c->key_size,
			                        .value = val,
			                        .value_len = c->value_size,
			                        .if_version = KV_ANY_VERSION};
		}
		int rv = kv_batch(db, ops, n);
		if (rv != 0) {
			free(val);
			return rv;
		}
	}
	free(val);
	return 0;
}

/* The options open and merge share. 0, 1 after --help, 2 for a bad option. */
static int parse_common(const char *cmd, const char *intro, int argc, char **argv, struct common *c)
{
	const struct bench_opt opts[] = {
	        {BENCH_OPT("keys", BENCH_OPT_U64, &c->keys, "N", "keys written (default %D)"),
	         .lo = 1, .hi = (double)UINT64_MAX},
	        {BENCH_OPT("key-size", BENCH_OPT_UINT, &c->key_size, "B",
	                   "bytes per key, 8..200 (default %D)"),
	         .lo = 8, .hi = 200},
	        {BENCH_OPT("value-size", BENCH_OPT_UINT, &c->value_size, "B",
	                   "bytes per value (default %D)"),
	         .lo = 0, .hi = UINT32_MAX},
	        {BENCH_OPT("dir", BENCH_OPT_STRING, &c->dir, "DIR",
	                   "make the database in DIR/open or DIR/merge (default: a\n"
	                   "new directory in /tmp)")},
	        {BENCH_OPT("cold", BENCH_OPT_FLAG, &c->cold, NULL,
	                   "empty the page cache before each open (root)")},
	        {BENCH_OPT("json", BENCH_OPT_FLAG, &c->json, NULL,
	                   "print one JSON object instead of text")},
	};
	const struct bench_cmd bc = {cmd, intro, NULL, opts, sizeof opts / sizeof opts[0]};
	int rv;

	c->keys = 1000000;
	c->key_size = 16;
	c->value_size = 100;
	c->dir = NULL;
	c->json = false;
	c->cold = false;
	if ((rv = bench_opts_parse(&bc, argc, argv)) < 0)
		return 2;
	return rv;
}

static char *make_dir(const char *given, const char *tag)
{
	char *p;

	if (given != NULL) {
		mkdir(given, 0755);
		if (asprintf(&p, "%s/%s", given, tag) < 0)
			return NULL;
		bench_rmtree(p);
		return p;
	}
	if (asprintf(&p, "/tmp/kvbench-%s-XXXXXX", tag) < 0)
		return NULL;
	if (mkdtemp(p) == NULL) {
		free(p);
		return NULL;
	}
	rmdir(p);
	return p;
}

/* kv_open of dir timed (after emptying the page cache with cold), its
 * recovery report, kv_close. 0, or 1 after saying why. */
static int timed_open(const char *dir, const struct kv_options *o, bool cold, double *ret_s,
                      struct kv_recovery_info *ri)
{
	kv_db *db;
	double t0;
	int rv;

	if (cold && (rv = drop_caches()) != 0) {
		fprintf(stderr, "kvbench open: --cold: %s\n", strerror(-rv));
		return 1;
	}
	t0 = bench_now();
	if ((rv = kv_open(dir, o, &db)) != 0) {
		fprintf(stderr, "kvbench open: %s\n", kv_strerror(rv));
		return 1;
	}
	*ret_s = bench_now() - t0;
	kv_recovery_info(db, ri);
	kv_close(db);
	return 0;
}

int bench_open(int argc, char **argv)
{
	static const char intro[] =
	        "Fills N keys, closes, then times kv_open from the key-directory image the close\n"
	        "wrote, from hint files (the image removed) and from a full log scan (the hints\n"
	        "removed too).\n"
	        "--cold empties the page cache before each open (root), so both read the disk.\n";
	struct common c;
	struct kv_options o;
	struct kv_recovery_info ri_img, ri_hint, ri_scan;
	struct kv_stats st;
	kv_db *db;
	double t_img, t_hint, t_scan;
	char *dir;
	int rv;

	if ((rv = parse_common("open", intro, argc, argv, &c)) != 0)
		return rv == 1 ? 0 : rv;
	if ((dir = make_dir(c.dir, "open")) == NULL)
		return 1;
	kv_options_init(&o);
	o.sync = KV_SYNC_NONE;
	o.background = false;
	o.merge_ratio_pct = 0;
	if ((rv = kv_open(dir, &o, &db)) != 0 || (rv = fill(db, &c, 1, c.keys)) != 0) {
		fprintf(stderr, "kvbench open: fill: %s\n", kv_strerror(rv));
		return 1;
	}
	kv_stats(db, &st);
	kv_close(db);

	if (timed_open(dir, &o, c.cold, &t_img, &ri_img) != 0)
		return 1;
	if (!ri_img.keydir_image) {
		fprintf(stderr, "kvbench open: the key-directory image was not used\n");
		return 1;
	}
	remove_image(dir);
	if (timed_open(dir, &o, c.cold, &t_hint, &ri_hint) != 0)
		return 1;
	remove_image(dir);
	remove_hints(dir);
	if (timed_open(dir, &o, c.cold, &t_scan, &ri_scan) != 0)
		return 1;
	bench_rmtree(dir);

	if (c.json) {
		(void)report_print_packed(
		        stdout, "{s:s,s:o,s:i,s:i,s:o,s:i,s:o,s:o,s:o,s:o}", "bench", "open",
		        "keys", report_u64(st.keys), "key_size", (int)c.key_size, "value_size",
		        (int)c.value_size, "disk_bytes", report_u64(st.disk_bytes), "segments",
		        (int)ri_hint.segments, "open_image_s", report_real(t_img, 4),
		        "open_hints_s", report_real(t_hint, 4), "open_scan_s",
		        report_real(t_scan, 4), "records", report_u64(ri_scan.records));
	} else {
		printf("kvbench open --keys %" PRIu64 " --key-size %u --value-size %u%s\n", c.keys,
		       c.key_size, c.value_size, c.cold ? " --cold" : "");
		printf("%" PRIu64 " live keys, %" PRIu64 " records, %.1f MiB in %u segments\n",
		       st.keys, ri_scan.records, st.disk_bytes / 1048576.0, ri_hint.segments);
		printf("open from the image  : %8.3f s  (%5.0f k keys/s)\n", t_img,
		       ri_img.records / t_img / 1e3);
		printf("open from hint files : %8.3f s  (%5.0f k records/s, %u hints)\n", t_hint,
		       ri_hint.records / t_hint / 1e3, ri_hint.hints_loaded);
		printf("open by log scan     : %8.3f s  (%5.0f k records/s, %u segments scanned)\n",
		       t_scan, ri_scan.records / t_scan / 1e3, ri_scan.segments_scanned);
		printf("hint / scan          : %8.2fx faster\n", t_scan / t_hint);
		printf("image / hint         : %8.2fx faster\n", t_hint / t_img);
	}
	free(dir);
	return 0;
}

/* ---- merge ------------------------------------------------------------- */

struct writer {
	kv_db *db;
	const struct common *c;
	atomic_int stop;
	atomic_int phase;    /* 0 before the merge, 1 while it runs */
	struct hist *lat[2]; /* put latency by phase, ns */
	int err;
};

/* Percentile p of h in microseconds. */
static uint64_t pct(const struct hist *h, double p)
{
	return hist_pct(h, p) / 1000;
}

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	char key[256], *val = malloc(w->c->value_size);
	uint64_t s = 42;

	memset(val, 'w', w->c->value_size);
	while (!atomic_load(&w->stop)) {
		uint64_t k = bench_rng(&s) % w->c->keys, t0;
		int phase = atomic_load(&w->phase);
		snprintf(key, sizeof(key), "%0*" PRIu64, (int)w->c->key_size, k);
		t0 = bench_now_ns();
		if (kv_put(w->db, key, w->c->key_size, val, w->c->value_size, NULL, NULL) != 0) {
			w->err = 1;
			break;
		}
		hist_add(w->lat[phase], bench_now_ns() - t0);
	}
	free(val);
	return NULL;
}

int bench_merge(int argc, char **argv)
{
	static const char intro[] =
	        "Writes every key twice (half the log dead), then merges while a writer thread\n"
	        "keeps writing (sync=none); reports merge time, space reclaimed and the writer's\n"
	        "put latency before and during the merge.\n";
	struct common c;
	struct kv_options o;
	struct kv_stats before, after;
	struct writer w;
	pthread_t th;
	kv_db *db;
	double t0, t_merge, t_base;
	char *dir;
	int rv;

	if ((rv = parse_common("merge", intro, argc, argv, &c)) != 0)
		return rv == 1 ? 0 : rv;
	if ((dir = make_dir(c.dir, "merge")) == NULL)
		return 1;
	kv_options_init(&o);
	o.sync = KV_SYNC_NONE;
	o.background = false;
	o.merge_ratio_pct = 0;
	if ((rv = kv_open(dir, &o, &db)) != 0 || (rv = fill(db, &c, 1, c.keys)) != 0 ||
	    (rv = fill(db, &c, 1, c.keys)) != 0) {
		fprintf(stderr, "kvbench merge: fill: %s\n", kv_strerror(rv));
		return 1;
	}
	memset(&w, 0, sizeof(w));
	w.db = db;
	w.c = &c;
	if ((w.lat[0] = calloc(1, sizeof(struct hist))) == NULL ||
	    (w.lat[1] = calloc(1, sizeof(struct hist))) == NULL) {
		fprintf(stderr, "kvbench merge: out of memory\n");
		free(w.lat[0]);
		kv_close(db);
		return 1;
	}
	pthread_create(&th, NULL, writer_main, &w);
	/* a baseline as long as... one second of writes without a merge */
	t0 = bench_now();
	while (bench_now() - t0 < 1.0)
		usleep(10000);
	t_base = bench_now() - t0;
	kv_stats(db, &before);
	atomic_store(&w.phase, 1);
	t0 = bench_now();
	rv = kv_merge(db);
	t_merge = bench_now() - t0;
	atomic_store(&w.stop, 1);
	pthread_join(th, NULL);
	kv_stats(db, &after);
	kv_close(db);
	bench_rmtree(dir);
	if (rv != 0 || w.err) {
		fprintf(stderr, "kvbench merge: %s\n", rv ? kv_strerror(rv) : "writer failed");
		return 1;
	}
	if (c.json) {
		(void)report_print_packed(stdout, "{s:s,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}",
		                          "bench", "merge", "keys", report_u64(c.keys), "merge_s",
		                          report_real(t_merge, 3), "disk_before",
		                          report_u64(before.disk_bytes), "disk_after",
		                          report_u64(after.disk_bytes), "put_p99_us_idle",
		                          report_u64(pct(w.lat[0], 0.99)), "put_p99_us_merge",
		                          report_u64(pct(w.lat[1], 0.99)), "put_max_us_idle",
		                          report_u64(pct(w.lat[0], 1.0)), "put_max_us_merge",
		                          report_u64(pct(w.lat[1], 1.0)), "puts_per_s_idle",
		                          report_real(w.lat[0]->n / t_base, 0), "puts_per_s_merge",
		                          report_real(w.lat[1]->n / t_merge, 0));
	} else {
		printf("kvbench merge --keys %" PRIu64 " --key-size %u --value-size %u\n", c.keys,
		       c.key_size, c.value_size);
		printf("merge: %.2f s, log %.1f MiB -> %.1f MiB (%.0f%% reclaimed)\n", t_merge,
		       before.disk_bytes / 1048576.0, after.disk_bytes / 1048576.0,
		       100.0 * (1.0 - (double)after.disk_bytes / (double)before.disk_bytes));
		printf("writer (sync=none)   puts/s    p50 us   p99 us   max us\n");
		printf("  without merge   %9.0f %9" PRIu64 " %8" PRIu64 " %8" PRIu64 "\n",
		       w.lat[0]->n / t_base, pct(w.lat[0], 0.5), pct(w.lat[0], 0.99),
		       pct(w.lat[0], 1.0));
		printf("  during merge    %9.0f %9" PRIu64 " %8" PRIu64 " %8" PRIu64 "\n",
		       w.lat[1]->n / t_merge, pct(w.lat[1], 0.5), pct(w.lat[1], 0.99),
		       pct(w.lat[1], 1.0));
	}
	free(w.lat[0]);
	free(w.lat[1]);
	free(dir);
	return 0;
}
