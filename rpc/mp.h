/*
 * mp.h — msgpack helpers shared by the kvd server and libkvclient.
 *
 * msgpack-c's unpacker allocates arrays and maps up front from their
 * declared counts, so five bytes (dd ff ff ff ff) can ask it for gigabytes.
 * mp_check() walks the raw bytes first, without allocating, and refuses any
 * container whose declared count cannot fit in the bytes that are left, any
 * nesting deeper than a limit, and any truncated object. Only then is the
 * buffer handed to msgpack_unpack. The getters below turn a msgpack_object
 * into typed values with one error convention (0 or -EINVAL).
 */
#ifndef KV_RPC_MP_H
#define KV_RPC_MP_H

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MP_DEPTH_MAX 8 /* maps and arrays nested, the outermost one included */

/* Checks that buf starts with one well-formed msgpack object whose
 * containers all fit; *ret_end is the offset just past it. -EINVAL
 * (malformed, truncated), -E2BIG (a count larger than the rest of the buffer
 * could hold), -ELOOP (a map or array, empty or not, inside max_depth
 * others: the first problem met, reading from the start). */
int mp_check(const uint8_t *buf, size_t len, unsigned max_depth, size_t *ret_end);

/* mp_check with MP_DEPTH_MAX (and its errors), then unpack the whole buffer
 * (trailing bytes are -EINVAL) into *ret, with its memory in *zone
 * (msgpack_zone_init'ed by the caller). */
int mp_parse(const uint8_t *buf, size_t len, msgpack_zone *zone, msgpack_object *ret);

/* The value for a str key of a map; NULL when absent or nil. */
const msgpack_object *mp_map_get(const msgpack_object *map, const char *key);

int mp_uint(const msgpack_object *o, uint64_t *ret);
int mp_bool(const msgpack_object *o, bool *ret);
int mp_bin(const msgpack_object *o, const void **ret, size_t *ret_len);
int mp_str(const msgpack_object *o, const char **ret, size_t *ret_len);
/* str copied into buf (NUL-terminated); -EINVAL when it does not fit or
 * holds a NUL byte (a C string would end there and mean something else). */
int mp_str_copy(const msgpack_object *o, char *buf, size_t cap);

/* Field getters: absent (or nil) leaves *ret alone and returns 0 unless
 * required; present with the wrong type is -EINVAL. */
int mp_field_uint(const msgpack_object *map, const char *key, bool required, uint64_t *ret);
int mp_field_bool(const msgpack_object *map, const char *key, bool required, bool *ret);
int mp_field_bin(const msgpack_object *map, const char *key, bool required, const void **ret,
                 size_t *ret_len);
int mp_field_str(const msgpack_object *map, const char *key, bool required, const char **ret,
                 size_t *ret_len);

/* Packing: a str key followed by a value. */
void mp_pack_cstr(msgpack_packer *pk, const char *s);
void mp_pack_bin(msgpack_packer *pk, const void *p, size_t len);
void mp_kv_uint(msgpack_packer *pk, const char *key, uint64_t v);
void mp_kv_bool(msgpack_packer *pk, const char *key, bool v);
void mp_kv_str(msgpack_packer *pk, const char *key, const char *v);
void mp_kv_bin(msgpack_packer *pk, const char *key, const void *p, size_t len);

#endif
