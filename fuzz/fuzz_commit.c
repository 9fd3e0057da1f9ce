/*
 * fuzz_commit — the merge commit file parser (engine/reloc.c:
 * commit_parse) against arbitrary bytes.
 *
 * Input: 1 byte of options, then the commit file.
 *   bit 0  set the magic and the format version
 *   bit 1  recompute the trailing CRC (so mutations reach the counts)
 *
 * Invariants: commit_parse answers exactly what FORMAT.md's rules, written
 * out again here, say (0, KV_ECORRUPT, KV_EFORMAT); on success the counts
 * account for every byte (40 + 4·R + 16·N + 4 = length), the sequence
 * number, retired ids and relocations are the file's, and memory is in
 * proportion to the file; on failure *ret is untouched.
 */
#include "fuzz.h"

#include "kvengine.h"
#include "reloc.h"

#include <string.h>

static int ref_parse(const uint8_t *b, size_t len)
{
	uint64_t r, n;

	if (len < 44 || memcmp(b, "KVDMERG\1", 8) != 0 ||
	    fz_crc32c(b, len - 4) != fz_le32(b + len - 4))
		return KV_ECORRUPT;
	if (fz_le32(b + 8) != 1)
		return KV_EFORMAT;
	r = fz_le32(b + 24);
	n = fz_le64(b + 32);
	/* in 128 bits, so no count can wrap around to the right length */
	if ((unsigned __int128)40 + (unsigned __int128)r * 4 + (unsigned __int128)n * 16 + 4 != len)
		return KV_ECORRUPT;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct merge_commit c, canary;
	const uint8_t *p;
	uint8_t *buf;
	size_t len, i, bytes;
	int rv, ref;

	if ((buf = fz_file_input(data, size, "KVDMERG\1", 1, &len)) == NULL)
		return 0;

	memset(&c, 0xa5, sizeof(c));
	canary = c;
	ref = ref_parse(buf, len);
	fz_alloc_begin();
	rv = commit_parse(buf, len, &c);
	bytes = fz_alloc_end();
	FZ_CHECK(rv == ref);
	if (rv != 0) {
		FZ_CHECK(memcmp(&c, &canary, sizeof(c)) == 0);
		free(buf);
		return 0;
	}
	/* two arrays, each one element more than the file holds: 4·R + 16·N + 20 */
	FZ_CHECK(bytes <= len);
	FZ_CHECK(40 + c.nretired * 4 + c.nrelocs * 16 + 4 == len);
	FZ_CHECK(c.seq == fz_le64(buf + 16));
	p = buf + 40;
	for (i = 0; i < c.nretired; i++, p += 4)
		FZ_CHECK(c.retired[i] == fz_le32(p));
	for (i = 0; i < c.nrelocs; i++, p += 16)
		FZ_CHECK(c.relocs[i].from == fz_le64(p) && c.relocs[i].to == fz_le64(p + 8));
	FZ_CHECK(p == buf + len - 4);
	commit_release(&c);
	FZ_CHECK(c.retired == NULL && c.relocs == NULL);
	commit_release(NULL);
	free(buf);
	return 0;
}
