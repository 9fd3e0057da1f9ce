/*
 * scan.c — ordered iterators over a consistent snapshot.
 *
 * An iterator reads the database as of one version (its snapshot): the
 * version committed when it opened, or the as_of it was given. It copies a
 * page of keys and key-directory entries under kd_lock shared, releases the
 * lock, and resolves each entry: the newest record when its version is at or
 * below the snapshot, otherwise the newest older version found along the
 * key's chain. The next page starts after the last key copied, so writes and
 * merges go on between pages; merge keeps, for every open iterator, the
 * version of each key that iterator needs (db->snaps).
 *
 * Threads: an iterator is used by one thread at a time; several iterators
 * may run at once.
 */
#include "db.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAGE_KEYS      128
#define PREFETCH_GAP   4096u          /* read across holes up to this size */
#define PREFETCH_SPAN  (256u * 1024u) /* one read covers at most this much */
#define PREFETCH_LINES 2u             /* cache lines of each mapped record touched ahead */

struct page_ent {
	size_t key_off;
	uint32_t key_len;
	struct kd_entry e;
	bool pf; /* the record was read with its neighbours, at pbuf + pf_off */
	size_t pf_off;
	uint32_t pf_seed; /* its segment's crc seed (record.h) */
};

struct kv_iter {
	kv_db *db;
	uint64_t snap;
	bool registered;
	uint8_t *lo; /* inclusive lower bound (start, prefix) */
	size_t lo_len;
	uint8_t *hi; /* exclusive upper bound (end, prefix successor) */
	size_t hi_len;
	bool has_lo, has_hi;
	uint8_t *prefix;
	size_t prefix_len;
	bool reverse, keys_only;
	uint64_t limit, returned;

	uint8_t *cursor; /* last key copied into a page */
	size_t cursor_len, cursor_cap;
	bool started, exhausted;

	struct page_ent *pe;
	size_t np, pi;
	size_t page_max; /* keys the page being filled may take */
	uint8_t *keys;
	size_t keys_len, keys_cap;

	struct rec_read rr; /* record behind the entry last returned */
	uint8_t *pbuf;      /* records of the page read in a few large reads */
	size_t pbuf_cap;
	uint32_t order[PAGE_KEYS];
};

static int cmp_keys(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
	int c = memcmp(a, b, al < bl ? al : bl);

	if (c != 0)
		return c;
	return al < bl ? -1 : al > bl;
}

static int dup_bytes(const void *src, size_t len, uint8_t **ret)
{
	uint8_t *p = malloc(len ? len : 1);

	if (p == NULL)
		return -ENOMEM;
	if (len)
		memcpy(p, src, len);
	*ret = p;
	return 0;
}

/* The smallest key greater than every key with this prefix; false if none
 * (the prefix is all 0xff). */
static bool prefix_successor(const uint8_t *p, size_t len, uint8_t *out, size_t *ret_len)
{
	while (len > 0 && p[len - 1] == 0xff)
		len--;
	if (len == 0)
		return false;
	memcpy(out, p, len);
	out[len - 1]++;
	*ret_len = len;
	return true;
}

static void snap_unregister(kv_db *db, uint64_t v)
{
	size_t i;

	pthread_mutex_lock(&db->mu);
	for (i = 0; i < db->nsnaps; i++) {
		if (db->snaps[i] == v) {
			db->snaps[i] = db->snaps[--db->nsnaps];
			break;
		}
	}
	pthread_mutex_unlock(&db->mu);
}

void kv_iter_close(kv_iter *it)
{
	if (it == NULL)
		return;
	if (it->registered)
		snap_unregister(it->db, it->snap);
	rec_read_release(&it->rr);
	free(it->lo);
	free(it->hi);
	free(it->prefix);
	free(it->cursor);
	free(it->pe);
	free(it->keys);
	free(it->pbuf);
	free(it);
}

uint64_t kv_iter_version(const kv_iter *it)
{
	return it->snap;
}

int kv_iter_open(kv_db *db, const struct kv_scan_opts *opts, kv_iter **ret)
{
	struct kv_scan_opts none;
	kv_iter *it;
	int rv;

	if (opts == NULL) {
		memset(&none, 0, sizeof(none));
		opts = &none;
	}
	if ((opts->start && opts->start_len > KV_KEY_SIZE_MAX) ||
	    (opts->end && opts->end_len > KV_KEY_SIZE_MAX) ||
	    (opts->prefix && opts->prefix_len > KV_KEY_SIZE_MAX))
		return KV_EKEYSIZE;
	if (opts->as_of != 0 && opts->as_of < atomic_load(&db->compact_floor))
		return KV_ECOMPACTED;
	if ((it = calloc(1, sizeof(*it))) == NULL)
		return -ENOMEM;
	it->db = db;
	it->reverse = opts->reverse;
	it->keys_only = opts->keys_only;
	it->limit = opts->limit;

	/* lower bound: the larger of start and prefix */
	if (opts->start && opts->start_len > 0) {
		if ((rv = dup_bytes(opts->start, opts->start_len, &it->lo)) != 0)
			goto fail;
		it->lo_len = opts->start_len;
		it->has_lo = true;
	}
	if (opts->prefix && opts->prefix_len > 0) {
		uint8_t *succ;
		size_t succ_len;
		if ((rv = dup_bytes(opts->prefix, opts->prefix_len, &it->prefix)) != 0)
			goto fail;
		it->prefix_len = opts->prefix_len;
		if (!it->has_lo || cmp_keys(it->prefix, it->prefix_len, it->lo, it->lo_len) > 0) {
			free(it->lo);
			if ((rv = dup_bytes(opts->prefix, opts->prefix_len, &it->lo)) != 0)
				goto fail;
			it->lo_len = opts->prefix_len;
			it->has_lo = true;
		}
		if ((succ = malloc(opts->prefix_len)) == NULL) {
			rv = -ENOMEM;
			goto fail;
		}
		if (prefix_successor(it->prefix, it->prefix_len, succ, &succ_len)) {
			it->hi = succ;
			it->hi_len = succ_len;
			it->has_hi = true;
		} else {
			free(succ);
		}
	}
	/* upper bound: the smaller of end and the prefix successor */
	if (opts->end && opts->end_len > 0 &&
	    (!it->has_hi || cmp_keys(opts->end, opts->end_len, it->hi, it->hi_len) < 0)) {
		free(it->hi);
		it->hi = NULL;
		if ((rv = dup_bytes(opts->end, opts->end_len, &it->hi)) != 0)
			goto fail;
		it->hi_len = opts->end_len;
		it->has_hi = true;
	}

	pthread_mutex_lock(&db->mu);
	it->snap = atomic_load(&db->committed_version);
	/* an as_of in the future would let later writes into the snapshot */
	if (opts->as_of && opts->as_of < it->snap)
		it->snap = opts->as_of;
	if (db->nsnaps == db->capsnaps) {
		size_t cap = db->capsnaps ? db->capsnaps * 2 : 8;
		uint64_t *nv = realloc(db->snaps, cap * sizeof(*nv));
		if (nv == NULL) {
			pthread_mutex_unlock(&db->mu);
			rv = -ENOMEM;
			goto fail;
		}
		db->snaps = nv;
		db->capsnaps = cap;
	}
	db->snaps[db->nsnaps++] = it->snap;
	it->registered = true;
	pthread_mutex_unlock(&db->mu);
	*ret = it;
	return 0;
fail:
	kv_iter_close(it);
	return rv;
}

static bool in_range(const kv_iter *it, const uint8_t *key, size_t len)
{
	if (it->has_lo && cmp_keys(key, len, it->lo, it->lo_len) < 0)
		return false;
	if (it->has_hi && cmp_keys(key, len, it->hi, it->hi_len) >= 0)
		return false;
	return true;
}

struct fill {
	kv_iter *it;
	int err;
};

static int fill_visit(void *arg, const uint8_t *key, size_t len, const struct kd_entry *e)
{
	struct fill *f = arg;
	kv_iter *it = f->it;
	struct page_ent *pe;

	if (!in_range(it, key, len)) {
		it->exhausted = true;
		return 1;
	}
	if (it->keys_len + len > it->keys_cap) {
		size_t cap = it->keys_cap ? it->keys_cap : 4096;
		uint8_t *nk;
		while (cap < it->keys_len + len)
			cap *= 2;
		if ((nk = realloc(it->keys, cap)) == NULL) {
			f->err = -ENOMEM;
			return 1;
		}
		it->keys = nk;
		it->keys_cap = cap;
	}
	memcpy(it->keys + it->keys_len, key, len);
	pe = &it->pe[it->np++];
	pe->key_off = it->keys_len;
	pe->key_len = (uint32_t)len;
	pe->e = *e;
	it->keys_len += len;
	return it->np == it->page_max ? 2 : 0;
}

static int fill_page(kv_iter *it)
{
	struct fill f = {it, 0};
	const uint8_t *from = NULL;
	size_t from_len = 0;
	bool inclusive = true;
	int rv;

	if (it->pe == NULL && (it->pe = malloc(PAGE_KEYS * sizeof(*it->pe))) == NULL)
		return -ENOMEM;
	it->np = it->pi = 0;
	it->keys_len = 0;
	/* no more keys than the limit leaves: each one may cost a read */
	it->page_max = PAGE_KEYS;
	if (it->limit && it->limit - it->returned < PAGE_KEYS)
		it->page_max = (size_t)(it->limit - it->returned);
	if (it->started) {
		from = it->cursor;
		from_len = it->cursor_len;
		inclusive = false;
	} else if (!it->reverse && it->has_lo) {
		from = it->lo;
		from_len = it->lo_len;
	} else if (it->reverse && it->has_hi) {
		from = it->hi;
		from_len = it->hi_len;
		inclusive = false;
	}
	pthread_rwlock_rdlock(&it->db->kd_lock);
	rv = keydir_walk(it->db->kd, from, from_len, inclusive, it->reverse, fill_visit, &f);
	pthread_rwlock_unlock(&it->db->kd_lock);
	if (f.err)
		return f.err;
	if (rv < 0)
		return rv;
	if (rv == 0)
		it->exhausted = true;
	if (it->np > 0) {
		struct page_ent *last = &it->pe[it->np - 1];
		if (last->key_len > it->cursor_cap) {
			uint8_t *nc = realloc(it->cursor, last->key_len);
			if (nc == NULL)
				return -ENOMEM;
			it->cursor = nc;
			it->cursor_cap = last->key_len;
		}
		memcpy(it->cursor, it->keys + last->key_off, last->key_len);
		it->cursor_len = last->key_len;
		it->started = true;
	}
	return 0;
}

static int by_location(const void *a, const void *b, void *arg)
{
	const struct page_ent *pe = arg;
	const struct kd_entry *x = &pe[*(const uint32_t *)a].e, *y = &pe[*(const uint32_t *)b].e;

	if (x->seg != y->seg)
		return x->seg < y->seg ? -1 : 1;
	return x->off < y->off ? -1 : x->off > y->off;
}

/* Marks the records order[first, last) as read into it->pbuf at buf, a copy
 * of their segment from off on. */
static void prefetch_mark(kv_iter *it, size_t first, size_t last, const uint8_t *buf, uint64_t off,
                          uint32_t seed)
{
	for (size_t k = first; k < last; k++) {
		struct page_ent *pe = &it->pe[it->order[k]];
		pe->pf = true;
		pe->pf_seed = seed;
		pe->pf_off = (size_t)(buf - it->pbuf) + (size_t)(pe->e.off - off);
	}
}

/*
 * Reads the records a page will return from their newest version with as few
 * reads as possible. Sorted by location, they are taken segment by segment
 * (one pin each). Through a segment's mapping each run of adjacent records is
 * one copy and the bytes between runs are never touched; without one,
 * neighbours less than PREFETCH_GAP apart are read together (a hole costs
 * less than a request) and all the page's reads are submitted at once (one
 * io_uring submission). After a merge, records lie in key order, so a scan
 * reads whole runs at once. Anything not read here (or that fails its check
 * later) is read on its own by resolve().
 */
static void prefetch_page(kv_iter *it, uint64_t now)
{
	kv_db *db = it->db;
	size_t n = 0, i, total = 0, nseg = 0, ng = 0, g;
	struct kv_stor_rd rd[PAGE_KEYS];
	struct seg *segs[PAGE_KEYS], *gseg[PAGE_KEYS];
	size_t gfirst[PAGE_KEYS], glast[PAGE_KEYS];

	if (it->keys_only)
		return;
	for (i = 0; i < it->np; i++) {
		const struct kd_entry *e = &it->pe[i].e;
		it->pe[i].pf = false;
		if (e->version > it->snap || (e->flags & KD_F_TOMBSTONE) ||
		    ((e->flags & KD_F_TTL) && db_expired(db, e->expiry_ms, now)) ||
		    e->size > PREFETCH_SPAN)
			continue;
		it->order[n++] = (uint32_t)i;
	}
	if (n == 0)
		return;
	if (n > 1)
		qsort_r(it->order, n, sizeof(it->order[0]), by_location, it->pe);
	/* room for the worst case: every record read separately */
	for (i = 0; i < n; i++)
		total += it->pe[it->order[i]].e.size + PREFETCH_GAP;
	if (total > it->pbuf_cap) {
		uint8_t *nb = realloc(it->pbuf, total);
		if (nb == NULL)
			return;
		it->pbuf = nb;
		it->pbuf_cap = total;
	}
	total = 0;
	for (i = 0; i < n;) {
		uint32_t sid = it->pe[it->order[i]].e.seg;
		size_t run = i, map_len;
		const uint8_t *map;
		uint64_t gap, loc;
		struct seg *s;

		while (run < n && it->pe[it->order[run]].e.seg == sid)
			run++;
		if (db_seg_acquire(db, loc_make(sid, it->pe[it->order[i]].e.off), &s, &loc) != 0) {
			i = run;
			continue;
		}
		if (loc_seg(loc) != sid) { /* merged away since the page was copied */
			db_seg_release(s);
			i = run;
			continue;
		}
		segs[nseg++] = s;
		map = seg_map(s, &map_len);
		gap = map != NULL ? 0 : PREFETCH_GAP;
		if (map != NULL) {
			/* the records lie far apart in memory: start every one's
			 * cache and TLB misses before the first copy waits on its
			 * own (a prefetch never faults) */
			for (size_t k = i; k < run; k++) {
				const struct kd_entry *e = &it->pe[it->order[k]].e;
				for (uint32_t o = 0; o < e->size && o < PREFETCH_LINES * 64u &&
				                     (uint64_t)e->off + o < map_len;
				     o += 64)
					__builtin_prefetch(map + e->off + o);
			}
		}
		while (i < run) {
			const struct kd_entry *first = &it->pe[it->order[i]].e;
			uint64_t start = first->off, end = (uint64_t)first->off + first->size;
			uint8_t *buf = it->pbuf + total;
			size_t j = i + 1;

			while (j < run) {
				const struct kd_entry *e = &it->pe[it->order[j]].e;
				if (e->off > end + gap ||
				    (uint64_t)e->off + e->size - start > PREFETCH_SPAN)
					break;
				if ((uint64_t)e->off + e->size > end)
					end = (uint64_t)e->off + e->size;
				j++;
			}
			total += (size_t)(end - start);
			if (map != NULL && end <= map_len &&
			    io_map_copy(buf, map + start, (size_t)(end - start)) == 0) {
				prefetch_mark(it, i, j, buf, start, s->crc_seed);
			} else {
				rd[ng] = (struct kv_stor_rd){s->h, buf, (size_t)(end - start),
				                             start, 0};
				gseg[ng] = s;
				gfirst[ng] = i;
				glast[ng] = j;
				ng++;
			}
			i = j;
		}
	}
	if (ng > 0)
		stor_read_batch(db->stor, rd, ng);
	for (g = 0; g < ng; g++)
		if (rd[g].res == 0)
			prefetch_mark(it, gfirst[g], glast[g], rd[g].buf, rd[g].off,
			              gseg[g]->crc_seed);
	for (g = 0; g < nseg; g++)
		db_seg_release(segs[g]);
}

/* An entry whose value is a descriptor: it says blob and its size, and
 * carries no bytes (kvengine.h "blobs"). */
static int blob_entry(struct kv_entry *ret)
{
	int rv;

	if ((rv = blob_desc_size(ret->value, ret->value_len, &ret->blob_size)) != 0)
		return rv;
	ret->blob = true;
	ret->value = NULL;
	ret->value_len = 0;
	return 0;
}

/* Resolves one page entry at the snapshot. 0 with ret filled, 1 to skip. */
static int resolve(kv_iter *it, const struct page_ent *pe, uint64_t now, struct kv_entry *ret)
{
	kv_db *db = it->db;
	const uint8_t *key = it->keys + pe->key_off;
	struct kd_entry e = pe->e;
	int rv, tries = 0;

	rec_read_release(&it->rr);
	ret->blob = false;
	ret->blob_size = 0;
again:
	if (e.version <= it->snap) {
		if (e.flags & KD_F_TOMBSTONE)
			return 1;
		if ((e.flags & KD_F_TTL) && db_expired(db, e.expiry_ms, now))
			return 1;
		if (it->keys_only) {
			ret->key = key;
			ret->key_len = pe->key_len;
			ret->value = NULL;
			ret->value_len = 0;
			ret->version = e.version;
			ret->timestamp_ms = 0;
			ret->expiry_ms = e.expiry_ms;
			return 0;
		}
		if (pe->pf && tries == 0) {
			const uint8_t *rec = it->pbuf + pe->pf_off;
			struct rec_header h;
			rec_decode_header(rec, &h);
			if (rec_check_header(&h, KV_KEY_SIZE_MAX, KV_VALUE_SIZE_MAX, e.size) == 0 &&
			    rec_size(h.key_len, h.value_len) == e.size &&
			    h.key_len == pe->key_len &&
			    memcmp(rec + REC_HEADER_SIZE, key, h.key_len) == 0 &&
			    rec_verify(rec, e.size, pe->pf_seed) == 0) {
				ret->key = key;
				ret->key_len = pe->key_len;
				ret->value = rec + REC_HEADER_SIZE + h.key_len;
				ret->value_len = h.value_len;
				if (h.type == REC_BLOB) {
					if ((rv = blob_entry(ret)) != 0)
						return rv;
				} else if (rec_codec(&h) != KV_CODEC_NONE) {
					/* the logical value lives in it->rr until the next entry */
					size_t len;
					rv = codec_decompress(rec_codec(&h), ret->value,
					                      h.value_len, KV_VALUE_SIZE_MAX,
					                      &it->rr.buf, &len);
					if (rv != 0)
						return rv;
					ret->value = it->rr.buf;
					ret->value_len = len;
				}
				ret->version = h.version;
				ret->timestamp_ms = h.timestamp_ms;
				ret->expiry_ms = h.expiry_ms;
				return 0;
			}
			/* not what the directory said: read it on its own */
		}
		rv = read_at(db, loc_make(e.seg, e.off), key, pe->key_len, true, &it->rr);
	} else {
		rv = chain_at_version(db, key, pe->key_len, &e, it->snap, !it->keys_only, &it->rr);
		if (rv == KV_ENOTFOUND)
			return 1; /* created after the snapshot */
	}
	if ((rv == -ENOENT || rv == KV_ECOMPACTED) && tries++ < 3) {
		/* merge moved the record after the page was copied: look again */
		pthread_rwlock_rdlock(&db->kd_lock);
		rv = keydir_get(db->kd, key, pe->key_len, &e);
		pthread_rwlock_unlock(&db->kd_lock);
		if (rv != 0)
			return 1;
		goto again;
	}
	if (rv == KV_ECOMPACTED || rv == -ENOENT)
		return 1; /* history before the snapshot is gone */
	if (rv != 0)
		return rv;
	if (it->rr.h.type == REC_DELETE || db_expired(db, it->rr.h.expiry_ms, now)) {
		rec_read_release(&it->rr);
		return 1;
	}
	if (!it->keys_only && it->rr.h.type == REC_BLOB) {
		ret->value = it->rr.value;
		ret->value_len = it->rr.h.value_len;
		if ((rv = blob_entry(ret)) != 0)
			return rv;
	} else if (!it->keys_only) {
		size_t len;
		if ((rv = rec_read_value(&it->rr, &len)) != 0)
			return rv;
		ret->value = it->rr.value;
		ret->value_len = len;
	} else {
		ret->value = NULL;
		ret->value_len = 0;
	}
	ret->key = key;
	ret->key_len = pe->key_len;
	ret->version = it->rr.h.version;
	ret->timestamp_ms = it->rr.h.timestamp_ms;
	ret->expiry_ms = it->rr.h.expiry_ms;
	return 0;
}

int kv_iter_next(kv_iter *it, struct kv_entry *ret)
{
	uint64_t now = db_now(it->db);
	int rv;

	if (it->limit && it->returned >= it->limit)
		return KV_EEND;
	for (;;) {
		if (it->pi == it->np) {
			if (it->exhausted)
				return KV_EEND;
			if ((rv = fill_page(it)) != 0)
				return rv;
			if (it->np == 0)
				return KV_EEND;
			prefetch_page(it, now);
		}
		rv = resolve(it, &it->pe[it->pi++], now, ret);
		if (rv == 0) {
			it->returned++;
			return 0;
		}
		if (rv < 0)
			return rv;
	}
}

/* ---- snapshots (merge keeps the versions open iterators read at) ------- */

int db_snapshots(kv_db *db, uint64_t **ret, size_t *ret_n)
{
	uint64_t *v = NULL;
	size_t n;

	pthread_mutex_lock(&db->mu);
	n = db->nsnaps;
	if (n > 0 && (v = malloc(n * sizeof(*v))) == NULL) {
		pthread_mutex_unlock(&db->mu);
		return -ENOMEM;
	}
	if (n > 0)
		memcpy(v, db->snaps, n * sizeof(*v));
	pthread_mutex_unlock(&db->mu);
	*ret = v;
	*ret_n = n;
	return 0;
}
