/* test_blob.c — blobs through a real kvd: a 1 GiB blob streamed and read back byte-exact by ranges,
 * both transports, resent appends and commits applied once, killed and abandoned uploads leave
 * nothing, blob keys in Get/Versions/Scan, delete, TTL, overwrite, passivation, the open limit. */
/*
 * The blob's bytes come from a generator (a function of the offset), so
 * nothing ever holds the whole blob: the writer is fed from it, every read
 * is compared against it, and its XXH64 (streamed) against BlobInfo's. With
 * AddressSanitizer or ThreadSanitizer the big blob is 256 MiB instead of
 * 1 GiB (the write and the read-back run several times slower there);
 * nothing is skipped.
 */
#include "harness.h"

#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <xxhash.h>

#include <cmocka.h> /* after the headers it needs */

#include "kvclient.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define BIG_SIZE ((uint64_t)256 << 20)
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define BIG_SIZE ((uint64_t)256 << 20)
#endif
#endif
#ifndef BIG_SIZE
#define BIG_SIZE ((uint64_t)1 << 30)
#endif
#define BIG_TAIL 12345u /* the big blob ends inside a chunk */
#define IDLE_MS  1500u  /* the kvd's upload_idle_ms */
#define CHUNK    65536u /* the daemon's default chunk size */

static struct kvd_proc kvd;
static bool kvd_up;

/* ---- the generator ------------------------------------------------------------ */

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* The n bytes of blob `seed` at offset off. */
static void gen(uint64_t seed, uint64_t off, uint8_t *buf, size_t n)
{
	size_t i = 0;

	while (i < n) {
		uint64_t o = off + i, w = mix((o >> 3) ^ (seed << 48));
		unsigned b = (unsigned)(o & 7);
		for (; b < 8 && i < n; b++, i++)
			buf[i] = (uint8_t)(w >> (8 * b));
	}
}

/* ---- helpers ---------------------------------------------------------------------- */

static kvc *client(const char *url, const char *tenant)
{
	struct kvc_options o;
	kvc *c = NULL;

	kvc_options_init(&o);
	o.endpoint = url;
	o.tenant = tenant;
	o.timeout_ms = 60000;
	if (kvc_open(&o, &c) != 0)
		fail_msg("kvc_open %s", url);
	return c;
}

#define OK(e)                                                                                      \
	do {                                                                                       \
		int rv_ = (e);                                                                     \
		if (rv_ != 0)                                                                      \
			fail_msg("line %d: %s -> %d %s (%s)", __LINE__, #e, rv_,                   \
			         kvc_code_name(rv_), st.message);                                  \
	} while (0)

/* Writes size bytes of blob seed under key through the streaming writer,
 * in pieces of `piece` bytes; returns the version, *ret_xxh the XXH64. */
static uint64_t put_blob(kvc *c, const char *tenant, const char *key, uint64_t seed, uint64_t size,
                         size_t piece, const struct kvc_blob_opts *o, uint64_t *ret_xxh)
{
	struct kvc_status st = {0};
	struct kvc_call call = {.tenant = tenant, .status = &st};
	kvc_blob_writer *w = NULL;
	XXH64_state_t *xs = XXH64_createState();
	uint8_t *buf = malloc(piece);
	uint64_t done = 0, version = 0;

	assert_non_null(buf);
	XXH64_reset(xs, 0);
	OK(kvc_blob_writer_open(c, &call, key, strlen(key), o, &w));
	while (done < size) {
		size_t n = size - done < piece ? (size_t)(size - done) : piece;
		gen(seed, done, buf, n);
		XXH64_update(xs, buf, n);
		OK(kvc_blob_write(w, buf, n));
		done += n;
	}
	assert_int_equal(kvc_blob_writer_size(w), size);
	OK(kvc_blob_commit(w, &version));
	kvc_blob_writer_close(w);
	if (ret_xxh != NULL)
		*ret_xxh = XXH64_digest(xs);
	XXH64_freeState(xs);
	free(buf);
	return version;
}

/* Reads [off, off+len) at version and compares it with the generator;
 * expect: the bytes the blob has there. */
static void check_range(kvc *c, const char *tenant, const char *key, uint64_t version,
                        uint64_t seed, uint64_t off, size_t len, size_t expect)
{
	struct kvc_status st = {0};
	struct kvc_call call = {.tenant = tenant, .status = &st};
	uint8_t *got = malloc(len + 1), *want = malloc(len + 1);
	size_t n = 12345678;

	assert_non_null(got);
	assert_non_null(want);
	OK(kvc_blob_read(c, &call, key, strlen(key), version, off, got, len, &n));
	if (n != expect)
		fail_msg("read of %s at %" PRIu64 "+%zu gave %zu bytes, want %zu", key, off, len, n,
		         expect);
	gen(seed, off, want, n);
	if (memcmp(got, want, n) != 0)
		fail_msg("read of %s at %" PRIu64 "+%zu: bytes differ", key, off, len);
	free(got);
	free(want);
}

/* ---- raw requests (the message layer, either transport) -------------------------- */

struct raw {
	msgpack_sbuffer sb;
	msgpack_packer pk;
};

/* {v, id, [client], method, tenant, args: {nargs...}} */
static void raw_begin(struct raw *q, const char *method, const char *tenant, uint64_t id,
                      uint64_t client_id, uint32_t nargs)
{
	msgpack_sbuffer_init(&q->sb);
	msgpack_packer_init(&q->pk, &q->sb, msgpack_sbuffer_write);
	msgpack_pack_map(&q->pk, 5 + (client_id != 0));
	mp_kv_uint(&q->pk, "v", 1);
	mp_kv_uint(&q->pk, "id", id);
	if (client_id != 0)
		mp_kv_uint(&q->pk, "client", client_id);
	mp_kv_str(&q->pk, "method", method);
	mp_kv_str(&q->pk, "tenant", tenant);
	mp_pack_cstr(&q->pk, "args");
	msgpack_pack_map(&q->pk, nargs);
}

/* Sends q `times` times (the same bytes: a resend); every reply parsed
 * into out[i]. */
static void raw_send(kvc *c, struct raw *q, struct h_reply2 *out, int times)
{
	for (int i = 0; i < times; i++) {
		void *rep = NULL;
		size_t n = 0;
		int rv = kvc_raw(c, 30000, q->sb.data, q->sb.size, &rep, &n);
		if (rv != 0)
			fail_msg("kvc_raw: %d %s", rv, kvc_code_name(rv));
		out[i].bytes = rep;
		if (h_parse(rep, n, &out[i].r) != 0)
			fail_msg("a reply that does not parse");
	}
	msgpack_sbuffer_destroy(&q->sb);
}

static uint64_t result_uint(const struct h_reply2 *r, const char *field)
{
	uint64_t v = 0;

	if (r->r.status != 0)
		fail_msg("status %" PRIu64 " (%s), want OK", r->r.status, r->r.message);
	if (mp_field_uint(r->r.result, field, true, &v) != 0)
		fail_msg("result without '%s'", field);
	return v;
}

static uint64_t raw_blob_begin(kvc *c, const char *tenant, const char *key, uint64_t id,
                               uint64_t client_id)
{
	struct raw q;
	struct h_reply2 r;
	uint64_t up;

	raw_begin(&q, "BlobBegin", tenant, id, client_id, 1);
	mp_kv_bin(&q.pk, "key", key, strlen(key));
	raw_send(c, &q, &r, 1);
	up = result_uint(&r, "upload");
	h_reply2_free(&r);
	return up;
}

static void raw_blob_append(kvc *c, const char *tenant, uint64_t upload, uint64_t off,
                            const void *data, size_t len, uint64_t id, struct h_reply2 *out,
                            int times)
{
	struct raw q;

	raw_begin(&q, "BlobAppend", tenant, id, 0, 3);
	mp_kv_uint(&q.pk, "upload", upload);
	mp_kv_uint(&q.pk, "offset", off);
	mp_kv_bin(&q.pk, "data", data, len);
	raw_send(c, &q, out, times);
}

static void raw_blob_commit(kvc *c, const char *tenant, uint64_t upload, uint64_t size, uint64_t id,
                            struct h_reply2 *out, int times)
{
	struct raw q;

	raw_begin(&q, "BlobCommit", tenant, id, 0, 2);
	mp_kv_uint(&q.pk, "upload", upload);
	mp_kv_uint(&q.pk, "size", size);
	raw_send(c, &q, out, times);
}

static void expect_status(const struct h_reply2 *r, uint64_t status, const char *substr)
{
	if (r->r.status != status || (substr != NULL && strstr(r->r.message, substr) == NULL))
		fail_msg("status %" PRIu64 " '%s', want %" PRIu64 " with '%s'", r->r.status,
		         r->r.message, status, substr ? substr : "");
}

/* ---- setup ------------------------------------------------------------------------- */

static const char config[] = "upload_idle_ms = 1500\n";

static int setup(void **state)
{
	struct kvd_opts o = {.config_text = config};

	(void)state;
	if (kvd_start(&kvd, &o) != 0)
		return -1;
	kvd_up = true;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	if (kvd_up && kvd_stop(&kvd) != 0)
		return -1;
	kvd_cleanup(&kvd, false);
	return 0;
}

/* ---- the tests --------------------------------------------------------------------- */

/* A big blob streamed from the generator, read back whole and by ranges. */
static void test_big(void **state)
{
	kvc *c = client(kvd.surl, "default");
	struct kvc_status st = {0};
	struct kvc_call call = {.status = &st};
	struct kvc_blob_info bi;
	const uint64_t size = BIG_SIZE + BIG_TAIL, seed = 1;
	uint64_t xxh = 0, version, off;
	size_t piece = 3u << 20; /* not a multiple of the writer's appends */
	uint8_t *got = malloc(KVC_BLOB_READ_MAX), *want = malloc(KVC_BLOB_READ_MAX);
	XXH64_state_t *xs = XXH64_createState();

	(void)state;
	version = put_blob(c, NULL, "big", seed, size, piece, NULL, &xxh);
	OK(kvc_blob_info(c, &call, "big", 3, 0, &bi));
	assert_int_equal(bi.size, size);
	assert_int_equal(bi.version, version);
	assert_int_equal(bi.chunk_size, CHUNK);
	assert_int_equal(bi.chunks, (size + CHUNK - 1) / CHUNK);
	if (bi.xxh64 != xxh)
		fail_msg("BlobInfo's xxh64 %016" PRIx64 ", the generator's %016" PRIx64, bi.xxh64,
		         xxh);
	assert_true(bi.stored_bytes > 0);
	/* the whole blob back, in reads of the cap; its XXH64 too */
	XXH64_reset(xs, 0);
	for (off = 0; off < size;) {
		size_t n = 0, len = KVC_BLOB_READ_MAX;
		OK(kvc_blob_read(c, &call, "big", 3, version, off, got, len, &n));
		assert_true(n == len || off + n == size);
		gen(seed, off, want, n);
		if (memcmp(got, want, n) != 0)
			fail_msg("bytes differ in [%" PRIu64 ", +%zu)", off, n);
		XXH64_update(xs, got, n);
		off += n;
	}
	assert_int_equal(XXH64_digest(xs), bi.xxh64);
	/* ranges: at chunk boundaries, inside one chunk, across chunks, past the end */
	check_range(c, NULL, "big", version, seed, 0, CHUNK, CHUNK);
	check_range(c, NULL, "big", version, seed, 7 * CHUNK, CHUNK, CHUNK);
	check_range(c, NULL, "big", version, seed, 5 * CHUNK + 100, 1000, 1000);
	check_range(c, NULL, "big", version, seed, 3 * CHUNK - 10, 20, 20);
	check_range(c, NULL, "big", version, seed, 11 * CHUNK - 1, 3 * CHUNK + 2, 3 * CHUNK + 2);
	check_range(c, NULL, "big", version, seed, size / 2 + 3, 5 * KVC_BLOB_READ_MAX + 17,
	            5 * KVC_BLOB_READ_MAX + 17);
	check_range(c, NULL, "big", version, seed, size - BIG_TAIL - 5, 10, 10);
	check_range(c, NULL, "big", version, seed, size - 5, 100, 5);
	check_range(c, NULL, "big", version, seed, size, 100, 0);
	check_range(c, NULL, "big", version, seed, size + 1000, 100, 0);
	XXH64_freeState(xs);
	free(got);
	free(want);
	kvc_close(c);
}

/* The same calls over nng (ipc://) and the stream framing (kv+ipc://). */
static void test_transports(void **state)
{
	const char *urls[] = {kvd.url, kvd.surl};

	(void)state;
	for (int i = 0; i < 2; i++) {
		kvc *c = client(urls[i], "default");
		struct kvc_status st = {0};
		struct kvc_call call = {.status = &st};
		struct kvc_blob_opts o = KVC_BLOB_OPTS_INIT;
		struct kvc_blob_info bi;
		const uint64_t size = (3u << 20) + 4097, seed = 10 + (uint64_t)i;
		char key[16];
		uint64_t xxh, v;

		snprintf(key, sizeof(key), "tr%d", i);
		o.chunk_size = 4096;
		o.append_size = 100000; /* appends that end inside chunks */
		v = put_blob(c, NULL, key, seed, size, 777777, &o, &xxh);
		OK(kvc_blob_info(c, &call, key, strlen(key), 0, &bi));
		assert_int_equal(bi.size, size);
		assert_int_equal(bi.chunk_size, 4096);
		assert_int_equal(bi.xxh64, xxh);
		assert_int_equal(bi.version, v);
		check_range(c, NULL, key, v, seed, 0, (size_t)size, (size_t)size);
		check_range(c, NULL, key, 0, seed, 4096 * 3, 4096, 4096);
		check_range(c, NULL, key, 0, seed, 4096 * 3 - 1, 2, 2);
		check_range(c, NULL, key, 0, seed, size - 1, 10, 1);
		kvc_close(c);
	}
}

/* Resent BlobAppend and BlobCommit (the same bytes twice) are applied once,
 * on both transports; a wrong offset names the right one. */
static void test_resend(void **state)
{
	const char *urls[] = {kvd.url, kvd.surl};

	(void)state;
	for (int i = 0; i < 2; i++) {
		kvc *c = client(urls[i], "default");
		struct kvc_status st = {0};
		struct kvc_call call = {.status = &st};
		struct kvc_blob_info bi;
		struct kvc_version *vl = NULL;
		struct h_reply2 r[2];
		uint8_t data[10000];
		char key[16];
		uint64_t up, v, up2;
		size_t nv = 0;

		snprintf(key, sizeof(key), "rs%d", i);
		gen(20, 0, data, sizeof(data));
		up = raw_blob_begin(c, "default", key, 1, 0);
		raw_blob_append(c, "default", up, 0, data, 6000, 2, r, 2);
		assert_int_equal(result_uint(&r[0], "size"), 6000);
		assert_int_equal(result_uint(&r[1], "size"), 6000);
		h_reply2_free(&r[0]);
		h_reply2_free(&r[1]);
		/* an older append again (a late resend): answered, not applied */
		raw_blob_append(c, "default", up, 0, data, 1000, 3, r, 1);
		assert_int_equal(result_uint(&r[0], "size"), 6000);
		h_reply2_free(&r[0]);
		/* a gap: refused, saying where to go on */
		raw_blob_append(c, "default", up, 7000, data, 10, 4, r, 1);
		expect_status(&r[0], KVC_FAILED_PRECONDITION, "offset must be 6000");
		h_reply2_free(&r[0]);
		raw_blob_append(c, "default", up, 6000, data + 6000, 4000, 5, r, 2);
		assert_int_equal(result_uint(&r[0], "size"), 10000);
		assert_int_equal(result_uint(&r[1], "size"), 10000);
		h_reply2_free(&r[0]);
		h_reply2_free(&r[1]);
		/* a commit of the wrong size is refused; twice the right one: one
		 * version */
		raw_blob_commit(c, "default", up, 9999, 6, r, 1);
		expect_status(&r[0], KVC_FAILED_PRECONDITION, "has 10000 bytes");
		h_reply2_free(&r[0]);
		raw_blob_commit(c, "default", up, 10000, 7, r, 2);
		v = result_uint(&r[0], "version");
		assert_int_equal(result_uint(&r[1], "version"), v);
		h_reply2_free(&r[0]);
		h_reply2_free(&r[1]);
		OK(kvc_versions(c, &call, key, strlen(key), 10, 0, false, &vl, &nv, NULL));
		assert_int_equal(nv, 1);
		assert_int_equal(vl[0].version, v);
		kvc_versions_free(vl, nv);
		OK(kvc_blob_info(c, &call, key, strlen(key), 0, &bi));
		assert_int_equal(bi.size, 10000);
		assert_int_equal(bi.xxh64, XXH64(data, sizeof(data), 0));
		check_range(c, NULL, key, v, 20, 0, 10000, 10000);
		/* an append after the commit is refused */
		raw_blob_append(c, "default", up, 10000, data, 10, 8, r, 1);
		expect_status(&r[0], KVC_FAILED_PRECONDITION, "committed");
		h_reply2_free(&r[0]);
		/* with a client id a resent BlobBegin is the same upload */
		up = raw_blob_begin(c, "default", key, 9, 0x5eed0000 + (uint64_t)i);
		up2 = raw_blob_begin(c, "default", key, 9, 0x5eed0000 + (uint64_t)i);
		assert_int_equal(up, up2);
		up2 = raw_blob_begin(c, "default", key, 10, 0x5eed0000 + (uint64_t)i);
		assert_int_not_equal(up, up2);
		/* an upload nobody began */
		raw_blob_append(c, "default", 12345, 0, data, 10, 11, r, 1);
		expect_status(&r[0], KVC_NOT_FOUND, "no such upload");
		h_reply2_free(&r[0]);
		kvc_close(c);
	}
}

/* Get, Versions and Scan on a blob key say blob and its size; kvc_get
 * refuses it, kvc_get_ex names it. */
static void test_blob_in_reads(void **state)
{
	kvc *c = client(kvd.surl, "default");
	struct kvc_status st = {0};
	struct kvc_call call = {.status = &st};
	struct kvc_value val = {0};
	struct h_reply2 r;
	struct raw q;
	const msgpack_object *o, *e;
	uint64_t v, sz = 0, size = 200000;
	bool blob = false;
	int rv;

	(void)state;
	v = put_blob(c, NULL, "rd", 30, size, 50000, NULL, NULL);
	rv = kvc_get(c, &call, "rd", 2, 0, 0, &val);
	assert_int_equal(rv, -KVC_FAILED_PRECONDITION);
	assert_non_null(strstr(st.message, "blob of 200000 bytes"));
	OK(kvc_get_ex(c, &call, "rd", 2, 0, 0, &val, &blob, &sz));
	assert_true(blob);
	assert_int_equal(sz, size);
	assert_null(val.data);
	assert_int_equal(val.version, v);
	/* Get on the wire: blob, blob_size, no value */
	raw_begin(&q, "Get", "default", 1, 0, 1);
	mp_kv_bin(&q.pk, "key", "rd", 2);
	raw_send(c, &q, &r, 1);
	assert_int_equal(result_uint(&r, "blob_size"), size);
	assert_null(mp_map_get(r.r.result, "value"));
	o = mp_map_get(r.r.result, "blob");
	assert_true(o != NULL && o->type == MSGPACK_OBJECT_BOOLEAN && o->via.boolean);
	h_reply2_free(&r);
	/* Versions: the entry's trailing {blob, blob_size} */
	raw_begin(&q, "Versions", "default", 2, 0, 1);
	mp_kv_bin(&q.pk, "key", "rd", 2);
	raw_send(c, &q, &r, 1);
	assert_int_equal(r.r.status, 0);
	o = mp_map_get(r.r.result, "versions");
	assert_true(o != NULL && o->type == MSGPACK_OBJECT_ARRAY && o->via.array.size == 1);
	e = &o->via.array.ptr[0];
	assert_int_equal(e->via.array.size, 5);
	assert_int_equal(e->via.array.ptr[3].type, MSGPACK_OBJECT_NIL);
	assert_int_equal(mp_field_uint(&e->via.array.ptr[4], "blob_size", true, &sz), 0);
	assert_int_equal(sz, size);
	h_reply2_free(&r);
	/* Scan: the item's trailing {blob, blob_size} */
	raw_begin(&q, "Scan", "default", 3, 0, 2);
	mp_kv_bin(&q.pk, "start", "rd", 2);
	mp_kv_bin(&q.pk, "end", "rd\x01", 3);
	raw_send(c, &q, &r, 1);
	assert_int_equal(r.r.status, 0);
	o = mp_map_get(r.r.result, "items");
	assert_true(o != NULL && o->type == MSGPACK_OBJECT_ARRAY && o->via.array.size == 1);
	e = &o->via.array.ptr[0];
	assert_int_equal(e->via.array.size, 4);
	assert_int_equal(e->via.array.ptr[1].type, MSGPACK_OBJECT_NIL);
	sz = 0;
	assert_int_equal(mp_field_uint(&e->via.array.ptr[3], "blob_size", true, &sz), 0);
	assert_int_equal(sz, size);
	h_reply2_free(&r);
	/* kvc_versions_ex: the blob's size; a value's version is none */
	{
		struct kvc_version *vl = NULL;
		uint64_t *bs = NULL;
		size_t nv = 0;
		OK(kvc_put(c, &call, "rd", 2, "val", 3, NULL, NULL));
		OK(kvc_versions_ex(c, &call, "rd", 2, 10, 0, true, &vl, &nv, NULL, &bs));
		/* the tenant keeps one version: the value only, unless history */
		assert_true(nv >= 1);
		assert_int_equal(bs[0], KVC_NOT_BLOB);
		assert_int_equal(vl[0].len, 3);
		kvc_versions_free(vl, nv);
		free(bs);
		v = put_blob(c, NULL, "rd", 30, size, 50000, NULL, NULL);
		OK(kvc_versions_ex(c, &call, "rd", 2, 10, 0, true, &vl, &nv, NULL, &bs));
		assert_true(nv >= 1);
		assert_int_equal(vl[0].version, v);
		assert_int_equal(bs[0], size);
		assert_null(vl[0].data);
		kvc_versions_free(vl, nv);
		free(bs);
	}
	/* kvc_scan: no value, kvc_scan_blob says blob and its size */
	{
		struct kvc_scan_opts so = {.prefix = "rd", .prefix_len = 2};
		struct kvc_item it;
		kvc_iter *iter = NULL;
		OK(kvc_put(c, &call, "rd2", 3, "v", 1, NULL, NULL));
		OK(kvc_scan_open(c, &call, &so, &iter));
		assert_false(kvc_scan_blob(iter, NULL));
		assert_int_equal(kvc_scan_next(iter, &it), 0);
		assert_null(it.value);
		sz = 0;
		assert_true(kvc_scan_blob(iter, &sz));
		assert_int_equal(sz, size);
		assert_int_equal(kvc_scan_next(iter, &it), 0);
		assert_int_equal(it.value_len, 1);
		assert_false(kvc_scan_blob(iter, &sz));
		assert_int_equal(kvc_scan_next(iter, &it), 1);
		kvc_scan_close(iter);
	}
	kvc_close(c);
}

/* Delete and TTL of a blob key; a blob overwritten by a value and back. */
static void test_delete_ttl_overwrite(void **state)
{
	kvc *c = client(kvd.surl, "default");
	struct kvc_status st = {0};
	struct kvc_call call = {.status = &st};
	struct kvc_blob_opts o = KVC_BLOB_OPTS_INIT;
	struct kvc_blob_info bi;
	struct kvc_value val = {0};
	uint64_t v, deadline;
	bool blob = true;
	int rv;

	(void)state;
	/* delete */
	put_blob(c, NULL, "del", 40, 70000, 70000, NULL, NULL);
	OK(kvc_delete(c, &call, "del", 3, KVC_ANY_VERSION, NULL));
	assert_int_equal(kvc_blob_info(c, &call, "del", 3, 0, &bi), -KVC_NOT_FOUND);
	assert_int_equal(kvc_get_ex(c, &call, "del", 3, 0, 0, &val, &blob, NULL), -KVC_NOT_FOUND);
	/* TTL: gone once it expires */
	o.ttl_ms = 1000;
	v = put_blob(c, NULL, "ttl", 41, 5000, 5000, &o, NULL);
	OK(kvc_blob_info(c, &call, "ttl", 3, 0, &bi));
	assert_int_equal(bi.version, v);
	assert_true(bi.expiry_ms >= bi.timestamp_ms + 1000);
	deadline = h_now_ms() + 10000;
	while ((rv = kvc_blob_info(c, &call, "ttl", 3, 0, &bi)) == 0 && h_now_ms() < deadline)
		poll(NULL, 0, 50);
	assert_int_equal(rv, -KVC_NOT_FOUND);
	/* a blob, then a value over it, then a blob again */
	put_blob(c, NULL, "ow", 42, 100000, 100000, NULL, NULL);
	OK(kvc_put(c, &call, "ow", 2, "plain", 5, NULL, &v));
	OK(kvc_get_ex(c, &call, "ow", 2, 0, 0, &val, &blob, NULL));
	assert_false(blob);
	assert_int_equal(val.len, 5);
	assert_memory_equal(val.data, "plain", 5);
	kvc_value_free(&val);
	rv = kvc_blob_info(c, &call, "ow", 2, 0, &bi);
	assert_int_equal(rv, -KVC_FAILED_PRECONDITION);
	assert_non_null(strstr(st.message, "not a blob"));
	v = put_blob(c, NULL, "ow", 43, 100001, 100001, NULL, NULL);
	OK(kvc_blob_info(c, &call, "ow", 2, 0, &bi));
	assert_int_equal(bi.version, v);
	assert_int_equal(bi.size, 100001);
	check_range(c, NULL, "ow", 0, 43, 0, 100001, 100001);
	/* a conditional commit that does not hold leaves the blob as it was */
	{
		kvc_blob_writer *w = NULL;
		uint8_t b[100];
		struct kvc_blob_opts oc = KVC_BLOB_OPTS_INIT;
		oc.if_version = v - 1;
		OK(kvc_blob_writer_open(c, &call, "ow", 2, &oc, &w));
		memset(b, 'x', sizeof(b));
		OK(kvc_blob_write(w, b, sizeof(b)));
		assert_int_equal(kvc_blob_commit(w, NULL), -KVC_FAILED_PRECONDITION);
		/* a failed writer says so again */
		assert_int_equal(kvc_blob_write(w, b, 1), -KVC_FAILED_PRECONDITION);
		assert_non_null(strstr(st.message, "failed earlier"));
		kvc_blob_writer_close(w);
		/* a committed one takes no more bytes */
		OK(kvc_blob_writer_open(c, &call, "ow2", 3, NULL, &w));
		OK(kvc_blob_write(w, b, sizeof(b)));
		OK(kvc_blob_commit(w, NULL));
		assert_int_equal(kvc_blob_write(w, b, 1), -KVC_FAILED_PRECONDITION);
		assert_non_null(strstr(st.message, "committed already"));
		kvc_blob_writer_close(w);
		OK(kvc_blob_info(c, &call, "ow", 2, 0, &bi));
		assert_int_equal(bi.version, v);
	}
	kvc_close(c);
}

/* An upload whose client is gone is aborted after upload_idle_ms: its id is
 * then NOT_FOUND and nothing of it is visible. */
static void test_abandoned(void **state)
{
	kvc *c = client(kvd.surl, "default");
	struct kvc_status st = {0};
	struct kvc_call call = {.status = &st};
	struct kvc_value val = {0};
	struct h_reply2 r;
	uint8_t data[200000];
	uint64_t up, t0, deadline;
	char line[96];

	(void)state;
	gen(50, 0, data, sizeof(data));
	up = raw_blob_begin(c, "default", "gone", 1, 0);
	snprintf(line, sizeof(line), "upload %016" PRIx64 " aborted: no request for upload_idle_ms",
	         up);
	raw_blob_append(c, "default", up, 0, data, sizeof(data), 2, &r, 1);
	assert_int_equal(result_uint(&r, "size"), sizeof(data));
	h_reply2_free(&r);
	t0 = h_now_ms();
	/* the client goes quiet: kvd's log says when the upload went */
	deadline = t0 + IDLE_MS + 10000;
	while (!h_log_has(&kvd, line) && h_now_ms() < deadline)
		poll(NULL, 0, 50);
	if (!h_log_has(&kvd, line))
		fail_msg("kvd's log never said '%s'", line);
	/* not much sooner: the client starts its clock at the reply, kvd before it */
	assert_true(h_now_ms() - t0 >= IDLE_MS - 500);
	raw_blob_append(c, "default", up, sizeof(data), data, 10, 3, &r, 1);
	expect_status(&r, KVC_NOT_FOUND, "no such upload");
	h_reply2_free(&r);
	raw_blob_commit(c, "default", up, sizeof(data), 4, &r, 1);
	expect_status(&r, KVC_NOT_FOUND, "no such upload");
	h_reply2_free(&r);
	assert_int_equal(kvc_get_ex(c, &call, "gone", 4, 0, 0, &val, NULL, NULL), -KVC_NOT_FOUND);
	kvc_close(c);
}

/* A tenant passivated with an upload open: the upload is aborted, the
 * tenant is fine (its blobs read, a new upload commits). */
static void test_passivate(void **state)
{
	kvc *c = client(kvd.surl, "p");
	struct kvc_status st = {0};
	struct kvc_call call = {.tenant = "p", .status = &st};
	struct kvc_blob_info bi;
	struct h_reply2 r;
	uint8_t data[150000];
	uint64_t up, v;

	(void)state;
	OK(kvc_tenant_create(c, &call, "p", NULL));
	v = put_blob(c, "p", "kept", 60, 300000, 300000, NULL, NULL);
	gen(61, 0, data, sizeof(data));
	up = raw_blob_begin(c, "p", "open", 1, 0);
	raw_blob_append(c, "p", up, 0, data, sizeof(data), 2, &r, 1);
	assert_int_equal(result_uint(&r, "size"), sizeof(data));
	h_reply2_free(&r);
	OK(kvc_tenant_passivate(c, &call, "p"));
	raw_blob_append(c, "p", up, sizeof(data), data, 10, 3, &r, 1);
	expect_status(&r, KVC_NOT_FOUND, "no such upload");
	h_reply2_free(&r);
	OK(kvc_blob_info(c, &call, "kept", 4, 0, &bi));
	assert_int_equal(bi.version, v);
	check_range(c, "p", "kept", 0, 60, 1000, 100000, 100000);
	assert_int_equal(kvc_blob_info(c, &call, "open", 4, 0, &bi), -KVC_NOT_FOUND);
	v = put_blob(c, "p", "open", 62, 1000, 1000, NULL, NULL);
	OK(kvc_blob_info(c, &call, "open", 4, 0, &bi));
	assert_int_equal(bi.version, v);
	/* dropped with an upload open: the drop is not held up */
	up = raw_blob_begin(c, "p", "open2", 4, 0);
	OK(kvc_tenant_drop(c, &call, "p"));
	kvc_close(c);
}

/* At most 4096 uploads are open per worker, their chunk sizes at most 256
 * MiB together (PROTOCOL.md, BlobBegin): the next is RESOURCE_EXHAUSTED
 * until one ends. */
static void test_open_limit(void **state)
{
	kvc *c = client(kvd.surl, "lim");
	struct kvc_status st = {0};
	struct kvc_call call = {.tenant = "lim", .status = &st};
	struct h_reply2 r;
	struct raw q;
	uint64_t first = 0, id = 1;
	int opened = 0;

	(void)state;
	OK(kvc_tenant_create(c, &call, "lim", NULL));
	for (;;) {
		raw_begin(&q, "BlobBegin", "lim", id++, 0, 1);
		mp_kv_bin(&q.pk, "key", "k", 1);
		raw_send(c, &q, &r, 1);
		if (r.r.status != 0)
			break;
		if (opened++ == 0)
			first = result_uint(&r, "upload");
		h_reply2_free(&r);
		assert_true(opened <= 4096);
	}
	expect_status(&r, KVC_RESOURCE_EXHAUSTED, "too many blob uploads");
	h_reply2_free(&r);
	/* uploads of other tests on the same worker may still count */
	assert_true(opened > 4000);
	raw_begin(&q, "BlobAbort", "lim", id++, 0, 1);
	mp_kv_uint(&q.pk, "upload", first);
	raw_send(c, &q, &r, 1);
	assert_int_equal(r.r.status, 0);
	h_reply2_free(&r);
	(void)raw_blob_begin(c, "lim", "k", id++, 0);
	/* the tenant's drop ends them all */
	OK(kvc_tenant_drop(c, &call, "lim"));
	/* with 4 MiB chunks, their memory (256 MiB a worker) is the limit */
	OK(kvc_tenant_create(c, &call, "lim", NULL));
	for (opened = 0;; opened++) {
		raw_begin(&q, "BlobBegin", "lim", id++, 0, 2);
		mp_kv_bin(&q.pk, "key", "k", 1);
		mp_kv_uint(&q.pk, "chunk_size", 4u << 20);
		raw_send(c, &q, &r, 1);
		if (r.r.status != 0)
			break;
		h_reply2_free(&r);
		assert_true(opened < 64);
	}
	expect_status(&r, KVC_RESOURCE_EXHAUSTED, "too many blob uploads");
	h_reply2_free(&r);
	assert_true(opened >= 60);
	OK(kvc_tenant_drop(c, &call, "lim"));
	kvc_close(c);
}

/* A chunk damaged on disk: a read of its range is DATA_LOSS with a
 * message, never other bytes, and the rest of the blob still reads; a
 * chunk size out of range is refused before anything is sent. */
static void test_damaged(void **state)
{
	struct kvd_opts o = {.config_text = config};
	kvc *c = client(kvd.surl, "default");
	struct kvc_status st = {0};
	struct kvc_call call = {.status = &st};
	struct kvc_blob_opts bo = KVC_BLOB_OPTS_INIT;
	kvc_blob_writer *w = NULL;
	uint8_t pattern[16], buf[4096];
	char names[64][64], *tdir, *dir;
	uint64_t v, xxh;
	size_t n = 0;
	int nseg, flipped = 0;

	(void)state;
	bo.chunk_size = 100;
	assert_int_equal(kvc_blob_writer_open(c, &call, "bad", 3, &bo, &w),
	                 -KVC_INVALID_ARGUMENT);
	bo.chunk_size = 4096;
	v = put_blob(c, NULL, "dmg", 80, 300000, 1u << 20, &bo, &xxh);
	kvc_close(c);
	kvd_up = false;
	assert_int_equal(kvd_stop(&kvd), 0);
	/* the bytes of chunk 10, found in a segment and changed */
	gen(80, 10 * 4096 + 100, pattern, sizeof(pattern));
	tdir = tu_path(kvd.data, "tenants/default");
	nseg = tu_list_ext(tdir, ".seg", names, 64);
	for (int i = 0; i < nseg && !flipped; i++) {
		char *seg = tu_path(tdir, "%s", names[i]);
		FILE *f = fopen(seg, "rb");
		uint8_t *file = malloc(64u << 20);
		size_t len;
		assert_non_null(f);
		assert_non_null(file);
		len = fread(file, 1, 64u << 20, f);
		fclose(f);
		for (size_t at = 0; at + sizeof(pattern) <= len && !flipped; at++)
			if (memcmp(file + at, pattern, sizeof(pattern)) == 0) {
				tu_flip_byte(seg, (off_t)at);
				flipped = 1;
			}
		free(file);
		free(seg);
	}
	free(tdir);
	assert_true(flipped);
	dir = strdup(kvd.dir);
	kvd_cleanup(&kvd, true);
	o.reuse_dir = dir;
	assert_int_equal(kvd_start(&kvd, &o), 0);
	kvd_up = true;
	free(dir);
	c = client(kvd.surl, "default");
	assert_int_equal(kvc_blob_read(c, &call, "dmg", 3, v, 10 * 4096, buf, sizeof(buf), &n),
	                 -KVC_DATA_LOSS);
	assert_true(st.message[0] != '\0');
	check_range(c, NULL, "dmg", v, 80, 9 * 4096, 4096, 4096);
	check_range(c, NULL, "dmg", v, 80, 11 * 4096, 4096, 4096);
	kvc_close(c);
}

/* kvd killed (SIGKILL) with an upload open: nothing of it is visible before
 * or after the restart; a committed blob is whole after it. Then kvd
 * stopped with an upload open: it ends it and exits 0. */
static void test_killed(void **state)
{
	struct kvd_opts o = {.config_text = config};
	kvc *c = client(kvd.surl, "default");
	struct kvc_status st = {0};
	struct kvc_call call = {.status = &st};
	struct kvc_blob_info bi;
	struct kvc_value val = {0};
	struct h_reply2 r;
	uint8_t *data = malloc(3u << 20);
	uint64_t up, v, xxh;
	char *dir;

	(void)state;
	v = put_blob(c, NULL, "done", 70, 2500000, 1u << 20, NULL, &xxh);
	up = raw_blob_begin(c, "default", "half", 1, 0);
	gen(71, 0, data, 3u << 20);
	raw_blob_append(c, "default", up, 0, data, 3u << 20, 2, &r, 1);
	assert_int_equal(result_uint(&r, "size"), 3u << 20);
	h_reply2_free(&r);
	assert_int_equal(kvc_get_ex(c, &call, "half", 4, 0, 0, &val, NULL, NULL), -KVC_NOT_FOUND);
	kvc_close(c);
	kill(kvd.pid, SIGKILL);
	waitpid(kvd.pid, NULL, 0);
	h_track(kvd.pid, false);
	kvd.pid = 0;
	kvd_up = false;
	dir = strdup(kvd.dir);
	kvd_cleanup(&kvd, true);
	o.reuse_dir = dir;
	assert_int_equal(kvd_start(&kvd, &o), 0);
	kvd_up = true;
	free(dir);
	c = client(kvd.surl, "default");
	assert_int_equal(kvc_get_ex(c, &call, "half", 4, 0, 0, &val, NULL, NULL), -KVC_NOT_FOUND);
	assert_int_equal(kvc_blob_info(c, &call, "half", 4, 0, &bi), -KVC_NOT_FOUND);
	raw_blob_append(c, "default", up, 3u << 20, data, 10, 3, &r, 1);
	expect_status(&r, KVC_NOT_FOUND, "no such upload");
	h_reply2_free(&r);
	{
		struct kvc_scan_opts so = {.prefix = "half", .prefix_len = 4};
		struct kvc_item it;
		kvc_iter *iter = NULL;
		OK(kvc_scan_open(c, &call, &so, &iter));
		assert_int_equal(kvc_scan_next(iter, &it), 1);
		assert_false(kvc_scan_blob(iter, NULL));
		kvc_scan_close(iter);
	}
	OK(kvc_blob_info(c, &call, "done", 4, 0, &bi));
	assert_int_equal(bi.version, v);
	assert_int_equal(bi.xxh64, xxh);
	check_range(c, NULL, "done", v, 70, 0, 2500000, 2500000);
	/* kvd stopped (SIGTERM) with an upload open: it ends it, exits 0 */
	up = raw_blob_begin(c, "default", "open-at-stop", 4, 0);
	raw_blob_append(c, "default", up, 0, data, 100000, 5, &r, 1);
	assert_int_equal(result_uint(&r, "size"), 100000);
	h_reply2_free(&r);
	kvc_close(c);
	kvd_up = false;
	assert_int_equal(kvd_stop(&kvd), 0);
	assert_true(h_log_has(&kvd, "blob upload(s) aborted: kvd stops"));
	free(data);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_big),
	        cmocka_unit_test(test_transports),
	        cmocka_unit_test(test_resend),
	        cmocka_unit_test(test_blob_in_reads),
	        cmocka_unit_test(test_delete_ttl_overwrite),
	        cmocka_unit_test(test_abandoned),
	        cmocka_unit_test(test_passivate),
	        cmocka_unit_test(test_open_limit),
	        cmocka_unit_test(test_damaged),
	        cmocka_unit_test(test_killed),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, setup, teardown);
}
