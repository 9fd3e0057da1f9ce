/* test_export.c — kvctl export → import between two kvds: byte-exact, resumable, damage refused,
 * blobs too. */
/*
 * Byte-exact: keys, values, the order of versions with their deletes, and
 * expiries, with --history and at a past version (--as-of); an import
 * killed half way and run again ends in the state of one that was not, with
 * no version written twice; a truncated or changed export is refused and
 * writes nothing.
 *
 * Two kvds, A and B. A's tenant "src" (history 4) gets NKEYS keys in two
 * rounds: the first ends at version v1; the second overwrites, deletes and
 * re-creates some keys, gives others a TTL, deletes a few for good and adds
 * new ones. Values are binary (NUL bytes, every length from 0 to a few
 * hundred bytes, a few of 64 KiB). kvctl ($KVCTL_BIN) exports and imports
 * as a user would; the comparison reads both daemons through libkvclient
 * (Scan, then Versions with values and Get of every key).
 *
 * Blobs: A's tenant "bsrc" holds plain values, blobs of 0, 1, 1 MiB,
 * 1 MiB + 1 and a few MiB bytes, and keys whose history mixes blobs,
 * values and a delete; exported with and without --history and imported
 * into B, every blob is compared by BlobInfo (size, XXH64) and read back
 * with BlobRead byte by byte. An import resumed after part of a key's
 * history is in (written by hand, as an interruption leaves it) or killed
 * while blobs stream, run again, writes no version twice; a damaged part
 * line and a file cut inside a blob are refused; a format_version 1 file
 * still imports; a file spaced as another writer may space it, whose key
 * begins with a delete, resumes after the blob the target has.
 */
#include "harness.h"

#include <openssl/evp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/stat.h>
#include <xxhash.h>

#include <cmocka.h> /* after the headers it needs */

#include "kvclient.h"

#define NKEYS    20000
#define NEWKEYS  500
#define HISTORY  4
#define KEY_FMT  "key:%05d"
#define TTL_MS   3600000ULL /* long enough never to expire during the test */
#define EXP_SLOP 2000       /* ms an imported expiry may differ by */

static struct kvd_proc kvd_a, kvd_b;
static kvc *ca, *cb;
static char *scratch;
static char *export_hist; /* --history, now */
static char *export_asof; /* without history, as of v1 */
static uint64_t v1;       /* the last version of the first round */

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* A binary value: NULs included; now and then 64 KiB. */
static size_t make_value(char *buf, size_t cap, int i, int round)
{
	size_t n = (i % 997 == 0) ? 65536 : next_rand() % 300;

	assert_true(n <= cap);
	for (size_t j = 0; j < n; j++)
		buf[j] = (char)(next_rand() & 0xff);
	if (n >= 8)
		memcpy(buf, &round, sizeof(round));
	return n;
}

/* Runs kvctl with the arguments (NULL-ended); its exit status. stdout and
 * stderr go to files in scratch; err (if not NULL) gets stderr's text. */
static int run_kvctl(char *err, size_t errcap, ...)
{
	const char *bin = getenv("KVCTL_BIN");
	char *argv[32];
	char *out = tu_path(scratch, "kvctl.out"), *errf = tu_path(scratch, "kvctl.err");
	va_list ap;
	int n = 0, status;
	pid_t pid;

	assert_non_null(bin);
	argv[n++] = (char *)bin;
	va_start(ap, errcap);
	while ((argv[n] = va_arg(ap, char *)) != NULL)
		n++;
	va_end(ap);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int fe = open(errf, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		dup2(fo, STDOUT_FILENO);
		dup2(fe, STDERR_FILENO);
		execv(bin, argv);
		_exit(127);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (err != NULL) {
		FILE *f = fopen(errf, "r");
		size_t r = f != NULL ? fread(err, 1, errcap - 1, f) : 0;

		err[r] = '\0';
		if (f != NULL)
			fclose(f);
	}
	free(out);
	free(errf);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void copy_file(const char *from, const char *to)
{
	FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
	char buf[1 << 16];
	size_t n;

	assert_non_null(in);
	assert_non_null(out);
	while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
		assert_int_equal(fwrite(buf, 1, n, out), n);
	fclose(in);
	assert_int_equal(fclose(out), 0);
}

static kvc *client(const char *url)
{
	struct kvc_options o;
	kvc *c;

	kvc_options_init(&o);
	o.endpoint = url;
	o.timeout_ms = 30000;
	assert_int_equal(kvc_open(&o, &c), 0);
	return c;
}

static void create_tenant(kvc *c, const char *name)
{
	struct kvc_tenant_opts o = {.sync = KVC_SYNC_NONE, .history = HISTORY};

	assert_int_equal(kvc_tenant_create(c, NULL, name, &o), 0);
}

/* Sends the ops in Batches of up to 1000; the newest version written. */
static uint64_t send_all(kvc *c, struct kvc_op *ops, size_t n)
{
	struct kvc_call call = {.tenant = "src"};
	uint64_t last = 0;

	for (size_t i = 0; i < n; i += 1000) {
		size_t m = n - i < 1000 ? n - i : 1000;

		assert_int_equal(kvc_batch(c, &call, ops + i, m, NULL), 0);
		for (size_t j = 0; j < m; j++)
			last = ops[i + j].version > last ? ops[i + j].version : last;
	}
	return last;
}

static void free_ops(char **keys, char **vals, size_t n)
{
	for (size_t j = 0; j < n; j++) {
		free(keys[j]);
		free(vals[j]);
		keys[j] = vals[j] = NULL;
	}
}

static void populate(void)
{
	size_t cap = 4 * (NKEYS + NEWKEYS), n = 0;
	struct kvc_op *ops = calloc(cap, sizeof(*ops));
	char **keys = calloc(cap, sizeof(char *)), **vals = calloc(cap, sizeof(char *));
	static char value[65536];
	char key[32];
	int i;

	assert_non_null(ops);
#define ADD(type_, i_, round_, ttl_)                                                               \
	do {                                                                                       \
		snprintf(key, sizeof(key), KEY_FMT, (i_));                                         \
		keys[n] = strdup(key);                                                             \
		ops[n].type = (type_);                                                             \
		ops[n].key = keys[n];                                                              \
		ops[n].key_len = strlen(key);                                                      \
		ops[n].if_version = KVC_ANY_VERSION;                                               \
		ops[n].ttl_ms = (ttl_);                                                            \
		if ((type_) == KVC_OP_PUT) {                                                       \
			ops[n].value_len = make_value(value, sizeof(value), (i_), (round_));       \
			vals[n] = malloc(ops[n].value_len + 1);                                    \
			memcpy(vals[n], value, ops[n].value_len);                                  \
			ops[n].value = vals[n];                                                    \
		}                                                                                  \
		n++;                                                                               \
	} while (0)
	for (i = 0; i < NKEYS; i++)
		ADD(KVC_OP_PUT, i, 1, KVC_TTL_NONE);
	v1 = send_all(ca, ops, n);
	free_ops(keys, vals, n);
	n = 0;
	for (i = 0; i < NKEYS; i++) {
		if (i % 3 == 0)
			ADD(KVC_OP_PUT, i, 2, KVC_TTL_NONE);
		if (i % 7 == 0) { /* a delete in the middle of the history */
			ADD(KVC_OP_DELETE, i, 3, 0);
			ADD(KVC_OP_PUT, i, 4, KVC_TTL_NONE);
		}
		if (i % 11 == 0)
			ADD(KVC_OP_PUT, i, 5, TTL_MS);
		if (i % 13 == 5) /* gone for good: not exported */
			ADD(KVC_OP_DELETE, i, 6, 0);
	}
	for (i = NKEYS; i < NKEYS + NEWKEYS; i++)
		ADD(KVC_OP_PUT, i, 7, i % 2 ? TTL_MS : KVC_TTL_NONE);
#undef ADD
	send_all(ca, ops, n);
	free_ops(keys, vals, n);
	free(keys);
	free(vals);
	free(ops);
}

/* The keys and values of a scan (as_of 0: now). */
struct snap {
	char **key;
	size_t *klen;
	char **val;
	size_t *vlen;
	size_t n;
};

static void snap_take(kvc *c, const char *tenant, uint64_t as_of, struct snap *s)
{
	struct kvc_call call = {.tenant = tenant};
	struct kvc_scan_opts o = {.as_of = as_of, .page_size = 5000};
	size_t cap = NKEYS + NEWKEYS + 16;
	struct kvc_item it;
	kvc_iter *iter;
	int rv;

	memset(s, 0, sizeof(*s));
	s->key = calloc(cap, sizeof(char *));
	s->val = calloc(cap, sizeof(char *));
	s->klen = calloc(cap, sizeof(size_t));
	s->vlen = calloc(cap, sizeof(size_t));
	assert_int_equal(kvc_scan_open(c, &call, &o, &iter), 0);
	while ((rv = kvc_scan_next(iter, &it)) == 0) {
		assert_true(s->n < cap);
		s->key[s->n] = malloc(it.key_len);
		memcpy(s->key[s->n], it.key, it.key_len);
		s->klen[s->n] = it.key_len;
		s->val[s->n] = malloc(it.value_len + 1);
		memcpy(s->val[s->n], it.value, it.value_len);
		s->vlen[s->n] = it.value_len;
		s->n++;
	}
	assert_int_equal(rv, 1);
	kvc_scan_close(iter);
}

static void snap_free(struct snap *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free(s->key[i]);
		free(s->val[i]);
	}
	free(s->key);
	free(s->val);
	free(s->klen);
	free(s->vlen);
}

static void assert_same_snap(const struct snap *a, const struct snap *b)
{
	assert_int_equal(a->n, b->n);
	for (size_t i = 0; i < a->n; i++) {
		assert_int_equal(a->klen[i], b->klen[i]);
		assert_memory_equal(a->key[i], b->key[i], a->klen[i]);
		assert_int_equal(a->vlen[i], b->vlen[i]);
		if (a->vlen[i] > 0)
			assert_memory_equal(a->val[i], b->val[i], a->vlen[i]);
	}
}

/* Every key of the source's snapshot has, in the target, the same values
 * and deletes in the same order (history), and the same expiry. */
static void assert_same_history(const char *src, const char *dst)
{
	struct kvc_call cs = {.tenant = src}, cd = {.tenant = dst};
	struct snap a, b;

	snap_take(ca, src, 0, &a);
	snap_take(cb, dst, 0, &b);
	assert_same_snap(&a, &b);
	for (size_t i = 0; i < a.n; i++) {
		struct kvc_version *va, *vb;
		struct kvc_value ga, gb;
		size_t na, nb;
		bool ta, tb;

		assert_int_equal(
		        kvc_versions(ca, &cs, a.key[i], a.klen[i], 1000, 0, true, &va, &na, &ta),
		        0);
		assert_int_equal(
		        kvc_versions(cb, &cd, a.key[i], a.klen[i], 1000, 0, true, &vb, &nb, &tb),
		        0);
		assert_true(na >= 1);
		assert_int_equal(na, nb);
		for (size_t j = 0; j < na; j++) {
			assert_int_equal(va[j].deleted, vb[j].deleted);
			assert_int_equal(va[j].len, vb[j].len);
			if (va[j].len > 0)
				assert_memory_equal(va[j].data, vb[j].data, va[j].len);
			/* the target gives versions of its own, in the same order */
			if (j > 0)
				assert_true(vb[j].version < vb[j - 1].version);
		}
		kvc_versions_free(va, na);
		kvc_versions_free(vb, nb);
		assert_int_equal(kvc_get(ca, &cs, a.key[i], a.klen[i], 0, 0, &ga), 0);
		assert_int_equal(kvc_get(cb, &cd, a.key[i], a.klen[i], 0, 0, &gb), 0);
		assert_int_equal(ga.expiry_ms == 0, gb.expiry_ms == 0);
		assert_true(ga.expiry_ms <= gb.expiry_ms + EXP_SLOP &&
		            gb.expiry_ms <= ga.expiry_ms + EXP_SLOP);
		kvc_value_free(&ga);
		kvc_value_free(&gb);
	}
	snap_free(&a);
	snap_free(&b);
}

static uint64_t tenant_keys(kvc *c, const char *tenant, uint64_t *ret_last)
{
	struct kvc_tenant_info ti;

	assert_int_equal(kvc_stats(c, &(struct kvc_call){.tenant = tenant}, &ti), 0);
	if (ret_last != NULL)
		*ret_last = ti.last_version;
	return ti.keys;
}

static int group_setup(void **state)
{
	struct kvd_opts o = {0};
	char err[2048];

	(void)state;
	scratch = tu_mkdtemp("export");
	if (kvd_start(&kvd_a, &o) != 0 || kvd_start(&kvd_b, &o) != 0)
		return -1;
	ca = client(kvd_a.surl);
	cb = client(kvd_b.surl);
	create_tenant(ca, "src");
	populate();
	export_hist = tu_path(scratch, "hist.jsonl");
	export_asof = tu_path(scratch, "asof.jsonl");
	char asof[32];
	snprintf(asof, sizeof(asof), "%llu", (unsigned long long)v1);
	if (run_kvctl(err, sizeof(err), "-e", kvd_a.surl, "-t", "src", "export", "--history",
	              "--file", export_hist, NULL) != 0 ||
	    run_kvctl(err, sizeof(err), "-e", kvd_a.surl, "-t", "src", "export", "--as-of", asof,
	              "--file", export_asof, NULL) != 0) {
		fprintf(stderr, "export failed: %s\n", err);
		return -1;
	}
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	kvc_close(ca);
	kvc_close(cb);
	if (kvd_a.pid > 0 && kvd_stop(&kvd_a) != 0)
		return -1;
	if (kvd_b.pid > 0 && kvd_stop(&kvd_b) != 0)
		return -1;
	kvd_cleanup(&kvd_a, false);
	kvd_cleanup(&kvd_b, false);
	tu_rmtree(scratch);
	free(scratch);
	free(export_hist);
	free(export_asof);
	return 0;
}

/* --history into B: the same keys, values, versions in order, expiries;
 * a second run writes nothing. */
static void test_history_round_trip(void **state)
{
	char err[2048];
	uint64_t last1, last2;

	(void)state;
	create_tenant(cb, "hist");
	assert_int_equal(run_kvctl(err, sizeof(err), "-e", kvd_b.surl, "-t", "hist", "import",
	                           "--file", export_hist, NULL),
	                 0);
	assert_same_history("src", "hist");
	tenant_keys(cb, "hist", &last1);
	assert_int_equal(run_kvctl(err, sizeof(err), "-e", kvd_b.surl, "-t", "hist", "import",
	                           "--file", export_hist, NULL),
	                 0);
	tenant_keys(cb, "hist", &last2);
	assert_int_equal(last1, last2); /* nothing written twice */
}

/* --as-of v1 without history: the scan of A as of v1, one version a key. */
static void test_as_of(void **state)
{
	struct snap a, b;
	char err[2048];

	(void)state;
	create_tenant(cb, "asof");
	assert_int_equal(run_kvctl(err, sizeof(err), "-e", kvd_b.surl, "-t", "asof", "import",
	                           "--file", export_asof, NULL),
	                 0);
	snap_take(ca, "src", v1, &a);
	snap_take(cb, "asof", 0, &b);
	assert_int_equal(a.n, NKEYS);
	assert_same_snap(&a, &b);
	for (size_t i = 0; i < b.n; i += 97) {
		struct kvc_version *vb;
		size_t nb;
		bool tb;

		assert_int_equal(kvc_versions(cb, &(struct kvc_call){.tenant = "asof"}, b.key[i],
		                              b.klen[i], 10, 0, false, &vb, &nb, &tb),
		                 0);
		assert_int_equal(nb, 1);
		kvc_versions_free(vb, nb);
	}
	snap_free(&a);
	snap_free(&b);
}

/* An import killed half way, run again, ends as one that was not. */
static void test_interrupted_import(void **state)
{
	const char *bin = getenv("KVCTL_BIN");
	uint64_t t0, keys = 0, total;
	int status;
	pid_t pid;

	(void)state;
	create_tenant(cb, "intr");
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int fd = open("/dev/null", O_WRONLY);

		dup2(fd, STDOUT_FILENO);
		execl(bin, bin, "-e", kvd_b.surl, "-t", "intr", "import", "--batch", "20", "--file",
		      export_hist, (char *)NULL);
		_exit(127);
	}
	/* killed once about a quarter of the keys are in */
	total = tenant_keys(ca, "src", NULL);
	t0 = h_now_ms();
	while ((keys = tenant_keys(cb, "intr", NULL)) < total / 4 && h_now_ms() - t0 < 30000 &&
	       waitpid(pid, &status, WNOHANG) == 0)
		poll(NULL, 0, 1);
	assert_int_equal(waitpid(pid, &status, WNOHANG), 0); /* still running */
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	keys = tenant_keys(cb, "intr", NULL);
	printf("import killed after %llu of %llu keys\n", (unsigned long long)keys,
	       (unsigned long long)total);
	assert_true(keys > 0 && keys < total);
	assert_int_equal(run_kvctl(NULL, 0, "-e", kvd_b.surl, "-t", "intr", "import", "--file",
	                           export_hist, NULL),
	                 0);
	assert_same_history("src", "intr");
}

/* A truncated or changed export is refused, and nothing is written. */
static void test_damaged_refused(void **state)
{
	char *bad = tu_path(scratch, "bad.jsonl");
	char err[2048];
	off_t size = tu_file_size(export_hist);

	(void)state;
	create_tenant(cb, "bad");
	copy_file(export_hist, bad);
	assert_int_equal(truncate(bad, size / 2), 0);
	assert_int_equal(run_kvctl(err, sizeof(err), "-e", kvd_b.surl, "-t", "bad", "import",
	                           "--file", bad, NULL),
	                 5);
	assert_non_null(strstr(err, "truncated"));
	/* cut at a line's end: no trailer either */
	copy_file(export_hist, bad);
	{
		FILE *f = fopen(bad, "r+");
		char line[256];
		long at = 0;

		assert_non_null(f);
		for (int i = 0; i < 100 && fgets(line, sizeof(line), f) != NULL; i++)
			at = ftell(f);
		fclose(f);
		assert_int_equal(truncate(bad, at), 0);
	}
	assert_int_equal(run_kvctl(err, sizeof(err), "-e", kvd_b.surl, "-t", "bad", "import",
	                           "--file", bad, NULL),
	                 5);
	assert_non_null(strstr(err, "truncated"));
	/* one byte of a value changed: the checksum says so */
	copy_file(export_hist, bad);
	{
		FILE *f = fopen(bad, "r+");
		char line[1024];
		long at;
		int c;

		assert_non_null(fgets(line, sizeof(line), f)); /* the header */
		at = ftell(f) + 10;                            /* in the first key's base64 */
		fseek(f, at, SEEK_SET);
		c = fgetc(f);
		fseek(f, at, SEEK_SET);
		fputc(c == 'A' ? 'B' : 'A', f);
		fclose(f);
	}
	assert_int_equal(run_kvctl(err, sizeof(err), "-e", kvd_b.surl, "-t", "bad", "import",
	                           "--file", bad, NULL),
	                 5);
	assert_non_null(strstr(err, "checksum mismatch"));
	assert_int_equal(tenant_keys(cb, "bad", NULL), 0);
	free(bad);
}

/* Keys with more records than one Batch (--batch 2), read from a pipe: one
 * key's first Batch already in the target (an import interrupted inside
 * the key) is resumed after it, not written twice. */
static void test_big_keys_from_a_pipe(void **state)
{
	static const char *const vals[] = {"v1", "v2", NULL, "v3", "v4"}; /* NULL: delete */
	struct kvc_call call = {.tenant = "big"}, dcall = {.tenant = "bigdst"};
	struct kvc_tenant_opts o = {.sync = KVC_SYNC_NONE, .history = 8};
	char *file = tu_path(scratch, "big.jsonl"), *cmd, key[16];
	uint64_t v;

	(void)state;
	assert_int_equal(kvc_tenant_create(ca, NULL, "big", &o), 0);
	assert_int_equal(kvc_tenant_create(cb, NULL, "bigdst", &o), 0);
	for (int i = 0; i < 10; i++) {
		snprintf(key, sizeof(key), "b%d", i);
		for (int j = 0; j < 5; j++) {
			if (vals[j] == NULL)
				assert_int_equal(kvc_delete(ca, &call, key, strlen(key),
				                            KVC_ANY_VERSION, &v),
				                 0);
			else
				assert_int_equal(kvc_put(ca, &call, key, strlen(key), vals[j], 2,
				                         &(struct kvc_write)KVC_WRITE_INIT, &v),
				                 0);
		}
	}
	assert_int_equal(run_kvctl(NULL, 0, "-e", kvd_a.surl, "-t", "big", "export", "--history",
	                           "--file", file, NULL),
	                 0);
	/* what the first Batch of b0 would have written */
	assert_int_equal(
	        kvc_put(cb, &dcall, "b0", 2, "v1", 2, &(struct kvc_write)KVC_WRITE_INIT, &v), 0);
	assert_int_equal(
	        kvc_put(cb, &dcall, "b0", 2, "v2", 2, &(struct kvc_write)KVC_WRITE_INIT, &v), 0);
	assert_true(asprintf(&cmd, "cat '%s' | '%s' -e '%s' -t bigdst import --batch 2 >/dev/null",
	                     file, getenv("KVCTL_BIN"), kvd_b.surl) > 0);
	assert_int_equal(system(cmd), 0);
	assert_same_history("big", "bigdst");
	free(cmd);
	free(file);
}

/* ---- blobs ------------------------------------------------------------------------ */

#define MIB       ((size_t)1 << 20)
#define NMANY     48 /* keys of "bmany": blobs of MANY_SIZE and values */
#define MANY_SIZE (320 * 1024)

/* Blob bytes from a seed, the same every time: byte i of blob seed. */
static void blob_bytes(uint64_t seed, uint64_t off, char *buf, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t x = (seed + 1) * 0x9e3779b97f4a7c15ULL ^
		             ((off + i) / 8 * 0xbf58476d1ce4e5b9ULL);

		x ^= x >> 31;
		x *= 0x94d049bb133111ebULL;
		x ^= x >> 29;
		buf[i] = (char)(x >> (8 * ((off + i) % 8)));
	}
}

/* Writes blob seed of size bytes at key in 300 KiB pieces; its version. */
static uint64_t put_blob(kvc *c, const char *tenant, const char *key, uint64_t seed, size_t size,
                         uint64_t ttl_ms)
{
	struct kvc_call call = {.tenant = tenant};
	struct kvc_blob_opts o = KVC_BLOB_OPTS_INIT;
	static char buf[300 * 1024];
	kvc_blob_writer *w;
	uint64_t v = 0;

	o.ttl_ms = ttl_ms;
	assert_int_equal(kvc_blob_writer_open(c, &call, key, strlen(key), &o, &w), 0);
	for (size_t off = 0; off < size; off += sizeof(buf)) {
		size_t n = size - off < sizeof(buf) ? size - off : sizeof(buf);

		blob_bytes(seed, off, buf, n);
		assert_int_equal(kvc_blob_write(w, buf, n), 0);
	}
	assert_int_equal(kvc_blob_commit(w, &v), 0);
	kvc_blob_writer_close(w);
	return v;
}

static void put_value(kvc *c, const char *tenant, const char *key, const char *v)
{
	assert_int_equal(kvc_put(c, &(struct kvc_call){.tenant = tenant}, key, strlen(key), v,
	                         strlen(v), &(struct kvc_write)KVC_WRITE_INIT, NULL),
	                 0);
}

static void del_key(kvc *c, const char *tenant, const char *key)
{
	assert_int_equal(kvc_delete(c, &(struct kvc_call){.tenant = tenant}, key, strlen(key),
	                            KVC_ANY_VERSION, NULL),
	                 0);
}

/* A's "bsrc": plain values, blobs of the sizes at the parts' edges, and
 * histories that mix blobs, values and deletes. */
static void populate_blobs(void)
{
	struct kvc_tenant_opts o = {.sync = KVC_SYNC_NONE, .history = 8};

	assert_int_equal(kvc_tenant_create(ca, NULL, "bsrc", &o), 0);
	put_value(ca, "bsrc", "a:plain1", "one");
	put_value(ca, "bsrc", "a:plain2", "");
	put_blob(ca, "bsrc", "b:empty", 1, 0, 0);
	put_blob(ca, "bsrc", "b:one", 2, 1, 0);
	put_blob(ca, "bsrc", "b:mib", 3, MIB, 0);
	put_blob(ca, "bsrc", "b:mib1", 4, MIB + 1, 0);
	put_blob(ca, "bsrc", "b:few", 5, 3 * MIB + 12345, 0);
	put_blob(ca, "bsrc", "b:ttl", 6, 1000, TTL_MS);
	/* value, blob, delete, value, blob: the newest a blob */
	put_value(ca, "bsrc", "m:mixed", "v1");
	put_blob(ca, "bsrc", "m:mixed", 7, MIB + MIB / 2, 0);
	del_key(ca, "bsrc", "m:mixed");
	put_value(ca, "bsrc", "m:mixed", "v2");
	put_blob(ca, "bsrc", "m:mixed", 8, 2 * MIB + 7, 0);
	/* blob, value, blob, value: the newest a value */
	put_blob(ca, "bsrc", "m:mixed2", 9, 10, 0);
	put_value(ca, "bsrc", "m:mixed2", "w1");
	put_blob(ca, "bsrc", "m:mixed2", 10, 0, 0);
	put_value(ca, "bsrc", "m:mixed2", "w2");
	/* a blob replaced by a value: without history, a value */
	put_blob(ca, "bsrc", "m:was-blob", 11, 5000, 0);
	put_value(ca, "bsrc", "m:was-blob", "now a value");
	put_value(ca, "bsrc", "z:last", "zz");
}

/* Blob version va of a's key and vb of b's: the same size, XXH64 and bytes
 * (read with BlobRead, 1 MiB at a time); the same expiry (within slop). */
static void assert_same_blob(kvc *a, const char *ta, kvc *b, const char *tb, const char *key,
                             size_t klen, uint64_t va, uint64_t vb)
{
	struct kvc_call cs = {.tenant = ta}, cd = {.tenant = tb};
	struct kvc_blob_info ia, ib;
	char *ba = malloc(MIB), *bb = malloc(MIB);
	size_t na, nb;

	assert_int_equal(kvc_blob_info(a, &cs, key, klen, va, &ia), 0);
	assert_int_equal(kvc_blob_info(b, &cd, key, klen, vb, &ib), 0);
	assert_int_equal(ia.size, ib.size);
	assert_int_equal(ia.xxh64, ib.xxh64);
	assert_int_equal(ia.expiry_ms == 0, ib.expiry_ms == 0);
	assert_true(ia.expiry_ms <= ib.expiry_ms + EXP_SLOP &&
	            ib.expiry_ms <= ia.expiry_ms + EXP_SLOP);
	for (uint64_t off = 0; off < ia.size; off += MIB) {
		assert_int_equal(kvc_blob_read(a, &cs, key, klen, va, off, ba, MIB, &na), 0);
		assert_int_equal(kvc_blob_read(b, &cd, key, klen, vb, off, bb, MIB, &nb), 0);
		assert_int_equal(na, nb);
		assert_true(na > 0);
		assert_memory_equal(ba, bb, na);
	}
	free(ba);
	free(bb);
}

/* Every key of a's tenant ta is in b's tb with the same history (all of
 * it, or with history false the newest version only, as one version):
 * values, blobs byte by byte, deletes, in order; tb has no other key. */
static void assert_same_blob_tenant(kvc *a, const char *ta, kvc *b, const char *tb, bool history)
{
	struct kvc_call cs = {.tenant = ta}, cd = {.tenant = tb};
	struct kvc_scan_opts so = {.keys_only = true};
	struct kvc_item it;
	kvc_iter *ia, *ib;
	int ra, rb;
	size_t keys = 0;

	assert_int_equal(kvc_scan_open(a, &cs, &so, &ia), 0);
	assert_int_equal(kvc_scan_open(b, &cd, &so, &ib), 0);
	while ((ra = kvc_scan_next(ia, &it)) == 0) {
		struct kvc_item jt;
		struct kvc_version *va, *vb;
		uint64_t *sa, *sb;
		size_t na, nb;
		bool ta_, tb_;

		assert_int_equal(kvc_scan_next(ib, &jt), 0);
		assert_int_equal(it.key_len, jt.key_len);
		assert_memory_equal(it.key, jt.key, it.key_len);
		assert_int_equal(kvc_versions_ex(a, &cs, it.key, it.key_len, 1000, 0, true, &va,
		                                 &na, &ta_, &sa),
		                 0);
		assert_int_equal(kvc_versions_ex(b, &cd, it.key, it.key_len, 1000, 0, true, &vb,
		                                 &nb, &tb_, &sb),
		                 0);
		assert_int_equal(nb, history ? na : 1);
		for (size_t j = 0; j < nb; j++) {
			assert_int_equal(va[j].deleted, vb[j].deleted);
			assert_int_equal(sa[j], sb[j]);
			if (sa[j] != KVC_NOT_BLOB) {
				assert_same_blob(a, ta, b, tb, it.key, it.key_len, va[j].version,
				                 vb[j].version);
			} else {
				assert_int_equal(va[j].len, vb[j].len);
				if (va[j].len > 0)
					assert_memory_equal(va[j].data, vb[j].data, va[j].len);
			}
			if (j > 0)
				assert_true(vb[j].version < vb[j - 1].version);
		}
		kvc_versions_free(va, na);
		kvc_versions_free(vb, nb);
		free(sa);
		free(sb);
		keys++;
	}
	assert_int_equal(ra, 1);
	rb = kvc_scan_next(ib, &it);
	assert_int_equal(rb, 1);
	assert_true(keys >= 10);
	kvc_scan_close(ia);
	kvc_scan_close(ib);
}

/* The first and last lines of file (the header, the trailer). */
static void head_and_tail(const char *file, char *head, size_t hcap, char *tail, size_t tcap)
{
	FILE *f = fopen(file, "r");
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	bool first = true;

	assert_non_null(f);
	while ((n = getline(&line, &cap, f)) > 0) {
		if (first)
			snprintf(head, hcap, "%s", line);
		else
			snprintf(tail, tcap, "%s", line);
		first = false;
	}
	free(line);
	fclose(f);
}

/* bsrc exported with and without --history, imported into B: the same
 * values and blobs, byte-exact, versions in order; the header says
 * format_version 2 and the trailer counts the blobs; a second run writes
 * nothing. */
static void test_blob_round_trip(void **state)
{
	char *fh = tu_path(scratch, "bhist.jsonl"), *fn = tu_path(scratch, "bnow.jsonl");
	char err[2048], head[512], tail[512];
	uint64_t last1, last2;

	(void)state;
	populate_blobs();
	assert_int_equal(run_kvctl(err, sizeof(err), "-e", kvd_a.surl, "-t", "bsrc", "export",
	                           "--history", "--file", fh, NULL),
	                 0);
	assert_int_equal(run_kvctl(err, sizeof(err), "-e", kvd_a.surl, "-t", "bsrc", "export",
	                           "--file", fn, NULL),
	                 0);
	head_and_tail(fh, head, sizeof(head), tail, sizeof(tail));
	assert_non_null(strstr(head, "\"format_version\":2"));
	/* blobs: 6 of b:, 2 of m:mixed, 2 of m:mixed2, 1 of m:was-blob */
	assert_non_null(strstr(tail, "\"blobs\":11"));
	head_and_tail(fn, head, sizeof(head), tail, sizeof(tail));
	/* the newest only: 6 of b:, 1 of m:mixed */
	assert_non_null(strstr(tail, "\"blobs\":7"));
	assert_non_null(
	        strstr(tail, "\"blob_bytes\":7353386")); /* 0+1+1M+1M+1+3M+12345+1000+2M+7 */

	create_tenant(cb, "bhist");
	assert_int_equal(run_kvctl(err, sizeof(err), "-e", kvd_b.surl, "-t", "bhist", "import",
	                           "--file", fh, NULL),
	                 0);
	assert_same_blob_tenant(ca, "bsrc", cb, "bhist", true);
	tenant_keys(cb, "bhist", &last1);
	assert_int_equal(run_kvctl(err, sizeof(err), "-e", kvd_b.surl, "-t", "bhist", "import",
	                           "--file", fh, NULL),
	                 0);
	tenant_keys(cb, "bhist", &last2);
	assert_int_equal(last1, last2); /* nothing written twice */

	create_tenant(cb, "bnow");
	assert_int_equal(run_kvctl(err, sizeof(err), "-e", kvd_b.surl, "-t", "bnow", "import",
	                           "--file", fn, NULL),
	                 0);
	assert_same_blob_tenant(ca, "bsrc", cb, "bnow", false);
	free(fh);
	free(fn);
}

/* An import that stopped inside m:mixed's history (after a blob, after a
 * delete, after a value that follows a blob: written here by hand, as the
 * interrupted run leaves them) resumes after what is in. */
static void test_blob_resumed_inside_a_key(void **state)
{
	char *fh = tu_path(scratch, "bhist.jsonl");
	const char *tenants[] = {"bres1", "bres2", "bres3"};

	(void)state;
	for (int i = 0; i < 3; i++) {
		create_tenant(cb, tenants[i]);
		put_value(cb, tenants[i], "m:mixed", "v1");
		put_blob(cb, tenants[i], "m:mixed", 7, MIB + MIB / 2, 0);
		if (i >= 1)
			del_key(cb, tenants[i], "m:mixed");
		if (i >= 2)
			put_value(cb, tenants[i], "m:mixed", "v2");
		/* and m:mixed2 after its first blob and value */
		put_blob(cb, tenants[i], "m:mixed2", 9, 10, 0);
		put_value(cb, tenants[i], "m:mixed2", "w1");
		assert_int_equal(run_kvctl(NULL, 0, "-e", kvd_b.surl, "-t", tenants[i], "import",
		                           "--file", fh, NULL),
		                 0);
		assert_same_blob_tenant(ca, "bsrc", cb, tenants[i], true);
	}
	free(fh);
}

/* An import killed while blobs stream, run again, ends as one that was
 * not: no version twice, no half blob. */
static void test_blob_interrupted_import(void **state)
{
	struct kvc_tenant_opts o = {.sync = KVC_SYNC_NONE, .history = 8};
	const char *bin = getenv("KVCTL_BIN");
	char *file = tu_path(scratch, "bmany.jsonl"), key[32];
	uint64_t t0, keys;
	int status;
	pid_t pid;

	(void)state;
	assert_int_equal(kvc_tenant_create(ca, NULL, "bmany", &o), 0);
	for (int i = 0; i < NMANY; i++) {
		snprintf(key, sizeof(key), "k%03d", i);
		put_value(ca, "bmany", key, "before");
		if (i % 3 != 2)
			put_blob(ca, "bmany", key, 100 + (uint64_t)i, MANY_SIZE + (size_t)i, 0);
		if (i % 4 == 1)
			put_value(ca, "bmany", key, "after");
	}
	assert_int_equal(run_kvctl(NULL, 0, "-e", kvd_a.surl, "-t", "bmany", "export", "--history",
	                           "--file", file, NULL),
	                 0);
	create_tenant(cb, "bmany");
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int fd = open("/dev/null", O_WRONLY);

		dup2(fd, STDOUT_FILENO);
		execl(bin, bin, "-e", kvd_b.surl, "-t", "bmany", "import", "--file", file,
		      (char *)NULL);
		_exit(127);
	}
	t0 = h_now_ms();
	while ((keys = tenant_keys(cb, "bmany", NULL)) < NMANY / 4 && h_now_ms() - t0 < 30000 &&
	       waitpid(pid, &status, WNOHANG) == 0)
		poll(NULL, 0, 1);
	assert_int_equal(waitpid(pid, &status, WNOHANG), 0); /* still running */
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	keys = tenant_keys(cb, "bmany", NULL);
	printf("blob import killed after %llu of %d keys\n", (unsigned long long)keys, NMANY);
	assert_true(keys > 0 && keys < NMANY);
	assert_int_equal(
	        run_kvctl(NULL, 0, "-e", kvd_b.surl, "-t", "bmany", "import", "--file", file, NULL),
	        0);
	assert_same_blob_tenant(ca, "bmany", cb, "bmany", true);
	free(file);
}

/* Rewrites file's trailer: its sha256 over the lines before it. */
static void rehash(const char *file)
{
	FILE *f = fopen(file, "r+");
	EVP_MD_CTX *sha = EVP_MD_CTX_new();
	unsigned char md[32];
	char *line = NULL, *prev = NULL, *p, hex[65];
	size_t cap = 0;
	ssize_t n;
	long at = 0, prev_at = 0;

	assert_non_null(f);
	assert_int_equal(EVP_DigestInit_ex(sha, EVP_sha256(), NULL), 1);
	while ((n = getline(&line, &cap, f)) > 0) {
		if (prev != NULL)
			EVP_DigestUpdate(sha, prev, strlen(prev));
		free(prev);
		prev = strdup(line);
		prev_at = at;
		at = ftell(f);
	}
	EVP_DigestFinal_ex(sha, md, NULL);
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	assert_non_null(p = strstr(prev, "\"sha256\":\""));
	memcpy(p + 10, hex, 64);
	fseek(f, prev_at, SEEK_SET);
	fputs(prev, f);
	assert_int_equal(fclose(f), 0);
	EVP_MD_CTX_free(sha);
	free(line);
	free(prev);
}

/* Copies from to to with the line that starts with prefix (its n-th, from
 * 0) changed by fn, or cut there when fn is NULL. */
static void copy_changed(const char *from, const char *to, const char *prefix, int nth,
                         void (*fn)(char *line))
{
	FILE *in = fopen(from, "r"), *out = fopen(to, "w");
	char *line = NULL;
	size_t cap = 0;
	int seen = 0;
	bool done = false;

	assert_non_null(in);
	assert_non_null(out);
	while (getline(&line, &cap, in) > 0) {
		if (!done && strncmp(line, prefix, strlen(prefix)) == 0 && seen++ == nth) {
			done = true;
			if (fn == NULL)
				break;
			fn(line);
		}
		fputs(line, out);
	}
	assert_true(done);
	free(line);
	fclose(in);
	assert_int_equal(fclose(out), 0);
}

/* One base64 digit in the middle of a part line changed: still base64. */
static void damage_part(char *line)
{
	char *c = line + strlen(line) / 2;

	*c = *c == 'A' ? 'B' : 'A';
}

/* A damaged part line (the trailer's sha256 made to match it) is refused
 * by its blob's XXH64; a file cut inside a blob, or with a part line
 * missing, is refused; nothing is written. */
static void test_blob_damaged_refused(void **state)
{
	char *fh = tu_path(scratch, "bhist.jsonl"), *bad = tu_path(scratch, "bbad.jsonl");
	char err[2048];

	(void)state;
	create_tenant(cb, "bbad");
	copy_changed(fh, bad, "{\"blob_part\":", 3, damage_part);
	rehash(bad);
	assert_int_equal(run_kvctl(err, sizeof(err), "-e", kvd_b.surl, "-t", "bbad", "import",
	                           "--file", bad, NULL),
	                 5);
	assert_non_null(strstr(err, "XXH64"));
	assert_non_null(strstr(err, "damaged"));
	/* cut after the first part of a blob of several */
	copy_changed(fh, bad, "{\"blob_part\":", 3, NULL);
	assert_int_equal(run_kvctl(err, sizeof(err), "-e", kvd_b.surl, "-t", "bbad", "import",
	                           "--file", bad, NULL),
	                 5);
	assert_non_null(strstr(err, "inside a blob"));
	/* a part line missing, the rest there */
	copy_changed(fh, bad, "{\"blob_part\":", 3, NULL);
	{
		FILE *in = fopen(fh, "r"), *out = fopen(bad, "w");
		char *line = NULL;
		size_t cap = 0;
		int parts = 0;

		while (getline(&line, &cap, in) > 0)
			if (strncmp(line, "{\"blob_part\":", 13) != 0 || parts++ != 3)
				fputs(line, out);
		free(line);
		fclose(in);
		assert_int_equal(fclose(out), 0);
	}
	rehash(bad);
	assert_int_equal(run_kvctl(err, sizeof(err), "-e", kvd_b.surl, "-t", "bbad", "import",
	                           "--file", bad, NULL),
	                 5);
	assert_true(strstr(err, "cut short") != NULL || strstr(err, "wants") != NULL);
	assert_int_equal(tenant_keys(cb, "bbad", NULL), 0);
	free(fh);
	free(bad);
}

/* A format_version 1 file (as kvctl wrote before blobs) still imports. */
static void test_format_version_1(void **state)
{
	char *file = tu_path(scratch, "v1.jsonl");
	FILE *f = fopen(file, "w");
	struct kvc_value v;

	(void)state;
	assert_non_null(f);
	/* "k1" = "hello", "k2" = "" */
	fputs("{\"format\":\"kvd-export\",\"format_version\":1,\"tenant\":\"old\",\"as_of\":9,"
	      "\"history\":false,\"created_ms\":1,\"created\":\"x\"}\n"
	      "{\"key\":\"azE=\",\"value\":\"aGVsbG8=\",\"version\":3,\"timestamp_ms\":1,"
	      "\"expiry_ms\":0}\n"
	      "{\"key\":\"azI=\",\"value\":\"\",\"version\":9,\"timestamp_ms\":1,\"expiry_ms\":0}\n"
	      "{\"end\":\"kvd-export\",\"keys\":2,\"records\":2,\"deletes\":0,\"value_bytes\":5,"
	      "\"sha256\":\"0000000000000000000000000000000000000000000000000000000000000000\"}\n",
	      f);
	assert_int_equal(fclose(f), 0);
	rehash(file);
	create_tenant(cb, "v1");
	assert_int_equal(
	        run_kvctl(NULL, 0, "-e", kvd_b.surl, "-t", "v1", "import", "--file", file, NULL),
	        0);
	assert_int_equal(kvc_get(cb, &(struct kvc_call){.tenant = "v1"}, "k1", 2, 0, 0, &v), 0);
	assert_int_equal(v.len, 5);
	assert_memory_equal(v.data, "hello", 5);
	kvc_value_free(&v);
	assert_int_equal(tenant_keys(cb, "v1", NULL), 2);
	free(file);
}

/* A file as another writer may write it (spaces, another member order),
 * whose key starts with a delete: imported into a target that has its
 * blob already (an interrupted run), only the value after it is written. */
static void test_blob_other_writer_resumed(void **state)
{
	char *file = tu_path(scratch, "other.jsonl");
	FILE *f = fopen(file, "w");
	struct kvc_call call = {.tenant = "bother"};
	struct kvc_version *t;
	uint64_t *sizes;
	size_t n;
	bool trunc;

	(void)state;
	assert_non_null(f);
	/* "d": deleted, then the blob "abc", then the value "x" */
	fprintf(f,
	        "{\"format\": \"kvd-export\", \"format_version\": 2, \"tenant\": \"o\", "
	        "\"as_of\": 9, \"history\": true}\n"
	        "{\"key\": \"ZA==\", \"value\": null, \"version\": 1, \"timestamp_ms\": 1, "
	        "\"expiry_ms\": 0}\n"
	        "{\"version\": 2, \"key\": \"ZA==\", \"timestamp_ms\": 1, \"expiry_ms\": 0, "
	        "\"blob\": {\"xxh64\": \"%016llx\", \"size\": 3}}\n"
	        "{ \"blob_part\" : \"YWJj\" }\n"
	        "{\"key\": \"ZA==\", \"value\": \"eA==\", \"version\": 3, \"timestamp_ms\": 1, "
	        "\"expiry_ms\": 0}\n"
	        "{\"end\": \"kvd-export\", \"keys\": 1, \"records\": 3, \"deletes\": 1, "
	        "\"blobs\": 1, \"blob_bytes\": 3, \"sha256\":"
	        "\"0000000000000000000000000000000000000000000000000000000000000000\"}\n",
	        (unsigned long long)XXH64("abc", 3, 0));
	assert_int_equal(fclose(f), 0);
	rehash(file);
	create_tenant(cb, "bother");
	{
		struct kvc_blob_writer *w;

		assert_int_equal(kvc_blob_writer_open(cb, &call, "d", 1, NULL, &w), 0);
		assert_int_equal(kvc_blob_write(w, "abc", 3), 0);
		assert_int_equal(kvc_blob_commit(w, NULL), 0);
		kvc_blob_writer_close(w);
	}
	assert_int_equal(run_kvctl(NULL, 0, "-e", kvd_b.surl, "-t", "bother", "import", "--file",
	                           file, NULL),
	                 0);
	assert_int_equal(kvc_versions_ex(cb, &call, "d", 1, 100, 0, true, &t, &n, &trunc, &sizes),
	                 0);
	assert_int_equal(n, 2); /* "x", then the blob: not written twice */
	assert_int_equal(sizes[0], KVC_NOT_BLOB);
	assert_int_equal(t[0].len, 1);
	assert_memory_equal(t[0].data, "x", 1);
	assert_int_equal(sizes[1], 3);
	kvc_versions_free(t, n);
	free(sizes);
	free(file);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_history_round_trip),
	        cmocka_unit_test(test_as_of),
	        cmocka_unit_test(test_interrupted_import),
	        cmocka_unit_test(test_damaged_refused),
	        cmocka_unit_test(test_big_keys_from_a_pipe),
	        cmocka_unit_test(test_blob_round_trip),
	        cmocka_unit_test(test_blob_resumed_inside_a_key),
	        cmocka_unit_test(test_blob_interrupted_import),
	        cmocka_unit_test(test_blob_damaged_refused),
	        cmocka_unit_test(test_format_version_1),
	        cmocka_unit_test(test_blob_other_writer_resumed),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
