/* test_io.c — the I/O backends: io_uring blocked by seccomp falls back to pread/pwrite, mapped
 * reads agree with pread and survive a file losing its pages, failed fsync makes the database
 * read-only, a failed write leaves nothing behind, interval sync and its failure, a failed seal
 * sync, no read of a write before its sync, sync=none at seal and close, a read error as data loss,
 * the files storage backend's contract (storage.h) with the fault layer under it. */
#include "testutil.h"

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <cmocka.h>

#include "fault.h"
#include "io.h"
#include "storage.h"

static struct tu_clock clk = {1700000000000ull};

/* Makes io_uring_setup fail with ENOSYS in this process, as a container's
 * seccomp profile does. */
static int block_io_uring(void)
{
	struct sock_filter filter[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {.len = sizeof(filter) / sizeof(filter[0]), .filter = filter};

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return -1;
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

static int exercise(kv_db *db)
{
	struct kv_value v;
	char k[16];

	for (int i = 0; i < 100; i++) {
		snprintf(k, sizeof(k), "k%d", i);
		if (kv_put(db, k, strlen(k), k, strlen(k), NULL, NULL) != 0)
			return 1;
	}
	if (kv_get(db, "k42", 3, NULL, &v) != 0 || v.len != 3 || memcmp(v.data, "k42", 3))
		return 2;
	kv_value_release(&v);
	return 0;
}

static void test_seccomp_fallback(void **state)
{
	char *dir = tu_mkdtemp("seccomp");
	pid_t pid;
	int status;

	(void)state;
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct kv_options o;
		struct kv_stats st;
		kv_db *db;
		if (block_io_uring() != 0)
			_exit(20);
		tu_options(&o, &clk);
		/* required io_uring: a clear error */
		o.io = KV_IO_URING;
		if (kv_open(dir, &o, &db) != -ENOSYS)
			_exit(21);
		/* auto: falls back to pread/pwrite and works */
		o.io = KV_IO_AUTO;
		if (kv_open(dir, &o, &db) != 0)
			_exit(22);
		if (kv_stats(db, &st) != 0 || st.io_uring)
			_exit(23);
		if (exercise(db) != 0)
			_exit(24);
		if (kv_close(db) != 0)
			_exit(25);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	tu_rmtree(dir);
	free(dir);
}

static void test_backends_agree(void **state)
{
	enum kv_io modes[] = {KV_IO_URING, KV_IO_PSYNC};

	(void)state;
	for (int m = 0; m < 2; m++) {
		char *dir = tu_mkdtemp("backend");
		struct kv_options o;
		struct kv_stats st;
		kv_db *db;
		tu_options(&o, &clk);
		o.io = modes[m];
		assert_int_equal(kv_open(dir, &o, &db), 0);
		assert_int_equal(kv_stats(db, &st), 0);
		assert_int_equal(st.io_uring, modes[m] == KV_IO_URING);
		assert_int_equal(exercise(db), 0);
		assert_int_equal(kv_close(db), 0);
		/* either backend reads what the other wrote */
		o.io = modes[1 - m];
		assert_int_equal(kv_open(dir, &o, &db), 0);
		{
			struct kv_value v;
			assert_int_equal(kv_get(db, "k99", 3, NULL, &v), 0);
			kv_value_release(&v);
		}
		assert_int_equal(kv_close(db), 0);
		tu_rmtree(dir);
		free(dir);
	}
}

/* Records read through the segments' mappings and through pread are the
 * same bytes; and when a mapped file loses its pages (truncated behind the
 * database's back, as a failing disk would make them unreadable) a read of
 * them is KV_ECORRUPT, not a SIGBUS that kills the process. */
static void test_mapped_reads(void **state)
{
	enum { N = 60, VLEN = 2000 };
	char *dir = tu_mkdtemp("mapped");
	struct kv_options o;
	kv_db *db;
	char key[16], val[VLEN], path[4200];
	int damaged = 0;

	(void)state;
	tu_options(&o, &clk);
	o.segment_size = 65536; /* records past the first page: SIGBUS once truncated */
	assert_int_equal(kv_open(dir, &o, &db), 0);
	for (int i = 0; i < N; i++) {
		snprintf(key, sizeof(key), "k%02d", i);
		memset(val, 'a' + i % 26, VLEN);
		assert_int_equal(kv_put(db, key, strlen(key), val, VLEN, NULL, NULL), 0);
	}
	for (int pass = 0; pass < 2; pass++) {
		/* pass 0 through the mappings; pass 1 with mapped reads off */
		if (pass == 1) {
			assert_int_equal(kv_close(db), 0);
			o.mmap_reads = false;
			assert_int_equal(kv_open(dir, &o, &db), 0);
		}
		for (int i = 0; i < N; i++) {
			struct kv_value v;
			snprintf(key, sizeof(key), "k%02d", i);
			memset(val, 'a' + i % 26, VLEN);
			assert_int_equal(kv_get(db, key, strlen(key), NULL, &v), 0);
			assert_int_equal(v.len, VLEN);
			assert_memory_equal(v.data, val, VLEN);
			kv_value_release(&v);
		}
	}
	assert_int_equal(kv_close(db), 0);
	o.mmap_reads = true;
	assert_int_equal(kv_open(dir, &o, &db), 0);
	for (int i = 0; i < N; i++) { /* every segment mapped */
		struct kv_value v;
		snprintf(key, sizeof(key), "k%02d", i);
		assert_int_equal(kv_get(db, key, strlen(key), NULL, &v), 0);
		kv_value_release(&v);
	}
	snprintf(path, sizeof(path), "%s/00000001.seg", dir);
	assert_int_equal(truncate(path, 64), 0);
	for (int i = 0; i < N; i++) {
		struct kv_value v;
		int rv;
		snprintf(key, sizeof(key), "k%02d", i);
		rv = kv_get(db, key, strlen(key), NULL, &v);
		if (rv == 0)
			kv_value_release(&v);
		else
			assert_int_equal(rv, KV_ECORRUPT);
		damaged += rv != 0;
	}
	/* the first segment's records are gone, the others are read */
	assert_true(damaged > 0 && damaged < N);
	assert_int_equal(kv_close(db), 0);
	tu_rmtree(dir);
	free(dir);
}

static void test_fsync_failure_read_only(void **state)
{
	enum kv_io modes[] = {KV_IO_URING, KV_IO_PSYNC};

	(void)state;
	for (int m = 0; m < 2; m++) {
		char *dir = tu_mkdtemp("fsyncfail");
		struct tf_fault fl;
		struct kv_options o;
		struct kv_value v;
		struct kv_stats st;
		kv_db *db;

		tu_options(&o, &clk);
		o.io = modes[m];
		tf_fault_init(&fl);
		o.fault = &fl.hooks;
		assert_int_equal(kv_open(dir, &o, &db), 0);
		assert_int_equal(kv_put(db, "safe", 4, "1", 1, NULL, NULL), 0);
		fl.fail_sync = 1;
		/* the batch whose fdatasync failed is not acknowledged */
		assert_int_equal(kv_put(db, "lost", 4, "2", 1, NULL, NULL), -EIO);
		assert_int_equal(kv_get(db, "lost", 4, NULL, &v), KV_ENOTFOUND);
		/* and the database refuses writes from then on, reads go on */
		assert_int_equal(kv_put(db, "later", 5, "3", 1, NULL, NULL), KV_EREADONLY);
		assert_int_equal(kv_stats(db, &st), 0);
		assert_true(st.read_only);
		assert_int_equal(kv_get(db, "safe", 4, NULL, &v), 0);
		kv_value_release(&v);
		assert_string_equal(kv_strerror(KV_EREADONLY),
		                    "database is read-only after an I/O error");
		assert_int_equal(kv_close(db), 0); /* closing a read-only database is no error */
		/* an operator reopens: what was acknowledged is there, nothing else */
		o.fault = NULL;
		assert_int_equal(kv_open(dir, &o, &db), 0);
		assert_int_equal(kv_get(db, "safe", 4, NULL, &v), 0);
		kv_value_release(&v);
		assert_int_equal(kv_get(db, "lost", 4, NULL, &v), KV_ENOTFOUND);
		assert_int_equal(kv_put(db, "later", 5, "3", 1, NULL, NULL), 0);
		assert_int_equal(kv_close(db), 0);
		tu_rmtree(dir);
		free(dir);
	}
}

static void test_write_failure_recovers(void **state)
{
	enum kv_io modes[] = {KV_IO_URING, KV_IO_PSYNC};

	(void)state;
	for (int m = 0; m < 2; m++) {
		char *dir = tu_mkdtemp("enospc");
		struct tf_fault fl;
		struct kv_options o;
		struct kv_value v;
		struct kv_stats st;
		struct kv_recovery_info ri;
		uint64_t v1 = 0, v2 = 0;
		kv_db *db;

		tu_options(&o, &clk);
		o.io = modes[m];
		tf_fault_init(&fl);
		o.fault = &fl.hooks;
		assert_int_equal(kv_open(dir, &o, &db), 0);
		assert_int_equal(kv_put(db, "a", 1, "1", 1, NULL, &v1), 0);
		fl.fail_write = 1;
		fl.write_err = -ENOSPC;
		assert_int_equal(kv_put(db, "b", 1, "2", 1, NULL, NULL), -ENOSPC);
		assert_int_equal(kv_stats(db, &st), 0);
		assert_false(st.read_only);
		/* the next write gets the version the failed one gave back */
		assert_int_equal(kv_put(db, "c", 1, "3", 1, NULL, &v2), 0);
		assert_int_equal(v2, v1 + 1);
		assert_int_equal(kv_get(db, "b", 1, NULL, &v), KV_ENOTFOUND);
		assert_int_equal(kv_close(db), 0);
		o.fault = NULL;
		assert_int_equal(kv_open(dir, &o, &db), 0);
		assert_int_equal(kv_recovery_info(db, &ri), 0);
		assert_int_equal(ri.corrupt_records, 0);
		assert_int_equal(kv_get(db, "c", 1, NULL, &v), 0);
		assert_int_equal(v.version, v2);
		kv_value_release(&v);
		assert_int_equal(kv_get(db, "b", 1, NULL, &v), KV_ENOTFOUND);
		assert_int_equal(kv_close(db), 0);
		tu_rmtree(dir);
		free(dir);
	}
}

static void test_interval_sync(void **state)
{
	char *dir = tu_mkdtemp("interval");
	struct kv_options o;
	struct kv_stats st;
	kv_db *db;

	(void)state;
	tu_options(&o, &clk);
	o.sync = KV_SYNC_INTERVAL;
	o.sync_interval_ms = 100;
	assert_int_equal(kv_open(dir, &o, &db), 0);
	for (int i = 0; i < 50; i++)
		assert_int_equal(kv_put(db, "k", 1, "v", 1, NULL, NULL), 0);
	assert_int_equal(kv_stats(db, &st), 0);
	assert_int_equal(st.syncs, 0); /* acknowledged without waiting for the disk */
	assert_int_equal(kv_tick(db), 0);
	assert_int_equal(kv_stats(db, &st), 0);
	assert_int_equal(st.syncs, 0); /* the interval has not passed */
	clk.ms += 100;
	assert_int_equal(kv_tick(db), 0);
	assert_int_equal(kv_stats(db, &st), 0);
	assert_int_equal(st.syncs, 1);
	clk.ms += 100;
	assert_int_equal(kv_tick(db), 0);
	assert_int_equal(kv_stats(db, &st), 0);
	assert_int_equal(st.syncs, 1); /* nothing new to sync */
	assert_int_equal(kv_put(db, "k", 1, "v", 1, NULL, NULL), 0);
	assert_int_equal(kv_sync(db), 0);
	assert_int_equal(kv_stats(db, &st), 0);
	assert_int_equal(st.syncs, 2);
	assert_int_equal(kv_close(db), 0);
	tu_rmtree(dir);
	free(dir);
}

/* A failed interval fdatasync (kv_tick) is not retried: kv_tick reports it
 * and the database turns read-only, as after a failed sync on the write
 * path; reads go on. */
static void test_interval_sync_failure(void **state)
{
	char *dir = tu_mkdtemp("intervalfail");
	struct tf_fault fl;
	struct kv_options o;
	struct kv_stats st;
	struct kv_value v;
	kv_db *db;

	(void)state;
	tu_options(&o, &clk);
	o.sync = KV_SYNC_INTERVAL;
	o.sync_interval_ms = 100;
	tf_fault_init(&fl);
	o.fault = &fl.hooks;
	assert_int_equal(kv_open(dir, &o, &db), 0);
	assert_int_equal(kv_put(db, "k", 1, "v", 1, NULL, NULL), 0);
	fl.fail_sync = 1;
	clk.ms += 100;
	assert_int_equal(kv_tick(db), -EIO);
	assert_int_equal(fl.fail_sync, 0); /* the tick did try to sync */
	assert_int_equal(kv_stats(db, &st), 0);
	assert_true(st.read_only);
	assert_int_equal(st.syncs, 0);
	assert_int_equal(kv_put(db, "k2", 2, "v", 1, NULL, NULL), KV_EREADONLY);
	assert_int_equal(kv_get(db, "k", 1, NULL, &v), 0);
	assert_int_equal(v.len, 1);
	assert_memory_equal(v.data, "v", 1);
	kv_value_release(&v);
	assert_int_equal(kv_close(db), 0);
	tu_rmtree(dir);
	free(dir);
}

/* Under sync=none the log is synced when a segment is sealed; when that
 * sync fails the write that sealed it fails and the database turns
 * read-only. */
static void test_seal_sync_failure(void **state)
{
	char *dir = tu_mkdtemp("sealfail");
	struct tf_fault fl;
	struct kv_options o;
	struct kv_stats st;
	struct kv_value v;
	char k[16], val[200];
	kv_db *db;
	int rv = 0, i;

	(void)state;
	tu_options(&o, &clk);
	o.sync = KV_SYNC_NONE;
	o.segment_size = 4096;
	tf_fault_init(&fl);
	o.fault = &fl.hooks;
	assert_int_equal(kv_open(dir, &o, &db), 0);
	memset(val, 'v', sizeof(val));
	fl.fail_sync = 1; /* under sync=none the first sync is the seal's */
	for (i = 0; i < 100 && rv == 0; i++) {
		snprintf(k, sizeof(k), "k%03d", i);
		rv = kv_put(db, k, strlen(k), val, sizeof(val), NULL, NULL);
	}
	assert_int_equal(rv, -EIO);
	assert_true(i > 1 && i < 100);
	assert_int_equal(kv_stats(db, &st), 0);
	assert_true(st.read_only);
	assert_int_equal(kv_put(db, "later", 5, "v", 1, NULL, NULL), KV_EREADONLY);
	assert_int_equal(kv_get(db, "k000", 4, NULL, &v), 0);
	assert_int_equal(v.len, sizeof(val));
	kv_value_release(&v);
	assert_int_equal(kv_close(db), 0);
	tu_rmtree(dir);
	free(dir);
}

/* A sync held open by the test: on_sync waits, once armed, until released. */
struct gate {
	atomic_int armed, entered, released;
};

static int gate_sync(void *arg, int fd)
{
	struct gate *g = arg;
	(void)fd;
	if (atomic_exchange(&g->armed, 0)) {
		atomic_store(&g->entered, 1);
		while (!atomic_load(&g->released)) {
			struct timespec ts = {0, 1000000};
			nanosleep(&ts, NULL);
		}
	}
	return 0;
}

struct gated_put {
	kv_db *db;
	int rv;
};

static void *gated_put_run(void *arg)
{
	struct gated_put *p = arg;
	p->rv = kv_put(p->db, "seen", 4, "v", 1, NULL, NULL);
	return NULL;
}

/* Under sync=always no reader sees a write before its batch is durable:
 * while the batch's fdatasync is held, a Get, a scan and the stats of the
 * database still show the state before it (both I/O backends). */
static void test_not_visible_before_sync(void **state)
{
	enum kv_io modes[] = {KV_IO_URING, KV_IO_PSYNC};

	(void)state;
	for (int m = 0; m < 2; m++) {
		char *dir = tu_mkdtemp("visible");
		struct gate g = {0};
		struct tf_fault f;
		struct gated_put p = {0};
		struct kv_options o;
		struct kv_value v;
		struct kv_stats st;
		kv_iter *it;
		struct kv_scan_opts so = {0};
		struct kv_entry e;
		pthread_t th;
		int n = 0;

		tu_options(&o, &clk);
		o.io = modes[m];
		tf_fault_init(&f);
		f.on_sync = gate_sync;
		f.arg = &g;
		o.fault = &f.hooks;
		assert_int_equal(kv_open(dir, &o, &p.db), 0);
		assert_int_equal(kv_put(p.db, "old", 3, "v", 1, NULL, NULL), 0);
		atomic_store(&g.armed, 1);
		assert_int_equal(pthread_create(&th, NULL, gated_put_run, &p), 0);
		while (!atomic_load(&g.entered)) {
			struct timespec ts = {0, 1000000};
			nanosleep(&ts, NULL);
		}
		/* the record is written, its fdatasync not done */
		assert_int_equal(kv_get(p.db, "seen", 4, NULL, &v), KV_ENOTFOUND);
		assert_int_equal(kv_iter_open(p.db, &so, &it), 0);
		while (kv_iter_next(it, &e) == 0)
			n++;
		kv_iter_close(it);
		assert_int_equal(n, 1);
		assert_int_equal(kv_stats(p.db, &st), 0);
		assert_int_equal(st.keys, 1);
		atomic_store(&g.released, 1);
		assert_int_equal(pthread_join(th, NULL), 0);
		assert_int_equal(p.rv, 0);
		assert_int_equal(kv_get(p.db, "seen", 4, NULL, &v), 0);
		kv_value_release(&v);
		assert_int_equal(kv_close(p.db), 0);
		tu_rmtree(dir);
		free(dir);
	}
}

/* fdatasyncs seen through the record hook, by file (inode). */
struct synclog {
	ino_t ino[4096];
	size_t n;
};

static void record_syncs(void *arg, const struct kv_io_event *ev)
{
	struct synclog *y = arg;
	struct stat st;

	if (ev->type == KV_IO_EV_SYNC && y->n < 4096 && fstat(ev->fd, &st) == 0 &&
	    S_ISREG(st.st_mode))
		y->ino[y->n++] = st.st_ino;
}

static size_t synced(const struct synclog *y, const char *path)
{
	struct stat st;
	size_t n = 0;

	assert_int_equal(stat(path, &st), 0);
	for (size_t i = 0; i < y->n; i++)
		n += y->ino[i] == st.st_ino;
	return n;
}

/* Under sync=none the log is synced at the moments DURABILITY.md lists: when
 * a segment is sealed because it is full (the full one, before the next
 * takes writes), and when the database is closed (passivation and SIGTERM
 * close it), the segment being written; and not after each write. */
static void test_sync_none_at_seal_and_close(void **state)
{
	char *dir = tu_mkdtemp("nonesync");
	static struct synclog y;
	struct tf_fault f;
	struct kv_options o;
	struct kv_stats st;
	char k[16], val[200], names[64][64], *first, *last;
	kv_db *db;
	int nseg;

	(void)state;
	tu_options(&o, &clk);
	o.sync = KV_SYNC_NONE;
	o.segment_size = 4096;
	tf_fault_init(&f);
	f.record = record_syncs;
	f.arg = &y;
	o.fault = &f.hooks;
	assert_int_equal(kv_open(dir, &o, &db), 0);
	memset(val, 'v', sizeof(val));
	y.n = 0;
	for (int i = 0; i < 5; i++) {
		snprintf(k, sizeof(k), "k%03d", i);
		assert_int_equal(kv_put(db, k, strlen(k), val, sizeof(val), NULL, NULL), 0);
	}
	assert_int_equal(kv_stats(db, &st), 0);
	assert_int_equal(st.syncs, 0);
	assert_int_equal(st.segments, 1);
	first = tu_path(dir, "00000001.seg");
	assert_int_equal(synced(&y, first), 0); /* not after each write */
	for (int i = 5; i < 40; i++) {
		snprintf(k, sizeof(k), "k%03d", i);
		assert_int_equal(kv_put(db, k, strlen(k), val, sizeof(val), NULL, NULL), 0);
	}
	assert_int_equal(kv_stats(db, &st), 0);
	assert_true(st.segments > 1);
	assert_true(st.syncs >= st.segments - 1);
	assert_true(synced(&y, first) >= 1); /* synced when sealed */
	nseg = tu_list_ext(dir, ".seg", names, 64);
	last = tu_path(dir, "%s", names[nseg - 1]);
	y.n = 0;
	assert_int_equal(kv_close(db), 0);
	assert_true(synced(&y, last) >= 1); /* synced at close */
	free(first);
	free(last);
	tu_rmtree(dir);
	free(dir);
}

/* An I/O error while reading a record is answered as a damaged record
 * (KV_ECORRUPT, DATA_LOSS over the wire), never as "not found" or another
 * value; the next read, without the error, gets the value (both backends). */
static void test_read_error_is_data_loss(void **state)
{
	enum kv_io modes[] = {KV_IO_URING, KV_IO_PSYNC};

	(void)state;
	for (int m = 0; m < 2; m++) {
		char *dir = tu_mkdtemp("readeio");
		struct tf_fault f;
		struct kv_options o;
		struct kv_value v;
		kv_db *db;

		tu_options(&o, &clk);
		o.io = modes[m];
		o.mmap_reads = false;
		tf_fault_init(&f);
		o.fault = &f.hooks;
		assert_int_equal(kv_open(dir, &o, &db), 0);
		assert_int_equal(kv_put(db, "k", 1, "value", 5, NULL, NULL), 0);
		atomic_store(&f.fail_read, 1000);
		assert_int_equal(kv_get(db, "k", 1, NULL, &v), KV_ECORRUPT);
		atomic_store(&f.fail_read, 0);
		assert_int_equal(kv_get(db, "k", 1, NULL, &v), 0);
		assert_int_equal(v.len, 5);
		assert_memory_equal(v.data, "value", 5);
		kv_value_release(&v);
		assert_int_equal(kv_close(db), 0);
		tu_rmtree(dir);
		free(dir);
	}
}

static void test_file_budget(void **state)
{
	char *dir[2] = {tu_mkdtemp("budget0"), tu_mkdtemp("budget1")};
	kv_db *db[2];
	struct kv_options o;
	struct kv_stats st;
	char k[32], v[200];

	(void)state;
	tu_options(&o, &clk);
	o.segment_size = 4096;
	o.sync = KV_SYNC_NONE;
	assert_int_equal(kv_set_open_files_budget(6), 0);
	for (int d = 0; d < 2; d++) {
		assert_int_equal(kv_open(dir[d], &o, &db[d]), 0);
		for (int i = 0; i < 600; i++) {
			snprintf(k, sizeof(k), "k%04d", i);
			memset(v, 'a' + d, sizeof(v));
			assert_int_equal(kv_put(db[d], k, strlen(k), v, sizeof(v), NULL, NULL), 0);
		}
		assert_int_equal(kv_stats(db[d], &st), 0);
		assert_true(st.segments > 20);
		assert_true(kv_open_segment_files() <= 6);
	}
	/* reads across all segments of both databases stay within the budget */
	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < 600; i++) {
			for (int d = 0; d < 2; d++) {
				struct kv_value val;
				snprintf(k, sizeof(k), "k%04d", i);
				assert_int_equal(kv_get(db[d], k, strlen(k), NULL, &val), 0);
				assert_int_equal(val.len, 200);
				assert_int_equal(((char *)val.data)[0], 'a' + d);
				kv_value_release(&val);
				assert_true(kv_open_segment_files() <= 6);
			}
		}
		assert_int_equal(kv_merge(db[0]), 0);
	}
	for (int d = 0; d < 2; d++) {
		assert_int_equal(kv_close(db[d]), 0);
		assert_int_equal(kv_open(dir[d], &o, &db[d]), 0);
		assert_true(kv_open_segment_files() <= 6);
	}
	for (int d = 0; d < 2; d++) {
		assert_int_equal(kv_close(db[d]), 0);
		tu_rmtree(dir[d]);
		free(dir[d]);
	}
	assert_int_equal(kv_open_segment_files(), 0);
	kv_set_open_files_budget(0);
}

/* ---- the files storage backend (engine/storage.h) ------------------------ */

struct names {
	char v[16][64];
	int kind[16];
	uint32_t id[16];
	int n;
};

static int collect_tenant(void *arg, const char *tenant)
{
	struct names *nm = arg;

	if (nm->n < 16)
		snprintf(nm->v[nm->n++], sizeof(nm->v[0]), "%s", tenant);
	return 0;
}

static int collect_entry(void *arg, const struct kv_stor_entry *e)
{
	struct names *nm = arg;

	if (nm->n < 16) {
		nm->kind[nm->n] = e->kind;
		nm->id[nm->n] = e->id;
		snprintf(nm->v[nm->n], sizeof(nm->v[0]), "%s", e->name ? e->name : "");
		nm->n++;
	}
	return 0;
}

static int count_kind(const struct names *nm, int kind)
{
	int n = 0;

	for (int i = 0; i < nm->n; i++)
		n += nm->kind[i] == kind;
	return n;
}

/* The contract of storage.h on the files backend: a tenant is created with
 * its first blob and listed; blobs and hints are read back whole, a blob
 * over the caller's bound is damage, a missing one -ENOENT; a segment
 * created unpublished lists as a leftover until published, and is read
 * back; the lock is exclusive; a dropped tenant is gone. */
static void test_storage_files_contract(void **state)
{
	char *dir = tu_mkdtemp("storage");
	struct kv_storage *st;
	struct kv_stor_tenant *t, *t2;
	struct kv_stor_seg *s;
	struct names nm = {0};
	uint8_t *buf, rd[5];
	size_t len, got;
	uint64_t size;

	(void)state;
	assert_int_equal(kv_storage_file_open(dir, NULL, &st), 0);
	assert_int_equal(st->ops->tenant_create(st, "a", "TENANT", "cfg", 3), 0);
	assert_int_equal(st->ops->tenant_list(st, collect_tenant, &nm), 0);
	assert_int_equal(nm.n, 1);
	assert_string_equal(nm.v[0], "a");
	assert_int_equal(st->ops->tenant_create(st, "../x", "TENANT", "cfg", 3), -EINVAL);

	assert_int_equal(stor_tenant_open(st, "a", 0, &t), 0);
	assert_int_equal(stor_meta_get(t, "TENANT", 64, &buf, &len), 0);
	assert_int_equal(len, 3);
	assert_memory_equal(buf, "cfg", 3);
	free(buf);
	assert_int_equal(stor_meta_get(t, "TENANT", 2, &buf, &len), KV_ECORRUPT);
	assert_int_equal(stor_meta_get(t, "META", 64, &buf, &len), -ENOENT);
	assert_int_equal(stor_meta_put(t, "META", "m1", 2, KV_STOR_DURABLE), 0);
	assert_int_equal(stor_meta_put(t, "META", "m22", 3, 0), 0);
	assert_int_equal(stor_meta_get(t, "META", 64, &buf, &len), 0);
	assert_int_equal(len, 3);
	free(buf);
	assert_int_equal(stor_hint_put(t, 7, "hint", 4), 0);
	assert_int_equal(stor_hint_get(t, 7, 64, &buf, &len), 0);
	assert_memory_equal(buf, "hint", 4);
	free(buf);

	assert_int_equal(stor_seg_create(t, 9, KV_STOR_SEG_TEMP, &s), 0);
	assert_int_equal(stor_seg_write(s, "hello", 5, 0), 0);
	assert_int_equal(stor_seg_sync(s), 0);
	nm.n = 0;
	assert_int_equal(stor_list(t, collect_entry, &nm), 0);
	assert_int_equal(count_kind(&nm, KV_STOR_SEGMENT), 0);
	assert_int_equal(count_kind(&nm, KV_STOR_PARTIAL), 1);
	assert_int_equal(count_kind(&nm, KV_STOR_HINT), 1);
	assert_int_equal(count_kind(&nm, KV_STOR_META), 2); /* TENANT, META */
	assert_int_equal(stor_seg_publish(s), 0);
	stor_seg_close(s);
	nm.n = 0;
	assert_int_equal(stor_list(t, collect_entry, &nm), 0);
	assert_int_equal(count_kind(&nm, KV_STOR_SEGMENT), 1);
	assert_int_equal(count_kind(&nm, KV_STOR_PARTIAL), 0);
	assert_int_equal(stor_seg_open(t, 9, &s, &size), 0);
	assert_int_equal(size, 5);
	assert_int_equal(stor_seg_read(s, rd, 5, 0), 0);
	assert_memory_equal(rd, "hello", 5);
	assert_int_equal(stor_seg_read(s, rd, 5, 3), -EIO); /* past the end */
	assert_int_equal(stor_seg_read_upto(s, rd, 5, 3, &got), 0);
	assert_int_equal(got, 2);
	{
		struct kv_stor_rd r = {s, rd, 4, 1, 1};
		assert_int_equal(stor_read_batch(st, &r, 1), 0);
		assert_int_equal(r.res, 0);
		assert_memory_equal(rd, "ello", 4);
	}
	stor_seg_close(s);
	assert_int_equal(stor_seg_remove(t, 9, 0), 0);
	assert_int_equal(stor_seg_open(t, 9, &s, &size), -ENOENT);

	/* one writer at a time */
	assert_int_equal(st->ops->tenant_lock(t, true), 0);
	assert_int_equal(stor_tenant_open(st, "a", 0, &t2), 0);
	assert_int_equal(st->ops->tenant_lock(t2, false), KV_ELOCKED);
	stor_tenant_close(t2);
	stor_tenant_close(t);

	assert_int_equal(st->ops->tenant_drop(st, "a"), 0);
	nm.n = 0;
	assert_int_equal(st->ops->tenant_list(st, collect_tenant, &nm), 0);
	assert_int_equal(nm.n, 0);
	assert_int_equal(stor_tenant_open(st, "a", 0, &t), -ENOENT);
	kv_storage_close(st);
	tu_rmtree(dir);
	free(dir);
}

/* The fault layer sits under the interface: an injected write error fails
 * a put, the old blob stays whole, and nothing of the new one is left. */
static void test_storage_faults_under_interface(void **state)
{
	char *dir = tu_mkdtemp("storagefault");
	struct tf_fault f;
	struct kv_storage *st;
	struct kv_stor_tenant *t;
	struct names nm = {0};
	uint8_t *buf;
	size_t len;

	(void)state;
	tf_fault_init(&f);
	assert_int_equal(kv_storage_file_open(dir, &f.hooks, &st), 0);
	assert_int_equal(st->ops->tenant_create(st, "a", "TENANT", "cfg", 3), 0);
	assert_int_equal(stor_tenant_open(st, "a", 0, &t), 0);
	assert_int_equal(stor_meta_put(t, "META", "old", 3, KV_STOR_DURABLE), 0);
	f.fail_write = 1;
	assert_int_equal(stor_meta_put(t, "META", "new!", 4, KV_STOR_DURABLE), -EIO);
	f.fail_sync = 1;
	assert_int_equal(stor_meta_put(t, "META", "new!", 4, KV_STOR_DURABLE), -EIO);
	assert_int_equal(stor_meta_get(t, "META", 64, &buf, &len), 0);
	assert_int_equal(len, 3);
	assert_memory_equal(buf, "old", 3);
	free(buf);
	assert_int_equal(stor_list(t, collect_entry, &nm), 0);
	assert_int_equal(count_kind(&nm, KV_STOR_PARTIAL), 0);
	stor_tenant_close(t);
	kv_storage_close(st);
	tu_rmtree(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_seccomp_fallback),
	        cmocka_unit_test(test_backends_agree),
	        cmocka_unit_test(test_mapped_reads),
	        cmocka_unit_test(test_fsync_failure_read_only),
	        cmocka_unit_test(test_write_failure_recovers),
	        cmocka_unit_test(test_interval_sync),
	        cmocka_unit_test(test_interval_sync_failure),
	        cmocka_unit_test(test_seal_sync_failure),
	        cmocka_unit_test(test_not_visible_before_sync),
	        cmocka_unit_test(test_sync_none_at_seal_and_close),
	        cmocka_unit_test(test_read_error_is_data_loss),
	        cmocka_unit_test(test_file_budget),
	        cmocka_unit_test(test_storage_files_contract),
	        cmocka_unit_test(test_storage_faults_under_interface),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
