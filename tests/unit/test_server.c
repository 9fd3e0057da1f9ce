/* test_server.c — rpc/server.c's replies are whole msgpack maps even when memory runs out while
 * they are encoded: the reply that could not be written becomes a RESOURCE_EXHAUSTED error; a
 * daemon Stats packs the daemon's figures as PROTOCOL.md says. */
#include "testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <cmocka.h>

#include "mp.h"
#include "server.h"

#include "oom.h"

#if OOM_TESTS
static const struct rpc_limits limits = {.max_value_size = 1u << 20, .version = "test"};

/* Decodes a request packed into sb (destroyed here). */
static void decode(msgpack_sbuffer *sb, struct rpc_req *r)
{
	int status;
	const char *msg;

	assert_int_equal(rpc_req_decode(r, &limits, sb->data, sb->size, &status, &msg), 0);
	msgpack_sbuffer_destroy(sb);
}

/* The reply in rp: a whole map of id, whose status is returned; *ret_result
 * its result (NULL without one). */
static uint64_t reply_of(const struct rpc_reply *rp, uint64_t id, msgpack_zone *zone,
                         const msgpack_object **ret_result)
{
	msgpack_object root;
	uint64_t got_id = 0, status = 0;

	assert_int_equal(mp_parse((const uint8_t *)rp->buf.data, rp->buf.size, zone, &root), 0);
	assert_int_equal(root.type, MSGPACK_OBJECT_MAP);
	assert_int_equal(mp_field_uint(&root, "id", true, &got_id), 0);
	assert_int_equal(got_id, id);
	assert_int_equal(mp_field_uint(&root, "status", true, &status), 0);
	if (status != RPC_OK)
		assert_non_null(mp_map_get(&root, "message"));
	*ret_result = mp_map_get(&root, "result");
	return status;
}

#define SCAN_KEYS 300

/* A Scan page of 300 items (about 40 KiB of reply, so its buffer grows
 * several times), with each allocation of the call failing in turn: every
 * reply is whole, either the full page or an error; none is cut short. */
static void test_scan_reply_out_of_memory(void **state)
{
	char *dir = tu_mkdtemp("server");
	struct kv_store_options o;
	struct rpc_req req;
	msgpack_sbuffer sb;
	msgpack_packer pk;
	kv_store *s;
	kv_tenant *t;
	unsigned errors = 0, at;

	(void)state;
	kv_store_options_init(&o);
	assert_int_equal(kv_store_open(dir, &o, &s), 0);
	assert_int_equal(kv_store_get(s, "default", &t), 0);
	for (int i = 0; i < SCAN_KEYS; i++) {
		char k[32], v[128];
		snprintf(k, sizeof(k), "key-%06d", i);
		memset(v, 'a' + i % 26, sizeof(v));
		assert_int_equal(kv_put(kv_tenant_db(t), k, strlen(k), v, sizeof(v), NULL, NULL), 0);
	}
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 4);
	mp_kv_uint(&pk, "v", 1);
	mp_kv_uint(&pk, "id", 42);
	mp_kv_str(&pk, "method", "Scan");
	mp_pack_cstr(&pk, "args");
	msgpack_pack_map(&pk, 0);
	decode(&sb, &req);

	for (at = 1;; at++) {
		struct rpc_reply rp;
		msgpack_zone zone;
		const msgpack_object *result, *items;
		uint64_t status;
		bool failed;

		oom_arm(at, 1);
		rpc_reply_init(&rp);
		rpc_run_read(s, t, &req, &rp);
		failed = oom_failed > 0;
		oom_arm(0, 0);
		assert_int_equal(rpc_reply_finish(&rp, req.id), 0);
		msgpack_zone_init(&zone, 4096);
		status = reply_of(&rp, 42, &zone, &result);
		if (status == RPC_OK) {
			assert_non_null(result);
			items = mp_map_get(result, "items");
			assert_non_null(items);
			assert_int_equal(items->type, MSGPACK_OBJECT_ARRAY);
			assert_int_equal(items->via.array.size, SCAN_KEYS);
			assert_non_null(mp_map_get(result, "revision"));
			assert_non_null(mp_map_get(result, "more"));
		} else {
			assert_int_equal(status, RPC_RESOURCE_EXHAUSTED);
			errors++;
		}
		msgpack_zone_destroy(&zone);
		rpc_reply_release(&rp);
		if (!failed) {
			assert_int_equal(status, RPC_OK);
			break;
		}
	}
	print_message("%u allocations, %u error replies\n", at, errors);
	assert_true(errors > 0);
	rpc_req_release(&req);
	kv_store_put(s, t);
	assert_int_equal(kv_store_close(s), 0);
	tu_rmtree(dir);
	free(dir);
}

/* The figures a daemon would give: Get twice OK and once NOT_FOUND, one
 * request that did not decode, two listeners. */
static void fake_figures(void *arg, struct rpc_daemon_fig *ret)
{
	(void)arg;
	memset(ret, 0, sizeof(*ret));
	ret->counting = true;
	ret->received_bytes = 300;
	ret->sent_bytes = 200;
	ret->methods[RPC_GET].replies[RPC_OK] = 2;
	ret->methods[RPC_GET].replies[RPC_NOT_FOUND] = 1;
	ret->methods[RPC_GET].lat_count = 3;
	ret->methods[RPC_GET].lat_sum_ns = 150000;
	ret->methods[RPC_GET].p50_ns = 50000;
	ret->methods[RPC_GET].p90_ns = 100000;
	ret->methods[RPC_GET].p99_ns = RPC_FIG_OVER;
	ret->methods[RPC_METHODS].replies[RPC_INVALID_ARGUMENT] = 1;
	ret->nconns = 2;
	ret->conns[0] = (struct rpc_conn_fig){"stream", "kv+ipc:///run/kvd/kv.sock", 3};
	ret->conns[1] = (struct rpc_conn_fig){"nng", "ipc:///run/kvd/kvd.sock", 0};
}

static const msgpack_object *array_of(const msgpack_object *map, const char *key, uint32_t n)
{
	const msgpack_object *a = mp_map_get(map, key);

	assert_non_null(a);
	assert_int_equal(a->type, MSGPACK_OBJECT_ARRAY);
	assert_int_equal(a->via.array.size, n);
	return a->via.array.ptr;
}

static void assert_str(const msgpack_object *map, const char *key, const char *want)
{
	const char *v;
	size_t n;

	assert_int_equal(mp_field_str(map, key, true, &v, &n), 0);
	assert_int_equal(n, strlen(want));
	assert_memory_equal(v, want, n);
}

static uint64_t uint_of(const msgpack_object *map, const char *key)
{
	uint64_t v = 0;

	assert_int_equal(mp_field_uint(map, key, true, &v), 0);
	return v;
}

/* Stats with scope "daemon": the totals, then the figures of
 * rpc_limits.figures (methods without requests left out, statuses by
 * name); without the callback only the totals; out of memory a whole
 * error reply. */
static void test_stats_daemon_figures(void **state)
{
	char *dir = tu_mkdtemp("server");
	struct rpc_limits lim = limits;
	struct kv_store_options o;
	struct rpc_req req;
	struct rpc_reply rp;
	msgpack_sbuffer sb;
	msgpack_packer pk;
	msgpack_zone zone;
	const msgpack_object *result, *m, *c, *st;
	bool counting = false;
	kv_store *s;

	(void)state;
	kv_store_options_init(&o);
	assert_int_equal(kv_store_open(dir, &o, &s), 0);
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 4);
	mp_kv_uint(&pk, "v", 1);
	mp_kv_uint(&pk, "id", 11);
	mp_kv_str(&pk, "method", "Stats");
	mp_pack_cstr(&pk, "args");
	msgpack_pack_map(&pk, 1);
	mp_kv_str(&pk, "scope", "daemon");
	decode(&sb, &req);

	/* without figures: the eight totals */
	rpc_reply_init(&rp);
	rpc_run_local(s, &lim, &req, 5, 6, 1, 2, false, &rp);
	assert_int_equal(rpc_reply_finish(&rp, req.id), 0);
	msgpack_zone_init(&zone, 1024);
	assert_int_equal(reply_of(&rp, 11, &zone, &result), RPC_OK);
	assert_int_equal(result->via.map.size, 8);
	assert_null(mp_map_get(result, "methods"));
	msgpack_zone_destroy(&zone);
	rpc_reply_release(&rp);

	lim.figures = fake_figures;
	rpc_reply_init(&rp);
	rpc_run_local(s, &lim, &req, 5, 6, 1, 2, false, &rp);
	assert_int_equal(rpc_reply_finish(&rp, req.id), 0);
	msgpack_zone_init(&zone, 1024);
	assert_int_equal(reply_of(&rp, 11, &zone, &result), RPC_OK);
	assert_int_equal(result->via.map.size, 13);
	assert_int_equal(uint_of(result, "requests"), 6);
	assert_int_equal(uint_of(result, "workers"), 2);
	assert_int_equal(mp_field_bool(result, "counting", true, &counting), 0);
	assert_true(counting);
	assert_int_equal(uint_of(result, "received_bytes"), 300);
	assert_int_equal(uint_of(result, "sent_bytes"), 200);
	m = array_of(result, "methods", 2);
	assert_str(&m[0], "method", "Get");
	assert_int_equal(uint_of(&m[0], "requests"), 3);
	assert_int_equal(uint_of(&m[0], "errors"), 1);
	st = mp_map_get(&m[0], "statuses");
	assert_non_null(st);
	assert_int_equal(st->type, MSGPACK_OBJECT_MAP);
	assert_int_equal(st->via.map.size, 2);
	assert_int_equal(uint_of(st, "OK"), 2);
	assert_int_equal(uint_of(st, "NOT_FOUND"), 1);
	assert_int_equal(uint_of(&m[0], "latency_count"), 3);
	assert_int_equal(uint_of(&m[0], "latency_sum_ns"), 150000);
	assert_int_equal(uint_of(&m[0], "p50_ns"), 50000);
	assert_int_equal(uint_of(&m[0], "p90_ns"), 100000);
	assert_true(uint_of(&m[0], "p99_ns") == UINT64_MAX);
	assert_str(&m[1], "method", "invalid");
	assert_int_equal(uint_of(&m[1], "errors"), 1);
	assert_int_equal(uint_of(mp_map_get(&m[1], "statuses"), "INVALID_ARGUMENT"), 1);
	c = array_of(result, "connections", 2);
	assert_str(&c[0], "transport", "stream");
	assert_str(&c[0], "listen", "kv+ipc:///run/kvd/kv.sock");
	assert_int_equal(uint_of(&c[0], "open"), 3);
	assert_str(&c[1], "transport", "nng");
	assert_int_equal(uint_of(&c[1], "open"), 0);
	msgpack_zone_destroy(&zone);
	rpc_reply_release(&rp);

	/* the figures' own allocation fails: a whole error reply */
	rpc_reply_init(&rp);
	oom_arm(1, 1);
	rpc_run_local(s, &lim, &req, 5, 6, 1, 2, false, &rp);
	oom_arm(0, 0);
	assert_int_equal(rpc_reply_finish(&rp, req.id), 0);
	msgpack_zone_init(&zone, 1024);
	assert_int_equal(reply_of(&rp, 11, &zone, &result), RPC_RESOURCE_EXHAUSTED);
	msgpack_zone_destroy(&zone);
	rpc_reply_release(&rp);

	rpc_req_release(&req);
	assert_int_equal(kv_store_close(s), 0);
	tu_rmtree(dir);
	free(dir);
}

/* When the reply's buffer never got memory, rpc_reply_finish still writes
 * the error (into a buffer of its own size); when not even that can be
 * had, it says so and leaves nothing to send. */
static void test_finish_without_any_buffer(void **state)
{
	struct rpc_req req;
	struct rpc_reply rp;
	msgpack_sbuffer sb;
	msgpack_packer pk;
	msgpack_zone zone;
	const msgpack_object *result;

	(void)state;
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 3);
	mp_kv_uint(&pk, "v", 1);
	mp_kv_uint(&pk, "id", 7);
	mp_kv_str(&pk, "method", "Health");
	decode(&sb, &req);

	/* the reply's first allocation and the error's fail; the third works */
	rpc_reply_init(&rp);
	oom_arm(1, 2);
	rpc_run_local(NULL, &limits, &req, 1, 1, 1, 1, false, &rp);
	assert_true(rp.write_failed);
	assert_int_equal(rpc_reply_finish(&rp, req.id), 0);
	assert_int_equal(oom_failed, 2);
	oom_arm(0, 0);
	msgpack_zone_init(&zone, 1024);
	assert_int_equal(reply_of(&rp, 7, &zone, &result), RPC_RESOURCE_EXHAUSTED);
	assert_null(result);
	msgpack_zone_destroy(&zone);
	rpc_reply_release(&rp);

	/* nothing can be had */
	rpc_reply_init(&rp);
	oom_arm(1, 1000);
	rpc_run_local(NULL, &limits, &req, 1, 1, 1, 1, false, &rp);
	assert_int_equal(rpc_reply_finish(&rp, req.id), -ENOMEM);
	oom_arm(0, 0);
	assert_int_equal(rp.buf.size, 0);
	rpc_reply_release(&rp);

	/* with memory, the reply is untouched */
	rpc_reply_init(&rp);
	rpc_run_local(NULL, &limits, &req, 1, 1, 1, 1, false, &rp);
	assert_false(rp.write_failed);
	assert_int_equal(rpc_reply_finish(&rp, req.id), 0);
	msgpack_zone_init(&zone, 1024);
	assert_int_equal(reply_of(&rp, 7, &zone, &result), RPC_OK);
	assert_non_null(mp_map_get(result, "status"));
	msgpack_zone_destroy(&zone);
	rpc_reply_release(&rp);
	rpc_req_release(&req);
}
#endif

int main(void)
{
#if OOM_TESTS
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_scan_reply_out_of_memory),
	        cmocka_unit_test(test_finish_without_any_buffer),
	        cmocka_unit_test(test_stats_daemon_figures),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
#else
	fprintf(stderr, "SKIP: test_server replaces malloc to fail it on purpose, which the "
	                "sanitizer this build uses does not allow\n");
	return 77;
#endif
}
