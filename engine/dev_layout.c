/* dev_layout.c — encoders of the device layout (dev_layout.h) and the
 * device's geometry. */
#include "dev_layout.h"

#include "crc.h"
#include "endian_util.h"
#include "kvengine.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

void dev_super_encode(uint8_t *b, const struct dev_super *sb)
{
	memset(b, 0, DEV_SB_SIZE);
	memcpy(b, DEV_SB_MAGIC, 8);
	put_le32(b + 8, sb->version);
	put_le32(b + 12, sb->block_size);
	memcpy(b + 16, sb->uuid, 16);
	put_le32(b + 32, sb->logical_block);
	put_le32(b + 36, sb->physical_block);
	put_le64(b + 40, sb->device_size);
	put_le64(b + 48, sb->extent_size);
	put_le32(b + 56, sb->extent_count);
	put_le32(b + 60, sb->max_nodes);
	put_le64(b + 64, sb->catalog_off);
	put_le64(b + 72, sb->catalog_slot);
	put_le64(b + 80, sb->data_off);
	put_le64(b + 88, sb->created_ms);
	put_le32(b + DEV_SB_SIZE - 4, crc32c(b, DEV_SB_SIZE - 4));
}

static bool pow2(uint64_t v)
{
	return v != 0 && (v & (v - 1)) == 0;
}

int dev_super_decode(const uint8_t *b, struct dev_super *ret)
{
	struct dev_super sb;

	if (memcmp(b, DEV_SB_MAGIC, 8) != 0 || crc32c(b, DEV_SB_SIZE - 4) != get_le32(b + DEV_SB_SIZE - 4))
		return KV_ECORRUPT;
	sb.version = get_le32(b + 8);
	sb.block_size = get_le32(b + 12);
	memcpy(sb.uuid, b + 16, 16);
	sb.logical_block = get_le32(b + 32);
	sb.physical_block = get_le32(b + 36);
	sb.device_size = get_le64(b + 40);
	sb.extent_size = get_le64(b + 48);
	sb.extent_count = get_le32(b + 56);
	sb.max_nodes = get_le32(b + 60);
	sb.catalog_off = get_le64(b + 64);
	sb.catalog_slot = get_le64(b + 72);
	sb.data_off = get_le64(b + 80);
	sb.created_ms = get_le64(b + 88);
	if (sb.version != DEV_FORMAT_VERSION)
		return KV_EFORMAT;
	if (!pow2(sb.block_size) || sb.block_size < DEV_BLOCK_MIN || !pow2(sb.extent_size) ||
	    sb.extent_size < 2ull * sb.block_size || sb.extent_count == 0 ||
	    sb.catalog_off % sb.block_size || sb.catalog_slot % sb.block_size ||
	    sb.catalog_slot == 0 || sb.data_off % sb.block_size ||
	    sb.max_nodes == 0 || sb.max_nodes > KV_DEV_NODES_MAX ||
	    sb.catalog_off + 2ull * sb.max_nodes * sb.catalog_slot > sb.data_off ||
	    sb.data_off + (uint64_t)sb.extent_count * sb.extent_size >
	        sb.device_size - sb.block_size)
		return KV_EFORMAT;
	*ret = sb;
	return 0;
}

void dev_ext_encode(uint8_t *b, const struct dev_ext_header *h)
{
	memset(b, 0, DEV_EXT_HEADER);
	memcpy(b, DEV_EXT_MAGIC, 8);
	memcpy(b + 8, h->uuid, 16);
	put_le32(b + 24, h->tenant);
	put_le32(b + 28, h->position);
	put_le32(b + 32, h->generation);
	b[36] = h->kind;
	put_le64(b + 40, h->epoch);
	put_le32(b + 48, h->node);
	put_le32(b + 60, crc32c(b, 60));
}

int dev_ext_decode(const uint8_t *b, struct dev_ext_header *ret)
{
	if (memcmp(b, DEV_EXT_MAGIC, 8) != 0 || crc32c(b, 60) != get_le32(b + 60))
		return KV_ECORRUPT;
	memcpy(ret->uuid, b + 8, 16);
	ret->tenant = get_le32(b + 24);
	ret->position = get_le32(b + 28);
	ret->generation = get_le32(b + 32);
	ret->kind = b[36];
	ret->epoch = get_le64(b + 40);
	ret->node = get_le32(b + 48);
	return 0;
}

uint32_t dev_seg_seed(const uint8_t uuid[16], uint32_t extent, uint32_t generation)
{
	uint8_t b[24];
	uint32_t s;

	memcpy(b, uuid, 16);
	put_le32(b + 16, extent);
	put_le32(b + 20, generation);
	s = crc32c(b, sizeof(b));
	return s != 0 ? s : 1;
}

void dev_cat_header_encode(uint8_t *b, const struct dev_cat_header *h, uint32_t crc)
{
	memset(b, 0, DEV_CAT_HEADER);
	memcpy(b, DEV_CAT_MAGIC, 8);
	put_le64(b + 8, h->seq);
	put_le64(b + 16, h->body_len);
	put_le32(b + 24, h->node);
	put_le64(b + 32, h->epoch);
	memcpy(b + 40, h->uuid, 16);
	put_le32(b + 60, crc);
}

int dev_cat_header_decode(const uint8_t *b, struct dev_cat_header *ret, uint32_t *ret_crc)
{
	if (memcmp(b, DEV_CAT_MAGIC, 8) != 0)
		return KV_ECORRUPT;
	ret->seq = get_le64(b + 8);
	ret->body_len = get_le64(b + 16);
	ret->node = get_le32(b + 24);
	ret->epoch = get_le64(b + 32);
	memcpy(ret->uuid, b + 40, 16);
	*ret_crc = get_le32(b + 60);
	return 0;
}

uint32_t dev_cat_crc(const uint8_t *header, const uint8_t *body, size_t body_len)
{
	uint32_t c = crc32c_extend(CRC32C_INIT, header, 60);

	return crc32c_final(crc32c_extend(c, body, body_len));
}

int dev_geometry(int fd, struct dev_geometry *ret)
{
	struct dev_geometry g = {0};
	struct stat st;
	uint32_t b;

	if (fstat(fd, &st) != 0)
		return -errno;
	if (S_ISBLK(st.st_mode)) {
		int lbs = 0;
		unsigned int pbs = 0;
		uint64_t size = 0;
		if (ioctl(fd, BLKGETSIZE64, &size) != 0 || ioctl(fd, BLKSSZGET, &lbs) != 0 ||
		    ioctl(fd, BLKPBSZGET, &pbs) != 0)
			return -errno;
		g.size = size;
		g.logical_block = (uint32_t)lbs;
		g.physical_block = pbs;
		g.is_blockdev = true;
	} else if (S_ISREG(st.st_mode)) {
		g.size = (uint64_t)st.st_size;
		g.logical_block = 512;
		g.physical_block = (uint32_t)st.st_blksize;
	} else {
		return -ENOTBLK;
	}
#ifdef STATX_DIOALIGN
	{
		struct statx sx;
		if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 &&
		    (sx.stx_mask & STATX_DIOALIGN))
			g.dio_align = sx.stx_dio_offset_align;
	}
#endif
	b = DEV_BLOCK_MIN;
	if (g.logical_block > b)
		b = g.logical_block;
	if (g.physical_block > b && pow2(g.physical_block) && g.physical_block <= (1u << 16))
		b = g.physical_block;
	if (g.dio_align > b && pow2(g.dio_align) && g.dio_align <= (1u << 16))
		b = g.dio_align;
	g.block = b;
	*ret = g;
	return 0;
}

int dev_open_raw(const char *path, bool readonly)
{
	int flags = (readonly ? O_RDONLY : O_RDWR) | O_CLOEXEC;
	int fd;

	fd = open(path, flags | O_DIRECT);
	if (fd < 0 && errno == EINVAL)
		fd = open(path, flags); /* a file system without direct I/O */
	return fd < 0 ? -errno : fd;
}

int dev_lock(int fd, bool write, uint32_t node)
{
	/* open file description locks: per open of the device, so two opens in
	 * one process exclude each other too; the whole device, or the one
	 * byte that stands for a node of a shared device */
	struct flock fl = {.l_type = write ? F_WRLCK : F_RDLCK, .l_whence = SEEK_SET,
	                   .l_start = node, .l_len = node == 0 ? 0 : 1};

	if (fcntl(fd, F_OFD_SETLK, &fl) != 0)
		return errno == EAGAIN || errno == EACCES ? KV_ELOCKED : -errno;
	return 0;
}

int dev_open_locked(const char *path, bool readonly)
{
	int fd = dev_open_raw(path, readonly), rv;

	if (fd < 0)
		return fd;
	/* shared for a reader (kvd --check), exclusive for a server or format */
	if ((rv = dev_lock(fd, !readonly, 0)) != 0) {
		close(fd);
		return rv;
	}
	return fd;
}
