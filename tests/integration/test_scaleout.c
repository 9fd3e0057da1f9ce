/* test_scaleout.c — several kvd nodes on ONE shared block device (a real loop device, formatted
 * with kvd --format --nodes 3) with a real etcd: a tenant handed over under load (release on one
 * node, adopt on another) and taken over when its owner is stopped (SIGSTOP) or killed (SIGKILL)
 * keeps every acknowledged write readable with its value and version, versions only grow, a
 * stopped owner that resumes fences itself and never serves the tenant again, a restarted owner
 * does not take it back, two nodes adopting one tenant at once: exactly one wins, a write held
 * past its node's fence (KVD_TEST_WRITE_DELAY_MS) is refused and never read, etcd killed (-9)
 * and restarted under load loses nothing, failovers in a row, and a device node
 * number held by a live node, or a shared device without etcd, is refused at start. */
/*
 * etcd comes from etcd_proc.h (a real one; without it the test fails, as
 * test_cluster does). The loop device is attached by the test itself
 * (LOOP_CONFIGURE, direct I/O, 4 KiB sectors, autoclear: the kernel
 * detaches it once the test and every kvd closed it; the test closes its
 * descriptor at the end), over a sparse 512 MiB file; not root or no loop
 * driver: exit 77, saying why. Each test formats the device anew and uses
 * a cluster name of its own. The nodes are kvd-test with lease_ttl 2 (the
 * smallest kvd takes) and tenants synced on every write.
 *
 * The checker: a writer thread puts key w<seq> = v<seq> into the tenant
 * through libkvclient handles that know every node (following MOVED, and
 * trying the next handle when a node does not answer), recording every
 * acknowledged put with its version; afterwards every acknowledged key
 * must read back with its value and that version, and the versions must
 * have grown strictly in the order the puts were acknowledged. Nothing
 * waits by sleeping: every condition is polled for with a deadline.
 */
#include "etcd.h"
#include "etcd_proc.h"
#include "harness.h"
#include "kvclient.h"

#include <inttypes.h>
#include <linux/loop.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/ioctl.h>

#include <cmocka.h> /* after the headers it needs */

#define CALL_MS     5000 /* a call of the test's own */
#define WRITE_MS    700  /* a writer's put: short, so a stopped node is left soon */
#define NODES       3
#define IMG_BYTES   (512ll << 20)
#define TTL_S       2
#define FAILOVER_MS 15000 /* a takeover within this, or the test fails */

static struct etcd_proc g_etcd = {.pid = -1};
static char g_img[128];
static char g_dev[32];
static int g_loop_fd = -1;

struct node {
	struct kvd_run r;
	char *dir;
	char id[32];
	unsigned num; /* device_node */
	char cluster[32];
};

/* ---- the loop device ---- */


/* kvd --format the device for NODES nodes, 4 MiB extents. */
static void device_format(void)
{
	const char *bin = getenv("KVD_BIN");
	char cmd[1024], out[2048];
	size_t n;
	FILE *f;
	int st;

	snprintf(cmd, sizeof(cmd), "'%s' --format %s --nodes %d --extent-size 4M --force 2>&1",
	         bin != NULL ? bin : "./build/daemon/kvd-test", g_dev, NODES);
	assert_non_null(f = popen(cmd, "r"));
	n = fread(out, 1, sizeof(out) - 1, f);
	out[n] = '\0';
	st = pclose(f);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fail_msg("%s: %s", cmd, out);
}

static int group_setup(void **state)
{
	int fd;

	(void)state;
	if (etcd_proc_start(&g_etcd) != 0)
		return -1;
	snprintf(g_img, sizeof(g_img), "/tmp/kvd-scaleout-XXXXXX");
	if ((fd = mkstemp(g_img)) < 0 || ftruncate(fd, IMG_BYTES) != 0) {
		fprintf(stderr, "a sparse image in /tmp: %s\n", strerror(errno));
		return -1;
	}
	close(fd);
	if ((g_loop_fd = tu_loop_attach(g_img, g_dev, sizeof(g_dev))) < 0) {
		fprintf(stderr, "a loop device over %s: %s\n", g_img, strerror(errno));
		return -1;
	}
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	if (g_loop_fd >= 0)
		close(g_loop_fd); /* autoclear: detached once nobody has it open */
	g_loop_fd = -1;
	if (g_img[0] != '\0' && getenv("KVTEST_KEEP") == NULL)
		unlink(g_img);
	else if (g_img[0] != '\0')
		print_message("device image kept: %s\n", g_img);
	etcd_proc_stop(&g_etcd);
	etcd_global_cleanup();
	return 0;
}

/* ---- nodes ---- */

/* The nodes of the running test, killed by its teardown should it fail
 * half way (cmocka leaves the test at the failed assertion). */
static struct node *g_nodes[8];

static void node_track(struct node *n)
{
	for (size_t i = 0; i < sizeof(g_nodes) / sizeof(g_nodes[0]); i++)
		if (g_nodes[i] == n || g_nodes[i] == NULL) {
			g_nodes[i] = n;
			return;
		}
}

static void node_conf(char *conf, size_t len, const char *cluster, const char *id, unsigned num)
{
	snprintf(conf, len,
	         "etcd = %s\ncluster = %s\nnode_id = %s\ndevice = %s\ndevice_node = %u\n"
	         "lease_ttl = %d\nauto_create = false\n[tenant-defaults]\nsync = always\n",
	         g_etcd.url, cluster, id, g_dev, num, TTL_S);
}

/* Starts node `id` (device node num) of cluster, with env (NAME=value, or
 * NULL) in its environment, and waits until it answers. */
static void node_start_env(struct node *n, const char *cluster, const char *id, unsigned num,
                           const char *env)
{
	char conf[1024], err[1024];
	const char *bin = getenv("KVD_BIN");

	memset(n, 0, sizeof(*n));
	snprintf(n->id, sizeof(n->id), "%s", id);
	snprintf(n->cluster, sizeof(n->cluster), "%s", cluster);
	n->num = num;
	assert_non_null(n->dir = tu_mkdtemp("kvd-scaleout"));
	node_conf(conf, sizeof(conf), cluster, id, num);
	n->r.bin = bin != NULL ? bin : "./build/daemon/kvd-test";
	n->r.dir = n->dir;
	n->r.config_text = conf;
	n->r.listen = KVD_RUN_LISTEN(KVD_RUN_KVTCP);
	n->r.workers = 2;
	n->r.env[0] = env;
	node_track(n);
	if (kvd_run_start(&n->r, err, sizeof(err)) != 0)
		fail_msg("node %s: %s", id, err);
	h_track(n->r.pid, true);
}

static void node_start(struct node *n, const char *cluster, const char *id, unsigned num)
{
	node_start_env(n, cluster, id, num, NULL);
}

/* The same node again, after it was killed: same id, number, port and log. */
static void node_restart(struct node *n)
{
	char conf[1024], err[1024];

	node_conf(conf, sizeof(conf), n->cluster, n->id, n->num);
	n->r.config_text = conf;
	n->r.log_append = true;
	if (kvd_run_start(&n->r, err, sizeof(err)) != 0)
		fail_msg("node %s again: %s", n->id, err);
	h_track(n->r.pid, true);
}

static bool log_has(const struct node *n, const char *text)
{
	struct kvd_proc k = {0};

	h_copy(k.log, sizeof(k.log), n->r.log);
	return h_log_has(&k, text);
}

static void dump_log(const struct node *n)
{
	struct kvd_proc k = {0};

	h_copy(k.log, sizeof(k.log), n->r.log);
	h_dump_log(&k);
}

/* SIGKILL, reaped. */
static void node_kill(struct node *n)
{
	pid_t pid = n->r.pid;

	if (pid > 0) {
		kill(pid, SIGCONT);
		kvd_run_kill(&n->r);
		h_track(pid, false);
	}
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
	if (rv != 0 || log_has(n, "runtime error") || log_has(n, "Sanitizer")) {
		dump_log(n);
		fail_msg("node %s did not stop cleanly: %s", n->id, rv != 0 ? err : "see its log");
	}
	if (n->dir != NULL && getenv("KVTEST_KEEP") == NULL)
		tu_rmtree(n->dir);
	free(n->dir);
	n->dir = NULL;
}

/* A handle whose endpoints are the nodes' kv+tcp:// URLs, nodes[first]
 * first, then the others in order. */
static kvc *client_of(struct node **nodes, int n, int first, const char *tenant,
                      uint32_t timeout_ms)
{
	struct kvc_options o;
	char eps[4 * KVD_RUN_URL_MAX];
	size_t used = 0;
	kvc *c = NULL;

	eps[0] = '\0';
	for (int i = 0; i < n; i++) {
		const struct node *x = nodes[(first + i) % n];
		used += (size_t)snprintf(eps + used, sizeof(eps) - used, "%s%s", i ? "," : "",
		                         x->r.url[KVD_RUN_KVTCP]);
	}
	kvc_options_init(&o);
	o.endpoint = eps;
	o.tenant = tenant;
	o.timeout_ms = timeout_ms;
	assert_int_equal(kvc_open(&o, &c), 0);
	return c;
}

/* The owner key of tenant: its value's node id (before the space) and its
 * create revision; false when there is none. */
static bool owner_of(const char *cluster, const char *tenant, char *node, size_t len,
                     int64_t *ret_epoch)
{
	struct etcd *e = NULL;
	struct etcd_kv kv = {0};
	char key[256];
	const char *sp;
	int rv;

	snprintf(key, sizeof(key), "/kvd/%s/tenants/%s/owner", cluster, tenant);
	assert_int_equal(etcd_open(g_etcd.url, CALL_MS, &e), 0);
	rv = etcd_get(e, key, strlen(key), &kv, NULL);
	if (rv != 0 && rv != ETCD_ABSENT)
		fail_msg("etcd_get %s: %d %s", key, rv, etcd_errmsg(e));
	etcd_close(e);
	if (rv == ETCD_ABSENT)
		return false;
	sp = strchr(kv.value, ' ');
	snprintf(node, len, "%.*s", sp != NULL ? (int)(sp - kv.value) : (int)kv.value_len,
	         kv.value);
	*ret_epoch = kv.create_rev;
	etcd_kv_clear(&kv);
	return true;
}

/* A raw request on n's own endpoint (MOVED not followed): its status. */
static int raw_call(const struct node *n, const char *method, const char *tenant, const char *k,
                    const char *v)
{
	struct kvc_options o;
	struct h_req q;
	struct h_reply r;
	void *reply = NULL;
	size_t len = 0;
	kvc *c = NULL;
	int st, rv;

	kvc_options_init(&o);
	o.endpoint = n->r.url[KVD_RUN_KVTCP];
	o.timeout_ms = CALL_MS;
	assert_int_equal(kvc_open(&o, &c), 0);
	h_req_begin(&q, method, tenant, 91, v != NULL ? 2 : 1, 0);
	mp_kv_bin(&q.pk, "key", k, strlen(k));
	if (v != NULL)
		mp_kv_bin(&q.pk, "value", v, strlen(v));
	rv = kvc_raw(c, CALL_MS, q.sb.data, q.sb.size, &reply, &len);
	msgpack_sbuffer_destroy(&q.sb);
	kvc_close(c);
	if (rv != 0)
		return rv < 0 ? -rv : rv; /* no reply at all: a KVC code */
	assert_int_equal(h_parse(reply, len, &r), 0);
	st = (int)r.status;
	h_reply_free(&r);
	free(reply);
	return st;
}

/* ---- the writer and its checker ---- */

struct ack {
	uint32_t seq;
	uint64_t version;
	uint64_t started_ms, acked_ms;
};

struct writer {
	const char *tenant;
	kvc *h[NODES]; /* handle i tries node i first */
	struct node **nodes;
	int nh;
	pthread_t thread;
	atomic_bool stop;
	pthread_mutex_t mu;
	struct ack *acks; /* guarded by mu */
	size_t nacks, cap;
	uint64_t failed; /* puts not acknowledged (in doubt) */
	char bad[256];   /* a checker failure seen while writing; "" none */
	bool running;    /* its thread runs */
};

/* The writer of the running test, stopped by its teardown. */
static struct writer *g_writer;

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	uint32_t seq = 0;
	int cur = 0;

	while (!atomic_load(&w->stop)) {
		char k[32], v[64];
		struct kvc_call call = {.tenant = w->tenant};
		uint64_t version = 0, t0 = h_now_ms();
		int rv;

		seq++;
		snprintf(k, sizeof(k), "w%08" PRIu32, seq);
		snprintf(v, sizeof(v), "v%08" PRIu32 "-%s", seq, w->tenant);
		rv = kvc_put(w->h[cur], &call, k, strlen(k), v, strlen(v), NULL, &version);
		pthread_mutex_lock(&w->mu);
		if (rv == 0) {
			if (w->nacks == w->cap) {
				w->cap = w->cap ? w->cap * 2 : 1024;
				w->acks = realloc(w->acks, w->cap * sizeof(*w->acks));
				if (w->acks == NULL)
					abort();
			}
			if (w->nacks > 0 && version <= w->acks[w->nacks - 1].version &&
			    w->bad[0] == '\0')
				snprintf(w->bad, sizeof(w->bad),
				         "put %" PRIu32 " acknowledged version %" PRIu64
				         " after put %" PRIu32 " had %" PRIu64,
				         seq, version, w->acks[w->nacks - 1].seq,
				         w->acks[w->nacks - 1].version);
			w->acks[w->nacks++] = (struct ack){seq, version, t0, h_now_ms()};
		} else {
			w->failed++;
		}
		pthread_mutex_unlock(&w->mu);
		if (rv != 0) {
			/* that node does not answer or serve it: the next (each
			 * handle forgets a route to a node that timed out) */
			cur = (cur + 1) % w->nh;
			etcd_proc_pause(); /* a pause between retries */
		}
	}
	return NULL;
}

static void writer_start(struct writer *w, struct node **nodes, int n, const char *tenant)
{
	memset(w, 0, sizeof(*w));
	w->tenant = tenant;
	w->nodes = nodes;
	w->nh = n;
	for (int i = 0; i < n; i++)
		w->h[i] = client_of(nodes, n, i, tenant, WRITE_MS);
	pthread_mutex_init(&w->mu, NULL);
	assert_int_equal(pthread_create(&w->thread, NULL, writer_main, w), 0);
	w->running = true;
	g_writer = w;
}

static size_t writer_acks(struct writer *w)
{
	size_t n;

	pthread_mutex_lock(&w->mu);
	n = w->nacks;
	pthread_mutex_unlock(&w->mu);
	return n;
}

/* Waits until the writer has `more` acknowledged puts beyond now. */
static void writer_wait(struct writer *w, size_t more, const char *what)
{
	size_t want = writer_acks(w) + more;
	uint64_t deadline = h_now_ms() + 20000;

	while (writer_acks(w) < want) {
		if (h_now_ms() > deadline)
			fail_msg("%s: %zu acknowledged puts, none more for 20 s (%" PRIu64
			         " not acknowledged)",
			         what, writer_acks(w), w->failed);
		etcd_proc_pause();
	}
}

/* The first put started after t and acknowledged: its ack time; 0 none. */
static uint64_t writer_first_ack_after(struct writer *w, uint64_t t)
{
	uint64_t at = 0;

	pthread_mutex_lock(&w->mu);
	for (size_t i = 0; i < w->nacks && at == 0; i++)
		if (w->acks[i].started_ms > t)
			at = w->acks[i].acked_ms;
	pthread_mutex_unlock(&w->mu);
	return at;
}

static void writer_stop(struct writer *w)
{
	if (!w->running)
		return;
	w->running = false;
	atomic_store(&w->stop, true);
	pthread_join(w->thread, NULL);
	for (int i = 0; i < w->nh; i++)
		kvc_close(w->h[i]);
	pthread_mutex_destroy(&w->mu);
}

/* Every acknowledged put reads back with its value and version through c. */
static void writer_check(struct writer *w, kvc *c)
{
	if (w->bad[0] != '\0')
		fail_msg("%s", w->bad);
	assert_true(w->nacks > 0);
	for (size_t i = 0; i < w->nacks; i++) {
		const struct ack *a = &w->acks[i];
		struct kvc_call call = {.tenant = w->tenant};
		struct kvc_status st;
		struct kvc_value v;
		char k[32], want[64];
		int rv;

		call.status = &st;
		snprintf(k, sizeof(k), "w%08" PRIu32, a->seq);
		snprintf(want, sizeof(want), "v%08" PRIu32 "-%s", a->seq, w->tenant);
		if ((rv = kvc_get(c, &call, k, strlen(k), 0, 0, &v)) != 0)
			fail_msg("acknowledged put %s (version %" PRIu64
			         ") does not read back: %d %s",
			         k, a->version, rv, st.message);
		if (v.len != strlen(want) || memcmp(v.data, want, v.len) != 0 ||
		    v.version != a->version)
			fail_msg("acknowledged put %s: read %.*s version %" PRIu64
			         ", acknowledged %s version %" PRIu64,
			         k, (int)v.len, (const char *)v.data, v.version, want, a->version);
		kvc_value_free(&v);
	}
	print_message("%zu acknowledged puts read back (%" PRIu64 " in doubt)\n", w->nacks,
	              w->failed);
	free(w->acks);
	w->acks = NULL;
}

/* Waits until tenant's owner key names a node other than `not` (or any
 * when NULL): that node's id in node; fails after FAILOVER_MS. */
static void owner_wait(const char *cluster, const char *tenant, const char * not, char *node,
                       size_t len, int64_t *ret_epoch)
{
	uint64_t deadline = h_now_ms() + FAILOVER_MS;

	for (;;) {
		if (owner_of(cluster, tenant, node, len, ret_epoch) &&
		    (not == NULL || strcmp(node, not ) != 0))
			return;
		if (h_now_ms() > deadline)
			fail_msg("tenant %s: no owner but %s after %d ms", tenant,
			         not != NULL ? not : "none", FAILOVER_MS);
		etcd_proc_pause();
	}
}

/* Waits until pid is stopped (its state in /proc/PID/stat is 'T'): a
 * SIGSTOP is delivered after kill(2) returns, so the process may still
 * answer a request meanwhile. */
static void stopped_wait(pid_t pid)
{
	uint64_t deadline = h_now_ms() + 5000;
	char path[64], buf[512];

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	for (;;) {
		FILE *f = fopen(path, "r");
		size_t n = f != NULL ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
		const char *paren;
		if (f != NULL)
			fclose(f);
		buf[n] = '\0';
		/* "PID (comm) STATE ...": the state follows the last ')' */
		if ((paren = strrchr(buf, ')')) != NULL && paren[1] == ' ' && paren[2] == 'T')
			return;
		if (h_now_ms() > deadline)
			fail_msg("process %d did not stop within 5 s", (int)pid);
		etcd_proc_pause();
	}
}

/* ---- a. handover under load ---- */

static void test_handover(void **state)
{
	static struct node a, b; /* static: the teardown may see them after a failure */
	static struct writer w;
	struct node *nodes[2] = {&a, &b};
	kvc *ca, *cb;
	struct kvc_status st;
	struct kvc_call call = {.status = &st};
	struct kvc_owner o;
	char owner[64];
	int64_t e1 = 0, e2 = 0;
	int tries = 0, rv;

	(void)state;
	device_format();
	node_start(&a, "handover", "a", 1);
	node_start(&b, "handover", "b", 2);
	ca = client_of(nodes, 1, 0, "t", CALL_MS);     /* a only */
	cb = client_of(nodes + 1, 1, 0, "t", CALL_MS); /* b only */
	assert_int_equal(kvc_tenant_create(ca, NULL, "t", NULL), 0);
	assert_true(owner_of("handover", "t", owner, sizeof(owner), &e1));
	assert_string_equal(owner, "a");

	writer_start(&w, nodes, 2, "t");
	writer_wait(&w, 50, "before the handover");
	/* release on a, adopt on b; the writer may make a (or b) take it on
	 * first use in between: released again, bounded */
	for (;;) {
		rv = kvc_tenant_release(ca, &call, "t");
		assert_true(rv == 0 || rv == -KVC_FAILED_PRECONDITION || rv == -KVC_UNAVAILABLE ||
		            rv == -KVC_MOVED);
		rv = kvc_tenant_adopt(cb, &call, "t", &o);
		if (rv == 0)
			break;
		if (rv != -KVC_FAILED_PRECONDITION && rv != -KVC_UNAVAILABLE)
			fail_msg("adopt on b: %d %s", rv, st.message);
		if (++tries == 100)
			fail_msg("b could not adopt t in 100 tries: %s", st.message);
	}
	assert_string_equal(o.node, "b");
	assert_true(owner_of("handover", "t", owner, sizeof(owner), &e2));
	assert_string_equal(owner, "b");
	assert_true(e2 > e1);
	print_message("handover: b adopted t at epoch %" PRId64 " after %d tries\n", e2, tries + 1);
	/* the writer follows it to b and goes on there */
	writer_wait(&w, 50, "after the handover");
	writer_stop(&w);
	assert_true(owner_of("handover", "t", owner, sizeof(owner), &e2));
	writer_check(&w, cb); /* on b alone: what a wrote is read from the device */

	kvc_close(ca);
	kvc_close(cb);
	node_stop(&a);
	node_stop(&b);
}

/* ---- b. failover of a stopped owner ---- */

static void test_failover_stopped(void **state)
{
	static struct node a, b, c;
	static struct writer w;
	struct node *nodes[NODES] = {&a, &b, &c};
	kvc *ca, *call_all;
	char owner[64];
	int64_t e1 = 0, e2 = 0;
	uint64_t t_stop, t_ack, deadline;
	int st;

	(void)state;
	device_format();
	node_start(&a, "stopped", "a", 1);
	node_start(&b, "stopped", "b", 2);
	node_start(&c, "stopped", "c", 3);
	ca = client_of(nodes, 1, 0, "t", CALL_MS);
	assert_int_equal(kvc_tenant_create(ca, NULL, "t", NULL), 0);
	kvc_close(ca);
	assert_true(owner_of("stopped", "t", owner, sizeof(owner), &e1));
	assert_string_equal(owner, "a");

	writer_start(&w, nodes, NODES, "t");
	writer_wait(&w, 50, "before the stop");
	assert_int_equal(kill(a.r.pid, SIGSTOP), 0);
	stopped_wait(a.r.pid);
	t_stop = h_now_ms();
	deadline = t_stop + FAILOVER_MS;
	while ((t_ack = writer_first_ack_after(&w, t_stop)) == 0) {
		if (h_now_ms() > deadline) {
			kill(a.r.pid, SIGCONT);
			fail_msg("no put acknowledged %d ms after the owner stopped", FAILOVER_MS);
		}
		etcd_proc_pause();
	}
	assert_true(owner_of("stopped", "t", owner, sizeof(owner), &e2));
	assert_string_not_equal(owner, "a");
	assert_true(e2 > e1);
	print_message("failover (SIGSTOP, lease_ttl %d s): node %s acknowledged the first put "
	              "%" PRIu64 " ms after the owner stopped\n",
	              TTL_S, owner, t_ack - t_stop);
	writer_wait(&w, 20, "after the failover");

	/* a resumes: it fences itself and never serves t again */
	assert_int_equal(kill(a.r.pid, SIGCONT), 0);
	deadline = h_now_ms() + FAILOVER_MS;
	for (;;) {
		st = raw_call(&a, "Put", "t", "late", "from-a");
		if (st != KVC_UNAVAILABLE && st != KVC_MOVED && st != KVC_DEADLINE_EXCEEDED)
			fail_msg("a answered a put of t with status %d after it resumed", st);
		st = raw_call(&a, "Get", "t", "w00000001", NULL);
		if (st != KVC_UNAVAILABLE && st != KVC_MOVED && st != KVC_DEADLINE_EXCEEDED)
			fail_msg("a answered a get of t with status %d after it resumed", st);
		if (st == KVC_MOVED && log_has(&a, "node a registered again"))
			break;
		if (h_now_ms() > deadline)
			fail_msg("a did not register again within %d ms", FAILOVER_MS);
		etcd_proc_pause();
	}
	assert_true(log_has(&a, "node a fenced"));
	writer_wait(&w, 20, "after a resumed");
	writer_stop(&w);
	/* the owner did not change back */
	{
		char again[64];
		int64_t e3 = 0;
		assert_true(owner_of("stopped", "t", again, sizeof(again), &e3));
		assert_string_equal(again, owner);
	}
	call_all = client_of(nodes, NODES, 1, "t", CALL_MS);
	writer_check(&w, call_all);
	{
		struct kvc_call call = {.tenant = "t"};
		struct kvc_value v;
		assert_int_equal(kvc_get(call_all, &call, "late", 4, 0, 0, &v), -KVC_NOT_FOUND);
	}
	kvc_close(call_all);
	node_stop(&a);
	node_stop(&b);
	node_stop(&c);
}

/* ---- c. failover of a killed owner, no take-back, adopt race, refusals ---- */

struct adopter {
	kvc *c;
	const char *tenant;
	pthread_barrier_t *go;
	int rv;
	struct kvc_owner o;
};

static void *adopter_main(void *arg)
{
	struct adopter *x = arg;

	pthread_barrier_wait(x->go);
	x->rv = kvc_tenant_adopt(x->c, NULL, x->tenant, &x->o);
	return NULL;
}

/* ---- d. a write held past the fence is never acknowledged nor read ---- */

struct late_put {
	kvc *c;
	int rv;
};

static void *late_put_main(void *arg)
{
	struct late_put *x = arg;
	struct kvc_call call = {.tenant = "t"};

	x->rv = kvc_put(x->c, &call, "kvd-test-delay-1", 16, "late", 4, NULL, NULL);
	return NULL;
}

/* Polls n's log for text, FAILOVER_MS at most. */
static void log_wait(const struct node *n, const char *text)
{
	uint64_t deadline = h_now_ms() + FAILOVER_MS;

	while (!log_has(n, text)) {
		if (h_now_ms() > deadline) {
			dump_log(n);
			fail_msg("node %s did not log '%s'", n->id, text);
		}
		etcd_proc_pause();
	}
}

static void test_late_write(void **state)
{
	static struct node a, b;
	struct node *nodes[2] = {&a, &b};
	struct late_put x = {0};
	pthread_t th;
	kvc *ca, *cb;
	struct kvc_call call = {.tenant = "t"};
	struct kvc_value v;
	char owner[64], key[128];
	int64_t e1 = 0, e2 = 0;

	(void)state;
	device_format();
	node_start_env(&a, "late", "a", 1, "KVD_TEST_WRITE_DELAY_MS=4000");
	node_start(&b, "late", "b", 2);
	ca = client_of(nodes, 1, 0, "t", 10000);
	cb = client_of(nodes + 1, 1, 0, "t", CALL_MS);
	assert_int_equal(kvc_tenant_create(ca, NULL, "t", NULL), 0);
	assert_int_equal(kvc_put(ca, &call, "k", 1, "on-a", 4, NULL, NULL), 0);
	assert_true(owner_of("late", "t", owner, sizeof(owner), &e1));

	/* a write on a passes its fencing check and is held there */
	x.c = ca;
	assert_int_equal(pthread_create(&th, NULL, late_put_main, &x), 0);
	log_wait(&a, "test mode: a write of tenant t held");
	/* meanwhile a loses its lease (revoked behind its back): it fences
	 * itself, and b takes t */
	{
		struct etcd *e = NULL;
		struct etcd_kv kv = {0};
		snprintf(key, sizeof(key), "/kvd/late/nodes/a");
		assert_int_equal(etcd_open(g_etcd.url, CALL_MS, &e), 0);
		assert_int_equal(etcd_get(e, key, strlen(key), &kv, NULL), 0);
		assert_int_equal(etcd_lease_revoke(e, kv.lease), 0);
		etcd_kv_clear(&kv);
		etcd_close(e);
	}
	log_wait(&a, "node a fenced");
	assert_int_equal(kvc_get(cb, &call, "k", 1, 0, 0, &v), 0); /* b takes t on first use */
	kvc_value_free(&v);
	assert_true(owner_of("late", "t", owner, sizeof(owner), &e2));
	assert_string_equal(owner, "b");
	assert_true(e2 > e1);
	assert_int_equal(kvc_put(cb, &call, "k2", 2, "on-b", 4, NULL, NULL), 0);

	/* the held write goes on after all that: refused, and nowhere */
	pthread_join(th, NULL);
	if (x.rv == 0)
		fail_msg("a acknowledged a write it was holding when it was fenced");
	assert_int_equal(x.rv, -KVC_UNAVAILABLE);
	assert_true(log_has(&a, "the shared device refused it"));
	assert_int_equal(kvc_get(cb, &call, "kvd-test-delay-1", 16, 0, 0, &v), -KVC_NOT_FOUND);
	assert_int_equal(kvc_get(cb, &call, "k", 1, 0, 0, &v), 0);
	assert_int_equal(v.len, 4);
	assert_memory_equal(v.data, "on-a", 4);
	kvc_value_free(&v);
	/* and after b passivates and reads the device again */
	assert_int_equal(kvc_tenant_release(cb, NULL, "t"), 0);
	assert_int_equal(kvc_tenant_adopt(cb, NULL, "t", NULL), 0);
	assert_int_equal(kvc_get(cb, &call, "kvd-test-delay-1", 16, 0, 0, &v), -KVC_NOT_FOUND);
	assert_int_equal(kvc_get(cb, &call, "k2", 2, 0, 0, &v), 0);
	kvc_value_free(&v);

	kvc_close(ca);
	kvc_close(cb);
	node_stop(&a);
	node_stop(&b);
}

/* kvd with conf must exit 1, its log holding text. */
static void start_refused(const char *conf, const char *text)
{
	struct kvd_run r = {0};
	char err[1024], *dir;
	const char *bin = getenv("KVD_BIN");
	struct kvd_proc k = {0};

	assert_non_null(dir = tu_mkdtemp("kvd-scaleout"));
	r.bin = bin != NULL ? bin : "./build/daemon/kvd-test";
	r.dir = dir;
	r.config_text = conf;
	r.listen = KVD_RUN_LISTEN(KVD_RUN_KVTCP);
	r.start_timeout_ms = 15000;
	if (kvd_run_start(&r, err, sizeof(err)) == 0) {
		kvd_run_kill(&r);
		fail_msg("kvd started with: %s", conf);
	}
	assert_true(r.pid < 0);
	assert_true(WIFEXITED(r.status));
	assert_int_equal(WEXITSTATUS(r.status), 1);
	h_copy(k.log, sizeof(k.log), r.log);
	if (!h_log_has(&k, text)) {
		h_dump_log(&k);
		fail_msg("'%s' not in kvd's log", text);
	}
	tu_rmtree(dir);
	free(dir);
}

static void test_failover_killed(void **state)
{
	static struct node a, b, c;
	static struct writer w;
	struct node *nodes[NODES] = {&a, &b, &c}, *winner;
	kvc *ca, *call_all;
	char owner[64], conf[1024];
	int64_t e1 = 0, e2 = 0, e3 = 0;
	uint64_t t_kill;

	(void)state;
	device_format();
	node_start(&a, "killed", "a", 1);
	node_start(&b, "killed", "b", 2);

	/* a shared device without etcd */
	snprintf(conf, sizeof(conf), "device = %s\ndevice_node = 3\n", g_dev);
	start_refused(conf, "is shared by several nodes");
	/* a device node number a live node elsewhere holds (its slot key, put
	 * here on a lease of the test's own) */
	{
		struct etcd *e = NULL;
		struct etcd_kv cur = {0};
		int64_t lease, ttl, rev;
		const char *key = "/kvd/killed/slots/3";
		assert_int_equal(etcd_open(g_etcd.url, CALL_MS, &e), 0);
		assert_int_equal(etcd_lease_grant(e, 60, &lease, &ttl), 0);
		assert_int_equal(
		        etcd_put_if_absent(e, key, strlen(key), "remote", 6, lease, &rev, &cur), 0);
		node_conf(conf, sizeof(conf), "killed", "c", 3);
		start_refused(conf, "device node 3 is held in etcd by node 'remote'");
		assert_int_equal(etcd_lease_revoke(e, lease), 0);
		etcd_close(e);
	}
	node_start(&c, "killed", "c", 3);

	ca = client_of(nodes, 1, 0, "t", CALL_MS);
	assert_int_equal(kvc_tenant_create(ca, NULL, "t", NULL), 0);
	kvc_close(ca);
	assert_true(owner_of("killed", "t", owner, sizeof(owner), &e1));
	assert_string_equal(owner, "a");
	writer_start(&w, nodes, 1, "t"); /* a alone: nothing else takes t on first use */
	writer_wait(&w, 100, "before the kill");
	node_kill(&a); /* mid-write */
	t_kill = h_now_ms();
	writer_stop(&w);

	/* nobody asks for t: the failover thread of the winner takes it */
	owner_wait("killed", "t", "a", owner, sizeof(owner), &e2);
	print_message("failover (SIGKILL, lease_ttl %d s, no requests): node %s owns t %" PRIu64
	              " ms after the kill\n",
	              TTL_S, owner, h_now_ms() - t_kill);
	assert_true(e2 > e1);
	winner = strcmp(owner, "b") == 0 ? &b : &c;
	assert_string_equal(winner->id, owner);
	{
		/* it logs the takeover once the engine has it too, after the key */
		uint64_t deadline = h_now_ms() + FAILOVER_MS;
		while (!log_has(winner, "took tenant t over")) {
			if (h_now_ms() > deadline)
				fail_msg("node %s owns t but did not log its takeover", winner->id);
			etcd_proc_pause();
		}
	}
	call_all = client_of(nodes + 1, 2, 0, "t", CALL_MS);
	writer_check(&w, call_all);

	/* a comes back with its id and number: it does not take t back */
	node_restart(&a);
	ca = client_of(nodes, 1, 0, "t", CALL_MS);
	{
		struct kvc_call call = {.tenant = "t"};
		struct kvc_value v;
		assert_int_equal(kvc_get(ca, &call, "w00000001", 9, 0, 0, &v), 0); /* via MOVED */
		kvc_value_free(&v);
	}
	assert_int_equal(raw_call(&a, "Get", "t", "w00000001", NULL), KVC_MOVED);
	assert_true(owner_of("killed", "t", owner, sizeof(owner), &e3));
	assert_string_equal(owner, winner->id);
	assert_int_equal(e3, e2);
	kvc_close(ca);

	/* two nodes adopt one released tenant at once: exactly one wins */
	{
		pthread_barrier_t go;
		struct adopter x[2];
		pthread_t th[2];
		kvc *cb = client_of(nodes + 1, 1, 0, "u", CALL_MS);
		int wins = 0;

		assert_int_equal(kvc_tenant_create(cb, NULL, "u", NULL), 0);
		{
			struct kvc_call call = {.tenant = "u"};
			assert_int_equal(kvc_put(cb, &call, "k", 1, "v", 1, NULL, NULL), 0);
		}
		assert_int_equal(kvc_tenant_release(cb, NULL, "u"), 0);
		kvc_close(cb);
		pthread_barrier_init(&go, NULL, 2);
		for (int i = 0; i < 2; i++) {
			x[i] = (struct adopter){.tenant = "u", .go = &go};
			x[i].c = client_of(i == 0 ? nodes : nodes + 2, 1, 0, "u", CALL_MS);
			assert_int_equal(pthread_create(&th[i], NULL, adopter_main, &x[i]), 0);
		}
		for (int i = 0; i < 2; i++) {
			pthread_join(th[i], NULL);
			if (x[i].rv == 0)
				wins++;
			else if (x[i].rv != -KVC_FAILED_PRECONDITION && x[i].rv != -KVC_MOVED)
				fail_msg("adopter %d: %d", i, x[i].rv);
		}
		pthread_barrier_destroy(&go);
		assert_int_equal(wins, 1);
		assert_true(owner_of("killed", "u", owner, sizeof(owner), &e1));
		assert_string_equal(owner, x[0].rv == 0 ? "a" : "c");
		{
			struct kvc_call call = {.tenant = "u"};
			struct kvc_value v;
			assert_int_equal(kvc_get(x[0].c, &call, "k", 1, 0, 0, &v), 0);
			assert_int_equal(v.len, 1);
			kvc_value_free(&v);
		}
		for (int i = 0; i < 2; i++)
			kvc_close(x[i].c);
	}

	kvc_close(call_all);
	node_stop(&a);
	node_stop(&b);
	node_stop(&c);
}

/* ---- f. etcd killed (kill -9) and restarted in the middle ---- */

static void test_etcd_killed(void **state)
{
	static struct node a, b;
	static struct writer w;
	struct node *nodes[2] = {&a, &b};
	kvc *ca, *call_all;
	char owner[64];
	int64_t e1 = 0, e2 = 0;
	uint64_t deadline;

	(void)state;
	device_format();
	node_start(&a, "etcdkill", "a", 1);
	node_start(&b, "etcdkill", "b", 2);
	ca = client_of(nodes, 1, 0, "t", CALL_MS);
	assert_int_equal(kvc_tenant_create(ca, NULL, "t", NULL), 0);
	kvc_close(ca);
	assert_true(owner_of("etcdkill", "t", owner, sizeof(owner), &e1));
	writer_start(&w, nodes, 2, "t");
	writer_wait(&w, 50, "before etcd was killed");

	/* etcd gone: every node fences itself within lease_ttl - margin and
	 * nothing is acknowledged until etcd is back */
	etcd_proc_kill(&g_etcd);
	deadline = h_now_ms() + FAILOVER_MS;
	while (!log_has(&a, "node a fenced") || !log_has(&b, "node b fenced")) {
		if (h_now_ms() > deadline) {
			etcd_proc_restart(&g_etcd);
			fail_msg("the nodes did not fence themselves without etcd");
		}
		etcd_proc_pause();
	}
	{
		/* no put started now is acknowledged in the next second, while
		 * etcd is down (an observation window, not a wait for an event) */
		uint64_t t_fenced = h_now_ms();
		while (h_now_ms() < t_fenced + 1000)
			etcd_proc_pause();
		assert_int_equal(writer_first_ack_after(&w, t_fenced), 0);
	}
	/* etcd back with its data: the nodes register again, the tenant is
	 * taken again under a newer epoch, the writer goes on */
	assert_int_equal(etcd_proc_restart(&g_etcd), 0);
	writer_wait(&w, 50, "after etcd came back");
	writer_stop(&w);
	assert_true(owner_of("etcdkill", "t", owner, sizeof(owner), &e2));
	assert_true(e2 > e1);
	call_all = client_of(nodes, 2, 0, "t", CALL_MS);
	writer_check(&w, call_all);
	kvc_close(call_all);
	node_stop(&a);
	node_stop(&b);
}

/* ---- e. many failovers in a row (a soak: KVTEST_FAILOVERS=100) ---- */


static int u64_cmp(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

	return a < b ? -1 : a > b;
}

static void test_failover_rounds(void **state)
{
	static struct node a, b, c;
	static struct writer w;
	struct node *nodes[NODES] = {&a, &b, &c};
	const char *env = getenv("KVTEST_FAILOVERS");
	int rounds = env != NULL ? atoi(env) : 4;
	uint64_t *took = calloc(rounds > 0 ? (size_t)rounds : 1, sizeof(*took));
	kvc *ca, *call_all;
	char owner[64];
	int64_t epoch = 0, last = 0;

	(void)state;
	assert_true(rounds > 0 && took != NULL);
	device_format();
	node_start(&a, "rounds", "a", 1);
	node_start(&b, "rounds", "b", 2);
	node_start(&c, "rounds", "c", 3);
	ca = client_of(nodes, 1, 0, "t", CALL_MS);
	assert_int_equal(kvc_tenant_create(ca, NULL, "t", NULL), 0);
	kvc_close(ca);
	writer_start(&w, nodes, NODES, "t");
	writer_wait(&w, 20, "before the first failover");
	for (int r = 0; r < rounds; r++) {
		struct node *o = NULL;
		uint64_t t0, t_ack, deadline;
		assert_true(owner_of("rounds", "t", owner, sizeof(owner), &epoch));
		assert_true(epoch > last); /* every owner had a newer epoch */
		last = epoch;
		for (int i = 0; i < NODES; i++)
			if (strcmp(nodes[i]->id, owner) == 0)
				o = nodes[i];
		assert_non_null(o);
		/* odd rounds stop the owner (it resumes and fences itself), even
		 * rounds kill it (it restarts and does not take the tenant back) */
		if (r % 2 == 0) {
			assert_int_equal(kill(o->r.pid, SIGSTOP), 0);
			stopped_wait(o->r.pid); /* kill(2) returns before the stop */
		} else {
			node_kill(o);
		}
		t0 = h_now_ms();
		deadline = t0 + FAILOVER_MS;
		while ((t_ack = writer_first_ack_after(&w, t0)) == 0) {
			if (h_now_ms() > deadline) {
				kill(o->r.pid, SIGCONT);
				for (int i = 0; i < NODES; i++)
					dump_log(nodes[i]);
				fail_msg("round %d: no put acknowledged %d ms after node %s %s", r,
				         FAILOVER_MS, o->id, r % 2 == 0 ? "stopped" : "was killed");
			}
			etcd_proc_pause();
		}
		took[r] = t_ack - t0;
		if (r % 2 == 0) {
			assert_int_equal(kill(o->r.pid, SIGCONT), 0);
		} else {
			node_restart(o);
		}
		/* the old owner is back: it answers MOVED for t (never serves it) */
		deadline = h_now_ms() + FAILOVER_MS;
		for (;;) {
			int st = raw_call(o, "Put", "t", "late", "from-an-old-owner");
			if (st == KVC_MOVED)
				break;
			if (st != KVC_UNAVAILABLE && st != KVC_DEADLINE_EXCEEDED)
				fail_msg("round %d: node %s answered a put of t with status %d", r,
				         o->id, st);
			if (h_now_ms() > deadline)
				fail_msg("round %d: node %s did not come back", r, o->id);
			etcd_proc_pause();
		}
		writer_wait(&w, 10, "after a failover");
	}
	writer_stop(&w);
	call_all = client_of(nodes, NODES, 0, "t", CALL_MS);
	writer_check(&w, call_all);
	{
		struct kvc_call call = {.tenant = "t"};
		struct kvc_value v;
		assert_int_equal(kvc_get(call_all, &call, "late", 4, 0, 0, &v), -KVC_NOT_FOUND);
	}
	qsort(took, (size_t)rounds, sizeof(*took), u64_cmp);
	print_message("%d failovers (lease_ttl %d s, half stopped, half killed): owner gone -> "
	              "first put acknowledged by the next: median %" PRIu64 " ms, fastest %" PRIu64
	              ", slowest %" PRIu64 "; 0 acknowledged puts lost\n",
	              rounds, TTL_S, took[rounds / 2], took[0], took[rounds - 1]);
	free(took);
	kvc_close(call_all);
	node_stop(&a);
	node_stop(&b);
	node_stop(&c);
}

static int test_teardown(void **state)
{
	(void)state;
	if (g_writer != NULL) {
		writer_stop(g_writer);
		free(g_writer->acks);
		g_writer->acks = NULL;
		g_writer = NULL;
	}
	for (size_t i = 0; i < sizeof(g_nodes) / sizeof(g_nodes[0]); i++) {
		struct node *n = g_nodes[i];
		if (n == NULL)
			continue;
		if (n->r.pid > 0) {
			pid_t pid = n->r.pid;
			kill(pid, SIGCONT);
			kvd_run_kill(&n->r);
			h_track(pid, false);
		}
		if (n->dir != NULL && getenv("KVTEST_KEEP") == NULL)
			tu_rmtree(n->dir);
		free(n->dir);
		n->dir = NULL;
		g_nodes[i] = NULL;
	}
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_teardown(test_handover, test_teardown),
	        cmocka_unit_test_teardown(test_failover_stopped, test_teardown),
	        cmocka_unit_test_teardown(test_failover_killed, test_teardown),
	        cmocka_unit_test_teardown(test_late_write, test_teardown),
	        cmocka_unit_test_teardown(test_etcd_killed, test_teardown),
	        cmocka_unit_test_teardown(test_failover_rounds, test_teardown),
	};

	if (geteuid() != 0) {
		printf("SKIP: loop devices need root (this runs as uid %d)\n", (int)geteuid());
		return 77;
	}
	if (access("/dev/loop-control", F_OK) != 0) {
		printf("SKIP: no /dev/loop-control: the loop driver is not available here\n");
		return 77;
	}
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
