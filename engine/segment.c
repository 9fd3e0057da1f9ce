/* segment.c — segment files and the record scanner. */
#include "segment.h"

#include "crc.h"
#include "endian_util.h"
#include "hint.h"
#include "io.h"
#include "kvengine.h"
#include "storage.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the open-file budget ---------------------------------------------- */

static struct {
	pthread_mutex_t mu;
	struct seg *head, *tail; /* unpinned open segments, least recently used first */
	size_t open;
	size_t budget; /* 0: not decided yet */
} fdc = {PTHREAD_MUTEX_INITIALIZER, NULL, NULL, 0, 0};

static size_t default_budget(void)
{
	struct rlimit rl;
	size_t b = 512;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		b = (size_t)rl.rlim_cur / 2;
	return b < 16 ? 16 : b;
}

static void lru_remove(struct seg *s)
{
	if (!s->in_lru)
		return;
	if (s->lru_prev)
		s->lru_prev->lru_next = s->lru_next;
	else
		fdc.head = s->lru_next;
	if (s->lru_next)
		s->lru_next->lru_prev = s->lru_prev;
	else
		fdc.tail = s->lru_prev;
	s->lru_prev = s->lru_next = NULL;
	s->in_lru = false;
}

static void lru_append(struct seg *s)
{
	s->lru_next = NULL;
	s->lru_prev = fdc.tail;
	if (fdc.tail)
		fdc.tail->lru_next = s;
	else
		fdc.head = s;
	fdc.tail = s;
	s->in_lru = true;
}

/* With fdc.mu held: the mapping goes with the descriptor. */
static void seg_unmap_locked(struct seg *s)
{
	const uint8_t *m = atomic_load_explicit(&s->map, memory_order_relaxed);

	if (m != NULL)
		s->h->t->st->ops->seg_unmap(s->h, m, s->map_len);
	atomic_store_explicit(&s->map, NULL, memory_order_relaxed);
	s->map_len = 0;
}

/* With fdc.mu held and fd open: maps the file when asked to (a failure
 * leaves reads on pread). */
static void seg_map_locked(struct seg *s)
{
	const uint8_t *p;

	if (atomic_load_explicit(&s->map, memory_order_relaxed) != NULL || s->map_hint == 0 ||
	    s->h == NULL || s->map_hint > SIZE_MAX || s->h->t->st->ops->seg_map == NULL)
		return;
	if (s->h->t->st->ops->seg_map(s->h, (size_t)s->map_hint, &p) != 0)
		return;
	s->map_len = (size_t)s->map_hint;
	/* readers that pinned before see the length once they see the map */
	atomic_store_explicit(&s->map, p, memory_order_release);
}

const uint8_t *seg_map(struct seg *s, size_t *ret_len)
{
	const uint8_t *m = atomic_load_explicit(&s->map, memory_order_acquire);

	*ret_len = m != NULL ? s->map_len : 0;
	return m;
}

/* Closes least recently used unpinned files until under the budget. */
static void fdc_trim(size_t room)
{
	if (fdc.budget == 0)
		fdc.budget = default_budget();
	while (fdc.open + room > fdc.budget && fdc.head != NULL) {
		struct seg *v = fdc.head;
		lru_remove(v);
		seg_unmap_locked(v);
		stor_seg_close(v->h);
		v->h = NULL;
		fdc.open--;
	}
}

int kv_set_open_files_budget(size_t n)
{
	pthread_mutex_lock(&fdc.mu);
	fdc.budget = n ? n : default_budget();
	fdc_trim(0);
	pthread_mutex_unlock(&fdc.mu);
	return 0;
}

size_t kv_open_files_budget(void)
{
	size_t n;

	pthread_mutex_lock(&fdc.mu);
	if (fdc.budget == 0)
		fdc.budget = default_budget();
	n = fdc.budget;
	pthread_mutex_unlock(&fdc.mu);
	return n;
}

size_t kv_open_segment_files(void)
{
	size_t n;

	pthread_mutex_lock(&fdc.mu);
	n = fdc.open;
	pthread_mutex_unlock(&fdc.mu);
	return n;
}

static void fdc_adopt(struct seg *s, struct kv_stor_seg *h)
{
	s->crc_seed = h->crc_seed; /* the same for every handle of the segment */
	pthread_mutex_lock(&fdc.mu);
	fdc_trim(1);
	s->h = h;
	s->pins = 1;
	fdc.open++;
	pthread_mutex_unlock(&fdc.mu);
}

int seg_pin(struct seg *s)
{
	if (s->lost)
		return KV_ECORRUPT;
	pthread_mutex_lock(&fdc.mu);
	if (s->h == NULL) {
		uint64_t size;
		int err;
		fdc_trim(1);
		if ((err = stor_seg_open(s->tn, s->id, &s->h, &size)) != 0) {
			pthread_mutex_unlock(&fdc.mu);
			return err;
		}
		fdc.open++;
	}
	lru_remove(s);
	s->pins++;
	seg_map_locked(s);
	pthread_mutex_unlock(&fdc.mu);
	return 0;
}

void seg_map_set(struct seg *s, uint64_t len)
{
	pthread_mutex_lock(&fdc.mu);
	/* a mapping made for another length goes once nobody reads through it */
	if (atomic_load_explicit(&s->map, memory_order_relaxed) != NULL && s->map_len != len &&
	    s->pins == 0)
		seg_unmap_locked(s);
	s->map_hint = len;
	pthread_mutex_unlock(&fdc.mu);
}

void seg_unpin(struct seg *s)
{
	pthread_mutex_lock(&fdc.mu);
	if (s->pins > 0 && --s->pins == 0 && s->h != NULL) {
		lru_append(s);
		fdc_trim(0);
	}
	pthread_mutex_unlock(&fdc.mu);
}

void seg_name(char *buf, uint32_t id, const char *ext)
{
	snprintf(buf, SEG_NAME_MAX, "%08x%s", id, ext);
}

static void seg_header_encode(uint8_t *p, uint32_t id, uint32_t flags, uint64_t base_version,
                              uint64_t now_ms)
{
	memset(p, 0, SEG_HEADER_SIZE);
	memcpy(p, SEG_MAGIC, 8);
	put_le32(p + 8, SEG_FORMAT_VERSION);
	put_le32(p + 12, flags);
	put_le32(p + 16, id);
	put_le64(p + 24, base_version);
	put_le64(p + 32, now_ms);
	put_le32(p + 60, crc32c(p, 60));
}

int seg_create(struct kv_stor_tenant *tn, uint32_t id, uint32_t flags, uint64_t base_version,
               uint64_t now_ms, unsigned stor_flags, struct seg **ret)
{
	uint8_t hdr[SEG_HEADER_SIZE];
	struct kv_stor_seg *h;
	struct seg *s;
	int rv;

	if ((s = calloc(1, sizeof(*s))) == NULL)
		return -ENOMEM;
	if ((rv = stor_seg_create(tn, id, stor_flags, &h)) != 0)
		goto fail;
	seg_header_encode(hdr, id, flags, base_version, now_ms);
	if ((rv = stor_seg_write(h, hdr, sizeof(hdr), 0)) != 0)
		goto fail_file;
	if ((rv = stor_seg_sync(h)) != 0)
		goto fail_file;
	s->id = id;
	s->flags = flags;
	s->tn = tn;
	s->size = SEG_HEADER_SIZE;
	s->base_version = base_version;
	atomic_init(&s->refs, 1);
	fdc_adopt(s, h);
	*ret = s;
	return 0;
fail_file:
	stor_seg_close(h);
	stor_seg_remove(tn, id, stor_flags);
fail:
	free(s);
	return rv;
}

int seg_open(struct kv_stor_tenant *tn, uint32_t id, struct seg **ret)
{
	uint8_t hdr[SEG_HEADER_SIZE];
	struct kv_stor_seg *h;
	uint64_t size;
	struct seg *s;
	int rv;

	if ((s = calloc(1, sizeof(*s))) == NULL)
		return -ENOMEM;
	if ((rv = stor_seg_open(tn, id, &h, &size)) != 0)
		goto fail;
	if (size < SEG_HEADER_SIZE) {
		rv = KV_ECORRUPT;
		goto fail_fd;
	}
	if ((rv = stor_seg_read(h, hdr, sizeof(hdr), 0)) != 0)
		goto fail_fd;
	if (memcmp(hdr, SEG_MAGIC, 8) != 0 || crc32c(hdr, 60) != get_le32(hdr + 60)) {
		rv = KV_ECORRUPT;
		goto fail_fd;
	}
	if (get_le32(hdr + 8) != SEG_FORMAT_VERSION || get_le32(hdr + 16) != id) {
		rv = KV_EFORMAT;
		goto fail_fd;
	}
	s->id = id;
	s->flags = get_le32(hdr + 12);
	s->base_version = get_le64(hdr + 24);
	s->tn = tn;
	s->size = size;
	atomic_init(&s->refs, 1);
	fdc_adopt(s, h);
	*ret = s;
	return 0;
fail_fd:
	stor_seg_close(h);
fail:
	free(s);
	return rv;
}

int seg_open_raw(struct kv_stor_tenant *tn, uint32_t id, struct seg **ret)
{
	struct kv_stor_seg *h;
	uint64_t size;
	struct seg *s;
	int rv;

	if ((rv = stor_seg_open(tn, id, &h, &size)) != 0)
		return rv;
	if ((s = calloc(1, sizeof(*s))) == NULL) {
		stor_seg_close(h);
		return -ENOMEM;
	}
	s->id = id;
	s->tn = tn;
	s->size = size;
	atomic_init(&s->refs, 1);
	fdc_adopt(s, h);
	*ret = s;
	return 0;
}

int seg_new_lost(struct kv_stor_tenant *tn, uint32_t id, uint64_t size, struct seg **ret)
{
	struct seg *s;

	if ((s = calloc(1, sizeof(*s))) == NULL)
		return -ENOMEM;
	s->id = id;
	s->tn = tn;
	s->lost = true;
	s->lost_size = size;
	s->sealed = true;
	s->has_hint = true; /* never scanned for one */
	atomic_init(&s->refs, 1);
	*ret = s;
	return 0;
}

void seg_ref(struct seg *s)
{
	atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
}

void seg_unref(struct seg *s)
{
	if (s == NULL)
		return;
	if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) != 1)
		return;
	pthread_mutex_lock(&fdc.mu);
	lru_remove(s);
	seg_unmap_locked(s);
	if (s->h != NULL) {
		stor_seg_close(s->h);
		fdc.open--;
	}
	pthread_mutex_unlock(&fdc.mu);
	if (s->hint_ready != NULL) {
		hint_writer_release(s->hint_ready);
		free(s->hint_ready);
	}
	free(s);
}

/* ---- scanning ---------------------------------------------------------- */

#define SCAN_WINDOW (1u << 20)

struct window {
	struct kv_stor_seg *h;
	uint64_t file_size;
	uint8_t *buf;
	size_t cap;
	uint64_t start; /* file offset of buf[0] */
	size_t len;     /* bytes valid in buf */
};

/* Makes [off, off+need) available in the window; need ≤ file_size - off. */
static int window_get(struct window *w, uint64_t off, size_t need, const uint8_t **ret)
{
	size_t want;
	int rv;

	if (off >= w->start && off + need <= w->start + w->len) {
		*ret = w->buf + (off - w->start);
		return 0;
	}
	want = need > SCAN_WINDOW ? need : SCAN_WINDOW;
	if (want > w->file_size - off)
		want = (size_t)(w->file_size - off);
	if (want > w->cap) {
		uint8_t *nb = realloc(w->buf, want);
		if (nb == NULL)
			return -ENOMEM;
		w->buf = nb;
		w->cap = want;
	}
	if ((rv = stor_seg_read(w->h, w->buf, want, off)) != 0)
		return rv;
	w->start = off;
	w->len = want;
	*ret = w->buf;
	return 0;
}

/* 0 and *ret_size when a valid record starts at off. */
static int record_at(struct window *w, uint64_t off, uint32_t max_key, uint32_t max_value,
                     struct rec_header *h, const uint8_t **ret_rec, uint64_t *ret_size)
{
	const uint8_t *p;
	uint64_t size;
	int rv;

	if (w->file_size - off < REC_HEADER_SIZE)
		return KV_ECORRUPT;
	if ((rv = window_get(w, off, REC_HEADER_SIZE, &p)) != 0)
		return rv;
	rec_decode_header(p, h);
	if ((rv = rec_check_header(h, max_key, max_value, w->file_size - off)) != 0)
		return rv;
	size = rec_size(h->key_len, h->value_len);
	if ((rv = window_get(w, off, (size_t)size, &p)) != 0)
		return rv;
	if ((rv = rec_verify(p, (size_t)size, w->h->crc_seed)) != 0)
		return rv;
	*ret_rec = p;
	*ret_size = size;
	return 0;
}

/*
 * The first offset from off on where a record may start, judged by its type
 * byte (header offset 4) alone: rec_check_header refuses every type but
 * the keyed types (rec_type_keyed) and REC_SYNC, so record_at would refuse every offset
 * skipped here. One byte loop over the window (loaded a window at a time,
 * never per offset). *ret is past file_size - REC_HEADER_SIZE when no
 * offset left has a record's type byte.
 */
static int next_candidate(struct window *w, uint64_t off, uint64_t *ret)
{
	const uint8_t *p;
	uint64_t last, n, i;
	int rv;

	if (off + REC_HEADER_SIZE > w->file_size) {
		*ret = off;
		return 0;
	}
	last = w->file_size - REC_HEADER_SIZE; /* the last offset a header fits at */
	while (off <= last) {
		if ((rv = window_get(w, off, REC_HEADER_SIZE, &p)) != 0)
			return rv;
		/* the offsets whose whole header is in the window */
		n = w->start + w->len - off - REC_HEADER_SIZE + 1;
		if (n > last - off + 1)
			n = last - off + 1;
		for (i = 0; i < n; i++) {
			uint8_t t = p[i + 4];
			if (rec_type_keyed(t) || t == REC_SYNC) {
				*ret = off + i;
				return 0;
			}
		}
		off += n;
	}
	*ret = off;
	return 0;
}

/* The header at off, when it passes its bounds (its crc is not checked). */
static bool plausible_at(struct window *w, uint64_t off, uint32_t max_key, uint32_t max_value,
                         struct seg_scan_rec *r)
{
	const uint8_t *p;

	if (w->file_size - off < REC_HEADER_SIZE || window_get(w, off, REC_HEADER_SIZE, &p) != 0)
		return false;
	rec_decode_header(p, &r->h);
	if (r->h.type == REC_SYNC ||
	    rec_check_header(&r->h, max_key, max_value, w->file_size - off) != 0)
		return false;
	r->size = rec_size(r->h.key_len, r->h.value_len);
	if (window_get(w, off, REC_HEADER_SIZE + r->h.key_len, &p) != 0)
		return false;
	r->key = p + REC_HEADER_SIZE;
	r->value = NULL;
	r->off = off;
	return true;
}

/* The mark a valid sync mark record at p (of a record at off) gives. */
static uint64_t mark_of(const uint8_t *p, uint64_t off)
{
	uint64_t m = get_le64(p + REC_HEADER_SIZE);

	return m <= off ? m : 0; /* it cannot speak for bytes after itself */
}

/* The highest sync mark from off to the end of the file, skipping damage. */
static int marks_after(struct window *w, uint64_t off, uint32_t max_key, uint32_t max_value,
                       uint64_t *ret)
{
	uint64_t best = 0;
	struct rec_header h;
	const uint8_t *p;
	uint64_t size;
	int rv;

	for (;;) {
		if ((rv = next_candidate(w, off, &off)) != 0)
			return rv;
		if (off + REC_HEADER_SIZE > w->file_size)
			break;
		rv = record_at(w, off, max_key, max_value, &h, &p, &size);
		if (rv == KV_ECORRUPT) {
			off++;
			continue;
		}
		if (rv != 0)
			return rv;
		if (h.type == REC_SYNC && mark_of(p, off) > best)
			best = mark_of(p, off);
		off += size;
	}
	*ret = best;
	return 0;
}

int seg_scan(struct kv_stor_seg *h, uint64_t file_size, uint32_t max_key, uint32_t max_value,
             unsigned flags, seg_scan_fn cb, seg_damage_fn damage, void *arg,
             struct seg_scan_result *ret)
{
	struct window w = {.h = h, .file_size = file_size};
	struct seg_scan_result res = {.valid_end = SEG_HEADER_SIZE};
	struct seg_scan_rec r;
	uint64_t off = SEG_HEADER_SIZE;
	int rv = 0;

	while (off < file_size) {
		const uint8_t *p;
		uint64_t size;

		rv = record_at(&w, off, max_key, max_value, &r.h, &p, &size);
		if (rv == KV_ECORRUPT) {
			/* Look for the next record that checks out. */
			uint64_t q;
			for (q = off + 1;; q++) {
				if ((rv = next_candidate(&w, q, &q)) != 0)
					goto out;
				if (q + REC_HEADER_SIZE > file_size)
					break;
				rv = record_at(&w, q, max_key, max_value, &r.h, &p, &size);
				if (rv == 0)
					break;
				if (rv != KV_ECORRUPT)
					goto out;
			}
			if (q + REC_HEADER_SIZE > file_size) {
				rv = 0;
				break; /* nothing valid after: torn tail */
			}
			if (flags & SEG_SCAN_ACTIVE) {
				uint64_t later;
				if ((rv = marks_after(&w, q, max_key, max_value, &later)) != 0)
					goto out;
				if (off >= res.sync_mark && off >= later) {
					/* past every durable point: an unsynced hole */
					res.unsynced_cut = file_size - off;
					rv = 0;
					break;
				}
				if ((rv = record_at(&w, q, max_key, max_value, &r.h, &p, &size)) != 0)
					goto out;
			}
			res.corrupt_records++;
			res.corrupt_bytes += q - off;
			if (res.first_corrupt_off == 0)
				res.first_corrupt_off = off;
			if (damage != NULL) {
				struct seg_scan_rec d;
				bool ok = plausible_at(&w, off, max_key, max_value, &d) &&
				          off + d.size <= q;
				if ((rv = damage(arg, off, q - off, ok ? &d : NULL)) != 0)
					goto out;
				/* the window may have moved: read the good record again */
				if ((rv = record_at(&w, q, max_key, max_value, &r.h, &p, &size)) !=
				    0)
					goto out;
			}
			off = q;
		} else if (rv != 0) {
			goto out;
		}
		if (r.h.type == REC_SYNC) {
			if (mark_of(p, off) > res.sync_mark)
				res.sync_mark = mark_of(p, off);
		} else {
			r.key = p + REC_HEADER_SIZE;
			r.value = r.key + r.h.key_len;
			r.off = off;
			r.size = size;
			if ((rv = cb(arg, &r)) != 0)
				goto out;
			res.records++;
		}
		off += size;
		res.valid_end = off;
	}
	rv = 0;
out:
	free(w.buf);
	if (rv == 0)
		*ret = res;
	return rv;
}
