/* test_blob.c — blobs in the engine (engine/blob.c): uploads of every size
 * around chunk boundaries read back byte-exact whole and by ranges; nothing
 * of an upload is visible before its commit, after a crash in the middle or
 * after it was closed, and merge reclaims its chunks; merge moves the
 * chunks of committed blobs (history too) and of uploads still open; gets,
 * versions and scans say blob and size; deletes, TTLs and conditions; the
 * non-blocking form; compressed chunks; the chunk bytes counted live; a
 * damaged chunk reads as KV_ECORRUPT. */
#include "testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <xxhash.h>

#include <cmocka.h> /* after the headers it needs */

static struct tu_clock clk = {1700000000000ull};

#define SEG_SIZE (256u * 1024u)

static void opts(struct kv_options *o)
{
	tu_options(o, &clk);
	o->segment_size = SEG_SIZE;
	o->merge_ratio_pct = 0;
	o->history_versions = 4;
}

/* The byte at offset off of the blob made from seed: any range can be
 * checked without keeping the blob. */
static uint8_t gen_byte(uint64_t seed, uint64_t off)
{
	uint64_t x = (off >> 3) * 0x9E3779B97F4A7C15ull + seed;
	x ^= x >> 31;
	x *= 0xBF58476D1CE4E5B9ull;
	x ^= x >> 29;
	return (uint8_t)(x >> (8 * (off & 7)));
}

static void gen_fill(uint64_t seed, uint64_t off, uint8_t *buf, size_t len)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = gen_byte(seed, off + i);
}

static uint64_t gen_hash(uint64_t seed, uint64_t size)
{
	XXH64_state_t *s = XXH64_createState();
	uint8_t buf[8192];
	uint64_t off, h;

	XXH64_reset(s, 0);
	for (off = 0; off < size; off += sizeof(buf)) {
		size_t n = size - off < sizeof(buf) ? (size_t)(size - off) : sizeof(buf);
		gen_fill(seed, off, buf, n);
		XXH64_update(s, buf, n);
	}
	h = XXH64_digest(s);
	XXH64_freeState(s);
	return h;
}

/* Uploads size bytes of seed's blob under key, in pieces of `piece`. */
static uint64_t upload(kv_db *db, const char *key, uint32_t chunk, uint64_t seed, uint64_t size,
                       size_t piece, const struct kv_write_opts *wo, int want)
{
	kv_upload *u;
	uint8_t *buf = malloc(piece);
	uint64_t off, ver = 0;

	assert_non_null(buf);
	assert_int_equal(kv_upload_open(db, key, strlen(key), chunk, &u), 0);
	for (off = 0; off < size; off += piece) {
		size_t n = size - off < piece ? (size_t)(size - off) : piece;
		gen_fill(seed, off, buf, n);
		assert_int_equal(kv_upload_write(u, buf, n), 0);
	}
	assert_int_equal(kv_upload_size(u), size);
	assert_int_equal(kv_upload_commit(u, wo, &ver), want);
	kv_upload_close(u);
	free(buf);
	return ver;
}

/* Reads [off, off+len) of key's blob at version ver (0: newest) and checks
 * it against seed's bytes; returns the bytes read. */
static size_t check_range(kv_db *db, const char *key, uint64_t ver, uint64_t seed, uint64_t off,
                          size_t len)
{
	struct kv_read_opts ro = {.version = ver};
	struct kv_blob_info info;
	uint8_t *buf = malloc(len ? len : 1), *want = malloc(len ? len : 1);
	size_t n = SIZE_MAX;

	assert_non_null(buf);
	assert_non_null(want);
	assert_int_equal(kv_blob_read(db, key, strlen(key), &ro, off, buf, len, &n, &info), 0);
	assert_true(n <= len);
	if (off >= info.size)
		assert_int_equal(n, 0);
	else
		assert_int_equal(n, info.size - off < len ? info.size - off : len);
	gen_fill(seed, off, want, n);
	assert_memory_equal(buf, want, n);
	free(buf);
	free(want);
	return n;
}

static void check_blob(kv_db *db, const char *key, uint64_t ver, uint64_t seed, uint64_t size,
                       uint32_t chunk)
{
	struct kv_read_opts ro = {.version = ver};
	struct kv_blob_info info;
	struct kv_value v;
	uint64_t off;

	assert_int_equal(kv_blob_info(db, key, strlen(key), &ro, &info), 0);
	assert_int_equal(info.size, size);
	assert_int_equal(info.chunk_size, chunk);
	assert_int_equal(info.chunks, (size + chunk - 1) / chunk);
	assert_int_equal(info.xxh64, gen_hash(seed, size));
	if (ver)
		assert_int_equal(info.version, ver);
	/* the whole, in reads of odd sizes */
	for (off = 0; off < size; off += 100003)
		check_range(db, key, ver, seed, off, 100003);
	/* get says blob and its size */
	assert_int_equal(kv_get(db, key, strlen(key), &ro, &v), 0);
	assert_true(v.blob);
	assert_int_equal(v.blob_size, size);
	assert_null(v.data);
	assert_int_equal(v.len, 0);
	kv_value_release(&v);
}

static kv_db *open_db(const char *dir)
{
	struct kv_options o;
	kv_db *db;

	opts(&o);
	assert_int_equal(kv_open(dir, &o, &db), 0);
	return db;
}

/* ---- tests -------------------------------------------------------------- */

static void test_sizes_and_ranges(void **state)
{
	static const uint32_t chunks[] = {4096, 16384};
	char *dir = tu_mkdtemp("blob-sizes");
	kv_db *db = open_db(dir);

	(void)state;
	for (size_t c = 0; c < 2; c++) {
		uint32_t cs = chunks[c];
		const uint64_t sizes[] = {0, 1, cs - 1, cs, cs + 1, 3ull * cs + 17, 600000};
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			char key[32];
			uint64_t seed = c * 100 + i + 1, ver, size = sizes[i];
			snprintf(key, sizeof(key), "b%zu-%zu", c, i);
			ver = upload(db, key, cs, seed, size, 5000, NULL, 0);
			assert_true(ver > 0);
			check_blob(db, key, ver, seed, size, cs);
			check_blob(db, key, 0, seed, size, cs);
			if (size < 2ull * cs)
				continue;
			/* at a chunk boundary, inside one chunk, across chunks, past the end */
			assert_int_equal(check_range(db, key, 0, seed, cs - 1, 2), 2);
			assert_int_equal(check_range(db, key, 0, seed, cs, 1), 1);
			assert_int_equal(check_range(db, key, 0, seed, cs + 10, 100), 100);
			assert_int_equal(check_range(db, key, 0, seed, cs / 2, 2ull * cs), 2ull * cs);
			assert_int_equal(check_range(db, key, 0, seed, size - 5, 100), 5);
			assert_int_equal(check_range(db, key, 0, seed, size, 100), 0);
			assert_int_equal(check_range(db, key, 0, seed, size + 12345, 10), 0);
		}
	}
	/* reopened (from hints where the segments are sealed) */
	assert_int_equal(kv_close(db), 0);
	db = open_db(dir);
	check_blob(db, "b1-6", 0, 107, 600000, 16384);
	check_blob(db, "b0-5", 0, 6, 3 * 4096 + 17, 4096);
	assert_int_equal(kv_close(db), 0);
	tu_rmtree(dir);
	free(dir);
}

static void test_not_a_blob(void **state)
{
	char *dir = tu_mkdtemp("blob-plain");
	kv_db *db = open_db(dir);
	struct kv_blob_info info;
	uint8_t buf[8];
	size_t n;
	kv_upload *u;

	(void)state;
	assert_int_equal(kv_put(db, "p", 1, "plain", 5, NULL, NULL), 0);
	assert_int_equal(kv_blob_info(db, "p", 1, NULL, &info), KV_ENOTBLOB);
	assert_int_equal(kv_blob_read(db, "p", 1, NULL, 0, buf, sizeof(buf), &n, NULL),
	                 KV_ENOTBLOB);
	assert_int_equal(kv_blob_info(db, "none", 4, NULL, &info), KV_ENOTFOUND);
	assert_int_equal(kv_upload_open(db, "k", 1, 100, &u), -EINVAL);
	assert_int_equal(kv_upload_open(db, "k", 1, KV_BLOB_CHUNK_MAX + 1, &u), -EINVAL);
	assert_int_equal(kv_upload_open(db, "", 0, 0, &u), KV_EKEYSIZE);
	assert_int_equal(kv_close(db), 0);
	tu_rmtree(dir);
	free(dir);
}

/* Nothing of an upload shows before its commit, after it was closed, or
 * after a crash in the middle (a copy of the files taken while it ran);
 * merge takes the chunks of the closed one back. */
static void test_uncommitted(void **state)
{
	char *dir = tu_mkdtemp("blob-uncommitted"), *copy = tu_mkdtemp("blob-uncommitted-copy");
	kv_db *db = open_db(dir);
	struct kv_value v;
	struct kv_stats st0, st1;
	uint8_t buf[10000];
	kv_upload *u;

	(void)state;
	assert_int_equal(kv_put(db, "other", 5, "x", 1, NULL, NULL), 0);
	assert_int_equal(kv_upload_open(db, "big", 3, 4096, &u), 0);
	for (uint64_t off = 0; off < 1000000; off += sizeof(buf)) {
		gen_fill(9, off, buf, sizeof(buf));
		assert_int_equal(kv_upload_write(u, buf, sizeof(buf)), 0);
	}
	assert_int_equal(kv_get(db, "big", 3, NULL, &v), KV_ENOTFOUND);
	assert_int_equal(kv_sync(db), 0);
	tu_rmtree(copy);
	tu_copydir(dir, copy); /* a crash now */
	kv_upload_close(u);
	assert_int_equal(kv_get(db, "big", 3, NULL, &v), KV_ENOTFOUND);
	assert_int_equal(kv_stats(db, &st0), 0);
	assert_true(st0.disk_bytes > 1000000);
	assert_int_equal(kv_merge(db), 0);
	assert_int_equal(kv_stats(db, &st1), 0);
	assert_true(st1.disk_bytes < 100000);
	assert_int_equal(kv_close(db), 0);

	db = open_db(copy);
	assert_int_equal(kv_get(db, "big", 3, NULL, &v), KV_ENOTFOUND);
	assert_int_equal(kv_get(db, "other", 5, NULL, &v), 0);
	kv_value_release(&v);
	assert_int_equal(kv_merge(db), 0);
	assert_int_equal(kv_stats(db, &st1), 0);
	assert_true(st1.disk_bytes < 100000);
	assert_int_equal(kv_close(db), 0);
	db = open_db(dir);
	assert_int_equal(kv_get(db, "big", 3, NULL, &v), KV_ENOTFOUND);
	assert_int_equal(kv_close(db), 0);
	tu_rmtree(dir);
	tu_rmtree(copy);
	free(dir);
	free(copy);
}

/* Merge rewrites the segments holding committed blobs (two versions of
 * one kept by retention) and the chunks of an upload still open across two
 * merges; everything reads back, before and after reopening. */
static void test_merge(void **state)
{
	char *dir = tu_mkdtemp("blob-merge");
	kv_db *db = open_db(dir);
	uint8_t buf[7000];
	uint64_t v1, v2, v3, off;
	kv_upload *u;

	(void)state;
	v1 = upload(db, "a", 8192, 1, 700000, 9000, NULL, 0);
	v2 = upload(db, "a", 4096, 2, 300001, 9000, NULL, 0);
	assert_int_equal(kv_upload_open(db, "open", 4, 4096, &u), 0);
	for (off = 0; off < 500000; off += sizeof(buf)) {
		size_t len = 500000 - off < sizeof(buf) ? (size_t)(500000 - off) : sizeof(buf);
		gen_fill(3, off, buf, len);
		assert_int_equal(kv_upload_write(u, buf, len), 0);
		if (off == 140000 || off == 350000) {
			/* garbage to merge, then a merge while the upload is open */
			for (int i = 0; i < 50; i++)
				assert_int_equal(kv_put(db, "junk", 4, buf, 3000, NULL, NULL), 0);
			assert_int_equal(kv_merge(db), 0);
			check_blob(db, "a", v1, 1, 700000, 8192);
			check_blob(db, "a", v2, 2, 300001, 4096);
		}
	}
	assert_int_equal(kv_upload_commit(u, NULL, &v3), 0);
	kv_upload_close(u);
	check_blob(db, "open", v3, 3, 500000, 4096);
	assert_int_equal(kv_merge(db), 0);
	check_blob(db, "open", v3, 3, 500000, 4096);
	check_blob(db, "a", v1, 1, 700000, 8192);
	check_blob(db, "a", v2, 2, 300001, 4096);
	assert_int_equal(kv_close(db), 0);
	db = open_db(dir);
	check_blob(db, "open", v3, 3, 500000, 4096);
	check_blob(db, "a", v1, 1, 700000, 8192);
	check_blob(db, "a", 0, 2, 300001, 4096);
	assert_int_equal(kv_merge(db), 0);
	check_blob(db, "open", 0, 3, 500000, 4096);
	assert_int_equal(kv_close(db), 0);
	tu_rmtree(dir);
	free(dir);
}

/* Blobs among plain values: versions, scans, deletes, TTLs, conditions. */
static void test_like_a_value(void **state)
{
	char *dir = tu_mkdtemp("blob-value");
	kv_db *db = open_db(dir);
	struct kv_write_opts wo = KV_WRITE_OPTS_INIT;
	struct kv_version *list;
	struct kv_value v;
	struct kv_entry e;
	kv_iter *it;
	uint64_t vb1, vp, vb2, vd;
	size_t n;
	bool cut;

	(void)state;
	vb1 = upload(db, "k", 4096, 11, 10000, 3000, NULL, 0);
	assert_int_equal(kv_put(db, "k", 1, "plain", 5, NULL, &vp), 0);
	wo.if_version = vp;
	vb2 = upload(db, "k", 4096, 12, 20000, 3000, &wo, 0);
	/* a stale condition: refused, nothing visible */
	wo.if_version = vp;
	upload(db, "k", 4096, 13, 5000, 3000, &wo, KV_ECONFLICT);
	wo.if_version = 0;
	upload(db, "k", 4096, 13, 5000, 3000, &wo, KV_ECONFLICT);
	check_blob(db, "k", 0, 12, 20000, 4096);

	assert_int_equal(kv_versions(db, "k", 1, 0, 0, true, &list, &n, &cut), 0);
	assert_int_equal(n, 3);
	assert_int_equal(list[0].version, vb2);
	assert_true(list[0].blob);
	assert_int_equal(list[0].blob_size, 20000);
	assert_null(list[0].data);
	assert_false(list[1].blob);
	assert_int_equal(list[1].len, 5);
	assert_true(list[2].blob);
	assert_int_equal(list[2].version, vb1);
	assert_int_equal(list[2].blob_size, 10000);
	kv_versions_free(list, n);
	check_blob(db, "k", vb1, 11, 10000, 4096);

	assert_int_equal(kv_put(db, "j", 1, "x", 1, NULL, NULL), 0);
	assert_int_equal(kv_iter_open(db, NULL, &it), 0);
	assert_int_equal(kv_iter_next(it, &e), 0);
	assert_false(e.blob);
	assert_int_equal(kv_iter_next(it, &e), 0);
	assert_int_equal(e.key_len, 1);
	assert_memory_equal(e.key, "k", 1);
	assert_true(e.blob);
	assert_int_equal(e.blob_size, 20000);
	assert_null(e.value);
	assert_int_equal(kv_iter_next(it, &e), KV_EEND);
	kv_iter_close(it);

	assert_int_equal(kv_delete(db, "k", 1, NULL, &vd), 0);
	assert_int_equal(kv_get(db, "k", 1, NULL, &v), KV_ENOTFOUND);
	assert_int_equal(kv_blob_info(db, "k", 1, NULL, &(struct kv_blob_info){0}), KV_ENOTFOUND);
	check_blob(db, "k", vb2, 12, 20000, 4096);

	wo = (struct kv_write_opts)KV_WRITE_OPTS_INIT;
	wo.ttl_ms = 1000;
	upload(db, "t", 4096, 14, 9000, 3000, &wo, 0);
	check_blob(db, "t", 0, 14, 9000, 4096);
	__atomic_add_fetch(&clk.ms, 2000, __ATOMIC_SEQ_CST);
	assert_int_equal(kv_get(db, "t", 1, NULL, &v), KV_ENOTFOUND);
	assert_int_equal(kv_blob_info(db, "t", 1, NULL, &(struct kv_blob_info){0}), KV_ENOTFOUND);
	assert_int_equal(kv_close(db), 0);
	tu_rmtree(dir);
	free(dir);
}

/* The non-blocking form, as an event loop drives it. */
static void done_cb(struct kv_req *req, int status)
{
	int *out = req->arg;
	*out = status;
}

static int run_req(kv_db *db, struct kv_req *req)
{
	int status = 1;

	req->done = done_cb;
	req->arg = &status;
	assert_int_equal(kv_submit(db, req), 0);
	while (status == 1)
		assert_int_equal(kv_process(db), 0);
	return status;
}

static void test_nonblocking(void **state)
{
	char *dir = tu_mkdtemp("blob-async");
	struct kv_options o;
	struct kv_req req;
	uint8_t buf[3000];
	uint64_t off, ver = 0;
	kv_upload *u;
	kv_db *db;

	(void)state;
	opts(&o);
	o.external_loop = true;
	assert_int_equal(kv_open(dir, &o, &db), 0);
	assert_int_equal(kv_upload_open(db, "n", 1, 4096, &u), 0);
	for (off = 0; off < 50000; off += sizeof(buf)) {
		size_t len = 50000 - off < sizeof(buf) ? (size_t)(50000 - off) : sizeof(buf);
		gen_fill(21, off, buf, len);
		assert_int_equal(kv_upload_prepare(u, buf, len, &req), 0);
		if (req.n == 0)
			continue;
		/* one request at a time */
		assert_int_equal(kv_upload_prepare(u, buf, 1, &(struct kv_req){0}), -EBUSY);
		assert_int_equal(kv_upload_written(u, &req, run_req(db, &req), NULL), 0);
	}
	assert_int_equal(kv_upload_commit_prepare(u, NULL, &req), 0);
	assert_int_equal(req.n, 2); /* the last, partial chunk and the descriptor */
	assert_int_equal(kv_upload_written(u, &req, run_req(db, &req), &ver), 0);
	assert_true(ver > 0);
	assert_int_equal(kv_upload_prepare(u, buf, 1, &req), -EBADFD);
	kv_upload_close(u);
	check_blob(db, "n", ver, 21, 50000, 4096);
	assert_int_equal(kv_close(db), 0);
	tu_rmtree(dir);
	free(dir);
}

/* Chunks compressed one by one; the chunk bytes counted live, never as
 * reclaimable while the blob is the key's, and reclaimable once replaced. */
static void test_compressed_and_counted(void **state)
{
	char *dir = tu_mkdtemp("blob-zstd");
	struct kv_blob_info info;
	struct kv_stats st;
	uint8_t *text = malloc(300000);
	uint64_t ver, live0;
	kv_upload *u;
	kv_db *db = open_db(dir);

	(void)state;
	assert_non_null(text);
	for (size_t i = 0; i < 300000; i++)
		text[i] = (uint8_t)"a blob of text, "[i % 16];
	assert_int_equal(kv_set_compression(db, KV_CODEC_ZSTD, 3), 0);
	assert_int_equal(kv_stats(db, &st), 0);
	live0 = st.live_bytes;
	assert_int_equal(kv_upload_open(db, "z", 1, 16384, &u), 0);
	assert_int_equal(kv_upload_write(u, text, 300000), 0);
	assert_int_equal(kv_upload_commit(u, NULL, &ver), 0);
	kv_upload_close(u);
	assert_int_equal(kv_blob_info(db, "z", 1, NULL, &info), 0);
	assert_int_equal(info.size, 300000);
	assert_true(info.stored_bytes < 300000 / 4);
	assert_int_equal(kv_stats(db, &st), 0);
	assert_true(st.live_bytes >= live0 + info.stored_bytes);
	assert_true(st.disk_bytes - st.live_bytes < 4096);
	{
		uint8_t *back = malloc(300000);
		size_t n;
		assert_non_null(back);
		assert_int_equal(kv_blob_read(db, "z", 1, NULL, 0, back, 300000, &n, NULL), 0);
		assert_int_equal(n, 300000);
		assert_memory_equal(back, text, 300000);
		free(back);
	}
	/* counted the same after reopening */
	assert_int_equal(kv_close(db), 0);
	db = open_db(dir);
	assert_int_equal(kv_stats(db, &st), 0);
	assert_true(st.live_bytes >= info.stored_bytes);
	assert_true(st.disk_bytes - st.live_bytes < 4096);
	/* and after merge moved it */
	assert_int_equal(kv_merge(db), 0);
	assert_int_equal(kv_stats(db, &st), 0);
	assert_true(st.disk_bytes - st.live_bytes < 4096);
	assert_int_equal(kv_put(db, "z", 1, "small", 5, NULL, NULL), 0);
	assert_int_equal(kv_stats(db, &st), 0);
	assert_true(st.disk_bytes - st.live_bytes >= info.stored_bytes);
	assert_int_equal(kv_close(db), 0);
	free(text);
	tu_rmtree(dir);
	free(dir);
}

/* max_bytes counts a blob's chunks: committing one evicts the oldest keys
 * (evict=oldest) to make room for all of it, or is refused (refuse, or a
 * blob larger than the whole budget); deleting it gives the room back. */
static void test_max_bytes(void **state)
{
	char *dir = tu_mkdtemp("blob-maxbytes");
	struct kv_options o;
	struct kv_stats st;
	struct kv_value v;
	uint8_t val[1000];
	char key[16];
	kv_db *db;

	(void)state;
	opts(&o);
	o.max_bytes = 200000;
	o.evict = KV_EVICT_OLDEST;
	assert_int_equal(kv_open(dir, &o, &db), 0);
	memset(val, 'v', sizeof(val));
	for (int i = 0; i < 100; i++) {
		snprintf(key, sizeof(key), "k%03d", i);
		assert_int_equal(kv_put(db, key, strlen(key), val, sizeof(val), NULL, NULL), 0);
	}
	upload(db, "blob", 4096, 41, 150000, 5000, NULL, 0);
	assert_int_equal(kv_stats(db, &st), 0);
	assert_true(st.evictions >= 50);
	assert_true(st.live_bytes - st.tombstone_bytes <= 200000);
	assert_int_equal(kv_get(db, "k000", 4, NULL, &v), KV_ENOTFOUND);
	assert_int_equal(kv_get(db, "k099", 4, NULL, &v), 0);
	kv_value_release(&v);
	check_blob(db, "blob", 0, 41, 150000, 4096);
	/* larger than the whole budget: refused, nothing evicted */
	upload(db, "huge", 4096, 42, 250000, 5000, NULL, KV_EMAXKEYS);
	assert_int_equal(kv_get(db, "k099", 4, NULL, &v), 0);
	kv_value_release(&v);
	check_blob(db, "blob", 0, 41, 150000, 4096);
	assert_int_equal(kv_close(db), 0);

	/* refuse: the blob does not fit beside what is there */
	o.evict = KV_EVICT_REFUSE;
	assert_int_equal(kv_open(dir, &o, &db), 0);
	upload(db, "more", 4096, 43, 150000, 5000, NULL, KV_EMAXKEYS);
	assert_int_equal(kv_delete(db, "blob", 4, NULL, NULL), 0);
	upload(db, "more", 4096, 43, 150000, 5000, NULL, 0);
	assert_int_equal(kv_close(db), 0);
	tu_rmtree(dir);
	free(dir);
}

#ifndef TU_DEVICE
/* A chunk damaged on disk: reads of its range are KV_ECORRUPT, the others
 * still read. */
static void test_damaged_chunk(void **state)
{
	char *dir = tu_mkdtemp("blob-damaged"), *seg;
	uint8_t pattern[16], *file;
	off_t at = -1;
	size_t size;
	FILE *f;
	uint8_t buf[100];
	size_t n;
	kv_db *db = open_db(dir);

	(void)state;
	upload(db, "d", 4096, 31, 40000, 4096, NULL, 0);
	assert_int_equal(kv_close(db), 0);
	/* the bytes of chunk 3, found in the segment */
	gen_fill(31, 3 * 4096 + 100, pattern, sizeof(pattern));
	seg = tu_path(dir, "%08x.seg", 1);
	file = malloc(1u << 24);
	assert_non_null(file);
	assert_non_null(f = fopen(seg, "rb"));
	size = fread(file, 1, 1u << 24, f);
	fclose(f);
	assert_true(size > 40000 && size < (1u << 24));
	for (size_t i = 0; i + sizeof(pattern) <= size; i++)
		if (memcmp(file + i, pattern, sizeof(pattern)) == 0)
			at = (off_t)i;
	free(file);
	assert_true(at > 0);
	tu_flip_byte(seg, at);
	db = open_db(dir);
	assert_int_equal(kv_blob_read(db, "d", 1, NULL, 3 * 4096, buf, sizeof(buf), &n, NULL),
	                 KV_ECORRUPT);
	assert_int_equal(check_range(db, "d", 0, 31, 2 * 4096, 4096), 4096);
	assert_int_equal(check_range(db, "d", 0, 31, 4 * 4096, 4096), 4096);
	assert_int_equal(kv_close(db), 0);
	free(seg);
	tu_rmtree(dir);
	free(dir);
}
#endif

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sizes_and_ranges),
		cmocka_unit_test(test_not_a_blob),
		cmocka_unit_test(test_uncommitted),
		cmocka_unit_test(test_merge),
		cmocka_unit_test(test_like_a_value),
		cmocka_unit_test(test_nonblocking),
		cmocka_unit_test(test_compressed_and_counted),
		cmocka_unit_test(test_max_bytes),
#ifndef TU_DEVICE
		cmocka_unit_test(test_damaged_chunk),
#endif
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
