/*
 * hostile.h — requests kvd must answer with a documented status and survive:
 * msgpack that declares impossible sizes, wrong types in every field,
 * unknown methods and versions, deep nesting, trailing bytes; shared by the
 * tests of each transport (test_kvd.c over nng, test_stream.c over the
 * stream framing). Each case is one whole message body.
 */
#ifndef KV_TEST_HOSTILE_H
#define KV_TEST_HOSTILE_H

#include <msgpack.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mp.h"

struct hostile {
	const char *what;
	uint8_t *body; /* malloc'd */
	size_t len;
	int status; /* the reply's status */
};

static inline size_t hostile_pack(msgpack_sbuffer *sb, void (*fn)(msgpack_packer *pk))
{
	msgpack_packer pk;

	msgpack_sbuffer_init(sb);
	msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
	fn(&pk);
	return sb->size;
}

static inline void hp_v_str(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 2);
	mp_kv_str(pk, "v", "1");
	mp_kv_str(pk, "method", "Health");
}
static inline void hp_v2(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 2);
	mp_kv_uint(pk, "v", 2);
	mp_kv_str(pk, "method", "Get");
}
static inline void hp_method_int(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 2);
	mp_kv_uint(pk, "v", 1);
	mp_kv_uint(pk, "method", 7);
}
static inline void hp_unknown(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 2);
	mp_kv_uint(pk, "v", 1);
	mp_kv_str(pk, "method", "DropEverything");
}
static inline void hp_tenant_int(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 3);
	mp_kv_uint(pk, "v", 1);
	mp_kv_str(pk, "method", "Get");
	mp_kv_uint(pk, "tenant", 5);
}
static inline void hp_args_array(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 3);
	mp_kv_uint(pk, "v", 1);
	mp_kv_str(pk, "method", "Get");
	mp_pack_cstr(pk, "args");
	msgpack_pack_array(pk, 0);
}
static inline void hp_key_str(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 3);
	mp_kv_uint(pk, "v", 1);
	mp_kv_str(pk, "method", "Get");
	mp_pack_cstr(pk, "args");
	msgpack_pack_map(pk, 1);
	mp_kv_str(pk, "key", "text");
}
static inline void hp_value_int(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 3);
	mp_kv_uint(pk, "v", 1);
	mp_kv_str(pk, "method", "Put");
	mp_pack_cstr(pk, "args");
	msgpack_pack_map(pk, 2);
	mp_kv_bin(pk, "key", "k", 1);
	mp_kv_uint(pk, "value", 3);
}
static inline void hp_ifver_bool(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 3);
	mp_kv_uint(pk, "v", 1);
	mp_kv_str(pk, "method", "Put");
	mp_pack_cstr(pk, "args");
	msgpack_pack_map(pk, 3);
	mp_kv_bin(pk, "key", "k", 1);
	mp_kv_bin(pk, "value", "v", 1);
	mp_kv_bool(pk, "if_version", true);
}
static inline void hp_empty_key(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 3);
	mp_kv_uint(pk, "v", 1);
	mp_kv_str(pk, "method", "Get");
	mp_pack_cstr(pk, "args");
	msgpack_pack_map(pk, 1);
	mp_kv_bin(pk, "key", "", 0);
}
static inline void hp_batch_bad_op(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 3);
	mp_kv_uint(pk, "v", 1);
	mp_kv_str(pk, "method", "Batch");
	mp_pack_cstr(pk, "args");
	msgpack_pack_map(pk, 1);
	mp_pack_cstr(pk, "ops");
	msgpack_pack_array(pk, 1);
	msgpack_pack_map(pk, 2);
	mp_kv_str(pk, "op", "increment");
	mp_kv_bin(pk, "key", "k", 1);
}
static inline void hp_scan_badcont(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 3);
	mp_kv_uint(pk, "v", 1);
	mp_kv_str(pk, "method", "Scan");
	mp_pack_cstr(pk, "args");
	msgpack_pack_map(pk, 1);
	mp_kv_bin(pk, "continuation", "\x07", 1);
}

/* Every case, in *ret (free with hostile_free); returns how many. */
static inline size_t hostile_cases(struct hostile **ret)
{
	static const struct {
		const char *what;
		const char *body;
		size_t len;
		int status;
	} raw[] = {
	        {"array32 of 2^32-1", "\xdd\xff\xff\xff\xff", 5, 3},
	        {"map32 of 2^32-1", "\xdf\xff\xff\xff\xff", 5, 3},
	        {"str32 of 4 GB", "\xdb\xff\xff\xff\xff", 5, 3},
	        {"bin32 of 4 GB", "\xc6\xff\xff\xff\xff", 5, 3},
	        {"array16 in a map", "\x81\xa1v\xdc\xff\xff", 6, 3},
	        {"never-used byte", "\xc1", 1, 3},
	        {"empty message", "", 0, 3},
	        {"truncated map", "\x82\xa1v\x01", 4, 3},
	        {"an integer", "\x2a", 1, 3},
	        {"nested 100 deep", NULL, 0, 3},
	        {"trailing bytes", "\x82\xa1v\x01\xa6method\xa6Health\x00", 19, 3},
	        {"no version", "\x81\xa6method\xa6Health", 15, 3},
	};
	static void (*const packed[])(msgpack_packer *) = {
	        hp_v_str,      hp_v2,         hp_method_int,   hp_unknown,
	        hp_tenant_int, hp_args_array, hp_key_str,      hp_value_int,
	        hp_ifver_bool, hp_empty_key,  hp_batch_bad_op, hp_scan_badcont};
	static const char *const packed_what[] = {"v as a string",        "v 2",
	                                          "method as an integer", "unknown method",
	                                          "tenant as an integer", "args as an array",
	                                          "key as a string",      "value as an integer",
	                                          "if_version as a bool", "empty key",
	                                          "unknown batch op",     "bad continuation"};
	static const int want_packed[] = {3, 12, 3, 12, 3, 3, 3, 3, 3, 3, 3, 3};
	size_t nraw = sizeof(raw) / sizeof(raw[0]), npk = sizeof(packed) / sizeof(packed[0]);
	struct hostile *h = calloc(nraw + npk, sizeof(*h));

	if (h == NULL)
		abort();
	for (size_t i = 0; i < nraw; i++) {
		h[i].what = raw[i].what;
		h[i].status = raw[i].status;
		if (raw[i].body == NULL) { /* nested 100 deep */
			h[i].len = 101;
			h[i].body = malloc(101);
			memset(h[i].body, 0x91, 100);
			h[i].body[100] = 0x01;
		} else {
			h[i].len = raw[i].len;
			h[i].body = malloc(raw[i].len ? raw[i].len : 1);
			memcpy(h[i].body, raw[i].body, raw[i].len);
		}
	}
	for (size_t i = 0; i < npk; i++) {
		msgpack_sbuffer sb;
		struct hostile *c = &h[nraw + i];
		hostile_pack(&sb, packed[i]);
		c->what = packed_what[i];
		c->status = want_packed[i];
		c->len = sb.size;
		c->body = (uint8_t *)sb.data; /* sbuffer's data is malloc'd */
	}
	*ret = h;
	return nraw + npk;
}

static inline void hostile_free(struct hostile *h, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(h[i].body);
	free(h);
}

/* n random bytes (xorshift64 on *seed). */
static inline void hostile_random(uint64_t *seed, uint8_t *buf, size_t n)
{
	for (size_t j = 0; j < n; j++) {
		*seed ^= *seed << 13;
		*seed ^= *seed >> 7;
		*seed ^= *seed << 17;
		buf[j] = (uint8_t)*seed;
	}
}

/* The statuses random bytes may get: never a crash or a hang. */
static inline bool hostile_random_status(int st)
{
	return st == 3 || st == 12 || st == 5 || st == 0 || st == 16;
}

#endif
