/*
 * keydir.c — the key directory: an adaptive radix tree (ART) with path
 * compression and lazy expansion, kept in a per-directory arena of chunks and
 * addressed by 32-bit handles (the arena: keydir_arena.c).
 *
 * What it owns: the tree of one directory, every node and leaf in its arena.
 * Nothing here is shared between directories and nothing is global.
 *
 * Threads: none taken. keydir_get, keydir_walk, keydir_count and
 * keydir_memory only read (they may run at once under a shared lock);
 * keydir_put and keydir_remove need the directory to themselves.
 *
 * Layout (multi-byte fields in host order, read and written with memcpy):
 *
 *   handle  bit 31: leaf tag; bits 30..0: the arena's (keydir_arena.h).
 *   node    u8 class (bits 0..4) | slack << 5 | 0x80 when it has an end leaf;
 *           u8 child count (a full node stores 256 as 0); u16 prefix length;
 *           [u32 end leaf]; body (by class); prefix bytes; padding to 4.
 *             sorted(cap):  u8 key[cap] ascending (padded to 4), u32 child[cap]
 *             indexed(cap): u8 slot[256] (0 none, else index + 1), u32 child[cap]
 *             full:         u32 child[256] (0 none)
 *   leaf    u32 seg; u32 off; u32 size | tombstone << 28 | ttl << 29 |
 *           slack << 30; varint (suffix length << 1 | wide); version: u32,
 *           or u64 when wide (a version of 2^32 or more); [u64 expiry_ms,
 *           only with ttl]; suffix bytes; padding to 4. (Most versions fit
 *           32 bits: a leaf with a short suffix takes 20 bytes, not 24.)
 *
 *   "slack" (0..3) counts units the block has beyond the object's own size:
 *   the allocator may hand out a block up to 3 units too big rather than
 *   leave a remainder too small for any object.
 *
 * Invariants:
 *  1. A node reached after d key bytes (its depth) holds key bytes
 *     [d, d + plen) as its prefix. Its child under byte b sits at depth
 *     d + plen + 1; its end leaf is the key of length d + plen.
 *  2. A leaf at depth d stores key bytes [d, len), its suffix; an end leaf
 *     stores an empty one. The root sits at depth 0.
 *  3. Every node has at least two items (children plus end leaf): a node left
 *     with one is merged into that item. So the tree is canonical and a
 *     prefix never exceeds 65535 bytes (it fits the u16).
 *  4. count <= cap; a node is regrown into the smallest class that holds one
 *     more child when full, and shrunk into the smallest class that holds its
 *     children when it falls below the capacity of the class under its own.
 *  5. The block of every object is its size, computed from its header alone
 *     (node: class, end flag, prefix length; leaf: ttl flag, suffix length),
 *     plus its slack: that is what was allocated and what is freed.
 *  6. Every arena unit but unit 0 of chunk 0 is inside exactly one of: a live
 *     object's block, a free block (at least KD_MIN_BLOCK units, so some object
 *     fits it), or the wilderness (the untouched tail of the newest chunk).
 *  7. Writers allocate everything an operation needs before they change
 *     anything: a failed allocation (-ENOMEM) leaves the directory unchanged.
 *  8. Nothing recurses: descents are loops and walks keep an explicit stack on
 *     the heap, so a chain of 65536 nested keys cannot exhaust the C stack.
 *
 * Memory: keydir_arena.c hands out blocks (exact fit, else a split free
 * block, else the wilderness, else a new chunk of about 1/32 of the arena) and
 * takes them back whole; it does not coalesce. When the last key goes, the
 * whole arena is released.
 */
#include "keydir.h"
#include "keydir_arena.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__) && !defined(KD_NO_SIMD)
#include <emmintrin.h>
#endif

/* ---- limits and constants ---------------------------------------------- */

#define LEAF_TAG KD_HANDLE_TAG /* handle bit 31: the handle is a leaf's */

#define SF_SIZE_MASK   ((1u << 28) - 1)
#define SF_TOMB        (1u << 28)
#define SF_TTL         (1u << 29)
#define SF_SLACK_SHIFT 30  /* units the block has beyond the leaf's size */
#define LEAF_HEAD      12u /* seg, off, size|flags */

#define POS_START (-2) /* walk frame: nothing visited yet (forward) */
#define POS_END   (-1) /* walk frame: at the end leaf */
#define POS_NONE  1000 /* n_next: nothing left */

struct keydir {
	uint32_t root;
	size_t count;
	struct kd_arena arena;
};

/* ---- key bytes ---------------------------------------------------------- */

/* Bytewise order, shorter first on a tie. */
static int bytes_cmp(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
	size_t m = alen < blen ? alen : blen;
	int c = m ? memcmp(a, b, m) : 0;

	if (c != 0)
		return c;
	return alen < blen ? -1 : alen > blen;
}

/* Length of the common prefix of a and b, at most m. */
static size_t common_len(const uint8_t *a, const uint8_t *b, size_t m)
{
	size_t i = 0;

	while (i + 8 <= m) {
		uint64_t x = rd64(a + i) ^ rd64(b + i);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
		if (x != 0)
			return i + ((size_t)__builtin_clzll(x) >> 3);
#else
		if (x != 0)
			return i + ((size_t)__builtin_ctzll(x) >> 3);
#endif
		i += 8;
	}
	while (i < m && a[i] == b[i])
		i++;
	return i;
}

/* ---- arena ------------------------------------------------------------- */

static inline uint8_t *at(const struct keydir *kd, uint32_t h)
{
	return kd_arena_at(&kd->arena, h);
}

/* ---- leaves ------------------------------------------------------------- */

static inline size_t varint_len(uint32_t v)
{
	return v < (1u << 7) ? 1 : v < (1u << 14) ? 2 : 3;
}

static inline size_t varint_put(uint8_t *p, uint32_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}

static inline uint32_t varint_get(const uint8_t *p, size_t *ret_n)
{
	uint32_t v = 0;
	size_t n = 0;
	unsigned sh = 0;

	do {
		v |= (uint32_t)(p[n] & 0x7f) << sh;
		sh += 7;
	} while (p[n++] & 0x80);
	*ret_n = n;
	return v;
}

static inline bool version_wide(uint64_t version)
{
	return version > UINT32_MAX;
}

static inline uint32_t leaf_units(bool ttl, bool wide, size_t slen)
{
	size_t b = LEAF_HEAD + varint_len((uint32_t)slen << 1) + (wide ? 8 : 4) + (ttl ? 8 : 0) +
	           slen;
	uint32_t u = (uint32_t)((b + 3) >> KD_UNIT_SHIFT);
	return u < KD_MIN_BLOCK ? KD_MIN_BLOCK : u;
}

/* The leaf's fields after its fixed head: where the version is, whether it
 * is wide, and the suffix and its length. */
struct leaf_tail {
	const uint8_t *version;
	bool wide;
	const uint8_t *suffix;
	size_t slen;
};

static inline void leaf_tail(const uint8_t *l, struct leaf_tail *t)
{
	uint32_t sf = rd32(l + 8);
	size_t n;
	uint32_t v = varint_get(l + LEAF_HEAD, &n);

	t->wide = v & 1;
	t->slen = v >> 1;
	t->version = l + LEAF_HEAD + n;
	t->suffix = t->version + (t->wide ? 8 : 4) + ((sf & SF_TTL) ? 8 : 0);
}

/* The leaf's suffix and its length. */
static inline const uint8_t *leaf_suffix(const uint8_t *l, size_t *ret_len)
{
	struct leaf_tail t;

	leaf_tail(l, &t);
	*ret_len = t.slen;
	return t.suffix;
}

static void leaf_entry(const uint8_t *l, struct kd_entry *e)
{
	uint32_t sf = rd32(l + 8);
	struct leaf_tail t;

	leaf_tail(l, &t);
	e->version = t.wide ? rd64(t.version) : rd32(t.version);
	e->seg = rd32(l);
	e->off = rd32(l + 4);
	e->size = sf & SF_SIZE_MASK;
	e->flags = ((sf & SF_TOMB) ? KD_F_TOMBSTONE : 0) | ((sf & SF_TTL) ? KD_F_TTL : 0);
	e->expiry_ms = (sf & SF_TTL) ? rd64(t.version + (t.wide ? 8 : 4)) : 0;
}

/* The units of the leaf's block, slack included. */
static uint32_t leaf_size_units(const uint8_t *l)
{
	uint32_t sf = rd32(l + 8);
	struct leaf_tail t;

	leaf_tail(l, &t);
	return leaf_units(sf & SF_TTL, t.wide, t.slen) + (sf >> SF_SLACK_SHIFT);
}

static inline uint32_t entry_sf(const struct kd_entry *e)
{
	return e->size | ((e->flags & KD_F_TOMBSTONE) ? SF_TOMB : 0) |
	       ((e->flags & KD_F_TTL) ? SF_TTL : 0);
}

/* Writes e's version (and expiry) at p, the leaf's version field. */
static void leaf_put_version(uint8_t *p, const struct kd_entry *e)
{
	bool wide = version_wide(e->version);

	if (wide)
		wr64(p, e->version);
	else
		wr32(p, (uint32_t)e->version);
	if (e->flags & KD_F_TTL)
		wr64(p + (wide ? 8 : 4), e->expiry_ms);
}

/* Allocates a leaf for e with a suffix of slen bytes, left for the caller
 * to fill at *ret_suffix. *ret_h is tagged. */
static int leaf_new(struct keydir *kd, const struct kd_entry *e, size_t slen, uint32_t *ret_h,
                    uint8_t **ret_suffix)
{
	uint32_t sf = entry_sf(e);
	bool wide = version_wide(e->version);
	uint32_t u = leaf_units(sf & SF_TTL, wide, slen);
	uint32_t h, got;
	int rv;

	if ((rv = kd_arena_alloc(&kd->arena, u, &h, &got)) != 0)
		return rv;
	sf |= (got - u) << SF_SLACK_SHIFT;
	uint8_t *l = at(kd, h);
	wr32(l, e->seg);
	wr32(l + 4, e->off);
	wr32(l + 8, sf);
	size_t o = LEAF_HEAD + varint_put(l + LEAF_HEAD, (uint32_t)slen << 1 | wide);
	leaf_put_version(l + o, e);
	o += (wide ? 8 : 4) + ((sf & SF_TTL) ? 8 : 0);
	*ret_h = h | LEAF_TAG;
	*ret_suffix = l + o;
	return 0;
}

/* A leaf for e with the suffix a ++ [mid] ++ b (mid < 0: no middle byte). */
static int leaf_make(struct keydir *kd, const struct kd_entry *e, const uint8_t *a, size_t alen,
                     int mid, const uint8_t *b, size_t blen, uint32_t *ret_h)
{
	uint8_t *s;
	size_t slen = alen + (mid >= 0) + blen;
	int rv;

	if ((rv = leaf_new(kd, e, slen, ret_h, &s)) != 0)
		return rv;
	if (alen)
		memcpy(s, a, alen);
	if (mid >= 0)
		s[alen] = (uint8_t)mid;
	if (blen)
		memcpy(s + alen + (mid >= 0), b, blen);
	return 0;
}

/* ---- nodes ------------------------------------------------------------- */

enum { NK_SORTED, NK_INDEXED, NK_FULL };

struct nclass {
	uint8_t kind;
	uint16_t cap;
	uint16_t keys; /* bytes before the child array */
};

/* Sorted nodes are the smallest per child (5 bytes) and serve up to 128
 * children; an indexed node (a Node48-style 256-byte index) only for 129..160,
 * where it is still smaller than a full node. Fine steps at the bottom keep
 * the many small nodes of sparse levels tight. */
static const struct nclass nclasses[] = {
        {NK_SORTED, 2, 4},      {NK_SORTED, 4, 4},   {NK_SORTED, 8, 8},     {NK_SORTED, 12, 12},
        {NK_SORTED, 16, 16},    {NK_SORTED, 20, 20}, {NK_SORTED, 24, 24},   {NK_SORTED, 32, 32},
        {NK_SORTED, 40, 40},    {NK_SORTED, 48, 48}, {NK_SORTED, 56, 56},   {NK_SORTED, 64, 64},
        {NK_SORTED, 80, 80},    {NK_SORTED, 96, 96}, {NK_SORTED, 112, 112}, {NK_SORTED, 128, 128},
        {NK_INDEXED, 160, 256}, {NK_FULL, 256, 0},
};
#define NNCLASS          (sizeof nclasses / sizeof nclasses[0])
#define NODE_CLASS       0x1f
#define NODE_SLACK_SHIFT 5 /* 2 bits: units the block has beyond the node's size */
#define NODE_END         0x80

static inline const struct nclass *n_cls(const uint8_t *n)
{
	return &nclasses[n[0] & NODE_CLASS];
}

static inline bool n_has_end(const uint8_t *n)
{
	return (n[0] & NODE_END) != 0;
}

static inline unsigned n_count(const uint8_t *n)
{
	return (n[1] == 0 && n_cls(n)->kind == NK_FULL) ? 256 : n[1];
}

static inline uint32_t n_plen(const uint8_t *n)
{
	return rd16(n + 2);
}

static inline uint8_t *n_body(uint8_t *n)
{
	return n + 4 + (n_has_end(n) ? 4 : 0);
}

static inline uint8_t *n_prefix(uint8_t *n)
{
	const struct nclass *c = n_cls(n);
	return n_body(n) + c->keys + 4u * c->cap;
}

static uint32_t node_units(unsigned nc, bool end, uint32_t plen)
{
	const struct nclass *c = &nclasses[nc];
	return (4 + (end ? 4 : 0) + c->keys + 4u * c->cap + plen + 3) >> KD_UNIT_SHIFT;
}

/* The units of the node's block, slack included. */
static uint32_t node_size_units(const uint8_t *n)
{
	return node_units(n[0] & NODE_CLASS, n_has_end(n), n_plen(n)) +
	       ((n[0] >> NODE_SLACK_SHIFT) & 3u);
}

/* Smallest class holding cnt children. */
static unsigned nc_for(unsigned cnt)
{
	unsigned nc = 0;
	while (nclasses[nc].cap < cnt)
		nc++;
	return nc;
}

/* First index of the sorted keys[0..cnt) holding a byte >= b (b <= 256). */
static inline unsigned sorted_lower(const uint8_t *keys, unsigned cnt, unsigned b)
{
	unsigned lo = 0, hi = cnt;

	while (hi - lo > 8) {
		unsigned mid = (lo + hi) / 2;
		if (keys[mid] < b)
			lo = mid + 1;
		else
			hi = mid;
	}
	while (lo < hi && keys[lo] < b)
		lo++;
	return lo;
}

/* Index of byte b in the sorted keys[0..cnt) of a node of capacity cap, or
 * -1. With SSE2 and cap >= 16 it compares 16 keys at a time: the loads do
 * not depend on each other, so a cold node costs one miss, not one per
 * binary-search step. Reading up to 15 bytes past cnt stays inside the node
 * (the child array follows the keys). */
static inline int sorted_find(const uint8_t *keys, unsigned cnt, unsigned cap, uint8_t b)
{
#if defined(__SSE2__) && !defined(KD_NO_SIMD)
	if (cap >= 16) {
		__m128i want = _mm_set1_epi8((char)b);
		for (unsigned i = 0; i < cnt; i += 16) {
			__m128i v = _mm_loadu_si128((const __m128i *)(const void *)(keys + i));
			unsigned m = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, want));
			if (cnt - i < 16)
				m &= (1u << (cnt - i)) - 1;
			if (m)
				return (int)(i + (unsigned)__builtin_ctz(m));
		}
		return -1;
	}
#else
	(void)cap;
#endif
	unsigned i = sorted_lower(keys, cnt, b);
	return (i < cnt && keys[i] == b) ? (int)i : -1;
}

/* The child slot for byte b, or NULL. */
static uint8_t *n_find(uint8_t *n, uint8_t b)
{
	const struct nclass *c = n_cls(n);
	uint8_t *body = n_body(n);

	switch (c->kind) {
	case NK_SORTED: {
		int i = sorted_find(body, n[1], c->cap, b);
		return i >= 0 ? body + c->keys + 4 * (unsigned)i : NULL;
	}
	case NK_INDEXED: {
		unsigned s = body[b];
		return s ? body + 256 + 4 * (s - 1) : NULL;
	}
	default: {
		uint8_t *p = body + 4 * b;
		return rd32(p) ? p : NULL;
	}
	}
}

/* The next item after position pos in walk order (forward: end leaf, then
 * children ascending; reverse: children descending, then end leaf). Returns
 * its position (-1 for the end leaf, else the child byte) or POS_NONE. */
static int n_next(uint8_t *n, int pos, bool rev, uint32_t *ret_h)
{
	const struct nclass *c = n_cls(n);
	uint8_t *body = n_body(n);
	uint8_t *kids = body + c->keys;

	if (!rev) {
		if (pos < POS_END && n_has_end(n)) {
			*ret_h = rd32(n + 4);
			return POS_END;
		}
		int start = pos < 0 ? 0 : pos + 1;
		switch (c->kind) {
		case NK_SORTED: {
			unsigned i = sorted_lower(body, n[1], (unsigned)start);
			if (i < n[1]) {
				*ret_h = rd32(kids + 4 * i);
				return body[i];
			}
			break;
		}
		case NK_INDEXED:
			for (int b = start; b < 256; b++) {
				if (body[b]) {
					*ret_h = rd32(kids + 4 * (body[b] - 1));
					return b;
				}
			}
			break;
		default:
			for (int b = start; b < 256; b++) {
				uint32_t h = rd32(kids + 4 * b);
				if (h) {
					*ret_h = h;
					return b;
				}
			}
			break;
		}
		return POS_NONE;
	}
	if (pos < 0)
		return POS_NONE;
	int last = pos - 1;
	switch (c->kind) {
	case NK_SORTED: {
		unsigned i = sorted_lower(body, n[1], (unsigned)pos); /* pos = last + 1 */
		if (i > 0) {
			*ret_h = rd32(kids + 4 * (i - 1));
			return body[i - 1];
		}
		break;
	}
	case NK_INDEXED:
		for (int b = last; b >= 0; b--) {
			if (body[b]) {
				*ret_h = rd32(kids + 4 * (body[b] - 1));
				return b;
			}
		}
		break;
	default:
		for (int b = last; b >= 0; b--) {
			uint32_t h = rd32(kids + 4 * b);
			if (h) {
				*ret_h = h;
				return b;
			}
		}
		break;
	}
	if (n_has_end(n)) {
		*ret_h = rd32(n + 4);
		return POS_END;
	}
	return POS_NONE;
}

/* Children in ascending byte order; returns how many. */
static unsigned n_gather(uint8_t *n, uint8_t *bytes, uint32_t *hs)
{
	const struct nclass *c = n_cls(n);
	uint8_t *body = n_body(n);
	uint8_t *kids = body + c->keys;
	unsigned k = 0;

	switch (c->kind) {
	case NK_SORTED:
		k = n[1];
		memcpy(bytes, body, k);
		for (unsigned i = 0; i < k; i++)
			hs[i] = rd32(kids + 4 * i);
		break;
	case NK_INDEXED:
		for (unsigned b = 0; b < 256; b++) {
			if (body[b]) {
				bytes[k] = (uint8_t)b;
				hs[k++] = rd32(kids + 4 * (body[b] - 1));
			}
		}
		break;
	default:
		for (unsigned b = 0; b < 256; b++) {
			uint32_t h = rd32(kids + 4 * b);
			if (h) {
				bytes[k] = (uint8_t)b;
				hs[k++] = h;
			}
		}
		break;
	}
	assert(k == n_count(n));
	return k;
}

/* Fills the body of a node whose header is written; children ascending. */
static void n_fill(uint8_t *n, const uint8_t *bytes, const uint32_t *hs, unsigned cnt)
{
	const struct nclass *c = n_cls(n);
	uint8_t *body = n_body(n);
	uint8_t *kids = body + c->keys;

	assert(cnt <= c->cap);
	switch (c->kind) {
	case NK_SORTED:
		memset(body, 0, c->keys);
		memcpy(body, bytes, cnt);
		for (unsigned i = 0; i < cnt; i++)
			wr32(kids + 4 * i, hs[i]);
		break;
	case NK_INDEXED:
		memset(body, 0, 256);
		for (unsigned i = 0; i < cnt; i++) {
			body[bytes[i]] = (uint8_t)(i + 1);
			wr32(kids + 4 * i, hs[i]);
		}
		break;
	default:
		memset(kids, 0, 1024);
		for (unsigned i = 0; i < cnt; i++)
			wr32(kids + 4 * bytes[i], hs[i]);
		break;
	}
	n[1] = (uint8_t)cnt; /* 256 wraps to 0 */
}

/* A node of class nc with the given end leaf (0: none), children and a
 * prefix of plen bytes left for the caller to fill at n_prefix(). */
static int node_make(struct keydir *kd, unsigned nc, uint32_t end, uint32_t plen,
                     const uint8_t *bytes, const uint32_t *hs, unsigned cnt, uint32_t *ret_h)
{
	uint32_t u = node_units(nc, end != 0, plen);
	uint32_t h, got;
	int rv;

	assert(plen <= UINT16_MAX);
	if ((rv = kd_arena_alloc(&kd->arena, u, &h, &got)) != 0)
		return rv;
	uint8_t *n = at(kd, h);
	n[0] = (uint8_t)(nc | ((got - u) << NODE_SLACK_SHIFT) | (end ? NODE_END : 0));
	n[1] = 0;
	wr16(n + 2, (uint16_t)plen);
	if (end)
		wr32(n + 4, end);
	n_fill(n, bytes, hs, cnt);
	*ret_h = h;
	return 0;
}

/* Adds child b -> h; the node has room and no child b. */
static void n_add(uint8_t *n, uint8_t b, uint32_t h)
{
	const struct nclass *c = n_cls(n);
	uint8_t *body = n_body(n);
	uint8_t *kids = body + c->keys;
	unsigned cnt = n_count(n);

	assert(cnt < c->cap);
	switch (c->kind) {
	case NK_SORTED: {
		unsigned i = sorted_lower(body, cnt, b);
		memmove(body + i + 1, body + i, cnt - i);
		memmove(kids + 4 * (i + 1), kids + 4 * i, 4 * (cnt - i));
		body[i] = b;
		wr32(kids + 4 * i, h);
		break;
	}
	case NK_INDEXED:
		wr32(kids + 4 * cnt, h);
		body[b] = (uint8_t)(cnt + 1);
		break;
	default:
		wr32(kids + 4 * b, h);
		break;
	}
	n[1] = (uint8_t)(cnt + 1);
}

/* Removes child b, which exists. */
static void n_del(uint8_t *n, uint8_t b)
{
	const struct nclass *c = n_cls(n);
	uint8_t *body = n_body(n);
	uint8_t *kids = body + c->keys;
	unsigned cnt = n_count(n);

	switch (c->kind) {
	case NK_SORTED: {
		unsigned i = sorted_lower(body, cnt, b);
		assert(i < cnt && body[i] == b);
		memmove(body + i, body + i + 1, cnt - i - 1);
		memmove(kids + 4 * i, kids + 4 * (i + 1), 4 * (cnt - i - 1));
		break;
	}
	case NK_INDEXED: {
		unsigned s = body[b] - 1u, last = cnt - 1;
		if (s != last) {
			wr32(kids + 4 * s, rd32(kids + 4 * last));
			for (unsigned bb = 0; bb < 256; bb++) {
				if (body[bb] == last + 1) {
					body[bb] = (uint8_t)(s + 1);
					break;
				}
			}
		}
		body[b] = 0;
		break;
	}
	default:
		wr32(kids + 4 * b, 0);
		break;
	}
	n[1] = (uint8_t)(cnt - 1);
}

/* ---- public: lifetime and readers -------------------------------------- */

int keydir_new(struct keydir **ret)
{
	struct keydir *kd = calloc(1, sizeof *kd);

	if (kd == NULL)
		return -ENOMEM;
	*ret = kd;
	return 0;
}

void keydir_free(struct keydir *kd)
{
	if (kd == NULL)
		return;
	kd_arena_release(&kd->arena);
	free(kd);
}

size_t keydir_count(const struct keydir *kd)
{
	return kd->count;
}

size_t keydir_memory(const struct keydir *kd)
{
	return sizeof *kd + kd_arena_memory(&kd->arena);
}

/* image: u32 root, u32 0, u64 count, the arena's image */
size_t keydir_image_size(const struct keydir *kd)
{
	return 16 + kd_arena_image_size(&kd->arena);
}

void keydir_image_write(const struct keydir *kd, uint8_t *p)
{
	uint32_t head[2] = {kd->root, 0};
	uint64_t count = kd->count;

	memcpy(p, head, 8);
	memcpy(p + 8, &count, 8);
	kd_arena_image_write(&kd->arena, p + 16);
}

int keydir_image_read(const uint8_t *p, size_t len, struct keydir **ret)
{
	struct keydir *kd;
	uint32_t head[2];
	uint64_t count;
	int rv;

	if (len < 16)
		return -EINVAL;
	memcpy(head, p, 8);
	memcpy(&count, p + 8, 8);
	if ((head[0] == 0) != (count == 0))
		return -EINVAL;
	if ((rv = keydir_new(&kd)) != 0)
		return rv;
	if ((rv = kd_arena_image_read(&kd->arena, p + 16, len - 16)) != 0) {
		keydir_free(kd);
		return rv;
	}
	kd->root = head[0];
	kd->count = (size_t)count;
	*ret = kd;
	return 0;
}

int keydir_get(const struct keydir *kd, const void *key_, size_t len, struct kd_entry *ret)
{
	const uint8_t *key = key_;
	uint32_t h = kd->root;
	size_t depth = 0;

	while (h != 0) {
		uint8_t *p = at(kd, h);
		if (h & LEAF_TAG) {
			size_t slen;
			const uint8_t *s = leaf_suffix(p, &slen);
			if (slen != len - depth || (slen && memcmp(s, key + depth, slen) != 0))
				return -ENOENT;
			leaf_entry(p, ret);
			return 0;
		}
		uint32_t plen = n_plen(p);
		if (len - depth < plen || (plen && memcmp(n_prefix(p), key + depth, plen) != 0))
			return -ENOENT;
		depth += plen;
		if (depth == len) {
			if (!n_has_end(p))
				return -ENOENT;
			leaf_entry(at(kd, rd32(p + 4)), ret);
			return 0;
		}
		uint8_t *slot = n_find(p, key[depth]);
		if (slot == NULL)
			return -ENOENT;
		h = rd32(slot);
		depth++;
	}
	return -ENOENT;
}

/* ---- public: writers ---------------------------------------------------- */

/* Overwrites the entry of leaf h in *slot (reallocating when the TTL flag
 * or the version's width, and so the leaf's size, changes). */
static int leaf_replace(struct keydir *kd, uint8_t *slot, uint32_t h, const struct kd_entry *e,
                        struct kd_entry *ret_old)
{
	uint8_t *l = at(kd, h);
	uint32_t sf = entry_sf(e);
	struct kd_entry old;
	struct leaf_tail t;
	int rv;

	leaf_entry(l, &old);
	leaf_tail(l, &t);
	if ((rd32(l + 8) & SF_TTL) == (sf & SF_TTL) && t.wide == version_wide(e->version)) {
		wr32(l, e->seg);
		wr32(l + 4, e->off);
		wr32(l + 8, sf | (rd32(l + 8) & (3u << SF_SLACK_SHIFT)));
		leaf_put_version((uint8_t *)t.version, e);
	} else {
		size_t slen;
		const uint8_t *s = leaf_suffix(l, &slen);
		uint32_t nh;
		if ((rv = leaf_make(kd, e, s, slen, -1, NULL, 0, &nh)) != 0)
			return rv;
		kd_arena_free(&kd->arena, h, leaf_size_units(l));
		wr32(slot, nh);
	}
	if (ret_old)
		*ret_old = old;
	return 0;
}

/* Replaces leaf h in *slot (depth: key bytes above it) by a Node2 whose
 * prefix is the first p bytes the leaf and the new key share. */
static int put_split_leaf(struct keydir *kd, uint8_t *slot, uint32_t h, size_t p,
                          const uint8_t *key, size_t len, size_t depth, const struct kd_entry *e)
{
	uint8_t *l = at(kd, h);
	size_t slen, rest = len - depth;
	const uint8_t *s = leaf_suffix(l, &slen);
	struct kd_entry oe;
	uint32_t nl = 0, ol = 0, m;
	int rv;

	leaf_entry(l, &oe);
	if ((rv = leaf_make(kd, e, key + depth + p + (rest > p), rest > p ? rest - p - 1 : 0, -1,
	                    NULL, 0, &nl)) != 0)
		goto fail;
	if ((rv = leaf_make(kd, &oe, s + p + (slen > p), slen > p ? slen - p - 1 : 0, -1, NULL, 0,
	                    &ol)) != 0)
		goto fail;

	uint8_t bytes[2];
	uint32_t hs[2], end = 0;
	unsigned cnt = 0;
	if (slen == p) {
		end = ol;
		bytes[0] = key[depth + p];
		hs[0] = nl;
		cnt = 1;
	} else if (rest == p) {
		end = nl;
		bytes[0] = s[p];
		hs[0] = ol;
		cnt = 1;
	} else {
		bool newfirst = key[depth + p] < s[p];
		bytes[!newfirst] = key[depth + p];
		hs[!newfirst] = nl;
		bytes[newfirst] = s[p];
		hs[newfirst] = ol;
		cnt = 2;
	}
	if ((rv = node_make(kd, 0, end, (uint32_t)p, bytes, hs, cnt, &m)) != 0)
		goto fail;
	if (p)
		memcpy(n_prefix(at(kd, m)), key + depth, p);
	kd_arena_free(&kd->arena, h, leaf_size_units(l));
	wr32(slot, m);
	return 0;
fail:
	if (ol)
		kd_arena_free(&kd->arena, ol, leaf_size_units(at(kd, ol)));
	if (nl)
		kd_arena_free(&kd->arena, nl, leaf_size_units(at(kd, nl)));
	return rv;
}

/* Splits node h in *slot whose prefix matches the key for p < plen bytes. */
static int put_split_node(struct keydir *kd, uint8_t *slot, uint32_t h, size_t p,
                          const uint8_t *key, size_t len, size_t depth, const struct kd_entry *e)
{
	uint8_t *n = at(kd, h);
	uint32_t plen = n_plen(n);
	size_t rest = len - depth;
	uint8_t bytes[256];
	uint32_t hs[256];
	uint32_t nl = 0, n2 = 0, m;
	int rv;

	if ((rv = leaf_make(kd, e, key + depth + p + (rest > p), rest > p ? rest - p - 1 : 0, -1,
	                    NULL, 0, &nl)) != 0)
		goto fail;
	unsigned cnt = n_gather(n, bytes, hs);
	uint32_t nplen = plen - (uint32_t)p - 1;
	if ((rv = node_make(kd, n[0] & NODE_CLASS, n_has_end(n) ? rd32(n + 4) : 0, nplen, bytes, hs,
	                    cnt, &n2)) != 0)
		goto fail;
	uint8_t *pre = n_prefix(n);
	if (nplen)
		memcpy(n_prefix(at(kd, n2)), pre + p + 1, nplen);

	uint8_t mb[2];
	uint32_t mh[2], end = 0;
	unsigned mcnt;
	if (rest == p) {
		end = nl;
		mb[0] = pre[p];
		mh[0] = n2;
		mcnt = 1;
	} else {
		bool newfirst = key[depth + p] < pre[p];
		mb[!newfirst] = key[depth + p];
		mh[!newfirst] = nl;
		mb[newfirst] = pre[p];
		mh[newfirst] = n2;
		mcnt = 2;
	}
	if ((rv = node_make(kd, 0, end, (uint32_t)p, mb, mh, mcnt, &m)) != 0)
		goto fail;
	if (p)
		memcpy(n_prefix(at(kd, m)), pre, p);
	kd_arena_free(&kd->arena, h, node_size_units(n));
	wr32(slot, m);
	return 0;
fail:
	if (n2)
		kd_arena_free(&kd->arena, n2, node_size_units(at(kd, n2)));
	if (nl)
		kd_arena_free(&kd->arena, nl, leaf_size_units(at(kd, nl)));
	return rv;
}

/* Copies node h into a new node of class nc with end leaf `end` (0: none)
 * and, when add_h != 0, the extra child add_b -> add_h. */
static int node_rebuild(struct keydir *kd, uint32_t h, unsigned nc, uint32_t end, int add_b,
                        uint32_t add_h, uint32_t *ret_h)
{
	uint8_t *n = at(kd, h);
	uint8_t bytes[257];
	uint32_t hs[257];
	uint32_t plen = n_plen(n), nh;
	unsigned cnt = n_gather(n, bytes, hs);
	int rv;

	if (add_h) {
		unsigned i = cnt;
		while (i > 0 && bytes[i - 1] > add_b) {
			bytes[i] = bytes[i - 1];
			hs[i] = hs[i - 1];
			i--;
		}
		bytes[i] = (uint8_t)add_b;
		hs[i] = add_h;
		cnt++;
	}
	if ((rv = node_make(kd, nc, end, plen, bytes, hs, cnt, &nh)) != 0)
		return rv;
	if (plen)
		memcpy(n_prefix(at(kd, nh)), n_prefix(n), plen);
	*ret_h = nh;
	return 0;
}

int keydir_put(struct keydir *kd, const void *key_, size_t len, const struct kd_entry *e,
               struct kd_entry *ret_old, bool *ret_replaced)
{
	const uint8_t *key = key_;
	uint8_t *slot = (uint8_t *)&kd->root;
	size_t depth = 0;
	int rv;

	if (key == NULL || len == 0 || len > KD_KEY_MAX)
		return -EINVAL;
	if (e->size > SF_SIZE_MASK || (e->flags & ~(uint32_t)(KD_F_TOMBSTONE | KD_F_TTL)))
		return -EINVAL;
	for (;;) {
		uint32_t h = rd32(slot);
		if (h == 0) {
			uint32_t nl;
			if ((rv = leaf_make(kd, e, key + depth, len - depth, -1, NULL, 0, &nl)) !=
			    0)
				return rv;
			wr32(slot, nl);
			goto added;
		}
		uint8_t *p = at(kd, h);
		if (h & LEAF_TAG) {
			size_t slen, rest = len - depth;
			const uint8_t *s = leaf_suffix(p, &slen);
			size_t c = common_len(s, key + depth, slen < rest ? slen : rest);
			if (c == slen && c == rest) {
				if ((rv = leaf_replace(kd, slot, h, e, ret_old)) != 0)
					return rv;
				if (ret_replaced)
					*ret_replaced = true;
				return 0;
			}
			if ((rv = put_split_leaf(kd, slot, h, c, key, len, depth, e)) != 0)
				return rv;
			goto added;
		}
		uint32_t plen = n_plen(p);
		size_t rest = len - depth;
		size_t c = common_len(n_prefix(p), key + depth, plen < rest ? plen : rest);
		if (c < plen) {
			if ((rv = put_split_node(kd, slot, h, c, key, len, depth, e)) != 0)
				return rv;
			goto added;
		}
		depth += plen;
		if (depth == len) {
			if (n_has_end(p)) {
				if ((rv = leaf_replace(kd, p + 4, rd32(p + 4), e, ret_old)) != 0)
					return rv;
				if (ret_replaced)
					*ret_replaced = true;
				return 0;
			}
			uint32_t nl, nn;
			if ((rv = leaf_make(kd, e, NULL, 0, -1, NULL, 0, &nl)) != 0)
				return rv;
			if ((rv = node_rebuild(kd, h, p[0] & NODE_CLASS, nl, -1, 0, &nn)) != 0) {
				kd_arena_free(&kd->arena, nl, leaf_size_units(at(kd, nl)));
				return rv;
			}
			kd_arena_free(&kd->arena, h, node_size_units(p));
			wr32(slot, nn);
			goto added;
		}
		uint8_t b = key[depth];
		uint8_t *cs = n_find(p, b);
		if (cs == NULL) {
			uint32_t nl, nn;
			if ((rv = leaf_make(kd, e, key + depth + 1, len - depth - 1, -1, NULL, 0,
			                    &nl)) != 0)
				return rv;
			unsigned cnt = n_count(p);
			if (cnt < n_cls(p)->cap) {
				n_add(p, b, nl);
				goto added;
			}
			if ((rv = node_rebuild(kd, h, nc_for(cnt + 1),
			                       n_has_end(p) ? rd32(p + 4) : 0, b, nl, &nn)) != 0) {
				kd_arena_free(&kd->arena, nl, leaf_size_units(at(kd, nl)));
				return rv;
			}
			kd_arena_free(&kd->arena, h, node_size_units(p));
			wr32(slot, nn);
			goto added;
		}
		slot = cs;
		depth++;
	}
added:
	kd->count++;
	if (ret_replaced)
		*ret_replaced = false;
	return 0;
}

/* Replaces node h (in *slot, with the single item left: child byte b -> ch,
 * or its end leaf when b < 0) by that item, its key bytes extended by the
 * node's prefix. Allocates first; on failure nothing changed. */
static int node_collapse(struct keydir *kd, uint8_t *slot, uint32_t h, int b, uint32_t ch)
{
	uint8_t *n = at(kd, h);
	uint32_t plen = n_plen(n), nh;
	const uint8_t *pre = n_prefix(n);
	uint8_t *c = at(kd, ch);
	int rv;

	if (ch & LEAF_TAG) {
		struct kd_entry e;
		size_t slen;
		const uint8_t *s = leaf_suffix(c, &slen);
		leaf_entry(c, &e);
		if ((rv = leaf_make(kd, &e, pre, plen, b, s, slen, &nh)) != 0)
			return rv;
		kd_arena_free(&kd->arena, ch, leaf_size_units(c));
	} else {
		uint8_t bytes[256];
		uint32_t hs[256];
		uint32_t cplen = n_plen(c);
		unsigned cnt = n_gather(c, bytes, hs);
		assert(b >= 0);
		uint32_t nplen = plen + 1 + cplen;
		if ((rv = node_make(kd, c[0] & NODE_CLASS, n_has_end(c) ? rd32(c + 4) : 0, nplen,
		                    bytes, hs, cnt, &nh)) != 0)
			return rv;
		uint8_t *np = n_prefix(at(kd, nh));
		if (plen)
			memcpy(np, pre, plen);
		np[plen] = (uint8_t)b;
		if (cplen)
			memcpy(np + plen + 1, n_prefix(c), cplen);
		kd_arena_free(&kd->arena, ch, node_size_units(c));
	}
	kd_arena_free(&kd->arena, h, node_size_units(n));
	wr32(slot, nh);
	return 0;
}

int keydir_remove(struct keydir *kd, const void *key_, size_t len, struct kd_entry *ret_old)
{
	const uint8_t *key = key_;
	uint8_t *slot = (uint8_t *)&kd->root, *nslot = NULL;
	uint32_t nh = 0; /* node holding the leaf, in *nslot */
	int lb = -1;     /* the leaf's byte in it, -1 for its end leaf */
	size_t depth = 0;
	uint32_t h;
	int rv;

	if (key == NULL || len == 0)
		return -ENOENT;
	for (;;) {
		h = rd32(slot);
		if (h == 0)
			return -ENOENT;
		uint8_t *p = at(kd, h);
		if (h & LEAF_TAG) {
			size_t slen;
			const uint8_t *s = leaf_suffix(p, &slen);
			if (slen != len - depth || (slen && memcmp(s, key + depth, slen) != 0))
				return -ENOENT;
			break;
		}
		uint32_t plen = n_plen(p);
		if (len - depth < plen || (plen && memcmp(n_prefix(p), key + depth, plen) != 0))
			return -ENOENT;
		depth += plen;
		nslot = slot;
		nh = h;
		if (depth == len) {
			if (!n_has_end(p))
				return -ENOENT;
			slot = p + 4;
			lb = -1;
			continue; /* the end leaf's suffix is empty: it matches */
		}
		uint8_t *cs = n_find(p, key[depth]);
		if (cs == NULL)
			return -ENOENT;
		lb = key[depth];
		slot = cs;
		depth++;
	}

	uint8_t *l = at(kd, h);
	struct kd_entry old;
	leaf_entry(l, &old);
	uint32_t lunits = leaf_size_units(l);

	if (nh == 0) {
		kd->root = 0;
	} else {
		uint8_t *n = at(kd, nh);
		unsigned cnt = n_count(n);
		bool end = n_has_end(n);
		unsigned left = cnt + end - 1;
		assert(cnt + end >= 2);
		if (left == 1) {
			int ob;
			uint32_t oh;
			if (lb < 0) {
				ob = n_next(n, POS_END, false, &oh); /* the one child */
			} else if (end) {
				ob = -1;
				oh = rd32(n + 4);
			} else {
				ob = n_next(n, POS_END, false, &oh); /* the other child */
				if (ob == lb)
					ob = n_next(n, ob, false, &oh);
			}
			assert(ob != POS_NONE);
			if ((rv = node_collapse(kd, nslot, nh, ob, oh)) != 0)
				return rv;
		} else if (lb < 0) {
			uint32_t nn;
			if ((rv = node_rebuild(kd, nh, nc_for(cnt), 0, -1, 0, &nn)) != 0)
				return rv;
			kd_arena_free(&kd->arena, nh, node_size_units(n));
			wr32(nslot, nn);
		} else {
			n_del(n, (uint8_t)lb);
			unsigned nc = n[0] & NODE_CLASS;
			if (nc > 0 && cnt - 1 < nclasses[nc - 1].cap) {
				uint32_t nn;
				/* Shrinking is optional: on failure keep the bigger node. */
				if (node_rebuild(kd, nh, nc_for(cnt - 1), end ? rd32(n + 4) : 0, -1,
				                 0, &nn) == 0) {
					kd_arena_free(&kd->arena, nh, node_size_units(n));
					wr32(nslot, nn);
				}
			}
		}
	}
	kd_arena_free(&kd->arena, h, lunits);
	if (ret_old)
		*ret_old = old;
	if (--kd->count == 0) {
		kd_arena_release(&kd->arena);
		kd->root = 0;
	}
	return 0;
}

/* ---- walk ------------------------------------------------------------- */

struct wframe {
	uint32_t node;
	int32_t pos;   /* POS_START, POS_END, a child byte, or 256 (reverse start) */
	uint32_t klen; /* key bytes down to the end of the node's prefix */
};

struct walker {
	const struct keydir *kd;
	bool rev;
	keydir_visit_fn fn;
	void *arg;
	uint8_t *key;
	size_t kcap;
	struct wframe *st;
	size_t n, cap;
	uint8_t kbuf[512];
	struct wframe sbuf[48];
};

static int w_key_reserve(struct walker *w, size_t need)
{
	if (need <= w->kcap)
		return 0;
	size_t cap = w->kcap * 2;
	while (cap < need)
		cap *= 2;
	uint8_t *k = w->key == w->kbuf ? malloc(cap) : realloc(w->key, cap);
	if (k == NULL)
		return -ENOMEM;
	if (w->key == w->kbuf)
		memcpy(k, w->kbuf, w->kcap);
	w->key = k;
	w->kcap = cap;
	return 0;
}

/* Pushes node h reached after depth key bytes, its prefix appended to the
 * key, positioned before its first item in walk order. */
static int w_push(struct walker *w, uint32_t h, size_t depth)
{
	uint8_t *n = at(w->kd, h);
	uint32_t plen = n_plen(n);
	int rv;

	if ((rv = w_key_reserve(w, depth + plen + 1)) != 0)
		return rv;
	if (w->n == w->cap) {
		size_t cap = w->cap * 2;
		struct wframe *s = w->st == w->sbuf ? malloc(cap * sizeof *s)
		                                    : realloc(w->st, cap * sizeof *s);
		if (s == NULL)
			return -ENOMEM;
		if (w->st == w->sbuf)
			memcpy(s, w->sbuf, sizeof w->sbuf);
		w->st = s;
		w->cap = cap;
	}
	if (plen)
		memcpy(w->key + depth, n_prefix(n), plen);
	w->st[w->n++] = (struct wframe){h, w->rev ? 256 : POS_START, (uint32_t)(depth + plen)};
	return 0;
}

/* Calls the visitor for leaf h reached after depth key bytes. */
static int w_emit(struct walker *w, uint32_t h, size_t depth)
{
	uint8_t *l = at(w->kd, h);
	size_t slen;
	const uint8_t *s = leaf_suffix(l, &slen);
	struct kd_entry e;
	int rv;

	if ((rv = w_key_reserve(w, depth + slen)) != 0)
		return rv;
	if (slen)
		memcpy(w->key + depth, s, slen);
	leaf_entry(l, &e);
	return w->fn(w->arg, w->key, depth + slen, &e);
}

static int w_run(struct walker *w)
{
	int rv;

	while (w->n > 0) {
		struct wframe *f = &w->st[w->n - 1];
		uint32_t h;
		int pos = n_next(at(w->kd, f->node), f->pos, w->rev, &h);
		if (pos == POS_NONE) {
			w->n--;
			continue;
		}
		f->pos = pos;
		size_t d = f->klen;
		if (pos >= 0)
			w->key[d++] = (uint8_t)pos;
		rv = (h & LEAF_TAG) ? w_emit(w, h, d) : w_push(w, h, d);
		if (rv != 0)
			return rv;
	}
	return 0;
}

/* Positions the walk at `from`: pushes the path to it with each frame's
 * position set so that w_run continues exactly after (or at) from, and
 * visits a leaf met on the way when it is in range. */
static int w_seek(struct walker *w, const uint8_t *from, size_t flen, bool incl)
{
	const struct keydir *kd = w->kd;
	uint32_t h = kd->root;
	size_t d = 0;
	int rv;

	if (h == 0)
		return 0;
	for (;;) {
		uint8_t *p = at(kd, h);
		if (h & LEAF_TAG) {
			size_t slen;
			const uint8_t *s = leaf_suffix(p, &slen);
			int c = bytes_cmp(s, slen, from + d, flen - d);
			bool visit =
			        w->rev ? (c < 0 || (c == 0 && incl)) : (c > 0 || (c == 0 && incl));
			return visit ? w_emit(w, h, d) : 0;
		}
		if ((rv = w_push(w, h, d)) != 0)
			return rv;
		uint32_t plen = n_plen(p);
		size_t rest = flen - d;
		size_t m = plen < rest ? plen : rest;
		size_t i = common_len(n_prefix(p), from + d, m);
		if (i < plen) {
			/* The subtree is wholly above from (from ends inside the
			 * prefix, or its byte is lower), or wholly below. */
			bool above = i == rest || n_prefix(p)[i] > from[d + i];
			if (above == w->rev)
				w->n--; /* skip it */
			return 0;       /* else visit it all from its start */
		}
		d += plen;
		struct wframe *f = &w->st[w->n - 1];
		if (flen == d) {
			/* from is this node's end-leaf key: children are above it. */
			if (!w->rev)
				f->pos = incl ? POS_START : POS_END;
			else
				f->pos = incl ? 0 : POS_END;
			return 0;
		}
		uint8_t b = from[d];
		f->pos = b;
		uint8_t *cs = n_find(p, b);
		if (cs == NULL)
			return 0;
		h = rd32(cs);
		w->key[d++] = b;
	}
}

int keydir_walk(const struct keydir *kd, const void *from, size_t from_len, bool from_inclusive,
                bool reverse, keydir_visit_fn fn, void *arg)
{
	struct walker w;
	int rv = 0;

	w.kd = kd;
	w.rev = reverse;
	w.fn = fn;
	w.arg = arg;
	w.key = w.kbuf;
	w.kcap = sizeof w.kbuf;
	w.st = w.sbuf;
	w.n = 0;
	w.cap = sizeof w.sbuf / sizeof w.sbuf[0];

	if (from != NULL) {
		rv = w_seek(&w, from, from_len, from_inclusive);
	} else if (kd->root & LEAF_TAG) {
		rv = w_emit(&w, kd->root, 0);
	} else if (kd->root != 0) {
		rv = w_push(&w, kd->root, 0);
	}
	if (rv == 0)
		rv = w_run(&w);
	if (w.key != w.kbuf)
		free(w.key);
	if (w.st != w.sbuf)
		free(w.st);
	return rv;
}
