/* test_busy.c — one worker's loop under many tenants' writes and tenant operations at once. */
/*
 * kvd with one worker: every tenant's writes, its engine event fds and every
 * stream connection are on one epoll loop. Writers (one connection and one
 * tenant each, sync=always, so completions arrive on the event fds while the
 * loop runs) race a connection that passivates and activates their tenants,
 * which lets a tenant go from the loop in the middle of a turn whose events
 * still name it. Every write must be answered (OK, or UNAVAILABLE while its
 * tenant is being passivated), every tenant must hold what was acknowledged,
 * and kvd must stop cleanly: under AddressSanitizer a use of a freed entry
 * aborts it.
 */
#include "harness.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>

#include <cmocka.h> /* after the headers it needs */

#include "kvclient.h"

#define NTENANTS 12
#define RUN_MS   2500

struct writer {
	const char *url;
	char tenant[16];
	uint64_t acked;    /* the last key index acknowledged */
	uint64_t refused;  /* UNAVAILABLE answers (tenant being passivated) */
	int failed;        /* the first other error, 0 if none */
	char message[256]; /* its message */
};

static _Atomic bool stop_flag;

static kvc *open_client(const char *url, const char *tenant)
{
	struct kvc_options o;
	kvc *c = NULL;

	kvc_options_init(&o);
	o.endpoint = url;
	o.tenant = tenant;
	o.timeout_ms = 20000;
	return kvc_open(&o, &c) == 0 ? c : NULL;
}

static void *writer_main(void *arg)
{
	struct writer *wr = arg;
	kvc *c = open_client(wr->url, wr->tenant);
	uint64_t i = 0;

	if (c == NULL) {
		wr->failed = -KVC_INTERNAL;
		return NULL;
	}
	while (!atomic_load(&stop_flag)) {
		struct kvc_status st = {0};
		struct kvc_call call = {.status = &st};
		char key[32];
		int rv;
		snprintf(key, sizeof(key), "k%08llu", (unsigned long long)i);
		rv = kvc_put(c, &call, key, strlen(key), key, strlen(key), NULL, NULL);
		if (rv == 0) {
			wr->acked = i++;
		} else if (rv == -KVC_UNAVAILABLE && strstr(st.message, "busy") != NULL) {
			wr->refused++;
		} else {
			wr->failed = rv;
			snprintf(wr->message, sizeof(wr->message), "%s", st.message);
			break;
		}
	}
	kvc_close(c);
	return NULL;
}

static void test_tenants_leave_the_loop_mid_turn(void **state)
{
	struct kvd_proc k;
	struct kvd_opts o = {.extra = {"--workers", "1"}};
	struct writer wr[NTENANTS];
	pthread_t th[NTENANTS];
	kvc *admin;
	uint64_t t0, cycles = 0;

	(void)state;
	assert_int_equal(kvd_start(&k, &o), 0);
	admin = open_client(k.surl, "default");
	assert_non_null(admin);
	for (int i = 0; i < NTENANTS; i++) {
		struct kvc_tenant_opts to = {.sync = KVC_SYNC_ALWAYS};
		memset(&wr[i], 0, sizeof(wr[i]));
		wr[i].url = k.surl;
		snprintf(wr[i].tenant, sizeof(wr[i].tenant), "busy%02d", i);
		assert_int_equal(kvc_tenant_create(admin, NULL, wr[i].tenant, &to), 0);
	}
	atomic_store(&stop_flag, false);
	for (int i = 0; i < NTENANTS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, writer_main, &wr[i]), 0);
	t0 = h_now_ms();
	while (h_now_ms() - t0 < RUN_MS) {
		const char *name = wr[cycles % NTENANTS].tenant;
		struct kvc_status st = {0};
		struct kvc_call call = {.status = &st};
		int rv = kvc_tenant_passivate(admin, &call, name);
		/* "busy, try again" is an answer too; anything else is not */
		if (rv != 0 && !(rv == -KVC_UNAVAILABLE && strstr(st.message, "busy") != NULL)) {
			h_dump_log(&k);
			fail_msg("passivate %s: %d (%s)", name, rv, st.message);
		}
		if ((rv = kvc_tenant_activate(admin, &call, name, NULL)) != 0) {
			h_dump_log(&k);
			fail_msg("activate %s: %d (%s)", name, rv, st.message);
		}
		cycles++;
	}
	atomic_store(&stop_flag, true);
	for (int i = 0; i < NTENANTS; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	print_message("%llu passivate/activate cycles\n", (unsigned long long)cycles);
	for (int i = 0; i < NTENANTS; i++) {
		struct kvc_value v;
		char key[32];
		if (wr[i].failed != 0) {
			h_dump_log(&k);
			fail_msg("tenant %s: put failed: %d (%s)", wr[i].tenant, wr[i].failed,
			         wr[i].message);
		}
		assert_true(wr[i].acked > 0);
		/* the last acknowledged write survived passivation */
		snprintf(key, sizeof(key), "k%08llu", (unsigned long long)wr[i].acked);
		assert_int_equal(kvc_get(admin, &(struct kvc_call){.tenant = wr[i].tenant}, key,
		                         strlen(key), 0, 0, &v),
		                 0);
		assert_int_equal(v.len, strlen(key));
		assert_memory_equal(v.data, key, v.len);
		kvc_value_free(&v);
	}
	assert_true(cycles > 0);
	kvc_close(admin);
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_tenants_leave_the_loop_mid_turn),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
