/* test_client_kvd_daemons.c — passivation seen through TenantInfo; TenantDrop waits for a running
 * merge. */
#include "client_kvd.h"

/* ---- passivation through TenantInfo ------------------------------------------------ */

static bool wait_passive(kvc *c, const char *name, int timeout_ms, struct kvc_tenant_info *ti)
{
	uint64_t t0 = h_now_ms();

	while (h_now_ms() - t0 < (uint64_t)timeout_ms) {
		if (kvc_tenant_info(c, NULL, name, ti) == 0 && !ti->active)
			return true;
		poll(NULL, 0, 50);
	}
	return false;
}

static void check_pas_data(kvc *c, int n)
{
	struct items it;
	char k[16], v[16];

	scan_keys(c, "pas", &(struct kvc_scan_opts){0}, &it);
	assert_int_equal(it.n, (size_t)n);
	for (int i = 0; i < n; i++) {
		snprintf(k, sizeof(k), "k%04d", i);
		snprintf(v, sizeof(v), "v%04d", i);
		assert_true(item_is(&it.a[i], k, v));
	}
	items_free(&it);
}

/* ---- a tenant operation while a merge runs ------------------------------------ */

struct compact_job {
	kvc *c;
	int rv;
	atomic_int done; /* set once kvc_compact returned */
};

static void *compact_main(void *arg)
{
	struct compact_job *cj = arg;
	struct kvc_compact_result res;

	cj->rv = kvc_compact(cj->c, &(struct kvc_call){.tenant = "merging"}, 0, &res);
	atomic_store(&cj->done, 1);
	return NULL;
}

/* TenantDrop while a Compact (a merge) holds the tenant waits for it to end
 * and then drops the tenant, instead of failing. */
void test_drop_waits_for_merge(void **state)
{
	struct kvd_proc k;
	struct kvd_opts o = {.env = {"KVD_TEST_COMPACT_HOLD_MS=1500"}};
	struct compact_job cj = {0};
	struct kvc_status st;
	struct kvc_tenant_info ti;
	pthread_t th;
	uint64_t t0;
	kvc *c;

	(void)state;
	assert_int_equal(kvd_start(&k, &o), 0);
	c = client_open(client_url(&k), NULL, 20000);
	cj.c = client_open(client_url(&k), NULL, 20000);
	make_tenant(c, "merging", KVC_SYNC_NONE, 1, 0);
	for (int i = 0; i < 100; i++) {
		char key[16];
		snprintf(key, sizeof(key), "k%03d", i);
		put_str(c, &(struct kvc_call){.tenant = "merging", .status = &st}, key, "v", NULL);
	}
	assert_int_equal(pthread_create(&th, NULL, compact_main, &cj), 0);
	/* the Compact holds the tenant (kvd says so in test mode) */
	t0 = h_now_ms();
	while (!h_log_has(&k, "tenant merging held by Compact") && h_now_ms() - t0 < 10000)
		poll(NULL, 0, 10);
	assert_true(h_log_has(&k, "tenant merging held by Compact"));
	EXPECT_OK(st, kvc_tenant_drop(c, &(struct kvc_call){.status = &st}, "merging"));
	/* both went through: the drop waited for the merge (else one of the
	 * two fails: the drop as busy, or the Compact on a dropped tenant) */
	pthread_join(th, NULL);
	assert_int_equal(atomic_load(&cj.done), 1);
	assert_int_equal(cj.rv, 0);
	EXPECT_CODE(st, kvc_tenant_info(c, &(struct kvc_call){.status = &st}, "merging", &ti),
	            KVC_NOT_FOUND, NULL);
	kvc_close(cj.c);
	kvc_close(c);
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
}

void test_passivation(void **state)
{
	enum { N = 300 };
	struct kvd_proc k;
	struct kvd_opts opts = {.config_text = "idle_timeout = 1\n"};
	struct kvc_status st;
	struct kvc_call call = {.status = &st};
	struct kvc_tenant_info ti, before;
	struct kvc_daemon_stats ds;
	struct kvc_op ops[N];
	char keys[N][16], vals[N][16];
	uint64_t us = 0, w0, w1;
	kvc *c;

	(void)state;
	assert_int_equal(kvd_start(&k, &opts), 0);
	c = client_open(client_url(&k), NULL, 10000);
	make_tenant(c, "pas", KVC_SYNC_NONE, 0, 0);
	for (int i = 0; i < N; i++) {
		snprintf(keys[i], 16, "k%04d", i);
		snprintf(vals[i], 16, "v%04d", i);
		ops[i] = (struct kvc_op){.type = KVC_OP_PUT,
		                         .key = keys[i],
		                         .key_len = 5,
		                         .value = vals[i],
		                         .value_len = 5,
		                         .if_version = KVC_ANY_VERSION};
	}
	EXPECT_OK(st,
	          kvc_batch(c, &(struct kvc_call){.tenant = "pas", .status = &st}, ops, N, NULL));
	EXPECT_OK(st, kvc_tenant_info(c, &call, "pas", &before));
	assert_true(before.active);
	assert_true(before.keydir_bytes > 0);
	assert_int_equal(before.keys, N);

	/* by request */
	EXPECT_OK(st, kvc_tenant_passivate(c, &call, "pas"));
	EXPECT_OK(st, kvc_tenant_info(c, &call, "pas", &ti));
	assert_false(ti.active);
	assert_int_equal(ti.keydir_bytes, 0);
	assert_int_equal(ti.keys, N);
	assert_int_equal(ti.last_version, before.last_version);
	{
		struct kvc_tenant_entry *list;
		size_t n;
		bool active = true;
		EXPECT_OK(st, kvc_tenant_list(c, &call, &list, &n));
		assert_true(list_has(list, n, "pas", &active));
		assert_false(active);
		kvc_tenant_list_free(list);
	}
	w0 = wall_ms();
	EXPECT_OK(st, kvc_tenant_activate(c, &call, "pas", &us));
	w1 = wall_ms();
	assert_true(us > 0);
	EXPECT_OK(st, kvc_tenant_info(c, &call, "pas", &ti));
	assert_true(ti.active);
	assert_true(ti.keydir_bytes > 0);
	assert_int_equal(ti.activations, before.activations + 1);
	assert_true(ti.last_activation_ms + 1000 >= w0 && ti.last_activation_ms <= w1 + 1000);
	check_pas_data(c, N);

	/* by idle_timeout = 1: polled for, with a deadline */
	before = ti;
	assert_true(wait_passive(c, "pas", 10000, &ti));
	assert_int_equal(ti.keydir_bytes, 0);
	assert_int_equal(ti.keys, N);
	assert_int_equal(ti.activations, before.activations);
	EXPECT_OK(st, kvc_stats_daemon(c, &call, &ds));
	assert_true(ds.active_tenants < ds.tenants);
	/* the next request activates it and is answered normally */
	w0 = wall_ms();
	check_pas_data(c, N);
	w1 = wall_ms();
	EXPECT_OK(st, kvc_tenant_info(c, &call, "pas", &ti));
	assert_true(ti.active);
	assert_true(ti.keydir_bytes > 0);
	assert_int_equal(ti.activations, before.activations + 1);
	assert_true(ti.last_activation_ms + 1000 >= w0 && ti.last_activation_ms <= w1 + 1000);
	/* and it goes passive again once idle */
	assert_true(wait_passive(c, "pas", 10000, &ti));
	kvc_close(c);
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
}
