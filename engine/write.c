/*
 * write.c — the write path: queue, batch formation, group commit, apply.
 *
 * Requests queue under db->mu. The driver (see db.h) takes every queued
 * request that fits, checks each against the key directory plus the changes
 * of the requests before it in the same batch (the overlay), gives versions,
 * encodes the records into one buffer — each value compressed in place when
 * the database's codec makes it shorter (codec.h; the record's flags say
 * which codec) — (ended, now and then, by a sync mark:
 * add_sync_mark) and appends it through the storage's writer (storage.h
 * append_start/append_poll; with files, one pwrite, followed under
 * KV_SYNC_ALWAYS by one fdatasync on the ring: io_wr_uring.c says why the
 * write itself is not on the ring). When the write reported full length and the
 * sync succeeded it applies the overlay to the key directory and completes
 * the requests. Nothing is visible to readers and no request is answered
 * before its batch is as durable as the database's sync mode promises —
 * but for a batch of blob chunks alone, which nothing reads until their
 * blob's commit: under KV_SYNC_ALWAYS it is not synced, and the commit's
 * batch syncs what came before it (form_and_start, write_roll).
 * A put that would take the database past max_keys or max_bytes fails with
 * KV_EMAXKEYS or, under evict=oldest, first evicts the least recently
 * written keys the batch does not write: their tombstones join the
 * request's records (evict_one; the order they are taken in: evict.h).
 * Before versions above META's mark are written, META is raised
 * (manifest.h).
 *
 * Invariants:
 *   1. At most one batch is in flight; the next one is formed after the
 *      previous one was applied, so a batch's conditions see every earlier
 *      acknowledged write.
 *   2. Versions are given in queue order, contiguous; a failed batch gives its
 *      versions back (nothing of it stays on disk: the segment is truncated
 *      to where the batch began).
 *   3. The records of one request are contiguous, in one segment; every
 *      record but its last carries REC_F_BATCH_MORE, so recovery applies a
 *      request all or nothing.
 *   4. After a failed fdatasync the database is read-only: the page cache
 *      may have dropped what the kernel could not write.
 *
 * State machine of the driver (drive_step):
 *   IDLE --form_and_start--> IN_FLIGHT --append_poll done--> batch_finish --> IDLE
 *   IDLE --barrier at queue head--> runs barrier fn --> IDLE
 */
#include "db.h"
#include "endian_util.h"
#include "hint.h"
#include "manifest.h"
#include "reloc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

/* ---- overlay: the key-directory changes of the batch being formed ------- */

static uint32_t key_hash(const void *key, size_t len)
{
	return (uint32_t)XXH3_64bits(key, len);
}

static int ov_rehash(struct batch *b, size_t cap)
{
	int32_t *ht = malloc(cap * sizeof(*ht));
	size_t i;

	if (ht == NULL)
		return -ENOMEM;
	for (i = 0; i < cap; i++)
		ht[i] = -1;
	for (i = 0; i < b->nov; i++) {
		size_t s = b->ov[i].hash & (cap - 1);
		b->ov[i].next = ht[s];
		ht[s] = (int32_t)i;
	}
	free(b->ht);
	b->ht = ht;
	b->htcap = cap;
	return 0;
}

/* The key of an overlay entry: the caller's bytes, or (an eviction's
 * tombstone) those in its record in the batch buffer. */
static const uint8_t *ov_key(const struct batch *b, const struct ov_ent *o)
{
	return o->key != NULL ? o->key : b->buf + o->rec_off + REC_HEADER_SIZE;
}

static const struct ov_ent *ov_find(const struct batch *b, const void *key, size_t len, uint32_t h)
{
	int32_t i;

	if (b->htcap == 0)
		return NULL;
	for (i = b->ht[h & (b->htcap - 1)]; i >= 0; i = b->ov[i].next) {
		const struct ov_ent *o = &b->ov[i];
		if (o->hash == h && o->key_len == len && memcmp(ov_key(b, o), key, len) == 0)
			return o;
	}
	return NULL;
}

static int ov_push(struct batch *b, const void *key, size_t len, uint32_t h, uint32_t rec_off,
                   const struct kd_entry *e)
{
	struct ov_ent *o;
	size_t s;
	int rv;

	if (b->nov == b->capov) {
		size_t cap = b->capov ? b->capov * 2 : 64;
		struct ov_ent *nv = realloc(b->ov, cap * sizeof(*nv));
		if (nv == NULL)
			return -ENOMEM;
		b->ov = nv;
		b->capov = cap;
	}
	if ((b->nov + 1) * 2 > b->htcap && (rv = ov_rehash(b, b->htcap ? b->htcap * 2 : 64)) != 0)
		return rv;
	o = &b->ov[b->nov];
	o->key = key;
	o->key_len = (uint32_t)len;
	o->hash = h;
	o->rec_off = rec_off;
	o->e = *e;
	s = h & (b->htcap - 1);
	o->next = b->ht[s];
	b->ht[s] = (int32_t)b->nov;
	b->nov++;
	return 0;
}

/* Drops overlay entries back to mark (newest first, so buckets unwind). */
static void ov_truncate(struct batch *b, size_t mark)
{
	while (b->nov > mark) {
		struct ov_ent *o = &b->ov[--b->nov];
		b->ht[o->hash & (b->htcap - 1)] = o->next;
	}
}

static int batch_reserve(struct batch *b, size_t more)
{
	size_t cap;
	uint8_t *nb;

	if (b->len + more <= b->cap)
		return 0;
	cap = b->cap ? b->cap : 64 * 1024;
	while (cap < b->len + more)
		cap *= 2;
	if ((nb = realloc(b->buf, cap)) == NULL)
		return -ENOMEM;
	b->buf = nb;
	b->cap = cap;
	return 0;
}

static void batch_reset(struct batch *b)
{
	b->len = 0;
	ov_truncate(b, 0);
	b->head = b->tail = NULL;
	b->nreqs = 0;
	b->keys_delta = 0;
	b->bytes_delta = 0;
	b->evictions = 0;
	b->val_logical = b->val_stored = b->val_compressed = b->blobs = 0;
	/* do not keep a huge buffer around after one large batch */
	if (b->cap > 2 * BATCH_BYTES_MAX) {
		free(b->buf);
		b->buf = NULL;
		b->cap = 0;
	}
}

static void collect_drop(kv_db *db);

void write_release(kv_db *db)
{
	free(db->batch.buf);
	free(db->batch.ov);
	free(db->batch.ht);
	memset(&db->batch, 0, sizeof(db->batch));
	codec_ctx_release(&db->codec);
	collect_drop(db);
	evict_order_release(&db->order);
}

/* ---- the active segment's hint ------------------------------------------ */

/* A hint collected on the write path holds at most this many bytes (about
 * 40 bytes and the key per record); a segment of more, smaller records is
 * scanned for its hint as before. */
#define HINT_COLLECT_MAX (1u << 20)

static void collect_drop(kv_db *db)
{
	if (db->collect != NULL) {
		hint_writer_release(db->collect);
		free(db->collect);
		db->collect = NULL;
	}
}

/* Adds the records of the batch that landed at base, as a scan of the
 * segment would give them (sync marks are not indexed). [driver] */
static void collect_batch(kv_db *db, uint64_t base)
{
	const struct batch *b = &db->batch;
	size_t at = 0;

	while (db->collect != NULL && at + REC_HEADER_SIZE <= b->len) {
		struct rec_header h;
		uint64_t size;
		rec_decode_header(b->buf + at, &h);
		size = rec_size(h.key_len, h.value_len);
		if (h.type != REC_SYNC) {
			struct hint_ent e = {
			        .type = h.type,
			        .flags = h.flags,
			        .key_len = h.key_len,
			        .version = h.version,
			        .off = (uint32_t)(base + at),
			        .size = (uint32_t)size,
			        .expiry_ms = h.expiry_ms,
			        .key = b->buf + at + REC_HEADER_SIZE,
			};
			if (hint_writer_add(db->collect, &e) != 0 ||
			    db->collect->len > HINT_COLLECT_MAX)
				collect_drop(db);
		}
		at += size;
	}
}

/* ---- accounting -------------------------------------------------------- */

void db_account(kv_db *db, const struct kd_entry *e, const struct kd_entry *old, bool replaced)
{
	bool is_live = !(e->flags & KD_F_TOMBSTONE);

	db->live_bytes += e->size;
	if (replaced)
		db_account_remove(db, old);
	if (is_live) {
		db->live_keys++;
	} else {
		db->tombstones++;
		db->tomb_bytes += e->size;
	}
}

void db_account_remove(kv_db *db, const struct kd_entry *old)
{
	db->live_bytes -= old->size;
	if (old->flags & KD_F_TOMBSTONE) {
		db->tombstones--;
		db->tomb_bytes -= old->size;
	} else {
		db->live_keys--;
	}
}

/* ---- requests ---------------------------------------------------------- */

static int validate_req(kv_db *db, struct kv_req *req)
{
	uint64_t bytes = 0;
	size_t i;

	if (req->flags_ & REQ_F_BARRIER)
		return 0;
	if (req->n == 0 || req->ops == NULL)
		return -EINVAL;
	if (req->n > KV_BATCH_OPS_MAX)
		return KV_EBATCHSIZE;
	for (i = 0; i < req->n; i++) {
		struct kv_op *op = &req->ops[i];
		op->status = 0;
		op->version = 0;
		if (op->type < KV_OP_PUT || op->type > KV_OP_BLOB_PUT)
			return op->status = -EINVAL;
		if (op->key_len == 0 || op->key_len > db->opt.max_key_size || op->key == NULL)
			return op->status = KV_EKEYSIZE;
		if (op->type == KV_OP_PUT &&
		    (op->value_len > db->opt.max_value_size || (op->value_len && !op->value)))
			return op->status = KV_EVALSIZE;
		/* blob ops come from the upload calls (blob.c) */
		if (op->type == KV_OP_BLOB_CHUNK &&
		    (op->value_len == 0 || op->value_len > KV_BLOB_CHUNK_MAX || !op->value ||
		     !op->upload_))
			return op->status = -EINVAL;
		if (op->type == KV_OP_BLOB_PUT &&
		    (op->value_len < BLOB_DESC_HEAD || op->value_len > KV_VALUE_SIZE_MAX ||
		     !op->value || !op->upload_))
			return op->status = -EINVAL;
		bytes += rec_size(op->key_len, op->type == KV_OP_DELETE ? 0 : op->value_len);
	}
	if (bytes > REQ_BYTES_MAX)
		return KV_EBATCHSIZE;
	return 0;
}

int write_submit(kv_db *db, struct kv_req *req)
{
	bool wake;
	int rv;

	if ((rv = validate_req(db, req)) != 0)
		return rv;
	if (!(req->flags_ & REQ_F_BARRIER) && atomic_load(&db->read_only))
		return KV_EREADONLY;
	req->next_ = NULL;
	req->status_ = 0;
	req->flags_ &= ~(uint32_t)REQ_F_DONE;
	pthread_mutex_lock(&db->mu);
	if (db->closing && !(req->flags_ & REQ_F_BARRIER)) {
		pthread_mutex_unlock(&db->mu);
		return KV_ECLOSED;
	}
	/* the event fd wakes the loop for the first request of an empty queue;
	 * the driver takes the whole queue under db->mu, so a request queued
	 * behind others is taken with them */
	wake = db->q_head == NULL;
	if (db->q_tail)
		db->q_tail->next_ = req;
	else
		db->q_head = req;
	db->q_tail = req;
	pthread_mutex_unlock(&db->mu);
	if (db->opt.external_loop && wake)
		io_signal(db->efd);
	return 0;
}

/* Completes a list of requests (linked by next_). */
static void complete_list(kv_db *db, struct kv_req *head)
{
	struct kv_req *r, *next, *async_head = NULL, **async_tail = &async_head;
	bool any_blocking = false;

	pthread_mutex_lock(&db->mu);
	for (r = head; r != NULL; r = next) {
		next = r->next_;
		if (r->flags_ & REQ_F_BLOCKING) {
			r->flags_ |= REQ_F_DONE; /* the waiter may return from here on */
			any_blocking = true;
		} else {
			r->next_ = NULL;
			*async_tail = r;
			async_tail = &r->next_;
		}
	}
	if (any_blocking)
		pthread_cond_broadcast(&db->cv);
	pthread_mutex_unlock(&db->mu);
	for (r = async_head; r != NULL; r = next) {
		next = r->next_;
		r->done(r, r->status_);
	}
}

static void batch_add_req(struct batch *b, struct kv_req *req)
{
	req->next_ = NULL;
	if (b->tail)
		b->tail->next_ = req;
	else
		b->head = req;
	b->tail = req;
	b->nreqs++;
}

/* ---- durations of syncs, sizes of batches (kv_stats) ------------------- */

const uint64_t kv_sync_bucket_us[KV_SYNC_BUCKETS - 1] = {
	50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000, 1000000,
};
const uint32_t kv_batch_bucket_max[KV_BATCH_BUCKETS - 1] = {1, 2, 4, 8, 16, 32, 64, 128, 256};

uint64_t db_clock_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

void db_count_sync(kv_db *db, uint64_t start_us)
{
	uint64_t now = db_clock_us(), us = now > start_us ? now - start_us : 0;
	size_t i = 0;

	while (i < KV_SYNC_BUCKETS - 1 && us > kv_sync_bucket_us[i])
		i++;
	atomic_fetch_add_explicit(&db->sync_hist[i], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&db->sync_us_sum, us, memory_order_relaxed);
	atomic_fetch_add(&db->syncs, 1);
}

void db_count_batch(kv_db *db, size_t nreqs)
{
	size_t i = 0;

	while (i < KV_BATCH_BUCKETS - 1 && nreqs > kv_batch_bucket_max[i])
		i++;
	atomic_fetch_add_explicit(&db->batch_hist[i], 1, memory_order_relaxed);
	atomic_fetch_add(&db->batches, 1);
	atomic_fetch_add(&db->batched_writes, nreqs);
}

/* ---- segments ---------------------------------------------------------- */

int write_roll(kv_db *db)
{
	struct seg *old = db->active, *ns;
	uint32_t id;
	int rv;

	if (old != NULL && (db->opt.sync != KV_SYNC_ALWAYS ? atomic_load(&db->unsynced_bytes) > 0
	                                                  : db->chunks_unsynced)) {
		uint64_t t0 = db_clock_us();
		if ((rv = stor_seg_sync(old->h)) != 0) {
			atomic_store(&db->read_only, true);
			return rv;
		}
		atomic_store(&db->unsynced_bytes, 0);
		db->chunks_unsynced = false;
		db_count_sync(db, t0);
	}
	pthread_mutex_lock(&db->seg_mu);
	id = db->next_seg_id++;
	pthread_mutex_unlock(&db->seg_mu);
	rv = seg_create(db->tn, id, 0, atomic_load(&db->committed_version), db_now(db), 0, &ns);
	if (rv != 0)
		return rv;
	/* the old one's length final (what was reserved given back), durable
	 * with the new one's creation; a failure leaves a longer segment,
	 * whose end recovery finds */
	if (old != NULL)
		stor_seg_seal(old->h, db->tail);
	if ((rv = db_fsync_dir(db)) != 0) {
		seg_unref(ns);
		return rv;
	}
	pthread_mutex_lock(&db->seg_mu);
	if ((rv = segtab_insert_locked(db, ns)) != 0) {
		pthread_mutex_unlock(&db->seg_mu);
		seg_unref(ns);
		return rv;
	}
	if (old != NULL) {
		old->size = db->tail;
		old->sealed = true;
		old->hint_ready = db->collect; /* NULL: not collected, scanned */
		db->collect = NULL;
	}
	pthread_mutex_unlock(&db->seg_mu);
	collect_drop(db); /* (no old segment) */
	if ((db->collect = calloc(1, sizeof(*db->collect))) != NULL)
		hint_writer_init(db->collect);
	if (old != NULL)
		seg_unpin(old); /* sealed: the file budget may close it */
	db->active = ns;
	db->tail = SEG_HEADER_SIZE;
	db_seg_map(db, ns, true);
	pthread_rwlock_wrlock(&db->kd_lock);
	db->disk_bytes += SEG_HEADER_SIZE;
	pthread_rwlock_unlock(&db->kd_lock);
	/* META lists the sealed segment (synced above or by its batches). If
	 * that fails, the next batch tries again before it writes anything
	 * (a mark of 0 is always exceeded) and fails with the error. */
	if (manifest_write(db) != 0)
		db->version_mark = 0;
	return 0;
}

/*
 * Space for the active segment is allocated ahead of the writes, a chunk at a
 * time, without changing its size. A full disk then shows as ENOSPC here,
 * before anything is written, and never later as a failed fdatasync (which
 * delayed allocation would otherwise make possible, and which would turn the
 * database read-only). [driver]
 */
#define RESERVE_CHUNK (1u << 20)

static int reserve_space(kv_db *db, size_t len)
{
	struct seg *s = db->active;
	uint64_t end = db->tail + len, want;
	int rv;

	if (end <= s->reserved)
		return 0;
	want = end - s->reserved;
	if (want < RESERVE_CHUNK)
		want = RESERVE_CHUNK;
	rv = stor_seg_reserve(s->h, s->reserved > db->tail ? s->reserved : db->tail, want);
	if (rv == -EOPNOTSUPP || rv == -ENOSYS) {
		s->reserved = UINT64_MAX; /* not on this file system: plain writes */
		return 0;
	}
	if (rv == -ENOSPC && (rv = stor_seg_reserve(s->h, db->tail, len)) == 0) {
		/* not a whole chunk left, but enough for this batch */
		s->reserved = end;
		return 0;
	}
	if (rv != 0)
		return rv;
	s->reserved = (s->reserved > db->tail ? s->reserved : db->tail) + want;
	return 0;
}

/* ---- forming a batch --------------------------------------------------- */

static uint64_t req_bytes(const struct kv_req *req)
{
	uint64_t n = 0;
	size_t i;

	for (i = 0; i < req->n; i++)
		n += rec_size(req->ops[i].key_len,
		              req->ops[i].type == KV_OP_DELETE ? 0 : req->ops[i].value_len);
	return n;
}

/* Looks up the head of key as the batch would leave it. */
static bool head_of(kv_db *db, const void *key, size_t len, uint32_t h, struct kd_entry *ret)
{
	const struct ov_ent *o = ov_find(&db->batch, key, len, h);

	if (o != NULL) {
		*ret = o->e;
		return true;
	}
	return keydir_get(db->kd, key, len, ret) == 0;
}

/* When a record written at now with ttl_ms expires: 0 (never) without a
 * TTL; a sum past the clock's range is capped at KV_EXPIRY_MAX, which no
 * clock reaches, instead of wrapping into the past. */
static uint64_t expiry_of(uint64_t now, uint64_t ttl_ms)
{
	if (ttl_ms == 0)
		return 0;
	return ttl_ms >= KV_EXPIRY_MAX - now ? KV_EXPIRY_MAX : now + ttl_ms;
}

/* The value of a put or a blob chunk about to be encoded at the end of the
 * batch (rh->value_len its length as given): compressed in place, where
 * the value goes (batch_reserve made room for it uncompressed), when the
 * codec makes it shorter, with rh's length and codec bits set; else the
 * caller's bytes. Counts it in the batch's value figures. */
static const void *encode_value(kv_db *db, struct batch *b, const struct kv_op *op,
                                enum kv_codec codec, int level, struct rec_header *rh)
{
	const void *value = op->value;

	if (codec != KV_CODEC_NONE) {
		uint8_t *dst = b->buf + b->len + REC_HEADER_SIZE + op->key_len;
		size_t n = codec_compress(&db->codec, codec, level, op->value, op->value_len, dst,
		                          op->value_len);
		if (n != 0) {
			value = dst;
			rh->value_len = (uint32_t)n;
			rh->flags |= (uint8_t)(codec << REC_F_CODEC_SHIFT);
			b->val_compressed++;
		}
	}
	b->val_logical += op->value_len;
	b->val_stored += rh->value_len;
	return value;
}

/* Encodes a blob chunk at the end of the batch (blob.h): no version, no
 * condition, no key-directory change; its value compressed as a put's is.
 * Returns its size. */
static size_t encode_chunk(kv_db *db, struct batch *b, struct kv_op *op, uint64_t now,
                           enum kv_codec codec, int level)
{
	struct rec_header rh;
	const void *value;

	memset(&rh, 0, sizeof(rh));
	rh.type = REC_CHUNK;
	rh.flags = REC_F_BATCH_MORE;
	rh.key_len = (uint32_t)op->key_len;
	rh.value_len = (uint32_t)op->value_len;
	value = encode_value(db, b, op, codec, level, &rh);
	b->blobs++;
	rh.timestamp_ms = now;
	rec_encode(b->buf + b->len, &rh, op->key, value, db->active->crc_seed);
	op->loc_ = loc_make(db->active->id, (uint32_t)(db->tail + b->len));
	return (size_t)rec_size(rh.key_len, rh.value_len);
}

/* ---- limits and eviction ----------------------------------------------- */

/* form_req_once: the request's evictions do not fit in what is left of
 * the active segment (nothing of it was kept) */
#define FORM_NO_ROOM 2

/* Whether base + delta passes max (0: no limit). */
static bool past(uint64_t base, int64_t delta, uint64_t max)
{
	uint64_t v;

	if (max == 0)
		return false;
	if (delta < 0)
		v = base > (uint64_t)-delta ? base - (uint64_t)-delta : 0;
	else
		v = base + (uint64_t)delta;
	return v > max;
}

/* Evicts the least recently written live key that the batch does not
 * write: a tombstone with no previous link and REC_F_HISTORY_CUT, so none of
 * its older records is reachable (merge.c drops them). *last_rec gets
 * where its record is. 1: one evicted; 0: none left to evict;
 * FORM_NO_ROOM; -ENOMEM. [driver] */
static int evict_one(kv_db *db, uint64_t now, size_t *last_rec)
{
	struct evict_order *o = &db->order;
	struct batch *b = &db->batch;

	for (; b->evict_pos < o->n; b->evict_pos++) {
		struct evict_ent ent = o->e[b->evict_pos];
		struct rec_header rh;
		struct kd_entry cur, e;
		uint8_t *key;
		uint32_t h, rec_off;
		size_t size;
		int rv;

		if (ent.loc == 0)
			continue;
		if ((rv = read_key_at(db, ent.loc, &rh, &key)) == -ENOMEM)
			return rv;
		if (rv != 0)
			continue; /* its record cannot be read: it cannot be evicted */
		h = key_hash(key, rh.key_len);
		if (ov_find(b, key, rh.key_len, h) != NULL ||
		    keydir_get(db->kd, key, rh.key_len, &cur) != 0 || cur.version != ent.version ||
		    (cur.flags & KD_F_TOMBSTONE)) {
			/* written (or evicted) by this batch */
			free(key);
			continue;
		}
		size = rec_size(rh.key_len, 0);
		if (db->tail + b->len + size > db->opt.segment_size) {
			free(key);
			return FORM_NO_ROOM;
		}
		if ((rv = batch_reserve(b, size)) != 0) {
			free(key);
			return rv;
		}
		memset(&rh, 0, sizeof(rh));
		rh.type = REC_DELETE;
		rh.flags = REC_F_BATCH_MORE | REC_F_HISTORY_CUT;
		rh.key_len = (uint32_t)(size - REC_HEADER_SIZE);
		rh.version = db->next_version++;
		rh.timestamp_ms = now;
		rec_off = (uint32_t)b->len;
		rec_encode(b->buf + b->len, &rh, key, NULL, db->active->crc_seed);
		free(key);
		b->len += size;
		*last_rec = rec_off;
		memset(&e, 0, sizeof(e));
		e.version = rh.version;
		e.seg = db->active->id;
		e.off = (uint32_t)(db->tail + rec_off);
		e.size = (uint32_t)size;
		e.flags = KD_F_TOMBSTONE;
		if ((rv = ov_push(b, NULL, rh.key_len, h, rec_off, &e)) != 0)
			return rv;
		b->keys_delta--;
		b->bytes_delta -= (int64_t)(cur.size +
		                            blobmap_get(&db->blob_heads, loc_make(cur.seg, cur.off)));
		b->evictions++;
		b->evict_pos++;
		return 1;
	}
	return 0;
}

/* After a put (refuse) or a request (oldest) that added a key (adds_key)
 * or bytes (adds_bytes): 0 when the batch leaves the database within
 * max_keys and max_bytes — under evict=oldest after evicting as many keys
 * as that takes — else KV_EMAXKEYS; FORM_NO_ROOM, -ENOMEM. [driver] */
static int fit_limits(kv_db *db, bool adds_key, bool adds_bytes, uint64_t now, size_t *last_rec)
{
	const struct kv_options *o = &db->opt;
	struct batch *b = &db->batch;
	int rv;

	for (;;) {
		bool over = (adds_key && past(db->live_keys, b->keys_delta, o->max_keys)) ||
		            (adds_bytes && past(db->live_bytes - db->tomb_bytes, b->bytes_delta,
		                                o->max_bytes));
		if (!over)
			return 0;
		if (o->evict != KV_EVICT_OLDEST)
			return KV_EMAXKEYS;
		if ((rv = evict_one(db, now, last_rec)) != 1)
			return rv == 0 ? KV_EMAXKEYS : rv;
	}
}

/* Adds req's records to the batch. Returns 1 when it does not fit in what
 * is left of the batch or the segment (the caller puts it back), 0 otherwise
 * — with req->status_ set when its conditions failed (nothing written) —,
 * or FORM_NO_ROOM (nothing written, status not set: form_req). */
static int form_req_once(kv_db *db, struct kv_req *req, uint64_t now)
{
	struct batch *b = &db->batch;
	size_t ov_mark = b->nov, len_mark = b->len, i;
	uint64_t ver_mark = db->next_version, bytes = req_bytes(req);
	uint64_t vl_mark = b->val_logical, vs_mark = b->val_stored, vc_mark = b->val_compressed;
	uint64_t blobs_mark = b->blobs;
	int64_t keys_mark = b->keys_delta, bytes_mark = b->bytes_delta;
	size_t evict_mark = b->evict_pos;
	uint64_t evictions_mark = b->evictions;
	size_t last_rec = SIZE_MAX, last_put = SIZE_MAX;
	uint32_t codec_cfg = atomic_load(&db->codec_cfg);
	enum kv_codec codec = (enum kv_codec)(codec_cfg & 0xffu);
	int level = (int)(codec_cfg >> 8);
	int rv = 0;

	if (b->len > 0 && b->len + bytes > BATCH_BYTES_MAX)
		return 1;
	if (db->active == NULL && (rv = write_roll(db)) != 0)
		goto fail; /* opened on a full device: still no room (recovery.c) */
	if (db->tail + b->len + bytes > db->opt.segment_size) {
		/* a request never straddles segments; one larger than a whole
		 * segment gets a fresh segment to itself */
		if (b->len > 0)
			return 1;
		if (db->tail > SEG_HEADER_SIZE && (rv = write_roll(db)) != 0)
			goto fail;
	}
	if ((rv = batch_reserve(b, (size_t)bytes)) != 0)
		goto fail;

	for (i = 0; i < req->n; i++) {
		struct kv_op *op = &req->ops[i];
		uint32_t h;
		struct kd_entry cur, e;
		struct rec_header rh;
		const void *value = op->value;
		bool found, counted, exists, puts = op->type != KV_OP_DELETE;
		uint32_t rec_off, size;
		/* a blob's chunk bytes, and those of the blob head it replaces
		 * (blob.h invariant 3): what max_bytes counts */
		uint64_t chunks = 0, old_chunks = 0;

		if (op->type == KV_OP_BLOB_CHUNK) {
			last_rec = (size_t)b->len;
			b->len += encode_chunk(db, b, op, now, codec, level);
			continue;
		}
		if (op->type == KV_OP_BLOB_PUT && i > 0 && req->ops[i - 1].type == KV_OP_BLOB_CHUNK)
			blob_complete(op, &req->ops[i - 1], b->buf + last_rec);
		if (op->type == KV_OP_BLOB_PUT) {
			b->blobs++;
			chunks = blob_desc_stored(op->value);
		}
		h = key_hash(op->key, op->key_len);
		found = head_of(db, op->key, op->key_len, h, &cur);
		/* counted in live_keys (an expired key is until merge drops it) */
		counted = found && !(cur.flags & KD_F_TOMBSTONE);
		exists = counted && !((cur.flags & KD_F_TTL) && db_expired(db, cur.expiry_ms, now));
		if (counted)
			old_chunks = blobmap_get(&db->blob_heads, loc_make(cur.seg, cur.off));

		if (op->if_version != KV_ANY_VERSION) {
			bool ok = op->if_version == 0 ? !exists
			                              : exists && cur.version == op->if_version;
			if (!ok) {
				rv = op->status = KV_ECONFLICT;
				goto fail;
			}
		}
		if (op->type == KV_OP_DELETE && !exists) {
			op->version = 0;
			if (req->flags_ & REQ_F_SINGLE_DELETE) {
				rv = op->status = KV_ENOTFOUND;
				goto fail;
			}
			continue;
		}

		memset(&rh, 0, sizeof(rh));
		rh.type = op->type == KV_OP_PUT      ? REC_PUT
		          : op->type == KV_OP_DELETE ? REC_DELETE
		                                     : REC_BLOB;
		rh.flags = REC_F_BATCH_MORE;
		rh.key_len = (uint32_t)op->key_len;
		rh.value_len = puts ? (uint32_t)op->value_len : 0;
		if (op->type == KV_OP_PUT)
			value = encode_value(db, b, op, codec, level, &rh);
		rh.version = db->next_version++;
		rh.timestamp_ms = now;
		rh.expiry_ms = puts ? expiry_of(now, op->ttl_ms) : 0;
		if (found) {
			rh.prev_seg = cur.seg;
			rh.prev_off = cur.off;
		}
		rec_off = (uint32_t)b->len;
		rec_encode(b->buf + b->len, &rh, op->key, value, db->active->crc_seed);
		size = (uint32_t)rec_size(rh.key_len, rh.value_len);
		b->len += size;
		last_rec = rec_off;

		e.version = rh.version;
		e.seg = db->active->id;
		e.off = (uint32_t)(db->tail + rec_off);
		e.size = size;
		e.flags = (rh.type == REC_DELETE ? KD_F_TOMBSTONE : 0) | (rh.expiry_ms ? KD_F_TTL : 0);
		e.expiry_ms = rh.expiry_ms;
		if ((rv = ov_push(b, op->key, op->key_len, h, rec_off, &e)) != 0)
			goto fail;
		op->version = rh.version;
		if (op->type == KV_OP_DELETE) {
			b->keys_delta--;
			b->bytes_delta -= (int64_t)(cur.size + old_chunks);
			continue;
		}
		b->keys_delta += !counted;
		b->bytes_delta += (int64_t)(size + chunks) -
		                  (counted ? (int64_t)(cur.size + old_chunks) : 0);
		last_put = i;
		/* refuse: each put on its own, as it comes */
		if (db->opt.evict != KV_EVICT_OLDEST &&
		    (rv = fit_limits(db, !counted,
		                     size + chunks > (counted ? cur.size + old_chunks : 0), now,
		                     &last_rec)) != 0) {
			op->status = rv;
			goto fail;
		}
	}
	/* oldest: once every key of the request is in the overlay, so none of
	 * them is evicted, for what the request adds as a whole */
	if (db->opt.evict == KV_EVICT_OLDEST &&
	    (rv = fit_limits(db, b->keys_delta > keys_mark, b->bytes_delta > bytes_mark, now,
	                     &last_rec)) != 0) {
		if (rv == KV_EMAXKEYS && last_put != SIZE_MAX)
			req->ops[last_put].status = rv;
		goto fail;
	}
	if (last_rec != SIZE_MAX) {
		/* the last record closes the request: clear its flag, fix its crc */
		uint8_t *p = b->buf + last_rec;
		struct rec_header rh;
		rec_decode_header(p, &rh);
		rh.flags &= (uint8_t)~REC_F_BATCH_MORE;
		rec_encode(p, &rh, p + REC_HEADER_SIZE, p + REC_HEADER_SIZE + rh.key_len,
		           db->active->crc_seed);
	}
	batch_add_req(b, req);
	return 0;
fail:
	ov_truncate(b, ov_mark);
	b->len = len_mark;
	b->keys_delta = keys_mark;
	b->bytes_delta = bytes_mark;
	b->evict_pos = evict_mark;
	b->evictions = evictions_mark;
	b->val_logical = vl_mark;
	b->val_stored = vs_mark;
	b->val_compressed = vc_mark;
	b->blobs = blobs_mark;
	db->next_version = ver_mark;
	for (i = 0; i < req->n; i++)
		req->ops[i].version = 0;
	if (rv == FORM_NO_ROOM)
		return rv;
	req->status_ = rv;
	batch_add_req(b, req);
	return 0;
}

/* The chunks of a batch that landed join their uploads (blob.h). */
static void chunks_landed(kv_db *db, struct batch *b)
{
	const struct kv_req *r;
	size_t i;

	for (r = b->head; r != NULL; r = r->next_) {
		if (r->status_ != 0 || (r->flags_ & REQ_F_BARRIER))
			continue;
		for (i = 0; i < r->n; i++) {
			struct kv_op *op = &r->ops[i];
			struct rec_header h;
			if (op->type != KV_OP_BLOB_CHUNK)
				continue;
			/* a batch is within one segment, from db->tail on */
			rec_decode_header(b->buf + (loc_off(op->loc_) - db->tail), &h);
			blob_chunk_landed(op, rec_size(h.key_len, h.value_len));
		}
	}
}

/* form_req_once; a request whose evictions do not fit in what is left of
 * the active segment goes back to the queue to start the next batch, and
 * a first request of a batch gets a fresh segment. [driver] */
static int form_req(kv_db *db, struct kv_req *req, uint64_t now)
{
	int rv = form_req_once(db, req, now);

	if (rv != FORM_NO_ROOM)
		return rv;
	if (db->batch.len > 0)
		return 1;
	if (db->tail > SEG_HEADER_SIZE && (rv = write_roll(db)) == 0 &&
	    (rv = form_req_once(db, req, now)) != FORM_NO_ROOM)
		return rv;
	/* a whole segment holds neither it and its evictions, or rolling failed */
	for (size_t i = 0; i < req->n; i++)
		req->ops[i].version = 0;
	req->status_ = rv == FORM_NO_ROOM ? KV_EMAXKEYS : rv;
	batch_add_req(&db->batch, req);
	return 0;
}

static void batch_finish(kv_db *db, const struct kv_stor_wres *res)
{
	struct batch *b = &db->batch;
	struct kv_req *r;
	int err = res->err;
	size_t i;

	if (err == 0) {
		if (b->blobs > 0)
			chunks_landed(db, b);
		pthread_rwlock_wrlock(&db->kd_lock);
		for (i = 0; i < b->nov; i++) {
			const struct kd_entry *e = &b->ov[i].e;
			struct kd_entry old;
			bool replaced;
			int rv = keydir_put(db->kd, ov_key(b, &b->ov[i]), b->ov[i].key_len, e, &old,
			                    &replaced);
			if (rv != 0) {
				/* durable on disk but not indexed: refuse writes until reopen */
				atomic_store(&db->read_only, true);
				db->order.stale = true;
				err = rv;
				break;
			}
			db_account(db, e, &old, replaced);
			if (replaced && db->blob_heads.n > 0)
				blob_account_replaced(db, loc_make(old.seg, old.off));
			if (b->blobs > 0)
				blob_account_apply(db, b->buf + b->ov[i].rec_off, loc_make(e->seg, e->off));
			if (db->opt.evict == KV_EVICT_OLDEST) {
				if (replaced && !(old.flags & KD_F_TOMBSTONE))
					evict_order_forget(&db->order, old.version);
				if (!(e->flags & KD_F_TOMBSTONE))
					evict_order_append(&db->order, e->version,
					                   loc_make(e->seg, e->off));
			}
		}
		db->disk_bytes += b->len;
		pthread_rwlock_unlock(&db->kd_lock);
		collect_batch(db, db->tail);
		db->tail += b->len;
		atomic_store(&db->committed_version, db->next_version - 1);
		if (db->active != NULL) /* (none: nothing was written) */
			atomic_store(&db->written_loc,
			             loc_make(db->active->id, (uint32_t)db->tail));
		if (db->opt.sync == KV_SYNC_ALWAYS && b->synced) {
			atomic_store(&db->durable_loc, atomic_load(&db->written_loc));
			db_count_sync(db, b->start_us);
			db->chunks_unsynced = false;
		} else if (db->opt.sync == KV_SYNC_ALWAYS) {
			db->chunks_unsynced = true;
		} else {
			atomic_fetch_add(&db->unsynced_bytes, b->len);
		}
		db_count_batch(db, b->nreqs);
		atomic_fetch_add(&db->value_logical_bytes, b->val_logical);
		atomic_fetch_add(&db->value_stored_bytes, b->val_stored);
		atomic_fetch_add(&db->values_compressed, b->val_compressed);
		atomic_fetch_add(&db->evictions, b->evictions);
		atomic_store(&db->evict_bytes, evict_order_memory(&db->order));
	} else {
		/* Nothing of a failed batch should survive: cut the segment back.
		 * After a failed fdatasync the kernel may have dropped pages it
		 * could not write, so the database also stops taking writes. */
		if (stor_seg_truncate(db->active->h, db->tail) != 0 || res->sync_failed)
			atomic_store(&db->read_only, true);
		db->next_version = b->first_version;
	}
	for (r = b->head; r != NULL; r = r->next_) {
		if (r->status_ == 0 && err != 0) {
			r->status_ = err;
			for (i = 0; i < r->n; i++)
				r->ops[i].version = 0;
		}
	}
	r = b->head;
	batch_reset(b);
	db->in_flight = false;
	complete_list(db, r);
}

/* Ends the batch with a sync mark when a sync has made more of the active
 * segment durable than the last mark said, at most once per sync interval:
 * recovery then tells a hole that unsynced writes left (cut, as a torn
 * write) from damage to what was durable (reported). [driver] */
static void add_sync_mark(kv_db *db, uint64_t now)
{
	struct batch *b = &db->batch;
	uint64_t durable = atomic_load(&db->durable_loc);
	struct rec_header rh;
	uint8_t val[8];

	if (loc_seg(durable) != db->active->id || durable <= db->mark_loc ||
	    now - db->mark_ms < db->opt.sync_interval_ms ||
	    db->tail + b->len + REC_SYNC_SIZE > db->opt.segment_size ||
	    batch_reserve(b, REC_SYNC_SIZE) != 0)
		return;
	memset(&rh, 0, sizeof(rh));
	rh.type = REC_SYNC;
	rh.value_len = 8;
	rh.timestamp_ms = now;
	put_le64(val, loc_off(durable));
	rec_encode(b->buf + b->len, &rh, NULL, val, db->active->crc_seed);
	b->len += REC_SYNC_SIZE;
	db->mark_loc = durable;
	db->mark_ms = now;
}

/* Takes the next barrier or run of writes off the queue and starts it.
 * Returns false when the queue was empty. [driver] */
static bool form_and_start(kv_db *db)
{
	struct batch *b = &db->batch;
	struct kv_req *req, *rest;
	uint64_t now;
	size_t taken = 0;

	pthread_mutex_lock(&db->mu);
	req = db->q_head;
	if (req == NULL) {
		pthread_mutex_unlock(&db->mu);
		return false;
	}
	if (req->flags_ & REQ_F_BARRIER) {
		struct barrier *br = (struct barrier *)req;
		db->q_head = req->next_;
		if (db->q_head == NULL)
			db->q_tail = NULL;
		pthread_mutex_unlock(&db->mu);
		req->next_ = NULL;
		req->status_ = br->fn(db, br->arg);
		complete_list(db, req);
		return true;
	}
	/* detach the run of writes up to the next barrier */
	rest = req;
	{
		struct kv_req *last = NULL, *r = req;
		while (r != NULL && !(r->flags_ & REQ_F_BARRIER) && taken < BATCH_REQS_MAX) {
			last = r;
			r = r->next_;
			taken++;
		}
		db->q_head = r;
		if (r == NULL)
			db->q_tail = NULL;
		last->next_ = NULL;
	}
	pthread_mutex_unlock(&db->mu);

	now = db_now(db);
	b->first_version = db->next_version;
	if (db->opt.evict == KV_EVICT_OLDEST) {
		/* (an append that failed for memory: rebuilt, or evicts nothing) */
		if (db->order.stale)
			evict_order_build(&db->order, db->kd);
		b->evict_pos = db->order.head;
	}
	while (rest != NULL) {
		struct kv_req *next = rest->next_;
		if (atomic_load(&db->read_only)) {
			rest->status_ = KV_EREADONLY;
			batch_add_req(b, rest);
		} else if (form_req(db, rest, now) == 1) {
			/* put it and everything after it back at the queue head */
			struct kv_req *last = rest;
			while (last->next_ != NULL)
				last = last->next_;
			pthread_mutex_lock(&db->mu);
			last->next_ = db->q_head;
			if (db->q_head == NULL)
				db->q_tail = last;
			db->q_head = rest;
			pthread_mutex_unlock(&db->mu);
			break;
		}
		rest = next;
	}
	if (b->len > 0)
		add_sync_mark(db, now);
	if (b->len == 0) {
		/* only failed conditions and no-op deletes: nothing to write */
		struct kv_stor_wres ok = {0, false};
		db->in_flight = true;
		batch_finish(db, &ok);
		return true;
	}
	db->in_flight = true;
	{
		int rv = reserve_space(db, b->len);
		/* META promises no version above its mark was handed out, and
		 * says (format 3) that values may be compressed before any is,
		 * (format 4) that blobs may be there before any is */
		bool v3 = b->val_compressed > 0 && !atomic_load(&db->meta_v3);
		bool v4 = b->blobs > 0 && !atomic_load(&db->meta_v4); /* (4: blobs may be there) */
		if (rv == 0 && (v3 || v4 || db->next_version - 1 > db->version_mark)) {
			if (v3)
				atomic_store(&db->meta_v3, true);
			if (v4)
				atomic_store(&db->meta_v4, true);
			if ((rv = manifest_write(db)) != 0) {
				/* tried again with the next batch */
				if (v3)
					atomic_store(&db->meta_v3, false);
				if (v4)
					atomic_store(&db->meta_v4, false);
			}
		}
		if (rv != 0) {
			struct kv_stor_wres full = {rv, false};
			batch_finish(db, &full);
			return true;
		}
	}
	b->start_us = db_clock_us();
	/* Under sync=always a batch of blob chunks alone is not synced: what
	 * waits for it is the blob's commit, whose batch syncs them all (an
	 * explicit sync first, for a device whose synced write covers only
	 * itself; the roll syncs a segment left with such chunks). */
	b->synced = db->opt.sync == KV_SYNC_ALWAYS && !(b->nov == 0 && b->blobs > 0);
	if (b->synced && db->chunks_unsynced && stor_seg_sync(db->active->h) != 0) {
		struct kv_stor_wres fail = {-EIO, false};
		atomic_store(&db->read_only, true);
		batch_finish(db, &fail);
		return true;
	}
	if (stor_append_start(db->wr, db->active->h, b->buf, b->len, db->tail, b->synced) != 0) {
		struct kv_stor_wres fail = {-EIO, false};
		batch_finish(db, &fail);
	}
	return true;
}

/* One step of the write path. Returns true when it made progress. [driver] */
static bool drive_step(kv_db *db, bool wait)
{
	if (db->in_flight) {
		struct kv_stor_wres res;
		int r = stor_append_poll(db->wr, wait, &res);
		if (r == 0)
			return false;
		if (r < 0) {
			res.err = r;
			res.sync_failed = false;
		}
		batch_finish(db, &res);
		return true;
	}
	return form_and_start(db);
}

int write_run(kv_db *db, struct kv_req *req)
{
	int rv;

	req->flags_ |= REQ_F_BLOCKING;
	if ((rv = write_submit(db, req)) != 0)
		return rv;
	pthread_mutex_lock(&db->mu);
	while (!(req->flags_ & REQ_F_DONE)) {
		if (!db->driving && !db->opt.external_loop) {
			db->driving = true;
			pthread_mutex_unlock(&db->mu);
			for (;;) {
				drive_step(db, true);
				pthread_mutex_lock(&db->mu);
				if (req->flags_ & REQ_F_DONE)
					break;
				pthread_mutex_unlock(&db->mu);
			}
			db->driving = false;
			pthread_cond_broadcast(&db->cv);
		} else {
			pthread_cond_wait(&db->cv, &db->mu);
		}
	}
	rv = req->status_;
	pthread_mutex_unlock(&db->mu);
	return rv;
}

int write_barrier(kv_db *db, int (*fn)(kv_db *db, void *arg), void *arg)
{
	struct barrier b;

	memset(&b, 0, sizeof(b));
	b.req.flags_ = REQ_F_BARRIER;
	b.fn = fn;
	b.arg = arg;
	return write_run(db, &b.req);
}

/* ---- public ------------------------------------------------------------ */

int kv_put(kv_db *db, const void *key, size_t key_len, const void *value, size_t value_len,
           const struct kv_write_opts *opts, uint64_t *ret_version)
{
	struct kv_op op = {
		.type = KV_OP_PUT,
		.key = key,
		.key_len = key_len,
		.value = value,
		.value_len = value_len,
		.if_version = opts ? opts->if_version : KV_ANY_VERSION,
		.ttl_ms = opts ? opts->ttl_ms : 0,
	};
	struct kv_req req = {.ops = &op, .n = 1};
	int rv;

	if ((rv = write_run(db, &req)) != 0)
		return rv;
	if (ret_version)
		*ret_version = op.version;
	return 0;
}

int kv_delete(kv_db *db, const void *key, size_t key_len, const struct kv_write_opts *opts,
              uint64_t *ret_version)
{
	struct kv_op op = {
		.type = KV_OP_DELETE,
		.key = key,
		.key_len = key_len,
		.if_version = opts ? opts->if_version : KV_ANY_VERSION,
	};
	struct kv_req req = {.ops = &op, .n = 1, .flags_ = REQ_F_SINGLE_DELETE};
	int rv;

	if ((rv = write_run(db, &req)) != 0)
		return rv;
	if (ret_version)
		*ret_version = op.version;
	return 0;
}

int kv_batch(kv_db *db, struct kv_op *ops, size_t n)
{
	struct kv_req req = {.ops = ops, .n = n};

	return write_run(db, &req);
}

int kv_submit(kv_db *db, struct kv_req *req)
{
	if (req == NULL || req->done == NULL)
		return -EINVAL;
	req->flags_ = 0;
	return write_submit(db, req);
}

int kv_event_fd(kv_db *db)
{
	return db->efd;
}

int kv_process(kv_db *db)
{
	uint64_t v;

	/* one read takes the whole count */
	if (db->efd >= 0 && read(db->efd, &v, sizeof(v)) < 0 && errno != EAGAIN && errno != EINTR)
		return -errno;
	pthread_mutex_lock(&db->mu);
	if (db->driving) {
		pthread_mutex_unlock(&db->mu);
		return 0;
	}
	db->driving = true;
	pthread_mutex_unlock(&db->mu);
	while (drive_step(db, false))
		;
	pthread_mutex_lock(&db->mu);
	db->driving = false;
	pthread_cond_broadcast(&db->cv);
	pthread_mutex_unlock(&db->mu);
	return 0;
}
