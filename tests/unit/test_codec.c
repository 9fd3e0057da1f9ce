/* test_codec.c — compressed values (engine/codec.c): records of every codec mixed in one database across codec changes read back byte-exact through get, versions and scan, after merge and after reopening; incompressible values stay raw, repetitive text shrinks; a compressed value that does not decode under a correct CRC is KV_ECORRUPT (kv_check says so too). */
#include "testutil.h"

#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <sys/mman.h>

#include <cmocka.h> /* after the headers it needs */

#include "codec.h"
#include "crc.h"
#include "endian_util.h"
#include "record.h"

static struct tu_clock clk = {1700000000000ull};

static void opts(struct kv_options *o)
{
	tu_options(o, &clk);
	o->segment_size = 256 * 1024;
	o->merge_ratio_pct = 0;
	o->history_versions = 1000;
}

static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Repetitive text (a few words in a varying order): compresses well. */
static void text_value(uint8_t *buf, size_t len, uint64_t seed)
{
	static const char *words[] = {"tenant ", "value ",   "record ", "segment ",
	                              "merge ",  "version ", "key ",    "log "};
	size_t at = 0;

	while (at < len) {
		const char *w = words[rng_next(&seed) % 8];
		size_t n = strlen(w);
		if (n > len - at)
			n = len - at;
		memcpy(buf + at, w, n);
		at += n;
	}
}

static void random_value(uint8_t *buf, size_t len, uint64_t seed)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)(rng_next(&seed) >> 24);
}

/* ---- the model: every version of every key, with its bytes ------------- */

#define NKEYS   24
#define MAXVERS 8

struct mver {
	uint64_t version;
	uint8_t *data;
	size_t len;
};

struct mkey {
	char name[16];
	struct mver v[MAXVERS]; /* oldest first */
	size_t n;
};

static struct mkey model[NKEYS];

static const size_t sizes[] = {0, 5, 63, 64, 65, 200, 1024, 4000, 65536};

static void put_one(kv_db *db, size_t k, int phase)
{
	struct mkey *m = &model[k];
	size_t len = sizes[(k + (size_t)phase) % (sizeof(sizes) / sizeof(sizes[0]))];
	uint8_t *buf = malloc(len ? len : 1);
	uint64_t seed = k * 1000003u + (uint64_t)phase + 1, ver;

	assert_non_null(buf);
	if ((k + (size_t)phase) % 3 == 0)
		random_value(buf, len, seed);
	else
		text_value(buf, len, seed);
	assert_int_equal(kv_put(db, m->name, strlen(m->name), buf, len, NULL, &ver), 0);
	assert_true(m->n < MAXVERS);
	m->v[m->n++] = (struct mver){ver, buf, len};
}

static void model_reset(void)
{
	for (size_t k = 0; k < NKEYS; k++) {
		for (size_t i = 0; i < model[k].n; i++)
			free(model[k].v[i].data);
		memset(&model[k], 0, sizeof(model[k]));
		snprintf(model[k].name, sizeof(model[k].name), "key%03zu", k);
	}
}

/* Every key's newest value through get, every version through versions and
 * get at a version, and the newest values through a scan. */
static void verify(kv_db *db)
{
	struct kv_entry e;
	kv_iter *it;
	size_t k = 0;

	for (k = 0; k < NKEYS; k++) {
		struct mkey *m = &model[k];
		struct kv_version *list;
		struct kv_value val;
		size_t n;
		bool cut;

		if (m->n == 0)
			continue;
		assert_int_equal(kv_get(db, m->name, strlen(m->name), NULL, &val), 0);
		assert_int_equal(val.len, m->v[m->n - 1].len);
		assert_memory_equal(val.data, m->v[m->n - 1].data, val.len);
		assert_int_equal(val.version, m->v[m->n - 1].version);
		kv_value_release(&val);
		assert_int_equal(
		        kv_versions(db, m->name, strlen(m->name), 0, 0, true, &list, &n, &cut), 0);
		assert_int_equal(n, m->n);
		for (size_t i = 0; i < n; i++) {
			const struct mver *w = &m->v[m->n - 1 - i];
			struct kv_read_opts ro = {.version = w->version};
			assert_int_equal(list[i].version, w->version);
			assert_int_equal(list[i].len, w->len);
			if (w->len)
				assert_memory_equal(list[i].data, w->data, w->len);
			assert_int_equal(kv_get(db, m->name, strlen(m->name), &ro, &val), 0);
			assert_int_equal(val.len, w->len);
			if (w->len)
				assert_memory_equal(val.data, w->data, w->len);
			kv_value_release(&val);
		}
		kv_versions_free(list, n);
	}
	assert_int_equal(kv_iter_open(db, NULL, &it), 0);
	k = 0;
	while (kv_iter_next(it, &e) == 0) {
		while (k < NKEYS && model[k].n == 0)
			k++;
		assert_true(k < NKEYS);
		assert_int_equal(e.key_len, strlen(model[k].name));
		assert_memory_equal(e.key, model[k].name, e.key_len);
		assert_int_equal(e.value_len, model[k].v[model[k].n - 1].len);
		if (e.value_len)
			assert_memory_equal(e.value, model[k].v[model[k].n - 1].data, e.value_len);
		k++;
	}
	kv_iter_close(it);
	while (k < NKEYS && model[k].n == 0)
		k++;
	assert_int_equal(k, NKEYS);
}

static void phase(kv_db *db, int p)
{
	for (size_t k = 0; k < NKEYS; k++)
		if ((k + (size_t)p) % 4 != 0) /* some keys skip a phase */
			put_one(db, k, p);
}

/* none → lz4 (changed live) → zstd:5 (changed by reopening) → none (live):
 * every record reads back as written, before and after a merge and a
 * reopen. */
static void test_codec_changes_merge_reopen(void **state)
{
	char *dir = tu_mkdtemp("codec");
	struct kv_options o;
	struct kv_stats st0, st1, st2;
	kv_db *db;

	(void)state;
	model_reset();
	opts(&o);
	assert_int_equal(kv_open(dir, &o, &db), 0);
	phase(db, 0);
	assert_int_equal(kv_stats(db, &st0), 0);
	assert_int_equal(st0.values_compressed, 0);
	assert_int_equal(st0.value_stored_bytes, st0.value_logical_bytes);
	verify(db);

	assert_int_equal(kv_set_compression(db, KV_CODEC_LZ4, 0), 0);
	phase(db, 1);
	assert_int_equal(kv_stats(db, &st1), 0);
	assert_true(st1.values_compressed > 0);
	assert_true(st1.value_stored_bytes - st0.value_stored_bytes <
	            st1.value_logical_bytes - st0.value_logical_bytes);
	verify(db);
	assert_int_equal(kv_close(db), 0);

	o.compression = KV_CODEC_ZSTD;
	o.compression_level = 5;
	assert_int_equal(kv_open(dir, &o, &db), 0);
	verify(db);
	phase(db, 2);
	assert_int_equal(kv_stats(db, &st2), 0);
	assert_true(st2.values_compressed > 0);
	assert_true(st2.value_stored_bytes < st2.value_logical_bytes);
	verify(db);

	assert_int_equal(kv_set_compression(db, KV_CODEC_NONE, 0), 0);
	assert_int_equal(kv_stats(db, &st0), 0);
	phase(db, 3);
	assert_int_equal(kv_stats(db, &st1), 0);
	assert_int_equal(st1.values_compressed, st0.values_compressed);
	assert_int_equal(st1.value_stored_bytes - st0.value_stored_bytes,
	                 st1.value_logical_bytes - st0.value_logical_bytes);
	verify(db);

	assert_int_equal(kv_merge(db), 0);
	verify(db);
	assert_int_equal(kv_close(db), 0);
	o.compression = KV_CODEC_LZ4;
	o.compression_level = 0;
	assert_int_equal(kv_open(dir, &o, &db), 0);
	verify(db);
	/* a merge after the reopen, from hints, and another reopen */
	phase(db, 4);
	assert_int_equal(kv_merge(db), 0);
	verify(db);
	assert_int_equal(kv_close(db), 0);
	assert_int_equal(kv_open(dir, &o, &db), 0);
	verify(db);
	assert_int_equal(kv_close(db), 0);
	model_reset();
	tu_rmtree(dir);
	free(dir);
}

/* Random bytes are stored raw (stored = logical); repetitive text shrinks
 * to less than half; the value limit is on the logical length. */
#ifndef TU_DEVICE
/* META's format field: 3 once a compressed value was written, so a kvd
 * that knows only format 2 refuses the tenant instead of reading compressed
 * bytes as values; 2 while none was (incompressible values stay raw); and
 * it stays 3. */
static uint32_t meta_format(const char *dir)
{
	char path[512];
	uint8_t b[12];
	FILE *f;

	snprintf(path, sizeof(path), "%s/META", dir);
	assert_non_null(f = fopen(path, "rb"));
	assert_int_equal(fread(b, 1, sizeof(b), f), sizeof(b));
	fclose(f);
	return get_le32(b + 8);
}

static void test_meta_format(void **state)
{
	char *dir = tu_mkdtemp("codec-meta");
	struct kv_options o;
	uint8_t buf[4096];
	kv_db *db;

	(void)state;
	opts(&o);
	assert_int_equal(kv_open(dir, &o, &db), 0);
	assert_int_equal(kv_set_compression(db, KV_CODEC_LZ4, 0), 0);
	random_value(buf, sizeof(buf), 3);
	assert_int_equal(kv_put(db, "random", 6, buf, sizeof(buf), NULL, NULL), 0);
	assert_int_equal(kv_close(db), 0);
	assert_int_equal(meta_format(dir), 2); /* nothing compressed */

	assert_int_equal(kv_open(dir, &o, &db), 0);
	assert_int_equal(kv_set_compression(db, KV_CODEC_LZ4, 0), 0);
	text_value(buf, sizeof(buf), 5);
	assert_int_equal(kv_put(db, "text", 4, buf, sizeof(buf), NULL, NULL), 0);
	assert_int_equal(meta_format(dir), 3); /* durable before the value was */
	assert_int_equal(kv_close(db), 0);

	assert_int_equal(kv_open(dir, &o, &db), 0); /* no codec now */
	assert_int_equal(kv_put(db, "more", 4, "x", 1, NULL, NULL), 0);
	assert_int_equal(kv_merge(db), 0);
	assert_int_equal(kv_close(db), 0);
	assert_int_equal(meta_format(dir), 3);
	tu_rmtree(dir);
	free(dir);
}
#endif

static void test_raw_when_incompressible(void **state)
{
	static const enum kv_codec codecs[] = {KV_CODEC_LZ4, KV_CODEC_ZSTD};
	static const size_t lens[] = {1024, 65536};
	char *dir = tu_mkdtemp("codec-raw");
	struct kv_options o;
	struct kv_stats a, b;
	struct kv_value val;
	uint8_t *buf = malloc(65536);
	uint64_t ver;
	kv_db *db;

	(void)state;
	assert_non_null(buf);
	opts(&o);
	o.max_value_size = 65536;
	assert_int_equal(kv_open(dir, &o, &db), 0);
	for (size_t c = 0; c < 2; c++) {
		assert_int_equal(kv_set_compression(db, codecs[c], 0), 0);
		for (size_t l = 0; l < 2; l++) {
			random_value(buf, lens[l], 7 + l);
			assert_int_equal(kv_stats(db, &a), 0);
			assert_int_equal(kv_put(db, "random", 6, buf, lens[l], NULL, &ver), 0);
			assert_int_equal(kv_stats(db, &b), 0);
			assert_int_equal(b.values_compressed, a.values_compressed);
			assert_int_equal(b.value_logical_bytes - a.value_logical_bytes, lens[l]);
			assert_int_equal(b.value_stored_bytes - a.value_stored_bytes, lens[l]);
			assert_int_equal(kv_get(db, "random", 6, NULL, &val), 0);
			assert_int_equal(val.len, lens[l]);
			assert_memory_equal(val.data, buf, lens[l]);
			kv_value_release(&val);

			text_value(buf, lens[l], 11 + l);
			assert_int_equal(kv_put(db, "text", 4, buf, lens[l], NULL, &ver), 0);
			assert_int_equal(kv_stats(db, &a), 0);
			assert_int_equal(a.values_compressed, b.values_compressed + 1);
			assert_int_equal(a.value_logical_bytes - b.value_logical_bytes, lens[l]);
			assert_true(a.value_stored_bytes - b.value_stored_bytes < lens[l] / 2);
			assert_int_equal(kv_get(db, "text", 4, NULL, &val), 0);
			assert_int_equal(val.len, lens[l]);
			assert_memory_equal(val.data, buf, lens[l]);
			kv_value_release(&val);
		}
	}
	/* the limit is on what was given, not on what would be stored */
	text_value(buf, 65536, 3);
	assert_int_equal(kv_close(db), 0);
	o.max_value_size = 4096;
	o.compression = KV_CODEC_ZSTD;
	assert_int_equal(kv_open(dir, &o, &db), 0);
	assert_int_equal(kv_put(db, "big", 3, buf, 4097, NULL, &ver), KV_EVALSIZE);
	assert_int_equal(kv_put(db, "big", 3, buf, 4096, NULL, &ver), 0);
	/* an unknown codec or a level it does not take */
	assert_int_equal(kv_set_compression(db, (enum kv_codec)3, 0), -EINVAL);
	assert_int_equal(kv_set_compression(db, KV_CODEC_LZ4, 3), -EINVAL);
	assert_int_equal(kv_set_compression(db, KV_CODEC_ZSTD, 23), -EINVAL);
	assert_int_equal(kv_close(db), 0);
	o.compression_level = 99;
	assert_int_equal(kv_open(dir, &o, &db), -EINVAL);
	free(buf);
	tu_rmtree(dir);
	free(dir);
}

/* ---- damage under a correct CRC ----------------------------------------- */

/* The record of key at version ver in any file under dir (segment files, or
 * the device image): its file and offset. */
static bool find_record(const char *dir, const char *key, uint64_t ver, char *ret_path, size_t cap,
                        uint64_t *ret_off)
{
	size_t klen = strlen(key);
	struct dirent *d;
	DIR *dh = opendir(dir);
	bool found = false;

	assert_non_null(dh);
	while (!found && (d = readdir(dh)) != NULL) {
		char *path = tu_path(dir, "%s", d->d_name);
		struct stat sb;
		if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > REC_HEADER_SIZE) {
			int fd = open(path, O_RDONLY);
			const uint8_t *m, *p;
			assert_true(fd >= 0);
			m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_SHARED, fd, 0);
			assert_true(m != MAP_FAILED);
			for (p = m; !found && (p = memmem(p, (size_t)(m + sb.st_size - p), key,
			                                  klen)) != NULL;
			     p++) {
				struct rec_header h;
				if (p - m < REC_HEADER_SIZE)
					continue;
				rec_decode_header(p - REC_HEADER_SIZE, &h);
				if (h.type == REC_PUT && h.key_len == klen && h.version == ver &&
				    p + klen + h.value_len <= m + sb.st_size) {
					snprintf(ret_path, cap, "%s", path);
					*ret_off = (uint64_t)(p - REC_HEADER_SIZE - m);
					found = true;
				}
			}
			munmap((void *)m, (size_t)sb.st_size);
			close(fd);
		}
		free(path);
	}
	closedir(dh);
	return found;
}

/* Rewrites the record at off in path with its value changed by damage(),
 * its CRC made to match again (with the seed it had). */
static void damage_record(const char *path, uint64_t off, void (*damage)(uint8_t *v, size_t len))
{
	int fd = open(path, O_RDWR);
	uint8_t head[REC_HEADER_SIZE], *rec;
	struct rec_header h;
	uint32_t seed;
	size_t size;

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, head, sizeof(head), (off_t)off), (ssize_t)sizeof(head));
	rec_decode_header(head, &h);
	size = (size_t)rec_size(h.key_len, h.value_len);
	rec = malloc(size);
	assert_non_null(rec);
	assert_int_equal(pread(fd, rec, size, (off_t)off), (ssize_t)size);
	seed = h.crc ^ crc32c(rec + 4, size - 4);
	damage(rec + REC_HEADER_SIZE + h.key_len, h.value_len);
	put_le32(rec, crc32c(rec + 4, size - 4) ^ seed);
	assert_int_equal(pwrite(fd, rec, size, (off_t)off), (ssize_t)size);
	assert_int_equal(fsync(fd), 0);
	close(fd);
	free(rec);
}

static void longer_by_one(uint8_t *v, size_t len)
{
	(void)len;
	put_le32(v, get_le32(v) + 1);
}

static void shorter_by_one(uint8_t *v, size_t len)
{
	(void)len;
	put_le32(v, get_le32(v) - 1);
}

static void huge_length(uint8_t *v, size_t len)
{
	(void)len;
	put_le32(v, 0xffffffffu);
}

static void garbled_payload(uint8_t *v, size_t len)
{
	memset(v + CODEC_PREFIX, 0xff, len - CODEC_PREFIX);
}

static void truncated_payload(uint8_t *v, size_t len)
{
	/* the frame's end replaced: the decoder runs out of input */
	memset(v + len / 2, 0, len - len / 2);
	v[CODEC_PREFIX] ^= 0x80;
}

#ifndef TU_DEVICE /* kv_check reads a directory of files */
static void count_damage(void *arg, const struct kv_check_item *it)
{
	if (it->damage && strstr(it->what, "compressed value does not decompress") != NULL)
		(*(int *)arg)++;
}
#endif

static void test_damaged_compressed_value_is_corrupt(void **state)
{
	static void (*const damages[])(uint8_t *, size_t) = {
	        longer_by_one, shorter_by_one, huge_length, garbled_payload, truncated_payload};
	static const enum kv_codec codecs[] = {KV_CODEC_LZ4, KV_CODEC_ZSTD};
	char path[4096];
	uint8_t text[2000];

	(void)state;
	text_value(text, sizeof(text), 5);
	for (size_t c = 0; c < 2; c++) {
		for (size_t d = 0; d < sizeof(damages) / sizeof(damages[0]); d++) {
			char *dir = tu_mkdtemp("codec-damage");
			struct kv_options o;
			struct kv_version *list;
			struct kv_value val;
			struct kv_entry e;
			uint64_t ver, off = 0;
			kv_iter *it;
			size_t n;
			kv_db *db;
			int rv;

			opts(&o);
			o.compression = codecs[c];
			assert_int_equal(kv_open(dir, &o, &db), 0);
			assert_int_equal(kv_put(db, "a-before", 8, "x", 1, NULL, &ver), 0);
			assert_int_equal(
			        kv_put(db, "victim-key", 10, text, sizeof(text), NULL, &ver), 0);
			assert_int_equal(kv_put(db, "z-after", 7, text, sizeof(text), NULL, NULL),
			                 0);
			assert_int_equal(kv_close(db), 0);
			assert_true(find_record(dir, "victim-key", ver, path, sizeof(path), &off));
			damage_record(path, off, damages[d]);
#ifndef TU_DEVICE
			{
				struct kv_check_summary sum;
				int found = 0;
				assert_int_equal(kv_check(dir, count_damage, &found, &sum), 0);
				assert_int_equal(found, 1);
				assert_int_equal(sum.damaged, 1);
			}
#endif

			assert_int_equal(kv_open(dir, &o, &db), 0);
			assert_int_equal(kv_get(db, "victim-key", 10, NULL, &val), KV_ECORRUPT);
			assert_int_equal(
			        kv_versions(db, "victim-key", 10, 0, 0, true, &list, &n, NULL),
			        KV_ECORRUPT);
			/* without values the versions are still listed */
			assert_int_equal(
			        kv_versions(db, "victim-key", 10, 0, 0, false, &list, &n, NULL), 0);
			assert_int_equal(n, 1);
			kv_versions_free(list, n);
			assert_int_equal(kv_iter_open(db, NULL, &it), 0);
			assert_int_equal(kv_iter_next(it, &e), 0);
			assert_int_equal(e.key_len, 8);
			rv = kv_iter_next(it, &e);
			assert_int_equal(rv, KV_ECORRUPT);
			kv_iter_close(it);
			/* the others read as written */
			assert_int_equal(kv_get(db, "z-after", 7, NULL, &val), 0);
			assert_int_equal(val.len, sizeof(text));
			assert_memory_equal(val.data, text, sizeof(text));
			kv_value_release(&val);
			assert_int_equal(kv_close(db), 0);
			tu_rmtree(dir);
			free(dir);
		}
	}
}

/* The decoder itself on bytes that are not a value it wrote: an error or
 * exactly the announced length, never a crash (ASan watches). */
static void test_decoder_on_noise(void **state)
{
	uint64_t seed = tu_seed("codec-noise", 42);
	uint8_t src[512], plain[1000], stored[1000];
	struct codec_ctx cx = {0};

	(void)state;
	text_value(plain, sizeof(plain), 9);
	for (int round = 0; round < 20000; round++) {
		unsigned codec = 1 + (unsigned)(rng_next(&seed) & 1);
		size_t len = rng_next(&seed) % sizeof(src), got;
		uint8_t *out;
		int rv;

		if (round % 2 == 0) {
			/* a real value with a few bytes changed */
			size_t n = codec_compress(&cx, (enum kv_codec)codec, 0, plain,
			                          sizeof(plain), stored, sizeof(stored));
			assert_true(n > CODEC_PREFIX && n < sizeof(plain));
			for (int f = 0; f < 1 + round % 4; f++)
				stored[rng_next(&seed) % n] ^=
				        (uint8_t)(1u << (rng_next(&seed) % 8));
			rv = codec_decompress(codec, stored, n, KV_VALUE_SIZE_MAX, &out, &got);
		} else {
			for (size_t i = 0; i < len; i++)
				src[i] = (uint8_t)rng_next(&seed);
			if (len >= 4 && (round & 2))
				put_le32(src, (uint32_t)(rng_next(&seed) % 4096));
			rv = codec_decompress(codec, src, len, KV_VALUE_SIZE_MAX, &out, &got);
		}
		assert_true(rv == 0 || rv == KV_ECORRUPT);
		if (rv == 0)
			free(out);
	}
	codec_ctx_release(&cx);
	codec_ctx_release(NULL);
}

static void test_codec_names(void **state)
{
	static const struct {
		const char *s;
		enum kv_codec c;
		int level;
	} good[] = {{"none", KV_CODEC_NONE, 0},
	            {"lz4", KV_CODEC_LZ4, 0},
	            {"zstd", KV_CODEC_ZSTD, 0},
	            {"zstd:1", KV_CODEC_ZSTD, 1},
	            {"zstd:22", KV_CODEC_ZSTD, 22}};
	static const char *bad[] = {"",        "gzip",  "zstd:",  "zstd:0", "zstd:23", "zstd:-1",
	                            "zstd:1x", "lz4:1", "none:1", "ZSTD",   "zstd:123"};
	char buf[KV_CODEC_NAME_MAX];
	enum kv_codec c;
	int level;

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		assert_int_equal(kv_codec_parse(good[i].s, strlen(good[i].s), &c, &level), 0);
		assert_int_equal(c, good[i].c);
		assert_int_equal(level, good[i].level);
		assert_int_equal(kv_codec_format(c, level, buf, sizeof(buf)), 0);
		assert_string_equal(buf, good[i].s);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (kv_codec_parse(bad[i], strlen(bad[i]), &c, &level) != -EINVAL)
			fail_msg("'%s' parsed", bad[i]);
	assert_int_equal(kv_codec_format(KV_CODEC_ZSTD, 22, buf, 4), -ENOBUFS);
	assert_int_equal(kv_codec_format(KV_CODEC_LZ4, 1, buf, sizeof(buf)), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_codec_names),
	        cmocka_unit_test(test_decoder_on_noise),
	        cmocka_unit_test(test_codec_changes_merge_reopen),
	        cmocka_unit_test(test_raw_when_incompressible),
#ifndef TU_DEVICE
	        cmocka_unit_test(test_meta_format),
#endif
	        cmocka_unit_test(test_damaged_compressed_value_is_corrupt),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
