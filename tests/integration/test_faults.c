/* test_faults.c — a real kvd under I/O faults: a failed fsync fails its writes and makes the tenant read-only until an operator reopens it, a failed write leaves nothing behind, a full disk (a size-limited tmpfs) gives RESOURCE_EXHAUSTED while reads go on and writes resume once space is freed — and nothing acknowledged is ever lost; a failed interval sync turns the tenant read-only and is logged; a tenant whose automatic merges keep failing is retried after 1, 2, 4 … s, not at every tick, logged once per streak and error, while every tenant is served. */
#include "harness.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/mount.h>
#include <cmocka.h>

static void set_fault(const char *path, const char *mode)
{
	if (mode == NULL) {
		unlink(path);
		return;
	}
	FILE *f = fopen(path, "w");
	fputs(mode, f);
	fclose(f);
}

static char val[4096];

/* How many lines of kvd's log contain text. */
static int log_count(const struct kvd_proc *k, const char *text)
{
	FILE *f = fopen(k->log, "r");
	char line[2048];
	int n = 0;

	if (f == NULL)
		return 0;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, text) != NULL;
	fclose(f);
	return n;
}

/* The value of the series named (labels included) on kvd's /metrics page
 * at 127.0.0.1:port; -1 when the page or the series is not there. */
static double scrape(int port, const char *series)
{
	static const char req[] = "GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n";
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	size_t len = 0, cap = 1 << 16, n = strlen(series);
	char *page = malloc(cap + 1), *p;
	double v = -1;
	ssize_t r;
	int fd;

	assert_non_null(page);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    write(fd, req, sizeof(req) - 1) != (ssize_t)sizeof(req) - 1) {
		close(fd);
		free(page);
		return -1;
	}
	while ((r = read(fd, page + len, cap - len)) > 0) {
		len += (size_t)r;
		if (len == cap) {
			assert_non_null(p = realloc(page, 2 * cap + 1));
			page = p;
			cap *= 2;
		}
	}
	close(fd);
	page[len] = '\0';
	for (p = page; (p = strstr(p, series)) != NULL; p += n)
		if (p > page && p[-1] == '\n' && p[n] == ' ') {
			v = strtod(p + n + 1, NULL);
			break;
		}
	free(page);
	return v;
}


/* Set when test_full_disk could not run: the program then exits 77 (SKIP)
 * if every other test passed, and fails as usual if one did not. */
static bool full_disk_skipped;

/* Stats of the default tenant: its read_only flag. */
static bool tenant_read_only(nng_socket s)
{
	struct h_req q;
	struct h_reply2 r;
	bool ro = false;

	h_req_begin(&q, "Stats", NULL, 11, 1, 0);
	mp_kv_str(&q.pk, "scope", "tenant");
	assert_int_equal(h_call(s, &q, &r), 0);
	assert_int_equal(r.r.status, 0);
	assert_int_equal(mp_field_bool(r.r.result, "read_only", true, &ro), 0);
	h_reply2_free(&r);
	return ro;
}

static void test_fsync_failure(void **state)
{
	struct kvd_proc k;
	char env[700], fault[600], got[64];
	struct kvd_opts o = {.env = {env}};
	char *dir = tu_mkdtemp("fsyncfault");
	nng_socket s;
	int st;

	(void)state;
	snprintf(fault, sizeof(fault), "%s/fault", dir);
	snprintf(env, sizeof(env), "KVD_TEST_FAULT_FILE=%s", fault);
	o.reuse_dir = dir;
	assert_int_equal(kvd_start(&k, &o), 0);
	s = h_dial(k.url, 10000);
	assert_int_equal(h_put(s, NULL, "before", "1", 1, NULL), 0);
	set_fault(fault, "sync-eio");
	/* the batch whose fdatasync failed is not acknowledged */
	assert_int_equal(h_put(s, NULL, "during", "2", 1, NULL), 14);
	set_fault(fault, NULL);
	/* from then on: read-only, with a reason that says what to do */
	{
		struct h_req q;
		struct h_reply2 r;
		h_req_begin(&q, "Put", NULL, 7, 2, 0);
		mp_kv_bin(&q.pk, "key", "after", 5);
		mp_kv_bin(&q.pk, "value", "3", 1);
		assert_int_equal(h_call(s, &q, &r), 0);
		assert_int_equal(r.r.status, 14);
		assert_non_null(strstr(r.r.message, "read-only"));
		h_reply2_free(&r);
	}
	/* reads go on */
	assert_int_equal(h_get(s, NULL, "before", got, sizeof(got), NULL), 0);
	assert_int_equal(h_get(s, NULL, "during", got, sizeof(got), NULL), 5);
	/* the state is seen (Stats) and said (the log) */
	assert_true(tenant_read_only(s));
	assert_true(h_log_has(&k, "refuses writes until it is reopened"));
	/* the operator reopens the tenant: writable again, nothing lost */
	assert_int_equal(h_tenant_call(s, "TenantPassivate", "default", NULL), 0);
	assert_int_equal(h_tenant_call(s, "TenantActivate", "default", NULL), 0);
	assert_false(tenant_read_only(s));
	st = h_put(s, NULL, "after", "3", 1, NULL);
	assert_int_equal(st, 0);
	assert_int_equal(h_get(s, NULL, "before", got, sizeof(got), NULL), 0);
	assert_string_equal(got, "1");
	assert_int_equal(h_get(s, NULL, "after", got, sizeof(got), NULL), 0);
	assert_string_equal(got, "3");
	nng_close(s);
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, true);
	/* and after a restart */
	o.env[0] = NULL;
	assert_int_equal(kvd_start(&k, &o), 0);
	s = h_dial(k.url, 10000);
	assert_int_equal(h_get(s, NULL, "before", got, sizeof(got), NULL), 0);
	assert_string_equal(got, "1");
	assert_int_equal(h_get(s, NULL, "after", got, sizeof(got), NULL), 0);
	assert_string_equal(got, "3");
	assert_int_equal(h_get(s, NULL, "during", got, sizeof(got), NULL), 5);
	nng_close(s);
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
	free(dir);
}

static void test_write_failure(void **state)
{
	struct kvd_proc k;
	char env[700], fault[600], got[64];
	struct kvd_opts o = {.env = {env}};
	char *dir = tu_mkdtemp("writefault");
	uint64_t v1 = 0, v2 = 0;
	nng_socket s;

	(void)state;
	snprintf(fault, sizeof(fault), "%s/fault", dir);
	snprintf(env, sizeof(env), "KVD_TEST_FAULT_FILE=%s", fault);
	o.reuse_dir = dir;
	assert_int_equal(kvd_start(&k, &o), 0);
	s = h_dial(k.url, 10000);
	assert_int_equal(h_put(s, NULL, "a", "1", 1, &v1), 0);
	set_fault(fault, "write-eio");
	assert_int_equal(h_put(s, NULL, "b", "2", 1, NULL), 14);
	set_fault(fault, "write-enospc");
	assert_int_equal(h_put(s, NULL, "b", "2", 1, NULL), 8);
	set_fault(fault, NULL);
	/* not read-only: the next write goes through, with the next version */
	assert_int_equal(h_put(s, NULL, "c", "3", 1, &v2), 0);
	assert_int_equal(v2, v1 + 1);
	assert_int_equal(h_get(s, NULL, "b", got, sizeof(got), NULL), 5);
	assert_int_equal(h_get(s, NULL, "c", got, sizeof(got), NULL), 0);
	assert_string_equal(got, "3");
	nng_close(s);
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
	free(dir);
}

/* A failed interval sync (kvd's maintenance thread) turns the tenant
 * read-only as a failed sync on the write path does, and kvd logs it with
 * the tenant's name; no client call failed. Reads go on; a reopen clears it. */
static void test_interval_sync_failure(void **state)
{
	struct kvd_proc k;
	char env[700], fault[600], got[64];
	struct kvd_opts o = {.env = {env}};
	char *dir = tu_mkdtemp("intervalfault");
	struct h_req q;
	struct h_reply2 r;
	nng_socket s;
	uint64_t t0;
	bool ro = false;

	(void)state;
	snprintf(fault, sizeof(fault), "%s/fault", dir);
	snprintf(env, sizeof(env), "KVD_TEST_FAULT_FILE=%s", fault);
	o.reuse_dir = dir;
	assert_int_equal(kvd_start(&k, &o), 0);
	s = h_dial(k.url, 10000);
	h_req_begin(&q, "TenantCreate", NULL, 1, 3, 0);
	mp_kv_str(&q.pk, "name", "intv");
	mp_kv_str(&q.pk, "sync", "interval");
	mp_kv_uint(&q.pk, "sync_interval_ms", 100);
	assert_int_equal(h_call(s, &q, &r), 0);
	assert_int_equal(r.r.status, 0);
	h_reply2_free(&r);
	assert_int_equal(h_put(s, "intv", "a", "1", 1, NULL), 0); /* activated */
	/* its interval sync first: one that comes after the fault is set would
	 * turn the tenant read-only before the write below */
	{
		uint64_t syncs = 0;
		t0 = h_now_ms();
		while (syncs == 0 && h_now_ms() - t0 < 5000) {
			h_req_begin(&q, "Stats", "intv", 2, 0, 0);
			assert_int_equal(h_call(s, &q, &r), 0);
			assert_int_equal(r.r.status, 0);
			assert_int_equal(mp_field_uint(r.r.result, "syncs", true, &syncs), 0);
			h_reply2_free(&r);
			if (syncs == 0)
				poll(NULL, 0, 20);
		}
		assert_true(syncs > 0);
	}
	set_fault(fault, "sync-eio");
	/* acknowledged at once: the write itself does not sync */
	assert_int_equal(h_put(s, "intv", "c", "3", 1, NULL), 0);
	t0 = h_now_ms();
	while (!ro && h_now_ms() - t0 < 5000) {
		h_req_begin(&q, "Stats", "intv", 2, 0, 0);
		assert_int_equal(h_call(s, &q, &r), 0);
		assert_int_equal(r.r.status, 0);
		assert_int_equal(mp_field_bool(r.r.result, "read_only", true, &ro), 0);
		h_reply2_free(&r);
		if (!ro)
			poll(NULL, 0, 50);
	}
	set_fault(fault, NULL);
	assert_true(ro);
	assert_true(h_log_has(&k, "tenant intv: "));
	assert_int_equal(h_put(s, "intv", "b", "2", 1, NULL), 14);
	assert_int_equal(h_get(s, "intv", "a", got, sizeof(got), NULL), 0);
	assert_string_equal(got, "1");
	/* other tenants are not touched */
	assert_false(tenant_read_only(s));
	assert_int_equal(h_tenant_call(s, "TenantPassivate", "intv", NULL), 0);
	assert_int_equal(h_tenant_call(s, "TenantActivate", "intv", NULL), 0);
	assert_int_equal(h_put(s, "intv", "b", "2", 1, NULL), 0);
	nng_close(s);
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
	free(dir);
}

/* A tenant whose automatic merges keep failing (the creation of each
 * merge's output fails, deterministically, through the fault file): the
 * attempts follow the backoff (1 s, 2 s, 4 s … after the failures) instead
 * of every 100 ms tick; one line is logged for the streak's first failure,
 * another at once when the error changes; every attempt is counted in
 * kvd_merges_total and the tenant in kvd_merge_backoff_tenants; when the
 * fault is gone the next attempt succeeds and says after how many failures.
 * Meanwhile every tenant is served, and a Compact runs at once. A tenant
 * dropped while it waits is no longer counted. Without the backoff the
 * first 6 s see some 50 attempts. */
static void test_merge_backoff(void **state)
{
	struct kvd_proc k;
	char env[700], fault[600], conf[64], got[2048], key[32], line[128];
	struct kvd_opts o = {.env = {env, "KVD_TEST_MERGE_MIN_BYTES=8192"}, .config_text = conf};
	char *dir = tu_mkdtemp("mergebackoff");
	const char *failed_line = "tenant churn: merge failed: ";
	const char *failed = "kvd_merges_total{result=\"failed\"}";
	double at6, at7;
	uint64_t t0, t1;
	int port = h_free_port(), served = 0;
	nng_socket s;

	(void)state;
	assert_true(port > 0);
	snprintf(conf, sizeof(conf), "metrics_listen = 127.0.0.1:%d\n", port);
	snprintf(fault, sizeof(fault), "%s/fault", dir);
	snprintf(env, sizeof(env), "KVD_TEST_FAULT_FILE=%s", fault);
	o.reuse_dir = dir;
	for (size_t i = 0; i < 1024; i++)
		val[i] = (char)('a' + i % 26);
	set_fault(fault, "merge-eio");
	assert_int_equal(kvd_start(&k, &o), 0);
	s = h_dial(k.url, 10000);
	assert_int_equal(h_tenant_call(s, "TenantCreate", "churn", NULL), 0);
	/* live keys, and one key rewritten until its dead versions pass the
	 * ratio (50 %) and KVD_TEST_MERGE_MIN_BYTES: the tenant asks for merges */
	for (int i = 0; i < 4; i++) {
		snprintf(key, sizeof(key), "live%d", i);
		assert_int_equal(h_put(s, "churn", key, val, 1024, NULL), 0);
	}
	for (int i = 0; i < 40; i++) {
		val[0] = (char)('A' + i % 26);
		assert_int_equal(h_put(s, "churn", "hot", val, 1024, NULL), 0);
	}
	t0 = h_now_ms();
	while (log_count(&k, failed_line) == 0 && h_now_ms() - t0 < 10000)
		poll(NULL, 0, 10);
	assert_int_equal(log_count(&k, failed_line), 1);
	assert_true(h_log_has(&k, "merge failed: Input/output error; next attempt in 1 s"));
	/* a Compact is not held back: it merges at once, and fails so */
	{
		struct h_req q;
		struct h_reply2 r;
		h_req_begin(&q, "Compact", "churn", 31, 0, 0);
		assert_int_equal(h_call(s, &q, &r), 0);
		assert_true(r.r.ok);
		assert_int_not_equal(r.r.status, 0);
		h_reply2_free(&r);
	}
	/* 6 s of serving both tenants (new keys only: nothing for a merge of
	 * the default tenant) */
	t0 = h_now_ms();
	while (h_now_ms() - t0 < 6000) {
		snprintf(key, sizeof(key), "d%05d", served);
		assert_int_equal(h_put(s, NULL, key, "v", 1, NULL), 0);
		assert_int_equal(h_get(s, NULL, key, got, sizeof(got), NULL), 0);
		assert_int_equal(h_get(s, "churn", "hot", got, sizeof(got), NULL), 0);
		assert_int_equal(got[0], 'A' + 39 % 26);
		served++;
		poll(NULL, 0, 20);
	}
	assert_true(served > 20);
	/* attempts at about 0, 1 and 3 s (the next at 7 s); one line logged */
	at6 = scrape(port, failed);
	assert_true(at6 >= 2 && at6 <= 4);
	assert_int_equal(log_count(&k, failed_line), 1);
	assert_true(scrape(port, "kvd_merge_backoff_tenants") == 1);
	/* another error is logged at its first attempt */
	set_fault(fault, "merge-enospc");
	t1 = h_now_ms();
	while (log_count(&k, failed_line) < 2 && h_now_ms() - t1 < 15000)
		poll(NULL, 0, 10);
	assert_int_equal(log_count(&k, failed_line), 2);
	assert_true(h_log_has(&k, "merge failed: No space left on device (before: "
	                          "Input/output error)"));
	at7 = scrape(port, failed);
	assert_true(at7 == at6 + 1);
	/* the fault is gone: the next attempt, its wait (1 s doubled at each
	 * failure) later, succeeds */
	set_fault(fault, NULL);
	t1 = h_now_ms();
	snprintf(line, sizeof(line), "tenant churn: merge succeeded after %.0f failures", at7);
	while (!h_log_has(&k, line) && h_now_ms() - t1 < 20000)
		poll(NULL, 0, 10);
	assert_true(h_log_has(&k, line));
	assert_true(h_now_ms() - t1 <= (1000u << ((int)at7 - 1)) + 2000);
	assert_true(scrape(port, "kvd_merge_backoff_tenants") == 0);
	assert_true(scrape(port, "kvd_merges_total{result=\"ok\"}") >= 1);
	assert_true(scrape(port, failed) == at7);
	assert_int_equal(log_count(&k, failed_line), 2);
	/* nothing lost */
	assert_int_equal(h_get(s, "churn", "hot", got, sizeof(got), NULL), 0);
	assert_int_equal(got[0], 'A' + 39 % 26);
	for (int i = 0; i < 4; i++) {
		snprintf(key, sizeof(key), "live%d", i);
		assert_int_equal(h_get(s, "churn", key, got, sizeof(got), NULL), 0);
	}
	/* a tenant dropped while it waits leaves no entry behind */
	set_fault(fault, "merge-eio");
	assert_int_equal(h_tenant_call(s, "TenantCreate", "gone", NULL), 0);
	for (int i = 0; i < 40; i++)
		assert_int_equal(h_put(s, "gone", i ? "hot" : "live", val, 1024, NULL), 0);
	t1 = h_now_ms();
	while (!h_log_has(&k, "tenant gone: merge failed: ") && h_now_ms() - t1 < 10000)
		poll(NULL, 0, 10);
	assert_true(scrape(port, "kvd_merge_backoff_tenants") == 1);
	assert_int_equal(h_tenant_call(s, "TenantDrop", "gone", NULL), 0);
	t1 = h_now_ms();
	while (scrape(port, "kvd_merge_backoff_tenants") != 0 && h_now_ms() - t1 < 5000)
		poll(NULL, 0, 20);
	assert_true(scrape(port, "kvd_merge_backoff_tenants") == 0);
	set_fault(fault, NULL);
	nng_close(s);
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
	free(dir);
}

static void test_full_disk(void **state)
{
	struct kvd_proc k;
	char *dir = tu_mkdtemp("fulldisk"), *mnt = tu_path(dir, "small");
	struct kvd_opts o = {.reuse_dir = mnt, .config_text = "segment_size = 256K\n"};
	char key[32], got[8192];
	int acked = 0, refused = 0;
	nng_socket s;

	(void)state;
	mkdir(mnt, 0755);
	if (mount("kvdtest", mnt, "tmpfs", 0, "size=4m") != 0) {
		fprintf(stderr, "skipped: cannot mount a 4 MiB tmpfs at %s (%s); this test needs "
		                "root to make a small disk\n",
		        mnt, strerror(errno));
		tu_rmtree(dir);
		free(mnt);
		free(dir);
		full_disk_skipped = true;
		skip();
	}
	for (size_t i = 0; i < sizeof(val); i++)
		val[i] = (char)('a' + i % 26);
	assert_int_equal(kvd_start(&k, &o), 0);
	s = h_dial(k.url, 10000);
	/* a filler tenant whose drop frees space later */
	{
		struct h_req q;
		struct h_reply2 r;
		h_req_begin(&q, "TenantCreate", NULL, 1, 1, 0);
		mp_kv_str(&q.pk, "name", "filler");
		assert_int_equal(h_call(s, &q, &r), 0);
		assert_int_equal(r.r.status, 0);
		h_reply2_free(&r);
		for (int i = 0; i < 100; i++) {
			snprintf(key, sizeof(key), "f%03d", i);
			assert_int_equal(h_put(s, "filler", key, val, sizeof(val), NULL), 0);
		}
	}
	/* fill the disk: writes are refused with RESOURCE_EXHAUSTED */
	for (int i = 0; i < 4000 && refused < 5; i++) {
		int st;
		snprintf(key, sizeof(key), "k%05d", i);
		st = h_put(s, NULL, key, val, sizeof(val), NULL);
		if (st == 0) {
			acked = i + 1;
			assert_int_equal(refused, 0); /* no acknowledged write after a refusal */
		} else {
			assert_int_equal(st, 8);
			refused++;
		}
	}
	assert_true(acked > 100);
	assert_true(refused == 5);
	/* reads go on, everything acknowledged is there */
	for (int i = 0; i < acked; i++) {
		snprintf(key, sizeof(key), "k%05d", i);
		assert_int_equal(h_get(s, NULL, key, got, sizeof(got), NULL), 0);
		assert_int_equal(memcmp(got, val, sizeof(val)), 0);
	}
	/* space comes back: writes resume */
	assert_int_equal(h_tenant_call(s, "TenantDrop", "filler", NULL), 0);
	snprintf(key, sizeof(key), "k%05d", acked);
	assert_int_equal(h_put(s, NULL, key, val, sizeof(val), NULL), 0);
	nng_close(s);
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, true);
	/* and nothing acknowledged is lost across a restart on the full disk */
	o.config_text = NULL;
	assert_int_equal(kvd_start(&k, &o), 0);
	s = h_dial(k.url, 10000);
	for (int i = 0; i <= acked; i++) {
		snprintf(key, sizeof(key), "k%05d", i);
		assert_int_equal(h_get(s, NULL, key, got, sizeof(got), NULL), 0);
		assert_int_equal(strlen(got), sizeof(val));
		assert_int_equal(memcmp(got, val, sizeof(val)), 0);
	}
	nng_close(s);
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, true);
	umount(mnt);
	tu_rmtree(dir);
	free(mnt);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fsync_failure),
		cmocka_unit_test(test_write_failure),
		cmocka_unit_test(test_interval_sync_failure),
		cmocka_unit_test(test_merge_backoff),
		cmocka_unit_test(test_full_disk),
	};
	int failed;

	signal(SIGPIPE, SIG_IGN);
	failed = cmocka_run_group_tests(tests, NULL, NULL);
	if (failed == 0 && full_disk_skipped)
		return 77;
	return failed;
}
