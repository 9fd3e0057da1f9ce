/* test_manifest.c — sealed segments that are deleted, cut short or unreadable are reported by name,
 * their keys read DATA_LOSS where a hint names them, and versions never go back, whatever files are
 * lost. */
#include "testutil.h"

#include "io.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/wait.h>
/* clang-format off: cmocka.h needs the three above first */
#include <cmocka.h>

#define NKEYS 400

static void opts(struct kv_options *o)
{
	kv_options_init(o);
	o->background = false;
	o->segment_size = 4096;
	o->history_versions = 1000000; /* merge keeps every version: all stay checkable */
}

static void key_of(int i, char *k, size_t n)
{
	snprintf(k, n, "seg-key-%05d", i);
}

static void value_of(int i, char *v, size_t n)
{
	snprintf(v, n, "value-%05d-%040d", i, i);
}

/* NKEYS keys, one version each (versions 1..NKEYS), in many sealed segments. */
static void fill(const char *dir)
{
	struct kv_options o;
	kv_db *db;
	char k[32], v[64];

	opts(&o);
	assert_int_equal(kv_open(dir, &o, &db), 0);
	for (int i = 0; i < NKEYS; i++) {
		key_of(i, k, sizeof(k));
		value_of(i, v, sizeof(v));
		assert_int_equal(kv_put(db, k, strlen(k), v, strlen(v), NULL, NULL), 0);
	}
	assert_int_equal(kv_close(db), 0);
}

struct tally {
	int ok, lost, missing;
};

/* Reads every key: exactly its value, DATA_LOSS, or not found. */
static struct tally read_all(kv_db *db)
{
	struct tally t = {0};
	char k[32], v[64];

	for (int i = 0; i < NKEYS; i++) {
		struct kv_value val;
		int rv;
		key_of(i, k, sizeof(k));
		value_of(i, v, sizeof(v));
		rv = kv_get(db, k, strlen(k), NULL, &val);
		if (rv == 0) {
			assert_int_equal(val.len, strlen(v));
			assert_memory_equal(val.data, v, val.len);
			kv_value_release(&val);
			t.ok++;
		} else if (rv == KV_ECORRUPT) {
			t.lost++;
		} else {
			assert_int_equal(rv, KV_ENOTFOUND);
			t.missing++;
		}
	}
	return t;
}

/* Number of records a segment's hint names (the keys it holds). */
static int hint_entries(const char *dir, const char *seg)
{
	char *p = tu_path(dir, "%.8s.hint", seg);
	uint8_t hdr[32];
	int fd = open(p, O_RDONLY), n;

	free(p);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, hdr, sizeof(hdr), 0), (ssize_t)sizeof(hdr));
	close(fd);
	n = (int)(hdr[16] | hdr[17] << 8 | hdr[18] << 16);
	return n;
}

struct found {
	int damage, notes;
	char first[64];
	char what[256];
};

static void on_item(void *arg, const struct kv_check_item *it)
{
	struct found *f = arg;

	if (!it->damage) {
		f->notes++;
		return;
	}
	if (f->damage++ == 0) {
		snprintf(f->first, sizeof(f->first), "%s", it->file);
		snprintf(f->what, sizeof(f->what), "%s", it->what);
	}
}

static struct found check(const char *dir)
{
	struct found f = {0};
	struct kv_check_summary sum;

	assert_int_equal(kv_check(dir, on_item, &f, &sum), 0);
	assert_int_equal(sum.damaged, (uint32_t)f.damage);
	return f;
}

/* A put's version: never one handed out before. */
static uint64_t put_one(kv_db *db)
{
	uint64_t ver = 0;

	assert_int_equal(kv_put(db, "after", 5, "x", 1, NULL, &ver), 0);
	return ver;
}

static void test_sealed_segment_deleted(void **state)
{
	char *dir = tu_mkdtemp("lost"), names[256][64], *p;
	struct kv_options o;
	struct kv_recovery_info ri;
	struct tally t;
	struct found f;
	kv_db *db;
	int nseg, held;

	(void)state;
	fill(dir);
	assert_int_equal(check(dir).damage, 0);
	nseg = tu_list_ext(dir, ".seg", names, 256);
	assert_true(nseg > 6);
	held = hint_entries(dir, names[nseg / 2]);
	assert_true(held > 0);
	p = tu_path(dir, "%s", names[nseg / 2]);
	assert_int_equal(unlink(p), 0);
	free(p);

	f = check(dir);
	assert_int_equal(f.damage, 1);
	assert_string_equal(f.first, names[nseg / 2]);
	assert_non_null(strstr(f.what, "missing"));

	opts(&o);
	assert_int_equal(kv_open(dir, &o, &db), 0);
	assert_int_equal(kv_recovery_info(db, &ri), 0);
	assert_int_equal(ri.lost_segments, 1);
	assert_true(ri.lost_bytes > 0);
	assert_string_equal(ri.damaged_file, names[nseg / 2]);
	t = read_all(db);
	/* every key it held reads DATA_LOSS: none is gone in silence */
	assert_int_equal(t.lost, held);
	assert_int_equal(t.missing, 0);
	assert_int_equal(t.ok, NKEYS - held);
	assert_true(put_one(db) > NKEYS);
	assert_int_equal(kv_close(db), 0);

	/* still known, and still reported, at the next open */
	assert_int_equal(kv_open(dir, &o, &db), 0);
	assert_int_equal(kv_recovery_info(db, &ri), 0);
	assert_int_equal(ri.lost_segments, 1);
	assert_int_equal(read_all(db).lost, held);
	/* merge would walk chains into it and erase the evidence */
	assert_int_equal(kv_merge(db), KV_ECORRUPT);
	assert_int_equal(kv_close(db), 0);
	assert_int_equal(check(dir).damage, 1);
	tu_rmtree(dir);
	free(dir);
}

/* The newest sealed segment and its hint both deleted: its keys are gone
 * without a trace of which they were, but the loss is reported and the
 * versions it held are never handed out again. */
static void test_newest_segment_and_hint_deleted(void **state)
{
	char *dir = tu_mkdtemp("lostnew"), names[256][64], *p;
	struct kv_options o;
	struct kv_recovery_info ri;
	struct tally t;
	kv_db *db;
	int nseg;

	(void)state;
	fill(dir);
	nseg = tu_list_ext(dir, ".hint", names, 256);
	assert_true(nseg > 6);
	p = tu_path(dir, "%s", names[nseg - 1]);
	assert_int_equal(unlink(p), 0);
	free(p);
	p = tu_path(dir, "%.8s.seg", names[nseg - 1]);
	assert_int_equal(unlink(p), 0);
	free(p);

	assert_int_equal(check(dir).damage, 1);
	opts(&o);
	assert_int_equal(kv_open(dir, &o, &db), 0);
	assert_int_equal(kv_recovery_info(db, &ri), 0);
	assert_int_equal(ri.lost_segments, 1);
	assert_true(ri.versions_raised);
	t = read_all(db);
	assert_true(t.missing > 0);
	assert_int_equal(t.ok + t.missing, NKEYS);
	/* versions up to NKEYS were acknowledged: none is given out again */
	assert_true(put_one(db) > NKEYS);
	assert_int_equal(kv_close(db), 0);
	tu_rmtree(dir);
	free(dir);
}

/* Sealed segments cut short — in the middle, the newest one, and to zero
 * bytes: their hints still say what was there, so every key after the cut
 * reads DATA_LOSS; the newest is not taken for a torn write. */
static void test_sealed_segment_cut(void **state)
{
	const char *which[] = {"middle", "newest", "zero"};

	(void)state;
	for (int w = 0; w < 3; w++) {
		char *dir = tu_mkdtemp("cut"), names[256][64], *p;
		struct kv_options o;
		struct kv_recovery_info ri;
		struct tally t;
		struct found f;
		kv_db *db;
		off_t size, cut;
		int nh, victim;

		fill(dir);
		nh = tu_list_ext(dir, ".hint", names, 256);
		assert_true(nh > 6);
		victim = w == 1 ? nh - 1 : nh / 2;
		p = tu_path(dir, "%.8s.seg", names[victim]);
		size = tu_file_size(p);
		cut = w == 2 ? 0 : size / 2;
		assert_int_equal(truncate(p, cut), 0);

		f = check(dir);
		if (f.damage < 1)
			fail_msg("%s segment cut: kvd --check found no damage", which[w]);
		opts(&o);
		assert_int_equal(kv_open(dir, &o, &db), 0);
		assert_int_equal(kv_recovery_info(db, &ri), 0);
		assert_int_equal(ri.truncated_bytes, 0);
		assert_true(ri.lost_bytes >= (uint64_t)(size - cut) - 64);
		assert_true(ri.damaged_file[0] != '\0');
		t = read_all(db);
		if (t.missing != 0 || t.lost == 0)
			fail_msg("%s segment cut: %d ok, %d DATA_LOSS, %d not found", which[w],
			         t.ok, t.lost, t.missing);
		assert_true(put_one(db) > NKEYS);
		assert_int_equal(kv_close(db), 0);
		/* the evidence stays: the file is not removed as a crash leftover */
		assert_int_equal(access(p, F_OK), 0);
		free(p);
		tu_rmtree(dir);
		free(dir);
	}
}

/* A segment or hint replaced by a directory: the tenant still opens; an
 * unreadable hint only means a scan, an unreadable segment is lost. */
static void test_segment_or_hint_is_a_directory(void **state)
{
	char *dir = tu_mkdtemp("isdir"), names[256][64], *p;
	struct kv_options o;
	struct kv_recovery_info ri;
	struct tally t;
	struct found f;
	kv_db *db;
	int nh, held;

	(void)state;
	fill(dir);
	nh = tu_list_ext(dir, ".hint", names, 256);
	assert_true(nh > 6);
	/* a hint */
	p = tu_path(dir, "%s", names[1]);
	assert_int_equal(unlink(p), 0);
	assert_int_equal(mkdir(p, 0755), 0);
	free(p);
	f = check(dir);
	assert_int_equal(f.damage, 0);
	assert_true(f.notes >= 1);
	/* the key-directory image would be taken instead of the hints */
	p = tu_path(dir, "KEYDIR");
	assert_int_equal(unlink(p), 0);
	free(p);
	opts(&o);
	assert_int_equal(kv_open(dir, &o, &db), 0);
	assert_int_equal(kv_recovery_info(db, &ri), 0);
	assert_int_equal(ri.segments_scanned, 1);
	assert_int_equal(ri.lost_segments, 0);
	assert_int_equal(read_all(db).ok, NKEYS);
	assert_int_equal(kv_close(db), 0);
	p = tu_path(dir, "%s", names[1]);
	tu_rmtree(p);
	free(p);

	/* a segment */
	held = hint_entries(dir, names[3]);
	p = tu_path(dir, "%.8s.seg", names[3]);
	assert_int_equal(unlink(p), 0);
	assert_int_equal(mkdir(p, 0755), 0);
	free(p);
	f = check(dir);
	assert_int_equal(f.damage, 1);
	assert_int_equal(strncmp(f.first, names[3], 8), 0);
	assert_non_null(strstr(f.what, "cannot be read"));
	assert_int_equal(kv_open(dir, &o, &db), 0);
	assert_int_equal(kv_recovery_info(db, &ri), 0);
	assert_int_equal(ri.lost_segments, 1);
	assert_int_equal(strncmp(ri.damaged_file, names[3], 8), 0);
	t = read_all(db);
	assert_int_equal(t.lost, held);
	assert_int_equal(t.ok, NKEYS - held);
	assert_int_equal(kv_close(db), 0);
	tu_rmtree(dir);
	free(dir);
}

static void write_more(kv_db *db, void *arg)
{
	uint64_t *last = arg, ver = 0;

	for (int i = 0; i < 20; i++)
		if (kv_put(db, "more", 4, "v", 1, NULL, &ver) != 0)
			_exit(11);
	/* what the parent learns: the last version acknowledged */
	if (write(3, &ver, sizeof(ver)) != (ssize_t)sizeof(ver))
		_exit(12);
	(void)last;
}

/* The active segment of a process that crashed is deleted: what was
 * acknowledged in it is lost, and reported, and its versions are not
 * handed out again. */
static void test_active_segment_deleted(void **state)
{
	char *dir = tu_mkdtemp("lostactive"), names[256][64], *p;
	struct kv_options o;
	struct kv_recovery_info ri;
	uint64_t last = 0;
	int pfd[2], status, n;
	kv_db *db;
	pid_t pid;

	(void)state;
	fill(dir);
	opts(&o);
	o.segment_size = 1 << 20;
	assert_int_equal(pipe(pfd), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (dup2(pfd[1], 3) != 3 || kv_open(dir, &o, &db) != 0)
			_exit(10);
		write_more(db, NULL);
		_exit(0); /* a crash: nothing closed */
	}
	close(pfd[1]);
	assert_int_equal(read(pfd[0], &last, sizeof(last)), (ssize_t)sizeof(last));
	close(pfd[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_true(last > NKEYS);

	/* the newest segment is the active one (no hint) */
	n = tu_list_ext(dir, ".seg", names, 256);
	p = tu_path(dir, "%.8s.hint", names[n - 1]);
	assert_int_equal(access(p, F_OK), -1);
	free(p);
	p = tu_path(dir, "%s", names[n - 1]);
	assert_int_equal(unlink(p), 0);
	free(p);

	assert_int_equal(check(dir).damage, 1);
	assert_int_equal(kv_open(dir, &o, &db), 0);
	assert_int_equal(kv_recovery_info(db, &ri), 0);
	assert_int_equal(ri.lost_segments, 1);
	assert_true(ri.versions_raised);
	assert_true(put_one(db) > last);
	assert_int_equal(kv_close(db), 0);
	tu_rmtree(dir);
	free(dir);
}

/* Nothing lost: no damage reported, no version skipped. */
static void test_clean_reopen(void **state)
{
	char *dir = tu_mkdtemp("clean");
	struct kv_options o;
	struct kv_recovery_info ri;
	kv_db *db;

	(void)state;
	fill(dir);
	opts(&o);
	assert_int_equal(kv_open(dir, &o, &db), 0);
	assert_int_equal(kv_recovery_info(db, &ri), 0);
	assert_int_equal(ri.lost_segments, 0);
	assert_int_equal(ri.lost_bytes, 0);
	assert_false(ri.versions_raised);
	assert_string_equal(ri.damaged_file, "");
	assert_int_equal(put_one(db), NKEYS + 1);
	assert_int_equal(kv_close(db), 0);
	assert_int_equal(check(dir).damage, 0);
	tu_rmtree(dir);
	free(dir);
}

/* Dies (as a crash would) when the merge is about to write its commit. */
static int die_at_commit(void *arg, const struct kv_io_event *ev)
{
	int *armed = arg;

	if (*armed && ev->name != NULL && strncmp(ev->name, "merge-", 6) == 0)
		_exit(0);
	return 0;
}

static void overwrite(kv_db *db, int from, int to, int round)
{
	char k[32], v[64];

	for (int i = from; i < to; i++) {
		key_of(i, k, sizeof(k));
		snprintf(v, sizeof(v), "round-%d-%05d-%030d", round, i, i);
		if (kv_put(db, k, strlen(k), v, strlen(v), NULL, NULL) != 0)
			_exit(11);
	}
}

/* A merge killed just before its commit, again and again, each time after
 * more writes: recovery removes the outputs of each (they are copies), so
 * the files do not pile up, and nothing acknowledged is lost. */
static void test_uncommitted_merge_outputs_removed(void **state)
{
	char *dir = tu_mkdtemp("mergeleft"), names[512][64];
	struct kv_options o;
	struct kv_recovery_info ri;
	struct kv_stats st;
	uint64_t before = 0;
	int first = 0;
	kv_db *db;

	(void)state;
	fill(dir);
	for (int round = 1; round <= 4; round++) {
		int armed = 0, status;
		struct kv_io_fault f = {.on_dirop = die_at_commit, .arg = &armed};
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			opts(&o);
			o.fault = &f;
			if (kv_open(dir, &o, &db) != 0)
				_exit(10);
			overwrite(db, 0, NKEYS / 2, round);
			armed = 1;
			kv_merge(db);
			_exit(12); /* the merge got past its commit */
		}
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
		opts(&o);
		assert_int_equal(kv_open(dir, &o, &db), 0);
		assert_int_equal(kv_recovery_info(db, &ri), 0);
		assert_true(ri.merge_leftovers > 0);
		/* the round added its own writes (half the keys), not also a copy
		 * of the live data */
		assert_int_equal(kv_stats(db, &st), 0);
		if (before != 0 && st.disk_bytes - before >= st.live_bytes)
			fail_msg("round %d: the log grew by %llu bytes, live data is %llu", round,
			         (unsigned long long)(st.disk_bytes - before),
			         (unsigned long long)st.live_bytes);
		before = st.disk_bytes;
		assert_int_equal(ri.lost_segments, 0);
		assert_int_equal(ri.corrupt_records, 0);
		for (int i = 0; i < NKEYS; i++) {
			char k[32], v[64];
			struct kv_value val;
			key_of(i, k, sizeof(k));
			if (i < NKEYS / 2)
				snprintf(v, sizeof(v), "round-%d-%05d-%030d", round, i, i);
			else
				value_of(i, v, sizeof(v));
			assert_int_equal(kv_get(db, k, strlen(k), NULL, &val), 0);
			assert_int_equal(val.len, strlen(v));
			assert_memory_equal(val.data, v, val.len);
			kv_value_release(&val);
		}
		assert_int_equal(kv_close(db), 0);
		assert_int_equal(check(dir).damage, 0);
		first = tu_list_ext(dir, ".seg", names, 512);
	}
	/* and a merge that completes still takes it all down to the live data */
	opts(&o);
	assert_int_equal(kv_open(dir, &o, &db), 0);
	assert_int_equal(kv_merge(db), 0);
	assert_int_equal(kv_close(db), 0);
	assert_true(tu_list_ext(dir, ".seg", names, 512) < first);
	tu_rmtree(dir);
	free(dir);
}

/* Pass 1 of tagged values for every key ("pass-1-i"), acked[i] = 1. */
static void overwrite_tagged(const char *dir, uint32_t *acked)
{
	struct kv_options o;
	kv_db *db;
	char k[32], v[64];

	opts(&o);
	o.history_versions = 1000000;
	assert_int_equal(kv_open(dir, &o, &db), 0);
	for (int i = 0; i < NKEYS; i++) {
		key_of(i, k, sizeof(k));
		snprintf(v, sizeof(v), "pass-1-%05d", i);
		assert_int_equal(kv_put(db, k, strlen(k), v, strlen(v), NULL, NULL), 0);
		acked[i] = 1;
	}
	assert_int_equal(kv_close(db), 0);
}

struct merger {
	kv_db *db;
};

static void *merge_main(void *arg)
{
	struct merger *mg = arg;

	kv_merge(mg->db);
	_exit(12); /* the merge got past its commit */
	return NULL;
}

/* Writes go on while a merge runs and is killed just before its commit, so
 * records written meanwhile point at the merge's copies: recovery retires
 * the copies with relocations to the originals. Every key's whole history
 * still reads back, values exact, and the copies are gone. */
static void test_merge_outputs_under_writes_removed(void **state)
{
	char *dir = tu_mkdtemp("mergewrites");
	struct kv_options o;
	struct kv_recovery_info ri;
	uint32_t *acked = mmap(NULL, NKEYS * sizeof(*acked), PROT_READ | PROT_WRITE,
	                       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int armed = 0, status;
	struct kv_io_fault f = {.on_dirop = die_at_commit, .arg = &armed};
	uint64_t relocated = 0;
	kv_db *db;
	pid_t pid;

	(void)state;
	assert_true(acked != MAP_FAILED);
	fill(dir);
	overwrite_tagged(dir, acked);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct merger mg;
		pthread_t th;
		char k[32], v[64];
		opts(&o);
		o.fault = &f;
		if (kv_open(dir, &o, &db) != 0)
			_exit(10);
		mg.db = db;
		armed = 1;
		if (pthread_create(&th, NULL, merge_main, &mg) != 0)
			_exit(13);
		for (uint32_t n = 2;; n++) {
			for (int i = 0; i < NKEYS; i++) {
				key_of(i, k, sizeof(k));
				snprintf(v, sizeof(v), "pass-%u-%05d", n, i);
				if (kv_put(db, k, strlen(k), v, strlen(v), NULL, NULL) != 0)
					_exit(11);
				__atomic_store_n(&acked[i], n, __ATOMIC_SEQ_CST);
			}
		}
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);

	opts(&o);
	assert_int_equal(kv_open(dir, &o, &db), 0);
	assert_int_equal(kv_recovery_info(db, &ri), 0);
	assert_true(ri.merge_leftovers > 0);
	assert_int_equal(ri.lost_segments, 0);
	for (int i = 0; i < NKEYS; i++) {
		char k[32], v[64];
		struct kv_value val;
		struct kv_version *list;
		size_t n;
		unsigned got;
		key_of(i, k, sizeof(k));
		assert_int_equal(kv_get(db, k, strlen(k), NULL, &val), 0);
		/* the last acknowledged pass, or the one being written at the kill */
		assert_true(val.len < sizeof(v));
		memcpy(v, val.data, val.len);
		v[val.len] = '\0';
		kv_value_release(&val);
		assert_int_equal(sscanf(v, "pass-%u-", &got), 1);
		assert_true(got == acked[i] || got == acked[i] + 1);
		/* every version, through the copies' relocations to the originals */
		assert_int_equal(kv_versions(db, k, strlen(k), 0, 0, true, &list, &n, NULL), 0);
		assert_true(n >= acked[i] + 1); /* fill's value and a version per pass */
		for (size_t j = 1; j < n; j++)
			assert_true(list[j].version < list[j - 1].version);
		relocated += n;
		kv_versions_free(list, n);
	}
	assert_int_equal(kv_close(db), 0);
	assert_int_equal(check(dir).damage, 0);
	print_message("%u merge outputs removed, %llu versions read back\n", ri.merge_leftovers,
	              (unsigned long long)relocated);
	munmap(acked, NKEYS * sizeof(*acked));
	tu_rmtree(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_sealed_segment_deleted),
	        cmocka_unit_test(test_newest_segment_and_hint_deleted),
	        cmocka_unit_test(test_sealed_segment_cut),
	        cmocka_unit_test(test_segment_or_hint_is_a_directory),
	        cmocka_unit_test(test_active_segment_deleted),
	        cmocka_unit_test(test_clean_reopen),
	        cmocka_unit_test(test_uncommitted_merge_outputs_removed),
	        cmocka_unit_test(test_merge_outputs_under_writes_removed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
