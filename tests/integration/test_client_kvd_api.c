/* test_client_kvd_api.c — each kvclient.h call against one kvd: edge cases, error statuses. */
#include "client_kvd.h"

static int key_cmp(const void *a, size_t al, const void *b, size_t bl)
{
	int r = memcmp(a, b, al < bl ? al : bl);

	return r != 0 ? r : (al < bl ? -1 : al > bl);
}

/* Get k and compare with v (NULL: must be NOT_FOUND). */
static void check_str(kvc *c, const struct kvc_call *call, const char *k, const char *v)
{
	struct kvc_value got;
	int rv = kvc_get(c, call, k, strlen(k), 0, 0, &got);

	if (v == NULL) {
		if (rv != -KVC_NOT_FOUND)
			fail_msg("get %s: %s, want NOT_FOUND", k, kvc_code_name(rv));
		return;
	}
	if (rv != 0)
		fail_msg("get %s: %s", k, kvc_code_name(rv));
	if (got.len != strlen(v) || memcmp(got.data, v, got.len) != 0)
		fail_msg("get %s: '%.*s', want '%s'", k, (int)got.len, (char *)got.data, v);
	kvc_value_free(&got);
}

/* ---- the api group ---------------------------------------------------------------- */

static struct kvd_proc api_kvd;
static kvc *api;

int api_setup(void **state)
{
	struct kvd_opts o = {.config_text = "max_value_size = 1M\nmax_message_size = 2M\n"};

	(void)state;
	if (kvd_start(&api_kvd, &o) != 0)
		return -1;
	api = client_open(client_url(&api_kvd), NULL, 10000);
	return 0;
}

int api_teardown(void **state)
{
	int rv;

	(void)state;
	kvc_close(api);
	rv = kvd_stop(&api_kvd);
	kvd_cleanup(&api_kvd, false);
	return rv == 0 ? 0 : -1;
}

/* Binary keys (NUL, 0xFF, a key that is another's prefix), empty values,
 * the largest key, values at and over max_value_size, and requests over
 * max_message_size. */
void test_keys_and_values(void **state)
{
	static const uint8_t k1[] = {0x00, 'a', 0xff, 0x00};
	static const uint8_t k2[] = {0xff};
	static const uint8_t k3[] = {0xff, 0x00};
	static const uint8_t v1[] = {0x00, 0xff, 0x01, 0x00};
	struct kvc_status st;
	struct kvc_call call = {.status = &st};
	struct kvc_value got;
	uint64_t ver1 = 0, ver2 = 0, ver3 = 0, t0 = wall_ms(), sentinel;
	uint8_t *big, *val;
	const size_t vmax = 1u << 20;

	(void)state;
	EXPECT_OK(st, kvc_put(api, &call, k1, sizeof(k1), v1, sizeof(v1), NULL, &ver1));
	EXPECT_OK(st, kvc_put(api, &call, k2, sizeof(k2), "two", 3, NULL, &ver2));
	EXPECT_OK(st, kvc_put(api, &call, k3, sizeof(k3), "three", 5, NULL, &ver3));
	assert_true(ver1 > 0 && ver2 == ver1 + 1 && ver3 == ver2 + 1);
	EXPECT_OK(st, kvc_get(api, &call, k1, sizeof(k1), 0, 0, &got));
	assert_int_equal(got.len, sizeof(v1));
	assert_memory_equal(got.data, v1, sizeof(v1));
	assert_int_equal(got.version, ver1);
	assert_true(got.timestamp_ms + 1000 >= t0 && got.timestamp_ms <= wall_ms() + 1000);
	assert_int_equal(got.expiry_ms, 0);
	kvc_value_free(&got);
	kvc_value_free(&got); /* twice is harmless */
	EXPECT_OK(st, kvc_get(api, &call, k3, sizeof(k3), 0, 0, &got));
	assert_int_equal(got.len, 5);
	assert_memory_equal(got.data, "three", 5);
	kvc_value_free(&got);
	/* k1 without its trailing NUL is another key */
	EXPECT_CODE(st, kvc_get(api, &call, k1, 3, 0, 0, &got), KVC_NOT_FOUND, NULL);

	/* empty values: get, versions and scan all say 0 bytes */
	EXPECT_OK(st, kvc_put(api, &call, "empty", 5, NULL, 0, NULL, NULL));
	EXPECT_OK(st, kvc_get(api, &call, "empty", 5, 0, 0, &got));
	assert_int_equal(got.len, 0);
	assert_non_null(got.data);
	kvc_value_free(&got);
	{
		struct kvc_version *vl = NULL;
		size_t n = 0;
		EXPECT_OK(st, kvc_versions(api, &call, "empty", 5, 0, 0, true, &vl, &n, NULL));
		assert_int_equal(n, 1);
		assert_false(vl[0].deleted);
		assert_non_null(vl[0].data);
		assert_int_equal(vl[0].len, 0);
		kvc_versions_free(vl, n);
	}
	{
		struct items it;
		struct kvc_scan_opts so = {.prefix = "empty", .prefix_len = 5};
		assert_int_equal(scan_collect(api, &call, &so, &it), 0);
		assert_int_equal(it.n, 1);
		assert_non_null(it.a[0].v);
		assert_int_equal(it.a[0].vl, 0);
		items_free(&it);
	}

	/* the largest key: 65536 bytes of everything, NUL and 0xFF included */
	big = malloc(KV_KEY_SIZE_MAX + 1);
	fill_random(big, KV_KEY_SIZE_MAX + 1, 42);
	big[0] = 0x00;
	big[KV_KEY_SIZE_MAX - 1] = 0xff;
	EXPECT_OK(st, kvc_put(api, &call, big, KV_KEY_SIZE_MAX, "max", 3, NULL, NULL));
	EXPECT_OK(st, kvc_get(api, &call, big, KV_KEY_SIZE_MAX, 0, 0, &got));
	assert_int_equal(got.len, 3);
	kvc_value_free(&got);
	{
		struct items it;
		struct kvc_scan_opts so = {.prefix = big, .prefix_len = 1000};
		assert_int_equal(scan_collect(api, &call, &so, &it), 0);
		assert_int_equal(it.n, 1);
		assert_int_equal(it.a[0].kl, KV_KEY_SIZE_MAX);
		assert_memory_equal(it.a[0].k, big, KV_KEY_SIZE_MAX);
		items_free(&it);
	}
	/* one byte more: the library refuses, and so does the server */
	sentinel = 777;
	EXPECT_CODE(st, kvc_put(api, &call, big, KV_KEY_SIZE_MAX + 1, "x", 1, NULL, &sentinel),
	            KVC_INVALID_ARGUMENT, "65537");
	assert_int_equal(sentinel, 777); /* outputs untouched on failure */
	EXPECT_CODE(st, kvc_get(api, &call, big, KV_KEY_SIZE_MAX + 1, 0, 0, &got),
	            KVC_INVALID_ARGUMENT, NULL);
	EXPECT_CODE(st, kvc_put(api, &call, "", 0, "x", 1, NULL, NULL), KVC_INVALID_ARGUMENT, NULL);
	EXPECT_CODE(st, kvc_delete(api, &call, NULL, 0, KVC_ANY_VERSION, NULL),
	            KVC_INVALID_ARGUMENT, NULL);
	EXPECT_CODE(st, kvc_put(api, &call, "k", 1, NULL, 5, NULL, NULL), KVC_INVALID_ARGUMENT,
	            NULL);
	{
		/* the server's own check, past the library: a raw Put with a
		 * 65537-byte key */
		msgpack_sbuffer sb;
		msgpack_packer pk;
		void *rep = NULL;
		size_t n = 0;
		struct h_reply r;
		msgpack_sbuffer_init(&sb);
		msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
		msgpack_pack_map(&pk, 4);
		mp_kv_uint(&pk, "v", 1);
		mp_kv_uint(&pk, "id", 5);
		mp_kv_str(&pk, "method", "Put");
		mp_pack_cstr(&pk, "args");
		msgpack_pack_map(&pk, 2);
		mp_kv_bin(&pk, "key", big, KV_KEY_SIZE_MAX + 1);
		mp_kv_bin(&pk, "value", "x", 1);
		assert_int_equal(kvc_raw(api, 5000, sb.data, sb.size, &rep, &n), 0);
		assert_int_equal(h_parse(rep, n, &r), 0);
		assert_int_equal(r.status, KVC_INVALID_ARGUMENT);
		assert_int_equal(r.id, 5);
		assert_non_null(strstr(r.message, "65536"));
		h_reply_free(&r);
		free(rep);
		msgpack_sbuffer_destroy(&sb);
	}
	free(big);

	/* values: exactly max_value_size is stored byte for byte; one more
	 * byte is refused by the server with a message, also in a batch */
	val = malloc(vmax + 1);
	fill_random(val, vmax + 1, 7);
	EXPECT_OK(st, kvc_put(api, &call, "bigval", 6, val, vmax, NULL, &ver1));
	EXPECT_OK(st, kvc_get(api, &call, "bigval", 6, 0, 0, &got));
	assert_int_equal(got.len, vmax);
	assert_memory_equal(got.data, val, vmax);
	assert_int_equal(got.version, ver1);
	kvc_value_free(&got);
	EXPECT_CODE(st, kvc_put(api, &call, "bigval", 6, val, vmax + 1, NULL, NULL),
	            KVC_INVALID_ARGUMENT, "limit");
	{
		struct kvc_op ops[2] = {
		        {.type = KVC_OP_PUT,
		         .key = "b-ok",
		         .key_len = 4,
		         .value = "1",
		         .value_len = 1,
		         .if_version = KVC_ANY_VERSION},
		        {.type = KVC_OP_PUT,
		         .key = "bigval",
		         .key_len = 6,
		         .value = val,
		         .value_len = vmax + 1,
		         .if_version = KVC_ANY_VERSION},
		};
		EXPECT_CODE(st, kvc_batch(api, &call, ops, 2, NULL), KVC_INVALID_ARGUMENT, "op 1");
		check_str(api, NULL, "b-ok", NULL); /* all or nothing */
	}
	/* the largest key with the largest value still fits the message */
	{
		uint8_t *k = calloc(1, KV_KEY_SIZE_MAX);
		EXPECT_OK(st, kvc_put(api, &call, k, KV_KEY_SIZE_MAX, val, vmax, NULL, NULL));
		EXPECT_OK(st, kvc_delete(api, &call, k, KV_KEY_SIZE_MAX, KVC_ANY_VERSION, NULL));
		free(k);
	}
	/* over the daemon's max_message_size: a client told the limit refuses
	 * before sending; one that is not sees its request dropped by the
	 * transport (a timeout or a lost connection), and kvd goes on */
	{
		size_t n = 3u << 20;
		uint8_t *huge = calloc(1, n);
		struct kvc_options o;
		kvc *c2;
		int rv;
		kvc_options_init(&o);
		o.endpoint = client_url(&api_kvd);
		o.max_message_size = 2u << 20;
		assert_int_equal(kvc_open(&o, &c2), 0);
		EXPECT_CODE(st, kvc_put(c2, &call, "huge", 4, huge, n, NULL, NULL),
		            KVC_INVALID_ARGUMENT, "max_message_size");
		kvc_close(c2);
		/* The stream transport answers it before it hangs up. (nng drops
		 * it and the connection, which test_kvd.c's message size test
		 * covers; closing this handle while its dialer reconnects is how
		 * peers leave nng 1.5.2 listeners mid-handshake, which kvd repairs
		 * by replacing the listener and so its other connections.) */
		if (!use_nng) {
			c2 = client_open(client_url(&api_kvd), NULL, 1500);
			rv = CALL(st, kvc_put(c2, &call, "huge", 4, huge, n, NULL, NULL));
			if (rv != -KVC_RESOURCE_EXHAUSTED || strstr(st.message, "frame of") == NULL)
				fail_msg("oversized request: %s '%s'", kvc_code_name(rv),
				         st.message);
			assert_int_equal(st.code, -rv);
			kvc_close(c2);
		}
		free(huge);
		check_str(api, NULL, "huge", NULL);
	}
	free(val);
}

/* if_version 0 / right / wrong on puts and deletes. */
void test_conditions(void **state)
{
	struct kvc_status st;
	struct kvc_call call = {.status = &st};
	struct kvc_write w = KVC_WRITE_INIT;
	uint64_t v1 = 0, v2 = 0, v3 = 0, out = 4242;

	(void)state;
	w.if_version = 0;
	EXPECT_OK(st, kvc_put(api, &call, "cas", 3, "a", 1, &w, &v1));
	EXPECT_CODE(st, kvc_put(api, &call, "cas", 3, "b", 1, &w, &out), KVC_FAILED_PRECONDITION,
	            "if_version");
	assert_int_equal(out, 4242);
	w.if_version = v1;
	EXPECT_OK(st, kvc_put(api, &call, "cas", 3, "b", 1, &w, &v2));
	assert_true(v2 > v1);
	/* v1 is stale now; a version never given is wrong too */
	EXPECT_CODE(st, kvc_put(api, &call, "cas", 3, "c", 1, &w, NULL), KVC_FAILED_PRECONDITION,
	            NULL);
	w.if_version = v2 + 1000000;
	EXPECT_CODE(st, kvc_put(api, &call, "cas", 3, "c", 1, &w, NULL), KVC_FAILED_PRECONDITION,
	            NULL);
	check_str(api, NULL, "cas", "b");
	EXPECT_CODE(st, kvc_delete(api, &call, "cas", 3, v1, &out), KVC_FAILED_PRECONDITION, NULL);
	EXPECT_CODE(st, kvc_delete(api, &call, "cas", 3, 0, &out), KVC_FAILED_PRECONDITION, NULL);
	assert_int_equal(out, 4242);
	EXPECT_OK(st, kvc_delete(api, &call, "cas", 3, v2, &v3));
	assert_true(v3 > v2);
	EXPECT_CODE(st, kvc_get(api, &call, "cas", 3, 0, 0, NULL), KVC_NOT_FOUND, "not found");
	/* deleting what does not exist writes nothing */
	EXPECT_CODE(st, kvc_delete(api, &call, "cas", 3, KVC_ANY_VERSION, NULL), KVC_NOT_FOUND,
	            NULL);
	EXPECT_CODE(st, kvc_delete(api, &call, "never", 5, KVC_ANY_VERSION, NULL), KVC_NOT_FOUND,
	            NULL);
	/* a deleted key does not exist: if_version 0 holds again, the old
	 * version does not */
	w.if_version = v2;
	EXPECT_CODE(st, kvc_put(api, &call, "cas", 3, "d", 1, &w, NULL), KVC_FAILED_PRECONDITION,
	            NULL);
	w.if_version = 0;
	EXPECT_OK(st, kvc_put(api, &call, "cas", 3, "d", 1, &w, &v1));
	assert_true(v1 > v3);
	check_str(api, NULL, "cas", "d");
	/* a get without a place for the value still says whether it exists */
	EXPECT_OK(st, kvc_get(api, &call, "cas", 3, 0, 0, NULL));
}

/* Expiry: a per-put TTL, the tenant's default TTL, KVC_TTL_NONE; observed
 * by polling with a deadline. */
void test_ttl(void **state)
{
	struct kvc_status st;
	struct kvc_call call = {.status = &st};
	struct kvc_call tcall = {.tenant = "ttl-default", .status = &st};
	struct kvc_write w = KVC_WRITE_INIT;
	struct kvc_value got;
	uint64_t t0, seen_at = 0, deadline;
	bool gone = false;
	int rv;

	(void)state;
	w.ttl_ms = 300;
	t0 = h_now_ms();
	EXPECT_OK(st, kvc_put(api, &call, "short", 5, "lived", 5, &w, NULL));
	EXPECT_OK(st, kvc_put(api, &call, "long", 4, "lived", 5, NULL, NULL));
	EXPECT_OK(st, kvc_get(api, &call, "short", 5, 0, 0, &got));
	assert_int_equal(got.expiry_ms, got.timestamp_ms + 300);
	kvc_value_free(&got);
	deadline = t0 + 5000;
	while (h_now_ms() < deadline) {
		rv = kvc_get(api, &call, "short", 5, 0, 0, NULL);
		if (rv == -KVC_NOT_FOUND) {
			seen_at = h_now_ms();
			gone = true;
			break;
		}
		assert_int_equal(rv, 0);
		poll(NULL, 0, 10);
	}
	assert_true(gone);
	/* not before its time (a few ms for wall and monotonic clocks) */
	assert_true(seen_at - t0 + 5 >= 300);
	check_str(api, NULL, "long", "lived");
	{
		/* expired versions are not listed; an expired key does not exist */
		struct kvc_version *vl = NULL;
		size_t n = 99;
		EXPECT_OK(st, kvc_versions(api, &call, "short", 5, 0, 0, true, &vl, &n, NULL));
		assert_int_equal(n, 0);
		kvc_versions_free(vl, n);
		w.if_version = 0;
		w.ttl_ms = 0;
		EXPECT_OK(st, kvc_put(api, &call, "short", 5, "again", 5, &w, NULL));
		check_str(api, NULL, "short", "again");
	}

	/* the tenant's default TTL: ttl 0 takes it, KVC_TTL_NONE overrides it */
	make_tenant(api, "ttl-default", KVC_SYNC_NONE, 0, 250);
	{
		struct kvc_tenant_info ti;
		EXPECT_OK(st, kvc_tenant_info(api, &call, "ttl-default", &ti));
		assert_int_equal(ti.ttl_ms, 250);
	}
	t0 = h_now_ms();
	EXPECT_OK(st, kvc_put(api, &tcall, "default", 7, "x", 1, NULL, NULL));
	w = (struct kvc_write)KVC_WRITE_INIT;
	w.ttl_ms = KVC_TTL_NONE;
	EXPECT_OK(st, kvc_put(api, &tcall, "forever", 7, "y", 1, &w, NULL));
	{
		struct kvc_op ops[2] = {
		        {.type = KVC_OP_PUT,
		         .key = "b-default",
		         .key_len = 9,
		         .value = "1",
		         .value_len = 1,
		         .if_version = KVC_ANY_VERSION},
		        {.type = KVC_OP_PUT,
		         .key = "b-forever",
		         .key_len = 9,
		         .value = "2",
		         .value_len = 1,
		         .if_version = KVC_ANY_VERSION,
		         .ttl_ms = KVC_TTL_NONE},
		};
		EXPECT_OK(st, kvc_batch(api, &tcall, ops, 2, NULL));
	}
	EXPECT_OK(st, kvc_get(api, &tcall, "default", 7, 0, 0, &got));
	assert_int_equal(got.expiry_ms, got.timestamp_ms + 250);
	kvc_value_free(&got);
	EXPECT_OK(st, kvc_get(api, &tcall, "forever", 7, 0, 0, &got));
	assert_int_equal(got.expiry_ms, 0);
	kvc_value_free(&got);
	gone = false;
	while (h_now_ms() < t0 + 5000 && !gone) {
		gone = kvc_get(api, &tcall, "default", 7, 0, 0, NULL) == -KVC_NOT_FOUND &&
		       kvc_get(api, &tcall, "b-default", 9, 0, 0, NULL) == -KVC_NOT_FOUND;
		if (!gone)
			poll(NULL, 0, 10);
	}
	assert_true(gone);
	assert_true(h_now_ms() - t0 + 5 >= 250);
	check_str(api, &tcall, "forever", "y");
	check_str(api, &tcall, "b-forever", "2");
}

/* Exact versions and as-of reads across a delete; Versions with limit,
 * before and values. */
void test_history(void **state)
{
	struct kvc_status st;
	struct kvc_call call = {.tenant = "hist", .status = &st};
	struct kvc_value got;
	struct kvc_version *vl = NULL;
	size_t n = 0;
	bool trunc = true;
	uint64_t v1, v2, v3, v4, v5;

	(void)state;
	make_tenant(api, "hist", KVC_SYNC_INTERVAL, 100, 0);
	put_str(api, &call, "doc", "a", &v1);
	put_str(api, &call, "doc", "b", &v2);
	EXPECT_OK(st, kvc_delete(api, &call, "doc", 3, KVC_ANY_VERSION, &v3));
	put_str(api, &call, "doc", "c", &v4);
	put_str(api, &call, "other", "o", &v5);
	assert_true(v1 < v2 && v2 < v3 && v3 < v4 && v4 < v5);

	EXPECT_OK(st, kvc_get(api, &call, "doc", 3, v1, 0, &got));
	assert_int_equal(got.version, v1);
	assert_memory_equal(got.data, "a", 1);
	kvc_value_free(&got);
	EXPECT_OK(st, kvc_get(api, &call, "doc", 3, v2, 0, &got));
	assert_memory_equal(got.data, "b", 1);
	kvc_value_free(&got);
	EXPECT_CODE(st, kvc_get(api, &call, "doc", 3, v3, 0, &got), KVC_NOT_FOUND, NULL);
	EXPECT_CODE(st, kvc_get(api, &call, "doc", 3, v5, 0, &got), KVC_NOT_FOUND, NULL);
	EXPECT_CODE(st, kvc_get(api, &call, "doc", 3, v5 + 1000, 0, &got), KVC_NOT_FOUND, NULL);
	EXPECT_OK(st, kvc_get(api, &call, "doc", 3, 0, v2, &got));
	assert_int_equal(got.version, v2);
	kvc_value_free(&got);
	EXPECT_OK(st, kvc_get(api, &call, "doc", 3, 0, v1, &got));
	assert_int_equal(got.version, v1);
	kvc_value_free(&got);
	EXPECT_CODE(st, kvc_get(api, &call, "doc", 3, 0, v3, &got), KVC_NOT_FOUND, NULL);
	EXPECT_OK(st, kvc_get(api, &call, "doc", 3, 0, v5, &got));
	assert_int_equal(got.version, v4);
	assert_memory_equal(got.data, "c", 1);
	kvc_value_free(&got);
	EXPECT_OK(st, kvc_get(api, &call, "doc", 3, 0, 0, &got));
	assert_int_equal(got.version, v4);
	kvc_value_free(&got);

	EXPECT_OK(st, kvc_versions(api, &call, "doc", 3, 0, 0, true, &vl, &n, &trunc));
	assert_int_equal(n, 4);
	assert_false(trunc);
	assert_int_equal(vl[0].version, v4);
	assert_int_equal(vl[1].version, v3);
	assert_int_equal(vl[2].version, v2);
	assert_int_equal(vl[3].version, v1);
	assert_true(vl[1].deleted && vl[1].data == NULL);
	assert_true(!vl[0].deleted && vl[0].len == 1 && memcmp(vl[0].data, "c", 1) == 0);
	assert_true(vl[3].len == 1 && memcmp(vl[3].data, "a", 1) == 0);
	for (size_t i = 1; i < n; i++)
		assert_true(vl[i].timestamp_ms <= vl[i - 1].timestamp_ms);
	kvc_versions_free(vl, n);
	EXPECT_OK(st, kvc_versions(api, &call, "doc", 3, 2, 0, true, &vl, &n, NULL));
	assert_int_equal(n, 2);
	assert_int_equal(vl[1].version, v3);
	kvc_versions_free(vl, n);
	EXPECT_OK(st, kvc_versions(api, &call, "doc", 3, 0, v3, true, &vl, &n, NULL));
	assert_int_equal(n, 2);
	assert_int_equal(vl[0].version, v2);
	assert_int_equal(vl[1].version, v1);
	kvc_versions_free(vl, n);
	EXPECT_OK(st, kvc_versions(api, &call, "doc", 3, 1, v3, false, &vl, &n, NULL));
	assert_int_equal(n, 1);
	assert_int_equal(vl[0].version, v2);
	assert_null(vl[0].data);
	kvc_versions_free(vl, n);
	EXPECT_OK(st, kvc_versions(api, &call, "nothing", 7, 0, 0, true, &vl, &n, &trunc));
	assert_int_equal(n, 0);
	kvc_versions_free(vl, n);
	/* a list nobody wants is freed by the library */
	EXPECT_OK(st, kvc_versions(api, &call, "doc", 3, 0, 0, true, NULL, NULL, NULL));

	/* 30 versions: the default limit is 10, newest first, contiguous */
	for (int i = 0; i < 30; i++) {
		char v[8];
		snprintf(v, sizeof(v), "%d", i);
		put_str(api, &call, "many", v, &v5);
	}
	EXPECT_OK(st, kvc_versions(api, &call, "many", 4, 0, 0, true, &vl, &n, NULL));
	assert_int_equal(n, 10);
	for (size_t i = 0; i < n; i++) {
		char v[8];
		assert_int_equal(vl[i].version, v5 - i);
		snprintf(v, sizeof(v), "%zu", 29 - i);
		assert_int_equal(vl[i].len, strlen(v));
		assert_memory_equal(vl[i].data, v, vl[i].len);
	}
	kvc_versions_free(vl, n);
	EXPECT_OK(st, kvc_versions(api, &call, "many", 4, 5000, 0, false, &vl, &n, NULL));
	assert_int_equal(n, 30);
	kvc_versions_free(vl, n);
}

/* Batch: contiguous versions, ops that see the ops before them, all or
 * nothing with the failing op's index. */
void test_batch(void **state)
{
	struct kvc_status st;
	struct kvc_call call = {.status = &st};
	size_t failed = 999;
	uint64_t vb = 0;

	(void)state;
	{
		struct kvc_op ops[4] = {
		        {.type = KVC_OP_PUT,
		         .key = "ba1",
		         .key_len = 3,
		         .value = "1",
		         .value_len = 1,
		         .if_version = KVC_ANY_VERSION},
		        {.type = KVC_OP_DELETE,
		         .key = "ba-missing",
		         .key_len = 10,
		         .if_version = KVC_ANY_VERSION},
		        {.type = KVC_OP_PUT,
		         .key = "ba2",
		         .key_len = 3,
		         .value = NULL,
		         .value_len = 0,
		         .if_version = 0},
		        {.type = KVC_OP_PUT,
		         .key = "\0\xff",
		         .key_len = 2,
		         .value = "\xff\0",
		         .value_len = 2,
		         .if_version = KVC_ANY_VERSION},
		};
		EXPECT_OK(st, kvc_batch(api, &call, ops, 4, &failed));
		assert_int_equal(failed, 999);
		assert_true(ops[0].version > 0);
		assert_int_equal(ops[1].version, 0); /* a delete of nothing */
		assert_int_equal(ops[2].version, ops[0].version + 1);
		assert_int_equal(ops[3].version, ops[0].version + 2);
		check_str(api, NULL, "ba1", "1");
		check_str(api, NULL, "ba2", "");
		{
			struct kvc_value got;
			EXPECT_OK(st, kvc_get(api, &call, "\0\xff", 2, 0, 0, &got));
			assert_int_equal(got.len, 2);
			assert_memory_equal(got.data, "\xff\0", 2);
			assert_int_equal(got.version, ops[3].version);
			kvc_value_free(&got);
		}
	}
	{
		/* each op sees the ones before it */
		struct kvc_op ops[3] = {
		        {.type = KVC_OP_PUT,
		         .key = "seq",
		         .key_len = 3,
		         .value = "1",
		         .value_len = 1,
		         .if_version = 0},
		        {.type = KVC_OP_DELETE,
		         .key = "seq",
		         .key_len = 3,
		         .if_version = KVC_ANY_VERSION},
		        {.type = KVC_OP_PUT,
		         .key = "seq",
		         .key_len = 3,
		         .value = "3",
		         .value_len = 1,
		         .if_version = 0},
		};
		EXPECT_OK(st, kvc_batch(api, &call, ops, 3, NULL));
		assert_true(ops[1].version == ops[0].version + 1 &&
		            ops[2].version == ops[0].version + 2);
		check_str(api, NULL, "seq", "3");
	}
	put_str(api, NULL, "bb1", "old", &vb);
	{
		/* the third op's condition fails: nothing of the batch happens */
		struct kvc_op ops[3] = {
		        {.type = KVC_OP_PUT,
		         .key = "bb1",
		         .key_len = 3,
		         .value = "X",
		         .value_len = 1,
		         .if_version = vb},
		        {.type = KVC_OP_PUT,
		         .key = "bb2",
		         .key_len = 3,
		         .value = "Y",
		         .value_len = 1,
		         .if_version = KVC_ANY_VERSION},
		        {.type = KVC_OP_PUT,
		         .key = "bb1",
		         .key_len = 3,
		         .value = "Z",
		         .value_len = 1,
		         .if_version = 0},
		};
		EXPECT_CODE(st, kvc_batch(api, &call, ops, 3, &failed), KVC_FAILED_PRECONDITION,
		            "op 2");
		assert_int_equal(failed, 2);
		check_str(api, NULL, "bb1", "old");
		check_str(api, NULL, "bb2", NULL);
	}
	{
		struct kvc_op ops[2] = {
		        {.type = KVC_OP_DELETE, .key = "bb1", .key_len = 3, .if_version = vb + 100},
		        {.type = KVC_OP_PUT,
		         .key = "bb3",
		         .key_len = 3,
		         .value = "Y",
		         .value_len = 1,
		         .if_version = KVC_ANY_VERSION},
		};
		failed = 999;
		EXPECT_CODE(st, kvc_batch(api, &call, ops, 2, &failed), KVC_FAILED_PRECONDITION,
		            NULL);
		assert_int_equal(failed, 0);
		check_str(api, NULL, "bb3", NULL);
		/* on an error that is not a condition, failed_op is not written */
		failed = 999;
		EXPECT_CODE(st,
		            kvc_batch(api, &(struct kvc_call){.tenant = "nope", .status = &st}, ops,
		                      2, &failed),
		            KVC_NOT_FOUND, "nope");
		assert_int_equal(failed, 999);
	}
	/* empty and oversized batches, unknown op types */
	EXPECT_CODE(st, kvc_batch(api, &call, NULL, 0, NULL), KVC_INVALID_ARGUMENT, NULL);
	{
		struct kvc_op bad = {.type = 7, .key = "k", .key_len = 1};
		struct kvc_op *many = calloc(10001, sizeof(*many));
		EXPECT_CODE(st, kvc_batch(api, &call, &bad, 1, NULL), KVC_INVALID_ARGUMENT, NULL);
		EXPECT_CODE(st, kvc_batch(api, &call, many, 10001, NULL), KVC_INVALID_ARGUMENT,
		            NULL);
		for (int i = 0; i < 10000; i++) {
			many[i].type = KVC_OP_PUT;
			many[i].key = "same";
			many[i].key_len = 4;
			many[i].value = &many[i];
			many[i].value_len = 1;
			many[i].if_version = KVC_ANY_VERSION;
		}
		EXPECT_OK(st, kvc_batch(api, &call, many, 10000, NULL));
		assert_int_equal(many[9999].version, many[0].version + 9999);
		free(many);
	}
}

/* Every scan option and their combinations, paging forward and backward. */
void test_scan_options(void **state)
{
	struct kvc_status st;
	struct kvc_call call = {.tenant = "scan", .status = &st};
	struct kvc_scan_opts o;
	struct items it;
	uint64_t rev = 0, v = 0;
	char k[16], val[16];

	(void)state;
	make_tenant(api, "scan", KVC_SYNC_NONE, 4, 0);
	for (int i = 0; i < 50; i++) {
		snprintf(k, sizeof(k), "s/%03d", i);
		snprintf(val, sizeof(val), "v%03d", i);
		put_str(api, &call, k, val, NULL);
	}
	put_str(api, &call, "a", "A", NULL);
	put_str(api, &call, "s", "S", NULL);
	put_str(api, &call, "t/x", "T", NULL);
	EXPECT_OK(st, kvc_put(api, &call, "s/\xff\0", 4, "bin", 3, NULL, &rev));

	/* everything, bytewise ordered; the revision is the last version */
	memset(&o, 0, sizeof(o));
	scan_keys(api, "scan", &o, &it);
	assert_int_equal(it.n, 54);
	assert_int_equal(it.revision, rev);
	for (size_t i = 1; i < it.n; i++)
		assert_true(key_cmp(it.a[i - 1].k, it.a[i - 1].kl, it.a[i].k, it.a[i].kl) < 0);
	assert_true(item_is(&it.a[0], "a", "A"));
	assert_true(item_is(&it.a[1], "s", "S"));
	assert_true(item_is(&it.a[2], "s/000", "v000"));
	assert_int_equal(it.a[52].kl, 4); /* s/\xff\0 sorts after s/049 */
	assert_true(item_is(&it.a[53], "t/x", "T"));
	items_free(&it);

	/* prefix */
	o.prefix = "s/";
	o.prefix_len = 2;
	scan_keys(api, "scan", &o, &it);
	assert_int_equal(it.n, 51);
	assert_true(item_is(&it.a[0], "s/000", "v000"));
	items_free(&it);
	/* prefix and start */
	o.start = "s/045";
	o.start_len = 5;
	scan_keys(api, "scan", &o, &it);
	assert_int_equal(it.n, 6);
	assert_true(item_is(&it.a[0], "s/045", "v045"));
	items_free(&it);
	/* start and end: [s/010, s/020) */
	memset(&o, 0, sizeof(o));
	o.start = "s/010";
	o.start_len = 5;
	o.end = "s/020";
	o.end_len = 5;
	scan_keys(api, "scan", &o, &it);
	assert_int_equal(it.n, 10);
	assert_true(item_is(&it.a[0], "s/010", "v010") && item_is(&it.a[9], "s/019", "v019"));
	items_free(&it);
	/* the same range backwards, two items a page */
	o.reverse = true;
	o.page_size = 2;
	scan_keys(api, "scan", &o, &it);
	assert_int_equal(it.n, 10);
	assert_true(item_is(&it.a[0], "s/019", "v019") && item_is(&it.a[9], "s/010", "v010"));
	items_free(&it);
	/* end only; start only */
	memset(&o, 0, sizeof(o));
	o.end = "s/000";
	o.end_len = 5;
	scan_keys(api, "scan", &o, &it);
	assert_int_equal(it.n, 2); /* a, s */
	items_free(&it);
	memset(&o, 0, sizeof(o));
	o.start = "s/04";
	o.start_len = 4;
	scan_keys(api, "scan", &o, &it);
	assert_int_equal(it.n, 12); /* s/040..s/049, s/\xff\0, t/x */
	items_free(&it);
	/* limit, across pages, forwards and backwards */
	memset(&o, 0, sizeof(o));
	o.prefix = "s/";
	o.prefix_len = 2;
	o.limit = 10;
	o.page_size = 3;
	scan_keys(api, "scan", &o, &it);
	assert_int_equal(it.n, 10);
	assert_true(item_is(&it.a[9], "s/009", "v009"));
	items_free(&it);
	o.reverse = true;
	scan_keys(api, "scan", &o, &it);
	assert_int_equal(it.n, 10);
	assert_int_equal(it.a[0].kl, 4);
	assert_true(item_is(&it.a[1], "s/049", "v049") && item_is(&it.a[9], "s/041", "v041"));
	items_free(&it);
	/* every page size from 1 to 7 gives the same 51 keys in order */
	for (uint32_t ps = 1; ps <= 7; ps++) {
		memset(&o, 0, sizeof(o));
		o.prefix = "s/";
		o.prefix_len = 2;
		o.page_size = ps;
		o.reverse = ps % 2 == 0;
		scan_keys(api, "scan", &o, &it);
		assert_int_equal(it.n, 51);
		for (size_t i = 1; i < it.n; i++) {
			int c = key_cmp(it.a[i - 1].k, it.a[i - 1].kl, it.a[i].k, it.a[i].kl);
			assert_true(o.reverse ? c > 0 : c < 0);
		}
		items_free(&it);
	}
	/* keys only */
	memset(&o, 0, sizeof(o));
	o.prefix = "t/";
	o.prefix_len = 2;
	o.keys_only = true;
	scan_keys(api, "scan", &o, &it);
	assert_int_equal(it.n, 1);
	assert_true(item_is(&it.a[0], "t/x", NULL));
	assert_null(it.a[0].v);
	assert_int_equal(it.a[0].vl, 0);
	items_free(&it);
	/* nothing matches */
	o.prefix = "zz";
	scan_keys(api, "scan", &o, &it);
	assert_int_equal(it.n, 0);
	items_free(&it);
	/* as_of: the range as it was, whatever happened since */
	put_str(api, &call, "s/000", "changed", NULL);
	EXPECT_OK(st, kvc_delete(api, &call, "s/001", 5, KVC_ANY_VERSION, NULL));
	put_str(api, &call, "s/0005", "new", &v);
	memset(&o, 0, sizeof(o));
	o.prefix = "s/00";
	o.prefix_len = 4;
	o.as_of = rev;
	scan_keys(api, "scan", &o, &it);
	assert_int_equal(it.n, 10);
	assert_int_equal(it.revision, rev);
	assert_true(item_is(&it.a[0], "s/000", "v000") && item_is(&it.a[1], "s/001", "v001"));
	for (size_t i = 0; i < it.n; i++)
		assert_true(it.a[i].version <= rev);
	items_free(&it);
	o.as_of = 0;
	scan_keys(api, "scan", &o, &it);
	assert_int_equal(it.n, 10);
	assert_int_equal(it.revision, v);
	assert_true(item_is(&it.a[0], "s/000", "changed") && item_is(&it.a[1], "s/0005", "new"));
	assert_true(item_is(&it.a[2], "s/002", "v002"));
	items_free(&it);

	/* the iterator's revision is known after the first page; errors come
	 * from kvc_scan_next, stick, and fill the call's status */
	{
		kvc_iter *iter = NULL;
		struct kvc_item item;
		struct kvc_call bad = {.tenant = "no-such-tenant", .status = &st};
		EXPECT_OK(st, kvc_scan_open(api, &call, NULL, &iter));
		assert_int_equal(kvc_scan_revision(iter), 0);
		assert_int_equal(kvc_scan_next(iter, &item), 0);
		assert_true(kvc_scan_revision(iter) >= v);
		kvc_scan_close(iter);
		EXPECT_OK(st, kvc_scan_open(api, &bad, NULL, &iter));
		EXPECT_CODE(st, kvc_scan_next(iter, &item), KVC_NOT_FOUND, "no-such-tenant");
		assert_int_equal(kvc_scan_next(iter, &item), -KVC_NOT_FOUND);
		kvc_scan_close(iter);
		kvc_scan_close(NULL);
		memset(&o, 0, sizeof(o));
		o.start = NULL;
		o.start_len = 3;
		EXPECT_CODE(st, kvc_scan_open(api, &call, &o, &iter), KVC_INVALID_ARGUMENT, NULL);
		/* as_of in the future */
		memset(&o, 0, sizeof(o));
		o.as_of = v + 1000000;
		EXPECT_OK(st, kvc_scan_open(api, &call, &o, &iter));
		{
			int rv = CALL(st, kvc_scan_next(iter, &item));
			/* PROTOCOL.md does not say; 3 or 11 would be its
			 * statuses for Scan. kvd answers OK today (and reads
			 * every page as of that future version). Whatever it
			 * is, an answer, not a hang or a lost connection. */
			if (rv != 0 && rv != -KVC_INVALID_ARGUMENT && rv != -KVC_OUT_OF_RANGE)
				fail_msg("scan as_of the future: %s '%s'", kvc_code_name(rv),
				         st.message);
		}
		kvc_scan_close(iter);
	}
}

/* A scan of many pages reads one snapshot while writes change, delete and
 * add keys between its pages, forwards and backwards. */
static void scan_under_writes(bool reverse, int nkeys, uint32_t page)
{
	struct kvc_status st;
	struct kvc_call call = {.tenant = "snap", .status = &st};
	struct kvc_scan_opts o = {
	        .page_size = page, .reverse = reverse, .prefix = "p", .prefix_len = 1};
	kvc_iter *it = NULL;
	struct kvc_item item;
	struct kvc_op *ops = calloc((size_t)nkeys, sizeof(*ops));
	char(*keys)[16] = calloc((size_t)nkeys, 16);
	char(*vals)[16] = calloc((size_t)nkeys, 16);
	bool *seen = calloc((size_t)nkeys, sizeof(bool));
	uint64_t rng = reverse ? 99 : 17, rev;
	char prev[16] = "";
	int n = 0, rv, writes = 0;

	for (int i = 0; i < nkeys; i++) {
		snprintf(keys[i], 16, "p%05d", i);
		snprintf(vals[i], 16, "old-%05d", i);
		ops[i] = (struct kvc_op){.type = KVC_OP_PUT,
		                         .key = keys[i],
		                         .key_len = 6,
		                         .value = vals[i],
		                         .value_len = strlen(vals[i]),
		                         .if_version = KVC_ANY_VERSION};
	}
	EXPECT_OK(st, kvc_batch(api, &call, ops, (size_t)nkeys, NULL));
	rev = ops[nkeys - 1].version;
	EXPECT_OK(st, kvc_scan_open(api, &call, &o, &it));
	while ((rv = kvc_scan_next(it, &item)) == 0) {
		int i;
		char k[16];
		assert_int_equal(item.key_len, 6);
		memcpy(k, item.key, 6);
		k[6] = '\0';
		i = atoi(k + 1);
		assert_true(i >= 0 && i < nkeys);
		assert_false(seen[i]);
		seen[i] = true;
		if (n > 0)
			assert_true(reverse ? strcmp(k, prev) < 0 : strcmp(k, prev) > 0);
		strcpy(prev, k);
		if (item.value_len != strlen(vals[i]) ||
		    memcmp(item.value, vals[i], item.value_len))
			fail_msg("%s item %d (%s): '%.*s', want '%s' (snapshot %llu, version %llu)",
			         reverse ? "reverse" : "forward", n, k, (int)item.value_len,
			         (const char *)item.value, vals[i], (unsigned long long)rev,
			         (unsigned long long)item.version);
		assert_true(item.version <= rev);
		n++;
		if (n == 1)
			assert_int_equal(kvc_scan_revision(it), rev);
		if (n % (int)page == 0) {
			/* the page is used up: the next call fetches the next one.
			 * Overwrite keys ahead and behind, delete some ahead, add
			 * new ones ahead. */
			for (int j = 0; j < 12; j++) {
				char nk[24], nv[24];
				int t;
				rng = rng * 6364136223846793005ull + 1442695040888963407ull;
				t = (int)((rng >> 33) % (uint64_t)nkeys);
				snprintf(nv, sizeof(nv), "new-%d", writes);
				EXPECT_OK(st, kvc_put(api, &call, keys[t], 6, nv, strlen(nv), NULL,
				                      NULL));
				if (j % 4 == 0) {
					t = (t + 7) % nkeys;
					rv = kvc_delete(api, &call, keys[t], 6, KVC_ANY_VERSION,
					                NULL);
					assert_true(rv == 0 || rv == -KVC_NOT_FOUND);
				}
				if (j % 6 == 0) {
					snprintf(nk, sizeof(nk), "p%05d+", (t + 3) % nkeys);
					put_str(api, &call, nk, "added", NULL);
				}
				writes++;
			}
		}
	}
	assert_int_equal(rv, 1);
	kvc_scan_close(it);
	assert_int_equal(n, nkeys);
	assert_true(writes > 0);
	/* a new scan sees today's data */
	{
		struct items now;
		scan_keys(api, "snap", &(struct kvc_scan_opts){.prefix = "p", .prefix_len = 1},
		          &now);
		assert_true(now.revision > rev);
		assert_true(now.n != (size_t)nkeys || memcmp(now.a[0].v, "old", 3) != 0);
		items_free(&now);
	}
	/* and the next run starts from a clean range */
	EXPECT_OK(st, kvc_tenant_drop(api, &call, "snap"));
	free(ops);
	free(keys);
	free(vals);
	free(seen);
}

void test_scan_snapshot_paging(void **state)
{
	(void)state;
	make_tenant(api, "snap", KVC_SYNC_NONE, 0, 0);
	scan_under_writes(false, 2000, 50);
	make_tenant(api, "snap", KVC_SYNC_NONE, 0, 0);
	scan_under_writes(true, 600, 25);
}

/* Compact with a revision: reads as of older versions are OUT_OF_RANGE. */
void test_compact(void **state)
{
	struct kvc_status st;
	struct kvc_call call = {.tenant = "cmp", .status = &st};
	struct kvc_compact_result cr = {0};
	struct kvc_tenant_info ti;
	struct kvc_value got;
	uint64_t v[6];

	(void)state;
	make_tenant(api, "cmp", KVC_SYNC_ALWAYS, 100, 0);
	for (int i = 0; i < 5; i++) {
		char val[8];
		snprintf(val, sizeof(val), "c%d", i);
		put_str(api, &call, "c", val, &v[i]);
	}
	put_str(api, &call, "d", "d", &v[5]);
	EXPECT_OK(st, kvc_compact(api, &call, v[2], &cr));
	assert_int_equal(cr.compact_revision, v[2]);
	assert_true(cr.disk_bytes_before > 0);
	EXPECT_CODE(st, kvc_get(api, &call, "c", 1, 0, v[1], &got), KVC_OUT_OF_RANGE, NULL);
	EXPECT_CODE(st, kvc_get(api, &call, "c", 1, v[0], 0, &got), KVC_OUT_OF_RANGE, NULL);
	EXPECT_OK(st, kvc_get(api, &call, "c", 1, 0, v[2], &got));
	assert_int_equal(got.version, v[2]);
	assert_memory_equal(got.data, "c2", 2);
	kvc_value_free(&got);
	EXPECT_OK(st, kvc_get(api, &call, "c", 1, v[3], 0, &got));
	assert_memory_equal(got.data, "c3", 2);
	kvc_value_free(&got);
	check_str(api, &call, "c", "c4");
	{
		struct kvc_version *vl = NULL;
		size_t n = 0;
		bool trunc = false;
		EXPECT_OK(st, kvc_versions(api, &call, "c", 1, 0, 0, true, &vl, &n, &trunc));
		assert_int_equal(n, 3);
		assert_int_equal(vl[2].version, v[2]);
		assert_true(trunc);
		kvc_versions_free(vl, n);
	}
	{
		kvc_iter *it = NULL;
		struct kvc_item item;
		EXPECT_OK(st,
		          kvc_scan_open(api, &call, &(struct kvc_scan_opts){.as_of = v[1]}, &it));
		EXPECT_CODE(st, kvc_scan_next(it, &item), KVC_OUT_OF_RANGE, NULL);
		kvc_scan_close(it);
	}
	EXPECT_OK(st, kvc_stats(api, &call, &ti));
	assert_int_equal(ti.compact_revision, v[2]);
	assert_int_equal(ti.last_version, v[5]);
	/* a revision in the future is refused; no revision only merges */
	EXPECT_CODE(st, kvc_compact(api, &call, v[5] + 1000, &cr), KVC_INVALID_ARGUMENT, "future");
	EXPECT_OK(st, kvc_compact(api, &call, 0, NULL));
	check_str(api, &call, "c", "c4");
	check_str(api, &call, "d", "d");
	EXPECT_CODE(st,
	            kvc_compact(api, &(struct kvc_call){.tenant = "nope", .status = &st}, 0, &cr),
	            KVC_NOT_FOUND, NULL);
}

/* Tenants, stats, health, and the statuses of everything that can be wrong
 * about a tenant. */
void test_tenants(void **state)
{
	struct kvc_status st;
	struct kvc_call call = {.status = &st};
	struct kvc_call tcall = {.tenant = "tA", .status = &st};
	struct kvc_tenant_opts to = {
	        .sync = KVC_SYNC_INTERVAL, .sync_interval_ms = 50, .history = 5, .max_keys = 3};
	struct kvc_tenant_info ti;
	struct kvc_tenant_entry *list = NULL;
	struct kvc_daemon_stats ds;
	struct kvc_health h;
	size_t n = 0;
	uint64_t us = 0, v = 0;
	bool active = false;
	char longname[70];

	(void)state;
	EXPECT_OK(st, kvc_tenant_create(api, &call, "tA", &to));
	EXPECT_CODE(st, kvc_tenant_create(api, &call, "tA", &to), KVC_ALREADY_EXISTS,
	            "already exists");
	EXPECT_CODE(st, kvc_tenant_create(api, &call, "bad name", NULL), KVC_INVALID_ARGUMENT,
	            NULL);
	EXPECT_CODE(st, kvc_tenant_create(api, &call, ".hidden", NULL), KVC_INVALID_ARGUMENT, NULL);
	EXPECT_CODE(st, kvc_tenant_create(api, &call, "", NULL), KVC_INVALID_ARGUMENT, NULL);
	EXPECT_CODE(st, kvc_tenant_create(api, &call, NULL, NULL), KVC_INVALID_ARGUMENT, NULL);
	memset(longname, 'n', 65);
	longname[65] = '\0';
	EXPECT_CODE(st, kvc_tenant_create(api, &call, longname, NULL), KVC_INVALID_ARGUMENT, NULL);
	longname[64] = '\0';
	EXPECT_OK(st, kvc_tenant_create(api, &call, longname, NULL)); /* 64 is fine */
	{
		struct kvc_tenant_opts bad = {.history = 2000000};
		EXPECT_CODE(st, kvc_tenant_create(api, &call, "tB", &bad), KVC_INVALID_ARGUMENT,
		            "history");
	}

	EXPECT_OK(st, kvc_tenant_info(api, &call, "tA", &ti));
	assert_string_equal(ti.name, "tA");
	assert_int_equal(ti.sync, KVC_SYNC_INTERVAL);
	assert_int_equal(ti.history, 5);
	assert_int_equal(ti.max_keys, 3);
	assert_int_equal(ti.keys, 0);
	assert_int_equal(ti.last_version, 0);
	assert_int_equal(ti.segments, 0); /* Stats-only fields stay 0 */

	/* max_keys: a fourth key is refused, overwriting is not */
	put_str(api, &tcall, "k1", "1", NULL);
	put_str(api, &tcall, "k2", "2", NULL);
	put_str(api, &tcall, "k3", "3", NULL);
	EXPECT_CODE(st, kvc_put(api, &tcall, "k4", 2, "4", 1, NULL, NULL), KVC_RESOURCE_EXHAUSTED,
	            NULL);
	put_str(api, &tcall, "k3", "33", &v);
	EXPECT_OK(st, kvc_stats(api, &tcall, &ti));
	assert_string_equal(ti.name, "tA");
	assert_int_equal(ti.keys, 3);
	assert_int_equal(ti.last_version, v);
	assert_true(ti.active && ti.keydir_bytes > 0 && ti.disk_bytes > 0);
	assert_true(ti.segments >= 1);

	EXPECT_OK(st, kvc_tenant_list(api, &call, &list, &n));
	assert_true(n >= 3);
	for (size_t i = 1; i < n; i++)
		assert_true(strcmp(list[i - 1].name, list[i].name) < 0);
	assert_true(list_has(list, n, "default", NULL));
	assert_true(list_has(list, n, "tA", &active));
	assert_true(active);
	assert_true(list_has(list, n, longname, NULL));
	kvc_tenant_list_free(list);
	EXPECT_OK(st, kvc_tenant_list(api, &call, NULL, &n)); /* list not wanted */

	EXPECT_OK(st, kvc_stats_daemon(api, &call, &ds));
	assert_string_equal(ds.version, "0.1.0");
	assert_int_equal(ds.tenants, n);
	assert_true(ds.workers >= 1 && ds.requests > 0 && ds.in_flight >= 1);
	assert_true(ds.active_tenants >= 1 && ds.keydir_bytes > 0);
	EXPECT_OK(st, kvc_health(api, &call, &h));
	assert_string_equal(h.status, "serving");
	assert_string_equal(h.version, "0.1.0");

	/* passivate and activate by request */
	EXPECT_OK(st, kvc_tenant_passivate(api, &call, "tA"));
	EXPECT_OK(st, kvc_tenant_info(api, &call, "tA", &ti));
	assert_false(ti.active);
	assert_int_equal(ti.keydir_bytes, 0);
	assert_int_equal(ti.keys, 3);
	EXPECT_OK(st, kvc_tenant_activate(api, &call, "tA", &us));
	assert_true(us > 0);
	EXPECT_OK(st, kvc_tenant_info(api, &call, "tA", &ti));
	assert_true(ti.active);
	check_str(api, &tcall, "k3", "33");

	/* what cannot be done */
	EXPECT_CODE(st, kvc_tenant_info(api, &call, "nope", &ti), KVC_NOT_FOUND, "nope");
	EXPECT_CODE(st, kvc_tenant_passivate(api, &call, "nope"), KVC_NOT_FOUND, NULL);
	EXPECT_CODE(st, kvc_tenant_activate(api, &call, "nope", &us), KVC_NOT_FOUND, NULL);
	EXPECT_CODE(st, kvc_tenant_drop(api, &call, "nope"), KVC_NOT_FOUND, NULL);
	EXPECT_CODE(st, kvc_tenant_drop(api, &call, "default"), KVC_INVALID_ARGUMENT, "default");
	EXPECT_CODE(st,
	            kvc_put(api, &(struct kvc_call){.tenant = "nope", .status = &st}, "k", 1, "v",
	                    1, NULL, NULL),
	            KVC_NOT_FOUND, "tenant 'nope' not found");
	EXPECT_CODE(st,
	            kvc_get(api, &(struct kvc_call){.tenant = "bad/name", .status = &st}, "k", 1, 0,
	                    0, NULL),
	            KVC_INVALID_ARGUMENT, "tenant");
	EXPECT_CODE(st, kvc_stats(api, &(struct kvc_call){.tenant = "nope", .status = &st}, &ti),
	            KVC_NOT_FOUND, NULL);

	/* drop: gone, with its data */
	EXPECT_OK(st, kvc_tenant_drop(api, &call, "tA"));
	EXPECT_CODE(st, kvc_tenant_info(api, &call, "tA", &ti), KVC_NOT_FOUND, NULL);
	EXPECT_CODE(st, kvc_tenant_drop(api, &call, "tA"), KVC_NOT_FOUND, NULL);
	EXPECT_OK(st, kvc_tenant_create(api, &call, "tA", NULL));
	EXPECT_OK(st, kvc_tenant_info(api, &call, "tA", &ti));
	assert_int_equal(ti.keys, 0);
	assert_int_equal(ti.sync, KVC_SYNC_ALWAYS);
	assert_int_equal(ti.history, 1);
	check_str(api, &tcall, "k1", NULL);
	EXPECT_OK(st, kvc_tenant_drop(api, &call, "tA"));
	EXPECT_OK(st, kvc_tenant_drop(api, &call, longname));
}

/* Async calls, kvc_drain, kvc_raw, code names, options and the statuses of
 * the transport: nothing listening, a bad endpoint, a closed handle's
 * calls. */
void test_async_raw_and_transport(void **state)
{
	enum { N = 200 };
	struct kvc_status st;
	struct kvc_call call = {.status = &st};
	struct acall *a = calloc(N, sizeof(*a));
	atomic_int done = 0;
	struct kvc_options o;
	kvc *c;

	(void)state;
	for (int i = 0; i < N; i++) {
		char k[16];
		a[i].done = &done;
		snprintf(k, sizeof(k), "async%03d", i);
		ASYNC_SENT(kvc_put_async(api, &call, k, strlen(k), k, strlen(k), NULL, acall_cb,
		                         &a[i]));
	}
	kvc_drain(api);
	assert_int_equal(atomic_load(&done), N);
	for (int i = 0; i < N; i++) {
		assert_int_equal(a[i].rv, 0);
		assert_int_equal(a[i].code, 0);
		for (int j = 0; j < i; j++)
			assert_true(a[i].version != a[j].version);
	}
	atomic_store(&done, 0);
	for (int i = 0; i < N; i++) {
		char k[16];
		snprintf(k, sizeof(k), "async%03d", i);
		if (i % 2)
			ASYNC_SENT(kvc_get_async(api, &call, k, strlen(k), acall_cb, &a[i]));
		else
			ASYNC_SENT(kvc_delete_async(api, &call, k, strlen(k), acall_cb, &a[i]));
	}
	kvc_drain(api);
	assert_int_equal(atomic_load(&done), N);
	for (int i = 0; i < N; i++) {
		char k[16];
		snprintf(k, sizeof(k), "async%03d", i);
		assert_int_equal(a[i].rv, 0);
		if (i % 2) {
			assert_int_equal(a[i].len, strlen(k));
			assert_memory_equal(a[i].value, k, a[i].len);
		}
	}
	/* async errors come through the callback, with the server's message */
	atomic_store(&done, 0);
	ASYNC_SENT(kvc_get_async(api, &call, "async000", 8, acall_cb, &a[0]));
	ASYNC_SENT(kvc_delete_async(api, &call, "async000", 8, acall_cb, &a[1]));
	kvc_drain(api);
	assert_int_equal(a[0].rv, -KVC_NOT_FOUND);
	assert_int_equal(a[0].code, KVC_NOT_FOUND);
	assert_true(a[0].msg[0] != '\0');
	assert_int_equal(a[1].rv, -KVC_NOT_FOUND);
	/* nothing sent, no callback: the status says why */
	EXPECT_CODE(st, kvc_put_async(api, &call, "k", 1, "v", 1, NULL, NULL, NULL),
	            KVC_INVALID_ARGUMENT, "callback");
	EXPECT_CODE(st, kvc_get_async(api, &call, "", 0, acall_cb, &a[0]), KVC_INVALID_ARGUMENT,
	            NULL);
	kvc_drain(api);
	assert_int_equal(atomic_load(&done), 2);
	free(a);

	/* raw: PROTOCOL.md's Health example, and bytes that are not msgpack */
	{
		static const uint8_t health[] = {0x83, 0xa1, 0x76, 0x01, 0xa2, 0x69, 0x64, 0x12,
		                                 0xa6, 0x6d, 0x65, 0x74, 0x68, 0x6f, 0x64, 0xa6,
		                                 0x48, 0x65, 0x61, 0x6c, 0x74, 0x68};
		void *rep = NULL;
		size_t n = 0;
		struct h_reply r;
		char s[16];
		assert_int_equal(kvc_raw(api, 5000, health, sizeof(health), &rep, &n), 0);
		assert_int_equal(h_parse(rep, n, &r), 0);
		assert_int_equal(r.status, 0);
		assert_int_equal(r.id, 0x12);
		assert_int_equal(mp_str_copy(mp_map_get(r.result, "status"), s, sizeof(s)), 0);
		assert_string_equal(s, "serving");
		h_reply_free(&r);
		free(rep);
		assert_int_equal(kvc_raw(api, 5000, "\xc1", 1, &rep, &n), 0);
		assert_int_equal(h_parse(rep, n, &r), 0);
		assert_int_equal(r.status, KVC_INVALID_ARGUMENT);
		assert_int_equal(r.id, 0);
		assert_true(r.message[0] != '\0');
		h_reply_free(&r);
		free(rep);
		assert_int_equal(kvc_raw(api, 5000, health, sizeof(health), NULL, NULL), 0);
		assert_int_equal(kvc_raw(NULL, 5000, health, sizeof(health), &rep, &n),
		                 -KVC_INVALID_ARGUMENT);
	}

	/* code names */
	assert_string_equal(kvc_code_name(0), "OK");
	assert_string_equal(kvc_code_name(-KVC_NOT_FOUND), "NOT_FOUND");
	assert_string_equal(kvc_code_name(KVC_UNAUTHENTICATED), "UNAUTHENTICATED");
	assert_string_equal(kvc_code_name(999), "UNKNOWN");
	kvc_options_init(&o);
	assert_string_equal(o.endpoint, KVC_DEFAULT_ENDPOINT);
	assert_string_equal(o.tenant, "default");
	assert_int_equal(o.resend_ms, -1);
	kvc_options_init(NULL);

	/* nothing listens: UNAVAILABLE at once, saying why */
	{
		char url[600];
		uint64_t t0 = h_now_ms();
		snprintf(url, sizeof(url), "%s://%s/nobody.sock", use_nng ? "ipc" : "kv+ipc",
		         api_kvd.dir);
		c = client_open(url, NULL, 8000);
		EXPECT_CODE(st, kvc_health(c, &call, NULL), KVC_UNAVAILABLE, "cannot reach");
		EXPECT_CODE(st, kvc_put(c, &call, "k", 1, "v", 1, NULL, NULL), KVC_UNAVAILABLE,
		            NULL);
		assert_true(h_now_ms() - t0 < 4000);
		kvc_close(c);
		kvc_close(NULL);
	}
	/* bad endpoints */
	o.endpoint = "bogus://nowhere";
	c = NULL;
	assert_int_equal(kvc_open(&o, &c), -KVC_INVALID_ARGUMENT);
	assert_null(c);
	assert_int_equal(kvc_open(&o, NULL), -KVC_INVALID_ARGUMENT);
	/* a handle's default tenant and timeout; the call's win */
	{
		struct kvc_call other = {.tenant = "default", .timeout_ms = 3000, .status = &st};
		make_tenant(api, "own", KVC_SYNC_NONE, 0, 0);
		c = client_open(client_url(&api_kvd), "own", 0);
		put_str(c, &call, "where", "own", NULL);
		check_str(api, &(struct kvc_call){.tenant = "own"}, "where", "own");
		check_str(c, &other, "where", NULL);
		kvc_close(c);
	}
}
