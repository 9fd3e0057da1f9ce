/*
 * bench/activate.c — kvbench activate: how long a passive tenant takes to
 * come back, in process and through kvd.
 *
 *   kvbench activate [--keys LIST] [--repeat R] [--kvd PATH] [--no-kvd]
 *                    [--dir DIR] [--quick] [--json | --markdown]
 *
 * For each N of --keys:
 *   1. load: a store in a fresh directory (kv_store_open), tenant "bench"
 *      (sync=none), N distinct keys in random order through kv_batch on the
 *      tenant's database, kv_store_close — the tenant is now passive, with a
 *      hint file per sealed segment and the key-directory image.
 *   2. in process: the store reopened with kvd's options (external event
 *      loop, no background thread); kv_store_activate timed R times for each
 *      of: from the key-directory image with the files in the page cache
 *      (warm), the same after POSIX_FADV_DONTNEED on every file of the
 *      tenant (cold), from hint files (the image deleted first), warm and
 *      cold, and by full log replay (every .hint file deleted too), warm and
 *      cold; recovery's report must say the image was used in the image
 *      cases alone. Each activation is followed by kv_store_passivate. After the first
 *      activation from hints: key-directory bytes per key (kv_store_info's
 *      stats.keydir_bytes / keys) and, as a cross-check, the bytes malloc
 *      handed out during the activation (mallinfo2) per key.
 *   3. through kvd (unless --no-kvd): kvd started on the directory (the
 *      tenant is passive at start), the same six cases R times each: the
 *      first kvc_get of an existing key timed end to end (it includes the
 *      activation), then a second Get, then the median of 1000 more Gets;
 *      then the same activation by TenantActivate (kvd's own activation_us);
 *      TenantPassivate between them; then a neighbour: a small tenant the
 *      same kvd worker owns, read back to back by its own connection, its
 *      Get latency (p50, p99, max) over a second with nothing activating and
 *      while the bench tenant activates R times from its hint files (kvd
 *      activates off the worker: the neighbour should not notice); SIGTERM
 *      at the end, exit 0 checked.
 * Every row reports the median of its R repetitions, with the fastest and
 * slowest. Exits 0 only when every step worked and every Get found its value.
 */
#include "bench.h"
#include "kvdrun.h"
#include "opt.h"
#include "report.h"
#include "rng.h"

#include "kvclient.h"
#include "kvengine.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#define AB_KEYS_DEFAULT   1000000ull
#define AB_QUICK_KEYS     10000ull
#define AB_KEYS_MAX       200000000ull
#define AB_KLIST_MAX      8 /* entries of --keys */
#define AB_REPEAT_DEFAULT 3ull
#define AB_REPEAT_MAX     51ull
#define AB_KEY_SIZE       16   /* bytes, zero-padded decimal */
#define AB_VALUE_SIZE     100  /* bytes of random data */
#define AB_BATCH          1024 /* ops per kv_batch while loading */
#define AB_MORE_GETS      1000 /* Gets after the second, for a steady-state median */
#define AB_TENANT         "bench"
#define AB_PATH_MAX       4096
#define AB_ERR_MAX        512
#define AB_TIMEOUT_MS     120000 /* a first Get may activate a large tenant */

enum ab_case {
	C_IMAGE_WARM,
	C_IMAGE_COLD,
	C_HINT_WARM,
	C_HINT_COLD,
	C_SCAN_WARM,
	C_SCAN_COLD,
	C_COUNT
};

static const char *const ab_case_path[C_COUNT] = {"key-directory image", "key-directory image",
                                                  "hint files",          "hint files",
                                                  "log replay",          "log replay"};
static const char *const ab_case_from[C_COUNT] = {"image", "image",  "hints",
                                                  "hints", "replay", "replay"};
static const char *const ab_case_cache[C_COUNT] = {"warm", "cold", "warm", "cold", "warm", "cold"};

/* R samples and their summary. */
struct ab_series {
	double v[AB_REPEAT_MAX];
	size_t n;
};

struct ab_row {
	bool ran;
	struct ab_series activate_s;      /* kvbench's clock around kv_store_activate */
	struct ab_series engine_us;       /* the store's own last_activation_us */
	struct ab_series faults;          /* minor page faults of the activating thread */
	struct ab_series first_s;         /* first Get through kvd */
	struct ab_series second_s;        /* the Get after it */
	struct ab_series steady_s;        /* median of AB_MORE_GETS more */
	struct ab_series kvd_activate_us; /* TenantActivate's activation_us */
	uint32_t hints_loaded, segments_scanned, segments;
	uint64_t records;
};

struct ab_size {
	uint64_t keys;
	bool ok;
	char err[AB_ERR_MAX];
	double load_s;
	uint64_t disk_bytes, hint_bytes, live_keys;
	uint32_t segments_on_disk, hint_files;
	uint32_t segments_after; /* segment files after every activation and passivation */
	uint64_t keydir_bytes;
	int64_t malloc_bytes; /* during the first activation from hints */
	struct ab_row row[C_COUNT];
	char kvd_command[4096];
	bool kvd_ran, kvd_exit_ok;
	uint64_t passivate_retries;  /* TenantPassivate answered UNAVAILABLE "busy" */
	double passivate_wait_max_s; /* longest TenantPassivate, retries included */
	/* Gets of another tenant of the same kvd worker: with nothing activating,
	 * and while this one activates from hint files (neighbour()) */
	bool nb_ran;
	char nb_tenant[32];
	double nb_idle_p50_us, nb_idle_p99_us, nb_idle_max_us;
	double nb_act_p50_us, nb_act_p99_us, nb_act_max_us;
	uint64_t nb_idle_n, nb_act_n;
	double nb_act_ms; /* the activations' first Gets, summed */
};

struct ab_opts {
	uint64_t keys[AB_KLIST_MAX];
	size_t nkeys;
	uint64_t repeat;
	const char *kvd;
	bool use_kvd;
	const char *dir;
	bool quick, json, markdown;
	bool keys_set, repeat_set;
};

struct ab_bench {
	struct ab_opts o;
	char command[4096];
	char kvd_path[AB_PATH_MAX];     /* the kvd binary given or found */
	char kvd_bin[AB_PATH_MAX + 16]; /* its copy in base, which every kvd runs */
	char base[AB_PATH_MAX];
	char fs[64];
	char *pool;
	struct ab_size sizes[AB_KLIST_MAX];
	FILE *progress;
};

/* ---- small helpers --------------------------------------------------------- */

static void ab_key(char *buf, uint64_t id)
{
	for (size_t i = AB_KEY_SIZE; i > 0; i--) {
		buf[i - 1] = (char)('0' + id % 10);
		id /= 10;
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void series_add(struct ab_series *s, double v)
{
	if (s->n < AB_REPEAT_MAX)
		s->v[s->n++] = v;
}

/* The median (the upper middle one for an even count); min and max. */
static double series_median(const struct ab_series *s, double *ret_min, double *ret_max)
{
	double v[AB_REPEAT_MAX];

	if (s->n == 0) {
		if (ret_min)
			*ret_min = 0;
		if (ret_max)
			*ret_max = 0;
		return 0;
	}
	memcpy(v, s->v, s->n * sizeof(double));
	qsort(v, s->n, sizeof(double), cmp_double);
	if (ret_min)
		*ret_min = v[0];
	if (ret_max)
		*ret_max = v[s->n - 1];
	return v[s->n / 2];
}

static int64_t malloc_in_use(void)
{
	struct mallinfo2 mi = mallinfo2();

	return (int64_t)(mi.uordblks + mi.hblkhd);
}

/* Calls fn(path, name, arg) for every regular file of dir. */
static int each_file(const char *dir, int (*fn)(const char *path, const char *name, void *arg),
                     void *arg)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char p[AB_PATH_MAX + 256];
	int rv = 0;

	if (d == NULL)
		return -errno;
	while ((de = readdir(d)) != NULL && rv == 0) {
		struct stat st;
		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
		if (stat(p, &st) != 0 || !S_ISREG(st.st_mode))
			continue;
		rv = fn(p, de->d_name, arg);
	}
	closedir(d);
	return rv;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t l = strlen(s), k = strlen(suffix);
	return l >= k && strcmp(s + l - k, suffix) == 0;
}

static int drop_hint(const char *path, const char *name, void *arg)
{
	(void)arg;
	if (ends_with(name, ".hint") && unlink(path) != 0)
		return -errno;
	return 0;
}

/* Writes back and evicts a file's pages from the page cache. */
static int drop_cache(const char *path, const char *name, void *arg)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), rv = 0;

	(void)name;
	(void)arg;
	if (fd < 0)
		return -errno;
	if (fdatasync(fd) != 0)
		rv = -errno;
	else if ((rv = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)) != 0)
		rv = -rv;
	close(fd);
	return rv;
}

struct file_count {
	uint32_t seg, hint;
	uint64_t seg_bytes, hint_bytes;
};

static int count_file(const char *path, const char *name, void *arg)
{
	struct file_count *c = arg;
	struct stat st;

	if (stat(path, &st) != 0)
		return 0;
	if (ends_with(name, ".seg")) {
		c->seg++;
		c->seg_bytes += (uint64_t)st.st_size;
	} else if (ends_with(name, ".hint")) {
		c->hint++;
		c->hint_bytes += (uint64_t)st.st_size;
	}
	return 0;
}

/* Gets the tenant into the state a case starts from: the key-directory
 * image (written at every passivation) removed but for the image cases, hint
 * files removed for the log-replay cases, page cache dropped for the cold
 * ones. */
static int prepare(const char *tdir, enum ab_case k, char *err, size_t errlen)
{
	char path[AB_PATH_MAX];
	int rv;

	snprintf(path, sizeof(path), "%s/KEYDIR", tdir);
	if (k >= C_HINT_WARM && unlink(path) != 0 && errno != ENOENT) {
		rv = -errno;
		bench_fmt(err, errlen, "removing %s: %s", path, strerror(-rv));
		return rv;
	}
	if ((k == C_SCAN_WARM || k == C_SCAN_COLD) &&
	    (rv = each_file(tdir, drop_hint, NULL)) != 0) {
		bench_fmt(err, errlen, "removing hint files in %s: %s", tdir, strerror(-rv));
		return rv;
	}
	if ((k == C_IMAGE_COLD || k == C_HINT_COLD || k == C_SCAN_COLD) &&
	    (rv = each_file(tdir, drop_cache, NULL)) != 0) {
		bench_fmt(err, errlen, "dropping %s from the page cache: %s", tdir, strerror(-rv));
		return rv;
	}
	return 0;
}

/* ---- 1. load ------------------------------------------------------------------ */

static int load(struct ab_bench *b, struct ab_size *z, const char *dir)
{
	struct kv_store_options so;
	struct kv_tenant_config tc;
	struct kv_op *ops = calloc(AB_BATCH, sizeof(*ops));
	char(*keys)[AB_KEY_SIZE] = calloc(AB_BATCH, AB_KEY_SIZE);
	uint64_t *perm = malloc(z->keys * sizeof(uint64_t)), s = 42;
	kv_store *st = NULL;
	kv_tenant *t = NULL;
	struct kv_stats stats;
	size_t vpos = 0;
	double t0 = bench_now();
	int rv = -ENOMEM;

	if (ops == NULL || keys == NULL || perm == NULL) {
		bench_fmt(z->err, sizeof z->err, "out of memory for %" PRIu64 " keys", z->keys);
		goto out;
	}
	/* every key once, in random order */
	for (uint64_t i = 0; i < z->keys; i++)
		perm[i] = i;
	for (uint64_t i = z->keys - 1; i > 0; i--) {
		uint64_t j = bench_rng_below(&s, i + 1), x = perm[i];
		perm[i] = perm[j];
		perm[j] = x;
	}
	kv_store_options_init(&so);
	kv_tenant_config_init(&tc);
	tc.sync = KV_SYNC_NONE;
	if ((rv = kv_store_open(dir, &so, &st)) != 0 ||
	    (rv = kv_store_create(st, AB_TENANT, &tc)) != 0 ||
	    (rv = kv_store_get(st, AB_TENANT, &t)) != 0) {
		bench_fmt(z->err, sizeof z->err, "store %s: %s", dir, kv_strerror(rv));
		goto out;
	}
	for (uint64_t i = 0; i < z->keys;) {
		size_t n = 0;
		for (; n < AB_BATCH && i < z->keys; n++, i++) {
			ab_key(keys[n], perm[i]);
			ops[n] = (struct kv_op){.type = KV_OP_PUT,
			                        .key = keys[n],
			                        .key_len = AB_KEY_SIZE,
			                        .value = b->pool + vpos,
			                        .value_len = AB_VALUE_SIZE,
			                        .if_version = KV_ANY_VERSION};
			if ((vpos += 4099) >= (1u << 20))
				vpos -= 1u << 20;
		}
		if ((rv = kv_batch(kv_tenant_db(t), ops, n)) != 0) {
			bench_fmt(z->err, sizeof z->err, "kv_batch: %s", kv_strerror(rv));
			goto out;
		}
	}
	if ((rv = kv_stats(kv_tenant_db(t), &stats)) != 0) {
		bench_fmt(z->err, sizeof z->err, "kv_stats: %s", kv_strerror(rv));
		goto out;
	}
	z->live_keys = stats.keys;
	z->disk_bytes = stats.disk_bytes;
	kv_store_put(st, t);
	t = NULL;
	rv = kv_store_close(st);
	st = NULL;
	if (rv != 0) {
		bench_fmt(z->err, sizeof z->err, "kv_store_close: %s", kv_strerror(rv));
		goto out;
	}
	z->load_s = bench_now() - t0;
	if (z->live_keys != z->keys) {
		bench_fmt(z->err, sizeof z->err, "%" PRIu64 " live keys after loading %" PRIu64,
		          z->live_keys, z->keys);
		rv = -EIO;
	}
out:
	if (t != NULL)
		kv_store_put(st, t);
	kv_store_close(st);
	free(perm);
	free(keys);
	free(ops);
	return rv;
}

/* ---- 2. in process --------------------------------------------------------------- */

/* The store options kvd uses (daemon/main.c open_store) at its defaults. */
static void kvd_like_options(struct kv_store_options *so)
{
	kv_store_options_init(so);
	so->base.external_loop = true;
	so->base.background = false;
	so->base.merge_ratio_pct = 50;
}

static int in_process(struct ab_bench *b, struct ab_size *z, const char *dir, const char *tdir)
{
	struct kv_store_options so;
	kv_store *st = NULL;
	int rv;

	kvd_like_options(&so);
	if ((rv = kv_store_open(dir, &so, &st)) != 0) {
		bench_fmt(z->err, sizeof z->err, "reopening the store: %s", kv_strerror(rv));
		return rv;
	}
	for (int k = 0; k < C_COUNT; k++) {
		struct ab_row *row = &z->row[k];
		for (uint64_t r = 0; r < b->o.repeat; r++) {
			struct kv_tenant_info ti;
			struct kv_recovery_info ri;
			struct rusage ru0, ru1;
			kv_tenant *t;
			uint64_t us = 0;
			int64_t m0;
			double t0, t1;
			if ((rv = prepare(tdir, (enum ab_case)k, z->err, sizeof z->err)) != 0)
				goto out;
			m0 = malloc_in_use();
			getrusage(RUSAGE_THREAD, &ru0);
			t0 = bench_now();
			rv = kv_store_activate(st, AB_TENANT, &us);
			t1 = bench_now();
			getrusage(RUSAGE_THREAD, &ru1);
			series_add(&row->faults, (double)(ru1.ru_minflt - ru0.ru_minflt));
			if (rv != 0) {
				bench_fmt(z->err, sizeof z->err, "kv_store_activate (%s, %s): %s",
				          ab_case_path[k], ab_case_cache[k], kv_strerror(rv));
				goto out;
			}
			if (k == C_HINT_WARM && r == 0)
				z->malloc_bytes = malloc_in_use() - m0;
			series_add(&row->activate_s, t1 - t0);
			series_add(&row->engine_us, (double)us);
			if ((rv = kv_store_info(st, AB_TENANT, &ti)) != 0 ||
			    (rv = kv_store_get_active(st, AB_TENANT, &t)) != 0) {
				bench_fmt(z->err, sizeof z->err, "kv_store_info: %s",
				          kv_strerror(rv));
				goto out;
			}
			rv = kv_recovery_info(kv_tenant_db(t), &ri);
			kv_store_put_unused(st, t);
			if (rv != 0) {
				bench_fmt(z->err, sizeof z->err, "kv_recovery_info: %s",
				          kv_strerror(rv));
				goto out;
			}
			if (ri.keydir_image != (k < C_HINT_WARM)) {
				bench_fmt(z->err, sizeof z->err,
				          "activation from %s: the key-directory image was %sused",
				          ab_case_path[k], ri.keydir_image ? "" : "not ");
				rv = -EIO;
				goto out;
			}
			if (ti.stats.keys != z->keys) {
				bench_fmt(z->err, sizeof z->err,
				          "%" PRIu64 " keys after activation, %" PRIu64 " loaded",
				          ti.stats.keys, z->keys);
				rv = -EIO;
				goto out;
			}
			if (k == C_HINT_WARM && r == 0)
				z->keydir_bytes = ti.stats.keydir_bytes;
			if (r == 0) {
				row->hints_loaded = ri.hints_loaded;
				row->segments_scanned = ri.segments_scanned;
				row->segments = ri.segments;
				row->records = ri.records;
			}
			if ((rv = kv_store_passivate(st, AB_TENANT)) != 0) {
				bench_fmt(z->err, sizeof z->err, "kv_store_passivate: %s",
				          kv_strerror(rv));
				goto out;
			}
		}
		row->ran = true;
		fprintf(b->progress,
		        "  %" PRIu64 " keys, in process, %s, %s: %.1f ms (engine %.1f ms), %u hint "
		        "files loaded, %u segments replayed, %.0f page faults\n",
		        z->keys, ab_case_path[k], ab_case_cache[k],
		        series_median(&row->activate_s, NULL, NULL) * 1e3,
		        series_median(&row->engine_us, NULL, NULL) / 1e3, row->hints_loaded,
		        row->segments_scanned, series_median(&row->faults, NULL, NULL));
		fflush(b->progress);
	}
	rv = 0;
out : {
	int r2 = kv_store_close(st);
	if (rv == 0 && r2 != 0) {
		bench_fmt(z->err, sizeof z->err, "kv_store_close: %s", kv_strerror(r2));
		rv = r2;
	}
}
	return rv;
}

/* ---- 3. through kvd ------------------------------------------------------------ */

static int timed_get(kvc *c, const char *key, double *ret_s, char *err, size_t errlen)
{
	struct kvc_status st;
	struct kvc_call call = {.tenant = AB_TENANT, .timeout_ms = AB_TIMEOUT_MS, .status = &st};
	struct kvc_value v;
	double t0 = bench_now();
	int rv = kvc_get(c, &call, key, AB_KEY_SIZE, 0, 0, &v);
	double t1 = bench_now();

	if (rv != 0) {
		bench_fmt(err, errlen, "Get: %s: %s", kvc_code_name(rv), st.message);
		return rv;
	}
	rv = v.len == AB_VALUE_SIZE ? 0 : -EIO;
	if (rv != 0)
		bench_fmt(err, errlen, "Get returned %zu bytes, not %d", v.len, AB_VALUE_SIZE);
	kvc_value_free(&v);
	*ret_s = t1 - t0;
	return rv;
}

/* TenantPassivate, retried while kvd answers UNAVAILABLE "busy" (its
 * maintenance thread holds the tenant: writing hint files, merging). */
static int passivate(kvc *c, struct ab_size *z)
{
	struct kvc_status st;
	struct kvc_call call = {.timeout_ms = AB_TIMEOUT_MS, .status = &st};
	double t0 = bench_now(), waited;
	int rv;

	while ((rv = kvc_tenant_passivate(c, &call, AB_TENANT)) == -KVC_UNAVAILABLE &&
	       bench_now() - t0 < AB_TIMEOUT_MS / 1000.0) {
		z->passivate_retries++;
		usleep(10000);
	}
	if (rv != 0) {
		bench_fmt(z->err, sizeof z->err, "TenantPassivate: %s: %s", kvc_code_name(rv),
		          st.message);
		return rv;
	}
	if ((waited = bench_now() - t0) > z->passivate_wait_max_s)
		z->passivate_wait_max_s = waited;
	return 0;
}

/* ---- 3a. a neighbour of the activating tenant ---------------------------------------- */

#define NB_MAX     (1u << 21) /* latency samples kept */
#define NB_IDLE_MS 1000       /* the window with nothing activating */

struct nb_state {
	const char *url, *tenant;
	atomic_bool stop;
	double *start, *lat; /* bench_now() at each Get's send, its latency (s) */
	size_t n;
	int rv;
	char err[AB_ERR_MAX];
};

static void *nb_main(void *arg)
{
	struct nb_state *ns = arg;
	struct kvc_options o;
	struct kvc_status st;
	struct kvc_call call = {.tenant = ns->tenant, .status = &st};
	kvc *c = NULL;

	kvc_options_init(&o);
	o.endpoint = ns->url;
	o.timeout_ms = AB_TIMEOUT_MS;
	if ((ns->rv = kvc_open(&o, &c)) != 0) {
		bench_fmt(ns->err, sizeof ns->err, "neighbour: connecting: %s",
		          kvc_code_name(ns->rv));
		return NULL;
	}
	while (!atomic_load(&ns->stop) && ns->n < NB_MAX) {
		struct kvc_value v;
		double t0 = bench_now();
		if ((ns->rv = kvc_get(c, &call, "k", 1, 0, 0, &v)) != 0) {
			bench_fmt(ns->err, sizeof ns->err, "neighbour: Get: %s: %s",
			          kvc_code_name(ns->rv), st.message);
			break;
		}
		ns->start[ns->n] = t0;
		ns->lat[ns->n++] = bench_now() - t0;
		kvc_value_free(&v);
	}
	kvc_close(c);
	return NULL;
}

/* p50, p99 and max (µs) of the samples sent in [from, to); their count. */
static uint64_t nb_window(const struct nb_state *ns, double from, double to, double *p50,
                          double *p99, double *max)
{
	double *v = malloc((ns->n + 1) * sizeof(double));
	uint64_t k = 0;

	*p50 = *p99 = *max = 0;
	if (v == NULL)
		return 0;
	for (size_t i = 0; i < ns->n; i++)
		if (ns->start[i] >= from && ns->start[i] < to)
			v[k++] = ns->lat[i] * 1e6;
	if (k > 0) {
		qsort(v, k, sizeof(double), cmp_double);
		*p50 = v[k / 2];
		*p99 = v[(k * 99) / 100];
		*max = v[k - 1];
	}
	free(v);
	return k;
}

/* A tenant that kvd's worker of the bench tenant also owns (kvd: the
 * XXH3-64 of the name modulo the workers). */
static void nb_name(char *out, size_t len, uint64_t workers)
{
	uint64_t want = XXH3_64bits(AB_TENANT, strlen(AB_TENANT)) % workers;

	for (unsigned i = 0;; i++) {
		snprintf(out, len, "neighbour%u", i);
		if (XXH3_64bits(out, strlen(out)) % workers == want)
			return;
	}
}

/* Gets of the neighbour, one connection, back to back: NB_IDLE_MS with
 * nothing activating, then R activations of the bench tenant from its hint
 * files (KEYDIR removed: the longer path), each started by a Get. */
static int neighbour(struct ab_bench *b, struct ab_size *z, kvc *c, const char *url,
                     const char *tdir, uint64_t workers)
{
	struct kvc_status st;
	struct kvc_call call = {.timeout_ms = AB_TIMEOUT_MS, .status = &st};
	struct kvc_tenant_opts to = {0};
	struct nb_state ns = {.url = url, .tenant = z->nb_tenant};
	double idle0, idle1, *act = NULL, p50, p99, max;
	char key[AB_KEY_SIZE];
	pthread_t th;
	uint64_t s = 11;
	int rv;

	nb_name(z->nb_tenant, sizeof z->nb_tenant, workers ? workers : 1);
	if ((rv = kvc_tenant_create(c, &call, z->nb_tenant, &to)) != 0 ||
	    (rv = kvc_put(c, &(struct kvc_call){.tenant = z->nb_tenant, .status = &st}, "k", 1, "v",
	                  1, NULL, NULL)) != 0) {
		bench_fmt(z->err, sizeof z->err, "neighbour %s: %s: %s", z->nb_tenant,
		          kvc_code_name(rv), st.message);
		return rv;
	}
	ns.start = malloc(NB_MAX * sizeof(double));
	ns.lat = malloc(NB_MAX * sizeof(double));
	act = calloc(2 * b->o.repeat, sizeof(double));
	if (ns.start == NULL || ns.lat == NULL || act == NULL) {
		rv = -ENOMEM;
		bench_fmt(z->err, sizeof z->err, "neighbour: out of memory");
		goto out;
	}
	if (pthread_create(&th, NULL, nb_main, &ns) != 0) {
		rv = -EAGAIN;
		bench_fmt(z->err, sizeof z->err, "neighbour: cannot start a thread");
		goto out;
	}
	/* a window, not a wait for anything: the neighbour's Gets go on */
	poll(NULL, 0, 100);
	idle0 = bench_now();
	poll(NULL, 0, NB_IDLE_MS);
	idle1 = bench_now();
	for (uint64_t r = 0; r < b->o.repeat && rv == 0; r++) {
		double first;
		if ((rv = passivate(c, z)) != 0 ||
		    (rv = prepare(tdir, C_HINT_WARM, z->err, sizeof z->err)) != 0)
			break;
		ab_key(key, bench_rng_below(&s, z->keys));
		act[2 * r] = bench_now();
		rv = timed_get(c, key, &first, z->err, sizeof z->err);
		act[2 * r + 1] = bench_now();
		z->nb_act_ms += first * 1e3;
	}
	atomic_store(&ns.stop, true);
	pthread_join(th, NULL);
	if (rv == 0 && ns.rv != 0) {
		rv = ns.rv;
		bench_fmt(z->err, sizeof z->err, "%s", ns.err);
	}
	if (rv != 0)
		goto out;
	z->nb_idle_n = nb_window(&ns, idle0, idle1, &z->nb_idle_p50_us, &z->nb_idle_p99_us,
	                         &z->nb_idle_max_us);
	/* every activation's window together */
	{
		struct nb_state all = ns;
		size_t k = 0;
		for (size_t i = 0; i < ns.n; i++)
			for (uint64_t r = 0; r < b->o.repeat; r++)
				if (ns.start[i] >= act[2 * r] && ns.start[i] < act[2 * r + 1]) {
					all.start[k] = 0.5; /* inside [0, 1) below */
					all.lat[k++] = ns.lat[i];
					break;
				}
		all.n = k;
		z->nb_act_n = nb_window(&all, 0, 1, &p50, &p99, &max);
		z->nb_act_p50_us = p50;
		z->nb_act_p99_us = p99;
		z->nb_act_max_us = max;
	}
	z->nb_ran = true;
	fprintf(b->progress,
	        "  %" PRIu64
	        " keys, through kvd: neighbour %s on the same worker: p99 %.0f us idle "
	        "(%" PRIu64 " Gets), %.0f us while the tenant activates from hints (%" PRIu64
	        " Gets in %.0f ms)\n",
	        z->keys, z->nb_tenant, z->nb_idle_p99_us, z->nb_idle_n, z->nb_act_p99_us,
	        z->nb_act_n, z->nb_act_ms);
out:
	free(ns.start);
	free(ns.lat);
	free(act);
	return rv;
}

static int through_kvd(struct ab_bench *b, struct ab_size *z, const char *dir, const char *tdir)
{
	char err[AB_ERR_MAX], key[AB_KEY_SIZE];
	struct kvd_run k = {.bin = b->kvd_bin,
	                    .dir = b->base,
	                    .config_text = "# kvbench activate: kvd's defaults\n",
	                    .die_with_parent = true};
	struct kvc_options o;
	struct kvc_status st;
	struct kvc_call call = {.timeout_ms = AB_TIMEOUT_MS, .status = &st};
	struct kvc_health h;
	kvc *c = NULL;
	uint64_t s = 7, act_us = 0;
	int rv;

	bench_fmt(k.data, sizeof k.data, "%s", dir);
	bench_fmt(k.log, sizeof k.log, "%s/kvd-%" PRIu64 ".log", b->base, z->keys);
	if ((rv = kvd_run_spawn(&k, err, sizeof err)) != 0) {
		bench_fmt(z->err, sizeof z->err, "starting kvd: %s", err);
		return rv;
	}
	bench_fmt(z->kvd_command, sizeof z->kvd_command, "%s", k.command);
	z->kvd_ran = true;
	if ((rv = kvd_run_wait(&k, err, sizeof err)) != 0) {
		bench_fmt(z->err, sizeof z->err, "%s", err);
		goto stop;
	}
	kvc_options_init(&o);
	o.endpoint = k.url[KVD_RUN_IPC];
	o.timeout_ms = AB_TIMEOUT_MS;
	o.contexts = 2;
	if ((rv = kvc_open(&o, &c)) != 0 || (rv = kvc_health(c, &call, &h)) != 0) {
		bench_fmt(z->err, sizeof z->err, "connecting to kvd: %s", kvc_code_name(rv));
		goto stop;
	}
	for (int kc = 0; kc < C_COUNT; kc++) {
		struct ab_row *row = &z->row[kc];
		for (uint64_t r = 0; r < b->o.repeat; r++) {
			struct kvc_tenant_info ti;
			double first, second, more[AB_MORE_GETS];
			if ((kc > 0 || r > 0) && (rv = passivate(c, z)) != 0)
				goto stop;
			if ((rv = prepare(tdir, (enum ab_case)kc, z->err, sizeof z->err)) != 0)
				goto stop;
			if ((rv = kvc_tenant_info(c, &call, AB_TENANT, &ti)) != 0) {
				bench_fmt(z->err, sizeof z->err, "TenantInfo: %s: %s",
				          kvc_code_name(rv), st.message);
				goto stop;
			}
			if (ti.active) {
				bench_fmt(z->err, sizeof z->err,
				          "tenant active before the first Get");
				rv = -EBUSY;
				goto stop;
			}
			ab_key(key, bench_rng_below(&s, z->keys));
			if ((rv = timed_get(c, key, &first, z->err, sizeof z->err)) != 0)
				goto stop;
			ab_key(key, bench_rng_below(&s, z->keys));
			if ((rv = timed_get(c, key, &second, z->err, sizeof z->err)) != 0)
				goto stop;
			for (int i = 0; i < AB_MORE_GETS; i++) {
				ab_key(key, bench_rng_below(&s, z->keys));
				if ((rv = timed_get(c, key, &more[i], z->err, sizeof z->err)) != 0)
					goto stop;
			}
			qsort(more, AB_MORE_GETS, sizeof(double), cmp_double);
			series_add(&row->first_s, first);
			series_add(&row->second_s, second);
			series_add(&row->steady_s, more[AB_MORE_GETS / 2]);
			/* the same activation by TenantActivate: kvd's own figure */
			if ((rv = passivate(c, z)) != 0 ||
			    (rv = prepare(tdir, (enum ab_case)kc, z->err, sizeof z->err)) != 0)
				goto stop;
			if ((rv = kvc_tenant_activate(c, &call, AB_TENANT, &act_us)) != 0) {
				bench_fmt(z->err, sizeof z->err, "TenantActivate: %s: %s",
				          kvc_code_name(rv), st.message);
				goto stop;
			}
			series_add(&row->kvd_activate_us, (double)act_us);
		}
		fprintf(b->progress,
		        "  %" PRIu64
		        " keys, through kvd, %s, %s: TenantActivate %.1f ms, first Get "
		        "%.1f ms, second %.0f us, steady %.0f us\n",
		        z->keys, ab_case_path[kc], ab_case_cache[kc],
		        series_median(&row->kvd_activate_us, NULL, NULL) / 1e3,
		        series_median(&row->first_s, NULL, NULL) * 1e3,
		        series_median(&row->second_s, NULL, NULL) * 1e6,
		        series_median(&row->steady_s, NULL, NULL) * 1e6);
		fflush(b->progress);
	}
	{
		struct kvc_daemon_stats ds;
		if ((rv = kvc_stats_daemon(c, &call, &ds)) != 0) {
			bench_fmt(z->err, sizeof z->err, "Stats: %s: %s", kvc_code_name(rv),
			          st.message);
			goto stop;
		}
		if ((rv = neighbour(b, z, c, k.url[KVD_RUN_IPC], tdir, ds.workers)) != 0)
			goto stop;
	}
	rv = 0;
stop:
	kvc_close(c);
	{
		int r2 = kvd_run_stop(&k, err, sizeof err);
		z->kvd_exit_ok = r2 == 0;
		if (r2 != 0 && rv == 0) {
			bench_fmt(z->err, sizeof z->err, "kvd: %s", err);
			rv = r2;
		}
	}
	return rv;
}

static void run_size(struct ab_bench *b, struct ab_size *z)
{
	char dir[AB_PATH_MAX + 32], tdir[AB_PATH_MAX + 128];
	struct file_count fc = {0, 0, 0, 0};
	int rv;

	snprintf(dir, sizeof dir, "%s/store-%" PRIu64, b->base, z->keys);
	snprintf(tdir, sizeof tdir, "%s/tenants/%s", dir, AB_TENANT);
	fprintf(b->progress, "%" PRIu64 " keys: loading\n", z->keys);
	fflush(b->progress);
	if (load(b, z, dir) != 0)
		goto done;
	each_file(tdir, count_file, &fc);
	z->segments_on_disk = fc.seg;
	z->hint_files = fc.hint;
	z->hint_bytes = fc.hint_bytes;
	fprintf(b->progress,
	        "  loaded in %.1f s: %.1f MiB in %u segments, %u hint files (%.1f MiB)\n",
	        z->load_s, z->disk_bytes / 1048576.0, fc.seg, fc.hint, fc.hint_bytes / 1048576.0);
	if (in_process(b, z, dir, tdir) != 0)
		goto done;
	memset(&fc, 0, sizeof fc);
	each_file(tdir, count_file, &fc);
	z->segments_after = fc.seg;
	if (b->o.use_kvd && (rv = through_kvd(b, z, dir, tdir)) != 0)
		goto done;
	if (z->passivate_retries > 0)
		fprintf(b->progress,
		        "  TenantPassivate answered UNAVAILABLE \"busy\" %" PRIu64
		        " times (retried; "
		        "longest %.2f s)\n",
		        z->passivate_retries, z->passivate_wait_max_s);
	z->ok = true;
done:
	if (!z->ok)
		fprintf(stderr, "kvbench activate: %" PRIu64 " keys: %s\n", z->keys, z->err);
	if (z->ok && (rv = bench_rmtree(dir)) != 0)
		fprintf(stderr, "kvbench activate: removing %s: %s\n", dir, strerror(-rv));
}

/* ---- report ------------------------------------------------------------------- */

static void header(const struct ab_bench *b, FILE *f, bool md)
{
	char tmp[512];
	const char *lead = md ? "- **" : "", *mid = md ? "**: " : ": ";

	bench_date(tmp, sizeof tmp);
	fprintf(f, "%sdate%s%s\n", lead, mid, tmp);
	bench_machine(tmp, sizeof tmp);
	fprintf(f, "%smachine%s%s\n", lead, mid, tmp);
	fprintf(f, "%sbuild%s%s\n", lead, mid, bench_build());
	fprintf(f, "%sdirectory%s%s (%s; removed afterwards unless a step failed)\n", lead, mid,
	        b->base, b->fs);
	fprintf(f,
	        "%sdata%stenant \"%s\" (sync=none), N distinct keys of %d bytes (zero-padded "
	        "decimal) in random order, %d-byte random values, loaded with kv_batch (%d ops), "
	        "then kv_store_close: passive with a hint file per sealed segment and the "
	        "key-directory image\n",
	        lead, mid, AB_TENANT, AB_KEY_SIZE, AB_VALUE_SIZE, AB_BATCH);
	fprintf(f,
	        "%sin process%skv_store_open with kvd's options (external_loop, no background "
	        "thread, segment 64 MiB), then kv_store_activate timed by kvbench (and by the "
	        "store: "
	        "\"engine\"), kv_store_passivate after each; median of %" PRIu64 " [min-max]\n",
	        lead, mid, b->o.repeat);
	fprintf(f,
	        "%scache%swarm: files as the previous step left them (in the page cache); cold: "
	        "fdatasync + POSIX_FADV_DONTNEED on every file of the tenant first\n",
	        lead, mid);
	fprintf(f,
	        "%skey-directory image%sthe KEYDIR file the last passivation wrote: the directory "
	        "as it was in memory, loaded whole when the segments are as it says\n",
	        lead, mid);
	fprintf(f,
	        "%shint files%sKEYDIR deleted before the activation (written again at "
	        "passivation)\n",
	        lead, mid);
	fprintf(f,
	        "%slog replay%sKEYDIR and every .hint file of the tenant deleted before the "
	        "activation (they are written again at passivation)\n",
	        lead, mid);
	if (b->o.use_kvd)
		fprintf(f,
		        "%sthrough kvd%s%s (run from a copy made at the start; defaults; the "
		        "tenant "
		        "passive at start, TenantPassivate "
		        "between repetitions), libkvclient over ipc://; first Get timed end to end "
		        "(includes the activation), then a second Get, then the median of %d more; "
		        "then the same activation by TenantActivate (kvd's activation_us)\n",
		        lead, mid, b->kvd_path, AB_MORE_GETS);
}

static void fmt_ms(char *buf, size_t len, const struct ab_series *s, double scale, bool range)
{
	double lo, hi, m = series_median(s, &lo, &hi);

	if (s->n == 0)
		snprintf(buf, len, "-");
	else if (range && s->n > 1)
		snprintf(buf, len, "%.1f [%.1f-%.1f]", m * scale, lo * scale, hi * scale);
	else
		snprintf(buf, len, "%.1f", m * scale);
}

static void report_rows(const struct ab_bench *b, FILE *f, bool md)
{
	if (md) {
		fprintf(f,
		        "\n| keys | activation from | cache | in process ms [min-max] | engine ms "
		        "| "
		        "kvd TenantActivate ms | first Get via kvd ms [min-max] | second Get µs | "
		        "steady Get µs | hints loaded | segments replayed |\n");
		fprintf(f, "|--:|---|---|--:|--:|--:|--:|--:|--:|--:|--:|\n");
	} else {
		fprintf(f, "\n%10s  %-10s  %-5s  %24s  %9s  %9s  %24s  %9s  %9s  %5s  %5s\n",
		        "keys", "from", "cache", "in-process ms [min-max]", "engine ms",
		        "kvd act ms", "first Get ms [min-max]", "2nd Get us", "steady us", "hints",
		        "replay");
	}
	for (size_t i = 0; i < b->o.nkeys; i++) {
		const struct ab_size *z = &b->sizes[i];
		for (int k = 0; k < C_COUNT; k++) {
			const struct ab_row *r = &z->row[k];
			char a[64], e[64], ka[64], fg[64], sg[64], st[64];
			if (!r->ran)
				continue;
			fmt_ms(a, sizeof a, &r->activate_s, 1e3, true);
			fmt_ms(e, sizeof e, &r->engine_us, 1e-3, false);
			fmt_ms(ka, sizeof ka, &r->kvd_activate_us, 1e-3, false);
			fmt_ms(fg, sizeof fg, &r->first_s, 1e3, true);
			fmt_ms(sg, sizeof sg, &r->second_s, 1e6, false);
			fmt_ms(st, sizeof st, &r->steady_s, 1e6, false);
			if (md)
				fprintf(f,
				        "| %" PRIu64
				        " | %s | %s | %s | %s | %s | %s | %s | %s | %u | %u |\n",
				        z->keys, ab_case_path[k], ab_case_cache[k], a, e, ka, fg,
				        sg, st, r->hints_loaded, r->segments_scanned);
			else
				fprintf(f,
				        "%10" PRIu64
				        "  %-10s  %-5s  %24s  %9s  %9s  %24s  %9s  %9s  %5u  %5u\n",
				        z->keys, ab_case_path[k], ab_case_cache[k], a, e, ka, fg,
				        sg, st, r->hints_loaded, r->segments_scanned);
		}
	}
	if (md) {
		fprintf(f,
		        "\n| keys | load s | log MiB | segments | hint files | hint MiB | segments "
		        "after the in-process cases | key directory B/key | malloc B/key "
		        "(cross-check) | kvd exit |\n");
		fprintf(f, "|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|\n");
	} else {
		fprintf(f, "\n%10s  %7s  %8s  %8s  %6s  %8s  %8s  %12s  %12s  %s\n", "keys",
		        "load s", "log MiB", "segments", "hints", "hint MiB", "seg after",
		        "keydir B/key", "malloc B/key", "kvd exit");
	}
	for (size_t i = 0; i < b->o.nkeys; i++) {
		const struct ab_size *z = &b->sizes[i];
		const char *exit = !z->kvd_ran ? "-" : z->kvd_exit_ok ? "0" : "FAILED";
		double kd = z->keys ? (double)z->keydir_bytes / (double)z->keys : 0;
		double mb = z->keys ? (double)z->malloc_bytes / (double)z->keys : 0;
		if (md)
			fprintf(f,
			        "| %" PRIu64
			        " | %.1f | %.1f | %u | %u | %.1f | %u | %.1f | %.1f | %s |\n",
			        z->keys, z->load_s, z->disk_bytes / 1048576.0, z->segments_on_disk,
			        z->hint_files, z->hint_bytes / 1048576.0, z->segments_after, kd, mb,
			        exit);
		else
			fprintf(f,
			        "%10" PRIu64
			        "  %7.1f  %8.1f  %8u  %6u  %8.1f  %8u  %12.1f  %12.1f  %s\n",
			        z->keys, z->load_s, z->disk_bytes / 1048576.0, z->segments_on_disk,
			        z->hint_files, z->hint_bytes / 1048576.0, z->segments_after, kd, mb,
			        exit);
		if (!z->ok)
			fprintf(f, "%s%" PRIu64 " keys FAILED: %s\n", md ? "\n" : "", z->keys,
			        z->err);
		if (z->nb_ran)
			fprintf(f,
			        "%s%" PRIu64
			        " keys: Gets of %s, on the same kvd worker: p50 %.0f us, "
			        "p99 %.0f us, max %.0f us with nothing activating (%" PRIu64
			        " Gets); p50 %.0f us, p99 %.0f us, max %.0f us while the tenant "
			        "activated from hint files (%" PRIu64 " Gets in %.0f ms); p99 "
			        "ratio %.2f\n",
			        md ? "\n" : "", z->keys, z->nb_tenant, z->nb_idle_p50_us,
			        z->nb_idle_p99_us, z->nb_idle_max_us, z->nb_idle_n,
			        z->nb_act_p50_us, z->nb_act_p99_us, z->nb_act_max_us, z->nb_act_n,
			        z->nb_act_ms,
			        z->nb_idle_p99_us > 0 ? z->nb_act_p99_us / z->nb_idle_p99_us : 0);
		if (z->passivate_retries > 0)
			fprintf(f,
			        "%s%" PRIu64
			        " keys: TenantPassivate answered UNAVAILABLE \"busy\" %" PRIu64
			        " times (kvd's maintenance held the tenant); retried, longest %.2f "
			        "s\n",
			        md ? "\n" : "", z->keys, z->passivate_retries,
			        z->passivate_wait_max_s);
	}
	for (size_t i = 0; i < b->o.nkeys; i++)
		if (b->sizes[i].kvd_command[0]) {
			fprintf(f, "%skvd: %s\n", md ? "\n" : "\n", b->sizes[i].kvd_command);
			break;
		}
}

/* Series s as {"median", "min", "max", "samples"}, each value times scale. */
static json_t *json_series(const struct ab_series *s, double scale)
{
	double lo, hi, m = series_median(s, &lo, &hi);
	json_t *samples = json_array();

	for (size_t i = 0; i < s->n; i++)
		json_array_append_new(samples, report_real(s->v[i] * scale, 4));
	return json_pack("{s:o,s:o,s:o,s:o}", "median", report_real(m * scale, 4), "min",
	                 report_real(lo * scale, 4), "max", report_real(hi * scale, 4), "samples",
	                 samples);
}

/* The cases of size z that ran, as a JSON array. */
static json_t *json_cases(const struct ab_size *z)
{
	json_t *cases = json_array();

	for (int k = 0; k < C_COUNT; k++) {
		const struct ab_row *r = &z->row[k];
		if (!r->ran)
			continue;
		json_array_append_new(
		        cases, json_pack("{s:s,s:s,s:i,s:i,s:i,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}",
		                         "from", ab_case_from[k], "cache", ab_case_cache[k],
		                         "hints_loaded", (int)r->hints_loaded, "segments_replayed",
		                         (int)r->segments_scanned, "segments", (int)r->segments,
		                         "records", report_u64(r->records), "activate_ms",
		                         json_series(&r->activate_s, 1e3), "engine_ms",
		                         json_series(&r->engine_us, 1e-3), "page_faults",
		                         json_series(&r->faults, 1), "kvd_activate_ms",
		                         json_series(&r->kvd_activate_us, 1e-3), "kvd_first_get_ms",
		                         json_series(&r->first_s, 1e3), "kvd_second_get_us",
		                         json_series(&r->second_s, 1e6), "kvd_steady_get_us",
		                         json_series(&r->steady_s, 1e6)));
	}
	return cases;
}

static void activate_json(const struct ab_bench *b, struct report *rep, bool ok)
{
	json_t *sizes = json_array();

	for (size_t i = 0; i < b->o.nkeys; i++) {
		const struct ab_size *z = &b->sizes[i];
		json_array_append_new(
		        sizes,
		        json_pack(
		                "{s:o,s:b,s:o,s:o,s:o,s:i,s:i,s:o,s:i,s:o,s:o,s:o,s:o,s:o,s:b,s:o,"
		                "s:o}",
		                "keys", report_u64(z->keys), "ok", z->ok, "error",
		                report_str(z->err), "load_s", report_real(z->load_s, 3),
		                "disk_bytes", report_u64(z->disk_bytes), "segments",
		                (int)z->segments_on_disk, "hint_files", (int)z->hint_files,
		                "hint_bytes", report_u64(z->hint_bytes), "segments_after",
		                (int)z->segments_after, "keydir_bytes", report_u64(z->keydir_bytes),
		                "keydir_bytes_per_key",
		                report_real(z->keys ? (double)z->keydir_bytes / (double)z->keys : 0,
		                            2),
		                "malloc_bytes_per_key",
		                report_real(z->keys ? (double)z->malloc_bytes / (double)z->keys : 0,
		                            2),
		                "passivate_busy_retries", report_u64(z->passivate_retries),
		                "passivate_wait_max_s", report_real(z->passivate_wait_max_s, 3),
		                "kvd_exit_ok", z->kvd_ran && z->kvd_exit_ok, "kvd_command",
		                report_str(z->kvd_command), "cases", json_cases(z)));
		if (z->nb_ran)
			json_object_set_new(
			        json_array_get(sizes, json_array_size(sizes) - 1), "neighbour",
			        json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "tenant",
			                  report_str(z->nb_tenant), "idle_gets",
			                  report_u64(z->nb_idle_n), "idle_p50_us",
			                  report_real(z->nb_idle_p50_us, 1), "idle_p99_us",
			                  report_real(z->nb_idle_p99_us, 1), "idle_max_us",
			                  report_real(z->nb_idle_max_us, 1), "activating_gets",
			                  report_u64(z->nb_act_n), "activating_p50_us",
			                  report_real(z->nb_act_p50_us, 1), "activating_p99_us",
			                  report_real(z->nb_act_p99_us, 1), "activating_max_us",
			                  report_real(z->nb_act_max_us, 1), "activations_ms",
			                  report_real(z->nb_act_ms, 1)));
	}
	report_set(rep->doc, "bench", json_string("activate"));
	report_set(rep->doc, "ok", json_boolean(ok));
	report_set(rep->doc, "command", report_str(b->command));
	report_set(rep->doc, "config",
	           json_pack("{s:o,s:i,s:i,s:o,s:o,s:o}", "repeat", report_u64(b->o.repeat),
	                     "key_size", AB_KEY_SIZE, "value_size", AB_VALUE_SIZE, "kvd",
	                     report_str(b->o.use_kvd ? b->kvd_path : ""), "dir",
	                     report_str(b->base), "fs", report_str(b->fs)));
	report_set(rep->doc, "sizes", sizes);
	(void)report_json(rep, stdout);
}

/* ---- options and entry point ----------------------------------------------------- */

static int parse_keys(const char *cmd, const char *name, const char *arg, void *val)
{
	struct ab_opts *o = val;

	return bench_parse_u64_list(cmd, name, arg, 1, AB_KEYS_MAX, o->keys, AB_KLIST_MAX,
	                            &o->nkeys);
}

/* 0, 1 for --help, or -EINVAL. */
static int parse(int argc, char **argv, struct ab_opts *o)
{
	char keys[96], quick[96];
	const struct bench_opt opts[] = {
	        {BENCH_OPT("keys", BENCH_OPT_FUNC, o, "LIST", keys), .set = &o->keys_set,
	         .parse = parse_keys},
	        {BENCH_OPT("repeat", BENCH_OPT_U64, &o->repeat, "R",
	                   "activations per case; rows report the median (default %D)"),
	         .lo = 1, .hi = AB_REPEAT_MAX, .set = &o->repeat_set},
	        {BENCH_OPT("kvd", BENCH_OPT_STRING, &o->kvd, "PATH",
	                   "kvd binary (default ../daemon/kvd next to kvbench)")},
	        {BENCH_OPT("no-kvd", BENCH_OPT_UNSET, &o->use_kvd, NULL,
	                   "in-process figures only")},
	        {BENCH_OPT("dir", BENCH_OPT_STRING, &o->dir, "DIR",
	                   "make the run's directory in DIR (default /tmp)")},
	        {BENCH_OPT("quick", BENCH_OPT_FLAG, &o->quick, NULL, quick)},
	        {BENCH_OPT("markdown", BENCH_OPT_FLAG, &o->markdown, NULL,
	                   "print the header and markdown tables at the end")},
	        {BENCH_OPT("json", BENCH_OPT_FLAG, &o->json, NULL,
	                   "print one JSON object at the end")},
	};
	const struct bench_cmd cmd = {
	        "activate",
	        "Time to activate a passive tenant of N keys: in process from the key-directory\n"
	        "image, from hint files and by log replay, warm and cold page cache;\n"
	        "key-directory bytes per key; the first Get\n"
	        "through kvd (which activates the tenant) against the second.\n",
	        "Exits 0 only when every step worked, every Get found its value and kvd exited "
	        "0.\n",
	        opts,
	        sizeof opts / sizeof opts[0],
	};
	int rv;

	bench_fmt(keys, sizeof keys, "tenant sizes, comma-separated (default %llu)",
	          AB_KEYS_DEFAULT);
	bench_fmt(quick, sizeof quick, "smoke run: --keys %llu --repeat 1 unless given",
	          AB_QUICK_KEYS);
	if ((rv = bench_opts_parse(&cmd, argc, argv)) != 0)
		return rv;
	if (o->json && o->markdown) {
		fprintf(stderr, "kvbench activate: --json and --markdown exclude each other\n");
		return -EINVAL;
	}
	if (o->quick) {
		if (!o->keys_set) {
			o->keys[0] = AB_QUICK_KEYS;
			o->nkeys = 1;
		}
		if (!o->repeat_set)
			o->repeat = 1;
	}
	return 0;
}

static int make_base(struct ab_bench *b)
{
	const char *parent = b->o.dir ? b->o.dir : "/tmp";

	if (b->o.dir != NULL && mkdir(parent, 0755) != 0 && errno != EEXIST) {
		fprintf(stderr, "kvbench activate: mkdir %s: %s\n", parent, strerror(errno));
		return -errno;
	}
	/* the ipc socket lives here: keep it short (sun_path is 108 bytes) */
	if ((size_t)snprintf(b->base, sizeof b->base, "%s/kvbench-activate-XXXXXX", parent) >= 80) {
		fprintf(stderr, "kvbench activate: --dir path too long for an ipc socket path\n");
		b->base[0] = '\0';
		return -ENAMETOOLONG;
	}
	if (mkdtemp(b->base) == NULL) {
		fprintf(stderr, "kvbench activate: mkdtemp %s: %s\n", b->base, strerror(errno));
		b->base[0] = '\0';
		return -errno;
	}
	bench_fs_name(b->base, b->fs, sizeof b->fs);
	return 0;
}

int bench_activate(int argc, char **argv)
{
	struct ab_bench *b = calloc(1, sizeof(*b));
	struct ab_opts *o;
	bool ok = true;
	int rv;

	if (b == NULL) {
		fprintf(stderr, "kvbench activate: out of memory\n");
		return 1;
	}
	o = &b->o;
	o->keys[0] = AB_KEYS_DEFAULT;
	o->nkeys = 1;
	o->repeat = AB_REPEAT_DEFAULT;
	o->use_kvd = true;
	if ((rv = parse(argc, argv, o)) != 0) {
		free(b);
		return rv > 0 ? 0 : 2;
	}
	bench_command_line(b->command, sizeof b->command, argc, argv);
	if (o->use_kvd && (rv = bench_kvd_path(o->kvd, b->kvd_path, sizeof b->kvd_path)) != 0) {
		fprintf(stderr,
		        "kvbench activate: kvd binary %s: %s (give it with --kvd PATH, or "
		        "--no-kvd)\n",
		        b->kvd_path, strerror(-rv));
		free(b);
		return 2;
	}
	if ((b->pool = malloc((1u << 20) + AB_VALUE_SIZE)) == NULL || make_base(b) != 0) {
		free(b->pool);
		free(b);
		return 1;
	}
	bench_rng_bytes(b->pool, (1u << 20) + AB_VALUE_SIZE, 0x5eed);
	if (o->use_kvd) {
		char err[AB_ERR_MAX];
		if (bench_kvd_pin(b->kvd_path, b->base, b->kvd_bin, sizeof b->kvd_bin, err,
		                  sizeof err) != 0) {
			fprintf(stderr, "kvbench activate: %s\n", err);
			bench_rmtree(b->base);
			free(b->pool);
			free(b);
			return 1;
		}
	}
	b->progress = o->json || o->markdown ? stderr : stdout;
	fprintf(b->progress, "kvbench activate: %s\n", b->command);
	if (!o->json && !o->markdown)
		header(b, stdout, false);
	for (size_t i = 0; i < o->nkeys; i++) {
		b->sizes[i].keys = o->keys[i];
		run_size(b, &b->sizes[i]);
		ok &= b->sizes[i].ok;
	}
	if (o->json) {
		struct report rep = {0};
		if (report_init(&rep) != 0) {
			fprintf(stderr, "kvbench activate: out of memory\n");
			ok = false;
		} else {
			activate_json(b, &rep, ok);
		}
		report_fini(&rep);
	} else if (o->markdown) {
		printf("```\n%s\n```\n\n", b->command);
		header(b, stdout, true);
		report_rows(b, stdout, true);
	} else {
		report_rows(b, stdout, false);
	}
	if (!ok)
		fprintf(stderr, "kvbench activate: FAILED (files kept in %s)\n", b->base);
	else if ((rv = bench_rmtree(b->base)) != 0)
		fprintf(stderr, "kvbench activate: removing %s: %s\n", b->base, strerror(-rv));
	free(b->pool);
	free(b);
	return ok ? 0 : 1;
}
