/* test_kvd.c — a real kvd on a real socket: hostile input answered with the documented status while it keeps serving, limits enforced by the server itself, PROTOCOL.md's msgpack rules, deadlines, no write applied twice on resend, no acknowledged write lost in a crash in any sync mode, --check refusing a directory in use, drain on SIGTERM (Health "stopping"), RESOURCE_EXHAUSTED when a worker's queue is full, tenant calls bounded by their deadline, lock, passivation by idle time, memory budget and request, many tenants under a low RLIMIT_NOFILE, reload, sd_notify. */
#include "harness.h"
#include "hostile.h"

#include <pthread.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <cmocka.h>

static void start_or_fail(struct kvd_proc *k, const struct kvd_opts *o)
{
	assert_int_equal(kvd_start(k, o), 0);
}

static int expect_status(nng_socket s, const void *body, size_t len)
{
	struct h_reply r;
	size_t n = 0;
	int err = 0;
	uint8_t *rep = h_rawcall(s, body, len, &n, &err);
	int st;

	if (rep == NULL)
		return -1000 - err;
	if (h_parse(rep, n, &r) != 0) {
		free(rep);
		h_reply_free(&r);
		return -2000;
	}
	st = (int)r.status;
	h_reply_free(&r);
	free(rep);
	return st;
}

static void test_hostile_input(void **state)
{
	struct kvd_proc k;
	struct hostile *h;
	size_t n = hostile_cases(&h);
	uint64_t seed = tu_seed("hostile random bytes", 0x9e3779b97f4a7c15ull);
	nng_socket s;

	(void)state;
	start_or_fail(&k, NULL);
	s = h_dial(k.url, 5000);
	for (size_t i = 0; i < n; i++) {
		int st = expect_status(s, h[i].body, h[i].len);
		if (st != h[i].status)
			fprintf(stderr, "%s: status %d, want %d\n", h[i].what, st, h[i].status);
		assert_int_equal(st, h[i].status);
	}
	hostile_free(h, n);
	/* random bytes: always a reply, never a crash */
	for (int i = 0; i < 2000; i++) {
		uint8_t buf[64];
		hostile_random(&seed, buf, (size_t)(i % 64));
		assert_true(hostile_random_status(expect_status(s, buf, (size_t)(i % 64))));
	}
	/* oversized key and value */
	{
		static char big[70000];
		memset(big, 'k', sizeof(big));
		big[sizeof(big) - 1] = '\0';
		assert_int_equal(h_put(s, NULL, big, "v", 1, NULL), 3);
	}
	/* still serving */
	assert_int_equal(h_put(s, NULL, "alive", "yes", 3, NULL), 0);
	{
		char v[16];
		assert_int_equal(h_get(s, NULL, "alive", v, sizeof(v), NULL), 0);
		assert_string_equal(v, "yes");
	}
	nng_close(s);
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
}

static void test_message_size_limit(void **state)
{
	struct kvd_proc k;
	struct kvd_opts o = {.config_text = "max_message_size = 2M\nmax_value_size = 1M\n"};
	nng_socket s;
	char *big = malloc(3u << 20);
	size_t n;
	int err = 0;

	(void)state;
	start_or_fail(&k, &o);
	memset(big, 0x41, 3u << 20);
	{
		/* Past max_message_size the transport refuses the message: it
		 * closes the connection after the 8-byte length, without reading
		 * (or allocating) the body. Spoken by hand over the ipc socket
		 * (SP handshake, then 0x01 + 64-bit big-endian length). */
		struct sockaddr_un sa;
		uint8_t hs[8] = {0, 'S', 'P', 0, 0, 48, 0, 0}, peer[8], hdr[9] = {1};
		uint64_t len = 3u << 20;
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		struct pollfd p = {fd, POLLIN, 0};
		ssize_t got;

		memset(&sa, 0, sizeof(sa));
		sa.sun_family = AF_UNIX;
		assert_true(strlen(k.url + 6) < sizeof(sa.sun_path));
		memcpy(sa.sun_path, k.url + 6, strlen(k.url + 6) + 1);
		assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
		assert_int_equal(write(fd, hs, 8), 8);
		assert_int_equal(read(fd, peer, 8), 8);
		assert_int_equal(peer[5], 49); /* REP */
		for (int i = 0; i < 8; i++)
			hdr[1 + i] = (uint8_t)(len >> (56 - 8 * i));
		assert_int_equal(write(fd, hdr, 9), 9);
		assert_int_equal(poll(&p, 1, 10000), 1);
		got = read(fd, peer, 1);
		assert_true(got == 0 || (got < 0 && errno == ECONNRESET)); /* closed */
		close(fd);
		(void)n;
		(void)err;
	}
	/* a value over max_value_size inside a small enough message: an answer */
	s = h_dial(k.url, 5000);
	assert_int_equal(h_put(s, NULL, "k", big, (1u << 20) + 1, NULL), 3);
	assert_int_equal(h_put(s, NULL, "k", big, 1u << 20, NULL), 0);
	nng_close(s);
	assert_true(h_health(k.url));
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
	free(big);
}

static void test_deadline(void **state)
{
	struct kvd_proc k;
	struct kvd_opts o = {.env = {"KVD_TEST_WORKER_DELAY_MS=300"}};
	struct h_req q;
	struct h_reply2 r;
	nng_socket s;
	char v[8];

	(void)state;
	start_or_fail(&k, &o);
	s = h_dial(k.url, 5000);
	h_req_begin(&q, "Put", NULL, 1, 2, 1);
	mp_kv_uint(&q.pk, "timeout_ms", 100);
	h_req_args(&q, 2);
	mp_kv_bin(&q.pk, "key", "late", 4);
	mp_kv_bin(&q.pk, "value", "x", 1);
	assert_int_equal(h_call(s, &q, &r), 0);
	assert_int_equal(r.r.status, 4);
	assert_non_null(strstr(r.r.message, "nothing was done"));
	h_reply2_free(&r);
	/* nothing was applied */
	assert_int_equal(h_get(s, NULL, "late", v, sizeof(v), NULL), 5);
	/* a generous deadline is met */
	h_req_begin(&q, "Put", NULL, 2, 2, 1);
	mp_kv_uint(&q.pk, "timeout_ms", 3000);
	h_req_args(&q, 2);
	mp_kv_bin(&q.pk, "key", "late", 4);
	mp_kv_bin(&q.pk, "value", "x", 1);
	assert_int_equal(h_call(s, &q, &r), 0);
	assert_int_equal(r.r.status, 0);
	h_reply2_free(&r);
	nng_close(s);
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
}

static int count_versions(nng_socket s, const char *key)
{
	struct h_req q;
	struct h_reply2 r;
	const msgpack_object *vs;
	int n = -1;

	h_req_begin(&q, "Versions", NULL, 5, 2, 0);
	mp_kv_bin(&q.pk, "key", key, strlen(key));
	mp_kv_uint(&q.pk, "limit", 100);
	if (h_call(s, &q, &r) == 0 && r.r.ok && r.r.status == 0 &&
	    (vs = mp_map_get(r.r.result, "versions")) != NULL)
		n = (int)vs->via.array.size;
	h_reply2_free(&r);
	return n;
}

/* nng's REQ resends a request whose reply is late; a write must still be
 * applied once. The reply is held past the resend time. */
static void test_resend_applies_once(void **state)
{
	struct kvd_proc k;
	struct kvd_opts o = {.env = {"KVD_TEST_REPLY_DELAY_MS=2500"},
	                     .extra = {"--log-level", "debug"},
	                     .health_timeout_ms = 5000};
	nng_socket s;
	struct h_req q;
	struct h_reply2 r;
	uint64_t version = 0;

	(void)state;
	start_or_fail(&k, &o);
	s = h_dial(k.url, 15000);
	nng_socket_set_ms(s, NNG_OPT_REQ_RESENDTIME, 200); /* resend early and often */
	h_req_begin(&q, "Put", NULL, 77, 2, 1);
	mp_kv_uint(&q.pk, "client", 0x1234abcdull);
	h_req_args(&q, 2);
	mp_kv_bin(&q.pk, "key", "once", 4);
	mp_kv_bin(&q.pk, "value", "v", 1);
	assert_int_equal(h_call(s, &q, &r), 0);
	assert_int_equal(r.r.status, 0);
	assert_int_equal(mp_field_uint(r.r.result, "version", true, &version), 0);
	h_reply2_free(&r);
	nng_socket_set_ms(s, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
	/* the request went out several times (kvd saw a repeat: without one
	 * this test would not test de-duplication); one version exists */
	assert_true(h_log_has(&k, "write 77 of client 000000001234abcd repeated"));
	assert_int_equal(count_versions(s, "once"), 1);
	/* the same (client, id) again, later, from another socket: the same
	 * answer, nothing applied */
	{
		nng_socket s2 = h_dial(k.url, 15000);
		uint64_t v2 = 0;
		h_req_begin(&q, "Put", NULL, 77, 2, 1);
		mp_kv_uint(&q.pk, "client", 0x1234abcdull);
		h_req_args(&q, 2);
		mp_kv_bin(&q.pk, "key", "once", 4);
		mp_kv_bin(&q.pk, "value", "v", 1);
		assert_int_equal(h_call(s2, &q, &r), 0);
		assert_int_equal(r.r.status, 0);
		mp_field_uint(r.r.result, "version", true, &v2);
		assert_int_equal(v2, version);
		h_reply2_free(&r);
		nng_close(s2);
	}
	assert_int_equal(count_versions(s, "once"), 1);
	assert_true(h_log_has(&k, "write 77 of client 000000001234abcd repeated: answered again"));
	nng_close(s);
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
}

/* ---- limits and msgpack rules checked by the server itself -------------- */

/* {v:1, method:"Health", x:[[...[1]...]]}: x is an unknown key, so only the
 * nesting decides; the request map is level 1, so the message is
 * arrays + 1 levels deep. */
static int health_nested(nng_socket s, int arrays)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	int st;

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 3);
	mp_kv_uint(&pk, "v", 1);
	mp_kv_str(&pk, "method", "Health");
	mp_pack_cstr(&pk, "x");
	for (int i = 0; i < arrays; i++)
		msgpack_pack_array(&pk, 1);
	msgpack_pack_uint8(&pk, 1);
	st = expect_status(s, sb.data, sb.size);
	msgpack_sbuffer_destroy(&sb);
	return st;
}

/* A Batch of n puts of key "<prefix><i>" = value, built here, so the client
 * library's own limit checks never see it. */
static int raw_batch(nng_socket s, const char *tenant, const char *prefix, bool same_key,
                     uint32_t n, const void *value, size_t vlen)
{
	struct h_req q;
	struct h_reply2 r;
	char key[32];
	int st;

	h_req_begin(&q, "Batch", tenant, 11, 1, 0);
	mp_pack_cstr(&q.pk, "ops");
	msgpack_pack_array(&q.pk, n);
	for (uint32_t i = 0; i < n; i++) {
		snprintf(key, sizeof(key), same_key ? "%s" : "%s%06u", prefix, i);
		msgpack_pack_map(&q.pk, 3);
		mp_kv_str(&q.pk, "op", "put");
		mp_kv_bin(&q.pk, "key", key, strlen(key));
		mp_kv_bin(&q.pk, "value", value, vlen);
	}
	if (h_call(s, &q, &r) != 0 || !r.r.ok) {
		h_reply2_free(&r);
		return -1;
	}
	st = (int)r.r.status;
	h_reply2_free(&r);
	return st;
}

/* The size of the array `field` in a call's result, or -1. */
static int result_array_size(struct h_reply2 *r, const char *field)
{
	const msgpack_object *a;

	if (!r->r.ok || r->r.status != 0 || (a = mp_map_get(r->r.result, field)) == NULL ||
	    a->type != MSGPACK_OBJECT_ARRAY)
		return -1;
	return (int)a->via.array.size;
}

/* The server enforces PROTOCOL.md's limits itself, whatever the client
 * library checks first: nesting up to 8 levels is parsed and 9 or 10 are
 * refused; a Batch holds at most 10,000 ops; a Scan page at most 10,000
 * items and about 4 MiB; Versions at most 1000 versions. */
static void test_server_limits(void **state)
{
	static char mib[1 << 20];
	struct kvd_proc k;
	struct h_req q;
	struct h_reply2 r;
	nng_socket s;
	bool more = false;
	int n;

	(void)state;
	start_or_fail(&k, NULL);
	s = h_dial(k.url, 60000);
	assert_int_equal(health_nested(s, 7), 0);
	assert_int_equal(health_nested(s, 8), 3);
	assert_int_equal(health_nested(s, 9), 3);
	assert_int_equal(health_nested(s, 7), 0); /* and it goes on */

	/* Batch: 10,001 ops refused (nothing applied), 10,000 applied */
	assert_int_equal(raw_batch(s, NULL, "b", false, 10001, "v", 1), 3);
	assert_int_equal(h_get(s, NULL, "b000000", NULL, 0, NULL), 5);
	assert_int_equal(raw_batch(s, NULL, "b", false, 10000, "v", 1), 0);
	assert_int_equal(h_put(s, NULL, "b010000", "v", 1, NULL), 0);

	/* Scan: a limit above 10,000 gives a page of 10,000 and more */
	h_req_begin(&q, "Scan", NULL, 12, 2, 0);
	mp_kv_bin(&q.pk, "prefix", "b", 1);
	mp_kv_uint(&q.pk, "limit", 50000);
	assert_int_equal(h_call(s, &q, &r), 0);
	assert_int_equal(result_array_size(&r, "items"), 10000);
	assert_int_equal(mp_field_bool(r.r.result, "more", true, &more), 0);
	assert_true(more);
	h_reply2_free(&r);

	/* Scan: a page ends at about 4 MiB of values */
	memset(mib, 'm', sizeof(mib));
	assert_int_equal(raw_batch(s, NULL, "m", false, 8, mib, sizeof(mib)), 0);
	h_req_begin(&q, "Scan", NULL, 13, 1, 0);
	mp_kv_bin(&q.pk, "prefix", "m", 1);
	assert_int_equal(h_call(s, &q, &r), 0);
	n = result_array_size(&r, "items");
	assert_true(n >= 4 && n <= 5);
	assert_int_equal(mp_field_bool(r.r.result, "more", true, &more), 0);
	assert_true(more);
	h_reply2_free(&r);

	/* Versions: a limit above 1000 gives 1000 */
	h_req_begin(&q, "TenantCreate", NULL, 14, 2, 0);
	mp_kv_str(&q.pk, "name", "deep");
	mp_kv_uint(&q.pk, "history", 2000);
	assert_int_equal(h_call(s, &q, &r), 0);
	assert_int_equal(r.r.status, 0);
	h_reply2_free(&r);
	assert_int_equal(raw_batch(s, "deep", "k", true, 1500, "v", 1), 0);
	h_req_begin(&q, "Versions", "deep", 15, 3, 0);
	mp_kv_bin(&q.pk, "key", "k", 1);
	mp_kv_uint(&q.pk, "limit", 5000);
	mp_kv_bool(&q.pk, "values", false);
	assert_int_equal(h_call(s, &q, &r), 0);
	assert_int_equal(result_array_size(&r, "versions"), 1000);
	h_reply2_free(&r);

	nng_close(s);
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
}

/* ---- promises of DURABILITY.md and PROTOCOL.md, over the wire ------------ */

/* TenantCreate with a sync mode and interval; returns the status. */
static int create_tenant_sync(nng_socket s, const char *name, const char *sync,
                              uint64_t interval_ms)
{
	struct h_req q;
	struct h_reply2 r;
	int st;

	h_req_begin(&q, "TenantCreate", NULL, 21, 3, 0);
	mp_kv_str(&q.pk, "name", name);
	mp_kv_str(&q.pk, "sync", sync);
	mp_kv_uint(&q.pk, "sync_interval_ms", interval_ms);
	if (h_call(s, &q, &r) != 0 || !r.r.ok) {
		h_reply2_free(&r);
		return -1;
	}
	st = (int)r.r.status;
	h_reply2_free(&r);
	return st;
}

/* A uint field of a tenant's Stats, or UINT64_MAX. */
static uint64_t tenant_stat(nng_socket s, const char *tenant, const char *field)
{
	struct h_req q;
	struct h_reply2 r;
	uint64_t v = UINT64_MAX;

	h_req_begin(&q, "Stats", tenant, 22, 0, 0);
	if (h_call(s, &q, &r) == 0 && r.r.ok && r.r.status == 0)
		mp_field_uint(r.r.result, field, true, &v);
	h_reply2_free(&r);
	return v;
}

/* A kvd crash (SIGKILL) loses no acknowledged write in any sync mode: what
 * was written to the page cache survives the process. The interval tenant's
 * interval is an hour, so nothing of it was synced by kvd; the 100 ms one
 * shows the maintenance thread's cadence (synced within a second). */
static void test_crash_keeps_writes_in_every_sync_mode(void **state)
{
	static const char *const tenants[] = {"default", "lazy", "none"};
	char *dir = tu_mkdtemp("crashmodes");
	struct kvd_opts o = {.reuse_dir = dir};
	struct kvd_proc k;
	char key[32], val[64], got[128];
	nng_socket s;
	uint64_t t0, syncs = 0;
	int status;

	(void)state;
	start_or_fail(&k, &o);
	s = h_dial(k.url, 10000);
	assert_int_equal(create_tenant_sync(s, "lazy", "interval", 3600000), 0);
	assert_int_equal(create_tenant_sync(s, "none", "none", 100), 0);
	assert_int_equal(create_tenant_sync(s, "quick", "interval", 100), 0);
	assert_int_equal(h_put(s, "quick", "k", "v", 1, NULL), 0);
	t0 = h_now_ms();
	while ((syncs = tenant_stat(s, "quick", "syncs")) == 0 && h_now_ms() - t0 < 5000)
		poll(NULL, 0, 20);
	assert_true(syncs >= 1 && syncs != UINT64_MAX);
	assert_true(h_now_ms() - t0 < 2000);
	for (int t = 0; t < 3; t++)
		for (int i = 0; i < 200; i++) {
			snprintf(key, sizeof(key), "k%03d", i);
			snprintf(val, sizeof(val), "%s-%03d", tenants[t], i);
			assert_int_equal(
			        h_put(s, t == 0 ? NULL : tenants[t], key, val, strlen(val), NULL),
			        0);
		}
	assert_int_equal(tenant_stat(s, "lazy", "syncs"), 0); /* nothing synced by kvd */
	nng_close(s);
	kill(k.pid, SIGKILL);
	assert_int_equal(waitpid(k.pid, &status, 0), k.pid);
	h_track(k.pid, false);
	k.pid = 0;
	kvd_cleanup(&k, true);
	start_or_fail(&k, &o);
	s = h_dial(k.url, 10000);
	for (int t = 0; t < 3; t++)
		for (int i = 0; i < 200; i++) {
			snprintf(key, sizeof(key), "k%03d", i);
			snprintf(val, sizeof(val), "%s-%03d", tenants[t], i);
			assert_int_equal(
			        h_get(s, t == 0 ? NULL : tenants[t], key, got, sizeof(got), NULL),
			        0);
			assert_string_equal(got, val);
		}
	nng_close(s);
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
	free(dir);
}

/* kvd --check exits 2 when it cannot check: the directory is in use by a
 * running kvd, or cannot be read; 0 on the same directory once kvd stopped. */
static void test_check_exit_2(void **state)
{
	const char *bin = getenv("KVD_BIN") ? getenv("KVD_BIN") : "./build/daemon/kvd";
	struct kvd_proc k;
	char cmd[2048];
	nng_socket s;
	int status;

	(void)state;
	start_or_fail(&k, NULL);
	s = h_dial(k.url, 10000);
	assert_int_equal(h_put(s, NULL, "k", "v", 1, NULL), 0);
	nng_close(s);
	snprintf(cmd, sizeof(cmd), "%s --check %s >/dev/null 2>&1", bin, k.data);
	status = system(cmd);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 2); /* in use */
	snprintf(cmd, sizeof(cmd), "%s --check %s/no-such-dir >/dev/null 2>&1", bin, k.dir);
	status = system(cmd);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 2); /* unreadable */
	assert_int_equal(kvd_stop(&k), 0);
	snprintf(cmd, sizeof(cmd), "%s --check %s >/dev/null 2>&1", bin, k.data);
	status = system(cmd);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	kvd_cleanup(&k, false);
}

struct compact_call {
	const char *url;
	int status;
};

static void *compact_run(void *arg)
{
	struct compact_call *c = arg;
	nng_socket s = h_dial(c->url, 30000);
	struct h_req q;
	struct h_reply2 r;

	h_req_begin(&q, "Compact", "merging", 31, 0, 0);
	c->status = h_call(s, &q, &r) == 0 && r.r.ok ? (int)r.r.status : -1;
	h_reply2_free(&r);
	nng_close(s);
	return NULL;
}

/* A tenant call with the envelope's timeout_ms; returns the status. */
static int tenant_call_timeout(nng_socket s, const char *method, const char *name,
                               uint64_t timeout_ms)
{
	struct h_req q;
	struct h_reply2 r;
	int st;

	h_req_begin(&q, method, NULL, 32, 1, 1);
	mp_kv_uint(&q.pk, "timeout_ms", timeout_ms);
	h_req_args(&q, 1);
	mp_kv_str(&q.pk, "name", name);
	if (h_call(s, &q, &r) != 0 || !r.r.ok) {
		h_reply2_free(&r);
		return -1;
	}
	st = (int)r.r.status;
	h_reply2_free(&r);
	return st;
}

/* While a Compact holds a tenant, TenantDrop and TenantPassivate wait for it
 * only until their timeout_ms: then DEADLINE_EXCEEDED (4), nothing done.
 * And while kvd drains after SIGTERM, Health says "stopping". */
static void test_tenant_wait_deadline_and_stopping(void **state)
{
	struct kvd_proc k;
	struct kvd_opts o = {.env = {"KVD_TEST_COMPACT_HOLD_MS=3000"}};
	struct compact_call cc = {0};
	struct h_req q;
	struct h_reply2 r;
	pthread_t th;
	nng_socket s;
	uint64_t t0;
	const char *hs;
	size_t hl;
	int status;

	(void)state;
	start_or_fail(&k, &o);
	s = h_dial(k.url, 10000);
	assert_int_equal(create_tenant_sync(s, "merging", "none", 100), 0);
	assert_int_equal(h_put(s, "merging", "k", "v", 1, NULL), 0);
	cc.url = k.url;
	assert_int_equal(pthread_create(&th, NULL, compact_run, &cc), 0);
	t0 = h_now_ms();
	while (!h_log_has(&k, "tenant merging held by Compact") && h_now_ms() - t0 < 10000)
		poll(NULL, 0, 10);
	assert_true(h_log_has(&k, "tenant merging held by Compact"));
	t0 = h_now_ms();
	assert_int_equal(tenant_call_timeout(s, "TenantDrop", "merging", 300), 4);
	assert_int_equal(tenant_call_timeout(s, "TenantPassivate", "merging", 300), 4);
	assert_true(h_now_ms() - t0 < 2500); /* answered at the deadline, not after the merge */
	assert_int_equal(h_tenant_call(s, "TenantInfo", "merging", NULL), 0); /* still there */
	/* stop kvd while the Compact still runs: it drains, Health says so */
	kill(k.pid, SIGTERM);
	t0 = h_now_ms();
	while (!h_log_has(&k, "stopping") && h_now_ms() - t0 < 5000)
		poll(NULL, 0, 10);
	h_req_begin(&q, "Health", NULL, 33, 0, 0);
	assert_int_equal(h_call(s, &q, &r), 0);
	assert_int_equal(r.r.status, 0);
	assert_int_equal(mp_field_str(r.r.result, "status", true, &hs, &hl), 0);
	assert_int_equal(hl, 8);
	assert_memory_equal(hs, "stopping", 8);
	h_reply2_free(&r);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(cc.status, 0); /* the merge in flight finished */
	assert_int_equal(waitpid(k.pid, &status, 0), k.pid);
	h_track(k.pid, false);
	k.pid = 0;
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	nng_close(s);
	kvd_cleanup(&k, false);
}

/* PROTOCOL.md's msgpack rules, on the server side: unknown map keys are
 * ignored (in the request and in args), nil is the same as absent, and a
 * uint may come in any width. */
static void test_msgpack_rules(void **state)
{
	struct kvd_proc k;
	struct h_reply2 r;
	msgpack_sbuffer sb;
	msgpack_packer pk;
	nng_socket s;
	uint64_t ver = 0, id = 0;
	char got[16];

	(void)state;
	start_or_fail(&k, NULL);
	s = h_dial(k.url, 10000);
	/* unknown keys in the request and in args; if_version nil twice: both
	 * unconditional (nil read as 0 would refuse the second) */
	for (int i = 0; i < 2; i++) {
		struct h_req q;
		h_req_begin(&q, "Put", NULL, 41, 4, 1);
		mp_kv_str(&q.pk, "from_the_future", "x");
		h_req_args(&q, 4);
		mp_kv_bin(&q.pk, "key", "n", 1);
		mp_kv_bin(&q.pk, "value", "v", 1);
		mp_pack_cstr(&q.pk, "if_version");
		msgpack_pack_nil(&q.pk);
		mp_kv_uint(&q.pk, "future_arg", 7);
		assert_int_equal(h_call(s, &q, &r), 0);
		assert_int_equal(r.r.status, 0);
		h_reply2_free(&r);
	}
	/* every field of uint type in its widest form: v, id, the Get's version
	 * (nil ttl_ms on the Put, as absent) */
	{
		struct h_req q;
		h_req_begin(&q, "Put", NULL, 42, 3, 0);
		mp_kv_bin(&q.pk, "key", "w", 1);
		mp_kv_bin(&q.pk, "value", "wide", 4);
		mp_pack_cstr(&q.pk, "ttl_ms");
		msgpack_pack_nil(&q.pk);
		assert_int_equal(h_call(s, &q, &r), 0);
		assert_int_equal(r.r.status, 0);
		assert_int_equal(mp_field_uint(r.r.result, "version", true, &ver), 0);
		h_reply2_free(&r);
	}
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 4);
	mp_pack_cstr(&pk, "v");
	msgpack_pack_fix_uint64(&pk, 1);
	mp_pack_cstr(&pk, "id");
	msgpack_pack_fix_uint32(&pk, 0x12345678);
	mp_kv_str(&pk, "method", "Get");
	mp_pack_cstr(&pk, "args");
	msgpack_pack_map(&pk, 2);
	mp_kv_bin(&pk, "key", "w", 1);
	mp_pack_cstr(&pk, "version");
	msgpack_pack_fix_uint64(&pk, ver);
	{
		size_t n = 0;
		uint8_t *rep = h_rawcall(s, sb.data, sb.size, &n, NULL);
		const void *v;
		size_t vl;
		assert_non_null(rep);
		assert_int_equal(h_parse(rep, n, &r.r), 0);
		assert_int_equal(r.r.status, 0);
		assert_int_equal(mp_field_uint(&r.r.root, "id", true, &id), 0);
		assert_int_equal(id, 0x12345678);
		assert_int_equal(mp_field_bin(r.r.result, "value", true, &v, &vl), 0);
		assert_int_equal(vl, 4);
		assert_memory_equal(v, "wide", 4);
		h_reply_free(&r.r);
		free(rep);
	}
	msgpack_sbuffer_destroy(&sb);
	assert_int_equal(h_get(s, NULL, "n", got, sizeof(got), NULL), 0);
	assert_string_equal(got, "v");
	nng_close(s);
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
}

/* ---- SIGTERM with requests in flight ------------------------------------ */

struct flight {
	nng_ctx ctx;
	nng_aio *aio;
	atomic_int step; /* 0 sending, 1 receiving, 2 done */
	atomic_int status;
	char key[32];
	atomic_int *done;
};

static void flight_cb(void *arg)
{
	struct flight *f = arg;

	if (f->step == 0) {
		if (nng_aio_result(f->aio) != 0) {
			f->status = -1;
			f->step = 2;
			atomic_fetch_add(f->done, 1);
			return;
		}
		f->step = 1;
		nng_ctx_recv(f->ctx, f->aio);
		return;
	}
	if (nng_aio_result(f->aio) == 0) {
		nng_msg *m = nng_aio_get_msg(f->aio);
		struct h_reply r;
		if (h_parse(nng_msg_body(m), nng_msg_len(m), &r) == 0)
			f->status = (int)r.status;
		else
			f->status = -2;
		h_reply_free(&r);
		nng_msg_free(m);
	} else {
		f->status = -1; /* no answer: the connection went away */
	}
	f->step = 2;
	atomic_fetch_add(f->done, 1);
}

static void test_sigterm_drains(void **state)
{
	enum { N = 64 };
	struct kvd_proc k;
	struct kvd_opts o = {.env = {"KVD_TEST_REPLY_DELAY_MS=200"}, .health_timeout_ms = 2000};
	struct flight f[N];
	atomic_int done = 0;
	nng_socket s;
	int ok = 0, refused = 0;

	(void)state;
	start_or_fail(&k, &o);
	s = h_dial(k.url, 5000);
	for (int i = 0; i < N; i++) {
		struct h_req q;
		nng_msg *m;
		memset(&f[i], 0, sizeof(f[i]));
		f[i].done = &done;
		snprintf(f[i].key, sizeof(f[i].key), "inflight-%02d", i);
		assert_int_equal(nng_ctx_open(&f[i].ctx, s), 0);
		assert_int_equal(nng_aio_alloc(&f[i].aio, flight_cb, &f[i]), 0);
		h_req_begin(&q, "Put", NULL, (uint64_t)i + 1, 2, 0);
		mp_kv_bin(&q.pk, "key", f[i].key, strlen(f[i].key));
		mp_kv_bin(&q.pk, "value", f[i].key, strlen(f[i].key));
		nng_msg_alloc(&m, 0);
		nng_msg_append(m, q.sb.data, q.sb.size);
		msgpack_sbuffer_destroy(&q.sb);
		nng_aio_set_msg(f[i].aio, m);
		nng_aio_set_timeout(f[i].aio, 10000);
		nng_ctx_send(f[i].ctx, f[i].aio);
	}
	/* wait until all requests are at the server, then stop it */
	{
		uint64_t t0 = h_now_ms();
		int at = 0;
		while (h_now_ms() - t0 < 5000) {
			at = 0;
			for (int i = 0; i < N; i++)
				at += f[i].step >= 1;
			if (at == N)
				break;
			poll(NULL, 0, 5);
		}
		assert_int_equal(at, N);
	}
	kill(k.pid, SIGTERM);
	{
		uint64_t t0 = h_now_ms();
		while (atomic_load(&done) < N && h_now_ms() - t0 < 15000)
			poll(NULL, 0, 10);
	}
	{
		int status;
		assert_int_equal(waitpid(k.pid, &status, 0), k.pid);
		h_track(k.pid, false);
		k.pid = 0;
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
	}
	assert_int_equal(atomic_load(&done), N);
	for (int i = 0; i < N; i++) {
		/* every request got an answer: applied, or cleanly refused */
		if (f[i].status != 0 && f[i].status != 14)
			fprintf(stderr, "request %d: status %d\n", i, f[i].status);
		assert_true(f[i].status == 0 || f[i].status == 14);
		ok += f[i].status == 0;
		refused += f[i].status == 14;
		nng_aio_free(f[i].aio);
		nng_ctx_close(f[i].ctx);
	}
	nng_close(s);
	assert_int_equal(ok + refused, N);
	assert_true(ok > 0);
	/* what was acknowledged is there after a restart */
	{
		struct kvd_opts again = {.reuse_dir = k.dir};
		struct kvd_proc k2;
		char v[32];
		start_or_fail(&k2, &again);
		s = h_dial(k2.url, 5000);
		for (int i = 0; i < N; i++) {
			if (f[i].status != 0)
				continue;
			assert_int_equal(h_get(s, NULL, f[i].key, v, sizeof(v), NULL), 0);
			assert_string_equal(v, f[i].key);
		}
		nng_close(s);
		assert_int_equal(kvd_stop(&k2), 0);
		kvd_cleanup(&k2, true);
	}
	kvd_cleanup(&k, false);
}

/* A worker with max_queue requests queued refuses more with
 * RESOURCE_EXHAUSTED ("too many requests queued"), and serves the rest. One
 * slow worker (KVD_TEST_WORKER_DELAY_MS), a queue of 2, 32 requests at once. */
static void test_queue_full(void **state)
{
	enum { N = 32 };
	struct kvd_proc k;
	struct kvd_opts o = {.config_text = "max_queue = 2\n",
	                     .env = {"KVD_TEST_WORKER_DELAY_MS=50"},
	                     .extra = {"--workers", "1"},
	                     .health_timeout_ms = 2000};
	struct flight f[N];
	atomic_int done = 0;
	nng_socket s;
	int ok = 0, full = 0;

	(void)state;
	start_or_fail(&k, &o);
	s = h_dial(k.url, 10000);
	assert_int_equal(h_put(s, NULL, "k", "v", 1, NULL), 0);
	for (int i = 0; i < N; i++) {
		struct h_req q;
		nng_msg *m;
		memset(&f[i], 0, sizeof(f[i]));
		f[i].done = &done;
		assert_int_equal(nng_ctx_open(&f[i].ctx, s), 0);
		assert_int_equal(nng_aio_alloc(&f[i].aio, flight_cb, &f[i]), 0);
		h_req_begin(&q, "Get", NULL, (uint64_t)i + 100, 1, 0);
		mp_kv_bin(&q.pk, "key", "k", 1);
		nng_msg_alloc(&m, 0);
		nng_msg_append(m, q.sb.data, q.sb.size);
		msgpack_sbuffer_destroy(&q.sb);
		nng_aio_set_msg(f[i].aio, m);
		nng_aio_set_timeout(f[i].aio, 20000);
		nng_ctx_send(f[i].ctx, f[i].aio);
	}
	{
		uint64_t t0 = h_now_ms();
		while (atomic_load(&done) < N && h_now_ms() - t0 < 20000)
			poll(NULL, 0, 10);
	}
	assert_int_equal(atomic_load(&done), N);
	for (int i = 0; i < N; i++) {
		if (f[i].status == 0)
			ok++;
		else if (f[i].status == 8)
			full++;
		else
			fail_msg("request %d: status %d", i, (int)f[i].status);
		nng_aio_free(f[i].aio);
		nng_ctx_close(f[i].ctx);
	}
	print_message("%d served, %d refused as queue full\n", ok, full);
	assert_true(ok >= 2);
	assert_true(full >= 1);
	nng_close(s);
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
}

static void test_second_daemon_refused(void **state)
{
	struct kvd_proc k;
	const char *bin = getenv("KVD_BIN") ? getenv("KVD_BIN") : "./build/daemon/kvd";
	char cmd[2048], out[1024];
	FILE *p;
	int status;
	size_t n;

	(void)state;
	start_or_fail(&k, NULL);
	snprintf(cmd, sizeof(cmd), "%s --data-dir %s --listen ipc://%s/other.sock 2>&1", bin,
	         k.data, k.dir);
	p = popen(cmd, "r");
	n = fread(out, 1, sizeof(out) - 1, p);
	out[n] = '\0';
	status = pclose(p);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) != 0);
	assert_non_null(strstr(out, "in use by another kvd"));
	assert_non_null(strchr(out, '\n'));
	assert_ptr_equal(strchr(out, '\n'), out + strlen(out) - 1); /* one line */
	assert_true(h_health(k.url)); /* the first one is unharmed */
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
}

/* Health answered on a fresh connection to `url` within `ms` milliseconds
 * (each try has its own 2 s timeout). */
static bool health_within(const char *url, uint64_t ms)
{
	uint64_t t0 = h_now_ms();

	do {
		if (h_health_t(url, 2000))
			return true;
	} while (h_now_ms() - t0 < ms);
	return false;
}

/* Peers that hang up in the middle of the SP handshake (a client killed
 * while connecting, a TCP health check of a load balancer) must not stop
 * kvd from taking new connections, on ipc:// nor on tcp://. */
static void test_handshake_abort(void **state)
{
	struct kvd_proc k;
	struct kvd_opts o = {0};
	char tcp_url[64], listen[96];
	const char *urls[2];
	int port = h_free_port();

	(void)state;
	assert_true(port > 0);
	snprintf(tcp_url, sizeof(tcp_url), "tcp://127.0.0.1:%d", port);
	snprintf(listen, sizeof(listen), "--listen=%s", tcp_url);
	o.extra[0] = listen;
	start_or_fail(&k, &o);
	urls[0] = k.url;
	urls[1] = tcp_url;
	for (int u = 0; u < 2; u++) {
		/* leave after the server's 8-byte SP header */
		assert_int_equal(h_connect_and_leave(urls[u], 8), 0);
		assert_true(health_within(urls[u], 15000));
		/* leave at once, many times: some before kvd has sent its header
		 * (its write fails with EPIPE, which stopped nng 1.5's listener) */
		for (int round = 0; round < 3; round++) {
			for (int i = 0; i < 64; i++)
				assert_int_equal(h_connect_and_leave(urls[u], 0), 0);
			assert_true(health_within(urls[u], 15000));
		}
		/* and keeps serving: a listener a late leave stopped is replaced
		 * within a few seconds */
		for (int i = 0; i < 20; i++)
			assert_true(health_within(urls[u], 15000));
	}
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
}

/* ---- tenants and passivation -------------------------------------------- */

static uint64_t info_field(nng_socket s, const char *name, const char *field, char *state,
                           size_t cap)
{
	struct h_reply2 r;
	uint64_t v = UINT64_MAX;

	if (h_tenant_call(s, "TenantInfo", name, &r) == 0) {
		mp_field_uint(r.r.result, field, false, &v);
		if (state) {
			const msgpack_object *o = mp_map_get(r.r.result, "state");
			if (o)
				mp_str_copy(o, state, cap);
		}
		h_reply2_free(&r);
	}
	return v;
}

static void create_tenant(nng_socket s, const char *name)
{
	struct h_req q;
	struct h_reply2 r;

	h_req_begin(&q, "TenantCreate", NULL, 4, 2, 0);
	mp_kv_str(&q.pk, "name", name);
	mp_kv_str(&q.pk, "sync", "none");
	assert_int_equal(h_call(s, &q, &r), 0);
	assert_int_equal(r.r.status, 0);
	h_reply2_free(&r);
}

static void fill_tenant(nng_socket s, const char *name, int n)
{
	char k[32], v[64];

	for (int i = 0; i < n; i++) {
		snprintf(k, sizeof(k), "k%05d", i);
		snprintf(v, sizeof(v), "%s/%d", name, i);
		assert_int_equal(h_put(s, name, k, v, strlen(v), NULL), 0);
	}
}

static void check_tenant(nng_socket s, const char *name, int n)
{
	char k[32], v[64], got[64];

	for (int i = 0; i < n; i++) {
		snprintf(k, sizeof(k), "k%05d", i);
		snprintf(v, sizeof(v), "%s/%d", name, i);
		assert_int_equal(h_get(s, name, k, got, sizeof(got), NULL), 0);
		assert_string_equal(got, v);
	}
}

static bool wait_state(nng_socket s, const char *name, const char *want, int timeout_ms)
{
	uint64_t t0 = h_now_ms();
	char st[16] = "";

	while (h_now_ms() - t0 < (uint64_t)timeout_ms) {
		info_field(s, name, "keys", st, sizeof(st));
		if (strcmp(st, want) == 0)
			return true;
		poll(NULL, 0, 50);
	}
	return false;
}

static void test_passivation(void **state)
{
	struct kvd_proc k;
	struct kvd_opts o = {.config_text = "idle_timeout = 1\n"};
	nng_socket s;
	char st[16];
	uint64_t act, mem;

	(void)state;
	start_or_fail(&k, &o);
	s = h_dial(k.url, 10000);
	create_tenant(s, "alpha");
	fill_tenant(s, "alpha", 500);
	mem = info_field(s, "alpha", "keydir_bytes", st, sizeof(st));
	assert_string_equal(st, "active");
	assert_true(mem > 0);
	assert_int_equal(info_field(s, "alpha", "keys", NULL, 0), 500);
	/* idle for a second: passivated, memory gone */
	assert_true(wait_state(s, "alpha", "passive", 10000));
	assert_int_equal(info_field(s, "alpha", "keydir_bytes", NULL, 0), 0);
	assert_int_equal(info_field(s, "alpha", "keys", NULL, 0), 500);
	act = info_field(s, "alpha", "activations", NULL, 0);
	/* the first request activates it and is answered normally */
	check_tenant(s, "alpha", 500);
	assert_int_equal(info_field(s, "alpha", "activations", NULL, 0), act + 1);
	assert_true(info_field(s, "alpha", "last_activation_ms", NULL, 0) > 0);
	/* by request */
	assert_int_equal(h_tenant_call(s, "TenantPassivate", "alpha", NULL), 0);
	assert_int_equal(info_field(s, "alpha", "keydir_bytes", st, sizeof(st)), 0);
	assert_string_equal(st, "passive");
	{
		struct h_reply2 r;
		uint64_t us = 0;
		assert_int_equal(h_tenant_call(s, "TenantActivate", "alpha", &r), 0);
		mp_field_uint(r.r.result, "activation_us", true, &us);
		assert_true(us > 0);
		h_reply2_free(&r);
	}
	info_field(s, "alpha", "keys", st, sizeof(st));
	assert_string_equal(st, "active");
	check_tenant(s, "alpha", 500);
	assert_int_equal(h_tenant_call(s, "TenantPassivate", "nope", NULL), 5);
	nng_close(s);
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
}

static void test_memory_budget(void **state)
{
	struct kvd_proc k;
	struct kvd_opts o = {.config_text = "memory_budget = 64K\nidle_timeout = 0\n"};
	nng_socket s;
	char name[16], st[16];
	int passive = 0;

	(void)state;
	start_or_fail(&k, &o);
	s = h_dial(k.url, 10000);
	for (int t = 0; t < 6; t++) {
		snprintf(name, sizeof(name), "m%d", t);
		create_tenant(s, name);
		fill_tenant(s, name, 1500);
	}
	/* the least recently used go until the key directories fit */
	{
		uint64_t t0 = h_now_ms();
		while (h_now_ms() - t0 < 10000) {
			passive = 0;
			for (int t = 0; t < 6; t++) {
				snprintf(name, sizeof(name), "m%d", t);
				info_field(s, name, "keys", st, sizeof(st));
				passive += strcmp(st, "passive") == 0;
			}
			if (passive >= 4)
				break;
			poll(NULL, 0, 50);
		}
	}
	assert_true(passive >= 4);
	info_field(s, "m0", "keys", st, sizeof(st));
	assert_string_equal(st, "passive"); /* the oldest */
	for (int t = 0; t < 6; t++) {
		snprintf(name, sizeof(name), "m%d", t);
		check_tenant(s, name, 1500);
	}
	nng_close(s);
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
}

static void test_many_tenants_low_nofile(void **state)
{
	struct kvd_proc k;
	struct kvd_opts o = {.nofile = 256, .config_text = "segment_size = 4K\n"};
	nng_socket s;
	char name[16];

	(void)state;
	if (access("/dev/shm", W_OK) == 0)
		setenv("TMPDIR", "/dev/shm", 1); /* descriptors, not durability */
	start_or_fail(&k, &o);
	unsetenv("TMPDIR");
	s = h_dial(k.url, 20000);
	for (int t = 0; t < 1000; t++) {
		snprintf(name, sizeof(name), "t%04d", t);
		create_tenant(s, name);
		fill_tenant(s, name, 12);
	}
	for (int t = 0; t < 1000; t += 7) {
		snprintf(name, sizeof(name), "t%04d", t);
		check_tenant(s, name, 12);
	}
	{
		struct h_req q;
		struct h_reply2 r;
		uint64_t tenants = 0, active = 0;
		h_req_begin(&q, "Stats", NULL, 8, 1, 0);
		mp_kv_str(&q.pk, "scope", "daemon");
		assert_int_equal(h_call(s, &q, &r), 0);
		assert_int_equal(r.r.status, 0);
		mp_field_uint(r.r.result, "tenants", true, &tenants);
		mp_field_uint(r.r.result, "active_tenants", true, &active);
		assert_int_equal(tenants, 1001);
		assert_true(active < 1000);
		h_reply2_free(&r);
	}
	nng_close(s);
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
}

static void test_reload_and_notify(void **state)
{
	struct kvd_proc k;
	struct kvd_opts o = {.config_text = "idle_timeout = 300\nlog_level = info\n"};
	struct sockaddr_un sa;
	char path[100], buf[4096], all[16384] = "";
	int fd;

	(void)state;
	snprintf(path, sizeof(path), "/tmp/kvd-notify-%d.sock", getpid());
	unlink(path);
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	o.notify_socket = path;
	start_or_fail(&k, &o);
	{
		/* READY=1 came once recovery and listeners were up */
		struct pollfd p = {fd, POLLIN, 0};
		uint64_t t0 = h_now_ms();
		while (!strstr(all, "READY=1") && h_now_ms() - t0 < 5000) {
			if (poll(&p, 1, 100) > 0) {
				ssize_t n = recv(fd, buf, sizeof(buf) - 1, 0);
				if (n > 0) {
					buf[n] = '\0';
					strncat(all, buf, sizeof(all) - strlen(all) - 1);
				}
			}
		}
		assert_non_null(strstr(all, "READY=1"));
	}
	/* SIGHUP reloads idle_timeout and says what changed */
	{
		FILE *f = fopen(k.config, "w");
		fputs("idle_timeout = 60\nlog_level = info\n", f);
		fclose(f);
		kill(k.pid, SIGHUP);
		uint64_t t0 = h_now_ms();
		bool seen = false;
		while (!seen && h_now_ms() - t0 < 5000) {
			char logbuf[8192];
			FILE *l = fopen(k.log, "r");
			size_t n = fread(logbuf, 1, sizeof(logbuf) - 1, l);
			fclose(l);
			logbuf[n] = '\0';
			seen = strstr(logbuf, "reload: idle_timeout 300 -> 60 s") != NULL;
			if (!seen)
				poll(NULL, 0, 20);
		}
		assert_true(seen);
	}
	assert_true(h_health(k.url));
	assert_int_equal(kvd_stop(&k), 0);
	{
		struct pollfd p = {fd, POLLIN, 0};
		while (poll(&p, 1, 200) > 0) {
			ssize_t n = recv(fd, buf, sizeof(buf) - 1, 0);
			if (n <= 0)
				break;
			buf[n] = '\0';
			strncat(all, buf, sizeof(all) - strlen(all) - 1);
		}
	}
	assert_non_null(strstr(all, "STOPPING=1"));
	/* log lines carry syslog priority prefixes */
	{
		char logbuf[8192];
		FILE *l = fopen(k.log, "r");
		size_t n = fread(logbuf, 1, sizeof(logbuf) - 1, l);
		fclose(l);
		logbuf[n] = '\0';
		assert_int_equal(logbuf[0], '<');
		assert_non_null(strstr(logbuf, "<6>listening on ipc://"));
	}
	close(fd);
	unlink(path);
	kvd_cleanup(&k, false);
}

static void test_bad_config_refused(void **state)
{
	const char *bin = getenv("KVD_BIN") ? getenv("KVD_BIN") : "./build/daemon/kvd";
	char *dir = tu_mkdtemp("badcfg");
	char cmd[2048], out[1024], *cfg = tu_path(dir, "kvd.conf");
	FILE *f = fopen(cfg, "w"), *p;
	int status;
	size_t n;

	(void)state;
	fputs("listen = ipc:///tmp/x.sock\nwrokers = 4\n", f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "%s --config %s --data-dir %s/d 2>&1", bin, cfg, dir);
	p = popen(cmd, "r");
	n = fread(out, 1, sizeof(out) - 1, p);
	out[n] = '\0';
	status = pclose(p);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 1);
	assert_non_null(strstr(out, "unknown setting"));
	assert_non_null(strstr(out, "wrokers"));
	free(cfg);
	tu_rmtree(dir);
	free(dir);
}

/* Waits (at most 5 s) for kvd's sd_notify datagrams to include want after
 * what *all already holds; keeps appending to all. */
static bool notify_wait(int fd, char *all, size_t cap, const char *want)
{
	size_t from = strlen(all);
	uint64_t t0 = h_now_ms();
	char buf[1024];

	while (strstr(all + from, want) == NULL && h_now_ms() - t0 < 5000) {
		struct pollfd p = {fd, POLLIN, 0};
		if (poll(&p, 1, 100) > 0) {
			ssize_t n = recv(fd, buf, sizeof(buf) - 1, 0);
			if (n > 0) {
				buf[n] = '\0';
				strncat(all, buf, cap - strlen(all) - 1);
			}
		}
	}
	return strstr(all + from, want) != NULL;
}

/* A settings file replaced by a directory: SIGHUP keeps every setting and
 * logs why (it used to apply the built-in defaults: memory_budget 1G -> 0);
 * the next good file is applied from the kept values. */
static void test_reload_of_a_directory_keeps_the_settings(void **state)
{
	struct kvd_proc k;
	struct kvd_opts o = {.config_text = "memory_budget = 1G\nidle_timeout = 60\n"};
	struct sockaddr_un sa;
	char path[100], all[16384] = "";
	int fd;

	(void)state;
	snprintf(path, sizeof(path), "/tmp/kvd-notify-dir-%d.sock", getpid());
	unlink(path);
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	o.notify_socket = path;
	start_or_fail(&k, &o);
	assert_true(notify_wait(fd, all, sizeof(all), "READY=1"));
	/* the file becomes a directory: a reload is refused, nothing changes */
	assert_int_equal(unlink(k.config), 0);
	assert_int_equal(mkdir(k.config, 0755), 0);
	kill(k.pid, SIGHUP);
	assert_true(notify_wait(fd, all, sizeof(all), "RELOADING=1"));
	assert_true(notify_wait(fd, all, sizeof(all), "READY=1"));
	assert_true(h_log_has(&k, "SIGHUP: keeping the current settings: "));
	assert_true(h_log_has(&k, "kvd.conf: a directory, not a settings file"));
	assert_false(h_log_has(&k, "reload: memory_budget"));
	assert_false(h_log_has(&k, "reloaded "));
	/* a file again: its values replace the kept ones (1G, 60 s), not 0 */
	assert_int_equal(rmdir(k.config), 0);
	{
		FILE *f = fopen(k.config, "w");
		fputs("memory_budget = 2G\nidle_timeout = 60\n", f);
		fclose(f);
	}
	kill(k.pid, SIGHUP);
	assert_true(notify_wait(fd, all, sizeof(all), "RELOADING=1"));
	assert_true(notify_wait(fd, all, sizeof(all), "READY=1"));
	assert_true(h_log_has(&k, "reload: memory_budget 1073741824 -> 2147483648 bytes"));
	assert_false(h_log_has(&k, "reload: idle_timeout"));
	assert_true(h_health(k.url));
	assert_int_equal(kvd_stop(&k), 0);
	close(fd);
	unlink(path);
	kvd_cleanup(&k, false);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hostile_input),
		cmocka_unit_test(test_message_size_limit),
		cmocka_unit_test(test_server_limits),
		cmocka_unit_test(test_msgpack_rules),
		cmocka_unit_test(test_crash_keeps_writes_in_every_sync_mode),
		cmocka_unit_test(test_check_exit_2),
		cmocka_unit_test(test_tenant_wait_deadline_and_stopping),
		cmocka_unit_test(test_deadline),
		cmocka_unit_test(test_resend_applies_once),
		cmocka_unit_test(test_sigterm_drains),
		cmocka_unit_test(test_queue_full),
		cmocka_unit_test(test_second_daemon_refused),
		cmocka_unit_test(test_handshake_abort),
		cmocka_unit_test(test_passivation),
		cmocka_unit_test(test_memory_budget),
		cmocka_unit_test(test_many_tenants_low_nofile),
		cmocka_unit_test(test_reload_and_notify),
		cmocka_unit_test(test_reload_of_a_directory_keeps_the_settings),
		cmocka_unit_test(test_bad_config_refused),
	};
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
