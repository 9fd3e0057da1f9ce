/* test_backup.c — a Backup taken under concurrent writes restores (kvd --restore) to exactly the
 * as-of-version scan at its version, on files and on a device. */
/*
 * kvd A serves a tenant with small segments (so most of the log is sealed
 * and hard-linked into the backup) and history, while a writer puts,
 * overwrites and deletes without pause. Meanwhile Backup writes the tenant
 * into a directory and says at which version V it is consistent. The
 * writer keeps going for a while after it. Then A's scans as of V and of an
 * older version are taken, A stops, kvd --restore makes the backup a
 * tenant of kvd B's data directory, and B's scans (now and as of the same
 * older version) must equal A's byte for byte: keys, values and versions,
 * and B's last version must be V (nothing written after V came along).
 * The same with A on a device (an image file): the backup is files, restored
 * into B's data directory and back onto the device as another tenant.
 * Also: a backup into a directory that is not empty, inside the data
 * directory, not a directory or not absolute is refused with a one-line reason, and kvd
 * --restore refuses an existing tenant without --force and a directory
 * that is not a whole backup.
 */
#include "harness.h"

#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h> /* after the headers it needs */

#include "kvclient.h"

#define NKEYS       1500
#define WRITES_PRE  6000 /* before the backup: several sealed segments */
#define WRITES_POST 3000 /* after it */

static _Atomic bool stop_flag;
static _Atomic uint64_t written;

struct writer {
	const char *url;
	int failed;
	char message[256];
};

static kvc *open_client(const char *url, const char *tenant)
{
	struct kvc_options o;
	kvc *c = NULL;

	kvc_options_init(&o);
	o.endpoint = url;
	o.tenant = tenant;
	o.timeout_ms = 30000;
	return kvc_open(&o, &c) == 0 ? c : NULL;
}

static void *writer_main(void *arg)
{
	struct writer *wr = arg;
	kvc *c = open_client(wr->url, "w");
	uint64_t i = 0, x = 88172645463325252ull;

	if (c == NULL) {
		wr->failed = -KVC_INTERNAL;
		return NULL;
	}
	while (!atomic_load(&stop_flag)) {
		struct kvc_status st;
		struct kvc_call call = {.status = &st};
		char key[32], val[200];
		size_t vl;
		int rv;

		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		snprintf(key, sizeof(key), "k%05u", (unsigned)(x % NKEYS));
		if (x % 7 == 0) {
			rv = kvc_delete(c, &call, key, strlen(key), KVC_ANY_VERSION, NULL);
			if (rv == -KVC_NOT_FOUND)
				rv = 0;
		} else {
			vl = (size_t)snprintf(val, sizeof(val), "v%" PRIu64 "-%0*u", i,
			                      (int)(x % 120), 7u);
			rv = kvc_put(c, &call, key, strlen(key), val, vl, NULL, NULL);
		}
		if (rv != 0) {
			wr->failed = rv;
			snprintf(wr->message, sizeof(wr->message), "%s", st.message);
			break;
		}
		i++;
		atomic_store(&written, i);
	}
	kvc_close(c);
	return NULL;
}

struct item {
	char *k, *v;
	size_t kl, vl;
	uint64_t version;
};

struct scan {
	struct item *it;
	size_t n;
	uint64_t at;
};

static void scan_all(const char *url, const char *tenant, uint64_t as_of, struct scan *ret)
{
	kvc *c = open_client(url, tenant);
	struct kvc_scan_opts o = {.as_of = as_of};
	struct kvc_status st;
	struct kvc_call call = {.status = &st};
	struct kvc_item x;
	kvc_iter *it;
	size_t cap = 0;
	int rv;

	assert_non_null(c);
	memset(ret, 0, sizeof(*ret));
	if ((rv = kvc_scan_open(c, &call, &o, &it)) != 0)
		fail_msg("scan as of %" PRIu64 ": %s %s", as_of, kvc_code_name(rv), st.message);
	while ((rv = kvc_scan_next(it, &x)) == 0) {
		if (ret->n == cap) {
			cap = cap ? cap * 2 : 256;
			ret->it = realloc(ret->it, cap * sizeof(*ret->it));
			assert_non_null(ret->it);
		}
		struct item *e = &ret->it[ret->n++];
		e->k = malloc(x.key_len + 1);
		e->v = malloc(x.value_len + 1);
		assert_true(e->k != NULL && e->v != NULL);
		memcpy(e->k, x.key, x.key_len);
		memcpy(e->v, x.value, x.value_len);
		e->kl = x.key_len;
		e->vl = x.value_len;
		e->version = x.version;
	}
	if (rv != 1)
		fail_msg("scan as of %" PRIu64 ": %s", as_of, kvc_code_name(rv));
	ret->at = kvc_scan_revision(it);
	kvc_scan_close(it);
	kvc_close(c);
}

static void scan_free(struct scan *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free(s->it[i].k);
		free(s->it[i].v);
	}
	free(s->it);
}

static void scan_equal(const struct scan *a, const struct scan *b, const char *what)
{
	if (a->n != b->n)
		fail_msg("%s: %zu items against %zu", what, a->n, b->n);
	for (size_t i = 0; i < a->n; i++) {
		const struct item *x = &a->it[i], *y = &b->it[i];
		if (x->kl != y->kl || memcmp(x->k, y->k, x->kl) != 0 || x->vl != y->vl ||
		    memcmp(x->v, y->v, x->vl) != 0 || x->version != y->version)
			fail_msg("%s: item %zu differs: %.*s@%" PRIu64 " against %.*s@%" PRIu64,
			         what, i, (int)x->kl, x->k, x->version, (int)y->kl, y->k,
			         y->version);
	}
}

static const char *kvd_bin(void)
{
	const char *bin = getenv("KVD_BIN");

	return bin ? bin : "./build/daemon/kvd";
}

/* kvd --restore DIR --tenant NAME --data-dir|--device WHERE [--force]: its
 * exit status. */
static int run_restore(const char *dir, const char *name, const char *flag, const char *where,
                       bool force, const char *log)
{
	char cmd[4096];
	int st;

	snprintf(cmd, sizeof(cmd), "%s --restore '%s' --tenant %s %s '%s' %s >>'%s' 2>&1",
	         kvd_bin(), dir, name, flag, where, force ? "--force" : "", log);
	st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static bool file_has(const char *path, const char *text)
{
	FILE *f = fopen(path, "r");
	char line[1024];
	bool found = false;

	if (f == NULL)
		return false;
	while (!found && fgets(line, sizeof(line), f) != NULL)
		found = strstr(line, text) != NULL;
	fclose(f);
	return found;
}

static void wait_written(uint64_t n, struct writer *wr)
{
	uint64_t t0 = h_now_ms();

	while (atomic_load(&written) < n) {
		if (wr->failed)
			fail_msg("writer: %s %s", kvc_code_name(wr->failed), wr->message);
		if (h_now_ms() - t0 > 30000)
			fail_msg("writer: %" PRIu64 " writes in 30 s", atomic_load(&written));
		poll(NULL, 0, 5);
	}
}

/* A on the data directory, or on the device img (a regular file that kvd
 * --format made); B on a data directory. */
static void backup_restore(const char *img)
{
	struct kvd_proc a, b;
	struct kvd_opts oa = {.config_text = "segment_size = 64K\n",
	                      .extra = {"--workers", "2", img ? "--device" : NULL, img}};
	struct kvd_opts ob = {.extra = {"--workers", "1"}};
	struct kvc_tenant_opts to = {.sync = KVC_SYNC_NONE, .history = 4};
	struct kvc_backup_result br;
	struct kvc_status st;
	struct kvc_call call = {.status = &st};
	struct kvc_tenant_info ti;
	struct writer wr = {0};
	struct scan sa, sa_old, sb, sb_old;
	char dir[1024], inside[1024], logb[1200], bdir[1024];
	pthread_t th;
	uint64_t old;
	kvc *c;

	assert_int_equal(kvd_start(&a, &oa), 0);
	c = open_client(a.surl, NULL);
	assert_non_null(c);
	if (kvc_tenant_create(c, &call, "w", &to) != 0)
		fail_msg("TenantCreate: %s", st.message);
	wr.url = a.surl;
	atomic_store(&stop_flag, false);
	atomic_store(&written, 0);
	assert_int_equal(pthread_create(&th, NULL, writer_main, &wr), 0);
	wait_written(WRITES_PRE, &wr);

	snprintf(dir, sizeof(dir), "%s/backup", a.dir);
	if (kvc_tenant_backup(c, &call, "w", dir, &br) != 0)
		fail_msg("backup: %s", st.message);
	{
		uint64_t at = atomic_load(&written);
		wait_written(at + WRITES_POST, &wr);
	}
	atomic_store(&stop_flag, true);
	pthread_join(th, NULL);
	if (wr.failed)
		fail_msg("writer: %s %s", kvc_code_name(wr.failed), wr.message);
	fprintf(stderr,
	        "backup at version %" PRIu64 ": %" PRIu64 " segments (%" PRIu64 " linked, %" PRIu64
	        " bytes), %" PRIu64 " bytes copied, %" PRIu64 " us\n",
	        br.version, br.segments, br.segments_linked, br.bytes_linked, br.bytes_copied,
	        br.elapsed_us);
	assert_true(br.version >= WRITES_PRE / 2);
	assert_true(br.segments >= 2);
	/* on the data directory's file system sealed segments are linked; a
	 * device's are copied */
	if (img == NULL)
		assert_true(br.segments_linked >= 1 && br.segments_linked < br.segments);
	else
		assert_int_equal(br.segments_linked, 0);

	/* refused: a directory that is not empty, one inside the data
	 * directory, a relative path */
	assert_int_equal(kvc_tenant_backup(c, &call, "w", dir, NULL), -KVC_FAILED_PRECONDITION);
	assert_non_null(strstr(st.message, "not empty"));
	snprintf(inside, sizeof(inside), "%s/tenants/x", a.data);
	if (img == NULL) {
		assert_int_equal(kvc_tenant_backup(c, &call, "w", inside, NULL),
		                 -KVC_INVALID_ARGUMENT);
		assert_non_null(strstr(st.message, "inside kvd's data directory"));
	} else {
		assert_int_equal(kvc_tenant_backup(c, &call, "w", img, NULL),
		                 -KVC_FAILED_PRECONDITION);
		assert_non_null(strstr(st.message, "not a directory"));
	}
	assert_int_equal(kvc_tenant_backup(c, &call, "w", "rel/dir", NULL), -KVC_INVALID_ARGUMENT);
	assert_int_equal(kvc_tenant_backup(c, &call, "nope", inside, NULL), -KVC_NOT_FOUND);

	/* A, as of V and as of an older version */
	assert_int_equal(kvc_tenant_info(c, &call, "w", &ti), 0);
	assert_true(ti.last_version > br.version); /* writes went on after the backup */
	kvc_close(c);
	old = br.version - br.version / 8;
	scan_all(a.surl, "w", br.version, &sa);
	scan_all(a.surl, "w", old, &sa_old);
	assert_true(sa.n > NKEYS / 2);
	assert_int_equal(kvd_stop(&a), 0);

	/* B: the backup restored as tenant r */
	assert_int_equal(kvd_start(&b, &ob), 0);
	assert_int_equal(kvd_stop(&b), 0);
	snprintf(logb, sizeof(logb), "%s/restore.log", b.dir);
	snprintf(bdir, sizeof(bdir), "%s", b.dir);
	assert_int_equal(run_restore(dir, "r", "--data-dir", b.data, false, logb), 0);
	assert_int_equal(run_restore(dir, "r", "--data-dir", b.data, false, logb), 1);
	assert_true(file_has(logb, "already exists"));
	assert_int_equal(run_restore(dir, "r", "--data-dir", b.data, true, logb), 0);
	assert_int_equal(run_restore(a.dir, "r2", "--data-dir", b.data, false, logb), 1);
	assert_true(file_has(logb, "not a whole backup"));
	kvd_cleanup(&b, true);
	ob.reuse_dir = bdir;
	assert_int_equal(kvd_start(&b, &ob), 0);
	/* B's tenant r, now and as of the older version */
	scan_all(b.surl, "r", 0, &sb);
	scan_all(b.surl, "r", old, &sb_old);
	c = open_client(b.surl, NULL);
	assert_non_null(c);
	assert_int_equal(kvc_tenant_info(c, &call, "r", &ti), 0);
	assert_true(ti.active);
	assert_int_equal(ti.last_version, br.version);
	kvc_close(c);
	scan_equal(&sa, &sb, "as of the backup's version");
	scan_equal(&sa_old, &sb_old, "as of an older version");
	assert_int_equal(sb.at, br.version);
	scan_free(&sb);
	scan_free(&sb_old);
	assert_int_equal(kvd_stop(&b), 0);
	kvd_cleanup(&b, false);
	if (img != NULL) {
		/* and back onto the device, beside the tenant it was taken of */
		char adir[1024];
		snprintf(adir, sizeof(adir), "%s", a.dir);
		snprintf(logb, sizeof(logb), "%s/restore.log", adir);
		assert_int_equal(run_restore(dir, "r", "--device", img, false, logb), 0);
		kvd_cleanup(&a, true);
		oa.reuse_dir = adir;
		assert_int_equal(kvd_start(&a, &oa), 0);
		scan_all(a.surl, "r", 0, &sb);
		scan_all(a.surl, "r", old, &sb_old);
		scan_equal(&sa, &sb, "on the device, as of the backup's version");
		scan_equal(&sa_old, &sb_old, "on the device, as of an older version");
		scan_free(&sb);
		scan_free(&sb_old);
		assert_int_equal(kvd_stop(&a), 0);
	}
	scan_free(&sa);
	scan_free(&sa_old);
	kvd_cleanup(&a, false);
}

static void test_backup_files(void **state)
{
	(void)state;
	backup_restore(NULL);
}

static void test_backup_device(void **state)
{
	char *tmp = tu_mkdtemp("backup-dev"), img[1024], cmd[2048];
	int fd, st;

	(void)state;
	snprintf(img, sizeof(img), "%s/img", tmp);
	fd = open(img, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 256ll << 20), 0);
	close(fd);
	snprintf(cmd, sizeof(cmd), "'%s' --format '%s' --extent-size 1M >/dev/null 2>&1", kvd_bin(),
	         img);
	st = system(cmd);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	backup_restore(img);
	tu_rmtree(tmp);
	free(tmp);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_backup_files),
	        cmocka_unit_test(test_backup_device),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
