/* test_corruption.c — bytes flipped at random in the sealed segments and hint files of a real kvd's
 * data: kvd --check lists every one (exit 1), a read returns the exact value or DATA_LOSS and never
 * other bytes, every other key is served, kvd logs what it found. */
/*
 * A kvd writes a tenant of N keys (values of random sizes, derived from the
 * key) into small segments, and stops. `kvd --check` must find nothing
 * (exit 0). Then, round after round, on a fresh copy of the data: one byte
 * of a random sealed segment (record bytes or its header) or hint file is
 * flipped, and
 *   - `kvd --check` must exit 1 and name the damaged file;
 *   - the tenant opened with the engine must give, for every key, its exact
 *     value or KV_ECORRUPT (DATA_LOSS), nothing else; a flip in a record
 *     must cost exactly that record's key, a flip in a hint file none;
 *   - every ROUNDS_WITH_KVD-th round, a kvd started on the copy must answer
 *     the same over libkvclient (DATA_LOSS over the wire) and log the
 *     damage it found at activation.
 * The figures (flips, detected, keys lost, wrong reads) are printed. Rounds:
 * 120, or $KVTEST_CORRUPTION_ROUNDS; the seed is fixed, or taken from
 * $KVTEST_SEED when set, and printed.
 */
#include "harness.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/stat.h>

#include <cmocka.h> /* after the headers it needs */

#include "kvclient.h"
#include "kvengine.h"

#include "flips.h"

#define ROUNDS_DEFAULT  120
#define ROUNDS_WITH_KVD 20

/* Runs `kvd --check dir`; its exit status, its output in out. */
static int run_check(const char *dir, char *out, size_t cap)
{
	const char *bin = getenv("KVD_BIN");
	char cmd[8192];
	FILE *p;
	size_t n;
	int status;

	snprintf(cmd, sizeof(cmd), "'%s' --check '%s' 2>&1", bin ? bin : "./build/daemon/kvd", dir);
	if ((p = popen(cmd, "r")) == NULL)
		return -1;
	n = fread(out, 1, cap - 1, p);
	out[n] = '\0';
	status = pclose(p);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

struct files {
	char seg[64][64];
	char hint[64][64];
	int nseg, nhint;
};

/* Every key through the engine: exact value, or KV_ECORRUPT. Returns the
 * count of the latter; fails on anything else. */
static int read_all_engine(const char *tdir)
{
	struct kv_options o;
	kv_db *db;
	uint8_t want[VALUE_MAX];
	int lost = 0;

	kv_options_init(&o);
	o.background = false;
	o.history_versions = 1;
	assert_int_equal(kv_open(tdir, &o, &db), 0);
	for (int i = 0; i < N_KEYS; i++) {
		char key[32];
		struct kv_value v;
		size_t len = value_of(i, want);
		int rv;

		key_of(i, key, sizeof(key));
		rv = kv_get(db, key, strlen(key), NULL, &v);
		if (rv == KV_ECORRUPT) {
			lost++;
			continue;
		}
		if (rv != 0)
			fail_msg("%s: %s", key, kv_strerror(rv));
		if (v.len != len || (len > 0 && memcmp(v.data, want, len) != 0))
			fail_msg("%s: %zu bytes that are not its value (%zu bytes)", key, v.len,
			         len);
		kv_value_release(&v);
	}
	assert_int_equal(kv_close(db), 0);
	return lost;
}

/* Starts a kvd on dir (its log holding this run's lines only) and opens a
 * client of the tenant. */
static kvc *start_on(const char *dir, struct kvd_proc *k)
{
	struct kvd_opts o = {.reuse_dir = dir};
	struct kvc_options co;
	char *log = tu_path(dir, "kvd.log");
	kvc *c;

	unlink(log);
	free(log);
	assert_int_equal(kvd_start(k, &o), 0);
	kvc_options_init(&co);
	co.endpoint = k->surl;
	co.tenant = TENANT;
	assert_int_equal(kvc_open(&co, &c), 0);
	return c;
}

/* The same through a kvd started on data: DATA_LOSS over the wire for the
 * same number of keys, and the log says it found damage. */
static void read_all_kvd(const char *dir, int lost_engine, bool in_record)
{
	struct kvd_proc k;
	kvc *c = start_on(dir, &k);
	int lost = read_all_wire(c);

	kvc_close(c);
	assert_int_equal(lost, lost_engine);
	assert_int_equal(kvd_stop(&k), 0);
	{
		FILE *f = fopen(k.log, "r");
		char line[1024];
		bool activation = false, read = false;
		assert_non_null(f);
		while (fgets(line, sizeof(line), f)) {
			activation |= strstr(line, "damaged region") != NULL ||
			              strstr(line, "hint file(s) unusable") != NULL;
			read |= strstr(line, "read a damaged record (DATA_LOSS)") != NULL;
		}
		fclose(f);
		/* a damaged hint or segment header is found at activation; a
		 * damaged record (its hint still points at it) when it is read */
		assert_int_equal(activation, !in_record);
		assert_int_equal(read, lost > 0);
	}
	kvd_cleanup(&k, true);
}

/* The tenant, written by a real kvd that then stops (sealing its segments
 * and writing their hints): tdir gets its directory, fl its sealed
 * segments (the ones with a hint). Returns the last version acknowledged. */
static uint64_t write_tenant(struct kvd_proc *k, char *tdir, size_t cap, struct files *fl)
{
	struct kvd_opts o = {.config_text = "segment_size = 64K\n"
	                                    "[tenant-defaults]\nsync = none\n"};
	struct kvc_options co;
	struct kvc_tenant_opts to = {0};
	uint8_t val[VALUE_MAX];
	uint64_t last = 0;
	char out[16384];
	kvc *c;

	assert_int_equal(kvd_start(k, &o), 0);
	kvc_options_init(&co);
	co.endpoint = k->surl;
	co.tenant = TENANT;
	assert_int_equal(kvc_open(&co, &c), 0);
	to.sync = KVC_SYNC_NONE;
	to.history = 1;
	assert_int_equal(kvc_tenant_create(c, NULL, TENANT, &to), 0);
	for (int i = 0; i < N_KEYS; i++) {
		char key[32];
		size_t len = value_of(i, val);
		key_of(i, key, sizeof(key));
		assert_int_equal(kvc_put(c, NULL, key, strlen(key), val, len, NULL, &last), 0);
	}
	kvc_close(c);
	assert_int_equal(kvd_stop(k), 0);
	snprintf(tdir, cap, "%s/tenants/%s", k->data, TENANT);
	assert_int_equal(run_check(k->data, out, sizeof(out)), 0);
	assert_non_null(strstr(out, "no damage"));
	fl->nhint = tu_list_ext(tdir, ".hint", fl->hint, 64);
	fl->nseg = 0;
	for (int i = 0; i < fl->nhint; i++) {
		snprintf(fl->seg[fl->nseg], 64, "%.*s.seg", (int)(strlen(fl->hint[i]) - 5),
		         fl->hint[i]);
		fl->nseg++;
	}
	assert_true(fl->nseg >= 3);
	assert_int_equal(read_all_engine(tdir), 0);
	return last;
}

/* A fresh copy of k's data directory at sdata (the tenant's at stdir). */
static void fresh_copy(const struct kvd_proc *k, const char *tdir, const char *sdata,
                       const char *stdir)
{
	char *tenants, *def, *sdef;

	tu_rmtree(sdata);
	mkdir(sdata, 0755);
	tenants = tu_path(sdata, "tenants");
	mkdir(tenants, 0755);
	free(tenants);
	tu_copydir(k->data, sdata);
	tu_copydir(tdir, stdir);
	def = tu_path(k->data, "tenants/default");
	sdef = tu_path(sdata, "tenants/default");
	tu_copydir(def, sdef);
	free(def);
	free(sdef);
}

static void test_random_flips(void **state)
{
	struct kvd_proc k;
	struct files fl;
	char *scratch = tu_mkdtemp("flips"), out[16384], tdir[4096], sdata[4096], stdir[4200];
	const char *env = getenv("KVTEST_CORRUPTION_ROUNDS");
	int rounds = env != NULL ? atoi(env) : ROUNDS_DEFAULT;
	uint64_t seed = tu_seed("test_random_flips", 1);
	int seg_flips = 0, hdr_flips = 0, hint_flips = 0, detected = 0, keys_lost = 0;
	int kvd_rounds = 0;

	(void)state;
	if (rounds <= 0)
		fail_msg("KVTEST_CORRUPTION_ROUNDS=%s: want a positive number", env);
	rng ^= seed * 0x2545f4914f6cdd1dull;
	print_message("%d rounds (KVTEST_CORRUPTION_ROUNDS)\n", rounds);
	write_tenant(&k, tdir, sizeof(tdir), &fl);

	snprintf(sdata, sizeof(sdata), "%s/data", scratch);
	snprintf(stdir, sizeof(stdir), "%s/tenants/%s", sdata, TENANT);
	for (int r = 0; r < rounds; r++) {
		bool hint = next_rand() % 10 < 3, in_record;
		const char *name = hint ? fl.hint[next_rand() % (uint64_t)fl.nhint]
		                        : fl.seg[next_rand() % (uint64_t)fl.nseg];
		char *path;
		off_t size, off;
		int st, lost;

		fresh_copy(&k, tdir, sdata, stdir);
		path = tu_path(stdir, "%s", name);
		size = tu_file_size(path);
		assert_true(size > 64);
		off = (off_t)(next_rand() % (uint64_t)size);
		tu_flip_byte(path, off);
		free(path);
		in_record = !hint && off >= 64;
		if (hint)
			hint_flips++;
		else if (in_record)
			seg_flips++;
		else
			hdr_flips++;

		/* damage of a segment is damage (exit 1); of a hint, a note about a
		 * cache the next open rebuilds (exit 0): either names the file */
		st = run_check(sdata, out, sizeof(out));
		if (st != (hint ? 0 : 1) || strstr(out, name) == NULL)
			fail_msg("round %d: %s byte %lld flipped: kvd --check exit %d, said:\n%s",
			         r, name, (long long)off, st, out);
		detected++;

		/* the engine on a copy of the damaged files (opening rebuilds a
		 * rejected hint: kvd below must see them as they were) */
		{
			char *ecopy = tu_path(scratch, "engine-copy");
			tu_rmtree(ecopy);
			tu_copydir(stdir, ecopy);
			lost = read_all_engine(ecopy);
			free(ecopy);
		}
		/* one flipped byte of a record costs that record's key alone; of a
		 * hint file or a segment header, nothing (the segment is scanned) */
		if (lost != (in_record ? 1 : 0))
			fail_msg("round %d: %s byte %lld flipped: %d keys lost", r, name,
			         (long long)off, lost);
		keys_lost += lost;
		if (r % ROUNDS_WITH_KVD == 0) {
			print_message("round %d: %s byte %lld flipped, through kvd\n", r, name,
			              (long long)off);
			/* kvd would take the key-directory image of the last close
			 * and never read the damaged hint: without it, it must say */
			if (hint) {
				path = tu_path(stdir, "KEYDIR");
				assert_int_equal(unlink(path), 0);
				free(path);
			}
			read_all_kvd(scratch, lost, in_record);
			kvd_rounds++;
		}
	}
	print_message("%d bytes flipped (%d in records, %d in segment headers, %d in hint files): "
	              "%d found by kvd --check, %d keys read as DATA_LOSS, 0 wrong reads; %d "
	              "rounds also through kvd\n",
	              rounds, seg_flips, hdr_flips, hint_flips, detected, keys_lost, kvd_rounds);
	tu_rmtree(scratch);
	free(scratch);
	kvd_cleanup(&k, false);
}

/* A sealed segment deleted, cut in half, or replaced by a directory, in a
 * copy of the data: kvd --check names it (exit 1); a kvd started on the copy
 * logs the loss, answers every key its hint names DATA_LOSS and every other
 * key with its exact value, and a new write gets a version above every one
 * acknowledged before. */
static void test_lost_segment(void **state)
{
	static const char *how[] = {"deleted", "cut in half", "a directory"};
	struct kvd_proc k;
	struct files fl;
	char *scratch = tu_mkdtemp("lost"), out[16384], tdir[4096], sdata[4096], stdir[4200];
	uint64_t last;

	(void)state;
	last = write_tenant(&k, tdir, sizeof(tdir), &fl);
	snprintf(sdata, sizeof(sdata), "%s/data", scratch);
	snprintf(stdir, sizeof(stdir), "%s/tenants/%s", sdata, TENANT);
	for (int w = 0; w < 3; w++) {
		/* the newest sealed segment for a cut (once taken for a torn
		 * write), a middle one otherwise */
		const char *name = fl.seg[w == 1 ? fl.nseg - 1 : fl.nseg / 2];
		char *path = tu_path(stdir, "%s", name);
		struct kvd_proc kk;
		uint64_t ver = 0;
		int lost, status;
		kvc *c;

		fresh_copy(&k, tdir, sdata, stdir);
		if (w == 0) {
			assert_int_equal(unlink(path), 0);
		} else if (w == 1) {
			assert_int_equal(truncate(path, tu_file_size(path) / 2), 0);
		} else {
			assert_int_equal(unlink(path), 0);
			assert_int_equal(mkdir(path, 0755), 0);
		}
		status = run_check(sdata, out, sizeof(out));
		if (status != 1 || strstr(out, name) == NULL)
			fail_msg("%s %s: kvd --check exit %d, said:\n%s", name, how[w], status,
			         out);

		c = start_on(scratch, &kk);
		lost = read_all_wire(c);
		if (lost == 0)
			fail_msg("%s %s: no key reads DATA_LOSS", name, how[w]);
		assert_int_equal(kvc_put(c, NULL, "after", 5, "x", 1, NULL, &ver), 0);
		if (ver <= last)
			fail_msg("%s %s: version %llu handed out again (%llu was acknowledged)",
			         name, how[w], (unsigned long long)ver, (unsigned long long)last);
		kvc_close(c);
		assert_int_equal(kvd_stop(&kk), 0);
		assert_true(h_log_has(&kk, "data lost"));
		assert_true(h_log_has(&kk, name));
		print_message("%s %s: kvd --check exit 1, %d keys DATA_LOSS, next version %llu > "
		              "%llu\n",
		              name, how[w], lost, (unsigned long long)ver,
		              (unsigned long long)last);
		kvd_cleanup(&kk, true); /* the scratch directory is reused */
		free(path);
	}
	tu_rmtree(scratch);
	free(scratch);
	kvd_cleanup(&k, false);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_random_flips),
	        cmocka_unit_test(test_lost_segment),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
