/* hint.c — write and load hint files. */
#include "hint.h"

#include "crc.h"
#include "endian_util.h"
#include "kvengine.h"
#include "record.h"
#include "segment.h"
#include "storage.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void hint_writer_init(struct hint_writer *w)
{
	memset(w, 0, sizeof(*w));
}

void hint_writer_release(struct hint_writer *w)
{
	if (w == NULL)
		return;
	free(w->buf);
	memset(w, 0, sizeof(*w));
}

static int hint_reserve(struct hint_writer *w, size_t more)
{
	size_t cap;
	uint8_t *nb;

	if (w->len + more <= w->cap)
		return 0;
	cap = w->cap ? w->cap : 4096;
	while (cap < w->len + more)
		cap *= 2;
	if ((nb = realloc(w->buf, cap)) == NULL)
		return -ENOMEM;
	w->buf = nb;
	w->cap = cap;
	return 0;
}

int hint_writer_add(struct hint_writer *w, const struct hint_ent *e)
{
	uint8_t *p;
	int rv;

	if (w->len == 0 && (rv = hint_reserve(w, HINT_HEADER_SIZE)) == 0)
		w->len = HINT_HEADER_SIZE; /* room for the header */
	if ((rv = hint_reserve(w, HINT_ENTRY_SIZE + e->key_len)) != 0)
		return rv;
	p = w->buf + w->len;
	p[0] = e->type;
	p[1] = e->flags;
	put_le16(p + 2, 0);
	put_le32(p + 4, e->key_len);
	put_le64(p + 8, e->version);
	put_le32(p + 16, e->off);
	put_le32(p + 20, e->size);
	put_le64(p + 24, e->expiry_ms);
	memcpy(p + HINT_ENTRY_SIZE, e->key, e->key_len);
	w->len += HINT_ENTRY_SIZE + e->key_len;
	w->count++;
	return 0;
}

int hint_writer_finish(struct hint_writer *w, struct kv_stor_tenant *t, uint32_t seg_id)
{
	uint8_t *h;
	int rv;

	if (w->len == 0 && (rv = hint_reserve(w, HINT_HEADER_SIZE)) == 0)
		w->len = HINT_HEADER_SIZE;
	if ((rv = hint_reserve(w, HINT_FOOTER_SIZE)) != 0)
		goto out;
	h = w->buf;
	memcpy(h, HINT_MAGIC, 8);
	put_le32(h + 8, HINT_FORMAT_VERSION);
	put_le32(h + 12, seg_id);
	put_le64(h + 16, w->count);
	put_le32(h + 24, 0);
	put_le32(h + 28, crc32c(h, 28));
	put_le32(w->buf + w->len,
	         crc32c(w->buf + HINT_HEADER_SIZE, w->len - HINT_HEADER_SIZE));
	memcpy(w->buf + w->len + 4, "HEND", 4);
	w->len += HINT_FOOTER_SIZE;

	/* Not synced: a hint is checked whole before use, and a hint that a
	 * crash left torn or empty is rejected and its segment scanned. */
	rv = stor_hint_put(t, seg_id, w->buf, w->len);
out:
	w->len = 0;
	w->count = 0;
	return rv;
}

/* Walks entries of a checked buffer; fn == NULL only validates. */
static int hint_walk(const uint8_t *p, size_t len, uint64_t count, uint64_t seg_size,
                     uint32_t max_key, hint_visit_fn fn, void *arg)
{
	size_t off = 0;
	uint64_t i;
	int rv;

	for (i = 0; i < count; i++) {
		struct hint_ent e;
		if (len - off < HINT_ENTRY_SIZE)
			return KV_ECORRUPT;
		e.type = p[off];
		e.flags = p[off + 1];
		e.key_len = get_le32(p + off + 4);
		e.version = get_le64(p + off + 8);
		e.off = get_le32(p + off + 16);
		e.size = get_le32(p + off + 20);
		e.expiry_ms = get_le64(p + off + 24);
		if (!rec_type_keyed(e.type))
			return KV_ECORRUPT;
		/* a chunk has no version; everything else has one */
		if (e.key_len == 0 || e.key_len > max_key || (e.version == 0) != (e.type == REC_CHUNK))
			return KV_ECORRUPT;
		if (len - off - HINT_ENTRY_SIZE < e.key_len)
			return KV_ECORRUPT;
		if (e.size < rec_size(e.key_len, 0) || e.off < SEG_HEADER_SIZE ||
		    (uint64_t)e.off + e.size > seg_size)
			return KV_ECORRUPT;
		e.key = p + off + HINT_ENTRY_SIZE;
		off += HINT_ENTRY_SIZE + e.key_len;
		if (fn != NULL && (rv = fn(arg, &e)) != 0)
			return rv;
	}
	return off == len ? 0 : KV_ECORRUPT;
}

int hint_parse(const uint8_t *buf, size_t len, uint32_t seg_id, uint64_t seg_size, uint32_t max_key,
               hint_visit_fn fn, void *arg)
{
	uint64_t count;
	size_t body;
	int rv;

	if (len < HINT_HEADER_SIZE + HINT_FOOTER_SIZE)
		return KV_ECORRUPT;
	if (memcmp(buf, HINT_MAGIC, 8) != 0 || crc32c(buf, 28) != get_le32(buf + 28))
		return KV_ECORRUPT;
	if (get_le32(buf + 8) != HINT_FORMAT_VERSION)
		return KV_EFORMAT;
	if (get_le32(buf + 12) != seg_id || memcmp(buf + len - 4, "HEND", 4) != 0)
		return KV_ECORRUPT;
	count = get_le64(buf + 16);
	body = len - HINT_HEADER_SIZE - HINT_FOOTER_SIZE;
	if (count > body / HINT_ENTRY_SIZE ||
	    crc32c(buf + HINT_HEADER_SIZE, body) != get_le32(buf + len - HINT_FOOTER_SIZE))
		return KV_ECORRUPT;
	/* check everything first, so a bad hint feeds nothing to the caller */
	rv = hint_walk(buf + HINT_HEADER_SIZE, body, count, seg_size, max_key, NULL, NULL);
	if (rv != 0)
		return rv;
	return hint_walk(buf + HINT_HEADER_SIZE, body, count, seg_size, max_key, fn, arg);
}

int hint_load(struct kv_stor_tenant *t, uint32_t seg_id, uint64_t seg_size, uint32_t max_key,
              hint_visit_fn fn, void *arg)
{
	uint8_t *buf;
	size_t len;
	int rv;

	if ((rv = stor_hint_get(t, seg_id, SIZE_MAX, &buf, &len)) != 0)
		return rv;
	if (len < HINT_HEADER_SIZE + HINT_FOOTER_SIZE)
		rv = KV_ECORRUPT;
	else
		rv = hint_parse(buf, len, seg_id, seg_size, max_key, fn, arg);
	free(buf);
	return rv;
}
