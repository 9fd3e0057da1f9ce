/* test_client_kvd.c — libkvclient against a real kvd: every call; 64 threads against a model. */
/*
 * Through libkvclient against a real kvd on real sockets: every kvclient.h
 * call with its edge cases and error statuses, 64 threads checked against a
 * per-key linearizable model (again after a restart), passivation seen
 * through TenantInfo, TLS and TCP transports, and a resent write applied
 * once.
 *
 * Layout: one program, run by meson once per transport (argv[1]: stream or
 * nng: the tests client-kvd-stream and client-kvd-nng). This file holds main
 * and the helpers the parts share (client_kvd.h); the parts:
 *   api group    test_client_kvd_api.c: one kvd (max_value_size 1M,
 *                max_message_size 2M) shared by the tests of single calls:
 *                keys and values at their limits, conditions, TTL, exact and
 *                as-of reads, Versions, Batch, Scan (options, paging, a
 *                snapshot kept while writes go on between pages), Compact,
 *                tenants, stats, health, async calls, kvc_raw, transport
 *                errors.
 *   daemons      each test starts its own kvd: the concurrent model (and a
 *                restart; test_client_kvd_model.c), passivation and TenantDrop
 *                during a merge (test_client_kvd_daemons.c).
 *   nng          nng only: TLS/TCP/token, resend (test_client_kvd_nng.c).
 *
 * Nothing waits by sleeping: whatever has to happen (a TTL running out, a
 * tenant going passive) is polled for with a deadline.
 *
 * Exit status: cmocka's; 77 when everything that ran passed but the TLS part
 * was skipped because the openssl command is missing (said on stderr).
 */
#include "client_kvd.h"

bool use_nng;

const char *client_url(const struct kvd_proc *k)
{
	return use_nng ? k->url : k->surl;
}

uint64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

kvc *client_open(const char *url, const char *tenant, uint32_t timeout_ms)
{
	struct kvc_options o;
	kvc *c = NULL;

	kvc_options_init(&o);
	o.endpoint = url;
	if (tenant != NULL)
		o.tenant = tenant;
	if (timeout_ms != 0)
		o.timeout_ms = timeout_ms;
	assert_int_equal(kvc_open(&o, &c), 0);
	return c;
}

void fill_random(uint8_t *p, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++) {
		seed ^= seed << 13;
		seed ^= seed >> 7;
		seed ^= seed << 17;
		p[i] = (uint8_t)(seed >> 24);
	}
}

void items_free(struct items *it)
{
	for (size_t i = 0; i < it->n; i++) {
		free(it->a[i].k);
		free(it->a[i].v);
	}
	free(it->a);
	memset(it, 0, sizeof(*it));
}

static void *memdup(const void *p, size_t n)
{
	void *d = malloc(n ? n : 1);

	assert_non_null(d);
	if (n)
		memcpy(d, p, n);
	return d;
}

int scan_collect(kvc *c, const struct kvc_call *call, const struct kvc_scan_opts *o,
                 struct items *out)
{
	kvc_iter *it = NULL;
	struct kvc_item item;
	size_t cap = 0;
	int rv;

	memset(out, 0, sizeof(*out));
	if ((rv = kvc_scan_open(c, call, o, &it)) != 0)
		return rv;
	while ((rv = kvc_scan_next(it, &item)) == 0) {
		struct item *x;
		if (out->n == cap) {
			cap = cap ? cap * 2 : 64;
			out->a = realloc(out->a, cap * sizeof(*out->a));
			assert_non_null(out->a);
		}
		x = &out->a[out->n++];
		x->k = memdup(item.key, item.key_len);
		x->kl = item.key_len;
		x->v = item.value != NULL ? memdup(item.value, item.value_len) : NULL;
		x->vl = item.value_len;
		x->version = item.version;
	}
	out->revision = kvc_scan_revision(it);
	kvc_scan_close(it);
	return rv == 1 ? 0 : rv;
}

void scan_keys(kvc *c, const char *tenant, const struct kvc_scan_opts *o, struct items *it)
{
	struct kvc_status st;
	struct kvc_call call = {.tenant = tenant, .status = &st};
	int rv = scan_collect(c, &call, o, it);

	if (rv != 0)
		fail_msg("scan: %s '%s'", kvc_code_name(rv), st.message);
}

bool item_is(const struct item *x, const char *k, const char *v)
{
	return x->kl == strlen(k) && memcmp(x->k, k, x->kl) == 0 &&
	       (v == NULL || (x->v != NULL && x->vl == strlen(v) && memcmp(x->v, v, x->vl) == 0));
}

void put_str(kvc *c, const struct kvc_call *call, const char *k, const char *v,
             uint64_t *ret_version)
{
	int rv = kvc_put(c, call, k, strlen(k), v, strlen(v), NULL, ret_version);

	if (rv != 0)
		fail_msg("put %s: %s '%s'", k, kvc_code_name(rv),
		         call != NULL && call->status != NULL ? call->status->message : "");
}

void make_tenant(kvc *c, const char *name, enum kvc_sync sync, uint32_t history, uint64_t ttl_ms)
{
	struct kvc_tenant_opts o = {.sync = sync, .history = history, .ttl_ms = ttl_ms};
	struct kvc_status st;

	EXPECT_OK(st, kvc_tenant_create(c, &(struct kvc_call){.status = &st}, name, &o));
}

bool list_has(const struct kvc_tenant_entry *l, size_t n, const char *name, bool *active)
{
	for (size_t i = 0; i < n; i++) {
		if (strcmp(l[i].name, name) == 0) {
			if (active)
				*active = l[i].active;
			return true;
		}
	}
	return false;
}

void acall_cb(void *arg, const struct kvc_async_result *res)
{
	struct acall *a = arg;

	a->rv = res->rv;
	a->code = res->status->code;
	snprintf(a->msg, sizeof(a->msg), "%s", res->status->message);
	a->version = res->version;
	if (res->rv == 0 && res->value != NULL && res->value_len <= sizeof(a->value)) {
		memcpy(a->value, res->value, res->value_len);
		a->len = res->value_len;
	}
	atomic_fetch_add(a->done, 1);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest api_tests[] = {
	        cmocka_unit_test(test_keys_and_values),
	        cmocka_unit_test(test_conditions),
	        cmocka_unit_test(test_ttl),
	        cmocka_unit_test(test_history),
	        cmocka_unit_test(test_batch),
	        cmocka_unit_test(test_scan_options),
	        cmocka_unit_test(test_scan_snapshot_paging),
	        cmocka_unit_test(test_compact),
	        cmocka_unit_test(test_tenants),
	        cmocka_unit_test(test_async_raw_and_transport),
	};
	const struct CMUnitTest daemon_tests[] = {
	        cmocka_unit_test(test_model),
	        cmocka_unit_test(test_passivation),
	        cmocka_unit_test(test_drop_waits_for_merge),
	};
	const struct CMUnitTest nng_tests[] = {
	        cmocka_unit_test(test_tls_tcp),
	        cmocka_unit_test(test_resend_applied_once),
	        cmocka_unit_test(test_short_lived_handles),
	};
	int failed;

	if (argc != 2 || (strcmp(argv[1], "stream") != 0 && strcmp(argv[1], "nng") != 0)) {
		fprintf(stderr, "usage: test_client_kvd stream|nng\n");
		return 2;
	}
	use_nng = strcmp(argv[1], "nng") == 0;
	signal(SIGPIPE, SIG_IGN);
	failed = cmocka_run_group_tests_name("api", api_tests, api_setup, api_teardown);
	failed += cmocka_run_group_tests_name("daemons", daemon_tests, NULL, NULL);
	if (use_nng)
		failed += cmocka_run_group_tests_name("nng", nng_tests, NULL, NULL);
	if (failed == 0 && tls_skipped) {
		fprintf(stderr, "SKIP: the TLS part did not run (openssl missing); everything "
		                "else passed\n");
		return 77;
	}
	return failed;
}
