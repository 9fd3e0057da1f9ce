/* test_store.c — tenants: create, list, info, drop; the tenants directory synced after each; passivation by request, idle time and memory budget with data intact; thousands of tenants under a low RLIMIT_NOFILE. */
#include "testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "io.h"

static struct tu_clock clk = {1700000000000ull};

static void sopts(struct kv_store_options *o)
{
	kv_store_options_init(o);
	o->base.clock = tu_clock_read;
	o->base.clock_arg = &clk;
	o->base.segment_size = 64 * 1024;
}

static void fill(kv_store *s, const char *tenant, int n, int tag)
{
	kv_tenant *t;
	char k[32], v[64];

	assert_int_equal(kv_store_get(s, tenant, &t), 0);
	for (int i = 0; i < n; i++) {
		snprintf(k, sizeof(k), "key-%06d", i);
		snprintf(v, sizeof(v), "%s-%d-%d", tenant, tag, i);
		assert_int_equal(kv_put(kv_tenant_db(t), k, strlen(k), v, strlen(v), NULL, NULL), 0);
	}
	kv_store_put(s, t);
}

static void verify(kv_store *s, const char *tenant, int n, int tag)
{
	kv_tenant *t;
	char k[32], v[64];

	assert_int_equal(kv_store_get(s, tenant, &t), 0);
	for (int i = 0; i < n; i++) {
		struct kv_value val;
		snprintf(k, sizeof(k), "key-%06d", i);
		snprintf(v, sizeof(v), "%s-%d-%d", tenant, tag, i);
		assert_int_equal(kv_get(kv_tenant_db(t), k, strlen(k), NULL, &val), 0);
		assert_int_equal(val.len, strlen(v));
		assert_memory_equal(val.data, v, val.len);
		kv_value_release(&val);
	}
	kv_store_put(s, t);
}

/* A name is all of its bytes: one with a NUL inside is none, whatever comes
 * before the NUL. */
static void test_name_valid_takes_a_length(void **state)
{
	static const char nul_dots[] = "nul\0/../../x", nul_plain[] = "nul\0zzz";
	char max[KV_TENANT_NAME_MAX + 2];

	(void)state;
	assert_true(kv_tenant_name_valid("nul", 3));
	assert_false(kv_tenant_name_valid(nul_dots, sizeof(nul_dots) - 1));
	assert_false(kv_tenant_name_valid(nul_plain, sizeof(nul_plain) - 1));
	assert_false(kv_tenant_name_valid("nul\0", 4));
	assert_false(kv_tenant_name_valid("", 0));
	assert_false(kv_tenant_name_valid(NULL, 3));
	assert_false(kv_tenant_name_valid(".x", 2));
	memset(max, 'a', sizeof(max));
	assert_true(kv_tenant_name_valid(max, KV_TENANT_NAME_MAX));
	assert_false(kv_tenant_name_valid(max, KV_TENANT_NAME_MAX + 1));
}

static void test_tenants(void **state)
{
	char *dir = tu_mkdtemp("store");
	struct kv_store_options o;
	struct kv_tenant_config c;
	struct kv_tenant_state *list;
	struct kv_tenant_info info;
	kv_store *s, *second;
	kv_tenant *t;
	size_t n;

	(void)state;
	sopts(&o);
	assert_int_equal(kv_store_open(dir, &o, &s), 0);
	assert_int_equal(kv_store_open(dir, &o, &second), KV_ELOCKED);
	/* default exists from the start */
	assert_int_equal(kv_store_list(s, &list, &n), 0);
	assert_int_equal(n, 1);
	assert_string_equal(list[0].name, "default");
	assert_false(list[0].active);
	free(list);

	kv_tenant_config_init(&c);
	c.sync = KV_SYNC_NONE;
	c.history_versions = 3;
	c.max_keys = 10;
	assert_int_equal(kv_store_create(s, "orders", &c), 0);
	assert_int_equal(kv_store_create(s, "orders", &c), -EEXIST);
	assert_int_equal(kv_store_create(s, "bad/name", &c), -EINVAL);
	assert_int_equal(kv_store_create(s, ".hidden", &c), -EINVAL);
	assert_int_equal(kv_store_create(s, "", &c), -EINVAL);
	assert_int_equal(kv_store_get(s, "nope", &t), -ENOENT);

	fill(s, "orders", 10, 1);
	/* the tenant's max_keys applies */
	assert_int_equal(kv_store_get(s, "orders", &t), 0);
	assert_int_equal(kv_put(kv_tenant_db(t), "eleven", 6, "x", 1, NULL, NULL), KV_EMAXKEYS);
	assert_int_equal(kv_tenant_config_of(t)->history_versions, 3);
	assert_string_equal(kv_tenant_name(t), "orders");
	/* in use: it cannot be passivated or dropped */
	assert_int_equal(kv_store_passivate(s, "orders"), -EBUSY);
	assert_int_equal(kv_store_drop(s, "orders"), -EBUSY);
	kv_store_put(s, t);

	assert_int_equal(kv_store_info(s, "orders", &info), 0);
	assert_true(info.active);
	assert_int_equal(info.stats.keys, 10);
	assert_true(info.stats.keydir_bytes > 0);
	assert_int_equal(info.activations, 1);
	assert_int_equal(info.config.sync, KV_SYNC_NONE);

	/* by request: passive, memory freed, data intact after activation */
	assert_int_equal(kv_store_passivate(s, "orders"), 0);
	assert_int_equal(kv_store_info(s, "orders", &info), 0);
	assert_false(info.active);
	assert_int_equal(info.stats.keydir_bytes, 0);
	assert_int_equal(info.stats.keys, 10);
	{
		uint64_t us = 0;
		assert_int_equal(kv_store_activate(s, "orders", &us), 0);
		assert_true(us > 0);
	}
	verify(s, "orders", 10, 1);
	assert_int_equal(kv_store_info(s, "orders", &info), 0);
	assert_int_equal(info.activations, 2);
	assert_true(info.last_activation_ms > 0);

	/* configuration and statistics survive a restart */
	assert_int_equal(kv_store_close(s), 0);
	assert_int_equal(kv_store_open(dir, &o, &s), 0);
	assert_int_equal(kv_store_info(s, "orders", &info), 0);
	assert_false(info.active);
	assert_int_equal(info.stats.keys, 10);
	assert_int_equal(info.config.history_versions, 3);
	assert_int_equal(info.config.max_keys, 10);
	assert_int_equal(info.activations, 2);
	verify(s, "orders", 10, 1);

	/* drop */
	assert_int_equal(kv_store_drop(s, "default"), -EPERM);
	assert_int_equal(kv_store_drop(s, "orders"), 0);
	assert_int_equal(kv_store_drop(s, "orders"), -ENOENT);
	assert_int_equal(kv_store_get(s, "orders", &t), -ENOENT);
	{
		char *p = tu_path(dir, "tenants/orders");
		assert_int_equal(tu_file_size(p), -1);
		free(p);
	}
	assert_int_equal(kv_store_list(s, &list, &n), 0);
	assert_int_equal(n, 1);
	free(list);
	assert_int_equal(kv_store_close(s), 0);

	/* auto-create when asked for */
	o.auto_create = true;
	assert_int_equal(kv_store_open(dir, &o, &s), 0);
	assert_int_equal(kv_store_get(s, "fresh", &t), 0);
	kv_store_put(s, t);
	assert_int_equal(kv_store_get(s, "bad name", &t), -EINVAL);
	assert_int_equal(kv_store_close(s), 0);
	tu_rmtree(dir);
	free(dir);
}

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

static char *read_text(const char *path)
{
	static char buf[4096];
	FILE *f = fopen(path, "r");
	size_t n;

	assert_non_null(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/* Opens the store over dir and checks that w is refused with a reason
 * containing `why`, while "a" is served with its data. */
static void expect_refused(const char *dir, const struct kv_store_options *o, const char *why)
{
	struct kv_tenant_state *list;
	struct kv_tenant_info info;
	char got[512];
	kv_store *s;
	kv_tenant *t;
	size_t n;

	assert_int_equal(kv_store_open(dir, o, &s), 0);
	verify(s, "a", 20, 1);
	assert_int_equal(kv_store_get(s, "w", &t), KV_EREFUSED);
	assert_int_equal(kv_store_activate(s, "w", NULL), KV_EREFUSED);
	assert_int_equal(kv_store_info(s, "w", &info), KV_EREFUSED);
	/* never created again over its files, not even by auto_create */
	assert_int_equal(kv_store_create(s, "w", NULL), -EEXIST);
	assert_int_equal(kv_store_why_refused(s, "w", got, sizeof(got)), 0);
	if (strstr(got, why) == NULL || strncmp(got, "tenants/w/TENANT: ", 18) != 0)
		fail_msg("why: '%s', want 'tenants/w/TENANT: ...%s...'", got, why);
	assert_int_equal(kv_store_why_refused(s, "a", got, sizeof(got)), -ENOENT);
	assert_int_equal(kv_store_list(s, &list, &n), 0);
	assert_int_equal(n, 3);
	assert_string_equal(list[2].name, "w");
	assert_true(list[2].refused);
	assert_false(list[0].refused || list[1].refused);
	free(list);
	assert_int_equal(kv_store_close(s), 0);
}

/* One tenant's damaged, missing or odd TENANT file takes down that tenant
 * alone: the store opens, the others are served, that one is refused with
 * the file (and line) named until the file is repaired — and its data is
 * still there then. */
static void test_damaged_tenant_file_refuses_that_tenant_only(void **state)
{
	char *dir = tu_mkdtemp("store"), *tenant, *tdir, *seg = NULL;
	char good[4096];
	struct kv_store_options o;
	struct kv_tenant_config c;
	struct kv_tenant_info info;
	kv_store *s;
	kv_tenant *t;
	struct {
		const char *text; /* replaces TENANT (NULL: good with one byte flipped) */
		const char *why;
	} cases[] = {
		{NULL, "checksum mismatch: line 11 says"},
		{"", "empty"},
		{"# kvd tenant configuration\n[tenant]\nhistory = 0\n", "line 3: 'history' = 0 is out of range"},
		{"[tenant]\nhistory = 4294967296\n", "line 2: 'history' = 4294967296 is out of range"},
		{"[tenant]\nhistory = 5\ngarbage line\n", "line 3: not INI: 'garbage line'"},
	};

	(void)state;
	sopts(&o);
	o.auto_create = true;
	tenant = tu_path(dir, "tenants/w/TENANT");
	tdir = tu_path(dir, "tenants/w");
	assert_int_equal(kv_store_open(dir, &o, &s), 0);
	kv_tenant_config_init(&c);
	c.history_versions = 5;
	assert_int_equal(kv_store_create(s, "w", &c), 0);
	assert_int_equal(kv_store_create(s, "a", NULL), 0);
	fill(s, "a", 20, 1);
	fill(s, "w", 20, 2);
	assert_int_equal(kv_store_close(s), 0);
	snprintf(good, sizeof(good), "%s", read_text(tenant));
	assert_non_null(strstr(good, "\ncrc32c = "));

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (cases[i].text == NULL) {
			write_text(tenant, good);
			tu_flip_byte(tenant, 30);
		} else {
			write_text(tenant, cases[i].text);
		}
		expect_refused(dir, &o, cases[i].why);
	}
	/* TENANT a directory: refused, not defaults */
	assert_int_equal(unlink(tenant), 0);
	assert_int_equal(mkdir(tenant, 0755), 0);
	expect_refused(dir, &o, "not a regular file (a directory)");
	assert_int_equal(rmdir(tenant), 0);
	/* TENANT missing beside the database: refused, not recreated */
	expect_refused(dir, &o, "no TENANT file, but the directory holds a database");

	/* repaired: served with its settings and data */
	write_text(tenant, good);
	assert_int_equal(kv_store_open(dir, &o, &s), 0);
	verify(s, "w", 20, 2);
	assert_int_equal(kv_store_info(s, "w", &info), 0);
	assert_int_equal(info.config.history_versions, 5);
	/* a TENANT written before the checksum line still loads */
	assert_int_equal(kv_store_close(s), 0);
	write_text(tenant, "# kvd tenant configuration\n[tenant]\nsync = always\n"
	                   "sync_interval_ms = 100\nhistory = 4\nttl_ms = 0\nmax_keys = 0\n");
	assert_int_equal(kv_store_open(dir, &o, &s), 0);
	assert_int_equal(kv_store_info(s, "w", &info), 0);
	assert_int_equal(info.config.history_versions, 4);
	verify(s, "w", 20, 2);
	/* a refused tenant can be dropped */
	assert_int_equal(kv_store_close(s), 0);
	write_text(tenant, "[tenant]\nhistory = 0\n");
	assert_int_equal(kv_store_open(dir, &o, &s), 0);
	assert_int_equal(kv_store_drop(s, "w"), 0);
	assert_int_equal(tu_file_size(tdir), -1);
	assert_int_equal(kv_store_get(s, "w", &t), 0); /* auto_create: a new, empty one */
	assert_int_equal(kv_get(kv_tenant_db(t), "key-000000", 10, NULL, NULL), KV_ENOTFOUND);
	kv_store_put(s, t);
	/* a directory that never got its TENANT (a creation cut short) and holds
	 * nothing is no tenant */
	assert_int_equal(kv_store_close(s), 0);
	free(seg);
	seg = tu_path(dir, "tenants/empty");
	assert_int_equal(mkdir(seg, 0755), 0);
	assert_int_equal(kv_store_open(dir, &o, &s), 0);
	assert_int_equal(kv_store_why_refused(s, "empty", good, sizeof(good)), -ENOENT);
	assert_int_equal(kv_store_info(s, "empty", &info), -ENOENT);
	assert_int_equal(kv_store_close(s), 0);
	tu_rmtree(dir);
	free(dir);
	free(tenant);
	free(tdir);
	free(seg);
}

/* The fsyncs the store and its databases make, by inode. */
struct syncs {
	ino_t ino[256];
	size_t n;
};

static void record_sync(void *arg, const struct kv_io_event *ev)
{
	struct syncs *y = arg;
	struct stat st;

	if (ev->type == KV_IO_EV_SYNC && y->n < 256 && fstat(ev->fd, &st) == 0)
		y->ino[y->n++] = st.st_ino;
}

static size_t syncs_of(const struct syncs *y, const char *path)
{
	struct stat st;
	size_t n = 0;

	assert_int_equal(stat(path, &st), 0);
	for (size_t i = 0; i < y->n; i++)
		n += y->ino[i] == st.st_ino;
	return n;
}

/* A tenant made or dropped is so durably before the call returns: the
 * tenants directory, which holds the tenant's entry, is synced after the
 * tenant's directory is made and after it is renamed away (a power cut
 * would otherwise take a created tenant with it, or bring a dropped one
 * back). */
static void test_create_and_drop_sync_the_directory(void **state)
{
	char *dir = tu_mkdtemp("storesync");
	char *tdir = tu_path(dir, "tenants");
	struct syncs y = {0};
	struct kv_io_fault f = {.record = record_sync, .arg = &y};
	struct kv_store_options o;
	kv_store *s;

	(void)state;
	sopts(&o);
	o.base.fault = &f;
	assert_int_equal(kv_store_open(dir, &o, &s), 0);
	y.n = 0;
	assert_int_equal(kv_store_create(s, "made", NULL), 0);
	assert_true(syncs_of(&y, tdir) >= 1);
	{
		/* and the tenant's own directory, which holds its TENANT file */
		char *p = tu_path(dir, "tenants/made");
		assert_true(syncs_of(&y, p) >= 1);
		free(p);
	}
	y.n = 0;
	assert_int_equal(kv_store_drop(s, "made"), 0);
	assert_true(syncs_of(&y, tdir) >= 1);
	assert_int_equal(kv_store_close(s), 0);
	tu_rmtree(dir);
	free(tdir);
	free(dir);
}

/* What the tenants directory held each time it was synced. */
struct dir_at_sync {
	const char *tdir;
	const char *watch[3]; /* paths looked up at each sync of tdir */
	bool seen[8][3];
	size_t n;
};

static void record_dir_at_sync(void *arg, const struct kv_io_event *ev)
{
	struct dir_at_sync *y = arg;
	struct stat st, dst;

	if (ev->type != KV_IO_EV_SYNC || y->n >= 8 || fstat(ev->fd, &st) != 0 ||
	    stat(y->tdir, &dst) != 0 || st.st_ino != dst.st_ino)
		return;
	for (int i = 0; i < 3; i++)
		y->seen[y->n][i] = y->watch[i] != NULL && stat(y->watch[i], &st) == 0;
	y->n++;
}

/* The order of the steps, seen from each sync of tenants/: TenantCreate
 * syncs it once the tenant's TENANT file is in place; TenantDrop syncs it
 * after the tenant was renamed to .dropped-NAME and before any of its
 * files is removed (a power cut between the removal and the sync would
 * otherwise bring back a tenant with files missing). */
static void test_drop_syncs_before_removing(void **state)
{
	char *dir = tu_mkdtemp("storeorder");
	char *tdir = tu_path(dir, "tenants");
	char *live = tu_path(dir, "tenants/made/TENANT");
	char *gone = tu_path(dir, "tenants/.dropped-made");
	char *gone_file = tu_path(dir, "tenants/.dropped-made/TENANT");
	struct dir_at_sync y = {.tdir = tdir};
	struct kv_io_fault f = {.record = record_dir_at_sync, .arg = &y};
	struct kv_store_options o;
	struct stat st;
	kv_store *s;

	(void)state;
	sopts(&o);
	o.base.fault = &f;
	assert_int_equal(kv_store_open(dir, &o, &s), 0);
	y.n = 0;
	y.watch[0] = live;
	assert_int_equal(kv_store_create(s, "made", NULL), 0);
	assert_true(y.n >= 1);
	assert_true(y.seen[y.n - 1][0]); /* the last sync covers the whole tenant */
	fill(s, "made", 100, 0);

	memset(y.seen, 0, sizeof(y.seen));
	y.n = 0;
	y.watch[0] = live;
	y.watch[1] = gone;
	y.watch[2] = gone_file;
	assert_int_equal(kv_store_drop(s, "made"), 0);
	assert_true(y.n >= 1);
	/* the first sync of tenants/ after the rename: the old name is gone, the
	 * renamed directory still holds its files */
	{
		size_t i = 0;
		while (i < y.n && y.seen[i][0])
			i++;
		assert_true(i < y.n);
		assert_false(y.seen[i][0]);
		assert_true(y.seen[i][1]);
		assert_true(y.seen[i][2]);
	}
	/* and when the call returns, the files are removed */
	assert_int_equal(stat(gone, &st), -1);
	assert_int_equal(kv_store_close(s), 0);
	tu_rmtree(dir);
	free(gone_file);
	free(gone);
	free(live);
	free(tdir);
	free(dir);
}

static void test_idle_and_budget(void **state)
{
	char *dir = tu_mkdtemp("idle");
	struct kv_store_options o;
	struct kv_store_stats st;
	struct kv_tenant_info info;
	kv_store *s;
	uint32_t passivated;
	char name[16];

	(void)state;
	sopts(&o);
	o.idle_timeout_s = 60;
	assert_int_equal(kv_store_open(dir, &o, &s), 0);
	for (int i = 0; i < 4; i++) {
		snprintf(name, sizeof(name), "t%d", i);
		assert_int_equal(kv_store_create(s, name, NULL), 0);
		fill(s, name, 2000, i);
		clk.ms += 1000;
	}
	assert_int_equal(kv_store_stats(s, &st), 0);
	assert_int_equal(st.active, 4);
	/* idle: t0 was last used 4 s ago; move on to 60 s after t1 */
	clk.ms += 57000;
	assert_int_equal(kv_store_maintain(s, &passivated), 0);
	assert_int_equal(passivated, 2); /* t0 and t1 */
	assert_int_equal(kv_store_info(s, "t0", &info), 0);
	assert_false(info.active);
	assert_int_equal(kv_store_info(s, "t2", &info), 0);
	assert_true(info.active);
	assert_true(info.idle_ms >= 58000);

	/* the memory budget: least recently used go first */
	verify(s, "t0", 2000, 0); /* t0 active again, most recently used */
	assert_int_equal(kv_store_stats(s, &st), 0);
	assert_int_equal(st.active, 3);
	kv_store_set_limits(s, st.keydir_bytes - 1, 0);
	assert_int_equal(kv_store_maintain(s, &passivated), 0);
	assert_int_equal(passivated, 1);
	assert_int_equal(kv_store_info(s, "t2", &info), 0);
	assert_false(info.active); /* t2 was the least recently used */
	assert_int_equal(kv_store_info(s, "t0", &info), 0);
	assert_true(info.active);
	assert_int_equal(kv_store_stats(s, &st), 0);
	assert_int_equal(st.active, 2);
	for (int i = 0; i < 4; i++) {
		snprintf(name, sizeof(name), "t%d", i);
		verify(s, name, 2000, i);
	}
	assert_int_equal(kv_store_close(s), 0);
	tu_rmtree(dir);
	free(dir);
}

/* Thousands of tenants with several segments each, under RLIMIT_NOFILE 128. */
static void test_low_nofile(void **state)
{
	/* about descriptors, not durability: on tmpfs when there is one, where
	 * the thousands of fsyncs of creating and passivating tenants are free */
	const char *old = getenv("TMPDIR");
	char *dir;

	if (access("/dev/shm", W_OK) == 0)
		setenv("TMPDIR", "/dev/shm", 1);
	dir = tu_mkdtemp("nofile");
	if (old)
		setenv("TMPDIR", old, 1);
	else
		unsetenv("TMPDIR");
	pid_t pid;
	int status;

	(void)state;
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct rlimit rl = {128, 128};
		struct kv_store_options o;
		struct kv_store_stats st;
		kv_store *s;
		char name[16], k[16], v[600];
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
			_exit(20);
		sopts(&o);
		o.base.segment_size = 4096;
		o.defaults.sync = KV_SYNC_NONE;
		if (kv_store_open(dir, &o, &s) != 0)
			_exit(21);
		memset(v, 'v', sizeof(v));
		for (int round = 0; round < 2; round++) {
			for (int i = 0; i < 1000; i++) {
				kv_tenant *t;
				snprintf(name, sizeof(name), "n%04d", i);
				if (round == 0 && kv_store_create(s, name, NULL) != 0)
					_exit(22);
				int grv = kv_store_get(s, name, &t);
				if (grv != 0) {
					fprintf(stderr, "get %s: %s (open files %zu)\n", name,
					        kv_strerror(grv), kv_open_segment_files());
					_exit(23);
				}
				for (int j = 0; j < (round == 0 ? 20 : 0); j++) {
					snprintf(k, sizeof(k), "k%02d", j);
					v[0] = (char)('a' + i % 26);
					if (kv_put(kv_tenant_db(t), k, strlen(k), v, sizeof(v), NULL,
					           NULL) != 0)
						_exit(24);
				}
				for (int j = 0; j < 20; j++) {
					struct kv_value val;
					snprintf(k, sizeof(k), "k%02d", j);
					if (kv_get(kv_tenant_db(t), k, strlen(k), NULL, &val) != 0)
						_exit(25);
					if (val.len != sizeof(v) || ((char *)val.data)[0] != 'a' + i % 26)
						_exit(26);
					kv_value_release(&val);
				}
				kv_store_put(s, t);
			}
		}
		if (kv_store_stats(s, &st) != 0 || st.tenants != 1001 || st.active > 10)
			_exit(27);
		if (kv_store_close(s) != 0)
			_exit(28);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	tu_rmtree(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_name_valid_takes_a_length),
		cmocka_unit_test(test_tenants),
		cmocka_unit_test(test_damaged_tenant_file_refuses_that_tenant_only),
		cmocka_unit_test(test_create_and_drop_sync_the_directory),
		cmocka_unit_test(test_drop_syncs_before_removing),
		cmocka_unit_test(test_idle_and_budget),
		cmocka_unit_test(test_low_nofile),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
