/*
 * dev_layout.h — the on-device layout of the block-device backend
 * (docs/FORMAT.md, "Device layout"), byte by byte, and its encoders.
 * Every integer is little-endian; every structure ends in a CRC32C of the
 * bytes before it.
 *
 *   block 0                   superblock, copy 0
 *   [catalog_off, +slot)      catalog slot 0 of node 1
 *   [+slot, +2·slot)          catalog slot 1 of node 1
 *   [+2(k-1)·slot, +2k·slot)  the slot pair of node k (a shared device:
 *                             max_nodes > 1)
 *   [data_off + i·extent)     extent i (0 ≤ i < extent_count): its first
 *                             block is the extent header, then data
 *   last block                superblock, copy 1 (written first by format)
 *
 * A block is the device's I/O unit: the largest of 4096, its logical and
 * physical block sizes and its direct-I/O alignment. Every write covers
 * whole blocks (never a read-modify-write inside the device).
 *
 * Catalog: two slots, written in turn; each holds a header (sequence, body
 * length, node, epoch, device uuid, CRC32C over header and body) and the
 * body: the tenant table, each tenant's objects (segments, hints, metadata
 * blobs) and the extent table. The valid slot with the highest sequence is
 * the catalog; a torn write of one slot leaves the other.
 */
#ifndef KV_DEV_LAYOUT_H
#define KV_DEV_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DEV_SB_MAGIC "KVDDEV\0\1"
#define DEV_CAT_MAGIC "KVDCAT\0\1"
#define DEV_EXT_MAGIC "KVDEXT\0\1"
#define DEV_FORMAT_VERSION 1u
#define DEV_SB_SIZE 512u        /* bytes of the superblock that carry data */
#define DEV_CAT_HEADER 64u
#define DEV_EXT_HEADER 64u
#define DEV_BLOCK_MIN 4096u
#define DEV_ZERO_SPAN (1u << 20) /* format zeroes the first and last MiB */

struct dev_super {
	uint32_t version;
	uint32_t block_size;
	uint8_t uuid[16];
	uint32_t logical_block;
	uint32_t physical_block;
	uint64_t device_size;
	uint64_t extent_size;
	uint32_t extent_count;
	uint32_t max_nodes;
	uint64_t catalog_off;
	uint64_t catalog_slot; /* bytes of one slot, a multiple of block_size */
	uint64_t data_off;
	uint64_t created_ms;
};

/* Writes the superblock into buf (DEV_SB_SIZE bytes, CRC included). */
void dev_super_encode(uint8_t *buf, const struct dev_super *sb);
/* 0, KV_ECORRUPT (magic or CRC), KV_EFORMAT (a version not understood,
 * or fields that contradict each other). */
int dev_super_decode(const uint8_t *buf, struct dev_super *ret);

/* The byte offset of extent i and of its first data byte. */
static inline uint64_t dev_extent_off(const struct dev_super *sb, uint32_t i)
{
	return sb->data_off + (uint64_t)i * sb->extent_size;
}

/* What an extent holds (extent header and extent table). */
enum dev_ext_kind {
	DEV_EXT_FREE = 0,
	DEV_EXT_SEG = 1, /* one segment of a tenant; position: the segment id */
	DEV_EXT_AUX = 2, /* hints and large metadata blobs of a tenant; position: a count */
};

struct dev_ext_header {
	uint8_t uuid[16];
	uint32_t tenant;
	uint32_t position;
	uint32_t generation;
	uint8_t kind;
	uint64_t epoch;
	uint32_t node;
};

void dev_ext_encode(uint8_t *buf, const struct dev_ext_header *h);
int dev_ext_decode(const uint8_t *buf, struct dev_ext_header *ret);

/* The crc seed of the records of a segment in extent i at generation g
 * (record.h invariant 1): never 0, different for every (uuid, i, g). */
uint32_t dev_seg_seed(const uint8_t uuid[16], uint32_t extent, uint32_t generation);

struct dev_cat_header {
	uint64_t seq;
	uint64_t body_len;
	uint32_t node;
	uint64_t epoch;
	uint8_t uuid[16];
};

void dev_cat_header_encode(uint8_t *buf, const struct dev_cat_header *h, uint32_t crc);
/* Decodes without judging the CRC (which covers the body too); *ret_crc
 * gets the stored one. KV_ECORRUPT: wrong magic. */
int dev_cat_header_decode(const uint8_t *buf, struct dev_cat_header *ret, uint32_t *ret_crc);
/* The CRC a slot must carry: header bytes 0..59, then the body. */
uint32_t dev_cat_crc(const uint8_t *header, const uint8_t *body, size_t body_len);

/* ---- geometry ---------------------------------------------------------- */

struct dev_geometry {
	uint64_t size;
	uint32_t logical_block;
	uint32_t physical_block;
	uint32_t dio_align; /* 0: unknown */
	uint32_t block;     /* the I/O unit chosen */
	bool is_blockdev;
};

/* The geometry of an open device or regular file: BLKGETSIZE64,
 * BLKSSZGET, BLKPBSZGET and statx(STATX_DIOALIGN). */
int dev_geometry(int fd, struct dev_geometry *ret);

/* Opens a device for the backend or format: O_RDWR|O_DIRECT (a file
 * system without direct I/O falls back to buffered I/O, still whole
 * blocks), and takes the exclusive lock on it (dev_lock of the whole
 * device; KV_ELOCKED while another process holds it, or any node of a
 * shared device). Returns the descriptor or a negative error. */
int dev_open_locked(const char *path, bool readonly);
/* The same without a lock. */
int dev_open_raw(const char *path, bool readonly);
/* An open file description lock (F_OFD_SETLK) on fd: node 0 the whole
 * device, else node's own byte of it (a node of a shared device), so a
 * node excludes whole-device users (format, check) and the same node
 * number, not the other nodes. KV_ELOCKED: held. */
int dev_lock(int fd, bool write, uint32_t node);
/* Byte offset of catalog slot s (0, 1) of node (1..max_nodes). */
static inline uint64_t dev_slot_off(const struct dev_super *sb, uint32_t node, int s)
{
	return sb->catalog_off + ((uint64_t)(node - 1) * 2 + (uint64_t)s) * sb->catalog_slot;
}

/* ---- storage_dev.c's entry points for format and check --------------- */

struct kv_storage;
struct kv_io_fault;

/* Reads catalog slot 0 or 1 of node `node` of the device sb describes: 0 with the slot
 * (header and body, in memory the caller frees) in *ret_buf and its header
 * in *ret; 1 when it holds no catalog of this device; 2 when it does but its
 * CRC does not match (a torn write); -errno when it cannot be read. */
int dev_cat_slot_read(int fd, struct kv_io_fault *fault, const struct dev_super *sb,
                      uint32_t node, int slot, uint8_t **ret_buf, struct dev_cat_header *ret);

/* Writes a fresh layout on fd (opened and locked by dev_open_locked): the
 * first and last MiB zeroed, an empty catalog, the superblocks (the end
 * copy first). err gets one line on failure. */
int dev_write_fresh(int fd, const struct dev_geometry *g, uint64_t extent_size, uint32_t nodes,
                    char *err, size_t errlen);

/* Reads the header of every extent the catalog gives a tenant and calls
 * report for each that does not name that tenant, use and generation;
 * counts the extents in use and free. */
int dev_storage_check_extents(struct kv_storage *st,
                              void (*report)(void *arg, uint32_t extent, uint64_t off,
                                             const char *what),
                              void *arg, uint32_t *ret_used, uint32_t *ret_free);

#endif
