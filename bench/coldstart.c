/*
 * bench/coldstart.c — kvbench coldstart: how long a new process takes to
 * open a database (or connect to kvd) and get k results, for small k (the
 * small-k case of the WR-Store paper).
 *
 *   kvbench coldstart [--backend LIST] [--state LIST] [--k LIST] [--keys N]
 *                     [--value-size B] [--op get|put] [--repeat R] [--cold]
 *                     [--seed S] [--kvd PATH] [--endpoint URL]
 *                     [--transport nng|stream] [--dir DIR]
 *                     [--quick] [--json | --markdown]
 *
 * Setup, once: every embedded backend (engine, rocksdb, leveldb, lmdb,
 * through bench/peers.h with the settings of `kvbench engine`) gets a
 * database of --keys keys ("ckey" + 12 digits, 16 bytes) with --value-size
 * byte values, written in key order and closed, then opened and closed once
 * more so that every later open finds what a clean shutdown leaves (RocksDB
 * and LevelDB turn their logs into tables on that open). kvd (started once,
 * bench/ycsb_backend.h's yb_kvd_url) gets a tenant with the same keys and
 * values (sync=none, written by Batch calls of CS_BATCH puts).
 *
 * A sample: this process takes CLOCK_MONOTONIC, then posix_spawn()s
 * kvbench itself in its child mode (`kvbench coldstart --child …`). The
 * child notes CLOCK_MONOTONIC (system-wide, so comparable) when its main
 * runs, when the database is open (kvd: kvc_open returned; the connection
 * itself is made by the first call), after its first and after its k-th
 * operation, and after closing; it prints them on stdout and exits 1 on any
 * error. An operation is a get of a uniformly drawn existing key, checked
 * to have its value's length (--op get), or a put of one (--op put, never
 * synced: sync=none everywhere). The time of a sample is exec to the k-th
 * result; its parts are exec to main (starting the process and loading
 * kvbench's libraries, the same for every row), main to open, open to the
 * first result, and first to k-th. Rows:
 *   process          the child does nothing: the floor of every row;
 *   kvd-ipc/kvd-tcp  a client of the running kvd, over ipc or tcp; the
 *                    tenant passive (TenantPassivate just before the
 *                    sample: the first request activates it from its hint
 *                    files; kvd's own activation time is read afterwards
 *                    with Stats) or active (TenantActivate just before);
 *   engine, rocksdb, leveldb, lmdb
 *                    the child opens the database itself.
 * --cold empties the page cache of the database's files first
 * (POSIX_FADV_DONTNEED after fdatasync; kvd's: every file of its data
 * directory), otherwise they are warm. Every row runs once unrecorded, then
 * --repeat times for every k, the order of the rows rotated between
 * repetitions; a row reports the median of its samples, with the fastest
 * and slowest. Ratios: a row's median over the first kvd backend's passive
 * and active medians (above 1: kvd was faster).
 *
 * Exits 0 only when every sample of every row that could run succeeded and
 * the kvd started exited 0.
 */
#include "bench.h"
#include "kvclient.h"
#include "peers.h"
#include "runenv.h"
#include "ycsb_backend.h"
#include "ycsb_gen.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define CS_KEYS_DEFAULT   100000ull
#define CS_VALUE_DEFAULT  100ull
#define CS_REPEAT_DEFAULT 5ull
#define CS_QUICK_KEYS     1000ull
#define CS_QUICK_REPEAT   2ull
#define CS_KEYS_MAX       100000000ull
#define CS_VALUE_MAX      65536ull
#define CS_K_MAX          1000000ull
#define CS_REPEAT_MAX     51ull
#define CS_KEY_SIZE       16
#define CS_BATCH          1000 /* puts per Batch while loading kvd */
#define CS_POOL_BYTES     (1u << 20)
#define CS_CALL_MS        120000 /* a child's kvd calls; the first may activate a big tenant */
#define CS_CHILD_MS       600000 /* a child that has not finished by then is killed */
#define CS_ROWS_MAX       12
#define CS_ERR_MAX        512
#define CS_INFO_MAX       1024
#define CS_TENANT_MAX     72

static const uint64_t cs_k_default[] = {1, 10, 100, 1000};
static const uint64_t cs_k_quick[] = {1, 10};
static const char *const cs_allowed[] = {"kvd-ipc", "kvd-tcp", "engine", "rocksdb",
                                         "leveldb", "lmdb",    NULL};

enum cs_state { ST_NONE, ST_PASSIVE, ST_ACTIVE };
static const char *const cs_state_names[] = {"-", "passive", "active"};

struct cs_opts {
	const struct yb_backend *backends[CS_ROWS_MAX];
	size_t nbackends;
	bool passive, active;
	uint64_t k[RUNENV_LIST_MAX];
	size_t nk;
	uint64_t keys, value_size, repeat;
	bool put, cold;
	struct runenv_opts c; /* the options every experiment takes */
	bool keys_set, repeat_set, k_set;
};

/* The times of one sample, ns after the spawn. */
struct cs_sample {
	double exec, open, first, rest, total, close; /* ms */
	double activation_ms;                         /* kvd passive: Stats' last_activation_us */
};

struct cs_cell {
	struct cs_sample s[CS_REPEAT_MAX];
	size_t n;
};

struct cs_row {
	const char *name;            /* backend name, or "process" */
	const struct yb_backend *be; /* NULL for "process" */
	enum cs_state state;
	bool kvd;
	char target[YB_PATH_MAX + 16]; /* database directory or kvd URL */
	bool failed;
	char err[CS_ERR_MAX];
	char info[CS_INFO_MAX];
	double load_s;
	struct cs_cell cell[RUNENV_LIST_MAX]; /* per k */
};

struct cs_bench {
	struct cs_opts o;
	struct runenv run;
	char self[YB_PATH_MAX];
	char child_log[YB_PATH_MAX + 32];
	char *pool;
	struct cs_row rows[CS_ROWS_MAX];
	size_t nrows;
	char skip[CS_ROWS_MAX][CS_ERR_MAX]; /* per --backend entry: why it cannot run here */
	kvc *admin;                         /* this process's handle on kvd */
	char tenant[CS_TENANT_MAX];
	bool tenant_made;
	double kvd_load_s;
	FILE *progress;
};

static void cs_key(char *buf, uint64_t i)
{
	snprintf(buf, CS_KEY_SIZE + 1, "ckey%012" PRIu64, (uint64_t)(i % 1000000000000ull));
}

static const char *cs_value(const char *pool, uint64_t i, size_t size)
{
	return pool + (size_t)((i * 7919) % (CS_POOL_BYTES - size));
}

static void cs_fill_pool(char *pool, uint64_t seed)
{
	runenv_fill_pool(pool, CS_POOL_BYTES, seed ^ 0xc01d);
}

/* ==== the child ======================================================================== */

struct cs_child {
	const char *backend, *target, *tenant;
	uint64_t k, keys, value_size, seed;
	bool put;
};

static int child_parse(int argc, char **argv, struct cs_child *c)
{
	enum { C_CHILD = 256, C_TARGET, C_TENANT, C_K, C_KEYS, C_SIZE, C_OP, C_SEED };
	static const struct option lo[] = {
	        {"child", required_argument, NULL, C_CHILD},
	        {"target", required_argument, NULL, C_TARGET},
	        {"tenant", required_argument, NULL, C_TENANT},
	        {"k", required_argument, NULL, C_K},
	        {"keys", required_argument, NULL, C_KEYS},
	        {"value-size", required_argument, NULL, C_SIZE},
	        {"op", required_argument, NULL, C_OP},
	        {"seed", required_argument, NULL, C_SEED},
	        {NULL, 0, NULL, 0},
	};
	const char *cmd = "coldstart --child";
	int ch;

	optind = 1;
	opterr = 1;
	while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (ch) {
		case C_CHILD:
			c->backend = optarg;
			break;
		case C_TARGET:
			c->target = optarg;
			break;
		case C_TENANT:
			c->tenant = optarg;
			break;
		case C_K:
			if (bench_parse_u64(cmd, "--k", optarg, 0, CS_K_MAX, &c->k) != 0)
				return -EINVAL;
			break;
		case C_KEYS:
			if (bench_parse_u64(cmd, "--keys", optarg, 1, CS_KEYS_MAX, &c->keys) != 0)
				return -EINVAL;
			break;
		case C_SIZE:
			if (bench_parse_u64(cmd, "--value-size", optarg, 1, CS_VALUE_MAX,
			                    &c->value_size) != 0)
				return -EINVAL;
			break;
		case C_OP:
			if (strcmp(optarg, "get") != 0 && strcmp(optarg, "put") != 0) {
				fprintf(stderr, "kvbench %s: --op is get or put\n", cmd);
				return -EINVAL;
			}
			c->put = strcmp(optarg, "put") == 0;
			break;
		case C_SEED:
			if (bench_parse_u64(cmd, "--seed", optarg, 0, UINT64_MAX, &c->seed) != 0)
				return -EINVAL;
			break;
		default:
			return -EINVAL;
		}
	}
	if (optind < argc || c->backend == NULL ||
	    (strcmp(c->backend, "process") != 0 && (c->target == NULL || c->keys == 0))) {
		fprintf(stderr,
		        "kvbench %s: needs BACKEND, --target, --keys (internal mode of "
		        "kvbench coldstart)\n",
		        cmd);
		return -EINVAL;
	}
	return 0;
}

/* The child's operations on kvd; times into t[1..4]. */
static int child_kvd(const struct cs_child *c, const char *pool, uint64_t *t)
{
	struct kvc_options ko;
	struct kvc_status st;
	struct kvc_call call = {.status = &st};
	struct yg_rng rng;
	kvc *h;
	int rv;

	kvc_options_init(&ko);
	ko.endpoint = c->target;
	ko.tenant = c->tenant;
	ko.timeout_ms = CS_CALL_MS;
	ko.contexts = 1;
	if ((rv = kvc_open(&ko, &h)) != 0) {
		fprintf(stderr, "kvc_open %s: %s\n", c->target, kvc_code_name(rv));
		return -1;
	}
	t[1] = bench_now_ns();
	t[2] = t[1];
	yg_rng_seed(&rng, c->seed);
	for (uint64_t i = 0; i < c->k; i++) {
		uint64_t id = yg_rng_below(&rng, c->keys);
		char key[CS_KEY_SIZE + 1];
		cs_key(key, id);
		if (c->put) {
			rv = kvc_put(h, &call, key, CS_KEY_SIZE, cs_value(pool, id, c->value_size),
			             c->value_size, NULL, NULL);
		} else {
			struct kvc_value v;
			if ((rv = kvc_get(h, &call, key, CS_KEY_SIZE, 0, 0, &v)) == 0) {
				if (v.len != c->value_size) {
					fprintf(stderr, "Get %s: %zu bytes, not %" PRIu64 "\n", key,
					        v.len, c->value_size);
					rv = -KVC_DATA_LOSS;
				}
				kvc_value_free(&v);
			}
		}
		if (rv != 0) {
			fprintf(stderr, "%s %s: %s: %s\n", c->put ? "Put" : "Get", key,
			        kvc_code_name(rv), st.message);
			kvc_close(h);
			return -1;
		}
		if (i == 0)
			t[2] = bench_now_ns();
	}
	t[3] = bench_now_ns();
	kvc_close(h);
	t[4] = bench_now_ns();
	return 0;
}

/* The child's operations on an embedded database; times into t[1..4]. */
static int child_embedded(const struct cs_child *c, const char *pool, uint64_t *t)
{
	const struct yb_backend *be = yb_find(c->backend);
	const struct peer_backend *pb = be != NULL && be->peer ? peer_find(be->peer) : NULL;
	struct peer_config pc = {
	        .path = c->target,
	        .num = c->keys,
	        .key_size = CS_KEY_SIZE,
	        .value_size = c->value_size,
	};
	struct peer_worker w = {0};
	struct peer *db = NULL;
	struct yg_rng rng;
	char err[PEER_ERR_MAX];
	int rv = -1;

	if (pb == NULL || !peer_built(pb)) {
		fprintf(stderr, "backend %s is not built\n", c->backend);
		return -1;
	}
	if (pb->open(&pc, &db, err, sizeof err) != 0) {
		fprintf(stderr, "%s\n", err);
		return -1;
	}
	w.db = db;
	if (pb->worker_init != NULL && pb->worker_init(&w) != 0) {
		fprintf(stderr, "%s\n", w.err);
		pb->close(db);
		return -1;
	}
	t[1] = bench_now_ns();
	t[2] = t[1];
	yg_rng_seed(&rng, c->seed);
	for (uint64_t i = 0; i < c->k; i++) {
		uint64_t id = yg_rng_below(&rng, c->keys);
		char key[CS_KEY_SIZE + 1];
		size_t len = 0;
		cs_key(key, id);
		if (c->put) {
			if (pb->put(&w, key, CS_KEY_SIZE, cs_value(pool, id, c->value_size),
			            c->value_size) != 0) {
				fprintf(stderr, "put %s: %s\n", key, w.err);
				goto out;
			}
		} else {
			int g = pb->get(&w, key, CS_KEY_SIZE, &len);
			if (g < 0) {
				fprintf(stderr, "get %s: %s\n", key, w.err);
				goto out;
			}
			if (g == PEER_NOTFOUND || len != c->value_size) {
				fprintf(stderr, "get %s: %s\n", key,
				        g == PEER_NOTFOUND ? "not found"
				                           : "a value of another length");
				goto out;
			}
		}
		if (i == 0)
			t[2] = bench_now_ns();
	}
	t[3] = bench_now_ns();
	rv = 0;
out:
	if (pb->worker_fini != NULL)
		pb->worker_fini(&w);
	pb->close(db);
	t[4] = bench_now_ns();
	return rv;
}

static int child_main(int argc, char **argv, uint64_t t_main)
{
	struct cs_child c = {.value_size = CS_VALUE_DEFAULT};
	uint64_t t[5] = {t_main, 0, 0, 0, 0};
	char *pool = NULL;
	int rv;

	if (child_parse(argc, argv, &c) != 0)
		return 2;
	if (strcmp(c.backend, "process") == 0) {
		t[1] = t[2] = t[3] = t[4] = bench_now_ns();
		rv = 0;
	} else {
		if (c.value_size >= CS_POOL_BYTES || (pool = malloc(CS_POOL_BYTES)) == NULL) {
			fprintf(stderr, "out of memory\n");
			return 1;
		}
		if (c.put)
			cs_fill_pool(pool, c.seed);
		rv = strncmp(c.backend, "kvd-", 4) == 0 ? child_kvd(&c, pool, t)
		                                        : child_embedded(&c, pool, t);
		free(pool);
	}
	if (rv != 0)
		return 1;
	printf("coldstart-child %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n",
	       t[0], t[1], t[2], t[3], t[4]);
	return fflush(stdout) == 0 ? 0 : 1;
}

/* ==== setup ============================================================================ */

static int load_embedded(struct cs_bench *b, struct cs_row *row)
{
	const struct peer_backend *pb = peer_find(row->be->peer);
	struct peer_config pc = {
	        .path = row->target,
	        .num = b->o.keys,
	        .key_size = CS_KEY_SIZE,
	        .value_size = b->o.value_size,
	};
	struct peer_worker w = {0};
	struct peer *db = NULL;
	char version[256] = "";
	double t0 = bench_now();
	int rv = -1;

	if (pb->open(&pc, &db, row->err, sizeof row->err) != 0)
		return -1;
	w.db = db;
	if (pb->worker_init != NULL && pb->worker_init(&w) != 0) {
		bench_fmt(row->err, sizeof row->err, "%s", w.err);
		pb->close(db);
		return -1;
	}
	for (uint64_t i = 0; i < b->o.keys; i++) {
		char key[CS_KEY_SIZE + 1];
		cs_key(key, i);
		if (pb->put(&w, key, CS_KEY_SIZE, cs_value(b->pool, i, b->o.value_size),
		            b->o.value_size) != 0) {
			bench_fmt(row->err, sizeof row->err, "loading: %s", w.err);
			goto out;
		}
	}
	rv = 0;
out:
	if (pb->worker_fini != NULL)
		pb->worker_fini(&w);
	pb->close(db);
	if (rv != 0)
		return rv;
	/* the clean state every child will find */
	if (pb->open(&pc, &db, row->err, sizeof row->err) != 0)
		return -1;
	pb->close(db);
	row->load_s = bench_now() - t0;
	pb->version(version, sizeof version);
	bench_fmt(row->info, sizeof row->info, "%s; %s; opened by the child with sync off", version,
	          pb->settings);
	return 0;
}

static int load_kvd(struct cs_bench *b)
{
	struct kvc_options ko;
	struct kvc_status st;
	struct kvc_call call = {.timeout_ms = CS_CALL_MS, .status = &st};
	struct kvc_tenant_opts to = {.sync = KVC_SYNC_NONE};
	struct kvc_op *ops = calloc(CS_BATCH, sizeof(*ops));
	char(*keys)[CS_KEY_SIZE + 1] = calloc(CS_BATCH, sizeof(*keys));
	const char *url;
	char err[CS_ERR_MAX];
	double t0 = bench_now();
	int rv = -1;

	if (ops == NULL || keys == NULL) {
		fprintf(stderr, "kvbench coldstart: out of memory\n");
		goto out;
	}
	if (yb_kvd_url(&b->run.env, false, &url, err, sizeof err) != 0) {
		fprintf(stderr, "kvbench coldstart: kvd: %s\n", err);
		goto out;
	}
	kvc_options_init(&ko);
	ko.endpoint = url;
	ko.timeout_ms = CS_CALL_MS;
	ko.contexts = 2;
	if ((rv = kvc_open(&ko, &b->admin)) != 0) {
		fprintf(stderr, "kvbench coldstart: kvc_open %s: %s\n", url, kvc_code_name(rv));
		b->admin = NULL;
		rv = -1;
		goto out;
	}
	bench_fmt(b->tenant, sizeof b->tenant, "coldstart-%ld", (long)getpid());
	if ((rv = kvc_tenant_create(b->admin, &call, b->tenant, &to)) != 0) {
		fprintf(stderr, "kvbench coldstart: TenantCreate %s on %s: %s: %s\n", b->tenant,
		        url, kvc_code_name(rv), st.message);
		rv = -1;
		goto out;
	}
	b->tenant_made = true;
	call.tenant = b->tenant;
	for (uint64_t i = 0; i < b->o.keys; i += CS_BATCH) {
		size_t n = b->o.keys - i < CS_BATCH ? (size_t)(b->o.keys - i) : CS_BATCH;
		for (size_t j = 0; j < n; j++) {
			cs_key(keys[j], i + j);
			ops[j] = (struct kvc_op){
			        .type = KVC_OP_PUT,
			        .key = keys[j],
			        .key_len = CS_KEY_SIZE,
			        .value = cs_value(b->pool, i + j, b->o.value_size),
			        .value_len = b->o.value_size,
			        .if_version = KVC_ANY_VERSION,
			};
		}
		if ((rv = kvc_batch(b->admin, &call, ops, n, NULL)) != 0) {
			fprintf(stderr, "kvbench coldstart: loading kvd: Batch: %s: %s\n",
			        kvc_code_name(rv), st.message);
			rv = -1;
			goto out;
		}
	}
	b->kvd_load_s = bench_now() - t0;
	rv = 0;
out:
	free(ops);
	free(keys);
	return rv;
}

/* ==== samples ========================================================================== */

static int drop_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	int fd;

	(void)st;
	(void)ftw;
	if (flag != FTW_F)
		return 0;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return 0; /* gone meanwhile */
	(void)fdatasync(fd);
	(void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	close(fd);
	return 0;
}

static void drop_cache(const char *dir)
{
	(void)nftw(dir, drop_one, 16, FTW_PHYS);
}

/* Brings the tenant to the row's state; 0 or -1 with err filled. */
static int kvd_prepare(struct cs_bench *b, const struct cs_row *row, char *err, size_t errlen)
{
	struct kvc_status st;
	struct kvc_call call = {.timeout_ms = CS_CALL_MS, .status = &st};
	int rv = row->state == ST_PASSIVE ? kvc_tenant_passivate(b->admin, &call, b->tenant)
	                                  : kvc_tenant_activate(b->admin, &call, b->tenant, NULL);

	if (rv != 0) {
		bench_fmt(err, errlen, "%s %s: %s: %s",
		          row->state == ST_PASSIVE ? "TenantPassivate" : "TenantActivate",
		          b->tenant, kvc_code_name(rv), st.message);
		return -1;
	}
	return 0;
}

/* The first line of the child's stderr. */
static void child_err(const struct cs_bench *b, char *buf, size_t len)
{
	FILE *f = fopen(b->child_log, "r");

	buf[0] = '\0';
	if (f != NULL) {
		if (fgets(buf, (int)len, f) == NULL)
			buf[0] = '\0';
		buf[strcspn(buf, "\n")] = '\0';
		fclose(f);
	}
}

/* One child: spawned, waited for, its times parsed. 0 or -1 with err. */
static int cs_spawn(struct cs_bench *b, const struct cs_row *row, uint64_t k, uint64_t seed,
                    struct cs_sample *ret, char *err, size_t errlen)
{
	const struct cs_opts *o = &b->o;
	char ks[32], keys[32], vs[32], ss[32], out[512];
	const char *argv[24];
	posix_spawn_file_actions_t fa;
	uint64_t t0, t[5];
	size_t n = 0, got = 0;
	int pfd[2], st, rv;
	pid_t pid;

	bench_fmt(ks, sizeof ks, "%" PRIu64, k);
	bench_fmt(keys, sizeof keys, "%" PRIu64, o->keys);
	bench_fmt(vs, sizeof vs, "%" PRIu64, o->value_size);
	bench_fmt(ss, sizeof ss, "%" PRIu64, seed);
	argv[n++] = b->self;
	argv[n++] = "coldstart";
	argv[n++] = "--child";
	argv[n++] = row->name;
	if (row->be != NULL) {
		argv[n++] = "--target";
		argv[n++] = row->target;
		if (row->kvd) {
			argv[n++] = "--tenant";
			argv[n++] = b->tenant;
		}
		argv[n++] = "--k";
		argv[n++] = ks;
		argv[n++] = "--keys";
		argv[n++] = keys;
		argv[n++] = "--value-size";
		argv[n++] = vs;
		argv[n++] = "--op";
		argv[n++] = o->put ? "put" : "get";
		argv[n++] = "--seed";
		argv[n++] = ss;
	}
	argv[n] = NULL;
	if (pipe2(pfd, O_CLOEXEC) != 0) {
		bench_fmt(err, errlen, "pipe: %s", strerror(errno));
		return -1;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, pfd[1], STDOUT_FILENO);
	posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, b->child_log,
	                                 O_WRONLY | O_CREAT | O_TRUNC, 0644);
	t0 = bench_now_ns();
	rv = posix_spawn(&pid, b->self, &fa, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(pfd[1]);
	if (rv != 0) {
		close(pfd[0]);
		bench_fmt(err, errlen, "posix_spawn %s: %s", b->self, strerror(rv));
		return -1;
	}
	for (;;) {
		struct pollfd p = {.fd = pfd[0], .events = POLLIN};
		ssize_t r;
		int pr = poll(&p, 1, CS_CHILD_MS);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr <= 0) {
			kill(pid, SIGKILL);
			break;
		}
		r = read(pfd[0], out + got, sizeof out - 1 - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
		if (got == sizeof out - 1)
			break;
	}
	out[got] = '\0';
	close(pfd[0]);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		char e[CS_ERR_MAX];
		child_err(b, e, sizeof e);
		if (WIFEXITED(st))
			bench_fmt(err, errlen, "child exited %d: %s", WEXITSTATUS(st), e);
		else
			bench_fmt(err, errlen, "child killed by signal %d: %s", WTERMSIG(st), e);
		return -1;
	}
	if (sscanf(out, "coldstart-child %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64,
	           &t[0], &t[1], &t[2], &t[3], &t[4]) != 5 ||
	    t[0] < t0 || t[1] < t[0] || t[2] < t[1] || t[3] < t[2] || t[4] < t[3]) {
		bench_fmt(err, errlen, "child printed '%.100s'", out);
		return -1;
	}
	ret->exec = (double)(t[0] - t0) / 1e6;
	ret->open = (double)(t[1] - t[0]) / 1e6;
	ret->first = (double)(t[2] - t[1]) / 1e6;
	ret->rest = (double)(t[3] - t[2]) / 1e6;
	ret->total = (double)(t[3] - t0) / 1e6;
	ret->close = (double)(t[4] - t[3]) / 1e6;
	ret->activation_ms = 0;
	return 0;
}

/* One sample of row at k (recorded unless cell is NULL). */
static void cs_sample(struct cs_bench *b, struct cs_row *row, uint64_t k, uint64_t seed,
                      struct cs_cell *cell)
{
	struct cs_sample s;
	char err[CS_ERR_MAX];

	if (row->failed)
		return;
	if (b->o.cold && row->be != NULL) {
		if (!row->kvd)
			drop_cache(row->target);
		else if (b->run.env.endpoint == NULL) {
			char data[YB_PATH_MAX + 16];
			bench_fmt(data, sizeof data, "%s/kvd-data", b->run.base);
			drop_cache(data);
		}
	}
	if (row->kvd && kvd_prepare(b, row, err, sizeof err) != 0)
		goto fail;
	if (cs_spawn(b, row, k, seed, &s, err, sizeof err) != 0)
		goto fail;
	if (row->kvd && row->state == ST_PASSIVE) {
		struct kvc_status st;
		struct kvc_call call = {
		        .tenant = b->tenant, .timeout_ms = CS_CALL_MS, .status = &st};
		struct kvc_tenant_info ti;
		int rv = kvc_stats(b->admin, &call, &ti);
		if (rv != 0) {
			bench_fmt(err, sizeof err, "Stats %s: %s: %s", b->tenant, kvc_code_name(rv),
			          st.message);
			goto fail;
		}
		s.activation_ms = (double)ti.last_activation_us / 1e3;
	}
	if (cell != NULL && cell->n < CS_REPEAT_MAX)
		cell->s[cell->n++] = s;
	return;
fail:
	row->failed = true;
	bench_fmt(row->err, sizeof row->err, "k=%" PRIu64 ": %s", k, err);
	fprintf(b->progress, "%s%s%s: FAILED: %s\n", row->name, row->kvd ? " " : "",
	        row->kvd ? cs_state_names[row->state] : "", row->err);
}

/* ==== report =========================================================================== */

/* The median of a field of a cell's samples, with min and max. */
static double cell_stat(const struct cs_cell *c, size_t off, double *ret_min, double *ret_max)
{
	double v[CS_REPEAT_MAX], med;

	for (size_t i = 0; i < c->n; i++)
		memcpy(&v[i], (const char *)&c->s[i] + off, sizeof(double));
	med = runenv_median(v, c->n); /* sorts v */
	if (ret_min != NULL)
		*ret_min = c->n ? v[0] : 0;
	if (ret_max != NULL)
		*ret_max = c->n ? v[c->n - 1] : 0;
	return med;
}

#define STAT(c, field, mn, mx) cell_stat((c), offsetof(struct cs_sample, field), (mn), (mx))

/* The first kvd row of the given state, or NULL. */
static const struct cs_row *cs_ref(const struct cs_bench *b, enum cs_state state)
{
	const char *first = NULL;

	for (size_t i = 0; i < b->nrows; i++)
		if (b->rows[i].kvd && first == NULL)
			first = b->rows[i].name;
	for (size_t i = 0; i < b->nrows; i++) {
		const struct cs_row *r = &b->rows[i];
		if (r->kvd && r->state == state && strcmp(r->name, first) == 0 && !r->failed)
			return r;
	}
	return NULL;
}

static double ratio(const struct cs_row *ref, size_t ki, double total)
{
	double t;

	if (ref == NULL || ref->cell[ki].n == 0)
		return 0;
	t = STAT(&ref->cell[ki], total, NULL, NULL);
	return t > 0 ? total / t : 0;
}

static void cs_header(const struct cs_bench *b, struct report *h)
{
	const struct cs_opts *o = &b->o;
	char ks[128] = "", be[256] = "";

	for (size_t i = 0; i < o->nk; i++)
		snprintf(ks + strlen(ks), sizeof ks - strlen(ks), "%s%" PRIu64, i ? "," : "",
		         o->k[i]);
	for (size_t i = 0; i < o->nbackends; i++)
		snprintf(be + strlen(be), sizeof be - strlen(be), "%s%s", i ? "," : "",
		         o->backends[i]->name);
	runenv_lines_common(h, &b->run);
	report_line(h, "config",
	            "backends %s (kvd states:%s%s); k %s; %" PRIu64 " keys of %d bytes, %" PRIu64
	            "-byte values; op %s of uniformly drawn existing keys%s; %" PRIu64
	            " samples per row and k after one unrecorded one, rows rotated; page cache "
	            "%s; seed %" PRIu64,
	            be, o->passive ? " passive" : "", o->active ? " active" : "", ks, o->keys,
	            CS_KEY_SIZE, o->value_size, o->put ? "put" : "get",
	            o->put ? " (never synced, sync=none everywhere)" : "", o->repeat,
	            o->cold ? "emptied before each sample (fdatasync + POSIX_FADV_DONTNEED)"
	                    : "warm",
	            o->c.seed);
	report_line(h, "process",
	            "a sample is this process's CLOCK_MONOTONIC before posix_spawn of %s "
	            "coldstart --child … to the child's CLOCK_MONOTONIC after its k-th result; "
	            "exec->main is the start of the process and the loading of kvbench's "
	            "libraries (RocksDB, LevelDB, LMDB, hiredis, nng …), the same for every row "
	            "(see the process row)",
	            b->self);
	report_line(h, "kvd",
	            "child: kvc_open (asynchronous connect; the first call waits for the "
	            "connection), then kvc_get/kvc_put with 1 context; tenant %s with the same "
	            "keys (loaded in %.2f s by Batch); passive: TenantPassivate before each "
	            "sample, the child's first request activates it; active: TenantActivate "
	            "before each sample; activation ms = Stats' last_activation_us after the "
	            "sample",
	            b->tenant[0] ? b->tenant : "-", b->kvd_load_s);
	report_line(h, "ratios",
	            "a row's median exec->k-th over the first kvd backend's passive and active "
	            "medians at the same k: above 1 kvd was faster");
	runenv_lines_kvd(h, &b->run);
	for (size_t i = 0; i < b->nrows; i++)
		if (b->rows[i].info[0] != '\0')
			report_line(h, "backend", "%s: database %s, loaded in %.2f s: %s",
			            b->rows[i].name, b->rows[i].target, b->rows[i].load_s,
			            b->rows[i].info);
	for (size_t i = 0; i < o->nbackends; i++)
		if (b->skip[i][0] != '\0')
			report_line(h, "skipped", "%s: %s", o->backends[i]->name, b->skip[i]);
}

static void row_label(const struct cs_row *r, char *buf, size_t len)
{
	bench_fmt(buf, len, "%s%s%s", r->name, r->kvd ? " " : "",
	          r->kvd ? cs_state_names[r->state] : "");
}

static void cs_report_text(const struct cs_bench *b, struct report *h)
{
	const struct cs_row *rp = cs_ref(b, ST_PASSIVE), *ra = cs_ref(b, ST_ACTIVE);

	putchar('\n');
	report_lines_text(h, stdout, 10);
	printf("\nsummary (ms, medians; total = exec to the k-th result):\n");
	printf("%5s %-16s %9s %17s %8s %8s %8s %8s %8s %8s %7s %7s\n", "k", "row", "total",
	       "[min-max]", "exec", "open", "first", "rest", "close", "activ.", "/kvd-p", "/kvd-a");
	for (size_t ki = 0; ki < b->o.nk; ki++)
		for (size_t i = 0; i < b->nrows; i++) {
			const struct cs_row *r = &b->rows[i];
			const struct cs_cell *c = &r->cell[ki];
			char lab[64], range[48];
			double mn, mx, tot;
			row_label(r, lab, sizeof lab);
			if (r->failed || c->n == 0) {
				printf("%5" PRIu64 " %-16s FAILED: %s\n", b->o.k[ki], lab, r->err);
				continue;
			}
			tot = STAT(c, total, &mn, &mx);
			bench_fmt(range, sizeof range, "[%.2f-%.2f]", mn, mx);
			printf("%5" PRIu64 " %-16s %9.2f %17s %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f "
			       "%6.2fx %6.2fx\n",
			       b->o.k[ki], lab, tot, range, STAT(c, exec, NULL, NULL),
			       STAT(c, open, NULL, NULL), STAT(c, first, NULL, NULL),
			       STAT(c, rest, NULL, NULL), STAT(c, close, NULL, NULL),
			       STAT(c, activation_ms, NULL, NULL), ratio(rp, ki, tot),
			       ratio(ra, ki, tot));
		}
}

static void cs_report_markdown(const struct cs_bench *b, struct report *h)
{
	const struct cs_row *rp = cs_ref(b, ST_PASSIVE), *ra = cs_ref(b, ST_ACTIVE);

	printf("```\n%s\n```\n\n", b->run.command);
	report_lines_markdown(h, stdout);
	printf("\n| k | row | exec→k-th ms [min-max] | exec→main | main→open | open→1st | "
	       "1st→k-th | kvd activation | ÷ %s passive | ÷ %s active |\n",
	       rp ? rp->name : "kvd", ra ? ra->name : "kvd");
	printf("|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|\n");
	for (size_t ki = 0; ki < b->o.nk; ki++)
		for (size_t i = 0; i < b->nrows; i++) {
			const struct cs_row *r = &b->rows[i];
			const struct cs_cell *c = &r->cell[ki];
			char lab[64], act[32] = "-", p[32] = "-", a[32] = "-";
			double mn, mx, tot;
			row_label(r, lab, sizeof lab);
			if (r->failed || c->n == 0) {
				printf("| %" PRIu64 " | %s | FAILED: %s | | | | | | | |\n",
				       b->o.k[ki], lab, r->err);
				continue;
			}
			tot = STAT(c, total, &mn, &mx);
			if (r->kvd && r->state == ST_PASSIVE)
				bench_fmt(act, sizeof act, "%.2f",
				          STAT(c, activation_ms, NULL, NULL));
			if (ratio(rp, ki, tot) > 0)
				bench_fmt(p, sizeof p, "%.2fx", ratio(rp, ki, tot));
			if (ratio(ra, ki, tot) > 0)
				bench_fmt(a, sizeof a, "%.2fx", ratio(ra, ki, tot));
			printf("| %" PRIu64
			       " | %s | **%.2f** [%.2f-%.2f] | %.2f | %.2f | %.2f | %.2f | "
			       "%s | %s | %s |\n",
			       b->o.k[ki], lab, tot, mn, mx, STAT(c, exec, NULL, NULL),
			       STAT(c, open, NULL, NULL), STAT(c, first, NULL, NULL),
			       STAT(c, rest, NULL, NULL), act, p, a);
		}
}

static void cs_report_json(const struct cs_bench *b, struct report *rep, bool ok)
{
	const struct cs_opts *o = &b->o;
	const struct cs_row *rp = cs_ref(b, ST_PASSIVE), *ra = cs_ref(b, ST_ACTIVE);
	json_t *k = json_array(), *results = json_array();

	for (size_t i = 0; i < o->nk; i++)
		json_array_append_new(k, report_u64(o->k[i]));
	for (size_t ki = 0; ki < o->nk; ki++)
		for (size_t i = 0; i < b->nrows; i++) {
			const struct cs_row *r = &b->rows[i];
			const struct cs_cell *c = &r->cell[ki];
			double mn = 0, mx = 0, tot = STAT(c, total, &mn, &mx);
			json_t *samples = json_array();
			json_t *row = json_pack(
			        "{s:o,s:s,s:s,s:b,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "k",
			        report_u64(o->k[ki]), "backend", r->name, "state",
			        cs_state_names[r->state], "ok", !(r->failed || c->n == 0),
			        "samples", report_u64(c->n), "total_ms", report_real(tot, 4),
			        "total_min_ms", report_real(mn, 4), "total_max_ms",
			        report_real(mx, 4), "exec_ms",
			        report_real(STAT(c, exec, NULL, NULL), 4), "open_ms",
			        report_real(STAT(c, open, NULL, NULL), 4), "first_ms",
			        report_real(STAT(c, first, NULL, NULL), 4), "rest_ms",
			        report_real(STAT(c, rest, NULL, NULL), 4), "close_ms",
			        report_real(STAT(c, close, NULL, NULL), 4), "activation_ms",
			        report_real(STAT(c, activation_ms, NULL, NULL), 4));
			if (ratio(rp, ki, tot) > 0)
				report_set(row, "over_kvd_passive",
				           report_real(ratio(rp, ki, tot), 4));
			if (ratio(ra, ki, tot) > 0)
				report_set(row, "over_kvd_active",
				           report_real(ratio(ra, ki, tot), 4));
			for (size_t s = 0; s < c->n; s++)
				json_array_append_new(samples, report_real(c->s[s].total, 4));
			report_set(row, "samples_total_ms", samples);
			report_set(row, "error", report_str(r->err));
			json_array_append_new(results, row);
		}
	report_set(rep->doc, "bench", json_string("coldstart"));
	report_set(rep->doc, "ok", json_boolean(ok));
	report_set(rep->doc, "command", report_str(b->run.command));
	report_set(rep->doc, "config",
	           json_pack("{s:o,s:i,s:o,s:s,s:o,s:s,s:o,s:o,s:o}", "keys", report_u64(o->keys),
	                     "key_size", CS_KEY_SIZE, "value_size", report_u64(o->value_size), "op",
	                     o->put ? "put" : "get", "repeat", report_u64(o->repeat), "cache",
	                     o->cold ? "cold" : "warm", "seed", report_u64(o->c.seed), "k", k,
	                     "backends", runenv_json_backends(o->backends, o->nbackends)));
	report_set(rep->doc, "header", json_incref(rep->lines));
	report_set(rep->doc, "results", results);
	report_set(rep->doc, "kvd_exit", report_str(b->run.kvd_failed ? b->run.kvd_err : "ok"));
	(void)report_json(rep, stdout);
}

/* ==== options ========================================================================== */

static int parse_backends(const char *cmd, const char *name, const char *arg, void *val)
{
	struct cs_opts *o = val;

	(void)name;
	return runenv_parse_backends(cmd, arg, cs_allowed, o->backends, CS_ROWS_MAX, &o->nbackends);
}

static int parse_states(const char *cmd, const char *name, const char *arg, void *val)
{
	static const char *const names[] = {"passive", "active"};
	struct cs_opts *o = val;
	bool on[2];

	if (bench_parse_names(cmd, name, arg, names, 2, on) != 0)
		return -EINVAL;
	o->passive = on[0];
	o->active = on[1];
	return 0;
}

static int parse_k(const char *cmd, const char *name, const char *arg, void *val)
{
	struct cs_opts *o = val;

	return bench_parse_u64_list(cmd, name, arg, 1, CS_K_MAX, o->k, RUNENV_LIST_MAX, &o->nk);
}

static int parse_op(const char *cmd, const char *name, const char *arg, void *val)
{
	if (strcmp(arg, "get") != 0 && strcmp(arg, "put") != 0) {
		fprintf(stderr, "kvbench %s: %s is get or put, not '%s'\n", cmd, name, arg);
		return -EINVAL;
	}
	*(bool *)val = strcmp(arg, "put") == 0;
	return 0;
}

/* 0, 1 for --help, or -EINVAL. */
static int parse(int argc, char **argv, struct cs_opts *o)
{
	char quick[256];
	struct bench_opt opts[8 + RUNENV_OPTS_N] = {
	        {BENCH_OPT("backend", BENCH_OPT_FUNC, o, "LIST",
	                   "kvd-ipc,kvd-tcp,engine,rocksdb,leveldb,lmdb (default all)"),
	         .parse = parse_backends},
	        {BENCH_OPT("state", BENCH_OPT_FUNC, o, "LIST",
	                   "passive,active: kvd's tenant before a sample (default both)"),
	         .parse = parse_states},
	        {BENCH_OPT("k", BENCH_OPT_FUNC, o, "LIST",
	                   "operations per process (default 1,10,100,1000)"),
	         .set = &o->k_set, .parse = parse_k},
	        {BENCH_OPT("keys", BENCH_OPT_U64, &o->keys, "N",
	                   "keys in every database (default %D)"),
	         .lo = 1, .hi = CS_KEYS_MAX, .set = &o->keys_set},
	        {BENCH_OPT("value-size", BENCH_OPT_U64, &o->value_size, "B",
	                   "bytes per value (default %D)"),
	         .lo = 1, .hi = CS_VALUE_MAX},
	        {BENCH_OPT("op", BENCH_OPT_FUNC, &o->put, "get|put",
	                   "gets of existing keys (default) or puts (unsynced)"),
	         .parse = parse_op},
	        {BENCH_OPT("repeat", BENCH_OPT_U64, &o->repeat, "R",
	                   "samples per row and k, median reported (default %D)"),
	         .lo = 1, .hi = CS_REPEAT_MAX, .set = &o->repeat_set},
	        {BENCH_OPT("cold", BENCH_OPT_FLAG, &o->cold, NULL,
	                   "empty the page cache of the database files before each\n"
	                   "sample (default: warm)")},
	};
	struct bench_cmd cmd = {
	        "coldstart",
	        "A new process opening a database (or connecting to kvd) and doing k operations,\n"
	        "timed from its exec to the k-th result.\n",
	        "Exits 0 only when every sample succeeded and the kvd started exited 0.\n",
	        opts,
	        8,
	};
	int rv;

	bench_fmt(quick, sizeof quick,
	          "smoke run: %llu keys, k 1,10, %llu samples (explicit\n"
	          "options win)",
	          CS_QUICK_KEYS, CS_QUICK_REPEAT);
	cmd.nopts +=
	        runenv_opts_table(&o->c, false, "key choice (default %D)", quick, opts + cmd.nopts);
	if ((rv = bench_opts_parse(&cmd, argc, argv)) != 0)
		return rv;
	if (runenv_opts_done(cmd.name, &o->c) != 0)
		return -EINVAL;
	if (o->c.quick) {
		if (!o->keys_set)
			o->keys = CS_QUICK_KEYS;
		if (!o->repeat_set)
			o->repeat = CS_QUICK_REPEAT;
		if (!o->k_set) {
			memcpy(o->k, cs_k_quick, sizeof cs_k_quick);
			o->nk = sizeof cs_k_quick / sizeof cs_k_quick[0];
		}
	}
	if (o->cold && o->c.endpoint != NULL)
		for (size_t i = 0; i < o->nbackends; i++)
			if (strcmp(o->backends[i]->kind, "kvd") == 0) {
				fprintf(stderr,
				        "kvbench coldstart: --cold cannot reach the files of "
				        "a kvd given with --endpoint\n");
				return -EINVAL;
			}
	return 0;
}

/* ==== entry point ====================================================================== */

static void add_row(struct cs_bench *b, const char *name, const struct yb_backend *be,
                    enum cs_state state)
{
	struct cs_row *r = &b->rows[b->nrows++];

	memset(r, 0, sizeof(*r));
	r->name = name;
	r->be = be;
	r->state = state;
	r->kvd = be != NULL && strcmp(be->kind, "kvd") == 0;
}

static bool cs_all_ok(const struct cs_bench *b)
{
	if (b->run.kvd_failed)
		return false;
	for (size_t i = 0; i < b->nrows; i++) {
		if (b->rows[i].failed)
			return false;
		for (size_t ki = 0; ki < b->o.nk; ki++)
			if (b->rows[i].cell[ki].n != b->o.repeat)
				return false;
	}
	return b->nrows > 1; /* more than the process row */
}

/* Everything but the child: setup, samples, report. */
static int cs_run(struct cs_bench *b, int argc, char **argv)
{
	struct cs_opts *o = &b->o;
	struct report rep = {0}, *h = &rep;
	bool need_kvd = false, ok = false;
	ssize_t n;
	int rv;

	for (size_t i = 0; i < o->nbackends; i++)
		need_kvd |= strcmp(o->backends[i]->kind, "kvd") == 0;
	if (runenv_init(&b->run, "coldstart", argc, argv, o->c.dir, o->c.kvd, o->c.endpoint, NULL,
	                need_kvd) != 0)
		return 1;
	b->run.env.stream = o->c.stream;
	if ((n = readlink("/proc/self/exe", b->self, sizeof b->self - 1)) <= 0) {
		fprintf(stderr, "kvbench coldstart: readlink /proc/self/exe: %s\n",
		        strerror(errno));
		goto out;
	}
	b->self[n] = '\0';
	bench_fmt(b->child_log, sizeof b->child_log, "%s/child.stderr", b->run.base);
	if ((b->pool = malloc(CS_POOL_BYTES)) == NULL || report_init(h) != 0) {
		fprintf(stderr, "kvbench coldstart: out of memory\n");
		goto out;
	}
	cs_fill_pool(b->pool, o->c.seed);
	fprintf(b->progress, "kvbench coldstart: %s\n", b->run.command);

	add_row(b, "process", NULL, ST_NONE);
	for (size_t i = 0; i < o->nbackends; i++) {
		const struct yb_backend *be = o->backends[i];
		const char *why = be->unavailable(be, &b->run.env);
		if (why != NULL) {
			bench_fmt(b->skip[i], sizeof b->skip[i], "%s", why);
			fprintf(b->progress, "%s: %s, skipped\n", be->name, why);
			continue;
		}
		if (strcmp(be->kind, "kvd") != 0) {
			add_row(b, be->name, be, ST_NONE);
			bench_fmt(b->rows[b->nrows - 1].target, sizeof b->rows[0].target,
			          "%s/%s-db", b->run.base, be->name);
			continue;
		}
		if (o->passive)
			add_row(b, be->name, be, ST_PASSIVE);
		if (o->active)
			add_row(b, be->name, be, ST_ACTIVE);
	}
	if (need_kvd) {
		if (load_kvd(b) != 0)
			goto out;
		fprintf(b->progress, "kvd: tenant %s, %" PRIu64 " keys loaded in %.2f s\n",
		        b->tenant, o->keys, b->kvd_load_s);
	}
	for (size_t i = 0; i < b->nrows; i++) {
		struct cs_row *r = &b->rows[i];
		if (r->kvd) {
			const char *url;
			char err[CS_ERR_MAX];
			if (yb_kvd_url(&b->run.env, strcmp(r->name, "kvd-tcp") == 0, &url, err,
			               sizeof err) != 0) {
				fprintf(stderr, "kvbench coldstart: kvd: %s\n", err);
				goto out;
			}
			bench_fmt(r->target, sizeof r->target, "%s", url);
		} else if (r->be != NULL) {
			if (load_embedded(b, r) != 0) {
				r->failed = true;
				fprintf(b->progress, "%s: FAILED: %s\n", r->name, r->err);
				continue;
			}
			fprintf(b->progress, "%s: %" PRIu64 " keys loaded in %.2f s\n", r->name,
			        o->keys, r->load_s);
		}
	}
	/* one unrecorded sample per row, then the recorded ones */
	for (size_t i = 0; i < b->nrows; i++)
		cs_sample(b, &b->rows[i], 1, o->c.seed, NULL);
	for (uint64_t rep = 0; rep < o->repeat; rep++) {
		for (size_t ki = 0; ki < o->nk; ki++)
			for (size_t j = 0; j < b->nrows; j++) {
				struct cs_row *r = &b->rows[(j + rep) % b->nrows];
				cs_sample(b, r, o->k[ki], o->c.seed + 1 + rep * 1000 + ki,
				          &r->cell[ki]);
			}
		fprintf(b->progress, "repetition %" PRIu64 " of %" PRIu64 " done\n", rep + 1,
		        o->repeat);
	}
	if (b->tenant_made) {
		struct kvc_status st;
		struct kvc_call call = {.timeout_ms = CS_CALL_MS, .status = &st};
		if ((rv = kvc_tenant_drop(b->admin, &call, b->tenant)) != 0) {
			fprintf(stderr, "kvbench coldstart: TenantDrop %s: %s: %s\n", b->tenant,
			        kvc_code_name(rv), st.message);
			b->run.kvd_failed = true;
			bench_fmt(b->run.kvd_err, sizeof b->run.kvd_err, "TenantDrop failed");
		}
		b->tenant_made = false;
	}
	kvc_close(b->admin);
	b->admin = NULL;
	if (runenv_fini(&b->run, false) != 0)
		b->run.kvd_failed = true;
	ok = cs_all_ok(b);
	cs_header(b, h);
	if (o->c.json)
		cs_report_json(b, h, ok);
	else if (o->c.markdown)
		cs_report_markdown(b, h);
	else
		cs_report_text(b, h);
	(void)runenv_finish(&b->run, ok, "a sample failed");
out:
	if (b->admin != NULL) {
		if (b->tenant_made)
			(void)kvc_tenant_drop(b->admin, NULL, b->tenant);
		kvc_close(b->admin);
	}
	if (b->run.env.kvd_started)
		(void)runenv_fini(&b->run, false);
	report_fini(h);
	return ok ? 0 : 1;
}

int bench_coldstart(int argc, char **argv)
{
	uint64_t t_main = bench_now_ns();
	struct cs_bench *b;
	struct cs_opts *o;
	int rv;

	if (argc > 1 && strcmp(argv[1], "--child") == 0)
		return child_main(argc, argv, t_main);
	if ((b = calloc(1, sizeof(*b))) == NULL) {
		fprintf(stderr, "kvbench coldstart: out of memory\n");
		return 1;
	}
	o = &b->o;
	for (size_t i = 0; cs_allowed[i] != NULL; i++)
		o->backends[o->nbackends++] = yb_find(cs_allowed[i]);
	runenv_opts_init(&o->c);
	o->passive = o->active = true;
	memcpy(o->k, cs_k_default, sizeof cs_k_default);
	o->nk = sizeof cs_k_default / sizeof cs_k_default[0];
	o->keys = CS_KEYS_DEFAULT;
	o->value_size = CS_VALUE_DEFAULT;
	o->repeat = CS_REPEAT_DEFAULT;
	if ((rv = parse(argc, argv, o)) != 0) {
		free(b);
		return rv > 0 ? 0 : 2;
	}
	b->progress = o->c.json || o->c.markdown ? stderr : stdout;
	signal(SIGPIPE, SIG_IGN);
	rv = cs_run(b, argc, argv);
	free(b->pool);
	free(b);
	return rv;
}
