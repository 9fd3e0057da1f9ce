/* test_requests.c — a real kvd answers requests at the edges of rpc/PROTOCOL.md as it says, the same over the stream transport and over nng. */
/*
 * One kvd, reached by two libkvclient handles: kv+ipc:// (stream framing)
 * and ipc:// (nng REQ/REP). Every request is built here byte by byte and
 * sent with kvc_raw, so what is checked is what the server answers, not
 * what the library would let through. Each check runs on both handles.
 */
#include "harness.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h> /* after the headers it needs */

#include "kvclient.h"
#include "protocol_doc.h"

static struct kvd_proc kvd;
static kvc *clients[2]; /* stream, nng */
static const char *const transport[2] = {"stream", "nng"};

#define FOR_EACH_CLIENT(i) for (int i = 0; i < 2; i++)

static int setup(void **state)
{
	(void)state;
	if (kvd_start(&kvd, NULL) != 0)
		return -1;
	FOR_EACH_CLIENT(i)
	{
		struct kvc_options o;
		kvc_options_init(&o);
		o.endpoint = i == 0 ? kvd.surl : kvd.url;
		o.timeout_ms = 10000;
		if (kvc_open(&o, &clients[i]) != 0)
			return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	int rv;

	(void)state;
	FOR_EACH_CLIENT(i)
	kvc_close(clients[i]);
	rv = kvd_stop(&kvd);
	kvd_cleanup(&kvd, false);
	return rv == 0 ? 0 : -1;
}

/* A reply and the bytes it points into. */
struct reply {
	struct h_reply r;
	void *bytes;
};

static void reply_free(struct reply *rp)
{
	h_reply_free(&rp->r);
	free(rp->bytes);
}

/* Sends the request in q (and destroys q) on client i; the parsed reply. */
static void call(int i, struct h_req *q, struct reply *out)
{
	size_t n = 0;
	int rv = kvc_raw(clients[i], 10000, q->sb.data, q->sb.size, &out->bytes, &n);

	msgpack_sbuffer_destroy(&q->sb);
	if (rv != 0)
		fail_msg("%s: kvc_raw: %s", transport[i], kvc_code_name(rv));
	if (h_parse(out->bytes, n, &out->r) != 0)
		fail_msg("%s: the reply is not a msgpack map with a status", transport[i]);
}

/* call() for its status alone; a status other than want fails with the
 * server's message. */
static void status_is(int i, struct h_req *q, uint64_t want)
{
	struct reply rp;

	call(i, q, &rp);
	if (rp.r.status != want)
		fail_msg("%s: status %llu '%s', want %llu", transport[i],
		         (unsigned long long)rp.r.status, rp.r.message, (unsigned long long)want);
	reply_free(&rp);
}

/* The reply has this status, and its message says substr. */
static void status_and_message(int i, const struct reply *rp, uint64_t status,
                               const char *substr)
{
	if (rp->r.status != status || strstr(rp->r.message, substr) == NULL)
		fail_msg("%s: status %llu '%s', want %llu with '%s'", transport[i],
		         (unsigned long long)rp->r.status, rp->r.message, (unsigned long long)status,
		         substr);
}

/* Put key = value (unconditional); the new version. */
static uint64_t put(int i, const char *key, const char *value)
{
	struct h_req q;
	struct reply rp;
	uint64_t v = 0;

	h_req_begin(&q, "Put", NULL, 1, 2, 0);
	mp_kv_bin(&q.pk, "key", key, strlen(key));
	mp_kv_bin(&q.pk, "value", value, strlen(value));
	call(i, &q, &rp);
	assert_int_equal(rp.r.status, 0);
	assert_int_equal(mp_field_uint(rp.r.result, "version", true, &v), 0);
	reply_free(&rp);
	return v;
}

/* The newest value of key is value, at version. */
static void newest_is(int i, const char *key, const char *value, uint64_t version)
{
	struct h_req q;
	struct reply rp;
	const void *v;
	size_t n;
	uint64_t ver = 0;

	h_req_begin(&q, "Get", NULL, 2, 1, 0);
	mp_kv_bin(&q.pk, "key", key, strlen(key));
	call(i, &q, &rp);
	assert_int_equal(rp.r.status, 0);
	assert_int_equal(mp_field_bin(rp.r.result, "value", true, &v, &n), 0);
	assert_int_equal(n, strlen(value));
	assert_memory_equal(v, value, n);
	assert_int_equal(mp_field_uint(rp.r.result, "version", true, &ver), 0);
	assert_int_equal(ver, version);
	reply_free(&rp);
}

/* ---- if_version ----------------------------------------------------------------- */

/* 2^64-1 is the engine's "no condition"; on the wire it is refused (3)
 * rather than dropped, for Put, Delete and a Batch op, and nothing is
 * written. */
static void test_if_version_max(void **state)
{
	(void)state;
	FOR_EACH_CLIENT(i)
	{
		char key[32];
		struct h_req q;
		uint64_t v;

		snprintf(key, sizeof(key), "ifmax-%s", transport[i]);
		v = put(i, key, "first");

		h_req_begin(&q, "Put", NULL, 3, 3, 0);
		mp_kv_bin(&q.pk, "key", key, strlen(key));
		mp_kv_bin(&q.pk, "value", "second", 6);
		mp_kv_uint(&q.pk, "if_version", UINT64_MAX);
		status_is(i, &q, KVC_INVALID_ARGUMENT);

		h_req_begin(&q, "Delete", NULL, 4, 2, 0);
		mp_kv_bin(&q.pk, "key", key, strlen(key));
		mp_kv_uint(&q.pk, "if_version", UINT64_MAX);
		status_is(i, &q, KVC_INVALID_ARGUMENT);

		h_req_begin(&q, "Batch", NULL, 5, 1, 0);
		mp_pack_cstr(&q.pk, "ops");
		msgpack_pack_array(&q.pk, 1);
		msgpack_pack_map(&q.pk, 4);
		mp_kv_str(&q.pk, "op", "put");
		mp_kv_bin(&q.pk, "key", key, strlen(key));
		mp_kv_bin(&q.pk, "value", "third", 5);
		mp_kv_uint(&q.pk, "if_version", UINT64_MAX);
		status_is(i, &q, KVC_INVALID_ARGUMENT);

		newest_is(i, key, "first", v);

		/* 2^64-2 is a version like any other: compared, and no key has it */
		h_req_begin(&q, "Put", NULL, 6, 3, 0);
		mp_kv_bin(&q.pk, "key", key, strlen(key));
		mp_kv_bin(&q.pk, "value", "fourth", 6);
		mp_kv_uint(&q.pk, "if_version", UINT64_MAX - 1);
		status_is(i, &q, KVC_FAILED_PRECONDITION);
		newest_is(i, key, "first", v);
	}
}

/* ---- Batch ops ----------------------------------------------------------------- */

/* Get of key: its status. */
static uint64_t get_status(int i, const char *key)
{
	struct h_req q;
	struct reply rp;
	uint64_t st;

	h_req_begin(&q, "Get", NULL, 9, 1, 0);
	mp_kv_bin(&q.pk, "key", key, strlen(key));
	call(i, &q, &rp);
	st = rp.r.status;
	reply_free(&rp);
	return st;
}

/* A Batch op needs what the method of its own name needs: a put without a
 * value is refused as Put refuses it (and the whole Batch with it); an
 * empty value is a value; a delete needs no value. */
static void test_batch_op_fields(void **state)
{
	(void)state;
	FOR_EACH_CLIENT(i)
	{
		char k1[32], k2[32];
		struct h_req q;
		struct reply rp;

		snprintf(k1, sizeof(k1), "bf1-%s", transport[i]);
		snprintf(k2, sizeof(k2), "bf2-%s", transport[i]);

		h_req_begin(&q, "Put", NULL, 10, 1, 0);
		mp_kv_bin(&q.pk, "key", k1, strlen(k1));
		call(i, &q, &rp);
		status_and_message(i, &rp, KVC_INVALID_ARGUMENT, "'value' missing");
		reply_free(&rp);

		h_req_begin(&q, "Batch", NULL, 11, 1, 0);
		mp_pack_cstr(&q.pk, "ops");
		msgpack_pack_array(&q.pk, 2);
		msgpack_pack_map(&q.pk, 3);
		mp_kv_str(&q.pk, "op", "put");
		mp_kv_bin(&q.pk, "key", k1, strlen(k1));
		mp_kv_bin(&q.pk, "value", "v", 1);
		msgpack_pack_map(&q.pk, 2);
		mp_kv_str(&q.pk, "op", "put");
		mp_kv_bin(&q.pk, "key", k2, strlen(k2));
		call(i, &q, &rp);
		status_and_message(i, &rp, KVC_INVALID_ARGUMENT, "op 1: 'value' missing");
		reply_free(&rp);
		assert_int_equal(get_status(i, k1), KVC_NOT_FOUND);
		assert_int_equal(get_status(i, k2), KVC_NOT_FOUND);

		/* an empty value, and a delete without one */
		h_req_begin(&q, "Batch", NULL, 12, 1, 0);
		mp_pack_cstr(&q.pk, "ops");
		msgpack_pack_array(&q.pk, 2);
		msgpack_pack_map(&q.pk, 3);
		mp_kv_str(&q.pk, "op", "put");
		mp_kv_bin(&q.pk, "key", k1, strlen(k1));
		mp_kv_bin(&q.pk, "value", "", 0);
		msgpack_pack_map(&q.pk, 2);
		mp_kv_str(&q.pk, "op", "delete");
		mp_kv_bin(&q.pk, "key", k2, strlen(k2));
		call(i, &q, &rp);
		assert_int_equal(rp.r.status, 0);
		reply_free(&rp);
		assert_int_equal(get_status(i, k1), 0);
	}
}

/* ---- nesting ----------------------------------------------------------------- */

/* Packs n nested arrays around an integer (n >= 1), or around nothing when
 * empty. */
static void pack_nested(msgpack_packer *pk, int n, bool empty)
{
	for (int d = 0; d < n; d++)
		msgpack_pack_array(pk, d == n - 1 && empty ? 0 : 1);
	if (!empty)
		msgpack_pack_uint64(pk, 1);
}

/* A Put of key whose args carry an unknown field nesting `arrays` arrays:
 * the request map is level 1, args 2, the arrays 3 and on. */
static void put_with_unknown(int i, const char *key, int arrays, bool empty, struct reply *rp)
{
	struct h_req q;

	h_req_begin(&q, "Put", NULL, 7, 3, 0);
	mp_kv_bin(&q.pk, "key", key, strlen(key));
	mp_kv_bin(&q.pk, "value", "v", 1);
	mp_pack_cstr(&q.pk, "from_the_future");
	pack_nested(&q.pk, arrays, empty);
	call(i, &q, rp);
}

/* Unknown fields are ignored down to PROTOCOL.md's 8 levels of maps and
 * arrays; one level deeper (an empty container too) is refused with a
 * message that says so, and nothing is written. The same in a Batch op. */
static void test_nesting_limit(void **state)
{
	(void)state;
	FOR_EACH_CLIENT(i)
	{
		char key[32];
		struct reply rp;
		struct h_req q;
		uint64_t v;

		snprintf(key, sizeof(key), "deep-%s", transport[i]);
		put_with_unknown(i, key, 6, false, &rp); /* 8 levels */
		assert_int_equal(rp.r.status, 0);
		assert_int_equal(mp_field_uint(rp.r.result, "version", true, &v), 0);
		reply_free(&rp);
		put_with_unknown(i, key, 6, true, &rp);
		assert_int_equal(rp.r.status, 0);
		reply_free(&rp);
		v++;
		put_with_unknown(i, key, 7, false, &rp); /* 9 levels */
		status_and_message(i, &rp, KVC_INVALID_ARGUMENT, "more than 8 deep");
		if (!protocol_says(rp.r.message))
			fail_msg("PROTOCOL.md does not give the message '%s'", rp.r.message);
		reply_free(&rp);
		put_with_unknown(i, key, 7, true, &rp);
		status_and_message(i, &rp, KVC_INVALID_ARGUMENT, "more than 8 deep");
		reply_free(&rp);
		newest_is(i, key, "v", v);

		/* a Batch op's map is level 4: its unknown field has 4 levels */
		for (int arrays = 4; arrays <= 5; arrays++) {
			h_req_begin(&q, "Batch", NULL, 8, 1, 0);
			mp_pack_cstr(&q.pk, "ops");
			msgpack_pack_array(&q.pk, 1);
			msgpack_pack_map(&q.pk, 4);
			mp_kv_str(&q.pk, "op", "put");
			mp_kv_bin(&q.pk, "key", key, strlen(key));
			mp_kv_bin(&q.pk, "value", "b", 1);
			mp_pack_cstr(&q.pk, "from_the_future");
			pack_nested(&q.pk, arrays, false);
			call(i, &q, &rp);
			if (arrays == 4) {
				assert_int_equal(rp.r.status, 0);
				v++;
			} else {
				status_and_message(i, &rp, KVC_INVALID_ARGUMENT, "more than 8 deep");
			}
			reply_free(&rp);
		}
		newest_is(i, key, "b", v);
	}
}

/* ---- answers PROTOCOL.md spells out ------------------------------------------ */

/* Sends raw bytes on client i; the parsed reply. */
static void call_bytes(int i, const void *body, size_t len, struct reply *out)
{
	size_t n = 0;
	int rv = kvc_raw(clients[i], 10000, body, len, &out->bytes, &n);

	if (rv != 0)
		fail_msg("%s: kvc_raw: %s", transport[i], kvc_code_name(rv));
	if (h_parse(out->bytes, n, &out->r) != 0)
		fail_msg("%s: the reply is not a msgpack map with a status", transport[i]);
}

/* A malformed request's reply carries its id once the map could be read,
 * and 0 before that (or when the id itself is wrong). */
static void test_reply_id_of_a_bad_request(void **state)
{
	static const struct {
		const char *what;
		const char *body;
		size_t nuls; /* NUL bytes at the end of body, which strlen misses */
		uint64_t status, id;
	} cases[] = {
	        /* {v: 2, id: 77, method: "Get"} */
	        {"v 2", "\x83\xa1v\x02\xa2id\x4d\xa6method\xa3Get", 0, KVC_UNIMPLEMENTED, 77},
	        /* {v: 1, id: 78, method: "Nope"} */
	        {"unknown method", "\x83\xa1v\x01\xa2id\x4e\xa6method\xa4Nope", 0,
	         KVC_UNIMPLEMENTED, 78},
	        /* {v: 1, id: 79, method: "Get", tenant: ".x"} */
	        {"bad tenant", "\x84\xa1v\x01\xa2id\x4f\xa6method\xa3Get\xa6tenant\xa2.x", 0,
	         KVC_INVALID_ARGUMENT, 79},
	        /* {v: 1, id: 80, method: "Get", args: []} */
	        {"args an array",
	         "\x84\xa1v\x01\xa2id\x50\xa6method\xa3Get\xa4"
	         "args\x90",
	         0, KVC_INVALID_ARGUMENT, 80},
	        /* {v: 1, id: "81", method: "Health"} */
	        {"id a string",
	         "\x83\xa1v\x01\xa2id\xa2"
	         "81\xa6method\xa6Health",
	         0, KVC_INVALID_ARGUMENT, 0},
	        /* {v: 1, id: 82, method: "Health"} and a byte after it */
	        {"trailing byte", "\x83\xa1v\x01\xa2id\x52\xa6method\xa6Health\x00", 1,
	         KVC_INVALID_ARGUMENT, 0},
	};

	(void)state;
	FOR_EACH_CLIENT(i)
	{
		for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
			struct reply rp;
			/* the length: the literal's, without its NUL */
			call_bytes(i, cases[c].body, strlen(cases[c].body) + cases[c].nuls, &rp);
			if (rp.r.status != cases[c].status || rp.r.id != cases[c].id)
				fail_msg("%s, %s: status %llu id %llu, want %llu id %llu",
				         transport[i], cases[c].what,
				         (unsigned long long)rp.r.status,
				         (unsigned long long)rp.r.id,
				         (unsigned long long)cases[c].status,
				         (unsigned long long)cases[c].id);
			reply_free(&rp);
		}
	}
}

/* Put to a tenant that does not exist: 5, and the tenant is not created. */
static void test_missing_tenant(void **state)
{
	(void)state;
	FOR_EACH_CLIENT(i)
	{
		struct h_req q;

		h_req_begin(&q, "Put", "nobody-here", 13, 2, 0);
		mp_kv_bin(&q.pk, "key", "k", 1);
		mp_kv_bin(&q.pk, "value", "v", 1);
		status_is(i, &q, KVC_NOT_FOUND);
		h_req_begin(&q, "TenantInfo", NULL, 14, 1, 0);
		mp_kv_str(&q.pk, "name", "nobody-here");
		status_is(i, &q, KVC_NOT_FOUND);
	}
}

/* A limit over the maximum is taken as the maximum, not refused; Get with
 * both version and as_of reads the version; expiry_ms is an absolute
 * time, timestamp_ms + ttl_ms on the server's wall clock. */
static void test_documented_reads(void **state)
{
	(void)state;
	FOR_EACH_CLIENT(i)
	{
		char key[32];
		struct h_req q;
		struct reply rp;
		uint64_t v1, v2, ts = 0, exp = 0, ver = 0;
		struct timespec now;
		const void *val;
		size_t n;

		snprintf(key, sizeof(key), "doc-%s", transport[i]);
		v1 = put(i, key, "one");
		v2 = put(i, key, "two");

		h_req_begin(&q, "Scan", NULL, 15, 2, 0);
		mp_kv_bin(&q.pk, "prefix", key, strlen(key));
		mp_kv_uint(&q.pk, "limit", 1000000);
		status_is(i, &q, 0);
		h_req_begin(&q, "Versions", NULL, 16, 2, 0);
		mp_kv_bin(&q.pk, "key", key, strlen(key));
		mp_kv_uint(&q.pk, "limit", 1000000);
		status_is(i, &q, 0);

		h_req_begin(&q, "Get", NULL, 17, 3, 0);
		mp_kv_bin(&q.pk, "key", key, strlen(key));
		mp_kv_uint(&q.pk, "version", v1);
		mp_kv_uint(&q.pk, "as_of", v2);
		call(i, &q, &rp);
		assert_int_equal(rp.r.status, 0);
		assert_int_equal(mp_field_bin(rp.r.result, "value", true, &val, &n), 0);
		assert_int_equal(n, 3);
		assert_memory_equal(val, "one", 3);
		reply_free(&rp);

		h_req_begin(&q, "Put", NULL, 18, 3, 0);
		mp_kv_bin(&q.pk, "key", key, strlen(key));
		mp_kv_bin(&q.pk, "value", "ttl", 3);
		mp_kv_uint(&q.pk, "ttl_ms", 3600000);
		status_is(i, &q, 0);
		h_req_begin(&q, "Get", NULL, 19, 1, 0);
		mp_kv_bin(&q.pk, "key", key, strlen(key));
		call(i, &q, &rp);
		assert_int_equal(rp.r.status, 0);
		assert_int_equal(mp_field_uint(rp.r.result, "timestamp_ms", true, &ts), 0);
		assert_int_equal(mp_field_uint(rp.r.result, "expiry_ms", true, &exp), 0);
		assert_int_equal(mp_field_uint(rp.r.result, "version", true, &ver), 0);
		reply_free(&rp);
		assert_int_equal(ver, v2 + 1);
		assert_int_equal(exp, ts + 3600000);
		clock_gettime(CLOCK_REALTIME, &now);
		/* the write happened during this test, on the same machine's clock */
		assert_true(ts <= (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000);
		assert_true(ts + 600000 > (uint64_t)now.tv_sec * 1000);
	}
}

/* ---- the message size limit --------------------------------------------------- */

/* A Put whose whole request is exactly `size` bytes. */
static void sized_put(struct h_req *q, size_t size, void *value)
{
	size_t len = size / 2, have;

	for (;;) {
		h_req_begin(q, "Put", NULL, 7, 2, 0);
		mp_kv_bin(&q->pk, "key", "big", 3);
		mp_kv_bin(&q->pk, "value", value, len);
		have = q->sb.size;
		if (have == size)
			return;
		msgpack_sbuffer_destroy(&q->sb);
		len += size - have; /* bin32's header stays 5 bytes at this size */
	}
}

/* A message of exactly max_message_size bytes is read and answered on both
 * transports;
 * one byte more is refused on both (nng closes the connection, the stream
 * transport answers 8). */
static void test_message_size_limit(void **state)
{
	struct kvd_opts o = {.config_text = "max_message_size = 1M\nmax_value_size = 512K\n"};
	struct kvd_proc k;
	size_t limit = 1u << 20;
	char *value = calloc(1, limit);
	kvc *c[2];

	(void)state;
	assert_non_null(value);
	assert_int_equal(kvd_start(&k, &o), 0);
	FOR_EACH_CLIENT(i)
	{
		struct kvc_options co;
		kvc_options_init(&co);
		co.endpoint = i == 0 ? k.surl : k.url;
		co.max_message_size = 2 * limit;
		assert_int_equal(kvc_open(&co, &c[i]), 0);
	}
	FOR_EACH_CLIENT(i)
	{
		struct h_req q;
		struct h_reply r;
		void *out = NULL;
		size_t n = 0;
		int rv;

		sized_put(&q, limit, value);
		rv = kvc_raw(c[i], 10000, q.sb.data, q.sb.size, &out, &n);
		msgpack_sbuffer_destroy(&q.sb);
		if (rv != 0)
			fail_msg("%s: a message of exactly max_message_size: %s", transport[i],
			         kvc_code_name(rv));
		assert_int_equal(h_parse(out, n, &r), 0);
		/* read and answered: its value is over max_value_size (3), the
		 * message itself not over max_message_size (8) */
		if (r.status != 3 || strstr(r.message, "'value'") == NULL)
			fail_msg("%s: a message of exactly max_message_size: status %llu '%s'",
			         transport[i], (unsigned long long)r.status, r.message);
		h_reply_free(&r);
		free(out);
		out = NULL;

		sized_put(&q, limit + 1, value);
		rv = kvc_raw(c[i], 2000, q.sb.data, q.sb.size, &out, &n);
		msgpack_sbuffer_destroy(&q.sb);
		if (i == 1) {
			if (rv == 0)
				fail_msg("nng: a message one byte over max_message_size was answered");
		} else {
			assert_int_equal(rv, 0);
			assert_int_equal(h_parse(out, n, &r), 0);
			if (r.status != 8)
				fail_msg("stream: one byte over max_message_size: status %llu '%s', want 8",
				         (unsigned long long)r.status, r.message);
			h_reply_free(&r);
		}
		free(out);
	}
	FOR_EACH_CLIENT(i)
	kvc_close(c[i]);
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
	free(value);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_if_version_max),
	        cmocka_unit_test(test_nesting_limit),
	        cmocka_unit_test(test_batch_op_fields),
	        cmocka_unit_test(test_reply_id_of_a_bad_request),
	        cmocka_unit_test(test_missing_tenant),
	        cmocka_unit_test(test_documented_reads),
	        cmocka_unit_test(test_message_size_limit),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, setup, teardown);
}
