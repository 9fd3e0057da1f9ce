/*
 * fuzz_record — log records and the segment scanner (engine/record.c,
 * engine/segment.c: seg_scan) against arbitrary bytes.
 *
 * Input: 3 bytes of options, then the body.
 *   byte 0, bit 0  fix the CRC of every record whose header checks out (so
 *                  mutations get past the checksum and reach the scanner's
 *                  resynchronisation and bounds logic)
 *          bits 1, 6 and 7 (all three, as this is slow: a megabyte
 *                  through the segment file per run) put a valid ~1 MiB record
 *                  before the body, so the body straddles the scanner's
 *                  1 MiB read window; bytes 1-2 say how far into the body
 *                  the window ends
 *          bit 2  fail the n-th read with -EIO (n = byte 1)
 *          bit 3  small limits (max_key = byte 1 + 1, max_value = byte 2)
 *          bit 4  the callback of the (n+1)-th record or damage stops the
 *                  scan (n = byte 1)
 *          bit 5  no damage callback
 * The record functions run on the body itself; seg_scan runs over a
 * temporary segment file of the files storage backend (engine/storage.h)
 * holding a valid 64-byte segment header, the optional filler record and
 * the body.
 *
 * Invariants:
 *   - a record whose value is compressed (flags bits 4-7) decompresses to
 *     exactly its announced logical length or is KV_ECORRUPT (codec.h).
 *   - rec_check_header accepts exactly the headers FORMAT.md allows, and
 *     never a record larger than the bytes available; rec_verify matches an
 *     independent CRC32C; a verified record with zero reserved bytes
 *     re-encodes (rec_encode) to the same bytes; rec_crc2 agrees.
 *   - seg_scan reports records in order, without overlap, inside the file,
 *     each passing rec_check_header and rec_verify on the file's bytes, with
 *     key and value equal to those bytes; each damaged region between them
 *     goes to the damage callback (off, len), with the damaged record's
 *     header and key exactly when that header passes its bounds and fits in
 *     the region; the sequence of records and damages, valid_end and the
 *     corrupt counters equal those of a plain reference scan of the same
 *     bytes; an error (injected read failure, a callback's) comes back as is
 *     and leaves *ret untouched.
 */
#include "fuzz.h"

#include "codec.h"
#include "io.h"
#include "kvengine.h"
#include "record.h"
#include "segment.h"
#include "storage.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define OPT_FIX_CRC (1u << 0)
#define OPT_FILLER (1u << 1 | 1u << 6 | 1u << 7)
#define OPT_READ_FAULT (1u << 2)
#define OPT_SMALL_LIMITS (1u << 3)
#define OPT_STOP (1u << 4)
#define OPT_NO_DAMAGE (1u << 5)

#define WINDOW (1u << 20) /* segment.c: SCAN_WINDOW */
#define STOP_ERR (-ECANCELED)

static struct kv_io_fault fault; /* under the storage: a read fault per input */
static struct kv_storage *stor;
static char stor_dir[64];
static struct kv_stor_tenant *tenant;
static struct kv_stor_seg *seg; /* a temporary segment file */
static uint8_t *file;           /* what seg holds */
static size_t file_cap;
static uint64_t filler_size; /* the filler record in file and seg; 0: none */

/* What the scanner reported, in order. */
struct event {
	uint64_t off;
	uint64_t len;   /* damage: the region; record: its size */
	bool damage;
	bool plausible; /* damage: a header was passed */
};

struct scan_state {
	const uint8_t *file;
	uint64_t size;
	uint32_t max_key, max_value;
	uint64_t filler_end; /* 0: no filler */
	uint64_t prev_end;
	size_t n, cap;
	struct event *ev;
	long stop_after; /* -1: never */
};

/* Independent judgement of "a plausible header starts at off": FORMAT.md's
 * rules, written out again. */
static bool ref_header_ok(const uint8_t *f, uint64_t size, uint64_t off, uint32_t max_key,
                          uint32_t max_value, uint64_t *ret_size)
{
	uint32_t key_len, value_len;
	uint8_t type;
	uint64_t rs;

	if (size - off < REC_HEADER_SIZE)
		return false;
	type = f[off + 4];
	key_len = fz_le32(f + off + 8);
	value_len = fz_le32(f + off + 12);
	if (type == REC_SYNC) {
		/* a sync mark: no key, 8 bytes of value, version 0, no flags */
		if (key_len != 0 || value_len != 8 || fz_le64(f + off + 16) != 0 || f[off + 5] != 0 ||
		    REC_SYNC_SIZE > size - off)
			return false;
		*ret_size = REC_SYNC_SIZE;
		return true;
	}
	/* 1 put, 2 delete, 3 blob descriptor, 4 blob chunk */
	if (type < 1 || type > 4)
		return false;
	if (key_len == 0 || key_len > max_key || value_len > max_value)
		return false;
	if (type == REC_DELETE && value_len != 0)
		return false;
	/* value codec: 0 raw, 1 lz4, 2 zstd; a delete and a descriptor have none */
	if ((f[off + 5] >> 4) > 2 ||
	    ((type == REC_DELETE || type == 3) && (f[off + 5] >> 4) != 0))
		return false;
	/* a descriptor holds at least its 32-byte head */
	if (type == 3 && value_len < 32)
		return false;
	if (type == 4) {
		/* a chunk: bytes, no version, no expiry, no previous version */
		if (value_len == 0 || fz_le64(f + off + 16) != 0 || fz_le64(f + off + 32) != 0 ||
		    fz_le32(f + off + 40) != 0 || fz_le32(f + off + 44) != 0)
			return false;
	} else if (fz_le64(f + off + 16) == 0) {
		return false;
	}
	rs = (uint64_t)REC_HEADER_SIZE + key_len + value_len;
	if (rs > size - off)
		return false;
	*ret_size = rs;
	return true;
}

/* ... and "a valid record starts at off": a plausible header and its CRC. */
static bool ref_valid(const uint8_t *f, uint64_t size, uint64_t off, uint32_t max_key,
                      uint32_t max_value, uint64_t filler_end, uint64_t *ret_size)
{
	uint64_t rs;

	if (!ref_header_ok(f, size, off, max_key, max_value, &rs))
		return false;
	/* the filler was built valid; spare the slow CRC a megabyte */
	if (!(filler_end != 0 && off == SEG_HEADER_SIZE) &&
	    fz_crc32c(f + off + 4, rs - 4) != fz_le32(f + off))
		return false;
	*ret_size = rs;
	return true;
}

static bool header_equal(const struct rec_header *x, const struct rec_header *y)
{
	return x->crc == y->crc && x->type == y->type && x->flags == y->flags &&
	       x->key_len == y->key_len && x->value_len == y->value_len &&
	       x->version == y->version && x->timestamp_ms == y->timestamp_ms &&
	       x->expiry_ms == y->expiry_ms && x->prev_seg == y->prev_seg &&
	       x->prev_off == y->prev_off;
}

/* Past the valid sync marks that start at off (the scan passes none on). */
static uint64_t past_marks(const struct scan_state *st, uint64_t off)
{
	uint64_t rs;

	while (off + REC_HEADER_SIZE <= st->size && st->file[off + 4] == REC_SYNC &&
	       ref_valid(st->file, st->size, off, st->max_key, st->max_value, 0, &rs))
		off += rs;
	return off;
}

static int add_event(struct scan_state *st, struct event e)
{
	if (st->n == st->cap) {
		st->cap = st->cap ? 2 * st->cap : 64;
		fz_alloc_pause();
		st->ev = realloc(st->ev, st->cap * sizeof(*st->ev));
		fz_alloc_resume();
		FZ_CHECK(st->ev != NULL);
	}
	st->ev[st->n++] = e;
	return st->stop_after >= 0 && (long)st->n > st->stop_after ? STOP_ERR : 0;
}

static int scan_cb(void *arg, const struct seg_scan_rec *r)
{
	struct scan_state *st = arg;
	struct rec_header h;
	uint64_t rs = 0;

	FZ_CHECK(r->off >= SEG_HEADER_SIZE);
	FZ_CHECK(r->off >= st->prev_end); /* damage goes unreported with OPT_NO_DAMAGE */
	FZ_CHECK(r->size == rec_size(r->h.key_len, r->h.value_len));
	FZ_CHECK(r->off + r->size <= st->size);
	FZ_CHECK(rec_check_header(&r->h, st->max_key, st->max_value, st->size - r->off) == 0);
	/* the header, key and value it reports are the file's bytes */
	rec_decode_header(st->file + r->off, &h);
	FZ_CHECK(header_equal(&h, &r->h));
	FZ_CHECK(memcmp(r->key, st->file + r->off + REC_HEADER_SIZE, r->h.key_len) == 0);
	FZ_CHECK(r->value == r->key + r->h.key_len);
	FZ_CHECK(memcmp(r->value, st->file + r->off + REC_HEADER_SIZE + r->h.key_len,
	                r->h.value_len) == 0);
	FZ_CHECK(ref_valid(st->file, st->size, r->off, st->max_key, st->max_value, st->filler_end,
	                   &rs) &&
	         rs == r->size);
	st->prev_end = r->off + r->size;
	return add_event(st, (struct event){r->off, r->size, false, false});
}

static int damage_cb(void *arg, uint64_t off, uint64_t len, const struct seg_scan_rec *d)
{
	struct scan_state *st = arg;

	/* right after the last record (or another damage, or sync marks),
	 * inside the file */
	FZ_CHECK(off == past_marks(st, st->prev_end));
	FZ_CHECK(len >= 1 && off + len + REC_HEADER_SIZE <= st->size);
	if (d != NULL) {
		struct rec_header h;
		FZ_CHECK(d->off == off);
		FZ_CHECK(d->size == rec_size(d->h.key_len, d->h.value_len) && d->size <= len);
		FZ_CHECK(rec_check_header(&d->h, st->max_key, st->max_value, st->size - off) == 0);
		rec_decode_header(st->file + off, &h);
		FZ_CHECK(header_equal(&h, &d->h));
		FZ_CHECK(memcmp(d->key, st->file + off + REC_HEADER_SIZE, d->h.key_len) == 0);
		FZ_CHECK(d->value == NULL);
	}
	st->prev_end = off + len;
	return add_event(st, (struct event){off, len, true, d != NULL});
}

struct read_fault {
	unsigned reads, fail_at;
};

static int on_read(void *arg, int fd, uint64_t off, size_t len)
{
	struct read_fault *rf = arg;

	(void)fd;
	(void)off;
	(void)len;
	return rf->reads++ == rf->fail_at ? -EIO : 0;
}

/* Removes the scratch segment, tenant and directory. */
__attribute__((destructor)) static void close_segment(void)
{
	char path[96];

	if (seg == NULL)
		return;
	stor_seg_close(seg);
	stor_seg_remove(tenant, 1, KV_STOR_SEG_TEMP);
	stor_tenant_close(tenant);
	kv_storage_close(stor);
	snprintf(path, sizeof(path), "%s/f", stor_dir);
	rmdir(path);
	rmdir(stor_dir);
}

/* The files backend on a scratch directory, with the fault layer under it,
 * and one temporary segment file that every input is written into. */
static void open_segment(void)
{
	const char *tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";

	snprintf(stor_dir, sizeof(stor_dir), "%s/fuzz_record-XXXXXX", tmp);
	FZ_CHECK(mkdtemp(stor_dir) != NULL);
	FZ_CHECK(kv_storage_file_open(stor_dir, &fault, &stor) == 0);
	FZ_CHECK(stor_tenant_open(stor, "f", KV_STOR_CREATE, &tenant) == 0);
	FZ_CHECK(stor_seg_create(tenant, 1, KV_STOR_SEG_TEMP, &seg) == 0);
}

static void check_records(const uint8_t *body, size_t len)
{
	struct rec_header h;
	uint64_t rs;
	int rv;

	if (len < REC_HEADER_SIZE)
		return;
	rec_decode_header(body, &h);
	FZ_CHECK(h.crc == fz_le32(body) && h.type == body[4] && h.flags == body[5]);
	FZ_CHECK(h.key_len == fz_le32(body + 8) && h.value_len == fz_le32(body + 12));
	FZ_CHECK(h.version == fz_le64(body + 16) && h.timestamp_ms == fz_le64(body + 24));
	FZ_CHECK(h.expiry_ms == fz_le64(body + 32) && h.prev_seg == fz_le32(body + 40) &&
	         h.prev_off == fz_le32(body + 44));
	rv = rec_check_header(&h, KV_KEY_SIZE_MAX, KV_VALUE_SIZE_MAX, len);
	FZ_CHECK(rv == 0 || rv == KV_ECORRUPT);
	FZ_CHECK((rv == 0) == ref_header_ok(body, len, 0, KV_KEY_SIZE_MAX, KV_VALUE_SIZE_MAX, &rs));
	/* and with small limits */
	FZ_CHECK((rec_check_header(&h, body[0] + 1u, body[1], len) == 0) ==
	         ref_header_ok(body, len, 0, body[0] + 1u, body[1], &rs));
	/* a tighter bound on what is available never accepts more */
	if (rec_check_header(&h, KV_KEY_SIZE_MAX, KV_VALUE_SIZE_MAX, len / 2) == 0)
		FZ_CHECK(rv == 0 && rec_size(h.key_len, h.value_len) <= len / 2);
	/* rec_verify over every length the body offers agrees with our CRC */
	for (size_t n = 0; n <= len && n < 4 * REC_HEADER_SIZE; n += 7)
		FZ_CHECK((rec_verify(body, n, 0) == 0) ==
		         (n >= REC_HEADER_SIZE && fz_crc32c(body + 4, n - 4) == fz_le32(body)));
	if (rv != 0)
		return;
	rs = rec_size(h.key_len, h.value_len);
	FZ_CHECK(rs <= len);
	FZ_CHECK(rec_crc2(body, REC_HEADER_SIZE + h.key_len, body + REC_HEADER_SIZE + h.key_len,
	                  h.value_len) == fz_crc32c(body + 4, rs - 4));
	FZ_CHECK((rec_verify(body, rs, 0) == 0) == (fz_crc32c(body + 4, rs - 4) == h.crc));
	if (rec_verify(body, rs, 0) == 0 && body[6] == 0 && body[7] == 0) {
		uint8_t *out = malloc(rs);
		FZ_CHECK(out != NULL);
		rec_encode(out, &h, body + REC_HEADER_SIZE, body + REC_HEADER_SIZE + h.key_len, 0);
		FZ_CHECK(memcmp(out, body, rs) == 0);
		free(out);
	}
	if (rec_codec(&h) != KV_CODEC_NONE) {
		/* a compressed value decodes to exactly the length it announces,
		 * or is damaged; never anything else */
		const uint8_t *v = body + REC_HEADER_SIZE + h.key_len;
		uint8_t *out = NULL;
		size_t n = 0;
		rv = codec_decompress(rec_codec(&h), v, h.value_len, 1u << 20, &out, &n);
		FZ_CHECK(rv == 0 || rv == KV_ECORRUPT);
		if (rv == 0)
			FZ_CHECK(h.value_len >= CODEC_PREFIX && n == fz_le32(v) && n > h.value_len);
		free(out);
	}
}

static void file_reserve(size_t n)
{
	if (n <= file_cap)
		return;
	file = realloc(file, n);
	FZ_CHECK(file != NULL);
	file_cap = n;
}

static void seg_header(uint8_t *p)
{
	memset(p, 0, SEG_HEADER_SIZE);
	memcpy(p, SEG_MAGIC, 8);
	fz_put_le32(p + 8, SEG_FORMAT_VERSION);
	fz_put_le32(p + 16, 1);
	fz_put_le64(p + 24, 1000);
	fz_put_le64(p + 32, 1764489600000ull);
	fz_put_le32(p + 60, fz_crc32c(p, 60));
}

/* Recomputes the CRC of each record whose header checks out, in file order. */
static void fix_crcs(uint8_t *p, uint64_t size, uint64_t from, uint32_t max_key,
                     uint32_t max_value)
{
	uint64_t off = from;

	while (off + REC_HEADER_SIZE <= size) {
		struct rec_header h;
		rec_decode_header(p + off, &h);
		if (rec_check_header(&h, max_key, max_value, size - off) == 0) {
			uint64_t rs = rec_size(h.key_len, h.value_len);
			fz_put_le32(p + off, fz_crc32c(p + off + 4, rs - 4));
			off += rs;
		} else {
			off++;
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct scan_state st = {0};
	struct seg_scan_result res, canary;
	struct read_fault rf = {0, 0};
	const uint8_t *body;
	uint64_t fsize, pos, off, prev, gaps = 0, gap_bytes = 0, first_gap = 0, records = 0;
	uint32_t max_key = KV_KEY_SIZE_MAX, max_value = KV_VALUE_SIZE_MAX;
	size_t blen, i_ev = 0;
	uint8_t opt, a, b;
	bool filler;
	int rv;

	if (size < 3)
		return 0;
	opt = data[0];
	a = data[1];
	b = data[2];
	body = data + 3;
	blen = size - 3;

	check_records(body, blen);

	filler = (opt & OPT_FILLER) == OPT_FILLER;
	if ((opt & OPT_SMALL_LIMITS) && !filler) {
		max_key = (uint32_t)a + 1;
		max_value = b;
	}

	/* the file: header, optional filler record, body. The filler is built
	 * (and written to seg) only when its size changes. */
	if (seg == NULL)
		open_segment();
	pos = SEG_HEADER_SIZE;
	if (filler) {
		uint32_t d = (uint32_t)a | (uint32_t)b << 8; /* body bytes before the window ends */
		uint64_t fill = WINDOW - d;                   /* filler record size */
		file_reserve(SEG_HEADER_SIZE + fill + blen);
		if (fill != filler_size) {
			struct rec_header h = {.type = REC_PUT, .key_len = 1,
			                       .value_len = (uint32_t)(fill - REC_HEADER_SIZE - 1),
			                       .version = 1, .timestamp_ms = 1764489600000ull};
			memset(file + SEG_HEADER_SIZE, 0, fill);
			file[SEG_HEADER_SIZE + REC_HEADER_SIZE] = 'f';
			rec_encode(file + SEG_HEADER_SIZE, &h, file + SEG_HEADER_SIZE + REC_HEADER_SIZE,
			           file + SEG_HEADER_SIZE + REC_HEADER_SIZE + 1, 0);
			FZ_CHECK(stor_seg_write(seg, file + SEG_HEADER_SIZE, fill, SEG_HEADER_SIZE) == 0);
			filler_size = fill;
		}
		pos += fill;
		st.filler_end = pos;
	} else {
		file_reserve(SEG_HEADER_SIZE + blen);
		filler_size = 0; /* the body overwrites it */
	}
	seg_header(file);
	if (blen)
		memcpy(file + pos, body, blen);
	fsize = pos + blen;
	if (opt & OPT_FIX_CRC)
		fix_crcs(file, fsize, pos, max_key, max_value);
	FZ_CHECK(stor_seg_write(seg, file, SEG_HEADER_SIZE, 0) == 0);
	FZ_CHECK(blen == 0 || stor_seg_write(seg, file + pos, blen, pos) == 0);
	FZ_CHECK(stor_seg_truncate(seg, fsize) == 0);

	st.file = file;
	st.size = fsize;
	st.max_key = max_key;
	st.max_value = max_value;
	st.prev_end = SEG_HEADER_SIZE;
	st.stop_after = (opt & OPT_STOP) ? (long)a : -1;
	if (opt & OPT_READ_FAULT) {
		rf.fail_at = a;
		fault.on_read = on_read;
		fault.arg = &rf;
	}
	memset(&res, 0x5a, sizeof(res));
	canary = res;
	rv = seg_scan(seg, fsize, max_key, max_value, 0, scan_cb,
	              (opt & OPT_NO_DAMAGE) ? NULL : damage_cb, &st, &res);
	fault.on_read = NULL;
	if (rv != 0) {
		/* an error passes through as is, and *ret is untouched */
		FZ_CHECK(memcmp(&res, &canary, sizeof(res)) == 0);
		FZ_CHECK((rv == -EIO && (opt & OPT_READ_FAULT) && rf.reads > rf.fail_at) ||
		         (rv == STOP_ERR && st.stop_after >= 0 && (long)st.n == st.stop_after + 1));
		free(st.ev);
		return 0;
	}
	FZ_CHECK(!(opt & OPT_READ_FAULT) || rf.reads <= rf.fail_at);
	FZ_CHECK(st.stop_after < 0 || (long)st.n <= st.stop_after);
	FZ_CHECK(res.valid_end <= fsize);
	if (st.filler_end)
		FZ_CHECK(st.n >= 1 && !st.ev[0].damage && st.ev[0].off == SEG_HEADER_SIZE);

	/* the reference scan: the same records and damages, in the same order */
	off = SEG_HEADER_SIZE;
	prev = SEG_HEADER_SIZE; /* end of the last record */
	while (off < fsize) {
		uint64_t rs = 0, q;
		if (!ref_valid(file, fsize, off, max_key, max_value, st.filler_end, &rs)) {
			uint64_t drs = 0;
			for (q = off + 1; q + REC_HEADER_SIZE <= fsize; q++)
				if (ref_valid(file, fsize, q, max_key, max_value, st.filler_end, &rs))
					break;
			if (q + REC_HEADER_SIZE > fsize)
				break; /* torn tail: not damage */
			gaps++;
			gap_bytes += q - off;
			if (first_gap == 0)
				first_gap = off;
			if (!(opt & OPT_NO_DAMAGE)) {
				/* a damaged sync mark is never offered as a record */
				bool plausible =
				        ref_header_ok(file, fsize, off, max_key, max_value, &drs) &&
				        file[off + 4] != REC_SYNC && off + drs <= q;
				FZ_CHECK(i_ev < st.n);
				FZ_CHECK(st.ev[i_ev].damage && st.ev[i_ev].off == off &&
				         st.ev[i_ev].len == q - off && st.ev[i_ev].plausible == plausible);
				i_ev++;
			}
			off = q;
		}
		if (file[off + 4] != REC_SYNC) {
			/* a sync mark is valid data, but not a record for the callback */
			FZ_CHECK(i_ev < st.n);
			FZ_CHECK(!st.ev[i_ev].damage && st.ev[i_ev].off == off &&
			         st.ev[i_ev].len == rs);
			i_ev++;
			records++;
		}
		off += rs;
		prev = off;
	}
	FZ_CHECK(i_ev == st.n);
	FZ_CHECK(res.records == records);
	FZ_CHECK(res.valid_end == prev);
	FZ_CHECK(res.corrupt_records == gaps);
	FZ_CHECK(res.corrupt_bytes == gap_bytes);
	FZ_CHECK(res.first_corrupt_off == first_gap);
	free(st.ev);
	return 0;
}
