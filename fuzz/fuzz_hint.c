/*
 * fuzz_hint — the hint-file parser (engine/hint.c: hint_parse, hint_load)
 * against arbitrary bytes.
 *
 * Input: 12 bytes of parameters, then the hint file.
 *   byte 0, bit 0  make the file's checksums, footer and segment id match
 *                  (so mutations reach the entry checks)
 *          bit 1  also write the file to a directory and hint_load it; it
 *                  must answer exactly as hint_parse did
 *          bit 2  the visitor stops after n entries (n = byte 1)
 *          bit 3  seg_size gets 2^32 added (larger than any offset)
 *   bytes 2-5  seg_size (LE)
 *   bytes 6-7  max_key (LE; 0 = KV_KEY_SIZE_MAX)
 *   bytes 8-11 the segment id expected
 *
 * Invariants:
 *   - hint_parse returns exactly what FORMAT.md's rules, written out again
 *     here, say: 0, KV_EFORMAT or KV_ECORRUPT (or the visitor's error);
 *   - a buffer whose checksums (header CRC, entry CRC) or footer do not
 *     match is rejected before any entry is reported; so is any buffer that
 *     is rejected at all: a hint feeds all of its entries or none;
 *   - every entry reported is in bounds (offset ≥ 64, offset + size ≤
 *     seg_size, size ≥ 48 + key length, 1 ≤ key length ≤ max_key, known
 *     type, version ≥ 1 but a chunk's 0), its key lies inside the entry area of the buffer,
 *     entries come in file order and cover the area exactly, and their count
 *     is the header's; re-encoding them with hint_writer_add gives the same
 *     bytes back (when the reserved bytes are zero);
 *   - a visitor's error stops the walk and is returned as is.
 */
#include "fuzz.h"

#include "hint.h"
#include "kvengine.h"
#include "record.h"
#include "segment.h"
#include "storage.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define OPT_FIX (1u << 0)
#define OPT_LOAD (1u << 1)
#define OPT_STOP (1u << 2)
#define OPT_BIG_SEG (1u << 3)

#define PARAMS 12u
#define STOP_ERR (-ECANCELED)

struct visit {
	const uint8_t *buf;
	size_t len;
	uint64_t seg_size;
	uint32_t max_key;
	size_t n;
	long stop_after;
	const uint8_t *next; /* where the next entry must start */
	struct hint_writer w;
};

static int visit(void *arg, const struct hint_ent *e)
{
	struct visit *v = arg;

	/* put, delete, blob descriptor: a version; blob chunk: none */
	FZ_CHECK(e->type >= 1 && e->type <= 4);
	FZ_CHECK(e->key_len >= 1 && e->key_len <= v->max_key);
	FZ_CHECK(e->type == 4 ? e->version == 0 : e->version >= 1);
	FZ_CHECK(e->off >= SEG_HEADER_SIZE);
	FZ_CHECK((uint64_t)e->off + e->size <= v->seg_size);
	FZ_CHECK(e->size >= REC_HEADER_SIZE + (uint64_t)e->key_len);
	/* the key is where the entry says, inside the entry area */
	FZ_CHECK(e->key == v->next + HINT_ENTRY_SIZE);
	FZ_CHECK(e->key >= v->buf + HINT_HEADER_SIZE);
	FZ_CHECK(e->key + e->key_len <= v->buf + v->len - HINT_FOOTER_SIZE);
	FZ_CHECK(e->type == v->next[0] && e->flags == v->next[1]);
	FZ_CHECK(e->key_len == fz_le32(v->next + 4) && e->version == fz_le64(v->next + 8));
	FZ_CHECK(e->off == fz_le32(v->next + 16) && e->size == fz_le32(v->next + 20));
	FZ_CHECK(e->expiry_ms == fz_le64(v->next + 24));
	FZ_CHECK(hint_writer_add(&v->w, e) == 0);
	v->next = e->key + e->key_len;
	v->n++;
	if (v->stop_after >= 0 && (long)v->n > v->stop_after)
		return STOP_ERR;
	return 0;
}

/* FORMAT.md's rules for a hint file, without the engine's code. */
static int ref_parse(const uint8_t *b, size_t len, uint32_t seg_id, uint64_t seg_size,
                     uint32_t max_key, bool *ret_sums_ok)
{
	size_t body, off = HINT_HEADER_SIZE, end;
	uint64_t count, i;

	*ret_sums_ok = false;
	if (len < HINT_HEADER_SIZE + HINT_FOOTER_SIZE)
		return KV_ECORRUPT;
	body = len - HINT_HEADER_SIZE - HINT_FOOTER_SIZE;
	end = len - HINT_FOOTER_SIZE;
	*ret_sums_ok = memcmp(b, "KVDHINT\1", 8) == 0 && fz_crc32c(b, 28) == fz_le32(b + 28) &&
	               memcmp(b + len - 4, "HEND", 4) == 0 &&
	               fz_crc32c(b + HINT_HEADER_SIZE, body) == fz_le32(b + end);
	if (memcmp(b, "KVDHINT\1", 8) != 0 || fz_crc32c(b, 28) != fz_le32(b + 28))
		return KV_ECORRUPT;
	if (fz_le32(b + 8) != 1)
		return KV_EFORMAT;
	if (fz_le32(b + 12) != seg_id || memcmp(b + len - 4, "HEND", 4) != 0)
		return KV_ECORRUPT;
	count = fz_le64(b + 16);
	if (count > body / 32 || fz_crc32c(b + HINT_HEADER_SIZE, body) != fz_le32(b + end))
		return KV_ECORRUPT;
	for (i = 0; i < count; i++) {
		const uint8_t *e = b + off;
		uint32_t key_len, eoff, esize;
		if (end - off < 32)
			return KV_ECORRUPT;
		key_len = fz_le32(e + 4);
		eoff = fz_le32(e + 16);
		esize = fz_le32(e + 20);
		/* types 1-4; a version for all but a blob chunk (4), which has none */
		if (e[0] < 1 || e[0] > 4 || key_len == 0 || key_len > max_key ||
		    (fz_le64(e + 8) == 0) != (e[0] == 4) || end - off - 32 < key_len)
			return KV_ECORRUPT;
		if (esize < 48 + (uint64_t)key_len || eoff < 64 || (uint64_t)eoff + esize > seg_size)
			return KV_ECORRUPT;
		off += 32 + key_len;
	}
	return off == end ? 0 : KV_ECORRUPT;
}

/* The files storage backend on a scratch directory, one tenant "h". */
static char dir[64];
static struct kv_storage *stor;
static struct kv_stor_tenant *tenant;

static void dir_setup(void)
{
	const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";

	if (tenant != NULL)
		return;
	snprintf(dir, sizeof(dir), "%s/fuzz_hint.XXXXXX", base);
	FZ_CHECK(mkdtemp(dir) != NULL);
	FZ_CHECK(kv_storage_file_open(dir, NULL, &stor) == 0);
	FZ_CHECK(stor_tenant_open(stor, "h", KV_STOR_CREATE, &tenant) == 0);
}

__attribute__((destructor)) static void dir_cleanup(void)
{
	char path[96];

	if (tenant == NULL)
		return;
	stor_tenant_close(tenant);
	kv_storage_close(stor);
	snprintf(path, sizeof(path), "%s/h", dir);
	rmdir(path);
	rmdir(dir);
}

struct counter {
	size_t n;
	long stop_after;
};

static int count_visit(void *arg, const struct hint_ent *e)
{
	struct counter *c = arg;

	(void)e;
	c->n++;
	return c->stop_after >= 0 && (long)c->n > c->stop_after ? STOP_ERR : 0;
}

/* hint_load of the same bytes stored as a hint answers as hint_parse did. */
static void load_and_compare(const uint8_t *buf, size_t len, uint32_t seg_id, uint64_t seg_size,
                             uint32_t max_key, long stop_after, int want_rv, size_t want_n)
{
	struct counter c = {0, stop_after};
	int rv;

	dir_setup();
	FZ_CHECK(stor_hint_put(tenant, seg_id, buf, len) == 0);
	rv = hint_load(tenant, seg_id, seg_size, max_key, count_visit, &c);
	FZ_CHECK(rv == want_rv);
	FZ_CHECK(c.n == want_n);
	FZ_CHECK(stor_hint_remove(tenant, seg_id) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct visit v;
	uint8_t *buf;
	uint8_t opt;
	size_t len;
	uint64_t seg_size;
	uint32_t max_key, seg_id;
	bool sums_ok;
	int rv, ref;

	if (size < PARAMS)
		return 0;
	opt = data[0];
	seg_size = fz_le32(data + 2) + ((opt & OPT_BIG_SEG) ? (1ull << 32) : 0);
	max_key = data[6] | (uint32_t)data[7] << 8;
	if (max_key == 0)
		max_key = KV_KEY_SIZE_MAX;
	seg_id = fz_le32(data + 8);
	len = size - PARAMS;
	/* a copy of its own, so reading past it is caught */
	buf = malloc(len ? len : 1);
	FZ_CHECK(buf != NULL);
	memcpy(buf, data + PARAMS, len);
	if ((opt & OPT_FIX) && len >= HINT_HEADER_SIZE + HINT_FOOTER_SIZE) {
		fz_put_le32(buf + 12, seg_id);
		fz_put_le32(buf + 28, fz_crc32c(buf, 28));
		memcpy(buf + len - 4, "HEND", 4);
		fz_put_le32(buf + len - HINT_FOOTER_SIZE,
		            fz_crc32c(buf + HINT_HEADER_SIZE,
		                      len - HINT_HEADER_SIZE - HINT_FOOTER_SIZE));
	}

	memset(&v, 0, sizeof(v));
	v.buf = buf;
	v.len = len;
	v.seg_size = seg_size;
	v.max_key = max_key;
	v.stop_after = (opt & OPT_STOP) ? (long)data[1] : -1;
	v.next = buf + HINT_HEADER_SIZE;
	hint_writer_init(&v.w);

	ref = ref_parse(buf, len, seg_id, seg_size, max_key, &sums_ok);
	rv = hint_parse(buf, len, seg_id, seg_size, max_key, visit, &v);

	if (!sums_ok)
		FZ_CHECK(rv != 0 && v.n == 0);
	if (ref != 0) {
		/* rejected whole: nothing reported */
		FZ_CHECK(rv == ref);
		FZ_CHECK(v.n == 0);
	} else if (rv == STOP_ERR) {
		FZ_CHECK(v.stop_after >= 0 && (long)v.n == v.stop_after + 1);
	} else {
		FZ_CHECK(rv == 0);
		FZ_CHECK(v.n == fz_le64(buf + 16));
		FZ_CHECK(v.next == buf + len - HINT_FOOTER_SIZE);
		FZ_CHECK(v.stop_after < 0 || (long)v.n <= v.stop_after);
		/* the writer rebuilds the entry bytes (it writes reserved bytes as 0) */
		if (v.n > 0) {
			bool reserved_zero = true;
			const uint8_t *p = buf + HINT_HEADER_SIZE;
			while (p < buf + len - HINT_FOOTER_SIZE) {
				reserved_zero &= p[2] == 0 && p[3] == 0;
				p += HINT_ENTRY_SIZE + fz_le32(p + 4);
			}
			FZ_CHECK(v.w.len == len - HINT_FOOTER_SIZE);
			if (reserved_zero)
				FZ_CHECK(memcmp(v.w.buf + HINT_HEADER_SIZE, buf + HINT_HEADER_SIZE,
				                len - HINT_HEADER_SIZE - HINT_FOOTER_SIZE) == 0);
		}
	}
	if (opt & OPT_LOAD)
		load_and_compare(buf, len, seg_id, seg_size, max_key, v.stop_after, rv, v.n);
	hint_writer_release(&v.w);
	free(buf);
	return 0;
}
