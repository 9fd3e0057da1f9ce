/* mp.c — bounded msgpack parsing and small typed accessors. */
#include "mp.h"

#include <errno.h>
#include <string.h>

static uint32_t be16(const uint8_t *p)
{
	return (uint32_t)p[0] << 8 | p[1];
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/*
 * Iterative walk: `pending` counts the objects still to read at each open
 * level. A container of n elements needs at least n more bytes (a map 2n),
 * so a count larger than what is left is refused before anything is
 * allocated.
 */
int mp_check(const uint8_t *buf, size_t len, unsigned max_depth, size_t *ret_end)
{
	uint64_t pending[MP_DEPTH_MAX + 2];
	unsigned depth = 0;
	size_t off = 0;

	if (max_depth > MP_DEPTH_MAX)
		max_depth = MP_DEPTH_MAX;
	pending[0] = 1;
	while (depth > 0 || pending[0] > 0) {
		uint8_t b;
		uint64_t skip = 0, count = 0;
		int kind = 0; /* 0 scalar, 1 array, 2 map */

		if (pending[depth] == 0) {
			depth--;
			continue;
		}
		pending[depth]--;
		if (off >= len)
			return -EINVAL;
		b = buf[off++];
		if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) {
			skip = 0;
		} else if ((b & 0xe0) == 0xa0) {
			skip = b & 0x1f;
		} else if ((b & 0xf0) == 0x90) {
			kind = 1;
			count = b & 0x0f;
		} else if ((b & 0xf0) == 0x80) {
			kind = 2;
			count = b & 0x0f;
		} else {
			size_t need;
			switch (b) {
			case 0xcc: case 0xd0: skip = 1; break;
			case 0xcd: case 0xd1: skip = 2; break;
			case 0xce: case 0xd2: case 0xca: skip = 4; break;
			case 0xcf: case 0xd3: case 0xcb: skip = 8; break;
			case 0xd4: skip = 2; break;  /* fixext 1 */
			case 0xd5: skip = 3; break;
			case 0xd6: skip = 5; break;
			case 0xd7: skip = 9; break;
			case 0xd8: skip = 17; break;
			case 0xc4: case 0xd9: case 0xc7:
				if (len - off < 1)
					return -EINVAL;
				skip = buf[off] + 1u + (b == 0xc7);
				break;
			case 0xc5: case 0xda: case 0xc8:
				if (len - off < 2)
					return -EINVAL;
				skip = be16(buf + off) + 2u + (b == 0xc8);
				break;
			case 0xc6: case 0xdb: case 0xc9:
				if (len - off < 4)
					return -EINVAL;
				skip = (uint64_t)be32(buf + off) + 4u + (b == 0xc9);
				break;
			case 0xdc: case 0xde:
				need = 2;
				if (len - off < need)
					return -EINVAL;
				count = be16(buf + off);
				off += need;
				kind = b == 0xdc ? 1 : 2;
				break;
			case 0xdd: case 0xdf:
				need = 4;
				if (len - off < need)
					return -EINVAL;
				count = be32(buf + off);
				off += need;
				kind = b == 0xdd ? 1 : 2;
				break;
			default:
				return -EINVAL; /* 0xc1 is never used */
			}
		}
		if (kind == 0) {
			if (skip > len - off)
				return -EINVAL;
			off += (size_t)skip;
			continue;
		}
		if (kind == 2)
			count *= 2;
		if (count > len - off)
			return -E2BIG;
		if (depth + 1 > max_depth)
			return -ELOOP; /* an empty container counts too */
		if (count == 0)
			continue;
		pending[++depth] = count;
	}
	*ret_end = off;
	return 0;
}

int mp_parse(const uint8_t *buf, size_t len, msgpack_zone *zone, msgpack_object *ret)
{
	size_t end = 0, off = 0;
	int rv;

	if ((rv = mp_check(buf, len, MP_DEPTH_MAX, &end)) != 0)
		return rv;
	if (end != len)
		return -EINVAL; /* trailing bytes */
	if (msgpack_unpack((const char *)buf, len, &off, zone, ret) != MSGPACK_UNPACK_SUCCESS ||
	    off != len)
		return -EINVAL;
	return 0;
}

const msgpack_object *mp_map_get(const msgpack_object *map, const char *key)
{
	size_t kl = strlen(key);
	uint32_t i;

	if (map == NULL || map->type != MSGPACK_OBJECT_MAP)
		return NULL;
	for (i = 0; i < map->via.map.size; i++) {
		const msgpack_object_kv *kv = &map->via.map.ptr[i];
		if (kv->key.type == MSGPACK_OBJECT_STR && kv->key.via.str.size == kl &&
		    memcmp(kv->key.via.str.ptr, key, kl) == 0)
			return kv->val.type == MSGPACK_OBJECT_NIL ? NULL : &kv->val;
	}
	return NULL;
}

int mp_uint(const msgpack_object *o, uint64_t *ret)
{
	if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
		return -EINVAL;
	*ret = o->via.u64;
	return 0;
}

int mp_bool(const msgpack_object *o, bool *ret)
{
	if (o->type != MSGPACK_OBJECT_BOOLEAN)
		return -EINVAL;
	*ret = o->via.boolean;
	return 0;
}

int mp_bin(const msgpack_object *o, const void **ret, size_t *ret_len)
{
	if (o->type != MSGPACK_OBJECT_BIN)
		return -EINVAL;
	*ret = o->via.bin.ptr;
	*ret_len = o->via.bin.size;
	return 0;
}

int mp_str(const msgpack_object *o, const char **ret, size_t *ret_len)
{
	if (o->type != MSGPACK_OBJECT_STR)
		return -EINVAL;
	*ret = o->via.str.ptr;
	*ret_len = o->via.str.size;
	return 0;
}

int mp_str_copy(const msgpack_object *o, char *buf, size_t cap)
{
	const char *s;
	size_t n;

	if (mp_str(o, &s, &n) != 0 || n + 1 > cap || memchr(s, '\0', n) != NULL)
		return -EINVAL;
	memcpy(buf, s, n);
	buf[n] = '\0';
	return 0;
}

int mp_field_uint(const msgpack_object *map, const char *key, bool required, uint64_t *ret)
{
	const msgpack_object *o = mp_map_get(map, key);

	if (o == NULL)
		return required ? -EINVAL : 0;
	return mp_uint(o, ret);
}

int mp_field_bool(const msgpack_object *map, const char *key, bool required, bool *ret)
{
	const msgpack_object *o = mp_map_get(map, key);

	if (o == NULL)
		return required ? -EINVAL : 0;
	return mp_bool(o, ret);
}

int mp_field_bin(const msgpack_object *map, const char *key, bool required, const void **ret,
                 size_t *ret_len)
{
	const msgpack_object *o = mp_map_get(map, key);

	if (o == NULL)
		return required ? -EINVAL : 0;
	return mp_bin(o, ret, ret_len);
}

int mp_field_str(const msgpack_object *map, const char *key, bool required, const char **ret,
                 size_t *ret_len)
{
	const msgpack_object *o = mp_map_get(map, key);

	if (o == NULL)
		return required ? -EINVAL : 0;
	return mp_str(o, ret, ret_len);
}

void mp_pack_cstr(msgpack_packer *pk, const char *s)
{
	size_t n = strlen(s);

	msgpack_pack_str(pk, n);
	msgpack_pack_str_body(pk, s, n);
}

void mp_pack_bin(msgpack_packer *pk, const void *p, size_t len)
{
	msgpack_pack_bin(pk, len);
	if (len)
		msgpack_pack_bin_body(pk, p, len);
}

void mp_kv_uint(msgpack_packer *pk, const char *key, uint64_t v)
{
	mp_pack_cstr(pk, key);
	msgpack_pack_uint64(pk, v);
}

void mp_kv_bool(msgpack_packer *pk, const char *key, bool v)
{
	mp_pack_cstr(pk, key);
	if (v)
		msgpack_pack_true(pk);
	else
		msgpack_pack_false(pk);
}

void mp_kv_str(msgpack_packer *pk, const char *key, const char *v)
{
	mp_pack_cstr(pk, key);
	mp_pack_cstr(pk, v);
}

void mp_kv_bin(msgpack_packer *pk, const char *key, const void *p, size_t len)
{
	mp_pack_cstr(pk, key);
	mp_pack_bin(pk, p, len);
}
