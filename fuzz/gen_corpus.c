/*
 * gen_corpus — writes the seed corpora of the fuzz targets (fuzz/corpus/).
 *
 *   gen_corpus OUT_DIR rpc/PROTOCOL.md systemd/kvd.conf
 *
 * record/, hint/, commit/, manifest/: the files of a real database, made with the
 *   engine (a fixed clock, so the bytes are the same on every run): puts,
 *   a TTL, deletes, a batch, small segments so several get sealed, a merge;
 *   hints written by kv_close; one written with lz4 and then zstd, and one
 *   with blobs, so that compressed values, blob chunks and descriptors are
 *   among them. Each file gets the parameter prefix its target expects (see
 *   the top of fuzz_<target>.c).
 * request/, reply/: every example message of PROTOCOL.md, the requests
 *   libkvclient's encoders make for every method (with the token the
 *   request target's server wants), replies of the shapes the client
 *   decodes, and a few hostile messages.
 * config/: the shipped kvd.conf and variants.
 *
 * Files get stable names, so regenerating changes only what changed.
 */
#include "client_codec.h"
#include "hint.h"
#include "kvengine.h"
#include "mp.h"
#include "reloc.h"
#include "storage.h"
#include "segment.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *out_dir;

static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "gen_corpus: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

static void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* Writes OUT_DIR/target/name: prefix bytes, then the body. */
static void emit(const char *target, const char *name, const void *prefix, size_t plen,
                 const void *body, size_t blen)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", out_dir, target);
	if (mkdir(path, 0755) != 0 && errno != EEXIST)
		die("mkdir %s: %s", path, strerror(errno));
	snprintf(path, sizeof(path), "%s/%s/%s", out_dir, target, name);
	if ((f = fopen(path, "wb")) == NULL)
		die("%s: %s", path, strerror(errno));
	if ((plen && fwrite(prefix, 1, plen, f) != plen) || (blen && fwrite(body, 1, blen, f) != blen))
		die("%s: short write", path);
	if (fclose(f) != 0)
		die("%s: %s", path, strerror(errno));
}

static uint8_t *slurp(const char *path, size_t *ret_len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	size_t len = 0, cap = 0, n;

	if (f == NULL)
		die("%s: %s", path, strerror(errno));
	do {
		if (len == cap && (buf = realloc(buf, cap = cap ? 2 * cap : 65536)) == NULL)
			die("out of memory");
		n = fread(buf + len, 1, cap - len, f);
		len += n;
	} while (n > 0);
	fclose(f);
	*ret_len = len;
	return buf;
}

/* ---- the engine's files --------------------------------------------------- */

static uint64_t fixed_clock(void *arg)
{
	uint64_t *t = arg;

	return (*t)++; /* advances a millisecond per reading */
}

static void check(int rv, const char *what)
{
	if (rv != 0)
		die("%s: %s", what, kv_strerror(rv));
}

static void fill_db(kv_db *db, int round)
{
	struct kv_write_opts ttl = KV_WRITE_OPTS_INIT, cond = KV_WRITE_OPTS_INIT;
	char key[64], val[1024];
	uint64_t v;
	int i;

	memset(val, 'v', sizeof(val));
	for (i = 0; i < 40; i++) {
		int klen = snprintf(key, sizeof(key), "user:%03d", i);
		size_t vlen = (size_t)(i * 37 + round * 11) % 300; /* 0 … 299, some empty */
		check(kv_put(db, key, (size_t)klen, val, vlen, NULL, &v), "put");
	}
	ttl.ttl_ms = 30000;
	check(kv_put(db, "session:ttl", 11, "token", 5, &ttl, &v), "put ttl");
	cond.if_version = v;
	check(kv_put(db, "session:ttl", 11, "token2", 6, &cond, &v), "conditional put");
	check(kv_put(db, "big", 3, val, sizeof(val), NULL, &v), "put big");
	for (i = 0; i < 40; i += 7) {
		int klen = snprintf(key, sizeof(key), "user:%03d", i);
		check(kv_delete(db, key, (size_t)klen, NULL, &v), "delete");
	}
	{
		struct kv_op ops[3] = {
			{.type = KV_OP_PUT, .key = "batch:a", .key_len = 7, .value = "1",
			 .value_len = 1, .if_version = KV_ANY_VERSION},
			{.type = KV_OP_PUT, .key = "batch:b", .key_len = 7, .value = "22",
			 .value_len = 2, .if_version = KV_ANY_VERSION, .ttl_ms = 60000},
			{.type = KV_OP_DELETE, .key = "user:001", .key_len = 8,
			 .if_version = KV_ANY_VERSION},
		};
		check(kv_batch(db, ops, 3), "batch");
	}
	/* rewrites, so merge has something to drop */
	for (i = 0; i < 20; i++) {
		int klen = snprintf(key, sizeof(key), "user:%03d", i);
		check(kv_put(db, key, (size_t)klen, val, 20 + (size_t)i, NULL, &v), "rewrite");
	}
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && strcmp(s + n - m, suffix) == 0;
}

static off_t st_size(const char *path)
{
	struct stat st;

	if (stat(path, &st) != 0)
		die("%s: %s", path, strerror(errno));
	return st.st_size;
}

/* Copies a database's files into the corpora, with each target's prefix. */
static void harvest(const char *dir, const char *tag)
{
	struct dirent **ents;
	char path[4096], name[256];
	int n, i;

	if ((n = scandir(dir, &ents, NULL, by_name)) < 0)
		die("%s: %s", dir, strerror(errno));
	for (i = 0; i < n; i++) {
		const char *fn = ents[i]->d_name;
		uint8_t *buf;
		size_t len;

		snprintf(path, sizeof(path), "%s/%s", dir, fn);
		if (ends_with(fn, ".seg") && (st_size(path) > SEG_HEADER_SIZE)) {
			uint8_t pre[3] = {0, 0, 0};
			buf = slurp(path, &len);
			snprintf(name, sizeof(name), "%s-%s", tag, fn);
			emit("record", name, pre, 3, buf + SEG_HEADER_SIZE, len - SEG_HEADER_SIZE);
			if (strcmp(tag, "db") == 0 && strcmp(fn, "00000001.seg") == 0) {
				/* a torn tail, a damaged record in the middle, the
				 * CRC fixer on, and the read window across the body */
				uint8_t fix[3] = {1, 0, 0}, fill[3] = {0xc2, 100, 0};
				snprintf(name, sizeof(name), "%s-%s-torn", tag, fn);
				emit("record", name, pre, 3, buf + SEG_HEADER_SIZE,
				     (len - SEG_HEADER_SIZE) * 2 / 3);
				buf[SEG_HEADER_SIZE + (len - SEG_HEADER_SIZE) / 2] ^= 0x40;
				snprintf(name, sizeof(name), "%s-%s-damaged", tag, fn);
				emit("record", name, pre, 3, buf + SEG_HEADER_SIZE,
				     len - SEG_HEADER_SIZE);
				snprintf(name, sizeof(name), "%s-%s-fixcrc", tag, fn);
				emit("record", name, fix, 3, buf + SEG_HEADER_SIZE,
				     len - SEG_HEADER_SIZE);
				buf[SEG_HEADER_SIZE + (len - SEG_HEADER_SIZE) / 2] ^= 0x40;
				snprintf(name, sizeof(name), "%s-%s-window", tag, fn);
				emit("record", name, fill, 3, buf + SEG_HEADER_SIZE,
				     len - SEG_HEADER_SIZE);
			}
			free(buf);
		} else if (ends_with(fn, ".hint")) {
			/* options, stop, seg_size, max_key, seg id */
			uint8_t pre[12] = {0};
			char seg[4096];
			uint32_t id = (uint32_t)strtoul(fn, NULL, 16);
			snprintf(seg, sizeof(seg), "%s/%.8s.seg", dir, fn);
			put_le32(pre + 2, (uint32_t)st_size(seg));
			put_le32(pre + 8, id);
			buf = slurp(path, &len);
			snprintf(name, sizeof(name), "%s-%s", tag, fn);
			emit("hint", name, pre, sizeof(pre), buf, len);
			if (strcmp(tag, "db") == 0 && id == 1) {
				pre[0] = 2; /* and through hint_load */
				snprintf(name, sizeof(name), "%s-%s-load", tag, fn);
				emit("hint", name, pre, sizeof(pre), buf, len);
				pre[0] = 1; /* checksums fixed up, a byte of an entry flipped */
				buf[32 + 20] ^= 0x10;
				snprintf(name, sizeof(name), "%s-%s-fixed", tag, fn);
				emit("hint", name, pre, sizeof(pre), buf, len);
			}
			free(buf);
		} else if (ends_with(fn, ".commit")) {
			uint8_t pre[1] = {0};
			buf = slurp(path, &len);
			snprintf(name, sizeof(name), "%s-%s", tag, fn);
			emit("commit", name, pre, 1, buf, len);
			free(buf);
		} else if (strcmp(fn, "META") == 0) {
			uint8_t pre[1] = {0};
			buf = slurp(path, &len);
			snprintf(name, sizeof(name), "%s-%s", tag, fn);
			emit("manifest", name, pre, 1, buf, len);
			free(buf);
		}
		free(ents[i]);
	}
	free(ents);
}

static void rm_rf(const char *dir)
{
	struct dirent *e;
	char path[4096];
	DIR *d = opendir(dir);

	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		unlink(path);
	}
	closedir(d);
	rmdir(dir);
}

static void gen_blobs(kv_db *db)
{
	uint8_t buf[9000];
	kv_upload *u, *open;
	uint64_t ver;
	size_t i;

	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 7 + i / 100);
	check(kv_upload_open(db, "blob:a", 6, KV_BLOB_CHUNK_MIN, &u), "upload");
	check(kv_upload_write(u, buf, sizeof(buf)), "upload write");
	check(kv_upload_commit(u, NULL, &ver), "upload commit");
	kv_upload_close(u);
	check(kv_upload_open(db, "blob:gone", 9, KV_BLOB_CHUNK_MIN, &open), "upload 2");
	check(kv_upload_write(open, buf, 5000), "upload 2 write");
	check(kv_set_compression(db, KV_CODEC_ZSTD, 3), "zstd");
	memset(buf, 'z', sizeof(buf));
	check(kv_upload_open(db, "blob:z", 6, KV_BLOB_CHUNK_MIN, &u), "upload 3");
	check(kv_upload_write(u, buf, 5000), "upload 3 write");
	check(kv_upload_commit(u, NULL, &ver), "upload 3 commit");
	kv_upload_close(u);
	check(kv_set_compression(db, KV_CODEC_NONE, 0), "none");
	kv_upload_close(open);
}

static void gen_engine(void)
{
	char dir[] = "/tmp/kvd-gen-corpus.XXXXXX";
	uint64_t clock = 1764489600000ull;
	struct kv_options o;
	struct merge_commit mc;
	uint32_t retired[3] = {1, 2, 3};
	struct reloc_ent relocs[2] = {{(1ull << 32) | 64, (9ull << 32) | 64},
	                              {(2ull << 32) | 200, (9ull << 32) | 4000}};
	kv_db *db;
	struct kv_storage *stor;
	struct kv_stor_tenant *ten;
	char tdir[sizeof(dir) + 4];

	if (mkdtemp(dir) == NULL)
		die("mkdtemp: %s", strerror(errno));
	kv_options_init(&o);
	o.segment_size = 4096;
	o.background = false;
	o.io = KV_IO_PSYNC;
	o.merge_ratio_pct = 0;
	o.clock = fixed_clock;
	o.clock_arg = &clock;
	check(kv_open(dir, &o, &db), "open");
	fill_db(db, 0);
	check(kv_close(db), "close"); /* seals and writes hints */
	harvest(dir, "db");

	check(kv_open(dir, &o, &db), "reopen");
	fill_db(db, 1);
	check(kv_merge(db), "merge");
	check(kv_close(db), "close after merge");
	harvest(dir, "merged");

	rm_rf(dir);

	/* records with compressed values: lz4, then zstd, beside raw ones */
	if (mkdtemp(strcpy(dir, "/tmp/kvd-gen-corpus.XXXXXX")) == NULL)
		die("mkdtemp: %s", strerror(errno));
	o.compression = KV_CODEC_LZ4;
	check(kv_open(dir, &o, &db), "open lz4");
	fill_db(db, 0);
	check(kv_set_compression(db, KV_CODEC_ZSTD, 3), "zstd");
	fill_db(db, 1);
	check(kv_close(db), "close lz4/zstd");
	harvest(dir, "codec");
	rm_rf(dir);
	o.compression = KV_CODEC_NONE;

	/* blobs: chunks and descriptors (one compressed), and the chunks of an
	 * upload never committed */
	if (mkdtemp(strcpy(dir, "/tmp/kvd-gen-corpus.XXXXXX")) == NULL)
		die("mkdtemp: %s", strerror(errno));
	o.segment_size = 16384;
	check(kv_open(dir, &o, &db), "open blob");
	gen_blobs(db);
	check(kv_close(db), "close blob");
	harvest(dir, "blob");
	rm_rf(dir);
	o.segment_size = 4096;

	/* a commit with relocations, which only a merge racing writers makes,
	 * and an empty one */
	if (mkdtemp(strcpy(dir, "/tmp/kvd-gen-corpus.XXXXXX")) == NULL)
		die("mkdtemp: %s", strerror(errno));
	check(kv_storage_file_open(dir, NULL, &stor), "kv_storage_file_open");
	check(stor_tenant_open(stor, "t", KV_STOR_CREATE, &ten), "stor_tenant_open");
	mc.seq = 7;
	mc.retired = retired;
	mc.nretired = 3;
	mc.relocs = relocs;
	mc.nrelocs = 2;
	check(commit_write(ten, &mc), "commit_write");
	mc.seq = 8;
	mc.nretired = 0;
	mc.nrelocs = 0;
	check(commit_write(ten, &mc), "commit_write");
	stor_tenant_close(ten);
	kv_storage_close(stor);
	snprintf(tdir, sizeof(tdir), "%s/t", dir);
	harvest(tdir, "synthetic");
	rm_rf(dir);
}

/* ---- messages --------------------------------------------------------------- */

/* PROTOCOL.md: a "Request `…`:" or "Reply `…`:" line, then indented hex. */
static void gen_protocol(const char *path)
{
	FILE *f = fopen(path, "r");
	char line[1024], title[128] = "x", name[192];
	uint8_t msg[8192];
	size_t len = 0;
	const char *target = NULL;
	int seq = 0;

	if (f == NULL)
		die("%s: %s", path, strerror(errno));
	for (;;) {
		char *ok = fgets(line, sizeof(line), f);
		bool hex = ok && strncmp(line, "    ", 4) == 0 && target != NULL;
		if (hex) {
			for (char *p = line + 4; *p;) {
				unsigned v;
				int used;
				if (sscanf(p, "%2x%n", &v, &used) != 1)
					break;
				if (len == sizeof(msg))
					die("example too long");
				msg[len++] = (uint8_t)v;
				p += used;
				while (*p == ' ')
					p++;
				if (*p == '\n')
					break;
			}
			continue;
		}
		if (target != NULL && len > 0 && (ok == NULL || line[0] != '\n')) {
			snprintf(name, sizeof(name), "protocol-%s", title);
			seq++;
			emit(target, name, NULL, 0, msg, len);
			target = NULL;
			len = 0;
		}
		if (ok == NULL)
			break;
		if (strncmp(line, "### ", 4) == 0) {
			/* "Put (conditional, with TTL)" -> "put-conditional-with-ttl" */
			size_t j = 0;
			for (char *p = line + 4; *p && *p != '\n' && j < sizeof(title) - 1; p++) {
				char c = *p >= 'A' && *p <= 'Z' ? (char)(*p - 'A' + 'a') : *p;
				if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))
					title[j++] = c;
				else if (j > 0 && title[j - 1] != '-')
					title[j++] = '-';
			}
			while (j > 0 && title[j - 1] == '-')
				j--;
			title[j] = '\0';
		} else if (strncmp(line, "Request `", 9) == 0) {
			target = "request";
		} else if (strncmp(line, "Reply `", 7) == 0) {
			target = "reply";
		}
	}
	fclose(f);
	if (seq < 30)
		die("%s: only %d examples found", path, seq);
}

struct msg {
	msgpack_sbuffer sb;
	msgpack_packer pk;
};

static msgpack_packer *msg_begin(struct msg *m)
{
	msgpack_sbuffer_init(&m->sb);
	msgpack_packer_init(&m->pk, &m->sb, msgpack_sbuffer_write);
	return &m->pk;
}

static void msg_emit(struct msg *m, const char *target, const char *name)
{
	emit(target, name, NULL, 0, m->sb.data, m->sb.size);
	msgpack_sbuffer_destroy(&m->sb);
}

/* A request through libkvclient's encoders, with the fuzz server's token. */
static msgpack_packer *req_begin(struct msg *m, const char *method, bool args)
{
	struct creq_envelope e = {.id = 77, .client = 0x1234567890abcdefull, .method = method,
	                          .tenant = "orders", .timeout_ms = 5000, .token = "fuzz-token",
	                          .has_args = args};
	msgpack_packer *pk = msg_begin(m);

	creq_envelope(pk, &e);
	return pk;
}

static void gen_requests(void)
{
	static const char *const names[] = {"TenantDrop", "TenantInfo", "TenantPassivate",
	                                    "TenantActivate"};
	struct kvc_scan_opts so = {.start = "a", .start_len = 1, .end = "z", .end_len = 1,
	                           .prefix = "user:", .prefix_len = 5, .reverse = true,
	                           .keys_only = true};
	struct kvc_op ops[3] = {
		{.type = KVC_OP_PUT, .key = "a", .key_len = 1, .value = "1", .value_len = 1,
		 .if_version = KVC_ANY_VERSION, .ttl_ms = 1000},
		{.type = KVC_OP_PUT, .key = "b", .key_len = 1, .value = "", .value_len = 0,
		 .if_version = 0},
		{.type = KVC_OP_DELETE, .key = "c", .key_len = 1, .if_version = 5},
	};
	struct kvc_tenant_opts to = {.sync = KVC_SYNC_INTERVAL, .sync_interval_ms = 50,
	                             .history = 3, .ttl_ms = 1000, .max_keys = 10};
	struct msg m;
	msgpack_packer *pk;
	char name[64];

	pk = req_begin(&m, "Put", true);
	creq_put(pk, "user:1", 6, "Ada", 3, 41, 30000);
	msg_emit(&m, "request", "client-put");
	pk = req_begin(&m, "Get", true);
	creq_get(pk, "user:1", 6, 41, 50);
	msg_emit(&m, "request", "client-get");
	pk = req_begin(&m, "Delete", true);
	creq_delete(pk, "user:1", 6, 42);
	msg_emit(&m, "request", "client-delete");
	pk = req_begin(&m, "Scan", true);
	creq_scan(pk, &so, 10, 50, "\1user:3", 7);
	msg_emit(&m, "request", "client-scan");
	pk = req_begin(&m, "Versions", true);
	creq_versions(pk, "k", 1, 3, 9, false);
	msg_emit(&m, "request", "client-versions");
	pk = req_begin(&m, "Batch", true);
	creq_batch(pk, ops, 3);
	msg_emit(&m, "request", "client-batch");
	pk = req_begin(&m, "Compact", true);
	creq_compact(pk, 50);
	msg_emit(&m, "request", "client-compact");
	pk = req_begin(&m, "Stats", true);
	creq_stats(pk, true);
	msg_emit(&m, "request", "client-stats-daemon");
	pk = req_begin(&m, "Stats", true);
	creq_stats(pk, false);
	msg_emit(&m, "request", "client-stats-tenant");
	pk = req_begin(&m, "TenantCreate", true);
	creq_tenant_create(pk, "orders", &to, NULL, NULL);
	msg_emit(&m, "request", "client-tenantcreate");
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		pk = req_begin(&m, names[i], true);
		creq_name(pk, "orders");
		snprintf(name, sizeof(name), "client-%s", names[i]);
		msg_emit(&m, "request", name);
	}
	req_begin(&m, "TenantList", false);
	msg_emit(&m, "request", "client-tenantlist");
	req_begin(&m, "Health", false);
	msg_emit(&m, "request", "client-health");

	/* hostile */
	{
		static const uint8_t array_bomb[] = {0xdd, 0xff, 0xff, 0xff, 0xff};
		static const uint8_t map_bomb[] = {0xdf, 0xff, 0xff, 0xff, 0xff};
		static const uint8_t bin_bomb[] = {0x81, 0xa1, 0x76, 0xc6, 0xff, 0xff, 0xff, 0xf0};
		static const uint8_t reserved[] = {0xc1};
		uint8_t deep[16];
		memset(deep, 0x91, sizeof(deep));
		deep[sizeof(deep) - 1] = 0x00;
		emit("request", "hostile-array-bomb", NULL, 0, array_bomb, sizeof(array_bomb));
		emit("request", "hostile-map-bomb", NULL, 0, map_bomb, sizeof(map_bomb));
		emit("request", "hostile-bin-bomb", NULL, 0, bin_bomb, sizeof(bin_bomb));
		emit("request", "hostile-c1", NULL, 0, reserved, sizeof(reserved));
		emit("request", "hostile-deep", NULL, 0, deep, sizeof(deep));
	}
	/* a Batch whose ops are not maps, one over the op limit */
	pk = msg_begin(&m);
	msgpack_pack_map(pk, 4);
	mp_kv_uint(pk, "v", 1);
	mp_kv_uint(pk, "id", 9);
	mp_kv_str(pk, "method", "Batch");
	mp_pack_cstr(pk, "args");
	msgpack_pack_map(pk, 1);
	mp_pack_cstr(pk, "ops");
	msgpack_pack_array(pk, 10001);
	for (int i = 0; i < 10001; i++)
		msgpack_pack_nil(pk);
	msg_emit(&m, "request", "hostile-batch-too-many");
	/* the most ops a Batch may have, each an empty map: the op array is
	 * allocated before the ops are looked at */
	pk = msg_begin(&m);
	msgpack_pack_map(pk, 4);
	mp_kv_uint(pk, "v", 1);
	mp_kv_uint(pk, "id", 10);
	mp_kv_str(pk, "method", "Batch");
	mp_pack_cstr(pk, "args");
	msgpack_pack_map(pk, 1);
	mp_pack_cstr(pk, "ops");
	msgpack_pack_array(pk, 10000);
	for (int i = 0; i < 10000; i++)
		msgpack_pack_map(pk, 0);
	msg_emit(&m, "request", "hostile-batch-empty-ops");
	/* trailing bytes after a valid request */
	req_begin(&m, "Health", false);
	msgpack_pack_nil(&m.pk);
	msg_emit(&m, "request", "hostile-trailing");
	/* version 2, an unknown method, a bad tenant */
	pk = msg_begin(&m);
	msgpack_pack_map(pk, 3);
	mp_kv_uint(pk, "v", 2);
	mp_kv_str(pk, "method", "Frobnicate");
	mp_kv_str(pk, "tenant", "../etc");
	msg_emit(&m, "request", "hostile-v2");
}

static void reply_head(msgpack_packer *pk, uint64_t id, uint64_t status, uint32_t extra)
{
	msgpack_pack_map(pk, 3 + extra);
	mp_kv_uint(pk, "v", 1);
	mp_kv_uint(pk, "id", id);
	mp_kv_uint(pk, "status", status);
}

static void gen_replies(void)
{
	struct msg m;
	msgpack_packer *pk;
	char longmsg[600];

	/* Stats of a tenant: every field crep_tenant_info reads */
	pk = msg_begin(&m);
	reply_head(pk, 20, 0, 1);
	mp_pack_cstr(pk, "result");
	msgpack_pack_map(pk, 24);
	mp_kv_str(pk, "name", "orders");
	mp_kv_str(pk, "state", "active");
	static const char *const counters[] = {
		"idle_s", "keys", "live_bytes", "disk_bytes", "keydir_bytes", "activations",
		"last_activation_ms", "last_version", "ttl_ms", "max_keys", "dead_bytes",
		"segments", "tombstones", "merges", "compact_revision", "batches",
		"batched_writes", "syncs", "last_activation_us"};
	for (size_t i = 0; i < sizeof(counters) / sizeof(counters[0]); i++)
		mp_kv_uint(pk, counters[i], i * 1000);
	mp_kv_uint(pk, "history", 5);
	mp_kv_str(pk, "sync", "none");
	mp_kv_bool(pk, "io_uring", true);
	msg_emit(&m, "reply", "server-stats-tenant");

	/* a Versions page with a tombstone and keys_only-style nils */
	pk = msg_begin(&m);
	reply_head(pk, 21, 0, 1);
	mp_pack_cstr(pk, "result");
	msgpack_pack_map(pk, 2);
	mp_pack_cstr(pk, "versions");
	msgpack_pack_array(pk, 2);
	msgpack_pack_array(pk, 4);
	msgpack_pack_uint64(pk, 9);
	msgpack_pack_uint64(pk, 1764489600900ull);
	msgpack_pack_false(pk);
	mp_pack_bin(pk, "v3", 2);
	msgpack_pack_array(pk, 4);
	msgpack_pack_uint64(pk, 7);
	msgpack_pack_uint64(pk, 1764489600700ull);
	msgpack_pack_true(pk);
	msgpack_pack_nil(pk);
	mp_kv_bool(pk, "truncated", true);
	msg_emit(&m, "reply", "server-versions-truncated");

	/* a failed Batch condition */
	pk = msg_begin(&m);
	reply_head(pk, 22, 9, 2);
	mp_kv_str(pk, "message", "op 1: version mismatch (if_version)");
	mp_pack_cstr(pk, "result");
	msgpack_pack_map(pk, 1);
	mp_kv_uint(pk, "failed_op", 1);
	msg_emit(&m, "reply", "server-batch-failed");

	/* a keys_only Scan page */
	pk = msg_begin(&m);
	reply_head(pk, 23, 0, 1);
	mp_pack_cstr(pk, "result");
	msgpack_pack_map(pk, 4);
	mp_pack_cstr(pk, "items");
	msgpack_pack_array(pk, 1);
	msgpack_pack_array(pk, 3);
	mp_pack_bin(pk, "k", 1);
	msgpack_pack_nil(pk);
	msgpack_pack_uint64(pk, 3);
	mp_kv_uint(pk, "revision", 3);
	mp_kv_bool(pk, "more", true);
	mp_kv_bin(pk, "continuation", "\0k", 2);
	msg_emit(&m, "reply", "server-scan-keys-only");

	/* an error whose message is long, multi-byte and has control characters */
	{
		size_t n = 0;
		while (n + 2 < sizeof(longmsg) - 1) {
			longmsg[n++] = (char)0xc3; /* é */
			longmsg[n++] = (char)0xa9;
		}
		longmsg[5] = '\n';
		longmsg[9] = '\x7f';
		longmsg[n] = '\0';
	}
	pk = msg_begin(&m);
	reply_head(pk, 0, 99, 1);
	mp_kv_str(pk, "message", longmsg);
	msg_emit(&m, "reply", "hostile-long-message");

	/* result is not a map; status is a string */
	pk = msg_begin(&m);
	msgpack_pack_map(pk, 4);
	mp_kv_uint(pk, "v", 1);
	mp_kv_uint(pk, "id", 1);
	mp_kv_str(pk, "status", "0");
	mp_kv_uint(pk, "result", 1);
	msg_emit(&m, "reply", "hostile-types");
}

static void gen_config(const char *shipped)
{
	static const char all[] =
		"[kvd]\n"
		"data_dir = /srv/kvd\n"
		"listen = ipc:///run/kvd/kvd.sock\n"
		"listen = tcp://127.0.0.1:7700\n"
		"listen = tls+tcp://[::]:7701\n"
		"workers = 4\n"
		"log_level = debug\n"
		"idle_timeout = 60\n"
		"memory_budget = 1GiB\n"
		"max_message_size = 64M\n"
		"max_value_size = 16M\n"
		"contexts = 512\n"
		"auto_create = yes\n"
		"token = s3cret\n"
		"tls_cert = /etc/kvd/cert.pem\n"
		"tls_key = /etc/kvd/key.pem\n"
		"ipc_mode = 0600\n"
		"segment_size = 128M\n"
		"open_files = 1024\n"
		"max_queue = 1000\n"
		"upload_idle_ms = 5000\n"
		"\n"
		"[tenant-defaults]\n"
		"sync = interval\n"
		"sync_interval_ms = 50\n"
		"history = 3\n"
		"ttl_ms = 86400000\n"
		"max_keys = 1000000\n"
		"compression = zstd:3\n"
		"max_bytes = 1073741824\n"
		"evict = oldest\n";
	static const char bad[] =
		"; comment\n"
		"# another\n"
		"[kvd]\n"
		"workers = -1\n"
		"memory_budget = 18446744073709551615K\n"
		"unknown_key = 1\n"
		"[nosuchsection]\n"
		"x = y\n"
		"no equals sign here\n";
	static const char listen9[] =
		"listen = ipc:///a\nlisten = ipc:///b\nlisten = ipc:///c\nlisten = ipc:///d\n"
		"listen = ipc:///e\nlisten = ipc:///f\nlisten = ipc:///g\nlisten = ipc:///h\n"
		"listen = ipc:///i\n";
	uint8_t *buf;
	size_t len;

	buf = slurp(shipped, &len);
	emit("config", "shipped-kvd.conf", NULL, 0, buf, len);
	free(buf);
	emit("config", "all-settings", NULL, 0, all, sizeof(all) - 1);
	emit("config", "bad-values", NULL, 0, bad, sizeof(bad) - 1);
	emit("config", "listen-9", NULL, 0, listen9, sizeof(listen9) - 1);
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: gen_corpus OUT_DIR rpc/PROTOCOL.md systemd/kvd.conf\n");
		return 2;
	}
	out_dir = argv[1];
	if (mkdir(out_dir, 0755) != 0 && errno != EEXIST)
		die("mkdir %s: %s", out_dir, strerror(errno));
	gen_engine();
	gen_protocol(argv[2]);
	gen_requests();
	gen_replies();
	gen_config(argv[3]);
	return 0;
}
