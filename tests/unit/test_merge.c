/* test_merge.c — merge reclaims space, honours retention, TTL, deletes, compaction and open iterators, runs beside readers and writers, survives a crash at every I/O step, keeps the segments a damaged commit retired; META is written durably and checked. */
#include "testutil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "fault.h"
#include "io.h"

#include "oom.h"

static struct tu_clock clk = {1700000000000ull};

static void opts(struct kv_options *o)
{
	tu_options(o, &clk);
	o->segment_size = 16 * 1024;
	o->merge_ratio_pct = 0;
}

static void putf(kv_db *db, const char *k, uint64_t *ret_ver, const char *fmt, ...)
{
	char v[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(v, sizeof(v), fmt, ap);
	va_end(ap);
	assert_int_equal(kv_put(db, k, strlen(k), v, strlen(v), NULL, ret_ver), 0);
}

static void check(kv_db *db, const char *k, const char *want)
{
	struct kv_value val;

	if (want == NULL) {
		assert_int_equal(kv_get(db, k, strlen(k), NULL, &val), KV_ENOTFOUND);
		return;
	}
	assert_int_equal(kv_get(db, k, strlen(k), NULL, &val), 0);
	assert_int_equal(val.len, strlen(want));
	assert_memory_equal(val.data, want, val.len);
	kv_value_release(&val);
}

static void test_reclaims_space(void **state)
{
	char *dir = tu_mkdtemp("reclaim");
	struct kv_options o;
	struct kv_stats before, after;
	struct kv_version *list;
	size_t n;
	bool cut;
	kv_db *db;
	char k[32], v[64];

	(void)state;
	opts(&o);
	assert_int_equal(kv_open(dir, &o, &db), 0);
	for (int round = 0; round < 10; round++)
		for (int i = 0; i < 500; i++) {
			snprintf(k, sizeof(k), "key-%04d", i);
			putf(db, k, NULL, "value-%d-%d-%032d", i, round, 0);
		}
	assert_int_equal(kv_stats(db, &before), 0);
	assert_int_equal(kv_merge(db), 0);
	assert_int_equal(kv_stats(db, &after), 0);
	assert_int_equal(after.merges, 1);
	assert_int_equal(after.keys, 500);
	/* about a tenth of the bytes are live: merge got the rest back */
	assert_true(after.disk_bytes * 5 < before.disk_bytes);
	assert_true(after.dead_bytes * 10 < after.disk_bytes);
	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < 500; i++) {
			snprintf(k, sizeof(k), "key-%04d", i);
			snprintf(v, sizeof(v), "value-%d-%d-%032d", i, 9, 0);
			check(db, k, v);
		}
		/* history 1: one version left, and the cut is reported */
		assert_int_equal(kv_versions(db, "key-0007", 8, 0, 0, false, &list, &n, &cut), 0);
		assert_int_equal(n, 1);
		assert_true(cut);
		kv_versions_free(list, n);
		assert_int_equal(kv_close(db), 0);
		assert_int_equal(kv_open(dir, &o, &db), 0);
	}
	assert_int_equal(kv_stats(db, &after), 0);
	assert_int_equal(after.keys, 500);
	assert_int_equal(kv_close(db), 0);
	tu_rmtree(dir);
	free(dir);
}

static void test_deletes_and_ttl_dropped(void **state)
{
	char *dir = tu_mkdtemp("del");
	struct kv_options o;
	struct kv_write_opts w = KV_WRITE_OPTS_INIT;
	struct kv_stats st;
	struct kv_version *list;
	size_t n;
	kv_db *db;
	char k[32];

	(void)state;
	opts(&o);
	assert_int_equal(kv_open(dir, &o, &db), 0);
	for (int i = 0; i < 300; i++) {
		snprintf(k, sizeof(k), "k%03d", i);
		w.ttl_ms = i % 3 == 2 ? 5000 : 0;
		assert_int_equal(kv_put(db, k, strlen(k), "some value", 10, &w, NULL), 0);
	}
	for (int i = 0; i < 300; i += 3) {
		snprintf(k, sizeof(k), "k%03d", i);
		assert_int_equal(kv_delete(db, k, strlen(k), NULL, NULL), 0);
	}
	clk.ms += 5000; /* the TTL keys expire */
	assert_int_equal(kv_merge(db), 0);
	assert_int_equal(kv_stats(db, &st), 0);
	assert_int_equal(st.keys, 100);
	assert_int_equal(st.tombstones, 0);
	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < 300; i++) {
			snprintf(k, sizeof(k), "k%03d", i);
			check(db, k, i % 3 == 1 ? "some value" : NULL);
			assert_int_equal(kv_versions(db, k, strlen(k), 0, 0, false, &list, &n, NULL), 0);
			assert_int_equal(n, i % 3 == 1 ? 1u : 0u);
			kv_versions_free(list, n);
		}
		assert_int_equal(kv_close(db), 0);
		assert_int_equal(kv_open(dir, &o, &db), 0);
	}
	/* a dropped key can be created again with if_version 0 */
	w.ttl_ms = 0;
	w.if_version = 0;
	assert_int_equal(kv_put(db, "k000", 4, "again", 5, &w, NULL), 0);
	assert_int_equal(kv_close(db), 0);
	tu_rmtree(dir);
	free(dir);
}

static void test_history_retention(void **state)
{
	char *dir = tu_mkdtemp("hist");
	struct kv_options o;
	struct kv_version *list;
	struct kv_read_opts r = {0};
	struct kv_value val;
	uint64_t ver[10];
	size_t n;
	bool cut;
	kv_db *db;

	(void)state;
	opts(&o);
	o.history_versions = 3;
	assert_int_equal(kv_open(dir, &o, &db), 0);
	for (int i = 0; i < 10; i++) {
		putf(db, "h", &ver[i], "v%d", i);
		putf(db, "filler", NULL, "%0200d", i);
	}
	assert_int_equal(kv_merge(db), 0);
	for (int pass = 0; pass < 2; pass++) {
		assert_int_equal(kv_versions(db, "h", 1, 0, 0, true, &list, &n, &cut), 0);
		assert_int_equal(n, 3);
		assert_true(cut);
		for (int i = 0; i < 3; i++) {
			char want[8];
			snprintf(want, sizeof(want), "v%d", 9 - i);
			assert_int_equal(list[i].version, ver[9 - i]);
			assert_int_equal(list[i].len, strlen(want));
			assert_memory_equal(list[i].data, want, list[i].len);
		}
		kv_versions_free(list, n);
		r.as_of = ver[7];
		assert_int_equal(kv_get(db, "h", 1, &r, &val), 0);
		assert_memory_equal(val.data, "v7", 2);
		kv_value_release(&val);
		r.as_of = ver[6];
		assert_int_equal(kv_get(db, "h", 1, &r, &val), KV_ECOMPACTED);
		r.as_of = 0;
		r.version = ver[2];
		assert_int_equal(kv_get(db, "h", 1, &r, &val), KV_ECOMPACTED);
		r.version = 0;
		assert_int_equal(kv_close(db), 0);
		assert_int_equal(kv_open(dir, &o, &db), 0);
	}
	assert_int_equal(kv_close(db), 0);
	tu_rmtree(dir);
	free(dir);
}

static void test_compact_revision(void **state)
{
	char *dir = tu_mkdtemp("compact");
	struct kv_options o;
	struct kv_version *list;
	struct kv_read_opts r = {0};
	struct kv_value val;
	struct kv_stats st;
	uint64_t ver[10], dv;
	size_t n;
	kv_db *db;

	(void)state;
	opts(&o);
	o.history_versions = 100;
	assert_int_equal(kv_open(dir, &o, &db), 0);
	for (int i = 0; i < 10; i++)
		putf(db, "c", &ver[i], "v%d", i);
	putf(db, "gone", NULL, "x");
	assert_int_equal(kv_delete(db, "gone", 4, NULL, &dv), 0);
	putf(db, "after", NULL, "y");
	assert_int_equal(kv_compact(db, dv + 1000), -EINVAL); /* a future revision */
	assert_int_equal(kv_compact(db, ver[5]), 0);
	/* history 100 would keep everything; the revision drops what is older */
	assert_int_equal(kv_versions(db, "c", 1, 0, 0, false, &list, &n, NULL), 0);
	assert_int_equal(n, 5);
	assert_int_equal(list[4].version, ver[5]);
	kv_versions_free(list, n);
	assert_int_equal(kv_compact(db, dv), 0);
	assert_int_equal(kv_stats(db, &st), 0);
	assert_int_equal(st.tombstones, 0); /* the delete was at or before the revision */
	assert_int_equal(st.compact_revision, dv);
	for (int pass = 0; pass < 2; pass++) {
		r.as_of = ver[4];
		assert_int_equal(kv_get(db, "c", 1, &r, &val), KV_ECOMPACTED);
		r.as_of = dv;
		assert_int_equal(kv_get(db, "c", 1, &r, &val), 0);
		assert_memory_equal(val.data, "v9", 2);
		kv_value_release(&val);
		r.as_of = 0;
		check(db, "gone", NULL);
		check(db, "after", "y");
		assert_int_equal(kv_close(db), 0);
		assert_int_equal(kv_open(dir, &o, &db), 0);
		assert_int_equal(kv_stats(db, &st), 0);
		assert_int_equal(st.compact_revision, dv);
	}
	assert_int_equal(kv_close(db), 0);
	tu_rmtree(dir);
	free(dir);
}

static void test_iterator_survives_merge(void **state)
{
	char *dir = tu_mkdtemp("itermerge");
	struct kv_options o;
	struct kv_entry e;
	kv_iter *it;
	kv_db *db;
	char k[32];
	int n = 0;

	(void)state;
	opts(&o);
	assert_int_equal(kv_open(dir, &o, &db), 0);
	for (int i = 0; i < 400; i++) {
		snprintf(k, sizeof(k), "it%04d", i);
		putf(db, k, NULL, "old-%d", i);
	}
	assert_int_equal(kv_iter_open(db, NULL, &it), 0);
	for (int i = 0; i < 400; i++) {
		snprintf(k, sizeof(k), "it%04d", i);
		if (i % 2)
			putf(db, k, NULL, "new-%d", i);
		else
			assert_int_equal(kv_delete(db, k, strlen(k), NULL, NULL), 0);
	}
	assert_int_equal(kv_merge(db), 0);
	/* the iterator still reads its snapshot: merge kept what it needs */
	while (kv_iter_next(it, &e) == 0) {
		char want[32];
		snprintf(want, sizeof(want), "old-%d", n);
		assert_int_equal(e.value_len, strlen(want));
		assert_memory_equal(e.value, want, e.value_len);
		n++;
	}
	kv_iter_close(it);
	assert_int_equal(n, 400);
	/* with the iterator closed, the next merge drops the old versions */
	assert_int_equal(kv_merge(db), 0);
	n = 0;
	assert_int_equal(kv_iter_open(db, NULL, &it), 0);
	while (kv_iter_next(it, &e) == 0) {
		assert_true(e.value_len >= 4 && memcmp(e.value, "new-", 4) == 0);
		n++;
	}
	kv_iter_close(it);
	assert_int_equal(n, 200);
	assert_int_equal(kv_close(db), 0);
	tu_rmtree(dir);
	free(dir);
}

#if OOM_TESTS
/* A merge whose allocation fails anywhere, the copy of the open snapshots
 * included, stops with the error and drops nothing an open iterator still
 * reads; once memory is back it completes and the iterator reads its
 * snapshot. */
static void test_out_of_memory_keeps_snapshot(void **state)
{
	char *dir = tu_mkdtemp("mergeoom");
	struct kv_options o;
	struct kv_read_opts at;
	struct kv_value val;
	struct kv_entry e;
	kv_iter *it;
	kv_db *db;
	char k[32], want[32];
	unsigned fail_at, failed = 0;
	bool fired;
	int n = 0, rv;

	(void)state;
	opts(&o);
	assert_int_equal(kv_open(dir, &o, &db), 0);
	for (int i = 0; i < 200; i++) {
		snprintf(k, sizeof(k), "oom%04d", i);
		putf(db, k, NULL, "old-%d", i);
	}
	assert_int_equal(kv_iter_open(db, NULL, &it), 0);
	memset(&at, 0, sizeof(at));
	at.as_of = kv_iter_version(it);
	for (int i = 0; i < 200; i++) {
		snprintf(k, sizeof(k), "oom%04d", i);
		putf(db, k, NULL, "new-%d", i);
	}
	for (fail_at = 1;; fail_at++) {
		oom_arm(fail_at, 1);
		rv = kv_merge(db);
		fired = oom_failed > 0;
		oom_arm(0, 0);
		if (!fired) {
			assert_int_equal(rv, 0);
			break;
		}
		if (rv != 0)
			failed++;
		/* what the iterator reads is still there, whatever failed */
		for (int i = 0; i < 200; i += 7) {
			snprintf(k, sizeof(k), "oom%04d", i);
			snprintf(want, sizeof(want), "old-%d", i);
			assert_int_equal(kv_get(db, k, strlen(k), &at, &val), 0);
			assert_int_equal(val.len, strlen(want));
			assert_memory_equal(val.data, want, val.len);
			kv_value_release(&val);
		}
	}
	assert_true(failed > 0);
	while (kv_iter_next(it, &e) == 0) {
		snprintf(want, sizeof(want), "old-%d", n);
		assert_int_equal(e.value_len, strlen(want));
		assert_memory_equal(e.value, want, e.value_len);
		n++;
	}
	kv_iter_close(it);
	assert_int_equal(n, 200);
	assert_int_equal(kv_close(db), 0);
	tu_rmtree(dir);
	free(dir);
}
#endif

static void test_auto_merge_trigger(void **state)
{
	char *dir = tu_mkdtemp("trigger");
	struct kv_options o;
	kv_db *db;

	(void)state;
	opts(&o);
	o.merge_ratio_pct = 50;
	o.merge_min_bytes = 8192;
	assert_int_equal(kv_open(dir, &o, &db), 0);
	for (int i = 0; i < 50; i++)
		putf(db, "k", NULL, "%0100d", i);
	assert_int_equal(kv_tick(db), 0); /* too little to reclaim yet */
	for (int i = 0; i < 200; i++)
		putf(db, "k", NULL, "%0100d", i);
	assert_int_equal(kv_tick(db), 1);
	assert_int_equal(kv_merge(db), 0);
	assert_int_equal(kv_tick(db), 0);
	assert_int_equal(kv_close(db), 0);
	tu_rmtree(dir);
	free(dir);
}

#ifndef TU_DEVICE /* damages files by name, which a device does not have */
static void test_corrupt_head_stays_data_loss(void **state)
{
	char *dir = tu_mkdtemp("corrupthead");
	char names[64][64];
	struct kv_options o;
	struct kv_value val;
	kv_db *db;
	char *seg;
	int nseg;

	(void)state;
	opts(&o);
	assert_int_equal(kv_open(dir, &o, &db), 0);
	putf(db, "victim", NULL, "precious-%0300d", 1);
	for (int i = 0; i < 100; i++)
		putf(db, "fill", NULL, "%0300d", i);
	assert_int_equal(kv_close(db), 0);
	nseg = tu_list_ext(dir, ".seg", names, 64);
	assert_true(nseg > 1);
	seg = tu_path(dir, "%s", names[0]);
	tu_flip_byte(seg, 64 + 48 + 6 + 20); /* inside victim's value */
	free(seg);
	assert_int_equal(kv_open(dir, &o, &db), 0);
	assert_int_equal(kv_get(db, "victim", 6, NULL, &val), KV_ECORRUPT);
	assert_int_equal(kv_merge(db), 0);
	/* still reported as damaged, not silently lost or replaced */
	assert_int_equal(kv_get(db, "victim", 6, NULL, &val), KV_ECORRUPT);
	assert_int_equal(kv_close(db), 0);
	assert_int_equal(kv_open(dir, &o, &db), 0);
	assert_int_equal(kv_get(db, "victim", 6, NULL, &val), KV_ECORRUPT);
	assert_int_equal(kv_close(db), 0);
	tu_rmtree(dir);
	free(dir);
}
#endif

/* ---- merge beside writers and readers ----------------------------------- */

enum { CK = 200 };

struct conc {
	kv_db *db;
	atomic_int stop;
	atomic_int errors;
	uint32_t writes[CK]; /* how many times each key was written (writer only) */
};

static void *conc_writer(void *p)
{
	struct conc *c = p;
	char k[32], v[64];
	uint32_t x = 12345;

	while (!atomic_load(&c->stop)) {
		int i;
		x = x * 1103515245u + 12345u;
		i = (int)((x >> 8) % CK);
		snprintf(k, sizeof(k), "c%03d", i);
		snprintf(v, sizeof(v), "c%03d=%u", i, c->writes[i] + 1);
		if (kv_put(c->db, k, strlen(k), v, strlen(v), NULL, NULL) != 0) {
			atomic_fetch_add(&c->errors, 1);
			break;
		}
		c->writes[i]++;
	}
	return NULL;
}

static void *conc_reader(void *p)
{
	struct conc *c = p;
	char k[32];
	uint32_t x = 999;

	while (!atomic_load(&c->stop)) {
		struct kv_value val;
		struct kv_version *list;
		size_t n;
		int i, rv;
		x = x * 1103515245u + 12345u;
		i = (int)((x >> 8) % CK);
		snprintf(k, sizeof(k), "c%03d", i);
		rv = kv_get(c->db, k, strlen(k), NULL, &val);
		if (rv == 0) {
			if (val.len < 5 || memcmp(val.data, k, 4) != 0)
				atomic_fetch_add(&c->errors, 1);
			kv_value_release(&val);
		} else if (rv != KV_ENOTFOUND) {
			atomic_fetch_add(&c->errors, 1);
		}
		rv = kv_versions(c->db, k, strlen(k), 4, 0, true, &list, &n, NULL);
		if (rv != 0) {
			atomic_fetch_add(&c->errors, 1);
			continue;
		}
		for (size_t j = 0; j < n; j++) {
			/* every version readable is this key's, counting down */
			if (list[j].len < 5 || memcmp(list[j].data, k, 4) != 0 ||
			    (j > 0 && list[j].version >= list[j - 1].version))
				atomic_fetch_add(&c->errors, 1);
		}
		kv_versions_free(list, n);
	}
	return NULL;
}

static void verify_conc(kv_db *db, struct conc *c, uint32_t keep)
{
	char k[32], v[64];

	for (int i = 0; i < CK; i++) {
		struct kv_version *list;
		size_t n;
		snprintf(k, sizeof(k), "c%03d", i);
		if (c->writes[i] == 0) {
			check(db, k, NULL);
			continue;
		}
		snprintf(v, sizeof(v), "c%03d=%u", i, c->writes[i]);
		check(db, k, v);
		/* the newest `keep` versions are all there, in order, values intact */
		assert_int_equal(kv_versions(db, k, strlen(k), keep, 0, true, &list, &n, NULL), 0);
		assert_int_equal(n, c->writes[i] < keep ? c->writes[i] : keep);
		for (size_t j = 0; j < n; j++) {
			snprintf(v, sizeof(v), "c%03d=%u", i, c->writes[i] - (uint32_t)j);
			assert_int_equal(list[j].len, strlen(v));
			assert_memory_equal(list[j].data, v, list[j].len);
		}
		kv_versions_free(list, n);
	}
}

static void test_merge_beside_writers(void **state)
{
	char *dir = tu_mkdtemp("conc");
	struct kv_options o;
	struct conc *c = calloc(1, sizeof(*c));
	pthread_t w, r;
	kv_db *db;

	(void)state;
	opts(&o);
	o.history_versions = 4;
	o.sync = KV_SYNC_NONE;
	assert_int_equal(kv_open(dir, &o, &db), 0);
	c->db = db;
	assert_int_equal(pthread_create(&w, NULL, conc_writer, c), 0);
	assert_int_equal(pthread_create(&r, NULL, conc_reader, c), 0);
	for (int m = 0; m < 12; m++) {
		struct kv_stats st;
		/* let some writes in between merges */
		do
			kv_stats(db, &st);
		while (st.batched_writes < (uint64_t)(m + 1) * 3000 && !atomic_load(&c->errors));
		assert_int_equal(kv_merge(db), 0);
	}
	atomic_store(&c->stop, 1);
	pthread_join(w, NULL);
	pthread_join(r, NULL);
	assert_int_equal(atomic_load(&c->errors), 0);
	verify_conc(db, c, 4);
	assert_int_equal(kv_close(db), 0);
	assert_int_equal(kv_open(dir, &o, &db), 0);
	verify_conc(db, c, 4);
	assert_int_equal(kv_merge(db), 0);
	verify_conc(db, c, 4);
	assert_int_equal(kv_close(db), 0);
	free(c);
	tu_rmtree(dir);
	free(dir);
}

/* ---- a crash at every I/O step of a merge ------------------------------- */

/* Changes to the files, in order, as the I/O hook reports them. */
#ifndef TU_DEVICE /* the record of file changes, for the test below */
struct evlog {
	struct {
		enum kv_io_event_type type;
		int fd, dirfd;
		char name[64], name2[64];
	} ev[4096];
	size_t n;
};

static void record_ev(void *arg, const struct kv_io_event *ev)
{
	struct evlog *l = arg;

	if (l->n >= sizeof(l->ev) / sizeof(l->ev[0]))
		return;
	l->ev[l->n].type = ev->type;
	l->ev[l->n].fd = ev->fd;
	l->ev[l->n].dirfd = ev->dirfd;
	snprintf(l->ev[l->n].name, sizeof(l->ev[0].name), "%s", ev->name ? ev->name : "");
	snprintf(l->ev[l->n].name2, sizeof(l->ev[0].name2), "%s", ev->name2 ? ev->name2 : "");
	l->n++;
}
#endif

/* META (the compact revision) is written as DURABILITY.md says: a temporary
 * file, fdatasync'ed, renamed, then the directory fsynced; and a damaged
 * META makes the open fail rather than forget the revision. */
#ifndef TU_DEVICE /* damages files by name, which a device does not have */
static void test_meta_durable_and_checked(void **state)
{
	char *dir = tu_mkdtemp("meta");
	char *meta = tu_path(dir, "META");
	static struct evlog l;
	struct tf_fault f;
	struct kv_options o;
	uint64_t ver = 0;
	size_t create = 0, sync = 0, rename = 0, dsync = 0;
	int tmpfd = -1, dirfd = -1;
	kv_db *db;

	(void)state;
	opts(&o);
	tf_fault_init(&f);
	f.record = record_ev;
	f.arg = &l;
	o.fault = &f.hooks;
	assert_int_equal(kv_open(dir, &o, &db), 0);
	putf(db, "a", NULL, "1");
	putf(db, "a", &ver, "2");
	l.n = 0;
	assert_int_equal(kv_compact(db, ver), 0);
	for (size_t i = 0; i < l.n; i++) {
		if (!create && l.ev[i].type == KV_IO_EV_CREATE &&
		    strcmp(l.ev[i].name, "META.tmp") == 0) {
			create = i + 1;
			tmpfd = l.ev[i].fd;
		} else if (create && !rename && !sync && l.ev[i].type == KV_IO_EV_SYNC &&
		           l.ev[i].fd == tmpfd) {
			sync = i + 1;
		} else if (create && !rename && l.ev[i].type == KV_IO_EV_RENAME &&
		           strcmp(l.ev[i].name, "META.tmp") == 0 &&
		           strcmp(l.ev[i].name2, "META") == 0) {
			rename = i + 1;
			dirfd = l.ev[i].dirfd;
		} else if (rename && !dsync && l.ev[i].type == KV_IO_EV_SYNC &&
		           l.ev[i].fd == dirfd) {
			dsync = i + 1;
		}
	}
	assert_true(create > 0);
	assert_true(sync > create);  /* the data synced … */
	assert_true(rename > sync);  /* … before the rename … */
	assert_true(dsync > rename); /* … and the rename synced */
	assert_int_equal(kv_close(db), 0);

	o.fault = NULL;
	tu_flip_byte(meta, 17); /* inside the revision */
	assert_int_equal(kv_open(dir, &o, &db), KV_ECORRUPT);
	tu_flip_byte(meta, 17);
	assert_int_equal(kv_open(dir, &o, &db), 0);
	check(db, "a", "2");
	assert_int_equal(kv_close(db), 0);
	free(meta);
	tu_rmtree(dir);
	free(dir);
}
#endif

static void build_dataset(const char *dir, struct kv_options *o)
{
	kv_db *db;
	char k[32];

	opts(o);
	o->history_versions = 2;
	o->segment_size = 8192;
	assert_int_equal(kv_open(dir, o, &db), 0);
	for (int round = 0; round < 4; round++)
		for (int i = 0; i < 120; i++) {
			snprintf(k, sizeof(k), "m%03d", i);
			putf(db, k, NULL, "m%03d-r%d-%040d", i, round, 0);
		}
	for (int i = 0; i < 120; i += 4) {
		snprintf(k, sizeof(k), "m%03d", i);
		assert_int_equal(kv_delete(db, k, strlen(k), NULL, NULL), 0);
	}
	assert_int_equal(kv_close(db), 0);
}

static void verify_dataset(kv_db *db)
{
	char k[32], v[64];

	for (int i = 0; i < 120; i++) {
		struct kv_version *list;
		size_t n;
		snprintf(k, sizeof(k), "m%03d", i);
		if (i % 4 == 0) {
			check(db, k, NULL);
			continue;
		}
		snprintf(v, sizeof(v), "m%03d-r%d-%040d", i, 3, 0);
		check(db, k, v);
		assert_int_equal(kv_versions(db, k, strlen(k), 2, 0, true, &list, &n, NULL), 0);
		assert_int_equal(n, 2);
		snprintf(v, sizeof(v), "m%03d-r%d-%040d", i, 2, 0);
		assert_memory_equal(list[1].data, v, strlen(v));
		kv_versions_free(list, n);
	}
}

static void test_crash_at_every_merge_step(void **state)
{
	char *base = tu_mkdtemp("mcrash");
	struct kv_options o;
	int at, finished = 0;

	(void)state;
	build_dataset(base, &o);
	for (at = 1; !finished && at < 10000; at++) {
		char *copy = tu_mkdtemp("mcrashcopy");
		struct tf_fault f;
		struct kv_stats st;
		kv_db *db;
		pid_t pid;
		int status;

		tu_copydir(base, copy);
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			struct kv_options co = o;
			tf_fault_init(&f);
			f.crash_at = at;
			co.fault = &f.hooks;
			if (kv_open(copy, &co, &db) != 0)
				_exit(10);
			f.crash_armed = true;
			if (kv_merge(db) != 0)
				_exit(11);
			_exit(3); /* the merge ran to the end before step `at` */
		}
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_true(WIFEXITED(status));
		assert_true(WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == 3);
		finished = WEXITSTATUS(status) == 3;
		/* whatever step it died at, the data is all there */
		assert_int_equal(kv_open(copy, &o, &db), 0);
		verify_dataset(db);
		assert_int_equal(kv_stats(db, &st), 0);
		assert_int_equal(st.keys, 90);
		assert_int_equal(kv_merge(db), 0);
		verify_dataset(db);
		assert_int_equal(kv_close(db), 0);
		tu_rmtree(copy);
		free(copy);
	}
	assert_true(finished);
	assert_true(at > 10); /* there were many steps to die at */
	tu_rmtree(base);
	free(base);
}

/* A commit written, the retired segments not yet deleted: recovery finishes it. */
static void test_commit_then_crash_before_unlink(void **state)
{
	char *base = tu_mkdtemp("unlink");
	char *before = tu_mkdtemp("unlinkbefore");
	struct kv_options o;
	struct kv_stats st;
	kv_db *db;

	(void)state;
	build_dataset(base, &o);
	tu_copydir(base, before);
	assert_int_equal(kv_open(base, &o, &db), 0);
	assert_int_equal(kv_merge(db), 0);
	assert_int_equal(kv_close(db), 0);
	/* bring the retired segments back, as if the unlinks never happened */
	{
		char names[256][64];
		int n = tu_list_ext(before, ".seg", names, 256);
		for (int i = 0; i < n; i++) {
			char *src = tu_path(before, "%s", names[i]);
			char *dst = tu_path(base, "%s", names[i]);
			if (tu_file_size(dst) < 0) {
				char cmd[1024];
				snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", src, dst);
				assert_int_equal(system(cmd), 0);
			}
			free(src);
			free(dst);
		}
	}
	assert_int_equal(kv_open(base, &o, &db), 0);
	verify_dataset(db);
	assert_int_equal(kv_stats(db, &st), 0);
	assert_int_equal(st.keys, 90);
	assert_int_equal(kv_close(db), 0);
	tu_rmtree(base);
	tu_rmtree(before);
	free(base);
	free(before);
}

/* A damaged merge commit: the segments it retired are kept (data is only
 * duplicated), recovery counts the damage, every key reads as before. With
 * an intact commit the same retired segments are deleted at open. */
#ifndef TU_DEVICE /* damages files by name, which a device does not have */
static void test_damaged_commit_keeps_retired(void **state)
{
	char *base = tu_mkdtemp("badcommit");
	char *before = tu_mkdtemp("badcommitbefore");
	static char names[256][64];
	char commits[4][64];
	bool retired[256] = {false};
	struct kv_options o;
	struct kv_recovery_info ri;
	kv_db *db;
	int n, nc, restored = 0;
	char *c;

	(void)state;
	build_dataset(base, &o);
	tu_copydir(base, before);
	assert_int_equal(kv_open(base, &o, &db), 0);
	assert_int_equal(kv_merge(db), 0);
	assert_int_equal(kv_close(db), 0);
	nc = tu_list_ext(base, ".commit", commits, 4);
	assert_int_equal(nc, 1);
	/* bring the retired segments back, as if the unlinks never happened */
	n = tu_list_ext(before, ".seg", names, 256);
	for (int i = 0; i < n; i++) {
		char *src = tu_path(before, "%s", names[i]);
		char *dst = tu_path(base, "%s", names[i]);
		if (tu_file_size(dst) < 0) {
			char cmd[1024];
			snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", src, dst);
			assert_int_equal(system(cmd), 0);
			retired[i] = true;
			restored++;
		}
		free(src);
		free(dst);
	}
	assert_true(restored > 0);
	c = tu_path(base, "%s", commits[0]);
	tu_flip_byte(c, tu_file_size(c) / 2);
	assert_int_equal(kv_open(base, &o, &db), 0);
	assert_int_equal(kv_recovery_info(db, &ri), 0);
	assert_true(ri.corrupt_records >= 1);
	verify_dataset(db);
	assert_int_equal(kv_close(db), 0);
	for (int i = 0; i < n; i++) {
		char *p = tu_path(base, "%s", names[i]);
		assert_true(tu_file_size(p) > 0); /* kept */
		free(p);
	}
	/* the same with the commit intact: the retired segments go */
	tu_flip_byte(c, tu_file_size(c) / 2);
	assert_int_equal(kv_open(base, &o, &db), 0);
	verify_dataset(db);
	assert_int_equal(kv_close(db), 0);
	for (int i = 0; i < n; i++) {
		char *p = tu_path(base, "%s", names[i]);
		assert_int_equal(tu_file_size(p) < 0, retired[i]);
		free(p);
	}
	free(c);
	tu_rmtree(base);
	tu_rmtree(before);
	free(base);
	free(before);
}
#endif

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reclaims_space),
		cmocka_unit_test(test_deletes_and_ttl_dropped),
		cmocka_unit_test(test_history_retention),
		cmocka_unit_test(test_compact_revision),
		cmocka_unit_test(test_iterator_survives_merge),
#if OOM_TESTS
		cmocka_unit_test(test_out_of_memory_keeps_snapshot),
#endif
		cmocka_unit_test(test_auto_merge_trigger),
#ifndef TU_DEVICE
		cmocka_unit_test(test_corrupt_head_stays_data_loss),
#endif
		cmocka_unit_test(test_merge_beside_writers),
		cmocka_unit_test(test_crash_at_every_merge_step),
		cmocka_unit_test(test_commit_then_crash_before_unlink),
#ifndef TU_DEVICE
		cmocka_unit_test(test_meta_durable_and_checked),
#endif
#ifndef TU_DEVICE
		cmocka_unit_test(test_damaged_commit_keeps_retired),
#endif
	};
#if !OOM_TESTS
	fprintf(stderr, "test_merge: test_out_of_memory_keeps_snapshot not built: the "
	                "sanitizer replaces malloc, which that test needs to fail on purpose\n");
#endif
	return cmocka_run_group_tests(tests, NULL, NULL);
}
