/*
 * fuzz_manifest — the META parser (engine/manifest.c: manifest_parse)
 * against arbitrary bytes.
 *
 * Input: 1 byte of options, then the META file.
 *   bit 0  set the magic and format version 2
 *   bit 1  recompute the trailing CRC (so mutations reach the counts)
 *
 * Invariants: manifest_parse answers exactly what FORMAT.md's rules, written
 * out again here, say (0, KV_ECORRUPT, KV_EFORMAT); on success the fields
 * and the listed segments are the file's, ids non-zero and increasing, and
 * memory is in proportion to the file; on failure *ret is untouched.
 */
#include "fuzz.h"

#include "kvengine.h"
#include "manifest.h"

#include <string.h>

static int ref_parse(const uint8_t *b, size_t len)
{
	uint64_t n;

	if (len < 28 || memcmp(b, "KVDMETA\1", 8) != 0 ||
	    fz_crc32c(b, len - 4) != fz_le32(b + len - 4))
		return KV_ECORRUPT;
	if (fz_le32(b + 8) == 1)
		return len == 28 ? 0 : KV_ECORRUPT;
	/* 3: values may be compressed; 4: blobs may be there too */
	if (fz_le32(b + 8) < 2 || fz_le32(b + 8) > 4)
		return KV_EFORMAT;
	n = fz_le32(b + 12);
	if ((unsigned __int128)48 + (unsigned __int128)n * 16 + 4 != len)
		return KV_ECORRUPT;
	for (uint64_t i = 0; i < n; i++) {
		uint32_t id = fz_le32(b + 48 + i * 16);
		if (id == 0 || (i > 0 && id <= fz_le32(b + 48 + (i - 1) * 16)))
			return KV_ECORRUPT;
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct manifest m, canary;
	uint8_t *buf;
	size_t len, bytes;
	int rv, ref;

	if ((buf = fz_file_input(data, size, "KVDMETA\1", 2, &len)) == NULL)
		return 0;

	memset(&m, 0xa5, sizeof(m));
	canary = m;
	ref = ref_parse(buf, len);
	fz_alloc_begin();
	rv = manifest_parse(buf, len, &m);
	bytes = fz_alloc_end();
	FZ_CHECK(rv == ref);
	if (rv != 0) {
		FZ_CHECK(memcmp(&m, &canary, sizeof(m)) == 0);
		free(buf);
		return 0;
	}
	FZ_CHECK(m.raw == NULL && m.raw_len == 0);
	FZ_CHECK(m.floor == fz_le64(buf + 16));
	if (m.format == 1) {
		FZ_CHECK(m.nsegs == 0 && m.segs == NULL && m.version_mark == 0);
	} else {
		FZ_CHECK(m.format >= 2 && m.format <= 4);
		FZ_CHECK(m.format == fz_le32(buf + 8));
		FZ_CHECK(48 + m.nsegs * 16 + 4 == len);
		FZ_CHECK(bytes <= len); /* 16 bytes an entry, as in the file */
		FZ_CHECK(m.version_mark == fz_le64(buf + 24));
		FZ_CHECK(m.active == fz_le32(buf + 32));
		FZ_CHECK(m.merge_from == fz_le32(buf + 36));
		FZ_CHECK(m.merge_seq == fz_le64(buf + 40));
		for (size_t i = 0; i < m.nsegs; i++) {
			FZ_CHECK(m.segs[i].id == fz_le32(buf + 48 + i * 16));
			FZ_CHECK(m.segs[i].size == fz_le64(buf + 48 + i * 16 + 8));
			FZ_CHECK(manifest_find(&m, m.segs[i].id) == &m.segs[i]);
		}
	}
	manifest_release(&m);
	FZ_CHECK(m.segs == NULL && m.nsegs == 0);
	free(buf);
	return 0;
}
