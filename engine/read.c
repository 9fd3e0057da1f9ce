/*
 * read.c — point reads and version chains.
 *
 * A read looks the key up in the key directory and reads the record at the
 * location found: a copy through the segment's mapping (iomap.c) when it
 * has one, else one read through the storage interface (storage.h
 * read_batch: with files, the calling thread's io_uring ring, or pread
 * when io_uring is not available). Only bytes whose crc
 * matched are returned, a compressed value decompressed (rec_read_value; one
 * that does not decompress is KV_ECORRUPT). Older versions are reached by
 * following each record's previous-location field; a location in a segment
 * merge retired is looked up in the relocation map, and one with no
 * relocation means merge dropped the older versions.
 *
 * Threads: any; the key directory is read under kd_lock shared and the
 * segment reference is taken before that lock is released.
 */
#include "db.h"

#include "blob.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void rec_read_release(struct rec_read *r)
{
	if (r == NULL)
		return;
	free(r->buf);
	r->buf = NULL;
}

int rec_read_value(struct rec_read *r, size_t *ret_len)
{
	uint8_t *buf;
	size_t len;
	int rv;

	if (rec_codec(&r->h) == KV_CODEC_NONE) {
		*ret_len = r->h.value_len;
		return 0;
	}
	rv = codec_decompress(rec_codec(&r->h), r->value, r->h.value_len, KV_VALUE_SIZE_MAX, &buf,
	                      &len);
	if (rv != 0)
		return rv;
	free(r->buf);
	r->buf = buf;
	r->value = buf;
	*ret_len = len;
	return 0;
}

/* One read of a pinned segment, through the storage's reads. */
static int seg_read_one(kv_db *db, struct seg *s, void *buf, size_t len, uint64_t off)
{
	struct kv_stor_rd r = {s->h, buf, len, off, 0};

	return stor_read_batch(db->stor, &r, 1);
}

/* Reads len bytes at off of the pinned segment s: from its mapping when
 * that can give them, else one read. */
static int seg_read_bytes(kv_db *db, struct seg *s, void *buf, size_t len, uint64_t off)
{
	size_t map_len;
	const uint8_t *map = seg_map(s, &map_len);

	if (map != NULL && off + len <= map_len && io_map_copy(buf, map + off, len) == 0)
		return 0;
	return seg_read_one(db, s, buf, len, off);
}

/* Reads and checks the record at loc in segment s. size_hint: its size
 * when known (exact), or a guess (a key's older versions are usually the
 * size of its newer ones: one read instead of two when it is right), or 0. */
static int read_in_seg(kv_db *db, struct seg *s, uint64_t loc, uint32_t size_hint, bool exact,
                       const void *key, size_t key_len, bool want_value, struct rec_read *ret)
{
	uint64_t off = loc_off(loc), avail = UINT64_MAX;
	size_t first = size_hint ? size_hint : REC_HEADER_SIZE + key_len, got, map_len;
	const uint8_t *map;
	uint8_t *buf;
	int rv;

	/* a location past the end of the file reads short: KV_ECORRUPT below */
	if (off < SEG_HEADER_SIZE)
		return KV_ECORRUPT;
	if (!want_value || first < REC_HEADER_SIZE + key_len)
		first = REC_HEADER_SIZE + key_len;
	if ((buf = malloc(first)) == NULL)
		return -ENOMEM;
	map = seg_map(s, &map_len);
	if (!exact && map != NULL && off < map_len && first > map_len - off)
		first = map_len - off; /* a guess stops where the mapping does */
	if (map != NULL && off + first <= map_len && io_map_copy(buf, map + off, first) == 0) {
		rv = 0; /* (a page the kernel could not give: pread below says why) */
	} else if (exact || first == REC_HEADER_SIZE + key_len) {
		rv = seg_read_one(db, s, buf, first, off);
	} else if ((rv = stor_seg_read_upto(s->h, buf, first, off, &got)) == 0) {
		/* a guess may reach past the end of the file */
		if (got < REC_HEADER_SIZE + key_len)
			rv = -EIO;
		first = got;
	}
	if (rv != 0) {
		free(buf);
		return rv == -EIO ? KV_ECORRUPT : rv;
	}
	rec_decode_header(buf, &ret->h);
	if ((rv = rec_check_header(&ret->h, KV_KEY_SIZE_MAX, KV_VALUE_SIZE_MAX, avail)) != 0 ||
	    ret->h.key_len != key_len || memcmp(buf + REC_HEADER_SIZE, key, key_len) != 0) {
		free(buf);
		return KV_ECORRUPT;
	}
	if (want_value) {
		size_t size = (size_t)rec_size(ret->h.key_len, ret->h.value_len);
		if (size < first && exact) {
			free(buf);
			return KV_ECORRUPT;
		}
		if (size > first) {
			uint8_t *nb;
			if ((nb = realloc(buf, size)) == NULL) {
				free(buf);
				return -ENOMEM;
			}
			buf = nb;
			rv = seg_read_bytes(db, s, buf + first, size - first, off + first);
			if (rv != 0) {
				free(buf);
				return rv == -EIO ? KV_ECORRUPT : rv;
			}
		}
		if ((rv = rec_verify(buf, size, s->crc_seed)) != 0) {
			free(buf);
			return rv;
		}
		ret->buf = buf;
		ret->value = buf + REC_HEADER_SIZE + key_len;
	} else {
		free(buf);
		ret->buf = NULL;
		ret->value = NULL;
	}
	ret->loc = loc;
	return 0;
}

/* read_at with a guess of the record's size (read_in_seg). */
static int read_at_guess(kv_db *db, uint64_t loc, uint32_t size_guess, const void *key,
                         size_t key_len, bool want_value, struct rec_read *ret)
{
	struct seg *s;
	int rv;

	if ((rv = db_seg_acquire(db, loc, &s, &loc)) != 0)
		return rv;
	rv = read_in_seg(db, s, loc, size_guess, false, key, key_len, want_value, ret);
	db_seg_release(s);
	return rv;
}

int read_at(kv_db *db, uint64_t loc, const void *key, size_t key_len, bool want_value,
            struct rec_read *ret)
{
	struct seg *s;
	int rv;

	if ((rv = db_seg_acquire(db, loc, &s, &loc)) != 0)
		return rv;
	rv = read_in_seg(db, s, loc, 0, false, key, key_len, want_value, ret);
	db_seg_release(s);
	return rv;
}


int read_key_at(kv_db *db, uint64_t loc, struct rec_header *ret_h, uint8_t **ret_key)
{
	uint8_t hb[REC_HEADER_SIZE], *key = NULL;
	struct rec_header h;
	struct seg *s;
	int rv;

	if ((rv = db_seg_acquire(db, loc, &s, &loc)) != 0)
		return rv;
	if (loc_off(loc) < SEG_HEADER_SIZE) {
		rv = KV_ECORRUPT;
		goto out;
	}
	if ((rv = seg_read_bytes(db, s, hb, sizeof(hb), loc_off(loc))) != 0)
		goto out;
	rec_decode_header(hb, &h);
	if (rec_check_header(&h, KV_KEY_SIZE_MAX, KV_VALUE_SIZE_MAX, UINT64_MAX) != 0 ||
	    h.key_len == 0) {
		rv = KV_ECORRUPT;
		goto out;
	}
	if ((key = malloc(h.key_len)) == NULL) {
		rv = -ENOMEM;
		goto out;
	}
	if ((rv = seg_read_bytes(db, s, key, h.key_len, loc_off(loc) + REC_HEADER_SIZE)) != 0) {
		free(key);
		goto out;
	}
	*ret_h = h;
	*ret_key = key;
out:
	db_seg_release(s);
	return rv == -EIO ? KV_ECORRUPT : rv;
}

/* Head lookup: key directory entry plus a reference on its segment. */
static int head_lookup(kv_db *db, const void *key, size_t key_len, struct kd_entry *ret_e,
                       struct seg **ret_seg, uint64_t *ret_loc)
{
	struct kd_entry e;
	struct seg *s = NULL;
	uint64_t loc = 0;
	int rv;

	pthread_rwlock_rdlock(&db->kd_lock);
	rv = keydir_get(db->kd, key, key_len, &e);
	if (rv == 0)
		rv = db_seg_acquire(db, loc_make(e.seg, e.off), &s, &loc);
	pthread_rwlock_unlock(&db->kd_lock);
	if (rv != 0)
		return rv == -ENOENT ? KV_ENOTFOUND : rv;
	*ret_e = e;
	*ret_seg = s;
	*ret_loc = loc;
	return 0;
}

static int value_from(struct kv_value *v, struct rec_read *r)
{
	size_t len;
	int rv;

	if (r->h.type == REC_BLOB) {
		memset(v, 0, sizeof(*v));
		rv = blob_desc_size(r->value, r->h.value_len, &v->blob_size);
		v->blob = true;
		v->version = r->h.version;
		v->timestamp_ms = r->h.timestamp_ms;
		v->expiry_ms = r->h.expiry_ms;
		rec_read_release(r);
		return rv;
	}
	if ((rv = rec_read_value(r, &len)) != 0) {
		rec_read_release(r);
		return rv;
	}
	v->data = (void *)r->value;
	v->len = len;
	v->version = r->h.version;
	v->timestamp_ms = r->h.timestamp_ms;
	v->expiry_ms = r->h.expiry_ms;
	v->blob = false;
	v->blob_size = 0;
	v->priv_ = r->buf;
	r->buf = NULL;
	return 0;
}

/*
 * Walks the chain of key from its head record to the first record for which
 * stop() says yes. *ret holds that record (with its value if want_value).
 * KV_ENOTFOUND at the start of the key's history, KV_ECOMPACTED where merge
 * cut it.
 */
typedef bool (*chain_stop_fn)(const struct rec_header *h, void *arg);

static int chain_find(kv_db *db, const void *key, size_t key_len, const struct kd_entry *head,
                      chain_stop_fn stop, void *arg, bool want_value, struct rec_read *ret)
{
	uint64_t loc = loc_make(head->seg, head->off), last = UINT64_MAX;
	struct rec_read r;
	int rv;

	for (;;) {
		if ((rv = read_at(db, loc, key, key_len, false, &r)) != 0)
			return rv == -ENOENT ? KV_ECOMPACTED : rv;
		if (r.h.version >= last)
			return KV_ECORRUPT; /* versions fall along a chain */
		last = r.h.version;
		if (stop(&r.h, arg)) {
			if (!want_value) {
				*ret = r;
				return 0;
			}
			rv = read_at(db, r.loc, key, key_len, true, ret);
			return rv == -ENOENT ? KV_ECOMPACTED : rv;
		}
		if (r.h.prev_seg == 0)
			return (r.h.flags & REC_F_HISTORY_CUT) ? KV_ECOMPACTED : KV_ENOTFOUND;
		loc = loc_make(r.h.prev_seg, r.h.prev_off);
	}
}

struct version_target {
	uint64_t version;
	bool exact;
};

static bool stop_at_version(const struct rec_header *h, void *arg)
{
	struct version_target *t = arg;

	return h->version <= t->version;
}

int get_record(kv_db *db, const void *key, size_t key_len, const struct kv_read_opts *opts,
               struct rec_read *ret)
{
	struct kd_entry e;
	struct seg *s;
	struct rec_read r;
	uint64_t want = 0, loc;
	bool exact = false;
	int rv;

	if (key == NULL || key_len == 0 || key_len > db->opt.max_key_size)
		return KV_EKEYSIZE;
	if (opts != NULL && opts->version != 0) {
		want = opts->version;
		exact = true;
	} else if (opts != NULL && opts->as_of != 0) {
		want = opts->as_of;
		if (want < atomic_load(&db->compact_floor))
			return KV_ECOMPACTED;
	}
	if ((rv = head_lookup(db, key, key_len, &e, &s, &loc)) != 0)
		return rv;
	/* the clock is read only for a record that can expire */
	if (want == 0 || e.version <= want) {
		/* the newest record answers */
		if ((exact && e.version != want) || (e.flags & KD_F_TOMBSTONE) ||
		    ((e.flags & KD_F_TTL) && db_expired(db, e.expiry_ms, db_now(db)))) {
			db_seg_release(s);
			return KV_ENOTFOUND;
		}
		rv = read_in_seg(db, s, loc, e.size, true, key, key_len, true, &r);
		db_seg_release(s);
		if (rv != 0)
			return rv;
	} else {
		struct version_target t = {want, exact};
		uint64_t epoch = atomic_load(&db->seg_epoch);
		int tries = 0;
		db_seg_release(s);
		for (;;) {
			rv = chain_find(db, key, key_len, &e, stop_at_version, &t, true, &r);
			if (rv != KV_ECOMPACTED || atomic_load(&db->seg_epoch) == epoch ||
			    ++tries > 3)
				break;
			/* a merge retired segments under the walk: start again */
			epoch = atomic_load(&db->seg_epoch);
			if ((rv = head_lookup(db, key, key_len, &e, &s, &loc)) != 0)
				return rv;
			db_seg_release(s);
		}
		if (rv == KV_ECOMPACTED && exact && want < atomic_load(&db->compact_floor))
			return KV_ECOMPACTED;
		if (rv != 0)
			return rv;
		if ((exact && r.h.version != want) || r.h.type == REC_DELETE ||
		    (r.h.expiry_ms != 0 && db_expired(db, r.h.expiry_ms, db_now(db)))) {
			rec_read_release(&r);
			return KV_ENOTFOUND;
		}
	}
	*ret = r;
	return 0;
}

int kv_get(kv_db *db, const void *key, size_t key_len, const struct kv_read_opts *opts,
           struct kv_value *ret)
{
	struct rec_read r;
	int rv;

	if ((rv = get_record(db, key, key_len, opts, &r)) != 0)
		return rv;
	return value_from(ret, &r);
}

int chain_at_version(kv_db *db, const void *key, size_t key_len, const struct kd_entry *head,
                     uint64_t version, bool want_value, struct rec_read *ret)
{
	struct version_target t = {version, false};

	return chain_find(db, key, key_len, head, stop_at_version, &t, want_value, ret);
}

void kv_value_release(struct kv_value *v)
{
	if (v == NULL)
		return;
	free(v->priv_);
	v->priv_ = NULL;
	v->data = NULL;
	v->len = 0;
}

int kv_versions(kv_db *db, const void *key, size_t key_len, uint32_t limit, uint64_t before,
                bool with_values, struct kv_version **ret_list, size_t *ret_count,
                bool *ret_truncated)
{
	struct kd_entry e;
	struct seg *s;
	struct kv_version *v = NULL;
	size_t n = 0, cap = 0;
	uint64_t loc, now, last = UINT64_MAX, epoch;
	uint32_t guess;
	bool truncated = false;
	int rv, tries = 0;

	if (key == NULL || key_len == 0 || key_len > db->opt.max_key_size)
		return KV_EKEYSIZE;
	if (limit == 0)
		limit = UINT32_MAX;
restart:
	epoch = atomic_load(&db->seg_epoch);
	rv = head_lookup(db, key, key_len, &e, &s, &loc);
	if (rv == KV_ENOTFOUND)
		goto done;
	if (rv != 0)
		return rv;
	db_seg_release(s);
	now = db_now(db);
	loc = loc_make(e.seg, e.off);
	guess = e.size;
	while (n < limit) {
		struct rec_read r;
		bool take;

		/* one read per version, so a merge cannot retire the segment
		 * between the header and the value; its size guessed from the
		 * newer one's */
		rv = read_at_guess(db, loc, with_values ? guess : 0, key, key_len, with_values, &r);
		if (rv == -ENOENT && atomic_load(&db->seg_epoch) != epoch && ++tries <= 3) {
			/* a merge retired segments under the walk: start again */
			kv_versions_free(v, n);
			v = NULL;
			n = cap = 0;
			last = UINT64_MAX;
			goto restart;
		}
		if (rv == -ENOENT) {
			truncated = true;
			break;
		}
		if (rv != 0)
			goto fail;
		if (r.h.version >= last) {
			rec_read_release(&r);
			rv = KV_ECORRUPT; /* versions must fall along a chain */
			goto fail;
		}
		last = r.h.version;
		take = (before == 0 || r.h.version < before) && !db_expired(db, r.h.expiry_ms, now);
		if (take) {
			struct kv_version *x;
			if (n == cap) {
				size_t nc = cap ? cap * 2 : 8;
				struct kv_version *nv = realloc(v, nc * sizeof(*nv));
				if (nv == NULL) {
					rec_read_release(&r);
					rv = -ENOMEM;
					goto fail;
				}
				v = nv;
				cap = nc;
			}
			x = &v[n];
			memset(x, 0, sizeof(*x));
			x->version = r.h.version;
			x->timestamp_ms = r.h.timestamp_ms;
			x->expiry_ms = r.h.expiry_ms;
			x->tombstone = r.h.type == REC_DELETE;
			x->blob = r.h.type == REC_BLOB;
			if (with_values && x->blob &&
			    (rv = blob_desc_size(r.value, r.h.value_len, &x->blob_size)) != 0) {
				rec_read_release(&r);
				goto fail;
			}
			if (with_values && r.h.type == REC_PUT) {
				size_t len;
				if ((rv = rec_read_value(&r, &len)) != 0) {
					rec_read_release(&r);
					goto fail;
				}
				x->data = (void *)r.value;
				x->len = len;
				x->priv_ = r.buf;
				r.buf = NULL;
			}
			n++;
		}
		guess = (uint32_t)rec_size(r.h.key_len, r.h.value_len);
		rec_read_release(&r);
		if (r.h.prev_seg == 0) {
			truncated = (r.h.flags & REC_F_HISTORY_CUT) != 0;
			break;
		}
		loc = loc_make(r.h.prev_seg, r.h.prev_off);
	}
done:
	*ret_list = v;
	*ret_count = n;
	if (ret_truncated)
		*ret_truncated = truncated;
	return 0;
fail:
	kv_versions_free(v, n);
	return rv;
}

void kv_versions_free(struct kv_version *list, size_t count)
{
	size_t i;

	if (list == NULL)
		return;
	for (i = 0; i < count; i++)
		free(list[i].priv_);
	free(list);
}
