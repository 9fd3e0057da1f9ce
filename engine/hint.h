/*
 * hint.h — hint files: for a sealed segment, one entry per record (key,
 * version, offset, size, expiry, type, flags) so opening a database never
 * reads values. Stored by segment id through the storage interface
 * (storage.h; the files backend names it <segment id>.hint); layout in
 * docs/FORMAT.md.
 *
 * Invariants:
 *   1. A hint file exists only for a sealed segment whose data was synced
 *      before the hint was written (segments are synced when sealed); it is
 *      stored whole or not at all (hint_put). It is not synced: a hint a
 *      crash left torn fails its checksums and is ignored.
 *   2. A hint is used only when its header and trailing checksums match and
 *      every entry is within bounds; otherwise the segment is scanned.
 *   3. Entries of an atomic batch are all present or all absent.
 */
#ifndef KV_HINT_H
#define KV_HINT_H

#include <stddef.h>
#include <stdint.h>

struct kv_stor_tenant;

#define HINT_MAGIC "KVDHINT\1"
#define HINT_FORMAT_VERSION 1u
#define HINT_HEADER_SIZE 32u
#define HINT_ENTRY_SIZE 32u
#define HINT_FOOTER_SIZE 8u

struct hint_ent {
	uint8_t type;  /* REC_PUT, REC_DELETE, REC_BLOB, REC_CHUNK (version 0) */
	uint8_t flags; /* REC_F_* */
	uint32_t key_len;
	uint64_t version;
	uint32_t off;
	uint32_t size;
	uint64_t expiry_ms;
	const uint8_t *key;
};

struct hint_writer {
	uint8_t *buf;
	size_t len, cap;
	uint64_t count;
};

void hint_writer_init(struct hint_writer *w);
int hint_writer_add(struct hint_writer *w, const struct hint_ent *e);
/* Stores the hint of segment seg_id (storage.h: hint_put, whole or not at
 * all, not synced). Resets the writer. */
int hint_writer_finish(struct hint_writer *w, struct kv_stor_tenant *t, uint32_t seg_id);
void hint_writer_release(struct hint_writer *w);

typedef int (*hint_visit_fn)(void *arg, const struct hint_ent *e);

/* Checks the len bytes of a hint file whole — magic, header checksum,
 * segment id, footer, entry checksum, count, every entry in bounds (offset
 * ≥ SEG_HEADER_SIZE, offset + size ≤ seg_size, 1 ≤ key length ≤ max_key) —
 * and only then calls fn for each entry, in file order; a buffer that does
 * not check out reports no entry. KV_ECORRUPT, KV_EFORMAT (format version),
 * or the first non-zero return of fn. Entry keys point into buf. */
int hint_parse(const uint8_t *buf, size_t len, uint32_t seg_id, uint64_t seg_size, uint32_t max_key,
               hint_visit_fn fn, void *arg);

/* Loads the hint of segment seg_id and parses it with hint_parse
 * (KV_ECORRUPT, KV_EFORMAT, -ENOENT, -errno). seg_size bounds the offsets. */
int hint_load(struct kv_stor_tenant *t, uint32_t seg_id, uint64_t seg_size, uint32_t max_key,
              hint_visit_fn fn, void *arg);

#endif
