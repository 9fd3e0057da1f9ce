/* reloc.c — the relocation map and merge commit files. */
#include "reloc.h"

#include "crc.h"
#include "endian_util.h"
#include "kvengine.h"
#include "storage.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void reloc_init(struct reloc *r)
{
	memset(r, 0, sizeof(*r));
}

void reloc_release(struct reloc *r)
{
	if (r == NULL)
		return;
	free(r->slots);
	memset(r, 0, sizeof(*r));
}

static size_t reloc_slot(uint64_t from, size_t cap)
{
	uint64_t h = from * 0x9e3779b97f4a7c15ull;
	return (size_t)(h >> 17) & (cap - 1);
}

static int reloc_grow(struct reloc *r)
{
	size_t cap = r->cap ? r->cap * 2 : 64, i;
	struct reloc_ent *ns = calloc(cap, sizeof(*ns));

	if (ns == NULL)
		return -ENOMEM;
	for (i = 0; i < r->cap; i++) {
		size_t j;
		if (r->slots[i].from == 0)
			continue;
		for (j = reloc_slot(r->slots[i].from, cap); ns[j].from != 0; j = (j + 1) & (cap - 1))
			;
		ns[j] = r->slots[i];
	}
	free(r->slots);
	r->slots = ns;
	r->cap = cap;
	return 0;
}

int reloc_put(struct reloc *r, uint64_t from, uint64_t to)
{
	size_t j;
	int rv;

	if (from == 0)
		return -EINVAL;
	if ((r->n + 1) * 2 > r->cap && (rv = reloc_grow(r)) != 0)
		return rv;
	for (j = reloc_slot(from, r->cap); r->slots[j].from != 0; j = (j + 1) & (r->cap - 1)) {
		if (r->slots[j].from == from) {
			r->slots[j].to = to;
			return 0;
		}
	}
	r->slots[j].from = from;
	r->slots[j].to = to;
	r->n++;
	return 0;
}

int reloc_get(const struct reloc *r, uint64_t from, uint64_t *ret)
{
	size_t j;

	if (r->cap == 0)
		return -ENOENT;
	for (j = reloc_slot(from, r->cap); r->slots[j].from != 0; j = (j + 1) & (r->cap - 1)) {
		if (r->slots[j].from == from) {
			*ret = r->slots[j].to;
			return 0;
		}
	}
	return -ENOENT;
}

int reloc_entries(const struct reloc *r, struct reloc_ent **ret, size_t *ret_n)
{
	struct reloc_ent *v = NULL;
	size_t i, n = 0;

	if (r->n > 0 && (v = malloc(r->n * sizeof(*v))) == NULL)
		return -ENOMEM;
	for (i = 0; i < r->cap; i++)
		if (r->slots[i].from != 0)
			v[n++] = r->slots[i];
	*ret = v;
	*ret_n = n;
	return 0;
}

/* header: magic 8, format 4, reserved 4, seq 8, nretired 4, reserved 4,
 * nrelocs 8 = 40 bytes; then retired ids (4 each), relocs (16 each), crc 4. */
#define COMMIT_HEADER_SIZE 40u

int commit_write(struct kv_stor_tenant *t, const struct merge_commit *c)
{
	char name[64];
	size_t len = COMMIT_HEADER_SIZE + c->nretired * 4 + c->nrelocs * 16 + 4, i;
	uint8_t *buf, *p;
	int rv;

	if ((buf = malloc(len)) == NULL)
		return -ENOMEM;
	memcpy(buf, COMMIT_MAGIC, 8);
	put_le32(buf + 8, COMMIT_FORMAT_VERSION);
	put_le32(buf + 12, 0);
	put_le64(buf + 16, c->seq);
	put_le32(buf + 24, (uint32_t)c->nretired);
	put_le32(buf + 28, 0);
	put_le64(buf + 32, c->nrelocs);
	p = buf + COMMIT_HEADER_SIZE;
	for (i = 0; i < c->nretired; i++, p += 4)
		put_le32(p, c->retired[i]);
	for (i = 0; i < c->nrelocs; i++, p += 16) {
		put_le64(p, c->relocs[i].from);
		put_le64(p + 8, c->relocs[i].to);
	}
	put_le32(p, crc32c(buf, len - 4));

	snprintf(name, sizeof(name), "merge-%016llx.commit", (unsigned long long)c->seq);
	rv = stor_meta_put(t, name, buf, len, KV_STOR_DURABLE);
	free(buf);
	return rv;
}

int commit_parse(const uint8_t *buf, size_t len, struct merge_commit *ret)
{
	struct merge_commit c = {0};
	const uint8_t *p;
	size_t i;

	if (len < COMMIT_HEADER_SIZE + 4)
		return KV_ECORRUPT;
	if (memcmp(buf, COMMIT_MAGIC, 8) != 0 || crc32c(buf, len - 4) != get_le32(buf + len - 4))
		return KV_ECORRUPT;
	if (get_le32(buf + 8) != COMMIT_FORMAT_VERSION)
		return KV_EFORMAT;
	c.seq = get_le64(buf + 16);
	c.nretired = get_le32(buf + 24);
	c.nrelocs = get_le64(buf + 32);
	if (c.nrelocs > len / 16 ||
	    COMMIT_HEADER_SIZE + (uint64_t)c.nretired * 4 + c.nrelocs * 16 + 4 != len)
		return KV_ECORRUPT;
	c.retired = calloc(c.nretired + 1, sizeof(*c.retired));
	c.relocs = calloc(c.nrelocs + 1, sizeof(*c.relocs));
	if (c.retired == NULL || c.relocs == NULL) {
		commit_release(&c);
		return -ENOMEM;
	}
	p = buf + COMMIT_HEADER_SIZE;
	for (i = 0; i < c.nretired; i++, p += 4)
		c.retired[i] = get_le32(p);
	for (i = 0; i < c.nrelocs; i++, p += 16) {
		c.relocs[i].from = get_le64(p);
		c.relocs[i].to = get_le64(p + 8);
	}
	*ret = c;
	return 0;
}

int commit_load(struct kv_stor_tenant *t, const char *name, struct merge_commit *ret)
{
	uint8_t *buf;
	size_t len;
	int rv;

	if ((rv = stor_meta_get(t, name, KV_STOR_META_MAX, &buf, &len)) != 0)
		return rv;
	if (len < COMMIT_HEADER_SIZE + 4)
		rv = KV_ECORRUPT;
	else
		rv = commit_parse(buf, len, ret);
	free(buf);
	return rv;
}

void commit_release(struct merge_commit *c)
{
	if (c == NULL)
		return;
	free(c->retired);
	free(c->relocs);
	c->retired = NULL;
	c->relocs = NULL;
}
