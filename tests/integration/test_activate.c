/* test_activate.c — tenants are activated off the workers. */
/*
 * kvd-test with one worker, so every tenant shares its loop, and with
 * KVD_TEST_ACTIVATE_HOLD_MS, so each activation takes at least that long:
 *   - while a passive tenant is activated, another tenant of the same worker
 *     keeps being served, each request well within the hold;
 *   - the requests waiting for the activation are answered after it, in the
 *     order they came (pipelined puts of one key: the last one wins);
 *   - a request whose deadline passes while it waits is answered
 *     DEADLINE_EXCEEDED, and was not applied;
 *   - TenantActivate of a passive tenant waits for the activation too; of a
 *     tenant that does not exist it says NOT_FOUND without creating it;
 *   - an activation runs at nice 19 for its first second, then at nice 0
 *     (kvd's threads' nice values, from /proc).
 */
#include "harness.h"

#include <dirent.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>

#include <cmocka.h> /* after the headers it needs */

#include "kvclient.h"

#define HOLD_MS 1500

static kvc *open_client(const char *url, const char *tenant, uint32_t timeout_ms)
{
	struct kvc_options o;
	kvc *c = NULL;

	kvc_options_init(&o);
	o.endpoint = url;
	o.tenant = tenant;
	o.timeout_ms = timeout_ms;
	return kvc_open(&o, &c) == 0 ? c : NULL;
}

static void start_hold(struct kvd_proc *k, const char *hold_env)
{
	struct kvd_opts o = {.extra = {"--workers", "1"}, .env = {hold_env}};

	assert_int_equal(kvd_start(k, &o), 0);
}

static void start(struct kvd_proc *k)
{
	start_hold(k, "KVD_TEST_ACTIVATE_HOLD_MS=1500"); /* HOLD_MS */
}

static void put_str(kvc *c, const char *tenant, const char *key, const char *value)
{
	struct kvc_tenant_opts to = {0};

	/* made on first use */
	(void)kvc_tenant_create(c, NULL, tenant, &to);
	assert_int_equal(kvc_put(c, &(struct kvc_call){.tenant = tenant}, key, strlen(key), value,
	                         strlen(value), NULL, NULL),
	                 0);
}

static void passivate(kvc *c, const char *tenant)
{
	struct kvc_status st = {0};

	if (kvc_tenant_passivate(c, &(struct kvc_call){.status = &st}, tenant) != 0)
		fail_msg("passivate %s: %s", tenant, st.message);
}

struct slow_get {
	const char *url;
	int rv;
	char value[32];
	_Atomic bool done;
};

static void *slow_get_main(void *arg)
{
	struct slow_get *g = arg;
	kvc *c = open_client(g->url, "big", 20000);
	struct kvc_value v;

	g->rv = -1;
	if (c != NULL) {
		g->rv = kvc_get(c, NULL, "k", 1, 0, 0, &v);
		if (g->rv == 0) {
			snprintf(g->value, sizeof(g->value), "%.*s", (int)v.len,
			         (const char *)v.data);
			kvc_value_free(&v);
		}
		kvc_close(c);
	}
	atomic_store(&g->done, true);
	return NULL;
}

/* A kvd (hold_env: its activation hold) with tenants "big", passive, and
 * "small", a key each; a client of "small". */
static kvc *big_passive(struct kvd_proc *k, const char *hold_env)
{
	kvc *c;

	start_hold(k, hold_env);
	c = open_client(k->surl, "small", 20000);
	assert_non_null(c);
	put_str(c, "big", "k", "big-value");
	put_str(c, "small", "k", "small-value");
	passivate(c, "big");
	return c;
}

static void test_other_tenants_served_while_one_activates(void **state)
{
	struct kvd_proc k;
	struct slow_get g = {0};
	pthread_t th;
	kvc *c;
	uint64_t t0, slowest = 0, during = 0;

	(void)state;
	c = big_passive(&k, "KVD_TEST_ACTIVATE_HOLD_MS=1500"); /* HOLD_MS */
	g.url = k.surl;
	t0 = h_now_ms();
	assert_int_equal(pthread_create(&th, NULL, slow_get_main, &g), 0);
	/* Gets of the other tenant until the slow one is answered: none waits
	 * for the activation (with it on the worker, one would wait HOLD_MS) */
	while (!atomic_load(&g.done)) {
		struct kvc_value v;
		uint64_t s = h_now_ms(), took;
		assert_int_equal(kvc_get(c, NULL, "k", 1, 0, 0, &v), 0);
		assert_memory_equal(v.data, "small-value", v.len);
		kvc_value_free(&v);
		took = h_now_ms() - s;
		if (took > slowest)
			slowest = took;
		if (!atomic_load(&g.done))
			during++;
	}
	assert_int_equal(pthread_join(th, NULL), 0);
	print_message("slow Get after %llu ms; %llu Gets of the other tenant meanwhile, the "
	              "slowest %llu ms\n",
	              (unsigned long long)(h_now_ms() - t0), (unsigned long long)during,
	              (unsigned long long)slowest);
	assert_int_equal(g.rv, 0);
	assert_string_equal(g.value, "big-value");
	assert_true(h_now_ms() - t0 >= HOLD_MS);
	assert_true(during >= 10);
	assert_true(slowest < HOLD_MS / 2);
	kvc_close(c);
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
}

struct order {
	int answered, failed;
	uint64_t last_version;
};

static void put_done(void *arg, const struct kvc_async_result *res)
{
	struct order *o = arg;

	o->answered++;
	if (res->rv != 0)
		o->failed++;
	else if (res->version <= o->last_version)
		o->failed++; /* answered out of order */
	else
		o->last_version = res->version;
}

static void test_parked_requests_keep_their_order(void **state)
{
	struct kvd_proc k;
	struct order ord = {0};
	struct kvc_value v;
	kvc *c;
	char val[16];

	(void)state;
	start(&k);
	c = open_client(k.surl, "big", 20000);
	assert_non_null(c);
	put_str(c, "big", "k", "v0");
	passivate(c, "big");
	for (int i = 1; i <= 20; i++) {
		snprintf(val, sizeof(val), "v%d", i);
		assert_int_equal(
		        kvc_put_async(c, NULL, "k", 1, val, strlen(val), NULL, put_done, &ord), 0);
	}
	kvc_drain(c);
	assert_int_equal(ord.answered, 20);
	assert_int_equal(ord.failed, 0);
	assert_int_equal(kvc_get(c, NULL, "k", 1, 0, 0, &v), 0);
	assert_int_equal(v.len, 3);
	assert_memory_equal(v.data, "v20", 3);
	assert_int_equal(v.version, ord.last_version);
	kvc_value_free(&v);
	kvc_close(c);
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
}

static void test_deadline_while_parked(void **state)
{
	struct kvd_proc k;
	struct kvc_status st = {0};
	struct kvc_value v;
	uint64_t us = 0;
	kvc *c;

	(void)state;
	start(&k);
	c = open_client(k.surl, "big", 20000);
	assert_non_null(c);
	put_str(c, "big", "k", "v");
	passivate(c, "big");
	/* a put that cannot wait the activation out is answered by kvd once its
	 * deadline passes (the client waits longer), and not applied: the Get
	 * after it parks behind it, so it would see it */
	{
		struct h_req q;
		struct h_reply r;
		void *rep = NULL;
		size_t n = 0;
		uint64_t t0 = h_now_ms();
		h_req_begin(&q, "Put", "big", 7, 2, 1);
		mp_kv_uint(&q.pk, "timeout_ms", 300);
		h_req_args(&q, 2);
		mp_kv_str(&q.pk, "key", "late");
		mp_kv_str(&q.pk, "value", "x");
		assert_int_equal(kvc_raw(c, 10000, q.sb.data, q.sb.size, &rep, &n), 0);
		msgpack_sbuffer_destroy(&q.sb);
		assert_int_equal(h_parse(rep, n, &r), 0);
		assert_int_equal(r.status, KVC_DEADLINE_EXCEEDED);
		assert_true(h_now_ms() - t0 < HOLD_MS - 300);
		h_reply_free(&r);
		free(rep);
	}
	assert_int_equal(kvc_get(c, NULL, "late", 4, 0, 0, &v), -KVC_NOT_FOUND);
	assert_int_equal(kvc_get(c, NULL, "k", 1, 0, 0, &v), 0);
	kvc_value_free(&v);
	/* TenantActivate waits for an activation off the worker as well */
	passivate(c, "big");
	assert_int_equal(kvc_tenant_activate(c, &(struct kvc_call){.status = &st}, "big", &us), 0);
	assert_int_equal(kvc_tenant_activate(c, &(struct kvc_call){.status = &st}, "nosuch", &us),
	                 -KVC_NOT_FOUND);
	assert_int_equal(kvc_tenant_info(c, NULL, "nosuch", &(struct kvc_tenant_info){0}),
	                 -KVC_NOT_FOUND);
	kvc_close(c);
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
}

/* The threads of pid at nice value nice (field 19 of their stat). */
static int threads_at_nice(pid_t pid, long nice)
{
	char path[320], buf[1024];
	struct dirent *de;
	DIR *d;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	if ((d = opendir(path)) == NULL)
		return -1;
	while ((de = readdir(d)) != NULL) {
		FILE *f;
		char *p;
		long v = 0;
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/stat", (int)pid, de->d_name);
		if ((f = fopen(path, "r")) == NULL)
			continue;
		p = fgets(buf, sizeof(buf), f);
		fclose(f);
		/* after "(comm)": state is field 3, nice field 19 */
		if (p == NULL || (p = strrchr(buf, ')')) == NULL)
			continue;
		for (int field = 2; field < 19 && p != NULL; field++)
			p = strchr(p + 1, ' ');
		if (p != NULL && sscanf(p + 1, "%ld", &v) == 1 && v == nice)
			n++;
	}
	closedir(d);
	return n;
}

static void test_long_activation_raised_to_nice_0(void **state)
{
	struct kvd_proc k;
	struct slow_get g = {0};
	pthread_t th;
	kvc *c;
	uint64_t t0;
	bool low = false, raised = false;

	(void)state;
	c = big_passive(&k, "KVD_TEST_ACTIVATE_HOLD_MS=4000");
	assert_int_equal(threads_at_nice(k.pid, 19), 0);
	g.url = k.surl;
	t0 = h_now_ms();
	assert_int_equal(pthread_create(&th, NULL, slow_get_main, &g), 0);
	/* the activator takes it at nice 19 ... */
	while (!low && !atomic_load(&g.done) && h_now_ms() - t0 < 3000)
		low = threads_at_nice(k.pid, 19) == 1;
	/* ... and is raised once it has run a second, the Get still waiting */
	while (low && !raised && !atomic_load(&g.done))
		raised = threads_at_nice(k.pid, 19) == 0;
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_true(low);
	assert_true(raised);
	assert_true(h_now_ms() - t0 >= 4000);
	assert_int_equal(g.rv, 0);
	assert_string_equal(g.value, "big-value");
	kvc_close(c);
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_other_tenants_served_while_one_activates),
	        cmocka_unit_test(test_parked_requests_keep_their_order),
	        cmocka_unit_test(test_deadline_while_parked),
	        cmocka_unit_test(test_long_activation_raised_to_nice_0),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
