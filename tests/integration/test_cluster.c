/* test_cluster.c — kvd's cluster mode against a real etcd and two real kvd nodes (own data
 * directories, own ports): a tenant is claimed on first use, the other node answers MOVED and
 * libkvclient follows it (stream and nng), release then adopt moves it with a larger epoch, adopt
 * is refused while the owner lives, and a node whose etcd stops fences itself within lease_ttl and
 * serves again only with a new epoch. */
/*
 * etcd comes from etcd_proc.h (a real one; without it the test fails). The
 * nodes are kvd-test started through harness/kvdrun.h with tcp://,
 * kv+ipc:// and kv+tcp:// listeners; each test uses a cluster name of its
 * own, so the keys of one never meet another's. The owner keys are read
 * with daemon/etcd.h to check what kvd wrote. Nothing waits by sleeping:
 * fencing and recovery are polled for with deadlines.
 */
#include "etcd.h"
#include "etcd_proc.h"
#include "harness.h"
#include "kvclient.h"

#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>

#include <cmocka.h> /* after the headers it needs */

#define CALL_MS 5000

static struct etcd_proc g_etcd = {.pid = -1};

struct node {
	struct kvd_run r;
	char *dir;
	char id[32];
};

static int group_setup(void **state)
{
	(void)state;
	return etcd_proc_start(&g_etcd) == 0 ? 0 : -1;
}

static int group_teardown(void **state)
{
	(void)state;
	etcd_proc_stop(&g_etcd);
	etcd_global_cleanup();
	return 0;
}

/* Starts node `id` of `cluster` (lease_ttl ttl; 0: the default) and waits
 * until it answers Health. */
static void node_start(struct node *n, const char *cluster, const char *id, int ttl)
{
	char conf[512], err[1024];
	const char *bin = getenv("KVD_BIN");

	memset(n, 0, sizeof(*n));
	snprintf(n->id, sizeof(n->id), "%s", id);
	assert_non_null(n->dir = tu_mkdtemp("kvd-cluster"));
	snprintf(conf, sizeof(conf),
	         "etcd = %s\ncluster = %s\nnode_id = %s\nauto_create = false\n%s%.0d\n", g_etcd.url,
	         cluster, id, ttl > 0 ? "lease_ttl = " : "", ttl);
	n->r.bin = bin != NULL ? bin : "./build/daemon/kvd-test";
	n->r.dir = n->dir;
	n->r.config_text = conf;
	n->r.listen = KVD_RUN_LISTEN(KVD_RUN_TCP) | KVD_RUN_LISTEN(KVD_RUN_KVIPC) |
	              KVD_RUN_LISTEN(KVD_RUN_KVTCP);
	n->r.workers = 2;
	if (kvd_run_start(&n->r, err, sizeof(err)) != 0)
		fail_msg("node %s: %s", id, err);
	h_track(n->r.pid, true);
}

/* Whether the log at path has a line containing text. */
static bool log_has(const char *path, const char *text)
{
	struct kvd_proc k = {0};

	h_copy(k.log, sizeof(k.log), path);
	return h_log_has(&k, text);
}

/* SIGTERM: kvd must exit 0 (a sanitizer's report fails it too). */
static void node_stop(struct node *n)
{
	char err[1024];
	int rv = 0;

	if (n->r.pid > 0) {
		pid_t pid = n->r.pid;
		rv = kvd_run_stop(&n->r, err, sizeof(err));
		h_track(pid, false);
	}
	if (rv != 0 || log_has(n->r.log, "runtime error") || log_has(n->r.log, "Sanitizer")) {
		struct kvd_proc k = {0};
		h_copy(k.log, sizeof(k.log), n->r.log);
		h_dump_log(&k);
		fail_msg("node %s did not stop cleanly: %s", n->id, rv != 0 ? err : "see its log");
	}
	if (n->dir != NULL && getenv("KVTEST_KEEP") == NULL)
		tu_rmtree(n->dir);
	free(n->dir);
	n->dir = NULL;
}

static kvc *node_client(const struct node *n, enum kvd_run_kind kind, const char *tenant)
{
	struct kvc_options o;
	kvc *c = NULL;

	kvc_options_init(&o);
	o.endpoint = n->r.url[kind];
	o.tenant = tenant;
	o.timeout_ms = CALL_MS;
	assert_int_equal(kvc_open(&o, &c), 0);
	return c;
}

/* The owner key of tenant in cluster: its value and create revision;
 * false when there is none. */
static bool owner_of(const char *cluster, const char *tenant, char *value, size_t len,
                     int64_t *ret_epoch)
{
	struct etcd *e = NULL;
	struct etcd_kv kv = {0};
	char key[256];
	int rv;

	snprintf(key, sizeof(key), "/kvd/%s/tenants/%s/owner", cluster, tenant);
	assert_int_equal(etcd_open(g_etcd.url, CALL_MS, &e), 0);
	rv = etcd_get(e, key, strlen(key), &kv, NULL);
	if (rv != 0 && rv != ETCD_ABSENT)
		fail_msg("etcd_get %s: %d %s", key, rv, etcd_errmsg(e));
	etcd_close(e);
	if (rv == ETCD_ABSENT)
		return false;
	snprintf(value, len, "%s", kv.value);
	*ret_epoch = kv.create_rev;
	etcd_kv_clear(&kv);
	return true;
}

static void put_str(kvc *c, const char *tenant, const char *k, const char *v, int want)
{
	struct kvc_call call = {.tenant = tenant};
	struct kvc_status st;
	int rv;

	call.status = &st;
	rv = kvc_put(c, &call, k, strlen(k), v, strlen(v), NULL, NULL);
	if (rv != want)
		fail_msg("put %s/%s: %d (%s), wanted %d", tenant, k, rv, st.message, want);
}

static void get_str(kvc *c, const char *tenant, const char *k, const char *want)
{
	struct kvc_call call = {.tenant = tenant};
	struct kvc_status st;
	struct kvc_value v;
	int rv;

	call.status = &st;
	rv = kvc_get(c, &call, k, strlen(k), 0, 0, &v);
	if (rv != 0)
		fail_msg("get %s/%s: %d (%s)", tenant, k, rv, st.message);
	assert_int_equal(v.len, strlen(want));
	assert_memory_equal(v.data, want, v.len);
	kvc_value_free(&v);
}

/* A raw Get of tenant/k on c: the reply's status, and its result's
 * address and node when it is MOVED. */
static int raw_get(kvc *c, const char *tenant, const char *k, char *addr, size_t alen, char *node,
                   size_t nlen)
{
	struct h_req q;
	struct h_reply r;
	void *reply = NULL;
	size_t n = 0;
	int st;

	h_req_begin(&q, "Get", tenant, 77, 1, 0);
	mp_kv_bin(&q.pk, "key", k, strlen(k));
	assert_int_equal(kvc_raw(c, CALL_MS, q.sb.data, q.sb.size, &reply, &n), 0);
	msgpack_sbuffer_destroy(&q.sb);
	assert_int_equal(h_parse(reply, n, &r), 0);
	st = (int)r.status;
	if (st == KVC_MOVED) {
		const msgpack_object *a, *nd;
		assert_non_null(r.result);
		assert_non_null(a = mp_map_get(r.result, "address"));
		assert_non_null(nd = mp_map_get(r.result, "node"));
		assert_int_equal(mp_str_copy(a, addr, alen), 0);
		assert_int_equal(mp_str_copy(nd, node, nlen), 0);
		assert_int_equal(r.id, 77);
	}
	h_reply_free(&r);
	free(reply);
	return st;
}

/* ---- claim on first use, MOVED, redirects followed ---- */

static atomic_int g_async_rv = 1;

static void async_done(void *arg, const struct kvc_async_result *res)
{
	(void)arg;
	atomic_store(&g_async_rv, res->rv);
}

static void test_claim_and_redirect(void **state)
{
	struct node a, b;
	kvc *ca, *cb, *cbn;
	char value[512], want[1100], addr[256], node[64];
	int64_t epoch = 0;
	struct kvc_tenant_entry *list = NULL;
	size_t nlist = 0;

	(void)state;
	node_start(&a, "claim", "a", 0);
	node_start(&b, "claim", "b", 0);
	ca = node_client(&a, KVD_RUN_KVTCP, "t1");
	cb = node_client(&b, KVD_RUN_KVTCP, "t1");
	cbn = node_client(&b, KVD_RUN_TCP, "t1"); /* nng */

	/* first use on a: a takes the tenant, its owner key says so */
	assert_false(owner_of("claim", "t1", value, sizeof(value), &epoch));
	assert_int_equal(kvc_tenant_create(ca, NULL, "t1", NULL), 0);
	assert_true(owner_of("claim", "t1", value, sizeof(value), &epoch));
	snprintf(want, sizeof(want), "a %s", a.r.url[KVD_RUN_KVTCP]);
	assert_string_equal(value, want);
	assert_true(epoch > 0);
	put_str(ca, "t1", "k", "from-a", 0);

	/* b does not serve it: MOVED with a's id and address */
	assert_int_equal(raw_get(cb, "t1", "k", addr, sizeof(addr), node, sizeof(node)), KVC_MOVED);
	assert_string_equal(addr, a.r.url[KVD_RUN_KVTCP]);
	assert_string_equal(node, "a");

	/* libkvclient follows it: over the stream transport and over nng */
	get_str(cb, "t1", "k", "from-a");
	get_str(cbn, "t1", "k", "from-a");
	put_str(cb, "t1", "k2", "via-b", 0);
	put_str(cbn, "t1", "k3", "via-b-nng", 0);
	get_str(ca, "t1", "k2", "via-b");
	get_str(ca, "t1", "k3", "via-b-nng");
	/* the owner did not change: still a, same epoch */
	{
		int64_t again = 0;
		assert_true(owner_of("claim", "t1", value, sizeof(value), &again));
		assert_int_equal(again, epoch);
	}
	/* several endpoints: the first refuses connections, the second (b)
	 * answers MOVED, followed to a */
	{
		struct kvc_options o;
		kvc *cs = NULL;
		char eps[2200];
		int dead = h_free_port();
		assert_true(dead > 0);
		snprintf(eps, sizeof(eps), "kv+tcp://127.0.0.1:%d,%s", dead,
		         b.r.url[KVD_RUN_KVTCP]);
		kvc_options_init(&o);
		o.endpoint = eps;
		o.tenant = "t1";
		o.timeout_ms = CALL_MS;
		assert_int_equal(kvc_open(&o, &cs), 0);
		get_str(cs, "t1", "k", "from-a");
		kvc_close(cs);
		o.endpoint = "kv+tcp://127.0.0.1:1,";
		assert_int_equal(kvc_open(&o, &cs), -KVC_INVALID_ARGUMENT);
	}
	/* an async call goes where the earlier calls found the tenant */
	{
		struct kvc_call call = {.tenant = "t1"};
		assert_int_equal(
		        kvc_put_async(cb, &call, "k4", 2, "async", 5, NULL, async_done, NULL), 0);
		kvc_drain(cb);
		assert_int_equal(atomic_load(&g_async_rv), 0);
		get_str(ca, "t1", "k4", "async");
	}
	/* and follows a MOVED itself: a new handle of b has no route yet */
	{
		struct kvc_call call = {.tenant = "t1"};
		kvc *fresh[2] = {node_client(&b, KVD_RUN_KVTCP, "t1"),
		                 node_client(&b, KVD_RUN_TCP, "t1")};
		for (int i = 0; i < 2; i++) {
			atomic_store(&g_async_rv, 1);
			assert_int_equal(kvc_put_async(fresh[i], &call, "k5", 2, i ? "n" : "s", 1,
			                               NULL, async_done, NULL),
			                 0);
			kvc_drain(fresh[i]);
			assert_int_equal(atomic_load(&g_async_rv), 0);
			get_str(ca, "t1", "k5", i ? "n" : "s");
			kvc_close(fresh[i]);
		}
	}
	/* a scan and a tenant's stats through b, followed to a too */
	{
		struct kvc_call call = {.tenant = "t1"};
		struct kvc_scan_opts so = {0};
		struct kvc_tenant_info ti;
		struct kvc_item it;
		kvc_iter *iter = NULL;
		size_t items = 0;
		int rv;
		so.page_size = 1; /* a page per item: each one a request */
		assert_int_equal(kvc_scan_open(cbn, &call, &so, &iter), 0);
		while ((rv = kvc_scan_next(iter, &it)) == 0)
			items++;
		assert_int_equal(rv, 1);
		kvc_scan_close(iter);
		assert_int_equal(items, 5); /* k, k2, k3, k4, k5 */
		assert_int_equal(kvc_stats(cb, &call, &ti), 0);
		assert_string_equal(ti.name, "t1");
		assert_int_equal(ti.keys, 5);
	}
	/* a tenant nobody has: NOT_FOUND, and no owner key left behind */
	{
		struct kvc_call call = {.tenant = "nosuch"};
		struct kvc_value v;
		assert_int_equal(kvc_get(cb, &call, "k", 1, 0, 0, &v), -KVC_NOT_FOUND);
		assert_false(owner_of("claim", "nosuch", value, sizeof(value), &epoch));
	}
	/* requests without a tenant are answered by b itself */
	assert_int_equal(kvc_tenant_list(cb, NULL, &list, &nlist), 0);
	kvc_tenant_list_free(list);

	kvc_close(ca);
	kvc_close(cb);
	kvc_close(cbn);
	node_stop(&b);
	/* a clean stop revokes the lease: its tenants go at once */
	node_stop(&a);
	assert_false(owner_of("claim", "t1", value, sizeof(value), &epoch));
}

/* ---- release, adopt, epochs ---- */

static void test_release_adopt(void **state)
{
	struct node a, b;
	kvc *ca, *cb;
	struct kvc_owner o;
	struct kvc_status st;
	struct kvc_call call = {.status = &st};
	struct kvc_blob_opts bo = KVC_BLOB_OPTS_INIT;
	struct kvc_blob_info bi;
	kvc_blob_writer *w = NULL;
	char value[512], want[1100], addr[256], node[64];
	uint8_t blob[10000], back[10000];
	uint64_t bv = 0;
	size_t n = 0;
	int64_t e1 = 0, e2 = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(blob); i++)
		blob[i] = (uint8_t)(i * 7 + i / 251);
	node_start(&a, "adopt", "a", 0);
	node_start(&b, "adopt", "b", 0);
	ca = node_client(&a, KVD_RUN_KVTCP, "t2");
	cb = node_client(&b, KVD_RUN_KVTCP, "t2");

	assert_int_equal(kvc_tenant_create(ca, NULL, "t2", NULL), 0);
	assert_true(owner_of("adopt", "t2", value, sizeof(value), &e1));

	/* adopt while a lives: refused, naming the owner */
	assert_int_equal(kvc_tenant_adopt(cb, &call, "t2", &o), -KVC_FAILED_PRECONDITION);
	assert_non_null(strstr(st.message, "node a"));
	assert_non_null(strstr(st.message, a.r.url[KVD_RUN_KVTCP]));

	/* a blob upload, begun through b (followed to a), open on a */
	bo.append_size = 4096;
	assert_int_equal(kvc_blob_writer_open(cb, &call, "blob", 4, &bo, &w), 0);
	assert_int_equal(kvc_blob_write(w, blob, 5000), 0); /* one BlobAppend sent */

	/* release through b: followed to a, which lets it go */
	assert_int_equal(kvc_tenant_release(cb, &call, "t2"), 0);
	/* the upload went with the tenant */
	assert_true(log_has(a.r.log, "aborted: its tenant is passivated, dropped or released"));
	assert_false(owner_of("adopt", "t2", value, sizeof(value), &e2));
	/* releasing again: nobody owns it */
	assert_int_equal(kvc_tenant_release(cb, &call, "t2"), -KVC_FAILED_PRECONDITION);

	/* b adopts it: a new, larger epoch, b's key */
	assert_int_equal(kvc_tenant_adopt(cb, &call, "t2", &o), 0);
	assert_string_equal(o.node, "b");
	assert_string_equal(o.address, b.r.url[KVD_RUN_KVTCP]);
	assert_true(owner_of("adopt", "t2", value, sizeof(value), &e2));
	snprintf(want, sizeof(want), "b %s", b.r.url[KVD_RUN_KVTCP]);
	assert_string_equal(value, want);
	assert_int_equal((int64_t)o.epoch, e2);
	assert_true(e2 > e1);
	/* adopting it again on b is no change */
	assert_int_equal(kvc_tenant_adopt(cb, &call, "t2", &o), 0);
	assert_int_equal((int64_t)o.epoch, e2);

	/* now a redirects to b; b serves its own copy (own data directory) */
	assert_int_equal(raw_get(ca, "t2", "k", addr, sizeof(addr), node, sizeof(node)), KVC_MOVED);
	assert_string_equal(addr, b.r.url[KVD_RUN_KVTCP]);
	assert_string_equal(node, "b");
	assert_int_equal(kvc_tenant_create(ca, &call, "t2", NULL), 0); /* followed to b */
	put_str(ca, "t2", "k", "on-b", 0);
	get_str(cb, "t2", "k", "on-b");

	/* the upload begun on a is unknown wherever its commit goes (a
	 * sends it on to b) */
	assert_int_equal(kvc_blob_commit(w, NULL), -KVC_NOT_FOUND);
	assert_non_null(strstr(st.message, "no such upload"));
	kvc_blob_writer_close(w);
	assert_int_equal(kvc_blob_info(cb, &call, "blob", 4, 0, &bi), -KVC_NOT_FOUND);
	/* a blob written through a (every request followed to b), read on b */
	assert_int_equal(kvc_blob_writer_open(ca, &call, "blob", 4, &bo, &w), 0);
	assert_int_equal(kvc_blob_write(w, blob, sizeof(blob)), 0);
	assert_int_equal(kvc_blob_commit(w, &bv), 0);
	kvc_blob_writer_close(w);
	assert_int_equal(kvc_blob_info(cb, &call, "blob", 4, 0, &bi), 0);
	assert_int_equal(bi.version, bv);
	assert_int_equal(bi.size, sizeof(blob));
	assert_int_equal(kvc_blob_read(cb, &call, "blob", 4, bv, 0, back, sizeof(back), &n), 0);
	assert_int_equal(n, sizeof(blob));
	assert_memory_equal(back, blob, sizeof(blob));

	/* a's adopt is refused now, naming b */
	assert_int_equal(kvc_tenant_adopt(ca, &call, "t2", &o), -KVC_FAILED_PRECONDITION);
	assert_non_null(strstr(st.message, "node b"));

	kvc_close(ca);
	kvc_close(cb);
	node_stop(&a);
	node_stop(&b);
}

/* ---- self-fencing ---- */

static void test_fencing(void **state)
{
	struct node a;
	kvc *ca;
	struct kvc_status st;
	struct kvc_call call = {.tenant = "t3", .status = &st};
	struct kvc_value v;
	char value[512];
	int64_t e1 = 0, e2 = 0;
	uint64_t t0, deadline;
	int rv;

	(void)state;
	node_start(&a, "fence", "a", 2);
	ca = node_client(&a, KVD_RUN_KVTCP, "t3");
	assert_int_equal(kvc_tenant_create(ca, NULL, "t3", NULL), 0);
	put_str(ca, "t3", "k", "v1", 0);
	assert_true(owner_of("fence", "t3", value, sizeof(value), &e1));

	/* etcd stops answering: within lease_ttl (2 s) writes fail UNAVAILABLE */
	assert_int_equal(kill(g_etcd.pid, SIGSTOP), 0);
	t0 = h_now_ms();
	for (;;) {
		/* judged by when each put started: a slow machine may answer late */
		uint64_t started = h_now_ms();
		rv = kvc_put(ca, &call, "k", 1, "v2", 2, NULL, NULL);
		if (rv == -KVC_UNAVAILABLE) {
			print_message("fenced: a put started %" PRIu64
			              " ms after etcd stopped was refused: %s\n",
			              started - t0, st.message);
			break;
		}
		assert_int_equal(rv, 0);
		if (started - t0 > 2000) {
			kill(g_etcd.pid, SIGCONT);
			fail_msg("a put started %" PRIu64 " ms after etcd stopped was accepted",
			         started - t0);
		}
		etcd_proc_pause();
	}
	assert_non_null(strstr(st.message, "fenced"));
	/* reads too: the node gave the tenant up */
	assert_int_equal(kvc_get(ca, &call, "k", 1, 0, 0, &v), -KVC_UNAVAILABLE);

	/* etcd back: the tenant is served again, under a new epoch */
	assert_int_equal(kill(g_etcd.pid, SIGCONT), 0);
	deadline = h_now_ms() + 20000;
	while ((rv = kvc_put(ca, &call, "k", 1, "v3", 2, NULL, NULL)) != 0) {
		assert_int_equal(rv, -KVC_UNAVAILABLE);
		if (h_now_ms() > deadline)
			fail_msg("still refused 20 s after etcd resumed: %s", st.message);
		etcd_proc_pause();
	}
	get_str(ca, "t3", "k", "v3");
	assert_true(owner_of("fence", "t3", value, sizeof(value), &e2));
	assert_true(e2 > e1);
	assert_true(log_has(a.r.log, "node a fenced"));
	assert_true(log_has(a.r.log, "node a registered again"));

	kvc_close(ca);
	node_stop(&a);
}

/* ---- kvctl: owners in tenant list, release, adopt ---- */

/* Runs kvctl -e url ARGS (stdout and stderr into out): its exit status. */
static int kvctl(const char *url, const char *args, char *out, size_t len)
{
	const char *bin = getenv("KVCTL_BIN");
	char cmd[2048];
	size_t n;
	FILE *f;
	int st;

	snprintf(cmd, sizeof(cmd), "'%s' -e '%s' --timeout %d %s 2>&1",
	         bin != NULL ? bin : "./build/cli/kvctl", url, CALL_MS, args);
	assert_non_null(f = popen(cmd, "r"));
	n = fread(out, 1, len - 1, f);
	out[n] = '\0';
	st = pclose(f);
	assert_true(WIFEXITED(st));
	return WEXITSTATUS(st);
}

/* Fails, showing out, when out lacks text. */
static void expect_in(const char *out, const char *text)
{
	if (strstr(out, text) == NULL)
		fail_msg("'%s' not in kvctl's output: %s", text, out);
}

static void test_kvctl(void **state)
{
	struct node a, b;
	char out[4096];

	(void)state;
	node_start(&a, "kvctl", "a", 0);
	node_start(&b, "kvctl", "b", 0);
	assert_int_equal(kvctl(a.r.url[KVD_RUN_KVTCP], "tenant create t4", out, sizeof(out)), 0);
	/* the owner column ("-": none) */
	assert_int_equal(kvctl(a.r.url[KVD_RUN_KVTCP], "tenant list", out, sizeof(out)), 0);
	expect_in(out, "t4\tpassive\ta\n");
	expect_in(out, "default\tpassive\t-\n");
	/* adopt refused while a owns it: exit 3, the owner named */
	assert_int_equal(kvctl(b.r.url[KVD_RUN_KVTCP], "tenant adopt t4", out, sizeof(out)), 3);
	expect_in(out, "node a");
	/* release through b (followed to a), adopt on b */
	assert_int_equal(kvctl(b.r.url[KVD_RUN_KVTCP], "tenant release t4", out, sizeof(out)), 0);
	assert_int_equal(kvctl(b.r.url[KVD_RUN_KVTCP], "-o json tenant adopt t4", out, sizeof(out)),
	                 0);
	expect_in(out, "\"node\":\"b\"");
	assert_int_equal(kvctl(a.r.url[KVD_RUN_KVTCP], "-o json tenant list", out, sizeof(out)), 0);
	expect_in(out, "\"owner\":\"b\"");
	node_stop(&a);
	node_stop(&b);
}

/* ---- start-up refusals ---- */

/* kvd with conf must end with exit status 1, its log holding text. */
static void start_refused(const char *conf, unsigned listen, const char *text)
{
	struct kvd_run r = {0};
	char err[1024], *dir, line[2048];
	const char *bin = getenv("KVD_BIN");
	bool found = false;
	FILE *f;

	assert_non_null(dir = tu_mkdtemp("kvd-cluster"));
	r.bin = bin != NULL ? bin : "./build/daemon/kvd-test";
	r.dir = dir;
	r.config_text = conf;
	r.listen = listen;
	r.start_timeout_ms = 10000;
	if (kvd_run_start(&r, err, sizeof(err)) == 0) {
		kvd_run_kill(&r);
		fail_msg("kvd started with: %s", conf);
	}
	assert_true(r.pid < 0);
	assert_true(WIFEXITED(r.status));
	assert_int_equal(WEXITSTATUS(r.status), 1);
	assert_non_null(f = fopen(r.log, "r"));
	while (!found && fgets(line, sizeof(line), f) != NULL)
		found = strstr(line, text) != NULL;
	fclose(f);
	if (!found)
		fail_msg("'%s' not in kvd's log: %s", text, err);
	tu_rmtree(dir);
	free(dir);
}

static void test_start_refused(void **state)
{
	struct node a;
	char conf[512];
	int dead = h_free_port();

	(void)state;
	/* a second node with a live node's id */
	node_start(&a, "dup", "a", 0);
	snprintf(conf, sizeof(conf), "etcd = %s\ncluster = dup\nnode_id = a\n", g_etcd.url);
	start_refused(conf, KVD_RUN_LISTEN(KVD_RUN_KVTCP),
	              "node id 'a' is registered in etcd by another process");
	node_stop(&a);
	/* etcd that nobody serves */
	assert_true(dead > 0);
	snprintf(conf, sizeof(conf), "etcd = http://127.0.0.1:%d\ncluster = x\nnode_id = a\n",
	         dead);
	start_refused(conf, KVD_RUN_LISTEN(KVD_RUN_KVTCP), "etcd: granting a lease");
	/* no kv+tcp:// listener: no address to send clients to */
	snprintf(conf, sizeof(conf), "etcd = %s\ncluster = x\nnode_id = a\n", g_etcd.url);
	start_refused(conf, KVD_RUN_LISTEN(KVD_RUN_IPC), "advertise: set it");
}

/* ---- without etcd: a single node, adopt and release refused ---- */

static void test_single_node(void **state)
{
	struct kvd_proc k;
	struct kvc_options o;
	struct kvc_status st;
	struct kvc_call call = {.status = &st};
	kvc *c;

	(void)state;
	assert_int_equal(kvd_start(&k, NULL), 0);
	kvc_options_init(&o);
	o.endpoint = k.surl;
	assert_int_equal(kvc_open(&o, &c), 0);
	assert_int_equal(kvc_tenant_adopt(c, &call, "default", NULL), -KVC_FAILED_PRECONDITION);
	assert_non_null(strstr(st.message, "single node"));
	assert_int_equal(kvc_tenant_release(c, &call, "default"), -KVC_FAILED_PRECONDITION);
	put_str(c, "default", "k", "v", 0);
	get_str(c, "default", "k", "v");
	kvc_close(c);
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_claim_and_redirect),
	        cmocka_unit_test(test_release_adopt),
	        cmocka_unit_test(test_fencing),
	        cmocka_unit_test(test_kvctl),
	        cmocka_unit_test(test_start_refused),
	        cmocka_unit_test(test_single_node),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
