/* test_shared.c — a device shared by several nodes (engine/dev_shared.c,
 * docs/SCALEOUT.md): stores of different node numbers on one image at
 * once, claims with growing epochs, a tenant taken over from an owner that
 * crashed with its segment open and from one that is still running,
 * extents moving between the nodes' ranges, tombstones, the node locks,
 * and kvd --check's reading of every node's catalog. */
#include "testutil.h"

#include "crc.h"
#include "dev_layout.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <sys/wait.h>
#include <time.h>
#include <cmocka.h>

#define NODES 3

struct fx {
	char *dir;
	char *img;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct kv_dev_format_options o = {.extent_size = 1u << 20, .nodes = NODES};
	char err[256];
	int fd, rv;

	f->dir = tu_mkdtemp("shared");
	f->img = tu_path(f->dir, "dev.img");
	fd = open(f->img, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 96 << 20), 0);
	close(fd);
	rv = kv_dev_format(f->img, &o, err, sizeof(err));
	if (rv != 0)
		fprintf(stderr, "kv_dev_format: %s\n", err);
	assert_int_equal(rv, 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	tu_rmtree(f->dir);
	free(f->dir);
	free(f->img);
	free(f);
	return 0;
}

/* splitmix64 */
static uint64_t tu_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t g_cache_bytes = 1u << 20;

static int open_node(const char *img, uint32_t node, uint32_t grace_ms, kv_store **ret)
{
	struct kv_store_options o;

	kv_store_options_init(&o);
	o.device = img;
	o.device_cache_bytes = g_cache_bytes;
	o.device_node = node;
	o.device_grace_ms = grace_ms;
	o.busy_wait_ms = 2000;
	return kv_store_open(NULL, &o, ret);
}

static kv_store *node(const char *img, uint32_t n)
{
	kv_store *s;

	assert_int_equal(open_node(img, n, 1, &s), 0);
	return s;
}

static int put(kv_store *s, const char *tenant, const char *k, const char *v)
{
	kv_tenant *t;
	int rv;

	if ((rv = kv_store_get(s, tenant, &t)) != 0)
		return rv;
	rv = kv_put(kv_tenant_db(t), k, strlen(k), v, strlen(v), NULL, NULL);
	kv_store_put(s, t);
	return rv;
}

static int get(kv_store *s, const char *tenant, const char *k, char *buf, size_t cap)
{
	struct kv_value v;
	kv_tenant *t;
	int rv;

	if ((rv = kv_store_get(s, tenant, &t)) != 0)
		return rv;
	rv = kv_get(kv_tenant_db(t), k, strlen(k), NULL, &v);
	if (rv == 0) {
		assert_true(v.len < cap);
		memcpy(buf, v.data, v.len);
		buf[v.len] = '\0';
		kv_value_release(&v);
	}
	kv_store_put(s, t);
	return rv;
}

static void expect(kv_store *s, const char *tenant, const char *k, const char *want)
{
	char buf[1024];

	assert_int_equal(get(s, tenant, k, buf, sizeof(buf)), 0);
	assert_string_equal(buf, want);
}

/* CRC32C of every extent of node's range, in order. */
static uint32_t range_crc(const char *img, uint32_t node)
{
	struct dev_super sb;
	uint8_t *b = malloc(1u << 20);
	uint32_t crc = 0;
	int fd = open(img, O_RDONLY | O_CLOEXEC);

	assert_true(fd >= 0 && b != NULL);
	assert_int_equal(pread(fd, b, 4096, 0), 4096);
	assert_int_equal(dev_super_decode(b, &sb), 0);
	assert_int_equal(sb.max_nodes, NODES);
	for (uint32_t i = node - 1; i < sb.extent_count; i += NODES) {
		assert_int_equal(pread(fd, b, sb.extent_size, (off_t)dev_extent_off(&sb, i)),
		                 (ssize_t)sb.extent_size);
		crc = crc32c_extend(crc, b, sb.extent_size);
	}
	close(fd);
	free(b);
	return crc;
}

static void create(kv_store *s, const char *name, uint64_t epoch)
{
	assert_int_equal(kv_store_claim(s, name, epoch), 0);
	assert_int_equal(kv_store_create(s, name, NULL), 0);
}

static void on_item(void *arg, const struct kv_dev_check_item *it)
{
	(void)arg;
	printf("check: %s @%llu: %s%s\n", it->where, (unsigned long long)it->off, it->what,
	       it->damage ? "" : " (note)");
}

static void check_clean(const char *img)
{
	struct kv_dev_check_summary sum;

	assert_int_equal(kv_dev_check(img, on_item, NULL, &sum), 0);
	assert_int_equal(sum.damaged, 0);
}

/* Nodes open the device together; the same node number twice, a format
 * and a check do not while one runs; an unshared device needs no claim. */
static void test_nodes_and_locks(void **state)
{
	struct fx *f = *state;
	struct kv_dev_format_options o = {.extent_size = 1u << 20, .force = true};
	struct kv_store_stats st;
	kv_store *a, *b, *x;
	char err[256];

	a = node(f->img, 1);
	b = node(f->img, 2);
	assert_true(kv_store_shared(a));
	assert_int_equal(open_node(f->img, 1, 1, &x), KV_ELOCKED);
	assert_int_equal(open_node(f->img, NODES + 1, 1, &x), -EINVAL);
	assert_int_equal(kv_dev_format(f->img, &o, err, sizeof(err)), KV_ELOCKED);
	assert_int_equal(kv_dev_check(f->img, on_item, NULL, NULL), KV_ELOCKED);
	assert_int_equal(kv_store_stats(b, &st), 0);
	assert_int_equal(st.device_nodes, NODES);
	assert_int_equal(st.device_node, 2);
	/* no "default" until a node claims it; an unclaimed tenant is not made */
	assert_int_equal(put(a, "default", "k", "v"), -ENOENT);
	assert_int_equal(kv_store_create(a, "t", NULL), -ESTALE);
	assert_int_equal(kv_store_claim(a, "default", 5), 0);
	assert_int_equal(put(a, "default", "k", "v"), 0);
	assert_int_equal(kv_store_close(a), 0);
	assert_int_equal(kv_store_close(b), 0);
	check_clean(f->img);

	/* a device for one node: no claims needed, default made at open */
	assert_int_equal(kv_dev_format(f->img, &o, err, sizeof(err)), 0);
	a = node(f->img, 1);
	assert_false(kv_store_shared(a));
	assert_int_equal(kv_store_claim(a, "default", 1), 0);
	assert_int_equal(put(a, "default", "k", "v"), 0);
	assert_int_equal(kv_store_device_tenants(a, NULL, NULL), -ENOTSUP);
	assert_int_equal(kv_store_close(a), 0);
}

/* Handover: node 1 writes, gives the tenant up, node 2 claims it under a
 * higher epoch and serves every write; an older epoch is refused; node 1
 * cannot write it any more, and after a restart it is not node 1's. */
static void test_handover(void **state)
{
	struct fx *f = *state;
	struct kv_dev_tenant dt;
	kv_store *a = node(f->img, 1), *b = node(f->img, 2);
	char k[32], v[64];
	uint32_t crc1;

	create(a, "t", 10);
	for (int i = 0; i < 3000; i++) { /* several segments of 1 MiB extents */
		snprintf(k, sizeof(k), "k%05d", i);
		snprintf(v, sizeof(v), "a-%05d-%040d", i, i);
		assert_int_equal(put(a, "t", k, v), 0);
	}
	assert_int_equal(kv_store_device_find(b, "t", &dt), 0);
	assert_int_equal(dt.node, 1);
	assert_int_equal(dt.epoch, 10);
	assert_int_equal(kv_store_passivate(a, "t"), 0);
	assert_int_equal(kv_store_disown(a, "t"), 0);
	assert_int_equal(put(a, "t", "late", "x"), -ESTALE); /* its activation cannot seal */
	crc1 = range_crc(f->img, 1);

	assert_int_equal(kv_store_claim(b, "t", 10), -ESTALE);
	assert_int_equal(kv_store_claim(b, "t", 11), 0);
	expect(b, "t", "k00000", "a-00000-0000000000000000000000000000000000000000");
	expect(b, "t", "k02999", "a-02999-0000000000000000000000000000000000002999");
	assert_int_equal(put(b, "t", "k00001", "b"), 0);
	expect(b, "t", "k00001", "b");
	/* S2: node 2 wrote none of node 1's extents, not even the last segment
	 * node 1 sealed cleanly (which node 1 itself would reopen) */
	assert_int_equal(kv_store_passivate(b, "t"), 0);
	assert_int_equal(range_crc(f->img, 1), crc1);
	assert_int_equal(kv_store_device_find(a, "t", &dt), 0);
	assert_int_equal(dt.node, 2);
	assert_int_equal(dt.epoch, 11);
	/* and back, with what node 2 wrote */
	assert_int_equal(kv_store_passivate(b, "t"), 0);
	assert_int_equal(kv_store_disown(b, "t"), 0);
	assert_int_equal(kv_store_claim(a, "t", 12), 0);
	expect(a, "t", "k00001", "b");
	expect(a, "t", "k02999", "a-02999-0000000000000000000000000000000000002999");
	assert_int_equal(kv_store_close(a), 0);
	assert_int_equal(kv_store_close(b), 0);

	/* node 2 restarted: its older entry lost and is gone */
	b = node(f->img, 2);
	{
		struct kv_tenant_state *ls;
		size_t n;
		assert_int_equal(kv_store_list(b, &ls, &n), 0);
		for (size_t i = 0; i < n; i++)
			assert_string_not_equal(ls[i].name, "t");
		free(ls);
	}
	assert_int_equal(kv_store_close(b), 0);
	check_clean(f->img);
}

/* An owner killed with its segment open: the new owner finds every synced
 * write (the open segment sealed where its records end) and appends only
 * to extents of its own range. */
static void test_takeover_after_crash(void **state)
{
	struct fx *f = *state;
	kv_store *b;
	pid_t pid;
	int st;

	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		kv_store *a;
		char k[32];
		if (open_node(f->img, 1, 1, &a) != 0 || kv_store_claim(a, "t", 20) != 0 ||
		    kv_store_create(a, "t", NULL) != 0)
			_exit(2);
		for (int i = 0; i < 1500; i++) {
			snprintf(k, sizeof(k), "k%05d", i);
			if (put(a, "t", k, "synced-value-of-some-length") != 0)
				_exit(3);
		}
		_exit(0); /* no close: the last segment stays open */
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);

	b = node(f->img, 3);
	assert_int_equal(kv_store_claim(b, "t", 21), 0);
	for (int i = 0; i < 1500; i++) {
		char k[32];
		snprintf(k, sizeof(k), "k%05d", i);
		expect(b, "t", k, "synced-value-of-some-length");
	}
	assert_int_equal(put(b, "t", "after", "b"), 0);
	assert_int_equal(kv_store_close(b), 0);
	b = node(f->img, 3);
	assert_int_equal(kv_store_claim(b, "t", 22), 0);
	expect(b, "t", "after", "b");
	expect(b, "t", "k01499", "synced-value-of-some-length");
	assert_int_equal(kv_store_close(b), 0);
	check_clean(f->img);
}

/* A stale owner that still has the tenant open and keeps appending after
 * another node took it over: none of its late writes is ever read by the
 * new owner, and once it needs a new extent it learns it lost the tenant. */
static void test_stale_owner(void **state)
{
	struct fx *f = *state;
	kv_store *a = node(f->img, 1), *b = node(f->img, 2);
	kv_tenant *ta;
	char k[32], buf[64], big[400];
	int rv = 0, i;

	create(a, "t", 30);
	assert_int_equal(put(a, "t", "before", "a"), 0);
	assert_int_equal(kv_store_get(a, "t", &ta), 0); /* held: node 1 still serves it */
	assert_int_equal(kv_store_claim(b, "t", 31), 0);
	expect(b, "t", "before", "a");
	assert_int_equal(put(b, "t", "new", "b"), 0);
	/* node 1's late writes: into its own open segment, then refused */
	memset(big, 's', sizeof(big));
	for (i = 0; i < 5000 && rv == 0; i++) { /* 2 MB: more than its open extent holds */
		snprintf(k, sizeof(k), "late%05d", i);
		rv = kv_put(kv_tenant_db(ta), k, strlen(k), big, sizeof(big), NULL, NULL);
	}
	assert_int_equal(rv, -ESTALE);
	assert_true(i > 1); /* some landed in its open segment first */
	kv_store_put(a, ta);
	for (int j = 0; j < i; j += 97) {
		snprintf(k, sizeof(k), "late%05d", j);
		assert_int_equal(get(b, "t", k, buf, sizeof(buf)), KV_ENOTFOUND);
	}
	expect(b, "t", "new", "b");
	assert_int_equal(put(b, "t", "late00000", "b"), 0);
	/* and after node 2 reopens from the device, still none */
	assert_int_equal(kv_store_close(b), 0);
	b = node(f->img, 2);
	assert_int_equal(kv_store_claim(b, "t", 32), 0);
	expect(b, "t", "late00000", "b");
	assert_int_equal(get(b, "t", "late00001", buf, sizeof(buf)), KV_ENOTFOUND);
	expect(b, "t", "before", "a");
	kv_store_close(a);
	assert_int_equal(kv_store_close(b), 0);
	check_clean(f->img);
}

/* Extents of node 1's range that node 2 merged away come back to node 1
 * after the grace period; a dropped tenant stays dropped whatever older
 * entry another node still has. */
static void test_extents_and_drop(void **state)
{
	struct fx *f = *state;
	kv_store *a = node(f->img, 1), *b;
	struct kv_store_stats s0, s1;
	struct kv_dev_tenant dt;
	kv_tenant *t;
	char k[32], big[400];
	uint64_t until, epoch = 50;

	create(a, "t", 40);
	memset(big, 'v', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	for (int i = 0; i < 8000; i++) { /* 3 MB over 500 keys: 3 extents or more */
		snprintf(k, sizeof(k), "k%05d", i % 500);
		assert_int_equal(put(a, "t", k, big), 0);
	}
	assert_int_equal(kv_store_stats(a, &s0), 0);
	assert_int_equal(kv_store_passivate(a, "t"), 0);
	assert_int_equal(kv_store_disown(a, "t"), 0);

	b = node(f->img, 2);
	assert_int_equal(kv_store_claim(b, "t", 41), 0);
	assert_int_equal(kv_store_get(b, "t", &t), 0);
	assert_int_equal(kv_merge(kv_tenant_db(t)), 0);
	kv_store_put(b, t);
	assert_int_equal(kv_store_passivate(b, "t"), 0);
	expect(b, "t", "k00499", big);

	/* node 1 sees them free once it looks again (an allocation) and the
	 * grace period (1 ms here) passed */
	until = now_ms() + 5000;
	do {
		create(a, "u", epoch++);
		assert_int_equal(put(a, "u", "x", "y"), 0);
		assert_int_equal(kv_store_stats(a, &s1), 0);
		if (s1.device_extents_free > s0.device_extents_free)
			break;
		assert_int_equal(kv_store_passivate(a, "u"), 0);
		assert_int_equal(kv_store_drop(a, "u"), 0);
	} while (now_ms() < until);
	assert_true(s1.device_extents_free > s0.device_extents_free);

	/* drop on node 2: node 1's older entry of "t" never brings it back */
	assert_int_equal(kv_store_drop(b, "t"), 0);
	assert_int_equal(kv_store_device_find(a, "t", &dt), -ENOENT);
	assert_int_equal(kv_store_close(a), 0);
	a = node(f->img, 1);
	assert_int_equal(kv_store_device_find(a, "t", &dt), -ENOENT);
	assert_int_equal(kv_store_claim(a, "t", 60), 0);
	assert_int_equal(put(a, "t", "k", "v"), -ENOENT);
	assert_int_equal(kv_store_close(a), 0);
	assert_int_equal(kv_store_close(b), 0);
	check_clean(f->img);
}

/* A tenant handed back and forth gets a new segment at every change of
 * owner (another node's segment is never reopened), each in an extent of
 * its own: once four are less than a quarter full, a merge is due, and it
 * packs them. */
static void test_small_segments_merged(void **state)
{
	struct fx *f = *state;
	kv_store *s[2] = {node(f->img, 1), node(f->img, 2)};
	struct kv_stats st;
	kv_tenant *t;
	uint64_t epoch = 70;
	char k[32];
	int r;

	create(s[0], "t", epoch++);
	for (r = 0; r < 6; r++) {
		kv_store *o = s[r % 2], *n = s[(r + 1) % 2];
		snprintf(k, sizeof(k), "round%d", r);
		assert_int_equal(put(o, "t", k, "v"), 0);
		assert_int_equal(kv_store_passivate(o, "t"), 0);
		assert_int_equal(kv_store_disown(o, "t"), 0);
		assert_int_equal(kv_store_claim(n, "t", epoch++), 0);
	}
	/* s[0] owns it again; its database is open (the claim opened it) */
	assert_int_equal(kv_store_get(s[0], "t", &t), 0);
	assert_int_equal(kv_stats(kv_tenant_db(t), &st), 0);
	assert_true(st.segments >= 6);
	/* what kvd's maintenance (or a database's background thread) asks */
	assert_int_equal(kv_tick(kv_tenant_db(t)), 1);
	assert_int_equal(kv_merge(kv_tenant_db(t)), 0);
	assert_int_equal(kv_stats(kv_tenant_db(t), &st), 0);
	assert_true(st.segments <= 3);
	assert_int_equal(kv_tick(kv_tenant_db(t)), 0); /* packed: not due again */
	kv_store_put(s[0], t);
	for (r = 0; r < 6; r++) {
		snprintf(k, sizeof(k), "round%d", r);
		expect(s[0], "t", k, "v");
	}
	assert_int_equal(kv_store_close(s[0]), 0);
	assert_int_equal(kv_store_close(s[1]), 0);
	check_clean(f->img);
}

/* S6: node 1 reads a tenant (its cache keeps the blocks), node 2 takes it
 * back, merges, and reuses its freed extents for new segments; when node 1
 * takes it again, it reads what the extents hold now, not what it cached. */
static void test_cache_after_move(void **state)
{
	struct fx *f = *state;
	kv_store *a, *b;
	uint64_t epoch = 200;
	kv_tenant *t;
	char k[32], v[512];
	int i, r;

	g_cache_bytes = 64u << 20; /* all of what node 1 reads stays cached */
	a = node(f->img, 1);
	b = node(f->img, 2);
	g_cache_bytes = 1u << 20;
	create(b, "t", epoch++);
	for (r = 0; r < 12; r++) { /* node 2 comes round its range again */
		/* node 2 writes (and overwrites: the merge has garbage to drop) */
		for (i = 0; i < 3000; i++) {
			snprintf(k, sizeof(k), "k%04d", i % 1000);
			snprintf(v, sizeof(v), "r%d-%05d-%0400d", r, i, i); /* 1.2 MB a round */
			assert_int_equal(put(b, "t", k, v), 0);
		}
		assert_int_equal(kv_store_get(b, "t", &t), 0);
		assert_int_equal(kv_merge(kv_tenant_db(t)), 0);
		kv_store_put(b, t);
		assert_int_equal(kv_store_passivate(b, "t"), 0);
		assert_int_equal(kv_store_disown(b, "t"), 0);
		/* node 1 takes it and reads all of it, through its cache */
		assert_int_equal(kv_store_claim(a, "t", epoch++), 0);
		for (i = 2000; i < 3000; i++) {
			snprintf(k, sizeof(k), "k%04d", i % 1000);
			snprintf(v, sizeof(v), "r%d-%05d-%0400d", r, i, i);
			expect(a, "t", k, v);
		}
		assert_int_equal(kv_store_passivate(a, "t"), 0);
		assert_int_equal(kv_store_disown(a, "t"), 0);
		assert_int_equal(kv_store_claim(b, "t", epoch++), 0);
	}
	assert_int_equal(kv_store_close(a), 0);
	assert_int_equal(kv_store_close(b), 0);
	check_clean(f->img);
}

/* A tenant moved between the three nodes many times, each owner writing,
 * merging now and then, and ending by a crash (no close) or cleanly, with
 * extents freed by one node reused by another at once (1 ms of grace):
 * every write of every earlier owner reads back, the device checks clean. */
static void test_moves(void **state)
{
	struct fx *f = *state;
	uint64_t seed = tu_seed("moves", 7), epoch = 100;
	int rounds = 40, prev = -1;

	for (int r = 0; r < rounds; r++) {
		int n = (int)(tu_next(&seed) % NODES), st;
		bool crash = tu_next(&seed) % 2 == 0, merge = tu_next(&seed) % 3 == 0;
		pid_t pid;
		if (n == prev)
			n = (n + 1) % NODES;
		prev = n;
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			kv_store *s;
			kv_tenant *t;
			char k[32], v[64], buf[1024];
			if (open_node(f->img, (uint32_t)n + 1, 1, &s) != 0)
				_exit(2);
			if (kv_store_claim(s, "t", epoch + (uint64_t)r) != 0)
				_exit(3);
			if (r == 0 && kv_store_create(s, "t", NULL) != 0)
				_exit(4);
			/* every earlier round's writes */
			for (int q = 0; q < r; q++)
				for (int i = 0; i < 200; i += 37) {
					snprintf(k, sizeof(k), "r%03d-%03d", q, i);
					snprintf(v, sizeof(v), "value-%03d-%03d-%040d", q, i, q * i);
					if (get(s, "t", k, buf, sizeof(buf)) != 0 || strcmp(buf, v) != 0) {
						fprintf(stderr, "round %d: %s lost\n", r, k);
						_exit(5);
					}
				}
			for (int i = 0; i < 200; i++) {
				snprintf(k, sizeof(k), "r%03d-%03d", r, i);
				snprintf(v, sizeof(v), "value-%03d-%03d-%040d", r, i, r * i);
				if (put(s, "t", k, v) != 0)
					_exit(6);
				/* and overwrites, so merges have something to drop */
				if (put(s, "t", "hot", v) != 0)
					_exit(7);
			}
			if (merge) {
				if (kv_store_get(s, "t", &t) != 0 || kv_merge(kv_tenant_db(t)) != 0)
					_exit(8);
				kv_store_put(s, t);
			}
			if (crash)
				_exit(0); /* no close: its segment stays open */
			_exit(kv_store_close(s) == 0 ? 0 : 9);
		}
		assert_int_equal(waitpid(pid, &st, 0), pid);
		assert_true(WIFEXITED(st));
		if (WEXITSTATUS(st) != 0)
			fail_msg("round %d (node %d, %s%s): child exit %d", r, n + 1,
			         crash ? "crash" : "clean", merge ? ", merge" : "", WEXITSTATUS(st));
		check_clean(f->img);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_nodes_and_locks, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_handover, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_takeover_after_crash, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_stale_owner, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_extents_and_drop, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_small_segments_merged, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_moves, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_cache_after_move, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
