/* test_client_kvd.c — libkvclient against a real kvd: every call; 64 threads against a model. */
/*
 * Through libkvclient against a real kvd on real sockets: every kvclient.h
 * call with its edge cases and error statuses, 64 threads checked against a
 * per-key linearizable model (again after a restart), passivation seen
 * through TenantInfo, TLS and TCP transports, and a resent write applied
 * once.
 *
 * Layout:
 *   api group    one kvd (max_value_size 1M, max_message_size 2M) shared by
 *                the tests of single calls: keys and values at their limits,
 *                conditions, TTL, exact and as-of reads, Versions, Batch,
 *                Scan (options, paging, a snapshot kept while writes go on
 *                between pages), Compact, tenants, stats, health, async
 *                calls, kvc_raw, transport errors.
 *   daemons      each test starts its own kvd: the concurrent model (and a
 *                restart), passivation, TLS/TCP/token, resend.
 *
 * Nothing waits by sleeping: whatever has to happen (a TTL running out, a
 * tenant going passive) is polled for with a deadline.
 *
 * Exit status: cmocka's; 77 when everything that ran passed but the TLS part
 * was skipped because the openssl command is missing (said on stderr).
 *
 * One file past STYLE.md's ~1,500 lines: these parts share the helpers and
 * one daemon start-up each, and meson runs them as one test. The seam, if it
 * is split, is the model ("64 threads against a model" below).
 */
#include "harness.h"

#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/socket.h>

#include <cmocka.h> /* after the headers it needs */

#include "kvclient.h"

/* ---- helpers ---------------------------------------------------------------- */

/* The transport under test: "stream" (kv+ipc://, the default) or "nng"
 * (ipc://), from argv[1]. TLS and the REQ resend are nng's alone and run
 * only with "nng". */
static bool use_nng;

static const char *client_url(const struct kvd_proc *k)
{
	return use_nng ? k->url : k->surl;
}

/* Each check fills a status that was first filled with junk, so a call that
 * forgets to write it is caught too. */
#define CALL(st, e) (memset(&(st), 'x', sizeof(st)), (e))

#define EXPECT_OK(st, e)                                                                           \
	do {                                                                                       \
		int rv_ = CALL(st, e);                                                             \
		if (rv_ != 0 || (st).code != 0 || (st).message[0] != '\0')                         \
			fail_msg("line %d: %s -> %d %s (status %d '%.200s')", __LINE__, #e, rv_,   \
			         kvc_code_name(rv_), (st).code, (st).message);                     \
	} while (0)

/* The call fails with code, and the status says so with a message; when
 * substr is not NULL the message contains it. */
#define EXPECT_CODE(st, e, want, substr)                                                           \
	do {                                                                                       \
		int rv_ = CALL(st, e);                                                             \
		const char *sub_ = (substr);                                                       \
		if (rv_ != -(want) || (st).code != (want) || (st).message[0] == '\0' ||            \
		    strnlen((st).message, KVC_MESSAGE_MAX) >= KVC_MESSAGE_MAX ||                   \
		    (sub_ != NULL && strstr((st).message, sub_) == NULL))                          \
			fail_msg("line %d: %s -> %d %s (status %d '%.200s'), want %s%s%s",         \
			         __LINE__, #e, rv_, kvc_code_name(rv_), (st).code, (st).message,   \
			         kvc_code_name(want), sub_ ? " with " : "", sub_ ? sub_ : "");     \
	} while (0)

/* An async call that was sent: its outcome comes through the callback (and
 * call->status is not written, kvclient.h: "call->status is not written
 * later"). */
#define ASYNC_SENT(e)                                                                              \
	do {                                                                                       \
		int rv_ = (e);                                                                     \
		if (rv_ != 0)                                                                      \
			fail_msg("line %d: %s -> %d %s", __LINE__, #e, rv_, kvc_code_name(rv_));   \
	} while (0)

static uint64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static kvc *client_open(const char *url, const char *tenant, uint32_t timeout_ms)
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

static int key_cmp(const void *a, size_t al, const void *b, size_t bl)
{
	int r = memcmp(a, b, al < bl ? al : bl);

	return r != 0 ? r : (al < bl ? -1 : al > bl);
}

static void fill_random(uint8_t *p, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++) {
		seed ^= seed << 13;
		seed ^= seed >> 7;
		seed ^= seed << 17;
		p[i] = (uint8_t)(seed >> 24);
	}
}

/* A whole scan, copied out. */
struct item {
	uint8_t *k;
	size_t kl;
	uint8_t *v; /* NULL: keys_only */
	size_t vl;
	uint64_t version;
};

struct items {
	struct item *a;
	size_t n;
	uint64_t revision;
};

static void items_free(struct items *it)
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

static int scan_collect(kvc *c, const struct kvc_call *call, const struct kvc_scan_opts *o,
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

static bool item_is(const struct item *x, const char *k, const char *v)
{
	return x->kl == strlen(k) && memcmp(x->k, k, x->kl) == 0 &&
	       (v == NULL || (x->v != NULL && x->vl == strlen(v) && memcmp(x->v, v, x->vl) == 0));
}

static void put_str(kvc *c, const struct kvc_call *call, const char *k, const char *v,
                    uint64_t *ret_version)
{
	int rv = kvc_put(c, call, k, strlen(k), v, strlen(v), NULL, ret_version);

	if (rv != 0)
		fail_msg("put %s: %s '%s'", k, kvc_code_name(rv),
		         call != NULL && call->status != NULL ? call->status->message : "");
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

static void make_tenant(kvc *c, const char *name, enum kvc_sync sync, uint32_t history,
                        uint64_t ttl_ms)
{
	struct kvc_tenant_opts o = {.sync = sync, .history = history, .ttl_ms = ttl_ms};
	struct kvc_status st;

	EXPECT_OK(st, kvc_tenant_create(c, &(struct kvc_call){.status = &st}, name, &o));
}

/* ---- the api group ---------------------------------------------------------------- */

static struct kvd_proc api_kvd;
static kvc *api;

static int api_setup(void **state)
{
	struct kvd_opts o = {.config_text = "max_value_size = 1M\nmax_message_size = 2M\n"};

	(void)state;
	if (kvd_start(&api_kvd, &o) != 0)
		return -1;
	api = client_open(client_url(&api_kvd), NULL, 10000);
	return 0;
}

static int api_teardown(void **state)
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
static void test_keys_and_values(void **state)
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
				fail_msg("oversized request: %s '%s'", kvc_code_name(rv), st.message);
			assert_int_equal(st.code, -rv);
			kvc_close(c2);
		}
		free(huge);
		check_str(api, NULL, "huge", NULL);
	}
	free(val);
}

/* if_version 0 / right / wrong on puts and deletes. */
static void test_conditions(void **state)
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
static void test_ttl(void **state)
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
static void test_history(void **state)
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
static void test_batch(void **state)
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

static void scan_keys(kvc *c, const char *tenant, const struct kvc_scan_opts *o, struct items *it)
{
	struct kvc_status st;
	struct kvc_call call = {.tenant = tenant, .status = &st};
	int rv = scan_collect(c, &call, o, it);

	if (rv != 0)
		fail_msg("scan: %s '%s'", kvc_code_name(rv), st.message);
}

/* Every scan option and their combinations, paging forward and backward. */
static void test_scan_options(void **state)
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

static void test_scan_snapshot_paging(void **state)
{
	(void)state;
	make_tenant(api, "snap", KVC_SYNC_NONE, 0, 0);
	scan_under_writes(false, 2000, 50);
	make_tenant(api, "snap", KVC_SYNC_NONE, 0, 0);
	scan_under_writes(true, 600, 25);
}

/* Compact with a revision: reads as of older versions are OUT_OF_RANGE. */
static void test_compact(void **state)
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

static bool list_has(const struct kvc_tenant_entry *l, size_t n, const char *name, bool *active)
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

/* Tenants, stats, health, and the statuses of everything that can be wrong
 * about a tenant. */
static void test_tenants(void **state)
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
struct acall {
	atomic_int *done;
	int rv;
	int code;
	char msg[KVC_MESSAGE_MAX];
	uint64_t version;
	uint8_t value[32];
	size_t len;
};

static void acall_cb(void *arg, const struct kvc_async_result *res)
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

static void test_async_raw_and_transport(void **state)
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

/* ---- 64 threads against a model ---------------------------------------------- */
/*
 * Every write carries a value that names it (thread, sequence number) and
 * whose bytes are derived from that name, so a read identifies the write it
 * returns and checks it byte for byte. Per key the model keeps the highest
 * version acknowledged to a writer and the highest version a finished read
 * returned. A read must return a version at least as high as both were when
 * it started (linearizable per key: no stale read, never backwards).
 * Afterwards, when every write's outcome is known, each read is matched to
 * its write (same key, that exact version, a write that succeeded), a
 * NOT_FOUND to a delete at least as new as the read's floor that had been
 * sent before the read ended, every version listed by Versions to the write
 * that made it with no acknowledged version of the key left out between
 * two listed ones, every conditional write to its predecessor, and versions
 * to being unique and, within a batch, contiguous.
 */
enum {
	M_THREADS = 64,
	M_SHARED = 48, /* threads 0..47 share one handle; the rest have their own */
	M_KEYS = 64,
	M_RUN_MS = 3000,
	M_WCAP = 1 << 14,
	M_OCAP = 1 << 15,
};

enum { W_PUT = 1, W_DEL = 2 };
enum { WS_PENDING, WS_ACKED, WS_FAILED, WS_NOOP };
enum { O_VAL = 1, O_NF, O_VPUT, O_VDEL };

struct wrec {
	uint8_t key, kind, state, batch; /* batch: op index + 1, 0 alone */
	uint32_t len;
	uint64_t version;
	uint64_t cond; /* if_version, KVC_ANY_VERSION when none */
	uint64_t inv_seq;
};

struct obs {
	uint8_t kind, key, t;
	uint32_t s;
	uint64_t version;
	uint64_t floor;
	uint64_t end_seq;
	uint64_t next_listed; /* O_VPUT/O_VDEL: the newer listed version, 0 for the head */
};

struct mkey {
	pthread_mutex_t mu;
	uint64_t floor_ack;
	uint64_t floor_read;
};

struct model;

struct mthread {
	struct model *m;
	int id;
	kvc *c;
	uint64_t rng;
	struct wrec *w;
	uint32_t nw;
	struct obs *o;
	uint32_t no;
	uint64_t nops[5];
	int errors;
	char err[300];
};

struct model {
	struct kvc_call call;
	struct mkey keys[M_KEYS];
	atomic_uint_fast64_t seq;
	atomic_bool stop;
	atomic_int violations;
	struct mthread th[M_THREADS];
};

static void mkey_bytes(int i, uint8_t out[4])
{
	out[0] = 'm';
	out[1] = 0x00;
	out[2] = (uint8_t)i;
	out[3] = 0xff;
}

static uint64_t mrand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Value of write (t, s): a header naming it, then bytes derived from it. */
static size_t mval_make(uint8_t *buf, int t, uint32_t s, uint32_t len)
{
	buf[0] = 0xa5;
	buf[1] = (uint8_t)t;
	memcpy(buf + 2, &s, 4);
	buf[6] = (uint8_t)len;
	buf[7] = (uint8_t)(len >> 8);
	fill_random(buf + 8, len - 8, ((uint64_t)t << 32 | s) * 0x9e3779b97f4a7c15ull + 1);
	return len;
}

static bool mval_parse(const void *p, size_t n, int *ret_t, uint32_t *ret_s)
{
	const uint8_t *b = p;
	uint8_t want[600];
	uint32_t s, len;

	if (n < 8 || n > sizeof(want) || b[0] != 0xa5 || b[1] >= M_THREADS)
		return false;
	memcpy(&s, b + 2, 4);
	len = (uint32_t)b[6] | (uint32_t)b[7] << 8;
	if (len != n)
		return false;
	mval_make(want, b[1], s, len);
	if (memcmp(want, b, n) != 0)
		return false;
	*ret_t = b[1];
	*ret_s = s;
	return true;
}

/* A call that failed for no reason the model allows; the first is kept. */
__attribute__((format(printf, 2, 3))) static void mt_error(struct mthread *t, const char *fmt, ...)
{
	va_list ap;

	if (t->errors++ == 0) {
		va_start(ap, fmt);
		vsnprintf(t->err, sizeof(t->err), fmt, ap);
		va_end(ap);
	}
}

/* A breach of the model: counted, the first ten said on stderr. */
__attribute__((format(printf, 2, 3))) static void mt_violation(struct mthread *t, const char *fmt,
                                                               ...)
{
	va_list ap;

	if (atomic_fetch_add(&t->m->violations, 1) < 10) {
		va_start(ap, fmt);
		fprintf(stderr, "model violation (thread %d): ", t->id);
		vfprintf(stderr, fmt, ap);
		fputc('\n', stderr);
		va_end(ap);
	}
}

static uint64_t floor_of(struct model *m, int key)
{
	struct mkey *k = &m->keys[key];
	uint64_t f;

	pthread_mutex_lock(&k->mu);
	f = k->floor_ack > k->floor_read ? k->floor_ack : k->floor_read;
	pthread_mutex_unlock(&k->mu);
	return f;
}

static void raise_floor(struct model *m, int key, uint64_t v, bool ack)
{
	struct mkey *k = &m->keys[key];
	uint64_t *f = ack ? &k->floor_ack : &k->floor_read;

	pthread_mutex_lock(&k->mu);
	if (v > *f)
		*f = v;
	pthread_mutex_unlock(&k->mu);
}

static struct wrec *new_write(struct mthread *t, int key, int kind, uint64_t cond, uint64_t inv,
                              uint8_t batch)
{
	struct wrec *w = &t->w[t->nw++];

	w->key = (uint8_t)key;
	w->kind = (uint8_t)kind;
	w->state = WS_PENDING;
	w->batch = batch;
	w->cond = cond;
	w->inv_seq = inv;
	w->len = kind == W_PUT ? 8 + (uint32_t)(mrand(&t->rng) % 300) : 0;
	return w;
}

static void acked(struct mthread *t, struct wrec *w, uint64_t version)
{
	w->version = version;
	w->state = WS_ACKED;
	raise_floor(t->m, w->key, version, true);
}

static void m_put(struct mthread *t)
{
	struct model *m = t->m;
	int key = (int)(mrand(&t->rng) % M_KEYS);
	bool cond = mrand(&t->rng) % 10 == 0;
	struct kvc_write wo = KVC_WRITE_INIT;
	uint8_t k[4], val[600];
	struct kvc_status st;
	struct kvc_call call = m->call;
	struct wrec *w;
	uint64_t v = 0;
	int rv;

	call.status = &st;
	if (cond)
		wo.if_version = floor_of(m, key); /* often stale under contention */
	w = new_write(t, key, W_PUT, wo.if_version, atomic_fetch_add(&m->seq, 1), 0);
	mkey_bytes(key, k);
	mval_make(val, t->id, t->nw - 1, w->len);
	rv = kvc_put(t->c, &call, k, 4, val, w->len, &wo, &v);
	if (rv == 0)
		acked(t, w, v);
	else if (rv == -KVC_FAILED_PRECONDITION && cond)
		w->state = WS_FAILED;
	else
		mt_error(t, "put: %s '%s'", kvc_code_name(rv), st.message);
}

static void m_delete(struct mthread *t)
{
	struct model *m = t->m;
	int key = (int)(mrand(&t->rng) % M_KEYS);
	bool cond = mrand(&t->rng) % 5 == 0;
	uint64_t ifv = cond ? floor_of(m, key) : KVC_ANY_VERSION;
	struct kvc_status st;
	struct kvc_call call = m->call;
	struct wrec *w;
	uint8_t k[4];
	uint64_t v = 0;
	int rv;

	call.status = &st;
	w = new_write(t, key, W_DEL, ifv, atomic_fetch_add(&m->seq, 1), 0);
	mkey_bytes(key, k);
	rv = kvc_delete(t->c, &call, k, 4, ifv, &v);
	if (rv == 0)
		acked(t, w, v);
	else if (rv == -KVC_NOT_FOUND)
		w->state = WS_NOOP;
	else if (rv == -KVC_FAILED_PRECONDITION && cond)
		w->state = WS_FAILED;
	else
		mt_error(t, "delete: %s '%s'", kvc_code_name(rv), st.message);
}

static void m_batch(struct mthread *t)
{
	struct model *m = t->m;
	int n = 2 + (int)(mrand(&t->rng) % 3), condop = -1;
	struct kvc_op ops[4];
	uint8_t keys[4][4], vals[4][600];
	struct wrec *w[4];
	struct kvc_status st;
	struct kvc_call call = m->call;
	uint64_t inv;
	size_t failed = 99;
	int rv;

	call.status = &st;
	if (mrand(&t->rng) % 4 == 0)
		condop = (int)(mrand(&t->rng) % (uint64_t)n);
	inv = atomic_fetch_add(&m->seq, 1);
	for (int i = 0; i < n; i++) {
		int key = (int)(mrand(&t->rng) % M_KEYS);
		bool del = mrand(&t->rng) % 4 == 0;
		uint64_t cond = i == condop ? floor_of(m, key) : KVC_ANY_VERSION;
		w[i] = new_write(t, key, del ? W_DEL : W_PUT, cond, inv, (uint8_t)(i + 1));
		mkey_bytes(key, keys[i]);
		ops[i] = (struct kvc_op){.type = del ? KVC_OP_DELETE : KVC_OP_PUT,
		                         .key = keys[i],
		                         .key_len = 4,
		                         .if_version = cond};
		if (!del) {
			mval_make(vals[i], t->id, t->nw - 1, w[i]->len);
			ops[i].value = vals[i];
			ops[i].value_len = w[i]->len;
		}
	}
	rv = kvc_batch(t->c, &call, ops, (size_t)n, &failed);
	if (rv == 0) {
		uint64_t prev = 0;
		for (int i = 0; i < n; i++) {
			if (ops[i].version == 0) {
				if (ops[i].type != KVC_OP_DELETE)
					mt_violation(t, "batch put got version 0");
				w[i]->state = WS_NOOP;
				continue;
			}
			if (prev != 0 && ops[i].version != prev + 1)
				mt_violation(t, "batch versions not contiguous: %llu after %llu",
				             (unsigned long long)ops[i].version,
				             (unsigned long long)prev);
			prev = ops[i].version;
			acked(t, w[i], ops[i].version);
		}
	} else if (rv == -KVC_FAILED_PRECONDITION && condop >= 0) {
		if (failed != (size_t)condop)
			mt_violation(t, "batch failed_op %zu, the condition was on op %d", failed,
			             condop);
		for (int i = 0; i < n; i++)
			w[i]->state = WS_FAILED;
	} else {
		mt_error(t, "batch: %s '%s'", kvc_code_name(rv), st.message);
	}
}

static void m_get(struct mthread *t)
{
	struct model *m = t->m;
	int key = (int)(mrand(&t->rng) % M_KEYS), wt;
	uint64_t floor = floor_of(m, key);
	struct kvc_status st;
	struct kvc_call call = m->call;
	struct kvc_value v;
	uint8_t k[4];
	uint32_t ws;
	int rv;

	call.status = &st;
	mkey_bytes(key, k);
	rv = kvc_get(t->c, &call, k, 4, 0, 0, &v);
	if (rv == -KVC_NOT_FOUND) {
		t->o[t->no++] = (struct obs){.kind = O_NF,
		                             .key = (uint8_t)key,
		                             .floor = floor,
		                             .end_seq = atomic_fetch_add(&m->seq, 1)};
		return;
	}
	if (rv != 0) {
		mt_error(t, "get: %s '%s'", kvc_code_name(rv), st.message);
		return;
	}
	if (!mval_parse(v.data, v.len, &wt, &ws))
		mt_violation(t, "get key %d: a value no writer wrote (%zu bytes)", key, v.len);
	else if (v.version < floor)
		mt_violation(t, "get key %d: version %llu, older than %llu known before it started",
		             key, (unsigned long long)v.version, (unsigned long long)floor);
	else
		t->o[t->no++] = (struct obs){.kind = O_VAL,
		                             .key = (uint8_t)key,
		                             .t = (uint8_t)wt,
		                             .s = ws,
		                             .version = v.version,
		                             .floor = floor};
	raise_floor(m, key, v.version, false);
	kvc_value_free(&v);
}

static void m_versions(struct mthread *t)
{
	struct model *m = t->m;
	int key = (int)(mrand(&t->rng) % M_KEYS);
	bool values = mrand(&t->rng) % 2 == 0;
	uint64_t floor = floor_of(m, key);
	struct kvc_status st;
	struct kvc_call call = m->call;
	struct kvc_version *vl = NULL;
	size_t n = 0;
	uint8_t k[4];
	int rv;

	call.status = &st;
	mkey_bytes(key, k);
	rv = kvc_versions(t->c, &call, k, 4, 4, 0, values, &vl, &n, NULL);
	if (rv != 0) {
		mt_error(t, "versions: %s '%s'", kvc_code_name(rv), st.message);
		return;
	}
	if (floor > 0 && (n == 0 || vl[0].version < floor))
		mt_violation(t,
		             "versions key %d: head %llu, older than %llu known before it started",
		             key, n ? (unsigned long long)vl[0].version : 0ull,
		             (unsigned long long)floor);
	for (size_t i = 0; i < n; i++) {
		struct obs o = {.kind = vl[i].deleted ? O_VDEL : O_VPUT,
		                .key = (uint8_t)key,
		                .version = vl[i].version,
		                .s = UINT32_MAX,
		                .next_listed = i ? vl[i - 1].version : 0};
		int wt;
		if (i > 0 && vl[i].version >= vl[i - 1].version)
			mt_violation(t, "versions key %d: not newest first", key);
		if (vl[i].deleted && vl[i].data != NULL)
			mt_violation(t, "versions key %d: a delete with a value", key);
		if (!vl[i].deleted && values) {
			if (!mval_parse(vl[i].data, vl[i].len, &wt, &o.s))
				mt_violation(t, "versions key %d: a value no writer wrote", key);
			o.t = (uint8_t)wt;
		}
		if (!vl[i].deleted && !values && vl[i].data != NULL)
			mt_violation(t, "versions key %d: a value not asked for", key);
		t->o[t->no++] = o;
	}
	if (n > 0)
		raise_floor(m, key, vl[0].version, false);
	kvc_versions_free(vl, n);
}

static void *m_thread(void *arg)
{
	struct mthread *t = arg;

	while (!atomic_load(&t->m->stop) && t->nw + 8 < M_WCAP && t->no + 8 < M_OCAP &&
	       t->errors < 5) {
		uint64_t r = mrand(&t->rng) % 100;
		if (r < 30) {
			m_put(t);
			t->nops[0]++;
		} else if (r < 60) {
			m_get(t);
			t->nops[1]++;
		} else if (r < 70) {
			m_delete(t);
			t->nops[2]++;
		} else if (r < 85) {
			m_batch(t);
			t->nops[3]++;
		} else {
			m_versions(t);
			t->nops[4]++;
		}
	}
	return NULL;
}

/* The write that holds version v (a table built once every outcome is known). */
struct vslot {
	uint8_t t;
	uint32_t s; /* UINT32_MAX: no write has this version */
};

struct mcheck {
	struct vslot *byv;
	uint64_t maxv;
	uint64_t *head;         /* per key: the highest acknowledged version, 0 none */
	uint64_t *dels[M_KEYS]; /* per key: versions of acknowledged deletes, newest first */
	size_t ndels[M_KEYS];
	int violations;
};

static const struct wrec *rec_of(struct model *m, const struct mcheck *mc, uint64_t v)
{
	if (v == 0 || v > mc->maxv || mc->byv[v].s == UINT32_MAX)
		return NULL;
	return &m->th[mc->byv[v].t].w[mc->byv[v].s];
}

#define MC_FAIL(mc, ...)                                                                           \
	do {                                                                                       \
		if ((mc)->violations++ < 10) {                                                     \
			fprintf(stderr, "model check: " __VA_ARGS__);                              \
			fputc('\n', stderr);                                                       \
		}                                                                                  \
	} while (0)

static void model_index(struct model *m, struct mcheck *mc)
{
	memset(mc, 0, sizeof(*mc));
	for (int t = 0; t < M_THREADS; t++)
		for (uint32_t s = 0; s < m->th[t].nw; s++)
			if (m->th[t].w[s].state == WS_ACKED && m->th[t].w[s].version > mc->maxv)
				mc->maxv = m->th[t].w[s].version;
	mc->byv = malloc((mc->maxv + 1) * sizeof(*mc->byv));
	mc->head = calloc(M_KEYS, sizeof(*mc->head));
	for (uint64_t v = 0; v <= mc->maxv; v++)
		mc->byv[v].s = UINT32_MAX;
	for (int t = 0; t < M_THREADS; t++) {
		for (uint32_t s = 0; s < m->th[t].nw; s++) {
			const struct wrec *w = &m->th[t].w[s];
			if (w->state == WS_PENDING)
				MC_FAIL(mc, "thread %d write %u has no outcome", t, s);
			if (w->state != WS_ACKED)
				continue;
			if (mc->byv[w->version].s != UINT32_MAX)
				MC_FAIL(mc, "version %llu given to two writes",
				        (unsigned long long)w->version);
			mc->byv[w->version] = (struct vslot){(uint8_t)t, s};
			if (w->version > mc->head[w->key])
				mc->head[w->key] = w->version;
		}
	}
	for (int key = 0; key < M_KEYS; key++)
		mc->dels[key] = malloc((mc->maxv + 1) * sizeof(uint64_t));
	for (uint64_t v = mc->maxv; v > 0; v--) {
		const struct wrec *w = rec_of(m, mc, v);
		if (w != NULL && w->kind == W_DEL)
			mc->dels[w->key][mc->ndels[w->key]++] = v;
	}
}

static void model_index_free(struct mcheck *mc)
{
	for (int key = 0; key < M_KEYS; key++)
		free(mc->dels[key]);
	free(mc->byv);
	free(mc->head);
}

/* The acknowledged version of key just below v (0: none). */
static uint64_t prev_of_key(struct model *m, const struct mcheck *mc, int key, uint64_t v)
{
	while (--v > 0) {
		const struct wrec *w = rec_of(m, mc, v);
		if (w != NULL && w->key == key)
			return v;
	}
	return 0;
}

static void model_check_history(struct model *m, struct mcheck *mc)
{
	/* deletes of each key, for the NOT_FOUND reads */
	for (int t = 0; t < M_THREADS; t++) {
		struct mthread *th = &m->th[t];
		for (uint32_t i = 0; i < th->no; i++) {
			const struct obs *o = &th->o[i];
			const struct wrec *w = rec_of(m, mc, o->version);
			switch (o->kind) {
			case O_VAL:
			case O_VPUT:
				if (w == NULL || w->key != o->key || w->kind != W_PUT ||
				    (o->s != UINT32_MAX && (&m->th[o->t].w[o->s] != w)))
					MC_FAIL(mc,
					        "read of key %u at version %llu does not match the "
					        "write that got that version",
					        o->key, (unsigned long long)o->version);
				break;
			case O_VDEL:
				if (w == NULL || w->key != o->key || w->kind != W_DEL)
					MC_FAIL(mc,
					        "Versions lists a delete of key %u at %llu that "
					        "did "
					        "not happen",
					        o->key, (unsigned long long)o->version);
				break;
			case O_NF: {
				bool ok = o->floor == 0;
				for (size_t j = 0; j < mc->ndels[o->key] && !ok; j++) {
					uint64_t v = mc->dels[o->key][j];
					if (v < o->floor)
						break;
					ok = rec_of(m, mc, v)->inv_seq < o->end_seq;
				}
				if (!ok)
					MC_FAIL(mc,
					        "NOT_FOUND for key %u, but version %llu existed "
					        "before the read and no later delete was sent",
					        o->key, (unsigned long long)o->floor);
				break;
			}
			}
			/* Versions: nothing acknowledged left out between two listed */
			if ((o->kind == O_VPUT || o->kind == O_VDEL) && o->next_listed != 0 &&
			    prev_of_key(m, mc, o->key, o->next_listed) != o->version)
				MC_FAIL(mc,
				        "Versions of key %u skipped a version between %llu and "
				        "%llu",
				        o->key, (unsigned long long)o->version,
				        (unsigned long long)o->next_listed);
		}
	}
	/* conditional writes that succeeded followed exactly what they named */
	for (int t = 0; t < M_THREADS; t++) {
		for (uint32_t s = 0; s < m->th[t].nw; s++) {
			const struct wrec *w = &m->th[t].w[s];
			uint64_t p;
			const struct wrec *pw;
			if (w->state != WS_ACKED || w->cond == KVC_ANY_VERSION)
				continue;
			p = prev_of_key(m, mc, w->key, w->version);
			pw = rec_of(m, mc, p);
			if (w->cond == 0 ? (pw != NULL && pw->kind != W_DEL)
			                 : (p != w->cond || pw == NULL || pw->kind != W_PUT))
				MC_FAIL(mc,
				        "write %llu on key %u had if_version %llu but followed "
				        "%llu",
				        (unsigned long long)w->version, w->key,
				        (unsigned long long)w->cond, (unsigned long long)p);
		}
	}
}

/* Each key holds what its newest acknowledged write left. */
static void model_check_final(struct model *m, struct mcheck *mc, kvc *c)
{
	struct kvc_status st;
	struct kvc_call call = m->call;

	call.status = &st;
	for (int key = 0; key < M_KEYS; key++) {
		const struct wrec *w = rec_of(m, mc, mc->head[key]);
		struct kvc_value v;
		uint8_t k[4];
		int rv, wt;
		uint32_t ws;

		mkey_bytes(key, k);
		rv = kvc_get(c, &call, k, 4, 0, 0, &v);
		if (w == NULL || w->kind == W_DEL) {
			if (rv != -KVC_NOT_FOUND)
				MC_FAIL(mc, "key %d: %s, want NOT_FOUND", key, kvc_code_name(rv));
			if (rv == 0)
				kvc_value_free(&v);
			continue;
		}
		if (rv != 0) {
			MC_FAIL(mc, "key %d: %s '%s'", key, kvc_code_name(rv), st.message);
			continue;
		}
		if (v.version != mc->head[key] || !mval_parse(v.data, v.len, &wt, &ws) ||
		    &m->th[wt].w[ws] != w)
			MC_FAIL(mc, "key %d: version %llu, want %llu", key,
			        (unsigned long long)v.version, (unsigned long long)mc->head[key]);
		kvc_value_free(&v);
	}
}

static void test_model(void **state)
{
	struct kvd_proc k, k2;
	struct kvd_opts again;
	struct model *m = calloc(1, sizeof(*m));
	struct kvc_options o;
	struct kvc_status st;
	struct kvc_tenant_info ti;
	struct mcheck mc;
	pthread_t th[M_THREADS];
	kvc *shared;
	uint64_t t0, elapsed, total[5] = {0}, v = 0, seed;

	(void)state;
	assert_int_equal(kvd_start(&k, NULL), 0);
	kvc_options_init(&o);
	o.endpoint = client_url(&k);
	o.tenant = "model";
	o.contexts = M_SHARED;
	o.timeout_ms = 20000;
	assert_int_equal(kvc_open(&o, &shared), 0);
	make_tenant(shared, "model", KVC_SYNC_ALWAYS, 4, 0);
	m->call.tenant = "model";
	for (int i = 0; i < M_KEYS; i++)
		pthread_mutex_init(&m->keys[i].mu, NULL);
	seed = tu_seed("test_model", 0x2545f4914f6cdd1dull);
	for (int i = 0; i < M_THREADS; i++) {
		struct mthread *t = &m->th[i];
		t->m = m;
		t->id = i;
		t->rng = seed * (uint64_t)(i + 1);
		t->w = calloc(M_WCAP, sizeof(*t->w));
		t->o = calloc(M_OCAP, sizeof(*t->o));
		if (i < M_SHARED) {
			t->c = shared;
		} else {
			o.contexts = 2;
			assert_int_equal(kvc_open(&o, &t->c), 0);
		}
	}
	t0 = h_now_ms();
	for (int i = 0; i < M_THREADS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, m_thread, &m->th[i]), 0);
	while (h_now_ms() - t0 < M_RUN_MS)
		poll(NULL, 0, 50);
	atomic_store(&m->stop, true);
	for (int i = 0; i < M_THREADS; i++)
		pthread_join(th[i], NULL);
	elapsed = h_now_ms() - t0;
	for (int i = 0; i < M_THREADS; i++) {
		struct mthread *t = &m->th[i];
		for (int j = 0; j < 5; j++)
			total[j] += t->nops[j];
		if (t->errors)
			fprintf(stderr, "thread %d: %d errors, first: %s\n", i, t->errors, t->err);
		assert_int_equal(t->errors, 0);
	}
	print_message("model: %llu puts, %llu gets, %llu deletes, %llu batches, %llu versions "
	              "in %llu ms (%.0f ops/s)\n",
	              (unsigned long long)total[0], (unsigned long long)total[1],
	              (unsigned long long)total[2], (unsigned long long)total[3],
	              (unsigned long long)total[4], (unsigned long long)elapsed,
	              (double)(total[0] + total[1] + total[2] + total[3] + total[4]) * 1000.0 /
	                      (double)elapsed);
	assert_int_equal(atomic_load(&m->violations), 0);
	assert_true(total[0] > 100 && total[1] > 100 && total[3] > 10);

	model_index(m, &mc);
	model_check_history(m, &mc);
	model_check_final(m, &mc, shared);
	EXPECT_OK(st, kvc_stats(shared, &(struct kvc_call){.status = &st}, &ti));
	assert_int_equal(ti.last_version, mc.maxv);
	assert_int_equal(mc.violations, 0);

	/* SIGTERM, start again on the same directory: the same state */
	for (int i = M_SHARED; i < M_THREADS; i++)
		kvc_close(m->th[i].c);
	kvc_close(shared);
	assert_int_equal(kvd_stop(&k), 0);
	again = (struct kvd_opts){.reuse_dir = k.dir};
	assert_int_equal(kvd_start(&k2, &again), 0);
	o.contexts = 4;
	assert_int_equal(kvc_open(&o, &shared), 0);
	model_check_final(m, &mc, shared);
	assert_int_equal(mc.violations, 0);
	EXPECT_OK(st, kvc_stats(shared, &(struct kvc_call){.status = &st}, &ti));
	assert_int_equal(ti.last_version, mc.maxv);
	/* versions go on from there, never reused */
	EXPECT_OK(st,
	          kvc_put(shared, &(struct kvc_call){.status = &st}, "after", 5, "x", 1, NULL, &v));
	assert_true(v > mc.maxv);
	kvc_close(shared);
	assert_int_equal(kvd_stop(&k2), 0);
	kvd_cleanup(&k2, true);
	kvd_cleanup(&k, false);
	for (int i = 0; i < M_THREADS; i++) {
		free(m->th[i].w);
		free(m->th[i].o);
	}
	model_index_free(&mc);
	free(m);
}

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
static void test_drop_waits_for_merge(void **state)
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

static void test_passivation(void **state)
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

/* ---- TLS, TCP, token ------------------------------------------------------------------ */

static bool tls_skipped;

static int sh(const char *dir, const char *cmd)
{
	char full[2048];
	int st;

	snprintf(full, sizeof(full), "cd '%s' && %s >>openssl.log 2>&1", dir, cmd);
	st = system(full);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static kvc *tls_client(const char *url, const char *ca, const char *name, const char *token)
{
	struct kvc_options o;
	kvc *c = NULL;

	kvc_options_init(&o);
	o.endpoint = url;
	o.tls_ca_file = ca;
	o.tls_server_name = name;
	o.token = token;
	o.timeout_ms = 5000;
	assert_int_equal(kvc_open(&o, &c), 0);
	return c;
}

static void test_tls_tcp(void **state)
{
	static const char *const gen[] = {
	        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
	        "-keyout ca.key -out ca.pem -days 2 -subj /CN=kvd-test-ca",
	        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
	        "-keyout other.key -out other.pem -days 2 -subj /CN=kvd-other-ca",
	        "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
	        "-keyout server.key -out server.csr -subj /CN=kvd.test",
	        "printf 'subjectAltName=DNS:kvd.test\\nbasicConstraints=CA:FALSE\\n"
	        "keyUsage=digitalSignature\\nextendedKeyUsage=serverAuth\\n' >ext.cnf",
	        "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
	        "-out server.pem -days 2 -extfile ext.cnf",
	};
	struct kvd_proc k;
	struct kvd_opts o = {0};
	struct kvc_status st;
	struct kvc_call call = {.status = &st};
	struct kvc_value got;
	struct kvc_health h;
	char *dir, cfg[2048], tls_url[64], tcp_url[64], ca[600], other[600], tls_listen[80],
	        tcp_listen[80];
	uint8_t *val;
	kvc *c;
	int p1, p2;

	(void)state;
	if (system("openssl version >/dev/null 2>&1") != 0) {
		fprintf(stderr, "SKIP (TLS part): the openssl command is not installed, so no "
		                "certificate can be made\n");
		tls_skipped = true;
		return;
	}
	dir = tu_mkdtemp("tls");
	for (size_t i = 0; i < sizeof(gen) / sizeof(gen[0]); i++) {
		if (sh(dir, gen[i]) != 0) {
			char log[700];
			snprintf(log, sizeof(log), "cat '%s/openssl.log' >&2", dir);
			if (system(log) != 0)
				fprintf(stderr, "(no openssl log)\n");
			fail_msg("openssl failed: %s", gen[i]);
		}
	}
	snprintf(ca, sizeof(ca), "%s/ca.pem", dir);
	snprintf(other, sizeof(other), "%s/other.pem", dir);
	p1 = h_free_port();
	p2 = h_free_port();
	if (p2 == p1)
		p2 = h_free_port();
	snprintf(cfg, sizeof(cfg),
	         "tls_cert = %s/server.pem\ntls_key = %s/server.key\n"
	         "token = s3cret\n",
	         dir, dir);
	snprintf(tls_url, sizeof(tls_url), "tls+tcp://127.0.0.1:%d", p1);
	snprintf(tcp_url, sizeof(tcp_url), "tcp://127.0.0.1:%d", p2);
	snprintf(tls_listen, sizeof(tls_listen), "--listen=%s", tls_url);
	snprintf(tcp_listen, sizeof(tcp_listen), "--listen=%s", tcp_url);
	o.config_text = cfg;
	o.extra[0] = tls_listen;
	o.extra[1] = tcp_listen;
	assert_int_equal(kvd_start(&k, &o), 0);

	/* TLS with the right CA and server name; a value of many records */
	c = tls_client(tls_url, ca, "kvd.test", "s3cret");
	EXPECT_OK(st, kvc_health(c, &call, &h));
	assert_string_equal(h.status, "serving");
	val = malloc(200000);
	fill_random(val, 200000, 3);
	EXPECT_OK(st, kvc_put(c, &call, "over-tls", 8, val, 200000, NULL, NULL));
	EXPECT_OK(st, kvc_get(c, &call, "over-tls", 8, 0, 0, &got));
	assert_int_equal(got.len, 200000);
	assert_memory_equal(got.data, val, 200000);
	kvc_value_free(&got);
	kvc_close(c);
	/* the token: Health needs none, everything else does */
	c = tls_client(tls_url, ca, "kvd.test", NULL);
	EXPECT_OK(st, kvc_health(c, &call, NULL));
	EXPECT_CODE(st, kvc_get(c, &call, "over-tls", 8, 0, 0, NULL), KVC_UNAUTHENTICATED, "token");
	kvc_close(c);
	c = tls_client(tls_url, ca, "kvd.test", "wrong");
	EXPECT_CODE(st, kvc_put(c, &call, "k", 1, "v", 1, NULL, NULL), KVC_UNAUTHENTICATED, NULL);
	kvc_close(c);
	/* a CA that did not sign the server's certificate; a name the
	 * certificate does not carry */
	c = tls_client(tls_url, other, "kvd.test", "s3cret");
	EXPECT_CODE(st, kvc_put(c, &call, "k", 1, "v", 1, NULL, NULL), KVC_UNAVAILABLE, NULL);
	print_message("wrong CA: %s\n", st.message);
	kvc_close(c);
	c = tls_client(tls_url, ca, "not-kvd.test", "s3cret");
	EXPECT_CODE(st, kvc_health(c, &call, NULL), KVC_UNAVAILABLE, NULL);
	print_message("wrong name: %s\n", st.message);
	kvc_close(c);
	/* a missing CA file is the caller's mistake */
	{
		struct kvc_options bad;
		kvc *c2 = NULL;
		char missing[700];
		snprintf(missing, sizeof(missing), "%s/missing.pem", dir);
		kvc_options_init(&bad);
		bad.endpoint = tls_url;
		bad.tls_ca_file = missing;
		assert_int_equal(kvc_open(&bad, &c2), -KVC_INVALID_ARGUMENT);
	}
	/* plain TCP, same daemon, same data */
	c = tls_client(tcp_url, NULL, NULL, "s3cret");
	EXPECT_OK(st, kvc_get(c, &call, "over-tls", 8, 0, 0, &got));
	assert_int_equal(got.len, 200000);
	assert_memory_equal(got.data, val, 200000);
	kvc_value_free(&got);
	EXPECT_OK(st, kvc_put(c, &call, "over-tcp", 8, "plain", 5, NULL, NULL));
	kvc_close(c);
	c = tls_client(tls_url, ca, "kvd.test", "s3cret");
	EXPECT_OK(st, kvc_get(c, &call, "over-tcp", 8, 0, 0, &got));
	assert_memory_equal(got.data, "plain", 5);
	kvc_value_free(&got);
	kvc_close(c);
	free(val);
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
	tu_rmtree(dir);
	free(dir);
}

/* ---- a resent write is applied once ----------------------------------------------- */

struct vjob {
	kvc *c;
	const char *key;
	size_t n;
	uint64_t first;
	int rv;
};

static void *versions_job(void *arg)
{
	struct vjob *j = arg;
	struct kvc_version *vl = NULL;

	j->rv = kvc_versions(j->c, NULL, j->key, strlen(j->key), 100, 0, false, &vl, &j->n, NULL);
	if (j->rv == 0 && j->n > 0)
		j->first = vl[0].version;
	kvc_versions_free(vl, j->n);
	return NULL;
}

static void test_resend_applied_once(void **state)
{
	struct kvd_proc k;
	struct kvd_opts o = {.env = {"KVD_TEST_REPLY_DELAY_MS=2500"},
	                     .extra = {"--log-level", "debug"},
	                     .health_timeout_ms = 5000};
	struct kvc_options co;
	struct kvc_status st;
	struct kvc_call call = {.status = &st};
	struct acall a[2];
	atomic_int done = 0;
	struct kvc_op ops[2] = {
	        {.type = KVC_OP_PUT,
	         .key = "b1",
	         .key_len = 2,
	         .value = "1",
	         .value_len = 1,
	         .if_version = KVC_ANY_VERSION},
	        {.type = KVC_OP_PUT,
	         .key = "b2",
	         .key_len = 2,
	         .value = "2",
	         .value_len = 1,
	         .if_version = KVC_ANY_VERSION},
	};
	struct vjob jobs[4] = {{.key = "once"}, {.key = "cas"}, {.key = "b1"}, {.key = "b2"}};
	pthread_t th[4];
	kvc *c;

	(void)state;
	assert_int_equal(kvd_start(&k, &o), 0);
	kvc_options_init(&co);
	co.endpoint = k.url;
	co.resend_ms = 200; /* the request goes out again every 200 ms */
	co.timeout_ms = 20000;
	assert_int_equal(kvc_open(&co, &c), 0);
	memset(a, 0, sizeof(a));
	a[0].done = a[1].done = &done;
	{
		struct kvc_write w = KVC_WRITE_INIT;
		w.if_version = 0; /* a second application would fail its condition */
		ASYNC_SENT(kvc_put_async(c, &call, "once", 4, "v", 1, NULL, acall_cb, &a[0]));
		ASYNC_SENT(kvc_put_async(c, &call, "cas", 3, "v", 1, &w, acall_cb, &a[1]));
	}
	kvc_drain(c);
	assert_int_equal(a[0].rv, 0);
	assert_int_equal(a[1].rv, 0);
	EXPECT_OK(st, kvc_batch(c, &call, ops, 2, NULL));
	for (int i = 0; i < 4; i++) {
		jobs[i].c = c;
		pthread_create(&th[i], NULL, versions_job, &jobs[i]);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(jobs[i].rv, 0);
		if (jobs[i].n != 1)
			fail_msg("%s: %zu versions after resends, want 1", jobs[i].key, jobs[i].n);
	}
	assert_int_equal(jobs[0].first, a[0].version);
	assert_int_equal(jobs[1].first, a[1].version);
	assert_int_equal(jobs[2].first, ops[0].version);
	assert_int_equal(jobs[3].first, ops[1].version);
	kvc_close(c);
	assert_int_equal(kvd_stop(&k), 0);
	{
		/* the resends did reach kvd: it says it answered repeats */
		FILE *f = fopen(k.log, "r");
		char line[1024];
		int repeats = 0;
		assert_non_null(f);
		while (fgets(line, sizeof(line), f))
			repeats += strstr(line, "repeated") != NULL;
		fclose(f);
		print_message("kvd saw %d repeated writes\n", repeats);
		assert_true(repeats > 0);
	}
	kvd_cleanup(&k, false);
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
