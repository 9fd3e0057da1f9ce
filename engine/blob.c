/*
 * blob.c — uploads, blob descriptors, ranged reads (blob.h, kvengine.h
 * "blobs").
 *
 * An upload buffers what it is given until it fills chunks, then hands the
 * write path one request of chunk ops (KV_OP_BLOB_CHUNK); the driver
 * records where each chunk landed in the upload as the batch lands (under
 * upload_mu, which merge also takes to copy the chunks of open uploads).
 * The commit is one request: the last, partial chunk and the descriptor
 * (KV_OP_BLOB_PUT), whose last location and stored-bytes field the driver
 * completes as it encodes them (write.c), so both land or neither does.
 */
#include "blob.h"

#include "db.h"
#include "endian_util.h"
#include "reloc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

/* The blocking form writes at most this much per request. */
#define UPLOAD_REQ_BYTES (4u << 20)

enum up_state { UP_OPEN, UP_FAILED, UP_COMMITTED };

struct kv_upload {
	kv_db *db;
	uint8_t *key;
	size_t key_len;
	uint32_t chunk_size;
	uint64_t size; /* bytes taken */
	XXH64_state_t *xs;
	uint8_t *buf; /* bytes taken and not yet written */
	size_t buf_len, buf_cap;
	size_t pending; /* bytes of buf the request in flight writes */
	/* written chunks, appended by the driver under db->upload_mu */
	uint64_t *locs;
	uint32_t nlocs, caplocs;
	uint64_t stored; /* their records' bytes */
	struct kv_op *ops;
	size_t capops;
	uint8_t *desc;
	enum up_state state;
	bool busy;   /* a request is in flight */
	bool commit; /* ... and it is the commit */
	struct kv_upload *next, *prev;
};

/* ---- descriptors ------------------------------------------------------- */

int blob_desc_parse(const uint8_t *v, size_t len, struct blob_desc *ret)
{
	struct blob_desc d;

	if (len < BLOB_DESC_HEAD)
		return KV_ECORRUPT;
	d.size = get_le64(v);
	d.chunk_size = get_le32(v + 8);
	d.nchunks = get_le32(v + 12);
	d.xxh64 = get_le64(v + 16);
	d.stored = get_le64(v + 24);
	d.locs = v + BLOB_DESC_HEAD;
	if (d.chunk_size < KV_BLOB_CHUNK_MIN || d.chunk_size > KV_BLOB_CHUNK_MAX ||
	    d.nchunks > KV_BLOB_CHUNKS_MAX || d.size > KV_BLOB_SIZE_MAX ||
	    len != BLOB_DESC_HEAD + 8ull * d.nchunks ||
	    d.nchunks != (d.size + d.chunk_size - 1) / d.chunk_size)
		return KV_ECORRUPT;
	*ret = d;
	return 0;
}

int blob_desc_size(const uint8_t *v, size_t len, uint64_t *ret)
{
	struct blob_desc d;
	int rv;

	if ((rv = blob_desc_parse(v, len, &d)) != 0)
		return rv;
	*ret = d.size;
	return 0;
}

uint64_t blob_desc_loc(const struct blob_desc *d, uint32_t i)
{
	return get_le64(d->locs + 8ull * i);
}

void blob_desc_set_loc(uint8_t *v, uint32_t i, uint64_t loc)
{
	put_le64(v + BLOB_DESC_HEAD + 8ull * i, loc);
}

void blob_desc_set_stored(uint8_t *v, uint64_t stored)
{
	put_le64(v + 24, stored);
}

uint64_t blob_desc_stored(const void *v)
{
	return get_le64((const uint8_t *)v + 24);
}

/* ---- the map of blob heads --------------------------------------------- */

static size_t bm_slot(uint64_t loc, size_t cap)
{
	return (size_t)(XXH3_64bits(&loc, sizeof(loc)) & (cap - 1));
}

void blobmap_release(struct blobmap *m)
{
	free(m->slots);
	memset(m, 0, sizeof(*m));
}

int blobmap_put(struct blobmap *m, uint64_t loc, uint64_t bytes)
{
	size_t i;

	if ((m->n + 1) * 2 > m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 64, j;
		struct blobmap_ent *ns = calloc(cap, sizeof(*ns));
		if (ns == NULL)
			return -ENOMEM;
		for (j = 0; j < m->cap; j++) {
			if (m->slots[j].loc == 0)
				continue;
			for (i = bm_slot(m->slots[j].loc, cap); ns[i].loc != 0; i = (i + 1) & (cap - 1))
				;
			ns[i] = m->slots[j];
		}
		free(m->slots);
		m->slots = ns;
		m->cap = cap;
	}
	for (i = bm_slot(loc, m->cap); m->slots[i].loc != 0; i = (i + 1) & (m->cap - 1)) {
		if (m->slots[i].loc == loc) {
			m->slots[i].bytes = bytes;
			return 0;
		}
	}
	m->slots[i].loc = loc;
	m->slots[i].bytes = bytes;
	m->n++;
	return 0;
}

uint64_t blobmap_get(const struct blobmap *m, uint64_t loc)
{
	size_t i;

	if (m->n == 0)
		return 0;
	for (i = bm_slot(loc, m->cap); m->slots[i].loc != 0; i = (i + 1) & (m->cap - 1))
		if (m->slots[i].loc == loc)
			return m->slots[i].bytes;
	return 0;
}

uint64_t blobmap_take(struct blobmap *m, uint64_t loc)
{
	size_t i, j, mask = m->cap - 1;
	uint64_t bytes;

	if (m->n == 0)
		return 0;
	for (i = bm_slot(loc, m->cap); m->slots[i].loc != loc; i = (i + 1) & mask)
		if (m->slots[i].loc == 0)
			return 0;
	bytes = m->slots[i].bytes;
	/* backward-shift deletion keeps every probe sequence unbroken */
	for (j = (i + 1) & mask; m->slots[j].loc != 0; j = (j + 1) & mask) {
		size_t home = bm_slot(m->slots[j].loc, m->cap);
		if (((j - home) & mask) >= ((j - i) & mask)) {
			m->slots[i] = m->slots[j];
			i = j;
		}
	}
	m->slots[i].loc = 0;
	m->n--;
	return bytes;
}

/* ---- accounting (the driver, under kd_lock exclusive) ------------------ */

void blob_account_apply(kv_db *db, const uint8_t *rec, uint64_t loc)
{
	struct rec_header h;
	struct blob_desc d;

	rec_decode_header(rec, &h);
	if (h.type != REC_BLOB ||
	    blob_desc_parse(rec + REC_HEADER_SIZE + h.key_len, h.value_len, &d) != 0)
		return;
	atomic_fetch_sub(&db->upload_bytes, d.stored);
	if (blobmap_put(&db->blob_heads, loc, d.stored) == 0)
		db->live_bytes += d.stored;
}

void blob_account_replaced(kv_db *db, uint64_t old_loc)
{
	db->live_bytes -= blobmap_take(&db->blob_heads, old_loc);
}

void blob_account_moved(kv_db *db, uint64_t old_loc, uint64_t new_loc)
{
	uint64_t bytes = blobmap_take(&db->blob_heads, old_loc);

	if (bytes > 0 && blobmap_put(&db->blob_heads, new_loc, bytes) != 0)
		db->live_bytes -= bytes; /* not tracked any more: count it out */
}

/* ---- the registry of open uploads -------------------------------------- */

void blob_open_release(struct blob_open *v, size_t n)
{
	if (v == NULL)
		return;
	for (size_t i = 0; i < n; i++) {
		free(v[i].key);
		free(v[i].locs);
	}
	free(v);
}

int blob_open_snapshot(kv_db *db, struct blob_open **ret, size_t *ret_n)
{
	struct kv_upload *u;
	struct blob_open *v = NULL;
	size_t n = 0, i = 0;

	pthread_mutex_lock(&db->upload_mu);
	for (u = db->uploads; u != NULL; u = u->next)
		n++;
	if (n > 0 && (v = calloc(n, sizeof(*v))) == NULL)
		goto nomem;
	for (u = db->uploads; u != NULL; u = u->next, i++) {
		v[i].key_len = u->key_len;
		v[i].n = u->nlocs;
		if ((v[i].key = malloc(u->key_len)) == NULL ||
		    (u->nlocs > 0 && (v[i].locs = malloc(u->nlocs * sizeof(uint64_t))) == NULL))
			goto nomem;
		memcpy(v[i].key, u->key, u->key_len);
		if (u->nlocs > 0)
			memcpy(v[i].locs, u->locs, u->nlocs * sizeof(uint64_t));
	}
	pthread_mutex_unlock(&db->upload_mu);
	*ret = v;
	*ret_n = n;
	return 0;
nomem:
	pthread_mutex_unlock(&db->upload_mu);
	blob_open_release(v, n);
	return -ENOMEM;
}

void blob_uploads_orphan(kv_db *db)
{
	while (db->uploads != NULL)
		kv_upload_close(db->uploads);
}

/* Called by the driver for each chunk op of a batch that landed. */
void blob_chunk_landed(struct kv_op *op, uint64_t rec_bytes)
{
	struct kv_upload *u = op->upload_;
	kv_db *db = u->db;

	atomic_fetch_add(&db->upload_bytes, rec_bytes);
	pthread_mutex_lock(&db->upload_mu);
	if (u->nlocs < u->caplocs) {
		u->locs[u->nlocs++] = op->loc_;
		u->stored += rec_bytes;
	}
	pthread_mutex_unlock(&db->upload_mu);
}

void blob_complete(struct kv_op *put, const struct kv_op *chunk, const uint8_t *chunk_rec)
{
	struct kv_upload *u = put->upload_;
	struct rec_header h;
	uint8_t *desc = (uint8_t *)put->value; /* u->desc */

	rec_decode_header(chunk_rec, &h);
	blob_desc_set_loc(desc, get_le32(desc + 12) - 1, chunk->loc_);
	blob_desc_set_stored(desc, u->stored + rec_size(h.key_len, h.value_len));
}

/* ---- uploads ----------------------------------------------------------- */

int kv_upload_open(kv_db *db, const void *key, size_t key_len, uint32_t chunk_size,
                   kv_upload **ret)
{
	struct kv_upload *u;

	if (key == NULL || key_len == 0 || key_len > db->opt.max_key_size)
		return KV_EKEYSIZE;
	if (chunk_size == 0)
		chunk_size = KV_BLOB_CHUNK_DEFAULT;
	if (chunk_size < KV_BLOB_CHUNK_MIN || chunk_size > KV_BLOB_CHUNK_MAX)
		return -EINVAL;
	if (atomic_load(&db->read_only))
		return KV_EREADONLY;
	if ((u = calloc(1, sizeof(*u))) == NULL)
		return -ENOMEM;
	u->db = db;
	u->chunk_size = chunk_size;
	u->key_len = key_len;
	if ((u->key = malloc(key_len)) == NULL || (u->xs = XXH64_createState()) == NULL) {
		free(u->key);
		free(u);
		return -ENOMEM;
	}
	memcpy(u->key, key, key_len);
	XXH64_reset(u->xs, 0);
	pthread_mutex_lock(&db->mu);
	if (db->closing) {
		pthread_mutex_unlock(&db->mu);
		XXH64_freeState(u->xs);
		free(u->key);
		free(u);
		return KV_ECLOSED;
	}
	pthread_mutex_unlock(&db->mu);
	pthread_mutex_lock(&db->upload_mu);
	u->next = db->uploads;
	if (u->next)
		u->next->prev = u;
	db->uploads = u;
	pthread_mutex_unlock(&db->upload_mu);
	*ret = u;
	return 0;
}

uint64_t kv_upload_size(const kv_upload *u)
{
	return u->size;
}

void kv_upload_close(kv_upload *u)
{
	kv_db *db;

	if (u == NULL)
		return;
	db = u->db;
	pthread_mutex_lock(&db->upload_mu);
	if (u->prev)
		u->prev->next = u->next;
	else
		db->uploads = u->next;
	if (u->next)
		u->next->prev = u->prev;
	pthread_mutex_unlock(&db->upload_mu);
	/* its chunks are garbage now (a committed upload's are the blob's) */
	if (u->state != UP_COMMITTED)
		atomic_fetch_sub(&db->upload_bytes, u->stored);
	XXH64_freeState(u->xs);
	free(u->key);
	free(u->buf);
	free(u->locs);
	free(u->ops);
	free(u->desc);
	free(u);
}

static int upload_ready(const kv_upload *u)
{
	if (u->busy)
		return -EBUSY;
	return u->state == UP_OPEN ? 0 : -EBADFD;
}

/* Room for n more chunk locations and ops. */
static int upload_reserve(kv_upload *u, size_t nops, uint32_t nchunks)
{
	if (nops > u->capops) {
		struct kv_op *no = realloc(u->ops, nops * sizeof(*no));
		if (no == NULL)
			return -ENOMEM;
		u->ops = no;
		u->capops = nops;
	}
	if (u->nlocs + nchunks > u->caplocs) {
		uint32_t cap = u->caplocs ? u->caplocs : 64;
		uint64_t *nl;
		while (cap < u->nlocs + nchunks)
			cap *= 2;
		pthread_mutex_lock(&u->db->upload_mu);
		nl = realloc(u->locs, (size_t)cap * sizeof(*nl));
		if (nl != NULL) {
			u->locs = nl;
			u->caplocs = cap;
		}
		pthread_mutex_unlock(&u->db->upload_mu);
		if (nl == NULL)
			return -ENOMEM;
	}
	return 0;
}

static void chunk_op(kv_upload *u, struct kv_op *op, const uint8_t *data, size_t len)
{
	memset(op, 0, sizeof(*op));
	op->type = KV_OP_BLOB_CHUNK;
	op->key = u->key;
	op->key_len = u->key_len;
	op->value = data;
	op->value_len = len;
	op->if_version = KV_ANY_VERSION;
	op->upload_ = u;
}

int kv_upload_prepare(kv_upload *u, const void *data, size_t len, struct kv_req *req)
{
	uint64_t chunks;
	size_t k, i;
	int rv;

	if ((rv = upload_ready(u)) != 0)
		return rv;
	chunks = (u->size + len + u->chunk_size - 1) / u->chunk_size;
	if (u->size + len > KV_BLOB_SIZE_MAX || chunks > KV_BLOB_CHUNKS_MAX)
		return -EFBIG;
	if (u->buf_len + len > u->buf_cap) {
		size_t cap = u->buf_cap ? u->buf_cap : u->chunk_size;
		uint8_t *nb;
		while (cap < u->buf_len + len)
			cap *= 2;
		if ((nb = realloc(u->buf, cap)) == NULL)
			return -ENOMEM;
		u->buf = nb;
		u->buf_cap = cap;
	}
	k = (u->buf_len + len) / u->chunk_size;
	if ((rv = upload_reserve(u, k, (uint32_t)k)) != 0)
		return rv;
	if (len > 0)
		memcpy(u->buf + u->buf_len, data, len);
	u->buf_len += len;
	u->size += len;
	XXH64_update(u->xs, data, len);
	memset(req, 0, sizeof(*req));
	if (k == 0)
		return 0;
	for (i = 0; i < k; i++)
		chunk_op(u, &u->ops[i], u->buf + i * u->chunk_size, u->chunk_size);
	req->ops = u->ops;
	req->n = k;
	u->pending = k * u->chunk_size;
	u->busy = true;
	u->commit = false;
	return 0;
}

int kv_upload_commit_prepare(kv_upload *u, const struct kv_write_opts *opts, struct kv_req *req)
{
	uint32_t n;
	size_t nops = 0, dlen;
	struct kv_op *op;
	int rv;

	if ((rv = upload_ready(u)) != 0)
		return rv;
	n = u->nlocs + (u->buf_len > 0);
	dlen = BLOB_DESC_HEAD + 8ull * n;
	if ((rv = upload_reserve(u, 2, 1)) != 0)
		return rv;
	free(u->desc);
	if ((u->desc = malloc(dlen)) == NULL)
		return -ENOMEM;
	put_le64(u->desc, u->size);
	put_le32(u->desc + 8, u->chunk_size);
	put_le32(u->desc + 12, n);
	put_le64(u->desc + 16, XXH64_digest(u->xs));
	blob_desc_set_stored(u->desc, u->stored);
	for (uint32_t i = 0; i < u->nlocs; i++)
		blob_desc_set_loc(u->desc, i, u->locs[i]);
	if (u->buf_len > 0) {
		/* the write path fills in where it lands (write.c) */
		blob_desc_set_loc(u->desc, n - 1, 0);
		chunk_op(u, &u->ops[nops++], u->buf, u->buf_len);
	}
	op = &u->ops[nops++];
	memset(op, 0, sizeof(*op));
	op->type = KV_OP_BLOB_PUT;
	op->key = u->key;
	op->key_len = u->key_len;
	op->value = u->desc;
	op->value_len = dlen;
	op->if_version = opts ? opts->if_version : KV_ANY_VERSION;
	op->ttl_ms = opts ? opts->ttl_ms : 0;
	op->upload_ = u;
	memset(req, 0, sizeof(*req));
	req->ops = u->ops;
	req->n = nops;
	u->pending = u->buf_len;
	u->busy = true;
	u->commit = true;
	return 0;
}

int kv_upload_written(kv_upload *u, struct kv_req *req, int status, uint64_t *ret_version)
{
	if (!u->busy)
		return -EINVAL;
	u->busy = false;
	if (status != 0) {
		u->state = UP_FAILED;
		return status;
	}
	memmove(u->buf, u->buf + u->pending, u->buf_len - u->pending);
	u->buf_len -= u->pending;
	u->pending = 0;
	if (u->commit) {
		u->state = UP_COMMITTED;
		if (ret_version)
			*ret_version = req->ops[req->n - 1].version;
	}
	return 0;
}

int kv_upload_write(kv_upload *u, const void *data, size_t len)
{
	const uint8_t *p = data;

	while (len > 0) {
		size_t n = len < UPLOAD_REQ_BYTES ? len : UPLOAD_REQ_BYTES;
		struct kv_req req;
		int rv;

		if ((rv = kv_upload_prepare(u, p, n, &req)) != 0)
			return rv;
		if (req.n > 0) {
			rv = write_run(u->db, &req);
			if ((rv = kv_upload_written(u, &req, rv, NULL)) != 0)
				return rv;
		}
		p += n;
		len -= n;
	}
	return 0;
}

int kv_upload_commit(kv_upload *u, const struct kv_write_opts *opts, uint64_t *ret_version)
{
	struct kv_req req;
	int rv;

	if ((rv = kv_upload_commit_prepare(u, opts, &req)) != 0)
		return rv;
	rv = write_run(u->db, &req);
	return kv_upload_written(u, &req, rv, ret_version);
}

/* ---- reads ------------------------------------------------------------- */

/* The descriptor record of key at the version opts asks for. */
static int blob_lookup(kv_db *db, const void *key, size_t key_len,
                       const struct kv_read_opts *opts, struct rec_read *ret_r,
                       struct blob_desc *ret_d, struct kv_blob_info *ret_info)
{
	struct rec_read r;
	int rv;

	if ((rv = get_record(db, key, key_len, opts, &r)) != 0)
		return rv;
	if (r.h.type != REC_BLOB) {
		rec_read_release(&r);
		return KV_ENOTBLOB;
	}
	if ((rv = blob_desc_parse(r.value, r.h.value_len, ret_d)) != 0) {
		rec_read_release(&r);
		return rv;
	}
	if (ret_info) {
		ret_info->size = ret_d->size;
		ret_info->chunk_size = ret_d->chunk_size;
		ret_info->chunks = ret_d->nchunks;
		ret_info->xxh64 = ret_d->xxh64;
		ret_info->stored_bytes = ret_d->stored;
		ret_info->version = r.h.version;
		ret_info->timestamp_ms = r.h.timestamp_ms;
		ret_info->expiry_ms = r.h.expiry_ms;
	}
	*ret_r = r;
	return 0;
}

int kv_blob_info(kv_db *db, const void *key, size_t key_len, const struct kv_read_opts *opts,
                 struct kv_blob_info *ret)
{
	struct rec_read r;
	struct blob_desc d;
	int rv;

	if ((rv = blob_lookup(db, key, key_len, opts, &r, &d, ret)) != 0)
		return rv;
	rec_read_release(&r);
	return 0;
}

/* One chunk's bytes, decompressed: *ret_data points into *r. */
static int read_chunk(kv_db *db, uint64_t loc, const void *key, size_t key_len, uint32_t want,
                      struct rec_read *r, const uint8_t **ret_data)
{
	size_t len;
	int rv;

	if (loc == 0)
		return KV_ECORRUPT; /* merge found it damaged */
	if ((rv = read_at(db, loc, key, key_len, true, r)) != 0)
		return rv == -ENOENT ? KV_ECORRUPT : rv;
	if (r->h.type != REC_CHUNK) {
		rec_read_release(r);
		return KV_ECORRUPT;
	}
	if ((rv = rec_read_value(r, &len)) != 0) {
		rec_read_release(r);
		return rv;
	}
	if (len != want) {
		rec_read_release(r);
		return KV_ECORRUPT;
	}
	*ret_data = r->value;
	return 0;
}

int kv_blob_read(kv_db *db, const void *key, size_t key_len, const struct kv_read_opts *opts,
                 uint64_t offset, void *buf, size_t len, size_t *ret_n,
                 struct kv_blob_info *ret_info)
{
	struct kv_blob_info info;
	struct rec_read r;
	struct blob_desc d;
	uint8_t *out = buf;
	size_t done = 0;
	int rv;

	if ((rv = blob_lookup(db, key, key_len, opts, &r, &d, &info)) != 0)
		return rv;
	if (offset < d.size && len > d.size - offset)
		len = (size_t)(d.size - offset);
	while (offset < d.size && done < len) {
		uint32_t i = (uint32_t)(offset / d.chunk_size);
		uint32_t in = (uint32_t)(offset % d.chunk_size);
		uint32_t csize = i + 1 < d.nchunks ? d.chunk_size
		                                   : (uint32_t)(d.size - (uint64_t)i * d.chunk_size);
		size_t take = csize - in;
		struct rec_read c;
		const uint8_t *p;

		if (take > len - done)
			take = len - done;
		if ((rv = read_chunk(db, blob_desc_loc(&d, i), key, key_len, csize, &c, &p)) != 0) {
			rec_read_release(&r);
			return rv;
		}
		memcpy(out + done, p + in, take);
		rec_read_release(&c);
		done += take;
		offset += take;
	}
	rec_read_release(&r);
	*ret_n = done;
	if (ret_info)
		*ret_info = info;
	return 0;
}
