/*
 * bench/device.c — kvbench device: the block-device storage backend
 * (kv_store_options.device) measured side by side with fio on the same
 * device, in the same run.
 *
 *   kvbench device --device PATH --yes-format [--force] [--file-size B]
 *                  [--extent-size B] [--sizes LIST] [--writers LIST]
 *                  [--sync LIST] [--seconds S] [--warmup S]
 *                  [--get-keys N] [--read-cache B] [--fio PATH | --no-fio]
 *                  [--dir DIR] [--quick] [--json | --markdown]
 *
 * PATH (a block device, or a regular file standing in for one) is
 * FORMATTED, again before every cell: nothing runs without --yes-format.
 * The first format of the run passes --force to kv_dev_format (which
 * refuses a device carrying a file system, a partition table, LVM or
 * another kvd without it); the later ones force, since what the device then
 * carries was written by this run (kvd's format, fio's data).
 *
 * Put cells, for every value size of --sizes, sync mode of --sync and
 * writer count of --writers (in that nesting):
 *   1. kv_dev_format; kv_store_open on the device (read cache: the
 *      default, KV_DEV_CACHE_DEFAULT); one tenant created with the cell's
 *      sync (none: acknowledged once written to the device; always: once
 *      synced, writers arriving together sharing one sync);
 *   2. that many threads kv_put distinct keys ("w" + thread + sequence)
 *      with values of the cell's size cut from random bytes, for --warmup
 *      seconds not recorded, then --seconds recorded (or until the cell
 *      has written its byte budget, half the device, whichever comes
 *      first, so no cell runs out of space); every put started in the
 *      recorded window is timed into a log-linear histogram; ops/s =
 *      recorded puts / (last put's end - warm-up end) (every writer records
 *      one put at least, so a cell may run past --seconds on a loaded
 *      machine), MB/s = ops/s x
 *      value size / 1e6; the tenant's write counters (kv_stats) give puts
 *      per sync;
 *   3. the store is closed, then fio writes the same device: --rw=write
 *      --bs=SIZE --iodepth=WRITERS --numjobs=1 over the same budget,
 *      --ioengine=io_uring --direct=1, time based for the same warm-up
 *      (--ramp_time) and seconds; with sync=always also --sync=dsync
 *      (fio opens the device O_DSYNC: every write is durable when it
 *      completes, the guarantee kvd's sync=always gives a put; fio's
 *      --sync=1 is O_SYNC, which adds metadata a raw device does not have,
 *      and --fdatasync=1 issues a separate fdatasync after each write).
 * Get cell, after the put cells: a format, a tenant (sync=none) filled
 * with --get-keys keys of 4 KiB values by 4 threads, the store closed and
 * opened again with a read cache of --read-cache bytes (small against the
 * data: gets go to the device), one reader doing random gets for the
 * cell's time, each checked (length, and the key's number the fill stamped
 * into the value); then fio --rw=randread --bs=4k --iodepth=1 over the
 * region the fill wrote (rounded up to whole extents, plus two), which is
 * all written: no sparse holes read as zeros.
 *
 * fio's figures come from its JSON (--output-format=json, parsed with
 * jansson): bw_bytes, iops, and clat_ns's p50 and p99 (completion latency;
 * its submission latency is left out, which flatters fio a little).
 * Ratios: kvd / fio for throughput, fio / kvd for latency: above 1, kvd is
 * ahead. The targets (docs/BENCHMARKS.md, "Block device") are each said
 * to be met or missed.
 *
 * Exits 0 when every cell ran with no failed operation and every fio run
 * asked for succeeded (fio not installed: its side is skipped and said);
 * 1 otherwise; 2 for a usage error (a device not given or not agreed to be
 * formatted, a bad value).
 */
#include "device_bench.h"

#include "bench.h"
#include "hist.h"
#include "opt.h"
#include "report.h"
#include "rng.h"
#include "runenv.h"

#include "kvengine.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <pthread.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static const uint64_t dv_sizes_default[] = {4096, 65536, 1048576};
static const uint64_t dv_writers_default[] = {1, 16, 64};
static const uint64_t dv_writers_quick[] = {1, 4};
const char *const dv_sync_names[DV_SYNC_MODES] = {"none", "always", "flush"};

/* ---- the device ------------------------------------------------------------------- */

/* Checks PATH, creates it with --file-size when asked, fills b's device facts.
 * 0, or -1 (said). */
static int dv_device_probe(struct dv_bench *b)
{
	const struct dv_opts *o = &b->o;
	struct stat st;
	int fd;

	if (stat(o->device, &st) != 0 && errno == ENOENT && o->file_size > 0) {
		if ((fd = open(o->device, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) < 0 ||
		    ftruncate(fd, (off_t)o->file_size) != 0) {
			fprintf(stderr, "kvbench device: creating %s: %s\n", o->device,
			        strerror(errno));
			if (fd >= 0)
				close(fd);
			return -1;
		}
		close(fd);
	}
	if (stat(o->device, &st) != 0) {
		fprintf(stderr, "kvbench device: %s: %s\n", o->device, strerror(errno));
		return -1;
	}
	if (S_ISREG(st.st_mode)) {
		char fs[64];
		b->dev_bytes = (uint64_t)st.st_size;
		bench_fs_name(o->device, fs, sizeof fs);
		bench_fmt(b->dev_info, sizeof b->dev_info,
		          "%s: a regular file of %" PRIu64 " MiB on %s (standing in for a device)",
		          o->device, b->dev_bytes >> 20, fs);
		return 0;
	}
	if (!S_ISBLK(st.st_mode)) {
		fprintf(stderr, "kvbench device: %s is neither a block device nor a regular file\n",
		        o->device);
		return -1;
	}
	b->is_block = true;
	if ((fd = open(o->device, O_RDONLY | O_CLOEXEC)) < 0) {
		fprintf(stderr, "kvbench device: %s: %s\n", o->device, strerror(errno));
		return -1;
	}
	{
		uint64_t bytes = 0;
		int lbs = 0;
		char sys[256], backing[512] = "", dio[16] = "";
		FILE *f;
		if (ioctl(fd, BLKGETSIZE64, &bytes) != 0 || ioctl(fd, BLKSSZGET, &lbs) != 0) {
			fprintf(stderr, "kvbench device: %s: size: %s\n", o->device,
			        strerror(errno));
			close(fd);
			return -1;
		}
		b->dev_bytes = bytes;
		bench_fmt(sys, sizeof sys, "/sys/dev/block/%u:%u/loop/backing_file",
		          major(st.st_rdev), minor(st.st_rdev));
		if ((f = fopen(sys, "r")) != NULL) {
			if (fgets(backing, sizeof backing, f) == NULL)
				backing[0] = '\0';
			backing[strcspn(backing, "\n")] = '\0';
			fclose(f);
		}
		bench_fmt(sys, sizeof sys, "/sys/dev/block/%u:%u/loop/dio", major(st.st_rdev),
		          minor(st.st_rdev));
		if ((f = fopen(sys, "r")) != NULL) {
			if (fgets(dio, sizeof dio, f) == NULL)
				dio[0] = '\0';
			dio[strcspn(dio, "\n")] = '\0';
			fclose(f);
		}
		bench_fmt(b->dev_info, sizeof b->dev_info,
		          "%s: a block device of %" PRIu64 " MiB, %d-byte logical sectors%s%s%s%s",
		          o->device, bytes >> 20, lbs, backing[0] ? "; a loop device over " : "",
		          backing, dio[0] ? ", direct I/O " : "",
		          dio[0] ? (dio[0] == '1' ? "on" : "off") : "");
	}
	close(fd);
	return 0;
}

/* Formats the device for the next cell. 0, or -1 with err filled. */
static int dv_format(struct dv_bench *b, char *err, size_t len)
{
	struct kv_dev_format_options fo = {
	        .extent_size = b->o.extent_size,
	        .force = b->o.force || b->formatted,
	};
	char e[DV_ERR_MAX] = "";
	int rv = kv_dev_format(b->o.device, &fo, e, sizeof e);

	if (rv != 0) {
		bench_fmt(err, len, "kv_dev_format: %s%s%s%s", kv_strerror(rv), e[0] ? " (" : "", e,
		          e[0] ? ")" : "");
		if (rv == KV_EREFUSED && !b->formatted)
			bench_fmt(err + strlen(err), len - strlen(err),
			          "; --force formats over it");
		return -1;
	}
	b->formatted = true;
	return 0;
}

/* A store on the device with a read cache of cache bytes (0: the default).
 * 0, or -1 with err filled. */
static int dv_store_open(struct dv_bench *b, uint64_t cache, enum dv_sync sync, kv_store **ret,
                         char *err, size_t len)
{
	struct kv_store_options so;
	int rv;

	kv_store_options_init(&so);
	so.device = b->o.device;
	so.device_cache_bytes = cache;
	so.device_sync = sync == DV_SYNC_FLUSH ? KV_DEV_SYNC_FLUSH : KV_DEV_SYNC_DSYNC;
	if ((rv = kv_store_open(NULL, &so, ret)) != 0) {
		bench_fmt(err, len, "kv_store_open on %s: %s", b->o.device, kv_strerror(rv));
		return -1;
	}
	return 0;
}

/* ---- threads ---------------------------------------------------------------------- */

/* The start line all threads of a cell wait at. */
struct dv_gate {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned ready;
	int go; /* 0 wait, 1 run, -1 cancelled */
	uint64_t t_warm, t_stop;
};

struct dv_run {
	struct dv_bench *b;
	struct dv_cell *c;
	kv_db *db;
	uint64_t keys; /* get cell and fill: keys 0..keys-1 */
	uint64_t budget;
	_Atomic uint64_t written;
	struct dv_gate g;
};

struct dv_thread {
	struct dv_run *r;
	unsigned idx;
	pthread_t tid;
	struct hist *h;
	uint64_t ops, errors, wrong, t_last;
	bool full, budget_hit;
	char err[DV_ERR_MAX];
};

#define dv_error(t, ...) bench_thread_error(&(t)->errors, (t)->err, sizeof((t)->err), __VA_ARGS__)

/* Waits at the gate; false when the cell was cancelled. */
static bool dv_wait_go(struct dv_gate *g)
{
	int go;

	pthread_mutex_lock(&g->mu);
	g->ready++;
	pthread_cond_broadcast(&g->cv);
	while (g->go == 0)
		pthread_cond_wait(&g->cv, &g->mu);
	go = g->go;
	pthread_mutex_unlock(&g->mu);
	return go > 0;
}

static void *dv_writer_main(void *arg)
{
	struct dv_thread *t = arg;
	struct dv_run *r = t->r;
	uint64_t size = r->c->size, j = 0;
	size_t vpos = ((size_t)t->idx * 65537u) % (DV_POOL_BYTES - size);

	if (!dv_wait_go(&r->g))
		return NULL;
	while (t->errors < DV_ERRORS_MAX) {
		char key[DV_KEY_MAX];
		int kl = snprintf(key, sizeof key, "w%04u-%012" PRIu64, t->idx, j++);
		uint64_t t0 = bench_now_ns(), t1;
		int rv;
		/* every writer records one put at least, so that a loaded machine
		 * does not leave a cell empty */
		if (t0 >= r->g.t_stop && (t->ops > 0 || t0 >= r->g.t_stop + DV_GRACE_NS))
			break;
		if (atomic_load(&r->written) >= r->budget && t->ops > 0) {
			t->budget_hit = true;
			break;
		}
		rv = kv_put(r->db, key, (size_t)kl, r->b->pool + vpos, size, NULL, NULL);
		if (rv == -ENOSPC) {
			t->full = true;
			break;
		}
		if (rv != 0) {
			dv_error(t, "kv_put %s: %s", key, kv_strerror(rv));
			continue;
		}
		t1 = bench_now_ns();
		t->t_last = t1;
		atomic_fetch_add(&r->written, size + (uint64_t)kl);
		vpos = (vpos + 4099) % (DV_POOL_BYTES - size);
		if (t0 >= r->g.t_warm) {
			hist_add(t->h, t1 - t0);
			t->ops++;
		}
	}
	return NULL;
}

static int dv_get_key(char *key, size_t len, uint64_t k)
{
	return snprintf(key, len, "g%012" PRIu64, k);
}

/* Fill thread idx: keys idx, idx + n, … with 4 KiB values, the key's
 * number stamped into the first 8 bytes. */
static void *dv_fill_main(void *arg)
{
	struct dv_thread *t = arg;
	struct dv_run *r = t->r;
	char value[DV_GET_VALUE];

	for (uint64_t k = t->idx; k < r->keys && t->errors < DV_ERRORS_MAX; k += DV_FILL_THREADS) {
		char key[DV_KEY_MAX];
		int kl = dv_get_key(key, sizeof key, k), rv;
		memcpy(value, r->b->pool + (k * 4099) % (DV_POOL_BYTES - DV_GET_VALUE),
		       DV_GET_VALUE);
		memcpy(value, &k, sizeof k);
		if ((rv = kv_put(r->db, key, (size_t)kl, value, sizeof value, NULL, NULL)) != 0)
			dv_error(t, "fill: kv_put %s: %s", key, kv_strerror(rv));
		else
			t->ops++;
	}
	return NULL;
}

static void *dv_reader_main(void *arg)
{
	struct dv_thread *t = arg;
	struct dv_run *r = t->r;
	uint64_t seed = 0x6e7d + t->idx;

	if (!dv_wait_go(&r->g))
		return NULL;
	while (t->errors < DV_ERRORS_MAX) {
		char key[DV_KEY_MAX];
		uint64_t k = bench_rng_below(&seed, r->keys), stamp, t0, t1;
		int kl = dv_get_key(key, sizeof key, k), rv;
		struct kv_value v;
		t0 = bench_now_ns();
		if (t0 >= r->g.t_stop && (t->ops > 0 || t0 >= r->g.t_stop + DV_GRACE_NS))
			break;
		if ((rv = kv_get(r->db, key, (size_t)kl, NULL, &v)) != 0) {
			dv_error(t, "kv_get %s: %s", key, kv_strerror(rv));
			continue;
		}
		t1 = bench_now_ns();
		if (v.len != DV_GET_VALUE) {
			t->wrong++;
		} else {
			memcpy(&stamp, v.data, sizeof stamp);
			if (stamp != k)
				t->wrong++;
		}
		kv_value_release(&v);
		t->t_last = t1;
		if (t0 >= r->g.t_warm) {
			hist_add(t->h, t1 - t0);
			t->ops++;
		}
	}
	return NULL;
}

/* Runs n threads of fn on r (gated when gated), then sums them into r->c.
 * 0, or -1 when a thread could not be started (said in the cell). */
static int dv_threads(struct dv_run *r, unsigned n, void *(*fn)(void *), bool gated)
{
	struct dv_cell *c = r->c;
	struct dv_thread *th = calloc(n, sizeof(*th));
	struct hist *all = calloc((size_t)n + 1, sizeof(struct hist));
	uint64_t t_last = 0;
	unsigned started = 0;
	int rv = 0;

	pthread_mutex_init(&r->g.mu, NULL);
	pthread_cond_init(&r->g.cv, NULL);
	r->g.ready = 0;
	r->g.go = 0;
	if (th == NULL || all == NULL) {
		bench_fmt(c->err, sizeof c->err, "out of memory for %u threads", n);
		rv = -1;
		goto out;
	}
	for (started = 0; started < n; started++) {
		th[started].r = r;
		th[started].idx = started;
		th[started].h = &all[started + 1];
		if (pthread_create(&th[started].tid, NULL, fn, &th[started]) != 0)
			break;
	}
	if (gated) {
		pthread_mutex_lock(&r->g.mu);
		while (r->g.ready < started)
			pthread_cond_wait(&r->g.cv, &r->g.mu);
		r->g.go = started == n ? 1 : -1;
		r->g.t_warm = bench_now_ns() + (uint64_t)(r->b->o.warmup * 1e9);
		r->g.t_stop = r->g.t_warm + (uint64_t)(r->b->o.seconds * 1e9);
		pthread_cond_broadcast(&r->g.cv);
		pthread_mutex_unlock(&r->g.mu);
	}
	for (unsigned i = 0; i < started; i++)
		pthread_join(th[i].tid, NULL);
	if (started < n) {
		bench_fmt(c->err, sizeof c->err, "could not start thread %u of %u", started + 1, n);
		rv = -1;
	}
	for (unsigned i = 0; i < started; i++) {
		struct dv_thread *t = &th[i];
		hist_merge(&all[0], t->h);
		c->ops += t->ops;
		c->errors += t->errors;
		c->wrong += t->wrong;
		c->full |= t->full;
		c->budget_hit |= t->budget_hit;
		if (t->t_last > t_last)
			t_last = t->t_last;
		if (c->err[0] == '\0' && t->err[0] != '\0')
			bench_fmt(c->err, sizeof c->err, "%s", t->err);
	}
	if (gated) {
		c->seconds = t_last > r->g.t_warm ? (double)(t_last - r->g.t_warm) / 1e9 : 0;
		c->p50 = hist_pct(&all[0], 0.50);
		c->p99 = hist_pct(&all[0], 0.99);
		c->p999 = hist_pct(&all[0], 0.999);
		c->max = all[0].max;
	}
out:
	pthread_cond_destroy(&r->g.cv);
	pthread_mutex_destroy(&r->g.mu);
	free(th);
	free(all);
	return rv;
}

/* ---- fio -------------------------------------------------------------------------- */

/* Finds fio (--fio, or `fio` in PATH) and its version; fills b->fio_skip
 * when it cannot run. */
static void dv_fio_find(struct dv_bench *b)
{
	const struct dv_opts *o = &b->o;
	char cmd[BENCH_PATH_MAX + 32];
	FILE *p;

	if (o->no_fio) {
		bench_fmt(b->fio_skip, sizeof b->fio_skip, "--no-fio");
		return;
	}
	if (strchr(o->fio, '/') != NULL) {
		if (access(o->fio, X_OK) != 0) {
			bench_fmt(b->fio_skip, sizeof b->fio_skip, "--fio %s: %s", o->fio,
			          strerror(errno));
			return;
		}
		bench_fmt(b->fio_path, sizeof b->fio_path, "%s", o->fio);
	} else if (!bench_find_in_path(o->fio, b->fio_path, sizeof b->fio_path)) {
		bench_fmt(b->fio_skip, sizeof b->fio_skip, "%s not found in PATH (--fio PATH)",
		          o->fio);
		return;
	}
	bench_fmt(cmd, sizeof cmd, "'%s' --version 2>/dev/null", b->fio_path);
	if ((p = popen(cmd, "r")) != NULL) {
		if (fgets(b->fio_version, sizeof b->fio_version, p) == NULL)
			b->fio_version[0] = '\0';
		b->fio_version[strcspn(b->fio_version, "\n")] = '\0';
		pclose(p);
	}
}

/* The job's figures for rw ("read" or "write") from fio's JSON at path. */
static int dv_fio_parse(const char *path, const char *rw, struct dv_fio *f)
{
	json_error_t je;
	json_t *doc = json_load_file(path, 0, &je), *job, *side, *clat, *pct;
	int rv = -1;

	if (doc == NULL) {
		bench_fmt(f->err, sizeof f->err, "fio's JSON %s: line %d: %s", path, je.line,
		          je.text);
		return -1;
	}
	job = json_array_get(json_object_get(doc, "jobs"), 0);
	side = json_object_get(job, rw);
	clat = json_object_get(side, "clat_ns");
	pct = json_object_get(clat, "percentile");
	if (!json_is_object(side) || !json_is_object(pct)) {
		bench_fmt(f->err, sizeof f->err, "fio's JSON %s: no jobs[0].%s.clat_ns.percentile",
		          path, rw);
		goto out;
	}
	if (json_integer_value(json_object_get(job, "error")) != 0) {
		bench_fmt(f->err, sizeof f->err, "fio's job reports error %" JSON_INTEGER_FORMAT,
		          json_integer_value(json_object_get(job, "error")));
		goto out;
	}
	f->bw_bytes = json_number_value(json_object_get(side, "bw_bytes"));
	f->iops = json_number_value(json_object_get(side, "iops"));
	f->seconds = json_number_value(json_object_get(side, "runtime")) / 1e3;
	f->clat_p50 = json_number_value(json_object_get(pct, "50.000000")) / 1e3;
	f->clat_p99 = json_number_value(json_object_get(pct, "99.000000")) / 1e3;
	f->clat_mean = json_number_value(json_object_get(clat, "mean")) / 1e3;
	f->lat_mean =
	        json_number_value(json_object_get(json_object_get(side, "lat_ns"), "mean")) / 1e3;
	if (f->iops <= 0) {
		bench_fmt(f->err, sizeof f->err, "fio completed no I/O");
		goto out;
	}
	rv = 0;
out:
	json_decref(doc);
	return rv;
}

/* Runs fio on the device: rw ("write", "randread") of bs-byte blocks at
 * queue depth qd over the first size bytes, O_DSYNC when dsync. */
static void dv_fio_run(struct dv_bench *b, const char *rw, uint64_t bs, unsigned qd, bool dsync,
                       uint64_t size, struct dv_fio *f)
{
	const struct dv_opts *o = &b->o;
	char a[DV_FIO_ARGS][256], out[BENCH_PATH_MAX], log[BENCH_PATH_MAX], raw[4096];
	char *argv[DV_FIO_ARGS + 1];
	size_t n = 0, rawlen = 0;
	posix_spawn_file_actions_t fa;
	pid_t pid;
	int status, rv;

	if (b->fio_skip[0] != '\0') {
		f->state = DV_SKIPPED;
		bench_fmt(f->err, sizeof f->err, "%s", b->fio_skip);
		return;
	}
	b->fio_seq++;
	bench_fmt(out, sizeof out, "%s/fio-%u.json", b->run.base, b->fio_seq);
	bench_fmt(log, sizeof log, "%s/fio-%u.log", b->run.base, b->fio_seq);
	bench_fmt(a[n++], sizeof a[0], "%s", b->fio_path);
	bench_fmt(a[n++], sizeof a[0], "--name=kvbench");
	bench_fmt(a[n++], sizeof a[0], "--filename=%s", o->device);
	bench_fmt(a[n++], sizeof a[0], "--ioengine=io_uring");
	bench_fmt(a[n++], sizeof a[0], "--direct=1");
	bench_fmt(a[n++], sizeof a[0], "--rw=%s", rw);
	bench_fmt(a[n++], sizeof a[0], "--bs=%" PRIu64, bs);
	bench_fmt(a[n++], sizeof a[0], "--iodepth=%u", qd);
	bench_fmt(a[n++], sizeof a[0], "--numjobs=1");
	if (dsync)
		bench_fmt(a[n++], sizeof a[0], "--sync=dsync");
	bench_fmt(a[n++], sizeof a[0], "--size=%" PRIu64, size);
	bench_fmt(a[n++], sizeof a[0], "--time_based");
	bench_fmt(a[n++], sizeof a[0], "--runtime=%.0fms",
	          o->seconds * 1e3 < 1 ? 1 : o->seconds * 1e3);
	if (o->warmup > 0)
		bench_fmt(a[n++], sizeof a[0], "--ramp_time=%.0fms", o->warmup * 1e3);
	bench_fmt(a[n++], sizeof a[0], "--output-format=json");
	bench_fmt(a[n++], sizeof a[0], "--output=%s", out);
	/* the command as the report shows it: "fio", and fio's output file unnamed */
	for (size_t i = 0; i < n; i++) {
		const char *w = i == 0                               ? "fio"
		                : strncmp(a[i], "--output=", 9) == 0 ? "--output=FILE"
		                                                     : a[i];
		size_t l = strlen(w) + 1;
		argv[i] = a[i];
		if (rawlen + l <= sizeof raw) {
			memcpy(raw + rawlen, w, l);
			rawlen += l;
		}
	}
	argv[n] = NULL;
	bench_quote_argv(f->command, sizeof f->command, raw, rawlen);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, log, O_WRONLY | O_CREAT | O_TRUNC,
	                                 0644);
	posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
	rv = posix_spawn(&pid, b->fio_path, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rv != 0) {
		f->state = DV_FAILED;
		bench_fmt(f->err, sizeof f->err, "starting %s: %s", b->fio_path, strerror(rv));
		return;
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		f->state = DV_FAILED;
		bench_fmt(f->err, sizeof f->err, "fio exited with status %d (its output: %s)",
		          WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), log);
		return;
	}
	f->state = dv_fio_parse(out, strcmp(rw, "randread") == 0 ? "read" : "write", f) == 0
	                   ? DV_OK
	                   : DV_FAILED;
}

/* ---- cells ------------------------------------------------------------------------ */

static struct dv_cell *dv_cell_new(struct dv_bench *b)
{
	struct dv_cell *c;

	if (b->ncells == b->cap)
		return NULL;
	c = &b->cells[b->ncells++];
	memset(c, 0, sizeof(*c));
	return c;
}

/* Format, a store, a tenant with sync; its database in *ret_t. */
static int dv_tenant_up(struct dv_bench *b, enum dv_sync sync, uint64_t cache, kv_store **ret_s,
                        kv_tenant **ret_t, char *err, size_t len)
{
	struct kv_tenant_config tc;
	kv_store *s = NULL;
	int rv;

	if (dv_format(b, err, len) != 0 || dv_store_open(b, cache, sync, &s, err, len) != 0)
		return -1;
	kv_tenant_config_init(&tc);
	tc.sync = sync != DV_SYNC_NONE ? KV_SYNC_ALWAYS : KV_SYNC_NONE;
	if ((rv = kv_store_create(s, DV_TENANT, &tc)) != 0) {
		bench_fmt(err, len, "kv_store_create %s: %s", DV_TENANT, kv_strerror(rv));
		goto fail;
	}
	if ((rv = kv_store_get(s, DV_TENANT, ret_t)) != 0) {
		bench_fmt(err, len, "kv_store_get %s: %s", DV_TENANT, kv_strerror(rv));
		goto fail;
	}
	*ret_s = s;
	return 0;
fail:
	(void)kv_store_close(s);
	return -1;
}

/* Releases t and closes s; a failed close fails the cell. */
static void dv_tenant_down(struct dv_cell *c, kv_store *s, kv_tenant *t)
{
	int rv;

	if (t != NULL)
		kv_store_put(s, t);
	if ((rv = kv_store_close(s)) != 0 && c->state == DV_OK) {
		c->state = DV_FAILED;
		bench_fmt(c->err, sizeof c->err, "kv_store_close: %s", kv_strerror(rv));
	}
}

static void dv_put_cell(struct dv_bench *b, uint64_t size, enum dv_sync sync, unsigned writers)
{
	struct dv_cell *c = dv_cell_new(b);
	struct dv_run r = {.b = b, .c = c, .budget = b->budget};
	struct kv_stats st;
	kv_store *s = NULL;
	kv_tenant *t = NULL;

	if (c == NULL)
		return;
	c->size = size;
	c->sync = sync;
	c->threads = writers;
	c->state = DV_FAILED;
	if (dv_tenant_up(b, sync, 0, &s, &t, c->err, sizeof c->err) != 0)
		goto out;
	r.db = kv_tenant_db(t);
	c->state = dv_threads(&r, writers, dv_writer_main, true) == 0 ? DV_OK : DV_FAILED;
	c->bytes = atomic_load(&r.written);
	c->loadavg = runenv_loadavg();
	if (kv_stats(r.db, &st) == 0) {
		c->batches = st.batches;
		c->writes = st.batched_writes;
		c->syncs = st.syncs;
	}
	if (c->state == DV_OK && (c->errors > 0 || c->ops == 0)) {
		c->state = DV_FAILED;
		if (c->err[0] == '\0')
			bench_fmt(c->err, sizeof c->err, "no put completed in the recorded window");
	}
	dv_tenant_down(c, s, t);
	if (size % DV_FIO_ALIGN != 0) {
		c->fio.state = DV_SKIPPED;
		bench_fmt(c->fio.err, sizeof c->fio.err,
		          "%" PRIu64 " B is not a multiple of %u B, as O_DIRECT needs", size,
		          DV_FIO_ALIGN);
	} else {
		dv_fio_run(b, "write", size, writers, sync != DV_SYNC_NONE, b->budget, &c->fio);
	}
out:
	dv_progress(b->progress, c);
}

static void dv_get_cell(struct dv_bench *b)
{
	struct dv_cell *c = dv_cell_new(b);
	struct dv_run r = {.b = b, .c = c};
	uint64_t keys = b->o.get_keys, ext, t0;
	kv_store *s = NULL;
	kv_tenant *t = NULL;
	int rv;

	if (c == NULL)
		return;
	c->get = true;
	c->size = DV_GET_VALUE;
	c->threads = 1;
	c->state = DV_FAILED;
	if (keys * DV_GET_VALUE > b->budget)
		keys = b->budget / DV_GET_VALUE;
	r.keys = keys;
	if (dv_tenant_up(b, DV_SYNC_NONE, 0, &s, &t, c->err, sizeof c->err) != 0)
		goto out;
	r.db = kv_tenant_db(t);
	if (dv_threads(&r, DV_FILL_THREADS, dv_fill_main, false) != 0 || c->errors > 0) {
		dv_tenant_down(c, s, t);
		goto out;
	}
	c->ops = 0;
	kv_store_put(s, t);
	t = NULL;
	if ((rv = kv_store_close(s)) != 0) {
		bench_fmt(c->err, sizeof c->err, "kv_store_close after the fill: %s",
		          kv_strerror(rv));
		goto out;
	}
	/* a cold start: the device's blocks reach the cache only as gets ask */
	if (dv_store_open(b, b->o.read_cache, DV_SYNC_NONE, &s, c->err, sizeof c->err) != 0)
		goto out;
	t0 = bench_now_ns();
	if ((rv = kv_store_get(s, DV_TENANT, &t)) != 0) {
		bench_fmt(c->err, sizeof c->err, "kv_store_get %s after reopening: %s", DV_TENANT,
		          kv_strerror(rv));
		(void)kv_store_close(s);
		goto out;
	}
	c->activate_ms = (double)(bench_now_ns() - t0) / 1e6;
	r.db = kv_tenant_db(t);
	c->state = dv_threads(&r, 1, dv_reader_main, true) == 0 ? DV_OK : DV_FAILED;
	c->loadavg = runenv_loadavg();
	if (c->state == DV_OK && (c->errors > 0 || c->wrong > 0 || c->ops == 0)) {
		c->state = DV_FAILED;
		if (c->err[0] == '\0')
			bench_fmt(c->err, sizeof c->err,
			          "%" PRIu64 " gets of %" PRIu64 " returned a wrong value",
			          c->wrong, c->ops);
	}
	dv_tenant_down(c, s, t);
	/* fio reads where the fill wrote: its bytes, rounded up to extents, and
	 * two extents more for the device's own blocks */
	ext = b->o.extent_size ? b->o.extent_size : KV_DEV_EXTENT_SIZE_DEFAULT;
	c->region = ((keys * (DV_GET_VALUE + 64) + ext - 1) / ext + 2) * ext;
	if (c->region > b->dev_bytes)
		c->region = b->dev_bytes / 4096 * 4096;
	dv_fio_run(b, "randread", 4096, 1, false, c->region, &c->fio);
out:
	dv_progress(b->progress, c);
}

/* ---- options ---------------------------------------------------------------------- */

static int parse_sizes(const char *cmd, const char *name, const char *arg, void *val)
{
	struct dv_opts *o = val;

	return bench_parse_u64_list(cmd, name, arg, 1, DV_VALUE_MAX, o->sizes, DV_LIST_MAX,
	                            &o->nsizes);
}

static int parse_writers(const char *cmd, const char *name, const char *arg, void *val)
{
	struct dv_opts *o = val;

	return bench_parse_u64_list(cmd, name, arg, 1, DV_WRITERS_MAX, o->writers, DV_LIST_MAX,
	                            &o->nwriters);
}

static int parse_sync(const char *cmd, const char *name, const char *arg, void *val)
{
	return bench_parse_names(cmd, name, arg, dv_sync_names, DV_SYNC_MODES, val);
}

static int parse_extent(const char *cmd, const char *name, const char *arg, void *val)
{
	uint64_t v;

	if (bench_parse_u64(cmd, name, arg, KV_DEV_EXTENT_SIZE_MIN, 1ull << 40, &v) != 0)
		return -EINVAL;
	if ((v & (v - 1)) != 0) {
		fprintf(stderr, "kvbench %s: %s takes a power of two, not '%s'\n", cmd, name, arg);
		return -EINVAL;
	}
	*(uint64_t *)val = v;
	return 0;
}

/* 0, 1 for --help, or -EINVAL. */
static int parse(int argc, char **argv, struct dv_opts *o)
{
	char quick[256];
	const struct bench_opt opts[] = {
	        {BENCH_OPT("device", BENCH_OPT_STRING, &o->device, "PATH",
	                   "block device (or regular file) to FORMAT and measure;\n"
	                   "required")},
	        {BENCH_OPT("yes-format", BENCH_OPT_FLAG, &o->yes_format, NULL,
	                   "agree that everything on --device is lost: it is\n"
	                   "formatted before every cell")},
	        {BENCH_OPT("force", BENCH_OPT_FLAG, &o->force, NULL,
	                   "format even over a file system, partition table, LVM\n"
	                   "or kvd signature (kv_dev_format's force)")},
	        {BENCH_OPT("file-size", BENCH_OPT_U64, &o->file_size, "B",
	                   "create --device as a regular file of B bytes when it\n"
	                   "does not exist (default: it must exist)"),
	         .lo = 16ull << 20, .hi = 1ull << 44},
	        {BENCH_OPT("extent-size", BENCH_OPT_FUNC, &o->extent_size, "B",
	                   "the format's extent size, a power of two (default:\n"
	                   "kv_dev_format's, 64 MiB)"),
	         .parse = parse_extent},
	        {BENCH_OPT("sizes", BENCH_OPT_FUNC, o, "LIST",
	                   "put value sizes in bytes (default 4096,65536,1048576)"),
	         .parse = parse_sizes},
	        {BENCH_OPT("writers", BENCH_OPT_FUNC, o, "LIST",
	                   "writer threads = fio's queue depth (default 1,16,64)"),
	         .set = &o->writers_set, .parse = parse_writers},
	        {BENCH_OPT("sync", BENCH_OPT_FUNC, o->sync, "LIST",
	                   "none,always,flush (default none,always): the tenant's\n"
	                   "sync; under always a synced append is one RWF_DSYNC\n"
	                   "write, under flush the write linked to an fdatasync\n"
	                   "(kv_store_options.device_sync); fio --sync=dsync for\n"
	                   "both"),
	         .parse = parse_sync},
	        {BENCH_OPT("seconds", BENCH_OPT_DOUBLE, &o->seconds, "S",
	                   "recorded seconds per cell, kvd and fio each (default %D)"),
	         .lo = 0.01, .hi = 3600, .set = &o->seconds_set},
	        {BENCH_OPT("warmup", BENCH_OPT_DOUBLE, &o->warmup, "S",
	                   "seconds of each cell not recorded (default %D)"),
	         .lo = 0, .hi = 600, .set = &o->warmup_set},
	        {BENCH_OPT("get-keys", BENCH_OPT_U64, &o->get_keys, "N",
	                   "keys of 4 KiB values the get cell fills (default %D)"),
	         .lo = 16, .hi = 1ull << 32, .set = &o->get_keys_set},
	        {BENCH_OPT("read-cache", BENCH_OPT_U64, &o->read_cache, "B",
	                   "the get cell's device_cache_bytes (default %D)"),
	         .lo = 4096, .hi = 1ull << 40, .set = &o->read_cache_set},
	        {BENCH_OPT("fio", BENCH_OPT_STRING, &o->fio, "PATH", "fio binary (default %D)")},
	        {BENCH_OPT("no-fio", BENCH_OPT_FLAG, &o->no_fio, NULL,
	                   "measure kvd only, no fio side")},
	        {BENCH_OPT("dir", BENCH_OPT_STRING, &o->dir, "DIR",
	                   "make the run's directory (fio's output) in DIR\n"
	                   "(default /tmp)")},
	        {BENCH_OPT("quick", BENCH_OPT_FLAG, &o->quick, NULL, quick)},
	        BENCH_OPTS_REPORT(&o->markdown, &o->json),
	};
	const struct bench_cmd cmd = {
	        "device",
	        "The block-device backend (kv_store_options.device): puts of 4 KiB to 1 MiB\n"
	        "values at sync=none and sync=always, 1-64 writers, and 4 KiB random gets,\n"
	        "each cell followed by fio on the same device (io_uring, O_DIRECT, same block\n"
	        "size and queue depth). The device is FORMATTED before every cell.\n",
	        "Exits 0 only when every cell completed with no failed operation and every\n"
	        "fio run asked for succeeded.\n",
	        opts,
	        sizeof opts / sizeof opts[0],
	};
	int rv;

	bench_fmt(quick, sizeof quick,
	          "smoke run: 1,4 writers, %.2f s per cell, %llu get keys,\n"
	          "a %llu KiB read cache (explicit options win)",
	          DV_QUICK_SECONDS, DV_QUICK_GET_KEYS, DV_QUICK_CACHE >> 10);
	if ((rv = bench_opts_parse(&cmd, argc, argv)) != 0)
		return rv;
	if (o->json && o->markdown) {
		fprintf(stderr, "kvbench device: --json and --markdown exclude each other\n");
		return -EINVAL;
	}
	if (o->device == NULL) {
		fprintf(stderr, "kvbench device: --device PATH is required\n");
		return -EINVAL;
	}
	if (!o->yes_format) {
		fprintf(stderr,
		        "kvbench device: %s is formatted before every cell, and everything on it "
		        "is lost: give --yes-format to go on\n",
		        o->device);
		return -EINVAL;
	}
	if (!o->sync[DV_SYNC_NONE] && !o->sync[DV_SYNC_ALWAYS] && !o->sync[DV_SYNC_FLUSH]) {
		fprintf(stderr, "kvbench device: --sync is empty\n");
		return -EINVAL;
	}
	if (o->quick) {
		if (!o->seconds_set)
			o->seconds = DV_QUICK_SECONDS;
		if (!o->warmup_set)
			o->warmup = DV_QUICK_WARMUP;
		if (!o->writers_set) {
			memcpy(o->writers, dv_writers_quick, sizeof dv_writers_quick);
			o->nwriters = sizeof dv_writers_quick / sizeof dv_writers_quick[0];
		}
		if (!o->get_keys_set)
			o->get_keys = DV_QUICK_GET_KEYS;
		if (!o->read_cache_set)
			o->read_cache = DV_QUICK_CACHE;
	}
	return 0;
}

/* ---- entry point ------------------------------------------------------------------ */

static bool dv_all_ok(const struct dv_bench *b)
{
	for (size_t i = 0; i < b->ncells; i++) {
		const struct dv_cell *c = &b->cells[i];
		if (c->state != DV_OK || c->errors > 0 || c->wrong > 0 || c->fio.state == DV_FAILED)
			return false;
	}
	return b->ncells > 0;
}

int bench_device(int argc, char **argv)
{
	struct dv_bench *b = calloc(1, sizeof(*b));
	struct dv_target targets[16];
	struct report rep = {0};
	struct dv_opts *o;
	size_t nt;
	bool ok;
	int rv, code = 1;

	if (b == NULL || report_init(&rep) != 0) {
		fprintf(stderr, "kvbench device: out of memory\n");
		free(b);
		report_fini(&rep);
		return 1;
	}
	o = &b->o;
	o->fio = "fio";
	o->seconds = DV_SECONDS_DEFAULT;
	o->warmup = DV_WARMUP_DEFAULT;
	o->get_keys = DV_GET_KEYS_DEFAULT;
	o->read_cache = DV_CACHE_DEFAULT;
	o->sync[DV_SYNC_NONE] = o->sync[DV_SYNC_ALWAYS] = true;
	memcpy(o->sizes, dv_sizes_default, sizeof dv_sizes_default);
	o->nsizes = sizeof dv_sizes_default / sizeof dv_sizes_default[0];
	memcpy(o->writers, dv_writers_default, sizeof dv_writers_default);
	o->nwriters = sizeof dv_writers_default / sizeof dv_writers_default[0];
	if ((rv = parse(argc, argv, o)) != 0) {
		free(b);
		report_fini(&rep);
		return rv > 0 ? 0 : 2;
	}
	b->progress = o->json || o->markdown ? stderr : stdout;
	if (dv_device_probe(b) != 0) {
		free(b);
		report_fini(&rep);
		return 2;
	}
	{
		uint64_t ext = o->extent_size ? o->extent_size : KV_DEV_EXTENT_SIZE_DEFAULT;
		if (b->dev_bytes < 8 * ext) {
			fprintf(stderr,
			        "kvbench device: %s has %" PRIu64
			        " MiB: at least 8 extents (%" PRIu64
			        " MiB) are needed; a smaller --extent-size fits more\n",
			        o->device, b->dev_bytes >> 20, (8 * ext) >> 20);
			free(b);
			report_fini(&rep);
			return 2;
		}
		b->budget = b->dev_bytes / 2 / (1u << 20) * (1u << 20);
	}
	for (size_t i = 0; i < o->nsizes; i++)
		if (o->sizes[i] >
		    (o->extent_size ? o->extent_size : KV_DEV_EXTENT_SIZE_DEFAULT) / 2) {
			fprintf(stderr,
			        "kvbench device: --sizes %" PRIu64
			        ": a record lies in one extent; give an --extent-size of twice the "
			        "value size at least\n",
			        o->sizes[i]);
			free(b);
			report_fini(&rep);
			return 2;
		}
	for (size_t i = 0; i < o->nsizes; i++)
		if (o->sizes[i] > b->budget / 4) {
			fprintf(stderr,
			        "kvbench device: --sizes %" PRIu64
			        " is too large for a device of %" PRIu64 " MiB\n",
			        o->sizes[i], b->dev_bytes >> 20);
			free(b);
			report_fini(&rep);
			return 2;
		}
	if (runenv_init(&b->run, "device", argc, argv, o->dir, NULL, NULL, NULL, false) != 0)
		goto out;
	b->cap = o->nsizes * DV_SYNC_MODES * o->nwriters + 1;
	if ((b->pool = malloc(DV_POOL_BYTES)) == NULL ||
	    (b->cells = calloc(b->cap, sizeof(*b->cells))) == NULL) {
		fprintf(stderr, "kvbench device: out of memory\n");
		goto out;
	}
	runenv_fill_pool(b->pool, DV_POOL_BYTES, 0xde71ce);
	/* the first format says at once whether the device may be formatted */
	{
		char err[DV_ERR_MAX];
		if (dv_format(b, err, sizeof err) != 0) {
			fprintf(stderr, "kvbench device: %s: %s\n", o->device, err);
			(void)runenv_finish(&b->run, true, "");
			goto out;
		}
	}
	dv_fio_find(b);
	fprintf(b->progress, "kvbench device: %s\n%s\n", b->run.command, b->dev_info);
	if (b->fio_skip[0] != '\0')
		fprintf(b->progress, "fio: %s, its side skipped\n", b->fio_skip);
	dv_progress_head(b->progress);
	for (size_t si = 0; si < o->nsizes; si++)
		for (int sy = 0; sy < DV_SYNC_MODES; sy++)
			for (size_t wi = 0; wi < o->nwriters && o->sync[sy]; wi++)
				dv_put_cell(b, o->sizes[si], (enum dv_sync)sy,
				            (unsigned)o->writers[wi]);
	dv_get_cell(b);
	ok = dv_all_ok(b);
	nt = dv_targets(b, targets, sizeof targets / sizeof targets[0]);
	dv_header(b, &rep);
	if (o->json)
		dv_report_json(b, &rep, ok, targets, nt);
	else if (o->markdown)
		dv_report_markdown(b, &rep, targets, nt);
	else
		dv_report_text(b, &rep, targets, nt);
	code = runenv_finish(&b->run, ok, "a cell failed or had errors");
out:
	free(b->cells);
	free(b->pool);
	free(b);
	report_fini(&rep);
	return code;
}
