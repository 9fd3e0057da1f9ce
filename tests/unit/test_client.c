/* test_client.c — libkvclient speaks PROTOCOL.md and survives a misbehaving or absent server. */
/*
 * Requests encode to PROTOCOL.md's example bytes and its example replies
 * decode; against an in-process REP responder: round trips and status
 * mapping, timeouts with context reuse, failing fast while no daemon
 * listens, lost connections, malformed replies, scan paging on one
 * snapshot, batches, async calls, and many threads on one handle.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h> /* after the headers it needs */

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>

#include "client_codec.h"
#include "kvclient.h"

/* ---- helpers ---------------------------------------------------------------- */

static size_t unhex(const char *hex, uint8_t *out, size_t cap)
{
	size_t n = 0;
	unsigned v;

	while (*hex != '\0') {
		if (*hex == ' ' || *hex == '\n') {
			hex++;
			continue;
		}
		assert_true(sscanf(hex, "%2x", &v) == 1);
		assert_true(n < cap);
		out[n++] = (uint8_t)v;
		hex += 2;
	}
	return n;
}

static void assert_bytes(const msgpack_sbuffer *sb, const char *hex)
{
	uint8_t want[1024];
	size_t n = unhex(hex, want, sizeof(want));
	size_t i;

	for (i = 0; i < n && i < sb->size; i++) {
		if ((uint8_t)sb->data[i] != want[i])
			fail_msg("byte %zu: got %02x, want %02x", i, (uint8_t)sb->data[i], want[i]);
	}
	assert_int_equal(sb->size, n);
}

struct enc {
	msgpack_sbuffer sb;
	msgpack_packer pk;
};

static msgpack_packer *enc_begin(struct enc *e, uint64_t id, const char *method, const char *tenant,
                                 bool has_args)
{
	struct creq_envelope env = {
	        .id = id, .method = method, .tenant = tenant, .has_args = has_args};

	msgpack_sbuffer_init(&e->sb);
	msgpack_packer_init(&e->pk, &e->sb, msgpack_sbuffer_write);
	creq_envelope(&e->pk, &env);
	return &e->pk;
}

static void enc_check(struct enc *e, const char *hex)
{
	assert_bytes(&e->sb, hex);
	msgpack_sbuffer_destroy(&e->sb);
}

/* A parsed example reply: its envelope and zone. */
struct parsed {
	uint8_t buf[1024];
	msgpack_zone zone;
	msgpack_object root;
	struct crep_envelope env;
};

static void parse_reply(struct parsed *p, const char *hex, uint64_t id, uint64_t status)
{
	size_t n = unhex(hex, p->buf, sizeof(p->buf));

	msgpack_zone_init(&p->zone, 1024);
	assert_int_equal(mp_parse(p->buf, n, &p->zone, &p->root), 0);
	assert_int_equal(crep_envelope(&p->root, &p->env), 0);
	assert_int_equal(p->env.id, id);
	assert_int_equal(p->env.status, status);
}

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- requests: PROTOCOL.md's examples, byte for byte -------------------------- */

static void test_encode_examples(void **state)
{
	struct enc e;
	struct kvc_scan_opts so = {.prefix = "user:", .prefix_len = 5};
	struct kvc_op ops[2] = {
	        {.type = KVC_OP_PUT,
	         .key = "a",
	         .key_len = 1,
	         .value = "1",
	         .value_len = 1,
	         .if_version = KVC_ANY_VERSION},
	        {.type = KVC_OP_DELETE, .key = "b", .key_len = 1, .if_version = KVC_ANY_VERSION},
	};
	struct kvc_tenant_opts to = {.sync = KVC_SYNC_INTERVAL,
	                             .sync_interval_ms = 50,
	                             .history = 5,
	                             .ttl_ms = 0,
	                             .max_keys = 1000000};

	(void)state;
	creq_put(enc_begin(&e, 1, "Put", "default", true), "user:1", 6, "Ada", 3, KVC_ANY_VERSION,
	         0);
	enc_check(&e, "85 a1 76 01 a2 69 64 01 a6 6d 65 74 68 6f 64 a3"
	              "50 75 74 a6 74 65 6e 61 6e 74 a7 64 65 66 61 75"
	              "6c 74 a4 61 72 67 73 82 a3 6b 65 79 c4 06 75 73"
	              "65 72 3a 31 a5 76 61 6c 75 65 c4 03 41 64 61");

	creq_put(enc_begin(&e, 2, "Put", NULL, true), "lock", 4, "me", 2, 0, 30000);
	enc_check(&e, "84 a1 76 01 a2 69 64 02 a6 6d 65 74 68 6f 64 a3"
	              "50 75 74 a4 61 72 67 73 84 a3 6b 65 79 c4 04 6c"
	              "6f 63 6b a5 76 61 6c 75 65 c4 02 6d 65 aa 69 66"
	              "5f 76 65 72 73 69 6f 6e 00 a6 74 74 6c 5f 6d 73"
	              "cd 75 30");

	creq_get(enc_begin(&e, 3, "Get", NULL, true), "user:1", 6, 0, 0);
	enc_check(&e, "84 a1 76 01 a2 69 64 03 a6 6d 65 74 68 6f 64 a3"
	              "47 65 74 a4 61 72 67 73 81 a3 6b 65 79 c4 06 75"
	              "73 65 72 3a 31");

	creq_get(enc_begin(&e, 4, "Get", NULL, true), "user:1", 6, 0, 40);
	enc_check(&e, "84 a1 76 01 a2 69 64 04 a6 6d 65 74 68 6f 64 a3"
	              "47 65 74 a4 61 72 67 73 82 a3 6b 65 79 c4 06 75"
	              "73 65 72 3a 31 a5 61 73 5f 6f 66 28");

	creq_delete(enc_begin(&e, 5, "Delete", NULL, true), "user:1", 6, 42);
	enc_check(&e, "84 a1 76 01 a2 69 64 05 a6 6d 65 74 68 6f 64 a6"
	              "44 65 6c 65 74 65 a4 61 72 67 73 82 a3 6b 65 79"
	              "c4 06 75 73 65 72 3a 31 aa 69 66 5f 76 65 72 73"
	              "69 6f 6e 2a");

	creq_scan(enc_begin(&e, 6, "Scan", NULL, true), &so, 2, 0, NULL, 0);
	enc_check(&e, "84 a1 76 01 a2 69 64 06 a6 6d 65 74 68 6f 64 a4"
	              "53 63 61 6e a4 61 72 67 73 82 a6 70 72 65 66 69"
	              "78 c4 05 75 73 65 72 3a a5 6c 69 6d 69 74 02");

	creq_scan(enc_begin(&e, 7, "Scan", NULL, true), &so, 2, 50, "\0user:2", 7);
	enc_check(&e, "84 a1 76 01 a2 69 64 07 a6 6d 65 74 68 6f 64 a4"
	              "53 63 61 6e a4 61 72 67 73 84 a6 70 72 65 66 69"
	              "78 c4 05 75 73 65 72 3a a5 6c 69 6d 69 74 02 a5"
	              "61 73 5f 6f 66 32 ac 63 6f 6e 74 69 6e 75 61 74"
	              "69 6f 6e c4 07 00 75 73 65 72 3a 32");

	creq_versions(enc_begin(&e, 8, "Versions", NULL, true), "k", 1, 3, 0, true);
	enc_check(&e, "84 a1 76 01 a2 69 64 08 a6 6d 65 74 68 6f 64 a8"
	              "56 65 72 73 69 6f 6e 73 a4 61 72 67 73 82 a3 6b"
	              "65 79 c4 01 6b a5 6c 69 6d 69 74 03");

	creq_batch(enc_begin(&e, 9, "Batch", NULL, true), ops, 2);
	enc_check(&e, "84 a1 76 01 a2 69 64 09 a6 6d 65 74 68 6f 64 a5"
	              "42 61 74 63 68 a4 61 72 67 73 81 a3 6f 70 73 92"
	              "83 a2 6f 70 a3 70 75 74 a3 6b 65 79 c4 01 61 a5"
	              "76 61 6c 75 65 c4 01 31 82 a2 6f 70 a6 64 65 6c"
	              "65 74 65 a3 6b 65 79 c4 01 62");

	creq_compact(enc_begin(&e, 10, "Compact", NULL, true), 50);
	enc_check(&e, "84 a1 76 01 a2 69 64 0a a6 6d 65 74 68 6f 64 a7"
	              "43 6f 6d 70 61 63 74 a4 61 72 67 73 81 a8 72 65"
	              "76 69 73 69 6f 6e 32");

	creq_stats(enc_begin(&e, 11, "Stats", NULL, true), true);
	enc_check(&e, "84 a1 76 01 a2 69 64 0b a6 6d 65 74 68 6f 64 a5"
	              "53 74 61 74 73 a4 61 72 67 73 81 a5 73 63 6f 70"
	              "65 a6 64 61 65 6d 6f 6e");

	creq_tenant_create(enc_begin(&e, 12, "TenantCreate", NULL, true), "orders", &to, NULL, NULL);
	enc_check(&e, "84 a1 76 01 a2 69 64 0c a6 6d 65 74 68 6f 64 ac"
	              "54 65 6e 61 6e 74 43 72 65 61 74 65 a4 61 72 67"
	              "73 86 a4 6e 61 6d 65 a6 6f 72 64 65 72 73 a4 73"
	              "79 6e 63 a8 69 6e 74 65 72 76 61 6c b0 73 79 6e"
	              "63 5f 69 6e 74 65 72 76 61 6c 5f 6d 73 32 a7 68"
	              "69 73 74 6f 72 79 05 a6 74 74 6c 5f 6d 73 00 a8"
	              "6d 61 78 5f 6b 65 79 73 ce 00 0f 42 40");

	creq_name(enc_begin(&e, 13, "TenantDrop", NULL, true), "orders");
	enc_check(&e, "84 a1 76 01 a2 69 64 0d a6 6d 65 74 68 6f 64 aa"
	              "54 65 6e 61 6e 74 44 72 6f 70 a4 61 72 67 73 81"
	              "a4 6e 61 6d 65 a6 6f 72 64 65 72 73");

	enc_begin(&e, 14, "TenantList", NULL, false);
	enc_check(&e, "83 a1 76 01 a2 69 64 0e a6 6d 65 74 68 6f 64 aa"
	              "54 65 6e 61 6e 74 4c 69 73 74");

	creq_name(enc_begin(&e, 15, "TenantInfo", NULL, true), "orders");
	enc_check(&e, "84 a1 76 01 a2 69 64 0f a6 6d 65 74 68 6f 64 aa"
	              "54 65 6e 61 6e 74 49 6e 66 6f a4 61 72 67 73 81"
	              "a4 6e 61 6d 65 a6 6f 72 64 65 72 73");

	creq_name(enc_begin(&e, 16, "TenantPassivate", NULL, true), "orders");
	enc_check(&e, "84 a1 76 01 a2 69 64 10 a6 6d 65 74 68 6f 64 af"
	              "54 65 6e 61 6e 74 50 61 73 73 69 76 61 74 65 a4"
	              "61 72 67 73 81 a4 6e 61 6d 65 a6 6f 72 64 65 72"
	              "73");

	creq_name(enc_begin(&e, 17, "TenantActivate", NULL, true), "orders");
	enc_check(&e, "84 a1 76 01 a2 69 64 11 a6 6d 65 74 68 6f 64 ae"
	              "54 65 6e 61 6e 74 41 63 74 69 76 61 74 65 a4 61"
	              "72 67 73 81 a4 6e 61 6d 65 a6 6f 72 64 65 72 73");

	enc_begin(&e, 18, "Health", NULL, false);
	enc_check(&e, "83 a1 76 01 a2 69 64 12 a6 6d 65 74 68 6f 64 a6"
	              "48 65 61 6c 74 68");
}

/* The fields the API adds to an envelope, and the TTL conventions. */
static void test_encode_envelope_and_ttl(void **state)
{
	struct creq_envelope env = {.id = 7,
	                            .client = 0x1122334455667788ull,
	                            .method = "Put",
	                            .tenant = "t1",
	                            .timeout_ms = 5000,
	                            .token = "secret",
	                            .has_args = true};
	msgpack_sbuffer sb;
	msgpack_packer pk;
	msgpack_zone zone;
	msgpack_object root;
	const msgpack_object *args;
	uint64_t u = 0;
	const char *s;
	size_t n;

	(void)state;
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	creq_envelope(&pk, &env);
	creq_put(&pk, "k", 1, "", 0, KVC_ANY_VERSION, KVC_TTL_NONE);
	msgpack_zone_init(&zone, 512);
	assert_int_equal(mp_parse((const uint8_t *)sb.data, sb.size, &zone, &root), 0);
	assert_int_equal(root.via.map.size, 8);
	assert_int_equal(mp_field_uint(&root, "client", true, &u), 0);
	assert_true(u == 0x1122334455667788ull);
	assert_int_equal(mp_field_uint(&root, "timeout_ms", true, &u), 0);
	assert_int_equal(u, 5000);
	assert_int_equal(mp_field_str(&root, "token", true, &s, &n), 0);
	assert_int_equal(n, 6);
	assert_int_equal(mp_field_str(&root, "tenant", true, &s, &n), 0);
	assert_memory_equal(s, "t1", 2);
	args = mp_map_get(&root, "args");
	assert_non_null(args);
	/* KVC_TTL_NONE is ttl_ms 0 on the wire; an empty value is bin 0 */
	assert_int_equal(args->via.map.size, 3);
	u = 99;
	assert_int_equal(mp_field_uint(args, "ttl_ms", true, &u), 0);
	assert_int_equal(u, 0);
	assert_int_equal(mp_map_get(args, "value")->type, MSGPACK_OBJECT_BIN);
	msgpack_zone_destroy(&zone);
	msgpack_sbuffer_destroy(&sb);
}

/* ---- replies: PROTOCOL.md's examples decode -------------------------------------- */

static void test_decode_examples(void **state)
{
	struct parsed p;
	const void *v;
	size_t n;
	uint64_t version, ts, exp, us;
	struct crep_scan_page pg;
	struct kvc_item it;
	const msgpack_object *list;
	bool truncated;
	struct kvc_version ver;
	struct kvc_op ops[2];
	struct kvc_compact_result cr;
	struct kvc_daemon_stats ds;
	struct kvc_tenant_entry te;
	struct kvc_tenant_info ti;
	struct kvc_health h;

	(void)state;
	parse_reply(&p,
	            "84 a1 76 01 a2 69 64 01 a6 73 74 61 74 75 73 00"
	            "a6 72 65 73 75 6c 74 81 a7 76 65 72 73 69 6f 6e 2a",
	            1, 0);
	assert_int_equal(crep_version(p.env.result, &version), 0);
	assert_int_equal(version, 42);
	msgpack_zone_destroy(&p.zone);

	parse_reply(&p,
	            "84 a1 76 01 a2 69 64 02 a6 73 74 61 74 75 73 09"
	            "a7 6d 65 73 73 61 67 65 bd 76 65 72 73 69 6f 6e"
	            "20 6d 69 73 6d 61 74 63 68 20 28 69 66 5f 76 65"
	            "72 73 69 6f 6e 29",
	            2, 9);
	assert_int_equal(p.env.message_len, 29);
	assert_memory_equal(p.env.message, "version mismatch (if_version)", 29);
	assert_null(p.env.result);
	msgpack_zone_destroy(&p.zone);

	parse_reply(&p,
	            "84 a1 76 01 a2 69 64 03 a6 73 74 61 74 75 73 00"
	            "a6 72 65 73 75 6c 74 84 a5 76 61 6c 75 65 c4 03"
	            "41 64 61 a7 76 65 72 73 69 6f 6e 2a ac 74 69 6d"
	            "65 73 74 61 6d 70 5f 6d 73 cf 00 00 01 9a d3 c6"
	            "9c 00 a9 65 78 70 69 72 79 5f 6d 73 00",
	            3, 0);
	assert_int_equal(crep_get(p.env.result, &v, &n, &version, &ts, &exp), 0);
	assert_int_equal(n, 3);
	assert_memory_equal(v, "Ada", 3);
	assert_int_equal(version, 42);
	assert_true(ts == 1764489600000ull);
	assert_int_equal(exp, 0);
	msgpack_zone_destroy(&p.zone);

	parse_reply(&p,
	            "84 a1 76 01 a2 69 64 06 a6 73 74 61 74 75 73 00"
	            "a6 72 65 73 75 6c 74 84 a5 69 74 65 6d 73 92 93"
	            "c4 06 75 73 65 72 3a 31 c4 03 41 64 61 2a 93 c4"
	            "06 75 73 65 72 3a 32 c4 03 42 6f 62 2c a8 72 65"
	            "76 69 73 69 6f 6e 32 a4 6d 6f 72 65 c3 ac 63 6f"
	            "6e 74 69 6e 75 61 74 69 6f 6e c4 07 00 75 73 65"
	            "72 3a 32",
	            6, 0);
	assert_int_equal(crep_scan(p.env.result, &pg), 0);
	assert_int_equal(pg.items->via.array.size, 2);
	assert_int_equal(pg.revision, 50);
	assert_true(pg.more);
	assert_int_equal(pg.cont_len, 7);
	assert_memory_equal(pg.cont, "\0user:2", 7);
	assert_int_equal(crep_scan_item(&pg.items->via.array.ptr[1], &it), 0);
	assert_int_equal(it.key_len, 6);
	assert_memory_equal(it.key, "user:2", 6);
	assert_memory_equal(it.value, "Bob", 3);
	assert_int_equal(it.version, 44);
	msgpack_zone_destroy(&p.zone);

	parse_reply(&p,
	            "84 a1 76 01 a2 69 64 07 a6 73 74 61 74 75 73 00"
	            "a6 72 65 73 75 6c 74 83 a5 69 74 65 6d 73 91 93"
	            "c4 06 75 73 65 72 3a 33 c4 02 43 79 2f a8 72 65"
	            "76 69 73 69 6f 6e 32 a4 6d 6f 72 65 c2",
	            7, 0);
	assert_int_equal(crep_scan(p.env.result, &pg), 0);
	assert_false(pg.more);
	assert_null(pg.cont);
	msgpack_zone_destroy(&p.zone);

	parse_reply(&p,
	            "84 a1 76 01 a2 69 64 08 a6 73 74 61 74 75 73 00"
	            "a6 72 65 73 75 6c 74 82 a8 76 65 72 73 69 6f 6e"
	            "73 93 94 09 cf 00 00 01 9a d3 c6 9f 84 c2 c4 02"
	            "76 33 94 07 cf 00 00 01 9a d3 c6 9e bc c3 c0 94"
	            "05 cf 00 00 01 9a d3 c6 9d f4 c2 c4 02 76 31 a9"
	            "74 72 75 6e 63 61 74 65 64 c2",
	            8, 0);
	assert_int_equal(crep_versions(p.env.result, &list, &truncated), 0);
	assert_int_equal(list->via.array.size, 3);
	assert_false(truncated);
	assert_int_equal(crep_version_entry(&list->via.array.ptr[0], &ver), 0);
	assert_int_equal(ver.version, 9);
	assert_false(ver.deleted);
	assert_memory_equal(ver.data, "v3", 2);
	assert_int_equal(crep_version_entry(&list->via.array.ptr[1], &ver), 0);
	assert_int_equal(ver.version, 7);
	assert_true(ver.deleted);
	assert_null(ver.data);
	assert_true(ver.timestamp_ms == 1764489600700ull);
	msgpack_zone_destroy(&p.zone);

	parse_reply(&p,
	            "84 a1 76 01 a2 69 64 09 a6 73 74 61 74 75 73 00"
	            "a6 72 65 73 75 6c 74 81 a8 76 65 72 73 69 6f 6e"
	            "73 92 33 34",
	            9, 0);
	assert_int_equal(crep_batch(p.env.result, ops, 2), 0);
	assert_int_equal(ops[0].version, 51);
	assert_int_equal(ops[1].version, 52);
	assert_int_equal(crep_batch(p.env.result, ops, 3), -EINVAL);
	msgpack_zone_destroy(&p.zone);

	parse_reply(&p,
	            "84 a1 76 01 a2 69 64 0a a6 73 74 61 74 75 73 00"
	            "a6 72 65 73 75 6c 74 83 b0 63 6f 6d 70 61 63 74"
	            "5f 72 65 76 69 73 69 6f 6e 32 b1 64 69 73 6b 5f"
	            "62 79 74 65 73 5f 62 65 66 6f 72 65 ce 00 10 00"
	            "00 b0 64 69 73 6b 5f 62 79 74 65 73 5f 61 66 74"
	            "65 72 ce 00 01 00 00",
	            10, 0);
	assert_int_equal(crep_compact(p.env.result, &cr), 0);
	assert_int_equal(cr.compact_revision, 50);
	assert_int_equal(cr.disk_bytes_before, 1048576);
	assert_int_equal(cr.disk_bytes_after, 65536);
	msgpack_zone_destroy(&p.zone);

	parse_reply(&p,
	            "84 a1 76 01 a2 69 64 0b a6 73 74 61 74 75 73 00"
	            "a6 72 65 73 75 6c 74 88 a7 76 65 72 73 69 6f 6e"
	            "a5 30 2e 31 2e 30 a8 75 70 74 69 6d 65 5f 73 cd"
	            "0e 10 a7 74 65 6e 61 6e 74 73 02 ae 61 63 74 69"
	            "76 65 5f 74 65 6e 61 6e 74 73 01 a8 72 65 71 75"
	            "65 73 74 73 cd 03 e8 a9 69 6e 5f 66 6c 69 67 68"
	            "74 01 ac 6b 65 79 64 69 72 5f 62 79 74 65 73 cd"
	            "10 00 a7 77 6f 72 6b 65 72 73 02",
	            11, 0);
	assert_int_equal(crep_daemon_stats(p.env.result, &ds), 0);
	assert_string_equal(ds.version, "0.1.0");
	assert_int_equal(ds.uptime_s, 3600);
	assert_int_equal(ds.tenants, 2);
	assert_int_equal(ds.active_tenants, 1);
	assert_int_equal(ds.requests, 1000);
	assert_int_equal(ds.in_flight, 1);
	assert_int_equal(ds.keydir_bytes, 4096);
	assert_int_equal(ds.workers, 2);
	/* a kvd without the figures: the totals, nothing else */
	{
		struct kvc_daemon_detail *dd = NULL;
		assert_int_equal(crep_daemon_detail(p.env.result, &dd), 0);
		assert_int_equal(dd->daemon.keydir_bytes, 4096);
		assert_false(dd->counting);
		assert_int_equal(dd->nmethods, 0);
		assert_int_equal(dd->nconnections, 0);
		kvc_daemon_detail_free(dd);
	}
	msgpack_zone_destroy(&p.zone);

	parse_reply(&p,
	            "84 a1 76 01 a2 69 64 0e a6 73 74 61 74 75 73 00"
	            "a6 72 65 73 75 6c 74 81 a7 74 65 6e 61 6e 74 73"
	            "92 82 a4 6e 61 6d 65 a7 64 65 66 61 75 6c 74 a5"
	            "73 74 61 74 65 a6 61 63 74 69 76 65 82 a4 6e 61"
	            "6d 65 a6 6f 72 64 65 72 73 a5 73 74 61 74 65 a7"
	            "70 61 73 73 69 76 65",
	            14, 0);
	assert_int_equal(crep_tenant_list(p.env.result, &list), 0);
	assert_int_equal(list->via.array.size, 2);
	assert_int_equal(crep_tenant_entry(&list->via.array.ptr[0], &te), 0);
	assert_string_equal(te.name, "default");
	assert_true(te.active);
	assert_int_equal(crep_tenant_entry(&list->via.array.ptr[1], &te), 0);
	assert_string_equal(te.name, "orders");
	assert_false(te.active);
	msgpack_zone_destroy(&p.zone);

	parse_reply(&p,
	            "84 a1 76 01 a2 69 64 0f a6 73 74 61 74 75 73 00"
	            "a6 72 65 73 75 6c 74 8e a4 6e 61 6d 65 a6 6f 72"
	            "64 65 72 73 a5 73 74 61 74 65 a7 70 61 73 73 69"
	            "76 65 a6 69 64 6c 65 5f 73 78 a4 6b 65 79 73 0a"
	            "aa 6c 69 76 65 5f 62 79 74 65 73 cd 06 40 aa 64"
	            "69 73 6b 5f 62 79 74 65 73 cd 10 00 ac 6b 65 79"
	            "64 69 72 5f 62 79 74 65 73 00 ab 61 63 74 69 76"
	            "61 74 69 6f 6e 73 01 b2 6c 61 73 74 5f 61 63 74"
	            "69 76 61 74 69 6f 6e 5f 6d 73 cf 00 00 01 9a d3"
	            "c6 9c 00 ac 6c 61 73 74 5f 76 65 72 73 69 6f 6e"
	            "0c a4 73 79 6e 63 a8 69 6e 74 65 72 76 61 6c a7"
	            "68 69 73 74 6f 72 79 05 a6 74 74 6c 5f 6d 73 00"
	            "a8 6d 61 78 5f 6b 65 79 73 ce 00 0f 42 40",
	            15, 0);
	assert_int_equal(crep_tenant_info(p.env.result, &ti), 0);
	assert_string_equal(ti.name, "orders");
	assert_false(ti.active);
	assert_int_equal(ti.idle_s, 120);
	assert_int_equal(ti.keys, 10);
	assert_int_equal(ti.live_bytes, 1600);
	assert_int_equal(ti.disk_bytes, 4096);
	assert_int_equal(ti.activations, 1);
	assert_true(ti.last_activation_ms == 1764489600000ull);
	assert_int_equal(ti.last_version, 12);
	assert_int_equal(ti.sync, KVC_SYNC_INTERVAL);
	assert_int_equal(ti.history, 5);
	assert_int_equal(ti.max_keys, 1000000);
	msgpack_zone_destroy(&p.zone);

	parse_reply(&p,
	            "84 a1 76 01 a2 69 64 11 a6 73 74 61 74 75 73 00"
	            "a6 72 65 73 75 6c 74 83 a4 6e 61 6d 65 a6 6f 72"
	            "64 65 72 73 a5 73 74 61 74 65 a6 61 63 74 69 76"
	            "65 ad 61 63 74 69 76 61 74 69 6f 6e 5f 75 73 cd"
	            "03 52",
	            17, 0);
	assert_int_equal(crep_activate(p.env.result, &us), 0);
	assert_int_equal(us, 850);
	msgpack_zone_destroy(&p.zone);

	parse_reply(&p,
	            "84 a1 76 01 a2 69 64 12 a6 73 74 61 74 75 73 00"
	            "a6 72 65 73 75 6c 74 83 a6 73 74 61 74 75 73 a7"
	            "73 65 72 76 69 6e 67 a7 76 65 72 73 69 6f 6e a5"
	            "30 2e 31 2e 30 a8 75 70 74 69 6d 65 5f 73 cd 0e"
	            "10",
	            18, 0);
	assert_int_equal(crep_health(p.env.result, &h), 0);
	assert_string_equal(h.status, "serving");
	assert_string_equal(h.version, "0.1.0");
	assert_int_equal(h.uptime_s, 3600);
	msgpack_zone_destroy(&p.zone);
}

/* Replies of the wrong shape are refused, not half-read. */
/* A daemon Stats result map packed by fill, parsed into p (its zone). */
static const msgpack_object *daemon_result(struct parsed *p, void (*fill)(msgpack_packer *pk))
{
	msgpack_sbuffer sb;
	msgpack_packer pk;

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	fill(&pk);
	assert_true(sb.size <= sizeof(p->buf));
	memcpy(p->buf, sb.data, sb.size);
	msgpack_zone_init(&p->zone, 1024);
	assert_int_equal(mp_parse(p->buf, sb.size, &p->zone, &p->root), 0);
	msgpack_sbuffer_destroy(&sb);
	return &p->root;
}

static void methods_not_array(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 1);
	mp_kv_uint(pk, "methods", 1);
}

static void method_without_name(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 1);
	mp_pack_cstr(pk, "methods");
	msgpack_pack_array(pk, 1);
	msgpack_pack_map(pk, 1);
	mp_kv_uint(pk, "requests", 1);
}

static void status_count_not_uint(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 1);
	mp_pack_cstr(pk, "methods");
	msgpack_pack_array(pk, 1);
	msgpack_pack_map(pk, 2);
	mp_kv_str(pk, "method", "Get");
	mp_pack_cstr(pk, "statuses");
	msgpack_pack_map(pk, 1);
	mp_kv_str(pk, "OK", "1");
}

static void connection_open_not_uint(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 1);
	mp_pack_cstr(pk, "connections");
	msgpack_pack_array(pk, 1);
	msgpack_pack_map(pk, 2);
	mp_kv_str(pk, "transport", "nng");
	mp_kv_str(pk, "open", "3");
}

/* Malformed daemon figures make the reply malformed (nothing allocated is
 * left behind: the ASan build checks). */
static void test_decode_daemon_detail_malformed(void **state)
{
	void (*const fills[])(msgpack_packer *) = {methods_not_array, method_without_name,
	                                           status_count_not_uint, connection_open_not_uint};
	struct kvc_daemon_detail *dd = NULL;
	struct parsed p;

	(void)state;
	for (size_t i = 0; i < sizeof(fills) / sizeof(fills[0]); i++) {
		assert_int_equal(crep_daemon_detail(daemon_result(&p, fills[i]), &dd), -EINVAL);
		assert_null(dd); /* untouched */
		msgpack_zone_destroy(&p.zone);
	}
}

static void codec_stats(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 5);
	mp_kv_str(pk, "name", "z");
	mp_kv_str(pk, "compression", "zstd:5");
	mp_kv_uint(pk, "value_logical_bytes", 3600);
	mp_kv_uint(pk, "value_stored_bytes", 120);
	mp_kv_uint(pk, "values_compressed", 1);
}

static void codec_absent(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 1);
	mp_kv_str(pk, "name", "old");
}

static void codec_too_long(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 1);
	mp_kv_str(pk, "compression", "zstd:5-and-then-some");
}

static void codec_not_str(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 1);
	mp_kv_uint(pk, "compression", 2);
}

static void counter_not_uint(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 1);
	mp_kv_str(pk, "value_stored_bytes", "120");
}

/* A tenant's compression and value counters; an older server's reply
 * without them; fields of the wrong shape refused, the result untouched. */
static void test_decode_codec_info(void **state)
{
	void (*const bad[])(msgpack_packer *) = {codec_too_long, codec_not_str, counter_not_uint};
	struct kvc_codec_info ci;
	struct parsed p;

	(void)state;
	assert_int_equal(crep_codec_info(daemon_result(&p, codec_stats), &ci), 0);
	assert_string_equal(ci.compression, "zstd:5");
	assert_int_equal(ci.value_logical_bytes, 3600);
	assert_int_equal(ci.value_stored_bytes, 120);
	assert_int_equal(ci.values_compressed, 1);
	msgpack_zone_destroy(&p.zone);
	assert_int_equal(crep_codec_info(daemon_result(&p, codec_absent), &ci), 0);
	assert_string_equal(ci.compression, "");
	assert_int_equal(ci.value_logical_bytes, 0);
	msgpack_zone_destroy(&p.zone);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&ci, 0x5a, sizeof(ci));
		assert_int_equal(crep_codec_info(daemon_result(&p, bad[i]), &ci), -EINVAL);
		assert_int_equal(ci.values_compressed, 0x5a5a5a5a5a5a5a5aull);
		msgpack_zone_destroy(&p.zone);
	}
}

static void evict_stats(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 5);
	mp_kv_str(pk, "name", "e");
	mp_kv_uint(pk, "max_bytes", 1u << 20);
	mp_kv_str(pk, "evict", "oldest");
	mp_kv_uint(pk, "evictions", 42);
	mp_kv_uint(pk, "tombstone_bytes", 306);
}

static void evict_too_long(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 1);
	mp_kv_str(pk, "evict", "oldest-first");
}

static void evict_not_str(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 1);
	mp_kv_uint(pk, "evict", 1);
}

static void evictions_not_uint(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 1);
	mp_kv_str(pk, "evictions", "42");
}

/* A tenant's max_bytes, evict and evictions; an older server's reply
 * without them; fields of the wrong shape refused, the result untouched. */
static void test_decode_evict_info(void **state)
{
	void (*const bad[])(msgpack_packer *) = {evict_too_long, evict_not_str, evictions_not_uint};
	struct kvc_evict_info ei;
	struct parsed p;

	(void)state;
	assert_int_equal(crep_evict_info(daemon_result(&p, evict_stats), &ei), 0);
	assert_int_equal(ei.max_bytes, 1u << 20);
	assert_string_equal(ei.evict, "oldest");
	assert_int_equal(ei.evictions, 42);
	assert_int_equal(ei.tombstone_bytes, 306);
	msgpack_zone_destroy(&p.zone);
	assert_int_equal(crep_evict_info(daemon_result(&p, codec_absent), &ei), 0);
	assert_string_equal(ei.evict, "");
	assert_int_equal(ei.max_bytes, 0);
	assert_int_equal(ei.evictions, 0);
	msgpack_zone_destroy(&p.zone);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&ei, 0x5a, sizeof(ei));
		assert_int_equal(crep_evict_info(daemon_result(&p, bad[i]), &ei), -EINVAL);
		assert_int_equal(ei.evictions, 0x5a5a5a5a5a5a5a5aull);
		msgpack_zone_destroy(&p.zone);
	}
}

static void test_decode_malformed(void **state)
{
	struct parsed p;
	struct crep_envelope env;
	struct kvc_item it;
	uint64_t version;

	(void)state;
	/* status missing */
	msgpack_zone_init(&p.zone, 256);
	assert_int_equal(mp_parse((const uint8_t *)"\x81\xa2id\x01", 5, &p.zone, &p.root), 0);
	assert_int_equal(crep_envelope(&p.root, &env), -EINVAL);
	msgpack_zone_destroy(&p.zone);
	/* version as a str */
	parse_reply(&p,
	            "83 a2 69 64 01 a6 73 74 61 74 75 73 00 a6 72 65 73 75 6c 74"
	            "81 a7 76 65 72 73 69 6f 6e a1 31",
	            1, 0);
	assert_int_equal(crep_version(p.env.result, &version), -EINVAL);
	msgpack_zone_destroy(&p.zone);
	/* a scan item whose key is a str */
	parse_reply(&p,
	            "83 a2 69 64 01 a6 73 74 61 74 75 73 00 a6 72 65 73 75 6c 74"
	            "81 a5 69 74 65 6d 73 91 93 a1 6b c0 01",
	            1, 0);
	assert_int_equal(crep_scan_item(&mp_map_get(p.env.result, "items")->via.array.ptr[0], &it),
	                 -EINVAL);
	msgpack_zone_destroy(&p.zone);
}

/* ---- a REP responder in this process ----------------------------------------------- */

/* cmocka's asserts must not run on the responder's thread. */
#define SV_CHECK(cond)                                                                             \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "responder: check failed: %s (line %d)\n", #cond,          \
			        __LINE__);                                                         \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

enum action { REPLY, DROP, CLOSE, LATE };

struct server;
/* Looks at a request, packs a reply into pk; returns what to do with it. */
typedef enum action (*handler_fn)(struct server *sv, const msgpack_object *req, msgpack_packer *pk);

struct server {
	char dir[64];
	char url[128];
	nng_socket sock;
	pthread_t thread;
	handler_fn handler;
	atomic_int requests;
	uint64_t last_as_of, last_limit;
	bool last_had_cont;
	int page;
};

static void server_url(struct server *sv)
{
	strcpy(sv->dir, "/tmp/kvtest-client-XXXXXX");
	assert_non_null(mkdtemp(sv->dir));
	snprintf(sv->url, sizeof(sv->url), "ipc://%s/kvd.sock", sv->dir);
}

static void *server_main(void *arg)
{
	struct server *sv = arg;

	for (;;) {
		nng_msg *m, *r;
		msgpack_zone zone;
		msgpack_object req;
		msgpack_sbuffer sb;
		msgpack_packer pk;
		enum action a;

		if (nng_recvmsg(sv->sock, &m, 0) != 0)
			return NULL;
		atomic_fetch_add(&sv->requests, 1);
		msgpack_zone_init(&zone, 1024);
		msgpack_sbuffer_init(&sb);
		msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
		SV_CHECK(mp_parse(nng_msg_body(m), nng_msg_len(m), &zone, &req) == 0);
		a = sv->handler(sv, &req, &pk);
		msgpack_zone_destroy(&zone);
		nng_msg_free(m);
		if (a == LATE)
			usleep(300 * 1000);
		if (a == REPLY || a == LATE) {
			nng_msg_alloc(&r, 0);
			nng_msg_append(r, sb.data, sb.size);
			if (nng_sendmsg(sv->sock, r, 0) != 0)
				nng_msg_free(r);
		}
		msgpack_sbuffer_destroy(&sb);
		if (a == CLOSE) {
			nng_close(sv->sock);
			return NULL;
		}
	}
}

static void server_start(struct server *sv, handler_fn h)
{
	sv->handler = h;
	assert_int_equal(nng_rep0_open(&sv->sock), 0);
	assert_int_equal(nng_listen(sv->sock, sv->url, NULL, 0), 0);
	assert_int_equal(pthread_create(&sv->thread, NULL, server_main, sv), 0);
}

static void server_stop(struct server *sv)
{
	nng_close(sv->sock);
	pthread_join(sv->thread, NULL);
}

static void server_cleanup(struct server *sv)
{
	char path[200];

	snprintf(path, sizeof(path), "%s/kvd.sock", sv->dir);
	unlink(path);
	rmdir(sv->dir);
}

/* The reply envelope for req: v, id, status, message or result. */
static void pack_reply(msgpack_packer *pk, const msgpack_object *req, uint64_t status,
                       const char *message, bool has_result)
{
	uint64_t id = 0;

	mp_field_uint(req, "id", false, &id);
	msgpack_pack_map(pk, 3 + (message != NULL) + has_result);
	mp_kv_uint(pk, "v", 1);
	mp_kv_uint(pk, "id", id);
	mp_kv_uint(pk, "status", status);
	if (message != NULL)
		mp_kv_str(pk, "message", message);
	if (has_result)
		mp_pack_cstr(pk, "result");
}

static bool method_is(const msgpack_object *req, const char *m)
{
	const char *s;
	size_t n;

	return mp_field_str(req, "method", true, &s, &n) == 0 && n == strlen(m) &&
	       memcmp(s, m, n) == 0;
}

/* A tiny store of one key: Put returns version 42 and checks the envelope;
 * Get of "missing" is NOT_FOUND; Get of "slow" gets its reply late; Get of
 * "garbage" gets bytes that are not msgpack; "badid" a reply to another id;
 * Put with if_version 7 fails its condition; Get of "bye" closes the socket. */
static enum action store_handler(struct server *sv, const msgpack_object *req, msgpack_packer *pk)
{
	const msgpack_object *args = mp_map_get(req, "args");
	const void *key = NULL;
	size_t klen = 0;
	uint64_t u;

	(void)sv;
	mp_field_bin(args, "key", false, &key, &klen);
	if (method_is(req, "Put")) {
		const char *s;
		size_t n;

		SV_CHECK(mp_field_uint(req, "v", true, &u) == 0 && u == 1);
		SV_CHECK(mp_field_uint(req, "client", true, &u) == 0 && u != 0);
		SV_CHECK(mp_field_uint(req, "timeout_ms", true, &u) == 0 && u != 0);
		SV_CHECK(mp_field_str(req, "tenant", true, &s, &n) == 0 && n > 0);
		if (mp_field_uint(args, "if_version", false, &u) == 0 &&
		    mp_map_get(args, "if_version") != NULL && u == 7) {
			pack_reply(pk, req, 9, "version mismatch (if_version)", false);
			return REPLY;
		}
		pack_reply(pk, req, 0, NULL, true);
		msgpack_pack_map(pk, 1);
		mp_kv_uint(pk, "version", 42);
		return REPLY;
	}
	if (method_is(req, "Get")) {
		if (klen == 7 && memcmp(key, "missing", 7) == 0) {
			pack_reply(pk, req, 5, "key not found", false);
			return REPLY;
		}
		if (klen == 3 && memcmp(key, "bye", 3) == 0)
			return CLOSE;
		if (klen == 7 && memcmp(key, "garbage", 7) == 0) {
			msgpack_pack_array(pk, 1); /* an array, not a map */
			msgpack_pack_nil(pk);
			return REPLY;
		}
		if (klen == 5 && memcmp(key, "badid", 5) == 0) {
			mp_field_uint(req, "id", false, &u);
			msgpack_pack_map(pk, 3);
			mp_kv_uint(pk, "v", 1);
			mp_kv_uint(pk, "id", u + 1000);
			mp_kv_uint(pk, "status", 0);
			return REPLY;
		}
		pack_reply(pk, req, 0, NULL, true);
		msgpack_pack_map(pk, 4);
		mp_kv_bin(pk, "value", key, klen); /* the value is the key */
		mp_kv_uint(pk, "version", 42);
		mp_kv_uint(pk, "timestamp_ms", 1764489600000ull);
		mp_kv_uint(pk, "expiry_ms", 0);
		return klen == 4 && memcmp(key, "slow", 4) == 0 ? LATE : REPLY;
	}
	if (method_is(req, "Stats")) {
		/* the daemon's, with the metrics figures: a Get method with a
		 * status this library does not know, two listeners */
		pack_reply(pk, req, 0, NULL, true);
		msgpack_pack_map(pk, 7);
		mp_kv_str(pk, "version", "0.2.0");
		mp_kv_uint(pk, "requests", 9);
		mp_kv_bool(pk, "counting", true);
		mp_kv_uint(pk, "received_bytes", 1000);
		mp_kv_uint(pk, "sent_bytes", 2000);
		mp_pack_cstr(pk, "methods");
		msgpack_pack_array(pk, 1);
		msgpack_pack_map(pk, 9);
		mp_kv_str(pk, "method", "Get");
		mp_kv_uint(pk, "requests", 7);
		mp_kv_uint(pk, "errors", 5);
		mp_pack_cstr(pk, "statuses");
		msgpack_pack_map(pk, 3);
		mp_kv_uint(pk, "OK", 2);
		mp_kv_uint(pk, "NOT_FOUND", 1);
		mp_kv_uint(pk, "SOMETHING_NEW", 4);
		mp_kv_uint(pk, "latency_count", 7);
		mp_kv_uint(pk, "latency_sum_ns", 700000);
		mp_kv_uint(pk, "p50_ns", 50000);
		mp_kv_uint(pk, "p90_ns", 250000);
		mp_kv_uint(pk, "p99_ns", UINT64_MAX);
		mp_pack_cstr(pk, "connections");
		msgpack_pack_array(pk, 2);
		msgpack_pack_map(pk, 3);
		mp_kv_str(pk, "transport", "stream");
		mp_kv_str(pk, "listen", "kv+tcp://127.0.0.1:7700");
		mp_kv_uint(pk, "open", 3);
		msgpack_pack_map(pk, 3);
		mp_kv_str(pk, "transport", "nng");
		mp_kv_str(pk, "listen", "ipc:///run/kvd/kvd.sock");
		mp_kv_uint(pk, "open", 1);
		return REPLY;
	}
	if (method_is(req, "Health")) {
		pack_reply(pk, req, 0, NULL, true);
		msgpack_pack_map(pk, 3);
		mp_kv_str(pk, "status", "serving");
		mp_kv_str(pk, "version", "0.1.0");
		mp_kv_uint(pk, "uptime_s", 1);
		return REPLY;
	}
	pack_reply(pk, req, 12, "unknown method", false);
	return REPLY;
}

static kvc *open_client(const char *url, uint32_t timeout_ms, uint32_t contexts)
{
	struct kvc_options o;
	kvc *c = NULL;

	kvc_options_init(&o);
	o.endpoint = url;
	o.timeout_ms = timeout_ms;
	o.contexts = contexts;
	assert_int_equal(kvc_open(&o, &c), 0);
	return c;
}

static void test_round_trips_and_errors(void **state)
{
	struct server sv = {0};
	struct kvc_status st;
	struct kvc_call call = {.status = &st};
	struct kvc_write w = KVC_WRITE_INIT;
	struct kvc_value v = {0};
	struct kvc_health h;
	struct kvc_daemon_detail *dd = NULL;
	uint64_t version = 0;
	kvc *c;

	(void)state;
	server_url(&sv);
	server_start(&sv, store_handler);
	c = open_client(sv.url, 2000, 4);

	assert_int_equal(kvc_put(c, &call, "k", 1, "v", 1, NULL, &version), 0);
	assert_int_equal(version, 42);
	assert_int_equal(st.code, 0);

	w.if_version = 7;
	version = 1;
	assert_int_equal(kvc_put(c, &call, "k", 1, "v", 1, &w, &version), -KVC_FAILED_PRECONDITION);
	assert_int_equal(version, 1); /* untouched on failure */
	assert_int_equal(st.code, KVC_FAILED_PRECONDITION);
	assert_string_equal(st.message, "version mismatch (if_version)");

	assert_int_equal(kvc_get(c, &call, "abc", 3, 0, 0, &v), 0);
	assert_int_equal(v.len, 3);
	assert_memory_equal(v.data, "abc", 3);
	assert_true(v.timestamp_ms == 1764489600000ull);
	kvc_value_free(&v);

	assert_int_equal(kvc_get(c, &call, "missing", 7, 0, 0, &v), -KVC_NOT_FOUND);
	assert_string_equal(st.message, "key not found");
	assert_null(v.data);

	assert_int_equal(kvc_get(c, &call, "garbage", 7, 0, 0, &v), -KVC_INTERNAL);
	assert_non_null(strstr(st.message, "malformed reply"));
	assert_int_equal(kvc_get(c, &call, "badid", 5, 0, 0, &v), -KVC_INTERNAL);
	assert_non_null(strstr(st.message, "malformed reply"));

	/* Client-side checks never reach the server. */
	assert_int_equal(kvc_get(c, &call, "", 0, 0, 0, &v), -KVC_INVALID_ARGUMENT);
	assert_int_equal(kvc_tenant_drop(c, &call, NULL), -KVC_INVALID_ARGUMENT);

	assert_int_equal(kvc_health(c, NULL, &h), 0);
	assert_string_equal(h.status, "serving");

	assert_int_equal(kvc_stats_daemon_detail(c, &call, &dd), 0);
	assert_string_equal(dd->daemon.version, "0.2.0");
	assert_int_equal(dd->daemon.requests, 9);
	assert_true(dd->counting);
	assert_int_equal(dd->received_bytes, 1000);
	assert_int_equal(dd->sent_bytes, 2000);
	assert_int_equal(dd->nmethods, 1);
	assert_string_equal(dd->methods[0].method, "Get");
	assert_int_equal(dd->methods[0].requests, 7);
	assert_int_equal(dd->methods[0].errors, 5); /* SOMETHING_NEW's 4 among them */
	assert_int_equal(dd->methods[0].by_status[KVC_OK], 2);
	assert_int_equal(dd->methods[0].by_status[KVC_NOT_FOUND], 1);
	assert_int_equal(dd->methods[0].latency_count, 7);
	assert_int_equal(dd->methods[0].latency_sum_ns, 700000);
	assert_int_equal(dd->methods[0].p50_ns, 50000);
	assert_int_equal(dd->methods[0].p90_ns, 250000);
	assert_true(dd->methods[0].p99_ns == KVC_LATENCY_OVER);
	assert_int_equal(dd->nconnections, 2);
	assert_string_equal(dd->connections[0].transport, "stream");
	assert_string_equal(dd->connections[0].listen, "kv+tcp://127.0.0.1:7700");
	assert_int_equal(dd->connections[0].open, 3);
	assert_string_equal(dd->connections[1].transport, "nng");
	assert_int_equal(dd->connections[1].open, 1);
	kvc_daemon_detail_free(dd);
	kvc_daemon_detail_free(NULL);
	assert_string_equal(kvc_code_name(-KVC_NOT_FOUND), "NOT_FOUND");
	assert_string_equal(kvc_code_name(99), "UNKNOWN");

	kvc_close(c);
	server_stop(&sv);
	server_cleanup(&sv);
}

/* A timed-out call fails with DEADLINE_EXCEEDED near its timeout, and its
 * context (the only one) serves the next call; the late reply is dropped. */
static void test_timeout_and_context_reuse(void **state)
{
	struct server sv = {0};
	struct kvc_status st;
	struct kvc_call call = {.status = &st, .timeout_ms = 100};
	struct kvc_value v = {0};
	int64_t t0;
	kvc *c;

	(void)state;
	server_url(&sv);
	server_start(&sv, store_handler);
	c = open_client(sv.url, 5000, 1);

	t0 = mono_ms();
	assert_int_equal(kvc_get(c, &call, "slow", 4, 0, 0, &v), -KVC_DEADLINE_EXCEEDED);
	assert_true(mono_ms() - t0 < 1000);
	assert_string_equal(st.message, "no reply within 100 ms");

	call.timeout_ms = 0; /* the handle's 5 s */
	assert_int_equal(kvc_get(c, &call, "next", 4, 0, 0, &v), 0);
	assert_memory_equal(v.data, "next", 4); /* not the late "slow" */
	kvc_value_free(&v);

	kvc_close(c);
	server_stop(&sv);
	server_cleanup(&sv);
}

/* No daemon: the first call fails at once with UNAVAILABLE and the reason;
 * once a daemon listens, the background dialer finds it. */
static void test_unreachable_fails_fast(void **state)
{
	struct server sv = {0};
	struct kvc_status st;
	struct kvc_call call = {.status = &st};
	struct kvc_health h;
	int64_t t0;
	int rv = -1, tries;
	kvc *c;

	(void)state;
	server_url(&sv);
	c = open_client(sv.url, 10000, 4);

	t0 = mono_ms();
	assert_int_equal(kvc_health(c, &call, &h), -KVC_UNAVAILABLE);
	assert_true(mono_ms() - t0 < 1000);
	assert_non_null(strstr(st.message, "cannot reach ipc://"));
	assert_non_null(strstr(st.message, "connection refused"));
	t0 = mono_ms();
	assert_int_equal(kvc_health(c, &call, &h), -KVC_UNAVAILABLE);
	assert_true(mono_ms() - t0 < 100);

	server_start(&sv, store_handler);
	for (tries = 0; tries < 100 && rv != 0; tries++) {
		if ((rv = kvc_health(c, &call, &h)) != 0) {
			assert_int_equal(rv, -KVC_UNAVAILABLE);
			usleep(50 * 1000);
		}
	}
	assert_int_equal(rv, 0);

	kvc_close(c);
	server_stop(&sv);
	server_cleanup(&sv);

	/* A bad endpoint is refused by kvc_open. */
	{
		struct kvc_options o;
		kvc *bad = NULL;

		kvc_options_init(&o);
		o.endpoint = "bogus://nowhere";
		assert_int_equal(kvc_open(&o, &bad), -KVC_INVALID_ARGUMENT);
		assert_null(bad);
	}
}

/* The server goes away while a request waits for its reply; it comes back. */
static void test_connection_lost(void **state)
{
	struct server sv = {0};
	struct kvc_status st;
	struct kvc_call call = {.status = &st};
	struct kvc_value v = {0};
	struct kvc_health h;
	int64_t t0;
	int rv = -1, tries;
	kvc *c;

	(void)state;
	server_url(&sv);
	server_start(&sv, store_handler);
	c = open_client(sv.url, 5000, 2);
	assert_int_equal(kvc_health(c, &call, &h), 0);
	assert_int_equal(kvc_get(c, &call, "bye", 3, 0, 0, &v), -KVC_UNAVAILABLE);
	assert_non_null(strstr(st.message, "lost connection"));
	pthread_join(sv.thread, NULL);
	/* and the next call fails fast, whether or not nng has reported the
	 * pipe's removal yet */
	t0 = mono_ms();
	assert_int_equal(kvc_health(c, &call, &h), -KVC_UNAVAILABLE);
	assert_true(mono_ms() - t0 < 1000);
	assert_non_null(strstr(st.message, "connection"));

	/* The daemon comes back at the same address: the dialer finds it. */
	server_cleanup(&sv);
	assert_int_equal(mkdir(sv.dir, 0700), 0);
	server_start(&sv, store_handler);
	for (tries = 0; tries < 100 && rv != 0; tries++) {
		if ((rv = kvc_health(c, &call, &h)) != 0)
			usleep(50 * 1000);
	}
	assert_int_equal(rv, 0);
	kvc_close(c);
	server_stop(&sv);
	server_cleanup(&sv);
}

/* Scan: 25 keys "k00".."k24" served 10 to a page; revision 77. */
static enum action scan_handler(struct server *sv, const msgpack_object *req, msgpack_packer *pk)
{
	const msgpack_object *args = mp_map_get(req, "args");
	const void *cont = NULL;
	size_t cont_len = 0;
	uint64_t limit = 0, as_of = 0, start = 0, i, n;

	if (!method_is(req, "Scan"))
		return store_handler(sv, req, pk);
	mp_field_uint(args, "limit", true, &limit);
	mp_field_uint(args, "as_of", false, &as_of);
	mp_field_bin(args, "continuation", false, &cont, &cont_len);
	sv->last_limit = limit;
	sv->last_as_of = as_of;
	sv->last_had_cont = cont != NULL;
	sv->page++;
	if (cont != NULL) {
		SV_CHECK(cont_len == 1);
		start = *(const uint8_t *)cont;
	}
	n = limit < 10 ? limit : 10;
	if (start + n > 25)
		n = 25 - start;
	pack_reply(pk, req, 0, NULL, true);
	msgpack_pack_map(pk, start + n < 25 ? 4 : 3);
	mp_pack_cstr(pk, "items");
	msgpack_pack_array(pk, n);
	for (i = start; i < start + n; i++) {
		char key[16];

		snprintf(key, sizeof(key), "k%02u", (unsigned)i);
		msgpack_pack_array(pk, 3);
		mp_pack_bin(pk, key, 3);
		mp_pack_bin(pk, "v", 1);
		msgpack_pack_uint64(pk, i + 1);
	}
	mp_kv_uint(pk, "revision", 77);
	mp_kv_bool(pk, "more", start + n < 25);
	if (start + n < 25) {
		uint8_t next = (uint8_t)(start + n);

		mp_kv_bin(pk, "continuation", &next, 1);
	}
	return REPLY;
}

static void test_scan_pages(void **state)
{
	struct server sv = {0};
	struct kvc_scan_opts o = {.page_size = 10};
	struct kvc_item it;
	kvc_iter *iter;
	kvc *c;
	int n = 0, rv;

	(void)state;
	server_url(&sv);
	server_start(&sv, scan_handler);
	c = open_client(sv.url, 5000, 2);

	assert_int_equal(kvc_scan_open(c, NULL, &o, &iter), 0);
	assert_int_equal(kvc_scan_revision(iter), 0);
	while ((rv = kvc_scan_next(iter, &it)) == 0) {
		char key[16];

		snprintf(key, sizeof(key), "k%02d", n);
		assert_int_equal(it.key_len, 3);
		assert_memory_equal(it.key, key, 3);
		assert_int_equal(it.version, n + 1);
		n++;
		if (sv.page > 1) {
			/* the pages after the first read at the first's revision */
			assert_int_equal(sv.last_as_of, 77);
			assert_true(sv.last_had_cont);
		}
	}
	assert_int_equal(rv, 1);
	assert_int_equal(n, 25);
	assert_int_equal(sv.page, 3);
	assert_int_equal(kvc_scan_revision(iter), 77);
	assert_int_equal(kvc_scan_next(iter, &it), 1);
	kvc_scan_close(iter);

	/* limit 13: pages of 10 and then 3; no third request */
	sv.page = 0;
	o.limit = 13;
	assert_int_equal(kvc_scan_open(c, NULL, &o, &iter), 0);
	n = 0;
	while ((rv = kvc_scan_next(iter, &it)) == 0)
		n++;
	assert_int_equal(rv, 1);
	assert_int_equal(n, 13);
	assert_int_equal(sv.page, 2);
	assert_int_equal(sv.last_limit, 3);
	kvc_scan_close(iter);
	kvc_scan_close(NULL);

	kvc_close(c);
	server_stop(&sv);
	server_cleanup(&sv);
}

/* Batch: the second op's condition fails: failed_op 1. */
static enum action batch_handler(struct server *sv, const msgpack_object *req, msgpack_packer *pk)
{
	const msgpack_object *ops = mp_map_get(mp_map_get(req, "args"), "ops");
	uint32_t i;

	if (!method_is(req, "Batch"))
		return store_handler(sv, req, pk);
	SV_CHECK(ops != NULL);
	for (i = 0; i < ops->via.array.size; i++) {
		if (mp_map_get(&ops->via.array.ptr[i], "if_version") != NULL) {
			pack_reply(pk, req, 9, "version mismatch (if_version)", true);
			msgpack_pack_map(pk, 1);
			mp_kv_uint(pk, "failed_op", i);
			return REPLY;
		}
	}
	pack_reply(pk, req, 0, NULL, true);
	msgpack_pack_map(pk, 1);
	mp_pack_cstr(pk, "versions");
	msgpack_pack_array(pk, ops->via.array.size);
	for (i = 0; i < ops->via.array.size; i++)
		msgpack_pack_uint64(pk, 100 + i);
	return REPLY;
}

static void test_batch(void **state)
{
	struct server sv = {0};
	struct kvc_op ops[2] = {
	        {.type = KVC_OP_PUT,
	         .key = "a",
	         .key_len = 1,
	         .value = "1",
	         .value_len = 1,
	         .if_version = KVC_ANY_VERSION},
	        {.type = KVC_OP_DELETE, .key = "b", .key_len = 1, .if_version = KVC_ANY_VERSION},
	};
	size_t failed = 99;
	kvc *c;

	(void)state;
	server_url(&sv);
	server_start(&sv, batch_handler);
	c = open_client(sv.url, 5000, 2);
	assert_int_equal(kvc_batch(c, NULL, ops, 2, &failed), 0);
	assert_int_equal(ops[0].version, 100);
	assert_int_equal(ops[1].version, 101);
	assert_int_equal(failed, 99);
	ops[1].if_version = 5;
	assert_int_equal(kvc_batch(c, NULL, ops, 2, &failed), -KVC_FAILED_PRECONDITION);
	assert_int_equal(failed, 1);
	kvc_close(c);
	server_stop(&sv);
	server_cleanup(&sv);
}

/* Async: more calls than contexts, each callback once, drain waits. */
struct async_count {
	atomic_int ok;
	atomic_int failed;
};

static void async_cb(void *arg, const struct kvc_async_result *res)
{
	struct async_count *n = arg;

	if (res->rv == 0 && res->version == 42)
		atomic_fetch_add(&n->ok, 1);
	else
		atomic_fetch_add(&n->failed, 1);
}

static void test_async(void **state)
{
	struct server sv = {0};
	struct async_count n = {0};
	kvc *c;
	int i;

	(void)state;
	server_url(&sv);
	server_start(&sv, store_handler);
	c = open_client(sv.url, 5000, 4);
	for (i = 0; i < 200; i++) {
		char key[16];
		int len = snprintf(key, sizeof(key), "key%d", i);

		if (i % 2 == 0)
			assert_int_equal(
			        kvc_put_async(c, NULL, key, len, "v", 1, NULL, async_cb, &n), 0);
		else
			assert_int_equal(kvc_get_async(c, NULL, key, len, async_cb, &n), 0);
	}
	kvc_drain(c);
	assert_int_equal(atomic_load(&n.ok), 200);
	assert_int_equal(atomic_load(&n.failed), 0);
	/* a call that cannot start reports it, and never calls back */
	assert_int_equal(kvc_delete_async(c, NULL, "", 0, async_cb, &n), -KVC_INVALID_ARGUMENT);
	kvc_close(c);
	server_stop(&sv);
	server_cleanup(&sv);
}

/* Many threads share one handle with fewer contexts than threads. */
struct worker {
	kvc *c;
	int id;
	int ok;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	int i;

	for (i = 0; i < 100; i++) {
		char key[32];
		int len = snprintf(key, sizeof(key), "t%d-%d", w->id, i);
		struct kvc_value v = {0};

		if (kvc_get(w->c, NULL, key, len, 0, 0, &v) == 0 && v.len == (size_t)len &&
		    memcmp(v.data, key, len) == 0)
			w->ok++;
		kvc_value_free(&v);
	}
	return NULL;
}

static void test_threads(void **state)
{
	struct server sv = {0};
	struct worker w[8];
	pthread_t t[8];
	kvc *c;
	int i;

	(void)state;
	server_url(&sv);
	server_start(&sv, store_handler);
	c = open_client(sv.url, 5000, 3);
	for (i = 0; i < 8; i++) {
		w[i] = (struct worker){.c = c, .id = i};
		assert_int_equal(pthread_create(&t[i], NULL, worker_main, &w[i]), 0);
	}
	for (i = 0; i < 8; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(w[i].ok, 100);
	}
	kvc_close(c);
	kvc_close(NULL);
	server_stop(&sv);
	server_cleanup(&sv);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_encode_examples),
	        cmocka_unit_test(test_encode_envelope_and_ttl),
	        cmocka_unit_test(test_decode_examples),
	        cmocka_unit_test(test_decode_malformed),
	        cmocka_unit_test(test_decode_daemon_detail_malformed),
	        cmocka_unit_test(test_decode_codec_info),
	        cmocka_unit_test(test_decode_evict_info),
	        cmocka_unit_test(test_round_trips_and_errors),
	        cmocka_unit_test(test_timeout_and_context_reuse),
	        cmocka_unit_test(test_unreachable_fails_fast),
	        cmocka_unit_test(test_connection_lost),
	        cmocka_unit_test(test_scan_pages),
	        cmocka_unit_test(test_batch),
	        cmocka_unit_test(test_async),
	        cmocka_unit_test(test_threads),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
